//! The `prover` CLI: commit a table on the best backend here, plan a shape against a device's
//! memory, list the backends, prepare the CUDA kernels ahead of a first run.
//!
//! Exit codes: 0 success (and `plan`: the shape fits); 1 refusal (the table does not fit the
//! budget, or `plan`: it does not fit), an unavailable backend or a device error; 2 a usage or
//! input error (bad flags, a bad trace file, a shape or parameter the commit rejects, an unsafe
//! path: a reservation directory others can write, a symbolic link for `--out`); 3 a wait for
//! memory that timed out.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use crate::report::{BatchReport, CommitReport, PlanReport};
use crate::select::{AUTO, BackendVisitor, Ports, Preparation, Registry};
use crate::units::{parse_bytes, parse_duration};
use crate::{
    Admission, CommitParams, CommitPlan, DeviceSet, EXIT_OK, EXIT_REFUSED_OR_DEVICE, Job, Phase, Progress, ProverError,
    Result, TraceInput, commit_admitted, default_reservation_root, read_trace_file_into, synthetic_trace_into,
    write_u64_file,
};
use backend_api::{Backend, DEFAULT_SCRATCH_CAP, DeviceInfo, HashKind, HostBuffer, LeafLayout, MatrixShape};
use clap::builder::{PossibleValue, PossibleValuesParser};
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use commit::memory::{admit, default_budget};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

#[derive(Parser, Debug)]
#[command(
    name = "prover",
    version,
    about = "Commit STARK trace tables (coset LDE + Merkle trees + in-place transpose) on CPU, CUDA or wgpu",
    after_help = "Exit codes: 0 success (plan: fits); 1 refused / does not fit / backend unavailable / device \
                  error; 2 usage or input error, or an unsafe path (a reservation directory others can write, a \
                  symbolic link for --out); 3 --wait-for-memory timed out."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Commit a table: a seeded synthetic one by default (2^16 x 64, blowup 2, keccak256), or a raw file.
    Commit(CommitArgs),
    /// Print the device-memory model of a shape, term by term, and whether it fits.
    Plan(PlanArgs),
    /// List the backends compiled in and whether each is usable here.
    Backends(BackendsArgs),
    /// How fast a backend commits a shape here: one-shot and warm medians per phase, against the
    /// page-locked host-device copy of the same bytes (CUDA).
    Bench(BenchArgs),
    /// Make the CUDA kernels ready ahead of the first commit: for the device here, or for named
    /// architectures without a device (a container image's build). Prints, per kernel unit,
    /// whether it is embedded in this binary, was compiled now into the kernel cache, or was
    /// already there.
    Prepare(PrepareArgs),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum HashArg {
    Keccak256,
    Blake3,
    /// Plonky3's Goldilocks Poseidon2 (width 8); the rows layout only.
    Poseidon2,
}

