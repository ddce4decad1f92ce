//! `prover bench`: how fast a backend commits one shape here, one-shot and warm, against the
//! host-to-device copy of the same bytes measured in the same run.
//!
//! - **One-shot:** the first commit of the process (first kernel launches, first pool growth, host
//!   tables built), phases synchronized.
//! - **Warm:** the median of each phase over `runs` further commits of the same table in the same
//!   process, and the median total.
//! - **Device-resident:** the median total of `runs` commits of the same trace already on the
//!   device (copied from a device master before each clock starts): what the commit costs
//!   without the bus.
//! - **Floor:** where the backend has page-locked host memory (CUDA), the median of three
//!   page-locked host-to-device and device-to-host copies of the trace's bytes, and the ratios of
//!   the warm upload to it and of the warm commit to the copy plus the device-resident commit
//!   (below 1.0: part of the copy hides behind the device work).

use std::collections::BTreeMap;

use backend_api::{Backend, CopyRange, MatrixShape};
use serde::Serialize;

use crate::NoProgress;
use crate::Result;
use crate::TraceInput;
use crate::{CommitParams, commit};

/// The page-locked copies of the trace's bytes, the bus's floor for the upload.
#[derive(Clone, Debug, Serialize)]
pub struct TransferFloor {
    /// What was copied, e.g. `page-locked host <-> device`.
    pub what: String,
    /// Median seconds of the host-to-device copy of the trace's bytes.
    pub h2d_seconds: f64,
    /// Median seconds of the device-to-host copy of the same bytes.
    pub d2h_seconds: f64,
}

/// Seconds per phase and in total, for one commit or as medians over several.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PhaseSummary {
    /// Seconds per phase, by phase name.
    pub phases: BTreeMap<&'static str, f64>,
    /// From the start of the upload to the roots on the host.
    pub total_seconds: f64,
}

/// The phases a commit's upload is timed in: alone, or with the LDE it overlaps.
const UPLOAD_PHASES: [&str; 2] = ["upload", "upload+lde"];

/// What `prover bench` measured.
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    /// The backend's name.
    pub backend: String,
    /// The device's name.
    pub device: String,
    /// Trace rows.
    pub trace_rows: usize,
    /// Columns.
    pub cols: usize,
    /// Blowup factor.
    pub blowup: usize,
    /// Leaf hash.
    pub hash: String,
    /// Warm commits measured.
    pub runs: usize,
    /// Each tree's root, hex (the same for every commit of the run, checked).
    pub roots: Vec<String>,
    /// The first commit of the process.
    pub one_shot: PhaseSummary,
    /// Medians over the warm commits.
    pub warm_median: PhaseSummary,
    /// Median total seconds of `runs` commits of the same trace from device memory; `None` when
    /// the device had no room for a second copy of the trace beside the commit.
    pub device_resident_total_seconds: Option<f64>,
    /// The page-locked copy floor, where the backend has one.
    pub floor: Option<TransferFloor>,
    /// Warm median upload (or `upload+lde`, when the commit timed them as one phase) / floor
    /// host-to-device copy.
    pub upload_over_floor: Option<f64>,
    /// Warm median total / (floor host-to-device copy + device-resident median total): 1.0 means
    /// a commit from host memory costs the bus copy plus the commit from device memory, below 1.0
    /// that part of the copy hides behind the device work.
    pub total_over_floor_plus_device_commit: Option<f64>,
}

