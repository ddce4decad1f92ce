//! The opening products ([`backend_api::Backend::row_dot_products`],
//! [`backend_api::Backend::column_dot_products`]), FRI's fold ([`backend_api::Backend::fri_fold`])
//! and its input ([`backend_api::Backend::reduce_openings`]) with rayon. For the products, each product of two `u64`s (any
//! values, canonical or not) is added exactly to a 192-bit sum ([`Acc`]: a 128-bit sum and a
//! count of its overflows), which is reduced mod p once per output. No reduction per product, and
//! no row or column count can overflow the sum (fewer than `2^64` products).

use backend_api::MAX_EXTENSION_DEGREE;
use backend_api::field::{P, add, bit_reverse, inverse, mul, powers, reduce128, root_of_unity, sub};
use backend_api::{MatrixShape, ReductionCall, RowStride};
use rayon::prelude::*;

/// An exact sum of products of `u64`s: `carries * 2^128 + low`.
#[derive(Clone, Copy, Default)]
struct Acc {
    low: u128,
    carries: u64,
}

/// `2^128 mod p` (`2^64 = 2^32 - 1 mod p`, squared: `2^64 - 2^33 + 1 = -2^32`).
const TWO_POW_128: u64 = P - (1 << 32);

impl Acc {
    /// Adds `a * b`.
    #[inline]
    fn mac(&mut self, a: u64, b: u64) {
        self.add(u128::from(a) * u128::from(b));
    }

    /// Adds `x`.
    #[inline]
    fn add(&mut self, x: u128) {
        let (low, carry) = self.low.overflowing_add(x);
        self.low = low;
        self.carries += u64::from(carry);
    }

    /// Adds another sum.
    fn merge(&mut self, other: Acc) {
        self.add(other.low);
        self.carries += other.carries;
    }

    /// The sum mod p, canonical.
    fn reduce(self) -> u64 {
        add(reduce128(self.low), mul(self.carries % P, TWO_POW_128))
    }
}

/// `sum a[i] b[i] mod p`, exactly, reduced once.
fn dot(a: &[u64], b: &[u64]) -> u64 {
    let mut sum = Acc::default();
    for (&x, &y) in a.iter().zip(b) {
        sum.mac(x, y);
    }
    sum.reduce()
}

/// Rows of [`column_dot_products`] one task sums before its partial sums are combined.
const ROWS_PER_TASK: usize = 1024;

