//! Shapes and operation parameters shared by every backend.

use std::fmt;
use std::ops::Range;

use crate::error::{Error, Result};

/// Size of one field element on every device, in bytes.
pub const ELEM_BYTES: usize = 8;
/// Size of one digest, in bytes.
pub const DIGEST_BYTES: usize = 32;
/// Size of one digest in buffer elements (`u64` words, little-endian bytes).
pub const DIGEST_WORDS: usize = DIGEST_BYTES / ELEM_BYTES;
/// The largest LDE domain the field supports: the Goldilocks two-adicity is 32.
pub const MAX_LOG_DOMAIN: u32 = 32;

/// A `rows x cols` matrix of `u64` elements.
///
/// Row-major puts `(r, c)` at `r * cols + c`; column-major at `c * rows + r`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MatrixShape {
    /// Number of rows (> 0).
    pub rows: usize,
    /// Number of columns (> 0).
    pub cols: usize,
}

impl MatrixShape {
    /// A shape with both sides non-zero and an element count that fits `usize`.
    ///
    /// # Errors
    /// [`Error::InvalidShape`] for zero rows or columns, or an element count that overflows.
    pub fn new(rows: usize, cols: usize) -> Result<Self> {
        if rows == 0 || cols == 0 {
            return Err(Error::InvalidShape(format!(
                "a matrix needs at least one row and one column, got {rows} x {cols}"
            )));
        }
        rows.checked_mul(cols)
            .and_then(|n| n.checked_mul(ELEM_BYTES))
            .ok_or_else(|| Error::InvalidShape(format!("{rows} x {cols} u64 overflows the address space")))?;
        Ok(Self { rows, cols })
    }

    /// Number of elements, `rows * cols`.
    pub fn len(&self) -> usize {
        self.rows * self.cols
    }

    /// Whether the matrix has no elements (never true for a shape made by [`MatrixShape::new`]).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Size in bytes, `rows * cols * 8`.
    pub fn bytes(&self) -> usize {
        self.len() * ELEM_BYTES
    }

    /// Checks that a buffer of `len` elements holds exactly this matrix.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when it does not.
    pub fn check_len(&self, what: &'static str, len: usize) -> Result<()> {
        if len != self.len() {
            return Err(Error::LengthMismatch { what, expected: self.len(), actual: len });
        }
        Ok(())
    }
}

impl fmt::Display for MatrixShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} x {}", self.rows, self.cols)
    }
}

/// The hash used for leaves and for inner Merkle nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HashKind {
    /// Original Keccak-256 (pad `0x01`), as `sha3::Keccak256` and Ethereum; not SHA3-256.
    Keccak256,
    /// Standard BLAKE3 of the whole input (`blake3::hash`), chunk tree included.
    Blake3,
}

impl HashKind {
    /// Every hash, for tests and listings.
    pub const ALL: [HashKind; 2] = [HashKind::Keccak256, HashKind::Blake3];

    /// The CLI spelling.
    pub fn name(self) -> &'static str {
        match self {
            HashKind::Keccak256 => "keccak256",
            HashKind::Blake3 => "blake3",
        }
    }
}

impl fmt::Display for HashKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How LDE rows become leaf preimages (see CONVENTIONS.md, "Leaves").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LeafLayout {
    /// Leaf `r` hashes row `r`: canonical elements, 8 bytes little-endian each, in column order.
    Rows,
    /// Leaf `i` hashes rows `br(2i) || br(2i+1)` (bit reversal over `log2(rows)` bits), canonical
    /// elements, 8 bytes **big**-endian each. `rows / 2` leaves; needs a power-of-two row count >= 2.
    LambdaVmPairs,
}

impl LeafLayout {
    /// Every layout, for tests and listings.
    pub const ALL: [LeafLayout; 2] = [LeafLayout::Rows, LeafLayout::LambdaVmPairs];

    /// The CLI spelling.
    pub fn name(self) -> &'static str {
        match self {
            LeafLayout::Rows => "rows",
            LeafLayout::LambdaVmPairs => "lambda-vm-pairs",
        }
    }

    /// Number of leaves this layout makes from `rows` rows.
    pub fn leaf_count(self, rows: usize) -> usize {
        match self {
            LeafLayout::Rows => rows,
            LeafLayout::LambdaVmPairs => rows / 2,
        }
    }
}

impl fmt::Display for LeafLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What `hash_leaves` hashes: which hash, which layout, which columns.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LeafSpec {
    /// The hash function.
    pub hash: HashKind,
    /// The leaf layout.
    pub layout: LeafLayout,
    /// The column range `[c0, c1)` each leaf covers (the whole row for an unsplit tree).
    pub cols: Range<usize>,
}

impl LeafSpec {
    /// Checks this spec against a row-major matrix and returns the number of leaves.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty or out-of-range column range, or for the
    /// `lambda-vm-pairs` layout over a row count that is not a power of two >= 2.
    pub fn validate(&self, shape: MatrixShape) -> Result<usize> {
        if self.cols.start >= self.cols.end || self.cols.end > shape.cols {
            return Err(Error::InvalidArgument(format!(
                "leaf column range {}..{} is empty or outside the matrix's {} columns",
                self.cols.start, self.cols.end, shape.cols
            )));
        }
        if self.layout == LeafLayout::LambdaVmPairs && (shape.rows < 2 || !shape.rows.is_power_of_two()) {
            return Err(Error::InvalidArgument(format!(
                "the lambda-vm-pairs layout needs a power-of-two row count >= 2, got {}",
                shape.rows
            )));
        }
        Ok(self.layout.leaf_count(shape.rows))
    }

