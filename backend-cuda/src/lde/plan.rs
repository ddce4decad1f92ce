//! The launches of one coset LDE, in stream order ([`plan`]): the stage split into passes, which
//! buffer each pass reads and writes, and the ranges of tiles the last inverse pass runs as in
//! place. Everything here is host arithmetic; the unit tests simulate the list row by row
//! (`simulation`).
//!
//! # The last inverse pass, in place, without races
//!
//! A pass's tiles run in any order, and a tile loads all its rows before it stores any (the
//! register kernel's first forward pass runs the `B` tiles sharing rows `B*p` in one block, the
//! tile that overwrites them last), so a launch is race-free when no row one tile stores is a row
//! another tile loads or stores; launches run one after another on the stream.
//!
//! The last inverse pass stores position `p` to row `pB` (and its `B - 1` replicas when some pass
//! is a shared-memory pass, which needs them; a register pass reads row `pB` for all `B`). Its
//! tiles hold `2^k` consecutive rows each, and it reads the rows `[0, n)` it writes over, so it
//! runs as several launches over ranges of its `T = n / 2^k` tiles, from the top down
//! (backend-api's [`lde_finish_ranges`]): `[max(1, t / B), t)` for `t = T, ...` while `t > 1`, then tile 0 alone.
//! A range `[lo, hi)` loads rows `[lo 2^k, hi 2^k)` and stores rows `[lo 2^k B, hi 2^k B)`.
//! Since `lo B >= hi`, every row it stores lies at or above every row it or a later range
//! loads, and an earlier range has loaded it already (or it is `>= n`, unread). Tile 0 loads
//! rows `[0, 2^k)` before it stores `[0, 2^k B)`. At 2^21 rows, `B = 2` and `k = 10` that is 12
//! launches, the last few too small to fill the device; an earlier version stored the rows below
//! `n / B` in place and moved them in `log2(n / B)` copy launches afterwards, which cost 1.45 ms
//! on the H200 (BENCHMARKS.md).

use std::ops::Range;

use backend_api::field::lde_finish_ranges;

use super::kernels::REG_MIN_STAGES;
use crate::launch::KernelParam;

/// The parameter of the NTT kernels; layout identical to `NttPass` in lde.cu.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(super) struct NttPass {
    pub(super) src: u64,
    pub(super) dst: u64,
    pub(super) tw: u64,
    pub(super) coset: u64,
    pub(super) src_stride: u64,
    pub(super) dst_stride: u64,
    pub(super) cols: u64,
    pub(super) log_size: u64,
    pub(super) log_h_small: u64,
    pub(super) k: u64,
    pub(super) canon_in: u64,
    pub(super) finish_inverse: u64,
    pub(super) log_blowup: u64,
    pub(super) replicate_out: u64,
    pub(super) replicated_in: u64,
    pub(super) canon_out: u64,
    pub(super) first_task: u64,
    pub(super) tasks: u64,
    pub(super) row_pitch: u64,
}

// SAFETY: `#[repr(C)]` u64 fields, the layout of lde.cu's `NttPass` (src, dst, tw, coset,
// src_stride, dst_stride, cols, log_size, log_h_small, k, canon_in, finish_inverse, log_blowup,
// replicate_out, replicated_in, canon_out, first_task, tasks, row_pitch); no padding.
unsafe impl KernelParam for NttPass {}
const _: () = assert!(std::mem::size_of::<NttPass>() == 19 * 8, "NttPass is nineteen u64, unpadded");

/// Splits `stages` into passes of at most `max` stages, as even as possible (larger ones first);
/// zero stages is one empty pass.
pub(super) fn split(stages: u32, max: u32) -> Vec<u32> {
    if stages == 0 {
        return vec![0];
    }
    let passes = stages.div_ceil(max);
    (0..passes).map(|i| stages / passes + u32::from(i < stages % passes)).collect()
}

/// Which buffer an NTT pass reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Buf {
    /// A separate `n x m` trace ([`Route::FromTrace`], [`Route::Owned`]).
    Trace,
    /// The `N x m` LDE buffer.
    Lde,
}

/// Where the LDE starts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Route {
    /// The trace in rows `[0, n)` of the LDE buffer (module doc).
    InPlace,
    /// A separate `n x m` trace buffer, which only the first inverse pass reads (it stores rows
    /// `[0, n)` of the LDE buffer, as the in-place route's first pass does): no copy of the trace
    /// into the LDE buffer first ([`backend_api::Backend::coset_lde`]).
    FromTrace,
    /// A separate `n x m` trace buffer given up by its owner: the inverse passes run in place in
    /// it, and the last one stores rows `B*p` of the LDE buffer, in one launch
    /// ([`backend_api::Backend::coset_lde_owned`]).
    Owned,
}

/// One launch of the LDE: its kernel parameters with the device addresses left at 0
/// ([`super::queue`] fills them in). An NTT pass is one launch, or, for the last inverse pass in place,
/// several launches over ranges of its tiles (module doc).
#[derive(Clone, Copy, Debug)]
pub(super) struct Step {
    /// Forward (`true`) or inverse.
    pub(super) dit: bool,
    /// The buffer the launch reads.
    pub(super) src: Buf,
    /// The buffer the launch writes.
    pub(super) dst: Buf,
    pub(super) pass: NttPass,
}

