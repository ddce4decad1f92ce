//! What `BackendDft::default()` opens: a registered backend, a built-in backend's process-wide
//! device, or (for a backend that is neither) Plonky3's own DFT.

use std::any::{Any, TypeId};
use std::sync::{Arc, OnceLock, RwLock};

use backend_api::Backend;
use backend_cpu::CpuBackend;

mod sealed {
    /// Only the built-in backends get a device without being told which.
    pub trait Builtin {}
    impl Builtin for backend_cpu::CpuBackend {}
    #[cfg(feature = "cuda")]
    impl Builtin for backend_cuda::CudaBackend {}
    #[cfg(feature = "wgpu")]
    impl Builtin for backend_wgpu::WgpuBackend {}
}

/// A built-in backend that [`BackendDft::default`](crate::BackendDft) opens without arguments:
/// `CpuBackend`, and `CudaBackend` / `WgpuBackend` with this crate's `cuda` / `wgpu` features.
///
/// Plonky3 builds its DFTs with `Default::default()` (its test helpers do, and so does much user
/// code), so the default device has to be found without being told. Each implementation opens
/// one backend per process, on first use, and hands every `BackendDft` the same one: opening a
/// GPU context (and compiling its kernels) once per `default()` would cost more than most LDEs.
///
/// The trait is sealed. Any other backend (a port, or a built-in one on another device) gets its
/// `Default` from [`register_default`].
pub trait DefaultDevice: Backend + Sized + sealed::Builtin + 'static {
    /// The smallest LDE input, in elements (`rows * columns` of the trace), that
    /// [`BackendDft`](crate::BackendDft) sends to this backend; smaller ones run on Plonky3's
    /// CPU DFT, which is faster there. Measured with the `pcs` and `dft_sweep` benches: see
    /// BENCHMARKS.md, "H200 host CPU" and "2-core CPU VM".
    const MIN_BACKEND_ELEMS: usize;

    /// The process-wide default backend of this type, opened on the first call.
    ///
    /// # Errors
    /// Why the backend could not be opened (no device, no driver), as the backend worded it; the
    /// same message on every call (the open is tried once).
    fn shared() -> Result<Arc<Self>, String>;
}

/// Opens `open` once per `cell` and keeps the result, success or failure.
fn open_once<B>(
    cell: &'static OnceLock<Result<Arc<B>, String>>,
    open: impl FnOnce() -> backend_api::Result<B>,
) -> Result<Arc<B>, String> {
    cell.get_or_init(|| open().map(Arc::new).map_err(|e| e.to_string())).clone()
}

/// The CPU backend: always available.
impl DefaultDevice for CpuBackend {
    /// Never (`usize::MAX`): measured on the H200 host's 16 cores, Plonky3's `Radix2DitParallel`
    /// (AVX2) beats the CPU backend's LDE from 2^12 elements up (stock / backend 0.23-0.91x, and
    /// 0.88x at 2^20 x 256), and below that both take under 0.2 ms. On a 2-core VM
    /// (`dft_sweep`, inside a rayon pool as a prover calls it) the CPU backend wins only at 16
    /// columns up to 2^10 rows (1.0-1.7x) and loses at 1 and 256 columns from 2^6 rows up
    /// (0.1-0.45x): no element count separates the two. So `BackendDft::<CpuBackend>::default()`
    /// is Plonky3's DFT, at its speed;
    /// `BackendDft::new(Arc::new(CpuBackend::new()))` still sends every LDE to the CPU backend
    /// (the oracle the GPU backends are compared with).
    const MIN_BACKEND_ELEMS: usize = usize::MAX;

    fn shared() -> Result<Arc<Self>, String> {
        static CPU: OnceLock<Result<Arc<CpuBackend>, String>> = OnceLock::new();
        open_once(&CPU, || Ok(CpuBackend::new()))
    }
}

