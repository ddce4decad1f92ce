//! Owned device memory, uploads and downloads.
//!
//! Every allocation is reserved in the device's [`backend_api::AllocTracker`] before
//! `cuMemAllocAsync` and released when the [`CudaBuffer`] is dropped, after `cuMemFreeAsync` is
//! queued on the backend's stream (so a buffer dropped while kernels still use it is freed only
//! once they are done).
//!
//! **Readers on the download stream.** A queued host copy of a buffer ([`queue_download`], and
//! the LDE's column groups in `lde/upload.rs`) runs on the download stream, so that the kernels
//! queued after it on the compute stream (the leaves, which only read) run beside it. The buffer
//! keeps the copy's completion as a *reader*; everything that writes or frees the buffer calls
//! [`CudaBuffer::settle_readers`] first, which makes the compute stream wait for its readers.

use std::sync::{Arc, Mutex, PoisonError};

use backend_api::{
    AllocTracker, DeviceBuffer, ELEM_BYTES, Error, FaultSite, PendingDownload, Reserved, Result, validate,
};
use cudarc::driver::result as cu;
use cudarc::driver::sys;

use crate::context::{Device, Event, Lane};
use crate::driver::{self, err};
use crate::host::{self, Lock, PinnedHost};

/// An owned device buffer of `u64` elements, freed (stream-ordered) on drop.
pub struct CudaBuffer {
    ptr: sys::CUdeviceptr,
    len: usize,
    device: Arc<Device>,
    /// The buffer's bytes in the device's tracker, given back on drop.
    mark: Option<Reserved>,
    /// Copies on the download stream that read this buffer, each as the event recorded behind it:
    /// work that writes or frees the buffer waits for them ([`CudaBuffer::settle_readers`]).
    readers: Mutex<Vec<Event>>,
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

    fn tracker(&self) -> &AllocTracker {
        &self.device.tracker
    }
}

impl CudaBuffer {
    /// Allocates `len` elements on `device` (contents unspecified).
    ///
    /// # Errors
    /// [`Error::SizeOverflow`], [`Error::OutOfMemory`] or an injected fault; on error nothing stays
    /// reserved or allocated.
    pub(crate) fn alloc(device: &Arc<Device>, len: usize) -> Result<Self> {
        Self::alloc_from(device, len, None)
    }

    /// [`CudaBuffer::alloc`] from the memory pool `pool` (`None`: the device's default pool).
    ///
    /// # Errors
    /// As [`CudaBuffer::alloc`].
    pub(crate) fn alloc_from(device: &Arc<Device>, len: usize, pool: Option<sys::CUmemoryPool>) -> Result<Self> {
        let bytes = validate::alloc_bytes(len)?;
        // More than the device has is refused at once, before the tracker counts it: the driver
        // would refuse it too, but a size near 2^64 is not always reported as out of memory.
        if bytes > device.total_memory {
            let (free, total) =
                device.bind().ok().and_then(|()| cu::mem_get_info().ok()).unwrap_or((0, device.total_memory));
            return Err(Error::OutOfMemory { backend: driver::BACKEND, requested: bytes, free, total });
        }
        let reserved = device.tracker.reserve(bytes)?;
        let ptr = if bytes == 0 {
            0
        } else {
            let allocated = device.bind().and_then(|()| {
                // SAFETY: the stream is live for the life of `device`; the memory is owned by the
                // buffer returned below, which frees it on drop.
                let malloc = || unsafe {
                    match pool {
                        None => cu::malloc_async(device.stream(), bytes),
                        Some(pool) => cu::mem_pool::alloc_async(pool, bytes, device.stream()),
                    }
                };
                // Out of memory: the LDE tables the device keeps (lde.rs) go first, then one retry
                // (stream-ordered: the freed block is reusable by the next allocation at once).
                malloc()
                    .or_else(|e| match e.0 {
                        sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY if device.release_lde_tables() => malloc(),
                        _ => Err(e),
                    })
                    .map_err(|e| match e.0 {
                        sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => {
                            let (free, total) = cu::mem_get_info().unwrap_or((0, 0));
                            Error::OutOfMemory { backend: driver::BACKEND, requested: bytes, free, total }
                        }
                        code => driver::error_from(
                            if pool.is_some() { "cuMemAllocFromPoolAsync" } else { "cuMemAllocAsync" },
                            code,
                        ),
                    })
            });
            match allocated {
                Ok(p) => p,
                Err(e) => {
                    device.tracker.refuse(reserved)?;
                    return Err(e);
                }
            }
        };
        Ok(Self { ptr, len, device: Arc::clone(device), mark: Some(reserved), readers: Mutex::default() })
    }

