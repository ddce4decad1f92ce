//! A PCS that times the calls a p3-batch-stark proof makes of the one it wraps, for the prove
//! bench's batch split: `prove_batch` opens no span around its commits or its openings, and its
//! per-table quotient spans run side by side on rayon's threads, so the split of a batch proof is
//! read at the PCS's door instead.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use p3_commit::{OpenedValues, OpeningRequest, Pcs, PeriodicLdeTable, UnivariateStarkPcs};
use p3_field::ExtensionField;
use p3_goldilocks::Goldilocks;
use p3_matrix::dense::RowMajorMatrix;

/// What one proof spent in each phase, as [`TimedPcs`] saw it.
#[derive(Clone, Copy, Debug, Default)]
pub struct BatchPhases {
    /// Every `Pcs::commit` of the proof: the traces' and the permutation traces'.
    pub commit: Duration,
    /// From the end of the last commit to the start of `commit_ldes`: the quotients of every
    /// table (with their chunks' LDEs) and the transcript between.
    pub quotient: Duration,
    /// `commit_ldes`: the quotient chunks' commit.
    pub quotient_commit: Duration,
    /// `open` (through `open_with_preprocessing`), FRI included.
    pub open: Duration,
    last_commit_end: Option<Instant>,
}

impl BatchPhases {
    /// A trace commit that took `took` from `start`.
    fn commit_call(&mut self, took: Duration, start: Instant) {
        self.commit += took;
        self.last_commit_end = Some(start + took);
    }

    /// The quotient chunks' commit, which took `took` from `start`; the quotients ran since the
    /// last commit ended.
    fn quotient_commit_call(&mut self, took: Duration, start: Instant) {
        self.quotient_commit += took;
        if let Some(end) = self.last_commit_end.take() {
            self.quotient += start.saturating_duration_since(end);
        }
    }
}

/// `inner`, timing its commits, its quotient chunks' commit and its openings into `phases`
/// (cleared by whoever reads it between proofs). Every other call is `inner`'s, untimed; the
/// proof is `inner`'s, byte for byte.
#[derive(Clone, Debug)]
pub struct TimedPcs<P> {
    pub inner: P,
    pub phases: Arc<Mutex<BatchPhases>>,
}

impl<P> TimedPcs<P> {
    pub fn new(inner: P) -> Self {
        Self { inner, phases: Arc::default() }
    }

    /// The phases recorded since the last call, cleared.
    pub fn take(&self) -> BatchPhases {
        std::mem::take(&mut *self.phases.lock().unwrap())
    }

    fn record<T>(&self, f: impl FnOnce() -> T, phase: impl FnOnce(&mut BatchPhases, Duration, Instant)) -> T {
        let start = Instant::now();
        let out = f();
        phase(&mut self.phases.lock().unwrap(), start.elapsed(), start);
        out
    }
}

impl<P, Challenge, Challenger> Pcs<Challenge, Challenger> for TimedPcs<P>
where
    P: Pcs<Challenge, Challenger>,
    Challenge: ExtensionField<Goldilocks>,
    P::Domain: p3_commit::PolynomialSpace<Val = Goldilocks>,
{
    type Domain = P::Domain;
    type Commitment = P::Commitment;
    type ProverData = P::ProverData;
    type Proof = P::Proof;
    type Error = P::Error;
    type ProverError = P::ProverError;

    fn natural_domain_for_degree(&self, degree: usize) -> Self::Domain {
        self.inner.natural_domain_for_degree(degree)
    }

    fn commit(
        &self,
        evaluations: impl IntoIterator<Item = (Self::Domain, RowMajorMatrix<Goldilocks>)>,
    ) -> Result<(Self::Commitment, Self::ProverData), Self::ProverError> {
        self.record(|| self.inner.commit(evaluations), BatchPhases::commit_call)
    }

    fn open(
        &self,
        requests: Vec<OpeningRequest<'_, Self::ProverData, Challenge>>,
        challenger: &mut Challenger,
    ) -> Result<(OpenedValues<Challenge>, Self::Proof), Self::ProverError> {
        self.record(|| self.inner.open(requests, challenger), |p, took, _| p.open += took)
    }

    fn verify(
        &self,
        commitments: Vec<p3_commit::CommitmentOpening<Challenge, Self::Commitment, Self::Domain>>,
        proof: &Self::Proof,
        challenger: &mut Challenger,
    ) -> Result<(), Self::Error> {
        self.inner.verify(commitments, proof, challenger)
    }
}

