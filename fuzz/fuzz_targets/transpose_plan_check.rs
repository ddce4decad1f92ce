//! The checks of the `transpose_plan` fuzz target: the in-place transpose plan
//! (`backend_api::plan`) and its fused schedule (`backend_api::plan::schedule`) for any rows,
//! cols, scratch cap and fusion limits. `backend-api/tests/fuzz_transpose_plan.rs` runs the same
//! [`run`] on seeded inputs, so `cargo test` exercises it where cargo-fuzz is absent.
//!
//! Contract checked: `TransposePlan::new(shape, cap)` either refuses with an `Error` (never a
//! panic) or yields a plan whose
//! - geometry is consistent (`full_blocks * R + tail = rows`, `tail < R`, `R` a power of two or
//!   the whole row count, the largest such `R` within the cap) and whose scratch stays within the
//!   cap;
//! - steps all stay in bounds of the matrix and of the scratch it declares;
//! - `Step::Copies` batches are independent (no destination overlaps another range of its
//!   batch), so a backend may run their copies in any order;
//! - host model (`execute_host`) is a correct transpose, checked index by index;
//! - fused schedule, under limits decoded from the input, leaves the same matrix when executed
//!   (`schedule::execute_host`), and every fused launch stays within its limits: at most
//!   `max_moves` moves, distinct destinations, no identity, whole slot-aligned ranges in bounds,
//!   and under a region limit every slot inside one region, at most `max` regions touched.
//!
//! Input decoding (every byte string is valid; missing bytes read as zero):
//! - byte 0 chooses the shape mode: mostly *bounded* shapes (`rows * cols <= MAX_ELEMS`, built
//!   with `MatrixShape::new`) whose plan is built and executed; one time in four a *raw* shape of
//!   any two `u64`s, including zero and overflowing sizes, offered to `MatrixShape::new` (the only
//!   way to build one): a refusal must be `InvalidShape`; an accepted shape's geometry is checked,
//!   and its plan built and executed only when it has at most `MAX_ELEMS` elements.
//! - byte 1 chooses the cap mode: any `u64`; a small multiple of one row block `(cols + 1) * 8`
//!   plus a few bytes (the edges of the power-of-two choice); or about the whole matrix.
//! - the bytes after the shape and cap choose the fusion limits: `max_moves` in `0..=400` (0 turns
//!   fusion off), and either no region limit or regions of `(1..=3) * 2^(0..16)` elements (not
//!   always a multiple of the run length), at most `1..=8` of them.
//!
//! `MAX_ELEMS = 2^14` keeps one execution under a millisecond, so the fuzzer explores shapes
//! rather than spending its time copying.

use backend_api::plan::schedule::{self, FuseLimits, Launch, Regions};
use backend_api::plan::{Loc, Step, TransposeGeometry, TransposePlan};
use backend_api::{ELEM_BYTES, Error, MatrixShape};

/// Largest matrix whose plan is built and executed.
const MAX_ELEMS: usize = 1 << 14;

/// Reads little-endian integers from the fuzzer's bytes; zero once they run out.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        let n = self.0.len().min(N);
        out[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        out
    }
    fn u8(&mut self) -> u8 {
        self.take::<1>()[0]
    }
    fn u16(&mut self) -> usize {
        u16::from_le_bytes(self.take()) as usize
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take())
    }
}

