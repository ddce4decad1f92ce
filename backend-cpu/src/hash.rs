//! Leaf hashing: one digest per leaf, leaves in parallel.
//!
//! Hashes come from the `sha3` (`Keccak256`, the original Keccak pad), `p3-keccak` (Keccak-256
//! over several messages per permutation) and `blake3` crates, and Poseidon2 from Plonky3
//! (`crate::poseidon2`); this module only lays the preimages out (CONVENTIONS.md, "Leaves"):
//!
//! - `rows`: the row's elements in `spec.cols`, canonical, 8 bytes little-endian each. On a
//!   little-endian host a row whose elements are all canonical already *is* its preimage, so it
//!   is hashed straight from the matrix; otherwise it is serialised through a reused buffer.
//! - Poseidon2 (`rows` only): the row's elements in `spec.cols`, canonical, absorbed as field
//!   elements; `crate::poseidon2::LANES` leaves per packed call.
//! - `lambda-vm-pairs`: rows `br(2i)` and `br(2i+1)`, canonical, 8 bytes big-endian each,
//!   serialised through the same buffer. Leaves are computed in the order that reads rows
//!   sequentially (see `hash_with`) and written at their bit-reversed indices.
//!
//! Keccak-256 hashes [`KECCAK_GROUP`] leaves per call of `p3_keccak::Keccak256Hash::hash_many`,
//! which runs one sponge per SIMD lane of the widest Keccak-f\[1600\] the running CPU has (on
//! x86-64 it picks AVX-512, AVX2 or SSE2 at run time, whatever the build enables), with the
//! original Keccak pad. A group's preimages are either read straight from the matrix (whole,
//! canonical rows on a little-endian host) or serialised end to end into a per-task buffer;
//! leaves over [`KECCAK_BATCH_MAX_LEAF_BYTES`] that are not read in place go through the `sha3`
//! crate one at a time, so that buffer stays small.
//!
//! The buffer (one per rayon task, reused across its leaves, so nothing is allocated per leaf)
//! holds [`BUF_ELEMS`] elements (8 KiB), so most leaves reach the hasher in one `update`, which
//! lets BLAKE3 hash a leaf's chunks with SIMD exactly as `blake3::hash` would.

use backend_api::field::{bit_reverse, canonical};
use backend_api::{DIGEST_WORDS, HashKind, LeafLayout, LeafSpec, MatrixShape, Result, digest_to_words, validate};
use p3_keccak::Keccak256Hash;
use p3_symmetric::CryptographicHasher;
use rayon::prelude::*;
use sha3::Digest;

/// Elements of the serialisation buffer: 8 KiB, eight BLAKE3 chunks.
const BUF_ELEMS: usize = 1024;

/// Keccak-256 leaves per batched call: one lane group of `p3-keccak`'s widest compiled
/// Keccak-f (8 on x86-64, where AVX-512 is compiled in every build and picked at run time).
/// A narrower backend picked at run time splits a group into several permutations.
pub(crate) const KECCAK_GROUP: usize = <Keccak256Hash as CryptographicHasher<u8, [u8; 32]>>::LANES;

/// The widest Keccak-256 leaf that is serialised for the batched path: a group's buffer then
/// holds at most `KECCAK_GROUP * 32 KiB`. Wider leaves read in place are still batched.
pub(crate) const KECCAK_BATCH_MAX_LEAF_BYTES: usize = 32 << 10;

