// Coset LDE kernels over a row-major matrix in window A; the shared twiddle tables
// (backend_api::field::LdeTwiddles: inverse twiddles, forward twiddles, coset powers) are one
// buffer at binding 7. One invocation per (row or butterfly, column): consecutive invocations
// touch consecutive columns of a row, so every access is coalesced.
//
// The LDE of an n-row trace at blowup B (N = nB):
// 1. lde_spread: trace row p -> LDE row pB.
// 2. ntt_stage (inverse, DIF) over the rows pB, p < n: the coefficients, times n, in bit-reversed
//    order (position p holds coefficient br(p)).
// 3. lde_scale: position p is coefficient j = br(p), which a size-N bit-reversed array keeps at
//    br_N(j) = pB; it is scaled by s^j / n and, since the first log2(B) forward (DIT) stages
//    over a block of B positions with one non-zero entry only copy it, written to all B rows.
// 4. ntt_stage (forward, DIT) with half-sizes B, 2B, .., N/2: natural-order evaluations.

@group(0) @binding(7) var<storage, read> tw: array<vec2<u32>>;

// args: 0 trace base, 1 LDE base, 2 m (columns), 3 B, 4 p0; count = rows * m.
@compute @workgroup_size(256)
fn lde_spread(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = group_index(wid) * 256u + lid;
    if t >= P.count {
        return;
    }
    let m = arg(2);
    let p = arg(4) + t / m;
    let c = t % m;
    st_a(arg(1) + p * arg(3) * m + c, ld_a(arg(0) + p * m + c));
}

// args: 0 base, 1 row stride (elements), 2 m, 3 h (half-size), 4 twiddle offset, 5 twiddle step,
//       6 q0 (first butterfly), 7 inverse (1: DIF with inverse twiddles, 0: DIT); count = pairs * m.
@compute @workgroup_size(256)
fn ntt_stage(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = group_index(wid) * 256u + lid;
    if t >= P.count {
        return;
    }
    let m = arg(2);
    let h = arg(3);
    let q = arg(6) + t / m;
    let c = t % m;
    let k = q % h;
    let i = (q / h) * 2u * h + k;
    let gi = arg(0) + i * arg(1) + c;
    let gj = gi + h * arg(1);
    let x = ld_a(gi);
    let y = ld_a(gj);
    let w = tw[arg(4) + k * arg(5)];
    if arg(7) == 1u {
        st_a(gi, gl_add(x, y));
        st_a(gj, gl_mul(gl_sub(x, y), w));
    } else {
        let yw = gl_mul(y, w);
        st_a(gi, gl_add(x, yw));
        st_a(gj, gl_sub(x, yw));
    }
}

// args: 0 base, 1 m, 2 B, 3 log2(n), 4 coset offset, 5 p0; count = rows * m.
@compute @workgroup_size(256)
fn lde_scale(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = group_index(wid) * 256u + lid;
    if t >= P.count {
        return;
    }
    let m = arg(1);
    let b = arg(2);
    let p = arg(5) + t / m;
    let c = t % m;
    let bits = arg(3);
    var j = 0u;
    if bits > 0u {
        j = reverseBits(p) >> (32u - bits);
    }
    let g = arg(0) + p * b * m + c;
    let v = gl_mul(ld_a(g), tw[arg(4) + j]);
    for (var s = 0u; s < b; s++) {
        st_a(g + s * m, v);
    }
}
