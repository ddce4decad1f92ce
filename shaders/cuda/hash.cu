// Leaf hashing of a row-major matrix (CONVENTIONS.md, "Leaves"): one thread per leaf.
//
// Layouts: `rows` (leaf r = row r's columns [c0, c1), canonical, little-endian) and
// `lambda-vm-pairs` (leaf i = rows br(2i) || br(2i+1), canonical, big-endian). Each element is
// one 8-byte lane of the message, so both byte hashes absorb whole u64 lanes; Poseidon2 (rows
// layout only) absorbs the canonical elements themselves, 4 per permutation.
#include "hashes.cuh"
#include "poseidon2.cuh"

struct LeafParams {
    const u64* matrix;  // row-major, `cols` columns
    u64* out;           // digest i goes to out[4 * i .. 4 * i + 4]
    u64 cols;
    u64 c0;             // first column of the leaf
    u64 width;          // c1 - c0
    u64 leaves;
    u64 log_rows;       // log2(rows), for the pairs layout's bit reversal
};

// The rows a leaf reads and its lane count.
template <bool PAIRS>
struct LeafRows {
    const u64* a;
    const u64* b;
    u64 width;
    u64 lanes;

    __device__ __forceinline__ LeafRows(const LeafParams& p, u64 leaf) {
        width = p.width;
        if (PAIRS) {
            u64 ra = bitrev32((u32)(2 * leaf), (u32)p.log_rows);
            u64 rb = bitrev32((u32)(2 * leaf + 1), (u32)p.log_rows);
            a = p.matrix + ra * p.cols + p.c0;
            b = p.matrix + rb * p.cols + p.c0;
            lanes = 2 * width;
        } else {
            a = p.matrix + leaf * p.cols + p.c0;
            b = a;
            lanes = width;
        }
    }

    // Lane j of the message: the canonical element, byte-swapped for the big-endian layout.
    __device__ __forceinline__ u64 lane(u64 j) const {
        u64 x;
        if (PAIRS) {
            x = gl_canon(j < width ? a[j] : b[j - width]);
            return bswap64(x);
        }
        x = gl_canon(a[j]);
        return x;
    }
};

template <bool PAIRS>
__device__ __forceinline__ void keccak_leaf(const LeafParams& p, u64 leaf) {
    LeafRows<PAIRS> rows(p, leaf);
    u64 s[25];
#pragma unroll
    for (int i = 0; i < 25; ++i) s[i] = 0;
    u64 j = 0;
    for (; j + 17 <= rows.lanes; j += 17) {
#pragma unroll
        for (int i = 0; i < 17; ++i) s[i] ^= rows.lane(j + i);
        keccak_f1600(s);
    }
    // The last block: r < 17 lanes, then the pad byte 0x01 and the final 0x80.
    u64 r = rows.lanes - j;
#pragma unroll
    for (int i = 0; i < 17; ++i) {
        if ((u64)i < r) s[i] ^= rows.lane(j + i);
        else if ((u64)i == r) s[i] ^= 0x01ull;
    }
    s[16] ^= 0x8000000000000000ull;
    keccak_f1600(s);
    u64* o = p.out + 4 * leaf;
    o[0] = s[0]; o[1] = s[1]; o[2] = s[2]; o[3] = s[3];
}

// Poseidon2's padding-free sponge of rate 4 over one `rows` leaf: each block of up to 4 elements
// (read as they are: the permutation takes any u64) overwrites state positions [0, k) and is
// permuted (one permutation call site, so the unrolled
// permutation is emitted once); the digest is state positions 0-3.
__device__ __forceinline__ void poseidon2_leaf(const LeafParams& p, u64 leaf) {
    const u64* row = p.matrix + leaf * p.cols + p.c0;
    u64 s[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) s[i] = 0;
    for (u64 j = 0; j < p.width; j += 4) {
#pragma unroll
        for (int i = 0; i < 4; ++i)
            if (j + i < p.width) s[i] = row[j + i];
        poseidon2_permute(s);
    }
    u64* o = p.out + 4 * leaf;
    o[0] = gl_canon(s[0]); o[1] = gl_canon(s[1]); o[2] = gl_canon(s[2]); o[3] = gl_canon(s[3]);
}

// The BLAKE3 chaining-value stack of at most D entries, top at index 0. Pushes and pops shift
// the entries with compile-time indices, so a small stack stays in registers.
template <int D>
struct CvStack {
    u32 s[D][8];
    u32 depth;

    __device__ __forceinline__ void push(const u32 cv[8]) {
#pragma unroll
        for (int i = D - 1; i > 0; --i)
#pragma unroll
            for (int k = 0; k < 8; ++k) s[i][k] = s[i - 1][k];
#pragma unroll
        for (int k = 0; k < 8; ++k) s[0][k] = cv[k];
        ++depth;
    }
    // Pops the top into `top`.
    __device__ __forceinline__ void pop(u32 top[8]) {
#pragma unroll
        for (int k = 0; k < 8; ++k) top[k] = s[0][k];
#pragma unroll
        for (int i = 0; i + 1 < D; ++i)
#pragma unroll
            for (int k = 0; k < 8; ++k) s[i][k] = s[i + 1][k];
        --depth;
    }
};

