//! The reduced openings ([`Backend::reduce_openings`](crate::Backend::reduce_openings)): the
//! input FRI takes from a committed LDE, computed where the LDE lies.
//!
//! A PCS that opens committed columns `f_c` at points `z` hands FRI, for every point `x` of the
//! LDE's coset, `sum_z (y_z - S_z sum_c a_c f_c(x)) / (z - x)`: the columns combined by powers of
//! a challenge, the claimed values subtracted, divided by `z - x` (Plonky3's
//! `TwoAdicFriPcs::open`, the "DEEP" quotient of the literature). The points and the coefficients
//! lie in an extension of degree `d`; as in [`Backend::fri_fold`](crate::Backend::fri_fold), a
//! backend does no extension arithmetic of its own. An extension element is `d` words, its
//! coordinates in a basis the caller chooses, and the point is given as the `d x d` matrix `Z` of
//! multiplication by `z` in that basis. Dividing by `z - x` is multiplying by the inverse of
//! `Z - x I`, which [`ReductionPoint::new`] prepares once per point, on the host: with `chi` the
//! characteristic polynomial of `Z` and `A` the adjugate of `x I - Z` (a matrix polynomial of
//! degree `d - 1`), `(Z - x I)^-1 = -A(x) / chi(x)`. A backend evaluates two polynomials at `x`
//! and inverts one field element per point and row (CONVENTIONS.md, "Reduced openings").

use crate::error::{Error, Result};
use crate::field::{add, canonical, inverse, mul, pow, sub};
use crate::{MAX_EXTENSION_DEGREE, MatrixShape};

/// The most opening points one [`Backend::reduce_openings`](crate::Backend::reduce_openings)
/// call takes (a STARK opens its trace at two, `z` and `z w`).
pub const MAX_REDUCTION_POINTS: usize = 4;

/// One opening point of a reduction, over an extension of degree `d`: the point `z` (as its
/// multiplication matrix `Z`), the value `y` the row's term starts from and the matrix `S` that
/// scales the row's combination. Its term at `x` is `(Z - x I)^-1 (y - S v)`, `v` the row's
/// combination ([`ReductionCall::coeffs`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReductionPoint {
    d: usize,
    point: Vec<u64>,
    value: Vec<u64>,
    rescale: Vec<u64>,
    charpoly: Vec<u64>,
    adjugate: Vec<u64>,
}

impl ReductionPoint {
    /// The point of multiplication matrix `point` (`d x d`, row-major: `(Z v)[r] = sum_c
    /// point[r * d + c] v[c]`), value `value` (`d` words) and rescaling `rescale` (`d x d`), any
    /// words (read mod p). Computes `chi` and the adjugate by the Faddeev-LeVerrier recurrence.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a `value` of no length or longer than
    /// [`MAX_EXTENSION_DEGREE`], and a matrix that is not `d x d` for `d = value.len()`.
    pub fn new(point: &[u64], value: &[u64], rescale: &[u64]) -> Result<Self> {
        let d = value.len();
        if !(1..=MAX_EXTENSION_DEGREE).contains(&d) {
            return Err(Error::InvalidArgument(format!(
                "reduce_openings: a value of {d} words; an extension element is 1 to {MAX_EXTENSION_DEGREE}"
            )));
        }
        for (what, m) in [("point", point), ("rescale", rescale)] {
            if m.len() != d * d {
                return Err(Error::InvalidArgument(format!(
                    "reduce_openings: a {what} matrix of {} words for an extension of degree {d} ({} expected)",
                    m.len(),
                    d * d
                )));
            }
        }
        let canon = |m: &[u64]| m.iter().map(|&x| canonical(x)).collect::<Vec<u64>>();
        let point = canon(point);
        let (charpoly, adjugate) = charpoly_adjugate(&point, d);
        Ok(Self { d, point, value: canon(value), rescale: canon(rescale), charpoly, adjugate })
    }

    /// The extension degree `d`.
    pub fn degree(&self) -> usize {
        self.d
    }

    /// `Z`, `d x d` row-major, canonical.
    pub fn point(&self) -> &[u64] {
        &self.point
    }

    /// `y`, `d` words, canonical.
    pub fn value(&self) -> &[u64] {
        &self.value
    }

