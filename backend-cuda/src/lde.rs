//! The coset LDE (lde.cu), in place: the `N x m` buffer (`N = n * B`) holds the trace in its first
//! `n` rows on entry and the LDE on return. An inverse NTT of size `n` by decimation in frequency
//! on rows `[0, n)`, coset scaling with the `1/n` folded in and the zero-extension (row `p` of the
//! inverse's bit-reversed output goes to rows `[pB, pB + B)`), then a forward NTT of size `N` by
//! decimation in time, in place. Each NTT launch is a pass of up to `k` radix-2 stages over
//! shared-memory tiles of `2^k` rows x 8 columns (see lde.cu); the twiddles, coset powers and
//! inverse twiddles are backend-api's shared [`LdeTwiddles`] (built once per shape per process),
//! uploaded into one tracked buffer, which the device keeps for the next LDE of the same shape
//! (`Tables`). [`plan`] lists every launch; the unit tests simulate that list row by row.
//!
//! # The last inverse pass, in place, without races
//!
//! A pass's tiles run in any order, and a tile loads all its rows before it stores any (the
//! register kernel's first forward pass runs the `B` tiles sharing rows `B*p` in one block, the
//! tile that overwrites them last), so a launch is race-free when no row one tile stores is a row
//! another tile loads or stores; launches run one after another on the stream.
//!
//! The last inverse pass stores position `p` to row `pB` (and its `B - 1` replicas when some pass
//! is a shared-memory pass, which needs them; a register pass reads row `pB` for all `B`). Its
//! tiles hold `2^k` consecutive rows each, and it reads the rows `[0, n)` it writes over, so it
//! runs as several launches over ranges of its `T = n / 2^k` tiles, from the top down
//! (backend-api's [`lde_finish_ranges`]): `[max(1, t / B), t)` for `t = T, ...` while `t > 1`, then tile 0 alone.
//! A range `[lo, hi)` loads rows `[lo 2^k, hi 2^k)` and stores rows `[lo 2^k B, hi 2^k B)`.
//! Since `lo B >= hi`, every row it stores lies at or above every row it or a later range
//! loads, and an earlier range has loaded it already (or it is `>= n`, unread). Tile 0 loads
//! rows `[0, 2^k)` before it stores `[0, 2^k B)`. At 2^21 rows, `B = 2` and `k = 10` that is 12
//! launches, the last few too small to fill the device; an earlier version stored the rows below
//! `n / B` in place and moved them in `log2(n / B)` copy launches afterwards, which cost 1.45 ms
//! on the H200 (BENCHMARKS.md).
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
//! # The upload overlap
//!
//! [`coset_lde_from_host`] overlaps a page-locked host trace's upload with the LDE. Rows cannot be
//! pipelined (a natural-order NTT needs a whole column before its first pass), but columns can:
//! every column's LDE is independent, and every launch of [`plan`] can cover a range of columns
//! (the kernels take the range's first column as their base address, the whole matrix's row length
//! as strides and `row_pitch`/`pitch`, and the range's width as `cols`; none touches a column
//! outside it). So the columns are split into up to [`CudaOptions::upload_groups`] groups of whole
//! 8-column tiles ([`column_groups`]; tile boundaries keep every NTT tile inside one group), and:
//!
//! 1. an event recorded on the compute stream makes the device's copy stream wait for the work
//!    already queued on the buffer (its stream-ordered allocation, earlier readers, the tables).
//!    The tables are uploaded on the compute stream before that event: host-to-device copies go
//!    through the copy engine in the order they are queued, whatever their stream, so tables
//!    queued after the groups would wait for the whole trace (the first measured version did
//!    that, and overlapped nothing). Their host work (building them, the staging ring) is done
//!    ahead by a caller that prepares (`prover` does, while it makes the table);
//! 2. each group is one `cuMemcpy2DAsync` on the copy stream (`n` rows of the group's width, the
//!    trace's row length as both pitches), followed by an event;
//! 3. for each group the compute stream waits for its copy's event and queues the whole in-place
//!    plan on its columns, so group `g` is extended while groups `g + 1, ...` are still on the
//!    bus;
//! 4. the call waits for the last copy's event (the caller's host slice is free again) and
//!    returns with the LDE's launches queued. On any error it first waits for both streams, so no
//!    copy still reads the host slice and no launch waits on a copy that failed.
//!
//! With upload `U` and LDE `L` the call takes about `U + L / G` instead of `U + L` when the
//! strided copy keeps the bus's speed. A pageable trace (it would go through the staging ring
//! anyway), one below [`CudaOptions::upload_overlap_min_bytes`], or a single group (`G = 1`, or
//! at most 8 columns) takes the plain route: [`memory::write`], then the in-place LDE.

use std::ops::Range;

use backend_api::DeviceBuffer as _;
use backend_api::field::{LdeTwiddles, lde_finish_ranges};
use backend_api::{ELEM_BYTES, FaultSite, LdeParams, Result, validate};
use cudarc::driver::sys;

use crate::context::{Device, Event, KeptTables, Lane};
use crate::driver;
use crate::host;
use crate::launch::{KernelParam, LaunchArgs, LaunchConfig};
use crate::memory::{self, CudaBuffer};
use crate::module::Source;
use crate::options::{CudaOptions, MAX_NTT_STAGES};

/// Columns per tile (`NTT_COLS` in lde.cu).
const NTT_COLS: usize = 8;
/// Threads per block of the shared-memory kernel (`__launch_bounds__(512)`).
const BLOCK: u32 = 512;

/// The parameter of the NTT kernels; layout identical to `NttPass` in lde.cu.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct NttPass {
    src: u64,
    dst: u64,
    tw: u64,
    coset: u64,
    src_stride: u64,
    dst_stride: u64,
    cols: u64,
    log_size: u64,
    log_h_small: u64,
    k: u64,
    canon_in: u64,
    finish_inverse: u64,
    log_blowup: u64,
    replicate_out: u64,
    replicated_in: u64,
    canon_out: u64,
    first_task: u64,
    tasks: u64,
    row_pitch: u64,
}

// SAFETY: `#[repr(C)]` u64 fields, the layout of lde.cu's `NttPass` (src, dst, tw, coset,
// src_stride, dst_stride, cols, log_size, log_h_small, k, canon_in, finish_inverse, log_blowup,
// replicate_out, replicated_in, canon_out, first_task, tasks, row_pitch); no padding.
unsafe impl KernelParam for NttPass {}
const _: () = assert!(std::mem::size_of::<NttPass>() == 19 * 8, "NttPass is nineteen u64, unpadded");

