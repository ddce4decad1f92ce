//! CUDA against the CPU backend (the oracle) through the prover's own `commit`: the column-major
//! LDE bytes and every root must be equal, for both hashes and a split tree.
//!
//! `commit_parity_small` runs on every CUDA machine. `commit_parity_production` is the production
//! shape, 2^21 x 316 at blowup 2 (a 10.6 GB LDE); it is `#[ignore]`d because the CPU oracle
//! takes a while: run it with `--include-ignored` on a GPU machine. It also measures the commit's
//! peak device memory (the tracker's high-water mark, the stream-ordered pool's high-water mark
//! and `cuMemGetInfo`) against the memory model plus 1%.
//!
//! Without a GPU each test prints `SKIPPED`; `REQUIRE_CUDA=1` makes that a failure.
#![cfg(feature = "cuda")]

use backend_api::{Backend, DEFAULT_SCRATCH_CAP, MatrixShape};
use backend_cpu::CpuBackend;
use backend_cuda::{CudaBackend, CudaOptions};
use commit::memory::MemoryModel;
use commit::{CommitParams, NoProgress, TraceInput};
use conformance::parity::{self, CASES, Probe};

/// `real_out_of_memory_during_a_commit` fills the device but for a few hundred megabytes, and the
/// other tests of this binary run beside it on other threads: they would meet its out-of-memory
/// (an H100 run saw `commit_parity_small` refused 20 KiB with 33 MB free). It holds this lock for
/// writing, every other test for reading.
static DEVICE_MEMORY: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// A shared hold on the device's memory (see [`DEVICE_MEMORY`]); a panicked test's lock is still
/// a lock.
fn share_device() -> std::sync::RwLockReadGuard<'static, ()> {
    DEVICE_MEMORY.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn cuda_or_skip(test: &str) -> Option<CudaBackend> {
    parity::or_skip(
        CudaOptions::from_env().and_then(|o| CudaBackend::open(0, o)),
        &format!("parity_cuda::{test}"),
        "REQUIRE_CUDA",
    )
}

/// The stream-ordered pool's high-water mark and the `cuMemGetInfo` delta of one commit, checked
/// against the memory model plus 1% like the tracker's peak.
#[derive(Default)]
struct CudaMemory {
    free_before: usize,
}

impl Probe<CudaBackend> for CudaMemory {
    fn before(&mut self, cuda: &CudaBackend) {
        cuda.trim_pool().unwrap();
        cuda.pool_reserved_high().unwrap();
        self.free_before = cuda.mem_get_info().unwrap().0;
    }

    fn after(&mut self, cuda: &CudaBackend, what: &str, model: &MemoryModel, peak: usize) {
        let pool_high = cuda.pool_reserved_high().unwrap() as usize;
        let (free_after, _) = cuda.mem_get_info().unwrap();
        let used = self.free_before.saturating_sub(free_after);
        report_memory(what, model, peak, pool_high, used);
    }
}

/// Prints the three measurements against the model, and checks the pool's and `cuMemGetInfo`'s
/// (the tracker's peak is checked by [`parity::compare`]).
fn report_memory(what: &str, model: &MemoryModel, peak: usize, pool_high: usize, used: usize) {
    let limit = model.total() as f64 * 1.01;
    let gib = |b: usize| b as f64 / (1u64 << 30) as f64;
    println!(
        "{what}: peak device memory: tracker {peak} B ({:.3} GiB), pool high-water {pool_high} B ({:.3} GiB), \
         cuMemGetInfo delta at the end {used} B ({:.3} GiB); model {} B ({:.3} GiB), model + 1% {:.0} B\n{model}",
        gib(peak),
        gib(pool_high),
        gib(used),
        model.total(),
        gib(model.total()),
        limit
    );
    assert!(pool_high as f64 <= limit, "{what}: pool high-water {pool_high} B over the model + 1% ({limit:.0} B)");
    assert!(used as f64 <= limit, "{what}: cuMemGetInfo delta {used} B over the model + 1% ({limit:.0} B)");
}

#[test]
fn commit_parity_small() {
    let _shared = share_device();
    let Some(cuda) = cuda_or_skip("commit_parity_small") else { return };
    // Production column count, small rows; a transpose with many blocks through a small cap is
    // covered by the conformance suite.
    parity::compare(&cuda, "cuda", (1 << 10, 316, 2), &CASES, None);
    parity::compare(&cuda, "cuda", (1 << 6, 3, 4), &CASES[..3], None);
    assert_eq!(cuda.memory().live, 0, "the commits left device memory allocated");
}

