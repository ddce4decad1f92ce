//! The in-place transpose: the shared plan, executed on the host with a tracked scratch.

use backend_api::plan::TransposePlan;
use backend_api::{MatrixShape, Result, validate};

use crate::ToyBackend;
use crate::memory::zeroed;

/// [`crate::ToyBackend::transpose_in_place`] over a host slice.
///
/// # Errors
/// [`backend_api::Error::LengthMismatch`] when `buf` is not `shape.len()` long; the plan's errors
/// ([`backend_api::Error::ScratchTooSmall`]); the scratch allocation's.
pub(crate) fn transpose_in_place(
    backend: &ToyBackend,
    buf: &mut [u64],
    shape: MatrixShape,
    scratch_cap: usize,
) -> Result<()> {
    validate::transpose(shape, buf.len(), scratch_cap)?;
    let plan = TransposePlan::new(shape, scratch_cap)?;
    let mut scratch = zeroed(backend, plan.geometry.scratch_elems)?;
    plan.execute_host(buf, scratch.as_mut_slice());
    Ok(())
}