/// The launches of one LDE, in stream order.
#[derive(Debug)]
pub(super) struct Plan {
    pub(super) steps: Vec<Step>,
}

/// The launches of an LDE of `2^log_n` rows of `m` columns at blowup `2^log_b`, NTT passes of at
/// most `max_k` stages, in a buffer whose rows are `pitch` elements apart (`pitch >= m`: a range
/// of `m` columns of a wider matrix, the upload overlap's column groups; the trace of the routes
/// that have one has the same pitch): every launch [`super::queue`] makes comes from here, and the unit
/// tests simulate exactly this list.
pub(super) fn plan(log_n: u32, log_b: u32, m: usize, pitch: usize, max_k: u32, route: Route) -> Plan {
    let inverse = split(log_n, max_k);
    // The forward NTT of size N runs the same stage split (its first log B stages are the
    // inverse's replication), without the empty pass of a 1-row trace. Both run the larger
    // passes first. (The inverse's smaller pass first, so that its pass of scattered rows has the
    // smaller blocks as the forward's has, measured no faster on the H200: the git history of BENCHMARKS.md, "The
    // inverse's passes smaller first".)
    let forward: Vec<u32> = inverse.iter().copied().filter(|&k| k > 0).collect();
    // The register kernel may skip the B - 1 replicas of each inverse output row (the first
    // forward pass, a register pass too, then reads the shared row for all of them); a
    // shared-memory pass needs them stored. Mixed splits keep the replicas.
    let all_reg = inverse.iter().chain(&forward).all(|&k| k >= REG_MIN_STAGES);
    let replicate = !all_reg;
    let stride = pitch as u64;
    let mut steps = Vec::with_capacity(inverse.len() + forward.len() + log_n as usize + 1);
    let ntt = |log_size: u32, log_h_small: u32, k: u32| NttPass {
        src: 0,
        dst: 0,
        tw: 0,
        coset: 0,
        src_stride: stride,
        dst_stride: stride,
        cols: m as u64,
        log_size: log_size as u64,
        log_h_small: log_h_small as u64,
        k: k as u64,
        canon_in: u64::from(k < REG_MIN_STAGES),
        finish_inverse: 0,
        log_blowup: log_b as u64,
        replicate_out: 0,
        replicated_in: 0,
        canon_out: 0,
        first_task: 0,
        tasks: (1u64 << log_size) >> k,
        row_pitch: stride,
    };

    // Inverse NTT, natural order in, bit-reversed out; the last pass scales and stores position p
    // to row B*p (module doc).
    let mut hi = log_n;
    for (idx, &k) in inverse.iter().enumerate() {
        let first = idx == 0;
        let last = idx + 1 == inverse.len();
        hi -= k;
        let src = match route {
            Route::Owned => Buf::Trace,
            Route::FromTrace if first => Buf::Trace,
            _ => Buf::Lde,
        };
        let dst = if route == Route::Owned && !last { Buf::Trace } else { Buf::Lde };
        let pass = NttPass {
            canon_in: u64::from(first || k < REG_MIN_STAGES),
            finish_inverse: u64::from(last),
            replicate_out: u64::from(replicate),
            canon_out: u64::from(last && forward.is_empty()),
            ..ntt(log_n, hi, k)
        };
        // The last pass (hi == 0: tiles of 2^k consecutive rows) stores rows B*p >= p: in the
        // buffer it reads, it runs as ranges of tiles from the top down.
        let ranges = if last && src == Buf::Lde && log_b > 0 {
            lde_finish_ranges(pass.tasks, log_b)
        } else {
            vec![Range { start: 0, end: pass.tasks }]
        };
        for r in ranges {
            let pass = NttPass { first_task: r.start, tasks: r.end - r.start, ..pass };
            steps.push(Step { dit: false, src, dst, pass });
        }
    }

    // Forward NTT of size N, half-spans B .. N/2, bit-reversed in, natural out, in place.
    let mut lo = log_b;
    for (idx, &k) in forward.iter().enumerate() {
        let mut pass = ntt(log_n + log_b, lo, k);
        if all_reg && idx == 0 {
            // One task is the B tiles sharing rows B*p.
            pass.replicated_in = 1;
            pass.tasks >>= log_b;
        }
        pass.canon_out = u64::from(idx + 1 == forward.len());
        lo += k;
        steps.push(Step { dit: true, src: Buf::Lde, dst: Buf::Lde, pass });
    }
    Plan { steps }
}

#[cfg(test)]
mod tests {
    use super::super::kernels::MAX_NTT_STAGES;
    use super::super::simulation;
    use super::*;

