//! The same commit gives the same bytes: across 100 repetitions and across rayon thread counts.

use backend_api::Backend;
use commit::{Admission, CommitParams};

use super::table::{Committed, Table, commit_table, oracle, read_back};
use crate::{Context as _, Failure, Gen, Outcome};

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
