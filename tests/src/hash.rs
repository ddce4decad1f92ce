//! Checks of [`Backend::hash_leaves`], [`Backend::hash_leaves_into`] and
//! [`Backend::hash_leaves_from_host`] against preimages
//! serialised by hand and hashed by the `sha3` / `blake3` crates or the naive Poseidon2.
//!
//! Coverage: every hash x every layout it defines (`rows`, `lambda-vm-pairs`) x column ranges (the full
//! row, `[0, s)` and `[s, m)` as in split trees, and an inner range); leaf counts that are not
//! powers of two; one row; non-canonical inputs; writing at a digest offset.
//!
//! **Hash block boundaries.** A leaf preimage is a whole number of 8-byte elements, so the
//! Keccak-256 rate of 136 bytes can be hit exactly but not straddled by one byte: with the `rows`
//! layout, 16 / 17 / 18 columns give 128 / 136 / 144-byte preimages (below, exactly at and above
//! the rate, so the padding falls in the first block, in a block of its own, and in the second
//! block) and 34 columns give 272 bytes (two full blocks). With `lambda-vm-pairs` the preimage is
//! two rows, twice as long: 8 / 9 columns give 128 / 144 bytes, 17 columns 272 bytes (two full
//! blocks) and 34 columns 544 bytes (four). For BLAKE3, 8 columns are one 64-byte block and 128
//! columns (64 for pairs) exactly one 1024-byte chunk; 129, 316 and 612 columns (8 KiB+ pairs)
//! take the chunk tree. For Poseidon2 (rate 4 elements), 1 to 9, 12, 13 and 16 columns put the
//! last block at every fill from 1 to 4 elements, one and several blocks.

use std::ops::Range;

use backend_api::{Backend, DIGEST_WORDS, Error, HashKind, LeafLayout, LeafSpec, MatrixShape};

use crate::reference::{self, P};
use crate::{Context as _, Failure, Gen, Outcome, ensure, ensure_words_eq, expect_error};

/// `keccak256("")` from CONVENTIONS.md.
pub const KECCAK256_EMPTY: &str = "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470";
/// `blake3("")` from CONVENTIONS.md.
pub const BLAKE3_EMPTY: &str = "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262";

fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// The column ranges checked for an `m`-column matrix: the full row, the two halves of a split at
/// `1` and at `m / 2`, and the inner range `[1, m - 1)`.
pub fn column_ranges(m: usize) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    out.push(0..m);
    for s in [1, m / 2] {
        if s > 0 && s < m && !out.contains(&(0..s)) {
            out.push(0..s);
            out.push(s..m);
        }
    }
    if m >= 3 {
        out.push(1..m - 1);
    }
    out
}

/// Compares two digest lists and names the first difference in hex.
///
/// # Errors
/// A [`Failure`] naming `what`, the index and both digests.
pub fn ensure_digests_eq(what: impl std::fmt::Display, expected: &[[u8; 32]], actual: &[[u8; 32]]) -> Outcome {
    ensure!(expected.len() == actual.len(), "{what}: expected {} digests, got {}", expected.len(), actual.len());
    if let Some(i) = (0..expected.len()).find(|&i| expected[i] != actual[i]) {
        return Err(Failure(format!("{what}: digest {i} is {}, expected {}", hex(&actual[i]), hex(&expected[i]))));
    }
    Ok(())
}

/// Preimages up to this many bytes are shown whole in a failure (one Keccak rate); longer ones by
/// their length and first bytes.
pub const SHOWN_PREIMAGE_BYTES: usize = 136;

/// The expected preimage of a leaf, for a failure message: its length and its bytes in hex (the
/// first [`SHOWN_PREIMAGE_BYTES`] when longer).
pub fn describe_preimage(bytes: &[u8]) -> String {
    if bytes.len() <= SHOWN_PREIMAGE_BYTES {
        format!("expected preimage ({} B): {}", bytes.len(), hex(bytes))
    } else {
        format!(
            "expected preimage ({} B), first {SHOWN_PREIMAGE_BYTES} B: {}...",
            bytes.len(),
            hex(&bytes[..SHOWN_PREIMAGE_BYTES])
        )
    }
}

