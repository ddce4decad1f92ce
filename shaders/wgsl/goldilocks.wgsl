// Goldilocks arithmetic (p = 2^64 - 2^32 + 1) on u32 pairs: an element is vec2<u32>(lo, hi).
// Inputs may be non-canonical (>= p) except where a name ends in _c; every output is canonical.
// The reduction follows backend_api::field::reduce128 step by step.
//
// This is the portable implementation (no 64-bit integer type). goldilocks_int64.wgsl defines
// the same functions in native u64 for adapters with SHADER_INT64; the backend includes one.

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


// a + b mod 2^64 and the carry out.
fn add64(a: vec2<u32>, b: vec2<u32>) -> vec3<u32> {
    let lo = a.x + b.x;
    let c0 = select(0u, 1u, lo < a.x);
    let hi1 = a.y + b.y;
    let c1 = select(0u, 1u, hi1 < a.y);
    let hi = hi1 + c0;
    let c2 = select(0u, 1u, hi < hi1);
    return vec3<u32>(lo, hi, c1 | c2);
}

// a - b mod 2^64 and the borrow out.
fn sub64(a: vec2<u32>, b: vec2<u32>) -> vec3<u32> {
    let lo = a.x - b.x;
    let b0 = select(0u, 1u, a.x < b.x);
    let hi1 = a.y - b.y;
    let b1 = select(0u, 1u, a.y < b.y);
    let hi = hi1 - b0;
    let b2 = select(0u, 1u, hi1 < b0);
    return vec3<u32>(lo, hi, b1 | b2);
}

// x mod p for any 64-bit x: only [p, 2^64) needs a subtraction, and there hi = 0xffffffff.
fn gl_canon(x: vec2<u32>) -> vec2<u32> {
    if x.y == 0xffffffffu && x.x >= 1u {
        return vec2<u32>(x.x - 1u, 0u);
    }
    return x;
}

// a + b for canonical a, b.
fn gl_add_c(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let s = add64(a, b);
    var r = s.xy;
    if s.z != 0u {
        // The true sum is r + 2^64 = r + 2^32 - 1 (mod p); r < 2^64 - 2^33 + 2, so no wrap.
        r = add64(r, vec2<u32>(0xffffffffu, 0u)).xy;
    }
    return gl_canon(r);
}

fn gl_add(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return gl_add_c(gl_canon(a), gl_canon(b));
}

// a - b for canonical a, b.
fn gl_sub_c(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let d = sub64(a, b);
    if d.z != 0u {
        // a - b + p = (a - b + 2^64) - (2^32 - 1).
        return sub64(d.xy, vec2<u32>(0xffffffffu, 0u)).xy;
    }
    return d.xy;
}

fn gl_sub(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return gl_sub_c(gl_canon(a), gl_canon(b));
}

fn gl_mul(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    // The 128-bit product as four words w0..w3.
    let p0 = mul32(a.x, b.x);
    let p1 = mul32(a.x, b.y);
    let p2 = mul32(a.y, b.x);
    let p3 = mul32(a.y, b.y);
    let m = add64(vec2<u32>(p0.y, 0u), vec2<u32>(p1.x, 0u));
    let m2 = add64(m.xy, vec2<u32>(p2.x, 0u));
    let w1 = m2.x;
    let c1 = m2.y; // carry into w2 (0..2)
    let h = add64(vec2<u32>(p1.y, 0u), vec2<u32>(p2.y, 0u));
    let h2 = add64(h.xy, vec2<u32>(p3.x, 0u));
    let h3 = add64(h2.xy, vec2<u32>(c1, 0u));
    let w2 = h3.x;
    let w3 = p3.y + h3.y; // the product is < 2^128, so no overflow
    // lo - hi_hi (2^96 = -1 mod p).
    let t0 = sub64(vec2<u32>(p0.x, w1), vec2<u32>(w3, 0u));
    var t = t0.xy;
    if t0.z != 0u {
        t = sub64(t, vec2<u32>(0xffffffffu, 0u)).xy;
    }
    // + hi_lo * (2^32 - 1) = (hi_lo << 32) - hi_lo.
    let hl = sub64(vec2<u32>(0u, w2), vec2<u32>(w2, 0u)).xy;
    let r0 = add64(t, hl);
    var r = r0.xy;
    if r0.z != 0u {
        r = add64(r, vec2<u32>(0xffffffffu, 0u)).xy;
    }
    return gl_canon(r);
}

// The lazy forms of goldilocks_int64.wgsl, for the NTT's butterflies (any input; an output
// congruent to the result). On u32 pairs the canonical operations serve: they take any input.
fn gl_add_lazy(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return gl_add(a, b);
}

fn gl_sub_lazy(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return gl_sub(a, b);
}

fn gl_mul_lazy(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return gl_mul(a, b);
}
