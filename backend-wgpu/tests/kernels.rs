//! Kernel tests of the wgpu backend against independent references (naive index transposes, and
//! `conformance::reference`'s O(n^2) LDE in `u128 % p`, leaf and node hashes by the `sha3` and
//! `blake3` crates, its naive Poseidon2 permutation with explicit matrices, and its quotient
//! evaluated point by point), on one-segment buffers and on buffers cut into many small segments
//! (`WgpuOptions::max_segment_bytes`), so that every multi-segment path runs at small shapes on
//! the software device. The small-segment backend
//! also keeps the portable u32-pair arithmetic, so both arithmetic paths run where the adapter has
//! `SHADER_INT64`.
//!
//! Without an adapter every test prints `SKIPPED` (or fails with `REQUIRE_WGPU=1`).

use std::sync::OnceLock;

use backend_api::quotient::{ConstraintProgram, Instr, QuotientCall, QuotientDomain, Selector};
use backend_api::{
    Backend, CopyRange, DIGEST_WORDS, DeviceBuffer as _, Error, HashKind, LdeParams, LeafLayout, LeafSpec, MatrixShape,
    PendingDownload as _, ReductionCall, ReductionPoint, RowStride, TreeShape,
};
use backend_wgpu::{WgpuBackend, WgpuOptions};
use conformance::parity::or_skip;
use conformance::reference::{self, P};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Segment sizes the tests run under: the adapter's own, and 8 KiB (1024 elements).
const SMALL_SEGMENT: u64 = 8 << 10;

fn backend(small: bool) -> Option<&'static WgpuBackend> {
    static FULL: OnceLock<Result<WgpuBackend, String>> = OnceLock::new();
    static SMALL: OnceLock<Result<WgpuBackend, String>> = OnceLock::new();
    let cell = if small { &SMALL } else { &FULL };
    let made = cell.get_or_init(|| {
        let max_segment_bytes = small.then_some(SMALL_SEGMENT);
        WgpuBackend::new(WgpuOptions {
            allow_software: true,
            max_segment_bytes,
            portable_arithmetic: small,
            ..Default::default()
        })
        .map_err(|e| e.to_string())
    });
    match made {
        Ok(b) => Some(b),
        Err(e) => {
            conformance::reference::skip::skip("backend-wgpu kernel test", e, "REQUIRE_WGPU");
            None
        }
    }
}

/// One test at a time: the memory counters belong to the shared backends.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn both(test: impl Fn(&WgpuBackend)) {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    for small in [false, true] {
        if let Some(b) = backend(small) {
            test(b);
        }
    }
}

fn rng(name: &str) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(
        name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3)),
    )
}

/// Uniform values with non-canonical ones (>= p) mixed in.
fn matrix(r: &mut ChaCha8Rng, len: usize) -> Vec<u64> {
    (0..len)
        .map(|_| match r.random_range(0..6) {
            0 => P + r.random_range(0..0xFFFF_FFFFu64),
            1 => [0, 1, P - 1, P, u64::MAX][r.random_range(0..5)],
            _ => r.random(),
        })
        .collect()
}

#[test]
fn lde_matches_naive_dft() {
    both(|b| {
        let mut r = rng("lde");
        for (log_n, log_b, m, shift) in [
            (0, 0, 3, 1),
            (0, 2, 2, 7),
            (1, 1, 3, 7),
            (3, 0, 5, 1),
            (3, 2, 4, 7),
            (5, 1, 7, 3),
            (4, 3, 2, P + 5),
            (7, 2, 9, 7),
        ] {
            let (n, blowup) = (1usize << log_n, 1usize << log_b);
            let trace = matrix(&mut r, n * m);
            let dev = b.upload(&trace).unwrap();
            let params = LdeParams::new(MatrixShape::new(n, m).unwrap(), blowup, shift).unwrap();
            let out = b.coset_lde(&dev, &params).unwrap();
            let got = b.download_vec(&out).unwrap();
            assert_eq!(
                got,
                reference::coset_lde(&trace, n, m, blowup, shift),
                "LDE 2^{log_n} x {m}, blowup 2^{log_b}, shift {shift}"
            );
        }
    });
}

