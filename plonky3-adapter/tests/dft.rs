//! Plonky3's own DFT conformance tests (p3-field-testing's `test_field_dft!`,
//! `test_field_dft_large!` and `test_field_dft_consistency!` against `Radix2DitParallel`) over
//! `BackendDft` on every backend, and the adapter's own checks: routing, bit-reversed storage,
//! non-canonical inputs, Plonky3's behaviour on shapes our backends refuse, and device errors
//! injected through the backend's `AllocTracker`.
//!
//! Two configurations per backend: the type's own `Default` (the measured threshold sends small
//! matrices to Plonky3's CPU DFT), and a threshold of 0 (`*All`), so that Plonky3's small-shape
//! tests (heights 1 to 16) reach the backend too. GPU backends that cannot be opened print
//! `SKIPPED` per test and run over the CPU fallback that `Default` documents;
//! `REQUIRE_WGPU=1` / `REQUIRE_CUDA=1` make that a failure.

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use backend_api::Backend;
use backend_cpu::CpuBackend;
use common::{P, matrix};
use p3_dft::{NaiveDft, Radix2DitParallel, TwoAdicSubgroupDft};
use p3_field::extension::BinomialExtensionField;
use p3_field::{Field, PrimeCharacteristicRing};
use p3_goldilocks::Goldilocks;
use p3_matrix::Matrix;
use p3_matrix::bitrev::BitReversibleMatrix;
use p3_matrix::dense::RowMajorMatrix;
use plonky3_adapter::{BackendDft, DftStats, OnDeviceError};

type F = Goldilocks;
/// The extension Plonky3's own Goldilocks DFT tests use.
type EF = BinomialExtensionField<Goldilocks, 5>;

// --- CPU backend ------------------------------------------------------------------------------

forwarding_dft!(CpuAll, CpuBackend, BackendDft::new(Arc::new(CpuBackend::new())));

p3_field_testing::test_field_dft!(
    cpu_default,
    crate::F,
    crate::EF,
    plonky3_adapter::BackendDft<backend_cpu::CpuBackend>
);
p3_field_testing::test_field_dft_large!(
    cpu_default_large,
    crate::F,
    crate::EF,
    plonky3_adapter::BackendDft<backend_cpu::CpuBackend>
);
p3_field_testing::test_field_dft_consistency!(
    cpu_default_vs_radix2_dit_parallel,
    crate::F,
    crate::EF,
    plonky3_adapter::BackendDft<backend_cpu::CpuBackend>,
    p3_dft::Radix2DitParallel<crate::F>
);
p3_field_testing::test_field_dft!(cpu_all, crate::F, crate::EF, crate::CpuAll);
p3_field_testing::test_field_dft_consistency!(
    cpu_all_vs_radix2_dit_parallel,
    crate::F,
    crate::EF,
    crate::CpuAll,
    p3_dft::Radix2DitParallel<crate::F>
);

// --- wgpu backend (llvmpipe in CI) --------------------------------------------------------------

#[cfg(feature = "wgpu")]
mod wgpu {
    use std::sync::{Arc, OnceLock};

    use backend_wgpu::{WgpuBackend, WgpuOptions};
    use p3_dft::TwoAdicSubgroupDft;
    use p3_matrix::Matrix;
    use plonky3_adapter::BackendDft;

    /// One backend per test binary; software adapters allowed (CI has llvmpipe).
    fn shared() -> Result<Arc<WgpuBackend>, String> {
        static GPU: OnceLock<Result<Arc<WgpuBackend>, String>> = OnceLock::new();
        GPU.get_or_init(|| {
            WgpuBackend::new(WgpuOptions { allow_software: true, ..Default::default() })
                .map(Arc::new)
                .map_err(|e| e.to_string())
        })
        .clone()
    }

