// The in-place transpose's kernels (backend-api `plan`): the tiled out-of-place block transpose
// of `Step::TransposeBlock`, and the fused run-pass kernel that executes the net effect of
// consecutive `Step::Copies` batches of equal, aligned runs in one pass.
#include "common.cuh"

// dst (cols x rows, column-major) = transpose of src (rows x cols, row r at src + r * src_ld).
// 32 x 32 tiles through shared memory (one column of padding against bank conflicts), 32 x 8
// threads; a grid-stride loop over tiles, row-major order, so neighbouring blocks read
// neighbouring bytes.
__device__ __forceinline__ void transpose_tiles(const u64* __restrict__ src, u64* __restrict__ dst, u64 rows, u64 cols,
                                                u64 src_ld) {
    __shared__ u64 tile[32][33];
    const u64 row_tiles = (rows + 31) / 32, col_tiles = (cols + 31) / 32;
    const u32 tx = threadIdx.x, ty = threadIdx.y;
    for (u64 t = blockIdx.x; t < row_tiles * col_tiles; t += gridDim.x) {
        const u64 r0 = (t / col_tiles) * 32, c0 = (t % col_tiles) * 32;
#pragma unroll
        for (u32 k = 0; k < 32; k += 8) {
            const u64 r = r0 + ty + k, c = c0 + tx;
            if (r < rows && c < cols) tile[ty + k][tx] = src[r * src_ld + c];
        }
        __syncthreads();
#pragma unroll
        for (u32 k = 0; k < 32; k += 8) {
            const u64 c = c0 + ty + k, r = r0 + tx;
            if (r < rows && c < cols) dst[c * rows + r] = tile[tx][ty + k];
        }
        __syncthreads();
    }
}

// The block transpose of the in-place plan: src is a row-major rows x cols matrix.
extern "C" __global__ void __launch_bounds__(256)
    transpose_tile(const u64* __restrict__ src, u64* __restrict__ dst, u64 rows, u64 cols) {
    transpose_tiles(src, dst, rows, cols, cols);
}

// Every `stride`-th row of a row-major matrix of `cols` columns, column-major: dst[c * rows + r] =
// src[r * stride * cols + c] for r < rows (the quotient's column-major copy of its domain's rows).
extern "C" __global__ void __launch_bounds__(256)
    transpose_tile_strided(const u64* __restrict__ src, u64* __restrict__ dst, u64 rows, u64 cols, u64 stride) {
    transpose_tiles(src, dst, rows, cols, stride * cols);
}

// The net effect of consecutive copy batches whose moves all have length `unit` and start at
// multiples of `unit`: slot dst[i] receives the ORIGINAL content of slot src[i], for all i at once.
// Because every range is a whole aligned slot, the element at offset o of one slot is only ever
// moved to offset o of another: block w owns offsets [w * win, (w + 1) * win) of every slot, reads
// all its sources into shared memory, waits, and writes all destinations. No two blocks touch the
// same element, so one launch is exact. Locations use LOC_B1 for the scratch buffer.
#define FUSE_MAX 384
struct FusedRuns {
    u64 n;        // moves
    u64 unit;     // slot length in elements
    u64 log_win;  // log2 of the window (elements of each slot per block), >= 4
    u64 src[FUSE_MAX];
    u64 dst[FUSE_MAX];
};

template <typename V>  // u64, or ulonglong2 when the unit is even
__device__ __forceinline__ void fused_runs(u64* buf, u64* scratch, const FusedRuns& mv) {
    extern __shared__ u64 smem[];  // [n][win]
    V* sv = reinterpret_cast<V*>(smem);
    constexpr u32 LOG_PER = sizeof(V) == 16 ? 1 : 0;  // log2(u64 per vector)
    const u64 win = 1ull << mv.log_win;
    const u32 log_vwin = (u32)mv.log_win - LOG_PER;   // log2(vectors per slot window)
    const u32 vwin = 1u << log_vwin;
    const u64 windows = (mv.unit + win - 1) >> mv.log_win;
    const u32 n = (u32)mv.n;
    for (u64 w = blockIdx.x; w < windows; w += gridDim.x) {
        const u64 off = w << mv.log_win;
        const u64 len = min(win, mv.unit - off);  // a whole number of vectors (host checks)
        const u32 vlen = (u32)(len >> LOG_PER);
        for (u32 idx = threadIdx.x; idx < n * vwin; idx += blockDim.x) {
            const u32 i = idx >> log_vwin, t = idx & (vwin - 1);
            if (t < vlen) cp_async(&sv[idx], reinterpret_cast<const V*>(loc_ptr(buf, scratch, mv.src[i]) + off) + t);
        }
        cp_async_wait_all();
        __syncthreads();
#pragma unroll 4
        for (u32 idx = threadIdx.x; idx < n * vwin; idx += blockDim.x) {
            const u32 i = idx >> log_vwin, t = idx & (vwin - 1);
            if (t < vlen) reinterpret_cast<V*>(loc_ptr(buf, scratch, mv.dst[i]) + off)[t] = sv[idx];
        }
        __syncthreads();
    }
}

// 16-byte accesses (the unit, hence every slot offset, is even).
extern "C" __global__ void __launch_bounds__(256)
    transpose_fused_runs_v2(u64* buf, u64* scratch, const __grid_constant__ FusedRuns mv) {
    fused_runs<ulonglong2>(buf, scratch, mv);
}

// 8-byte accesses, for odd units.
extern "C" __global__ void __launch_bounds__(256)
    transpose_fused_runs_v1(u64* buf, u64* scratch, const __grid_constant__ FusedRuns mv) {
    fused_runs<u64>(buf, scratch, mv);
}
