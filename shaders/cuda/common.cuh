// Shared definitions of the CUDA kernels: integer types, Goldilocks arithmetic, locations.
//
// Goldilocks: p = 2^64 - 2^32 + 1. Inputs may be non-canonical (any u64 means x mod p); every
// function below returns a canonical value, exactly as backend-api's `field` module does on the
// host (same reduction steps), so device and host agree bit for bit.
#pragma once

// Kernel selection. Without KERNEL_SELECT a file defines all its kernels. The backend compiles
// the heavy files (lde.cu, hash.cu) one kernel per NVRTC program, in parallel and only for the
// kernels it uses, with -DKERNEL_SELECT -DWANT_<name>=1: each kernel there sits inside
// `#if ALL_KERNELS || WANT_<name>` (an undefined WANT_<name> is 0 in `#if`).
#ifdef KERNEL_SELECT
#define ALL_KERNELS 0
#else
#define ALL_KERNELS 1
#endif

typedef unsigned long long u64;
typedef unsigned int u32;
typedef long long i64;

#define GL_P 0xFFFFFFFF00000001ull
#define GL_EPS 0xFFFFFFFFull  // 2^64 mod p = 2^32 - 1

// x mod p for any u64.
__device__ __forceinline__ u64 gl_canon(u64 x) { return x >= GL_P ? x - GL_P : x; }

// (hi:lo) - p when it is >= p: only when hi == 0xFFFFFFFF and lo != 0, which random field
// elements hit with probability 2^-32, so a branch (not a select) keeps the common path short.
__device__ __forceinline__ u64 gl_canon_rare(u32 lo, u32 hi) {
    u64 r = ((u64)hi << 32) | lo;
    if (hi == 0xFFFFFFFFu) r = gl_canon(r);
    return r;
}

#ifdef __CUDA_ARCH__
// a + b mod p for canonical a, b: one carry chain; on a carry add 2^32 - 1 (then the sum is < p).
__device__ __forceinline__ u64 gl_add(u64 a, u64 b) {
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
    return gl_canon_rare(lo, hi);
}

