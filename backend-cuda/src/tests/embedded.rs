//! The embedded kernel images (`build.rs`, `crate::embedded`) and the preparation of the kernel
//! cache for a named architecture: no GPU needed. With the `embedded-kernels` feature and NVRTC at
//! build time, every unit has an image for one architecture per major version from `sm_80` up
//! that NVRTC knows,
//! each a CUBIN for its own architecture, equal byte for byte to what NVRTC compiles at run time;
//! lookups refuse other architectures and other sources. Without the feature (the fallback
//! build), nothing is embedded and kernels come from NVRTC and the cache.

use backend_api::{HashKind, LeafLayout};

use super::nvrtc_or_skip;
use crate::embedded::{self, Image, Status};
use crate::kernel_cache::{ImageOrigin, KernelCache};
use crate::module::{self, Source, Unit};
use crate::{driver, hash, kernel_units, lde};

/// The units the host code launches, named by the host code's own functions (not by the guards
/// the unit list is read from): every LDE pass, every leaf kernel of every hash and layout, the
/// fused block-pass leaves, the light files whole.
fn launched_units() -> Vec<Unit> {
    let mut units = vec![];
    for (dit, reg) in [(false, false), (true, false), (false, true), (true, true)] {
        units.push(Unit::of(Source::Lde, lde::pass_kernel(dit, reg)));
    }
    for h in HashKind::ALL {
        for layout in [LeafLayout::Rows, LeafLayout::LambdaVmPairs] {
            for leaf_bytes in [0, 1 << 30] {
                units.push(Unit::of(Source::Hash, hash::kernel_name(h, layout, leaf_bytes)));
            }
        }
        units.extend(hash::block_pass_kernel(h).map(|(kernel, _)| Unit::of(Source::Hash, kernel)));
    }
    units.extend([Source::Transpose, Source::Copy, Source::Merkle].map(|s| Unit { source: s, kernel: None }));
    units
}

/// The architecture a CUBIN is for, from its ELF header: `EM_CUDA` (190), and the `sm_XX` number
/// in bits 8..16 of `e_flags` (ELF64: offset 0x30).
fn cubin_arch(image: &[u8]) -> i32 {
    assert!(image.len() > 0x40 && image.starts_with(b"\x7fELF"), "not an ELF image");
    assert_eq!(image[4], 2, "not ELF64");
    assert_eq!(u16::from_le_bytes([image[0x12], image[0x13]]), 190, "not EM_CUDA");
    ((u32::from_le_bytes(image[0x30..0x34].try_into().unwrap()) >> 8) & 0xff) as i32
}

/// The file decides whether it is compiled one kernel per program, and `Unit::all` lists exactly
/// the launched units plus the guarded kernels no host code names yet.
#[test]
fn the_unit_list_is_read_from_the_files() {
    for source in Source::ALL {
        let (file, text) = source.file();
        assert_eq!(
            source.per_kernel(),
            !kernel_units::guarded_kernels(text).is_empty(),
            "{file}: Source::per_kernel disagrees with the file's guards"
        );
    }
    let all = Unit::all();
    for u in launched_units() {
        assert!(all.contains(&u), "{}: launched but not in the unit list", u.label());
    }
    let mut seen = std::collections::HashSet::new();
    assert!(all.iter().all(|u| seen.insert(*u)), "a unit is listed twice");
    // The scanner reads guards as the files write them, and nothing else.
    let text = "#if ALL_KERNELS || WANT_a\n  #if ALL_KERNELS || WANT_b \n#if WANT_c\n// #if ALL_KERNELS || WANT_d\n";
    assert_eq!(kernel_units::guarded_kernels(text), ["a", "b"]);
    assert_eq!(kernel_units::file_units("extern \"C\" __global__ void k() {}"), [None]);
}