impl<P, Challenge, Challenger> UnivariateStarkPcs<Challenge, Challenger> for TimedPcs<P>
where
    P: UnivariateStarkPcs<Challenge, Challenger>,
    Challenge: ExtensionField<Goldilocks>,
    P::Domain: p3_commit::PolynomialSpace<Val = Goldilocks>,
{
    type EvaluationsOnDomain<'a> = P::EvaluationsOnDomain<'a>;

    const ZK: bool = P::ZK;

    fn log_max_trace_height(&self) -> usize {
        self.inner.log_max_trace_height()
    }

    fn log_min_trace_height(&self) -> usize {
        self.inner.log_min_trace_height()
    }

    fn commit_quotient(
        &self,
        quotient_domain: Self::Domain,
        quotient_evaluations: RowMajorMatrix<Goldilocks>,
        num_chunks: usize,
    ) -> Result<(Self::Commitment, Self::ProverData), Self::ProverError> {
        self.inner.commit_quotient(quotient_domain, quotient_evaluations, num_chunks)
    }

    fn get_quotient_ldes(
        &self,
        evaluations: impl IntoIterator<Item = (Self::Domain, RowMajorMatrix<Goldilocks>)>,
        num_chunks: usize,
    ) -> Result<Vec<RowMajorMatrix<Goldilocks>>, Self::ProverError> {
        self.inner.get_quotient_ldes(evaluations, num_chunks)
    }

    fn commit_ldes(
        &self,
        ldes: Vec<RowMajorMatrix<Goldilocks>>,
    ) -> Result<(Self::Commitment, Self::ProverData), Self::ProverError> {
        self.record(|| self.inner.commit_ldes(ldes), BatchPhases::quotient_commit_call)
    }

    fn get_evaluations_on_domain<'a>(
        &self,
        prover_data: &'a Self::ProverData,
        idx: usize,
        domain: Self::Domain,
    ) -> Self::EvaluationsOnDomain<'a> {
        self.inner.get_evaluations_on_domain(prover_data, idx, domain)
    }

    fn build_periodic_lde_table(
        &self,
        periodic_cols: &[Vec<Goldilocks>],
        trace_domain: Self::Domain,
        quotient_domain: Self::Domain,
    ) -> PeriodicLdeTable<Goldilocks> {
        self.inner.build_periodic_lde_table(periodic_cols, trace_domain, quotient_domain)
    }
}

/// [`plonky3_adapter::prove_batch`]'s calls: the quotients' commit from where they were evaluated
/// is timed as `commit_ldes` is (the quotient chunks' commit, the quotients before it).
impl<P, Challenge, Challenger> plonky3_adapter::DeviceQuotientPcs<Challenge, Challenger> for TimedPcs<P>
where
    P: plonky3_adapter::DeviceQuotientPcs<Challenge, Challenger>,
    Challenge: ExtensionField<Goldilocks>,
{
    type DeviceValues = P::DeviceValues;

    fn device_quotient(
        &self,
        trace: &Self::ProverData,
        matrix: usize,
        compiled: &plonky3_adapter::CompiledAir,
        domain: backend_api::quotient::QuotientDomain,
        values: &[u64],
        alpha_powers: &[u64],
    ) -> Result<Self::DeviceValues, String> {
        self.inner.device_quotient(trace, matrix, compiled, domain, values, alpha_powers)
    }

    fn commit_device_quotient(
        &self,
        values: Self::DeviceValues,
        quotient_domain: p3_field::coset::TwoAdicMultiplicativeCoset<Goldilocks>,
        num_chunks: usize,
    ) -> Result<(Self::Commitment, Self::ProverData), String> {
        self.inner.commit_device_quotient(values, quotient_domain, num_chunks)
    }

    fn commit_device_quotients(
        &self,
        quotients: Vec<(
            plonky3_adapter::QuotientValues<Self::DeviceValues>,
            p3_field::coset::TwoAdicMultiplicativeCoset<Goldilocks>,
            usize,
        )>,
    ) -> Result<(Self::Commitment, Self::ProverData), String> {
        self.record(|| self.inner.commit_device_quotients(quotients), BatchPhases::quotient_commit_call)
    }

    fn commit_borrowed(
        &self,
        evaluations: Vec<(p3_field::coset::TwoAdicMultiplicativeCoset<Goldilocks>, &RowMajorMatrix<Goldilocks>)>,
    ) -> Result<(Self::Commitment, Self::ProverData), Self::ProverError> {
        self.record(|| self.inner.commit_borrowed(evaluations), BatchPhases::commit_call)
    }

    fn count_quotient(&self, on_device: bool) {
        self.inner.count_quotient(on_device);
    }

    fn may_keep_trace_lde(
        &self,
        domain: p3_field::coset::TwoAdicMultiplicativeCoset<Goldilocks>,
        height: usize,
        width: usize,
    ) -> bool {
        self.inner.may_keep_trace_lde(domain, height, width)
    }

    fn trace_lde_on_device(&self, trace: &Self::ProverData, matrix: usize) -> Result<(), String> {
        self.inner.trace_lde_on_device(trace, matrix)
    }
}
