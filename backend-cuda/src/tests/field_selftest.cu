// The device's Goldilocks arithmetic (common.cuh) in one test kernel, for backend-cuda's device
// tests only: the product kernels (shaders/cuda) use these functions, and this file is not part
// of the shaders crate.
#include "common.cuh"

// Field self-test: out[10i..10i+10] = (a*b, a+b, a-b, then the lazy a*b, a+b, a-b canonicalised,
// then a * 2^s canonicalised with s = 1 + b mod 95 by gl_mul_pow2_lazy, then with f = 1 + i mod 95
// the fused DIT butterfly gl_dit_pow2_lazy's outputs a + b 2^f and a - b 2^f canonicalised and
// gl_pow2_red(a, f) as it is, <= p - 1 and a 2^f or -a 2^f); the canonical a+b and a-b take the
// canonical values, the lazy ones any u64. The backend's device tests compare it with
// backend-api's host arithmetic.
extern "C" __global__ void gl_selftest(const u64* a, const u64* b, u64* out, u64 n) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        const u64 x = a[i], y = b[i];
        out[10 * i] = gl_mul(x, y);
        out[10 * i + 1] = gl_add(gl_canon(x), gl_canon(y));
        out[10 * i + 2] = gl_sub(gl_canon(x), gl_canon(y));
        out[10 * i + 3] = gl_canon(gl_mul_lazy(x, y));
        out[10 * i + 4] = gl_canon(gl_add_lazy(x, y));
        out[10 * i + 5] = gl_canon(gl_sub_lazy(x, y));
        out[10 * i + 6] = gl_canon(gl_mul_pow2_lazy(x, 1 + (int)(y % 95)));
        const int f = 1 + (int)(i % 95);
        u64 u = x, v = y;
        gl_dit_pow2_lazy(u, v, f);
        out[10 * i + 7] = gl_canon(u);
        out[10 * i + 8] = gl_canon(v);
        out[10 * i + 9] = gl_pow2_red(x, f);
    }
}
