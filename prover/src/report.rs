//! What the CLI prints: the commit report and the plan report, as text or JSON.

use std::collections::BTreeMap;
use std::fmt;

use backend_api::{Backend, DeviceInfo, MatrixShape, hex};
use commit::memory::{MemoryModel, human_bytes};
use serde::Serialize;

use crate::ProverError;
use crate::{CommitParams, CommitPlan, Commitment};
use crate::{DeviceSet, JobOutcome};

/// The memory model, term by term, in bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ModelReport {
    /// The LDE, `N * cols * 8`.
    pub lde: usize,
    /// The column-major trace snapshot, `n * cols * 8` when kept, else 0 (the trace lives in the
    /// LDE buffer's first `n` rows).
    pub trace: usize,
    /// Every tree's node array, `(2L - 1) * 32` each.
    pub merkle_trees: usize,
    /// The in-place transpose's scratch.
    pub transpose_scratch: usize,
    /// The LDE twiddle tables.
    pub twiddles: usize,
    /// The sum.
    pub total: usize,
}

impl From<&MemoryModel> for ModelReport {
    fn from(m: &MemoryModel) -> Self {
        Self {
            lde: m.lde,
            trace: m.trace,
            merkle_trees: m.trees,
            transpose_scratch: m.scratch,
            twiddles: m.twiddles,
            total: m.total(),
        }
    }
}

/// One tree of a commit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TreeReport {
    /// The column range `[start, end)` its leaves cover.
    pub cols: [usize; 2],
    /// Leaves hashed.
    pub leaves: usize,
    /// The root, lower-case hex.
    pub root: String,
}

/// The result of `prover commit`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CommitReport {
    /// The backend that ran (`cpu`, `cuda`, `wgpu`).
    pub backend: String,
    /// The device that ran, as its driver names it.
    pub device: String,
    /// Whether the device is a software adapter.
    pub software_adapter: bool,
    /// For `--backend auto`: why each faster backend was skipped.
    pub auto_skipped: Vec<String>,
    /// Where the trace came from.
    pub input: String,
    /// Trace rows `n`.
    pub trace_rows: usize,
    /// LDE rows `N = n * blowup`.
    pub lde_rows: usize,
    /// Columns.
    pub cols: usize,
    /// The blowup.
    pub blowup: usize,
    /// The coset shift.
    pub shift: u64,
    /// The hash name.
    pub hash: String,
    /// The leaf layout name.
    pub layout: String,
    /// The split column, if any.
    pub split: Option<usize>,
    /// One root per tree, lower-case hex.
    pub roots: Vec<String>,
    /// Each tree.
    pub trees: Vec<TreeReport>,
    /// Seconds per phase, by phase name.
    pub phase_seconds: BTreeMap<&'static str, f64>,
    /// Whether each phase was synchronized (the figures then measure device work).
    pub phase_timing_synchronized: bool,
    /// From the upload's start to the roots on the host.
    pub total_seconds: f64,
    /// Seconds to read or generate the trace on the host (not part of the commit).
    pub input_seconds: f64,
    /// With `--wait-for-memory`: seconds the commit waited for admission before the upload.
    pub admission_wait_seconds: Option<f64>,
    /// The modelled device bytes, term by term.
    pub modelled_device_bytes: ModelReport,
    /// The budget the commit was admitted against.
    pub budget_bytes: usize,
    /// The backend's measured allocation high-water mark during the commit.
    pub peak_device_bytes: usize,
    /// The most page-locked host memory the backend held from the commit's start to the end of
    /// the run (the trace's host buffer, the host copy, staging; `MemoryCounters::pinned_host_peak`),
    /// 0 for a backend without page-locked memory.
    pub peak_pinned_host_bytes: usize,
    /// Whether the column-major trace snapshot was kept.
    pub snapshot: bool,
    /// Where the column-major LDE was written, if anywhere.
    pub out: Option<String>,
}

impl CommitReport {
    /// Builds the report of `commitment`, made with `params` on a backend described by `info`.
    pub fn new<B: Backend>(
        info: &DeviceInfo,
        commitment: &Commitment<B>,
        params: &CommitParams,
        budget_bytes: usize,
        peak_device_bytes: usize,
    ) -> Self {
        let trees = commitment
            .tree_plans
            .iter()
            .zip(&commitment.roots)
            .map(|(t, r)| TreeReport {
                cols: [t.spec.cols().start, t.spec.cols().end],
                leaves: t.shape.leaves(),
                root: hex(r),
            })
            .collect();
        Self {
            backend: info.backend.to_string(),
            device: info.device.clone(),
            software_adapter: false,
            auto_skipped: Vec::new(),
            input: String::new(),
            trace_rows: commitment.lde_shape.rows() / params.blowup,
            lde_rows: commitment.lde_shape.rows(),
            cols: commitment.lde_shape.cols(),
            blowup: params.blowup,
            shift: params.shift,
            hash: params.hash.name().into(),
            layout: params.layout.name().into(),
            split: params.split,
            roots: commitment.roots.iter().map(|r| hex(r)).collect(),
            trees,
            phase_seconds: commitment.timings.phases.iter().map(|(p, s)| (p.name(), *s)).collect(),
            phase_timing_synchronized: commitment.timings.synchronized,
            total_seconds: commitment.timings.total_seconds,
            input_seconds: 0.0,
            admission_wait_seconds: None,
            modelled_device_bytes: (&commitment.model).into(),
            budget_bytes,
            peak_device_bytes,
            peak_pinned_host_bytes: 0,
            snapshot: commitment.snapshot.is_some(),
            out: None,
        }
    }
}