/// The in-place entry on buffers whose rows `[n, N)` hold garbage (random values, `u64::MAX`),
/// the trace written into rows `[0, n)` with `write`, allocating nothing but its twiddle tables
/// (no trace-sized temporary), against the naive DFT, on shapes where the inverse's last pass
/// stores rows straight to their blocks and, on 8 KiB segments with `B x m = 800`, where it
/// cannot and the first wave moves them.
#[test]
fn lde_in_place_matches_naive_dft() {
    both(|b| {
        let mut r = rng("lde-in-place");
        for (log_n, log_b, m, shift) in [
            (0, 0, 2, 7),
            (0, 3, 2, 7),
            (1, 3, 3, 7),
            (2, 2, 5, 3),
            (4, 0, 3, 1),
            (5, 3, 100, 7),
            (6, 1, 7, P + 5),
            (8, 2, 3, 7),
            (10, 3, 1, 7),
        ] {
            let (n, blowup) = (1usize << log_n, 1usize << log_b);
            let what = format!("LDE 2^{log_n} x {m}, blowup 2^{log_b}, shift {shift}");
            let trace = matrix(&mut r, n * m);
            let params = LdeParams::new(MatrixShape::new(n, m).unwrap(), blowup, shift).unwrap();
            let expected = reference::coset_lde(&trace, n, m, blowup, shift);
            let mut garbage = matrix(&mut r, n * blowup * m);
            garbage[n * m..].iter_mut().step_by(3).for_each(|x| *x = u64::MAX);
            let mut buf = b.upload(&garbage).unwrap();
            b.write(&mut buf, 0, &trace).unwrap();
            // Nothing is allocated in place but the twiddle tables (n/2 + N/2 + n elements).
            let (live, tables) = (b.memory().live, (n / 2 + n * blowup / 2 + n) * 8);
            b.tracker().reset_peak();
            b.coset_lde_in_place(&mut buf, &params).unwrap();
            let extra = b.memory().peak - live;
            assert!(extra <= tables, "{what}: {extra} B allocated in place, tables {tables} B");
            assert_eq!(b.download_vec(&buf).unwrap(), expected, "{what}, in place");
        }
        let params = LdeParams::new(MatrixShape::new(4, 2).unwrap(), 2, 7).unwrap();
        let mut short = b.upload(&[0; 15]).unwrap();
        let err = b.coset_lde_in_place(&mut short, &params).unwrap_err();
        assert!(matches!(err, Error::LengthMismatch { expected: 16, actual: 15, .. }), "{err}");
    });
}

/// Passes of every size, 1 to 5 stages, at the bottom and the top of each transform: with five
/// stages per pass, 2^k rows end in a pass of `k mod 5` stages (or 5), so `log n` and `log N`
/// from 1 to 11 give every size in both transforms; on 8 KiB segments too, so that the passes
/// also cut at segment bounds. Against the naive DFT.
#[test]
fn lde_every_pass_size_matches_naive_dft() {
    both(|b| {
        let mut r = rng("lde-pass-sizes");
        for (log_n, log_b, m) in
            [(1, 1, 3), (2, 1, 2), (3, 1, 5), (4, 1, 1), (6, 1, 2), (7, 2, 3), (8, 1, 1), (9, 1, 1), (10, 1, 2)]
        {
            let (n, blowup) = (1usize << log_n, 1usize << log_b);
            let trace = matrix(&mut r, n * m);
            let dev = b.upload(&trace).unwrap();
            let params = LdeParams::new(MatrixShape::new(n, m).unwrap(), blowup, 7).unwrap();
            let got = b.download_vec(&b.coset_lde(&dev, &params).unwrap()).unwrap();
            assert_eq!(got, reference::coset_lde(&trace, n, m, blowup, 7), "LDE 2^{log_n} x {m}, blowup {blowup}");
        }
    });
}

/// The top passes of a transform whose rows lie many segments apart take two stages, and a group
/// whose four rows touch more than the four segments one dispatch binds (a row that straddles a
/// segment boundary) runs one stage at a time. 100 columns on 8 KiB (1024-element) segments: the
/// forward transform's pass at half-size 2^6 has groups of rows 6,400 elements apart, and the
/// test first checks that some of them touch five segments, then the LDE against the naive DFT.
#[test]
fn lde_groups_across_more_than_four_segments_match_naive_dft() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (log_n, blowup, m) = (8u32, 2usize, 100usize);
    let big_n = (1usize << log_n) * blowup;
    let seg = (SMALL_SEGMENT / 8) as usize;
    // Groups of the two-stage pass at half-size h = 2^6: rows x + j h, j < 4, x mod 4h < h.
    let h = 1usize << 6;
    let most_segments = (0..big_n)
        .filter(|x| x % (4 * h) < h)
        .map(|x| {
            let mut segs: Vec<usize> =
                (0..4).flat_map(|j| [(x + j * h) * m / seg, ((x + j * h) * m + m - 1) / seg]).collect();
            segs.sort_unstable();
            segs.dedup();
            segs.len()
        })
        .max()
        .unwrap();
    assert!(most_segments > 4, "the shape no longer has a group over more than four segments");

    let options = WgpuOptions { allow_software: true, max_segment_bytes: Some(SMALL_SEGMENT), ..Default::default() };
    let Some(b) =
        or_skip(WgpuBackend::new(options), "lde_groups_across_more_than_four_segments_match_naive_dft", "REQUIRE_WGPU")
    else {
        return;
    };
    let mut r = rng("lde-spread-groups");
    let n = 1usize << log_n;
    let trace = matrix(&mut r, n * m);
    let params = LdeParams::new(MatrixShape::new(n, m).unwrap(), blowup, 7).unwrap();
    let got = b.download_vec(&b.coset_lde(&b.upload(&trace).unwrap(), &params).unwrap()).unwrap();
    assert_eq!(got, reference::coset_lde(&trace, n, m, blowup, 7), "LDE 2^{log_n} x {m}, blowup {blowup}");
}