/// A build with the feature and NVRTC embeds every launched unit for one architecture per major
/// version from `sm_80` up that its NVRTC supports, each a CUBIN for that architecture.
#[test]
fn every_launched_unit_is_embedded_for_every_architecture() {
    let Status::Built { nvrtc } = embedded::STATUS else {
        if cfg!(feature = "embedded-kernels") && std::env::var("REQUIRE_NVRTC").is_ok_and(|v| v == "1") {
            panic!("REQUIRE_NVRTC=1 but this build embeds no kernel images: {:?}", embedded::STATUS);
        }
        println!("SKIPPED every_launched_unit_is_embedded_for_every_architecture: {:?}", embedded::STATUS);
        return;
    };
    assert!(!embedded::ARCHS.is_empty() && embedded::ARCHS.iter().all(|&a| a >= 80), "{:?}", embedded::ARCHS);
    assert!(embedded::ARCHS.windows(2).all(|w| w[0] < w[1]), "{:?}", embedded::ARCHS);
    assert!(embedded::ARCHS.contains(&90), "no image for the H100/H200's sm_90: {:?}", embedded::ARCHS);
    assert_eq!(embedded::IMAGES.len(), Unit::all().len() * embedded::ARCHS.len());
    assert!(embedded::IMAGES.windows(2).all(|w| w[0].key < w[1].key), "the table is not sorted by key");
    for &arch in embedded::ARCHS {
        assert!(embedded::covers(arch));
        for u in launched_units() {
            let image = u.embedded(arch).unwrap_or_else(|| panic!("{} has no image for sm_{arch}", u.label()));
            assert_eq!(cubin_arch(image), arch, "{}: the image for sm_{arch} is for another architecture", u.label());
            // The entry is the one the cache would key for this unit, target and NVRTC version.
            let (file, text) = u.source.file();
            let entry = embedded::find(file, text, u.kernel, arch).unwrap();
            assert_eq!((entry.file, entry.kernel, entry.arch), (file, u.kernel, arch));
            assert_eq!(entry.key, module::cache_key(u, &format!("sm_{arch}"), nvrtc).as_str());
        }
    }
    // This NVRTC's architectures from sm_80 up, when it is the one that built the images.
    if driver::nvrtc_present() && driver::nvrtc_version().unwrap() == nvrtc {
        // One per major version, its lowest minor (written out, not through `embed_archs`).
        let supported: Vec<i32> = driver::nvrtc_supported_archs().unwrap();
        let mut majors: Vec<i32> = supported.iter().filter(|&&a| a >= 80).map(|a| a / 10).collect();
        majors.dedup();
        let lowest: Vec<i32> =
            majors.iter().map(|&m| *supported.iter().filter(|&&a| a / 10 == m).min().unwrap()).collect();
        assert_eq!(embedded::ARCHS, lowest.as_slice());
    }
    let summary = crate::embedded_kernels();
    assert_eq!((summary.nvrtc_version, summary.images, summary.not_built), (Some(nvrtc), embedded::IMAGES.len(), None));
    assert!(summary.bytes > embedded::IMAGES.len() * 1000, "{} B", summary.bytes);
}

/// The embedded images are what NVRTC compiles at run time, byte for byte (NVRTC's output is
/// deterministic for the same source, options and version): for sm_90, every kernel file's whole
/// unit and, of a file compiled per kernel, its first and last units (the options differ only by
/// the kernel's name); each other architecture once, the units taken in turn. A build script
/// whose options, sources or keys drift from the run time's differs on all of them; compiling
/// every unit again would only repeat the build's work (minutes on two cores).
#[test]
fn embedded_images_equal_runtime_nvrtc_output() {
    let Status::Built { nvrtc } = embedded::STATUS else {
        println!("SKIPPED embedded_images_equal_runtime_nvrtc_output: {:?}", embedded::STATUS);
        return;
    };
    if !nvrtc_or_skip("embedded_images_equal_runtime_nvrtc_output") {
        return;
    }
    let here = driver::nvrtc_version().unwrap();
    if here != nvrtc {
        println!("SKIPPED embedded_images_equal_runtime_nvrtc_output: built by NVRTC {nvrtc:?}, this one is {here:?}");
        return;
    }
    let all = Unit::all();
    let mut units: Vec<Unit> = Vec::new();
    for (i, u) in all.iter().enumerate() {
        let first = i == 0 || all[i - 1].source != u.source;
        let last = i + 1 == all.len() || all[i + 1].source != u.source;
        if first || last {
            units.push(*u);
        }
    }
    let others: Vec<i32> = embedded::ARCHS.iter().copied().filter(|&a| a != 90).collect();
    let mut checks: Vec<(Unit, i32)> = units.iter().map(|&u| (u, 90)).collect();
    checks.extend(others.iter().enumerate().map(|(i, &arch)| (units[i % units.len()], arch)));
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let results = module::parallel_map(&checks, threads, |&(u, arch)| {
        let (runtime, _) = module::compile_unit(u, &format!("sm_{arch}")).unwrap_or_else(|e| panic!("{e}"));
        (u, arch, runtime)
    });
    for (u, arch, runtime) in results {
        let image = u.embedded(arch).unwrap();
        assert!(image == runtime.as_slice(), "{} for sm_{arch}: the embedded image differs from NVRTC's", u.label());
    }
}

