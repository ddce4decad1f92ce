//! A [`DeviceSet`]: one object over N devices that places a batch of independent commits.
//!
//! - **Members are (backend, admission) pairs.** A member is a backend instance and the
//!   [`Admission`] its commits go through. Members may be different physical devices (every CUDA
//!   device of a host, a list of them), or several *logical* devices of one backend, each with a
//!   share of its budget ([`DeviceSet::logical`]): that is how one GPU, or the CPU, stands in for
//!   several in tests.
//! - **Placement by the memory model.** Jobs are placed largest first (by their modelled bytes),
//!   each onto the member whose budget is the least taken (as a share) by the jobs placed on it so far, among
//!   those whose budget holds the job at all. A job that no member's budget holds is refused
//!   before anything runs, naming each member's budget. The placement is a pure function of the
//!   jobs and the budgets ([`DeviceSet::place`]), so a run can be predicted and reported.
//! - **One thread per member.** Each member runs its jobs in placement order; members run at
//!   once. A commit's admission still applies, so a member shared with other processes waits its
//!   turn there.
//! - **Same bytes everywhere.** A commit's result depends only on its table and parameters, never
//!   on the member that ran it; the reliability suite checks this across logical devices.
//! - **Whole commits, not parts.** A commit runs on one member. A table too large for every
//!   member is refused; two split trees are not (yet) spread over two devices.

use std::time::Instant;

use backend_api::{Backend, MatrixShape};

use crate::admission::Admission;
use crate::commit::{CommitParams, CommitPlan, Commitment, commit_admitted};
use crate::error::{ProverError, Result};
use crate::input::TraceInput;
use crate::progress::NoProgress;

/// One member of a [`DeviceSet`].
pub struct SetMember<'a, B: Backend> {
    label: String,
    backend: &'a B,
    admission: Admission,
}

impl<B: Backend> SetMember<'_, B> {
    /// The member's label, e.g. `cuda:0` or `cpu#1` (a logical device).
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The member's backend.
    pub fn backend(&self) -> &B {
        self.backend
    }

    /// The admission its commits go through.
    pub fn admission(&self) -> &Admission {
        &self.admission
    }
}

/// A set of devices that a batch of independent commits is spread over.
pub struct DeviceSet<'a, B: Backend> {
    members: Vec<SetMember<'a, B>>,
}

/// One commit of a batch: a host trace and its parameters.
#[derive(Clone, Copy)]
pub struct Job<'t> {
    /// Row-major trace, `shape.rows() * shape.cols()` elements.
    pub trace: &'t [u64],
    /// The trace shape.
    pub shape: MatrixShape,
    /// The commit parameters (`budget` is ignored: the member's admission decides).
    pub params: &'t CommitParams,
}

/// Where one job ran and what it gave.
#[derive(Debug)]
pub struct JobOutcome<T> {
    /// The job's index in the batch.
    pub job: usize,
    /// The index of the member that ran it.
    pub member: usize,
    /// Seconds from the member taking the job to the caller's `finish` returning (admission
    /// wait included).
    pub seconds: f64,
    /// What `finish` made of the commitment, or the commit's error.
    pub result: Result<T>,
}

impl<'a, B: Backend> Default for DeviceSet<'a, B> {
    fn default() -> Self {
        Self { members: Vec::new() }
    }
}

impl<'a, B: Backend> DeviceSet<'a, B> {
    /// An empty set; add members with [`DeviceSet::push`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a member: `backend`, whose commits go through `admission`, shown as `label`.
    pub fn push(&mut self, label: impl Into<String>, backend: &'a B, admission: Admission) {
        self.members.push(SetMember { label: label.into(), backend, admission });
    }

    /// `count` logical devices on one `backend`, labelled `{name}#0..`, each with its own
    /// admission from `admission(share)`, where `share = budget / count`.
    ///
    /// # Errors
    /// [`ProverError::Usage`] when `count` is zero; whatever `admission` returns.
    pub fn logical(
        backend: &'a B,
        name: &str,
        count: usize,
        budget: usize,
        admission: impl Fn(usize) -> Result<Admission>,
    ) -> Result<Self> {
        if count == 0 {
            return Err(ProverError::Usage("a device set needs at least one logical device per device".into()));
        }
        let mut set = Self::new();
        set.push_logical(backend, name, count, budget, admission)?;
        Ok(set)
    }

