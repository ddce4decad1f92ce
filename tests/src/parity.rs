//! The cross-backend parity compare shared by `tests/parity_cuda.rs` and `tests/parity_wgpu.rs`:
//! one trace committed through the prover's own `commit` on the CPU backend (the oracle) and on
//! the backend under test, then the column-major LDE (element by element and by fingerprint),
//! every root and every node array compared, and the tracker's peak reported against the memory
//! model (checked against the model plus 1% when measuring).

use backend_api::{Backend, HashKind, LeafLayout, MatrixShape};
use backend_cpu::CpuBackend;
use commit::memory::MemoryModel;
use commit::{CommitParams, NoProgress, TraceInput};

/// One commit configuration of a parity run.
#[derive(Clone, Debug)]
pub struct Case {
    /// The leaf and node hash.
    pub hash: HashKind,
    /// The leaf layout.
    pub layout: LeafLayout,
    /// The column at which the trace is split into two trees, if any.
    pub split: Option<usize>,
}

/// Every hash unsplit (the first three), then split trees and the pairs layout on a split tree.
pub const CASES: [Case; 5] = [
    Case { hash: HashKind::Keccak256, layout: LeafLayout::Rows, split: None },
    Case { hash: HashKind::Blake3, layout: LeafLayout::Rows, split: None },
    Case { hash: HashKind::Poseidon2, layout: LeafLayout::Rows, split: None },
    Case { hash: HashKind::Keccak256, layout: LeafLayout::Rows, split: Some(100) },
    Case { hash: HashKind::Blake3, layout: LeafLayout::LambdaVmPairs, split: Some(200) },
];

/// The backend, or `None` after a visible `SKIPPED <test>: <reason>` line (a panic when
/// `require_env` is `1`): the workspace's one skip rule, [`crate::reference::skip`].
pub use crate::reference::skip::or_skip;

/// Memory measurements of a backend around a measured commit, beyond the tracker's peak (which
/// [`compare`] checks itself).
pub trait Probe<B> {
    /// Runs just before the commit (e.g. empties pools, resets high-water marks).
    fn before(&mut self, _gpu: &B) {}
    /// Runs after the commit and a `synchronize`: reports and checks. `peak` is the tracker's peak
    /// above the live bytes before the commit.
    fn after(&mut self, _gpu: &B, _what: &str, _model: &MemoryModel, _peak: usize) {}
}

/// A [`Probe`] that measures nothing beyond the tracker's peak.
#[derive(Clone, Copy, Debug, Default)]
pub struct TrackerOnly;

impl<B> Probe<B> for TrackerOnly {}

/// A fingerprint of a word stream's bytes: BLAKE3 over 64 MiB pieces hashed on all cores, then
/// BLAKE3 of the length and the piece digests.
pub fn fingerprint(words: &[u64]) -> String {
    const PIECE: usize = 8 << 20;
    let pieces: Vec<&[u64]> = words.chunks(PIECE).collect();
    let mut digests = vec![[0u8; 32]; pieces.len()];
    let threads = std::thread::available_parallelism().map_or(4, |n| n.get());
    let per_thread = pieces.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        for (ps, ds) in pieces.chunks(per_thread).zip(digests.chunks_mut(per_thread)) {
            s.spawn(move || {
                for (p, d) in ps.iter().zip(ds.iter_mut()) {
                    let bytes: Vec<u8> = p.iter().flat_map(|w| w.to_le_bytes()).collect();
                    *d = *blake3::hash(&bytes).as_bytes();
                }
            });
        }
    });
    let mut h = blake3::Hasher::new();
    h.update(&(words.len() as u64).to_le_bytes());
    digests.iter().for_each(|d| {
        h.update(d);
    });
    backend_api::hex(h.finalize().as_bytes())
}

