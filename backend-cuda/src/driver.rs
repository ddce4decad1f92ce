//! The raw layer: every CUDA driver and NVRTC call of the crate, and the one function that maps
//! their result codes to [`Error`].
//!
//! Nothing here owns memory; the owning types live in [`crate::memory`] and [`crate::context`].
//! Functions that only read or create handles are safe; functions that touch device or host
//! memory through raw pointers are `unsafe fn` with their contract in a `# Safety` section.
//!
//! Under cudarc's dynamic loading a missing library is a panic inside cudarc, so
//! [`libraries_present`] must succeed before any other function here is called.

use std::ffi::{CStr, CString, c_void};
use std::ptr;
use std::sync::OnceLock;

use backend_api::{Error, Result};
use cudarc::driver::sys;
use cudarc::nvrtc::sys as nvrtc;

/// The backend's name in errors and [`backend_api::DeviceInfo`].
pub(crate) const BACKEND: &str = "cuda";

/// Whether the driver library (`libcuda`) and NVRTC (`libnvrtc`) can be loaded, checked once per
/// process.
///
/// # Errors
/// [`Error::BackendUnavailable`] naming the library that is missing.
pub(crate) fn libraries_present() -> Result<()> {
    static PRESENT: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    PRESENT
        .get_or_init(|| {
            if !driver_present() {
                return Err("the CUDA driver library (libcuda.so) was not found: no NVIDIA driver is installed \
                            or it is not on the loader path"
                    .to_string());
            }
            // SAFETY: as above, for NVRTC.
            if !unsafe { nvrtc::is_culib_present() } {
                return Err("NVRTC (libnvrtc.so.13) was not found: install the CUDA 13 toolkit or the \
                            nvidia-cuda-nvrtc wheel and put its lib folder on LD_LIBRARY_PATH"
                    .to_string());
            }
            Ok(())
        })
        .clone()
        .map_err(unavailable)
}

/// Whether NVRTC alone can be loaded (kernels can be compiled without a GPU).
pub(crate) fn nvrtc_present() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: `is_culib_present` only tries to dlopen the candidate names and drops them.
    *PRESENT.get_or_init(|| unsafe { nvrtc::is_culib_present() })
}

fn unavailable(reason: impl Into<String>) -> Error {
    Error::BackendUnavailable { backend: BACKEND.into(), reason: reason.into() }
}

/// Whether the driver library alone can be loaded, checked once per process.
pub(crate) fn driver_present() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: `is_culib_present` only tries to dlopen the candidate names and drops them.
    *PRESENT.get_or_init(|| unsafe { sys::is_culib_present() })
}

/// The name and description of a result code, e.g. `CUDA_ERROR_INVALID_VALUE (invalid argument)`;
/// the description comes from the driver when it is loaded.
pub(crate) fn describe(code: sys::CUresult) -> String {
    let name = format!("{code:?}");
    if !driver_present() {
        return name;
    }
    let mut text: *const std::ffi::c_char = ptr::null();
    // SAFETY: writes a pointer to a static string (or leaves it null for unknown codes).
    let r = unsafe { sys::cuGetErrorString(code, &mut text) };
    if r == sys::CUresult::CUDA_SUCCESS && !text.is_null() {
        // SAFETY: the driver returned a NUL-terminated static string.
        let text = unsafe { CStr::from_ptr(text) }.to_string_lossy();
        format!("{name} ({text})")
    } else {
        name
    }
}

