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
/// The most coefficient or weight vectors one call of
/// [`Backend::row_dot_products`](crate::Backend::row_dot_products) or
/// [`Backend::column_dot_products`](crate::Backend::column_dot_products) takes (a device kernel keeps
/// one accumulator per vector in registers). Eight covers a degree-4 extension opened at two points.
pub const MAX_DOT_VECTORS: usize = 8;
/// The highest degree of the extension field a [`Backend::fri_fold`](crate::Backend::fri_fold)
/// folds over (its challenges are `degree x degree` matrices a device kernel holds in registers).
pub const MAX_EXTENSION_DEGREE: usize = 8;

/// A `rows x cols` matrix of `u64` elements.
///
/// Row-major puts `(r, c)` at `r * cols + c`; column-major at `c * rows + r`.
///
/// Only [`MatrixShape::new`] makes one, so every value has both sides non-zero and a byte size
/// that fits `usize`; backends rely on that.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MatrixShape {
    rows: usize,
    cols: usize,
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

    /// Number of rows (> 0).
    pub const fn rows(&self) -> usize {
        self.rows
    }

    /// Number of columns (> 0).
    pub const fn cols(&self) -> usize {
        self.cols
    }

    /// Number of elements, `rows * cols` (> 0).
    pub const fn len(&self) -> usize {
        self.rows * self.cols
    }

    /// Whether the matrix has no elements: never, as [`MatrixShape::new`] refuses empty shapes.
    pub const fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Size in bytes, `rows * cols * 8` (fits `usize`).
    pub const fn bytes(&self) -> usize {
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

/// The hash used for leaves and for inner Merkle nodes (CONVENTIONS.md, "Hash functions").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HashKind {
    /// Original Keccak-256 (pad `0x01`), as `sha3::Keccak256` and Ethereum; not SHA3-256.
    Keccak256,
    /// Standard BLAKE3 of the whole input (`blake3::hash`), chunk tree included.
    Blake3,
    /// Plonky3's Goldilocks Poseidon2 of width 8 (`default_goldilocks_poseidon2_8` of
    /// p3-goldilocks): leaves through the padding-free sponge of rate 4 over the row's field
    /// elements (`PaddingFreeSponge<_, 8, 4, 4>`), nodes through the truncated permutation of
    /// `left || right` (`TruncatedPermutation<_, 2, 4, 8>`). Its digest is 4 canonical field
    /// elements, so a digest's 4 words are those elements. Defined over the `rows` layout only.
    Poseidon2,
}

impl HashKind {
    /// Every hash, for tests and listings.
    pub const ALL: [HashKind; 3] = [HashKind::Keccak256, HashKind::Blake3, HashKind::Poseidon2];

    /// The CLI spelling.
    pub fn name(self) -> &'static str {
        match self {
            HashKind::Keccak256 => "keccak256",
            HashKind::Blake3 => "blake3",
            HashKind::Poseidon2 => "poseidon2",
        }
    }

    /// Whether the hash absorbs field elements (an algebraic hash) rather than bytes.
    pub const fn is_algebraic(self) -> bool {
        matches!(self, HashKind::Poseidon2)
    }

    /// Whether leaves of `layout` are defined for this hash: every layout for the byte hashes,
    /// `rows` only for Poseidon2 (`lambda-vm-pairs` is defined by its big-endian bytes, which
    /// an algebraic hash never sees).
    pub const fn supports(self, layout: LeafLayout) -> bool {
        !self.is_algebraic() || matches!(layout, LeafLayout::Rows)
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
///
/// Only [`LeafSpec::new`] makes one, so the column range is never empty. Whether it fits a
/// given matrix is checked against that matrix by [`LeafSpec::validate`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LeafSpec {
    hash: HashKind,
    layout: LeafLayout,
    col_start: usize,
    col_end: usize,
}

impl LeafSpec {
    /// Leaves of `layout` hashed with `hash`, each covering the columns `cols` (`[c0, c1)`; the
    /// whole row, `0..m`, for an unsplit tree).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty column range, or for a layout the hash does not
    /// define ([`HashKind::supports`]: `lambda-vm-pairs` under Poseidon2).
    pub fn new(hash: HashKind, layout: LeafLayout, cols: Range<usize>) -> Result<Self> {
        if cols.start >= cols.end {
            return Err(Error::InvalidArgument(format!("leaf column range {}..{} is empty", cols.start, cols.end)));
        }
        if !hash.supports(layout) {
            return Err(Error::InvalidArgument(format!(
                "the {layout} leaf layout is not defined for {hash} (it is defined by big-endian bytes, which an \
                 algebraic hash never sees); use the rows layout"
            )));
        }
        Ok(Self { hash, layout, col_start: cols.start, col_end: cols.end })
    }

