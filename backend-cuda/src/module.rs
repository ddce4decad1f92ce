//! NVRTC compilation of the kernel files in `shaders/cuda`, the on-disk image cache in front of
//! it, and the per-context module table.
//!
//! - **Compiled units** ([`crate::kernel_units`]). A light file (`transpose.cu`, `copy.cu`,
//!   `merkle.cu`) is one NVRTC program. A heavy file (`lde.cu`, `hash.cu`: fully unrolled
//!   register kernels, seconds of ptxas each) is compiled one kernel per program
//!   (`-DKERNEL_SELECT -DWANT_<name>=1`), so a process compiles only the kernels it launches, and
//!   [`Modules::prepare`] compiles several in parallel.
//! - **Embedded first** ([`crate::embedded`]): a build with NVRTC carries the CUBIN of every
//!   unit for each architecture from `sm_80` up that its NVRTC knows; a device of one of those
//!   loads it without NVRTC or the cache. An image the driver refuses falls back to what follows.
//! - **Else for the device's own architecture:** CUBIN for `sm_XX` when this NVRTC knows it, so
//!   the driver loads machine code and JIT-compiles nothing; else PTX for the newest `compute_XX`
//!   it knows, which the driver finishes.
//! - **Cached on disk** ([`crate::kernel_cache`]): keyed by the unit's source, options,
//!   architecture and the NVRTC version ([`crate::kernel_units::unit_key`]), so a later process
//!   loads the image instead of compiling it.
//! - A unit that fails to compile is an [`Error::KernelCompile`]
//!   carrying NVRTC's log; it is neither cached nor kept, so the next call tries again.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use std::ffi::CString;

use backend_api::{Error, Result};
use cudarc::driver::result as cu;
use cudarc::driver::sys;

use crate::driver::{self, err};
use crate::kernel_cache::{CacheKey, ImageOrigin, KernelCache};
use crate::{embedded, kernel_units};

/// One kernel file of `shaders/cuda`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Source {
    /// `transpose.cu`: the tiled block transpose and the fused run-pass kernel.
    Transpose,
    /// `copy.cu`: the batched-copy gather kernel.
    Copy,
    /// `hash.cu`: leaf hashing.
    Hash,
    /// `merkle.cu`: Merkle levels.
    Merkle,
    /// `lde.cu`: the NTT passes of the coset LDE.
    Lde,
    /// `open.cu`: the opening products.
    Open,
    /// `quotient.cu`: the constraint program's interpreter.
    Quotient,
    /// `field_selftest.cu` (unit tests only, not a kernel file of the shaders crate): the device's
    /// field arithmetic in one test kernel.
    #[cfg(test)]
    FieldSelfTest,
}

impl Source {
    /// Every kernel file of the shaders crate.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) const ALL: [Source; 7] =
        [Source::Transpose, Source::Copy, Source::Hash, Source::Merkle, Source::Lde, Source::Open, Source::Quotient];

    /// The file name and its text.
    pub(crate) fn file(self) -> (&'static str, &'static str) {
        use shaders::cuda;
        match self {
            Source::Transpose => ("transpose.cu", cuda::TRANSPOSE),
            Source::Copy => ("copy.cu", cuda::COPY),
            Source::Hash => ("hash.cu", cuda::HASH),
            Source::Merkle => ("merkle.cu", cuda::MERKLE),
            Source::Lde => ("lde.cu", cuda::LDE),
            Source::Open => ("open.cu", cuda::OPEN),
            Source::Quotient => ("quotient.cu", cuda::QUOTIENT),
            #[cfg(test)]
            Source::FieldSelfTest => ("field_selftest.cu", include_str!("tests/field_selftest.cu")),
        }
    }

    /// Whether the file is compiled one kernel per NVRTC program: it holds
    /// `#if ALL_KERNELS || WANT_<name>` guards ([`kernel_units::file_units`]; a unit test checks
    /// that this answer matches the file's text).
    pub(crate) fn per_kernel(self) -> bool {
        matches!(self, Source::Hash | Source::Lde)
    }
}

/// One NVRTC program: a whole light file, or one kernel of a heavy file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Unit {
    /// The file.
    pub(crate) source: Source,
    /// The one kernel compiled, for a [`Source::per_kernel`] file.
    pub(crate) kernel: Option<&'static str>,
}

