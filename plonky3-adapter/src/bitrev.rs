//! Downloading an LDE straight into bit-reversed row order.
//!
//! The PCS wants the LDE's rows at bit-reversed indices. Rather than download the natural-order
//! LDE and permute it on the host (a second host pass over the whole matrix), the backend gathers
//! each chunk of the output's rows into a device staging buffer
//! ([`Backend::bit_reversed_rows`]), and the chunk is downloaded straight into its place in the
//! output: the host touches every byte once, in the backend's own download (on CUDA, the staging
//! ring copies out with every core). Two staging buffers of at most [`STAGING_BYTES`] alternate,
//! so the gather of chunk `k + 1` is queued before chunk `k` is downloaded.

use backend_api::{Backend, MatrixShape, Result};

/// Bytes per staging buffer (two are live during a download of more than one chunk): 128 MiB, so
/// that one chunk's download fills the CUDA backend's whole staging ring (four 32 MiB page-locked
/// blocks) and its transfers overlap its copies out of the ring.
pub(crate) const STAGING_BYTES: usize = 128 << 20;

/// Rows per chunk of a `rows x cols` matrix: as many as fit [`STAGING_BYTES`], at least one,
/// at most `rows`.
pub(crate) fn chunk_rows(rows: usize, cols: usize) -> usize {
    (STAGING_BYTES / cols.max(1).saturating_mul(size_of::<u64>())).clamp(1, rows.max(1))
}

/// The device bytes [`download_bit_reversed`] allocates for a `rows x cols` matrix: one staging
/// buffer, or two when the matrix takes more than one chunk.
pub(crate) fn staging_bytes(rows: usize, cols: usize) -> usize {
    let chunk = chunk_rows(rows, cols);
    let buffers: usize = if chunk < rows { 2 } else { 1 };
    buffers.saturating_mul(chunk).saturating_mul(cols).saturating_mul(size_of::<u64>())
}

/// Gathers rows `br(start) .. br(start + len - 1)` of the row-major `rows x cols` matrix at
/// element `at` of `buf` into rows `0 .. len` of `dst` (`br` reverses `log2(rows)` bits), with
/// [`Backend::bit_reversed_rows`].
fn gather<B: Backend>(
    backend: &B,
    buf: &B::Buffer,
    at: usize,
    (rows, cols): (usize, usize),
    start: usize,
    len: usize,
    dst: &mut B::Buffer,
) -> Result<()> {
    backend.bit_reversed_rows(buf, at, MatrixShape::new(rows, cols)?, start..start + len, dst, 0)
}

/// Downloads the row-major `rows x cols` matrix that starts at element `at` of `buf` (rows a
/// power of two) so that output row `i` holds row `br(i)`, `chunk_rows` rows at a time.
///
/// # Errors
/// The backend's allocation, copy and download errors; nothing is returned then (the staging
/// buffers and the partial output are freed).
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
    let chunks = rows.div_ceil(chunk_rows);
    let chunk = |k: usize| {
        let start = k * chunk_rows;
        (start, chunk_rows.min(rows - start))
    };
    // Zeroed by the allocator: fresh pages, first written by the download below.
    let mut out = vec![0u64; rows * cols];
    advise_huge_pages(&mut out);
    let mut cur = backend.alloc(chunk_rows * cols)?;
    let mut next = if chunks > 1 { Some(backend.alloc(chunk_rows * cols)?) } else { None };
    let gather_span = tracing::debug_span!("LDE down: gather");
    let download_span = tracing::debug_span!("LDE down: download");
    let (start, len) = chunk(0);
    gather_span.in_scope(|| gather(backend, buf, at, (rows, cols), start, len, &mut cur))?;
    for k in 0..chunks {
        let (start, len) = chunk(k);
        if let (true, Some(next)) = (k + 1 < chunks, next.as_mut()) {
            let (s, l) = chunk(k + 1);
            gather_span.in_scope(|| gather(backend, buf, at, (rows, cols), s, l, next))?;
        }
        download_span.in_scope(|| backend.download(&cur, 0, &mut out[start * cols..(start + len) * cols]))?;
        if let Some(next) = next.as_mut() {
            std::mem::swap(&mut cur, next);
        }
    }
    Ok(out)
}

