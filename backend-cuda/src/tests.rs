//! Unit tests that need no GPU: every kernel file compiles with NVRTC for sm_90 (when NVRTC is
//! present; `REQUIRE_NVRTC=1` makes its absence a failure), the compile error path carries the
//! log, and the driver layer reports a missing device as a typed error instead of panicking.
//! Device behaviour is the conformance suite's job (`tests/tests/cuda.rs`).

use std::io::Write as _;

use backend_api::Error;
use cudarc::driver::sys::CUresult;

use crate::driver;
use crate::module::{self, Source};

/// `true` when NVRTC is loadable; otherwise prints a visible skip, or panics under
/// `REQUIRE_NVRTC=1`.
fn nvrtc_or_skip(test: &str) -> bool {
    if driver::nvrtc_present() {
        return true;
    }
    let msg = format!(
        "SKIPPED backend_cuda::{test}: NVRTC (libnvrtc.so.13) not found; `pip install nvidia-cuda-nvrtc==13.0.88` \
         and put site-packages/nvidia/cu13/lib on LD_LIBRARY_PATH (set REQUIRE_NVRTC=1 to make this a failure)"
    );
    assert!(std::env::var("REQUIRE_NVRTC").as_deref() != Ok("1"), "REQUIRE_NVRTC=1: {msg}");
    // Straight to the process's stderr, past the test harness's capture, so the skip shows.
    let _ = writeln!(std::io::stderr(), "{msg}");
    false
}

/// Panics at the first element of the row-major `m`-column matrix `got` that differs from `want`
/// (or at a length mismatch), naming its row and column.
fn assert_same_words(what: &str, got: &[u64], want: &[u64], m: usize) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    if let Some(at) = got.iter().zip(want).position(|(g, w)| g != w) {
        panic!("{what}: element {at} (row {}, column {}) is {:#x}, not {:#x}", at / m, at % m, got[at], want[at]);
    }
}
#[test]
fn every_kernel_file_compiles_for_sm_90() {
    if !nvrtc_or_skip("every_kernel_file_compiles_for_sm_90") {
        return;
    }
    let archs = driver::nvrtc_supported_archs().expect("NVRTC lists its architectures");
    assert!(archs.contains(&90), "this NVRTC does not support sm_90: {archs:?}");
    assert_eq!(Source::ALL.len(), shaders::cuda::SOURCES.len(), "a kernel file is missing from Source::ALL");
    for source in Source::ALL {
        let (name, _) = source.file();
        match module::compile(source, "sm_90") {
            Ok((cubin, log)) => {
                // An ELF image (CUBIN), not PTX text.
                assert_eq!(&cubin[..4], b"\x7fELF", "{name}: NVRTC did not return a CUBIN");
                assert!(!log.contains("warning"), "{name} compiled with warnings:\n{log}");
            }
            Err(Error::KernelCompile { log, .. }) => panic!("{name} does not compile for sm_90:\n{log}"),
            Err(e) => panic!("{name}: {e}"),
        }
    }
}

#[test]
fn every_prototype_file_compiles_for_sm_90_and_sm_90a() {
    // The throughput prototypes timed by `examples/ntt_proto.rs`, compiled as that example does
    // (whole file, CUBIN; sm_90a on an H100/H200, which adds the warpgroup-MMA kernels), so a
    // broken prototype fails here rather than on the GPU.
    if !nvrtc_or_skip("every_prototype_file_compiles_for_sm_90_and_sm_90a") {
        return;
    }
    assert!(!shaders::cuda::PROTOTYPES.is_empty());
    // NVRTC compiles on the calling thread, and its optimiser recurses deeply over the
    // prototypes' fully unrolled radix-32 blocks: more than a test thread's 2 MiB of stack (the
    // example compiles on its main thread's 8 MiB). A thread of its own with room to spare.
    let compile = |name: &'static str, text: &'static str, arch: &'static str| {
        std::thread::Builder::new()
            .stack_size(64 << 20)
            .spawn(move || driver::nvrtc_compile(name, text, shaders::cuda::HEADERS, &module::compile_options(arch)))
            .expect("a compile thread")
            .join()
            .expect("the compile thread did not panic")
    };
    for &(name, text) in shaders::cuda::PROTOTYPES {
        for arch in ["sm_90", "sm_90a"] {
            match compile(name, text, arch) {
                Ok((cubin, log)) => {
                    assert_eq!(&cubin[..4], b"\x7fELF", "{name}, {arch}: NVRTC did not return a CUBIN");
                    assert!(!log.contains("warning"), "{name} compiled for {arch} with warnings:\n{log}");
                    // The warpgroup-MMA kernels exist exactly in the sm_90a image.
                    let has_wgmma = cubin.windows(13).any(|w| w == b"proto_r16_wgs");
                    assert_eq!(
                        has_wgmma,
                        arch == "sm_90a",
                        "{name}, {arch}: warpgroup-MMA kernels present: {has_wgmma}"
                    );
                }
                Err(Error::KernelCompile { log, .. }) => panic!("{name} does not compile for {arch}:\n{log}"),
                Err(e) => panic!("{name}, {arch}: {e}"),
            }
        }
    }
}

#[test]
fn every_kernel_file_compiles_to_ptx_for_older_drivers() {
    // The fallback target when NVRTC does not know the device's architecture.
    if !nvrtc_or_skip("every_kernel_file_compiles_to_ptx_for_older_drivers") {
        return;
    }
    for source in Source::ALL {
        let (name, _) = source.file();
        let (ptx, _) = module::compile(source, "compute_90").unwrap_or_else(|e| panic!("{name}: {e}"));
        let text = String::from_utf8_lossy(&ptx);
        assert!(text.contains(".target sm_90"), "{name}: not PTX for sm_90");
    }
}

#[test]
fn kernels_named_by_the_host_code_exist() {
    if !nvrtc_or_skip("kernels_named_by_the_host_code_exist") {
        return;
    }
    let names: &[(Source, &[&str])] = &[
        (Source::Transpose, &["transpose_tile", "transpose_fused_runs_v1", "transpose_fused_runs_v2"]),
        (Source::Copy, &["copy_gather"]),
        (
            Source::Hash,
            &[
                "leaves_keccak_rows",
                "leaves_keccak_pairs",
                "leaves_blake3_rows",
                "leaves_blake3_pairs",
                "leaves_blake3_rows_long",
                "leaves_blake3_pairs_long",
                "leaves_block_keccak",
                "leaves_block_blake3",
            ],
        ),
        (
            Source::Merkle,
            &["merkle_pad", "merkle_level_keccak", "merkle_level_blake3", "merkle_top_keccak", "merkle_top_blake3"],
        ),
        (
            Source::Lde,
            &[
                "ntt_dif_pass",
                "ntt_dit_pass",
                "ntt_dif_pass_reg",
                "ntt_dit_pass_reg",
                "ntt_dif_pass_pow2",
                "ntt_dit_pass_pow2",
                "ntt_dif_pass_reg16",
                "ntt_dit_pass_reg16",
                "ntt_dif_pass_reg_c4",
                "ntt_dit_pass_reg_c4",
                "ntt_dif_pass_lazy",
                "ntt_dit_pass_lazy",
                "ntt_dif_pass_lean",
                "ntt_dit_pass_lean",
                "ntt_dif_pass_lean16",
                "ntt_dit_pass_lean16",
                "gl_selftest",
            ],
        ),
    ];
    for (source, kernels) in names {
        let (ptx, _) = module::compile(*source, "compute_90").unwrap();
        let text = String::from_utf8_lossy(&ptx);
        for k in *kernels {
            assert!(text.contains(&format!(".entry {k}(")), "{}: no kernel {k}", source.file().0);
        }
    }
}

