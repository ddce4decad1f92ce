//! The device quotient against Plonky3's: the compiled constraints of the Fibonacci, Keccak-f,
//! BLAKE3 and Poseidon2 AIRs evaluated by each backend's [`Backend::quotient_values`] over random
//! LDEs equal `p3_uni_stark::quotient_values` over the same rows; and whole proofs through
//! [`plonky3_adapter::prove`] are stock Plonky3's bytes, accepted by the stock verifier.

mod common;

use std::sync::Arc;

use backend_api::Backend;
use backend_api::quotient::{QuotientCall, QuotientDomain};
use backend_cpu::CpuBackend;
use common::stark::{Challenge, Val};
use p3_air::symbolic::AirLayout;
use p3_commit::PolynomialSpace;
use p3_field::{BasedVectorSpace, PrimeField64};
use p3_matrix::dense::RowMajorMatrix;
use p3_uni_stark::{StarkGenericConfig, SymbolicAirBuilder};
use plonky3_adapter::{BackendDft, BackendMmcs, CompiledAir};
use rand::{Rng, SeedableRng};

type StockConfig = common::stark::Config<p3_dft::Radix2DitParallel<Val>>;

/// Plonky3's quotient and the backend's over the same random LDE of `air` (`2^log_n` trace
/// rows, the LDE `stride` times as tall as the quotient domain), at a random challenge and random
/// public values.
fn same_quotient<B, A>(backend: &B, air: &A, log_n: usize, stride: usize, seed: u64)
where
    B: Backend,
    A: p3_uni_stark::QuotientAir<StockConfig> + p3_air::Air<SymbolicAirBuilder<Val>>,
{
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let config = common::stark::config(p3_dft::Radix2DitParallel::<Val>::default());
    let pcs = config.pcs();
    let layout =
        AirLayout { main_width: air.width(), num_public_values: air.num_public_values(), ..Default::default() };
    let trace_domain =
        <_ as p3_commit::Pcs<Challenge, common::stark::Challenger>>::natural_domain_for_degree(pcs, 1 << log_n);
    let log_chunks = p3_uni_stark::get_log_num_quotient_chunks_for_domain::<Val, A>(air, layout, trace_domain, 0);
    let quotient_domain = trace_domain.create_disjoint_domain(1 << (log_n + log_chunks));
    let q = quotient_domain.size();
    let width = air.width();
    // Random words, some of them non-canonical (>= p).
    let lde: Vec<u64> = (0..q * stride * width)
        .map(|i| if i % 7 == 3 { 0xFFFF_FFFF_0000_0001 + rng.random_range(0..0xFFFF_FFFEu64) } else { rng.random() })
        .collect();
    let on_domain: Vec<Val> =
        (0..q).flat_map(|i| lde[i * stride * width..][..width].iter().map(|&w| Val::new(w))).collect();
    let on_domain = RowMajorMatrix::new(on_domain, width);
    let public: Vec<Val> = (0..air.num_public_values()).map(|_| Val::new(rng.random())).collect();
    let alpha = Challenge::from_basis_coefficients_fn(|_| Val::new(rng.random()));

    let stock = p3_uni_stark::quotient_values::<StockConfig, A, _>(
        pcs,
        air,
        &public,
        layout,
        trace_domain,
        quotient_domain,
        &on_domain,
        None,
        alpha,
    );
    let stock: Vec<u64> = stock
        .iter()
        .flat_map(|c: &Challenge| {
            BasedVectorSpace::<Val>::as_basis_coefficients_slice(c).iter().map(|v| v.as_canonical_u64())
        })
        .collect();

    let compiled = CompiledAir::compile(air, layout).expect("the AIR compiles");
    let values = compiled.values(&public).unwrap();
    let alpha_powers = compiled.alpha_powers(alpha);
    let domain =
        QuotientDomain::new(log_n as u32, (log_n + log_chunks) as u32, quotient_domain.shift().as_canonical_u64())
            .unwrap();
    let call = QuotientCall { program: compiled.program(), domain, values: &values, alpha_powers: &alpha_powers };
    let shape = backend_api::MatrixShape::new(q * stride, width).unwrap();
    let buf = backend.upload(&lde).unwrap();
    let mut out = backend.alloc(q * 2).unwrap();
    backend.quotient_values(&buf, shape, &call, &mut out).expect("the backend evaluates the quotient");
    let ours = backend.download_vec(&out).unwrap();
    let first_diff = stock.iter().zip(&ours).position(|(a, b)| a != b);
    assert!(
        first_diff.is_none(),
        "{}: {} instructions, quotient word {first_diff:?} differs from Plonky3's",
        backend.info().backend,
        compiled.program().len()
    );
}

