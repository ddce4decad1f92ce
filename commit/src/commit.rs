//! The fused commit: admission, upload, coset LDE, leaves with the in-place transpose, Merkle trees.

use std::time::Instant;

use crate::memory::{CommitShape, MemoryModel, default_budget};
use backend_api::{
    Backend, DEFAULT_SCRATCH_CAP, DIGEST_WORDS, Error, HashKind, LdeParams, LeafJob, LeafLayout, LeafSpec, MatrixShape,
    TreeShape, digests_from_words, field::DEFAULT_SHIFT,
};

use crate::admission::{Admission, DeviceMemory, Ticket};
use crate::error::Result;
use crate::input::TraceInput;
use crate::progress::{Phase, Progress};

/// What a commit computes and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitParams {
    /// The blowup `B`, a power of two (default 2).
    pub blowup: usize,
    /// The coset shift, non-zero mod p (default 7).
    pub shift: u64,
    /// The leaf and node hash (default keccak256).
    pub hash: HashKind,
    /// The leaf layout (default `rows`).
    pub layout: LeafLayout,
    /// `Some(s)` builds two trees, over columns `[0, s)` and `[s, cols)`; `s` in `1..cols`.
    pub split: Option<usize>,
    /// The transpose scratch cap in bytes (default [`DEFAULT_SCRATCH_CAP`]).
    pub scratch_cap: usize,
    /// Keep the trace on the device, transposed in place to column-major (default off).
    pub keep_trace_snapshot: bool,
    /// Queue a download of the row-major LDE before the leaves are hashed (default off). A host
    /// trace committed without a snapshot has it queued by the upload itself
    /// ([`backend_api::Backend::coset_lde_from_host_and_download`]), so that a backend can start
    /// downloading each part of the LDE as soon as it is final.
    pub host_copy: bool,
    /// The device memory budget in bytes; `None` is 80% of the device's total memory
    /// ([`default_budget`]). Only [`commit`] reads it: [`commit_admitted`] uses its admission's.
    pub budget: Option<usize>,
    /// Synchronize after every phase so that the per-phase seconds measure device work. Each
    /// phase then costs one host synchronisation; without it the pipeline issues every phase
    /// back to back and the per-phase seconds are host-side issue times (default off).
    pub phase_timing: bool,
}

impl Default for CommitParams {
    fn default() -> Self {
        Self {
            blowup: 2,
            shift: DEFAULT_SHIFT,
            hash: HashKind::Keccak256,
            layout: LeafLayout::Rows,
            split: None,
            scratch_cap: DEFAULT_SCRATCH_CAP,
            keep_trace_snapshot: false,
            host_copy: false,
            budget: None,
            phase_timing: false,
        }
    }
}

/// One Merkle tree of a commit: the columns it covers and its geometry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreePlan {
    /// The leaf spec (hash, layout, column range).
    pub spec: LeafSpec,
    /// The tree's geometry.
    pub shape: TreeShape,
}

/// A validated commit: every check the pipeline makes before touching a device, and the memory
/// model admission compares with the budget.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitPlan {
    /// The LDE parameters (trace shape, blowup, shift).
    pub lde: LdeParams,
    /// One tree, or two with a split.
    pub trees: Vec<TreePlan>,
    /// The modelled device bytes.
    pub model: MemoryModel,
}

