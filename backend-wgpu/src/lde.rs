//! Coset LDE (`shaders/wgsl/lde.wgsl`): spread the trace rows to stride B, an inverse DIF NTT
//! over them, coset scaling with the broadcast that replaces the first log2(B) forward stages,
//! then the remaining forward DIT stages, over the shared [`LdeTwiddles`] tables.
//!
//! The transforms run as passes of up to [`PASS_LOG`] radix-2 stages each (`ntt_pass`): a
//! workgroup loads the 2^r rows of 512 / 2^r columns that r consecutive stages combine into a
//! shared-memory tile, runs those stages there (one butterfly per invocation per stage) and
//! stores once. A pass's r is the largest that keeps one group's rows
//! within one segment's span, so that a dispatch binds at most four segments; at the production
//! shape that is 9 passes per transform instead of 21 stage sweeps.

use std::sync::Arc;

use backend_api::field::LdeTwiddles;
use backend_api::{DeviceBuffer as _, Error, LdeParams, Result, validate};

use crate::context::{Gpu, Kernel, Module, NAME, Recorder, Space, Table, Window};
use crate::memory::{self, WgpuBuffer};

const SPREAD: Kernel = Kernel { module: Module::Lde, entry: "lde_spread", items_per_group: 256 };
const PASS: Kernel = Kernel { module: Module::Lde, entry: "ntt_pass", items_per_group: 256 };
const SCALE: Kernel = Kernel { module: Module::Lde, entry: "lde_scale", items_per_group: 256 };

/// Most radix-2 stages one `ntt_pass` runs (`PASS_LOG` in lde.wgsl).
pub(crate) const PASS_LOG: u32 = 4;

/// [`backend_api::Backend::coset_lde`].
pub(crate) fn coset_lde(gpu: &Arc<Gpu>, trace: &WgpuBuffer, params: &LdeParams) -> Result<WgpuBuffer> {
    validate::coset_lde(params, trace.len())?;
    let op = "coset_lde";
    let (log_n, log_b) = (params.log_trace_rows(), params.log_blowup());
    let n = params.trace().rows() as u64;
    let m = params.trace().cols() as u64;
    let b = params.blowup() as u64;
    let big_n = n * b;
    let s = gpu.seg_elems() as u64;
    if b * m > s {
        return Err(Error::InvalidArgument(format!(
            "{NAME}: {op}: blowup {b} x {m} columns = {} elements exceeds one segment of {s} elements \
             (the storage binding limit)",
            b * m
        )));
    }
    let tw = LdeTwiddles::shared(log_n, log_b, params.shift());
    let what = format!("the twiddle tables for 2^{log_n} x 2^{log_b}");
    let tables = memory::upload_table(gpu, &[&tw.inv_twiddles, &tw.twiddles, &tw.coset], &what)?;
    let most = gpu.lde_pass_stages;
    let out = memory::alloc(gpu, params.lde_shape().len())?;
    let (space, bases) = Space::new(gpu, &[&trace.segs, &out.segs])?;
    let (tb, ob) = (bases[0] as u64, bases[1] as u64);
    let tab = &tables.segs[0];
    let mut rec = gpu.recorder(op);

    // 1. Spread: trace row p -> LDE row pB.
    let rows_per = (s / (b * m)).max(1);
    let mut p = 0;
    while p < n {
        let k = rows_per.min(n - p);
        let spans = [(tb + p * m, tb + (p + k) * m), (ob + p * b * m, ob + ((p + k - 1) * b + 1) * m)];
        let a = space.window::<4>(&spans, op)?;
        let args = [tb as u32, ob as u32, m as u32, b as u32, p as u32];
        rec.dispatch(SPREAD, (k * m) as u32, &args, a, Window::empty(), Table::Buffer(tab))?;
        p += k;
    }
    // 2. Inverse NTT (DIF) over rows pB, half-sizes n/2 down to 1: inverse twiddles at offset 0.
    let inverse = Transform { base: ob, stride: b * m, m, log_rows: log_n, tw_off: 0, inverse: true };
    for (lh, r) in passes(0, log_n, b * m, m, s, most).into_iter().rev() {
        pass(&mut rec, &space, tab, &inverse, lh, r)?;
    }
    // 3. Coset scaling and broadcast to the B rows of each block.
    let mut p = 0;
    while p < n {
        let k = rows_per.min(n - p);
        let a = space.window::<4>(&[(ob + p * b * m, ob + (p + k) * b * m)], op)?;
        let args = [ob as u32, m as u32, b as u32, log_n, (n / 2 + big_n / 2) as u32, p as u32];
        rec.dispatch(SCALE, (k * m) as u32, &args, a, Window::empty(), Table::Buffer(tab))?;
        p += k;
    }
    // 4. Forward NTT (DIT) with half-sizes B .. N/2: forward twiddles after the inverse ones.
    let log_big_n = log_n + log_b;
    let forward = Transform { base: ob, stride: m, m, log_rows: log_big_n, tw_off: n / 2, inverse: false };
    for (lh, r) in passes(log_b, log_big_n, m, m, s, most) {
        pass(&mut rec, &space, tab, &forward, lh, r)?;
    }
    rec.flush()?;
    drop(tables);
    Ok(out)
}

