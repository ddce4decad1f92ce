//! `BackendPcs`: Plonky3's two-adic FRI PCS whose commit runs on a backend without the LDE's
//! round trip through the host.

use std::borrow::Cow;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use backend_api::plan::TransposeGeometry;
use backend_api::{
    Backend, CopyRange, DIGEST_WORDS, DeviceBuffer, ELEM_BYTES, LdeParams, LeafLayout, MatrixShape, TreeShape,
};
use commit::memory::{CommitShape, MemoryModel};
use commit::{Admission, DeviceMemory, Ticket};
use p3_challenger::{CanObserve, FieldChallenger, GrindingChallenger};
use p3_commit::PolynomialSpace;
use p3_commit::{Mmcs, OpenedValues, OpeningRequest, Pcs, PeriodicLdeTable, UnivariateStarkPcs};
use p3_field::coset::TwoAdicMultiplicativeCoset;
use p3_field::{ExtensionField, Field, PrimeCharacteristicRing, PrimeField64};
use p3_fri::{FriParameters, FriProverError, TwoAdicFriPcs};
use p3_goldilocks::Goldilocks;
use p3_matrix::Matrix;
use p3_matrix::dense::RowMajorMatrix;
use rayon::prelude::*;

use crate::bitrev::staging_bytes;
use crate::convert::{as_words, concat_rows, into_field_vec, into_word_vec};
use crate::dft::{BackendDft, download_lde, lde_on_device};
use crate::digest::{Keccak256, MmcsHash};
use crate::mmcs::{BackendMmcs, Committed, DeviceLde, DeviceLdeMatrices};

/// The stock PCS a [`BackendPcs`] wraps: its openings, FRI and verifier, and every commit the
/// fused path does not take.
pub type InnerPcs<B, FriMmcs, H = Keccak256> = TwoAdicFriPcs<Goldilocks, BackendDft<B>, BackendMmcs<B, H>, FriMmcs>;

/// How many commits a [`BackendPcs`] fused on the device, and how many went through the stock
/// `TwoAdicFriPcs::commit` (clones share the counters).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PcsStats {
    /// Commits whose LDE, leaves and tree ran on the backend in one pass, the LDE coming down
    /// once (into the host copy the openings read) and never going back up.
    pub fused_commits: usize,
    /// Of `fused_commits`, those of matrices of several heights (a p3-batch-stark proof's traces
    /// and its lookups' permutation traces, one matrix per table): each height's LDE on the
    /// device, and one tree with the shorter heights injected at their level.
    pub fused_mixed_commits: usize,
    /// Commits through `TwoAdicFriPcs::commit` ([`BackendDft`] then [`BackendMmcs`]): matrices of
    /// one height on several cosets, below the DFT's threshold, no backend, or after a device
    /// error.
    pub stock_commits: usize,
    /// Device errors met by the fused path (each commit then went the stock way, with a warning)
    /// and by the openings' products (each then computed on the host, with a warning).
    pub device_errors: usize,
    /// Opening products (a matrix's evaluations at its opening points, up to 4 points a call for
    /// a quadratic challenge field, or its rows' reduction by powers of the batching challenge)
    /// computed on the device, over the LDE a fused commit kept.
    pub device_openings: usize,
    /// Products of the openings that failed on the device and were computed on the host.
    pub host_openings: usize,
    /// Matrices whose share of FRI's input (their reduced openings, [`Backend::reduce_openings`])
    /// was computed on the device, over the LDE a fused commit kept; counted in
    /// `device_openings` too.
    pub device_reductions: usize,
    /// Fused commits the memory admission refused or timed out (each then went the stock way).
    pub admission_refusals: usize,
    /// FRI commit-phase rounds folded on the device ([`crate::BackendExtensionMmcs`] as the FRI
    /// MMCS, a backend with [`Backend::fri_fold`]).
    pub device_fri_rounds: usize,
    /// FRI commit-phase rounds of [`crate::BackendExtensionMmcs`] folded on the host: the backend
    /// has no fold, or a device error (counted in `device_errors` too) moved that round and the
    /// rest of its proof to the host.
    pub host_fri_rounds: usize,
    /// Quotients [`crate::prove`] evaluated on the device, over the LDE the trace's fused commit
    /// kept there ([`Backend::quotient_values`]).
    pub device_quotients: usize,
    /// Quotient commits whose chunks, their LDEs, leaves and tree ran on the device, from values
    /// [`crate::prove`] left there or from the host's values uploaded once (`commit_quotient`),
    /// the LDE kept there for the openings as a fused commit keeps the trace's.
    pub device_quotient_commits: usize,
    /// Quotients [`crate::prove`] evaluated with Plonky3's host code (the AIR's constraints were
    /// not compiled, the trace's LDE was not on the device, or the device failed; one warning
    /// says which).
    pub host_quotients: usize,
}

impl PcsStats {
    /// No commit, no opening.
    pub const ZERO: PcsStats = PcsStats {
        fused_commits: 0,
        fused_mixed_commits: 0,
        stock_commits: 0,
        device_errors: 0,
        device_openings: 0,
        host_openings: 0,
        device_reductions: 0,
        admission_refusals: 0,
        device_fri_rounds: 0,
        host_fri_rounds: 0,
        device_quotients: 0,
        device_quotient_commits: 0,
        host_quotients: 0,
    };
}

/// What a fused commit does when the memory admission ([`BackendPcs::with_admission`]) refuses
/// it or its wait times out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnRefusal {
    /// Commit through `TwoAdicFriPcs` instead (on the host where the DFT's and MMCS's own routing
    /// takes it), with a warning: the same proof, later. The default.
    #[default]
    CommitStock,
    /// Fail the commit with [`PcsError::NotAdmitted`] (p3-uni-stark reports it as
    /// `ProvingError::Pcs { phase: "trace commitment", .. }`); nothing was allocated.
    Fail,
}

/// Why a [`BackendPcs`] could not commit or open: `TwoAdicFriPcs`'s own reasons, and a fused
/// commit that the memory admission turned away under [`OnRefusal::Fail`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PcsError {
    /// `TwoAdicFriPcs`'s error: an input too short for FRI's final polynomial.
    #[error(transparent)]
    Fri(#[from] FriProverError),
    /// The memory admission refused a fused commit or its wait timed out ([`OnRefusal::Fail`]);
    /// nothing was allocated for it.
    #[error("{backend} fused commit of {trace}{} (blowup {blowup}) not admitted: {source}", and_shorter(*heights))]
    NotAdmitted {
        /// The backend the commit was for.
        backend: &'static str,
        /// The trace's shape: every matrix of the commit side by side, or with several heights,
        /// every matrix of the tallest.
        trace: MatrixShape,
        /// How many heights the commit's matrices have (1 for a uni-stark trace; a batch's tables
        /// can have many).
        heights: usize,
        /// The LDE's blowup.
        blowup: usize,
        /// The admission's refusal: the model's terms, the budget and what else holds it, or the
        /// wait that timed out.
        #[source]
        source: Box<commit::ProverError>,
    },
}

/// `" and n shorter heights"` for a commit of `heights > 1` heights (for messages).
fn and_shorter(heights: usize) -> String {
    match heights {
        0 | 1 => String::new(),
        2 => " and one shorter height".into(),
        h => format!(" and {} shorter heights", h - 1),
    }
}

impl PcsError {
    /// Whether this is a memory admission's refusal or timeout ([`PcsError::NotAdmitted`]).
    pub fn is_not_admitted(&self) -> bool {
        matches!(self, PcsError::NotAdmitted { .. })
    }
}

#[derive(Default)]
pub(crate) struct Counters {
    fused_commits: AtomicUsize,
    fused_mixed_commits: AtomicUsize,
    stock_commits: AtomicUsize,
    pub(crate) device_errors: AtomicUsize,
    pub(crate) device_openings: AtomicUsize,
    pub(crate) host_openings: AtomicUsize,
    pub(crate) device_reductions: AtomicUsize,
    pub(crate) admission_refusals: AtomicUsize,
    pub(crate) device_fri_rounds: AtomicUsize,
    pub(crate) host_fri_rounds: AtomicUsize,
    pub(crate) device_quotients: AtomicUsize,
    pub(crate) device_quotient_commits: AtomicUsize,
    pub(crate) host_quotients: AtomicUsize,
}

