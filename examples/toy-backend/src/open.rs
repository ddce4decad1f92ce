//! The opening products: plain loops over backend-api's field arithmetic, one field operation at
//! a time (the front validated every argument first).

use backend_api::field::{add, mul};
use backend_api::{MatrixShape, RowStride};

/// [`backend_api::Backend::row_dot_products`] over a host slice.
pub(crate) fn row_dot_products(matrix: &[u64], shape: MatrixShape, coeffs: &[u64], out: &mut [u64]) {
    let cols = shape.cols();
    let k = coeffs.len() / cols;
    for (r, row) in matrix.chunks(cols).enumerate() {
        for (j, vector) in coeffs.chunks(cols).enumerate() {
            out[r * k + j] = row.iter().zip(vector).fold(0, |acc, (&x, &c)| add(acc, mul(x, c)));
        }
    }
}

/// [`backend_api::Backend::column_dot_products`] over a host slice.
pub(crate) fn column_dot_products(
    matrix: &[u64],
    shape: MatrixShape,
    rows: RowStride,
    weights: &[u64],
    out: &mut [u64],
) {
    let cols = shape.cols();
    out.fill(0);
    for (j, vector) in weights.chunks(rows.count).enumerate() {
        for (i, &w) in vector.iter().enumerate() {
            let r = rows.first + i * rows.step;
            for (c, &x) in matrix[r * cols..(r + 1) * cols].iter().enumerate() {
                out[j * cols + c] = add(out[j * cols + c], mul(x, w));
            }
        }
    }
}
