//! Naive Poseidon2 over Goldilocks, width 8, as Plonky3 0.9.0-rc.2 defines it
//! (`default_goldilocks_poseidon2_8` of p3-goldilocks; CONVENTIONS.md, "Hash functions").
//!
//! Written from the Poseidon2 paper's description (eprint 2023/323), with every linear layer as
//! an explicit 8 x 8 matrix and every product as `u128 % p`: nothing here shares code with
//! Plonky3's permutation or a backend's kernel. Only the round constants and the internal
//! diagonal, which are data, come from p3-goldilocks.

use p3_field::PrimeField64;
use p3_goldilocks::{
    GOLDILOCKS_POSEIDON2_RC_8_EXTERNAL_FINAL, GOLDILOCKS_POSEIDON2_RC_8_EXTERNAL_INITIAL,
    GOLDILOCKS_POSEIDON2_RC_8_INTERNAL, Goldilocks, MATRIX_DIAG_8_GOLDILOCKS,
};

use crate::{P, add, canon, mul};

/// The permutation's width.
pub const WIDTH: usize = 8;
/// The sponge's rate: elements absorbed per permutation.
pub const RATE: usize = 4;
/// Elements of a digest.
pub const OUT: usize = 4;

/// The 4 x 4 block of the external matrix (Poseidon2's `M_4`, as p3-poseidon2's `MDSMat4`).
const M4: [[u64; 4]; 4] = [[2, 3, 1, 1], [1, 2, 3, 1], [1, 1, 2, 3], [3, 1, 1, 2]];

fn canonical(x: Goldilocks) -> u64 {
    x.as_canonical_u64()
}

/// The external matrix `[[2 M4, M4], [M4, 2 M4]]`.
fn external_matrix() -> [[u64; WIDTH]; WIDTH] {
    let mut m = [[0; WIDTH]; WIDTH];
    for (i, row) in m.iter_mut().enumerate() {
        for (j, e) in row.iter_mut().enumerate() {
            let block = M4[i % 4][j % 4];
            *e = if i / 4 == j / 4 { 2 * block } else { block };
        }
    }
    m
}

/// The internal matrix `J + diag(V)`: ones everywhere, plus `V[i]` on the diagonal.
fn internal_matrix() -> [[u64; WIDTH]; WIDTH] {
    let mut m = [[1; WIDTH]; WIDTH];
    for (i, row) in m.iter_mut().enumerate() {
        row[i] = add(1, canonical(MATRIX_DIAG_8_GOLDILOCKS[i]));
    }
    m
}

fn apply(m: &[[u64; WIDTH]; WIDTH], state: &mut [u64; WIDTH]) {
    let old = *state;
    for (s, row) in state.iter_mut().zip(m) {
        *s = row.iter().zip(&old).fold(0, |acc, (&a, &x)| add(acc, mul(a, x)));
    }
}

fn sbox(x: u64) -> u64 {
    let x2 = mul(x, x);
    let x4 = mul(x2, x2);
    mul(mul(x4, x2), x)
}

fn full_round(state: &mut [u64; WIDTH], rc: &[Goldilocks; WIDTH], external: &[[u64; WIDTH]; WIDTH]) {
    for (s, &c) in state.iter_mut().zip(rc) {
        *s = sbox(add(*s, canonical(c)));
    }
    apply(external, state);
}

/// The permutation, on elements that may be non-canonical (each is read mod p).
pub fn permute(state: &mut [u64; WIDTH]) {
    let (external, internal) = (external_matrix(), internal_matrix());
    for s in state.iter_mut() {
        *s = canon(*s);
    }
    apply(&external, state);
    for rc in &GOLDILOCKS_POSEIDON2_RC_8_EXTERNAL_INITIAL {
        full_round(state, rc, &external);
    }
    for &rc in &GOLDILOCKS_POSEIDON2_RC_8_INTERNAL {
        state[0] = sbox(add(state[0], canonical(rc)));
        apply(&internal, state);
    }
    for rc in &GOLDILOCKS_POSEIDON2_RC_8_EXTERNAL_FINAL {
        full_round(state, rc, &external);
    }
    debug_assert!(state.iter().all(|&x| x < P));
}

/// The padding-free sponge of rate 4 (Plonky3's `PaddingFreeSponge<_, 8, 4, 4>`): the state
/// starts at zero; each block of up to 4 elements overwrites the first positions of the state,
/// and the state is permuted after each block; no block and no permutation for an empty input.
pub fn sponge(elements: &[u64]) -> [u64; OUT] {
    let mut state = [0u64; WIDTH];
    for block in elements.chunks(RATE) {
        state[..block.len()].copy_from_slice(block);
        permute(&mut state);
    }
    let mut out = [0; OUT];
    out.copy_from_slice(&state[..OUT]);
    out.map(canon)
}

/// The compression of two digests (Plonky3's `TruncatedPermutation<_, 2, 4, 8>`): the first 4
/// elements of the permutation of `left || right`.
pub fn compress(left: &[u64; OUT], right: &[u64; OUT]) -> [u64; OUT] {
    let mut state = [0u64; WIDTH];
    state[..OUT].copy_from_slice(left);
    state[OUT..].copy_from_slice(right);
    permute(&mut state);
    let mut out = [0; OUT];
    out.copy_from_slice(&state[..OUT]);
    out
}

/// Little-endian 8-byte words of `bytes` (whose length is a multiple of 8).
pub fn words(bytes: &[u8]) -> Vec<u64> {
    assert!(bytes.len().is_multiple_of(8), "a Poseidon2 preimage is whole 8-byte elements, got {} bytes", bytes.len());
    bytes.chunks_exact(8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes"))).collect()
}

/// The 32 digest bytes of 4 elements: each element canonical, 8 bytes little-endian.
pub fn digest_bytes(elements: &[u64; OUT]) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (o, &x) in out.chunks_exact_mut(8).zip(elements) {
        o.copy_from_slice(&canon(x).to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Plonky3's own known answer (p3-goldilocks, `test_default_goldilocks_poseidon2_width_8`).
    #[test]
    fn the_permutation_matches_plonky3s_known_answer() {
        let mut state = [0, 1, 2, 3, 4, 5, 6, 7];
        permute(&mut state);
        assert_eq!(
            state,
            [
                0x020cf04a1b214d14,
                0x84e14aaaeacaed25,
                0x1ae0f640e81c7457,
                0xa4d204cbaeb0d8a5,
                0x0cf637b627b3a7ff,
                0x788d304d948b486b,
                0x7327133ea1949af4,
                0xf415abb924da395b,
            ]
        );
    }

    #[test]
    fn non_canonical_inputs_are_read_mod_p() {
        let mut a = [P, P + 1, u64::MAX, 3, 4, 5, 6, 7];
        let mut b = [0, 1, u64::MAX - P, 3, 4, 5, 6, 7];
        permute(&mut a);
        permute(&mut b);
        assert_eq!(a, b);
    }

    #[test]
    fn the_sponge_overwrites_and_permutes_only_started_blocks() {
        assert_eq!(sponge(&[]), [0; 4], "no block, no permutation");
        let mut one = [9, 0, 0, 0, 0, 0, 0, 0];
        permute(&mut one);
        assert_eq!(sponge(&[9])[..], one[..4]);
        // Five elements: a full block, then the fifth overwrites position 0 only.
        let mut s = [1, 2, 3, 4, 0, 0, 0, 0];
        permute(&mut s);
        s[0] = 5;
        permute(&mut s);
        assert_eq!(sponge(&[1, 2, 3, 4, 5])[..], s[..4]);
    }
}
