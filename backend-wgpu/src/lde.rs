//! Coset LDE (`shaders/wgsl/lde.wgsl`): spread the trace rows to stride B, an inverse DIF NTT
//! over them, coset scaling with the broadcast that replaces the first log2(B) forward stages,
//! then the remaining forward DIT stages. Radix-2, one dispatch per stage (per segment group),
//! over the shared [`LdeTwiddles`] tables, in u32-pair Goldilocks arithmetic.

use std::sync::Arc;

use backend_api::field::LdeTwiddles;
use backend_api::{DeviceBuffer as _, Error, LdeParams, Result};

use crate::context::{Gpu, Kernel, Module, NAME, Recorder, Space, Table, Window};
use crate::memory::{self, WgpuBuffer};

const SPREAD: Kernel = Kernel { module: Module::Lde, entry: "lde_spread", items_per_group: 256 };
const STAGE: Kernel = Kernel { module: Module::Lde, entry: "ntt_stage", items_per_group: 256 };
const SCALE: Kernel = Kernel { module: Module::Lde, entry: "lde_scale", items_per_group: 256 };

/// [`backend_api::Backend::coset_lde`].
pub(crate) fn coset_lde(gpu: &Arc<Gpu>, trace: &WgpuBuffer, params: &LdeParams) -> Result<WgpuBuffer> {
    params.trace.check_len("coset_lde trace", trace.len())?;
    let op = "coset_lde";
    let (log_n, log_b) = (params.log_trace_rows(), params.log_blowup());
    let n = params.trace.rows as u64;
    let m = params.trace.cols as u64;
    let b = params.blowup as u64;
    let big_n = n * b;
    let s = gpu.seg_elems() as u64;
    if b * m > s {
        return Err(Error::InvalidArgument(format!(
            "{NAME}: {op}: blowup {b} x {m} columns = {} elements exceeds one segment of {s} elements \
             (the storage binding limit)",
            b * m
        )));
    }
    let tw = LdeTwiddles::new(log_n, log_b, params.shift);
    let table: Vec<u64> = [tw.inv_twiddles.as_slice(), tw.twiddles.as_slice(), tw.coset.as_slice()].concat();
    let what = format!("the twiddle tables for 2^{log_n} x 2^{log_b}");
    let tables = memory::upload_table(gpu, &table, &what)?;
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
    // 2. Inverse NTT (DIF) over rows pB: inverse twiddles at offset 0.
    let mut h = n / 2;
    while h >= 1 {
        stage(
            gpu,
            &mut rec,
            &space,
            tab,
            Stage { base: ob, stride: b * m, m, rows: n, h, tw_off: 0, tw_step: n / (2 * h), inverse: true },
        )?;
        h /= 2;
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
    // 4. Forward NTT (DIT) stages with half-sizes B .. N/2: forward twiddles after the inverse.
    let mut h = b;
    while h < big_n {
        stage(
            gpu,
            &mut rec,
            &space,
            tab,
            Stage { base: ob, stride: m, m, rows: big_n, h, tw_off: n / 2, tw_step: big_n / (2 * h), inverse: false },
        )?;
        h *= 2;
    }
    rec.flush()?;
    drop(tables);
    Ok(out)
}

/// One radix-2 stage over `rows` logical rows `stride` elements apart.
struct Stage {
    base: u64,
    stride: u64,
    m: u64,
    rows: u64,
    h: u64,
    tw_off: u64,
    tw_step: u64,
    inverse: bool,
}

/// Records one stage, cut into butterfly ranges whose two row ranges each fit a segment.
fn stage(gpu: &Gpu, rec: &mut Recorder<'_>, space: &Space<'_>, tab: &wgpu::Buffer, st: Stage) -> Result<()> {
    let op = "coset_lde stage";
    let s = gpu.seg_elems() as u64;
    let pairs = st.rows / 2;
    // The largest power of two of butterflies whose rows (both halves) span at most one segment.
    let fit = (s / (2 * st.stride)).max(1);
    let q_chunk = (1u64 << fit.ilog2()).min(pairs.next_power_of_two());
    let span = |row: u64, count: u64| (st.base + row * st.stride, st.base + (row + count - 1) * st.stride + st.m);
    let mut q0 = 0;
    while q0 < pairs {
        let k = q_chunk.min(pairs - q0);
        let spans: Vec<(u64, u64)> = if st.h >= q_chunk {
            let i0 = (q0 / st.h) * 2 * st.h + q0 % st.h;
            vec![span(i0, k), span(i0 + st.h, k)]
        } else {
            vec![span(2 * q0, 2 * k)]
        };
        let a = space.window::<4>(&spans, op)?;
        let args = [
            st.base as u32,
            st.stride as u32,
            st.m as u32,
            st.h as u32,
            st.tw_off as u32,
            st.tw_step as u32,
            q0 as u32,
            u32::from(st.inverse),
        ];
        rec.dispatch(STAGE, (k * st.m) as u32, &args, a, Window::empty(), Table::Buffer(tab))?;
        q0 += k;
    }
    Ok(())
}
