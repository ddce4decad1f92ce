//! The one small module below the owning types: what cudarc's `result` layer (driver and NVRTC)
//! does not wrap, whether the libraries load, and the one function mapping driver result codes
//! to [`Error`].
//!
//! Every other driver call of the crate goes through `cudarc::driver::result` at its call site
//! (in [`crate::context`], [`crate::memory`], [`crate::module`] and the operation files), each in
//! an `unsafe` block with its reason, its error mapped by [`err`]. What lives here:
//! - library presence ([`libraries_present`], [`nvrtc_present`], [`driver_present`],
//!   [`nvrtc_needed`]): under
//!   cudarc's dynamic loading a missing library is a panic inside cudarc, so presence is checked
//!   before any other call, by loading the library once and keeping it;
//! - the mapping ([`error_from`], and [`err`] for `map_err`);
//! - calls cudarc 0.19 does not wrap: `cuMemcpy2DAsync`, `cuMemHostRegister` /
//!   `cuMemHostUnregister`, `cuStreamQuery`, a symbol lookup; the memory
//!   pool's attributes (typed over cudarc's untyped `mem_pool::{get,set}_attribute`); and NVRTC
//!   programs with headers, CUBIN output, the supported architectures and the version.
//!
//! Functions that take a raw handle or pointer are `unsafe fn` with a `# Safety` section.

use std::ffi::{CString, c_void};
use std::ptr;
use std::sync::OnceLock;

use backend_api::{Error, Result};
use cudarc::driver::result::{self as cu, DriverError};
use cudarc::driver::sys;
use cudarc::nvrtc::result as nvrtc_result;
use cudarc::nvrtc::sys as nvrtc;

/// The backend's name in errors and [`backend_api::DeviceInfo`].
pub(crate) const BACKEND: &str = "cuda";

/// Whether the driver library (`libcuda`) can be loaded. NVRTC is checked when a device is
/// opened ([`nvrtc_needed`]): a device whose architecture has embedded images needs none.
///
/// # Errors
/// [`Error::BackendUnavailable`] naming the library.
pub(crate) fn libraries_present() -> Result<()> {
    if driver_present() {
        return Ok(());
    }
    Err(unavailable(
        "the CUDA driver library (libcuda.so) was not found: no NVIDIA driver is installed or it is not on the loader \
         path",
    ))
}

/// `Ok` when kernels for architecture `arch` (`90`) can be had: NVRTC loads, or this build embeds
/// images for `arch` (`embedded` says which architectures it does, for the message).
///
/// # Errors
/// [`Error::BackendUnavailable`] saying what to install.
pub(crate) fn nvrtc_needed(arch: i32, embedded: bool, embedded_archs: &[i32]) -> Result<()> {
    if embedded || nvrtc_present() {
        return Ok(());
    }
    let have = if embedded_archs.is_empty() {
        "this build embeds no kernel images".to_string()
    } else {
        let archs: Vec<String> = embedded_archs.iter().map(|a| format!("sm_{a}")).collect();
        format!("this build embeds kernel images for {} only", archs.join(", "))
    };
    Err(unavailable(format!(
        "NVRTC (libnvrtc.so.13) was not found and {have}, none for this device's sm_{arch}: install the CUDA 13 \
         toolkit or the nvidia-cuda-nvrtc wheel and put its lib folder on LD_LIBRARY_PATH"
    )))
}

/// Whether NVRTC alone can be loaded (kernels can be compiled without a GPU). Once found, the
/// library stays loaded ([`load_and_keep`]).
pub(crate) fn nvrtc_present() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    *PRESENT.get_or_init(|| load_and_keep(&["nvrtc"]))
}

/// Whether the driver library alone can be loaded, checked once per process. Once found, the
/// library stays loaded ([`load_and_keep`]).
pub(crate) fn driver_present() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    *PRESENT.get_or_init(|| load_and_keep(&["cuda", "nvcuda"]))
}