impl CommitPlan {
    /// Validates a commit of a `rows x cols` trace under `params`.
    ///
    /// # Errors
    /// - [`Error::InvalidShape`]: zero rows or columns, rows or blowup not a power of two, an LDE
    ///   domain `N = rows * blowup` above 2^32;
    /// - [`Error::InvalidArgument`]: a zero shift, a split column outside `1..cols`, the
    ///   `lambda-vm-pairs` layout with `N < 2` or with Poseidon2 (which defines `rows` only);
    /// - [`Error::ScratchTooSmall`]: a scratch cap that cannot hold one run of the LDE's transpose;
    /// - [`Error::SizeOverflow`]: a commit whose modelled bytes overflow `usize`.
    pub fn new(rows: usize, cols: usize, params: &CommitParams) -> Result<Self> {
        let trace = MatrixShape::new(rows, cols)?;
        let lde = LdeParams::new(trace, params.blowup, params.shift)?;
        let lde_shape = lde.lde_shape();
        let ranges = match params.split {
            None => vec![(0, cols)],
            Some(s) if s >= 1 && s < cols => vec![(0, s), (s, cols)],
            Some(s) => {
                return Err(Error::InvalidArgument(if cols < 2 {
                    format!("split column {s} is impossible: a split needs at least 2 columns, the table has {cols}")
                } else {
                    format!("split column {s} is outside 1..={} for a table of {cols} columns", cols - 1)
                })
                .into());
            }
        };
        let mut trees = Vec::with_capacity(ranges.len());
        for (c0, c1) in ranges {
            let spec = LeafSpec::new(params.hash, params.layout, c0..c1)?;
            let shape = TreeShape::new(spec.validate(lde_shape)?)?;
            trees.push(TreePlan { spec, shape });
        }
        let model = MemoryModel::of(&CommitShape {
            lde,
            layout: params.layout,
            split: params.split.is_some(),
            scratch_cap: params.scratch_cap,
            snapshot: params.keep_trace_snapshot,
        })?;
        Ok(Self { lde, trees, model })
    }

    /// The trace shape.
    pub fn trace_shape(&self) -> MatrixShape {
        self.lde.trace()
    }

    /// The LDE shape, `N x cols`.
    pub fn lde_shape(&self) -> MatrixShape {
        self.lde.lde_shape()
    }
}

/// Seconds spent in each phase that ran, in order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PhaseTimings {
    /// `(phase, seconds)` in pipeline order.
    pub phases: Vec<(Phase, f64)>,
    /// Whether the pipeline synchronized after each phase ([`CommitParams::phase_timing`]): only
    /// then do the per-phase figures measure device work on an asynchronous backend.
    pub synchronized: bool,
    /// From the start of the upload to the roots on the host; always includes all device work,
    /// because the roots' download waits for it.
    pub total_seconds: f64,
    /// Seconds admission took before the upload: the wait for memory, with a waiting admission.
    pub admission_seconds: f64,
}

impl PhaseTimings {
    /// Seconds of `phase`, if it ran.
    pub fn get(&self, phase: Phase) -> Option<f64> {
        self.phases.iter().find(|(p, _)| *p == phase).map(|(_, s)| *s)
    }
}

/// The result of a commit; its device buffers stay on the backend until dropped.
pub struct Commitment<B: Backend> {
    /// The root of each tree (node 0), one per tree.
    pub roots: Vec<[u8; 32]>,
    /// The LDE, column-major `lde_shape`.
    pub lde: B::Buffer,
    /// `N x cols`.
    pub lde_shape: MatrixShape,
    /// Each tree's `2L - 1` node array, root first, in the order of `tree_plans`.
    pub trees: Vec<B::Buffer>,
    /// The column range and geometry of each tree.
    pub tree_plans: Vec<TreePlan>,
    /// The trace, column-major, when [`CommitParams::keep_trace_snapshot`] was set.
    pub snapshot: Option<B::Buffer>,
    /// The queued row-major LDE download, when [`CommitParams::host_copy`] was set.
    pub host_copy: Option<B::Download>,
    /// Per-phase seconds.
    pub timings: PhaseTimings,
    /// The model the commit was admitted with.
    pub model: MemoryModel,
    /// The admitted bytes of the buffers above (the LDE, the trees, the snapshot); the transient
    /// terms were released when the commit returned. Dropping it returns them to the admission.
    pub ticket: Ticket,
}

