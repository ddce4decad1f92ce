//! Checks of [`Backend::batched_copy`] and [`Backend::batched_copy_within`] against element-wise
//! copies, of [`Backend::bit_reversed_rows`] against rows picked one by one, and of the validation
//! every backend must apply before any byte moves.

use std::ops::Range;

use backend_api::{Backend, CopyRange, Error, MatrixShape};

use crate::{Context as _, Gen, Outcome, ensure_live, ensure_words_eq, expect_error, reference};

/// A random independent batch over buffers of `src_len` and `dst_len` elements.
///
/// The destination buffer is cut into random segments; each copy writes a prefix of its own
/// segment, so destinations never overlap. With `within`, source and destination are one buffer:
/// the segments are dealt to sources or destinations, and sources (which may overlap each other)
/// stay inside source segments. Zero-length copies are mixed in.
pub fn random_batch(g: &mut Gen, src_len: usize, dst_len: usize, within: bool) -> Vec<CopyRange> {
    // Segments [start, end) of the destination buffer.
    let mut cuts = vec![0, dst_len];
    for _ in 0..g.below(12) + 1 {
        cuts.push(g.below(dst_len + 1));
    }
    cuts.sort_unstable();
    cuts.dedup();
    let segments: Vec<(usize, usize)> = cuts.windows(2).map(|w| (w[0], w[1])).collect();
    let (dst_segs, src_segs): (Vec<_>, Vec<_>) = if within {
        let mut d = Vec::new();
        let mut s = Vec::new();
        for (i, seg) in segments.into_iter().enumerate() {
            if i % 2 == 0 { d.push(seg) } else { s.push(seg) }
        }
        (d, s)
    } else {
        (segments, vec![(0, src_len)])
    };
    let mut copies = Vec::new();
    for &(start, end) in &dst_segs {
        // Some segments stay untouched, so the check also sees bytes a batch must not write.
        if g.below(5) == 0 {
            continue;
        }
        let room = end - start;
        let fitting: Vec<(usize, usize)> = src_segs.iter().copied().filter(|s| s.1 - s.0 > 0).collect();
        if fitting.is_empty() {
            continue;
        }
        let (s0, s1) = fitting[g.below(fitting.len())];
        let len = g.below(room.min(s1 - s0) + 1);
        let dst = start + g.below(room - len + 1);
        let src = s0 + g.below(s1 - s0 - len + 1);
        copies.push(CopyRange::new(src, dst, len));
    }
    // A zero-length copy anywhere in bounds is allowed and moves nothing.
    copies.push(CopyRange::new(g.below(src_len + 1), g.below(dst_len + 1), 0));
    // Shuffle so the order in the batch is not the order of the buffer.
    for i in (1..copies.len()).rev() {
        copies.swap(i, g.below(i + 1));
    }
    copies
}

/// Random independent batches between two buffers, compared with element-wise copies.
///
/// # Errors
/// The first batch whose result differs.
pub fn batched_copy_random<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("batched_copy_random");
    for (round, (src_len, dst_len)) in
        [(1, 1), (10, 3), (3, 10), (100, 100), (1000, 257), (64, 4096)].into_iter().enumerate()
    {
        for _ in 0..6 {
            let src_host = g.matrix(src_len);
            let dst_host = g.matrix(dst_len);
            let copies = random_batch(&mut g, src_len, dst_len, false);
            let src = backend.upload(&src_host).ctx("upload src")?;
            let mut dst = backend.upload(&dst_host).ctx("upload dst")?;
            let what = format!("batched_copy round {round}, {src_len} -> {dst_len}, {copies:?}");
            backend.batched_copy(&src, &mut dst, &copies).ctx(&what)?;
            let mut expected = dst_host.clone();
            reference::apply_copies(&src_host, &mut expected, &copies);
            ensure_words_eq(&what, &expected, &backend.download_vec(&dst).ctx("download")?)?;
            ensure_words_eq(format!("{what}: source"), &src_host, &backend.download_vec(&src).ctx("download")?)?;
        }
    }
    Ok(())
}