/// Stages per pass from which the register kernel (radix-16 or radix-32 groups) runs a pass.
const REG_MIN_STAGES: u32 = 5;

/// Splits `stages` into passes of at most `max` stages, as even as possible (larger ones first);
/// zero stages is one empty pass.
fn split(stages: u32, max: u32) -> Vec<u32> {
    if stages == 0 {
        return vec![0];
    }
    let passes = stages.div_ceil(max);
    (0..passes).map(|i| stages / passes + u32::from(i < stages % passes)).collect()
}

/// Stages per pass: [`CudaOptions::ntt_stages`] (1 is one radix-2 stage per launch) or else the
/// most the device's shared memory allows (a register kernel's tile and twiddles), up to
/// [`MAX_NTT_STAGES`], and at least 1.
fn stages_per_pass(device: &Device, options: &CudaOptions) -> u32 {
    let v = variant(options);
    let fit = (2..=MAX_NTT_STAGES).rev().find(|&k| reg_block_bytes(k, v) <= device.max_shared_optin).unwrap_or(1);
    options.ntt_stages.map_or(fit, |k| k.min(fit))
}

/// The form of the lazy register passes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LazyForm {
    /// `ntt_d*_pass_lazy` (or no lazy kernel at all).
    Plain,
    /// The power-of-two form, lde.cu's `pow2_scale` ([`CudaOptions::ntt_pow2`]).
    Pow2,
    /// The lean form: fewer address instructions ([`CudaOptions::ntt_lean`]); the same arithmetic at
    /// radix 32, the windows in four-step form at radix 16 (lde.cu's `four_step_window`).
    Lean,
}

/// The register kernel variant the options select: (radix, columns per tile, lazy, the lazy
/// passes' form). Lazy reduction (radix 32 x 8 columns, and radix 16 in the lean form): values
/// inside the transform are any u64 congruent mod p; the last pass canonicalises, and the
/// shared-memory kernel canonicalises what it loads. At radix 32 x 8 the power-of-two form wins
/// over the lean one when both are asked for; radix 16 has no power-of-two form.
pub(crate) fn variant(options: &CudaOptions) -> (u32, usize, bool, LazyForm) {
    let k = options.ntt_kernel;
    let e = options.ntt_effective();
    let form = if e.ntt_pow2 {
        LazyForm::Pow2
    } else if e.ntt_lean {
        LazyForm::Lean
    } else {
        LazyForm::Plain
    };
    (k.radix(), k.cols() as usize, e.ntt_lazy, form)
}

/// The kernel of one NTT pass: inverse (`dit` false) or forward, register kernel or shared-memory
/// kernel, for a [`variant`].
pub(crate) fn pass_kernel(
    dit: bool,
    reg: bool,
    (radix, reg_cols, lazy, form): (u32, usize, bool, LazyForm),
) -> &'static str {
    match (dit, reg, radix, reg_cols) {
        (false, false, _, _) => "ntt_dif_pass",
        (true, false, _, _) => "ntt_dit_pass",
        (false, true, 16, _) if form == LazyForm::Lean => "ntt_dif_pass_lean16",
        (true, true, 16, _) if form == LazyForm::Lean => "ntt_dit_pass_lean16",
        (false, true, _, _) if form == LazyForm::Pow2 => "ntt_dif_pass_pow2",
        (true, true, _, _) if form == LazyForm::Pow2 => "ntt_dit_pass_pow2",
        (false, true, _, _) if form == LazyForm::Lean => "ntt_dif_pass_lean",
        (true, true, _, _) if form == LazyForm::Lean => "ntt_dit_pass_lean",
        (false, true, _, _) if lazy => "ntt_dif_pass_lazy",
        (true, true, _, _) if lazy => "ntt_dit_pass_lazy",
        (false, true, 16, _) => "ntt_dif_pass_reg16",
        (true, true, 16, _) => "ntt_dit_pass_reg16",
        (false, true, _, 4) => "ntt_dif_pass_reg_c4",
        (true, true, _, 4) => "ntt_dit_pass_reg_c4",
        (false, true, _, _) => "ntt_dif_pass_reg",
        (true, true, _, _) => "ntt_dit_pass_reg",
    }
}

/// Shared memory of a register kernel's block for a pass of `k >= log2(radix)` stages over `cols`
/// columns: the tile (`2^k x cols`, padded by `cols` elements per `radix` rows: lde.cu's
/// `tile_slot`), the tile's gathered twiddles ([`twiddle_slots`]) and, for the lean form's last
/// inverse pass (`coset_factors`), the tile's `2^k` coset factors with one slot skipped after every
/// `radix` (lde.cu's `cf_slot`).
///
/// The other passes do not reserve the coset factors' slots: the multiprocessor's shared memory
/// and L1 cache are one array, and the driver sizes the shared part to the blocks that run. A
/// 2^11 x 8 tile with its twiddles fits a 164 KiB carve-out, 16 KiB more take the next one (196
/// KiB), and the L1 cache that the forward passes' twiddle gathers hit shrinks by a third
/// (BENCHMARKS.md, "shared-memory banks of the exchanges").
fn reg_tile_bytes(k: u32, cols: usize, radix: u32, twiddle_slots: usize, coset_factors: bool) -> usize {
    let (rows, pad) = (1usize << k, (1usize << k) / radix as usize);
    let cf = if coset_factors { rows + pad } else { 0 };
    (rows * cols + pad * cols + twiddle_slots + cf) * ELEM_BYTES
}

/// The slots of a register kernel's gathered twiddles for a pass of `k >= log2(radix)` stages.
/// The lean form gathers them by window (lde.cu's `gather_twiddles` with `ROWS`; at radix 16 the
/// four-step factors, `gather_four_step`, in the same rows): the window at local bit
/// `w` has `2^w` rows of `radix - 1`, and the windows are, for DIT, at `w = min(n log2(radix), k -
/// log2(radix))` and, for DIF, at `w = max(k - (n + 1) log2(radix), 0)`, `n < ceil(k /
/// log2(radix))`. The other forms gather `2^k - 1` by stage (`gather_twiddles`; the power-of-two
/// form leaves them unused), counted as `2^k`.
fn twiddle_slots(k: u32, radix: u32, lean: bool, dit: bool) -> usize {
    let log_r = radix.trailing_zeros();
    if !lean || k < log_r {
        return 1 << k;
    }
    (0..k.div_ceil(log_r))
        .map(|n| {
            let w = if dit { (n * log_r).min(k - log_r) } else { k.saturating_sub((n + 1) * log_r) };
            (1usize << w) * (radix as usize - 1)
        })
        .sum()
}

