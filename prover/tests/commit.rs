//! The library pipeline, checked against independent references (`conformance::reference`: naive LDE,
//! `sha3` / `blake3` leaves, recursive Merkle roots). Each check is written once, generic over the
//! backend, and instantiated per backend by `backend_tests!`: the CPU always; CUDA and wgpu with
//! their features, skipped visibly when no device is usable (REQUIRE_CUDA=1 / REQUIRE_WGPU=1 turn
//! the skip into a failure).

mod common;

use backend_api::{Backend, Error, HashKind, LeafLayout, MatrixShape, PendingDownload};
use common::{P, leaf_digests, merkle_root, naive_lde, transpose, values};
use prover::{Admission, CommitParams, NoProgress, Phase, ProverError, TraceInput, commit, commit_admitted};

/// Commits `trace` with a host copy and checks everything the commitment claims against the
/// references; returns the roots.
fn check_commit<B: Backend>(backend: &B, trace: &[u64], n: usize, m: usize, params: &CommitParams) -> Vec<[u8; 32]> {
    let shape = MatrixShape::new(n, m).unwrap();
    let params = CommitParams { host_copy: true, ..params.clone() };
    let c = commit(backend, TraceInput::host(trace, shape), &params, &NoProgress).unwrap();
    let big = n * params.blowup;
    assert_eq!(c.lde_shape, MatrixShape::new(big, m).unwrap());

    // The row-major host copy is the LDE; the returned buffer is its transpose.
    let row_major = c.host_copy.expect("host copy was asked for").wait().unwrap().to_vec();
    assert_eq!(row_major, naive_lde(trace, n, m, params.blowup, params.shift), "LDE, n={n} m={m} {params:?}");
    let col_major = backend.download_vec(&c.lde).unwrap();
    assert_eq!(col_major, transpose(&row_major, big, m), "column-major LDE");

    // Roots and whole node arrays' roots, from the host copy with the hash crates.
    let ranges = match params.split {
        Some(s) => vec![(0, s), (s, m)],
        None => vec![(0, m)],
    };
    assert_eq!(c.roots.len(), ranges.len());
    assert_eq!(c.trees.len(), ranges.len());
    for (i, &(c0, c1)) in ranges.iter().enumerate() {
        let l = leaf_digests(&row_major, m, params.hash, params.layout, c0..c1);
        assert_eq!(c.roots[i], merkle_root(&l, params.hash), "root of tree {i} over [{c0}, {c1})");
        let nodes = backend.download_vec(&c.trees[i]).unwrap();
        assert_eq!(backend_api::digests_from_words(&nodes[..4])[0], c.roots[i]);
        assert_eq!(c.tree_plans[i].spec.cols(), c0..c1);
    }

    match &c.snapshot {
        Some(s) => assert_eq!(backend.download_vec(s).unwrap(), transpose(trace, n, m), "snapshot"),
        None => assert!(!params.keep_trace_snapshot),
    }
    c.roots
}

#[test]
fn naive_lde_reference_is_the_identity_at_blowup_1_shift_1() {
    let t = values(8 * 3, 1);
    let canon: Vec<u64> = t.iter().map(|x| x % P).collect();
    assert_eq!(naive_lde(&t, 8, 3, 1, 1), canon);
}

fn lde_transpose_and_roots_match_references_for_every_hash_and_layout<B: Backend>(backend: &B) {
    // Small shapes: the naive LDE is O(n * N) per column. Includes n = 1, one column, and
    // non-canonical inputs (values() mixes in p, p + 1, u64::MAX).
    let shapes = [(1, 1, 2), (1, 3, 4), (2, 1, 1), (4, 3, 2), (8, 5, 4), (16, 7, 2), (32, 2, 8)];
    for (i, &(n, m, blowup)) in shapes.iter().enumerate() {
        let trace = values(n * m, 10 + i as u64);
        for hash in HashKind::ALL {
            for layout in LeafLayout::ALL.into_iter().filter(|&l| hash.supports(l)) {
                if layout == LeafLayout::LambdaVmPairs && n * blowup < 2 {
                    continue;
                }
                let params = CommitParams { blowup, hash, layout, shift: 7, ..CommitParams::default() };
                check_commit(backend, &trace, n, m, &params);
            }
        }
    }
}

