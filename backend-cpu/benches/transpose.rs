//! In-place transpose against the `transpose` crate on the same matrix.
//!
//! `BENCH_TRANSPOSE_LOG_ROWS` (default 20) and `BENCH_TRANSPOSE_COLS` (default 316) set the shape;
//! the default is 2^20 x 316 (2.6 GB). `transpose::transpose_inplace` is timed once with
//! `Instant` (it takes minutes at this size); set `BENCH_TRANSPOSE_SKIP_INPLACE_CRATE=1` to skip it.

use std::hint::black_box;
use std::time::{Duration, Instant};

use backend_api::{Backend, DEFAULT_SCRATCH_CAP, MatrixShape};
use backend_cpu::CpuBackend;
use criterion::{Criterion, Throughput};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The backend's in-place transpose, generic so other backends can be benched the same way.
fn bench_in_place<B: Backend>(c: &mut Criterion, backend: &B, shape: MatrixShape) {
    let host: Vec<u64> = (0..shape.len() as u64).collect();
    let mut buf = backend.upload(&host).expect("upload");
    drop(host);
    let mut g = c.benchmark_group(format!("transpose/{}x{}", shape.rows, shape.cols));
    g.throughput(Throughput::Bytes(shape.bytes() as u64));
    g.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(20));
    // Each iteration transposes the previous result again as a rows x cols matrix: the bytes
    // differ, the work does not.
    g.bench_function(format!("{}/in_place", backend.info().backend), |b| {
        b.iter(|| backend.transpose_in_place(&mut buf, shape, DEFAULT_SCRATCH_CAP).expect("transpose"))
    });
    g.finish();
}

fn bench_crate(c: &mut Criterion, shape: MatrixShape) {
    let input: Vec<u64> = (0..shape.len() as u64).collect();
    let mut output = vec![0u64; shape.len()];
    let mut g = c.benchmark_group(format!("transpose/{}x{}", shape.rows, shape.cols));
    g.throughput(Throughput::Bytes(shape.bytes() as u64));
    g.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(20));
    g.bench_function("transpose_crate/out_of_place", |b| {
        b.iter(|| transpose::transpose(black_box(&input), &mut output, shape.cols, shape.rows))
    });
    g.finish();
    drop(output);
    if std::env::var("BENCH_TRANSPOSE_SKIP_INPLACE_CRATE").is_ok() {
        return;
    }
    let mut buf = input;
    let mut scratch = vec![0u64; shape.rows.max(shape.cols)];
    let t = Instant::now();
    transpose::transpose_inplace(&mut buf, &mut scratch, shape.cols, shape.rows);
    let secs = t.elapsed().as_secs_f64();
    println!(
        "transpose/{}x{}/transpose_crate/in_place_once: {secs:.3} s ({:.3} GiB/s), one run timed with Instant",
        shape.rows,
        shape.cols,
        shape.bytes() as f64 / secs / (1u64 << 30) as f64
    );
}

fn benches(c: &mut Criterion) {
    let shape = MatrixShape::new(1 << env("BENCH_TRANSPOSE_LOG_ROWS", 20), env("BENCH_TRANSPOSE_COLS", 316))
        .expect("bench shape");
    bench_in_place(c, &CpuBackend::new(), shape);
    bench_crate(c, shape);
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c);
    c.final_summary();
}
