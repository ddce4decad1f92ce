// The opening products (CONVENTIONS.md, "Opening products"): dot products of a row-major
// matrix's rows with up to DOT_MAX coefficient vectors, and of its columns (over strided rows)
// with up to DOT_MAX weight vectors; and FRI's arity-2 fold (CONVENTIONS.md, "FRI folding").
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

// out[t] (t = j * cols + c) = the sum over chunks of partial[chunk][j][c]: one block per output,
// its threads taking every blockDim.x-th chunk, their (canonical) sums folded with shuffles, then
// across the block's warps. A thread per output would read every chunk one after the other: with
// two columns and a hundred thousand chunks that is one thread's dependent loads for
// milliseconds.
extern "C" __global__ void __launch_bounds__(256)
    column_dot_finish(const u64* __restrict__ partial, u64* __restrict__ out, u64 cols, u64 chunks, u64 k) {
    __shared__ u64 warp_sums[8];
    const u64 t = blockIdx.x;
    if (t >= k * cols) return;
    Acc acc{0, 0};
    for (u64 chunk = threadIdx.x; chunk < chunks; chunk += blockDim.x) acc_add(acc, partial[chunk * k * cols + t]);
    u64 s = gl_reduce128(acc.lo, acc.hi);
#pragma unroll
    for (u32 o = 16; o > 0; o >>= 1) s = gl_add(s, __shfl_down_sync(0xFFFFFFFFu, s, o));
    if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        u64 total = 0;
        for (u32 w = 0; w < (blockDim.x + 31) / 32; w++) total = gl_add(total, warp_sums[w]);
        out[t] = total;
    }
}

#define FOLD_MAX_DEGREE 8

// One thread per folded element i < n: a = in[2i], b = in[2i + 1] (d words each),
// out[i] = (a + b) / 2 + beta (a - b) w^-br(i) / 2 [+ gamma addend[i]], the challenges d x d
// row-major matrices, br the reversal of log_n bits. Inputs are read mod p (gl_canon before the
// additions, gl_mul reduces any words); every output word is canonical.
extern "C" __global__ void __launch_bounds__(256)
    fri_fold(const u64* __restrict__ in, const u64* __restrict__ beta, const u64* __restrict__ addend,
             const u64* __restrict__ gamma, u64* __restrict__ out, u64 n, u64 d, u64 log_n, u64 w_inv, u64 half) {
    const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const u32 br = log_n == 0 ? 0 : __brev((u32)i) >> (32 - (u32)log_n);
    const u64 factor = gl_mul(gl_pow(w_inv, br), half);
    const u64* a = in + 2 * i * d;
    const u64* b = a + d;
    u64 odd[FOLD_MAX_DEGREE];
    u64 sum[FOLD_MAX_DEGREE];
#pragma unroll
    for (u32 c = 0; c < FOLD_MAX_DEGREE; c++) {
        if (c < d) {
            const u64 x = gl_canon(a[c]), y = gl_canon(b[c]);
            odd[c] = gl_mul(gl_sub(x, y), factor);
            sum[c] = gl_mul(gl_add(x, y), half);
        }
    }
#pragma unroll
    for (u32 r = 0; r < FOLD_MAX_DEGREE; r++) {
        if (r < d) {
            Acc acc{0, 0};
            for (u32 c = 0; c < d; c++) acc_add(acc, gl_mul(beta[r * d + c], odd[c]));
            if (addend)
                for (u32 c = 0; c < d; c++) acc_add(acc, gl_mul(gamma[r * d + c], addend[i * d + c]));
            out[i * d + r] = gl_add(sum[r], gl_reduce128(acc.lo, acc.hi));
        }
    }
}
