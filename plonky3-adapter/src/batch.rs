//! [`prove_batch`]: `p3_batch_stark::prove_batch` step for step, with each table's quotient
//! evaluated on the backend that holds its trace's LDE and every table's quotient committed there.
//!
//! The prover walks p3-batch-stark 0.9.0-rc.2's public transcript ([`BatchProverTranscript`],
//! [`BatchShape`]) in the same order with the same values, so its proof is byte-identical to
//! `p3_batch_stark::prove_batch`'s under the same configuration (proof-of-work bits 0) and
//! `verify_batch` accepts it. Two steps differ in where they run:
//!
//! - **Each table's quotient.** Where the PCS is a [`crate::BackendPcs`] whose trace commit kept
//!   the tables' LDEs on the device (one LDE per height, the tables of a height side by side), a
//!   table's constraints are compiled ([`CompiledAir::compile_table`], on a thread of their own
//!   while the traces commit) and evaluated there over its columns of its height's LDE
//!   ([`DeviceQuotientPcs::device_quotient`]). A table with lookups (its constraints are in the
//!   extension field), preprocessed or periodic columns, or an AIR the compiler does not take runs
//!   Plonky3's `quotient_values` on the host instead, beside the device's work, with one warning
//!   per process and reason ([`crate::PcsStats::host_quotients`] counts them).
//! - **The quotients' commit.** Every table's chunks, device or host values alike, are committed
//!   on the device in one commitment ([`DeviceQuotientPcs::commit_device_quotients`]), as
//!   `get_quotient_ldes` and `commit_ldes` would on the host. Where no table's quotient ran on the
//!   device, both steps are Plonky3's.

use p3_air::Air;
use p3_air::symbolic::{AirLayout, SymbolicExpressionExt};
use p3_batch_stark::folder::ProverConstraintFolderWithLookups;
use p3_batch_stark::proof::{BatchCommitments, BatchOpenedValues, BatchProof, OpenedValuesWithLookups};
use p3_batch_stark::symbolic::get_log_num_quotient_chunks_for_domain;
use p3_batch_stark::{BatchProverTranscript, BatchShape, ProverData, StarkInstance};
use p3_challenger::GrindingChallenger;
use p3_commit::{Pcs, PolynomialSpace, UnivariateStarkPcs};
use p3_field::Algebra;
use p3_field::coset::TwoAdicMultiplicativeCoset;
use p3_goldilocks::Goldilocks;
use p3_lookup::logup::LogUpGadget;
use p3_lookup::{InteractionSymbolicBuilder, Lookup, LookupProtocol, LookupTerminal, check_multiplicity_height_bound};
use p3_matrix::Matrix;
use p3_matrix::dense::RowMajorMatrix;
use p3_uni_stark::{
    Com, OpenedValues, PcsProverError, PreprocessedOpenedValues, ProvingError, StarkGenericConfig, StarkOpeningLayout,
};
use p3_util::log2_strict_usize;
use rayon::prelude::*;
use tracing::info_span;

use crate::prove::{
    DeviceQuotientPcs, DeviceValues, QuotientValues, WARNED_COMPILE, WARNED_DEVICE, device_quotient,
    host_quotient_ldes, warn_once,
};
use crate::quotient::{CompiledAir, Uncompiled};

