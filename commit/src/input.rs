//! Where a commit's trace comes from: host data, a device buffer, a raw file, or a seeded
//! synthetic table.

use std::fs::File;
#[cfg(not(unix))]
use std::io::Read;
use std::io::{BufWriter, Write};
use std::path::Path;

use backend_api::{Backend, ELEM_BYTES, MatrixShape};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use crate::error::{ProverError, Result};

/// The trace a commit starts from: row-major, `shape.rows x shape.cols` elements.
pub enum TraceInput<'a, B: Backend> {
    /// Host data; the commit uploads it.
    Host {
        /// Row-major elements, exactly `shape.rows * shape.cols` of them.
        data: &'a [u64],
        /// The trace shape.
        shape: MatrixShape,
    },
    /// A trace already on `backend`'s device. The commit takes it: the LDE extends it from where
    /// it is and frees it ([`Backend::coset_lde_owned`]), or, when a snapshot is asked for,
    /// extends it unchanged ([`Backend::coset_lde`]) and then transposes it in place into the
    /// column-major snapshot.
    Device {
        /// Row-major elements, exactly `shape.rows * shape.cols` of them.
        buffer: B::Buffer,
        /// The trace shape.
        shape: MatrixShape,
    },
}

impl<'a, B: Backend> TraceInput<'a, B> {
    /// Host data to upload: any slice, and in particular the backend's own host memory
    /// ([`Backend::alloc_host`], passed as `&buffer` through `Deref`), which CUDA uploads directly
    /// from page-locked memory at bus speed instead of through its staging ring. Fill such a
    /// buffer in place ([`synthetic_trace_into`], [`read_trace_file_into`]) rather than copying a
    /// `Vec` into it.
    pub fn host(data: &'a [u64], shape: MatrixShape) -> Self {
        TraceInput::Host { data, shape }
    }

    /// A trace already on the device.
    pub fn device(buffer: B::Buffer, shape: MatrixShape) -> Self {
        TraceInput::Device { buffer, shape }
    }

    /// The trace shape as given (validated by the commit, not here).
    pub fn shape(&self) -> MatrixShape {
        match self {
            TraceInput::Host { shape, .. } | TraceInput::Device { shape, .. } => *shape,
        }
    }

    /// Elements the input actually holds.
    pub fn len(&self) -> usize {
        match self {
            TraceInput::Host { data, .. } => data.len(),
            TraceInput::Device { buffer, .. } => backend_api::DeviceBuffer::len(buffer),
        }
    }

