// Throughput prototypes for the coset LDE's arithmetic (not used by the backend): which pipe a
// Goldilocks multiply and a radix-2 butterfly can use on sm_90, what power-of-two inner twiddles
// save, what a redundant representation of four 24-bit limbs saves, and how fast the tensor cores
// run radix-16 blocks as byte-matrix products (the last two sections: mma.sync, and warpgroup MMA
// on sm_90a). Timed by lab/cuda-probes/src/bin/ntt_proto.rs,
// which checks every kernel's output against host arithmetic on a sample of threads.
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

// x + y for any x and y <= 2^64 - 2^32 (a canonical product): one correction. A carry leaves
// s = x + y - 2^64 <= 2^64 - 2^32 - 1, so s + 2^32 - 1 cannot carry again. (x - y with one
// correction is common.cuh's gl_sub_red.)
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
                    v[j1] = gl_sub_red(x, y);
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

// OUTER = false (POW2 only): the R-point DFT alone, without the outer multiplies.
template <int L, bool POW2, bool OUTER = true>
__device__ __forceinline__ void radix_block(u64 (&v)[1 << L], const u64* __restrict__ tw) {
    constexpr int R = 1 << L;
    if (POW2 && OUTER) {
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

// ---------------------------------------------------------------------------------------------
// The same radix-2^L blocks (the pow2 kind) in a redundant representation: four signed 32-bit
// limbs of 24 bits each with 8 bits of headroom, x = x0 + x1 2^24 + x2 2^48 + x3 2^72 mod p. As p
// divides 2^96 + 1, 2^96 = -1 mod p, so a power-of-two inner twiddle 2^e is a rotation of the
// limbs by e / 24 places (those passing 2^96 negated) and a shift by e % 24 inside the limbs (the
// bits that leave a limb added to the next one, the top limb's to the bottom negated), and an
// addition or subtraction is four independent 32-bit ones with no modular correction: the limbs
// grow by a bit a stage and stay below 2^30 through five stages. This is the form of Emmart's
// Goldilocks NTT (yrrid/GoldilocksNTT); the arithmetic here is written from that fact alone.
// An outer (general) twiddle w multiplies the limbs directly: w as limbs of 24, 24 and 16 bits,
// twelve signed 32 x 32 -> 64-bit products summed into four columns (the columns at 2^96 and
// 2^120 folded back negated), then the columns' carries (s96_carry). The element of twiddle 1 is
// only settled (its limbs' carries moved on, s96_settle) so that it stays in range.

struct S96 {
    int x0, x1, x2, x3;
};

#define S96_M 0xFFFFFF

__device__ __forceinline__ S96 s96_from_u64(u64 v) {
    const u32 lo = (u32)v, hi = (u32)(v >> 32);
    return {(int)(lo & S96_M), (int)(__funnelshift_r(lo, hi, 24) & S96_M), (int)(hi >> 16), 0};
}

// Columns c_k (weights 2^(24k), |c_k| < 2^56) as limbs: x0, x2, x3 in [0, 2^24), x1 within 2^10
// of that range.
__device__ __forceinline__ S96 s96_carry(long long c0, long long c1, long long c2, long long c3) {
    S96 r;
    c1 += c0 >> 24;
    c2 += c1 >> 24;
    c3 += c2 >> 24;
    r.x2 = (int)(c2 & S96_M);
    r.x3 = (int)(c3 & S96_M);
    const long long e = (c0 & S96_M) - (c3 >> 24);  // c3 >> 24 at 2^96 is -(c3 >> 24) at 2^0
    r.x0 = (int)(e & S96_M);
    r.x1 = (int)(c1 & S96_M) + (int)(e >> 24);
    return r;
}

// x w for limbs |x_i| < 2^30 and any u64 w.
__device__ __forceinline__ S96 s96_mul(const S96& x, u64 w) {
    const S96 b = s96_from_u64(w);
    const long long c0 = (long long)x.x0 * b.x0 - (long long)x.x2 * b.x2 - (long long)x.x3 * b.x1;
    const long long c1 = (long long)x.x0 * b.x1 + (long long)x.x1 * b.x0 - (long long)x.x3 * b.x2;
    const long long c2 = (long long)x.x0 * b.x2 + (long long)x.x1 * b.x1 + (long long)x.x2 * b.x0;
    const long long c3 = (long long)x.x1 * b.x2 + (long long)x.x2 * b.x1 + (long long)x.x3 * b.x0;
    return s96_carry(c0, c1, c2, c3);
}

// The limbs' carries moved one place up, the top one's to the bottom negated: x1 .. x3 in
// [0, 2^24) and x0 within 2^8 of it, for limbs below 2^31.
__device__ __forceinline__ S96 s96_settle(S96 a) {
    a.x1 += a.x0 >> 24;
    a.x0 &= S96_M;
    a.x2 += a.x1 >> 24;
    a.x1 &= S96_M;
    a.x3 += a.x2 >> 24;
    a.x2 &= S96_M;
    a.x0 -= a.x3 >> 24;
    a.x3 &= S96_M;
    return a;
}

// 2^e a for 0 <= e < 192 (a compile-time constant once the callers are unrolled).
__device__ __forceinline__ S96 s96_pow2(const S96& a, int e) {
    const int q = e / 24, r = e % 24;
    const int in[4] = {a.x0, a.x1, a.x2, a.x3};
    int z[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const int i = (k - q + 8) % 4;
        z[k] = ((i + q) / 4) % 2 ? -in[i] : in[i];
    }
    if (r == 0) return {z[0], z[1], z[2], z[3]};
    S96 o;
    o.x0 = ((z[0] << r) & S96_M) - (z[3] >> (24 - r));
    o.x1 = ((z[1] << r) & S96_M) + (z[0] >> (24 - r));
    o.x2 = ((z[2] << r) & S96_M) + (z[1] >> (24 - r));
    o.x3 = ((z[3] << r) & S96_M) + (z[2] >> (24 - r));
    return o;
}

// The canonical field element (once per value, for the store).
__device__ __forceinline__ u64 s96_canon(S96 a) {
    a = s96_settle(s96_settle(a));
    const int l[4] = {a.x0, a.x1, a.x2, a.x3};
    u64 acc = 0, pw = 1;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const u64 limb = l[k] >= 0 ? (u64)l[k] : GL_P - (u64)(-(long long)l[k]);
        acc = gl_add(acc, gl_mul(limb, pw));
        pw = gl_mul(pw, 1ull << 24);
    }
    return acc;
}

template <int L>
__device__ __forceinline__ void s96_block(S96 (&v)[1 << L], const u64* __restrict__ tw) {
    constexpr int R = 1 << L;
    v[0] = s96_settle(v[0]);
#pragma unroll
    for (int j = 1; j < R; ++j) v[j] = s96_mul(v[j], __ldg(tw + j));
#pragma unroll
    for (int s = 0; s < L; ++s) {
        const int half = 1 << s;
#pragma unroll
        for (int q = 0; q < R / 2; ++q) {
            const int j0 = ((q >> s) << (s + 1)) | (q & (half - 1)), j1 = j0 + half;
            const int e = ((q & (half - 1)) * gl_root_exp(s + 1)) % 192;
            const S96 x = v[j0], y = s96_pow2(v[j1], e);
            v[j0] = {x.x0 + y.x0, x.x1 + y.x1, x.x2 + y.x2, x.x3 + y.x3};
            v[j1] = {x.x0 - y.x0, x.x1 - y.x1, x.x2 - y.x2, x.x3 - y.x3};
        }
    }
}

template <int L>
__device__ __forceinline__ void s96_kernel(const u64* in, const u64* tw, u64* out, u32 iters) {
    constexpr int R = 1 << L;
    const u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    S96 v[R];
#pragma unroll
    for (int j = 0; j < R; ++j) v[j] = s96_from_u64(in[t * R + j]);
    for (u32 i = 0; i < iters; ++i) s96_block<L>(v, tw);
#pragma unroll
    for (int j = 0; j < R; ++j) out[t * R + j] = s96_canon(v[j]);
}

extern "C" __global__ void proto_r16_s96(const u64* in, const u64* tw, u64* out, u32 iters) {
    s96_kernel<4>(in, tw, out, iters);
}
extern "C" __global__ void proto_r32_s96(const u64* in, const u64* tw, u64* out, u32 iters) {
    s96_kernel<5>(in, tw, out, iters);
}

// ---------------------------------------------------------------------------------------------
// Radix-16 blocks on the tensor cores: integer MMA (mma.sync m16n8k32, u8 x u8 -> s32).
//
// The radix-16 block above (15 general outer multiplies, then the 16-point DFT with power-of-two
// inner twiddles) is a linear map Y = W X over the field, where column i of W is the block applied
// to the unit vector e_i. Split every input into bytes, X_i = sum_b 2^(8b) x_ib (any u64: the
// split is exact, so lazy inputs need no canonicalisation), and fold the byte weight into the
// matrix: W'[k][(i, b)] = W[k][i] 2^(8b) mod p, canonical, itself split into bytes W'_a. Then
//
//   Y_k = sum_a 2^(8a) S_ak,   S_ak = sum_(i, b) W'_a[k][(i, b)] x_ib  <=  128 * 255^2  <  2^23,
//
// a product of a (8 x 16) x 128 byte matrix by a 128 x (vectors) byte matrix: 8 M-tiles (a) of 16
// rows (k) and 4 k-steps of 32 (four inputs of eight bytes each), which is mma.m16n8k32 with u8
// operands and exact s32 sums. The sums recombine as L = sum_(a<4) S_a 2^(8a) and
// T = sum_(a>=4) S_a 2^(8(a-4)), both < 2^48, and Y = L + T 2^32 reduces to a lazy u64 in a few
// integer instructions (tc_reduce). In an NTT the outer twiddles of a block depend only on its
// position, shared by every column, so W' would be built once per position and serve all columns;
// here it is built once per thread block, in the prologue.
//
// Within k-step s the 32 k values are ordered so that a thread's two B registers are the low and
// the high word of one input: k = 4t + j is byte j and k = 16 + 4t + j byte 4 + j of input 4s + t
// (t = lane % 4), one 64-bit shared load. A warp holds 32 vectors (one per lane: a thread's 16
// values of the harness) in shared memory, element-major, each row of 32 vectors XOR-swizzled
// (tc_swz) so that the B loads (8 vectors x 4 inputs per half-warp) and the 16-byte stores of the
// outputs (2 vectors x 8 outputs per quarter-warp) are both free of bank conflicts. NT n-tiles of
// 8 vectors share each A fragment (one 16-byte shared load per NT MMAs).

#define TC_WARPS 8  // the harness's 256-thread blocks

__device__ __forceinline__ void mma_u8(int (&c)[4], const uint4& a, u32 b0, u32 b1) {
    asm("mma.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
}

// L + T 2^32 as a lazy u64, for L, T < 2^48. In words, L = (l0, l1) and T = (t0, t1) with l1, t1
// < 2^16: the sum is (l0, l1 + t0) + hi 2^64 with hi = t1 + carry < 2^17, and 2^64 = 2^32 - 1, so
// y = (l0, l1 + t0) + hi 2^32 - hi, whose carry out (c, never a borrow: hi 2^32 >= hi) is worth
// 2^32 - 1 again; after it y < 2^49, so that last addition cannot carry.
__device__ __forceinline__ u64 tc_reduce(u64 L, u64 T) {
    u32 y0, y1;
    asm("{\n\t"
        ".reg .u32 w1, hi, c, m;\n\t"
        "add.cc.u32      w1, %3, %4;\n\t"
        "addc.u32        hi, %5, 0;\n\t"
        "add.cc.u32      %1, w1, hi;\n\t"
        "addc.u32        c, 0, 0;\n\t"
        "sub.cc.u32      %0, %2, hi;\n\t"
        "subc.cc.u32     %1, %1, 0;\n\t"
        "subc.u32        c, c, 0;\n\t"
        "neg.s32         m, c;\n\t"
        "add.cc.u32      %0, %0, m;\n\t"
        "addc.u32        %1, %1, 0;\n\t"
        "}"
        : "=&r"(y0), "=&r"(y1)
        : "r"((u32)L), "r"((u32)(L >> 32)), "r"((u32)T), "r"((u32)(T >> 32)));
    return ((u64)y1 << 32) | y0;
}

// Column of vector v in row e of a warp's element-major tile.
__device__ __forceinline__ int tc_swz(int e, int v) { return v ^ (((e & 1) << 3) | ((e & 2) << 1)); }

// The block's matrix with the byte weights folded in, W[k][i] 2^(8b) mod p (canonical), at
// scratch + 256 + (16k + i) 8 + b; column i of W (the block applied to e_i, by 16 threads) goes
// to scratch[16k + i] first. 2,304 u64 of block-shared scratch; every thread may read the result
// when this returns. OUTER = false: W is the 16-point DFT alone (the outer multiplies are left to
// the integer pipe).
template <bool OUTER = true>
__device__ __forceinline__ const u64* tc_build_wb(u64* scratch, const u64* tw) {
    u64* wcol = scratch;
    u64* wb = scratch + 256;
    if (threadIdx.x < 16) {
        u64 v[16];
#pragma unroll
        for (int j = 0; j < 16; ++j) v[j] = j == (int)threadIdx.x ? 1 : 0;
        radix_block<4, true, OUTER>(v, tw);
#pragma unroll
        for (int k = 0; k < 16; ++k) wcol[k * 16 + threadIdx.x] = gl_canon(v[k]);
    }
    __syncthreads();
    for (int e = threadIdx.x; e < 2048; e += blockDim.x) wb[e] = gl_canon(gl_mul(wcol[e >> 3], 1ull << (8 * (e & 7))));
    __syncthreads();
    return wb;
}

template <int NT, bool S_OUTER>
__device__ __forceinline__ void tc_kernel(const u64* in, const u64* tw, u64* out, u32 iters) {
    __shared__ uint4 afrag[8 * 4 * 32];       // [a][s][lane]: 16 KB
    __shared__ u64 xs[TC_WARPS][16 * 32];     // [warp][element][vector, swizzled]: 32 KB
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const u64 gt = (u64)blockIdx.x * blockDim.x + threadIdx.x;

    // Prologue: W 2^(8b) (xs as the scratch), then the A fragments.
    const u64* wb = tc_build_wb(&xs[0][0], tw);
    u32* aw = reinterpret_cast<u32*>(afrag);
    for (int w = threadIdx.x; w < 8 * 4 * 32 * 4; w += blockDim.x) {
        // Register r of lane (g, t) in M-tile a, k-step s: row g + 8 (r & 1), input 4s + t,
        // bytes 4 (r >> 1) .. + 3 of that input.
        const int r = w & 3, l = (w >> 2) & 31, s = (w >> 7) & 3, a = w >> 9;
        const int row = (l >> 2) + 8 * (r & 1), i = 4 * s + (l & 3), b0 = 4 * (r >> 1);
        u32 word = 0;
#pragma unroll
        for (int j = 0; j < 4; ++j) word |= (u32)((wb[(row * 16 + i) * 8 + b0 + j] >> (8 * a)) & 0xFF) << (8 * j);
        aw[w] = word;
    }
    __syncthreads();

    u64* x = xs[warp];
#pragma unroll
    for (int e = 0; e < 16; ++e) x[e * 32 + tc_swz(e, lane)] = in[gt * 16 + e];
    __syncwarp();
    const int g = lane >> 2, t = lane & 3;
    for (u32 it = 0; it < iters; ++it) {
#pragma unroll
        for (int round = 0; round < 4 / NT; ++round) {
            const int v0 = round * NT * 8;
            u32 bf[NT][4][2];
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                for (int s = 0; s < 4; ++s) {
                    const int e = 4 * s + t;
                    const u64 val = x[e * 32 + tc_swz(e, v0 + 8 * nt + g)];
                    bf[nt][s][0] = (u32)val;
                    bf[nt][s][1] = (u32)(val >> 32);
                }
            __syncwarp();
            u64 L[NT][4], T[NT][4];
            if (S_OUTER) {
                // Every (a, n-tile) sum its own chain over the four k-steps: 8 NT independent
                // chains, recombined once at the end (two 32-bit multiply-adds and one wide one
                // per half, c < 2^23 so c_a + c_(a+1) 2^8 < 2^32).
                int c[8][NT][4];
#pragma unroll
                for (int a = 0; a < 8; ++a)
#pragma unroll
                    for (int nt = 0; nt < NT; ++nt) c[a][nt][0] = c[a][nt][1] = c[a][nt][2] = c[a][nt][3] = 0;
#pragma unroll
                for (int s = 0; s < 4; ++s)
#pragma unroll
                    for (int a = 0; a < 8; ++a) {
                        const uint4 af = afrag[(a * 4 + s) * 32 + lane];
#pragma unroll
                        for (int nt = 0; nt < NT; ++nt) mma_u8(c[a][nt], af, bf[nt][s][0], bf[nt][s][1]);
                    }
#pragma unroll
                for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                    for (int q = 0; q < 4; ++q) {
                        const u32 p01 = (u32)c[0][nt][q] + ((u32)c[1][nt][q] << 8);
                        const u32 p23 = (u32)c[2][nt][q] + ((u32)c[3][nt][q] << 8);
                        const u32 p45 = (u32)c[4][nt][q] + ((u32)c[5][nt][q] << 8);
                        const u32 p67 = (u32)c[6][nt][q] + ((u32)c[7][nt][q] << 8);
                        L[nt][q] = (u64)p01 + (u64)p23 * 65536u;
                        T[nt][q] = (u64)p45 + (u64)p67 * 65536u;
                    }
            } else {
#pragma unroll
            for (int a = 0; a < 8; ++a) {
                int c[NT][4];
#pragma unroll
                for (int nt = 0; nt < NT; ++nt) c[nt][0] = c[nt][1] = c[nt][2] = c[nt][3] = 0;
#pragma unroll
                for (int s = 0; s < 4; ++s) {
                    const uint4 af = afrag[(a * 4 + s) * 32 + lane];
#pragma unroll
                    for (int nt = 0; nt < NT; ++nt) mma_u8(c[nt], af, bf[nt][s][0], bf[nt][s][1]);
                }
#pragma unroll
                for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                    for (int q = 0; q < 4; ++q) {
                        const u64 term = (u64)(u32)c[nt][q] << (8 * (a & 3));
                        if (a == 0) L[nt][q] = term;
                        else if (a < 4) L[nt][q] += term;
                        else if (a == 4) T[nt][q] = term;
                        else T[nt][q] += term;
                    }
            }
            }
            // c[q]: output g + 8 (q >> 1) of vector 2t + (q & 1) of the n-tile.
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                for (int hf = 0; hf < 2; ++hf) {
                    const int e = g + 8 * hf;
                    ulonglong2 y;
                    y.x = tc_reduce(L[nt][2 * hf], T[nt][2 * hf]);
                    y.y = tc_reduce(L[nt][2 * hf + 1], T[nt][2 * hf + 1]);
                    *reinterpret_cast<ulonglong2*>(&x[e * 32 + tc_swz(e, v0 + 8 * nt + 2 * t)]) = y;
                }
            __syncwarp();
        }
    }
#pragma unroll
    for (int e = 0; e < 16; ++e) out[gt * 16 + e] = gl_canon(x[e * 32 + tc_swz(e, lane)]);
}

extern "C" __global__ void proto_r16_pow2(const u64* in, const u64* tw, u64* out, u32 iters) {
    radix_kernel<4, true, 2>(in, tw, out, iters);
}
extern "C" __global__ void proto_r16_tc2(const u64* in, const u64* tw, u64* out, u32 iters) {
    tc_kernel<2, false>(in, tw, out, iters);
}
extern "C" __global__ void proto_r16_tc4(const u64* in, const u64* tw, u64* out, u32 iters) {
    tc_kernel<4, false>(in, tw, out, iters);
}
extern "C" __global__ void proto_r16_tc1s(const u64* in, const u64* tw, u64* out, u32 iters) {
    tc_kernel<1, true>(in, tw, out, iters);
}
extern "C" __global__ void proto_r16_tc2s(const u64* in, const u64* tw, u64* out, u32 iters) {
    tc_kernel<2, true>(in, tw, out, iters);
}

// ---------------------------------------------------------------------------------------------
// The same radix-16 blocks through warpgroup MMA (wgmma, sm_90a only): D = W' X with W' (M = 128
// rows (a, k), K = 128) in registers across the warpgroup (proto_r16_wg) or in shared memory
// (the others), and X (K x N vectors) read by the tensor cores straight from shared memory, N = 64
// or 32 vectors per instruction. The example compiles this file for sm_90a on an sm_90 device.
//
// A warpgroup (128 threads) owns 128 vectors (its threads' harness values), stored as the K-major,
// unswizzled canonical layout: core matrices of 8 vectors x 16 bytes (two field elements), the
// eight 16-byte chunks of a vector 128 bytes apart (leading byte offset) and groups of 8 vectors
// 1 KB apart (stride byte offset); K runs over the vector's 128 bytes in order, so k-step s reads
// elements 4s .. 4s + 3. Row R = 64h + 16w + r of W' (M-half h, warp w, row r in the warp's
// sixteen) is output k = 4w + (r & 7) / 2 and byte a = 4 ((r & 7) % 2) + 2h + r / 8, so that a
// thread's four accumulator rows per column are a-values 0..3 (even groupID) or 4..7 (odd): L or
// T of tc_reduce, swapped with the neighbour lane (lane ^ 4) so that each reduces half the
// columns. Each element of the result goes back to the tile for the next iteration, after a
// warpgroup barrier (each warp's tensor core reads the whole chunk for its own rows, so a warp
// whose part is done must wait for the others before overwriting it), and a fence makes those
// generic-proxy stores visible to the tensor cores' async proxy.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

__device__ __forceinline__ u64 wg_desc(u32 smem_addr) {
    // Start address, leading byte offset 128, stride byte offset 1024, each >> 4; no swizzle.
    return (u64)((smem_addr & 0x3FFFF) >> 4) | ((u64)(128 >> 4) << 16) | ((u64)(1024 >> 4) << 32);
}

__device__ __forceinline__ void wg_mma(int (&d)[32], const u32 (&a)[4], u64 desc, int accumulate) {
    asm volatile(
        "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %36, 0;\n\t"
        "wgmma.mma_async.sync.aligned.m64n64k32.s32.u8.u8 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
        "{%32, %33, %34, %35}, %37, p;\n\t}"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]),
          "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]),
          "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]),
          "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(accumulate), "l"(desc));
}

// The same with W' in shared memory too (descriptor `adesc`, the tile layout), for N = 64 and 32.
// `accumulate` (scale-d) is an immediate: a register holding it could be merged with accumulator
// registers that hold the same value, and ptxas then serialises every wgmma of the kernel.
template <int ACC>
__device__ __forceinline__ void wg_mma_ss(int (&d)[32], u64 adesc, u64 bdesc) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n64k32.s32.u8.u8 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, %34;"
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31])
                 : "l"(adesc), "l"(bdesc), "n"(ACC));
}

