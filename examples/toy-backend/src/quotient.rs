//! The quotient: the constraint program run one point at a time, one instruction at a time, over
//! backend-api's field arithmetic (the front validated every argument first).

use backend_api::MatrixShape;
use backend_api::field::{add, canonical, inverse, mul, pow, root_of_unity, sub};
use backend_api::quotient::{Instr, QuotientCall, Selector};

/// [`backend_api::Backend::quotient_values`] over host slices: each point `x = shift v^i` from the
/// definitions, each selector with an inversion of its own, and the folded constraints divided by
/// `x^n - 1`.
pub(crate) fn quotient_values(lde: &[u64], shape: MatrixShape, call: &QuotientCall<'_>, out: &mut [u64]) {
    let (program, domain, d) = (call.program, call.domain, call.degree());
    let q = domain.quotient_rows();
    let (stride, next, cols) = (shape.rows() / q, domain.next_step(), shape.cols());
    let n = 1u64 << domain.log_trace_rows();
    let v = root_of_unity(domain.log_quotient_rows());
    let w_inv = inverse(root_of_unity(domain.log_trace_rows()));
    // The LDE's row of point `i` (every `stride`-th row is a point's), cyclically.
    let row = |i: usize| &lde[(i % q) * stride * cols..][..cols];
    let mut regs = vec![0u64; program.registers()];
    for (i, out) in out.chunks_exact_mut(d).enumerate() {
        let x = mul(domain.shift(), pow(v, i as u64));
        let z_h = sub(pow(x, n), 1);
        let mut acc = vec![0u64; d];
        for instr in program.instrs() {
            let r = |k: u32| regs[k as usize];
            let (dst, value) = match instr {
                Instr::Column { dst, col, next: false } => (dst, canonical(row(i)[col as usize])),
                Instr::Column { dst, col, next: true } => (dst, canonical(row(i + next)[col as usize])),
                Instr::Value { dst, index } => (dst, canonical(call.values[index as usize])),
                Instr::Selector { dst, which: Selector::FirstRow } => (dst, mul(z_h, inverse(sub(x, 1)))),
                Instr::Selector { dst, which: Selector::LastRow } => (dst, mul(z_h, inverse(sub(x, w_inv)))),
                Instr::Selector { dst, which: Selector::Transition } => (dst, sub(x, w_inv)),
                Instr::Add { dst, a, b } => (dst, add(r(a), r(b))),
                Instr::Sub { dst, a, b } => (dst, sub(r(a), r(b))),
                Instr::Mul { dst, a, b } => (dst, mul(r(a), r(b))),
                Instr::Neg { dst, a } => (dst, sub(0, r(a))),
                Instr::Fold { src, constraint } => {
                    let power = &call.alpha_powers[constraint as usize * d..][..d];
                    for (acc, &p) in acc.iter_mut().zip(power) {
                        *acc = add(*acc, mul(p, r(src)));
                    }
                    continue;
                }
            };
            regs[dst as usize] = value;
        }
        let inv_z_h = inverse(z_h);
        for (o, a) in out.iter_mut().zip(acc) {
            *o = mul(a, inv_z_h);
        }
    }
}
