//! Checks of the quotient evaluation, [`Backend::quotient_values`], against the naive `u128 % p`
//! reference (each point from the definitions, one inversion per selector), and of the refusals
//! every backend applies before anything is issued.
//!
//! The operation is optional, as the opening products are: a backend that answers
//! [`Error::Unsupported`] prints `SKIPPED <backend>::<check>` and passes, unless its suite runs under
//! `REQUIRE_<PORT>=all`. The refusals come from the checked front, so every backend gives them.

use backend_api::quotient::{ConstraintProgram, Instr, QuotientCall, QuotientDomain, Selector};
use backend_api::{Backend, Error, MAX_EXTENSION_DEGREE, MatrixShape};

use crate::{Context as _, Gen, Outcome, ensure, ensure_live, ensure_words_eq, expect_error, reference};

/// A random program of `len` instructions over `cols` columns and `values` values: loads of every
/// kind (both rows, every selector), arithmetic on random earlier registers, registers reused,
/// and `constraints` folds (in a shuffled order, some constraints folded from the same register).
pub fn random_program(g: &mut Gen, len: usize, cols: usize, values: usize, constraints: usize) -> ConstraintProgram {
    let registers = (len / 3).max(4) as u32;
    let mut written: Vec<u32> = Vec::new();
    let mut instrs = Vec::with_capacity(len + constraints);
    while instrs.len() < len || written.is_empty() {
        let dst = g.below(registers as usize) as u32;
        let pick = |g: &mut Gen, written: &[u32]| written[g.below(written.len())];
        let kind = if written.len() < 2 { g.below(3) } else { g.below(8) };
        let instr = match kind {
            0 => Instr::Column { dst, col: g.below(cols) as u32, next: g.below(2) == 1 },
            1 if values > 0 => Instr::Value { dst, index: g.below(values) as u32 },
            1 | 2 => Instr::Selector { dst, which: Selector::ALL[g.below(3)] },
            3 => Instr::Add { dst, a: pick(g, &written), b: pick(g, &written) },
            4 => Instr::Sub { dst, a: pick(g, &written), b: pick(g, &written) },
            5 | 6 => Instr::Mul { dst, a: pick(g, &written), b: pick(g, &written) },
            _ => Instr::Neg { dst, a: pick(g, &written) },
        };
        instrs.push(instr);
        if !written.contains(&dst) {
            written.push(dst);
        }
        // Fold a constraint now and then from what is live, so registers are reused after a fold.
        let folded = instrs.iter().filter(|i| matches!(i, Instr::Fold { .. })).count();
        if folded < constraints && g.below(len.max(1)) < constraints {
            instrs.push(Instr::Fold { src: pick(g, &written), constraint: folded as u32 });
        }
    }
    let folded = instrs.iter().filter(|i| matches!(i, Instr::Fold { .. })).count();
    for c in folded..constraints {
        instrs.push(Instr::Fold { src: written[g.below(written.len())], constraint: c as u32 });
    }
    // Constraints in a shuffled order: the index, not the position, picks the power.
    let folds: Vec<usize> = (0..instrs.len()).filter(|&i| matches!(instrs[i], Instr::Fold { .. })).collect();
    for k in (1..folds.len()).rev() {
        let j = g.below(k + 1);
        let (Instr::Fold { constraint: a, .. }, Instr::Fold { constraint: b, .. }) =
            (instrs[folds[k]], instrs[folds[j]])
        else {
            unreachable!()
        };
        if let Instr::Fold { constraint, .. } = &mut instrs[folds[k]] {
            *constraint = b;
        }
        if let Instr::Fold { constraint, .. } = &mut instrs[folds[j]] {
            *constraint = a;
        }
    }
    ConstraintProgram::new(&instrs).expect("a random program is well formed")
}

