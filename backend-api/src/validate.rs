//! The checks in front of every backend: one function per [`Backend`](crate::Backend) call.
//!
//! Shapes and parameters ([`MatrixShape`], [`LdeParams`], [`TreeShape`], [`LeafSpec`]) are valid
//! by construction. What a caller can still get wrong is how they meet the buffers and numbers of
//! one call: a buffer that does not hold the shape, a scratch cap too small for one run, a digest
//! offset past the output, a range past a buffer's end, a size whose bytes overflow `usize`.
//!
//! The checked front ([`Backend`](crate::Backend)) calls the function named after the operation,
//! and [`owned`] for every buffer argument, before the backend's
//! [`RawBackend`](crate::RawBackend) method runs; the backend then trusts its parameters (the way
//! wgpu-core validates every call before wgpu-hal runs it). So every backend, a port included,
//! refuses the same calls with the same typed errors, and the conformance suite checks each
//! refusal on every backend. Copy batches are checked by [`crate::copy::validate_batch`].

use std::ops::Range;

use crate::error::{Error, Result};
use crate::fault::AllocTracker;
use crate::plan::TransposeGeometry;
use crate::prepare::Preparation;
use crate::shape::{
    DIGEST_WORDS, ELEM_BYTES, LdeParams, LeafSpec, MAX_DOT_VECTORS, MAX_EXTENSION_DEGREE, MAX_LOG_DOMAIN, MatrixShape,
    RowStride, TreeShape,
};

/// The bytes of an allocation of `len` elements, for [`Backend::alloc`](crate::Backend::alloc)
/// and [`Backend::upload`](crate::Backend::upload).
///
/// # Errors
/// [`Error::SizeOverflow`] when `len * 8` overflows `usize`.
pub fn alloc_bytes(len: usize) -> Result<usize> {
    len.checked_mul(ELEM_BYTES).ok_or(Error::SizeOverflow { what: "allocation", elems: len })
}

/// Host memory of `len` elements ([`Backend::alloc_host`](crate::Backend::alloc_host)) on a host
/// of `host_total` bytes (`None`: unknown). Returns the bytes. `backend` names the backend, asked
/// only for a refusal's error.
///
/// # Errors
/// [`Error::SizeOverflow`] when `len * 8` overflows `usize`; [`Error::HostOutOfMemory`] (named
/// after `backend`) for more bytes than the host has: an overcommitting host would promise them,
/// and fail only when the pages are touched.
pub fn alloc_host(backend: impl FnOnce() -> &'static str, len: usize, host_total: Option<usize>) -> Result<usize> {
    let bytes = alloc_bytes(len)?;
    match host_total {
        Some(total) if bytes > total => Err(Error::HostOutOfMemory {
            backend: backend(),
            requested: bytes,
            available: Some(total),
            reason: format!("more than the host's {total} B of memory"),
        }),
        _ => Ok(bytes),
    }
}

/// A [`Preparation`] for a device of `device_total` bytes (0: unknown) with `device_free` free,
/// on a host of `host_total` bytes (`None`: unknown) ([`Backend::prepare`](crate::Backend::prepare)).
/// A commit the device cannot hold is not prepared for: nothing is built for it, on the host or
/// the device. The least a commit of the prepared LDE holds on the device is the LDE, its twiddle
/// tables and one digest per LDE row (the tree's leaves).
///
/// # Errors
/// [`Error::SizeOverflow`] when the LDE's bytes overflow `usize`; [`Error::OutOfMemory`] when
/// that least, or the pool growth (`device_bytes`), is larger than the device;
/// [`Error::HostOutOfMemory`] when the tables, built on the host, are larger than it.
pub fn preparation(
    prep: &Preparation,
    backend: &'static str,
    device_total: usize,
    device_free: usize,
    host_total: Option<usize>,
) -> Result<()> {
    let lde_elems = prep.lde.map_or(prep.lde_elems, |l| l.lde_shape().len().max(prep.lde_elems));
    let lde =
        lde_elems.checked_mul(ELEM_BYTES).ok_or(Error::SizeOverflow { what: "prepared LDE", elems: lde_elems })?;
    let (tables, digests) = prep.lde.map_or((0, 0), |l| {
        let tables = crate::field::LdeTwiddles::bytes_for(l.log_trace_rows(), l.log_blowup());
        (tables, l.lde_shape().rows().saturating_mul(crate::shape::DIGEST_BYTES))
    });
    let least = lde.saturating_add(tables).saturating_add(digests);
    if device_total > 0 {
        for requested in [least, prep.device_bytes.unwrap_or(0)] {
            if requested > device_total {
                return Err(Error::OutOfMemory { backend, requested, free: device_free, total: device_total });
            }
        }
    }
    match host_total {
        Some(total) if tables > total => Err(Error::HostOutOfMemory {
            backend,
            requested: tables,
            available: Some(total),
            reason: format!("the LDE's twiddle tables, built on the host, are more than its {total} B of memory"),
        }),
        _ => Ok(()),
    }
}

/// A read of `out_len` elements from element `offset` of a buffer of `buf_len` elements
/// ([`Backend::download`](crate::Backend::download)).
///
/// # Errors
/// [`Error::OutOfBounds`] (`"download"`) when the range passes the buffer's end or overflows.
pub fn download(buf_len: usize, offset: usize, out_len: usize) -> Result<()> {
    range("download", offset, out_len, buf_len)
}

