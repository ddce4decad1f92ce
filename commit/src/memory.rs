//! The device memory model of a commit, and admission against a budget.
//!
//! The model is the sum of what a commit puts on the device at once, term by term:
//!
//! | term | bytes |
//! | --- | --- |
//! | LDE | `N * cols * 8`: the trace is written into its first `n` rows and extended in place |
//! | trace | `n * cols * 8` only when the commit keeps the column-major trace snapshot ([`CommitShape::snapshot`]); 0 otherwise |
//! | trees | `(2L - 1) * 32` per tree (leaf digests are written straight into the node array) |
//! | transpose scratch | [`TransposeGeometry::scratch_bytes`] |
//! | twiddles | [`LdeTwiddles::bytes_for`] |
//!
//! The trace needs no buffer of its own: the first `n` rows of the row-major `N`-row LDE buffer are
//! exactly its size, so the commit writes it there and runs
//! [`Backend::coset_lde_in_place`](backend_api::Backend::coset_lde_in_place). Only the snapshot is a
//! separate trace-sized buffer: the trace is uploaded into it, extended from it into the LDE
//! buffer ([`Backend::coset_lde`](backend_api::Backend::coset_lde)), and later transposed in place. A
//! trace already on the device is the caller's, not a term of the model.
//!
//! The model is an upper bound on the commit's peak: the scratch and the twiddles are never live
//! together, but counting both keeps the bound simple and safe.
//!
//! This is commit policy, not part of the port contract: backends count their bytes in
//! [`backend_api::AllocTracker`] and know nothing of budgets; the pipeline admits a commit
//! ([`admit`], [`crate::Admission`]) before it asks a backend for anything.

use std::fmt;

use backend_api::field::LdeTwiddles;
use backend_api::plan::TransposeGeometry;
use backend_api::{ELEM_BYTES, Error, LdeParams, LeafLayout, Result, TreeShape};

use crate::ProverError;

/// Default share of device memory a commit may use: 80%.
pub const DEFAULT_BUDGET_FRACTION: f64 = 0.8;

/// A commit as the model sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitShape {
    /// The LDE parameters.
    pub lde: LdeParams,
    /// The leaf layout (decides the leaf count).
    pub layout: LeafLayout,
    /// Whether the commit builds two split trees.
    pub split: bool,
    /// The transpose scratch cap, in bytes.
    pub scratch_cap: usize,
    /// Whether the commit keeps the trace on the device as a column-major snapshot: the one case
    /// that holds a trace-sized buffer beside the LDE.
    pub snapshot: bool,
}

/// The most working memory a built-in backend's quotient evaluation takes for its register files
/// ([`backend_api::quotient::SCRATCH_BYTES`], 256 MiB).
pub const QUOTIENT_SCRATCH_BYTES: usize = backend_api::quotient::SCRATCH_BYTES;

/// The modelled device bytes of one commit, term by term.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryModel {
    /// The row-major (then column-major) LDE.
    pub lde: usize,
    /// The column-major trace snapshot, `n * cols * 8` when kept, else 0: without it the trace
    /// lives only in the LDE buffer's first `n` rows.
    pub trace: usize,
    /// All Merkle trees.
    pub trees: usize,
    /// The in-place transpose's scratch.
    pub scratch: usize,
    /// The LDE twiddle tables.
    pub twiddles: usize,
}

