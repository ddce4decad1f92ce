//! The in-place transpose: executes [`backend_api::plan::TransposePlan`] in order.
//!
//! `TransposeBlock` steps run the tiled kernel. `Copies` steps run by route:
//! - **kernel** (the default): the plan's steps are first *scheduled* on the host. Consecutive
//!   batches whose moves all have one length `u` and start at multiples of `u` (the run pass: runs
//!   to scratch, scratch to their destinations) are composed into their net effect, a parallel
//!   assignment `slot d <- original content of slot s`, minus writes to scratch slots that no later
//!   step reads. One `transpose_fused_runs` launch executes it: block `w` owns offsets
//!   `[32w, 32w + 32)` of every slot, reads all its sources into shared memory, then writes all
//!   destinations; since whole aligned slots only ever move to whole aligned slots, no two blocks
//!   touch one element. A run thus moves once instead of twice (into scratch and out again).
//!   Any other batch is one gather launch (`copy_gather`).
//! - **batched**: one `cuMemcpyBatchAsync` per batch (the seed's route);
//! - **unbatched**: one `cuMemcpyDtoDAsync` per copy.
//!
//! The scratch (`geometry.scratch_elems`, within the cap) is allocated before any byte moves, so an
//! out-of-memory leaves the matrix untouched; moves travel as kernel parameters, so nothing else is
//! allocated.

use std::sync::{Arc, Mutex};

use backend_api::DeviceBuffer as _;
use backend_api::plan::{Loc, Move, Step, TransposeGeometry, TransposePlan};
use backend_api::{ELEM_BYTES, MatrixShape, Result};
use cudarc::driver::sys;

use crate::TransposeRoute;
use crate::context::{Device, kernel_args};
use crate::copy::{Gather, LOC_B1, gather};
use crate::driver;
use crate::memory::CudaBuffer;
use crate::module::Source;

/// Net moves one fused launch carries (`FUSE_MAX` in transpose.cu).
pub(crate) const FUSE_MAX: usize = 384;
/// Shared memory a fused launch aims for: the window (elements of each slot one block owns) is the
/// largest power of two in [16, 4096] with `moves * window * 8` within it. 48 KiB lets four
/// blocks share a multiprocessor, so one block's loads overlap another's stores.
const FUSE_SHARED: usize = 48 << 10;
/// Consecutive batches considered for one fused launch.
const FUSE_MAX_STEPS: usize = 64;

/// The parameter block of `transpose_fused_runs_*`; layout identical to `FusedRuns` in transpose.cu.
#[repr(C)]
struct FusedRuns {
    n: u64,
    unit: u64,
    log_win: u64,
    src: [u64; FUSE_MAX],
    dst: [u64; FUSE_MAX],
}

/// One launch of the kernel route.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Exec {
    /// The tiled transpose of a `rows x cols` block at `src` into `cols` runs at `dst`.
    Block { src: Loc, dst: Loc, rows: usize },
    /// Independent copies (one plan batch).
    Copies(Vec<Move>),
    /// A parallel assignment of whole aligned slots of `unit` elements: `dst <- original src`.
    Fused { unit: usize, moves: Vec<(Loc, Loc)> },
}

