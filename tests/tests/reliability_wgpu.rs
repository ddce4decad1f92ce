//! The reliability checks on the wgpu backend (software Vulkan allowed, as in CI). Without an
//! adapter every test prints `SKIPPED`; `REQUIRE_WGPU=1` makes that a failure.
#![cfg(feature = "wgpu")]

conformance::reliability_suite!(
    backend_wgpu::WgpuBackend,
    || backend_wgpu::WgpuBackend::new(backend_wgpu::WgpuOptions { allow_software: true, ..Default::default() }),
    "REQUIRE_WGPU"
);
