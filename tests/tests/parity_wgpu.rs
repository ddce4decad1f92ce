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

use backend_api::Backend as _;
use backend_wgpu::WgpuBackend;
use conformance::parity::{self, CASES, TrackerOnly};

fn wgpu_or_skip(test: &str) -> Option<WgpuBackend> {
    parity::or_skip(conformance::wgpu_setups::adapter_segments(), &format!("parity_wgpu::{test}"), "REQUIRE_WGPU")
}

#[test]
fn commit_parity_small() {
    let Some(gpu) = wgpu_or_skip("commit_parity_small") else { return };
    parity::compare(&gpu, "wgpu", (1 << 8, 316, 2), &CASES, None);
    parity::compare(&gpu, "wgpu", (1 << 6, 3, 4), &CASES[..3], None);
    assert_eq!(gpu.memory().live, 0, "the commits left device memory allocated");
}

#[test]
#[ignore = "production shape: 2^21 x 316 at blowup 2, a 10.6 GB LDE; run with --include-ignored on a GPU"]
fn commit_parity_production() {
    let Some(gpu) = wgpu_or_skip("commit_parity_production") else { return };
    parity::compare(&gpu, "wgpu", (1 << 21, 316, 2), &CASES[..3], Some(&mut TrackerOnly));
    assert_eq!(gpu.memory().live, 0, "the commits left device memory allocated");
}

/// The commit that came back with a wrong root on Mesa's llvmpipe (4 x 3 at blowup 16,384:
/// `prover commit --log-rows 2 --cols 3 --blowup 16384`), and a one-row table at blowup 2^18.
#[test]
fn commit_parity_extreme_blowups() {
    let Some(gpu) = wgpu_or_skip("commit_parity_extreme_blowups") else { return };
    parity::compare(&gpu, "wgpu", (4, 3, 1 << 14), &CASES[..1], None);
    parity::compare(&gpu, "wgpu", (1, 2, 1 << 18), &CASES[1..2], None);
    assert_eq!(gpu.memory().live, 0, "the commits left device memory allocated");
}

/// Commits of tall, narrow tables under the smallest scratch caps (one row plus one run, and a few
/// times that), whose in-place transposes are thousands of tiny copy batches: the column-major
/// LDE and the roots must be the CPU's (`prover commit --log-rows 14 --cols 2 --blowup 1
/// --scratch-cap 24 --out f` wrote 55 wrong bytes on llvmpipe).
#[test]
fn commit_parity_under_tiny_scratch_caps() {
    use commit::{CommitParams, NoProgress, TraceInput};
    let Some(gpu) = wgpu_or_skip("commit_parity_under_tiny_scratch_caps") else { return };
    let cpu = backend_cpu::CpuBackend::new();
    for (log_rows, cols, blowup, cap) in [(14, 2, 1, 24), (14, 2, 1, 72), (13, 4, 2, 40), (12, 3, 2, 32)] {
        let shape = backend_api::MatrixShape::new(1 << log_rows, cols).unwrap();
        let trace = commit::synthetic_trace(shape, 0x5eed_0000 + log_rows as u64 + cols as u64);
        let params = CommitParams { blowup, scratch_cap: cap, ..Default::default() };
        let what = format!("2^{log_rows} x {cols} at blowup {blowup} under a {cap} B scratch cap");
        let c_cpu = commit::commit(&cpu, TraceInput::host(&trace, shape), &params, &NoProgress).unwrap();
        let c_gpu = commit::commit(&gpu, TraceInput::host(&trace, shape), &params, &NoProgress)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let (want, got) = (cpu.download_vec(&c_cpu.lde).unwrap(), gpu.download_vec(&c_gpu.lde).unwrap());
        let wrong = want.iter().zip(&got).filter(|(w, g)| w != g).count();
        assert!(wrong == 0 && want.len() == got.len(), "{what}: {wrong} of {} LDE elements differ", want.len());
        assert_eq!(c_cpu.roots, c_gpu.roots, "{what}: roots");
    }
    assert_eq!(gpu.memory().live, 0, "the commits left device memory allocated");
}
