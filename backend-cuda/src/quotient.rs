//! The quotient (quotient.cu): [`backend_api::Backend::quotient_values`] as one launch of threads
//! in a grid-stride loop, interpreting the constraint program. The program, its values and the
//! challenge powers go up (two small uploads); the LDE is read where it lies.
//!
//! **The kernel's code.** The program is translated once per call into the kernel's own
//! instruction set ([`lower`]): leaves read where they lie, folds done by the instruction that
//! computes the constraint, one dispatch per arithmetic node of the AIR's DAG.
//!
//! **Points per thread.** One by default ([`crate::CudaOptions::quotient_points`]). At
//! [`POINTS`], where a block's register files for four points fit in 48 KiB of shared memory (the
//! most a launch gets without opting in), each thread fetches and dispatches an instruction once
//! for four points: that won on the program's own instructions (9.1 against 11.2 ms for the
//! Fibonacci AIR at 2^21 points on an H200) and lost on the kernel's code (12.9 against 8.7 ms on
//! an H100, same binaries, 2026-12-07). One kernel per extension degree and points per thread
//! ([`kernel_name`]), so each is allocated only the registers its own accumulators need.
//!
//! **The register file.** Each point holds `registers` values: in shared memory where a block's
//! fit; else the busiest registers there (the kernel code numbers them by traffic, most first) and
//! the rest in a global scratch of that many words per point of the grid, whose size bounds the
//! grid ([`SCRATCH_BYTES`]). Either way register `r` of one point slot of consecutive threads is
//! consecutive words. How many registers a program needs is the compiler's order: the Keccak-f
//! AIR's program in Plonky3's constraint order needed 260 (212 of them in global memory: 47.8
//! ms at 2^17 points on an H100, its quotient's bound), and 35 in the order plonky3-adapter's
//! compiler now takes, which fit in shared memory.
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

/// The kernel's own instruction set (quotient.cu's `K_*` and `SRC_*`), into which [`lower`]
/// translates a program.
pub(crate) mod kernel_code {
    /// `r[dst] =` column `a` of the current row (a column index too large for an operand).
    pub(crate) const COLUMN: u32 = 0;
    /// `r[dst] =` column `a` of the next row (likewise).
    pub(crate) const COLUMN_NEXT: u32 = 1;
    /// `r[dst] = values[a]` (likewise).
    pub(crate) const VALUE: u32 = 2;
    /// `r = a + b`.
    pub(crate) const ADD: u32 = 4;
    /// `r = a - b`.
    pub(crate) const SUB: u32 = 5;
    /// `r = a * b`.
    pub(crate) const MUL: u32 = 6;
    /// `r = -a`.
    pub(crate) const NEG: u32 = 7;
    /// `r = a`.
    pub(crate) const MOVE: u32 = 8;
    /// Added to an arithmetic opcode: `acc += alpha_powers[dst] * r` instead of `r[dst] = r`.
    pub(crate) const FOLDS: u32 = 0x10;
    /// An operand's source, in its top [`SOURCE_BITS`] bits: a register.
    pub(crate) const REGISTER: u32 = 0;
    /// A column of the current row.
    pub(crate) const CELL: u32 = 1;
    /// A column of the next row.
    pub(crate) const CELL_NEXT: u32 = 2;
    /// One of the call's values.
    pub(crate) const VALUE_SOURCE: u32 = 3;
    /// A selector (its code).
    pub(crate) const SELECTOR: u32 = 4;
    /// The bits of an operand word that name its source.
    pub(crate) const SOURCE_BITS: u32 = 3;
    /// The shift of an operand's source.
    pub(crate) const SOURCE_SHIFT: u32 = 32 - SOURCE_BITS;
    /// An operand's source at `source`, index `index` (below `1 << SOURCE_SHIFT`).
    pub(crate) const fn operand(source: u32, index: u32) -> u32 {
        (source << SOURCE_SHIFT) | index
    }
}