/// [`backend_api::Backend::transpose_in_place`].
pub(crate) fn transpose_in_place(
    device: &Device,
    buf: &mut CudaBuffer,
    shape: MatrixShape,
    cap: usize,
    route: TransposeRoute,
) -> Result<()> {
    shape.check_len("transpose_in_place matrix", buf.len())?;
    let geometry = TransposeGeometry::new(shape, cap)?;
    if shape.rows() == 1 || shape.cols() == 1 {
        // One row or one column: row-major and column-major are the same bytes (an empty plan).
        return Ok(());
    }
    // First: an out-of-memory here leaves the matrix as it was.
    let scratch = CudaBuffer::alloc(buf.device(), geometry.scratch_elems)?;
    let bases = Bases { buf: buf.ptr(), scratch: scratch.ptr(), cols: shape.cols() };
    match route {
        TransposeRoute::Kernel => {
            let key = (shape.rows(), shape.cols(), geometry.scratch_elems);
            match cached_schedule(key) {
                Some(execs) => execs.iter().try_for_each(|e| bases.run(device, e))?,
                None => {
                    let plan = TransposePlan::new(shape, cap)?;
                    // Launch each piece as soon as it is scheduled: the block pass runs on the
                    // device while the host composes the run pass.
                    let mut execs = Vec::new();
                    schedule_each(&plan, FUSE_MAX, &mut |e| {
                        bases.run(device, &e)?;
                        execs.push(e);
                        Ok(())
                    })?;
                    store_schedule(key, execs);
                }
            }
        }
        TransposeRoute::Batched | TransposeRoute::Unbatched => {
            for step in &TransposePlan::new(shape, cap)?.steps {
                match step {
                    Step::TransposeBlock { src, dst, rows } => {
                        bases.run(device, &Exec::Block { src: *src, dst: *dst, rows: *rows })?
                    }
                    Step::Copies(moves) => bases.copy_engine(device, moves, route == TransposeRoute::Batched)?,
                }
            }
        }
    }
    // `scratch` is freed here, ordered after the launches that use it.
    drop(scratch);
    Ok(())
}

/// The block-pass kernel over a whole matrix, out of place (a benchmark ceiling). The caller
/// checked that `src` and `dst` (two distinct allocations) hold `shape`.
pub(crate) fn out_of_place(device: &Device, src: &CudaBuffer, dst: &mut CudaBuffer, shape: MatrixShape) -> Result<()> {
    let bases = Bases { buf: src.ptr(), scratch: dst.ptr(), cols: shape.cols() };
    bases.run(device, &Exec::Block { src: Loc::Buf(0), dst: Loc::Scratch(0), rows: shape.rows() })
}

/// The two allocations a plan addresses.
struct Bases {
    buf: sys::CUdeviceptr,
    scratch: sys::CUdeviceptr,
    cols: usize,
}

impl Bases {
    fn addr(&self, loc: Loc) -> sys::CUdeviceptr {
        match loc {
            Loc::Buf(o) => self.buf + (o * ELEM_BYTES) as u64,
            Loc::Scratch(o) => self.scratch + (o * ELEM_BYTES) as u64,
        }
    }

    /// Queues one launch of the kernel route. Plan locations are inside the matrix or the scratch
    /// (the plan's own tests check it against its host model).
    fn run(&self, device: &Device, exec: &Exec) -> Result<()> {
        match exec {
            Exec::Block { src, dst, rows } => {
                let kernel = device.kernel(Source::Transpose, "transpose_tile", 0)?;
                let (s, d, r, c) = (self.addr(*src), self.addr(*dst), *rows as u64, self.cols as u64);
                let tiles = rows.div_ceil(32) * self.cols.div_ceil(32);
                let grid = tiles.min(device.sm_count as usize * 16).max(1) as u32;
                let mut params = kernel_args![s, d, r, c];
                // SAFETY: (const u64*, u64*, u64, u64) as transpose_tile declares; the block and
                // its destination are disjoint ranges of the matrix or scratch (plan invariant).
                unsafe { device.launch(&kernel, (grid, 1, 1), (32, 8, 1), 0, &mut params) }
            }
            Exec::Copies(moves) => {
                let list: Vec<Gather> =
                    moves.iter().map(|m| Gather { src: encode(m.src), dst: encode(m.dst), len: m.len }).collect();
                // SAFETY: plan moves lie inside the matrix or the scratch, and the moves of one
                // batch are independent (plan invariant).
                unsafe { gather(device, self.buf, self.scratch, &list) }
            }
            Exec::Fused { unit, moves } => {
                let vec2 = unit % 2 == 0;
                let name = if vec2 { "transpose_fused_runs_v2" } else { "transpose_fused_runs_v1" };
                let win = fuse_window(moves.len());
                let shared = moves.len() * win * ELEM_BYTES;
                let kernel = device.kernel(Source::Transpose, name, shared)?;
                let mut block = Box::new(FusedRuns {
                    n: moves.len() as u64,
                    unit: *unit as u64,
                    log_win: win.trailing_zeros() as u64,
                    src: [0; FUSE_MAX],
                    dst: [0; FUSE_MAX],
                });
                for (k, (s, d)) in moves.iter().enumerate() {
                    block.src[k] = encode(*s);
                    block.dst[k] = encode(*d);
                }
                let windows = unit.div_ceil(win);
                let grid = windows.min(device.sm_count as usize * 16).max(1) as u32;
                let (b, s) = (self.buf, self.scratch);
                let block_ref: &FusedRuns = &block;
                let mut params = kernel_args![b, s, *block_ref];
                // SAFETY: (u64*, u64*, FusedRuns) as declared; every slot is a whole aligned
                // `unit`-element range inside the matrix or the scratch (schedule invariant), and
                // the shared memory holds `n * WIN` elements.
                unsafe { device.launch(&kernel, (grid, 1, 1), (256, 1, 1), shared as u32, &mut params) }
            }
        }
    }