/// Every AIR of the proof tests, on `backend`.
fn every_air_matches_plonky3<B: Backend>(backend: &B) {
    same_quotient(backend, &common::stark::FibonacciAir { pairs: 3 }, 4, 1, 1);
    same_quotient(backend, &common::stark::FibonacciAir { pairs: 5 }, 3, 2, 2);
    same_quotient(backend, &p3_keccak_air::KeccakAir {}, 5, 1, 3);
    same_quotient(backend, &p3_blake3_air::Blake3Air {}, 3, 2, 4);
    same_quotient(backend, &common::stark::poseidon2_air(), 4, 1, 5);
}

#[test]
fn cpu_quotients_are_plonky3s() {
    every_air_matches_plonky3(&CpuBackend::new());
}

#[test]
fn toy_port_quotients_are_plonky3s() {
    every_air_matches_plonky3(&toy_backend::ToyBackend::new());
}

#[cfg(feature = "wgpu")]
#[test]
fn wgpu_quotients_are_plonky3s() {
    use backend_wgpu::{WgpuBackend, WgpuOptions};
    match WgpuBackend::new(WgpuOptions { allow_software: true, ..Default::default() }) {
        Ok(b) => every_air_matches_plonky3(&b),
        Err(e) => common::skip("plonky3_adapter quotient::wgpu", e, "REQUIRE_WGPU"),
    }
}

#[cfg(feature = "cuda")]
#[test]
fn cuda_quotients_are_plonky3s() {
    use backend_cuda::CudaBackend;
    match BackendDft::<CudaBackend>::default().backend() {
        Ok(b) => every_air_matches_plonky3(&*b),
        Err(reason) => common::skip("plonky3_adapter quotient::cuda", &reason, "REQUIRE_CUDA"),
    }
}

