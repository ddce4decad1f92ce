//! Downloading an LDE straight into bit-reversed row order.
//!
//! The PCS wants the LDE's rows at bit-reversed indices. Rather than download the natural-order
//! LDE and permute it in place afterwards (a second pass over the whole matrix, and a
//! single-threaded first touch of every page by the driver's copy), the download goes through
//! two staging chunks of about [`STAGING_BYTES`]: while the backend copies chunk `k + 1` into one,
//! rayon scatters the rows of chunk `k` from the other to their bit-reversed places in the
//! output, which they touch first, in parallel.

use backend_api::{Backend, Result};
use p3_util::reverse_bits_len;
use rayon::prelude::*;

/// Bytes per staging chunk (two are live during a download).
pub(crate) const STAGING_BYTES: usize = 32 << 20;

/// A raw output pointer that rayon tasks may share: each task writes rows no other task writes.
#[derive(Clone, Copy)]
struct RowsOut(*mut u64);

// SAFETY: the pointer is only used to write disjoint rows of one exclusively borrowed
// allocation (see `scatter`), so sending it to other threads cannot create a data race.
unsafe impl Send for RowsOut {}
// SAFETY: as above; shared references only copy the pointer.
unsafe impl Sync for RowsOut {}

impl RowsOut {
    /// The element pointer `offset` elements in (a method, so closures capture the whole
    /// `RowsOut` rather than its raw-pointer field).
    ///
    /// # Safety
    /// `offset` is within the allocation (or one past its end).
    unsafe fn at(self, offset: usize) -> *mut u64 {
        // SAFETY: the caller keeps `offset` within the allocation.
        unsafe { self.0.add(offset) }
    }
}

/// Downloads the row-major `rows x cols` matrix that starts at element `at` of `buf` (rows a
/// power of two) so that output row `br(r)` holds row `r` (`br` reverses `log2(rows)` bits),
/// staging `chunk_rows` rows at a time.
///
/// # Errors
/// The backend's download errors; nothing is returned then (the partial output is freed).
pub(crate) fn download_bit_reversed<B: Backend>(
    backend: &B,
    buf: &B::Buffer,
    at: usize,
    rows: usize,
    cols: usize,
    chunk_rows: usize,
) -> Result<Vec<u64>> {
    debug_assert!(rows.is_power_of_two() && cols > 0 && chunk_rows > 0);
    let chunk_rows = chunk_rows.min(rows);
    let log_rows = rows.trailing_zeros();
    let total = rows * cols;
    let mut out: Vec<u64> = Vec::with_capacity(total);
    let dst = RowsOut(out.as_mut_ptr());
    let mut cur = vec![0u64; chunk_rows * cols];
    let mut next = vec![0u64; chunk_rows * cols];
    let chunk = |k: usize| {
        let start = k * chunk_rows;
        (start, chunk_rows.min(rows - start))
    };
    let chunks = rows.div_ceil(chunk_rows);
    let (start, len) = chunk(0);
    backend.download(buf, at + start * cols, &mut cur[..len * cols])?;
    for k in 0..chunks {
        let (start, len) = chunk(k);
        let (fetched, ()) = rayon::join(
            || match k + 1 < chunks {
                true => {
                    let (s, l) = chunk(k + 1);
                    backend.download(buf, at + s * cols, &mut next[..l * cols])
                }
                false => Ok(()),
            },
            || scatter(&cur[..len * cols], start, cols, log_rows, dst),
        );
        fetched?;
        std::mem::swap(&mut cur, &mut next);
    }
    // SAFETY: the loop ran every chunk, and the chunks cover rows 0..rows once each; `scatter`
    // wrote each of them to row br(r) < rows, a bijection, so all `total` elements (u64: no
    // invalid values) of the reserved capacity are initialised.
    unsafe { out.set_len(total) };
    Ok(out)
}

/// Copies the rows of `chunk` (rows `first..` of the matrix) to rows `br(first + i)` of `dst`.
fn scatter(chunk: &[u64], first: usize, cols: usize, log_rows: u32, dst: RowsOut) {
    chunk.par_chunks_exact(cols).enumerate().for_each(|(i, row)| {
        let to = reverse_bits_len(first + i, log_rows as usize);
        // SAFETY: `dst` has capacity for 2^log_rows rows of `cols` and `to` < 2^log_rows; the
        // row indices `first + i` are distinct across all calls of one download and bit reversal
        // is a bijection, so no two writes touch the same row, and nothing reads `dst` until
        // every write has finished (rayon joins before `download_bit_reversed` goes on). `row`
        // is a distinct allocation (the staging chunk).
        unsafe { std::ptr::copy_nonoverlapping(row.as_ptr(), dst.at(to * cols), cols) };
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use backend_cpu::CpuBackend;

    #[test]
    fn every_chunking_gives_the_naive_bit_reversal() {
        let backend = CpuBackend::new();
        for (log_rows, cols) in [(0, 1), (0, 3), (1, 2), (3, 5), (6, 1), (7, 3)] {
            let rows = 1usize << log_rows;
            let natural: Vec<u64> = (0..(rows * cols) as u64).map(|x| x.wrapping_mul(0x9E37_79B9_7F4A_7C15)).collect();
            // The reference: output row j is input row j with its log_rows bits reversed,
            // computed bit by bit.
            let mut want = vec![0; rows * cols];
            for j in 0..rows {
                let src = (0..log_rows).fold(0, |acc, b| acc | ((j >> b) & 1) << (log_rows - 1 - b));
                want[j * cols..(j + 1) * cols].copy_from_slice(&natural[src * cols..(src + 1) * cols]);
            }
            let buf = backend.upload(&natural).unwrap();
            // The same matrix behind 7 other words: `at` shifts every read.
            let behind = backend.upload(&[[9; 7].as_slice(), &natural].concat()).unwrap();
            for chunk_rows in [1, 2, 3, rows, rows + 5] {
                let got = download_bit_reversed(&backend, &buf, 0, rows, cols, chunk_rows).unwrap();
                assert_eq!(got, want, "2^{log_rows} x {cols}, chunks of {chunk_rows} rows");
                let got = download_bit_reversed(&backend, &behind, 7, rows, cols, chunk_rows).unwrap();
                assert_eq!(got, want, "2^{log_rows} x {cols} at 7, chunks of {chunk_rows} rows");
            }
        }
    }

    #[test]
    fn a_failing_download_returns_its_error() {
        // A buffer shorter than the shape claims: the first out-of-range chunk fails cleanly.
        let backend = CpuBackend::new();
        let buf = backend.upload(&[1, 2, 3, 4, 5, 6]).unwrap();
        let err = download_bit_reversed(&backend, &buf, 0, 4, 2, 1).unwrap_err();
        assert!(matches!(err, backend_api::Error::OutOfBounds { .. }), "{err}");
    }
}