    /// Whether the input holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A seeded synthetic trace of `shape.len()` uniformly random `u64`s (ChaCha8, so about one in
/// 2^32 values is non-canonical; the LDE reduces them like any other input).
///
/// Element `i` is the `i`-th `u64` of the ChaCha8 stream seeded with `seed` (words `2i` and
/// `2i + 1`), so the table is the same bytes as drawing the stream in order; it is generated in
/// parallel, each chunk from its own generator positioned at the chunk's first word.
pub fn synthetic_trace(shape: MatrixShape, seed: u64) -> Vec<u64> {
    let mut out = vec![0u64; shape.len()];
    synthetic_trace_into(&mut out, seed);
    out
}

/// Fills `out` with the first `out.len()` elements of [`synthetic_trace`]'s stream for `seed`, in
/// parallel: the synthetic table generated straight into memory the caller chose, e.g. a
/// backend's host buffer ([`Backend::alloc_host`]).
pub fn synthetic_trace_into(out: &mut [u64], seed: u64) {
    /// Elements per parallel chunk (512 KiB).
    const CHUNK: usize = 1 << 16;
    out.par_chunks_mut(CHUNK).enumerate().for_each(|(i, chunk)| {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_word_pos(2 * (i * CHUNK) as u128);
        chunk.fill_with(|| rng.next_u64());
    });
}

/// Checks that `path` is a regular file of exactly `shape.rows * shape.cols * 8` bytes, without
/// reading it.
///
/// The file is opened without blocking, so a FIFO (or anything else that would wait for a
/// writer) cannot hang the check, and its type is read from the open file: a directory, a FIFO,
/// a device such as `/dev/zero` or a socket is refused. A symbolic link is followed to what it
/// names, which must itself be a regular file.
///
/// # Errors
/// [`ProverError::Input`] when the file cannot be opened, is not a regular file, or has another
/// length (the message gives both lengths and the shape).
pub fn check_trace_file(path: &Path, shape: MatrixShape) -> Result<()> {
    open_trace(path, shape).map(drop)
}

/// Opens `path` for reading as [`check_trace_file`] checks it, and returns the open file: the
/// checks hold for what is read, whatever replaces the path afterwards.
fn open_trace(path: &Path, shape: MatrixShape) -> Result<File> {
    let cannot = |e: std::io::Error| ProverError::input(path, format!("cannot read the trace file: {e}"));
    #[cfg(unix)]
    let file = {
        use rustix::fs::{Mode, OFlags};
        // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
        rustix::fs::open(path, OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC, Mode::empty())
            .map(File::from)
            .map_err(|e| cannot(e.into()))?
    };
    #[cfg(not(unix))]
    let file = File::open(path).map_err(cannot)?;
    let meta = file.metadata().map_err(cannot)?;
    if meta.is_dir() {
        return Err(ProverError::input(path, "cannot read the trace file: the path is a directory"));
    }
    if !meta.is_file() {
        return Err(ProverError::input(
            path,
            format!(
                "cannot read the trace file: it is {}, not a regular file (its length cannot be checked before \
                 reading); write the trace to a regular file first",
                kind_of(&meta.file_type())
            ),
        ));
    }
    let len = meta.len();
    let expected = shape.bytes() as u64;
    if len != expected {
        return Err(ProverError::input(
            path,
            format!(
                "the trace file holds {len} B, but {} rows x {} cols of u64 need {expected} B (rows * cols * 8)",
                shape.rows(),
                shape.cols()
            ),
        ));
    }
    Ok(file)
}

/// What a file type is, in words.
fn kind_of(t: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    if t.is_symlink() {
        "a symbolic link"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_file() {
        "a regular file"
    } else {
        "a special file"
    }
}

/// Reads a raw trace file: `shape.rows * shape.cols` little-endian `u64`, row-major.
///
/// # Errors
/// As [`check_trace_file`], or an I/O error while reading.
pub fn read_trace_file(path: &Path, shape: MatrixShape) -> Result<Vec<u64>> {
    let mut out = vec![0u64; shape.len()];
    read_trace_file_into(path, shape, &mut out)?;
    Ok(out)
}

/// Reads a raw trace file, as [`read_trace_file`], straight into `out` (e.g. a backend's host
/// buffer, [`Backend::alloc_host`]), in parallel chunks of 64 MiB read at their offsets.
///
/// Exactly `shape.bytes()` bytes are read, whatever the file does meanwhile: a file that shrinks
/// while it is read fails with the read, and one whose length differs once the read is done
/// (it grew, or was rewritten) fails too, since its bytes may mix two versions.
///
/// # Errors
/// As [`read_trace_file`]; [`ProverError::Input`] when `out` does not hold `shape`, or when the
/// file changed length while it was read.
pub fn read_trace_file_into(path: &Path, shape: MatrixShape, out: &mut [u64]) -> Result<()> {
    /// Elements per parallel read (64 MiB).
    const CHUNK: usize = 8 << 20;
    read_in_chunks(path, shape, out, CHUNK)
}

/// [`read_trace_file_into`] in parallel reads of `chunk` elements.
fn read_in_chunks(path: &Path, shape: MatrixShape, out: &mut [u64], chunk: usize) -> Result<()> {
    let file = open_trace(path, shape)?;
    read_opened(&file, path, shape, out, chunk)
}

/// Reads the trace from `file`, opened from `path` and checked by [`open_trace`].
fn read_opened(file: &File, path: &Path, shape: MatrixShape, out: &mut [u64], chunk: usize) -> Result<()> {
    if out.len() != shape.len() {
        return Err(ProverError::input(
            path,
            format!(
                "the destination holds {} elements, the trace {} x {} needs {}",
                out.len(),
                shape.rows(),
                shape.cols(),
                shape.len()
            ),
        ));
    }
    let io = |e: std::io::Error| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            ProverError::input(
                path,
                format!("the trace file changed while reading: it ended before {} B", shape.bytes()),
            )
        } else {
            ProverError::input(path, format!("cannot read the trace file: {e}"))
        }
    };
    out.par_chunks_mut(chunk).enumerate().try_for_each(|(i, part)| -> Result<()> {
        read_exact_at(path, file, as_bytes_mut(part), (i * chunk * ELEM_BYTES) as u64).map_err(io)?;
        // The file is little-endian, as the memory of almost every host.
        part.iter_mut().for_each(|x| *x = u64::from_le(*x));
        Ok(())
    })?;
    let now = file.metadata().map_err(io)?.len();
    if now != shape.bytes() as u64 {
        return Err(ProverError::input(
            path,
            format!(
                "the trace file changed while reading: it held {} B when opened and {now} B after the read",
                shape.bytes()
            ),
        ));
    }
    Ok(())
}