    /// Adds `count` logical devices on `backend`, as [`DeviceSet::logical`] makes them.
    ///
    /// # Errors
    /// As [`DeviceSet::logical`].
    pub fn push_logical(
        &mut self,
        backend: &'a B,
        name: &str,
        count: usize,
        budget: usize,
        admission: impl Fn(usize) -> Result<Admission>,
    ) -> Result<()> {
        if count == 0 {
            return Err(ProverError::Usage("a device set needs at least one logical device per device".into()));
        }
        for k in 0..count {
            let label = if count == 1 { name.to_owned() } else { format!("{name}#{k}") };
            self.push(label, backend, admission(budget / count)?);
        }
        Ok(())
    }

    /// The members, in order.
    pub fn members(&self) -> &[SetMember<'a, B>] {
        &self.members
    }

    /// How many members the set has.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether the set has no member.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The member each job goes to, given each job's modelled bytes: largest first, each onto
    /// the member whose budget is the least taken (as a share) by the jobs already placed on it
    /// (ties: the larger budget, then the lower index), among the members whose budget holds the
    /// job. Equal devices get equal shares of the work; a device with twice the budget, twice
    /// the share.
    ///
    /// # Errors
    /// [`ProverError::Usage`] for an empty set; [`ProverError::NoDeviceFits`], naming every
    /// member's budget, when a job fits none of them.
    pub fn place(&self, job_bytes: &[usize]) -> Result<Vec<usize>> {
        if self.members.is_empty() {
            return Err(ProverError::Usage("the device set has no device".into()));
        }
        let budgets: Vec<usize> = self.members.iter().map(|m| m.admission.budget()).collect();
        let mut order: Vec<usize> = (0..job_bytes.len()).collect();
        // Stable: equal sizes keep their batch order.
        order.sort_by_key(|&j| std::cmp::Reverse(job_bytes[j]));
        let mut load = vec![0usize; budgets.len()];
        let mut placed = vec![0usize; job_bytes.len()];
        for j in order {
            let bytes = job_bytes[j];
            // The least taken share load/budget, compared exactly: a/b < c/d <=> a*d < c*b.
            let better = |a: usize, b: usize| {
                let (la, lb) = (load[a] as u128 * budgets[b] as u128, load[b] as u128 * budgets[a] as u128);
                la < lb || (la == lb && budgets[a] > budgets[b])
            };
            let best =
                (0..budgets.len()).filter(|&m| budgets[m] >= bytes).fold(None, |best: Option<usize>, m| match best {
                    Some(b) if !better(m, b) => Some(b),
                    _ => Some(m),
                });
            let Some(m) = best else {
                let budgets = self.members.iter().map(|m| (m.label.clone(), m.admission.budget())).collect();
                return Err(ProverError::NoDeviceFits { job: j, needed: bytes, budgets });
            };
            load[m] = load[m].saturating_add(bytes);
            placed[j] = m;
        }
        Ok(placed)
    }

