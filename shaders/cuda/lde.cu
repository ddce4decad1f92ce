// NTT passes of the coset LDE over a row-major matrix (CONVENTIONS.md, "Coset low-degree
// extension"); each column is an independent transform along the rows.
//
// The LDE of an n-row trace into an N = B*n row buffer O (lde.rs plans the launches; in place, the
// trace sits in rows [0, n) of O on entry; from a trace buffer, the first inverse pass reads it):
// 1. inverse NTT of size n by decimation in frequency (natural order in, bit-reversed out), on
//    rows p < n of O;
// 2. position p then holds n * c[bitrev_n(p)]; the last inverse pass multiplies it by
//    coset[bitrev_n(p)] = s^k / n and writes it to row B*p, which stands for rows B*p .. B*p + B-1
//    (the zero-extension in bit-reversed order followed by the first log2(B) decimation-in-time
//    stages, which only replicate). In place, that pass runs as several launches over ranges of
//    tiles, the highest rows first, so that no launch stores a row that a tile of the same or a
//    later launch still loads (lde.rs says why). With `replicate_out` (shared-memory kernel only:
//    lde.rs sets it only when some pass is one, and then the last inverse pass, the shortest, is
//    one) the B - 1 replicas are written too; otherwise the first forward pass reads row B*p for
//    all B rows (one register-kernel block computes the B tiles that share it, the one that
//    overwrites it last);
// 3. forward NTT of size N by decimation in time from half-span B up (bit-reversed in, natural
//    out), in place on O.
//
// One launch is one pass of k consecutive radix-2 stages (or, for the last inverse pass in place,
// a range of its tiles): a block loads a tile of 2^k positions x NTT_COLS columns into shared
// memory, runs the k stages there and writes it back. For stages
// with half-spans H_small .. H_small * 2^(k-1), the positions of one tile are
// hi * 2^k * H_small + i * H_small + lo (i < 2^k): tiles are independent, so a pass is in place.
// Consecutive threads handle consecutive columns, so every global access is a run of NTT_COLS
// elements of one row.
//
// Column ranges: a launch may cover columns [c0, c0 + cols) of a wider matrix (the upload overlap
// of lde.rs extends column groups one after another): src and dst then point at column c0 of
// row 0, the strides and `row_pitch` are the whole matrix's row length, and `cols` is the
// group's width. No kernel touches a column outside its range.
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
    u64 finish_inverse; // 1: multiply by coset[bitrev_n(p)]; write row B*p (rows B*p + r, r < B,
                        //    too when `replicate_out`)
    u64 log_blowup;     // log2(B)
    u64 replicate_out;  // finish_inverse: also write the B - 1 replicas
    u64 replicated_in;  // first forward pass (half-span B): rows B*p + r are not stored, read row B*p
    u64 canon_out;      // canonicalise what this pass stores (the last pass; register kernels only)
    u64 first_task;     // the launch runs tasks [first_task, first_task + tasks) of the pass (a task
    u64 tasks;          //    is one tile, or the B tiles of one block with replicated_in)
    u64 row_pitch;      // finish_inverse: elements between consecutive rows of dst (the LDE buffer's
                        //    row length, whatever the range of columns this launch covers)
};

// finish_inverse: the element offset of row B*pos (the rows of the LDE buffer, `row_pitch` apart),
// and how many rows position `pos` fills.
__device__ __forceinline__ u64 finish_row(u64 pos, const NttPass& p) { return (pos << p.log_blowup) * p.row_pitch; }
__device__ __forceinline__ u64 finish_reps(const NttPass& p) { return p.replicate_out ? 1ull << p.log_blowup : 1; }

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
    const u64 total = p.tasks * col_groups;
    for (u64 blk = blockIdx.x; blk < total; blk += gridDim.x) {
        const u64 g = blk % col_groups;  // neighbouring blocks share rows: better DRAM locality
        const u64 tile_id = p.first_task + blk / col_groups;
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
            if (!DIT && p.finish_inverse) {  // inverse passes only
                v = gl_mul(v, p.coset[bitrev32((u32)pos, log_n)]);
                const u64 reps = finish_reps(p);
                u64* d = p.dst + finish_row(pos, p) + col;
                for (u64 r = 0; r < reps; ++r) d[r * p.row_pitch] = v;
            } else {
                p.dst[pos * p.dst_stride + col] = v;
            }
        }
        __syncthreads();
    }
}

