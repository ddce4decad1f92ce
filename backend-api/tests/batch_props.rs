//! Property tests of copy-batch validation ([`validate_batch`]).
//!
//! Three properties, each over both targets (two buffers, and one buffer):
//!
//! 1. **Independent batches pass, and order does not matter.** A batch built to be independent is
//!    accepted, and running it copy by copy in batch order, in reverse order, and as "read every
//!    source, then write every destination" gives the same buffer — the freedom every backend
//!    takes when it runs a batch's copies in parallel. Bytes outside the destinations keep their
//!    values.
//! 2. **A batch with an injected overlap is always refused** with
//!    [`Error::OverlappingCopies`], and the two copies the error names really do overlap.
//! 3. **Arbitrary batches: validation agrees with the pairwise definition** (quadratic, written
//!    here from the definition in `copy.rs`), and refusals are `OverlappingCopies` exactly when a
//!    pair overlaps and `OutOfBounds` exactly when a range passes its buffer's end.
//!
//! # Generated ranges, and why
//!
//! - **Copy lengths `0..=12`, up to 8 copies, gaps `0..=6` between destination segments.** Small
//!   numbers make edges frequent: adjacent ranges (gap 0, which must *not* count as overlap),
//!   zero-length copies (legal anywhere in bounds, ignored), one-element copies, and batches where
//!   every copy collides. Batch validation is a sweep over sorted endpoints, so nothing about it
//!   changes with magnitude; large lengths would only make overlaps rarer.
//! - **Buffers of at most ~200 elements** (the segment layout above plus slack of `0..=8`), so
//!   that the three naive executions stay microseconds per case and 1024 cases per property run
//!   in well under a second.
//! - **Arbitrary batches (property 3) use buffers of `1..=48`, offsets up to the buffer's length and
//!   lengths `0..=10`,** so that all three outcomes are common (with the fixed seed: about 25%
//!   independent, 11% overlapping, 64% out of bounds) and overlaps of every kind (dst/dst, dst/own
//!   src, dst/other src) occur; the test prints the split and fails if any outcome was produced
//!   fewer than 200 times in its 4096 cases. Offsets near `usize::MAX` are added as
//!   their own cases to cover the overflow path of the bounds check.
//! - **Injected overlaps** pick a copy of non-zero length and add a copy whose destination (or,
//!   within one buffer, source) starts inside it, or make a copy overlap itself, at any position of
//!   the batch, so the sweep sees the clash from either side.
//!
//! Every property runs from the fixed seed `SEED`, so every run sees the same cases; proptest's own
//! `PROPTEST_RNG_SEED=<u64>` replaces it, and `PROPTEST_CASES` is ignored in favour of the counts
//! written here (raise them in `config` for a longer sweep). A failing case is reported shrunk,
//! with the batch and the buffer lengths.

use backend_api::copy::{BatchTarget, validate_batch};
use backend_api::{CopyRange, Error};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};

/// The seed of every property's generator.
const SEED: u64 = 0x5eed_ba7c_0000_0005;

/// `cases` cases from the fixed `SEED` (or `PROPTEST_RNG_SEED`), no regression files.
fn config(cases: u32) -> Config {
    let defaults = Config::default();
    let rng_seed = match defaults.rng_seed {
        RngSeed::Random => RngSeed::Fixed(SEED),
        from_env => from_env,
    };
    Config { cases, rng_seed, failure_persistence: None, ..defaults }
}

/// Longest generated copy.
const MAX_LEN: usize = 12;

/// Whether two ranges share an element (empty ranges share nothing).
fn ranges_overlap(a: usize, al: usize, b: usize, bl: usize) -> bool {
    al > 0 && bl > 0 && a < b + bl && b < a + al
}

/// The definition: no destination overlaps another destination, and within one buffer no
/// destination overlaps any source (its own included).
fn independent_by_definition(copies: &[CopyRange], within: bool) -> bool {
    for (i, x) in copies.iter().enumerate() {
        if within && ranges_overlap(x.src, x.len, x.dst, x.len) {
            return false;
        }
        for (j, y) in copies.iter().enumerate() {
            if i == j {
                continue;
            }
            if ranges_overlap(x.dst, x.len, y.dst, y.len) || (within && ranges_overlap(x.dst, x.len, y.src, y.len)) {
                return false;
            }
        }
    }
    true
}

