//! The conformance suite on the wgpu backend. CI runs it on Mesa's software Vulkan device
//! (llvmpipe) with `REQUIRE_WGPU=1`; without any adapter every check prints `SKIPPED`.
//!
//! Two instantiations: the adapter's own segment size (one segment per buffer at these shapes),
//! and 8 KiB segments, so that every buffer of more than 1024 elements is several wgpu buffers
//! and every kernel runs its multi-segment windows.
#![cfg(feature = "wgpu")]

conformance::conformance_suite!(
    backend_wgpu::WgpuBackend,
    || backend_wgpu::WgpuBackend::new(backend_wgpu::WgpuOptions { allow_software: true, ..Default::default() }),
    "REQUIRE_WGPU"
);

mod segmented {
    conformance::conformance_suite!(
        backend_wgpu::WgpuBackend,
        || backend_wgpu::WgpuBackend::new(backend_wgpu::WgpuOptions {
            allow_software: true,
            max_segment_bytes: Some(8 << 10),
        }),
        "REQUIRE_WGPU"
    );
}