/// Lookups refuse what was not built: an architecture without images (older than sm_80, unknown,
/// newer than the build's NVRTC), another source text, another NVRTC version's key.
#[test]
fn lookups_refuse_other_architectures_and_sources() {
    let (file, text) = Source::Copy.file();
    for arch in [0, 52, 75, 79, 130, 999, -90, -80] {
        assert!(embedded::find(file, text, None, arch).is_none(), "an image for sm_{arch}");
        assert!(!embedded::covers(arch), "covers sm_{arch}");
    }
    // A newer minor of an embedded major version runs the image of that major's architecture.
    for (device, image) in [(86, 80), (89, 80), (95, 90), (103, 100), (121, 120)] {
        if embedded::ARCHS.contains(&image) {
            let found = embedded::find(file, text, None, device).unwrap_or_else(|| panic!("none for sm_{device}"));
            assert_eq!(found.arch, image, "sm_{device}");
            assert!(embedded::covers(device));
        }
    }
    let edited = format!("{text}\n// edited\n");
    for &arch in embedded::ARCHS {
        assert!(embedded::find(file, text, None, arch).is_some());
        assert!(embedded::find(file, &edited, None, arch).is_none(), "an edited source found an image");
        assert!(embedded::find("other.cu", text, None, arch).is_none(), "another file name found an image");
        assert!(embedded::find(file, text, Some("copy_gather"), arch).is_none(), "another kernel selection");
    }
    // The search itself, on a table of its own.
    let table = [
        Image { key: "1a", file: "a.cu", kernel: None, arch: 80, bytes: b"one" },
        Image { key: "2b", file: "b.cu", kernel: Some("k"), arch: 90, bytes: b"two" },
        Image { key: "3c", file: "c.cu", kernel: None, arch: 100, bytes: b"three" },
    ];
    for (key, want) in [("1a", Some(&b"one"[..])), ("2b", Some(b"two")), ("3c", Some(b"three"))] {
        assert_eq!(embedded::find_key(&table, key).map(|i| i.bytes), want);
    }
    for key in ["", "0", "1", "2c", "3c ", "4"] {
        assert!(embedded::find_key(&table, key).is_none(), "{key:?}");
    }
    assert!(embedded::find_key(&[], "1a").is_none());
}

/// Architectures parse as `sm_XX` or `XX`; everything else is a typed error naming the forms.
#[test]
fn architectures_parse_strictly() {
    for (text, arch) in [("sm_90", 90), ("90", 90), ("sm_80", 80), ("sm_121", 121), ("75", 75)] {
        assert_eq!(crate::parse_arch(text).unwrap(), arch, "{text}");
    }
    for bad in ["", "sm_", "sm_90a", "compute_90", "sm90", "9", "sm_1000", "-90", "+90", "sm_ 90", "90.0", "SM_90"] {
        match crate::parse_arch(bad) {
            Err(backend_api::Error::InvalidArgument(m)) => assert!(m.contains("sm_XX"), "{bad}: {m}"),
            other => panic!("{bad:?} parsed: {other:?}"),
        }
    }
}