impl From<HashArg> for HashKind {
    fn from(h: HashArg) -> Self {
        match h {
            HashArg::Keccak256 => HashKind::Keccak256,
            HashArg::Blake3 => HashKind::Blake3,
            HashArg::Poseidon2 => HashKind::Poseidon2,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum LayoutArg {
    Rows,
    LambdaVmPairs,
}

impl From<LayoutArg> for LeafLayout {
    fn from(l: LayoutArg) -> Self {
        match l {
            LayoutArg::Rows => LeafLayout::Rows,
            LayoutArg::LambdaVmPairs => LeafLayout::LambdaVmPairs,
        }
    }
}

/// The shape flags `commit` and `plan` share.
#[derive(Args, Debug)]
struct ShapeArgs {
    /// Blowup factor B (a power of two).
    #[arg(long, default_value_t = 2)]
    blowup: usize,
    /// Leaf layout.
    #[arg(long, value_enum, default_value_t = LayoutArg::Rows)]
    layout: LayoutArg,
    /// Build two trees, over columns [0, COL) and [COL, cols).
    #[arg(long, value_name = "COL")]
    split: Option<usize>,
    /// Transpose scratch cap: bytes, or with a KiB/MiB/GiB suffix.
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes, default_value_t = DEFAULT_SCRATCH_CAP)]
    scratch_cap: usize,
    /// Memory budget for the commit (default: 80% of the device's memory).
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    budget: Option<usize>,
    /// Keep the trace on the device as a column-major snapshot: the one case with a trace-sized
    /// buffer beside the LDE (the model's trace term).
    #[arg(long)]
    snapshot: bool,
    /// Print one JSON object instead of the text report.
    #[arg(long)]
    json: bool,
}

/// What a commit runs on and with: shared by `commit` and `bench`.
#[derive(Args, Debug)]
struct RunArgs {
    /// Leaf and node hash.
    #[arg(long, value_enum, default_value_t = HashArg::Keccak256)]
    hash: HashArg,
    /// Backend to run on.
    #[arg(long, default_value = AUTO)]
    backend: String,
    /// Seed of the synthetic table.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

#[derive(Args, Debug)]
struct CommitArgs {
    /// log2 of the synthetic table's row count.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(0..=63), conflicts_with = "input")]
    log_rows: u32,
    /// Columns of the table.
    #[arg(long, default_value_t = 64)]
    cols: usize,
    /// Rows of the --input table.
    #[arg(long, requires = "input")]
    rows: Option<usize>,
    /// A raw trace: rows*cols little-endian u64, row-major (needs --rows and --cols); a regular
    /// file (a FIFO, directory or device is refused).
    #[arg(long, value_name = "FILE", requires = "rows")]
    input: Option<PathBuf>,
    /// Coset shift (non-zero mod p).
    #[arg(long, default_value_t = backend_api::field::DEFAULT_SHIFT)]
    shift: u64,
    #[command(flatten)]
    run: RunArgs,
    /// Write the column-major LDE here as raw little-endian u64: through a new file renamed over
    /// FILE (an existing regular file is replaced; a symbolic link, FIFO or device is refused).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Queue the copy of the row-major LDE to host memory before the transpose, as a prover that
    /// reads rows does; it overlaps the leaves, trees and transpose. Reported as the `host_copy`
    /// phase (queueing it) and `host_copy_wait` (waiting for it after the roots).
    #[arg(long, conflicts_with_all = ["devices", "repeat"])]
    host_copy: bool,
    /// Do not synchronize after each phase (faster on GPUs; the per-phase seconds become issue times).
    #[arg(long)]
    no_phase_timing: bool,
    /// Do not prepare the backend while the table is made (CUDA kernels and memory pool, wgpu
    /// pipelines and LDE buffer): the commit then pays those first-use costs itself, which this
    /// flag is for measuring.
    #[arg(long)]
    no_prepare: bool,
    /// When the commit does not fit now, wait up to DURATION (e.g. 30s, 10m; 0 = do not wait) for
    /// device memory, first come first served with every other process waiting for the device.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    wait_for_memory: Option<Duration>,
    /// Directory of the cross-process reservation queues [default: $XDG_RUNTIME_DIR/stark-commit,
    /// else <tmp>/stark-commit-<uid>].
    #[arg(long, value_name = "DIR", requires = "wait_for_memory")]
    reservations: Option<PathBuf>,
    /// Commit a batch over several devices: `all` (every device of --backend) or CUDA ordinals
    /// such as `0,1`; prints a per-device report.
    #[arg(long, value_name = "all|LIST", conflicts_with = "out")]
    devices: Option<String>,
    /// Split each device into K logical devices with 1/K of its budget each (a batch mode).
    #[arg(long, value_name = "K", default_value_t = 1, conflicts_with = "out")]
    logical: usize,
    /// Commit the table N times as one batch over the devices (a batch mode).
    #[arg(long, value_name = "N", conflicts_with = "out")]
    repeat: Option<usize>,
    #[command(flatten)]
    shape: ShapeArgs,
}

#[derive(Args, Debug)]
struct PlanArgs {
    /// log2 of the trace row count.
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=63))]
    log_rows: u32,
    /// Columns of the table.
    #[arg(long)]
    cols: usize,
    /// The device's memory: bytes, or with a KiB/MiB/GiB/TiB suffix (e.g. 141GiB).
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    memory: usize,
    #[command(flatten)]
    shape: ShapeArgs,
}

#[derive(Args, Debug)]
struct BenchArgs {
    /// log2 of the synthetic table's row count.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(0..=63))]
    log_rows: u32,
    /// Columns of the table.
    #[arg(long, default_value_t = 64)]
    cols: usize,
    #[command(flatten)]
    run: RunArgs,
    /// Warm commits after the one-shot commit.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    #[command(flatten)]
    shape: ShapeArgs,
}

