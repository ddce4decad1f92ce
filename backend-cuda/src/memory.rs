//! Owned device memory, uploads and downloads.
//!
//! Every allocation is reserved in the device's [`backend_api::AllocTracker`] before
//! `cuMemAllocAsync` and released when the [`CudaBuffer`] is dropped, after `cuMemFreeAsync` is
//! queued on the backend's stream (so a buffer dropped while kernels still use it is freed only
//! once they are done).

use std::sync::Arc;

use backend_api::{DeviceBuffer, ELEM_BYTES, Error, FaultSite, PendingDownload, Result, validate};
use cudarc::driver::result as cu;
use cudarc::driver::sys;

use crate::context::{Device, Event};
use crate::driver::{self, err};

/// An owned device buffer of `u64` elements, freed (stream-ordered) on drop.
pub struct CudaBuffer {
    ptr: sys::CUdeviceptr,
    len: usize,
    device: Arc<Device>,
}

impl std::fmt::Debug for CudaBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaBuffer").field("ptr", &format_args!("{:#x}", self.ptr)).field("len", &self.len).finish()
    }
}

impl DeviceBuffer for CudaBuffer {
    fn len(&self) -> usize {
        self.len
    }
}

impl CudaBuffer {
    /// Allocates `len` elements on `device` (contents unspecified).
    ///
    /// # Errors
    /// [`Error::SizeOverflow`], [`Error::OutOfMemory`] or an injected fault; on error nothing stays
    /// reserved or allocated.
    pub(crate) fn alloc(device: &Arc<Device>, len: usize) -> Result<Self> {
        let bytes = validate::alloc_bytes(len)?;
        device.tracker.reserve(bytes)?;
        let ptr = if bytes == 0 {
            0
        } else {
            let allocated = device.bind().and_then(|()| {
                // SAFETY: the stream is live for the life of `device`; the memory is owned by the
                // buffer returned below, which frees it on drop.
                unsafe { cu::malloc_async(device.stream(), bytes) }.map_err(|e| match e.0 {
                    sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => {
                        let (free, total) = cu::mem_get_info().unwrap_or((0, 0));
                        Error::OutOfMemory { backend: driver::BACKEND, requested: bytes, free, total }
                    }
                    code => driver::error_from("cuMemAllocAsync", code),
                })
            });
            match allocated {
                Ok(p) => p,
                Err(e) => {
                    device.tracker.release(bytes);
                    return Err(e);
                }
            }
        };
        Ok(Self { ptr, len, device: Arc::clone(device) })
    }

    /// The device address of element 0.
    pub(crate) fn ptr(&self) -> sys::CUdeviceptr {
        self.ptr
    }

    /// The device address of element `i` (no bounds check; callers check ranges first).
    pub(crate) fn ptr_at(&self, i: usize) -> sys::CUdeviceptr {
        self.ptr + (i * ELEM_BYTES) as u64
    }

    /// The device this buffer lives on.
    pub(crate) fn device(&self) -> &Arc<Device> {
        &self.device
    }

    /// Size in bytes.
    pub(crate) fn bytes(&self) -> usize {
        self.len * ELEM_BYTES
    }

    /// Whether `self` was allocated on `device`.
    pub(crate) fn belongs_to(&self, device: &Arc<Device>) -> bool {
        Arc::ptr_eq(&self.device, device)
    }
}

impl Drop for CudaBuffer {
    fn drop(&mut self) {
        if self.ptr != 0 && self.device.bind().is_ok() {
            // SAFETY: the pointer came from `cuMemAllocAsync` on this device's stream, and this is
            // its only owner: nothing queued after this point can reference it.
            let _ = unsafe { cu::free_async(self.ptr, self.device.stream()) };
        }
        self.device.tracker.release(self.bytes());
    }
}