/// Loads the first of cudarc's candidate file names for `libs` that the loader finds, in cudarc's
/// order, and keeps it loaded for the life of the process. cudarc loads the same file at its
/// first call into the library; with it already in memory that load only takes a reference,
/// where a presence check that unloaded it again (cudarc's `is_culib_present`) made the process
/// map and relocate the library twice (NVRTC is about 100 MB).
fn load_and_keep(libs: &[&str]) -> bool {
    #[cfg(unix)]
    {
        libs.iter().flat_map(|lib| cudarc::get_lib_name_candidates(lib)).any(|name| {
            let Ok(name) = CString::new(name) else { return false };
            // SAFETY: a NUL-terminated file name; loading runs the library's initialisers, as
            // cudarc's own load of the same file does. The handle is never closed, so the
            // library stays mapped for the process's life (cudarc keeps its own handle too).
            !unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL) }.is_null()
        })
    }
    #[cfg(not(unix))]
    {
        // SAFETY: `is_culib_present` only tries to load the candidate names and drops them.
        unsafe { if libs.contains(&"nvrtc") { nvrtc::is_culib_present() } else { sys::is_culib_present() } }
    }
}

/// [`Error::BackendUnavailable`] with `reason`.
pub(crate) fn unavailable(reason: impl Into<String>) -> Error {
    Error::BackendUnavailable { backend: BACKEND, reason: reason.into() }
}

/// The name and description of a result code, e.g. `CUDA_ERROR_INVALID_VALUE (invalid argument)`;
/// the description comes from the driver when it is loaded.
pub(crate) fn describe(code: sys::CUresult) -> String {
    let name = format!("{code:?}");
    if !driver_present() {
        return name;
    }
    match DriverError(code).error_string() {
        Ok(text) => format!("{name} ({})", text.to_string_lossy()),
        Err(_) => name,
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
            let (free, total) = if driver_present() { cu::mem_get_info().unwrap_or((0, 0)) } else { (0, 0) };
            Error::OutOfMemory { backend: BACKEND, requested: 0, free, total }
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
            Error::DeviceLost { backend: BACKEND, reason: format!("{op}: {message}") }
        }
        _ => Error::Device { backend: BACKEND, op: op.into(), source: Box::new(cudarc::driver::DriverError(code)) },
    }
}

/// [`error_from`] for `map_err` on a cudarc result: `cu::ctx::synchronize().map_err(err("cuCtxSynchronize"))`.
pub(crate) fn err(op: &str) -> impl FnOnce(DriverError) -> Error + '_ {
    move |e| error_from(op, e.0)
}

/// `Ok(())` for `CUDA_SUCCESS`, else [`error_from`].
pub(crate) fn check(op: &str, code: sys::CUresult) -> Result<()> {
    code.result().map_err(err(op))
}

/// Whether the loaded driver exports `symbol` (for entry points newer than some drivers).
pub(crate) fn has_symbol(symbol: &str) -> bool {
    let Ok(name) = CString::new(symbol) else { return false };
    if !driver_present() {
        return false;
    }
    // SAFETY: the library is present (checked above); `get` only looks the symbol up.
    unsafe { sys::culib().get::<*const c_void>(name.as_bytes_with_nul()).is_ok() }
}

/// Whether all work queued on `s` has finished (`cuStreamQuery`), without waiting.
///
/// # Safety
/// `s` is a live stream of the current context.
#[cfg(test)]
pub(crate) unsafe fn stream_query(s: sys::CUstream) -> Result<bool> {
    // SAFETY: per the contract.
    match unsafe { sys::cuStreamQuery(s) } {
        sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
        r => check("cuStreamQuery", r).map(|()| true),
    }
}

// ---------------------------------------------------------------------------------------------
// Memory that cudarc does not wrap.

/// One side of a strided copy: where its rows are and how many bytes apart they start.
enum Rows {
    Host(*mut c_void, usize),
    Device(sys::CUdeviceptr, usize),
}

/// Queues the strided copy of `height` rows of `width_bytes` bytes from `src` to `dst` on `s`
/// (`cuMemcpy2DAsync`); the callers' contracts say which ranges must be live.
///
/// # Safety
/// As `memcpy_2d_htod_async` or `memcpy_2d_dtoh_async`, for the two sides given.
unsafe fn memcpy_2d_async(src: Rows, dst: Rows, (width_bytes, height): (usize, usize), s: sys::CUstream) -> Result<()> {
    let mut copy = sys::CUDA_MEMCPY2D {
        srcXInBytes: 0,
        srcY: 0,
        srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_HOST,
        srcHost: ptr::null(),
        srcDevice: 0,
        srcArray: ptr::null_mut(),
        srcPitch: 0,
        dstXInBytes: 0,
        dstY: 0,
        dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_HOST,
        dstHost: ptr::null_mut(),
        dstDevice: 0,
        dstArray: ptr::null_mut(),
        dstPitch: 0,
        WidthInBytes: width_bytes,
        Height: height,
    };
    match src {
        Rows::Host(host, pitch) => (copy.srcHost, copy.srcPitch) = (host.cast_const(), pitch),
        Rows::Device(device, pitch) => {
            (copy.srcMemoryType, copy.srcDevice, copy.srcPitch) =
                (sys::CUmemorytype::CU_MEMORYTYPE_DEVICE, device, pitch);
        }
    }
    match dst {
        Rows::Host(host, pitch) => (copy.dstHost, copy.dstPitch) = (host, pitch),
        Rows::Device(device, pitch) => {
            (copy.dstMemoryType, copy.dstDevice, copy.dstPitch) =
                (sys::CUmemorytype::CU_MEMORYTYPE_DEVICE, device, pitch);
        }
    }
    // SAFETY: a fully initialised descriptor of the two ranges (the contract); the driver reads
    // it before returning.
    check("cuMemcpy2DAsync", unsafe { sys::cuMemcpy2DAsync_v2(&copy, s) })
}

