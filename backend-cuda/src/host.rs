//! Page-locked host memory: the blocks, the device's reusable pool, and the registry that tells a
//! transfer whether its host side is page-locked.
//!
//! - **Allocation at page-fault speed, not the driver's.** `cuMemHostAlloc` of 5.3 GB took 2.3 s
//!   on an H200 host (the driver faults and locks 4 KiB pages one by one), while
//!   `cuMemHostRegister` of memory already touched took 225 ms. So a block is ordinary memory
//!   aligned to a transparent huge page (2 MiB, `madvise(MADV_HUGEPAGE)` on Linux), first touched
//!   (zeroed) on every core, then registered `PORTABLE` (page-locked for every context).
//! - **Reused, not freed.** A dropped [`PinnedHost`] gives its block back to its device's
//!   [`HostPool`], which keeps up to [`POOL_KEEP`] blocks; an allocation takes the smallest pooled
//!   block that fits (at most twice the request) before it makes a new one, and frees the pooled
//!   blocks that do not fit first, so the pool never holds more than what was last in use.
//!   [`crate::CudaBackend::trim_host_pool`] frees them all.
//! - **Recognised.** Every registered block is in a process-wide registry of address ranges, so
//!   an upload or download whose host slice lies inside one is a direct copy, whatever type the
//!   slice came from ([`is_page_locked`]).
//! - **Refused cleanly.** A request larger than the memory the host has available is a typed
//!   [`Error::HostOutOfMemory`] before anything is touched; a registration the driver refuses (a
//!   locked-memory limit, or [`FaultSite::PinnedHostAlloc`] injected) frees the block and is a
//!   typed error, or, where the caller accepts it, a pageable block with one warning per device.

use std::collections::BTreeMap;
use std::mem::MaybeUninit;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use backend_api::{AllocTracker, ELEM_BYTES, Error, FaultSite, Result};
use cudarc::driver::result as cu;
use cudarc::driver::sys;
use rayon::prelude::*;

use crate::context::Device;
use crate::driver::{self, err};

/// Alignment and size granularity of a block: one transparent huge page.
pub(crate) const BLOCK_ALIGN: usize = 2 << 20;
/// Pooled blocks a device keeps when nothing uses them.
pub(crate) const POOL_KEEP: usize = 4;
/// Elements each rayon task touches or copies.
const GRAIN: usize = 1 << 16;

/// Page-locked host bytes of this process not yet freed: staging rings, and blocks in use or
/// pooled.
static PINNED_LIVE: AtomicUsize = AtomicUsize::new(0);

/// Page-locked host bytes this process holds now.
pub(crate) fn pinned_host_bytes() -> usize {
    PINNED_LIVE.load(Ordering::Relaxed)
}

/// Counts `bytes` page-locked bytes allocated (`true`) or freed (`false`) process-wide.
pub(crate) fn count_pinned(bytes: usize, allocated: bool) {
    if allocated {
        PINNED_LIVE.fetch_add(bytes, Ordering::Relaxed);
    } else {
        PINNED_LIVE.fetch_sub(bytes, Ordering::Relaxed);
    }
}

/// `[start, end)` address ranges of the registered blocks, keyed by start.
static REGISTERED: Mutex<BTreeMap<usize, usize>> = Mutex::new(BTreeMap::new());

fn registry() -> std::sync::MutexGuard<'static, BTreeMap<usize, usize>> {
    REGISTERED.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether all of `host` lies inside one page-locked block of this process, so that the copy
/// engine may read or write it directly.
pub(crate) fn is_page_locked(host: &[u64]) -> bool {
    let start = host.as_ptr() as usize;
    let Some(end) = start.checked_add(std::mem::size_of_val(host)) else { return false };
    registry().range(..=start).next_back().is_some_and(|(_, &block_end)| end <= block_end)
}

