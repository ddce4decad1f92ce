//! `BackendDft` against stock Plonky3 (`Radix2DitParallel`) over `coset_lde_batch` (blowup 2,
//! shift `GENERATOR`), 2^6..=2^16 rows x {1, 16, 256} columns, in one process:
//!
//! - `cpu`: `BackendDft::<CpuBackend>::default()`, the configuration a user gets. Its threshold
//!   keeps every LDE on Plonky3's DFT, so the ratio is what the fallback costs.
//! - `toy`: `BackendDft::<ToyBackend>::default()` for a port that was never registered: no
//!   backend, so every call falls back to Plonky3's DFT.
//! - `cuda`, `wgpu` (with the crate's features): the built-in default, measured threshold
//!   included; where no device opens, every call falls back.
//! - `<side>-all` (with `SWEEP_BACKEND_PATH=1`, for sides with a backend): the same DFT with
//!   threshold 0, every LDE the backend can take on it. `cpu-all` shows why the CPU backend's
//!   threshold is "never"; on a GPU, where the ratio crosses 1 is where the threshold belongs.
//!
//! Before timing, each side's output must equal stock's element for element, in the same
//! (bit-reversed) storage. Then each sample times about two milliseconds of calls, the two sides
//! alternating call by call (who goes first alternates too; inputs cloned before each clock
//! starts); `SWEEP_REPS` (default 7) samples, more for small shapes (up to 50). It prints the
//! fastest call of each side, their ratio stock / ours (>= 1: ours is not slower), and the
//! median ratio of adjacent calls (steadier where other work shares the cores), then the worst
//! best-of ratio per side.
//! Everything runs inside a rayon pool (`RAYON_NUM_THREADS` threads), as a prover's LDEs do.
//! `SWEEP_MAX_ELEMS` (default 2^22) skips traces of more elements; `SWEEP_SIDES` (e.g.
//! `cpu,toy`) picks sides.

use std::hint::black_box;
use std::time::Instant;

use backend_api::Backend;
use backend_cpu::CpuBackend;
use p3_dft::{Radix2DitParallel, TwoAdicSubgroupDft};
use p3_field::Field;
use p3_goldilocks::Goldilocks;
use p3_matrix::Matrix;
use p3_matrix::bitrev::BitReversibleMatrix;
use p3_matrix::dense::RowMajorMatrix;
use plonky3_adapter::BackendDft;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use toy_backend::ToyBackend;

use naive_reference::env::env;

type F = Goldilocks;

const ADDED_BITS: usize = 1;

fn random_trace(seed: u64, rows: usize, cols: usize) -> RowMajorMatrix<F> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    RowMajorMatrix::new((0..rows * cols).map(|_| F::new(rng.random())).collect(), cols)
}

/// Seconds per call of `dft` on `mat` (one call; its input cloned before the clock starts).
fn time_one<D: TwoAdicSubgroupDft<F>>(dft: &D, mat: &RowMajorMatrix<F>) -> f64 {
    let input = mat.clone();
    let t = Instant::now();
    let out = dft.coset_lde_batch(black_box(input), ADDED_BITS, F::GENERATOR);
    let elapsed = t.elapsed().as_secs_f64();
    drop(black_box(out));
    elapsed
}

/// One sample: `iters` calls of each side, alternating call by call (who goes first alternates
/// too), each call timed alone with its input cloned beforehand and its output dropped after the
/// clock stops. Returns the fastest call of `a` and of `b`, in seconds, and pushes each pair's
/// ratio `a / b` onto `ratios`. Alternating call by call puts
/// both sides in the same conditions (e.g. whether the pool's other workers are awake, which on
/// a busy machine changes a small LDE's time several-fold).
fn sample<A: TwoAdicSubgroupDft<F>, B: TwoAdicSubgroupDft<F>>(
    a: &A,
    b: &B,
    mat: &RowMajorMatrix<F>,
    iters: usize,
    ratios: &mut Vec<f64>,
) -> (f64, f64) {
    let (mut ta, mut tb) = (f64::INFINITY, f64::INFINITY);
    for i in 0..iters {
        let (x, y) = if i % 2 == 0 {
            let x = time_one(a, mat);
            (x, time_one(b, mat))
        } else {
            let y = time_one(b, mat);
            (time_one(a, mat), y)
        };
        ratios.push(x / y);
        (ta, tb) = (ta.min(x), tb.min(y));
    }
    (ta, tb)
}

/// One side of the sweep: a name and a `BackendDft` over some backend.
struct Side<B: Backend> {
    name: String,
    dft: BackendDft<B>,
    worst: (f64, String),
    worst_median: (f64, String),
}