// a - b mod p for canonical a, b: on a borrow add p, i.e. subtract 2^32 - 1 (mod 2^64).
__device__ __forceinline__ u64 gl_sub(u64 a, u64 b) {
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
#else
// a + b mod p for canonical a, b.
__device__ __forceinline__ u64 gl_add(u64 a, u64 b) {
    u64 s = a + b;
    // On overflow the true sum is s + 2^64 = s + (2^32 - 1) mod p, and s + 2^32 - 1 < p then.
    if (s < a) return s + GL_EPS;
    return gl_canon(s);
}

// a - b mod p for canonical a, b.
__device__ __forceinline__ u64 gl_sub(u64 a, u64 b) {
    u64 d = a - b;
    return a < b ? d + GL_P : d;  // wraps to a - b + p
}
#endif

// (hi:lo) mod p, using 2^64 = 2^32 - 1 and 2^96 = -1 (mod p); the host's `reduce128` step for step.
__device__ __forceinline__ u64 gl_reduce128(u64 lo, u64 hi) {
    u64 hi_hi = hi >> 32;
    u64 hi_lo = hi & 0xFFFFFFFFull;
    u64 t = lo - hi_hi;
    if (lo < hi_hi) t -= GL_EPS;
    u64 m = hi_lo * GL_EPS;  // < 2^64
    u64 r = t + m;
    if (r < t) r += GL_EPS;
    return gl_canon(r);
}

// a * b mod p for any a, b.
#ifdef __CUDA_ARCH__
// The 128-bit product a * b in 32-bit limbs r3 r2 r1 r0 (9 multiply-adds on one carry chain).
__device__ __forceinline__ void gl_mul_words(u64 a, u64 b, u32& r0, u32& r1, u32& r2, u32& r3) {
    const u32 a0 = (u32)a, a1 = (u32)(a >> 32), b0 = (u32)b, b1 = (u32)(b >> 32);
    asm("mul.lo.u32      %0, %4, %6;\n\t"
        "mul.hi.u32      %1, %4, %6;\n\t"
        "mad.lo.cc.u32   %1, %4, %7, %1;\n\t"
        "madc.hi.u32     %2, %4, %7, 0;\n\t"
        "mad.lo.cc.u32   %1, %5, %6, %1;\n\t"
        "madc.hi.cc.u32  %2, %5, %6, %2;\n\t"
        "madc.hi.u32     %3, %5, %7, 0;\n\t"
        "mad.lo.cc.u32   %2, %5, %7, %2;\n\t"
        "addc.u32        %3, %3, 0;"
        : "=&r"(r0), "=&r"(r1), "=&r"(r2), "=&r"(r3)
        : "r"(a0), "r"(a1), "r"(b0), "r"(b1));
}

// The 128-bit value r3 r2 r1 r0 (32-bit words) reduced lazily: (r1:r0) - r3 + r2 (2^32 - 1), each
// wrap corrected once (the reduction of gl_mul and gl_mul_lazy, on any four words).
__device__ __forceinline__ u64 gl_reduce_words_lazy(u32 r0, u32 r1, u32 r2, u32 r3) {
    u32 lo, hi;
    asm("{\n\t"
        ".reg .u32 bw, m0, m1, c;\n\t"
        // t = (r1:r0) - r3; on a borrow t -= 2^32 - 1 (no second borrow: t >= 2^64 - 2^32 + 1).
        "sub.cc.u32      %0, %2, %5;\n\t"
        "subc.cc.u32     %1, %3, 0;\n\t"
        "subc.u32        bw, 0, 0;\n\t"
        "sub.cc.u32      %0, %0, bw;\n\t"
        "subc.u32        %1, %1, 0;\n\t"
        // m = r2 (2^32 - 1) = (r2 - [r2 != 0]) : (0 - r2).
        "sub.cc.u32      m0, 0, %4;\n\t"
        "subc.u32        m1, %4, 0;\n\t"
        // t += m; on a carry add 2^32 - 1 (no second carry).
        "add.cc.u32      %0, %0, m0;\n\t"
        "addc.cc.u32     %1, %1, m1;\n\t"
        "addc.u32        c, 0, 0;\n\t"
        "neg.s32         c, c;\n\t"
        "add.cc.u32      %0, %0, c;\n\t"
        "addc.u32        %1, %1, 0;\n\t"
        "}"
        : "=&r"(lo), "=&r"(hi)
        : "r"(r0), "r"(r1), "r"(r2), "r"(r3));
    return ((u64)hi << 32) | lo;
}

// The reduction of reduce128 on limbs: x = r0 + r1 2^32 + r2 2^64 + r3 2^96 = (r1:r0) - r3 +
// r2 (2^32 - 1), then the final correction.
__device__ __forceinline__ u64 gl_mul(u64 a, u64 b) {
    u32 r0, r1, r2, r3;
    gl_mul_words(a, b, r0, r1, r2, r3);
    const u64 x = gl_reduce_words_lazy(r0, r1, r2, r3);
    return gl_canon_rare((u32)x, (u32)(x >> 32));
}
#else
__device__ __forceinline__ u64 gl_mul(u64 a, u64 b) { return gl_reduce128(a * b, __umul64hi(a, b)); }
#endif

// Lazy variants for the NTT: inputs and outputs are any u64 congruent to the value mod p (so no
// canonical correction inside a transform); the last pass canonicalises what it stores.
#ifdef __CUDA_ARCH__
// a + b: on a carry add 2^64 mod p = 2^32 - 1, and once more if that carries too.
__device__ __forceinline__ u64 gl_add_lazy(u64 a, u64 b) {
    u32 lo, hi;
    asm("{\n\t"
        ".reg .u32 c;\n\t"
        "add.cc.u32      %0, %2, %4;\n\t"
        "addc.cc.u32     %1, %3, %5;\n\t"
        "addc.u32        c, 0, 0;\n\t"
        "neg.s32         c, c;\n\t"
        "add.cc.u32      %0, %0, c;\n\t"
        "addc.cc.u32     %1, %1, 0;\n\t"
        "addc.u32        c, 0, 0;\n\t"
        "neg.s32         c, c;\n\t"
        "add.cc.u32      %0, %0, c;\n\t"
        "addc.u32        %1, %1, 0;\n\t"
        "}"
        : "=&r"(lo), "=&r"(hi)
        : "r"((u32)a), "r"((u32)(a >> 32)), "r"((u32)b), "r"((u32)(b >> 32)));
    return ((u64)hi << 32) | lo;
}

// a - b: on a borrow subtract 2^32 - 1 (the wrapped 2^64), and once more if that borrows too.
__device__ __forceinline__ u64 gl_sub_lazy(u64 a, u64 b) {
    u32 lo, hi;
    asm("{\n\t"
        ".reg .u32 m;\n\t"
        "sub.cc.u32      %0, %2, %4;\n\t"
        "subc.cc.u32     %1, %3, %5;\n\t"
        "subc.u32        m, 0, 0;\n\t"
        "sub.cc.u32      %0, %0, m;\n\t"
        "subc.cc.u32     %1, %1, 0;\n\t"
        "subc.u32        m, 0, 0;\n\t"
        "sub.cc.u32      %0, %0, m;\n\t"
        "subc.u32        %1, %1, 0;\n\t"
        "}"
        : "=&r"(lo), "=&r"(hi)
        : "r"((u32)a), "r"((u32)(a >> 32)), "r"((u32)b), "r"((u32)(b >> 32)));
    return ((u64)hi << 32) | lo;
}

// a * b: the product and reduction of gl_mul without the final correction.
__device__ __forceinline__ u64 gl_mul_lazy(u64 a, u64 b) {
    u32 r0, r1, r2, r3;
    gl_mul_words(a, b, r0, r1, r2, r3);
    return gl_reduce_words_lazy(r0, r1, r2, r3);
}
#else
__device__ __forceinline__ u64 gl_add_lazy(u64 a, u64 b) { return gl_add(gl_canon(a), gl_canon(b)); }
__device__ __forceinline__ u64 gl_sub_lazy(u64 a, u64 b) { return gl_sub(gl_canon(a), gl_canon(b)); }
__device__ __forceinline__ u64 gl_mul_lazy(u64 a, u64 b) { return gl_mul(a, b); }
#endif

// A sum of lazy elements held in 96 bits and reduced once: the value lo + hi 2^64, `hi` a signed
// count of 2^64 wraps (|hi| < 2^30). Adding or subtracting a u64 (or another sum) is one
// three-instruction carry chain, where a lazy add or subtract corrects its carry at once (ten);
// gl_acc_reduce folds `hi` back with 2^64 = 2^32 - 1 (mod p) in thirteen. Poseidon2's linear
// layers (poseidon2.cuh) sum up to 21 terms per output this way.
struct gl_acc {
    u64 lo;
    int hi;
};

__device__ __forceinline__ gl_acc gl_acc_of(u64 x) {
    gl_acc r;
    r.lo = x;
    r.hi = 0;
    return r;
}

#ifdef __CUDA_ARCH__
__device__ __forceinline__ gl_acc gl_acc_make(u32 lo, u32 mid, int hi) {
    gl_acc r;
    r.lo = ((u64)mid << 32) | lo;
    r.hi = hi;
    return r;
}

__device__ __forceinline__ gl_acc gl_acc_add(gl_acc a, u64 b) {
    u32 lo, mid;
    int hi;
    asm("add.cc.u32      %0, %3, %6;\n\t"
        "addc.cc.u32     %1, %4, %7;\n\t"
        "addc.s32        %2, %5, 0;"
        : "=&r"(lo), "=&r"(mid), "=&r"(hi)
        : "r"((u32)a.lo), "r"((u32)(a.lo >> 32)), "r"(a.hi), "r"((u32)b), "r"((u32)(b >> 32)));
    return gl_acc_make(lo, mid, hi);
}

__device__ __forceinline__ gl_acc gl_acc_add(gl_acc a, gl_acc b) {
    u32 lo, mid;
    int hi;
    asm("add.cc.u32      %0, %3, %6;\n\t"
        "addc.cc.u32     %1, %4, %7;\n\t"
        "addc.s32        %2, %5, %8;"
        : "=&r"(lo), "=&r"(mid), "=&r"(hi)
        : "r"((u32)a.lo), "r"((u32)(a.lo >> 32)), "r"(a.hi), "r"((u32)b.lo), "r"((u32)(b.lo >> 32)), "r"(b.hi));
    return gl_acc_make(lo, mid, hi);
}

__device__ __forceinline__ gl_acc gl_acc_sub(gl_acc a, u64 b) {
    u32 lo, mid;
    int hi;
    asm("sub.cc.u32      %0, %3, %6;\n\t"
        "subc.cc.u32     %1, %4, %7;\n\t"
        "subc.s32        %2, %5, 0;"
        : "=&r"(lo), "=&r"(mid), "=&r"(hi)
        : "r"((u32)a.lo), "r"((u32)(a.lo >> 32)), "r"(a.hi), "r"((u32)b), "r"((u32)(b >> 32)));
    return gl_acc_make(lo, mid, hi);
}

// lo + hi 2^64 as a lazy u64: r = lo + m with m = hi (2^32 - 1) as a 64-bit two's complement
// word, hi 2^32 - sext(hi) (the high word takes hi's sign); then the wrap of that add corrected
// once: d = carry - [hi < 0] is +1 when the sum passed 2^64 (add 2^32 - 1: r < 2^63 then, no
// second carry) and -1 when it fell below 0 (subtract it, d (2^32 - 1) formed the same way:
// r >= 2^63 then, no second borrow). Thirteen instructions.
__device__ __forceinline__ u64 gl_acc_reduce(gl_acc a) {
    u32 lo, hi;
    asm("{\n\t"
        ".reg .b32 m0, m1, c, s, d, ds, e0, e1;\n\t"
        "shr.s32         s, %4, 31;\n\t"
        "sub.cc.u32      m0, 0, %4;\n\t"
        "subc.u32        m1, %4, s;\n\t"
        "add.cc.u32      %0, %2, m0;\n\t"
        "addc.cc.u32     %1, %3, m1;\n\t"
        "addc.u32        c, 0, 0;\n\t"
        "add.s32         d, c, s;\n\t"
        "shr.s32         ds, d, 31;\n\t"
        "sub.cc.u32      e0, 0, d;\n\t"
        "subc.u32        e1, d, ds;\n\t"
        "add.cc.u32      %0, %0, e0;\n\t"
        "addc.u32        %1, %1, e1;\n\t"
        "}"
        : "=&r"(lo), "=&r"(hi)
        : "r"((u32)a.lo), "r"((u32)(a.lo >> 32)), "r"(a.hi));
    return ((u64)hi << 32) | lo;
}
#else
// The same values, written with the carries the device branch keeps in its flags.
__device__ __forceinline__ gl_acc gl_acc_add(gl_acc a, u64 b) {
    gl_acc r;
    r.lo = a.lo + b;
    r.hi = a.hi + (r.lo < b ? 1 : 0);
    return r;
}

__device__ __forceinline__ gl_acc gl_acc_add(gl_acc a, gl_acc b) {
    gl_acc r;
    r.lo = a.lo + b.lo;
    r.hi = a.hi + b.hi + (r.lo < b.lo ? 1 : 0);
    return r;
}

__device__ __forceinline__ gl_acc gl_acc_sub(gl_acc a, u64 b) {
    gl_acc r;
    r.lo = a.lo - b;
    r.hi = a.hi - (a.lo < b ? 1 : 0);
    return r;
}

__device__ __forceinline__ u64 gl_acc_reduce(gl_acc a) {
    const u64 m = (u64)((i64)a.hi * (i64)GL_EPS);
    u64 r = a.lo + m;
    const int d = (r < a.lo ? 1 : 0) - (a.hi < 0 ? 1 : 0);
    return r + (u64)((i64)d * (i64)GL_EPS);
}
#endif

#ifdef __CUDA_ARCH__
// Multiplication by 2^s, 0 < s < 96 (a compile-time constant once the callers are unrolled):
// x 2^s = P (160 bits, words P0..P4) = (P1:P0) + P2 (2^32 - 1) - P3 - P4 2^32 (mod p), using
// 2^64 = 2^32 - 1 and 2^96 = -1.
__device__ __forceinline__ u64 gl_mul_pow2_lazy(u64 x, int s) {
    const u32 lo = (u32)x, hi = (u32)(x >> 32);
    if (s < 32) {
        // P3 = 0: (P1:P0) + P2 (2^32 - 1).
        const u32 p0 = lo << s, p1 = __funnelshift_l(lo, hi, s), p2 = hi >> (32 - s);
        u32 rlo, rhi;
        asm("{\n\t"
            ".reg .u32 m0, m1, c;\n\t"
            "sub.cc.u32      m0, 0, %4;\n\t"
            "subc.u32        m1, %4, 0;\n\t"
            "add.cc.u32      %0, %2, m0;\n\t"
            "addc.cc.u32     %1, %3, m1;\n\t"
            "addc.u32        c, 0, 0;\n\t"
            "neg.s32         c, c;\n\t"
            "add.cc.u32      %0, %0, c;\n\t"
            "addc.u32        %1, %1, 0;\n\t"
            "}"
            : "=&r"(rlo), "=&r"(rhi)
            : "r"(p0), "r"(p1), "r"(p2));
        return ((u64)rhi << 32) | rlo;
    }
    if (s < 64) {
        const int t = s - 32;  // P0 = 0
        const u32 p1 = lo << t, p2 = t ? __funnelshift_l(lo, hi, t) : hi, p3 = t ? hi >> (32 - t) : 0;
        return gl_reduce_words_lazy(0, p1, p2, p3);
    }
    // s in [64, 96): P0 = P1 = 0; (P4:P3:P2) = x << (s - 64). P = (P2 - P4) 2^32 - P2 - P3.
    const int t = s - 64;
    const u32 p2 = lo << t, p3 = t ? __funnelshift_l(lo, hi, t) : hi, p4 = t ? hi >> (32 - t) : 0;
    return gl_sub_lazy(gl_reduce_words_lazy(0, 0, p2, p3), (u64)p4 << 32);
}
#else
__device__ __forceinline__ u64 gl_reduce_words_lazy(u32 r0, u32 r1, u32 r2, u32 r3) {
    return gl_reduce128(((u64)r1 << 32) | r0, ((u64)r3 << 32) | r2);
}
__device__ __forceinline__ u64 gl_mul_pow2_lazy(u64 x, int s) {
    return s < 64 ? gl_mul(x, 1ull << s) : gl_mul(gl_mul(x, 1ull << (s - 64)), GL_EPS);
}
#endif

// Whether gl_pow2_red(x, s) returns -x 2^s rather than x 2^s (mod p).
__device__ __forceinline__ bool gl_pow2_neg(int s) { return s >= 64; }

#ifdef __CUDA_ARCH__
// x 2^s reduced to a value R <= p - 1, 0 < s < 96 (a compile-time constant once the callers are
// unrolled), for any u64 x: R = x 2^s (mod p) for s < 64 and R = -x 2^s (mod p) for s >= 64
// (gl_pow2_neg). The bound lets gl_add_red / gl_sub_red use one correction each.
// Each form adds (A + 1) (2^32 - 1) = (A : ~A) (32-bit words, valid for A <= 2^32 - 1) in place of
// A (2^32 - 1) to a 64-bit value B, giving T (64 bits) and the carry c of T_true = B + (A : ~A):
// B + A (2^32 - 1) = T_true - (2^32 - 1) = T + c 2^64 - (2^32 - 1) = T - (1 - c) (2^32 - 1) (mod
// p). With c = 1 that is T = T_true - 2^64 < (A : ~A) <= 2^64 - 2^32 when B's bound makes it so
// (below); with c = 0, T = T_true >= (A : ~A) >= 2^32 - 1, so T - (2^32 - 1) does not borrow and
// is <= 2^64 - 1 - (2^32 - 1) = p - 1. The correction is a mask subtraction: m = c - 1 (0 or
// 2^32 - 1) from one addc, then T - m.
__device__ __forceinline__ u64 gl_pow2_red(u64 x, int s) {
    const u32 lo = (u32)x, hi = (u32)(x >> 32);
    u32 rlo, rhi;
    if (s < 32) {
        // x 2^s = (P2 : P1 : P0), P2 < 2^s <= 2^31: x 2^s = (P1:P0) + P2 (2^32 - 1) (mod p), so
        // B = (P1:P0), A = P2; T_true < 2^64 + (P2 : ~P2) < 2^64 + 2^63 (c <= 1; with c = 1,
        // T < (P2 : ~P2) < 2^63).
        const u32 p0 = lo << s, p1 = __funnelshift_l(lo, hi, s), p2 = hi >> (32 - s);
        asm("{\n\t"
            ".reg .u32 m;\n\t"
            "add.cc.u32      %0, %2, %5;\n\t"
            "addc.cc.u32     %1, %3, %4;\n\t"
            "addc.u32        m, -1, 0;\n\t"
            "sub.cc.u32      %0, %0, m;\n\t"
            "subc.u32        %1, %1, 0;\n\t"
            "}"
            : "=&r"(rlo), "=&r"(rhi)
            : "r"(p0), "r"(p1), "r"(p2), "r"(~p2));
    } else if (s < 64) {
        // x 2^s = (P3 : P2 : P1 : 0), t = s - 32, P1 = lo << t, P3 < 2^t <= 2^31:
        // x 2^s = (P1:0) + P2 (2^32 - 1) - P3 (mod p). T_true = (P1:0) + (P2 : ~P2) = (P1 + P2 :
        // ~P2) (one carry, from the high words) <= (2^32 - 1) 2^32 + 2^32 (2^32 - 1) < 2^65, and
        // with c = 1, T = T_true - 2^64 <= 2^64 - 2^33. u = T - (1 - c) (2^32 - 1) <= p - 1 as above.
        // Then R = u - P3: without a borrow R <= u <= p - 1; with one, u < P3 < 2^31 and
        // R = u - P3 + 2^64 - (2^32 - 1) is in [2^64 - 2^31 - 2^32, p - 1] (no second borrow).
        const int t = s - 32;
        const u32 p1 = lo << t, p2 = t ? __funnelshift_l(lo, hi, t) : hi, p3 = t ? hi >> (32 - t) : 0;
        asm("{\n\t"
            ".reg .u32 m;\n\t"
            "add.cc.u32      %1, %2, %3;\n\t"
            "addc.u32        m, -1, 0;\n\t"
            "sub.cc.u32      %0, %5, m;\n\t"
            "subc.u32        %1, %1, 0;\n\t"
            "sub.cc.u32      %0, %0, %4;\n\t"
            "subc.cc.u32     %1, %1, 0;\n\t"
            "subc.u32        m, 0, 0;\n\t"
            "sub.cc.u32      %0, %0, m;\n\t"
            "subc.u32        %1, %1, 0;\n\t"
            "}"
            : "=&r"(rlo), "=&r"(rhi)
            : "r"(p1), "r"(p2), "r"(p3), "r"(~p2));
    } else {
        // x 2^s = (P4 : P3 : P2 : 0 : 0), t = s - 64, P4 < 2^t <= 2^31: with 2^128 = -2^32,
        // -x 2^s = P3 + P4 2^32 - P2 (2^32 - 1) = (P4 + 1 : P3) + ~P2 (2^32 - 1) (mod p), as
        // -P2 = ~P2 - (2^32 - 1) and -(2^32 - 1)^2 = 2^32 (mod p). B = (P4 + 1 : P3) <= 2^63 + 2^32,
        // A = ~P2; T_true < 2^63 + 2^32 + 2^64 (c <= 1; with c = 1, T < B).
        const int t = s - 64;
        const u32 p2 = lo << t, p3 = t ? __funnelshift_l(lo, hi, t) : hi, p4 = t ? hi >> (32 - t) : 0;
        asm("{\n\t"
            ".reg .u32 m;\n\t"
            "add.cc.u32      %0, %3, %2;\n\t"
            "addc.cc.u32     %1, %4, %5;\n\t"
            "addc.u32        m, -1, 0;\n\t"
            "sub.cc.u32      %0, %0, m;\n\t"
            "subc.u32        %1, %1, 0;\n\t"
            "}"
            : "=&r"(rlo), "=&r"(rhi)
            : "r"(p2), "r"(p3), "r"(p4 + 1), "r"(~p2));
    }
    return ((u64)rhi << 32) | rlo;
}

// x + r for any x and r <= p - 1 (gl_pow2_red's bound), lazily: z = r + (2^32 - 1) < 2^64, then
// x + z = x + r + 2^64 (mod p): with a carry the 64-bit sum is x + r (mod p); without one it is
// >= z >= 2^32 - 1, and subtracting 2^32 - 1 gives x + r without a borrow.
__device__ __forceinline__ u64 gl_add_red(u64 x, u64 r) {
    u32 lo, hi;
    asm("{\n\t"
        ".reg .u32 z0, z1, m;\n\t"
        "add.cc.u32      z0, %4, -1;\n\t"
        "addc.u32        z1, %5, 0;\n\t"
        "add.cc.u32      %0, %2, z0;\n\t"
        "addc.cc.u32     %1, %3, z1;\n\t"
        "addc.u32        m, -1, 0;\n\t"
        "sub.cc.u32      %0, %0, m;\n\t"
        "subc.u32        %1, %1, 0;\n\t"
        "}"
        : "=&r"(lo), "=&r"(hi)
        : "r"((u32)x), "r"((u32)(x >> 32)), "r"((u32)r), "r"((u32)(r >> 32)));
    return ((u64)hi << 32) | lo;
}

// x - r for any x and r <= p, lazily: on a borrow subtract 2^32 - 1 (the wrapped 2^64), once:
// the wrapped difference is >= 2^64 - r >= 2^32 - 1.
__device__ __forceinline__ u64 gl_sub_red(u64 x, u64 r) {
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
        : "r"((u32)x), "r"((u32)(x >> 32)), "r"((u32)r), "r"((u32)(r >> 32)));
    return ((u64)hi << 32) | lo;
}
#else
__device__ __forceinline__ u64 gl_pow2_red(u64 x, int s) {
    const u64 r = gl_mul_pow2_lazy(x, s);
    return s >= 64 ? gl_sub(0, gl_canon(r)) : gl_canon(r);
}
__device__ __forceinline__ u64 gl_add_red(u64 x, u64 r) { return gl_add_lazy(x, r); }
__device__ __forceinline__ u64 gl_sub_red(u64 x, u64 r) { return gl_sub_lazy(x, r); }
#endif

