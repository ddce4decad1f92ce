//! Checks of [`Backend::transpose_in_place`] against the index-by-index reference.
//!
//! Small scratch caps of `(cols + 1) * 8 * k` bytes force many blocks of `R = 2^floor(log2 k)`
//! rows, tails (`rows` not a multiple of `R`), long run cycles and the chunked paths of the plan.

use std::ops::Range;

use backend_api::{
    Backend, DEFAULT_SCRATCH_CAP, DIGEST_WORDS, Error, HashKind, LeafJob, LeafLayout, LeafSpec, MatrixShape,
};

use crate::{Context as _, Gen, Outcome, ensure, ensure_live, ensure_words_eq, expect_error, reference};

/// Bytes a backend may allocate during a transpose beyond the scratch cap, for plan metadata
/// (CONVENTIONS.md: "at most the cap, plus a few KiB of metadata").
pub const METADATA_SLACK_BYTES: usize = 8 << 10;

/// The cap that gives blocks of `k` rows (rounded down to a power of two) for `cols` columns.
pub fn cap_for(cols: usize, k: usize) -> usize {
    (cols + 1) * 8 * k
}

/// Uploads a random `rows x cols` matrix, transposes it in place under `cap`, and compares the
/// buffer with the reference; also checks that the scratch stays within the cap and is freed.
///
/// # Errors
/// A [`crate::Failure`] naming the shape and cap.
pub fn check_transpose<B: Backend>(backend: &B, g: &mut Gen, rows: usize, cols: usize, cap: usize) -> Outcome {
    let what = format!("transpose {rows} x {cols} under a {cap} B cap");
    let shape = MatrixShape::new(rows, cols).ctx(&what)?;
    let host = g.matrix(rows * cols);
    let mut buf = backend.upload(&host).ctx(format_args!("{what}: upload"))?;
    let baseline = backend.memory().live;
    backend.tracker().reset_peak();
    backend.transpose_in_place(&mut buf, shape, cap).ctx(&what)?;
    ensure_scratch_within_cap(backend, baseline, cap, &what)?;
    let got = backend.download_vec(&buf).ctx(format_args!("{what}: download"))?;
    ensure_words_eq(&what, &reference::transpose(&host, rows, cols), &got)
}

/// After a transpose under `cap` that started with `baseline` bytes live and the peak reset:
/// waits for the device, then checks that the peak beyond the baseline stayed within the cap (plus
/// [`METADATA_SLACK_BYTES`]) and that the scratch was freed.
///
/// # Errors
/// A [`crate::Failure`] naming `what` and the bytes.
fn ensure_scratch_within_cap<B: Backend>(backend: &B, baseline: usize, cap: usize, what: &str) -> Outcome {
    backend.synchronize().ctx(format_args!("{what}: synchronize"))?;
    let extra = backend.memory().peak.saturating_sub(baseline);
    ensure!(
        extra <= cap + METADATA_SLACK_BYTES,
        "{what}: {extra} B allocated at peak beyond what was live before, over the cap (+{METADATA_SLACK_BYTES} B metadata slack)"
    );
    ensure_live(backend, baseline, format_args!("{what}: scratch not freed"))
}

/// One row, one column, and tiny matrices, under tiny and default caps.
///
/// # Errors
/// The first shape that does not match the reference.
pub fn transpose_edge_shapes<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("transpose_edge_shapes");
    let shapes = [(1, 1), (1, 2), (1, 7), (1, 316), (2, 1), (9, 1), (1000, 1), (2, 2), (2, 3), (3, 2), (4, 4), (5, 3)];
    for (rows, cols) in shapes {
        for cap in [cap_for(cols, 1), cap_for(cols, 2), cap_for(cols, 3), DEFAULT_SCRATCH_CAP] {
            check_transpose(backend, &mut g, rows, cols, cap)?;
        }
    }
    Ok(())
}

