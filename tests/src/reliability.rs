//! Reliability checks: a commit is either correct or refused, every time — under concurrency, under
//! allocation failures, across repetitions and thread counts, and for hostile copy batches.
//!
//! - **Whole commits, not kernels.** These checks drive [`prover::commit_admitted`], the pipeline
//!   users run, on the backend under test; the kernel-level checks are the rest of this crate.
//! - **The CPU backend is the oracle.** Every expected result is the [`backend_cpu::CpuBackend`]
//!   commit of the same table on a fresh instance, and that oracle is itself checked against the
//!   naive [`reference`](mod@crate::reference) (LDE by naive DFT, leaves through the `sha3` / `blake3` crates, recursive
//!   Merkle roots) before it is trusted. A GPU backend never calls the CPU backend; only this test
//!   code does.
//! - **One macro line per backend.** [`reliability_suite!`](crate::reliability_suite) mirrors
//!   [`conformance_suite!`](crate::conformance_suite): one `#[test]` per check, skips printed as
//!   `SKIPPED <backend>::<check>: <reason>`, and a `REQUIRE_*` variable that turns a skip into a
//!   failure.
//! - **`'static` backends.** The concurrency check runs commits on plain threads so that a
//!   deadlock is reported as a failure after [`CONCURRENCY_TIMEOUT`] instead of hanging the test
//!   run; those threads need the backend for `'static`, which the macro's `OnceLock` provides.
//!   A port driving a check by hand can `Box::leak` its backend.
//! - **Sizes.** Tables are small (at most 256 x 12, blowup 4) so the naive references stay fast
//!   and the whole CPU run stays well under a minute on two cores; the shapes still cover split
//!   trees, snapshots, host copies, both hashes and layouts, and scratch caps small enough to
//!   force many copy batches.

use std::fmt;
use std::sync::mpsc;
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use backend_api::{Backend, CopyRange, Error, HashKind, LeafLayout, MatrixShape};
use backend_cpu::CpuBackend;
use prover::{Admission, CommitParams, CommitPlan, Commitment, NoProgress, ProverError, TraceInput, commit_admitted};

use crate::{Context as _, Failure, Gen, Outcome, ensure, ensure_live, ensure_words_eq, reference};

/// How long the concurrency check waits for its eight commits before it reports a deadlock.
pub const CONCURRENCY_TIMEOUT: Duration = Duration::from_secs(120);

/// A reliability check: like [`crate::Check`], but the backend lives for the whole process.
pub type ReliabilityCheck<B> = fn(&'static B) -> Outcome;

/// A trace and the commit parameters to commit it with.
#[derive(Clone, Debug)]
pub struct Table {
    /// A short description for failure messages.
    pub name: String,
    /// Trace rows (a power of two).
    pub rows: usize,
    /// Trace columns.
    pub cols: usize,
    /// Row-major trace, `rows * cols` elements (non-canonical values included).
    pub data: Vec<u64>,
    /// How to commit it.
    pub params: CommitParams,
}

impl Table {
    /// A seeded table of `rows x cols` from `g`.
    pub fn new(g: &mut Gen, name: impl Into<String>, rows: usize, cols: usize, params: CommitParams) -> Self {
        Self { name: name.into(), rows, cols, data: g.matrix(rows * cols), params }
    }

    fn shape(&self) -> MatrixShape {
        MatrixShape { rows: self.rows, cols: self.cols }
    }

    /// The commit's modelled memory (what admission compares with the budget).
    ///
    /// # Errors
    /// A table the pipeline refuses to validate.
    pub fn plan(&self) -> Result<CommitPlan, Failure> {
        CommitPlan::new(self.rows, self.cols, &self.params)
            .map_err(|e| Failure(format!("{}: the commit plan was refused: {e}", self.name)))
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = &self.params;
        write!(
            f,
            "{} ({} x {}, blowup {}, {} {}, split {:?}, snapshot {}, scratch cap {} B)",
            self.name, self.rows, self.cols, p.blowup, p.hash, p.layout, p.split, p.keep_trace_snapshot, p.scratch_cap
        )
    }
}

/// What a commit produced, on the host: everything that must be bit-identical across backends,
/// runs and configurations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Committed {
    /// One root per tree.
    pub roots: Vec<[u8; 32]>,
    /// The column-major LDE.
    pub lde: Vec<u64>,
    /// The column-major trace snapshot, when asked for.
    pub snapshot: Option<Vec<u64>>,
    /// The queued row-major LDE download, when asked for.
    pub host_copy: Option<Vec<u64>>,
}

impl Committed {
    /// A 32-byte fingerprint of everything: the roots, then the column-major LDE's little-endian
    /// bytes, then the snapshot's and the host copy's (blake3).
    pub fn fingerprint(&self) -> [u8; 32] {
        let mut h = blake3::Hasher::new();
        for r in &self.roots {
            h.update(r);
        }
        for part in [Some(&self.lde), self.snapshot.as_ref(), self.host_copy.as_ref()].into_iter().flatten() {
            h.update(&(part.len() as u64).to_le_bytes());
            for x in part {
                h.update(&x.to_le_bytes());
            }
        }
        *h.finalize().as_bytes()
    }

