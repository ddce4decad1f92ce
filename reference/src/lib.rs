//! Independent naive references: slow, obvious, and sharing no code with any backend. The
//! conformance suite (as `conformance::reference`) and the backends' own unit tests check against
//! them.
//!
//! Nothing here calls `backend_api::field`, the transpose plan or a backend: the field arithmetic
//! is `u128 % p`, the roots of unity are `7^((p-1)/N)` by this crate's own square-and-multiply,
//! the transpose moves one index at a time, leaf preimages are serialised byte by byte and fed to
//! `sha3::Keccak256` / `blake3::hash` or to a naive Poseidon2 ([`poseidon2`]: explicit matrices,
//! `u128 % p`), and the Merkle root is recomputed recursively.
//!
//! Beside the references, the two rules every test and bench of the workspace shares: [`skip`]
//! (a test that cannot run here says `SKIPPED`, or fails under `REQUIRE_*=1`) and
//! [`env`](mod@env) (a bench's numeric settings).

pub mod env;
pub mod poseidon2;
pub mod skip;

use std::ops::Range;

use backend_api::{CopyRange, HashKind, LeafLayout};
use sha3::Digest as _;

/// The Goldilocks prime, restated here so the references do not borrow it from the code under test.
pub const P: u64 = 0xFFFF_FFFF_0000_0001;

/// `x mod p`.
pub fn canon(x: u64) -> u64 {
    x % P
}

/// `a * b mod p` through `u128` division.
pub fn mul(a: u64, b: u64) -> u64 {
    ((a as u128 * b as u128) % P as u128) as u64
}

/// `a + b mod p` through `u128`.
pub fn add(a: u64, b: u64) -> u64 {
    ((a as u128 + b as u128) % P as u128) as u64
}

/// `base^exp mod p`, square-and-multiply.
pub fn pow(base: u64, mut exp: u64) -> u64 {
    let mut acc = 1u64;
    let mut b = canon(base);
    while exp > 0 {
        if exp & 1 == 1 {
            acc = mul(acc, b);
        }
        b = mul(b, b);
        exp >>= 1;
    }
    acc
}

/// `x^(p-2)`, the inverse of a non-zero `x`.
pub fn inv(x: u64) -> u64 {
    assert!(canon(x) != 0, "0 has no inverse");
    pow(x, P - 2)
}

/// A primitive `n`-th root of unity, `7^((p-1)/n)`, for a power of two `n <= 2^32`.
pub fn root_of_unity(n: usize) -> u64 {
    assert!(n.is_power_of_two() && n as u64 <= 1 << 32, "domain size {n}");
    pow(7, (P - 1) / n as u64)
}

/// Row-major `rows x cols` to column-major, one index at a time.
pub fn transpose(data: &[u64], rows: usize, cols: usize) -> Vec<u64> {
    assert_eq!(data.len(), rows * cols);
    let mut out = vec![0u64; data.len()];
    for r in 0..rows {
        for c in 0..cols {
            out[c * rows + r] = data[r * cols + c];
        }
    }
    out
}

/// The coset LDE of a row-major `n x m` trace, `O(n^2 + N n)` per column.
///
/// Each column is interpolated by a naive inverse DFT (`a_k = (1/n) sum_j T[j] w_n^(-jk)`), then
/// the polynomial is evaluated at every `s * w_N^i` by Horner's rule. The result is row-major
/// `N x m`, canonical.
pub fn coset_lde(trace: &[u64], n: usize, m: usize, blowup: usize, shift: u64) -> Vec<u64> {
    assert_eq!(trace.len(), n * m);
    let big_n = n * blowup;
    let w_n_inv = inv(root_of_unity(n));
    let w_big = root_of_unity(big_n);
    let n_inv = inv(n as u64);
    let mut out = vec![0u64; big_n * m];
    // The evaluation points s * w_N^i.
    let points: Vec<u64> = {
        let mut x = canon(shift);
        (0..big_n)
            .map(|_| {
                let p = x;
                x = mul(x, w_big);
                p
            })
            .collect()
    };
    for c in 0..m {
        let column: Vec<u64> = (0..n).map(|j| canon(trace[j * m + c])).collect();
        let coeffs: Vec<u64> = (0..n)
            .map(|k| {
                let step = pow(w_n_inv, k as u64);
                let mut w = 1u64;
                let mut acc = 0u64;
                for &t in &column {
                    acc = add(acc, mul(t, w));
                    w = mul(w, step);
                }
                mul(acc, n_inv)
            })
            .collect();
        for (i, &x) in points.iter().enumerate() {
            let mut acc = 0u64;
            for &a in coeffs.iter().rev() {
                acc = add(mul(acc, x), a);
            }
            out[i * m + c] = acc;
        }
    }
    out
}

