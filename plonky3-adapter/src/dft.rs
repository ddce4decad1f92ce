//! `BackendDft`: Plonky3's `TwoAdicSubgroupDft<Goldilocks>` with the coset LDE on a backend.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use backend_api::{Backend, LdeParams, MatrixShape};
use p3_dft::{Layout, Radix2DitParallel, TwoAdicSubgroupDft};
use p3_field::PrimeField64;
use p3_goldilocks::Goldilocks;
use p3_matrix::Matrix;
use p3_matrix::bitrev::{BitReversedMatrixView, BitReversibleMatrix};
use p3_matrix::dense::{RowMajorMatrix, RowMajorMatrixView, RowMajorMatrixViewMut};

use crate::bitrev::{chunk_rows, download_bit_reversed};
use crate::convert::{as_words, into_field_vec};
#[cfg(doc)]
use crate::device::{DefaultDevice, register_default};
use crate::device::{builtin_min_backend_elems, open_default, registered};

/// What [`BackendDft`] does when the backend fails in the middle of an LDE (out of device
/// memory, a lost device, a driver error). Plonky3's DFT trait cannot return an error, so the
/// error has to become either a result computed another way or a panic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnDeviceError {
    /// Log a `tracing` warning with the backend's message, count it in
    /// [`DftStats::device_errors`], and compute the same LDE with Plonky3's `Radix2DitParallel`
    /// on the CPU. The proof is unchanged (the two agree element for element), only slower.
    /// The default: a prover that ran out of device memory on one large matrix still finishes.
    #[default]
    FallBackToCpu,
    /// Panic with the backend's message (`"plonky3-adapter: <backend> coset LDE of <shape> failed:
    /// <error>"`), for callers that would rather stop than run slowly.
    Panic,
}

/// How many LDEs a [`BackendDft`] ran where, since it was made (clones share the counters).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DftStats {
    /// `coset_lde_batch` calls computed by the backend.
    pub backend_ldes: usize,
    /// `coset_lde_batch` calls computed by Plonky3's CPU DFT: below the size threshold, shapes
    /// the backends do not take, no backend available, or after a device error.
    pub cpu_ldes: usize,
    /// Device errors met by `coset_lde_batch` (each one then handled per [`OnDeviceError`]).
    pub device_errors: usize,
}

/// Plonky3's [`TwoAdicSubgroupDft`] over Goldilocks whose `coset_lde_batch` (and so `lde_batch`,
/// `coset_lde_algebra_batch`, and the PCS commit) runs on a [`Backend`].
///
/// - **Where each call runs.** `coset_lde_batch` of a trace of at least
///   [`BackendDft::min_backend_elems`] elements runs on the backend; smaller ones, shapes our
///   backends do not take (a height that is not a power of two, no columns, a domain over 2^32,
///   a zero shift), and every other method (`dft_batch`, `idft_batch`, the coset variants and
///   `coset_lde_batch_with_transform`, whose closure needs the coefficients) run on Plonky3's
///   `Radix2DitParallel`, so they behave exactly as Plonky3's own DFT, panics included.
/// - **What falling back costs.** Nothing measurable: the decision is taken before anything
///   touches the trace, and a call that falls back is `Radix2DitParallel::coset_lde_batch` on
///   the caller's matrix, its result returned as is (the same storage, no copy, conversion or
///   permutation). Below the threshold the decision is one comparison; above it the backend is
///   opened, or found missing, once per DFT and its clones, not per call. The `dft_sweep` bench
///   pairs the two over 2^6 to 2^16 rows x 1, 16 and 256 columns (BENCHMARKS.md, "2-core CPU
///   VM").
/// - **Evaluations.** A `BitReversedMatrixView` over bit-reversed storage, as `Radix2DitParallel`
///   returns: the PCS's `bit_reverse_rows()` then hands it the storage for free. The backend's
///   natural-order LDE is downloaded in chunks and each chunk's rows scattered to their
///   bit-reversed places while the next chunk downloads, so the permutation costs no extra pass.
///   The trace is written straight into the first rows of the LDE buffer, which the backend
///   extends in place ([`Backend::coset_lde_in_place`]): the device holds one LDE-sized buffer
///   per call. Writes and downloads are the backend's own: on CUDA, large ones go through its
///   page-locked staging ring.
/// - **Casts.** The trace goes to the backend as the `u64` words of its `Goldilocks` values and
///   the result comes back as a `Vec<Goldilocks>` made from the downloaded `Vec<u64>`: the only
///   copies are the write and the download themselves.
/// - **Errors.** See [`OnDeviceError`]; allocations are released either way.
///
/// Clones share the backend, the CPU DFT's twiddle cache and the counters. It is `Sync`, as
/// `TwoAdicFriPcs` requires; concurrent calls queue on the backend.
pub struct BackendDft<B: Backend> {
    shared: Arc<Shared<B>>,
}