impl MemoryModel {
    /// The model of `shape`.
    ///
    /// # Errors
    /// [`Error::ScratchTooSmall`] when the scratch cap cannot transpose the LDE;
    /// [`Error::SizeOverflow`] when the terms' sum (or the split trees' bytes) overflows `usize`:
    /// no device holds such a commit, and every later sum of the model is then safe.
    pub fn of(shape: &CommitShape) -> Result<Self> {
        let lde_shape = shape.lde.lde_shape();
        let leaves = shape.layout.leaf_count(lde_shape.rows()).max(1);
        let scratch = TransposeGeometry::new(lde_shape, shape.scratch_cap)?.scratch_bytes();
        let tree_bytes = TreeShape::new(leaves)?.bytes();
        let lde = lde_shape.bytes();
        let trace = if shape.snapshot { shape.lde.trace().bytes() } else { 0 };
        let twiddles = LdeTwiddles::bytes_for(shape.lde.log_trace_rows(), shape.lde.log_blowup());
        // At most two node arrays of (2 * 2^32 - 1) * 32 B each: far below usize::MAX.
        let trees = tree_bytes * if shape.split { 2 } else { 1 };
        let sum: u128 = [lde, trace, trees, scratch, twiddles].iter().map(|&b| b as u128).sum();
        if sum > usize::MAX as u128 {
            let elems = usize::try_from(sum / ELEM_BYTES as u128).unwrap_or(usize::MAX);
            return Err(Error::SizeOverflow {
                what: "commit memory model (LDE, trace, trees, scratch, twiddles)",
                elems,
            });
        }
        Ok(Self { lde, trace, trees, scratch, twiddles })
    }

    /// The model of a quotient evaluation ([`backend_api::Backend::quotient_values`]) over an LDE
    /// of `columns` columns already on the device, which it does not count: the output (`points *
    /// degree` words), a column-major copy of the quotient domain's rows (`points * columns`
    /// words: CUDA reads its cells from one where it can allocate it), and the working memory of a
    /// program of `registers` registers, one register file per point at most, bounded by
    /// [`QUOTIENT_SCRATCH_BYTES`] (the most the built-in backends take), all in the scratch term.
    ///
    /// # Errors
    /// [`Error::SizeOverflow`] when the output's or the copy's bytes overflow `usize`.
    pub fn quotient(points: usize, degree: usize, columns: usize, registers: usize) -> Result<Self> {
        let overflow = || Error::SizeOverflow { what: "quotient memory model (output, columns)", elems: points };
        let words = |per_point: usize| {
            points.checked_mul(per_point).and_then(|w| w.checked_mul(ELEM_BYTES)).ok_or_else(overflow)
        };
        let (out, copy) = (words(degree)?, words(columns)?);
        let files = registers.saturating_mul(points).saturating_mul(ELEM_BYTES).min(QUOTIENT_SCRATCH_BYTES);
        let scratch = out.checked_add(copy).and_then(|b| b.checked_add(files)).ok_or_else(overflow)?;
        Ok(Self { lde: 0, trace: 0, trees: 0, scratch, twiddles: 0 })
    }

    /// The terms with their names, in report order.
    pub fn terms(&self) -> [(&'static str, usize); 5] {
        [
            ("LDE", self.lde),
            ("trace", self.trace),
            ("Merkle trees", self.trees),
            ("transpose scratch", self.scratch),
            ("twiddles", self.twiddles),
        ]
    }

    /// The sum of all terms, in bytes. A model from [`MemoryModel::of`] always fits `usize`; a
    /// hand-built one that does not saturates at `usize::MAX` (more than any device holds).
    pub fn total(&self) -> usize {
        self.terms().iter().fold(0usize, |sum, t| sum.saturating_add(t.1))
    }
}

impl fmt::Display for MemoryModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (name, bytes) in self.terms() {
            writeln!(f, "  {name:<18} {:>16} B  {:>10}", bytes, human_bytes(bytes))?;
        }
        write!(f, "  {:<18} {:>16} B  {:>10}", "total", self.total(), human_bytes(self.total()))
    }
}

/// A commit refused by admission: the model, the budget, and what else was admitted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The commit's model.
    pub model: MemoryModel,
    /// The budget it was compared with, in bytes.
    pub budget: usize,
    /// Bytes already admitted to commits in flight.
    pub in_flight: usize,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "commit refused: it needs {} B ({}), the budget is {} B ({}) with {} B ({}) already admitted",
            self.model.total(),
            human_bytes(self.model.total()),
            self.budget,
            human_bytes(self.budget),
            self.in_flight,
            human_bytes(self.in_flight),
        )?;
        write!(f, "{}", self.model)
    }
}

