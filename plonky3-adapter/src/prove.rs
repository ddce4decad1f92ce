//! [`prove`]: `p3_uni_stark::prove` step for step, with the quotient evaluated on the backend that
//! holds the trace's LDE.
//!
//! The prover walks p3-uni-stark 0.9.0-rc.2's public transcript ([`StarkProverTranscript`],
//! [`StarkShape`]) in the same order with the same values, so its proof is byte-identical to
//! `p3_uni_stark::prove`'s under the same configuration (proof-of-work bits 0) and the stock
//! verifier accepts it. One step differs in where it runs: the quotient. Where the PCS is a
//! [`BackendPcs`] whose trace commit kept its LDE on the device, the AIR's constraints are compiled
//! ([`CompiledAir`]) and evaluated there by [`Backend::quotient_values`] over the quotient domain's
//! rows of that LDE, and the quotient's chunks are committed from the values where they are
//! ([`DeviceQuotientPcs::commit_device_quotient`]). Otherwise the step is Plonky3's
//! `quotient_values` over the host LDE, with one warning saying why and how to fix it; the proof
//! is the same either way ([`crate::PcsStats::device_quotients`], [`crate::PcsStats::host_quotients`]).

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use backend_api::quotient::{QuotientCall, QuotientDomain};
use backend_api::{Backend, DeviceBuffer, ELEM_BYTES, MatrixShape};
use commit::Ticket;
use commit::memory::MemoryModel;
use itertools::Itertools as _;
use p3_air::symbolic::{AirLayout, get_symbolic_constraints};
use p3_challenger::GrindingChallenger;
use p3_commit::{Pcs, PolynomialSpace, UnivariateStarkPcs};
use p3_field::coset::TwoAdicMultiplicativeCoset;
use p3_field::{ExtensionField, PrimeCharacteristicRing, PrimeField64};
use p3_goldilocks::Goldilocks;
use p3_matrix::Matrix;
use p3_matrix::dense::RowMajorMatrix;
use p3_uni_stark::{
    Com, Commitments, OpenedValues, PcsProverError, Proof, ProvingError, QuotientAir, StarkGenericConfig,
    StarkOpeningLayout, StarkProverTranscript, StarkShape, Val, get_log_num_quotient_chunks_for_domain,
};
use p3_util::log2_strict_usize;
use tracing::info_span;

use crate::convert::{as_words, into_field_vec};
use crate::digest::MmcsHash;
use crate::pcs::BackendPcs;
use crate::quotient::{CompiledAir, Uncompiled};

