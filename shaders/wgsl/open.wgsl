// The opening products (CONVENTIONS.md, "Opening products") and FRI's arity-2 fold (CONVENTIONS.md,
// "FRI folding"), over the Goldilocks functions the backend prepends (gl_mul reduces any two u64,
// gl_add and gl_sub canonicalise).
//
// Both kernels read the coefficients or weights of their dispatch from the table (binding 7, from
// vec4 arg(0) on: u64 element e is word pair 2e, 2e + 1) and accumulate into their output
// (window B) when arg(6) is 1, so that a call too long for one invocation runs as several
// dispatches over ranges of columns (rows) or of selected rows (columns), each adding its part:
// Mesa's llvmpipe silently ends an invocation's loops after 65,535 iterations in total, and the
// host keeps every invocation's loops far below that.

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

// One invocation per row r = arg(5) + i of a row-major matrix of arg(1) columns (window A): its k
// = arg(2) dot products over columns [arg(3), arg(4)) with the table's k vectors of arg(4) -
// arg(3) coefficients, into out[r * k + j] (window B, virtual element arg(7) + r * k + j).
@compute @workgroup_size(64)
fn row_dot(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = group_index(wid) * 64u + lid;
    if i >= P.count {
        return;
    }
    let cols = arg(1);
    let k = arg(2);
    let c0 = arg(3);
    let width = arg(4) - c0;
    let r = arg(5) + i;
    var acc: array<vec2<u32>, DOT_MAX>;
    for (var c = 0u; c < width; c++) {
        let x = ld_a(r * cols + c0 + c);
        for (var j = 0u; j < k; j++) {
            acc[j] = gl_add(acc[j], gl_mul(x, tbl_elem(j * width + c)));
        }
    }
    for (var j = 0u; j < k; j++) {
        let o = arg(7) + r * k + j;
        var v = acc[j];
        if arg(6) == 1u {
            v = gl_add(v, ld_b(o));
        }
        st_b(o, v);
    }
}

// One invocation per (j, c), j < k = arg(2), c < arg(1) columns: the sum over the selected rows
// i in [arg(3), arg(4)) (row first + i * step, first = arg(5), step = arg(8)) of weight
// (j, i - arg(3)) from the table (k vectors of arg(4) - arg(3) weights) times element c of
// that row (window A), into out[j * cols + c] (window B, virtual element arg(7) + j * cols + c).
@compute @workgroup_size(64)
fn column_dot(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = group_index(wid) * 64u + lid;
    if t >= P.count {
        return;
    }
    let cols = arg(1);
    let j = t / cols;
    let c = t % cols;
    let i0 = arg(3);
    let n = arg(4) - i0;
    var acc = vec2<u32>(0u, 0u);
    for (var i = 0u; i < n; i++) {
        let r = arg(5) + (i0 + i) * arg(8);
        acc = gl_add(acc, gl_mul(ld_a(r * cols + c), tbl_elem(j * n + i)));
    }
    let o = arg(7) + t;
    if arg(6) == 1u {
        acc = gl_add(acc, ld_b(o));
    }
    st_b(o, acc);
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