    /// Names the first part that differs from `expected`.
    ///
    /// # Errors
    /// A [`Failure`] naming `what` and the first differing part.
    pub fn ensure_eq(&self, expected: &Committed, what: impl fmt::Display) -> Outcome {
        ensure!(
            self.roots == expected.roots,
            "{what}: roots {:?} differ from the expected {:?}",
            hexes(&self.roots),
            hexes(&expected.roots)
        );
        ensure_words_eq(format_args!("{what}: column-major LDE"), &expected.lde, &self.lde)?;
        match (&expected.snapshot, &self.snapshot) {
            (Some(e), Some(a)) => ensure_words_eq(format_args!("{what}: snapshot"), e, a)?,
            (None, None) => {}
            (e, a) => {
                return Err(Failure(format!("{what}: snapshot present {} vs expected {}", a.is_some(), e.is_some())));
            }
        }
        match (&expected.host_copy, &self.host_copy) {
            (Some(e), Some(a)) => ensure_words_eq(format_args!("{what}: host copy"), e, a)?,
            (None, None) => {}
            (e, a) => {
                return Err(Failure(format!("{what}: host copy present {} vs expected {}", a.is_some(), e.is_some())));
            }
        }
        Ok(())
    }
}

fn hexes(roots: &[[u8; 32]]) -> Vec<String> {
    roots.iter().map(|r| backend_api::hex(r)).collect()
}

/// Commits `table` on `backend` through `admission`.
///
/// # Errors
/// The pipeline's error, untouched.
pub fn commit_table<B: Backend>(
    backend: &B,
    table: &Table,
    admission: &Admission,
) -> Result<Commitment<B>, ProverError> {
    commit_admitted(backend, TraceInput::host(&table.data, table.shape()), &table.params, admission, &NoProgress)
}

/// Downloads what a commitment holds (waiting for its queued host copy).
///
/// # Errors
/// A device error from a download.
pub fn read_back<B: Backend>(backend: &B, c: Commitment<B>) -> Result<Committed, Error> {
    use backend_api::PendingDownload as _;
    let lde = backend.download_vec(&c.lde)?;
    let snapshot = c.snapshot.as_ref().map(|s| backend.download_vec(s)).transpose()?;
    let host_copy = c.host_copy.map(|d| d.wait()).transpose()?;
    Ok(Committed { roots: c.roots, lde, snapshot, host_copy })
}

/// The CPU backend's commit of `table`, checked against the naive references: the oracle every
/// other result is compared with.
///
/// # Errors
/// A CPU commit that fails or disagrees with the references (a bug in the CPU backend or the
/// pipeline, reported as such).
pub fn oracle(table: &Table) -> Result<Committed, Failure> {
    let cpu = CpuBackend::new();
    let c = commit_table(&cpu, table, &Admission::new(usize::MAX))
        .map_err(|e| Failure(format!("oracle: the CPU commit of {table} failed: {e}")))?;
    let got = read_back(&cpu, c).ctx(format_args!("oracle: reading back the CPU commit of {table}"))?;
    let p = &table.params;
    let big = table.rows * p.blowup;
    let lde_rows = reference::coset_lde(&table.data, table.rows, table.cols, p.blowup, p.shift);
    let ranges = match p.split {
        Some(s) => vec![(0, s), (s, table.cols)],
        None => vec![(0, table.cols)],
    };
    let roots: Vec<[u8; 32]> = ranges
        .into_iter()
        .map(|(c0, c1)| {
            reference::merkle_root(&reference::leaf_digests(&lde_rows, table.cols, p.hash, p.layout, c0..c1), p.hash)
        })
        .collect();
    let expected = Committed {
        roots,
        lde: reference::transpose(&lde_rows, big, table.cols),
        snapshot: p.keep_trace_snapshot.then(|| reference::transpose(&table.data, table.rows, table.cols)),
        host_copy: p.host_copy.then(|| lde_rows.clone()),
    };
    got.ensure_eq(&expected, format_args!("oracle: the CPU commit of {table} vs the naive references"))?;
    Ok(got)
}

/// The eight tables of [`concurrent_commits_under_admission`]: shapes `64..=256 x 2..=12`, both
/// hashes and layouts, blowups 2 and 4, split trees, snapshots, host copies and small scratch caps.
pub fn concurrency_tables(g: &mut Gen) -> Vec<Table> {
    let mut tables = Vec::with_capacity(8);
    for i in 0..8usize {
        let rows = [64, 128, 256][g.below(3)];
        let cols = 2 + g.below(11);
        let hash = HashKind::ALL[i % 2];
        let layout = LeafLayout::ALL[(i / 2) % 2];
        let params = CommitParams {
            blowup: [2, 4][g.below(2)],
            shift: [7, 3, g.u64() | 1][g.below(3)],
            hash,
            layout,
            split: (i % 3 == 1).then(|| 1 + g.below(cols - 1)),
            keep_trace_snapshot: i % 4 == 3,
            host_copy: i % 4 == 2,
            // Every other table transposes through 2..=5 rows of scratch: many small batches.
            scratch_cap: if i % 2 == 0 { (cols + 1) * 8 * (2 + g.below(4)) } else { backend_api::DEFAULT_SCRATCH_CAP },
            ..CommitParams::default()
        };
        tables.push(Table::new(g, format!("table {i}"), rows, cols, params));
    }
    tables
}