impl Unit {
    /// Every unit of every kernel file: the light files whole, each guarded kernel of a heavy file
    /// alone ([`kernel_units::file_units`]), in [`Source::ALL`] order.
    pub(crate) fn all() -> Vec<Unit> {
        Source::ALL
            .into_iter()
            .flat_map(|source| {
                kernel_units::file_units(source.file().1).into_iter().map(move |kernel| Unit { source, kernel })
            })
            .collect()
    }

    /// The unit that holds kernel `name` of `source`.
    pub(crate) fn of(source: Source, name: &'static str) -> Self {
        Self { source, kernel: source.per_kernel().then_some(name) }
    }

    /// The unit's name in reports: `lde.cu` or `lde.cu:ntt_dif_pass`.
    pub(crate) fn label(&self) -> String {
        match self.kernel {
            Some(k) => format!("{}:{k}", self.source.file().0),
            None => self.source.file().0.to_string(),
        }
    }

    /// The NVRTC options for `target`, with the kernel selection of a one-kernel unit.
    pub(crate) fn options(&self, target: &str) -> Vec<String> {
        kernel_units::unit_options(target, self.kernel)
    }

    /// This unit's embedded image for architecture `arch` (`90`), when this build has one.
    pub(crate) fn embedded(&self, arch: i32) -> Option<&'static [u8]> {
        let (file, text) = self.source.file();
        embedded::find(file, text, self.kernel, arch).map(|i| i.bytes)
    }
}

/// NVRTC options for a target: `sm_90` gives CUBIN, `compute_90` PTX.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn compile_options(target: &str) -> Vec<String> {
    kernel_units::unit_options(target, None)
}

/// Compiles one kernel file whole for `target` (`sm_XX` or `compute_XX`) and returns the image
/// (CUBIN, or NUL-terminated PTX) and NVRTC's log.
///
/// # Errors
/// [`Error::KernelCompile`] with the log; [`Error::BackendUnavailable`] without NVRTC.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn compile(source: Source, target: &str) -> Result<(Vec<u8>, String)> {
    compile_unit(Unit { source, kernel: None }, target)
}

/// Compiles one unit for `target`; as [`compile`].
///
/// # Errors
/// As [`compile`].
pub(crate) fn compile_unit(unit: Unit, target: &str) -> Result<(Vec<u8>, String)> {
    let (name, text) = unit.source.file();
    driver::nvrtc_compile(name, text, shaders::cuda::HEADERS, &unit.options(target))
}

/// The cache key of `unit` compiled for `target` by NVRTC `nvrtc_version`
/// ([`kernel_units::unit_key`]; the embedded images carry the same keys).
pub(crate) fn cache_key(unit: Unit, target: &str, nvrtc_version: (i32, i32)) -> CacheKey {
    let (name, text) = unit.source.file();
    CacheKey::from_digest(kernel_units::unit_key(
        name,
        text,
        unit.kernel,
        target,
        nvrtc_version,
        shaders::cuda::HEADERS,
    ))
}

/// The image of `unit` for `target`: from `cache`, else compiled by NVRTC (and stored).
///
/// # Errors
/// As [`compile`].
pub(crate) fn image(unit: Unit, target: &str, cache: &KernelCache) -> Result<(Vec<u8>, ImageOrigin)> {
    let key = cache_key(unit, target, driver::nvrtc_version()?);
    let (mut image, origin) = cache.get_or_compile(&key, || compile_unit(unit, target).map(|(image, _log)| image))?;
    if !target.starts_with("sm_") && image.last() != Some(&0) {
        image.push(0);
    }
    Ok((image, origin))
}

/// The image of `unit` for a device of compute capability `cap`: the embedded CUBIN when this
/// build has one for the device's architecture, else [`image`] for [`target_for`]'s target.
///
/// # Errors
/// As [`image`] and [`target_for`].
pub(crate) fn device_image(
    unit: Unit,
    cap: (i32, i32),
    cache: &KernelCache,
) -> Result<(Cow<'static, [u8]>, ImageOrigin)> {
    if let Some(bytes) = unit.embedded(arch_of(cap)) {
        return Ok((Cow::Borrowed(bytes), ImageOrigin::Embedded));
    }
    let (image, origin) = image(unit, &target_for(cap)?, cache)?;
    Ok((Cow::Owned(image), origin))
}