    /// The plan's launches, simulated row by row (module doc, "The last inverse pass, in place"):
    /// race-free, and every row ends with the value of its position, for every trace height up to
    /// 2^12, blowups 1 to 8, every stage split (1 stage per pass, which keeps the replicas, up to
    /// 11, all register passes, which skip them) and both routes; for all the columns of a matrix
    /// and for a range of 2 columns of a 5-column one (the upload overlap's groups: every launch
    /// covers the range's width, with the whole matrix's rows).
    #[test]
    fn the_planned_launches_are_race_free_and_move_every_row_to_its_place() {
        for log_n in 0..=12 {
            for log_b in 0..=3 {
                for max_k in 1..=MAX_NTT_STAGES {
                    for (route, m, pitch) in
                        [(Route::InPlace, 3, 3), (Route::FromTrace, 3, 3), (Route::Owned, 3, 3), (Route::InPlace, 2, 5)]
                    {
                        let plan = plan(log_n, log_b, m, pitch, max_k, route);
                        let what = format!(
                            "n = 2^{log_n}, B = 2^{log_b}, {max_k} stages/pass, {route:?}, {m} of {pitch} cols"
                        );
                        simulation::check(&plan, log_n, log_b, pitch, route).unwrap_or_else(|e| panic!("{what}: {e}"));
                        for step in &plan.steps {
                            let p = &step.pass;
                            assert_eq!((p.cols, p.row_pitch), (m as u64, pitch as u64), "{what}: {step:?}");
                        }
                        // One launch per pass, but for the last inverse pass in place with B > 1,
                        // which takes one launch per range of tiles.
                        let inverse = split(log_n, max_k);
                        let passes = inverse.len() + inverse.iter().filter(|&&k| k > 0).count();
                        let finish = plan.steps.iter().filter(|s| s.pass.finish_inverse != 0).count();
                        let reads_lde = route == Route::InPlace || (route == Route::FromTrace && inverse.len() > 1);
                        let tiles = 1u64 << (log_n - inverse.last().unwrap());
                        let want = if reads_lde && log_b > 0 { lde_finish_ranges(tiles, log_b).len() } else { 1 };
                        assert_eq!(finish, want, "{what}: launches of the last inverse pass");
                        assert_eq!(plan.steps.len(), passes - 1 + finish, "{what}: launches");
                    }
                }
            }
        }
    }

    /// The simulation catches what it must: the last inverse pass's ranges run bottom up, or as
    /// one launch, a range left out, and skipped replicas.
    #[test]
    fn the_simulation_rejects_broken_plans() {
        let (log_n, log_b, m) = (6, 1, 2);
        let broken = |f: &dyn Fn(&mut Plan), max_k: u32| {
            let mut p = plan(log_n, log_b, m, m, max_k, Route::InPlace);
            f(&mut p);
            simulation::check(&p, log_n, log_b, m, Route::InPlace)
        };
        assert!(broken(&|_| {}, 2).is_ok());
        assert!(broken(&|_| {}, 11).is_ok());
        assert!(broken(&|_| {}, 5).is_ok());
        let finish = |p: &mut Plan| -> Vec<usize> {
            p.steps.iter().enumerate().filter(|(_, s)| s.pass.finish_inverse != 0).map(|(i, _)| i).collect()
        };
        for max_k in [2, 5] {
            // The ranges bottom up: a range's stores overwrite rows a later one still loads.
            let e = broken(
                &|p| {
                    let f = finish(p);
                    assert!(f.len() >= 3, "{f:?}");
                    p.steps[f[0]..=f[f.len() - 1]].reverse();
                },
                max_k,
            )
            .unwrap_err();
            assert!(e.contains("holds"), "max_k {max_k}: {e}");
            // All the ranges as one launch: its tiles store rows other tiles load.
            let e = broken(
                &|p| {
                    let f = finish(p);
                    let tiles: u64 = f.iter().map(|&i| p.steps[i].pass.tasks).sum();
                    let first = f[0];
                    p.steps[first].pass.first_task = 0;
                    p.steps[first].pass.tasks = tiles;
                    p.steps.drain(first + 1..=f[f.len() - 1]);
                },
                max_k,
            )
            .unwrap_err();
            assert!(e.contains("stored by one unit, loaded by another"), "max_k {max_k}: {e}");
            // A range left out: its rows never get their values.
            let e = broken(
                &|p| {
                    let f = finish(p);
                    p.steps.remove(f[1]);
                },
                max_k,
            )
            .unwrap_err();
            assert!(e.contains("holds") || e.contains("ends with"), "max_k {max_k}: {e}");
        }
        // No replicas where a shared-memory pass needs them.
        let e = broken(
            &|p| {
                for s in &mut p.steps {
                    s.pass.replicate_out = 0;
                }
            },
            2,
        )
        .unwrap_err();
        assert!(e.contains("row 1 holds"), "{e}");
    }

    #[test]
    fn split_is_even_and_covers_every_stage() {
        assert_eq!(split(0, 11), vec![0]);
        assert_eq!(split(21, 11), vec![11, 10]);
        assert_eq!(split(22, 11), vec![11, 11]);
        assert_eq!(split(23, 11), vec![8, 8, 7]);
        assert_eq!(split(5, 1), vec![1; 5]);
        for s in 0..=32 {
            for m in 1..=11 {
                let p = split(s, m);
                assert_eq!(p.iter().sum::<u32>(), s);
                assert!(p.iter().all(|&k| k <= m));
            }
        }
    }
}
