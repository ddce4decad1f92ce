//! Each [`RawBackend`] method's contract as one check: the arguments of the call, and that every
//! buffer belongs to the instance it is passed to.
//!
//! The checked front ([`crate::Backend`]) runs the check named after the method before it calls
//! the port, so the `unsafe` call that follows is sound. A port may run the same check again at the
//! entry of its method in debug builds ([`debug_assert_holds`]): CUDA and wgpu do, so that unsafe
//! code which breaks a contract stops there, in tests, instead of reaching a kernel that writes by
//! computed addresses.

use std::ops::Range;

use crate::backend::{DeviceBuffer, LeafJob};
use crate::copy::{BatchTarget, validate_batch};
use crate::error::Result;
use crate::port::RawBackend;
use crate::quotient::QuotientCall;
use crate::shape::{CopyRange, LdeParams, LeafSpec, MatrixShape, RowStride, TreeShape};
use crate::validate;

/// Refuses `buf` unless `backend` allocated it ([`validate::owned`]).
///
/// # Errors
/// [`crate::Error::ForeignBuffer`].
pub fn owned<B: RawBackend + ?Sized>(backend: &B, buf: &B::Buffer, what: &'static str) -> Result<()> {
    validate::owned(backend.tracker(), buf.tracker(), std::any::type_name::<B>(), what)
}

/// Panics, in debug builds only, when `check` fails: a port's assertion, at the entry of a raw
/// method, that the call keeps the method's contract. A no-op in release builds.
///
/// # Panics
/// In debug builds, when `check` returns an error; the message names `what` and the error.
#[track_caller]
pub fn debug_assert_holds(what: &str, check: impl FnOnce() -> Result<()>) {
    if cfg!(debug_assertions)
        && let Err(e) = check()
    {
        panic!("{what}: a raw call outside its contract (the checked front refuses it): {e}");
    }
}

/// [`RawBackend::write`].
///
/// # Errors
/// The front's refusals of the call.
pub fn write<B: RawBackend + ?Sized>(backend: &B, buf: &B::Buffer, offset: usize, host_len: usize) -> Result<()> {
    owned(backend, buf, "write")?;
    validate::write(buf.len(), offset, host_len)
}

/// [`RawBackend::download`].
///
/// # Errors
/// The front's refusals of the call.
pub fn download<B: RawBackend + ?Sized>(backend: &B, buf: &B::Buffer, offset: usize, out_len: usize) -> Result<()> {
    owned(backend, buf, "download")?;
    validate::download(buf.len(), offset, out_len)
}

/// [`RawBackend::queue_download`].
///
/// # Errors
/// The front's refusals of the call.
pub fn queue_download<B: RawBackend + ?Sized>(backend: &B, buf: &B::Buffer) -> Result<()> {
    owned(backend, buf, "queue_download")
}

/// [`RawBackend::transpose_in_place`].
///
/// # Errors
/// The front's refusals of the call.
pub fn transpose_in_place<B: RawBackend + ?Sized>(
    backend: &B,
    buf: &B::Buffer,
    shape: MatrixShape,
    scratch_cap: usize,
) -> Result<()> {
    owned(backend, buf, "transpose_in_place")?;
    validate::transpose(shape, buf.len(), scratch_cap).map(drop)
}

/// [`RawBackend::batched_copy`].
///
/// # Errors
/// The front's refusals of the call.
pub fn batched_copy<B: RawBackend + ?Sized>(
    backend: &B,
    src: &B::Buffer,
    dst: &B::Buffer,
    copies: &[CopyRange],
) -> Result<()> {
    owned(backend, src, "batched_copy source")?;
    owned(backend, dst, "batched_copy destination")?;
    validate_batch(copies, BatchTarget::Between { src_len: src.len(), dst_len: dst.len() })
}

/// [`RawBackend::batched_copy_within`].
///
/// # Errors
/// The front's refusals of the call.
pub fn batched_copy_within<B: RawBackend + ?Sized>(backend: &B, buf: &B::Buffer, copies: &[CopyRange]) -> Result<()> {
    owned(backend, buf, "batched_copy_within")?;
    validate_batch(copies, BatchTarget::Within { len: buf.len() })
}

/// [`RawBackend::bit_reversed_rows`].
///
/// # Errors
/// The front's refusals of the call.
pub fn bit_reversed_rows<B: RawBackend + ?Sized>(
    backend: &B,
    src: &B::Buffer,
    src_at: usize,
    shape: MatrixShape,
    rows: &Range<usize>,
    dst: &B::Buffer,
    dst_at: usize,
) -> Result<()> {
    owned(backend, src, "bit_reversed_rows source")?;
    owned(backend, dst, "bit_reversed_rows destination")?;
    validate::bit_reversed_rows(shape, rows, src.len(), src_at, dst.len(), dst_at)
}

/// [`RawBackend::hash_leaves_into`].
///
/// # Errors
/// The front's refusals of the call.
pub fn hash_leaves_into<B: RawBackend + ?Sized>(
    backend: &B,
    matrix: &B::Buffer,
    shape: MatrixShape,
    spec: &LeafSpec,
    out: &B::Buffer,
    out_digest: usize,
) -> Result<()> {
    owned(backend, matrix, "hash_leaves_into matrix")?;
    owned(backend, out, "hash_leaves_into output")?;
    validate::hash_leaves(shape, spec, matrix.len(), out.len(), out_digest).map(drop)
}