struct Shared<B> {
    source: Source<B>,
    /// The backend or why there is none, settled once (at the first LDE that would use it, or
    /// the first [`BackendDft::backend`] call): later calls read it instead of opening again.
    resolved: OnceLock<Result<Arc<B>, String>>,
    /// Whether this DFT already handed its "unavailable" reason to the process-wide warning.
    warned: AtomicBool,
    cpu: Radix2DitParallel<Goldilocks>,
    min_backend_elems: usize,
    on_error: OnDeviceError,
    backend_ldes: AtomicUsize,
    cpu_ldes: AtomicUsize,
    device_errors: AtomicUsize,
}

/// Where the backend comes from.
enum Source<B> {
    /// Given by the caller.
    Given(Arc<B>),
    /// A built-in backend's process-wide default, opened on first use
    /// ([`DefaultDevice::shared`]), or the reason there is none.
    Default(fn() -> Result<Arc<B>, String>),
}

impl<B: Backend> Clone for BackendDft<B> {
    fn clone(&self) -> Self {
        Self { shared: Arc::clone(&self.shared) }
    }
}

impl<B: Backend> fmt::Debug for BackendDft<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BackendDft")
            .field("backend", &std::any::type_name::<B>())
            .field("min_backend_elems", &self.shared.min_backend_elems)
            .field("on_error", &self.shared.on_error)
            .field("stats", &self.stats())
            .finish()
    }
}

/// The backend [`register_default`] registered for `B`, else a built-in backend's process-wide
/// device ([`DefaultDevice`]), else none: every LDE then runs on Plonky3's `Radix2DitParallel`.
///
/// | `B` | Backend | LDEs on it |
/// |---|---|---|
/// | registered with [`register_default`] | the registered one | from its `min_backend_elems` |
/// | `CpuBackend` | the CPU backend | none ([`DefaultDevice::MIN_BACKEND_ELEMS`] is `usize::MAX`: Plonky3's DFT is faster) |
/// | `CudaBackend` (feature `cuda`) | CUDA device 0, opened on first use | from 2^23 elements |
/// | `WgpuBackend` (feature `wgpu`) | the first hardware adapter, opened on first use | from 2^23 elements |
/// | any other (a port) | none | none: one `tracing` warning says how to register |
///
/// The registration is read when `default()` runs. When the backend cannot be opened (no GPU, no
/// driver) or there is none, one `tracing` warning per backend type says why at the first
/// `coset_lde_batch`, and every call runs on Plonky3's `Radix2DitParallel`: the result is the
/// same, only the speed differs, and [`DftStats::cpu_ldes`] counts it. Use [`BackendDft::new`]
/// to name the backend explicitly, or [`BackendDft::backend`] to fail instead of falling back.
impl<B: Backend + 'static> Default for BackendDft<B> {
    fn default() -> Self {
        let on_error = OnDeviceError::default();
        if let Some((backend, min)) = registered::<B>() {
            return Self::from_source(Source::Given(backend), min, on_error);
        }
        // Not a built-in backend: threshold 0 so that the first LDE reports the missing
        // registration (once) instead of going to the CPU silently.
        let min = builtin_min_backend_elems::<B>().unwrap_or(0);
        Self::from_source(Source::Default(open_default::<B>), min, on_error)
    }
}

impl<B: Backend> BackendDft<B> {
    /// A DFT on `backend` that sends every `coset_lde_batch` the backend can take to it
    /// (threshold 0) and falls back to the CPU on device errors; adjust with
    /// [`BackendDft::with_min_backend_elems`] and [`BackendDft::with_on_device_error`].
    pub fn new(backend: Arc<B>) -> Self {
        Self::from_source(Source::Given(backend), 0, OnDeviceError::default())
    }

