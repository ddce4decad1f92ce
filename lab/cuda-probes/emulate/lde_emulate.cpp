// Host emulation of the CUDA NTT passes of shaders/cuda/lde.cu, without a GPU: the radix-16
// register kernel (ntt_dif_pass_lean16, ntt_dit_pass_lean16: lazy values, four-step windows,
// gathered twiddles and coset factors) must give, pass by pass, the values of the shared-memory
// kernel (ntt_dif_pass, ntt_dit_pass: one radix-2 stage at a time, canonical arithmetic) mod p,
// and exactly its canonical words where the pass canonicalises what it stores (canon_out), on
// random inputs (values >= p included) with the real twiddle tables (powers of the field's
// 2^log_size-th root of unity, as backend-api's `field::root_of_unity`; the four-step windows
// rely on them) and the real coset table (s^x / n; the register kernel's coset factors rely on
// it). Every pass of 5 to 11 stages of 2^11- and 2^12-point transforms at half-spans from 1, from
// 2 and the highest, over 3, 8 and 13 columns, canon_in and canon_out both ways, the last inverse pass, and
// the first forward pass at blowup 2 reading each shared row for both of its replicas
// (replicated_in; the reference reads the replicas stored).
// Built and run by lde_emulate.sh, which rewrites the two CUDA-only constructs of lde.cu (the
// `extern __shared__` tile and `extern "C"`) and includes the result here; common.cuh's host
// arithmetic (its non-__CUDA_ARCH__ branches) stands in for the PTX. A block is `blockDim`
// threads meeting at a std::barrier for each __syncthreads; blocks run one after another. Each
// pass reads one buffer and writes another, as the owned route's passes do, so the result does not
// depend on the order the tiles run in.
// What it checks is the index arithmetic of the register kernel (where each thread loads,
// exchanges and stores, which twiddles and factors it gathers), not the PTX arithmetic, which the
// backend's device tests check (device_field_arithmetic_matches_the_host).
#include <algorithm>
#include <barrier>
#include <cstdint>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#define __device__
#define __host__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(...)
struct dim3 {
    unsigned x = 0;
};
thread_local dim3 threadIdx, blockIdx;
dim3 gridDim, blockDim;
std::barrier<>* block_barrier;
inline void __syncthreads() { block_barrier->arrive_and_wait(); }
inline unsigned __brev(unsigned x) {
    unsigned r = 0;
    for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
    return r;
}
inline int __clz(unsigned x) { return x ? __builtin_clz(x) : 32; }
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
    return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned s) {
    s &= 31;
    return s ? (hi << s) | (lo >> (32 - s)) : hi;
}
inline unsigned __byte_perm(unsigned x, unsigned, unsigned) { return __builtin_bswap32(x); }
using std::min;
struct ulonglong2 {
    unsigned long long x, y;
};
// The largest register tile, its gathered twiddles and its coset factors (backend-cuda's
// lde/kernels.rs, reg_pass_bytes): a 2^11 x 8 tile with its padding (8 elements per 16 rows), at
// most 15 x (1 + 16 + 128) twiddle slots (the forward pass of 11 stages) and 2^11 coset factors
// with one slot skipped per 16. The shared-memory kernel's 2^11 x 8 tile fits in it too.
unsigned long long tile_mem[(1 << 11) * 8 + (1 << 11) / 16 * 8 + 15 * 145 + (1 << 11) + (1 << 11) / 16];

#include LDE_HOST_SOURCE

typedef void (*Kernel)(const NttPass);

static u64 mul_mod(u64 a, u64 b) { return (u64)(((unsigned __int128)a * b) % GL_P); }

// [1, w, w^2, ..] (len values) for w the 2^log_n-th root of unity (or its inverse), from the
// field's 2^32-th root 1753635133440165772 = 7^((p - 1) / 2^32).
static std::vector<u64> root_powers(int log_n, bool inverse, size_t len) {
    u64 w = 1753635133440165772ull;
    for (int i = log_n; i < 32; ++i) w = mul_mod(w, w);
    if (inverse) {  // w^(2^log_n - 1)
        u64 r = 1;
        for (u64 e = (1ull << log_n) - 1, b = w; e; e >>= 1, b = mul_mod(b, b))
            if (e & 1) r = mul_mod(r, b);
        w = r;
    }
    std::vector<u64> t(len);
    u64 x = 1;
    for (auto& v : t) v = x, x = mul_mod(x, w);
    return t;
}

static u64 pow_mod(u64 b, u64 e) {
    u64 r = 1;
    for (; e; e >>= 1, b = mul_mod(b, b))
        if (e & 1) r = mul_mod(r, b);
    return r;
}

static bool same_mod_p(const std::vector<u64>& a, const std::vector<u64>& b) {
    for (size_t i = 0; i < a.size(); ++i)
        if (gl_canon(a[i]) != gl_canon(b[i])) return false;
    return true;
}

