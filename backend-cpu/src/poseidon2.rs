//! Poseidon2 leaves and nodes through Plonky3's own permutation (CONVENTIONS.md, "Hash
//! functions"): `default_goldilocks_poseidon2_8` of p3-goldilocks, the padding-free sponge of
//! rate 4 for leaves, the truncated permutation for nodes.
//!
//! Both run on Plonky3's packed field type, one lane per leaf or node, as Plonky3's
//! `MerkleTreeMmcs` does: `<Goldilocks as Field>::Packing` holds 4 lanes where the build enables
//! AVX2 (8 with AVX-512) and 1 otherwise. Inputs are canonicalised first, so a non-canonical
//! element hashes as its value mod p.

use std::sync::OnceLock;

use backend_api::DIGEST_WORDS;
use backend_api::field::canonical;
use p3_field::{Field, PackedValue, PrimeField64};
use p3_goldilocks::{Goldilocks, Poseidon2Goldilocks, default_goldilocks_poseidon2_8};
use p3_symmetric::{CryptographicHasher, PaddingFreeSponge, PseudoCompressionFunction, TruncatedPermutation};

type Perm = Poseidon2Goldilocks<8>;
type Sponge = PaddingFreeSponge<Perm, 8, 4, 4>;
type Compression = TruncatedPermutation<Perm, 2, 4, 8>;
type Packed = <Goldilocks as Field>::Packing;

/// Lanes of the packed type: leaves or nodes hashed by one packed call.
pub(crate) const LANES: usize = Packed::WIDTH;

/// The sponge and the compression, built once (the permutation's constants are copied into
/// packed vectors at construction).
fn instance() -> &'static (Sponge, Compression) {
    static INSTANCE: OnceLock<(Sponge, Compression)> = OnceLock::new();
    INSTANCE.get_or_init(|| {
        let perm = default_goldilocks_poseidon2_8();
        (Sponge::new(perm.clone()), Compression::new(perm))
    })
}

fn element(x: u64) -> Goldilocks {
    Goldilocks::new(canonical(x))
}

fn words(digest: [Goldilocks; 4]) -> [u64; DIGEST_WORDS] {
    digest.map(|x| x.as_canonical_u64())
}

/// The digests of `LANES` leaves at once: `row(lane)` is lane's leaf row (all the same length),
/// written to `out[lane]`.
pub(crate) fn leaves_packed<'a>(row: impl Fn(usize) -> &'a [u64], out: &mut [[u64; DIGEST_WORDS]; LANES]) {
    let len = row(0).len();
    let digest = instance().0.hash_iter((0..len).map(|c| Packed::from_fn(|lane| element(row(lane)[c]))));
    for (lane, o) in out.iter_mut().enumerate() {
        *o = words(digest.map(|p| p.as_slice()[lane]));
    }
}

/// The digest of one leaf row.
pub(crate) fn leaf(row: &[u64]) -> [u64; DIGEST_WORDS] {
    words(instance().0.hash_iter(row.iter().map(|&x| element(x))))
}

/// The parents of `LANES` node pairs at once: `children` holds `LANES` pairs of digests
/// (`2 * LANES * 4` words), `out` their `LANES` parents.
pub(crate) fn parents_packed(children: &[u64], out: &mut [u64]) {
    debug_assert_eq!((children.len(), out.len()), (2 * LANES * DIGEST_WORDS, LANES * DIGEST_WORDS));
    let half = |side: usize| -> [Packed; 4] {
        std::array::from_fn(|k| Packed::from_fn(|lane| element(children[(2 * lane + side) * DIGEST_WORDS + k])))
    };
    let parent = instance().1.compress([half(0), half(1)]);
    for (lane, o) in out.chunks_exact_mut(DIGEST_WORDS).enumerate() {
        o.copy_from_slice(&words(parent.map(|p| p.as_slice()[lane])));
    }
}

/// The parent of one node pair: `children` is `left || right`, 8 words.
pub(crate) fn parent(children: &[u64]) -> [u64; DIGEST_WORDS] {
    let half = |side: usize| -> [Goldilocks; 4] { std::array::from_fn(|k| element(children[side * DIGEST_WORDS + k])) };
    words(instance().1.compress([half(0), half(1)]))
}