/// `program` in the kernel's instruction set: what the interpreter dispatches.
///
/// The interpreter's cost is per dispatched instruction (a fetch, a uniform branch and the
/// register file's loads and stores), and about half of a compiled AIR's instructions only load a
/// leaf (a cell, a value, a selector) into a register for the next instruction to read; a
/// quarter of the rest fold a constraint's root right after computing it. So the kernel's
/// arithmetic instructions take their operands from any source (a register, a cell of the current
/// or next row, a value, a selector: [`kernel_code::SOURCE_BITS`] bits of the operand word), and
/// an arithmetic instruction whose result only a fold reads folds it itself. Leaf loads are
/// dropped: every later read of the register, up to its next write, reads the leaf instead (a
/// cell's value is the same wherever it is read). The Fibonacci AIR's 3,332 instructions become
/// 1,153, the Keccak-f AIR's 62,180 become 32,605 (`lowered_programs_dispatch_only_arithmetic`
/// checks the count on a program of that form). A leaf index too large for an operand (2^29 and
/// up) keeps its load.
pub(crate) fn lower(program: &ConstraintProgram) -> Vec<[u32; 4]> {
    use backend_api::quotient::Instr;
    use kernel_code as k;
    let instrs: Vec<Instr> = program.instrs().collect();
    let registers = program.registers();
    // Whether the register a fold reads is read again before its next write.
    let mut read_after = vec![false; instrs.len()];
    let mut live = vec![false; registers];
    for (i, ins) in instrs.iter().enumerate().rev() {
        if let Instr::Fold { src, .. } = ins {
            read_after[i] = live[*src as usize];
        }
        if let Some(dst) = ins.dst() {
            live[dst as usize] = false;
        }
        for r in ins.reads() {
            live[r as usize] = true;
        }
    }
    let fits = |index: u32| index >> k::SOURCE_SHIFT == 0;
    // The leaf each register holds, as an operand word, while no later write replaced it.
    let mut leaf: Vec<Option<u32>> = vec![None; registers];
    let mut out = Vec::with_capacity(instrs.len());
    let mut i = 0;
    while i < instrs.len() {
        let ins = instrs[i];
        i += 1;
        let operand = |r: u32| leaf[r as usize].unwrap_or(k::operand(k::REGISTER, r));
        let (op, dst, a, b) = match ins {
            Instr::Column { dst, col, next } if fits(col) => {
                leaf[dst as usize] = Some(k::operand(if next { k::CELL_NEXT } else { k::CELL }, col));
                continue;
            }
            Instr::Value { dst, index } if fits(index) => {
                leaf[dst as usize] = Some(k::operand(k::VALUE_SOURCE, index));
                continue;
            }
            Instr::Selector { dst, which } => {
                leaf[dst as usize] = Some(k::operand(k::SELECTOR, which.code()));
                continue;
            }
            Instr::Column { dst, col, next } => (if next { k::COLUMN_NEXT } else { k::COLUMN }, dst, col, 0),
            Instr::Value { dst, index } => (k::VALUE, dst, index, 0),
            Instr::Add { dst, a, b } => (k::ADD, dst, operand(a), operand(b)),
            Instr::Sub { dst, a, b } => (k::SUB, dst, operand(a), operand(b)),
            Instr::Mul { dst, a, b } => (k::MUL, dst, operand(a), operand(b)),
            Instr::Neg { dst, a } => (k::NEG, dst, operand(a), 0),
            Instr::Fold { src, constraint } => {
                out.push([k::MOVE | k::FOLDS, constraint, operand(src), 0]);
                continue;
            }
        };
        // A result only the next instruction's fold reads is folded where it is computed.
        if let Some(&Instr::Fold { src, constraint }) = instrs.get(i)
            && op >= k::ADD
            && src == dst
            && !read_after[i]
        {
            out.push([op | k::FOLDS, constraint, a, b]);
            leaf[dst as usize] = None;
            i += 1;
            continue;
        }
        leaf[dst as usize] = None;
        out.push([op, dst, a, b]);
    }
    by_traffic(&mut out, registers);
    out
}