    /// Gives up the allocation without freeing it: the tracker no longer counts its bytes, and
    /// the caller owns the returned `(pointer, elements)` (lde.rs keeps its tables this way).
    /// The new owner's work is queued on the compute stream, behind the buffer's readers.
    ///
    /// # Errors
    /// A driver error ordering the compute stream behind the buffer's readers; the buffer is then
    /// dropped (which waits for them on the host before freeing it).
    pub(crate) fn into_raw(self) -> Result<(sys::CUdeviceptr, usize)> {
        self.settle_readers()?;
        let mut this = std::mem::ManuallyDrop::new(self);
        if let Some(mark) = this.mark.take() {
            // The mark was reserved in this buffer's own tracker.
            let _ = this.device.tracker.release(mark);
        }
        // SAFETY: `this` is never used or dropped again; its Arc and its (empty) reader list are
        // moved out once each (its mark, the other field that owns anything, was taken above).
        drop(unsafe { std::ptr::read(&this.device) });
        // SAFETY: as above.
        drop(unsafe { std::ptr::read(&this.readers) });
        Ok((this.ptr, this.len))
    }

    /// Keeps `copy`, an event recorded on the download stream behind a copy that reads this
    /// buffer, until work that writes or frees the buffer is queued
    /// ([`CudaBuffer::settle_readers`]).
    pub(crate) fn add_reader(&self, copy: Event) {
        self.readers.lock().unwrap_or_else(PoisonError::into_inner).push(copy);
    }

    /// Whether a copy on the download stream may still read this buffer.
    pub(crate) fn has_readers(&self) -> bool {
        !self.readers.lock().unwrap_or_else(PoisonError::into_inner).is_empty()
    }

    /// Makes the work queued on the compute stream from now on wait for every copy reading this
    /// buffer (the host does not wait). Every entry point that writes the buffer, or gives its
    /// memory to anything else, calls this first.
    ///
    /// # Errors
    /// A driver error queueing a wait: the readers not yet waited for are kept, and the caller
    /// must not write the buffer.
    pub(crate) fn settle_readers(&self) -> Result<()> {
        let mut readers = self.readers.lock().unwrap_or_else(PoisonError::into_inner);
        while let Some(copy) = readers.last() {
            copy.wait_on(Lane::Compute)?;
            readers.pop();
        }
        Ok(())
    }

    /// Takes back an allocation [`CudaBuffer::into_raw`] gave up, counting its bytes again.
    ///
    /// # Errors
    /// The tracker's refusal (an injected fault): the allocation is then freed.
    ///
    /// # Safety
    /// `ptr` must be a live stream-ordered allocation of `len` elements on `device`'s stream (the
    /// default pool or another) that nothing else owns.
    pub(crate) unsafe fn from_raw(device: &Arc<Device>, ptr: sys::CUdeviceptr, len: usize) -> Result<Self> {
        let mark = match device.tracker.reserve(len * ELEM_BYTES) {
            Ok(mark) => mark,
            Err(e) => {
                if ptr != 0 && device.bind().is_ok() {
                    // SAFETY: the caller's contract: an allocation on this stream that only we own.
                    let _ = unsafe { cu::free_async(ptr, device.stream()) };
                }
                return Err(e);
            }
        };
        Ok(Self { ptr, len, device: Arc::clone(device), mark: Some(mark), readers: Mutex::default() })
    }

