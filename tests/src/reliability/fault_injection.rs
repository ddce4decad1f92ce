//! Every allocation site of a whole commit fails in turn: each failure is out of memory, leaks
//! nothing, and leaves the backend healthy.

use backend_api::{Backend, Error, HashKind, LeafLayout};
use commit::{Admission, CommitParams, ProverError};

use super::table::{Table, commit_table, oracle, read_back};
use crate::{Context as _, Failure, Gen, Outcome, ensure, ensure_live};

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
