//! The reliability checks on the suite's own host backend: it passes them all, and broken
//! variants fail the check meant to catch them (so no check is vacuous).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use backend_api::{
    AllocTracker, Backend, CopyRange, DeviceBuffer as _, DeviceInfo, HashKind, LdeParams, LeafSpec, MatrixShape,
    Result, TreeShape,
};
use commit::{Admission, CommitParams, ProverError};

use super::concurrency::concurrent_commits_within;
use super::*;
use crate::selftest::{Bug, HostBackend, HostBuffer};
use crate::{Gen, Outcome};

/// How [`Faulty`] corrupts the LDE: by copying element 0 over element 1 of its output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    None,
    /// When another commit's buffers are resident (live bytes above this call's input): the
    /// "silently wrong under memory pressure" failure.
    WhenOthersResident,
    /// On every 50th LDE.
    Every50th,
    /// On a rayon pool of one thread.
    OneRayonThread,
    /// The third LDE never returns.
    HangOnThird,
    /// The third LDE panics.
    PanicOnThird,
}

struct Faulty {
    inner: HostBackend,
    fault: Fault,
    ldes: AtomicUsize,
}

fn leak(inner: HostBackend, fault: Fault) -> &'static Faulty {
    Box::leak(Box::new(Faulty { inner, fault, ldes: AtomicUsize::new(0) }))
}

/// Delegates to the host backend's port methods (the front in front of `Faulty` validates).
impl backend_api::RawBackend for Faulty {
    type Buffer = HostBuffer;
    type Download = <HostBackend as backend_api::RawBackend>::Download;
    type HostBuffer = Vec<u64>;
    fn info(&self) -> DeviceInfo {
        backend_api::RawBackend::info(&self.inner)
    }
    fn tracker(&self) -> &AllocTracker {
        backend_api::RawBackend::tracker(&self.inner)
    }
    unsafe fn alloc(&self, len: usize) -> Result<HostBuffer> {
        // SAFETY: our contract, for the backend this one wraps (its buffers and tracker are ours).
        unsafe { backend_api::RawBackend::alloc(&self.inner, len) }
    }
    unsafe fn upload(&self, host: &[u64]) -> Result<HostBuffer> {
        // SAFETY: our contract, for the backend this one wraps (its buffers and tracker are ours).
        unsafe { backend_api::RawBackend::upload(&self.inner, host) }
    }
    unsafe fn download(&self, buf: &HostBuffer, offset: usize, out: &mut [u64]) -> Result<()> {
        // SAFETY: our contract, for the backend this one wraps (its buffers and tracker are ours).
        unsafe { backend_api::RawBackend::download(&self.inner, buf, offset, out) }
    }
    unsafe fn queue_download(&self, buf: &HostBuffer) -> Result<Self::Download> {
        // SAFETY: our contract, for the backend this one wraps (its buffers and tracker are ours).
        unsafe { backend_api::RawBackend::queue_download(&self.inner, buf) }
    }
    fn synchronize(&self) -> Result<()> {
        backend_api::RawBackend::synchronize(&self.inner)
    }
    unsafe fn alloc_host(&self, len: usize) -> Result<Vec<u64>> {
        // SAFETY: our contract, for the backend this one wraps (its buffers and tracker are ours).
        unsafe { backend_api::RawBackend::alloc_host(&self.inner, len) }
    }
    unsafe fn transpose_in_place(&self, buf: &mut HostBuffer, shape: MatrixShape, cap: usize) -> Result<()> {
        // SAFETY: our contract, for the backend this one wraps (its buffers and tracker are ours).
        unsafe { backend_api::RawBackend::transpose_in_place(&self.inner, buf, shape, cap) }
    }
    unsafe fn batched_copy(&self, src: &HostBuffer, dst: &mut HostBuffer, copies: &[CopyRange]) -> Result<()> {
        // SAFETY: our contract, for the backend this one wraps (its buffers and tracker are ours).
        unsafe { backend_api::RawBackend::batched_copy(&self.inner, src, dst, copies) }
    }
    unsafe fn batched_copy_within(&self, buf: &mut HostBuffer, copies: &[CopyRange]) -> Result<()> {
        // SAFETY: our contract, for the backend this one wraps (its buffers and tracker are ours).
        unsafe { backend_api::RawBackend::batched_copy_within(&self.inner, buf, copies) }
    }
    unsafe fn hash_leaves_into(
        &self,
        m: &HostBuffer,
        shape: MatrixShape,
        spec: &LeafSpec,
        out: &mut HostBuffer,
        at: usize,
    ) -> Result<()> {
        // SAFETY: our contract, for the backend this one wraps (its buffers and tracker are ours).
        unsafe { backend_api::RawBackend::hash_leaves_into(&self.inner, m, shape, spec, out, at) }
    }
    unsafe fn merkle_tree_in_place(&self, nodes: &mut HostBuffer, tree: TreeShape, hash: HashKind) -> Result<()> {
        // SAFETY: our contract, for the backend this one wraps (its buffers and tracker are ours).
        unsafe { backend_api::RawBackend::merkle_tree_in_place(&self.inner, nodes, tree, hash) }
    }
    unsafe fn write(&self, buf: &mut HostBuffer, offset: usize, host: &[u64]) -> Result<()> {
        // SAFETY: our contract, for the backend this one wraps (its buffers and tracker are ours).
        unsafe { backend_api::RawBackend::write(&self.inner, buf, offset, host) }
    }
    unsafe fn coset_lde_in_place(&self, buf: &mut HostBuffer, params: &LdeParams) -> Result<()> {
        let call = self.ldes.fetch_add(1, Ordering::SeqCst) + 1;
        let corrupt = match self.fault {
            Fault::None => false,
            Fault::WhenOthersResident => backend_api::RawBackend::tracker(self).counters().live > buf.len() * 8,
            Fault::Every50th => call.is_multiple_of(50),
            Fault::OneRayonThread => rayon::current_thread_index().is_some() && rayon::current_num_threads() == 1,
            Fault::HangOnThird if call == 3 => loop {
                std::thread::park();
            },
            Fault::HangOnThird => false,
            Fault::PanicOnThird if call == 3 => panic!("deliberate panic in the third LDE"),
            Fault::PanicOnThird => false,
        };
        // SAFETY: our contract, for the backend this one wraps (its buffers and tracker are ours);
        // the corrupting copy moves element 0 to 1 of the LDE buffer, which holds at least 2.
        unsafe {
            backend_api::RawBackend::coset_lde_in_place(&self.inner, buf, params)?;
            if corrupt {
                backend_api::RawBackend::batched_copy_within(&self.inner, buf, &[CopyRange::new(0, 1, 1)])?;
            }
        }
        Ok(())
    }
}