    /// `S`, `d x d` row-major, canonical.
    pub fn rescale(&self) -> &[u64] {
        &self.rescale
    }

    /// `chi(x) = det(x I - Z) = x^d + sum_k charpoly[k] x^k`: the `d` coefficients below the
    /// leading one, constant first.
    pub fn charpoly(&self) -> &[u64] {
        &self.charpoly
    }

    /// `adj(x I - Z) = sum_k x^k B_k` for `k < d`: `B_k` (`d x d` row-major) at `k * d * d`.
    pub fn adjugate(&self) -> &[u64] {
        &self.adjugate
    }

    /// The point's words in the order a device kernel reads them: the value, the rescaling, the
    /// characteristic polynomial, the adjugate (`2 d + d^2 + d^3` words).
    pub fn words(&self) -> Vec<u64> {
        [&self.value[..], &self.rescale, &self.charpoly, &self.adjugate].concat()
    }

    /// Words per point in [`ReductionPoint::words`].
    pub const fn words_per_point(d: usize) -> usize {
        2 * d + d * d + d * d * d
    }

    /// Whether `chi` has a root on the coset `shift * <w_rows>` (`rows` a power of two): whether
    /// `Z - x I` is singular at some row's `x`, where the term would divide by zero. The coset is
    /// the roots of `x^rows - shift^rows`, so this is `gcd(chi, x^rows mod chi - shift^rows) != 1`,
    /// `O(d^2 log rows)` work (for a field's multiplication matrix, only a `z` of the base field
    /// on the coset has one).
    fn divides_by_zero(&self, shift: u64, rows: usize) -> bool {
        // chi monic: its d low coefficients, then 1.
        let mut chi = self.charpoly.clone();
        chi.push(1);
        // x mod chi, squared log2(rows) times.
        let mut h = reduce_mod(vec![0, 1], &chi);
        for _ in 0..rows.trailing_zeros() {
            h = reduce_mod(poly_mul(&h, &h), &chi);
        }
        h.resize(self.d.max(1), 0);
        h[0] = sub(h[0], pow(canonical(shift), rows as u64));
        poly_gcd_degree(chi, h) > 0
    }
}

/// The product of two polynomials (coefficients constant first).
fn poly_mul(a: &[u64], b: &[u64]) -> Vec<u64> {
    let mut out = vec![0u64; (a.len() + b.len()).saturating_sub(1)];
    for (i, &x) in a.iter().enumerate() {
        for (j, &y) in b.iter().enumerate() {
            out[i + j] = add(out[i + j], mul(x, y));
        }
    }
    out
}

/// `a mod m` for a monic `m` of degree `d`: `d` coefficients.
fn reduce_mod(mut a: Vec<u64>, m: &[u64]) -> Vec<u64> {
    let d = m.len() - 1;
    for i in (d..a.len()).rev() {
        let c = a[i];
        for k in 0..=d {
            a[i - d + k] = sub(a[i - d + k], mul(c, m[k]));
        }
    }
    a.resize(d, 0);
    a
}

/// The degree of `gcd(a, b)` (Euclid's algorithm; `a` nonzero).
fn poly_gcd_degree(mut a: Vec<u64>, mut b: Vec<u64>) -> usize {
    let trim = |p: &mut Vec<u64>| {
        while p.last() == Some(&0) {
            p.pop();
        }
    };
    trim(&mut a);
    trim(&mut b);
    while !b.is_empty() {
        // a mod b, b made monic first.
        let lead = inverse(*b.last().expect("b is not empty"));
        let monic: Vec<u64> = b.iter().map(|&c| mul(c, lead)).collect();
        let mut r = if a.len() >= monic.len() { reduce_mod(a, &monic) } else { a };
        trim(&mut r);
        (a, b) = (b, r);
    }
    a.len() - 1
}