/// `90` for compute capability `(9, 0)`.
pub(crate) fn arch_of(cap: (i32, i32)) -> i32 {
    cap.0 * 10 + cap.1
}

/// The NVRTC target for a device of compute capability `cap`.
///
/// # Errors
/// [`Error::BackendUnavailable`] when this NVRTC knows no architecture at or below the device's.
pub(crate) fn target_for(cap: (i32, i32)) -> Result<String> {
    let arch = arch_of(cap);
    let supported = driver::nvrtc_supported_archs()?;
    if supported.contains(&arch) {
        return Ok(format!("sm_{arch}"));
    }
    match supported.iter().copied().filter(|&a| a <= arch).max() {
        Some(a) => Ok(format!("compute_{a}")),
        None => Err(Error::BackendUnavailable {
            backend: driver::BACKEND,
            reason: format!("this NVRTC supports {supported:?}, none at or below the device's sm_{arch}"),
        }),
    }
}

/// A unit's image, where it came from, and the time it took.
type Prepared = (Cow<'static, [u8]>, ImageOrigin, Duration);

/// What preparing one unit cost, as [`crate::CudaBackend::prepare_kernels`] reports it.
#[derive(Clone, Debug)]
pub struct KernelPrep {
    /// `lde.cu:ntt_dif_pass_lean16`, or a whole file such as `merkle.cu`.
    pub unit: String,
    /// Where the image came from.
    pub origin: ImageOrigin,
    /// Time to compile the unit or read it from the cache (about nothing for an embedded one).
    pub image_time: Duration,
    /// Time to load the image into the context (`cuModuleLoadData`).
    pub load_time: Duration,
    /// Image size in bytes.
    pub image_bytes: usize,
}

/// What making one unit ready for a named architecture did, as [`crate::prepare_kernel_cache`]
/// reports it.
#[derive(Clone, Debug)]
pub struct UnitPrep {
    /// `lde.cu:ntt_dif_pass_lean16`, or a whole file such as `merkle.cu`.
    pub unit: String,
    /// What the image is for: `sm_90` (CUBIN), or `compute_90` (PTX, when NVRTC does not know the
    /// architecture).
    pub target: String,
    /// [`ImageOrigin::Embedded`]: nothing to do; [`ImageOrigin::Cache`]: already in the cache;
    /// [`ImageOrigin::Compiled`]: compiled now and stored.
    pub origin: ImageOrigin,
    /// Time to compile the unit or read it from the cache.
    pub time: Duration,
    /// Image size in bytes.
    pub image_bytes: usize,
}

/// What [`crate::prepare_kernel_cache`] did.
#[derive(Clone, Debug)]
pub struct KernelCacheReport {
    /// The architecture, `90` for `sm_90`.
    pub arch: i32,
    /// The kernel cache directory; `None` when caching is off (then compiled units are not kept).
    pub cache_dir: Option<std::path::PathBuf>,
    /// One entry per unit, in file order.
    pub units: Vec<UnitPrep>,
    /// The kernel cache's warnings (a directory it could not use, an entry it could not store).
    pub warnings: Vec<String>,
}

/// Every unit of `units` for a device of compute capability `cap`, without a device: the embedded
/// image when there is one, else from `cache` or compiled and stored ([`image`]), on up to
/// `threads` threads.
///
/// # Errors
/// The first unit's error, in `units` order.
pub(crate) fn prepare_for_arch(
    units: &[Unit],
    cap: (i32, i32),
    threads: usize,
    cache: &KernelCache,
) -> Result<Vec<UnitPrep>> {
    let arch = arch_of(cap);
    let target = match units.iter().all(|u| u.embedded(arch).is_some()) {
        true => format!("sm_{arch}"),
        false => target_for(cap)?,
    };
    parallel_map(units, threads, |&unit| {
        let t = Instant::now();
        let (origin, image_bytes, target) = match unit.embedded(arch) {
            Some(bytes) => (ImageOrigin::Embedded, bytes.len(), format!("sm_{arch}")),
            None => image(unit, &target, cache).map(|(img, origin)| (origin, img.len(), target.clone()))?,
        };
        Ok(UnitPrep { unit: unit.label(), target, origin, time: t.elapsed(), image_bytes })
    })
    .into_iter()
    .collect()
}

/// `f` over every item, on up to `threads` scoped threads taking the next item as they finish
/// one; the results in `items` order.
pub(crate) fn parallel_map<T: Sync, R: Send>(items: &[T], threads: usize, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<Mutex<Option<R>>> = items.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..threads.clamp(1, items.len().max(1)) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    let r = f(item);
                    *results[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
                }
            });
        }
    });
    // A thread that panicked re-raised its panic when the scope ended: every slot is filled.
    results
        .into_iter()
        .map(|m| m.into_inner().unwrap_or_else(|p| p.into_inner()).expect("every item was mapped"))
        .collect()
}

