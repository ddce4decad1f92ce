//! The one error type every backend returns.

/// Result alias used across every backend.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A driver's own error, kept whole as the `#[source]` of [`Error::Device`]: each backend maps
/// its driver's error type (a CUDA result code, a wgpu error) in one named function.
pub type DriverError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Everything a [`Backend`](crate::Backend) operation can fail with.
///
/// Messages carry the values that went wrong, so a log line is enough to see why.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A matrix or domain shape that no operation accepts.
    #[error("invalid shape: {0}")]
    InvalidShape(String),

    /// A parameter (blowup, shift, split column, column range, ...) outside its domain.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// The transpose scratch cap cannot hold the smallest plan (one block of one row plus one run).
    #[error(
        "scratch cap {cap} B is smaller than one run: a {cols}-column transpose needs at least {min} B \
         (one row block of 1 row plus one run, (cols + 1) * 8 B)"
    )]
    ScratchTooSmall {
        /// The cap that was given, in bytes.
        cap: usize,
        /// Columns of the matrix.
        cols: usize,
        /// The smallest cap that works for this shape, in bytes.
        min: usize,
    },

    /// Two ranges of one copy batch overlap; nothing was copied.
    #[error(
        "copy batch is not independent: copy {first} ({first_kind} [{first_start}, {first_end})) overlaps \
         copy {second} ({second_kind} [{second_start}, {second_end})); no byte was moved"
    )]
    OverlappingCopies {
        /// Index of the first copy in the batch.
        first: usize,
        /// `"src"` or `"dst"`.
        first_kind: &'static str,
        /// Start of the first range, in elements.
        first_start: usize,
        /// End of the first range, in elements.
        first_end: usize,
        /// Index of the second copy in the batch.
        second: usize,
        /// `"src"` or `"dst"`.
        second_kind: &'static str,
        /// Start of the second range, in elements.
        second_start: usize,
        /// End of the second range, in elements.
        second_end: usize,
    },

    /// An access past the end of a buffer.
    #[error("{what}: range [{start}, {end}) is out of bounds for a buffer of {len} elements")]
    OutOfBounds {
        /// What was being accessed.
        what: &'static str,
        /// Start of the range, in elements.
        start: usize,
        /// End of the range, in elements.
        end: usize,
        /// Length of the buffer, in elements.
        len: usize,
    },

    /// A size whose bytes do not fit `usize` (an allocation of more than `usize::MAX / 8`
    /// elements): no device could hold it, so it is refused before the allocator is asked.
    #[error("{what} of {elems} elements: {elems} x 8 B overflows the address space")]
    SizeOverflow {
        /// What was being sized.
        what: &'static str,
        /// The element count asked for.
        elems: usize,
    },

    /// A buffer passed to a backend instance that did not allocate it: another instance (of the
    /// same type or not), or one that has been dropped. Nothing was read or written.
    #[error(
        "{what}: the buffer belongs to another {backend} instance (or to one that was dropped); \
         a buffer is used only with the backend instance that allocated it"
    )]
    ForeignBuffer {
        /// The backend type the buffer was passed to.
        backend: &'static str,
        /// Which argument of which call.
        what: &'static str,
    },

    /// An allocation mark ([`crate::Reserved`]) given back to a tracker that did not make it.
    /// No counter changed: a mark is released or refused only by the tracker that reserved it.
    #[error(
        "{what}: the mark of {bytes} B was reserved in another allocation tracker; no counter changed \
         (a mark goes back to the tracker that made it)"
    )]
    ForeignReservation {
        /// Which call: `release` or `refuse`.
        what: &'static str,
        /// The bytes the mark holds.
        bytes: usize,
    },

    /// A host slice or buffer whose length does not match the call.
    #[error("{what}: expected {expected} elements, got {actual}")]
    LengthMismatch {
        /// What was being checked.
        what: &'static str,
        /// The length the call needs.
        expected: usize,
        /// The length that was given.
        actual: usize,
    },

    /// The device could not allocate; every allocation of the failed call was released.
    #[error("{backend}: out of device memory allocating {requested} B ({free} B free of {total} B)")]
    OutOfMemory {
        /// The backend's name.
        backend: &'static str,
        /// The failed request, in bytes.
        requested: usize,
        /// Free device memory when the request failed, in bytes (as far as the backend knows).
        free: usize,
        /// Total device memory, in bytes.
        total: usize,
    },

    /// The host could not give (or lock) the host memory asked for; nothing stays allocated.
    #[error("{backend}: out of host memory allocating {requested} B of page-locked memory{}: {reason}",
        .available.map(|a| format!(" ({a} B available)")).unwrap_or_default())]
    HostOutOfMemory {
        /// The backend's name.
        backend: &'static str,
        /// The failed request, in bytes.
        requested: usize,
        /// Host memory available when the request failed, in bytes, where the host says.
        available: Option<usize>,
        /// Why, in words: the size, the allocator, or the driver's refusal to lock it.
        reason: String,
    },

    /// The backend cannot be used here (no driver, no adapter, not compiled in).
    #[error("backend {backend} is unavailable: {reason}")]
    BackendUnavailable {
        /// The backend's name.
        backend: &'static str,
        /// Why, in words a user can act on.
        reason: String,
    },

    /// The backend does not implement an optional operation. The optional operations are the
    /// opening products, [`Backend::row_dot_products`](crate::Backend::row_dot_products) and
    /// [`Backend::column_dot_products`](crate::Backend::column_dot_products), FRI's fold,
    /// [`Backend::fri_fold`](crate::Backend::fri_fold), and a STARK's quotient,
    /// [`Backend::quotient_values`](crate::Backend::quotient_values); a caller computes them on the
    /// host instead.
    /// Given only after the call's arguments passed the front's checks; nothing was allocated or
    /// issued. The conformance suite reports it as `SKIPPED`, or as a failure under
    /// `REQUIRE_<PORT>=all`.
    #[error("backend {backend} does not implement {op}")]
    Unsupported {
        /// The backend's name.
        backend: &'static str,
        /// The operation.
        op: &'static str,
    },

    /// A device kernel failed to compile; `log` is the compiler's own output.
    #[error("{backend}: kernel {kernel} failed to compile:\n{log}")]
    KernelCompile {
        /// The backend's name.
        backend: &'static str,
        /// The kernel source file.
        kernel: String,
        /// The compiler log.
        log: String,
    },

    /// A device or driver call failed.
    #[error("{backend}: {op} failed: {source}")]
    Device {
        /// The backend's name.
        backend: &'static str,
        /// The operation or driver call.
        op: String,
        /// The driver's error (its code and message), kept for [`std::error::Error::source`].
        #[source]
        source: DriverError,
    },

    /// The device was lost; buffers of this backend are no longer usable.
    #[error("{backend}: device lost: {reason}")]
    DeviceLost {
        /// The backend's name.
        backend: &'static str,
        /// The reason the driver gave.
        reason: String,
    },

    /// A fault injected by a test hook (see [`crate::fault`]).
    #[error("injected fault at allocation #{index} ({bytes} B)")]
    InjectedFault {
        /// The 0-based index of the allocation that was made to fail.
        index: usize,
        /// The size of that allocation, in bytes.
        bytes: usize,
    },
}

