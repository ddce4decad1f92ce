//! AVX2 row kernels: the LDE's butterflies and scaling, four columns per instruction, for CPUs
//! without AVX-512F.
//!
//! Values are canonical in and out, as in the scalar kernels, and every function computes the
//! same canonical values they do. AVX2 has no unsigned 64-bit compare, so the comparisons work
//! on the *shifted* form `x ^ 2^63` of a value (`x + 2^63 mod 2^64`): `a < b` unsigned exactly
//! when `a ^ 2^63 < b ^ 2^63` signed, which `vpcmpgtq` tests. Shifting commutes with wrapping
//! subtraction of an unshifted value (`(a - b) ^ 2^63 = (a ^ 2^63) - b`), so a sum or a
//! difference stays in shifted form as long as one operand is unshifted, and a carry out of
//! `a + u` shows as the shifted result being smaller than `a ^ 2^63` whatever `u` is; the
//! difference of two shifted values is the difference of the values. The reduction ends in shifted
//! form, which the decimation-in-time butterfly's subtraction compares as it is. A compare
//! gives all ones or zero; its top half, `2^32 - 1` (`2^64 mod p`), or a mask of `p` is what a
//! wrap adds or takes away. The product of two `u64` is put together from four 32 x 32-bit
//! products (`vpmuludq`), then reduced mod `p` with `2^64 = 2^32 - 1` and `2^96 = -1`, the steps
//! of `backend_api::field::reduce128`, as in the AVX-512 kernels. A row whose length is not a
//! multiple of four finishes on the scalar kernel. The out-of-place butterflies (a group pass's
//! first and last stages) may reduce their inputs mod p as they load them.

use std::arch::x86_64::{
    __m256i, _mm256_add_epi64, _mm256_and_si256, _mm256_andnot_si256, _mm256_blend_epi32, _mm256_cmpgt_epi64,
    _mm256_loadu_si256, _mm256_mul_epu32, _mm256_set1_epi64x, _mm256_slli_epi64, _mm256_srli_epi64,
    _mm256_storeu_si256, _mm256_sub_epi64, _mm256_xor_si256,
};

use super::{Butterfly, Canonical, P, butterfly_scalar, butterfly_scalar_to};

/// `2^32 - 1`, which is `2^64 mod p`; also the low-half mask.
const EPS: u64 = 0xFFFF_FFFF;
/// The sign bit: `x ^ SIGN` is the shifted form of `x`.
const SIGN: u64 = 1 << 63;

#[inline]
#[target_feature(enable = "avx2")]
fn splat(x: u64) -> __m256i {
    _mm256_set1_epi64x(x as i64)
}

/// The shifted form `x ^ 2^63`, lane by lane (its own inverse).
#[inline]
#[target_feature(enable = "avx2")]
fn shift(x: __m256i) -> __m256i {
    _mm256_xor_si256(x, splat(SIGN))
}

/// All ones where `a < b` as unsigned lanes, given both in shifted form.
#[inline]
#[target_feature(enable = "avx2")]
fn lt_s(a_s: __m256i, b_s: __m256i) -> __m256i {
    _mm256_cmpgt_epi64(b_s, a_s)
}

/// `a + b mod p`, lane by lane, for canonical lanes, from `a_s = shift(a)`.
#[inline]
#[target_feature(enable = "avx2")]
fn add(a_s: __m256i, b: __m256i) -> __m256i {
    // p - b is in [1, p]: a >= p - b means a + b >= p, and then a - (p - b) is the result;
    // otherwise that difference wrapped below zero, and adding p back gives a + b.
    let nb_s = _mm256_sub_epi64(splat(P ^ SIGN), b);
    let t = _mm256_sub_epi64(a_s, nb_s);
    _mm256_add_epi64(t, _mm256_and_si256(lt_s(a_s, nb_s), splat(P)))
}

/// `a - b mod p`, lane by lane, for canonical lanes, from `a_s = shift(a)` and `b_s = shift(b)`.
#[inline]
#[target_feature(enable = "avx2")]
fn sub(a_s: __m256i, b_s: __m256i) -> __m256i {
    // a - b = a_s - b_s (mod 2^64).
    let d = _mm256_sub_epi64(a_s, b_s);
    _mm256_add_epi64(d, _mm256_and_si256(lt_s(a_s, b_s), splat(P)))
}

/// `x * w mod p` lane by lane, for `w_lo = splat(w)` and `w_hi = splat(w >> 32)`; canonical out.
#[inline]
#[target_feature(enable = "avx2")]
fn mul(x: __m256i, w_lo: __m256i, w_hi: __m256i) -> __m256i {
    shift(mul_s(x, w_lo, w_hi))
}