/// THE mapping from driver result codes to [`Error`]: out of memory is its own variant, codes
/// that leave the context unusable are [`Error::DeviceLost`], codes that say there is no usable
/// device or driver are [`Error::BackendUnavailable`], everything else is [`Error::Device`].
pub(crate) fn error_from(op: &str, code: sys::CUresult) -> Error {
    use sys::CUresult as R;
    let message = describe(code);
    match code {
        R::CUDA_ERROR_OUT_OF_MEMORY => {
            let (free, total) = if driver_present() { mem_get_info().unwrap_or((0, 0)) } else { (0, 0) };
            Error::OutOfMemory { backend: BACKEND.into(), requested: 0, free, total }
        }
        R::CUDA_ERROR_NO_DEVICE
        | R::CUDA_ERROR_INVALID_DEVICE
        | R::CUDA_ERROR_SYSTEM_DRIVER_MISMATCH
        | R::CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE
        | R::CUDA_ERROR_DEVICE_UNAVAILABLE
        | R::CUDA_ERROR_STUB_LIBRARY
        | R::CUDA_ERROR_SYSTEM_NOT_READY => unavailable(format!("{op}: {message}")),
        R::CUDA_ERROR_ILLEGAL_ADDRESS
        | R::CUDA_ERROR_LAUNCH_FAILED
        | R::CUDA_ERROR_HARDWARE_STACK_ERROR
        | R::CUDA_ERROR_ILLEGAL_INSTRUCTION
        | R::CUDA_ERROR_MISALIGNED_ADDRESS
        | R::CUDA_ERROR_INVALID_ADDRESS_SPACE
        | R::CUDA_ERROR_INVALID_PC
        | R::CUDA_ERROR_LAUNCH_TIMEOUT
        | R::CUDA_ERROR_ECC_UNCORRECTABLE
        | R::CUDA_ERROR_DEVICE_NOT_LICENSED
        | R::CUDA_ERROR_CONTEXT_IS_DESTROYED => {
            Error::DeviceLost { backend: BACKEND.into(), reason: format!("{op}: {message}") }
        }
        _ => Error::Device { backend: BACKEND.into(), op: op.into(), message },
    }
}

/// `Ok(())` for `CUDA_SUCCESS`, else [`error_from`].
pub(crate) fn check(op: &str, code: sys::CUresult) -> Result<()> {
    if code == sys::CUresult::CUDA_SUCCESS { Ok(()) } else { Err(error_from(op, code)) }
}

// ---------------------------------------------------------------------------------------------
// Devices and contexts.

/// Initialises the driver and returns device `ordinal`, or why there is none.
///
/// # Errors
/// [`Error::BackendUnavailable`] when the libraries are missing, the driver does not initialise
/// or there is no device with that ordinal.
pub(crate) fn device(ordinal: usize) -> Result<sys::CUdevice> {
    let count = device_count()?;
    if ordinal >= count {
        return Err(unavailable(format!("device ordinal {ordinal} requested, the driver reports {count} device(s)")));
    }
    let mut dev = 0;
    // SAFETY: the ordinal is below the device count.
    check("cuDeviceGet", unsafe { sys::cuDeviceGet(&mut dev, ordinal as i32) })?;
    Ok(dev)
}

/// The number of CUDA devices the driver reports.
///
/// # Errors
/// As [`device`]: missing libraries or a driver that does not initialise.
pub(crate) fn device_count() -> Result<usize> {
    libraries_present()?;
    // SAFETY: the driver library is present (checked above); cuInit takes flags 0.
    let r = unsafe { sys::cuInit(0) };
    if r != sys::CUresult::CUDA_SUCCESS {
        return Err(unavailable(format!("cuInit failed: {}", describe(r))));
    }
    let mut count = 0;
    // SAFETY: writes the device count.
    check("cuDeviceGetCount", unsafe { sys::cuDeviceGetCount(&mut count) })?;
    Ok(count.max(0) as usize)
}

/// The device's UUID in the form `nvidia-smi` prints, `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
pub(crate) fn device_uuid(dev: sys::CUdevice) -> Result<String> {
    let mut uuid = sys::CUuuid { bytes: [0; 16] };
    // SAFETY: writes 16 bytes for a valid device handle.
    check("cuDeviceGetUuid", unsafe { sys::cuDeviceGetUuid_v2(&mut uuid, dev) })?;
    let b = uuid.bytes.map(|c| c as u8);
    let hex = |r: std::ops::Range<usize>| b[r].iter().map(|x| format!("{x:02x}")).collect::<String>();
    Ok(format!("GPU-{}-{}-{}-{}-{}", hex(0..4), hex(4..6), hex(6..8), hex(8..10), hex(10..16)))
}

