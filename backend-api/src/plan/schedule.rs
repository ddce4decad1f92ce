//! The fused schedule of a [`TransposePlan`]: the launches a device executes, with the run pass's
//! two moves per run (into scratch, out to the destination) composed into one.
//!
//! - **What fuses.** Consecutive batches whose moves all have one length `u` and start at
//!   multiples of `u` (the run pass: runs to scratch, scratch to their destinations) are composed
//!   into their net effect, a parallel assignment `slot d <- original content of slot s` over
//!   whole aligned slots of `u` elements, minus identities and writes to scratch slots that no
//!   later step reads. A device runs it as one launch that reads every source before writing any
//!   destination (per element offset of the slots, so its parallel blocks never touch one
//!   element twice): each run moves once instead of twice.
//! - **Limits.** [`FuseLimits`] bounds a fused launch: at most `max_moves` net moves (a kernel's
//!   parameter block or table), and, for a backend that binds memory in segments (wgpu), slots
//!   that each lie inside one aligned region, at most [`Regions::max`] of them touched.
//!   The composer applies batches while the matrix slots written fit, then backs off to the
//!   longest prefix whose net effect fits; a batch that fits nothing runs as it is.
//! - **Everything else** is passed through: a block transpose stays one [`Launch::Block`], any
//!   other batch one [`Launch::Copies`].
//! - **Exact by construction, checked on the host.** [`execute_host`] runs a schedule through
//!   [`TransposePlan::execute_host`] (whose `Copies` step reads every source before writing, which
//!   is a parallel assignment's meaning), and the tests and the `transpose_plan` fuzz target
//!   compare it with the plan's own execution.
//! - **Cost.** The composer indexes slots densely (at most [`COMPOSER_MAX_SLOTS`]; beyond that
//!   batches run unfused). At 2^22 x 316 under 256 MiB the schedule takes tens of milliseconds on
//!   the host, so backends keep recent schedules in a [`ScheduleCache`].

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use super::{Loc, Move, Step, TransposeGeometry, TransposePlan};
use crate::error::Result;

/// Batches of one run considered for one fused launch.
pub const FUSE_MAX_STEPS: usize = 64;

/// The most slots a composer indexes (matrix and scratch together); beyond that, batches run
/// unfused.
pub const COMPOSER_MAX_SLOTS: usize = 1 << 26;

/// One launch of a scheduled transpose, in execution order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Launch {
    /// The out-of-place transpose of a `rows x cols` row-major block at `src` into `cols` runs at
    /// `dst` (a plan's [`Step::TransposeBlock`]).
    Block {
        /// The row-major block.
        src: Loc,
        /// The column-major destination.
        dst: Loc,
        /// Rows in the block.
        rows: usize,
    },
    /// Independent copies: one plan batch, unchanged.
    Copies(Vec<Move>),
    /// A parallel assignment of whole slots of `unit` elements, each starting at a multiple of
    /// `unit`: for every `(src, dst)`, slot `dst` receives what slot `src` held before the
    /// launch. Destinations are distinct; a source may also be a destination.
    Fused {
        /// Elements per slot.
        unit: usize,
        /// `(src, dst)` slot starts.
        moves: Vec<(Loc, Loc)>,
    },
}

impl Launch {
    /// The launch as a plan step with the same effect under [`TransposePlan::execute_host`]
    /// (which reads every source of a `Copies` step before writing): a fused launch becomes a
    /// `Copies` step of its slot moves. Such a step is not an independent batch, so it is for
    /// host execution only.
    pub fn to_step(&self) -> Step {
        match self {
            Launch::Block { src, dst, rows } => Step::TransposeBlock { src: *src, dst: *dst, rows: *rows },
            Launch::Copies(moves) => Step::Copies(moves.clone()),
            Launch::Fused { unit, moves } => {
                Step::Copies(moves.iter().map(|&(src, dst)| Move { src, dst, len: *unit }).collect())
            }
        }
    }
}