/// `p3_batch_stark::prove_batch` with each table's quotient on the device: the same arguments,
/// the same proof bytes (proof-of-work bits 0), verified by `p3_batch_stark::verify_batch`.
///
/// The prover walks p3-batch-stark 0.9.0-rc.2's public transcript in the same order with the
/// same values; two steps run elsewhere. Where the PCS is a [`crate::BackendPcs`] whose trace
/// commit kept the tables' LDEs on the device (one per height, the tables of a height side by
/// side), each table's constraints are compiled ([`CompiledAir::compile_table`], beside the
/// traces' commit) and its quotient evaluated there over its own columns; a table with lookups,
/// preprocessed or periodic columns runs Plonky3's `quotient_values` on the host instead, beside
/// the device's work, with one warning per process and reason. Then every table's quotient
/// chunks are committed on the device in one commitment
/// ([`DeviceQuotientPcs::commit_device_quotients`]). Where no table's quotient ran on the device,
/// both steps are Plonky3's. A user of `BackendPcs` changes the name of one function:
/// `plonky3_adapter::prove_batch(&config, &instances, &prover_data)`.
///
/// Stock's prover also checks, in debug builds only, that every trace meets its AIR's constraints
/// (through a function p3-batch-stark keeps private); this one does not: a trace that breaks them
/// gives a proof that `verify_batch` refuses.
///
/// # Errors
/// As `p3_batch_stark::prove_batch`: the PCS's failure with its proving phase.
///
/// # Panics
/// Where `p3_batch_stark::prove_batch` panics: boundary-IO public values, a LogUp multiplicity
/// bound the heights break, a trace whose height is not a power of two.
#[allow(clippy::too_many_lines)]
pub fn prove_batch<SC, A>(
    config: &SC,
    instances: &[StarkInstance<'_, SC, A>],
    prover_data: &ProverData<SC>,
) -> Result<BatchProof<SC>, ProvingError<PcsProverError<SC>>>
where
    SC: StarkGenericConfig,
    SC::Pcs: DeviceQuotientPcs<SC::Challenge, SC::Challenger> + Sync,
    SC::Challenger: GrindingChallenger<Witness = Goldilocks>,
    A: Air<InteractionSymbolicBuilder<Goldilocks, SC::Challenge>>
        + for<'a> Air<ProverConstraintFolderWithLookups<'a, SC>>
        + Sync,
    SymbolicExpressionExt<Goldilocks, SC::Challenge>: Algebra<SC::Challenge>,
    <SC::Pcs as Pcs<SC::Challenge, SC::Challenger>>::ProverData: Sync,
    <SC::Pcs as Pcs<SC::Challenge, SC::Challenger>>::Commitment: Sync,
    PcsProverError<SC>: Send,
{
    assert!(
        instances.iter().all(|instance| instance.air.public_boundary_io().is_empty()),
        "batch-stark does not support boundary-IO public values; bind them with AIR constraints"
    );
    let common = &prover_data.common;
    let gadget = LogUpGadget::new();
    let pcs = config.pcs();
    let zk = config.is_zk();
    let n = instances.len();

    let degrees: Vec<usize> = instances.iter().map(|i| i.trace.height()).collect();
    let log_ext_degrees: Vec<usize> = degrees.iter().map(|&d| log2_strict_usize(d) + zk).collect();
    check_multiplicity_height_bound(&common.lookups, &degrees).expect("LogUp multiplicity height-bound violated");
    let all_lookups: Vec<&[Lookup<Goldilocks>]> = common.lookups.iter().map(|l| &**l).collect();
    let mut lookup_terminals: Vec<Option<LookupTerminal<SC::Challenge>>> = all_lookups.iter().map(|_| None).collect();
    let (trace_domains, ext_trace_domains): (Vec<_>, Vec<_>) = degrees
        .iter()
        .map(|&d| (pcs.natural_domain_for_degree(d), pcs.natural_domain_for_degree(d * (zk + 1))))
        .unzip();
    let airs: Vec<&A> = instances.iter().map(|i| i.air).collect();
    let pub_vals: Vec<&[Goldilocks]> = instances.iter().map(|i| i.public_values.as_slice()).collect();
    let widths: Vec<usize> = airs.iter().map(|a| a.width()).collect();
    let preprocessed_widths: Vec<usize> = (0..n)
        .map(|i| common.preprocessed.as_ref().and_then(|g| g.instances[i].as_ref().map(|m| m.width)).unwrap_or(0))
        .collect();
    let layouts: Vec<AirLayout> = (0..n)
        .map(|i| AirLayout {
            preprocessed_width: preprocessed_widths[i],
            main_width: widths[i],
            num_public_values: airs[i].num_public_values(),
            num_periodic_columns: airs[i].num_periodic_columns(),
            ..Default::default()
        })
        .collect();
    let log_num_quotient_chunks: Vec<usize> = (0..n)
        .map(|i| {
            info_span!("infer log of constraint degree", air_idx = i).in_scope(|| {
                get_log_num_quotient_chunks_for_domain::<_, SC::Challenge, A, _>(
                    airs[i],
                    layouts[i],
                    trace_domains[i],
                    all_lookups[i],
                    zk,
                    &gadget,
                )
            })
        })
        .collect();
    let num_quotient_chunks: Vec<usize> = log_num_quotient_chunks.iter().map(|&l| 1 << (l + zk)).collect();

    let shape = BatchShape {
        trace_widths: widths.clone(),
        public_value_counts: pub_vals.iter().map(|pv| pv.len()).collect(),
        preprocessed_widths: preprocessed_widths.clone(),
        has_preprocessed_commitment: common.preprocessed.is_some(),
        num_lookup_instances: all_lookups.iter().filter(|l| !l.is_empty()).count(),
        lookup_pow_bits: config.lookup_proof_of_work_bits(),
        has_randomization_commitment: SC::Pcs::ZK,
        ood_pow_bits: config.ood_proof_of_work_bits(),
    };

    std::thread::scope(|scope| {
        // The constraints of the tables whose traces may stay on the device compile on a thread
        // of their own while the traces commit (mostly device work).
        let compiling = scope.spawn(|| {
            (0..n)
                .into_par_iter()
                .map(|i| {
                    (zk == 0 && pcs.may_keep_trace_lde(ext_trace_domains[i], degrees[i], widths[i]))
                        .then(|| compile(airs[i], layouts[i], all_lookups[i]))
                })
                .collect::<Vec<_>>()
        });

        let mut challenger = config.initialise_challenger();
        let mut transcript =
            BatchProverTranscript::<SC::Challenger, Goldilocks, SC::Challenge, Com<SC>>::new(&mut challenger, shape);
        transcript.instance_bindings(&log_ext_degrees);

        // The traces are read where they are (stock clones them for `Pcs::commit`).
        let main_inputs: Vec<_> =
            instances.iter().zip(ext_trace_domains.iter().copied()).map(|(inst, dom)| (dom, inst.trace)).collect();
        let (main_commit, main_data) = info_span!("commit to trace data")
            .in_scope(|| pcs.commit_borrowed(main_inputs))
            .inspect_err(|_| transcript.abort())
            .map_err(|source| ProvingError::Pcs { phase: "trace commitment", source })?;
        transcript.main_phase(main_commit.clone(), &pub_vals);
        transcript.preprocessed_phase(common.preprocessed.as_ref().map(|g| g.commitment.clone()));

        let (challenges_per_instance, lookup_pow_witness) = transcript.lookup_phase(&all_lookups, &gadget);
        let mut permutation_inputs = Vec::new();
        for (i, inst) in instances.iter().enumerate() {
            if !all_lookups[i].is_empty() {
                let (permutation, terminal) = gadget.generate_permutation::<Goldilocks, SC::Challenge>(
                    inst.trace,
                    &inst.air.preprocessed_trace(),
                    &inst.public_values,
                    all_lookups[i],
                    &challenges_per_instance[i],
                );
                lookup_terminals[i] = terminal;
                permutation_inputs.push((ext_trace_domains[i], permutation.flatten_to_base()));
            }
        }
        let permutation_commit_and_data = if permutation_inputs.is_empty() {
            None
        } else {
            Some(
                pcs.commit(permutation_inputs)
                    .inspect_err(|_| transcript.abort())
                    .map_err(|source| ProvingError::Pcs { phase: "permutation commitment", source })?,
            )
        };
        let terminal_values: Vec<SC::Challenge> = lookup_terminals.iter().flatten().map(|t| t.0).collect();
        let alpha: SC::Challenge = transcript
            .permutation_phase(permutation_commit_and_data.as_ref().map(|(c, _)| c.clone()), &terminal_values);
        let permutation_data = permutation_commit_and_data.as_ref().map(|(_, data)| data);
        // The permutation matrix of each table with lookups, in the order they were committed.
        let perm_indices: Vec<usize> = all_lookups
            .iter()
            .scan(0usize, |next, lookups| {
                let idx = *next;
                *next += usize::from(!lookups.is_empty());
                Some(idx)
            })
            .collect();

        let quotient_domains: Vec<TwoAdicMultiplicativeCoset<Goldilocks>> = (0..n)
            .map(|i| {
                ext_trace_domains[i].create_disjoint_domain(1 << (log_ext_degrees[i] + log_num_quotient_chunks[i]))
            })
            .collect();
        // Table `i`'s quotient by Plonky3's host code, flattened to the base field.
        let host_quotient = |i: usize| -> RowMajorMatrix<Goldilocks> {
            let _span = info_span!("compute quotient", air_idx = i).entered();
            let domain = quotient_domains[i];
            let trace_on_domain = pcs.get_evaluations_on_domain(&main_data, i, domain);
            let permutation_on_domain = permutation_data
                .filter(|_| !all_lookups[i].is_empty())
                .map(|data| pcs.get_evaluations_on_domain(data, perm_indices[i], domain));
            let preprocessed_on_domain =
                common.preprocessed.as_ref().and_then(|g| g.instances[i].as_ref()).map(|meta| {
                    let data = prover_data
                        .prover_only
                        .preprocessed_prover_data
                        .as_ref()
                        .expect("preprocessed_prover_data must exist when preprocessed columns exist");
                    pcs.get_evaluations_on_domain_no_random(data, meta.matrix_index, domain)
                });
            let perm_vals: Vec<SC::Challenge> = lookup_terminals[i].iter().map(|t| t.0).collect();
            let values = p3_batch_stark::prover::quotient_values(
                pcs,
                airs[i],
                pub_vals[i],
                layouts[i],
                trace_domains[i],
                domain,
                &trace_on_domain,
                permutation_on_domain.as_ref(),
                all_lookups[i],
                &perm_vals,
                &gadget,
                &challenges_per_instance[i],
                preprocessed_on_domain.as_ref(),
                alpha,
            );
            RowMajorMatrix::new_col(values).flatten_to_base()
        };

        // Which tables evaluate on the device: those whose LDE stayed there and whose
        // constraints compiled (now, for a table whose LDE was not expected to stay).
        let compiled: Vec<Option<Result<CompiledAir, Uncompiled>>> = info_span!("quotient: compile wait")
            .in_scope(|| compiling.join())
            .unwrap_or_else(|_| (0..n).map(|_| Some(Err(panicked()))).collect());
        let compiled: Vec<Option<CompiledAir>> = compiled
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                (zk == 0)
                    .then(|| pcs.trace_lde_on_device(&main_data, i))?
                    .map_err(|why| warn_once(&WARNED_DEVICE, || format!("{why}; the quotient runs on the host")))
                    .ok()?;
                c.unwrap_or_else(|| compile(airs[i], layouts[i], all_lookups[i]))
                    .map_err(|e| {
                        warn_once(&WARNED_COMPILE, || {
                            format!("a table's constraints were not compiled ({e}); its quotient runs on the host")
                        });
                    })
                    .ok()
            })
            .collect();
        let on_host: Vec<usize> = (0..n).filter(|&i| compiled[i].is_none()).collect();

        let mut values: Vec<Option<QuotientValues<DeviceValues<SC>>>> = (0..n).map(|_| None).collect();
        let mut failed = Vec::new();
        info_span!("quotient").in_scope(|| {
            std::thread::scope(|inner| {
                // The host's tables beside the device's.
                let host = inner.spawn(|| on_host.par_iter().map(|&i| (i, host_quotient(i))).collect::<Vec<_>>());
                for (i, c) in compiled.iter().enumerate().filter_map(|(i, c)| Some((i, c.as_ref()?))) {
                    match device_quotient::<SC>(
                        pcs,
                        Ok(c),
                        &main_data,
                        i,
                        (trace_domains[i], quotient_domains[i]),
                        pub_vals[i],
                        alpha,
                    ) {
                        Ok(v) => values[i] = Some(QuotientValues::Device(v)),
                        Err((flag, why)) => {
                            warn_once(flag, || format!("{why}; the quotient runs on the host"));
                            failed.push(i);
                        }
                    }
                }
                let host = host.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                for (i, m) in host {
                    values[i] = Some(QuotientValues::Host(m));
                }
            });
            for i in failed {
                values[i] = Some(QuotientValues::Host(host_quotient(i)));
            }
        });

        let device_tables: Vec<bool> = values.iter().map(|v| matches!(v, Some(QuotientValues::Device(_)))).collect();
        let devices = device_tables.iter().filter(|&&d| d).count();
        // On the device, every table's values committed there; otherwise (or after that commit
        // lost them) the host's values, Plonky3's chunks' LDEs and `commit_ldes`.
        let (committed, host_values) = if devices > 0 {
            let quotients = values
                .into_iter()
                .zip(&quotient_domains)
                .zip(&num_quotient_chunks)
                .map(|((v, &domain), &chunks)| (v.expect("every table's quotient was evaluated"), domain, chunks))
                .collect();
            let committed = info_span!("commit to quotient poly chunks")
                .in_scope(|| pcs.commit_device_quotients(quotients))
                .map_err(|why| warn_once(&WARNED_DEVICE, || format!("{why}; the quotients run on the host")))
                .ok();
            (committed, None)
        } else {
            let host = values.into_iter().map(|v| match v {
                Some(QuotientValues::Host(m)) => m,
                _ => unreachable!("no table's quotient is on the device"),
            });
            (None, Some(host.collect::<Vec<_>>()))
        };
        for on_device in device_tables {
            pcs.count_quotient(committed.is_some() && on_device);
        }
        let (quotient_commit, quotient_data) = match committed {
            Some(done) => done,
            None => {
                let host_values = host_values.unwrap_or_else(|| (0..n).into_par_iter().map(host_quotient).collect());
                let tables = host_values
                    .into_iter()
                    .zip(quotient_domains.iter().copied())
                    .zip(num_quotient_chunks.iter().copied())
                    .map(|((flat, domain), chunks)| (flat, domain, chunks))
                    .collect();
                let ldes = info_span!("quotient: chunks' LDEs")
                    .in_scope(|| host_quotient_ldes::<_, SC::Challenge, SC::Challenger>(pcs, tables))
                    .inspect_err(|_| transcript.abort())
                    .map_err(|source| ProvingError::Pcs { phase: "quotient evaluations", source })?;
                info_span!("commit to quotient poly chunks")
                    .in_scope(|| pcs.commit_ldes(ldes))
                    .inspect_err(|_| transcript.abort())
                    .map_err(|source| ProvingError::Pcs { phase: "quotient commitment", source })?
            }
        };
        let quotient_chunk_ranges: Vec<(usize, usize)> = num_quotient_chunks
            .iter()
            .scan(0usize, |next, &chunks| {
                let start = *next;
                *next += chunks;
                Some((start, *next))
            })
            .collect();

        let (opt_r_commit, opt_r_data) = if SC::Pcs::ZK {
            let (r_commit, r_data) = pcs
                .get_opt_randomization_poly_commitment(ext_trace_domains.iter().copied())
                .inspect_err(|_| transcript.abort())
                .map_err(|source| ProvingError::Pcs { phase: "randomization commitment", source })?
                .expect("ZK is enabled, so we should have randomization commitments");
            (Some(r_commit), Some(r_data))
        } else {
            (None, None)
        };
        transcript.quotient_phase(quotient_commit.clone(), opt_r_commit.clone());
        let (zeta, ood_pow_witness): (SC::Challenge, Goldilocks) = transcript.ood_phase();

        let opening_layout = StarkOpeningLayout::new(SC::Pcs::ZK);
        let next_point =
            |i: usize| trace_domains[i].next_point(zeta).expect("domain should support next_point operation");
        let opening_result = info_span!("open").in_scope(|| {
            let mut rounds = Vec::new();
            rounds
                .extend(opt_r_data.as_ref().map(|r_data| (r_data, trace_domains.iter().map(|_| vec![zeta]).collect())));
            let trace_points = (0..n)
                .map(
                    |i| if airs[i].main_next_row_columns().is_empty() { vec![zeta] } else { vec![zeta, next_point(i)] },
                )
                .collect::<Vec<_>>();
            rounds.push((&main_data, trace_points));
            let quotient_points =
                quotient_chunk_ranges.iter().flat_map(|&(s, e)| (s..e).map(|_| vec![zeta])).collect::<Vec<_>>();
            rounds.push((&quotient_data, quotient_points));
            if let Some(global) = &common.preprocessed {
                let data = prover_data
                    .prover_only
                    .preprocessed_prover_data
                    .as_ref()
                    .expect("preprocessed_prover_data must exist when preprocessed columns exist");
                let points = global
                    .matrix_to_instance
                    .iter()
                    .map(|&i| {
                        if airs[i].preprocessed_next_row_columns().is_empty() {
                            vec![zeta]
                        } else {
                            vec![zeta, next_point(i)]
                        }
                    })
                    .collect();
                rounds.push((data, points));
            }
            if let Some((_, data)) = &permutation_commit_and_data {
                let points =
                    (0..n).filter(|&i| !all_lookups[i].is_empty()).map(|i| vec![zeta, next_point(i)]).collect();
                rounds.push((data, points));
            }
            transcript.delegate(|challenger| {
                pcs.open_with_preprocessing(
                    rounds.into_iter().map(Into::into).collect(),
                    challenger,
                    common.preprocessed.as_ref().map(|_| opening_layout.preprocessed),
                )
            })
        });
        let (opened_values, opening_proof) = opening_result
            .inspect_err(|_| transcript.abort())
            .map_err(|source| ProvingError::Pcs { phase: "opening", source })?;
        transcript.finish();

        // The opened values, table by table.
        let permutation_idx = opening_layout.preprocessed + usize::from(common.preprocessed.is_some());
        let trace_values = &opened_values[opening_layout.trace];
        assert_eq!(trace_values.len(), n);
        let preprocessed_openings = common.preprocessed.as_ref().map(|_| &opened_values[opening_layout.preprocessed]);
        let no_permutations = Vec::new();
        let mut permutation_values =
            if permutation_commit_and_data.is_some() { &opened_values[permutation_idx] } else { &no_permutations }
                .iter();
        let mut quotient_openings = opened_values[opening_layout.quotient].iter();
        let mut per_instance = Vec::with_capacity(n);
        for (i, &(s, e)) in quotient_chunk_ranges.iter().enumerate() {
            let random = opt_r_data.as_ref().map(|_| opened_values[0][i][0].clone());
            let tv = &trace_values[i];
            let trace_next = (!airs[i].main_next_row_columns().is_empty()).then(|| tv[1].clone());
            let quotient_chunks =
                (s..e).map(|_| quotient_openings.next().expect("chunk index in bounds")[0].clone()).collect();
            let preprocessed = match (&common.preprocessed, preprocessed_openings) {
                (Some(global), Some(round)) => global.instances[i].as_ref().map(|meta| {
                    let vals = &round[meta.matrix_index];
                    let next = if airs[i].preprocessed_next_row_columns().is_empty() {
                        assert_eq!(vals.len(), 1, "expected one opening point (zeta) for preprocessed trace");
                        None
                    } else {
                        assert_eq!(
                            vals.len(),
                            2,
                            "expected two opening points (zeta, zeta_next) for preprocessed trace"
                        );
                        Some(vals[1].clone())
                    };
                    PreprocessedOpenedValues { local: vals[0].clone(), next }
                }),
                _ => None,
            };
            let (permutation_local, permutation_next) = if all_lookups[i].is_empty() {
                (vec![], vec![])
            } else {
                let v = permutation_values.next().expect("instance should have permutation openings");
                (v[0].clone(), v[1].clone())
            };
            per_instance.push(OpenedValuesWithLookups {
                base_opened_values: OpenedValues {
                    trace_local: tv[0].clone(),
                    trace_next,
                    preprocessed,
                    quotient_chunks,
                    random,
                },
                permutation_local,
                permutation_next,
            });
        }
        Ok(BatchProof {
            commitments: BatchCommitments {
                main: main_commit,
                quotient_chunks: quotient_commit,
                random: opt_r_commit,
                permutation: permutation_commit_and_data.map(|(c, _)| c),
            },
            opened_values: BatchOpenedValues { instances: per_instance },
            opening_proof,
            lookup_terminals,
            degree_bits: log_ext_degrees,
            lookup_pow_witness,
            ood_pow_witness,
        })
    })
}

/// Table `air`'s compiled constraints, or why not (a panic in its symbolic evaluation included).
fn compile<A, Challenge>(air: &A, layout: AirLayout, lookups: &[Lookup<Goldilocks>]) -> Result<CompiledAir, Uncompiled>
where
    A: Air<InteractionSymbolicBuilder<Goldilocks, Challenge>>,
    Challenge: p3_field::ExtensionField<Goldilocks>,
    SymbolicExpressionExt<Goldilocks, Challenge>: Algebra<Challenge>,
{
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        CompiledAir::compile_table::<A, Challenge>(air, layout, lookups)
    }))
    .unwrap_or_else(|_| Err(panicked()))
}

fn panicked() -> Uncompiled {
    Uncompiled("the AIR panicked in its symbolic evaluation".into())
}
