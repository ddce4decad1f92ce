//! Buffers, allocation, upload and download.
//!
//! A [`CpuBuffer`] is an owned `Vec<u64>` whose bytes are reserved in the backend's
//! [`AllocTracker`] before the vector is allocated and released when the buffer drops, so the
//! counters and fault injection see every CPU allocation exactly as they see a device's.
//! Allocation is fallible: the vector is reserved with [`Vec::try_reserve_exact`], and a refused
//! reservation (or a simulated device limit, see [`crate::CpuBackend::with_memory`]) becomes
//! [`Error::OutOfMemory`] with nothing left reserved.

use std::sync::Arc;

use backend_api::{
    AllocTracker, DeviceBuffer, DeviceInfo, ELEM_BYTES, Error, PendingDownload, Reserved, Result, validate,
};
use rayon::prelude::*;

/// Elements per parallel task when filling or copying large slices (256 KiB of `u64`).
pub(crate) const COPY_CHUNK: usize = 1 << 15;

/// The backend's name, as every error and [`DeviceInfo`] spells it.
pub(crate) const BACKEND: &str = "cpu";

/// An owned host buffer of `u64` elements, accounted in its backend's [`AllocTracker`].
///
/// Dropping it releases its bytes from the tracker. Its contents are ordinary host memory, so
/// [`CpuBuffer::as_slice`] can read them without a download.
#[derive(Debug)]
pub struct CpuBuffer {
    data: Vec<u64>,
    /// The bytes reserved in `tracker` for this buffer (`len * 8`), given back on drop.
    mark: Option<Reserved>,
    tracker: Arc<AllocTracker>,
}

impl CpuBuffer {
    /// The elements.
    pub fn as_slice(&self) -> &[u64] {
        &self.data
    }

    /// The elements, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [u64] {
        &mut self.data
    }
}

impl DeviceBuffer for CpuBuffer {
    fn len(&self) -> usize {
        self.data.len()
    }

    fn tracker(&self) -> &AllocTracker {
        &self.tracker
    }
}

impl Drop for CpuBuffer {
    fn drop(&mut self) {
        if let Some(mark) = self.mark.take() {
            // The mark was reserved in this buffer's own tracker.
            let _ = self.tracker.release(mark);
        }
    }
}

/// Where allocations go: the tracker, and an optional simulated memory size.
#[derive(Debug)]
pub(crate) struct Allocator {
    pub(crate) tracker: Arc<AllocTracker>,
    /// A simulated device size in bytes: allocations that would take the live bytes above it
    /// fail with [`Error::OutOfMemory`]. `None` leaves the limit to the host allocator.
    pub(crate) limit: Option<usize>,
}

impl Allocator {
    /// A buffer holding exactly the items of `fill` (`fill.len()` elements), written in parallel.
    ///
    /// # Errors
    /// [`Error::SizeOverflow`] when the bytes overflow `usize`, [`Error::OutOfMemory`] when the
    /// simulated limit or the host allocator refuses, an injected fault from the tracker; nothing
    /// stays reserved.
    pub(crate) fn buffer_from<I>(&self, fill: I) -> Result<CpuBuffer>
    where
        I: IndexedParallelIterator<Item = u64>,
    {
        let len = fill.len();
        let bytes = validate::alloc_bytes(len)?;
        let reservation = self.reserve_host(bytes)?;
        let mut data = Vec::new();
        if data.try_reserve_exact(len).is_err() {
            reservation.refuse();
            return Err(self.out_of_memory(bytes));
        }
        advise_huge_pages(data.as_ptr(), len * ELEM_BYTES);
        // The capacity is already `len`, so `par_extend` writes in place without reallocating.
        data.par_extend(fill.with_min_len(COPY_CHUNK));
        debug_assert_eq!(data.len(), len);
        // The buffer takes the reservation over: its `Drop` releases the bytes.
        let mark = reservation.keep();
        Ok(CpuBuffer { data, mark, tracker: Arc::clone(&self.tracker) })
    }

