//! Goldilocks <-> `u64` reinterpretation: casts, never copies.
//!
//! Plonky3's `Goldilocks` is `#[repr(transparent)]` over one `u64` (possibly non-canonical,
//! which the backends accept: CONVENTIONS.md, "Field"), so a slice or `Vec` of one is a slice or
//! `Vec` of the other with the same length, size and alignment.

use backend_api::Error;
use p3_goldilocks::Goldilocks;
use p3_matrix::Matrix;
use rayon::prelude::*;

// The layout facts the casts below rely on, checked at compile time.
const _: () = assert!(size_of::<Goldilocks>() == size_of::<u64>());
const _: () = assert!(align_of::<Goldilocks>() == align_of::<u64>());

/// The `u64` words of a Goldilocks slice, in place.
pub(crate) fn as_words(values: &[Goldilocks]) -> &[u64] {
    // SAFETY: Goldilocks is repr(transparent) over u64 (same size and alignment, checked above),
    // every bit pattern of a Goldilocks is a valid u64, and the borrow's lifetime carries over.
    unsafe { std::slice::from_raw_parts(values.as_ptr().cast::<u64>(), values.len()) }
}

/// A `Vec<u64>` of field elements as a `Vec<Goldilocks>`, without touching the elements.
///
/// Any `u64` is a valid Goldilocks (its value mod p); the backends' LDE outputs are canonical.
pub(crate) fn into_field_vec(words: Vec<u64>) -> Vec<Goldilocks> {
    let mut words = std::mem::ManuallyDrop::new(words);
    let (ptr, len, cap) = (words.as_mut_ptr(), words.len(), words.capacity());
    // SAFETY: the allocation was made by Vec<u64> with capacity `cap`; Goldilocks has the same
    // size and alignment as u64 (checked above), so the allocator sees the same layout when the
    // new Vec frees it; every u64 is a valid Goldilocks; `words` is not dropped (ManuallyDrop),
    // so the allocation has exactly one owner.
    unsafe { Vec::from_raw_parts(ptr.cast::<Goldilocks>(), len, cap) }
}

/// A `Vec<Goldilocks>` as its `Vec<u64>` of words, without touching the elements (the inverse of
/// [`into_field_vec`]).
pub(crate) fn into_word_vec(values: Vec<Goldilocks>) -> Vec<u64> {
    let mut values = std::mem::ManuallyDrop::new(values);
    let (ptr, len, cap) = (values.as_mut_ptr(), values.len(), values.capacity());
    // SAFETY: as in `into_field_vec`, the other way: the allocation was made for `cap` elements
    // of a type with u64's size and alignment, every Goldilocks is a valid u64, and `values` is
    // not dropped, so the allocation has one owner.
    unsafe { Vec::from_raw_parts(ptr.cast::<u64>(), len, cap) }
}

/// Writes row `r` of every matrix of `members`, concatenated in order, to row `r` of the row-major
/// `out` (as many columns as their widths sum to): the leaf preimage of several matrices of one
/// height.
///
/// # Errors
/// [`Error::InvalidArgument`] when a matrix has no row `r` below its stated height (its `Matrix`
/// implementation is inconsistent).
pub(crate) fn concat_rows<M: Matrix<Goldilocks>>(members: &[&M], out: &mut [u64]) -> backend_api::Result<()> {
    let width: usize = members.iter().map(|m| m.width()).sum();
    if width == 0 {
        return Ok(());
    }
    out.par_chunks_mut(width).enumerate().try_for_each(|(r, out)| {
        let mut at = 0;
        for m in members {
            let row = m.row_slice(r).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "a committed matrix of height {} has no row {r} (its Matrix implementation is inconsistent)",
                    m.height()
                ))
            })?;
            out[at..at + row.len()].copy_from_slice(as_words(&row));
            at += row.len();
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use p3_field::PrimeField64;

    #[test]
    fn casts_keep_every_word_including_non_canonical_ones() {
        let p = 0xFFFF_FFFF_0000_0001u64;
        let words = vec![0, 1, p - 1, p, p + 1, u64::MAX];
        let field = into_field_vec(words.clone());
        let canonical: Vec<u64> = field.iter().map(|x| x.as_canonical_u64()).collect();
        assert_eq!(canonical, [0, 1, p - 1, 0, 1, u64::MAX - p]);
        assert_eq!(as_words(&field), words.as_slice());
        let made: Vec<Goldilocks> = words.iter().map(|&w| Goldilocks::new(w)).collect();
        assert_eq!(as_words(&made), words.as_slice());
    }
}
