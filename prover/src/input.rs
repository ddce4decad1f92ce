//! Where a commit's trace comes from: host data, a device buffer, a raw file, or a seeded
//! synthetic table.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
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
    /// A trace already on `backend`'s device. The commit takes it: it is freed after the LDE, or
    /// transposed in place into the column-major snapshot when one is asked for.
    Device {
        /// Row-major elements, exactly `shape.rows * shape.cols` of them.
        buffer: B::Buffer,
        /// The trace shape.
        shape: MatrixShape,
    },
}

impl<'a, B: Backend> TraceInput<'a, B> {
    /// Host data to upload.
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
    /// Elements per parallel chunk (512 KiB).
    const CHUNK: usize = 1 << 16;
    let mut out = vec![0u64; shape.len()];
    out.par_chunks_mut(CHUNK).enumerate().for_each(|(i, chunk)| {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_word_pos(2 * (i * CHUNK) as u128);
        chunk.fill_with(|| rng.next_u64());
    });
    out
}

/// Checks that `path` is a raw trace file of exactly `shape.rows * shape.cols * 8` bytes, without
/// reading it.
///
/// # Errors
/// [`ProverError::Input`] when the file cannot be opened or has another length (the message
/// gives both lengths and the shape).
pub fn check_trace_file(path: &Path, shape: MatrixShape) -> Result<()> {
    let meta =
        std::fs::metadata(path).map_err(|e| ProverError::input(path, format!("cannot read the trace file: {e}")))?;
    if meta.is_dir() {
        return Err(ProverError::input(path, "cannot read the trace file: the path is a directory"));
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
    Ok(())
}

/// Reads a raw trace file: `shape.rows * shape.cols` little-endian `u64`, row-major.
///
/// # Errors
/// As [`check_trace_file`], or an I/O error while reading.
pub fn read_trace_file(path: &Path, shape: MatrixShape) -> Result<Vec<u64>> {
    check_trace_file(path, shape)?;
    let io = |e: std::io::Error| ProverError::input(path, format!("cannot read the trace file: {e}"));
    let mut file = File::open(path).map_err(io)?;
    let mut bytes = Vec::with_capacity(shape.bytes());
    file.read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() != shape.bytes() {
        return Err(ProverError::input(
            path,
            format!("the trace file changed while reading: read {} B, expected {} B", bytes.len(), shape.bytes()),
        ));
    }
    Ok(bytes.chunks_exact(ELEM_BYTES).map(|b| u64::from_le_bytes(b.try_into().expect("8-byte chunk"))).collect())
}

/// Writes `data` to `path` as raw little-endian `u64`.
///
/// # Errors
/// [`ProverError::Input`] on an I/O error.
pub fn write_u64_file(path: &Path, data: &[u64]) -> Result<()> {
    let io = |e: std::io::Error| ProverError::input(path, format!("cannot write {} B: {e}", data.len() * ELEM_BYTES));
    let mut out = BufWriter::new(File::create(path).map_err(io)?);
    for x in data {
        out.write_all(&x.to_le_bytes()).map_err(io)?;
    }
    out.flush().map_err(io)
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
        }
    }

    #[test]
    fn file_round_trip_and_length_check() {
        let dir = std::env::temp_dir().join(format!("prover-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
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
        let err = read_trace_file(&dir.join("missing.bin"), shape).unwrap_err();
        assert!(err.to_string().contains("cannot read the trace file"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
