//! The coset LDE: a radix-2 NTT on the row-major layout, in place in the LDE buffer, in three
//! passes over memory.
//!
//! For an `n x m` trace, blowup `B` and shift `s` (CONVENTIONS.md, "Coset low-degree
//! extension"), with the shared [`LdeTwiddles`] tables, `N = n * B`:
//!
//! 1. **Canonicalise.** The buffer (`N x m`) holds the trace in its first `n` rows
//!    ([`backend_api::Backend::coset_lde_in_place`]); the first pass that reads them (the first
//!    group of step 2, or the blocks of step 3 when there is none) reduces their values mod p
//!    as it loads them, so this costs no pass of its own. The other rows are never read: step 3
//!    writes every one of them.
//! 2. **Inverse NTT, wide stages.** The inverse transform of size `n` is decimation in frequency
//!    (Gentleman-Sande) with `w_n^-1`, natural order in, bit-reversed order out. Its stages of
//!    span `>= L` (the block size of step 3) run here on the first `n` rows, in groups of
//!    consecutive stages: the rows `j + t * s0` (`t = 0 .. 2^g`) of a group whose smallest span
//!    is `s0` only combine with each other for its `g` stages, so one task takes such sets of
//!    rows (for `J` consecutive `j`, so it reads runs of `J` rows) through all `g` stages while
//!    they sit in its cache: one pass over memory per group. Where whole rows would need
//!    several groups, a task takes a strip of columns instead, so that one group (one pass)
//!    holds every wide stage.
//! 3. **Narrow stages, coset scaling and spreading, fused, block by block.** A block of `L`
//!    consecutive rows of the inverse runs its remaining stages (spans `< L`). Position `q` then
//!    holds coefficient `k = br_n(q)` times `n`: it is multiplied by `s^k / n` (`coset[k]`) and,
//!    since in a size-`N` bit-reversed array that coefficient belongs at `br_N(k) = q * B` with
//!    zeros at the other `B - 1` positions of its group (the first `log2 B` forward stages only
//!    copy it over those zeros), written to the `B` rows `[qB, qB + B)`. The block's `L * B`
//!    target rows then run the forward stages of span `< L * B` while they are in cache. The
//!    targets of block `b`, `[bLB, (b+1)LB)`, lie above the sources of every earlier block
//!    except block 0's own, so blocks run in parallel waves from the top down: a wave takes
//!    every block whose targets are rows already read, and block 0 reads its rows into a
//!    scratch first.
//! 4. **Forward NTT, wide stages.** The forward transform of size `N` is decimation in time
//!    (Cooley-Tukey), bit-reversed in, natural order out; its stages of span `>= L * B` run in
//!    groups as in step 2.
//!
//! `L` is the largest power of two whose `L` source rows and `L * B` target rows fit
//! [`LOCAL_BYTES`]; a group takes as many stages as fit it. A butterfly combines two rows, whose
//! `m` columns are contiguous, so it vectorises across columns with no shuffles. The row kernels
//! are chosen at run time, no build flag ([`LdeIsa::detect`]): with AVX-512F they work on eight
//! columns per instruction, with AVX2 on four (AVX2 has no unsigned 64-bit compare, so its
//! kernels compare values with the sign bit flipped), otherwise on one;
//! [`crate::CpuBackend::with_lde_isa`] picks a plainer set. The vector kernels keep values
//! canonical; the scalar ones (aarch64's, and any CPU's without AVX2) leave them anywhere in
//! `[0, 2^64)` as Plonky3's scalar Goldilocks does, which saves a compare with p per operation,
//! and the LDE reduces its output once after the last stage. So the output is canonical, and every
//! kernel set computes the same values, which the tests check for each set the CPU runs against
//! the naive reference. (Plonky3's own packed Goldilocks is chosen at compile time from the
//! build's target features, so it cannot serve a default build as it is.)

use backend_api::field::{LdeTwiddles, P, bit_reverse, canonical, mul};
use backend_api::{LdeParams, Result, validate};
use rayon::prelude::*;

use crate::memory::Allocator;

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;

/// Bytes of rows that one task keeps in cache through several stages (half of a 1 MiB L2).
const LOCAL_BYTES: usize = 512 << 10;
/// The narrowest column strip a group task takes (and strips are multiples of it): eight-lane
/// vectors, 128 B per row.
const MIN_STRIP: usize = 16;

/// `a + b mod p` for canonical `a`, `b`; canonical result.
#[inline(always)]
fn add(a: u64, b: u64) -> u64 {
    let (s, over) = a.overflowing_add(b);
    let (t, under) = s.overflowing_sub(P);
    // With overflow the true sum is s + 2^64 >= p, and s + 2^64 - p wraps to `t`.
    if over || !under { t } else { s }
}

/// `a - b mod p` for canonical `a`, `b`; canonical result.
#[inline(always)]
fn sub(a: u64, b: u64) -> u64 {
    let (d, under) = a.overflowing_sub(b);
    if under { d.wrapping_add(P) } else { d }
}

/// The instructions the LDE's row kernels use ([`crate::CpuBackend::with_lde_isa`]). Every
/// variant exists on every target; [`LdeIsa::is_supported`] says whether this CPU runs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LdeIsa {
    /// Scalar `u64` / `u128` arithmetic, on every CPU; what aarch64 runs. NEON multiplies at most
    /// 32 x 32 bits per lane, so a 64 x 64-bit product there is four multiplies and the carries
    /// between them, against one `mul` and one `umulh` on the integer pipes (Plonky3's own
    /// aarch64 packing of Goldilocks multiplies with those two scalar instructions too).
    Scalar,
    /// AVX2 (x86-64): four columns per instruction.
    Avx2,
    /// AVX-512F (x86-64): eight columns per instruction.
    Avx512,
}

impl LdeIsa {
    /// Every variant, from the plainest.
    pub const ALL: [LdeIsa; 3] = [LdeIsa::Scalar, LdeIsa::Avx2, LdeIsa::Avx512];

    /// The best kernels this CPU runs (checked at run time, no build flag): AVX-512F, else AVX2,
    /// else scalar. [`crate::CpuBackend::new`] uses them.
    pub fn detect() -> Self {
        Self::ALL.into_iter().rev().find(|isa| isa.is_supported()).unwrap_or(LdeIsa::Scalar)
    }

