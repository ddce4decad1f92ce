// Leaf hashing (Keccak-256, BLAKE3 and Poseidon2), one invocation per leaf. The matrix is in window A, the
// digests go to window B.
//
// args: 0 base (virtual element of the matrix's (0, 0)), 1 cols of the matrix, 2 c0, 3 width
//       (c1 - c0), 4 layout (0 rows, 1 lambda-vm-pairs), 5 bits (log2(rows) - 1, pairs only),
//       6 half (rows / 2, pairs only), 7 first (first leaf, or first j for pairs),
//       8 out (virtual element of digest 0 of the call in window B), 9 and 10: the digest range
//       [lo, hi) this dispatch writes (window B binds only that range; other leaves are skipped).
//
// Rows layout: invocation t hashes row first + t into digest first + t; elements canonical,
// 8 bytes little-endian. Pairs layout: invocation t takes j = first + t and hashes rows j and
// half + j (that is br(2i) and br(2i+1) for leaf i = br(j) over `bits` bits) into digest i;
// elements canonical, 8 bytes big-endian. Poseidon2 (rows layout only) absorbs the elements
// themselves, canonical.

var<private> leaf_row_a: u32;
var<private> leaf_row_b: u32;

fn bswap32(x: u32) -> u32 {
    return (x >> 24u) | ((x >> 8u) & 0xff00u) | ((x << 8u) & 0xff0000u) | (x << 24u);
}

// Preimage bytes 8e..8e+8 as a little-endian 64-bit word.
fn leaf_elem(e: u32) -> vec2<u32> {
    let width = arg(3);
    if arg(4) == 0u {
        return gl_canon(ld_a(arg(0) + leaf_row_a * arg(1) + arg(2) + e));
    }
    var row = leaf_row_a;
    var c = e;
    if e >= width {
        row = leaf_row_b;
        c = e - width;
    }
    let v = gl_canon(ld_a(arg(0) + row * arg(1) + arg(2) + c));
    return vec2<u32>(bswap32(v.y), bswap32(v.x));
}

// Sets up the leaf of invocation t; returns its digest index within the call (possibly outside
// this dispatch's [lo, hi)).
fn leaf_setup(t: u32) -> u32 {
    let i = arg(7) + t;
    if arg(4) == 0u {
        leaf_row_a = i;
        return i;
    }
    leaf_row_a = i;
    leaf_row_b = arg(6) + i;
    let bits = arg(5);
    if bits == 0u {
        return 0u;
    }
    return reverseBits(i) >> (32u - bits);
}

// No leaf for this invocation (leaf_begin): past the dispatch's count, or a digest outside
// [lo, hi). Never a digest index within [lo, hi), since hi <= 0xffffffff.
const NO_LEAF: u32 = 0xffffffffu;

// The leaf of the invocation (wid, lid) of a 64-wide leaf dispatch: sets it up (leaf_setup) and
// returns its digest index within the call, or NO_LEAF when the invocation writes no digest.
fn leaf_begin(wid: vec3<u32>, lid: u32) -> u32 {
    let t = group_index(wid) * 64u + lid;
    if t >= P.count {
        return NO_LEAF;
    }
    let d = leaf_setup(t);
    if d < arg(9) || d >= arg(10) {
        return NO_LEAF;
    }
    return d;
}

fn leaf_elems() -> u32 {
    return arg(3) * (1u + arg(4));
}

fn store_digest(d: u32, w: array<u32, 8>) {
    let o = arg(8) + d * 4u;
    st_b(o, vec2<u32>(w[0], w[1]));
    st_b(o + 1u, vec2<u32>(w[2], w[3]));
    st_b(o + 2u, vec2<u32>(w[4], w[5]));
    st_b(o + 3u, vec2<u32>(w[6], w[7]));
}

@compute @workgroup_size(64)
fn leaves_keccak(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let d = leaf_begin(wid, lid);
    if d == NO_LEAF {
        return;
    }
    let n = leaf_elems();
    var s: array<vec2<u32>, 25>;
    // Whole 17-lane blocks, then the last (possibly empty) block with the padding; lane indices
    // are loop counters with constant bounds, so the state stays in registers.
    let full = n / 17u;
    for (var blk = 0u; blk < full; blk++) {
        for (var q = 0u; q < 17u; q++) {
            s[q] = s[q] ^ leaf_elem(blk * 17u + q);
        }
        keccak_f(&s);
    }
    let rem = n - full * 17u;
    for (var q = 0u; q < 17u; q++) {
        var v = vec2<u32>(0u, 0u);
        if q < rem {
            v = leaf_elem(full * 17u + q);
        }
        if q == rem {
            v.x = v.x ^ 0x01u;
        }
        if q == 16u {
            v.y = v.y ^ 0x80000000u;
        }
        s[q] = s[q] ^ v;
    }
    keccak_f(&s);
    store_digest(d, array<u32, 8>(s[0].x, s[0].y, s[1].x, s[1].y, s[2].x, s[2].y, s[3].x, s[3].y));
}