/// Bytes the host can still give, where it says (Linux: `MemAvailable`); `None` elsewhere.
fn host_available() -> Option<usize> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// The refusal of a request of `bytes` bytes of page-locked host memory.
fn refusal(bytes: usize, reason: impl Into<String>) -> Error {
    Error::HostOutOfMemory {
        backend: driver::BACKEND,
        requested: bytes,
        available: host_available(),
        reason: reason.into(),
    }
}

/// Whether a block must be page-locked, or may fall back to pageable memory with a warning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lock {
    /// A refused registration is an error.
    Required,
    /// A refused registration gives a pageable block, warned about once per device.
    Preferred,
}

/// One host allocation of `bytes` bytes, page-locked when `locked`. Freed only by
/// [`Block::free`]: a block that is dropped instead is leaked, which is what a copy that may still
/// be running needs.
pub(crate) struct Block {
    ptr: NonNull<u64>,
    bytes: usize,
    locked: bool,
}

// SAFETY: the block is plain owned memory; its registration is a process-wide driver state.
unsafe impl Send for Block {}

impl Block {
    /// Allocates at least `bytes` bytes (a multiple of [`BLOCK_ALIGN`]), zeroed on every core,
    /// and page-locks them. The device's context must be current.
    ///
    /// # Errors
    /// [`Error::HostOutOfMemory`] when the host cannot give the memory, or when it cannot lock it
    /// and `lock` is [`Lock::Required`]; nothing stays allocated.
    fn alloc(device: &Device, bytes: usize, lock: Lock) -> Result<Self> {
        let mut block = Self::allocate(bytes)?;
        let registered = if device.tracker.site_fails(FaultSite::PinnedHostAlloc) {
            Err(driver::error_from("cuMemHostRegister (injected fault)", sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY))
        } else {
            block.register()
        };
        match registered {
            Ok(()) => {
                device.tracker.pinned_host_allocated(block.bytes);
                Ok(block)
            }
            Err(e) if lock == Lock::Preferred => {
                if !device.host_pool.warned.swap(true, Ordering::Relaxed) {
                    eprintln!(
                        "warning: cuda: host memory could not be page-locked ({e}); host buffers use pageable \
                         memory, copied at a fraction of the bus speed"
                    );
                }
                Ok(block)
            }
            Err(e) => {
                block.free(None);
                Err(refusal(bytes, format!("the driver would not page-lock it: {e}")))
            }
        }
    }

    /// A page-locked block of at least `bytes` bytes for the staging ring, counted process-wide
    /// but in no tracker (the ring counts its own bytes). The context must be current.
    ///
    /// # Errors
    /// As [`Block::alloc`] with [`Lock::Required`].
    pub(crate) fn locked(bytes: usize) -> Result<Self> {
        let mut block = Self::allocate(bytes)?;
        match block.register() {
            Ok(()) => Ok(block),
            Err(e) => {
                block.free(None);
                Err(refusal(bytes, format!("the driver would not page-lock it: {e}")))
            }
        }
    }

