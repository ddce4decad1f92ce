//! The opening products, FRI's fold and its input (the reduced openings): plain loops over backend-api's field arithmetic, one field operation at
//! a time (the front validated every argument first).

use backend_api::field::{add, bit_reverse, inverse, mul, pow, root_of_unity, sub};
use backend_api::{MatrixShape, ReductionCall, RowStride};

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

/// [`backend_api::Backend::reduce_openings`] over host slices: at row `j`, `x = shift * w^j`; per
/// point, `u = y - S v` and `-adj(x I - Z)(x) u / chi(x)`, the adjugate's matrices summed by
/// powers of `x`.
pub(crate) fn reduce_openings(matrix: &[u64], shape: MatrixShape, call: &ReductionCall<'_>, acc: &mut [u64]) {
    let (cols, d) = (shape.cols(), call.degree());
    let w = root_of_unity(shape.rows().trailing_zeros());
    let times = |m: &[u64], v: &[u64], r: usize| (0..d).fold(0, |s, c| add(s, mul(m[r * d + c], v[c])));
    for (j, (row, out)) in matrix.chunks(cols).zip(acc.chunks_mut(d)).enumerate() {
        let x = mul(call.shift, pow(w, j as u64));
        let v: Vec<u64> =
            call.coeffs.chunks(cols).map(|c| row.iter().zip(c).fold(0, |s, (&a, &b)| add(s, mul(a, b)))).collect();
        let mut sum: Vec<u64> = out.iter().map(|&a| if call.accumulate { add(a, 0) } else { 0 }).collect();
        for point in call.points {
            let u: Vec<u64> = (0..d).map(|r| sub(point.value()[r], times(point.rescale(), &v, r))).collect();
            let chi = point.charpoly().iter().rev().fold(1, |s, &c| add(mul(s, x), c));
            let factor = sub(0, inverse(chi));
            let mut x_k = 1;
            for b in point.adjugate().chunks(d * d) {
                for (r, s) in sum.iter_mut().enumerate() {
                    *s = add(*s, mul(mul(factor, x_k), times(b, &u, r)));
                }
                x_k = mul(x_k, x);
            }
        }
        out.copy_from_slice(&sum);
    }
}
