//! The prover's one error type, and the CLI exit codes it maps to.

use std::path::PathBuf;

/// Exit code of a successful run.
pub const EXIT_OK: u8 = 0;
/// Exit code of a refusal (the table does not fit the budget, or `prover plan` says it does not
/// fit), an unavailable backend, or a device error.
pub const EXIT_REFUSED_OR_DEVICE: u8 = 1;
/// Exit code of a usage or input error: bad flags (clap uses 2 too), a bad input file, a shape or
/// parameter the commit rejects before touching a device, or a path refused as unsafe
/// ([`ProverError::UnsafePath`]: a reservation directory other users can write, a symbolic link).
pub const EXIT_USAGE: u8 = 2;
/// Exit code of a commit that waited for device memory (`--wait-for-memory`) until its timeout:
/// nothing was allocated, and the same commit may succeed later or on another device.
pub const EXIT_WAIT_TIMED_OUT: u8 = 3;

/// Everything the pipeline and the CLI can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ProverError {
    /// A backend error: validation of the shape and parameters (these come from `backend-api`, so
    /// every backend rejects the same inputs with the same words), a refusal, or a device fault.
    #[error(transparent)]
    Backend(#[from] backend_api::Error),

    /// An input or output file could not be used; `message` carries the sizes involved.
    #[error("{path}: {message}")]
    Input {
        /// The file.
        path: PathBuf,
        /// What is wrong with it, with the sizes involved.
        message: String,
    },

    /// A commit waited for device memory until its timeout; nothing was allocated.
    #[error(
        "timed out after {:.1} s waiting for {needed} B ({}) of device memory on {device} (budget {budget} B, {}): {blocked}",
        waited.as_secs_f64(),
        backend_api::memory::human_bytes(*needed),
        backend_api::memory::human_bytes(*budget)
    )]
    WaitTimedOut {
        /// The commit's modelled bytes.
        needed: usize,
        /// The budget it waited under.
        budget: usize,
        /// The device (and its queue) it waited for.
        device: String,
        /// How long it waited.
        waited: std::time::Duration,
        /// What still stood in the way at the last look.
        blocked: crate::admission::Blocked,
    },

    /// A job of a [`crate::DeviceSet`] batch that no member's budget holds; nothing ran. A commit
    /// runs whole on one device.
    #[error(
        "job {job} needs {needed} B ({}), more than the budget of any device in the set: {}; a commit runs whole on one device",
        backend_api::memory::human_bytes(*needed),
        budgets.iter().map(|(d, b)| format!("{d} {b} B ({})", backend_api::memory::human_bytes(*b))).collect::<Vec<_>>().join(", ")
    )]
    NoDeviceFits {
        /// The job's index in the batch.
        job: usize,
        /// Its modelled bytes.
        needed: usize,
        /// Each member's label and budget.
        budgets: Vec<(String, usize)>,
    },

    /// Commits that must agree did not (the same table gave different roots on two devices): a
    /// bug, reported rather than hidden.
    #[error("{0}")]
    ResultsDiffer(String),

    /// A path the prover refuses to use because another user could redirect or forge what it
    /// reads or writes there: a reservation directory that is not the caller's alone, a symbolic
    /// link where a file of the queue or the `--out` file should be, something other than a
    /// regular file. Nothing was written through it.
    #[error("{path}: {problem}; {fix}")]
    UnsafePath {
        /// The path refused.
        path: PathBuf,
        /// What is wrong with it (owner, mode, file type), with the values found.
        problem: String,
        /// What to do about it.
        fix: String,
    },

    /// A command-line combination the CLI cannot run.
    #[error("{0}")]
    Usage(String),
}

impl ProverError {
    /// The CLI exit code for this error: [`EXIT_USAGE`] for usage, input and validation errors and
    /// unsafe paths,
    /// [`EXIT_WAIT_TIMED_OUT`] for a wait for memory that timed out, [`EXIT_REFUSED_OR_DEVICE`]
    /// for refusals, unavailable backends and device errors.
    pub fn exit_code(&self) -> u8 {
        use backend_api::Error as E;
        match self {
            ProverError::WaitTimedOut { .. } => EXIT_WAIT_TIMED_OUT,
            ProverError::Usage(_) | ProverError::Input { .. } | ProverError::UnsafePath { .. } => EXIT_USAGE,
            ProverError::Backend(
                E::InvalidShape(_)
                | E::InvalidArgument(_)
                | E::ScratchTooSmall { .. }
                | E::LengthMismatch { .. }
                | E::OverlappingCopies { .. }
                | E::OutOfBounds { .. }
                | E::SizeOverflow { .. },
            ) => EXIT_USAGE,
            ProverError::Backend(_) | ProverError::NoDeviceFits { .. } | ProverError::ResultsDiffer(_) => {
                EXIT_REFUSED_OR_DEVICE
            }
        }
    }

    /// An [`ProverError::Input`] for `path`.
    pub fn input(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        ProverError::Input { path: path.into(), message: message.into() }
    }
}

/// Result alias of this crate.
pub type Result<T, E = ProverError> = std::result::Result<T, E>;