/// An in-place transpose of a `shape` matrix held in a buffer of `buf_len` elements under a
/// scratch cap of `scratch_cap` bytes ([`Backend::transpose_in_place`](crate::Backend::transpose_in_place)).
/// Returns the plan's geometry.
///
/// # Errors
/// [`Error::LengthMismatch`] when the buffer does not hold exactly `shape`, then
/// [`TransposeGeometry::new`]'s errors ([`Error::ScratchTooSmall`]).
pub fn transpose(shape: MatrixShape, buf_len: usize, scratch_cap: usize) -> Result<TransposeGeometry> {
    shape.check_len("transpose_in_place matrix", buf_len)?;
    TransposeGeometry::new(shape, scratch_cap)
}

/// Where a validated `hash_leaves_into` call writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeafOutput {
    /// Leaves (digests) to compute.
    pub leaves: usize,
    /// The output element the first digest goes to, `out_digest * DIGEST_WORDS`.
    pub start: usize,
}

/// A leaf hash of a `shape` matrix held in `matrix_len` elements, per `spec`, into an output of
/// `out_len` elements from digest `out_digest` on
/// ([`Backend::hash_leaves_into`](crate::Backend::hash_leaves_into)).
///
/// # Errors
/// [`LeafSpec::validate`]'s errors ([`Error::InvalidArgument`]), [`Error::LengthMismatch`] for
/// the matrix, [`Error::OutOfBounds`] (`"leaf digests"`) for an output too short (an offset whose
/// element index overflows included).
pub fn hash_leaves(
    shape: MatrixShape,
    spec: &LeafSpec,
    matrix_len: usize,
    out_len: usize,
    out_digest: usize,
) -> Result<LeafOutput> {
    let leaves = spec.validate(shape)?;
    shape.check_len("hash_leaves matrix", matrix_len)?;
    let start = out_digest.saturating_mul(DIGEST_WORDS);
    range("leaf digests", start, leaves * DIGEST_WORDS, out_len)?;
    Ok(LeafOutput { leaves, start })
}

/// The calls of [`Backend::hash_leaves_then_transpose`](crate::Backend::hash_leaves_then_transpose)
/// on a `shape` matrix held in `buf_len` elements: each job as `(spec, out_len, out_digest)`, as
/// [`hash_leaves`] checks it, then the transpose under `scratch_cap`, as [`transpose`] checks it.
/// Returns each job's output and the transpose's geometry.
///
/// # Errors
/// The first job's error that [`hash_leaves`] reports, then [`transpose`]'s.
pub fn leaves_then_transpose(
    shape: MatrixShape,
    buf_len: usize,
    jobs: &[(&LeafSpec, usize, usize)],
    scratch_cap: usize,
) -> Result<(Vec<LeafOutput>, TransposeGeometry)> {
    let outputs = jobs
        .iter()
        .map(|&(spec, out_len, out_digest)| hash_leaves(shape, spec, buf_len, out_len, out_digest))
        .collect::<Result<Vec<_>>>()?;
    Ok((outputs, transpose(shape, buf_len, scratch_cap)?))
}

/// A Merkle tree `tree` over a node buffer of `nodes_len` elements
/// ([`Backend::merkle_tree_in_place`](crate::Backend::merkle_tree_in_place)).
///
/// # Errors
/// [`Error::LengthMismatch`] when the buffer is not exactly `tree.words()` long.
pub fn merkle_tree(tree: TreeShape, nodes_len: usize) -> Result<()> {
    if nodes_len != tree.words() {
        return Err(Error::LengthMismatch { what: "merkle node array", expected: tree.words(), actual: nodes_len });
    }
    Ok(())
}

/// A coset LDE with `params` of a trace held in `trace_len` elements
/// ([`Backend::coset_lde`](crate::Backend::coset_lde)).
///
/// # Errors
/// [`Error::LengthMismatch`] when the trace buffer does not hold exactly `params.trace()`.
pub fn coset_lde(params: &LdeParams, trace_len: usize) -> Result<()> {
    params.trace().check_len("coset_lde trace", trace_len)
}

/// A write of `host_len` elements from element `offset` of a buffer of `buf_len` elements
/// ([`Backend::write`](crate::Backend::write)).
///
/// # Errors
/// [`Error::OutOfBounds`] (`"write"`) when the range passes the buffer's end or overflows.
pub fn write(buf_len: usize, offset: usize, host_len: usize) -> Result<()> {
    range("write", offset, host_len, buf_len)
}

/// An in-place coset LDE with `params` in a buffer of `buf_len` elements
/// ([`Backend::coset_lde_in_place`](crate::Backend::coset_lde_in_place)).
///
/// # Errors
/// [`Error::LengthMismatch`] when the buffer does not hold exactly `params.lde_shape()`.
pub fn coset_lde_in_place(params: &LdeParams, buf_len: usize) -> Result<()> {
    params.lde_shape().check_len("coset_lde_in_place buffer", buf_len)
}