/// One transform: `2^log_rows` logical rows `stride` elements apart, `m` columns each.
struct Transform {
    base: u64,
    stride: u64,
    m: u64,
    log_rows: u32,
    /// Where this transform's twiddles start in the table (`2^(log_rows - 1)` of them).
    tw_off: u64,
    /// DIF with inverse twiddles (`true`) or DIT with forward twiddles.
    inverse: bool,
}

/// The passes `(log2 h, r)` that cover the stages with half-sizes `2^lo .. 2^(hi - 1)`, in
/// ascending order: each takes up to `most` (1..=[`PASS_LOG`], validated by
/// `WgpuBackend::new`) stages, fewer where one
/// group's rows (`2^r h` rows of `stride` elements) would exceed a segment of `seg` elements. A
/// one-stage pass always fits: its two rows, `m <= seg` elements each, touch at most four
/// segments.
fn passes(lo: u32, hi: u32, stride: u64, m: u64, seg: u64, most: u32) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let mut lh = lo;
    while lh < hi {
        let mut r = most.min(hi - lh);
        while r > 1 && ((stride << (lh + r)) - stride + m) > seg {
            r -= 1;
        }
        out.push((lh, r));
        lh += r;
    }
    out
}

/// Records one pass of `r` stages from half-size `2^lh`, cut into dispatches of aligned,
/// power-of-two group ranges whose rows touch at most four segments.
fn pass(rec: &mut Recorder<'_>, space: &Space<'_>, tab: &wgpu::Buffer, tf: &Transform, lh: u32, r: u32) -> Result<()> {
    let op = "coset_lde pass";
    let h = 1u64 << lh;
    let groups = 1u64 << (tf.log_rows - r);
    // One invocation per butterfly, and dispatch items are u32.
    let max_groups = (u64::from(u32::MAX) / (tf.m << (r - 1))).max(1);
    let span = |row: u64, count: u64| (tf.base + row * tf.stride, tf.base + (row + count - 1) * tf.stride + tf.m);
    let mut g0 = 0u64;
    while g0 < groups {
        let align = if g0 == 0 { groups } else { 1 << g0.trailing_zeros() };
        let mut k = align.min(groups - g0).min(max_groups);
        k = 1 << k.ilog2();
        let (window, k) = loop {
            let first = ((g0 >> lh) << (lh + r)) + (g0 & (h - 1));
            let spans: Vec<(u64, u64)> = if k <= h {
                (0..1u64 << r).map(|j| span(first + j * h, k)).collect()
            } else {
                vec![span(first, k << r)]
            };
            match space.window::<4>(&spans, op) {
                Ok(w) => break (w, k),
                Err(e) if k == 1 => return Err(e),
                Err(_) => k /= 2,
            }
        };
        let args = [
            tf.base as u32,
            tf.stride as u32,
            tf.m as u32,
            lh,
            r,
            tf.tw_off as u32,
            tf.log_rows - 1 - lh,
            g0 as u32,
            u32::from(tf.inverse),
        ];
        rec.dispatch(PASS, ((k * tf.m) << (r - 1)) as u32, &args, window, Window::empty(), Table::Buffer(tab))?;
        g0 += k;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    //! The WGSL Goldilocks arithmetic (both implementations) against u128 arithmetic, through
    //! the `gl_selftest` kernel, on every pair of edge values (non-canonical ones included) and
    //! on random pairs. Skipped, saying so, without an adapter; `REQUIRE_WGPU=1` fails instead.

    use super::*;
    use crate::{WgpuBackend, WgpuOptions};

    const P: u64 = 0xFFFF_FFFF_0000_0001;

    const SELFTEST: Kernel = Kernel { module: Module::Lde, entry: "gl_selftest", items_per_group: 256 };

    fn reference(a: u64, b: u64) -> [u64; 6] {
        let p = u128::from(P);
        let (ca, cb) = (u128::from(a) % p, u128::from(b) % p);
        [
            ((ca + cb) % p) as u64,
            ((ca + p - cb) % p) as u64,
            (u128::from(a) * u128::from(b) % p) as u64,
            ca as u64,
            ((ca + cb) % p) as u64,
            ((ca + p - cb) % p) as u64,
        ]
    }

    fn run(gpu: &Arc<Gpu>, a: &[u64], b: &[u64]) -> Vec<u64> {
        let (da, db) = (memory::upload(gpu, a).unwrap(), memory::upload(gpu, b).unwrap());
        let out = memory::alloc(gpu, 6 * a.len()).unwrap();
        let (space, bases) = Space::new(gpu, &[&da.segs, &db.segs, &out.segs]).unwrap();
        let spans = [
            (bases[0] as u64, bases[0] as u64 + a.len() as u64),
            (bases[1] as u64, bases[1] as u64 + b.len() as u64),
            (bases[2] as u64, bases[2] as u64 + 6 * a.len() as u64),
        ];
        let window = space.window::<4>(&spans, "gl_selftest").unwrap();
        let mut rec = gpu.recorder("gl_selftest");
        rec.dispatch(SELFTEST, a.len() as u32, &bases, window, Window::empty(), Table::None).unwrap();
        rec.flush().unwrap();
        drop(rec);
        let mut got = vec![0; 6 * a.len()];
        memory::download(gpu, &out, 0, &mut got).unwrap();
        got
    }

    #[test]
    fn field_arithmetic_matches_u128_on_both_paths() {
        let edges = [
            0,
            1,
            2,
            0xFFFF_FFFF,
            1 << 32,
            (1 << 32) + 1,
            1 << 63,
            (1 << 63) + 0xFFFF_FFFF,
            P - 2,
            P - 1,
            P,
            P + 1,
            P + 0xFFFF_FFFE,
            u64::MAX - 1,
            u64::MAX,
            0xFFFF_FFFF_0000_0000,
            0x0000_0001_FFFF_FFFF,
        ];
        let (mut a, mut b): (Vec<u64>, Vec<u64>) =
            edges.iter().flat_map(|&x| edges.iter().map(move |&y| (x, y))).unzip();
        let mut state = 0x9E37_79B9_7F4A_7C15_u64;
        let mut xorshift = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..1 << 16 {
            a.push(xorshift());
            b.push(xorshift());
        }
        for portable in [false, true] {
            let options = WgpuOptions { allow_software: true, portable_arithmetic: portable, ..Default::default() };
            let Some(backend) = conformance::parity::or_skip(
                WgpuBackend::new(options),
                "backend-wgpu field_arithmetic_matches_u128_on_both_paths",
                "REQUIRE_WGPU",
            ) else {
                return;
            };
            let path = if backend.uses_int64() { "native u64" } else { "u32 pairs" };
            let got = run(&backend.gpu, &a, &b);
            for (i, (&x, &y)) in a.iter().zip(&b).enumerate() {
                assert_eq!(
                    got[6 * i..6 * i + 6],
                    reference(x, y),
                    "{path}: a = {x:#x}, b = {y:#x} (add, sub, mul, canon, add_c, sub_c)"
                );
            }
            eprintln!("wgpu field self-test: {} pairs on {path}", a.len());
        }
    }
}