/// An integer attribute of a device.
pub(crate) fn device_attribute(dev: sys::CUdevice, attr: sys::CUdevice_attribute) -> Result<i32> {
    let mut v = 0;
    // SAFETY: writes one int for a valid device handle.
    check("cuDeviceGetAttribute", unsafe { sys::cuDeviceGetAttribute(&mut v, attr, dev) })?;
    Ok(v)
}

/// The device's name.
pub(crate) fn device_name(dev: sys::CUdevice) -> Result<String> {
    let mut buf = [0 as std::ffi::c_char; 256];
    // SAFETY: the driver writes at most `len` bytes, NUL-terminated.
    check("cuDeviceGetName", unsafe { sys::cuDeviceGetName(buf.as_mut_ptr(), buf.len() as i32, dev) })?;
    // SAFETY: NUL-terminated within the buffer (the driver truncates).
    Ok(unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned())
}

/// Total memory of a device, in bytes.
pub(crate) fn device_total_mem(dev: sys::CUdevice) -> Result<usize> {
    let mut v = 0usize;
    // SAFETY: writes one size_t for a valid device handle.
    check("cuDeviceTotalMem", unsafe { sys::cuDeviceTotalMem_v2(&mut v, dev) })?;
    Ok(v)
}

/// Retains the device's primary context.
pub(crate) fn primary_ctx_retain(dev: sys::CUdevice) -> Result<sys::CUcontext> {
    let mut ctx = ptr::null_mut();
    // SAFETY: writes a context handle for a valid device.
    check("cuDevicePrimaryCtxRetain", unsafe { sys::cuDevicePrimaryCtxRetain(&mut ctx, dev) })?;
    Ok(ctx)
}

/// Releases one retain of the device's primary context.
///
/// # Safety
/// Must pair with one [`primary_ctx_retain`]; no handle made in the context may be used after the
/// last release.
pub(crate) unsafe fn primary_ctx_release(dev: sys::CUdevice) -> Result<()> {
    // SAFETY: the caller pairs this with a retain.
    check("cuDevicePrimaryCtxRelease", unsafe { sys::cuDevicePrimaryCtxRelease_v2(dev) })
}