/// CUDA device 0 with its own stream, configured by the environment as the `prover` CLI's is
/// (`CudaBackend::open(0, CudaOptions::from_env()?)`: the kernel cache directory, the upload
/// groups, the quotient's points per thread); a variable that does not parse is the open's error.
#[cfg(feature = "cuda")]
impl DefaultDevice for backend_cuda::CudaBackend {
    /// 2^23 elements (64 MiB of trace). Measured on the H200 with 16 host cores (`dft_sweep`,
    /// BENCHMARKS.md, "Plonky3 through `plonky3-adapter`"): with every LDE on the device
    /// (threshold 0) the CUDA path wins from 2^6 rows at 256 columns but not monotonically:
    /// 0.33x of stock at 2^12 x 256 and 0.60x at 2^16 x 16 (both 2^20 elements; not explained
    /// yet), and 0.45-0.77x at one column up to 2^12 rows. From 2^23 elements it ran at 1.99x (2^15 x 256) and 2.44x
    /// (2^16 x 256); below, the calls stay on Plonky3's DFT (median of paired calls 0.975x or
    /// better at every shape).
    const MIN_BACKEND_ELEMS: usize = 1 << 23;

    fn shared() -> Result<Arc<Self>, String> {
        static CUDA: OnceLock<Result<Arc<backend_cuda::CudaBackend>, String>> = OnceLock::new();
        open_once(&CUDA, || backend_cuda::CudaOptions::from_env().and_then(|o| backend_cuda::CudaBackend::open(0, o)))
    }
}

/// The first hardware wgpu adapter (software rasterisers such as llvmpipe refused: they are
/// slower than the CPU DFT), with the adapter's own segment size and native u64 arithmetic where
/// the adapter has it.
#[cfg(feature = "wgpu")]
impl DefaultDevice for backend_wgpu::WgpuBackend {
    /// CUDA's threshold, 2^23 elements: the wgpu backend's transfers and dispatches cost at least
    /// as much as CUDA's. On the H200 (`dft_sweep`) it then ran at 1.93x at 2^15 x 256 and 2.66x
    /// at 2^16 x 256, and at Plonky3's speed below (median of paired calls 0.976x or better).
    const MIN_BACKEND_ELEMS: usize = 1 << 23;

    fn shared() -> Result<Arc<Self>, String> {
        static WGPU: OnceLock<Result<Arc<backend_wgpu::WgpuBackend>, String>> = OnceLock::new();
        open_once(&WGPU, || backend_wgpu::WgpuBackend::new(backend_wgpu::WgpuOptions::default()))
    }
}

/// A type-erased backend handle, downcast back to `Arc<B>` by its `TypeId`.
type AnyBackend = Arc<dyn Any + Send + Sync>;

/// One registration: the backend and its size threshold.
struct Registered {
    type_id: TypeId,
    backend: AnyBackend,
    min_backend_elems: usize,
}

/// The process-wide registrations, one per backend type (a handful at most: a linear scan).
static REGISTRY: RwLock<Vec<Registered>> = RwLock::new(Vec::new());

/// Makes `backend` the one [`BackendDft::<B>::default()`](crate::BackendDft) uses from now on in
/// this process, with LDE inputs of fewer than `min_backend_elems` trace elements (`rows *
/// columns`) left on Plonky3's CPU DFT (0 sends every LDE the backend can take to it). Returns
/// the backend registered for `B` before, if any.
///
/// This is how a port (any [`Backend`] outside this crate's built-in ones) gets a useful
/// `Default`, which Plonky3 code that builds its DFT with `Default::default()` needs. It also
/// overrides a built-in backend's [`DefaultDevice`] choice (e.g. a `CudaBackend` on device 1,
/// or another threshold). Registration is read when `default()` runs: DFTs made before it keep
/// what they had, so register before building the PCS.
///
/// ```
/// use std::sync::Arc;
///
/// use backend_cpu::CpuBackend;
/// use plonky3_adapter::{BackendDft, register_default};
///
/// // Every `BackendDft::<CpuBackend>::default()` from here on sends all LDEs to this backend.
/// let backend = Arc::new(CpuBackend::new());
/// register_default(Arc::clone(&backend), 0);
/// let dft = BackendDft::<CpuBackend>::default();
/// assert!(Arc::ptr_eq(&dft.backend()?, &backend));
/// assert_eq!(dft.min_backend_elems(), 0);
/// # Ok::<(), String>(())
/// ```
pub fn register_default<B: Backend + 'static>(backend: Arc<B>, min_backend_elems: usize) -> Option<Arc<B>> {
    let entry = Registered { type_id: TypeId::of::<B>(), backend, min_backend_elems };
    let mut registry = REGISTRY.write().unwrap_or_else(|e| e.into_inner());
    let previous = match registry.iter_mut().find(|r| r.type_id == entry.type_id) {
        Some(slot) => Some(std::mem::replace(slot, entry).backend),
        None => {
            registry.push(entry);
            None
        }
    };
    previous.and_then(|b| b.downcast::<B>().ok())
}