#if ALL_KERNELS || WANT_ntt_dif_pass
extern "C" __global__ void __launch_bounds__(512) ntt_dif_pass(const NttPass p) { ntt_pass<false>(p); }
#endif
#if ALL_KERNELS || WANT_ntt_dit_pass
extern "C" __global__ void __launch_bounds__(512) ntt_dit_pass(const NttPass p) { ntt_pass<true>(p); }
#endif

// ---------------------------------------------------------------------------------------------
// The register kernels (k >= 5): each thread holds R = 2^LOGR positions of one column in registers
// and runs up to LOGR stages on them at a time (radix R); between groups of stages the tile goes
// through shared memory. A group works on a LOGR-bit window [w, w + LOGR) of the local index i:
// thread g (of T/R per column) holds i = low | (j << w) | high for j < R, where low and high are
// g's bits below and above the window. A stage at local bit e = w + b pairs j and j | 2^b.
// R = 16: 1024 threads for a 2^11-row tile of 8 columns, at most 64 registers each.

// Local index of register j for thread g and window w.
template <int LOGR>
__device__ __forceinline__ u32 reg_index(u32 g, u32 w, u32 j) {
    const u32 low = g & ((1u << w) - 1);
    const u32 high = (g >> w) << (w + LOGR);
    return low | (j << w) | high;
}

// The lean form's twiddle layout, by window: window n of a pass holds the stages [w_n, w_n + LOGR)
// or fewer (register bits BIT = e - w_n); a thread with low = i mod 2^w_n needs, for stage BIT,
// the 2^BIT twiddles of i0 = low | (qb << w_n), qb < 2^BIT, and reads them from its row of the
// window's table: row low (2^LOGR - 1 entries, an odd stride, so the four rows a warp reads are in
// different banks) at 2^BIT - 1 + qb. Every address of a stage is then the row's plus a
// compile-time offset: no per-stage index arithmetic, and no table of addresses held across the
// stages (which spilled in the inverse kernel at 64 registers).
// DIT runs window n at w_n = min(n LOGR, k - LOGR) for the stages [n LOGR, min((n+1) LOGR, k));
// DIF at w_n = max(k - (n+1) LOGR, 0) for [w_n, k - n LOGR). Window n's table has 2^w_n rows.
template <bool DIT, int LOGR>
__device__ __forceinline__ u32 lean_window_w(u32 n, u32 k) {
    return DIT ? min(n * LOGR, k - LOGR) : (k >= (n + 1) * LOGR ? k - (n + 1) * LOGR : 0);
}
// The offset of window n's table: the rows of the windows before it.
template <bool DIT, int LOGR>
__device__ __forceinline__ u32 lean_window_base(u32 n, u32 k) {
    u32 base = 0;
    for (u32 m = 0; m < n; ++m) base += (1u << lean_window_w<DIT, LOGR>(m, k)) * ((1u << LOGR) - 1);
    return base;
}

// The last inverse pass's coset factors of tile (hi, lo), for the lean form's store: position
// pos = tile_pos(hi, lo, i) takes coset[bitrev_L(pos)] (L = log_size), and bitrev_L(pos) = A_i | C
// with A_i = bitrev_k(i) << (L - log_h_small - k) and C = bitrev_L(tile_pos(hi, lo, 0)): i's bits,
// and those of hi and lo, are disjoint in pos and so in its reversal. As coset[x] = s^x / n,
// coset[A | C] = coset[A] coset[C] n: one table entry of the tile and 2^k entries shared by
// every tile (the same addresses each time, so they stay cached) make the tile's factors, which
// go to cf[cf_slot(i)] before the stages; every product is canonical, so it is the table's own word.
// The slots skip one element after every R = 2^LOGR: in the window at bit 0 the threads of a warp
// read cf at indices R apart, which would otherwise all fall in one pair of banks.
// The store then reads shared memory instead of one scattered global load per element.
template <int LOGR>
__device__ __forceinline__ constexpr u32 cf_slot(u32 i) { return i + (i >> LOGR); }
template <int LOGR>
__device__ __forceinline__ void coset_factors(u64* cf, const NttPass& p, u32 k, u64 hi, u64 lo) {
    const u32 log_n = (u32)p.log_size, shift = log_n - (u32)p.log_h_small - k;
    const u64 c = gl_mul(p.coset[bitrev32((u32)tile_pos(hi, lo, 0, p), log_n)], 1ull << log_n);
    for (u32 i = threadIdx.x; i < (1u << k); i += blockDim.x) cf[cf_slot<LOGR>(i)] = gl_mul(p.coset[bitrev32(i, k) << shift], c);
}

