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
//! - `stock`: a second `Radix2DitParallel`, the same code as the baseline: the A/A control. Its
//!   ratios are the sweep's noise floor on the machine at hand.
//!
//! Before timing, each side's output must equal stock's element for element. Then each sample
//! times about two milliseconds of calls, the two sides alternating call by call (who goes first
//! alternates too; inputs cloned before each clock starts); `SWEEP_REPS` (default 7) samples, more
//! for small shapes (up to 50). Per shape it prints each side's best-of figure, their ratio
//! stock / ours (>= 1: ours is not slower), the median ratio of adjacent calls, and each side's
//! fastest single call; then each side's worst ratio and worst median.
//!
//! The best-of figure is the tenth percentile of a side's calls: the fastest tenth of its runs.
//! Not the single fastest call: a small shape's call takes tens of microseconds and wakes the
//! rayon pool, so its fastest call is a rare event. With 8 threads on 2 cores, the A/A pair's
//! fastest calls read 0.93-1.28 and `cpu`'s (the same Plonky3 DFT behind `BackendDft`) 0.77, where
//! their tenth percentiles read 0.987-1.019 and 0.981-1.039, and the best sample means 0.93-1.05.
//! The smallest one-column shapes (calls of 10-20 us) also move by about 5% with where the code
//! lands in the binary: adding an unrelated side moved `cpu`'s medians there from 0.95-0.97 to
//! 1.01-1.03 on that machine. The A/A control calls the same machine code on both sides, so it
//! does not show that part of the noise.
//!
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
/// clock stops. Alternating call by call puts both sides in the same conditions (e.g. whether the
/// pool's other workers are awake, which on a busy machine changes a small LDE's time
/// several-fold). Pushes each call's seconds onto `a_calls` and `b_calls`, and each pair's ratio
/// `a / b` onto `ratios`.
fn sample<A: TwoAdicSubgroupDft<F>, B: TwoAdicSubgroupDft<F>>(
    (a, b): (&A, &B),
    mat: &RowMajorMatrix<F>,
    iters: usize,
    (a_calls, b_calls, ratios): (&mut Vec<f64>, &mut Vec<f64>, &mut Vec<f64>),
) {
    for i in 0..iters {
        let (x, y) = if i % 2 == 0 {
            let x = time_one(a, mat);
            (x, time_one(b, mat))
        } else {
            let y = time_one(b, mat);
            (time_one(a, mat), y)
        };
        a_calls.push(x);
        b_calls.push(y);
        ratios.push(x / y);
    }
}

/// The value at fraction `q` (0 = the smallest, 1 = the largest) of `values`, which it sorts.
fn quantile(values: &mut [f64], q: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    values[((values.len() - 1) as f64 * q) as usize]
}

/// One side of the sweep: a name and a DFT to pair with stock's.
struct Side<D> {
    name: String,
    dft: D,
    worst: (f64, String),
    worst_median: (f64, String),
}

impl<D: TwoAdicSubgroupDft<F>> Side<D> {
    fn new(name: &str, dft: D) -> Self {
        Self {
            name: name.to_owned(),
            dft,
            worst: (f64::INFINITY, String::new()),
            worst_median: (f64::INFINITY, String::new()),
        }
    }