/// Makes `ctx` current on the calling thread unless it already is.
pub(crate) fn bind(ctx: sys::CUcontext) -> Result<()> {
    let mut cur = ptr::null_mut();
    // SAFETY: writes the current context handle (null when none).
    check("cuCtxGetCurrent", unsafe { sys::cuCtxGetCurrent(&mut cur) })?;
    if cur != ctx {
        // SAFETY: `ctx` is a live context handle held by the caller.
        check("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(ctx) })?;
    }
    Ok(())
}

/// Free and total memory of the current context's device, in bytes.
pub(crate) fn mem_get_info() -> Result<(usize, usize)> {
    let (mut free, mut total) = (0usize, 0usize);
    // SAFETY: writes two size_t values.
    check("cuMemGetInfo", unsafe { sys::cuMemGetInfo_v2(&mut free, &mut total) })?;
    Ok((free, total))
}

/// Whether the loaded driver exports `symbol` (for entry points newer than some drivers).
pub(crate) fn has_symbol(symbol: &str) -> bool {
    let Ok(name) = CString::new(symbol) else { return false };
    // SAFETY: the library is present (callers check first); `get` only looks the symbol up.
    unsafe { sys::culib().get::<*const c_void>(name.as_bytes_with_nul()).is_ok() }
}

// ---------------------------------------------------------------------------------------------
// Streams and events.

/// A new non-blocking stream (it does not synchronise with the legacy default stream).
pub(crate) fn stream_create() -> Result<sys::CUstream> {
    let mut s = ptr::null_mut();
    // SAFETY: writes a stream handle in the current context.
    check("cuStreamCreate", unsafe {
        sys::cuStreamCreate(&mut s, sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32)
    })?;
    Ok(s)
}

/// Destroys a stream.
///
/// # Safety
/// `s` was made by [`stream_create`] in the current context and is not used afterwards.
pub(crate) unsafe fn stream_destroy(s: sys::CUstream) -> Result<()> {
    // SAFETY: per the contract.
    check("cuStreamDestroy", unsafe { sys::cuStreamDestroy_v2(s) })
}

/// Blocks until all work queued on `s` has finished.
pub(crate) fn stream_synchronize(s: sys::CUstream) -> Result<()> {
    // SAFETY: `s` is a live stream handle (callers hold it).
    check("cuStreamSynchronize", unsafe { sys::cuStreamSynchronize(s) })
}

/// Whether all work queued on `s` has finished (`cuStreamQuery`), without waiting.
#[cfg(test)]
pub(crate) fn stream_query(s: sys::CUstream) -> Result<bool> {
    // SAFETY: `s` is a live stream handle (callers hold it).
    match unsafe { sys::cuStreamQuery(s) } {
        sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
        r => check("cuStreamQuery", r).map(|()| true),
    }
}

/// A new event that records timing.
pub(crate) fn event_create() -> Result<sys::CUevent> {
    let mut e = ptr::null_mut();
    // SAFETY: writes an event handle in the current context.
    check("cuEventCreate", unsafe { sys::cuEventCreate(&mut e, sys::CUevent_flags::CU_EVENT_DEFAULT as u32) })?;
    Ok(e)
}

/// Records `e` on `s`.
pub(crate) fn event_record(e: sys::CUevent, s: sys::CUstream) -> Result<()> {
    // SAFETY: both handles are live (callers hold them).
    check("cuEventRecord", unsafe { sys::cuEventRecord(e, s) })
}

/// Blocks until `e` has completed.
pub(crate) fn event_synchronize(e: sys::CUevent) -> Result<()> {
    // SAFETY: `e` is a live event handle.
    check("cuEventSynchronize", unsafe { sys::cuEventSynchronize(e) })
}

/// Milliseconds between two completed events.
pub(crate) fn event_elapsed_ms(start: sys::CUevent, end: sys::CUevent) -> Result<f32> {
    let mut ms = 0f32;
    // SAFETY: both handles are live; writes one float.
    check("cuEventElapsedTime", unsafe { sys::cuEventElapsedTime_v2(&mut ms, start, end) })?;
    Ok(ms)
}

/// Destroys an event.
///
/// # Safety
/// `e` is not used afterwards.
pub(crate) unsafe fn event_destroy(e: sys::CUevent) -> Result<()> {
    // SAFETY: per the contract.
    check("cuEventDestroy", unsafe { sys::cuEventDestroy_v2(e) })
}

// ---------------------------------------------------------------------------------------------
// Memory.

/// Allocates `bytes` of device memory, ordered on `s` (from the device's default memory pool).
///
/// # Errors
/// [`Error::OutOfMemory`] carrying `bytes` and the free/total memory, or another driver error.
pub(crate) fn mem_alloc_async(bytes: usize, s: sys::CUstream) -> Result<sys::CUdeviceptr> {
    let mut p: sys::CUdeviceptr = 0;
    // SAFETY: writes a device pointer; `s` is a live stream.
    let r = unsafe { sys::cuMemAllocAsync(&mut p, bytes, s) };
    if r == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
        let (free, total) = mem_get_info().unwrap_or((0, 0));
        return Err(Error::OutOfMemory { backend: BACKEND.into(), requested: bytes, free, total });
    }
    check("cuMemAllocAsync", r)?;
    Ok(p)
}

/// Frees device memory, ordered on `s`: the memory is released once the work queued before on
/// `s` has finished.
///
/// # Safety
/// `p` came from [`mem_alloc_async`] and no work queued after this call touches it.
pub(crate) unsafe fn mem_free_async(p: sys::CUdeviceptr, s: sys::CUstream) -> Result<()> {
    // SAFETY: per the contract.
    check("cuMemFreeAsync", unsafe { sys::cuMemFreeAsync(p, s) })
}

/// Queues a host-to-device copy of `bytes` bytes.
///
/// # Safety
/// `dst` is device memory of at least `bytes` bytes; `src` is readable for `bytes` bytes. When
/// `src` is pageable the driver stages it before returning; when it is page-locked it must stay
/// valid until the copy has run.
pub(crate) unsafe fn memcpy_htod_async(
    dst: sys::CUdeviceptr,
    src: *const c_void,
    bytes: usize,
    s: sys::CUstream,
) -> Result<()> {
    // SAFETY: per the contract.
    check("cuMemcpyHtoDAsync", unsafe { sys::cuMemcpyHtoDAsync_v2(dst, src, bytes, s) })
}