/// Plonky3's `TwoAdicFriPcs` over Goldilocks with [`BackendDft`] and [`BackendMmcs`] on one
/// backend, whose commits of traces are fused on the device: the trace goes up once,
/// the LDE is computed, its leaves hashed and its tree built there, and the LDE comes down once,
/// straight into the bit-reversed host copy the openings read. `TwoAdicFriPcs::commit` instead
/// downloads the LDE from the DFT and uploads it again for the MMCS.
///
/// - **The same proof.** Its commitment, prover data and proof types are those of the wrapped
///   [`InnerPcs`], and a proof is byte-identical to stock `TwoAdicFriPcs` with
///   `Radix2DitParallel` and the Keccak `MerkleTreeMmcs` under the same parameters (this crate's
///   proof tests compare the bytes, and verify with the stock verifier). Verification is
///   `TwoAdicFriPcs`'s own.
/// - **FRI on the device.** With [`crate::BackendExtensionMmcs`] as `FriMmcs`, FRI's commit
///   phase folds each layer with [`Backend::fri_fold`] and commits it from the device buffer; its
///   first input goes up once and each layer comes down once, as the host copy its query
///   openings read ([`PcsStats::device_fri_rounds`]). With an `ExtensionMmcs` over
///   [`BackendMmcs`], FRI is `TwoAdicFriPcs`'s own, its layers' trees on the backend.
/// - **Openings on the device.** Where the backend implements the opening products
///   ([`Backend::row_dot_products`], [`Backend::column_dot_products`]), a fused commit keeps its
///   LDE on the device in the prover data, and `open` is `TwoAdicFriPcs::open` step for step with
///   the evaluations at the opening points and the rows' reduction by powers of the batching
///   challenge computed there (see [`PcsStats::device_openings`]); other matrices open on the
///   host, as stock.
/// - **Which commits fuse.** A commit whose matrices have at least one column each and their
///   domain's size as their height, the matrices of one height on one coset, of at least
///   [`BackendDft::min_backend_elems`] elements in all, when the DFT and the MMCS hold the same
///   backend instance: a uni-stark trace, a preprocessed commit, and a p3-batch-stark proof's
///   traces and permutation traces (one matrix per table, of many heights). The matrices of one
///   height are concatenated column-wise on the host before their upload (one leaf covers a row
///   of each, in order) and split again on the way down; each height's LDE is its own on the
///   device, and one tree covers them all, the shorter heights injected at their level as
///   Plonky3's MMCS does ([`PcsStats::fused_mixed_commits`] counts such commits). Other commits
///   go through `TwoAdicFriPcs::commit`, whose MMCS builds the trees of LDEs below the DFT's
///   threshold (`2^log_blowup` times [`BackendDft::min_backend_elems`] elements) on the host, as
///   stock does ([`BackendMmcs::with_min_device_elems`]), for Keccak-256: where an LDE is too
///   small to pay for the device, so is its tree. Poseidon2's trees go to the device at every
///   size (`MmcsHash::SMALL_TREES_ON_HOST`).
/// - **Small proofs stay stock.** When no opened commitment's tree is on the device (every
///   commit below the thresholds), `open` is `TwoAdicFriPcs::open` itself, FRI included: a small
///   proof's device round trips cost more than its host work. With a
///   [`crate::BackendExtensionMmcs`] as FRI's MMCS, its layers below the same threshold are then
///   committed on the host too (they are smaller than the commits they fold).
/// - **The quotient's commit.** `commit_quotient` (the quotient's chunks, which lie on different
///   cosets) uploads the values once and splits the chunks, extends each with its own shift and
///   commits them side by side on the device, the LDE kept there for the openings, where a fused
///   commit of that size would run there (see [`PcsStats::device_quotient_commits`]);
///   [`crate::prove`] commits values it left on the device without the upload.
/// - **Leaf order.** Plonky3 commits the LDE in bit-reversed row order; the fused path hashes the
///   natural-order rows on the device and permutes the leaf digests (32 bytes per row) there
///   before the tree is built, and the LDE comes down with each chunk's rows gathered in
///   bit-reversed order on the device first.
/// - **Host memory.** A fused commit's input matrices (the trace Plonky3 hands over by value)
///   are freed on a thread of their own once the trace is on the device, not inside `commit`:
///   unmapping the 2.1 GB trace of a 2^20 x 256 proof costs its thread about 100 ms. At most two
///   such frees wait at a time (a commit blocks behind them beyond that). The LDE's host copy is
///   kept for the next proof's download ([`BackendPcs::with_kept_host_matrices`]).
/// - **Errors.** [`PcsError`]: `TwoAdicFriPcs`'s own, and a memory admission's refusal where
///   [`OnRefusal::Fail`] asks for it. A device error in the fused path logs a `tracing` warning
///   and commits the stock way (whose DFT and MMCS fall back to the host in turn); [`PcsStats`]
///   counts it.
pub struct BackendPcs<B: Backend, FriMmcs, H: MmcsHash = Keccak256> {
    inner: InnerPcs<B, FriMmcs, H>,
    dft: BackendDft<B>,
    pub(crate) mmcs: BackendMmcs<B, H>,
    /// FRI's parameters (the wrapped PCS's own copy is private to p3-fri).
    pub(crate) fri: FriParameters<FriMmcs>,
    log_blowup: usize,
    pub(crate) counters: Arc<Counters>,
    /// Whether the MMCS's backend implements the opening products (asked once, on the first
    /// fused commit).
    products: Arc<OnceLock<bool>>,
    /// Whether the backend reduces openings ([`Backend::reduce_openings`]), probed once.
    reductions: Arc<OnceLock<bool>>,
    /// Whether fused commits keep their LDE on the device for the openings.
    device_openings: bool,
    /// The device memory admission fused commits go through, if any.
    admission: Option<Admission>,
    /// What a commit the admission refuses does.
    on_refusal: OnRefusal,
    /// Whether fused commits' host matrices are kept, once their prover data is dropped, for the
    /// next download of their size.
    keep_host_matrices: bool,
}

impl<B: Backend, FriMmcs: Clone, H: MmcsHash> Clone for BackendPcs<B, FriMmcs, H> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            dft: self.dft.clone(),
            mmcs: self.mmcs.clone(),
            fri: self.fri.clone(),
            log_blowup: self.log_blowup,
            counters: Arc::clone(&self.counters),
            products: Arc::clone(&self.products),
            reductions: Arc::clone(&self.reductions),
            device_openings: self.device_openings,
            admission: self.admission.clone(),
            on_refusal: self.on_refusal,
            keep_host_matrices: self.keep_host_matrices,
        }
    }
}

impl<B: Backend, FriMmcs, H: MmcsHash> fmt::Debug for BackendPcs<B, FriMmcs, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BackendPcs")
            .field("dft", &self.dft)
            .field("mmcs", &self.mmcs)
            .field("log_blowup", &self.log_blowup)
            .field("device_openings", &self.device_openings)
            .field("admission", &self.admission.is_some())
            .field("on_refusal", &self.on_refusal)
            .field("keep_host_matrices", &self.keep_host_matrices)
            .field("stats", &self.stats())
            .finish()
    }
}

/// The fewest LDE elements whose unfused commit builds its tree on the device: an unfused commit's
/// trees are over LDEs, so below the DFT's threshold (in trace elements, `2^log_blowup` times as
/// many LDE elements) they are built on the host too, as stock's, where the host hashes fast
/// (`MmcsHash::SMALL_TREES_ON_HOST`); never below the MMCS's own threshold.
fn unfused_min_tree_elems<B: Backend, H: MmcsHash>(
    dft: &BackendDft<B>,
    mmcs: &BackendMmcs<B, H>,
    log_blowup: usize,
) -> usize {
    let blowup = u32::try_from(log_blowup).ok().and_then(|b| 1usize.checked_shl(b)).unwrap_or(usize::MAX);
    let below_dft = if H::SMALL_TREES_ON_HOST { dft.min_backend_elems().saturating_mul(blowup) } else { 0 };
    mmcs.min_device_elems().max(below_dft)
}

/// The MMCS of the unfused commits (the inner `TwoAdicFriPcs`'s): `mmcs` with
/// [`unfused_min_tree_elems`].
fn unfused_mmcs<B: Backend, H: MmcsHash>(
    dft: &BackendDft<B>,
    mmcs: &BackendMmcs<B, H>,
    log_blowup: usize,
) -> BackendMmcs<B, H> {
    mmcs.clone().with_min_device_elems(unfused_min_tree_elems::<B, H>(dft, mmcs, log_blowup))
}

impl<B: Backend, FriMmcs: Clone, H: MmcsHash> BackendPcs<B, FriMmcs, H> {
    /// The PCS with `dft` and `mmcs` (which should hold the same backend instance for commits to
    /// fuse) and FRI's parameters: the arguments of `TwoAdicFriPcs::new`.
    pub fn new(dft: BackendDft<B>, mmcs: BackendMmcs<B, H>, fri: FriParameters<FriMmcs>) -> Self {
        let log_blowup = fri.log_blowup;
        let inner = TwoAdicFriPcs::new(dft.clone(), unfused_mmcs(&dft, &mmcs, log_blowup), fri.clone());
        Self {
            inner,
            dft,
            mmcs,
            fri,
            log_blowup,
            counters: Arc::default(),
            products: Arc::default(),
            reductions: Arc::default(),
            device_openings: true,
            admission: None,
            on_refusal: OnRefusal::default(),
            keep_host_matrices: true,
        }
    }
}

impl<B: Backend, FriMmcs, H: MmcsHash> BackendPcs<B, FriMmcs, H> {
    /// With `false`, fused commits free their device LDE once committed and every opening runs
    /// on the host, as `TwoAdicFriPcs::open` (the default, `true`, keeps one LDE-sized device
    /// buffer per fused commitment until its prover data is dropped, where the backend has the
    /// opening products). The proof is the same either way.
    #[must_use]
    pub fn with_device_openings(mut self, device_openings: bool) -> Self {
        self.device_openings = device_openings;
        self
    }

