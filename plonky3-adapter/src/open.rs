//! [`crate::BackendPcs`]'s openings: `TwoAdicFriPcs::open` step for step, with its two products
//! over every committed LDE on the device where the fused commit kept the LDE there.
//!
//! Plonky3's openings read each committed matrix twice:
//! - **the evaluations at the opening points**: barycentric interpolation over the trace coset,
//!   the first `height / blowup` rows of the bit-reversed LDE, i.e. a column dot product with
//!   the adjusted weights ([`Backend::column_dot_products`] over the natural-order rows `0,
//!   blowup, 2 * blowup, ...`, the weights permuted to match), scaled by one factor;
//! - **the reduced openings**: every row compressed by powers of the batching challenge
//!   `alpha` ([`Backend::row_dot_products`], the products permuted back to bit-reversed order).
//!
//! The challenge field's elements are vectors of `DIMENSION` base-field coordinates, so an
//! extension-field weight vector is `DIMENSION` base-field vectors and one call computes every
//! coordinate. Field arithmetic is exact, so the products equal Plonky3's whatever the order of
//! the sums, and the rest (the transcript, the per-row quotients, FRI) is Plonky3's own code with
//! the same inputs: the proof is the same bytes (the proof tests compare them with stock
//! `TwoAdicFriPcs`). A matrix without a device LDE (the quotient's chunks, a stock commit) runs
//! on the host exactly as stock; a device error logs a warning and computes that matrix on the
//! host.

use std::marker::PhantomData;
use std::sync::atomic::Ordering;

use backend_api::{
    Backend, MAX_DOT_VECTORS, MAX_EXTENSION_DEGREE, MAX_REDUCTION_POINTS, MatrixShape, ReductionCall, ReductionPoint,
    RowStride,
};
use p3_challenger::{CanObserve, FieldChallenger, GrindingChallenger};
use p3_commit::{Mmcs, OpenedValues, OpeningRequest};
use p3_field::{
    BasedVectorSpace, ExtensionField, Field, PackedFieldExtension, PackedValue, PrimeCharacteristicRing, PrimeField64,
    TwoAdicField, batch_multiplicative_inverse, dot_product,
};
use p3_fri::{
    BatchMultiOpening, FriProof, FriProverError, PcsProverTranscript, PcsShape, TwoAdicFriFolding,
    TwoAdicFriFoldingForMmcs, prover,
};
use p3_goldilocks::Goldilocks;
use p3_matrix::Matrix;
use p3_matrix::dense::{RowMajorMatrix, RowMajorMatrixView};
use p3_matrix::interpolation::{Interpolate, compute_adjusted_weights};
use p3_util::{log2_strict_usize, reverse_bits_len};
use rayon::prelude::*;

use crate::digest::MmcsHash;
use crate::mmcs::{BackendMmcs, BackendProverData, DeviceLde};
use crate::pcs::BackendPcs;

type Proof<Challenge, FriMmcs, B, H> =
    FriProof<Challenge, FriMmcs, Goldilocks, Vec<BatchMultiOpening<Goldilocks, BackendMmcs<B, H>>>>;
/// What `Pcs::open` returns.
type Opening<Challenge, FriMmcs, B, H> = (OpenedValues<Challenge>, Proof<Challenge, FriMmcs, B, H>);
/// One commitment's request: its prover data and each matrix's opening points.
type Request<'a, B, H, Challenge> = OpeningRequest<'a, BackendProverData<B, RowMajorMatrix<Goldilocks>, H>, Challenge>;
/// One commitment's matrices and each matrix's opening points.
type Round<'a, B, Challenge> = (Vec<Opened<'a, B>>, &'a Vec<Vec<Challenge>>);

/// One committed matrix to open: its shape, its host copy (bit-reversed rows; made on first use
/// where the commit left it on the device) and, where the commit kept it, the device LDE with this
/// matrix's first column in it.
struct Opened<'a, B: Backend> {
    height: usize,
    width: usize,
    host: Box<dyn Fn() -> RowMajorMatrixView<'a, Goldilocks> + 'a>,
    device: Option<(&'a B, &'a DeviceLde<B>, usize)>,
}