/// Queues a device-to-host copy of `bytes` bytes.
///
/// # Safety
/// `src` is device memory of at least `bytes` bytes; `dst` is writable for `bytes` bytes and stays
/// valid (and untouched by the host) until the copy has run.
pub(crate) unsafe fn memcpy_dtoh_async(
    dst: *mut c_void,
    src: sys::CUdeviceptr,
    bytes: usize,
    s: sys::CUstream,
) -> Result<()> {
    // SAFETY: per the contract.
    check("cuMemcpyDtoHAsync", unsafe { sys::cuMemcpyDtoHAsync_v2(dst, src, bytes, s) })
}

/// Queues a device-to-device copy of `bytes` bytes.
///
/// # Safety
/// Both ranges lie in live device allocations and do not overlap.
pub(crate) unsafe fn memcpy_dtod_async(
    dst: sys::CUdeviceptr,
    src: sys::CUdeviceptr,
    bytes: usize,
    s: sys::CUstream,
) -> Result<()> {
    // SAFETY: per the contract.
    check("cuMemcpyDtoDAsync", unsafe { sys::cuMemcpyDtoDAsync_v2(dst, src, bytes, s) })
}

/// Queues device-to-device copies as one `cuMemcpyBatchAsync` call on `s` (which must not be the
/// legacy default stream), with source and destination location hints set to device `ordinal`.
///
/// # Safety
/// Every `(dst, src, size)` names live device ranges; no destination overlaps any other range of
/// the batch.
pub(crate) unsafe fn memcpy_batch_async(
    dsts: &mut [sys::CUdeviceptr],
    srcs: &mut [sys::CUdeviceptr],
    sizes: &mut [usize],
    ordinal: i32,
    s: sys::CUstream,
) -> Result<()> {
    debug_assert!(dsts.len() == srcs.len() && srcs.len() == sizes.len());
    if dsts.is_empty() {
        return Ok(());
    }
    let loc = sys::CUmemLocation { type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE, id: ordinal };
    let mut attrs = sys::CUmemcpyAttributes {
        srcAccessOrder: sys::CUmemcpySrcAccessOrder::CU_MEMCPY_SRC_ACCESS_ORDER_STREAM,
        srcLocHint: loc,
        dstLocHint: loc,
        flags: 0,
    };
    let mut attr_idx = 0usize;
    // SAFETY: the three arrays have `len` entries; one attribute applies from index 0 to all.
    check("cuMemcpyBatchAsync", unsafe {
        sys::cuMemcpyBatchAsync_v2(
            dsts.as_mut_ptr(),
            srcs.as_mut_ptr(),
            sizes.as_mut_ptr(),
            dsts.len(),
            &mut attrs,
            &mut attr_idx,
            1,
            s,
        )
    })
}

/// Page-locks `bytes` bytes of host memory at `p` for asynchronous copies.
///
/// # Safety
/// `p..p+bytes` is a live host allocation that outlives the registration.
pub(crate) unsafe fn host_register(p: *mut c_void, bytes: usize) -> Result<()> {
    // SAFETY: per the contract.
    check("cuMemHostRegister", unsafe { sys::cuMemHostRegister_v2(p, bytes, 0) })
}

/// Undoes [`host_register`].
///
/// # Safety
/// `p` was registered and no queued copy still uses it.
pub(crate) unsafe fn host_unregister(p: *mut c_void) -> Result<()> {
    // SAFETY: per the contract.
    check("cuMemHostUnregister", unsafe { sys::cuMemHostUnregister(p) })
}

fn default_pool(dev: sys::CUdevice) -> Result<sys::CUmemoryPool> {
    let mut pool = ptr::null_mut();
    // SAFETY: writes the default pool handle of a valid device.
    check("cuDeviceGetDefaultMemPool", unsafe { sys::cuDeviceGetDefaultMemPool(&mut pool, dev) })?;
    Ok(pool)
}