/// Random independent batches within one buffer, compared with element-wise copies.
///
/// # Errors
/// The first batch whose result differs.
pub fn batched_copy_within_random<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("batched_copy_within_random");
    for len in [1, 2, 7, 100, 1000, 4096] {
        for _ in 0..6 {
            let host = g.matrix(len);
            let copies = random_batch(&mut g, len, len, true);
            let mut buf = backend.upload(&host).ctx("upload")?;
            let what = format!("batched_copy_within over {len} elements, {copies:?}");
            backend.batched_copy_within(&mut buf, &copies).ctx(&what)?;
            let mut expected = host.clone();
            reference::apply_copies(&host, &mut expected, &copies);
            ensure_words_eq(&what, &expected, &backend.download_vec(&buf).ctx("download")?)?;
        }
    }
    Ok(())
}

/// Batches that break independence are [`Error::OverlappingCopies`] and move nothing: overlapping
/// destinations, and (within one buffer) a destination over its own or another copy's source.
/// Overlapping sources between buffers are legal and must work.
///
/// # Errors
/// A batch accepted, rejected with another error, or a destination byte changed.
pub fn batched_copy_rejects_overlap<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("batched_copy_rejects_overlap");
    let n = 64;
    let src_host = g.matrix(n);
    let dst_host = g.matrix(n);
    let src = backend.upload(&src_host).ctx("upload")?;
    let mut dst = backend.upload(&dst_host).ctx("upload")?;
    let baseline = backend.memory().live;
    let overlapping = |e: &Error| matches!(e, Error::OverlappingCopies { .. });
    let between: [&[CopyRange]; 4] = [
        &[CopyRange::new(0, 10, 8), CopyRange::new(20, 17, 4)],
        &[CopyRange::new(0, 0, 64), CopyRange::new(0, 63, 1)],
        &[CopyRange::new(1, 40, 2), CopyRange::new(5, 2, 3), CopyRange::new(9, 40, 1)],
        &[CopyRange::new(30, 5, 10), CopyRange::new(0, 50, 4), CopyRange::new(40, 0, 6)],
    ];
    for batch in between {
        let what = format!("batched_copy {batch:?}");
        expect_error(backend.batched_copy(&src, &mut dst, batch), &what, overlapping)?;
        ensure_words_eq(
            format!("{what}: destination after rejection"),
            &dst_host,
            &backend.download_vec(&dst).ctx("download")?,
        )?;
        ensure_live(backend, baseline, &what)?;
    }
    let within: [&[CopyRange]; 5] = [
        // Destination over its own source.
        &[CopyRange::new(0, 4, 8)],
        // Destination over another copy's source.
        &[CopyRange::new(0, 32, 8), CopyRange::new(36, 50, 4)],
        // Two destinations overlapping.
        &[CopyRange::new(0, 40, 8), CopyRange::new(10, 47, 2)],
        // Source of one is the destination of another, exactly.
        &[CopyRange::new(0, 20, 5), CopyRange::new(20, 40, 5)],
        // Many legal copies and one bad pair at the end.
        &[CopyRange::new(0, 10, 2), CopyRange::new(2, 12, 2), CopyRange::new(4, 14, 2), CopyRange::new(60, 15, 1)],
    ];
    for batch in within {
        let what = format!("batched_copy_within {batch:?}");
        let mut buf = backend.upload(&src_host).ctx("upload")?;
        expect_error(backend.batched_copy_within(&mut buf, batch), &what, overlapping)?;
        ensure_words_eq(
            format!("{what}: buffer after rejection"),
            &src_host,
            &backend.download_vec(&buf).ctx("download")?,
        )?;
    }
    // Sources may overlap each other: this batch is independent and must succeed.
    let legal = [CopyRange::new(0, 0, 10), CopyRange::new(5, 10, 10), CopyRange::new(5, 30, 3)];
    backend.batched_copy(&src, &mut dst, &legal).ctx("batched_copy with overlapping sources")?;
    let mut expected = dst_host.clone();
    reference::apply_copies(&src_host, &mut expected, &legal);
    ensure_words_eq("batched_copy with overlapping sources", &expected, &backend.download_vec(&dst).ctx("download")?)
}

