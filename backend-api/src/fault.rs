//! Allocation accounting and fault injection, shared by every backend.
//!
//! Each backend routes every device allocation (buffers, scratch, tables, digests) through one
//! [`AllocTracker`]. That gives every backend the same counters (bytes live now, high-water mark,
//! allocation count) and one test hook: [`AllocTracker::fail_at`] makes the N-th allocation from
//! now fail with [`Error::InjectedFault`], so tests can fail every allocation site of a commit in
//! turn and check that the bytes return to baseline. [`AllocTracker::fail_site`] arms a
//! [`FaultSite`], a step other than an allocation where a backend can fail (a driver call), so
//! that tests reach error paths a healthy device never takes.
//!
//! A buffer gives its bytes back when it drops. The simplest way is to hold a [`Reservation`]:
//! the backend keeps its tracker in an `Arc`, and each buffer holds the guard that
//! [`AllocTracker::reserve_owned`] returns, which releases the bytes on drop whatever the
//! buffer's lifetime.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::error::{Error, Result};

const DISARMED: usize = usize::MAX;

/// The identity of the next tracker that asks for one ([`AllocTracker::id`]); 0 means "none yet".
static NEXT_TRACKER_ID: AtomicU64 = AtomicU64::new(1);

/// A step of a backend, other than an allocation, that a test can make fail once
/// ([`AllocTracker::fail_site`]). A backend that has the step asks [`AllocTracker::site_fails`]
/// there and, when it answers `true`, fails as the real step would (the same error, the same
/// clean-up); a backend without the step never asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FaultSite {
    /// In [`crate::Backend::queue_download`], after the device-to-host copy is queued and before
    /// its completion is tracked (CUDA: recording the completion event). A backend that fails here
    /// must not release the host memory while the queued copy may still write into it.
    DownloadQueued,
    /// Where a backend page-locks host memory ([`crate::Backend::alloc_host`], the pool behind
    /// [`crate::Backend::queue_download`]), after the memory is allocated and before it is locked:
    /// the backend fails as a refused lock would (a typed error, or a warned pageable fallback),
    /// and must free what it allocated.
    PinnedHostAlloc,
    /// In [`crate::Backend::coset_lde_from_host`] where a backend uploads the trace in several
    /// copies overlapped with the extension (CUDA, from page-locked memory), after the first copy
    /// is queued and before the second: the backend fails as a refused copy would, and must not
    /// return while a queued copy may still read the caller's host trace.
    HostUploadQueued,
}

impl FaultSite {
    const fn bit(self) -> usize {
        match self {
            FaultSite::DownloadQueued => 1,
            FaultSite::PinnedHostAlloc => 2,
            FaultSite::HostUploadQueued => 4,
        }
    }
}

/// Live bytes, peak bytes and allocation count of one backend instance.
#[derive(Debug)]
pub struct AllocTracker {
    live: AtomicUsize,
    peak: AtomicUsize,
    count: AtomicUsize,
    fail_at: AtomicUsize,
    /// Armed [`FaultSite`]s, one bit each.
    sites: AtomicUsize,
    pinned: AtomicUsize,
    pinned_peak: AtomicUsize,
    /// This tracker's identity, given on its first reservation (0 until then), which its marks
    /// carry: a process-wide counter, so no two trackers share one even after a tracker is dropped
    /// and another is made at the same address.
    id: AtomicU64,
}

impl Default for AllocTracker {
    fn default() -> Self {
        Self::new()
    }
}

/// A snapshot of an [`AllocTracker`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryCounters {
    /// Bytes allocated and not yet freed.
    pub live: usize,
    /// The largest `live` seen since the last [`AllocTracker::reset_peak`].
    pub peak: usize,
    /// Allocations made so far (successful or injected-failed).
    pub allocations: usize,
    /// Page-locked host bytes the backend holds now (its host buffers, pooled blocks and staging;
    /// 0 for a backend without page-locked memory). Not part of `live`, which is device memory.
    pub pinned_host: usize,
    /// The largest `pinned_host` seen since the last [`AllocTracker::reset_peak`].
    pub pinned_host_peak: usize,
}