/// Hashes the leaves of `host` (row-major, `cols` columns) on the backend and compares every
/// digest with the reference.
///
/// # Errors
/// A [`Failure`] naming the shape, hash, layout and range, the first leaf that differs, both
/// digests, and the preimage the reference hashed for that leaf.
pub fn check_leaves<B: Backend>(
    backend: &B,
    host: &[u64],
    cols: usize,
    kind: HashKind,
    layout: LeafLayout,
    range: Range<usize>,
) -> Outcome {
    let rows = host.len() / cols;
    let what = format!("hash_leaves {kind} {layout} {rows} x {cols} columns {range:?}");
    let shape = MatrixShape::new(rows, cols).ctx(&what)?;
    let spec = LeafSpec::new(kind, layout, range.clone()).ctx("leaf spec")?;
    let matrix = backend.upload(host).ctx(format_args!("{what}: upload"))?;
    let out = backend.hash_leaves(&matrix, shape, &spec).ctx(&what)?;
    let words = backend.download_vec(&out).ctx(format_args!("{what}: download"))?;
    let expected = reference::leaf_digests(host, cols, kind, layout, range.clone());
    let got = reference::words_to_digests(&words);
    ensure_digests_eq(&what, &expected, &got).map_err(|f| match (0..expected.len()).find(|&i| expected[i] != got[i]) {
        Some(i) => {
            let preimage = reference::leaf_preimage(host, cols, layout, range.clone(), i);
            Failure(format!("{f}; {}", describe_preimage(&preimage)))
        }
        None => f,
    })
}

/// Runs [`check_leaves`] over `rows x cols` shapes and every range of [`column_ranges`].
fn sweep<B: Backend>(
    backend: &B,
    name: &str,
    kind: HashKind,
    layout: LeafLayout,
    rows: &[usize],
    cols: &[usize],
) -> Outcome {
    let mut g = Gen::new(name);
    for &m in cols {
        for &r in rows {
            let host = g.matrix(r * m);
            for range in column_ranges(m) {
                check_leaves(backend, &host, m, kind, layout, range)?;
            }
        }
    }
    Ok(())
}

/// Column counts around Poseidon2's rate of 4 elements (see the module doc).
pub const POSEIDON2_COLS: [usize; 12] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 16];

/// Poseidon2 with the `rows` layout (the only one it defines), at every fill of the last block.
///
/// # Errors
/// The first digest that differs.
pub fn hash_leaves_poseidon2_rows<B: Backend>(backend: &B) -> Outcome {
    sweep(
        backend,
        "hash_leaves_poseidon2_rows",
        HashKind::Poseidon2,
        LeafLayout::Rows,
        &ROWS_LAYOUT_ROWS,
        &POSEIDON2_COLS,
    )
}

/// Row counts for the `rows` layout: one row, non-powers of two, and powers of two.
pub const ROWS_LAYOUT_ROWS: [usize; 7] = [1, 2, 3, 5, 7, 33, 64];
/// Row counts for `lambda-vm-pairs`: powers of two >= 2.
pub const PAIRS_LAYOUT_ROWS: [usize; 5] = [2, 4, 8, 32, 64];
/// Column counts around the hash block boundaries (see the module doc).
pub const BOUNDARY_COLS: [usize; 10] = [1, 2, 3, 8, 9, 16, 17, 18, 34, 35];

/// The first two elements of the Poseidon2 permutation of `[0, 1, ..., 7]`, from CONVENTIONS.md
/// (Plonky3's own test vector).
pub const POSEIDON2_OF_0_TO_7: [u64; 2] = [0x020c_f04a_1b21_4d14, 0x84e1_4aaa_eaca_ed25];

