//! [`backend_api::Backend::quotient_values`]: the constraint program run over blocks of
//! [`LANES`] points at once, each instruction a loop over the block's lanes (so the interpreter's
//! dispatch is paid once per block, and the loops vectorise), parallel over blocks. The selectors'
//! and the vanishing polynomial's divisions are one batch inversion per block.

use backend_api::field::{add, canonical, inverse, mul, pow, root_of_unity, sub};
use backend_api::quotient::{Instr, QuotientCall, Selector};
use backend_api::{MAX_EXTENSION_DEGREE, MatrixShape};
use rayon::prelude::*;

/// Points evaluated together by one task.
const LANES: usize = 64;

/// [`backend_api::Backend::quotient_values`], on validated arguments.
pub(crate) fn quotient_values(lde: &[u64], shape: MatrixShape, call: &QuotientCall<'_>, out: &mut [u64]) {
    let (program, domain, d) = (call.program, call.domain, call.degree());
    let q = domain.quotient_rows();
    let (stride, next, cols) = (shape.rows() / q, domain.next_step(), shape.cols());
    let v = root_of_unity(domain.log_quotient_rows());
    let w_inv = inverse(root_of_unity(domain.log_trace_rows()));
    let log_n = domain.log_trace_rows();
    let values: Vec<u64> = call.values.iter().map(|&x| canonical(x)).collect();
    let instrs: Vec<Instr> = program.instrs().collect();
    let registers = program.registers();
    let wants = |s: Selector| program.uses(s);
    let row = |i: usize| &lde[(i % q) * stride * cols..][..cols];

    out.par_chunks_mut(LANES * d).enumerate().for_each_init(
        || vec![[0u64; LANES]; registers],
        |regs, (block, out)| {
            let first = block * LANES;
            let lanes = out.len() / d;
            // The points, x^n - 1 at each, and the denominators to invert in one batch.
            let mut x = [0u64; LANES];
            x[0] = mul(domain.shift(), pow(v, first as u64));
            for l in 1..lanes {
                x[l] = mul(x[l - 1], v);
            }
            let z_h: [u64; LANES] = std::array::from_fn(|l| {
                let mut t = x[l];
                for _ in 0..log_n {
                    t = mul(t, t);
                }
                sub(t, 1)
            });
            let mut inv_z_h = z_h;
            batch_inverse(&mut inv_z_h[..lanes]);
            let mut first_row = [0u64; LANES];
            let mut last_row = [0u64; LANES];
            if wants(Selector::FirstRow) {
                first_row = std::array::from_fn(|l| sub(x[l], 1));
                batch_inverse(&mut first_row[..lanes]);
                for l in 0..lanes {
                    first_row[l] = mul(first_row[l], z_h[l]);
                }
            }
            if wants(Selector::LastRow) {
                last_row = std::array::from_fn(|l| sub(x[l], w_inv));
                batch_inverse(&mut last_row[..lanes]);
                for l in 0..lanes {
                    last_row[l] = mul(last_row[l], z_h[l]);
                }
            }
            let transition: [u64; LANES] = std::array::from_fn(|l| sub(x[l], w_inv));

            let mut acc = [[0u64; LANES]; MAX_EXTENSION_DEGREE];
            for &instr in &instrs {
                let (dst, value) = match instr {
                    Instr::Column { dst, col, next: is_next } => {
                        let at = first + if is_next { next } else { 0 };
                        (dst, std::array::from_fn(|l| if l < lanes { canonical(row(at + l)[col as usize]) } else { 0 }))
                    }
                    Instr::Value { dst, index } => (dst, [values[index as usize]; LANES]),
                    Instr::Selector { dst, which } => (
                        dst,
                        match which {
                            Selector::FirstRow => first_row,
                            Selector::LastRow => last_row,
                            Selector::Transition => transition,
                        },
                    ),
                    Instr::Add { dst, a, b } => (dst, lanewise(&regs[a as usize], &regs[b as usize], add)),
                    Instr::Sub { dst, a, b } => (dst, lanewise(&regs[a as usize], &regs[b as usize], sub)),
                    Instr::Mul { dst, a, b } => (dst, lanewise(&regs[a as usize], &regs[b as usize], mul)),
                    Instr::Neg { dst, a } => (dst, regs[a as usize].map(|x| sub(0, x))),
                    Instr::Fold { src, constraint } => {
                        let power = &call.alpha_powers[constraint as usize * d..][..d];
                        let c = &regs[src as usize];
                        for (acc, &p) in acc.iter_mut().zip(power) {
                            let p = canonical(p);
                            for l in 0..LANES {
                                acc[l] = add(acc[l], mul(p, c[l]));
                            }
                        }
                        continue;
                    }
                };
                regs[dst as usize] = value;
            }
            for (l, out) in out.chunks_exact_mut(d).enumerate() {
                for (k, o) in out.iter_mut().enumerate() {
                    *o = mul(acc[k][l], inv_z_h[l]);
                }
            }
        },
    );
}

fn lanewise(a: &[u64; LANES], b: &[u64; LANES], op: fn(u64, u64) -> u64) -> [u64; LANES] {
    std::array::from_fn(|l| op(a[l], b[l]))
}

/// Inverts every (non-zero) element of `xs` in place with one inversion (Montgomery's trick).
fn batch_inverse(xs: &mut [u64]) {
    let mut prefix = Vec::with_capacity(xs.len());
    let mut running = 1;
    for &x in xs.iter() {
        prefix.push(running);
        running = mul(running, x);
    }
    let mut inv = inverse(running);
    for (x, before) in xs.iter_mut().zip(prefix).rev() {
        let next = mul(inv, *x);
        *x = mul(inv, before);
        inv = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_inverse_inverts_each_element() {
        let mut xs = [3u64, 7, backend_api::field::P - 1, 1 << 40];
        let expected = xs.map(inverse);
        batch_inverse(&mut xs);
        assert_eq!(xs, expected);
    }
}