/// Shared memory of a block of the variant `v`'s register kernel for a pass of `k` stages over
/// `cols` columns, forward (`dit`) or inverse, the inverse's last (`finish`) or another.
fn reg_pass_bytes(
    k: u32,
    cols: usize,
    (radix, _, _, form): (u32, usize, bool, LazyForm),
    dit: bool,
    finish: bool,
) -> usize {
    let lean = form == LazyForm::Lean;
    reg_tile_bytes(k, cols, radix, twiddle_slots(k, radix, lean, dit), lean && finish && !dit)
}

/// The most shared memory a register kernel of the variant `v` needs for a pass of `k` stages,
/// forward or inverse (at 8 columns for the 4-column kernel too, as its stage split assumes).
fn reg_block_bytes(k: u32, v: (u32, usize, bool, LazyForm)) -> usize {
    let cols = v.1.max(NTT_COLS);
    reg_pass_bytes(k, cols, v, false, true).max(reg_pass_bytes(k, cols, v, true, false))
}

/// Which buffer an NTT pass reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Buf {
    /// A separate `n x m` trace ([`Route::FromTrace`], [`Route::Owned`]).
    Trace,
    /// The `N x m` LDE buffer.
    Lde,
}

/// Where the LDE starts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    /// The trace in rows `[0, n)` of the LDE buffer (module doc).
    InPlace,
    /// A separate `n x m` trace buffer, which only the first inverse pass reads (it stores rows
    /// `[0, n)` of the LDE buffer, as the in-place route's first pass does): no copy of the trace
    /// into the LDE buffer first ([`backend_api::Backend::coset_lde`]).
    FromTrace,
    /// A separate `n x m` trace buffer given up by its owner: the inverse passes run in place in
    /// it, and the last one stores rows `B*p` of the LDE buffer, in one launch
    /// ([`backend_api::Backend::coset_lde_owned`]).
    Owned,
}

/// One launch of the LDE: its kernel parameters with the device addresses left at 0
/// ([`run`] fills them in). An NTT pass is one launch, or, for the last inverse pass in place,
/// several launches over ranges of its tiles (module doc).
#[derive(Clone, Copy, Debug)]
struct Step {
    /// Forward (`true`) or inverse.
    dit: bool,
    /// The buffer the launch reads.
    src: Buf,
    /// The buffer the launch writes.
    dst: Buf,
    pass: NttPass,
}

/// The launches of one LDE, in stream order.
#[derive(Debug)]
struct Plan {
    steps: Vec<Step>,
}

/// The launches of an LDE of `2^log_n` rows of `m` columns at blowup `2^log_b`, NTT passes of at
/// most `max_k` stages, in a buffer whose rows are `pitch` elements apart (`pitch >= m`: a range
/// of `m` columns of a wider matrix, the upload overlap's column groups; the trace of the routes
/// that have one has the same pitch): every launch [`queue`] makes comes from here, and the unit
/// tests simulate exactly this list.
fn plan(log_n: u32, log_b: u32, m: usize, pitch: usize, max_k: u32, route: Route) -> Plan {
    let inverse = split(log_n, max_k);
    // The forward NTT of size N runs the same stage split (its first log B stages are the
    // inverse's replication), without the empty pass of a 1-row trace. Both run the larger
    // passes first. (The inverse's smaller pass first, so that its pass of scattered rows has the
    // smaller blocks as the forward's has, measured no faster on the H200: BENCHMARKS.md, "The
    // inverse's passes smaller first".)
    let forward: Vec<u32> = inverse.iter().copied().filter(|&k| k > 0).collect();
    // The register kernel may skip the B - 1 replicas of each inverse output row (the first
    // forward pass, a register pass too, then reads the shared row for all of them); a
    // shared-memory pass needs them stored. Mixed splits keep the replicas.
    let all_reg = inverse.iter().chain(&forward).all(|&k| k >= REG_MIN_STAGES);
    let replicate = !all_reg;
    let stride = pitch as u64;
    let mut steps = Vec::with_capacity(inverse.len() + forward.len() + log_n as usize + 1);
    let ntt = |log_size: u32, log_h_small: u32, k: u32| NttPass {
        src: 0,
        dst: 0,
        tw: 0,
        coset: 0,
        src_stride: stride,
        dst_stride: stride,
        cols: m as u64,
        log_size: log_size as u64,
        log_h_small: log_h_small as u64,
        k: k as u64,
        canon_in: u64::from(k < REG_MIN_STAGES),
        finish_inverse: 0,
        log_blowup: log_b as u64,
        replicate_out: 0,
        replicated_in: 0,
        canon_out: 0,
        first_task: 0,
        tasks: (1u64 << log_size) >> k,
        row_pitch: stride,
    };

    // Inverse NTT, natural order in, bit-reversed out; the last pass scales and stores position p
    // to row B*p (module doc).
    let mut hi = log_n;
    for (idx, &k) in inverse.iter().enumerate() {
        let first = idx == 0;
        let last = idx + 1 == inverse.len();
        hi -= k;
        let src = match route {
            Route::Owned => Buf::Trace,
            Route::FromTrace if first => Buf::Trace,
            _ => Buf::Lde,
        };
        let dst = if route == Route::Owned && !last { Buf::Trace } else { Buf::Lde };
        let pass = NttPass {
            canon_in: u64::from(first || k < REG_MIN_STAGES),
            finish_inverse: u64::from(last),
            replicate_out: u64::from(replicate),
            canon_out: u64::from(last && forward.is_empty()),
            ..ntt(log_n, hi, k)
        };
        // The last pass (hi == 0: tiles of 2^k consecutive rows) stores rows B*p >= p: in the
        // buffer it reads, it runs as ranges of tiles from the top down.
        let ranges = if last && src == Buf::Lde && log_b > 0 {
            lde_finish_ranges(pass.tasks, log_b)
        } else {
            vec![Range { start: 0, end: pass.tasks }]
        };
        for r in ranges {
            let pass = NttPass { first_task: r.start, tasks: r.end - r.start, ..pass };
            steps.push(Step { dit: false, src, dst, pass });
        }
    }

    // Forward NTT of size N, half-spans B .. N/2, bit-reversed in, natural out, in place.
    let mut lo = log_b;
    for (idx, &k) in forward.iter().enumerate() {
        let mut pass = ntt(log_n + log_b, lo, k);
        if all_reg && idx == 0 {
            // One task is the B tiles sharing rows B*p.
            pass.replicated_in = 1;
            pass.tasks >>= log_b;
        }
        pass.canon_out = u64::from(idx + 1 == forward.len());
        lo += k;
        steps.push(Step { dit: true, src: Buf::Lde, dst: Buf::Lde, pass });
    }
    Plan { steps }
}