template <int ACC>
__device__ __forceinline__ void wg_mma_ss(int (&d)[16], u64 adesc, u64 bdesc) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n32k32.s32.u8.u8 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, %18;"
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15])
                 : "l"(adesc), "l"(bdesc), "n"(ACC));
}

// Byte offset of element e of vector v in a warpgroup's tile.
__device__ __forceinline__ u32 wg_at(int v, int e) { return (v >> 3) * 1024 + (e >> 1) * 128 + (v & 7) * 16 + (e & 1) * 8; }

// This thread's partial sum (L for even warps, T for odd ones, over the four a-values its rows hold)
// of column 8j + 2t + cq of the chunk.
template <int N>
__device__ __forceinline__ u64 wg_partial(const int (&d)[2][N / 2], int j, int cq) {
    const u32 p0 = (u32)d[0][4 * j + cq] + ((u32)d[0][4 * j + 2 + cq] << 8);
    const u32 p1 = (u32)d[1][4 * j + cq] + ((u32)d[1][4 * j + 2 + cq] << 8);
    return (u64)p0 + (u64)p1 * 65536u;
}

// The epilogue of chunk c with the a-values split by lane: a thread's partial sums over its four
// a-values (L for even groupIDs, T for odd ones); lanes g and g ^ 1 swap the halves they do not
// reduce, so that each reduces half the columns, and store the results to the tile.
// TWI: this thread's output k_out is multiplied on the integer pipe by the next block's outer
// twiddle, twk[18 (v % 16)] for vector v (one shared load and one lazy multiply per output, as an
// NTT pass would apply the next window's twiddles per position), and kept when `mul` holds (all
// but the last iteration: a select, so that the epilogue has no branch).
template <int N, bool TWI = false>
__device__ __forceinline__ void wg_epilogue_lane(const int (&d)[2][N / 2], unsigned char* tile, int c, int k_out, int t, int hi,
                                                 const u64* twk = nullptr, bool mul = false) {
#pragma unroll
    for (int jj = 0; jj < N / 16; ++jj)
#pragma unroll
        for (int cq = 0; cq < 2; ++cq) {
            const u64 part0 = wg_partial<N>(d, jj, cq), part1 = wg_partial<N>(d, jj + N / 16, cq);
            // Even lanes reduce the columns of the first half, odd ones the second.
            const u64 send = hi ? part0 : part1;
            const u64 mine = hi ? part1 : part0;
            const u64 got = __shfl_xor_sync(0xFFFFFFFFu, send, 4);
            u64 y = tc_reduce(hi ? got : mine, hi ? mine : got);
            const int col = 8 * (jj + hi * (N / 16)) + 2 * t + cq;
            if constexpr (TWI) {
                const u64 yt = gl_mul_lazy(y, twk[18 * ((c * N + col) & 15)]);
                y = mul ? yt : y;
            }
            *reinterpret_cast<u64*>(tile + wg_at(c * N + col, k_out)) = y;
        }
}