/// The default memory pool's high-water mark of reserved bytes (what `cuMemAllocAsync` took from
/// the device), and resets it to the bytes reserved now.
pub(crate) fn pool_reserved_high(dev: sys::CUdevice) -> Result<u64> {
    let pool = default_pool(dev)?;
    let mut high = 0u64;
    let attr = sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH;
    // SAFETY: this attribute is a cuuint64_t.
    check("cuMemPoolGetAttribute", unsafe { sys::cuMemPoolGetAttribute(pool, attr, (&mut high as *mut u64).cast()) })?;
    let mut zero = 0u64;
    // SAFETY: setting the high-water attribute to 0 resets it to the current value.
    check("cuMemPoolSetAttribute", unsafe { sys::cuMemPoolSetAttribute(pool, attr, (&mut zero as *mut u64).cast()) })?;
    Ok(high)
}

/// Lets the default memory pool keep up to `bytes` of freed memory across synchronisations
/// (`CU_MEMPOOL_ATTR_RELEASE_THRESHOLD`), so repeated large allocations do not remap memory.
pub(crate) fn pool_set_release_threshold(dev: sys::CUdevice, bytes: u64) -> Result<()> {
    let pool = default_pool(dev)?;
    let mut v = bytes;
    let attr = sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD;
    // SAFETY: this attribute is a cuuint64_t.
    check("cuMemPoolSetAttribute", unsafe { sys::cuMemPoolSetAttribute(pool, attr, (&mut v as *mut u64).cast()) })
}

/// Returns the default pool's unused memory to the device (after the stream is idle).
pub(crate) fn pool_trim(dev: sys::CUdevice) -> Result<()> {
    let pool = default_pool(dev)?;
    // SAFETY: a live pool handle; trimming to 0 keeps only memory backing live allocations.
    check("cuMemPoolTrimTo", unsafe { sys::cuMemPoolTrimTo(pool, 0) })
}

// ---------------------------------------------------------------------------------------------
// Modules and launches.

/// Loads a module from a CUBIN or PTX image.
pub(crate) fn module_load_data(image: &[u8]) -> Result<sys::CUmodule> {
    let mut m = ptr::null_mut();
    // SAFETY: `image` is a complete CUBIN/PTX image (PTX NUL-terminated by the caller); the driver
    // copies what it needs before returning.
    check("cuModuleLoadData", unsafe { sys::cuModuleLoadData(&mut m, image.as_ptr().cast()) })?;
    Ok(m)
}

/// A kernel of a loaded module.
pub(crate) fn module_get_function(m: sys::CUmodule, name: &str) -> Result<sys::CUfunction> {
    let cname = CString::new(name).map_err(|_| Error::InvalidArgument(format!("kernel name {name:?}")))?;
    let mut f = ptr::null_mut();
    // SAFETY: `m` is a live module; the name is NUL-terminated.
    check(&format!("cuModuleGetFunction({name})"), unsafe { sys::cuModuleGetFunction(&mut f, m, cname.as_ptr()) })?;
    Ok(f)
}

/// Unloads a module.
///
/// # Safety
/// No function of `m` is launched afterwards, and no queued launch still needs it.
pub(crate) unsafe fn module_unload(m: sys::CUmodule) -> Result<()> {
    // SAFETY: per the contract.
    check("cuModuleUnload", unsafe { sys::cuModuleUnload(m) })
}

/// Raises a kernel's dynamic shared-memory limit to `bytes`.
pub(crate) fn set_max_dynamic_shared(f: sys::CUfunction, bytes: usize) -> Result<()> {
    let attr = sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
    // SAFETY: `f` is a live function handle.
    check("cuFuncSetAttribute", unsafe { sys::cuFuncSetAttribute(f, attr, bytes as i32) })
}