    /// One plan batch on the copy engine (route (a)).
    fn copy_engine(&self, device: &Device, moves: &[Move], batched: bool) -> Result<()> {
        device.bind()?;
        let moves: Vec<&Move> = moves.iter().filter(|m| m.len > 0).collect();
        if batched {
            if !driver::has_symbol("cuMemcpyBatchAsync_v2") {
                return Err(backend_api::Error::Device {
                    backend: driver::BACKEND.into(),
                    op: "cuMemcpyBatchAsync".into(),
                    message: "the loaded CUDA driver does not export cuMemcpyBatchAsync_v2 (CUDA 13 drivers do); \
                              use the kernel or unbatched transpose route"
                        .into(),
                });
            }
            let mut dsts: Vec<_> = moves.iter().map(|m| self.addr(m.dst)).collect();
            let mut srcs: Vec<_> = moves.iter().map(|m| self.addr(m.src)).collect();
            let mut sizes: Vec<_> = moves.iter().map(|m| m.len * ELEM_BYTES).collect();
            // SAFETY: plan moves are in bounds and the batch is independent (plan invariant).
            unsafe {
                driver::memcpy_batch_async(&mut dsts, &mut srcs, &mut sizes, device.ordinal as i32, device.stream())
            }
        } else {
            for m in moves {
                // SAFETY: as above; independent copies never overlap.
                unsafe {
                    driver::memcpy_dtod_async(self.addr(m.dst), self.addr(m.src), m.len * ELEM_BYTES, device.stream())?
                };
            }
            Ok(())
        }
    }
}

/// The fused kernel's window for `moves` slots: a power of two in [16, 4096].
fn fuse_window(moves: usize) -> usize {
    let fit = FUSE_SHARED / (moves.max(1) * ELEM_BYTES);
    (1usize << fit.max(1).ilog2()).clamp(16, 4096)
}

fn encode(loc: Loc) -> u64 {
    match loc {
        Loc::Buf(o) => o as u64,
        Loc::Scratch(o) => o as u64 | LOC_B1,
    }
}

// ---------------------------------------------------------------------------------------------
// Scheduling (pure host code, tested against the plan's host model).

/// The common length `u` of a batch whose moves all have length `u > 0` and start at multiples of
/// `u` in both spaces, if it is one.
fn uniform_unit(moves: &[Move]) -> Option<usize> {
    let u = moves.first()?.len;
    let aligned = |l: Loc| l.offset().is_multiple_of(u);
    (u > 0 && moves.iter().all(|m| m.len == u && aligned(m.src) && aligned(m.dst))).then_some(u)
}

/// The scratch ranges each step reads and writes, for liveness queries.
struct ScratchUse {
    /// Per step: read ranges sorted by start, with the running maximum of their ends.
    reads: Vec<Vec<(usize, usize, usize)>>,
    /// Per step: written ranges sorted by start (disjoint within a step).
    writes: Vec<Vec<(usize, usize)>>,
}

