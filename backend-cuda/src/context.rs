//! The device a backend instance owns: its primary context, its compute stream (every operation)
//! and its copy stream (the uploads [`crate::lde`] overlaps with the LDE), its allocation tracker
//! and its compiled kernels. Buffers hold an `Arc` of it, so it outlives them.

use std::sync::Arc;

use backend_api::{AllocTracker, Result};
use cudarc::driver::result as cu;
use cudarc::driver::sys;

use crate::driver::{self, err, unavailable};
use crate::host::HostPool;
use crate::kernel_cache::KernelCache;
use crate::launch::{LaunchArgs, LaunchConfig};
use crate::module::{Kernel, KernelPrep, Modules, Source, Unit};
use crate::staging::Staging;

/// One CUDA device bound to one non-default stream. Dropped after the last buffer.
pub(crate) struct Device {
    /// The device ordinal.
    pub(crate) ordinal: usize,
    dev: sys::CUdevice,
    ctx: sys::CUcontext,
    /// The device's default memory pool (what `cuMemAllocAsync` allocates from).
    pool: sys::CUmemoryPool,
    /// The stream every operation of this backend is queued on.
    stream: sys::CUstream,
    /// The second stream: host-to-device copies that run beside the compute stream's kernels
    /// (`Backend::coset_lde_from_host`), ordered against it by events ([`Lane`]).
    copy_stream: sys::CUstream,
    /// The stream host copies of device buffers are queued on ([`Lane::Download`]): apart from the
    /// copy stream, whose uploads it would otherwise wait behind, and from the compute stream,
    /// whose kernels would otherwise wait behind it.
    download_stream: sys::CUstream,
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
    /// Whether launches may overlap the kernel before them ([`Device::launch_overlapping`]):
    /// compute capability 9.0 and later, with a driver that has `cuLaunchKernelEx`.
    overlaps_launches: bool,
    /// Streaming multiprocessors.
    pub(crate) sm_count: u32,
    /// The most dynamic shared memory one block may opt into, in bytes.
    pub(crate) max_shared_optin: usize,
    /// The kernel modules loaded in this context.
    pub(crate) modules: Modules,
    /// Where this device's kernel images are read from and stored (fixed at open).
    pub(crate) kernel_cache: KernelCache,
    /// The page-locked blocks large host transfers go through.
    pub(crate) staging: Staging,
    /// Page-locked host blocks nothing uses now, kept for reuse ([`crate::PinnedHost`]).
    pub(crate) host_pool: HostPool,
    /// The last LDE's twiddle tables, kept on the device between calls (lde.rs, `Tables`): not
    /// counted as live by the tracker while kept; freed by `CudaBackend::trim_pool` and on drop.
    pub(crate) lde_tables: std::sync::Mutex<Option<KeptTables>>,
    /// The memory pool the LDE tables come from, made at their first allocation: kept apart from
    /// the default pool, a long-lived 40 MB allocation cannot split a freed block that the next
    /// commit's 10 GB buffers need (in the default pool it did, and the pool grew: an LDE phase of
    /// 54.5 ms instead of 50.1 on the H200). The default pool where it cannot be made.
    tables_pool: std::sync::OnceLock<sys::CUmemoryPool>,
}

/// A device allocation of LDE twiddle tables kept between calls: the `len` elements at `ptr`
/// hold the tables of `key` (log2 n, log2 B, shift).
#[derive(Debug)]
pub(crate) struct KeptTables {
    pub(crate) key: (u32, u32, u64),
    pub(crate) ptr: sys::CUdeviceptr,
    pub(crate) len: usize,
}

impl Device {
    fn kept_tables(&self) -> std::sync::MutexGuard<'_, Option<KeptTables>> {
        self.lde_tables.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The kept LDE tables of `key`, if those are the ones kept (the cache no longer owns them).
    pub(crate) fn take_lde_tables(&self, key: (u32, u32, u64)) -> Option<KeptTables> {
        self.kept_tables().take_if(|t| t.key == key)
    }

    /// Keeps `tables`, freeing the ones kept before.
    pub(crate) fn keep_lde_tables(&self, tables: KeptTables) {
        let old = self.kept_tables().replace(tables);
        self.free_kept(old);
    }