/// What one thread of the concurrency check saw.
enum Attempt {
    Admitted { committed: Committed, ticket_bytes: usize },
    Refused { model_total: usize, budget: usize, in_flight: usize },
}

/// Eight threads commit eight different tables ([`concurrency_tables`]) on one backend at once,
/// through one shared [`Admission`] whose budget is at least the largest single commit but below
/// what all eight keep resident together.
///
/// Each thread holds its commitment (and so its admission ticket) until all eight have tried, so
/// some commits must be refused for lack of budget *while others are in flight*. Checked:
/// - every admitted commit's roots, column-major LDE, snapshot and host copy equal the CPU oracle's
///   for its table;
/// - every refused commit got [`Error::Refused`] and nothing else, for a commit that would have fit
///   the budget alone (so the refusal counted the bytes in flight), with the in-flight bytes it
///   reported above zero;
/// - at least one commit was admitted and at least one refused;
/// - the admitted bytes (sampled as each commit returns) never exceed the budget, and return to 0
///   when every commitment is dropped;
/// - all eight finish within [`CONCURRENCY_TIMEOUT`] (otherwise: a deadlock, reported with the
///   threads still running);
/// - device memory returns to where it was.
///
/// # Errors
/// Any of the above violated.
pub fn concurrent_commits_under_admission<B: Backend + 'static>(backend: &'static B) -> Outcome {
    concurrent_commits_within(backend, CONCURRENCY_TIMEOUT)
}