impl ScratchUse {
    fn new(steps: &[Step], cols: usize) -> Self {
        let mut reads = Vec::with_capacity(steps.len());
        let mut writes = Vec::with_capacity(steps.len());
        for step in steps {
            let (mut r, mut w) = (Vec::new(), Vec::new());
            let mut touch = |src: Loc, dst: Loc, len: usize| {
                if let Loc::Scratch(o) = src {
                    r.push((o, o + len));
                }
                if let Loc::Scratch(o) = dst {
                    w.push((o, o + len));
                }
            };
            match step {
                Step::TransposeBlock { src, dst, rows } => touch(*src, *dst, rows * cols),
                Step::Copies(moves) => moves.iter().filter(|m| m.len > 0).for_each(|m| touch(m.src, m.dst, m.len)),
            }
            r.sort_unstable();
            w.sort_unstable();
            let mut max_end = 0;
            reads.push(
                r.into_iter()
                    .map(|(s, e)| {
                        max_end = max_end.max(e);
                        (s, e, max_end)
                    })
                    .collect(),
            );
            writes.push(w);
        }
        Self { reads, writes }
    }

    /// Whether step `j` reads any of `[s, e)`.
    fn reads_any(&self, j: usize, s: usize, e: usize) -> bool {
        let r = &self.reads[j];
        // The ranges starting before `e`; one of them overlaps iff the furthest end passes `s`.
        let k = r.partition_point(|x| x.0 < e);
        k > 0 && r[k - 1].2 > s
    }

    /// Whether step `j` writes all of `[s, e)`.
    fn writes_all(&self, j: usize, s: usize, e: usize) -> bool {
        let w = &self.writes[j];
        let k = w.partition_point(|x| x.0 <= s);
        k > 0 && w[k - 1].1 >= e
    }

    /// Whether the content of scratch `[s, e)` after step `i` is read by a later step before a
    /// later step overwrites all of it.
    fn live_after(&self, i: usize, s: usize, e: usize) -> bool {
        for j in i + 1..self.reads.len() {
            if self.reads_any(j, s, e) {
                return true;
            }
            if self.writes_all(j, s, e) {
                return false;
            }
        }
        false
    }
}

/// The symbolic content of slots after a run of uniform batches of `unit`-element slots: slot ->
/// the slot whose original content it holds. Slots are indexed densely (matrix slots first, then
/// scratch slots), with an undo log per applied batch.
struct Composer {
    unit: usize,
    buf_slots: usize,
    /// `value[s]`: the slot whose original content slot `s` holds; `u32::MAX` for itself.
    value: Vec<u32>,
    /// Slots written since the group started, in order.
    written: Vec<u32>,
    /// Per applied batch: (slot, previous value) for every slot it wrote, and `written`'s length
    /// before it.
    undo: Vec<(Vec<(u32, u32)>, usize)>,
    buf_written: usize,
}

/// The most slots a composer indexes (beyond that, batches run unfused).
const COMPOSER_MAX_SLOTS: usize = 1 << 26;

impl Composer {
    fn new(unit: usize, buf_len: usize, scratch_len: usize) -> Option<Self> {
        let buf_slots = buf_len.div_ceil(unit);
        let slots = buf_slots + scratch_len.div_ceil(unit);
        (slots <= COMPOSER_MAX_SLOTS).then(|| Self {
            unit,
            buf_slots,
            value: vec![u32::MAX; slots],
            written: Vec::new(),
            undo: Vec::new(),
            buf_written: 0,
        })
    }

    fn index(&self, loc: Loc) -> u32 {
        (match loc {
            Loc::Buf(o) => o / self.unit,
            Loc::Scratch(o) => self.buf_slots + o / self.unit,
        }) as u32
    }

    fn loc(&self, slot: u32) -> Loc {
        let s = slot as usize;
        if s < self.buf_slots { Loc::Buf(s * self.unit) } else { Loc::Scratch((s - self.buf_slots) * self.unit) }
    }

    fn value_of(&self, slot: u32) -> u32 {
        match self.value[slot as usize] {
            u32::MAX => slot,
            v => v,
        }
    }

    fn apply(&mut self, moves: &[Move]) {
        let updates: Vec<(u32, u32)> =
            moves.iter().map(|m| (self.index(m.dst), self.value_of(self.index(m.src)))).collect();
        let mut log = Vec::with_capacity(updates.len());
        let before = self.written.len();
        for (d, v) in updates {
            let prev = self.value[d as usize];
            // Written slots never hold u32::MAX again, and a batch writes each slot once.
            if prev == u32::MAX {
                self.written.push(d);
                if (d as usize) < self.buf_slots {
                    self.buf_written += 1;
                }
            }
            log.push((d, prev));
            self.value[d as usize] = v;
        }
        self.undo.push((log, before));
    }

