//! What NVRTC compiles and how its output is keyed: the one definition shared by the crate and
//! its build script, which includes this file with `#[path]` (so it uses `std` and `blake3`
//! only).
//!
//! - **Units.** A kernel file whose kernels sit inside `#if ALL_KERNELS || WANT_<name>` guards
//!   (`lde.cu`, `hash.cu`: fully unrolled register kernels, seconds of ptxas each) is compiled
//!   one kernel per NVRTC program (`-DKERNEL_SELECT=1 -DWANT_<name>=1`); a file without guards is
//!   one program. The guards in the file's text are the list: a kernel added to `hash.cu` with
//!   its guard is a new unit everywhere (the build script's embedded images, `prover prepare`)
//!   with no other change.
//! - **Options** ([`unit_options`]): `sm_XX` targets give CUBIN, `compute_XX` targets PTX.
//! - **Keys** ([`unit_key`]): a BLAKE3 digest, length-prefixed part by part, over the key format,
//!   the file's name and text, the options (target and kernel selection included), the NVRTC
//!   version and every header. That is everything NVRTC's output depends on, and nothing else: the
//!   driver does not take part in producing an image (it only loads it), so an image compiled on a
//!   machine without a driver or GPU (a container build, the crate's build script) has the key
//!   the device's process looks up.

// The crate uses every item; the build script only some of them.
#![allow(dead_code)]

/// Bumped whenever the key's composition changes. v2: the driver version left the key.
pub(crate) const KEY_FORMAT: &[u8] = b"stark-commit kernel cache v2";

/// The line that opens the guard of one kernel of a file compiled one kernel per program.
pub(crate) const GUARD: &str = "#if ALL_KERNELS || WANT_";

/// The oldest architecture the kernels run on and the build script embeds images for (Ampere,
/// `sm_80`: `transpose.cu` uses its asynchronous copies, `cp.async`).
pub(crate) const EMBED_MIN_ARCH: i32 = 80;

/// The architectures the build embeds images for, out of those NVRTC supports: one per major
/// version, its lowest minor from [`EMBED_MIN_ARCH`] up (`sm_80`, `sm_90`, `sm_100`, `sm_110`,
/// `sm_120` for CUDA 13). A CUBIN for `sm_XY` runs on every `sm_XZ` with `Z >= Y` (CUDA's binary
/// compatibility within a major version), so `sm_86` and `sm_89` run the `sm_80` image and
/// `sm_121` the `sm_120` one: a fifth of the images of one per architecture, for the same
/// devices. Ascending.
pub(crate) fn embed_archs(supported: &[i32]) -> Vec<i32> {
    let mut archs: Vec<i32> = supported.iter().copied().filter(|&a| a >= EMBED_MIN_ARCH).collect();
    archs.sort_unstable();
    archs.dedup_by_key(|a| *a / 10);
    archs
}

/// The embedded architecture whose image a device of architecture `arch` runs: the highest of
/// `embedded` (ascending) with `arch`'s major version and a minor no higher than `arch`'s.
pub(crate) fn image_arch(arch: i32, embedded: &[i32]) -> Option<i32> {
    embedded.iter().rev().copied().find(|&a| a / 10 == arch / 10 && a <= arch && arch >= EMBED_MIN_ARCH)
}

/// The kernels of a file compiled one kernel per program, in file order: the names of its
/// `#if ALL_KERNELS || WANT_<name>` guards (empty for a file compiled whole).
pub(crate) fn guarded_kernels(text: &str) -> Vec<&str> {
    text.lines().filter_map(|l| l.trim_start().strip_prefix(GUARD)).map(str::trim).collect()
}

/// The units of a file: one per guarded kernel (`Some(name)`), or the whole file (`None`).
pub(crate) fn file_units(text: &str) -> Vec<Option<&str>> {
    let kernels = guarded_kernels(text);
    if kernels.is_empty() { vec![None] } else { kernels.into_iter().map(Some).collect() }
}

/// NVRTC options for `target` (`sm_90` gives CUBIN, `compute_90` PTX), with the kernel selection
/// of a one-kernel unit.
pub(crate) fn unit_options(target: &str, kernel: Option<&str>) -> Vec<String> {
    // No `-lineinfo`: it triples every image (the embedded ones included) and only a profiler
    // reads it; add it here to profile with source lines.
    let mut o = vec![format!("--gpu-architecture={target}"), "-std=c++17".into(), "-DNVRTC_BUILD=1".into()];
    if let Some(k) = kernel {
        o.push("-DKERNEL_SELECT=1".into());
        o.push(format!("-DWANT_{k}=1"));
    }
    o
}

/// The hex BLAKE3 digest of [`KEY_FORMAT`] and `parts`, each length-prefixed (so no two different
/// lists of parts hash the same bytes).
pub(crate) fn key_digest(parts: &[&[u8]]) -> String {
    let mut h = blake3::Hasher::new();
    for part in std::iter::once(&KEY_FORMAT).chain(parts) {
        h.update(&(part.len() as u64).to_le_bytes());
        h.update(part);
    }
    h.finalize().to_hex().to_string()
}

/// The key of kernel file `name` (text `text`, `kernel` selected or the whole file) compiled for
/// `target` by NVRTC `nvrtc` (major, minor) with `headers` (include name, text).
pub(crate) fn unit_key(
    name: &str,
    text: &str,
    kernel: Option<&str>,
    target: &str,
    nvrtc: (i32, i32),
    headers: &[(&str, &str)],
) -> String {
    let options = unit_options(target, kernel).join("\n");
    let version = format!("nvrtc {}.{}", nvrtc.0, nvrtc.1);
    let mut parts: Vec<&[u8]> = vec![name.as_bytes(), text.as_bytes(), options.as_bytes(), version.as_bytes()];
    for (h_name, h_text) in headers {
        parts.push(h_name.as_bytes());
        parts.push(h_text.as_bytes());
    }
    key_digest(&parts)
}