/// Launches `f` on `s`.
///
/// # Safety
/// `params` holds one pointer per kernel parameter, each to a value of exactly the parameter's
/// type and size, and every device pointer among them is valid for what the kernel touches.
pub(crate) unsafe fn launch(
    name: &str,
    f: sys::CUfunction,
    grid: (u32, u32, u32),
    block: (u32, u32, u32),
    shared: u32,
    s: sys::CUstream,
    params: &mut [*mut c_void],
) -> Result<()> {
    // SAFETY: per the contract.
    let r = unsafe {
        sys::cuLaunchKernel(
            f,
            grid.0,
            grid.1,
            grid.2,
            block.0,
            block.1,
            block.2,
            shared,
            s,
            params.as_mut_ptr(),
            ptr::null_mut(),
        )
    };
    check(&format!("cuLaunchKernel({name}, grid {grid:?}, block {block:?}, {shared} B shared)"), r)
}

// ---------------------------------------------------------------------------------------------
// NVRTC.

/// Compiles one CUDA C++ source with NVRTC and returns the CUBIN (for `sm_XX`) or PTX (for
/// `compute_XX`, NUL-terminated), and the compile log.
///
/// # Errors
/// [`Error::KernelCompile`] with NVRTC's log when the source does not compile;
/// [`Error::BackendUnavailable`] when NVRTC is not loadable.
pub(crate) fn nvrtc_compile(
    name: &str,
    src: &str,
    headers: &[(&str, &str)],
    options: &[String],
) -> Result<(Vec<u8>, String)> {
    if !nvrtc_present() {
        return Err(unavailable("NVRTC (libnvrtc.so.13) was not found: kernels cannot be compiled"));
    }
    let cstr = |s: &str| {
        CString::new(s).map_err(|_| Error::InvalidArgument(format!("{name}: a kernel source holds a NUL byte")))
    };
    let c_src = cstr(src)?;
    let c_name = cstr(name)?;
    let h_src = headers.iter().map(|h| cstr(h.1)).collect::<Result<Vec<_>>>()?;
    let h_name = headers.iter().map(|h| cstr(h.0)).collect::<Result<Vec<_>>>()?;
    let h_src_p: Vec<_> = h_src.iter().map(|c| c.as_ptr()).collect();
    let h_name_p: Vec<_> = h_name.iter().map(|c| c.as_ptr()).collect();
    let c_opts = options.iter().map(|o| cstr(o)).collect::<Result<Vec<_>>>()?;
    let c_opts_p: Vec<_> = c_opts.iter().map(|c| c.as_ptr()).collect();
    let nv = |op: &str, r: nvrtc::nvrtcResult| -> Result<()> {
        if r == nvrtc::nvrtcResult::NVRTC_SUCCESS {
            Ok(())
        } else {
            Err(Error::KernelCompile { backend: BACKEND.into(), kernel: name.into(), log: format!("{op}: {r:?}") })
        }
    };
    let mut prog: nvrtc::nvrtcProgram = ptr::null_mut();
    // SAFETY: every string is NUL-terminated and outlives the call; the header arrays have
    // `headers.len()` entries.
    nv("nvrtcCreateProgram", unsafe {
        nvrtc::nvrtcCreateProgram(
            &mut prog,
            c_src.as_ptr(),
            c_name.as_ptr(),
            headers.len() as i32,
            h_src_p.as_ptr(),
            h_name_p.as_ptr(),
        )
    })?;
    // From here the program must be destroyed on every path.
    let result = (|| {
        // SAFETY: `prog` is live; the options array has `options.len()` NUL-terminated entries.
        let compiled = unsafe { nvrtc::nvrtcCompileProgram(prog, c_opts_p.len() as i32, c_opts_p.as_ptr()) };
        let log = program_log(prog);
        if compiled != nvrtc::nvrtcResult::NVRTC_SUCCESS {
            return Err(Error::KernelCompile { backend: BACKEND.into(), kernel: name.into(), log });
        }
        let cubin = options.iter().any(|o| o.contains("sm_"));
        let mut size = 0usize;
        let image = if cubin {
            // SAFETY: `prog` compiled; writes the size, then fills a buffer of that size.
            nv("nvrtcGetCUBINSize", unsafe { nvrtc::nvrtcGetCUBINSize(prog, &mut size) })?;
            let mut buf = vec![0u8; size];
            // SAFETY: `buf` has the size NVRTC reported.
            nv("nvrtcGetCUBIN", unsafe { nvrtc::nvrtcGetCUBIN(prog, buf.as_mut_ptr().cast()) })?;
            buf
        } else {
            // SAFETY: as above, for PTX (the size includes the NUL).
            nv("nvrtcGetPTXSize", unsafe { nvrtc::nvrtcGetPTXSize(prog, &mut size) })?;
            let mut buf = vec![0u8; size];
            // SAFETY: `buf` has the size NVRTC reported.
            nv("nvrtcGetPTX", unsafe { nvrtc::nvrtcGetPTX(prog, buf.as_mut_ptr().cast()) })?;
            buf
        };
        Ok((image, log))
    })();
    // SAFETY: `prog` is live and not used afterwards.
    unsafe { nvrtc::nvrtcDestroyProgram(&mut prog) };
    result
}

