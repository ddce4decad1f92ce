//! The CUDA backend's commits, through the kernels it ships, equal the CPU backend's.

use backend_api::HashKind;
use commit::{Admission, CommitParams};

use backend_cpu::CpuBackend;

use super::table::{Table, commit_table, read_back};
use crate::{Context as _, Failure, Gen, Outcome};

/// The CUDA backend's commits are bit-identical to the CPU backend's, for both hashes: the LDE's
/// radix-16 register passes (several 2^11-row tiles, two passes per direction) and the leaves
/// hashed beside the in-place transpose's block pass, with its fused run-pass kernel.
///
/// The table, 4096 x 16 at blowup 4 (a 2^14-row LDE) with an 8-row scratch cap, is large enough
/// for the NTT to span several 2^11-row tiles and for the transpose to run thousands of copies; its
/// expected bytes come from the CPU backend (itself checked against the naive references by the
/// conformance suite and by [`oracle`](super::table::oracle) on smaller tables), since a naive LDE this size would take
/// minutes.
///
/// # Errors
/// A commit whose bytes differ.
pub fn cuda_launch_configurations(backend: &backend_cuda::CudaBackend) -> Outcome {
    let mut g = Gen::new("cuda_launch_configurations");
    let table = Table::new(
        &mut g,
        "launch configurations",
        4096,
        16,
        CommitParams {
            blowup: 4,
            split: Some(5),
            keep_trace_snapshot: true,
            scratch_cap: 17 * 8 * 8,
            ..CommitParams::default()
        },
    );
    // The other hash's fused leaf kernel, against the CPU's commit with that hash.
    let blake3 = Table::new(
        &mut g,
        "launch configurations, blake3",
        4096,
        16,
        CommitParams { hash: HashKind::Blake3, ..table.params.clone() },
    );
    let cpu = CpuBackend::new();
    let oracle = |t: &Table| {
        let c = commit_table(&cpu, t, &Admission::new(usize::MAX)).map_err(|e| Failure(format!("CPU: {e}")))?;
        read_back(&cpu, c).ctx("CPU: read back")
    };
    for t in [&table, &blake3] {
        let expected = oracle(t)?;
        let what = format!("{t}");
        let c = commit_table(backend, t, &Admission::new(usize::MAX)).map_err(|e| Failure(format!("{what}: {e}")))?;
        read_back(backend, c).ctx(&what)?.ensure_eq(&expected, &what)?;
    }
    Ok(())
}
