//! FRI's commit phase on the device: [`BackendExtensionMmcs`], the FRI MMCS whose layers
//! [`crate::BackendPcs`] folds and commits where they are.
//!
//! `p3_fri::prover::prove_fri` folds each layer on the host and hands it to the FRI MMCS, which
//! uploads it again to hash it. With [`BackendExtensionMmcs`] as the FRI MMCS, the openings run
//! [`prove`] instead: `prove_fri` step for step (the same transcript, through
//! `p3_fri::ProverTranscript`, the same schedule, `p3_fri::FriShape`), whose first input goes up
//! once and whose every round is folded by [`Backend::fri_fold`] (CONVENTIONS.md, "FRI folding";
//! an arity-`2^k` round is `k` folds, the roll-in of a shorter input the last fold's addend) and
//! committed from the device buffer ([`BackendMmcs`], leaves hashed where they are). Each layer
//! comes down once, as the host copy its openings read. Field arithmetic is exact, so the folds
//! equal `TwoAdicFriFolding::fold_matrix`'s and the proof is the same bytes.
//!
//! A backend without the fold ([`backend_api::Error::Unsupported`]) or a device error folds that
//! round and every later one on the host from the layer's host copy, as `prove_fri` does; the
//! proof is unchanged.

use std::any::Any;
use std::fmt;
use std::marker::PhantomData;
use std::sync::atomic::Ordering;

use backend_api::{Backend, DeviceBuffer as _, MatrixShape};
use p3_challenger::{CanObserve, FieldChallenger, GrindingChallenger};
use p3_commit::{BatchOpening, BatchOpeningRef, ExtensionMmcs, Mmcs};
use p3_dft::{Radix2DFTSmallBatch, TwoAdicSubgroupDft};
use p3_field::{ExtensionField, PrimeCharacteristicRing, PrimeField64};
use p3_fri::{
    BatchMultiOpening, CommitPhaseMultiStep, FriFoldingStrategy, FriParameters, FriProof, FriProverError, FriShape,
    ProverTranscript, TwoAdicFriFolding, TwoAdicFriFoldingForMmcs,
};
use p3_goldilocks::Goldilocks;
use p3_matrix::dense::RowMajorMatrix;
use p3_matrix::extension::FlatMatrixView;
use p3_matrix::{Dimensions, Matrix};
use p3_util::{log2_strict_usize, reverse_slice_index_bits};
use rayon::prelude::*;

use crate::convert::{as_words, into_field_vec};
use crate::digest::{Keccak256, MmcsHash};
use crate::mmcs::{BackendMmcs, BackendProverData};
use crate::pcs::Counters;

/// Plonky3's `ExtensionMmcs<Goldilocks, EF, BackendMmcs<B, H>>`, whose commitments, proofs and
/// verification it is (every method is that MMCS's), as the FRI MMCS of a [`crate::BackendPcs`]:
/// with it, FRI's layers are folded and committed on the device (the module's text).
///
/// Swap it in where the FRI parameters name the extension MMCS:
/// `FriParameters { mmcs: BackendExtensionMmcs::new(mmcs.clone()), .. }` for
/// `ExtensionMmcs::new(mmcs.clone())`. The proof's bytes are those of stock `TwoAdicFriPcs` with
/// `ExtensionMmcs<Goldilocks, EF, KeccakMerkleMmcs>` (or Poseidon2's) and the same parameters.
pub struct BackendExtensionMmcs<B: Backend, EF, H: MmcsHash = Keccak256> {
    inner: BackendMmcs<B, H>,
    ext: ExtensionMmcs<Goldilocks, EF, BackendMmcs<B, H>>,
}

impl<B: Backend, EF, H: MmcsHash> BackendExtensionMmcs<B, EF, H> {
    /// The extension MMCS over `inner`, as `ExtensionMmcs::new(inner)`.
    pub fn new(inner: BackendMmcs<B, H>) -> Self {
        Self { ext: ExtensionMmcs::new(inner.clone()), inner }
    }

    /// The base-field MMCS the layers are committed with.
    pub fn inner(&self) -> &BackendMmcs<B, H> {
        &self.inner
    }
}

impl<B: Backend, EF, H: MmcsHash> Clone for BackendExtensionMmcs<B, EF, H> {
    fn clone(&self) -> Self {
        Self::new(self.inner.clone())
    }
}