    /// Frees the kept LDE tables, if any, and returns their memory to the device (waiting for the
    /// work queued so far, which may still read them). Returns whether there were any.
    pub(crate) fn release_lde_tables(&self) -> bool {
        let old = self.kept_tables().take();
        let any = old.is_some();
        self.free_kept(old);
        if any && let Some(&pool) = self.tables_pool.get() {
            // SAFETY: the stream is live for the life of the device.
            let _ = unsafe { cu::stream::synchronize(self.stream) };
            // SAFETY: the pool is this device's (made by `tables_pool`); trimming keeps the memory
            // of live allocations.
            let _ = unsafe { cu::mem_pool::trim_to(pool, 0) };
        }
        any
    }

    fn free_kept(&self, kept: Option<KeptTables>) {
        if let Some(t) = kept
            && t.ptr != 0
            && self.bind().is_ok()
        {
            // SAFETY: a stream-ordered allocation on this stream, owned by the cache alone
            // (a `Tables` in use takes its allocation out first).
            let _ = unsafe { cu::free_async(t.ptr, self.stream) };
        }
    }
}

// SAFETY: the driver API's handles may be used from any thread once the context is made current
// on it, which every entry point does through `Device::bind`; the stream serialises the work.
unsafe impl Send for Device {}
// SAFETY: as above; shared access only issues driver calls, which are thread-safe.
unsafe impl Sync for Device {}

