//! [`backend_api::Backend::quotient_values`] (`shaders/wgsl/quotient.wgsl`): the constraint
//! program interpreted by one invocation per point of the quotient domain.
//!
//! - **The program goes up once.** Its code, the call's values and challenge powers and three
//!   field constants are one table ([`memory::upload_table`], one storage binding), which every
//!   dispatch of the call binds; only they cross the bus, the LDE is read where it lies.
//! - **Registers in a scratch buffer.** A point's registers and accumulators are scratch words
//!   (window B), register `r` of point `t` at `r * threads + t`, so that neighbouring invocations
//!   touch neighbouring words. The scratch is a tracked allocation of `threads x (registers + d)`
//!   elements, made per call and given back to the pool once its dispatches are queued (a later
//!   owner's work is queued after them): `threads` is at most [`MAX_POINTS`], and the scratch at
//!   most [`MAX_SCRATCH_ELEMS`] and the two segments window B binds.
//! - **Dispatches over chunks of points and ranges of instructions.** The host walks the domain
//!   in chunks of at most `threads` points (its loop over dispatches is the grid stride: a loop
//!   inside the kernel would multiply one invocation's iterations, and the LDE rows a chunk reads
//!   must fit the window). A chunk's current rows and next rows span at most one segment's worth
//!   of elements each, so that together they touch at most the four segments window A binds; a
//!   chunk never straddles the point whose next row wraps to row 0. Each chunk runs the program
//!   in ranges of instructions that keep an invocation's loops within [`LOOP_BUDGET`], each range
//!   carrying on from the registers and accumulators the previous one left in the scratch; the
//!   copy shader then moves the chunk's outputs from the scratch into `out`.
//! - **Selectors only where read.** A range computes `x = shift v^i`, and then the first-row and
//!   last-row selectors (one Fermat inverse each) only when its instructions read them; the last
//!   range divides by `x^n - 1`, one more inverse.
//!
//! The call returns once the dispatches are queued. A program whose table exceeds one storage
//! binding, a point whose registers exceed the scratch a dispatch binds, or a read column past
//! one segment is refused with [`backend_api::Error::InvalidArgument`] naming the limit.

use std::sync::Arc;

use backend_api::field::{canonical, inverse, root_of_unity};
use backend_api::quotient::{ConstraintProgram, Instr, QuotientCall};
use backend_api::{DeviceBuffer as _, Error, MatrixShape, Result};

use crate::context::{Gpu, Kernel, LOOP_BUDGET, Module, NAME, Space, Table, Window};
use crate::copy::{Move, record_moves};
use crate::memory::{self, WgpuBuffer};

const QUOTIENT: Kernel = Kernel { module: Module::Quotient, entry: "quotient_values", items_per_group: 64 };

/// Points one dispatch evaluates at most: 2^16 invocations, so that the scratch stays bounded
/// whatever the domain.
const MAX_POINTS: usize = 1 << 16;

/// Scratch elements a call allocates at most ([`backend_api::quotient::SCRATCH_BYTES`], 2^25
/// elements). A program of many registers runs fewer points per dispatch rather than taking more
/// of the device.
const MAX_SCRATCH_ELEMS: usize = backend_api::quotient::SCRATCH_BYTES / backend_api::ELEM_BYTES;

/// Loop iterations an invocation spends on its point besides the instructions, at most: `v^i` (32),
/// `x^n` (32), three Fermat inverses (64 each), zeroing and scaling `d <= 8` accumulators; under
/// 300, rounded up.
const POINT_LOOPS: usize = 512;

/// Range flags (quotient.wgsl): the first range of a chunk zeroes the accumulators, the last
/// divides them by `x^n - 1`.
const FIRST_RANGE: u32 = 1;
const LAST_RANGE: u32 = 2;

/// The range flag of a selector read (quotient.wgsl's `USES_*`): `4 << code`.
fn selector_flag(which: backend_api::quotient::Selector) -> u32 {
    4 << which.code()
}

/// Elements of the table before the code: the shift, `v`, `w^-1` and one unused, so that the
/// code starts on a `vec4` (quotient.wgsl's `CODE`).
const HEADER_ELEMS: usize = 4;