    /// The device address of element 0.
    pub(crate) fn ptr(&self) -> sys::CUdeviceptr {
        self.ptr
    }

    /// The device address of element `i` (no bounds check; callers check ranges first).
    ///
    /// # Panics
    /// When `i` is past the buffer's end: every offset is validated before any address is made
    /// from it (the front of `Backend` checks every range), so this is a bug in this crate, and a
    /// panic is the answer that never launches a kernel at another buffer's address.
    pub(crate) fn ptr_at(&self, i: usize) -> sys::CUdeviceptr {
        assert!(i <= self.len, "element {i} is past the end of a buffer of {} elements", self.len);
        // `i * 8 <= len * 8`, the allocation's size, which fits usize.
        self.ptr + (i * ELEM_BYTES) as u64
    }

    /// The device this buffer lives on.
    pub(crate) fn device(&self) -> &Arc<Device> {
        &self.device
    }
}

impl Drop for CudaBuffer {
    fn drop(&mut self) {
        // The free is queued on the compute stream: behind the copies reading the buffer, or, when
        // that wait cannot be queued, once they are seen done on the host. A copy whose end cannot
        // be confirmed keeps the memory allocated (leaked) rather than handing it to the next
        // allocation under the copy.
        let readers_done = self.settle_readers().is_ok() || {
            let readers = std::mem::take(&mut *self.readers.lock().unwrap_or_else(PoisonError::into_inner));
            readers.iter().all(|copy| copy.synchronize().is_ok())
        };
        if self.ptr != 0 && readers_done && self.device.bind().is_ok() {
            // SAFETY: the pointer came from `cuMemAllocAsync` on this device's stream, and this is
            // its only owner: nothing queued after this point can reference it.
            let _ = unsafe { cu::free_async(self.ptr, self.device.stream()) };
        }
        if let Some(mark) = self.mark.take() {
            // The mark was reserved in this buffer's own tracker.
            let _ = self.device.tracker.release(mark);
        }
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
/// may be reused when this returns: a slice inside page-locked memory ([`crate::PinnedHost`]) is
/// copied directly by the copy engine, and the call returns once that copy has completed; a large
/// pageable one is copied through the device's page-locked staging ring (at bus speed, the host
/// copy overlapped with the transfer); a small one is staged by the driver before it returns.
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
    buf.settle_readers()?;
    let dst = buf.ptr_at(offset);
    if host::is_page_locked(host) {
        let done = Event::new(dev)?;
        // SAFETY: the range is inside `buf` (checked above); `host` is page-locked, and the copy
        // has completed before this returns (the event below, or the stream on error), so the
        // caller's borrow covers it.
        let queued = unsafe { cu::memcpy_htod_async(dst, host, dev.stream()) }.map_err(err("cuMemcpyHtoDAsync"));
        return finish_direct(dev, queued, &done);
    }
    // SAFETY: the range is inside `buf` (checked above), which outlives the queued copies (its
    // free is queued behind them on the same stream).
    let staged = dev
        .staging
        .with_ring(&dev.tracker, std::mem::size_of_val(host), |ring| unsafe { ring.upload(dst, host, dev.stream()) })?;
    if staged {
        return Ok(());
    }
    // SAFETY: the range is inside `buf` (checked above); `host` is pageable memory, which the
    // driver copies to staging memory before returning.
    unsafe { cu::memcpy_htod_async(dst, host, dev.stream()) }.map_err(err("cuMemcpyHtoDAsync"))
}

/// Waits for a direct copy between device memory and page-locked host memory: the event recorded
/// behind it, or, when queueing or recording failed, the whole stream (the copy may be queued), so
/// that the host memory is never released to the caller while the copy engine still uses it.
fn finish_direct(dev: &Device, queued: Result<()>, done: &Event) -> Result<()> {
    match queued.and_then(|()| done.record()).and_then(|()| done.synchronize()) {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = dev.synchronize();
            Err(e)
        }
    }
}