/// Allocates a buffer and queues a copy of `host` into it.
///
/// # Errors
/// As [`CudaBuffer::alloc`], or a driver error from the copy (the buffer is then freed).
pub(crate) fn upload(device: &Arc<Device>, host: &[u64]) -> Result<CudaBuffer> {
    let buf = CudaBuffer::alloc(device, host.len())?;
    write(&buf, 0, host)?;
    Ok(buf)
}

/// Queues a copy of `host` to elements `[offset, offset + host.len())` of `buf`. The host slice
/// may be reused when this returns: a large one is copied through the device's page-locked
/// staging ring (at bus speed, the host copy overlapped with the transfer), a small one is staged
/// by the driver before it returns.
///
/// # Errors
/// [`Error::OutOfBounds`], or a driver error.
pub(crate) fn write(buf: &CudaBuffer, offset: usize, host: &[u64]) -> Result<()> {
    check_range("upload", buf, offset, host.len())?;
    if host.is_empty() {
        return Ok(());
    }
    let dev = &buf.device;
    dev.bind()?;
    let dst = buf.ptr_at(offset);
    // SAFETY: the range is inside `buf` (checked above), which outlives the queued copies (its
    // free is queued behind them on the same stream).
    let staged =
        dev.staging.with_ring(std::mem::size_of_val(host), |ring| unsafe { ring.upload(dst, host, dev.stream()) })?;
    if staged {
        return Ok(());
    }
    // SAFETY: the range is inside `buf` (checked above); `host` is pageable memory, which the
    // driver copies to staging memory before returning.
    unsafe { cu::memcpy_htod_async(dst, host, dev.stream()) }.map_err(err("cuMemcpyHtoDAsync"))
}

/// Copies elements `[offset, offset + out.len())` of `buf` to `out` after all queued work; a
/// large range goes through the page-locked staging ring.
///
/// # Errors
/// [`Error::OutOfBounds`], or a device error from this or earlier work.
pub(crate) fn download(buf: &CudaBuffer, offset: usize, out: &mut [u64]) -> Result<()> {
    validate::download(buf.len, offset, out.len())?;
    let dev = &buf.device;
    dev.bind()?;
    if out.is_empty() {
        return dev.synchronize();
    }
    let src = buf.ptr_at(offset);
    let bytes = std::mem::size_of_val(out);
    // SAFETY: the range is inside `buf`, which the caller holds for the call.
    if dev.staging.with_ring(bytes, |ring| unsafe { ring.download(out, src, dev.stream()) })? {
        return Ok(());
    }
    // SAFETY: the range is inside `buf`; `out` is writable, and the stream is synchronised
    // below before `out` is released to the caller.
    unsafe { cu::memcpy_dtoh_async(out, src, dev.stream()) }.map_err(err("cuMemcpyDtoHAsync"))?;
    dev.synchronize()
}

fn check_range(what: &'static str, buf: &CudaBuffer, offset: usize, len: usize) -> Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= buf.len => Ok(()),
        end => Err(Error::OutOfBounds { what, start: offset, end: end.unwrap_or(usize::MAX), len: buf.len }),
    }
}

/// A device-to-host copy of a whole buffer, queued into page-locked host memory behind the work
/// already issued.
///
/// The host vector is never released (returned, dropped or unregistered) while a queued copy may
/// still write into it: `wait` and `drop` first wait for the completion event, or, when
/// there is none or waiting on it failed, for the whole stream; when neither wait succeeds the
/// memory is leaked rather than freed under the copy.
pub struct CudaDownload {
    host: Vec<u64>,
    /// Whether a copy into `host` may have been queued (set before the copy call, so a failed call
    /// counts as queued).
    copy_queued: bool,
    /// Recorded after the copy; `None` before it is recorded, or when recording failed.
    event: Option<Event>,
    registered: bool,
    device: Arc<Device>,
}

impl std::fmt::Debug for CudaDownload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaDownload").field("len", &self.host.len()).field("pending", &self.copy_queued).finish()
    }
}