/// Commits a trace on `backend` with a private admission of `params.budget` bytes (default 80% of
/// the device's memory).
///
/// Order: validation and admission come first, so a refused or invalid commit allocates nothing;
/// then the coset LDE into the `N`-row LDE buffer, row-major, by one of three routes:
/// - a host input without a snapshot: uploaded straight into the first `n` rows of the LDE buffer
///   and extended there in one call ([`Backend::coset_lde_from_host`], which a backend may
///   overlap), timed as one `upload+lde` phase;
/// - a host input with a snapshot: uploaded into the snapshot's buffer (`upload`), then extended
///   from it into the LDE buffer ([`Backend::coset_lde`], `lde`);
/// - a device input: extended from its buffer (`lde`), which the commit gives up
///   ([`Backend::coset_lde_owned`]: CUDA runs the inverse transform in it; the default copies it
///   into the LDE buffer first), or, kept as the snapshot, leaves unchanged
///   ([`Backend::coset_lde`]);
///
/// then the optional snapshot transposed in place, the optional queued host copy, the leaves
/// hashed straight into each tree's node array and the LDE transposed in place (one call,
/// [`Backend::hash_leaves_then_transpose`], timed as one `leaves+transpose` phase), the trees
/// completed in place, the roots downloaded. No phase waits for the device unless
/// `params.phase_timing` is set.
///
/// A [`TraceInput::Device`] buffer is the caller's and live before the commit, so it is not a
/// term of the model: the device holds it beside the LDE buffer until the LDE has read it. Kept
/// as the snapshot, it is counted by the model's trace term all the same (a safe over-count).
///
/// # Errors
/// [`CommitPlan::new`]'s validation errors; [`Error::LengthMismatch`] when the input does not hold
/// `rows * cols` elements; [`crate::ProverError::Refused`] listing every modelled term when the commit does not
/// fit; device errors. On error every buffer the commit allocated is freed.
pub fn commit<B: Backend>(
    backend: &B,
    input: TraceInput<'_, B>,
    params: &CommitParams,
    progress: &dyn Progress,
) -> Result<Commitment<B>> {
    let budget = params.budget.unwrap_or_else(|| default_budget(backend.info().total_memory));
    commit_admitted(backend, input, params, &Admission::new(budget), progress)
}

/// [`commit`] admitted through a shared [`Admission`] (its budget and policy; `params.budget` is
/// ignored), so that concurrent commits on one device together stay within the budget. With a
/// waiting admission the commit waits its turn (the backend's [`backend_api::DeviceInfo`] gives
/// the driver's free memory) before anything is allocated.
///
/// # Errors
/// As [`commit`], and [`crate::ProverError::WaitTimedOut`] when a waiting admission's timeout
/// passes first.
pub fn commit_admitted<B: Backend>(
    backend: &B,
    input: TraceInput<'_, B>,
    params: &CommitParams,
    admission: &Admission,
    progress: &dyn Progress,
) -> Result<Commitment<B>> {
    let given = input.shape();
    let plan = CommitPlan::new(given.rows(), given.cols(), params)?;
    let trace_shape = plan.trace_shape();
    let lde_shape = plan.lde_shape();
    trace_shape.check_len("trace input", input.len())?;
    // A waiting admission also asks the driver, at every look, how much is free.
    let memory = || {
        let info = backend.info();
        Some(DeviceMemory { free: info.free_memory, total: info.total_memory })
    };
    let admission_start = Instant::now();
    let ticket = admission.admit_on(&plan.model, &memory)?;
    let admission_seconds = admission_start.elapsed().as_secs_f64();

    let mut clock = Clock::new(backend, params.phase_timing, progress);
    // A host input without a snapshot goes straight into the first n rows of the LDE buffer, in
    // one call that the backend may overlap. Otherwise the trace has a buffer of its own (the
    // device input, or the snapshot a host input is uploaded into), from which the LDE extends it
    // into a new buffer.
    // With a host copy, such an upload also downloads the LDE in the same call, so that a
    // backend can start the download of each part of it as soon as that part is final.
    let mut host_copy = None;
    let (lde, snapshot) = match input {
        TraceInput::Host { data, .. } if !params.keep_trace_snapshot => {
            let lde = clock.phase(Phase::UploadLde, || {
                let mut lde = backend.alloc(lde_shape.len())?;
                if params.host_copy {
                    host_copy = Some(backend.coset_lde_from_host_and_download(&mut lde, data, &plan.lde)?);
                } else {
                    backend.coset_lde_from_host(&mut lde, data, &plan.lde)?;
                }
                Ok(lde)
            })?;
            (lde, None)
        }
        TraceInput::Host { data, .. } => {
            let snapshot = clock.phase(Phase::Upload, || backend.upload(data))?;
            let lde = clock.phase(Phase::Lde, || backend.coset_lde(&snapshot, &plan.lde))?;
            (lde, Some(snapshot))
        }
        TraceInput::Device { buffer, .. } if params.keep_trace_snapshot => {
            let lde = clock.phase(Phase::Lde, || backend.coset_lde(&buffer, &plan.lde))?;
            (lde, Some(buffer))
        }
        TraceInput::Device { buffer, .. } => {
            (clock.phase(Phase::Lde, || backend.coset_lde_owned(buffer, &plan.lde))?, None)
        }
    };
    let extended = Extended { lde, snapshot, host_copy };
    finish(backend, plan, params, clock, extended, ticket).map(|c| c.admitted_after(admission_seconds))
}

