//! The coset LDE against Plonky3's DFTs (`p3-dft` on the workspace pin, `parallel`, scalar
//! Goldilocks unless the build enables a SIMD target feature), in one process on the same rayon
//! pool.
//!
//! Shapes: `BENCH_LDE_P3_SHAPES` (default `16x64,18x64,16x316`: log2 rows x columns), blowup
//! `BENCH_LDE_P3_BLOWUP` (default 2), shift 7. Our LDE runs the best kernels the CPU has, or
//! those `BENCH_LDE_ISA` names (`scalar`, `avx2`, `avx512`: `CpuBackend::with_lde_isa`); the
//! bench prints which. The trace is seeded random `u64`s, non-canonical ones included. For each
//! shape:
//!
//! - every side's output is checked equal to ours, element for element, before any timing;
//! - criterion times `CpuBackend::coset_lde` and each Plonky3 DFT's `coset_lde_batch`;
//! - then `BENCH_PAIRED_REPS` (default 7) rounds run every side once each, interleaved (the
//!   order rotating from round to round), and the bench prints each side's min and median and
//!   the ratio ours / best Plonky3 DFT, of the mins and of the medians; both for wall time and
//!   for the process's CPU time (user + system, all threads, `getrusage`), which a machine shared
//!   with other work disturbs less than wall time.
//!
//! The Plonky3 sides are timed from their input matrix (cloned from the trace before the clock
//! starts) to their return value; `Radix2DitParallel` returns a bit-reversed view, which is
//! timed as returned, without reading it in natural order (that would add a pass); ours is
//! timed from the uploaded trace to the natural-order output. Outputs are dropped outside the
//! clock on both sides. Each DFT object lives across rounds, so its twiddle caches are warm, as
//! ours are.

use std::hint::black_box;
use std::time::{Duration, Instant};

use backend_api::{Backend, LdeParams, MatrixShape};
use backend_cpu::{CpuBackend, LdeIsa};
use criterion::{BatchSize, Criterion, Throughput};
use p3_dft::{Radix2DFTSmallBatch, Radix2DitParallel, TwoAdicSubgroupDft};
use p3_field::PrimeField64;
use p3_goldilocks::Goldilocks;
use p3_matrix::Matrix;
use p3_matrix::dense::RowMajorMatrix;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use naive_reference::env::env;

/// The sides of one comparison: ours first, then the Plonky3 DFTs.
const SIDES: [&str; 3] = ["cpu", "p3 Radix2DitParallel", "p3 Radix2DFTSmallBatch"];

struct Sides {
    backend: CpuBackend,
    dit_parallel: Radix2DitParallel<Goldilocks>,
    small_batch: Radix2DFTSmallBatch<Goldilocks>,
}

impl Sides {
    /// Runs side `side` once and returns its wall and CPU seconds; the input copy and the drop
    /// are untimed.
    fn time(&self, side: usize, trace: &backend_cpu::CpuBuffer, values: &[Goldilocks], params: &LdeParams) -> [f64; 2] {
        let (cols, bits, shift) =
            (params.trace().cols(), params.log_blowup() as usize, Goldilocks::new(params.shift()));
        let mat = (side > 0).then(|| RowMajorMatrix::new(values.to_vec(), cols));
        let (t, c) = (Instant::now(), cpu_seconds());
        match (side, mat) {
            (1, Some(mat)) => {
                let out = self.dit_parallel.coset_lde_batch(mat, bits, shift);
                let dt = [t.elapsed().as_secs_f64(), cpu_seconds() - c];
                drop(black_box(out));
                dt
            }
            (2, Some(mat)) => {
                let out = self.small_batch.coset_lde_batch(mat, bits, shift);
                let dt = [t.elapsed().as_secs_f64(), cpu_seconds() - c];
                drop(black_box(out));
                dt
            }
            _ => {
                let out = self.backend.coset_lde(trace, params).expect("lde");
                let dt = [t.elapsed().as_secs_f64(), cpu_seconds() - c];
                drop(black_box(out));
                dt
            }
        }
    }
}

/// The process's user + system CPU seconds so far, all threads (NaN where unknown).
fn cpu_seconds() -> f64 {
    #[cfg(target_os = "linux")]
    {
        let mut u = std::mem::MaybeUninit::<libc::rusage>::uninit();
        // SAFETY: getrusage writes a whole `rusage` through the valid pointer and returns 0.
        if unsafe { libc::getrusage(libc::RUSAGE_SELF, u.as_mut_ptr()) } == 0 {
            // SAFETY: initialised by the successful call.
            let u = unsafe { u.assume_init() };
            let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
            return tv(u.ru_utime) + tv(u.ru_stime);
        }
    }
    f64::NAN
}

fn min_median(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[0], v[v.len() / 2])
}

