//! The conformance suite on the CUDA backend. Without a GPU every check prints `SKIPPED`;
//! `REQUIRE_CUDA=1` turns that into a failure (set it on GPU machines).
#![cfg(feature = "cuda")]

conformance::conformance_suite!(backend_cuda::CudaBackend, || backend_cuda::CudaBackend::new(0), "REQUIRE_CUDA");