/// Ranges past a buffer's end (including offsets that overflow) are [`Error::OutOfBounds`], and
/// nothing moves.
///
/// # Errors
/// A batch accepted, rejected with another error, or a byte changed.
pub fn batched_copy_rejects_out_of_bounds<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("batched_copy_rejects_out_of_bounds");
    let (sn, dn) = (40, 24);
    let src_host = g.matrix(sn);
    let dst_host = g.matrix(dn);
    let src = backend.upload(&src_host).ctx("upload")?;
    let mut dst = backend.upload(&dst_host).ctx("upload")?;
    let oob = |e: &Error| matches!(e, Error::OutOfBounds { .. });
    let batches: [&[CopyRange]; 5] = [
        &[CopyRange::new(0, 0, 4), CopyRange::new(38, 0, 3)],
        &[CopyRange::new(0, 22, 3)],
        &[CopyRange::new(0, 24, 1)],
        &[CopyRange::new(usize::MAX, 0, 2)],
        &[CopyRange::new(0, usize::MAX - 1, 4)],
    ];
    for batch in batches {
        let what = format!("batched_copy {sn} -> {dn} {batch:?}");
        expect_error(backend.batched_copy(&src, &mut dst, batch), &what, oob)?;
        ensure_words_eq(format!("{what}: destination"), &dst_host, &backend.download_vec(&dst).ctx("download")?)?;
    }
    // Within one buffer of 24 elements; each batch is otherwise independent.
    let within: [&[CopyRange]; 5] = [
        &[CopyRange::new(0, 10, 4), CopyRange::new(22, 5, 3)],
        &[CopyRange::new(0, 22, 3)],
        &[CopyRange::new(0, 24, 1)],
        &[CopyRange::new(usize::MAX, 0, 2)],
        &[CopyRange::new(0, usize::MAX - 1, 4)],
    ];
    for batch in within {
        let what = format!("batched_copy_within {dn} {batch:?}");
        let mut buf = backend.upload(&dst_host).ctx("upload")?;
        expect_error(backend.batched_copy_within(&mut buf, batch), &what, oob)?;
        ensure_words_eq(format!("{what}: buffer"), &dst_host, &backend.download_vec(&buf).ctx("download")?)?;
    }
    Ok(())
}

/// [`Backend::bit_reversed_rows`] over edge and larger shapes (one row; one column; rows shorter
/// and longer than a warp; 2^20 rows), whole, empty, one-row and random row ranges, at random
/// offsets in both buffers: each copied row equals the matrix's row at the bit-reversed index,
/// every other destination element and the source keep their values.
///
/// # Errors
/// The first call whose result differs.
pub fn bit_reversed_rows_random<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("bit_reversed_rows_random");
    let baseline = backend.memory().live;
    // The last two are larger than a GPU backend's grid (a thread per row of one column; a warp
    // per row of 33), so its loops stride; only their whole range and a tail are copied, since
    // the default implementation lists one range per row.
    let shapes = [
        (1, 1),
        (1, 5),
        (2, 1),
        (8, 3),
        (16, 4),
        (64, 31),
        (32, 32),
        (128, 33),
        (1024, 7),
        (1 << 18, 1),
        (1 << 15, 33),
    ];
    for (rows, cols) in shapes {
        let shape = MatrixShape::new(rows, cols).ctx("shape")?;
        let bits = rows.trailing_zeros();
        let (a, b) = (g.below(rows + 1), g.below(rows + 1));
        let ranges: Vec<Range<usize>> = if rows > 1024 {
            vec![0..rows, rows - a.min(1000)..rows]
        } else {
            vec![0..rows, 0..0, rows - 1..rows, a.min(b)..a.max(b), rows / 2..rows]
        };
        for range in ranges {
            let (src_at, dst_at, slack) = (g.below(5), g.below(5), g.below(3));
            let src_host = g.matrix(src_at + shape.len() + slack);
            let dst_host = g.matrix(dst_at + range.len() * cols + slack);
            let src = backend.upload(&src_host).ctx("upload source")?;
            let mut dst = backend.upload(&dst_host).ctx("upload destination")?;
            let what = format!("bit_reversed_rows of rows {range:?} of {shape} at {src_at} into {dst_at}");
            backend.bit_reversed_rows(&src, src_at, shape, range.clone(), &mut dst, dst_at).ctx(&what)?;
            let mut expected = dst_host.clone();
            for (i, r) in range.clone().enumerate() {
                let from = src_at + reference::bit_reverse(r, bits) * cols;
                expected[dst_at + i * cols..dst_at + (i + 1) * cols].copy_from_slice(&src_host[from..from + cols]);
            }
            ensure_words_eq(&what, &expected, &backend.download_vec(&dst).ctx("download")?)?;
            ensure_words_eq(format!("{what}: source"), &src_host, &backend.download_vec(&src).ctx("download")?)?;
        }
    }
    ensure_live(backend, baseline, "after bit_reversed_rows_random")
}