/// What the LDE phase leaves to [`finish`]: the row-major LDE buffer, the untransposed snapshot
/// (if kept), and the host copy when the LDE's own call already queued it.
struct Extended<B: Backend> {
    lde: B::Buffer,
    snapshot: Option<B::Buffer>,
    host_copy: Option<B::Download>,
}

/// The phases after the LDE: the snapshot's transpose, the host copy (unless the LDE's call
/// already queued it), the leaves with the LDE's transpose, the trees and the
/// roots; then the commitment, its ticket shrunk to the resident buffers.
fn finish<B: Backend>(
    backend: &B,
    plan: CommitPlan,
    params: &CommitParams,
    mut clock: Clock<'_, B>,
    Extended { mut lde, snapshot, host_copy }: Extended<B>,
    mut ticket: Ticket,
) -> Result<Commitment<B>> {
    let trace_shape = plan.trace_shape();
    let lde_shape = plan.lde_shape();
    let snapshot = match snapshot {
        Some(mut trace) => {
            clock.phase(Phase::Snapshot, || backend.transpose_in_place(&mut trace, trace_shape, params.scratch_cap))?;
            Some(trace)
        }
        None => None,
    };
    let host_copy = match host_copy {
        Some(queued) => Some(queued),
        None if params.host_copy => Some(clock.phase(Phase::HostCopy, || backend.queue_download(&lde))?),
        None => None,
    };
    let mut trees = clock.phase(Phase::LeavesTranspose, || {
        let mut trees =
            plan.trees.iter().map(|t| backend.alloc(t.shape.words())).collect::<backend_api::Result<Vec<_>>>()?;
        let mut jobs: Vec<_> = plan
            .trees
            .iter()
            .zip(trees.iter_mut())
            .map(|(t, out)| LeafJob { spec: &t.spec, out, out_digest: t.shape.first_leaf() })
            .collect();
        backend.hash_leaves_then_transpose(&mut lde, lde_shape, &mut jobs, params.scratch_cap)?;
        Ok(trees)
    })?;
    clock.phase(Phase::Merkle, || {
        trees
            .iter_mut()
            .zip(&plan.trees)
            .try_for_each(|(nodes, t)| backend.merkle_tree_in_place(nodes, t.shape, params.hash))
    })?;
    let roots = clock.phase(Phase::Roots, || {
        trees
            .iter()
            .map(|nodes| {
                let mut words = [0u64; DIGEST_WORDS];
                backend.download(nodes, 0, &mut words)?;
                Ok(digests_from_words(&words)[0])
            })
            .collect::<backend_api::Result<Vec<_>>>()
    })?;
    let timings = clock.finish();

    // The model's trace term is the snapshot's bytes, 0 without one.
    let resident = plan.model.lde + plan.model.trees + plan.model.trace;
    ticket.shrink_to(resident);
    Ok(Commitment {
        roots,
        lde,
        lde_shape,
        trees,
        tree_plans: plan.trees,
        snapshot,
        host_copy,
        timings,
        model: plan.model,
        ticket,
    })
}

impl<B: Backend> Commitment<B> {
    /// The whole LDE on the host, column-major `lde_shape` (column `c` is the `N` elements from
    /// `c * N` on, in natural row order): the evaluations of every column over the coset.
    ///
    /// Cost: one blocking download of `N * cols * 8` bytes into a new `Vec`, after all work
    /// issued on `backend` before; the device buffer stays as it is. For one column,
    /// [`Commitment::lde_column`] moves `N * 8` bytes.
    ///
    /// # Errors
    /// [`Error::ForeignBuffer`] when `backend` is not the instance that made this commitment; a
    /// device error from the copy or earlier work.
    pub fn lde_to_host(&self, backend: &B) -> Result<Vec<u64>> {
        Ok(backend.download_vec(&self.lde)?)
    }