/// What one fused launch may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FuseLimits {
    /// Most net moves per fused launch; 0 turns fusion off.
    pub max_moves: usize,
    /// Where the backend binds memory in regions (wgpu's segments): the region size and how many
    /// one launch may touch. `None`: anywhere in the matrix and the scratch.
    pub regions: Option<Regions>,
}

/// Aligned regions of the matrix and of the scratch (each buffer's regions start at its element
/// 0), as a backend binds them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Regions {
    /// Elements per region. Only slot lengths that divide it fuse, so that every slot of a fused
    /// launch lies inside one region; 0 fuses nothing.
    pub elems: usize,
    /// Most distinct regions (of the matrix and the scratch together) one fused launch's sources
    /// and destinations may touch.
    pub max: usize,
}

impl FuseLimits {
    /// At most `max_moves` net moves per launch, anywhere in the matrix and the scratch.
    pub const fn moves(max_moves: usize) -> Self {
        Self { max_moves, regions: None }
    }

    /// No fusion: every batch runs as it is.
    pub const NONE: Self = Self::moves(0);

    /// Whether batches of `unit`-element slots may fuse at all.
    fn fuses(&self, unit: usize) -> bool {
        self.max_moves > 0 && self.regions.is_none_or(|r| r.elems > 0 && r.elems.is_multiple_of(unit))
    }

    /// Whether the slots of `moves` (starting at multiples of a `unit` that divides the region
    /// size) stay within the region limit.
    fn regions_fit(&self, moves: &[(Loc, Loc)]) -> bool {
        let Some(r) = self.regions else { return true };
        let mut seen: HashSet<(bool, usize)> = HashSet::new();
        for &(s, d) in moves {
            for loc in [s, d] {
                if seen.insert((matches!(loc, Loc::Scratch(_)), loc.offset() / r.elems)) && seen.len() > r.max {
                    return false;
                }
            }
        }
        true
    }
}

/// The common length `u` of a batch whose moves all have length `u > 0` and start at multiples of
/// `u` in both spaces, if it is one.
pub fn uniform_unit(moves: &[Move]) -> Option<usize> {
    let u = moves.first()?.len;
    let aligned = |l: Loc| l.offset().is_multiple_of(u);
    (u > 0 && moves.iter().all(|m| m.len == u && aligned(m.src) && aligned(m.dst))).then_some(u)
}

/// Turns a plan into launches: blocks as they are, runs of uniform batches fused while their net
/// effect fits `limits`, every other batch as it is.
pub fn schedule(plan: &TransposePlan, limits: &FuseLimits) -> Vec<Launch> {
    let mut out = Vec::new();
    let collected: Result<()> = schedule_each(plan, limits, &mut |l| {
        out.push(l);
        Ok(())
    });
    debug_assert!(collected.is_ok(), "collecting launches cannot fail");
    out
}

/// [`schedule`], handing each launch to `emit` as soon as it is known, so that a device can run
/// the block pass while the host composes the run pass.
///
/// # Errors
/// The first error `emit` returns (nothing is emitted after it).
pub fn schedule_each(
    plan: &TransposePlan,
    limits: &FuseLimits,
    emit: &mut dyn FnMut(Launch) -> Result<()>,
) -> Result<()> {
    let steps = &plan.steps;
    let uses = ScratchUse::new(steps, plan.geometry.shape.cols());
    let mut composers = Composers::default();
    let mut i = 0;
    while i < steps.len() {
        let moves = match &steps[i] {
            Step::TransposeBlock { src, dst, rows } => {
                emit(Launch::Block { src: *src, dst: *dst, rows: *rows })?;
                i += 1;
                continue;
            }
            Step::Copies(moves) => moves,
        };
        let composer = match uniform_unit(moves) {
            Some(unit) if limits.fuses(unit) => composers.get_or_insert(unit, &plan.geometry),
            _ => None,
        };
        let Some(composer) = composer else {
            emit(Launch::Copies(moves.clone()))?;
            i += 1;
            continue;
        };
        let unit = composer.unit;
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
            if composer.buf_written > limits.max_moves {
                break;
            }
        }
        let mut fused = None;
        while j > i {
            if composer.buf_written <= limits.max_moves {
                let net = composer.net(j - 1, &uses);
                if net.len() <= limits.max_moves && limits.regions_fit(&net) {
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
                    emit(Launch::Fused { unit, moves: net })?;
                }
                i = j;
            }
            None => {
                emit(Launch::Copies(moves.clone()))?;
                i += 1;
            }
        }
    }
    Ok(())
}

