//! Host-side Goldilocks arithmetic and the twiddle tables every backend shares.
//!
//! This is deliberately plain scalar code: it is what backends upload (twiddles, coset powers)
//! and what tests read. Backends run their own vectorised or device arithmetic.

/// The Goldilocks prime `p = 2^64 - 2^32 + 1`.
pub const P: u64 = 0xFFFF_FFFF_0000_0001;
/// The multiplicative generator, 7.
pub const GENERATOR: u64 = 7;
/// The primitive `2^32`-th root of unity, `7^((p-1)/2^32)`.
pub const TWO_ADIC_ROOT: u64 = 1_753_635_133_440_165_772;
/// The field's two-adicity.
pub const TWO_ADICITY: u32 = 32;
/// The default coset shift.
pub const DEFAULT_SHIFT: u64 = GENERATOR;

/// `x mod p` for any `u64`.
#[inline]
pub const fn canonical(x: u64) -> u64 {
    if x >= P { x - P } else { x }
}

/// `a + b mod p` (inputs may be non-canonical; the output is canonical).
#[inline]
pub const fn add(a: u64, b: u64) -> u64 {
    let (a, b) = (canonical(a), canonical(b));
    let (s, over) = a.overflowing_add(b);
    // a, b < p so s < 2p; with overflow the true sum is s + 2^64 and 2^64 = 2^32 - 1 mod p.
    let s = if over { s.wrapping_add(0xFFFF_FFFF) } else { s };
    canonical(s)
}

/// `a - b mod p` (inputs may be non-canonical; the output is canonical).
#[inline]
pub const fn sub(a: u64, b: u64) -> u64 {
    let (a, b) = (canonical(a), canonical(b));
    if a >= b { a - b } else { a + (P - b) }
}

/// `a * b mod p` (inputs may be non-canonical; the output is canonical).
#[inline]
pub const fn mul(a: u64, b: u64) -> u64 {
    reduce128((a as u128) * (b as u128))
}

/// Reduces a 128-bit value mod p, using `2^64 = 2^32 - 1` and `2^96 = -1 (mod p)`.
#[inline]
pub const fn reduce128(x: u128) -> u64 {
    let lo = x as u64;
    let hi = (x >> 64) as u64;
    let hi_hi = hi >> 32;
    let hi_lo = hi & 0xFFFF_FFFF;
    // lo - hi_hi (2^96 = -1), then + hi_lo * (2^32 - 1).
    let (t, borrow) = lo.overflowing_sub(hi_hi);
    let t = if borrow { t.wrapping_sub(0xFFFF_FFFF) } else { t };
    let (r, over) = t.overflowing_add(hi_lo * 0xFFFF_FFFF);
    let r = if over { r.wrapping_add(0xFFFF_FFFF) } else { r };
    canonical(r)
}

/// `base^exp mod p`.
pub const fn pow(base: u64, mut exp: u64) -> u64 {
    let mut acc = 1u64;
    let mut b = canonical(base);
    while exp > 0 {
        if exp & 1 == 1 {
            acc = mul(acc, b);
        }
        b = mul(b, b);
        exp >>= 1;
    }
    acc
}

/// The multiplicative inverse, `x^(p-2)`. Returns 0 for 0.
pub const fn inverse(x: u64) -> u64 {
    pow(x, P - 2)
}

/// The primitive `2^log_n`-th root of unity `w_N = g32^(2^(32 - log_n))`.
///
/// # Panics
/// If `log_n > 32` (callers validate shapes through [`crate::LdeParams`] first).
pub const fn root_of_unity(log_n: u32) -> u64 {
    assert!(log_n <= TWO_ADICITY, "the Goldilocks two-adicity is 32");
    let mut w = TWO_ADIC_ROOT;
    let mut i = log_n;
    while i < TWO_ADICITY {
        w = mul(w, w);
        i += 1;
    }
    w
}

