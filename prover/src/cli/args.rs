//! The subcommands' arguments, as clap parses them.

use super::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(super) enum HashArg {
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
pub(super) enum LayoutArg {
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
pub(super) struct ShapeArgs {
    /// Blowup factor B (a power of two).
    #[arg(long, default_value_t = 2)]
    pub(super) blowup: usize,
    /// Leaf layout.
    #[arg(long, value_enum, default_value_t = LayoutArg::Rows)]
    pub(super) layout: LayoutArg,
    /// Build two trees, over columns [0, COL) and [COL, cols).
    #[arg(long, value_name = "COL")]
    pub(super) split: Option<usize>,
    /// Transpose scratch cap: bytes, or with a KiB/MiB/GiB suffix.
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes, default_value_t = DEFAULT_SCRATCH_CAP)]
    pub(super) scratch_cap: usize,
    /// Memory budget for the commit (default: 80% of the device's memory).
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    pub(super) budget: Option<usize>,
    /// Keep the trace on the device as a column-major snapshot: the one case with a trace-sized
    /// buffer beside the LDE (the model's trace term).
    #[arg(long)]
    pub(super) snapshot: bool,
    /// Print one JSON object instead of the text report.
    #[arg(long)]
    pub(super) json: bool,
}

/// What a commit runs on and with: shared by `commit` and `bench`.
#[derive(Args, Debug)]
pub(super) struct RunArgs {
    /// Leaf and node hash.
    #[arg(long, value_enum, default_value_t = HashArg::Keccak256)]
    pub(super) hash: HashArg,
    /// Backend to run on.
    #[arg(long, default_value = AUTO)]
    pub(super) backend: String,
    /// Seed of the synthetic table.
    #[arg(long, default_value_t = 0)]
    pub(super) seed: u64,
}

#[derive(Args, Debug)]
pub(super) struct CommitArgs {
    /// log2 of the synthetic table's row count.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(0..=63), conflicts_with = "input")]
    pub(super) log_rows: u32,
    /// Columns of the table.
    #[arg(long, default_value_t = 64)]
    pub(super) cols: usize,
    /// Rows of the --input table.
    #[arg(long, requires = "input")]
    pub(super) rows: Option<usize>,
    /// A raw trace: rows*cols little-endian u64, row-major (needs --rows and --cols); a regular
    /// file (a FIFO, directory or device is refused).
    #[arg(long, value_name = "FILE", requires = "rows")]
    pub(super) input: Option<PathBuf>,
    /// Coset shift (non-zero mod p).
    #[arg(long, default_value_t = backend_api::field::DEFAULT_SHIFT)]
    pub(super) shift: u64,
    #[command(flatten)]
    pub(super) run: RunArgs,
    /// Write the column-major LDE here as raw little-endian u64: through a new file renamed over
    /// FILE (an existing regular file is replaced; a symbolic link, FIFO or device is refused).
    #[arg(long, value_name = "FILE")]
    pub(super) out: Option<PathBuf>,
    /// Also copy the row-major LDE to host memory, as a prover that reads rows does. The upload
    /// queues it (CUDA: each column group's LDE goes down while the next groups are uploaded and
    /// extended, and the leaves are hashed beside it; the transpose waits for it). Reported as
    /// `host_copy_wait` (waiting for it after the roots; `host_copy` where a separate phase
    /// queued it, as with `--snapshot`).
    #[arg(long, conflicts_with_all = ["devices", "repeat"])]
    pub(super) host_copy: bool,
    /// Do not synchronize after each phase (faster on GPUs; the per-phase seconds become issue times).
    #[arg(long)]
    pub(super) no_phase_timing: bool,
    /// Do not prepare the backend while the table is made (CUDA kernels and memory pool, wgpu
    /// pipelines and LDE buffer): the commit then pays those first-use costs itself, which this
    /// flag is for measuring.
    #[arg(long)]
    pub(super) no_prepare: bool,
    /// When the commit does not fit now, wait up to DURATION (e.g. 30s, 10m; 0 = do not wait) for
    /// device memory, first come first served with every other process waiting for the device.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(super) wait_for_memory: Option<Duration>,
    /// Directory of the cross-process reservation queues [default: $XDG_RUNTIME_DIR/stark-commit,
    /// else <tmp>/stark-commit-<uid>].
    #[arg(long, value_name = "DIR", requires = "wait_for_memory")]
    pub(super) reservations: Option<PathBuf>,
    /// Commit a batch over several devices: `all` (every device of --backend) or CUDA ordinals
    /// such as `0,1`; prints a per-device report.
    #[arg(long, value_name = "all|LIST", conflicts_with = "out")]
    pub(super) devices: Option<String>,
    /// Split each device into K logical devices with 1/K of its budget each (a batch mode).
    #[arg(long, value_name = "K", default_value_t = 1, conflicts_with = "out")]
    pub(super) logical: usize,
    /// Commit the table N times as one batch over the devices (a batch mode).
    #[arg(long, value_name = "N", conflicts_with = "out")]
    pub(super) repeat: Option<usize>,
    #[command(flatten)]
    pub(super) shape: ShapeArgs,
}

#[derive(Args, Debug)]
pub(super) struct PlanArgs {
    /// log2 of the trace row count.
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=63))]
    pub(super) log_rows: u32,
    /// Columns of the table.
    #[arg(long)]
    pub(super) cols: usize,
    /// The device's memory: bytes, or with a KiB/MiB/GiB/TiB suffix (e.g. 141GiB).
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    pub(super) memory: usize,
    #[command(flatten)]
    pub(super) shape: ShapeArgs,
}

#[derive(Args, Debug)]
pub(super) struct BenchArgs {
    /// log2 of the synthetic table's row count.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(0..=63))]
    pub(super) log_rows: u32,
    /// Columns of the table.
    #[arg(long, default_value_t = 64)]
    pub(super) cols: usize,
    #[command(flatten)]
    pub(super) run: RunArgs,
    /// Warm commits after the one-shot commit.
    #[arg(long, default_value_t = 5)]
    pub(super) runs: usize,
    #[command(flatten)]
    pub(super) shape: ShapeArgs,
}

#[derive(Args, Debug)]
pub(super) struct PrepareArgs {
    /// Backend whose kernels to prepare (only `cuda` keeps compiled kernels between processes).
    #[arg(long, default_value = "cuda")]
    pub(super) backend: String,
    /// Prepare for this GPU architecture without a device (`sm_90` or `90`; repeat or separate
    /// with commas for several). Default: the architecture of CUDA device 0.
    #[arg(long, value_name = "sm_XX", value_delimiter = ',')]
    pub(super) arch: Vec<String>,
    /// Print one JSON object instead of the text report.
    #[arg(long)]
    pub(super) json: bool,
}

#[derive(Args, Debug)]
pub(super) struct BackendsArgs {
    /// Print JSON.
    #[arg(long)]
    pub(super) json: bool,
}
