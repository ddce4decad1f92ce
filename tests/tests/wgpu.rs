//! The conformance suite on the wgpu backend. CI runs it on Mesa's software Vulkan device
//! (llvmpipe) with `REQUIRE_WGPU=1`; without any adapter every check prints `SKIPPED`.
//!
//! Two instantiations: the adapter's own segment size (one segment per buffer at these shapes)
//! with native u64 arithmetic where the adapter has `SHADER_INT64`; and 8 KiB segments with the
//! portable u32-pair arithmetic, so that every buffer of more than 1024 elements is several wgpu
//! buffers, every kernel runs its multi-segment windows, and both arithmetic paths are checked
//! against the same references on one machine.
#![cfg(feature = "wgpu")]

conformance::conformance_suite!(backend_wgpu::WgpuBackend, conformance::wgpu_setups::adapter_segments, "REQUIRE_WGPU");

mod segmented {
    conformance::conformance_suite!(
        backend_wgpu::WgpuBackend,
        conformance::wgpu_setups::small_segments,
        "REQUIRE_WGPU"
    );
}

/// Raw calls that break their contract (unsafe code below the front) panic at the method's entry
/// in this debug build instead of dispatching a kernel on the wrong buffer or past one.
#[test]
fn raw_calls_outside_the_contract_stop() {
    let make = conformance::wgpu_setups::adapter_segments;
    let Some(backend) =
        conformance::parity::or_skip(make(), "wgpu::raw_calls_outside_the_contract_stop", "REQUIRE_WGPU")
    else {
        return;
    };
    if let Err(f) = conformance::contract::raw_calls_outside_the_contract_stop(&backend, &make) {
        panic!("{f}");
    }
}