/// [`backend_api::Backend::coset_lde_in_place`]: `buf` holds `params.lde_shape()`, the trace in
/// its first `n` rows.
pub(crate) fn coset_lde_in_place(
    device: &Device,
    options: &CudaOptions,
    buf: &mut CudaBuffer,
    params: &LdeParams,
) -> Result<()> {
    validate::coset_lde_in_place(params, buf.len())?;
    run(device, options, params, Route::InPlace, None, buf)
}

/// The column groups of an `m`-column upload overlap: up to `groups` ranges of whole
/// [`NTT_COLS`]-column tiles (the last one ends at `m`), as even as possible, wider ones first.
/// One range (all columns) when `groups` is 1 or `m` fits one tile.
pub(crate) fn column_groups(m: usize, groups: usize) -> Vec<Range<usize>> {
    let tiles = m.div_ceil(NTT_COLS);
    let g = groups.clamp(1, tiles.max(1));
    let mut start = 0;
    (0..g)
        .map(|i| {
            let width = (tiles / g + usize::from(i < tiles % g)) * NTT_COLS;
            let end = (start + width).min(m);
            let range = start..end;
            start = end;
            range
        })
        .collect()
}

/// [`backend_api::Backend::coset_lde_from_host`] (module doc, "The upload overlap"): from
/// page-locked memory, with [`CudaOptions::upload_groups`] above 1, at least two column tiles and
/// a trace of at least [`CudaOptions::upload_overlap_min_bytes`], the column groups are uploaded
/// on the copy stream while the compute stream extends the groups already there; otherwise one
/// copy ([`memory::write`]) and then the in-place LDE. Returns once no copy reads `trace` any more;
/// the LDE's launches may still run.
pub(crate) fn coset_lde_from_host(
    device: &Device,
    options: &CudaOptions,
    buf: &mut CudaBuffer,
    trace: &[u64],
    params: &LdeParams,
) -> Result<()> {
    validate::coset_lde_from_host(params, trace.len(), buf.len())?;
    let m = params.trace().cols();
    let groups = column_groups(m, options.upload_groups as usize);
    if groups.len() < 2
        || std::mem::size_of_val(trace) < options.upload_overlap_min_bytes
        || !host::is_page_locked(trace)
    {
        memory::write(buf, 0, trace)?;
        return run(device, options, params, Route::InPlace, None, buf);
    }
    let dev = std::sync::Arc::clone(buf.device());
    dev.bind()?;
    // Every event exists before the first copy is queued, so that failing to make one leaves
    // nothing in flight.
    let ready = Event::new(&dev)?;
    let copied = groups.iter().map(|_| Event::new(&dev)).collect::<Result<Vec<_>>>()?;
    // The tables go first: host-to-device copies go through the copy engine in the order they
    // are queued, whatever their stream, so tables queued after every group's copy hold the first
    // group's launches until the whole trace has crossed (the first version did that and
    // overlapped nothing: 183.7 ms at G = 4 against 180.5 ms at G = 1 on the H200). Queued right
    // behind the first group instead, they measured 171.7-177.6 ms warm at G = 4 against 118.8
    // ms when first (not explained; the H200 call of 13:56 UTC in BENCHMARKS.md). Tables the
    // device kept from an earlier LDE of this shape need no copy at all.
    let tw = Tables::get(&dev, params)?;
    // The copies write `buf` only after the work queued on it so far (its stream-ordered
    // allocation, earlier kernels reading it, the tables' upload).
    ready.record_on(Lane::Compute)?;
    ready.wait_on(Lane::Copy)?;
    let n = params.trace().rows();
    let pitch = m * ELEM_BYTES;
    let overlapped = || -> Result<()> {
        for (g, (cols, done)) in groups.iter().zip(&copied).enumerate() {
            if g == 1 && dev.tracker.site_fails(FaultSite::HostUploadQueued) {
                return Err(driver::error_from(
                    "cuMemcpy2DAsync (injected fault)",
                    sys::CUresult::CUDA_ERROR_INVALID_VALUE,
                ));
            }
            // SAFETY: `trace` is page-locked (checked above) and holds n rows of `pitch` bytes
            // (validated), of which the copy reads columns `cols`; the caller's borrow lasts
            // until this function returns, and every return path first waits for the copy
            // stream (the last event below, or `synchronize_copies` on error). The destination is
            // the same columns of rows [0, n) of `buf` (N x m, validated), which no queued work
            // touches: the copy stream waits for `ready`, and the compute stream's launches on
            // these columns wait for `done`.
            unsafe {
                driver::memcpy_2d_htod_async(
                    buf.ptr_at(cols.start),
                    pitch,
                    trace[cols.start..].as_ptr().cast(),
                    pitch,
                    (cols.len() * ELEM_BYTES, n),
                    dev.copy_stream(),
                )
            }?;
            done.record_on(Lane::Copy)?;
        }
        for (cols, done) in groups.iter().zip(&copied) {
            done.wait_on(Lane::Compute)?;
            queue(device, options, params, Route::InPlace, None, buf, cols.clone(), &tw)?;
        }
        copied.last().expect("two groups at least").synchronize()
    };
    overlapped().inspect_err(|_| {
        // No copy may still read the caller's host trace once this returns, and no launch may be
        // left waiting on a copy that failed: wait for both streams (errors here are the same
        // failure, already being returned).
        let _ = dev.synchronize_copies();
        let _ = dev.synchronize();
    })
}

/// [`backend_api::Backend::coset_lde`]: the LDE of `trace` (`params.trace()` elements) into a
/// new buffer, by [`Route::FromTrace`]: the first inverse pass reads the trace where it is, so the
/// trace is never copied into the LDE buffer first. Nothing stays allocated on error.
pub(crate) fn coset_lde_from_trace(
    device: &Device,
    options: &CudaOptions,
    trace: &CudaBuffer,
    params: &LdeParams,
) -> Result<CudaBuffer> {
    validate::coset_lde(params, trace.len())?;
    let mut out = CudaBuffer::alloc(trace.device(), params.lde_shape().len())?;
    run(device, options, params, Route::FromTrace, Some(trace), &mut out)?;
    Ok(out)
}