/// Queues a strided host-to-device copy on `s` (`cuMemcpy2DAsync`): `height` rows of
/// `width_bytes` bytes each, read from `src` with rows `src_pitch` bytes apart and written to
/// `dst` with rows `dst_pitch` bytes apart.
///
/// # Safety
/// `src` is page-locked host memory holding `(height - 1) * src_pitch + width_bytes` readable
/// bytes that stay live and unmodified until the copy has completed; `dst` is a live device
/// range of `(height - 1) * dst_pitch + width_bytes` bytes that no other queued work writes
/// concurrently; `width_bytes <= min(src_pitch, dst_pitch)`.
pub(crate) unsafe fn memcpy_2d_htod_async(
    dst: sys::CUdeviceptr,
    dst_pitch: usize,
    src: *const c_void,
    src_pitch: usize,
    shape: (usize, usize),
    s: sys::CUstream,
) -> Result<()> {
    // SAFETY: the contract (the driver only reads a host source).
    unsafe { memcpy_2d_async(Rows::Host(src.cast_mut(), src_pitch), Rows::Device(dst, dst_pitch), shape, s) }
}

/// Queues a strided device-to-host copy on `s` (`cuMemcpy2DAsync`): `height` rows of
/// `width_bytes` bytes each, read from `src` with rows `src_pitch` bytes apart and written to
/// `dst` with rows `dst_pitch` bytes apart.
///
/// # Safety
/// `src` is a live device range of `(height - 1) * src_pitch + width_bytes` bytes that no queued
/// work writes, nor frees, until the copy has completed; `dst` is page-locked host memory holding
/// `(height - 1) * dst_pitch + width_bytes` writable bytes that nothing else reads or writes, and
/// that stay live, until the copy has completed; `width_bytes <= min(src_pitch, dst_pitch)`.
pub(crate) unsafe fn memcpy_2d_dtoh_async(
    dst: *mut c_void,
    dst_pitch: usize,
    src: sys::CUdeviceptr,
    src_pitch: usize,
    shape: (usize, usize),
    s: sys::CUstream,
) -> Result<()> {
    // SAFETY: the contract.
    unsafe { memcpy_2d_async(Rows::Device(src, src_pitch), Rows::Host(dst, dst_pitch), shape, s) }
}

/// Loads every function of `module` onto the device now (`cuFuncLoad`). Under lazy loading
/// (`CUDA_MODULE_LOADING=LAZY`, the driver's default since CUDA 12.2) a module's functions are
/// otherwise loaded at their first launch, inside the caller's timed work, and a load may wait for
/// work on other streams, which undoes a first upload's overlap with its LDE. A driver without
/// `cuModuleEnumerateFunctions` (before CUDA 12.4) leaves the loading to the first launch.
///
/// # Safety
/// `module` is a loaded module of the current context.
pub(crate) unsafe fn load_functions(module: sys::CUmodule) -> Result<()> {
    // SAFETY: the contract.
    for f in unsafe { module_functions(module) }? {
        // SAFETY: a function handle of the loaded module.
        check("cuFuncLoad", unsafe { sys::cuFuncLoad(f) })?;
    }
    Ok(())
}

