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
    /// every backend rejects the same inputs with the same words), or a device fault.
    #[error(transparent)]
    Backend(#[from] backend_api::Error),

    /// The commit does not fit the memory budget ([`crate::memory::admit`]); nothing was
    /// allocated. The refusal names every term of the model, the budget and what else was
    /// admitted.
    #[error("{0}")]
    Refused(Box<crate::memory::Refusal>),

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
        crate::memory::human_bytes(*needed),
        crate::memory::human_bytes(*budget)
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
        crate::memory::human_bytes(*needed),
        budgets.iter().map(|(d, b)| format!("{d} {b} B ({})", crate::memory::human_bytes(*b))).collect::<Vec<_>>().join(", ")
    )]
    NoDeviceFits {
        /// The job's index in the batch.
        job: usize,
        /// Its modelled bytes.
        needed: usize,
        /// Each member's label and budget.
        budgets: Vec<(String, usize)>,
    },

    /// No backend of a fallback list (the `prover` crate's `Registry::select_from`) could be constructed:
    /// each one tried, with why it was skipped.
    #[error("no backend of `{list}` is usable here: {}", tried.join("; "))]
    NoBackendUsable {
        /// The list as given.
        list: String,
        /// One `name: reason` per backend tried, in order.
        tried: Vec<String>,
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
        match self {
            ProverError::WaitTimedOut { .. } => EXIT_WAIT_TIMED_OUT,
            ProverError::Usage(_) | ProverError::Input { .. } | ProverError::UnsafePath { .. } => EXIT_USAGE,
            ProverError::Backend(e) if e.is_invalid_input() => EXIT_USAGE,
            ProverError::Backend(_)
            | ProverError::Refused(_)
            | ProverError::NoDeviceFits { .. }
            | ProverError::NoBackendUsable { .. }
            | ProverError::ResultsDiffer(_) => EXIT_REFUSED_OR_DEVICE,
        }
    }

    /// An [`ProverError::Input`] for `path`.
    pub fn input(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        ProverError::Input { path: path.into(), message: message.into() }
    }

    /// The backend's error inside, when this is one ([`ProverError::Backend`]).
    pub fn backend_error(&self) -> Option<&backend_api::Error> {
        match self {
            ProverError::Backend(e) => Some(e),
            _ => None,
        }
    }

    /// Whether a memory budget refused the commit before anything was allocated
    /// ([`ProverError::Refused`]); [`ProverError::refusal`] gives its terms.
    pub fn is_refused(&self) -> bool {
        self.refusal().is_some()
    }

    /// The refusal's terms when a memory budget refused the commit: the model term by term
    /// ([`crate::memory::MemoryModel::terms`]), the budget and the bytes already admitted.
    pub fn refusal(&self) -> Option<&crate::memory::Refusal> {
        match self {
            ProverError::Refused(r) => Some(r),
            _ => None,
        }
    }

    /// Whether the caller's input was rejected before any device work: a shape or parameter the
    /// commit does not accept, a trace of the wrong length ([`backend_api::Error::is_invalid_input`]),
    /// or an input file that cannot be used ([`ProverError::Input`]). Fix the input; retrying or
    /// another backend gives the same error.
    pub fn is_invalid_input(&self) -> bool {
        matches!(self, ProverError::Input { .. })
            || self.backend_error().is_some_and(backend_api::Error::is_invalid_input)
    }

    /// Whether the device ran out of memory (or page-locked host memory could not be had)
    /// although admission let the commit in: the budget is above what the device really has free.
    pub fn is_out_of_memory(&self) -> bool {
        self.backend_error().is_some_and(backend_api::Error::is_out_of_memory)
    }

    /// Whether the device was lost: the backend and its buffers are no longer usable.
    pub fn is_device_lost(&self) -> bool {
        self.backend_error().is_some_and(backend_api::Error::is_device_lost)
    }

    /// Whether the device or its driver failed ([`backend_api::Error::is_device_error`]: a driver
    /// call, a kernel compile, a lost device).
    pub fn is_device_error(&self) -> bool {
        self.backend_error().is_some_and(backend_api::Error::is_device_error)
    }
}

/// Result alias of this crate.
pub type Result<T, E = ProverError> = std::result::Result<T, E>;
