//! The quotient (quotient.cu): [`backend_api::Backend::quotient_values`] as one launch of threads
//! in a grid-stride loop, interpreting the constraint program. The program, its values and the
//! challenge powers go up (two small uploads); the LDE is read where it lies.
//!
//! **Points per thread.** Where a block's register files for [`POINTS`] points per thread fit in
//! 48 KiB of shared memory (the most a launch gets without opting in), each thread evaluates four
//! points at once: it fetches and dispatches an instruction once and applies it to each, so the
//! dispatch is paid once per four points and each thread has four independent chains of arithmetic
//! to overlap. On an H200 (2026-12-07, the prove bench, same call) the Fibonacci AIR's quotient at
//! 2^21 points took 9.1 ms at four points against 11.2 ms at one. Otherwise a thread takes one
//! point: the Keccak-f AIR (260 registers, a global file) took 55.3 ms at four against 44.4 ms at
//! one at 2,730 permutations. One kernel per extension degree and points per thread
//! ([`kernel_name`]), so each is allocated only the registers its own accumulators need.
//!
//! **The register file.** Each point holds `registers` values: in shared memory where a block's
//! fit, else in a global scratch of `registers` words per point of the grid, whose size bounds the
//! grid ([`SCRATCH_BYTES`]). Either way register `r` of one point slot of consecutive threads is
//! consecutive words.
//!
//! **The cells.** The LDE is row-major, so threads of consecutive points reading one column touch
//! one 32-byte sector each for 8 useful bytes. A program that walks the columns in order finds
//! those sectors in L1 at its next reads; one whose reads jump between columns
//! ([`scattered_reads`]: the Keccak-f AIR's) pays the whole sector each time. For the latter, where
//! the device has room, the quotient domain's rows are first copied column-major (`q x cols`
//! words, one tiled transpose) and the program reads consecutive words; otherwise, and when that
//! allocation fails, the rows are read where they lie.
//!
//! **Why an interpreter.** The program is data, so one kernel image serves every AIR: nothing is
//! compiled per AIR at proving time, the embedded images stay one per architecture, and the same
//! program runs on every backend. Source generated per program is too slow to compile to pay at
//! proving time: written out as straight-line CUDA (the registers as locals, the arithmetic
//! inlined), the Fibonacci AIR's 3,332 instructions took NVRTC 43.7 s for `sm_90` (18.9 s for PTX
//! alone); with the arithmetic behind `__noinline__` calls, 5.9-7.2 s, and the Keccak-f AIR's
//! 62,180 instructions had not compiled after 3 minutes (2-core x86 host, NVRTC 13.0,
//! 2026-12-07). The
//! price of interpreting is an instruction load and register-file traffic per operation;
//! BENCHMARKS.md gives the cost per row against the multiplication ceiling.

use std::sync::Arc;

use backend_api::field::{canonical, inverse, mul, pow, powers, root_of_unity, sub};
use backend_api::quotient::{ConstraintProgram, INSTR_WORDS, QuotientCall, Selector, opcode};
use backend_api::{MatrixShape, Result};

use crate::context::Device;
use crate::launch::{LaunchArgs, LaunchConfig};
use crate::memory::{self, CudaBuffer};
use crate::module::Source;

