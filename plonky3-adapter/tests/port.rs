//! A port through `BackendDft`: the porting guide's toy backend (a `RawBackend` outside this
//! crate, single-threaded plain loops) proves a p3-uni-stark Fibonacci proof that verifies and
//! is byte-identical to stock Plonky3's (`Radix2DitParallel`, every proof-of-work bit at 0), and
//! passes Plonky3's own DFT conformance tests. Also what `BackendDft::default()` does for a port:
//! Plonky3's DFT with one warning saying how to register before `register_default`, the
//! registered backend after it.

mod common;

use std::fmt;
use std::sync::{Arc, Mutex};

use backend_api::Backend;
use backend_cpu::CpuBackend;
use common::matrix;
use common::stark::{Val, prove_and_verify, prove_with_mmcs, stock};
use p3_dft::{Radix2DitParallel, TwoAdicSubgroupDft};
use p3_field::Field;
use p3_matrix::Matrix;
use plonky3_adapter::{BackendDft, BackendMmcs, DefaultDevice, DftStats, register_default, unregister_default};
use toy_backend::ToyBackend;

// Plonky3's DFT conformance tests over the port, every LDE on it (threshold 0).
forwarding_dft!(ToyAll, ToyBackend, BackendDft::new(Arc::new(ToyBackend::new())));
p3_field_testing::test_field_dft!(
    toy_all,
    p3_goldilocks::Goldilocks,
    p3_field::extension::BinomialExtensionField<p3_goldilocks::Goldilocks, 5>,
    crate::ToyAll
);
p3_field_testing::test_field_dft_consistency!(
    toy_all_vs_radix2_dit_parallel,
    p3_goldilocks::Goldilocks,
    p3_field::extension::BinomialExtensionField<p3_goldilocks::Goldilocks, 5>,
    crate::ToyAll,
    p3_dft::Radix2DitParallel<p3_goldilocks::Goldilocks>
);

#[test]
fn toy_port_proof_is_byte_identical_to_stock_and_runs_on_the_port() {
    for (pairs, rows) in [(1, 1 << 3), (1, 1 << 10), (8, 1 << 9)] {
        let backend = Arc::new(ToyBackend::new());
        let dft = BackendDft::new(Arc::clone(&backend));
        let ours = prove_and_verify(dft.clone(), pairs, rows);
        assert_eq!(ours, stock(pairs, rows), "{pairs} pairs x {rows} rows: the proofs differ");
        // The trace's LDE and the quotient chunks' LDE at least, all on the toy backend.
        let stats = dft.stats();
        assert!(stats.backend_ldes >= 2 && stats.cpu_ldes == 0 && stats.device_errors == 0, "{stats:?}");
        assert!(backend.memory().allocations >= 2, "the toy backend allocated nothing: {:?}", backend.memory());
        assert_eq!(backend.memory().live, 0, "the LDE buffers were not released");
    }
}

#[test]
fn toy_port_mmcs_proof_is_byte_identical_to_stock() {
    // The LDEs and every Merkle tree of the proof on the port.
    for (pairs, rows) in [(1, 1 << 3), (2, 1 << 9)] {
        let backend = Arc::new(ToyBackend::new());
        let dft = BackendDft::new(Arc::clone(&backend));
        let mmcs = BackendMmcs::new(Arc::clone(&backend), 0);
        assert_eq!(prove_with_mmcs(dft.clone(), mmcs.clone(), pairs, rows), stock(pairs, rows), "{pairs} x {rows}");
        let stats = mmcs.stats();
        assert!(stats.device_commits >= 3 && stats.host_commits == 0 && stats.device_errors == 0, "{stats:?}");
        assert_eq!(backend.memory().live, 0, "the trees were not released: {:?}", backend.memory());
    }
    // A port too small for the trees: every commit falls back to the host, the proof is unchanged.
    let backend = Arc::new(ToyBackend::with_memory(4 << 10));
    let mmcs = BackendMmcs::new(Arc::clone(&backend), 0);
    assert_eq!(prove_with_mmcs(Radix2DitParallel::<Val>::default(), mmcs.clone(), 4, 1 << 10), stock(4, 1 << 10));
    let stats = mmcs.stats();
    assert!(stats.host_commits >= 2 && stats.device_errors >= 2, "{stats:?}");
    assert_eq!(backend.memory().live, 0);
}

#[test]
fn a_port_out_of_memory_falls_back_and_the_proof_is_unchanged() {
    // 4 KiB of "device" for a 64 KiB LDE: every LDE fails on the port and runs on the CPU.
    let backend = Arc::new(ToyBackend::with_memory(4 << 10));
    let dft = BackendDft::new(Arc::clone(&backend));
    assert_eq!(prove_and_verify(dft.clone(), 4, 1 << 10), stock(4, 1 << 10));
    let stats = dft.stats();
    assert!(stats.backend_ldes == 0 && stats.device_errors >= 2 && stats.cpu_ldes == stats.device_errors, "{stats:?}");
    assert_eq!(backend.memory().live, 0);
}