impl AllocTracker {
    /// A tracker with nothing allocated and no fault armed.
    pub const fn new() -> Self {
        Self {
            live: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            count: AtomicUsize::new(0),
            fail_at: AtomicUsize::new(DISARMED),
            sites: AtomicUsize::new(0),
            pinned: AtomicUsize::new(0),
            pinned_peak: AtomicUsize::new(0),
            id: AtomicU64::new(0),
        }
    }

    /// This tracker's identity, assigned once, on first use.
    fn id(&self) -> u64 {
        let id = self.id.load(Ordering::Acquire);
        if id != 0 {
            return id;
        }
        let fresh = NEXT_TRACKER_ID.fetch_add(1, Ordering::Relaxed);
        match self.id.compare_exchange(0, fresh, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => fresh,
            Err(won) => won,
        }
    }

    /// Records `bytes` of page-locked host memory the backend now holds (counted apart from
    /// device memory: see [`MemoryCounters::pinned_host`]).
    pub fn pinned_host_allocated(&self, bytes: usize) {
        let now = self.pinned.fetch_add(bytes, Ordering::SeqCst) + bytes;
        self.pinned_peak.fetch_max(now, Ordering::SeqCst);
    }

    /// Records that `bytes` of page-locked host memory were freed.
    pub fn pinned_host_freed(&self, bytes: usize) {
        self.pinned.fetch_sub(bytes, Ordering::SeqCst);
    }