/// Threads per block (the kernel's `__launch_bounds__`).
pub(crate) const BLOCK: u32 = 128;
/// Dynamic shared memory a launch may take without opting in.
const SHARED_BYTES: usize = 48 << 10;
/// The most global scratch a launch's register files take; the grid shrinks to fit.
const SCRATCH_BYTES: usize = backend_api::quotient::SCRATCH_BYTES;
/// Blocks per multiprocessor the grid aims for (a grid-stride loop covers the rest).
const BLOCKS_PER_SM: usize = 16;
/// Points per thread (`Q_POINTS` in quotient.cu, [`crate::QUOTIENT_POINTS`]): each instruction is
/// dispatched once for this many points. One where a block's register files for this many points
/// do not fit in shared memory, or where [`crate::CudaOptions::quotient_points`] says 1.
pub(crate) const POINTS: usize = crate::options::QUOTIENT_POINTS as usize;
/// A program whose cell reads are scattered: fewer than [`NEAR_READS`] of its column loads lie
/// within 4 columns (one 32-byte sector) of the previous load from the same row. Its quotient
/// reads a column-major copy of the rows; a program that walks the columns in order finds the
/// sectors of its row-major reads in L1 and is faster without the copy. On an H100 (2026-12-06,
/// the prove bench, same call): the Keccak-f AIR (53% near reads) took 44.8 ms with the copy
/// against 61.3 ms without at 2,730 permutations (25.2 against 27.2 ms at 1,365), while the
/// Fibonacci AIR (100%) took 12.2 against 11.3 ms at 2^20 rows and 3.3 against 3.1 ms at 2^18.
/// The Poseidon2 and BLAKE3 AIRs read 72% and 71% near.
fn scattered_reads(program: &ConstraintProgram) -> bool {
    let (mut loads, mut near, mut last) = (0usize, 0usize, [None::<u32>; 2]);
    for ins in program.code().chunks_exact(INSTR_WORDS) {
        let row = match ins[0] {
            opcode::COLUMN => 0,
            opcode::COLUMN_NEXT => 1,
            _ => continue,
        };
        loads += 1;
        near += usize::from(last[row].is_some_and(|c| c.abs_diff(ins[2]) < 4));
        last[row] = Some(ins[2]);
    }
    (near as f64) < NEAR_READS * loads as f64
}

/// The kernel for an extension of degree `d` (1 to [`backend_api::MAX_EXTENSION_DEGREE`]) at
/// `points` per thread (1 or [`POINTS`]): quotient.cu instantiates one per pair, so each is
/// allocated only the registers its accumulators need.
pub(crate) fn kernel_name(d: usize, points: usize) -> &'static str {
    const ONE: [&str; 8] = [
        "quotient_values_d1_p1",
        "quotient_values_d2_p1",
        "quotient_values_d3_p1",
        "quotient_values_d4_p1",
        "quotient_values_d5_p1",
        "quotient_values_d6_p1",
        "quotient_values_d7_p1",
        "quotient_values_d8_p1",
    ];
    const FOUR: [&str; 8] = [
        "quotient_values_d1_p4",
        "quotient_values_d2_p4",
        "quotient_values_d3_p4",
        "quotient_values_d4_p4",
        "quotient_values_d5_p4",
        "quotient_values_d6_p4",
        "quotient_values_d7_p4",
        "quotient_values_d8_p4",
    ];
    let names = if points == POINTS { &FOUR } else { &ONE };
    names[d.clamp(1, names.len()) - 1]
}

/// The share of near column loads below which a program's reads count as scattered
/// ([`scattered_reads`]).
const NEAR_READS: f64 = 0.6;

/// What one call of [`quotient_values`] launches, computed on the host from the call alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Launch {
    /// The kernel ([`kernel_name`]).
    pub(crate) kernel: &'static str,
    /// Points per thread: 1 or [`POINTS`].
    pub(crate) points: usize,
    /// Blocks of [`BLOCK`] threads.
    pub(crate) grid: usize,
    /// Dynamic shared memory per block, in bytes: the register file when it lives there, else 0.
    pub(crate) shared_bytes: usize,
    /// Words of the global register file when it does not fit in shared memory, else 0.
    pub(crate) scratch_words: usize,
    /// Whether the kernel reads a column-major copy of the quotient domain's rows
    /// ([`scattered_reads`]; the copy may still be skipped when its allocation fails).
    pub(crate) columns: bool,
    /// The program's words two to a `u64` (little-endian, so the kernel reads them as `uint4`).
    pub(crate) code: Vec<u64>,
    /// The values, then the challenge powers (from [`Launch::alpha_at`]), canonical, then `x^n - 1`
    /// and its inverse at the `q / n` values it takes (from [`Launch::vanishing_at`]).
    pub(crate) constants: Vec<u64>,
    /// Where the challenge powers start in [`Launch::constants`].
    pub(crate) alpha_at: usize,
    /// Where the vanishing table starts in [`Launch::constants`].
    pub(crate) vanishing_at: usize,
    /// The kernel's scalar arguments after its pointers, in order: instructions, columns, LDE
    /// rows per point, log2 q, log2 n, the coset's shift, the quotient domain's generator, the
    /// trace domain's generator's inverse, the selector flags.
    pub(crate) args: [u64; 9],
}