/// Proofs of every AIR through [`plonky3_adapter::prove`] on `backend`, Keccak and Poseidon2
/// MMCS, are the stock proofs' bytes and verify; their quotients were evaluated on the device and
/// the trace's LDE never came down.
fn device_proofs_are_stock<B: Backend + 'static>(backend: Arc<B>) {
    use common::stark::{
        FibonacciAir, blake3_trace, config, device_prove_checked_against, fibonacci_trace, fused_config, keccak_trace,
        poseidon2, poseidon2_air, poseidon2_trace, prove_checked_against,
    };
    let stock = config(p3_dft::Radix2DitParallel::default());
    let ours = fused_config(BackendDft::new(Arc::clone(&backend)), BackendMmcs::new(Arc::clone(&backend), 0));
    let check = |name: &str, want: Vec<u8>, got: Vec<u8>| assert!(want == got, "{name}: not the stock proof's bytes");

    let air = FibonacciAir { pairs: 4 };
    let (trace, public) = fibonacci_trace(4, 1 << 8);
    let want = prove_checked_against(&stock, &stock, &air, trace.clone(), &public);
    check("Fibonacci", want, device_prove_checked_against(&ours, &stock, &air, trace, &public));

    let air = p3_keccak_air::KeccakAir {};
    let trace = keccak_trace(2);
    let want = prove_checked_against(&stock, &stock, &air, trace.clone(), &[]);
    check("Keccak-f", want, device_prove_checked_against(&ours, &stock, &air, trace, &[]));

    let air = p3_blake3_air::Blake3Air {};
    let trace = blake3_trace(8);
    let want = prove_checked_against(&stock, &stock, &air, trace.clone(), &[]);
    check("BLAKE3", want, device_prove_checked_against(&ours, &stock, &air, trace, &[]));

    let air = poseidon2_air();
    let trace = poseidon2_trace(&air, 16);
    let want = prove_checked_against(&stock, &stock, &air, trace.clone(), &[]);
    check("Poseidon2", want, device_prove_checked_against(&ours, &stock, &air, trace, &[]));

    let stats = ours.pcs().stats();
    assert_eq!((stats.device_quotients, stats.host_quotients, stats.device_errors), (4, 0, 0), "{stats:?}");
    // The quotient's chunks were committed on the device, from the values left there.
    assert_eq!((stats.device_quotient_commits, stats.stock_commits), (4, 0), "{stats:?}");
    // With the quotient on the device, neither the trace's LDE nor the quotient's came down: the
    // queries' rows were gathered on the device, one download per commitment's query openings.
    let trees = ours.pcs().mmcs().stats();
    assert_eq!(trees.lde_downloads, 0, "{trees:?}");
    assert!(trees.lde_row_downloads >= 8, "{trees:?}");

    // The Poseidon2 MMCS and duplex challenger.
    let stock = poseidon2::stock();
    let ours = poseidon2::fused(Arc::clone(&backend));
    let air = FibonacciAir { pairs: 8 };
    let (trace, public) = fibonacci_trace(8, 1 << 9);
    let want = prove_checked_against(&stock, &stock, &air, trace.clone(), &public);
    check("Fibonacci, Poseidon2 MMCS", want, device_prove_checked_against(&ours, &stock, &air, trace, &public));
    let stats = ours.pcs().stats();
    assert_eq!((stats.device_quotients, stats.host_quotients, stats.device_quotient_commits), (1, 0, 1), "{stats:?}");
    assert_eq!(ours.pcs().mmcs().stats().lde_downloads, 0);
}

#[test]
fn cpu_device_proofs_are_stock() {
    device_proofs_are_stock(Arc::new(CpuBackend::new()));
}

#[test]
fn toy_port_device_proofs_are_stock() {
    device_proofs_are_stock(Arc::new(toy_backend::ToyBackend::new()));
}

#[cfg(feature = "wgpu")]
#[test]
fn wgpu_device_proofs_are_stock() {
    use backend_wgpu::{WgpuBackend, WgpuOptions};
    match WgpuBackend::new(WgpuOptions { allow_software: true, ..Default::default() }) {
        Ok(b) => device_proofs_are_stock(Arc::new(b)),
        Err(e) => common::skip("plonky3_adapter quotient::wgpu proofs", e, "REQUIRE_WGPU"),
    }
}

#[cfg(feature = "cuda")]
#[test]
fn cuda_device_proofs_are_stock() {
    use backend_cuda::CudaBackend;
    match BackendDft::<CudaBackend>::default().backend() {
        Ok(b) => device_proofs_are_stock(b),
        Err(reason) => common::skip("plonky3_adapter quotient::cuda proofs", &reason, "REQUIRE_CUDA"),
    }
}

/// A configuration whose commits do not fuse (the DFT and the MMCS on different backend
/// instances) proves the same bytes with the quotient on the host, and says so in the stats.
#[test]
fn an_unfused_trace_falls_back_to_the_host_quotient() {
    use common::stark::{FibonacciAir, config, device_prove_checked_against, fibonacci_trace, fused_config};
    let stock = config(p3_dft::Radix2DitParallel::default());
    let ours =
        fused_config(BackendDft::new(Arc::new(CpuBackend::new())), BackendMmcs::new(Arc::new(CpuBackend::new()), 0));
    let air = FibonacciAir { pairs: 2 };
    let (trace, public) = fibonacci_trace(2, 1 << 6);
    let want = common::stark::prove_checked_against(&stock, &stock, &air, trace.clone(), &public);
    assert!(want == device_prove_checked_against(&ours, &stock, &air, trace, &public));
    let stats = ours.pcs().stats();
    assert_eq!((stats.fused_commits, stats.device_quotients, stats.host_quotients), (0, 0, 1), "{stats:?}");

    // A fused commit whose quotient runs on the host: the LDE comes down once, for it.
    let backend = Arc::new(CpuBackend::new());
    let ours = fused_config(BackendDft::new(Arc::clone(&backend)), BackendMmcs::new(backend, 0));
    let (trace, public) = fibonacci_trace(2, 1 << 6);
    let proof = common::stark::prove_checked(&ours, &air, trace, &public);
    assert!(want == proof, "p3_uni_stark::prove over BackendPcs");
    let (stats, trees) = (ours.pcs().stats(), ours.pcs().mmcs().stats());
    assert_eq!((stats.fused_commits, trees.lde_downloads), (1, 1), "{stats:?} {trees:?}");
}