/// One member (device or logical device) of a batch.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BatchDeviceReport {
    /// The member's label, e.g. `cuda:0` or `cpu#1`.
    pub label: String,
    /// The device, as its driver names it.
    pub device: String,
    /// The member's admission budget.
    pub budget_bytes: usize,
    /// Commits placed on it.
    pub jobs: usize,
    /// Of those, commits that failed.
    pub failed: usize,
    /// Seconds it spent on its commits (admission waits included), end to end.
    pub busy_seconds: f64,
}

/// One commit of a batch.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BatchJobReport {
    /// The commit's index in the batch.
    pub job: usize,
    /// The member that ran it.
    pub device: String,
    /// Seconds from the member taking it to its roots on the host.
    pub seconds: f64,
    /// Seconds of that spent waiting for admission.
    pub admission_wait_seconds: Option<f64>,
    /// One root per tree, lower-case hex (empty when it failed).
    pub roots: Vec<String>,
    /// Why it failed, if it did.
    pub error: Option<String>,
}

/// The result of `prover commit --devices ... / --repeat N / --logical K`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BatchReport {
    /// The backend that ran (`cpu`, `cuda`, `wgpu`, a port).
    pub backend: String,
    /// For `--backend auto`: why each faster backend was skipped.
    pub auto_skipped: Vec<String>,
    /// Where the trace came from.
    pub input: String,
    /// Seconds to read or generate the trace once (not part of the batch's wall time).
    pub input_seconds: f64,
    /// Trace rows `n`.
    pub trace_rows: usize,
    /// LDE rows `N = n * blowup`.
    pub lde_rows: usize,
    /// Columns.
    pub cols: usize,
    /// The hash name.
    pub hash: String,
    /// The leaf layout name.
    pub layout: String,
    /// The modelled device bytes of one commit.
    pub modelled_device_bytes: usize,
    /// Commits in the batch.
    pub commits: usize,
    /// Commits that gave roots.
    pub succeeded: usize,
    /// From the first commit's start to the last one's end.
    pub wall_seconds: f64,
    /// The roots of the first commit that succeeded.
    pub roots: Vec<String>,
    /// Whether every commit that succeeded gave exactly those roots (one table, so it must).
    pub roots_identical: bool,
    /// Per member.
    pub devices: Vec<BatchDeviceReport>,
    /// Per commit, in batch order.
    pub jobs: Vec<BatchJobReport>,
}

impl BatchReport {
    /// The report of a batch of one table's commits run on `set` (`info` per member), and the
    /// first commit error, if any, for the exit code.
    pub fn new<B: Backend>(
        set: &DeviceSet<'_, B>,
        info: &[DeviceInfo],
        shape: MatrixShape,
        params: &CommitParams,
        modelled_device_bytes: usize,
        outcomes: Vec<JobOutcome<(Vec<[u8; 32]>, f64)>>,
        wall_seconds: f64,
    ) -> (Self, Option<ProverError>) {
        let mut devices: Vec<BatchDeviceReport> = set
            .members()
            .iter()
            .zip(info)
            .map(|(m, i)| BatchDeviceReport {
                label: m.label().to_owned(),
                device: i.device.clone(),
                budget_bytes: m.admission().budget(),
                jobs: 0,
                failed: 0,
                busy_seconds: 0.0,
            })
            .collect();
        let mut jobs = Vec::with_capacity(outcomes.len());
        let mut first_error = None;
        let mut roots: Option<Vec<String>> = None;
        let mut identical = true;
        for o in outcomes {
            let d = &mut devices[o.member];
            d.jobs += 1;
            d.busy_seconds += o.seconds;
            let (job_roots, wait, error) = match o.result {
                Ok((r, wait)) => (r.iter().map(|x| hex(x)).collect::<Vec<_>>(), Some(wait), None),
                Err(e) => {
                    d.failed += 1;
                    let text = e.to_string();
                    first_error.get_or_insert(e);
                    (Vec::new(), None, Some(text))
                }
            };
            if error.is_none() {
                match &roots {
                    None => roots = Some(job_roots.clone()),
                    Some(r) => identical &= *r == job_roots,
                }
            }
            jobs.push(BatchJobReport {
                job: o.job,
                device: d.label.clone(),
                seconds: o.seconds,
                admission_wait_seconds: wait,
                roots: job_roots,
                error,
            });
        }
        let succeeded = jobs.iter().filter(|j| j.error.is_none()).count();
        let report = Self {
            backend: info.first().map_or("", |i| i.backend).to_string(),
            auto_skipped: Vec::new(),
            input: String::new(),
            input_seconds: 0.0,
            trace_rows: shape.rows(),
            lde_rows: shape.rows() * params.blowup,
            cols: shape.cols(),
            hash: params.hash.name().into(),
            layout: params.layout.name().into(),
            modelled_device_bytes,
            commits: jobs.len(),
            succeeded,
            wall_seconds,
            roots: roots.unwrap_or_default(),
            roots_identical: identical,
            devices,
            jobs,
        };
        (report, first_error)
    }
}