impl<B: Backend, EF, H: MmcsHash> fmt::Debug for BackendExtensionMmcs<B, EF, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BackendExtensionMmcs")
            .field("extension", &std::any::type_name::<EF>())
            .field("inner", &self.inner)
            .finish()
    }
}

type Ext<B, EF, H> = ExtensionMmcs<Goldilocks, EF, BackendMmcs<B, H>>;

impl<B: Backend, EF: ExtensionField<Goldilocks>, H: MmcsHash> Mmcs<EF> for BackendExtensionMmcs<B, EF, H> {
    type ProverData<M> = <Ext<B, EF, H> as Mmcs<EF>>::ProverData<M>;
    type Commitment = <Ext<B, EF, H> as Mmcs<EF>>::Commitment;
    type Proof = <Ext<B, EF, H> as Mmcs<EF>>::Proof;
    type MultiProof = <Ext<B, EF, H> as Mmcs<EF>>::MultiProof;
    type Error = <Ext<B, EF, H> as Mmcs<EF>>::Error;

    fn commit<M: Matrix<EF>>(&self, inputs: Vec<M>) -> (Self::Commitment, Self::ProverData<M>) {
        self.ext.commit(inputs)
    }

    fn open_batch<M: Matrix<EF>>(&self, index: usize, prover_data: &Self::ProverData<M>) -> BatchOpening<EF, Self> {
        let (values, proof) = self.ext.open_batch(index, prover_data).unpack();
        BatchOpening::new(values, proof)
    }

    fn get_matrices<'a, M: Matrix<EF>>(&self, prover_data: &'a Self::ProverData<M>) -> Vec<&'a M> {
        self.ext.get_matrices(prover_data)
    }

    fn verify_batch(
        &self,
        commit: &Self::Commitment,
        dimensions: &[Dimensions],
        index: usize,
        batch_opening: BatchOpeningRef<'_, EF, Self>,
    ) -> Result<(), Self::Error> {
        let (values, proof) = batch_opening.unpack();
        self.ext.verify_batch(commit, dimensions, index, BatchOpeningRef::new(values, proof))
    }

    fn open_multi_batch<M: Matrix<EF>>(
        &self,
        indices: &[usize],
        prover_data: &Self::ProverData<M>,
    ) -> (Vec<Vec<Vec<EF>>>, Self::MultiProof) {
        self.ext.open_multi_batch(indices, prover_data)
    }

    fn verify_multi_batch<R: AsRef<[EF]> + PartialEq>(
        &self,
        commit: &Self::Commitment,
        dimensions: &[Dimensions],
        indices: &[usize],
        opened_values: &[Vec<R>],
        proof: &Self::MultiProof,
    ) -> Result<(), Self::Error> {
        self.ext.verify_multi_batch(commit, dimensions, indices, opened_values, proof)
    }
}

/// `value` as `U`, which is its own type (`T` and `U` are one type, known only at run time: the
/// FRI MMCS generic and [`BackendExtensionMmcs`], checked by the caller's downcast).
fn same<T: 'static, U: 'static>(value: T) -> U {
    *(Box::new(value) as Box<dyn Any>)
        .downcast::<U>()
        .unwrap_or_else(|_| unreachable!("{} is {}", std::any::type_name::<T>(), std::any::type_name::<U>()))
}

/// FRI's parameters with the layers of a [`BackendExtensionMmcs`] committed on the host below
/// `min_device_elems` elements (of a layer's flattened base-field matrix, as
/// [`BackendMmcs::with_min_device_elems`] counts them), every other parameter as it is; `None`
/// when the FRI MMCS is not a [`BackendExtensionMmcs`] or already keeps such layers on the host
/// (nothing would change). A proof whose commits all stayed on the host folds its layers on the
/// host: they are smaller than those commits, and each device round trip would cost more than
/// stock's hashing.
pub(crate) fn with_host_layers<FriMmcs: 'static, B: Backend + 'static, EF: 'static, H: MmcsHash>(
    fri: &FriParameters<FriMmcs>,
    min_device_elems: usize,
) -> Option<FriParameters<FriMmcs>> {
    let inner = on_device::<FriMmcs, B, EF, H>(&fri.mmcs)?.inner();
    if min_device_elems <= inner.min_device_elems() {
        return None;
    }
    let mmcs = BackendExtensionMmcs::<B, EF, H>::new(inner.clone().with_min_device_elems(min_device_elems));
    Some(FriParameters {
        log_blowup: fri.log_blowup,
        log_final_poly_len: fri.log_final_poly_len,
        max_log_arity: fri.max_log_arity,
        num_queries: fri.num_queries,
        batch_proof_of_work_bits: fri.batch_proof_of_work_bits,
        commit_proof_of_work_bits: fri.commit_proof_of_work_bits,
        query_proof_of_work_bits: fri.query_proof_of_work_bits,
        mmcs: same(mmcs),
    })
}