impl Launch {
    /// The launch of `call` over an LDE of `shape` on a device of `sm_count` multiprocessors, at
    /// most `max_points` points per thread.
    pub(crate) fn new(call: &QuotientCall<'_>, shape: MatrixShape, sm_count: u32, max_points: usize) -> Self {
        let (program, domain, d) = (call.program, call.domain, call.degree());
        let q = domain.quotient_rows();
        let registers = program.registers().max(1);
        let code: Vec<u64> =
            program.code().chunks_exact(2).map(|w| u64::from(w[0]) | (u64::from(w[1]) << 32)).collect();
        let mut constants: Vec<u64> = call.values.iter().map(|&x| canonical(x)).collect();
        let alpha_at = constants.len();
        constants.extend(call.alpha_powers.iter().map(|&x| canonical(x)));
        // x^n - 1 and its inverse at the q / n values it takes: (shift w_q^j)^n - 1 for j < q / n.
        let vanishing_at = constants.len();
        let log_period = domain.log_quotient_rows() - domain.log_trace_rows();
        let shift_n = pow(domain.shift(), 1u64 << domain.log_trace_rows());
        for x_n in powers(root_of_unity(log_period), 1 << log_period) {
            let z_h = sub(mul(shift_n, x_n), 1);
            constants.extend([z_h, inverse(z_h)]);
        }

        // The register file: shared memory when a block's fits ([`POINTS`] points per thread
        // where they fit, else one), else a global scratch of one point per thread (four there
        // measured slower: below).
        let file = |points: usize| registers * points * BLOCK as usize * 8;
        let points = if max_points == POINTS && file(POINTS) <= SHARED_BYTES { POINTS } else { 1 };
        let blocks = q.div_ceil(BLOCK as usize * points).min(sm_count as usize * BLOCKS_PER_SM).max(1);
        let (grid, shared_bytes, scratch_words) = if file(points) <= SHARED_BYTES {
            (blocks, file(points), 0)
        } else {
            let grid = blocks.min((SCRATCH_BYTES / file(points)).max(1));
            (grid, 0, registers * points * grid * BLOCK as usize)
        };
        let flags = u64::from(program.uses(Selector::FirstRow)) | (u64::from(program.uses(Selector::LastRow)) << 1);
        let args = [
            program.len() as u64,
            shape.cols() as u64,
            (shape.rows() / q) as u64,
            u64::from(domain.log_quotient_rows()),
            u64::from(domain.log_trace_rows()),
            domain.shift(),
            root_of_unity(domain.log_quotient_rows()),
            inverse(root_of_unity(domain.log_trace_rows())),
            flags,
        ];
        Self {
            kernel: kernel_name(d, points),
            points,
            grid,
            shared_bytes,
            scratch_words,
            columns: scattered_reads(program),
            code,
            constants,
            alpha_at,
            vanishing_at,
            args,
        }
    }
}

