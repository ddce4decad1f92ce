//! The coset LDE at 2^`BENCH_LDE_LOG_ROWS` (default 16) x `BENCH_LDE_COLS` (default 64), blowup
//! `BENCH_LDE_BLOWUP` (default 2). Throughput counts the output bytes; the paired ratio compares
//! the LDE with a copy of as many bytes in the same run.

use std::time::Duration;

use backend_api::{Backend, CopyRange, LdeParams, MatrixShape};
use backend_cpu::CpuBackend;
use criterion::{Criterion, Throughput};

mod common;
use common::{env, paired};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn bench_lde<B: Backend>(c: &mut Criterion, backend: &B, params: LdeParams) {
    let mut rng = ChaCha8Rng::seed_from_u64(12);
    let host: Vec<u64> = (0..params.trace().len()).map(|_| rng.random()).collect();
    let trace = backend.upload(&host).expect("upload");
    let out = params.lde_shape();
    let mut g =
        c.benchmark_group(format!("lde/{}x{}/blowup{}", params.trace().rows(), params.trace().cols(), params.blowup()));
    g.throughput(Throughput::Bytes(out.bytes() as u64));
    g.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(5));
    g.bench_function(backend.info().backend, |b| b.iter(|| backend.coset_lde(&trace, &params).expect("lde")));
    g.finish();
    // The same-run baseline: a batched copy of as many bytes as the LDE writes.
    let src = backend.alloc(out.len()).expect("alloc");
    let mut dst = backend.alloc(out.len()).expect("alloc");
    let copy = [CopyRange::new(0, 0, out.len())];
    paired(
        &format!("lde/{}x{}/blowup{}", params.trace().rows(), params.trace().cols(), params.blowup()),
        env("BENCH_PAIRED_REPS", 7),
        ["lde", "copy of the output bytes"],
        |side| {
            if side == 0 {
                drop(backend.coset_lde(&trace, &params).expect("lde"));
            } else {
                backend.batched_copy(&src, &mut dst, &copy).expect("copy");
            }
        },
    );
}

fn benches(c: &mut Criterion) {
    let trace = MatrixShape::new(1 << env("BENCH_LDE_LOG_ROWS", 16), env("BENCH_LDE_COLS", 64)).expect("bench shape");
    let params = LdeParams::new(trace, env("BENCH_LDE_BLOWUP", 2), 7).expect("bench params");
    bench_lde(c, &CpuBackend::new(), params);
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c);
    c.final_summary();
}
