//! Compiles the kernels ahead of time: with the `embedded-kernels` feature (on by default) and
//! NVRTC loadable here, every unit of every kernel file (`src/kernel_units.rs`) is compiled to
//! CUBIN for each architecture this NVRTC supports from `sm_80` up, in parallel threads, and the
//! images are embedded in the crate (`src/embedded.rs` reads the table written here), keyed as
//! the run-time kernel cache keys them. Without NVRTC the build succeeds without images and the
//! crate compiles its kernels at run time, as it does for an architecture without an image.
//! Compiled images are also kept in `<target>/kernel-images`, so that the builds of other profiles
//! in the same target directory (a check and a test build) reuse them instead of compiling again;
//! an image there that no build has written or reused for a week is removed by the next build
//! that does not need it.
//!
//! NVRTC is found as the run time finds it (the loader path: `LD_LIBRARY_PATH`, the pip wheel
//! `nvidia-cuda-nvrtc`'s `lib` folder put there), then in a CUDA install (`CUDA_PATH`,
//! `CUDA_HOME`, `CUDA_ROOT`, `/usr/local/cuda`). `STARK_COMMIT_EMBED_KERNELS=0` leaves the
//! images out of a build that cannot turn the feature off (a dependent crate's default
//! features); `REQUIRE_NVRTC=1` makes a missing NVRTC a build error instead of a fallback.
//! The build says which way it went in one `cargo:warning` line.

use std::ffi::{CString, c_char, c_int, c_void};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

#[path = "src/kernel_units.rs"]
mod kernel_units;