fn program_log(prog: nvrtc::nvrtcProgram) -> String {
    let mut size = 0usize;
    // SAFETY: `prog` is live; writes the log size (including the NUL).
    if unsafe { nvrtc::nvrtcGetProgramLogSize(prog, &mut size) } != nvrtc::nvrtcResult::NVRTC_SUCCESS || size == 0 {
        return String::new();
    }
    let mut buf = vec![0u8; size];
    // SAFETY: `buf` has the size NVRTC reported.
    if unsafe { nvrtc::nvrtcGetProgramLog(prog, buf.as_mut_ptr().cast()) } != nvrtc::nvrtcResult::NVRTC_SUCCESS {
        return String::new();
    }
    String::from_utf8_lossy(&buf).trim_end_matches('\0').trim().to_string()
}

/// The `sm_XX` architectures this NVRTC can emit CUBIN for, as numbers (`90` for `sm_90`).
pub(crate) fn nvrtc_supported_archs() -> Result<Vec<i32>> {
    if !nvrtc_present() {
        return Err(unavailable("NVRTC (libnvrtc.so.13) was not found"));
    }
    let mut n = 0;
    // SAFETY: writes one int.
    let r = unsafe { nvrtc::nvrtcGetNumSupportedArchs(&mut n) };
    if r != nvrtc::nvrtcResult::NVRTC_SUCCESS {
        return Err(unavailable(format!("nvrtcGetNumSupportedArchs: {r:?}")));
    }
    let mut archs = vec![0i32; n.max(0) as usize];
    // SAFETY: `archs` has the reported number of entries.
    let r = unsafe { nvrtc::nvrtcGetSupportedArchs(archs.as_mut_ptr()) };
    if r != nvrtc::nvrtcResult::NVRTC_SUCCESS {
        return Err(unavailable(format!("nvrtcGetSupportedArchs: {r:?}")));
    }
    Ok(archs)
}

/// NVRTC's (major, minor) version, part of the kernel cache's key.
///
/// # Errors
/// [`Error::BackendUnavailable`] without NVRTC.
pub(crate) fn nvrtc_version() -> Result<(i32, i32)> {
    if !nvrtc_present() {
        return Err(unavailable("NVRTC (libnvrtc.so.13) was not found"));
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: two writable ints; NVRTC is loadable (checked above).
    let r = unsafe { nvrtc::nvrtcVersion(&mut major, &mut minor) };
    if r != nvrtc::nvrtcResult::NVRTC_SUCCESS {
        return Err(unavailable(format!("nvrtcVersion: {r:?}")));
    }
    Ok((major, minor))
}

/// The driver's CUDA version (`cuDriverGetVersion`, e.g. 13000), part of the kernel cache's key.
///
/// # Errors
/// [`Error::BackendUnavailable`] without the driver library.
pub(crate) fn driver_version() -> Result<i32> {
    if !driver_present() {
        return Err(unavailable("the CUDA driver library (libcuda) was not found"));
    }
    let mut v = 0;
    // SAFETY: one writable int; the driver library is loadable (checked above).
    check("cuDriverGetVersion", unsafe { sys::cuDriverGetVersion(&mut v) })?;
    Ok(v)
}