// A DIT butterfly (x, y) -> (x + y 2^e, x - y 2^e) with a compile-time exponent 0 <= e < 192 once
// its callers are unrolled: the fused gl_dit_pow2_lazy (one bounded reduction of y 2^(e mod 96)
// shared by both outputs), a plain add and subtract for e = 0 or 96; 2^e = -2^(e - 96) for
// e >= 96 swaps the outputs.
__device__ __forceinline__ void dit_butterfly_pow2(u64& x, u64& y, int e) {
    u64 sum = x, diff = y;
    if (e % 96 == 0) {
        sum = gl_add_lazy(x, y);
        diff = gl_sub_lazy(x, y);
    } else {
        gl_dit_pow2_lazy(sum, diff, e % 96);
    }
    x = e >= 96 ? diff : sum;
    y = e >= 96 ? sum : diff;
}

// The stages of register bits [B0, B0 + L) of a DIT window in power-of-two form (2^LOGR
// registers), as a transform of its own at half-spans from H = 2^LOG_H: sub-stage s = b - B0 pairs
// j0 and j0 | 2^b, t = (j0 >> B0) mod 2^s, with the twiddles of tiles whose lo is LO:
// w_(2^(s+1) H)^(t H + LO) = 2^((t H + LO) E_(s+1+LOG_H) mod 192) (gl_root_exp), compile-time
// powers of two while 2^(L+LOG_H) <= 64. The mirror of dif_stages_pow2.
template <int LOGR, int B0, int L, int LOG_H = 0, int LO = 0>
__device__ __forceinline__ void dit_stages_pow2(u64 v[1 << LOGR]) {
    static_assert(L + LOG_H <= 6 && LO < (1 << LOG_H), "w_64 is the largest root with a power-of-two form");
    constexpr int R = 1 << LOGR;
#pragma unroll
    for (int s = 0; s < L; ++s) {
        const int b = B0 + s;
#pragma unroll
        for (int q = 0; q < R / 2; ++q) {
            const int j0 = ((q >> b) << (b + 1)) | (q & ((1 << b) - 1)), j1 = j0 | (1 << b);
            const int t = (j0 >> B0) & ((1 << s) - 1);
            dit_butterfly_pow2(v[j0], v[j1], (((t << LOG_H) + LO) * gl_root_exp(s + 1 + LOG_H)) % 192);
        }
    }
}

// Stages 0 .. LOGR-1 of a DIT pass at half-spans from H = 2^LOG_H on its first window (w = 0:
// register j holds local index j | (g << LOGR), so its twiddles are compile-time constants): the
// first forward pass at blowup 2 runs it with H = 2 and one copy for each LO, no table.
template <int LOGR, int LOG_H = 0, int LO = 0>
__device__ __forceinline__ void dit_first_window_pow2(u64 v[1 << LOGR]) {
    dit_stages_pow2<LOGR, 0, LOGR, LOG_H, LO>(v);
}

// The stages of register bits [B0, B0 + L) of a DIF window in power-of-two form (2^LOGR
// registers), as a transform of its own at half-spans from 1: sub-stage s = b - B0 pairs j0 and
// j0 | 2^b with the twiddle w_(2^(s+1))^-t, t = (j0 >> B0) mod 2^s, = 2^((-t E_(s+1)) mod 192);
// and (x - y) (-2^f) = (y - x) 2^f, the sign gl_pow2_red's negation (f mod 96 >= 64) flips too.
template <int LOGR, int B0, int L>
__device__ __forceinline__ void dif_stages_pow2(u64 v[1 << LOGR]) {
    constexpr int R = 1 << LOGR;
#pragma unroll
    for (int s = L - 1; s >= 0; --s) {
        const int b = B0 + s;
#pragma unroll
        for (int q = 0; q < R / 2; ++q) {
            const int j0 = ((q >> b) << (b + 1)) | (q & ((1 << b) - 1)), j1 = j0 | (1 << b);
            const int t = (j0 >> B0) & ((1 << s) - 1);
            const int e = (192 - (t * gl_root_exp(s + 1)) % 192) % 192;
            const u64 x = v[j0], y = v[j1];
            v[j0] = gl_add_lazy(x, y);
            const bool neg = (e >= 96) != (e % 96 != 0 && gl_pow2_neg(e % 96));
            const u64 d = neg ? gl_sub_lazy(y, x) : gl_sub_lazy(x, y);
            v[j1] = e % 96 == 0 ? d : gl_pow2_red(d, e % 96);
        }
    }
}

