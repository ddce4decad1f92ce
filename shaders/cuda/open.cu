// The opening products (CONVENTIONS.md, "Opening products"): dot products of a row-major
// matrix's rows with up to DOT_MAX coefficient vectors, and of its columns (over strided rows)
// with up to DOT_MAX weight vectors.
//
// Every term is a canonical product (gl_mul reduces any two u64); terms are summed in 128 bits
// (a low word and a count of carries: at most 2^64 terms, so the count never wraps) and reduced
// once. Sums of partial results are canonical, so they combine with gl_add.
#include "common.cuh"

#define DOT_MAX 8

// A 128-bit sum of canonical terms.
struct Acc {
    u64 lo, hi;
};
__device__ __forceinline__ void acc_add(Acc& a, u64 t) {
    a.lo += t;
    a.hi += a.lo < t;
}

// One warp per row: the lanes read the row's columns in coalesced strides, each keeping k sums,
// then the warp folds its lanes' (canonical) sums with shuffles. out is rows x k, row-major.
extern "C" __global__ void __launch_bounds__(256)
    row_dot_products(const u64* __restrict__ m, const u64* __restrict__ coeffs, u64* __restrict__ out, u64 rows,
                     u64 cols, u64 k) {
    const u32 lane = threadIdx.x & 31;
    const u64 warps = ((u64)gridDim.x * blockDim.x) >> 5;
    for (u64 r = ((u64)blockIdx.x * blockDim.x + threadIdx.x) >> 5; r < rows; r += warps) {
        const u64* row = m + r * cols;
        Acc acc[DOT_MAX];
#pragma unroll
        for (u32 j = 0; j < DOT_MAX; j++) acc[j] = Acc{0, 0};
        for (u64 c = lane; c < cols; c += 32) {
            const u64 x = row[c];
#pragma unroll
            for (u32 j = 0; j < DOT_MAX; j++)
                if (j < k) acc_add(acc[j], gl_mul(x, coeffs[(u64)j * cols + c]));
        }
#pragma unroll
        for (u32 j = 0; j < DOT_MAX; j++) {
            if (j < k) {
                u64 s = gl_reduce128(acc[j].lo, acc[j].hi);
#pragma unroll
                for (u32 o = 16; o > 0; o >>= 1) s = gl_add(s, __shfl_down_sync(0xFFFFFFFFu, s, o));
                if (lane == 0) out[r * k + j] = s;
            }
        }
    }
}

// Partial column sums: thread t covers column t % cols and the rows i = t / cols, + chunks,
// + 2 chunks, ... of the selection (so adjacent threads read adjacent columns of one row).
// partial is chunks x k x cols.
extern "C" __global__ void __launch_bounds__(256)
    column_dot_partial(const u64* __restrict__ m, const u64* __restrict__ weights, u64* __restrict__ partial,
                       u64 cols, u64 first, u64 step, u64 count, u64 chunks, u64 k) {
    const u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= chunks * cols) return;
    const u64 c = t % cols, chunk = t / cols;
    Acc acc[DOT_MAX];
#pragma unroll
    for (u32 j = 0; j < DOT_MAX; j++) acc[j] = Acc{0, 0};
    for (u64 i = chunk; i < count; i += chunks) {
        const u64 x = m[(first + i * step) * cols + c];
#pragma unroll
        for (u32 j = 0; j < DOT_MAX; j++)
            if (j < k) acc_add(acc[j], gl_mul(x, weights[(u64)j * count + i]));
    }
#pragma unroll
    for (u32 j = 0; j < DOT_MAX; j++)
        if (j < k) partial[(chunk * k + j) * cols + c] = gl_reduce128(acc[j].lo, acc[j].hi);
}

// out[j * cols + c] = the sum over chunks of partial[chunk][j][c].
extern "C" __global__ void __launch_bounds__(256)
    column_dot_finish(const u64* __restrict__ partial, u64* __restrict__ out, u64 cols, u64 chunks, u64 k) {
    const u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= k * cols) return;
    Acc acc{0, 0};
    for (u64 chunk = 0; chunk < chunks; chunk++) acc_add(acc, partial[chunk * k * cols + t]);
    out[t] = gl_reduce128(acc.lo, acc.hi);
}