/// [`concurrent_commits_under_admission`] with its deadlock timeout as a parameter.
fn concurrent_commits_within<B: Backend + 'static>(backend: &'static B, timeout: Duration) -> Outcome {
    let mut g = Gen::new("concurrent_commits_under_admission");
    let tables = concurrency_tables(&mut g);
    let mut totals = Vec::with_capacity(tables.len());
    let mut resident = 0usize;
    for t in &tables {
        let m = t.plan()?.model;
        totals.push(m.total());
        resident += m.lde + m.trees + if t.params.keep_trace_snapshot { m.trace } else { 0 };
    }
    let largest = *totals.iter().max().expect("eight tables");
    // Any budget in [largest, resident) forces a refusal if all eight were to be admitted: the last
    // one admitted would need the other seven's resident bytes plus its whole model.
    ensure!(
        largest < resident,
        "the tables are too uneven to force a refusal: largest {largest} B, resident {resident} B"
    );
    let budget = largest + (resident - largest) / 2;
    let oracles: Vec<Committed> = tables.iter().map(oracle).collect::<Result<_, _>>()?;

    let admission = Admission::new(budget);
    let live_before = backend.memory().live;
    let barrier = Arc::new(Barrier::new(tables.len()));
    let peak_in_flight = Arc::new(Mutex::new(0usize));
    let (tx, rx) = mpsc::channel::<(usize, Result<Attempt, String>)>();
    for (i, table) in tables.iter().cloned().enumerate() {
        let (tx, admission, barrier, peak) =
            (tx.clone(), admission.clone(), Arc::clone(&barrier), Arc::clone(&peak_in_flight));
        std::thread::Builder::new()
            .name(format!("reliability-commit-{i}"))
            .spawn(move || {
                let caught = |what: &str, p: Box<dyn std::any::Any + Send>| {
                    format!("{table}: thread {i} panicked {what}: {}", panic_text(&p))
                };
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    commit_table(backend, &table, &admission)
                }));
                {
                    let mut p = peak.lock().unwrap_or_else(|e| e.into_inner());
                    *p = (*p).max(admission.in_flight());
                }
                // Hold the commitment until every thread has tried (a panicking commit still
                // arrives here, so the others are not left waiting).
                barrier.wait();
                let out = match result {
                    Err(p) => Err(caught("in the commit", p)),
                    Ok(Ok(c)) => std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        let ticket_bytes = c.ticket.bytes();
                        read_back(backend, c)
                            .map(|committed| Attempt::Admitted { committed, ticket_bytes })
                            .map_err(|e| format!("{table}: reading back: {e}"))
                    }))
                    .unwrap_or_else(|p| Err(caught("reading back", p))),
                    Ok(Err(ProverError::Backend(Error::Refused(r)))) => {
                        Ok(Attempt::Refused { model_total: r.model.total(), budget: r.budget, in_flight: r.in_flight })
                    }
                    Ok(Err(e)) => Err(format!("{table}: expected success or the admission refusal, got: {e}")),
                };
                // The receiver may be gone after a timeout; nothing to report to then.
                let _ = tx.send((i, out));
            })
            .map_err(|e| Failure(format!("spawning commit thread {i}: {e}")))?;
    }
    drop(tx);

    let deadline = Instant::now() + timeout;
    let mut attempts: Vec<Option<Result<Attempt, String>>> = (0..tables.len()).map(|_| None).collect();
    for _ in 0..tables.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((i, a)) => attempts[i] = Some(a),
            Err(_) => {
                let stuck: Vec<usize> = (0..tables.len()).filter(|&i| attempts[i].is_none()).collect();
                return Err(Failure(format!(
                    "deadlock: commit threads {stuck:?} had not finished after {timeout:?} \
                     ({} B admitted and still in flight, budget {budget} B)",
                    admission.in_flight()
                )));
            }
        }
    }

    let (mut admitted, mut refused) = (0, 0);
    for (i, a) in attempts.into_iter().enumerate() {
        let table = &tables[i];
        match a.expect("every slot was filled").map_err(Failure)? {
            Attempt::Admitted { committed, ticket_bytes } => {
                committed.ensure_eq(&oracles[i], format_args!("concurrent commit of {table} vs the CPU oracle"))?;
                ensure!(
                    ticket_bytes <= totals[i],
                    "{table}: ticket of {ticket_bytes} B above its model of {} B",
                    totals[i]
                );
                admitted += 1;
            }
            Attempt::Refused { model_total, budget: b, in_flight } => {
                ensure!(
                    b == budget && model_total == totals[i],
                    "{table}: the refusal reports budget {b} B and model {model_total} B, expected {budget} B and {} B",
                    totals[i]
                );
                ensure!(
                    model_total <= budget && in_flight > 0,
                    "{table}: refused with {in_flight} B in flight for a model of {model_total} B under a budget of {budget} B: admission must refuse only for the bytes in flight here"
                );
                ensure!(
                    in_flight + model_total > budget,
                    "{table}: refused although {in_flight} B + {model_total} B fit the budget of {budget} B"
                );
                refused += 1;
            }
        }
    }
    let peak = *peak_in_flight.lock().unwrap_or_else(|e| e.into_inner());
    println!("concurrency: {admitted} admitted, {refused} refused; at most {peak} B admitted of a {budget} B budget");
    ensure!(peak <= budget, "admitted bytes reached {peak} B, above the budget of {budget} B");
    ensure!(
        admitted >= 1 && refused >= 1,
        "expected some commits admitted and some refused, got {admitted} admitted and {refused} refused (budget {budget} B, models {totals:?})"
    );
    ensure!(
        admission.in_flight() == 0,
        "{} B still admitted after every commitment was dropped",
        admission.in_flight()
    );
    ensure_live(backend, live_before, "after the concurrent commits")
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
}

/// The tables fault injection fails at every allocation of: a plain commit, and one with split
/// trees, a snapshot, a queued host copy, blake3 pairs and a 3-row scratch cap (so the pipeline
/// takes every optional path).
pub fn fault_tables(g: &mut Gen) -> Vec<Table> {
    vec![
        Table::new(g, "plain", 64, 5, CommitParams::default()),
        Table::new(
            g,
            "every option",
            32,
            7,
            CommitParams {
                blowup: 4,
                hash: HashKind::Blake3,
                layout: LeafLayout::LambdaVmPairs,
                split: Some(3),
                keep_trace_snapshot: true,
                host_copy: true,
                scratch_cap: (7 + 1) * 8 * 3,
                ..CommitParams::default()
            },
        ),
    ]
}

