// The 32 x 32 -> 64-bit product for adapters without SHADER_INT64 (WebGPU, most mobile GPUs).
// The full 64-bit product of two u32, as (lo, hi), from 16-bit halves (WGSL has no mul-high).
fn mul32(a: u32, b: u32) -> vec2<u32> {
    let a0 = a & 0xffffu;
    let a1 = a >> 16u;
    let b0 = b & 0xffffu;
    let b1 = b >> 16u;
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let p11 = a1 * b1;
    // At most (2^16 - 1)^2 + 2 (2^16 - 1) = 2^32 - 1: no overflow.
    let mid = p01 + (p00 >> 16u) + (p10 & 0xffffu);
    return vec2<u32>((mid << 16u) | (p00 & 0xffffu), p11 + (mid >> 16u) + (p10 >> 16u));
}