/// Every function of `module`; none when the driver cannot enumerate them (before CUDA 12.4).
///
/// # Safety
/// `module` is a loaded module of the current context.
pub(crate) unsafe fn module_functions(module: sys::CUmodule) -> Result<Vec<sys::CUfunction>> {
    if !["cuModuleGetFunctionCount", "cuModuleEnumerateFunctions", "cuFuncLoad", "cuFuncIsLoaded"]
        .iter()
        .all(|s| has_symbol(s))
    {
        return Ok(Vec::new());
    }
    let mut count: std::ffi::c_uint = 0;
    // SAFETY: a loaded module (the contract) and a valid out-pointer.
    check("cuModuleGetFunctionCount", unsafe { sys::cuModuleGetFunctionCount(&mut count, module) })?;
    let mut functions: Vec<sys::CUfunction> = vec![ptr::null_mut(); count as usize];
    // SAFETY: room for `count` handles, as the driver just reported.
    check("cuModuleEnumerateFunctions", unsafe {
        sys::cuModuleEnumerateFunctions(functions.as_mut_ptr(), count, module)
    })?;
    Ok(functions)
}

/// Whether `function` is loaded on the device (`cuFuncIsLoaded`).
///
/// # Safety
/// `function` is a function of a loaded module of the current context.
#[cfg(test)]
pub(crate) unsafe fn function_loaded(function: sys::CUfunction) -> Result<bool> {
    let mut state = sys::CUfunctionLoadingState::CU_FUNCTION_LOADING_STATE_UNLOADED;
    // SAFETY: the contract, and a valid out-pointer.
    check("cuFuncIsLoaded", unsafe { sys::cuFuncIsLoaded(&mut state, function) })?;
    Ok(state == sys::CUfunctionLoadingState::CU_FUNCTION_LOADING_STATE_LOADED)
}

/// Page-locks `bytes` bytes of host memory at `p` for asynchronous copies, for every context
/// (`CU_MEMHOSTREGISTER_PORTABLE`).
///
/// # Safety
/// `p..p+bytes` is a live host allocation that outlives the registration.
pub(crate) unsafe fn host_register(p: *mut c_void, bytes: usize) -> Result<()> {
    // SAFETY: per the contract.
    check("cuMemHostRegister", unsafe { sys::cuMemHostRegister_v2(p, bytes, sys::CU_MEMHOSTREGISTER_PORTABLE) })
}

/// Undoes [`host_register`].
///
/// # Safety
/// `p` was registered and no queued copy still uses it.
pub(crate) unsafe fn host_unregister(p: *mut c_void) -> Result<()> {
    // SAFETY: per the contract.
    check("cuMemHostUnregister", unsafe { sys::cuMemHostUnregister(p) })
}

/// The default memory pool's high-water mark of reserved bytes (what `cuMemAllocAsync` took from
/// the device), and resets it to the bytes reserved now.
///
/// # Safety
/// `pool` is the live default pool of the current context's device.
pub(crate) unsafe fn pool_reserved_high(pool: sys::CUmemoryPool) -> Result<u64> {
    let mut high = 0u64;
    let attr = sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH;
    // SAFETY: a live pool (the contract); this attribute is a cuuint64_t.
    unsafe { cu::mem_pool::get_attribute(pool, attr, (&mut high as *mut u64).cast()) }
        .map_err(err("cuMemPoolGetAttribute"))?;
    let mut zero = 0u64;
    // SAFETY: as above; setting the high-water attribute to 0 resets it to the current value.
    unsafe { cu::mem_pool::set_attribute(pool, attr, (&mut zero as *mut u64).cast()) }
        .map_err(err("cuMemPoolSetAttribute"))?;
    Ok(high)
}

/// Lets the memory pool keep up to `bytes` of freed memory across synchronisations
/// (`CU_MEMPOOL_ATTR_RELEASE_THRESHOLD`), so repeated large allocations do not remap memory.
///
/// # Safety
/// `pool` is a live memory pool.
pub(crate) unsafe fn pool_set_release_threshold(pool: sys::CUmemoryPool, bytes: u64) -> Result<()> {
    let mut v = bytes;
    let attr = sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD;
    // SAFETY: a live pool (the contract); this attribute is a cuuint64_t.
    unsafe { cu::mem_pool::set_attribute(pool, attr, (&mut v as *mut u64).cast()) }
        .map_err(err("cuMemPoolSetAttribute"))
}

// ---------------------------------------------------------------------------------------------
// NVRTC: cudarc's `nvrtc::result` compiles, returns logs and PTX; it creates programs without
// headers and has no CUBIN output, which are here.

/// An NVRTC program with its headers, destroyed on drop.
struct Program {
    raw: nvrtc::nvrtcProgram,
}

