// The opening products (CONVENTIONS.md, "Opening products"), FRI's arity-2 fold (CONVENTIONS.md,
// "FRI folding") and its input, the reduced openings (CONVENTIONS.md, "Reduced openings"), over
// the Goldilocks functions the backend prepends (gl_mul reduces any two u64, gl_add and gl_sub
// canonicalise, gl_add_c adds canonical values).
//
// Mesa's llvmpipe silently ends an invocation's loops after 65,535 iterations in total, so the
// host keeps every invocation's loops far below that: the row products read the coefficients of
// their dispatch from the table (binding 7, from vec4 arg(0) on: u64 element e is word pair 2e,
// 2e + 1) and accumulate into their output (window B) when arg(6) is 1, so that a row too long
// for one invocation runs as several dispatches over ranges of columns, each adding its part;
// the column products sum chunks of rows short enough, then add the chunks' sums.

@group(0) @binding(7) var<storage, read> tbl: array<vec4<u32>>;

const DOT_MAX: u32 = 8u;

// Table element e of this dispatch.
fn tbl_elem(e: u32) -> vec2<u32> {
    let v = tbl[arg(0) + e / 2u];
    if (e & 1u) == 0u {
        return v.xy;
    }
    return v.zw;
}

// Row products: a workgroup of 256 invocations takes 256 / L rows, L = 2^arg(8) lanes a row (the
// host picks L from the row's width: 32 for wide rows, down to 1 for a column or two). The lanes
// of a row read its columns [arg(3), arg(4)) L apart, so that adjacent invocations read adjacent
// words (a warp reads whole runs of a row, not one word of each of 32 rows), each keeping k =
// arg(2) sums with the table's k vectors of arg(4) - arg(3) coefficients; the lanes' sums are then
// folded in workgroup memory, one vector at a time. Row r = arg(5) + i of a row-major matrix of
// arg(1) columns (window A), i < arg(9) the dispatch's rows: out[r * k + j] (window B, virtual
// element arg(7) + r * k + j).
var<workgroup> row_sums: array<vec2<u32>, 256>;

@compute @workgroup_size(256)
fn row_dot(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    // Uniform across the workgroup (barriers below).
    let g = group_index(wid);
    if g >= P.count {
        return;
    }
    let cols = arg(1);
    let k = arg(2);
    let c0 = arg(3);
    let width = arg(4) - c0;
    let log_lanes = arg(8);
    let lanes = 1u << log_lanes;
    let lane = lid & (lanes - 1u);
    let i = (g << (8u - log_lanes)) + (lid >> log_lanes);
    let valid = i < arg(9);
    let r = arg(5) + i;
    var acc: array<vec2<u32>, DOT_MAX>;
    if valid {
        for (var c = lane; c < width; c += lanes) {
            let x = ld_a(r * cols + c0 + c);
            for (var j = 0u; j < k; j++) {
                acc[j] = gl_add_c(acc[j], gl_mul(x, tbl_elem(j * width + c)));
            }
        }
    }
    for (var j = 0u; j < k; j++) {
        row_sums[lid] = acc[j];
        workgroupBarrier();
        for (var span = lanes >> 1u; span > 0u; span >>= 1u) {
            if lane < span {
                row_sums[lid] = gl_add_c(row_sums[lid], row_sums[lid + span]);
            }
            workgroupBarrier();
        }
        if valid && lane == 0u {
            let o = arg(7) + r * k + j;
            var v = row_sums[lid];
            if arg(6) == 1u {
                v = gl_add(v, ld_b(o));
            }
            st_b(o, v);
        }
        workgroupBarrier();
    }
}

// Column products, first pass (no table): the selected rows i < count = arg(4) (row first +
// i * step of the matrix, first = arg(5), step = arg(6)) fall into chunks of m = arg(3)
// consecutive rows, and invocation (g, c) sums chunk g's rows of column c with each of the k =
// arg(2) weight vectors, into partial[(g * cols + c) * k + j] (window B from virtual element 0:
// its k sums side by side). A dispatch takes the chunks from arg(7) on and, of each, the arg(9)
// columns from arg(8) on; t = its invocation. The matrix (cols = arg(1) columns) is window A from
// virtual element 0, the weights window A from arg(10), interleaved: weight (j, i) at i * k + j,
// so that a chunk's weights are one range, as its rows are. Adjacent invocations read adjacent
// columns of a row; the k weights of a row are the same words across them.
@compute @workgroup_size(64)
fn column_dot_partial(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = group_index(wid) * 64u + lid;
    if t >= P.count {
        return;
    }
    let cols = arg(1);
    let k = arg(2);
    let m = arg(3);
    let w = arg(9);
    let g = arg(7) + t / w;
    let c = arg(8) + t % w;
    let i0 = g * m;
    let i1 = min(i0 + m, arg(4));
    var acc: array<vec2<u32>, DOT_MAX>;
    for (var i = i0; i < i1; i++) {
        let x = ld_a((arg(5) + i * arg(6)) * cols + c);
        let weights = arg(10) + i * k;
        for (var j = 0u; j < k; j++) {
            acc[j] = gl_add_c(acc[j], gl_mul(x, ld_a(weights + j)));
        }
    }
    let o = (g * cols + c) * k;
    for (var j = 0u; j < k; j++) {
        st_b(o + j, acc[j]);
    }
}