/// `TwoAdicFriPcs::open` (p3-fri 0.9.0-rc.2) with the products of [`Opened::device`] matrices on
/// the device.
pub(crate) fn open<B, FriMmcs, H, Challenge, Challenger>(
    pcs: &BackendPcs<B, FriMmcs, H>,
    requests: Vec<Request<'_, B, H, Challenge>>,
    challenger: &mut Challenger,
) -> Result<Opening<Challenge, FriMmcs, B, H>, FriProverError>
where
    B: Backend + 'static,
    H: MmcsHash,
    FriMmcs: Mmcs<Challenge> + 'static,
    Challenge: ExtensionField<Goldilocks>,
    Challenger:
        FieldChallenger<Goldilocks> + CanObserve<FriMmcs::Commitment> + GrindingChallenger<Witness = Goldilocks>,
{
    let fri = &pcs.fri;
    let rounds: Vec<Round<'_, B, Challenge>> = requests
        .iter()
        .map(|request| {
            let data = request.prover_data;
            let mats = pcs
                .mmcs
                .dims(data)
                .into_iter()
                .enumerate()
                .map(|(i, (height, width))| {
                    let mmcs = &pcs.mmcs;
                    Opened {
                        height,
                        width,
                        host: Box::new(move || mmcs.get_matrices(data)[i].as_view()),
                        device: data.device_lde_of(i).map(|(b, lde, at)| (&**b, lde, at)),
                    }
                })
                .collect();
            (mats, &request.points)
        })
        .collect();

    // Reject every committed height before absorbing claims (`FriParameters::validate_input_height`).
    for (mats, _) in &rounds {
        for m in mats {
            validate_input_height(fri.log_final_poly_len, fri.log_blowup, log2_strict_usize(m.height))?;
        }
    }

    let (global_max_height, global_max_width) = rounds
        .iter()
        .flat_map(|(mats, _)| mats.iter().map(|m| (m.height, m.width)))
        .reduce(|(hmax, wmax), (h, w)| (hmax.max(h), wmax.max(w)))
        .expect("No Matrices Supplied?");
    let log_global_max_height = log2_strict_usize(global_max_height);

    // `1 / (z - x)` over the bit-reversed coset of each point's tallest matrix. The evaluations'
    // weights read their first `1 / blowup`; the host's reduction reads them whole, so where
    // every matrix has a device LDE (reduced there) only that part is computed.
    let all_device = rounds.iter().all(|(mats, _)| mats.iter().all(|m| m.device.is_some_and(|d| pcs.reduces(d.0))));
    let cut = if all_device { fri.log_blowup } else { 0 };
    let inv_denoms = tracing::debug_span!("open: inverse denominators")
        .in_scope(|| inverse_denominators(&rounds, log_global_max_height, cut));
    let adjusted_weights: Vec<(Challenge, Vec<Challenge>)> = inv_denoms
        .iter()
        .map(|(point, denoms)| {
            (*point, compute_adjusted_weights(*point, &denoms[..denoms.len() >> (fri.log_blowup - cut)]))
        })
        .collect();
    let mut whole_denoms = (cut == 0).then_some(inv_denoms);

    let all_opened_values: OpenedValues<Challenge> = rounds
        .iter()
        .map(|(mats, points)| {
            mats.iter()
                .zip(points.iter())
                .map(|(mat, points_for_mat)| {
                    let h = mat.height >> fri.log_blowup;
                    let at: Vec<(Challenge, &[Challenge])> =
                        points_for_mat.iter().map(|&z| (z, &lookup(&adjusted_weights, z)[..h])).collect();
                    let _span = tracing::debug_span!("open: evaluations").entered();
                    // As many points per call as its vectors hold, each point's `DIMENSION` vectors.
                    let per_call = (MAX_DOT_VECTORS / <Challenge as BasedVectorSpace<Goldilocks>>::DIMENSION).max(1);
                    at.chunks(per_call)
                        .flat_map(|group| {
                            let device =
                                mat.device.and_then(|d| device_try(pcs, d.0, || evaluations(d, mat, h, group)));
                            device.unwrap_or_else(|| {
                                let host = (mat.host)();
                                let (low_coset, _) = host.split_rows(h);
                                group
                                    .iter()
                                    .map(|&(z, adj)| {
                                        low_coset.interpolate_coset_with_precomputation(Goldilocks::GENERATOR, z, adj)
                                    })
                                    .collect()
                            })
                        })
                        .collect()
                })
                .collect()
        })
        .collect();

    let mut transcript = PcsProverTranscript::<Challenger, Goldilocks, Challenge>::new(
        challenger,
        PcsShape::from_opened_values(fri, &all_opened_values),
    );
    transcript.claimed_openings(&all_opened_values);
    let (alpha, batch_pow_witness) = transcript.batch_phase();
    let batch_pow_witness = batch_pow_witness.unwrap_or(Goldilocks::ZERO);

    let packed_alpha_powers =
        Challenge::ExtensionPacking::packed_ext_powers_capped(alpha, global_max_width).collect::<Vec<_>>();
    let alpha_powers: Vec<Challenge> = alpha.powers().take(global_max_width).collect();

    let mut num_reduced = [0; 33];
    let mut reduced_openings: [Option<Vec<Challenge>>; 33] = core::array::from_fn(|_| None);
    // Per height: the sum of the matrices reduced on the device (natural order) on one backend,
    // and those matrices, to reduce again on the host if the sum cannot come down.
    let mut device_reduced: [Option<DeviceSum<'_, '_, B, Challenge>>; 33] = core::array::from_fn(|_| None);
    let mut host = HostReduction { pcs, rounds: &rounds, log_global_max_height, whole_denoms: &mut whole_denoms };
    for ((mats, points), openings_for_round) in rounds.iter().zip(all_opened_values.iter()) {
        for ((mat, points_for_mat), openings_for_mat) in mats.iter().zip(points.iter()).zip(openings_for_round) {
            let (height, width) = (mat.height, mat.width);
            let log_height = log2_strict_usize(height);
            let offset = alpha.exp_u64(num_reduced[log_height] as u64);
            // Each point: the point, its weighted claimed openings, the row's rescaling.
            let terms: Vec<Term<Challenge>> = points_for_mat
                .iter()
                .zip(openings_for_mat)
                .enumerate()
                .map(|(point_index, (&point, openings))| {
                    let rescale = alpha.exp_u64((point_index * width) as u64);
                    let reduced: Challenge = dot_product(alpha.powers(), openings.iter().copied());
                    (point, offset * rescale * reduced, rescale)
                })
                .collect();
            num_reduced[log_height] += width * points_for_mat.len();
            // `offset * (f_0(x) + alpha f_1(x) + ...)`: the row's combination.
            let powers: Vec<Challenge> = alpha_powers[..width].iter().map(|&p| p * offset).collect();

            // The whole sum on the device, where the matrix's LDE is there and the backend reduces.
            if let Some(d) = mat.device
                && pcs.reduces(d.0)
                && device_reduced[log_height].as_ref().is_none_or(|sum| std::ptr::eq(sum.backend, d.0))
            {
                let _span = tracing::debug_span!("open: reduction").entered();
                let slot = &mut device_reduced[log_height];
                let acc = slot.as_mut().map(|sum| &mut sum.acc);
                match reduce_on_device(d, mat, &powers, &terms, acc) {
                    Ok(None) => {}
                    Ok(Some(acc)) => *slot = Some(DeviceSum { backend: d.0, acc, mats: vec![] }),
                    Err(e) => {
                        pcs.counters.device_errors.fetch_add(1, Ordering::Relaxed);
                        pcs.counters.host_openings.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(
                            "plonky3-adapter: {} reduced openings failed: {e}; reducing that matrix on the host",
                            d.0.info().backend
                        );
                        // The height's device sum may hold part of this matrix: its matrices go
                        // to the host too.
                        let out = reduced_openings[log_height].get_or_insert_with(|| Challenge::zero_vec(height));
                        for (m, p, t, o) in slot.take().map_or(vec![], |sum| sum.mats) {
                            host.reduce(m, &p, &t, &packed_alpha_powers, o, out, false);
                        }
                        host.reduce(mat, &powers, &terms, &packed_alpha_powers, offset, out, false);
                        continue;
                    }
                }
                pcs.counters.device_openings.fetch_add(1, Ordering::Relaxed);
                pcs.counters.device_reductions.fetch_add(1, Ordering::Relaxed);
                if let Some(sum) = slot {
                    sum.mats.push((mat, powers, terms, offset));
                }
                continue;
            }
            let out = reduced_openings[log_height].get_or_insert_with(|| Challenge::zero_vec(height));
            host.reduce(mat, &powers, &terms, &packed_alpha_powers, offset, out, true);
        }
    }
    // The device's sums in Plonky3's bit-reversed order, added to the host's; a sum that cannot
    // come down is reduced again on the host. The tallest height's, where it is the whole sum,
    // stays on the device as FRI's first input.
    let mut first_input: Option<(&B, B::Buffer)> = None;
    for (log_height, sum) in device_reduced.into_iter().enumerate() {
        let Some(DeviceSum { backend, acc, mats }) = sum else { continue };
        let _span = tracing::debug_span!("open: reduction download").entered();
        let slot = &mut reduced_openings[log_height];
        match download_bit_reversed::<B, Challenge>(backend, &acc, 1 << log_height) {
            Ok((device, reversed)) => match slot {
                Some(host) => host.par_iter_mut().zip(device.par_iter()).for_each(|(h, &d)| *h += d),
                None => {
                    *slot = Some(device);
                    if log_height == log_global_max_height {
                        first_input = Some((backend, reversed));
                    }
                }
            },
            Err(e) => {
                let out = slot.get_or_insert_with(|| Challenge::zero_vec(1 << log_height));
                pcs.counters.device_errors.fetch_add(1, Ordering::Relaxed);
                pcs.counters.host_openings.fetch_add(mats.len(), Ordering::Relaxed);
                tracing::warn!(
                    "plonky3-adapter: {} reduced openings could not come down: {e}; reducing them on the host",
                    backend.info().backend
                );
                for (mat, powers, terms, offset) in &mats {
                    host.reduce(mat, powers, terms, &packed_alpha_powers, *offset, out, false);
                }
            }
        }
    }

    let fri_input: Vec<Vec<Challenge>> = reduced_openings.into_iter().rev().flatten().collect();
    let folding: TwoAdicFriFoldingForMmcs<Goldilocks, BackendMmcs<B, H>> = TwoAdicFriFolding(PhantomData);
    let fri_proof = transcript.delegate(|challenger| {
        // FRI's layers on the device where the FRI MMCS is ours.
        if let Some(fri_mmcs) = crate::fri::on_device::<FriMmcs, B, Challenge, H>(&fri.mmcs) {
            return crate::fri::prove(
                fri_mmcs,
                fri,
                fri_input,
                first_input,
                challenger,
                log_global_max_height,
                &requests,
                &pcs.mmcs,
                batch_pow_witness,
                &pcs.counters,
            );
        }
        prover::prove_fri(
            &folding,
            fri,
            fri_input,
            challenger,
            log_global_max_height,
            &requests,
            &pcs.mmcs,
            batch_pow_witness,
        )
    });
    let fri_proof = match fri_proof {
        Ok(proof) => proof,
        Err(error) => {
            transcript.abort();
            return Err(error);
        }
    };
    transcript.finish();
    Ok((all_opened_values, fri_proof))
}