/// The median total of `runs` commits of `trace` from device memory: one master copy uploaded
/// off the clock, and before each commit (which consumes its trace) a fresh device copy of it,
/// synchronized before the clock starts. `Ok(None)` when the device runs out of memory for the
/// extra copies (the commit from host memory never needs them).
fn device_resident<B: Backend>(
    backend: &B,
    trace: &[u64],
    shape: MatrixShape,
    params: &CommitParams,
    runs: usize,
    roots: &[[u8; backend_api::DIGEST_BYTES]],
) -> Result<Option<f64>> {
    let run = || -> Result<f64> {
        let master = backend.upload(trace)?;
        let mut totals = Vec::with_capacity(runs);
        for i in 0..runs {
            let mut t = backend.alloc(trace.len())?;
            backend.batched_copy(&master, &mut t, &[CopyRange::new(0, 0, trace.len())])?;
            backend.synchronize()?;
            let c = commit(backend, TraceInput::device(t, shape), params, &NoProgress)?;
            if c.roots != roots {
                return Err(backend_api::Error::InvalidArgument(format!(
                    "device-resident commit {i} gave other roots than the commit from host memory"
                ))
                .into());
            }
            totals.push(c.timings.total_seconds);
        }
        Ok(median(totals))
    };
    match run() {
        Ok(t) => Ok(Some(t)),
        Err(crate::ProverError::Backend(backend_api::Error::OutOfMemory { .. })) => Ok(None),
        Err(e) => Err(e),
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Commits `trace` once (one-shot) and then `runs` times (warm) on `backend` with `params`
/// (phases synchronized), and relates the warm upload to `floor`.
///
/// # Errors
/// A commit's error; [`crate::ProverError::Usage`] when `runs` is 0; a backend that returns other
/// roots on a later commit of the same table is a [`crate::ProverError::Usage`]-free internal
/// failure reported as [`backend_api::Error::InvalidArgument`].
pub fn bench<B: Backend>(
    backend: &B,
    trace: &[u64],
    shape: MatrixShape,
    params: &CommitParams,
    runs: usize,
    floor: Option<TransferFloor>,
) -> Result<BenchReport> {
    if runs == 0 {
        return Err(crate::ProverError::Usage("--runs must be at least 1".into()));
    }
    let params = CommitParams { phase_timing: true, ..params.clone() };
    let summary = |t: &crate::PhaseTimings| PhaseSummary {
        phases: t.phases.iter().map(|(p, s)| (p.name(), *s)).collect(),
        total_seconds: t.total_seconds,
    };
    let first = commit(backend, TraceInput::host(trace, shape), &params, &NoProgress)?;
    let roots = first.roots.clone();
    let one_shot = summary(&first.timings);
    drop(first);
    let mut warm = Vec::with_capacity(runs);
    for i in 0..runs {
        let c = commit(backend, TraceInput::host(trace, shape), &params, &NoProgress)?;
        if c.roots != roots {
            return Err(backend_api::Error::InvalidArgument(format!(
                "warm commit {i} of the same table gave other roots than the first: the backend is not deterministic"
            ))
            .into());
        }
        warm.push(summary(&c.timings));
    }
    let mut phases = BTreeMap::new();
    for name in one_shot.phases.keys() {
        phases.insert(*name, median(warm.iter().filter_map(|w| w.phases.get(name).copied()).collect()));
    }
    let warm_median = PhaseSummary { phases, total_seconds: median(warm.iter().map(|w| w.total_seconds).collect()) };
    let device_resident_total_seconds = device_resident(backend, trace, shape, &params, runs, &roots)?;
    // A host trace committed without a snapshot is uploaded and extended in one phase
    // (`upload+lde`, which a backend may overlap): its ratio to the floor is then how close the
    // overlapped phase comes to the bare copy.
    let upload = UPLOAD_PHASES.iter().find_map(|p| warm_median.phases.get(p).copied());
    let upload_over_floor = floor.as_ref().zip(upload).map(|(f, u)| u / f.h2d_seconds);
    let total_over_floor_plus_device_commit =
        floor.as_ref().zip(device_resident_total_seconds).map(|(f, d)| warm_median.total_seconds / (f.h2d_seconds + d));
    let info = backend.info();
    Ok(BenchReport {
        backend: info.backend.to_string(),
        device: info.device,
        trace_rows: shape.rows(),
        cols: shape.cols(),
        blowup: params.blowup,
        hash: format!("{:?}", params.hash).to_lowercase(),
        runs,
        roots: roots.iter().map(|r| r.iter().map(|b| format!("{b:02x}")).collect()).collect(),
        one_shot,
        warm_median,
        device_resident_total_seconds,
        floor,
        upload_over_floor,
        total_over_floor_plus_device_commit,
    })
}

impl std::fmt::Display for BenchReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = |s: f64| s * 1e3;
        writeln!(f, "backend    {} ({})", self.backend, self.device)?;
        writeln!(f, "shape      {} x {}, blowup {}, {}", self.trace_rows, self.cols, self.blowup, self.hash)?;
        for r in &self.roots {
            writeln!(f, "root       {r}")?;
        }
        writeln!(f, "{:<12} {:>12} {:>16}", "phase (ms)", "one-shot", format!("warm median/{}", self.runs))?;
        for (name, s) in &self.one_shot.phases {
            let w = self.warm_median.phases.get(name).copied().unwrap_or(0.0);
            writeln!(f, "{name:<12} {:>12.2} {:>16.2}", ms(*s), ms(w))?;
        }
        writeln!(
            f,
            "{:<12} {:>12.2} {:>16.2}",
            "total",
            ms(self.one_shot.total_seconds),
            ms(self.warm_median.total_seconds)
        )?;
        match self.device_resident_total_seconds {
            Some(d) => writeln!(f, "{:<12} {:>12} {:>16.2}", "from device", "", ms(d))?,
            None => writeln!(f, "from device  skipped: no device memory for a second copy of the trace")?,
        }
        match &self.floor {
            Some(fl) => {
                let gb = (self.trace_rows * self.cols * 8) as f64 / 1e9;
                writeln!(
                    f,
                    "floor      {}: H2D {:.2} ms ({:.1} GB/s), D2H {:.2} ms ({:.1} GB/s)",
                    fl.what,
                    ms(fl.h2d_seconds),
                    gb / fl.h2d_seconds,
                    ms(fl.d2h_seconds),
                    gb / fl.d2h_seconds
                )?;
                if let Some(u) = self.upload_over_floor {
                    let upload =
                        UPLOAD_PHASES.into_iter().find(|p| self.warm_median.phases.contains_key(p)).unwrap_or("upload");
                    write!(f, "ratios     warm {upload} / floor H2D {u:.2}x")?;
                    if let Some(t) = self.total_over_floor_plus_device_commit {
                        write!(f, "; warm total / (floor H2D + commit from device) {t:.2}x")?;
                    }
                    writeln!(f)?;
                }
            }
            None => writeln!(f, "floor      none: this backend has no page-locked host copy to compare with")?,
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(vec![]), 0.0);
    }
}