    /// The wgpu `BackendDft` with threshold 0, or (visibly skipped) the CPU fallback.
    pub fn all() -> BackendDft<WgpuBackend> {
        match shared() {
            Ok(b) => BackendDft::new(b),
            Err(reason) => {
                crate::common::skip("plonky3_adapter dft::wgpu (ran over the CPU fallback)", &reason, "REQUIRE_WGPU");
                BackendDft::default()
            }
        }
    }

    crate::forwarding_dft!(WgpuAll, WgpuBackend, all());

    p3_field_testing::test_field_dft!(wgpu_all, crate::F, crate::EF, super::WgpuAll);
    p3_field_testing::test_field_dft_large!(wgpu_all_large, crate::F, crate::EF, super::WgpuAll);
    p3_field_testing::test_field_dft_consistency!(
        wgpu_all_vs_radix2_dit_parallel,
        crate::F,
        crate::EF,
        super::WgpuAll,
        p3_dft::Radix2DitParallel<crate::F>
    );

    #[test]
    fn the_wgpu_ldes_ran_on_the_device() {
        let dft = all(); // prints the skip (or fails under REQUIRE_WGPU=1) without a device
        if shared().is_err() {
            return;
        }
        let mat = crate::matrix(31, 64, 5);
        let out = dft.coset_lde_batch(mat.clone(), 2, crate::F::new(7));
        let want = p3_dft::NaiveDft.coset_lde_batch(mat, 2, crate::F::new(7));
        assert_eq!(out.to_row_major_matrix(), want);
        assert_eq!(dft.stats().backend_ldes, 1, "{:?}", dft.stats());
    }
}

// --- CUDA backend ---------------------------------------------------------------------------------

#[cfg(feature = "cuda")]
mod cuda {
    use backend_cuda::CudaBackend;
    use p3_dft::TwoAdicSubgroupDft;
    use p3_matrix::Matrix;
    use plonky3_adapter::BackendDft;

    /// CUDA's own `Default` (device 0, measured threshold), or a visible skip.
    pub fn default() -> BackendDft<CudaBackend> {
        let dft = BackendDft::<CudaBackend>::default();
        if let Err(reason) = dft.backend() {
            crate::common::skip("plonky3_adapter dft::cuda (ran over the CPU fallback)", &reason, "REQUIRE_CUDA");
        }
        dft
    }

    crate::forwarding_dft!(CudaDefault, CudaBackend, default());
    crate::forwarding_dft!(CudaAll, CudaBackend, default().with_min_backend_elems(0));

    p3_field_testing::test_field_dft!(cuda_default, crate::F, crate::EF, super::CudaDefault);
    p3_field_testing::test_field_dft_large!(cuda_default_large, crate::F, crate::EF, super::CudaDefault);
    p3_field_testing::test_field_dft_consistency!(
        cuda_default_vs_radix2_dit_parallel,
        crate::F,
        crate::EF,
        super::CudaDefault,
        p3_dft::Radix2DitParallel<crate::F>
    );
    p3_field_testing::test_field_dft!(cuda_all, crate::F, crate::EF, super::CudaAll);
    p3_field_testing::test_field_dft_consistency!(
        cuda_all_vs_radix2_dit_parallel,
        crate::F,
        crate::EF,
        super::CudaAll,
        p3_dft::Radix2DitParallel<crate::F>
    );

    #[test]
    fn the_cuda_ldes_ran_on_the_device() {
        let dft = default().with_min_backend_elems(0);
        if dft.backend().is_err() {
            return; // `default()` printed the skip (or failed under REQUIRE_CUDA=1)
        }
        let mat = crate::matrix(32, 64, 5);
        let out = dft.coset_lde_batch(mat.clone(), 2, crate::F::new(7));
        let want = p3_dft::NaiveDft.coset_lde_batch(mat, 2, crate::F::new(7));
        assert_eq!(out.to_row_major_matrix(), want);
        assert_eq!(dft.stats().backend_ldes, 1, "{:?}", dft.stats());
    }
}

// --- The adapter's own checks (CPU backend) -------------------------------------------------------

fn cpu_all() -> BackendDft<CpuBackend> {
    BackendDft::new(Arc::new(CpuBackend::new()))
}

