//! The device a backend instance owns: its primary context, its one stream, its allocation
//! tracker and its compiled kernels. Buffers hold an `Arc` of it, so it outlives them.

use std::ffi::c_void;

use backend_api::{AllocTracker, Result};
use cudarc::driver::sys;

use crate::driver;
use crate::module::{Kernel, KernelPrep, Modules, Source, Unit};

/// One CUDA device bound to one non-default stream. Dropped after the last buffer.
pub(crate) struct Device {
    /// The device ordinal.
    pub(crate) ordinal: usize,
    dev: sys::CUdevice,
    ctx: sys::CUcontext,
    /// The stream every operation of this backend is queued on.
    stream: sys::CUstream,
    /// Every device allocation of this backend goes through it.
    pub(crate) tracker: AllocTracker,
    /// The name the driver reports.
    pub(crate) name: String,
    /// The UUID the driver reports (`GPU-...`), stable across processes and ordinals.
    pub(crate) uuid: String,
    /// Total device memory, in bytes.
    pub(crate) total_memory: usize,
    /// Compute capability, e.g. `(9, 0)`.
    pub(crate) capability: (i32, i32),
    /// Streaming multiprocessors.
    pub(crate) sm_count: u32,
    /// The most dynamic shared memory one block may opt into, in bytes.
    pub(crate) max_shared_optin: usize,
    modules: Modules,
}

// SAFETY: the driver API's handles may be used from any thread once the context is made current
// on it, which every entry point does through `Device::bind`; the stream serialises the work.
unsafe impl Send for Device {}
// SAFETY: as above; shared access only issues driver calls, which are thread-safe.
unsafe impl Sync for Device {}

impl Device {
    /// Opens device `ordinal`: retains its primary context and creates the stream.
    ///
    /// # Errors
    /// [`backend_api::Error::BackendUnavailable`] when there is no driver, NVRTC or device.
    pub(crate) fn open(ordinal: usize) -> Result<Self> {
        let dev = driver::device(ordinal)?;
        let attr = |a| driver::device_attribute(dev, a);
        use sys::CUdevice_attribute as A;
        let capability = (
            attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        );
        let sm_count = attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?.max(1) as u32;
        let max_shared_optin = attr(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?.max(0) as usize;
        let name = driver::device_name(dev)?;
        let uuid = driver::device_uuid(dev)?;
        let total_memory = driver::device_total_mem(dev)?;
        let ctx = driver::primary_ctx_retain(dev)?;
        // The stream-ordered allocator keeps freed memory for reuse instead of remapping it after
        // every synchronisation; `CudaBackend::trim_pool` hands it back.
        let stream = match driver::bind(ctx)
            .and_then(|()| driver::pool_set_release_threshold(dev, u64::MAX))
            .and_then(|()| driver::stream_create())
        {
            Ok(s) => s,
            Err(e) => {
                // SAFETY: pairs with the retain above; nothing was made in the context.
                let _ = unsafe { driver::primary_ctx_release(dev) };
                return Err(e);
            }
        };
        Ok(Self {
            ordinal,
            dev,
            ctx,
            stream,
            tracker: AllocTracker::new(),
            name,
            uuid,
            total_memory,
            capability,
            sm_count,
            max_shared_optin,
            modules: Modules::default(),
        })
    }

    /// Makes the context current on the calling thread; every entry point calls this first.
    pub(crate) fn bind(&self) -> Result<()> {
        driver::bind(self.ctx)
    }

    /// The stream all work is queued on.
    pub(crate) fn stream(&self) -> sys::CUstream {
        self.stream
    }

    /// The raw device handle.
    pub(crate) fn raw_device(&self) -> sys::CUdevice {
        self.dev
    }

    /// Blocks until all queued work has finished.
    pub(crate) fn synchronize(&self) -> Result<()> {
        self.bind()?;
        driver::stream_synchronize(self.stream)
    }

    /// A kernel of `source`, compiling the file with NVRTC at its first use in this context.
    /// `shared` is the dynamic shared memory the launches will ask for (the kernel's limit is
    /// raised once when it is above the default 48 KiB).
    pub(crate) fn kernel(&self, source: Source, name: &'static str, shared: usize) -> Result<Kernel> {
        self.bind()?;
        self.modules.kernel(source, name, shared, self.capability)
    }

    /// Compiles (or reads from the kernel cache) the units not loaded yet on up to `threads`
    /// threads, then loads them; the context must be current.
    pub(crate) fn prepare(&self, units: &[Unit], threads: usize) -> Result<Vec<KernelPrep>> {
        self.modules.prepare(units, self.capability, threads)
    }

    /// Launches `kernel` on the stream.
    ///
    /// # Safety
    /// As [`driver::launch`]: `params` point to values of exactly the kernel's parameter types,
    /// and every device range the kernel touches is live.
    pub(crate) unsafe fn launch(
        &self,
        kernel: &Kernel,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        shared: u32,
        params: &mut [*mut c_void],
    ) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { driver::launch(kernel.name, kernel.raw, grid, block, shared, self.stream, params) }
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        // Errors here have nowhere to go; a lost device has already reported them.
        if self.bind().is_ok() {
            let _ = driver::stream_synchronize(self.stream);
            self.modules.unload_all();
            // SAFETY: every buffer (holding an Arc of this device) is gone, and the stream is idle.
            let _ = unsafe { driver::stream_destroy(self.stream) };
        }
        // SAFETY: pairs with the retain in `open`; no handle of the context is used afterwards.
        let _ = unsafe { driver::primary_ctx_release(self.dev) };
    }
}

/// Packs kernel arguments into the pointer array `cuLaunchKernel` takes. Each argument must be a
/// place (a local variable) of exactly the kernel parameter's type.
macro_rules! kernel_args {
    ($($arg:expr),* $(,)?) => {
        [$((&$arg as *const _ as *mut ::std::ffi::c_void)),*]
    };
}
pub(crate) use kernel_args;