/// Copies elements `[offset, offset + out.len())` of `buf` to `out` after all queued work: directly
/// when `out` lies in page-locked memory, through the page-locked staging ring when it is a large
/// pageable range.
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
    if host::is_page_locked(out) {
        let done = Event::new(dev)?;
        // SAFETY: the range is inside `buf`; `out` is page-locked and exclusively borrowed, and
        // the copy has completed before this returns (`finish_direct`).
        let queued = unsafe { cu::memcpy_dtoh_async(out, src, dev.stream()) }.map_err(err("cuMemcpyDtoHAsync"));
        return finish_direct(dev, queued, &done);
    }
    let bytes = std::mem::size_of_val(out);
    // SAFETY: the range is inside `buf`, which the caller holds for the call.
    if dev.staging.with_ring(&dev.tracker, bytes, |ring| unsafe { ring.download(out, src, dev.stream()) })? {
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

/// A device-to-host copy of a whole buffer, queued into a page-locked [`PinnedHost`] from the
/// device's pool on the download stream (`Lane::Download`) behind the work already issued on
/// the buffer; [`PendingDownload::wait`] returns that buffer.
///
/// The host buffer is never released (returned, dropped or given back to the pool) while a queued
/// copy may still write into it: `wait` and `drop` first wait for the completion event, or, when
/// there is none or waiting on it failed, for the whole download stream; when neither wait
/// succeeds the memory is leaked rather than reused under the copy.
pub struct CudaDownload {
    /// `None` once returned by `wait`.
    host: Option<PinnedHost>,
    /// Whether a copy into `host` may have been queued (set before the copy call, so a failed call
    /// counts as queued).
    copy_queued: bool,
    /// Recorded after the copy; `None` before it is recorded, or when recording failed.
    event: Option<Event>,
    device: Arc<Device>,
}

impl std::fmt::Debug for CudaDownload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaDownload")
            .field("len", &self.host.as_ref().map_or(0, |h| h.len()))
            .field("pending", &self.copy_queued)
            .finish()
    }
}

/// Queues a copy of all of `buf` to the host and returns without waiting for it.
///
/// The destination is a page-locked block of the device's host pool (reused from an earlier
/// download or host buffer when one fits, so a warm loop page-locks nothing new). The copy runs on
/// the download stream once the work queued on the compute stream so far is done, so the kernels
/// queued after it run beside it; the buffer keeps the copy as a reader, which work that writes or
/// frees it waits for ([`CudaBuffer::settle_readers`]). When the host refuses to lock memory, the
/// block is pageable (warned about once) and the copy is made through the staging ring before this
/// returns, with the same result.
///
/// # Errors
/// [`Error::HostOutOfMemory`] when the host cannot give the memory at all; a driver error from
/// queueing the copy or recording its completion (or the one injected at
/// [`FaultSite::DownloadQueued`]); the call then returns only once no copy into the host memory is
/// pending, and the memory is back in the pool.
pub(crate) fn queue_download(buf: &CudaBuffer) -> Result<CudaDownload> {
    let device = Arc::clone(&buf.device);
    device.bind()?;
    let mut host = PinnedHost::take(&device, buf.len, Lock::Preferred, false)?;
    if host.is_empty() || !host.is_page_locked() {
        download(buf, 0, &mut host)?;
        return Ok(CudaDownload::new(&device, host));
    }
    let mut pending = CudaDownload::new(&device, host);
    // The copy reads the buffer as the work queued on the compute stream so far leaves it.
    let ready = Event::new(&device)?;
    ready.record_on(Lane::Compute)?;
    ready.wait_on(Lane::Download)?;
    // SAFETY: the destination is the whole page-locked host buffer, as long as `buf`, owned by
    // `pending` until the copy is done (`finish`); the source is the whole of `buf`, which keeps
    // the copy as a reader (`complete`), or, on error, is read no more once `pending`'s drop has
    // waited for the download stream.
    unsafe {
        pending.queue(|dst, stream| {
            let dst = std::slice::from_raw_parts_mut(dst, buf.len);
            cu::memcpy_dtoh_async(dst, buf.ptr(), stream).map_err(err("cuMemcpyDtoHAsync"))
        })
    }?;
    pending.complete(buf)?;
    Ok(pending)
}

