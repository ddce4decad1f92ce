//! The coset LDE (lde.cu), in place: the `N x m` buffer (`N = n * B`) holds the trace in its first
//! `n` rows on entry and the LDE on return. An inverse NTT of size `n` by decimation in frequency
//! on rows `[0, n)`, coset scaling with the `1/n` folded in and the zero-extension (row `p` of the
//! inverse's bit-reversed output goes to rows `[pB, pB + B)`), then a forward NTT of size `N` by
//! decimation in time, in place. Each NTT launch is a pass of up to `k` radix-2 stages over
//! shared-memory tiles of `2^k` rows x 8 columns (see lde.cu); the twiddles, coset powers and
//! inverse twiddles are backend-api's shared [`backend_api::field::LdeTwiddles`] (built once per
//! shape per process), uploaded into one tracked buffer, which the device keeps for the next LDE
//! of the same shape ([`tables`]). [`plan::plan`] lists every launch; the unit tests simulate that
//! list row by row.
//!
//! Two routes start from a trace buffer of its own. [`Route::FromTrace`]
//! ([`backend_api::Backend::coset_lde`], which leaves the trace unchanged) reads it in the first
//! inverse pass and stores rows `[0, n)` of the LDE buffer, so a caller that keeps its trace needs
//! no copy of it; the rest is the in-place plan (an inverse of one pass reads only the trace, and
//! runs as one launch). [`Route::Owned`] ([`backend_api::Backend::coset_lde_owned`], for a trace
//! its owner gives up) runs the inverse in the trace's buffer and its last pass stores rows `pB`
//! of the LDE buffer in one launch, so no range of the last pass is too small to fill the device
//! (0.1-0.2 ms under the in-place route at 2^21 x 316 on the H200).
//!
//! One concern per file: [`plan`] (the launches and why they are race-free), [`kernels`] (which
//! kernel runs a pass, and its launch shape), [`tables`] (the twiddle tables the device keeps),
//! [`upload`] (the host trace's upload overlapped with its LDE); `simulation` checks the plans
//! row by row in the unit tests.

mod kernels;
mod plan;
#[cfg(test)]
mod simulation;
mod tables;
mod upload;

use backend_api::DeviceBuffer as _;
use backend_api::{LdeParams, Result, validate};

pub(crate) use kernels::pass_kernel;
pub(crate) use upload::{coset_lde_from_host, coset_lde_from_host_and_download};

use crate::context::Device;
use crate::launch::{LaunchArgs, LaunchConfig};
use crate::memory::CudaBuffer;
use crate::module::Source;
use plan::{Buf, Route, Step};
use tables::Tables;

/// [`backend_api::Backend::coset_lde_in_place`]: `buf` holds `params.lde_shape()`, the trace in
/// its first `n` rows.
pub(crate) fn coset_lde_in_place(device: &Device, buf: &mut CudaBuffer, params: &LdeParams) -> Result<()> {
    validate::coset_lde_in_place(params, buf.len())?;
    run(device, params, Route::InPlace, None, buf)
}

/// [`backend_api::Backend::coset_lde`]: the LDE of `trace` (`params.trace()` elements) into a
/// new buffer, by [`Route::FromTrace`]: the first inverse pass reads the trace where it is, so the
/// trace is never copied into the LDE buffer first. Nothing stays allocated on error.
pub(crate) fn coset_lde_from_trace(device: &Device, trace: &CudaBuffer, params: &LdeParams) -> Result<CudaBuffer> {
    validate::coset_lde(params, trace.len())?;
    let mut out = CudaBuffer::alloc(trace.device(), params.lde_shape().len())?;
    run(device, params, Route::FromTrace, Some(trace), &mut out)?;
    Ok(out)
}