/// One opening point of a matrix in the reduction: the point `z`, its weighted claimed openings
/// `y` and the rescaling `s` of the row's combination; the row's term is `(y - s v) / (z - x)`.
type Term<Challenge> = (Challenge, Challenge, Challenge);

/// A height's sum reduced on the device: its backend, the accumulator (natural order) and the
/// matrices in it, each with its combination's powers, its terms and its offset.
struct DeviceSum<'m, 'r, B: Backend, Challenge> {
    backend: &'r B,
    acc: B::Buffer,
    mats: Vec<Summed<'m, 'r, B, Challenge>>,
}

/// A matrix in a [`DeviceSum`]: the matrix, its combination's powers, its terms and its offset.
type Summed<'m, 'r, B, Challenge> = (&'m Opened<'r, B>, Vec<Challenge>, Vec<Term<Challenge>>, Challenge);

/// The host's side of the reduction: `TwoAdicFriPcs::open`'s loop for one matrix, its rows'
/// combinations on the device where it can.
struct HostReduction<'a, 'r, B: Backend, FriMmcs, H: MmcsHash, Challenge> {
    pcs: &'a BackendPcs<B, FriMmcs, H>,
    rounds: &'a [Round<'r, B, Challenge>],
    log_global_max_height: usize,
    /// The whole inverse denominators, computed on first use where only their low part was.
    whole_denoms: &'a mut Option<Vec<(Challenge, Vec<Challenge>)>>,
}