    /// Checks a `hash_leaves_into` call, host-side, for every backend: the shape (again: a caller
    /// may build one by hand), this spec against it, a matrix of `matrix_len` elements, and room
    /// for the digests in an output of `out_len` elements from digest `out_digest` on. Returns the
    /// number of leaves and the output element the first digest goes to.
    ///
    /// # Errors
    /// [`Error::InvalidShape`], the errors of [`LeafSpec::validate`], [`Error::LengthMismatch`]
    /// for the matrix, [`Error::OutOfBounds`] (`"leaf digests"`) for a short output.
    pub fn validate_into(
        &self,
        shape: MatrixShape,
        matrix_len: usize,
        out_len: usize,
        out_digest: usize,
    ) -> Result<(usize, usize)> {
        let shape = MatrixShape::new(shape.rows, shape.cols)?;
        let leaves = self.validate(shape)?;
        shape.check_len("hash_leaves matrix", matrix_len)?;
        let start = out_digest.saturating_mul(DIGEST_WORDS);
        match start.checked_add(leaves * DIGEST_WORDS) {
            Some(end) if end <= out_len => Ok((leaves, start)),
            end => {
                Err(Error::OutOfBounds { what: "leaf digests", start, end: end.unwrap_or(usize::MAX), len: out_len })
            }
        }
    }

    /// Bytes hashed for one leaf.
    pub fn leaf_bytes(&self) -> usize {
        let per_row = (self.cols.end - self.cols.start) * ELEM_BYTES;
        match self.layout {
            LeafLayout::Rows => per_row,
            LeafLayout::LambdaVmPairs => 2 * per_row,
        }
    }
}

/// Geometry of a Merkle tree over `leaves` leaves (CONVENTIONS.md, "Merkle tree").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TreeShape {
    /// Leaves actually hashed (> 0).
    pub leaves: usize,
}

impl TreeShape {
    /// A tree over `leaves` leaf digests.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for zero leaves.
    pub fn new(leaves: usize) -> Result<Self> {
        if leaves == 0 {
            return Err(Error::InvalidArgument("a Merkle tree needs at least one leaf".into()));
        }
        Ok(Self { leaves })
    }

    /// The padded leaf count `L`: `leaves` rounded up to a power of two.
    pub fn padded_leaves(&self) -> usize {
        self.leaves.next_power_of_two()
    }

    /// Digests in the node array, `2L - 1`.
    pub fn nodes(&self) -> usize {
        2 * self.padded_leaves() - 1
    }

    /// Index of the first leaf digest in the node array, `L - 1`.
    pub fn first_leaf(&self) -> usize {
        self.padded_leaves() - 1
    }

    /// Size of the node array in buffer elements (`u64` words).
    pub fn words(&self) -> usize {
        self.nodes() * DIGEST_WORDS
    }

    /// Size of the node array in bytes, `(2L - 1) * 32`.
    pub fn bytes(&self) -> usize {
        self.nodes() * DIGEST_BYTES
    }
}

/// Parameters of a coset LDE (CONVENTIONS.md, "Coset low-degree extension").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LdeParams {
    /// The trace shape: `n = 2^a` rows, `m` columns.
    pub trace: MatrixShape,
    /// The blowup `B = 2^b`.
    pub blowup: usize,
    /// The coset shift `s`, a non-zero field element (any `u64` whose value mod p is not 0).
    pub shift: u64,
}

impl LdeParams {
    /// Validates a coset LDE's parameters.
    ///
    /// # Errors
    /// [`Error::InvalidShape`] when the row count or blowup is not a power of two or the domain
    /// `N = n * B` exceeds `2^32`; [`Error::InvalidArgument`] for a zero shift.
    pub fn new(trace: MatrixShape, blowup: usize, shift: u64) -> Result<Self> {
        if !trace.rows.is_power_of_two() {
            return Err(Error::InvalidShape(format!("the trace row count must be a power of two, got {}", trace.rows)));
        }
        if blowup == 0 || !blowup.is_power_of_two() {
            return Err(Error::InvalidShape(format!("the blowup must be a power of two, got {blowup}")));
        }
        let log_n = trace.rows.trailing_zeros() + blowup.trailing_zeros();
        if log_n > MAX_LOG_DOMAIN {
            return Err(Error::InvalidShape(format!(
                "the LDE domain {} x {} = 2^{log_n} rows exceeds the field's 2^32",
                trace.rows, blowup
            )));
        }
        if crate::field::canonical(shift) == 0 {
            return Err(Error::InvalidArgument(format!("the coset shift must be non-zero mod p, got {shift}")));
        }
        MatrixShape::new(trace.rows * blowup, trace.cols)?;
        Ok(Self { trace, blowup, shift })
    }

    /// The LDE's shape, `N x m` with `N = n * B`.
    pub fn lde_shape(&self) -> MatrixShape {
        MatrixShape { rows: self.trace.rows * self.blowup, cols: self.trace.cols }
    }

    /// `log2(n)`.
    pub fn log_trace_rows(&self) -> u32 {
        self.trace.rows.trailing_zeros()
    }

    /// `log2(B)`.
    pub fn log_blowup(&self) -> u32 {
        self.blowup.trailing_zeros()
    }
}

/// One copy of a batch: `len` elements from `src` to `dst` (offsets in elements).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CopyRange {
    /// Source offset, in elements.
    pub src: usize,
    /// Destination offset, in elements.
    pub dst: usize,
    /// Length, in elements.
    pub len: usize,
}

impl CopyRange {
    /// A copy of `len` elements from `src` to `dst`.
    pub const fn new(src: usize, dst: usize, len: usize) -> Self {
        Self { src, dst, len }
    }
}