/// [`backend_api::Backend::coset_lde_owned`]: the LDE of `trace` (`params.trace()` elements) into
/// a new buffer, by [`Route::Owned`]; `trace` is freed once the passes that use it have run
/// (stream-ordered), and nothing stays allocated on error.
pub(crate) fn coset_lde_owned(
    device: &Device,
    options: &CudaOptions,
    trace: CudaBuffer,
    params: &LdeParams,
) -> Result<CudaBuffer> {
    validate::coset_lde(params, trace.len())?;
    let mut out = CudaBuffer::alloc(trace.device(), params.lde_shape().len())?;
    run(device, options, params, Route::Owned, Some(&trace), &mut out)?;
    Ok(out)
}

/// Queues the launches of [`plan`] on `lde` (and `trace` for the routes that have one), all
/// columns.
fn run(
    device: &Device,
    options: &CudaOptions,
    params: &LdeParams,
    route: Route,
    trace: Option<&CudaBuffer>,
    lde: &mut CudaBuffer,
) -> Result<()> {
    let m = params.trace().cols();
    let tw = Tables::get(lde.device(), params)?;
    queue(device, options, params, route, trace, lde, 0..m, &tw)
    // The tables are freed once the passes that read them have run (dropped here, stream-ordered).
}

/// The twiddles, inverse twiddles and coset powers of one LDE shape ([`LdeTwiddles`]) in one
/// tracked device buffer, read by every column group's launches. The device keeps the last ones
/// between calls (`Device::keep_lde_tables`, not counted as live meanwhile): an LDE of the same
/// shape and shift reuses them with no upload, which otherwise costs the host's staging of the
/// tables and the copy before the first pass can start (about 1.3 ms at 2^21 -> 2^22 rows on an
/// H200, 40 MB). `CudaBackend::trim_pool` and an allocation that runs out of memory free them.
/// They come from a pool of their own (`Device::tables_pool`), apart from the commit's buffers.
struct Tables {
    /// `None` only while dropping.
    buf: Option<CudaBuffer>,
    /// `(log2 n, log2 B, shift)`.
    key: (u32, u32, u64),
}

impl Tables {
    /// The tables of `params`: the ones the device keeps, else uploaded (on the compute stream).
    fn get(device: &std::sync::Arc<Device>, params: &LdeParams) -> Result<Self> {
        let key = (params.log_trace_rows(), params.log_blowup(), params.shift());
        if let Some(t) = device.take_lde_tables(key) {
            // SAFETY: the cache owned the allocation alone; it was made on this device's stream
            // by the `CudaBuffer::alloc_from` below and holds `t.len` elements.
            let buf = unsafe { CudaBuffer::from_raw(device, t.ptr, t.len) }?;
            return Ok(Self { buf: Some(buf), key });
        }
        let tables = LdeTwiddles::shared(key.0, key.1, key.2);
        let (inv, fwd, coset) = (&tables.inv_twiddles, &tables.twiddles, &tables.coset);
        device.bind()?;
        let buf = CudaBuffer::alloc_from(device, inv.len() + fwd.len() + coset.len(), Some(device.tables_pool()))?;
        memory::write(&buf, 0, inv)?;
        memory::write(&buf, inv.len(), fwd)?;
        memory::write(&buf, inv.len() + fwd.len(), coset)?;
        Ok(Self { buf: Some(buf), key })
    }

    fn buf(&self) -> &CudaBuffer {
        self.buf.as_ref().expect("tables are only taken when dropped")
    }

    /// Where the forward twiddles and the coset powers start (after the inverse twiddles).
    fn offsets(&self) -> (usize, usize) {
        let [inv, fwd, _] = LdeTwiddles::lens(self.key.0, self.key.1);
        (inv, inv + fwd)
    }
}

impl Drop for Tables {
    /// Back to the device's keeping (after the work queued on them: later users are queued on the
    /// same stream).
    fn drop(&mut self) {
        if let Some(buf) = self.buf.take() {
            let device = std::sync::Arc::clone(buf.device());
            let (ptr, len) = buf.into_raw();
            device.keep_lde_tables(KeptTables { key: self.key, ptr, len });
        }
    }
}