    /// Records an allocation of `bytes` about to be made. Call before the real allocation; then
    /// give the returned mark back with [`AllocTracker::release`] when the memory is freed, or
    /// with [`AllocTracker::refuse`] if the real allocation fails (so that the peak never counts
    /// memory that was not allocated). The mark is move-only and belongs to this tracker: it
    /// goes back once, and only here.
    ///
    /// # Errors
    /// [`Error::InjectedFault`] when this is the allocation [`AllocTracker::fail_at`] armed;
    /// [`Error::OutOfMemory`] when the live bytes would pass `usize::MAX` (no device has them).
    /// Nothing stays reserved.
    pub fn reserve(&self, bytes: usize) -> Result<Reserved> {
        let index = self.count.fetch_add(1, Ordering::SeqCst);
        if self.fail_at.compare_exchange(index, DISARMED, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
            return Err(Error::InjectedFault { index, bytes });
        }
        let before = self
            .live
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |live| live.checked_add(bytes))
            .map_err(|live| Error::OutOfMemory {
                backend: "allocation tracker",
                requested: bytes,
                free: usize::MAX - live,
                total: usize::MAX,
            })?;
        let live = before + bytes;
        let peak_before = self.peak.fetch_max(live, Ordering::SeqCst);
        Ok(Reserved { tracker: self.id(), bytes, live, peak_before })
    }

    /// Gives back the bytes of `mark`, whose memory was freed.
    ///
    /// # Errors
    /// [`Error::ForeignReservation`] when `mark` was reserved in another tracker; no counter
    /// changes.
    pub fn release(&self, mark: Reserved) -> Result<()> {
        self.check_mark(&mark, "release")?;
        self.give_back(mark.bytes);
        Ok(())
    }

    /// Undoes the [`AllocTracker::reserve`] of `mark`, whose real allocation failed: releases its
    /// bytes and puts back the peak it raised, unless a later reservation has raised the peak
    /// since (then the peak is that reservation's, and stays).
    ///
    /// # Errors
    /// [`Error::ForeignReservation`] when `mark` was reserved in another tracker; no counter
    /// changes.
    pub fn refuse(&self, mark: Reserved) -> Result<()> {
        self.check_mark(&mark, "refuse")?;
        self.give_back(mark.bytes);
        // Where the peak is still this reservation's live bytes, it goes back to what it was
        // before; otherwise (a later reservation raised it, or this one did not) it stays.
        let _ = self.peak.compare_exchange(mark.live, mark.peak_before, Ordering::SeqCst, Ordering::SeqCst);
        Ok(())
    }

    fn check_mark(&self, mark: &Reserved, what: &'static str) -> Result<()> {
        if mark.tracker != self.id() {
            return Err(Error::ForeignReservation { what, bytes: mark.bytes });
        }
        Ok(())
    }

    /// Subtracts `bytes` from the live count. A mark of this tracker is counted in it until it
    /// comes back, and comes back once (it is moved in), so this never goes below zero; it
    /// saturates rather than wrap all the same.
    fn give_back(&self, bytes: usize) {
        let _ = self.live.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |live| Some(live.saturating_sub(bytes)));
    }

    /// [`AllocTracker::reserve`] with a guard that releases the bytes when it drops: hold it in
    /// the buffer (or scratch) the bytes are for, next to the memory itself, and make the real
    /// allocation after it. If that allocation fails, call [`Reservation::refuse`]: dropping the
    /// guard gives the live bytes back too, but leaves them in the peak.
    ///
    /// # Errors
    /// [`Error::InjectedFault`] when this is the allocation [`AllocTracker::fail_at`] armed;
    /// nothing stays reserved.
    pub fn reserve_owned(self: &Arc<Self>, bytes: usize) -> Result<Reservation> {
        let reserved = self.reserve(bytes)?;
        Ok(Reservation { tracker: Arc::clone(self), reserved: Some(reserved) })
    }

    /// Makes the allocation with absolute index `index` (see [`MemoryCounters::allocations`]) fail.
    /// Test-only in spirit: production code never calls it.
    pub fn fail_at(&self, index: usize) {
        self.fail_at.store(index, Ordering::SeqCst);
    }

    /// Makes the next pass through `site` fail (once). Test-only in spirit, like
    /// [`AllocTracker::fail_at`].
    pub fn fail_site(&self, site: FaultSite) {
        self.sites.fetch_or(site.bit(), Ordering::SeqCst);
    }

    /// Whether the backend must fail at `site` now: `true` once after [`AllocTracker::fail_site`]
    /// armed it (which disarms it), `false` otherwise.
    pub fn site_fails(&self, site: FaultSite) -> bool {
        self.sites.fetch_and(!site.bit(), Ordering::SeqCst) & site.bit() != 0
    }

    /// Disarms a pending [`AllocTracker::fail_at`] and every armed [`FaultSite`].
    pub fn disarm(&self) {
        self.fail_at.store(DISARMED, Ordering::SeqCst);
        self.sites.store(0, Ordering::SeqCst);
    }

    /// Sets the peaks (device and page-locked host) to the bytes live now.
    pub fn reset_peak(&self) {
        self.peak.store(self.live.load(Ordering::SeqCst), Ordering::SeqCst);
        self.pinned_peak.store(self.pinned.load(Ordering::SeqCst), Ordering::SeqCst);
    }

    /// The counters now.
    pub fn counters(&self) -> MemoryCounters {
        MemoryCounters {
            live: self.live.load(Ordering::SeqCst),
            peak: self.peak.load(Ordering::SeqCst),
            allocations: self.count.load(Ordering::SeqCst),
            pinned_host: self.pinned.load(Ordering::SeqCst),
            pinned_host_peak: self.pinned_peak.load(Ordering::SeqCst),
        }
    }
}

/// Bytes reserved in an [`AllocTracker`] (see [`AllocTracker::reserve_owned`]), released when
/// the guard drops.
#[derive(Debug)]
#[must_use = "dropping a reservation releases its bytes at once"]
pub struct Reservation {
    tracker: Arc<AllocTracker>,
    /// `None` only once given back (in [`Reservation::refuse`] or on drop).
    reserved: Option<Reserved>,
}

impl Reservation {
    /// The bytes this guard holds.
    pub fn bytes(&self) -> usize {
        self.reserved.as_ref().map_or(0, Reserved::bytes)
    }

    /// The tracker the bytes are reserved in: a buffer that holds this guard answers
    /// [`crate::DeviceBuffer::tracker`] with it.
    pub fn tracker(&self) -> &AllocTracker {
        &self.tracker
    }