// The XCHG epilogue of chunk c for a warp holding T (ODD) or L: the partials of the columns the
// partner warp (warp ^ 1) reduces go to their outputs' slots in the tile; after a warpgroup
// barrier, this warp reads the partner's partials of its own columns (the first half of the
// n-blocks for L, the second for T), reduces and overwrites the same slots.
template <int N, bool ODD>
__device__ __forceinline__ void wg_epilogue_x(const int (&d)[2][N / 2], unsigned char* tile, int c, int k_out, int t, int wg) {
    constexpr int HALF = N / 16;
    u64 mine[HALF][2];
#pragma unroll
    for (int jj = 0; jj < HALF; ++jj)
#pragma unroll
        for (int cq = 0; cq < 2; ++cq) {
            const int j_own = jj + (ODD ? HALF : 0), j_other = jj + (ODD ? 0 : HALF);
            mine[jj][cq] = wg_partial<N>(d, j_own, cq);
            *reinterpret_cast<u64*>(tile + wg_at(c * N + 8 * j_other + 2 * t + cq, k_out)) = wg_partial<N>(d, j_other, cq);
        }
    asm volatile("bar.sync %0, 128;" ::"r"(wg + 1) : "memory");
#pragma unroll
    for (int jj = 0; jj < HALF; ++jj)
#pragma unroll
        for (int cq = 0; cq < 2; ++cq) {
            u64* slot = reinterpret_cast<u64*>(tile + wg_at(c * N + 8 * (jj + (ODD ? HALF : 0)) + 2 * t + cq, k_out));
            const u64 other = *slot;
            *slot = ODD ? tc_reduce(other, mine[jj][cq]) : tc_reduce(mine[jj][cq], other);
        }
}