/// Row counts that are not a multiple of the block, and many blocks, under caps of `k` rows.
///
/// # Errors
/// The first shape that does not match the reference.
pub fn transpose_block_tails<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("transpose_block_tails");
    for rows in [3, 5, 7, 8, 13, 16, 17, 31, 64, 100, 129] {
        for cols in [2, 3, 5, 8] {
            for k in [1, 2, 3, 4, 5, 8, 16] {
                check_transpose(backend, &mut g, rows, cols, cap_for(cols, k))?;
            }
        }
    }
    // A cap between two block sizes (not a multiple of a row): R rounds down.
    check_transpose(backend, &mut g, 77, 6, cap_for(6, 5) + 13)?;
    Ok(())
}

/// The production column counts (3, 316, 436, 612) at modest row counts, small and default caps,
/// and up to 1024 rows with realistic run lengths.
///
/// # Errors
/// The first shape that does not match the reference.
pub fn transpose_wide_columns<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("transpose_wide_columns");
    for cols in [3, 316, 436, 612] {
        for rows in [37, 64] {
            for cap in [cap_for(cols, 1), cap_for(cols, 4), cap_for(cols, 16), DEFAULT_SCRATCH_CAP] {
                check_transpose(backend, &mut g, rows, cols, cap)?;
            }
        }
    }
    // Larger: many blocks of realistic run lengths, with and without a tail.
    for (rows, cols, k) in [(1024, 316, 64), (1000, 436, 128), (520, 612, 32), (4096, 3, 256)] {
        check_transpose(backend, &mut g, rows, cols, cap_for(cols, k))?;
    }
    Ok(())
}

/// Cubic-extension tables: `m` ext3 columns are `3m` base columns (CONVENTIONS.md), so the result
/// is the base-column column-major matrix; component `k` of ext3 column `j` is column `3j + k`.
///
/// # Errors
/// The first shape that does not match the reference.
pub fn transpose_ext3<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("transpose_ext3");
    for m in [1, 2, 5, 11] {
        let cols = 3 * m;
        for rows in [1, 6, 16, 50] {
            for k in [1, 4] {
                check_transpose(backend, &mut g, rows, cols, cap_for(cols, k))?;
            }
        }
    }
    Ok(())
}

/// The default 256 MiB cap, where the whole matrix fits one block.
///
/// # Errors
/// The first shape that does not match the reference.
pub fn transpose_default_cap<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("transpose_default_cap");
    for (rows, cols) in [(256, 7), (300, 9), (1024, 3), (64, 316)] {
        check_transpose(backend, &mut g, rows, cols, DEFAULT_SCRATCH_CAP)?;
    }
    Ok(())
}

/// Peak scratch never exceeds the cap, for caps from one row to the whole matrix.
///
/// # Errors
/// The first cap the backend allocates past, or a wrong result.
pub fn transpose_scratch_within_cap<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("transpose_scratch_within_cap");
    // 48 KiB of matrix, so a scratch as large as the matrix is caught despite the metadata slack.
    let (rows, cols) = (600, 10);
    for k in [1, 2, 3, 5, 8, 64, 256, 599, 600, 1024] {
        check_transpose(backend, &mut g, rows, cols, cap_for(cols, k))?;
        // One byte short of the next block size up: the block stays at the power of two below.
        check_transpose(backend, &mut g, rows, cols, cap_for(cols, 2 * k.next_power_of_two()) - 1)?;
    }
    Ok(())
}

