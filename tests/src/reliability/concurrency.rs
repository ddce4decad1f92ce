//! Eight commits at once through one shared admission budget: admitted ones are correct, refused
//! ones were refused for the bytes in flight, and a hung commit is reported as a deadlock.

use std::sync::mpsc;
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use backend_api::{Backend, HashKind, LeafLayout};
use commit::{Admission, CommitParams, ProverError};

use super::table::{Committed, Table, commit_table, oracle, read_back};
use crate::{Failure, Gen, Outcome, ensure, ensure_live};

/// How long the concurrency check waits for its eight commits before it reports a deadlock.
pub const CONCURRENCY_TIMEOUT: Duration = Duration::from_secs(120);

/// The eight tables of [`concurrent_commits_under_admission`]: shapes `64..=256 x 2..=12`, every
/// hash and layout, blowups 2 and 4, split trees, snapshots, host copies and small scratch caps.
pub fn concurrency_tables(g: &mut Gen) -> Vec<Table> {
    let mut tables = Vec::with_capacity(8);
    for i in 0..8usize {
        let rows = [64, 128, 256][g.below(3)];
        let cols = 2 + g.below(11);
        let hash = HashKind::ALL[i % 3];
        // Poseidon2 defines the rows layout only.
        let layout =
            if hash.supports(LeafLayout::LambdaVmPairs) { LeafLayout::ALL[(i / 2) % 2] } else { LeafLayout::Rows };
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
/// - every refused commit got [`ProverError::Refused`] and nothing else, for a commit that would have fit
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
pub(super) fn concurrent_commits_within<B: Backend + 'static>(backend: &'static B, timeout: Duration) -> Outcome {
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
                    Ok(Err(ProverError::Refused(r))) => {
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