// Stages LOGR-1 .. 0 of the DIF pass in power-of-two form, on the window at w = 0.
template <int LOGR>
__device__ __forceinline__ void dif_last_window_pow2(u64 v[1 << LOGR]) {
    dif_stages_pow2<LOGR, 0, LOGR>(v);
}

// The four-step form of the lean radix-16 windows. A window runs the stages [s, s + L) of a pass
// at register bits [B0, B0 + L), B0 = s - w. Those stages form a transform of their own at
// half-spans from H' = 2^s H with offset lo' = (i mod 2^s) H + lo. At its sub-stage e the pair of
// sub-index j0 takes w_(2^(e+1) H')^(t H' + lo') = w_(2^(e+1))^t a^(2^(L-e-1)), t = j0 mod 2^e,
// with the window's constant a = w_(2^L H')^lo'; multiplying the element at sub-index m by
// a^bitrev_L(m) leaves each sub-stage the twiddle w_(2^(e+1))^t alone (each element's factor is
// what the pairs of the stages to come still need, 1 after the last). So the element at
// sub-index m = (j >> B0) mod 2^L is multiplied by
// a^bitrev_L(m), a = w_(2^(s+L) H)^lo' (DIT, before the stages; DIF, after them, with the inverse
// table's w^-1), and the stages keep the twiddles w_(2^(b+1))^t alone: compile-time powers of two
// (dit_stages_pow2, dif_stages_pow2). A full window then multiplies 15 of its 16 elements by a
// general factor, and of its 32 butterflies 17 multiply by a power of two (a shift and a short
// reduction) and 15 by nothing, where a general window multiplies all 32 by a general twiddle. With
// a general multiplication, a butterfly by 2^e cost about what a general one does (the LDE
// 2^21 -> 2^22 x 316 took 53.9 ms against 55.0 ms with a general twiddle per butterfly:
// the git history of BENCHMARKS.md, "The four-step windows at radix 16"); the fused butterflies (gl_dit_pow2_lazy,
// gl_pow2_red) reduce y 2^e once to at most p - 1 and share it, 21-24 SASS instructions where
// the multiplication, add and subtract took 32-48, and the LDE took 49.5-50.1 ms
// (the git history of BENCHMARKS.md, "The fused power-of-two butterfly").
// The factors depend on i mod 2^s: on the thread's low bits (its row of the window's table, as
// in the lean form) and on the register bits below B0 (jl). Row `low` holds them at slot
// jl (2^L - 1) + m - 1, 2^B0 (2^L - 1) <= 15 of its 2^LOGR - 1 slots.
template <int LOGR, int B0, int L>
__device__ __forceinline__ void four_step_factors(u64 v[1 << LOGR], const u64* row) {
    constexpr int M = (1 << L) - 1;
#pragma unroll
    for (int j = 0; j < (1 << LOGR); ++j) {
        const int m = (j >> B0) & M, jl = j & ((1 << B0) - 1);
        if (m != 0) v[j] = gl_mul_lazy(v[j], row[jl * M + m - 1]);
    }
}

template <bool DIT, int LOGR, int B0, int L>
__device__ __forceinline__ void four_step_window(u64 v[1 << LOGR], const u64* row) {
    if (DIT) {
        four_step_factors<LOGR, B0, L>(v, row);
        dit_stages_pow2<LOGR, B0, L>(v);
    } else {
        dif_stages_pow2<LOGR, B0, L>(v);
        four_step_factors<LOGR, B0, L>(v, row);
    }
}