/// Removes the registration of `B` made by [`register_default`] and returns its backend; later
/// `BackendDft::<B>::default()` calls fall back as if there had been none.
pub fn unregister_default<B: Backend + 'static>() -> Option<Arc<B>> {
    let mut registry = REGISTRY.write().unwrap_or_else(|e| e.into_inner());
    let at = registry.iter().position(|r| r.type_id == TypeId::of::<B>())?;
    registry.swap_remove(at).backend.downcast::<B>().ok()
}

/// The backend and threshold registered for `B`, if any.
pub(crate) fn registered<B: Backend + 'static>() -> Option<(Arc<B>, usize)> {
    let registry = REGISTRY.read().unwrap_or_else(|e| e.into_inner());
    let entry = registry.iter().find(|r| r.type_id == TypeId::of::<B>())?;
    let backend = Arc::clone(&entry.backend).downcast::<B>().ok()?;
    Some((backend, entry.min_backend_elems))
}

/// A built-in backend's opener (type-erased) and threshold.
struct Builtin {
    open: fn() -> Result<AnyBackend, String>,
    min_backend_elems: usize,
}

fn builtin_entry<D: DefaultDevice>() -> Builtin {
    fn open<D: DefaultDevice>() -> Result<AnyBackend, String> {
        D::shared().map(|b| b as AnyBackend)
    }
    Builtin { open: open::<D>, min_backend_elems: D::MIN_BACKEND_ELEMS }
}

/// `B`'s [`DefaultDevice`] implementation when `B` is a built-in backend: Rust has no
/// specialization, so a blanket `Default` finds it by `TypeId`.
fn builtin<B: 'static>() -> Option<Builtin> {
    let id = TypeId::of::<B>();
    if id == TypeId::of::<CpuBackend>() {
        return Some(builtin_entry::<CpuBackend>());
    }
    #[cfg(feature = "cuda")]
    if id == TypeId::of::<backend_cuda::CudaBackend>() {
        return Some(builtin_entry::<backend_cuda::CudaBackend>());
    }
    #[cfg(feature = "wgpu")]
    if id == TypeId::of::<backend_wgpu::WgpuBackend>() {
        return Some(builtin_entry::<backend_wgpu::WgpuBackend>());
    }
    None
}

/// The built-in threshold of `B`, when `B` is a built-in backend.
pub(crate) fn builtin_min_backend_elems<B: 'static>() -> Option<usize> {
    builtin::<B>().map(|b| b.min_backend_elems)
}

/// Opens the built-in default device of `B` ([`DefaultDevice::shared`]), or says how to get
/// one when `B` is not a built-in backend.
pub(crate) fn open_default<B: Backend + 'static>() -> Result<Arc<B>, String> {
    let Some(builtin) = builtin::<B>() else {
        return Err(unregistered_reason::<B>());
    };
    (builtin.open)()?
        .downcast::<B>()
        .map_err(|_| format!("the built-in default device is not a {}", std::any::type_name::<B>()))
}

/// Why a backend that is neither registered nor built in has no default device, and the fix.
fn unregistered_reason<B>() -> String {
    let name = std::any::type_name::<B>();
    let short = name.rsplit("::").next().unwrap_or(name);
    format!(
        "no default backend is registered for {name}: call \
         `plonky3_adapter::register_default::<{short}>(Arc::new(backend), min_backend_elems)` before \
         `BackendDft::default()`, or build the DFT with `BackendDft::new(Arc::new(backend))`"
    )
}