    /// With `false`, a fused commit's host matrices (the LDE's bit-reversed copy that the
    /// quotient and the openings read) are freed when its prover data is dropped. By default
    /// (`true`) they are kept, process-wide, at most four, for the next fused commit of the same
    /// size, which downloads into pages that exist instead of faulting in fresh ones: on the
    /// H200's host, the 4.3 GB download of a 2^20 x 256 proof's LDE took 117 ms into existing
    /// pages against 265 ms into fresh huge pages, and dropping the prover data freed nothing.
    /// The memory stays with the process between proofs (the size of the last proofs' LDEs);
    /// [`free_kept_host_matrices`] gives it back. The proof is the same either way.
    #[must_use]
    pub fn with_kept_host_matrices(mut self, keep: bool) -> Self {
        self.keep_host_matrices = keep;
        self
    }

    /// Fused commits go through `admission` first (the `commit` crate's memory model and policy:
    /// refuse at once, wait up to a timeout, or queue with other processes on the device): the
    /// model is [`fused_commit_model`], or for matrices of several heights
    /// [`fused_heights_model`]. Admitted, the commit holds its ticket until its prover
    /// data is dropped (settled to the bytes it keeps: the tree, and the LDE when the openings use
    /// it). Refused or timed out, [`PcsStats::admission_refusals`] counts it and the commit does
    /// what [`BackendPcs::on_admission_refusal`] says: by default it goes the stock way, on the
    /// host where the DFT's and MMCS's own fallbacks take it, with a warning (the same proof).
    #[must_use]
    pub fn with_admission(mut self, admission: Admission) -> Self {
        self.admission = Some(admission);
        self
    }

    /// What a fused commit does when the admission refuses it or its wait times out: commit the
    /// stock way ([`OnRefusal::CommitStock`], the default) or fail with
    /// [`PcsError::NotAdmitted`] ([`OnRefusal::Fail`]).
    #[must_use]
    pub fn on_admission_refusal(mut self, on_refusal: OnRefusal) -> Self {
        self.on_refusal = on_refusal;
        self
    }

    /// The wrapped stock PCS.
    pub fn inner(&self) -> &InnerPcs<B, FriMmcs, H> {
        &self.inner
    }

    /// The DFT (shared with the wrapped PCS).
    pub fn dft(&self) -> &BackendDft<B> {
        &self.dft
    }

    /// The input MMCS (shared with the wrapped PCS): its [`Mmcs::get_matrices`] returns the
    /// committed LDEs.
    pub fn mmcs(&self) -> &BackendMmcs<B, H> {
        &self.mmcs
    }

    /// Where the commits ran so far.
    pub fn stats(&self) -> PcsStats {
        let c = &self.counters;
        PcsStats {
            fused_commits: c.fused_commits.load(Ordering::Relaxed),
            fused_mixed_commits: c.fused_mixed_commits.load(Ordering::Relaxed),
            stock_commits: c.stock_commits.load(Ordering::Relaxed),
            device_errors: c.device_errors.load(Ordering::Relaxed),
            device_openings: c.device_openings.load(Ordering::Relaxed),
            host_openings: c.host_openings.load(Ordering::Relaxed),
            device_reductions: c.device_reductions.load(Ordering::Relaxed),
            admission_refusals: c.admission_refusals.load(Ordering::Relaxed),
            device_fri_rounds: c.device_fri_rounds.load(Ordering::Relaxed),
            host_fri_rounds: c.host_fri_rounds.load(Ordering::Relaxed),
            device_quotients: c.device_quotients.load(Ordering::Relaxed),
            device_quotient_commits: c.device_quotient_commits.load(Ordering::Relaxed),
            host_quotients: c.host_quotients.load(Ordering::Relaxed),
        }
    }

    /// Why a trace commit's prover data holds no device LDE, in words naming the fix (for
    /// [`crate::prove`]'s warning).
    pub(crate) fn why_no_device_lde<M: Matrix<Goldilocks>>(
        &self,
        trace: &crate::mmcs::BackendProverData<B, M, H>,
    ) -> String {
        let same_backend = self.dft.backend().is_ok_and(|b| Arc::ptr_eq(&b, self.mmcs.backend()));
        if !same_backend {
            return "the trace's LDE is not on the device: the DFT and the MMCS hold different backend instances, \
                    so commits never fuse (build both from one Arc<Backend>)"
                .into();
        }
        // A host tree: below the threshold (the message at the end), or a fallback. (A device
        // tree's matrices may still be on the device: they are not asked for.)
        let below_threshold = || {
            let matrices = self.mmcs.get_matrices(trace);
            let elems = matrices.iter().map(|m| m.height().saturating_mul(m.width()));
            elems.fold(0usize, usize::saturating_add) < unfused_min_tree_elems(&self.dft, &self.mmcs, self.log_blowup)
        };
        if !trace.is_on_device() && !below_threshold() {
            return "the trace's LDE is not on the device: its commit fell back to the host (see the earlier warning)"
                .into();
        }
        if !self.device_openings {
            return "the trace's LDE is not kept on the device: BackendPcs::with_device_openings(false)".into();
        }
        if self.products.get() == Some(&false) {
            return "the trace's LDE is not kept on the device: the backend has no opening products".into();
        }
        format!(
            "the trace's commit did not fuse on the device: the DFT keeps LDEs under {} elements on the host \
             (BackendDft::default()'s measured threshold; BackendDft::new(backend) or with_min_backend_elems(0) \
             fuses every commit)",
            self.dft.min_backend_elems()
        )
    }

    /// Whether `backend` implements the opening products ([`Backend::row_dot_products`]): asked
    /// once with a one-element call, so a fused commit keeps its LDE on the device only where the
    /// openings can use it.
    fn has_products(&self, backend: &B) -> bool {
        *self.products.get_or_init(|| {
            let probe = backend.upload(&[1]).and_then(|one| {
                let mut out = [0];
                backend.row_dot_products(&one, MatrixShape::new(1, 1)?, &[1], &mut out)
            });
            match probe {
                Ok(()) => true,
                Err(e) if e.is_unsupported() => false,
                Err(e) => {
                    tracing::warn!(
                        "plonky3-adapter: {} opening products unusable ({e}); openings run on the host",
                        backend.info().backend
                    );
                    false
                }
            }
        })
    }

    /// Whether `backend` reduces openings ([`Backend::reduce_openings`]), probed once with a
    /// one-row call; a backend without it, or whose probe fails (with a warning), has its
    /// openings reduced on the host.
    pub(crate) fn reduces(&self, backend: &B) -> bool {
        *self.reductions.get_or_init(|| {
            let probe = backend_api::ReductionPoint::new(&[2], &[1], &[1]).and_then(|point| {
                let (one, mut acc) = (backend.upload(&[1])?, backend.alloc(1)?);
                let call = backend_api::ReductionCall { coeffs: &[1], shift: 7, points: &[point], accumulate: false };
                backend.reduce_openings(&one, MatrixShape::new(1, 1)?, &call, &mut acc)
            });
            match probe {
                Ok(()) => true,
                Err(e) if e.is_unsupported() => false,
                Err(e) => {
                    tracing::warn!(
                        "plonky3-adapter: {} reduced openings unusable ({e}); they are reduced on the host",
                        backend.info().backend
                    );
                    false
                }
            }
        })
    }

    /// Whether a trace of `height x width` committed over `domain` would keep its LDE on the
    /// device for the openings and the quotient, as far as can be told before the commit.
    pub(crate) fn may_keep_lde(
        &self,
        domain: TwoAdicMultiplicativeCoset<Goldilocks>,
        height: usize,
        width: usize,
    ) -> bool {
        self.device_openings
            && self.products.get() != Some(&false)
            && self.fusion_of(&[(domain, height, width)]).is_some()
    }

    /// The backend and the commit's heights when a commit of matrices of these `(domain, height,
    /// width)` fuses (see [`BackendPcs`]): every matrix has columns and its domain's size as its
    /// height, the matrices of one height share one coset, there are at least
    /// [`BackendDft::min_backend_elems`] elements in all, and the DFT and the MMCS hold the same
    /// backend instance.
    fn fusion_of(
        &self,
        evaluations: &[(TwoAdicMultiplicativeCoset<Goldilocks>, usize, usize)],
    ) -> Option<(Arc<B>, Vec<FusedGroup>)> {
        if evaluations.is_empty() || evaluations.iter().any(|&(d, height, width)| height != d.size() || width == 0) {
            return None;
        }
        // Tallest first, in the given order within one height: the groups of the MMCS's plan.
        let mut order: Vec<usize> = (0..evaluations.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(evaluations[i].1));
        let mut heights: Vec<(usize, Goldilocks, Vec<usize>)> = Vec::new();
        for i in order {
            let (domain, m_height, _) = evaluations[i];
            match heights.last_mut() {
                Some((height, shift, members)) if *height == m_height => {
                    if *shift != domain.shift() {
                        return None;
                    }
                    members.push(i);
                }
                _ => heights.push((m_height, domain.shift(), vec![i])),
            }
        }
        let elems =
            evaluations.iter().try_fold(0usize, |n, &(_, height, width)| n.checked_add(height.checked_mul(width)?))?;
        let backend = self.dft.route_elems(elems).filter(|b| Arc::ptr_eq(b, self.mmcs.backend()))?;
        let groups = heights
            .into_iter()
            .map(|(height, shift, members)| {
                let widths: Vec<usize> = members.iter().map(|&i| evaluations[i].2).collect();
                // `TwoAdicFriPcs::coset_ldes`: evaluations over `xH` become evaluations over `gK`.
                let shift = Goldilocks::GENERATOR / shift;
                let params = crate::dft::backend_params(height, widths.iter().sum(), self.log_blowup, shift)?;
                Some(FusedGroup { params, members, widths })
            })
            .collect::<Option<Vec<_>>>()?;
        Some((Arc::clone(backend), groups))
    }