/// Fails every allocation site of a whole commit in turn.
///
/// For each table ([`fault_tables`]): one successful commit counts its allocations `A` (through
/// `backend.memory().allocations`); then for `k` in `0..A` the tracker is armed to fail allocation
/// `start + k` and the commit is run again. Each must return an out-of-memory error (the injected
/// fault, at that very index), return no result, leave live device bytes at their baseline and the
/// admission's in-flight bytes at 0. A last run with nothing armed must succeed with the oracle's
/// bytes (the backend is still healthy after `A` failures).
///
/// # Errors
/// A commit that succeeds with a fault armed, fails with another error, or leaks.
pub fn commit_fault_injection<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("commit_fault_injection");
    for table in fault_tables(&mut g) {
        let expected = oracle(&table)?;
        let admission = Admission::new(usize::MAX);
        let baseline = backend.memory().live;
        let start = backend.memory().allocations;
        let c = commit_table(backend, &table, &admission).map_err(|e| Failure(format!("{table}: {e}")))?;
        let sites = backend.memory().allocations - start;
        read_back(backend, c).ctx(format_args!("{table}: read back"))?.ensure_eq(&expected, &table)?;
        ensure!(sites > 0, "{table}: a commit made no tracked allocation");
        ensure_live(backend, baseline, format_args!("{table}: after a successful commit was dropped"))?;
        for k in 0..sites {
            let armed = backend.memory().allocations + k;
            backend.tracker().fail_at(armed);
            let result = commit_table(backend, &table, &admission);
            backend.tracker().disarm();
            let what = format!("{table} with allocation {k} of {sites} failing");
            match result {
                Ok(_) => return Err(Failure(format!("{what}: the commit returned a result"))),
                Err(ProverError::Backend(e)) if e.is_out_of_memory() => {
                    if let Error::InjectedFault { index, .. } = e {
                        ensure!(index == armed, "{what}: the fault fired at allocation #{index}, armed #{armed}");
                    }
                }
                Err(e) => return Err(Failure(format!("{what}: expected out of memory, got: {e}"))),
            }
            ensure_live(backend, baseline, &what)?;
            ensure!(admission.in_flight() == 0, "{what}: {} B still admitted", admission.in_flight());
        }
        let c = commit_table(backend, &table, &admission).map_err(|e| Failure(format!("{table} after faults: {e}")))?;
        read_back(backend, c)
            .ctx(format_args!("{table} after faults: read back"))?
            .ensure_eq(&expected, format_args!("{table} after {sites} injected faults"))?;
        ensure_live(backend, baseline, format_args!("{table}: after the last commit was dropped"))?;
        println!("fault injection: {table}: each of {sites} allocation sites failed in turn");
    }
    Ok(())
}

/// Commits one small table 100 times: every result's fingerprint (roots, column-major LDE,
/// snapshot, host copy) is identical, and equal to the CPU oracle's.
///
/// # Errors
/// A run whose bytes differ.
pub fn commit_repeated_100<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("commit_repeated_100");
    let table = Table::new(
        &mut g,
        "repeated",
        64,
        6,
        CommitParams {
            split: Some(2),
            keep_trace_snapshot: true,
            host_copy: true,
            scratch_cap: (6 + 1) * 8 * 4,
            ..CommitParams::default()
        },
    );
    let expected = oracle(&table)?;
    let fingerprint = expected.fingerprint();
    let admission = Admission::new(usize::MAX);
    for run in 0..100 {
        let c = commit_table(backend, &table, &admission).map_err(|e| Failure(format!("{table}, run {run}: {e}")))?;
        let got = read_back(backend, c).ctx(format_args!("{table}, run {run}: read back"))?;
        if got.fingerprint() != fingerprint {
            got.ensure_eq(&expected, format_args!("{table}, run {run} of 100"))?;
            return Err(Failure(format!(
                "{table}, run {run}: fingerprint differs with equal parts (a bug in the check)"
            )));
        }
    }
    Ok(())
}

/// Commits one table inside rayon pools of 1, 2 and 8 threads: identical bytes each time, equal to
/// the oracle. For the CPU backend this is the thread count of every kernel; for a device backend
/// it is the host side only, and must not matter either.
///
/// # Errors
/// A thread count whose bytes differ, or a pool that cannot be built.
pub fn commit_rayon_thread_counts<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("commit_rayon_thread_counts");
    // Big enough that the CPU backend splits every kernel across threads (4096-row LDE), small
    // enough that the naive oracle check stays about a second.
    let table = Table::new(
        &mut g,
        "thread counts",
        1024,
        4,
        CommitParams { blowup: 4, split: Some(1), scratch_cap: (4 + 1) * 8 * 64, ..CommitParams::default() },
    );
    let expected = oracle(&table)?;
    for threads in [1, 2, 8] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .map_err(|e| Failure(format!("building a rayon pool of {threads} threads: {e}")))?;
        let got = pool.install(|| -> Result<Committed, Failure> {
            let c = commit_table(backend, &table, &Admission::new(usize::MAX))
                .map_err(|e| Failure(format!("{table} on {threads} threads: {e}")))?;
            read_back(backend, c).ctx(format_args!("{table} on {threads} threads: read back"))
        })?;
        got.ensure_eq(&expected, format_args!("{table} on {threads} rayon threads"))?;
    }
    Ok(())
}

