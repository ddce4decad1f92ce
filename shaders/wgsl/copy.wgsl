// Batched copies within window A, one chunk of up to 4096 elements per workgroup.
//
// The table (binding 7) holds, from vec4 arg(0) on, arg(1) pieces (src, dst, len, first): a piece
// is a copy inside one source segment and one destination segment (virtual elements), and
// `first` the index of its first chunk in this dispatch (a prefix sum over the pieces'
// ceil(len / 4096), so piece 0 has first = 0). Workgroup w copies chunk w - first of the last piece
// with first <= w, found from an interpolated guess (uniform across the workgroup). One piece
// describes a whole run (or a whole copy) however long, so the host builds one table entry per
// copy, not one per 4096 elements.
//
// Each invocation issues four loads before its four stores, so that enough bytes are in flight
// per invocation to approach the memory bandwidth (one 8-byte load in flight per invocation
// does not cover the latency on large GPUs). Copies of one batch are independent (validated on
// the host), and a copy's source and destination do not overlap, so chunks run in any order.

const CHUNK: u32 = 4096u;

@group(0) @binding(7) var<storage, read> pieces: array<vec4<u32>>;

@compute @workgroup_size(256)
fn copy_pieces(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let w = group_index(wid);
    if w >= P.count {
        return;
    }
    let base = arg(0);
    let n = arg(1);
    // Guess by interpolation (exact when the pieces are equally long, as the transpose's runs
    // are), gallop from the guess to a bracket, then bisect. Invariant at the end:
    // pieces[base + lo].w <= w, and w < pieces[base + hi].w when hi < n. pieces[base].w = 0.
    let g = min(n - 1u, u32(f32(w) * (f32(n) / f32(P.count))));
    var lo = g;
    var hi = g + 1u;
    var step = 1u;
    if pieces[base + g].w <= w {
        while hi < n && pieces[base + hi].w <= w {
            lo = hi;
            step *= 2u;
            hi = min(n, lo + step);
        }
    } else {
        // g > 0 here, since pieces[base].w = 0 <= w.
        hi = g;
        lo = g - 1u;
        while pieces[base + lo].w > w {
            hi = lo;
            step *= 2u;
            lo = hi - min(hi, step);
        }
    }
    while hi - lo > 1u {
        let mid = (lo + hi) / 2u;
        if pieces[base + mid].w <= w {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let piece = pieces[base + lo];
    let off = (w - piece.w) * CHUNK;
    let src = piece.x + off;
    let dst = piece.y + off;
    let len = min(CHUNK, piece.z - off);
    let full = len & ~1023u;
    for (var i = lid; i < full; i += 1024u) {
        let v0 = ld_a(src + i);
        let v1 = ld_a(src + i + 256u);
        let v2 = ld_a(src + i + 512u);
        let v3 = ld_a(src + i + 768u);
        st_a(dst + i, v0);
        st_a(dst + i + 256u, v1);
        st_a(dst + i + 512u, v2);
        st_a(dst + i + 768u, v3);
    }
    for (var i = full + lid; i < len; i += 256u) {
        st_a(dst + i, ld_a(src + i));
    }
}

// Rows of a row-major matrix of 2^k rows in bit-reversed order (CONVENTIONS.md, "Bit-reversed
// rows"): output row r (absolute, so that br is taken over the matrix's k bits) is the matrix's
// row br(r). The host cuts a call into dispatches over output rows r = arg(4) + j * 2^arg(5)
// (j < count / cols), a stride under which every source row lies in one block of the matrix, so
// that the matrix's rows a dispatch reads and the output rows it writes are bound (window A and
// window B).
//
// args: 1 cols, 2 k = log2(rows), 3 the matrix's row 0 (virtual element, window A),
//       4 the first output row r0, 5 log2 of the output row stride, 6 output row r0's first
//       element (virtual, window B). P.count is the elements to copy.
//
// Each workgroup moves 1,024 consecutive output elements, each invocation four of them 256 apart,
// all loads issued before the stores (as copy_pieces does, for the bytes in flight); a row
// shorter than that is one of several in the workgroup's range, so narrow matrices (a tree's
// 4-word digests, a 2-word accumulator) need no other shape.
@compute @workgroup_size(256)
fn bit_reversed_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let cols = arg(1);
    let k = arg(2);
    let base = group_index(wid) * 1024u + lid;
    var src: array<u32, 4>;
    var dst: array<u32, 4>;
    var v: array<vec2<u32>, 4>;
    for (var q = 0u; q < 4u; q++) {
        let e = base + q * 256u;
        let j = e / cols;
        let c = e - j * cols;
        let r = arg(4) + (j << arg(5));
        // reverseBits(r) >> 32 for k = 0 is undefined in WGSL; a one-row matrix copies row 0.
        let br = select(0u, reverseBits(r) >> (32u - k), k > 0u);
        src[q] = arg(3) + br * cols + c;
        dst[q] = arg(6) + (j << arg(5)) * cols + c;
    }
    for (var q = 0u; q < 4u; q++) {
        if base + q * 256u < P.count {
            v[q] = ld_a(src[q]);
        }
    }
    for (var q = 0u; q < 4u; q++) {
        if base + q * 256u < P.count {
            st_b(dst[q], v[q]);
        }
    }
}
