//! Inputs the fuzz targets (`fuzz/`) found, kept as plain tests so that `cargo test` guards them.

use backend_api::plan::{TransposeGeometry, TransposePlan};
use backend_api::{Error, MatrixShape};

/// `transpose_plan` crash-a1d051ea: a shape built through the public fields with 0 columns was
/// accepted, and one with 0 rows divided by zero. Both are now `InvalidShape`, like
/// `MatrixShape::new`; so is an element count that overflows.
#[test]
fn shapes_built_field_by_field_are_validated() {
    for (rows, cols) in [(48, 0), (0, 48), (0, 0), (usize::MAX, 2), (1 << 40, 1 << 30)] {
        let shape = MatrixShape { rows, cols };
        for cap in [0, 64, 1 << 20, usize::MAX] {
            let err = TransposeGeometry::new(shape, cap).unwrap_err();
            assert!(matches!(err, Error::InvalidShape(_)), "{rows} x {cols}, cap {cap}: {err}");
            assert!(matches!(TransposePlan::new(shape, cap), Err(Error::InvalidShape(_))));
        }
    }
}