/// Random copy batches on the backend: independent ones run and equal element-wise copies; the
/// same batch with one overlap injected (a destination inside another copy's destination, or
/// within one buffer inside a source, or a copy overlapping itself) is refused with
/// [`Error::OverlappingCopies`], the destination keeps every byte, and no memory is held.
///
/// 200 batches per target, buffers of `1..=300` elements: small enough that overlaps are easy to
/// place anywhere, large enough for multi-element copies in every segment.
///
/// # Errors
/// A wrong copy, an accepted overlap, another error, or a changed byte.
pub fn batched_copy_overlaps_refused<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("batched_copy_overlaps_refused");
    let mut refused = 0;
    for round in 0..400 {
        let within = round % 2 == 1;
        let dst_len = 1 + g.below(300);
        let src_len = if within { dst_len } else { 1 + g.below(300) };
        let src_host = g.matrix(src_len);
        let dst_host = g.matrix(dst_len);
        let mut copies = crate::copy::random_batch(&mut g, src_len, dst_len, within);
        let src = backend.upload(&src_host).ctx("upload src")?;
        let mut dst = backend.upload(&dst_host).ctx("upload dst")?;
        let baseline = backend.memory().live;
        let run = |dst: &mut B::Buffer, copies: &[CopyRange]| {
            if within { backend.batched_copy_within(dst, copies) } else { backend.batched_copy(&src, dst, copies) }
        };
        // The independent batch runs.
        let what = format!("round {round}, within {within}, {src_len} -> {dst_len}, {copies:?}");
        run(&mut dst, &copies).ctx(&what)?;
        let mut expected = dst_host.clone();
        reference::apply_copies(if within { &dst_host } else { &src_host }, &mut expected, &copies);
        let after = backend.download_vec(&dst).ctx("download")?;
        ensure_words_eq(&what, &expected, &after)?;
        // The same batch plus one overlap is refused, and nothing moves.
        let Some(bad) = inject_overlap(&mut g, &copies, src_len, dst_len, within) else { continue };
        let at = g.below(copies.len() + 1);
        copies.insert(at, bad);
        let what =
            format!("round {round}, within {within}, {src_len} -> {dst_len}, overlap {bad:?} at {at}: {copies:?}");
        match run(&mut dst, &copies) {
            Err(Error::OverlappingCopies { .. }) => {}
            Ok(()) => return Err(Failure(format!("{what}: accepted"))),
            Err(e) => return Err(Failure(format!("{what}: expected OverlappingCopies, got {e}"))),
        }
        ensure_words_eq(
            format_args!("{what}: destination after the refusal"),
            &after,
            &backend.download_vec(&dst).ctx("download")?,
        )?;
        ensure_live(backend, baseline, &what)?;
        refused += 1;
    }
    // Only a batch of empty copies in a buffer of 1 or 2 elements has nothing to overlap.
    ensure!(refused >= 350, "only {refused} of 400 batches had an overlap injected (a bug in the check)");
    Ok(())
}

/// A copy that overlaps the batch, in bounds, or `None` when the batch has nothing to overlap and
/// the buffer is too short for a self-overlapping copy.
fn inject_overlap(
    g: &mut Gen,
    copies: &[CopyRange],
    src_len: usize,
    dst_len: usize,
    within: bool,
) -> Option<CopyRange> {
    let victims: Vec<CopyRange> = copies.iter().copied().filter(|c| c.len > 0).collect();
    let kind = if victims.is_empty() { 2 } else { g.below(if within { 3 } else { 1 }) };
    match kind {
        // A destination starting inside a victim's destination (kind 0) or source (kind 1).
        0 | 1 => {
            let v = victims[g.below(victims.len())];
            let dst = if kind == 0 { v.dst } else { v.src } + g.below(v.len);
            let len = 1 + g.below((dst_len - dst).min(src_len).min(16));
            Some(CopyRange::new(g.below(src_len - len + 1), dst, len))
        }
        // A copy whose destination overlaps its own source (within one buffer only).
        _ if within && dst_len >= 3 => {
            let len = 2 + g.below((dst_len - 1).min(16) - 1);
            let shift = 1 + g.below(len - 1);
            if len + shift > dst_len {
                return None;
            }
            let src = g.below(dst_len - len - shift + 1);
            Some(CopyRange::new(src, src + shift, len))
        }
        _ => None,
    }
}

