// Poseidon2 over Goldilocks, width 8, as Plonky3 0.9.0-rc.2 defines it
// (`default_goldilocks_poseidon2_8` of p3-goldilocks; CONVENTIONS.md, "Hash functions"): S-box
// x^7, the external layer once, 4 full rounds, 22 partial rounds, 4 full rounds. Elements are
// vec2<u32>(lo, hi) over the Goldilocks helpers of goldilocks.wgsl / goldilocks_int64.wgsl; the
// round constants and the internal diagonal are poseidon2_constants.wgsl's.
//
// Every round is written out and every constant is read at a literal index, so the state stays
// in registers, the constants are immediates, and a permutation runs no loop: on a software
// adapter, which caps an invocation's loop iterations (backend-wgpu's hash.rs), a leaf's sponge
// spends one iteration per block of 4 elements.

// x^7, canonical out; the intermediate powers are lazy (congruent, not necessarily canonical).
fn p2_sbox(x: vec2<u32>) -> vec2<u32> {
    let x2 = gl_mul_lazy(x, x);
    let x3 = gl_mul_lazy(x2, x);
    let x4 = gl_mul_lazy(x2, x2);
    return gl_mul(x4, x3);
}

// M4 = [[2, 3, 1, 1], [1, 2, 3, 1], [1, 1, 2, 3], [3, 1, 1, 2]] (p3-poseidon2's MDSMat4) times
// (x0, x1, x2, x3), in the additions of Plonky3's `apply_mat4`; canonical in and out.
fn p2_m4(x0: vec2<u32>, x1: vec2<u32>, x2: vec2<u32>, x3: vec2<u32>) -> array<vec2<u32>, 4> {
    let t01 = gl_add_c(x0, x1);
    let t23 = gl_add_c(x2, x3);
    let t0123 = gl_add_c(t01, t23);
    let t01123 = gl_add_c(t0123, x1);
    let t01233 = gl_add_c(t0123, x3);
    return array<vec2<u32>, 4>(
        gl_add_c(t01123, t01),
        gl_add_c(t01123, gl_add_c(x2, x2)),
        gl_add_c(t01233, t23),
        gl_add_c(t01233, gl_add_c(x0, x0)),
    );
}

// The external layer [[2 M4, M4], [M4, 2 M4]]: with y = M4 (s0..s3) and z = M4 (s4..s7),
// s_i = 2 y_i + z_i and s_{4+i} = y_i + 2 z_i.
fn p2_external(s: ptr<function, array<vec2<u32>, 8>>) {
    let y = p2_m4((*s)[0], (*s)[1], (*s)[2], (*s)[3]);
    let z = p2_m4((*s)[4], (*s)[5], (*s)[6], (*s)[7]);

    let t0 = gl_add_c(y[0], z[0]);
    let t1 = gl_add_c(y[1], z[1]);
    let t2 = gl_add_c(y[2], z[2]);
    let t3 = gl_add_c(y[3], z[3]);
    (*s)[0] = gl_add_c(y[0], t0);
    (*s)[4] = gl_add_c(z[0], t0);
    (*s)[1] = gl_add_c(y[1], t1);
    (*s)[5] = gl_add_c(z[1], t1);
    (*s)[2] = gl_add_c(y[2], t2);
    (*s)[6] = gl_add_c(z[2], t2);
    (*s)[3] = gl_add_c(y[3], t3);
    (*s)[7] = gl_add_c(z[3], t3);
}

// x / 2 for canonical x: x >> 1, plus (p + 1) / 2 when x is odd (then x >> 1 = (x - 1) / 2 and
// the sum (x + p) / 2 is below p).
fn p2_halve(x: vec2<u32>) -> vec2<u32> {
    let h = vec2<u32>((x.x >> 1u) | (x.y << 31u), x.y >> 1u);
    return gl_add_c(h, select(vec2<u32>(0u, 0u), vec2<u32>(0x80000001u, 0x7fffffffu), (x.x & 1u) == 1u));
}