/// Renumbers the registers of kernel code `code` by how often it reads and writes each, most
/// first, so that the part of the register file kept in shared memory takes most of the traffic
/// ([`Launch::new`]). A renaming changes no value: each register's reads still see its writes.
fn by_traffic(code: &mut [[u32; 4]], registers: usize) {
    use kernel_code as k;
    // The register words of an instruction: its destination unless it folds, and its operands
    // that name a register (the leaf loads' operand is an index, not a register).
    fn registers_of(ins: &mut [u32; 4]) -> impl Iterator<Item = &mut u32> {
        let op = ins[0] & !k::FOLDS;
        let writes = ins[0] & k::FOLDS == 0;
        let operands = match op {
            k::ADD | k::SUB | k::MUL => 2,
            k::NEG | k::MOVE => 1,
            _ => 0,
        };
        let [_, dst, a, b] = ins;
        [(writes, dst), (operands >= 1, a), (operands >= 2, b)]
            .into_iter()
            .filter(|(used, w)| *used && **w >> k::SOURCE_SHIFT == k::REGISTER)
            .map(|(_, w)| w)
    }
    let mut traffic = vec![0u64; registers];
    for ins in code.iter_mut() {
        for r in registers_of(ins) {
            traffic[*r as usize] += 1;
        }
    }
    let mut order: Vec<u32> = (0..registers as u32).collect();
    order.sort_by_key(|&r| std::cmp::Reverse(traffic[r as usize]));
    let mut rename = vec![0u32; registers];
    for (new, &old) in order.iter().enumerate() {
        rename[old as usize] = new as u32;
    }
    for ins in code.iter_mut() {
        for r in registers_of(ins) {
            *r = rename[*r as usize];
        }
    }
}

/// What one call of [`quotient_values`] launches, computed on the host from the call alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Launch {
    /// The kernel ([`kernel_name`]).
    pub(crate) kernel: &'static str,
    /// Points per thread: 1 or [`POINTS`].
    pub(crate) points: usize,
    /// Blocks of [`BLOCK`] threads.
    pub(crate) grid: usize,
    /// Dynamic shared memory per block, in bytes: the shared part of the register file.
    pub(crate) shared_bytes: usize,
    /// The registers in shared memory (the first ones: [`by_traffic`] numbers the busiest first).
    pub(crate) shared_regs: usize,
    /// Words of the global part of the register file (the registers past `shared_regs`), else 0.
    pub(crate) scratch_words: usize,
    /// Whether the kernel reads a column-major copy of the quotient domain's rows
    /// ([`scattered_reads`]; the copy may still be skipped when its allocation fails).
    pub(crate) columns: bool,
    /// The kernel's code ([`lower`]), two words to a `u64` (little-endian, so the kernel reads an
    /// instruction as a `uint4`).
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
    /// trace domain's generator's inverse, the selector flags, the registers in shared memory.
    pub(crate) args: [u64; 10],
}

