//! The device memory model of a commit, and admission against a budget.
//!
//! The model is the sum of what a commit puts on the device at once, term by term:
//!
//! | term | bytes |
//! | --- | --- |
//! | LDE | `N * cols * 8` |
//! | trace | `n * cols * 8`: the uploaded trace, live during the LDE and kept as the column-major snapshot when asked |
//! | trees | `(2L - 1) * 32` per tree (leaf digests are written straight into the node array) |
//! | transpose scratch | [`TransposeGeometry::scratch_bytes`] |
//! | twiddles | [`LdeTwiddles::bytes_for`] |
//!
//! It is an upper bound on the commit's peak: the trace and the scratch are never live together
//! with everything else, but counting both keeps the bound simple and safe.

use std::fmt;

use crate::error::{Error, Result};
use crate::field::LdeTwiddles;
use crate::plan::TransposeGeometry;
use crate::shape::{LdeParams, LeafLayout, TreeShape};

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
}

/// The modelled device bytes of one commit, term by term.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryModel {
    /// The row-major (then column-major) LDE.
    pub lde: usize,
    /// The trace on the device (and the snapshot, when kept).
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
    /// [`Error::ScratchTooSmall`] when the scratch cap cannot transpose the LDE.
    pub fn of(shape: &CommitShape) -> Result<Self> {
        let lde_shape = shape.lde.lde_shape();
        let leaves = shape.layout.leaf_count(lde_shape.rows()).max(1);
        let trees = TreeShape::new(leaves)?.bytes() * if shape.split { 2 } else { 1 };
        let scratch = TransposeGeometry::new(lde_shape, shape.scratch_cap)?.scratch_bytes();
        Ok(Self {
            lde: lde_shape.bytes(),
            trace: shape.lde.trace().bytes(),
            trees,
            scratch,
            twiddles: LdeTwiddles::bytes_for(shape.lde.log_trace_rows(), shape.lde.log_blowup()),
        })
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

    /// The sum of all terms, in bytes.
    pub fn total(&self) -> usize {
        self.terms().iter().map(|t| t.1).sum()
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
/// [`Error::Refused`] listing every term when `in_flight + model.total() > budget`.
pub fn admit(model: &MemoryModel, budget: usize, in_flight: usize) -> Result<()> {
    if in_flight.saturating_add(model.total()) > budget {
        return Err(Error::Refused(Box::new(Refusal { model: model.clone(), budget, in_flight })));
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
    use crate::plan::DEFAULT_SCRATCH_CAP;
    use crate::shape::MatrixShape;

    fn model(log_n: u32, cols: usize, blowup: usize, split: bool) -> MemoryModel {
        let trace = MatrixShape::new(1 << log_n, cols).unwrap();
        MemoryModel::of(&CommitShape {
            lde: LdeParams::new(trace, blowup, 7).unwrap(),
            layout: LeafLayout::Rows,
            split,
            scratch_cap: DEFAULT_SCRATCH_CAP,
        })
        .unwrap()
    }

    const GIB: usize = 1 << 30;

    #[test]
    fn pinned_at_2_21_x_316_blowup_2() {
        let m = model(21, 316, 2, false);
        assert_eq!(m.lde, (1 << 22) * 316 * 8); // 9.875 GiB
        assert_eq!(m.trace, (1 << 21) * 316 * 8); // 4.9375 GiB
        assert_eq!(m.trees, ((1 << 23) - 1) * 32); // 256 MiB - 32 B
        assert_eq!(m.scratch, 317 * (1 << 16) * 8); // 158.5 MiB
        assert_eq!(m.twiddles, ((1 << 20) + (1 << 21) + (1 << 21)) * 8); // 40 MiB
        assert_eq!(m.total(), 16_381_378_528);
        assert!((m.total() as f64 / GIB as f64 - 15.256).abs() < 0.001); // 15.26 GiB
    }

    #[test]
    fn pinned_at_2_22_x_612_blowup_2() {
        let m = model(22, 612, 2, false);
        assert_eq!(m.lde, (1 << 23) * 612 * 8); // 38.25 GiB
        assert_eq!(m.trace, (1 << 22) * 612 * 8);
        assert_eq!(m.trees, ((1 << 24) - 1) * 32);
        // 256 MiB / (613 * 8 B) = 54,734 rows: the run is 2^15.
        assert_eq!(m.scratch, 613 * (1 << 15) * 8);
        assert_eq!(m.twiddles, ((1 << 21) + (1 << 22) + (1 << 22)) * 8);
        assert_eq!(m.total(), 62_387_388_384); // 58.10 GiB
        // Split trees double the tree term only.
        assert_eq!(model(22, 612, 2, true).total(), m.total() + m.trees);
    }

    #[test]
    fn admission_lists_every_term() {
        let m = model(21, 316, 2, false);
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
