//! Batched copies: validated by backend-api first, so nothing moves on error, then copied one
//! after another (the batch's copies are independent, so their order does not matter).

use backend_api::copy::{BatchTarget, validate_batch};
use backend_api::{CopyRange, Result};

/// [`crate::ToyBackend::batched_copy`] over host slices.
///
/// # Errors
/// As [`validate_batch`].
pub(crate) fn batched_copy(src: &[u64], dst: &mut [u64], copies: &[CopyRange]) -> Result<()> {
    validate_batch(copies, BatchTarget::Between { src_len: src.len(), dst_len: dst.len() })?;
    for c in copies {
        dst[c.dst..c.dst + c.len].copy_from_slice(&src[c.src..c.src + c.len]);
    }
    Ok(())
}

/// [`crate::ToyBackend::batched_copy_within`] over one host slice.
///
/// # Errors
/// As [`validate_batch`].
pub(crate) fn batched_copy_within(buf: &mut [u64], copies: &[CopyRange]) -> Result<()> {
    validate_batch(copies, BatchTarget::Within { len: buf.len() })?;
    for c in copies {
        buf.copy_within(c.src..c.src + c.len, c.dst);
    }
    Ok(())
}
