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

// Keccak-f[1600], written out lane by lane (generated: 25 lanes in registers, rotations by
// constants; no dynamically indexed arrays, which GPUs would put in local memory).
fn keccak_f(s: ptr<function, array<vec2<u32>, 25>>) {
    var a0 = (*s)[0];
    var a1 = (*s)[1];
    var a2 = (*s)[2];
    var a3 = (*s)[3];
    var a4 = (*s)[4];
    var a5 = (*s)[5];
    var a6 = (*s)[6];
    var a7 = (*s)[7];
    var a8 = (*s)[8];
    var a9 = (*s)[9];
    var a10 = (*s)[10];
    var a11 = (*s)[11];
    var a12 = (*s)[12];
    var a13 = (*s)[13];
    var a14 = (*s)[14];
    var a15 = (*s)[15];
    var a16 = (*s)[16];
    var a17 = (*s)[17];
    var a18 = (*s)[18];
    var a19 = (*s)[19];
    var a20 = (*s)[20];
    var a21 = (*s)[21];
    var a22 = (*s)[22];
    var a23 = (*s)[23];
    var a24 = (*s)[24];
    for (var round = 0u; round < 24u; round++) {
        // theta
        let c0 = a0 ^ a5 ^ a10 ^ a15 ^ a20;
        let c1 = a1 ^ a6 ^ a11 ^ a16 ^ a21;
        let c2 = a2 ^ a7 ^ a12 ^ a17 ^ a22;
        let c3 = a3 ^ a8 ^ a13 ^ a18 ^ a23;
        let c4 = a4 ^ a9 ^ a14 ^ a19 ^ a24;
        let d0 = c4 ^ vec2<u32>((c1.x << 1u) | (c1.y >> 31u), (c1.y << 1u) | (c1.x >> 31u));
        let d1 = c0 ^ vec2<u32>((c2.x << 1u) | (c2.y >> 31u), (c2.y << 1u) | (c2.x >> 31u));
        let d2 = c1 ^ vec2<u32>((c3.x << 1u) | (c3.y >> 31u), (c3.y << 1u) | (c3.x >> 31u));
        let d3 = c2 ^ vec2<u32>((c4.x << 1u) | (c4.y >> 31u), (c4.y << 1u) | (c4.x >> 31u));
        let d4 = c3 ^ vec2<u32>((c0.x << 1u) | (c0.y >> 31u), (c0.y << 1u) | (c0.x >> 31u));
        a0 = a0 ^ d0;
        a1 = a1 ^ d1;
        a2 = a2 ^ d2;
        a3 = a3 ^ d3;
        a4 = a4 ^ d4;
        a5 = a5 ^ d0;
        a6 = a6 ^ d1;
        a7 = a7 ^ d2;
        a8 = a8 ^ d3;
        a9 = a9 ^ d4;
        a10 = a10 ^ d0;
        a11 = a11 ^ d1;
        a12 = a12 ^ d2;
        a13 = a13 ^ d3;
        a14 = a14 ^ d4;
        a15 = a15 ^ d0;
        a16 = a16 ^ d1;
        a17 = a17 ^ d2;
        a18 = a18 ^ d3;
        a19 = a19 ^ d4;
        a20 = a20 ^ d0;
        a21 = a21 ^ d1;
        a22 = a22 ^ d2;
        a23 = a23 ^ d3;
        a24 = a24 ^ d4;
        // rho and pi
        let b0 = a0;
        let b1 = vec2<u32>((a6.y << 12u) | (a6.x >> 20u), (a6.x << 12u) | (a6.y >> 20u));
        let b2 = vec2<u32>((a12.y << 11u) | (a12.x >> 21u), (a12.x << 11u) | (a12.y >> 21u));
        let b3 = vec2<u32>((a18.x << 21u) | (a18.y >> 11u), (a18.y << 21u) | (a18.x >> 11u));
        let b4 = vec2<u32>((a24.x << 14u) | (a24.y >> 18u), (a24.y << 14u) | (a24.x >> 18u));
        let b5 = vec2<u32>((a3.x << 28u) | (a3.y >> 4u), (a3.y << 28u) | (a3.x >> 4u));
        let b6 = vec2<u32>((a9.x << 20u) | (a9.y >> 12u), (a9.y << 20u) | (a9.x >> 12u));
        let b7 = vec2<u32>((a10.x << 3u) | (a10.y >> 29u), (a10.y << 3u) | (a10.x >> 29u));
        let b8 = vec2<u32>((a16.y << 13u) | (a16.x >> 19u), (a16.x << 13u) | (a16.y >> 19u));
        let b9 = vec2<u32>((a22.y << 29u) | (a22.x >> 3u), (a22.x << 29u) | (a22.y >> 3u));
        let b10 = vec2<u32>((a1.x << 1u) | (a1.y >> 31u), (a1.y << 1u) | (a1.x >> 31u));
        let b11 = vec2<u32>((a7.x << 6u) | (a7.y >> 26u), (a7.y << 6u) | (a7.x >> 26u));
        let b12 = vec2<u32>((a13.x << 25u) | (a13.y >> 7u), (a13.y << 25u) | (a13.x >> 7u));
        let b13 = vec2<u32>((a19.x << 8u) | (a19.y >> 24u), (a19.y << 8u) | (a19.x >> 24u));
        let b14 = vec2<u32>((a20.x << 18u) | (a20.y >> 14u), (a20.y << 18u) | (a20.x >> 14u));
        let b15 = vec2<u32>((a4.x << 27u) | (a4.y >> 5u), (a4.y << 27u) | (a4.x >> 5u));
        let b16 = vec2<u32>((a5.y << 4u) | (a5.x >> 28u), (a5.x << 4u) | (a5.y >> 28u));
        let b17 = vec2<u32>((a11.x << 10u) | (a11.y >> 22u), (a11.y << 10u) | (a11.x >> 22u));
        let b18 = vec2<u32>((a17.x << 15u) | (a17.y >> 17u), (a17.y << 15u) | (a17.x >> 17u));
        let b19 = vec2<u32>((a23.y << 24u) | (a23.x >> 8u), (a23.x << 24u) | (a23.y >> 8u));
        let b20 = vec2<u32>((a2.y << 30u) | (a2.x >> 2u), (a2.x << 30u) | (a2.y >> 2u));
        let b21 = vec2<u32>((a8.y << 23u) | (a8.x >> 9u), (a8.x << 23u) | (a8.y >> 9u));
        let b22 = vec2<u32>((a14.y << 7u) | (a14.x >> 25u), (a14.x << 7u) | (a14.y >> 25u));
        let b23 = vec2<u32>((a15.y << 9u) | (a15.x >> 23u), (a15.x << 9u) | (a15.y >> 23u));
        let b24 = vec2<u32>((a21.x << 2u) | (a21.y >> 30u), (a21.y << 2u) | (a21.x >> 30u));
        // chi
        a0 = b0 ^ (~b1 & b2);
        a1 = b1 ^ (~b2 & b3);
        a2 = b2 ^ (~b3 & b4);
        a3 = b3 ^ (~b4 & b0);
        a4 = b4 ^ (~b0 & b1);
        a5 = b5 ^ (~b6 & b7);
        a6 = b6 ^ (~b7 & b8);
        a7 = b7 ^ (~b8 & b9);
        a8 = b8 ^ (~b9 & b5);
        a9 = b9 ^ (~b5 & b6);
        a10 = b10 ^ (~b11 & b12);
        a11 = b11 ^ (~b12 & b13);
        a12 = b12 ^ (~b13 & b14);
        a13 = b13 ^ (~b14 & b10);
        a14 = b14 ^ (~b10 & b11);
        a15 = b15 ^ (~b16 & b17);
        a16 = b16 ^ (~b17 & b18);
        a17 = b17 ^ (~b18 & b19);
        a18 = b18 ^ (~b19 & b15);
        a19 = b19 ^ (~b15 & b16);
        a20 = b20 ^ (~b21 & b22);
        a21 = b21 ^ (~b22 & b23);
        a22 = b22 ^ (~b23 & b24);
        a23 = b23 ^ (~b24 & b20);
        a24 = b24 ^ (~b20 & b21);
        // iota
        a0 = a0 ^ KECCAK_RC[round];
    }
    (*s)[0] = a0;
    (*s)[1] = a1;
    (*s)[2] = a2;
    (*s)[3] = a3;
    (*s)[4] = a4;
    (*s)[5] = a5;
    (*s)[6] = a6;
    (*s)[7] = a7;
    (*s)[8] = a8;
    (*s)[9] = a9;
    (*s)[10] = a10;
    (*s)[11] = a11;
    (*s)[12] = a12;
    (*s)[13] = a13;
    (*s)[14] = a14;
    (*s)[15] = a15;
    (*s)[16] = a16;
    (*s)[17] = a17;
    (*s)[18] = a18;
    (*s)[19] = a19;
    (*s)[20] = a20;
    (*s)[21] = a21;
    (*s)[22] = a22;
    (*s)[23] = a23;
    (*s)[24] = a24;
}