/// Asks the kernel to back the 2 MiB-aligned interior of `v`, a fresh allocation not yet
/// written, with transparent huge pages: the download's first writes then fault 512 times fewer
/// pages, and freeing the matrix unmaps them as fast (where the system allows `madvise` huge
/// pages; otherwise nothing changes).
fn advise_huge_pages(v: &mut [u64]) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let (base, bytes) = (v.as_mut_ptr() as usize, size_of_val(v));
        let start = base.next_multiple_of(HUGE);
        let end = (base + bytes) & !(HUGE - 1);
        if end > start {
            // SAFETY: `start..end` lies inside `v`'s allocation; the advice changes only how the
            // kernel backs those pages, never their contents.
            let _ = unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = v;
}

/// The row-major `rows x cols` matrix at element `at` of `buf` with its rows bit-reversed, in a
/// new buffer of `rows * cols` elements, on the device.
///
/// # Errors
/// The backend's allocation and copy errors.
pub(crate) fn bit_reversed_on_device<B: Backend>(
    backend: &B,
    buf: &B::Buffer,
    at: usize,
    rows: usize,
    cols: usize,
) -> Result<B::Buffer> {
    let mut out = backend.alloc(rows * cols)?;
    gather(backend, buf, at, (rows, cols), 0, rows, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use backend_api::DeviceBuffer as _;
    use backend_cpu::CpuBackend;

    /// Output row `j` of the bit reversal of `natural`, computed bit by bit.
    fn naive(natural: &[u64], log_rows: usize, cols: usize) -> Vec<u64> {
        let rows = 1usize << log_rows;
        let mut want = vec![0; rows * cols];
        for j in 0..rows {
            let src = (0..log_rows).fold(0, |acc, b| acc | ((j >> b) & 1) << (log_rows - 1 - b));
            want[j * cols..(j + 1) * cols].copy_from_slice(&natural[src * cols..(src + 1) * cols]);
        }
        want
    }

    #[test]
    fn every_chunking_gives_the_naive_bit_reversal() {
        let backend = CpuBackend::new();
        for (log_rows, cols) in [(0, 1), (0, 3), (1, 2), (3, 5), (6, 1), (7, 3)] {
            let rows = 1usize << log_rows;
            let natural: Vec<u64> = (0..(rows * cols) as u64).map(|x| x.wrapping_mul(0x9E37_79B9_7F4A_7C15)).collect();
            let want = naive(&natural, log_rows, cols);
            let buf = backend.upload(&natural).unwrap();
            // The same matrix behind 7 other words: `at` shifts every read.
            let behind = backend.upload(&[[9; 7].as_slice(), &natural].concat()).unwrap();
            for chunk_rows in [1, 2, 3, rows, rows + 5] {
                let got = download_bit_reversed(&backend, &buf, 0, rows, cols, chunk_rows).unwrap();
                assert_eq!(got, want, "2^{log_rows} x {cols}, chunks of {chunk_rows} rows");
                let got = download_bit_reversed(&backend, &behind, 7, rows, cols, chunk_rows).unwrap();
                assert_eq!(got, want, "2^{log_rows} x {cols} at 7, chunks of {chunk_rows} rows");
            }
            let on_device = bit_reversed_on_device(&backend, &behind, 7, rows, cols).unwrap();
            assert_eq!(backend.download_vec(&on_device).unwrap(), want, "2^{log_rows} x {cols} on the device");
            assert_eq!(backend.memory().live, (buf.len() + behind.len() + on_device.len()) * 8, "staging freed");
        }
    }

    #[test]
    fn staging_is_one_buffer_for_one_chunk_and_two_otherwise() {
        let one = chunk_rows(1 << 20, 1 << 25);
        assert_eq!(one, 1, "a row wider than the staging buffer is still one row per chunk");
        assert_eq!(staging_bytes(4, 3), 4 * 3 * 8, "a small matrix is one chunk");
        let rows = STAGING_BYTES / 8;
        assert_eq!(chunk_rows(rows * 4, 1), rows);
        assert_eq!(staging_bytes(rows * 4, 1), 2 * STAGING_BYTES);
        assert_eq!(staging_bytes(rows, 1), STAGING_BYTES, "exactly one chunk");
        assert_eq!(staging_bytes(2, usize::MAX / 4), usize::MAX, "saturates rather than wraps");
    }

    #[test]
    fn a_failing_copy_returns_its_error() {
        // A buffer shorter than the shape claims: the gather's first out-of-range row fails cleanly.
        let backend = CpuBackend::new();
        let buf = backend.upload(&[1, 2, 3, 4, 5, 6]).unwrap();
        let err = download_bit_reversed(&backend, &buf, 0, 4, 2, 1).unwrap_err();
        assert!(matches!(err, backend_api::Error::OutOfBounds { .. }), "{err}");
        assert_eq!(backend.memory().live, 6 * 8, "the staging buffers are freed on error");
    }
}