    /// Gives the bytes back because the allocation they were reserved for failed
    /// ([`AllocTracker::refuse`]): the peak does not keep them.
    pub fn refuse(mut self) {
        if let Some(mark) = self.reserved.take() {
            // The guard's mark is its own tracker's: this cannot be refused.
            let _ = self.tracker.refuse(mark);
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Some(mark) = self.reserved.take() {
            // The guard's mark is its own tracker's: this cannot be refused.
            let _ = self.tracker.release(mark);
        }
    }
}

/// What one [`AllocTracker::reserve`] changed: give it back with [`AllocTracker::release`] when
/// the memory is freed, or [`AllocTracker::refuse`] if the real allocation fails. Move-only, and
/// tied to the tracker that made it: it goes back once, to that tracker.
///
/// A mark goes back once: refusing it twice does not compile.
///
/// ```compile_fail,E0382
/// let tracker = backend_api::AllocTracker::new();
/// let mark = tracker.reserve(1000).unwrap();
/// tracker.refuse(mark).unwrap();
/// tracker.refuse(mark).unwrap();
/// ```
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a mark not given back keeps its bytes live in the tracker"]
pub struct Reserved {
    /// The identity of the tracker that made it.
    tracker: u64,
    bytes: usize,
    /// The live bytes right after this reservation.
    live: usize,
    /// The peak right before it.
    peak_before: usize,
}

impl Reserved {
    /// The bytes reserved.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_peaks_and_fails_once_where_armed() {
        let t = AllocTracker::new();
        let a = t.reserve(100).unwrap();
        let _b = t.reserve(50).unwrap();
        t.release(a).unwrap();
        assert_eq!(t.counters(), MemoryCounters { live: 50, peak: 150, allocations: 2, ..Default::default() });
        t.fail_at(3);
        let _c = t.reserve(1).unwrap(); // index 2
        let err = t.reserve(7).unwrap_err(); // index 3
        assert!(matches!(err, Error::InjectedFault { index: 3, bytes: 7 }));
        let _d = t.reserve(7).unwrap(); // disarmed after firing
        assert_eq!(t.counters().live, 58);
        t.reset_peak();
        assert_eq!(t.counters().peak, 58);
    }

    #[test]
    fn a_refused_allocation_leaves_no_trace_in_the_peak() {
        let t = Arc::new(AllocTracker::new());
        let held = t.reserve(150).unwrap();
        t.release(held).unwrap();
        let _kept = t.reserve(100).unwrap();
        // Raised the peak from 150 to 100 + 1000, then refused: back to 150.
        let huge = t.reserve(1000).unwrap();
        assert_eq!(t.counters().peak, 1100);
        t.refuse(huge).unwrap();
        assert_eq!(t.counters(), MemoryCounters { live: 100, peak: 150, allocations: 3, ..Default::default() });
        // A refusal that did not raise the peak leaves it alone.
        let small = t.reserve(10).unwrap();
        t.refuse(small).unwrap();
        assert_eq!((t.counters().live, t.counters().peak), (100, 150));
        // A later reservation's peak stays when an earlier one is refused.
        let first = t.reserve(500).unwrap();
        let second = t.reserve(20).unwrap();
        t.refuse(first).unwrap();
        assert_eq!((t.counters().live, t.counters().peak), (120, 620));
        t.release(second).unwrap();
        // The owned form.
        let r = t.reserve_owned(usize::MAX / 2).unwrap();
        assert_eq!(r.tracker() as *const AllocTracker, Arc::as_ptr(&t));
        r.refuse();
        assert_eq!((t.counters().live, t.counters().peak), (100, 620));
    }

    #[test]
    fn a_site_fails_once_where_armed() {
        let t = AllocTracker::new();
        assert!(!t.site_fails(FaultSite::DownloadQueued));
        t.fail_site(FaultSite::DownloadQueued);
        // Allocations do not consume it.
        let _held = t.reserve(8).unwrap();
        assert!(t.site_fails(FaultSite::DownloadQueued));
        assert!(!t.site_fails(FaultSite::DownloadQueued));
        t.fail_site(FaultSite::DownloadQueued);
        t.disarm();
        assert!(!t.site_fails(FaultSite::DownloadQueued));
        assert_eq!(t.counters(), MemoryCounters { live: 8, peak: 8, allocations: 1, ..Default::default() });
    }

