//! AVX-512F row kernels: the LDE's butterflies and scaling, eight columns per instruction.
//!
//! Values are canonical in and out, as in the scalar kernels, and every function computes the
//! same canonical values they do. The product of two `u64` is put together from four 32 x 32-bit
//! products (`vpmuludq`), then reduced mod `p` with `2^64 = 2^32 - 1` and `2^96 = -1`, the steps
//! of `backend_api::field::reduce128`. A row whose length is not a multiple of eight finishes on
//! the scalar kernel.

use std::arch::x86_64::{
    __m512i, _mm512_add_epi64, _mm512_and_si512, _mm512_cmplt_epu64_mask, _mm512_loadu_si512, _mm512_mask_add_epi64,
    _mm512_mask_sub_epi64, _mm512_min_epu64, _mm512_mul_epu32, _mm512_or_si512, _mm512_set1_epi64, _mm512_slli_epi64,
    _mm512_srli_epi64, _mm512_storeu_si512, _mm512_sub_epi64,
};

use super::{Butterfly, Canonical, P, butterfly_scalar, butterfly_scalar_to};

/// `2^32 - 1`, which is `2^64 mod p`; also the low-half mask.
const EPS: u64 = 0xFFFF_FFFF;

#[inline]
#[target_feature(enable = "avx512f")]
fn splat(x: u64) -> __m512i {
    _mm512_set1_epi64(x as i64)
}

/// `a + b mod p`, lane by lane, for canonical lanes.
#[inline]
#[target_feature(enable = "avx512f")]
fn add(a: __m512i, b: __m512i) -> __m512i {
    // p - b is in [1, p]: a >= p - b means a + b >= p, and then a - (p - b) is the result.
    let nb = _mm512_sub_epi64(splat(P), b);
    let t = _mm512_sub_epi64(a, nb);
    let under = _mm512_cmplt_epu64_mask(a, nb);
    _mm512_mask_add_epi64(t, under, t, splat(P))
}

/// `a - b mod p`, lane by lane, for canonical lanes.
#[inline]
#[target_feature(enable = "avx512f")]
fn sub(a: __m512i, b: __m512i) -> __m512i {
    let d = _mm512_sub_epi64(a, b);
    let under = _mm512_cmplt_epu64_mask(a, b);
    _mm512_mask_add_epi64(d, under, d, splat(P))
}

/// `x * w mod p` lane by lane, for `w_lo = splat(w)` and `w_hi = splat(w >> 32)`; canonical out.
#[inline]
#[target_feature(enable = "avx512f")]
fn mul(x: __m512i, w_lo: __m512i, w_hi: __m512i) -> __m512i {
    let mask = splat(EPS);
    let x_hi = _mm512_srli_epi64::<32>(x);
    // vpmuludq multiplies the low 32 bits of each lane.
    let ll = _mm512_mul_epu32(x, w_lo);
    let lh = _mm512_mul_epu32(x, w_hi);
    let hl = _mm512_mul_epu32(x_hi, w_lo);
    let hh = _mm512_mul_epu32(x_hi, w_hi);
    // x * w = hh * 2^64 + (lh + hl) * 2^32 + ll; neither sum below can overflow 64 bits.
    let mid = _mm512_add_epi64(lh, _mm512_srli_epi64::<32>(ll));
    let mid2 = _mm512_add_epi64(hl, _mm512_and_si512(mid, mask));
    let lo = _mm512_or_si512(_mm512_slli_epi64::<32>(mid2), _mm512_and_si512(ll, mask));
    let hi = _mm512_add_epi64(_mm512_add_epi64(hh, _mm512_srli_epi64::<32>(mid)), _mm512_srli_epi64::<32>(mid2));
    reduce(hi, lo)
}

/// `hi * 2^64 + lo mod p`, canonical (`backend_api::field::reduce128`, lane by lane).
#[inline]
#[target_feature(enable = "avx512f")]
fn reduce(hi: __m512i, lo: __m512i) -> __m512i {
    let eps = splat(EPS);
    // lo - hi_hi (2^96 = -1); a borrow means 2^64 too many, and 2^64 = eps.
    let hi_hi = _mm512_srli_epi64::<32>(hi);
    let t = _mm512_sub_epi64(lo, hi_hi);
    let t = _mm512_mask_sub_epi64(t, _mm512_cmplt_epu64_mask(lo, hi_hi), t, eps);
    // + hi_lo * (2^32 - 1), which fits 64 bits; a carry means 2^64 too few.
    let u = _mm512_mul_epu32(hi, eps);
    let r = _mm512_add_epi64(t, u);
    let r = _mm512_mask_add_epi64(r, _mm512_cmplt_epu64_mask(r, u), r, eps);
    // r - p wraps above r unless r >= p.
    _mm512_min_epu64(r, _mm512_sub_epi64(r, splat(P)))
}