/// Queues the launches of [`plan`] for columns `cols` of `lde` (and `trace` for the routes that
/// have one, whose columns are all of them), reading the tables `tw`.
#[allow(clippy::too_many_arguments)]
fn queue(
    device: &Device,
    options: &CudaOptions,
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
    let max_k = stages_per_pass(device, options);
    let v @ (radix, reg_cols, _, _) = variant(options);
    let shared_max = reg_block_bytes(max_k, v);
    let kernels = |dit: bool, k: u32, finish: bool| {
        let reg = k >= REG_MIN_STAGES;
        let name = pass_kernel(dit, reg, v);
        let cols = if reg { reg_cols } else { NTT_COLS };
        let threads = if reg { ((1usize << k) * cols / radix as usize) as u32 } else { BLOCK };
        let smem = if reg { reg_pass_bytes(k, cols, v, dit, finish) } else { (1usize << k) * cols * ELEM_BYTES };
        device.kernel(Source::Lde, name, shared_max).map(|kernel| (kernel, threads, smem as u32, cols))
    };
    let max_grid = device.sm_count as usize * 8;
    // Column `cols.start` of row 0: the launches cover columns [cols.start, cols.end) of every row.
    let base = lde.ptr_at(cols.start);
    // Only the routes with a trace plan passes that use Buf::Trace.
    let addr = |b: Buf| match (b, trace) {
        (Buf::Trace, Some(t)) => t.ptr(),
        (Buf::Trace, None) | (Buf::Lde, _) => base,
    };
    let (fwd_at, coset_at) = tw.offsets();
    for Step { dit, src, dst, mut pass } in plan(log_n, log_b, m, pitch, max_k, route).steps {
        pass.src = addr(src);
        pass.dst = addr(dst);
        pass.tw = if dit { tw.buf().ptr_at(fwd_at) } else { tw.buf().ptr() };
        pass.coset = if dit { 0 } else { tw.buf().ptr_at(coset_at) };
        let (kernel, threads, smem, tile_cols) = kernels(dit, pass.k as u32, pass.finish_inverse != 0)?;
        let blocks = pass.tasks as usize * m.div_ceil(tile_cols);
        // The register kernels count their tasks in 32 bits (lde.cu's loop control): 2^31 tiles of
        // at least 2^5 rows x 4 columns would be an LDE buffer of 2^41 bytes.
        debug_assert!(blocks < 1 << 31, "{blocks} blocks");
        let grid = blocks.clamp(1, max_grid);
        let args = LaunchArgs::new().arg(&pass);
        // SAFETY: one NttPass as declared; its tiles address columns [cols.start, cols.end) (the
        // base address plus columns below `cols`, rows `pitch` apart) of rows < n of the trace and
        // rows < N of the LDE buffer (both hold their shapes: validated by the callers), its tasks
        // lie within the pass's, twiddle indices stay below N/2 and coset indices below n (lde.cu's
        // invariants); the tables live until after the last launch (`tw` is dropped by the caller
        // after this, stream-ordered).
        unsafe { device.launch(&kernel, LaunchConfig::linear(grid as u32, threads, smem), args)? };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plan's launches, simulated row by row (module doc, "The last inverse pass, in place"):
    /// race-free, and every row ends with the value of its position, for every trace height up to
    /// 2^12, blowups 1 to 8, every stage split (1 stage per pass, which keeps the replicas, up to
    /// 11, all register passes, which skip them) and both routes; for all the columns of a matrix
    /// and for a range of 2 columns of a 5-column one (the upload overlap's groups: every launch
    /// covers the range's width, with the whole matrix's rows).
    #[test]
    fn the_planned_launches_are_race_free_and_move_every_row_to_its_place() {
        for log_n in 0..=12 {
            for log_b in 0..=3 {
                for max_k in 1..=MAX_NTT_STAGES {
                    for (route, m, pitch) in
                        [(Route::InPlace, 3, 3), (Route::FromTrace, 3, 3), (Route::Owned, 3, 3), (Route::InPlace, 2, 5)]
                    {
                        let plan = plan(log_n, log_b, m, pitch, max_k, route);
                        let what = format!(
                            "n = 2^{log_n}, B = 2^{log_b}, {max_k} stages/pass, {route:?}, {m} of {pitch} cols"
                        );
                        simulation::check(&plan, log_n, log_b, pitch, route).unwrap_or_else(|e| panic!("{what}: {e}"));
                        for step in &plan.steps {
                            let p = &step.pass;
                            assert_eq!((p.cols, p.row_pitch), (m as u64, pitch as u64), "{what}: {step:?}");
                        }
                        // One launch per pass, but for the last inverse pass in place with B > 1,
                        // which takes one launch per range of tiles.
                        let inverse = split(log_n, max_k);
                        let passes = inverse.len() + inverse.iter().filter(|&&k| k > 0).count();
                        let finish = plan.steps.iter().filter(|s| s.pass.finish_inverse != 0).count();
                        let reads_lde = route == Route::InPlace || (route == Route::FromTrace && inverse.len() > 1);
                        let tiles = 1u64 << (log_n - inverse.last().unwrap());
                        let want = if reads_lde && log_b > 0 { lde_finish_ranges(tiles, log_b).len() } else { 1 };
                        assert_eq!(finish, want, "{what}: launches of the last inverse pass");
                        assert_eq!(plan.steps.len(), passes - 1 + finish, "{what}: launches");
                    }
                }
            }
        }
    }

    /// The simulation catches what it must: the last inverse pass's ranges run bottom up, or as
    /// one launch, a range left out, and skipped replicas.
    #[test]
    fn the_simulation_rejects_broken_plans() {
        let (log_n, log_b, m) = (6, 1, 2);
        let broken = |f: &dyn Fn(&mut Plan), max_k: u32| {
            let mut p = plan(log_n, log_b, m, m, max_k, Route::InPlace);
            f(&mut p);
            simulation::check(&p, log_n, log_b, m, Route::InPlace)
        };
        assert!(broken(&|_| {}, 2).is_ok());
        assert!(broken(&|_| {}, 11).is_ok());
        assert!(broken(&|_| {}, 5).is_ok());
        let finish = |p: &mut Plan| -> Vec<usize> {
            p.steps.iter().enumerate().filter(|(_, s)| s.pass.finish_inverse != 0).map(|(i, _)| i).collect()
        };
        for max_k in [2, 5] {
            // The ranges bottom up: a range's stores overwrite rows a later one still loads.
            let e = broken(
                &|p| {
                    let f = finish(p);
                    assert!(f.len() >= 3, "{f:?}");
                    p.steps[f[0]..=f[f.len() - 1]].reverse();
                },
                max_k,
            )
            .unwrap_err();
            assert!(e.contains("holds"), "max_k {max_k}: {e}");
            // All the ranges as one launch: its tiles store rows other tiles load.
            let e = broken(
                &|p| {
                    let f = finish(p);
                    let tiles: u64 = f.iter().map(|&i| p.steps[i].pass.tasks).sum();
                    let first = f[0];
                    p.steps[first].pass.first_task = 0;
                    p.steps[first].pass.tasks = tiles;
                    p.steps.drain(first + 1..=f[f.len() - 1]);
                },
                max_k,
            )
            .unwrap_err();
            assert!(e.contains("stored by one unit, loaded by another"), "max_k {max_k}: {e}");
            // A range left out: its rows never get their values.
            let e = broken(
                &|p| {
                    let f = finish(p);
                    p.steps.remove(f[1]);
                },
                max_k,
            )
            .unwrap_err();
            assert!(e.contains("holds") || e.contains("ends with"), "max_k {max_k}: {e}");
        }
        // No replicas where a shared-memory pass needs them.
        let e = broken(
            &|p| {
                for s in &mut p.steps {
                    s.pass.replicate_out = 0;
                }
            },
            2,
        )
        .unwrap_err();
        assert!(e.contains("row 1 holds"), "{e}");
    }

    #[test]
    fn column_groups_are_whole_tiles_and_cover_every_column() {
        assert_eq!(column_groups(316, 4), vec![0..80, 80..160, 160..240, 240..316]);
        assert_eq!(column_groups(316, 1), vec![0..316]);
        assert_eq!(column_groups(17, 4), vec![0..8, 8..16, 16..17]);
        assert_eq!(column_groups(16, 3), vec![0..8, 8..16]);
        assert_eq!(column_groups(7, 4), vec![0..7]);
        assert_eq!(column_groups(8, 2), vec![0..8]);
        assert_eq!(column_groups(24, 2), vec![0..16, 16..24]);
        for m in 1..=100 {
            for g in 1..=9 {
                let groups = column_groups(m, g);
                let tiles = m.div_ceil(NTT_COLS);
                assert_eq!(groups.len(), g.min(tiles), "m {m}, G {g}");
                assert_eq!(groups[0].start, 0, "m {m}, G {g}");
                assert_eq!(groups.last().unwrap().end, m, "m {m}, G {g}");
                for w in groups.windows(2) {
                    assert_eq!(w[0].end, w[1].start, "m {m}, G {g}: {groups:?}");
                    assert!(w[0].end.is_multiple_of(NTT_COLS), "m {m}, G {g}: {groups:?}");
                    assert!(w[0].len() >= w[1].len(), "m {m}, G {g}: {groups:?}");
                }
                assert!(groups.iter().all(|r| !r.is_empty()), "m {m}, G {g}: {groups:?}");
                let (widest, narrowest) = (groups[0].len(), groups.last().unwrap().len());
                assert!(widest - narrowest < 2 * NTT_COLS, "m {m}, G {g}: {groups:?}");
            }
        }
    }

    /// The lean form's twiddle rows: the windows ntt_pass_reg runs (its loop, step by step) hold
    /// each stage once, and [`twiddle_slots`] counts `2^w` rows of `radix - 1` for each; the
    /// radix-16 finish's other placement reads the same tables; every variant's block fits an
    /// H200's shared memory (227 KiB) at 11 stages.
    #[test]
    fn lean_twiddle_rows_cover_the_windows_the_kernel_runs() {
        for log_r in [4u32, 5] {
            let radix = 1u32 << log_r;
            for k in log_r..=MAX_NTT_STAGES {
                for dit in [false, true] {
                    // lde.cu's window loop: DIT from stage 0 up, DIF from k down.
                    let (mut windows, mut seen) = (Vec::new(), vec![0; k as usize]);
                    let (mut w, mut next) = (if dit { 0 } else { k - log_r }, if dit { 0 } else { k });
                    loop {
                        let stages = if dit { next..(next + log_r).min(k) } else { next.saturating_sub(log_r)..next };
                        for e in stages.clone() {
                            assert!(e >= w && e - w < log_r, "k {k}, radix {radix}, dit {dit}: stage {e} at w {w}");
                            seen[e as usize] += 1;
                        }
                        windows.push(w);
                        next = if dit { stages.end } else { stages.start };
                        if (dit && next >= k) || (!dit && next == 0) {
                            break;
                        }
                        w = if dit { next.min(k - log_r) } else { next.saturating_sub(log_r) };
                    }
                    assert!(seen.iter().all(|&c| c == 1), "k {k}, radix {radix}, dit {dit}: {seen:?}");
                    let rows: usize = windows.iter().map(|&w| (1usize << w) * (radix as usize - 1)).sum();
                    assert_eq!(twiddle_slots(k, radix, true, dit), rows, "k {k}, radix {radix}, dit {dit}");
                    assert!(rows >= (1 << k) - 1, "k {k}: {rows} slots for {} twiddles", (1 << k) - 1);
                }
                assert_eq!(twiddle_slots(k, radix, false, true), 1 << k);
            }
        }
        // The radix-16 finish's placement (lde.cu's pow2_last): windows end at stage LOGR, and the
        // last, [0, LOGR), needs no table. Every stage above it must find its window's table at
        // the window's own index and bit, as the kernel computes its row from both.
        let log_r = 4u32;
        for k in log_r + 1..=MAX_NTT_STAGES {
            let table_w = |n: u32| k.saturating_sub((n + 1) * log_r);
            let (mut w, mut next, mut window) = (k - log_r, k, 0);
            while w != 0 {
                let bot = if next >= 2 * log_r { next - log_r } else { log_r };
                for e in bot..next {
                    assert_eq!((k - 1 - e) / log_r, window, "k {k}: stage {e}");
                    assert_eq!(table_w(window), w, "k {k}: stage {e} in window {window}");
                    assert!(e - w < log_r, "k {k}: stage {e} at w {w}");
                }
                next = bot;
                w = next.saturating_sub(log_r);
                window += 1;
            }
            assert_eq!(next, log_r, "k {k}: the last window is [0, {log_r})");
        }
        assert_eq!(twiddle_slots(11, 16, true, false), 15 * (128 + 8 + 1));
        assert_eq!(twiddle_slots(11, 32, true, true), 31 * (1 + 32 + 64));
        for v in [(16, 8, true, LazyForm::Lean), (32, 8, true, LazyForm::Lean), (32, 4, false, LazyForm::Plain)] {
            assert!(reg_block_bytes(11, v) <= 227 * 1024, "{v:?}: {} bytes", reg_block_bytes(11, v));
        }
        // The default kernel's passes without coset factors keep the 164 KiB carve-out: one block
        // of 2^11 rows or two of 2^10, with 1 KiB reserved per block.
        let d = (16, 8, true, LazyForm::Lean);
        for dit in [false, true] {
            assert!(reg_pass_bytes(11, 8, d, dit, false) + 1024 <= 164 * 1024, "dit {dit}");
            assert!(2 * (reg_pass_bytes(10, 8, d, dit, false) + 1024) <= 164 * 1024, "dit {dit}");
        }
        let cf = reg_pass_bytes(10, 8, d, false, true) - reg_pass_bytes(10, 8, d, false, false);
        assert_eq!(cf, (1024 + 1024 / 16) * ELEM_BYTES, "the finish's coset factors, one slot skipped per 16");
        assert_eq!(reg_pass_bytes(10, 8, d, true, true), reg_pass_bytes(10, 8, d, true, false), "forward: none");
    }

    #[test]
    fn split_is_even_and_covers_every_stage() {
        assert_eq!(split(0, 11), vec![0]);
        assert_eq!(split(21, 11), vec![11, 10]);
        assert_eq!(split(22, 11), vec![11, 11]);
        assert_eq!(split(23, 11), vec![8, 8, 7]);
        assert_eq!(split(5, 1), vec![1; 5]);
        for s in 0..=32 {
            for m in 1..=11 {
                let p = split(s, m);
                assert_eq!(p.iter().sum::<u32>(), s);
                assert!(p.iter().all(|&k| k <= m));
            }
        }
    }
}

/// A host simulation of [`plan`]'s launches on row labels: it models what each kernel's tile (or
/// warp) loads and stores, checks that no launch lets one unit store a row another unit loads or
/// stores, and that every load finds the value its position needs.
#[cfg(test)]
mod simulation {
    use super::*;

    /// A row's content: `(pass, position)`, the value of `position` after NTT pass `pass` (pass 0
    /// is the trace), or [`GARBAGE`].
    type Label = (u32, u64);
    const GARBAGE: Label = (u32::MAX, u64::MAX);
    /// No unit / several units (the race bookkeeping).
    const NONE: u32 = u32::MAX;
    const MANY: u32 = u32::MAX - 1;

    /// What one unit (an NTT task) does: loads of (buffer, row, expected
    /// label) and stores of (buffer, row, label), in order, loads of a tile before its stores.
    #[derive(Default)]
    struct Unit {
        ops: Vec<(bool, Buf, usize, Label)>, // (is_store, buffer, row, label)
    }

    /// The row an element offset of column 0 lies in, for rows `m` elements apart (the pitch).
    fn row(elem: u64, m: usize) -> usize {
        assert_eq!(elem % m as u64, 0, "element {elem} is not in column 0");
        (elem / m as u64) as usize
    }

    /// The units of one launch of NTT pass number `j` (1-based over the plan's NTT passes),
    /// modelling lde.cu's tile mapping (`tile_pos`, the launch's tasks, the register kernel's
    /// `replicated_in` tasks, `finish_row`, `finish_reps`, which kernel a `k` runs), with
    /// `expect(pos)` the label a load of position `pos` must find.
    fn ntt_units(
        dit: bool,
        src: Buf,
        dst: Buf,
        p: &NttPass,
        j: u32,
        m: usize,
        expect: impl Fn(u64) -> Label,
    ) -> Vec<Unit> {
        let k = p.k as u32;
        let reg = k >= REG_MIN_STAGES;
        let h_small = 1u64 << p.log_h_small;
        let reps = if p.replicated_in != 0 { h_small } else { 1 };
        (p.first_task..p.first_task + p.tasks)
            .map(|task| {
                let mut u = Unit::default();
                for rep in (0..reps).rev() {
                    let tile = task * reps + rep;
                    let (lo, hi) = (tile & (h_small - 1), tile >> p.log_h_small);
                    let positions: Vec<u64> = (0..1u64 << k).map(|i| (((hi << k) + i) << p.log_h_small) + lo).collect();
                    for &pos in &positions {
                        let r = if p.replicated_in != 0 { pos - lo } else { pos };
                        u.ops.push((false, src, row(r * p.src_stride, m), expect(pos)));
                    }
                    for &pos in &positions {
                        // The register kernels store no replicas, and the forward kernels never
                        // finish an inverse.
                        if p.finish_inverse != 0 && !dit {
                            let base = (pos << p.log_blowup) * p.row_pitch;
                            let n_rep = if p.replicate_out != 0 && !reg { 1 << p.log_blowup } else { 1 };
                            for r in 0..n_rep {
                                u.ops.push((true, dst, row(base + r * p.row_pitch, m), (j, pos)));
                            }
                        } else {
                            u.ops.push((true, dst, row(pos * p.dst_stride, m), (j, pos)));
                        }
                    }
                }
                u
            })
            .collect()
    }

    /// Runs `plan` on labels and returns the first violation found.
    pub(super) fn check(
        plan: &Plan,
        log_n: u32,
        log_b: u32,
        m: usize,
        route: Route,
    ) -> std::result::Result<(), String> {
        let (n, big_n) = (1usize << log_n, 1usize << (log_n + log_b));
        let mut lde = vec![GARBAGE; big_n];
        let mut trace = vec![GARBAGE; n];
        let initial = if route == Route::InPlace { &mut lde } else { &mut trace };
        for (p, l) in initial.iter_mut().take(n).enumerate() {
            *l = (0, p as u64);
        }
        // A pass is a run of launches with the same direction and smallest half-span.
        let key = |s: &Step| (s.dit, s.pass.log_h_small);
        let inverse_passes = plan
            .steps
            .iter()
            .enumerate()
            .filter(|&(i, s)| !s.dit && (i == 0 || key(&plan.steps[i - 1]) != key(s)))
            .count() as u32;
        let mut j = 0u32;
        for (launch, step) in plan.steps.iter().enumerate() {
            if launch == 0 || key(&plan.steps[launch - 1]) != key(step) {
                j += 1;
            }
            let prev = j - 1;
            let Step { dit, src, dst, pass } = step;
            let units = if *dit && j == inverse_passes + 1 {
                // The first forward pass: position q*B + r holds the inverse's q.
                ntt_units(*dit, *src, *dst, pass, j, m, |pos| (prev, pos >> log_b))
            } else {
                ntt_units(*dit, *src, *dst, pass, j, m, |pos| (prev, pos))
            };
            // Races: a row stored by one unit is loaded or stored by no other unit.
            let mut loader = [vec![NONE; n], vec![NONE; big_n]];
            let mut storer = [vec![NONE; n], vec![NONE; big_n]];
            let idx = |b: Buf| usize::from(b == Buf::Lde);
            for (ui, u) in units.iter().enumerate() {
                for &(store, b, r, _) in &u.ops {
                    let slot = if store { &mut storer[idx(b)][r] } else { &mut loader[idx(b)][r] };
                    if store && *slot != NONE && *slot != ui as u32 {
                        return Err(format!("launch {launch} ({step:?}): two units store {b:?} row {r}"));
                    }
                    *slot = if *slot == NONE || *slot == ui as u32 { ui as u32 } else { MANY };
                }
            }
            for b in [Buf::Trace, Buf::Lde] {
                for (r, (&s, &l)) in storer[idx(b)].iter().zip(&loader[idx(b)]).enumerate() {
                    if s != NONE && l != NONE && l != s {
                        return Err(format!(
                            "launch {launch} ({step:?}): {b:?} row {r} stored by one unit, loaded by another"
                        ));
                    }
                }
            }
            // No races: the units' order does not matter. Loads first within each tile.
            for u in &units {
                for &(store, b, r, label) in &u.ops {
                    let rows = if b == Buf::Lde { &mut lde } else { &mut trace };
                    if store {
                        rows[r] = label;
                    } else if rows[r] != label {
                        return Err(format!(
                            "launch {launch} ({step:?}): {b:?} row {r} holds {:?}, the load needs {label:?}",
                            rows[r]
                        ));
                    }
                }
            }
        }
        for (r, &l) in lde.iter().enumerate() {
            let want = if j > inverse_passes { (j, r as u64) } else { (j, (r >> log_b) as u64) };
            if l != want {
                return Err(format!("row {r} ends with {l:?}, not {want:?}"));
            }
        }
        Ok(())
    }
}