/// A coset LDE with `params` from a host trace of `trace_len` elements into a buffer of `buf_len`
/// elements ([`Backend::coset_lde_from_host`](crate::Backend::coset_lde_from_host)).
///
/// # Errors
/// [`Error::LengthMismatch`] (`"coset_lde_from_host trace"`) when the trace does not hold exactly
/// `params.trace()`, then (`"coset_lde_from_host buffer"`) when the buffer does not hold exactly
/// `params.lde_shape()`.
pub fn coset_lde_from_host(params: &LdeParams, trace_len: usize, buf_len: usize) -> Result<()> {
    params.trace().check_len("coset_lde_from_host trace", trace_len)?;
    params.lde_shape().check_len("coset_lde_from_host buffer", buf_len)
}

/// A buffer whose bytes are reserved in `buffer_tracker`, passed to the backend whose tracker is
/// `backend_tracker` (of type `backend`), as the argument `what`: accepted only when the two are
/// the same tracker, the one the backend allocated the buffer through.
///
/// # Errors
/// [`Error::ForeignBuffer`] naming `backend` and `what`.
pub fn owned(
    backend_tracker: &AllocTracker,
    buffer_tracker: &AllocTracker,
    backend: &'static str,
    what: &'static str,
) -> Result<()> {
    if std::ptr::eq(backend_tracker, buffer_tracker) { Ok(()) } else { Err(Error::ForeignBuffer { backend, what }) }
}

/// `[start, start + len)` within a buffer of `buf_len` elements.
/// Row dot products of a `shape` matrix held in `matrix_len` elements with `coeffs_len`
/// coefficients into `out_len` elements ([`Backend::row_dot_products`](crate::Backend::row_dot_products)).
/// Returns the number of coefficient vectors, `coeffs_len / cols`.
///
/// # Errors
/// [`Error::LengthMismatch`] when the buffer does not hold exactly `shape`, when `coeffs_len` is
/// not a whole number of rows of `cols` coefficients, or when `out_len` is not `rows` times that
/// number; [`Error::InvalidArgument`] for no coefficient vector or more than [`MAX_DOT_VECTORS`].
pub fn row_dot_products(shape: MatrixShape, matrix_len: usize, coeffs_len: usize, out_len: usize) -> Result<usize> {
    shape.check_len("row_dot_products matrix", matrix_len)?;
    let k = dot_vectors("row_dot_products", "coefficient", coeffs_len, shape.cols())?;
    let expected = shape.rows() * k;
    if out_len != expected {
        return Err(Error::LengthMismatch {
            what: "row_dot_products output (rows x vectors)",
            expected,
            actual: out_len,
        });
    }
    Ok(k)
}

/// Column dot products over the rows `rows` of a `shape` matrix held in `matrix_len` elements,
/// with `weights_len` weights, into `out_len` elements
/// ([`Backend::column_dot_products`](crate::Backend::column_dot_products)). Returns the number of
/// weight vectors, `weights_len / rows.count`.
///
/// # Errors
/// [`Error::LengthMismatch`] when the buffer does not hold exactly `shape`, when `weights_len` is
/// not a whole number of vectors of `rows.count` weights, or when `out_len` is not `cols` times
/// that number; [`Error::InvalidArgument`] for a zero `step` or `count`, or for no weight vector
/// or more than [`MAX_DOT_VECTORS`]; [`Error::OutOfBounds`] when the last row read,
/// `first + (count - 1) * step`, is not a row of `shape` (or overflows).
pub fn column_dot_products(
    shape: MatrixShape,
    matrix_len: usize,
    rows: RowStride,
    weights_len: usize,
    out_len: usize,
) -> Result<usize> {
    shape.check_len("column_dot_products matrix", matrix_len)?;
    if rows.step == 0 || rows.count == 0 {
        return Err(Error::InvalidArgument(format!(
            "column_dot_products reads {rows}: the count and the step must be at least 1"
        )));
    }
    let last = (rows.count - 1).checked_mul(rows.step).and_then(|d| d.checked_add(rows.first));
    match last {
        Some(last) if last < shape.rows() => {}
        _ => {
            return Err(Error::OutOfBounds {
                what: "column_dot_products rows",
                start: rows.first,
                end: last.map_or(usize::MAX, |l| l.saturating_add(1)),
                len: shape.rows(),
            });
        }
    }
    let k = dot_vectors("column_dot_products", "weight", weights_len, rows.count)?;
    let expected = shape.cols() * k;
    if out_len != expected {
        return Err(Error::LengthMismatch {
            what: "column_dot_products output (vectors x cols)",
            expected,
            actual: out_len,
        });
    }
    Ok(k)
}

/// A reduction of openings ([`Backend::reduce_openings`](crate::Backend::reduce_openings)) over
/// the row-major `shape` matrix of `matrix_len` elements into an accumulator of `acc_len`: the
/// matrix holds its shape, a power of two of rows (at most 2^32); the call has 1 to
/// [`crate::open::MAX_REDUCTION_POINTS`] points of one degree `d`, `d` vectors of `cols`
/// coefficients, and no point at which `Z - x I` is singular for a row's `x`; the accumulator
/// holds `d` words per row. Returns `d`.
///
/// # Errors
/// [`Error::LengthMismatch`] for the matrix, the coefficients or the accumulator;
/// [`Error::InvalidArgument`] for a height that is not a power of two, a point count out of
/// range, points of different degrees, or a point singular on the coset.
pub fn reduce_openings(
    shape: MatrixShape,
    matrix_len: usize,
    call: &crate::open::ReductionCall<'_>,
    acc_len: usize,
) -> Result<usize> {
    crate::open::check_call(shape, matrix_len, call, acc_len)
}