    fn from_source(source: Source<B>, min_backend_elems: usize, on_error: OnDeviceError) -> Self {
        let resolved = match &source {
            Source::Given(b) => OnceLock::from(Ok(Arc::clone(b))),
            Source::Default(_) => OnceLock::new(),
        };
        Self {
            shared: Arc::new(Shared {
                source,
                resolved,
                warned: AtomicBool::new(false),
                cpu: Radix2DitParallel::default(),
                min_backend_elems,
                on_error,
                backend_ldes: AtomicUsize::new(0),
                cpu_ldes: AtomicUsize::new(0),
                device_errors: AtomicUsize::new(0),
            }),
        }
    }

    fn rebuild(self, min_backend_elems: usize, on_error: OnDeviceError) -> Self {
        let source = match &self.shared.source {
            Source::Given(b) => Source::Given(Arc::clone(b)),
            Source::Default(open) => Source::Default(*open),
        };
        let rebuilt = Self::from_source(source, min_backend_elems, on_error);
        if let Some(resolved) = self.shared.resolved.get() {
            // The backend this DFT settled on carries over, not opened again (`rebuilt` is new,
            // so its cell is empty and `set` cannot fail).
            let _ = rebuilt.shared.resolved.set(resolved.clone());
        }
        rebuilt
    }

    /// The same DFT with LDEs of fewer than `elems` trace elements (`rows * columns`) on the CPU.
    /// Counters start again from zero.
    pub fn with_min_backend_elems(self, elems: usize) -> Self {
        let on_error = self.shared.on_error;
        self.rebuild(elems, on_error)
    }

    /// The same DFT with another device-error behaviour. Counters start again from zero.
    pub fn with_on_device_error(self, on_error: OnDeviceError) -> Self {
        let min = self.shared.min_backend_elems;
        self.rebuild(min, on_error)
    }

    /// The size threshold: LDE inputs of fewer elements run on the CPU.
    pub fn min_backend_elems(&self) -> usize {
        self.shared.min_backend_elems
    }

    /// The device-error behaviour.
    pub fn on_device_error(&self) -> OnDeviceError {
        self.shared.on_error
    }

    /// The backend, opening the default one if that has not happened yet.
    ///
    /// # Errors
    /// Why the default backend could not be opened, or, for a backend that is neither built in
    /// nor registered with [`register_default`], how to register one.
    pub fn backend(&self) -> Result<Arc<B>, String> {
        self.resolved().clone()
    }

    /// The backend or why there is none, opened on the first call only.
    fn resolved(&self) -> &Result<Arc<B>, String> {
        self.shared.resolved.get_or_init(|| match &self.shared.source {
            Source::Given(b) => Ok(Arc::clone(b)),
            Source::Default(open) => open(),
        })
    }

    /// Where the LDEs ran so far.
    pub fn stats(&self) -> DftStats {
        DftStats {
            backend_ldes: self.shared.backend_ldes.load(Ordering::Relaxed),
            cpu_ldes: self.shared.cpu_ldes.load(Ordering::Relaxed),
            device_errors: self.shared.device_errors.load(Ordering::Relaxed),
        }
    }

    /// Where `coset_lde_batch` of this trace runs: on the backend (returned with the LDE's
    /// parameters) when the trace has at least [`BackendDft::min_backend_elems`] elements
    /// (`rows * columns`), a shape the backends take, and the backend can be opened; otherwise
    /// (`None`) on Plonky3's DFT. The whole decision, taken before anything touches the trace:
    /// below the threshold one comparison, above it a few more and a load (the backend is
    /// opened once per DFT, and the reason why it cannot be is warned about once).
    fn route(
        &self,
        mat: &RowMajorMatrix<Goldilocks>,
        added_bits: usize,
        shift: Goldilocks,
    ) -> Option<(&Arc<B>, LdeParams)> {
        if mat.values.len() < self.shared.min_backend_elems {
            return None;
        }
        self.route_shape(mat.height(), mat.width(), added_bits, shift)
    }

    /// [`BackendDft::route`] for a `rows x cols` trace, threshold included (the fused commit of
    /// [`crate::BackendPcs`] asks it for the concatenation of its matrices).
    pub(crate) fn route_shape(
        &self,
        rows: usize,
        cols: usize,
        added_bits: usize,
        shift: Goldilocks,
    ) -> Option<(&Arc<B>, LdeParams)> {
        let params = backend_params(rows, cols, added_bits, shift)?;
        Some((self.route_elems(rows.checked_mul(cols)?)?, params))
    }