/// Runs `$body` (which maps lanes `$a` of `$lo` and `$b` of `$hi` to their new values) over the
/// rows' whole eight-element chunks, and evaluates to the rows' remainders.
macro_rules! chunks8 {
    ($lo:expr, $hi:expr, |$a:ident, $b:ident| $body:expr) => {{
        let mut lc = $lo.chunks_exact_mut(8);
        let mut hc = $hi.chunks_exact_mut(8);
        for (x, y) in (&mut lc).zip(&mut hc) {
            // SAFETY: `x` and `y` are 8 u64, 64 bytes each, of exclusively borrowed slices, and the
            // unaligned load and store need no alignment.
            unsafe {
                let $a = _mm512_loadu_si512(x.as_ptr().cast());
                let $b = _mm512_loadu_si512(y.as_ptr().cast());
                let (p, q) = $body;
                _mm512_storeu_si512(x.as_mut_ptr().cast(), p);
                _mm512_storeu_si512(y.as_mut_ptr().cast(), q);
            }
        }
        (lc.into_remainder(), hc.into_remainder())
    }};
}

/// [`super::butterfly`] with AVX-512F, for rows of equal length.
#[target_feature(enable = "avx512f")]
pub(super) fn butterfly(kind: Butterfly, lo: &mut [u64], hi: &mut [u64], w: u64) {
    let (w_lo, w_hi) = (splat(w), splat(w >> 32));
    let (lt, ht) = match (kind, w == 1) {
        (_, true) => chunks8!(lo, hi, |a, b| (add(a, b), sub(a, b))),
        (Butterfly::Dif, false) => chunks8!(lo, hi, |a, b| (add(a, b), mul(sub(a, b), w_lo, w_hi))),
        (Butterfly::Dit, false) => chunks8!(lo, hi, |a, b| {
            let t = mul(b, w_lo, w_hi);
            (add(a, t), sub(a, t))
        }),
    };
    butterfly_scalar::<Canonical<false>>(kind, lt, ht, w);
}

/// Runs `$body` (which maps lanes `$a` of `$src_lo` and `$b` of `$src_hi` to the lanes of
/// `$dst_lo` and `$dst_hi`) over the rows' whole eight-element chunks, each input lane reduced
/// mod p first with `$canon`, and evaluates to the rows' remainders.
macro_rules! chunks8_to {
    ($src_lo:expr, $src_hi:expr, $dst_lo:expr, $dst_hi:expr, $canon:expr, |$a:ident, $b:ident| $body:expr) => {{
        let (mut sl, mut sh) = ($src_lo.chunks_exact(8), $src_hi.chunks_exact(8));
        let (mut dl, mut dh) = ($dst_lo.chunks_exact_mut(8), $dst_hi.chunks_exact_mut(8));
        for (((s, t), x), y) in (&mut sl).zip(&mut sh).zip(&mut dl).zip(&mut dh) {
            // SAFETY: `s`, `t`, `x` and `y` are 8 u64, 64 bytes each (`x` and `y` exclusively
            // borrowed), and the unaligned loads and stores need no alignment.
            unsafe {
                let $a = _mm512_loadu_si512(s.as_ptr().cast());
                let $b = _mm512_loadu_si512(t.as_ptr().cast());
                let ($a, $b) = if $canon { (canonical($a), canonical($b)) } else { ($a, $b) };
                let (p, q) = $body;
                _mm512_storeu_si512(x.as_mut_ptr().cast(), p);
                _mm512_storeu_si512(y.as_mut_ptr().cast(), q);
            }
        }
        (sl.remainder(), sh.remainder(), dl.into_remainder(), dh.into_remainder())
    }};
}

/// `x mod p`, lane by lane, for any lanes: `x - p` wraps above `x` unless `x >= p`.
#[inline]
#[target_feature(enable = "avx512f")]
fn canonical(x: __m512i) -> __m512i {
    _mm512_min_epu64(x, _mm512_sub_epi64(x, splat(P)))
}

/// [`super::butterfly_to`] with AVX-512F, for rows of equal length.
#[target_feature(enable = "avx512f")]
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
        (_, true) => chunks8_to!(src_lo, src_hi, dst_lo, dst_hi, CANON, |a, b| (add(a, b), sub(a, b))),
        (Butterfly::Dif, false) => {
            chunks8_to!(src_lo, src_hi, dst_lo, dst_hi, CANON, |a, b| (add(a, b), mul(sub(a, b), w_lo, w_hi)))
        }
        (Butterfly::Dit, false) => chunks8_to!(src_lo, src_hi, dst_lo, dst_hi, CANON, |a, b| {
            let t = mul(b, w_lo, w_hi);
            (add(a, t), sub(a, t))
        }),
    };
    butterfly_scalar_to::<Canonical<CANON>>(kind, a, b, x, y, w);
}

/// [`super::scale`] with AVX-512F: `dst[i] = src[i] * c`.
#[target_feature(enable = "avx512f")]
pub(super) fn scale(dst: &mut [u64], src: &[u64], c: u64) {
    let (c_lo, c_hi) = (splat(c), splat(c >> 32));
    let mut dc = dst.chunks_exact_mut(8);
    let mut sc = src.chunks_exact(8);
    for (d, s) in (&mut dc).zip(&mut sc) {
        // SAFETY: `d` and `s` are 8 u64, 64 bytes each (`d` exclusively borrowed); the unaligned
        // load and store need no alignment.
        unsafe {
            let x = _mm512_loadu_si512(s.as_ptr().cast());
            _mm512_storeu_si512(d.as_mut_ptr().cast(), mul(x, c_lo, c_hi));
        }
    }
    for (d, &s) in dc.into_remainder().iter_mut().zip(sc.remainder()) {
        *d = backend_api::field::mul(s, c);
    }
}