/// Domains of the random check: (log trace rows, log quotient rows, LDE rows per quotient row, d).
/// A quotient domain as large as the trace's (next row 1 apart), blowups of 2 to 8, the LDE's every
/// row or every 2nd / 4th read, one point, and every extension degree up to
/// [`MAX_EXTENSION_DEGREE`].
const DOMAINS: &[(u32, u32, usize, usize)] = &[
    (0, 0, 1, 1),
    (0, 1, 2, 2),
    (2, 2, 1, 2),
    (3, 4, 1, 2),
    (3, 5, 2, 3),
    (4, 6, 4, 1),
    (5, 6, 1, MAX_EXTENSION_DEGREE),
    (7, 8, 2, 2),
    (9, 10, 1, 4),
];

/// Random programs over random LDEs (non-canonical words included) at random shifts, against the
/// reference; the LDE is left as it was.
///
/// # Errors
/// The first domain whose quotient differs.
pub fn quotient_values_random<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("quotient_values_random");
    let baseline = backend.memory().live;
    for &(log_n, log_q, stride, d) in DOMAINS {
        let cols = 1 + g.below(9);
        let rows = (1usize << log_q) * stride;
        let shape = MatrixShape::new(rows, cols).ctx("shape")?;
        let host = g.matrix(shape.len());
        let n_values = g.below(4);
        let values = g.matrix(n_values);
        let constraints = 1 + g.below(6);
        let len = 12 + g.below(40);
        let program = random_program(&mut g, len, cols, values.len(), constraints);
        let alpha_powers = g.matrix(constraints * d);
        let domain = loop {
            let s = g.element();
            if let Ok(domain) = QuotientDomain::new(log_n, log_q, s) {
                break domain;
            }
        };
        let call = QuotientCall { program: &program, domain, values: &values, alpha_powers: &alpha_powers };
        let lde = backend.upload(&host).ctx("upload")?;
        let mut out = backend.upload(&vec![0xdead_beef; (1 << log_q) * d]).ctx("upload the output")?;
        let result = backend.quotient_values(&lde, shape, &call, &mut out);
        if let Err(e) = &result
            && e.is_unsupported()
        {
            return crate::unsupported(backend, "quotient_values_random", e);
        }
        let what = format!(
            "quotient_values of a {}-instruction program over a {shape} LDE, trace 2^{log_n}, quotient 2^{log_q}, d {d}",
            program.len()
        );
        result.ctx(&what)?;
        let expected = reference::quotient_values(&host, cols, &program, domain, &values, &alpha_powers);
        ensure_words_eq(&what, &expected, &backend.download_vec(&out).ctx("download")?)?;
        ensure_words_eq(format!("{what}: the LDE afterwards"), &host, &backend.download_vec(&lde).ctx("download")?)?;
    }
    ensure_live(backend, baseline, "quotient_values_random")
}

/// The boundary constraints of a Fibonacci-like trace: a quotient that must vanish where the
/// trace satisfies them is checked against the reference, and every selector reaches it once
/// alone (so a selector swapped or misnormalised cannot hide behind the others).
///
/// # Errors
/// The first program whose quotient differs.
pub fn quotient_values_selectors<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("quotient_values_selectors");
    let baseline = backend.memory().live;
    let (log_n, log_q) = (4, 6);
    let shape = MatrixShape::new(1 << log_q, 2).ctx("shape")?;
    let host = g.matrix(shape.len());
    let domain = QuotientDomain::new(log_n, log_q, backend_api::field::GENERATOR).ctx("domain")?;
    let lde = backend.upload(&host).ctx("upload")?;
    for which in Selector::ALL {
        let program = ConstraintProgram::new(&[
            Instr::Selector { dst: 0, which },
            Instr::Column { dst: 1, col: 1, next: true },
            Instr::Mul { dst: 0, a: 0, b: 1 },
            Instr::Fold { src: 0, constraint: 0 },
        ])
        .ctx("program")?;
        let alpha = [1, 0];
        let call = QuotientCall { program: &program, domain, values: &[], alpha_powers: &alpha };
        let mut out = backend.alloc(2 << log_q).ctx("alloc")?;
        let result = backend.quotient_values(&lde, shape, &call, &mut out);
        if let Err(e) = &result
            && e.is_unsupported()
        {
            return crate::unsupported(backend, "quotient_values_selectors", e);
        }
        let what = format!("quotient_values of the {which:?} selector times the next row");
        result.ctx(&what)?;
        let expected = reference::quotient_values(&host, 2, &program, domain, &[], &alpha);
        ensure_words_eq(&what, &expected, &backend.download_vec(&out).ctx("download")?)?;
    }
    drop(lde);
    ensure_live(backend, baseline, "quotient_values_selectors")
}