/// Admits a model against a budget.
///
/// # Errors
/// [`ProverError::Refused`] listing every term when `in_flight + model.total() > budget`.
pub fn admit(model: &MemoryModel, budget: usize, in_flight: usize) -> crate::Result<()> {
    // Checked, not saturating: under a budget of `usize::MAX` a saturated sum would fit, and the
    // bytes admitted would then wrap.
    if in_flight.checked_add(model.total()).is_none_or(|sum| sum > budget) {
        return Err(ProverError::Refused(Box::new(Refusal { model: model.clone(), budget, in_flight })));
    }
    Ok(())
}

/// The default budget for a device of `total` bytes: 80%.
pub fn default_budget(total: usize) -> usize {
    (total as f64 * DEFAULT_BUDGET_FRACTION) as usize
}

/// `1536 -> "1.50 KiB"`.
pub fn human_bytes(bytes: usize) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 { format!("{bytes} B") } else { format!("{v:.2} {}", UNITS[u]) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use backend_api::{DEFAULT_SCRATCH_CAP, MatrixShape};

    fn model_with(log_n: u32, cols: usize, blowup: usize, split: bool, snapshot: bool) -> MemoryModel {
        let trace = MatrixShape::new(1 << log_n, cols).unwrap();
        MemoryModel::of(&CommitShape {
            lde: LdeParams::new(trace, blowup, 7).unwrap(),
            layout: LeafLayout::Rows,
            split,
            scratch_cap: DEFAULT_SCRATCH_CAP,
            snapshot,
        })
        .unwrap()
    }

    fn model(log_n: u32, cols: usize, blowup: usize, split: bool) -> MemoryModel {
        model_with(log_n, cols, blowup, split, false)
    }

    const GIB: usize = 1 << 30;

    fn gib(bytes: usize) -> f64 {
        bytes as f64 / GIB as f64
    }

    #[test]
    fn a_quotient_counts_its_output_and_bounded_register_files() {
        let m = MemoryModel::quotient(1 << 20, 2, 3, 4).unwrap();
        assert_eq!(m.total(), (1 << 20) * 2 * 8 + (1 << 20) * 3 * 8 + (1 << 20) * 4 * 8);
        assert_eq!((m.lde, m.trees, m.twiddles), (0, 0, 0));
        let big = MemoryModel::quotient(1 << 20, 2, 1, 1 << 16).unwrap();
        assert_eq!(big.total(), (1 << 20) * 2 * 8 + (1 << 20) * 8 + QUOTIENT_SCRATCH_BYTES);
        assert!(matches!(MemoryModel::quotient(usize::MAX, 2, 1, 1), Err(Error::SizeOverflow { .. })));
        assert!(matches!(MemoryModel::quotient(1 << 40, 1, 1 << 30, 1), Err(Error::SizeOverflow { .. })));
    }

    #[test]
    fn a_commit_whose_bytes_overflow_is_refused_by_the_model() {
        // 2^32 x 2^28: the LDE is 2^63 B, and so is the snapshot; together 2^64 B.
        let trace = MatrixShape::new(1 << 32, 1 << 28).unwrap();
        let shape = |snapshot, split| CommitShape {
            lde: LdeParams::new(trace, 1, 7).unwrap(),
            layout: LeafLayout::Rows,
            split,
            scratch_cap: 8 << 30,
            snapshot,
        };
        for (snapshot, split) in [(true, false), (true, true)] {
            let err = MemoryModel::of(&shape(snapshot, split)).unwrap_err();
            // The terms in elements: 2^60 (LDE) + 2^60 (snapshot) + the trees, scratch and tables.
            assert!(
                matches!(err, Error::SizeOverflow { elems, .. } if elems > 1 << 61 && elems < (1 << 61) + (1 << 40)),
                "{err}"
            );
            assert!(err.to_string().contains("commit memory model"), "{err}");
        }
        // Without the snapshot it fits usize (no device holds it, which admission says).
        let m = MemoryModel::of(&shape(false, false)).unwrap();
        assert!(m.total() > 1 << 63 && m.total() < usize::MAX, "{}", m.total());
        let refusal = admit(&m, 1 << 40, usize::MAX - 5).unwrap_err();
        assert!(matches!(refusal, ProverError::Refused(_)), "{refusal}");
        // A hand-built model saturates instead of wrapping.
        let huge = MemoryModel { lde: usize::MAX, trace: usize::MAX, trees: 1, scratch: 1, twiddles: 1 };
        assert_eq!(huge.total(), usize::MAX);
    }

    #[test]
    fn pinned_at_2_21_x_316_blowup_2() {
        let m = model(21, 316, 2, false);
        assert_eq!(m.lde, (1 << 22) * 316 * 8); // 9.875 GiB
        assert_eq!(m.trace, 0); // the trace lives in the LDE buffer's first 2^21 rows
        assert_eq!(m.trees, ((1 << 23) - 1) * 32); // 256 MiB - 32 B
        assert_eq!(m.scratch, 317 * (1 << 16) * 8); // 158.5 MiB
        assert_eq!(m.twiddles, ((1 << 20) + (1 << 21) + (1 << 21)) * 8); // 40 MiB
        assert_eq!(m.total(), 11_079_778_272);
        assert!((gib(m.total()) - 10.319).abs() < 0.001, "{}", gib(m.total())); // 10.32 GiB
    }

    #[test]
    fn pinned_at_2_22_x_612_blowup_2() {
        let m = model(22, 612, 2, false);
        assert_eq!(m.lde, (1 << 23) * 612 * 8); // 38.25 GiB
        assert_eq!(m.trace, 0);
        assert_eq!(m.trees, ((1 << 24) - 1) * 32);
        // 256 MiB / (613 * 8 B) = 54,734 rows: the run is 2^15.
        assert_eq!(m.scratch, 613 * (1 << 15) * 8);
        assert_eq!(m.twiddles, ((1 << 21) + (1 << 22) + (1 << 22)) * 8);
        assert_eq!(m.total(), 41_852_076_000); // 38.98 GiB: below a 48 GB card's memory
        assert!(m.total() <= 40 * GIB && (m.total() as f64) < 48e9, "{}", m.total());
        // Split trees double the tree term only.
        assert_eq!(model(22, 612, 2, true).total(), m.total() + m.trees);
    }

    #[test]
    fn pinned_at_2_22_x_316_blowup_2_fits_a_32_gib_budget() {
        let m = model(22, 316, 2, false);
        assert_eq!(m.lde, (1 << 23) * 316 * 8);
        assert_eq!(m.scratch, 317 * (1 << 16) * 8);
        assert_eq!(m.total(), 21_993_357_280); // 20.48 GiB
        assert!((gib(m.total()) - 20.483).abs() < 0.001, "{}", gib(m.total()));
        admit(&m, default_budget(32 * GIB), 0).unwrap();
        // With the snapshot it is the 30.36 GiB of a separate trace buffer, refused at 32 GiB.
        let s = model_with(22, 316, 2, false, true);
        assert_eq!(s.total(), 32_596_557_792);
        assert!(matches!(admit(&s, default_budget(32 * GIB), 0), Err(ProverError::Refused(_))));
    }

    #[test]
    fn the_snapshot_adds_exactly_the_trace() {
        for (log_n, cols, blowup, split) in [(0, 1, 1, false), (3, 5, 4, true), (21, 316, 2, false), (10, 7, 16, true)]
        {
            let without = model_with(log_n, cols, blowup, split, false);
            let with = model_with(log_n, cols, blowup, split, true);
            assert_eq!(without.trace, 0);
            assert_eq!(with.trace, (1 << log_n) * cols * 8);
            assert_eq!(with, MemoryModel { trace: with.trace, ..without.clone() });
            assert_eq!(with.total(), without.total() + with.trace);
        }
        // 2^21 x 316 at blowup 2 with the snapshot: the old 15.26 GiB.
        assert_eq!(model_with(21, 316, 2, false, true).total(), 16_381_378_528);
    }

    #[test]
    fn admission_lists_every_term() {
        let m = model_with(21, 316, 2, false, true);
        admit(&m, m.total(), 0).unwrap();
        let err = admit(&m, m.total(), 1).unwrap_err();
        let msg = err.to_string();
        for (name, bytes) in m.terms() {
            assert!(msg.contains(name) && msg.contains(&bytes.to_string()), "{name} missing from:\n{msg}");
        }
        assert!(msg.contains("already admitted"), "{msg}");
        assert_eq!(default_budget(100 * GIB), 80 * GIB);
    }
}