#[test]
fn edge_shapes_and_non_canonical_inputs_match_the_naive_dft() {
    // Heights 1..2^6, widths 1..9, blowups 1 (added_bits 0) to 8, shifts 1, 7, a non-canonical
    // 7 (p + 7) and a random element: every output equals NaiveDft's O(n^2) evaluation.
    let dft = cpu_all();
    let shifts = [F::ONE, F::new(7), F::new(P + 7), F::new(0x1234_5678_9abc_def0)];
    let mut seed = 0;
    for log_h in 0..=6 {
        for width in [1, 2, 9] {
            for added_bits in 0..=3 {
                for shift in shifts {
                    seed += 1;
                    let mat = matrix(seed, 1 << log_h, width);
                    let want = NaiveDft.coset_lde_batch(mat.clone(), added_bits, shift);
                    let got = dft.coset_lde_batch(mat, added_bits, shift).to_row_major_matrix();
                    assert_eq!(got, want, "2^{log_h} x {width}, added_bits {added_bits}, shift {shift}");
                }
            }
        }
    }
    assert_eq!(dft.stats(), DftStats { backend_ldes: seed as usize, cpu_ldes: 0, device_errors: 0 });
}

#[test]
fn storage_is_bit_reversed_like_radix2_dit_parallel() {
    // The PCS calls `.bit_reverse_rows()`: that must hand it exactly the storage
    // Radix2DitParallel hands it (a free unwrap, not a permuting copy).
    let mat = matrix(7, 1 << 8, 6);
    let shift = F::GENERATOR;
    let ours = cpu_all().coset_lde_batch(mat.clone(), 1, shift).bit_reverse_rows();
    let stock = Radix2DitParallel::<F>::default().coset_lde_batch(mat.clone(), 1, shift).bit_reverse_rows();
    assert_eq!(ours, stock);
    // And the storage is the natural-order LDE with rows at bit-reversed indices.
    let natural = NaiveDft.coset_lde_batch(mat, 1, shift);
    let log_n = natural.height().trailing_zeros();
    for i in 0..natural.height() {
        let j = i.reverse_bits() >> (usize::BITS - log_n);
        assert_eq!(ours.row_slice(i).unwrap().to_vec(), natural.row_slice(j).unwrap().to_vec(), "storage row {i}");
    }
}

#[test]
fn the_threshold_routes_small_traces_to_plonky3s_dft() {
    let dft = cpu_all().with_min_backend_elems(64);
    let small = matrix(1, 16, 3); // 48 elements
    let large = matrix(2, 16, 4); // 64 elements
    let shift = F::new(7);
    assert_eq!(
        dft.coset_lde_batch(small.clone(), 1, shift).to_row_major_matrix(),
        NaiveDft.coset_lde_batch(small, 1, shift)
    );
    assert_eq!(dft.stats(), DftStats { backend_ldes: 0, cpu_ldes: 1, device_errors: 0 });
    assert_eq!(
        dft.coset_lde_batch(large.clone(), 1, shift).to_row_major_matrix(),
        NaiveDft.coset_lde_batch(large, 1, shift)
    );
    assert_eq!(dft.stats(), DftStats { backend_ldes: 1, cpu_ldes: 1, device_errors: 0 });
    // lde_batch and the algebra variant go through coset_lde_batch too.
    let ext: RowMajorMatrix<EF> = RowMajorMatrix::new((0..64u64).map(|i| EF::from_u64(i * i + 3)).collect(), 2);
    assert_eq!(dft.coset_lde_algebra_batch(ext.clone(), 1, shift), NaiveDft.coset_lde_algebra_batch(ext, 1, shift));
    assert_eq!(dft.lde_batch(matrix(3, 32, 2), 2).to_row_major_matrix(), NaiveDft.lde_batch(matrix(3, 32, 2), 2));
    assert_eq!(dft.stats().backend_ldes, 3, "{:?}", dft.stats());
    // The threshold and the error policy are what was asked for; Default uses the measured one.
    assert_eq!(dft.min_backend_elems(), 64);
    assert_eq!(dft.on_device_error(), OnDeviceError::FallBackToCpu);
    let default = BackendDft::<CpuBackend>::default();
    assert_eq!(default.min_backend_elems(), <CpuBackend as plonky3_adapter::DefaultDevice>::MIN_BACKEND_ELEMS);
    assert!(default.backend().is_ok());
}