    /// The admission's ticket for a fused commit of `groups` (none without an admission).
    fn admit(&self, backend: &B, groups: &[FusedGroup]) -> commit::Result<Option<Ticket>> {
        if self.admission.is_none() {
            return Ok(None);
        }
        let heights: Vec<LdeParams> = groups.iter().map(|g| g.params).collect();
        self.admit_model(backend, &fused_heights_model(&heights)?)
    }

    /// The admission's ticket for device work of `model` (none without an admission).
    pub(crate) fn admit_model(&self, backend: &B, model: &MemoryModel) -> commit::Result<Option<Ticket>> {
        let Some(admission) = &self.admission else { return Ok(None) };
        let memory = || {
            let info = backend.info();
            (info.total_memory > 0).then_some(DeviceMemory { free: info.free_memory, total: info.total_memory })
        };
        admission.admit_on(model, &memory).map(Some)
    }

    /// The fused commit: each height's matrices up, side by side, their LDE, the leaves and one
    /// tree on the device, the LDEs down into bit-reversed host matrices, one per input matrix.
    fn commit_fused(
        &self,
        backend: &B,
        groups: &[FusedGroup],
        evaluations: &[(TwoAdicMultiplicativeCoset<Goldilocks>, &RowMajorMatrix<Goldilocks>)],
        ticket: Option<Ticket>,
    ) -> backend_api::Result<Committed<B, RowMajorMatrix<Goldilocks>, H>> {
        let span = tracing::info_span!("fused commit: trace up, LDE").entered();
        let ldes = groups
            .iter()
            .map(|group| match group.members[..] {
                [one] => lde_on_device(backend, as_words(&evaluations[one].1.values), &group.params),
                _ => {
                    // Column-wise concatenation, so one leaf covers a row of each matrix in order.
                    let members: Vec<&RowMajorMatrix<Goldilocks>> =
                        group.members.iter().map(|&i| evaluations[i].1).collect();
                    let mut trace = vec![0u64; group.params.trace().len()];
                    concat_rows(&members, &mut trace)?;
                    let lde = lde_on_device(backend, &trace, &group.params)?;
                    crate::reclaim::drop_later(trace);
                    Ok(lde)
                }
            })
            .collect::<backend_api::Result<Vec<_>>>()?;
        drop(span);
        self.commit_lde(backend, ldes, groups.to_vec(), ticket)
    }

    /// The tail of a device commit: `ldes` (one per group, tallest first: the natural-order
    /// row-major LDE of its parameters, its matrices side by side) hashed and one tree built on
    /// the device, and either kept there for the openings (their host copies made on first use)
    /// or downloaded into bit-reversed host matrices. `ticket` shrinks to what stays on the device
    /// with the prover data.
    fn commit_lde(
        &self,
        backend: &B,
        ldes: Vec<B::Buffer>,
        groups: Vec<FusedGroup>,
        ticket: Option<Ticket>,
    ) -> backend_api::Result<Committed<B, RowMajorMatrix<Goldilocks>, H>> {
        let keep = self.device_openings && self.has_products(backend);
        let shapes: Vec<MatrixShape> = groups.iter().map(|g| g.params.lde_shape()).collect();
        let matrices = if keep {
            // The LDEs stay on the device: their host copies are made only if a caller asks.
            let keep_host = self.keep_host_matrices;
            let mut dims = vec![(0, 0); groups.iter().map(|g| g.members.len()).sum()];
            for g in &groups {
                for (&i, &w) in g.members.iter().zip(&g.widths) {
                    dims[i] = (g.params.lde_shape().rows(), w);
                }
            }
            DeviceLdeMatrices::OnFirstUse {
                dims,
                download: Box::new(move |backend: &B, ldes: &[DeviceLde<B>]| {
                    let buffers: Vec<&B::Buffer> = ldes.iter().map(|lde| &lde.buffer).collect();
                    download_groups(backend, &buffers, &groups, keep_host)
                }),
            }
        } else {
            let _span = tracing::info_span!("fused commit: LDE down").entered();
            let buffers: Vec<&B::Buffer> = ldes.iter().collect();
            DeviceLdeMatrices::Host {
                matrices: download_groups(backend, &buffers, &groups, self.keep_host_matrices)?,
                keep,
            }
        };
        let guard = ticket.map(|mut t| {
            // What stays on the device with the prover data: the tree, and the LDEs if kept.
            let ldes: usize = if keep { shapes.iter().map(|s| s.bytes()).sum() } else { 0 };
            t.shrink_to(tree_bytes(&shapes).saturating_add(ldes));
            Box::new(t) as Box<dyn Send + Sync>
        });
        let recycle = self.keep_host_matrices.then_some(keep_matrices as fn(Vec<RowMajorMatrix<Goldilocks>>));
        let _span = tracing::info_span!("fused commit: leaves, tree").entered();
        self.mmcs.commit_device_ldes(ldes.into_iter().zip(shapes).collect(), matrices, guard, recycle)
    }

    /// One quotient's commit from its values on the device: [`BackendPcs::commit_quotients_on`]
    /// of one table, `TwoAdicFriPcs::commit_quotient`'s bytes.
    pub(crate) fn commit_quotient_on(
        &self,
        backend: &B,
        values: &B::Buffer,
        quotient_domain: TwoAdicMultiplicativeCoset<Goldilocks>,
        degree: usize,
        num_chunks: usize,
    ) -> Result<Committed<B, RowMajorMatrix<Goldilocks>, H>, String> {
        self.commit_quotients_on(backend, &[(values, quotient_domain, degree, num_chunks)])
    }

    /// `Pcs::commit` of matrices given by value or borrowed: a fused commit reads them where they
    /// are (and frees the ones it was given on a thread of its own), and only a commit that goes
    /// the stock way (no fusion, a refused admission, a device error) copies the borrowed ones.
    pub(crate) fn commit_cow<Challenge, Challenger>(
        &self,
        evaluations: Vec<(TwoAdicMultiplicativeCoset<Goldilocks>, Cow<'_, RowMajorMatrix<Goldilocks>>)>,
    ) -> Result<Committed<B, RowMajorMatrix<Goldilocks>, H>, PcsError>
    where
        B: 'static,
        FriMmcs: Mmcs<Challenge>,
        Challenge: ExtensionField<Goldilocks>,
        Challenger:
            FieldChallenger<Goldilocks> + CanObserve<FriMmcs::Commitment> + GrindingChallenger<Witness = Goldilocks>,
    {
        let stock =
            |evaluations: Vec<(TwoAdicMultiplicativeCoset<Goldilocks>, Cow<'_, RowMajorMatrix<Goldilocks>>)>| {
                self.counters.stock_commits.fetch_add(1, Ordering::Relaxed);
                let owned = evaluations.into_iter().map(|(d, m)| (d, m.into_owned()));
                Ok(Pcs::<Challenge, Challenger>::commit(&self.inner, owned)?)
            };
        let dims: Vec<_> = evaluations.iter().map(|(d, m)| (*d, m.height(), m.width())).collect();
        let Some((backend, groups)) = self.fusion_of(&dims) else {
            return stock(evaluations);
        };
        let tallest = groups[0].params;
        let ticket = match self.admit(&backend, &groups) {
            Ok(ticket) => ticket,
            Err(e) => {
                self.counters.admission_refusals.fetch_add(1, Ordering::Relaxed);
                let refused = PcsError::NotAdmitted {
                    backend: backend.info().backend,
                    trace: tallest.trace(),
                    heights: groups.len(),
                    blowup: tallest.blowup(),
                    source: Box::new(e),
                };
                if self.on_refusal == OnRefusal::Fail {
                    return Err(refused);
                }
                tracing::warn!("plonky3-adapter: {refused}; committing through TwoAdicFriPcs");
                return stock(evaluations);
            }
        };
        let matrices: Vec<(TwoAdicMultiplicativeCoset<Goldilocks>, &RowMajorMatrix<Goldilocks>)> =
            evaluations.iter().map(|(d, m)| (*d, &**m)).collect();
        match self.commit_fused(&backend, &groups, &matrices, ticket) {
            Ok(done) => {
                self.counters.fused_commits.fetch_add(1, Ordering::Relaxed);
                if groups.len() > 1 {
                    self.counters.fused_mixed_commits.fetch_add(1, Ordering::Relaxed);
                }
                // The trace is on the device: the host pages it was given are freed while the
                // prover goes on (borrowed ones are the caller's).
                let given: Vec<RowMajorMatrix<Goldilocks>> = evaluations
                    .into_iter()
                    .filter_map(|(_, m)| match m {
                        Cow::Owned(m) => Some(m),
                        Cow::Borrowed(_) => None,
                    })
                    .collect();
                crate::reclaim::drop_later(given);
                Ok(done)
            }
            Err(e) => {
                self.counters.device_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    "plonky3-adapter: {} fused commit of {}{} (blowup {}) failed: {e}; committing through TwoAdicFriPcs",
                    backend.info().backend,
                    tallest.trace(),
                    and_shorter(groups.len()),
                    tallest.blowup()
                );
                stock(evaluations)
            }
        }
    }