// BLAKE3 of one leaf. D bounds the chunk-stack depth: the leaf may have at most 2^D chunks
// (2^D KiB); the host picks the variant.
template <bool PAIRS, int D>
__device__ __forceinline__ void blake3_leaf(const LeafParams& p, u64 leaf) {
    LeafRows<PAIRS> rows(p, leaf);
    const u64 lanes = rows.lanes;  // >= 1
    const u64 blocks = (lanes + 7) / 8;
    const bool multi = lanes * 8 > B3_CHUNK_LEN;
    u32 cv[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) cv[i] = B3_IV[i];
    CvStack<D> stack;
    stack.depth = 0;
    u64 chunk = 0;
    for (u64 blk = 0; blk < blocks; ++blk) {
        const u64 base = blk * 8;
        const u64 nl = min((u64)8, lanes - base);
        u32 m[16];
#pragma unroll
        for (int k = 0; k < 8; ++k) {
            u64 x = (u64)k < nl ? rows.lane(base + k) : 0ull;
            m[2 * k] = (u32)x;
            m[2 * k + 1] = (u32)(x >> 32);
        }
        const u32 in_chunk = (u32)(blk % 16);  // blocks are 64 bytes, chunks 16 blocks
        const bool last = blk + 1 == blocks;
        const bool chunk_end = last || in_chunk == 15;
        u32 flags = (in_chunk == 0 ? B3_CHUNK_START : 0u) | (chunk_end ? B3_CHUNK_END : 0u);
        if (last && !multi) flags |= B3_ROOT;
        blake3_compress(cv, m, chunk, (u32)(nl * 8), flags, cv);
        if (chunk_end && !last) {
            // Push the finished chunk's CV, merging every complete subtree (reference
            // `add_chunk_chaining_value` with total_chunks = chunk + 1).
            u64 total = chunk + 1;
            while ((total & 1) == 0) {
                u32 left[8];
                stack.pop(left);
                b3_parent(left, cv, 0u, cv);
                total >>= 1;
            }
            stack.push(cv);
            ++chunk;
#pragma unroll
            for (int i = 0; i < 8; ++i) cv[i] = B3_IV[i];
        }
    }
    if (multi) {
        // The right edge (reference `finalize`): parents top down, the last one is the ROOT.
        while (stack.depth > 1) {
            u32 left[8];
            stack.pop(left);
            b3_parent(left, cv, 0u, cv);
        }
        u32 left[8];
        stack.pop(left);
        b3_parent(left, cv, B3_ROOT, cv);
    }
    u64* o = p.out + 4 * leaf;
#pragma unroll
    for (int i = 0; i < 4; ++i) o[i] = (u64)cv[2 * i] | ((u64)cv[2 * i + 1] << 32);
}

#define LEAF_KERNEL(NAME, CALL)                                                                     \
    extern "C" __global__ void __launch_bounds__(128) NAME(const LeafParams p) {                   \
        for (u64 leaf = blockIdx.x * (u64)blockDim.x + threadIdx.x; leaf < p.leaves;               \
             leaf += (u64)gridDim.x * blockDim.x)                                                  \
            CALL;                                                                                  \
    }

#if ALL_KERNELS || WANT_leaves_keccak_rows
LEAF_KERNEL(leaves_keccak_rows, (keccak_leaf<false>(p, leaf)))
#endif
#if ALL_KERNELS || WANT_leaves_keccak_pairs
LEAF_KERNEL(leaves_keccak_pairs, (keccak_leaf<true>(p, leaf)))
#endif
// Up to 16 chunks (16 KiB leaves): the stack stays in registers.
#if ALL_KERNELS || WANT_leaves_blake3_rows
LEAF_KERNEL(leaves_blake3_rows, (blake3_leaf<false, 4>(p, leaf)))
#endif
#if ALL_KERNELS || WANT_leaves_blake3_pairs
LEAF_KERNEL(leaves_blake3_pairs, (blake3_leaf<true, 4>(p, leaf)))
#endif
#if ALL_KERNELS || WANT_leaves_poseidon2_rows
LEAF_KERNEL(leaves_poseidon2_rows, (poseidon2_leaf(p, leaf)))
#endif
// Any length up to 2^32 chunks (the stack spills to local memory).
#if ALL_KERNELS || WANT_leaves_blake3_rows_long
LEAF_KERNEL(leaves_blake3_rows_long, (blake3_leaf<false, 32>(p, leaf)))
#endif
#if ALL_KERNELS || WANT_leaves_blake3_pairs_long
LEAF_KERNEL(leaves_blake3_pairs_long, (blake3_leaf<true, 32>(p, leaf)))
#endif