// The DIT butterfly (x, y) -> (x + y 2^s, x - y 2^s) for 0 < s < 96, lazily (any u64 in and out):
// one reduction of y 2^s (or of its negation) shared by both outputs, each with one correction.
__device__ __forceinline__ void gl_dit_pow2_lazy(u64& x, u64& y, int s) {
    const u64 r = gl_pow2_red(y, s);
    const u64 a = gl_add_red(x, r), b = gl_sub_red(x, r);
    x = gl_pow2_neg(s) ? b : a;
    y = gl_pow2_neg(s) ? a : b;
}

// E_m for m = 1..6: 2^(E_m) is this field's primitive 2^m-th root of unity root_of_unity(m)
// (w_2 = 2^96 = -1, w_4 = 2^48, w_8 = 2^120, w_16 = 2^156, w_32 = 2^78, w_64 = 2^39), so that
// w_(2^m)^t = 2^(t E_m mod 192), a shift when that exponent is below 96 and minus a shift above.
__host__ __device__ __forceinline__ constexpr int gl_root_exp(int m) {
    return m == 1 ? 96 : m == 2 ? 48 : m == 3 ? 120 : m == 4 ? 156 : m == 5 ? 78 : 39;
}

// The portable multiplication (the reference the self-test compares the device's with).
__device__ __forceinline__ u64 gl_mul_ref(u64 a, u64 b) { return gl_reduce128(a * b, __umul64hi(a, b)); }

