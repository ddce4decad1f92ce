//! `prover commit --jobs`: a batch of commits placed over a set of devices.

use super::*;

/// `prover commit --devices ... / --repeat N / --logical K`: the table committed `N` times as one
/// batch over a [`DeviceSet`], then the per-device report. Every commit of the batch commits the
/// same table, so every root must be the same wherever it ran; a difference fails the run.
pub(super) fn run_batch<P: Ports>(
    args: &CommitArgs,
    registry: &Registry<P>,
    plan: &CommitPlan,
    params: CommitParams,
) -> Result<u8> {
    let repeat = args.repeat.unwrap_or(1);
    if repeat == 0 || args.logical == 0 {
        return Err(ProverError::Usage("--repeat and --logical need at least 1".into()));
    }
    let spec = args.devices.as_deref().unwrap_or("all");
    let (backend, skipped) = registry.select(&args.run.backend)?;
    let shape = plan.trace_shape();
    let t0 = Instant::now();
    let mut trace = backend_api::host_vec("host", shape.len())?;
    let input = load_trace(args, shape, &mut trace)?;
    let input_seconds = t0.elapsed().as_secs_f64();
    let batch = Batch { args, params: &params, model_total: plan.model.total(), trace: &trace, shape };
    #[cfg(feature = "cuda")]
    let done = if let crate::select::SelectedBackend::Cuda(_) = &backend {
        drop(backend);
        let count = backend_cuda::CudaBackend::device_count()?;
        let options = backend_cuda::CudaOptions::from_env()?;
        let mut owned = Vec::new();
        for ordinal in device_list(spec, count, "cuda")? {
            owned.push(backend_cuda::CudaBackend::open(ordinal, options.clone())?);
        }
        let members: Vec<BatchMember<'_, _>> = owned
            .iter()
            .map(|b| BatchMember {
                label: format!("cuda:{}", b.ordinal()),
                backend: b,
                key: format!("cuda-{}", b.uuid()),
            })
            .collect();
        batch.run(&members)?
    } else {
        device_list(spec, 1, backend.name())?;
        backend.visit(BatchOn { batch, label: backend.name(), key: backend.device_key() })?
    };
    #[cfg(not(feature = "cuda"))]
    let done = {
        device_list(spec, 1, backend.name())?;
        backend.visit(BatchOn { batch, label: backend.name(), key: backend.device_key() })?
    };
    let (mut report, failure) = done;
    report.auto_skipped = skipped;
    report.input = input;
    report.input_seconds = input_seconds;
    print(&if args.shape.json { to_json(&report)? } else { report.to_string() })?;
    if let Some(e) = failure {
        return Err(e);
    }
    if !report.roots_identical {
        return Err(ProverError::ResultsDiffer(
            "the commits of one table gave different roots on different devices (see the report)".into(),
        ));
    }
    Ok(EXIT_OK)
}

/// The ordinals `spec` names among `count` devices of `backend`: `all`, or a comma-separated list.
pub(super) fn device_list(spec: &str, count: usize, backend: &str) -> Result<Vec<usize>> {
    if spec == "all" {
        return if count == 0 {
            Err(ProverError::Usage(format!("backend {backend} reports no device")))
        } else {
            Ok((0..count).collect())
        };
    }
    let mut list = Vec::new();
    for part in spec.split(',') {
        let ordinal: usize = part.trim().parse().map_err(|_| {
            ProverError::Usage(format!("--devices {spec:?}: {part:?} is not a device ordinal; use `all` or e.g. `0,1`"))
        })?;
        if ordinal >= count {
            return Err(ProverError::Usage(format!(
                "--devices {spec:?}: backend {backend} has {count} device(s), ordinals 0..={}",
                count.saturating_sub(1)
            )));
        }
        if list.contains(&ordinal) {
            return Err(ProverError::Usage(format!("--devices {spec:?}: device {ordinal} is listed twice")));
        }
        list.push(ordinal);
    }
    Ok(list)
}

/// A batch to run: the table, its parameters and the flags that shape the device set.
pub(super) struct Batch<'a> {
    pub(super) args: &'a CommitArgs,
    pub(super) params: &'a CommitParams,
    pub(super) model_total: usize,
    pub(super) trace: &'a [u64],
    pub(super) shape: MatrixShape,
}

/// One physical device of a batch: a label, the backend, the key of its reservation queue.
pub(super) struct BatchMember<'a, B> {
    pub(super) label: String,
    pub(super) backend: &'a B,
    pub(super) key: String,
}

impl Batch<'_> {
    /// Builds the device set (each device split into `--logical` members with its budget shared
    /// out; cross-process admissions with `--wait-for-memory`) and commits the batch.
    fn run<B: Backend>(&self, members: &[BatchMember<'_, B>]) -> Result<(BatchReport, Option<ProverError>)> {
        let root = reservation_root(self.args);
        let mut set = DeviceSet::new();
        for m in members {
            let budget = self.params.budget.unwrap_or_else(|| default_budget(m.backend.info().total_memory));
            set.push_logical(m.backend, &m.label, self.args.logical, budget, |share| {
                match self.args.wait_for_memory {
                    Some(wait) => Admission::cross_process(share, wait, &root, &m.key),
                    None => Ok(Admission::new(share)),
                }
            })?;
        }
        let repeat = self.args.repeat.unwrap_or(1);
        let jobs = vec![Job { trace: self.trace, shape: self.shape, params: self.params }; repeat];
        let t0 = Instant::now();
        let outcomes = set.run(&jobs, |_, _, c| Ok((c.roots.clone(), c.timings.admission_seconds)))?;
        let wall = t0.elapsed().as_secs_f64();
        let info: Vec<DeviceInfo> = set.members().iter().map(|m| m.backend().info()).collect();
        Ok(BatchReport::new(&set, &info, self.shape, self.params, self.model_total, outcomes, wall))
    }
}

/// A batch on the one device of a backend that has one (CPU, wgpu, ports).
pub(super) struct BatchOn<'a> {
    pub(super) batch: Batch<'a>,
    pub(super) label: &'static str,
    pub(super) key: String,
}

impl BackendVisitor for BatchOn<'_> {
    type Output = Result<(BatchReport, Option<ProverError>)>;

    fn visit<B: Backend>(self, backend: &B) -> Self::Output {
        self.batch.run(&[BatchMember { label: self.label.into(), backend, key: self.key }])
    }
}