impl fmt::Display for BatchReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "batch: {} commit(s) on {} device(s), backend {}", self.commits, self.devices.len(), self.backend)?;
        for s in &self.auto_skipped {
            writeln!(f, "  auto skipped {s}")?;
        }
        writeln!(f, "input: {} ({:.3} s, once)", self.input, self.input_seconds)?;
        writeln!(
            f,
            "each:  {} x {} trace -> {} x {} LDE, {}, layout {}; modelled {} B ({})",
            self.trace_rows,
            self.cols,
            self.lde_rows,
            self.cols,
            self.hash,
            self.layout,
            self.modelled_device_bytes,
            human_bytes(self.modelled_device_bytes)
        )?;
        writeln!(f, "devices:")?;
        for d in &self.devices {
            writeln!(
                f,
                "  {:<10} {} commit(s), {} failed, busy {:.3} s, budget {} ({})",
                d.label,
                d.jobs,
                d.failed,
                d.busy_seconds,
                human_bytes(d.budget_bytes),
                d.device
            )?;
        }
        writeln!(f, "commits:")?;
        for j in &self.jobs {
            match &j.error {
                None => writeln!(
                    f,
                    "  #{:<3} {:<10} {:>8.3} s (waited {:.3} s)  {}",
                    j.job,
                    j.device,
                    j.seconds,
                    j.admission_wait_seconds.unwrap_or(0.0),
                    j.roots.join(" ")
                )?,
                Some(e) => writeln!(f, "  #{:<3} {:<10} {:>8.3} s  FAILED: {e}", j.job, j.device, j.seconds)?,
            }
        }
        writeln!(f, "roots: {}", self.roots.join(" "))?;
        writeln!(
            f,
            "roots identical across every commit and device: {}",
            if self.roots_identical { "yes" } else { "NO" }
        )?;
        write!(f, "{}/{} succeeded; wall {:.3} s", self.succeeded, self.commits, self.wall_seconds)
    }
}

fn write_model(f: &mut fmt::Formatter<'_>, m: &ModelReport) -> fmt::Result {
    let terms = [
        ("LDE", m.lde),
        ("trace", m.trace),
        ("Merkle trees", m.merkle_trees),
        ("transpose scratch", m.transpose_scratch),
        ("twiddles", m.twiddles),
        ("total", m.total),
    ];
    for (name, bytes) in terms {
        writeln!(f, "  {name:<18} {bytes:>16} B  {:>10}", human_bytes(bytes))?;
    }
    Ok(())
}

