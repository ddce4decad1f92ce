// Powers and inverses over either Goldilocks arithmetic (goldilocks.wgsl or
// goldilocks_int64.wgsl, whichever the module is built with).

// x^e mod p, square-and-multiply (at most 32 iterations).
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

// 1 / x = x^(p - 2) for x != 0 (Fermat), over the exponent's 64 bits from the top: 64 iterations.
fn gl_inverse(x: vec2<u32>) -> vec2<u32> {
    // p - 2 = 0xfffffffe_ffffffff.
    let e = vec2<u32>(0xffffffffu, 0xfffffffeu);
    var acc = vec2<u32>(1u, 0u);
    for (var bit = 64u; bit > 0u; bit--) {
        acc = gl_mul(acc, acc);
        let b = bit - 1u;
        let word = select(e.x, e.y, b >= 32u);
        if ((word >> (b & 31u)) & 1u) == 1u {
            acc = gl_mul(acc, x);
        }
    }
    return acc;
}
