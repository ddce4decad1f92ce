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

__device__ __forceinline__ u64 q_pow(u64 x, u64 e) {
    u64 acc = 1;
    while (e) {
        if (e & 1) acc = gl_mul(acc, x);
        x = gl_mul(x, x);
        e >>= 1;
    }
    return acc;
}

// x^-1 = x^(p - 2) for x != 0.
__device__ __forceinline__ u64 q_inv(u64 x) { return q_pow(x, GL_P - 2); }

extern "C" __global__ void __launch_bounds__(128)
    quotient_values(const u64* __restrict__ lde, const uint4* __restrict__ code, const u64* __restrict__ values,
                    const u64* __restrict__ alpha, u64* __restrict__ scratch, u64* __restrict__ out, u64 n_instr,
                    u64 cols, u64 stride, u64 log_q, u64 log_n, u64 shift, u64 v, u64 w_inv, u64 d, u64 flags) {
    extern __shared__ u64 smem[];
    const u64 q = 1ull << log_q;
    const u64 next = 1ull << (log_q - log_n);
    const u64 threads = (u64)gridDim.x * blockDim.x;
    const u64 tid = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    u64* const file = scratch ? scratch + tid : smem + threadIdx.x;
    const u64 fstride = scratch ? threads : blockDim.x;
    for (u64 i = tid; i < q; i += threads) {
        const u64 x = gl_mul(shift, q_pow(v, i));
        u64 xn = x;
        for (u64 k = 0; k < log_n; k++) xn = gl_mul(xn, xn);
        const u64 z_h = gl_sub(xn, 1);
        const u64 transition = gl_sub(x, w_inv);
        const u64 first = (flags & USES_FIRST_ROW) ? gl_mul(z_h, q_inv(gl_sub(x, 1))) : 0;
        const u64 last = (flags & USES_LAST_ROW) ? gl_mul(z_h, q_inv(transition)) : 0;
        const u64* row = lde + i * stride * cols;
        const u64* next_row = lde + ((i + next) & (q - 1)) * stride * cols;
        u64 acc[Q_MAX_DEGREE];
#pragma unroll
        for (u32 k = 0; k < Q_MAX_DEGREE; k++) acc[k] = 0;
        for (u64 pc = 0; pc < n_instr; pc++) {
            const uint4 ins = code[pc];
            u64 r;
            switch (ins.x) {
                case OP_COLUMN: r = gl_canon(row[ins.z]); break;
                case OP_COLUMN_NEXT: r = gl_canon(next_row[ins.z]); break;
                case OP_VALUE: r = values[ins.z]; break;
                case OP_SELECTOR: r = ins.z == 0 ? first : (ins.z == 1 ? last : transition); break;
                case OP_ADD: r = gl_add(file[ins.z * fstride], file[ins.w * fstride]); break;
                case OP_SUB: r = gl_sub(file[ins.z * fstride], file[ins.w * fstride]); break;
                case OP_MUL: r = gl_mul(file[ins.z * fstride], file[ins.w * fstride]); break;
                case OP_NEG: r = gl_sub(0, file[ins.z * fstride]); break;
                default: {  // OP_FOLD: acc += alpha[constraint] * r[src]
                    const u64 c = file[ins.z * fstride];
                    const u64* power = alpha + (u64)ins.w * d;
#pragma unroll
                    for (u32 k = 0; k < Q_MAX_DEGREE; k++)
                        if (k < d) acc[k] = gl_add(acc[k], gl_mul(power[k], c));
                    continue;
                }
            }
            file[ins.y * fstride] = r;
        }
        const u64 inv_z_h = q_inv(z_h);
#pragma unroll
        for (u32 k = 0; k < Q_MAX_DEGREE; k++)
            if (k < d) out[i * d + k] = gl_mul(acc[k], inv_z_h);
    }
}
