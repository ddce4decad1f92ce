// Host emulation of the CUDA NTT register passes of shaders/cuda/lde.cu, without a GPU: every
// variant of a lazy pass (radix 32 plain, lean and power-of-two; radix 16 lean) must give the
// plain radix-32 one's values, pass by pass, on random inputs (values >= p included) with the real
// twiddle tables (powers of the field's 2^log_size-th root of unity, as backend-api's
// `field::root_of_unity`; the power-of-two form relies on them) and the real coset table (s^x / n;
// the lean forms' coset factors rely on it). Built and run by scripts/lde_emulate.sh, which
// rewrites the two CUDA-only constructs of lde.cu (the `extern __shared__` tile and
// `extern "C"`) and includes the result here; common.cuh's host arithmetic (its non-__CUDA_ARCH__
// branches) stands in for the PTX. A block is `blockDim` threads meeting at a std::barrier for
// each __syncthreads; blocks run one after another. The lean radix-32 form runs the plain form's
// arithmetic (the last inverse pass's coset factors are the table's own words), so its words must
// be equal; the power-of-two form and the lean radix-16 form (its windows in four-step form)
// multiply by other twiddles in another order, so their (lazy, non-canonical) words must be equal
// mod p.
// What it checks is the index arithmetic of the variants (where each thread loads, exchanges
// and stores), not the PTX arithmetic, which the device's field self-test checks.
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
// The largest register tile, its gathered twiddles and its coset factors (lde.rs's reg_tile_bytes):
// a 2^11 x 8 tile with radix 16's padding (8 elements per 16 rows), at most 31 x (1 + 32 + 64)
// twiddle slots (the lean radix-32 forward pass of 11 stages) and 2^11 coset factors with one slot
// skipped per 16.
unsigned long long tile_mem[(1 << 11) * 8 + (1 << 11) / 16 * 8 + 31 * 97 + (1 << 11) + (1 << 11) / 16];

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
    std::mt19937_64 rng(7);
    int runs = 0, bad = 0;
    const Kernel dif[] = {ntt_dif_pass_lazy, ntt_dif_pass_lean, ntt_dif_pass_pow2, ntt_dif_pass_lean16};
    const Kernel dit[] = {ntt_dit_pass_lazy, ntt_dit_pass_lean, ntt_dit_pass_pow2, ntt_dit_pass_lean16};
    const char* names[] = {"lazy", "lean", "pow2", "lean16"};
    const unsigned radix[] = {32, 32, 32, 16};
    // The power-of-two form and the four-step radix-16 windows compute other (congruent) words
    // than the plain form.
    const bool mod_p[] = {false, false, true, true};
    // (log size, k, log H, columns, DIT, canon_in, canon_out, finish_inverse, replicated_in)
    for (int log_size : {10, 11, 12})
        for (int k = 5; k <= 11 && k <= log_size; ++k)
            for (int log_h : {0, 1, log_size - k})
                for (int m : {3, 8, 13})
                    for (int is_dit = 0; is_dit < 2; ++is_dit)
                        for (int flags = 0; flags < 16; ++flags) {
                            const bool finish = flags & 4, replicated = flags & 8;
                            if (log_h > log_size - k) continue;
                            if (finish && (is_dit || log_h + k != log_size)) continue;  // the last inverse pass
                            if (replicated && (!is_dit || log_h != 1 || finish)) continue;  // the first forward pass, B = 2
                            const unsigned long long n = 1ull << log_size;
                            const std::vector<u64> tw = root_powers(log_size, !is_dit, n / 2);
                            // The backend's table, s^x / n (the lean form's coset factors rely on
                            // it), for a random shift s.
                            std::vector<u64> coset(n), buf(2 * n * m);
                            const u64 shift = rng() % (GL_P - 1) + 1;
                            coset[0] = pow_mod(n, GL_P - 2);
                            for (size_t x = 1; x < n; ++x) coset[x] = mul_mod(coset[x - 1], shift);
                            for (auto& x : buf) x = rng();
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
                            p.replicated_in = replicated;
                            p.log_blowup = 1;
                            // The in-place plan's value: a finish pass writes rows B p >= n only, which
                            // no tile reads (a smaller one would make the result depend on the order
                            // the tiles run in); the tiles of a one-pass finish straddle it.
                            p.spread_from = n / 2;
                            std::vector<u64> want;
                            for (int v = 0; v < 4; ++v) {
                                std::vector<u64> out = buf;
                                p.src = p.dst = out.data();
                                launch(is_dit ? dit[v] : dif[v], 3, (1u << k) * 8 / radix[v], p);
                                ++runs;
                                if (v == 0) {
                                    want = out;
                                    if (out == buf) {
                                        ++bad;
                                        printf("the plain pass changed nothing: log size %d k %d log H %d m %d\n", log_size, k, log_h, m);
                                    }
                                } else if (mod_p[v] ? !same_mod_p(out, want) : out != want) {
                                    ++bad;
                                    printf("%s %s differs from lazy: log size %d, k %d, log H %d, m %d, flags %d\n",
                                           is_dit ? "DIT" : "DIF", names[v], log_size, k, log_h, m, flags);
                                }
                            }
                        }
    printf("%d passes emulated, %d mismatches\n", runs, bad);
    return bad != 0;
}
