// Batched copies within window A, one chunk of up to 4096 elements per workgroup.
//
// The table (binding 7) holds, from vec4 arg(0) on, arg(1) pieces (src, dst, len, first): a piece
// is a copy inside one source segment and one destination segment (virtual elements), and
// `first` the index of its first chunk in this dispatch (a prefix sum over the pieces'
// ceil(len / 4096), so piece 0 has first = 0). Workgroup w copies chunk w - first of the last piece
// with first <= w, found by a binary search that is uniform across the workgroup. One piece
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
    // Invariant: pieces[base + lo].w <= w, and w < pieces[base + hi].w when hi < arg(1).
    var lo = 0u;
    var hi = arg(1);
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