// A location in a two-buffer address space: bit 63 selects base 1 (scratch / destination
// buffer), the low 63 bits are an element offset.
#define LOC_B1 (1ull << 63)
__device__ __forceinline__ u64* loc_ptr(u64* b0, u64* b1, u64 loc) {
    return (loc & LOC_B1) ? b1 + (loc & ~LOC_B1) : b0 + loc;
}

// Reverses the low `bits` bits of i (bits <= 32).
__device__ __forceinline__ u32 bitrev32(u32 i, u32 bits) { return bits == 0 ? 0u : (__brev(i) >> (32 - bits)); }

// Byte swap of a u64 (big-endian serialisation).
__device__ __forceinline__ u64 bswap64(u64 x) {
    u32 lo = (u32)x, hi = (u32)(x >> 32);
    u32 slo = __byte_perm(lo, 0, 0x0123), shi = __byte_perm(hi, 0, 0x0123);
    return ((u64)slo << 32) | shi;
}

// Global -> shared copy of one V without a register round trip (cp.async), so a thread keeps
// many loads in flight; completed by cp_async_wait_all.
template <typename V>
__device__ __forceinline__ void cp_async(V* dst_shared, const V* src_global) {
#ifdef __CUDA_ARCH__
    u32 saddr;
    asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(saddr) : "l"(dst_shared));
    if (sizeof(V) == 16) asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(saddr), "l"(src_global));
    else asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(saddr), "l"(src_global));
#else
    *dst_shared = *src_global;
#endif
}

__device__ __forceinline__ void cp_async_wait_all() {
#ifdef __CUDA_ARCH__
    asm volatile("cp.async.commit_group;\n\tcp.async.wait_group 0;" ::: "memory");
#endif
}

// Programmatic dependent launch (sm_90+): let the next kernel of the stream start its blocks, and
// wait for the kernel before to complete with its memory visible. No-ops below sm_90, where
// launches are serialised anyway.
__device__ __forceinline__ void griddep_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ void griddep_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// x^e mod p, square-and-multiply: one product per bit of e and one per set bit.
__device__ __forceinline__ u64 gl_pow(u64 x, u64 e) {
    u64 acc = 1;
    while (e) {
        if (e & 1) acc = gl_mul(acc, x);
        x = gl_mul(x, x);
        e >>= 1;
    }
    return acc;
}

// x^-1 = x^(p - 2) for x != 0 (Fermat).
__device__ __forceinline__ u64 gl_inv(u64 x) { return gl_pow(x, GL_P - 2); }
