// The quotient of a constraint program (CONVENTIONS.md, "Quotient values"): one thread per point
// of the quotient domain's coset, in a grid-stride loop, interpreting the program translated into
// the kernel's instruction set below (4 words each: opcode, dst, a, b). Every thread runs the same instruction at the same time, so
// the dispatch branch is uniform across a warp and the instruction is one broadcast load.
//
// The register file is `registers` values per thread: the first `shared_regs` in dynamic shared
// memory (register r of a thread at `sfile + r * blockDim.x`), the rest, where the block's do not
// all fit there, in a global scratch (register r at `gfile + (r - shared_regs) * gstride`, gstride
// the grid's threads), either way laid out so a warp's accesses to one register are consecutive
// words. The host numbers the registers by how often the program touches them, so the shared part
// takes most of the traffic. Registers hold canonical values; the LDE's words are canonicalised
// as they are read, the values and the challenge powers by the host.
//
// The cells: where the host made `columns`, a column-major copy of the quotient domain's rows
// (column c of point i at columns[c * q + i], transpose_tile_strided), a warp's loads of one
// column are consecutive words; else they are read from the row-major LDE, one 32-byte sector per
// thread for 8 useful bytes.
//
// x^n - 1 takes only q / n values on the coset (x^n = shift^n (v^n)^i, v^n of order q / n): the
// host gives them and their inverses as a table, so a point pays one inversion per selector it
// reads. (Folding into 192-bit sums reduced once per point, instead of a reduced product and a
// modular add per term, measured slower on an H100: 16.7 against 12.9 ms for the 2^21 points of a
// 256-column Fibonacci quotient.)
#include "common.cuh"

#define Q_MAX_DEGREE 8
// Points per thread where the register file has room for them (else 1); the kernels below are
// instantiated for 1 and 4.
#define Q_POINTS 4

// The kernel's instruction set (backend-cuda's quotient::lower translates a program into it):
// [op, dst, a, b]. Arithmetic reads its operands a and b from any source, named by an operand's
// top three bits (the rest is the index): a register, a cell of the current or next row, a value
// or a selector, so a leaf is never loaded into a register first. With K_FOLDS added to an
// arithmetic opcode, the result is folded as constraint `dst` instead of written to r[dst].
// K_COLUMN, K_COLUMN_NEXT and K_VALUE load a leaf whose index does not fit in an operand.
#define K_COLUMN 0u
#define K_COLUMN_NEXT 1u
#define K_VALUE 2u
#define K_ADD 4u
#define K_SUB 5u
#define K_MUL 6u
#define K_NEG 7u
#define K_MOVE 8u
#define K_FOLDS 0x10u
#define K_OP_MASK 0xfu

#define SRC_SHIFT 29
#define SRC_INDEX_MASK ((1u << SRC_SHIFT) - 1u)
#define SRC_REGISTER 0u
#define SRC_CELL 1u
#define SRC_CELL_NEXT 2u
#define SRC_VALUE 3u
#define SRC_SELECTOR 4u

// Which selectors the program reads (the host's flags): the divisions are paid only for those.
#define USES_FIRST_ROW 1ull
#define USES_LAST_ROW 2ull