/// Without a device: a named architecture without images is compiled and stored, then found in
/// the cache; one with images needs nothing. This is the run-time path a build without images
/// takes for every architecture.
#[test]
fn a_named_architecture_fills_the_cache_without_a_device() {
    if !nvrtc_or_skip("a_named_architecture_fills_the_cache_without_a_device") {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("kernels");
    let setting = crate::KernelCacheSetting::Dir(dir.clone());
    // sm_130: newer than this NVRTC knows, so never embedded: PTX for the newest architecture it
    // knows, which the driver of such a device finishes (a device's process asks for the same).
    let newest = *driver::nvrtc_supported_archs().unwrap().iter().max().unwrap();
    let target = format!("compute_{newest}");
    let first = crate::prepare_kernel_cache(130, &setting).unwrap();
    assert_eq!((first.arch, first.cache_dir.as_deref()), (130, Some(dir.as_path())));
    assert_eq!(first.units.len(), Unit::all().len());
    for u in &first.units {
        assert_eq!((u.origin, u.target.as_str()), (ImageOrigin::Compiled, target.as_str()), "{}", u.unit);
    }
    let files = std::fs::read_dir(&dir).unwrap().count();
    assert_eq!(files, Unit::all().len(), "one cache entry per unit");
    let again = crate::prepare_kernel_cache(130, &setting).unwrap();
    assert!(again.units.iter().all(|u| u.origin == ImageOrigin::Cache), "{:?}", again.units);
    assert_eq!(
        first.units.iter().map(|u| u.image_bytes).collect::<Vec<_>>(),
        again.units.iter().map(|u| u.image_bytes).collect::<Vec<_>>()
    );
    // The entries are the ones a device's process looks up, holding NVRTC's PTX.
    let cache = KernelCache::at(&dir);
    let unit = Unit::of(Source::Lde, lde::pass_kernel(false, false));
    let (img, origin) = module::image(unit, &target, &cache).unwrap();
    assert_eq!(origin, ImageOrigin::Cache);
    assert!(String::from_utf8_lossy(&img).contains(".entry ntt_dif_pass("), "not the unit's PTX");
    // Older than the kernels support (they use sm_80's cp.async): refused before compiling.
    match crate::prepare_kernel_cache(75, &setting) {
        Err(backend_api::Error::InvalidArgument(m)) => assert!(m.contains("sm_80"), "{m}"),
        other => panic!("sm_75 must be refused: {other:?}"),
    }
    // An architecture with images writes nothing.
    if let Some(&arch) = embedded::ARCHS.first() {
        let r = crate::prepare_kernel_cache(arch, &setting).unwrap();
        assert!(r.units.iter().all(|u| u.origin == ImageOrigin::Embedded), "{:?}", r.units);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), files, "embedded units were stored");
    } else {
        // The fallback build: sm_90 is compiled like any other architecture.
        let r = crate::prepare_kernel_cache(90, &setting).unwrap();
        assert!(r.units.iter().all(|u| u.origin == ImageOrigin::Compiled && u.target == "sm_90"), "{:?}", r.units);
    }
    // A cache directory that is not absolute is refused before anything is compiled.
    let rel = crate::KernelCacheSetting::Dir("relative/kernels".into());
    assert!(matches!(crate::prepare_kernel_cache(90, &rel), Err(backend_api::Error::InvalidArgument(_))));
}

/// The fallback build (the feature off) embeds nothing and says why.
#[cfg(not(feature = "embedded-kernels"))]
#[test]
fn a_build_without_the_feature_embeds_nothing() {
    assert!(embedded::IMAGES.is_empty() && embedded::ARCHS.is_empty());
    let s = crate::embedded_kernels();
    assert_eq!((s.nvrtc_version, s.images, s.bytes), (None, 0, 0));
    assert!(s.not_built.as_deref().is_some_and(|r| r.contains("`embedded-kernels` feature is off")), "{s:?}");
    for u in Unit::all() {
        assert!(u.embedded(90).is_none());
    }
}

/// One image per major version, its lowest minor, serves that major's newer minors and nothing
/// else (synthetic architecture lists, so this runs whatever the build embedded).
#[test]
fn one_image_per_major_version_serves_its_newer_minors() {
    let cuda13 = [75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121];
    assert_eq!(kernel_units::embed_archs(&cuda13), [80, 90, 100, 110, 120]);
    assert_eq!(kernel_units::embed_archs(&[121, 120, 90]), [90, 120]);
    assert!(kernel_units::embed_archs(&[52, 75]).is_empty());
    let embedded = [80, 90, 100, 110, 120];
    for (device, image) in [
        (80, Some(80)),
        (86, Some(80)),
        (89, Some(80)),
        (90, Some(90)),
        (99, Some(90)),
        (103, Some(100)),
        (121, Some(120)),
        (75, None),
        (79, None),
        (70, None),
        (130, None),
        (8, None),
    ] {
        assert_eq!(kernel_units::image_arch(device, &embedded), image, "sm_{device}");
    }
    // An image never serves an older minor of its major version.
    assert_eq!(kernel_units::image_arch(80, &[86]), None);
}
