//! Tests of the fused schedule: on many shapes, caps and limits, the schedule's host execution
//! ends with the matrix the plan's own execution gives, and that is the index-by-index transpose;
//! every fused launch respects its limits and addresses whole aligned slots in bounds.

use super::*;
use crate::shape::MatrixShape;

/// A seeded xorshift matrix of `n` elements.
fn matrix(n: usize, seed: u64) -> Vec<u64> {
    let mut s = 0x9e37_79b9_7f4a_7c15_u64 ^ seed;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        })
        .collect()
}

/// Every fused launch: at most `max_moves` moves over at least one slot, distinct destinations,
/// no identity, whole aligned slots in bounds, and, under a region limit, each slot's first and
/// last element in one region and at most `max` regions.
fn assert_launches_valid(plan: &TransposePlan, launches: &[Launch], limits: &FuseLimits) {
    let g = &plan.geometry;
    let (n, s) = (g.shape.len(), g.scratch_elems);
    for (k, l) in launches.iter().enumerate() {
        let Launch::Fused { unit, moves } = l else { continue };
        assert!(!moves.is_empty() && moves.len() <= limits.max_moves, "launch {k}: {} moves", moves.len());
        let mut dsts: Vec<Loc> = moves.iter().map(|m| m.1).collect();
        dsts.sort_unstable();
        dsts.dedup();
        assert_eq!(dsts.len(), moves.len(), "launch {k}: a destination written twice");
        let mut regions = std::collections::BTreeSet::new();
        for &(src, dst) in moves {
            assert_ne!(src, dst, "launch {k}: an identity move");
            for loc in [src, dst] {
                assert_eq!(loc.offset() % unit, 0, "launch {k}: {loc:?} is not slot-aligned");
                let limit = if matches!(loc, Loc::Buf(_)) { n } else { s };
                assert!(loc.offset() + unit <= limit, "launch {k}: {loc:?} + {unit} past {limit}");
                if let Some(r) = limits.regions {
                    let (first, last) = (loc.offset() / r.elems, (loc.offset() + unit - 1) / r.elems);
                    assert_eq!(first, last, "launch {k}: the slot at {loc:?} spans regions {first}..={last}");
                    regions.insert((matches!(loc, Loc::Scratch(_)), first));
                }
            }
        }
        if let Some(r) = limits.regions {
            assert!(regions.len() <= r.max, "launch {k}: {} regions", regions.len());
        }
    }
}

/// Runs plan and schedule on one seeded matrix: the matrix must end transposed both ways. Returns
/// (fused launches, launches).
fn check(rows: usize, cols: usize, cap: usize, limits: FuseLimits) -> (usize, usize) {
    let plan = TransposePlan::new(MatrixShape::new(rows, cols).unwrap(), cap).unwrap();
    let host = matrix(rows * cols, (rows * 31 + cols) as u64);
    let mut expected = host.clone();
    let mut scratch = vec![0u64; plan.geometry.scratch_elems];
    plan.execute_host(&mut expected, &mut scratch);
    // Against the definition, so that neither execution can pass on a broken plan.
    for r in 0..rows {
        for c in 0..cols {
            assert_eq!(expected[c * rows + r], host[r * cols + c], "{rows} x {cols}, cap {cap}: plan at ({r}, {c})");
        }
    }
    let launches = schedule(&plan, &limits);
    assert_launches_valid(&plan, &launches, &limits);
    let mut got = host.clone();
    let mut scratch = vec![u64::MAX; plan.geometry.scratch_elems];
    execute_host(&plan.geometry, &launches, &mut got, &mut scratch);
    assert_eq!(got, expected, "{rows} x {cols} under a {cap} B cap, {limits:?}");
    let fused = launches.iter().filter(|l| matches!(l, Launch::Fused { .. })).count();
    (fused, launches.len())
}

const SHAPES: [(usize, usize); 10] =
    [(2, 2), (5, 3), (16, 4), (77, 6), (64, 5), (100, 7), (256, 3), (128, 17), (300, 11), (1, 9)];

#[test]
fn schedule_matches_the_plan_on_many_shapes() {
    let mut fused_total = 0;
    for (rows, cols) in SHAPES {
        for k in [1, 2, 3, 4, 7, 16, 1 << 20] {
            let cap = (cols + 1) * 8 * k;
            for max_moves in [1, 2, 8, 384] {
                fused_total += check(rows, cols, cap, FuseLimits::moves(max_moves)).0;
            }
        }
    }
    assert!(fused_total > 100, "fusion never happened ({fused_total})");
}