/// A quotient evaluation ([`Backend::quotient_values`](crate::Backend::quotient_values)) reading
/// the row-major `lde` matrix of `lde_len` elements into an output of `out_len`: the LDE holds its
/// shape, a power of two of at least the domain's points, and at least the columns the program
/// reads; the call gives at least the values the program reads and `d` words per constraint of challenge
/// powers (`d` from 1 to [`MAX_EXTENSION_DEGREE`]); the output holds `d` words per point. Returns
/// `d`.
///
/// # Errors
/// [`Error::LengthMismatch`] for the LDE, the values or the output; [`Error::InvalidArgument`] for
/// an LDE of the wrong height or too few columns, or challenge powers of no degree.
pub fn quotient_values(
    lde: MatrixShape,
    lde_len: usize,
    call: &crate::quotient::QuotientCall<'_>,
    out_len: usize,
) -> Result<usize> {
    crate::quotient::check_call(
        lde,
        lde_len,
        call.program,
        &call.domain,
        call.values.len(),
        call.alpha_powers.len(),
        out_len,
    )
}

/// An arity-2 FRI fold of `input_len` elements into `out_len` with a challenge of `beta_len`
/// elements and, where given, an addend of `(addend_len, gamma_len)` elements
/// ([`Backend::fri_fold`](crate::Backend::fri_fold)). Returns the extension degree `d`
/// (`beta_len = d * d`) and the number of folded elements `n` (`out_len = n * d`).
///
/// # Errors
/// [`Error::InvalidArgument`] when `beta_len` is not `d * d` for a degree `d` from 1 to
/// [`MAX_EXTENSION_DEGREE`], when `out_len` is not a whole number `n` of elements of `d`
/// coordinates, or when `n` is not a power of two with `2n` within the field's two-adicity;
/// [`Error::LengthMismatch`] when `input_len` is not `2 * out_len`, when the addend is not
/// `out_len` long or its challenge `gamma_len` is not `d * d`.
pub fn fri_fold(
    input_len: usize,
    beta_len: usize,
    addend: Option<(usize, usize)>,
    out_len: usize,
) -> Result<(usize, usize)> {
    let d = beta_len.isqrt();
    if d == 0 || d * d != beta_len || d > MAX_EXTENSION_DEGREE {
        return Err(Error::InvalidArgument(format!(
            "fri_fold: a challenge of {beta_len} elements is not the d x d matrix of a degree d from 1 to \
             {MAX_EXTENSION_DEGREE}"
        )));
    }
    let n = out_len / d;
    if n * d != out_len || !n.is_power_of_two() || n.trailing_zeros() >= MAX_LOG_DOMAIN {
        return Err(Error::InvalidArgument(format!(
            "fri_fold: an output of {out_len} elements is not n elements of degree {d} for a power of two n \
             below 2^{MAX_LOG_DOMAIN}"
        )));
    }
    if input_len != 2 * out_len {
        return Err(Error::LengthMismatch {
            what: "fri_fold input (2 x output)",
            expected: 2 * out_len,
            actual: input_len,
        });
    }
    if let Some((addend_len, gamma_len)) = addend {
        if addend_len != out_len {
            return Err(Error::LengthMismatch {
                what: "fri_fold addend (the output's length)",
                expected: out_len,
                actual: addend_len,
            });
        }
        if gamma_len != beta_len {
            return Err(Error::LengthMismatch {
                what: "fri_fold addend's challenge (d x d)",
                expected: beta_len,
                actual: gamma_len,
            });
        }
    }
    Ok((d, n))
}

/// The number of vectors of `per_vector` values in `len` values: a whole number from 1 to
/// [`MAX_DOT_VECTORS`].
fn dot_vectors(op: &'static str, kind: &str, len: usize, per_vector: usize) -> Result<usize> {
    if !len.is_multiple_of(per_vector) {
        return Err(Error::LengthMismatch {
            what: if kind == "weight" {
                "column_dot_products weights (a whole number of vectors of `count` weights)"
            } else {
                "row_dot_products coefficients (a whole number of vectors of `cols` coefficients)"
            },
            expected: len.next_multiple_of(per_vector),
            actual: len,
        });
    }
    let k = len / per_vector;
    if k == 0 || k > MAX_DOT_VECTORS {
        return Err(Error::InvalidArgument(format!(
            "{op}: {len} {kind}s are {k} vectors of {per_vector}; a call takes 1 to {MAX_DOT_VECTORS}"
        )));
    }
    Ok(k)
}

/// A [`Backend::bit_reversed_rows`](crate::Backend::bit_reversed_rows) of `rows` of the `shape`
/// matrix at element `src_at` of a buffer of `src_len` elements into one of `dst_len` elements
/// from element `dst_at`.
///
/// # Errors
/// - [`Error::InvalidShape`] when `shape.rows()` is not a power of two (no bit reversal is defined);
/// - [`Error::OutOfBounds`] (`"bit_reversed_rows rows"`) when `rows` is reversed or passes the
///   matrix's last row;
/// - [`Error::OutOfBounds`] (`"bit_reversed_rows source"`) when the matrix passes `src`'s end;
/// - [`Error::OutOfBounds`] (`"bit_reversed_rows destination"`) when the copied rows pass `dst`'s
///   end.
pub fn bit_reversed_rows(
    shape: MatrixShape,
    rows: &Range<usize>,
    src_len: usize,
    src_at: usize,
    dst_len: usize,
    dst_at: usize,
) -> Result<()> {
    if !shape.rows().is_power_of_two() {
        return Err(Error::InvalidShape(format!(
            "bit_reversed_rows: a {shape} matrix has {} rows, not a power of two",
            shape.rows()
        )));
    }
    if rows.start > rows.end || rows.end > shape.rows() {
        return Err(Error::OutOfBounds {
            what: "bit_reversed_rows rows",
            start: rows.start,
            end: rows.end,
            len: shape.rows(),
        });
    }
    range("bit_reversed_rows source", src_at, shape.len(), src_len)?;
    // At most `shape.len()` elements, which fits `usize`.
    range("bit_reversed_rows destination", dst_at, (rows.end - rows.start) * shape.cols(), dst_len)
}

