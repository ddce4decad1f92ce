//! The wgpu backends the suites run on (`tests/wgpu.rs`, `tests/reliability_wgpu.rs`,
//! `tests/parity_wgpu.rs`), made in one place so that every suite covers the same setups.

use backend_wgpu::{WgpuBackend, WgpuOptions};

/// The adapter's own segment size (one segment per buffer at test shapes), with native u64
/// arithmetic where the adapter has `SHADER_INT64`; software adapters (CI's llvmpipe) allowed.
///
/// # Errors
/// When no adapter is usable.
pub fn adapter_segments() -> backend_api::Result<WgpuBackend> {
    WgpuBackend::new(WgpuOptions { allow_software: true, ..Default::default() })
}

/// 8 KiB segments (1024 elements) with the portable u32-pair arithmetic: every buffer of more
/// than 1024 elements is several wgpu buffers, so every kernel runs its multi-segment windows.
///
/// # Errors
/// When no adapter is usable.
pub fn small_segments() -> backend_api::Result<WgpuBackend> {
    WgpuBackend::new(WgpuOptions {
        allow_software: true,
        max_segment_bytes: Some(8 << 10),
        portable_arithmetic: true,
        ..Default::default()
    })
}
