//! Buffers and allocation: host vectors whose bytes are reserved in the backend's tracker.
//!
//! The porting guide's tracker-sharing pattern: the backend keeps its [`AllocTracker`] in an
//! `Arc`, and every buffer holds the [`Reservation`] of its bytes
//! ([`AllocTracker::reserve_owned`]), taken before the vector is allocated; dropping the buffer
//! drops the reservation, which gives the bytes back.

use backend_api::{AllocTracker, DeviceBuffer, Error, PendingDownload, Reservation, Result, validate};

use crate::{NAME, ToyBackend};

/// An owned host buffer of `u64` elements, accounted in its backend's tracker until it drops.
#[derive(Debug)]
pub struct ToyBuffer {
    data: Vec<u64>,
    /// The bytes of `data` in the backend's tracker, released when the buffer drops.
    _bytes: Reservation,
}

impl ToyBuffer {
    /// The elements.
    pub fn as_slice(&self) -> &[u64] {
        &self.data
    }

    /// The elements, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [u64] {
        &mut self.data
    }
}

impl DeviceBuffer for ToyBuffer {
    fn len(&self) -> usize {
        self.data.len()
    }

    fn tracker(&self) -> &AllocTracker {
        self._bytes.tracker()
    }
}

/// A finished copy: [`ToyBackend`] copies when the download is queued.
#[derive(Debug)]
pub struct ToyDownload {
    pub(crate) copy: ToyBuffer,
}

impl PendingDownload for ToyDownload {
    type Host = Vec<u64>;

    fn wait(self) -> Result<Vec<u64>> {
        Ok(self.copy.as_slice().to_vec())
    }
}

/// A zero-filled buffer of `len` elements.
///
/// # Errors
/// [`Error::SizeOverflow`] when the byte count overflows, [`Error::OutOfMemory`] when the
/// simulated limit or the host allocator refuses; an injected fault from the tracker. Nothing
/// stays reserved.
pub(crate) fn zeroed(backend: &ToyBackend, len: usize) -> Result<ToyBuffer> {
    let bytes = validate::alloc_bytes(len)?;
    let over = |live: usize| backend.limit.is_some_and(|limit| live.checked_add(bytes).is_none_or(|l| l > limit));
    // One allocation larger than the memory there is never succeeds; refusing it here keeps an
    // overcommitting host from promising pages it cannot give.
    if over(backend.tracker.counters().live) || bytes > total_and_free(backend).0 {
        return Err(out_of_memory(backend, bytes));
    }
    let reservation = backend.tracker.reserve_owned(bytes)?;
    if backend.limit.is_some_and(|limit| backend.tracker.counters().live > limit) {
        reservation.refuse();
        return Err(out_of_memory(backend, bytes));
    }
    let mut data = Vec::new();
    if data.try_reserve_exact(len).is_err() {
        reservation.refuse();
        return Err(out_of_memory(backend, bytes));
    }
    data.resize(len, 0);
    Ok(ToyBuffer { data, _bytes: reservation })
}

/// `(total, free)` bytes: the simulated size and what is not live, or the host's
/// `/proc/meminfo` (`MemTotal`, `MemAvailable`), or `usize::MAX` for both where neither is known.
pub(crate) fn total_and_free(backend: &ToyBackend) -> (usize, usize) {
    match backend.limit {
        Some(limit) => (limit, limit.saturating_sub(backend.tracker.counters().live)),
        None => backend_api::host_memory().unwrap_or((usize::MAX, usize::MAX)),
    }
}

fn out_of_memory(backend: &ToyBackend, requested: usize) -> Error {
    let (total, free) = total_and_free(backend);
    Error::OutOfMemory { backend: NAME, requested, free, total }
}