fn split_gives_two_roots_and_a_snapshot_is_the_transposed_trace<B: Backend>(backend: &B) {
    let (n, m) = (16, 6);
    let trace = values(n * m, 3);
    for split in [1, 3, 5] {
        let params = CommitParams { split: Some(split), keep_trace_snapshot: true, ..CommitParams::default() };
        let roots = check_commit(backend, &trace, n, m, &params);
        assert_eq!(roots.len(), 2);
        assert_ne!(roots[0], roots[1]);
    }
    // A non-default shift and a tiny scratch cap (many runs) give the same column-major LDE.
    let params = CommitParams { shift: 3, scratch_cap: (m + 1) * 8 * 2, ..CommitParams::default() };
    check_commit(backend, &trace, n, m, &params);
}

fn device_input_gives_the_same_commitment_as_host_input<B: Backend>(backend: &B) {
    let shape = MatrixShape::new(32, 4).unwrap();
    let trace = values(shape.len(), 4);
    let params = CommitParams { keep_trace_snapshot: true, phase_timing: true, ..CommitParams::default() };
    let from_host = commit(backend, TraceInput::host(&trace, shape), &params, &NoProgress).unwrap();
    let buf = backend.upload(&trace).unwrap();
    let from_device = commit(backend, TraceInput::device(buf, shape), &params, &NoProgress).unwrap();
    assert_eq!(from_host.roots, from_device.roots);
    assert_eq!(backend.download_vec(&from_host.lde).unwrap(), backend.download_vec(&from_device.lde).unwrap());
    assert_eq!(backend.download_vec(from_device.snapshot.as_ref().unwrap()).unwrap(), transpose(&trace, 32, 4));
    // A device trace has nothing to upload: the LDE reads it where it is. A host trace kept as
    // the snapshot is uploaded into the snapshot's buffer first.
    use Phase::*;
    for (c, want) in [
        (&from_device, &[Lde, Snapshot, LeavesTranspose, Merkle, Roots][..]),
        (&from_host, &[Upload, Lde, Snapshot, LeavesTranspose, Merkle, Roots][..]),
    ] {
        let t = &c.timings;
        assert!(t.synchronized);
        let phases: Vec<Phase> = t.phases.iter().map(|p| p.0).collect();
        assert_eq!(phases, want);
        assert!(t.total_seconds >= t.phases.iter().map(|p| p.1).sum::<f64>() * 0.999);
    }
}

fn a_refused_commit_allocates_nothing_and_lists_every_term<B: Backend>(backend: &B) {
    let shape = MatrixShape::new(64, 8).unwrap();
    let trace = values(shape.len(), 5);
    let before = backend.memory();
    let params = CommitParams { budget: Some(1000), ..CommitParams::default() };
    let err = commit(backend, TraceInput::host(&trace, shape), &params, &NoProgress).err().expect("refused");
    assert_eq!(backend.memory(), before, "a refused commit touched the allocator");
    let msg = err.to_string();
    for term in ["LDE", "trace", "Merkle trees", "transpose scratch", "twiddles", "total", "1000 B"] {
        assert!(msg.contains(term), "{term:?} missing from:\n{msg}");
    }
    assert!(matches!(err, ProverError::Refused(_)));
    assert_eq!(err.exit_code(), prover::EXIT_REFUSED_OR_DEVICE);
}

fn invalid_commits_are_rejected_before_any_allocation<B: Backend>(backend: &B) {
    let trace = values(64, 6);
    let ok = CommitParams::default();
    let cases: Vec<(MatrixShape, usize, CommitParams, &str)> = vec![
        (MatrixShape::new(3, 4).unwrap(), 12, ok.clone(), "power of two, got 3"),
        (
            MatrixShape::new(4, 4).unwrap(),
            16,
            CommitParams { blowup: 3, ..ok.clone() },
            "blowup must be a power of two, got 3",
        ),
        (
            MatrixShape::new(4, 4).unwrap(),
            16,
            CommitParams { blowup: 1 << 31, ..ok.clone() },
            "exceeds the field's 2^32",
        ),
        (MatrixShape::new(4, 4).unwrap(), 16, CommitParams { split: Some(0), ..ok.clone() }, "outside 1..=3"),
        (MatrixShape::new(4, 4).unwrap(), 16, CommitParams { split: Some(4), ..ok.clone() }, "outside 1..=3"),
        (MatrixShape::new(4, 1).unwrap(), 4, CommitParams { split: Some(1), ..ok.clone() }, "at least 2 columns"),
        (MatrixShape::new(4, 4).unwrap(), 16, CommitParams { scratch_cap: 39, ..ok.clone() }, "scratch cap 39 B"),
        (
            MatrixShape::new(1, 4).unwrap(),
            4,
            CommitParams { blowup: 1, layout: LeafLayout::LambdaVmPairs, ..ok.clone() },
            "row count >= 2",
        ),
        (MatrixShape::new(4, 4).unwrap(), 16, CommitParams { shift: P, ..ok.clone() }, "non-zero"),
        (MatrixShape::new(4, 4).unwrap(), 15, ok.clone(), "expected 16 elements, got 15"),
    ];
    // An empty shape cannot reach `commit` (`MatrixShape::new` refuses it); the plan refuses it too.
    for (rows, cols, want) in [(0, 4, "got 0 x 4"), (4, 0, "got 4 x 0")] {
        let err = prover::CommitPlan::new(rows, cols, &ok).expect_err("an empty shape was planned");
        assert!(err.to_string().contains(want), "{rows} x {cols}: {err} lacks {want:?}");
    }
    for (shape, len, params, want) in cases {
        let before = backend.memory();
        let err = commit(backend, TraceInput::host(&trace[..len], shape), &params, &NoProgress)
            .err()
            .unwrap_or_else(|| panic!("{shape:?} {params:?} was accepted"));
        assert!(err.to_string().contains(want), "{shape:?}: {err} lacks {want:?}");
        assert_eq!(err.exit_code(), prover::EXIT_USAGE, "{err}");
        assert_eq!(backend.memory(), before, "{shape:?}: allocated before refusing");
    }
}

fn shared_admission_holds_the_resident_bytes_until_the_commitment_drops<B: Backend>(backend: &B) {
    let shape = MatrixShape::new(64, 4).unwrap();
    let trace = values(shape.len(), 7);
    let params = CommitParams::default();
    let plan = prover::CommitPlan::new(64, 4, &params).unwrap();
    // Room for one commit in flight at a time, not two.
    let admission = Admission::new(plan.model.total() + plan.model.lde / 2);
    let first = commit_admitted(backend, TraceInput::host(&trace, shape), &params, &admission, &NoProgress).unwrap();
    assert_eq!(admission.in_flight(), plan.model.lde + plan.model.trees);
    assert_eq!(first.ticket.bytes(), admission.in_flight());
    let err = commit_admitted(backend, TraceInput::host(&trace, shape), &params, &admission, &NoProgress)
        .err()
        .expect("the second commit does not fit beside the first");
    assert!(err.to_string().contains("already admitted"), "{err}");
    drop(first);
    assert_eq!(admission.in_flight(), 0);
    let second = commit_admitted(backend, TraceInput::host(&trace, shape), &params, &admission, &NoProgress).unwrap();
    assert_eq!(second.roots.len(), 1);
}

fn a_fault_at_every_allocation_frees_everything<B: Backend>(backend: &B) {
    let shape = MatrixShape::new(32, 6).unwrap();
    let trace = values(shape.len(), 8);
    let params = CommitParams { split: Some(2), keep_trace_snapshot: true, host_copy: true, ..CommitParams::default() };
    let base = backend.memory();
    let good = commit(backend, TraceInput::host(&trace, shape), &params, &NoProgress).unwrap();
    let allocations = backend.memory().allocations - base.allocations;
    let roots = good.roots.clone();
    drop(good);
    assert!(allocations >= 4, "upload, LDE, two trees at least; saw {allocations}");
    for k in 0..allocations {
        let live = backend.memory().live;
        backend.tracker().fail_at(backend.memory().allocations + k);
        let err = commit(backend, TraceInput::host(&trace, shape), &params, &NoProgress).err();
        backend.tracker().disarm();
        let err = err.unwrap_or_else(|| panic!("a fault at allocation {k} was swallowed"));
        assert!(matches!(err, ProverError::Backend(Error::InjectedFault { .. })), "{err}");
        assert_eq!(backend.memory().live, live, "bytes leaked after a fault at allocation {k}");
    }
    let again = commit(backend, TraceInput::host(&trace, shape), &params, &NoProgress).unwrap();
    assert_eq!(again.roots, roots);
}

fn the_peak_stays_within_the_model_and_the_trace_has_no_buffer_of_its_own<B: Backend>(backend: &B) {
    let (n, m) = (64, 32);
    let shape = MatrixShape::new(n, m).unwrap();
    let trace = values(shape.len(), 9);
    let trace_bytes = shape.len() * 8;
    for snapshot in [false, true] {
        for on_device in [false, true] {
            // A 2-row scratch cap keeps the scratch term small, so that a separate trace-sized
            // buffer beside the LDE would not fit in the model without the snapshot.
            let params =
                CommitParams { keep_trace_snapshot: snapshot, scratch_cap: (m + 1) * 8 * 2, ..Default::default() };
            let plan = prover::CommitPlan::new(n, m, &params).unwrap();
            let model = &plan.model;
            assert_eq!(model.trace, if snapshot { trace_bytes } else { 0 });
            assert!(trace_bytes > model.trees + model.scratch + model.twiddles, "{model:?}");
            // A device input is already live before the commit: the baseline includes it.
            let input = if on_device {
                TraceInput::device(backend.upload(&trace).unwrap(), shape)
            } else {
                TraceInput::host(&trace, shape)
            };
            let what = format!("snapshot {snapshot}, device input {on_device}");
            backend.synchronize().unwrap();
            let base = backend.memory().live;
            backend.tracker().reset_peak();
            let c = commit(backend, input, &params, &NoProgress).unwrap();
            backend.synchronize().unwrap();
            let peak = backend.memory().peak - base;
            assert!(peak <= model.total(), "{what}: peak {peak} B over the model's {} B: {model:?}", model.total());
            let consumed = if on_device { trace_bytes } else { 0 };
            let resident = model.lde + model.trees + model.trace;
            assert!(peak + consumed >= resident, "{what}: peak {peak} B below the resident buffers");
            assert_eq!(c.snapshot.is_some(), snapshot, "{what}");
            if let Some(s) = &c.snapshot {
                assert_eq!(backend.download_vec(s).unwrap(), transpose(&trace, n, m), "{what}: snapshot");
            }
            assert_eq!(c.ticket.bytes(), resident, "{what}: the ticket holds the resident buffers");
            // The device input is consumed: freed after the copy, or kept as the snapshot.
            assert_eq!(backend.memory().live + consumed - base, resident, "{what}: live bytes after the commit");
            drop(c);
        }
    }
}

/// Instantiates every generic check above for one backend. `$make` is a `Result<$ty, impl Display>`.
macro_rules! backend_tests {
    ($name:ident, $ty:ty, $require:literal, $make:expr) => {
        mod $name {
            /// The backend, or `None` after a visible `SKIPPED <backend>::<test>: <reason>` line
            /// (a failure under `$require=1`).
            fn make(test: &str) -> Option<$ty> {
                naive_reference::skip::or_skip($make, &format!("{}::{test}", stringify!($name)), $require)
            }

            backend_tests!(@each
                lde_transpose_and_roots_match_references_for_every_hash_and_layout,
                split_gives_two_roots_and_a_snapshot_is_the_transposed_trace,
                device_input_gives_the_same_commitment_as_host_input,
                a_refused_commit_allocates_nothing_and_lists_every_term,
                invalid_commits_are_rejected_before_any_allocation,
                shared_admission_holds_the_resident_bytes_until_the_commitment_drops,
                a_fault_at_every_allocation_frees_everything,
                the_peak_stays_within_the_model_and_the_trace_has_no_buffer_of_its_own
            );
        }
    };
    (@each $($test:ident),*) => {
        $(
            #[test]
            fn $test() {
                if let Some(backend) = make(stringify!($test)) {
                    super::$test(&backend);
                }
            }
        )*
    };
}

backend_tests!(cpu, backend_cpu::CpuBackend, "REQUIRE_CPU", Ok::<_, String>(backend_cpu::CpuBackend::new()));
#[cfg(feature = "cuda")]
backend_tests!(
    cuda,
    backend_cuda::CudaBackend,
    "REQUIRE_CUDA",
    backend_cuda::CudaOptions::from_env().and_then(|o| backend_cuda::CudaBackend::open(0, o))
);
#[cfg(feature = "wgpu")]
backend_tests!(
    wgpu,
    backend_wgpu::WgpuBackend,
    "REQUIRE_WGPU",
    backend_wgpu::WgpuBackend::new(backend_wgpu::WgpuOptions { allow_software: true, ..Default::default() })
);