fn run<B: Backend>(backend: &'static B, name: &str, check: ReliabilityCheck<B>) -> Outcome {
    run_reliability_outcome(backend, name, check)
}

#[test]
fn a_correct_backend_passes_every_check() {
    let b = leak(HostBackend::new(Bug::None), Fault::None);
    let checks: [(&str, ReliabilityCheck<Faulty>); 5] = [
        ("concurrent_commits_under_admission", concurrent_commits_under_admission::<Faulty>),
        ("commit_fault_injection", commit_fault_injection::<Faulty>),
        ("commit_repeated_100", commit_repeated_100::<Faulty>),
        ("commit_rayon_thread_counts", commit_rayon_thread_counts::<Faulty>),
        ("batched_copy_overlaps_refused", batched_copy_overlaps_refused::<Faulty>),
    ];
    for (name, check) in checks {
        run(b, name, check).unwrap_or_else(|f| panic!("{f}"));
    }
}

/// Each broken backend fails exactly the check written for its failure mode, with a message
/// that names it.
#[test]
fn every_failure_mode_is_caught() {
    let cases: [(&str, &'static Faulty, ReliabilityCheck<Faulty>, &str); 5] = [
        (
            "panicking in one commit",
            leak(HostBackend::new(Bug::None), Fault::PanicOnThird),
            concurrent_commits_under_admission::<Faulty>,
            "panicked in the commit: deliberate panic",
        ),
        (
            "wrong while other commits are resident",
            leak(HostBackend::new(Bug::None), Fault::WhenOthersResident),
            concurrent_commits_under_admission::<Faulty>,
            "vs the CPU oracle",
        ),
        (
            "leaks when a later allocation fails",
            leak(HostBackend::new(Bug::LeakOnError), Fault::None),
            commit_fault_injection::<Faulty>,
            "live afterwards",
        ),
        (
            "wrong on every 50th LDE",
            leak(HostBackend::new(Bug::None), Fault::Every50th),
            commit_repeated_100::<Faulty>,
            "of 100",
        ),
        (
            "wrong on one rayon thread",
            leak(HostBackend::new(Bug::None), Fault::OneRayonThread),
            commit_rayon_thread_counts::<Faulty>,
            "on 1 rayon threads",
        ),
    ];
    for (what, backend, check, expected) in cases {
        match run(backend, what, check) {
            Ok(()) => panic!("the check passed a backend that is {what}"),
            Err(f) => assert!(f.0.contains(expected), "{what}: the failure does not say {expected:?}: {f}"),
        }
    }
    // A port that copies without validating is refused all the same: the front validates every
    // batch before the port's copy runs.
    let unvalidated = leak(HostBackend::new(Bug::NoCopyValidation), Fault::None);
    run(unvalidated, "copies without validation", batched_copy_overlaps_refused::<Faulty>)
        .unwrap_or_else(|f| panic!("the front let an overlapping batch reach the port: {f}"));
}

/// A commit that never returns is reported as a deadlock once the timeout passes, naming the
/// threads still running, instead of hanging the test run. (The stuck threads stay parked
/// until the test process exits.)
#[test]
fn a_hung_commit_is_reported_as_a_deadlock() {
    let b = leak(HostBackend::new(Bug::None), Fault::HangOnThird);
    let start = Instant::now();
    let f = concurrent_commits_within(b, Duration::from_secs(3)).expect_err("a hung commit passed");
    assert!(f.0.contains("deadlock: commit threads") && f.0.contains("had not finished after 3s"), "{f}");
    assert!(start.elapsed() < Duration::from_secs(30), "the timeout was not honoured: {:?}", start.elapsed());
}

/// The refusal path is also checked when nothing is concurrent: a budget below one commit
/// refuses it with `Refused` and allocates nothing.
#[test]
fn a_budget_below_one_commit_refuses_before_allocating() {
    let b = leak(HostBackend::new(Bug::None), Fault::None);
    let mut g = Gen::new("a_budget_below_one_commit_refuses_before_allocating");
    let table = Table::new(&mut g, "small", 16, 3, CommitParams::default());
    let total = table.plan().unwrap().model.total();
    let before = b.memory();
    match commit_table(b, &table, &Admission::new(total - 1)) {
        Err(ProverError::Refused(r)) => assert_eq!((r.budget, r.in_flight), (total - 1, 0)),
        Err(e) => panic!("expected a refusal, got {e}"),
        Ok(_) => panic!("a commit over budget was admitted"),
    }
    assert_eq!(b.memory(), before, "a refused commit touched the allocator");
}
