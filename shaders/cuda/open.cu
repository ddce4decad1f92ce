// The opening products (CONVENTIONS.md, "Opening products"): dot products of a row-major
// matrix's rows with up to DOT_MAX coefficient vectors, and of its columns (over strided rows)
// with up to DOT_MAX weight vectors; FRI's arity-2 fold (CONVENTIONS.md, "FRI folding"); and its
// input, the reduced openings (CONVENTIONS.md, "Reduced openings").
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

// The reduced openings of rows x cols row-major m, degree D: a warp takes 32 consecutive rows at a
// time. For each, its lanes read the row's columns (coalesced) and keep D sums, folded with
// shuffles so that every lane holds the row's combination v, and lane r keeps row r's. Then each
// lane finishes its own row j at x = shift w^j (x advances by w_stride = w^(32 warps) a group):
// per point, u = y - S v, chi(x) and adj(x I - Z)(x) u by Horner's rule, and the term
// -adj(x I - Z)(x) u / chi(x). A point is 2D + D^2 + D^3 words: y, S, chi's D low coefficients
// (constant first), the adjugate's D matrices B_k (adj(x I - Z) = sum_k x^k B_k). The host
// refused points where chi vanishes on the coset.
template <int D>
__device__ __forceinline__ void reduce_rows(const u64* __restrict__ m, const u64* __restrict__ coeffs,
                                            const u64* __restrict__ points, u64* __restrict__ acc, u64 rows,
                                            u64 cols, u64 n_points, u64 shift, u64 w, u64 w_stride,
                                            bool accumulate) {
    constexpr u64 STRIDE = 2 * D + D * D + D * D * D;
    const u32 lane = threadIdx.x & 31;
    const u64 warp = ((u64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const u64 warps = ((u64)gridDim.x * blockDim.x) >> 5;
    u64 x = gl_mul(shift, gl_pow(w, warp * 32 + lane));
    for (u64 base = warp * 32; base < rows; base += warps * 32, x = gl_mul(x, w_stride)) {
        const u64 count = min((u64)32, rows - base);
        u64 v[D];
#pragma unroll
        for (int k = 0; k < D; k++) v[k] = 0;
        for (u32 r = 0; r < count; r++) {
            const u64* row = m + (base + r) * cols;
            Acc a[D];
#pragma unroll
            for (int k = 0; k < D; k++) a[k] = Acc{0, 0};
            for (u64 c = lane; c < cols; c += 32) {
                const u64 e = row[c];
#pragma unroll
                for (int k = 0; k < D; k++) acc_add(a[k], gl_mul(e, coeffs[(u64)k * cols + c]));
            }
#pragma unroll
            for (int k = 0; k < D; k++) {
                u64 s = gl_reduce128(a[k].lo, a[k].hi);
#pragma unroll
                for (u32 o = 16; o > 0; o >>= 1) s = gl_add(s, __shfl_xor_sync(0xFFFFFFFFu, s, o));
                if (lane == r) v[k] = s;
            }
        }
        if (lane < count) {
            const u64 j = base + lane;
            u64 sum[D];
#pragma unroll
            for (int t = 0; t < D; t++) sum[t] = accumulate ? gl_canon(acc[j * D + t]) : 0;
            for (u64 p = 0; p < n_points; p++) {
                const u64* y = points + p * STRIDE;
                const u64* S = y + D;
                const u64* chi_c = S + D * D;
                const u64* B = chi_c + D;
                u64 u[D];
#pragma unroll
                for (int r = 0; r < D; r++) {
                    Acc s{0, 0};
#pragma unroll
                    for (int c = 0; c < D; c++) acc_add(s, gl_mul(S[r * D + c], v[c]));
                    u[r] = gl_sub(y[r], gl_reduce128(s.lo, s.hi));
                }
                u64 chi = 1;
#pragma unroll
                for (int k = D - 1; k >= 0; k--) chi = gl_add(gl_mul(chi, x), chi_c[k]);
                const u64 factor = gl_sub(0, gl_inv(chi));
                u64 t[D];
#pragma unroll
                for (int r = 0; r < D; r++) t[r] = 0;
#pragma unroll
                for (int k = D - 1; k >= 0; k--) {
#pragma unroll
                    for (int r = 0; r < D; r++) {
                        Acc s{0, 0};
#pragma unroll
                        for (int c = 0; c < D; c++) acc_add(s, gl_mul(B[(k * D + r) * D + c], u[c]));
                        t[r] = gl_add(gl_mul(t[r], x), gl_reduce128(s.lo, s.hi));
                    }
                }
#pragma unroll
                for (int r = 0; r < D; r++) sum[r] = gl_add(sum[r], gl_mul(factor, t[r]));
            }
#pragma unroll
            for (int t = 0; t < D; t++) acc[j * D + t] = sum[t];
        }
    }
}

extern "C" __global__ void __launch_bounds__(256)
    reduce_openings(const u64* __restrict__ m, const u64* __restrict__ coeffs, const u64* __restrict__ points,
                    u64* __restrict__ acc, u64 rows, u64 cols, u64 d, u64 n_points, u64 shift, u64 w, u64 w_stride,
                    u64 accumulate) {
#define REDUCE(D) reduce_rows<D>(m, coeffs, points, acc, rows, cols, n_points, shift, w, w_stride, accumulate != 0)
    switch (d) {
        case 1: REDUCE(1); break;
        case 2: REDUCE(2); break;
        case 3: REDUCE(3); break;
        case 4: REDUCE(4); break;
        case 5: REDUCE(5); break;
        case 6: REDUCE(6); break;
        case 7: REDUCE(7); break;
        default: REDUCE(8); break;
    }
#undef REDUCE
}