/// Freed segments are pooled and reused (never shared between live buffers), counted apart from
/// live bytes, and released by `trim_pool`; a reused segment carries old contents, which every
/// operation overwrites.
#[test]
fn freed_segments_are_pooled_and_reused() {
    both(|b| {
        b.trim_pool();
        let len = 5000;
        let live0 = b.memory().live;
        let first = b.alloc(len).unwrap();
        drop(first);
        let pooled = b.pooled_bytes();
        assert_eq!(pooled, len as u64 * 8, "the freed buffer's segments are pooled");
        assert_eq!(b.memory().live, live0, "pooled bytes are not live");
        // Two live buffers of the same size: the first takes the pooled segments, the second
        // gets new ones; both hold their own data.
        let x = b.upload(&(0..len as u64).collect::<Vec<_>>()).unwrap();
        assert_eq!(b.pooled_bytes(), 0, "the upload reused every pooled segment");
        let y = b.upload(&vec![P + 3; len]).unwrap();
        assert_eq!(b.download_vec(&x).unwrap(), (0..len as u64).collect::<Vec<_>>());
        assert_eq!(b.download_vec(&y).unwrap(), vec![P + 3; len]);
        drop((x, y));
        assert_eq!(b.pooled_bytes(), 2 * len as u64 * 8);
        assert_eq!(b.trim_pool(), 2 * len as u64 * 8, "trim_pool releases everything pooled");
        assert_eq!(b.pooled_bytes(), 0);
    });
}

/// The LDE's twiddle tables stay in the pool between calls (pooled, not live) and serve the next
/// call with the same shape and shift; another shift or shape replaces them; a freed segment of
/// the same size never takes their place; `trim_pool` releases them. Every LDE is checked
/// against the naive DFT, so a table served under the wrong key shows as wrong output.
#[test]
fn lde_tables_are_kept_in_the_pool_between_calls() {
    both(|b| {
        b.trim_pool();
        let mut r = rng("lde-tables");
        let live = b.memory().live;
        let (n, m, blowup) = (64, 3, 2);
        let tables = backend_api::field::LdeTwiddles::bytes_for(6, 1) as u64;
        let lde = |trace: &[u64], shift: u64| {
            let params = LdeParams::new(MatrixShape::new(n, m).unwrap(), blowup, shift).unwrap();
            let got = b.download_vec(&b.coset_lde(&b.upload(trace).unwrap(), &params).unwrap()).unwrap();
            assert_eq!(got, reference::coset_lde(trace, n, m, blowup, shift), "LDE with shift {shift}");
        };
        let trace = matrix(&mut r, n * m);
        lde(&trace, 7);
        assert_eq!(b.memory().live, live, "the tables stayed live");
        // Pooled now: the trace's and the LDE's segments, and the tables.
        let buffers = ((n + n * blowup) * m * 8) as u64;
        assert_eq!(b.pooled_bytes(), buffers + tables, "the tables were not kept");
        // A segment of exactly the tables' size, filled and freed: it must not replace them.
        let junk = b.upload(&vec![P - 1; tables as usize / 8]).unwrap();
        drop(junk);
        lde(&matrix(&mut r, n * m), 7);
        // Another shift (same shape), then the first again: each call gets its own tables.
        lde(&trace, 3);
        lde(&trace, 7);
        assert_eq!(b.memory().live, live);
        // The junk segment is pooled too, beside one set of tables (not one per shift).
        assert_eq!(b.pooled_bytes(), buffers + 2 * tables, "one set of tables is kept, not one per shift");
        assert_eq!(b.trim_pool(), buffers + 2 * tables, "trim_pool released the tables");
        assert_eq!(b.pooled_bytes(), 0);
        lde(&trace, 7);
    });
}

#[test]
fn leaves_match_sha3_blake3_and_the_naive_poseidon2() {
    both(|b| {
        let mut r = rng("leaves");
        // 300 columns: 2400 B rows, three BLAKE3 chunks (4800 B, five, for pairs).
        for (rows, cols) in [(1, 1), (2, 3), (8, 17), (16, 34), (32, 300), (4, 640)] {
            let mat = matrix(&mut r, rows * cols);
            let dev = b.upload(&mat).unwrap();
            let shape = MatrixShape::new(rows, cols).unwrap();
            for kind in HashKind::ALL {
                for layout in LeafLayout::ALL {
                    if (layout == LeafLayout::LambdaVmPairs && rows < 2) || !kind.supports(layout) {
                        continue;
                    }
                    for range in [0..cols, cols / 3..cols, 0..cols.div_ceil(2)] {
                        if range.is_empty() {
                            continue;
                        }
                        let spec = LeafSpec::new(kind, layout, range.clone()).unwrap();
                        let leaves = spec.validate(shape).unwrap();
                        let out = b.hash_leaves(&dev, shape, &spec).unwrap();
                        let got = b.download_vec(&out).unwrap();
                        let digests = reference::leaf_digests(&mat, cols, kind, layout, range.clone());
                        let want = reference::digests_to_words(&digests);
                        assert_eq!(got.len(), want.len(), "{kind} {layout} {rows}x{cols} {range:?}: digests");
                        for leaf in 0..leaves {
                            assert_eq!(
                                got[leaf * 4..leaf * 4 + 4],
                                want[leaf * 4..leaf * 4 + 4],
                                "{kind} {layout} {rows}x{cols} {range:?} leaf {leaf}"
                            );
                        }
                    }
                }
            }
        }
    });
}