/// A refused call of [`bit_reversed_rows_errors`]: shape, rows, source and destination offsets,
/// and the refusal it must get.
type BitReversedCase<'a> = (MatrixShape, Range<usize>, usize, usize, &'a dyn Fn(&Error) -> bool);

/// Every refusal of [`Backend::bit_reversed_rows`] ([`backend_api::validate::bit_reversed_rows`]):
/// rows not a power of two, a row range reversed or past the matrix, the matrix past the source's
/// end, the rows past the destination's end (also by an overflowing offset); the destination keeps
/// its bytes.
///
/// # Errors
/// A call accepted, refused with another error, or a destination byte changed.
pub fn bit_reversed_rows_errors<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("bit_reversed_rows_errors");
    let (src_host, dst_host) = (g.matrix(48), g.matrix(24));
    let src = backend.upload(&src_host).ctx("upload")?;
    let mut dst = backend.upload(&dst_host).ctx("upload")?;
    let shape = |rows, cols| MatrixShape::new(rows, cols).expect("a non-empty shape");
    let bounds = |want: &'static str| move |e: &Error| matches!(e, Error::OutOfBounds { what, .. } if *what == want);
    #[allow(clippy::reversed_empty_ranges)]
    let cases: [BitReversedCase<'_>; 8] = [
        (shape(6, 4), 0..1, 0, 0, &|e| matches!(e, Error::InvalidShape(_))),
        (shape(3, 1), 0..1, 0, 0, &|e| matches!(e, Error::InvalidShape(_))),
        (shape(8, 3), 0..9, 0, 0, &bounds("bit_reversed_rows rows")),
        (shape(8, 3), 5..4, 0, 0, &bounds("bit_reversed_rows rows")),
        (shape(16, 3), 0..1, 1, 0, &bounds("bit_reversed_rows source")),
        (shape(8, 3), 0..1, usize::MAX, 0, &bounds("bit_reversed_rows source")),
        (shape(8, 3), 0..8, 0, 1, &bounds("bit_reversed_rows destination")),
        (shape(8, 3), 0..2, 0, usize::MAX - 2, &bounds("bit_reversed_rows destination")),
    ];
    for (shape, rows, src_at, dst_at, refusal) in cases {
        let what = format!("bit_reversed_rows of rows {rows:?} of {shape} at {src_at} into {dst_at}");
        expect_error(backend.bit_reversed_rows(&src, src_at, shape, rows, &mut dst, dst_at), &what, refusal)?;
        ensure_words_eq(format!("{what}: destination"), &dst_host, &backend.download_vec(&dst).ctx("download")?)?;
    }
    Ok(())
}