/// The FRI MMCS as [`BackendExtensionMmcs`], when it is one.
pub(crate) fn on_device<FriMmcs: 'static, B: Backend + 'static, EF: 'static, H: MmcsHash>(
    mmcs: &FriMmcs,
) -> Option<&BackendExtensionMmcs<B, EF, H>> {
    (mmcs as &dyn Any).downcast_ref()
}

/// The prover data of one FRI layer.
type LayerData<B, EF, H> = BackendProverData<B, FlatMatrixView<Goldilocks, EF, RowMajorMatrix<EF>>, H>;
/// What [`prove`] returns: `prove_fri`'s proof.
pub(crate) type Proof<EF, FriMmcs, B, H> =
    FriProof<EF, FriMmcs, Goldilocks, Vec<BatchMultiOpening<Goldilocks, BackendMmcs<B, H>>>>;
/// One commitment's prover data and its opening points, as `prove_fri` takes them.
pub(crate) type Request<'a, B, H, EF> =
    p3_commit::OpeningRequest<'a, BackendProverData<B, RowMajorMatrix<Goldilocks>, H>, EF>;

/// The `d x d` row-major matrix of multiplication by `x` in the basis of `EF`'s coordinates:
/// column `c` is `x` times basis element `c`.
pub(crate) fn multiplication_matrix<EF: ExtensionField<Goldilocks>>(x: EF) -> Vec<u64> {
    let d = EF::DIMENSION;
    let columns: Vec<EF> = (0..d).map(|c| x * EF::ith_basis_element(c).expect("c < DIMENSION")).collect();
    (0..d)
        .flat_map(|r| columns.iter().map(move |col| col.as_basis_coefficients_slice()[r].as_canonical_u64()))
        .collect()
}

/// The words of extension elements (their coordinates in order).
fn ext_words<EF: ExtensionField<Goldilocks>>(values: &[EF]) -> Vec<u64> {
    let d = EF::DIMENSION;
    let mut words = vec![0u64; values.len() * d];
    words
        .par_chunks_mut(d)
        .zip(values.par_iter())
        .for_each(|(w, x)| w.copy_from_slice(as_words(x.as_basis_coefficients_slice())));
    words
}

/// One round's folds on the device: `log_arity` folds of `layer` with `beta, beta^2, ...`, the
/// last adding `addend` times `beta^(2^log_arity)`; the folded vector stays on the device and
/// comes down.
fn fold_on_device<B: Backend, EF: ExtensionField<Goldilocks>>(
    backend: &B,
    layer: &B::Buffer,
    beta: EF,
    log_arity: usize,
    addend: Option<&[EF]>,
) -> backend_api::Result<(Vec<EF>, B::Buffer)> {
    let addend = match addend {
        Some(v) => Some((backend.upload(&ext_words(v))?, multiplication_matrix(beta.exp_power_of_2(log_arity)))),
        None => None,
    };
    let mut round_beta = beta;
    let mut folded: Option<B::Buffer> = None;
    for s in 0..log_arity {
        let input = folded.as_ref().unwrap_or(layer);
        let mut out = backend.alloc(input.len() / 2)?;
        let add = if s + 1 == log_arity { addend.as_ref().map(|(v, gamma)| (v, &gamma[..])) } else { None };
        backend.fri_fold(input, &multiplication_matrix(round_beta), add, &mut out)?;
        folded = Some(out);
        round_beta = round_beta.square();
    }
    let folded = folded.ok_or_else(|| backend_api::Error::InvalidArgument("a FRI round of arity 1".into()))?;
    let words = backend.download_vec(&folded)?;
    Ok((EF::reconstitute_from_base(into_field_vec(words)), folded))
}

