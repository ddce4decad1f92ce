//! NVRTC compilation of the kernel files in `shaders/cuda`, and the per-context module cache.
//!
//! Each `.cu` file is compiled at its first use in a context, for the device's own architecture
//! (CUBIN for `sm_XX` when this NVRTC knows it, else PTX for the newest `compute_XX` it knows,
//! which the driver finishes). A file that fails to compile is an
//! [`Error::KernelCompile`](backend_api::Error::KernelCompile) carrying NVRTC's log; it is not
//! cached, so the next call tries again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use backend_api::{Error, Result};
use cudarc::driver::sys;

use crate::driver;

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
}

impl Source {
    /// Every kernel file.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) const ALL: [Source; 5] = [Source::Transpose, Source::Copy, Source::Hash, Source::Merkle, Source::Lde];

    /// The file name and its text.
    pub(crate) fn file(self) -> (&'static str, &'static str) {
        use shaders::cuda;
        match self {
            Source::Transpose => ("transpose.cu", cuda::TRANSPOSE),
            Source::Copy => ("copy.cu", cuda::COPY),
            Source::Hash => ("hash.cu", cuda::HASH),
            Source::Merkle => ("merkle.cu", cuda::MERKLE),
            Source::Lde => ("lde.cu", cuda::LDE),
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// NVRTC options for a target: `sm_90` gives CUBIN, `compute_90` PTX.
pub(crate) fn compile_options(target: &str) -> Vec<String> {
    vec![format!("--gpu-architecture={target}"), "-std=c++17".into(), "-lineinfo".into(), "-DNVRTC_BUILD=1".into()]
}

/// Compiles one kernel file for `target` (`sm_XX` or `compute_XX`) and returns the image (CUBIN,
/// or NUL-terminated PTX) and NVRTC's log.
///
/// # Errors
/// [`Error::KernelCompile`] with the log; [`Error::BackendUnavailable`] without NVRTC.
pub(crate) fn compile(source: Source, target: &str) -> Result<(Vec<u8>, String)> {
    let (name, text) = source.file();
    driver::nvrtc_compile(name, text, shaders::cuda::HEADERS, &compile_options(target))
}

/// The NVRTC target for a device of compute capability `cap`.
///
/// # Errors
/// [`Error::BackendUnavailable`] when this NVRTC knows no architecture at or below the device's.
pub(crate) fn target_for(cap: (i32, i32)) -> Result<String> {
    let arch = cap.0 * 10 + cap.1;
    let supported = driver::nvrtc_supported_archs()?;
    if supported.contains(&arch) {
        return Ok(format!("sm_{arch}"));
    }
    match supported.iter().copied().filter(|&a| a <= arch).max() {
        Some(a) => Ok(format!("compute_{a}")),
        None => Err(Error::BackendUnavailable {
            backend: driver::BACKEND.into(),
            reason: format!("this NVRTC supports {supported:?}, none at or below the device's sm_{arch}"),
        }),
    }
}

/// A kernel handle, valid while its module is loaded (for the life of the [`crate::context::Device`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Kernel {
    /// The kernel's name, for error messages.
    pub(crate) name: &'static str,
    /// The driver handle.
    pub(crate) raw: sys::CUfunction,
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

/// The compiled modules of one context, one slot per kernel file.
#[derive(Default)]
pub(crate) struct Modules {
    slots: [Mutex<Option<Arc<Module>>>; 5],
}

impl Modules {
    /// The kernel `name` of `source`, compiling and loading the file on first use. The context
    /// must be current.
    pub(crate) fn kernel(&self, source: Source, name: &'static str, shared: usize, cap: (i32, i32)) -> Result<Kernel> {
        let module = {
            let mut slot = self.slots[source.index()].lock().unwrap_or_else(|p| p.into_inner());
            match &*slot {
                Some(m) => Arc::clone(m),
                None => {
                    let target = target_for(cap)?;
                    let (mut image, _log) = compile(source, &target)?;
                    if !target.starts_with("sm_") && image.last() != Some(&0) {
                        image.push(0);
                    }
                    let raw = driver::module_load_data(&image)?;
                    let m = Arc::new(Module { raw, functions: Mutex::new(HashMap::new()) });
                    *slot = Some(Arc::clone(&m));
                    m
                }
            }
        };
        let mut fns = module.functions.lock().unwrap_or_else(|p| p.into_inner());
        let entry = match fns.get(name) {
            Some(&e) => e,
            None => {
                let f = driver::module_get_function(module.raw, name)?;
                fns.insert(name, (f, 48 << 10));
                (f, 48 << 10)
            }
        };
        if shared > entry.1 {
            driver::set_max_dynamic_shared(entry.0, shared)?;
            fns.insert(name, (entry.0, shared));
        }
        Ok(Kernel { name, raw: entry.0 })
    }

    /// Unloads every module. The context must be current and idle.
    pub(crate) fn unload_all(&self) {
        for slot in &self.slots {
            let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(m) = slot.take() {
                // SAFETY: called from the device's drop, after the stream is idle; no kernel of
                // the module is launched afterwards.
                let _ = unsafe { driver::module_unload(m.raw) };
            }
        }
    }
}