/// `chi` and `adj(x I - Z)` of the `d x d` matrix `z` (canonical) by the Faddeev-LeVerrier
/// recurrence: `N_1 = I`, `N_k = Z N_(k-1) + c_(d-k+1) I`, `c_(d-k) = -tr(Z N_k) / k`, and
/// `adj(x I - Z) = sum_k N_k x^(d-k)`. (The divisions are by `k <= d`, invertible mod p.)
fn charpoly_adjugate(z: &[u64], d: usize) -> (Vec<u64>, Vec<u64>) {
    let matmul = |a: &[u64], b: &[u64]| -> Vec<u64> {
        (0..d * d).map(|i| (0..d).fold(0, |s, t| add(s, mul(a[(i / d) * d + t], b[t * d + i % d])))).collect()
    };
    let trace = |m: &[u64]| (0..d).fold(0, |s, i| add(s, m[i * d + i]));
    let mut charpoly = vec![0u64; d];
    let mut adjugate = vec![0u64; d * d * d];
    let mut n: Vec<u64> = (0..d * d).map(|i| u64::from(i / d == i % d)).collect();
    for k in 1..=d {
        if k > 1 {
            n = matmul(z, &n);
            for i in 0..d {
                n[i * d + i] = add(n[i * d + i], charpoly[d - k + 1]);
            }
        }
        adjugate[(d - k) * d * d..(d - k + 1) * d * d].copy_from_slice(&n);
        charpoly[d - k] = sub(0, mul(trace(&matmul(z, &n)), inverse(k as u64)));
    }
    (charpoly, adjugate)
}

/// What a [`Backend::reduce_openings`](crate::Backend::reduce_openings) call computes, besides
/// the matrix it reads and the accumulator it writes.
#[derive(Clone, Copy, Debug)]
pub struct ReductionCall<'a> {
    /// `d` vectors of `cols` coefficients one after the other: row `j`'s combination is
    /// `v[t] = sum_c coeffs[t * cols + c] * matrix[j][c]` for `t < d` (an extension element; 0
    /// outside the columns a caller opens).
    pub coeffs: &'a [u64],
    /// The coset's shift: row `j` of a matrix of `R` rows is the point `shift * w_R^j`.
    pub shift: u64,
    /// The opening points, 1 to [`MAX_REDUCTION_POINTS`], of one degree.
    pub points: &'a [ReductionPoint],
    /// Add the terms to the accumulator's words (read mod p) rather than overwrite them.
    pub accumulate: bool,
}

impl ReductionCall<'_> {
    /// The extension degree (valid after the front's check).
    pub fn degree(&self) -> usize {
        self.points.first().map_or(0, ReductionPoint::degree)
    }
}