#[derive(Args, Debug)]
struct PrepareArgs {
    /// Backend whose kernels to prepare (only `cuda` keeps compiled kernels between processes).
    #[arg(long, default_value = "cuda")]
    backend: String,
    /// Prepare for this GPU architecture without a device (`sm_90` or `90`; repeat or separate
    /// with commas for several). Default: the architecture of CUDA device 0.
    #[arg(long, value_name = "sm_XX", value_delimiter = ',')]
    arch: Vec<String>,
    /// Print one JSON object instead of the text report.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct BackendsArgs {
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Parses the process's arguments, runs the command and returns its exit code (errors are printed
/// to stderr as `error: ...`), with the built-in backends.
pub fn main() -> ExitCode {
    main_with(())
}

/// [`main`] with `ports` added to the built-in backends: every subcommand lists them
/// (`prover backends`), accepts them as `--backend <name>`, and `auto` tries the ranked ones in
/// the order [`crate::select`] documents. A port's binary is one line:
///
/// ```no_run
/// use prover::select::Port;
///
/// fn main() -> std::process::ExitCode {
///     prover::cli::main_with(Port::new("rayon", "the CPU backend again", || Ok(backend_cpu::CpuBackend::new())))
/// }
/// ```
///
/// A port name that is invalid or taken is a usage error (exit code 2).
pub fn main_with<P: Ports>(ports: P) -> ExitCode {
    crate::trace::start();
    let registry = match Registry::with_ports(ports) {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    let matches = with_backend_choices(Cli::command(), &registry).get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let result = match cli.command {
        Command::Commit(args) => run_commit(&args, &registry),
        Command::Plan(args) => run_plan(&args),
        Command::Backends(args) => run_backends(&args, &registry),
        Command::Bench(args) => run_bench(&args, &registry),
        Command::Prepare(args) => run_prepare(&args),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => fail(&e),
    }
}

/// Keeps a headless run's stderr free of window-system errors that are not errors: Mesa's
/// Vulkan device-selection layer prints `error: XDG_RUNTIME_DIR is invalid` twice per Vulkan
/// instance on a machine without a display. With the `wgpu` feature this is
/// `backend_wgpu::quiet_headless_vulkan` (which sets `NODEVICE_SELECT=1` only where needed and
/// only while no other thread runs, so it is safe); without it, no Vulkan instance is made and it
/// does nothing. Call it first in `main`, as the `prover` binary does.
pub fn quiet_headless_vulkan() {
    #[cfg(feature = "wgpu")]
    {
        // Only `OtherThreads` would say it did nothing for want of safety: the caller's job.
        let _ = backend_wgpu::quiet_headless_vulkan();
    }
}

/// Prints `error: {e}` to stderr and returns its exit code.
fn fail(e: &ProverError) -> ExitCode {
    let _ = writeln!(std::io::stderr(), "error: {e}");
    ExitCode::from(e.exit_code())
}

/// Restricts every subcommand's `--backend` to the registry's names, each with its description.
/// A built-in backend that is not compiled in is accepted but not listed, so that asking for it
/// says how to rebuild with it.
fn with_backend_choices<P: Ports>(cmd: clap::Command, registry: &Registry<P>) -> clap::Command {
    let listed = registry.choices();
    let hidden = ["cuda", "wgpu"].into_iter().filter(|b| !listed.iter().any(|c| c.0 == *b));
    let choices: Vec<PossibleValue> = listed
        .iter()
        .map(|&(name, about)| PossibleValue::new(name).help(about))
        .chain(hidden.map(|name| PossibleValue::new(name).hide(true)))
        .collect();
    cmd.mut_subcommands(|sub| {
        sub.mut_args(|arg| {
            if arg.get_id() == "backend" { arg.value_parser(PossibleValuesParser::new(choices.clone())) } else { arg }
        })
    })
}

/// Writes to stdout; a closed pipe is not an error worth a panic.
fn print(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}").and_then(|_| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(ProverError::Usage(format!("cannot write to stdout: {e}")))
        }
        _ => Ok(()),
    }
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<String> {
    serde_json::to_string_pretty(value).map_err(|e| ProverError::Usage(format!("cannot encode the report: {e}")))
}