    /// At least `bytes` bytes (a multiple of [`BLOCK_ALIGN`]) of ordinary memory aligned to it,
    /// zeroed on every core, not locked yet.
    fn allocate(bytes: usize) -> Result<Self> {
        let size = bytes.checked_next_multiple_of(BLOCK_ALIGN).ok_or_else(|| refusal(bytes, "the size overflows"))?;
        if let Some(avail) = host_available().filter(|&a| size > a) {
            return Err(refusal(bytes, format!("the host has {avail} B available")));
        }
        let layout = std::alloc::Layout::from_size_align(size, BLOCK_ALIGN)
            .map_err(|e| refusal(bytes, format!("no layout for the block: {e}")))?;
        // SAFETY: `layout` has a non-zero size (`bytes > 0` is the callers' contract, and `size`
        // is a multiple of the alignment at least as large).
        let raw = unsafe { std::alloc::alloc(layout) };
        let Some(ptr) = NonNull::new(raw.cast::<u64>()) else {
            return Err(refusal(bytes, "the allocator refused"));
        };
        let block = Self { ptr, bytes: size, locked: false };
        block.advise_huge_pages();
        // First touch on every core, so that the pages exist before the driver locks them.
        // SAFETY: `size` bytes were just allocated at `ptr`, aligned for u64, and are not shared.
        let all = unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr().cast::<MaybeUninit<u64>>(), size / ELEM_BYTES) };
        all.par_chunks_mut(GRAIN).for_each(|c| c.fill(MaybeUninit::new(0)));
        Ok(block)
    }

    /// Page-locks the block for every context and records it (registry, process-wide count).
    /// The context must be current.
    ///
    /// # Errors
    /// The driver's refusal; the block is then unchanged (pageable).
    fn register(&mut self) -> Result<()> {
        let (start, size) = (self.ptr.as_ptr() as usize, self.bytes);
        // SAFETY: `size` bytes of live memory owned by `self`, registered until `free`.
        unsafe { driver::host_register(self.ptr.as_ptr().cast(), size) }?;
        self.locked = true;
        registry().insert(start, start + size);
        count_pinned(size, true);
        Ok(())
    }

    /// The first element.
    pub(crate) fn as_ptr(&self) -> *mut u64 {
        self.ptr.as_ptr()
    }

    #[cfg(target_os = "linux")]
    fn advise_huge_pages(&self) {
        // SAFETY: the range is one live allocation aligned to 2 MiB; the advice only changes how
        // the kernel backs it.
        let _ = unsafe { libc::madvise(self.ptr.as_ptr().cast(), self.bytes, libc::MADV_HUGEPAGE) };
    }

    #[cfg(not(target_os = "linux"))]
    fn advise_huge_pages(&self) {}

    /// Unregisters (when locked) and frees the block, releasing its page-locked bytes in
    /// `tracker` when it counted them. No copy may use it any more; the device's context must be
    /// current for the unregistration.
    pub(crate) fn free(self, tracker: Option<&AllocTracker>) {
        if self.locked {
            registry().remove(&(self.ptr.as_ptr() as usize));
            // SAFETY: registered in `register`; no copy uses it (the caller's contract).
            let _ = unsafe { driver::host_unregister(self.ptr.as_ptr().cast()) };
            count_pinned(self.bytes, false);
            if let Some(t) = tracker {
                t.pinned_host_freed(self.bytes);
            }
        }
        let layout = std::alloc::Layout::from_size_align(self.bytes, BLOCK_ALIGN).expect("made in alloc");
        // SAFETY: allocated in `alloc` with this layout, freed once (`self` is consumed).
        unsafe { std::alloc::dealloc(self.ptr.as_ptr().cast(), layout) };
    }
}

/// The page-locked blocks of one device that nothing uses now, kept for the next allocation.
#[derive(Default)]
pub(crate) struct HostPool {
    free: Mutex<Vec<Block>>,
    /// Set once a pageable fallback was warned about.
    warned: AtomicBool,
}

impl HostPool {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Block>> {
        self.free.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A pooled locked block of at least `bytes` and at most twice that, or a new, zeroed one
    /// (after the pooled blocks that do not fit are freed; then the flag is `true`). The context
    /// must be current.
    fn take(&self, device: &Device, bytes: usize, lock: Lock) -> Result<(Block, bool)> {
        let mut free = self.lock();
        let fits = |b: &Block| b.bytes >= bytes && b.bytes <= bytes.max(BLOCK_ALIGN).saturating_mul(2);
        let best = free.iter().enumerate().filter(|(_, b)| fits(b)).min_by_key(|(_, b)| b.bytes).map(|(i, _)| i);
        if let Some(i) = best {
            return Ok((free.swap_remove(i), false));
        }
        for b in free.drain(..) {
            b.free(Some(&device.tracker));
        }
        drop(free);
        Ok((Block::alloc(device, bytes, lock)?, true))
    }