/// The zero elements that make a table of `len` elements whole `vec4<u32>`s. quotient.wgsl binds
/// the table as `array<vec4<u32>>`, whose length is the buffer's size in 16-byte words, rounded
/// down: an odd number of elements would leave the last one (a challenge power) outside the
/// array. An H100 through Vulkan read it as 0 there (robust buffer access), where llvmpipe read
/// the element.
fn vec4_padding(len: usize) -> &'static [u64] {
    if len % 2 == 1 { &[0] } else { &[] }
}

/// A range of the program's instructions that one dispatch runs, and the selectors it reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Range {
    start: usize,
    end: usize,
    selectors: u32,
}

/// The program cut into ranges whose instructions cost at most `budget` loop iterations each: one
/// per instruction, and `d` more per fold (its loop over the accumulators).
fn ranges(program: &ConstraintProgram, d: usize, budget: usize) -> Vec<Range> {
    let mut out = Vec::new();
    let mut range = Range { start: 0, end: 0, selectors: 0 };
    let mut cost = 0;
    for instr in program.instrs() {
        let c = if matches!(instr, Instr::Fold { .. }) { 1 + d } else { 1 };
        if cost + c > budget {
            out.push(range);
            range = Range { start: range.end, end: range.end, selectors: 0 };
            cost = 0;
        }
        cost += c;
        range.end += 1;
        if let Instr::Selector { which, .. } = instr {
            range.selectors |= selector_flag(which);
        }
    }
    out.push(range);
    out
}

/// [`backend_api::Backend::quotient_values`], on validated arguments. Returns once the dispatches
/// are queued.
pub(crate) fn quotient_values(
    gpu: &Arc<Gpu>,
    lde: &WgpuBuffer,
    shape: MatrixShape,
    call: &QuotientCall<'_>,
    out: &mut WgpuBuffer,
) -> Result<()> {
    let op = "quotient_values";
    let (program, domain, d) = (call.program, call.domain, call.degree());
    let q = domain.quotient_rows();
    let next = domain.next_step();
    // Elements from one point's row to the next point's, and the row's words the program reads.
    let row_elems = shape.rows() / q * shape.cols();
    let width = program.columns();
    let seg = gpu.seg_elems();
    let per_point = program.registers() + d;
    let scratch_cap = (2 * seg).min(MAX_SCRATCH_ELEMS);
    let refuse = |why: String| Err(Error::InvalidArgument(format!("{NAME}: {op}: {why}")));
    if width > seg {
        return refuse(format!(
            "the program reads {width} columns of a row, more than one segment of {seg} elements (the storage \
             binding limit)"
        ));
    }
    if per_point > scratch_cap {
        return refuse(format!(
            "a point's {} registers and {d} accumulators exceed the {scratch_cap} scratch elements one dispatch \
             binds (two segments of {seg}, at most {MAX_SCRATCH_ELEMS})",
            program.registers()
        ));
    }
    // An LDE beyond the kernels' 32-bit indices is refused here, before anything is allocated.
    let (lde_space, _) = Space::new(gpu, &[&lde.segs])?;
    // Points per chunk: the current rows span at most `seg` elements (so at most two segments).
    let lde_points = if width == 0 { q } else { (seg - width) / row_elems + 1 };
    let threads = MAX_POINTS.min(scratch_cap / per_point).min(lde_points).min(q);

    let header =
        [domain.shift(), root_of_unity(domain.log_quotient_rows()), inverse(root_of_unity(domain.log_trace_rows())), 0];
    let code: Vec<u64> = program.code().chunks_exact(2).map(|w| u64::from(w[0]) | (u64::from(w[1]) << 32)).collect();
    let values: Vec<u64> = call.values[..program.values()].iter().map(|&x| canonical(x)).collect();
    let powers: Vec<u64> = call.alpha_powers.iter().map(|&x| canonical(x)).collect();
    let what = format!("the quotient's program of {} instructions, its values and challenge powers", program.len());
    let len = header.len() + code.len() + values.len() + powers.len();
    let table = memory::upload_table(gpu, &[&header, &code, &values, &powers, vec4_padding(len)], &what)?;
    let values_at = HEADER_ELEMS + code.len();
    let powers_at = values_at + values.len();
    let scratch = memory::alloc(gpu, threads * per_point)?;
    let (scratch_space, _) = Space::new(gpu, &[&scratch.segs])?;
    let registers = scratch_space.window::<2>(&[(0, scratch.len() as u64)], op)?;
    let (copy_space, bases) = Space::new(gpu, &[&scratch.segs, &out.segs])?;

    let ranges = ranges(program, d, LOOP_BUDGET - POINT_LOOPS);
    let last = ranges.len() - 1;
    // The rows of `m` points from `first` on, as LDE elements the program reads.
    let rows = |first: usize, m: usize| ((first * row_elems) as u64, ((first + m - 1) * row_elems + width) as u64);
    let mut rec = gpu.recorder(op);
    let mut i0 = 0;
    while i0 < q {
        // Points from `q - next` on read their next rows from row 0 on.
        let end = if i0 < q - next { q - next } else { q };
        let m = threads.min(end - i0);
        let lde_window = if width == 0 {
            Window::empty()
        } else {
            lde_space.window::<4>(&[rows(i0, m), rows((i0 + next) % q, m)], op)?
        };
        for (k, r) in ranges.iter().enumerate() {
            let flags = r.selectors | if k == 0 { FIRST_RANGE } else { 0 } | if k == last { LAST_RANGE } else { 0 };
            // `next` is q for a one-row trace: at q = 2^32 it truncates to 0, the same step mod q
            // for the kernel's wrapping sum.
            let args = [
                i0 as u32,
                threads as u32,
                (q - 1) as u32,
                row_elems as u32,
                next as u32,
                r.start as u32,
                r.end as u32,
                d as u32,
                flags,
                domain.log_trace_rows(),
                values_at as u32,
                powers_at as u32,
            ];
            rec.dispatch(QUOTIENT, m as u32, &args, lde_window, registers, Table::Buffer(&table.segs[0]))?;
        }
        let outputs = Move { src: 0, dst: u64::from(bases[1]) + (i0 * d) as u64, len: (m * d) as u64 };
        record_moves(gpu, &mut rec, &copy_space, &[outputs], op)?;
        i0 += m;
    }
    rec.flush()?;
    // The table and the scratch drop here; wgpu keeps their memory until the queued work is done.
    drop((table, scratch));
    Ok(())
}