    /// Runs `jobs`: validates each (nothing runs if one is invalid or fits no member), places them
    /// ([`DeviceSet::place`]), then each member commits its jobs in order on its own thread, and
    /// `finish(job, backend, commitment)` turns each commitment into what the caller keeps (the
    /// roots, a download, ...) before it is dropped.
    ///
    /// # Errors
    /// A job's validation error ([`CommitPlan::new`], or a trace of the wrong length), or the
    /// placement's. A commit's own failure is its [`JobOutcome::result`]; outcomes come back in
    /// job order.
    pub fn run<T, F>(&self, jobs: &[Job<'_>], finish: F) -> Result<Vec<JobOutcome<T>>>
    where
        T: Send,
        F: Fn(usize, &B, Commitment<B>) -> Result<T> + Sync,
    {
        let mut bytes = Vec::with_capacity(jobs.len());
        for job in jobs {
            let plan = CommitPlan::new(job.shape.rows(), job.shape.cols(), job.params)?;
            plan.trace_shape().check_len("trace input", job.trace.len())?;
            bytes.push(plan.model.total());
        }
        let placed = self.place(&bytes)?;
        let finish = &finish;
        let mut outcomes: Vec<JobOutcome<T>> = std::thread::scope(|s| {
            let handles: Vec<_> = self
                .members
                .iter()
                .enumerate()
                .map(|(m, member)| {
                    let mine: Vec<usize> = (0..jobs.len()).filter(|&j| placed[j] == m).collect();
                    s.spawn(move || {
                        mine.into_iter()
                            .map(|j| {
                                let t0 = Instant::now();
                                let job = jobs[j];
                                let result = commit_admitted(
                                    member.backend,
                                    TraceInput::host(job.trace, job.shape),
                                    job.params,
                                    &member.admission,
                                    &NoProgress,
                                )
                                .and_then(|c| finish(j, member.backend, c));
                                JobOutcome { job: j, member: m, seconds: t0.elapsed().as_secs_f64(), result }
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles.into_iter().flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
        });
        outcomes.sort_by_key(|o| o.job);
        Ok(outcomes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use backend_cpu::CpuBackend;

    fn set_of<'a>(budgets: &[usize], cpu: &'a CpuBackend) -> DeviceSet<'a, CpuBackend> {
        let mut set = DeviceSet::new();
        for (i, &b) in budgets.iter().enumerate() {
            set.push(format!("cpu#{i}"), cpu, Admission::new(b));
        }
        set
    }

    #[test]
    fn placement_is_largest_first_onto_the_least_taken_budget() {
        let cpu = CpuBackend::new();
        // Equal budgets: largest first, each onto the least loaded member.
        let set = set_of(&[100, 100, 100], &cpu);
        assert_eq!(set.place(&[10, 50, 30, 40, 20]).unwrap(), vec![1, 0, 2, 1, 2]);
        // Jobs of one size spread round-robin.
        assert_eq!(set.place(&[5; 7]).unwrap(), vec![0, 1, 2, 0, 1, 2, 0]);
        // The larger budget takes the first job, and work in proportion to its budget.
        let set = set_of(&[100, 300], &cpu);
        assert_eq!(set.place(&[60, 60, 60, 60]).unwrap(), vec![1, 0, 1, 1]);
        // A job only one member can hold goes there even when it is busier.
        assert_eq!(set.place(&[50, 250]).unwrap(), vec![0, 1]);
        assert_eq!(set.place(&[]).unwrap(), Vec::<usize>::new());
    }

    #[test]
    fn a_job_no_member_holds_is_refused_naming_every_budget() {
        let cpu = CpuBackend::new();
        let set = set_of(&[1024, 2048], &cpu);
        let err = set.place(&[100, 4096]).unwrap_err();
        assert_eq!(err.exit_code(), crate::EXIT_REFUSED_OR_DEVICE);
        let msg = err.to_string();
        for part in ["job 1", "4096 B", "cpu#0 1024 B", "cpu#1 2048 B (2.00 KiB)", "one device"] {
            assert!(msg.contains(part), "{part:?} missing from: {msg}");
        }
        let empty = DeviceSet::<CpuBackend>::new();
        assert!(empty.place(&[1]).unwrap_err().to_string().contains("no device"));
        assert!(DeviceSet::logical(&cpu, "cpu", 0, 100, |b| Ok(Admission::new(b))).is_err());
    }

    #[test]
    fn logical_devices_share_the_budget() {
        let cpu = CpuBackend::new();
        let set = DeviceSet::logical(&cpu, "cpu", 3, 900, |b| Ok(Admission::new(b))).unwrap();
        let labels: Vec<_> = set.members().iter().map(|m| (m.label().to_owned(), m.admission().budget())).collect();
        assert_eq!(labels, [("cpu#0".into(), 300), ("cpu#1".into(), 300), ("cpu#2".into(), 300)]);
        let one = DeviceSet::logical(&cpu, "cpu", 1, 900, |b| Ok(Admission::new(b))).unwrap();
        assert_eq!(one.members()[0].label(), "cpu");
        assert_eq!(one.len(), 1);
    }
}
