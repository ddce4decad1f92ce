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
use ::commit::memory::{admit, default_budget};
use backend_api::{Backend, DEFAULT_SCRATCH_CAP, DeviceInfo, HashKind, HostBuffer, LeafLayout, MatrixShape};
use clap::builder::{PossibleValue, PossibleValuesParser};
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

// One file per subcommand (`info` holds plan, backends and prepare); they share these imports
// through `use super::*`.
mod args;
mod batch;
mod bench;
mod commit;
mod info;

use self::args::*;
use self::batch::*;
use self::bench::*;
use self::commit::*;
use self::info::*;

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
