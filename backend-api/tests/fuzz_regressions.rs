//! Inputs the fuzz targets (`fuzz/`) found, kept as plain tests so that `cargo test` guards them.

use backend_api::plan::{TransposeGeometry, TransposePlan};
use backend_api::{Error, MatrixShape};

/// `transpose_plan` crash-a1d051ea: a shape built through the (then public) fields with 0 columns
/// was accepted, and one with 0 rows divided by zero. The fields are private now: such a shape
/// cannot be built, `MatrixShape::new` refuses it, and so an element count that overflows.
#[test]
fn degenerate_shapes_cannot_be_built() {
    for (rows, cols) in [(48, 0), (0, 48), (0, 0), (usize::MAX, 2), (1 << 40, 1 << 30), (1, usize::MAX / 8 + 1)] {
        let err = MatrixShape::new(rows, cols).unwrap_err();
        assert!(matches!(err, Error::InvalidShape(_)), "{rows} x {cols}: {err}");
    }
}

/// The widest one-row shape whose bytes fit `usize` has `(cols + 1) * 8` overflowing: the plan
/// reports that instead of wrapping.
#[test]
fn widest_row_does_not_wrap_the_run_size() {
    let shape = MatrixShape::new(1, usize::MAX / 8).unwrap();
    for cap in [0, 64, usize::MAX] {
        let err = TransposeGeometry::new(shape, cap).unwrap_err();
        assert!(matches!(err, Error::InvalidShape(_)), "cap {cap}: {err}");
        assert!(matches!(TransposePlan::new(shape, cap), Err(Error::InvalidShape(_))));
    }
}
