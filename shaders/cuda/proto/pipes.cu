// Throughput prototypes for the coset LDE's arithmetic (not used by the backend): which pipe a
// Goldilocks multiply and a radix-2 butterfly can use on sm_90, and what power-of-two inner
// twiddles save. Timed by backend-cuda/examples/ntt_proto.rs, which checks every kernel's output
// against host arithmetic on a sample of threads.
//
// Three ways to multiply, selected per kernel by MODE:
// - INT: the production lazy multiply (gl_mul_lazy: 32-bit multiply-adds, then the reduction on
//   the integer ALU);
// - FP: the FP64 pipe for the partial products: a and b as limbs of 22, 22 and 20 bits held in
//   doubles, nine DFMA/DMUL whose column sums stay below 2^53 (so exact), each column read back
//   as an integer through the 2^52 offset trick (no conversion instruction), then the 128-bit
//   sum and the reduction on the integer pipe;
// - MIX: every other chain (or butterfly) of a thread on each pipe; WARP: even warps INT, odd
//   warps FP;
// - INT1 (butterflies only): the integer pipe with a canonical product, so that the butterfly's
//   add and sub need one correction each instead of two.
//
// Every value inside a kernel is any u64 congruent to the field element (lazy); the store
// canonicalises.
#include "common.cuh"

#define MODE_INT 0
#define MODE_FP 1
#define MODE_MIX 2
#define MODE_WARP 3

// ---------------------------------------------------------------------------------------------
// The FP64 multiply.

// 2^52: a double in [2^52, 2^53) holds the integer (its value - 2^52) in its low 52 bits.
#define PROTO_TWO52 4503599627370496.0
#define PROTO_TWO52_HI 0x43300000

// A u64 as three limbs of 22, 22 and 20 bits, exact in doubles.
struct Limbs3 {
    double l0, l1, l2;
};

__device__ __forceinline__ double limb_double(u32 v) { return __hiloint2double(PROTO_TWO52_HI, (int)v) - PROTO_TWO52; }

__device__ __forceinline__ Limbs3 fp_split(u64 a) {
    const u32 lo = (u32)a, hi = (u32)(a >> 32);
    Limbs3 r;
    r.l0 = limb_double(lo & 0x3FFFFFu);
    r.l1 = limb_double(__funnelshift_r(lo, hi, 22) & 0x3FFFFFu);
    r.l2 = limb_double(hi >> 12);
    return r;
}

// a * b, b given as limbs: the nine partial products on the FP64 pipe, each column offset by
// 2^52 (c0..c4 < 3 * 2^44, so every sum is exact), then sum c_k 2^(22k) as four 32-bit words and
// the reduction on the integer pipe. Column k is (H_k:L_k), its high word still holding the
// offset's 0x433 in bits 20..30: masked where a shift keeps those bits.
__device__ __forceinline__ u64 fp_mul(u64 a, const Limbs3& b) {
    const Limbs3 x = fp_split(a);
    const double c0 = __fma_rn(x.l0, b.l0, PROTO_TWO52);
    const double c1 = __fma_rn(x.l0, b.l1, __fma_rn(x.l1, b.l0, PROTO_TWO52));
    const double c2 = __fma_rn(x.l0, b.l2, __fma_rn(x.l1, b.l1, __fma_rn(x.l2, b.l0, PROTO_TWO52)));
    const double c3 = __fma_rn(x.l1, b.l2, __fma_rn(x.l2, b.l1, PROTO_TWO52));
    const double c4 = __fma_rn(x.l2, b.l2, PROTO_TWO52);
    const u32 l0 = (u32)__double2loint(c0), h0 = (u32)__double2hiint(c0) & 0x3FFFu;
    const u32 l1 = (u32)__double2loint(c1), h1 = (u32)__double2hiint(c1);
    const u32 l2 = (u32)__double2loint(c2), h2 = (u32)__double2hiint(c2);
    const u32 l3 = (u32)__double2loint(c3), h3 = (u32)__double2hiint(c3) & 0x3FFFu;
    const u32 l4 = (u32)__double2loint(c4), h4 = (u32)__double2hiint(c4);
    // Words of c0 + c1 2^22 + c2 2^44 + c3 2^66 + c4 2^88 (< 2^128: it is a * b).
    const u32 a1 = __funnelshift_r(l1, h1, 10), a2 = (h1 & 0x3FFFu) >> 10;  // c1 2^22, words 1, 2
    const u32 b2 = __funnelshift_r(l2, h2, 20);                             // c2 2^44, word 2 (h2 < 2^14)
    const u32 d3 = __funnelshift_l(l3, h3, 2);                              // c3 2^66, word 3
    const u32 e3 = __funnelshift_l(l4, h4, 24);                             // c4 2^88, word 3 (h4 < 2^8)
    u32 w0, w1, w2, w3;
    asm("add.cc.u32      %0, %4, %5;\n\t"
        "addc.cc.u32     %1, %6, %7;\n\t"
        "addc.cc.u32     %2, %8, %9;\n\t"
        "addc.u32        %3, 0, 0;\n\t"
        "add.cc.u32      %1, %1, %10;\n\t"
        "addc.cc.u32     %2, %2, %11;\n\t"
        "addc.u32        %3, %3, %12;\n\t"
        "add.cc.u32      %2, %2, %13;\n\t"
        "addc.u32        %3, %3, %14;"
        : "=&r"(w0), "=&r"(w1), "=&r"(w2), "=&r"(w3)
        : "r"(l0), "r"(l1 << 22), "r"(h0), "r"(a1), "r"(a2), "r"(b2), "r"(l2 << 12), "r"(l3 << 2), "r"(d3),
          "r"(l4 << 24), "r"(e3));
    return gl_reduce_words_lazy(w0, w1, w2, w3);
}