#[test]
fn merkle_matches_reference() {
    both(|b| {
        let mut r = rng("merkle");
        for kind in HashKind::ALL {
            for leaves in [1usize, 2, 3, 5, 8, 13, 64, 300] {
                let digests: Vec<[u8; 32]> = (0..leaves).map(|_| r.random()).collect();
                let dev = b.upload(&reference::digests_to_words(&digests)).unwrap();
                let nodes = b.merkle_tree(&dev, kind).unwrap();
                let got = b.download_vec(&nodes).unwrap();
                let want = reference::digests_to_words(&reference::merkle_nodes(&digests, kind));
                assert_eq!(got, want, "{kind} tree over {leaves} leaves");
            }
        }
    });
}

/// Plonky3's known answer (p3-goldilocks, `test_default_goldilocks_poseidon2_width_8`): the
/// permutation of `[0, 1, ..., 7]`, whose first 4 elements are the compression of
/// `[0, 1, 2, 3] || [4, 5, 6, 7]`.
const POSEIDON2_OF_0_TO_7: [u64; 4] = [0x020cf04a1b214d14, 0x84e14aaaeacaed25, 0x1ae0f640e81c7457, 0xa4d204cbaeb0d8a5];

fn permuted(mut state: [u64; 8]) -> [u64; 8] {
    reference::poseidon2::permute(&mut state);
    state
}

/// The WGSL Poseidon2 permutation, on both arithmetic paths, against the naive permutation of
/// `conformance::reference` (explicit 8 x 8 matrices, products in `u128 % p`), through the two
/// kernels that run it on inputs a test chooses whole:
/// - nodes: a tree over 2^k random digests makes each parent `perm(left || right)[0..4]` of 8
///   chosen words, hostile ones (`p`, `p + 1`, `u64::MAX`, ...) included, which must be read mod p;
///   the level above permutes the kernel's own outputs, so every node is checked against a tree
///   built here from `permute` alone, and the known answer of Plonky3 is checked as a tree of 2;
/// - leaves of 4 elements: one block, `perm([x0, x1, x2, x3, 0, 0, 0, 0])[0..4]`;
/// - leaves of 1 to 13 elements: the sponge written out here over `permute` (overwrite the first
///   positions, permute), so the last 4 elements of each permutation, which feed the next block,
///   are checked too.
#[test]
fn poseidon2_permutation_matches_the_naive_reference() {
    both(|b| {
        let mut r = rng("poseidon2 permutation");
        let known = b.upload(&[0, 1, 2, 3, 4, 5, 6, 7]).unwrap();
        let tree = b.download_vec(&b.merkle_tree(&known, HashKind::Poseidon2).unwrap()).unwrap();
        assert_eq!(tree[..4], POSEIDON2_OF_0_TO_7, "Plonky3's known answer");

        let hostile = [0, 1, P - 1, P, P + 1, u64::MAX - 1, u64::MAX];
        let leaves = 256;
        let mut words = matrix(&mut r, leaves * DIGEST_WORDS);
        // Whole states of hostile words, and one of each hostile word everywhere else.
        words[..8].fill(u64::MAX);
        words[8..16].fill(P);
        for (i, &h) in hostile.iter().enumerate() {
            words[16 + 8 * i..24 + 8 * i].fill(h);
        }
        let dev = b.upload(&words).unwrap();
        let got = b.download_vec(&b.merkle_tree(&dev, HashKind::Poseidon2).unwrap()).unwrap();
        let mut want = vec![0u64; (2 * leaves - 1) * DIGEST_WORDS];
        want[(leaves - 1) * DIGEST_WORDS..].copy_from_slice(&words);
        for p in (0..leaves - 1).rev() {
            let children: [u64; 8] = want[(2 * p + 1) * 4..(2 * p + 3) * 4].try_into().unwrap();
            want[p * 4..p * 4 + 4].copy_from_slice(&permuted(children)[..4]);
        }
        assert_eq!(got.len(), want.len());
        for p in 0..leaves - 1 {
            assert_eq!(got[p * 4..p * 4 + 4], want[p * 4..p * 4 + 4], "node {p}: perm(left || right)[0..4]");
        }

        for cols in 1..=13 {
            let rows = 64;
            let mut mat = matrix(&mut r, rows * cols);
            for (i, &h) in hostile.iter().enumerate() {
                mat[i * cols..(i + 1) * cols].fill(h);
            }
            let dev = b.upload(&mat).unwrap();
            let shape = MatrixShape::new(rows, cols).unwrap();
            let spec = LeafSpec::new(HashKind::Poseidon2, LeafLayout::Rows, 0..cols).unwrap();
            let got = b.download_vec(&b.hash_leaves(&dev, shape, &spec).unwrap()).unwrap();
            for (row, elements) in mat.chunks_exact(cols).enumerate() {
                let want = if cols == 4 {
                    permuted(std::array::from_fn(|i| if i < 4 { elements[i] } else { 0 }))
                } else {
                    let mut state = [0u64; 8];
                    for block in elements.chunks(4) {
                        state[..block.len()].copy_from_slice(block);
                        state = permuted(state);
                    }
                    state
                };
                assert_eq!(got[row * 4..row * 4 + 4], want[..4], "leaf of {cols} elements, row {row}");
            }
        }
    });
}