impl Error {
    /// Whether this is an out-of-memory, of the device or of page-locked host memory (real or
    /// injected).
    pub fn is_out_of_memory(&self) -> bool {
        matches!(self, Error::OutOfMemory { .. } | Error::HostOutOfMemory { .. } | Error::InjectedFault { .. })
    }

    /// Whether the caller's input was rejected before any device work: a shape, a parameter, a
    /// scratch cap, a length, a range, a copy batch, a size that overflows, or a buffer of another
    /// backend instance. The same input fails the same way on every backend; fix the input.
    pub fn is_invalid_input(&self) -> bool {
        matches!(
            self,
            Error::InvalidShape(_)
                | Error::InvalidArgument(_)
                | Error::ScratchTooSmall { .. }
                | Error::LengthMismatch { .. }
                | Error::OverlappingCopies { .. }
                | Error::OutOfBounds { .. }
                | Error::SizeOverflow { .. }
                | Error::ForeignBuffer { .. }
                | Error::ForeignReservation { .. }
        )
    }

    /// Whether the device was lost ([`Error::DeviceLost`]): the backend instance and its buffers
    /// are no longer usable; construct a new backend to go on.
    pub fn is_device_lost(&self) -> bool {
        matches!(self, Error::DeviceLost { .. })
    }

    /// Whether the device or its driver failed: a failed driver call ([`Error::Device`], its
    /// driver error as [`std::error::Error::source`]), a kernel that did not compile, or a lost
    /// device.
    pub fn is_device_error(&self) -> bool {
        matches!(self, Error::Device { .. } | Error::KernelCompile { .. } | Error::DeviceLost { .. })
    }

    /// Whether the backend cannot be used here at all ([`Error::BackendUnavailable`]: no driver,
    /// no adapter, not compiled in).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Error::BackendUnavailable { .. })
    }

    /// Whether the backend does not implement the operation ([`Error::Unsupported`]): the caller
    /// can compute the same result another way.
    pub fn is_unsupported(&self) -> bool {
        matches!(self, Error::Unsupported { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_answers_exactly_one_kind_question() {
        let cases: Vec<(Error, &str)> = vec![
            (Error::InvalidShape("0 rows".into()), "invalid"),
            (Error::InvalidArgument("shift 0".into()), "invalid"),
            (Error::ScratchTooSmall { cap: 1, cols: 2, min: 24 }, "invalid"),
            (Error::LengthMismatch { what: "trace", expected: 4, actual: 3 }, "invalid"),
            (Error::OutOfBounds { what: "download", start: 0, end: 9, len: 8 }, "invalid"),
            (Error::SizeOverflow { what: "alloc", elems: usize::MAX }, "invalid"),
            (Error::ForeignBuffer { backend: "cpu", what: "lde" }, "invalid"),
            (Error::ForeignReservation { what: "refuse", bytes: 1000 }, "invalid"),
            (Error::OutOfMemory { backend: "cpu", requested: 8, free: 0, total: 8 }, "oom"),
            (Error::InjectedFault { index: 0, bytes: 8 }, "oom"),
            (Error::BackendUnavailable { backend: "cuda", reason: "no driver".into() }, "unavailable"),
            (Error::Unsupported { backend: "toy", op: "row_dot_products" }, "unsupported"),
            (Error::Device { backend: "wgpu", op: "map".into(), source: "timeout".into() }, "device"),
            (Error::KernelCompile { backend: "cuda", kernel: "lde.cu".into(), log: "error".into() }, "device"),
            (Error::DeviceLost { backend: "wgpu", reason: "reset".into() }, "lost"),
        ];
        for (e, kind) in &cases {
            let answers = [
                ("invalid", e.is_invalid_input()),
                ("oom", e.is_out_of_memory()),
                ("unavailable", e.is_unavailable()),
                ("unsupported", e.is_unsupported()),
                ("device", e.is_device_error() && !e.is_device_lost()),
                ("lost", e.is_device_lost()),
            ];
            let yes: Vec<&str> = answers.iter().filter(|a| a.1).map(|a| a.0).collect();
            assert_eq!(yes, [*kind], "{e}");
        }
        // A lost device is a device error too.
        assert!(cases.last().unwrap().0.is_device_error());
    }
}
