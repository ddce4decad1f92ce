//! The wall time of the wgpu backend's small operations, the ones a Plonky3 proof's openings
//! and FRI rounds issue by the dozen: a download of a few KiB, an upload, an allocation, a
//! small Merkle tree. Each figure is the median of `--iters` calls (default 50) after one warm-up.
//!
//! ```sh
//! cargo run --release -p wgpu-probes --bin op_latency -- [--software] [--iters 50]
//! ```

use std::time::Instant;

use backend_api::{Backend, HashKind, LeafLayout, LeafSpec, MatrixShape, TreeShape};
use backend_wgpu::{WgpuBackend, WgpuOptions};

fn median_ms(iters: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut t: Vec<f64> = (0..iters)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let software = args.iter().any(|a| a == "--software");
    let iters = args.iter().position(|a| a == "--iters").and_then(|i| args.get(i + 1)).map_or(Ok(50), |s| s.parse())?;
    let b = WgpuBackend::new(WgpuOptions { allow_software: software, ..WgpuOptions::default() })?;
    println!("device: {}", b.info().device);
    for words in [4usize, 8 << 10, 1 << 20] {
        let host: Vec<u64> = (0..words as u64).collect();
        let mut buf = b.upload(&host)?;
        let mut out = vec![0u64; words];
        let down = median_ms(iters, || b.download(&buf, 0, &mut out).expect("download"));
        assert_eq!(out, host);
        let up = median_ms(iters, || b.write(&mut buf, 0, &host).expect("write"));
        let alloc = median_ms(iters, || drop(b.alloc(words).expect("alloc")));
        println!("{words} words: download {down:.3} ms, write {up:.3} ms, alloc+free {alloc:.3} ms");
    }
    // A small tree: 2^10 leaves of 4 columns, Keccak-256.
    let rows = 1 << 10;
    let shape = MatrixShape::new(rows, 4)?;
    let host: Vec<u64> = (0..(rows * 4) as u64).collect();
    let m = b.upload(&host)?;
    let tree = TreeShape::new(rows)?;
    let spec = LeafSpec::new(HashKind::Keccak256, LeafLayout::Rows, 0..4)?;
    let mut nodes = b.alloc(tree.words())?;
    let leaves =
        median_ms(iters, || b.hash_leaves_into(&m, shape, &spec, &mut nodes, tree.first_leaf()).expect("leaves"));
    let merkle = median_ms(iters, || b.merkle_tree_in_place(&mut nodes, tree, HashKind::Keccak256).expect("tree"));
    let sync = median_ms(iters, || b.synchronize().expect("sync"));
    println!("2^10 x 4 Keccak leaves {leaves:.3} ms, tree {merkle:.3} ms, synchronize {sync:.3} ms");
    fri_rounds(&b)
}

/// The operations of FRI's commit phase as `BackendExtensionMmcs` issues them, one round per
/// size from 2^18 folded elements down: fold (degree-2 extension), Keccak leaves over rows of two
/// folded elements, the tree, the download of its top (at most 2^11 - 1 digests). Each step
/// timed alone, wall clock, the round's first and only call (as in a proof).
fn fri_rounds(b: &WgpuBackend) -> Result<(), Box<dyn std::error::Error>> {
    const D: usize = 2;
    let beta = [3u64, 7, 5, 3];
    let mut total = [0f64; 4];
    for log_n in (2..=18).rev() {
        let n = 1usize << log_n;
        let input: Vec<u64> = (0..(2 * n * D) as u64).map(|x| x.wrapping_mul(0x9e37_79b9_7f4a_7c15)).collect();
        let input = b.upload(&input)?;
        b.synchronize()?;
        let mut out = b.alloc(n * D)?;
        let t = Instant::now();
        b.fri_fold(&input, &beta, None, &mut out)?;
        b.synchronize()?;
        let fold = t.elapsed().as_secs_f64() * 1e3;
        let rows = n / 2;
        let shape = MatrixShape::new(rows, 2 * D)?;
        let tree = TreeShape::new(rows)?;
        let spec = LeafSpec::new(HashKind::Keccak256, LeafLayout::Rows, 0..2 * D)?;
        let mut nodes = b.alloc(tree.words())?;
        let t = Instant::now();
        b.hash_leaves_into(&out, shape, &spec, &mut nodes, tree.first_leaf())?;
        b.synchronize()?;
        let leaves = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        b.merkle_tree_in_place(&mut nodes, tree, HashKind::Keccak256)?;
        b.synchronize()?;
        let merkle = t.elapsed().as_secs_f64() * 1e3;
        let top = tree.words().min(2047 * 4);
        let mut words = vec![0u64; top];
        let t = Instant::now();
        b.download(&nodes, 0, &mut words)?;
        let down = t.elapsed().as_secs_f64() * 1e3;
        println!(
            "FRI round 2^{log_n}: fold {fold:.3} ms, leaves {leaves:.3} ms, tree {merkle:.3} ms, top down {down:.3} ms"
        );
        for (a, x) in total.iter_mut().zip([fold, leaves, merkle, down]) {
            *a += x;
        }
    }
    println!(
        "FRI rounds total: fold {:.1} ms, leaves {:.1} ms, tree {:.1} ms, top down {:.1} ms",
        total[0], total[1], total[2], total[3]
    );
    Ok(())
}
