//! Host transfers through two small reusable rings of mapped staging buffers, one per direction.
//!
//! `Queue::write_buffer` copies its data, on the calling thread, into a staging buffer that wgpu
//! allocates for that one call and frees after the next submission; waiting for the device after
//! each such chunk (as earlier versions did) also kept the host copy and the device's copy from
//! ever overlapping. Measured on an H200 over Vulkan, a 5.3 GB upload that way ran at 7.3 GB/s,
//! where page-locked DMA runs at 55 GB/s (BENCHMARKS.md). So large transfers go through a
//! [`Ring`]:
//! - **a few fixed staging buffers** ([`SLOTS`] of `Gpu::transfer_chunk` bytes, 64 MiB by default
//!   ([`DEFAULT_CHUNK_BYTES`])), made at the first large transfer in each direction and kept for
//!   the device's life: no allocation, driver page-locking or first-touch page faults per chunk;
//! - **uploads:** chunk `j` is copied by every core (rayon, in [`PIECES_PER_CHUNK`] pieces) into
//!   slot `j % SLOTS` (`MAP_WRITE | COPY_SRC`, mapped), which is then unmapped and copied to the
//!   segments it covers with `copy_buffer_to_buffer`, one submission per chunk. Before a slot is
//!   refilled only the submission that last read it (chunk `j - SLOTS`) is waited for, so the
//!   host copy of chunk `j` runs while the device copies chunks `j - 1` and `j - 2`. The caller's
//!   slice may be reused as soon as the call returns (every byte is in staging by then);
//! - **downloads:** the copies of up to [`SLOTS`] chunks into slots (`MAP_READ | COPY_DST`) are
//!   queued ahead, each with its mapping requested behind it; chunk `j` is copied out by every
//!   core as soon as its mapping completes, and its slot is then queued with chunk `j + SLOTS`;
//! - **small transfers** (at most [`DIRECT_FRACTION`]th of a chunk) skip the rings: uploads
//!   through `Queue::write_buffer`, downloads through one small staging buffer of that size,
//!   made at the first small download and kept ([`download_small`]). With a staging buffer
//!   made per read, a 64 KiB read of a freshly built tree took 45-64 ms on an H100 over Vulkan
//!   (`op_latency` in lab/), where back-to-back reads of one buffer took 0.08 ms: a proof's
//!   openings and FRI rounds make dozens of such reads;
//! - **counted:** the rings' bytes count as page-locked host memory
//!   ([`backend_api::MemoryCounters::pinned_host`]): mapped staging memory is memory the driver
//!   pins for the device to read or write (where the adapter maps its own memory into the host's
//!   address space, as with a resizable BAR, the upload ring may instead lie in device memory;
//!   either way it is outside the device tracker's `live`).
//!
//! Why 64 MiB and three slots: at 55 GB/s a 64 MiB chunk crosses the bus in 1.2 ms, against tens
//! of microseconds of submission and poll per chunk, so the per-chunk cost stays a few percent;
//! the pipeline's fill and drain cost one chunk's host copy (~2-3 ms); three slots keep two chunks
//! in flight while the third is filled, for 192 MiB of staging per direction.

use std::sync::mpsc;

use backend_api::Result;
use rayon::prelude::*;

use crate::context::{Gpu, WgpuError, device_error, lock};
use crate::memory::WgpuBuffer;

/// Bytes of one staging slot unless [`crate::WgpuOptions::transfer_chunk_bytes`] says otherwise.
pub(crate) const DEFAULT_CHUNK_BYTES: usize = 64 << 20;
/// Staging slots per ring.
pub(crate) const SLOTS: usize = 3;
/// Transfers of at most `chunk / DIRECT_FRACTION` bytes go straight through `Queue::write_buffer`
/// or one staging buffer of their size.
pub(crate) const DIRECT_FRACTION: usize = 16;
/// Pieces a chunk is cut into for the threads that copy it into or out of a slot (1 MiB each at
/// the default chunk size).
const PIECES_PER_CHUNK: usize = 64;
/// How long a transfer waits for a staging buffer's mapping once its submission has completed.
const MAP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Which way a ring moves data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direction {
    Upload,
    Download,
}

/// The rings of one device, each made at its first large transfer and kept, and the small
/// download buffer, made at the first small download and kept.
#[derive(Default)]
pub(crate) struct Rings {
    upload: Option<Ring>,
    download: Option<Ring>,
    small: Option<wgpu::Buffer>,
}

impl Rings {
    /// Where the ring of `dir` is kept.
    fn ring(dir: Direction) -> fn(&mut Rings) -> &mut Option<Ring> {
        match dir {
            Direction::Upload => |r| &mut r.upload,
            Direction::Download => |r| &mut r.download,
        }
    }
}