/// Queues a copy of all of `buf` to the host and returns without waiting for it.
///
/// The host vector is page-locked for the copy; when page-locking fails (a host limit) the copy
/// is made synchronously instead, with the same result.
///
/// # Errors
/// A driver error from queueing the copy or recording its completion (or the one injected at
/// [`FaultSite::DownloadQueued`]); the call then returns only once no copy into the host memory
/// is pending.
pub(crate) fn queue_download(buf: &CudaBuffer) -> Result<CudaDownload> {
    let device = Arc::clone(&buf.device);
    device.bind()?;
    let mut host = vec![0u64; buf.len];
    if host.is_empty() {
        return Ok(CudaDownload { host, copy_queued: false, event: None, registered: false, device });
    }
    let bytes = buf.bytes();
    // SAFETY: `host` is a live allocation of `bytes` bytes, kept (and not moved: only the Vec
    // header moves) until it is unregistered in `finish`.
    let registered = unsafe { driver::host_register(host.as_mut_ptr().cast(), bytes) }.is_ok();
    if !registered {
        download(buf, 0, &mut host)?;
        return Ok(CudaDownload { host, copy_queued: false, event: None, registered: false, device });
    }
    // From here `pending` owns the registration: every return path, error or not, goes through
    // its `finish` (explicitly or on drop), which waits for a queued copy before releasing.
    let mut pending = CudaDownload { host, copy_queued: false, event: None, registered: true, device };
    // Created before the copy is queued, so that failing to create it leaves nothing in flight.
    let event = Event::new(&pending.device)?;
    pending.copy_queued = true;
    // SAFETY: the host memory is page-locked and owned by `pending`, which waits for the copy
    // before it releases or unregisters the memory (see `finish`); the source is the whole of
    // `buf`, exactly as long.
    let queued = unsafe { cu::memcpy_dtoh_async(&mut pending.host, buf.ptr(), pending.device.stream()) }
        .map_err(err("cuMemcpyDtoHAsync"));
    let recorded = queued.and_then(|()| {
        if pending.device.tracker.site_fails(FaultSite::DownloadQueued) {
            return Err(driver::error_from("cuEventRecord (injected fault)", sys::CUresult::CUDA_ERROR_INVALID_HANDLE));
        }
        event.record()
    });
    match recorded {
        Ok(()) => {
            pending.event = Some(event);
            Ok(pending)
        }
        Err(e) => {
            drop(event);
            // Waits for the stream (the copy may be queued) before the memory is released.
            let _ = pending.finish();
            Err(e)
        }
    }
}

impl CudaDownload {
    /// Waits for the copy (if any) and unregisters the host memory; idempotent.
    ///
    /// # Errors
    /// The device error of the copy or of the work before it. When the copy's completion cannot be
    /// confirmed at all (neither the event nor the stream synchronises), the host memory is
    /// leaked, never freed while the copy may still write into it.
    fn finish(&mut self) -> Result<()> {
        let mut settled = !self.copy_queued;
        let mut result = self.device.bind();
        if result.is_ok() {
            if let Some(e) = self.event.take() {
                result = e.synchronize();
                settled = result.is_ok();
            }
            if !settled {
                // No event, or waiting on it failed: the copy may still be in flight, so wait for
                // everything queued on the stream before the memory is released.
                let synced = self.device.synchronize();
                settled = synced.is_ok();
                if result.is_ok() {
                    result = synced;
                }
            }
        }
        self.copy_queued = false;
        if !settled {
            // The device cannot say the DMA engine is done with this memory: leak it (and its
            // registration) rather than free it under the copy.
            std::mem::forget(std::mem::take(&mut self.host));
            self.registered = false;
            return result;
        }
        if self.registered {
            self.registered = false;
            // SAFETY: no copy into this memory is pending (the event or the stream completed).
            let _ = unsafe { driver::host_unregister(self.host.as_mut_ptr().cast()) };
        }
        result
    }
}

impl PendingDownload for CudaDownload {
    fn wait(mut self) -> Result<Vec<u64>> {
        self.finish()?;
        Ok(std::mem::take(&mut self.host))
    }
}

impl Drop for CudaDownload {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}