/// Every refusal of the quotient's checked front, with the typed error and the output untouched.
///
/// # Errors
/// The first call that is accepted, or refused with another error, or that wrote its output.
pub fn quotient_values_errors<B: Backend>(backend: &B) -> Outcome {
    let baseline = backend.memory().live;
    let program = ConstraintProgram::new(&[
        Instr::Column { dst: 0, col: 2, next: true },
        Instr::Value { dst: 1, index: 0 },
        Instr::Mul { dst: 0, a: 0, b: 1 },
        Instr::Fold { src: 0, constraint: 0 },
    ])
    .ctx("program")?;
    let domain = QuotientDomain::new(2, 3, 7).ctx("domain")?;
    let length = |e: &Error| matches!(e, Error::LengthMismatch { .. });
    let invalid = |e: &Error| matches!(e, Error::InvalidArgument(_));
    type Case<'a> = (&'a str, usize, usize, usize, usize, usize, &'a dyn Fn(&Error) -> bool);
    // (what, LDE rows, LDE cols, buffer length, values, challenge words, output length, error)
    let cases: Vec<(Case<'_>, usize)> = vec![
        (("a buffer shorter than the LDE's shape", 8, 3, 23, 1, 2, &length), 16),
        (("an LDE of fewer rows than points", 4, 3, 12, 1, 2, &invalid), 16),
        (("an LDE whose rows are not a power of two", 12, 3, 36, 1, 2, &invalid), 16),
        (("an LDE narrower than the program reads", 8, 2, 16, 1, 2, &invalid), 16),
        (("no values for a program that reads one", 8, 3, 24, 0, 2, &length), 16),
        (("no challenge powers", 8, 3, 24, 1, 0, &invalid), 16),
        (("a degree above MAX_EXTENSION_DEGREE", 8, 3, 24, 1, MAX_EXTENSION_DEGREE + 1, &invalid), 72),
        (("an output of the wrong length", 8, 3, 24, 1, 2, &length), 15),
    ];
    for ((what, rows, cols, len, values, alpha, pred), out_len) in cases {
        let shape = MatrixShape::new(rows, cols).ctx("shape")?;
        let lde = backend.upload(&vec![3; len]).ctx("upload")?;
        let mut out = backend.upload(&vec![7; out_len]).ctx("upload the output")?;
        let (values, alpha) = (vec![1; values], vec![1; alpha]);
        let call = QuotientCall { program: &program, domain, values: &values, alpha_powers: &alpha };
        let what = format!("quotient_values with {what}");
        expect_error(backend.quotient_values(&lde, shape, &call, &mut out), &what, pred)?;
        let after = backend.download_vec(&out).ctx("download")?;
        ensure!(after.iter().all(|&x| x == 7), "{what}: a refused call wrote its output");
    }
    // The largest degree is accepted (or the operation is unsupported).
    let shape = MatrixShape::new(8, 3).ctx("shape")?;
    let lde = backend.upload(&[3; 24]).ctx("upload")?;
    let mut out = backend.alloc(8 * MAX_EXTENSION_DEGREE).ctx("alloc")?;
    let alpha = [1; MAX_EXTENSION_DEGREE];
    let call = QuotientCall { program: &program, domain, values: &[5], alpha_powers: &alpha };
    let result = backend.quotient_values(&lde, shape, &call, &mut out);
    if !result.as_ref().is_err_and(Error::is_unsupported) {
        result.ctx("quotient_values of the largest degree")?;
    }
    drop((lde, out));
    ensure_live(backend, baseline, "quotient_values_errors")
}
