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
    parity::compare(&gpu, "wgpu", (1 << 6, 3, 4), &CASES[..2], None);
    assert_eq!(gpu.memory().live, 0, "the commits left device memory allocated");
}

#[test]
#[ignore = "production shape: 2^21 x 316 at blowup 2, a 10.6 GB LDE; run with --include-ignored on a GPU"]
fn commit_parity_production() {
    let Some(gpu) = wgpu_or_skip("commit_parity_production") else { return };
    parity::compare(&gpu, "wgpu", (1 << 21, 316, 2), &CASES[..2], Some(&mut TrackerOnly));
    assert_eq!(gpu.memory().live, 0, "the commits left device memory allocated");
}