/// The CUDA backend's launch configurations give bit-identical commits, equal to the CPU
/// backend's: every [`backend_cuda::TransposeRoute`] (with the default NTT), and every combination
/// of the NTT knobs — stages fused per pass 1, 2, 4 and the default; radix 32 and 16; 8 and 4
/// columns per tile; lazy and canonical reduction — (with the default route). The knobs act on
/// different kernels (transpose vs LDE), so the two groups are varied separately.
///
/// The table, 4096 x 16 at blowup 4 (a 2^14-row LDE) with an 8-row scratch cap, is large enough
/// for the NTT to span several 2^11-row tiles and for every route to run thousands of copies; its
/// expected bytes come from the CPU backend (itself checked against the naive references by the
/// conformance suite and by [`oracle`] on smaller tables), since a naive LDE this size would take
/// minutes.
///
/// Afterwards every knob is reset to what the constructor reads from the environment.
///
/// # Errors
/// A configuration whose bytes differ.
#[cfg(feature = "cuda")]
pub fn cuda_launch_configurations(backend: &backend_cuda::CudaBackend) -> Outcome {
    use backend_cuda::{CudaBackend, TransposeRoute};
    let mut g = Gen::new("cuda_launch_configurations");
    let table = Table::new(
        &mut g,
        "launch configurations",
        4096,
        16,
        CommitParams {
            blowup: 4,
            split: Some(5),
            keep_trace_snapshot: true,
            scratch_cap: 17 * 8 * 8,
            ..CommitParams::default()
        },
    );
    let cpu = CpuBackend::new();
    let c = commit_table(&cpu, &table, &Admission::new(usize::MAX)).map_err(|e| Failure(format!("CPU: {e}")))?;
    let expected = read_back(&cpu, c).ctx("CPU: read back")?;
    let env = |name: &str, default: u32| std::env::var(name).ok().and_then(|s| s.parse().ok()).unwrap_or(default);
    let reset = |b: &CudaBackend| {
        b.set_transpose_route(
            std::env::var("CUDA_TRANSPOSE_ROUTE")
                .ok()
                .and_then(|s| TransposeRoute::parse(&s).ok())
                .unwrap_or(TransposeRoute::Kernel),
        );
        b.set_ntt_stages(env("CUDA_NTT_STAGES", 0));
        b.set_ntt_radix(env("CUDA_NTT_RADIX", 32));
        b.set_ntt_cols(env("CUDA_NTT_COLS", 8));
        b.set_ntt_lazy(std::env::var("CUDA_NTT_LAZY").map_or(true, |v| v != "0"));
    };
    let run = |what: String| -> Outcome {
        let c =
            commit_table(backend, &table, &Admission::new(usize::MAX)).map_err(|e| Failure(format!("{what}: {e}")))?;
        read_back(backend, c).ctx(&what)?.ensure_eq(&expected, &what)
    };
    let result = (|| -> Outcome {
        for route in TransposeRoute::ALL {
            reset(backend);
            backend.set_transpose_route(route);
            run(format!("{table}, transpose route {}", route.name()))?;
        }
        for stages in [1u32, 2, 4, 0] {
            for radix in [32u32, 16] {
                for cols in [8u32, 4] {
                    for lazy in [true, false] {
                        reset(backend);
                        backend.set_transpose_route(TransposeRoute::Kernel);
                        backend.set_ntt_stages(stages);
                        backend.set_ntt_radix(radix);
                        backend.set_ntt_cols(cols);
                        backend.set_ntt_lazy(lazy);
                        run(format!(
                            "{table}, NTT with {stages} stages per pass, radix {radix}, {cols} columns per tile, lazy {lazy}"
                        ))?;
                    }
                }
            }
        }
        Ok(())
    })();
    reset(backend);
    result
}

/// One reliability check at a time in a process: fault injection arms the shared tracker, and the
/// concurrency check reads the shared memory counters.
static SERIAL: Mutex<()> = Mutex::new(());

/// Runs one check on `backend`, printing the device, and checks that live memory returns to what it
/// was before the check.
///
/// # Errors
/// The check's own failure, or a [`Failure`] for memory left allocated.
pub fn run_reliability_outcome<B: Backend>(backend: &'static B, name: &str, check: ReliabilityCheck<B>) -> Outcome {
    let _serial = SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let info = backend.info();
    println!(
        "reliability {name}: backend {} on {} ({} B total, {} B free)",
        info.backend, info.device, info.total_memory, info.free_memory
    );
    let baseline = backend.memory().live;
    let start = Instant::now();
    check(backend).map_err(|f| Failure(format!("{name} on {} ({}): {f}", info.backend, info.device)))?;
    println!("reliability {name}: passed in {:.2} s", start.elapsed().as_secs_f64());
    ensure_live(backend, baseline, format_args!("{name} on {} ({})", info.backend, info.device))
}

/// The body of every test [`reliability_suite!`](crate::reliability_suite) generates: skips
/// visibly (or fails, when `require_env` is `1`) if the backend could not be made, otherwise runs
/// the check and panics on failure.
///
/// # Panics
/// When the check fails, or when the backend could not be made and `require_env` is `1`.
pub fn run_reliability_check<B: Backend>(
    backend: Result<&'static B, &str>,
    backend_name: &str,
    name: &str,
    require_env: &str,
    check: ReliabilityCheck<B>,
) {
    let required = std::env::var(require_env).as_deref() == Ok("1");
    crate::run_or_skip(backend, backend_name, name, require_env, required, |b| run_reliability_outcome(b, name, check));
}

/// Generates one `#[test]` per reliability check for a backend type.
///
/// ```ignore
/// conformance::reliability_suite!(backend_cpu::CpuBackend, || Ok(backend_cpu::CpuBackend::new()), "REQUIRE_CPU");
/// ```
///
/// The arguments are those of [`conformance_suite!`](crate::conformance_suite). It also defines
/// `__reliability_backend()` at the call site (`Result<&'static $ty, &'static str>`), so an
/// instantiation can add backend-specific checks with [`run_reliability_check`].
#[macro_export]
macro_rules! reliability_suite {
    ($ty:ty, $make:expr, $require_env:literal) => {
        $crate::__backend_once!(__reliability_backend, $ty, $make);

        $crate::__reliability_tests! { $ty, $require_env;
            concurrent_commits_under_admission,
            commit_fault_injection,
            commit_repeated_100,
            commit_rayon_thread_counts,
            batched_copy_overlaps_refused,
        }
    };
}