impl<B: Backend + 'static, FriMmcs, H: MmcsHash, Challenge: ExtensionField<Goldilocks>>
    HostReduction<'_, '_, B, FriMmcs, H, Challenge>
{
    /// Adds `mat`'s terms at every row to `out` (bit-reversed order), the rows' combinations on
    /// the device where `products` and the matrix's LDE is there.
    #[allow(clippy::too_many_arguments)] // TwoAdicFriPcs::open's loop state for one matrix.
    fn reduce(
        &mut self,
        mat: &Opened<'_, B>,
        powers: &[Challenge],
        terms: &[Term<Challenge>],
        packed_alpha_powers: &[Challenge::ExtensionPacking],
        offset: Challenge,
        out: &mut [Challenge],
        products: bool,
    ) {
        let span = tracing::debug_span!("open: row reduction").entered();
        let device =
            mat.device.filter(|_| products).and_then(|d| device_try(self.pcs, d.0, || compressed_rows(d, mat, powers)));
        let mat_compressed = device.unwrap_or_else(|| {
            let offset_alpha_powers: Vec<_> = packed_alpha_powers
                [..mat.width.div_ceil(<Goldilocks as p3_field::Field>::Packing::WIDTH)]
                .iter()
                .map(|&power| power * offset)
                .collect();
            (mat.host)().rowwise_packed_dot_product::<Challenge>(&offset_alpha_powers).collect()
        });
        drop(span);
        let _span = tracing::debug_span!("open: quotients").entered();
        let (rounds, log_max) = (self.rounds, self.log_global_max_height);
        let inv_denoms = self.whole_denoms.get_or_insert_with(|| inverse_denominators(rounds, log_max, 0));
        for (point_index, &(point, weighted_openings, rescale)) in terms.iter().enumerate() {
            let rows = mat_compressed.par_iter().zip(out.par_iter_mut()).zip(lookup(inv_denoms, point).par_iter());
            if point_index == 0 {
                rows.for_each(|((&reduced_row, ro), &inv_denom)| {
                    *ro += (weighted_openings - reduced_row) * inv_denom;
                });
            } else {
                rows.for_each(|((&reduced_row, ro), &inv_denom)| {
                    *ro += (weighted_openings - rescale * reduced_row) * inv_denom;
                });
            }
        }
    }
}