    /// Reserves `bytes` in the tracker (and against the simulated limit) for host memory held
    /// outside a buffer, such as the LDE tables; released when the guard drops.
    ///
    /// # Errors
    /// An injected fault, or [`Error::OutOfMemory`] past the simulated limit.
    pub(crate) fn reserve_host(&self, bytes: usize) -> Result<Reservation<'_>> {
        // Past the simulated limit the request is refused before the tracker counts it; the
        // check after the reservation catches a concurrent one that took the room meanwhile.
        let over = |live: usize| self.limit.is_some_and(|limit| live.checked_add(bytes).is_none_or(|l| l > limit));
        // No host gives one allocation larger than its memory; asking would only let an
        // overcommitting kernel promise pages it cannot give.
        if over(self.tracker.counters().live) || bytes > host_total() {
            return Err(self.out_of_memory(bytes));
        }
        let reserved = self.tracker.reserve(bytes)?;
        if let Some(limit) = self.limit
            && self.tracker.counters().live > limit
        {
            self.tracker.refuse(reserved)?;
            return Err(self.out_of_memory(bytes));
        }
        Ok(Reservation { tracker: &self.tracker, bytes: Some(reserved) })
    }

    /// A zero-filled buffer of `len` elements.
    ///
    /// # Errors
    /// As [`Allocator::buffer_from`].
    pub(crate) fn zeroed(&self, len: usize) -> Result<CpuBuffer> {
        self.buffer_from(rayon::iter::repeat_n(0u64, len))
    }

    /// The out-of-memory error for a request of `requested` bytes, with the memory as known now.
    pub(crate) fn out_of_memory(&self, requested: usize) -> Error {
        let (total, free) = self.memory();
        Error::OutOfMemory { backend: BACKEND, requested, free, total }
    }

    /// `(total, free)` bytes: the simulated size minus the live bytes, or the host's
    /// `/proc/meminfo` (`MemTotal`, `MemAvailable`); zeros where neither is known.
    pub(crate) fn memory(&self) -> (usize, usize) {
        match self.limit {
            Some(limit) => (limit, limit.saturating_sub(self.tracker.counters().live)),
            None => backend_api::host_memory().unwrap_or((0, 0)),
        }
    }

    /// The backend's [`DeviceInfo`].
    pub(crate) fn info(&self) -> DeviceInfo {
        let (total_memory, free_memory) = self.memory();
        let threads = rayon::current_num_threads();
        let device = match cpu_name() {
            Some(name) => format!("{name} ({threads} threads)"),
            None => format!("host CPU ({threads} threads)"),
        };
        DeviceInfo { backend: BACKEND, device, total_memory, free_memory }
    }
}

/// Bytes reserved in a tracker until this guard drops.
#[must_use = "the reservation is released when the guard drops"]
pub(crate) struct Reservation<'a> {
    tracker: &'a AllocTracker,
    /// `None` once handed over ([`Reservation::keep`]) or refused.
    bytes: Option<Reserved>,
}

impl Reservation<'_> {
    /// The allocation the bytes were for failed: give them back, and the peak with them.
    pub(crate) fn refuse(mut self) {
        if let Some(r) = self.bytes.take() {
            // The mark was reserved in this guard's own tracker.
            let _ = self.tracker.refuse(r);
        }
    }

    /// The allocation succeeded: its owner takes the mark and gives it back from now on.
    pub(crate) fn keep(mut self) -> Option<Reserved> {
        self.bytes.take()
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if let Some(r) = self.bytes.take() {
            // The mark was reserved in this guard's own tracker.
            let _ = self.tracker.release(r);
        }
    }
}

/// Asks Linux to back the 2 MiB-aligned part of a large, not yet touched allocation with
/// transparent huge pages (where THP is in `madvise` mode it is otherwise off). Strided
/// kernels (the tile transpose, wide NTT stages) then miss the TLB far less, and first touch
/// faults once per 2 MiB instead of once per 4 KiB. Advice only: a refusal changes nothing.
fn advise_huge_pages(ptr: *const u64, bytes: usize) {
    const HUGE: usize = 2 << 20;
    if bytes < 2 * HUGE {
        return;
    }
    let start = (ptr as usize).next_multiple_of(HUGE);
    let end = (ptr as usize + bytes) / HUGE * HUGE;
    #[cfg(target_os = "linux")]
    if end > start {
        // SAFETY: [start, end) lies inside the allocation `ptr` heads (start >= ptr, end <=
        // ptr + bytes, both within the Vec's capacity); MADV_HUGEPAGE changes how the kernel backs
        // those pages, never their contents or validity.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (start, end);
}

/// The host's `MemTotal` in bytes, read once (`usize::MAX` where `/proc/meminfo` does not say).
fn host_total() -> usize {
    backend_api::host_total_memory().unwrap_or(usize::MAX)
}

/// The first `model name` of `/proc/cpuinfo`.
fn cpu_name() -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("model name"))?;
    Some(line.split_once(':')?.1.trim().to_string())
}