/// Expands the reliability checks into tests; not for direct use.
#[doc(hidden)]
#[macro_export]
macro_rules! __reliability_tests {
    ($ty:ty, $require_env:literal; $($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                $crate::reliability::run_reliability_check::<$ty>(
                    __reliability_backend(),
                    stringify!($ty),
                    stringify!($name),
                    $require_env,
                    $crate::reliability::$name::<$ty> as $crate::reliability::ReliabilityCheck<$ty>,
                );
            }
        )*
    };
}

#[cfg(test)]
mod tests {
    //! The reliability checks on the suite's own host backend: it passes them all, and broken
    //! variants fail the check meant to catch them (so no check is vacuous).

    use std::sync::atomic::{AtomicUsize, Ordering};

    use backend_api::{AllocTracker, DeviceBuffer as _, DeviceInfo, LdeParams, LeafSpec, Result, TreeShape};

    use super::*;
    use crate::selftest::{Bug, HostBackend, HostBuffer};

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

    impl Backend for Faulty {
        type Buffer = HostBuffer;
        type Download = <HostBackend as Backend>::Download;
        fn info(&self) -> DeviceInfo {
            self.inner.info()
        }
        fn tracker(&self) -> &AllocTracker {
            self.inner.tracker()
        }
        fn alloc(&self, len: usize) -> Result<HostBuffer> {
            self.inner.alloc(len)
        }
        fn upload(&self, host: &[u64]) -> Result<HostBuffer> {
            self.inner.upload(host)
        }
        fn download(&self, buf: &HostBuffer, offset: usize, out: &mut [u64]) -> Result<()> {
            self.inner.download(buf, offset, out)
        }
        fn queue_download(&self, buf: &HostBuffer) -> Result<Self::Download> {
            self.inner.queue_download(buf)
        }
        fn synchronize(&self) -> Result<()> {
            self.inner.synchronize()
        }
        fn transpose_in_place(&self, buf: &mut HostBuffer, shape: MatrixShape, cap: usize) -> Result<()> {
            self.inner.transpose_in_place(buf, shape, cap)
        }
        fn batched_copy(&self, src: &HostBuffer, dst: &mut HostBuffer, copies: &[CopyRange]) -> Result<()> {
            self.inner.batched_copy(src, dst, copies)
        }
        fn batched_copy_within(&self, buf: &mut HostBuffer, copies: &[CopyRange]) -> Result<()> {
            self.inner.batched_copy_within(buf, copies)
        }
        fn hash_leaves_into(
            &self,
            m: &HostBuffer,
            shape: MatrixShape,
            spec: &LeafSpec,
            out: &mut HostBuffer,
            at: usize,
        ) -> Result<()> {
            self.inner.hash_leaves_into(m, shape, spec, out, at)
        }
        fn merkle_tree_in_place(&self, nodes: &mut HostBuffer, tree: TreeShape, hash: HashKind) -> Result<()> {
            self.inner.merkle_tree_in_place(nodes, tree, hash)
        }
        fn coset_lde(&self, trace: &HostBuffer, params: &LdeParams) -> Result<HostBuffer> {
            let call = self.ldes.fetch_add(1, Ordering::SeqCst) + 1;
            let corrupt = match self.fault {
                Fault::None => false,
                Fault::WhenOthersResident => self.tracker().counters().live > trace.len() * 8,
                Fault::Every50th => call.is_multiple_of(50),
                Fault::OneRayonThread => rayon::current_thread_index().is_some() && rayon::current_num_threads() == 1,
                Fault::HangOnThird if call == 3 => loop {
                    std::thread::park();
                },
                Fault::HangOnThird => false,
                Fault::PanicOnThird if call == 3 => panic!("deliberate panic in the third LDE"),
                Fault::PanicOnThird => false,
            };
            let mut out = self.inner.coset_lde(trace, params)?;
            if corrupt {
                self.inner.batched_copy_within(&mut out, &[CopyRange::new(0, 1, 1)])?;
            }
            Ok(out)
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
        let cases: [(&str, &'static Faulty, ReliabilityCheck<Faulty>, &str); 6] = [
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
            (
                "copies without validation",
                leak(HostBackend::new(Bug::NoCopyValidation), Fault::None),
                batched_copy_overlaps_refused::<Faulty>,
                "accepted",
            ),
        ];
        for (what, backend, check, expected) in cases {
            match run(backend, what, check) {
                Ok(()) => panic!("the check passed a backend that is {what}"),
                Err(f) => assert!(f.0.contains(expected), "{what}: the failure does not say {expected:?}: {f}"),
            }
        }
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
            Err(ProverError::Backend(Error::Refused(r))) => assert_eq!((r.budget, r.in_flight), (total - 1, 0)),
            Err(e) => panic!("expected a refusal, got {e}"),
            Ok(_) => panic!("a commit over budget was admitted"),
        }
        assert_eq!(b.memory(), before, "a refused commit touched the allocator");
    }
}