// The windows a radix-16 pass of 5 to 11 stages runs: (B0, L) = (0, 4) and, for its last stages,
// (4 - L, L) (DIT, and DIF with the finish's power-of-two last window) or (0, L) (DIF).
template <bool DIT>
__device__ __forceinline__ void four_step_window_at(u64 v[16], const u64* row, u32 b0, u32 l) {
    switch (b0 * 8 + l) {
        case 4: four_step_window<DIT, 4, 0, 4>(v, row); break;
        case 8 + 3: four_step_window<DIT, 4, 1, 3>(v, row); break;
        case 16 + 2: four_step_window<DIT, 4, 2, 2>(v, row); break;
        case 24 + 1: four_step_window<DIT, 4, 3, 1>(v, row); break;
        default:
            if (!DIT) {
                switch (l) {
                    case 3: four_step_window<DIT, 4, 0, 3>(v, row); break;
                    case 2: four_step_window<DIT, 4, 0, 2>(v, row); break;
                    default: four_step_window<DIT, 4, 0, 1>(v, row); break;
                }
            } else {
                __builtin_unreachable();
            }
    }
}

// Window n of a four-step pass: its position w and register bits [b0, b0 + l); l = 0 for a
// window with compile-time twiddles (pow2_first's first, pow2_last's last) or past the last
// stage. The same sequence as ntt_pass_reg's loop, whose window bounds it restates, as `w` restates
// lean_window_w: calling those helpers here changed the kernels' PTX, and these are the kernels
// measured on the H200.
template <bool DIT, int LOGR>
__device__ __forceinline__ void four_step_window_of(u32 n, u32 k, bool pow2_first, bool pow2_last, u32& w, u32& b0,
                                                    u32& l) {
    if (DIT) {
        const u32 next = n * LOGR, top = min(next + LOGR, k);
        w = min(next, k - LOGR);
        b0 = next - w;
        l = (pow2_first && n == 0) || next >= k ? 0 : top - next;
    } else {
        u32 next = k;
        for (u32 m = 0; m < n; ++m) next = pow2_last ? (next >= 2 * LOGR ? next - LOGR : LOGR) : (next >= LOGR ? next - LOGR : 0);
        w = next >= LOGR ? next - LOGR : 0;
        const u32 bot = pow2_last ? (w == 0 ? next : next >= 2 * LOGR ? next - LOGR : LOGR) : (next >= LOGR ? next - LOGR : 0);
        b0 = bot - w;
        l = next - bot;
    }
}

// The four-step factors of one tile (see four_step_window), gathered into the lean form's layout
// by window: row `low` of window n, slot jl (2^L - 1) + m - 1, holds
// w_(2^(s+L) H)^((low' H + lo) bitrev_L(m)) with low' = low | (jl << w), read from the pass's
// table t[x] (x below half the transform size; t^(x + size/2) = -t^x). (A form of this loop
// without its two divisions ran 2.4-3.9% fewer instructions, but the forward kernel then spilled
// and its first pass lost more than the others gained: the git history of BENCHMARKS.md, "The tile's twiddle gather
// without divisions".)
template <bool DIT, int LOGR>
__device__ __forceinline__ void gather_four_step(u64* tws, const NttPass& p, u32 k, u32 lo, bool pow2_first,
                                                 bool pow2_last) {
    const u32 log_h = (u32)p.log_h_small, log_n = (u32)p.log_size;
    const u64 half = 1ull << (log_n - 1);
    for (u32 n = 0; n * LOGR < k; ++n) {
        u32 w, b0, l;
        four_step_window_of<DIT, LOGR>(n, k, pow2_first, pow2_last, w, b0, l);
        const u32 per_jl = (1u << l) - 1, per_row = per_jl << b0, shift = log_n - log_h - (w + b0 + l);
        u64* const t = tws + lean_window_base<DIT, LOGR>(n, k);
        for (u32 x = threadIdx.x; x < (per_row << w); x += blockDim.x) {
            const u32 row = x / per_row, slot = x - row * per_row, jl = slot / per_jl, m = slot - jl * per_jl + 1;
            const u64 y = ((((u64)(row | (jl << w)) << log_h) + lo) * bitrev32(m, l)) << shift;
            const u64 tw = p.tw[y & (half - 1)];
            t[row * ((1u << LOGR) - 1) + slot] = (y & half) ? GL_P - tw : tw;
        }
    }
}

