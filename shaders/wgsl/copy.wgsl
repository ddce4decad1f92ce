// Batched copies within window A: one workgroup per tile. A tile is (src, dst, len) in virtual
// elements, inside one source segment and one destination segment. Copies of one batch are
// independent (validated on the host), so tiles run in any order.
//
// Each invocation issues four loads before its four stores, so that enough bytes are in flight
// per invocation to approach the memory bandwidth (one 8-byte load in flight per invocation
// does not cover the latency on large GPUs). A copy's source and destination do not overlap.

@group(0) @binding(7) var<storage, read> tiles: array<vec4<u32>>;

@compute @workgroup_size(256)
fn copy_tiles(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = group_index(wid);
    if t >= P.count {
        return;
    }
    let tile = tiles[arg(0) + t];
    let full = tile.z & ~1023u;
    for (var i = lid; i < full; i += 1024u) {
        let v0 = ld_a(tile.x + i);
        let v1 = ld_a(tile.x + i + 256u);
        let v2 = ld_a(tile.x + i + 512u);
        let v3 = ld_a(tile.x + i + 768u);
        st_a(tile.y + i, v0);
        st_a(tile.y + i + 256u, v1);
        st_a(tile.y + i + 512u, v2);
        st_a(tile.y + i + 768u, v3);
    }
    for (var i = full + lid; i < tile.z; i += 256u) {
        st_a(tile.y + i, ld_a(tile.x + i));
    }
}
