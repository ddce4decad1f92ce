//! The kernel images compiled when the crate was built (`build.rs`, the `embedded-kernels`
//! feature): CUBIN for every unit of every kernel file, for one architecture per major version
//! from `sm_80` up that the build's NVRTC supports ([`kernel_units::embed_archs`]); a device runs
//! the image of its major version's embedded architecture at or below its own
//! ([`kernel_units::image_arch`]: `sm_89` runs `sm_80`'s, CUDA's binary compatibility).
//!
//! **Keyed as the kernel cache keys them** ([`crate::kernel_units::unit_key`]): the file's name
//! and text, the options (the `sm_XX` target and the kernel selection), the NVRTC version that
//! compiled it, the headers. The driver is no part of the key: a CUBIN for `sm_XX` is the
//! machine code the driver loads as it is, whatever its version (a CUDA 13 driver loads the
//! CUBINs of the CUDA 13 NVRTC). A lookup computes the key from the kernel text this binary runs
//! and the NVRTC version recorded at build time; an image is used only when its key matches, so
//! an image never stands for another source or option set.
//!
//! A device whose architecture has no image (older than `sm_80`, or of a major version the
//! build's NVRTC does not know), or an image the driver refuses to load, takes the run-time path: NVRTC and the on-disk
//! cache.

use crate::kernel_units;

/// How the table below came to be (a build constructs one of the two).
#[allow(dead_code)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    /// Images were compiled by this NVRTC (major, minor) at build time.
    Built {
        /// NVRTC's version.
        nvrtc: (i32, i32),
    },
    /// No images: the reason the build gave.
    NotBuilt {
        /// Why (the feature is off, NVRTC was not found, ...).
        reason: &'static str,
    },
}

/// One embedded image (found by its key; the rest names it in tests).
#[cfg_attr(not(test), allow(dead_code))]
#[derive(Debug)]
pub(crate) struct Image {
    /// Its key ([`kernel_units::unit_key`]).
    pub(crate) key: &'static str,
    /// The kernel file.
    pub(crate) file: &'static str,
    /// The kernel of a one-kernel unit.
    pub(crate) kernel: Option<&'static str>,
    /// The architecture, `90` for `sm_90`.
    pub(crate) arch: i32,
    /// The CUBIN.
    pub(crate) bytes: &'static [u8],
}

// `STATUS`, `ARCHS` (ascending) and `IMAGES` (sorted by key), written by the build script.
include!(concat!(env!("OUT_DIR"), "/embedded_kernels.rs"));

/// The image of kernel file `file` (text `text`), unit `kernel`, that a device of architecture
/// `arch` (`90`) runs, when this build embeds one under the key the kernel cache would give it
/// (the key of the image's own architecture, [`kernel_units::image_arch`]).
pub(crate) fn find(file: &str, text: &str, kernel: Option<&str>, arch: i32) -> Option<&'static Image> {
    let Status::Built { nvrtc } = STATUS else { return None };
    let image_arch = kernel_units::image_arch(arch, ARCHS)?;
    let key = kernel_units::unit_key(file, text, kernel, &format!("sm_{image_arch}"), nvrtc, shaders::cuda::HEADERS);
    find_key(IMAGES, &key)
}

/// The image of `table` (sorted by key) under `key`.
pub(crate) fn find_key<'t>(table: &'t [Image], key: &str) -> Option<&'t Image> {
    table.binary_search_by(|i| i.key.cmp(key)).ok().map(|at| &table[at])
}

/// Whether this build embeds images that a device of architecture `arch` runs.
pub(crate) fn covers(arch: i32) -> bool {
    matches!(STATUS, Status::Built { .. }) && kernel_units::image_arch(arch, ARCHS).is_some()
}

/// What this binary embeds, as [`crate::embedded_kernels`] reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmbeddedKernels {
    /// The NVRTC version (major, minor) that compiled the images; `None` without images.
    pub nvrtc_version: Option<(i32, i32)>,
    /// The architectures with images, `90` for `sm_90`, ascending.
    pub archs: Vec<i32>,
    /// Images in all (units times architectures).
    pub images: usize,
    /// Their size in bytes.
    pub bytes: usize,
    /// Why there are none, when there are none: the `embedded-kernels` feature is off, NVRTC was
    /// not found at build time, or `STARK_COMMIT_EMBED_KERNELS=0`.
    pub not_built: Option<String>,
}

/// This build's table, summarised.
pub(crate) fn summary() -> EmbeddedKernels {
    let (nvrtc_version, not_built) = match STATUS {
        Status::Built { nvrtc } => (Some(nvrtc), None),
        Status::NotBuilt { reason } => (None, Some(reason.to_string())),
    };
    EmbeddedKernels {
        nvrtc_version,
        archs: ARCHS.to_vec(),
        images: IMAGES.len(),
        bytes: IMAGES.iter().map(|i| i.bytes.len()).sum(),
        not_built,
    }
}
