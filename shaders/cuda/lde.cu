// NTT passes of the coset LDE over a row-major matrix (CONVENTIONS.md, "Coset low-degree
// extension"); each column is an independent transform along the rows.
//
// The LDE of an n-row trace into an N = B*n row output O:
// 1. inverse NTT of size n by decimation in frequency (natural order in, bit-reversed out),
//    working on rows B*p of O (p < n);
// 2. position p then holds n * c[bitrev_n(p)]; it is multiplied by coset[bitrev_n(p)] = s^k / n
//    and written to rows B*p .. B*p + B-1 (the zero-extension in bit-reversed order followed by
//    the first log2(B) decimation-in-time stages, which only replicate);
// 3. forward NTT of size N by decimation in time from half-span B up (bit-reversed in, natural
//    out), in place on O.
//
// One launch is one pass of k consecutive radix-2 stages: a block loads a tile of 2^k positions
// x NTT_COLS columns into shared memory, runs the k stages there and writes it back. For stages
// with half-spans H_small .. H_small * 2^(k-1), the positions of one tile are
// hi * 2^k * H_small + i * H_small + lo (i < 2^k): tiles are independent, so a pass is in place.
// Consecutive threads handle consecutive columns, so every global access is a run of NTT_COLS
// elements of one row.
#include "common.cuh"

#define NTT_COLS 8

struct NttPass {
    const u64* src;     // tile input
    u64* dst;           // tile output
    const u64* tw;      // inv_twiddles (w_n^-k, k < n/2) or twiddles (w_N^k, k < N/2)
    const u64* coset;   // s^k / n (final inverse pass only)
    u64 src_stride;     // elements between consecutive positions of one column in src
    u64 dst_stride;     // same for dst
    u64 cols;           // matrix columns m
    u64 log_size;       // log2 of the transform size (n for the inverse, N for the forward)
    u64 log_h_small;    // log2 of the pass's smallest half-span
    u64 k;              // stages in this pass (0 allowed: the tile is one position)
    u64 canon_in;       // 1: canonicalise the loaded values (the trace may be non-canonical)
    u64 finish_inverse; // 1: multiply by coset[bitrev_n(p)] and write rows B*p + r, r < B
    u64 log_blowup;     // log2(B), for finish_inverse
};

// Position of local index i in tile (hi, lo).
__device__ __forceinline__ u64 tile_pos(u64 hi, u64 lo, u64 i, const NttPass& p) {
    return (((hi << p.k) + i) << p.log_h_small) + lo;
}

// Local pair (i0, i0 + 2^e) for pair index q at local stage e.
__device__ __forceinline__ u32 pair_lo(u32 q, u32 e) { return ((q >> e) << (e + 1)) | (q & ((1u << e) - 1)); }

template <bool DIT>
__device__ __forceinline__ void ntt_pass(const NttPass& p) {
    extern __shared__ u64 tile[];  // [2^k][NTT_COLS]
    const u32 T = 1u << p.k;
    const u64 h_small = 1ull << p.log_h_small;
    const u64 col_groups = (p.cols + NTT_COLS - 1) / NTT_COLS;
    const u64 tiles_per_group = (1ull << p.log_size) >> p.k;  // positions / T
    const u64 total = tiles_per_group * col_groups;
    for (u64 blk = blockIdx.x; blk < total; blk += gridDim.x) {
        const u64 g = blk % col_groups;  // neighbouring blocks share rows: better DRAM locality
        const u64 tile_id = blk / col_groups;
        const u64 lo = tile_id & (h_small - 1);
        const u64 hi = tile_id >> p.log_h_small;
        const u64 c0 = g * NTT_COLS;
        // Load.
        for (u32 e = threadIdx.x; e < T * NTT_COLS; e += blockDim.x) {
            const u32 i = e / NTT_COLS, c = e % NTT_COLS;
            const u64 col = c0 + c;
            u64 v = 0;
            if (col < p.cols) {
                v = p.src[tile_pos(hi, lo, i, p) * p.src_stride + col];
                if (p.canon_in) v = gl_canon(v);
            }
            tile[e] = v;
        }
        __syncthreads();
        // Stages: DIF from the largest half-span down, DIT from the smallest up.
        for (u32 s = 0; s < p.k; ++s) {
            const u32 e = DIT ? s : (u32)p.k - 1 - s;
            const u32 log_h = (u32)p.log_h_small + e;           // global half-span 2^log_h
            const u32 tw_shift = (u32)p.log_size - 1 - log_h;   // twiddle index = t << tw_shift
            for (u32 b = threadIdx.x; b < (T / 2) * NTT_COLS; b += blockDim.x) {
                const u32 q = b / NTT_COLS, c = b % NTT_COLS;
                const u32 i0 = pair_lo(q, e);
                const u32 i1 = i0 + (1u << e);
                const u64 t = ((u64)(i0 & ((1u << e) - 1)) << p.log_h_small) + lo;
                const u64 w = p.tw[t << tw_shift];
                u64* a = &tile[i0 * NTT_COLS + c];
                u64* bb = &tile[i1 * NTT_COLS + c];
                const u64 x = *a, y = *bb;
                if (DIT) {
                    const u64 yw = gl_mul(y, w);
                    *a = gl_add(x, yw);
                    *bb = gl_sub(x, yw);
                } else {
                    *a = gl_add(x, y);
                    *bb = gl_mul(gl_sub(x, y), w);
                }
            }
            __syncthreads();
        }
        // Store.
        const u32 log_n = (u32)p.log_size;
        for (u32 e = threadIdx.x; e < T * NTT_COLS; e += blockDim.x) {
            const u32 i = e / NTT_COLS, c = e % NTT_COLS;
            const u64 col = c0 + c;
            if (col >= p.cols) continue;
            const u64 pos = tile_pos(hi, lo, i, p);
            u64 v = tile[e];
            if (p.finish_inverse) {
                v = gl_mul(v, p.coset[bitrev32((u32)pos, log_n)]);
                const u64 B = 1ull << p.log_blowup;
                u64* d = p.dst + (pos << p.log_blowup) * p.cols + col;
                for (u64 r = 0; r < B; ++r) d[r * p.cols] = v;
            } else {
                p.dst[pos * p.dst_stride + col] = v;
            }
        }
        __syncthreads();
    }
}

extern "C" __global__ void __launch_bounds__(512) ntt_dif_pass(const NttPass p) { ntt_pass<false>(p); }
extern "C" __global__ void __launch_bounds__(512) ntt_dit_pass(const NttPass p) { ntt_pass<true>(p); }
