//! `prover commit`: one table, or a batch over several devices (`batch.rs`), with progress,
//! reports and the output file.

use super::*;

pub(super) fn run_commit<P: Ports>(args: &CommitArgs, registry: &Registry<P>) -> Result<u8> {
    let params = CommitParams {
        shift: args.shift,
        hash: args.run.hash.into(),
        host_copy: args.host_copy,
        phase_timing: !args.no_phase_timing,
        ..params_of(&args.shape)
    };
    let rows = match (&args.input, args.rows) {
        (Some(_), Some(rows)) => rows,
        (None, None) => 1usize << args.log_rows,
        _ => return Err(ProverError::Usage("--input and --rows go together".into())),
    };
    // Everything that needs no device is checked first: the shape and parameters, then the file.
    let plan = CommitPlan::new(rows, args.cols, &params)?;
    let shape = plan.trace_shape();
    if let Some(path) = &args.input {
        crate::check_trace_file(path, shape)?;
    }
    if let Some(out) = &args.out {
        check_out_path(out)?;
    }
    if args.devices.is_some() || args.repeat.is_some() || args.logical != 1 {
        return run_batch(args, registry, &plan, params);
    }
    let (backend, skipped) = registry.select(&args.run.backend)?;
    crate::trace::step(&format!("backend {} open", backend.name()));
    let info = backend.visit(InfoOf);
    let budget = params.budget.unwrap_or_else(|| default_budget(info.total_memory));
    // Refuse before reading or generating a table that would not fit.
    admit(&plan.model, budget, 0)?;
    let admission = match args.wait_for_memory {
        Some(wait) => Admission::cross_process(budget, wait, &reservation_root(args), &backend.device_key())?,
        None => Admission::new(budget),
    };

    let hidden = args.shape.json || !std::io::stderr().is_terminal();
    let progress = CliProgress::new(hidden, &params);
    let t0 = Instant::now();
    progress.bar.set_message(if args.input.is_some() { "reading the trace" } else { "generating the synthetic table" });
    // The CUDA kernels compile (or load from the kernel cache) and the memory pool grows while
    // the input is read or made, straight into the backend's host memory (page-locked on CUDA:
    // the upload is a direct copy; the staging ring is made for the LDE's tables). Not the pool where other
    // processes wait for this device: its free memory is what they go by.
    let prep = Preparation {
        hash: params.hash,
        pageable_upload_bytes: 0,
        device_bytes: args.wait_for_memory.is_none().then(|| plan.model.total()),
        lde_elems: plan.model.lde / backend_api::ELEM_BYTES,
        lde: Some(plan.lde),
    };
    let make_input = || -> Result<_> {
        let mut trace = backend.visit(AllocHost(shape.len()))?;
        let input = load_trace(args, shape, &mut trace)?;
        crate::trace::step("table ready");
        Ok((trace, input))
    };
    let (input, prepared) =
        if args.no_prepare { (make_input(), Ok(())) } else { backend.while_preparing(prep, make_input) };
    let (trace, input) = input?;
    prepared?;
    crate::trace::step("prepared");
    let input_seconds = t0.elapsed().as_secs_f64();
    // The row-major host copy lands in a page-locked block of the backend's pool: make it now, not
    // inside the commit (CUDA: ~1 s to lock 10 GB), and give it back to the pool for the copy.
    let host_copy_alloc = if args.host_copy {
        let t = Instant::now();
        drop(backend.visit(AllocHost(plan.lde_shape().len()))?);
        Some(t.elapsed().as_secs_f64())
    } else {
        None
    };
    progress.bar.inc(1);
    if args.wait_for_memory.is_some() {
        progress.bar.set_message("waiting for device memory");
    }

    let params = CommitParams { budget: Some(budget), ..params };
    let job = CommitJob {
        trace: &trace,
        shape,
        params: &params,
        admission: &admission,
        progress: &progress,
        out: args.out.as_deref(),
    };
    let result = backend.visit(job);
    crate::trace::step("commit done");
    progress.bar.finish_and_clear();
    let mut report = result?;
    if let Some(s) = host_copy_alloc {
        report.phase_seconds.insert("host_copy_alloc", s);
    }
    report.software_adapter = backend.is_software();
    report.auto_skipped = skipped;
    report.input = input;
    report.input_seconds = input_seconds;
    report.out = args.out.as_ref().map(|p| p.display().to_string());
    print(&if args.shape.json { to_json(&report)? } else { report.to_string() })?;
    crate::trace::step("report printed");
    drop(backend);
    crate::trace::step("backend closed");
    Ok(EXIT_OK)
}

/// Reads or makes the trace `args` names (a file, else the seeded synthetic table) into `out`
/// (`shape.len()` elements); returns a description of it.
pub(super) fn load_trace(args: &CommitArgs, shape: MatrixShape, out: &mut [u64]) -> Result<String> {
    Ok(match &args.input {
        Some(path) => {
            read_trace_file_into(path, shape, out)?;
            path.display().to_string()
        }
        None => {
            synthetic_trace_into(out, args.run.seed);
            format!("synthetic {} x {}, seed {}", shape.rows(), shape.cols(), args.run.seed)
        }
    })
}

