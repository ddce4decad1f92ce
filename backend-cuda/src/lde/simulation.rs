//! A host simulation of [`super::plan::plan`]'s launches on row labels: it models what each
//! kernel's tile (or warp) loads and stores, checks that no launch lets one unit store a row
//! another unit loads or stores, and that every load finds the value its position needs.

use super::kernels::REG_MIN_STAGES;
use super::plan::{Buf, NttPass, Plan, Route, Step};

/// A row's content: `(pass, position)`, the value of `position` after NTT pass `pass` (pass 0
/// is the trace), or [`GARBAGE`].
type Label = (u32, u64);
const GARBAGE: Label = (u32::MAX, u64::MAX);
/// No unit / several units (the race bookkeeping).
const NONE: u32 = u32::MAX;
const MANY: u32 = u32::MAX - 1;

/// What one unit (an NTT task) does: loads of (buffer, row, expected
/// label) and stores of (buffer, row, label), in order, loads of a tile before its stores.
#[derive(Default)]
struct Unit {
    ops: Vec<(bool, Buf, usize, Label)>, // (is_store, buffer, row, label)
}

/// The row an element offset of column 0 lies in, for rows `m` elements apart (the pitch).
fn row(elem: u64, m: usize) -> usize {
    assert_eq!(elem % m as u64, 0, "element {elem} is not in column 0");
    (elem / m as u64) as usize
}

/// The units of one launch of NTT pass number `j` (1-based over the plan's NTT passes),
/// modelling lde.cu's tile mapping (`tile_pos`, the launch's tasks, the register kernel's
/// `replicated_in` tasks, `finish_row`, `finish_reps`, which kernel a `k` runs), with
/// `expect(pos)` the label a load of position `pos` must find.
fn ntt_units(dit: bool, src: Buf, dst: Buf, p: &NttPass, j: u32, m: usize, expect: impl Fn(u64) -> Label) -> Vec<Unit> {
    let k = p.k as u32;
    let reg = k >= REG_MIN_STAGES;
    let h_small = 1u64 << p.log_h_small;
    let reps = if p.replicated_in != 0 { h_small } else { 1 };
    (p.first_task..p.first_task + p.tasks)
        .map(|task| {
            let mut u = Unit::default();
            for rep in (0..reps).rev() {
                let tile = task * reps + rep;
                let (lo, hi) = (tile & (h_small - 1), tile >> p.log_h_small);
                let positions: Vec<u64> = (0..1u64 << k).map(|i| (((hi << k) + i) << p.log_h_small) + lo).collect();
                for &pos in &positions {
                    let r = if p.replicated_in != 0 { pos - lo } else { pos };
                    u.ops.push((false, src, row(r * p.src_stride, m), expect(pos)));
                }
                for &pos in &positions {
                    // The register kernels store no replicas, and the forward kernels never
                    // finish an inverse.
                    if p.finish_inverse != 0 && !dit {
                        let base = (pos << p.log_blowup) * p.row_pitch;
                        let n_rep = if p.replicate_out != 0 && !reg { 1 << p.log_blowup } else { 1 };
                        for r in 0..n_rep {
                            u.ops.push((true, dst, row(base + r * p.row_pitch, m), (j, pos)));
                        }
                    } else {
                        u.ops.push((true, dst, row(pos * p.dst_stride, m), (j, pos)));
                    }
                }
            }
            u
        })
        .collect()
}

/// Runs `plan` on labels and returns the first violation found.
pub(super) fn check(plan: &Plan, log_n: u32, log_b: u32, m: usize, route: Route) -> std::result::Result<(), String> {
    let (n, big_n) = (1usize << log_n, 1usize << (log_n + log_b));
    let mut lde = vec![GARBAGE; big_n];
    let mut trace = vec![GARBAGE; n];
    let initial = if route == Route::InPlace { &mut lde } else { &mut trace };
    for (p, l) in initial.iter_mut().take(n).enumerate() {
        *l = (0, p as u64);
    }
    // A pass is a run of launches with the same direction and smallest half-span.
    let key = |s: &Step| (s.dit, s.pass.log_h_small);
    let inverse_passes =
        plan.steps.iter().enumerate().filter(|&(i, s)| !s.dit && (i == 0 || key(&plan.steps[i - 1]) != key(s))).count()
            as u32;
    let mut j = 0u32;
    for (launch, step) in plan.steps.iter().enumerate() {
        if launch == 0 || key(&plan.steps[launch - 1]) != key(step) {
            j += 1;
        }
        let prev = j - 1;
        let Step { dit, src, dst, pass } = step;
        let units = if *dit && j == inverse_passes + 1 {
            // The first forward pass: position q*B + r holds the inverse's q.
            ntt_units(*dit, *src, *dst, pass, j, m, |pos| (prev, pos >> log_b))
        } else {
            ntt_units(*dit, *src, *dst, pass, j, m, |pos| (prev, pos))
        };
        // Races: a row stored by one unit is loaded or stored by no other unit.
        let mut loader = [vec![NONE; n], vec![NONE; big_n]];
        let mut storer = [vec![NONE; n], vec![NONE; big_n]];
        let idx = |b: Buf| usize::from(b == Buf::Lde);
        for (ui, u) in units.iter().enumerate() {
            for &(store, b, r, _) in &u.ops {
                let slot = if store { &mut storer[idx(b)][r] } else { &mut loader[idx(b)][r] };
                if store && *slot != NONE && *slot != ui as u32 {
                    return Err(format!("launch {launch} ({step:?}): two units store {b:?} row {r}"));
                }
                *slot = if *slot == NONE || *slot == ui as u32 { ui as u32 } else { MANY };
            }
        }
        for b in [Buf::Trace, Buf::Lde] {
            for (r, (&s, &l)) in storer[idx(b)].iter().zip(&loader[idx(b)]).enumerate() {
                if s != NONE && l != NONE && l != s {
                    return Err(format!(
                        "launch {launch} ({step:?}): {b:?} row {r} stored by one unit, loaded by another"
                    ));
                }
            }
        }
        // No races: the units' order does not matter. Loads first within each tile.
        for u in &units {
            for &(store, b, r, label) in &u.ops {
                let rows = if b == Buf::Lde { &mut lde } else { &mut trace };
                if store {
                    rows[r] = label;
                } else if rows[r] != label {
                    return Err(format!(
                        "launch {launch} ({step:?}): {b:?} row {r} holds {:?}, the load needs {label:?}",
                        rows[r]
                    ));
                }
            }
        }
    }
    for (r, &l) in lde.iter().enumerate() {
        let want = if j > inverse_passes { (j, r as u64) } else { (j, (r >> log_b) as u64) };
        if l != want {
            return Err(format!("row {r} ends with {l:?}, not {want:?}"));
        }
    }
    Ok(())
}