/// [`mul`] in shifted form.
#[inline]
#[target_feature(enable = "avx2")]
fn mul_s(x: __m256i, w_lo: __m256i, w_hi: __m256i) -> __m256i {
    let mask = splat(EPS);
    let x_hi = _mm256_srli_epi64::<32>(x);
    // vpmuludq multiplies the low 32 bits of each lane.
    let ll = _mm256_mul_epu32(x, w_lo);
    let lh = _mm256_mul_epu32(x, w_hi);
    let hl = _mm256_mul_epu32(x_hi, w_lo);
    let hh = _mm256_mul_epu32(x_hi, w_hi);
    // x * w = hh * 2^64 + (lh + hl) * 2^32 + ll; neither sum below can overflow 64 bits.
    let mid = _mm256_add_epi64(lh, _mm256_srli_epi64::<32>(ll));
    let mid2 = _mm256_add_epi64(hl, _mm256_and_si256(mid, mask));
    // The low word: ll's low half, mid2's low half above it (the odd 32-bit elements).
    let lo = _mm256_blend_epi32::<0b1010_1010>(ll, _mm256_slli_epi64::<32>(mid2));
    let hi = _mm256_add_epi64(_mm256_add_epi64(hh, _mm256_srli_epi64::<32>(mid)), _mm256_srli_epi64::<32>(mid2));
    reduce_s(hi, lo)
}

/// `hi * 2^64 + lo mod p`, canonical (`backend_api::field::reduce128`, lane by lane), worked and
/// returned in shifted form.
#[inline]
#[target_feature(enable = "avx2")]
fn reduce_s(hi: __m256i, lo: __m256i) -> __m256i {
    let eps = splat(EPS);
    // lo - hi_hi (2^96 = -1); a borrow means 2^64 too many, and 2^64 = eps. With hi_hi < 2^32,
    // the borrow is the shifted difference coming out above the shifted `lo`.
    let lo_s = shift(lo);
    let t_s = _mm256_sub_epi64(lo_s, _mm256_srli_epi64::<32>(hi));
    let t_s = _mm256_sub_epi64(t_s, _mm256_srli_epi64::<32>(lt_s(lo_s, t_s)));
    // + hi_lo * (2^32 - 1), at most 2^64 - 2^33 + 1; a carry means 2^64 too few, and is the sum
    // coming out below `t` (both shifted). After a carry the wrapped sum is at most 2^64 - 2^33,
    // so adding eps gives a canonical value; without one, a sum r >= p needs r - p, which is
    // also r + eps mod 2^64. The two cases exclude each other: one fix-up, eps unless the sum
    // neither carried nor reached p.
    let r_s = _mm256_add_epi64(t_s, _mm256_mul_epu32(hi, eps));
    let keep = _mm256_andnot_si256(lt_s(r_s, t_s), lt_s(r_s, splat(P ^ SIGN)));
    _mm256_add_epi64(r_s, _mm256_andnot_si256(keep, eps))
}

/// `x mod p`, lane by lane, for any lanes.
#[inline]
#[target_feature(enable = "avx2")]
fn canonical(x: __m256i) -> __m256i {
    // x >= p: x - p, which is x + eps mod 2^64.
    _mm256_add_epi64(x, _mm256_andnot_si256(lt_s(shift(x), splat(P ^ SIGN)), splat(EPS)))
}

/// The butterfly with `w = 1`: `(a + b, a - b)`, canonical lanes.
#[inline]
#[target_feature(enable = "avx2")]
fn unit(a: __m256i, b: __m256i) -> (__m256i, __m256i) {
    let a_s = shift(a);
    (add(a_s, b), sub(a_s, shift(b)))
}

/// The decimation-in-frequency butterfly `(a + b, (a - b) w)`, canonical lanes.
#[inline]
#[target_feature(enable = "avx2")]
fn dif(a: __m256i, b: __m256i, w_lo: __m256i, w_hi: __m256i) -> (__m256i, __m256i) {
    let a_s = shift(a);
    (add(a_s, b), mul(sub(a_s, shift(b)), w_lo, w_hi))
}

/// The decimation-in-time butterfly `(a + b w, a - b w)`, canonical lanes.
#[inline]
#[target_feature(enable = "avx2")]
fn dit(a: __m256i, b: __m256i, w_lo: __m256i, w_hi: __m256i) -> (__m256i, __m256i) {
    // The product comes out shifted, as the subtraction's compare needs it.
    let (a_s, t_s) = (shift(a), mul_s(b, w_lo, w_hi));
    let t = shift(t_s);
    (add(a_s, t), sub(a_s, t_s))
}

/// Runs `$body` (which maps lanes `$a` of `$lo` and `$b` of `$hi` to their new values) over the
/// rows' whole four-element chunks, and evaluates to the rows' remainders.
macro_rules! chunks4 {
    ($lo:expr, $hi:expr, |$a:ident, $b:ident| $body:expr) => {{
        let mut lc = $lo.chunks_exact_mut(4);
        let mut hc = $hi.chunks_exact_mut(4);
        for (x, y) in (&mut lc).zip(&mut hc) {
            // SAFETY: `x` and `y` are 4 u64, 32 bytes each, of exclusively borrowed slices, and the
            // unaligned load and store need no alignment.
            unsafe {
                let $a = _mm256_loadu_si256(x.as_ptr().cast());
                let $b = _mm256_loadu_si256(y.as_ptr().cast());
                let (p, q) = $body;
                _mm256_storeu_si256(x.as_mut_ptr().cast(), p);
                _mm256_storeu_si256(y.as_mut_ptr().cast(), q);
            }
        }
        (lc.into_remainder(), hc.into_remainder())
    }};
}