/// A cap below one run is [`Error::ScratchTooSmall`]; a buffer that does not hold the shape is
/// [`Error::LengthMismatch`]; in both cases nothing moves and nothing stays allocated.
///
/// # Errors
/// A call that succeeds or fails with another error, or bytes that moved.
pub fn transpose_errors<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("transpose_errors");
    let (rows, cols) = (12, 5);
    let shape = MatrixShape::new(rows, cols).ctx("shape")?;
    let host = g.matrix(rows * cols);
    let mut buf = backend.upload(&host).ctx("upload")?;
    let baseline = backend.memory().live;
    for cap in [0, 1, cap_for(cols, 1) - 1] {
        let what = format!("transpose {shape} under a {cap} B cap");
        let err = expect_error(backend.transpose_in_place(&mut buf, shape, cap), &what, |e| {
            matches!(e, Error::ScratchTooSmall { .. })
        })?;
        if let Error::ScratchTooSmall { cap: c, cols: n, min } = err {
            ensure!(
                c == cap && n == cols && min == cap_for(cols, 1),
                "{what}: error reports cap {c}, cols {n}, min {min}; expected {cap}, {cols}, {}",
                cap_for(cols, 1)
            );
        }
        ensure_live(backend, baseline, &what)?;
    }
    for (r, c) in [(rows + 1, cols), (rows, cols - 1), (1, 1), (rows * cols + 1, 1)] {
        let wrong = MatrixShape::new(r, c).ctx("shape")?;
        let what = format!("transpose of a {}-element buffer as {wrong}", host.len());
        expect_error(backend.transpose_in_place(&mut buf, wrong, DEFAULT_SCRATCH_CAP), &what, |e| {
            matches!(e, Error::LengthMismatch { .. })
        })?;
        ensure_live(backend, baseline, &what)?;
    }
    let got = backend.download_vec(&buf).ctx("download")?;
    ensure_words_eq("buffer after rejected transposes", &host, &got)
}

/// One tree of a [`check_leaves_then_transpose`] call: hash, layout, columns, and the digest index
/// its first leaf goes to in its output.
pub type TreeCase = (HashKind, LeafLayout, Range<usize>, usize);

/// Digests a [`check_leaves_then_transpose`] output keeps past the leaves, to see that nothing is
/// written beyond them.
const GUARD_DIGESTS: usize = 2;

/// Uploads a random `rows x cols` matrix and runs [`Backend::hash_leaves_then_transpose`] under
/// `cap` with one output per tree, each pre-filled with a pattern. Then checks every tree's digests
/// against the reference hashed from the row-major matrix, the digests before and after them
/// against the pattern, the buffer against the index-by-index transpose, and the scratch against
/// the cap.
///
/// # Errors
/// A [`crate::Failure`] naming the shape, the cap and the tree.
pub fn check_leaves_then_transpose<B: Backend>(
    backend: &B,
    g: &mut Gen,
    rows: usize,
    cols: usize,
    cap: usize,
    trees: &[TreeCase],
) -> Outcome {
    let what = format!("hash_leaves_then_transpose {rows} x {cols} under a {cap} B cap, trees {trees:?}");
    let shape = MatrixShape::new(rows, cols).ctx(&what)?;
    let host = g.matrix(rows * cols);
    let mut buf = backend.upload(&host).ctx(format_args!("{what}: upload"))?;
    let mut specs = Vec::new();
    let mut outs = Vec::new();
    let mut patterns = Vec::new();
    for (kind, layout, range, first) in trees {
        let spec = LeafSpec::new(*kind, *layout, range.clone()).ctx("leaf spec")?;
        let leaves = layout.leaf_count(rows);
        let pattern: Vec<u64> = (0..(first + leaves + GUARD_DIGESTS) * DIGEST_WORDS).map(|_| g.u64()).collect();
        outs.push(backend.upload(&pattern).ctx(format_args!("{what}: upload an output"))?);
        patterns.push(pattern);
        specs.push(spec);
    }
    let baseline = backend.memory().live;
    backend.tracker().reset_peak();
    let mut jobs: Vec<LeafJob<'_, B::Buffer>> = specs
        .iter()
        .zip(outs.iter_mut())
        .zip(trees)
        .map(|((spec, out), t)| LeafJob { spec, out, out_digest: t.3 })
        .collect();
    backend.hash_leaves_then_transpose(&mut buf, shape, &mut jobs, cap).ctx(&what)?;
    ensure_scratch_within_cap(backend, baseline, cap, &what)?;
    for (t, ((kind, layout, range, first), (out, pattern))) in trees.iter().zip(outs.iter().zip(&patterns)).enumerate()
    {
        let words = backend.download_vec(out).ctx(format_args!("{what}: download tree {t}"))?;
        let digests = reference::leaf_digests(&host, cols, *kind, *layout, range.clone());
        let mut expected = pattern.clone();
        let start = first * DIGEST_WORDS;
        expected[start..start + digests.len() * DIGEST_WORDS].copy_from_slice(&reference::digests_to_words(&digests));
        ensure_words_eq(
            format_args!("{what}: tree {t} ({kind} {layout} {range:?} from digest {first})"),
            &expected,
            &words,
        )?;
    }
    let got = backend.download_vec(&buf).ctx(format_args!("{what}: download"))?;
    ensure_words_eq(format_args!("{what}: the matrix"), &reference::transpose(&host, rows, cols), &got)
}

