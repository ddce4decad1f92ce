// Merkle tree levels over the node array in window A (node p's digest at elements 4p..4p+4):
// node[p] = H(node[2p + 1] || node[2p + 2]), one invocation per parent.
//
// merkle_*: args 0 first parent of the dispatch; count parents.
// merkle_pad: args 0 source digest, 1 first destination digest; count digests to fill.

@compute @workgroup_size(64)
fn merkle_keccak(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = group_index(wid) * 64u + lid;
    if t >= P.count {
        return;
    }
    let p = arg(0) + t;
    let c = (2u * p + 1u) * 4u;
    var s: array<vec2<u32>, 25>;
    for (var i = 0u; i < 8u; i++) {
        s[i] = ld_a(c + i);
    }
    s[8].x = 0x01u;
    s[16].y = 0x80000000u;
    keccak_f(&s);
    for (var i = 0u; i < 4u; i++) {
        st_a(p * 4u + i, s[i]);
    }
}

@compute @workgroup_size(64)
fn merkle_blake3(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = group_index(wid) * 64u + lid;
    if t >= P.count {
        return;
    }
    let p = arg(0) + t;
    let c = (2u * p + 1u) * 4u;
    var m: array<u32, 16>;
    for (var i = 0u; i < 8u; i++) {
        let v = ld_a(c + i);
        m[2u * i] = v.x;
        m[2u * i + 1u] = v.y;
    }
    let h = b3_compress(b3_iv(), m, 0u, 64u, CHUNK_START | CHUNK_END | ROOT);
    for (var i = 0u; i < 4u; i++) {
        st_a(p * 4u + i, vec2<u32>(h[2u * i], h[2u * i + 1u]));
    }
}

@compute @workgroup_size(64)
fn merkle_pad(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = group_index(wid) * 64u + lid;
    if t >= P.count {
        return;
    }
    let src = arg(0) * 4u;
    let dst = (arg(1) + t) * 4u;
    for (var i = 0u; i < 4u; i++) {
        st_a(dst + i, ld_a(src + i));
    }
}