/// Keccak-256 of `digests.len() / DIGEST_WORDS` equal-length messages laid end to end in
/// `bytes`, batched across SIMD lanes; digest `k` goes to `digests[4k..4k + 4]` as
/// [`digest_to_words`] lays it out.
///
/// A single message goes to the `sha3` crate: the batched call hashes a whole lane group
/// whatever the count, and `PAIRED keccak_lanes` in the `hash` bench measures it 1.35-1.45x
/// slower than `sha3` for one message and 0.67-0.72x for two (AVX-512, 2-core CPU VM).
pub(crate) fn keccak256_many(bytes: &[u8], digests: &mut [u64]) {
    debug_assert!(!digests.is_empty() && digests.len().is_multiple_of(DIGEST_WORDS));
    debug_assert!(bytes.len().is_multiple_of(digests.len() / DIGEST_WORDS));
    if digests.len() == DIGEST_WORDS {
        digests.copy_from_slice(&digest_to_words(&<sha3::Keccak256 as Hasher32>::one_shot(bytes)));
        return;
    }
    Keccak256Hash.hash_many(bytes, bytemuck::cast_slice_mut(digests));
    // The digest bytes now sit in memory in order; `digest_to_words` reads them little-endian
    // (a no-op on a little-endian host).
    digests.iter_mut().for_each(|w| *w = u64::from_le(*w));
}

/// An incremental 32-byte hash, implemented by the two crates' hashers.
pub(crate) trait Hasher32: Default {
    /// Absorbs `bytes`.
    fn absorb(&mut self, bytes: &[u8]);
    /// The digest.
    fn finish_digest(self) -> [u8; 32];
    /// The digest of `bytes` in one call (the crate's one-shot function).
    fn one_shot(bytes: &[u8]) -> [u8; 32];
}

impl Hasher32 for sha3::Keccak256 {
    fn absorb(&mut self, bytes: &[u8]) {
        Digest::update(self, bytes);
    }
    fn finish_digest(self) -> [u8; 32] {
        self.finalize().into()
    }
    fn one_shot(bytes: &[u8]) -> [u8; 32] {
        <sha3::Keccak256 as Digest>::digest(bytes).into()
    }
}

impl Hasher32 for blake3::Hasher {
    fn absorb(&mut self, bytes: &[u8]) {
        self.update(bytes);
    }
    fn finish_digest(self) -> [u8; 32] {
        self.finalize().into()
    }
    fn one_shot(bytes: &[u8]) -> [u8; 32] {
        blake3::hash(bytes).into()
    }
}

/// Feeds canonical elements to a hasher through a word buffer: each element is stored as
/// `to_le()` or `to_be()`, so the buffer's bytes are the 8-byte LE or BE encodings on any host,
/// and the conversion loop vectorises.
struct Serializer<'b, H> {
    hasher: H,
    buf: &'b mut [u64],
    fill: usize,
    big_endian: bool,
}

impl<'b, H: Hasher32> Serializer<'b, H> {
    /// A serializer over `buf` (not empty).
    fn new(buf: &'b mut [u64], big_endian: bool) -> Self {
        debug_assert!(!buf.is_empty());
        Self { hasher: H::default(), buf, fill: 0, big_endian }
    }

    fn push(&mut self, mut elems: &[u64]) {
        while !elems.is_empty() {
            let room = self.buf.len() - self.fill;
            let (now, later) = elems.split_at(room.min(elems.len()));
            let out = &mut self.buf[self.fill..self.fill + now.len()];
            if self.big_endian {
                out.iter_mut().zip(now).for_each(|(o, &x)| *o = canonical(x).to_be());
            } else {
                out.iter_mut().zip(now).for_each(|(o, &x)| *o = canonical(x).to_le());
            }
            self.fill += now.len();
            if self.fill == self.buf.len() {
                self.hasher.absorb(bytemuck::cast_slice(self.buf));
                self.fill = 0;
            }
            elems = later;
        }
    }

    fn finish(self) -> [u8; 32] {
        let mut hasher = self.hasher;
        hasher.absorb(bytemuck::cast_slice(&self.buf[..self.fill]));
        hasher.finish_digest()
    }
}

/// The digest of one `rows` leaf: `row` is the leaf's column range of one row.
fn rows_leaf<H: Hasher32>(row: &[u64], buf: &mut [u64]) -> [u8; 32] {
    if cfg!(target_endian = "little") && !maybe_non_canonical(row) {
        // Canonical elements in little-endian memory are the preimage bytes themselves.
        return H::one_shot(bytemuck::cast_slice(row));
    }
    let mut s = Serializer::<H>::new(buf, false);
    s.push(row);
    s.finish()
}

