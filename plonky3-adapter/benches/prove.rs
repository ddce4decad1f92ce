//! Whole p3-uni-stark proofs, stock Plonky3 (`Radix2DitParallel`, Keccak `MerkleTreeMmcs`, all
//! host cores) against `BackendPcs` on each backend in the same run, with each proof's time
//! split into Plonky3's own phases:
//!
//! - `commit`: the trace commit (`commit to trace data`);
//! - `quotient`: the quotient's evaluation: stock's on the host (`quotient_values`), ours through
//!   [`plonky3_adapter::prove`] on the device (its `quotient` span: the constraints compiled, the
//!   program run over the device LDE, the values down);
//! - `quotient commit`: its chunks' commit (`commit to quotient poly chunks`);
//! - `open`: the openings without FRI (`open` less `FRI prover`);
//! - `fri`: FRI's commit and query phases (`FRI prover`);
//! - `other`: the rest of `prove` (transcript, selectors, dropping the prover data).
//!
//! Each line also lists the adapter's own spans (the fused commit's steps, the device
//! openings, dropping a device tree). `PROVE_HOST_OPENINGS=1` runs `BackendPcs` with its
//! openings on the host (`BackendPcs::with_device_openings(false)`), and `PROVE_HOST_FRI=1` with
//! FRI's folds on the host (`ExtensionMmcs` as FRI's MMCS, for `BackendExtensionMmcs`), and
//! `PROVE_HOST_QUOTIENT=1` proves ours with `p3_uni_stark::prove` and the batch with
//! `p3_batch_stark::prove_batch` (the quotients on the host, over the LDE's download) instead of
//! [`plonky3_adapter::prove`] and [`plonky3_adapter::prove_batch`], each for an A/B of the two. `BENCH_WGPU_PORTABLE=1` runs wgpu on u32
//! pairs (`WgpuOptions::portable_arithmetic`) where the adapter has 64-bit integers. Each AIR's compiled constraint program is
//! described once (`PROGRAM ...` lines: instructions, registers, multiplications per row, and
//! with `cuda` the instructions its kernel dispatches per point).
//!
//! Statements: the Fibonacci AIR with 128 sequences (256 columns) over 2^k rows for each k of
//! `PROVE_LOG_ROWS` (default `12,14`), and Plonky3's Keccak-f AIR (p3-keccak-air, 2,633 columns)
//! over the permutation counts of `KECCAK_HASHES` (default `85`: 2^11 rows), with the Keccak-256
//! MMCS; and the Fibonacci AIR over 2^k rows for each k of `PROVE_POSEIDON2_LOG_ROWS` (default
//! `12`) with Plonky3's Poseidon2 MMCS and a duplex challenger (`BackendMmcs<_, Poseidon2>`); and a
//! virtual machine's batch of nine tables (p3-batch-stark's `prove_batch`: Fibonacci tables of 20
//! to 256 columns, Poseidon2 and Keccak-f) of heights `2^(k - 7)` to `2^k` for each k of
//! `PROVE_BATCH_LOG_ROWS` (default `12`; `21` is 2^14 to 2^21 rows), its split read at the PCS
//! (`commit`: every trace commit; `quotient`: every table's quotient); an empty list (say
//! `PROVE_LOG_ROWS=`) proves no statement of its kind. Each proof is first
//! checked byte for byte against stock and with the stock verifier. Each side runs `BENCH_REPS`
//! (default 3) times, alternating, and the best whole proof of each side is reported with its
//! split (`PROOF ...` lines) and the ratio stock / ours (`PAIRED ...` lines); `RUNS ...` lines
//! list every run's whole proof and commit in the order they ran (ours with the fused commit's
//! steps in parentheses: trace up and LDE, LDE down, leaves and tree). `BENCH_BACKENDS`
//! (e.g. `cuda`) picks backends among `cpu`, `cuda` and `wgpu` (built with their features).
//!
//! ```text
//! PROVE_LOG_ROWS=16,18,20 KECCAK_HASHES=1365,2730 PROVE_POSEIDON2_LOG_ROWS=18 PROVE_BATCH_LOG_ROWS=21 BENCH_BACKENDS=cuda \
//!     cargo bench -p plonky3-adapter --features cuda --bench prove
//! ```

#[path = "../tests/common/stark.rs"]
#[allow(missing_docs)]
mod stark;

#[path = "../tests/common/batch.rs"]
#[allow(missing_docs)]
mod batch;

