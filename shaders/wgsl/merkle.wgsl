// Merkle tree levels over the node array in window A (node p's digest at elements 4p..4p+4):
// node[p] = H(node[2p + 1] || node[2p + 2]), one invocation per parent (Poseidon2: the first 4
// elements of the permutation of the children's 8 words, each read mod p).
//
// merkle_*: args 0 first parent of the dispatch; count parents.
// merkle_pad: args 0 source digest, 1 first destination digest; count digests to fill.

// The 64 bytes hashed for parent p: children 2p + 1 and 2p + 2, as 16 little-endian u32 words.
fn merkle_children(p: u32) -> array<u32, 16> {
    let c = (2u * p + 1u) * 4u;
    var m: array<u32, 16>;
    for (var i = 0u; i < 8u; i++) {
        let v = ld_a(c + i);
        m[2u * i] = v.x;
        m[2u * i + 1u] = v.y;
    }
    return m;
}

// Writes the digest of node p, as 8 little-endian u32 words.
fn store_node(p: u32, h: array<u32, 8>) {
    for (var i = 0u; i < 4u; i++) {
        st_a(p * 4u + i, vec2<u32>(h[2u * i], h[2u * i + 1u]));
    }
}

@compute @workgroup_size(64)
fn merkle_keccak(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = group_index(wid) * 64u + lid;
    if t >= P.count {
        return;
    }
    let p = arg(0) + t;
    let m = merkle_children(p);
    var s: array<vec2<u32>, 25>;
    for (var i = 0u; i < 8u; i++) {
        s[i] = vec2<u32>(m[2u * i], m[2u * i + 1u]);
    }
    s[8].x = 0x01u;
    s[16].y = 0x80000000u;
    keccak_f(&s);
    store_node(p, array<u32, 8>(s[0].x, s[0].y, s[1].x, s[1].y, s[2].x, s[2].y, s[3].x, s[3].y));
}

@compute @workgroup_size(64)
fn merkle_blake3(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = group_index(wid) * 64u + lid;
    if t >= P.count {
        return;
    }
    let p = arg(0) + t;
    store_node(p, b3_compress(b3_iv(), merkle_children(p), 0u, 64u, CHUNK_START | CHUNK_END | ROOT));
}

// Plonky3's `TruncatedPermutation<_, 2, 4, 8>`: parent = perm(left || right)[0..4].
@compute @workgroup_size(64)
fn merkle_poseidon2(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = group_index(wid) * 64u + lid;
    if t >= P.count {
        return;
    }
    let p = arg(0) + t;
    let c = (2u * p + 1u) * 4u;
    // The permutation reads each element mod p.
    var s = array<vec2<u32>, 8>(
        ld_a(c),
        ld_a(c + 1u),
        ld_a(c + 2u),
        ld_a(c + 3u),
        ld_a(c + 4u),
        ld_a(c + 5u),
        ld_a(c + 6u),
        ld_a(c + 7u),
    );
    poseidon2_permute(&s);
    st_a(p * 4u, s[0]);
    st_a(p * 4u + 1u, s[1]);
    st_a(p * 4u + 2u, s[2]);
    st_a(p * 4u + 3u, s[3]);
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