    /// The quotients of one or several tables committed in one commitment from their values on
    /// the device, under the memory admission, counted: `TwoAdicFriPcs`'s bytes for
    /// `get_quotient_ldes` of each table's chunks followed by `commit_ldes` of them all, which is
    /// what p3-batch-stark's prover does on the host (for one table, `commit_quotient`'s). Each
    /// `quotients` entry is a table's values (`degree` words per point of its quotient domain, in
    /// the domain's order), that domain, the degree and the table's chunk count. The values are
    /// left as they are, so that a caller can still download them after an error; the error is
    /// why the commit did not happen on the device (a refusal, a device error), for a warning.
    ///
    /// The tables' chunks are grouped by their LDE's height, tallest first (Plonky3's MMCS order);
    /// one height's chunks are built column-major side by side, table after table
    /// ([`quotient_chunks_lde`]), then turned row-major, and the heights committed as one tree
    /// with the shorter ones injected at their level, the LDEs kept for the openings.
    pub(crate) fn commit_quotients_on(
        &self,
        backend: &B,
        quotients: &[(&B::Buffer, TwoAdicMultiplicativeCoset<Goldilocks>, usize, usize)],
    ) -> Result<Committed<B, RowMajorMatrix<Goldilocks>, H>, String> {
        let what = match quotients.len() {
            1 => format!("{} quotient commit", backend.info().backend),
            n => format!("{} quotient commit of {n} tables", backend.info().backend),
        };
        let tables: Vec<LdeParams> = quotients
            .iter()
            .map(|&(values, domain, degree, chunks)| {
                let params = quotient_lde_params(domain, degree, chunks, self.log_blowup)?;
                if values.len() != params.trace().len() {
                    return Err(backend_api::Error::InvalidArgument(format!(
                        "the quotient's values hold {} words, not {} points of {degree}",
                        values.len(),
                        domain.size()
                    )));
                }
                Ok(params)
            })
            .collect::<backend_api::Result<_>>()
            .map_err(|e| format!("the {what}: {e}"))?;
        let heights = quotient_heights(&tables).map_err(|e| format!("the {what}: {e}"))?;
        let ticket = quotient_heights_model(&tables, &heights)
            .and_then(|model| self.admit_model(backend, &model))
            .map_err(|e| {
                self.counters.admission_refusals.fetch_add(1, Ordering::Relaxed);
                format!("the {what} was not admitted ({e})")
            })?;
        // The first chunk of each table among the commit's matrices.
        let firsts: Vec<usize> = quotients
            .iter()
            .scan(0, |next, &(_, _, _, chunks)| {
                let first = *next;
                *next += chunks;
                Some(first)
            })
            .collect();
        let run = || -> backend_api::Result<Committed<B, RowMajorMatrix<Goldilocks>, H>> {
            let span = tracing::info_span!("quotient commit: chunks' LDEs").entered();
            let mut ldes = Vec::with_capacity(heights.len());
            let mut groups = Vec::with_capacity(heights.len());
            for height in &heights {
                let lde = match height.tables[..] {
                    [i] => {
                        let (values, domain, _, chunks) = quotients[i];
                        quotient_chunks_lde(backend, values, domain, &tables[i], chunks, false)?
                    }
                    _ => {
                        let shape = height.params.lde_shape();
                        let mut columns = backend.alloc(shape.len())?;
                        let mut at = 0;
                        for &i in &height.tables {
                            let (values, domain, _, chunks) = quotients[i];
                            let table = quotient_chunks_lde(backend, values, domain, &tables[i], chunks, true)?;
                            let len = tables[i].lde_shape().len();
                            backend.batched_copy(&table, &mut columns, &[CopyRange::new(0, at, len)])?;
                            at += len;
                        }
                        let by_columns = MatrixShape::new(shape.cols(), shape.rows())?;
                        backend.transpose_in_place(&mut columns, by_columns, transpose_cap(by_columns))?;
                        columns
                    }
                };
                ldes.push(lde);
                let mut members = Vec::new();
                let mut widths = Vec::new();
                for &i in &height.tables {
                    let (_, _, degree, chunks) = quotients[i];
                    members.extend(firsts[i]..firsts[i] + chunks);
                    widths.extend(std::iter::repeat_n(degree, chunks));
                }
                groups.push(FusedGroup { params: height.params, members, widths });
            }
            drop(span);
            self.commit_lde(backend, ldes, groups, ticket)
        };
        match run() {
            Ok(done) => {
                self.counters.device_quotient_commits.fetch_add(1, Ordering::Relaxed);
                Ok(done)
            }
            Err(e) => {
                self.counters.device_errors.fetch_add(1, Ordering::Relaxed);
                let shapes: Vec<String> = heights.iter().map(|h| h.params.lde_shape().to_string()).collect();
                Err(format!("{what} into the {} LDE: {e}", shapes.join(" and ")))
            }
        }
    }

    /// `TwoAdicFriPcs::commit_quotient`, counted as a stock commit.
    pub(crate) fn commit_quotient_stock<Challenge, Challenger>(
        &self,
        quotient_domain: TwoAdicMultiplicativeCoset<Goldilocks>,
        evaluations: RowMajorMatrix<Goldilocks>,
        num_chunks: usize,
    ) -> Result<Committed<B, RowMajorMatrix<Goldilocks>, H>, PcsError>
    where
        B: 'static,
        FriMmcs: Mmcs<Challenge>,
        Challenge: ExtensionField<Goldilocks>,
        Challenger:
            FieldChallenger<Goldilocks> + CanObserve<FriMmcs::Commitment> + GrindingChallenger<Witness = Goldilocks>,
    {
        self.counters.stock_commits.fetch_add(1, Ordering::Relaxed);
        Ok(UnivariateStarkPcs::<Challenge, Challenger>::commit_quotient(
            &self.inner,
            quotient_domain,
            evaluations,
            num_chunks,
        )?)
    }
}

/// The device memory model of a fused commit of `params` (what [`BackendPcs::with_admission`]
/// admits): the LDE, its tree and the LDE's twiddles, the `commit` crate's terms. There is no
/// transpose: the scratch term holds the commit's own temporaries instead, the larger of the
/// LDE download's staging buffers and the leaves' reordering buffer (one digest per row), which
/// are never live at once.
///
/// # Errors
/// `MemoryModel::of`'s (a model whose bytes overflow `usize`).
pub fn fused_commit_model(params: &LdeParams) -> commit::Result<MemoryModel> {
    let shape = CommitShape {
        lde: *params,
        layout: LeafLayout::Rows,
        split: false,
        scratch_cap: (params.trace().cols() + 1) * ELEM_BYTES,
        snapshot: false,
    };
    let (rows, cols) = (params.lde_shape().rows(), params.lde_shape().cols());
    let reorder = rows
        .checked_mul(DIGEST_WORDS * ELEM_BYTES)
        .ok_or(backend_api::Error::SizeOverflow { what: "fused commit leaves", elems: rows })?;
    let scratch = staging_bytes(rows, cols).max(reorder);
    Ok(MemoryModel { scratch, ..MemoryModel::of(&shape)? })
}