/// `mat`'s terms at every row of its device LDE ([`Backend::reduce_openings`], in calls of up to
/// [`MAX_REDUCTION_POINTS`] points), added to `acc` where given (then `None` comes back), into a
/// new accumulator otherwise.
fn reduce_on_device<B: Backend, Challenge: ExtensionField<Goldilocks>>(
    (backend, lde, col): (&B, &DeviceLde<B>, usize),
    mat: &Opened<'_, B>,
    powers: &[Challenge],
    terms: &[Term<Challenge>],
    mut acc: Option<&mut B::Buffer>,
) -> backend_api::Result<Option<B::Buffer>> {
    let dim = dimension::<Challenge>()?;
    if dim > MAX_EXTENSION_DEGREE || lde.shape.rows() != mat.height {
        return Err(backend_api::Error::Unsupported { backend: backend.info().backend, op: "reduce_openings" });
    }
    let cols = lde.shape.cols();
    let mut coeffs = vec![0u64; dim * cols];
    for (c, p) in powers.iter().enumerate() {
        for (t, x) in p.as_basis_coefficients_slice().iter().enumerate() {
            coeffs[t * cols + col + c] = x.as_canonical_u64();
        }
    }
    let points: Vec<ReductionPoint> = terms
        .iter()
        .map(|&(z, y, rescale)| {
            let (z, s) = (crate::fri::multiplication_matrix(z), crate::fri::multiplication_matrix(rescale));
            ReductionPoint::new(&z, &coordinates(y), &s)
        })
        .collect::<backend_api::Result<_>>()?;
    let mut fresh = None;
    for (k, chunk) in points.chunks(MAX_REDUCTION_POINTS).enumerate() {
        let accumulate = acc.is_some() || k > 0;
        let target = match acc.as_deref_mut() {
            Some(a) => a,
            None => fresh.get_or_insert(backend.alloc(lde.shape.rows() * dim)?),
        };
        let call = ReductionCall {
            coeffs: &coeffs,
            shift: Goldilocks::GENERATOR.as_canonical_u64(),
            points: chunk,
            accumulate,
        };
        backend.reduce_openings(&lde.buffer, lde.shape, &call, target)?;
    }
    Ok(fresh)
}

