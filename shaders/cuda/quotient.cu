// The quotient of a constraint program (CONVENTIONS.md, "Quotient values"): one thread per point
// of the quotient domain's coset, in a grid-stride loop, interpreting the program's instructions
// (4 words each: opcode, dst, a, b). Every thread runs the same instruction at the same time, so
// the dispatch branch is uniform across a warp and the instruction is one broadcast load.
//
// The register file is `registers` values per thread, register r of a thread at `file + r *
// fstride`: in dynamic shared memory (fstride = blockDim.x) when the host finds it fits, else in
// a global scratch (fstride = the grid's threads), either way laid out so a warp's accesses to one
// register are consecutive words. Registers hold canonical values; the LDE's words are
// canonicalised as they are read, the values and the challenge powers by the host.
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

#define OP_COLUMN 0u
#define OP_COLUMN_NEXT 1u
#define OP_VALUE 2u
#define OP_SELECTOR 3u
#define OP_ADD 4u
#define OP_SUB 5u
#define OP_MUL 6u
#define OP_NEG 7u
#define OP_FOLD 8u

// Which selectors the program reads (the host's flags): the divisions are paid only for those.
#define USES_FIRST_ROW 1ull
#define USES_LAST_ROW 2ull

// The interpreter for an extension of degree D: the accumulators are D registers, so the kernel is
// instantiated per degree rather than sized for the largest.
template <int D>
__device__ __forceinline__ void quotient_points(const u64* __restrict__ lde, const u64* __restrict__ columns,
                                                const uint4* __restrict__ code,
                                                const u64* __restrict__ values, const u64* __restrict__ alpha,
                                                const u64* __restrict__ vanishing, u64* const file, const u64 fstride,
                                                u64* __restrict__ out, u64 n_instr, u64 cols, u64 stride, u64 log_q,
                                                u64 log_n, u64 shift, u64 v, u64 w_inv, u64 flags) {
    const u64 q = 1ull << log_q;
    const u64 next = 1ull << (log_q - log_n);
    const u64 threads = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < q; i += threads) {
        const u64 x = gl_mul(shift, gl_pow(v, i));
        // vanishing[2j], vanishing[2j + 1]: x^n - 1 and its inverse at points i = j mod (q / n).
        const u64 period = i & ((q >> log_n) - 1);
        const u64 z_h = vanishing[2 * period];
        const u64 transition = gl_sub(x, w_inv);
        const u64 first = (flags & USES_FIRST_ROW) ? gl_mul(z_h, gl_inv(gl_sub(x, 1))) : 0;
        const u64 last = (flags & USES_LAST_ROW) ? gl_mul(z_h, gl_inv(transition)) : 0;
        const u64 i_next = (i + next) & (q - 1);
        const u64* row = lde + i * stride * cols;
        const u64* next_row = lde + i_next * stride * cols;
        u64 acc[D];
#pragma unroll
        for (int k = 0; k < D; k++) acc[k] = 0;
        for (u64 pc = 0; pc < n_instr; pc++) {
            const uint4 ins = code[pc];
            u64 r;
            switch (ins.x) {
                case OP_COLUMN: r = gl_canon(columns ? columns[(u64)ins.z * q + i] : row[ins.z]); break;
                case OP_COLUMN_NEXT: r = gl_canon(columns ? columns[(u64)ins.z * q + i_next] : next_row[ins.z]); break;
                case OP_VALUE: r = values[ins.z]; break;
                case OP_SELECTOR: r = ins.z == 0 ? first : (ins.z == 1 ? last : transition); break;
                case OP_ADD: r = gl_add(file[ins.z * fstride], file[ins.w * fstride]); break;
                case OP_SUB: r = gl_sub(file[ins.z * fstride], file[ins.w * fstride]); break;
                case OP_MUL: r = gl_mul(file[ins.z * fstride], file[ins.w * fstride]); break;
                case OP_NEG: r = gl_sub(0, file[ins.z * fstride]); break;
                default: {  // OP_FOLD: acc += alpha[constraint] * r[src]
                    const u64 c = file[ins.z * fstride];
                    const u64* power = alpha + (u64)ins.w * D;
#pragma unroll
                    for (int k = 0; k < D; k++) acc[k] = gl_add(acc[k], gl_mul(power[k], c));
                    continue;
                }
            }
            file[ins.y * fstride] = r;
        }
        const u64 inv_z_h = vanishing[2 * period + 1];
#pragma unroll
        for (int k = 0; k < D; k++) out[i * D + k] = gl_mul(acc[k], inv_z_h);
    }
}

extern "C" __global__ void __launch_bounds__(128)
    quotient_values(const u64* __restrict__ lde, const u64* __restrict__ columns, const uint4* __restrict__ code,
                    const u64* __restrict__ values,
                    const u64* __restrict__ alpha, const u64* __restrict__ vanishing, u64* __restrict__ scratch,
                    u64* __restrict__ out, u64 n_instr, u64 cols, u64 stride, u64 log_q, u64 log_n, u64 shift, u64 v,
                    u64 w_inv, u64 d, u64 flags) {
    extern __shared__ u64 smem[];
    const u64 tid = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    u64* const file = scratch ? scratch + tid : smem + threadIdx.x;
    const u64 fstride = scratch ? (u64)gridDim.x * blockDim.x : blockDim.x;
#define Q_RUN(D)                                                                                                 \
    quotient_points<D>(lde, columns, code, values, alpha, vanishing, file, fstride, out, n_instr, cols, stride, log_q, \
                       log_n, shift, v, w_inv, flags)
    switch (d) {
        case 1: Q_RUN(1); break;
        case 2: Q_RUN(2); break;
        case 3: Q_RUN(3); break;
        case 4: Q_RUN(4); break;
        case 5: Q_RUN(5); break;
        case 6: Q_RUN(6); break;
        case 7: Q_RUN(7); break;
        default: Q_RUN(Q_MAX_DEGREE); break;
    }
#undef Q_RUN
}