// The interpreter for an extension of degree D, P points per thread: each instruction is fetched
// and dispatched once for P points (i, i + threads, ..., the grid's threads apart, so a warp's
// accesses to one point slot stay consecutive), which amortises the dispatch and gives each
// thread P independent chains to hide latency with. A thread's register r for slot p is at
// sfile[(r * P + p) * blockDim.x] (r < shared_regs) or gfile[((r - shared_regs) * P + p) * gstride].
// The accumulators are P * D registers, so the kernel is instantiated
// per degree rather than sized for the largest.
template <int D, int P>
__device__ __forceinline__ void quotient_points(const u64* __restrict__ lde, const u64* __restrict__ columns,
                                                const uint4* __restrict__ code,
                                                const u64* __restrict__ values, const u64* __restrict__ alpha,
                                                const u64* __restrict__ vanishing, u64* const sfile, u64* const gfile,
                                                const u64 gstride, const u64 shared_regs,
                                                u64* __restrict__ out, u64 n_instr, u64 cols, u64 stride, u64 log_q,
                                                u64 log_n, u64 shift, u64 v, u64 w_inv, u64 flags) {
    const u64 q = 1ull << log_q;
    const u64 next = 1ull << (log_q - log_n);
    const u64 threads = (u64)gridDim.x * blockDim.x;
    for (u64 base = (u64)blockIdx.x * blockDim.x + threadIdx.x; base < q; base += threads * P) {
        // Slot p evaluates point base + p * threads; past the domain it repeats `base` and stores
        // nothing.
        u64 pt[P], period[P], first[P], last[P], transition[P];
        const u64* row[P];
        const u64* next_row[P];
        u64 pt_next[P];
#pragma unroll
        for (int p = 0; p < P; p++) {
            const u64 i = base + p * threads < q ? base + p * threads : base;
            const u64 i_next = (i + next) & (q - 1);
            pt[p] = i;
            pt_next[p] = i_next;
            row[p] = lde + i * stride * cols;
            next_row[p] = lde + i_next * stride * cols;
            const u64 x = gl_mul(shift, gl_pow(v, i));
            // vanishing[2j], vanishing[2j + 1]: x^n - 1 and its inverse at points i = j mod (q / n).
            period[p] = i & ((q >> log_n) - 1);
            const u64 z_h = vanishing[2 * period[p]];
            transition[p] = gl_sub(x, w_inv);
            first[p] = (flags & USES_FIRST_ROW) ? gl_mul(z_h, gl_inv(gl_sub(x, 1))) : 0;
            last[p] = (flags & USES_LAST_ROW) ? gl_mul(z_h, gl_inv(transition[p])) : 0;
        }
        u64 acc[P][D];
#pragma unroll
        for (int p = 0; p < P; p++)
#pragma unroll
            for (int k = 0; k < D; k++) acc[p][k] = 0;
#define Q_REG(reg, slot)                                                                 \
    (*((u64)(reg) < shared_regs ? &sfile[((u64)(reg) * P + (slot)) * blockDim.x]     \
                                : &gfile[(((u64)(reg) - shared_regs) * P + (slot)) * gstride]))
        // An operand of slot p: the source is uniform across the warp, so the branch is too.
        auto operand = [&](const u32 w, const int p) -> u64 {
            const u32 i = w & SRC_INDEX_MASK;
            switch (w >> SRC_SHIFT) {
                case SRC_REGISTER: return Q_REG(i, p);
                case SRC_CELL: return gl_canon(columns ? columns[(u64)i * q + pt[p]] : row[p][i]);
                case SRC_CELL_NEXT: return gl_canon(columns ? columns[(u64)i * q + pt_next[p]] : next_row[p][i]);
                case SRC_VALUE: return values[i];
                default: return i == 0 ? first[p] : (i == 1 ? last[p] : transition[p]);
            }
        };
#define Q_SLOTS(expr)                                     \
    _Pragma("unroll") for (int p = 0; p < P; p++) r[p] = (expr); \
    break
        for (u64 pc = 0; pc < n_instr; pc++) {
            const uint4 ins = code[pc];
            u64 r[P];
            switch (ins.x & K_OP_MASK) {
                case K_COLUMN: Q_SLOTS(gl_canon(columns ? columns[(u64)ins.z * q + pt[p]] : row[p][ins.z]));
                case K_COLUMN_NEXT:
                    Q_SLOTS(gl_canon(columns ? columns[(u64)ins.z * q + pt_next[p]] : next_row[p][ins.z]));
                case K_VALUE: Q_SLOTS(values[ins.z]);
                case K_ADD: Q_SLOTS(gl_add(operand(ins.z, p), operand(ins.w, p)));
                case K_SUB: Q_SLOTS(gl_sub(operand(ins.z, p), operand(ins.w, p)));
                case K_MUL: Q_SLOTS(gl_mul(operand(ins.z, p), operand(ins.w, p)));
                case K_NEG: Q_SLOTS(gl_sub(0, operand(ins.z, p)));
                default: Q_SLOTS(operand(ins.z, p));  // K_MOVE
            }
            if (ins.x & K_FOLDS) {  // acc += alpha[constraint] * r
                const u64* power = alpha + (u64)ins.y * D;
                u64 pw[D];
#pragma unroll
                for (int k = 0; k < D; k++) pw[k] = power[k];
#pragma unroll
                for (int p = 0; p < P; p++)
#pragma unroll
                    for (int k = 0; k < D; k++) acc[p][k] = gl_add(acc[p][k], gl_mul(pw[k], r[p]));
            } else {
#pragma unroll
                for (int p = 0; p < P; p++) Q_REG(ins.y, p) = r[p];
            }
        }
#undef Q_SLOTS
#undef Q_REG
#pragma unroll
        for (int p = 0; p < P; p++) {
            if (base + p * threads >= q) break;
            const u64 inv_z_h = vanishing[2 * period[p] + 1];
#pragma unroll
            for (int k = 0; k < D; k++) out[pt[p] * D + k] = gl_mul(acc[p][k], inv_z_h);
        }
    }
}

// One kernel per degree and points per thread, `quotient_values_d<D>_p<P>` (D 1 to Q_MAX_DEGREE,
// P 1 or Q_POINTS): each is allocated the registers its own accumulators need, where one kernel
// switching over them all would take the largest's (168 registers against about 60).
#define Q_KERNEL(D, P)                                                                                              \
    extern "C" __global__ void __launch_bounds__(128) quotient_values_d##D##_p##P(                                  \
        const u64* __restrict__ lde, const u64* __restrict__ columns, const uint4* __restrict__ code,              \
        const u64* __restrict__ values, const u64* __restrict__ alpha, const u64* __restrict__ vanishing,          \
        u64* __restrict__ scratch, u64* __restrict__ out, u64 n_instr, u64 cols, u64 stride, u64 log_q, u64 log_n, \
        u64 shift, u64 v, u64 w_inv, u64 flags, u64 shared_regs) {                                                  \
        extern __shared__ u64 smem[];                                                                               \
        const u64 tid = (u64)blockIdx.x * blockDim.x + threadIdx.x;                                                 \
        u64* const gfile = scratch ? scratch + tid : nullptr;                                                       \
        quotient_points<D, P>(lde, columns, code, values, alpha, vanishing, smem + threadIdx.x, gfile,              \
                              (u64)gridDim.x * blockDim.x, shared_regs, out, n_instr, cols, stride, log_q, log_n,   \
                              shift, v, w_inv, flags);                                                              \
    }
#define Q_KERNELS(D) Q_KERNEL(D, 1) Q_KERNEL(D, 4)
Q_KERNELS(1)
Q_KERNELS(2)
Q_KERNELS(3)
Q_KERNELS(4)
Q_KERNELS(5)
Q_KERNELS(6)
Q_KERNELS(7)
Q_KERNELS(8)
#undef Q_KERNELS
#undef Q_KERNEL