    /// Keeps `block` for reuse when it is page-locked and the pool has room, else frees it. No
    /// copy may use it any more; the context must be current.
    fn put(&self, device: &Device, block: Block) {
        let mut free = self.lock();
        if block.locked && free.len() < POOL_KEEP {
            free.push(block);
        } else {
            drop(free);
            block.free(Some(&device.tracker));
        }
    }

    /// Frees every pooled block. The context must be current.
    pub(crate) fn release(&self, device: &Device) {
        let blocks = std::mem::take(&mut *self.lock());
        for b in blocks {
            b.free(Some(&device.tracker));
        }
    }

    /// Bytes of the pooled blocks.
    pub(crate) fn pooled_bytes(&self) -> usize {
        self.lock().iter().map(|b| b.bytes).sum()
    }
}

/// A host buffer of `u64`s owned by a [`crate::CudaBackend`], page-locked (unless the host
/// refused and the allocation accepted a pageable fallback: see [`PinnedHost::is_page_locked`]):
/// the copy engine reads and writes it directly at bus speed. It dereferences to a slice, and
/// every transfer whose host side lies inside it (`upload`, `write`, `download`, also of a
/// sub-slice) is a direct copy. Given back to its device's pool on drop, after any copy still
/// using it.
pub struct PinnedHost {
    /// `None` only for an empty buffer.
    block: Option<Block>,
    len: usize,
    /// Recorded behind the last queued copy that reads or writes the buffer.
    pending: Option<sys::CUevent>,
    device: Arc<Device>,
}

// SAFETY: the buffer is owned memory; the event handle is used with the context bound.
unsafe impl Send for PinnedHost {}
// SAFETY: shared access only reads the memory; every copy writing it needs `&mut self`.
unsafe impl Sync for PinnedHost {}

impl std::fmt::Debug for PinnedHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedHost")
            .field("len", &self.len)
            .field("page_locked", &self.is_page_locked())
            .field("pending", &self.pending.is_some())
            .finish()
    }
}

impl PinnedHost {
    /// `len` elements from `device`'s pool (or newly allocated), zeroed when `zero` is set.
    ///
    /// # Errors
    /// [`Error::SizeOverflow`], or as [`Block::alloc`].
    pub(crate) fn take(device: &Arc<Device>, len: usize, lock: Lock, zero: bool) -> Result<Self> {
        let bytes = backend_api::validate::alloc_bytes(len)?;
        let block = if bytes == 0 {
            None
        } else {
            device.bind()?;
            let (block, fresh) = device.host_pool.take(device, bytes, lock)?;
            if zero && !fresh {
                // SAFETY: the block holds at least `len` elements, written at least once (zeroed
                // when allocated) and used by no copy (pooled blocks are idle).
                let s = unsafe { std::slice::from_raw_parts_mut(block.ptr.as_ptr(), len) };
                s.par_chunks_mut(GRAIN).for_each(|c| c.fill(0));
            }
            Some(block)
        };
        Ok(Self { block, len, pending: None, device: Arc::clone(device) })
    }

    /// Whether the buffer is page-locked (always, unless the host refused and a pageable fallback
    /// was accepted, which was warned about).
    pub fn is_page_locked(&self) -> bool {
        self.block.as_ref().is_some_and(|b| b.locked)
    }

    fn ptr(&self) -> *mut u64 {
        self.block.as_ref().map_or(NonNull::dangling().as_ptr(), |b| b.ptr.as_ptr())
    }

    /// Waits for the copy still using the buffer, if any.
    ///
    /// # Errors
    /// A device error from that copy or the work before it; the stream has then been drained, so
    /// no copy uses the memory any more either way.
    pub fn wait(&mut self) -> Result<()> {
        if let Some(e) = self.pending.take() {
            self.device.bind()?;
            // SAFETY: `e` is live (made by `mark_pending`) until destroyed below.
            let r = unsafe { cu::event::synchronize(e) }.map_err(err("cuEventSynchronize"));
            if r.is_err() {
                // Make sure the copy engine no longer touches the memory.
                // SAFETY: the device's stream is live while the device is.
                let _ = unsafe { cu::stream::synchronize(self.device.stream()) };
            }
            // SAFETY: the event is not used again.
            let _ = unsafe { cu::event::destroy(e) };
            r?;
        }
        Ok(())
    }