    /// The backend that LDEs of `elems` trace elements in all go to, threshold included (the
    /// fused commit of matrices of several heights asks it for their sum), or `None` for the CPU.
    pub(crate) fn route_elems(&self, elems: usize) -> Option<&Arc<B>> {
        if elems < self.shared.min_backend_elems {
            return None;
        }
        match self.resolved() {
            Ok(backend) => Some(backend),
            Err(reason) => {
                if !self.shared.warned.swap(true, Ordering::Relaxed) {
                    warn_once_unavailable::<B>(reason);
                }
                None
            }
        }
    }

    /// The coset LDE on `backend`, downloaded into bit-reversed row order.
    fn lde_on(
        backend: &B,
        mat: &RowMajorMatrix<Goldilocks>,
        params: &LdeParams,
    ) -> backend_api::Result<Vec<Goldilocks>> {
        let lde = lde_on_device(backend, as_words(&mat.values), params)?;
        Ok(into_field_vec(download_lde(backend, &lde, params)?))
    }

    fn cpu_lde(
        &self,
        mat: RowMajorMatrix<Goldilocks>,
        added_bits: usize,
        shift: Goldilocks,
    ) -> BitReversedMatrixView<RowMajorMatrix<Goldilocks>> {
        self.shared.cpu_ldes.fetch_add(1, Ordering::Relaxed);
        self.shared.cpu.coset_lde_batch(mat, added_bits, shift)
    }
}