    /// Whether this CPU runs these kernels (checked at run time).
    pub fn is_supported(self) -> bool {
        match self {
            LdeIsa::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            LdeIsa::Avx2 => std::arch::is_x86_feature_detected!("avx2"),
            #[cfg(target_arch = "x86_64")]
            LdeIsa::Avx512 => std::arch::is_x86_feature_detected!("avx512f"),
            #[cfg(not(target_arch = "x86_64"))]
            LdeIsa::Avx2 | LdeIsa::Avx512 => false,
        }
    }

    /// Every variant this CPU runs, from the plainest.
    pub fn supported() -> Vec<LdeIsa> {
        Self::ALL.into_iter().filter(|isa| isa.is_supported()).collect()
    }

    /// The kernels' name: `scalar`, `avx2`, `avx512`.
    pub fn name(self) -> &'static str {
        match self {
            LdeIsa::Scalar => "scalar",
            LdeIsa::Avx2 => "avx2",
            LdeIsa::Avx512 => "avx512",
        }
    }
}

impl std::fmt::Display for LdeIsa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

use LdeIsa as Isa;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Butterfly {
    /// `(a, b) -> (a + b, (a - b) w)`.
    Dif,
    /// `(a, b) -> (a + b w, a - b w)`.
    Dit,
}