#[test]
fn region_limits_hold_and_stay_exact() {
    let mut fused_total = 0;
    for (rows, cols) in SHAPES {
        // Runs of 2, 4 and 16 rows (one-row runs make thousands of batches: slow, and covered by
        // the test above).
        for k in [2, 5, 16] {
            let cap = (cols + 1) * 8 * k;
            for (elems, max) in [(1, 2), (4, 3), (16, 2), (64, 6), (1 << 12, 4), (48, 8)] {
                let limits = FuseLimits { max_moves: 384, regions: Some(Regions { elems, max }) };
                fused_total += check(rows, cols, cap, limits).0;
            }
        }
    }
    assert!(fused_total > 50, "fusion never happened under region limits ({fused_total})");
}

#[test]
fn regions_fit_counts_distinct_regions() {
    let limits = |max| FuseLimits { max_moves: 10, regions: Some(Regions { elems: 8, max }) };
    // Matrix regions 0 and 1, scratch region 1.
    let moves = [(Loc::Buf(0), Loc::Scratch(8)), (Loc::Buf(8), Loc::Buf(4))];
    assert!(limits(3).regions_fit(&moves));
    assert!(!limits(2).regions_fit(&moves));
    // The same offsets in the matrix and the scratch are different regions.
    let moves = [(Loc::Buf(0), Loc::Scratch(0))];
    assert!(limits(2).regions_fit(&moves) && !limits(1).regions_fit(&moves));
    // Regions shared by several moves count once.
    let moves = [(Loc::Buf(0), Loc::Buf(1)), (Loc::Buf(2), Loc::Buf(7))];
    assert!(limits(1).regions_fit(&moves));
    assert!(FuseLimits::moves(1).regions_fit(&[(Loc::Buf(0), Loc::Scratch(1 << 40))]));
}

#[test]
fn only_units_dividing_the_region_fuse() {
    let limits = |elems| FuseLimits { max_moves: 10, regions: Some(Regions { elems, max: 4 }) };
    assert!(limits(8).fuses(4) && limits(8).fuses(8) && limits(12).fuses(3));
    assert!(!limits(8).fuses(16) && !limits(8).fuses(3) && !limits(0).fuses(4));
    assert!(FuseLimits::moves(1).fuses(7) && !FuseLimits::NONE.fuses(7));
    // A shape whose run length does not divide the region never fuses.
    let plan = TransposePlan::new(MatrixShape::new(64, 5).unwrap(), 6 * 8 * 4).unwrap();
    assert_eq!(plan.geometry.run_rows, 4);
    let fused = |elems| schedule(&plan, &limits(elems)).iter().filter(|l| matches!(l, Launch::Fused { .. })).count();
    assert_eq!(fused(6), 0);
    assert!(fused(8) > 0);
}

#[test]
fn no_fusion_passes_the_plan_through() {
    let plan = TransposePlan::new(MatrixShape::new(64, 5).unwrap(), 6 * 8 * 4).unwrap();
    let launches = schedule(&plan, &FuseLimits::NONE);
    let steps: Vec<Step> = launches.iter().map(Launch::to_step).collect();
    assert_eq!(steps, plan.steps);
    // A fused launch becomes the Copies step of its slots.
    let l = Launch::Fused { unit: 4, moves: vec![(Loc::Buf(0), Loc::Buf(4)), (Loc::Buf(4), Loc::Scratch(0))] };
    let m = |src, dst| Move { src, dst, len: 4 };
    assert_eq!(l.to_step(), Step::Copies(vec![m(Loc::Buf(0), Loc::Buf(4)), m(Loc::Buf(4), Loc::Scratch(0))]));
}

#[test]
fn production_like_shape_fuses_every_run_pair() {
    // 2^12 x 316 under a cap of 32 rows: 128 blocks of 32-row runs, 40,448 runs, the same
    // structure as 2^22 x 316 under 256 MiB (64 blocks of 2^16 rows) with more cycles.
    let (rows, cols) = (1 << 12, 316);
    let cap = (cols + 1) * 8 * 32;
    let plan = TransposePlan::new(MatrixShape::new(rows, cols).unwrap(), cap).unwrap();
    let (fused, launches) = check(rows, cols, cap, FuseLimits::moves(384));
    let blocks = plan.steps.iter().filter(|s| matches!(s, Step::TransposeBlock { .. })).count();
    // Every pair of run batches became one launch (the block pass's last copy is one more).
    assert!(launches <= blocks + plan.batches() / 2 + 1, "{launches} launches, {blocks} blocks, {fused} fused");
    assert!(fused >= plan.batches() / 2, "{fused} fused launches for {} batches", plan.batches());
}

#[test]
fn emit_errors_stop_the_schedule() {
    let plan = TransposePlan::new(MatrixShape::new(64, 5).unwrap(), 6 * 8 * 4).unwrap();
    let mut seen = 0;
    let r = schedule_each(&plan, &FuseLimits::moves(384), &mut |_| {
        seen += 1;
        if seen == 3 { Err(crate::Error::InvalidArgument("stop".into())) } else { Ok(()) }
    });
    assert!(matches!(r, Err(crate::Error::InvalidArgument(m)) if m == "stop"));
    assert_eq!(seen, 3, "launches were emitted after the error");
}