// ---------------------------------------------------------------------------------------------
// Multiply chains: each thread runs CHAINS independent chains x_k <- x_k * c_k for `iters` steps.
#define CHAINS 8

template <int MODE>
__device__ __forceinline__ void mul_chains(u64 (&x)[CHAINS], const u64 (&c)[CHAINS], const Limbs3 (&cl)[CHAINS],
                                           u32 iters) {
#pragma unroll 4
    for (u32 i = 0; i < iters; ++i) {
#pragma unroll
        for (int k = 0; k < CHAINS; ++k) {
            const bool fp = MODE == MODE_FP || (MODE == MODE_MIX && (k & 1));
            x[k] = fp ? fp_mul(x[k], cl[k]) : gl_mul_lazy(x[k], c[k]);
        }
    }
}

template <int MODE>
__device__ __forceinline__ void mul_kernel(const u64* in, const u64* consts, u64* out, u32 iters) {
    const u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    u64 x[CHAINS], c[CHAINS];
    Limbs3 cl[CHAINS];
#pragma unroll
    for (int k = 0; k < CHAINS; ++k) {
        x[k] = in[t * CHAINS + k];
        c[k] = consts[k];
        cl[k] = fp_split(c[k]);
    }
    if (MODE == MODE_WARP) {
        if ((threadIdx.x >> 5) & 1) {
            mul_chains<MODE_FP>(x, c, cl, iters);
        } else {
            mul_chains<MODE_INT>(x, c, cl, iters);
        }
    } else {
        mul_chains<MODE>(x, c, cl, iters);
    }
#pragma unroll
    for (int k = 0; k < CHAINS; ++k) out[t * CHAINS + k] = gl_canon(x[k]);
}

extern "C" __global__ void proto_mul_int(const u64* in, const u64* consts, u64* out, u32 iters) {
    mul_kernel<MODE_INT>(in, consts, out, iters);
}
extern "C" __global__ void proto_mul_fp(const u64* in, const u64* consts, u64* out, u32 iters) {
    mul_kernel<MODE_FP>(in, consts, out, iters);
}
extern "C" __global__ void proto_mul_mix(const u64* in, const u64* consts, u64* out, u32 iters) {
    mul_kernel<MODE_MIX>(in, consts, out, iters);
}
extern "C" __global__ void proto_mul_warp(const u64* in, const u64* consts, u64* out, u32 iters) {
    mul_kernel<MODE_WARP>(in, consts, out, iters);
}

// ---------------------------------------------------------------------------------------------
// Radix-2 butterflies: each thread holds 16 values; one iteration is four DIT stages over them
// (half-spans 1, 2, 4, 8: 32 butterflies (x, y) -> (x + w y, x - w y)), butterfly q of stage s
// taking twiddle w[(q + s) % 8] of 8 held in registers.
#define BF_VALUES 16
#define BF_TWIDDLES 8