/// Known answers: `keccak256("")`, `blake3("")` and the Poseidon2 permutation of `[0, ..., 7]`
/// from CONVENTIONS.md, through the reference, so the implementations the suite trusts are
/// pinned; and Keccak-256 is not SHA3-256.
///
/// # Errors
/// A reference that does not produce the documented digest.
pub fn hash_known_answers<B: Backend>(_backend: &B) -> Outcome {
    let mut state = [0, 1, 2, 3, 4, 5, 6, 7];
    reference::poseidon2::permute(&mut state);
    ensure!(
        state[..2] == POSEIDON2_OF_0_TO_7,
        "poseidon2([0..8]) starts {:#x}, {:#x}; CONVENTIONS.md says {:#x}, {:#x}",
        state[0],
        state[1],
        POSEIDON2_OF_0_TO_7[0],
        POSEIDON2_OF_0_TO_7[1]
    );
    let k = hex(&reference::hash(HashKind::Keccak256, b""));
    ensure!(k == KECCAK256_EMPTY, "keccak256(\"\") is {k}, CONVENTIONS.md says {KECCAK256_EMPTY}");
    let b = hex(&reference::hash(HashKind::Blake3, b""));
    ensure!(b == BLAKE3_EMPTY, "blake3(\"\") is {b}, CONVENTIONS.md says {BLAKE3_EMPTY}");
    use sha3::Digest as _;
    let sha3_256 = hex(&sha3::Sha3_256::digest(b""));
    ensure!(sha3_256 != KECCAK256_EMPTY, "the reference's Keccak-256 must not be SHA3-256");
    Ok(())
}

/// Keccak-256 with the `rows` layout, at the rate boundaries.
///
/// # Errors
/// The first digest that differs.
pub fn hash_leaves_keccak_rows<B: Backend>(backend: &B) -> Outcome {
    sweep(backend, "hash_leaves_keccak_rows", HashKind::Keccak256, LeafLayout::Rows, &ROWS_LAYOUT_ROWS, &BOUNDARY_COLS)
}

/// BLAKE3 with the `rows` layout, at the block boundaries.
///
/// # Errors
/// The first digest that differs.
pub fn hash_leaves_blake3_rows<B: Backend>(backend: &B) -> Outcome {
    sweep(backend, "hash_leaves_blake3_rows", HashKind::Blake3, LeafLayout::Rows, &ROWS_LAYOUT_ROWS, &BOUNDARY_COLS)
}

/// Keccak-256 with the `lambda-vm-pairs` layout (big-endian, bit-reversed row pairs).
///
/// # Errors
/// The first digest that differs.
pub fn hash_leaves_keccak_pairs<B: Backend>(backend: &B) -> Outcome {
    sweep(
        backend,
        "hash_leaves_keccak_pairs",
        HashKind::Keccak256,
        LeafLayout::LambdaVmPairs,
        &PAIRS_LAYOUT_ROWS,
        &BOUNDARY_COLS,
    )
}

/// BLAKE3 with the `lambda-vm-pairs` layout.
///
/// # Errors
/// The first digest that differs.
pub fn hash_leaves_blake3_pairs<B: Backend>(backend: &B) -> Outcome {
    sweep(
        backend,
        "hash_leaves_blake3_pairs",
        HashKind::Blake3,
        LeafLayout::LambdaVmPairs,
        &PAIRS_LAYOUT_ROWS,
        &BOUNDARY_COLS,
    )
}

