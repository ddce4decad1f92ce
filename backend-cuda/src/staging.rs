//! Host transfers through a small reusable ring of page-locked staging blocks.
//!
//! A copy from ordinary (pageable) host memory makes the driver stage it through its own small
//! buffers at a fraction of the bus speed (7-8 GB/s against 55 GB/s for page-locked memory,
//! measured on an H200), and page-locking the caller's buffer per call costs more than the copy
//! (`cuMemHostRegister` of 5.3 GB: 225 ms). So large transfers go through [`StagingRing`]:
//! - **a few fixed page-locked blocks** ([`SLOTS`] x [`SLOT_BYTES`]), allocated at the first
//!   large transfer of a device and kept for its life;
//! - **uploads:** the host copies chunk `k` into a free block with every core (rayon) while the
//!   copy engine moves chunk `k - 1`; a block is refilled only after the event recorded behind its
//!   last copy has completed, so the caller's slice may be reused as soon as the call returns;
//! - **downloads:** up to [`SLOTS`] chunk copies are queued ahead; each block is copied out, in
//!   parallel and with streaming stores ([`crate::host::copy_streaming`]: the caller's memory is
//!   written without first being read into the caches), as soon as its event completes, and
//!   refilled with the next chunk;
//! - **never fatal:** when page-locked memory cannot be had (a locked-memory limit), the
//!   transfer goes through the driver's pageable path, with one warning per device.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use backend_api::{AllocTracker, ELEM_BYTES, Result};
use cudarc::driver::sys;

use crate::driver::err;
use crate::host::{Block, parallel_copy, parallel_copy_streaming};
use cudarc::driver::result as cu;

/// Bytes of one staging block.
pub(crate) const SLOT_BYTES: usize = 32 << 20;
/// Staging blocks per device.
pub(crate) const SLOTS: usize = 4;
/// Transfers below this size go straight through the driver (its own staging is as fast there).
pub(crate) const STAGE_MIN_BYTES: usize = 1 << 20;

/// A new event without timing, in the current context.
fn new_event() -> Result<sys::CUevent> {
    cu::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING).map_err(err("cuEventCreate"))
}

/// Records `event` after the work queued so far on `stream`.
///
/// # Safety
/// Both are live handles of the current context.
unsafe fn record(event: sys::CUevent, stream: sys::CUstream) -> Result<()> {
    // SAFETY: per the contract.
    unsafe { cu::event::record(event, stream) }.map_err(err("cuEventRecord"))
}

/// Waits for the work recorded before `event`.
///
/// # Safety
/// `event` is a live event of the current context.
unsafe fn wait(event: sys::CUevent) -> Result<()> {
    // SAFETY: per the contract.
    unsafe { cu::event::synchronize(event) }.map_err(err("cuEventSynchronize"))
}

/// Destroys `event`.
///
/// # Safety
/// `event` is live and not used again.
unsafe fn destroy(event: sys::CUevent) {
    // SAFETY: per the contract; a pending event is released by the driver once it completes.
    let _ = unsafe { cu::event::destroy(event) };
}

/// One page-locked block and the event recorded behind the last copy that used it.
struct Slot {
    host: *mut u64,
    event: sys::CUevent,
    /// Whether a copy using the block may still be running.
    busy: bool,
}

/// The staging blocks of one device: [`SLOTS`] slices of one page-locked block.
pub(crate) struct StagingRing {
    slots: Vec<Slot>,
    next: usize,
    /// The memory of every slot; `None` only while dropping.
    block: Option<Block>,
}

// SAFETY: the raw pointers are page-locked blocks owned by the ring and the event handles are
// plain driver handles; the ring is only used behind the device's mutex with the context bound.
unsafe impl Send for StagingRing {}