/// The bytes of `words`, in memory order.
fn as_bytes_mut(words: &mut [u64]) -> &mut [u8] {
    let len = std::mem::size_of_val(words);
    // SAFETY: every byte of a `u64` slice is initialised, `u8` has alignment 1 and no invalid
    // values, and the returned slice borrows `words` exclusively for its lifetime.
    unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), len) }
}

/// The bytes of `words`, in memory order.
fn as_bytes(words: &[u64]) -> &[u8] {
    // SAFETY: as in `as_bytes_mut`, shared.
    unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), std::mem::size_of_val(words)) }
}

/// Fills `buf` from `file` (opened from `path`) at byte offset `at`.
#[cfg(unix)]
fn read_exact_at(_path: &Path, file: &File, buf: &mut [u8], at: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, at)
}

/// Fills `buf` from the file at `path` at byte offset `at`, through a handle of its own (parallel
/// reads must not share a file position).
#[cfg(not(unix))]
fn read_exact_at(path: &Path, _file: &File, buf: &mut [u8], at: u64) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom};
    let mut own = File::open(path)?;
    own.seek(SeekFrom::Start(at))?;
    own.read_exact(buf)
}

/// Writes `data` to `path` as raw little-endian `u64`.
///
/// The bytes go to a new file in the same directory (created exclusively, so nothing planted
/// under its name is written through), which is then renamed over `path`. Hence:
/// - `path` is never written through a symbolic link: a link there is refused, and a link put
///   there after the check is replaced by the rename, not followed;
/// - an existing regular file is replaced whole, never truncated in place (another hard link to
///   it keeps the old bytes; the new file has the default mode, `0666` less the umask);
/// - a reader of `path` sees the old file or the whole new one, never a partial write, and a
///   failed write leaves `path` as it was.
///
/// # Errors
/// [`ProverError::UnsafePath`] when `path` is a symbolic link or exists as something other than a
/// regular file (a FIFO, a device); [`ProverError::Input`] when it is a directory or on an I/O
/// error.
pub fn write_u64_file(path: &Path, data: &[u64]) -> Result<()> {
    check_output_file(path)?;
    let io = |e: std::io::Error| ProverError::input(path, format!("cannot write {} B: {e}", data.len() * ELEM_BYTES));
    let (tmp, out) = create_beside(path).map_err(io)?;
    let written = (|| {
        if cfg!(target_endian = "little") {
            let mut out = out;
            out.write_all(as_bytes(data))?;
            out.flush()
        } else {
            let mut out = BufWriter::new(out);
            for x in data {
                out.write_all(&x.to_le_bytes())?;
            }
            out.flush()
        }
    })()
    .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(e));
    }
    Ok(())
}

/// Refuses an output path that is a symbolic link or exists as anything but a regular file.
///
/// # Errors
/// As [`write_u64_file`].
pub fn check_output_file(path: &Path) -> Result<()> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(ProverError::input(path, format!("cannot inspect the output file: {e}"))),
    };
    let t = meta.file_type();
    if t.is_symlink() {
        let target = std::fs::read_link(path).map(|t| format!(" (to {})", t.display())).unwrap_or_default();
        return Err(ProverError::UnsafePath {
            path: path.to_owned(),
            problem: format!("a symbolic link{target}; output is never written through a link"),
            fix: "pass the path the link names, or remove the link".into(),
        });
    }
    if t.is_dir() {
        return Err(ProverError::input(path, "cannot write the output: the path is a directory"));
    }
    if !t.is_file() {
        return Err(ProverError::UnsafePath {
            path: path.to_owned(),
            problem: format!("{}, not a regular file", kind_of(&t)),
            fix: "pass the path of a regular file (an existing one is replaced) or of a new one".into(),
        });
    }
    Ok(())
}