/// Rows of 1 KiB and more (64, 128, 129, 316, 612 columns): the BLAKE3 chunk tree and many Keccak
/// blocks, both hashes and layouts, full rows and split halves.
///
/// # Errors
/// The first digest that differs.
pub fn hash_leaves_wide_rows<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("hash_leaves_wide_rows");
    for m in [64, 128, 129, 316, 612] {
        for (layout, rows) in [(LeafLayout::Rows, [1usize, 5, 16]), (LeafLayout::LambdaVmPairs, [2, 8, 16])] {
            for r in rows {
                let host = g.matrix(r * m);
                for kind in HashKind::ALL.into_iter().filter(|k| k.supports(layout)) {
                    for range in [0..m, 0..m / 2, m / 2..m, 0..128.min(m - 1)] {
                        check_leaves(backend, &host, m, kind, layout, range)?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// Many leaves (more than one device thread block or work group): 1000 and 1025 rows with the
/// `rows` layout, 1024 and 4096 rows as pairs, 3 and 17 columns, both hashes.
///
/// # Errors
/// The first digest that differs.
pub fn hash_leaves_many_rows<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("hash_leaves_many_rows");
    for m in [3, 17] {
        for (layout, rows) in [(LeafLayout::Rows, [1000usize, 1025]), (LeafLayout::LambdaVmPairs, [1024, 4096])] {
            for r in rows {
                let host = g.matrix(r * m);
                for kind in HashKind::ALL.into_iter().filter(|k| k.supports(layout)) {
                    check_leaves(backend, &host, m, kind, layout, 0..m)?;
                    check_leaves(backend, &host, m, kind, layout, 1..m)?;
                }
            }
        }
    }
    Ok(())
}

/// Inputs made of non-canonical values only (`p`, `p + 1`, `p + k`, `u64::MAX`, ...) hash like
/// their canonical forms: compared with the reference, and with the backend's own digests of the
/// canonicalised matrix.
///
/// # Errors
/// The first digest that differs.
pub fn hash_leaves_non_canonical<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("hash_leaves_non_canonical");
    for (rows, cols) in [(1, 1), (4, 3), (8, 17), (16, 5)] {
        let host: Vec<u64> = (0..rows * cols)
            .map(|i| match i % 3 {
                0 => [P, P + 1, u64::MAX, u64::MAX - 1][g.below(4)],
                _ => P + g.u64() % (u64::MAX - P + 1),
            })
            .collect();
        let canonical: Vec<u64> = host.iter().map(|&x| reference::canon(x)).collect();
        for kind in HashKind::ALL {
            for layout in LeafLayout::ALL.into_iter().filter(|&l| kind.supports(l)) {
                if layout == LeafLayout::LambdaVmPairs && rows < 2 {
                    continue;
                }
                check_leaves(backend, &host, cols, kind, layout, 0..cols)?;
                let shape = MatrixShape::new(rows, cols).ctx("shape")?;
                let spec = LeafSpec::new(kind, layout, 0..cols).ctx("leaf spec")?;
                let a = backend.upload(&host).ctx("upload")?;
                let b = backend.upload(&canonical).ctx("upload")?;
                let da = backend.download_vec(&backend.hash_leaves(&a, shape, &spec).ctx("hash")?).ctx("download")?;
                let db = backend.download_vec(&backend.hash_leaves(&b, shape, &spec).ctx("hash")?).ctx("download")?;
                ensure_words_eq(
                    format!("{kind} {layout} {rows} x {cols}: non-canonical vs canonical input"),
                    &db,
                    &da,
                )?;
            }
        }
    }
    Ok(())
}

/// `hash_leaves_into` at a digest offset writes exactly its leaves there and nothing else: two
/// split trees' leaves written side by side into one buffer, between guard digests.
///
/// # Errors
/// A digest that differs, or a guard digest that changed.
pub fn hash_leaves_into_offset<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("hash_leaves_into_offset");
    for (rows, cols, split) in [(8, 5, 2), (5, 17, 9), (16, 130, 65), (1, 3, 1)] {
        let host = g.matrix(rows * cols);
        let shape = MatrixShape::new(rows, cols).ctx("shape")?;
        for kind in HashKind::ALL {
            for layout in LeafLayout::ALL.into_iter().filter(|&l| kind.supports(l)) {
                if layout == LeafLayout::LambdaVmPairs && (rows < 2 || !rows.is_power_of_two()) {
                    continue;
                }
                let leaves = layout.leaf_count(rows);
                let (first, second, guard) = (3usize, 3 + leaves + 1, 2usize);
                let total = second + leaves + guard;
                let init: Vec<u64> = (0..total * DIGEST_WORDS).map(|_| g.u64()).collect();
                let matrix = backend.upload(&host).ctx("upload")?;
                let mut out = backend.upload(&init).ctx("upload")?;
                let what = format!("hash_leaves_into {kind} {layout} {rows} x {cols} split at {split}");
                for (range, at) in [(0..split, first), (split..cols, second)] {
                    let spec = LeafSpec::new(kind, layout, range).ctx("leaf spec")?;
                    backend.hash_leaves_into(&matrix, shape, &spec, &mut out, at).ctx(&what)?;
                }
                let mut expected = reference::words_to_digests(&init);
                for (range, at) in [(0..split, first), (split..cols, second)] {
                    let d = reference::leaf_digests(&host, cols, kind, layout, range);
                    expected[at..at + leaves].copy_from_slice(&d);
                }
                let got = backend.download_vec(&out).ctx("download")?;
                ensure_digests_eq(&what, &expected, &reference::words_to_digests(&got))?;
            }
        }
    }
    Ok(())
}

/// From host memory: [`Backend::hash_leaves_from_host`] writes the reference's digests at a
/// digest offset between guard digests that must not change, for every hash and layout, one row,
/// leaf counts that are not powers of two, a Keccak rate boundary (17 columns), a BLAKE3 chunk
/// tree (129 columns), Poseidon2's partial last block, split column ranges, and values `>= p`.
/// Then its refusals, each before anything is written: a host matrix that does not hold the
/// shape ([`Error::LengthMismatch`]), an output too short for the leaves at the offset
/// ([`Error::OutOfBounds`]), and a column range past the row ([`Error::InvalidArgument`]).
///
/// # Errors
/// A digest that differs, a guard digest that changed, or a refusal missing or wrong.
pub fn hash_leaves_from_host<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("hash_leaves_from_host");
    for (rows, cols) in [(1, 1), (4, 3), (5, 17), (8, 129), (16, 6), (3, 13)] {
        let host: Vec<u64> =
            (0..rows * cols).map(|i| if i % 5 == 0 { P + g.u64() % (u64::MAX - P + 1) } else { g.u64() }).collect();
        let shape = MatrixShape::new(rows, cols).ctx("shape")?;
        for kind in HashKind::ALL {
            for layout in LeafLayout::ALL.into_iter().filter(|&l| kind.supports(l)) {
                if layout == LeafLayout::LambdaVmPairs && (rows < 2 || !rows.is_power_of_two()) {
                    continue;
                }
                for range in [0..cols, cols / 2..cols] {
                    if range.is_empty() {
                        continue;
                    }
                    let leaves = layout.leaf_count(rows);
                    let (at, guard) = (2usize, 3usize);
                    let init: Vec<u64> = (0..(at + leaves + guard) * DIGEST_WORDS).map(|_| g.u64()).collect();
                    let mut out = backend.upload(&init).ctx("upload")?;
                    let spec = LeafSpec::new(kind, layout, range.clone()).ctx("leaf spec")?;
                    let what = format!(
                        "hash_leaves_from_host {kind} {layout} {rows} x {cols} columns {range:?} at digest {at}"
                    );
                    backend.hash_leaves_from_host(&host, shape, &spec, &mut out, at).ctx(&what)?;
                    let mut expected = reference::words_to_digests(&init);
                    expected[at..at + leaves]
                        .copy_from_slice(&reference::leaf_digests(&host, cols, kind, layout, range));
                    let got = backend.download_vec(&out).ctx("download")?;
                    ensure_digests_eq(&what, &expected, &reference::words_to_digests(&got))?;
                }
            }
        }
    }

    let (rows, cols) = (6, 4);
    let host = g.matrix(rows * cols);
    let longer = [host.as_slice(), &[1]].concat();
    let init: Vec<u64> = (0..(rows + 2) * DIGEST_WORDS).map(|_| g.u64()).collect();
    let mut out = backend.upload(&init).ctx("upload")?;
    let shape = MatrixShape::new(rows, cols).ctx("shape")?;
    let spec = |range: Range<usize>| LeafSpec::new(HashKind::Keccak256, LeafLayout::Rows, range).ctx("leaf spec");
    let mismatch = |e: &Error| matches!(e, Error::LengthMismatch { .. });
    let out_of_bounds = |e: &Error| matches!(e, Error::OutOfBounds { .. });
    let invalid = |e: &Error| matches!(e, Error::InvalidArgument(_));
    type Case<'a> = (&'static str, &'a [u64], LeafSpec, usize, &'a dyn Fn(&Error) -> bool);
    let cases: [Case<'_>; 5] = [
        ("a host matrix of 23 elements as 6 x 4", &host[..23], spec(0..cols)?, 0, &mismatch),
        ("a host matrix of 25 elements as 6 x 4", &longer, spec(0..cols)?, 0, &mismatch),
        ("6 leaves at digest 3 of 8", &host, spec(0..cols)?, 3, &out_of_bounds),
        ("6 leaves at digest usize::MAX / 2", &host, spec(0..cols)?, usize::MAX / 2, &out_of_bounds),
        ("columns 2..5 of 4", &host, spec(2..5)?, 0, &invalid),
    ];
    for (what, matrix, spec, at, pred) in cases {
        let what = format!("hash_leaves_from_host: {what}");
        expect_error(backend.hash_leaves_from_host(matrix, shape, &spec, &mut out, at), &what, pred)?;
        ensure_words_eq(
            format!("{what}: output after the error"),
            &init,
            &backend.download_vec(&out).ctx("download")?,
        )?;
    }
    Ok(())
}

/// Bad specs and buffers are errors, and the output buffer is untouched: a
/// out-of-range column range, `lambda-vm-pairs` over 1 or a non-power-of-two row count, an output
/// too short (also through the offset), and a matrix buffer that does not hold the shape.
///
/// # Errors
/// A call that succeeds, fails with another error, or writes the output.
pub fn hash_leaves_errors<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("hash_leaves_errors");
    let (rows, cols) = (6, 4);
    let host = g.matrix(rows * cols);
    let matrix = backend.upload(&host).ctx("upload")?;
    let init: Vec<u64> = (0..(rows + 2) * DIGEST_WORDS).map(|_| g.u64()).collect();
    let mut out = backend.upload(&init).ctx("upload")?;
    let shape = MatrixShape::new(rows, cols).ctx("shape")?;
    let rows_spec = |range: Range<usize>| LeafSpec::new(HashKind::Keccak256, LeafLayout::Rows, range).ctx("leaf spec");
    let invalid = |e: &Error| matches!(e, Error::InvalidArgument(_));
    let out_of_bounds = |e: &Error| matches!(e, Error::OutOfBounds { .. });
    let mismatch = |e: &Error| matches!(e, Error::LengthMismatch { .. });
    type Case<'a> = (String, MatrixShape, LeafSpec, usize, &'a dyn Fn(&Error) -> bool);
    let pairs = |r: usize| -> Result<(MatrixShape, LeafSpec), Failure> {
        Ok((
            MatrixShape::new(r, rows * cols / r).ctx("shape")?,
            LeafSpec::new(HashKind::Blake3, LeafLayout::LambdaVmPairs, 0..rows * cols / r).ctx("leaf spec")?,
        ))
    };
    let (s3, p3) = pairs(3)?;
    let (s1, p1) = pairs(1)?;
    let cases: Vec<Case<'_>> = vec![
        ("column range 3..5 past 4 columns".into(), shape, rows_spec(3..5)?, 0, &invalid),
        ("lambda-vm-pairs over 3 rows".into(), s3, p3, 0, &invalid),
        ("lambda-vm-pairs over 1 row".into(), s1, p1, 0, &invalid),
        ("output of 8 digests at offset 3 for 6 leaves".into(), shape, rows_spec(0..cols)?, 3, &out_of_bounds),
        ("output at offset 9 past its end".into(), shape, rows_spec(0..cols)?, 9, &out_of_bounds),
        (
            "output at offset usize::MAX / 2 (overflows in words)".into(),
            shape,
            rows_spec(0..cols)?,
            usize::MAX / 2,
            &out_of_bounds,
        ),
        (
            "matrix of 24 elements as 5 x 4".into(),
            MatrixShape::new(5, 4).ctx("shape")?,
            rows_spec(0..cols)?,
            0,
            &mismatch,
        ),
        (
            "matrix of 24 elements as 6 x 5".into(),
            MatrixShape::new(6, 5).ctx("shape")?,
            rows_spec(0..cols)?,
            0,
            &mismatch,
        ),
    ];
    for (what, shape, spec, at, pred) in cases {
        let what = format!("hash_leaves_into: {what}");
        expect_error(backend.hash_leaves_into(&matrix, shape, &spec, &mut out, at), &what, pred)?;
        ensure_words_eq(
            format!("{what}: output after the error"),
            &init,
            &backend.download_vec(&out).ctx("download")?,
        )?;
    }
    // The allocating form rejects a spec before allocating.
    expect_error(
        backend.hash_leaves(&matrix, shape, &rows_spec(2..5)?),
        "hash_leaves with columns 2..5 of 4",
        invalid,
    )?;
    Ok(())
}
