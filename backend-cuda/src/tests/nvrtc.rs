//! Tests that need no GPU: NVRTC compiles every kernel file (skipped visibly without NVRTC), the
//! cache key, the compile error's log, and the driver layer's typed errors.

use backend_api::{Error, HashKind, LeafLayout};
use cudarc::driver::sys::CUresult;

use super::nvrtc_or_skip;
use crate::driver;
use crate::lde;
use crate::module::{self, Source};

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

/// The device tests' field self-test kernel (not a kernel file of the shaders crate) compiles too,
/// so that the device test fails on the device only for the arithmetic.
#[test]
fn the_field_self_test_kernel_compiles() {
    if !nvrtc_or_skip("the_field_self_test_kernel_compiles") {
        return;
    }
    let (ptx, _) = module::compile(Source::FieldSelfTest, "compute_90").unwrap_or_else(|e| panic!("{e}"));
    assert!(String::from_utf8_lossy(&ptx).contains(".entry gl_selftest("), "no gl_selftest kernel");
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
    // Every kernel the host code names for every hash, layout and leaf length.
    let mut leaf_kernels: Vec<&str> = Vec::new();
    for hash in HashKind::ALL {
        for layout in LeafLayout::ALL.into_iter().filter(|&l| hash.supports(l)) {
            for leaf_bytes in [8, 64 << 10] {
                leaf_kernels.push(crate::hash::kernel_name(hash, layout, leaf_bytes));
            }
        }
        leaf_kernels.extend(crate::hash::block_pass_kernel(hash).map(|(kernel, _)| kernel));
    }
    let mut merkle_kernels = vec!["merkle_pad"];
    for hash in HashKind::ALL {
        let (level, top) = crate::merkle::level_kernels(hash);
        merkle_kernels.extend([level, top]);
    }
    // One quotient kernel per degree and points per thread.
    let quotient_kernels: Vec<&str> = (1..=backend_api::MAX_EXTENSION_DEGREE)
        .flat_map(|d| [crate::quotient::kernel_name(d, 1), crate::quotient::kernel_name(d, 4)])
        .collect();
    let names: &[(Source, &[&str])] = &[
        (
            Source::Transpose,
            &["transpose_tile", "transpose_tile_strided", "transpose_fused_runs_v1", "transpose_fused_runs_v2"],
        ),
        (Source::Copy, &["copy_gather", "bit_reversed_rows"]),
        (Source::Hash, &leaf_kernels),
        (Source::Merkle, &merkle_kernels),
        (
            Source::Lde,
            &[
                lde::pass_kernel(false, false),
                lde::pass_kernel(true, false),
                lde::pass_kernel(false, true),
                lde::pass_kernel(true, true),
            ],
        ),
        (Source::Open, &["row_dot_products", "column_dot_partial", "column_dot_finish", "fri_fold", "reduce_openings"]),
        (Source::Quotient, &quotient_kernels),
    ];
    for (source, kernels) in names {
        let (ptx, _) = module::compile(*source, "compute_90").unwrap();
        let text = String::from_utf8_lossy(&ptx);
        for k in *kernels {
            assert!(text.contains(&format!(".entry {k}(")), "{}: no kernel {k}", source.file().0);
        }
    }
    // Each degree and points per thread has its own quotient kernel, and quotient.cu no other.
    let distinct: std::collections::BTreeSet<&str> = quotient_kernels.iter().copied().collect();
    assert_eq!(distinct.len(), 2 * backend_api::MAX_EXTENSION_DEGREE, "two pairs share a quotient kernel");
    let (ptx, _) = module::compile(Source::Quotient, "compute_90").unwrap();
    let entries = String::from_utf8_lossy(&ptx).lines().filter(|l| l.contains(".entry ")).count();
    assert_eq!(entries, distinct.len(), "quotient.cu defines a kernel the host does not launch");
    // lde.cu holds only the kernels the LDE launches.
    let (ptx, _) = module::compile(Source::Lde, "compute_90").unwrap();
    let entries = String::from_utf8_lossy(&ptx).lines().filter(|l| l.contains(".entry ")).count();
    assert_eq!(entries, 4, "lde.cu defines a kernel the LDE does not launch");
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

/// The cache key changes with everything that changes the image, and with nothing else: the
/// driver takes no part in producing an image, so it is not in the key.
#[test]
fn cache_keys_cover_unit_target_and_versions() {
    use module::{Unit, cache_key};
    let lde = Unit::of(Source::Lde, "ntt_dif_pass");
    let base = cache_key(lde, "sm_90", (13, 0));
    assert_eq!(base, cache_key(lde, "sm_90", (13, 0)));
    for (what, other) in [
        ("kernel", cache_key(Unit::of(Source::Lde, "ntt_dit_pass"), "sm_90", (13, 0))),
        ("file", cache_key(Unit::of(Source::Merkle, "merkle_pad"), "sm_90", (13, 0))),
        ("architecture", cache_key(lde, "sm_100", (13, 0))),
        ("PTX target", cache_key(lde, "compute_90", (13, 0))),
        ("NVRTC minor version", cache_key(lde, "sm_90", (13, 1))),
        ("NVRTC major version", cache_key(lde, "sm_90", (12, 0))),
    ] {
        assert_ne!(base, other, "the key ignores the {what}");
    }
    // An independent composition of the key: BLAKE3 over length-prefixed parts.
    let mut h = blake3::Hasher::new();
    let (name, text) = Source::Lde.file();
    let options = "--gpu-architecture=sm_90\n-std=c++17\n-DNVRTC_BUILD=1\n-DKERNEL_SELECT=1\n-DWANT_ntt_dif_pass=1";
    let mut parts: Vec<&[u8]> =
        vec![b"stark-commit kernel cache v2", name.as_bytes(), text.as_bytes(), options.as_bytes(), b"nvrtc 13.0"];
    for (h_name, h_text) in shaders::cuda::HEADERS {
        parts.extend([h_name.as_bytes(), h_text.as_bytes()]);
    }
    for p in parts {
        h.update(&(p.len() as u64).to_le_bytes());
        h.update(p);
    }
    assert_eq!(base, crate::kernel_cache::CacheKey::from_digest(h.finalize().to_hex().to_string()));
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
    let other = driver::error_from("cuMemcpy2DAsync", CUresult::CUDA_ERROR_INVALID_VALUE);
    match other {
        Error::Device { op, source, .. } => {
            assert_eq!(op, "cuMemcpy2DAsync");
            // The driver's code is kept as the source, not flattened into a string.
            let code = source.downcast_ref::<cudarc::driver::DriverError>().expect("a driver error as the source");
            assert_eq!(code.0, CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        e => panic!("expected Device, got {e}"),
    }
    assert!(driver::check("x", CUresult::CUDA_SUCCESS).is_ok());
}