    fn measure(&mut self, stock: &Radix2DitParallel<F>, mat: &RowMajorMatrix<F>, reps: usize) {
        let label = format!("2^{} x {}", mat.height().trailing_zeros(), mat.width());
        let want =
            stock.coset_lde_batch(mat.clone(), ADDED_BITS, F::GENERATOR).bit_reverse_rows().to_row_major_matrix();
        let got =
            self.dft.coset_lde_batch(mat.clone(), ADDED_BITS, F::GENERATOR).bit_reverse_rows().to_row_major_matrix();
        assert_eq!(got, want, "{} {label}: the LDE differs from stock's", self.name);
        // About two milliseconds of stock work per sample (at least one call a side).
        let one = time_one(stock, mat);
        let iters = ((2e-3 / one.max(1e-9)) as usize).clamp(1, 4096);
        // Small shapes are cheap: more samples there (up to about 0.1 s a side), where a busy
        // core's noise is largest relative to the call.
        let rounds = reps.max(((0.1 / (one * iters as f64)) as usize).min(50));
        let (mut stock_calls, mut our_calls) = (Vec::new(), Vec::new());
        let mut ratios = Vec::with_capacity(rounds * iters);
        for _ in 0..rounds {
            sample((stock, &self.dft), mat, iters, (&mut stock_calls, &mut our_calls, &mut ratios));
        }
        let (stock_best, our_best) = (quantile(&mut stock_calls, 0.1), quantile(&mut our_calls, 0.1));
        let ratio = stock_best / our_best;
        let median = quantile(&mut ratios, 0.5);
        println!(
            "SWEEP {} {label}: best tenth stock {:.1} us, ours {:.1} us, stock/ours = {ratio:.3}, median of paired calls {median:.3}, fastest calls {:.1} / {:.1} us ({rounds} rounds x {iters} calls)",
            self.name,
            stock_best * 1e6,
            our_best * 1e6,
            quantile(&mut stock_calls, 0.0) * 1e6,
            quantile(&mut our_calls, 0.0) * 1e6,
        );
        if median < self.worst_median.0 {
            self.worst_median = (median, label.clone());
        }
        if ratio < self.worst.0 {
            self.worst = (ratio, label);
        }
    }

    fn report(&self, counts: &str) {
        println!(
            "WORST {}: stock/ours = {:.3} at {}, median of paired calls {:.3} at {}{counts}",
            self.name, self.worst.0, self.worst.1, self.worst_median.0, self.worst_median.1,
        );
    }

    /// Every shape of the sweep up to `SWEEP_MAX_ELEMS` elements, unless `SWEEP_SIDES` leaves this
    /// side out (then `false`).
    fn run(&mut self, stock: &Radix2DitParallel<F>) -> bool {
        if std::env::var("SWEEP_SIDES").is_ok_and(|list| !list.split(',').any(|s| s == self.name)) {
            return false;
        }
        let (reps, max_elems) = (env("SWEEP_REPS", 7), env("SWEEP_MAX_ELEMS", 1 << 22));
        for log_rows in 6..=16 {
            for cols in [1, 16, 256] {
                if (cols << log_rows) > max_elems {
                    continue;
                }
                let mat = random_trace((log_rows * 1000 + cols) as u64, 1 << log_rows, cols);
                self.measure(stock, &mat, reps);
            }
        }
        true
    }
}

/// Runs `dft` over the whole sweep as side `name`, and with `SWEEP_BACKEND_PATH=1` the same DFT
/// with threshold 0 as side `<name>-all`, when it has a backend (where the backend starts to win
/// is where its threshold belongs).
fn sweep<B: Backend + 'static>(name: &str, dft: BackendDft<B>, stock: &Radix2DitParallel<F>) {
    let all = (env("SWEEP_BACKEND_PATH", 0) != 0 && dft.backend().is_ok())
        .then(|| Side::new(&format!("{name}-all"), dft.clone().with_min_backend_elems(0)));
    for mut side in [Some(Side::new(name, dft)), all].into_iter().flatten() {
        if side.run(stock) {
            let s = side.dft.stats();
            side.report(&format!(
                " (LDEs on the backend {}, on Plonky3's DFT {}, device errors {})",
                s.backend_ldes, s.cpu_ldes, s.device_errors
            ));
        }
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
    // The A/A control: a second instance of the baseline (its own twiddle caches), whose ratios
    // show how far identical code reads from 1 on this machine.
    let mut control = Side::new("stock", Radix2DitParallel::<F>::default());
    if control.run(&stock) {
        control.report(" (the same code as the baseline: the noise floor)");
    }
    sweep("cpu", BackendDft::<CpuBackend>::default(), &stock);
    sweep("toy", BackendDft::<ToyBackend>::default(), &stock);
    #[cfg(feature = "cuda")]
    sweep("cuda", BackendDft::<backend_cuda::CudaBackend>::default(), &stock);
    #[cfg(feature = "wgpu")]
    sweep("wgpu", BackendDft::<backend_wgpu::WgpuBackend>::default(), &stock);
}