// N: vectors per instruction (64 or 32); A_SMEM: W' read by the tensor cores from shared memory (in
// the tile layout, rows for vectors) instead of from 32 registers per thread.
// XCHG: the a-values split by warp (even warps L, odd warps T) instead of by lane, the partial
// sums swapped through the chunk's own slots in the tile (wg_epilogue_x) instead of by shuffles,
// so that no lane selects between two roles.
// DBUF: two tiles per warpgroup in dynamic shared memory (80 KB a block with W'), read and written
// in turn by the iterations, so that no epilogue overwrites a chunk that a tensor core may still
// read: one barrier per iteration instead of one per chunk as well.
// TWI: W' is the 16-point DFT alone and the outer multiplies run on the integer pipe, as an NTT
// pass whose twiddles change with the block's position would run them: on load for the first
// iteration, then in each epilogue for the next one, each output multiplied by a twiddle read from
// a shared table by its vector (rows of 18 words, so that the 16 addresses of a load fall in
// distinct banks; every row holds the same 16 twiddles, so the map is the other kernels').
template <int N, bool A_SMEM, bool XCHG, bool DBUF = false, bool TWI = false>
__device__ __forceinline__ void wg_kernel(const u64* in, const u64* tw, u64* out, u32 iters) {
    static_assert(A_SMEM || (N == 64 && !XCHG), "W' in registers is written for N = 64, a split by lane");
    static_assert(!DBUF || (A_SMEM && !XCHG), "the double-buffered form keeps W' in shared memory");
    static_assert(!TWI || (A_SMEM && !XCHG && !DBUF), "the integer twiddles are written for the lane-split form");
    __shared__ u64 twt[TWI ? 16 * 18 : 1];
    constexpr int TILE = 128 * 128;  // one warpgroup's 128 vectors
    unsigned char* tiles;            // the warpgroups' tiles, DBUF ? 2 : 1 each
    unsigned char* atile;            // W' (A_SMEM), 16 KB
    if constexpr (DBUF) {
        extern __shared__ __align__(1024) unsigned char wg_dynamic[];
        atile = wg_dynamic;
        tiles = wg_dynamic + TILE;
    } else {
        __shared__ __align__(1024) unsigned char tiles_s[2][TILE];
        __shared__ __align__(1024) unsigned char atile_s[A_SMEM ? TILE : 16];
        atile = atile_s;
        tiles = &tiles_s[0][0];
    }
    const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3, wg = threadIdx.x >> 7;
    const int g = lane >> 2, t = lane & 3;
    const u64 gt = (u64)blockIdx.x * blockDim.x + threadIdx.x;

    // Prologue: W 2^(8b) (the tiles as the scratch), then W' in this thread's A registers or in
    // the A tile.
    const u64* wb = tc_build_wb<!TWI>(reinterpret_cast<u64*>(tiles), tw);
    if constexpr (TWI) {
        for (int x = threadIdx.x; x < 16 * 18; x += blockDim.x) {
            const int k = x % 18;
            twt[x] = k == 0 || k >= 16 ? 1 : tw[k];
        }
    }
    // Register r of M-half h, k-step s: row 16w + g + 8 (r & 1), bytes 4t + 16 (r >> 1) .. + 3 of the
    // step's 32.
    u32 afr[2][4][4];
    const int k_out = XCHG ? 8 * (warp >> 1) + g : 4 * warp + (g >> 1);
    if (A_SMEM) {
        // Row R = 64h + m, m = 16w' + g' + 8 r8 (the accumulator row layout): output 4w' + g'/2 and
        // byte a = 4 (g' & 1) + 2h + r8, or with XCHG output 8 (w' >> 1) + g' and byte
        // a = 4 (w' & 1) + 2h + r8; column K: byte K % 8 of input K / 8.
        for (int x = threadIdx.x; x < 128 * 128; x += blockDim.x) {
            const int R = x >> 7, K = x & 127, m = R & 63, w4 = m >> 4, gg = m & 7;
            const int ko = XCHG ? 8 * (w4 >> 1) + gg : 4 * w4 + (gg >> 1);
            const int a = 4 * (XCHG ? w4 & 1 : gg & 1) + 2 * (R >> 6) + ((m >> 3) & 1);
            atile[wg_at(R, K >> 3) + (K & 7)] = (unsigned char)(wb[(ko * 16 + (K >> 3)) * 8 + (K & 7)] >> (8 * a));
        }
    } else {
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int s = 0; s < 4; ++s)
#pragma unroll
                for (int r = 0; r < 4; ++r) {
                    const int a = 4 * (g & 1) + 2 * h + (r & 1);
                    const int kk = 4 * t + 16 * (r >> 1);
                    u32 word = 0;
#pragma unroll
                    for (int j = 0; j < 4; ++j) {
                        const int k = 32 * s + kk + j, i = k >> 3, b = k & 7;
                        word |= (u32)((wb[(k_out * 16 + i) * 8 + b] >> (8 * a)) & 0xFF) << (8 * j);
                    }
                    afr[h][s][r] = word;
                }
    }
    // Every thread is done with wb (in the tiles) before the tiles take the inputs.
    __syncthreads();
    unsigned char* tile = tiles + wg * (DBUF ? 2 : 1) * TILE;
    const int v_own = threadIdx.x & 127;