fn params_of(shape: &ShapeArgs) -> CommitParams {
    CommitParams {
        blowup: shape.blowup,
        layout: shape.layout.into(),
        split: shape.split,
        scratch_cap: shape.scratch_cap,
        budget: shape.budget,
        keep_trace_snapshot: shape.snapshot,
        ..CommitParams::default()
    }
}

fn run_commit<P: Ports>(args: &CommitArgs, registry: &Registry<P>) -> Result<u8> {
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
fn load_trace(args: &CommitArgs, shape: MatrixShape, out: &mut [u64]) -> Result<String> {
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
struct AllocHost(usize);

impl BackendVisitor for AllocHost {
    type Output = Result<Box<dyn HostBuffer>>;

    fn visit<B: Backend>(self, backend: &B) -> Self::Output {
        Ok(Box::new(backend.alloc_host(self.0)?))
    }
}

/// `prover bench`: the table made while the backend prepares, the transfer floor, then one
/// one-shot and `--runs` warm commits.
fn run_bench<P: Ports>(args: &BenchArgs, registry: &Registry<P>) -> Result<u8> {
    let params = CommitParams { hash: args.run.hash.into(), ..params_of(&args.shape) };
    let plan = CommitPlan::new(1usize << args.log_rows, args.cols, &params)?;
    let shape = plan.trace_shape();
    let (backend, _) = registry.select(&args.run.backend)?;
    let budget = params.budget.unwrap_or_else(|| default_budget(backend.visit(InfoOf).total_memory));
    admit(&plan.model, budget, 0)?;
    // The table goes into the backend's host memory, as in `prover commit`.
    let prep = Preparation {
        hash: params.hash,
        pageable_upload_bytes: 0,
        device_bytes: Some(plan.model.total()),
        lde_elems: plan.model.lde / backend_api::ELEM_BYTES,
        lde: Some(plan.lde),
    };
    let (trace, prepared) = backend.while_preparing(prep, || -> Result<_> {
        let mut trace = backend.visit(AllocHost(shape.len()))?;
        synthetic_trace_into(&mut trace, args.run.seed);
        Ok(trace)
    });
    let trace = trace?;
    prepared?;
    let floor = backend.transfer_floor(&trace)?;
    let params = CommitParams { budget: Some(budget), ..params };
    let report = backend.visit(BenchJob { trace: &trace, shape, params: &params, runs: args.runs, floor })?;
    print(&if args.shape.json { to_json(&report)? } else { report.to_string() })?;
    Ok(EXIT_OK)
}

/// [`crate::bench::bench`] on whichever backend was selected.
struct BenchJob<'a> {
    trace: &'a [u64],
    shape: MatrixShape,
    params: &'a CommitParams,
    runs: usize,
    floor: Option<crate::bench::TransferFloor>,
}

impl BackendVisitor for BenchJob<'_> {
    type Output = Result<crate::bench::BenchReport>;

    fn visit<B: Backend>(self, backend: &B) -> Self::Output {
        crate::bench::bench(backend, self.trace, self.shape, self.params, self.runs, self.floor)
    }
}

/// `--reservations`, or the default root of the reservation queues.
fn reservation_root(args: &CommitArgs) -> PathBuf {
    args.reservations.clone().unwrap_or_else(default_reservation_root)
}

/// `prover commit --devices ... / --repeat N / --logical K`: the table committed `N` times as one
/// batch over a [`DeviceSet`], then the per-device report. Every commit of the batch commits the
/// same table, so every root must be the same wherever it ran; a difference fails the run.
fn run_batch<P: Ports>(
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
fn device_list(spec: &str, count: usize, backend: &str) -> Result<Vec<usize>> {
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
struct Batch<'a> {
    args: &'a CommitArgs,
    params: &'a CommitParams,
    model_total: usize,
    trace: &'a [u64],
    shape: MatrixShape,
}

/// One physical device of a batch: a label, the backend, the key of its reservation queue.
struct BatchMember<'a, B> {
    label: String,
    backend: &'a B,
    key: String,
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
struct BatchOn<'a> {
    batch: Batch<'a>,
    label: &'static str,
    key: String,
}

impl BackendVisitor for BatchOn<'_> {
    type Output = Result<(BatchReport, Option<ProverError>)>;

    fn visit<B: Backend>(self, backend: &B) -> Self::Output {
        self.batch.run(&[BatchMember { label: self.label.into(), backend, key: self.key }])
    }
}