/// The device memory model of a fused commit of matrices of several heights (a p3-batch-stark
/// proof's traces: one matrix per table), `heights` the LDE parameters of each height's matrices
/// side by side, tallest first: every height's LDE (all live at the end, kept for the openings),
/// one tree whose shorter heights are injected at their level (each a segment over twice its
/// rows, [`BackendMmcs`]'s layout), every height's twiddles, and the largest of the heights'
/// temporaries (a shorter height's leaves are reordered beside its injected digests). With one
/// height it is [`fused_commit_model`].
///
/// # Errors
/// `MemoryModel::of`'s; [`backend_api::Error::SizeOverflow`] when the sums overflow `usize`;
/// [`backend_api::Error::InvalidArgument`] for no heights.
pub fn fused_heights_model(heights: &[LdeParams]) -> commit::Result<MemoryModel> {
    let Some((tallest, shorter)) = heights.split_first() else {
        return Err(backend_api::Error::InvalidArgument("a fused commit of no matrices".into()).into());
    };
    let overflow = || backend_api::Error::SizeOverflow {
        what: "fused commit of several heights",
        elems: tallest.lde_shape().len(),
    };
    let mut model = fused_commit_model(tallest)?;
    for params in shorter {
        let one = fused_commit_model(params)?;
        let rows = params.lde_shape().rows();
        let segment = TreeShape::new(rows.checked_mul(2).ok_or_else(overflow)?)?.bytes();
        let injected = rows.checked_mul(DIGEST_WORDS * ELEM_BYTES).ok_or_else(overflow)?;
        model.lde = model.lde.checked_add(one.lde).ok_or_else(overflow)?;
        model.trees = model.trees.checked_add(segment).ok_or_else(overflow)?;
        model.twiddles = model.twiddles.checked_add(one.twiddles).ok_or_else(overflow)?;
        model.scratch = model.scratch.max(one.scratch.checked_add(injected).ok_or_else(overflow)?);
    }
    [model.lde, model.trees, model.twiddles, model.scratch]
        .into_iter()
        .try_fold(0usize, usize::checked_add)
        .ok_or_else(overflow)?;
    Ok(model)
}

/// The device bytes of the tree [`BackendMmcs`] builds over LDEs of these shapes (tallest first):
/// the tallest height's node array and one segment over twice the rows of each shorter height.
fn tree_bytes(shapes: &[MatrixShape]) -> usize {
    shapes
        .iter()
        .enumerate()
        .map(|(g, s)| {
            let leaves = if g == 0 { s.rows() } else { s.rows().saturating_mul(2) };
            TreeShape::new(leaves).map_or(0, |t| t.bytes())
        })
        .fold(0, usize::saturating_add)
}

/// One height of a device commit: its LDE's parameters (the height's matrices side by side) and
/// which of the commit's matrices it holds, in order, with their widths.
#[derive(Clone, Debug)]
struct FusedGroup {
    params: LdeParams,
    members: Vec<usize>,
    widths: Vec<usize>,
}

/// The host matrices of device LDEs `ldes` (one per group of `groups`), in the commit's order:
/// each LDE downloaded into bit-reversed rows and split into its matrices ([`split_columns`]).
fn download_groups<B: Backend>(
    backend: &B,
    ldes: &[&B::Buffer],
    groups: &[FusedGroup],
    keep: bool,
) -> backend_api::Result<Vec<RowMajorMatrix<Goldilocks>>> {
    let mut matrices: Vec<Option<RowMajorMatrix<Goldilocks>>> =
        (0..groups.iter().map(|g| g.members.len()).sum()).map(|_| None).collect();
    for (lde, group) in ldes.iter().zip(groups) {
        let words = download_lde(backend, lde, &group.params)?;
        for (&i, m) in group.members.iter().zip(split_columns(words, &group.widths, keep)) {
            matrices[i] = Some(m);
        }
    }
    Ok(matrices.into_iter().map(|m| m.expect("the groups hold every matrix of the commit")).collect())
}

/// The quotient's chunks side by side as one LDE's parameters: `quotient_domain.size() /
/// num_chunks` rows of `num_chunks * degree` columns, the PCS's blowup, and the first chunk's
/// shift (`TwoAdicFriPcs::coset_ldes`: evaluations over `xH` become evaluations over `gK`).
///
/// # Errors
/// [`backend_api::Error::InvalidArgument`] for a chunk count that is not a power of two dividing
/// the domain, or a zero degree; [`LdeParams::new`]'s errors.
pub(crate) fn quotient_lde_params(
    quotient_domain: TwoAdicMultiplicativeCoset<Goldilocks>,
    degree: usize,
    num_chunks: usize,
    log_blowup: usize,
) -> backend_api::Result<LdeParams> {
    let points = quotient_domain.size();
    if degree == 0 || !num_chunks.is_power_of_two() || num_chunks > points {
        return Err(backend_api::Error::InvalidArgument(format!(
            "{num_chunks} chunks of degree-{degree} values do not split a quotient domain of {points} points"
        )));
    }
    let cols = num_chunks
        .checked_mul(degree)
        .ok_or(backend_api::Error::SizeOverflow { what: "quotient chunks", elems: num_chunks })?;
    let shift = Goldilocks::GENERATOR / quotient_domain.shift();
    LdeParams::new(MatrixShape::new(points / num_chunks, cols)?, 1 << log_blowup, shift.as_canonical_u64())
}

/// The scratch cap of the quotient commit's transposes: one block of every row plus its run,
/// `rows * (cols + 1)` words, so that the plan is a single block (these matrices are a few
/// columns of the quotient's LDE). Two blocks of half the rows of a `4 x 2^21` matrix took the
/// CPU backend 2.9 s against 68 ms for one, and a CUDA quotient commit of `4 x 2^17` 94 ms.
fn transpose_cap(shape: MatrixShape) -> usize {
    shape.rows().saturating_mul(shape.cols() + 1).saturating_mul(ELEM_BYTES)
}

/// The LDE of one quotient's chunks side by side (`params`, [`quotient_lde_params`]) from its
/// values on the device: row-major, or column-major (column `j` at `j * rows`) when
/// `column_major`; `TwoAdicFriPcs::commit_quotient`'s matrices.
///
/// `values` holds `d` words per point of `quotient_domain`, in the domain's order (the flattened
/// quotient). Row `i` of chunk `c` is point `i * num_chunks + c` (`split_evals`), so `values`,
/// read as a matrix of `num_chunks * d` columns, already holds the chunks side by side. Each
/// chunk lies on its own coset and its LDE takes its own shift, which one [`Backend::coset_lde`]
/// cannot: the LDE of the whole matrix is taken once per chunk, with that chunk's shift, and that
/// chunk's columns kept (column-major, one copy each). This costs `num_chunks` times the least
/// arithmetic on a matrix of a few columns, a small fraction of the trace's commit.
fn quotient_chunks_lde<B: Backend>(
    backend: &B,
    values: &B::Buffer,
    quotient_domain: TwoAdicMultiplicativeCoset<Goldilocks>,
    params: &LdeParams,
    num_chunks: usize,
    column_major: bool,
) -> backend_api::Result<B::Buffer> {
    let lde_shape = params.lde_shape();
    let rows = lde_shape.rows();
    let by_columns = MatrixShape::new(lde_shape.cols(), rows)?;
    if num_chunks == 1 {
        let mut lde = backend.coset_lde(values, params)?;
        if column_major {
            backend.transpose_in_place(&mut lde, lde_shape, transpose_cap(lde_shape))?;
        }
        return Ok(lde);
    }
    let degree = lde_shape.cols() / num_chunks;
    let mut columns = backend.alloc(lde_shape.len())?;
    for (c, domain) in quotient_domain.split_domains(num_chunks).iter().enumerate() {
        let shift = (Goldilocks::GENERATOR / domain.shift()).as_canonical_u64();
        let mut lde = backend.coset_lde(values, &LdeParams::new(params.trace(), params.blowup(), shift)?)?;
        backend.transpose_in_place(&mut lde, lde_shape, transpose_cap(lde_shape))?;
        let at = c * degree * rows;
        backend.batched_copy(&lde, &mut columns, &[CopyRange::new(at, at, degree * rows)])?;
    }
    if !column_major {
        backend.transpose_in_place(&mut columns, by_columns, transpose_cap(by_columns))?;
    }
    Ok(columns)
}

/// One height of a batch's quotient commit: the LDE parameters of its tables' chunks side by
/// side, and which of the `quotients` they are, in order.
struct QuotientHeight {
    params: LdeParams,
    tables: Vec<usize>,
}

/// The heights of a batch's quotient commit, tallest first, each table's chunks in the given
/// order within one height (the order Plonky3's MMCS groups matrices in).
fn quotient_heights(tables: &[LdeParams]) -> backend_api::Result<Vec<QuotientHeight>> {
    let mut order: Vec<usize> = (0..tables.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(tables[i].lde_shape().rows()));
    let mut heights: Vec<QuotientHeight> = Vec::new();
    for i in order {
        let p = tables[i];
        match heights.last_mut() {
            Some(h) if h.params.lde_shape().rows() == p.lde_shape().rows() => {
                let cols =
                    h.params.trace().cols().checked_add(p.trace().cols()).ok_or(backend_api::Error::SizeOverflow {
                        what: "quotient chunks of one height",
                        elems: p.trace().cols(),
                    })?;
                h.params = LdeParams::new(MatrixShape::new(h.params.trace().rows(), cols)?, p.blowup(), p.shift())?;
                h.tables.push(i);
            }
            _ => heights.push(QuotientHeight { params: p, tables: vec![i] }),
        }
    }
    Ok(heights)
}