/// The premises of the Poseidon2 kernels' speed and of [`backend_wgpu::SOFTWARE_MAX_POSEIDON2_LEAF_BYTES`],
/// checked on naga's IR of the hash module (both arithmetic files): the permutation's functions
/// contain no loop (a software adapter counts loop iterations per invocation), and no round
/// constant is indexed at run time (naga copies a constant array into a local variable for every
/// such access, which GPUs keep in local memory): every `P2_*` constant is folded to its value.
#[test]
fn the_poseidon2_permutation_has_no_loop_and_folds_its_constants() {
    use shaders::wgsl::*;
    use wgpu::naga;
    fn has_loop(block: &naga::Block) -> bool {
        block.iter().any(|st| match st {
            naga::Statement::Loop { .. } => true,
            naga::Statement::Block(b) => has_loop(b),
            naga::Statement::If { accept, reject, .. } => has_loop(accept) || has_loop(reject),
            naga::Statement::Switch { cases, .. } => cases.iter().any(|c| has_loop(&c.body)),
            _ => false,
        })
    }
    for field in [GOLDILOCKS, GOLDILOCKS_INT64] {
        let src = [WINDOW, field, KECCAK, BLAKE3, POSEIDON2_CONSTANTS, POSEIDON2, HASH].join("\n");
        let module = naga::front::wgsl::parse_str(&src).expect("hash.wgsl parses");
        let mut permutation = 0;
        for (_, f) in module.functions.iter() {
            let name = f.name.as_deref().unwrap_or("");
            if !(name.starts_with("p2_") || name == "poseidon2_permute") {
                continue;
            }
            permutation += 1;
            assert!(!has_loop(&f.body), "{name} has a loop");
            for (_, e) in f.expressions.iter() {
                if let naga::Expression::Constant(c) = e {
                    panic!("{name} reads the constant {:?} at run time", module.constants[*c].name);
                }
            }
        }
        assert_eq!(permutation, 8, "the permutation's functions (p2_*, poseidon2_permute)");
    }
}

#[test]
fn transpose_matches_naive() {
    both(|b| {
        let mut r = rng("transpose");
        for (rows, cols, cap_rows) in
            [(1, 1, 1), (5, 3, 1), (64, 8, 4), (100, 7, 3), (129, 33, 16), (1000, 9, 64), (256, 300, 8)]
        {
            let host = matrix(&mut r, rows * cols);
            let mut dev = b.upload(&host).unwrap();
            let base = b.memory().live;
            b.tracker().reset_peak();
            let cap = (cols + 1) * 8 * cap_rows;
            b.transpose_in_place(&mut dev, MatrixShape::new(rows, cols).unwrap(), cap).unwrap();
            b.synchronize().unwrap();
            assert!(b.memory().peak - base <= cap, "scratch over the cap");
            assert_eq!(b.memory().live, base);
            let got = b.download_vec(&dev).unwrap();
            let want: Vec<u64> = (0..rows * cols).map(|i| host[(i % rows) * cols + i / rows]).collect();
            assert_eq!(got, want, "transpose {rows} x {cols} cap {cap_rows} rows");
        }
    });
}

#[test]
fn copies_and_downloads() {
    both(|b| {
        let mut r = rng("copies");
        let src_host = matrix(&mut r, 5000);
        let src = b.upload(&src_host).unwrap();
        let mut dst = b.upload(&vec![3u64; 7000]).unwrap();
        let copies = [
            CopyRange::new(0, 0, 1),
            CopyRange::new(10, 100, 4100),
            CopyRange::new(4900, 6900, 100),
            CopyRange::new(7, 5000, 0),
        ];
        b.batched_copy(&src, &mut dst, &copies).unwrap();
        let snapshot = b.queue_download(&dst).unwrap();
        let mut want = vec![3u64; 7000];
        for c in copies {
            want[c.dst..c.dst + c.len].copy_from_slice(&src_host[c.src..c.src + c.len]);
        }
        // Within one buffer, crossing segments, then the snapshot must not see it.
        b.batched_copy_within(&mut dst, &[CopyRange::new(100, 5100, 1500)]).unwrap();
        assert_eq!(snapshot.wait().unwrap(), want);
        want.copy_within(100..1600, 5100);
        assert_eq!(b.download_vec(&dst).unwrap(), want);
        let mut part = vec![0u64; 2000];
        b.download(&dst, 4000, &mut part).unwrap();
        assert_eq!(part, want[4000..6000]);
        let err = b.download(&dst, 6000, &mut part).unwrap_err();
        assert!(matches!(err, Error::OutOfBounds { .. }), "{err}");
        let err = b.batched_copy_within(&mut dst, &[CopyRange::new(0, 10, 20)]).unwrap_err();
        assert!(matches!(err, Error::OverlappingCopies { .. }), "{err}");
        let _ = (TreeShape::new(1), DIGEST_WORDS, dst.len());
    });
}