impl fmt::Display for CommitReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let soft = if self.software_adapter { " (software adapter)" } else { "" };
        writeln!(f, "backend: {} on {}{soft}", self.backend, self.device)?;
        for s in &self.auto_skipped {
            writeln!(f, "  auto skipped {s}")?;
        }
        writeln!(f, "input:   {} ({:.3} s)", self.input, self.input_seconds)?;
        if let Some(w) = self.admission_wait_seconds {
            writeln!(f, "admission: waited {w:.3} s for device memory")?;
        }
        writeln!(
            f,
            "commit:  {} x {} trace, blowup {}, shift {} -> {} x {} LDE; {} leaves, layout {}",
            self.trace_rows, self.cols, self.blowup, self.shift, self.lde_rows, self.cols, self.hash, self.layout
        )?;
        for t in &self.trees {
            writeln!(f, "  root of columns [{}, {}) ({} leaves): {}", t.cols[0], t.cols[1], t.leaves, t.root)?;
        }
        let how = if self.phase_timing_synchronized { "synchronized after each phase" } else { "issue times" };
        writeln!(f, "phases ({how}):")?;
        let order = ["upload", "upload+lde", "lde", "snapshot", "host_copy", "leaves+transpose", "merkle", "roots"];
        for name in order {
            if let Some(s) = self.phase_seconds.get(name) {
                writeln!(f, "  {name:<16} {s:>9.4} s")?;
            }
        }
        writeln!(f, "  {:<16} {:>9.4} s", "total", self.total_seconds)?;
        // Outside the commit's total: the host copy's page-locked block made before the upload,
        // and the wait for the copy after the roots.
        for (name, when) in [("host_copy_alloc", "before the commit"), ("host_copy_wait", "after the roots")] {
            if let Some(s) = self.phase_seconds.get(name) {
                writeln!(f, "  {name} {s:.4} s ({when}, not in the total)")?;
            }
        }
        writeln!(f, "modelled device memory (budget {} B, {}):", self.budget_bytes, human_bytes(self.budget_bytes))?;
        write_model(f, &self.modelled_device_bytes)?;
        writeln!(
            f,
            "measured peak device allocation: {} B ({})",
            self.peak_device_bytes,
            human_bytes(self.peak_device_bytes)
        )?;
        if self.peak_pinned_host_bytes > 0 {
            writeln!(
                f,
                "page-locked host memory, peak: {} B ({})",
                self.peak_pinned_host_bytes,
                human_bytes(self.peak_pinned_host_bytes)
            )?;
        }
        if self.snapshot {
            writeln!(f, "trace snapshot: kept on the device, column-major")?;
        }
        if let Some(out) = &self.out {
            writeln!(f, "column-major LDE written to {out}")?;
        }
        Ok(())
    }
}

/// The result of `prover plan`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PlanReport {
    /// Trace rows `n`.
    pub trace_rows: usize,
    /// LDE rows `N`.
    pub lde_rows: usize,
    /// Columns.
    pub cols: usize,
    /// The blowup.
    pub blowup: usize,
    /// The leaf layout.
    pub layout: String,
    /// The split column, if any.
    pub split: Option<usize>,
    /// The transpose scratch cap, in bytes.
    pub scratch_cap: usize,
    /// Whether the column-major trace snapshot is kept (`--snapshot`): only then does the model
    /// count a trace-sized buffer.
    pub snapshot: bool,
    /// The device memory given, in bytes.
    pub memory_bytes: usize,
    /// The budget compared with, in bytes.
    pub budget_bytes: usize,
    /// `"80% of memory"` or `"--budget"`.
    pub budget_source: String,
    /// The modelled device bytes, term by term.
    pub modelled_device_bytes: ModelReport,
    /// Whether the total fits the budget.
    pub fits: bool,
}

impl PlanReport {
    /// The report of `plan` against `budget_bytes` of `memory_bytes`.
    pub fn new(
        plan: &CommitPlan,
        params: &CommitParams,
        memory_bytes: usize,
        budget_bytes: usize,
        budget_source: &str,
    ) -> Self {
        Self {
            trace_rows: plan.trace_shape().rows(),
            lde_rows: plan.lde_shape().rows(),
            cols: plan.trace_shape().cols(),
            blowup: params.blowup,
            layout: params.layout.name().into(),
            split: params.split,
            scratch_cap: params.scratch_cap,
            snapshot: params.keep_trace_snapshot,
            memory_bytes,
            budget_bytes,
            budget_source: budget_source.into(),
            modelled_device_bytes: (&plan.model).into(),
            fits: plan.model.total() <= budget_bytes,
        }
    }
}

impl fmt::Display for PlanReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let split = match self.split {
            Some(s) => format!("two trees split at column {s}"),
            None => "one tree".into(),
        };
        let trace = if self.snapshot {
            "a column-major trace snapshot kept beside the LDE"
        } else {
            "the trace in the LDE buffer's first rows"
        };
        writeln!(
            f,
            "plan: {} x {} trace, blowup {} -> {} x {} LDE, layout {}, {split}, scratch cap {} B, {trace}",
            self.trace_rows, self.cols, self.blowup, self.lde_rows, self.cols, self.layout, self.scratch_cap
        )?;
        writeln!(f, "modelled device memory:")?;
        write_model(f, &self.modelled_device_bytes)?;
        writeln!(
            f,
            "budget: {} B ({}), {}; memory {} B ({})",
            self.budget_bytes,
            human_bytes(self.budget_bytes),
            self.budget_source,
            self.memory_bytes,
            human_bytes(self.memory_bytes)
        )?;
        let total = self.modelled_device_bytes.total;
        if self.fits {
            write!(
                f,
                "FITS: needs {} of the {} budget, {} to spare",
                human_bytes(total),
                human_bytes(self.budget_bytes),
                human_bytes(self.budget_bytes - total)
            )
        } else {
            write!(
                f,
                "DOES NOT FIT: needs {} but the budget is {}, {} short",
                human_bytes(total),
                human_bytes(self.budget_bytes),
                human_bytes(total - self.budget_bytes)
            )
        }
    }
}