/// A new file beside `path` (same directory, so the rename stays on one file system), created
/// exclusively under a fresh name: `.<name>.<pid>.<n>.tmp`.
fn create_beside(path: &Path) -> std::io::Result<(std::path::PathBuf, File)> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "the path names no file"))?;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut last = None;
    for _ in 0..16 {
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".{}.{}.tmp", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
        let tmp = dir.join(tmp_name);
        // `create_new` is O_CREAT | O_EXCL: it fails on any existing name, a link included.
        match std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::ErrorKind::AlreadyExists.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The parallel generator gives the sequential ChaCha8 stream, across chunk boundaries and
    /// for lengths that are not a multiple of the chunk.
    #[test]
    fn synthetic_trace_is_the_sequential_stream() {
        use rand::Rng as _;
        for (rows, cols, seed) in [(1, 1, 0), (4, 3, 5), (1 << 10, 130, 7), (1 << 17, 1, 1), ((1 << 16) + 1, 3, 2)] {
            let shape = MatrixShape::new(rows, cols).unwrap();
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let expected: Vec<u64> = (0..rows * cols).map(|_| rng.random::<u64>()).collect();
            assert!(synthetic_trace(shape, seed) == expected, "{rows} x {cols}, seed {seed}");
            let mut into = vec![u64::MAX; rows * cols];
            synthetic_trace_into(&mut into, seed);
            assert!(into == expected, "into: {rows} x {cols}, seed {seed}");
        }
    }

    #[test]
    fn file_round_trip_and_length_check() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path();
        let path = dir.join("t.bin");
        let shape = MatrixShape::new(4, 3).unwrap();
        let data = synthetic_trace(shape, 5);
        assert_eq!(data, synthetic_trace(shape, 5));
        assert_ne!(data, synthetic_trace(shape, 6));
        write_u64_file(&path, &data).unwrap();
        assert_eq!(std::fs::read(&path).unwrap()[..8], data[0].to_le_bytes());
        assert_eq!(read_trace_file(&path, shape).unwrap(), data);
        let err = read_trace_file(&path, MatrixShape::new(4, 4).unwrap()).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("holds 96 B") && msg.contains("need 128 B"), "{msg}");
        assert_eq!(err.exit_code(), crate::error::EXIT_USAGE);
        // Straight into a caller's buffer, in chunks that do not divide the file (the last one
        // short), and refused into a buffer of another length.
        let shape = MatrixShape::new(7, 5).unwrap();
        let data = synthetic_trace(shape, 9);
        write_u64_file(&path, &data).unwrap();
        for chunk in [1, 3, 8, 35, 1000] {
            let mut out = vec![u64::MAX; 35];
            read_in_chunks(&path, shape, &mut out, chunk).unwrap();
            assert_eq!(out, data, "chunks of {chunk}");
        }
        let mut short = vec![0u64; 34];
        let msg = read_trace_file_into(&path, shape, &mut short).unwrap_err().to_string();
        assert!(msg.contains("the destination holds 34 elements"), "{msg}");
        let err = read_trace_file(&dir.join("missing.bin"), shape).unwrap_err();
        assert!(err.to_string().contains("cannot read the trace file"), "{err}");
    }

    /// A file that shrinks or grows after it was checked and opened: a typed error, after reading
    /// no more than the shape's bytes.
    #[test]
    fn a_file_that_changes_length_while_read_is_an_error() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path();
        let path = dir.join("t.bin");
        let shape = MatrixShape::new(8, 4).unwrap();
        let data = synthetic_trace(shape, 3);
        for (what, new_len) in [("shrinks", 100u64), ("grows", 4096)] {
            write_u64_file(&path, &data).unwrap();
            let file = open_trace(&path, shape).unwrap();
            // Another writer changes the file between the check and the read.
            std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(new_len).unwrap();
            let mut out = vec![0u64; shape.len()];
            let msg = read_opened(&file, &path, shape, &mut out, 5).unwrap_err().to_string();
            assert!(msg.contains("the trace file changed while reading"), "{what}: {msg}");
        }
        // Unchanged, the same calls read it.
        write_u64_file(&path, &data).unwrap();
        let file = open_trace(&path, shape).unwrap();
        let mut out = vec![0u64; shape.len()];
        read_opened(&file, &path, shape, &mut out, 5).unwrap();
        assert_eq!(out, data);
    }
}