#[test]
fn uniform_unit_needs_equal_aligned_moves() {
    let m = |s: usize, d: usize, len: usize| Move { src: Loc::Buf(s), dst: Loc::Scratch(d), len };
    assert_eq!(uniform_unit(&[m(4, 0, 4), m(12, 4, 4)]), Some(4));
    assert_eq!(uniform_unit(&[m(4, 0, 4), m(12, 4, 2)]), None);
    assert_eq!(uniform_unit(&[m(2, 0, 4)]), None);
    assert_eq!(uniform_unit(&[m(4, 2, 4)]), None);
    assert_eq!(uniform_unit(&[m(0, 0, 0)]), None);
    assert_eq!(uniform_unit(&[]), None);
}

#[test]
fn the_cache_keeps_the_newest_schedules() {
    let cache = ScheduleCache::new(2);
    assert!(cache.is_empty());
    let key = |rows| ScheduleKey { rows, cols: 3, scratch_elems: 8, limits: FuseLimits::NONE };
    let one = vec![Launch::Copies(vec![])];
    let two = vec![Launch::Block { src: Loc::Buf(0), dst: Loc::Scratch(0), rows: 2 }];
    assert_eq!(&*cache.insert(key(1), one.clone()), &one[..]);
    // A second insert under the same key keeps the first schedule.
    assert_eq!(&*cache.insert(key(1), two.clone()), &one[..]);
    cache.insert(key(2), two.clone());
    assert_eq!(cache.len(), 2);
    assert_eq!(cache.get(&key(1)).as_deref(), Some(&one[..]));
    cache.insert(key(3), two.clone());
    assert_eq!((cache.len(), cache.get(&key(1))), (2, None), "the oldest entry stays");
    assert_eq!(cache.get(&key(2)).as_deref(), Some(&two[..]));
    assert_eq!(cache.get(&key(3)).as_deref(), Some(&two[..]));
    // A cache that keeps nothing still hands the schedule back.
    let none = ScheduleCache::new(0);
    assert_eq!(&*none.insert(key(1), one.clone()), &one[..]);
    assert!(none.is_empty());
}

#[test]
fn schedule_key_is_the_plan_inputs() {
    let g = TransposeGeometry::new(MatrixShape::new(100, 7).unwrap(), 8 * 8 * 16).unwrap();
    let k = ScheduleKey::new(&g, FuseLimits::moves(5));
    assert_eq!((k.rows, k.cols, k.scratch_elems, k.limits), (100, 7, g.scratch_elems, FuseLimits::moves(5)));
}

/// Host cost of planning and scheduling the production transpose (`--ignored --nocapture`).
#[test]
#[ignore = "timing, not a check"]
fn schedule_time_production() {
    let t = std::time::Instant::now();
    let plan = TransposePlan::new(MatrixShape::new(1 << 22, 316).unwrap(), 256 << 20).unwrap();
    let t1 = t.elapsed();
    let launches = schedule(&plan, &FuseLimits::moves(384));
    let t2 = t.elapsed();
    println!("plan {t1:?}, schedule {:?}: {} steps -> {} launches", t2 - t1, plan.steps.len(), launches.len());
}

#[test]
fn one_fused_launch_takes_at_most_fuse_max_steps_batches() {
    // A synthetic plan of 130 one-move batches, batch k moving slot k+1 into slot k (a shift
    // down by one slot, as a cycle of the run pass is): the fused launches must cut it into
    // FUSE_MAX_STEPS (64), 64 and 2 batches, and executing them must shift the matrix.
    let shape = MatrixShape::new(4 * 131, 1).unwrap();
    let geometry = TransposeGeometry::new(shape, 2 * 4 * 8).unwrap();
    let unit = 4;
    let steps: Vec<Step> = (0..130)
        .map(|k| Step::Copies(vec![Move { src: Loc::Buf((k + 1) * unit), dst: Loc::Buf(k * unit), len: unit }]))
        .collect();
    let plan = TransposePlan { geometry, steps };
    let launches = schedule(&plan, &FuseLimits::moves(384));
    let sizes: Vec<usize> = launches
        .iter()
        .map(|l| match l {
            Launch::Fused { unit: u, moves } => {
                assert_eq!(*u, unit);
                moves.len()
            }
            other => panic!("expected only fused launches, got {other:?}"),
        })
        .collect();
    assert_eq!(sizes, [FUSE_MAX_STEPS, FUSE_MAX_STEPS, 2]);
    let host = matrix(shape.len(), 130);
    let mut got = host.clone();
    let mut scratch = vec![u64::MAX; plan.geometry.scratch_elems];
    execute_host(&plan.geometry, &launches, &mut got, &mut scratch);
    let mut want = host.clone();
    want.copy_within(unit..131 * unit, 0);
    assert_eq!(got, want, "the launches must shift every slot down by one");
}
