//! Batched copies, executed in parallel without `unsafe`.
//!
//! A batch is validated first ([`backend_api::copy::validate_batch`]), so nothing moves on error.
//! Its copies are independent: no destination overlaps another range of the batch. That is
//! exactly what lets the borrow checker see it: [`Carved`] splits a buffer at the destination
//! ranges into disjoint `&mut` slices (one per destination) and shared slices for the gaps between
//! them, where every source of the batch must lie. The resulting `(source, destination)` slice
//! pairs are then copied in parallel with rayon, large copies in parallel chunks. The same
//! carving executes the [`Step::Copies`](backend_api::plan::Step::Copies) steps of the in-place
//! transpose, over the matrix buffer and the scratch.

use backend_api::copy::{BatchTarget, validate_batch};
use std::ops::Range;

use backend_api::field::bit_reverse;
use backend_api::{CopyRange, Error, Result};
use rayon::prelude::*;

use crate::memory::{check_range, par_copy};

/// A buffer split into the destination ranges of a batch (mutable, one per copy) and the gaps
/// between them (shared), where the batch's sources are looked up.
pub(crate) struct Carved<'a> {
    /// `(start offset, slice)` of every gap, in buffer order; a gap may be empty.
    gaps: Vec<(usize, &'a [u64])>,
    /// `(start, end, copy index)` of every destination, in buffer order.
    dst_ranges: Vec<(usize, usize, usize)>,
    /// `(copy index, slice)` of every destination, in buffer order.
    dsts: Vec<(usize, &'a mut [u64])>,
    /// Length of the whole buffer.
    len: usize,
}

impl<'a> Carved<'a> {
    /// Splits `buf` at `dsts`, given as `(start, len, copy index)`; zero-length ranges are ignored.
    ///
    /// # Errors
    /// [`Error::OutOfBounds`] for a range past the end, [`Error::OverlappingCopies`] for two
    /// destinations that overlap.
    pub(crate) fn new(what: &'static str, buf: &'a mut [u64], dsts: &[(usize, usize, usize)]) -> Result<Self> {
        let len = buf.len();
        let mut ranges: Vec<(usize, usize, usize)> = Vec::with_capacity(dsts.len());
        for &(start, n, idx) in dsts.iter().filter(|d| d.1 > 0) {
            check_range(what, start, n, len)?;
            ranges.push((start, start + n, idx));
        }
        ranges.sort_unstable();
        let mut gaps = Vec::with_capacity(ranges.len() + 1);
        let mut out = Vec::with_capacity(ranges.len());
        let mut rest = buf;
        let mut pos = 0;
        for (k, &(start, end, idx)) in ranges.iter().enumerate() {
            if start < pos {
                return Err(overlap(ranges[k - 1], "dst", (start, end, idx), "dst"));
            }
            let (gap, tail) = std::mem::take(&mut rest).split_at_mut(start - pos);
            let (dst, tail) = tail.split_at_mut(end - start);
            gaps.push((pos, &*gap));
            out.push((idx, dst));
            rest = tail;
            pos = end;
        }
        gaps.push((pos, &*rest));
        Ok(Self { gaps, dst_ranges: ranges, dsts: out, len })
    }

    /// The source range `[start, start + n)` of copy `idx`, which must lie inside one gap.
    ///
    /// # Errors
    /// [`Error::OutOfBounds`] past the end, [`Error::OverlappingCopies`] when it overlaps a
    /// destination.
    pub(crate) fn source(&self, what: &'static str, start: usize, n: usize, idx: usize) -> Result<&'a [u64]> {
        check_range(what, start, n, self.len)?;
        // The last gap starting at or before `start` (the first gap starts at 0).
        let g = self.gaps.partition_point(|(s, _)| *s <= start) - 1;
        let (gap_start, gap) = self.gaps[g];
        let off = start - gap_start;
        if n == 0 {
            return Ok(&gap[..0]);
        }
        if off + n <= gap.len() {
            return Ok(&gap[off..off + n]);
        }
        // It reaches into the destination right after this gap.
        let d = self.dst_ranges[g];
        Err(overlap(d, "dst", (start, start + n, idx), "src"))
    }

    /// The destination slices, `(copy index, slice)`.
    pub(crate) fn into_dsts(self) -> Vec<(usize, &'a mut [u64])> {
        self.dsts
    }
}

fn overlap(a: (usize, usize, usize), a_kind: &'static str, b: (usize, usize, usize), b_kind: &'static str) -> Error {
    let ((a, a_kind), (b, b_kind)) = if a.2 <= b.2 { ((a, a_kind), (b, b_kind)) } else { ((b, b_kind), (a, a_kind)) };
    Error::OverlappingCopies {
        first: a.2,
        first_kind: a_kind,
        first_start: a.0,
        first_end: a.1,
        second: b.2,
        second_kind: b_kind,
        second_start: b.0,
        second_end: b.1,
    }
}

/// Copies every `(source, destination)` pair (equal lengths) in parallel.
pub(crate) fn run_pairs(pairs: Vec<(&[u64], &mut [u64])>) {
    pairs.into_par_iter().for_each(|(s, d)| par_copy(d, s));
}

/// [`crate::CpuBackend::batched_copy`]: `copies` from `src` into `dst`.
///
/// # Errors
/// As [`validate_batch`]; nothing moves on error.
pub(crate) fn batched_copy(src: &[u64], dst: &mut [u64], copies: &[CopyRange]) -> Result<()> {
    validate_batch(copies, BatchTarget::Between { src_len: src.len(), dst_len: dst.len() })?;
    let dsts: Vec<_> = copies.iter().enumerate().map(|(i, c)| (c.dst, c.len, i)).collect();
    let carved = Carved::new("copy destination", dst, &dsts)?;
    let pairs = carved.into_dsts().into_iter().map(|(i, d)| (&src[copies[i].src..copies[i].src + d.len()], d));
    run_pairs(pairs.collect());
    Ok(())
}

/// [`crate::CpuBackend::bit_reversed_rows`] on validated arguments: `out` (`rows.len()` rows of
/// `cols`) receives rows `br(rows.start) ..` of the row-major `matrix`, `log_rows` bits reversed.
pub(crate) fn bit_reversed_rows(matrix: &[u64], cols: usize, log_rows: u32, rows: Range<usize>, out: &mut [u64]) {
    // Rows of a few elements are grouped so that each task moves at least a few KiB.
    let per_task = (4096 / cols).max(1);
    out.par_chunks_mut(per_task * cols).enumerate().for_each(|(t, chunk)| {
        for (i, row) in chunk.chunks_mut(cols).enumerate() {
            let r = bit_reverse(rows.start + t * per_task + i, log_rows);
            row.copy_from_slice(&matrix[r * cols..(r + 1) * cols]);
        }
    });
}

/// [`crate::CpuBackend::batched_copy_within`]: `copies` inside `buf`.
///
/// # Errors
/// As [`validate_batch`]; nothing moves on error.
pub(crate) fn batched_copy_within(buf: &mut [u64], copies: &[CopyRange]) -> Result<()> {
    validate_batch(copies, BatchTarget::Within { len: buf.len() })?;
    let dsts: Vec<_> = copies.iter().enumerate().map(|(i, c)| (c.dst, c.len, i)).collect();
    let carved = Carved::new("copy destination", buf, &dsts)?;
    let mut sources = Vec::with_capacity(copies.len());
    for (i, c) in copies.iter().enumerate().filter(|(_, c)| c.len > 0) {
        sources.push((i, carved.source("copy source", c.src, c.len, i)?));
    }
    // Both lists are in copy-index order once the destinations are sorted back.
    let mut dsts = carved.into_dsts();
    dsts.sort_unstable_by_key(|d| d.0);
    let pairs = sources.into_iter().zip(dsts).map(|((_, s), (_, d))| (s, d)).collect();
    run_pairs(pairs);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// The definition: read every source first, then write every destination.
    fn reference(buf: &mut [u64], src: Option<&[u64]>, copies: &[CopyRange]) {
        let from = src.map(|s| s.to_vec()).unwrap_or_else(|| buf.to_vec());
        for c in copies {
            for k in 0..c.len {
                buf[c.dst + k] = from[c.src + k];
            }
        }
    }

    #[test]
    fn random_batches_match_the_reference_or_are_rejected_untouched() {
        // Small buffers (64 elements, copies up to 12) so that overlaps are common and both
        // outcomes are exercised; one batch in 8 also gets a long copy to take the chunked path.
        let mut rng = ChaCha8Rng::seed_from_u64(0xC0FF_EE01);
        let mut outcomes = [0usize; 2];
        for round in 0..4000 {
            let len = if round % 8 == 0 { 200_000 } else { 64 };
            let k = rng.random_range(1..6);
            let copies: Vec<CopyRange> = (0..k)
                .map(|_| {
                    let n = if len > 64 && rng.random_bool(0.3) { 70_000 } else { rng.random_range(0..12) };
                    CopyRange::new(rng.random_range(0..len - n + 4), rng.random_range(0..len - n + 4), n)
                })
                .collect();
            let init: Vec<u64> = (0..len).map(|_| rng.random()).collect();
            let src: Vec<u64> = (0..len).map(|_| rng.random()).collect();

            let mut within = init.clone();
            let ok = batched_copy_within(&mut within, &copies).is_ok();
            let valid = validate_batch(&copies, BatchTarget::Within { len }).is_ok();
            assert_eq!(ok, valid);
            let mut expect = init.clone();
            if ok {
                reference(&mut expect, None, &copies);
            }
            assert_eq!(within, expect, "within {copies:?}");
            outcomes[ok as usize] += 1;

            let mut between = init.clone();
            let ok = batched_copy(&src, &mut between, &copies).is_ok();
            assert_eq!(ok, validate_batch(&copies, BatchTarget::Between { src_len: len, dst_len: len }).is_ok());
            let mut expect = init.clone();
            if ok {
                reference(&mut expect, Some(&src), &copies);
            }
            assert_eq!(between, expect, "between {copies:?}");
        }
        assert!(outcomes[0] > 300 && outcomes[1] > 300, "both outcomes exercised: {outcomes:?}");
    }

    #[test]
    fn carving_rejects_what_validation_would() {
        let mut buf = vec![0u64; 100];
        let err = Carved::new("dst", &mut buf, &[(10, 5, 0), (12, 5, 1)]).err().unwrap();
        assert!(matches!(err, Error::OverlappingCopies { first: 0, second: 1, .. }), "{err}");
        let err = Carved::new("dst", &mut buf, &[(98, 5, 0)]).err().unwrap();
        assert!(matches!(err, Error::OutOfBounds { start: 98, end: 103, len: 100, .. }), "{err}");
        let carved = Carved::new("dst", &mut buf, &[(10, 5, 0), (40, 5, 1)]).unwrap();
        assert_eq!(carved.source("src", 15, 25, 2).unwrap().len(), 25);
        assert_eq!(carved.source("src", 0, 10, 2).unwrap().len(), 10);
        let err = carved.source("src", 35, 6, 2).unwrap_err();
        assert!(matches!(err, Error::OverlappingCopies { first: 1, second: 2, second_kind: "src", .. }), "{err}");
        let err = carved.source("src", 95, 6, 2).unwrap_err();
        assert!(matches!(err, Error::OutOfBounds { .. }), "{err}");
    }
}