const FINISH_GROUP: u32 = 64u;
var<workgroup> finish_sums: array<vec2<u32>, FINISH_GROUP>;

// Column products, second pass: one workgroup per output t = j * cols + c (j < k = arg(2), c <
// cols = arg(1)), whose invocations take every 64th of the chunks [arg(3), arg(4)) of the first
// pass's sums (window A from virtual element 0, laid out as there) and fold their canonical sums
// in workgroup memory; out[t] (window B from virtual element 0) is the total, plus out[t]'s value
// when arg(5) is 1 (the chunks of one call in several dispatches). A thread per output would add
// every chunk one after the other: with two columns and thousands of chunks, one invocation's
// dependent loads for the whole pass.
@compute @workgroup_size(64)
fn column_dot_finish(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    // Uniform across the workgroup (barriers below).
    let t = group_index(wid);
    if t >= P.count {
        return;
    }
    let cols = arg(1);
    let k = arg(2);
    let j = t / cols;
    let c = t % cols;
    var acc = vec2<u32>(0u, 0u);
    for (var g = arg(3) + lid; g < arg(4); g += FINISH_GROUP) {
        acc = gl_add_c(acc, ld_a((g * cols + c) * k + j));
    }
    finish_sums[lid] = acc;
    workgroupBarrier();
    for (var span = FINISH_GROUP / 2u; span > 0u; span >>= 1u) {
        if lid < span {
            finish_sums[lid] = gl_add_c(finish_sums[lid], finish_sums[lid + span]);
        }
        workgroupBarrier();
    }
    if lid == 0u {
        var v = finish_sums[0];
        if arg(5) == 1u {
            v = gl_add(v, ld_b(t));
        }
        st_b(t, v);
    }
}

const FOLD_MAX: u32 = 8u;

// One invocation per folded element i = arg(3) + t of degree d = arg(1) (d words each), n =
// 2^arg(2) of them: a = in[2i], b = in[2i + 1] (window A from virtual element 0),
// out[i] = (a + b) / 2 + beta (a - b) w^-br(i) / 2 (window B from virtual element 0), plus gamma
// addend[i] when arg(4) is 1 (window A from virtual element arg(5)). The table holds beta and
// gamma (d x d each, row-major), then w^-1 and 1/2.
@compute @workgroup_size(64)
fn fri_fold(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = group_index(wid) * 64u + lid;
    if t >= P.count {
        return;
    }
    let d = arg(1);
    let log_n = arg(2);
    let i = arg(3) + t;
    var br = 0u;
    if log_n > 0u {
        br = reverseBits(i) >> (32u - log_n);
    }
    let dd = d * d;
    let half = tbl_elem(2u * dd + 1u);
    let factor = gl_mul(gl_pow(tbl_elem(2u * dd), br), half);
    var odd: array<vec2<u32>, FOLD_MAX>;
    var even: array<vec2<u32>, FOLD_MAX>;
    for (var c = 0u; c < d; c++) {
        let a = ld_a(2u * i * d + c);
        let b = ld_a((2u * i + 1u) * d + c);
        odd[c] = gl_mul(gl_sub(a, b), factor);
        even[c] = gl_mul(gl_add(a, b), half);
    }
    for (var r = 0u; r < d; r++) {
        var acc = even[r];
        for (var c = 0u; c < d; c++) {
            acc = gl_add(acc, gl_mul(tbl_elem(r * d + c), odd[c]));
            if arg(4) == 1u {
                acc = gl_add(acc, gl_mul(tbl_elem(dd + r * d + c), ld_a(arg(5) + i * d + c)));
            }
        }
        st_b(i * d + r, acc);
    }
}

const ZERO: vec2<u32> = vec2<u32>(0u, 0u);
const ONE: vec2<u32> = vec2<u32>(1u, 0u);
// Rows per invocation of reduce_points: their point-terms' denominators share one inversion.
const REDUCE_ROWS: u32 = 8u;
const EXT_MAX: u32 = 8u;
const POINTS_MAX: u32 = 4u;

