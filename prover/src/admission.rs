//! Admission of commits against a device memory budget, shared by concurrent commits.
//!
//! An [`Admission`] holds a budget and the bytes already admitted to commits in flight. A commit
//! is admitted when `in_flight + model.total() <= budget`; the [`Ticket`] it gets holds those
//! bytes until it is dropped. [`crate::commit`] makes a private admission per call; callers that
//! run several commits on one device share one through [`crate::commit_admitted`].

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use backend_api::memory::{MemoryModel, admit};

use crate::error::Result;

/// A memory budget and the bytes admitted against it. Cheap to clone: clones share the counter.
#[derive(Clone, Debug)]
pub struct Admission {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    budget: usize,
    in_flight: Mutex<usize>,
}

impl Inner {
    /// The counter; a poisoned lock still holds a consistent `usize` (updates are single
    /// assignments), so poisoning is ignored rather than turned into a panic.
    fn lock(&self) -> MutexGuard<'_, usize> {
        self.in_flight.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Admission {
    /// An admission with `budget` bytes and nothing in flight.
    pub fn new(budget: usize) -> Self {
        Self { inner: Arc::new(Inner { budget, in_flight: Mutex::new(0) }) }
    }

    /// The budget, in bytes.
    pub fn budget(&self) -> usize {
        self.inner.budget
    }

    /// Bytes held by live tickets now.
    pub fn in_flight(&self) -> usize {
        *self.inner.lock()
    }

    /// Admits `model`: on success its total is held until the ticket is dropped.
    ///
    /// # Errors
    /// [`backend_api::Error::Refused`] naming every term of the model, the budget and the bytes
    /// already in flight, when they do not fit together.
    pub fn admit(&self, model: &MemoryModel) -> Result<Ticket> {
        let mut in_flight = self.inner.lock();
        admit(model, self.inner.budget, *in_flight)?;
        *in_flight += model.total();
        Ok(Ticket { inner: Arc::clone(&self.inner), bytes: model.total() })
    }
}

/// Bytes admitted to one commit; released when dropped.
#[derive(Debug)]
pub struct Ticket {
    inner: Arc<Inner>,
    bytes: usize,
}

impl Ticket {
    /// Bytes this ticket holds.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Releases all but `bytes` (no-op when it already holds no more), e.g. once a commit's
    /// transient buffers are freed and only its results stay on the device.
    pub fn shrink_to(&mut self, bytes: usize) {
        if bytes < self.bytes {
            *self.inner.lock() -= self.bytes - bytes;
            self.bytes = bytes;
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        *self.inner.lock() -= self.bytes;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use backend_api::Error;

    fn model(total_quarter: usize) -> MemoryModel {
        MemoryModel {
            lde: total_quarter,
            trace: total_quarter,
            trees: total_quarter,
            scratch: total_quarter,
            twiddles: 0,
        }
    }

    #[test]
    fn tickets_hold_and_release_bytes() {
        let a = Admission::new(1000);
        let t1 = a.admit(&model(100)).unwrap();
        assert_eq!(a.in_flight(), 400);
        let mut t2 = a.admit(&model(150)).unwrap();
        assert_eq!(a.in_flight(), 1000);
        let err = a.admit(&model(1)).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("1000 B") && msg.contains("already admitted"), "{msg}");
        assert!(matches!(err, crate::ProverError::Backend(Error::Refused(ref r)) if r.in_flight == 1000));
        t2.shrink_to(200);
        assert_eq!((a.in_flight(), t2.bytes()), (600, 200));
        t2.shrink_to(500); // never grows
        assert_eq!(a.in_flight(), 600);
        drop(t1);
        assert_eq!(a.in_flight(), 200);
        drop(t2);
        assert_eq!(a.in_flight(), 0);
    }

    #[test]
    fn concurrent_admissions_never_exceed_the_budget() {
        let a = Admission::new(10_000);
        let peak = Mutex::new(0usize);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..500 {
                        if let Ok(t) = a.admit(&model(500)) {
                            let now = a.in_flight();
                            let mut p = peak.lock().unwrap();
                            *p = (*p).max(now);
                            drop(p);
                            drop(t);
                        }
                    }
                });
            }
        });
        assert_eq!(a.in_flight(), 0);
        let p = *peak.lock().unwrap();
        assert!((2000..=10_000).contains(&p), "peak in flight {p}");
    }
}