/// `[1, x, x^2, ..., x^(len-1)]`.
///
/// Long tables are filled on every core: each chunk starts from `x^start` ([`pow`]) and
/// multiplies on, so the values are exactly those of one running product.
pub fn powers(x: u64, len: usize) -> Vec<u64> {
    /// Elements per thread-chunk; shorter tables are made on the calling thread.
    const CHUNK: usize = 1 << 16;
    let mut out = vec![0u64; len];
    let fill = |start: usize, chunk: &mut [u64]| {
        let mut acc = pow(x, start as u64);
        for v in chunk {
            *v = acc;
            acc = mul(acc, x);
        }
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(len.div_ceil(CHUNK));
    if threads <= 1 {
        fill(0, &mut out);
        return out;
    }
    let per = len.div_ceil(threads);
    std::thread::scope(|s| {
        for (i, chunk) in out.chunks_mut(per).enumerate() {
            s.spawn(move || fill(i * per, chunk));
        }
    });
    out
}

/// Reverses the low `bits` bits of `i`.
#[inline]
pub const fn bit_reverse(i: usize, bits: u32) -> usize {
    if bits == 0 { 0 } else { i.reverse_bits() >> (usize::BITS - bits) }
}

/// The host tables a coset LDE `n -> N = n * B` needs, shared by every backend so that they all
/// evaluate the same arithmetic.
///
/// - `inv_twiddles[k] = w_n^(-k)` for `k < n/2`: the inverse NTT of size `n`;
/// - `twiddles[k] = w_N^k` for `k < N/2`: the forward NTT of size `N` (its prefixes, strided,
///   serve every smaller stage);
/// - `coset[j] = s^j / n` for `j < n`: coset scaling with the inverse NTT's `1/n` folded in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LdeTwiddles {
    /// `w_n^(-k)`, `k < n/2`.
    pub inv_twiddles: Vec<u64>,
    /// `w_N^k`, `k < N/2`.
    pub twiddles: Vec<u64>,
    /// `s^j / n`, `j < n`.
    pub coset: Vec<u64>,
}

impl LdeTwiddles {
    /// Builds the tables for `n = 2^log_n` trace rows, blowup `2^log_blowup` and shift `shift`.
    pub fn new(log_n: u32, log_blowup: u32, shift: u64) -> Self {
        let n = 1usize << log_n;
        let big_n = n << log_blowup;
        let inv_twiddles = powers(inverse(root_of_unity(log_n)), n / 2);
        let twiddles = powers(root_of_unity(log_n + log_blowup), big_n / 2);
        // s^j / n = (s^j) * n^-1: the powers of s, each scaled (on every core for long tables).
        let n_inv = inverse(canonical(n as u64));
        let mut coset = powers(shift, n);
        let per = n.div_ceil(std::thread::available_parallelism().map_or(1, |t| t.get())).max(1 << 16);
        std::thread::scope(|s| {
            for chunk in coset.chunks_mut(per) {
                s.spawn(move || chunk.iter_mut().for_each(|c| *c = mul(*c, n_inv)));
            }
        });
        Self { inv_twiddles, twiddles, coset }
    }

    /// The tables for `(log_n, log_blowup, shift)`, built once per process and kept for the four
    /// most recently used keys, so that repeated LDEs of one shape (a prover's commits, a
    /// benchmark) do not rebuild millions of powers on the host each time.
    pub fn shared(log_n: u32, log_blowup: u32, shift: u64) -> std::sync::Arc<Self> {
        use std::sync::{Arc, Mutex};
        type Entry = ((u32, u32, u64), Arc<LdeTwiddles>);
        static CACHE: Mutex<Vec<Entry>> = Mutex::new(Vec::new());
        const KEEP: usize = 4;
        let key = (log_n, log_blowup, shift);
        let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = cache.iter().position(|e| e.0 == key) {
            let e = cache.remove(i);
            let t = Arc::clone(&e.1);
            cache.push(e);
            return t;
        }
        let t = Arc::new(Self::new(log_n, log_blowup, shift));
        if cache.len() >= KEEP {
            cache.remove(0);
        }
        cache.push((key, Arc::clone(&t)));
        t
    }

    /// The lengths of `inv_twiddles`, `twiddles` and `coset` (`n/2`, `N/2`, `n`), without building
    /// them: where each starts when a backend uploads the three into one buffer in that order.
    pub fn lens(log_n: u32, log_blowup: u32) -> [usize; 3] {
        let n = 1usize << log_n;
        [n / 2, (n << log_blowup) / 2, n]
    }

    /// Bytes these tables take on a device, without building them.
    pub fn bytes_for(log_n: u32, log_blowup: u32) -> usize {
        Self::lens(log_n, log_blowup).iter().sum::<usize>() * crate::shape::ELEM_BYTES
    }
}

/// The order in which an in-place LDE runs the units of its last inverse pass, one range per
/// launch: of `units` units (tiles, workgroup groups) of `2^k` consecutive rows each,
/// `[max(1, t / B), t)` for `t = units, ...` while `t > 1`, then `[0, 1)`, for the blowup
/// `B = 2^log_blowup`.
///
/// That pass reads the rows `[0, n)` and stores position `p` to row `pB` (an LDE of `n` rows in
/// the first rows of its own `nB`-row buffer). A range `[lo, hi)` loads rows `[lo 2^k, hi 2^k)`
/// and stores rows `[lo 2^k B, hi 2^k B)`; since `lo B >= hi`, those lie at or above every row
/// the range or a later one loads, and an earlier range (or none: rows `>= n`, unread) has
/// loaded them already. The last range is one unit, which must load all its rows before it
/// stores any.
pub fn lde_finish_ranges(units: u64, log_blowup: u32) -> Vec<std::ops::Range<u64>> {
    let mut ranges = Vec::new();
    let mut hi = units;
    while hi > 1 {
        let lo = (hi >> log_blowup).max(1);
        ranges.push(lo..hi);
        hi = lo;
    }
    ranges.push(0..1);
    ranges
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_reverse_reverses_the_low_bits_only() {
        // Against reversal bit by bit.
        for bits in [0u32, 1, 2, 5, 13] {
            for i in 0..(1usize << bits) {
                let want = (0..bits).fold(0, |acc, b| acc | (((i >> b) & 1) << (bits - 1 - b)));
                assert_eq!(bit_reverse(i, bits), want, "{i} over {bits} bits");
            }
        }
        assert_eq!(bit_reverse(1, usize::BITS), 1 << (usize::BITS - 1));
        assert_eq!(bit_reverse(0b110, 2), 0b01, "bits above `bits` are dropped");
    }

    fn mul_ref(a: u64, b: u64) -> u64 {
        ((a as u128 * b as u128) % P as u128) as u64
    }

    /// The chunked, multi-threaded `powers` against a running product in u128 arithmetic, for
    /// lengths around the chunk size and bases that are non-canonical, 0, 1 and p - 1.
    #[test]
    fn powers_match_a_running_product() {
        for x in [0, 1, 2, P - 1, P, P + 3, u64::MAX, 0x1234_5678_9abc_def1] {
            for len in [0, 1, 2, (1 << 16) - 1, 1 << 16, (1 << 16) + 1, 3 * (1 << 16) + 5] {
                let got = powers(x, len);
                assert_eq!(got.len(), len);
                let mut acc = 1u64;
                for (i, &g) in got.iter().enumerate() {
                    assert_eq!(g, acc, "x = {x:#x}, len {len}, index {i}");
                    acc = mul_ref(acc, x % P);
                }
            }
        }
    }

    #[test]
    fn arithmetic_matches_u128_reference_including_non_canonical() {
        let edge = [0, 1, 2, P - 1, P, P + 1, u64::MAX, u64::MAX - 1, 0xFFFF_FFFF, 1 << 32, 1 << 63];
        let mut s = 0x1234_5678_9abc_def0_u64;
        let mut vals: Vec<u64> = edge.to_vec();
        for _ in 0..2000 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            vals.push(s);
        }
        for &a in &vals {
            for &b in vals.iter().take(64) {
                assert_eq!(mul(a, b), mul_ref(a, b), "mul {a} {b}");
                let (ca, cb) = (a as u128 % P as u128, b as u128 % P as u128);
                assert_eq!(add(a, b) as u128, (ca + cb) % P as u128, "add {a} {b}");
                assert_eq!(sub(a, b) as u128, (ca + P as u128 - cb) % P as u128, "sub {a} {b}");
            }
        }
    }

    #[test]
    fn roots_of_unity_have_the_documented_order() {
        assert_eq!(pow(GENERATOR, (P - 1) >> 32), TWO_ADIC_ROOT);
        for log_n in 0..=32 {
            let w = root_of_unity(log_n);
            assert_eq!(pow(w, 1u64 << log_n), 1, "w^N = 1 at 2^{log_n}");
            if log_n > 0 {
                assert_eq!(pow(w, 1u64 << (log_n - 1)), P - 1, "w^(N/2) = -1 at 2^{log_n}");
            }
        }
        assert_eq!(mul(inverse(12345), 12345), 1);
    }

    #[test]
    fn shared_tables_equal_fresh_ones_and_are_reused() {
        let a = LdeTwiddles::shared(6, 1, 7);
        assert_eq!(*a, LdeTwiddles::new(6, 1, 7));
        assert!(std::sync::Arc::ptr_eq(&a, &LdeTwiddles::shared(6, 1, 7)), "a second call reuses the tables");
        // A different shift is a different key.
        assert_eq!(*LdeTwiddles::shared(6, 1, 3), LdeTwiddles::new(6, 1, 3));
        assert_ne!(*LdeTwiddles::shared(6, 1, 3), *a);
    }

    #[test]
    fn twiddle_sizes_match_the_model() {
        let t = LdeTwiddles::new(5, 2, DEFAULT_SHIFT);
        let bytes = (t.inv_twiddles.len() + t.twiddles.len() + t.coset.len()) * 8;
        assert_eq!(bytes, LdeTwiddles::bytes_for(5, 2));
        assert_eq!(mul(t.coset[1], 32), DEFAULT_SHIFT);
    }

    /// The ranges from the top down, each at least a `1/B` of the units above it, every unit once;
    /// the production shape's (2^11 tiles of 2^10 rows, B = 2) in 12 launches. The table lengths
    /// add up to `bytes_for`.
    #[test]
    fn lde_finish_ranges_cover_every_unit_from_the_top_down() {
        assert_eq!(lde_finish_ranges(1, 1), vec![0..1]);
        assert_eq!(lde_finish_ranges(8, 1), vec![4..8, 2..4, 1..2, 0..1]);
        assert_eq!(lde_finish_ranges(8, 3), vec![1..8, 0..1]);
        assert_eq!(lde_finish_ranges(32, 2), vec![8..32, 2..8, 1..2, 0..1]);
        assert_eq!(lde_finish_ranges(1 << 11, 1).len(), 12);
        for units in (0..=12).map(|e| 1u64 << e) {
            for log_b in 1..=3 {
                let r = lde_finish_ranges(units, log_b);
                assert_eq!(r.first().unwrap().end, units);
                assert_eq!(r.last().unwrap(), &(0..1));
                for w in r.windows(2) {
                    assert_eq!(w[0].start, w[1].end, "{r:?}");
                    assert!(w[0].start << log_b >= w[0].end, "{r:?}: stores hit the range's own loads");
                }
            }
        }
        assert_eq!(LdeTwiddles::lens(3, 2), [4, 16, 8]);
        assert_eq!(LdeTwiddles::lens(0, 1), [0, 1, 1]);
        let t = LdeTwiddles::new(5, 1, 7);
        assert_eq!(LdeTwiddles::lens(5, 1), [t.inv_twiddles.len(), t.twiddles.len(), t.coset.len()]);
    }
}