#[test]
#[ignore = "production shape: 2^21 x 316 at blowup 2, a 10.6 GB LDE; run with --include-ignored on a GPU"]
fn commit_parity_production() {
    let _shared = share_device();
    let Some(cuda) = cuda_or_skip("commit_parity_production") else { return };
    parity::compare(&cuda, "cuda", (1 << 21, 316, 2), &CASES[..4], Some(&mut CudaMemory::default()));
    assert_eq!(cuda.memory().live, 0, "the commits left device memory allocated");
}

/// A commit that runs out of device memory part way returns a typed error, frees everything it
/// allocated (live bytes back at the baseline) and returns no partial result: every allocation
/// of the commit is made to fail in turn.
#[test]
fn commit_out_of_memory_frees_everything() {
    let _shared = share_device();
    let Some(cuda) = cuda_or_skip("commit_out_of_memory_frees_everything") else { return };
    let shape = MatrixShape::new(1 << 8, 37).unwrap();
    let trace = commit::synthetic_trace(shape, 11);
    let params = CommitParams { split: Some(5), scratch_cap: DEFAULT_SCRATCH_CAP, ..Default::default() };
    let expected =
        commit::commit(&CpuBackend::new(), TraceInput::host(&trace, shape), &params, &NoProgress).unwrap().roots;
    let mut failures = 0;
    for k in 0..64 {
        let before = cuda.memory();
        cuda.tracker().fail_at(before.allocations + k);
        let result = commit::commit(&cuda, TraceInput::host(&trace, shape), &params, &NoProgress);
        cuda.tracker().disarm();
        match result {
            Ok(c) => {
                assert!(failures > 0, "the first allocation was made to fail and the commit still succeeded");
                assert_eq!(c.roots, expected, "the commit after {failures} injected failures");
                drop(c);
                assert_eq!(cuda.memory().live, before.live);
                return;
            }
            Err(e) => {
                failures += 1;
                assert!(e.to_string().contains("injected fault"), "allocation #{k}: {e}");
                cuda.synchronize().unwrap();
                assert_eq!(cuda.memory().live, before.live, "allocation #{k} failed: device memory leaked");
            }
        }
    }
    panic!("the commit still failed after 64 injected faults");
}

/// A real device out-of-memory (not an injected one) in the middle of a commit: with a ballast
/// allocation leaving room for the trace but not the LDE, and the admission budget out of the way,
/// the LDE's allocation fails in the driver. The commit returns `OutOfMemory`, every byte it
/// allocated is freed, and once the ballast is gone the same commit succeeds with the CPU's roots.
#[test]
fn real_out_of_memory_during_a_commit() {
    let _alone = DEVICE_MEMORY.write().unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some(cuda) = cuda_or_skip("real_out_of_memory_during_a_commit") else { return };
    let shape = MatrixShape::new(1 << 20, 64).unwrap();
    let trace = commit::synthetic_trace(shape, 12);
    let params = CommitParams { budget: Some(usize::MAX), ..Default::default() };
    // Load every kernel first, so that module and local memory are not part of the squeeze.
    let small = MatrixShape::new(64, 64).unwrap();
    commit::commit(&cuda, TraceInput::host(&trace[..small.len()], small), &params, &NoProgress).unwrap();
    cuda.trim_pool().unwrap();
    let (free, _) = cuda.mem_get_info().unwrap();
    let room = shape.bytes() + shape.bytes() / 2; // the trace and half of the 2x LDE
    let ballast = cuda.alloc((free - room) / 8).unwrap();
    let base = cuda.memory().live;
    let result = commit::commit(&cuda, TraceInput::host(&trace, shape), &params, &NoProgress);
    let err = result.err().expect("a commit whose LDE does not fit must fail");
    match &err {
        commit::ProverError::Backend(e) => assert!(
            matches!(e, backend_api::Error::OutOfMemory { requested, .. } if *requested >= 2 * shape.bytes()),
            "expected the LDE's OutOfMemory, got {e}"
        ),
        e => panic!("expected a backend error, got {e}"),
    }
    println!("real out-of-memory during a commit: {err}");
    cuda.synchronize().unwrap();
    assert_eq!(cuda.memory().live, base, "the failed commit left device memory allocated");
    drop(ballast);
    cuda.trim_pool().unwrap();
    let ok = commit::commit(&cuda, TraceInput::host(&trace, shape), &params, &NoProgress).unwrap();
    let expected = commit::commit(&CpuBackend::new(), TraceInput::host(&trace, shape), &params, &NoProgress).unwrap();
    assert_eq!(ok.roots, expected.roots);
}