/// Every kernel of a file compiled one kernel per program (`#if ALL_KERNELS || WANT_<name>`)
/// compiles alone and defines exactly that kernel; the list comes from the file's text, so a
/// kernel added without its guard, or a guard naming no kernel, fails here.
#[test]
fn one_kernel_units_define_exactly_their_kernel() {
    if !nvrtc_or_skip("one_kernel_units_define_exactly_their_kernel") {
        return;
    }
    for source in Source::ALL.into_iter().filter(|s| s.per_kernel()) {
        let (file, text) = source.file();
        let guarded: Vec<&'static str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("#if ALL_KERNELS || WANT_"))
            .map(|name| &*Box::leak(name.trim().to_string().into_boxed_str()))
            .collect();
        // Kernel definitions: `extern "C" __global__` lines, and hash.cu's LEAF_KERNEL(...) lines.
        let defined =
            text.lines().filter(|l| l.starts_with("extern \"C\" __global__") || l.starts_with("LEAF_KERNEL(")).count();
        assert_eq!(guarded.len(), defined, "{file}: {defined} kernels, {} guards: {guarded:?}", guarded.len());
        for name in guarded {
            let (ptx, _) = module::compile_unit(module::Unit::of(source, name), "compute_90")
                .unwrap_or_else(|e| panic!("{file}:{name} alone: {e}"));
            let text = String::from_utf8_lossy(&ptx);
            let entries: Vec<&str> = text.lines().filter(|l| l.contains(".entry ")).collect();
            assert_eq!(entries.len(), 1, "{file}:{name}: {entries:?}");
            assert!(entries[0].contains(&format!(".entry {name}(")), "{file}:{name}: {entries:?}");
        }
    }
}

/// The cache key changes with everything that changes the image.
#[test]
fn cache_keys_cover_unit_target_and_versions() {
    use module::{Unit, cache_key};
    let lde = Unit::of(Source::Lde, "ntt_dif_pass");
    let base = cache_key(lde, "sm_90", (13, 0), 13000);
    assert_eq!(base, cache_key(lde, "sm_90", (13, 0), 13000));
    for (what, other) in [
        ("kernel", cache_key(Unit::of(Source::Lde, "ntt_dit_pass"), "sm_90", (13, 0), 13000)),
        ("file", cache_key(Unit::of(Source::Merkle, "merkle_pad"), "sm_90", (13, 0), 13000)),
        ("architecture", cache_key(lde, "sm_100", (13, 0), 13000)),
        ("PTX target", cache_key(lde, "compute_90", (13, 0), 13000)),
        ("NVRTC version", cache_key(lde, "sm_90", (13, 1), 13000)),
        ("driver version", cache_key(lde, "sm_90", (13, 0), 13010)),
    ] {
        assert_ne!(base, other, "the key ignores the {what}");
    }
    // Light files are one unit whatever kernel is asked for; heavy ones one per kernel.
    assert_eq!(Unit::of(Source::Merkle, "merkle_pad"), Unit::of(Source::Merkle, "merkle_top_keccak"));
    assert_ne!(Unit::of(Source::Hash, "leaves_keccak_rows"), Unit::of(Source::Hash, "leaves_keccak_pairs"));
    assert_eq!(Unit::of(Source::Hash, "leaves_keccak_rows").label(), "hash.cu:leaves_keccak_rows");
}

#[test]
fn a_broken_kernel_reports_the_nvrtc_log() {
    if !nvrtc_or_skip("a_broken_kernel_reports_the_nvrtc_log") {
        return;
    }
    let src = "#include \"common.cuh\"\nextern \"C\" __global__ void k(u64* p) { p[0] = undefined_name; }\n";
    let err = driver::nvrtc_compile("broken.cu", src, shaders::cuda::HEADERS, &module::compile_options("sm_90"))
        .expect_err("an undefined identifier must not compile");
    match err {
        Error::KernelCompile { kernel, log, .. } => {
            assert_eq!(kernel, "broken.cu");
            assert!(log.contains("undefined_name"), "the log names the error: {log}");
        }
        e => panic!("expected KernelCompile, got {e}"),
    }
}

#[test]
fn missing_driver_or_device_is_backend_unavailable() {
    // Here (CI, no GPU) this must be BackendUnavailable; on a GPU machine the backend opens.
    match crate::CudaBackend::new(0) {
        Ok(b) => {
            assert!(driver::driver_present());
            assert_eq!(backend_api::Backend::info(&b).backend, "cuda");
            // The UUID as nvidia-smi prints it, the same for every instance on the device.
            let uuid = b.uuid();
            assert!(uuid.len() == 40 && uuid.starts_with("GPU-"), "{uuid}");
            assert_eq!(uuid.matches('-').count(), 5, "{uuid}");
            assert_eq!(crate::CudaBackend::new(0).map(|c| c.uuid().to_owned()).ok().as_deref(), Some(uuid));
            assert!(crate::CudaBackend::device_count().is_ok_and(|n| n >= 1));
        }
        Err(Error::BackendUnavailable { backend, reason }) => {
            assert_eq!(backend, "cuda");
            assert!(!reason.is_empty());
            if !driver::driver_present() {
                assert!(reason.contains("libcuda"), "{reason}");
                let count = crate::CudaBackend::device_count().expect_err("no driver, no device count");
                assert!(matches!(count, Error::BackendUnavailable { .. }), "{count}");
            }
        }
        Err(e) => panic!("expected BackendUnavailable or a backend, got {e}"),
    }
    // An ordinal no machine has.
    match crate::CudaBackend::new(1 << 20) {
        Err(Error::BackendUnavailable { .. }) => {}
        other => panic!("device 2^20 must be unavailable, got {other:?}"),
    }
}