/// [`RawBackend::hash_leaves_from_host`].
///
/// # Errors
/// The front's refusals of the call.
pub fn hash_leaves_from_host<B: RawBackend + ?Sized>(
    backend: &B,
    matrix_len: usize,
    shape: MatrixShape,
    spec: &LeafSpec,
    out: &B::Buffer,
    out_digest: usize,
) -> Result<()> {
    owned(backend, out, "hash_leaves_from_host output")?;
    validate::hash_leaves(shape, spec, matrix_len, out.len(), out_digest).map(drop)
}

/// [`RawBackend::hash_leaves_then_transpose`].
///
/// # Errors
/// The front's refusals of the call.
pub fn hash_leaves_then_transpose<B: RawBackend + ?Sized>(
    backend: &B,
    buf: &B::Buffer,
    shape: MatrixShape,
    jobs: &[LeafJob<'_, B::Buffer>],
    scratch_cap: usize,
) -> Result<()> {
    owned(backend, buf, "hash_leaves_then_transpose matrix")?;
    for job in jobs {
        owned(backend, job.out, "hash_leaves_then_transpose output")?;
    }
    let specs: Vec<_> = jobs.iter().map(|j| (j.spec, j.out.len(), j.out_digest)).collect();
    validate::leaves_then_transpose(shape, buf.len(), &specs, scratch_cap).map(drop)
}

/// [`RawBackend::merkle_tree_in_place`].
///
/// # Errors
/// The front's refusals of the call.
pub fn merkle_tree_in_place<B: RawBackend + ?Sized>(backend: &B, nodes: &B::Buffer, tree: TreeShape) -> Result<()> {
    owned(backend, nodes, "merkle_tree_in_place")?;
    validate::merkle_tree(tree, nodes.len())
}

/// [`RawBackend::coset_lde_in_place`].
///
/// # Errors
/// The front's refusals of the call.
pub fn coset_lde_in_place<B: RawBackend + ?Sized>(backend: &B, buf: &B::Buffer, params: &LdeParams) -> Result<()> {
    owned(backend, buf, "coset_lde_in_place")?;
    validate::coset_lde_in_place(params, buf.len())
}

/// [`RawBackend::coset_lde_from_host`].
///
/// # Errors
/// The front's refusals of the call.
pub fn coset_lde_from_host<B: RawBackend + ?Sized>(
    backend: &B,
    buf: &B::Buffer,
    trace_len: usize,
    params: &LdeParams,
) -> Result<()> {
    owned(backend, buf, "coset_lde_from_host")?;
    validate::coset_lde_from_host(params, trace_len, buf.len())
}

/// [`RawBackend::coset_lde`] and [`RawBackend::coset_lde_owned`].
///
/// # Errors
/// The front's refusals of the call.
pub fn coset_lde<B: RawBackend + ?Sized>(backend: &B, trace: &B::Buffer, params: &LdeParams) -> Result<()> {
    owned(backend, trace, "coset_lde")?;
    validate::coset_lde(params, trace.len())
}

/// [`RawBackend::row_dot_products`].
///
/// # Errors
/// The front's refusals of the call.
pub fn row_dot_products<B: RawBackend + ?Sized>(
    backend: &B,
    matrix: &B::Buffer,
    shape: MatrixShape,
    coeffs_len: usize,
    out_len: usize,
) -> Result<()> {
    owned(backend, matrix, "row_dot_products")?;
    validate::row_dot_products(shape, matrix.len(), coeffs_len, out_len).map(drop)
}

/// [`RawBackend::column_dot_products`].
///
/// # Errors
/// The front's refusals of the call.
pub fn column_dot_products<B: RawBackend + ?Sized>(
    backend: &B,
    matrix: &B::Buffer,
    shape: MatrixShape,
    rows: RowStride,
    weights_len: usize,
    out_len: usize,
) -> Result<()> {
    owned(backend, matrix, "column_dot_products")?;
    validate::column_dot_products(shape, matrix.len(), rows, weights_len, out_len).map(drop)
}

/// [`RawBackend::fri_fold`].
///
/// # Errors
/// The front's refusals of the call.
pub fn fri_fold<B: RawBackend + ?Sized>(
    backend: &B,
    input: &B::Buffer,
    beta_len: usize,
    addend: Option<(&B::Buffer, usize)>,
    out: &B::Buffer,
) -> Result<()> {
    owned(backend, input, "fri_fold input")?;
    owned(backend, out, "fri_fold output")?;
    if let Some((buf, _)) = addend {
        owned(backend, buf, "fri_fold addend")?;
    }
    validate::fri_fold(input.len(), beta_len, addend.map(|(b, g)| (b.len(), g)), out.len()).map(drop)
}

/// [`RawBackend::reduce_openings`].
///
/// # Errors
/// The front's refusals of the call.
pub fn reduce_openings<B: RawBackend + ?Sized>(
    backend: &B,
    matrix: &B::Buffer,
    shape: MatrixShape,
    call: &crate::open::ReductionCall<'_>,
    acc: &B::Buffer,
) -> Result<()> {
    owned(backend, matrix, "reduce_openings matrix")?;
    owned(backend, acc, "reduce_openings accumulator")?;
    validate::reduce_openings(shape, matrix.len(), call, acc.len()).map(drop)
}

/// [`RawBackend::quotient_values`].
///
/// # Errors
/// The front's refusals of the call.
pub fn quotient_values<B: RawBackend + ?Sized>(
    backend: &B,
    lde: &B::Buffer,
    shape: MatrixShape,
    call: &QuotientCall<'_>,
    out: &B::Buffer,
) -> Result<()> {
    owned(backend, lde, "quotient_values LDE")?;
    owned(backend, out, "quotient_values output")?;
    validate::quotient_values(shape, lde.len(), call, out.len()).map(drop)
}
