//! The conformance suite on the CUDA backend. Without a GPU every check prints `SKIPPED`;
//! `REQUIRE_CUDA=1` turns that into a failure (set it on GPU machines). The backend opens with
//! `CudaOptions::from_env()`, so e.g. `CUDA_UPLOAD_GROUPS=1` runs the suite without the upload overlap.
#![cfg(feature = "cuda")]

conformance::conformance_suite!(
    backend_cuda::CudaBackend,
    || backend_cuda::CudaOptions::from_env().and_then(|o| backend_cuda::CudaBackend::open(0, o)),
    "REQUIRE_CUDA"
);

/// The host-trace LDE check again with the upload overlap forced onto the suite's small shapes
/// (`upload_overlap_min_bytes` 0) at 3 column groups, so that `coset_lde_from_host` from
/// `alloc_host` memory runs its grouped route (one strided copy per group on the copy stream, the
/// LDE per column range) against the naive reference; the suite above runs it with the
/// environment's options, where shapes this small take the plain route. Then
/// `coset_lde_from_host_and_download` on the same route.
#[test]
fn coset_lde_from_host_in_column_groups() {
    let made = backend_cuda::CudaOptions::from_env().and_then(|o| {
        backend_cuda::CudaBackend::open(
            0,
            backend_cuda::CudaOptions { upload_groups: 3, upload_overlap_min_bytes: 0, ..o },
        )
    });
    let Some(backend) =
        conformance::parity::or_skip(made, "cuda::coset_lde_from_host_in_column_groups", "REQUIRE_CUDA")
    else {
        return;
    };
    if let Err(f) = conformance::lde::coset_lde_from_host(&backend) {
        panic!("{f}");
    }
    // The same route with each column group's download started as soon as its LDE is final (on
    // the download stream), then a transpose and an overwrite that must wait for those copies.
    if let Err(f) = conformance::lde::coset_lde_from_host_and_download(&backend) {
        panic!("{f}");
    }
}

/// The quotient checks again at four points per thread (`quotient_points:`
/// [`backend_cuda::QUOTIENT_POINTS`]): the suite above runs the default, one point per thread;
/// here a program whose register file fits four points per thread in shared memory evaluates four
/// at once, so that both kernels of each degree are checked against the reference.
#[test]
fn quotient_values_four_points_per_thread() {
    let points = backend_cuda::QUOTIENT_POINTS;
    let made = backend_cuda::CudaOptions::from_env()
        .and_then(|o| backend_cuda::CudaBackend::open(0, backend_cuda::CudaOptions { quotient_points: points, ..o }));
    let Some(backend) =
        conformance::parity::or_skip(made, "cuda::quotient_values_four_points_per_thread", "REQUIRE_CUDA")
    else {
        return;
    };
    for check in [
        conformance::quotient::quotient_values_random::<backend_cuda::CudaBackend>,
        conformance::quotient::quotient_values_selectors::<backend_cuda::CudaBackend>,
    ] {
        if let Err(f) = check(&backend) {
            panic!("{f}");
        }
    }
}

/// Raw calls that break their contract (unsafe code below the front) panic at the method's entry
/// in this debug build instead of launching a kernel that writes past a buffer.
#[test]
fn raw_calls_outside_the_contract_stop() {
    let make = || backend_cuda::CudaOptions::from_env().and_then(|o| backend_cuda::CudaBackend::open(0, o));
    let Some(backend) =
        conformance::parity::or_skip(make(), "cuda::raw_calls_outside_the_contract_stop", "REQUIRE_CUDA")
    else {
        return;
    };
    if let Err(f) = conformance::contract::raw_calls_outside_the_contract_stop(&backend, &make) {
        panic!("{f}");
    }
}