impl Device {
    /// Opens device `ordinal`: retains its primary context and creates the stream; kernels are
    /// read from and stored in `kernel_cache`.
    ///
    /// # Errors
    /// [`backend_api::Error::BackendUnavailable`] when there is no driver, NVRTC or device.
    pub(crate) fn open(ordinal: usize, kernel_cache: KernelCache) -> Result<Self> {
        let count = device_count()?;
        if ordinal >= count {
            return Err(unavailable(format!(
                "device ordinal {ordinal} requested, the driver reports {count} device(s)"
            )));
        }
        let dev = cu::device::get(ordinal as i32).map_err(err("cuDeviceGet"))?;
        use sys::CUdevice_attribute as A;
        // SAFETY: `dev` came from `cuDeviceGet` above.
        let attr = |a| unsafe { cu::device::get_attribute(dev, a) }.map_err(err("cuDeviceGetAttribute"));
        let capability = (
            attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        );
        let arch = crate::module::arch_of(capability);
        driver::nvrtc_needed(arch, crate::embedded::covers(arch), crate::embedded::ARCHS)?;
        let sm_count = attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?.max(1) as u32;
        let max_shared_optin = attr(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?.max(0) as usize;
        let name = cu::device::get_name(dev).map_err(err("cuDeviceGetName"))?;
        let uuid = format_uuid(cu::device::get_uuid(dev).map_err(err("cuDeviceGetUuid"))?);
        // SAFETY: `dev` came from `cuDeviceGet`.
        let total_memory = unsafe { cu::device::total_mem(dev) }.map_err(err("cuDeviceTotalMem"))?;
        // SAFETY: as above; released in `drop` (or below when setting up fails).
        let ctx = unsafe { cu::primary_ctx::retain(dev) }.map_err(err("cuDevicePrimaryCtxRetain"))?;
        let setup = || -> Result<(sys::CUmemoryPool, [sys::CUstream; 3])> {
            // SAFETY: retained just above.
            unsafe { bind(ctx) }?;
            // SAFETY: `dev` came from `cuDeviceGet`.
            let pool = unsafe { cu::device::get_default_mem_pool(dev) }.map_err(err("cuDeviceGetDefaultMemPool"))?;
            // The stream-ordered allocator keeps freed memory for reuse instead of remapping it
            // after every synchronisation; `CudaBackend::trim_pool` hands it back.
            // SAFETY: the device's live default pool.
            unsafe { driver::pool_set_release_threshold(pool, u64::MAX) }?;
            let mut streams = Vec::with_capacity(3);
            for _ in 0..3 {
                match cu::stream::create(cu::stream::StreamKind::NonBlocking) {
                    Ok(stream) => streams.push(stream),
                    Err(e) => {
                        for made in streams {
                            // SAFETY: created just above; nothing was queued on it.
                            let _ = unsafe { cu::stream::destroy(made) };
                        }
                        return Err(driver::error_from("cuStreamCreate", e.0));
                    }
                }
            }
            Ok((pool, [streams[0], streams[1], streams[2]]))
        };
        let (pool, [stream, copy_stream, download_stream]) = match setup() {
            Ok(v) => v,
            Err(e) => {
                // SAFETY: pairs with the retain above; nothing was made in the context.
                let _ = unsafe { cu::primary_ctx::release(dev) };
                return Err(e);
            }
        };
        Ok(Self {
            ordinal,
            dev,
            ctx,
            pool,
            stream,
            copy_stream,
            download_stream,
            tracker: AllocTracker::new(),
            name,
            uuid,
            total_memory,
            capability,
            overlaps_launches: capability.0 >= 9 && driver::has_symbol("cuLaunchKernelEx"),
            sm_count,
            max_shared_optin,
            modules: Modules::default(),
            kernel_cache,
            staging: Staging::default(),
            host_pool: HostPool::default(),
            lde_tables: std::sync::Mutex::new(None),
            tables_pool: std::sync::OnceLock::new(),
        })
    }

    /// Makes the context current on the calling thread; every entry point calls this first.
    pub(crate) fn bind(&self) -> Result<()> {
        // SAFETY: the primary context is retained for the life of `self`.
        unsafe { bind(self.ctx) }
    }

    /// The stream all work is queued on.
    pub(crate) fn stream(&self) -> sys::CUstream {
        self.stream
    }

    /// The copy stream (see [`Lane::Copy`]).
    pub(crate) fn copy_stream(&self) -> sys::CUstream {
        self.copy_stream
    }

    /// The stream of `lane`.
    pub(crate) fn lane(&self, lane: Lane) -> sys::CUstream {
        match lane {
            Lane::Compute => self.stream,
            Lane::Copy => self.copy_stream,
            Lane::Download => self.download_stream,
        }
    }

    /// Blocks until all work queued on the copy stream has finished.
    pub(crate) fn synchronize_copies(&self) -> Result<()> {
        self.synchronize_lane(Lane::Copy)
    }

    /// Blocks until all work queued on `lane` has finished.
    pub(crate) fn synchronize_lane(&self, lane: Lane) -> Result<()> {
        self.bind()?;
        // SAFETY: the device's streams are live for the life of `self`, and the context is current.
        unsafe { cu::stream::synchronize(self.lane(lane)) }.map_err(err("cuStreamSynchronize"))
    }

    /// The device's default memory pool.
    pub(crate) fn pool(&self) -> sys::CUmemoryPool {
        self.pool
    }

    /// The pool of the LDE tables ([`Device::tables_pool`]'s field doc); the context must be bound.
    pub(crate) fn tables_pool(&self) -> sys::CUmemoryPool {
        *self.tables_pool.get_or_init(|| {
            // SAFETY: zeroed props are the documented defaults for the fields not set here.
            let mut props: sys::CUmemPoolProps = unsafe { std::mem::zeroed() };
            props.allocType = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
            props.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
            props.location.id = self.dev;
            // SAFETY: `props` is a valid CUmemPoolProps for this device.
            match unsafe { cu::mem_pool::create(&props) } {
                Ok(pool) => {
                    // SAFETY: the pool made just above.
                    let _ = unsafe { driver::pool_set_release_threshold(pool, u64::MAX) };
                    pool
                }
                Err(_) => self.pool,
            }
        })
    }

    /// Blocks until all queued work has finished.
    pub(crate) fn synchronize(&self) -> Result<()> {
        self.bind()?;
        // SAFETY: the stream is live for the life of `self`, and the context is current.
        unsafe { cu::stream::synchronize(self.stream) }.map_err(err("cuStreamSynchronize"))
    }

    /// A kernel of `source`, compiling its unit with NVRTC (or reading it from the kernel cache)
    /// at its first use in this context.
    /// `shared` is the dynamic shared memory the launches will ask for (the kernel's limit is
    /// raised once when it is above the default 48 KiB).
    pub(crate) fn kernel(&self, source: Source, name: &'static str, shared: usize) -> Result<Kernel> {
        self.bind()?;
        self.modules.kernel(source, name, shared, self.capability, &self.kernel_cache)
    }

    /// Compiles (or reads from the kernel cache) the units not loaded yet on up to `threads`
    /// threads, then loads them; the context must be current.
    pub(crate) fn prepare(&self, units: &[Unit], threads: usize) -> Result<Vec<KernelPrep>> {
        self.modules.prepare(units, self.capability, threads, &self.kernel_cache)
    }

    /// Launches `kernel` on the stream with `args`.
    ///
    /// # Safety
    /// `args` are exactly the kernel's declared parameters (types and order), and every device
    /// range the kernel reads or writes with them lies in a live allocation that no other queued
    /// work writes concurrently.
    pub(crate) unsafe fn launch(&self, kernel: &Kernel, config: LaunchConfig, mut args: LaunchArgs<'_>) -> Result<()> {
        let LaunchConfig { grid, block, shared } = config;
        // SAFETY: the function handle is live while its module is loaded (the life of `self`);
        // the stream is live; the arguments are the caller's contract, and the driver copies
        // their values before returning.
        unsafe { cu::launch_kernel(kernel.raw, grid, block, shared, self.stream, args.as_params()) }.map_err(|e| {
            driver::error_from(
                &format!("cuLaunchKernel({}, grid {grid:?}, block {block:?}, {shared} B shared)", kernel.name),
                e.0,
            )
        })
    }

    /// [`Device::launch`] with programmatic stream serialization allowed: the launch's thread
    /// blocks may start once every block of the kernel queued before it has started and executed
    /// `griddepcontrol.launch_dependents` (or exited), instead of after that kernel completes. A
    /// kernel launched so must itself execute `griddepcontrol.wait` before it touches anything
    /// the kernel before it writes, or reads what it writes. On a device without the feature
    /// (`overlaps_launches`, found when the device is opened) this is a plain launch.
    ///
    /// # Safety
    /// As [`Device::launch`], and the kernel orders its accesses against the kernel before it as
    /// above.
    pub(crate) unsafe fn launch_overlapping(
        &self,
        kernel: &Kernel,
        config: LaunchConfig,
        mut args: LaunchArgs<'_>,
    ) -> Result<()> {
        if !self.overlaps_launches {
            // SAFETY: the caller's contract; serialised launches need no more.
            return unsafe { self.launch(kernel, config, args) };
        }
        let LaunchConfig { grid, block, shared } = config;
        let mut attr = sys::CUlaunchAttribute {
            id: sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
            pad: [0; 4],
            // SAFETY: the value is a plain-data union; zero is a valid bit pattern of each member.
            value: unsafe { std::mem::zeroed() },
        };
        attr.value.programmaticStreamSerializationAllowed = 1;
        let launch = sys::CUlaunchConfig {
            gridDimX: grid.0,
            gridDimY: grid.1,
            gridDimZ: grid.2,
            blockDimX: block.0,
            blockDimY: block.1,
            blockDimZ: block.2,
            sharedMemBytes: shared,
            hStream: self.stream,
            attrs: &mut attr,
            numAttrs: 1,
        };
        // SAFETY: as in `launch`; the configuration and its one attribute live across the call,
        // and the driver copies them.
        let code =
            unsafe { sys::cuLaunchKernelEx(&launch, kernel.raw, args.as_params().as_mut_ptr(), std::ptr::null_mut()) };
        driver::check(
            &format!(
                "cuLaunchKernelEx({}, grid {grid:?}, block {block:?}, {shared} B shared, programmatic serialization)",
                kernel.name
            ),
            code,
        )
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        // Errors here have nowhere to go; a lost device has already reported them.
        if self.bind().is_ok() {
            // SAFETY: the streams are live until destroyed below.
            let _ = unsafe { cu::stream::synchronize(self.copy_stream) };
            // SAFETY: as above.
            let _ = unsafe { cu::stream::synchronize(self.download_stream) };
            self.release_lde_tables();
            // SAFETY: as above.
            let _ = unsafe { cu::stream::synchronize(self.stream) };
            if let Some(&pool) = self.tables_pool.get()
                && pool != self.pool
            {
                // SAFETY: made by `tables_pool`; its one allocation was freed above and the stream
                // is idle.
                let _ = unsafe { cu::mem_pool::destroy(pool) };
            }
            self.staging.release(&self.tracker);
            // Every PinnedHost (holding an Arc of this device) is gone: only pooled blocks remain.
            self.host_pool.release(self);
            self.modules.unload_all();
            // SAFETY: every buffer (holding an Arc of this device) is gone, and the streams are idle.
            let _ = unsafe { cu::stream::destroy(self.copy_stream) };
            // SAFETY: as above.
            let _ = unsafe { cu::stream::destroy(self.download_stream) };
            // SAFETY: as above.
            let _ = unsafe { cu::stream::destroy(self.stream) };
        }
        // SAFETY: pairs with the retain in `open`; no handle of the context is used afterwards.
        let _ = unsafe { cu::primary_ctx::release(self.dev) };
    }
}

/// One of a device's three streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lane {
    /// The stream every operation is queued on.
    Compute,
    /// The copy stream, for uploads overlapped with the compute stream's kernels.
    Copy,
    /// The download stream, for host copies of device buffers overlapped with both: a buffer it
    /// reads holds the copy's completion as a reader ([`crate::memory::CudaBuffer`]), which work
    /// that writes or frees the buffer waits for.
    Download,
}

