//! The CUDA backend's launch configurations (transpose routes, NTT knobs) give identical commits.

use prover::{Admission, CommitParams};

use backend_cpu::CpuBackend;

use super::table::{Table, commit_table, read_back};
use crate::{Context as _, Failure, Gen, Outcome};

/// The CUDA backend's launch configurations give bit-identical commits, equal to the CPU
/// backend's: every [`backend_cuda::TransposeRoute`] (with the default NTT), and every combination
/// of the NTT knobs — stages fused per pass 1, 2, 4 and the default; radix 32 and 16; 8 and 4
/// columns per tile; lazy and canonical reduction — (with the default route). The knobs act on
/// different kernels (transpose vs LDE), so the two groups are varied separately.
///
/// The table, 4096 x 16 at blowup 4 (a 2^14-row LDE) with an 8-row scratch cap, is large enough
/// for the NTT to span several 2^11-row tiles and for every route to run thousands of copies; its
/// expected bytes come from the CPU backend (itself checked against the naive references by the
/// conformance suite and by [`oracle`] on smaller tables), since a naive LDE this size would take
/// minutes.
///
/// Afterwards every knob is reset to what the constructor reads from the environment.
///
/// # Errors
/// A configuration whose bytes differ.
pub fn cuda_launch_configurations(backend: &backend_cuda::CudaBackend) -> Outcome {
    use backend_cuda::{CudaBackend, TransposeRoute};
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
    let cpu = CpuBackend::new();
    let c = commit_table(&cpu, &table, &Admission::new(usize::MAX)).map_err(|e| Failure(format!("CPU: {e}")))?;
    let expected = read_back(&cpu, c).ctx("CPU: read back")?;
    let env = |name: &str, default: u32| std::env::var(name).ok().and_then(|s| s.parse().ok()).unwrap_or(default);
    let reset = |b: &CudaBackend| {
        b.set_transpose_route(
            std::env::var("CUDA_TRANSPOSE_ROUTE")
                .ok()
                .and_then(|s| TransposeRoute::parse(&s).ok())
                .unwrap_or(TransposeRoute::Kernel),
        );
        b.set_ntt_stages(env("CUDA_NTT_STAGES", 0));
        b.set_ntt_radix(env("CUDA_NTT_RADIX", 32));
        b.set_ntt_cols(env("CUDA_NTT_COLS", 8));
        b.set_ntt_lazy(std::env::var("CUDA_NTT_LAZY").map_or(true, |v| v != "0"));
    };
    let run = |what: String| -> Outcome {
        let c =
            commit_table(backend, &table, &Admission::new(usize::MAX)).map_err(|e| Failure(format!("{what}: {e}")))?;
        read_back(backend, c).ctx(&what)?.ensure_eq(&expected, &what)
    };
    let result = (|| -> Outcome {
        for route in TransposeRoute::ALL {
            reset(backend);
            backend.set_transpose_route(route);
            run(format!("{table}, transpose route {}", route.name()))?;
        }
        for stages in [1u32, 2, 4, 0] {
            for radix in [32u32, 16] {
                for cols in [8u32, 4] {
                    for lazy in [true, false] {
                        reset(backend);
                        backend.set_transpose_route(TransposeRoute::Kernel);
                        backend.set_ntt_stages(stages);
                        backend.set_ntt_radix(radix);
                        backend.set_ntt_cols(cols);
                        backend.set_ntt_lazy(lazy);
                        run(format!(
                            "{table}, NTT with {stages} stages per pass, radix {radix}, {cols} columns per tile, lazy {lazy}"
                        ))?;
                    }
                }
            }
        }
        Ok(())
    })();
    reset(backend);
    result
}