/// [`super::butterfly`] with AVX2, for rows of equal length.
#[target_feature(enable = "avx2")]
pub(super) fn butterfly(kind: Butterfly, lo: &mut [u64], hi: &mut [u64], w: u64) {
    let (w_lo, w_hi) = (splat(w), splat(w >> 32));
    let (lt, ht) = match (kind, w == 1) {
        (_, true) => chunks4!(lo, hi, |a, b| unit(a, b)),
        (Butterfly::Dif, false) => chunks4!(lo, hi, |a, b| dif(a, b, w_lo, w_hi)),
        (Butterfly::Dit, false) => chunks4!(lo, hi, |a, b| dit(a, b, w_lo, w_hi)),
    };
    butterfly_scalar::<Canonical<false>>(kind, lt, ht, w);
}

/// Runs `$body` (which maps lanes `$a` of `$src_lo` and `$b` of `$src_hi` to the lanes of
/// `$dst_lo` and `$dst_hi`) over the rows' whole four-element chunks, each input lane reduced mod
/// p first with `$canon`, and evaluates to the rows' remainders.
macro_rules! chunks4_to {
    ($src_lo:expr, $src_hi:expr, $dst_lo:expr, $dst_hi:expr, $canon:expr, |$a:ident, $b:ident| $body:expr) => {{
        let (mut sl, mut sh) = ($src_lo.chunks_exact(4), $src_hi.chunks_exact(4));
        let (mut dl, mut dh) = ($dst_lo.chunks_exact_mut(4), $dst_hi.chunks_exact_mut(4));
        for (((s, t), x), y) in (&mut sl).zip(&mut sh).zip(&mut dl).zip(&mut dh) {
            // SAFETY: `s`, `t`, `x` and `y` are 4 u64, 32 bytes each (`x` and `y` exclusively
            // borrowed), and the unaligned loads and stores need no alignment.
            unsafe {
                let $a = _mm256_loadu_si256(s.as_ptr().cast());
                let $b = _mm256_loadu_si256(t.as_ptr().cast());
                let ($a, $b) = if $canon { (canonical($a), canonical($b)) } else { ($a, $b) };
                let (p, q) = $body;
                _mm256_storeu_si256(x.as_mut_ptr().cast(), p);
                _mm256_storeu_si256(y.as_mut_ptr().cast(), q);
            }
        }
        (sl.remainder(), sh.remainder(), dl.into_remainder(), dh.into_remainder())
    }};
}

/// [`super::butterfly_to`] with AVX2, for rows of equal length.
#[target_feature(enable = "avx2")]
pub(super) fn butterfly_to<const CANON: bool>(
    kind: Butterfly,
    src_lo: &[u64],
    src_hi: &[u64],
    dst_lo: &mut [u64],
    dst_hi: &mut [u64],
    w: u64,
) {
    let (w_lo, w_hi) = (splat(w), splat(w >> 32));
    let (a, b, x, y) = match (kind, w == 1) {
        (_, true) => chunks4_to!(src_lo, src_hi, dst_lo, dst_hi, CANON, |a, b| unit(a, b)),
        (Butterfly::Dif, false) => chunks4_to!(src_lo, src_hi, dst_lo, dst_hi, CANON, |a, b| dif(a, b, w_lo, w_hi)),
        (Butterfly::Dit, false) => chunks4_to!(src_lo, src_hi, dst_lo, dst_hi, CANON, |a, b| dit(a, b, w_lo, w_hi)),
    };
    butterfly_scalar_to::<Canonical<CANON>>(kind, a, b, x, y, w);
}

/// [`super::scale`] with AVX2: `dst[i] = src[i] * c`.
#[target_feature(enable = "avx2")]
pub(super) fn scale(dst: &mut [u64], src: &[u64], c: u64) {
    let (c_lo, c_hi) = (splat(c), splat(c >> 32));
    let mut dc = dst.chunks_exact_mut(4);
    let mut sc = src.chunks_exact(4);
    for (d, s) in (&mut dc).zip(&mut sc) {
        // SAFETY: `d` and `s` are 4 u64, 32 bytes each (`d` exclusively borrowed); the unaligned
        // load and store need no alignment.
        unsafe {
            let x = _mm256_loadu_si256(s.as_ptr().cast());
            _mm256_storeu_si256(d.as_mut_ptr().cast(), mul(x, c_lo, c_hi));
        }
    }
    for (d, &s) in dc.into_remainder().iter_mut().zip(sc.remainder()) {
        *d = backend_api::field::mul(s, c);
    }
}