    /// Column `col` of the LDE on the host: its `N` evaluations over the coset, in natural row
    /// order.
    ///
    /// Cost: one blocking download of `N * 8` bytes (a contiguous range: the LDE is column-major),
    /// after all work issued on `backend` before.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a column outside `0..cols`; as [`Commitment::lde_to_host`].
    pub fn lde_column(&self, backend: &B, col: usize) -> Result<Vec<u64>> {
        let (rows, cols) = (self.lde_shape.rows(), self.lde_shape.cols());
        if col >= cols {
            return Err(Error::InvalidArgument(format!(
                "column {col} is outside 0..{cols} of the {rows} x {cols} LDE"
            ))
            .into());
        }
        let mut out = vec![0u64; rows];
        backend.download(&self.lde, col * rows, &mut out)?;
        Ok(out)
    }

    /// Waits for the row-major host copy of the LDE ([`CommitParams::host_copy`]) and takes it:
    /// `N x cols` row-major, row `r` the `cols` elements from `r * cols` on. The commitment keeps
    /// no copy, so a second call fails.
    ///
    /// Cost: the copy was queued before the leaves were hashed and ran beside the rest of the
    /// commit, so this waits only for what of it is left (nothing, usually, since the roots'
    /// download already waited for all device work); no further device memory or copy. The
    /// host buffer is the backend's ([`Backend::alloc_host`] memory: page-locked on CUDA, given
    /// back to its pool when dropped).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the commit was made without `host_copy` or the copy was
    /// already taken; a device error from the copy or from work queued before it.
    pub fn wait_host_copy(&mut self) -> Result<B::HostBuffer> {
        use backend_api::PendingDownload;
        let pending = self.host_copy.take().ok_or_else(|| {
            Error::InvalidArgument(
                "this commitment holds no host copy: commit with `CommitParams { host_copy: true, .. }`, and take \
                 the copy once"
                    .into(),
            )
        })?;
        Ok(pending.wait()?)
    }

    /// Root `tree` (0, or 1 of a split commit) as 64 lower-case hex digits, byte 0 first; `None`
    /// past the last tree. Cost: none beyond formatting; the roots are already on the host.
    pub fn root_hex(&self, tree: usize) -> Option<String> {
        self.roots.get(tree).map(|r| backend_api::hex(r))
    }

    /// Every root as 64 lower-case hex digits, in tree order (one, or two for a split commit).
    /// Cost: none beyond formatting.
    pub fn roots_hex(&self) -> Vec<String> {
        self.roots.iter().map(|r| backend_api::hex(r)).collect()
    }

    /// The commitment with the seconds its admission took recorded in its timings.
    fn admitted_after(mut self, admission_seconds: f64) -> Self {
        self.timings.admission_seconds = admission_seconds;
        self
    }
}

/// Times phases and reports them to the progress callback.
struct Clock<'a, B: Backend> {
    backend: &'a B,
    sync: bool,
    progress: &'a dyn Progress,
    start: Instant,
    phases: Vec<(Phase, f64)>,
}

impl<'a, B: Backend> Clock<'a, B> {
    fn new(backend: &'a B, sync: bool, progress: &'a dyn Progress) -> Self {
        Self { backend, sync, progress, start: Instant::now(), phases: Vec::new() }
    }

    fn phase<T>(&mut self, phase: Phase, f: impl FnOnce() -> backend_api::Result<T>) -> backend_api::Result<T> {
        self.progress.start(phase);
        let t0 = Instant::now();
        let out = f()?;
        if self.sync {
            self.backend.synchronize()?;
        }
        let secs = t0.elapsed().as_secs_f64();
        self.phases.push((phase, secs));
        self.progress.finish(phase, secs);
        Ok(out)
    }

