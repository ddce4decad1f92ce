//! wgpu against the CPU backend (the oracle) through the prover's own `commit`: the column-major
//! LDE bytes, every root and every node array must be equal, for both hashes, both layouts and a
//! split tree.
//!
//! `commit_parity_small` runs wherever an adapter exists (CI's llvmpipe included).
//! `commit_parity_production` is the production shape, 2^21 x 316 at blowup 2 (a 10.6 GB LDE, so
//! every buffer is several wgpu buffers on an adapter with a 2 GiB binding limit); it is
//! `#[ignore]`d because the CPU oracle takes a while: run it with `--include-ignored` on a GPU.
//! It also checks the tracker's peak against the memory model plus 1%.
//!
//! Without an adapter each test prints `SKIPPED`; `REQUIRE_WGPU=1` makes that a failure.
#![cfg(feature = "wgpu")]

use backend_api::{Backend, HashKind, LeafLayout, MatrixShape};
use backend_cpu::CpuBackend;
use backend_wgpu::{WgpuBackend, WgpuOptions};
use prover::{CommitParams, NoProgress, TraceInput};

fn wgpu_or_skip(test: &str) -> Option<WgpuBackend> {
    match WgpuBackend::new(WgpuOptions { allow_software: true, ..Default::default() }) {
        Ok(b) => Some(b),
        Err(e) => {
            assert!(std::env::var("REQUIRE_WGPU").as_deref() != Ok("1"), "REQUIRE_WGPU=1 but {e}");
            eprintln!("SKIPPED parity_wgpu::{test}: {e} (set REQUIRE_WGPU=1 to make this a failure)");
            None
        }
    }
}

struct Case {
    hash: HashKind,
    layout: LeafLayout,
    split: Option<usize>,
}

const CASES: [Case; 4] = [
    Case { hash: HashKind::Keccak256, layout: LeafLayout::Rows, split: None },
    Case { hash: HashKind::Blake3, layout: LeafLayout::Rows, split: None },
    Case { hash: HashKind::Keccak256, layout: LeafLayout::Rows, split: Some(100) },
    Case { hash: HashKind::Blake3, layout: LeafLayout::LambdaVmPairs, split: Some(200) },
];

/// Commits one trace on both backends for every case and compares the LDE, the roots and trees.
fn compare(gpu: &WgpuBackend, rows: usize, cols: usize, blowup: usize, cases: &[Case], measure: bool) {
    let shape = MatrixShape::new(rows, cols).unwrap();
    let trace = prover::synthetic_trace(shape, 0x5eed_0000 + rows as u64 + cols as u64);
    let cpu = CpuBackend::new();
    let mut cpu_lde: Option<Vec<u64>> = None;
    let device = gpu.info().device;
    for case in cases {
        let params =
            CommitParams { blowup, hash: case.hash, layout: case.layout, split: case.split, ..Default::default() };
        let what = format!("{rows} x {cols} blowup {blowup} {} {} split {:?}", case.hash, case.layout, case.split);
        let t = std::time::Instant::now();
        let c_cpu = prover::commit(&cpu, TraceInput::host(&trace, shape), &params, &NoProgress).unwrap();
        let cpu_secs = t.elapsed().as_secs_f64();
        if cpu_lde.is_none() {
            cpu_lde = Some(cpu.download_vec(&c_cpu.lde).unwrap());
        }
        let plan = prover::CommitPlan::new(rows, cols, &params).unwrap();
        gpu.tracker().reset_peak();
        let base = gpu.memory().live;
        let t = std::time::Instant::now();
        let c_gpu = prover::commit(gpu, TraceInput::host(&trace, shape), &params, &NoProgress).unwrap();
        gpu.synchronize().unwrap();
        let gpu_secs = t.elapsed().as_secs_f64();
        let peak = gpu.memory().peak - base;
        let gpu_words = gpu.download_vec(&c_gpu.lde).unwrap();
        let cpu_words = cpu_lde.as_ref().unwrap();
        println!(
            "{what} on {device}: roots cpu {:?} wgpu {:?}; commit {cpu_secs:.2} s cpu, {gpu_secs:.2} s wgpu \
             (host upload included); wgpu tracker peak {peak} B, model {} B",
            c_cpu.roots.iter().map(|r| backend_api::hex(r)).collect::<Vec<_>>(),
            c_gpu.roots.iter().map(|r| backend_api::hex(r)).collect::<Vec<_>>(),
            plan.model.total(),
        );
        if let Some(i) = (0..cpu_words.len()).find(|&i| cpu_words[i] != gpu_words[i]) {
            panic!(
                "{what}: column-major LDE differs first at element {i}: cpu {:#x} wgpu {:#x}",
                cpu_words[i], gpu_words[i]
            );
        }
        assert_eq!(cpu_words.len(), gpu_words.len(), "{what}: LDE lengths");
        assert_eq!(c_cpu.roots, c_gpu.roots, "{what}: roots");
        for (tc, tg) in c_cpu.trees.iter().zip(&c_gpu.trees) {
            assert_eq!(cpu.download_vec(tc).unwrap(), gpu.download_vec(tg).unwrap(), "{what}: node arrays");
        }
        if measure {
            let limit = plan.model.total() as f64 * 1.01;
            assert!(peak as f64 <= limit, "{what}: tracker peak {peak} B over the model + 1% ({limit:.0} B)");
        }
    }
}

#[test]
fn commit_parity_small() {
    let Some(gpu) = wgpu_or_skip("commit_parity_small") else { return };
    compare(&gpu, 1 << 8, 316, 2, &CASES, false);
    compare(&gpu, 1 << 6, 3, 4, &CASES[..2], false);
    assert_eq!(gpu.memory().live, 0, "the commits left device memory allocated");
}

#[test]
#[ignore = "production shape: 2^21 x 316 at blowup 2, a 10.6 GB LDE; run with --include-ignored on a GPU"]
fn commit_parity_production() {
    let Some(gpu) = wgpu_or_skip("commit_parity_production") else { return };
    compare(&gpu, 1 << 21, 316, 2, &CASES[..2], true);
    assert_eq!(gpu.memory().live, 0, "the commits left device memory allocated");
}
