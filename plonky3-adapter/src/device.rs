//! What `BackendDft::default()` opens: one process-wide backend per backend type.

use std::sync::{Arc, OnceLock};

use backend_api::Backend;
use backend_cpu::CpuBackend;

/// A backend that [`BackendDft::default`](crate::BackendDft) can open without arguments.
///
/// Plonky3 builds its DFTs with `Default::default()` (its test helpers do, and so does much user
/// code), so the default device has to be found without being told. Each implementation opens
/// one backend per process, on first use, and hands every `BackendDft` the same one: opening a
/// GPU context (and compiling its kernels) once per `default()` would cost more than most LDEs.
pub trait DefaultDevice: Backend + Sized + 'static {
    /// The smallest LDE input, in elements (`rows * columns` of the trace), that
    /// [`BackendDft`](crate::BackendDft) sends to this backend; smaller ones run on Plonky3's
    /// CPU DFT, which is faster there. Measured: see BENCHMARKS.md, "Plonky3 adapter".
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
    /// 0.88x at 2^20 x 256), and below that both take under 0.2 ms (BENCHMARKS.md, "Plonky3
    /// adapter"). So `BackendDft::<CpuBackend>::default()` is Plonky3's DFT;
    /// `BackendDft::new(Arc::new(CpuBackend::new()))` still sends every LDE to the CPU backend
    /// (the oracle the GPU backends are compared with).
    const MIN_BACKEND_ELEMS: usize = usize::MAX;

    fn shared() -> Result<Arc<Self>, String> {
        static CPU: OnceLock<Result<Arc<CpuBackend>, String>> = OnceLock::new();
        open_once(&CPU, || Ok(CpuBackend::new()))
    }
}

/// CUDA device 0 with its own stream (`CudaBackend::new(0)`).
#[cfg(feature = "cuda")]
impl DefaultDevice for backend_cuda::CudaBackend {
    /// Measured on the H200 (BENCHMARKS.md, "Plonky3 adapter"): below 2^14 elements (128 KiB)
    /// the CUDA path is slower than Plonky3's (0.72-0.81x at 2^10-2^12 x 16 elements), from 2^14
    /// to 2^18 elements the two are even (0.98-1.07x), and at 2^20 x 256 it is 2.76x faster.
    const MIN_BACKEND_ELEMS: usize = 1 << 14;

    fn shared() -> Result<Arc<Self>, String> {
        static CUDA: OnceLock<Result<Arc<backend_cuda::CudaBackend>, String>> = OnceLock::new();
        open_once(&CUDA, || backend_cuda::CudaBackend::new(0))
    }
}

/// The first hardware wgpu adapter (software rasterisers such as llvmpipe refused: they are
/// slower than the CPU DFT), with the adapter's own segment size and native u64 arithmetic where
/// the adapter has it.
#[cfg(feature = "wgpu")]
impl DefaultDevice for backend_wgpu::WgpuBackend {
    /// Not measured on hardware through the adapter yet: CUDA's threshold, as the wgpu backend's
    /// transfers and dispatches cost at least as much as CUDA's.
    const MIN_BACKEND_ELEMS: usize = 1 << 14;

    fn shared() -> Result<Arc<Self>, String> {
        static WGPU: OnceLock<Result<Arc<backend_wgpu::WgpuBackend>, String>> = OnceLock::new();
        open_once(&WGPU, || backend_wgpu::WgpuBackend::new(backend_wgpu::WgpuOptions::default()))
    }
}