/// [`Backend::hash_leaves_then_transpose`] against the references: many blocks of rows (small caps,
/// where a backend may hash each block beside the transpose's block pass; 32 blocks, where it may
/// hash several first; each shape twice, so that a backend caching its plan runs it cold and
/// warm), one block (the default cap), tails, one row and one column, one to three trees of
/// either hash (whole rows and a split at `cols / 2`, at digest offsets), rows long enough for
/// several Keccak blocks and BLAKE3 chunks; and the calls a fused pass cannot take whole: a
/// `lambda-vm-pairs` tree, two hashes at once, and no tree at all.
///
/// # Errors
/// The first case that differs from the references.
pub fn leaves_then_transpose<B: Backend>(backend: &B) -> Outcome {
    use HashKind::{Blake3, Keccak256, Poseidon2};
    use LeafLayout::{LambdaVmPairs, Rows};
    let mut g = Gen::new("leaves_then_transpose");
    for kind in [Keccak256, Blake3, Poseidon2] {
        // (rows, cols, rows per block or 0 for the default cap)
        for (rows, cols, k) in [
            (64, 5, 8),
            (256, 5, 8),
            (256, 35, 32),
            (96, 18, 16),
            (64, 316, 16),
            (33, 9, 8),
            (1, 7, 1),
            (9, 1, 2),
            (40, 3, 0),
        ] {
            let cap = if k == 0 { DEFAULT_SCRATCH_CAP } else { cap_for(cols, k) };
            let half = cols.div_ceil(2);
            check_leaves_then_transpose(backend, &mut g, rows, cols, cap, &[(kind, Rows, 0..cols, 0)])?;
            if cols >= 2 {
                let split = [(kind, Rows, 0..half, 1), (kind, Rows, half..cols, 0), (kind, Rows, 0..cols, 3)];
                check_leaves_then_transpose(backend, &mut g, rows, cols, cap, &split)?;
            }
        }
    }
    let (rows, cols, cap) = (64, 9, cap_for(9, 8));
    check_leaves_then_transpose(backend, &mut g, rows, cols, cap, &[(Keccak256, LambdaVmPairs, 0..cols, 0)])?;
    let pairs_and_rows = [(Blake3, Rows, 0..cols, 0), (Keccak256, LambdaVmPairs, 2..cols, 1)];
    check_leaves_then_transpose(backend, &mut g, rows, cols, cap, &pairs_and_rows)?;
    check_leaves_then_transpose(
        backend,
        &mut g,
        rows,
        cols,
        cap,
        &[(Keccak256, Rows, 0..cols, 0), (Blake3, Rows, 0..4, 0)],
    )?;
    check_leaves_then_transpose(backend, &mut g, rows, cols, cap, &[])
}

/// A refused [`Backend::hash_leaves_then_transpose`] changes nothing: a cap below one run, an
/// output too short for its tree (the second of two), a column range past the matrix and a buffer
/// that does not hold the shape leave the matrix and every output as they were, and nothing
/// allocated.
///
/// # Errors
/// A call that succeeds or fails with another error, or bytes that changed.
pub fn leaves_then_transpose_errors<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("leaves_then_transpose_errors");
    let (rows, cols) = (32, 6);
    let shape = MatrixShape::new(rows, cols).ctx("shape")?;
    let host = g.matrix(rows * cols);
    let mut buf = backend.upload(&host).ctx("upload")?;
    let whole = LeafSpec::new(HashKind::Keccak256, LeafLayout::Rows, 0..cols).ctx("spec")?;
    let past = LeafSpec::new(HashKind::Blake3, LeafLayout::Rows, 2..cols + 1).ctx("spec")?;
    let full = g.matrix(rows * DIGEST_WORDS);
    let short = g.matrix((rows - 1) * DIGEST_WORDS);
    let mut out_a = backend.upload(&full).ctx("upload")?;
    let mut out_b = backend.upload(&short).ctx("upload")?;
    let full_b = g.matrix(rows * DIGEST_WORDS);
    let mut out_c = backend.upload(&full_b).ctx("upload")?;
    let mut short_buf = backend.upload(&host[..rows * cols - 1]).ctx("upload")?;
    let baseline = backend.memory().live;
    type Case<'a> = (&'a str, &'a LeafSpec, bool, usize, fn(&Error) -> bool);
    let cases: [Case<'_>; 3] = [
        ("a cap below one run", &whole, false, cap_for(cols, 1) - 1, |e| matches!(e, Error::ScratchTooSmall { .. })),
        ("a second output one digest short", &whole, true, DEFAULT_SCRATCH_CAP, |e| {
            matches!(e, Error::OutOfBounds { .. })
        }),
        ("a column range past the matrix", &past, false, DEFAULT_SCRATCH_CAP, |e| {
            matches!(e, Error::InvalidArgument(_))
        }),
    ];
    for (what, second, short_second, cap, pred) in cases {
        let what = format!("hash_leaves_then_transpose {shape} with {what}");
        let (out, before) = if short_second { (&mut out_b, &short) } else { (&mut out_c, &full_b) };
        let mut jobs =
            [LeafJob { spec: &whole, out: &mut out_a, out_digest: 0 }, LeafJob { spec: second, out, out_digest: 0 }];
        expect_error(backend.hash_leaves_then_transpose(&mut buf, shape, &mut jobs, cap), &what, pred)?;
        ensure_live(backend, baseline, format_args!("{what}: memory left allocated"))?;
        ensure_words_eq(format_args!("{what}: the matrix"), &host, &backend.download_vec(&buf).ctx("download")?)?;
        let [first, second] = &jobs;
        ensure_words_eq(
            format_args!("{what}: the first output"),
            &full,
            &backend.download_vec(first.out).ctx("download")?,
        )?;
        ensure_words_eq(
            format_args!("{what}: the second output"),
            before,
            &backend.download_vec(second.out).ctx("download")?,
        )?;
    }
    let what = format!("hash_leaves_then_transpose {shape} on a buffer one element short");
    let mut jobs = [LeafJob { spec: &whole, out: &mut out_a, out_digest: 0 }];
    expect_error(
        backend.hash_leaves_then_transpose(&mut short_buf, shape, &mut jobs, DEFAULT_SCRATCH_CAP),
        &what,
        |e| matches!(e, Error::LengthMismatch { .. }),
    )?;
    ensure_words_eq(format_args!("{what}: the output"), &full, &backend.download_vec(&out_a).ctx("download")?)?;
    // Digest offsets whose element index, or whose byte address, overflows: refused before any
    // address is made from them (a wrapped product would point into another buffer).
    for out_digest in [usize::MAX, usize::MAX / DIGEST_WORDS, usize::MAX / (DIGEST_WORDS * 8) + 1, rows + 1] {
        let what = format!("hash_leaves_then_transpose {shape} with out_digest {out_digest}");
        let mut jobs = [LeafJob { spec: &whole, out: &mut out_a, out_digest }];
        expect_error(
            backend.hash_leaves_then_transpose(&mut buf, shape, &mut jobs, DEFAULT_SCRATCH_CAP),
            &what,
            |e| matches!(e, Error::OutOfBounds { .. }),
        )?;
        ensure_words_eq(format_args!("{what}: the matrix"), &host, &backend.download_vec(&buf).ctx("download")?)?;
        ensure_words_eq(format_args!("{what}: the output"), &full, &backend.download_vec(&out_a).ctx("download")?)?;
    }
    ensure_live(backend, baseline, format_args!("{what}: memory left allocated"))
}