/// A PCS whose trace commits may leave the trace's LDE on a device that evaluates quotients: what
/// [`prove`] asks of its configuration's PCS. [`BackendPcs`] implements it for every backend.
pub trait DeviceQuotientPcs<Challenge: ExtensionField<Goldilocks>, Challenger>:
    UnivariateStarkPcs<Challenge, Challenger, Domain = TwoAdicMultiplicativeCoset<Goldilocks>>
{
    /// A quotient's values where they were evaluated ([`DeviceQuotient`] for [`BackendPcs`]).
    type DeviceValues: Send;

    /// The flattened quotient (`d` words per point of `domain`, Plonky3's `flatten_to_base`) of
    /// the compiled constraints over the LDE of matrix `matrix` of the traces committed in
    /// `trace` (0 for a uni-stark trace, the table's index for a batch), evaluated where that LDE
    /// lies and left there; or why it cannot be, in words naming the fix.
    ///
    /// # Errors
    /// The reason, for a warning; the caller then evaluates on the host.
    fn device_quotient(
        &self,
        trace: &Self::ProverData,
        matrix: usize,
        compiled: &CompiledAir,
        domain: QuotientDomain,
        values: &[u64],
        alpha_powers: &[u64],
    ) -> Result<Self::DeviceValues, String>;

    /// Commits the quotient's `num_chunks` chunks from `values`: the commitment and prover data
    /// `UnivariateStarkPcs::commit_quotient` gives for the same values on the host.
    ///
    /// # Errors
    /// Why the values are lost (the device failed, and they could not come down for the host's
    /// commit either), for a warning; the caller then evaluates them again on the host.
    fn commit_device_quotient(
        &self,
        values: Self::DeviceValues,
        quotient_domain: TwoAdicMultiplicativeCoset<Goldilocks>,
        num_chunks: usize,
    ) -> Result<(Self::Commitment, Self::ProverData), String>;

    /// Commits the quotients of a batch's tables (`(values, quotient domain, chunk count)` each,
    /// in the batch's order) in one commitment: the commitment and prover data of
    /// `Pcs::commit_ldes` over `UnivariateStarkPcs::get_quotient_ldes` of each table's chunks,
    /// what p3-batch-stark's prover commits. A table whose quotient ran on the host gives its
    /// values as [`QuotientValues::Host`].
    ///
    /// # Errors
    /// Why the values are lost (the device failed, and they could not come down for the host's
    /// commit either), for a warning; the caller then evaluates them again on the host.
    fn commit_device_quotients(
        &self,
        quotients: Vec<(QuotientValues<Self::DeviceValues>, TwoAdicMultiplicativeCoset<Goldilocks>, usize)>,
    ) -> Result<(Self::Commitment, Self::ProverData), String>;

    /// `Pcs::commit` of matrices the caller keeps (a batch's traces, which
    /// `p3_batch_stark::prove_batch` clones for `Pcs::commit`). The default clones them into
    /// `Pcs::commit`; [`BackendPcs`]'s fused commit reads them where they are, and only a commit
    /// that goes the stock way copies them.
    ///
    /// # Errors
    /// As `Pcs::commit`.
    fn commit_borrowed(
        &self,
        evaluations: Vec<(TwoAdicMultiplicativeCoset<Goldilocks>, &RowMajorMatrix<Goldilocks>)>,
    ) -> Result<(Self::Commitment, Self::ProverData), Self::ProverError> {
        self.commit(evaluations.into_iter().map(|(d, m)| (d, m.clone())))
    }

    /// Counts one quotient step, on the device or on the host.
    fn count_quotient(&self, on_device: bool);

    /// Whether a `height x width` trace committed over `domain` may keep its LDE on the device,
    /// as far as can be told before the commit (a device error or a refused admission can still
    /// keep it on the host): [`prove`] compiles the AIR's constraints only then.
    fn may_keep_trace_lde(&self, domain: TwoAdicMultiplicativeCoset<Goldilocks>, height: usize, width: usize) -> bool;

    /// `Ok` when matrix `matrix` of the traces committed in `trace` has its LDE on the device,
    /// else why not, in words naming the fix.
    ///
    /// # Errors
    /// The reason, for a warning; the caller then evaluates on the host.
    fn trace_lde_on_device(&self, trace: &Self::ProverData, matrix: usize) -> Result<(), String>;
}

/// A table's quotient values for [`DeviceQuotientPcs::commit_device_quotients`], where they were
/// evaluated.
#[derive(Debug)]
pub enum QuotientValues<D> {
    /// On the device ([`DeviceQuotientPcs::device_quotient`]).
    Device(D),
    /// On the host: Plonky3's quotient flattened to its `d` base-field columns
    /// (`flatten_to_base`), one row per point of the quotient domain.
    Host(RowMajorMatrix<Goldilocks>),
}

/// A quotient's values on a backend, from [`BackendPcs`]'s
/// [`DeviceQuotientPcs::device_quotient`]: `degree` words per point of the quotient domain, in
/// the domain's order, with the memory admission's ticket for them. Dropping it frees both.
pub struct DeviceQuotient<B: Backend> {
    values: B::Buffer,
    degree: usize,
    ticket: Option<Ticket>,
}

impl<B: Backend> std::fmt::Debug for DeviceQuotient<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceQuotient").field("words", &self.values.len()).field("degree", &self.degree).finish()
    }
}