// The internal layer J + diag(V): s_i = sum(s) + V_i s_i, with V = MATRIX_DIAG_8_GOLDILOCKS =
// [-2, 1, 2, 1/2, 3, -1/2, -3, -4] (P2_INTERNAL_DIAG) applied as additions, subtractions and
// halvings instead of products.
fn p2_internal(s: ptr<function, array<vec2<u32>, 8>>) {
    let sum = gl_add_c(
        gl_add_c(gl_add_c((*s)[0], (*s)[1]), gl_add_c((*s)[2], (*s)[3])),
        gl_add_c(gl_add_c((*s)[4], (*s)[5]), gl_add_c((*s)[6], (*s)[7])),
    );
    let x4 = (*s)[4];
    let x6 = (*s)[6];
    let x7 = gl_add_c((*s)[7], (*s)[7]);
    (*s)[0] = gl_sub_c(sum, gl_add_c((*s)[0], (*s)[0]));
    (*s)[1] = gl_add_c(sum, (*s)[1]);
    (*s)[2] = gl_add_c(sum, gl_add_c((*s)[2], (*s)[2]));
    (*s)[3] = gl_add_c(sum, p2_halve((*s)[3]));
    (*s)[4] = gl_add_c(sum, gl_add_c(gl_add_c(x4, x4), x4));
    (*s)[5] = gl_sub_c(sum, p2_halve((*s)[5]));
    (*s)[6] = gl_sub_c(sum, gl_add_c(gl_add_c(x6, x6), x6));
    (*s)[7] = gl_sub_c(sum, gl_add_c(x7, x7));
}

// A full round: add the round's constants c0..c7, S-box every element, the external layer.
fn p2_full(
    s: ptr<function, array<vec2<u32>, 8>>,
    c0: vec2<u32>,
    c1: vec2<u32>,
    c2: vec2<u32>,
    c3: vec2<u32>,
    c4: vec2<u32>,
    c5: vec2<u32>,
    c6: vec2<u32>,
    c7: vec2<u32>,
) {
    (*s)[0] = p2_sbox(gl_add_c((*s)[0], c0));
    (*s)[1] = p2_sbox(gl_add_c((*s)[1], c1));
    (*s)[2] = p2_sbox(gl_add_c((*s)[2], c2));
    (*s)[3] = p2_sbox(gl_add_c((*s)[3], c3));
    (*s)[4] = p2_sbox(gl_add_c((*s)[4], c4));
    (*s)[5] = p2_sbox(gl_add_c((*s)[5], c5));
    (*s)[6] = p2_sbox(gl_add_c((*s)[6], c6));
    (*s)[7] = p2_sbox(gl_add_c((*s)[7], c7));
    p2_external(s);
}

// A partial round: add the round's constant c to element 0, S-box it, the internal layer.
fn p2_partial(s: ptr<function, array<vec2<u32>, 8>>, c: vec2<u32>) {
    (*s)[0] = p2_sbox(gl_add_c((*s)[0], c));
    p2_internal(s);
}