/// The `rows x DIMENSION` natural-order accumulator `acc` in bit-reversed row order: downloaded,
/// and the device buffer that holds it.
fn download_bit_reversed<B: Backend, Challenge: ExtensionField<Goldilocks>>(
    backend: &B,
    acc: &B::Buffer,
    rows: usize,
) -> backend_api::Result<(Vec<Challenge>, B::Buffer)> {
    let dim = dimension::<Challenge>()?;
    let shape = MatrixShape::new(rows, dim)?;
    let mut reversed = backend.alloc(shape.len())?;
    backend.bit_reversed_rows(acc, 0, shape, 0..rows, &mut reversed, 0)?;
    // Canonical words (the operation's outputs), taken as the field's without a pass over them.
    let words = crate::convert::into_field_vec(backend.download_vec(&reversed)?);
    Ok((Challenge::reconstitute_from_base(words), reversed))
}

/// The canonical coordinates of `x`.
fn coordinates<Challenge: ExtensionField<Goldilocks>>(x: Challenge) -> Vec<u64> {
    x.as_basis_coefficients_slice().iter().map(|c| c.as_canonical_u64()).collect()
}

/// `f()` on the device, counted; after an error (or for a challenge field wider than one call
/// takes) `None`, with a warning, so the caller computes the same values on the host.
fn device_try<B: Backend, FriMmcs, H: MmcsHash, T>(
    pcs: &BackendPcs<B, FriMmcs, H>,
    backend: &B,
    f: impl FnOnce() -> backend_api::Result<T>,
) -> Option<T> {
    match f() {
        Ok(v) => {
            pcs.counters.device_openings.fetch_add(1, Ordering::Relaxed);
            Some(v)
        }
        Err(e) => {
            pcs.counters.device_errors.fetch_add(1, Ordering::Relaxed);
            pcs.counters.host_openings.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                "plonky3-adapter: {} opening products failed: {e}; computing them on the host",
                backend.info().backend
            );
            None
        }
    }
}

/// The columns of `mat` evaluated at each point of `at` (its adjusted weights beside it): one call
/// of column dot products of its trace coset (rows `0, step, 2 * step, ...` of the natural-order
/// device LDE, `step = height / h`) with every point's adjusted weights, each point's sums times
/// `interpolate_coset_with_precomputation`'s scaling factor.
fn evaluations<B: Backend, Challenge: ExtensionField<Goldilocks>>(
    (backend, lde, col): (&B, &DeviceLde<B>, usize),
    mat: &Opened<'_, B>,
    h: usize,
    at: &[(Challenge, &[Challenge])],
) -> backend_api::Result<Vec<Vec<Challenge>>> {
    let dim = dimension::<Challenge>()?;
    let log_h = log2_strict_usize(h);
    // Plonky3's row `i < h` of the bit-reversed LDE is natural row `br_h(i) * step`: the weight of
    // natural row `j * step` is `adj[br_h(j)]`. Point `q`'s coordinate `d` is vector `q * dim + d`.
    // Built on every core: at 2^20 rows and two points of a quadratic extension it is 4M words.
    let mut weights = vec![0u64; at.len() * dim * h];
    weights.par_chunks_mut(h).enumerate().for_each(|(v, vector)| {
        let (adj, d) = (at[v / dim].1, v % dim);
        vector.par_chunks_mut(1 << 12).enumerate().for_each(|(k, part)| {
            for (i, slot) in part.iter_mut().enumerate() {
                let w = adj[reverse_bits_len((k << 12) + i, log_h)];
                *slot = w.as_basis_coefficients_slice()[d].as_canonical_u64();
            }
        });
    });
    let cols = lde.shape.cols();
    let mut sums = vec![0u64; at.len() * dim * cols];
    let rows = RowStride::new(0, mat.height / h, h);
    backend.column_dot_products(&lde.buffer, lde.shape, rows, &weights, &mut sums)?;

    // `Interpolate::interpolate_coset_with_precomputation`'s factor, `z (z^h - g^h) / (g^h h)`.
    let shift = Goldilocks::GENERATOR;
    let g_pow_n = shift.exp_power_of_2(log_h);
    let denom_inv = g_pow_n.mul_2exp_u64(log_h as u64).inverse();
    Ok(at
        .iter()
        .enumerate()
        .map(|(q, &(z, _))| {
            let scaling_factor = z * (z.exp_power_of_2(log_h) - g_pow_n) * denom_inv;
            let sums = &sums[q * dim * cols..(q + 1) * dim * cols];
            (col..col + mat.width)
                .map(|c| from_coordinates::<Challenge>(|d| sums[d * cols + c]) * scaling_factor)
                .collect()
        })
        .collect())
}