/// Runs `f` on the staging resource the device keeps in `slot`, made by `make` (and counted as
/// `bytes` of page-locked host memory) when there is none or another thread holds it. It is kept
/// after success unless another was returned first; otherwise, and after an error (it may be left
/// mid-mapping), it is dropped and uncounted.
fn with_kept<T>(
    gpu: &Gpu,
    slot: fn(&mut Rings) -> &mut Option<T>,
    bytes: usize,
    make: impl FnOnce() -> Result<T>,
    f: impl FnOnce(&mut T) -> Result<()>,
) -> Result<()> {
    let kept = slot(&mut lock(&gpu.staging)).take();
    let mut item = match kept {
        Some(item) => item,
        None => {
            let made = make()?;
            gpu.tracker.pinned_host_allocated(bytes);
            made
        }
    };
    let done = f(&mut item);
    let mut rings = lock(&gpu.staging);
    let kept = slot(&mut rings);
    if done.is_ok() && kept.is_none() {
        *kept = Some(item);
    } else {
        drop(rings);
        drop(item);
        gpu.tracker.pinned_host_freed(bytes);
    }
    done
}

/// A requested mapping: its callback's answer arrives on `rx` once `after` has completed.
struct PendingMap {
    rx: mpsc::Receiver<std::result::Result<(), wgpu::BufferAsyncError>>,
    after: Option<wgpu::SubmissionIndex>,
}

/// Requests a mapping of the first `bytes` of `buf`, to complete after `after` (the submission
/// that last used `buf`; `None` waits for every submission so far).
fn request_map(
    buf: &wgpu::Buffer,
    mode: wgpu::MapMode,
    bytes: u64,
    after: Option<wgpu::SubmissionIndex>,
) -> PendingMap {
    let (tx, rx) = mpsc::channel();
    buf.map_async(mode, 0..bytes, move |r| {
        let _ = tx.send(r);
    });
    PendingMap { rx, after }
}

impl PendingMap {
    /// Waits for the mapping. The callback runs inside some thread's poll: ours, or, when several
    /// threads share the device, another's that is still delivering callbacks after our poll
    /// returned. So poll and wait for the callback in turns, up to a deadline.
    fn wait(self, gpu: &Gpu, op: &str) -> Result<()> {
        let deadline = std::time::Instant::now() + MAP_TIMEOUT;
        let mapped = loop {
            gpu.wait_for(self.after.clone(), op)?;
            match self.rx.recv_timeout(std::time::Duration::from_millis(5)) {
                Ok(r) => break r,
                Err(mpsc::RecvTimeoutError::Timeout) if std::time::Instant::now() < deadline => {}
                Err(e) => {
                    gpu.check(op)?;
                    return Err(device_error(
                        format!("{op}: map a staging buffer"),
                        WgpuError::NoAnswer(format!(
                            "the mapping did not complete within {MAP_TIMEOUT:?} of its submission ({e})"
                        )),
                    ));
                }
            }
        };
        mapped.map_err(|e| device_error(format!("{op}: map a staging buffer"), e))
    }
}

/// Maps `staging` for reading after `after` (every submission so far when `None`), copies its
/// first `out.len()` elements out with every core, and unmaps it.
pub(crate) fn read_mapped(
    gpu: &Gpu,
    staging: &wgpu::Buffer,
    after: Option<wgpu::SubmissionIndex>,
    out: &mut [u64],
) -> Result<()> {
    request_map(staging, wgpu::MapMode::Read, (out.len() * 8) as u64, after).wait(gpu, "download")?;
    let copied = copy_out(gpu, staging, out);
    staging.unmap();
    copied
}

/// Bytes per piece of the parallel copies: a chunk in [`PIECES_PER_CHUNK`] pieces, a multiple of 8.
fn piece_bytes(gpu: &Gpu) -> usize {
    (gpu.transfer_chunk / PIECES_PER_CHUNK).next_multiple_of(8)
}

/// Copies the first `out.len()` elements of the mapped `staging` into `out`, in parallel.
fn copy_out(gpu: &Gpu, staging: &wgpu::Buffer, out: &mut [u64]) -> Result<()> {
    let piece = piece_bytes(gpu);
    let bytes = (out.len() * 8) as u64;
    let view = staging.get_mapped_range(0..bytes).map_err(|e| device_error("download: read a staging buffer", e))?;
    let out: &mut [u8] = bytemuck::cast_slice_mut(out);
    out.par_chunks_mut(piece).zip(view.par_chunks(piece)).for_each(|(o, v)| o.copy_from_slice(v));
    Ok(())
}