impl Launch {
    /// The launch of `call` over an LDE of `shape` on a device of `sm_count` multiprocessors, at
    /// most `max_points` points per thread.
    pub(crate) fn new(call: &QuotientCall<'_>, shape: MatrixShape, sm_count: u32, max_points: usize) -> Self {
        let (program, domain, d) = (call.program, call.domain, call.degree());
        let q = domain.quotient_rows();
        let registers = program.registers().max(1);
        let lowered = lower(program);
        let code: Vec<u64> = lowered
            .iter()
            .flat_map(|w| [u64::from(w[0]) | (u64::from(w[1]) << 32), u64::from(w[2]) | (u64::from(w[3]) << 32)])
            .collect();
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
        // where they fit, else one). Otherwise one point per thread (four measured slower with a
        // global file: above), the busiest registers in shared memory and the rest in a global
        // scratch whose size bounds the grid.
        let per_register = |points: usize| points * BLOCK as usize * 8;
        let points = if max_points == POINTS && registers * per_register(POINTS) <= SHARED_BYTES { POINTS } else { 1 };
        let shared_regs = registers.min(SHARED_BYTES / per_register(points));
        let global_regs = registers - shared_regs;
        let blocks = q.div_ceil(BLOCK as usize * points).min(sm_count as usize * BLOCKS_PER_SM).max(1);
        let grid = match global_regs {
            0 => blocks,
            g => blocks.min((SCRATCH_BYTES / (g * per_register(points))).max(1)),
        };
        let (shared_bytes, scratch_words) =
            (shared_regs * per_register(points), global_regs * points * grid * BLOCK as usize);
        let flags = u64::from(program.uses(Selector::FirstRow)) | (u64::from(program.uses(Selector::LastRow)) << 1);
        let args = [
            lowered.len() as u64,
            shape.cols() as u64,
            (shape.rows() / q) as u64,
            u64::from(domain.log_quotient_rows()),
            u64::from(domain.log_trace_rows()),
            domain.shift(),
            root_of_unity(domain.log_quotient_rows()),
            inverse(root_of_unity(domain.log_trace_rows())),
            flags,
            shared_regs as u64,
        ];
        Self {
            kernel: kernel_name(d, points),
            points,
            grid,
            shared_bytes,
            shared_regs,
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
    // u64*, u64 x 10) as each quotient_values_d<D>_p<P> declares; `columns`, when not null, holds
    // q x cols words (the copy above, queued before on the same stream); the vanishing table holds
    // 2 x q / n words (Launch::new). The front validated the call: the LDE holds rows x cols words
    // with rows = stride x q, every column the program reads is below cols, every value index
    // below the values uploaded, every constraint's d powers inside the powers uploaded, every
    // register below `registers`, and the output holds q x d words, d the kernel's degree. The
    // kernel code renames registers within 0..registers and indexes columns, values and
    // constraints as the program does (lower). The register file holds `registers` words per
    // point slot, `points` slots per thread (the kernel's P): the first shared_regs in
    // `shared_bytes` = BLOCK x shared_regs x points words of dynamic shared memory, the rest in the
    // scratch of grid x BLOCK x (registers - shared_regs) x points words (null when none). The
    // code is its length in uint4s, 16-byte aligned as every allocation is.
    unsafe {
        device.launch(&kernel, LaunchConfig::linear(launch.grid as u32, BLOCK, launch.shared_bytes as u32), args)?
    };
    Ok(())
}

#[cfg(test)]
mod tests {
    use backend_api::quotient::{ConstraintProgram, Instr};

    use super::kernel_code as k;
    use super::{lower, scattered_reads};

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

    #[test]
    fn lowered_programs_dispatch_only_arithmetic() {
        use backend_api::Selector;
        let (cell, next, value) =
            (|c| k::operand(k::CELL, c), |c| k::operand(k::CELL_NEXT, c), |v| k::operand(k::VALUE_SOURCE, v));
        // A transition constraint per column pair (next a - b, folded) and a boundary one (a - v):
        // the Fibonacci AIR's form. Each is one dispatch.
        let mut instrs = Vec::new();
        for j in 0..4u32 {
            instrs.extend([
                Instr::Column { dst: 0, col: 2 * j, next: true },
                Instr::Column { dst: 1, col: 2 * j + 1, next: false },
                Instr::Sub { dst: 2, a: 0, b: 1 },
                Instr::Fold { src: 2, constraint: j },
            ]);
        }
        instrs.extend([
            Instr::Column { dst: 0, col: 0, next: false },
            Instr::Value { dst: 1, index: 3 },
            Instr::Sub { dst: 0, a: 0, b: 1 },
            Instr::Selector { dst: 1, which: Selector::FirstRow },
            Instr::Mul { dst: 2, a: 0, b: 1 },
            Instr::Fold { src: 2, constraint: 4 },
        ]);
        let lowered = lower(&ConstraintProgram::new(&instrs).unwrap());
        let mut expected: Vec<[u32; 4]> =
            (0..4).map(|j| [k::SUB | k::FOLDS, j, next(2 * j), cell(2 * j + 1)]).collect();
        expected.extend([[k::SUB, 0, cell(0), value(3)], [k::MUL | k::FOLDS, 4, 0, k::operand(k::SELECTOR, 0)]]);
        assert_eq!(lowered, expected);

        // A root read again after its fold keeps its register; a leaf's register written by
        // arithmetic reads the register from then on; a fold of a leaf moves it.
        let instrs = [
            Instr::Column { dst: 0, col: 7, next: false },
            Instr::Neg { dst: 1, a: 0 },
            Instr::Fold { src: 1, constraint: 0 },
            Instr::Add { dst: 0, a: 1, b: 0 },
            Instr::Mul { dst: 2, a: 0, b: 0 },
            Instr::Fold { src: 2, constraint: 1 },
            Instr::Column { dst: 3, col: 9, next: true },
            Instr::Fold { src: 3, constraint: 2 },
            Instr::Fold { src: 0, constraint: 3 },
        ];
        assert_eq!(
            lower(&ConstraintProgram::new(&instrs).unwrap()),
            [
                [k::NEG, 1, cell(7), 0],
                [k::MOVE | k::FOLDS, 0, 1, 0],
                [k::ADD, 0, 1, cell(7)],
                [k::MUL | k::FOLDS, 1, 0, 0],
                [k::MOVE | k::FOLDS, 2, next(9), 0],
                [k::MOVE | k::FOLDS, 3, 0, 0],
            ]
        );

        // Registers are numbered by traffic, the busiest first.
        let instrs = [
            Instr::Column { dst: 5, col: 1, next: false },
            Instr::Mul { dst: 2, a: 5, b: 5 },
            Instr::Mul { dst: 2, a: 2, b: 2 },
            Instr::Mul { dst: 1, a: 2, b: 2 },
            Instr::Fold { src: 1, constraint: 0 },
        ];
        assert_eq!(
            lower(&ConstraintProgram::new(&instrs).unwrap()),
            [[k::MUL, 0, cell(1), cell(1)], [k::MUL, 0, 0, 0], [k::MUL | k::FOLDS, 0, 0, 0]]
        );

        // A leaf index too large for an operand is loaded into its register.
        let big = 1 << k::SOURCE_SHIFT;
        let instrs =
            [Instr::Value { dst: 0, index: big }, Instr::Neg { dst: 1, a: 0 }, Instr::Fold { src: 1, constraint: 0 }];
        assert_eq!(
            lower(&ConstraintProgram::new(&instrs).unwrap()),
            [[k::VALUE, 0, big, 0], [k::NEG | k::FOLDS, 0, 0, 0]]
        );
    }

    /// The launch of a program of `registers` registers over `2^log_q` points on 132
    /// multiprocessors.
    fn launch_of(registers: u32, max_points: usize, log_q: u32) -> super::Launch {
        use backend_api::MatrixShape;
        use backend_api::quotient::{QuotientCall, QuotientDomain};
        let mut instrs: Vec<Instr> =
            (0..registers).map(|r| Instr::Column { dst: r, col: r % 4, next: false }).collect();
        instrs.extend((1..registers).map(|r| Instr::Add { dst: 0, a: 0, b: r }));
        instrs.push(Instr::Fold { src: 0, constraint: 0 });
        let program = ConstraintProgram::new(&instrs).unwrap();
        let domain = QuotientDomain::new(log_q - 1, log_q, 7).unwrap();
        let call = QuotientCall { program: &program, domain, values: &[], alpha_powers: &[1, 2] };
        super::Launch::new(&call, MatrixShape::new(1 << log_q, 4).unwrap(), 132, max_points)
    }

    #[test]
    fn the_register_file_is_shared_where_it_fits_and_split_where_not() {
        // (registers, most points per thread) -> (points, registers in shared memory, grid)
        let cases = [
            ((2, 4), (4, 2, 512)),
            ((12, 4), (4, 12, 512)),
            ((13, 4), (1, 13, 2048)),
            ((5, 1), (1, 5, 2048)),
            ((48, 4), (1, 48, 2048)),
            // 212 registers in global memory: 256 MiB hold the files of 1,236 blocks.
            ((260, 4), (1, 48, 1236)),
        ];
        for ((registers, max_points), (points, shared_regs, grid)) in cases {
            let l = launch_of(registers, max_points, 18);
            let what = format!("{registers} registers, at most {max_points} points");
            assert_eq!((l.points, l.shared_regs, l.grid), (points, shared_regs, grid), "{what}");
            assert_eq!(l.shared_bytes, shared_regs * points * 128 * 8, "{what}");
            assert!(l.shared_bytes <= 48 << 10, "{what}");
            assert_eq!(l.scratch_words, (registers as usize - shared_regs) * points * grid * 128, "{what}");
            assert_eq!(l.args[9], shared_regs as u64, "{what}");
        }
    }
}
