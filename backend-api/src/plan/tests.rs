//! Tests of the transpose plan: geometry invariants, independence of every batch, and a host
//! model checked against the index-by-index definition of a transpose.

use super::*;

fn shape(rows: usize, cols: usize) -> MatrixShape {
    MatrixShape::new(rows, cols).unwrap()
}

fn overlaps(a: &Move, a_dst: bool, b: &Move, b_dst: bool) -> bool {
    let (la, lb) = (if a_dst { a.dst } else { a.src }, if b_dst { b.dst } else { b.src });
    let same_space = std::mem::discriminant(&la) == std::mem::discriminant(&lb);
    same_space && a.len > 0 && b.len > 0 && la.offset() < lb.offset() + b.len && lb.offset() < la.offset() + a.len
}

/// Every batch is independent: distinct destinations, and no destination aliases a source.
fn assert_batches_independent(plan: &TransposePlan) {
    for (k, step) in plan.steps.iter().enumerate() {
        let Step::Copies(moves) = step else { continue };
        assert!(!moves.is_empty(), "step {k} is an empty batch");
        // Sort-based check for the big batches, pairwise for the small ones.
        let mut ranges: Vec<(Loc, usize, bool, usize)> = Vec::new();
        for (i, m) in moves.iter().enumerate() {
            ranges.push((m.dst, m.len, true, i));
            ranges.push((m.src, m.len, false, i));
        }
        ranges.sort_by_key(|r| r.0);
        for w in ranges.windows(2) {
            let (a, b) = (w[0], w[1]);
            let same = std::mem::discriminant(&a.0) == std::mem::discriminant(&b.0);
            let clash = same && a.0.offset() + a.1 > b.0.offset() && (a.2 || b.2);
            assert!(!clash, "step {k}: {:?} and {:?} overlap", moves[a.3], moves[b.3]);
        }
        if moves.len() < 64 {
            for (i, a) in moves.iter().enumerate() {
                assert!(!overlaps(a, true, a, false), "step {k}: move {i} overlaps itself");
                for b in &moves[i + 1..] {
                    assert!(
                        !overlaps(a, true, b, true) && !overlaps(a, true, b, false) && !overlaps(b, true, a, false)
                    );
                }
            }
        }
    }
}

fn assert_scratch_bounded(plan: &TransposePlan) {
    let limit = plan.geometry.scratch_elems;
    for step in &plan.steps {
        let touched: Vec<(Loc, usize)> = match step {
            Step::TransposeBlock { src, dst, rows } => {
                let n = rows * plan.geometry.shape.cols();
                vec![(*src, n), (*dst, n)]
            }
            Step::Copies(m) => m.iter().flat_map(|m| [(m.src, m.len), (m.dst, m.len)]).collect(),
        };
        for (loc, len) in touched {
            match loc {
                Loc::Scratch(o) => assert!(o + len <= limit, "scratch [{o}, {}) past {limit}", o + len),
                Loc::Buf(o) => assert!(o + len <= plan.geometry.shape.len()),
            }
        }
    }
}

/// Runs the plan on indices and compares with the naive index-by-index transpose.
fn assert_transposes(rows: usize, cols: usize, cap: usize) -> TransposePlan {
    let plan = TransposePlan::new(shape(rows, cols), cap).unwrap();
    assert_batches_independent(&plan);
    assert_scratch_bounded(&plan);
    let mut buf: Vec<u32> = (0..(rows * cols) as u32).collect();
    let mut scratch = vec![u32::MAX; plan.geometry.scratch_elems];
    plan.execute_host(&mut buf, &mut scratch);
    for r in 0..rows {
        for c in 0..cols {
            assert_eq!(buf[c * rows + r] as usize, r * cols + c, "{rows}x{cols} cap {cap}: element ({r},{c})");
        }
    }
    plan
}

/// The cap that gives exactly `run_rows` rows per block for `cols` columns.
fn cap_for(run_rows: usize, cols: usize) -> usize {
    (cols + 1) * run_rows * ELEM_BYTES
}

#[test]
fn geometry_invariants_over_the_production_range() {
    let mut cols_samples: Vec<usize> = (1..=64).collect();
    cols_samples.extend([100, 255, 256, 316, 436, 612, 1000, 4096, 10_000, 32_768, 65_535]);
    for log_rows in 1..=27 {
        let rows = 1usize << log_rows;
        for &cols in &cols_samples {
            for cap in [DEFAULT_SCRATCH_CAP, 1 << 20, 64 << 20, cap_for(1, cols)] {
                let g = TransposeGeometry::new(shape(rows, cols), cap).unwrap();
                assert!(g.scratch_bytes() <= cap, "{rows}x{cols}: scratch {} > cap {cap}", g.scratch_bytes());
                assert!(g.run_rows >= 1 && g.run_rows <= rows);
                assert!(g.run_rows.is_power_of_two(), "{rows}x{cols}: run {}", g.run_rows);
                assert_eq!(g.full_blocks * g.run_rows + g.tail_rows, rows);
                assert_eq!(g.tail_rows, 0, "power-of-two rows never need a tail");
                // The run is the largest power of two that fits: doubling it would break the cap.
                if g.run_rows < rows {
                    assert!((cols + 1) * 2 * g.run_rows * ELEM_BYTES > cap, "{rows}x{cols}: run could double");
                }
                assert_eq!(g.scratch_elems, (cols + 1) * g.run_rows);
            }
        }
    }
    // lambda_vm PR #956's figures: 2^16 rows per block for 316 and 436 columns under 256 MiB.
    for cols in [316, 436] {
        let g = TransposeGeometry::new(shape(1 << 22, cols), DEFAULT_SCRATCH_CAP).unwrap();
        assert_eq!((g.run_rows, g.full_blocks), (1 << 16, 64));
    }
}