    /// Records that a copy queued on the device's stream uses the buffer.
    pub(crate) fn mark_pending(&mut self) -> Result<()> {
        self.wait()?;
        let e = cu::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING).map_err(err("cuEventCreate"))?;
        // SAFETY: the new event and the device's stream are live in the current context.
        if let Err(error) = unsafe { cu::event::record(e, self.device.stream()) }.map_err(err("cuEventRecord")) {
            // The copy may still run: drain the stream before giving the event up.
            // SAFETY: as above; the event is not used again.
            unsafe {
                let _ = cu::stream::synchronize(self.device.stream());
                let _ = cu::event::destroy(e);
            }
            return Err(error);
        }
        self.pending = Some(e);
        Ok(())
    }

    /// Whether the buffer belongs to `device`.
    pub(crate) fn belongs_to(&self, device: &Arc<Device>) -> bool {
        Arc::ptr_eq(&self.device, device)
    }

    /// Gives the memory up without freeing it: for a buffer a copy may still write into when the
    /// device cannot say it is done.
    pub(crate) fn leak(mut self) {
        self.pending = None;
        // A `Block` frees nothing when dropped (only `Block::free` does): taking it out leaks it.
        let _ = self.block.take();
    }
}

impl backend_api::HostBuffer for PinnedHost {
    fn is_page_locked(&self) -> bool {
        PinnedHost::is_page_locked(self)
    }
}

impl std::ops::Deref for PinnedHost {
    type Target = [u64];
    fn deref(&self) -> &[u64] {
        // SAFETY: `len` initialised elements owned by `self` (or a dangling pointer for 0); device
        // copies into the buffer need `&mut self`, which waits for them before any later borrow.
        unsafe { std::slice::from_raw_parts(self.ptr(), self.len) }
    }
}

impl std::ops::DerefMut for PinnedHost {
    fn deref_mut(&mut self) -> &mut [u64] {
        // A copy may still read (or write) the memory: wait for it before handing out a writer.
        if self.wait().is_err() && self.device.bind().is_ok() {
            // SAFETY: the device's stream is live while the device is.
            let _ = unsafe { cu::stream::synchronize(self.device.stream()) };
        }
        // SAFETY: as in `deref`, and no copy uses the memory now.
        unsafe { std::slice::from_raw_parts_mut(self.ptr(), self.len) }
    }
}

impl Drop for PinnedHost {
    fn drop(&mut self) {
        let waited = self.wait();
        let Some(block) = self.block.take() else { return };
        if self.device.bind().is_err() {
            // No context: the memory cannot be unregistered safely; leak it (a `Block` frees
            // nothing when dropped).
            let _ = block;
            return;
        }
        if waited.is_err() {
            // SAFETY: the device's stream is live while the device is.
            let _ = unsafe { cu::stream::synchronize(self.device.stream()) };
        }
        self.device.host_pool.put(&self.device, block);
    }
}

/// `dst.copy_from_slice(src)` on every core.
pub(crate) fn parallel_copy(dst: &mut [u64], src: &[u64]) {
    dst.par_chunks_mut(GRAIN).zip(src.par_chunks(GRAIN)).for_each(|(d, s)| d.copy_from_slice(s));
}

/// [`parallel_copy`] with [`copy_streaming`]: for a download's copy out of the staging ring into
/// the caller's memory, which no core reads back during the copy.
pub(crate) fn parallel_copy_streaming(dst: &mut [u64], src: &[u64]) {
    dst.par_chunks_mut(GRAIN).zip(src.par_chunks(GRAIN)).for_each(|(d, s)| copy_streaming(d, s));
}

