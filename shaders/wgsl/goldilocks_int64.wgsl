// Goldilocks arithmetic (p = 2^64 - 2^32 + 1) in native u64, for adapters with SHADER_INT64:
// the same functions, on the same vec2<u32>(lo, hi) elements, as the portable goldilocks.wgsl,
// with the same contract (inputs may be non-canonical except where a name ends in _c; every
// output is canonical) and the same reduction (backend_api::field::reduce128), in about half the
// instructions: 64-bit adds, compares and 32 x 32 -> 64-bit products are single operations or
// carry pairs for the compiler instead of u32 sequences.

const GL_P: u64 = 0xffffffff00000001lu;
// 2^64 mod p = 2^32 - 1.
const GL_EPS: u64 = 0xfffffffflu;

fn to64(v: vec2<u32>) -> u64 {
    return u64(v.x) | (u64(v.y) << 32u);
}

fn from64(x: u64) -> vec2<u32> {
    return vec2<u32>(u32(x & 0xfffffffflu), u32(x >> 32u));
}

fn canon64(x: u64) -> u64 {
    return select(x, x - GL_P, x >= GL_P);
}

// x mod p for any 64-bit x.
fn gl_canon(x: vec2<u32>) -> vec2<u32> {
    return from64(canon64(to64(x)));
}

// a + b for canonical a, b.
fn add64c(a: u64, b: u64) -> u64 {
    let s = a + b;
    // On a carry the true sum is s + 2^64 = s + 2^32 - 1 (mod p); then s < 2^64 - 2^33 + 2.
    return canon64(select(s, s + GL_EPS, s < a));
}

// a - b for canonical a, b.
fn sub64c(a: u64, b: u64) -> u64 {
    let d = a - b;
    // On a borrow, a - b + p = (a - b + 2^64) - (2^32 - 1).
    return select(d, d - GL_EPS, a < b);
}

fn gl_add_c(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return from64(add64c(to64(a), to64(b)));
}

fn gl_add(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return from64(add64c(canon64(to64(a)), canon64(to64(b))));
}

fn gl_sub_c(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return from64(sub64c(to64(a), to64(b)));
}

fn gl_sub(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return from64(sub64c(canon64(to64(a)), canon64(to64(b))));
}

fn gl_mul(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return from64(canon64(to64(gl_mul_lazy(a, b))));
}

// Lazy forms for the NTT's butterflies: any u64 in, any u64 out that is congruent to the result
// mod p (not necessarily canonical), with no canonicalising step; a pass canonicalises what it
// stores.

// a + b: a carry is worth 2^64 = 2^32 - 1 (mod p). Adding it carries again only when
// s >= 2^64 - 2^32 + 1; the sum is then below 2^32 - 2, so a third carry cannot happen.
fn add64_lazy(a: u64, b: u64) -> u64 {
    let s = a + b;
    let s1 = s + select(0lu, GL_EPS, s < a);
    return s1 + select(0lu, GL_EPS, s1 < s);
}

// a - b: a borrow is worth -2^64 = -(2^32 - 1) (mod p). Subtracting it borrows again only when
// d < 2^32 - 1; the difference is then at least 2^64 - 2^32 + 1, so a third borrow cannot happen.
fn sub64_lazy(a: u64, b: u64) -> u64 {
    let d = a - b;
    let d1 = d - select(0lu, GL_EPS, a < b);
    return d1 - select(0lu, GL_EPS, d1 > d);
}

fn gl_add_lazy(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return from64(add64_lazy(to64(a), to64(b)));
}

fn gl_sub_lazy(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return from64(sub64_lazy(to64(a), to64(b)));
}

// a * b, reduced to a u64 congruent to the product.
fn gl_mul_lazy(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    // The 128-bit product as (lo, hi) from four 32 x 32 -> 64-bit products.
    let p0 = u64(a.x) * u64(b.x);
    let p1 = u64(a.x) * u64(b.y);
    let p2 = u64(a.y) * u64(b.x);
    let p3 = u64(a.y) * u64(b.y);
    let mid = p1 + p2;
    // A carry out of mid is worth 2^96, i.e. 2^32 in hi.
    let mid_carry = select(0lu, 1lu << 32u, mid < p1);
    let lo = p0 + (mid << 32u);
    let hi = p3 + (mid >> 32u) + mid_carry + select(0lu, 1lu, lo < p0);
    // lo - hi_hi (2^96 = -1 mod p), then + hi_lo (2^32 - 1) (2^64 = 2^32 - 1 mod p).
    let hi_hi = hi >> 32u;
    let t0 = lo - hi_hi;
    let t = select(t0, t0 - GL_EPS, lo < hi_hi);
    let u = (hi & 0xfffffffflu) * GL_EPS;
    let r = t + u;
    // u <= (2^32 - 1)^2 = 2^64 - 2^33 + 1, so after a carry r < u and r + 2^32 - 1 < 2^64.
    return from64(select(r, r + GL_EPS, r < t));
}