/// The arguments of a [`Backend::reduce_openings`](crate::Backend::reduce_openings) call,
/// checked against each other ([`crate::validate::reduce_openings`]). Returns the degree `d`.
pub(crate) fn check_call(
    shape: MatrixShape,
    matrix_len: usize,
    call: &ReductionCall<'_>,
    acc_len: usize,
) -> Result<usize> {
    shape.check_len("reduce_openings matrix", matrix_len)?;
    let rows = shape.rows();
    if !rows.is_power_of_two() || rows.trailing_zeros() > crate::field::TWO_ADICITY {
        return Err(Error::InvalidArgument(format!(
            "reduce_openings: a matrix of {rows} rows; its rows are the points of a coset of the subgroup of that \
             order, a power of two up to 2^{}",
            crate::field::TWO_ADICITY
        )));
    }
    let n = call.points.len();
    if !(1..=MAX_REDUCTION_POINTS).contains(&n) {
        return Err(Error::InvalidArgument(format!(
            "reduce_openings: {n} opening points; a call takes 1 to {MAX_REDUCTION_POINTS}"
        )));
    }
    let d = call.degree();
    if let Some(p) = call.points.iter().find(|p| p.degree() != d) {
        return Err(Error::InvalidArgument(format!(
            "reduce_openings: points of degrees {d} and {}; one call's points share their extension",
            p.degree()
        )));
    }
    let expected = shape.cols() * d;
    if call.coeffs.len() != expected {
        return Err(Error::LengthMismatch {
            what: "reduce_openings coefficients (d vectors of cols)",
            expected,
            actual: call.coeffs.len(),
        });
    }
    if let Some(i) = call.points.iter().position(|p| p.divides_by_zero(call.shift, rows)) {
        return Err(Error::InvalidArgument(format!(
            "reduce_openings: opening point {i} makes `Z - x I` singular at a point `x` of the matrix's coset, where \
             its term divides by zero"
        )));
    }
    let expected =
        rows.checked_mul(d).ok_or(Error::SizeOverflow { what: "reduce_openings accumulator", elems: rows })?;
    if acc_len != expected {
        return Err(Error::LengthMismatch {
            what: "reduce_openings accumulator (rows x d)",
            expected,
            actual: acc_len,
        });
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::{P, root_of_unity};

    /// A deterministic stream of field elements, some non-canonical.
    fn words(seed: u64, n: usize) -> Vec<u64> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                s
            })
            .collect()
    }

    /// `sum_k x^k m_k` for `d x d` matrices `m_k` at `k * d * d`.
    fn eval_matrix_poly(m: &[u64], d: usize, x: u64) -> Vec<u64> {
        (0..d * d).map(|i| (0..d).rev().fold(0, |s, k| add(mul(s, x), m[k * d * d + i]))).collect()
    }

    #[test]
    fn the_adjugate_times_x_minus_z_is_the_characteristic_polynomial() {
        // (x I - Z) adj(x I - Z) = chi(x) I at random x, for every degree: an identity the
        // recurrence does not use.
        for d in 1..=MAX_EXTENSION_DEGREE {
            let z = words(d as u64, d * d);
            let p = ReductionPoint::new(&z, &vec![0; d], &vec![0; d * d]).unwrap();
            for x in words(100 + d as u64, 3).into_iter().map(canonical) {
                let adj = eval_matrix_poly(p.adjugate(), d, x);
                let chi = p.charpoly().iter().rev().fold(1, |s, &c| add(mul(s, x), c));
                for r in 0..d {
                    for c in 0..d {
                        let prod = (0..d).fold(0, |s, t| {
                            let m = sub(if r == t { x } else { 0 }, p.point()[r * d + t]);
                            add(s, mul(m, adj[t * d + c]))
                        });
                        assert_eq!(prod, if r == c { chi } else { 0 }, "d = {d}, entry ({r}, {c})");
                    }
                }
            }
        }
    }

    #[test]
    fn a_two_by_two_point_has_the_textbook_polynomial() {
        // Z = [[a, b], [c, e]]: chi = x^2 - (a + e) x + (a e - b c), adj = x I + [[-e, b], [c, -a]].
        let (a, b, c, e) = (3, 5, 7, 11);
        let p = ReductionPoint::new(&[a, b, c, e], &[1, 2], &[1, 0, 0, 1]).unwrap();
        assert_eq!(p.charpoly(), &[sub(mul(a, e), mul(b, c)), sub(0, a + e)]);
        assert_eq!(p.adjugate(), &[sub(0, e), b, c, sub(0, a), 1, 0, 0, 1]);
        assert_eq!(p.words().len(), ReductionPoint::words_per_point(2));
        assert_eq!(p.words()[..2], [1, 2]);
        // Every degree's words: 2d + d^2 + d^3.
        for d in 1..=MAX_EXTENSION_DEGREE {
            let q = ReductionPoint::new(&vec![1; d * d], &vec![2; d], &vec![3; d * d]).unwrap();
            assert_eq!(q.words().len(), 2 * d + d * d + d * d * d);
            assert_eq!(ReductionPoint::words_per_point(d), q.words().len());
        }
    }

    #[test]
    fn points_read_their_words_mod_p() {
        let p = ReductionPoint::new(&[P + 3, 0, 0, P + 3], &[P, P + 1], &[u64::MAX, 0, 0, 1]).unwrap();
        assert_eq!(p.point(), &[3, 0, 0, 3]);
        assert_eq!(p.value(), &[0, 1]);
        assert_eq!(p.rescale(), &[u64::MAX - P, 0, 0, 1]);
    }

    #[test]
    fn points_refuse_bad_sizes() {
        assert!(ReductionPoint::new(&[], &[], &[]).is_err());
        assert!(ReductionPoint::new(&[0; 81], &[0; 9], &[0; 81]).is_err());
        assert!(ReductionPoint::new(&[0; 3], &[0; 2], &[0; 4]).is_err());
        assert!(ReductionPoint::new(&[0; 4], &[0; 2], &[0; 5]).is_err());
        assert!(ReductionPoint::new(&[0; 64], &[0; 8], &[0; 64]).is_ok());
    }

    #[test]
    fn calls_are_checked() {
        let shape = MatrixShape::new(8, 3).unwrap();
        let point = |z: u64| ReductionPoint::new(&[z, 1, 0, z], &[1, 2], &[1, 0, 0, 1]).unwrap();
        let pts = [point(5), point(9)];
        let coeffs = [0u64; 6];
        let call = ReductionCall { coeffs: &coeffs, shift: 7, points: &pts, accumulate: false };
        assert_eq!(check_call(shape, 24, &call, 16).unwrap(), 2);
        assert!(matches!(check_call(shape, 23, &call, 16), Err(Error::LengthMismatch { .. })));
        assert!(matches!(check_call(shape, 24, &call, 15), Err(Error::LengthMismatch { .. })));
        let odd = MatrixShape::new(6, 3).unwrap();
        assert!(matches!(check_call(odd, 18, &call, 12), Err(Error::InvalidArgument(_))));
        // Heights up to the field's two-adicity (lengths only: nothing is allocated).
        let tall = |log: u32| {
            let shape = MatrixShape::new(1 << log, 1).unwrap();
            let one = [point(5)];
            check_call(shape, 1 << log, &ReductionCall { coeffs: &[0, 0], points: &one, ..call }, 2 << log)
        };
        assert!(tall(32).is_ok());
        assert!(matches!(tall(33), Err(Error::InvalidArgument(m)) if m.contains("up to 2^32")));
        let short = ReductionCall { coeffs: &coeffs[..5], ..call };
        assert!(matches!(check_call(shape, 24, &short, 16), Err(Error::LengthMismatch { .. })));
        let none = ReductionCall { points: &[], ..call };
        assert!(matches!(check_call(shape, 24, &none, 16), Err(Error::InvalidArgument(_))));
        let many = [point(1), point(2), point(3), point(4), point(5)];
        let too_many = ReductionCall { points: &many, ..call };
        assert!(matches!(check_call(shape, 24, &too_many, 16), Err(Error::InvalidArgument(_))));
        assert!(check_call(shape, 24, &ReductionCall { points: &many[..4], ..call }, 16).is_ok());
        let mixed = [point(5), ReductionPoint::new(&[1], &[1], &[1]).unwrap()];
        assert!(matches!(
            check_call(shape, 24, &ReductionCall { points: &mixed, ..call }, 16),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn a_point_singular_on_the_coset_is_refused_and_others_are_not() {
        let shape = MatrixShape::new(8, 1).unwrap();
        let shift = 7;
        let on = mul(shift, pow(root_of_unity(3), 5));
        let pt = |z: [u64; 4]| ReductionPoint::new(&z, &[0, 0], &[0; 4]).unwrap();
        let call = |pts: &[ReductionPoint], shift: u64| {
            let pts = pts.to_vec();
            check_call(shape, 8, &ReductionCall { coeffs: &[0, 0], shift, points: &pts, accumulate: true }, 16)
        };
        let refused = |r: Result<usize>, i: usize| matches!(r, Err(Error::InvalidArgument(m)) if m.contains(&format!("point {i}")));
        // A point of the coset (non-canonical too), as a scalar, a Jordan block or one eigenvalue.
        assert!(refused(call(&[pt([on, 0, 0, on])], shift), 0));
        assert!(refused(call(&[pt([1, 0, 0, 1]), pt([on + P, 0, 0, on])], shift), 1));
        assert!(refused(call(&[pt([on, 1, 0, on])], shift), 0));
        assert!(refused(call(&[pt([add(on, 1), 0, 0, on])], shift), 0));
        // Off the coset: its neighbour, the coset of another shift, and a point of the quadratic
        // extension x^2 = 7 (7 is not a square mod p) whose base coordinate is on the coset.
        assert!(call(&[pt([add(on, 1), 0, 0, add(on, 1)])], shift).is_ok());
        assert!(call(&[pt([on, 0, 0, on])], 3).is_ok());
        assert!(call(&[pt([on, 7, 1, on])], shift).is_ok());
        // Degree 1, and shift 0 (every row is the point 0).
        let one = |z: u64, shift: u64| {
            let pts = [ReductionPoint::new(&[z], &[0], &[0]).unwrap()];
            check_call(shape, 8, &ReductionCall { coeffs: &[0], shift, points: &pts, accumulate: false }, 8)
        };
        assert!(refused(one(on, shift), 0));
        assert!(one(add(on, 1), shift).is_ok());
        assert!(refused(one(0, P), 0));
        assert!(one(1, 0).is_ok());
    }
}