fn range(what: &'static str, start: usize, len: usize, buf_len: usize) -> Result<()> {
    match start.checked_add(len) {
        Some(end) if end <= buf_len => Ok(()),
        end => Err(Error::OutOfBounds { what, start, end: end.unwrap_or(usize::MAX), len: buf_len }),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn host_memory_is_refused_past_the_host_and_counted_in_bytes() {
        assert_eq!(alloc_host(|| "t", 128, Some(1024)).unwrap(), 1024, "exactly the host's memory");
        assert!(matches!(
            alloc_host(|| "t", 129, Some(1024)),
            Err(Error::HostOutOfMemory { backend: "t", requested: 1032, available: Some(1024), .. })
        ));
        assert_eq!(alloc_host(|| "t", 1 << 40, None).unwrap(), 1 << 43, "an unknown host refuses nothing");
        assert!(matches!(alloc_host(|| "t", usize::MAX, None), Err(Error::SizeOverflow { .. })));
    }

    #[test]
    fn a_preparation_must_fit_the_device_and_its_tables_the_host() {
        use crate::shape::DIGEST_BYTES;
        let lde = LdeParams::new(MatrixShape::new(1 << 4, 3).unwrap(), 2, 7).unwrap();
        let prep = |lde_elems: usize, device_bytes: Option<usize>| Preparation {
            hash: crate::HashKind::Keccak256,
            pageable_upload_bytes: 0,
            device_bytes,
            lde_elems,
            lde: Some(lde),
        };
        // The least a commit holds: the LDE (32 x 3), its tables, one digest per LDE row.
        let tables = crate::field::LdeTwiddles::bytes_for(4, 1);
        let least = 96 * 8 + tables + 32 * DIGEST_BYTES;
        let oom = |r: Result<()>| matches!(r, Err(Error::OutOfMemory { backend: "t", free: 5, .. }));
        assert!(preparation(&prep(96, None), "t", least, 5, None).is_ok(), "exactly the device");
        assert!(oom(preparation(&prep(96, None), "t", least - 1, 5, None)));
        // `lde_elems` larger than the LDE's shape counts instead.
        assert!(oom(preparation(&prep(97, None), "t", least, 5, None)));
        // The pool's growth: up to the device.
        assert!(preparation(&prep(96, Some(least)), "t", least, 5, None).is_ok());
        assert!(oom(preparation(&prep(96, Some(least + 1)), "t", least, 5, None)));
        // A device that does not report its memory is not held to it.
        assert!(preparation(&prep(96, Some(usize::MAX)), "t", 0, 0, None).is_ok());
        // The tables are built on the host: up to its memory.
        assert!(preparation(&prep(96, None), "t", 0, 0, Some(tables)).is_ok());
        assert!(matches!(
            preparation(&prep(96, None), "t", 0, 0, Some(tables - 1)),
            Err(Error::HostOutOfMemory { requested, .. }) if requested == tables
        ));
        // Without an LDE only `lde_elems` and the growth count; their bytes must fit `usize`.
        let bare = Preparation { lde: None, ..prep(1 << 20, None) };
        assert!(preparation(&bare, "t", 8 << 20, 0, Some(0)).is_ok());
        assert!(oom(preparation(&bare, "t", (8 << 20) - 1, 5, None)));
        let overflow = Preparation { lde_elems: usize::MAX / 4, ..bare };
        assert!(matches!(preparation(&overflow, "t", 0, 0, None), Err(Error::SizeOverflow { .. })));
    }

    use super::*;
    use crate::shape::{HashKind, LeafLayout};

    #[test]
    fn a_buffer_belongs_to_the_tracker_it_was_reserved_in() {
        let (a, b) = (AllocTracker::new(), AllocTracker::new());
        owned(&a, &a, "B", "write").unwrap();
        let err = owned(&a, &b, "B", "write").unwrap_err();
        assert!(matches!(err, Error::ForeignBuffer { backend: "B", what: "write" }), "{err}");
        assert!(err.to_string().contains("another B instance"), "{err}");
    }

    #[test]
    fn allocation_sizes_overflow_at_usize_max_over_8() {
        assert_eq!(alloc_bytes(0).unwrap(), 0);
        assert_eq!(alloc_bytes(usize::MAX / 8).unwrap(), usize::MAX / 8 * 8);
        for len in [usize::MAX / 8 + 1, usize::MAX] {
            assert!(matches!(alloc_bytes(len), Err(Error::SizeOverflow { elems, .. }) if elems == len), "{len}");
        }
    }

    #[test]
    fn downloads_and_writes_stay_inside_the_buffer() {
        for (what, check) in [("download", download as fn(usize, usize, usize) -> Result<()>), ("write", write)] {
            check(10, 0, 10).unwrap();
            check(10, 10, 0).unwrap();
            check(10, 4, 6).unwrap();
            let err = check(10, 4, 7).unwrap_err();
            assert!(matches!(err, Error::OutOfBounds { what: w, start: 4, end: 11, len: 10 } if w == what), "{err}");
            let err = check(10, 11, 0).unwrap_err();
            assert!(matches!(err, Error::OutOfBounds { start: 11, end: 11, .. }), "{err}");
            let err = check(10, usize::MAX, 2).unwrap_err();
            assert!(matches!(err, Error::OutOfBounds { what: w, end: usize::MAX, .. } if w == what), "{err}");
        }
    }

    #[test]
    fn transposes_need_the_whole_matrix_and_one_run_of_scratch() {
        let shape = MatrixShape::new(4, 4).unwrap();
        assert_eq!(transpose(shape, 16, 40).unwrap(), TransposeGeometry::new(shape, 40).unwrap());
        for len in [15, 17, 0] {
            let err = transpose(shape, len, 1 << 20).unwrap_err();
            assert!(matches!(err, Error::LengthMismatch { expected: 16, actual, .. } if actual == len), "{err}");
        }
        let err = transpose(shape, 16, 39).unwrap_err();
        assert!(matches!(err, Error::ScratchTooSmall { cap: 39, cols: 4, min: 40 }), "{err}");
    }

    #[test]
    fn leaf_outputs_are_bounded_by_the_output_buffer() {
        let shape = MatrixShape::new(6, 4).unwrap();
        let spec = LeafSpec::new(HashKind::Keccak256, LeafLayout::Rows, 1..3).unwrap();
        // 6 leaves of 4 words: offsets 0..=2 fit 8 digests (32 words), 3 does not.
        assert_eq!(hash_leaves(shape, &spec, 24, 32, 2).unwrap(), LeafOutput { leaves: 6, start: 8 });
        assert_eq!(hash_leaves(shape, &spec, 24, 24, 0).unwrap(), LeafOutput { leaves: 6, start: 0 });
        let err = hash_leaves(shape, &spec, 24, 32, 3).unwrap_err();
        assert!(matches!(err, Error::OutOfBounds { what: "leaf digests", start: 12, end: 36, len: 32 }), "{err}");
        let err = hash_leaves(shape, &spec, 24, 23, 0).unwrap_err();
        assert!(matches!(err, Error::OutOfBounds { start: 0, end: 24, len: 23, .. }), "{err}");
        let err = hash_leaves(shape, &spec, 24, 32, usize::MAX / 2).unwrap_err();
        assert!(matches!(err, Error::OutOfBounds { start: usize::MAX, end: usize::MAX, .. }), "{err}");
        let err = hash_leaves(shape, &spec, 25, 32, 0).unwrap_err();
        assert!(matches!(err, Error::LengthMismatch { expected: 24, actual: 25, .. }), "{err}");
        let wide = LeafSpec::new(HashKind::Keccak256, LeafLayout::Rows, 1..5).unwrap();
        assert!(matches!(hash_leaves(shape, &wide, 24, 32, 0), Err(Error::InvalidArgument(_))));
        let pairs = LeafSpec::new(HashKind::Blake3, LeafLayout::LambdaVmPairs, 0..4).unwrap();
        assert!(matches!(hash_leaves(shape, &pairs, 24, 32, 0), Err(Error::InvalidArgument(_))));
    }

    #[test]
    fn node_arrays_and_traces_must_match_exactly() {
        let tree = TreeShape::new(3).unwrap();
        merkle_tree(tree, 28).unwrap();
        for len in [27, 29, 12] {
            let err = merkle_tree(tree, len).unwrap_err();
            assert!(matches!(err, Error::LengthMismatch { expected: 28, actual, .. } if actual == len), "{err}");
        }
        let params = LdeParams::new(MatrixShape::new(4, 2).unwrap(), 2, 7).unwrap();
        coset_lde(&params, 8).unwrap();
        for len in [7, 9, 16] {
            let err = coset_lde(&params, len).unwrap_err();
            assert!(matches!(err, Error::LengthMismatch { expected: 8, actual, .. } if actual == len), "{err}");
        }
        coset_lde_in_place(&params, 16).unwrap();
        for len in [8, 15, 17, 32] {
            let err = coset_lde_in_place(&params, len).unwrap_err();
            assert!(matches!(err, Error::LengthMismatch { expected: 16, actual, .. } if actual == len), "{err}");
        }
    }

    #[test]
    fn host_ldes_need_the_trace_and_the_lde_buffer_exactly() {
        // 4 x 2 trace, blowup 2: 8 trace elements, 16 LDE elements.
        let params = LdeParams::new(MatrixShape::new(4, 2).unwrap(), 2, 7).unwrap();
        coset_lde_from_host(&params, 8, 16).unwrap();
        for len in [0, 7, 9, 16] {
            let err = coset_lde_from_host(&params, len, 16).unwrap_err();
            assert!(
                matches!(err, Error::LengthMismatch { what: "coset_lde_from_host trace", expected: 8, actual } if actual == len),
                "{err}"
            );
        }
        for len in [0, 8, 15, 17, 32] {
            let err = coset_lde_from_host(&params, 8, len).unwrap_err();
            assert!(
                matches!(err, Error::LengthMismatch { what: "coset_lde_from_host buffer", expected: 16, actual } if actual == len),
                "{err}"
            );
        }
        // Both wrong: the trace is named first.
        let err = coset_lde_from_host(&params, 9, 17).unwrap_err();
        assert!(matches!(err, Error::LengthMismatch { what: "coset_lde_from_host trace", .. }), "{err}");
        // Blowup 1: the buffer is exactly the trace.
        let same = LdeParams::new(MatrixShape::new(1, 3).unwrap(), 1, 1).unwrap();
        coset_lde_from_host(&same, 3, 3).unwrap();
        assert!(coset_lde_from_host(&same, 3, 6).is_err());
    }

    #[test]
    fn row_dot_products_take_whole_vectors_and_an_output_per_row_and_vector() {
        let shape = MatrixShape::new(5, 3).unwrap();
        for k in 1..=MAX_DOT_VECTORS {
            assert_eq!(row_dot_products(shape, 15, 3 * k, 5 * k).unwrap(), k);
        }
        let err = row_dot_products(shape, 14, 3, 5).unwrap_err();
        assert!(matches!(err, Error::LengthMismatch { what: "row_dot_products matrix", expected: 15, actual: 14 }));
        let err = row_dot_products(shape, 15, 4, 5).unwrap_err();
        assert!(
            matches!(err, Error::LengthMismatch { what, expected: 6, actual: 4 } if what.contains("coefficients")),
            "{err}"
        );
        for coeffs in [0, 3 * (MAX_DOT_VECTORS + 1)] {
            let err = row_dot_products(shape, 15, coeffs, 5).unwrap_err();
            assert!(
                matches!(&err, Error::InvalidArgument(m) if m.starts_with("row_dot_products: ") && m.contains("coefficients")),
                "{err}"
            );
        }
        for out in [0, 5, 9, 11] {
            let err = row_dot_products(shape, 15, 6, out).unwrap_err();
            assert!(
                matches!(err, Error::LengthMismatch { what: "row_dot_products output (rows x vectors)", expected: 10, actual } if actual == out),
                "{err}"
            );
        }
    }

    #[test]
    fn bit_reversed_rows_take_a_power_of_two_of_rows_and_ranges_inside_both_buffers() {
        let shape = |rows, cols| MatrixShape::new(rows, cols).unwrap();
        let bounds = |r: Result<()>, w: &str, s: usize, e: usize, l: usize| {
            assert!(
                matches!(&r, Err(Error::OutOfBounds { what, start, end, len }) if *what == w && (*start, *end, *len) == (s, e, l)),
                "{r:?}"
            );
        };
        // Accepted: every row, none, one; the matrix and the rows ending exactly at the buffers' ends.
        for rows in [1, 2, 8] {
            bit_reversed_rows(shape(rows, 3), &(0..rows), 3 * rows, 0, 3 * rows, 0).unwrap();
            bit_reversed_rows(shape(rows, 3), &(rows..rows), 3 * rows, 0, 0, 0).unwrap();
        }
        bit_reversed_rows(shape(8, 3), &(2..5), 30, 6, 10, 1).unwrap();
        for rows in [3, 6, 12] {
            let r = bit_reversed_rows(shape(rows, 1), &(0..1), rows, 0, 1, 0);
            assert!(
                matches!(&r, Err(Error::InvalidShape(m)) if m.starts_with("bit_reversed_rows: ") && m.contains(&format!("{rows} rows"))),
                "{r:?}"
            );
        }
        bounds(bit_reversed_rows(shape(8, 3), &(0..9), 24, 0, 27, 0), "bit_reversed_rows rows", 0, 9, 8);
        #[allow(clippy::reversed_empty_ranges)]
        bounds(bit_reversed_rows(shape(8, 3), &(5..4), 24, 0, 24, 0), "bit_reversed_rows rows", 5, 4, 8);
        bounds(bit_reversed_rows(shape(8, 3), &(0..1), 23, 0, 3, 0), "bit_reversed_rows source", 0, 24, 23);
        bounds(bit_reversed_rows(shape(8, 3), &(0..1), 30, 7, 3, 0), "bit_reversed_rows source", 7, 31, 30);
        bounds(bit_reversed_rows(shape(8, 3), &(2..5), 24, 0, 10, 2), "bit_reversed_rows destination", 2, 11, 10);
        bounds(bit_reversed_rows(shape(8, 3), &(2..5), 24, 0, 8, 0), "bit_reversed_rows destination", 0, 9, 8);
        bounds(
            bit_reversed_rows(shape(8, 3), &(0..8), 24, usize::MAX, 24, 0),
            "bit_reversed_rows source",
            usize::MAX,
            usize::MAX,
            24,
        );
    }

    #[test]
    fn fri_folds_take_a_square_challenge_and_a_power_of_two_of_whole_elements() {
        for d in 1..=MAX_EXTENSION_DEGREE {
            for n in [1, 2, 1024] {
                assert_eq!(fri_fold(2 * n * d, d * d, None, n * d).unwrap(), (d, n));
                assert_eq!(fri_fold(2 * n * d, d * d, Some((n * d, d * d)), n * d).unwrap(), (d, n));
            }
        }
        // The largest domain: 2n = 2^32 elements of degree 1.
        assert_eq!(fri_fold(1 << 32, 1, None, 1 << 31).unwrap(), (1, 1 << 31));
        let invalid = |r: Result<(usize, usize)>, what: &str| {
            assert!(
                matches!(&r, Err(Error::InvalidArgument(m)) if m.starts_with("fri_fold: ") && m.contains(what)),
                "{r:?}"
            );
        };
        let big = MAX_EXTENSION_DEGREE + 1;
        for beta in [0, 2, 3, 5, big * big] {
            invalid(fri_fold(8, beta, None, 4), "challenge");
        }
        for (out, beta) in [(3, 4), (6, 4), (0, 1), (12, 1), (1 << 32, 1)] {
            invalid(fri_fold(2 * out, beta, None, out), "output");
        }
        let length = |r: Result<(usize, usize)>, part: &str, expected: usize, actual: usize| {
            assert!(
                matches!(&r, Err(Error::LengthMismatch { what, expected: e, actual: a }) if what.contains(part) && *e == expected && *a == actual),
                "{r:?}"
            );
        };
        for input in [0, 7, 9, 16] {
            length(fri_fold(input, 4, None, 4), "input", 8, input);
        }
        length(fri_fold(8, 4, Some((2, 4)), 4), "addend (", 4, 2);
        length(fri_fold(8, 4, Some((4, 1)), 4), "challenge", 4, 1);
    }

    #[test]
    fn quotient_values_return_the_degree_and_refuse_what_the_program_does_not_fit() {
        use crate::quotient::{ConstraintProgram, Instr, QuotientCall, QuotientDomain};
        let program = ConstraintProgram::new(&[
            Instr::Column { dst: 0, col: 1, next: true },
            Instr::Fold { src: 0, constraint: 0 },
        ])
        .unwrap();
        let domain = QuotientDomain::new(1, 2, 7).unwrap();
        let call = |alpha: &'static [u64]| QuotientCall { program: &program, domain, values: &[], alpha_powers: alpha };
        let shape = MatrixShape::new(8, 2).unwrap();
        assert_eq!(quotient_values(shape, 16, &call(&[1, 2, 3]), 12).unwrap(), 3);
        assert_eq!(quotient_values(shape, 16, &call(&[1]), 4).unwrap(), 1);
        assert!(matches!(quotient_values(shape, 15, &call(&[1]), 4), Err(Error::LengthMismatch { .. })));
        assert!(matches!(quotient_values(shape, 16, &call(&[1]), 5), Err(Error::LengthMismatch { .. })));
        assert!(matches!(quotient_values(shape, 16, &call(&[]), 0), Err(Error::InvalidArgument(_))));
    }

    #[test]
    fn column_dot_products_read_rows_of_the_matrix_only() {
        let shape = MatrixShape::new(8, 3).unwrap();
        // Rows 1, 3, 5, 7: the last row read is the matrix's last.
        assert_eq!(column_dot_products(shape, 24, RowStride::new(1, 2, 4), 8, 6).unwrap(), 2);
        assert_eq!(column_dot_products(shape, 24, RowStride::new(7, 100, 1), 8, 24).unwrap(), 8);
        assert_eq!(column_dot_products(shape, 24, RowStride::all(8), 8, 3).unwrap(), 1);
        let err = column_dot_products(shape, 25, RowStride::all(8), 8, 3).unwrap_err();
        assert!(matches!(err, Error::LengthMismatch { what: "column_dot_products matrix", expected: 24, actual: 25 }));
        for rows in [RowStride::new(0, 0, 2), RowStride::new(0, 1, 0), RowStride::new(0, 0, 0)] {
            let err = column_dot_products(shape, 24, rows, 2, 3).unwrap_err();
            assert!(matches!(&err, Error::InvalidArgument(m) if m.contains("at least 1")), "{rows:?}: {err}");
        }
        for (rows, end) in [
            (RowStride::new(2, 2, 4), 9),
            (RowStride::new(8, 1, 1), 9),
            (RowStride::new(0, 3, 4), 10),
            (RowStride::new(1, usize::MAX, 2), usize::MAX),
            (RowStride::new(usize::MAX, 1, 2), usize::MAX),
        ] {
            let err = column_dot_products(shape, 24, rows, rows.count, 3).unwrap_err();
            assert!(
                matches!(err, Error::OutOfBounds { what: "column_dot_products rows", start, end: e, len: 8 } if start == rows.first && e == end),
                "{rows:?}: {err}"
            );
        }
        let err = column_dot_products(shape, 24, RowStride::all(8), 9, 3).unwrap_err();
        assert!(
            matches!(err, Error::LengthMismatch { what, expected: 16, actual: 9 } if what.contains("weights")),
            "{err}"
        );
        let err = column_dot_products(shape, 24, RowStride::new(0, 1, 1), MAX_DOT_VECTORS + 1, 27).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidArgument(m) if m.starts_with("column_dot_products: ") && m.contains("weights")),
            "{err}"
        );
        for out in [0, 3, 5, 7] {
            let err = column_dot_products(shape, 24, RowStride::all(8), 16, out).unwrap_err();
            assert!(
                matches!(err, Error::LengthMismatch { what: "column_dot_products output (vectors x cols)", expected: 6, actual } if actual == out),
                "{err}"
            );
        }
    }
}
