//! The toy backend against the CPU backend through `commit::commit`: equal column-major LDE
//! bytes, roots and node arrays for both hashes, both layouts and split trees.

use conformance::parity::{CASES, compare};

#[test]
fn commit_parity() {
    let toy = toy_backend::ToyBackend::new();
    // 201 columns: the split cases of CASES split at columns 100 and 200.
    compare(&toy, "toy", (1 << 6, 201, 2), &CASES, None);
    // Narrow tables take the unsplit cases.
    compare(&toy, "toy", (1 << 5, 3, 4), &CASES[..3], None);
}
