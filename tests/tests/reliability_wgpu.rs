//! The reliability checks on the wgpu backend (software Vulkan allowed, as in CI). Without an
//! adapter every test prints `SKIPPED`; `REQUIRE_WGPU=1` makes that a failure.
//!
//! Two instantiations, as in `wgpu.rs`: the adapter's own segment size, and 8 KiB segments, so
//! that every commit's LDE and trees span several wgpu buffers and the multi-segment kernels run
//! under concurrency, fault injection and repetition too.
#![cfg(feature = "wgpu")]

conformance::reliability_suite!(backend_wgpu::WgpuBackend, conformance::wgpu_setups::adapter_segments, "REQUIRE_WGPU");

mod segmented {
    conformance::reliability_suite!(
        backend_wgpu::WgpuBackend,
        conformance::wgpu_setups::small_segments,
        "REQUIRE_WGPU"
    );
}