/// An event of a device's context, destroyed on drop. Recorded on one of the device's streams
/// ([`Event::record`]: the compute stream; [`Event::record_on`]: either).
pub(crate) struct Event {
    raw: sys::CUevent,
    device: Arc<Device>,
}

// SAFETY: an event handle may be used from any thread with the context bound (every method binds).
unsafe impl Send for Event {}

impl Event {
    /// A new event (timing enabled) in `device`'s context.
    ///
    /// # Errors
    /// A driver error.
    pub(crate) fn new(device: &Arc<Device>) -> Result<Self> {
        device.bind()?;
        let raw = cu::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT).map_err(err("cuEventCreate"))?;
        Ok(Self { raw, device: Arc::clone(device) })
    }

    /// Records the event after the work queued so far on the device's stream.
    ///
    /// # Errors
    /// A driver error.
    pub(crate) fn record(&self) -> Result<()> {
        self.record_on(Lane::Compute)
    }

    /// Records the event after the work queued so far on `lane`.
    ///
    /// # Errors
    /// A driver error.
    pub(crate) fn record_on(&self, lane: Lane) -> Result<()> {
        self.device.bind()?;
        // SAFETY: the event and the stream are live and belong to the same context.
        unsafe { cu::event::record(self.raw, self.device.lane(lane)) }.map_err(err("cuEventRecord"))
    }

    /// Makes the work queued on `lane` from now on wait for the work recorded before the event
    /// (`cuStreamWaitEvent`; the host does not wait).
    ///
    /// # Errors
    /// A driver error.
    pub(crate) fn wait_on(&self, lane: Lane) -> Result<()> {
        self.device.bind()?;
        // SAFETY: the event and the stream are live and belong to the same context; the driver
        // takes the event's state at the call, so dropping the event afterwards is fine.
        unsafe {
            cu::stream::wait_event(self.device.lane(lane), self.raw, sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT)
        }
        .map_err(err("cuStreamWaitEvent"))
    }

    /// Blocks until the work recorded before the event has finished.
    ///
    /// # Errors
    /// A device error from that work.
    pub(crate) fn synchronize(&self) -> Result<()> {
        self.device.bind()?;
        // SAFETY: the event is live.
        unsafe { cu::event::synchronize(self.raw) }.map_err(err("cuEventSynchronize"))
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if self.device.bind().is_ok() {
            // SAFETY: the event is not used after this; the driver releases a pending event once
            // it completes.
            let _ = unsafe { cu::event::destroy(self.raw) };
        }
    }
}