#[path = "support/timed_pcs.rs"]
#[allow(missing_docs)]
mod timed_pcs;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use backend_cpu::CpuBackend;
use p3_dft::Radix2DitParallel;
use p3_field::coset::TwoAdicMultiplicativeCoset;
use plonky3_adapter::{BackendDft, BackendMmcs, DefaultDevice};
use stark::{Challenge, Challenger, FibonacciAir, Val};

use naive_reference::env::env;

/// The spans the split reads, by name (the quotient's: stock's, and ours, which wraps stock's when
/// it falls back; a phase's nested spans count once).
const SPANS: [&str; 5] =
    ["commit to trace data", "quotient_values", "commit to quotient poly chunks", "open", "FRI prover"];

/// The phase a span's name times, if any.
fn phase(name: &str) -> Option<usize> {
    if name == "quotient" {
        return Some(1);
    }
    SPANS.iter().position(|&n| n == name)
}

/// A `tracing` subscriber that sums the time spent inside each span of [`SPANS`].
#[derive(Default)]
struct SpanTimes {
    next_id: AtomicU64,
    /// Span id -> (its name's index in SPANS, when it was entered).
    live: Mutex<HashMap<u64, (usize, Option<Instant>)>>,
    /// Entered spans per phase: only the outermost is timed.
    depth: Mutex<[usize; SPANS.len()]>,
    total: Mutex<[Duration; SPANS.len()]>,
    /// This crate's own spans (target `plonky3_adapter`), by name: where its time goes inside
    /// Plonky3's phases (and outside them, e.g. dropping the prover data).
    ours: Mutex<Vec<(&'static str, Duration)>>,
}

impl tracing::Subscriber for SpanTimes {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let meta = span.metadata();
        if let Some(k) = phase(meta.name()) {
            self.live.lock().unwrap().insert(id, (k, None));
        } else if meta.target().starts_with("plonky3_adapter") {
            let mut ours = self.ours.lock().unwrap();
            let k = ours.iter().position(|(n, _)| *n == meta.name()).unwrap_or_else(|| {
                ours.push((meta.name(), Duration::ZERO));
                ours.len() - 1
            });
            self.live.lock().unwrap().insert(id, (SPANS.len() + k, None));
        }
        tracing::span::Id::from_u64(id)
    }

    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}

    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}

    fn event(&self, _: &tracing::Event<'_>) {}

    fn enter(&self, id: &tracing::span::Id) {
        if let Some(entry) = self.live.lock().unwrap().get_mut(&id.into_u64()) {
            if let Some(depth) = self.depth.lock().unwrap().get_mut(entry.0) {
                *depth += 1;
                if *depth > 1 {
                    return;
                }
            }
            entry.1 = Some(Instant::now());
        }
    }

    fn exit(&self, id: &tracing::span::Id) {
        let mut live = self.live.lock().unwrap();
        if let Some(depth) = live.get(&id.into_u64()).and_then(|e| {
            self.depth.lock().unwrap().get_mut(e.0).map(|d| {
                *d -= 1;
                *d
            })
        }) && depth > 0
        {
            return;
        }
        if let Some((k, Some(at))) = live.get_mut(&id.into_u64()).map(|e| (e.0, e.1.take())) {
            match k.checked_sub(SPANS.len()) {
                None => self.total.lock().unwrap()[k] += at.elapsed(),
                Some(k) => self.ours.lock().unwrap()[k].1 += at.elapsed(),
            }
        }
    }
}