    fn finish(self) -> PhaseTimings {
        PhaseTimings {
            phases: self.phases,
            synchronized: self.sync,
            total_seconds: self.start.elapsed().as_secs_f64(),
            admission_seconds: 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::NoProgress;
    use backend_cpu::CpuBackend;
    use naive_reference as naive;

    fn trace(rows: usize, cols: usize) -> Vec<u64> {
        // Values above p too: the LDE reads them canonically.
        (0..rows * cols).map(|i| (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)).collect()
    }

    #[test]
    fn the_helpers_read_back_what_the_naive_lde_and_trees_give() {
        let cpu = CpuBackend::new();
        let (n, m, blowup, shift) = (16, 3, 4, 7);
        let data = trace(n, m);
        let params = CommitParams {
            blowup,
            shift,
            split: Some(1),
            host_copy: true,
            layout: LeafLayout::LambdaVmPairs,
            ..Default::default()
        };
        let mut c =
            commit(&cpu, TraceInput::host(&data, MatrixShape::new(n, m).unwrap()), &params, &NoProgress).unwrap();
        let rows_major = naive::coset_lde(&data, n, m, blowup, shift);
        let big_n = n * blowup;
        assert_eq!(c.lde_to_host(&cpu).unwrap(), naive::transpose(&rows_major, big_n, m));
        for col in 0..m {
            let want: Vec<u64> = (0..big_n).map(|r| rows_major[r * m + col]).collect();
            assert_eq!(c.lde_column(&cpu, col).unwrap(), want, "column {col}");
        }
        let err = c.lde_column(&cpu, m).unwrap_err();
        assert!(err.is_invalid_input() && err.to_string().contains("column 3 is outside 0..3"), "{err}");

        // The row-major host copy, once.
        assert_eq!(&c.wait_host_copy().unwrap()[..], &rows_major[..]);
        let again = c.wait_host_copy().unwrap_err();
        assert!(again.is_invalid_input() && again.to_string().contains("host_copy: true"), "{again}");

        // Two trees over [0, 1) and [1, 3), lambda-vm pairs; roots as hex.
        let roots: Vec<[u8; 32]> = [0..1, 1..3]
            .into_iter()
            .map(|r| {
                naive::merkle_root(
                    &naive::leaf_digests(&rows_major, m, HashKind::Keccak256, LeafLayout::LambdaVmPairs, r),
                    HashKind::Keccak256,
                )
            })
            .collect();
        assert_eq!(c.roots, roots);
        let hexes: Vec<String> = roots.iter().map(|r| r.iter().map(|b| format!("{b:02x}")).collect()).collect();
        assert_eq!(c.roots_hex(), hexes);
        assert_eq!(c.root_hex(1).as_deref(), Some(hexes[1].as_str()));
        assert_eq!(c.root_hex(2), None);
    }

    #[test]
    fn the_helpers_refuse_another_backend_s_commitment() {
        let (a, b) = (CpuBackend::new(), CpuBackend::new());
        let data = trace(4, 2);
        let c =
            commit(&a, TraceInput::host(&data, MatrixShape::new(4, 2).unwrap()), &CommitParams::default(), &NoProgress)
                .unwrap();
        let err = c.lde_to_host(&b).unwrap_err();
        assert!(err.is_invalid_input() && matches!(err.backend_error(), Some(Error::ForeignBuffer { .. })), "{err}");
        assert!(c.lde_column(&b, 0).is_err());
        // Without `host_copy` there is none to wait for.
        let mut c = c;
        assert!(c.wait_host_copy().unwrap_err().is_invalid_input());
    }

    #[test]
    fn a_refusal_is_asked_for_its_terms() {
        let cpu = CpuBackend::new();
        let data = trace(64, 5);
        let params = CommitParams { budget: Some(4096), ..Default::default() };
        let err = commit(&cpu, TraceInput::host(&data, MatrixShape::new(64, 5).unwrap()), &params, &NoProgress)
            .err()
            .expect("4 KiB holds no 128 x 5 LDE");
        assert!(err.is_refused() && !err.is_invalid_input() && !err.is_out_of_memory() && !err.is_device_error());
        let r = err.refusal().unwrap();
        assert_eq!((r.budget, r.in_flight, r.model.lde), (4096, 0, 128 * 5 * 8));
        assert_eq!(cpu.memory().live, 0, "a refused commit allocates nothing");
        assert_eq!(err.exit_code(), crate::EXIT_REFUSED_OR_DEVICE);
        let bad = commit(&cpu, TraceInput::host(&data[..10], MatrixShape::new(64, 5).unwrap()), &params, &NoProgress)
            .err()
            .unwrap();
        assert!(bad.is_invalid_input() && !bad.is_refused() && bad.refusal().is_none(), "{bad}");
        assert_eq!(bad.exit_code(), crate::EXIT_USAGE);
    }
}