/// The device memory model of a commit of several tables' quotients (`tables`, grouped into
/// `heights`): every height's chunks as one fused commit of several heights
/// ([`fused_heights_model`]), the scratch term also holding every table's values (all live until
/// committed) and the largest of one table's transients (its whole-width chunk LDE and
/// transposes, as [`quotient_commit_model`] counts them, and its own column-major chunks where
/// its height holds other tables too, beside the height's LDE being assembled). For one table it
/// is [`quotient_commit_model`].
///
/// # Errors
/// [`fused_heights_model`]'s and [`quotient_commit_model`]'s.
fn quotient_heights_model(tables: &[LdeParams], heights: &[QuotientHeight]) -> commit::Result<MemoryModel> {
    let params: Vec<LdeParams> = heights.iter().map(|h| h.params).collect();
    let fused = fused_heights_model(&params)?;
    let overflow =
        || backend_api::Error::SizeOverflow { what: "quotient commit of several tables", elems: tables.len() };
    let values = tables.iter().map(|p| p.trace().bytes()).try_fold(0usize, usize::checked_add).ok_or_else(overflow)?;
    let mut largest = fused.scratch;
    for height in heights {
        for &i in &height.tables {
            let p = &tables[i];
            // quotient_commit_model's scratch counts the table's values, counted once above.
            let own = quotient_commit_model(p)?.scratch - p.trace().bytes();
            let beside = if height.tables.len() > 1 { p.lde_shape().bytes() } else { 0 };
            largest = largest.max(own.checked_add(beside).ok_or_else(overflow)?);
        }
    }
    let scratch = values.checked_add(largest).ok_or_else(overflow)?;
    [fused.lde, fused.trees, fused.twiddles, scratch]
        .into_iter()
        .try_fold(0usize, usize::checked_add)
        .ok_or_else(overflow)?;
    Ok(MemoryModel { scratch, ..fused })
}

/// The device memory model of a quotient commit of `params` (the chunks side by side: `points /
/// chunks` rows of `chunks * d` columns, the PCS's blowup): a fused commit's
/// ([`fused_commit_model`]), with the scratch term also holding the quotient's values, one
/// chunk's whole-width LDE and the larger transpose's scratch, which are live beside the LDE being
/// assembled.
///
/// # Errors
/// [`fused_commit_model`]'s and [`TransposeGeometry::new`]'s.
pub fn quotient_commit_model(params: &LdeParams) -> commit::Result<MemoryModel> {
    let fused = fused_commit_model(params)?;
    let lde_shape = params.lde_shape();
    let column_major = MatrixShape::new(lde_shape.cols(), lde_shape.rows())?;
    let transposes = TransposeGeometry::new(lde_shape, transpose_cap(lde_shape))?
        .scratch_bytes()
        .max(TransposeGeometry::new(column_major, transpose_cap(column_major))?.scratch_bytes());
    let scratch = [params.trace().bytes(), lde_shape.bytes(), transposes.max(fused.scratch)]
        .into_iter()
        .try_fold(0usize, usize::checked_add)
        .ok_or(backend_api::Error::SizeOverflow { what: "quotient commit scratch", elems: lde_shape.len() })?;
    Ok(MemoryModel { scratch, ..fused })
}

/// Keeps a dropped fused commit's host matrix for the next download of its size
/// ([`BackendPcs::with_kept_host_matrices`]). Several matrices were split from one download,
/// which [`split_columns`] kept instead: no download has their lengths, so they are freed.
fn keep_matrices(matrices: Vec<RowMajorMatrix<Goldilocks>>) {
    match <[_; 1]>::try_from(matrices) {
        Ok([m]) => crate::bitrev::keep(into_word_vec(m.values)),
        Err(several) => crate::reclaim::drop_later(several),
    }
}

/// Frees the host matrices that fused commits of every [`BackendPcs`] keep after their prover
/// data is dropped ([`BackendPcs::with_kept_host_matrices`]) and returns their bytes: call it
/// when the process is done proving, or to give the memory back between proofs.
pub fn free_kept_host_matrices() -> usize {
    crate::bitrev::free_kept()
}

/// The row-major matrix `words` of `widths.iter().sum()` columns as one matrix per width, in
/// order (the matrix itself when there is one). Split, `words` is kept for the next download of
/// its length where `keep` is set (the next commit of these widths), freed otherwise.
fn split_columns(words: Vec<u64>, widths: &[usize], keep: bool) -> Vec<RowMajorMatrix<Goldilocks>> {
    if let [w] = widths {
        return vec![RowMajorMatrix::new(into_field_vec(words), *w)];
    }
    let cols: usize = widths.iter().sum();
    let rows = words.len() / cols;
    let mut at = 0;
    let matrices = widths
        .iter()
        .map(|&w| {
            let mut values = vec![Goldilocks::ZERO; rows * w];
            values.par_chunks_mut(w).zip(words.par_chunks(cols)).for_each(|(out, row)| {
                for (o, &x) in out.iter_mut().zip(&row[at..at + w]) {
                    *o = Goldilocks::new(x);
                }
            });
            at += w;
            RowMajorMatrix::new(values, w)
        })
        .collect();
    if keep {
        crate::bitrev::keep(words);
    } else {
        crate::reclaim::drop_later(words);
    }
    matrices
}

impl<B, FriMmcs, H, Challenge, Challenger> Pcs<Challenge, Challenger> for BackendPcs<B, FriMmcs, H>
where
    B: Backend + 'static,
    H: MmcsHash,
    FriMmcs: Mmcs<Challenge> + 'static,
    Challenge: ExtensionField<Goldilocks>,
    Challenger:
        FieldChallenger<Goldilocks> + CanObserve<FriMmcs::Commitment> + GrindingChallenger<Witness = Goldilocks>,
{
    type Domain = TwoAdicMultiplicativeCoset<Goldilocks>;
    type Commitment = <InnerPcs<B, FriMmcs, H> as Pcs<Challenge, Challenger>>::Commitment;
    type ProverData = <InnerPcs<B, FriMmcs, H> as Pcs<Challenge, Challenger>>::ProverData;
    type Proof = <InnerPcs<B, FriMmcs, H> as Pcs<Challenge, Challenger>>::Proof;
    type Error = <InnerPcs<B, FriMmcs, H> as Pcs<Challenge, Challenger>>::Error;
    type ProverError = PcsError;

    fn natural_domain_for_degree(&self, degree: usize) -> Self::Domain {
        Pcs::<Challenge, Challenger>::natural_domain_for_degree(&self.inner, degree)
    }

    /// Fused on the device, one LDE per height and one tree (see [`BackendPcs`], "Which commits
    /// fuse"); otherwise, and after a device error, `TwoAdicFriPcs::commit`.
    ///
    /// # Panics
    /// Where `TwoAdicFriPcs::commit` panics (a matrix whose height is not its domain's size).
    fn commit(
        &self,
        evaluations: impl IntoIterator<Item = (Self::Domain, RowMajorMatrix<Goldilocks>)>,
    ) -> Result<(Self::Commitment, Self::ProverData), Self::ProverError> {
        self.commit_cow::<Challenge, Challenger>(evaluations.into_iter().map(|(d, m)| (d, Cow::Owned(m))).collect())
    }

    /// `TwoAdicFriPcs::open`, step for step, with the two products over every committed LDE (the
    /// evaluations at the opening points, the rows' reduction by powers of the batching
    /// challenge) on the device for matrices whose fused commit kept their LDE there (see
    /// [`BackendPcs`], "Openings on the device"), and FRI's layers folded and committed on the
    /// device where the FRI MMCS is [`crate::BackendExtensionMmcs`].
    fn open(
        &self,
        commitment_data_with_opening_points: Vec<OpeningRequest<'_, Self::ProverData, Challenge>>,
        challenger: &mut Challenger,
    ) -> Result<(OpenedValues<Challenge>, Self::Proof), Self::ProverError> {
        // No tree on the device (every commit below the thresholds): the stock openings and
        // FRI, at stock's speed, with FRI's layers (smaller than those commits) below the same
        // threshold on the host too.
        let requests = &commitment_data_with_opening_points;
        let device_fri = crate::fri::on_device::<FriMmcs, B, Challenge, H>(&self.fri.mmcs).is_some();
        let device_lde = requests.iter().any(|r| r.prover_data.holds_device_lde());
        let device_tree = requests.iter().any(|r| r.prover_data.is_on_device());
        let on_device = device_lde || (device_fri && device_tree);
        if !on_device {
            let mmcs = unfused_mmcs(&self.dft, &self.mmcs, self.log_blowup);
            let host_layers =
                crate::fri::with_host_layers::<FriMmcs, B, Challenge, H>(&self.fri, mmcs.min_device_elems());
            return Ok(match host_layers {
                Some(fri) => TwoAdicFriPcs::new(self.dft.clone(), mmcs, fri)
                    .open(commitment_data_with_opening_points, challenger)?,
                None => self.inner.open(commitment_data_with_opening_points, challenger)?,
            });
        }
        Ok(crate::open::open(self, commitment_data_with_opening_points, challenger)?)
    }

    /// `TwoAdicFriPcs::verify`.
    fn verify(
        &self,
        commitments_with_opening_points: Vec<p3_commit::CommitmentOpening<Challenge, Self::Commitment, Self::Domain>>,
        proof: &Self::Proof,
        challenger: &mut Challenger,
    ) -> Result<(), Self::Error> {
        self.inner.verify(commitments_with_opening_points, proof, challenger)
    }
}

