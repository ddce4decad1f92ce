//! `CpuBackend::coset_lde` against Plonky3's `coset_lde_batch` (`p3-dft` on the workspace pin),
//! element for element: `Radix2DitParallel` read in natural order (`to_row_major_matrix`) and
//! `Radix2DFTSmallBatch` (natural order already); with every LDE kernel set this CPU runs.
//!
//! Plonky3's Goldilocks holds any `u64` and means it mod p, as this crate does, so both sides get
//! the same words, non-canonical ones included; Plonky3's outputs are compared canonicalised
//! (`as_canonical_u64`), ours as they are (they must already be canonical).

use backend_api::field::P;
use backend_api::{Backend, LdeParams, MatrixShape};
use backend_cpu::{CpuBackend, LdeIsa};
use p3_dft::{Radix2DFTSmallBatch, Radix2DitParallel, TwoAdicSubgroupDft};
use p3_field::PrimeField64;
use p3_goldilocks::Goldilocks;
use p3_matrix::Matrix;
use p3_matrix::dense::RowMajorMatrix;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn canonical(m: &RowMajorMatrix<Goldilocks>) -> Vec<u64> {
    m.values.iter().map(PrimeField64::as_canonical_u64).collect()
}

#[test]
fn coset_lde_equals_plonky3_coset_lde_batch() {
    let backends: Vec<CpuBackend> =
        LdeIsa::supported().into_iter().map(|isa| CpuBackend::new().with_lde_isa(isa).unwrap()).collect();
    let dit_parallel = Radix2DitParallel::<Goldilocks>::default();
    let small_batch = Radix2DFTSmallBatch::<Goldilocks>::default();
    let mut rng = ChaCha8Rng::seed_from_u64(21);
    // Rows 2^1..2^12, widths around the eight-lane vectors and the bench's 64, blowups 1..8,
    // the default shift and two others; the largest shapes span several cache blocks and groups.
    let cases: [(usize, usize, usize, u64); 9] = [
        (2, 1, 2, 7),
        (8, 3, 4, 7),
        (16, 8, 1, 7),
        (64, 9, 2, 0xDEAD_BEEF_1234_5678),
        (256, 17, 8, 7),
        (1024, 64, 2, 7),
        (1 << 12, 64, 2, 7),
        (1 << 11, 316, 2, 3),
        (1 << 12, 5, 4, 7),
    ];
    for (n, m, blowup, shift) in cases {
        // A quarter of the words non-canonical, in [p, 2^64).
        let host: Vec<u64> = (0..n * m)
            .map(|_| if rng.random_bool(0.25) { rng.random_range(P..=u64::MAX) } else { rng.random() })
            .collect();
        let params = LdeParams::new(MatrixShape::new(n, m).unwrap(), blowup, shift).unwrap();

        let input = RowMajorMatrix::new(host.iter().map(|&x| Goldilocks::new(x)).collect(), m);
        let bits = blowup.ilog2() as usize;
        let dit = dit_parallel.coset_lde_batch(input.clone(), bits, Goldilocks::new(shift)).to_row_major_matrix();
        let small = small_batch.coset_lde_batch(input, bits, Goldilocks::new(shift));
        assert_eq!((dit.height(), dit.width()), (n * blowup, m));
        let what = format!("{n} x {m}, blowup {blowup}, shift {shift:#x}");
        assert_eq!(canonical(&dit), canonical(&small), "the two Plonky3 DFTs, {what}");
        for backend in &backends {
            let ours =
                backend.download_vec(&backend.coset_lde(&backend.upload(&host).unwrap(), &params).unwrap()).unwrap();
            assert_eq!(ours, canonical(&dit), "{} kernels, {what}", backend.lde_isa());
        }
    }
}