/// Refuses an `--out` path whose directory does not exist, that is a directory, a symbolic link
/// or anything but a regular file, before any work is done (and [`write_u64_file`] checks again
/// when it writes, through a new file renamed over the path).
fn check_out_path(out: &std::path::Path) -> Result<()> {
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
struct CommitJob<'a> {
    trace: &'a [u64],
    shape: MatrixShape,
    params: &'a CommitParams,
    admission: &'a Admission,
    progress: &'a CliProgress,
    out: Option<&'a std::path::Path>,
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

struct InfoOf;

impl BackendVisitor for InfoOf {
    type Output = DeviceInfo;
    fn visit<B: Backend>(self, backend: &B) -> DeviceInfo {
        backend.info()
    }
}

/// A spinner with a step count on stderr; hidden for `--json` or when stderr is not a terminal.
struct CliProgress {
    bar: ProgressBar,
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

fn run_plan(args: &PlanArgs) -> Result<u8> {
    let params = params_of(&args.shape);
    let rows = 1usize << args.log_rows;
    let plan = CommitPlan::new(rows, args.cols, &params)?;
    let (budget, source) = match params.budget {
        Some(b) => (b, "--budget"),
        None => (default_budget(args.memory), "80% of memory"),
    };
    let report = PlanReport::new(&plan, &params, args.memory, budget, source);
    print(&if args.shape.json { to_json(&report)? } else { report.to_string() })?;
    Ok(if report.fits { EXIT_OK } else { EXIT_REFUSED_OR_DEVICE })
}

fn run_backends<P: Ports>(args: &BackendsArgs, registry: &Registry<P>) -> Result<u8> {
    let status = registry.probe_all();
    let auto = registry.select(AUTO).map(|(b, _)| b.name()).unwrap_or("none");
    if args.json {
        let v = serde_json::json!({ "backends": status, "auto": auto, "auto_order": registry.auto_order() });
        print(&to_json(&v)?)?;
        return Ok(EXIT_OK);
    }
    let width = status.iter().map(|s| s.backend.len()).max().unwrap_or(0).max(5);
    let mut text = String::from("backends:\n");
    for s in &status {
        let line = match (&s.device, &s.reason) {
            (Some(d), _) => format!("usable: {d}{}", if s.software { " (software adapter)" } else { "" }),
            (None, r) => r.clone().unwrap_or_else(|| "unavailable".into()),
        };
        let port = if s.port { " [port]" } else { "" };
        text.push_str(&format!("  {:<width$} {line}{port}\n", s.backend));
    }
    text.push_str(&format!("--backend auto tries: {}\n", registry.auto_order().join(", ")));
    text.push_str(&format!("--backend auto picks: {auto}"));
    print(&text)?;
    Ok(EXIT_OK)
}

/// One kernel unit as `prover prepare` reports it.
#[cfg(feature = "cuda")]
#[derive(serde::Serialize, Debug)]
struct PreparedUnit {
    /// `lde.cu:ntt_dif_pass_lean16`, or a whole file such as `merkle.cu`.
    unit: String,
    /// `embedded`, `compiled` or `cached`.
    origin: &'static str,
    /// What the image is for: `sm_90` (CUBIN) or `compute_90` (PTX); empty when not known.
    target: String,
    /// Time to compile the unit or read it from the cache.
    seconds: f64,
    /// The image's size.
    bytes: usize,
}

/// What `prover prepare` did for one architecture.
#[cfg(feature = "cuda")]
#[derive(serde::Serialize, Debug)]
struct PreparedArch {
    /// `sm_90`.
    arch: String,
    /// The device prepared, when it was one (`NVIDIA H200 (device 0)`), else `null`.
    device: Option<String>,
    /// The kernel cache directory (`null`: caching is off).
    cache_dir: Option<PathBuf>,
    /// Every unit.
    units: Vec<PreparedUnit>,
}

/// `prover prepare`: the kernel cache filled for the device here or for named architectures.
fn run_prepare(args: &PrepareArgs) -> Result<u8> {
    if args.backend != "cuda" {
        return Err(ProverError::Usage(format!(
            "prepare: only the cuda backend keeps compiled kernels between processes; `--backend {}` has nothing to \
             prepare ahead",
            args.backend
        )));
    }
    #[cfg(feature = "cuda")]
    {
        use backend_cuda::ImageOrigin;
        let origin = |o: ImageOrigin| match o {
            ImageOrigin::Embedded => "embedded",
            ImageOrigin::Compiled => "compiled",
            ImageOrigin::Cache => "cached",
        };
        let archs =
            args.arch.iter().map(|a| backend_cuda::parse_arch(a.trim())).collect::<std::result::Result<Vec<_>, _>>()?;
        let options = backend_cuda::CudaOptions::from_env()?;
        let mut done = Vec::new();
        if archs.is_empty() {
            let backend = backend_cuda::CudaBackend::open(0, options.clone()).map_err(|e| match e {
                backend_api::Error::BackendUnavailable { backend, reason } => backend_api::Error::BackendUnavailable {
                    backend,
                    reason: format!(
                        "{reason}; to prepare without a device, name the architecture: prover prepare --arch sm_90"
                    ),
                },
                e => e,
            })?;
            let (major, minor) = backend.compute_capability();
            let units = backend.prepare_all_kernels()?;
            done.push(PreparedArch {
                arch: format!("sm_{major}{minor}"),
                device: Some(format!("{} (device 0)", Backend::info(&backend).device)),
                cache_dir: backend.kernel_cache_dir().map(|d| d.to_path_buf()),
                units: units
                    .into_iter()
                    .map(|u| PreparedUnit {
                        unit: u.unit,
                        origin: origin(u.origin),
                        target: String::new(),
                        seconds: u.image_time.as_secs_f64(),
                        bytes: u.image_bytes,
                    })
                    .collect(),
            });
        }
        for arch in archs {
            let report = backend_cuda::prepare_kernel_cache(arch, &options.kernel_cache)?;
            done.push(PreparedArch {
                arch: format!("sm_{arch}"),
                device: None,
                cache_dir: report.cache_dir,
                units: report
                    .units
                    .into_iter()
                    .map(|u| PreparedUnit {
                        unit: u.unit,
                        origin: origin(u.origin),
                        target: u.target,
                        seconds: u.time.as_secs_f64(),
                        bytes: u.image_bytes,
                    })
                    .collect(),
            });
        }
        let embedded = backend_cuda::embedded_kernels();
        let embedded_text = match (&embedded.nvrtc_version, &embedded.not_built) {
            (Some((major, minor)), _) => format!(
                "{} images for {} (NVRTC {major}.{minor}, {:.1} MB)",
                embedded.images,
                embedded.archs.iter().map(|a| format!("sm_{a}")).collect::<Vec<_>>().join(", "),
                embedded.bytes as f64 / 1e6
            ),
            (None, reason) => format!("none ({})", reason.as_deref().unwrap_or("not built")),
        };
        if args.json {
            let v = serde_json::json!({ "embedded": embedded_text, "prepared": done });
            print(&to_json(&v)?)?;
            return Ok(EXIT_OK);
        }
        let mut text = format!("embedded kernels: {embedded_text}\n");
        for a in &done {
            let dir = a.cache_dir.as_ref().map_or("off (nothing is kept)".to_string(), |d| d.display().to_string());
            let on = a.device.as_ref().map_or(String::new(), |d| format!(" on {d}"));
            text.push_str(&format!("{}{on}, kernel cache: {dir}\n", a.arch));
            let width = a.units.iter().map(|u| u.unit.len()).max().unwrap_or(0);
            for u in &a.units {
                let detail = match u.origin {
                    "embedded" => String::new(),
                    _ => format!(
                        "  {}{:.2} s  {} B",
                        if u.target.is_empty() { String::new() } else { format!("{}  ", u.target) },
                        u.seconds,
                        u.bytes
                    ),
                };
                text.push_str(&format!("  {:<width$}  {:<8}{detail}\n", u.unit, u.origin));
            }
            let count = |o: &str| a.units.iter().filter(|u| u.origin == o).count();
            text.push_str(&format!(
                "{}: {} units: {} embedded, {} compiled now, {} already cached\n",
                a.arch,
                a.units.len(),
                count("embedded"),
                count("compiled"),
                count("cached")
            ));
        }
        print(text.trim_end())?;
        Ok(EXIT_OK)
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = (&args.arch, args.json);
        Err(backend_api::Error::BackendUnavailable {
            backend: "cuda",
            reason: "not compiled into this binary (rebuild with `--features cuda`)".into(),
        }
        .into())
    }
}