/// Initialises the driver and returns how many devices it reports.
///
/// # Errors
/// [`backend_api::Error::BackendUnavailable`] when the libraries are missing or the driver does
/// not initialise.
pub(crate) fn device_count() -> Result<usize> {
    driver::libraries_present()?;
    cu::init().map_err(|e| unavailable(format!("cuInit failed: {}", driver::describe(e.0))))?;
    Ok(cu::device::get_count().map_err(err("cuDeviceGetCount"))?.max(0) as usize)
}

/// Makes `ctx` current on the calling thread unless it already is.
///
/// # Safety
/// `ctx` is a live context (a primary context this process retains).
unsafe fn bind(ctx: sys::CUcontext) -> Result<()> {
    if cu::ctx::get_current().map_err(err("cuCtxGetCurrent"))? != Some(ctx) {
        // SAFETY: `ctx` is live (the contract).
        unsafe { cu::ctx::set_current(ctx) }.map_err(err("cuCtxSetCurrent"))?;
    }
    Ok(())
}

/// A device UUID in the form `nvidia-smi` prints, `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
fn format_uuid(uuid: sys::CUuuid) -> String {
    let b = uuid.bytes.map(|c| c as u8);
    let hex = |r: std::ops::Range<usize>| b[r].iter().map(|x| format!("{x:02x}")).collect::<String>();
    format!("GPU-{}-{}-{}-{}-{}", hex(0..4), hex(4..6), hex(6..8), hex(8..10), hex(10..16))
}
