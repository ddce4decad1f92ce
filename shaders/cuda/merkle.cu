// Merkle tree levels over a node array (CONVENTIONS.md, "Merkle tree"): root at 0, children of
// p at 2p+1 and 2p+2, digest i at words [4i, 4i+4). node[p] = H(node[2p+1] || node[2p+2]), or
// Poseidon2's compression of the two digests.
#include "hashes.cuh"
#include "poseidon2.cuh"

#define HASH_KECCAK 0
#define HASH_BLAKE3 1
#define HASH_POSEIDON2 2

template <int HASH>
__device__ __forceinline__ void hash_node(u64* nodes, u64 p) {
    const ulonglong2* c = reinterpret_cast<const ulonglong2*>(nodes + 4 * (2 * p + 1));
    u64 in[8];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        ulonglong2 v = c[i];
        in[2 * i] = v.x;
        in[2 * i + 1] = v.y;
    }
    u64 out[4];
    if (HASH == HASH_KECCAK) keccak256_64(in, out);
    else if (HASH == HASH_BLAKE3) blake3_64(in, out);
    else poseidon2_compress(in, out);
    ulonglong2* o = reinterpret_cast<ulonglong2*>(nodes + 4 * p);
    o[0] = make_ulonglong2(out[0], out[1]);
    o[1] = make_ulonglong2(out[2], out[3]);
}

// Copies the last real leaf into the padding slots: leaf digests are at node indices
// [first_leaf, first_leaf + leaves); slots [first_leaf + leaves, first_leaf + padded) get a copy
// of node first_leaf + leaves - 1.
extern "C" __global__ void merkle_pad(u64* nodes, u64 first_leaf, u64 leaves, u64 padded) {
    const u64* last = nodes + 4 * (first_leaf + leaves - 1);
    u64 pads = padded - leaves;
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < pads * 4; i += (u64)gridDim.x * blockDim.x) {
        nodes[4 * (first_leaf + leaves) + i] = last[i & 3];
    }
}

// One level: parents [first, first + count).
template <int HASH>
__device__ __forceinline__ void level(u64* nodes, u64 first, u64 count) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < count; i += (u64)gridDim.x * blockDim.x)
        hash_node<HASH>(nodes, first + i);
}

extern "C" __global__ void __launch_bounds__(256) merkle_level_keccak(u64* nodes, u64 first, u64 count) {
    level<HASH_KECCAK>(nodes, first, count);
}
extern "C" __global__ void __launch_bounds__(256) merkle_level_blake3(u64* nodes, u64 first, u64 count) {
    level<HASH_BLAKE3>(nodes, first, count);
}
extern "C" __global__ void __launch_bounds__(256) merkle_level_poseidon2(u64* nodes, u64 first, u64 count) {
    level<HASH_POSEIDON2>(nodes, first, count);
}

// Every level from `count` parents (a power of two, at most the block size) up to the root, in
// one block: a barrier between levels orders the writes of one level before the reads of the
// next. The level with `count` parents starts at node count - 1.
template <int HASH>
__device__ __forceinline__ void top(u64* nodes, u64 count) {
    for (u64 c = count; c >= 1; c >>= 1) {
        if (threadIdx.x < c) hash_node<HASH>(nodes, c - 1 + threadIdx.x);
        __threadfence_block();
        __syncthreads();
    }
}

extern "C" __global__ void __launch_bounds__(1024) merkle_top_keccak(u64* nodes, u64 count) {
    top<HASH_KECCAK>(nodes, count);
}
extern "C" __global__ void __launch_bounds__(1024) merkle_top_blake3(u64* nodes, u64 count) {
    top<HASH_BLAKE3>(nodes, count);
}
extern "C" __global__ void __launch_bounds__(1024) merkle_top_poseidon2(u64* nodes, u64 count) {
    top<HASH_POSEIDON2>(nodes, count);
}