/// The digest of a leaf preimage: `sha3::Keccak256` or `blake3::hash` of `bytes`; for Poseidon2,
/// the sponge over `bytes` read as little-endian 8-byte elements (a multiple of 8 bytes).
pub fn hash(kind: HashKind, bytes: &[u8]) -> [u8; 32] {
    match kind {
        HashKind::Keccak256 => sha3::Keccak256::digest(bytes).into(),
        HashKind::Blake3 => *blake3::hash(bytes).as_bytes(),
        HashKind::Poseidon2 => poseidon2::digest_bytes(&poseidon2::sponge(&poseidon2::words(bytes))),
    }
}

/// Reverses the low `bits` bits of `i`, bit by bit.
pub fn bit_reverse(i: usize, bits: u32) -> usize {
    let mut out = 0;
    for b in 0..bits {
        if i >> b & 1 == 1 {
            out |= 1 << (bits - 1 - b);
        }
    }
    out
}

/// The bytes hashed for leaf `leaf` of a row-major matrix with `cols` columns.
///
/// `rows`: each element of `cols_range` in row `leaf`, canonical, little-endian.
/// `lambda-vm-pairs`: rows `br(2 leaf)` then `br(2 leaf + 1)` (bit reversal over `log2(rows)`
/// bits), canonical, big-endian.
pub fn leaf_preimage(matrix: &[u64], cols: usize, layout: LeafLayout, range: Range<usize>, leaf: usize) -> Vec<u8> {
    let rows = matrix.len() / cols;
    let mut bytes = Vec::new();
    let mut push_row = |r: usize, big_endian: bool| {
        for c in range.clone() {
            let x = canon(matrix[r * cols + c]);
            for k in 0..8 {
                let shift = if big_endian { 56 - 8 * k } else { 8 * k };
                bytes.push((x >> shift) as u8);
            }
        }
    };
    match layout {
        LeafLayout::Rows => push_row(leaf, false),
        LeafLayout::LambdaVmPairs => {
            let bits = rows.trailing_zeros();
            push_row(bit_reverse(2 * leaf, bits), true);
            push_row(bit_reverse(2 * leaf + 1, bits), true);
        }
    }
    bytes
}

/// Every leaf digest of a row-major matrix.
pub fn leaf_digests(
    matrix: &[u64],
    cols: usize,
    kind: HashKind,
    layout: LeafLayout,
    range: Range<usize>,
) -> Vec<[u8; 32]> {
    let rows = matrix.len() / cols;
    let leaves = match layout {
        LeafLayout::Rows => rows,
        LeafLayout::LambdaVmPairs => rows / 2,
    };
    (0..leaves).map(|i| hash(kind, &leaf_preimage(matrix, cols, layout, range.clone(), i))).collect()
}

/// `H(left || right)`; for Poseidon2 the compression of the two digests' elements (each
/// 8-byte little-endian word read mod p).
pub fn parent(kind: HashKind, left: &[u8; 32], right: &[u8; 32]) -> [u8; 32] {
    if kind == HashKind::Poseidon2 {
        let elements = |d: &[u8; 32]| -> [u64; 4] { poseidon2::words(d).try_into().expect("4 words") };
        return poseidon2::digest_bytes(&poseidon2::compress(&elements(left), &elements(right)));
    }
    let mut bytes = [0u8; 64];
    bytes[..32].copy_from_slice(left);
    bytes[32..].copy_from_slice(right);
    hash(kind, &bytes)
}

/// The leaves padded to a power of two by repeating the last one.
pub fn padded(leaves: &[[u8; 32]]) -> Vec<[u8; 32]> {
    assert!(!leaves.is_empty());
    let mut l = leaves.to_vec();
    let mut size = 1;
    while size < l.len() {
        size *= 2;
    }
    let last = *l.last().expect("non-empty");
    l.resize(size, last);
    l
}

/// The full `2L - 1` node array: root at 0, children of `p` at `2p+1`, `2p+2`, leaves at `[L-1, 2L-1)`.
pub fn merkle_nodes(leaves: &[[u8; 32]], kind: HashKind) -> Vec<[u8; 32]> {
    let l = padded(leaves);
    let big_l = l.len();
    let mut nodes = vec![[0u8; 32]; 2 * big_l - 1];
    nodes[big_l - 1..].copy_from_slice(&l);
    for p in (0..big_l - 1).rev() {
        nodes[p] = parent(kind, &nodes[2 * p + 1], &nodes[2 * p + 2]);
    }
    nodes
}