fn in_bounds(copies: &[CopyRange], src_len: usize, dst_len: usize) -> bool {
    copies.iter().all(|c| {
        c.src.checked_add(c.len).is_some_and(|e| e <= src_len) && c.dst.checked_add(c.len).is_some_and(|e| e <= dst_len)
    })
}

/// A generated batch and the buffers it runs over.
#[derive(Clone, Debug)]
struct Case {
    copies: Vec<CopyRange>,
    src_len: usize,
    dst_len: usize,
    within: bool,
}

impl Case {
    fn target(&self) -> BatchTarget {
        if self.within {
            BatchTarget::Within { len: self.dst_len }
        } else {
            BatchTarget::Between { src_len: self.src_len, dst_len: self.dst_len }
        }
    }
}

/// One copy's raw draw: gap before its destination, its length, where its source goes.
fn piece() -> impl Strategy<Value = (usize, usize, usize, usize)> {
    (0..=6usize, 0..=MAX_LEN, any::<usize>(), any::<usize>())
}

/// An independent batch between two buffers: destinations are laid out left to right with gaps,
/// sources anywhere in the source buffer (they may overlap each other), then the order shuffled.
fn independent_between() -> impl Strategy<Value = Case> {
    (prop::collection::vec(piece(), 1..=8), 0..=8usize, 0..=8usize)
        .prop_map(|(pieces, dst_slack, src_slack)| {
            let src_len = MAX_LEN + src_slack;
            let mut pos = 0;
            let copies: Vec<CopyRange> = pieces
                .iter()
                .map(|&(gap, len, s, _)| {
                    let dst = pos + gap;
                    pos = dst + len;
                    CopyRange::new(s % (src_len - len + 1), dst, len)
                })
                .collect();
            Case { copies, src_len, dst_len: pos + dst_slack, within: false }
        })
        .prop_flat_map(|case| {
            let Case { copies, src_len, dst_len, within } = case;
            Just(copies).prop_shuffle().prop_map(move |copies| Case { copies, src_len, dst_len, within })
        })
}

/// An independent batch within one buffer: the buffer is `[gap][zone][dst]` per copy plus a last
/// zone; each zone is `MAX_LEN` long and only sources live there, so sources may overlap each
/// other and lie before or after their destination, but never touch a destination.
fn independent_within() -> impl Strategy<Value = Case> {
    (prop::collection::vec(piece(), 1..=8), 0..=8usize)
        .prop_map(|(pieces, slack)| {
            let k = pieces.len();
            let mut zones = Vec::with_capacity(k + 1);
            let mut dsts = Vec::with_capacity(k);
            let mut pos = 0;
            for &(gap, len, _, _) in &pieces {
                pos += gap;
                zones.push(pos);
                pos += MAX_LEN;
                dsts.push(pos);
                pos += len;
            }
            zones.push(pos);
            pos += MAX_LEN;
            let copies = pieces
                .iter()
                .zip(&dsts)
                .map(|(&(_, len, zone_pick, off), &dst)| {
                    let zone = zones[zone_pick % zones.len()];
                    CopyRange::new(zone + off % (MAX_LEN - len + 1), dst, len)
                })
                .collect();
            let len = pos + slack;
            Case { copies, src_len: len, dst_len: len, within: true }
        })
        .prop_flat_map(|case| {
            let Case { copies, src_len, dst_len, within } = case;
            Just(copies).prop_shuffle().prop_map(move |copies| Case { copies, src_len, dst_len, within })
        })
}

fn independent() -> impl Strategy<Value = Case> {
    prop_oneof![independent_between(), independent_within()]
}