/// `bit_reversed_rows` where the matrix is larger than one dispatch binds, against rows picked one
/// by one: on 8 KiB (1024-element) segments, rows of 33 elements whose blocks of 64 rows span
/// three segments (so a dispatch takes one residue of the row index mod 2^7), a range that starts
/// and ends mid-block, at offsets in both buffers; and rows wider than one segment (1,500 and
/// 2,100 elements), which go through the copy shader's pieces. Every other destination word keeps
/// its value.
#[test]
fn bit_reversed_rows_across_many_segments() {
    both(|b| {
        let mut r = rng("bit_reversed_rows_across_many_segments");
        for (rows, cols, range, src_at, dst_at) in
            [(1 << 13, 33, 5..(1 << 13) - 3, 3, 7), (8, 1500, 1..7, 5, 2), (4, 2100, 0..4, 0, 1)]
        {
            let shape = MatrixShape::new(rows, cols).unwrap();
            let src_host = matrix(&mut r, src_at + shape.len());
            let dst_host = matrix(&mut r, dst_at + range.len() * cols + 3);
            let src = b.upload(&src_host).unwrap();
            let mut dst = b.upload(&dst_host).unwrap();
            b.bit_reversed_rows(&src, src_at, shape, range.clone(), &mut dst, dst_at).unwrap();
            let mut want = dst_host.clone();
            for (i, row) in range.clone().enumerate() {
                let from = src_at + reference::bit_reverse(row, rows.trailing_zeros()) * cols;
                want[dst_at + i * cols..dst_at + (i + 1) * cols].copy_from_slice(&src_host[from..from + cols]);
            }
            assert!(b.download_vec(&dst).unwrap() == want, "rows {range:?} of {shape}");
        }
    });
}

/// Row products of rows wide enough that a call runs over two ranges of columns (8 vectors: 3,640
/// columns per range, llvmpipe's loop budget), the second adding to the first (on the adapter's
/// segments; 8 KiB segments hold rows of at most 1,024 elements), and of 1 to 64 columns, where
/// each row has 1 to 16 lanes and a workgroup 16 to 256 rows, the last ones partly past the
/// matrix. Non-canonical values included, against the reference.
#[test]
fn row_products_over_column_ranges_and_lane_counts() {
    both(|b| {
        let mut r = rng("row_products_over_column_ranges_and_lane_counts");
        let wide = 5000.min(b.segment_elems());
        for (rows, cols, k) in [(3, wide, 8), (300, 1, 2), (77, 9, 3), (517, 64, 1)] {
            let host = matrix(&mut r, rows * cols);
            let coeffs = matrix(&mut r, k * cols);
            let m = b.upload(&host).unwrap();
            let mut out = vec![0u64; rows * k];
            b.row_dot_products(&m, MatrixShape::new(rows, cols).unwrap(), &coeffs, &mut out).unwrap();
            assert!(out == reference::row_dot_products(&host, cols, &coeffs), "{rows} x {cols}, {k} vectors");
        }
    });
}

/// Column products whose passes the host cuts: on 8 KiB segments, 600 columns of 3 vectors (a
/// chunk's 1,800 sums exceed one segment, so the first pass splits its columns, and the second
/// pass adds one chunk per dispatch, each after the first adding to the products); on both
/// segment sizes, 2^14 strided rows of two columns (hundreds of chunks). Non-canonical values
/// included, against the reference.
#[test]
fn column_products_in_many_dispatches() {
    both(|b| {
        let mut r = rng("column_products_in_many_dispatches");
        for (rows, cols, k, first, step, count) in [(300, 600, 3, 1, 3, 99), (1 << 15, 2, 4, 0, 2, 1 << 14)] {
            let host = matrix(&mut r, rows * cols);
            let weights = matrix(&mut r, k * count);
            let m = b.upload(&host).unwrap();
            let mut out = vec![0u64; k * cols];
            let selection = RowStride::new(first, step, count);
            b.column_dot_products(&m, MatrixShape::new(rows, cols).unwrap(), selection, &weights, &mut out).unwrap();
            let want = reference::column_dot_products(&host, cols, first, step, count, &weights);
            assert!(out == want, "{rows} x {cols}, {selection}, {k} vectors");
        }
    });
}