/// Runs `coset_lde_batch` on `dft` and on Plonky3's `Radix2DitParallel`: both panic, or both
/// return the same matrix.
fn same_as_stock(dft: &BackendDft<CpuBackend>, mat: RowMajorMatrix<F>, added_bits: usize, shift: F) {
    let stock = Radix2DitParallel::<F>::default();
    let ours =
        catch_unwind(AssertUnwindSafe(|| dft.coset_lde_batch(mat.clone(), added_bits, shift).to_row_major_matrix()));
    let theirs = catch_unwind(AssertUnwindSafe(|| stock.coset_lde_batch(mat, added_bits, shift).to_row_major_matrix()));
    match (ours, theirs) {
        (Ok(a), Ok(b)) => assert_eq!(a, b),
        (Err(_), Err(_)) => {}
        (a, b) => panic!("the adapter {} where Radix2DitParallel {}", verb(&a), verb(&b)),
    }
}

fn verb<T, E>(r: &Result<T, E>) -> &'static str {
    if r.is_ok() { "returned" } else { "panicked" }
}

#[test]
fn shapes_the_backends_refuse_behave_as_plonky3s_own_dft() {
    let dft = cpu_all();
    // No columns, no rows, a height that is not a power of two: Plonky3's own behaviour.
    same_as_stock(&dft, RowMajorMatrix::new(vec![], 0), 1, F::GENERATOR);
    same_as_stock(&dft, RowMajorMatrix::new(vec![], 3), 1, F::GENERATOR);
    same_as_stock(&dft, matrix(6, 12, 2), 1, F::GENERATOR);
    // A zero shift: the backends refuse it, Plonky3 evaluates at zero.
    same_as_stock(&dft, matrix(5, 8, 2), 1, F::ZERO);
    let stats = dft.stats();
    assert_eq!((stats.backend_ldes, stats.device_errors), (0, 0), "{stats:?}");
}

#[test]
fn device_errors_fall_back_to_the_cpu_and_release_every_byte() {
    // Fail each allocation of one LDE in turn (the upload, the LDE's buffers, the download's
    // host copy if any): the result is still the right one, computed by Plonky3's DFT.
    let backend = Arc::new(CpuBackend::new());
    let dft = BackendDft::new(Arc::clone(&backend));
    let mat = matrix(11, 64, 3);
    let want = NaiveDft.coset_lde_batch(mat.clone(), 1, F::GENERATOR);
    let before = backend.memory();
    dft.coset_lde_batch(mat.clone(), 1, F::GENERATOR);
    let per_lde = backend.memory().allocations - before.allocations;
    assert!(per_lde >= 2, "an LDE allocates at least its upload and its output, saw {per_lde}");
    for k in 0..per_lde {
        backend.tracker().fail_at(backend.memory().allocations + k);
        let got = dft.coset_lde_batch(mat.clone(), 1, F::GENERATOR).to_row_major_matrix();
        assert_eq!(got, want, "allocation {k} failed");
        assert_eq!(backend.memory().live, before.live, "allocation {k} failed: bytes left live");
    }
    assert_eq!(dft.stats(), DftStats { backend_ldes: 1, cpu_ldes: per_lde, device_errors: per_lde });
}