impl StagingRing {
    /// Allocates one page-locked block of [`SLOTS`] x [`SLOT_BYTES`] (touched on every core, then
    /// registered, as [`crate::PinnedHost`] memory: several times faster than `cuMemHostAlloc`)
    /// and an event per slot. The context must be current.
    ///
    /// # Errors
    /// [`backend_api::Error::HostOutOfMemory`] when page-locked memory cannot be had, or the
    /// driver's error when an event cannot be made; whatever was allocated before is freed.
    pub(crate) fn new() -> Result<Self> {
        let block = Block::locked(SLOTS * SLOT_BYTES)?;
        let base = block.as_ptr();
        let mut ring = Self { slots: Vec::with_capacity(SLOTS), next: 0, block: Some(block) };
        for k in 0..SLOTS {
            // On error `ring` drops: its events are destroyed and the block freed.
            let event = new_event()?;
            // SAFETY: slot `k` starts `k * SLOT_BYTES` bytes into the block, inside it.
            let host = unsafe { base.add(k * SLOT_BYTES / ELEM_BYTES) };
            ring.slots.push(Slot { host, event, busy: false });
        }
        Ok(ring)
    }

    /// The next block, once the copy that last used it has completed.
    fn take(&mut self) -> Result<&mut Slot> {
        let i = self.next;
        self.next = (i + 1) % self.slots.len();
        let slot = &mut self.slots[i];
        if slot.busy {
            // SAFETY: the slot's event lives as long as the ring.
            unsafe { wait(slot.event)? };
            slot.busy = false;
        }
        Ok(slot)
    }

    /// Queues a copy of `host` to device address `dst` on `stream`, through the blocks. Returns
    /// when every chunk has been copied into a block and its transfer queued: `host` may be reused.
    ///
    /// # Safety
    /// `dst` is device memory of at least `host.len()` elements, live until the queued copies
    /// have run. The context is current.
    pub(crate) unsafe fn upload(&mut self, dst: sys::CUdeviceptr, host: &[u64], stream: sys::CUstream) -> Result<()> {
        let per_slot = SLOT_BYTES / ELEM_BYTES;
        for (k, chunk) in host.chunks(per_slot).enumerate() {
            let slot = self.take()?;
            // SAFETY: the block holds `per_slot` elements and no copy uses it now (`take`).
            let block = unsafe { std::slice::from_raw_parts_mut(slot.host, chunk.len()) };
            parallel_copy(block, chunk);
            let at = dst + (k * SLOT_BYTES) as u64;
            let staged: &[u64] = block;
            // SAFETY: the destination range is inside `dst` (caller); the block is page-locked and
            // is not written again before the event recorded behind this copy has completed.
            unsafe { cu::memcpy_htod_async(at, staged, stream) }.map_err(err("cuMemcpyHtoDAsync"))?;
            slot.busy = true;
            // SAFETY: the slot's event and the caller's stream are live in the current context.
            unsafe { record(slot.event, stream)? };
        }
        Ok(())
    }

    /// Copies device address `src` (`out.len()` elements) into `out` after the work queued on
    /// `stream`, through the blocks; returns when `out` holds the data.
    ///
    /// # Safety
    /// `src` is device memory of at least `out.len()` elements. The context is current.
    pub(crate) unsafe fn download(
        &mut self,
        out: &mut [u64],
        src: sys::CUdeviceptr,
        stream: sys::CUstream,
    ) -> Result<()> {
        let per_slot = SLOT_BYTES / ELEM_BYTES;
        let chunks = out.len().div_ceil(per_slot);
        let ahead = self.slots.len().min(chunks);
        // Slot indices of the queued chunks, in order.
        let mut queued = std::collections::VecDeque::with_capacity(ahead);
        let total = out.len();
        let chunk_len = |k: usize| per_slot.min(total - k * per_slot);
        let mut next_chunk = 0;
        let enqueue = |ring: &mut Self, k: usize| -> Result<usize> {
            let idx = ring.next;
            let slot = ring.take()?;
            let at = src + (k * SLOT_BYTES) as u64;
            // SAFETY: the source range is inside `src` (caller); the block is page-locked, not in
            // use (`take`), and read only after the event recorded behind this copy completes.
            let block = unsafe { std::slice::from_raw_parts_mut(slot.host, chunk_len(k)) };
            // SAFETY: as above.
            unsafe { cu::memcpy_dtoh_async(block, at, stream) }.map_err(err("cuMemcpyDtoHAsync"))?;
            slot.busy = true;
            // SAFETY: the slot's event and the caller's stream are live in the current context.
            unsafe { record(slot.event, stream)? };
            Ok(idx)
        };
        while next_chunk < ahead {
            queued.push_back((next_chunk, enqueue(self, next_chunk)?));
            next_chunk += 1;
        }
        while let Some((k, idx)) = queued.pop_front() {
            let slot = &mut self.slots[idx];
            // SAFETY: the slot's event lives as long as the ring.
            unsafe { wait(slot.event)? };
            slot.busy = false;
            // SAFETY: the copy into the block has completed; it holds `chunk_len(k)` elements.
            let block = unsafe { std::slice::from_raw_parts(slot.host, chunk_len(k)) };
            parallel_copy_streaming(&mut out[k * per_slot..k * per_slot + chunk_len(k)], block);
            if next_chunk < chunks {
                queued.push_back((next_chunk, enqueue(self, next_chunk)?));
                next_chunk += 1;
            }
        }
        Ok(())
    }
}

