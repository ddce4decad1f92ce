// Batched copies: one launch moves every copy of a batch (copies are independent: no
// destination overlaps another range of the batch, so any order is correct).
//
// The batch travels as a kernel parameter: copy k moves start[k+1] - start[k] elements from
// src[k] to dst[k] (locations: LOC_B1 selects the second base pointer). The copies' elements
// are laid end to end; block b moves elements [b * CH, (b + 1) * CH) of that sequence, finding
// its first copy by binary search, so long and short copies balance across blocks.
#include "common.cuh"

#define COPY_MAX 1280
struct CopyBatch {
    u64 n;
    u64 src[COPY_MAX];
    u64 dst[COPY_MAX];
    u64 start[COPY_MAX + 1];  // prefix sums of the lengths; start[n] is the total
};

#define COPY_PER_THREAD 8

extern "C" __global__ void __launch_bounds__(256)
    copy_gather(u64* b0, u64* b1, const __grid_constant__ CopyBatch batch) {
    const u64 total = batch.start[batch.n];
    const u64 ch = (u64)blockDim.x * COPY_PER_THREAD;
    for (u64 chunk = blockIdx.x; chunk * ch < total; chunk += gridDim.x) {
        const u64 lo = chunk * ch, hi = min(total, lo + ch);
        // The last copy whose start is <= lo (it is non-empty and contains lo).
        u32 a = 0, b = (u32)batch.n;
        while (b - a > 1) {
            const u32 mid = (a + b) / 2;
            if (batch.start[mid] <= lo) a = mid;
            else b = mid;
        }
        u32 k = a;
        for (u64 e = lo; e < hi;) {
            while (batch.start[k + 1] <= e) ++k;
            const u64 seg_end = min(hi, batch.start[k + 1]);
            const u64 skip = e - batch.start[k];
            const u64* s = loc_ptr(b0, b1, batch.src[k]) + skip;
            u64* d = loc_ptr(b0, b1, batch.dst[k]) + skip;
            const u64 len = seg_end - e;
#pragma unroll 4
            for (u64 i = threadIdx.x; i < len; i += blockDim.x) d[i] = s[i];
            e = seg_end;
        }
    }
}

// Rows br(first) .. br(first + count - 1) of the row-major matrix `src` (2^log_rows rows of `cols`
// elements; br reverses the low log_rows bits) into consecutive rows of `dst`. Rows of 32
// elements or more take a warp each, its lanes across the columns; shorter rows (Merkle digests)
// take a thread each, so no lane idles.
extern "C" __global__ void __launch_bounds__(256) bit_reversed_rows(
    const u64* __restrict__ src, u64* __restrict__ dst, u64 cols, u64 first, u64 count, u64 log_rows) {
    const bool by_thread = cols < 32;
    const u64 per_block = by_thread ? blockDim.x : blockDim.x / 32;
    const u64 lane = by_thread ? 0 : threadIdx.x % 32;
    const u64 step = by_thread ? 1 : 32;
    const u64 stride = (u64)gridDim.x * per_block;
    for (u64 i = (u64)blockIdx.x * per_block + (by_thread ? threadIdx.x : threadIdx.x / 32); i < count;
         i += stride) {
        const u64 r = log_rows == 0 ? 0 : __brevll(first + i) >> (64 - log_rows);
        const u64* s = src + r * cols;
        u64* d = dst + i * cols;
        for (u64 c = lane; c < cols; c += step) d[c] = s[c];
    }
}