/// [`backend_api::Backend::row_dot_products`], on validated arguments.
pub(crate) fn row_dot_products(matrix: &[u64], shape: MatrixShape, coeffs: &[u64], out: &mut [u64]) {
    let cols = shape.cols();
    let k = coeffs.len() / cols;
    out.par_chunks_mut(k).zip(matrix.par_chunks(cols)).for_each(|(out, row)| {
        for (o, vector) in out.iter_mut().zip(coeffs.chunks(cols)) {
            *o = dot(row, vector);
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
            let mut acc = vec![Acc::default(); k * cols];
            for i in start..(start + ROWS_PER_TASK).min(rows.count) {
                let r = rows.first + i * rows.step;
                let row = &matrix[r * cols..(r + 1) * cols];
                for (j, acc) in acc.chunks_mut(cols).enumerate() {
                    let w = weights[j * rows.count + i];
                    for (a, &x) in acc.iter_mut().zip(row) {
                        a.mac(x, w);
                    }
                }
            }
            acc
        })
        .reduce_with(|mut a, b| {
            for (x, y) in a.iter_mut().zip(b) {
                x.merge(y);
            }
            a
        })
        .unwrap_or_else(|| vec![Acc::default(); k * cols]);
    for (o, s) in out.iter_mut().zip(sums) {
        *o = s.reduce();
    }
}

/// [`backend_api::Backend::fri_fold`], on validated arguments: `d` from the challenge's length,
/// the factors `w^-br(i) / 2` from one table of the
/// powers of `w^-1` read at `br(i)`.
pub(crate) fn fri_fold(input: &[u64], beta: &[u64], addend: Option<(&[u64], &[u64])>, out: &mut [u64]) {
    let d = beta.len().isqrt();
    let n = out.len() / d;
    let log_n = n.trailing_zeros();
    let half = inverse(2);
    let w_inv = powers(inverse(root_of_unity(log_n + 1)), n);
    // `m v` for a `d x d` matrix `m`, into the first `d` slots of a register-sized array.
    let apply = |m: &[u64], v: &[u64]| {
        let mut mv = [0u64; MAX_EXTENSION_DEGREE];
        for (slot, row) in mv[..d].iter_mut().zip(m.chunks(d)) {
            *slot = dot(row, v);
        }
        mv
    };
    out.par_chunks_mut(d).zip(input.par_chunks(2 * d)).enumerate().for_each(|(i, (out, pair))| {
        let (a, b) = pair.split_at(d);
        let factor = mul(w_inv[bit_reverse(i, log_n)], half);
        let mut odd = [0u64; MAX_EXTENSION_DEGREE];
        for (o, (&x, &y)) in odd.iter_mut().zip(a.iter().zip(b)) {
            *o = mul(sub(x, y), factor);
        }
        let beta_odd = apply(beta, &odd[..d]);
        let extra = addend.map(|(v, gamma)| apply(gamma, &v[i * d..(i + 1) * d]));
        for (r, o) in out.iter_mut().enumerate() {
            let even = mul(add(a[r], b[r]), half);
            *o = add(add(even, beta_odd[r]), extra.map_or(0, |e| e[r]));
        }
    });
}

/// Rows of [`reduce_openings`] one task takes (its first point costs one exponentiation).
const REDUCE_ROWS_PER_TASK: usize = 1024;

/// [`backend_api::Backend::reduce_openings`], on validated arguments: per row, its combination
/// `v` (`d` exact dot products), then per point `u = y - S v` and
/// `-adj(x I - Z)(x) u / chi(x)` by Horner's rule in `x` (CONVENTIONS.md, "Reduced openings").
pub(crate) fn reduce_openings(matrix: &[u64], shape: MatrixShape, call: &ReductionCall<'_>, acc: &mut [u64]) {
    let (cols, d) = (shape.cols(), call.degree());
    let w = root_of_unity(shape.rows().trailing_zeros());
    let shift = backend_api::field::canonical(call.shift);
    let dd = d * d;
    acc.par_chunks_mut(REDUCE_ROWS_PER_TASK * d).enumerate().for_each(|(task, acc)| {
        let first = task * REDUCE_ROWS_PER_TASK;
        let mut x = mul(shift, backend_api::field::pow(w, first as u64));
        for (i, out) in acc.chunks_exact_mut(d).enumerate() {
            let row = &matrix[(first + i) * cols..(first + i + 1) * cols];
            let v: Vec<u64> = call.coeffs.chunks_exact(cols).map(|c| dot(row, c)).collect();
            let mut sum = [0u64; MAX_EXTENSION_DEGREE];
            if call.accumulate {
                for (s, &a) in sum.iter_mut().zip(out.iter()) {
                    *s = backend_api::field::canonical(a);
                }
            }
            for point in call.points {
                let (y, rescale) = (point.value(), point.rescale());
                let u: Vec<u64> = (0..d).map(|r| sub(y[r], dot(&rescale[r * d..(r + 1) * d], &v))).collect();
                let chi = point.charpoly().iter().rev().fold(1, |s, &c| add(mul(s, x), c));
                let factor = sub(0, inverse(chi));
                // adj(x I - Z) u = sum_k x^k (B_k u), Horner from the top.
                let adj = point.adjugate();
                let mut t = [0u64; MAX_EXTENSION_DEGREE];
                for k in (0..d).rev() {
                    let b = &adj[k * dd..(k + 1) * dd];
                    for r in 0..d {
                        t[r] = add(mul(t[r], x), dot(&b[r * d..(r + 1) * d], &u));
                    }
                }
                for r in 0..d {
                    sum[r] = add(sum[r], mul(factor, t[r]));
                }
            }
            out.copy_from_slice(&sum[..d]);
            x = mul(x, w);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exact sum of `terms` mod p, by `u128 % p` per product and per addition.
    fn naive(terms: &[(u64, u64)]) -> u64 {
        let p = u128::from(P);
        terms.iter().fold(0u128, |s, &(a, b)| (s + u128::from(a) * u128::from(b) % p) % p) as u64
    }

    #[test]
    fn sums_that_overflow_128_bits_reduce_exactly() {
        let max = u64::MAX;
        for terms in [
            vec![],
            vec![(max, max)],
            vec![(max, max); 2],
            vec![(max, max); 3],
            vec![(max, max), (1, 1)],
            vec![(P, 1), (P + 1, P + 1), (max, 2)],
            (0..1000u64).map(|i| (max - i, max - 3 * i)).collect(),
        ] {
            let mut acc = Acc::default();
            for &(a, b) in &terms {
                acc.mac(a, b);
            }
            assert_eq!(acc.reduce(), naive(&terms), "{} terms", terms.len());
            // The same sum split in two and merged.
            let (left, right) = terms.split_at(terms.len() / 2);
            let (mut l, mut r) = (Acc::default(), Acc::default());
            left.iter().for_each(|&(a, b)| l.mac(a, b));
            right.iter().for_each(|&(a, b)| r.mac(a, b));
            l.merge(r);
            assert_eq!(l.reduce(), naive(&terms), "{} terms, merged", terms.len());
        }
        assert_eq!(TWO_POW_128, ((1u128 << 127) % u128::from(P) * 2 % u128::from(P)) as u64);
    }
}
