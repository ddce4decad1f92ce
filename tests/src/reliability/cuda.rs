//! The CUDA backend's launch configurations (transpose routes, fused leaves, NTT options) give
//! identical commits.

use backend_api::HashKind;
use commit::{Admission, CommitParams};

use backend_cpu::CpuBackend;

use super::table::{Table, commit_table, read_back};
use crate::{Context as _, Failure, Gen, Outcome};

/// The CUDA backend's launch configurations give bit-identical commits, equal to the CPU
/// backend's: every [`backend_cuda::TransposeRoute`] with the leaves hashed beside its block pass
/// and not ([`backend_cuda::CudaOptions::fused_leaves`], for both hashes), and every
/// combination of the NTT options — stages fused per pass 1, 2, 4 and the most shared memory
/// allows; every [`backend_cuda::NttKernel`]; lazy and canonical reduction, and the lazy forms
/// (lean at radix 16 and 32, power-of-two at radix 32) — (with the backend's
/// route). The options act on different kernels (transpose vs LDE), so the two groups are varied
/// separately. Each configuration is a [`backend_cuda::CudaBackend::with_options`] handle on the
/// backend's own device; the backend itself keeps its options.
///
/// The table, 4096 x 16 at blowup 4 (a 2^14-row LDE) with an 8-row scratch cap, is large enough
/// for the NTT to span several 2^11-row tiles and for every route to run thousands of copies; its
/// expected bytes come from the CPU backend (itself checked against the naive references by the
/// conformance suite and by [`oracle`](super::table::oracle) on smaller tables), since a naive LDE this size would take
/// minutes.
///
/// # Errors
/// A configuration whose bytes differ.
pub fn cuda_launch_configurations(backend: &backend_cuda::CudaBackend) -> Outcome {
    use backend_cuda::{CudaOptions, TransposeRoute};
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
    // The other hash's fused kernel, against the CPU's commit with that hash.
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
    let (expected, expected_blake3) = (oracle(&table)?, oracle(&blake3)?);
    let base = backend.options();
    let run_table = |t: &Table, expected, options: CudaOptions, what: String| -> Outcome {
        let b = backend.with_options(options).map_err(|e| Failure(format!("{what}: {e}")))?;
        let c = commit_table(&b, t, &Admission::new(usize::MAX)).map_err(|e| Failure(format!("{what}: {e}")))?;
        read_back(&b, c).ctx(&what)?.ensure_eq(expected, &what)
    };
    let run = |options, what| run_table(&table, &expected, options, what);
    for route in TransposeRoute::ALL {
        for fused_leaves in [true, false] {
            run(
                CudaOptions { transpose_route: route, fused_leaves, ..base.clone() },
                format!("{table}, transpose route {}, leaves fused into its block pass {fused_leaves}", route.name()),
            )?;
        }
    }
    for fused_leaves in [true, false] {
        let what = format!("{blake3}, leaves fused into the transpose's block pass {fused_leaves}");
        run_table(&blake3, &expected_blake3, CudaOptions { fused_leaves, ..base.clone() }, what)?;
    }
    for options in base.ntt_variants() {
        let (stages, kernel) = (options.ntt_stages, options.ntt_kernel);
        let what = format!(
            "{table}, NTT with {} stages per pass, radix {}, {} columns per tile, lazy {}, power-of-two passes {}, \
             lean passes {}",
            stages.map_or("the most".to_string(), |k| k.to_string()),
            kernel.radix(),
            kernel.cols(),
            options.ntt_lazy,
            options.ntt_pow2,
            options.ntt_lean
        );
        run(options, what)?;
    }
    Ok(())
}