impl Program {
    /// Creates a program of `src` named `name`, with in-memory `headers` (name, text).
    fn new(name: &str, src: &str, headers: &[(&str, &str)]) -> Result<Self> {
        let cstr = |s: &str| {
            CString::new(s).map_err(|_| Error::InvalidArgument(format!("{name}: a kernel source holds a NUL byte")))
        };
        let (c_src, c_name) = (cstr(src)?, cstr(name)?);
        let h_src = headers.iter().map(|h| cstr(h.1)).collect::<Result<Vec<_>>>()?;
        let h_name = headers.iter().map(|h| cstr(h.0)).collect::<Result<Vec<_>>>()?;
        let h_src_p: Vec<_> = h_src.iter().map(|c| c.as_ptr()).collect();
        let h_name_p: Vec<_> = h_name.iter().map(|c| c.as_ptr()).collect();
        let mut raw: nvrtc::nvrtcProgram = ptr::null_mut();
        // SAFETY: every string is NUL-terminated and outlives the call (NVRTC copies them); the
        // header arrays have `headers.len()` entries.
        unsafe {
            nvrtc::nvrtcCreateProgram(
                &mut raw,
                c_src.as_ptr(),
                c_name.as_ptr(),
                headers.len() as i32,
                h_src_p.as_ptr(),
                h_name_p.as_ptr(),
            )
        }
        .result()
        .map_err(|e| compile_error(name, format!("nvrtcCreateProgram: {:?}", e.0)))?;
        Ok(Self { raw })
    }

    /// The compile log, trimmed (empty when NVRTC has none).
    fn log(&self) -> String {
        // SAFETY: the program is live.
        let log = unsafe { nvrtc_result::get_program_log(self.raw) }.unwrap_or_default();
        let bytes: Vec<u8> = log.iter().map(|&c| c as u8).collect();
        String::from_utf8_lossy(&bytes).trim_end_matches('\0').trim().to_string()
    }

    /// The CUBIN of a program compiled for an `sm_XX` target.
    fn cubin(&self) -> std::result::Result<Vec<u8>, nvrtc_result::NvrtcError> {
        let mut size = 0usize;
        // SAFETY: the program is live and compiled; writes the size.
        unsafe { nvrtc::nvrtcGetCUBINSize(self.raw, &mut size) }.result()?;
        let mut buf = vec![0u8; size];
        // SAFETY: `buf` has the size NVRTC reported.
        unsafe { nvrtc::nvrtcGetCUBIN(self.raw, buf.as_mut_ptr().cast()) }.result()?;
        Ok(buf)
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: the program is live and not used after this.
        let _ = unsafe { nvrtc_result::destroy_program(self.raw) };
    }
}

fn compile_error(name: &str, log: String) -> Error {
    Error::KernelCompile { backend: BACKEND, kernel: name.into(), log }
}

/// Compiles one CUDA C++ source with NVRTC and returns the CUBIN (for `sm_XX`) or PTX (for
/// `compute_XX`, NUL-terminated), and the compile log.
///
/// # Errors
/// [`Error::KernelCompile`] with NVRTC's log when the source does not compile;
/// [`Error::BackendUnavailable`] when NVRTC is not loadable; [`Error::InvalidArgument`] for a
/// NUL byte in a source, name or option.
pub(crate) fn nvrtc_compile(
    name: &str,
    src: &str,
    headers: &[(&str, &str)],
    options: &[String],
) -> Result<(Vec<u8>, String)> {
    if !nvrtc_present() {
        return Err(unavailable("NVRTC (libnvrtc.so.13) was not found: kernels cannot be compiled"));
    }
    if options.iter().any(|o| o.contains('\0')) {
        return Err(Error::InvalidArgument(format!("{name}: an NVRTC option holds a NUL byte")));
    }
    let prog = Program::new(name, src, headers)?;
    // SAFETY: the program is live; the options hold no NUL byte (checked above).
    let compiled = unsafe { nvrtc_result::compile_program(prog.raw, options) };
    let log = prog.log();
    if compiled.is_err() {
        return Err(compile_error(name, log));
    }
    let image = if options.iter().any(|o| o.contains("sm_")) {
        prog.cubin().map_err(|e| compile_error(name, format!("nvrtcGetCUBIN: {:?}", e.0)))?
    } else {
        // SAFETY: the program is live and compiled.
        let ptx = unsafe { nvrtc_result::get_ptx(prog.raw) }
            .map_err(|e| compile_error(name, format!("nvrtcGetPTX: {:?}", e.0)))?;
        // The size NVRTC reports includes the NUL terminator the driver needs.
        ptx.into_iter().map(|c| c as u8).collect()
    };
    Ok((image, log))
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
