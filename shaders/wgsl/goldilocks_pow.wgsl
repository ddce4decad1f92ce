// x^e mod p, square-and-multiply (at most 32 iterations), over either Goldilocks arithmetic
// (goldilocks.wgsl or goldilocks_int64.wgsl, whichever the module is built with).
fn gl_pow(x0: vec2<u32>, e0: u32) -> vec2<u32> {
    var acc = vec2<u32>(1u, 0u);
    var x = x0;
    var e = e0;
    while e != 0u {
        if (e & 1u) == 1u {
            acc = gl_mul(acc, x);
        }
        x = gl_mul(x, x);
        e = e >> 1u;
    }
    return acc;
}