/// The root, recursively: the root of a power-of-two list is `H(root(left half) || root(right half))`.
pub fn merkle_root(leaves: &[[u8; 32]], kind: HashKind) -> [u8; 32] {
    fn rec(l: &[[u8; 32]], kind: HashKind) -> [u8; 32] {
        if l.len() == 1 {
            return l[0];
        }
        let (a, b) = l.split_at(l.len() / 2);
        parent(kind, &rec(a, kind), &rec(b, kind))
    }
    rec(&padded(leaves), kind)
}

/// Digests as buffer elements: four little-endian `u64` per digest.
pub fn digests_to_words(digests: &[[u8; 32]]) -> Vec<u64> {
    let mut out = Vec::with_capacity(digests.len() * 4);
    for d in digests {
        for w in 0..4 {
            let mut x = 0u64;
            for k in 0..8 {
                x |= (d[w * 8 + k] as u64) << (8 * k);
            }
            out.push(x);
        }
    }
    out
}

/// Buffer elements as digests (the inverse of [`digests_to_words`]).
pub fn words_to_digests(words: &[u64]) -> Vec<[u8; 32]> {
    assert_eq!(words.len() % 4, 0);
    words
        .chunks(4)
        .map(|w| {
            let mut d = [0u8; 32];
            for (i, x) in w.iter().enumerate() {
                for k in 0..8 {
                    d[i * 8 + k] = (x >> (8 * k)) as u8;
                }
            }
            d
        })
        .collect()
}

/// Row dot products of a row-major `rows x cols` matrix with `coeffs` (vectors of `cols`
/// coefficients, one after the other): `out[r * k + j] = sum_c coeffs[j * cols + c] * m[r][c] mod
/// p`, term by term in `u128 % p`.
pub fn row_dot_products(matrix: &[u64], cols: usize, coeffs: &[u64]) -> Vec<u64> {
    let k = coeffs.len() / cols;
    let rows = matrix.len() / cols;
    let mut out = vec![0u64; rows * k];
    for r in 0..rows {
        for j in 0..k {
            for c in 0..cols {
                out[r * k + j] = add(out[r * k + j], mul(coeffs[j * cols + c], matrix[r * cols + c]));
            }
        }
    }
    out
}

/// Column dot products over rows `first + i * step` (`i < count`) of a row-major matrix of `cols`
/// columns with `weights` (vectors of `count` weights, one after the other): `out[j * cols + c] =
/// sum_i weights[j * count + i] * m[first + i * step][c] mod p`, in `u128 % p`.
pub fn column_dot_products(
    matrix: &[u64],
    cols: usize,
    first: usize,
    step: usize,
    count: usize,
    weights: &[u64],
) -> Vec<u64> {
    let k = weights.len() / count;
    let mut out = vec![0u64; k * cols];
    for j in 0..k {
        for i in 0..count {
            let r = first + i * step;
            for c in 0..cols {
                out[j * cols + c] = add(out[j * cols + c], mul(weights[j * count + i], matrix[r * cols + c]));
            }
        }
    }
    out
}

/// One arity-2 FRI fold from the definition (CONVENTIONS.md, "FRI folding"): element `j` of
/// `input` (`d` coordinates each) is the value at `x_j = w^br(j)`, `w` a primitive `2n`-th root
/// of unity and `br` the reversal of `log2(2n)` bits, so the pair `2i, 2i + 1` lies at `x, -x`
/// and `out[i] = (a + b) / 2 + beta ((a - b) / (2 x)) [+ gamma addend[i]]`, the challenges applied
/// as their `d x d` matrices, each step in `u128 % p` with one inversion per element.
pub fn fri_fold(input: &[u64], beta: &[u64], addend: Option<(&[u64], &[u64])>) -> Vec<u64> {
    let d = beta.len().isqrt();
    assert_eq!(d * d, beta.len(), "a square challenge matrix");
    let n = input.len() / (2 * d);
    let bits = (2 * n).trailing_zeros();
    let w = root_of_unity(2 * n);
    let x_at = |j: usize| pow(w, bit_reverse(j, bits) as u64);
    let apply = |m: &[u64], v: &[u64]| -> Vec<u64> {
        (0..d).map(|r| (0..d).fold(0, |acc, c| add(acc, mul(m[r * d + c], v[c])))).collect()
    };
    let half = inv(2);
    let mut out = Vec::with_capacity(n * d);
    for i in 0..n {
        let (x, minus_x) = (x_at(2 * i), x_at(2 * i + 1));
        assert_eq!(add(x, minus_x), 0, "the pair {i} lies at x and -x");
        let a = &input[2 * i * d..(2 * i + 1) * d];
        let b = &input[(2 * i + 1) * d..(2 * i + 2) * d];
        let odd: Vec<u64> = (0..d).map(|c| mul(add(a[c], P - canon(b[c])), inv(mul(2, x)))).collect();
        let beta_odd = apply(beta, &odd);
        let extra = addend.map(|(v, gamma)| apply(gamma, &v[i * d..(i + 1) * d]));
        for r in 0..d {
            let even = mul(add(a[r], b[r]), half);
            out.push(add(add(even, beta_odd[r]), extra.as_ref().map_or(0, |e| e[r])));
        }
    }
    out
}