/// A quotient evaluated on the device whose commit the memory admission then refuses: its values
/// come down once and commit through `TwoAdicFriPcs::commit_quotient`, and the proof is stock's.
#[test]
fn a_refused_quotient_commit_takes_the_device_values_the_stock_way() {
    use backend_api::{LdeParams, MatrixShape, TreeShape};
    use common::stark::{
        Challenger, FibonacciAir, FusedConfig, FusedPcs, config, device_prove_checked_against, fibonacci_trace, fri,
    };
    use p3_field::PrimeCharacteristicRing;
    let (pairs, rows) = (8, 1 << 8);
    let air = FibonacciAir { pairs };
    let (trace, public) = fibonacci_trace(pairs, rows);
    let stock = config(p3_dft::Radix2DitParallel::default());
    let want = common::stark::prove_checked_against(&stock, &stock, &air, trace.clone(), &public);

    // The budget holds the trace's commit, then its kept LDE and tree beside the quotient's
    // values and register files, but not beside the quotient's commit.
    let width = 2 * pairs;
    let trace_params = LdeParams::new(MatrixShape::new(rows, width).unwrap(), 2, 7).unwrap();
    let trace_commit = plonky3_adapter::fused_commit_model(&trace_params).unwrap().total();
    let kept = trace_params.lde_shape().bytes() + TreeShape::new(2 * rows).unwrap().bytes();
    let layout = AirLayout { main_width: width, num_public_values: 1, ..Default::default() };
    let trace_domain =
        p3_field::coset::TwoAdicMultiplicativeCoset::new(Val::ONE, rows.trailing_zeros() as usize).unwrap();
    let chunks = 1 << p3_uni_stark::get_log_num_quotient_chunks_for_domain::<Val, _>(&air, layout, trace_domain, 0);
    let registers = CompiledAir::compile(&air, layout).unwrap().program().registers();
    let evaluation = commit::memory::MemoryModel::quotient(rows * chunks, 2, width, registers).unwrap().total();
    let chunks_side_by_side = LdeParams::new(MatrixShape::new(rows, 2 * chunks).unwrap(), 2, 7).unwrap();
    let quotient_commit = plonky3_adapter::quotient_commit_model(&chunks_side_by_side).unwrap().total();
    let budget = trace_commit.max(kept + evaluation);
    assert!(budget < kept + quotient_commit, "the quotient commit's model fits the budget: no refusal to test");

    let backend = Arc::new(CpuBackend::new());
    let pcs = FusedPcs::new(
        BackendDft::new(Arc::clone(&backend)),
        BackendMmcs::new(Arc::clone(&backend), 0),
        fri(plonky3_adapter::BackendExtensionMmcs::new(BackendMmcs::new(Arc::clone(&backend), 0)), 1),
    )
    .with_admission(commit::Admission::new(budget));
    let ours: FusedConfig<CpuBackend> =
        FusedConfig::new(pcs, Challenger::from_hasher(vec![], p3_keccak::Keccak256Hash {}));
    assert!(want == device_prove_checked_against(&ours, &stock, &air, trace, &public), "not the stock proof's bytes");
    let stats = ours.pcs().stats();
    assert_eq!(
        (stats.device_quotients, stats.device_quotient_commits, stats.admission_refusals, stats.stock_commits),
        (1, 0, 1, 1),
        "{stats:?}"
    );
}