#pragma unroll
    for (int e = 0; e < 16; ++e) {
        const u64 x = in[gt * 16 + e];
        *reinterpret_cast<u64*>(tile + wg_at(v_own, e)) = TWI && e > 0 ? gl_mul_lazy(x, tw[e]) : x;
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    const u32 tile_addr = (u32)__cvta_generic_to_shared(tile);
    const u32 a_addr = (u32)__cvta_generic_to_shared(atile);
    const int hi = g & 1;  // this thread's rows are T (a 4..7) rather than L
    for (u32 it = 0; it < iters; ++it) {
        // DBUF: iteration it reads tile (it & 1) and writes the other.
        unsigned char* dst = DBUF ? tile + ((it + 1) & 1) * TILE : tile;
        const u32 src_addr = DBUF ? tile_addr + (it & 1) * TILE : tile_addr;
#pragma unroll
        for (int c = 0; c < 128 / N; ++c) {
            int d[2][N / 2];
            asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
            for (int s = 0; s < 4; ++s)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const u64 bdesc = wg_desc(src_addr + c * (N / 8) * 1024 + s * 256);
                    if constexpr (A_SMEM) {
                        const u64 adesc = wg_desc(a_addr + h * 8 * 1024 + s * 256);
                        if (s == 0) wg_mma_ss<0>(d[h], adesc, bdesc);
                        else wg_mma_ss<1>(d[h], adesc, bdesc);
                    }
                    else wg_mma(d[h], afr[h][s], bdesc, s);
                }
            asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
            asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
            // Each warp's tensor core reads the whole chunk of the tile for its sixteen rows; the
            // first warp through must not overwrite the chunk while another still reads it (with
            // DBUF the epilogue writes the other tile).
            if constexpr (!DBUF) asm volatile("bar.sync %0, 128;" ::"r"(wg + 1) : "memory");
            if constexpr (XCHG) {
                if (warp & 1) wg_epilogue_x<N, true>(d, tile, c, k_out, t, wg);
                else wg_epilogue_x<N, false>(d, tile, c, k_out, t, wg);
                continue;
            }
            wg_epilogue_lane<N, TWI>(d, dst, c, k_out, t, hi, twt + k_out, it + 1 < iters);
        }
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        asm volatile("bar.sync %0, 128;" ::"r"(wg + 1) : "memory");
    }
    const unsigned char* last = DBUF ? tile + (iters & 1) * TILE : tile;