/// The digest of one `lambda-vm-pairs` leaf over rows `a || b`.
fn pairs_leaf<H: Hasher32>(a: &[u64], b: &[u64], buf: &mut [u64]) -> [u8; 32] {
    let mut s = Serializer::<H>::new(buf, true);
    s.push(a);
    s.push(b);
    s.finish()
}

/// [`crate::CpuBackend::hash_leaves_into`] over host slices.
///
/// # Errors
/// As the trait method: the spec's errors, [`backend_api::Error::LengthMismatch`],
/// [`backend_api::Error::OutOfBounds`] for a short `out`.
pub(crate) fn hash_leaves_into(
    matrix: &[u64],
    shape: MatrixShape,
    spec: &LeafSpec,
    out: &mut [u64],
    out_digest: usize,
) -> Result<()> {
    let to = validate::hash_leaves(shape, spec, matrix.len(), out.len(), out_digest)?;
    let out = &mut out[to.start..to.start + to.leaves * DIGEST_WORDS];
    match spec.hash() {
        HashKind::Keccak256 => keccak_leaves(matrix, shape, spec, out),
        HashKind::Blake3 => hash_with::<blake3::Hasher>(matrix, shape, spec, out),
        HashKind::Poseidon2 => poseidon2_rows(matrix, shape, spec, out),
    }
    Ok(())
}

/// Poseidon2 leaves over the `rows` layout (the only one [`LeafSpec::new`] accepts for it):
/// `LANES` leaves per packed sponge, the last group of fewer leaves one at a time.
fn poseidon2_rows(matrix: &[u64], shape: MatrixShape, spec: &LeafSpec, out: &mut [u64]) {
    use crate::poseidon2::{LANES, leaf, leaves_packed};
    debug_assert_eq!(spec.layout(), LeafLayout::Rows);
    let (cols, range) = (shape.cols(), spec.cols());
    let row = |r: usize| &matrix[r * cols + range.start..r * cols + range.end];
    out.par_chunks_mut(LANES * DIGEST_WORDS).with_min_len(4).enumerate().for_each(|(g, o)| {
        let first = g * LANES;
        if o.len() == LANES * DIGEST_WORDS {
            let mut digests = [[0u64; DIGEST_WORDS]; LANES];
            leaves_packed(|lane| row(first + lane), &mut digests);
            o.copy_from_slice(digests.as_flattened());
        } else {
            for (k, d) in o.chunks_exact_mut(DIGEST_WORDS).enumerate() {
                d.copy_from_slice(&leaf(row(first + k)));
            }
        }
    });
}

/// Keccak-256 leaves, [`KECCAK_GROUP`] per batched call (see the module docs); leaves too wide
/// to serialise go through [`hash_with`] one at a time.
fn keccak_leaves(matrix: &[u64], shape: MatrixShape, spec: &LeafSpec, out: &mut [u64]) {
    let (cols, range) = (shape.cols(), spec.cols());
    let row = |r: usize| &matrix[r * cols + range.start..r * cols + range.end];
    let whole_rows = cfg!(target_endian = "little") && range.len() == cols;
    let serialise = spec.leaf_bytes() <= KECCAK_BATCH_MAX_LEAF_BYTES;
    if !whole_rows && !serialise {
        return hash_with::<sha3::Keccak256>(matrix, shape, spec, out);
    }
    let group = KECCAK_GROUP * DIGEST_WORDS;
    match spec.layout() {
        LeafLayout::Rows => out.par_chunks_mut(group).enumerate().for_each_init(Vec::new, |buf, (g, o)| {
            let first = g * KECCAK_GROUP;
            let leaves = o.len() / DIGEST_WORDS;
            let elems = &matrix[first * cols..(first + leaves) * cols];
            if whole_rows && !maybe_non_canonical(elems) {
                // Whole canonical rows in little-endian memory: the preimages, end to end.
                keccak256_many(bytemuck::cast_slice(elems), o);
            } else if serialise {
                buf.clear();
                for r in first..first + leaves {
                    buf.extend(row(r).iter().map(|&x| canonical(x).to_le()));
                }
                keccak256_many(bytemuck::cast_slice(buf), o);
            } else {
                // Whole rows too wide to serialise, with a non-canonical element in the group.
                let mut scratch = vec![0u64; BUF_ELEMS];
                for (k, d) in o.chunks_exact_mut(DIGEST_WORDS).enumerate() {
                    d.copy_from_slice(&digest_to_words(&rows_leaf::<sha3::Keccak256>(row(first + k), &mut scratch)));
                }
            }
        }),
        LeafLayout::LambdaVmPairs => {
            if !serialise {
                return hash_with::<sha3::Keccak256>(matrix, shape, spec, out);
            }
            // As in `hash_with`: q walks the rows in order, leaf br(q) hashes rows q and q + N/2.
            let half = shape.rows() / 2;
            let bits = half.trailing_zeros();
            let digests = SharedDigests(out.as_mut_ptr());
            (0..half.div_ceil(KECCAK_GROUP)).into_par_iter().for_each_init(Vec::new, |buf, g| {
                let qs = g * KECCAK_GROUP..((g + 1) * KECCAK_GROUP).min(half);
                buf.clear();
                for q in qs.clone() {
                    buf.extend(row(q).iter().chain(row(q + half)).map(|&x| canonical(x).to_be()));
                }
                let mut words = [0u64; KECCAK_GROUP * DIGEST_WORDS];
                let words = &mut words[..qs.len() * DIGEST_WORDS];
                keccak256_many(bytemuck::cast_slice(buf), words);
                for (q, d) in qs.zip(words.chunks_exact(DIGEST_WORDS)) {
                    let i = bit_reverse(q, bits);
                    // SAFETY: `out` holds `half` digests (checked by the caller) and i < half;
                    // q -> i is a bijection of [0, half) and the groups split [0, half), so
                    // every digest is written by exactly one task; nothing reads `out` during
                    // the loop, and the `&mut` borrow of `out` outlives it.
                    unsafe {
                        digests
                            .ptr()
                            .add(i * DIGEST_WORDS)
                            .cast::<[u64; DIGEST_WORDS]>()
                            .write_unaligned(d.try_into().expect("one digest"))
                    };
                }
            });
        }
    }
}

/// Whether any element may be non-canonical: x >= p needs a high half of 0xFFFF_FFFF (a
/// canonical element with one, such as p - 1, just takes the serialising path). A branch-free
/// fold over 32-bit lanes vectorises better than 64-bit unsigned compares.
fn maybe_non_canonical(elems: &[u64]) -> bool {
    let halves: &[u32] = bytemuck::cast_slice(elems);
    halves.iter().fold(false, |acc, &w| acc | (w == u32::MAX))
}

fn hash_with<H: Hasher32>(matrix: &[u64], shape: MatrixShape, spec: &LeafSpec, out: &mut [u64]) {
    let (cols, range) = (shape.cols(), spec.cols());
    let row = |r: usize| &matrix[r * cols + range.start..r * cols + range.end];
    // One serialisation buffer per rayon task, reused across its leaves.
    let new_buf = || vec![0u64; BUF_ELEMS];
    match spec.layout() {
        LeafLayout::Rows => {
            out.par_chunks_mut(DIGEST_WORDS).with_min_len(16).enumerate().for_each_init(new_buf, |buf, (r, o)| {
                o.copy_from_slice(&digest_to_words(&rows_leaf::<H>(row(r), buf)));
            })
        }
        LeafLayout::LambdaVmPairs => {
            // Leaf i hashes rows br(2i) and br(2i + 1) = br(2i) + N/2, and q = br(2i) is the
            // (log2 N - 1)-bit reversal of i. Walking q in order reads the matrix as two
            // sequential streams (rows q and q + N/2) instead of two random rows per leaf; the
            // digests land at the bit-reversed leaf indices.
            let half = shape.rows() / 2;
            let bits = half.trailing_zeros();
            let digests = SharedDigests(out.as_mut_ptr());
            (0..half).into_par_iter().with_min_len(16).for_each_init(new_buf, |buf, q| {
                let i = bit_reverse(q, bits);
                let d = digest_to_words(&pairs_leaf::<H>(row(q), row(q + half), buf));
                // SAFETY: `out` holds `half` digests (checked by the caller) and i < half;
                // q -> i is a bijection of [0, half), so every task writes its own digest and no
                // two write the same one; nothing reads `out` during the loop, and the `&mut`
                // borrow of `out` outlives it.
                unsafe { digests.ptr().add(i * DIGEST_WORDS).cast::<[u64; DIGEST_WORDS]>().write_unaligned(d) };
            });
        }
    }
}

/// The digest output, shared by rayon tasks that each write a different digest.
#[derive(Clone, Copy)]
struct SharedDigests(*mut u64);

// SAFETY: only used in `hash_with` and `keccak_leaves`, whose tasks write pairwise distinct
// digests of one
// exclusively borrowed slice and never read it; the loop joins before the borrow ends.
unsafe impl Send for SharedDigests {}
// SAFETY: as above.
unsafe impl Sync for SharedDigests {}

impl SharedDigests {
    /// The pointer (a method, so closures capture the `Send` wrapper and not the bare field).
    fn ptr(self) -> *mut u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use backend_api::field::P;
    use backend_api::{Error, hex};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// The reference: the preimage built element by element, hashed by the crate in one call.
    fn reference(m: &[u64], shape: MatrixShape, spec: &LeafSpec) -> Vec<[u8; 32]> {
        let row_bytes = |r: usize, be: bool| -> Vec<u8> {
            spec.cols()
                .clone()
                .flat_map(|c| {
                    let v = (m[r * shape.cols() + c] as u128 % P as u128) as u64;
                    if be { v.to_be_bytes() } else { v.to_le_bytes() }
                })
                .collect()
        };
        let preimages: Vec<Vec<u8>> = match spec.layout() {
            LeafLayout::Rows => (0..shape.rows()).map(|r| row_bytes(r, false)).collect(),
            LeafLayout::LambdaVmPairs => {
                let bits = shape.rows().ilog2();
                let br = |i: usize| i.reverse_bits() >> (usize::BITS - bits);
                (0..shape.rows() / 2)
                    .map(|i| [row_bytes(br(2 * i), true), row_bytes(br(2 * i + 1), true)].concat())
                    .collect()
            }
        };
        preimages
            .iter()
            .map(|p| match spec.hash() {
                HashKind::Keccak256 => sha3::Keccak256::digest(p).into(),
                HashKind::Blake3 => *blake3::hash(p).as_bytes(),
                // The naive sponge over the canonical little-endian elements.
                HashKind::Poseidon2 => naive_reference::hash(HashKind::Poseidon2, p),
            })
            .collect()
    }

    fn random_matrix(rng: &mut ChaCha8Rng, len: usize, non_canonical: bool) -> Vec<u64> {
        (0..len)
            .map(|_| {
                if non_canonical && rng.random_bool(0.2) {
                    P + rng.random_range(0..=u64::MAX - P)
                } else {
                    rng.random_range(0..P)
                }
            })
            .collect()
    }

    #[test]
    fn leaves_match_the_crates_over_reference_preimages() {
        // Widths around the 1 KiB BLAKE3 chunk and the 8 KiB serialisation buffer (1023..1025
        // elements), ranges that split rows, and matrices with and without non-canonical values
        // (which take the serialising path on the rows layout).
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for (rows, cols, range) in [
            (2, 1, 0..1),
            (4, 3, 0..3),
            (8, 17, 5..17),
            (16, 128, 0..128),
            (4, 316, 0..200),
            (2, 1025, 0..1025),
            (4, 1025, 1..1024),
            (2, 600, 0..600),
        ] {
            let shape = MatrixShape::new(rows, cols).unwrap();
            for non_canonical in [false, true] {
                let m = random_matrix(&mut rng, rows * cols, non_canonical);
                for hash in HashKind::ALL {
                    for layout in LeafLayout::ALL.into_iter().filter(|&l| hash.supports(l)) {
                        let spec = LeafSpec::new(hash, layout, range.clone()).unwrap();
                        let leaves = spec.validate(shape).unwrap();
                        // Write at digest offset 1 of a buffer with one spare digest each side.
                        let mut out = vec![7u64; (leaves + 2) * DIGEST_WORDS];
                        hash_leaves_into(&m, shape, &spec, &mut out, 1).unwrap();
                        let expect = reference(&m, shape, &spec);
                        let got = backend_api::digests_from_words(&out[DIGEST_WORDS..(leaves + 1) * DIGEST_WORDS]);
                        assert_eq!(got, expect, "{shape} {range:?} {hash} {layout} non-canonical={non_canonical}");
                        assert!(out[..DIGEST_WORDS].iter().chain(&out[(leaves + 1) * DIGEST_WORDS..]).all(|&w| w == 7));
                    }
                }
            }
        }
    }

    #[test]
    fn keccak_batches_match_the_sha3_crate_at_every_group_edge() {
        // Leaf counts around the batch group (1, group - 1, group, group + 1, two groups + 1),
        // rows below, at and above the 136-byte rate and at two rates, both the in-place path
        // (whole canonical rows) and the serialising one (a column range, or a group with a
        // non-canonical element while the next group has none).
        let g = KECCAK_GROUP;
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for leaves in [1, g - 1, g, g + 1, 2 * g + 1] {
            for (cols, range) in
                [(16, 0..16), (17, 0..17), (18, 0..18), (34, 0..34), (18, 1..18), (19, 1..18), (35, 0..34)]
            {
                let shape = MatrixShape::new(leaves, cols).unwrap();
                let mut m = random_matrix(&mut rng, leaves * cols, false);
                for non_canonical in [false, true] {
                    if non_canonical {
                        // Only in the first group: the later groups stay on the in-place path.
                        m[range.start] = P + 5;
                        m[range.end - 1] = u64::MAX;
                    }
                    let spec = LeafSpec::new(HashKind::Keccak256, LeafLayout::Rows, range.clone()).unwrap();
                    let mut out = vec![0u64; leaves * DIGEST_WORDS];
                    hash_leaves_into(&m, shape, &spec, &mut out, 0).unwrap();
                    let got = backend_api::digests_from_words(&out);
                    assert_eq!(got, reference(&m, shape, &spec), "{shape} {range:?} non-canonical={non_canonical}");
                }
            }
        }
        // lambda-vm-pairs: the leaf count is half a power of two; 8 and 9 columns make a
        // preimage of 128 and 144 bytes, 17 columns one of two rates.
        for rows in [2, 4, 2 * g, 4 * g, 8 * g] {
            for cols in [8, 9, 17] {
                let shape = MatrixShape::new(rows, cols).unwrap();
                let m = random_matrix(&mut rng, rows * cols, true);
                let spec = LeafSpec::new(HashKind::Keccak256, LeafLayout::LambdaVmPairs, 0..cols).unwrap();
                let mut out = vec![0u64; rows / 2 * DIGEST_WORDS];
                hash_leaves_into(&m, shape, &spec, &mut out, 0).unwrap();
                assert_eq!(backend_api::digests_from_words(&out), reference(&m, shape, &spec), "{shape} pairs");
            }
        }
    }

    #[test]
    fn keccak_leaves_past_the_serialising_limit_match_the_sha3_crate() {
        // Leaves over `KECCAK_BATCH_MAX_LEAF_BYTES`: whole canonical rows are still batched in
        // place; a non-canonical element, a column range or the pairs layout hash one at a time.
        let wide = KECCAK_BATCH_MAX_LEAF_BYTES / 8 + 1;
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        for (rows, cols, range, layout, non_canonical) in [
            (3, wide, 0..wide, LeafLayout::Rows, false),
            (3, wide, 0..wide, LeafLayout::Rows, true),
            (2, wide + 2, 1..wide + 1, LeafLayout::Rows, false),
            (2, wide / 2 + 1, 0..wide / 2 + 1, LeafLayout::LambdaVmPairs, true),
        ] {
            let shape = MatrixShape::new(rows, cols).unwrap();
            let m = random_matrix(&mut rng, rows * cols, non_canonical);
            let spec = LeafSpec::new(HashKind::Keccak256, layout, range.clone()).unwrap();
            let leaves = spec.validate(shape).unwrap();
            assert!(spec.leaf_bytes() > KECCAK_BATCH_MAX_LEAF_BYTES);
            let mut out = vec![0u64; leaves * DIGEST_WORDS];
            hash_leaves_into(&m, shape, &spec, &mut out, 0).unwrap();
            assert_eq!(
                backend_api::digests_from_words(&out),
                reference(&m, shape, &spec),
                "{shape} {range:?} {layout}"
            );
        }
    }

    #[test]
    fn known_answers() {
        assert_eq!(
            hex(&<sha3::Keccak256 as Hasher32>::one_shot(b"")),
            "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"
        );
        assert_eq!(
            hex(&<blake3::Hasher as Hasher32>::one_shot(b"")),
            "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
        );
        // A non-canonical p + 5 hashes as 5.
        let spec = LeafSpec::new(HashKind::Keccak256, LeafLayout::Rows, 0..1).unwrap();
        let shape = MatrixShape::new(1, 1).unwrap();
        let (mut a, mut b) = ([0u64; 4], [0u64; 4]);
        hash_leaves_into(&[P + 5], shape, &spec, &mut a, 0).unwrap();
        hash_leaves_into(&[5], shape, &spec, &mut b, 0).unwrap();
        assert_eq!(a, b);
        assert_eq!(a, digest_to_words(&sha3::Keccak256::digest(5u64.to_le_bytes()).into()));
        // p - 1 is canonical but has a high half of 0xFFFF_FFFF: the serialising path, same bytes.
        let mut c = [0u64; 4];
        hash_leaves_into(&[P - 1], shape, &spec, &mut c, 0).unwrap();
        assert_eq!(c, digest_to_words(&sha3::Keccak256::digest((P - 1).to_le_bytes()).into()));
    }

    #[test]
    fn bad_calls_are_errors() {
        let shape = MatrixShape::new(4, 3).unwrap();
        let m = vec![0u64; 12];
        let spec = LeafSpec::new(HashKind::Blake3, LeafLayout::Rows, 0..3).unwrap();
        let mut out = vec![0u64; 4 * DIGEST_WORDS];
        let err = hash_leaves_into(&m, shape, &spec, &mut out, 1).unwrap_err();
        assert!(matches!(err, Error::OutOfBounds { start: 4, end: 20, len: 16, .. }), "{err}");
        let err = hash_leaves_into(&m[..11], shape, &spec, &mut out, 0).unwrap_err();
        assert!(matches!(err, Error::LengthMismatch { expected: 12, actual: 11, .. }), "{err}");
        let bad = LeafSpec::new(HashKind::Blake3, LeafLayout::Rows, 2..4).unwrap();
        assert!(matches!(hash_leaves_into(&m, shape, &bad, &mut out, 0), Err(Error::InvalidArgument(_))));
        let pairs = LeafSpec::new(HashKind::Blake3, LeafLayout::LambdaVmPairs, 0..3).unwrap();
        let odd = MatrixShape::new(3, 4).unwrap();
        assert!(matches!(hash_leaves_into(&m, odd, &pairs, &mut out, 0), Err(Error::InvalidArgument(_))));
        assert!(out.iter().all(|&w| w == 0), "nothing written on error");
    }
}
