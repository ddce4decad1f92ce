//! The tables the reliability checks commit, what a commit produced on the host, and the CPU
//! oracle every result is compared with (itself checked against the naive references).

use std::fmt;

use backend_api::{Backend, Error, MatrixShape};
use backend_cpu::CpuBackend;
use commit::{Admission, CommitParams, CommitPlan, Commitment, NoProgress, ProverError, TraceInput, commit_admitted};

use crate::{Context as _, Failure, Gen, Outcome, ensure, ensure_words_eq, reference};

/// A trace and the commit parameters to commit it with.
#[derive(Clone, Debug)]
pub struct Table {
    /// A short description for failure messages.
    pub name: String,
    /// Trace rows (a power of two).
    pub rows: usize,
    /// Trace columns.
    pub cols: usize,
    /// Row-major trace, `rows * cols` elements (non-canonical values included).
    pub data: Vec<u64>,
    /// How to commit it.
    pub params: CommitParams,
}

impl Table {
    /// A seeded table of `rows x cols` from `g`.
    pub fn new(g: &mut Gen, name: impl Into<String>, rows: usize, cols: usize, params: CommitParams) -> Self {
        Self { name: name.into(), rows, cols, data: g.matrix(rows * cols), params }
    }

    fn shape(&self) -> backend_api::Result<MatrixShape> {
        MatrixShape::new(self.rows, self.cols)
    }

    /// The commit's modelled memory (what admission compares with the budget).
    ///
    /// # Errors
    /// A table the pipeline refuses to validate.
    pub fn plan(&self) -> Result<CommitPlan, Failure> {
        CommitPlan::new(self.rows, self.cols, &self.params)
            .map_err(|e| Failure(format!("{}: the commit plan was refused: {e}", self.name)))
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = &self.params;
        write!(
            f,
            "{} ({} x {}, blowup {}, {} {}, split {:?}, snapshot {}, scratch cap {} B)",
            self.name, self.rows, self.cols, p.blowup, p.hash, p.layout, p.split, p.keep_trace_snapshot, p.scratch_cap
        )
    }
}

/// What a commit produced, on the host: everything that must be bit-identical across backends,
/// runs and configurations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Committed {
    /// One root per tree.
    pub roots: Vec<[u8; 32]>,
    /// The column-major LDE.
    pub lde: Vec<u64>,
    /// The column-major trace snapshot, when asked for.
    pub snapshot: Option<Vec<u64>>,
    /// The queued row-major LDE download, when asked for.
    pub host_copy: Option<Vec<u64>>,
}

impl Committed {
    /// A 32-byte fingerprint of everything: the roots, then the column-major LDE's little-endian
    /// bytes, then the snapshot's and the host copy's (blake3).
    pub fn fingerprint(&self) -> [u8; 32] {
        let mut h = blake3::Hasher::new();
        for r in &self.roots {
            h.update(r);
        }
        for part in [Some(&self.lde), self.snapshot.as_ref(), self.host_copy.as_ref()].into_iter().flatten() {
            h.update(&(part.len() as u64).to_le_bytes());
            for x in part {
                h.update(&x.to_le_bytes());
            }
        }
        *h.finalize().as_bytes()
    }

    /// Names the first part that differs from `expected`.
    ///
    /// # Errors
    /// A [`Failure`] naming `what` and the first differing part.
    pub fn ensure_eq(&self, expected: &Committed, what: impl fmt::Display) -> Outcome {
        ensure!(
            self.roots == expected.roots,
            "{what}: roots {:?} differ from the expected {:?}",
            hexes(&self.roots),
            hexes(&expected.roots)
        );
        ensure_words_eq(format_args!("{what}: column-major LDE"), &expected.lde, &self.lde)?;
        match (&expected.snapshot, &self.snapshot) {
            (Some(e), Some(a)) => ensure_words_eq(format_args!("{what}: snapshot"), e, a)?,
            (None, None) => {}
            (e, a) => {
                return Err(Failure(format!("{what}: snapshot present {} vs expected {}", a.is_some(), e.is_some())));
            }
        }
        match (&expected.host_copy, &self.host_copy) {
            (Some(e), Some(a)) => ensure_words_eq(format_args!("{what}: host copy"), e, a)?,
            (None, None) => {}
            (e, a) => {
                return Err(Failure(format!("{what}: host copy present {} vs expected {}", a.is_some(), e.is_some())));
            }
        }
        Ok(())
    }
}

fn hexes(roots: &[[u8; 32]]) -> Vec<String> {
    roots.iter().map(|r| backend_api::hex(r)).collect()
}

/// Commits `table` on `backend` through `admission`.
///
/// # Errors
/// The pipeline's error, untouched.
pub fn commit_table<B: Backend>(
    backend: &B,
    table: &Table,
    admission: &Admission,
) -> Result<Commitment<B>, ProverError> {
    commit_admitted(backend, TraceInput::host(&table.data, table.shape()?), &table.params, admission, &NoProgress)
}

/// Downloads what a commitment holds (waiting for its queued host copy).
///
/// # Errors
/// A device error from a download.
pub fn read_back<B: Backend>(backend: &B, c: Commitment<B>) -> Result<Committed, Error> {
    use backend_api::PendingDownload as _;
    let lde = backend.download_vec(&c.lde)?;
    let snapshot = c.snapshot.as_ref().map(|s| backend.download_vec(s)).transpose()?;
    let host_copy = c.host_copy.map(|d| d.wait().map(|h| h.to_vec())).transpose()?;
    Ok(Committed { roots: c.roots, lde, snapshot, host_copy })
}

/// The CPU backend's commit of `table`, checked against the naive references: the oracle every
/// other result is compared with.
///
/// # Errors
/// A CPU commit that fails or disagrees with the references (a bug in the CPU backend or the
/// pipeline, reported as such).
pub fn oracle(table: &Table) -> Result<Committed, Failure> {
    let cpu = CpuBackend::new();
    let c = commit_table(&cpu, table, &Admission::new(usize::MAX))
        .map_err(|e| Failure(format!("oracle: the CPU commit of {table} failed: {e}")))?;
    let got = read_back(&cpu, c).ctx(format_args!("oracle: reading back the CPU commit of {table}"))?;
    let p = &table.params;
    let big = table.rows * p.blowup;
    let lde_rows = reference::coset_lde(&table.data, table.rows, table.cols, p.blowup, p.shift);
    let ranges = match p.split {
        Some(s) => vec![(0, s), (s, table.cols)],
        None => vec![(0, table.cols)],
    };
    let roots: Vec<[u8; 32]> = ranges
        .into_iter()
        .map(|(c0, c1)| {
            reference::merkle_root(&reference::leaf_digests(&lde_rows, table.cols, p.hash, p.layout, c0..c1), p.hash)
        })
        .collect();
    let expected = Committed {
        roots,
        lde: reference::transpose(&lde_rows, big, table.cols),
        snapshot: p.keep_trace_snapshot.then(|| reference::transpose(&table.data, table.rows, table.cols)),
        host_copy: p.host_copy.then(|| lde_rows.clone()),
    };
    got.ensure_eq(&expected, format_args!("oracle: the CPU commit of {table} vs the naive references"))?;
    Ok(got)
}