/// Copies `src` into `dst` (equal lengths) in parallel chunks.
pub(crate) fn par_copy(dst: &mut [u64], src: &[u64]) {
    debug_assert_eq!(dst.len(), src.len());
    if dst.len() <= COPY_CHUNK {
        dst.copy_from_slice(src);
        return;
    }
    dst.par_chunks_mut(COPY_CHUNK).zip(src.par_chunks(COPY_CHUNK)).for_each(|(d, s)| d.copy_from_slice(s));
}

/// Checks that `[offset, offset + len)` lies inside a buffer of `buf_len` elements.
///
/// # Errors
/// [`Error::OutOfBounds`] naming `what`.
pub(crate) fn check_range(what: &'static str, offset: usize, len: usize, buf_len: usize) -> Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= buf_len => Ok(()),
        end => Err(Error::OutOfBounds { what, start: offset, end: end.unwrap_or(usize::MAX), len: buf_len }),
    }
}

/// A download that already happened: the CPU backend runs every operation to completion before
/// returning, so [`Backend::queue_download`](backend_api::Backend::queue_download) on the CPU
/// copies at once and `wait` only hands the copy over.
#[derive(Debug)]
pub struct CpuDownload {
    pub(crate) data: Vec<u64>,
}

impl PendingDownload for CpuDownload {
    type Host = Vec<u64>;

    fn wait(self) -> Result<Vec<u64>> {
        Ok(self.data)
    }
}

/// A host copy of `src` for [`CpuDownload`]; host memory, so not counted in the tracker.
///
/// # Errors
/// [`Error::OutOfMemory`] when the host cannot hold the copy.
pub(crate) fn host_copy(alloc: &Allocator, src: &[u64]) -> Result<Vec<u64>> {
    let mut out = Vec::new();
    if out.try_reserve_exact(src.len()).is_err() {
        return Err(alloc.out_of_memory(src.len() * ELEM_BYTES));
    }
    out.par_extend(src.par_iter().copied().with_min_len(COPY_CHUNK));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allocator(limit: Option<usize>) -> Allocator {
        Allocator { tracker: Arc::new(AllocTracker::new()), limit }
    }

    #[test]
    fn buffers_reserve_and_release_their_bytes() {
        let a = allocator(None);
        let b = a.zeroed(1000).unwrap();
        assert!(b.as_slice().iter().all(|&x| x == 0));
        let c = a.buffer_from((0..70_000usize).into_par_iter().map(|i| i as u64)).unwrap();
        assert_eq!(c.as_slice(), (0..70_000u64).collect::<Vec<_>>().as_slice());
        assert_eq!(a.tracker.counters().live, 71_000 * 8);
        drop(b);
        assert_eq!(a.tracker.counters().live, 70_000 * 8);
        drop(c);
        let counters = a.tracker.counters();
        assert_eq!((counters.live, counters.peak, counters.allocations), (0, 71_000 * 8, 2));
    }

    #[test]
    fn a_simulated_limit_refuses_and_leaves_nothing_reserved() {
        let a = allocator(Some(1000));
        let kept = a.zeroed(100).unwrap(); // 800 B
        let err = a.zeroed(26).unwrap_err(); // 208 B more: 1008 > 1000
        assert!(
            matches!(err, Error::OutOfMemory { requested: 208, free: 200, total: 1000, .. }),
            "unexpected error: {err}"
        );
        assert_eq!(a.tracker.counters().live, 800);
        a.zeroed(25).unwrap();
        drop(kept);
        assert_eq!(a.tracker.counters().live, 0);
    }

    #[test]
    fn a_host_refusal_is_out_of_memory() {
        let a = allocator(None);
        // 2^60 elements: 2^63 B fits usize but exceeds what a Vec may hold, so the reservation fails.
        let err = a.zeroed(1 << 60).unwrap_err();
        assert!(matches!(err, Error::OutOfMemory { requested, .. } if requested == 1 << 63), "{err}");
        // 2^61 elements: the byte count itself overflows.
        let err = a.zeroed(1 << 61).unwrap_err();
        assert!(matches!(err, Error::SizeOverflow { elems, .. } if elems == 1 << 61), "{err}");
        assert_eq!(a.tracker.counters().live, 0);
    }
}