impl<B, FriMmcs, H, Challenge, Challenger> UnivariateStarkPcs<Challenge, Challenger> for BackendPcs<B, FriMmcs, H>
where
    B: Backend + 'static,
    H: MmcsHash,
    FriMmcs: Mmcs<Challenge> + 'static,
    Challenge: ExtensionField<Goldilocks>,
    Challenger:
        FieldChallenger<Goldilocks> + CanObserve<FriMmcs::Commitment> + GrindingChallenger<Witness = Goldilocks>,
{
    type EvaluationsOnDomain<'a> =
        <InnerPcs<B, FriMmcs, H> as UnivariateStarkPcs<Challenge, Challenger>>::EvaluationsOnDomain<'a>;

    const ZK: bool = <InnerPcs<B, FriMmcs, H> as UnivariateStarkPcs<Challenge, Challenger>>::ZK;

    fn log_max_trace_height(&self) -> usize {
        UnivariateStarkPcs::<Challenge, Challenger>::log_max_trace_height(&self.inner)
    }

    fn log_min_trace_height(&self) -> usize {
        UnivariateStarkPcs::<Challenge, Challenger>::log_min_trace_height(&self.inner)
    }

    /// `TwoAdicFriPcs::commit_quotient`'s commitment and prover data, with the values uploaded
    /// once and the chunks' split, LDEs, leaves and tree on the device (the LDE kept there for the
    /// openings) where a fused commit of that size would run there; otherwise, and after a device
    /// error (with a warning), `TwoAdicFriPcs::commit_quotient`.
    fn commit_quotient(
        &self,
        quotient_domain: Self::Domain,
        quotient_evaluations: RowMajorMatrix<Goldilocks>,
        num_chunks: usize,
    ) -> Result<(Self::Commitment, Self::ProverData), Self::ProverError> {
        let (width, points) = (quotient_evaluations.width(), quotient_evaluations.height());
        let routed = (num_chunks > 0 && points == quotient_domain.size())
            .then(|| {
                let shift = Goldilocks::GENERATOR / quotient_domain.shift();
                self.dft.route_shape(points / num_chunks, num_chunks * width, self.log_blowup, shift)
            })
            .flatten()
            .filter(|(backend, _)| Arc::ptr_eq(backend, self.mmcs.backend()));
        if let Some((backend, _)) = routed {
            let backend = Arc::clone(backend);
            let on_device = backend
                .upload(as_words(&quotient_evaluations.values))
                .map_err(|e| format!("the quotient's values did not go up to {} ({e})", backend.info().backend))
                .and_then(|values| self.commit_quotient_on(&backend, &values, quotient_domain, width, num_chunks));
            match on_device {
                Ok(done) => return Ok(done),
                Err(why) => tracing::warn!("plonky3-adapter: {why}; committing through TwoAdicFriPcs"),
            }
        }
        self.commit_quotient_stock::<Challenge, Challenger>(quotient_domain, quotient_evaluations, num_chunks)
    }

    fn get_quotient_ldes(
        &self,
        evaluations: impl IntoIterator<Item = (Self::Domain, RowMajorMatrix<Goldilocks>)>,
        num_chunks: usize,
    ) -> Result<Vec<RowMajorMatrix<Goldilocks>>, Self::ProverError> {
        Ok(UnivariateStarkPcs::<Challenge, Challenger>::get_quotient_ldes(&self.inner, evaluations, num_chunks)?)
    }

    fn commit_ldes(
        &self,
        ldes: Vec<RowMajorMatrix<Goldilocks>>,
    ) -> Result<(Self::Commitment, Self::ProverData), Self::ProverError> {
        self.counters.stock_commits.fetch_add(1, Ordering::Relaxed);
        Ok(UnivariateStarkPcs::<Challenge, Challenger>::commit_ldes(&self.inner, ldes)?)
    }

    fn get_evaluations_on_domain<'a>(
        &self,
        prover_data: &'a Self::ProverData,
        idx: usize,
        domain: Self::Domain,
    ) -> Self::EvaluationsOnDomain<'a> {
        UnivariateStarkPcs::<Challenge, Challenger>::get_evaluations_on_domain(&self.inner, prover_data, idx, domain)
    }

    fn build_periodic_lde_table(
        &self,
        periodic_cols: &[Vec<Goldilocks>],
        trace_domain: Self::Domain,
        quotient_domain: Self::Domain,
    ) -> PeriodicLdeTable<Goldilocks> {
        UnivariateStarkPcs::<Challenge, Challenger>::build_periodic_lde_table(
            &self.inner,
            periodic_cols,
            trace_domain,
            quotient_domain,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The model of a commit of several heights, term by term from the shapes: every height's LDE,
    /// the tallest height's tree and a segment over twice the rows of each shorter one, every
    /// height's twiddles, and the largest temporaries.
    #[test]
    fn the_model_of_several_heights_adds_their_ldes_trees_and_twiddles() {
        let params = |rows, cols| LdeParams::new(MatrixShape::new(rows, cols).unwrap(), 2, 7).unwrap();
        let (tall, short) = (params(1 << 10, 8), params(1 << 6, 4));
        assert_eq!(fused_heights_model(&[tall]).unwrap(), fused_commit_model(&tall).unwrap());
        let both = fused_heights_model(&[tall, short]).unwrap();
        let (a, b) = (fused_commit_model(&tall).unwrap(), fused_commit_model(&short).unwrap());
        assert_eq!(both.lde, ((1 << 11) * 8 + (1 << 7) * 4) * 8);
        assert_eq!(both.trees, ((2 << 11) - 1 + (2 << 8) - 1) * 32);
        assert_eq!(both.twiddles, a.twiddles + b.twiddles);
        assert_eq!(both.scratch, a.scratch.max(b.scratch + (1 << 7) * 32));
        assert_eq!(both.trace, 0);
        assert!(fused_heights_model(&[]).is_err());
    }

    /// Several tables' quotients: one table's model is a single quotient commit's; two tables
    /// sharing a height and a third below add their values, and the shared height's tables keep
    /// their own chunk LDE beside the height's; the heights are grouped tallest first in order.
    #[test]
    fn the_model_of_several_quotients_reduces_to_one_quotient_commit() {
        let params =
            |rows: usize, chunks: usize| LdeParams::new(MatrixShape::new(rows, 2 * chunks).unwrap(), 2, 7).unwrap();
        let (a, b, c) = (params(1 << 8, 2), params(1 << 6, 1), params(1 << 8, 1));
        let one = quotient_heights(&[a]).unwrap();
        assert_eq!(quotient_heights_model(&[a], &one).unwrap(), quotient_commit_model(&a).unwrap());

        let tables = [a, b, c];
        let heights = quotient_heights(&tables).unwrap();
        let shapes: Vec<_> = heights.iter().map(|h| (h.params.trace(), h.tables.clone())).collect();
        assert_eq!(
            shapes,
            [(MatrixShape::new(1 << 8, 6).unwrap(), vec![0, 2]), (MatrixShape::new(1 << 6, 2).unwrap(), vec![1])]
        );
        let model = quotient_heights_model(&tables, &heights).unwrap();
        let fused = fused_heights_model(&[heights[0].params, heights[1].params]).unwrap();
        let values: usize = tables.iter().map(|p| p.trace().bytes()).sum();
        let own = |p: &LdeParams| quotient_commit_model(p).unwrap().scratch - p.trace().bytes();
        let largest =
            fused.scratch.max(own(&a) + a.lde_shape().bytes()).max(own(&b)).max(own(&c) + c.lde_shape().bytes());
        assert_eq!(model, MemoryModel { scratch: values + largest, ..fused });
    }

    /// A split download is what the pool keeps, not its parts; one matrix is kept as it is.
    #[test]
    fn the_pool_keeps_the_downloads_of_split_commits_not_their_parts() {
        let _pool = crate::bitrev::POOL_TESTS.lock().unwrap_or_else(|e| e.into_inner());
        crate::bitrev::free_kept();
        let words: Vec<u64> = (0..8 * 4).collect();
        let parts = split_columns(words.clone(), &[1, 3], true);
        assert_eq!(parts[0].values, (0..8).map(|r| Goldilocks::new(4 * r)).collect::<Vec<_>>());
        assert_eq!(crate::bitrev::free_kept(), 8 * 4 * 8, "the 8 x 4 download is kept");
        keep_matrices(parts);
        assert_eq!(crate::bitrev::free_kept(), 0, "the 8 x 1 and 8 x 3 parts are not");

        let parts = split_columns(words.clone(), &[1, 3], false);
        assert_eq!(parts.len(), 2);
        assert_eq!(crate::bitrev::free_kept(), 0, "nothing kept without `keep`");

        let one = split_columns(words, &[4], true);
        assert_eq!(crate::bitrev::free_kept(), 0, "one matrix is kept when its prover data drops");
        keep_matrices(one);
        assert_eq!(crate::bitrev::free_kept(), 8 * 4 * 8);
    }
}