/// The environment variable that leaves the images out (`0`, `off`, `no`, `false`).
const EMBED_ENV: &str = "STARK_COMMIT_EMBED_KERNELS";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/kernel_units.rs");
    for var in [EMBED_ENV, "REQUIRE_NVRTC", "CUDA_PATH", "CUDA_HOME", "CUDA_ROOT", "LD_LIBRARY_PATH", "PATH"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    // The kernel sources come from the `shaders` build-dependency: a changed `.cu` file rebuilds
    // it, which rebuilds and reruns this script.
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let table = out.join("embedded_kernels.rs");
    let required = std::env::var("REQUIRE_NVRTC").is_ok_and(|v| v == "1");

    let skip = if std::env::var_os("CARGO_FEATURE_EMBEDDED_KERNELS").is_none() {
        Some("the `embedded-kernels` feature is off".to_string())
    } else if std::env::var(EMBED_ENV).is_ok_and(|v| matches!(v.trim(), "0" | "off" | "no" | "false")) {
        Some(format!("{EMBED_ENV} is set to leave them out"))
    } else {
        None
    };
    if let Some(reason) = skip {
        write(&table, &empty_table(&reason));
        println!(
            "cargo:warning=backend-cuda: no embedded kernel images ({reason}); kernels are compiled by NVRTC at run time"
        );
        return;
    }
    let nvrtc = match Nvrtc::load() {
        Ok(n) => n,
        Err(why) => {
            if required {
                panic!("REQUIRE_NVRTC=1 but NVRTC cannot be loaded at build time: {why}");
            }
            let reason = format!("NVRTC was not found at build time: {why}");
            write(&table, &empty_table(&reason));
            println!(
                "cargo:warning=backend-cuda: no embedded kernel images ({reason}); kernels are compiled by NVRTC at run \
                 time"
            );
            return;
        }
    };
    let started = Instant::now();
    let version = nvrtc.version();
    let archs = kernel_units::embed_archs(&nvrtc.supported_archs());
    let images_dir = out.join("kernel-images");
    std::fs::create_dir_all(&images_dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", images_dir.display()));
    let shared = shared_images_dir(&out);

    // Every (unit, architecture), the heavy files first so that the long compiles start early.
    struct Job {
        file: &'static str,
        text: &'static str,
        kernel: Option<&'static str>,
        arch: i32,
        key: String,
    }
    let mut jobs = Vec::new();
    let mut sources: Vec<(&'static str, &'static str)> = shaders::cuda::SOURCES.to_vec();
    sources.sort_by_key(|(_, text)| kernel_units::guarded_kernels(text).is_empty());
    for &(file, text) in &sources {
        for kernel in kernel_units::file_units(text) {
            for &arch in &archs {
                let target = format!("sm_{arch}");
                let key = kernel_units::unit_key(file, text, kernel, &target, version, shaders::cuda::HEADERS);
                jobs.push(Job { file, text, kernel, arch, key });
            }
        }
    }
    let threads = std::env::var("NUM_JOBS")
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
        .clamp(1, jobs.len().max(1));
    let next = AtomicUsize::new(0);
    let compiled = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                while let Some(job) = jobs.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let name = format!("{}.cubin", job.key);
                    let path = images_dir.join(&name);
                    // An image under its key was compiled from exactly these inputs by this NVRTC
                    // (written whole, through a rename), by an earlier run of this script, for
                    // this build or another profile's.
                    if path.is_file() {
                        continue;
                    }
                    if let Some(image) = shared.as_ref().and_then(|dir| reuse(&dir.join(&name))) {
                        write_whole(&path, &image);
                        continue;
                    }
                    let options = kernel_units::unit_options(&format!("sm_{}", job.arch), job.kernel);
                    match nvrtc.compile(job.file, job.text, shaders::cuda::HEADERS, &options) {
                        Ok(image) => {
                            write_whole(&path, &image);
                            if let Some(dir) = &shared {
                                write_whole(&dir.join(&name), &image);
                            }
                            compiled.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(log) => {
                            let label = job.kernel.map_or(job.file.to_string(), |k| format!("{}:{k}", job.file));
                            failures.lock().unwrap().push(format!("{label} for sm_{}:\n{log}", job.arch));
                        }
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    if !failures.is_empty() {
        panic!("{} kernel unit(s) do not compile with NVRTC:\n{}", failures.len(), failures.join("\n\n"));
    }
    // Images of keys no longer built (an edited source, another NVRTC) are removed.
    let keep: std::collections::HashSet<String> = jobs.iter().map(|j| format!("{}.cubin", j.key)).collect();
    if let Ok(entries) = std::fs::read_dir(&images_dir) {
        for e in entries.flatten() {
            if !keep.contains(&e.file_name().to_string_lossy().into_owned()) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    // In the shared directory only whole images (another build may be writing a temporary file),
    // and only those no build has written or reused for a week: another checkout or commit
    // building into this target directory may still need the images this one does not.
    if let Some(entries) = shared.as_ref().and_then(|dir| std::fs::read_dir(dir).ok()) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let stale = e.metadata().and_then(|m| m.modified()).ok().and_then(|t| t.elapsed().ok());
            if name.ends_with(".cubin") && !keep.contains(&name) && stale.is_some_and(|age| age > SHARED_IMAGE_LIFE) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }

    let mut bytes = 0u64;
    let mut code = String::from("// @generated by backend-cuda/build.rs: the embedded kernel images.\n");
    writeln!(code, "pub(crate) const STATUS: Status = Status::Built {{ nvrtc: ({}, {}) }};", version.0, version.1)
        .unwrap();
    writeln!(code, "pub(crate) const ARCHS: &[i32] = &{archs:?};").unwrap();
    jobs.sort_by(|a, b| a.key.cmp(&b.key));
    code.push_str("pub(crate) static IMAGES: &[Image] = &[\n");
    for job in &jobs {
        let path = images_dir.join(format!("{}.cubin", job.key));
        bytes += std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        writeln!(
            code,
            "    Image {{ key: {:?}, file: {:?}, kernel: {:?}, arch: {}, bytes: include_bytes!({:?}) }},",
            job.key,
            job.file,
            job.kernel,
            job.arch,
            path.to_str().expect("OUT_DIR is valid Unicode")
        )
        .unwrap();
    }
    code.push_str("];\n");
    write(&table, code.as_bytes());
    let units = jobs.len() / archs.len().max(1);
    println!(
        "cargo:warning=backend-cuda: embedded {} kernel images ({units} units x {} architectures, sm_{}..sm_{}, {:.1} MB) \
         from NVRTC {}.{} ({} compiled in {:.1} s on {threads} threads, the rest reused); kernels for other \
         architectures are compiled at run time",
        jobs.len(),
        archs.len(),
        archs.first().copied().unwrap_or(0),
        archs.last().copied().unwrap_or(0),
        bytes as f64 / 1e6,
        version.0,
        version.1,
        compiled.load(Ordering::Relaxed),
        started.elapsed().as_secs_f64(),
    );
}

/// The table of a build without images, saying why.
fn empty_table(reason: &str) -> Vec<u8> {
    format!(
        "// @generated by backend-cuda/build.rs: no embedded kernel images.\n\
         pub(crate) const STATUS: Status = Status::NotBuilt {{ reason: {reason:?} }};\n\
         pub(crate) const ARCHS: &[i32] = &[];\n\
         pub(crate) static IMAGES: &[Image] = &[];\n"
    )
    .into_bytes()
}

/// The images every profile's build of this target directory shares (`<target>/kernel-images`,
/// from `OUT_DIR` = `<target>/<profile>/build/<package>/out`): a `cargo clippy` or dev build and a
/// `cargo test` build (the test profile, another `OUT_DIR`) compile each unit once between them.
/// Images are keyed by their inputs and NVRTC's version, so a shared one is the image this build
/// would compile. `None` (each build compiles its own) for an `OUT_DIR` of another layout, or
/// when the directory cannot be made.
fn shared_images_dir(out: &Path) -> Option<PathBuf> {
    let build = out.parent()?.parent()?;
    if build.file_name()? != "build" {
        return None;
    }
    let dir = build.parent()?.parent()?.join("kernel-images");
    std::fs::create_dir_all(&dir).ok().map(|()| dir)
}

/// How long a shared image that this build does not use is kept after it was last written or
/// reused.
const SHARED_IMAGE_LIFE: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);

/// A shared image's bytes, its modification time set to now, which keeps it from the week-old
/// pruning of other builds while builds use it.
fn reuse(path: &Path) -> Option<Vec<u8>> {
    let image = std::fs::read(path).ok()?;
    if let Ok(file) = std::fs::File::options().append(true).open(path) {
        let _ = file.set_modified(std::time::SystemTime::now());
    }
    Some(image)
}

/// Writes `bytes` to `path` whole: through a file of this process's, renamed into place, so that
/// a concurrent build never reads a partial image.
fn write_whole(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    write(&tmp, bytes);
    std::fs::rename(&tmp, path)
        .unwrap_or_else(|e| panic!("cannot rename {} to {}: {e}", tmp.display(), path.display()));
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
}

type Program = *mut c_void;
type VersionFn = unsafe extern "C" fn(*mut c_int, *mut c_int) -> c_int;
type NumArchsFn = unsafe extern "C" fn(*mut c_int) -> c_int;
type ArchsFn = unsafe extern "C" fn(*mut c_int) -> c_int;
type CreateFn = unsafe extern "C" fn(
    *mut Program,
    *const c_char,
    *const c_char,
    c_int,
    *const *const c_char,
    *const *const c_char,
) -> c_int;
type CompileFn = unsafe extern "C" fn(Program, c_int, *const *const c_char) -> c_int;
type SizeFn = unsafe extern "C" fn(Program, *mut usize) -> c_int;
type GetFn = unsafe extern "C" fn(Program, *mut c_char) -> c_int;
type DestroyFn = unsafe extern "C" fn(*mut Program) -> c_int;

/// The NVRTC entry points this script calls, from a library loaded at run time (as the crate
/// loads it: no CUDA is needed to build without it).
struct Nvrtc {
    _lib: libloading::Library,
    version: VersionFn,
    num_archs: NumArchsFn,
    archs: ArchsFn,
    create: CreateFn,
    compile: CompileFn,
    log_size: SizeFn,
    log: GetFn,
    cubin_size: SizeFn,
    cubin: GetFn,
    destroy: DestroyFn,
}

impl Nvrtc {
    /// The library names to try: the loader's search first, then the CUDA installs.
    fn candidates() -> Vec<PathBuf> {
        let names: &[&str] = if cfg!(windows) {
            &["nvrtc64_130_0.dll", "nvrtc64_13.dll"]
        } else if cfg!(target_os = "macos") {
            &["libnvrtc.dylib"]
        } else {
            &["libnvrtc.so.13", "libnvrtc.so"]
        };
        let mut out: Vec<PathBuf> = names.iter().map(PathBuf::from).collect();
        let mut roots: Vec<PathBuf> =
            ["CUDA_PATH", "CUDA_HOME", "CUDA_ROOT"].iter().filter_map(std::env::var_os).map(PathBuf::from).collect();
        roots.push(PathBuf::from("/usr/local/cuda"));
        for root in roots {
            for sub in ["lib64", "lib", "bin", "bin/x64", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib"] {
                out.extend(names.iter().map(|n| root.join(sub).join(n)));
            }
        }
        out
    }

    fn load() -> Result<Self, String> {
        let mut tried = Vec::new();
        for name in Self::candidates() {
            // SAFETY: loading NVRTC runs its initialisers, as the crate's own load at run time does.
            match unsafe { libloading::Library::new(&name) } {
                Ok(lib) => return Self::from_library(lib).map_err(|e| format!("{}: {e}", name.display())),
                Err(_) => tried.push(name.display().to_string()),
            }
        }
        Err(format!(
            "none of {} could be loaded (install the CUDA 13 toolkit or `pip install nvidia-cuda-nvrtc` and put its lib \
             folder on LD_LIBRARY_PATH, or set CUDA_PATH)",
            tried.len()
        ))
    }

    fn from_library(lib: libloading::Library) -> Result<Self, String> {
        /// # Safety
        /// `T` is the C signature of `name` in NVRTC 13's `nvrtc.h`.
        unsafe fn sym<T: Copy>(lib: &libloading::Library, name: &str) -> Result<T, String> {
            // SAFETY: per the contract; the pointer is used only while `lib` is loaded (it is
            // kept in the same struct).
            unsafe { lib.get::<T>(name.as_bytes()) }.map(|s| *s).map_err(|e| format!("no {name}: {e}"))
        }
        // SAFETY: each type is the symbol's signature in nvrtc.h.
        unsafe {
            Ok(Self {
                version: sym(&lib, "nvrtcVersion")?,
                num_archs: sym(&lib, "nvrtcGetNumSupportedArchs")?,
                archs: sym(&lib, "nvrtcGetSupportedArchs")?,
                create: sym(&lib, "nvrtcCreateProgram")?,
                compile: sym(&lib, "nvrtcCompileProgram")?,
                log_size: sym(&lib, "nvrtcGetProgramLogSize")?,
                log: sym(&lib, "nvrtcGetProgramLog")?,
                cubin_size: sym(&lib, "nvrtcGetCUBINSize")?,
                cubin: sym(&lib, "nvrtcGetCUBIN")?,
                destroy: sym(&lib, "nvrtcDestroyProgram")?,
                _lib: lib,
            })
        }
    }

    fn version(&self) -> (i32, i32) {
        let (mut major, mut minor) = (0, 0);
        // SAFETY: two writable ints.
        let r = unsafe { (self.version)(&mut major, &mut minor) };
        assert_eq!(r, 0, "nvrtcVersion failed: {r}");
        (major, minor)
    }

    fn supported_archs(&self) -> Vec<i32> {
        let mut n = 0;
        // SAFETY: one writable int.
        let r = unsafe { (self.num_archs)(&mut n) };
        assert_eq!(r, 0, "nvrtcGetNumSupportedArchs failed: {r}");
        let mut archs = vec![0; n.max(0) as usize];
        // SAFETY: `archs` has the reported number of entries.
        let r = unsafe { (self.archs)(archs.as_mut_ptr()) };
        assert_eq!(r, 0, "nvrtcGetSupportedArchs failed: {r}");
        archs
    }

    /// The CUBIN of `src` compiled with `options`, or NVRTC's log.
    fn compile(&self, name: &str, src: &str, headers: &[(&str, &str)], options: &[String]) -> Result<Vec<u8>, String> {
        let c = |s: &str| CString::new(s).map_err(|_| format!("{name}: a NUL byte in a source, name or option"));
        let (c_src, c_name) = (c(src)?, c(name)?);
        let h_src = headers.iter().map(|h| c(h.1)).collect::<Result<Vec<_>, _>>()?;
        let h_name = headers.iter().map(|h| c(h.0)).collect::<Result<Vec<_>, _>>()?;
        let c_opts = options.iter().map(|o| c(o)).collect::<Result<Vec<_>, _>>()?;
        let h_src_p: Vec<_> = h_src.iter().map(|s| s.as_ptr()).collect();
        let h_name_p: Vec<_> = h_name.iter().map(|s| s.as_ptr()).collect();
        let opts_p: Vec<_> = c_opts.iter().map(|s| s.as_ptr()).collect();
        let mut prog: Program = std::ptr::null_mut();
        // SAFETY: NUL-terminated strings that outlive the call (NVRTC copies them); the header
        // arrays have `headers.len()` entries.
        let r = unsafe {
            (self.create)(
                &mut prog,
                c_src.as_ptr(),
                c_name.as_ptr(),
                headers.len() as c_int,
                h_src_p.as_ptr(),
                h_name_p.as_ptr(),
            )
        };
        if r != 0 {
            return Err(format!("nvrtcCreateProgram failed: {r}"));
        }
        // SAFETY: a live program and `options.len()` NUL-terminated options.
        let compiled = unsafe { (self.compile)(prog, opts_p.len() as c_int, opts_p.as_ptr()) };
        let result = if compiled != 0 {
            let mut size = 0usize;
            // SAFETY: a live program; writes the size.
            unsafe { (self.log_size)(prog, &mut size) };
            let mut log = vec![0u8; size.max(1)];
            // SAFETY: `log` has the reported size.
            unsafe { (self.log)(prog, log.as_mut_ptr().cast()) };
            Err(String::from_utf8_lossy(&log).trim_end_matches('\0').trim().to_string())
        } else {
            let mut size = 0usize;
            // SAFETY: a live, compiled program; writes the size.
            let r = unsafe { (self.cubin_size)(prog, &mut size) };
            let mut cubin = vec![0u8; size];
            // SAFETY: `cubin` has the reported size.
            let r2 = if r == 0 { unsafe { (self.cubin)(prog, cubin.as_mut_ptr().cast()) } } else { r };
            if r2 == 0 { Ok(cubin) } else { Err(format!("nvrtcGetCUBIN failed: {r2}")) }
        };
        // SAFETY: the program is live and not used after this.
        unsafe { (self.destroy)(&mut prog) };
        result
    }
}
