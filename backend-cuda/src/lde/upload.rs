//! [`coset_lde_from_host`]: the upload of a page-locked host trace overlapped with its LDE.
//!
//! This overlaps a page-locked host trace's upload with the LDE. Rows cannot be
//! pipelined (a natural-order NTT needs a whole column before its first pass), but columns can:
//! every column's LDE is independent, and every launch of [`super::plan::plan`] can cover a range of columns
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
//! strided copy keeps the bus's speed.
//!
//! [`coset_lde_from_host_and_download`] adds the host copy of the LDE to the same pipeline: once a
//! group's plan is queued, an event lets the download stream copy that group's columns of all
//! `N` rows (one `cuMemcpy2DAsync`, device to host, the same pitches) while the compute stream
//! extends the next group and the copy stream uploads the one after. The link carries the upload
//! and the download in opposite directions at once, so the download of an LDE of `B` times the
//! trace's bytes takes about `B * U` and ends about `(U + L) / G` after the upload starts plus
//! that, rather than after the whole LDE: on an H100's 55 GB/s, 192 ms for a 2^22 x 316 LDE. A pageable trace (it would go through the staging ring
//! anyway), one below [`CudaOptions::upload_overlap_min_bytes`], or a single group (`G = 1`, or
//! at most 8 columns) takes the plain route: [`memory::write`], then the in-place LDE.

use std::ops::Range;

use backend_api::DeviceBuffer as _;
use backend_api::{ELEM_BYTES, FaultSite, LdeParams, Result, validate};
use cudarc::driver::sys;

use super::kernels::NTT_COLS;
use super::plan::Route;
use super::tables::Tables;
use super::{queue, run};
use crate::context::{Device, Event, Lane};
use crate::driver;
use crate::host;
use crate::host::{Lock, PinnedHost};
use crate::memory::{self, CudaBuffer, CudaDownload};
use crate::options::CudaOptions;

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

/// [`backend_api::Backend::coset_lde_from_host`] (module doc): from
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
    let groups = column_groups(params.trace().cols(), options.upload_groups as usize);
    if !overlaps(options, trace, &groups) {
        memory::write(buf, 0, trace)?;
        return run(device, params, Route::InPlace, None, buf);
    }
    overlapped(device, buf, trace, params, &groups, None)
}

/// [`backend_api::Backend::coset_lde_from_host_and_download`]: on the overlapped route of
/// [`coset_lde_from_host`], each column group's LDE goes down on the download stream as soon as
/// its launches are done (module doc), into a page-locked block of the device's host pool; on the
/// plain route, or when the host refuses to lock the block, the LDE and then
/// [`memory::queue_download`]. Returns once no copy reads `trace` any more, with the download
/// pending; `buf` keeps it as a reader.
pub(crate) fn coset_lde_from_host_and_download(
    device: &Device,
    options: &CudaOptions,
    buf: &mut CudaBuffer,
    trace: &[u64],
    params: &LdeParams,
) -> Result<CudaDownload> {
    validate::coset_lde_from_host(params, trace.len(), buf.len())?;
    let groups = column_groups(params.trace().cols(), options.upload_groups as usize);
    if overlaps(options, trace, &groups) {
        let dev = std::sync::Arc::clone(buf.device());
        let host = PinnedHost::take(&dev, buf.len(), Lock::Preferred, false)?;
        if host.is_page_locked() {
            let mut pending = CudaDownload::new(&dev, host);
            overlapped(device, buf, trace, params, &groups, Some(&mut pending))?;
            pending.complete(buf)?;
            return Ok(pending);
        }
    }
    coset_lde_from_host(device, options, buf, trace, params)?;
    memory::queue_download(buf)
}

/// Whether an upload takes the overlapped route: from page-locked memory, at least
/// [`CudaOptions::upload_overlap_min_bytes`], in two groups or more.
fn overlaps(options: &CudaOptions, trace: &[u64], groups: &[Range<usize>]) -> bool {
    groups.len() >= 2 && std::mem::size_of_val(trace) >= options.upload_overlap_min_bytes && host::is_page_locked(trace)
}