#pragma unroll
    for (int e = 0; e < 16; ++e) out[gt * 16 + e] = gl_canon(*reinterpret_cast<const u64*>(last + wg_at(v_own, e)));
}

extern "C" __global__ void proto_r16_wg(const u64* in, const u64* tw, u64* out, u32 iters) {
    wg_kernel<64, false, false>(in, tw, out, iters);
}
extern "C" __global__ void proto_r16_wgs64(const u64* in, const u64* tw, u64* out, u32 iters) {
    wg_kernel<64, true, false>(in, tw, out, iters);
}
extern "C" __global__ void proto_r16_wgs32(const u64* in, const u64* tw, u64* out, u32 iters) {
    wg_kernel<32, true, false>(in, tw, out, iters);
}
extern "C" __global__ void __launch_bounds__(256, 3) proto_r16_wgs32o3(const u64* in, const u64* tw, u64* out, u32 iters) {
    wg_kernel<32, true, false>(in, tw, out, iters);
}
// Dynamic shared memory: 5 x 16 KB (PROTO_WGD_SMEM in the example).
extern "C" __global__ void proto_r16_wgd64(const u64* in, const u64* tw, u64* out, u32 iters) {
    wg_kernel<64, true, false, true>(in, tw, out, iters);
}
extern "C" __global__ void proto_r16_wgt64(const u64* in, const u64* tw, u64* out, u32 iters) {
    wg_kernel<64, true, false, false, true>(in, tw, out, iters);
}
extern "C" __global__ void proto_r16_wgx64(const u64* in, const u64* tw, u64* out, u32 iters) {
    wg_kernel<64, true, true>(in, tw, out, iters);
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL
