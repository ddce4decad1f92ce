// Poseidon2 over Goldilocks, width 8, as Plonky3 0.9.0-rc.2 defines it
// (`default_goldilocks_poseidon2_8` of p3-goldilocks; CONVENTIONS.md, "Hash functions"):
// S-box x^7, 4 + 4 full rounds, 22 partial rounds.
//
// Values between operations are lazy: any u64 congruent to the element mod p (gl_add_lazy,
// gl_sub_lazy and gl_mul_lazy of common.cuh, which skip the final comparison with p: 16% fewer
// instructions per permutation than the canonical forms, 19.6k against 23.4k SASS instructions
// for sm_90). The linear layers add in 96 bits and reduce each output once (gl_acc of
// common.cuh): a carry chain of three instructions per term instead of a lazy add's ten. Inputs may be non-canonical; `poseidon2_canon` canonicalises what is stored. The round constants live in
// constant memory (poseidon2_constants.cuh, generated from p3-goldilocks), read with indices that
// are compile-time once the rounds are unrolled, so every thread of a warp reads the same word.
// The internal layer multiplies by the diagonal V = [-2, 1, 2, 1/2, 3, -1/2, -3, -4]
// (MATRIX_DIAG_8_GOLDILOCKS, asserted by shaders/tests/poseidon2_constants.rs) with additions
// and halvings instead of multiplications, as Plonky3 does.
//
// Cost per permutation: 86 S-boxes of 4 multiplications (344 gl_mul), about 60 lazy additions
// (the round constants) and about 830 96-bit additions with 248 reductions (the linear layers).
#pragma once
#include "common.cuh"
#include "poseidon2_constants.cuh"

// x^7: x^2, x^3 = x^2 x, x^4 = (x^2)^2, x^7 = x^3 x^4.
__device__ __forceinline__ u64 p2_sbox(u64 x) {
    const u64 x2 = gl_mul_lazy(x, x);
    const u64 x3 = gl_mul_lazy(x2, x);
    const u64 x4 = gl_mul_lazy(x2, x2);
    return gl_mul_lazy(x3, x4);
}

// x / 2 mod p for any u64 x: x >> 1 when x is even, (x - 1) / 2 + (p + 1) / 2 = (x + p) / 2 when
// odd (below 2^64 for any x).
__device__ __forceinline__ u64 p2_halve(u64 x) {
    return (x >> 1) + ((x & 1) ? 0x7FFFFFFF80000001ull : 0ull);
}

// M4 = [[2,3,1,1],[1,2,3,1],[1,1,2,3],[3,1,1,2]] on s[o .. o + 4) (p3-poseidon2's `apply_mat4`),
// into y[o .. o + 4) as unreduced sums (each of 7 terms: hi <= 6).
__device__ __forceinline__ void p2_mat4(const u64 s[8], int o, gl_acc y[8]) {
    const u64 a0 = s[o], a1 = s[o + 1], a2 = s[o + 2], a3 = s[o + 3];
    const gl_acc t01 = gl_acc_add(gl_acc_of(a0), a1);
    const gl_acc t23 = gl_acc_add(gl_acc_of(a2), a3);
    const gl_acc t0123 = gl_acc_add(t01, t23);
    const gl_acc t01123 = gl_acc_add(t0123, a1);
    const gl_acc t01233 = gl_acc_add(t0123, a3);
    y[o + 3] = gl_acc_add(gl_acc_add(t01233, a0), a0);
    y[o + 1] = gl_acc_add(gl_acc_add(t01123, a2), a2);
    y[o] = gl_acc_add(t01123, t01);
    y[o + 2] = gl_acc_add(t01233, t23);
}

// The external layer [[2 M4, M4], [M4, 2 M4]]: M4 on each half, then each element plus the sum
// of the elements at its position in both halves; each output (21 terms, hi <= 20) reduced once.
__device__ __forceinline__ void p2_external(u64 s[8]) {
    gl_acc y[8];
    p2_mat4(s, 0, y);
    p2_mat4(s, 4, y);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const gl_acc sum = gl_acc_add(y[k], y[k + 4]);
        s[k] = gl_acc_reduce(gl_acc_add(y[k], sum));
        s[k + 4] = gl_acc_reduce(gl_acc_add(y[k + 4], sum));
    }
}

// The internal layer: x_i <- sum(x) + V_i x_i, the sum of the eight kept unreduced (hi <= 7) and
// each output reduced once (hi from -4 to 10).
__device__ __forceinline__ void p2_internal(u64 s[8]) {
    gl_acc sum = gl_acc_of(s[0]);
#pragma unroll
    for (int i = 1; i < 8; ++i) sum = gl_acc_add(sum, s[i]);
    s[0] = gl_acc_reduce(gl_acc_sub(gl_acc_sub(sum, s[0]), s[0]));                       // -2
    s[1] = gl_acc_reduce(gl_acc_add(sum, s[1]));                                          // 1
    s[2] = gl_acc_reduce(gl_acc_add(gl_acc_add(sum, s[2]), s[2]));                        // 2
    s[3] = gl_acc_reduce(gl_acc_add(sum, p2_halve(s[3])));                                // 1/2
    s[4] = gl_acc_reduce(gl_acc_add(gl_acc_add(gl_acc_add(sum, s[4]), s[4]), s[4]));      // 3
    s[5] = gl_acc_reduce(gl_acc_sub(sum, p2_halve(s[5])));                                // -1/2
    s[6] = gl_acc_reduce(gl_acc_sub(gl_acc_sub(gl_acc_sub(sum, s[6]), s[6]), s[6]));      // -3
    const gl_acc m7 = gl_acc_sub(gl_acc_sub(sum, s[7]), s[7]);
    s[7] = gl_acc_reduce(gl_acc_sub(gl_acc_sub(m7, s[7]), s[7]));                         // -4
}

// Full round r (0-3 initial, 4-7 final): add the round's constants, S-box all, external layer.
__device__ __forceinline__ void p2_full_round(u64 s[8], int r) {
#pragma unroll
    for (int i = 0; i < 8; ++i) s[i] = p2_sbox(gl_add_lazy(s[i], P2_EXTERNAL_RC[8 * r + i]));
    p2_external(s);
}

// The permutation, on any u64 elements; the outputs are lazy.
__device__ __forceinline__ void poseidon2_permute(u64 s[8]) {
    p2_external(s);
#pragma unroll
    for (int r = 0; r < 4; ++r) p2_full_round(s, r);
#pragma unroll
    for (int r = 0; r < 22; ++r) {
        s[0] = p2_sbox(gl_add_lazy(s[0], P2_INTERNAL_RC[r]));
        p2_internal(s);
    }
#pragma unroll
    for (int r = 4; r < 8; ++r) p2_full_round(s, r);
}

// The compression of two digests (TruncatedPermutation<_, 2, 4, 8>): perm(left || right)[0..4],
// canonical; each input word is read mod p.
__device__ __forceinline__ void poseidon2_compress(const u64 in[8], u64 out[4]) {
    u64 s[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) s[i] = in[i];
    poseidon2_permute(s);
#pragma unroll
    for (int i = 0; i < 4; ++i) out[i] = gl_canon(s[i]);
}
