// Keccak-f[1600] and the BLAKE3 compression function, shared by hash.cu and merkle.cu.
#pragma once
#include "common.cuh"

// ---------------------------------------------------------------------------------------------
// Keccak-f[1600] (24 rounds) on 25 lanes, lane (x, y) at index x + 5y.

__device__ __constant__ u64 KECCAK_RC[24] = {
    0x0000000000000001ull, 0x0000000000008082ull, 0x800000000000808Aull, 0x8000000080008000ull,
    0x000000000000808Bull, 0x0000000080000001ull, 0x8000000080008081ull, 0x8000000000008009ull,
    0x000000000000008Aull, 0x0000000000000088ull, 0x0000000080008009ull, 0x000000008000000Aull,
    0x000000008000808Bull, 0x800000000000008Bull, 0x8000000000008089ull, 0x8000000000008003ull,
    0x8000000000008002ull, 0x8000000000000080ull, 0x000000000000800Aull, 0x800000008000000Aull,
    0x8000000080008081ull, 0x8000000000008080ull, 0x0000000080000001ull, 0x8000000080008008ull};

template <int N>
__device__ __forceinline__ u64 rotl64(u64 x) {
    return (x << N) | (x >> (64 - N));
}

__device__ __forceinline__ void keccak_f1600(u64 a[25]) {
#pragma unroll 1
    for (int round = 0; round < 24; ++round) {
        // theta
        u64 c0 = a[0] ^ a[5] ^ a[10] ^ a[15] ^ a[20];
        u64 c1 = a[1] ^ a[6] ^ a[11] ^ a[16] ^ a[21];
        u64 c2 = a[2] ^ a[7] ^ a[12] ^ a[17] ^ a[22];
        u64 c3 = a[3] ^ a[8] ^ a[13] ^ a[18] ^ a[23];
        u64 c4 = a[4] ^ a[9] ^ a[14] ^ a[19] ^ a[24];
        u64 d0 = c4 ^ rotl64<1>(c1);
        u64 d1 = c0 ^ rotl64<1>(c2);
        u64 d2 = c1 ^ rotl64<1>(c3);
        u64 d3 = c2 ^ rotl64<1>(c4);
        u64 d4 = c3 ^ rotl64<1>(c0);
        a[0] ^= d0; a[5] ^= d0; a[10] ^= d0; a[15] ^= d0; a[20] ^= d0;
        a[1] ^= d1; a[6] ^= d1; a[11] ^= d1; a[16] ^= d1; a[21] ^= d1;
        a[2] ^= d2; a[7] ^= d2; a[12] ^= d2; a[17] ^= d2; a[22] ^= d2;
        a[3] ^= d3; a[8] ^= d3; a[13] ^= d3; a[18] ^= d3; a[23] ^= d3;
        a[4] ^= d4; a[9] ^= d4; a[14] ^= d4; a[19] ^= d4; a[24] ^= d4;
        // rho and pi: B[y][2x+3y] = rot(A[x][y], r[x][y]), walked along the pi cycle from lane 1.
        u64 t = a[1], u;
        u = a[10]; a[10] = rotl64<1>(t); t = u;
        u = a[7];  a[7]  = rotl64<3>(t); t = u;
        u = a[11]; a[11] = rotl64<6>(t); t = u;
        u = a[17]; a[17] = rotl64<10>(t); t = u;
        u = a[18]; a[18] = rotl64<15>(t); t = u;
        u = a[3];  a[3]  = rotl64<21>(t); t = u;
        u = a[5];  a[5]  = rotl64<28>(t); t = u;
        u = a[16]; a[16] = rotl64<36>(t); t = u;
        u = a[8];  a[8]  = rotl64<45>(t); t = u;
        u = a[21]; a[21] = rotl64<55>(t); t = u;
        u = a[24]; a[24] = rotl64<2>(t); t = u;
        u = a[4];  a[4]  = rotl64<14>(t); t = u;
        u = a[15]; a[15] = rotl64<27>(t); t = u;
        u = a[23]; a[23] = rotl64<41>(t); t = u;
        u = a[19]; a[19] = rotl64<56>(t); t = u;
        u = a[13]; a[13] = rotl64<8>(t); t = u;
        u = a[12]; a[12] = rotl64<25>(t); t = u;
        u = a[2];  a[2]  = rotl64<43>(t); t = u;
        u = a[20]; a[20] = rotl64<62>(t); t = u;
        u = a[14]; a[14] = rotl64<18>(t); t = u;
        u = a[22]; a[22] = rotl64<39>(t); t = u;
        u = a[9];  a[9]  = rotl64<61>(t); t = u;
        u = a[6];  a[6]  = rotl64<20>(t); t = u;
        a[1] = rotl64<44>(t);
        // chi
#pragma unroll
        for (int y = 0; y < 25; y += 5) {
            u64 b0 = a[y], b1 = a[y + 1], b2 = a[y + 2], b3 = a[y + 3], b4 = a[y + 4];
            a[y] = b0 ^ (~b1 & b2);
            a[y + 1] = b1 ^ (~b2 & b3);
            a[y + 2] = b2 ^ (~b3 & b4);
            a[y + 3] = b3 ^ (~b4 & b0);
            a[y + 4] = b4 ^ (~b0 & b1);
        }
        // iota
        a[0] ^= KECCAK_RC[round];
    }
}

