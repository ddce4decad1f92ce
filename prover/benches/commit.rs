//! Whole commits (`prover::commit`), generic over the backend, on every backend compiled in:
//! the pipeline's own timing lives with the pipeline, and no backend's bench needs `prover`.
//!
//! ```text
//! cargo bench -p prover --bench commit
//! BENCH_COMMIT_BACKENDS=cuda cargo bench -p prover --features cuda --bench commit
//! ```
//!
//! - **Shape.** `BENCH_COMMIT_LOG_ROWS` is log2 of the LDE's rows `N` (the trace has
//!   `N / BENCH_COMMIT_BLOWUP` rows), `BENCH_COMMIT_COLS` its columns. The defaults are the
//!   production shape, 2^22 x 316 at blowup 2 (a 10.6 GB LDE), on CUDA and wgpu, and
//!   2^17 x 64 at blowup 2 on the CPU; the variables override both.
//! - **Cases.** Keccak-256, BLAKE3, and Keccak-256 with the tree split at `cols / 2`, with the
//!   default [`CommitParams`] otherwise.
//! - **Clock.** Each commit starts from a device-resident trace (copied from a master on the
//!   device before the clock starts, then handed over as [`TraceInput::device`]) and ends when
//!   its roots are on the host and the backend has synchronized; the host clock around that is
//!   the same on every backend. Criterion reports its statistics; the `MEDIAN` lines give the
//!   median of `BENCH_COMMIT_REPS` (default 5) commits after one warm-up, each next to a
//!   batched copy of the LDE's bytes on the same backend timed the same way, and their ratio.
//! - **Phases.** With `BENCH_COMMIT_PHASES=1` each case also runs `BENCH_COMMIT_REPS` commits
//!   with [`CommitParams::phase_timing`] (the pipeline waits for the device after each phase) and
//!   prints each phase's median (`PHASES` lines): where a commit's time goes, at the price of one
//!   synchronisation per phase, so their sum exceeds the plain commit's time a little.
//! - **Backends.** `BENCH_COMMIT_BACKENDS` (comma-separated, default every backend compiled
//!   in) selects them; one that cannot be made prints `SKIPPED` and the others run.

use std::time::{Duration, Instant};

use backend_api::{Backend, CopyRange, HashKind, MatrixShape};
use criterion::{Criterion, Throughput};
use prover::{CommitParams, NoProgress, TraceInput, commit, synthetic_trace};

use naive_reference::env::env;

/// The LDE's `(log2 rows, cols, blowup)`: the environment's, else `default`.
fn shape(default: (usize, usize, usize)) -> (usize, usize, usize) {
    (
        env("BENCH_COMMIT_LOG_ROWS", default.0),
        env("BENCH_COMMIT_COLS", default.1),
        env("BENCH_COMMIT_BLOWUP", default.2),
    )
}

/// The median, min and max of `v`, in milliseconds.
fn stats(mut v: Vec<Duration>) -> (f64, f64, f64) {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    (ms(v[v.len() / 2]), ms(v[0]), ms(v[v.len() - 1]))
}

