//! The opening products ([`backend_api::Backend::row_dot_products`],
//! [`backend_api::Backend::column_dot_products`]) with rayon: each product is reduced mod p once,
//! then summed in 128 bits and reduced once per output (a sum of `2^64` reduced products still
//! fits, so no row or column count can overflow it).

use backend_api::field::reduce128;
use backend_api::{MatrixShape, RowStride};
use rayon::prelude::*;

/// Rows of [`column_dot_products`] one task sums before its partial sums are combined.
const ROWS_PER_TASK: usize = 1024;

/// [`backend_api::Backend::row_dot_products`], on validated arguments.
pub(crate) fn row_dot_products(matrix: &[u64], shape: MatrixShape, coeffs: &[u64], out: &mut [u64]) {
    let cols = shape.cols();
    let k = coeffs.len() / cols;
    out.par_chunks_mut(k).zip(matrix.par_chunks(cols)).for_each(|(out, row)| {
        for (o, vector) in out.iter_mut().zip(coeffs.chunks(cols)) {
            let sum: u128 = row.iter().zip(vector).map(|(&x, &c)| u128::from(product(x, c))).sum();
            *o = reduce128(sum);
        }
    });
}

/// [`backend_api::Backend::column_dot_products`], on validated arguments.
pub(crate) fn column_dot_products(
    matrix: &[u64],
    shape: MatrixShape,
    rows: RowStride,
    weights: &[u64],
    out: &mut [u64],
) {
    let cols = shape.cols();
    let k = weights.len() / rows.count;
    let sums = (0..rows.count)
        .into_par_iter()
        .step_by(ROWS_PER_TASK)
        .map(|start| {
            let mut acc = vec![0u128; k * cols];
            for i in start..(start + ROWS_PER_TASK).min(rows.count) {
                let r = rows.first + i * rows.step;
                let row = &matrix[r * cols..(r + 1) * cols];
                for (j, acc) in acc.chunks_mut(cols).enumerate() {
                    let w = weights[j * rows.count + i];
                    for (a, &x) in acc.iter_mut().zip(row) {
                        *a += u128::from(product(x, w));
                    }
                }
            }
            acc
        })
        .reduce_with(|mut a, b| {
            for (x, y) in a.iter_mut().zip(b) {
                // Both are sums of at most 2^64 values below 2^64: reduce before adding.
                *x = u128::from(reduce128(*x)) + u128::from(reduce128(y));
            }
            a
        })
        .unwrap_or_else(|| vec![0; k * cols]);
    for (o, s) in out.iter_mut().zip(sums) {
        *o = reduce128(s);
    }
}

/// `a * b mod p`, canonical.
#[inline]
fn product(a: u64, b: u64) -> u64 {
    reduce128(u128::from(a) * u128::from(b))
}