/// Reduced openings at the largest degree and point count (8 and 4: the most loop iterations an
/// invocation runs, which llvmpipe would silently cut short past its limit), and of degree 3 over
/// 1,024 rows, whose dispatches on 8 KiB segments (341 rows each) end inside an invocation's eight
/// rows; accumulating onto non-canonical words, against the reference's Gaussian elimination.
#[test]
fn reduced_openings_at_the_largest_degree_and_across_dispatches() {
    both(|b| {
        let mut r = rng("reduced_openings_at_the_largest_degree_and_across_dispatches");
        for (rows, cols, d, n) in [(64, 3, 8, 4), (1024, 5, 3, 2)] {
            let host = matrix(&mut r, rows * cols);
            let coeffs = matrix(&mut r, d * cols);
            let raw: Vec<[Vec<u64>; 3]> =
                (0..n).map(|_| [matrix(&mut r, d * d), matrix(&mut r, d), matrix(&mut r, d * d)]).collect();
            let points: Vec<ReductionPoint> =
                raw.iter().map(|[z, y, s]| ReductionPoint::new(z, y, s).unwrap()).collect();
            let refs: Vec<reference::OpeningPoint<'_>> = raw.iter().map(|[z, y, s]| (&z[..], &y[..], &s[..])).collect();
            let before = matrix(&mut r, rows * d);
            let m = b.upload(&host).unwrap();
            let mut acc = b.upload(&before).unwrap();
            let call = ReductionCall { coeffs: &coeffs, shift: 7, points: &points, accumulate: true };
            b.reduce_openings(&m, MatrixShape::new(rows, cols).unwrap(), &call, &mut acc).unwrap();
            let want = reference::reduce_openings(&host, cols, &coeffs, 7, &refs, Some(&before));
            assert!(b.download_vec(&acc).unwrap() == want, "{rows} x {cols}, degree {d}, {n} points");
        }
    });
}

/// A program of `len` instructions over eight registers: columns of both rows, a value and the
/// first-row selector at the start, random arithmetic with a column reloaded every few
/// instructions (so that no chain of products collapses to zero), `constraints` folds spread over
/// it, and the last-row and transition selectors only at the end.
fn quotient_program(r: &mut ChaCha8Rng, len: usize, cols: usize, constraints: usize) -> ConstraintProgram {
    let column = |r: &mut ChaCha8Rng, dst| Instr::Column { dst, col: r.random_range(0..cols) as u32, next: r.random() };
    let mut instrs: Vec<Instr> = (4..8).map(|dst| column(r, dst)).collect();
    instrs.extend([
        Instr::Column { dst: 0, col: 0, next: false },
        Instr::Column { dst: 1, col: (cols - 1) as u32, next: true },
        Instr::Value { dst: 2, index: 0 },
        Instr::Selector { dst: 3, which: Selector::FirstRow },
    ]);
    let every = len / constraints;
    let mut folded = 0;
    while instrs.len() + 4 < len {
        let (dst, a, b) = (r.random_range(0..8), r.random_range(0..8), r.random_range(0..8));
        instrs.push(match r.random_range(0..8) {
            0 => column(r, dst),
            1 => Instr::Neg { dst, a },
            2 | 3 => Instr::Add { dst, a, b },
            4 => Instr::Sub { dst, a, b },
            _ => Instr::Mul { dst, a, b },
        });
        if instrs.len().is_multiple_of(every) && folded + 1 < constraints {
            instrs.push(Instr::Fold { src: a, constraint: folded as u32 });
            folded += 1;
        }
    }
    instrs.extend([
        Instr::Selector { dst: 0, which: Selector::LastRow },
        Instr::Selector { dst: 1, which: Selector::Transition },
        Instr::Mul { dst: 0, a: 0, b: 1 },
        Instr::Fold { src: 0, constraint: folded as u32 },
    ]);
    ConstraintProgram::new(&instrs).unwrap()
}

/// The quotient of calls that one dispatch does not cover, against the naive reference on both
/// segment sizes: 2^17 points, more than the 2^16 one dispatch evaluates; and a program of 3 x 2^15
/// instructions, more than one invocation may loop over on llvmpipe (which silently stops at
/// 65,535 iterations), so that it runs in ranges of instructions that carry registers (the
/// first-row selector read in the first) and accumulators across dispatches.
#[test]
fn quotient_beyond_one_dispatch_matches_the_naive_reference() {
    let mut r = rng("quotient");
    // (log2 n, log2 q, LDE rows per point, columns, d, instructions, constraints)
    for (log_n, log_q, stride, cols, d, len, constraints) in [(15, 17, 1, 3, 2, 64, 3), (4, 6, 2, 4, 3, 3 << 15, 5)] {
        let shape = MatrixShape::new((1 << log_q) * stride, cols).unwrap();
        let lde = matrix(&mut r, shape.len());
        let program = quotient_program(&mut r, len, cols, constraints);
        let (values, alpha_powers) = (matrix(&mut r, 1), matrix(&mut r, constraints * d));
        let domain = QuotientDomain::new(log_n, log_q, P + 7).unwrap();
        let call = QuotientCall { program: &program, domain, values: &values, alpha_powers: &alpha_powers };
        let expected = reference::quotient_values(&lde, cols, &program, domain, &values, &alpha_powers);
        both(|b| {
            let dev = b.upload(&lde).unwrap();
            let mut out = b.alloc(expected.len()).unwrap();
            b.quotient_values(&dev, shape, &call, &mut out).unwrap();
            assert!(
                b.download_vec(&out).unwrap() == expected,
                "quotient of {len} instructions at 2^{log_q} points over a {shape} LDE, d {d}, {} segments of {}",
                dev.len().div_ceil(b.segment_elems()),
                b.segment_elems()
            );
        });
    }
}