/// An independent case plus one injected overlap. `how` picks the kind; `a`, `b`, `c` place it.
fn with_overlap() -> impl Strategy<Value = Case> {
    (independent(), 0..4u8, any::<usize>(), any::<usize>(), any::<usize>(), any::<usize>()).prop_filter_map(
        "needs a copy of non-zero length to collide with",
        |(mut case, how, pick, a, b, c)| {
            let victims: Vec<CopyRange> = case.copies.iter().copied().filter(|c| c.len > 0).collect();
            if victims.is_empty() {
                return None;
            }
            let v = victims[pick % victims.len()];
            let (src_len, dst_len) = (case.src_len, case.dst_len);
            let bad = match (how, case.within) {
                // A destination starting inside the victim's destination.
                (_, false) | (0 | 1, true) => {
                    let dst = v.dst + a % v.len;
                    let len = 1 + b % (dst_len - dst).min(MAX_LEN);
                    CopyRange::new(c % (src_len - len.min(src_len) + 1), dst, len.min(src_len))
                }
                // Within one buffer: a destination starting inside the victim's source.
                (2, true) => {
                    let dst = v.src + a % v.len;
                    let len = 1 + b % (dst_len - dst).min(MAX_LEN);
                    CopyRange::new(c % (src_len - len + 1), dst, len)
                }
                // Within one buffer: a copy whose destination overlaps its own source.
                (_, true) => {
                    let len = 2 + b % (MAX_LEN - 1);
                    let len = len.min(dst_len);
                    if len < 2 {
                        return None;
                    }
                    let shift = 1 + a % (len - 1);
                    if len + shift > dst_len {
                        return None;
                    }
                    let src = c % (dst_len - len - shift + 1);
                    CopyRange::new(src, src + shift, len)
                }
            };
            let at = c % (case.copies.len() + 1);
            case.copies.insert(at, bad);
            Some(case)
        },
    )
}

/// Runs a batch element by element, copy after copy, in the given order of copies.
fn run_in_order(case: &Case, order: impl Iterator<Item = usize>, src: &[u64], dst: &mut [u64]) {
    for i in order {
        let c = case.copies[i];
        for t in 0..c.len {
            dst[c.dst + t] = if case.within { dst[c.src + t] } else { src[c.src + t] };
        }
    }
}

/// Runs a batch as if every copy ran at once: read all sources first, then write.
fn run_at_once(case: &Case, src: &[u64], dst: &mut [u64]) {
    let reads: Vec<Vec<u64>> = case
        .copies
        .iter()
        .map(|c| if case.within { dst[c.src..c.src + c.len].to_vec() } else { src[c.src..c.src + c.len].to_vec() })
        .collect();
    for (c, r) in case.copies.iter().zip(reads) {
        dst[c.dst..c.dst + c.len].copy_from_slice(&r);
    }
}

/// Distinct values, so any misplaced element shows.
fn ramp(len: usize, base: u64) -> Vec<u64> {
    (0..len as u64).map(|i| base + i).collect()
}