/// One opening point of [`reduce_openings`]: the `d x d` multiplication matrix `Z` of the point,
/// the value `y` (`d` words) and the rescaling `S` (`d x d`), row-major.
pub type OpeningPoint<'a> = (&'a [u64], &'a [u64], &'a [u64]);

/// The reduced openings of CONVENTIONS.md ("Reduced openings"), naively: for row `j` of the
/// row-major matrix of `cols` columns (`R` rows, a power of two) at `x = shift * w_R^j`, `v` its
/// combination by `coeffs` (`d` vectors of `cols`), `out[j] = acc[j] + sum_z t` where `t` solves
/// `(Z - x I) t = y - S v`, by Gaussian elimination mod p. Panics where `Z - x I` is singular.
pub fn reduce_openings(
    matrix: &[u64],
    cols: usize,
    coeffs: &[u64],
    shift: u64,
    points: &[OpeningPoint<'_>],
    acc: Option<&[u64]>,
) -> Vec<u64> {
    let d = coeffs.len() / cols;
    let rows = matrix.len() / cols;
    let w = root_of_unity(rows);
    let mut out = vec![0u64; rows * d];
    for j in 0..rows {
        let x = mul(canon(shift), pow(w, j as u64));
        let v: Vec<u64> =
            (0..d).map(|t| (0..cols).fold(0, |s, c| add(s, mul(coeffs[t * cols + c], matrix[j * cols + c])))).collect();
        for t in 0..d {
            out[j * d + t] = acc.map_or(0, |a| canon(a[j * d + t]));
        }
        for &(z, y, rescale) in points {
            // The augmented system [Z - x I | y - S v].
            let mut m: Vec<Vec<u64>> = (0..d)
                .map(|r| {
                    let mut row: Vec<u64> =
                        (0..d).map(|c| sub(canon(z[r * d + c]), if r == c { x } else { 0 })).collect();
                    let sv = (0..d).fold(0, |s, c| add(s, mul(rescale[r * d + c], v[c])));
                    row.push(sub(canon(y[r]), sv));
                    row
                })
                .collect();
            for col in 0..d {
                let pivot = (col..d).find(|&r| m[r][col] != 0).expect("Z - x I is invertible");
                m.swap(col, pivot);
                let inv_pivot = inv(m[col][col]);
                for c in col..=d {
                    m[col][c] = mul(m[col][c], inv_pivot);
                }
                for r in 0..d {
                    if r != col && m[r][col] != 0 {
                        let f = m[r][col];
                        for c in col..=d {
                            m[r][c] = sub(m[r][c], mul(f, m[col][c]));
                        }
                    }
                }
            }
            for t in 0..d {
                out[j * d + t] = add(out[j * d + t], m[t][d]);
            }
        }
    }
    out
}

/// `a - b mod p` through `u128`.
pub fn sub(a: u64, b: u64) -> u64 {
    add(a, P - canon(b))
}

/// A STARK quotient from its definition (CONVENTIONS.md, "Quotient values"), one point at a
/// time: the program's instructions over the row-major LDE `lde` of `cols` columns at the points
/// `x_i = shift * v^i` of `domain`, each selector from its formula with one inversion, every
/// step in `u128 % p`. Returns `d` words per point, `d = alpha_powers.len() / constraints`.
pub fn quotient_values(
    lde: &[u64],
    cols: usize,
    program: &backend_api::ConstraintProgram,
    domain: backend_api::QuotientDomain,
    values: &[u64],
    alpha_powers: &[u64],
) -> Vec<u64> {
    use backend_api::{Instr, Selector};
    let q = 1usize << domain.log_quotient_rows();
    let n = 1usize << domain.log_trace_rows();
    let rows = lde.len() / cols;
    let (stride, next) = (rows / q, q / n);
    let d = alpha_powers.len() / program.constraints();
    let v = root_of_unity(q);
    let w_inv = inv(root_of_unity(n));
    let mut out = Vec::with_capacity(q * d);
    let mut regs = vec![0u64; program.registers()];
    for i in 0..q {
        let x = mul(domain.shift(), pow(v, i as u64));
        let z_h = sub(pow(x, n as u64), 1);
        let selector = |which: Selector| match which {
            Selector::FirstRow => mul(z_h, inv(sub(x, 1))),
            Selector::LastRow => mul(z_h, inv(sub(x, w_inv))),
            Selector::Transition => sub(x, w_inv),
        };
        let row = |next_row: bool| {
            let r = if next_row { (i + next) % q } else { i };
            &lde[r * stride * cols..(r * stride + 1) * cols]
        };
        let mut acc = vec![0u64; d];
        for instr in program.instrs() {
            let r = |k: u32| regs[k as usize];
            let (dst, value) = match instr {
                Instr::Column { dst, col, next } => (dst, canon(row(next)[col as usize])),
                Instr::Value { dst, index } => (dst, canon(values[index as usize])),
                Instr::Selector { dst, which } => (dst, selector(which)),
                Instr::Add { dst, a, b } => (dst, add(r(a), r(b))),
                Instr::Sub { dst, a, b } => (dst, sub(r(a), r(b))),
                Instr::Mul { dst, a, b } => (dst, mul(r(a), r(b))),
                Instr::Neg { dst, a } => (dst, sub(0, r(a))),
                Instr::Fold { src, constraint } => {
                    let power = &alpha_powers[constraint as usize * d..(constraint as usize + 1) * d];
                    for (a, &p) in acc.iter_mut().zip(power) {
                        *a = add(*a, mul(p, r(src)));
                    }
                    continue;
                }
            };
            regs[dst as usize] = value;
        }
        let inv_z_h = inv(z_h);
        out.extend(acc.into_iter().map(|a| mul(a, inv_z_h)));
    }
    out
}

/// Applies a batch of copies one element at a time, reading every source before writing (the
/// batch is independent, so order does not matter).
pub fn apply_copies(src: &[u64], dst: &mut [u64], copies: &[CopyRange]) {
    let values: Vec<Vec<u64>> = copies.iter().map(|c| src[c.src..c.src + c.len].to_vec()).collect();
    for (c, v) in copies.iter().zip(values) {
        for (k, x) in v.into_iter().enumerate() {
            dst[c.dst + k] = x;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_match_the_conventions() {
        assert_eq!(root_of_unity(1 << 32), 1_753_635_133_440_165_772);
        for k in 1..=32u32 {
            let w = root_of_unity(1 << k);
            assert_eq!(pow(w, 1 << k), 1);
            assert_eq!(pow(w, 1 << (k - 1)), P - 1);
        }
    }

    #[test]
    fn lde_of_a_polynomial_is_its_evaluation() {
        // P(x) = 3 + 5x + 7x^3 on n = 4, evaluated at s * w_8^i.
        let n = 4;
        let w4 = root_of_unity(4);
        let poly = |x: u64| add(add(3, mul(5, x)), mul(7, pow(x, 3)));
        let trace: Vec<u64> = (0..n).map(|j| poly(pow(w4, j as u64))).collect();
        let lde = coset_lde(&trace, n, 1, 2, 7);
        let w8 = root_of_unity(8);
        for (i, &v) in lde.iter().enumerate() {
            assert_eq!(v, poly(mul(7, pow(w8, i as u64))));
        }
    }

    #[test]
    fn bit_reverse_and_digest_words_round_trip() {
        assert_eq!(bit_reverse(0b0011, 4), 0b1100);
        assert_eq!(bit_reverse(1, 1), 1);
        let d = [[7u8; 32], std::array::from_fn(|i| i as u8)];
        assert_eq!(words_to_digests(&digests_to_words(&d)), d);
        assert_eq!(digests_to_words(&d[1..])[0], 0x0706_0504_0302_0100);
    }

    #[test]
    fn merkle_references_agree() {
        let leaves: Vec<[u8; 32]> = (0..13u8).map(|i| [i; 32]).collect();
        for k in 1..=13 {
            for kind in HashKind::ALL {
                assert_eq!(merkle_nodes(&leaves[..k], kind)[0], merkle_root(&leaves[..k], kind));
            }
        }
    }
}