// The leaves of the in-place transpose's blocks, hashed beside its block pass
// (`Backend::hash_leaves_then_transpose`). The block pass moves one block of rows per launch
// (`transpose_tile` in transpose.cu), a memory-bound copy; the `rows`-layout leaves are bound by
// the integer pipes and read the same rows. So launch k of a fused block pass has two kinds of
// thread blocks: the first `movers` copy block k - 1 into its runs, and the others hash the rows
// of block k, one thread per row and tree. Nothing one kind writes is read in the launch: block
// k - 1's destination is a block hashed and moved by earlier launches (plan invariant), and the
// digests go to the trees' node arrays. One block of rows (2^16 rows under the default scratch
// cap) is fewer hashing threads than the device holds, so the launches are queued with
// programmatic stream serialization and overlap (see `leaves_block`).
#define FUSED_TREES 8
struct BlockLeaves {
    const u64* hash_src;   // the rows to hash, row-major, `cols` columns
    u64 hash_rows;         // 0: none
    u64 trees;             // 1 ..= FUSED_TREES
    u64* out[FUSED_TREES]; // tree t's digest of hash_src's row r goes to out[t][4 * r ..]
    u64 c0[FUSED_TREES];
    u64 width[FUSED_TREES];
    const u64* move_src;   // the block to move: `move_rows` rows, row-major
    u64* move_dst;         // its runs: element (r, c) goes to move_dst[c * move_rows + r]
    u64 move_rows;         // 0: none
    u64 cols;
    u64 movers;            // thread blocks [0, movers) move; the rest hash
};

template <int HASH>  // 0: Keccak-256, 1: BLAKE3 (leaves of at most 16 chunks)
__device__ __forceinline__ void leaves_block(const BlockLeaves& p) {
    const u32 tid = threadIdx.x, nthreads = blockDim.x;
    // A launch with movers is queued with programmatic stream serialization: the next launch's
    // blocks may start as soon as all of this launch's have, so the hashing of consecutive
    // launches overlaps and fills the device (one block of rows is fewer threads than it holds).
    // Only the movers wait for the launch before: they write where its movers read.
    griddep_launch_dependents();
    if (blockIdx.x >= p.movers) {
        const u64 hashers = gridDim.x - p.movers;
        for (u64 row = (blockIdx.x - p.movers) * nthreads + tid; row < p.hash_rows; row += hashers * nthreads) {
            for (u64 t = 0; t < p.trees; ++t) {
                const LeafParams lp = {p.hash_src, p.out[t], p.cols, p.c0[t], p.width[t], p.hash_rows, 0};
                if (HASH == 0) keccak_leaf<false>(lp, row);
                else blake3_leaf<false, 4>(lp, row);
            }
        }
        return;
    }
    // The movers: few threads (one to five blocks per multiprocessor), so each keeps many loads in
    // flight. A tile is 64 rows x 64 columns (32 KiB), fetched by cp.async, 32 8-byte loads per
    // thread, each warp one 256-byte stretch of a row; stored as 64 runs of 64 rows, each warp
    // one 256-byte stretch of a run. The shared rows are 65 words apart, so a warp's reads down
    // a column of the tile hit distinct banks.
    constexpr u32 TR = 64, TC = 64;
    __shared__ u64 tile[TR][TC + 1];
    griddep_wait();
    const u64 row_tiles = (p.move_rows + TR - 1) / TR, col_tiles = (p.cols + TC - 1) / TC;
    for (u64 t = blockIdx.x; t < row_tiles * col_tiles; t += p.movers) {
        const u64 r0 = (t / col_tiles) * TR, c0 = (t % col_tiles) * TC;
        for (u32 i = tid; i < TR * TC; i += nthreads) {
            const u32 y = i / TC, x = i % TC;  // row y, column x of the tile
            const u64 r = r0 + y, c = c0 + x;
            if (r < p.move_rows && c < p.cols) cp_async(&tile[y][x], &p.move_src[r * p.cols + c]);
        }
        cp_async_wait_all();
        __syncthreads();
        for (u32 i = tid; i < TR * TC; i += nthreads) {
            const u32 y = i / TR, x = i % TR;  // column y, row x of the tile
            const u64 c = c0 + y, r = r0 + x;
            if (r < p.move_rows && c < p.cols) p.move_dst[c * p.move_rows + r] = tile[x][y];
        }
        __syncthreads();
    }
}

#if ALL_KERNELS || WANT_leaves_block_keccak
extern "C" __global__ void __launch_bounds__(128) leaves_block_keccak(const __grid_constant__ BlockLeaves p) {
    leaves_block<0>(p);
}
#endif
#if ALL_KERNELS || WANT_leaves_block_blake3
extern "C" __global__ void __launch_bounds__(128) leaves_block_blake3(const __grid_constant__ BlockLeaves p) {
    leaves_block<1>(p);
}
#endif