/// Commits one synthetic `rows x cols` trace on the CPU backend and on `gpu` (called `name` in
/// messages) for every case, and compares the column-major LDE, the roots and the node arrays.
/// With `measure`, the probe runs around each commit on `gpu` and the tracker's peak must stay
/// within the memory model plus 1%.
///
/// A case that splits at column `s` needs more than `s` columns: all of [`CASES`] needs at least
/// 201, and `&CASES[..3]` (the unsplit cases) suits any width.
///
/// # Panics
/// On any difference, a peak over the model, or a case whose split does not fit `cols`.
pub fn compare<B: Backend>(
    gpu: &B,
    name: &str,
    (rows, cols, blowup): (usize, usize, usize),
    cases: &[Case],
    mut measure: Option<&mut dyn Probe<B>>,
) {
    let shape = MatrixShape::new(rows, cols).unwrap();
    let trace = commit::synthetic_trace(shape, 0x5eed_0000 + rows as u64 + cols as u64);
    let cpu = CpuBackend::new();
    let mut cpu_lde: Option<(String, Vec<u64>)> = None;
    let device = gpu.info().device;
    for case in cases {
        if let Some(split) = case.split {
            assert!(
                split < cols,
                "parity case {case:?} splits at column {split}, so it needs at least {} columns, not {cols}; \
                 pass &CASES[..3] (the unsplit cases) for narrower tables",
                split + 1
            );
        }
        let params =
            CommitParams { blowup, hash: case.hash, layout: case.layout, split: case.split, ..Default::default() };
        let what = format!("{rows} x {cols} blowup {blowup} {} {} split {:?}", case.hash, case.layout, case.split);
        let t = std::time::Instant::now();
        let c_cpu = commit::commit(&cpu, TraceInput::host(&trace, shape), &params, &NoProgress).unwrap();
        let cpu_secs = t.elapsed().as_secs_f64();
        if cpu_lde.is_none() {
            let words = cpu.download_vec(&c_cpu.lde).unwrap();
            cpu_lde = Some((fingerprint(&words), words));
        }

        let plan = commit::CommitPlan::new(rows, cols, &params).unwrap();
        if let Some(probe) = measure.as_mut() {
            probe.before(gpu);
        }
        gpu.tracker().reset_peak();
        let base = gpu.memory().live;
        let t = std::time::Instant::now();
        let c_gpu = commit::commit(gpu, TraceInput::host(&trace, shape), &params, &NoProgress).unwrap();
        gpu.synchronize().unwrap();
        let gpu_secs = t.elapsed().as_secs_f64();
        let peak = gpu.memory().peak - base;
        // Measured before the downloads below, with the commitment still alive.
        if let Some(probe) = measure.as_mut() {
            probe.after(gpu, &what, &plan.model, peak);
            let limit = plan.model.total() as f64 * 1.01;
            assert!(peak as f64 <= limit, "{what}: tracker peak {peak} B over the model + 1% ({limit:.0} B)");
        }
        let gpu_words = gpu.download_vec(&c_gpu.lde).unwrap();
        let (cpu_fp, cpu_words) = cpu_lde.as_ref().unwrap();
        let gpu_fp = fingerprint(&gpu_words);
        println!(
            "{what} on {device}: LDE fingerprint cpu {cpu_fp} {name} {gpu_fp}; roots cpu {:?} {name} {:?}; \
             commit {cpu_secs:.2} s cpu, {gpu_secs:.2} s {name} (host upload included); \
             {name} tracker peak {peak} B, model {} B",
            c_cpu.roots.iter().map(|r| backend_api::hex(r)).collect::<Vec<_>>(),
            c_gpu.roots.iter().map(|r| backend_api::hex(r)).collect::<Vec<_>>(),
            plan.model.total(),
        );
        let common = cpu_words.len().min(gpu_words.len());
        if let Some(i) = (0..common).find(|&i| cpu_words[i] != gpu_words[i]) {
            panic!(
                "{what}: column-major LDE differs first at element {i}: cpu {:#x} {name} {:#x}",
                cpu_words[i], gpu_words[i]
            );
        }
        assert_eq!(cpu_words.len(), gpu_words.len(), "{what}: LDE lengths");
        assert_eq!(&gpu_fp, cpu_fp, "{what}: LDE fingerprints");
        assert_eq!(c_cpu.roots, c_gpu.roots, "{what}: roots");
        assert_eq!(c_gpu.roots.len(), if case.split.is_some() { 2 } else { 1 }, "{what}: number of roots");
        // The trees too, node for node.
        assert_eq!(c_cpu.trees.len(), c_gpu.trees.len(), "{what}: number of trees");
        for (tc, tg) in c_cpu.trees.iter().zip(&c_gpu.trees) {
            assert_eq!(cpu.download_vec(tc).unwrap(), gpu.download_vec(tg).unwrap(), "{what}: node arrays");
        }
    }
}