/// Every row of `mat` (bit-reversed order, as Plonky3 holds it) dotted with `powers`: row
/// products of the natural-order device LDE, with zero coefficients outside `mat`'s columns.
fn compressed_rows<B: Backend, Challenge: ExtensionField<Goldilocks>>(
    (backend, lde, at): (&B, &DeviceLde<B>, usize),
    mat: &Opened<'_, B>,
    powers: &[Challenge],
) -> backend_api::Result<Vec<Challenge>> {
    let dim = dimension::<Challenge>()?;
    let cols = lde.shape.cols();
    let mut coeffs = vec![0u64; dim * cols];
    for (c, p) in powers.iter().enumerate() {
        for (d, x) in p.as_basis_coefficients_slice().iter().enumerate() {
            coeffs[d * cols + at + c] = x.as_canonical_u64();
        }
    }
    let rows = lde.shape.rows();
    let mut products = vec![0u64; rows * dim];
    backend.row_dot_products(&lde.buffer, lde.shape, &coeffs, &mut products)?;
    let log_rows = log2_strict_usize(mat.height);
    Ok((0..rows)
        .into_par_iter()
        .map(|i| {
            let r = reverse_bits_len(i, log_rows);
            from_coordinates::<Challenge>(|d| products[r * dim + d])
        })
        .collect())
}

/// The challenge field's degree over Goldilocks, when one call's vectors hold its coordinates.
fn dimension<Challenge: ExtensionField<Goldilocks>>() -> backend_api::Result<usize> {
    let dim = <Challenge as BasedVectorSpace<Goldilocks>>::DIMENSION;
    if dim > MAX_DOT_VECTORS {
        return Err(backend_api::Error::InvalidArgument(format!(
            "a challenge field of degree {dim} needs more than the {MAX_DOT_VECTORS} vectors of one call"
        )));
    }
    Ok(dim)
}

/// The challenge with canonical base-field coordinates `coord(0), coord(1), ...`.
fn from_coordinates<Challenge: ExtensionField<Goldilocks>>(coord: impl Fn(usize) -> u64) -> Challenge {
    Challenge::from_basis_coefficients_fn(|d| Goldilocks::new(coord(d)))
}

/// The vector stored for `point` (the points of one opening are few: a linear search).
fn lookup<Challenge: PartialEq, V>(map: &[(Challenge, V)], point: Challenge) -> &V {
    &map.iter().find(|(p, _)| *p == point).expect("every opening point has its precomputation").1
}