fn bench_shape(c: &mut Criterion, sides: &Sides, params: LdeParams) {
    let mut rng = ChaCha8Rng::seed_from_u64(13);
    let host: Vec<u64> = (0..params.trace().len()).map(|_| rng.random()).collect();
    let values: Vec<Goldilocks> = host.iter().map(|&x| Goldilocks::new(x)).collect();
    let trace = sides.backend.upload(&host).expect("upload");
    let label = format!("lde_plonky3/{}x{}/blowup{}", params.trace().rows(), params.trace().cols(), params.blowup());
    let (cols, bits, shift) = (params.trace().cols(), params.log_blowup() as usize, Goldilocks::new(params.shift()));
    let isa = sides.backend.lde_isa();

    // The same values on every side first (Plonky3's canonicalised; ours must be canonical).
    let ours = sides.backend.download_vec(&sides.backend.coset_lde(&trace, &params).expect("lde")).expect("download");
    let canonical =
        |m: RowMajorMatrix<Goldilocks>| -> Vec<u64> { m.values.iter().map(|x| x.as_canonical_u64()).collect() };
    let input = || RowMajorMatrix::new(values.clone(), cols);
    let dit = sides.dit_parallel.coset_lde_batch(input(), bits, shift).to_row_major_matrix();
    assert!(ours == canonical(dit), "{label}: ours ({isa}) and Radix2DitParallel differ");
    assert!(
        ours == canonical(sides.small_batch.coset_lde_batch(input(), bits, shift)),
        "{label}: ours ({isa}) and Radix2DFTSmallBatch differ"
    );
    drop(ours);
    println!("CHECKED {label}: ours ({isa} kernels) equals both Plonky3 DFTs, element for element");

    let mut g = c.benchmark_group(&label);
    g.throughput(Throughput::Bytes(params.lde_shape().bytes() as u64));
    g.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(5));
    g.bench_function(SIDES[0], |b| b.iter(|| sides.backend.coset_lde(&trace, &params).expect("lde")));
    g.bench_function(SIDES[1], |b| {
        b.iter_batched(input, |m| sides.dit_parallel.coset_lde_batch(m, bits, shift), BatchSize::LargeInput)
    });
    g.bench_function(SIDES[2], |b| {
        b.iter_batched(input, |m| sides.small_batch.coset_lde_batch(m, bits, shift), BatchSize::LargeInput)
    });
    g.finish();

    let reps = env("BENCH_PAIRED_REPS", 7);
    let mut times = vec![[Vec::with_capacity(reps), Vec::with_capacity(reps)]; SIDES.len()];
    for round in 0..reps {
        for k in 0..SIDES.len() {
            let side = (round + k) % SIDES.len();
            let [wall, cpu] = sides.time(side, &trace, &values, &params);
            times[side][0].push(wall);
            times[side][1].push(cpu);
        }
    }
    for (clock, what) in ["wall", "CPU time"].iter().enumerate() {
        let stats: Vec<(f64, f64)> = times.iter().map(|t| min_median(t[clock].clone())).collect();
        for (name, (min, med)) in SIDES.iter().zip(&stats) {
            println!("INTERLEAVED {label} {what}: {name} min {:.2} ms, median {:.2} ms", min * 1e3, med * 1e3);
        }
        let best = |pick: fn(&(f64, f64)) -> f64| {
            let others = stats[1..].iter().enumerate().map(|(i, s)| (pick(s), SIDES[i + 1]));
            others.min_by(|a, b| a.0.total_cmp(&b.0)).expect("two Plonky3 sides")
        };
        let (best_min, by_min) = best(|s| s.0);
        let (best_med, by_med) = best(|s| s.1);
        println!(
            "INTERLEAVED {label} {what}: cpu ({isa} kernels) / best Plonky3 = {:.3} of mins ({by_min}), {:.3} of \
             medians ({by_med}), {reps} interleaved rounds, {} rayon threads",
            stats[0].0 / best_min,
            stats[0].1 / best_med,
            rayon::current_num_threads()
        );
    }
}

/// Which packed Goldilocks this build of Plonky3 uses: it is chosen at compile time from the
/// build's target features, not at run time.
fn p3_packing() -> &'static str {
    if cfg!(all(target_arch = "x86_64", target_feature = "avx512f")) {
        "AVX-512 (the build enables avx512f)"
    } else if cfg!(all(target_arch = "x86_64", target_feature = "avx2")) {
        "AVX2 (the build enables avx2)"
    } else if cfg!(target_arch = "aarch64") {
        "NEON"
    } else {
        "none, scalar (build with -C target-cpu=native or +avx2 for SIMD)"
    }
}

fn shapes() -> Vec<MatrixShape> {
    let spec = std::env::var("BENCH_LDE_P3_SHAPES").unwrap_or_else(|_| "16x64,18x64,16x316".into());
    spec.split(',')
        .map(|s| {
            let (log_rows, cols) = s.trim().split_once('x').expect("BENCH_LDE_P3_SHAPES: LOGROWSxCOLS,...");
            let log_rows: u32 = log_rows.parse().expect("log2 rows");
            MatrixShape::new(1 << log_rows, cols.parse().expect("columns")).expect("bench shape")
        })
        .collect()
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let isa = match std::env::var("BENCH_LDE_ISA") {
        Ok(name) if !name.is_empty() => LdeIsa::ALL
            .into_iter()
            .find(|isa| isa.name() == name)
            .unwrap_or_else(|| panic!("BENCH_LDE_ISA={name:?}: expected one of {:?}", LdeIsa::ALL.map(LdeIsa::name))),
        _ => LdeIsa::detect(),
    };
    let backend = CpuBackend::new().with_lde_isa(isa).expect("BENCH_LDE_ISA: kernels this CPU runs");
    println!(
        "LDE kernels: {} (this CPU runs {:?}; best {}); Plonky3's packed Goldilocks: {}",
        backend.lde_isa(),
        LdeIsa::supported().iter().map(|i| i.name()).collect::<Vec<_>>(),
        LdeIsa::detect(),
        p3_packing()
    );
    let sides =
        Sides { backend, dit_parallel: Radix2DitParallel::default(), small_batch: Radix2DFTSmallBatch::default() };
    for shape in shapes() {
        let params = LdeParams::new(shape, env("BENCH_LDE_P3_BLOWUP", 2), 7).expect("bench params");
        bench_shape(&mut c, &sides, params);
    }
    c.final_summary();
}
