//! A [`DeviceSet`] of three logical devices on one backend gives, for every commit of a batch,
//! the same bytes as the same commit on the backend alone and as the CPU oracle.

use backend_api::{Backend, MatrixShape};
use commit::{Admission, DeviceSet, Job};

use super::concurrency::concurrency_tables;
use super::table::{Committed, commit_table, oracle, read_back};
use crate::{Context as _, Failure, Gen, Outcome, ensure};

/// Logical devices the check splits the backend into.
pub const LOGICAL_DEVICES: usize = 3;

/// Commits the eight [`concurrency_tables`] through a [`DeviceSet::logical`] set of
/// [`LOGICAL_DEVICES`] members on `backend` (each with a third of a budget that holds the largest
/// table three times over, so the budget never refuses and placement alone spreads the batch).
/// Checked:
/// - every job's roots, column-major LDE, snapshot and host copy equal both the CPU oracle's and
///   those of the same commit on `backend` alone (outside the set);
/// - placement is the documented one ([`DeviceSet::place`] on the modelled bytes), and every
///   member ran at least one job;
/// - every member's admission holds nothing afterwards.
///
/// # Errors
/// Any of the above violated.
pub fn device_set_over_logical_devices<B: Backend + 'static>(backend: &'static B) -> Outcome {
    let mut g = Gen::new("device_set_over_logical_devices");
    let tables = concurrency_tables(&mut g);
    let mut bytes = Vec::with_capacity(tables.len());
    for t in &tables {
        bytes.push(t.plan()?.model.total());
    }
    let largest = bytes.iter().copied().max().unwrap_or(0);
    let budget = largest * 3 * LOGICAL_DEVICES;
    let set = DeviceSet::logical(backend, "logical", LOGICAL_DEVICES, budget, |share| Ok(Admission::new(share)))
        .map_err(|e| Failure(format!("building the device set: {e}")))?;
    let expected_placement = set.place(&bytes).map_err(|e| Failure(format!("placement: {e}")))?;

    let mut jobs = Vec::with_capacity(tables.len());
    for t in &tables {
        let shape = MatrixShape::new(t.rows, t.cols).map_err(|e| Failure(format!("{t}: {e}")))?;
        jobs.push(Job { trace: &t.data, shape, params: &t.params });
    }
    let outcomes = set
        .run(&jobs, |_, b, c| read_back(b, c).map_err(commit::ProverError::from))
        .map_err(|e| Failure(format!("the batch was refused: {e}")))?;
    ensure!(outcomes.len() == tables.len(), "{} outcomes for {} jobs", outcomes.len(), tables.len());

    let mut ran = [0usize; LOGICAL_DEVICES];
    for (o, table) in outcomes.into_iter().zip(&tables) {
        let member = set.members()[o.member].label().to_owned();
        ensure!(
            o.member == expected_placement[o.job],
            "{table} ran on {member}, the placement put it on member {}",
            expected_placement[o.job]
        );
        ran[o.member] += 1;
        let got: Committed = o.result.map_err(|e| Failure(format!("{table} on {member}: {e}")))?;
        let alone = commit_table(backend, table, &Admission::new(usize::MAX))
            .map_err(|e| Failure(format!("{table} on the backend alone: {e}")))?;
        let alone = read_back(backend, alone).ctx(format_args!("reading back {table} on the backend alone"))?;
        got.ensure_eq(&alone, format_args!("{table} on {member} vs on the backend alone"))?;
        got.ensure_eq(&oracle(table)?, format_args!("{table} on {member} vs the CPU oracle"))?;
    }
    ensure!(ran.iter().all(|&n| n > 0), "every logical device must run a job: jobs per device {ran:?}");
    for m in set.members() {
        ensure!(m.admission().in_flight() == 0, "{}: {} B still admitted", m.label(), m.admission().in_flight());
    }
    Ok(())
}