/// The points of the coset `gH` (`g` the field's generator, `|H| = 2^log_n`) in bit-reversed
/// order: point `j` is `g w^br(j)`, `w` the generator of `H` (`TwoAdicMultiplicativeCoset`'s
/// points, then `reverse_slice_index_bits`). Computed on every core from two tables of about
/// `2^(log_n / 2)` powers each, two products per point: the sequential powers and the
/// permutation cost about 10 ms at `2^21` points on one core.
fn bit_reversed_coset(log_n: usize) -> Vec<Goldilocks> {
    let w = Goldilocks::two_adic_generator(log_n);
    let lo_bits = log_n / 2;
    // `w^e = w^(e_hi 2^lo_bits) w^e_lo`, the generator folded into the high table.
    let lo: Vec<Goldilocks> = w.powers().take(1 << lo_bits).collect();
    let hi: Vec<Goldilocks> =
        w.exp_power_of_2(lo_bits).shifted_powers(Goldilocks::GENERATOR).take(1 << (log_n - lo_bits)).collect();
    let mask = (1 << lo_bits) - 1;
    (0..1usize << log_n)
        .into_par_iter()
        .map(|j| {
            let e = reverse_bits_len(j, log_n);
            hi[e >> lo_bits] * lo[e & mask]
        })
        .collect()
}

/// `TwoAdicFriPcs`'s `compute_inverse_denominators`: for each opening point `z`, `1 / (z - x)`
/// for `x` in the bit-reversed coset of the tallest matrix opened at `z` (of at most
/// `2^log_max_height` points), or only the first `2^-cut` of them (the bit-reversed coset of the
/// subgroup `2^cut` times smaller).
fn inverse_denominators<B: Backend, Challenge: ExtensionField<Goldilocks>>(
    rounds: &[Round<'_, B, Challenge>],
    log_max_height: usize,
    cut: usize,
) -> Vec<(Challenge, Vec<Challenge>)> {
    // The coset `gH` of the largest height, bit-reversed: its first `2^i` points are `gK`, `|K| = 2^i`.
    let coset = bit_reversed_coset(log_max_height - cut);
    let mut max_log_height: Vec<(Challenge, usize)> = Vec::new();
    for (mats, points) in rounds {
        for (mat, points_for_mat) in mats.iter().zip(points.iter()) {
            let log_height = log2_strict_usize(mat.height);
            for &z in points_for_mat {
                match max_log_height.iter_mut().find(|(p, _)| *p == z) {
                    Some((_, lh)) => *lh = (*lh).max(log_height),
                    None => max_log_height.push((z, log_height)),
                }
            }
        }
    }
    max_log_height
        .into_iter()
        .map(|(z, log_height)| {
            let diffs: Vec<Challenge> = coset[..1 << (log_height - cut)].par_iter().map(|&x| z - x).collect();
            (z, batch_multiplicative_inverse(&diffs))
        })
        .collect()
}

/// `FriParameters::validate_input_height` (crate-private in p3-fri): an input must be taller than
/// the final polynomial's LDE, unless that polynomial is a constant.
pub(crate) fn validate_input_height(
    log_final_poly_len: usize,
    log_blowup: usize,
    log_input_height: usize,
) -> Result<(), FriProverError> {
    if log_final_poly_len == 0 {
        return Ok(());
    }
    let log_final_height = log_final_poly_len.checked_add(log_blowup).ok_or(FriProverError::FinalHeightOverflow)?;
    if log_input_height <= log_final_height {
        return Err(FriProverError::InputHeightTooSmall { log_input_height, log_final_height });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use p3_field::coset::TwoAdicMultiplicativeCoset;
    use p3_util::reverse_slice_index_bits;

    use super::*;

    #[test]
    fn input_heights_are_refused_as_p3_fri_refuses_them() {
        assert!(validate_input_height(0, 1, 1).is_ok(), "a constant final polynomial folds any height");
        assert!(validate_input_height(2, 1, 4).is_ok());
        assert!(matches!(
            validate_input_height(2, 1, 3),
            Err(FriProverError::InputHeightTooSmall { log_input_height: 3, log_final_height: 3 })
        ));
        assert!(matches!(validate_input_height(usize::MAX, 1, 3), Err(FriProverError::FinalHeightOverflow)));
    }

    #[test]
    fn the_bit_reversed_coset_is_plonky3s_coset_permuted() {
        for log_n in (0..=12).chain([17]) {
            let coset = TwoAdicMultiplicativeCoset::new(Goldilocks::GENERATOR, log_n).unwrap();
            let mut want: Vec<Goldilocks> = coset.iter().collect();
            reverse_slice_index_bits(&mut want);
            assert_eq!(bit_reversed_coset(log_n), want, "2^{log_n} points");
        }
    }
}