// Shared-memory slot of tile row i, column c: COLS elements of padding after every R = 2^LOGR rows.
// In the window at bit 0 the threads of a warp hold rows R apart, and a 64-bit access is
// conflict-free when each half-warp's 16 lanes fall in distinct pairs of banks: the padding puts
// the 16 / COLS rows of a half-warp COLS pairs apart. (One element after every 32 rows, as before,
// left radix 16 at 8 columns two wavefronts per access where one will do: ncu counted 121 M
// conflicting store wavefronts of 300 M in the first forward pass; BENCHMARKS.md.)
template <int LOGR, int COLS>
__device__ __forceinline__ constexpr u32 tile_pad(u32 i) { return (i >> LOGR) * COLS; }
template <int LOGR, int COLS>
__device__ __forceinline__ u32 tile_slot(u32 i, u32 c) { return i * COLS + c + tile_pad<LOGR, COLS>(i); }

// The lean form's exchange addressing. Window w's local indices are i(j) = base | (j << w), base
// = low | high with bits disjoint from j << w, so the slot (tile_slot) is
// tile_slot(base, c) + (j << w) * COLS + tile_pad(j << w): per window a constant offset for each
// j. With W a compile-time constant those offsets are immediates of the shared-memory accesses.
template <int LOGR, int COLS, int W>
__device__ __forceinline__ constexpr u32 window_offset(u32 j) { return (j << W) * COLS + tile_pad<LOGR, COLS>(j << W); }

template <int LOGR, int COLS, int W>
__device__ __forceinline__ void tile_put(u64* t, const u64 v[1 << LOGR]) {
#pragma unroll
    for (int j = 0; j < (1 << LOGR); ++j) t[window_offset<LOGR, COLS, W>(j)] = v[j];
}
template <int LOGR, int COLS, int W>
__device__ __forceinline__ void tile_get(const u64* t, u64 v[1 << LOGR]) {
#pragma unroll
    for (int j = 0; j < (1 << LOGR); ++j) v[j] = t[window_offset<LOGR, COLS, W>(j)];
}

// Stores (PUT) or loads the thread's registers of window w (w <= 11 - LOGR: passes have at most 11
// stages) at the tile's slots of thread (g, c).
template <bool PUT, int LOGR, int COLS>
__device__ __forceinline__ void tile_exchange(u64* tile, u64 v[1 << LOGR], u32 g, u32 c, u32 w) {
    const u32 base = reg_index<LOGR>(g, w, 0);
    u64* t = tile + tile_slot<LOGR, COLS>(base, c);
#define TILE_CASE(W)                                     \
    case W:                                              \
        if (PUT) {                                       \
            tile_put<LOGR, COLS, (W)>(t, v);             \
        } else {                                         \
            tile_get<LOGR, COLS, (W)>(t, v);             \
        }                                                \
        break;
    switch (w) {
        TILE_CASE(0)
        TILE_CASE(1)
        TILE_CASE(2)
        TILE_CASE(3)
        TILE_CASE(4)
        TILE_CASE(5)
        TILE_CASE(6)
        default:  // LOGR = 4 only: w = 7 (k = 11)
            TILE_CASE(7)
    }
#undef TILE_CASE
}

