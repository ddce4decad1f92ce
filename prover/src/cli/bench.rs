//! `prover bench`: the table made while the backend prepares, then one-shot and warm runs.

use super::*;

/// `prover bench`: the table made while the backend prepares, the transfer floor, then one
/// one-shot and `--runs` warm commits.
pub(super) fn run_bench<P: Ports>(args: &BenchArgs, registry: &Registry<P>) -> Result<u8> {
    let params = CommitParams { hash: args.run.hash.into(), ..params_of(&args.shape) };
    let plan = CommitPlan::new(1usize << args.log_rows, args.cols, &params)?;
    let shape = plan.trace_shape();
    let (backend, _) = registry.select(&args.run.backend)?;
    let budget = params.budget.unwrap_or_else(|| default_budget(backend.visit(InfoOf).total_memory));
    admit(&plan.model, budget, 0)?;
    // The table goes into the backend's host memory, as in `prover commit`.
    let prep = Preparation {
        hash: params.hash,
        pageable_upload_bytes: 0,
        device_bytes: Some(plan.model.total()),
        lde_elems: plan.model.lde / backend_api::ELEM_BYTES,
        lde: Some(plan.lde),
    };
    let (trace, prepared) = backend.while_preparing(prep, || -> Result<_> {
        let mut trace = backend.visit(AllocHost(shape.len()))?;
        synthetic_trace_into(&mut trace, args.run.seed);
        Ok(trace)
    });
    let trace = trace?;
    prepared?;
    let floor = backend.transfer_floor(&trace)?;
    let params = CommitParams { budget: Some(budget), ..params };
    let report = backend.visit(BenchJob { trace: &trace, shape, params: &params, runs: args.runs, floor })?;
    print(&if args.shape.json { to_json(&report)? } else { report.to_string() })?;
    Ok(EXIT_OK)
}

/// [`crate::bench::bench`] on whichever backend was selected.
pub(super) struct BenchJob<'a> {
    pub(super) trace: &'a [u64],
    pub(super) shape: MatrixShape,
    pub(super) params: &'a CommitParams,
    pub(super) runs: usize,
    pub(super) floor: Option<crate::bench::TransferFloor>,
}

impl BackendVisitor for BenchJob<'_> {
    type Output = Result<crate::bench::BenchReport>;

    fn visit<B: Backend>(self, backend: &B) -> Self::Output {
        crate::bench::bench(backend, self.trace, self.shape, self.params, self.runs, self.floor)
    }
}