/// `p3_fri::prover::prove_fri` (0.9.0-rc.2) for [`crate::BackendPcs`]'s openings, with the FRI
/// MMCS `fri` (the parameters' own, downcast): the commit phase folds and commits on `fri`'s
/// backend, the query phase is `prove_fri`'s. `first_on_device`, where given on `fri`'s backend
/// instance, holds the first input's words already (the openings reduced there): it is not
/// uploaded again.
///
/// # Errors
/// `prove_fri`'s: an input too short for the final polynomial.
///
/// # Panics
/// Where `prove_fri` panics (no input, inputs not in descending length, parameters without
/// soundness), with its messages.
#[allow(clippy::too_many_arguments)] // prove_fri's arguments, with the downcast FRI MMCS.
pub(crate) fn prove<B, H, EF, FriMmcs, Challenger>(
    fri: &BackendExtensionMmcs<B, EF, H>,
    params: &FriParameters<FriMmcs>,
    inputs: Vec<Vec<EF>>,
    first_on_device: Option<(&B, B::Buffer)>,
    challenger: &mut Challenger,
    log_global_max_height: usize,
    requests: &[Request<'_, B, H, EF>],
    input_mmcs: &BackendMmcs<B, H>,
    batch_pow_witness: Goldilocks,
    counters: &Counters,
) -> Result<Proof<EF, FriMmcs, B, H>, FriProverError>
where
    B: Backend + 'static,
    H: MmcsHash,
    EF: ExtensionField<Goldilocks>,
    FriMmcs: Mmcs<EF> + 'static,
    Challenger:
        FieldChallenger<Goldilocks> + GrindingChallenger<Witness = Goldilocks> + CanObserve<FriMmcs::Commitment>,
{
    let _span = tracing::info_span!("FRI prover").entered();
    assert!(!inputs.is_empty());
    assert!(params.num_queries > 0, "num_queries must be at least 1 for FRI soundness");
    assert!(params.log_blowup > 0, "log_blowup must be at least 1 for FRI soundness");
    assert!(params.max_log_arity > 0, "max_log_arity must be at least 1 to guarantee folding progress");
    assert!(
        inputs.windows(2).all(|w| w[0].len() >= w[1].len()),
        "Inputs are not sorted in descending order of length."
    );
    assert_eq!(
        log_global_max_height,
        log2_strict_usize(inputs[0].len()),
        "log_global_max_height must match the largest input length"
    );
    let log_min_height = log2_strict_usize(inputs.last().expect("inputs").len());
    crate::open::validate_input_height(params.log_final_poly_len, params.log_blowup, log_min_height)?;

    let folding: TwoAdicFriFoldingForMmcs<Goldilocks, BackendMmcs<B, H>> = TwoAdicFriFolding(PhantomData);
    let input_log_heights: Vec<usize> = inputs.iter().map(|input| log2_strict_usize(input.len())).collect();
    let index_bits = log_global_max_height + FriFoldingStrategy::<Goldilocks, EF>::extra_query_index_bits(&folding);
    let shape = FriShape::new(params, &input_log_heights, index_bits);
    let log_arities = shape.log_arities.clone();
    let mut transcript = ProverTranscript::<Challenger, Goldilocks, EF>::new(challenger, shape);

    // The commit phase.
    let commit_span = tracing::info_span!("commit phase").entered();
    let backend = &**fri.inner().backend();
    let d = EF::DIMENSION;
    let mut inputs = inputs.into_iter().peekable();
    let first = EF::flatten_to_base(inputs.next().expect("inputs"));
    let mut device = match first_on_device {
        Some((b, buf)) if std::ptr::eq(b, backend) && buf.len() == first.len() => Some(buf),
        _ => backend
            .upload(as_words(&first))
            .map_err(|e| {
                counters.device_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!("plonky3-adapter: uploading FRI's first input failed: {e}; folding on the host");
            })
            .ok(),
    };
    let mut folded: Vec<EF> = EF::reconstitute_from_base(first);
    let (mut commits, mut data, mut pow_witnesses) = (vec![], Vec::<LayerData<B, EF, H>>::new(), vec![]);
    for &log_arity in &log_arities {
        let arity = 1 << log_arity;
        let rows = folded.len() / arity;
        let leaves = RowMajorMatrix::new(folded, arity);
        let (commit, layer) = match &device {
            Some(buf) => {
                let shape = MatrixShape::new(rows, arity * d).expect("a FRI layer's shape");
                fri.inner().commit_device_rows(buf, shape, FlatMatrixView::new(leaves))
            }
            None => fri.inner().commit(vec![FlatMatrixView::new(leaves)]),
        };
        let (beta, witness) = transcript.commit_round(same::<_, FriMmcs::Commitment>(commit.clone()));
        commits.push(same::<_, FriMmcs::Commitment>(commit));
        pow_witnesses.push(witness.unwrap_or(Goldilocks::ZERO));

        let next = inputs.next_if(|v| v.len() == rows);
        let on_device = device.take().and_then(|buf| {
            fold_on_device(backend, &buf, beta, log_arity, next.as_deref())
                .map_err(|e| {
                    if !e.is_unsupported() {
                        counters.device_errors.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(
                            "plonky3-adapter: folding a FRI layer on the device failed: {e}; folding on the host"
                        );
                    }
                })
                .ok()
        });
        (folded, device) = match on_device {
            Some((host, buf)) => {
                counters.device_fri_rounds.fetch_add(1, Ordering::Relaxed);
                (host, Some(buf))
            }
            None => {
                counters.host_fri_rounds.fetch_add(1, Ordering::Relaxed);
                let leaves = fri.get_matrices(&layer).pop().expect("one matrix a layer");
                let mut host = folding.fold_matrix(beta, log_arity, leaves.as_view());
                if let Some(v) = next {
                    let beta_pow = beta.exp_power_of_2(log_arity);
                    host.par_iter_mut().zip(v.par_iter()).for_each(|(c, &x)| *c += beta_pow * x);
                }
                (host, None)
            }
        };
        data.push(layer);
    }
    drop(device);
    folded.truncate(params.final_poly_len());
    reverse_slice_index_bits(&mut folded);
    let final_poly = Radix2DFTSmallBatch::default().idft_algebra(folded);
    drop(commit_span);

    let (indices, pow_witness) = transcript.query_phase(&final_poly);
    transcript.finish();

    let _query_span = tracing::info_span!("query phase").entered();
    let input_openings = requests
        .iter()
        .map(|request| {
            let log_max_height = log2_strict_usize(input_mmcs.get_max_height(request.prover_data));
            let reduced: Vec<usize> = indices.iter().map(|&i| i >> (log_global_max_height - log_max_height)).collect();
            let (opened_values, opening_proof) = input_mmcs.open_multi_batch(&reduced, request.prover_data);
            BatchMultiOpening { opened_values, opening_proof }
        })
        .collect();
    let mut current: Vec<usize> = indices;
    let commit_phase_openings = data
        .iter()
        .zip(&log_arities)
        .map(|(layer, &log_arity)| {
            let arity = 1 << log_arity;
            let groups: Vec<usize> = current.iter().map(|&i| i >> log_arity).collect();
            let (rows, proof) = fri.open_multi_batch(&groups, layer);
            let sibling_values = current
                .iter()
                .zip(rows)
                .map(|(&index, mut rows)| {
                    assert_eq!(rows.len(), 1);
                    let row = rows.pop().expect("one row");
                    assert_eq!(row.len(), arity, "Committed data should have arity {arity} elements");
                    row.into_iter().enumerate().filter(|&(j, _)| j != index % arity).map(|(_, v)| v).collect()
                })
                .collect();
            current = groups;
            CommitPhaseMultiStep::<EF, FriMmcs> { sibling_values, opening_proof: same(proof) }
        })
        .collect();

    Ok(FriProof {
        batch_pow_witness,
        commit_phase_commits: commits,
        commit_pow_witnesses: pow_witnesses,
        input_openings,
        commit_phase_openings,
        final_poly,
        query_pow_witness: pow_witness.unwrap_or(Goldilocks::ZERO),
    })
}

#[cfg(test)]
mod tests {
    use p3_field::BasedVectorSpace;
    use p3_field::extension::BinomialExtensionField;

    use super::*;

    type Ef = BinomialExtensionField<Goldilocks, 2>;

    fn coordinates(x: Ef) -> Vec<u64> {
        <Ef as BasedVectorSpace<Goldilocks>>::as_basis_coefficients_slice(&x)
            .iter()
            .map(|c| c.as_canonical_u64())
            .collect()
    }

    #[test]
    fn the_multiplication_matrix_multiplies() {
        let x = Ef::from_basis_coefficients_fn(|i| Goldilocks::new([3, 0xFFFF_FFFF_0000_0000][i]));
        let y = Ef::from_basis_coefficients_fn(|i| Goldilocks::new([0x1234_5678_9abc, 17][i]));
        let m = multiplication_matrix(x);
        let v = coordinates(y);
        let product: Vec<u64> = (0..2)
            .map(|r| {
                (0..2)
                    .fold(Goldilocks::ZERO, |acc, c| acc + Goldilocks::new(m[r * 2 + c]) * Goldilocks::new(v[c]))
                    .as_canonical_u64()
            })
            .collect();
        assert_eq!(product, coordinates(x * y));
    }
}
