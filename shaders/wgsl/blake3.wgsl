// BLAKE3 (standard, unkeyed): the compression function, on native u32 words.
//
// The seven rounds are written out with the message schedule resolved at each call, so that
// every message index is a constant (registers, no local-memory arrays).

const B3_IV0: u32 = 0x6A09E667u;
const B3_IV1: u32 = 0xBB67AE85u;
const B3_IV2: u32 = 0x3C6EF372u;
const B3_IV3: u32 = 0xA54FF53Au;
const B3_IV4: u32 = 0x510E527Fu;
const B3_IV5: u32 = 0x9B05688Cu;
const B3_IV6: u32 = 0x1F83D9ABu;
const B3_IV7: u32 = 0x5BE0CD19u;

const CHUNK_START: u32 = 1u;
const CHUNK_END: u32 = 2u;
const PARENT: u32 = 4u;
const ROOT: u32 = 8u;

fn rotr32(x: u32, n: u32) -> u32 {
    return (x >> n) | (x << (32u - n));
}

fn g(a: ptr<function, u32>, b: ptr<function, u32>, c: ptr<function, u32>, d: ptr<function, u32>, mx: u32, my: u32) {
    *a = *a + *b + mx;
    *d = rotr32(*d ^ *a, 16u);
    *c = *c + *d;
    *b = rotr32(*b ^ *c, 12u);
    *a = *a + *b + my;
    *d = rotr32(*d ^ *a, 8u);
    *c = *c + *d;
    *b = rotr32(*b ^ *c, 7u);
}

// The chaining value (first 8 output words) of one compression.
fn b3_compress(cv: array<u32, 8>, m: array<u32, 16>, counter: u32, block_len: u32, flags: u32) -> array<u32, 8> {
    var v0 = cv[0];
    var v1 = cv[1];
    var v2 = cv[2];
    var v3 = cv[3];
    var v4 = cv[4];
    var v5 = cv[5];
    var v6 = cv[6];
    var v7 = cv[7];
    var v8 = B3_IV0;
    var v9 = B3_IV1;
    var v10 = B3_IV2;
    var v11 = B3_IV3;
    // The counter's high word: leaves never exceed 2^32 chunks (4 TiB).
    var v12 = counter;
    var v13 = 0u;
    var v14 = block_len;
    var v15 = flags;
    // round 0
    g(&v0, &v4, &v8, &v12, m[0], m[1]);
    g(&v1, &v5, &v9, &v13, m[2], m[3]);
    g(&v2, &v6, &v10, &v14, m[4], m[5]);
    g(&v3, &v7, &v11, &v15, m[6], m[7]);
    g(&v0, &v5, &v10, &v15, m[8], m[9]);
    g(&v1, &v6, &v11, &v12, m[10], m[11]);
    g(&v2, &v7, &v8, &v13, m[12], m[13]);
    g(&v3, &v4, &v9, &v14, m[14], m[15]);
    // round 1
    g(&v0, &v4, &v8, &v12, m[2], m[6]);
    g(&v1, &v5, &v9, &v13, m[3], m[10]);
    g(&v2, &v6, &v10, &v14, m[7], m[0]);
    g(&v3, &v7, &v11, &v15, m[4], m[13]);
    g(&v0, &v5, &v10, &v15, m[1], m[11]);
    g(&v1, &v6, &v11, &v12, m[12], m[5]);
    g(&v2, &v7, &v8, &v13, m[9], m[14]);
    g(&v3, &v4, &v9, &v14, m[15], m[8]);
    // round 2
    g(&v0, &v4, &v8, &v12, m[3], m[4]);
    g(&v1, &v5, &v9, &v13, m[10], m[12]);
    g(&v2, &v6, &v10, &v14, m[13], m[2]);
    g(&v3, &v7, &v11, &v15, m[7], m[14]);
    g(&v0, &v5, &v10, &v15, m[6], m[5]);
    g(&v1, &v6, &v11, &v12, m[9], m[0]);
    g(&v2, &v7, &v8, &v13, m[11], m[15]);
    g(&v3, &v4, &v9, &v14, m[8], m[1]);
    // round 3
    g(&v0, &v4, &v8, &v12, m[10], m[7]);
    g(&v1, &v5, &v9, &v13, m[12], m[9]);
    g(&v2, &v6, &v10, &v14, m[14], m[3]);
    g(&v3, &v7, &v11, &v15, m[13], m[15]);
    g(&v0, &v5, &v10, &v15, m[4], m[0]);
    g(&v1, &v6, &v11, &v12, m[11], m[2]);
    g(&v2, &v7, &v8, &v13, m[5], m[8]);
    g(&v3, &v4, &v9, &v14, m[1], m[6]);
    // round 4
    g(&v0, &v4, &v8, &v12, m[12], m[13]);
    g(&v1, &v5, &v9, &v13, m[9], m[11]);
    g(&v2, &v6, &v10, &v14, m[15], m[10]);
    g(&v3, &v7, &v11, &v15, m[14], m[8]);
    g(&v0, &v5, &v10, &v15, m[7], m[2]);
    g(&v1, &v6, &v11, &v12, m[5], m[3]);
    g(&v2, &v7, &v8, &v13, m[0], m[1]);
    g(&v3, &v4, &v9, &v14, m[6], m[4]);
    // round 5
    g(&v0, &v4, &v8, &v12, m[9], m[14]);
    g(&v1, &v5, &v9, &v13, m[11], m[5]);
    g(&v2, &v6, &v10, &v14, m[8], m[12]);
    g(&v3, &v7, &v11, &v15, m[15], m[1]);
    g(&v0, &v5, &v10, &v15, m[13], m[3]);
    g(&v1, &v6, &v11, &v12, m[0], m[10]);
    g(&v2, &v7, &v8, &v13, m[2], m[6]);
    g(&v3, &v4, &v9, &v14, m[4], m[7]);
    // round 6
    g(&v0, &v4, &v8, &v12, m[11], m[15]);
    g(&v1, &v5, &v9, &v13, m[5], m[0]);
    g(&v2, &v6, &v10, &v14, m[1], m[9]);
    g(&v3, &v7, &v11, &v15, m[8], m[6]);
    g(&v0, &v5, &v10, &v15, m[14], m[10]);
    g(&v1, &v6, &v11, &v12, m[2], m[12]);
    g(&v2, &v7, &v8, &v13, m[3], m[4]);
    g(&v3, &v4, &v9, &v14, m[7], m[13]);
    return array<u32, 8>(v0 ^ v8, v1 ^ v9, v2 ^ v10, v3 ^ v11, v4 ^ v12, v5 ^ v13, v6 ^ v14, v7 ^ v15);
}

fn b3_iv() -> array<u32, 8> {
    return array<u32, 8>(B3_IV0, B3_IV1, B3_IV2, B3_IV3, B3_IV4, B3_IV5, B3_IV6, B3_IV7);
}