/// A kernel handle, valid while its module is loaded (for the life of the [`crate::context::Device`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Kernel {
    /// The kernel's name, for error messages.
    pub(crate) name: &'static str,
    /// The driver handle.
    pub(crate) raw: sys::CUfunction,
}

/// Loads a CUBIN or a NUL-terminated PTX image (as [`image`] returns them) into the current
/// context.
///
/// # Errors
/// A driver error (an image for another architecture, a PTX newer than the driver).
fn load_image(image: &[u8]) -> Result<sys::CUmodule> {
    if image.is_empty() {
        return Err(Error::InvalidArgument("an empty kernel image".into()));
    }
    if !image.starts_with(b"\x7fELF") && image.last() != Some(&0) {
        return Err(Error::InvalidArgument("a PTX image without its NUL terminator".into()));
    }
    // SAFETY: a complete CUBIN or NUL-terminated PTX image (checked above for PTX); the driver
    // copies what it needs before returning.
    unsafe { cu::module::load_data(image.as_ptr().cast()) }.map_err(err("cuModuleLoadData"))
}

/// Loads `bytes` (from [`device_image`], of `origin`); when an embedded image is refused by the
/// driver (one this driver cannot load), loads the run-time path's image for the device instead,
/// with one warning, and returns its origin and size beside the module.
///
/// # Errors
/// The load error of a run-time image, or the run-time path's error after a refused embedded one.
fn load_or_fall_back(
    unit: Unit,
    cap: (i32, i32),
    cache: &KernelCache,
    bytes: &[u8],
    origin: ImageOrigin,
) -> Result<(sys::CUmodule, Option<(ImageOrigin, usize)>)> {
    match load_image(bytes) {
        Ok(raw) => Ok((raw, None)),
        Err(e) if origin == ImageOrigin::Embedded && !matches!(e, Error::DeviceLost { .. }) => {
            eprintln!(
                "warning: cuda: the embedded image of {} for sm_{} was refused ({e}); compiling it with NVRTC",
                unit.label(),
                arch_of(cap)
            );
            let (fresh, origin) = image(unit, &target_for(cap)?, cache)?;
            Ok((load_image(&fresh)?, Some((origin, fresh.len()))))
        }
        Err(e) => Err(e),
    }
}

struct Module {
    raw: sys::CUmodule,
    /// Functions looked up so far, with the dynamic shared memory their limit was raised to.
    functions: Mutex<HashMap<&'static str, (sys::CUfunction, usize)>>,
}

// SAFETY: module and function handles are plain driver handles, usable from any thread with the
// context current (the caller binds it).
unsafe impl Send for Module {}
// SAFETY: as above; the lookup table is behind a mutex.
unsafe impl Sync for Module {}

/// The loaded modules of one context, one per compiled unit.
#[derive(Default)]
pub(crate) struct Modules {
    loaded: Mutex<HashMap<Unit, Arc<Module>>>,
}