    /// Reverts the last applied batch.
    fn undo_last(&mut self) {
        if let Some((log, before)) = self.undo.pop() {
            for &(d, prev) in log.iter().rev() {
                self.value[d as usize] = prev;
            }
            for &d in &self.written[before..] {
                if (d as usize) < self.buf_slots {
                    self.buf_written -= 1;
                }
            }
            self.written.truncate(before);
        }
    }

    /// Clears the state for the next group.
    fn reset(&mut self) {
        for &d in &self.written {
            self.value[d as usize] = u32::MAX;
        }
        self.written.clear();
        self.undo.clear();
        self.buf_written = 0;
    }

    /// The net assignment `(src, dst)` after step `last`: identities and dead scratch writes
    /// dropped.
    fn net(&self, last: usize, uses: &ScratchUse) -> Vec<(Loc, Loc)> {
        self.written
            .iter()
            .filter_map(|&d| {
                let v = self.value_of(d);
                let needed = match self.loc(d) {
                    _ if v == d => false,
                    Loc::Buf(_) => true,
                    Loc::Scratch(o) => uses.live_after(last, o, o + self.unit),
                };
                needed.then(|| (self.loc(v), self.loc(d)))
            })
            .collect()
    }
}

/// One composer per slot length met so far (in practice one: the run length).
#[derive(Default)]
struct Composers(Vec<(usize, Option<Composer>)>);

impl Composers {
    fn get_or_insert(&mut self, unit: usize, plan: &TransposePlan) -> Option<&mut Composer> {
        let pos = match self.0.iter().position(|c| c.0 == unit) {
            Some(p) => p,
            None => {
                let len = plan.geometry.shape.len();
                self.0.push((unit, Composer::new(unit, len, plan.geometry.scratch_elems)));
                self.0.len() - 1
            }
        };
        self.0[pos].1.as_mut()
    }
}

/// A schedule depends only on the shape and the scratch (the plan's inputs): the last few are kept
/// (host memory), so repeated transposes of one shape, as in every commit of a table, skip the
/// host-side composition.
type ScheduleKey = (usize, usize, usize);
static SCHEDULES: Mutex<Vec<(ScheduleKey, Arc<Vec<Exec>>)>> = Mutex::new(Vec::new());
const SCHEDULES_KEPT: usize = 8;

fn cached_schedule(key: ScheduleKey) -> Option<Arc<Vec<Exec>>> {
    let cache = SCHEDULES.lock().unwrap_or_else(|p| p.into_inner());
    cache.iter().find(|e| e.0 == key).map(|e| Arc::clone(&e.1))
}

fn store_schedule(key: ScheduleKey, execs: Vec<Exec>) {
    let mut cache = SCHEDULES.lock().unwrap_or_else(|p| p.into_inner());
    if cache.iter().all(|e| e.0 != key) {
        if cache.len() >= SCHEDULES_KEPT {
            cache.remove(0);
        }
        cache.push((key, Arc::new(execs)));
    }
}

/// Turns a plan into launches: blocks as they are, runs of uniform batches fused while their net
/// effect fits `fuse_max` moves, every other batch as one gather.
#[cfg(test)]
pub(crate) fn schedule(plan: &TransposePlan, fuse_max: usize) -> Vec<Exec> {
    let mut out = Vec::new();
    schedule_each(plan, fuse_max, &mut |e| {
        out.push(e);
        Ok(())
    })
    .expect("collecting cannot fail");
    out
}