/// One butterfly over two rows of equal length: canonical in and out, or any `u64` for the
/// scalar kernels ([`lazy::Lazy`]).
#[inline]
fn butterfly(isa: Isa, kind: Butterfly, lo: &mut [u64], hi: &mut [u64], w: u64) {
    match isa {
        Isa::Scalar => butterfly_scalar::<lazy::Lazy>(kind, lo, hi, w),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::Avx2` only reaches the kernels when the CPU reports AVX2
        // (`coset_lde_in_place_with` asserts `is_supported`, or a test that checked it).
        Isa::Avx2 => unsafe { avx2::butterfly(kind, lo, hi, w) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as for AVX2, with AVX-512F.
        Isa::Avx512 => unsafe { avx512::butterfly(kind, lo, hi, w) },
        #[cfg(not(target_arch = "x86_64"))]
        Isa::Avx2 | Isa::Avx512 => unreachable!("x86-64 kernels are never supported here"),
    }
}

/// One butterfly from the rows `src` to the rows `dst`, all four of equal length, canonical out
/// (any `u64` for the scalar kernels, which also take any `u64` in):
/// the first or last stage of a group pass, which moves the rows between the buffer and the
/// pass's scratch as it computes them. With `CANON` the inputs may be any `u64` and are
/// reduced mod p as they are loaded (the first pass over a trace); otherwise they are canonical.
#[inline]
fn butterfly_to<const CANON: bool>(isa: Isa, kind: Butterfly, src: [&[u64]; 2], dst: [&mut [u64]; 2], w: u64) {
    let ([a, b], [x, y]) = (src, dst);
    match isa {
        // The lazy kernels take any u64: nothing to reduce on the way in.
        Isa::Scalar => butterfly_scalar_to::<lazy::Lazy>(kind, a, b, x, y, w),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as in `butterfly`.
        Isa::Avx2 => unsafe { avx2::butterfly_to::<CANON>(kind, a, b, x, y, w) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as in `butterfly`.
        Isa::Avx512 => unsafe { avx512::butterfly_to::<CANON>(kind, a, b, x, y, w) },
        #[cfg(not(target_arch = "x86_64"))]
        Isa::Avx2 | Isa::Avx512 => unreachable!("x86-64 kernels are never supported here"),
    }
}

/// `dst[i] = src[i] * c` for canonical `src`, `c` (any `u64` in and out for the scalar kernels); rows
/// of equal length.
#[inline]
fn scale(isa: Isa, dst: &mut [u64], src: &[u64], c: u64) {
    match isa {
        Isa::Scalar => dst.iter_mut().zip(src).for_each(|(o, &x)| *o = lazy::Lazy::mul(x, c)),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as in `butterfly`.
        Isa::Avx2 => unsafe { avx2::scale(dst, src, c) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as in `butterfly`.
        Isa::Avx512 => unsafe { avx512::scale(dst, src, c) },
        #[cfg(not(target_arch = "x86_64"))]
        Isa::Avx2 | Isa::Avx512 => unreachable!("x86-64 kernels are never supported here"),
    }
}

/// The field arithmetic of a scalar kernel: [`Canonical`] (canonical values in and out, the SIMD
/// kernels' tails) or [`lazy::Lazy`] (any `u64`, [`LdeIsa::Scalar`]).
trait Arith {
    fn add(a: u64, b: u64) -> u64;
    fn sub(a: u64, b: u64) -> u64;
    fn mul(a: u64, b: u64) -> u64;
    /// A source value as an out-of-place butterfly reads it.
    fn load(x: u64) -> u64;
}

/// Canonical arithmetic; with `REDUCE` the out-of-place butterflies reduce what they load mod p.
struct Canonical<const REDUCE: bool>;

impl<const REDUCE: bool> Arith for Canonical<REDUCE> {
    #[inline(always)]
    fn add(a: u64, b: u64) -> u64 {
        add(a, b)
    }
    #[inline(always)]
    fn sub(a: u64, b: u64) -> u64 {
        sub(a, b)
    }
    #[inline(always)]
    fn mul(a: u64, b: u64) -> u64 {
        mul(a, b)
    }
    #[inline(always)]
    fn load(x: u64) -> u64 {
        if REDUCE { canonical(x) } else { x }
    }
}

/// The scalar butterfly in the arithmetic `A`.
#[inline(always)]
fn butterfly_scalar<A: Arith>(kind: Butterfly, lo: &mut [u64], hi: &mut [u64], w: u64) {
    match (kind, w == 1) {
        (_, true) => {
            for (a, b) in lo.iter_mut().zip(hi) {
                let (x, y) = (*a, *b);
                *a = A::add(x, y);
                *b = A::sub(x, y);
            }
        }
        (Butterfly::Dif, false) => {
            for (a, b) in lo.iter_mut().zip(hi) {
                let (x, y) = (*a, *b);
                *a = A::add(x, y);
                *b = A::mul(A::sub(x, y), w);
            }
        }
        (Butterfly::Dit, false) => {
            for (a, b) in lo.iter_mut().zip(hi) {
                let (x, t) = (*a, A::mul(*b, w));
                *a = A::add(x, t);
                *b = A::sub(x, t);
            }
        }
    }
}

/// The scalar [`butterfly_to`] in the arithmetic `A`.
#[inline(always)]
fn butterfly_scalar_to<A: Arith>(
    kind: Butterfly,
    src_lo: &[u64],
    src_hi: &[u64],
    dst_lo: &mut [u64],
    dst_hi: &mut [u64],
    w: u64,
) {
    let rows = src_lo.iter().zip(src_hi).zip(dst_lo.iter_mut().zip(dst_hi));
    match (kind, w == 1) {
        (_, true) => rows.for_each(|((&x, &y), (a, b))| {
            let (x, y) = (A::load(x), A::load(y));
            (*a, *b) = (A::add(x, y), A::sub(x, y));
        }),
        (Butterfly::Dif, false) => rows.for_each(|((&x, &y), (a, b))| {
            let (x, y) = (A::load(x), A::load(y));
            (*a, *b) = (A::add(x, y), A::mul(A::sub(x, y), w));
        }),
        (Butterfly::Dit, false) => rows.for_each(|((&x, &y), (a, b))| {
            let (x, t) = (A::load(x), A::mul(A::load(y), w));
            (*a, *b) = (A::add(x, t), A::sub(x, t));
        }),
    }
}

/// The arithmetic of [`LdeIsa::Scalar`]'s kernels: values anywhere in `[0, 2^64)` in and out (each
/// the residue mod p it stands for), as Plonky3's scalar Goldilocks keeps them, so that no
/// operation ends in a compare with p; the LDE reduces its output once, after the last stage.
mod lazy {
    use super::Arith;

    /// `2^64 mod p`.
    const EPS: u64 = 0xFFFF_FFFF;

    pub(super) struct Lazy;

    impl Arith for Lazy {
        /// `a + b`: a carry is `2^64 = EPS`, and adding it can carry once more only from a sum
        /// above `2^64 - EPS`, which the second `EPS` then leaves below `2^32`.
        #[inline(always)]
        fn add(a: u64, b: u64) -> u64 {
            let (s, c) = a.overflowing_add(b);
            let (s, c) = s.overflowing_add(EPS * u64::from(c));
            if c { s + EPS } else { s }
        }

        /// `a - b`: a borrow is `-2^64 = -EPS`, as in `add`.
        #[inline(always)]
        fn sub(a: u64, b: u64) -> u64 {
            let (d, c) = a.overflowing_sub(b);
            let (d, c) = d.overflowing_sub(EPS * u64::from(c));
            if c { d - EPS } else { d }
        }

        /// `a * b`: `backend_api::field::reduce128` without its last compare with p.
        #[inline(always)]
        fn mul(a: u64, b: u64) -> u64 {
            let x = u128::from(a) * u128::from(b);
            let (lo, hi) = (x as u64, (x >> 64) as u64);
            let (t, borrow) = lo.overflowing_sub(hi >> 32);
            let t = if borrow { t - EPS } else { t };
            let (r, carry) = t.overflowing_add((hi & EPS) * EPS);
            if carry { r + EPS } else { r }
        }

        /// Any `u64` is taken as it is.
        #[inline(always)]
        fn load(x: u64) -> u64 {
            x
        }
    }
}

/// One transform's stages and table: the butterfly kind, the twiddle table, and the transform
/// size it is for (span `h` reads the table with stride `size / 2h`).
#[derive(Clone, Copy)]
struct Transform<'a> {
    isa: Isa,
    kind: Butterfly,
    table: &'a [u64],
    size: usize,
}

impl Transform<'_> {
    /// Spans `h` with `lo <= h < hi` (powers of two), in this transform's order: decreasing for
    /// decimation in frequency, increasing for decimation in time.
    fn spans(&self, lo: usize, hi: usize) -> Vec<usize> {
        let mut spans: Vec<usize> = std::iter::successors(Some(lo), |h| Some(h * 2)).take_while(|&h| h < hi).collect();
        if self.kind == Butterfly::Dif {
            spans.reverse();
        }
        spans
    }

    /// The stages of span `lo <= h < hi` over a block of consecutive rows (a multiple of `2h`
    /// rows, starting at a multiple of `2h` of the transform).
    fn block_stages(&self, block: &mut [u64], m: usize, lo: usize, hi: usize) {
        for h in self.spans(lo, hi) {
            let stride = self.size / (2 * h);
            for pair in block.chunks_exact_mut(2 * h * m) {
                let (a, b) = pair.split_at_mut(h * m);
                for (i, (x, y)) in a.chunks_exact_mut(m).zip(b.chunks_exact_mut(m)).enumerate() {
                    butterfly(self.isa, self.kind, x, y, self.table[i * stride]);
                }
            }
        }
    }

    /// The `g` stages of spans `s0 .. s0 * 2^g` over `data` (rows of `m`), in parallel tasks that
    /// each take `2^g` runs of `j_rows` rows (the rows `j + t * s0`, `t < 2^g`, for `j_rows`
    /// consecutive `j`) through all `g` stages (module doc, step 2). A task's stages between the
    /// first and the last work in a contiguous per-thread scratch ([`Transform::task_stages`]):
    /// the runs lie `s0` rows apart, often a power-of-two number of bytes, which would map them
    /// all to the same few cache sets. With `canonicalise` the first stage reduces the values mod
    /// p as it loads them (the first pass over a trace whose values may be any `u64`).
    fn group_stages(&self, data: &mut [u64], m: usize, group: Group, canonicalise: bool) {
        let Group { s0, g, j_rows, width } = group;
        let sets = 1usize << g;
        let strips = m.div_ceil(width);
        data.par_chunks_mut((s0 << g) * m).for_each(|block| {
            // tasks[k * strips + c][t * j_rows + jj]: columns [c * width, (c + 1) * width) of row
            // t * s0 + k * j_rows + jj of the block, in row order.
            let mut tasks: Vec<Vec<&mut [u64]>> =
                (0..s0 / j_rows * strips).map(|_| Vec::with_capacity(sets * j_rows)).collect();
            for (r, row) in block.chunks_exact_mut(m).enumerate() {
                let k = (r % s0) / j_rows;
                for (c, piece) in row.chunks_mut(width).enumerate() {
                    tasks[k * strips + c].push(piece);
                }
            }
            tasks.into_par_iter().enumerate().for_each(|(task, mut pieces)| {
                let k = task / strips;
                SCRATCH.with_borrow_mut(|scratch| {
                    self.task_stages(&mut pieces, scratch, Task { k, s0, j_rows, canonicalise });
                });
            });
        });
    }
}

/// One group task's place in its group: the task's first `j` is `k * j_rows`, its rows the
/// `j + t * s0`.
#[derive(Clone, Copy)]
struct Task {
    k: usize,
    s0: usize,
    j_rows: usize,
    canonicalise: bool,
}

impl Transform<'_> {
    /// One task of [`Transform::group_stages`]: its `pieces` (piece `t * j_rows + jj` is row
    /// `j + t * s0` of the group's set) through all the group's stages. The first stage reads
    /// the pieces and writes its results to `scratch`, the stages between work there, and the
    /// last stage writes back to the pieces, so moving the rows in and out costs no pass of its
    /// own. A group of one stage works on the pieces in place.
    fn task_stages(&self, pieces: &mut [&mut [u64]], scratch: &mut Vec<u64>, task: Task) {
        let Task { k, s0, j_rows, canonicalise } = task;
        let (sets, w) = (pieces.len() / j_rows, pieces[0].len());
        let spans = self.spans(1, sets);
        if spans.len() == 1 {
            if canonicalise {
                pieces.iter_mut().for_each(|p| p.iter_mut().for_each(|x| *x = canonical(*x)));
            }
            let (a, b) = pieces.split_at_mut(j_rows);
            for (jj, (x, y)) in a.iter_mut().zip(b).enumerate() {
                butterfly(self.isa, self.kind, x, y, self.table[(k * j_rows + jj) * self.size / (2 * s0)]);
            }
            return;
        }
        // The scratch only grows (a resize to its own length does nothing).
        scratch.resize(scratch.len().max(sets * j_rows * w), 0);
        let scratch = &mut scratch[..sets * j_rows * w];
        let last = spans.len() - 1;
        let mut pairs = Vec::with_capacity(sets / 2 * j_rows);
        for (stage, &h) in spans.iter().enumerate() {
            // Global span h * s0: row j + t * s0 pairs with t + h, twiddle index
            // (j + (t mod h) * s0) * size / (2 h s0).
            let stride = self.size / (2 * h * s0);
            pairs.clear();
            for base in (0..sets).step_by(2 * h) {
                for t in base..base + h {
                    for jj in 0..j_rows {
                        let wt = self.table[(k * j_rows + (t - base) * s0 + jj) * stride];
                        pairs.push((t * j_rows + jj, (t + h) * j_rows + jj, wt));
                    }
                }
            }
            for (q, &(lo, hi, wt)) in pairs.iter().enumerate() {
                let (s_lo, s_hi) = scratch.split_at_mut(hi * w);
                let (s_lo, s_hi) = (&mut s_lo[lo * w..(lo + 1) * w], &mut s_hi[..w]);
                if stage == 0 || stage == last {
                    // The pieces lie far apart, in runs too short for the hardware to see them
                    // coming: ask for a later butterfly's rows now.
                    if let Some(&(a, b, _)) = pairs.get(q + PREFETCH_AHEAD) {
                        prefetch(pieces[a]);
                        prefetch(pieces[b]);
                    }
                }
                if stage == 0 {
                    let src = [&*pieces[lo], &*pieces[hi]];
                    if canonicalise {
                        butterfly_to::<true>(self.isa, self.kind, src, [s_lo, s_hi], wt);
                    } else {
                        butterfly_to::<false>(self.isa, self.kind, src, [s_lo, s_hi], wt);
                    }
                } else if stage == last {
                    let (p_lo, p_hi) = pieces.split_at_mut(hi);
                    let dst = [&mut *p_lo[lo], &mut *p_hi[0]];
                    butterfly_to::<false>(self.isa, self.kind, [s_lo, s_hi], dst, wt);
                } else {
                    butterfly(self.isa, self.kind, s_lo, s_hi, wt);
                }
            }
        }
    }
}

/// How many butterflies ahead a group pass's first and last stages prefetch their rows.
const PREFETCH_AHEAD: usize = 2;

/// Asks the CPU to start loading `row` into its caches: a hint, which changes no value.
#[inline(always)]
fn prefetch(row: &[u64]) {
    #[cfg(target_arch = "x86_64")]
    for line in row.chunks(8) {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: a prefetch reads nothing the program sees and cannot fault; the address is in
        // `row`, and SSE is part of every x86-64 CPU.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(line.as_ptr().cast()) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = row;
}

thread_local! {
    /// A group task's rows, contiguous: at most [`LOCAL_BYTES`] (or two rows) per thread, kept
    /// for the thread's life so that tasks do not allocate.
    static SCRATCH: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A group of consecutive stages (module doc, step 2): spans `s0 .. s0 * 2^g`, tasks of
/// `j_rows` consecutive `j` and `width` columns (a strip of the rows, or the whole rows).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Group {
    s0: usize,
    g: u32,
    j_rows: usize,
    width: usize,
}

/// The groups that run the `stages` stages of spans `s0 * 2^i` (`i < stages`), ordered from the
/// smallest spans; each task keeps `2^g * j_rows` rows of `width` columns within `local` bytes
/// (or two rows, when `local` holds fewer). One group of strips, at least [`MIN_STRIP`] columns
/// wide, when whole rows would need several groups (several passes).
fn groups(s0: usize, stages: u32, m: usize, local: usize) -> Vec<Group> {
    let row_bytes = m * 8;
    // The most stages one group can hold (at least one: two rows per task).
    let fit = (local / row_bytes).max(2).ilog2();
    if stages > fit && stages < usize::BITS {
        let width = (local / (8 << stages)) / MIN_STRIP * MIN_STRIP;
        if width >= MIN_STRIP {
            return vec![Group { s0, g: stages, j_rows: 1, width }];
        }
    }
    let count = stages.div_ceil(fit);
    let mut out = Vec::new();
    let mut done = 0;
    for c in 0..count {
        // Near-equal group sizes, the larger ones first.
        let g = stages / count + u32::from(c < stages % count);
        let s = s0 << done;
        let j_rows = (local / (row_bytes << g)).clamp(1, s);
        out.push(Group { s0: s, g, j_rows: 1 << j_rows.ilog2(), width: m });
        done += g;
    }
    out
}

/// [`crate::CpuBackend::coset_lde_in_place`] over a host slice with the kernels `isa`: `data`
/// holds `N * m` elements, the trace in its first `n` rows.
///
/// # Errors
/// [`backend_api::Error::LengthMismatch`] when `data` does not hold `params.lde_shape()`, out
/// of memory for the twiddle tables.
///
/// # Panics
/// When this CPU does not run `isa` ([`crate::CpuBackend::with_lde_isa`] refuses such kernels).
pub(crate) fn coset_lde_in_place(isa: Isa, alloc: &Allocator, data: &mut [u64], params: &LdeParams) -> Result<()> {
    coset_lde_in_place_with(isa, LOCAL_BYTES, alloc, data, params)
}

/// [`coset_lde_in_place`] with a cache budget (bytes; [`LOCAL_BYTES`] outside tests, which use
/// small ones to reach many groups and blocks on small shapes).
fn coset_lde_in_place_with(
    isa: Isa,
    local: usize,
    alloc: &Allocator,
    data: &mut [u64],
    params: &LdeParams,
) -> Result<()> {
    // The SIMD kernels' safety rests on this.
    assert!(isa.is_supported(), "the {isa} LDE kernels need a CPU that has them");
    validate::coset_lde_in_place(params, data.len())?;
    let shape = params.trace();
    let (n, m, blowup) = (shape.rows(), shape.cols(), params.blowup());
    let big_n = n * blowup;
    let (log_n, log_b) = (params.log_trace_rows(), params.log_blowup());

    // The tables are host memory the model counts, so they are accounted while they live.
    let _tables = alloc.reserve_host(LdeTwiddles::bytes_for(log_n, log_b))?;
    let l = block_rows(n, m, blowup, local);
    let tw = LdeTwiddles::shared(log_n, log_b, params.shift());
    let inv = Transform { isa, kind: Butterfly::Dif, table: &tw.inv_twiddles, size: n };
    let fwd = Transform { isa, kind: Butterfly::Dit, table: &tw.twiddles, size: big_n };
    let wide = (n / l).ilog2();

    // 2. The inverse's spans n/2 .. L, in groups from the widest; the first pass over the trace
    // (this one, or the blocks' when there is no wide stage) reads its values mod p (step 1).
    let head = &mut data[..n * m];
    let mut raw = true;
    for group in groups(l, wide, m, local).into_iter().rev() {
        inv.group_stages(head, m, group, std::mem::take(&mut raw));
    }
    // 3. Blocks: the inverse's spans L/2 .. 1, scaling and spreading, the forward's B .. LB/2.
    spread_blocks(data, n, m, blowup, l, |src, dst, b| {
        if raw {
            src.iter_mut().for_each(|x| *x = canonical(*x));
        }
        inv.block_stages(src, m, 1, l);
        let bits = log_n;
        match dst {
            None => {
                let mut copy = vec![0; m];
                for (q, row) in src.chunks_exact_mut(m).enumerate() {
                    copy.copy_from_slice(row);
                    scale(isa, row, &copy, tw.coset[bit_reverse(b * l + q, bits)]);
                }
                fwd.block_stages(src, m, blowup, l * blowup);
            }
            Some(dst) => {
                for (q, (row, group)) in src.chunks_exact(m).zip(dst.chunks_exact_mut(blowup * m)).enumerate() {
                    let (first, rest) = group.split_at_mut(m);
                    scale(isa, first, row, tw.coset[bit_reverse(b * l + q, bits)]);
                    rest.chunks_exact_mut(m).for_each(|r| r.copy_from_slice(first));
                }
                fwd.block_stages(dst, m, blowup, l * blowup);
            }
        }
    });
    // 4. The forward's spans LB .. N/2, in groups from the narrowest.
    for group in groups(l * blowup, wide, m, local) {
        fwd.group_stages(data, m, group, false);
    }
    // The scalar kernels leave values anywhere in [0, 2^64) (module `lazy`).
    if isa == Isa::Scalar {
        data.par_chunks_mut(1 << 14).for_each(|c| c.iter_mut().for_each(|x| *x = canonical(*x)));
    }
    Ok(())
}

/// `L`: the largest power of two `<= n` whose `L` source and `L * B` target rows take at most
/// `local` bytes, at least 1.
fn block_rows(n: usize, m: usize, blowup: usize, local: usize) -> usize {
    let rows = (local / (m * 8 * (blowup + 1))).clamp(1, n);
    1 << rows.ilog2()
}

/// Runs `work(src, dst, b)` for every block `b` of `L` rows of the inverse (the first `n` rows
/// of `data`), with `dst` its `L * B` target rows `[bLB, (b+1)LB)` (module doc, step 3), or
/// `None` with `B = 1`, where the targets are the block itself.
///
/// With `B >= 2` the blocks run from the top down, in parallel waves. While blocks `[0, c)` are
/// unread, block `b`'s targets start at row `bLB >= cL` exactly when `b >= ceil(c / B)`, so the
/// wave `[ceil(c / B), c)` writes only rows above every unread source; then `c = ceil(c / B)`.
/// The waves shrink `c` until only block 0 is left, whose targets `[0, LB)` cover its own rows:
/// it reads them into a scratch first.
fn spread_blocks<F>(data: &mut [u64], n: usize, m: usize, blowup: usize, l: usize, work: F)
where
    F: Fn(&mut [u64], Option<&mut [u64]>, usize) + Sync,
{
    let blocks = n / l;
    if blowup == 1 {
        data.par_chunks_mut(l * m).enumerate().for_each(|(b, src)| work(src, None, b));
        return;
    }
    let mut c = blocks;
    while c > 1 {
        let start = c.div_ceil(blowup);
        let (lo, hi) = data.split_at_mut(c * l * m);
        let src = &mut lo[start * l * m..];
        let dst = &mut hi[(start * l * blowup - c * l) * m..(c * l * blowup - c * l) * m];
        dst.par_chunks_mut(l * blowup * m)
            .zip(src.par_chunks_mut(l * m))
            .enumerate()
            .for_each(|(k, (d, s))| work(s, Some(d), start + k));
        c = start;
    }
    let mut src = data[..l * m].to_vec();
    work(&mut src[..], Some(&mut data[..l * blowup * m]), 0);
}

#[cfg(test)]
mod tests {
    use super::*;
    use backend_api::{AllocTracker, MatrixShape};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use std::sync::Arc;

    // The independent naive reference: u128 % p throughout, its own roots of unity.
    use naive_reference::coset_lde as naive_lde;

    const PR: u128 = P as u128;

    fn mulr(a: u64, b: u64) -> u64 {
        ((a as u128 % PR) * (b as u128 % PR) % PR) as u64
    }

    fn powr(mut b: u64, mut e: u64) -> u64 {
        let mut acc = 1;
        while e > 0 {
            if e & 1 == 1 {
                acc = mulr(acc, b);
            }
            b = mulr(b, b);
            e >>= 1;
        }
        acc
    }

    fn allocator() -> Allocator {
        Allocator { tracker: Arc::new(AllocTracker::new()), limit: None }
    }

    /// Every kernel set this CPU runs, scalar included, so that a CPU with AVX-512F tests the
    /// AVX2 and scalar paths too; a CPU without some says so on stderr, as its tests then skip them.
    fn isas() -> Vec<Isa> {
        for isa in Isa::ALL.into_iter().filter(|isa| !isa.is_supported()) {
            eprintln!("SKIPPED the {isa} kernels: this CPU does not run them");
        }
        Isa::supported()
    }

    /// Cache budgets: 64 B (one-row blocks, one-stage groups), two in between (several groups,
    /// several blocks, waves) and the production one.
    const BUDGETS: [usize; 4] = [64, 512, 4096, LOCAL_BYTES];

    /// The in-place LDE of `trace`, from a buffer whose rows `[n, N)` hold random values
    /// (including values `>= p`): the contract says they are never read.
    fn lde(isa: Isa, local: usize, trace: &[u64], n: usize, m: usize, blowup: usize, shift: u64) -> Vec<u64> {
        let params = LdeParams::new(MatrixShape::new(n, m).unwrap(), blowup, shift).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64((n * 31 + m) as u64);
        let mut data: Vec<u64> = trace.to_vec();
        data.extend((n * m..n * blowup * m).map(|i| if i % 3 == 0 { P + i as u64 % 1000 } else { rng.random() }));
        coset_lde_in_place_with(isa, local, &allocator(), &mut data, &params).unwrap();
        data
    }

    #[test]
    fn the_documented_root_is_7_to_the_p_minus_1_over_2_32() {
        assert_eq!(powr(7, (P - 1) >> 32), 1_753_635_133_440_165_772);
    }

    #[test]
    fn field_ops_match_u128_on_canonical_values() {
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let edge = [0, 1, 2, P - 1, P - 2, 0xFFFF_FFFF, 1 << 32, 1 << 63];
        let vals: Vec<u64> = edge.into_iter().chain((0..300).map(|_| rng.random_range(0..P))).collect();
        for &a in &vals {
            for &b in &vals {
                assert_eq!(add(a, b) as u128, (a as u128 + b as u128) % PR);
                assert_eq!(sub(a, b) as u128, (a as u128 + PR - b as u128) % PR);
            }
        }
    }

    #[test]
    fn matches_the_naive_lde() {
        // n in 1..32, blowups 1..16, shifts 7, 1 and a non-canonical one (p + 7 means 7), three
        // columns (one all non-canonical values) so a row is more than one element; every kernel
        // set and cache budget.
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for log_n in 0..=5 {
            for log_b in 0..=4 {
                for shift in [7, 1, P + 7, 0xDEAD_BEEF_1234_5678] {
                    let (n, m, blowup) = (1usize << log_n, 3usize, 1usize << log_b);
                    let trace: Vec<u64> = (0..n * m)
                        .map(|i| if i % m == 2 { rng.random_range(P..=u64::MAX) } else { rng.random() })
                        .collect();
                    let expect = naive_lde(&trace, n, m, blowup, shift);
                    for isa in isas() {
                        for local in BUDGETS {
                            let got = lde(isa, local, &trace, n, m, blowup, shift);
                            assert_eq!(got, expect, "n={n} B={blowup} s={shift} {isa:?} {local} B");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn small_budgets_and_vector_widths_match_the_naive_lde() {
        // Widths around the eight-lane vectors (7, 8, 9, 17 columns) and 2^6..2^8 rows, so that
        // small budgets give many groups, many blocks and several waves, and block 0 reads its
        // rows into a scratch; all of them against the naive reference.
        let mut rng = ChaCha8Rng::seed_from_u64(8);
        // 256 x 40 under 8 KiB runs each transform's 5 wide stages as one group of 32- and
        // 8-column strips.
        for (n, m, blowup) in
            [(64usize, 7usize, 2usize), (128, 8, 4), (256, 9, 2), (64, 17, 8), (256, 1, 1), (256, 40, 2)]
        {
            // Every fifth value non-canonical, so that each kind of first pass (a group, strips,
            // blocks) has to reduce what it loads.
            let trace: Vec<u64> =
                (0..n * m).map(|i| if i % 5 == 0 { rng.random_range(P..=u64::MAX) } else { rng.random() }).collect();
            let expect = naive_lde(&trace, n, m, blowup, 7);
            for isa in isas() {
                for local in [64, 200, 1024, 3000, 8192, LOCAL_BYTES] {
                    let got = lde(isa, local, &trace, n, m, blowup, 7);
                    assert_eq!(got, expect, "{n} x {m} B={blowup} {isa:?} {local} B");
                }
            }
        }
    }

    #[test]
    fn traces_of_values_at_least_p_match_the_naive_lde() {
        // Every trace value in [p, 2^64) (the edges p and 2^64 - 1 included), rows of 1..=9
        // columns, so that whichever pass reads the trace first (a group's first stage through
        // the reducing kernels, on whole rows or strips, a one-stage group, or the blocks) reduces
        // every value it loads, the vector kernels' scalar tails included.
        let mut rng = ChaCha8Rng::seed_from_u64(10);
        for m in 1..=9usize {
            for (n, blowup) in [(64usize, 2usize), (128, 1), (32, 4)] {
                let trace: Vec<u64> = (0..n * m)
                    .map(|i| match i % 7 {
                        0 => P,
                        1 => u64::MAX,
                        _ => rng.random_range(P..=u64::MAX),
                    })
                    .collect();
                let expect = naive_lde(&trace, n, m, blowup, 7);
                for isa in isas() {
                    for local in [64, 200, 1024, 3000, LOCAL_BYTES] {
                        let got = lde(isa, local, &trace, n, m, blowup, 7);
                        assert_eq!(got, expect, "{n} x {m} B={blowup} {isa:?} {local} B");
                    }
                }
            }
        }
    }

    #[test]
    fn groups_cover_the_stages_once_within_the_budget() {
        for m in [1, 3, 64, 316, 5000] {
            for local in [64, 4096, LOCAL_BYTES] {
                for stages in 0..=20u32 {
                    let gs = groups(8, stages, m, local);
                    // Consecutive: each starts at the span where the previous one ended.
                    let mut s0 = 8;
                    for gr in &gs {
                        assert_eq!(gr.s0, s0, "{m} {local} {stages}: {gs:?}");
                        assert!(gr.g >= 1 && gr.j_rows >= 1 && gr.j_rows <= gr.s0 && gr.j_rows.is_power_of_two());
                        assert!(gr.width == m || (gr.width % MIN_STRIP == 0 && gr.width < m && gs.len() == 1));
                        let bytes = (gr.j_rows << gr.g) * gr.width * 8;
                        assert!(bytes <= local.max(2 * m * 8), "{m} {local} {stages}: {gr:?} takes {bytes} B");
                        s0 <<= gr.g;
                    }
                    assert_eq!(s0, 8 << stages, "{m} {local} {stages}: {gs:?}");
                }
            }
        }
        // The bench shapes: one full-width group at 64 columns, one group of 64-column strips at 316.
        assert_eq!(groups(256, 8, 64, LOCAL_BYTES), [Group { s0: 256, g: 8, j_rows: 4, width: 64 }]);
        assert_eq!(groups(64, 10, 316, LOCAL_BYTES), [Group { s0: 64, g: 10, j_rows: 1, width: 64 }]);
        assert_eq!(groups(8, 5, 40, 8192), [Group { s0: 8, g: 5, j_rows: 1, width: 32 }]);
        assert_eq!(block_rows(1 << 16, 64, 2, LOCAL_BYTES), 256);
        assert_eq!(block_rows(4, 64, 2, LOCAL_BYTES), 4);
        assert_eq!(block_rows(1 << 16, 1 << 20, 2, LOCAL_BYTES), 1);
    }

    #[test]
    fn every_kernel_set_matches_u128_arithmetic() {
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let edge =
            [0, 1, 2, P - 1, P - 2, 0xFFFF_FFFE, 0xFFFF_FFFF, 1 << 32, (1 << 32) + 1, 1 << 63, (1 << 63) - 1, P >> 1];
        // Lengths 0..=19 reach every vector width's scalar tail; the values are canonical, as the
        // in-place kernels require, and the reducing out-of-place ones also get them as values in
        // [p, 2^64) (the first pass over a trace reduces what it loads).
        for len in 0..=19usize {
            for round in 0..40 {
                let pick = |rng: &mut ChaCha8Rng| {
                    if rng.random_bool(0.3) { edge[rng.random_range(0..edge.len())] } else { rng.random_range(0..P) }
                };
                let lo: Vec<u64> = (0..len).map(|_| pick(&mut rng)).collect();
                let hi: Vec<u64> = (0..len).map(|_| pick(&mut rng)).collect();
                let w = if round % 4 == 0 { 1 } else { pick(&mut rng) };
                // The same values, non-canonical where they have a second representative
                // (x + p < 2^64), for the kernels that reduce what they load.
                let raw = |v: &[u64]| -> Vec<u64> {
                    v.iter()
                        .enumerate()
                        .map(|(i, &x)| if i % 2 == round % 2 && x < 0xFFFF_FFFF { x + P } else { x })
                        .collect()
                };
                let (lo_raw, hi_raw) = (raw(&lo), raw(&hi));
                for isa in isas() {
                    // The SIMD kernels give canonical values; the scalar ones any representative.
                    let out = |v: &[u64]| -> Vec<u64> {
                        if isa != Isa::Scalar {
                            assert!(v.iter().all(|&x| x < P), "{isa}: a value >= p in {v:?}");
                        }
                        v.iter().map(|&x| canonical(x)).collect()
                    };
                    for kind in [Butterfly::Dif, Butterfly::Dit] {
                        let (mut a, mut b) = (lo.clone(), hi.clone());
                        butterfly(isa, kind, &mut a, &mut b, w);
                        let (a, b) = (out(&a), out(&b));
                        // The out-of-place kernels give what the in-place one does.
                        let (mut c, mut d) = (vec![0; len], vec![0; len]);
                        butterfly_to::<false>(isa, kind, [&lo, &hi], [&mut c, &mut d], w);
                        assert_eq!((&out(&c), &out(&d)), (&a, &b), "{isa} {kind:?} to, w={w}");
                        let (mut c, mut d) = (vec![0; len], vec![0; len]);
                        butterfly_to::<true>(isa, kind, [&lo_raw, &hi_raw], [&mut c, &mut d], w);
                        assert_eq!((&out(&c), &out(&d)), (&a, &b), "{isa} {kind:?} to, reducing, w={w}");
                        // The reference: u128 arithmetic mod p.
                        for i in 0..len {
                            let (x, y) = (lo[i], hi[i]);
                            assert_eq!((a[i], b[i]), reference(kind, x, y, w), "{isa} {kind:?} x={x} y={y} w={w}");
                        }
                    }
                    let mut scaled = vec![0; len];
                    scale(isa, &mut scaled, &lo, w);
                    assert_eq!(out(&scaled), lo.iter().map(|&x| mulr(x, w)).collect::<Vec<_>>(), "{isa} scale by {w}");
                }
                // The scalar kernels take any u64 in place too, as the values they leave.
                let any = |rng: &mut ChaCha8Rng| {
                    if rng.random_bool(0.3) {
                        u64::MAX - rng.random_range(0..=u64::from(u32::MAX))
                    } else {
                        rng.random()
                    }
                };
                let (lo, hi): (Vec<u64>, Vec<u64>) = (0..len).map(|_| (any(&mut rng), any(&mut rng))).unzip();
                for kind in [Butterfly::Dif, Butterfly::Dit] {
                    let (mut a, mut b) = (lo.clone(), hi.clone());
                    butterfly(Isa::Scalar, kind, &mut a, &mut b, w);
                    for i in 0..len {
                        let (x, y) = (lo[i], hi[i]);
                        let got = (canonical(a[i]), canonical(b[i]));
                        assert_eq!(
                            got,
                            reference(kind, canonical(x), canonical(y), w),
                            "scalar {kind:?} x={x} y={y} w={w}"
                        );
                    }
                }
            }
        }
    }

    /// The butterfly of canonical `x`, `y` in `u128 % p` arithmetic.
    fn reference(kind: Butterfly, x: u64, y: u64, w: u64) -> (u64, u64) {
        let (x, y) = (u128::from(x), u128::from(y));
        let (a, b) = match kind {
            Butterfly::Dif => ((x + y) % PR, u128::from(mulr(((x + PR - y) % PR) as u64, w))),
            Butterfly::Dit => {
                let t = u128::from(mulr(y as u64, w));
                ((x + t) % PR, (x + PR - t) % PR)
            }
        };
        (a as u64, b as u64)
    }

    #[test]
    fn kernel_sets_are_detected_from_the_cpu() {
        let has = |isa: Isa| match isa {
            Isa::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => std::arch::is_x86_feature_detected!("avx2"),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => std::arch::is_x86_feature_detected!("avx512f"),
            #[cfg(not(target_arch = "x86_64"))]
            Isa::Avx2 | Isa::Avx512 => false,
        };
        let expect: Vec<Isa> = Isa::ALL.into_iter().filter(|&isa| has(isa)).collect();
        assert_eq!(Isa::supported(), expect);
        // The widest the CPU has.
        assert_eq!(Isa::detect(), *expect.last().unwrap());
        assert_eq!(Isa::ALL.map(Isa::name), ["scalar", "avx2", "avx512"]);
        assert_eq!(Isa::Avx2.to_string(), "avx2");
    }

    #[test]
    fn unsupported_kernels_are_refused() {
        let missing: Vec<Isa> = Isa::ALL.into_iter().filter(|isa| !isa.is_supported()).collect();
        if missing.is_empty() {
            eprintln!("SKIPPED unsupported_kernels_are_refused: this CPU runs every kernel set");
        }
        let params = LdeParams::new(MatrixShape::new(4, 2).unwrap(), 2, 7).unwrap();
        for isa in missing {
            let run = std::panic::catch_unwind(|| {
                let _ = coset_lde_in_place(isa, &allocator(), &mut [1; 16], &params);
            });
            assert!(run.is_err(), "{isa} ran on a CPU without it");
        }
    }

    #[test]
    fn wide_and_cache_blocked_shapes_match_the_naive_lde() {
        // Shapes where the stages split between cache blocks and global passes:
        // 2^8 rows x 200 cols (1600 B rows: 128-row blocks), and 2^6 x 5000 (2-row blocks).
        let mut rng = ChaCha8Rng::seed_from_u64(6);
        for (n, m, blowup) in [(256usize, 200usize, 2usize), (64, 5000, 4), (512, 1, 2)] {
            let trace: Vec<u64> = (0..n * m).map(|_| rng.random()).collect();
            for isa in isas() {
                let got = lde(isa, LOCAL_BYTES, &trace, n, m, blowup, 7);
                // The naive reference on a column sample keeps this test fast.
                for c in [0, m / 2, m - 1] {
                    let col: Vec<u64> = (0..n).map(|r| trace[r * m + c]).collect();
                    let expect = naive_lde(&col, n, 1, blowup, 7);
                    let got_col: Vec<u64> = (0..n * blowup).map(|r| got[r * m + c]).collect();
                    assert_eq!(got_col, expect, "{n} x {m} B={blowup} column {c} {isa:?}");
                }
            }
        }
    }

    #[test]
    fn blowup_1_shift_1_is_the_canonical_identity() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for (n, m) in [(1, 1), (8, 3), (1024, 7)] {
            let trace: Vec<u64> = (0..n * m).map(|_| rng.random()).collect();
            let params = LdeParams::new(MatrixShape::new(n, m).unwrap(), 1, 1).unwrap();
            let mut got = trace.clone();
            coset_lde_in_place(Isa::detect(), &allocator(), &mut got, &params).unwrap();
            let expect: Vec<u64> = trace.iter().map(|&x| x % P).collect();
            assert_eq!(got, expect);
        }
    }

    #[test]
    fn bad_calls_are_errors_and_release_everything() {
        let a = allocator();
        let params = LdeParams::new(MatrixShape::new(4, 2).unwrap(), 2, 7).unwrap();
        for len in [8, 15, 17] {
            let err = coset_lde_in_place(Isa::Scalar, &a, &mut vec![0; len], &params).unwrap_err();
            assert!(
                matches!(err, backend_api::Error::LengthMismatch { expected: 16, actual, .. } if actual == len),
                "{err}"
            );
        }
        // Fail the tables' reservation: an error, nothing stays accounted.
        let base = a.tracker.counters().allocations;
        a.tracker.fail_at(base);
        let err = coset_lde_in_place(Isa::Scalar, &a, &mut [1; 16], &params).unwrap_err();
        assert!(err.is_out_of_memory(), "{err}");
        assert_eq!(a.tracker.counters().live, 0);
        coset_lde_in_place(Isa::Scalar, &a, &mut [1; 16], &params).unwrap();
        assert_eq!(a.tracker.counters().live, 0, "the tables are released on return");
    }
}