/// Copies `src` into the start of the mapped `staging`, in parallel: one mapped view per piece
/// (views of disjoint ranges may be held at once), filled by rayon.
fn copy_in(gpu: &Gpu, staging: &wgpu::Buffer, src: &[u64]) -> Result<()> {
    let piece = piece_bytes(gpu);
    let src: &[u8] = bytemuck::cast_slice(src);
    let views = (0..src.len())
        .step_by(piece)
        .map(|a| staging.get_mapped_range_mut(a as u64..(a + piece).min(src.len()) as u64))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| device_error("upload: write a staging buffer", e))?;
    views.into_par_iter().zip(src.par_chunks(piece)).for_each(|(mut v, s)| v.copy_from_slice(s));
    Ok(())
}

/// One staging buffer of a ring and the submission that last used it.
struct Slot {
    buf: wgpu::Buffer,
    /// Mapped for the host (an upload slot between its mapping and its copy to the device).
    mapped: bool,
    last: Option<wgpu::SubmissionIndex>,
}

/// [`SLOTS`] staging buffers of one direction.
pub(crate) struct Ring {
    slots: Vec<Slot>,
}

impl Ring {
    /// Makes a ring of [`SLOTS`] buffers of `gpu.transfer_chunk` bytes.
    fn new(gpu: &Gpu, dir: Direction) -> Result<Ring> {
        let chunk = gpu.transfer_chunk as u64;
        let slots = (0..SLOTS)
            .map(|_| {
                Ok(match dir {
                    // Mapped at creation: the first SLOTS chunks wait for nothing.
                    Direction::Upload => Slot {
                        buf: gpu.create_mapped_buffer(
                            "backend-wgpu upload staging",
                            chunk,
                            wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
                        )?,
                        mapped: true,
                        last: None,
                    },
                    Direction::Download => Slot {
                        buf: gpu.create_buffer(
                            "backend-wgpu download staging",
                            chunk,
                            wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                        )?,
                        mapped: false,
                        last: None,
                    },
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Ring { slots })
    }

    /// Runs `f` on the device's ring for `dir` ([`with_kept`]).
    fn with(gpu: &Gpu, dir: Direction, f: impl FnOnce(&mut Ring) -> Result<()>) -> Result<()> {
        with_kept(gpu, Rings::ring(dir), SLOTS * gpu.transfer_chunk, || Ring::new(gpu, dir), f)
    }
}

/// Bytes of the small download buffer: the largest download that skips the rings, rounded up to
/// a multiple of 8.
fn small_bytes(gpu: &Gpu) -> usize {
    (gpu.transfer_chunk / DIRECT_FRACTION).next_multiple_of(8).max(8)
}

/// Downloads `out.len()` elements from element `offset` of `buf` (at most
/// `transfer_chunk / DIRECT_FRACTION` bytes) through the device's small staging buffer
/// ([`with_kept`]).
pub(crate) fn download_small(gpu: &Gpu, buf: &WgpuBuffer, offset: usize, out: &mut [u64]) -> Result<()> {
    let bytes = small_bytes(gpu);
    debug_assert!(out.len() * 8 <= bytes, "a small download of {} B", out.len() * 8);
    let make = || {
        gpu.create_buffer(
            "backend-wgpu small download staging",
            bytes as u64,
            wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        )
    };
    with_kept(
        gpu,
        |r| &mut r.small,
        bytes,
        make,
        |staging| {
            let mut encoder = gpu.hw.device.create_command_encoder(&Default::default());
            buf.copy_to_staging(&mut encoder, offset, out.len(), staging);
            let index = gpu.hw.queue.submit([encoder.finish()]);
            read_mapped(gpu, staging, Some(index), out)
        },
    )
}

/// Makes the device's upload ring unless it has one.
pub(crate) fn prepare_upload(gpu: &Gpu) -> Result<()> {
    Ring::with(gpu, Direction::Upload, |_| Ok(()))
}

/// Writes `host` at element `offset` of `buf` through the upload ring; `after_chunk(j)` runs
/// once chunk `j` is submitted (tests lose the device there).
pub(crate) fn upload(
    gpu: &Gpu,
    buf: &WgpuBuffer,
    offset: usize,
    host: &[u64],
    after_chunk: &mut dyn FnMut(usize),
) -> Result<()> {
    let chunk = gpu.transfer_chunk / 8;
    Ring::with(gpu, Direction::Upload, |ring| {
        for (j, src) in host.chunks(chunk).enumerate() {
            let slot = &mut ring.slots[j % SLOTS];
            if !slot.mapped {
                request_map(&slot.buf, wgpu::MapMode::Write, slot.buf.size(), slot.last.take()).wait(gpu, "upload")?;
                slot.mapped = true;
            }
            copy_in(gpu, &slot.buf, src)?;
            slot.buf.unmap();
            slot.mapped = false;
            let mut encoder = gpu.hw.device.create_command_encoder(&Default::default());
            gpu.stamp(&mut encoder);
            buf.copy_from_staging(&mut encoder, &slot.buf, offset + j * chunk, src.len());
            gpu.stamp(&mut encoder);
            slot.last = Some(gpu.hw.queue.submit([encoder.finish()]));
            after_chunk(j);
            gpu.check("upload")?;
        }
        Ok(())
    })
}

/// Copies `out.len()` elements from element `offset` of `buf` through the download ring, after
/// all issued work.
pub(crate) fn download(gpu: &Gpu, buf: &WgpuBuffer, offset: usize, out: &mut [u64]) -> Result<()> {
    let chunk = gpu.transfer_chunk / 8;
    let total = out.len();
    let chunks = total.div_ceil(chunk);
    Ring::with(gpu, Direction::Download, |ring| {
        // Queues chunk `j`'s copy into its slot and the slot's mapping behind it.
        let queue = |ring: &mut Ring, j: usize| -> PendingMap {
            let slot = &mut ring.slots[j % SLOTS];
            let n = chunk.min(total - j * chunk);
            let mut encoder = gpu.hw.device.create_command_encoder(&Default::default());
            gpu.stamp(&mut encoder);
            buf.copy_to_staging(&mut encoder, offset + j * chunk, n, &slot.buf);
            gpu.stamp(&mut encoder);
            let index = gpu.hw.queue.submit([encoder.finish()]);
            slot.last = Some(index.clone());
            request_map(&slot.buf, wgpu::MapMode::Read, (n * 8) as u64, Some(index))
        };
        let mut pending: std::collections::VecDeque<PendingMap> =
            (0..chunks.min(SLOTS)).map(|j| queue(ring, j)).collect();
        for j in 0..chunks {
            let map = pending.pop_front().expect("one mapping queued per chunk");
            let slot = j % SLOTS;
            // The slot is mapped (or failed) from here on: unmap it on every path.
            let copied = map.wait(gpu, "download").and_then(|()| {
                let out = &mut out[j * chunk..((j + 1) * chunk).min(total)];
                copy_out(gpu, &ring.slots[slot].buf, out)
            });
            ring.slots[slot].buf.unmap();
            copied?;
            if j + SLOTS < chunks {
                pending.push_back(queue(ring, j + SLOTS));
            }
        }
        gpu.check("download")
    })
}

#[cfg(test)]
mod tests {
    //! A device lost in the middle of a staged transfer: the transfer and every later call
    //! return errors (no panic, no hang). Skipped, saying so, without an adapter;
    //! `REQUIRE_WGPU=1` fails instead.

    use backend_api::{Backend, Error};

    use crate::{WgpuBackend, WgpuOptions};

    fn lost(e: &Error) -> bool {
        matches!(e, Error::DeviceLost { .. } | Error::Device { .. })
    }

    #[test]
    fn device_lost_mid_upload_is_an_error() {
        let options = WgpuOptions { allow_software: true, transfer_chunk_bytes: Some(4096), ..Default::default() };
        let Some(b) = conformance::parity::or_skip(
            WgpuBackend::new(options),
            "device_lost_mid_upload_is_an_error",
            "REQUIRE_WGPU",
        ) else {
            return;
        };
        let n = 10 * 512 + 3;
        let mut buf = b.alloc(n).unwrap();
        let data: Vec<u64> = (0..n as u64).collect();
        // A clean staged write first, so that the ring's slots are in use when the device goes.
        b.write(&mut buf, 0, &data).unwrap();
        let mut seen = Vec::new();
        let got = crate::memory::write_observed(&b.gpu, &buf, 0, &data, &mut |j| {
            seen.push(j);
            if j == 1 {
                b.gpu.hw.device.destroy();
            }
        });
        let e = got.expect_err("a write that lost its device succeeded");
        assert!(lost(&e), "{e:?}");
        assert!(seen.starts_with(&[0, 1]) && seen.len() < 11, "chunks submitted: {seen:?}");
        let mut out = vec![0u64; n];
        let e = b.download(&buf, 0, &mut out).expect_err("a download from a lost device succeeded");
        assert!(lost(&e), "{e:?}");
        let e = b.write(&mut buf, 0, &data).expect_err("a write to a lost device succeeded");
        assert!(lost(&e), "{e:?}");
    }
}