@compute @workgroup_size(64)
fn leaves_blake3(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let d = leaf_begin(wid, lid);
    if d == NO_LEAF {
        return;
    }
    let n = leaf_elems();
    // 128 elements (1024 bytes) per chunk, 8 elements (64 bytes) per block.
    let chunks = (n + 127u) / 128u;
    var stack: array<array<u32, 8>, 32>;
    var sp = 0u;
    for (var k = 0u; k < chunks; k++) {
        let chunk_elems = min(128u, n - k * 128u);
        let blocks = (chunk_elems + 7u) / 8u;
        var cv = b3_iv();
        for (var blk = 0u; blk < blocks; blk++) {
            let e0 = k * 128u + blk * 8u;
            let valid = min(8u, chunk_elems - blk * 8u);
            var m: array<u32, 16>;
            for (var q = 0u; q < 8u; q++) {
                var v = vec2<u32>(0u, 0u);
                if q < valid {
                    v = leaf_elem(e0 + q);
                }
                m[2u * q] = v.x;
                m[2u * q + 1u] = v.y;
            }
            var flags = 0u;
            if blk == 0u {
                flags |= CHUNK_START;
            }
            if blk + 1u == blocks {
                flags |= CHUNK_END;
            }
            if blk + 1u == blocks && k + 1u == chunks {
                if chunks == 1u {
                    store_digest(d, b3_compress(cv, m, 0u, valid * 8u, flags | ROOT));
                    return;
                }
                var out = b3_compress(cv, m, k, valid * 8u, flags);
                while sp > 1u {
                    sp -= 1u;
                    out = b3_compress(b3_iv(), b3_concat(stack[sp], out), 0u, 64u, PARENT);
                }
                store_digest(d, b3_compress(b3_iv(), b3_concat(stack[0], out), 0u, 64u, PARENT | ROOT));
                return;
            }
            cv = b3_compress(cv, m, k, valid * 8u, flags);
        }
        // A complete chunk that is not the last: merge the completed subtrees.
        var total = k + 1u;
        while (total & 1u) == 0u {
            sp -= 1u;
            cv = b3_compress(b3_iv(), b3_concat(stack[sp], cv), 0u, 64u, PARENT);
            total = total >> 1u;
        }
        stack[sp] = cv;
        sp += 1u;
    }
}

// Poseidon2's padding-free sponge of rate 4 (Plonky3's `PaddingFreeSponge<_, 8, 4, 4>`): the
// state starts at zero; each block of 4 elements overwrites positions 0-3 and is permuted; a
// last block of k < 4 elements overwrites positions 0..k only (the others keep the previous
// permutation's output) and is permuted. The digest is positions 0-3, whose 4 words are its
// 4 elements. Rows layout only (the host never dispatches it over pairs).
@compute @workgroup_size(64)
fn leaves_poseidon2(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let d = leaf_begin(wid, lid);
    if d == NO_LEAF {
        return;
    }
    let n = arg(3);
    var s: array<vec2<u32>, 8>;
    // One loop iteration per block: the reads are written out, each past the leaf's end
    // skipped, so a partial last block keeps the state's tail.
    for (var e = 0u; e < n; e += 4u) {
        s[0] = leaf_elem(e);
        if e + 1u < n {
            s[1] = leaf_elem(e + 1u);
        }
        if e + 2u < n {
            s[2] = leaf_elem(e + 2u);
        }
        if e + 3u < n {
            s[3] = leaf_elem(e + 3u);
        }
        poseidon2_permute(&s);
    }
    let o = arg(8) + d * 4u;
    st_b(o, s[0]);
    st_b(o + 1u, s[1]);
    st_b(o + 2u, s[2]);
    st_b(o + 3u, s[3]);
}

fn b3_concat(l: array<u32, 8>, r: array<u32, 8>) -> array<u32, 16> {
    return array<u32, 16>(l[0], l[1], l[2], l[3], l[4], l[5], l[6], l[7], r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
}