impl Modules {
    /// The kernel `name` of `source`, compiling (or reading from the cache) and loading its unit
    /// on first use. The context must be current.
    pub(crate) fn kernel(
        &self,
        source: Source,
        name: &'static str,
        shared: usize,
        cap: (i32, i32),
        cache: &KernelCache,
    ) -> Result<Kernel> {
        let unit = Unit::of(source, name);
        let module = {
            let mut loaded = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
            match loaded.get(&unit) {
                Some(m) => Arc::clone(m),
                None => {
                    let (image, origin) = device_image(unit, cap, cache)?;
                    let (raw, _) = load_or_fall_back(unit, cap, cache, &image, origin)?;
                    let m = Arc::new(Module { raw, functions: Mutex::default() });
                    loaded.insert(unit, Arc::clone(&m));
                    m
                }
            }
        };
        let mut fns = module.functions.lock().unwrap_or_else(|p| p.into_inner());
        let entry = match fns.get(name) {
            Some(&e) => e,
            None => {
                let cname = CString::new(name)
                    .map_err(|_| Error::InvalidArgument(format!("kernel name {name:?} holds a NUL byte")))?;
                // SAFETY: the module is loaded until `unload_all` (the device's drop).
                let f = unsafe { cu::module::get_function(module.raw, cname) }
                    .map_err(|e| driver::error_from(&format!("cuModuleGetFunction({name})"), e.0))?;
                fns.insert(name, (f, 48 << 10));
                (f, 48 << 10)
            }
        };
        if shared > entry.1 {
            let attr = sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
            // SAFETY: a live function handle of a loaded module.
            unsafe { cu::function::set_function_attribute(entry.0, attr, shared as i32) }
                .map_err(err("cuFuncSetAttribute"))?;
            fns.insert(name, (entry.0, shared));
        }
        Ok(Kernel { name, raw: entry.0 })
    }

    /// Compiles (or reads from `cache`) every unit of `units` not loaded yet, on up to `threads`
    /// threads at once, then loads them. The context must be current on the calling thread.
    ///
    /// # Errors
    /// The first compile or load error; the units prepared before it stay loaded.
    pub(crate) fn prepare(
        &self,
        units: &[Unit],
        cap: (i32, i32),
        threads: usize,
        cache: &KernelCache,
    ) -> Result<Vec<KernelPrep>> {
        let todo: Vec<Unit> = {
            let loaded = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
            let mut seen = std::collections::HashSet::new();
            units.iter().copied().filter(|u| !loaded.contains_key(u) && seen.insert(*u)).collect()
        };
        let results: Vec<Result<Prepared>> = parallel_map(&todo, threads, |&unit| {
            let t = Instant::now();
            device_image(unit, cap, cache).map(|(img, origin)| (img, origin, t.elapsed()))
        });
        let mut report = Vec::with_capacity(todo.len());
        for (unit, r) in todo.into_iter().zip(results) {
            let (img, origin, image_time) = r?;
            let mut loaded = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
            if loaded.contains_key(&unit) {
                continue;
            }
            let t = Instant::now();
            let (raw, fallback) = load_or_fall_back(unit, cap, cache, &img, origin)?;
            loaded.insert(unit, Arc::new(Module { raw, functions: Mutex::default() }));
            // A prepared unit is loaded whole, not at its kernels' first launches.
            // SAFETY: loaded just above in this context, which the caller made current.
            unsafe { crate::driver::load_functions(raw) }?;
            let (origin, image_bytes) = fallback.unwrap_or((origin, img.len()));
            report.push(KernelPrep { unit: unit.label(), origin, image_time, load_time: t.elapsed(), image_bytes });
        }
        Ok(report)
    }

    /// The labels of the loaded units some of whose functions are not loaded on the device yet
    /// (lazy loading), or `None` when the driver cannot enumerate functions.
    #[cfg(test)]
    pub(crate) fn units_not_wholly_loaded(&self) -> Option<std::collections::BTreeSet<String>> {
        let loaded = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
        let mut partial = std::collections::BTreeSet::new();
        for (unit, m) in loaded.iter() {
            // SAFETY: loaded modules of the context the caller made current.
            let functions = unsafe { crate::driver::module_functions(m.raw) }.ok()?;
            if functions.is_empty() {
                return None;
            }
            // SAFETY: as above.
            if !functions.iter().all(|&f| unsafe { crate::driver::function_loaded(f) }.unwrap_or(false)) {
                partial.insert(unit.label());
            }
        }
        Some(partial)
    }

    /// The labels of the units loaded so far ([`Unit::label`]).
    #[cfg(test)]
    pub(crate) fn loaded_labels(&self) -> std::collections::BTreeSet<String> {
        self.loaded.lock().unwrap_or_else(|p| p.into_inner()).keys().map(Unit::label).collect()
    }

    /// Unloads every module. The context must be current and idle.
    pub(crate) fn unload_all(&self) {
        let mut loaded = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
        for (_, m) in loaded.drain() {
            // SAFETY: called from the device's drop, after the stream is idle; no kernel of the
            // module is launched afterwards.
            let _ = unsafe { cu::module::unload(m.raw) };
        }
    }
}