    /// The hash function.
    pub const fn hash(&self) -> HashKind {
        self.hash
    }

    /// The leaf layout.
    pub const fn layout(&self) -> LeafLayout {
        self.layout
    }

    /// The column range `[c0, c1)` each leaf covers (never empty).
    pub const fn cols(&self) -> Range<usize> {
        self.col_start..self.col_end
    }

    /// Checks this spec against a row-major matrix and returns the number of leaves.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a column range past the matrix's columns, or for the
    /// `lambda-vm-pairs` layout over a row count that is not a power of two >= 2.
    pub fn validate(&self, shape: MatrixShape) -> Result<usize> {
        if self.col_end > shape.cols {
            return Err(Error::InvalidArgument(format!(
                "leaf column range {}..{} is outside the matrix's {} columns",
                self.col_start, self.col_end, shape.cols
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

    /// Bytes hashed for one leaf.
    pub fn leaf_bytes(&self) -> usize {
        let per_row = (self.col_end - self.col_start) * ELEM_BYTES;
        match self.layout {
            LeafLayout::Rows => per_row,
            LeafLayout::LambdaVmPairs => 2 * per_row,
        }
    }
}

/// Geometry of a Merkle tree over `leaves` leaves (CONVENTIONS.md, "Merkle tree").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
///
/// Only [`TreeShape::new`] makes one, so a tree has at least one leaf and its node array's byte
/// size fits `usize`.
pub struct TreeShape {
    leaves: usize,
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
        // The node array's (2L - 1) * 32 B must fit usize.
        let bytes = leaves
            .checked_next_power_of_two()
            .and_then(|l| l.checked_mul(2))
            .and_then(|n| (n - 1).checked_mul(DIGEST_BYTES));
        match bytes {
            Some(_) => Ok(Self { leaves }),
            None => Err(Error::InvalidArgument(format!(
                "a Merkle tree over {leaves} leaves has a node array larger than the address space"
            ))),
        }
    }

    /// Leaves actually hashed (> 0).
    pub const fn leaves(&self) -> usize {
        self.leaves
    }

    /// The padded leaf count `L`: `leaves` rounded up to a power of two.
    pub const fn padded_leaves(&self) -> usize {
        self.leaves.next_power_of_two()
    }

    /// Digests in the node array, `2L - 1`.
    pub const fn nodes(&self) -> usize {
        2 * self.padded_leaves() - 1
    }

    /// Index of the first leaf digest in the node array, `L - 1`.
    pub const fn first_leaf(&self) -> usize {
        self.padded_leaves() - 1
    }

    /// Size of the node array in buffer elements (`u64` words).
    pub const fn words(&self) -> usize {
        self.nodes() * DIGEST_WORDS
    }

    /// Size of the node array in bytes, `(2L - 1) * 32`.
    pub const fn bytes(&self) -> usize {
        self.nodes() * DIGEST_BYTES
    }
}

/// Parameters of a coset LDE (CONVENTIONS.md, "Coset low-degree extension").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
///
/// Only [`LdeParams::new`] makes one, so every value has a power-of-two row count and blowup, a
/// domain of at most `2^32` rows whose size fits `usize`, and a non-zero shift.
pub struct LdeParams {
    trace: MatrixShape,
    blowup: usize,
    shift: u64,
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

    /// The trace shape: `n = 2^a` rows, `m` columns.
    pub const fn trace(&self) -> MatrixShape {
        self.trace
    }

    /// The blowup `B = 2^b`.
    pub const fn blowup(&self) -> usize {
        self.blowup
    }

    /// The coset shift `s` as given: non-zero mod p, possibly non-canonical (`>= p`).
    pub const fn shift(&self) -> u64 {
        self.shift
    }

    /// The LDE's shape, `N x m` with `N = n * B` (validated by [`LdeParams::new`]).
    pub const fn lde_shape(&self) -> MatrixShape {
        MatrixShape { rows: self.trace.rows * self.blowup, cols: self.trace.cols }
    }

    /// `log2(n)`.
    pub const fn log_trace_rows(&self) -> u32 {
        self.trace.rows.trailing_zeros()
    }

    /// `log2(B)`.
    pub const fn log_blowup(&self) -> u32 {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaf_specs_refuse_empty_ranges_and_check_the_matrix() {
        for (c0, c1) in [(0, 0), (3, 3), (4, 2)] {
            let err = LeafSpec::new(HashKind::Blake3, LeafLayout::Rows, c0..c1).unwrap_err();
            assert!(matches!(err, Error::InvalidArgument(_)), "{c0}..{c1}: {err}");
        }
        let spec = LeafSpec::new(HashKind::Keccak256, LeafLayout::LambdaVmPairs, 1..4).unwrap();
        assert_eq!((spec.hash(), spec.layout(), spec.cols()), (HashKind::Keccak256, LeafLayout::LambdaVmPairs, 1..4));
        assert_eq!(spec.leaf_bytes(), 2 * 3 * 8);
        assert_eq!(spec.validate(MatrixShape::new(8, 4).unwrap()).unwrap(), 4);
        for (rows, cols) in [(8, 3), (6, 4), (1, 4)] {
            let err = spec.validate(MatrixShape::new(rows, cols).unwrap()).unwrap_err();
            assert!(matches!(err, Error::InvalidArgument(_)), "{rows} x {cols}: {err}");
        }
    }

    #[test]
    fn poseidon2_is_defined_over_the_rows_layout_only() {
        let err = LeafSpec::new(HashKind::Poseidon2, LeafLayout::LambdaVmPairs, 0..4).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidArgument(m) if m.contains("lambda-vm-pairs") && m.contains("poseidon2")),
            "{err}"
        );
        let spec = LeafSpec::new(HashKind::Poseidon2, LeafLayout::Rows, 0..4).unwrap();
        assert_eq!(spec.validate(MatrixShape::new(3, 4).unwrap()).unwrap(), 3);
        for kind in HashKind::ALL {
            for layout in LeafLayout::ALL {
                let expected = !(kind == HashKind::Poseidon2 && layout == LeafLayout::LambdaVmPairs);
                assert_eq!(kind.supports(layout), expected, "{kind} {layout}");
                assert_eq!(LeafSpec::new(kind, layout, 0..2).is_ok(), expected, "{kind} {layout}");
            }
            assert_eq!(kind.is_algebraic(), kind == HashKind::Poseidon2);
        }
    }

    #[test]
    fn trees_refuse_zero_leaves_and_node_arrays_past_the_address_space() {
        assert!(matches!(TreeShape::new(0), Err(Error::InvalidArgument(_))));
        // (2L - 1) * 32 fits in 64 bits up to L = 2^58.
        let largest = 1usize << (usize::BITS - 6);
        let t = TreeShape::new(largest).unwrap();
        assert_eq!(t.bytes(), (2 * largest - 1) * 32);
        for leaves in [largest + 1, usize::MAX] {
            assert!(matches!(TreeShape::new(leaves), Err(Error::InvalidArgument(_))), "{leaves}");
        }
        let t = TreeShape::new(5).unwrap();
        assert_eq!((t.leaves(), t.padded_leaves(), t.nodes(), t.first_leaf(), t.words()), (5, 8, 15, 7, 60));
    }

    #[test]
    fn lde_params_keep_what_they_were_given() {
        let p = LdeParams::new(MatrixShape::new(8, 3).unwrap(), 4, P_PLUS_7).unwrap();
        assert_eq!((p.trace().rows(), p.trace().cols(), p.blowup(), p.shift()), (8, 3, 4, P_PLUS_7));
        assert_eq!((p.lde_shape().rows(), p.lde_shape().cols()), (32, 3));
        assert_eq!((p.log_trace_rows(), p.log_blowup()), (3, 2));
    }

    const P_PLUS_7: u64 = crate::field::P + 7;
}

/// The rows `first`, `first + step`, ..., `first + (count - 1) * step` of a matrix: the rows
/// [`Backend::column_dot_products`](crate::Backend::column_dot_products) reads (a PCS's opening
/// reads every `blowup`-th row of an LDE in natural order, the trace coset's rows).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RowStride {
    /// The first row read.
    pub first: usize,
    /// The distance between two rows read (>= 1).
    pub step: usize,
    /// How many rows are read (>= 1).
    pub count: usize,
}

impl RowStride {
    /// `count` rows from `first`, `step` apart.
    pub const fn new(first: usize, step: usize, count: usize) -> Self {
        Self { first, step, count }
    }

    /// Every row of a matrix of `rows` rows.
    pub const fn all(rows: usize) -> Self {
        Self { first: 0, step: 1, count: rows }
    }
}

impl fmt::Display for RowStride {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} rows from row {}, {} apart", self.count, self.first, self.step)
    }
}