impl<B: Backend + 'static> Side<B> {
    fn new(name: &str, dft: BackendDft<B>) -> Self {
        Self {
            name: name.to_owned(),
            dft,
            worst: (f64::INFINITY, String::new()),
            worst_median: (f64::INFINITY, String::new()),
        }
    }

    fn measure(&mut self, stock: &Radix2DitParallel<F>, mat: &RowMajorMatrix<F>, reps: usize) {
        let label = format!("2^{} x {}", mat.height().trailing_zeros(), mat.width());
        let want = stock.coset_lde_batch(mat.clone(), ADDED_BITS, F::GENERATOR).bit_reverse_rows();
        let got = self.dft.coset_lde_batch(mat.clone(), ADDED_BITS, F::GENERATOR).bit_reverse_rows();
        assert_eq!(got, want, "{} {label}: the LDE differs from stock's", self.name);
        // About two milliseconds of stock work per sample (at least one call a side).
        let one = time_one(stock, mat);
        let iters = ((2e-3 / one.max(1e-9)) as usize).clamp(1, 4096);
        // Small shapes are cheap: more samples there (up to about 0.1 s a side), where a busy
        // core's noise is largest relative to the call.
        let rounds = reps.max(((0.1 / (one * iters as f64)) as usize).min(50));
        let (mut best_stock, mut best_ours) = (f64::INFINITY, f64::INFINITY);
        let mut ratios = Vec::with_capacity(rounds * iters);
        for _ in 0..rounds {
            let (s, o) = sample(stock, &self.dft, mat, iters, &mut ratios);
            best_stock = best_stock.min(s);
            best_ours = best_ours.min(o);
        }
        let ratio = best_stock / best_ours;
        ratios.sort_by(f64::total_cmp);
        let median = ratios[ratios.len() / 2];
        println!(
            "SWEEP {} {label}: stock best {:.1} us, ours best {:.1} us, stock/ours = {ratio:.3}, median of paired calls {median:.3} ({rounds} rounds x {iters} calls)",
            self.name,
            best_stock * 1e6,
            best_ours * 1e6,
        );
        if median < self.worst_median.0 {
            self.worst_median = (median, label.clone());
        }
        if ratio < self.worst.0 {
            self.worst = (ratio, label);
        }
    }

    fn report(&self) {
        let s = self.dft.stats();
        println!(
            "WORST {}: stock/ours = {:.3} at {}, median of paired calls {:.3} at {} (LDEs on the backend {}, on Plonky3's DFT {}, device errors {})",
            self.name,
            self.worst.0,
            self.worst.1,
            self.worst_median.0,
            self.worst_median.1,
            s.backend_ldes,
            s.cpu_ldes,
            s.device_errors
        );
    }
}

/// Runs `dft` over the whole sweep as side `name`, and with `SWEEP_BACKEND_PATH=1` the same DFT
/// with threshold 0 as side `<name>-all`, when it has a backend (where the backend starts to win
/// is where its threshold belongs).
fn sweep<B: Backend + 'static>(name: &str, dft: BackendDft<B>, stock: &Radix2DitParallel<F>) {
    let (reps, max_elems) = (env("SWEEP_REPS", 7), env("SWEEP_MAX_ELEMS", 1 << 22));
    let all = (env("SWEEP_BACKEND_PATH", 0) != 0 && dft.backend().is_ok())
        .then(|| Side::new(&format!("{name}-all"), dft.clone().with_min_backend_elems(0)));
    for mut side in [Some(Side::new(name, dft)), all].into_iter().flatten() {
        if std::env::var("SWEEP_SIDES").is_ok_and(|list| !list.split(',').any(|s| s == side.name)) {
            continue;
        }
        for log_rows in 6..=16 {
            for cols in [1, 16, 256] {
                if (cols << log_rows) > max_elems {
                    continue;
                }
                let mat = random_trace((log_rows * 1000 + cols) as u64, 1 << log_rows, cols);
                side.measure(stock, &mat, reps);
            }
        }
        side.report();
    }
}

fn main() {
    // Inside a rayon pool, as a prover calls it (the PCS runs its LDEs in a parallel iterator):
    // the DFT's own parallel loops then start on the calling worker instead of waking the pool.
    let pool = rayon::ThreadPoolBuilder::new().build().expect("a rayon thread pool");
    println!(
        "host threads: {}, rayon threads: {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        pool.current_num_threads()
    );
    pool.install(run);
}

fn run() {
    let stock = Radix2DitParallel::<F>::default();
    sweep("cpu", BackendDft::<CpuBackend>::default(), &stock);
    sweep("toy", BackendDft::<ToyBackend>::default(), &stock);
    #[cfg(feature = "cuda")]
    sweep("cuda", BackendDft::<backend_cuda::CudaBackend>::default(), &stock);
    #[cfg(feature = "wgpu")]
    sweep("wgpu", BackendDft::<backend_wgpu::WgpuBackend>::default(), &stock);
}