/// `dst.copy_from_slice(src)` with stores that bypass the caches where the target has them
/// (x86-64's non-temporal stores). An ordinary store first reads its destination line into the
/// cache, so copying `n` bytes to memory not in cache moves `3n` bytes through the memory
/// controller; a streaming store writes the line without reading it (`2n`). For a destination
/// far larger than the caches and not read back soon by this core, as a download's is.
///
/// # Panics
/// Where the lengths differ, as `copy_from_slice`.
pub(crate) fn copy_streaming(dst: &mut [u64], src: &[u64]) {
    assert_eq!(dst.len(), src.len(), "copy_streaming: lengths differ");
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
        // Elements before the first 16-byte-aligned one, then pairs, then at most one element.
        let head = dst.as_ptr().align_offset(16).min(dst.len());
        let pairs = (dst.len() - head) / 2;
        let tail = head + 2 * pairs;
        dst[..head].copy_from_slice(&src[..head]);
        for (d, s) in dst[head..tail].chunks_exact_mut(2).zip(src[head..tail].chunks_exact(2)) {
            // SAFETY: SSE2 is part of every x86-64 target. `d` is 16 bytes, 16-byte aligned (it
            // starts at `head` or a multiple of 16 bytes after it); `s` is 16 readable bytes, read
            // unaligned.
            unsafe {
                _mm_stream_si128(d.as_mut_ptr().cast::<__m128i>(), _mm_loadu_si128(s.as_ptr().cast::<__m128i>()))
            };
        }
        // SAFETY: SSE2. Orders the streaming stores before the stores that follow on this thread,
        // so whoever learns that the copy is done (through rayon's join) sees its bytes.
        unsafe { _mm_sfence() };
        dst[tail..].copy_from_slice(&src[tail..]);
    }
    #[cfg(not(target_arch = "x86_64"))]
    dst.copy_from_slice(src);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The registry answers for whole ranges inside one block only: both ends, a range straddling
    /// the end and the element after it. Needs no GPU (addresses of an
    /// ordinary vector are registered by hand and removed after).
    #[test]
    fn the_registry_recognises_ranges_inside_one_block() {
        let mem = vec![0u64; 4096];
        let (a, b) = mem.split_at(1024);
        let start = a.as_ptr() as usize;
        registry().insert(start, start + 1024 * ELEM_BYTES);
        assert!(is_page_locked(a));
        assert!(is_page_locked(&a[1000..]));
        assert!(is_page_locked(&a[..1]));
        assert!(!is_page_locked(&mem[1000..1025]), "a range past the block's end");
        assert!(!is_page_locked(&b[..1]), "the next element");
        registry().remove(&start);
        assert!(!is_page_locked(a));
    }

    /// Every length around the 16-byte pairs, at both alignments of the destination and the
    /// source, and a copy spread over many tasks: the bytes of `copy_from_slice`.
    #[test]
    fn streaming_copies_copy_exactly() {
        let src: Vec<u64> = (0..4099u64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::MAX).collect();
        for len in 0..40 {
            for (d_at, s_at) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
                let mut dst = vec![7u64; len + 4];
                copy_streaming(&mut dst[d_at..d_at + len], &src[s_at..s_at + len]);
                assert_eq!(&dst[d_at..d_at + len], &src[s_at..s_at + len], "len {len} at {d_at}, {s_at}");
                assert!(dst[..d_at].iter().chain(&dst[d_at + len..]).all(|&x| x == 7), "outside untouched");
            }
        }
        let big: Vec<u64> = (0..(3 * GRAIN + 5) as u64).collect();
        let mut out = vec![0u64; big.len() + 1];
        parallel_copy_streaming(&mut out[1..], &big);
        assert_eq!(&out[1..], big.as_slice());
        assert_eq!(out[0], 0);
    }
}