impl Drop for StagingRing {
    /// Waits for the copies still using a block, then frees the blocks. The context must be current.
    fn drop(&mut self) {
        for slot in self.slots.drain(..) {
            if slot.busy {
                // SAFETY: the event is live until destroyed below.
                let _ = unsafe { wait(slot.event) };
            }
            // SAFETY: the event is not used again.
            unsafe { destroy(slot.event) };
        }
        if let Some(block) = self.block.take() {
            // No copy uses the block any more (waited above); the ring's bytes are released in
            // the device's tracker by `Staging::release`.
            block.free(None);
        }
    }
}

/// The staging ring of one device, made at its first large transfer.
#[derive(Default)]
pub(crate) struct Staging {
    ring: Mutex<Option<StagingRing>>,
    /// Set once page-locked memory could not be had: later transfers go pageable, unwarned.
    unavailable: AtomicBool,
}

impl Staging {
    /// Runs `f` with the ring (made now if needed), or returns `Ok(false)` when `bytes` is small
    /// or page-locked memory cannot be had (warned once): the caller then copies pageable.
    /// The ring's page-locked bytes are counted in `tracker` while it exists.
    pub(crate) fn with_ring(
        &self,
        tracker: &AllocTracker,
        bytes: usize,
        f: impl FnOnce(&mut StagingRing) -> Result<()>,
    ) -> Result<bool> {
        if bytes < STAGE_MIN_BYTES || self.unavailable.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let mut guard = self.ring.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_none() {
            match StagingRing::new() {
                Ok(r) => {
                    tracker.pinned_host_allocated(SLOTS * SLOT_BYTES);
                    *guard = Some(r);
                }
                Err(e) => {
                    if !self.unavailable.swap(true, Ordering::Relaxed) {
                        eprintln!(
                            "warning: cuda: no page-locked staging memory ({e}); host transfers use the slower \
                             pageable path"
                        );
                    }
                    return Ok(false);
                }
            }
        }
        f(guard.as_mut().expect("made above"))?;
        Ok(true)
    }

    /// Makes the ring now unless it exists or page-locked memory was refused before (then the
    /// refusal is warned about once, as in [`Staging::with_ring`]). The context must be current.
    pub(crate) fn ensure(&self, tracker: &AllocTracker) {
        let _ = self.with_ring(tracker, STAGE_MIN_BYTES, |_| Ok(()));
    }

    /// Whether the ring has been made.
    #[cfg(test)]
    pub(crate) fn is_made(&self) -> bool {
        self.ring.lock().unwrap_or_else(|p| p.into_inner()).is_some()
    }

    /// Frees the ring (waiting for its copies). The context must be current.
    pub(crate) fn release(&self, tracker: &AllocTracker) {
        if let Some(ring) = self.ring.lock().unwrap_or_else(|p| p.into_inner()).take() {
            drop(ring);
            tracker.pinned_host_freed(SLOTS * SLOT_BYTES);
        }
    }
}
