//! The opening products and FRI's fold: plain loops over backend-api's field arithmetic, one field operation at
//! a time (the front validated every argument first).

use backend_api::field::{add, bit_reverse, inverse, mul, pow, root_of_unity, sub};
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

/// [`backend_api::Backend::fri_fold`] over host slices: `w^-br(i)` by exponentiation, the
/// challenges applied as matrices.
pub(crate) fn fri_fold(input: &[u64], beta: &[u64], addend: Option<(&[u64], &[u64])>, out: &mut [u64]) {
    let d = beta.len().isqrt();
    let n = out.len() / d;
    let log_n = n.trailing_zeros();
    let half = inverse(2);
    let w_inv = inverse(root_of_unity(log_n + 1));
    let times = |m: &[u64], v: &[u64], r: usize| (0..d).fold(0, |acc, c| add(acc, mul(m[r * d + c], v[c])));
    for i in 0..n {
        let (a, b) = (&input[2 * i * d..(2 * i + 1) * d], &input[(2 * i + 1) * d..(2 * i + 2) * d]);
        let factor = mul(pow(w_inv, bit_reverse(i, log_n) as u64), half);
        let odd: Vec<u64> = (0..d).map(|c| mul(sub(a[c], b[c]), factor)).collect();
        for r in 0..d {
            let mut o = add(mul(add(a[r], b[r]), half), times(beta, &odd, r));
            if let Some((v, gamma)) = addend {
                o = add(o, times(gamma, &v[i * d..(i + 1) * d], r));
            }
            out[i * d + r] = o;
        }
    }
}