#[test]
fn device_errors_panic_with_the_backends_message_when_asked() {
    let backend = Arc::new(CpuBackend::new());
    let dft = BackendDft::new(Arc::clone(&backend)).with_on_device_error(OnDeviceError::Panic);
    backend.tracker().fail_at(backend.memory().allocations);
    let err = catch_unwind(AssertUnwindSafe(|| dft.coset_lde_batch(matrix(12, 32, 2), 1, F::GENERATOR)))
        .expect_err("an injected fault under OnDeviceError::Panic must panic");
    let msg = err.downcast_ref::<String>().expect("a formatted panic message");
    assert!(msg.contains("plonky3-adapter: cpu coset LDE of 32 x 2 (blowup 2) failed"), "{msg}");
    assert!(msg.contains("injected fault at allocation"), "{msg}");
    assert_eq!(backend.memory().live, 0);
    assert_eq!(dft.stats(), DftStats { backend_ldes: 0, cpu_ldes: 0, device_errors: 1 });
}

#[test]
fn a_device_too_small_for_the_lde_falls_back() {
    // A real out-of-memory (not an injected one): 16 KiB of "device" for a 64 KiB LDE.
    let backend = Arc::new(CpuBackend::with_memory(16 << 10));
    let dft = BackendDft::new(Arc::clone(&backend));
    let mat = matrix(13, 1 << 10, 4);
    let got = dft.coset_lde_batch(mat.clone(), 1, F::GENERATOR).to_row_major_matrix();
    assert_eq!(got, Radix2DitParallel::<F>::default().coset_lde_batch(mat, 1, F::GENERATOR).to_row_major_matrix());
    assert_eq!(dft.stats().device_errors, 1);
    assert_eq!(backend.memory().live, 0);
}

#[test]
fn clones_share_the_backend_and_the_counters() {
    let dft = cpu_all();
    let twin = dft.clone();
    twin.coset_lde_batch(matrix(14, 8, 1), 1, F::GENERATOR);
    assert_eq!(dft.stats().backend_ldes, 1);
    assert!(Arc::ptr_eq(&dft.backend().unwrap(), &twin.backend().unwrap()));
    let shown = format!("{dft:?}");
    assert!(shown.contains("CpuBackend") && shown.contains("backend_ldes: 1"), "{shown}");
}

/// `dft`'s `coset_lde_batch` of `mat`: the matrix `bit_reverse_rows()` hands the PCS (the storage
/// itself) must be exactly `Radix2DitParallel`'s. Returns whether the call ran on the backend.
fn storage_equals_stock<B: Backend + 'static>(
    dft: &BackendDft<B>,
    mat: &RowMajorMatrix<F>,
    added_bits: usize,
    shift: F,
) -> bool {
    let before = dft.stats();
    let ours = dft.coset_lde_batch(mat.clone(), added_bits, shift).bit_reverse_rows();
    let stock = Radix2DitParallel::<F>::default().coset_lde_batch(mat.clone(), added_bits, shift).bit_reverse_rows();
    let shape = format!("{} x {}, added_bits {added_bits}, shift {shift}", mat.height(), mat.width());
    assert_eq!(ours, stock, "{shape}: the storage differs from Radix2DitParallel's");
    let after = dft.stats();
    let (on_backend, on_cpu) = (after.backend_ldes - before.backend_ldes, after.cpu_ldes - before.cpu_ldes);
    assert_eq!(on_backend + on_cpu, 1, "{shape}: one LDE counted once, saw {before:?} -> {after:?}");
    on_backend == 1
}