/// Collects the `tracing` warnings emitted on this thread.
#[derive(Default)]
struct Warnings(Mutex<Vec<String>>);

struct Message(String);

impl tracing::field::Visit for Message {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl tracing::Subscriber for Warnings {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        if *event.metadata().level() == tracing::Level::WARN {
            let mut message = Message(String::new());
            event.record(&mut message);
            self.0.lock().unwrap().push(message.0);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// The only test of this binary that touches `ToyBackend`'s registration (it is process-wide).
#[test]
fn toy_default_warns_until_registered_then_runs_on_the_registered_port() {
    // Unregistered: Plonky3's DFT, one warning that names the fix, and `backend()` says the same.
    let dft = BackendDft::<ToyBackend>::default();
    let reason = dft.backend().expect_err("no ToyBackend is registered yet");
    assert!(reason.contains("register_default::<ToyBackend>") && reason.contains("BackendDft::new"), "{reason}");
    let warnings = Arc::new(Warnings::default());
    tracing::subscriber::with_default(Arc::clone(&warnings), || {
        for seed in [1, 2] {
            let mat = matrix(seed, 64, 3);
            let want = Radix2DitParallel::<Val>::default().coset_lde_batch(mat.clone(), 1, Val::GENERATOR);
            let got = dft.coset_lde_batch(mat, 1, Val::GENERATOR);
            assert_eq!(got.to_row_major_matrix(), want.to_row_major_matrix());
        }
    });
    let warnings = warnings.0.lock().unwrap().clone();
    assert_eq!(warnings.len(), 1, "one warning per backend type: {warnings:?}");
    assert!(warnings[0].contains("ToyBackend") && warnings[0].contains("register_default"), "{warnings:?}");
    assert_eq!(dft.stats(), DftStats { backend_ldes: 0, cpu_ldes: 2, device_errors: 0 });
    assert_eq!(prove_and_verify(dft.clone(), 2, 1 << 9), stock(2, 1 << 9));
    assert_eq!(dft.stats().backend_ldes, 0);

    // Registered: `default()` is the registered backend with the registered threshold.
    let backend = Arc::new(ToyBackend::new());
    assert!(register_default(Arc::clone(&backend), 0).is_none());
    let dft = BackendDft::<ToyBackend>::default();
    assert!(Arc::ptr_eq(&dft.backend().unwrap(), &backend));
    assert_eq!(dft.min_backend_elems(), 0);
    assert_eq!(prove_and_verify(dft.clone(), 2, 1 << 9), stock(2, 1 << 9));
    let stats = dft.stats();
    assert!(stats.backend_ldes >= 2 && stats.cpu_ldes == 0, "{stats:?}");

    // A second registration replaces the first and returns it; a threshold keeps small LDEs
    // on the CPU.
    let second = Arc::new(ToyBackend::new());
    let previous = register_default(Arc::clone(&second), 1 << 20).expect("the first registration");
    assert!(Arc::ptr_eq(&previous, &backend));
    let dft = BackendDft::<ToyBackend>::default();
    assert!(Arc::ptr_eq(&dft.backend().unwrap(), &second));
    assert_eq!(prove_and_verify(dft.clone(), 2, 1 << 9), stock(2, 1 << 9));
    assert_eq!(dft.stats().backend_ldes, 0, "{:?}", dft.stats());

    // Unregistered again: back to no backend.
    assert!(Arc::ptr_eq(&unregister_default::<ToyBackend>().expect("registered"), &second));
    assert!(unregister_default::<ToyBackend>().is_none());
    assert!(BackendDft::<ToyBackend>::default().backend().is_err());
}

/// The only test of this binary that touches `CpuBackend`'s registration.
#[test]
fn a_registration_overrides_a_built_in_default() {
    let builtin = BackendDft::<CpuBackend>::default();
    assert_eq!(builtin.min_backend_elems(), <CpuBackend as DefaultDevice>::MIN_BACKEND_ELEMS);
    let backend = Arc::new(CpuBackend::new());
    register_default(Arc::clone(&backend), 0);
    let dft = BackendDft::<CpuBackend>::default();
    assert!(Arc::ptr_eq(&dft.backend().unwrap(), &backend));
    assert_eq!(prove_and_verify(dft.clone(), 1, 1 << 10), stock(1, 1 << 10));
    assert!(dft.stats().backend_ldes >= 2, "{:?}", dft.stats());
    assert!(unregister_default::<CpuBackend>().is_some());
    let again = BackendDft::<CpuBackend>::default();
    assert_eq!(again.min_backend_elems(), <CpuBackend as DefaultDevice>::MIN_BACKEND_ELEMS);
    assert!(Arc::ptr_eq(&again.backend().unwrap(), &<CpuBackend as DefaultDevice>::shared().unwrap()));
}
