//! Validation of copy batches: every backend rejects the same batches, before any byte moves.

use crate::error::{Error, Result};
use crate::shape::CopyRange;

/// Where a batch copies: within one buffer, or from one buffer to another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchTarget {
    /// Sources and destinations are ranges of the same buffer.
    Within {
        /// The buffer's length, in elements.
        len: usize,
    },
    /// Sources come from one buffer, destinations lie in another.
    Between {
        /// The source buffer's length, in elements.
        src_len: usize,
        /// The destination buffer's length, in elements.
        dst_len: usize,
    },
}

/// Checks a batch: every range in bounds, and the copies independent.
///
/// Independent means no destination range overlaps any other range of the batch that lives in
/// the same buffer: another destination, any source (its own included, within one buffer). Sources
/// may overlap each other. Zero-length copies are allowed and ignored. Runs in `O(k log k)`.
///
/// # Errors
/// [`Error::OutOfBounds`] for a range past its buffer's end, [`Error::OverlappingCopies`] naming
/// the first two overlapping ranges found.
pub fn validate_batch(copies: &[CopyRange], target: BatchTarget) -> Result<()> {
    let (src_len, dst_len) = match target {
        BatchTarget::Within { len } => (len, len),
        BatchTarget::Between { src_len, dst_len } => (src_len, dst_len),
    };
    for c in copies {
        check_range("copy source", c.src, c.len, src_len)?;
        check_range("copy destination", c.dst, c.len, dst_len)?;
    }
    // (start, end, copy index, is_dst); sorted by start, a sweep finds any overlap that involves
    // a destination.
    let mut ranges: Vec<(usize, usize, usize, bool)> = Vec::with_capacity(copies.len() * 2);
    for (i, c) in copies.iter().enumerate().filter(|(_, c)| c.len > 0) {
        ranges.push((c.dst, c.dst + c.len, i, true));
        if matches!(target, BatchTarget::Within { .. }) {
            ranges.push((c.src, c.src + c.len, i, false));
        }
    }
    ranges.sort_unstable();
    // Among the ranges seen so far: the one reaching furthest, and the destination reaching
    // furthest. A new range overlaps an earlier destination if it starts before that one's end;
    // a new destination overlaps any earlier range if it starts before the furthest end.
    let mut furthest: Option<(usize, usize, usize, bool)> = None;
    let mut furthest_dst: Option<(usize, usize, usize, bool)> = None;
    for &r in &ranges {
        let (start, _, _, is_dst) = r;
        let clash = match (is_dst, furthest, furthest_dst) {
            (true, Some(f), _) if start < f.1 => Some(f),
            (_, _, Some(d)) if start < d.1 => Some(d),
            _ => None,
        };
        if let Some(other) = clash {
            return Err(overlap(other, r));
        }
        if furthest.is_none_or(|f| r.1 > f.1) {
            furthest = Some(r);
        }
        if is_dst && furthest_dst.is_none_or(|d| r.1 > d.1) {
            furthest_dst = Some(r);
        }
    }
    Ok(())
}

fn check_range(what: &'static str, start: usize, len: usize, buf_len: usize) -> Result<()> {
    match start.checked_add(len) {
        Some(end) if end <= buf_len => Ok(()),
        end => Err(Error::OutOfBounds { what, start, end: end.unwrap_or(usize::MAX), len: buf_len }),
    }
}

fn overlap(a: (usize, usize, usize, bool), b: (usize, usize, usize, bool)) -> Error {
    let (a, b) = if a.2 <= b.2 { (a, b) } else { (b, a) };
    let kind = |d: bool| if d { "dst" } else { "src" };
    Error::OverlappingCopies {
        first: a.2,
        first_kind: kind(a.3),
        first_start: a.0,
        first_end: a.1,
        second: b.2,
        second_kind: kind(b.3),
        second_start: b.0,
        second_end: b.1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Quadratic reference: the definition, pair by pair.
    fn independent_naive(copies: &[CopyRange], within: bool) -> bool {
        let ov = |a: usize, al: usize, b: usize, bl: usize| al > 0 && bl > 0 && a < b + bl && b < a + al;
        for (i, x) in copies.iter().enumerate() {
            if within && ov(x.src, x.len, x.dst, x.len) {
                return false;
            }
            for y in &copies[i + 1..] {
                if ov(x.dst, x.len, y.dst, y.len) {
                    return false;
                }
                if within && (ov(x.dst, x.len, y.src, y.len) || ov(x.src, x.len, y.dst, y.len)) {
                    return false;
                }
            }
        }
        true
    }

    #[test]
    fn sweep_matches_pairwise_definition() {
        // xorshift keeps this test free of dependencies; sizes small enough that overlaps are common.
        let mut s = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = |m: u64| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s % m) as usize
        };
        let mut seen = [0usize; 2];
        for _ in 0..20_000 {
            let k = 1 + next(5);
            let copies: Vec<_> = (0..k).map(|_| CopyRange::new(next(60), next(60), next(8))).collect();
            for within in [true, false] {
                let target = if within {
                    BatchTarget::Within { len: 80 }
                } else {
                    BatchTarget::Between { src_len: 80, dst_len: 80 }
                };
                let ok = validate_batch(&copies, target).is_ok();
                assert_eq!(ok, independent_naive(&copies, within), "{copies:?} within={within}");
                seen[ok as usize] += 1;
            }
        }
        assert!(seen[0] > 1000 && seen[1] > 1000, "both outcomes exercised: {seen:?}");
    }

    #[test]
    fn out_of_bounds_is_reported() {
        let err = validate_batch(&[CopyRange::new(0, 10, 5)], BatchTarget::Within { len: 12 }).unwrap_err();
        assert!(matches!(err, Error::OutOfBounds { start: 10, end: 15, len: 12, .. }), "{err}");
        let err = validate_batch(&[CopyRange::new(usize::MAX, 0, 2)], BatchTarget::Within { len: 12 }).unwrap_err();
        assert!(matches!(err, Error::OutOfBounds { .. }), "{err}");
    }

    #[test]
    fn overlap_message_names_both_copies() {
        let err = validate_batch(
            &[CopyRange::new(0, 100, 10), CopyRange::new(20, 105, 10)],
            BatchTarget::Between { src_len: 200, dst_len: 200 },
        )
        .unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("copy 0 (dst [100, 110))") && msg.contains("copy 1 (dst [105, 115))"), "{msg}");
    }
}