    #[test]
    fn page_locked_host_bytes_are_counted_apart_with_their_own_peak() {
        let t = AllocTracker::new();
        let _held = t.reserve(64).unwrap();
        t.pinned_host_allocated(1000);
        t.pinned_host_allocated(500);
        t.pinned_host_freed(1000);
        let c = t.counters();
        assert_eq!((c.live, c.peak, c.allocations), (64, 64, 1), "device counters unchanged");
        assert_eq!((c.pinned_host, c.pinned_host_peak), (500, 1500));
        t.reset_peak();
        assert_eq!(t.counters().pinned_host_peak, 500);
        // The page-locking site is its own bit: arming it leaves the download site disarmed.
        t.fail_site(FaultSite::PinnedHostAlloc);
        assert!(!t.site_fails(FaultSite::DownloadQueued));
        assert!(t.site_fails(FaultSite::PinnedHostAlloc));
        assert!(!t.site_fails(FaultSite::PinnedHostAlloc));
    }

    #[test]
    fn a_reservation_releases_its_bytes_on_drop_and_a_refused_one_holds_none() {
        let t = Arc::new(AllocTracker::new());
        let a = t.reserve_owned(100).unwrap();
        let b = t.reserve_owned(20).unwrap();
        assert_eq!((a.bytes(), b.bytes()), (100, 20));
        assert_eq!(t.counters(), MemoryCounters { live: 120, peak: 120, allocations: 2, ..Default::default() });
        drop(a);
        assert_eq!(t.counters().live, 20);
        t.fail_at(2);
        let err = t.reserve_owned(7).unwrap_err();
        assert!(matches!(err, Error::InjectedFault { index: 2, bytes: 7 }), "{err}");
        assert_eq!(t.counters().live, 20);
        // The guard keeps the tracker alive on its own: a buffer may outlive its backend handle.
        let weak = Arc::downgrade(&t);
        drop(t);
        assert_eq!(weak.upgrade().map(|t| t.counters().live), Some(20));
        drop(b);
        assert!(weak.upgrade().is_none());
    }

    #[test]
    fn a_mark_goes_back_once_and_only_to_its_own_tracker() {
        let (a, b) = (AllocTracker::new(), AllocTracker::new());
        let _held_by_b = b.reserve(5000).unwrap();
        let mark = a.reserve(1000).unwrap();
        // A's mark on B's tracker: refused, and neither tracker changes.
        let err = b.refuse(mark).unwrap_err();
        assert!(matches!(err, Error::ForeignReservation { what: "refuse", bytes: 1000 }), "{err}");
        assert!(err.is_invalid_input() && err.to_string().contains("another allocation tracker"), "{err}");
        assert_eq!((a.counters().live, b.counters().live), (1000, 5000));
        let mark = a.reserve(24).unwrap();
        let err = b.release(mark).unwrap_err();
        assert!(matches!(err, Error::ForeignReservation { what: "release", bytes: 24 }), "{err}");
        assert_eq!((a.counters().live, b.counters().live), (1024, 5000));
        // A tracker made later at the same address (the first dropped) is another tracker too.
        let first = Box::new(AllocTracker::new());
        let old = first.reserve(8).unwrap();
        drop(first);
        let second = Box::new(AllocTracker::new());
        let _held = second.reserve(8).unwrap();
        assert!(matches!(second.release(old), Err(Error::ForeignReservation { .. })));
        assert_eq!(second.counters().live, 8);
        // (A mark refused twice does not compile: `refuse` moves it.)
    }

    #[test]
    fn live_bytes_never_wrap() {
        let t = AllocTracker::new();
        let half = t.reserve(1 << 63).unwrap();
        let err = t.reserve(1 << 63).unwrap_err();
        assert!(err.is_out_of_memory(), "{err}");
        assert!(
            matches!(err, Error::OutOfMemory { requested, free, .. } if requested == 1 << 63 && free == (1 << 63) - 1)
        );
        assert_eq!(t.counters().live, 1 << 63, "the refused reservation left nothing");
        t.release(half).unwrap();
        assert_eq!(t.counters().live, 0);
        // The guard form under the same load.
        let t = Arc::new(AllocTracker::new());
        let r = t.reserve_owned(usize::MAX).unwrap();
        assert!(t.reserve_owned(1).unwrap_err().is_out_of_memory());
        drop(r);
        assert_eq!(t.counters().live, 0);
    }
}