/// [`schedule`], handing each launch to `emit` as soon as it is known.
pub(crate) fn schedule_each(
    plan: &TransposePlan,
    fuse_max: usize,
    emit: &mut dyn FnMut(Exec) -> Result<()>,
) -> Result<()> {
    let steps = &plan.steps;
    let uses = ScratchUse::new(steps, plan.geometry.shape.cols());
    let mut composers = Composers::default();
    let mut i = 0;
    while i < steps.len() {
        let unit = match &steps[i] {
            Step::TransposeBlock { src, dst, rows } => {
                emit(Exec::Block { src: *src, dst: *dst, rows: *rows })?;
                i += 1;
                continue;
            }
            Step::Copies(moves) => match uniform_unit(moves) {
                Some(u) => u,
                None => {
                    emit(Exec::Copies(moves.clone()))?;
                    i += 1;
                    continue;
                }
            },
        };
        let Some(composer) = composers.get_or_insert(unit, plan) else {
            if let Step::Copies(moves) = &steps[i] {
                emit(Exec::Copies(moves.clone()))?;
            }
            i += 1;
            continue;
        };
        // Apply uniform batches while the matrix slots written fit, then back off to the longest
        // prefix whose net effect fits.
        let mut j = i;
        while j < steps.len() && j < i + FUSE_MAX_STEPS {
            let Step::Copies(moves) = &steps[j] else { break };
            if uniform_unit(moves) != Some(unit) {
                break;
            }
            composer.apply(moves);
            j += 1;
            if composer.buf_written > fuse_max {
                break;
            }
        }
        let mut fused = None;
        while j > i {
            if composer.buf_written <= fuse_max {
                let net = composer.net(j - 1, &uses);
                if net.len() <= fuse_max {
                    fused = Some(net);
                    break;
                }
            }
            composer.undo_last();
            j -= 1;
        }
        composer.reset();
        match fused {
            Some(net) => {
                if !net.is_empty() {
                    emit(Exec::Fused { unit, moves: net })?;
                }
                i = j;
            }
            None => {
                if let Step::Copies(moves) = &steps[i] {
                    emit(Exec::Copies(moves.clone()))?;
                }
                i += 1;
            }
        }
    }
    Ok(())
}