/// The overlapped route (module doc), on a validated call whose `trace` is page-locked; with
/// `download`, each group's LDE columns are queued into it once extended.
fn overlapped(
    device: &Device,
    buf: &mut CudaBuffer,
    trace: &[u64],
    params: &LdeParams,
    groups: &[Range<usize>],
    mut download: Option<&mut CudaDownload>,
) -> Result<()> {
    let m = params.trace().cols();
    let dev = std::sync::Arc::clone(buf.device());
    dev.bind()?;
    // Every event exists before the first copy is queued, so that failing to make one leaves
    // nothing in flight.
    let ready = Event::new(&dev)?;
    let copied = groups.iter().map(|_| Event::new(&dev)).collect::<Result<Vec<_>>>()?;
    let extended = match download {
        Some(_) => groups.iter().map(|_| Event::new(&dev)).collect::<Result<Vec<_>>>()?,
        None => Vec::new(),
    };
    // The tables go first: host-to-device copies go through the copy engine in the order they
    // are queued, whatever their stream, so tables queued after every group's copy hold the first
    // group's launches until the whole trace has crossed (the first version did that and
    // overlapped nothing: 183.7 ms at G = 4 against 180.5 ms at G = 1 on the H200). Queued right
    // behind the first group instead, they measured 171.7-177.6 ms warm at G = 4 against 118.8
    // ms when first (not explained; the H200 call of 13:56 UTC in BENCHMARKS.md). Tables the
    // device kept from an earlier LDE of this shape need no copy at all.
    let tw = Tables::get(&dev, params)?;
    // The copies write `buf` only after the work queued on it so far (its stream-ordered
    // allocation, earlier kernels reading it, the tables' upload, copies reading it on the
    // download stream).
    buf.settle_readers()?;
    ready.record_on(Lane::Compute)?;
    ready.wait_on(Lane::Copy)?;
    let n = params.trace().rows();
    let lde_rows = params.lde_shape().rows();
    let pitch = m * ELEM_BYTES;
    let mut run = || -> Result<()> {
        for (g, (cols, done)) in groups.iter().zip(&copied).enumerate() {
            if g == 1 && dev.tracker.site_fails(FaultSite::HostUploadQueued) {
                return Err(driver::error_from(
                    "cuMemcpy2DAsync (injected fault)",
                    sys::CUresult::CUDA_ERROR_INVALID_VALUE,
                ));
            }
            // SAFETY: `trace` is page-locked (checked by the caller) and holds n rows of `pitch`
            // bytes (validated), of which the copy reads columns `cols`; the caller's borrow lasts
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
        for (g, (cols, done)) in groups.iter().zip(&copied).enumerate() {
            done.wait_on(Lane::Compute)?;
            queue(device, params, Route::InPlace, None, buf, cols.clone(), &tw)?;
            if let Some(download) = download.as_deref_mut() {
                extended[g].record_on(Lane::Compute)?;
                extended[g].wait_on(Lane::Download)?;
                // SAFETY: the source is columns `cols` of all N rows of `buf` (N x m, validated),
                // final once the launches just queued have run (the download stream waits for
                // them: `extended[g]`); the caller records the download as a reader of `buf`
                // before anything can write or free it, and on error waits for the download
                // stream. The destination is the same columns of the download's page-locked host
                // buffer of N x m elements (the caller took it at `buf.len()`).
                unsafe {
                    download.queue(|host, stream| {
                        driver::memcpy_2d_dtoh_async(
                            host.add(cols.start).cast(),
                            pitch,
                            buf.ptr_at(cols.start),
                            pitch,
                            (cols.len() * ELEM_BYTES, lde_rows),
                            stream,
                        )
                    })
                }?;
            }
        }
        copied.last().expect("two groups at least").synchronize()
    };
    run().inspect_err(|_| {
        // No copy may still read the caller's host trace once this returns, no launch may be
        // left waiting on a copy that failed, and no download may still read `buf`: wait for
        // every stream (errors here are the same failure, already being returned).
        let _ = dev.synchronize_copies();
        let _ = dev.synchronize();
        let _ = dev.synchronize_lane(Lane::Download);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