impl<B, FriMmcs, H, Challenge, Challenger> DeviceQuotientPcs<Challenge, Challenger> for BackendPcs<B, FriMmcs, H>
where
    B: Backend + 'static,
    H: MmcsHash,
    FriMmcs: p3_commit::Mmcs<Challenge> + 'static,
    Challenge: ExtensionField<Goldilocks>,
    Challenger: p3_challenger::FieldChallenger<Goldilocks>
        + p3_challenger::CanObserve<FriMmcs::Commitment>
        + GrindingChallenger<Witness = Goldilocks>,
{
    type DeviceValues = DeviceQuotient<B>;

    fn device_quotient(
        &self,
        trace: &Self::ProverData,
        matrix: usize,
        compiled: &CompiledAir,
        domain: QuotientDomain,
        values: &[u64],
        alpha_powers: &[u64],
    ) -> Result<DeviceQuotient<B>, String> {
        let Some((backend, lde, first)) = trace.device_lde_of(matrix) else {
            return Err(self.why_no_device_lde(trace));
        };
        // A table beside others of its height reads its columns from `first` on.
        let moved = (first > 0).then(|| compiled.program_at(first)).transpose().map_err(|e| e.0)?;
        let program = moved.as_ref().unwrap_or_else(|| compiled.program());
        let call = QuotientCall { program, domain, values, alpha_powers };
        let d = call.degree();
        // The output, a column-major copy of the rows read and the register files, admitted as
        // the fused commits are; the ticket then holds the output's bytes until it is committed.
        let admitted =
            MemoryModel::quotient(domain.quotient_rows(), d, lde.shape.cols(), compiled.program().registers())
                .map_err(commit::ProverError::from)
                .and_then(|model| self.admit_model(backend, &model));
        let ticket = admitted.map_err(|e| {
            self.counters.admission_refusals.fetch_add(1, Ordering::Relaxed);
            format!("the {} quotient was not admitted ({e})", backend.info().backend)
        })?;
        let run = || -> backend_api::Result<B::Buffer> {
            let mut out = backend.alloc(domain.quotient_rows() * d)?;
            backend.quotient_values(&lde.buffer, lde.shape, &call, &mut out)?;
            // The step ends when its values are there (a device error surfaces here).
            backend.synchronize()?;
            Ok(out)
        };
        let shape: MatrixShape = lde.shape;
        let values = run().map_err(|e| {
            if !e.is_unsupported() {
                self.counters.device_errors.fetch_add(1, Ordering::Relaxed);
            }
            format!("{} quotient over the {shape} LDE: {e}", backend.info().backend)
        })?;
        let ticket = ticket.map(|mut t| {
            t.shrink_to(values.len() * ELEM_BYTES);
            t
        });
        Ok(DeviceQuotient { values, degree: d, ticket })
    }

    fn commit_device_quotient(
        &self,
        quotient: DeviceQuotient<B>,
        quotient_domain: TwoAdicMultiplicativeCoset<Goldilocks>,
        num_chunks: usize,
    ) -> Result<(Self::Commitment, Self::ProverData), String> {
        let DeviceQuotient { values, degree, ticket } = quotient;
        // The commit's own model holds the values from here on.
        drop(ticket);
        let backend = Arc::clone(self.mmcs.backend());
        let why = match self.commit_quotient_on(&backend, &values, quotient_domain, degree, num_chunks) {
            Ok(done) => return Ok(done),
            Err(why) => why,
        };
        tracing::warn!("plonky3-adapter: {why}; the quotient's values come down for TwoAdicFriPcs::commit_quotient");
        let words =
            backend.download_vec(&values).map_err(|e| format!("{why}, and its values could not come down ({e})"))?;
        drop(values);
        let matrix = RowMajorMatrix::new(into_field_vec(words), degree);
        self.commit_quotient_stock::<Challenge, Challenger>(quotient_domain, matrix, num_chunks)
            .map_err(|e| format!("{why}, and TwoAdicFriPcs::commit_quotient failed ({e})"))
    }

    fn commit_borrowed(
        &self,
        evaluations: Vec<(TwoAdicMultiplicativeCoset<Goldilocks>, &RowMajorMatrix<Goldilocks>)>,
    ) -> Result<(Self::Commitment, Self::ProverData), Self::ProverError> {
        self.commit_cow::<Challenge, Challenger>(evaluations.into_iter().map(|(d, m)| (d, Cow::Borrowed(m))).collect())
    }

    fn count_quotient(&self, on_device: bool) {
        let counter = if on_device { &self.counters.device_quotients } else { &self.counters.host_quotients };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn may_keep_trace_lde(&self, domain: TwoAdicMultiplicativeCoset<Goldilocks>, height: usize, width: usize) -> bool {
        self.may_keep_lde(domain, height, width)
    }

    fn commit_device_quotients(
        &self,
        quotients: Vec<(QuotientValues<DeviceQuotient<B>>, TwoAdicMultiplicativeCoset<Goldilocks>, usize)>,
    ) -> Result<(Self::Commitment, Self::ProverData), String> {
        let backend = Arc::clone(self.mmcs.backend());
        // Every table's values on the device, in the batch's order: a host quotient goes up (a
        // few words per point), until an upload fails.
        let mut tables: Vec<(Staged<B>, TwoAdicMultiplicativeCoset<Goldilocks>, usize)> = Vec::new();
        let mut why = None;
        for (values, domain, chunks) in quotients {
            let values = match values {
                QuotientValues::Device(DeviceQuotient { values, degree, ticket }) => {
                    // The commit's own model holds the values from here on.
                    drop(ticket);
                    Staged::Device(values, degree)
                }
                QuotientValues::Host(matrix) if why.is_none() => match backend.upload(as_words(&matrix.values)) {
                    Ok(values) => Staged::Device(values, matrix.width()),
                    Err(e) => {
                        why = Some(format!("a host quotient did not go up to {} ({e})", backend.info().backend));
                        Staged::Host(matrix)
                    }
                },
                QuotientValues::Host(matrix) => Staged::Host(matrix),
            };
            tables.push((values, domain, chunks));
        }
        let why = match why {
            Some(why) => why,
            None => {
                let up: Vec<_> = tables
                    .iter()
                    .filter_map(|(v, domain, chunks)| match v {
                        Staged::Device(v, d) => Some((v, *domain, *d, *chunks)),
                        Staged::Host(_) => None,
                    })
                    .collect();
                match self.commit_quotients_on(&backend, &up) {
                    Ok(done) => return Ok(done),
                    Err(why) => why,
                }
            }
        };
        tracing::warn!("plonky3-adapter: {why}; the quotients' values come down for TwoAdicFriPcs::commit_ldes");
        let tables = tables
            .into_iter()
            .map(|(values, domain, chunks)| {
                let matrix = match values {
                    Staged::Device(values, degree) => RowMajorMatrix::new(
                        into_field_vec(
                            backend
                                .download_vec(&values)
                                .map_err(|e| format!("{why}, and the quotients' values could not come down ({e})"))?,
                        ),
                        degree,
                    ),
                    Staged::Host(matrix) => matrix,
                };
                Ok((matrix, domain, chunks))
            })
            .collect::<Result<Vec<_>, String>>()?;
        let ldes = host_quotient_ldes::<_, Challenge, Challenger>(self, tables)
            .map_err(|e| format!("{why}, and TwoAdicFriPcs::get_quotient_ldes failed ({e})"))?;
        UnivariateStarkPcs::<Challenge, Challenger>::commit_ldes(self, ldes)
            .map_err(|e| format!("{why}, and TwoAdicFriPcs::commit_ldes failed ({e})"))
    }

    fn trace_lde_on_device(&self, trace: &Self::ProverData, matrix: usize) -> Result<(), String> {
        trace.device_lde_of(matrix).map(drop).ok_or_else(|| self.why_no_device_lde(trace))
    }
}

/// Every table's quotient chunks' LDEs on the host, in order: `pcs`'s
/// `UnivariateStarkPcs::get_quotient_ldes` of the chunks of each `(flattened values, quotient
/// domain, chunk count)`, what p3-batch-stark's prover gives `commit_ldes`.
///
/// # Errors
/// `get_quotient_ldes`'s.
pub(crate) fn host_quotient_ldes<P, Challenge, Challenger>(
    pcs: &P,
    tables: Vec<(RowMajorMatrix<Goldilocks>, TwoAdicMultiplicativeCoset<Goldilocks>, usize)>,
) -> Result<Vec<RowMajorMatrix<Goldilocks>>, P::ProverError>
where
    P: UnivariateStarkPcs<Challenge, Challenger, Domain = TwoAdicMultiplicativeCoset<Goldilocks>>,
    Challenge: ExtensionField<Goldilocks>,
{
    // Each chunk's LDE is the DFT's parallel work; the tables go one after another.
    let ldes = tables
        .into_iter()
        .map(|(values, domain, chunks)| {
            let evaluations = domain.split_domains(chunks).into_iter().zip(domain.split_evals(chunks, values));
            pcs.get_quotient_ldes(evaluations, chunks)
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ldes.into_iter().flatten().collect())
}

/// A batch table's quotient on its way to [`DeviceQuotientPcs::commit_device_quotients`]: its
/// values on the device with their degree, or still on the host (after a failed upload).
enum Staged<B: Backend> {
    Device(B::Buffer, usize),
    Host(RowMajorMatrix<Goldilocks>),
}

/// Warns once per process and reason.
pub(crate) fn warn_once(flag: &AtomicBool, message: impl FnOnce() -> String) {
    if !flag.swap(true, Ordering::Relaxed) {
        tracing::warn!("plonky3-adapter: {}", message());
    }
}

pub(crate) static WARNED_COMPILE: AtomicBool = AtomicBool::new(false);
pub(crate) static WARNED_DEVICE: AtomicBool = AtomicBool::new(false);

/// `p3_uni_stark::prove` with the quotient on the device: the same signature, the same proof bytes
/// (proof-of-work bits 0), verified by `p3_uni_stark::verify`.
///
/// The prover walks p3-uni-stark 0.9.0-rc.2's public transcript in the same order with the same
/// values; only the quotient step runs elsewhere. Where the PCS is a [`BackendPcs`] whose trace
/// commit kept its LDE on the device, the AIR's constraints are compiled ([`CompiledAir`], on a
/// thread of their own while the trace commits) and evaluated there by
/// [`Backend::quotient_values`], and the quotient's chunks are committed from the values there
/// ([`DeviceQuotientPcs::commit_device_quotient`]). Otherwise (an AIR the compiler does not take,
/// a commit that did not fuse, a backend without the operation, a device error, a refused memory
/// admission) the step is Plonky3's `quotient_values` over the host LDE,
/// with one `tracing` warning per process saying why and how to fix it
/// ([`PcsStats`](crate::PcsStats)'s `device_quotients` and `host_quotients` count both).
///
/// # Errors
/// As `p3_uni_stark::prove`: the PCS's failure with its proving phase.
///
/// # Panics
/// Where `p3_uni_stark::prove` panics: an AIR with preprocessed columns (use
/// `p3_uni_stark::prove_with_preprocessed`), boundary-IO public values, a trace whose height is
/// not a power of two; in debug builds, a trace that breaks the AIR's constraints.
#[allow(clippy::multiple_bound_locations, clippy::type_repetition_in_bounds)]
pub fn prove<
    SC,
    #[cfg(debug_assertions)] A: for<'a> p3_air::Air<p3_air::DebugConstraintBuilder<'a, Val<SC>>>,
    #[cfg(not(debug_assertions))] A,
>(
    config: &SC,
    air: &A,
    trace: RowMajorMatrix<Goldilocks>,
    public_values: &[Goldilocks],
) -> Result<Proof<SC>, ProvingError<PcsProverError<SC>>>
where
    SC: StarkGenericConfig,
    SC::Pcs: DeviceQuotientPcs<SC::Challenge, SC::Challenger>,
    SC::Challenger: GrindingChallenger<Witness = Goldilocks>,
    A: QuotientAir<SC>,
{
    assert!(
        air.public_boundary_io().is_empty(),
        "uni-stark does not support boundary-IO public values; bind them with AIR constraints"
    );
    #[cfg(debug_assertions)]
    p3_air::check_constraints(air, &trace, public_values);

    let degree = trace.height();
    let log_degree = log2_strict_usize(degree);
    let log_ext_degree = log_degree + config.is_zk();
    let preprocessed_width = air.preprocessed_width();
    assert!(
        preprocessed_width == 0,
        "AIR defines preprocessed columns (width = {preprocessed_width}); prove it with \
         p3_uni_stark::prove_with_preprocessed"
    );
    let layout = AirLayout {
        preprocessed_width: 0,
        main_width: air.width(),
        num_public_values: air.num_public_values(),
        num_periodic_columns: air.num_periodic_columns(),
        ..Default::default()
    };
    debug_assert!(
        air.num_constraints().is_none_or(|n| n == get_symbolic_constraints(air, layout).len()),
        "num_constraints() disagrees with the AIR's symbolic constraints"
    );

    // The constraints compile on a thread of their own while the trace commits (mostly device
    // work): a hash AIR's symbolic evaluation costs tens of milliseconds of one core. Only for a
    // trace that may stay on the device: a small proof's whole time can be less than that.
    std::thread::scope(|scope| {
        let pcs = config.pcs();
        let ext_trace_domain = pcs.natural_domain_for_degree(degree * (config.is_zk() + 1));
        let compiling = (config.is_zk() == 0
            && pcs.may_keep_trace_lde(ext_trace_domain, trace.height(), trace.width()))
        .then(|| scope.spawn(|| CompiledAir::compile(air, layout)));
        let trace_domain = pcs.natural_domain_for_degree(degree);
        let log_num_quotient_chunks =
            get_log_num_quotient_chunks_for_domain::<Val<SC>, A>(air, layout, trace_domain, config.is_zk());
        let num_quotient_chunks = 1 << (log_num_quotient_chunks + config.is_zk());
        let mut challenger = config.initialise_challenger();

        let (trace_commit, trace_data) = info_span!("commit to trace data")
            .in_scope(|| pcs.commit([(ext_trace_domain, trace)]))
            .map_err(|source| ProvingError::Pcs { phase: "trace commitment", source })?;

        let mut transcript = StarkProverTranscript::<SC::Challenger, Val<SC>, SC::Challenge>::new(
            &mut challenger,
            StarkShape::new::<Val<SC>, A>(
                air,
                preprocessed_width,
                log_ext_degree,
                log_degree,
                num_quotient_chunks,
                SC::Pcs::ZK,
                config.ood_proof_of_work_bits(),
            ),
        );
        let alpha = transcript.constraint_phase::<Com<SC>>(trace_commit.clone(), None, public_values);

        let quotient_domain = ext_trace_domain.create_disjoint_domain(1 << (log_ext_degree + log_num_quotient_chunks));

        // The quotient evaluated and committed where the trace's LDE lies; else Plonky3's host
        // code, whose values `commit_quotient` then takes.
        let on_device = info_span!("quotient").in_scope(|| {
            (config.is_zk() == 0)
                .then(|| {
                    // Where the LDE stayed on the host, the compilation is not waited for.
                    pcs.trace_lde_on_device(&trace_data, 0).map_err(|why| (&WARNED_DEVICE, why))?;
                    let compiled = info_span!("quotient: compile wait").in_scope(|| {
                        compiling.map_or_else(
                            || Err(Uncompiled("the trace was not expected to stay on the device".into())),
                            |c| {
                                c.join().unwrap_or_else(|_| {
                                    Err(Uncompiled("the AIR panicked in its symbolic evaluation".into()))
                                })
                            },
                        )
                    });
                    device_quotient::<SC>(
                        pcs,
                        compiled.as_ref().map_err(Clone::clone),
                        &trace_data,
                        0,
                        (trace_domain, quotient_domain),
                        public_values,
                        alpha,
                    )
                })
                .and_then(|r| {
                    r.map_err(|(flag, why)| warn_once(flag, || format!("{why}; the quotient runs on the host"))).ok()
                })
        });
        let committed = on_device.and_then(|values| {
            info_span!("commit to quotient poly chunks")
                .in_scope(|| pcs.commit_device_quotient(values, quotient_domain, num_quotient_chunks))
                .map_err(|why| warn_once(&WARNED_DEVICE, || format!("{why}; the quotient runs on the host")))
                .ok()
        });
        pcs.count_quotient(committed.is_some());
        let (quotient_commit, quotient_data) = match committed {
            Some(done) => done,
            None => {
                let quotient_flat = info_span!("quotient").in_scope(|| {
                    let trace_on_quotient_domain = pcs.get_evaluations_on_domain(&trace_data, 0, quotient_domain);
                    let values = p3_uni_stark::quotient_values::<SC, A, _>(
                        pcs,
                        air,
                        public_values,
                        layout,
                        trace_domain,
                        quotient_domain,
                        &trace_on_quotient_domain,
                        None,
                        alpha,
                    );
                    RowMajorMatrix::new_col(values).flatten_to_base()
                });
                info_span!("commit to quotient poly chunks")
                    .in_scope(|| pcs.commit_quotient(quotient_domain, quotient_flat, num_quotient_chunks))
                    .inspect_err(|_| transcript.abort())
                    .map_err(|source| ProvingError::Pcs { phase: "quotient commitment", source })?
            }
        };

        let (opt_r_commit, opt_r_data) = if SC::Pcs::ZK {
            let (r_commit, r_data) = pcs
                .get_opt_randomization_poly_commitment(core::iter::once(ext_trace_domain))
                .inspect_err(|_| transcript.abort())
                .map_err(|source| ProvingError::Pcs { phase: "randomization commitment", source })?
                .expect("ZK is enabled, so we should have randomization commitments");
            (Some(r_commit), Some(r_data))
        } else {
            (None, None)
        };
        let commitments =
            Commitments { trace: trace_commit, quotient_chunks: quotient_commit, random: opt_r_commit.clone() };

        let (zeta, ood_pow_witness) =
            transcript.ood_phase::<Com<SC>>(commitments.quotient_chunks.clone(), opt_r_commit);
        let ood_pow_witness = ood_pow_witness.unwrap_or(Goldilocks::ZERO);
        let zeta_next = trace_domain.next_point(zeta).expect("domain should support next_point operation");

        let is_random = opt_r_data.is_some();
        let main_next = !air.main_next_row_columns().is_empty();
        let opening_layout = StarkOpeningLayout::new(SC::Pcs::ZK);
        let opening_result = info_span!("open").in_scope(|| {
            let round0 = opt_r_data.as_ref().map(|r_data| (r_data, vec![vec![zeta]]));
            let round1_points = if main_next { vec![zeta, zeta_next] } else { vec![zeta] };
            let round1 = (&trace_data, vec![round1_points]);
            let round2 = (&quotient_data, vec![vec![zeta]; num_quotient_chunks]);
            let rounds = round0.into_iter().chain([round1, round2]).map(Into::into).collect();
            transcript.delegate(|challenger| pcs.open_with_preprocessing(rounds, challenger, None))
        });
        let (opened_values, opening_proof) = opening_result
            .inspect_err(|_| transcript.abort())
            .map_err(|source| ProvingError::Pcs { phase: "opening", source })?;
        transcript.finish();

        let trace_idx = opening_layout.trace;
        let quotient_idx = opening_layout.quotient;
        let trace_local = opened_values[trace_idx][0][0].clone();
        let trace_next = main_next.then(|| opened_values[trace_idx][0][1].clone());
        let quotient_chunks = opened_values[quotient_idx].iter().map(|v| v[0].clone()).collect_vec();
        let random = is_random.then(|| opened_values[0][0][0].clone());
        let opened_values = OpenedValues { trace_local, trace_next, preprocessed: None, quotient_chunks, random };
        Ok(Proof { commitments, opened_values, opening_proof, degree_bits: log_ext_degree, ood_pow_witness })
    })
}

/// The quotient's values where `SC`'s PCS evaluates them.
pub(crate) type DeviceValues<SC> = <<SC as StarkGenericConfig>::Pcs as DeviceQuotientPcs<
    <SC as StarkGenericConfig>::Challenge,
    <SC as StarkGenericConfig>::Challenger,
>>::DeviceValues;

/// The quotient's values on the device, or the warning's flag and reason.
pub(crate) fn device_quotient<SC>(
    pcs: &SC::Pcs,
    compiled: Result<&CompiledAir, Uncompiled>,
    trace_data: &<SC::Pcs as Pcs<SC::Challenge, SC::Challenger>>::ProverData,
    matrix: usize,
    (trace_domain, quotient_domain): (TwoAdicMultiplicativeCoset<Goldilocks>, TwoAdicMultiplicativeCoset<Goldilocks>),
    public_values: &[Goldilocks],
    alpha: SC::Challenge,
) -> Result<DeviceValues<SC>, (&'static AtomicBool, String)>
where
    SC: StarkGenericConfig,
    SC::Pcs: DeviceQuotientPcs<SC::Challenge, SC::Challenger>,
{
    let compiled = compiled.map_err(|e| (&WARNED_COMPILE, format!("the AIR's constraints were not compiled ({e})")))?;
    let values = compiled.values(public_values).map_err(|e| (&WARNED_COMPILE, e.0))?;
    let alpha_powers = compiled.alpha_powers(alpha);
    let domain = QuotientDomain::new(
        trace_domain.log_size() as u32,
        quotient_domain.log_size() as u32,
        quotient_domain.shift().as_canonical_u64(),
    )
    .map_err(|e| (&WARNED_DEVICE, format!("the quotient domain: {e}")))?;
    info_span!("quotient: device")
        .in_scope(|| pcs.device_quotient(trace_data, matrix, compiled, domain, &values, &alpha_powers))
        .map_err(|why| (&WARNED_DEVICE, why))
}