/// The two backends run the arithmetic paths their options ask for: the portable one never uses
/// `SHADER_INT64`, the default one uses it exactly where the adapter offers it. Printed, so a log
/// says which paths the other tests covered.
#[test]
fn arithmetic_paths() {
    let (Some(full), Some(small)) = (backend(false), backend(true)) else { return };
    assert!(!small.uses_int64(), "portable_arithmetic: true must keep u32-pair arithmetic");
    assert_eq!(full.uses_int64(), full.adapter_has_int64(), "the default uses SHADER_INT64 exactly where offered");
    eprintln!(
        "backend-wgpu arithmetic paths: default backend {}, portable backend u32 pairs",
        if full.uses_int64() { "native u64 (SHADER_INT64)" } else { "u32-pair (no SHADER_INT64 on this adapter)" }
    );
}

/// `prepare_kernels` creates, in parallel, exactly the pipelines a commit with that hash
/// launches, skips those already made (a second call is empty, another hash adds only its two
/// kernels), and the pipelines it made give the naive LDE's bytes.
#[test]
fn prepare_kernels_creates_each_commit_pipeline_once() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    // A backend of its own: the shared ones already hold pipelines from other tests.
    let made = WgpuBackend::new(WgpuOptions { allow_software: true, ..Default::default() });
    let Some(b) = or_skip(made, "backend-wgpu prepare_kernels test", "REQUIRE_WGPU") else { return };
    let names = |v: Vec<backend_wgpu::PipelinePrep>| {
        let mut n: Vec<&str> = v.iter().map(|p| p.kernel).collect();
        n.sort_unstable();
        n
    };
    assert_eq!(
        names(b.prepare_kernels(HashKind::Keccak256).unwrap()),
        [
            "copy_pieces",
            "lde_scale",
            "leaves_keccak",
            "merkle_keccak",
            "merkle_pad",
            "ntt_pass",
            "ntt_pass_x2",
            "transpose_block"
        ]
    );
    assert!(b.prepare_kernels(HashKind::Keccak256).unwrap().is_empty(), "pipelines made twice");
    assert_eq!(names(b.prepare_kernels(HashKind::Blake3).unwrap()), ["leaves_blake3", "merkle_blake3"]);
    assert_eq!(names(b.prepare_kernels(HashKind::Poseidon2).unwrap()), ["leaves_poseidon2", "merkle_poseidon2"]);
    let mut r = rng("prepared");
    let (n, m, blowup, shift) = (64, 5, 4, 7);
    let trace = matrix(&mut r, n * m);
    let dev = b.upload(&trace).unwrap();
    let params = LdeParams::new(MatrixShape::new(n, m).unwrap(), blowup, shift).unwrap();
    let got = b.download_vec(&b.coset_lde(&dev, &params).unwrap()).unwrap();
    assert_eq!(got, reference::coset_lde(&trace, n, m, blowup, shift));
}

/// `prepare_buffer` leaves its segments in the pool, and an allocation of the same length takes
/// them all (the pool empties, nothing new is created beyond them); the bytes written into the
/// reused buffer read back.
#[test]
fn a_prepared_buffer_is_reused_by_the_next_allocation() {
    both(|b| {
        b.trim_pool();
        let live = b.memory().live;
        let len = 3 * b.segment_elems() / 2 + 7;
        b.prepare_buffer(len).unwrap();
        assert_eq!(b.memory().live, live, "prepare_buffer kept a live buffer");
        assert_eq!(b.pooled_bytes(), (len * 8) as u64, "the segments of {len} elements wait in the pool");
        let data = matrix(&mut rng("prepared buffer"), len);
        let dev = b.upload(&data).unwrap();
        assert_eq!(b.pooled_bytes(), 0, "the allocation did not take the prepared segments");
        assert_eq!(b.download_vec(&dev).unwrap(), data);
        match b.prepare_buffer(usize::MAX) {
            Err(e) => assert!(matches!(e, Error::SizeOverflow { .. }), "{e}"),
            Ok(()) => panic!("an absurd buffer was prepared"),
        }
        assert_eq!(b.memory().live, live + len * 8);
    });
}