/// Executes a schedule on host memory, launch by launch as the device does (for tests).
#[cfg(test)]
pub(crate) fn execute_host(execs: &[Exec], cols: usize, buf: &mut [u64], scratch: &mut [u64]) {
    fn slice<'a>(buf: &'a mut [u64], scratch: &'a mut [u64], loc: Loc, len: usize) -> &'a mut [u64] {
        match loc {
            Loc::Buf(o) => &mut buf[o..o + len],
            Loc::Scratch(o) => &mut scratch[o..o + len],
        }
    }
    for exec in execs {
        match exec {
            Exec::Block { src, dst, rows } => {
                let n = rows * cols;
                let v = slice(buf, scratch, *src, n).to_vec();
                let d = slice(buf, scratch, *dst, n);
                for r in 0..*rows {
                    for c in 0..cols {
                        d[c * rows + r] = v[r * cols + c];
                    }
                }
            }
            Exec::Copies(moves) => {
                let vals: Vec<Vec<u64>> = moves.iter().map(|m| slice(buf, scratch, m.src, m.len).to_vec()).collect();
                for (m, v) in moves.iter().zip(vals) {
                    slice(buf, scratch, m.dst, m.len).copy_from_slice(&v);
                }
            }
            Exec::Fused { unit, moves } => {
                // Window by window, as the kernel's blocks do (any order is exact).
                let win = fuse_window(moves.len());
                for off in (0..*unit).step_by(win).rev() {
                    let len = win.min(unit - off);
                    let vals: Vec<Vec<u64>> =
                        moves.iter().map(|(s, _)| slice(buf, scratch, s.offset_by(off), len).to_vec()).collect();
                    for ((_, d), v) in moves.iter().zip(vals) {
                        slice(buf, scratch, d.offset_by(off), len).copy_from_slice(&v);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs plan and schedule on the same random matrix; the matrix must end identical (scratch
    /// may differ only where nothing reads it again).
    fn check(rows: usize, cols: usize, cap: usize, fuse_max: usize) -> (usize, usize) {
        let shape = MatrixShape::new(rows, cols).unwrap();
        let plan = TransposePlan::new(shape, cap).unwrap();
        let mut s = 0x9e37_79b9_7f4a_7c15_u64 ^ (rows * 31 + cols) as u64;
        let host: Vec<u64> = (0..rows * cols)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                s
            })
            .collect();
        let mut expected = host.clone();
        let mut scratch = vec![0u64; plan.geometry.scratch_elems];
        plan.execute_host(&mut expected, &mut scratch);
        // The plan's own model against the definition, so this test cannot pass on a broken plan.
        for r in 0..rows {
            for c in 0..cols {
                assert_eq!(expected[c * rows + r], host[r * cols + c]);
            }
        }
        let execs = schedule(&plan, fuse_max);
        let mut got = host.clone();
        let mut scratch = vec![u64::MAX; plan.geometry.scratch_elems];
        execute_host(&execs, cols, &mut got, &mut scratch);
        assert_eq!(got, expected, "{rows} x {cols} under a {cap} B cap, fuse_max {fuse_max}");
        for e in &execs {
            if let Exec::Fused { moves, .. } = e {
                assert!(moves.len() <= fuse_max);
            }
        }
        let fused = execs.iter().filter(|e| matches!(e, Exec::Fused { .. })).count();
        (fused, execs.len())
    }

    #[test]
    fn schedule_matches_the_plan_on_many_shapes() {
        let mut fused_total = 0;
        for (rows, cols) in [(2, 2), (5, 3), (16, 4), (77, 6), (64, 5), (100, 7), (256, 3), (128, 17), (300, 11)] {
            for k in [1, 2, 3, 4, 7, 16, 1 << 20] {
                let cap = (cols + 1) * 8 * k;
                for fuse_max in [1, 2, 8, FUSE_MAX] {
                    fused_total += check(rows, cols, cap, fuse_max).0;
                }
            }
        }
        assert!(fused_total > 100, "fusion never happened ({fused_total})");
    }

    #[test]
    fn production_like_shape_fuses_every_run_pair() {
        // 2^12 x 316 under a cap of 32 rows: 128 blocks of 32-row runs, 40,448 runs, the same
        // structure as 2^22 x 316 under 256 MiB (64 blocks of 2^16 rows) with more cycles.
        let (rows, cols) = (1 << 12, 316);
        let cap = (cols + 1) * 8 * 32;
        let plan = TransposePlan::new(MatrixShape::new(rows, cols).unwrap(), cap).unwrap();
        let (fused, launches) = check(rows, cols, cap, FUSE_MAX);
        let blocks = plan.steps.iter().filter(|s| matches!(s, Step::TransposeBlock { .. })).count();
        // Every pair of run batches became one launch (the block pass's last copy is one more).
        assert!(launches <= blocks + plan.batches() / 2 + 1, "{launches} launches, {blocks} blocks, {fused} fused");
        assert!(fused >= plan.batches() / 2, "{fused} fused launches for {} batches", plan.batches());
    }

    #[test]
    fn uniform_unit_needs_equal_aligned_moves() {
        let m = |s: usize, d: usize, len: usize| Move { src: Loc::Buf(s), dst: Loc::Scratch(d), len };
        assert_eq!(uniform_unit(&[m(4, 0, 4), m(12, 4, 4)]), Some(4));
        assert_eq!(uniform_unit(&[m(4, 0, 4), m(12, 4, 2)]), None);
        assert_eq!(uniform_unit(&[m(2, 0, 4)]), None);
        assert_eq!(uniform_unit(&[m(0, 0, 0)]), None);
        assert_eq!(uniform_unit(&[]), None);
    }
}

#[cfg(test)]
mod timing {
    /// Host cost of planning and scheduling the production transpose (`--ignored --nocapture`).
    #[test]
    #[ignore = "timing, not a check"]
    fn schedule_time_production() {
        use backend_api::MatrixShape;
        use backend_api::plan::TransposePlan;
        let t = std::time::Instant::now();
        let plan = TransposePlan::new(MatrixShape::new(1 << 22, 316).unwrap(), 256 << 20).unwrap();
        let t1 = t.elapsed();
        let execs = super::schedule(&plan, super::FUSE_MAX);
        let t2 = t.elapsed();
        println!("plan {t1:?}, schedule {:?}: {} steps -> {} launches", t2 - t1, plan.steps.len(), execs.len());
    }
}
