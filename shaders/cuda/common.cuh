// Shared definitions of the CUDA kernels: integer types, Goldilocks arithmetic, locations.
//
// Goldilocks: p = 2^64 - 2^32 + 1. Inputs may be non-canonical (any u64 means x mod p); every
// function below returns a canonical value, exactly as backend-api's `field` module does on the
// host (same reduction steps), so device and host agree bit for bit.
#pragma once

typedef unsigned long long u64;
typedef unsigned int u32;
typedef long long i64;

#define GL_P 0xFFFFFFFF00000001ull
#define GL_EPS 0xFFFFFFFFull  // 2^64 mod p = 2^32 - 1

// x mod p for any u64.
__device__ __forceinline__ u64 gl_canon(u64 x) { return x >= GL_P ? x - GL_P : x; }

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
__device__ __forceinline__ u64 gl_mul(u64 a, u64 b) { return gl_reduce128(a * b, __umul64hi(a, b)); }

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
