//! The coset LDE: a radix-2 NTT on the row-major layout, in place in the output buffer.
//!
//! For an `n x m` trace, blowup `B` and shift `s` (CONVENTIONS.md, "Coset low-degree
//! extension"), with the shared [`LdeTwiddles`] tables:
//!
//! 1. The output buffer (`N x m`, `N = n * B`) is allocated with the canonicalised trace in its
//!    first `n` rows.
//! 2. **Inverse NTT** of size `n` on those rows: decimation in frequency (Gentleman-Sande) with
//!    `w_n^-1`, natural order in, bit-reversed order out.
//! 3. **Coset scaling and zero extension, fused.** Position `q` holds coefficient
//!    `k = br_n(q)` times `n`; it is multiplied by `s^k / n` (`coset[k]`). In a size-`N`
//!    bit-reversed array that coefficient belongs at `br_N(k) = q * B`, with zeros at the other
//!    `B - 1` positions of its group; the first `log2 B` stages of the forward transform only copy
//!    such a group's first value over the zeros, so instead of zero-extending and running those
//!    stages the scaled row is written `B` times, to rows `[qB, qB + B)`. That runs in place in
//!    waves, sources `[a, 2a)` for `a = n/2, n/4, ..., 1` then row 0: a wave's targets
//!    `[aB, 2aB)` lie above every row still to be read.
//! 4. **Forward NTT** of size `N` from stage `log2 B` on: decimation in time (Cooley-Tukey),
//!    bit-reversed in, natural order out.
//!
//! A butterfly combines two whole rows: the `m` columns of a row are contiguous, so the inner
//! loops run over contiguous memory. Stages whose butterfly span fits in a cache-sized block
//! ([`LOCAL_BYTES`]) run block by block, one rayon task per block, so those `log2` stages cost
//! one pass over memory; the wider stages run one pass each, parallel over blocks and over rows
//! within a block. All arithmetic keeps values canonical, so the output is canonical.

use backend_api::field::{LdeTwiddles, P, bit_reverse, canonical, mul};
use backend_api::{LdeParams, Result};
use rayon::prelude::*;

use crate::memory::{Allocator, CpuBuffer};

/// Bytes of rows that one task transforms through all the stages that fit (half of Zen's L2).
const LOCAL_BYTES: usize = 256 << 10;
/// Elements per task, at least, when a stage is split over rows.
const MIN_TASK_ELEMS: usize = 1 << 14;

/// `a + b mod p` for canonical `a`, `b`; canonical result.
#[inline(always)]
fn add(a: u64, b: u64) -> u64 {
    let (s, over) = a.overflowing_add(b);
    let (t, under) = s.overflowing_sub(P);
    // With overflow the true sum is s + 2^64 >= p, and s + 2^64 - p wraps to `t`.
    if over || !under { t } else { s }
}

/// `a - b mod p` for canonical `a`, `b`; canonical result.
#[inline(always)]
fn sub(a: u64, b: u64) -> u64 {
    let (d, under) = a.overflowing_sub(b);
    if under { d.wrapping_add(P) } else { d }
}

/// [`crate::CpuBackend::coset_lde`] over a host slice.
///
/// # Errors
/// [`backend_api::Error::LengthMismatch`] when `trace` does not hold `params.trace`, out of
/// memory for the output or the twiddle tables.
pub(crate) fn coset_lde(alloc: &Allocator, trace: &[u64], params: &LdeParams) -> Result<CpuBuffer> {
    let shape = params.trace();
    shape.check_len("coset_lde trace", trace.len())?;
    let (n, m, blowup) = (shape.rows(), shape.cols(), params.blowup());
    let big_n = n * blowup;
    let (log_n, log_b) = (params.log_trace_rows(), params.log_blowup());

    // The output first: it is the largest allocation and the fallible one to try first.
    let fill = trace.par_iter().map(|&x| canonical(x)).chain(rayon::iter::repeat_n(0, (big_n - n) * m));
    let mut out = alloc.buffer_from(fill)?;
    // The tables are host memory the model counts, so they are accounted while they live.
    let _tables = alloc.reserve_host(LdeTwiddles::bytes_for(log_n, log_b))?;
    let tw = LdeTwiddles::new(log_n, log_b, params.shift());
    let data = out.as_mut_slice();
    let local_rows = local_rows(m);

    // 2. Inverse NTT of size n: spans n/2 .. 1.
    let spans: Vec<usize> = (0..log_n).rev().map(|k| 1usize << k).collect();
    let (global, local): (Vec<usize>, Vec<usize>) = spans.iter().partition(|&&h| 2 * h > local_rows);
    let head = &mut data[..n * m];
    for &h in &global {
        stage(head, m, h, &tw.inv_twiddles, n / (2 * h), Butterfly::Dif);
    }
    local_stages(head, m, local_rows.min(n), &local, &tw.inv_twiddles, n, Butterfly::Dif);

    // 3. Coset scaling and spreading to groups of B rows.
    spread_scaled(data, n, m, blowup, &tw.coset);

    // 4. Forward NTT of size N: spans B .. N/2.
    let spans: Vec<usize> = (log_b..log_n + log_b).map(|k| 1usize << k).collect();
    let (local, global): (Vec<usize>, Vec<usize>) = spans.iter().partition(|&&h| 2 * h <= local_rows);
    local_stages(data, m, local_rows.min(big_n), &local, &tw.twiddles, big_n, Butterfly::Dit);
    for &h in &global {
        stage(data, m, h, &tw.twiddles, big_n / (2 * h), Butterfly::Dit);
    }
    Ok(out)
}

/// Rows per cache block: a power of two >= 2 whose rows take at most [`LOCAL_BYTES`].
fn local_rows(m: usize) -> usize {
    let rows = (LOCAL_BYTES / (m * 8)).max(2);
    1 << rows.ilog2()
}

#[derive(Clone, Copy)]
enum Butterfly {
    /// `(a, b) -> (a + b, (a - b) w)`.
    Dif,
    /// `(a, b) -> (a + b w, a - b w)`.
    Dit,
}

/// One butterfly over two rows.
#[inline(always)]
fn butterfly(kind: Butterfly, lo: &mut [u64], hi: &mut [u64], w: u64) {
    match (kind, w == 1) {
        (Butterfly::Dif, true) | (Butterfly::Dit, true) => {
            for (a, b) in lo.iter_mut().zip(hi) {
                let (x, y) = (*a, *b);
                *a = add(x, y);
                *b = sub(x, y);
            }
        }
        (Butterfly::Dif, false) => {
            for (a, b) in lo.iter_mut().zip(hi) {
                let (x, y) = (*a, *b);
                *a = add(x, y);
                *b = mul(sub(x, y), w);
            }
        }
        (Butterfly::Dit, false) => {
            for (a, b) in lo.iter_mut().zip(hi) {
                let (x, t) = (*a, mul(*b, w));
                *a = add(x, t);
                *b = sub(x, t);
            }
        }
    }
}

/// One stage of span `h` (rows) over `data`, in parallel: blocks of `2h` rows, and rows within
/// a block. Butterfly `i` of a block uses `table[i * stride]`.
fn stage(data: &mut [u64], m: usize, h: usize, table: &[u64], stride: usize, kind: Butterfly) {
    let min_rows = (MIN_TASK_ELEMS / m).max(1);
    data.par_chunks_mut(2 * h * m).for_each(|block| {
        let (lo, hi) = block.split_at_mut(h * m);
        lo.par_chunks_mut(m).zip(hi.par_chunks_mut(m)).enumerate().with_min_len(min_rows).for_each(|(i, (a, b))| {
            butterfly(kind, a, b, table[i * stride]);
        });
    });
}

/// The stages of `spans`, in the order given, block by block: blocks of `block_rows` rows
/// (a multiple of every `2h`), one rayon task each. `size` is the transform size the table is
/// for, so span `h` reads it with stride `size / 2h`.
fn local_stages(
    data: &mut [u64],
    m: usize,
    block_rows: usize,
    spans: &[usize],
    table: &[u64],
    size: usize,
    kind: Butterfly,
) {
    if spans.is_empty() {
        return;
    }
    data.par_chunks_mut(block_rows * m).for_each(|block| {
        for &h in spans {
            let stride = size / (2 * h);
            for pair in block.chunks_mut(2 * h * m) {
                let (lo, hi) = pair.split_at_mut(h * m);
                for (i, (a, b)) in lo.chunks_exact_mut(m).zip(hi.chunks_exact_mut(m)).enumerate() {
                    butterfly(kind, a, b, table[i * stride]);
                }
            }
        }
    });
}

/// Multiplies bit-reversed position `q` of the first `n` rows by `coset[br_n(q)]` and writes it
/// to rows `[qB, qB + B)` (see the module doc, step 3).
fn spread_scaled(data: &mut [u64], n: usize, m: usize, blowup: usize, coset: &[u64]) {
    let bits = n.trailing_zeros();
    let scale = |dst: &mut [u64], src: &[u64], q: usize| {
        let c = coset[bit_reverse(q, bits)];
        for (o, &x) in dst.iter_mut().zip(src) {
            *o = mul(x, c);
        }
    };
    if blowup == 1 {
        let min_rows = (MIN_TASK_ELEMS / m).max(1);
        data.par_chunks_mut(m).enumerate().with_min_len(min_rows).for_each(|(q, row)| {
            let c = coset[bit_reverse(q, bits)];
            row.iter_mut().for_each(|x| *x = mul(*x, c));
        });
        return;
    }
    let group = blowup * m;
    let fill = |dst: &mut [u64], src: &[u64], q: usize| {
        let (first, rest) = dst.split_at_mut(m);
        scale(first, src, q);
        rest.chunks_exact_mut(m).for_each(|r| r.copy_from_slice(first));
    };
    let mut a = n / 2;
    while a >= 1 {
        let (lo, hi) = data.split_at_mut(a * group);
        let src = &lo[a * m..2 * a * m];
        hi[..a * group]
            .par_chunks_mut(group)
            .zip(src.par_chunks(m))
            .enumerate()
            .for_each(|(k, (d, s))| fill(d, s, a + k));
        a /= 2;
    }
    let (row0, rest) = data[..group].split_at_mut(m);
    let src: Vec<u64> = row0.to_vec();
    scale(row0, &src, 0);
    rest.chunks_exact_mut(m).for_each(|r| r.copy_from_slice(row0));
}

#[cfg(test)]
mod tests {
    use super::*;
    use backend_api::{AllocTracker, MatrixShape};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use std::sync::Arc;

    // The naive reference is written out here rather than taken from `conformance::reference`:
    // conformance depends on this crate, so a dev-dependency on it would be a dependency cycle
    // (these unit tests would link a second, non-test build of backend-cpu).
    const PR: u128 = P as u128;

    fn mulr(a: u64, b: u64) -> u64 {
        ((a as u128 % PR) * (b as u128 % PR) % PR) as u64
    }

    fn powr(mut b: u64, mut e: u64) -> u64 {
        let mut acc = 1;
        while e > 0 {
            if e & 1 == 1 {
                acc = mulr(acc, b);
            }
            b = mulr(b, b);
            e >>= 1;
        }
        acc
    }

    /// The naive reference, u128 % p throughout, roots derived from the generator 7 here:
    /// interpolate each column in O(n^2), then evaluate at `s * w_N^i` by Horner in O(n N).
    fn naive_lde(trace: &[u64], n: usize, m: usize, blowup: usize, shift: u64) -> Vec<u64> {
        let big_n = n * blowup;
        let w_n = powr(7, (P - 1) / n as u64);
        let w_big = powr(7, (P - 1) / big_n as u64);
        let n_inv = powr(n as u64, P - 2);
        let mut out = vec![0u64; big_n * m];
        for c in 0..m {
            // c_k = (1/n) sum_j T[j] w_n^(-jk)
            let coeffs: Vec<u64> = (0..n)
                .map(|k| {
                    let mut acc = 0u128;
                    for j in 0..n {
                        let w = powr(w_n, ((n - (j * k) % n) % n) as u64);
                        acc = (acc + mulr(trace[j * m + c], w) as u128) % PR;
                    }
                    mulr(acc as u64, n_inv)
                })
                .collect();
            for i in 0..big_n {
                let x = mulr(shift, powr(w_big, i as u64));
                let mut acc = 0u64;
                for &ck in coeffs.iter().rev() {
                    acc = ((mulr(acc, x) as u128 + ck as u128) % PR) as u64;
                }
                out[i * m + c] = acc;
            }
        }
        out
    }

    fn allocator() -> Allocator {
        Allocator { tracker: Arc::new(AllocTracker::new()), limit: None }
    }

    #[test]
    fn the_documented_root_is_7_to_the_p_minus_1_over_2_32() {
        assert_eq!(powr(7, (P - 1) >> 32), 1_753_635_133_440_165_772);
    }

    #[test]
    fn field_ops_match_u128_on_canonical_values() {
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let edge = [0, 1, 2, P - 1, P - 2, 0xFFFF_FFFF, 1 << 32, 1 << 63];
        let vals: Vec<u64> = edge.into_iter().chain((0..300).map(|_| rng.random_range(0..P))).collect();
        for &a in &vals {
            for &b in &vals {
                assert_eq!(add(a, b) as u128, (a as u128 + b as u128) % PR);
                assert_eq!(sub(a, b) as u128, (a as u128 + PR - b as u128) % PR);
            }
        }
    }

    #[test]
    fn matches_the_naive_lde() {
        // n in 1..32, blowups 1..16, shifts 7, 1 and a non-canonical one (p + 7 means 7), three
        // columns (one all non-canonical values) so a row is more than one element.
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for log_n in 0..=5 {
            for log_b in 0..=4 {
                for shift in [7, 1, P + 7, 0xDEAD_BEEF_1234_5678] {
                    let (n, m, blowup) = (1usize << log_n, 3usize, 1usize << log_b);
                    let trace: Vec<u64> = (0..n * m)
                        .map(|i| if i % m == 2 { rng.random_range(P..=u64::MAX) } else { rng.random() })
                        .collect();
                    let params = LdeParams::new(MatrixShape::new(n, m).unwrap(), blowup, shift).unwrap();
                    let got = coset_lde(&allocator(), &trace, &params).unwrap();
                    let expect = naive_lde(&trace, n, m, blowup, shift);
                    assert_eq!(got.as_slice(), expect.as_slice(), "n={n} B={blowup} s={shift}");
                }
            }
        }
    }

    #[test]
    fn wide_and_cache_blocked_shapes_match_the_naive_lde() {
        // Shapes where the stages split between cache blocks and global passes:
        // 2^8 rows x 200 cols (1600 B rows: 128-row blocks), and 2^6 x 5000 (2-row blocks).
        let mut rng = ChaCha8Rng::seed_from_u64(6);
        for (n, m, blowup) in [(256usize, 200usize, 2usize), (64, 5000, 4), (512, 1, 2)] {
            let trace: Vec<u64> = (0..n * m).map(|_| rng.random()).collect();
            let params = LdeParams::new(MatrixShape::new(n, m).unwrap(), blowup, 7).unwrap();
            let got = coset_lde(&allocator(), &trace, &params).unwrap();
            // The naive reference on a column sample keeps this test fast.
            for c in [0, m / 2, m - 1] {
                let col: Vec<u64> = (0..n).map(|r| trace[r * m + c]).collect();
                let expect = naive_lde(&col, n, 1, blowup, 7);
                let got_col: Vec<u64> = (0..n * blowup).map(|r| got.as_slice()[r * m + c]).collect();
                assert_eq!(got_col, expect, "{n} x {m} B={blowup} column {c}");
            }
        }
    }

    #[test]
    fn blowup_1_shift_1_is_the_canonical_identity() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for (n, m) in [(1, 1), (8, 3), (1024, 7)] {
            let trace: Vec<u64> = (0..n * m).map(|_| rng.random()).collect();
            let params = LdeParams::new(MatrixShape::new(n, m).unwrap(), 1, 1).unwrap();
            let got = coset_lde(&allocator(), &trace, &params).unwrap();
            let expect: Vec<u64> = trace.iter().map(|&x| canonical(x)).collect();
            assert_eq!(got.as_slice(), expect.as_slice());
        }
    }

    #[test]
    fn bad_calls_are_errors_and_release_everything() {
        let a = allocator();
        let params = LdeParams::new(MatrixShape::new(4, 2).unwrap(), 2, 7).unwrap();
        let err = coset_lde(&a, &[0; 7], &params).unwrap_err();
        assert!(matches!(err, backend_api::Error::LengthMismatch { expected: 8, actual: 7, .. }), "{err}");
        // Fail each of the two allocations (output, tables) in turn.
        for k in 0..2 {
            let base = a.tracker.counters().allocations;
            a.tracker.fail_at(base + k);
            let err = coset_lde(&a, &[1; 8], &params).unwrap_err();
            assert!(err.is_out_of_memory(), "{err}");
            assert_eq!(a.tracker.counters().live, 0);
        }
        let out = coset_lde(&a, &[1; 8], &params).unwrap();
        assert_eq!(a.tracker.counters().live, 16 * 8, "only the output stays live");
        drop(out);
    }
}
