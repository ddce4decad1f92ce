// Keccak-f[1600] on u32 pairs (lane = vec2<u32>(lo, hi)), for Keccak-256 (rate 136 bytes = 17
// lanes, pad byte 0x01 ... 0x80). Lane (x, y) is state[x + 5 y]; lane i holds state bytes
// 8i..8i+8, little-endian.

const KECCAK_RC: array<vec2<u32>, 24> = array<vec2<u32>, 24>(
    vec2<u32>(0x00000001u, 0x00000000u), vec2<u32>(0x00008082u, 0x00000000u),
    vec2<u32>(0x0000808Au, 0x80000000u), vec2<u32>(0x80008000u, 0x80000000u),
    vec2<u32>(0x0000808Bu, 0x00000000u), vec2<u32>(0x80000001u, 0x00000000u),
    vec2<u32>(0x80008081u, 0x80000000u), vec2<u32>(0x00008009u, 0x80000000u),
    vec2<u32>(0x0000008Au, 0x00000000u), vec2<u32>(0x00000088u, 0x00000000u),
    vec2<u32>(0x80008009u, 0x00000000u), vec2<u32>(0x8000000Au, 0x00000000u),
    vec2<u32>(0x8000808Bu, 0x00000000u), vec2<u32>(0x0000008Bu, 0x80000000u),
    vec2<u32>(0x00008089u, 0x80000000u), vec2<u32>(0x00008003u, 0x80000000u),
    vec2<u32>(0x00008002u, 0x80000000u), vec2<u32>(0x00000080u, 0x80000000u),
    vec2<u32>(0x0000800Au, 0x00000000u), vec2<u32>(0x8000000Au, 0x80000000u),
    vec2<u32>(0x80008081u, 0x80000000u), vec2<u32>(0x00008080u, 0x80000000u),
    vec2<u32>(0x80000001u, 0x00000000u), vec2<u32>(0x80008008u, 0x80000000u),
);

// Rotation offsets (rho) by lane index x + 5 y.
const KECCAK_RHO: array<u32, 25> = array<u32, 25>(
    0u, 1u, 62u, 28u, 27u,
    36u, 44u, 6u, 55u, 20u,
    3u, 10u, 43u, 25u, 39u,
    41u, 45u, 15u, 21u, 8u,
    18u, 2u, 61u, 56u, 14u,
);

// Destination of lane i under pi: (x, y) -> (y, 2x + 3y).
const KECCAK_PI: array<u32, 25> = array<u32, 25>(
    0u, 10u, 20u, 5u, 15u,
    16u, 1u, 11u, 21u, 6u,
    7u, 17u, 2u, 12u, 22u,
    23u, 8u, 18u, 3u, 13u,
    14u, 24u, 9u, 19u, 4u,
);

// Rotate a 64-bit lane left by n (0..63).
fn rotl64(v: vec2<u32>, n: u32) -> vec2<u32> {
    if n == 0u {
        return v;
    }
    if n < 32u {
        return vec2<u32>((v.x << n) | (v.y >> (32u - n)), (v.y << n) | (v.x >> (32u - n)));
    }
    if n == 32u {
        return vec2<u32>(v.y, v.x);
    }
    let k = n - 32u;
    return vec2<u32>((v.y << k) | (v.x >> (32u - k)), (v.x << k) | (v.y >> (32u - k)));
}

fn keccak_f(s: ptr<function, array<vec2<u32>, 25>>) {
    for (var round = 0u; round < 24u; round++) {
        // theta
        var c: array<vec2<u32>, 5>;
        for (var x = 0u; x < 5u; x++) {
            c[x] = (*s)[x] ^ (*s)[x + 5u] ^ (*s)[x + 10u] ^ (*s)[x + 15u] ^ (*s)[x + 20u];
        }
        for (var x = 0u; x < 5u; x++) {
            let d = c[(x + 4u) % 5u] ^ rotl64(c[(x + 1u) % 5u], 1u);
            for (var y = 0u; y < 25u; y += 5u) {
                (*s)[x + y] = (*s)[x + y] ^ d;
            }
        }
        // rho and pi
        var b: array<vec2<u32>, 25>;
        for (var i = 0u; i < 25u; i++) {
            b[KECCAK_PI[i]] = rotl64((*s)[i], KECCAK_RHO[i]);
        }
        // chi
        for (var y = 0u; y < 25u; y += 5u) {
            for (var x = 0u; x < 5u; x++) {
                (*s)[x + y] = b[x + y] ^ (~b[(x + 1u) % 5u + y] & b[(x + 2u) % 5u + y]);
            }
        }
        // iota
        (*s)[0] = (*s)[0] ^ KECCAK_RC[round];
    }
}