// The reduced openings' point terms (CONVENTIONS.md, "Reduced openings"), after the rows'
// combinations v_j (d words each) were computed by row_dot into window A (row j at virtual
// element j * d): acc[j] (window B, the same layout) = sum over the points of
// (Z - x_j I)^-1 (y - S v_j) = -adj(x_j I - Z) (y - S v_j) / chi(x_j), plus acc[j]'s old value
// (read mod p) when arg(5) is 1.
//
// args: 1 d (1..8), 2 the points (1..4), 3 the dispatch's first row r0, 4 its rows n.
// The table holds each point's 2d + d^2 + d^3 words (y, S, chi's d low coefficients constant
// first, the adjugate's matrices B_k with adj(x I - Z) = sum_k x^k B_k), then w (the coset's
// generator), x_{r0} = shift w^r0 and w^REDUCE_ROWS, all canonical (the host's ReductionPoint
// and field functions), so that sums of their products take gl_add_c.
//
// Invocation t takes rows r0 + t * REDUCE_ROWS + q (q < REDUCE_ROWS, within the dispatch): it
// evaluates chi at their points and inverts the product of the values once per point
// (Montgomery's trick: 3 multiplications a row instead of an inversion's ~100), then finishes
// each row. A call's rows are cut into dispatches whose v and acc ranges each lie within two
// segments; the loops stay within llvmpipe's budget at the largest degree and point count (about
// 22,000 iterations at d = 8 and 4 points).
@compute @workgroup_size(64)
fn reduce_points(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = group_index(wid) * 64u + lid;
    let first = t * REDUCE_ROWS;
    let n = arg(4);
    if t >= P.count || first >= n {
        return;
    }
    let d = arg(1);
    let points = arg(2);
    let stride = 2u * d + d * d + d * d * d;
    let consts = points * stride;
    let w = tbl_elem(consts);
    let rows = min(REDUCE_ROWS, n - first);
    var x: array<vec2<u32>, REDUCE_ROWS>;
    x[0] = gl_mul(tbl_elem(consts + 1u), gl_pow(tbl_elem(consts + 2u), t));
    for (var q = 1u; q < rows; q++) {
        x[q] = gl_mul(x[q - 1u], w);
    }
    // 1 / chi_p(x_q) for every point p and row q. The host refused points whose chi vanishes on
    // the coset, so no product is zero.
    var inv: array<vec2<u32>, POINTS_MAX * REDUCE_ROWS>;
    for (var p = 0u; p < points; p++) {
        let chi_at = p * stride + d + d * d;
        var chi: array<vec2<u32>, REDUCE_ROWS>;
        var prefix: array<vec2<u32>, REDUCE_ROWS>;
        var running = ONE;
        for (var q = 0u; q < rows; q++) {
            // chi is monic: Horner's rule from the leading 1.
            var c = ONE;
            for (var i = d; i > 0u; i--) {
                c = gl_add_c(gl_mul(c, x[q]), tbl_elem(chi_at + i - 1u));
            }
            chi[q] = c;
            running = gl_mul(running, c);
            prefix[q] = running;
        }
        var rest = gl_inverse(running);
        for (var q = rows - 1u; q > 0u; q--) {
            inv[p * REDUCE_ROWS + q] = gl_mul(rest, prefix[q - 1u]);
            rest = gl_mul(rest, chi[q]);
        }
        inv[p * REDUCE_ROWS] = rest;
    }
    for (var q = 0u; q < rows; q++) {
        let at = (arg(3) + first + q) * d;
        var v: array<vec2<u32>, EXT_MAX>;
        var sum: array<vec2<u32>, EXT_MAX>;
        for (var r = 0u; r < d; r++) {
            v[r] = ld_a(at + r);
            if arg(5) == 1u {
                sum[r] = gl_canon(ld_b(at + r));
            }
        }
        for (var p = 0u; p < points; p++) {
            let y_at = p * stride;
            let s_at = y_at + d;
            let b_at = s_at + d * d + d;
            // u = y - S v
            var u: array<vec2<u32>, EXT_MAX>;
            for (var r = 0u; r < d; r++) {
                var s = ZERO;
                for (var c = 0u; c < d; c++) {
                    s = gl_add_c(s, gl_mul(tbl_elem(s_at + r * d + c), v[c]));
                }
                u[r] = gl_sub_c(tbl_elem(y_at + r), s);
            }
            // adj(x I - Z)(x) u = sum_k x^k (B_k u), by Horner's rule from B_{d-1}.
            var a: array<vec2<u32>, EXT_MAX>;
            for (var kk = d; kk > 0u; kk--) {
                let b_k = b_at + (kk - 1u) * d * d;
                for (var r = 0u; r < d; r++) {
                    var s = ZERO;
                    for (var c = 0u; c < d; c++) {
                        s = gl_add_c(s, gl_mul(tbl_elem(b_k + r * d + c), u[c]));
                    }
                    a[r] = gl_add_c(gl_mul(a[r], x[q]), s);
                }
            }
            let factor = gl_sub_c(ZERO, inv[p * REDUCE_ROWS + q]);
            for (var r = 0u; r < d; r++) {
                sum[r] = gl_add_c(sum[r], gl_mul(factor, a[r]));
            }
        }
        for (var r = 0u; r < d; r++) {
            st_b(at + r, sum[r]);
        }
    }
}