// One register pass (k >= 5 stages) at radix 16 over 8 columns, in lean form: each tile's global
// addresses as one running offset, the shared-memory exchanges at compile-time offsets
// (tile_exchange), the tile's twiddles gathered by window (gather_four_step) and each 16-point
// window in four-step form (four_step_window); values stay lazy (any u64 congruent mod p) inside
// the transform, and the pass flagged canon_out canonicalises what it stores.
template <bool DIT, int FINISH = -1>
__device__ __forceinline__ void ntt_pass_reg(const NttPass& p) {
    constexpr int LOGR = 4, COLS = 8;
    constexpr int R = 1 << LOGR;
    // [2^k][COLS], plus COLS elements of padding after every R rows (tile_slot).
    extern __shared__ u64 tile[];
    const u32 k = (u32)p.k;  // >= LOGR; blockDim.x == 2^k * COLS / R
    const u32 c = threadIdx.x % COLS, g = threadIdx.x / COLS;
    const u64 h_small = 1ull << p.log_h_small;
    const u64 col_groups = (p.cols + COLS - 1) / COLS;
    // With replicated_in (h_small == B) one block computes the B tiles of one `hi`.
    const u64 reps = p.replicated_in ? h_small : 1;
    // The tile's twiddles follow the tile in shared memory; they depend only on `lo`, so
    // consecutive tiles with the same `lo` reuse them.
    u64* const tws = tile + ((1u << k) * COLS + tile_pad<LOGR, COLS>(1u << k));
    // The last inverse pass: the tile's coset factors (coset_factors) after them.
    u64* const cf = tws + lean_window_base<DIT, LOGR>((k + LOGR - 1) / LOGR, k);
    // FINISH: 0 or 1 where the kernel has a copy for each (the finish's state then leaves the other
    // copy's registers), -1 to read the flag.
    const bool finish = !DIT && (FINISH < 0 ? p.finish_inverse != 0 : FINISH == 1);
    // The windows with compile-time power-of-two twiddles and no table: the first window of a
    // forward pass at half-spans from 2 (the first at blowup 2; one copy for each parity of lo)
    // and the last window of the finish's copy at half-spans from 1 (lo = 0: no scaling; the
    // windows above it then end at stage LOGR, and the gathered table's rows for the stages below
    // go unread).
    const bool pow2_first = DIT && p.log_h_small == 1;
    const bool pow2_last = !DIT && FINISH == 1 && p.log_h_small == 0;
    u32 tws_lo = ~0u;
    // 32-bit loop control (lde.rs launches fewer than 2^31 tiles): at 64 registers its 64-bit form
    // spilled in the inverse kernel.
    const u32 n_blk = (u32)(p.tasks * col_groups), n_cg = (u32)col_groups;
    for (u32 blk = blockIdx.x; blk < n_blk; blk += gridDim.x) {
        const u32 cg = blk % n_cg, task = (u32)p.first_task + blk / n_cg;
        const u64 col = cg * COLS + c;
        const bool active = col < p.cols;
        for (u32 rep = (u32)reps; rep-- > 0;) {  // the lo == 0 tile, which overwrites the shared rows, last
            const u32 tile_id = task * (u32)reps + rep;
            const u64 lo = tile_id & (u32)(h_small - 1);
            const u64 hi = tile_id >> p.log_h_small;
            // (`lo` is the same for the whole block: the gather and its barrier are uniform. The
            // previous tile's reads of `tws` ended at its closing barrier.)
            const bool gather = (u32)lo != tws_lo;
            if (gather) {
                gather_four_step<DIT, LOGR>(tws, p, k, (u32)lo, pow2_first, pow2_last);
                tws_lo = (u32)lo;
            }
            if (finish) coset_factors<LOGR>(cf, p, k, hi, lo);
            u64 v[R];
            // The first window, and the stages left.
            u32 w = DIT ? 0 : k - LOGR;
            {
                // Register j's row is row(0) + j (h_small << w): one running address, no
                // per-element index arithmetic; canon_in and inactive columns branch once.
                const u64 pos0 = ((hi << k) + reg_index<LOGR>(g, w, 0)) * h_small + (p.replicated_in ? 0 : lo);
                const u64 step = (h_small << w) * p.src_stride;
                const u64* a = p.src + pos0 * p.src_stride + col;
                if (active) {
#pragma unroll
                    for (int j = 0; j < R; ++j, a += step) v[j] = *a;
                } else {
#pragma unroll
                    for (int j = 0; j < R; ++j) v[j] = 0;
                }
                if (p.canon_in) {
#pragma unroll
                    for (int j = 0; j < R; ++j) v[j] = gl_canon(v[j]);
                }
            }
            // The gathered twiddles and the coset factors must be visible to every thread before the
            // first read. Where the first window runs on compile-time twiddles (pow2_first), the
            // first exchange's barrier comes before any read of the table; the coset factors are
            // read at the store, after every exchange. Either needs its own barrier only when no
            // exchange comes first (k <= LOGR).
            if ((gather && !(pow2_first && k > LOGR)) || (finish && k <= LOGR)) __syncthreads();
            // Stages e: DIF k-1 down to 0, DIT 0 up to k-1, in groups of at most LOGR per window.
            u32 next = DIT ? 0 : k;  // DIT: the lowest stage left; DIF: one above the highest left
            // The window's index, and the thread's row of its twiddles.
            u32 window = 0;
            const u64* tw_row = tws;
            if constexpr (DIT) {
                if (pow2_first) {
                    if (lo == 0) {
                        dit_first_window_pow2<LOGR, 1, 0>(v);
                    } else {
                        dit_first_window_pow2<LOGR, 1, 1>(v);
                    }
                    next = LOGR;
                }
            }
            for (;;) {
                if (DIT) {
                    // (The power-of-two window ran the stages of window 0 above; later windows have w > 0.)
                    if (!pow2_first || w != 0) {
                        const u32 top = min(next + LOGR, k);
                        tw_row = tws + lean_window_base<DIT, LOGR>(window, k) + (g & ((1u << w) - 1)) * (R - 1);
                        four_step_window_at<DIT>(v, tw_row, next - w, top - next);
                        next = top;
                    }
                    if (next >= k) break;
                } else {
                    if (pow2_last && w == 0) {  // next == LOGR: the last window, stages LOGR-1 .. 0
                        dif_last_window_pow2<LOGR>(v);
                        break;
                    }
                    // (Power-of-two last window: stop at stage LOGR, so that it is [0, LOGR).)
                    const u32 bot = pow2_last ? (next >= 2 * LOGR ? next - LOGR : LOGR) : (next >= LOGR ? next - LOGR : 0);
                    tw_row = tws + lean_window_base<DIT, LOGR>(window, k) + (g & ((1u << w) - 1)) * (R - 1);
                    four_step_window_at<DIT>(v, tw_row, bot - w, next - bot);
                    next = bot;
                    if (next == 0) break;
                }
                // Exchange through shared memory into the next window. No barrier before the put:
                // the slots of (g, c, w) are the ones this thread read in the previous exchange's get
                // (the same window w, and tile_exchange's slots depend on (g, c, w) alone, one thread
                // each), so nothing it overwrites is still to be read by another thread. A tile's
                // first put writes slots of another window than the previous tile's last get; the
                // previous tile's closing barrier covers it.
                tile_exchange<true, LOGR, COLS>(tile, v, g, c, w);
                __syncthreads();
                w = DIT ? min(next, k - LOGR) : (next >= LOGR ? next - LOGR : 0);
                ++window;
                tile_exchange<false, LOGR, COLS>(tile, v, g, c, w);
            }
            // Store.
            if (active && finish) {
                // The coset factors, then row B p of each position, through one running address.
                const u32 base = reg_index<LOGR>(g, w, 0);
#pragma unroll
                for (int j = 0; j < R; ++j) v[j] = gl_mul_lazy(v[j], cf[cf_slot<LOGR>(base + ((u32)j << w))]);
                if (p.canon_out) {
#pragma unroll
                    for (int j = 0; j < R; ++j) v[j] = gl_canon(v[j]);
                }
                const u64 pos0 = ((hi << k) + base) * h_small + lo;
                const u64 step = ((h_small << w) * p.row_pitch) << p.log_blowup;
                u64* a = p.dst + ((pos0 * p.row_pitch) << p.log_blowup) + col;
#pragma unroll
                for (int j = 0; j < R; ++j, a += step) *a = v[j];
            } else if (active) {
                // As the load: one running address; canon_out branches once.
                const u64 step = (h_small << w) * p.dst_stride;
                u64* a = p.dst + (((hi << k) + reg_index<LOGR>(g, w, 0)) * h_small + lo) * p.dst_stride + col;
                if (p.canon_out) {
#pragma unroll
                    for (int j = 0; j < R; ++j, a += step) *a = gl_canon(v[j]);
                } else {
#pragma unroll
                    for (int j = 0; j < R; ++j, a += step) *a = v[j];
                }
            }
            __syncthreads();  // the next task's exchange must not overwrite this one's reads
        }
    }
}

// The register kernels: 1024 threads of at most 64 registers per 2^11-row tile. The inverse kernel
// has a copy for the last pass and one for the others: at 64 registers, one copy for both spilled
// the finish's state in the tile loop. (The radix-32 kernels, the canonical and plain lazy forms,
// the 4-column kernel and the power-of-two form measured slower on the H200 and were removed;
// BENCHMARKS.md and the repository's history keep their figures.)
#if ALL_KERNELS || WANT_ntt_dif_pass_lean16
extern "C" __global__ void __launch_bounds__(1024) ntt_dif_pass_lean16(const NttPass p) {
    if (p.finish_inverse) {
        ntt_pass_reg<false, 1>(p);
    } else {
        ntt_pass_reg<false, 0>(p);
    }
}
#endif
#if ALL_KERNELS || WANT_ntt_dit_pass_lean16
extern "C" __global__ void __launch_bounds__(1024) ntt_dit_pass_lean16(const NttPass p) { ntt_pass_reg<true>(p); }
#endif