/// One proof's time and its split, in seconds.
#[derive(Clone, Debug)]
struct Split {
    total: f64,
    phases: [f64; SPANS.len()],
    /// The adapter's own spans, in the order first entered.
    ours: Vec<(&'static str, f64)>,
}

impl Split {
    fn line(&self) -> String {
        let [commit, quotient, quotient_commit, open, fri] = self.phases;
        let other = self.total - commit - quotient - quotient_commit - open;
        let ours: Vec<String> = self.ours.iter().map(|(n, t)| format!("{n} {:.1}", t * 1e3)).collect();
        format!(
            "total {:.1} ms = commit {:.1} + quotient {:.1} + quotient commit {:.1} + open {:.1} + fri {:.1} + other {:.1}{}",
            self.total * 1e3,
            commit * 1e3,
            quotient * 1e3,
            quotient_commit * 1e3,
            (open - fri) * 1e3,
            fri * 1e3,
            other * 1e3,
            if ours.is_empty() { String::new() } else { format!(" [adapter spans, ms: {}]", ours.join(", ")) }
        )
    }
}

/// Runs `prove` once under a [`SpanTimes`] subscriber.
fn timed(prove: impl FnOnce()) -> Split {
    let times = Arc::new(SpanTimes::default());
    let t = Instant::now();
    tracing::subscriber::with_default(Arc::clone(&times), prove);
    let total = t.elapsed().as_secs_f64();
    let phases = times.total.lock().unwrap().map(|d| d.as_secs_f64());
    let ours = times.ours.lock().unwrap().iter().map(|(n, d)| (*n, d.as_secs_f64())).collect();
    Split { total, phases, ours }
}

/// Alternates the two sides `reps` times each (`setup` makes each run's trace outside the
/// timing) and prints the best proof of each with its split.
fn paired<I>(label: &str, reps: usize, setup: impl FnMut() -> I, stock: impl FnMut(I), ours: impl FnMut(I)) {
    paired_split(label, reps, setup, stock, ours, &|_, _| {});
}

/// [`paired`], each run's split completed by `adjust(stock, split)` after it ran (`stock`: which
/// side ran): a batch proof's phases are read from its PCS ([`timed_pcs::TimedPcs`]), not from
/// spans.
fn paired_split<I>(
    label: &str,
    reps: usize,
    mut setup: impl FnMut() -> I,
    mut stock: impl FnMut(I),
    mut ours: impl FnMut(I),
    adjust: &dyn Fn(bool, &mut Split),
) {
    let (mut best_a, mut best_b): (Option<Split>, Option<Split>) = (None, None);
    // Every run's whole proof and commit, per side, in the order they ran.
    let (mut runs_a, mut runs_b) = (Vec::new(), Vec::new());
    for round in 0..reps {
        for first in [round % 2 == 0, round % 2 != 0] {
            let input = setup();
            let (best, runs, mut split) = if first {
                (&mut best_a, &mut runs_a, timed(|| stock(input)))
            } else {
                (&mut best_b, &mut runs_b, timed(|| ours(input)))
            };
            adjust(first, &mut split);
            // With the fused commit's steps, where it has them.
            let steps: Vec<String> = split
                .ours
                .iter()
                .filter(|(n, _)| n.starts_with("fused commit: "))
                .map(|(_, t)| format!("{:.1}", t * 1e3))
                .collect();
            let steps = if steps.is_empty() { String::new() } else { format!("({})", steps.join("+")) };
            runs.push(format!("{:.1}/{:.1}{steps}", split.total * 1e3, split.phases[0] * 1e3));
            if best.as_ref().is_none_or(|b| split.total < b.total) {
                *best = Some(split);
            }
        }
    }
    println!("RUNS {label} (whole proof/commit, ms): stock {}; ours {}", runs_a.join(" "), runs_b.join(" "));
    let (a, b) = (best_a.as_ref().expect("reps >= 1"), best_b.as_ref().expect("reps >= 1"));
    println!("PROOF {label} stock: {}", a.line());
    println!("PROOF {label} ours:  {}", b.line());
    let ratio = |k: usize| a.phases[k] / b.phases[k];
    println!(
        "PAIRED {label}: stock best {:.1} ms, ours {:.1} ms, stock/ours = {:.3} (commit {:.2}x, open+fri {:.2}x; {reps} alternating runs each)",
        a.total * 1e3,
        b.total * 1e3,
        a.total / b.total,
        ratio(0),
        ratio(3),
    );
}

fn list(name: &str, default: &str) -> Vec<usize> {
    let text = std::env::var(name).unwrap_or_else(|_| default.to_string());
    text.split(',')
        .filter(|x| !x.trim().is_empty())
        .map(|x| x.trim().parse().unwrap_or_else(|e| panic!("{name}={text:?}: {x:?} is not a number ({e})")))
        .collect()
}

fn run<B: DefaultDevice>(name: &str) {
    let Some((dft, backend)) = stark::bench_backend::<B>(name) else { return };
    let batch_dft = dft.clone();
    let reps = env("BENCH_REPS", 3);
    let stock = stark::config(Radix2DitParallel::<Val>::default());
    let device_openings = env("PROVE_HOST_OPENINGS", 0) != 1;
    let mmcs = BackendMmcs::new(Arc::clone(&backend), 0);
    if env("PROVE_HOST_FRI", 0) == 1 {
        let ours = stark::fused_config_host_fri(dft, mmcs, device_openings);
        keccak_mmcs_statements(name, reps, &stock, &ours);
        println!("STATS {name}: {:?}", p3_uni_stark::StarkGenericConfig::pcs(&ours).stats());
    } else {
        let ours = stark::fused_config_with(dft, mmcs, device_openings);
        keccak_mmcs_statements(name, reps, &stock, &ours);
        println!("STATS {name}: {:?}", p3_uni_stark::StarkGenericConfig::pcs(&ours).stats());
    }
    batch_statement(name, reps, batch_dft, device_openings);
    // The Poseidon2 configuration (Plonky3's Poseidon2 MMCS, a duplex challenger): stock against
    // `BackendPcs` with `BackendMmcs<_, Poseidon2>`.
    let (stock_p2, ours_p2) = (stark::poseidon2::stock(), stark::poseidon2::fused(Arc::clone(&backend)));
    let host_quotient = env("PROVE_HOST_QUOTIENT", 0) == 1;
    for k in list("PROVE_POSEIDON2_LOG_ROWS", "12") {
        let air = FibonacciAir { pairs: 128 };
        let (trace, public) = stark::fibonacci_trace(128, 1 << k);
        let want = stark::prove_checked_against(&stock_p2, &stock_p2, &air, trace.clone(), &public);
        let got = if host_quotient {
            stark::prove_checked_against(&ours_p2, &stock_p2, &air, trace.clone(), &public)
        } else {
            stark::device_prove_checked_against(&ours_p2, &stock_p2, &air, trace.clone(), &public)
        };
        assert_eq!(got, want, "poseidon2 fibonacci 2^{k}: the proofs differ");
        paired(
            &format!("{name} prove poseidon2 fibonacci 2^{k}x256"),
            reps,
            || trace.clone(),
            |t| p3_uni_stark::prove(&stock_p2, &air, t, &public).map(drop).expect("proof"),
            |t| prove_ours(host_quotient, &ours_p2, &air, t, &public),
        );
    }
}

/// Stock Plonky3's configuration.
type Stock = stark::Config<Radix2DitParallel<Val>>;

/// A virtual machine's tables at the scale of `log_rows` (its tallest height): nine tables of
/// heights `2^(log_rows - 7)` to `2^log_rows` and widths 20 to 2,633 columns (Fibonacci tables of
/// 20 to 256 columns, Plonky3's Poseidon2 and Keccak-f AIRs), with two heights shared.
fn vm_tables(log_rows: usize) -> Vec<batch::Shape> {
    use batch::Shape;
    assert!(log_rows >= 12, "PROVE_BATCH_LOG_ROWS={log_rows}: the shortest Keccak-f table needs 2^5 rows");
    let keccak = |log: usize| Shape::Keccak { hashes: (1 << log) / 24 };
    vec![
        Shape::Fibonacci { pairs: 128, rows: 1 << log_rows },
        Shape::Fibonacci { pairs: 10, rows: 1 << log_rows },
        Shape::Fibonacci { pairs: 64, rows: 1 << (log_rows - 1) },
        Shape::Poseidon2 { rows: 1 << (log_rows - 2) },
        Shape::Fibonacci { pairs: 32, rows: 1 << (log_rows - 3) },
        keccak(log_rows - 4),
        Shape::Poseidon2 { rows: 1 << (log_rows - 5) },
        Shape::Fibonacci { pairs: 24, rows: 1 << (log_rows - 6) },
        keccak(log_rows - 7),
    ]
}

/// A p3-batch-stark configuration whose PCS's calls are timed.
type TimedConfig<P> = p3_uni_stark::StarkConfig<timed_pcs::TimedPcs<P>, Challenge, Challenger>;

/// The batch statement: [`vm_tables`] at each scale of `PROVE_BATCH_LOG_ROWS` (default `12`; the
/// virtual machine of 2^14 to 2^21 rows is `21`), stock's `prove_batch` against
/// `BackendPcs` with `dft` (the other statements' DFT, its threshold included) and an MMCS on its
/// backend through [`plonky3_adapter::prove_batch`], after checking the proofs are the same bytes
/// and that `verify_batch` accepts ours. Each side's split is read at its PCS
/// ([`timed_pcs::TimedPcs`]): `commit` is every trace commit, `quotient` the tables' quotients up
/// to their chunks' commit.
fn batch_statement<B: DefaultDevice>(name: &str, reps: usize, dft: BackendDft<B>, device_openings: bool) {
    use p3_keccak::Keccak256Hash;
    use plonky3_adapter::{BackendExtensionMmcs, BackendPcs};
    use timed_pcs::TimedPcs;
    let stock: TimedConfig<stark::Pcs<Radix2DitParallel<Val>>> = TimedConfig::new(
        TimedPcs::new(stark::pcs(Radix2DitParallel::default(), 1)),
        Challenger::from_hasher(vec![], Keccak256Hash {}),
    );
    let mmcs = BackendMmcs::new(dft.backend().expect("bench_backend opened it"), 0);
    let fused = BackendPcs::new(dft, mmcs.clone(), stark::fri(BackendExtensionMmcs::new(mmcs), 1))
        .with_device_openings(device_openings);
    let ours = TimedConfig::new(TimedPcs::new(fused), Challenger::from_hasher(vec![], Keccak256Hash {}));
    let (stock_pcs, ours_pcs) =
        (p3_uni_stark::StarkGenericConfig::pcs(&stock), p3_uni_stark::StarkGenericConfig::pcs(&ours));
    let host_quotient = env("PROVE_HOST_QUOTIENT", 0) == 1;
    for log_rows in list("PROVE_BATCH_LOG_ROWS", "12") {
        let statement = batch::Batch::new(&vm_tables(log_rows));
        let dims: Vec<String> = statement.dims().iter().map(|(h, w)| format!("2^{}x{w}", h.trailing_zeros())).collect();
        let want = batch::check_against(&batch::prove(&stock, &statement), &stock, &statement);
        let prove_ours = |statement: &batch::Batch| {
            if host_quotient { batch::prove(&ours, statement) } else { batch::prove_on_device(&ours, statement) }
        };
        let got = batch::check_against(&prove_ours(&statement), &stock, &statement);
        assert!(got == want, "batch 2^{log_rows} [{}]: the proofs differ", dims.join(", "));
        let _ = (stock_pcs.take(), ours_pcs.take());
        paired_split(
            &format!(
                "{name} prove batch of {} tables 2^{}..2^{log_rows} [{}]",
                dims.len(),
                log_rows - 7,
                dims.join(", ")
            ),
            reps,
            || (),
            |()| drop(batch::prove(&stock, &statement)),
            |()| drop(prove_ours(&statement)),
            &|first, split| {
                let p = if first { stock_pcs.take() } else { ours_pcs.take() };
                split.phases[..4]
                    .copy_from_slice(&[p.commit, p.quotient, p.quotient_commit, p.open].map(|d| d.as_secs_f64()));
            },
        );
    }
    println!("STATS {name} batch: {:?}", ours_pcs.inner.stats());
}

/// The statements with the Keccak MMCS (Fibonacci over `PROVE_LOG_ROWS`, the Keccak-f AIR over
/// `KECCAK_HASHES`), stock against `ours`.
fn keccak_mmcs_statements<SC>(name: &str, reps: usize, stock: &Stock, ours: &SC)
where
    SC: p3_uni_stark::StarkGenericConfig<
            Pcs: p3_commit::Pcs<Challenge, Challenger, Domain = TwoAdicMultiplicativeCoset<Val>>,
            Challenge = Challenge,
            Challenger = Challenger,
        >,
    p3_uni_stark::Proof<SC>: serde::Serialize,
    SC::Pcs: plonky3_adapter::DeviceQuotientPcs<Challenge, Challenger>,
    FibonacciAir: p3_uni_stark::QuotientAir<SC>,
    p3_keccak_air::KeccakAir: p3_uni_stark::QuotientAir<SC>,
{
    let host_quotient = env("PROVE_HOST_QUOTIENT", 0) == 1;
    describe_program("fibonacci 256 columns", &FibonacciAir { pairs: 128 });
    describe_program("keccak-f", &p3_keccak_air::KeccakAir {});
    for k in list("PROVE_LOG_ROWS", "12,14") {
        let air = FibonacciAir { pairs: 128 };
        let (trace, public) = stark::fibonacci_trace(128, 1 << k);
        let want = stark::prove_checked::<Stock, _>(stock, &air, trace.clone(), &public);
        let got = if host_quotient {
            stark::prove_checked(ours, &air, trace.clone(), &public)
        } else {
            stark::device_prove_checked_against(ours, stock, &air, trace.clone(), &public)
        };
        assert_eq!(got, want, "fibonacci 2^{k}: the proofs differ");
        paired(
            &format!("{name} prove fibonacci 2^{k}x256"),
            reps,
            || trace.clone(),
            |t| p3_uni_stark::prove::<Stock, _>(stock, &air, t, &public).map(drop).expect("proof"),
            |t| prove_ours(host_quotient, ours, &air, t, &public),
        );
    }
    for hashes in list("KECCAK_HASHES", "85") {
        let air = p3_keccak_air::KeccakAir {};
        let trace = stark::keccak_trace(hashes);
        let rows = trace.values.len() / p3_keccak_air::NUM_KECCAK_COLS;
        let want = stark::prove_checked::<Stock, _>(stock, &air, trace.clone(), &[]);
        let got = if host_quotient {
            stark::prove_checked(ours, &air, trace.clone(), &[])
        } else {
            stark::device_prove_checked_against(ours, stock, &air, trace.clone(), &[])
        };
        assert_eq!(got, want, "keccak {hashes}: the proofs differ");
        paired(
            &format!(
                "{name} prove keccak-f {hashes} permutations 2^{}x{}",
                rows.trailing_zeros(),
                p3_keccak_air::NUM_KECCAK_COLS
            ),
            reps,
            || trace.clone(),
            |t| p3_uni_stark::prove::<Stock, _>(stock, &air, t, &[]).map(drop).expect("proof"),
            |t| prove_ours(host_quotient, ours, &air, t, &[]),
        );
    }
}

/// One proof of ours: [`plonky3_adapter::prove`], or `p3_uni_stark::prove` with `host_quotient`.
fn prove_ours<SC, A>(
    host_quotient: bool,
    config: &SC,
    air: &A,
    trace: p3_matrix::dense::RowMajorMatrix<Val>,
    public: &[Val],
) where
    SC: p3_uni_stark::StarkGenericConfig<Challenge = Challenge>,
    SC::Pcs: plonky3_adapter::DeviceQuotientPcs<Challenge, SC::Challenger>,
    SC::Challenger: p3_challenger::GrindingChallenger<Witness = Val>,
    A: p3_uni_stark::QuotientAir<SC> + for<'a> p3_air::Air<p3_air::DebugConstraintBuilder<'a, Val>>,
{
    let proof = if host_quotient {
        p3_uni_stark::prove(config, air, trace, public)
    } else {
        plonky3_adapter::prove(config, air, trace, public)
    };
    proof.map(drop).expect("proof");
}

/// Prints the compiled constraint program of `air`: its instructions, registers and
/// multiplications per row (quadratic extension), the figures a device's ceiling is derived from.
fn describe_program<A: p3_air::Air<p3_uni_stark::SymbolicAirBuilder<Val>> + p3_air::BaseAir<Val>>(
    label: &str,
    air: &A,
) {
    let layout = p3_air::symbolic::AirLayout {
        main_width: air.width(),
        num_public_values: air.num_public_values(),
        ..Default::default()
    };
    match plonky3_adapter::CompiledAir::compile(air, layout) {
        Ok(c) => {
            let p = c.program();
            println!(
                "PROGRAM {label}: {} constraints, {} shared nodes, {} instructions, {} registers, {} multiplications per row",
                p.constraints(),
                c.nodes(),
                p.len(),
                p.registers(),
                p.muls_per_row(2)
            );
            #[cfg(feature = "cuda")]
            println!(
                "PROGRAM {label}: {} instructions dispatched by the CUDA kernel",
                backend_cuda::quotient_dispatches(p)
            );
        }
        Err(e) => println!("PROGRAM {label}: not compiled ({e})"),
    }
}

fn main() {
    println!("host threads: {}", std::thread::available_parallelism().map_or(0, |n| n.get()));
    run::<CpuBackend>("cpu");
    #[cfg(feature = "cuda")]
    run::<backend_cuda::CudaBackend>("cuda");
    #[cfg(feature = "wgpu")]
    {
        use backend_wgpu::{WgpuBackend, WgpuOptions};
        // The portable arithmetic (u32 pairs, as on adapters without 64-bit integers) on an
        // adapter that has them, registered as the default device of this process.
        if env("BENCH_WGPU_PORTABLE", 0) == 1 {
            match WgpuBackend::new(WgpuOptions { portable_arithmetic: true, ..Default::default() }) {
                Ok(backend) => {
                    plonky3_adapter::register_default(Arc::new(backend), WgpuBackend::MIN_BACKEND_ELEMS);
                }
                Err(e) => println!("SKIPPED bench wgpu (portable arithmetic): {e}"),
            }
        }
        run::<WgpuBackend>("wgpu");
    }
}