// The permutation, in place; the elements may be non-canonical (each is read mod p), the result
// is canonical.
fn poseidon2_permute(s: ptr<function, array<vec2<u32>, 8>>) {
    (*s)[0] = gl_canon((*s)[0]);
    (*s)[1] = gl_canon((*s)[1]);
    (*s)[2] = gl_canon((*s)[2]);
    (*s)[3] = gl_canon((*s)[3]);
    (*s)[4] = gl_canon((*s)[4]);
    (*s)[5] = gl_canon((*s)[5]);
    (*s)[6] = gl_canon((*s)[6]);
    (*s)[7] = gl_canon((*s)[7]);
    p2_external(s);
    // Full round 0 (initial).
    p2_full(
        s,
        P2_EXTERNAL_RC[0],
        P2_EXTERNAL_RC[1],
        P2_EXTERNAL_RC[2],
        P2_EXTERNAL_RC[3],
        P2_EXTERNAL_RC[4],
        P2_EXTERNAL_RC[5],
        P2_EXTERNAL_RC[6],
        P2_EXTERNAL_RC[7],
    );
    // Full round 1 (initial).
    p2_full(
        s,
        P2_EXTERNAL_RC[8],
        P2_EXTERNAL_RC[9],
        P2_EXTERNAL_RC[10],
        P2_EXTERNAL_RC[11],
        P2_EXTERNAL_RC[12],
        P2_EXTERNAL_RC[13],
        P2_EXTERNAL_RC[14],
        P2_EXTERNAL_RC[15],
    );
    // Full round 2 (initial).
    p2_full(
        s,
        P2_EXTERNAL_RC[16],
        P2_EXTERNAL_RC[17],
        P2_EXTERNAL_RC[18],
        P2_EXTERNAL_RC[19],
        P2_EXTERNAL_RC[20],
        P2_EXTERNAL_RC[21],
        P2_EXTERNAL_RC[22],
        P2_EXTERNAL_RC[23],
    );
    // Full round 3 (initial).
    p2_full(
        s,
        P2_EXTERNAL_RC[24],
        P2_EXTERNAL_RC[25],
        P2_EXTERNAL_RC[26],
        P2_EXTERNAL_RC[27],
        P2_EXTERNAL_RC[28],
        P2_EXTERNAL_RC[29],
        P2_EXTERNAL_RC[30],
        P2_EXTERNAL_RC[31],
    );
    // The 22 partial rounds.
    p2_partial(s, P2_INTERNAL_RC[0]);
    p2_partial(s, P2_INTERNAL_RC[1]);
    p2_partial(s, P2_INTERNAL_RC[2]);
    p2_partial(s, P2_INTERNAL_RC[3]);
    p2_partial(s, P2_INTERNAL_RC[4]);
    p2_partial(s, P2_INTERNAL_RC[5]);
    p2_partial(s, P2_INTERNAL_RC[6]);
    p2_partial(s, P2_INTERNAL_RC[7]);
    p2_partial(s, P2_INTERNAL_RC[8]);
    p2_partial(s, P2_INTERNAL_RC[9]);
    p2_partial(s, P2_INTERNAL_RC[10]);
    p2_partial(s, P2_INTERNAL_RC[11]);
    p2_partial(s, P2_INTERNAL_RC[12]);
    p2_partial(s, P2_INTERNAL_RC[13]);
    p2_partial(s, P2_INTERNAL_RC[14]);
    p2_partial(s, P2_INTERNAL_RC[15]);
    p2_partial(s, P2_INTERNAL_RC[16]);
    p2_partial(s, P2_INTERNAL_RC[17]);
    p2_partial(s, P2_INTERNAL_RC[18]);
    p2_partial(s, P2_INTERNAL_RC[19]);
    p2_partial(s, P2_INTERNAL_RC[20]);
    p2_partial(s, P2_INTERNAL_RC[21]);
    // Full round 4 (final).
    p2_full(
        s,
        P2_EXTERNAL_RC[32],
        P2_EXTERNAL_RC[33],
        P2_EXTERNAL_RC[34],
        P2_EXTERNAL_RC[35],
        P2_EXTERNAL_RC[36],
        P2_EXTERNAL_RC[37],
        P2_EXTERNAL_RC[38],
        P2_EXTERNAL_RC[39],
    );
    // Full round 5 (final).
    p2_full(
        s,
        P2_EXTERNAL_RC[40],
        P2_EXTERNAL_RC[41],
        P2_EXTERNAL_RC[42],
        P2_EXTERNAL_RC[43],
        P2_EXTERNAL_RC[44],
        P2_EXTERNAL_RC[45],
        P2_EXTERNAL_RC[46],
        P2_EXTERNAL_RC[47],
    );
    // Full round 6 (final).
    p2_full(
        s,
        P2_EXTERNAL_RC[48],
        P2_EXTERNAL_RC[49],
        P2_EXTERNAL_RC[50],
        P2_EXTERNAL_RC[51],
        P2_EXTERNAL_RC[52],
        P2_EXTERNAL_RC[53],
        P2_EXTERNAL_RC[54],
        P2_EXTERNAL_RC[55],
    );
    // Full round 7 (final).
    p2_full(
        s,
        P2_EXTERNAL_RC[56],
        P2_EXTERNAL_RC[57],
        P2_EXTERNAL_RC[58],
        P2_EXTERNAL_RC[59],
        P2_EXTERNAL_RC[60],
        P2_EXTERNAL_RC[61],
        P2_EXTERNAL_RC[62],
        P2_EXTERNAL_RC[63],
    );
}
