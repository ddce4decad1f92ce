//! Independent references for the prover's tests: a naive O(n * N) coset LDE in u128 % p
//! arithmetic, naive leaf hashing with the `sha3` / `blake3` crates, and a recursive Merkle root.
//! None of this calls backend-api's math.

#![allow(dead_code)]

use sha3::Digest;

pub const P: u64 = 0xFFFF_FFFF_0000_0001;
/// 7^((p-1)/2^32), the primitive 2^32-th root of unity (CONVENTIONS.md).
pub const G32: u64 = 1_753_635_133_440_165_772;

pub fn mulm(a: u64, b: u64) -> u64 {
    ((a as u128 * b as u128) % P as u128) as u64
}

pub fn addm(a: u64, b: u64) -> u64 {
    ((a as u128 + b as u128) % P as u128) as u64
}

pub fn powm(mut b: u64, mut e: u64) -> u64 {
    let mut r = 1u64;
    b %= P;
    while e > 0 {
        if e & 1 == 1 {
            r = mulm(r, b);
        }
        b = mulm(b, b);
        e >>= 1;
    }
    r
}

/// The primitive 2^log-th root of unity.
pub fn root(log: u32) -> u64 {
    powm(G32, 1u64 << (32 - log))
}

/// The coset LDE of a row-major `n x m` trace, row-major `N x m`, by interpolation (inverse DFT
/// written out) and direct evaluation at `shift * w_N^i`.
pub fn naive_lde(trace: &[u64], n: usize, m: usize, blowup: usize, shift: u64) -> Vec<u64> {
    let big = n * blowup;
    let w_n = root(n.trailing_zeros());
    let w_n_inv = powm(w_n, P - 2);
    let w_big = root(big.trailing_zeros());
    let n_inv = powm(n as u64, P - 2);
    let mut out = vec![0u64; big * m];
    for c in 0..m {
        let coeffs: Vec<u64> = (0..n)
            .map(|k| {
                let mut acc = 0u64;
                for j in 0..n {
                    acc = addm(acc, mulm(trace[j * m + c] % P, powm(w_n_inv, (j * k) as u64)));
                }
                mulm(acc, n_inv)
            })
            .collect();
        for i in 0..big {
            let x = mulm(shift, powm(w_big, i as u64));
            let mut acc = 0u64;
            let mut xk = 1u64;
            for &a in &coeffs {
                acc = addm(acc, mulm(a, xk));
                xk = mulm(xk, x);
            }
            out[i * m + c] = acc;
        }
    }
    out
}

/// Naive index transpose of a row-major `rows x cols` matrix.
pub fn transpose(data: &[u64], rows: usize, cols: usize) -> Vec<u64> {
    let mut out = vec![0u64; data.len()];
    for r in 0..rows {
        for c in 0..cols {
            out[c * rows + r] = data[r * cols + c];
        }
    }
    out
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum H {
    Keccak,
    Blake3,
}

pub fn hash(h: H, bytes: &[u8]) -> [u8; 32] {
    match h {
        H::Keccak => sha3::Keccak256::digest(bytes).into(),
        H::Blake3 => *blake3::hash(bytes).as_bytes(),
    }
}

/// Leaf digests of a row-major `rows x cols` LDE over columns `c0..c1`; `pairs` selects the
/// lambda-vm layout (bit-reversed row pairs, big-endian elements).
pub fn leaves(h: H, lde: &[u64], rows: usize, cols: usize, c0: usize, c1: usize, pairs: bool) -> Vec<[u8; 32]> {
    let row_bytes = |r: usize, be: bool| -> Vec<u8> {
        (c0..c1)
            .flat_map(|c| {
                let v = lde[r * cols + c] % P;
                if be { v.to_be_bytes() } else { v.to_le_bytes() }
            })
            .collect()
    };
    if !pairs {
        return (0..rows).map(|r| hash(h, &row_bytes(r, false))).collect();
    }
    let bits = rows.trailing_zeros();
    let br = |i: usize| i.reverse_bits() >> (usize::BITS - bits);
    (0..rows / 2)
        .map(|i| {
            let mut b = row_bytes(br(2 * i), true);
            b.extend(row_bytes(br(2 * i + 1), true));
            hash(h, &b)
        })
        .collect()
}

/// The root over `leaves`, padded to a power of two by repeating the last leaf, recursively.
pub fn merkle_root(h: H, leaves: &[[u8; 32]]) -> [u8; 32] {
    let mut padded = leaves.to_vec();
    while !padded.len().is_power_of_two() {
        padded.push(*leaves.last().expect("at least one leaf"));
    }
    fn rec(h: H, xs: &[[u8; 32]]) -> [u8; 32] {
        if xs.len() == 1 {
            return xs[0];
        }
        let (l, r) = xs.split_at(xs.len() / 2);
        let mut b = rec(h, l).to_vec();
        b.extend(rec(h, r));
        hash(h, &b)
    }
    rec(h, &padded)
}

pub fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// Seeded values with the edge cases mixed in: 0, 1, p - 1, p, p + 1, u64::MAX.
pub fn values(len: usize, seed: u64) -> Vec<u64> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let edges = [0, 1, P - 1, P, P + 1, u64::MAX];
    (0..len).map(|i| if i % 5 == 0 { edges[(i / 5) % edges.len()] } else { rng.random::<u64>() }).collect()
}

/// A fresh empty directory for one test.
pub fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("prover-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

pub fn write_u64s(path: &std::path::Path, data: &[u64]) {
    let bytes: Vec<u8> = data.iter().flat_map(|x| x.to_le_bytes()).collect();
    std::fs::write(path, bytes).expect("write trace");
}

pub fn read_u64s(path: &std::path::Path) -> Vec<u64> {
    let bytes = std::fs::read(path).expect("read output");
    assert_eq!(bytes.len() % 8, 0, "{} is {} B, not whole u64s", path.display(), bytes.len());
    bytes.chunks_exact(8).map(|b| u64::from_le_bytes(b.try_into().unwrap())).collect()
}
