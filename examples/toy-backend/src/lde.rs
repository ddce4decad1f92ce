//! The coset LDE, in place in its output: bit-reversal and textbook radix-2 butterflies over
//! whole rows, with backend-api's field arithmetic and shared twiddle tables.
//!
//! Row `i` of the output is `P(s * w_N^i)` for the column's interpolant `P` (CONVENTIONS.md):
//! an inverse NTT of size `n` gives the coefficients, each coefficient `j` is scaled by
//! `s^j / n` (the table folds the inverse's `1/n` in), and a forward NTT of size `N` over the
//! zero-padded coefficients evaluates them, in natural row order.

use backend_api::field::{LdeTwiddles, add, bit_reverse, canonical, mul, sub};
use backend_api::{LdeParams, Result, validate};

use crate::ToyBackend;

/// [`crate::ToyBackend::coset_lde_in_place`] over a host slice: `data` holds the `N x m` LDE
/// buffer, the trace in its first `n` rows.
///
/// # Errors
/// [`backend_api::Error::LengthMismatch`] when `data` is not `params.lde_shape().len()` long; the
/// tables' reservation.
pub(crate) fn coset_lde_in_place(backend: &ToyBackend, data: &mut [u64], params: &LdeParams) -> Result<()> {
    validate::coset_lde_in_place(params, data.len())?;
    let shape = params.trace();
    let (n, m) = (shape.rows(), shape.cols());
    let (log_n, log_b) = (params.log_trace_rows(), params.log_blowup());

    // The tables are host memory the memory model counts, so they are reserved while they live.
    let _tables = backend.tracker.reserve_owned(LdeTwiddles::bytes_for(log_n, log_b))?;
    let tw = LdeTwiddles::new(log_n, log_b, params.shift());
    // The trace is read mod p; rows n.. may hold anything and become the zero padding.
    let (trace, padding) = data.split_at_mut(n * m);
    trace.iter_mut().for_each(|x| *x = canonical(*x));
    padding.fill(0);
    // Coefficients, scaled by s^j / n.
    ntt(&mut data[..n * m], m, log_n, &tw.inv_twiddles);
    for (row, &c) in data.chunks_exact_mut(m).zip(&tw.coset) {
        for x in row {
            *x = mul(*x, c);
        }
    }
    // Evaluations on the coset, rows n.. being the zero padding.
    ntt(data, m, log_n + log_b, &tw.twiddles);
    Ok(())
}

/// In-place NTT of size `2^log_size` over the rows of a row-major matrix of `m` columns, natural
/// order in and out: `a_k = sum_i x_i * w^(ik)`, with `powers[k] = w^k` for `k < size / 2`.
fn ntt(data: &mut [u64], m: usize, log_size: u32, powers: &[u64]) {
    let size = 1usize << log_size;
    for i in 0..size {
        let r = bit_reverse(i, log_size);
        if i < r {
            let (lo, hi) = data.split_at_mut(r * m);
            lo[i * m..(i + 1) * m].swap_with_slice(&mut hi[..m]);
        }
    }
    let mut half = 1;
    while half < size {
        let step = size / (2 * half);
        for start in (0..size).step_by(2 * half) {
            for j in 0..half {
                let w = powers[j * step];
                let (lo, hi) = data.split_at_mut((start + j + half) * m);
                let top = &mut lo[(start + j) * m..(start + j + 1) * m];
                for (u, v) in top.iter_mut().zip(&mut hi[..m]) {
                    let t = mul(*v, w);
                    (*u, *v) = (add(*u, t), sub(*u, t));
                }
            }
        }
        half *= 2;
    }
}