#[test]
fn below_the_threshold_the_result_is_radix2_dit_parallels_own() {
    // The shipped CPU default (threshold "never"), a CPU backend with a threshold above every
    // shape here, and a port that was never registered (no backend at all): every LDE is
    // Radix2DitParallel's, storage and all, over heights 1 to 2^10, widths 1 to 17, blowups 1
    // to 8, shifts including zero and a non-canonical one.
    let default = BackendDft::<CpuBackend>::default();
    let high = cpu_all().with_min_backend_elems(1 << 20);
    let port = BackendDft::<toy_backend::ToyBackend>::default();
    let shifts = [F::GENERATOR, F::ONE, F::ZERO, F::new(P + 3)];
    let mut seed = 100;
    for log_h in 0..=10 {
        for width in [1, 4, 17] {
            for added_bits in [0, 1, 3] {
                for shift in shifts {
                    seed += 1;
                    let mat = matrix(seed, 1 << log_h, width);
                    assert!(!storage_equals_stock(&default, &mat, added_bits, shift));
                    assert!(!storage_equals_stock(&high, &mat, added_bits, shift));
                    assert!(!storage_equals_stock(&port, &mat, added_bits, shift));
                }
            }
        }
    }
    for dft_stats in [default.stats(), high.stats()] {
        assert_eq!(dft_stats, DftStats { backend_ldes: 0, cpu_ldes: 396, device_errors: 0 });
    }
    assert_eq!(port.stats(), DftStats { backend_ldes: 0, cpu_ldes: 396, device_errors: 0 });
    // The port's missing backend was settled once and is reported the same way every time.
    let reason = port.backend().expect_err("an unregistered port has no default backend");
    assert!(reason.contains("register_default"), "{reason}");
    assert_eq!(port.backend().expect_err("still none"), reason);
}

#[test]
fn the_threshold_counts_trace_elements_and_is_inclusive() {
    // Threshold 64 elements (rows * columns): below it Plonky3's DFT, from it on the backend;
    // both give Radix2DitParallel's storage.
    let dft = cpu_all().with_min_backend_elems(64);
    let cases = [
        // (rows, cols, on the backend)
        (16, 3, false), // 48
        (4, 15, false), // 60
        (1, 63, false), // 63, one row
        (32, 2, true),  // 64
        (64, 1, true),  // 64
        (8, 8, true),   // 64
        (1, 64, true),  // 64, one row
        (2, 33, true),  // 66
        (1 << 10, 1, true),
    ];
    for (i, &(rows, cols, want)) in cases.iter().enumerate() {
        let got = storage_equals_stock(&dft, &matrix(200 + i as u64, rows, cols), 1, F::GENERATOR);
        assert_eq!(got, want, "{rows} x {cols} = {} elements against a threshold of 64", rows * cols);
    }
    // The edges of the setting: 0 takes every shape the backend can, usize::MAX none.
    let mat = matrix(300, 1, 1);
    assert!(storage_equals_stock(&cpu_all().with_min_backend_elems(0), &mat, 2, F::GENERATOR));
    assert!(storage_equals_stock(&cpu_all().with_min_backend_elems(1), &mat, 2, F::GENERATOR));
    assert!(!storage_equals_stock(&cpu_all().with_min_backend_elems(2), &mat, 2, F::GENERATOR));
    let big = matrix(301, 1 << 12, 8);
    assert!(!storage_equals_stock(&cpu_all().with_min_backend_elems(usize::MAX), &big, 1, F::GENERATOR));
    assert!(storage_equals_stock(&cpu_all().with_min_backend_elems(1 << 15), &big, 1, F::GENERATOR));
    assert!(!storage_equals_stock(&cpu_all().with_min_backend_elems((1 << 15) + 1), &big, 1, F::GENERATOR));
    // Above the threshold, a shape the backends refuse still goes to Plonky3's DFT.
    assert!(!storage_equals_stock(&dft, &matrix(302, 64, 2), 1, F::ZERO));
}

#[test]
fn a_threshold_change_keeps_the_settled_backend() {
    // The backend a DFT settled on carries over to `with_min_backend_elems` and
    // `with_on_device_error`, whose counters start from zero.
    let dft = BackendDft::<CpuBackend>::default();
    let backend = dft.backend().expect("the CPU backend always opens");
    let all = dft.clone().with_min_backend_elems(0).with_on_device_error(OnDeviceError::Panic);
    assert!(Arc::ptr_eq(&all.backend().unwrap(), &backend));
    assert!(storage_equals_stock(&all, &matrix(400, 32, 2), 1, F::GENERATOR));
    assert_eq!(all.stats(), DftStats { backend_ldes: 1, cpu_ldes: 0, device_errors: 0 });
    assert_eq!(dft.stats(), DftStats::default());
}
