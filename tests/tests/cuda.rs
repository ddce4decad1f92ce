//! The conformance suite on the CUDA backend. Without a GPU every check prints `SKIPPED`;
//! `REQUIRE_CUDA=1` turns that into a failure (set it on GPU machines). The backend opens with
//! `CudaOptions::from_env()`, so e.g. `CUDA_TRANSPOSE_ROUTE=batched` runs the suite on that route.
#![cfg(feature = "cuda")]

conformance::conformance_suite!(
    backend_cuda::CudaBackend,
    || backend_cuda::CudaOptions::from_env().and_then(|o| backend_cuda::CudaBackend::open(0, o)),
    "REQUIRE_CUDA"
);
