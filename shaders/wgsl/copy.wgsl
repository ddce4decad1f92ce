// Batched copies within window A: one workgroup per tile. A tile is (src, dst, len) in virtual
// elements, inside one source segment and one destination segment. Copies of one batch are
// independent (validated on the host), so tiles run in any order.

@group(0) @binding(7) var<storage, read> tiles: array<vec4<u32>>;

@compute @workgroup_size(256)
fn copy_tiles(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = group_index(wid);
    if t >= P.count {
        return;
    }
    let tile = tiles[arg(0) + t];
    for (var i = lid; i < tile.z; i += 256u) {
        st_a(tile.y + i, ld_a(tile.x + i));
    }
}