/// Decodes one input and checks it (panics on a violated contract).
pub fn run(data: &[u8]) {
    let mut b = Bytes(data);
    let (mode, cap_mode) = (b.u8(), b.u8());
    let shape = if mode % 4 == 3 {
        match MatrixShape::new(b.u64() as usize, b.u64() as usize) {
            Ok(shape) => shape,
            Err(Error::InvalidShape(_)) => return,
            Err(e) => panic!("a raw shape refused with the wrong error kind: {e}"),
        }
    } else {
        let cols = 1 + b.u16() % 700;
        let rows = 1 + b.u16() % (MAX_ELEMS / cols);
        MatrixShape::new(rows, cols).expect("a bounded shape is valid")
    };
    let block = shape.cols().saturating_add(1).saturating_mul(ELEM_BYTES);
    let cap = match cap_mode % 3 {
        0 => b.u64() as usize,
        1 => block.saturating_mul(b.u8() as usize).saturating_add(b.u8() as usize % 16),
        _ => block.saturating_mul(shape.rows()).saturating_mul(1 + b.u8() as usize % 2).saturating_sub(b.u8() as usize),
    };
    let max_moves = b.u16() % 401;
    let region = b.u8();
    let limits = if region % 2 == 0 {
        FuseLimits::moves(max_moves)
    } else {
        let elems = (1 + b.u8() as usize % 3) << (region / 2 % 16);
        FuseLimits { max_moves, regions: Some(Regions { elems, max: 1 + b.u8() as usize % 8 }) }
    };
    check(shape, cap, &limits);
}

fn check(shape: MatrixShape, cap: usize, limits: &FuseLimits) {
    let (rows, cols) = (shape.rows(), shape.cols());
    let geometry = TransposeGeometry::new(shape, cap);
    let min = cols.checked_add(1).and_then(|c| c.checked_mul(ELEM_BYTES));
    let g = match geometry {
        Err(Error::ScratchTooSmall { cap: c, cols: k, min: m }) => {
            assert_eq!((c, k, Some(m)), (cap, cols, min), "refusal carries the wrong values");
            assert!(cap < m, "refused a cap of {cap} B that holds one row block of {m} B");
            return;
        }
        Err(Error::InvalidShape(msg)) => {
            assert!(min.is_none(), "{shape}: a valid shape refused: {msg}");
            return;
        }
        Err(e) => panic!("{shape}, cap {cap}: unexpected error kind: {e}"),
        Ok(g) => g,
    };
    let min = min.expect("an accepted shape's row block fits usize");
    assert!(cap >= min, "{shape}: accepted a cap of {cap} B below one row block of {min} B");
    assert!(rows > 0 && cols > 0, "accepted the empty shape {shape}");
    let r = g.run_rows;
    assert!(r >= 1 && r <= rows, "{shape}: run of {r} rows");
    assert!(r.is_power_of_two() || r == rows, "{shape}: run of {r} rows is neither a power of two nor all rows");
    assert_eq!(g.full_blocks.checked_mul(r).and_then(|x| x.checked_add(g.tail_rows)), Some(rows), "{g:?}");
    assert!(g.full_blocks >= 1 && g.tail_rows < r, "{g:?}");
    assert_eq!(Some(g.scratch_elems), (cols + 1).checked_mul(r), "{g:?}");
    assert!(g.scratch_bytes() <= cap, "{g:?}: scratch {} B over the cap {cap} B", g.scratch_bytes());
    if r < rows {
        // The largest power of two within the cap: doubling the run must not fit.
        assert!(min.checked_mul(2 * r).is_none_or(|b| b > cap), "{g:?}: a run of {} rows fits {cap} B", 2 * r);
    }
    match rows.checked_mul(cols) {
        Some(n) if n <= MAX_ELEMS => {}
        _ => return,
    }
    let plan = TransposePlan::new(shape, cap).expect("the plan of an accepted geometry");
    assert_eq!(plan.geometry, g);
    check_steps(&plan);
    // The host model transposes: element r * cols + c ends at c * rows + r.
    let n = rows * cols;
    let mut buf: Vec<u32> = (0..n as u32).collect();
    let mut scratch = vec![u32::MAX; g.scratch_elems];
    plan.execute_host(&mut buf, &mut scratch);
    for c in 0..cols {
        for rr in 0..rows {
            assert_eq!(buf[c * rows + rr] as usize, rr * cols + c, "{shape}, cap {cap}: ({rr}, {c}) misplaced");
        }
    }
    // The schedule leaves the same matrix.
    let launches = schedule::schedule(&plan, limits);
    check_launches(&plan, &launches, limits);
    let mut got: Vec<u32> = (0..n as u32).collect();
    let mut scratch = vec![u32::MAX; g.scratch_elems];
    schedule::execute_host(&g, &launches, &mut got, &mut scratch);
    assert!(got == buf, "{shape}, cap {cap}, {limits:?}: the schedule's matrix differs from the plan's");
}

