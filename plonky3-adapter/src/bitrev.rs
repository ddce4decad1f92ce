//! Downloading an LDE straight into bit-reversed row order.
//!
//! The PCS wants the LDE's rows at bit-reversed indices. Rather than download the natural-order
//! LDE and permute it on the host (a second host pass over the whole matrix), the backend gathers
//! each chunk of the output's rows into a device staging buffer
//! ([`Backend::bit_reversed_rows`]), and the chunk is downloaded straight into its place in the
//! output: the host touches every byte once, in the backend's own download (on CUDA, the staging
//! ring copies out with every core). Two staging buffers of at most [`STAGING_BYTES`] alternate,
//! so the gather of chunk `k + 1` is queued before chunk `k` is downloaded.

use std::sync::Mutex;

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
    // A kept matrix of this length, whose pages exist, or fresh pages (zeroed by the allocator,
    // first written by the download below).
    let mut out = take_kept(rows * cols).unwrap_or_else(|| {
        let mut fresh = vec![0u64; rows * cols];
        advise_huge_pages(&mut fresh);
        fresh
    });
    let mut cur = backend.alloc(chunk_rows * cols)?;
    let mut next = if chunks > 1 { Some(backend.alloc(chunk_rows * cols)?) } else { None };
    let shape = MatrixShape::new(rows, cols)?;
    // Rows `br(s) .. br(s + l - 1)` into the staging buffer `dst`.
    let gather = |s: usize, l: usize, dst: &mut B::Buffer| backend.bit_reversed_rows(buf, at, shape, s..s + l, dst, 0);
    let gather_span = tracing::debug_span!("LDE down: gather");
    let download_span = tracing::debug_span!("LDE down: download");
    let (start, len) = chunk(0);
    gather_span.in_scope(|| gather(start, len, &mut cur))?;
    for k in 0..chunks {
        let (start, len) = chunk(k);
        if let (true, Some(next)) = (k + 1 < chunks, next.as_mut()) {
            let (s, l) = chunk(k + 1);
            gather_span.in_scope(|| gather(s, l, next))?;
        }
        download_span.in_scope(|| backend.download(&cur, 0, &mut out[start * cols..(start + len) * cols]))?;
        if let Some(next) = next.as_mut() {
            std::mem::swap(&mut cur, next);
        }
    }
    Ok(out)
}

/// Host matrices of dropped prover data ([`keep`]), each taken again by the next download of its
/// length. Writing pages that exist is faster than faulting in fresh ones: on the H200's host a
/// 4.3 GB download took 117 ms into such pages against 265 ms into fresh huge pages and 364 ms
/// into fresh small ones, and freeing that matrix took 15 and 231 ms (`host_path transfers 21
/// 256`, 2026-12-05). Process-wide, at most [`KEPT_MATRICES`] (the oldest goes first);
/// [`crate::free_kept_host_matrices`] frees them.
static KEPT: Mutex<Vec<Vec<u64>>> = Mutex::new(Vec::new());

/// How many matrices [`KEPT`] holds at most: a proof's trace and quotient LDEs, and a second
/// proof's, of different shapes.
pub(crate) const KEPT_MATRICES: usize = 4;

/// Keeps `words` for the next download of its length (see [`KEPT`]).
pub(crate) fn keep(words: Vec<u64>) {
    if words.is_empty() {
        return;
    }
    let oldest = {
        let mut kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
        kept.push(words);
        (kept.len() > KEPT_MATRICES).then(|| kept.remove(0))
    };
    // Freed outside the lock, off the prover's thread.
    if let Some(oldest) = oldest {
        crate::reclaim::drop_later(oldest);
    }
}

/// A kept matrix of exactly `len` words, the most recently kept first.
fn take_kept(len: usize) -> Option<Vec<u64>> {
    let mut kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
    let k = kept.iter().rposition(|v| v.len() == len)?;
    Some(kept.remove(k))
}

/// Held by the unit tests that fill or empty [`KEPT`], one at a time (it is process-wide).
#[cfg(test)]
pub(crate) static POOL_TESTS: Mutex<()> = Mutex::new(());

/// Frees every kept matrix; returns their bytes.
pub(crate) fn free_kept() -> usize {
    let kept = std::mem::take(&mut *KEPT.lock().unwrap_or_else(|e| e.into_inner()));
    kept.iter().map(|v| v.len() * size_of::<u64>()).sum()
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

    /// Holds [`POOL_TESTS`], so the process-wide pool holds what this test put there.
    #[test]
    fn kept_matrices_are_taken_by_length_oldest_evicted_and_overwritten_by_downloads() {
        let _pool = POOL_TESTS.lock().unwrap_or_else(|e| e.into_inner());
        free_kept();
        // Lengths no other download of this test binary asks for.
        let lengths = [1001, 1002, 1003, 1004, 1005];
        let ptrs: Vec<*const u64> = lengths
            .iter()
            .map(|&n| {
                let v = vec![7u64; n];
                let p = v.as_ptr();
                keep(v);
                p
            })
            .collect();
        // Five kept, at most four held: the first (1001) was freed.
        assert_eq!(take_kept(1001), None);
        assert_eq!(take_kept(999), None, "only an exact length is taken");
        let taken = take_kept(1003).expect("kept");
        assert_eq!(taken.as_ptr(), ptrs[2], "the kept allocation itself");
        assert_eq!(take_kept(1003), None, "taken once");
        assert_eq!(free_kept(), (1002 + 1004 + 1005) * 8);
        assert_eq!(free_kept(), 0);

        // A download of a kept length writes every word of the kept matrix, whatever it held.
        let backend = CpuBackend::new();
        let (log_rows, cols) = (5, 37);
        let natural: Vec<u64> = (0..32 * 37).map(|x: u64| x.wrapping_mul(0x9E37_79B9_7F4A_7C15)).collect();
        let garbage = vec![u64::MAX; 32 * 37];
        let p = garbage.as_ptr();
        keep(garbage);
        let buf = backend.upload(&natural).unwrap();
        let got = download_bit_reversed(&backend, &buf, 0, 1 << log_rows, cols, 7).unwrap();
        assert_eq!(got.as_ptr(), p, "the download took the kept matrix");
        assert_eq!(got, naive(&natural, log_rows, cols));
        keep(Vec::new());
        assert_eq!(free_kept(), 0, "an empty vector is not kept");
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
            assert_eq!(backend.memory().live, (buf.len() + behind.len()) * 8, "staging freed");
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