#[test]
fn result_codes_map_to_typed_errors() {
    let oom = driver::error_from("cuMemAllocAsync", CUresult::CUDA_ERROR_OUT_OF_MEMORY);
    assert!(oom.is_out_of_memory(), "{oom}");
    let lost = driver::error_from("cuStreamSynchronize", CUresult::CUDA_ERROR_ILLEGAL_ADDRESS);
    assert!(matches!(lost, Error::DeviceLost { .. }), "{lost}");
    let none = driver::error_from("cuInit", CUresult::CUDA_ERROR_NO_DEVICE);
    assert!(matches!(none, Error::BackendUnavailable { .. }), "{none}");
    let other = driver::error_from("cuMemcpyBatchAsync", CUresult::CUDA_ERROR_INVALID_VALUE);
    match other {
        Error::Device { op, source, .. } => {
            assert_eq!(op, "cuMemcpyBatchAsync");
            // The driver's code is kept as the source, not flattened into a string.
            let code = source.downcast_ref::<cudarc::driver::DriverError>().expect("a driver error as the source");
            assert_eq!(code.0, CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        e => panic!("expected Device, got {e}"),
    }
    assert!(driver::check("x", CUresult::CUDA_SUCCESS).is_ok());
}

/// Prints ptxas's resource report (registers, spills, shared memory) of every kernel:
/// `cargo test -p backend-cuda --release resource_report -- --ignored --nocapture`.
#[test]
#[ignore = "a report, not a check"]
fn resource_report() {
    if !nvrtc_or_skip("resource_report") {
        return;
    }
    for source in Source::ALL {
        let (name, text) = source.file();
        let mut opts = module::compile_options("sm_90");
        opts.push("--ptxas-options=-v".into());
        let (cubin, log) = driver::nvrtc_compile(name, text, shaders::cuda::HEADERS, &opts).unwrap();
        println!("== {name}\n{log}");
        // CUBIN_OUT=<dir> keeps the images for `cuobjdump -sass`.
        if let Ok(dir) = std::env::var("CUBIN_OUT") {
            std::fs::write(std::path::Path::new(&dir).join(format!("{name}.cubin")), &cubin).unwrap();
        }
    }
}

/// Writes the CUBIN of every one-kernel unit of `lde.cu` for `sm_90`, compiled with the
/// backend's own NVRTC options ([`module::Unit::options`]), as `<name>.cubin` into the directory
/// named by `SASS_OUT`: the input of `scripts/sass_count.py`, which disassembles them and counts
/// their instructions. `SASS_OUT=<dir> cargo test -p backend-cuda --release lde_sass_images --
/// --ignored`.
#[test]
#[ignore = "writes files for the SASS report, checks nothing"]
fn lde_sass_images() {
    if !nvrtc_or_skip("lde_sass_images") {
        return;
    }
    let dir =
        std::path::PathBuf::from(std::env::var("SASS_OUT").expect("SASS_OUT=<directory> names where the CUBINs go"));
    std::fs::create_dir_all(&dir).unwrap();
    let (_, text) = Source::Lde.file();
    for name in text.lines().filter_map(|l| l.strip_prefix("#if ALL_KERNELS || WANT_")) {
        let name: &'static str = Box::leak(name.trim().to_string().into_boxed_str());
        let (cubin, _log) = module::compile_unit(module::Unit::of(Source::Lde, name), "sm_90").unwrap();
        std::fs::write(dir.join(format!("{name}.cubin")), &cubin).unwrap();
    }
    // The floor: one lazy butterfly of each kind alone, on values and a twiddle from global memory.
    let (cubin, _log) =
        driver::nvrtc_compile("bfly_floor.cu", BFLY_FLOOR, shaders::cuda::HEADERS, &module::compile_options("sm_90"))
            .unwrap();
    std::fs::write(dir.join("bfly_floor.cubin"), &cubin).unwrap();
}

/// One lazy DIT and one lazy DIF butterfly per thread, as `reg_stage` computes them: the
/// arithmetic floor that `scripts/sass_count.py` compares a radix-32 window with.
const BFLY_FLOOR: &str = r#"#include "common.cuh"
extern "C" __global__ void bfly_floor_dit(u64* v, const u64* tw) {
    const u32 i = threadIdx.x;
    const u64 x = v[2 * i], y = v[2 * i + 1], w = tw[i];
    const u64 yw = gl_mul_lazy(y, w);
    v[2 * i] = gl_add_lazy(x, yw);
    v[2 * i + 1] = gl_sub_lazy(x, yw);
}
extern "C" __global__ void bfly_floor_dif(u64* v, const u64* tw) {
    const u32 i = threadIdx.x;
    const u64 x = v[2 * i], y = v[2 * i + 1], w = tw[i];
    v[2 * i] = gl_add_lazy(x, y);
    v[2 * i + 1] = gl_mul_lazy(gl_sub_lazy(x, y), w);
}
"#;

/// A backend on device 0, or `None` after a visible skip (a failure under `REQUIRE_CUDA=1`).
fn cuda_or_skip(test: &str) -> Option<crate::CudaBackend> {
    match crate::CudaBackend::new(0) {
        Ok(b) => Some(b),
        Err(e) => {
            assert!(std::env::var("REQUIRE_CUDA").as_deref() != Ok("1"), "REQUIRE_CUDA=1: {e}");
            let _ = writeln!(std::io::stderr(), "SKIPPED backend_cuda::{test}: {e}");
            None
        }
    }
}

/// `prepare_kernels(hash)` loads every leaf kernel a commit with that hash launches, the fused
/// block-pass kernel of `hash_leaves_then_transpose` included: afterwards the leaves and the
/// transpose of a table whose plan has several blocks load no further `hash.cu` unit (a unit
/// loaded at first use would be compiled or read from disk inside a one-shot commit's timed
/// phases). Needs a GPU: skipped visibly without one, a failure under `REQUIRE_CUDA=1`.
#[test]
fn prepare_kernels_loads_the_fused_leaf_kernels_a_commit_launches() {
    use backend_api::{Backend, HashKind, LeafJob, LeafLayout, LeafSpec, MatrixShape, TreeShape};
    let Some(backend) = cuda_or_skip("prepare_kernels_loads_the_fused_leaf_kernels_a_commit_launches") else {
        return;
    };
    let hash_units = || -> std::collections::BTreeSet<String> {
        backend.device.modules.loaded_labels().into_iter().filter(|l| l.starts_with("hash.cu:")).collect()
    };
    let (rows, cols) = (256, 20);
    let shape = MatrixShape::new(rows, cols).unwrap();
    let tree = TreeShape::new(rows).unwrap();
    let host: Vec<u64> = (0..(rows * cols) as u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).collect();
    for hash in HashKind::ALL {
        backend.prepare_kernels(hash).unwrap();
        let prepared = hash_units();
        assert!(
            prepared.contains(&format!("hash.cu:{}", crate::hash::block_pass_kernel(hash).0)),
            "{hash}: {prepared:?}"
        );
        let mut buf = backend.upload(&host).unwrap();
        let mut nodes = backend.alloc(tree.words()).unwrap();
        let spec = LeafSpec::new(hash, LeafLayout::Rows, 0..cols).unwrap();
        let mut jobs = [LeafJob { spec: &spec, out: &mut nodes, out_digest: tree.first_leaf() }];
        // Blocks of 32 rows: eight blocks, so the fused block pass runs.
        backend.hash_leaves_then_transpose(&mut buf, shape, &mut jobs, (cols + 1) * 8 * 32).unwrap();
        backend.synchronize().unwrap();
        assert_eq!(hash_units(), prepared, "{hash}: a leaf kernel was loaded after prepare_kernels");
    }
}

/// `queue_download` failing after its copy is queued (the completion event's recording, made to
/// fail through [`FaultSite::DownloadQueued`]) returns its error only once no copy into the host
/// memory it is about to free is pending: the stream is idle when the error arrives. A 256 MiB
/// copy takes milliseconds, so an error path that skipped the wait would find the stream busy.
/// The site fires once: the next download returns the bytes, and no device memory leaks.
#[test]
fn a_failed_queue_download_waits_for_its_copy() {
    use backend_api::{Backend, FaultSite, PendingDownload};
    let _count = PINNED_COUNT.lock().unwrap_or_else(|p| p.into_inner());
    let Some(backend) = cuda_or_skip("a_failed_queue_download_waits_for_its_copy") else { return };
    let len = 32 << 20;
    let host: Vec<u64> = (0..len as u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (i >> 7)).collect();
    let baseline = backend.memory().live;
    {
        let buf = backend.upload(&host).unwrap();
        let mut busy = backend.alloc(len).unwrap();
        for _ in 0..4 {
            backend.copy_engine_copy(&buf, &mut busy).unwrap();
        }
        backend.tracker().fail_site(FaultSite::DownloadQueued);
        let err = backend.queue_download(&buf).expect_err("the injected fault must surface");
        // SAFETY: the backend's live stream, with its context current.
        let idle = unsafe { driver::stream_query(backend.device.stream()) }.unwrap();
        assert!(err.to_string().contains("cuEventRecord"), "{err}");
        assert!(idle, "queue_download returned its error while its copy could still be writing into the host memory");
        let got = backend.queue_download(&buf).unwrap().wait().unwrap();
        assert!(got[..] == host[..], "the download after the fault returned other bytes");
        // A download dropped without `wait` releases its memory only after the copy too.
        drop(backend.queue_download(&buf).unwrap());
        // SAFETY: as above.
        let idle = unsafe { driver::stream_query(backend.device.stream()) }.unwrap();
        assert!(idle, "a dropped download left its copy pending");
    }
    backend.synchronize().unwrap();
    assert_eq!(backend.memory().live, baseline, "device memory leaked");
}

/// The device's Goldilocks arithmetic (the PTX multiplication included) against backend-api's
/// host arithmetic, on every pair of edge values and 2^20 random pairs. Needs a GPU: skipped
/// visibly without one, a failure under `REQUIRE_CUDA=1`.
#[test]
fn device_field_arithmetic_matches_the_host() {
    use backend_api::Backend;
    let _count = PINNED_COUNT.lock().unwrap_or_else(|p| p.into_inner());
    use backend_api::field::{P, add, canonical, mul, pow, sub};
    let Some(backend) = cuda_or_skip("device_field_arithmetic_matches_the_host") else { return };
    let edge = [
        0,
        1,
        2,
        P - 2,
        P - 1,
        P,
        P + 1,
        u64::MAX,
        u64::MAX - 1,
        0xFFFF_FFFF,
        1 << 32,
        (1 << 32) + 1,
        1 << 63,
        (1 << 63) - 1,
        0xFFFF_FFFF_0000_0000,
        0x0000_0001_FFFF_FFFF,
        0xFFFF_FFFE_FFFF_FFFF,
    ];
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for &x in &edge {
        for &y in &edge {
            a.push(x);
            b.push(y);
        }
    }
    let mut s = 0x2545_f491_4f6c_dd1d_u64;
    for _ in 0..1 << 20 {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        a.push(s);
        let t = s.rotate_left(23) ^ 0x9e37_79b9_7f4a_7c15;
        // Operands near p and near 2^64 too, where the carries happen.
        b.push(match s % 4 {
            0 => P - (t % 1024),
            1 => u64::MAX - (t % 1024),
            _ => t,
        });
    }
    let n = a.len();
    let (da, db) = (backend.upload(&a).unwrap(), backend.upload(&b).unwrap());
    // Outputs per pair of gl_selftest (lde.cu).
    const OUTPUTS: usize = 10;
    let out = backend.alloc(OUTPUTS * n).unwrap();
    let kernel = backend.device.kernel(Source::Lde, "gl_selftest", 0).unwrap();
    let (pa, pb, po, pn) = (da.ptr(), db.ptr(), out.ptr(), n as u64);
    let args = crate::launch::LaunchArgs::new().arg(&pa).arg(&pb).arg(&po).arg(&pn);
    // SAFETY: (const u64*, const u64*, u64*, u64) as gl_selftest declares; `out` holds OUTPUTS n.
    unsafe { backend.device.launch(&kernel, crate::launch::LaunchConfig::linear(1024, 256, 0), args).unwrap() };
    let got = backend.download_vec(&out).unwrap();
    assert_eq!(got.len(), OUTPUTS * n);
    let (mut shifts, mut fused) = ([false; 96], [false; 96]);
    for i in 0..n {
        let (x, y) = (a[i], b[i]);
        assert_eq!(got[OUTPUTS * i], mul(x, y), "mul({x:#x}, {y:#x})");
        assert_eq!(got[OUTPUTS * i + 1], add(canonical(x), canonical(y)), "add({x:#x}, {y:#x})");
        assert_eq!(got[OUTPUTS * i + 2], sub(canonical(x), canonical(y)), "sub({x:#x}, {y:#x})");
        // The lazy operations take any u64 (non-canonical included) and agree after canonicalising.
        assert_eq!(got[OUTPUTS * i + 3], mul(x, y), "lazy mul({x:#x}, {y:#x})");
        assert_eq!(got[OUTPUTS * i + 4], add(x, y), "lazy add({x:#x}, {y:#x})");
        assert_eq!(got[OUTPUTS * i + 5], sub(x, y), "lazy sub({x:#x}, {y:#x})");
        // Multiplication by 2^s through shifts (the NTT's power-of-two twiddles), 0 < s < 96.
        let s = 1 + y % 95;
        shifts[s as usize] = true;
        assert_eq!(got[OUTPUTS * i + 6], mul(x, pow(2, s)), "{x:#x} * 2^{s}");
        // The fused DIT butterfly (x, y) -> (x + y 2^f, x - y 2^f) and the bounded reduction of
        // x 2^f (its negation for f >= 64) under it, 0 < f < 96, against the host's products, in u128.
        let f = 1 + i % 95;
        fused[f] = true;
        let (pp, yw) = (u128::from(P), u128::from(mul(y, pow(2, f as u64))));
        let (x128, xw) = (u128::from(x) % pp, u128::from(mul(x, pow(2, f as u64))));
        assert_eq!(u128::from(got[OUTPUTS * i + 7]), (x128 + yw) % pp, "{x:#x} + {y:#x} * 2^{f}");
        assert_eq!(u128::from(got[OUTPUTS * i + 8]), (x128 + pp - yw) % pp, "{x:#x} - {y:#x} * 2^{f}");
        let r = got[OUTPUTS * i + 9];
        assert!(r < P, "gl_pow2_red({x:#x}, {f}) = {r:#x} > p - 1");
        let want = if f >= 64 { (pp - xw) % pp } else { xw };
        assert_eq!(u128::from(r), want, "gl_pow2_red({x:#x}, {f})");
    }
    assert!(shifts[1..].iter().all(|&s| s), "every shift 1..95 was tried");
    assert!(fused[1..].iter().all(|&f| f), "every fused butterfly exponent 1..95 was tried");
}

/// Serialises the tests that read the process-wide page-locked byte count.
static PINNED_COUNT: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The backend on device 0, or `None` after a visible skip (a failure under `REQUIRE_CUDA=1`).
fn device_or_skip(test: &str) -> Option<crate::CudaBackend> {
    match crate::CudaBackend::new(0) {
        Ok(b) => Some(b),
        Err(e) => {
            assert!(std::env::var("REQUIRE_CUDA").as_deref() != Ok("1"), "REQUIRE_CUDA=1: {e}");
            let _ = writeln!(std::io::stderr(), "SKIPPED backend_cuda::{test}: {e}");
            None
        }
    }
}

/// Seeded values over all of u64 (about one in 2^32 non-canonical), with p, p + 1 and u64::MAX
/// planted at the start.
fn table(len: usize, seed: u64) -> Vec<u64> {
    let mut s = seed | 1;
    let mut v: Vec<u64> = (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        })
        .collect();
    for (slot, x) in v.iter_mut().zip([backend_api::field::P, backend_api::field::P + 1, u64::MAX]) {
        *slot = x;
    }
    v
}

/// Uploads and downloads through the staging ring keep every byte: lengths below the staging
/// threshold, at it, around one block and past the whole ring (so blocks are reused while
/// earlier copies may still run), a download at an offset, and a host slice overwritten as soon
/// as the upload returns.
#[test]
fn staged_transfers_keep_every_byte() {
    use crate::staging::{SLOT_BYTES, SLOTS, STAGE_MIN_BYTES};
    use backend_api::Backend;
    let _count = PINNED_COUNT.lock().unwrap_or_else(|p| p.into_inner());
    let Some(b) = device_or_skip("staged_transfers_keep_every_byte") else { return };
    let slot = SLOT_BYTES / 8;
    for len in
        [1, STAGE_MIN_BYTES / 8 - 1, STAGE_MIN_BYTES / 8, slot - 1, slot + 1, SLOTS * slot + 3, 2 * SLOTS * slot + 7]
    {
        let mut host = table(len, len as u64);
        let expected = host.clone();
        let d = b.upload(&host).unwrap();
        // The caller may reuse its slice as soon as the upload returns.
        host.iter_mut().for_each(|x| *x = !*x);
        let second = b.upload(&host).unwrap();
        assert!(b.download_vec(&d).unwrap() == expected, "{len} elements: the first upload changed");
        assert!(b.download_vec(&second).unwrap() == host, "{len} elements: the second upload changed");
        let off = len / 3;
        let mut part = vec![0u64; len - off];
        b.download(&d, off, &mut part).unwrap();
        assert!(part[..] == expected[off..], "{len} elements: download at offset {off}");
    }
    assert_eq!(crate::host::pinned_host_bytes(), SLOTS * SLOT_BYTES, "one ring, reused");
    drop(b);
    assert_eq!(crate::host::pinned_host_bytes(), 0, "the ring is freed with its device");
}

/// A page-locked buffer round-trips, waits for its copy before it can be written, goes back to
/// the device's pool on drop and is reused from it, and an allocation the host cannot lock is a
/// typed out-of-memory error that leaves nothing held. Bytes are counted process-wide and in the
/// device's tracker.
#[test]
fn pinned_buffers_round_trip_pool_and_refuse_absurd_sizes() {
    use crate::host::BLOCK_ALIGN;
    use backend_api::Backend;
    let _count = PINNED_COUNT.lock().unwrap_or_else(|p| p.into_inner());
    let Some(b) = device_or_skip("pinned_buffers_round_trip_pool_and_refuse_absurd_sizes") else { return };
    let before = crate::CudaBackend::pinned_host_bytes();
    let n: usize = (3 << 20) + 5;
    let block = (n * 8).next_multiple_of(BLOCK_ALIGN);
    let mut pinned = b.alloc_pinned(n).unwrap();
    assert!(pinned.is_page_locked());
    assert!(pinned.iter().all(|&x| x == 0), "allocated zeroed");
    assert_eq!(crate::CudaBackend::pinned_host_bytes(), before + block);
    assert_eq!(b.memory().pinned_host, block, "the device's tracker counts the block");
    let expected = table(n, 9);
    pinned.copy_from_slice(&expected);
    let d = b.upload_pinned(&mut pinned).unwrap();
    // Writing waits for the queued copy: the device keeps the old contents.
    pinned.fill(7);
    let mut back = b.alloc_pinned(n).unwrap();
    b.download_pinned(&d, &mut back).unwrap();
    assert!(back[..] == expected[..], "pinned round trip");
    // Length and ownership checks.
    let mut short = b.alloc_pinned(n - 1).unwrap();
    assert!(matches!(b.download_pinned(&d, &mut short), Err(Error::LengthMismatch { .. })));
    let other = device_or_skip("pinned_buffers_round_trip_pool_and_refuse_absurd_sizes").unwrap();
    assert!(matches!(other.download_pinned(&d, &mut back), Err(Error::InvalidArgument(_))));
    drop((pinned, back, short));
    // Dropped buffers stay page-locked in the pool, and the next allocation that fits reuses one,
    // zeroed again.
    assert_eq!(b.host_pool_bytes(), 3 * block);
    let held = crate::CudaBackend::pinned_host_bytes();
    let again = b.alloc_pinned(n - 100).unwrap();
    assert!(again.iter().all(|&x| x == 0), "a reused block is zeroed");
    assert_eq!(crate::CudaBackend::pinned_host_bytes(), held, "a pooled block was reused");
    assert_eq!(b.host_pool_bytes(), 2 * block);
    drop(again);
    // A request the pooled blocks do not fit frees them first.
    let big = b.alloc_pinned(3 * n).unwrap();
    assert_eq!(b.host_pool_bytes(), 0);
    assert_eq!(crate::CudaBackend::pinned_host_bytes(), before + (3 * n * 8).next_multiple_of(BLOCK_ALIGN));
    drop(big);
    b.trim_host_pool().unwrap();
    assert_eq!(crate::CudaBackend::pinned_host_bytes(), before);
    assert_eq!(b.memory().pinned_host, 0);
    // Sizes no host can lock: typed errors, nothing held afterwards.
    for len in [usize::MAX / 4, 1 << 42] {
        match b.alloc_pinned(len) {
            Err(e) => assert!(e.is_out_of_memory() || matches!(e, Error::SizeOverflow { .. }), "{len} elements: {e}"),
            Ok(_) => panic!("{len} elements were page-locked"),
        }
        assert!(matches!(b.alloc_host(len), Err(Error::HostOutOfMemory { .. } | Error::SizeOverflow { .. })));
        assert_eq!(crate::CudaBackend::pinned_host_bytes(), before, "{len} elements");
    }
    let empty = b.alloc_pinned(0).unwrap();
    assert!(empty.is_empty());
}

/// [`crate::CudaOptions::kernel_cache`] decides where a device's kernels are stored: a backend
/// opened with a directory writes the image of the one kernel file it launched there (and gives
/// correct bytes); `with_options` keeps that setting and refuses another; a backend opened with
/// the cache off writes nothing there.
#[test]
fn the_kernel_cache_setting_belongs_to_the_device() {
    use backend_api::{Backend as _, MatrixShape};

    use crate::{CudaBackend, CudaOptions, KernelCacheSetting};

    let Some(probe) = device_or_skip("the_kernel_cache_setting_belongs_to_the_device") else { return };
    drop(probe);
    let dir = std::env::temp_dir().join(format!("stark-kc-device-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let entries = || std::fs::read_dir(&dir).map_or(0, |d| d.filter_map(|e| e.ok()).count());
    let shape = MatrixShape::new(64, 48).unwrap();
    let src = table(shape.len(), 11);
    let transposed = |b: &CudaBackend| {
        let s = b.upload(&src).unwrap();
        let mut d = b.alloc(shape.len()).unwrap();
        b.transpose_out_of_place(&s, &mut d, shape).unwrap();
        let out = b.download_vec(&d).unwrap();
        for r in 0..shape.rows() {
            for c in 0..shape.cols() {
                assert_eq!(out[c * shape.rows() + r], src[r * shape.cols() + c], "({r}, {c})");
            }
        }
    };

    let options = CudaOptions { kernel_cache: KernelCacheSetting::Dir(dir.clone()), ..CudaOptions::default() };
    let b = CudaBackend::open(0, options.clone()).unwrap();
    assert_eq!(b.kernel_cache_dir(), Some(dir.as_path()));
    transposed(&b);
    assert_eq!(entries(), 1, "one image (transpose.cu) stored in {}", dir.display());
    // Another kernel configuration on the same device keeps the cache; another cache is refused.
    let other = b.with_options(CudaOptions { ntt_lazy: false, ..options.clone() }).unwrap();
    assert_eq!(other.kernel_cache_dir(), Some(dir.as_path()));
    match b.with_options(CudaOptions { kernel_cache: KernelCacheSetting::Off, ..options.clone() }) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("kernel cache"), "{m}"),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    drop((b, other));

    let off = CudaBackend::open(0, CudaOptions { kernel_cache: KernelCacheSetting::Off, ..options }).unwrap();
    assert_eq!(off.kernel_cache_dir(), None);
    std::fs::remove_dir_all(&dir).unwrap();
    transposed(&off);
    assert!(!dir.exists(), "a backend with the cache off created {}", dir.display());
}

/// The naive coset LDE, u128 % p throughout and roots taken from the generator 7 here: each
/// column interpolated in O(n^2) (`c_k = 1/n * sum_j t_j w_n^-jk`), then evaluated at
/// `s * w_N^i` by Horner in O(n N).
fn naive_lde(trace: &[u64], n: usize, m: usize, blowup: usize, shift: u64) -> Vec<u64> {
    const PR: u128 = backend_api::field::P as u128;
    let mulr = |a: u64, b: u64| ((a as u128 % PR) * (b as u128 % PR) % PR) as u64;
    let powr = |mut b: u64, mut e: u128| {
        let mut acc = 1;
        while e > 0 {
            if e & 1 == 1 {
                acc = mulr(acc, b);
            }
            b = mulr(b, b);
            e >>= 1;
        }
        acc
    };
    let big_n = n * blowup;
    let w_n = powr(7, (PR - 1) / n as u128);
    let w_big = powr(7, (PR - 1) / big_n as u128);
    let w_n_inv = powr(w_n, PR - 2);
    let n_inv = powr(n as u64, PR - 2);
    let mut out = vec![0u64; big_n * m];
    for c in 0..m {
        let coeffs: Vec<u64> = (0..n)
            .map(|k| {
                let step = powr(w_n_inv, k as u128);
                let (mut acc, mut x) = (0u128, 1u64);
                for j in 0..n {
                    acc = (acc + mulr(trace[j * m + c], x) as u128) % PR;
                    x = mulr(x, step);
                }
                mulr(acc as u64, n_inv)
            })
            .collect();
        let mut point = (shift as u128 % PR) as u64;
        for i in 0..big_n {
            let mut acc = 0u64;
            for &ck in coeffs.iter().rev() {
                acc = ((mulr(acc, point) as u128 + ck as u128) % PR) as u64;
            }
            out[i * m + c] = acc;
            point = mulr(point, w_big);
        }
    }
    out
}

/// The in-place LDE (inverse NTT in the buffer's first rows, its last pass in ranges of tiles
/// from the top down, the forward NTT), `coset_lde` from a trace buffer (its first inverse pass
/// reads the trace) and `coset_lde_owned` (the inverse in the trace's buffer) against the naive
/// reference, in every NTT configuration (1, 2, 4 and the
/// most stages per pass, so shared-memory, mixed and all-register splits; every kernel variant;
/// lazy and canonical reduction; the power-of-two and the lean passes), on edge shapes: n = 1,
/// n < B, n = B, B = 1, m = 1, odd m, a last inverse pass of one tile and of many (n = 2^12: tiles
/// with lo != 0 in both directions; n = 2^13: passes of 7 and 6 stages), and a non-canonical
/// shift. The trace holds non-canonical values, rows [n, N) of the in-place buffer hold garbage,
/// the bytes must equal the reference's, and the trace buffer must come back unchanged. Needs a
/// GPU.
#[test]
fn in_place_lde_matches_the_naive_reference_in_every_configuration() {
    use backend_api::{Backend, LdeParams, MatrixShape};
    let Some(backend) = device_or_skip("in_place_lde_matches_the_naive_reference_in_every_configuration") else {
        return;
    };
    let p = backend_api::field::P;
    // (log n, m, log B, shift)
    let shapes = [
        (0, 1, 0, 7),
        (0, 3, 3, 7),
        (1, 2, 3, 7 + p),
        (2, 5, 2, 7),
        (3, 1, 3, 3),
        (4, 4, 1, 7),
        (5, 3, 3, 7),
        (6, 1, 1, 7 + p),
        (7, 4, 2, 7),
        (9, 9, 1, 7),
        (10, 2, 0, 5),
        (11, 2, 1, 7),
        (12, 3, 1, 7 + p),
        (13, 2, 1, 7),
    ];
    for (i, &(log_n, m, log_b, shift)) in shapes.iter().enumerate() {
        let (n, blowup) = (1usize << log_n, 1usize << log_b);
        let trace = table(n * m, 11 + i as u64);
        let garbage = table((n * blowup - n) * m, 101 + i as u64);
        let params = LdeParams::new(MatrixShape::new(n, m).unwrap(), blowup, shift).unwrap();
        let want = naive_lde(&trace, n, m, blowup, shift);
        for options in backend.options().ntt_variants() {
            let what = format!("n {n}, m {m}, B {blowup}, shift {shift}, {options:?}");
            let b = backend.with_options(options).unwrap();
            let mut buf = b.alloc(n * blowup * m).unwrap();
            b.write(&mut buf, 0, &trace).unwrap();
            b.write(&mut buf, n * m, &garbage).unwrap();
            b.coset_lde_in_place(&mut buf, &params).unwrap_or_else(|e| panic!("{what}: {e}"));
            let got = b.download_vec(&buf).unwrap();
            assert_same_words(&what, &got, &want, m);
            let kept = b.upload(&trace).unwrap();
            let lde = b.coset_lde(&kept, &params).unwrap_or_else(|e| panic!("{what}, from a trace buffer: {e}"));
            assert_same_words(&format!("{what}, from a trace buffer"), &b.download_vec(&lde).unwrap(), &want, m);
            assert_eq!(b.download_vec(&kept).unwrap(), trace, "{what}: the trace buffer changed");
            let lde = b.coset_lde_owned(kept, &params).unwrap_or_else(|e| panic!("{what}, owned trace: {e}"));
            assert_same_words(&format!("{what}, owned trace"), &b.download_vec(&lde).unwrap(), &want, m);
        }
    }
    assert_eq!(backend.memory().live, 0, "the LDEs left device memory allocated");
}

/// The device keeps the last LDE's tables under (log2 n, log2 B, shift), uncounted as live: an LDE
/// of another shift must not reuse them (both results against the naive reference), the same
/// shape and shift reuses the kept allocation, and `trim_pool` frees it. Needs a GPU.
#[test]
fn lde_tables_are_kept_per_shape_and_shift() {
    use backend_api::{Backend, LdeParams, MatrixShape};
    let Some(b) = device_or_skip("lde_tables_are_kept_per_shape_and_shift") else { return };
    let kept = |b: &crate::CudaBackend| b.device.lde_tables.lock().unwrap().as_ref().map(|t| (t.key, t.ptr));
    let (n, m, blowup) = (1usize << 11, 3, 2);
    let trace = table(n * m, 41);
    let trace_buf = b.upload(&trace).unwrap();
    let mut first = None;
    for (round, shift) in [7u64, 5, 5, 7].into_iter().enumerate() {
        let params = LdeParams::new(MatrixShape::new(n, m).unwrap(), blowup, shift).unwrap();
        let lde = b.coset_lde(&trace_buf, &params).unwrap();
        let what = format!("round {round}, shift {shift}");
        assert_same_words(&what, &b.download_vec(&lde).unwrap(), &naive_lde(&trace, n, m, blowup, shift), m);
        let (key, ptr) = kept(&b).unwrap_or_else(|| panic!("{what}: no tables kept"));
        assert_eq!(key, (11, 1, shift), "{what}");
        if round == 2 {
            assert_eq!(Some(ptr), first, "{what}: the kept tables were not reused");
        }
        first = Some(ptr);
    }
    drop(trace_buf);
    assert_eq!(b.memory().live, 0, "the kept tables are counted as live");
    b.trim_pool().unwrap();
    assert!(kept(&b).is_none(), "trim_pool left the tables kept");
}

/// The naive reference itself, on values known in closed form: with B = 1 and s = 1 it returns
/// the canonicalised trace; a 2-row column `(a, b)` is the line `(a + b)/2 + (a - b)/2 * x`, so at
/// `s * w_N^i` (`w_4 = 2^48`, a 4th root of unity since 2^96 = -1 mod p) it takes
/// `(a + b)/2 + (a - b)/2 * s * 2^(48 i)`.
#[test]
fn naive_reference_reproduces_known_values() {
    use backend_api::field::{P, add, canonical, inverse, mul, pow, sub};
    let trace = table(8 * 3, 5);
    assert_eq!(naive_lde(&trace, 8, 3, 1, 1), trace.iter().map(|&x| canonical(x)).collect::<Vec<_>>());
    let (a, b, s) = (P + 5, u64::MAX, 7);
    let got = naive_lde(&[a, b], 2, 1, 2, s);
    let half = inverse(2);
    let (c0, c1) = (mul(add(canonical(a), canonical(b)), half), mul(sub(canonical(a), canonical(b)), half));
    for (i, &g) in got.iter().enumerate() {
        let x = mul(s, pow(1 << 48, i as u64));
        assert_eq!(g, add(c0, mul(c1, x)), "row {i}");
    }
}

/// `prepare_memory` leaves no buffer behind (the tracker saw nothing), grows the pool by at
/// least the bytes asked for (its reserved high-water mark since the last reset), and refuses a
/// size no device has with a typed out-of-memory error, after which it still works.
#[test]
fn prepare_memory_grows_the_pool_and_refuses_absurd_sizes() {
    use backend_api::Backend as _;

    let Some(b) = device_or_skip("prepare_memory_grows_the_pool_and_refuses_absurd_sizes") else { return };
    b.prepare_memory(0).unwrap();
    b.prepare_memory(64 << 20).unwrap();
    let c = b.tracker().counters();
    assert_eq!((c.live, c.peak, c.allocations), (0, 0, 0), "prepare_memory is not a tracked allocation");
    let high = b.pool_reserved_high().unwrap();
    assert!(high >= 64 << 20, "the pool holds {high} B after preparing 64 MiB");
    match b.prepare_memory(1 << 50) {
        Err(e) => assert!(e.is_out_of_memory(), "1 PiB: {e}"),
        Ok(()) => panic!("1 PiB of device memory was allocated"),
    }
    b.prepare_memory(1 << 20).unwrap();
    assert_eq!(b.tracker().counters().live, 0);
}

/// Transfers whose host side lies in page-locked memory are direct copies, from any sub-slice:
/// upload, write at an offset and download at an offset keep every byte, the staging ring is never
/// made, and a host buffer written right after an upload returns does not change the device copy.
#[test]
fn transfers_from_page_locked_slices_are_direct() {
    use backend_api::{Backend, DeviceBuffer as _};
    let _count = PINNED_COUNT.lock().unwrap_or_else(|p| p.into_inner());
    let Some(b) = device_or_skip("transfers_from_page_locked_slices_are_direct") else { return };
    let n = (5 << 20) + 3;
    let expected = table(n, 11);
    let mut host = b.alloc_host(n).unwrap();
    assert!(backend_api::HostBuffer::is_page_locked(&host));
    host.copy_from_slice(&expected);
    let d = b.upload(&host).unwrap();
    host.iter_mut().for_each(|x| *x = !*x);
    let mut back = b.alloc_host(n).unwrap();
    b.download(&d, 0, &mut back).unwrap();
    assert!(back[..] == expected[..], "upload from a page-locked buffer");
    // A sub-slice at an odd offset, written into the middle of a larger buffer.
    let mut big = b.alloc(n + 1000).unwrap();
    b.write(&mut big, 17, &host[5..n - 9]).unwrap();
    let mut out = b.alloc_host(n - 14).unwrap();
    b.download(&big, 17, &mut out).unwrap();
    assert!(out[..] == host[5..n - 9], "write and download at offsets");
    // Downloads into part of a page-locked buffer leave the rest alone.
    let mut part = b.alloc_host(n).unwrap();
    b.download(&d, 100, &mut part[1..n - 99]).unwrap();
    assert_eq!(part[0], 0);
    assert!(part[1..n - 99] == expected[100..], "download into a sub-slice");
    assert_eq!(big.len(), n + 1000);
    assert!(!b.device.staging.is_made(), "a page-locked transfer made the staging ring");
}

/// `queue_download` lands in a page-locked block of the device's pool: the bytes are right, the
/// block returns to the pool when the result is dropped and the next download reuses it, so a
/// warm loop page-locks nothing new.
#[test]
fn queued_downloads_reuse_pooled_page_locked_blocks() {
    use backend_api::{Backend, PendingDownload as _};
    let _count = PINNED_COUNT.lock().unwrap_or_else(|p| p.into_inner());
    let Some(b) = device_or_skip("queued_downloads_reuse_pooled_page_locked_blocks") else { return };
    let n = (7 << 20) + 1;
    let expected = table(n, 13);
    let d = b.upload(&expected).unwrap();
    let first = b.queue_download(&d).unwrap().wait().unwrap();
    assert!(first.is_page_locked());
    assert!(first[..] == expected[..]);
    drop(first);
    let held = crate::CudaBackend::pinned_host_bytes();
    for round in 0..3 {
        let got = b.queue_download(&d).unwrap().wait().unwrap();
        assert!(got[..] == expected[..], "round {round}");
        assert_eq!(crate::CudaBackend::pinned_host_bytes(), held, "round {round} page-locked new memory");
    }
    drop(b);
}

/// A page-locking refused by the driver (injected at [`FaultSite::PinnedHostAlloc`]) is a typed
/// error for `alloc_pinned`, a pageable fallback for `alloc_host` and `queue_download` (with the
/// same bytes), and leaves no page-locked or device memory behind.
#[test]
fn a_refused_page_lock_is_an_error_or_a_pageable_fallback_and_leaks_nothing() {
    use backend_api::{Backend, FaultSite, PendingDownload as _};
    let _count = PINNED_COUNT.lock().unwrap_or_else(|p| p.into_inner());
    let Some(b) = device_or_skip("a_refused_page_lock_is_an_error_or_a_pageable_fallback_and_leaks_nothing") else {
        return;
    };
    let before = crate::CudaBackend::pinned_host_bytes();
    let n = (2 << 20) + 7;
    b.tracker().fail_site(FaultSite::PinnedHostAlloc);
    let err = b.alloc_pinned(n).expect_err("the injected refusal must surface");
    assert!(matches!(err, Error::HostOutOfMemory { .. }), "{err}");
    assert_eq!(crate::CudaBackend::pinned_host_bytes(), before);
    b.tracker().fail_site(FaultSite::PinnedHostAlloc);
    let mut host = b.alloc_host(n).expect("a pageable fallback");
    assert!(!host.is_page_locked());
    let expected = table(n, 17);
    host.copy_from_slice(&expected);
    let d = b.upload(&host).unwrap();
    assert!(b.download_vec(&d).unwrap() == expected);
    b.tracker().fail_site(FaultSite::PinnedHostAlloc);
    let got = b.queue_download(&d).unwrap().wait().unwrap();
    assert!(!got.is_page_locked());
    assert!(got[..] == expected[..], "pageable fallback download");
    drop((host, got, d));
    b.synchronize().unwrap();
    assert_eq!(b.memory().live, 0, "device memory leaked");
    b.trim_host_pool().unwrap();
    // The staging ring stays (made by the pageable transfers); nothing else is page-locked.
    assert_eq!(crate::CudaBackend::pinned_host_bytes(), before + b.memory().pinned_host);
    assert_eq!(b.host_pool_bytes(), 0);
}

/// [`backend_api::Backend::coset_lde_from_host`] from page-locked memory with 1, 2, 3, 4 and 7
/// column groups (the overlap forced on every size: `upload_overlap_min_bytes` 0) against the
/// naive reference: n = 1, B = 1, fewer than 8 columns (one tile: the default route), column
/// counts that are not multiples of 8 (a narrow last group), more groups than tiles, two register
/// passes per direction (n = 2^11), values >= p and a non-canonical shift. The buffer is
/// pre-filled with garbage over all its rows, and the host trace is overwritten as soon as the
/// call returns (the copies must be done by then). Needs a GPU.
#[test]
fn lde_from_host_matches_the_naive_reference_for_every_group_count() {
    use crate::CudaOptions;
    use backend_api::{Backend, LdeParams, MatrixShape};
    let _count = PINNED_COUNT.lock().unwrap_or_else(|p| p.into_inner());
    let Some(backend) = device_or_skip("lde_from_host_matches_the_naive_reference_for_every_group_count") else {
        return;
    };
    let p = backend_api::field::P;
    // (log n, m, log B, shift)
    let shapes =
        [(0, 17, 1, 7), (1, 9, 3, 7 + p), (3, 24, 2, 7), (5, 16, 0, 7), (6, 7, 1, 7), (7, 33, 2, 3), (11, 9, 1, 7)];
    let baseline = backend.memory().live;
    for (i, &(log_n, m, log_b, shift)) in shapes.iter().enumerate() {
        let (n, blowup) = (1usize << log_n, 1usize << log_b);
        let trace = table(n * m, 211 + i as u64);
        let params = LdeParams::new(MatrixShape::new(n, m).unwrap(), blowup, shift).unwrap();
        let want = naive_lde(&trace, n, m, blowup, shift);
        let mut host = backend.alloc_host(n * m).unwrap();
        for groups in [1, 2, 3, 4, 7] {
            let options = CudaOptions { upload_groups: groups, upload_overlap_min_bytes: 0, ..backend.options() };
            let what = format!("n {n}, m {m}, B {blowup}, shift {shift}, {groups} groups");
            let b = backend.with_options(options).unwrap();
            host.copy_from_slice(&trace);
            let mut buf = b.upload(&table(n * blowup * m, 307 + groups as u64)).unwrap();
            b.coset_lde_from_host(&mut buf, &host, &params).unwrap_or_else(|e| panic!("{what}: {e}"));
            host.iter_mut().for_each(|x| *x = !*x);
            let got = b.download_vec(&buf).unwrap();
            assert_same_words(&what, &got, &want, m);
        }
    }
    assert_eq!(backend.memory().live, baseline, "the LDEs left device memory allocated");
}

/// A grouped upload failing after its first copy is queued ([`backend_api::FaultSite::HostUploadQueued`])
/// returns its error only once neither stream has work left (no copy still reads the caller's
/// host trace: a 64 MiB group takes over a millisecond on the bus), frees its tables, and the
/// same call then succeeds with the bytes of the default route (`write`, then
/// `coset_lde_in_place`, whose bytes the test above and the conformance suite check against the
/// naive reference). The site is reached only on the grouped path, so the error also shows that
/// a page-locked trace takes it. Needs a GPU.
#[test]
fn a_failed_grouped_upload_waits_for_its_copies() {
    use crate::CudaOptions;
    use backend_api::{Backend, FaultSite, LdeParams, MatrixShape};
    let _count = PINNED_COUNT.lock().unwrap_or_else(|p| p.into_inner());
    let Some(backend) = device_or_skip("a_failed_grouped_upload_waits_for_its_copies") else { return };
    let b = backend.with_options(CudaOptions { upload_groups: 4, ..backend.options() }).unwrap();
    let (n, m) = (1usize << 20, 32);
    let params = LdeParams::new(MatrixShape::new(n, m).unwrap(), 2, 7).unwrap();
    let mut host = b.alloc_host(n * m).unwrap();
    host.copy_from_slice(&table(n * m, 5));
    let baseline = b.memory().live;
    {
        let mut buf = b.alloc(2 * n * m).unwrap();
        b.tracker().fail_site(FaultSite::HostUploadQueued);
        let err = b.coset_lde_from_host(&mut buf, &host, &params).expect_err("the injected fault must surface");
        assert!(err.to_string().contains("cuMemcpy2DAsync"), "{err}");
        // SAFETY: the backend's live streams, with its context current.
        let (copies_idle, compute_idle) = unsafe {
            (driver::stream_query(b.device.copy_stream()).unwrap(), driver::stream_query(b.device.stream()).unwrap())
        };
        assert!(copies_idle, "coset_lde_from_host returned its error while a copy could still read the host trace");
        assert!(compute_idle, "coset_lde_from_host returned its error with work still queued");
        assert_eq!(b.memory().live, baseline + 2 * n * m * 8, "the tables of the failed call are still allocated");
        b.coset_lde_from_host(&mut buf, &host, &params).unwrap();
        let grouped = b.download_vec(&buf).unwrap();
        let mut plain = b.alloc(2 * n * m).unwrap();
        b.write(&mut plain, 0, &host).unwrap();
        b.coset_lde_in_place(&mut plain, &params).unwrap();
        assert!(grouped == b.download_vec(&plain).unwrap(), "the grouped LDE differs from the default route's");
    }
    b.synchronize().unwrap();
    assert_eq!(b.memory().live, baseline, "device memory leaked");
}