#[cfg(test)]
mod tests {
    use backend_api::quotient::Selector;

    use super::*;

    #[test]
    fn ranges_cut_the_program_within_the_budget() {
        let col = |dst| Instr::Column { dst, col: 0, next: false };
        let program = ConstraintProgram::new(&[
            col(0),
            Instr::Selector { dst: 1, which: Selector::LastRow },
            Instr::Fold { src: 0, constraint: 0 },
            col(2),
            Instr::Selector { dst: 3, which: Selector::Transition },
            Instr::Fold { src: 1, constraint: 1 },
        ])
        .unwrap();
        // d = 3: the instructions cost 1, 1, 4, 1, 1, 4.
        let at = |start, end, selectors| Range { start, end, selectors };
        let (last, transition) = (selector_flag(Selector::LastRow), selector_flag(Selector::Transition));
        assert_eq!(ranges(&program, 3, 12), vec![at(0, 6, last | transition)]);
        assert_eq!(ranges(&program, 3, 6), vec![at(0, 3, last), at(3, 6, transition)]);
        assert_eq!(ranges(&program, 3, 4), vec![at(0, 2, last), at(2, 3, 0), at(3, 5, transition), at(5, 6, 0)]);
    }

    /// The quotient's table is bound as `array<vec4<u32>>`: with its padding, every length is whole
    /// `vec4`s, so its last element lies inside the array.
    #[test]
    fn the_table_is_whole_vec4s() {
        for len in 0..12 {
            let padded = len + vec4_padding(len).len();
            assert!(padded.is_multiple_of(2) && padded - len <= 1, "{len} elements padded to {padded}");
        }
    }
}
