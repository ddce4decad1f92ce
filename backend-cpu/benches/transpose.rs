//! In-place transpose against the `transpose` crate on the same matrix.
//!
//! `BENCH_TRANSPOSE_LOG_ROWS` (default 20) and `BENCH_TRANSPOSE_COLS` (default 316) set the shape;
//! the default is 2^20 x 316 (2.6 GB, 5.5 GB live with the out-of-place output and scratch).
//! `transpose::transpose_inplace` is timed once with `Instant` (it takes minutes at this size);
//! set `BENCH_TRANSPOSE_SKIP_INPLACE_CRATE=1` to skip it. The reported ratios come from
//! [`common::paired`] (alternating runs, best of each).

use std::hint::black_box;
use std::time::{Duration, Instant};

use backend_api::{Backend, DEFAULT_SCRATCH_CAP, MatrixShape};
use backend_cpu::CpuBackend;
use criterion::{Criterion, Throughput};

mod common;
use common::{env, paired};

fn benches(c: &mut Criterion) {
    let shape = MatrixShape::new(1 << env("BENCH_TRANSPOSE_LOG_ROWS", 20), env("BENCH_TRANSPOSE_COLS", 316))
        .expect("bench shape");
    let backend = CpuBackend::new();
    let host: Vec<u64> = (0..shape.len() as u64).collect();
    let mut buf = backend.upload(&host).expect("upload");
    drop(host);
    let mut output = vec![0u64; shape.len()];
    let label = format!("transpose/{}x{}", shape.rows(), shape.cols());

    let mut g = c.benchmark_group(&label);
    g.throughput(Throughput::Bytes(shape.bytes() as u64));
    g.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(15));
    // Each iteration transposes the previous result again as a rows x cols matrix: the bytes
    // differ, the work does not.
    g.bench_function("cpu/in_place", |b| {
        b.iter(|| backend.transpose_in_place(&mut buf, shape, DEFAULT_SCRATCH_CAP).expect("transpose"))
    });
    g.bench_function("transpose_crate/out_of_place", |b| {
        b.iter(|| transpose::transpose(black_box(buf.as_slice()), &mut output, shape.cols(), shape.rows()))
    });
    g.finish();

    let reps = env("BENCH_PAIRED_REPS", 5);
    paired(&format!("{label} in_place vs transpose::transpose"), reps, ["cpu/in_place", "out_of_place"], |side| {
        if side == 0 {
            backend.transpose_in_place(&mut buf, shape, DEFAULT_SCRATCH_CAP).expect("transpose");
        } else {
            transpose::transpose(black_box(buf.as_slice()), &mut output, shape.cols(), shape.rows());
        }
    });
    drop(output);

    if std::env::var("BENCH_TRANSPOSE_SKIP_INPLACE_CRATE").is_ok() {
        return;
    }
    let mut host = backend.download_vec(&buf).expect("download");
    drop(buf);
    let mut scratch = vec![0u64; shape.rows().max(shape.cols())];
    let t = Instant::now();
    transpose::transpose_inplace(&mut host, &mut scratch, shape.cols(), shape.rows());
    let secs = t.elapsed().as_secs_f64();
    println!(
        "ONCE {label}/transpose_crate/in_place: {secs:.3} s ({:.3} GiB/s), one run timed with Instant",
        shape.bytes() as f64 / secs / (1u64 << 30) as f64
    );
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c);
    c.final_summary();
}