/// [`backend_api::Backend::coset_lde_owned`]: the LDE of `trace` (`params.trace()` elements) into
/// a new buffer, by [`Route::Owned`]; `trace` is freed once the passes that use it have run
/// (stream-ordered), and nothing stays allocated on error.
pub(crate) fn coset_lde_owned(device: &Device, trace: CudaBuffer, params: &LdeParams) -> Result<CudaBuffer> {
    validate::coset_lde(params, trace.len())?;
    let mut out = CudaBuffer::alloc(trace.device(), params.lde_shape().len())?;
    run(device, params, Route::Owned, Some(&trace), &mut out)?;
    Ok(out)
}

/// Queues the launches of [`plan::plan`] on `lde` (and `trace` for the routes that have one), all
/// columns.
fn run(
    device: &Device,
    params: &LdeParams,
    route: Route,
    trace: Option<&CudaBuffer>,
    lde: &mut CudaBuffer,
) -> Result<()> {
    let m = params.trace().cols();
    let tw = Tables::get(lde.device(), params)?;
    queue(device, params, route, trace, lde, 0..m, &tw)
    // The tables are freed once the passes that read them have run (dropped here, stream-ordered).
}

/// Queues the launches of [`plan::plan`] for columns `cols` of `lde` (and `trace` for the routes
/// that have one, whose columns are all of them), reading the tables `tw`.
fn queue(
    device: &Device,
    params: &LdeParams,
    route: Route,
    trace: Option<&CudaBuffer>,
    lde: &CudaBuffer,
    cols: std::ops::Range<usize>,
    tw: &Tables,
) -> Result<()> {
    let pitch = params.trace().cols();
    let (log_n, log_b) = (params.log_trace_rows(), params.log_blowup());
    let m = cols.len();
    if m == 0 {
        return Ok(());
    }
    debug_assert!(cols.end <= pitch && (trace.is_none() || m == pitch));
    let max_k = kernels::stages_per_pass(device);
    let shared_max = kernels::reg_block_bytes(max_k);
    let max_grid = device.sm_count as usize * 8;
    // Column `cols.start` of row 0: the launches cover columns [cols.start, cols.end) of every row.
    let base = lde.ptr_at(cols.start);
    // Only the routes with a trace plan passes that use Buf::Trace.
    let addr = |b: Buf| match (b, trace) {
        (Buf::Trace, Some(t)) => t.ptr(),
        (Buf::Trace, None) | (Buf::Lde, _) => base,
    };
    let (fwd_at, coset_at) = tw.offsets();
    for Step { dit, src, dst, mut pass } in plan::plan(log_n, log_b, m, pitch, max_k, route).steps {
        pass.src = addr(src);
        pass.dst = addr(dst);
        pass.tw = if dit { tw.buf().ptr_at(fwd_at) } else { tw.buf().ptr() };
        pass.coset = if dit { 0 } else { tw.buf().ptr_at(coset_at) };
        let launch = kernels::pass_launch(dit, pass.k as u32, pass.finish_inverse != 0);
        let kernel = device.kernel(Source::Lde, launch.name, shared_max)?;
        let blocks = pass.tasks as usize * m.div_ceil(launch.cols);
        // The register kernel counts its tasks in 32 bits (lde.cu's loop control): 2^31 tiles of
        // at least 2^5 rows x 8 columns would be an LDE buffer of 2^42 bytes.
        debug_assert!(blocks < 1 << 31, "{blocks} blocks");
        let grid = blocks.clamp(1, max_grid);
        let args = LaunchArgs::new().arg(&pass);
        // SAFETY: one NttPass as declared; its tiles address columns [cols.start, cols.end) (the
        // base address plus columns below `cols`, rows `pitch` apart) of rows < n of the trace and
        // rows < N of the LDE buffer (both hold their shapes: validated by the callers), its tasks
        // lie within the pass's, twiddle indices stay below N/2 and coset indices below n (lde.cu's
        // invariants); the tables live until after the last launch (`tw` is dropped by the caller
        // after this, stream-ordered).
        unsafe {
            device.launch(&kernel, LaunchConfig::linear(grid as u32, launch.threads, launch.shared as u32), args)?
        };
    }
    Ok(())
}