impl CudaDownload {
    /// A download into `host`, memory of `device`, with nothing queued yet: [`CudaDownload::queue`]
    /// then copies into it (page-locked memory), or it was already filled by a synchronous copy
    /// (pageable memory), and the download is complete as it is.
    pub(crate) fn new(device: &Arc<Device>, host: PinnedHost) -> Self {
        Self { host: Some(host), copy_queued: false, event: None, device: Arc::clone(device) }
    }

    /// Queues one copy into the host buffer on the download stream: `copy` gets the host buffer's
    /// first element and the stream. The download counts as queued before `copy` runs, so that a
    /// failed call is waited for too.
    ///
    /// # Safety
    /// `copy` writes only inside the host buffer, and reads device memory that stays allocated and
    /// unwritten until the download stream has passed the copy (the source buffer holds the
    /// download as a reader once [`CudaDownload::complete`] has run, and every error path waits
    /// for the stream through `finish`).
    pub(crate) unsafe fn queue(&mut self, copy: impl FnOnce(*mut u64, sys::CUstream) -> Result<()>) -> Result<()> {
        let dst = self.host.as_mut().expect("a pending download holds its buffer").as_mut_ptr();
        self.copy_queued = true;
        copy(dst, self.device.lane(Lane::Download))
    }

    /// Records the end of the copies queued so far: the download's completion, and a reader of
    /// `source`, the buffer they read, which work that writes or frees it then waits for.
    ///
    /// # Errors
    /// A driver error recording either event (or the one injected at
    /// [`FaultSite::DownloadQueued`]); the caller returns it, and dropping the download waits for
    /// the whole download stream first.
    pub(crate) fn complete(&mut self, source: &CudaBuffer) -> Result<()> {
        let (done, read) = (Event::new(&self.device)?, Event::new(&self.device)?);
        if self.device.tracker.site_fails(FaultSite::DownloadQueued) {
            return Err(driver::error_from("cuEventRecord (injected fault)", sys::CUresult::CUDA_ERROR_INVALID_HANDLE));
        }
        done.record_on(Lane::Download)?;
        read.record_on(Lane::Download)?;
        source.add_reader(read);
        self.event = Some(done);
        Ok(())
    }

    /// Waits for the copies (if any); idempotent.
    ///
    /// # Errors
    /// The device error of the copies or of the work before them. When their completion cannot be
    /// confirmed at all (neither the event nor the download stream synchronises), the host memory
    /// is leaked, never reused while a copy may still write into it.
    fn finish(&mut self) -> Result<()> {
        let mut settled = !self.copy_queued;
        let mut result = self.device.bind();
        if result.is_ok() {
            if let Some(e) = self.event.take() {
                result = e.synchronize();
                settled = result.is_ok();
            }
            if !settled {
                // No event, or waiting on it failed: a copy may still be in flight, so wait for
                // everything queued on the download stream before the memory is released.
                let synced = self.device.synchronize_lane(Lane::Download);
                settled = synced.is_ok();
                if result.is_ok() {
                    result = synced;
                }
            }
        }
        self.copy_queued = false;
        if !settled {
            // The device cannot say the DMA engine is done with this memory: leak it rather than
            // give it back to the pool under the copy.
            if let Some(h) = self.host.take() {
                h.leak();
            }
        }
        result
    }
}

impl PendingDownload for CudaDownload {
    type Host = PinnedHost;

    fn wait(mut self) -> Result<PinnedHost> {
        self.finish()?;
        Ok(self.host.take().expect("a download returns its buffer once"))
    }
}

impl Drop for CudaDownload {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}