// `grid` blocks of `block` threads, one block at a time (the tile is shared by all of them).
static void launch(Kernel kernel, unsigned grid, unsigned block, const NttPass& p) {
    gridDim.x = grid;
    blockDim.x = block;
    std::barrier<> between(block);
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < block; ++t) {
        threads.emplace_back([&, t] {
            threadIdx.x = t;
            for (unsigned b = 0; b < grid; ++b) {
                std::barrier<> inside(block);
                if (t == 0) block_barrier = &inside;
                between.arrive_and_wait();  // everyone sees this block's barrier
                blockIdx.x = b;
                kernel(p);
                between.arrive_and_wait();  // the block is done before its barrier goes
            }
        });
    }
    for (auto& t : threads) t.join();
}

int main() {
    setvbuf(stdout, nullptr, _IOLBF, 0);  // each line as it is printed
    std::mt19937_64 rng(7);
    int runs = 0, bad = 0;
    // (log size, k, log H, columns, DIT, canon_in, canon_out, finish_inverse, replicated_in)
    // Transforms of 2^11 and 2^12 points, passes of 5 to 11 stages at half-spans from 1 (the last
    // inverse pass), from 2 (the first forward pass at blowup 2) and the highest; 3 columns (part
    // of a tile), 8 (one tile) and 13 (a tile and part of one).
    for (int log_size : {11, 12})
    for (int k = 5; k <= 11; ++k, printf("2^%d points, %d stages: %d passes so far, %d mismatches\n", log_size, k - 1, runs, bad))
        for (int h = 0; h < 3; ++h)
            for (int m : {3, 8, 13})
                for (int is_dit = 0; is_dit < 2; ++is_dit)
                    for (int flags = 0; flags < 16; ++flags) {
                        const bool finish = flags & 4, replicated = flags & 8;
                        const int log_h = h < 2 ? h : log_size - k;
                        if (log_h > log_size - k || (h == 2 && log_h < 2)) continue;  // each half-span once
                        if (finish && (is_dit || log_h + k != log_size)) continue;  // the last inverse pass
                        if (replicated && (!is_dit || log_h != 1)) continue;  // the first forward pass, B = 2
                        const unsigned long long n = 1ull << log_size;
                        const std::vector<u64> tw = root_powers(log_size, !is_dit, n / 2);
                        // The backend's table, s^x / n (the coset factors rely on it), for a
                        // random shift s.
                        std::vector<u64> coset(n);
                        const u64 shift = rng() % (GL_P - 1) + 1;
                        coset[0] = pow_mod(n, GL_P - 2);
                        for (size_t x = 1; x < n; ++x) coset[x] = mul_mod(coset[x - 1], shift);
                        // The pass reads `src` (n rows) and writes `dst` (2n rows: a finish stores
                        // row 2p), both starting as random words.
                        std::vector<u64> src(n * m), dst(2 * n * m);
                        for (auto& x : src) x = rng();
                        for (auto& x : dst) x = rng();
                        NttPass p{};
                        p.tw = tw.data();
                        p.coset = coset.data();
                        p.src_stride = p.dst_stride = p.cols = p.row_pitch = m;
                        p.log_size = log_size;
                        p.log_h_small = log_h;
                        p.k = k;
                        p.canon_in = flags & 1;
                        p.canon_out = (flags >> 1) & 1;
                        p.finish_inverse = finish;
                        p.log_blowup = 1;
                        p.tasks = n >> k;
                        // The reference: every tile loads its own rows (the replicas stored: row
                        // 2q + 1 holds row 2q's value) and canonicalises them, as the plan has the
                        // shared-memory kernel do.
                        std::vector<u64> ref_src = src, want = dst;
                        if (replicated)
                            for (size_t q = 0; q + 1 < n; q += 2)
                                for (int c = 0; c < m; ++c) ref_src[(q + 1) * m + c] = ref_src[q * m + c];
                        NttPass r = p;
                        r.canon_in = 1;
                        r.src = ref_src.data();
                        r.dst = want.data();
                        // (64 threads: the kernel's loops stride by the block size, so its values do
                        // not depend on it, and each host thread costs a context switch per barrier.)
                        launch(is_dit ? ntt_dit_pass : ntt_dif_pass, 3, 64, r);
                        // The register kernel: with replicated_in, a task is the 2 tiles that
                        // share rows 2q, which it reads for both.
                        std::vector<u64> got = dst;
                        p.replicated_in = replicated;
                        if (replicated) p.tasks >>= 1;
                        p.src = src.data();
                        p.dst = got.data();
                        launch(is_dit ? ntt_dit_pass_lean16 : ntt_dif_pass_lean16, 3, (1u << k) * 8 / 16, p);
                        runs += 2;
                        if (want == dst) {
                            ++bad;
                            printf("the reference pass changed nothing: log size %d, k %d, log H %d, m %d\n", log_size,
                                   k, log_h, m);
                        }
                        if (p.canon_out ? got != want : !same_mod_p(got, want)) {
                            ++bad;
                            printf("%s register pass differs from the shared-memory pass: log size %d, k %d, log H %d, "
                                   "m %d, flags %d\n",
                                   is_dit ? "DIT" : "DIF", log_size, k, log_h, m, flags);
                        }
                    }
    printf("%d passes emulated, %d mismatches\n", runs, bad);
    return bad != 0;
}