/// `len` elements of the selected backend's host memory ([`Backend::alloc_host`]).
pub(super) struct AllocHost(pub(super) usize);

impl BackendVisitor for AllocHost {
    type Output = Result<Box<dyn HostBuffer>>;

    fn visit<B: Backend>(self, backend: &B) -> Self::Output {
        Ok(Box::new(backend.alloc_host(self.0)?))
    }
}

/// `--reservations`, or the default root of the reservation queues.
pub(super) fn reservation_root(args: &CommitArgs) -> PathBuf {
    args.reservations.clone().unwrap_or_else(default_reservation_root)
}

/// Refuses an `--out` path whose directory does not exist, that is a directory, a symbolic link
/// or anything but a regular file, before any work is done (and [`write_u64_file`] checks again
/// when it writes, through a new file renamed over the path).
pub(super) fn check_out_path(out: &std::path::Path) -> Result<()> {
    let dir = match out.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    if !dir.is_dir() {
        return Err(ProverError::input(out, format!("cannot write the LDE: {} is not a directory", dir.display())));
    }
    if out.is_dir() {
        return Err(ProverError::input(out, "cannot write the LDE: the path is a directory"));
    }
    crate::check_output_file(out)
}

/// The commit, written once for every backend.
pub(super) struct CommitJob<'a> {
    pub(super) trace: &'a [u64],
    pub(super) shape: MatrixShape,
    pub(super) params: &'a CommitParams,
    pub(super) admission: &'a Admission,
    pub(super) progress: &'a CliProgress,
    pub(super) out: Option<&'a std::path::Path>,
}

impl BackendVisitor for CommitJob<'_> {
    type Output = Result<CommitReport>;

    fn visit<B: Backend>(self, backend: &B) -> Result<CommitReport> {
        use backend_api::PendingDownload as _;
        backend.tracker().reset_peak();
        let input = TraceInput::host(self.trace, self.shape);
        let mut c = commit_admitted(backend, input, self.params, self.admission, self.progress)?;
        let peak = backend.memory().peak;
        let host_copy_wait = match c.host_copy.take() {
            Some(copy) => {
                let t = Instant::now();
                let rows = copy.wait()?;
                if rows.len() != c.lde_shape.len() {
                    return Err(backend_api::Error::LengthMismatch {
                        what: "host copy of the LDE",
                        expected: c.lde_shape.len(),
                        actual: rows.len(),
                    }
                    .into());
                }
                Some(t.elapsed().as_secs_f64())
            }
            None => None,
        };
        if let Some(path) = self.out {
            self.progress.bar.set_message(format!("writing {}", path.display()));
            // Into the backend's host memory: on CUDA a direct page-locked copy.
            let mut lde = backend.alloc_host(c.lde_shape.len())?;
            backend.download(&c.lde, 0, &mut lde)?;
            write_u64_file(path, &lde)?;
        }
        let budget = self.params.budget.unwrap_or_default();
        let mut report = CommitReport::new(&backend.info(), &c, self.params, budget, peak);
        if let Some(wait) = host_copy_wait {
            report.phase_seconds.insert("host_copy_wait", wait);
        }
        report.admission_wait_seconds = self.admission.wait().map(|_| c.timings.admission_seconds);
        report.peak_pinned_host_bytes = backend.memory().pinned_host_peak;
        Ok(report)
    }
}

pub(super) struct InfoOf;

impl BackendVisitor for InfoOf {
    type Output = DeviceInfo;
    fn visit<B: Backend>(self, backend: &B) -> DeviceInfo {
        backend.info()
    }
}

/// A spinner with a step count on stderr; hidden for `--json` or when stderr is not a terminal.
pub(super) struct CliProgress {
    pub(super) bar: ProgressBar,
}

impl CliProgress {
    fn new(hidden: bool, params: &CommitParams) -> Self {
        // Input, upload, LDE, [snapshot], leaves, Merkle, transpose, roots.
        let steps = 7 + u64::from(params.keep_trace_snapshot) + u64::from(params.host_copy);
        let bar = ProgressBar::with_draw_target(
            Some(steps),
            if hidden { ProgressDrawTarget::hidden() } else { ProgressDrawTarget::stderr() },
        );
        if let Ok(style) = ProgressStyle::with_template("{spinner} [{pos}/{len}] {msg} ({elapsed})") {
            bar.set_style(style);
        }
        bar.enable_steady_tick(std::time::Duration::from_millis(100));
        Self { bar }
    }
}

impl Progress for CliProgress {
    fn start(&self, phase: Phase) {
        self.bar.set_message(phase.name());
    }

    fn finish(&self, _: Phase, _: f64) {
        self.bar.inc(1);
    }
}