#[test]
fn geometry_with_tails() {
    for rows in [3usize, 5, 7, 100, 1000, 12_345, 1 << 20 | 1] {
        for cols in [1usize, 2, 3, 316] {
            for cap in [cap_for(1, cols), cap_for(3, cols), cap_for(64, cols), DEFAULT_SCRATCH_CAP] {
                let g = TransposeGeometry::new(shape(rows, cols), cap).unwrap();
                assert!(g.scratch_bytes() <= cap);
                assert_eq!(g.full_blocks * g.run_rows + g.tail_rows, rows);
                assert!(g.tail_rows < g.run_rows);
                assert!(g.full_blocks >= 1);
            }
        }
    }
}

#[test]
fn a_cap_below_one_run_is_refused() {
    let err = TransposeGeometry::new(shape(1024, 316), 317 * 8 - 1).unwrap_err();
    assert!(matches!(err, Error::ScratchTooSmall { cap: 2535, cols: 316, min: 2536 }), "{err}");
    assert!(err.to_string().contains("2535 B"));
    TransposeGeometry::new(shape(1024, 316), 317 * 8).unwrap();
}

#[test]
fn host_model_transposes_seed_shapes() {
    // (blocks, cols): lambda_vm PR #956's 64x316, 64x436 and 128x612 and a spread of others, each with a
    // small run so the model stays fast while the run permutation has the production structure.
    let shapes = [
        (64, 316),
        (64, 436),
        (128, 612),
        (1, 1),
        (1, 7),
        (2, 2),
        (2, 3),
        (3, 5),
        (4, 4),
        (5, 3),
        (7, 11),
        (8, 1),
        (16, 17),
        (31, 2),
        (32, 33),
        (33, 64),
        (100, 9),
        (256, 3),
    ];
    for (blocks, cols) in shapes {
        for run in [1usize, 2, 4] {
            let plan = assert_transposes(blocks * run, cols, cap_for(run, cols));
            if cols > 1 && blocks * run > 1 {
                assert_eq!(plan.geometry.full_blocks, blocks, "{blocks}x{cols}");
                assert_eq!(plan.geometry.run_rows, run);
            }
        }
    }
}

#[test]
fn long_cycles_are_chunked() {
    // Few scratch runs (cols + 1 = 3) against cycles hundreds of runs long.
    let plan = assert_transposes(1024, 2, cap_for(1, 2));
    assert!(plan.batches() > 100, "{} batches", plan.batches());
    assert_transposes(4096, 3, cap_for(2, 3));
}

#[test]
fn host_model_transposes_tails() {
    for rows in [3usize, 5, 6, 7, 9, 13, 31, 33, 100, 127] {
        for cols in [1usize, 2, 3, 5, 8, 17, 64] {
            for run in [1usize, 2, 4, 8, 16, 64] {
                assert_transposes(rows, cols, cap_for(run, cols));
            }
        }
    }
}

#[test]
fn host_model_on_edge_shapes() {
    for (rows, cols) in [(1, 1), (1, 316), (316, 1), (2, 1), (1, 2), (1024, 3), (64, 612), (1000, 316)] {
        assert_transposes(rows, cols, DEFAULT_SCRATCH_CAP);
        assert_transposes(rows, cols, cap_for(4, cols));
    }
}

#[test]
fn batch_count_at_production_shape_is_small() {
    // 2^22 x 316 under 256 MiB: 64 block transposes and a handful of batches, as lambda_vm PR #956 saw.
    let plan = TransposePlan::new(shape(1 << 22, 316), DEFAULT_SCRATCH_CAP).unwrap();
    assert_batches_independent(&plan);
    assert_scratch_bounded(&plan);
    let blocks = plan.steps.iter().filter(|s| matches!(s, Step::TransposeBlock { .. })).count();
    assert_eq!(blocks, 64);
    // One copy back from the block scratch, then every run that moves is copied twice (to
    // scratch and out; a long cycle's save and restore are its first run's two copies).
    assert_eq!(plan.copies(), 1 + 2 * (64 * 316 - fixed_points(&plan.geometry)));
    assert!(plan.batches() < 200, "{} batches", plan.batches());
}

fn fixed_points(g: &TransposeGeometry) -> usize {
    (0..g.runs()).filter(|&s| run_destination(s, g.full_blocks, g.shape.cols()) == s).count()
}