/// [`backend_api::Backend::quotient_values`], on validated arguments.
pub(crate) fn quotient_values(
    device: &Arc<Device>,
    max_points: usize,
    lde: &CudaBuffer,
    shape: MatrixShape,
    call: &QuotientCall<'_>,
    out: &mut CudaBuffer,
) -> Result<()> {
    device.bind()?;
    let launch = Launch::new(call, shape, device.sm_count, max_points);
    let q = call.domain.quotient_rows();
    let code = memory::upload(device, &launch.code)?;
    let constants = memory::upload(device, &launch.constants)?;
    let scratch = match launch.scratch_words {
        0 => None,
        words => Some(CudaBuffer::alloc(device, words)?),
    };

    // The quotient domain's rows column-major for a program whose reads are scattered, where the
    // device has the room.
    let [_, cols, stride, ..] = launch.args;
    let columns = if launch.columns { CudaBuffer::alloc(device, q * shape.cols()).ok() } else { None };
    if let Some(columns) = &columns {
        let kernel = device.kernel(Source::Transpose, "transpose_tile_strided", 0)?;
        let (src, dst, rows) = (lde.ptr(), columns.ptr(), q as u64);
        let tiles = q.div_ceil(32) * shape.cols().div_ceil(32);
        let grid = tiles.min(device.sm_count as usize * 16).max(1) as u32;
        let args = LaunchArgs::new().arg(&src).arg(&dst).arg(&rows).arg(&cols).arg(&stride);
        let config = LaunchConfig { grid: (grid, 1, 1), block: (32, 8, 1), shared: 0 };
        // SAFETY: (const u64*, u64*, u64, u64, u64) as transpose_tile_strided declares; it reads
        // rows r * stride < shape.rows() (r < q, stride = rows / q) of the LDE's cols columns and
        // writes the q x cols words of `columns`, a separate allocation.
        unsafe { device.launch(&kernel, config, args)? };
    }

    let kernel = device.kernel(Source::Quotient, launch.kernel, 0)?;
    let t = columns.as_ref().map_or(0, |b| b.ptr());
    let (l, c, v, a, z, s, o) = (
        lde.ptr(),
        code.ptr(),
        constants.ptr(),
        constants.ptr_at(launch.alpha_at),
        constants.ptr_at(launch.vanishing_at),
        scratch.as_ref().map_or(0, |s| s.ptr()),
        out.ptr(),
    );
    let mut args = LaunchArgs::new().arg(&l).arg(&t).arg(&c).arg(&v).arg(&a).arg(&z).arg(&s).arg(&o);
    for arg in &launch.args {
        args = args.arg(arg);
    }
    // SAFETY: (const u64*, const u64*, const uint4*, const u64*, const u64*, const u64*, u64*,
    // u64*, u64 x 9) as each quotient_values_d<D>_p<P> declares; `columns`, when not null, holds
    // q x cols words (the copy above, queued before on the same stream); the vanishing table holds
    // 2 x q / n words (Launch::new). The front validated the call: the LDE holds rows x cols words
    // with rows = stride x q, every column the program reads is below cols, every value index
    // below the values uploaded, every constraint's d powers inside the powers uploaded, every
    // register below `registers`, and the output holds q x d words, d the kernel's degree. The
    // register file holds `registers` words per point slot, `points` slots per thread (the
    // kernel's P): `shared_bytes` = BLOCK x registers x points words of dynamic shared memory, or
    // the scratch of grid x BLOCK x registers x points words (null when shared). The code is
    // program.len() uint4s, 16-byte aligned as every allocation is.
    unsafe {
        device.launch(&kernel, LaunchConfig::linear(launch.grid as u32, BLOCK, launch.shared_bytes as u32), args)?
    };
    Ok(())
}

#[cfg(test)]
mod tests {
    use backend_api::quotient::{ConstraintProgram, Instr};

    use super::scattered_reads;

    /// A program loading `cols` (the current row, or the next where `next`), each folded.
    fn loads(cols: &[(u32, bool)]) -> ConstraintProgram {
        let instrs: Vec<Instr> = cols
            .iter()
            .enumerate()
            .flat_map(|(j, &(col, next))| {
                [Instr::Column { dst: 0, col, next }, Instr::Fold { src: 0, constraint: j as u32 }]
            })
            .collect();
        ConstraintProgram::new(&instrs).unwrap()
    }

    #[test]
    fn reads_in_column_order_are_not_scattered_and_jumps_are() {
        // In order, interleaving the current and the next row: each row's loads stay near.
        let in_order: Vec<(u32, bool)> = (0..64).flat_map(|c| [(c, false), (c, true)]).collect();
        assert!(!scattered_reads(&loads(&in_order)));
        // Every load 100 columns from the previous one.
        let jumps: Vec<(u32, bool)> = (0..64).map(|k| ((k % 2) * 100 + k, false)).collect();
        assert!(scattered_reads(&loads(&jumps)));
        // The threshold: 3 of 5 loads near (60%) is not scattered, 2 of 5 is.
        let three_near = [(0, false), (1, false), (2, false), (3, false), (50, false)];
        assert!(!scattered_reads(&loads(&three_near)));
        let two_near = [(0, false), (1, false), (2, false), (50, false), (90, false)];
        assert!(scattered_reads(&loads(&two_near)));
        // No cell read at all.
        let none = ConstraintProgram::new(&[
            Instr::Selector { dst: 0, which: backend_api::Selector::FirstRow },
            Instr::Fold { src: 0, constraint: 0 },
        ])
        .unwrap();
        assert!(!scattered_reads(&none));
    }
}