// x + y and x - y for any x and y <= 2^64 - 2^32 (a canonical product): one correction each.
// A carry leaves s = x + y - 2^64 <= 2^64 - 2^32 - 1, so s + 2^32 - 1 cannot carry again; a
// borrow leaves s = x - y + 2^64 >= 2^32, so s - (2^32 - 1) cannot borrow again.
__device__ __forceinline__ u64 add_small_lazy(u64 a, u64 b) {
    u32 lo, hi;
    asm("{\n\t"
        ".reg .u32 c;\n\t"
        "add.cc.u32      %0, %2, %4;\n\t"
        "addc.cc.u32     %1, %3, %5;\n\t"
        "addc.u32        c, 0, 0;\n\t"
        "neg.s32         c, c;\n\t"
        "add.cc.u32      %0, %0, c;\n\t"
        "addc.u32        %1, %1, 0;\n\t"
        "}"
        : "=&r"(lo), "=&r"(hi)
        : "r"((u32)a), "r"((u32)(a >> 32)), "r"((u32)b), "r"((u32)(b >> 32)));
    return ((u64)hi << 32) | lo;
}

__device__ __forceinline__ u64 sub_small_lazy(u64 a, u64 b) {
    u32 lo, hi;
    asm("{\n\t"
        ".reg .u32 m;\n\t"
        "sub.cc.u32      %0, %2, %4;\n\t"
        "subc.cc.u32     %1, %3, %5;\n\t"
        "subc.u32        m, 0, 0;\n\t"
        "sub.cc.u32      %0, %0, m;\n\t"
        "subc.u32        %1, %1, 0;\n\t"
        "}"
        : "=&r"(lo), "=&r"(hi)
        : "r"((u32)a), "r"((u32)(a >> 32)), "r"((u32)b), "r"((u32)(b >> 32)));
    return ((u64)hi << 32) | lo;
}

// MODE_INT1: the integer pipe with a canonical product (gl_mul) and single-correction add/sub.
#define MODE_INT1 4

template <int MODE>
__device__ __forceinline__ void bfly_iters(u64 (&v)[BF_VALUES], const u64 (&w)[BF_TWIDDLES],
                                           const Limbs3 (&wl)[BF_TWIDDLES], u32 iters) {
    for (u32 i = 0; i < iters; ++i) {
#pragma unroll
        for (int s = 0; s < 4; ++s) {
            const int half = 1 << s;
#pragma unroll
            for (int q = 0; q < BF_VALUES / 2; ++q) {
                const int j0 = ((q >> s) << (s + 1)) | (q & (half - 1)), j1 = j0 + half;
                const int tw = (q + s) % BF_TWIDDLES;
                const u64 x = v[j0];
                if (MODE == MODE_INT1) {
                    const u64 y = gl_mul(v[j1], w[tw]);
                    v[j0] = add_small_lazy(x, y);
                    v[j1] = sub_small_lazy(x, y);
                    continue;
                }
                const bool fp = MODE == MODE_FP || (MODE == MODE_MIX && (q & 1));
                const u64 y = fp ? fp_mul(v[j1], wl[tw]) : gl_mul_lazy(v[j1], w[tw]);
                v[j0] = gl_add_lazy(x, y);
                v[j1] = gl_sub_lazy(x, y);
            }
        }
    }
}

template <int MODE>
__device__ __forceinline__ void bfly_kernel(const u64* in, const u64* consts, u64* out, u32 iters) {
    const u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    u64 v[BF_VALUES], w[BF_TWIDDLES];
    Limbs3 wl[BF_TWIDDLES];
#pragma unroll
    for (int j = 0; j < BF_VALUES; ++j) v[j] = in[t * BF_VALUES + j];
#pragma unroll
    for (int k = 0; k < BF_TWIDDLES; ++k) {
        w[k] = consts[k];
        wl[k] = fp_split(w[k]);
    }
    if (MODE == MODE_WARP) {
        if ((threadIdx.x >> 5) & 1) {
            bfly_iters<MODE_FP>(v, w, wl, iters);
        } else {
            bfly_iters<MODE_INT>(v, w, wl, iters);
        }
    } else {
        bfly_iters<MODE>(v, w, wl, iters);
    }
#pragma unroll
    for (int j = 0; j < BF_VALUES; ++j) out[t * BF_VALUES + j] = gl_canon(v[j]);
}

extern "C" __global__ void proto_bfly_int(const u64* in, const u64* consts, u64* out, u32 iters) {
    bfly_kernel<MODE_INT>(in, consts, out, iters);
}
extern "C" __global__ void proto_bfly_int1(const u64* in, const u64* consts, u64* out, u32 iters) {
    bfly_kernel<MODE_INT1>(in, consts, out, iters);
}
extern "C" __global__ void proto_bfly_fp(const u64* in, const u64* consts, u64* out, u32 iters) {
    bfly_kernel<MODE_FP>(in, consts, out, iters);
}
extern "C" __global__ void proto_bfly_mix(const u64* in, const u64* consts, u64* out, u32 iters) {
    bfly_kernel<MODE_MIX>(in, consts, out, iters);
}
extern "C" __global__ void proto_bfly_warp(const u64* in, const u64* consts, u64* out, u32 iters) {
    bfly_kernel<MODE_WARP>(in, consts, out, iters);
}