/// For every backend, ports included; see `Default` for what [`BackendDft::default`] opens.
impl<B: Backend + 'static> TwoAdicSubgroupDft<Goldilocks> for BackendDft<B> {
    type Evaluations = BitReversedMatrixView<RowMajorMatrix<Goldilocks>>;

    /// Plonky3's `Radix2DitParallel` (the backends have a coset LDE, not a bare DFT).
    fn dft_batch(&self, mat: RowMajorMatrix<Goldilocks>) -> Self::Evaluations {
        self.shared.cpu.dft_batch(mat)
    }

    /// Plonky3's `Radix2DitParallel`.
    fn coset_dft_batch(&self, mat: RowMajorMatrix<Goldilocks>, shift: Goldilocks) -> Self::Evaluations {
        self.shared.cpu.coset_dft_batch(mat, shift)
    }

    /// Plonky3's `Radix2DitParallel`.
    fn idft_batch(&self, mat: RowMajorMatrix<Goldilocks>) -> RowMajorMatrix<Goldilocks> {
        self.shared.cpu.idft_batch(mat)
    }

    /// Plonky3's `Radix2DitParallel`.
    fn coset_idft_batch(&self, mat: RowMajorMatrix<Goldilocks>, shift: Goldilocks) -> RowMajorMatrix<Goldilocks> {
        self.shared.cpu.coset_idft_batch(mat, shift)
    }

    /// On the backend when the trace has at least [`BackendDft::min_backend_elems`] elements and
    /// a shape the backends take; otherwise, and after a device error under
    /// [`OnDeviceError::FallBackToCpu`], Plonky3's `Radix2DitParallel`.
    ///
    /// # Panics
    /// Where `Radix2DitParallel` panics (e.g. a height that is not a power of two), and on a
    /// device error under [`OnDeviceError::Panic`].
    fn coset_lde_batch(
        &self,
        mat: RowMajorMatrix<Goldilocks>,
        added_bits: usize,
        shift: Goldilocks,
    ) -> Self::Evaluations {
        // Below the threshold (or with no backend) this is exactly `Radix2DitParallel`'s call,
        // with its result returned as is: no copy, conversion or permutation on the way.
        let Some((backend, params)) = self.route(&mat, added_bits, shift) else {
            return self.cpu_lde(mat, added_bits, shift);
        };
        match Self::lde_on(backend, &mat, &params) {
            Ok(values) => {
                self.shared.backend_ldes.fetch_add(1, Ordering::Relaxed);
                RowMajorMatrix::new(values, params.trace().cols()).bit_reverse_rows()
            }
            Err(e) => {
                self.shared.device_errors.fetch_add(1, Ordering::Relaxed);
                let what = format!(
                    "plonky3-adapter: {} coset LDE of {} (blowup {}) failed: {e}",
                    backend.info().backend,
                    params.trace(),
                    params.blowup()
                );
                match self.shared.on_error {
                    OnDeviceError::Panic => panic!("{what}"),
                    OnDeviceError::FallBackToCpu => {
                        tracing::warn!("{what}; computing it with Plonky3's Radix2DitParallel on the CPU");
                        self.cpu_lde(mat, added_bits, shift)
                    }
                }
            }
        }
    }

    /// Plonky3's `Radix2DitParallel`: `transform` needs the coefficients between the inverse and
    /// the forward transform, which the backends' one-pass LDE never holds on the host.
    fn coset_lde_batch_with_transform<T>(
        &self,
        mat: RowMajorMatrix<Goldilocks>,
        added_bits: usize,
        shift: Goldilocks,
        transform: T,
    ) -> Self::Evaluations
    where
        T: FnOnce(&mut RowMajorMatrixViewMut<'_, Goldilocks>, Layout),
    {
        self.shared.cpu_ldes.fetch_add(1, Ordering::Relaxed);
        self.shared.cpu.coset_lde_batch_with_transform(mat, added_bits, shift, transform)
    }

    /// Plonky3's `Radix2DitParallel`, for the same reason as
    /// [`coset_lde_batch_with_transform`](Self::coset_lde_batch_with_transform).
    fn coset_lde_batch_with_blocks<T, K, C>(
        &self,
        mat: RowMajorMatrix<Goldilocks>,
        added_bits: usize,
        shift: Goldilocks,
        transform: T,
        make_consumer: K,
    ) -> BitReversedMatrixView<RowMajorMatrix<Goldilocks>>
    where
        T: FnOnce(&mut RowMajorMatrixViewMut<'_, Goldilocks>, Layout),
        K: FnOnce(usize) -> C,
        C: Fn(usize, RowMajorMatrixView<'_, Goldilocks>) + Sync,
    {
        self.shared.cpu_ldes.fetch_add(1, Ordering::Relaxed);
        self.shared.cpu.coset_lde_batch_with_blocks(mat, added_bits, shift, transform, make_consumer)
    }
}

/// The LDE parameters when the backends take a `rows x cols` trace; `None` (no columns, a height
/// that is not a power of two, a domain over 2^32, a zero shift) sends it to the CPU DFT, which
/// handles it Plonky3's way.
pub(crate) fn backend_params(rows: usize, cols: usize, added_bits: usize, shift: Goldilocks) -> Option<LdeParams> {
    if cols == 0 {
        return None;
    }
    let blowup = u32::try_from(added_bits).ok().and_then(|b| 1usize.checked_shl(b))?;
    let trace = MatrixShape::new(rows, cols).ok()?;
    LdeParams::new(trace, blowup, shift.as_canonical_u64()).ok()
}

/// The coset LDE of the row-major host `trace` on `backend`, in natural row order: the trace goes
/// straight into the first rows of the LDE buffer, which is extended in place, so the device holds
/// one LDE-sized buffer, not the trace beside it. `Backend::coset_lde_from_host` lets a backend
/// overlap the upload with the extension (CUDA does for a page-locked trace; a pageable one, as
/// Plonky3 hands it over, takes the plain route: the upload, then the in-place LDE).
pub(crate) fn lde_on_device<B: Backend>(
    backend: &B,
    trace: &[u64],
    params: &LdeParams,
) -> backend_api::Result<B::Buffer> {
    let mut lde = backend.alloc(params.lde_shape().len())?;
    backend.coset_lde_from_host(&mut lde, trace, params)?;
    Ok(lde)
}

/// The LDE of `params` held by `lde`, downloaded into bit-reversed row order as the PCS commits it.
pub(crate) fn download_lde<B: Backend>(
    backend: &B,
    lde: &B::Buffer,
    params: &LdeParams,
) -> backend_api::Result<Vec<u64>> {
    let (rows, cols) = (params.lde_shape().rows(), params.lde_shape().cols());
    download_bit_reversed(backend, lde, 0, rows, cols, chunk_rows(rows, cols))
}

/// One warning per backend type when its default device cannot be opened.
fn warn_once_unavailable<B>(reason: &str) {
    use std::collections::HashSet;
    use std::sync::Mutex;
    static WARNED: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
    let name = std::any::type_name::<B>();
    let mut warned = WARNED.lock().unwrap_or_else(|e| e.into_inner());
    if warned.get_or_insert_with(HashSet::new).insert(name) {
        tracing::warn!(
            "plonky3-adapter: {name} is unavailable ({reason}); its LDEs run on Plonky3's Radix2DitParallel (the same results, slower)"
        );
    }
}