/// Every fused launch within its limits, over whole aligned slots in bounds.
fn check_launches(plan: &TransposePlan, launches: &[Launch], limits: &FuseLimits) {
    let g = &plan.geometry;
    let (n, s) = (g.shape.len(), g.scratch_elems);
    for (k, l) in launches.iter().enumerate() {
        let Launch::Fused { unit, moves } = l else { continue };
        assert!(!moves.is_empty() && moves.len() <= limits.max_moves, "launch {k}: {} moves", moves.len());
        let mut dsts: Vec<Loc> = moves.iter().map(|m| m.1).collect();
        dsts.sort_unstable();
        dsts.dedup();
        assert_eq!(dsts.len(), moves.len(), "launch {k}: a destination written twice");
        let mut regions = std::collections::BTreeSet::new();
        for &(src, dst) in moves {
            assert!(src != dst, "launch {k}: identity move {src:?}");
            for loc in [src, dst] {
                let limit = if matches!(loc, Loc::Buf(_)) { n } else { s };
                assert!(loc.offset() % unit == 0 && loc.offset() + unit <= limit, "launch {k}: {loc:?} + {unit}");
                if let Some(r) = limits.regions {
                    let (first, last) = (loc.offset() / r.elems, (loc.offset() + unit - 1) / r.elems);
                    assert!(first == last, "launch {k}: the slot at {loc:?} spans regions {first}..={last}");
                    regions.insert((matches!(loc, Loc::Scratch(_)), first));
                }
            }
        }
        if let Some(r) = limits.regions {
            assert!(regions.len() <= r.max, "launch {k}: {} regions", regions.len());
        }
    }
}

/// Bounds of every step, and independence of every batch.
fn check_steps(plan: &TransposePlan) {
    let g = &plan.geometry;
    let (n, s, cols) = (g.shape.len(), g.scratch_elems, g.shape.cols());
    let end = |loc: Loc, len: usize| {
        let limit = if matches!(loc, Loc::Buf(_)) { n } else { s };
        let e = loc.offset().checked_add(len).expect("step range overflows");
        assert!(e <= limit, "{loc:?} + {len} past its buffer of {limit} elements");
        e
    };
    for (k, step) in plan.steps.iter().enumerate() {
        match step {
            Step::TransposeBlock { src, dst, rows } => {
                let len = rows * cols;
                assert!(*rows >= 1, "step {k}: empty block");
                let (se, de) = (end(*src, len), end(*dst, len));
                let same = matches!((src, dst), (Loc::Buf(_), Loc::Buf(_)) | (Loc::Scratch(_), Loc::Scratch(_)));
                assert!(!same || se <= dst.offset() || de <= src.offset(), "step {k}: block overlaps itself");
            }
            Step::Copies(moves) => {
                assert!(!moves.is_empty(), "step {k}: empty batch");
                // (space, start, end, is_dst, move) for every non-empty range.
                let mut ranges: Vec<(bool, usize, usize, bool, usize)> = Vec::with_capacity(2 * moves.len());
                for (i, m) in moves.iter().enumerate().filter(|(_, m)| m.len > 0) {
                    for (loc, is_dst) in [(m.src, false), (m.dst, true)] {
                        let e = end(loc, m.len);
                        ranges.push((matches!(loc, Loc::Scratch(_)), loc.offset(), e, is_dst, i));
                    }
                }
                ranges.sort_unstable();
                // Per space, sweeping by start: a destination must start after every earlier
                // range's end; any range must start after every earlier destination's end.
                let mut space = None;
                let (mut reach, mut reach_dst) = (0usize, 0usize);
                for &(sp, start, e, is_dst, i) in &ranges {
                    if space != Some(sp) {
                        (space, reach, reach_dst) = (Some(sp), 0, 0);
                    }
                    assert!(!(is_dst && start < reach) && start >= reach_dst, "step {k}: move {i} is not independent");
                    reach = reach.max(e);
                    if is_dst {
                        reach_dst = reach_dst.max(e);
                    }
                }
            }
        }
    }
}
