//! Helpers shared by the adapter's integration tests.

#![allow(dead_code)]

pub mod batch;
pub mod stark;

use p3_goldilocks::Goldilocks;
use p3_matrix::dense::RowMajorMatrix;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Goldilocks' modulus.
pub const P: u64 = 0xFFFF_FFFF_0000_0001;

/// A seeded `rows x cols` matrix whose raw words cover all of `u64`, so about one in 2^32 is
/// non-canonical at random; `p`, `p + 1` and `u64::MAX` are planted at the start (when it holds
/// three elements) so every matrix has some.
pub fn matrix(seed: u64, rows: usize, cols: usize) -> RowMajorMatrix<Goldilocks> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut values: Vec<Goldilocks> = (0..rows * cols).map(|_| Goldilocks::new(rng.random())).collect();
    for (v, w) in values.iter_mut().zip([P, P + 1, u64::MAX]) {
        *v = Goldilocks::new(w);
    }
    RowMajorMatrix::new(values, cols)
}

/// Prints a visible skip for `what`, or panics when `require_env` is `1` (used by the GPU
/// features' tests only).
#[allow(unused_imports)]
pub use naive_reference::skip::skip;

/// A `TwoAdicSubgroupDft<Goldilocks>` newtype over a `BackendDft` made by `$make` (an expression
/// of type `BackendDft<_>`), forwarding every method `BackendDft` overrides, so Plonky3's test
/// macros (which build their DFT with `Default`) can run a `BackendDft` configured some other
/// way than its own `Default`.
#[macro_export]
macro_rules! forwarding_dft {
    ($name:ident, $backend:ty, $make:expr) => {
        /// A `BackendDft` built by this test's own constructor.
        #[derive(Clone, Debug)]
        pub struct $name(pub plonky3_adapter::BackendDft<$backend>);

        impl Default for $name {
            fn default() -> Self {
                Self($make)
            }
        }

        impl p3_dft::TwoAdicSubgroupDft<p3_goldilocks::Goldilocks> for $name {
            type Evaluations = <plonky3_adapter::BackendDft<$backend> as p3_dft::TwoAdicSubgroupDft<
                p3_goldilocks::Goldilocks,
            >>::Evaluations;

            fn dft_batch(&self, mat: p3_matrix::dense::RowMajorMatrix<p3_goldilocks::Goldilocks>) -> Self::Evaluations {
                self.0.dft_batch(mat)
            }

            fn coset_dft_batch(
                &self,
                mat: p3_matrix::dense::RowMajorMatrix<p3_goldilocks::Goldilocks>,
                shift: p3_goldilocks::Goldilocks,
            ) -> Self::Evaluations {
                self.0.coset_dft_batch(mat, shift)
            }

            fn idft_batch(
                &self,
                mat: p3_matrix::dense::RowMajorMatrix<p3_goldilocks::Goldilocks>,
            ) -> p3_matrix::dense::RowMajorMatrix<p3_goldilocks::Goldilocks> {
                self.0.idft_batch(mat)
            }

            fn coset_idft_batch(
                &self,
                mat: p3_matrix::dense::RowMajorMatrix<p3_goldilocks::Goldilocks>,
                shift: p3_goldilocks::Goldilocks,
            ) -> p3_matrix::dense::RowMajorMatrix<p3_goldilocks::Goldilocks> {
                self.0.coset_idft_batch(mat, shift)
            }

            fn coset_lde_batch(
                &self,
                mat: p3_matrix::dense::RowMajorMatrix<p3_goldilocks::Goldilocks>,
                added_bits: usize,
                shift: p3_goldilocks::Goldilocks,
            ) -> Self::Evaluations {
                self.0.coset_lde_batch(mat, added_bits, shift)
            }

            fn coset_lde_batch_with_transform<T>(
                &self,
                mat: p3_matrix::dense::RowMajorMatrix<p3_goldilocks::Goldilocks>,
                added_bits: usize,
                shift: p3_goldilocks::Goldilocks,
                transform: T,
            ) -> Self::Evaluations
            where
                T: FnOnce(&mut p3_matrix::dense::RowMajorMatrixViewMut<'_, p3_goldilocks::Goldilocks>, p3_dft::Layout),
            {
                self.0.coset_lde_batch_with_transform(mat, added_bits, shift, transform)
            }

            fn coset_lde_batch_with_blocks<T, K, C>(
                &self,
                mat: p3_matrix::dense::RowMajorMatrix<p3_goldilocks::Goldilocks>,
                added_bits: usize,
                shift: p3_goldilocks::Goldilocks,
                transform: T,
                make_consumer: K,
            ) -> p3_matrix::bitrev::BitReversedMatrixView<p3_matrix::dense::RowMajorMatrix<p3_goldilocks::Goldilocks>>
            where
                T: FnOnce(&mut p3_matrix::dense::RowMajorMatrixViewMut<'_, p3_goldilocks::Goldilocks>, p3_dft::Layout),
                K: FnOnce(usize) -> C,
                C: Fn(usize, p3_matrix::dense::RowMajorMatrixView<'_, p3_goldilocks::Goldilocks>) + Sync,
            {
                self.0.coset_lde_batch_with_blocks(mat, added_bits, shift, transform, make_consumer)
            }
        }
    };
}
