//! Hostile copy batches: independent batches copy exactly, and any injected overlap is refused
//! with nothing moved and nothing held.

use backend_api::{Backend, CopyRange, Error};

use crate::{Context as _, Failure, Gen, Outcome, ensure, ensure_live, ensure_words_eq, reference};

/// Random copy batches on the backend: independent ones run and equal element-wise copies; the
/// same batch with one overlap injected (a destination inside another copy's destination, or
/// within one buffer inside a source, or a copy overlapping itself) is refused with
/// [`Error::OverlappingCopies`], the destination keeps every byte, and no memory is held.
///
/// 200 batches per target, buffers of `1..=300` elements: small enough that overlaps are easy to
/// place anywhere, large enough for multi-element copies in every segment.
///
/// # Errors
/// A wrong copy, an accepted overlap, another error, or a changed byte.
pub fn batched_copy_overlaps_refused<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("batched_copy_overlaps_refused");
    let mut refused = 0;
    for round in 0..400 {
        let within = round % 2 == 1;
        let dst_len = 1 + g.below(300);
        let src_len = if within { dst_len } else { 1 + g.below(300) };
        let src_host = g.matrix(src_len);
        let dst_host = g.matrix(dst_len);
        let mut copies = crate::copy::random_batch(&mut g, src_len, dst_len, within);
        let src = backend.upload(&src_host).ctx("upload src")?;
        let mut dst = backend.upload(&dst_host).ctx("upload dst")?;
        let baseline = backend.memory().live;
        let run = |dst: &mut B::Buffer, copies: &[CopyRange]| {
            if within { backend.batched_copy_within(dst, copies) } else { backend.batched_copy(&src, dst, copies) }
        };
        // The independent batch runs.
        let what = format!("round {round}, within {within}, {src_len} -> {dst_len}, {copies:?}");
        run(&mut dst, &copies).ctx(&what)?;
        let mut expected = dst_host.clone();
        reference::apply_copies(if within { &dst_host } else { &src_host }, &mut expected, &copies);
        let after = backend.download_vec(&dst).ctx("download")?;
        ensure_words_eq(&what, &expected, &after)?;
        // The same batch plus one overlap is refused, and nothing moves.
        let Some(bad) = inject_overlap(&mut g, &copies, src_len, dst_len, within) else { continue };
        let at = g.below(copies.len() + 1);
        copies.insert(at, bad);
        let what =
            format!("round {round}, within {within}, {src_len} -> {dst_len}, overlap {bad:?} at {at}: {copies:?}");
        match run(&mut dst, &copies) {
            Err(Error::OverlappingCopies { .. }) => {}
            Ok(()) => return Err(Failure(format!("{what}: accepted"))),
            Err(e) => return Err(Failure(format!("{what}: expected OverlappingCopies, got {e}"))),
        }
        ensure_words_eq(
            format_args!("{what}: destination after the refusal"),
            &after,
            &backend.download_vec(&dst).ctx("download")?,
        )?;
        ensure_live(backend, baseline, &what)?;
        refused += 1;
    }
    // Only a batch of empty copies in a buffer of 1 or 2 elements has nothing to overlap.
    ensure!(refused >= 350, "only {refused} of 400 batches had an overlap injected (a bug in the check)");
    Ok(())
}

/// A copy that overlaps the batch, in bounds, or `None` when the batch has nothing to overlap and
/// the buffer is too short for a self-overlapping copy.
fn inject_overlap(
    g: &mut Gen,
    copies: &[CopyRange],
    src_len: usize,
    dst_len: usize,
    within: bool,
) -> Option<CopyRange> {
    let victims: Vec<CopyRange> = copies.iter().copied().filter(|c| c.len > 0).collect();
    let kind = if victims.is_empty() { 2 } else { g.below(if within { 3 } else { 1 }) };
    match kind {
        // A destination starting inside a victim's destination (kind 0) or source (kind 1).
        0 | 1 => {
            let v = victims[g.below(victims.len())];
            let dst = if kind == 0 { v.dst } else { v.src } + g.below(v.len);
            let len = 1 + g.below((dst_len - dst).min(src_len).min(16));
            Some(CopyRange::new(g.below(src_len - len + 1), dst, len))
        }
        // A copy whose destination overlaps its own source (within one buffer only).
        _ if within && dst_len >= 3 => {
            let len = 2 + g.below((dst_len - 1).min(16) - 1);
            let shift = 1 + g.below(len - 1);
            if len + shift > dst_len {
                return None;
            }
            let src = g.below(dst_len - len - shift + 1);
            Some(CopyRange::new(src, src + shift, len))
        }
        _ => None,
    }
}