proptest! {
    #![proptest_config(config(1024))]

    #[test]
    fn independent_batches_pass_and_run_the_same_in_any_order(case in independent()) {
        prop_assert!(independent_by_definition(&case.copies, case.within), "generator made a dependent batch");
        prop_assert!(validate_batch(&case.copies, case.target()).is_ok(), "refused: {case:?}");

        let src = ramp(case.src_len, 1 << 32);
        let dst0 = ramp(case.dst_len, 1 << 40);
        let mut forward = dst0.clone();
        run_in_order(&case, 0..case.copies.len(), &src, &mut forward);
        let mut backward = dst0.clone();
        run_in_order(&case, (0..case.copies.len()).rev(), &src, &mut backward);
        let mut at_once = dst0.clone();
        run_at_once(&case, &src, &mut at_once);
        prop_assert_eq!(&forward, &backward);
        prop_assert_eq!(&forward, &at_once);

        // Every destination element holds its source's original value; every other element is
        // untouched.
        let mut written = vec![false; case.dst_len];
        for c in &case.copies {
            for t in 0..c.len {
                let from = if case.within { dst0[c.src + t] } else { src[c.src + t] };
                prop_assert_eq!(forward[c.dst + t], from);
                written[c.dst + t] = true;
            }
        }
        for (i, w) in written.iter().enumerate() {
            if !w {
                prop_assert_eq!(forward[i], dst0[i], "element {} outside every destination changed", i);
            }
        }
    }

    #[test]
    fn injected_overlaps_are_always_refused(case in with_overlap()) {
        prop_assert!(in_bounds(&case.copies, case.src_len, case.dst_len));
        prop_assert!(!independent_by_definition(&case.copies, case.within));
        match validate_batch(&case.copies, case.target()) {
            Err(Error::OverlappingCopies {
                first, first_kind, first_start, first_end, second, second_kind, second_start, second_end,
            }) => {
                // The error names two real ranges of the batch, and they do overlap.
                let range = |i: usize, kind: &str| {
                    let c = case.copies[i];
                    if kind == "dst" { (c.dst, c.dst + c.len) } else { (c.src, c.src + c.len) }
                };
                prop_assert_eq!(range(first, first_kind), (first_start, first_end));
                prop_assert_eq!(range(second, second_kind), (second_start, second_end));
                prop_assert!(first_kind == "dst" || second_kind == "dst", "two sources never clash");
                prop_assert!(first_start < second_end && second_start < first_end, "named ranges do not overlap");
                prop_assert!(first != second || case.within, "a copy only clashes with itself within one buffer");
            }
            other => prop_assert!(false, "expected OverlappingCopies, got {:?} for {:?}", other, case),
        }
    }
}

/// Arbitrary batches: buffers of `1..=48`, offsets up to the buffer's length, lengths `0..=10`.
fn arbitrary() -> impl Strategy<Value = Case> {
    (1..=48usize, 1..=48usize, any::<bool>()).prop_flat_map(|(a, b, within)| {
        let src_len = if within { b } else { a };
        prop::collection::vec((0..=src_len, 0..=b, 0..=10usize), 0..=6).prop_map(move |raw| Case {
            copies: raw.into_iter().map(|(s, d, l)| CopyRange::new(s, d, l)).collect(),
            src_len,
            dst_len: b,
            within,
        })
    })
}

#[test]
fn arbitrary_batches_agree_with_the_definition() {
    use proptest::test_runner::TestRunner;
    // [independent, overlapping, out of bounds] outcomes seen.
    let seen = std::cell::Cell::new([0usize; 3]);
    let mut runner = TestRunner::new(config(4096));
    runner
        .run(&arbitrary(), |case| {
            let result = validate_batch(&case.copies, case.target());
            let mut s = seen.get();
            if !in_bounds(&case.copies, case.src_len, case.dst_len) {
                prop_assert!(matches!(result, Err(Error::OutOfBounds { .. })), "{case:?}: {result:?}");
                s[2] += 1;
            } else if independent_by_definition(&case.copies, case.within) {
                prop_assert!(result.is_ok(), "{case:?}: {result:?}");
                s[0] += 1;
            } else {
                prop_assert!(matches!(result, Err(Error::OverlappingCopies { .. })), "{case:?}: {result:?}");
                s[1] += 1;
            }
            seen.set(s);
            Ok(())
        })
        .unwrap();
    let s = seen.get();
    println!("independent, overlapping, out of bounds: {s:?}");
    assert!(s.iter().all(|&n| n >= 200), "every outcome must be exercised: {s:?}");
}

#[test]
fn offsets_near_usize_max_are_out_of_bounds_not_overflow() {
    for within in [false, true] {
        let target =
            if within { BatchTarget::Within { len: 16 } } else { BatchTarget::Between { src_len: 16, dst_len: 16 } };
        for c in [
            CopyRange::new(usize::MAX, 0, 1),
            CopyRange::new(0, usize::MAX, 1),
            CopyRange::new(usize::MAX - 3, 0, 4),
            CopyRange::new(0, 8, usize::MAX),
            CopyRange::new(usize::MAX, usize::MAX, usize::MAX),
        ] {
            let err = validate_batch(&[CopyRange::new(0, 0, 0), c], target).unwrap_err();
            assert!(matches!(err, Error::OutOfBounds { .. }), "{c:?} within={within}: {err}");
        }
    }
}
