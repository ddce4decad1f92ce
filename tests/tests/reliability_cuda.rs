//! The reliability checks on the CUDA backend, device 0, plus the check that every launch
//! configuration the backend exposes gives the same bytes. Without a device every test prints
//! `SKIPPED`; `REQUIRE_CUDA=1` makes that a failure.
#![cfg(feature = "cuda")]

conformance::reliability_suite!(
    backend_cuda::CudaBackend,
    || backend_cuda::CudaOptions::from_env().and_then(|o| backend_cuda::CudaBackend::open(0, o)),
    "REQUIRE_CUDA"
);

#[test]
fn cuda_launch_configurations() {
    conformance::reliability::run_reliability_check(
        __reliability_backend(),
        "backend_cuda::CudaBackend",
        "cuda_launch_configurations",
        "REQUIRE_CUDA",
        conformance::reliability::cuda_launch_configurations,
    );
}
