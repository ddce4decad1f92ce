// The 32 x 32 -> 64-bit product through one native u64 multiply, for adapters with
// SHADER_INT64 (the wgpu backend uses it there unless told to stay portable). Same contract as
// mul32.wgsl: the full product as (lo, hi).
fn mul32(a: u32, b: u32) -> vec2<u32> {
    let p = u64(a) * u64(b);
    return vec2<u32>(u32(p), u32(p >> 32u));
}