fn bench_commits<B: Backend>(c: &mut Criterion, backend: &B, (log_rows, cols, blowup): (usize, usize, usize)) {
    let name = backend.info().backend;
    let lde_shape = MatrixShape::new(1 << log_rows, cols).expect("bench shape");
    let trace_shape = MatrixShape::new(lde_shape.rows() / blowup, cols).expect("bench shape");
    let len = trace_shape.len();
    let master = backend.upload(&synthetic_trace(trace_shape, 4)).expect("upload the master trace");
    // A fresh device-resident trace per commit (the commit consumes it), made off the clock.
    let fresh = || {
        let mut trace = backend.alloc(len).expect("alloc a trace");
        backend.batched_copy(&master, &mut trace, &[CopyRange::new(0, 0, len)]).expect("copy the master trace");
        backend.synchronize().expect("synchronize");
        trace
    };
    let timed_commit = |params: &CommitParams| {
        let trace = fresh();
        let t0 = Instant::now();
        let c = commit(backend, TraceInput::device(trace, trace_shape), params, &NoProgress).expect("commit");
        backend.synchronize().expect("synchronize");
        let elapsed = t0.elapsed();
        drop(c);
        elapsed
    };
    // Each phase's seconds, from a commit that synchronizes after every phase.
    let phased_commit = |params: &CommitParams| {
        let trace = fresh();
        let params = CommitParams { phase_timing: true, ..params.clone() };
        let c = commit(backend, TraceInput::device(trace, trace_shape), &params, &NoProgress).expect("commit");
        c.timings.phases.iter().map(|&(p, s)| (p.name(), s)).collect::<Vec<_>>()
    };
    // The same-run baseline: a batched copy of the LDE's bytes.
    let timed_copy = || {
        let src = backend.alloc(lde_shape.len()).expect("alloc");
        let mut dst = backend.alloc(lde_shape.len()).expect("alloc");
        backend.synchronize().expect("synchronize");
        let t0 = Instant::now();
        backend.batched_copy(&src, &mut dst, &[CopyRange::new(0, 0, lde_shape.len())]).expect("copy");
        backend.synchronize().expect("synchronize");
        t0.elapsed()
    };

    let cases = [(HashKind::Keccak256, None), (HashKind::Blake3, None), (HashKind::Keccak256, Some(cols / 2))];
    let mut g = c.benchmark_group(format!("commit/{trace_shape}/blowup{blowup}"));
    g.throughput(Throughput::Bytes(lde_shape.bytes() as u64));
    g.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(5));
    let reps = env("BENCH_COMMIT_REPS", 5).max(1);
    for (hash, split) in cases.into_iter().filter(|c| c.1 != Some(0)) {
        let params = CommitParams { blowup, hash, split, ..Default::default() };
        let label = format!("{hash}{}", split.map_or(String::new(), |s| format!(" split {s}")));
        g.bench_function(format!("{name}/{label}"), |b| {
            b.iter_custom(|iters| (0..iters).map(|_| timed_commit(&params)).sum())
        });
        // Warm-up, then commits and copies alternately, so load on a shared machine hits both.
        timed_commit(&params);
        timed_copy();
        let (commits, copies): (Vec<Duration>, Vec<Duration>) =
            (0..reps).map(|_| (timed_commit(&params), timed_copy())).unzip();
        let (commit_ms, copy_ms) = (stats(commits), stats(copies));
        println!(
            "MEDIAN {name} commit {label:<22} {trace_shape} b{blowup}: {:.3} ms (min {:.3}, max {:.3}); copy of the \
             {:.2} GB LDE {:.3} ms; {:.2}x the copy ({reps} reps)",
            commit_ms.0,
            commit_ms.1,
            commit_ms.2,
            lde_shape.bytes() as f64 / 1e9,
            copy_ms.0,
            commit_ms.0 / copy_ms.0,
        );
        if env("BENCH_COMMIT_PHASES", 0) == 1 {
            phased_commit(&params);
            let runs: Vec<_> = (0..reps).map(|_| phased_commit(&params)).collect();
            let medians: Vec<String> = runs[0]
                .iter()
                .enumerate()
                .map(|(i, (name, _))| {
                    let (ms, _, _) = stats(runs.iter().map(|r| Duration::from_secs_f64(r[i].1)).collect());
                    format!("{name} {ms:.3}")
                })
                .collect();
            println!(
                "PHASES {name} commit {label:<22} {trace_shape} b{blowup} (ms, medians of {reps}): {}",
                medians.join(", ")
            );
        }
    }
    g.finish();
}

/// Whether `name` is among `BENCH_COMMIT_BACKENDS` (every backend when unset).
fn wanted(name: &str) -> bool {
    std::env::var("BENCH_COMMIT_BACKENDS").map_or(true, |list| list.split(',').any(|b| b.trim() == name))
}

fn skipped(name: &str, reason: impl std::fmt::Display) {
    eprintln!("SKIPPED commit bench on {name}: {reason}");
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    if wanted("cpu") {
        bench_commits(&mut c, &backend_cpu::CpuBackend::new(), shape((17, 64, 2)));
    }
    #[cfg(feature = "cuda")]
    if wanted("cuda") {
        match backend_cuda::CudaOptions::from_env().and_then(|o| backend_cuda::CudaBackend::open(0, o)) {
            Ok(b) => bench_commits(&mut c, &b, shape((22, 316, 2))),
            Err(e) => skipped("cuda", e),
        }
    }
    #[cfg(feature = "wgpu")]
    if wanted("wgpu") {
        match backend_wgpu::WgpuBackend::new(backend_wgpu::WgpuOptions::default()) {
            Ok(b) => bench_commits(&mut c, &b, shape((22, 316, 2))),
            Err(e) => skipped("wgpu", e),
        }
    }
    c.final_summary();
}