/// Executes `launches` (a schedule of `plan`) on a host model, through
/// [`TransposePlan::execute_host`]: `buf` is the matrix, `scratch` at least
/// `plan.geometry.scratch_elems` long. The matrix ends as the plan's own execution leaves it;
/// scratch may differ where nothing reads it again.
///
/// # Panics
/// If a launch reads or writes out of bounds (a bug in the schedule, caught by the tests).
pub fn execute_host<T: Copy>(geometry: &TransposeGeometry, launches: &[Launch], buf: &mut [T], scratch: &mut [T]) {
    let steps = launches.iter().map(Launch::to_step).collect();
    TransposePlan { geometry: *geometry, steps }.execute_host(buf, scratch);
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
    /// Matrix slots among `written`.
    buf_written: usize,
}

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
    fn get_or_insert(&mut self, unit: usize, geometry: &TransposeGeometry) -> Option<&mut Composer> {
        let pos = match self.0.iter().position(|c| c.0 == unit) {
            Some(p) => p,
            None => {
                self.0.push((unit, Composer::new(unit, geometry.shape.len(), geometry.scratch_elems)));
                self.0.len() - 1
            }
        };
        self.0[pos].1.as_mut()
    }
}

/// What a schedule depends on: the plan's inputs (the shape, and the scratch, which fixes the run
/// length) and the limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ScheduleKey {
    /// Matrix rows.
    pub rows: usize,
    /// Matrix columns.
    pub cols: usize,
    /// Scratch elements ([`TransposeGeometry::scratch_elems`]).
    pub scratch_elems: usize,
    /// The fusion limits.
    pub limits: FuseLimits,
}

impl ScheduleKey {
    /// The key of `geometry`'s schedule under `limits`.
    pub fn new(geometry: &TransposeGeometry, limits: FuseLimits) -> Self {
        Self { rows: geometry.shape.rows(), cols: geometry.shape.cols(), scratch_elems: geometry.scratch_elems, limits }
    }
}

/// The last few schedules a backend made (host memory), so that repeated transposes of one
/// shape, as in every commit of a table, skip the composition. Safe to share between threads.
pub struct ScheduleCache {
    kept: usize,
    entries: Mutex<Vec<(ScheduleKey, Arc<[Launch]>)>>,
}

impl ScheduleCache {
    /// A cache of at most `kept` schedules (the oldest is dropped first).
    pub const fn new(kept: usize) -> Self {
        Self { kept, entries: Mutex::new(Vec::new()) }
    }

    /// The schedule stored under `key`, if any.
    pub fn get(&self, key: &ScheduleKey) -> Option<Arc<[Launch]>> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.iter().find(|e| e.0 == *key).map(|e| Arc::clone(&e.1))
    }

    /// Stores `launches` under `key` (keeping an existing entry), and returns what is stored.
    pub fn insert(&self, key: ScheduleKey, launches: Vec<Launch>) -> Arc<[Launch]> {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = entries.iter().find(|e| e.0 == key) {
            return Arc::clone(&e.1);
        }
        let launches: Arc<[Launch]> = launches.into();
        if self.kept > 0 {
            if entries.len() >= self.kept {
                entries.remove(0);
            }
            entries.push((key, Arc::clone(&launches)));
        }
        launches
    }

    /// Schedules currently kept.
    pub fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether no schedule is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests;