// Keccak-256 of 64 bytes (two digests), for Merkle nodes.
__device__ __forceinline__ void keccak256_64(const u64 in[8], u64 out[4]) {
    u64 s[25];
#pragma unroll
    for (int i = 0; i < 25; ++i) s[i] = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) s[i] = in[i];
    s[8] = 0x01ull;
    s[16] = 0x8000000000000000ull;
    keccak_f1600(s);
    out[0] = s[0]; out[1] = s[1]; out[2] = s[2]; out[3] = s[3];
}

// ---------------------------------------------------------------------------------------------
// BLAKE3.

#define B3_CHUNK_START 1u
#define B3_CHUNK_END 2u
#define B3_PARENT 4u
#define B3_ROOT 8u
#define B3_CHUNK_LEN 1024u
#define B3_BLOCK_LEN 64u

__device__ __constant__ u32 B3_IV[8] = {0x6A09E667u, 0xBB67AE85u, 0x3C6EF372u, 0xA54FF53Au,
                                        0x510E527Fu, 0x9B05688Cu, 0x1F83D9ABu, 0x5BE0CD19u};

__device__ __forceinline__ u32 rotr32(u32 x, int n) { return __funnelshift_r(x, x, n); }

#define B3_G(a, b, c, d, mx, my)      \
    do {                              \
        a = a + b + (mx);             \
        d = rotr32(d ^ a, 16);        \
        c = c + d;                    \
        b = rotr32(b ^ c, 12);        \
        a = a + b + (my);             \
        d = rotr32(d ^ a, 8);         \
        c = c + d;                    \
        b = rotr32(b ^ c, 7);         \
    } while (0)

// One round over message words in the order given by the schedule row.
#define B3_ROUND(m, s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, s12, s13, s14, s15) \
    do {                                                                                  \
        B3_G(v0, v4, v8, v12, m[s0], m[s1]);                                              \
        B3_G(v1, v5, v9, v13, m[s2], m[s3]);                                              \
        B3_G(v2, v6, v10, v14, m[s4], m[s5]);                                             \
        B3_G(v3, v7, v11, v15, m[s6], m[s7]);                                             \
        B3_G(v0, v5, v10, v15, m[s8], m[s9]);                                             \
        B3_G(v1, v6, v11, v12, m[s10], m[s11]);                                           \
        B3_G(v2, v7, v8, v13, m[s12], m[s13]);                                            \
        B3_G(v3, v4, v9, v14, m[s14], m[s15]);                                            \
    } while (0)

// The compression function; writes the 8-word chaining value (the first half of the output,
// which is also the root hash for a ROOT block).
__device__ __forceinline__ void blake3_compress(const u32 cv[8], const u32 m[16], u64 counter, u32 block_len,
                                                u32 flags, u32 out[8]) {
    u32 v0 = cv[0], v1 = cv[1], v2 = cv[2], v3 = cv[3], v4 = cv[4], v5 = cv[5], v6 = cv[6], v7 = cv[7];
    u32 v8 = B3_IV[0], v9 = B3_IV[1], v10 = B3_IV[2], v11 = B3_IV[3];
    u32 v12 = (u32)counter, v13 = (u32)(counter >> 32), v14 = block_len, v15 = flags;
    // The message schedule: row r is the permutation applied r times.
    B3_ROUND(m, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    B3_ROUND(m, 2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8);
    B3_ROUND(m, 3, 4, 10, 12, 13, 2, 7, 14, 6, 5, 9, 0, 11, 15, 8, 1);
    B3_ROUND(m, 10, 7, 12, 9, 14, 3, 13, 15, 4, 0, 11, 2, 5, 8, 1, 6);
    B3_ROUND(m, 12, 13, 9, 11, 15, 10, 14, 8, 7, 2, 5, 3, 0, 1, 6, 4);
    B3_ROUND(m, 9, 14, 11, 5, 8, 12, 15, 1, 13, 3, 0, 10, 2, 6, 4, 7);
    B3_ROUND(m, 11, 15, 5, 0, 1, 9, 8, 6, 14, 10, 2, 12, 3, 4, 7, 13);
    out[0] = v0 ^ v8; out[1] = v1 ^ v9; out[2] = v2 ^ v10; out[3] = v3 ^ v11;
    out[4] = v4 ^ v12; out[5] = v5 ^ v13; out[6] = v6 ^ v14; out[7] = v7 ^ v15;
}

// Packs 8 words (a chaining value or a root hash) into 4 little-endian u64 digest words.
__device__ __forceinline__ void b3_words_to_digest(const u32 h[8], u64 out[4]) {
#pragma unroll
    for (int i = 0; i < 4; ++i) out[i] = (u64)h[2 * i] | ((u64)h[2 * i + 1] << 32);
}

// blake3::hash of 64 bytes (two digests), for Merkle nodes: one chunk of one block.
__device__ __forceinline__ void blake3_64(const u64 in[8], u64 out[4]) {
    u32 m[16];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        m[2 * i] = (u32)in[i];
        m[2 * i + 1] = (u32)(in[i] >> 32);
    }
    u32 h[8];
    blake3_compress(B3_IV, m, 0, 64, B3_CHUNK_START | B3_CHUNK_END | B3_ROOT, h);
    b3_words_to_digest(h, out);
}

// A BLAKE3 parent node: compress(IV, left || right, counter 0, 64 bytes, PARENT | extra).
// `out` may alias `right`.
__device__ __forceinline__ void b3_parent(const u32 left[8], const u32 right[8], u32 extra, u32 out[8]) {
    u32 pm[16];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        pm[i] = left[i];
        pm[8 + i] = right[i];
    }
    blake3_compress(B3_IV, pm, 0, B3_BLOCK_LEN, B3_PARENT | extra, out);
}