// ---------------------------------------------------------------------------------------------
// Radix-2^L blocks: L consecutive DIT stages over R = 2^L values (L * R / 2 butterflies), as a
// register kernel runs them, two ways:
// - general: every butterfly multiplies by a general twiddle loaded from the table `tw` (L1-
//   resident, as the production kernel loads its twiddles), index (q + stage) % 64;
// - pow2: the block of a four-step decomposition: R - 1 general "outer" multiplications
//   (v_j *= tw[j], j >= 1), then the R-point DFT whose inner twiddles are powers of two: stage m
//   (span 2^m) uses w_(2^m)^t = 2^(t E_m mod 192) for this field's roots of unity (w_2 = 2^96,
//   w_4 = 2^48, w_8 = 2^120, w_16 = 2^156, w_32 = 2^78, w_64 = 2^39), as a shift and a short
//   reduction; 2^e with e >= 96 is -2^(e - 96), which swaps the butterfly's outputs.
// Each thread runs RB_BLOCKS independent blocks per iteration (instruction-level parallelism):
// two radix-8 blocks, one radix-32 block.

template <int L, bool POW2>
__device__ __forceinline__ void radix_block(u64 (&v)[1 << L], const u64* __restrict__ tw) {
    constexpr int R = 1 << L;
    if (POW2) {
#pragma unroll
        for (int j = 1; j < R; ++j) v[j] = gl_mul_lazy(v[j], __ldg(tw + j));
    }
#pragma unroll
    for (int s = 0; s < L; ++s) {
        const int half = 1 << s;
#pragma unroll
        for (int q = 0; q < R / 2; ++q) {
            const int j0 = ((q >> s) << (s + 1)) | (q & (half - 1)), j1 = j0 + half;
            const u64 x = v[j0], y = v[j1];
            if (POW2) {
                const int e = ((q & (half - 1)) * gl_root_exp(s + 1)) % 192;
                const int e96 = e % 96;
                const u64 yw = e96 == 0 ? y : gl_mul_pow2_lazy(y, e96);
                const u64 a = gl_add_lazy(x, yw), b = gl_sub_lazy(x, yw);
                v[j0] = e >= 96 ? b : a;
                v[j1] = e >= 96 ? a : b;
            } else {
                const u64 yw = gl_mul_lazy(y, __ldg(tw + (q + s) % 64));
                v[j0] = gl_add_lazy(x, yw);
                v[j1] = gl_sub_lazy(x, yw);
            }
        }
    }
}

template <int L, bool POW2, int RB_BLOCKS>
__device__ __forceinline__ void radix_kernel(const u64* in, const u64* tw, u64* out, u32 iters) {
    constexpr int R = 1 << L;
    const u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    u64 v[RB_BLOCKS][R];
#pragma unroll
    for (int b = 0; b < RB_BLOCKS; ++b)
#pragma unroll
        for (int j = 0; j < R; ++j) v[b][j] = in[(t * RB_BLOCKS + b) * R + j];
    for (u32 i = 0; i < iters; ++i) {
#pragma unroll
        for (int b = 0; b < RB_BLOCKS; ++b) radix_block<L, POW2>(v[b], tw);
    }
#pragma unroll
    for (int b = 0; b < RB_BLOCKS; ++b)
#pragma unroll
        for (int j = 0; j < R; ++j) out[(t * RB_BLOCKS + b) * R + j] = gl_canon(v[b][j]);
}

extern "C" __global__ void proto_r8_general(const u64* in, const u64* tw, u64* out, u32 iters) {
    radix_kernel<3, false, 2>(in, tw, out, iters);
}
extern "C" __global__ void proto_r8_pow2(const u64* in, const u64* tw, u64* out, u32 iters) {
    radix_kernel<3, true, 2>(in, tw, out, iters);
}
extern "C" __global__ void proto_r32_general(const u64* in, const u64* tw, u64* out, u32 iters) {
    radix_kernel<5, false, 1>(in, tw, out, iters);
}
extern "C" __global__ void proto_r32_pow2(const u64* in, const u64* tw, u64* out, u32 iters) {
    radix_kernel<5, true, 1>(in, tw, out, iters);
}
