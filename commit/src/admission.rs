//! Admission of commits against a device memory budget, shared by concurrent commits: in one
//! process, or across every process on one device.
//!
//! An [`Admission`] holds a budget and the bytes already admitted to commits in flight. A commit
//! is admitted when `in_flight + model.total() <= budget`; the [`Ticket`] it gets holds those
//! bytes until it is dropped. [`crate::commit`] makes a private admission per call; callers that
//! run several commits on one device share one through [`crate::commit_admitted`].
//!
//! Three policies:
//! - [`Admission::new`]: a commit that does not fit now is refused at once
//!   ([`crate::ProverError::Refused`]).
//! - [`Admission::waiting`]: it waits its turn in this process, up to a timeout.
//! - [`Admission::cross_process`]: it waits its turn among every process that uses the same
//!   reservation directory for the same device (see `reservations.rs`: `flock`-held files, so a
//!   killed process gives its share back at once).
//!
//! With both waiting policies:
//! - **First come, first served.** A commit is admitted only when no earlier one still waits, so
//!   a large commit is never overtaken forever by small ones.
//! - **Programs that do not take part count too.** Besides the budget, a commit must fit the
//!   device's free memory now as the driver reports it, less the bytes of admitted commits that
//!   may still be allocating (their tickets are not yet settled by [`Ticket::shrink_to`], which
//!   the pipeline calls after its last allocation), and the device's total less what is
//!   admitted. Memory held by other programs, or kept in another process's allocator pool after
//!   its commit, therefore delays admission instead of failing an allocation.
//! - **No deadlock.** Nothing waits while holding a lock; every wait has a deadline; a commit that
//!   could never fit the budget is refused at once instead of queueing; a dead process's
//!   reservation is dropped by the next poll. On timeout the error
//!   ([`ProverError::WaitTimedOut`]) says what was waited for and what still stood in the way.

use std::collections::VecDeque;
use std::fmt;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::memory::{MemoryModel, Refusal, admit, human_bytes};

use crate::error::{ProverError, Result};
use crate::reservations::{QueueView, Reservation, Reservations};

/// How often a waiting commit looks again at the queue and the driver's free memory, which can
/// change without any notification (other programs, allocator pools, dead processes).
pub const POLL: Duration = Duration::from_millis(25);

/// Free and total memory of a device now, as its driver reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceMemory {
    /// Free bytes.
    pub free: usize,
    /// Total bytes.
    pub total: usize,
}

/// What kept a waiting commit out when it last looked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Blocked {
    /// Earlier commits were still waiting (first come, first served).
    Queue {
        /// Commits waiting ahead of this one.
        ahead: usize,
    },
    /// The budget was taken by admitted commits.
    Budget {
        /// Bytes admitted to other commits.
        admitted: usize,
        /// How many commits held them.
        commits: usize,
    },
    /// The driver's free memory was short (programs outside this admission, allocator pools).
    DeviceMemory {
        /// Free bytes the driver reported.
        free: usize,
        /// The device's total bytes.
        total: usize,
        /// Bytes admitted to other commits.
        admitted: usize,
        /// Of those, bytes of commits that may still be allocating (not yet in `free`).
        pending: usize,
    },
}

impl fmt::Display for Blocked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Blocked::Queue { ahead } => write!(f, "{ahead} earlier commit(s) were still waiting ahead of it"),
            Blocked::Budget { admitted, commits } => write!(
                f,
                "{admitted} B ({}) of the budget were admitted to {commits} other commit(s)",
                human_bytes(admitted)
            ),
            Blocked::DeviceMemory { free, total, admitted, pending } => write!(
                f,
                "the driver reported {free} B ({}) free of {total} B ({}), with {admitted} B ({}) admitted \
                 to other commits, {pending} B ({}) of them still allocating (the rest is held by programs \
                 outside this admission or not yet released)",
                human_bytes(free),
                human_bytes(total),
                human_bytes(admitted),
                human_bytes(pending)
            ),
        }
    }
}

/// The waiting rule: whether `bytes` may be admitted now, given what is admitted to others, how
/// many wait ahead, the budget and the driver's view of the device.
fn blocked(bytes: usize, budget: usize, view: QueueView, memory: Option<DeviceMemory>) -> Option<Blocked> {
    if view.ahead > 0 {
        return Some(Blocked::Queue { ahead: view.ahead });
    }
    // Checked, not saturating: a saturated sum fits a budget of `usize::MAX`.
    if view.admitted.checked_add(bytes).is_none_or(|sum| sum > budget) {
        return Some(Blocked::Budget { admitted: view.admitted, commits: view.admitted_count });
    }
    // Admitted commits that may still be allocating are not in the driver's free figure yet.
    match memory {
        Some(m) if bytes.saturating_add(view.pending) > m.free || bytes > m.total.saturating_sub(view.admitted) => {
            Some(Blocked::DeviceMemory { free: m.free, total: m.total, admitted: view.admitted, pending: view.pending })
        }
        _ => None,
    }
}

/// A memory budget and the bytes admitted against it. Cheap to clone: clones share the budget,
/// the queue and the counter.
#[derive(Clone, Debug)]
pub struct Admission {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    budget: usize,
    /// `None`: refuse at once. `Some(t)`: wait up to `t`.
    wait: Option<Duration>,
    /// What the commits wait for, for messages: the device and where its queue lives.
    device: String,
    /// This admission's tickets (and, without `shared`, its queue).
    state: Mutex<Local>,
    /// Woken whenever bytes are released or the queue's head leaves.
    wake: Condvar,
    /// The cross-process queue, when there is one.
    shared: Option<Reservations>,
}

/// The in-process counter and queue.
impl Local {
    fn admit(&mut self, bytes: usize) {
        self.in_flight += bytes;
        self.pending += bytes;
        self.admitted_count += 1;
    }
}

#[derive(Debug, Default)]
struct Local {
    in_flight: usize,
    /// Bytes of tickets not yet settled ([`Ticket::shrink_to`]): their commits may still allocate.
    pending: usize,
    admitted_count: usize,
    next: u64,
    /// Queue numbers of the commits waiting, oldest first.
    queue: VecDeque<u64>,
}

impl Inner {
    /// The local state; a poisoned lock still holds consistent counters (every update is a few
    /// plain assignments with no call that can panic between them), so poisoning is ignored.
    fn local(&self) -> MutexGuard<'_, Local> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn new(budget: usize, wait: Option<Duration>, device: String, shared: Option<Reservations>) -> Arc<Self> {
        Arc::new(Self { budget, wait, device, state: Mutex::default(), wake: Condvar::new(), shared })
    }

    /// Counts a new ticket of `bytes`.
    fn hold(self: &Arc<Self>, bytes: usize, reservation: Option<Reservation>) -> Ticket {
        let mut state = self.local();
        state.admit(bytes);
        Ticket { inner: Arc::clone(self), bytes, settled: false, reservation }
    }
}

impl Admission {
    /// An admission with `budget` bytes that refuses a commit that does not fit now.
    pub fn new(budget: usize) -> Self {
        Self::local(budget, None, "this device".into())
    }

    /// An admission with `budget` bytes in which a commit that does not fit waits, first come
    /// first served, for up to `timeout` (zero: one look, then [`ProverError::WaitTimedOut`]).
    /// `device` names the device in messages.
    pub fn waiting(budget: usize, timeout: Duration, device: impl Into<String>) -> Self {
        Self::local(budget, Some(timeout), device.into())
    }

    fn local(budget: usize, wait: Option<Duration>, device: String) -> Self {
        Self { inner: Inner::new(budget, wait, device, None) }
    }

    /// A waiting admission shared by every process that opens the same `device_key` under `root`
    /// (e.g. [`crate::default_reservation_root`] and the CUDA device's UUID). Each process passes
    /// its own budget; the bytes admitted to all of them count against it.
    ///
    /// `root` and the device's directory in it are created `0700` and must be the effective
    /// user's alone: owned by them, not writable by group or others, not symbolic links.
    ///
    /// # Errors
    /// - [`ProverError::UnsafePath`] when `root` or the device's directory is not the user's
    ///   alone (the message names it, what is wrong and the fix), or when a file of the queue is
    ///   a symbolic link or not a regular file (then also from [`Admission::admit`]).
    /// - [`ProverError::Input`] when the directory cannot be created or read.
    pub fn cross_process(budget: usize, timeout: Duration, root: &Path, device_key: &str) -> Result<Self> {
        let res = Reservations::open(root, device_key)?;
        let device = format!("{device_key} (queue {})", res.dir().display());
        Ok(Self { inner: Inner::new(budget, Some(timeout), device, Some(res)) })
    }

    /// The budget, in bytes.
    pub fn budget(&self) -> usize {
        self.inner.budget
    }

    /// The directory of a cross-process admission's queue (`<root>/<device key>`, the key made
    /// a safe file name); `None` for an admission local to this process.
    pub fn queue_dir(&self) -> Option<&Path> {
        self.inner.shared.as_ref().map(Reservations::dir)
    }

    /// How long a commit that does not fit waits; `None` when it is refused at once.
    pub fn wait(&self) -> Option<Duration> {
        self.inner.wait
    }

    /// Bytes held by this admission's live tickets now (its clones included).
    pub fn in_flight(&self) -> usize {
        self.inner.local().in_flight
    }

    /// Bytes admitted on the device now: [`Admission::in_flight`], or for a cross-process
    /// admission the bytes held by every live process in its queue.
    ///
    /// # Errors
    /// [`ProverError::Input`] when a cross-process admission's directory cannot be read;
    /// [`ProverError::UnsafePath`] when a file of its queue is a symbolic link or not a regular
    /// file of this user.
    pub fn device_in_flight(&self) -> Result<usize> {
        match &self.inner.shared {
            None => Ok(self.in_flight()),
            Some(res) => Ok(res.view()?.admitted),
        }
    }

    /// Admits `model` by this admission's policy, without looking at the device's free memory.
    ///
    /// # Errors
    /// As [`Admission::admit_on`].
    pub fn admit(&self, model: &MemoryModel) -> Result<Ticket> {
        self.admit_on(model, &|| None)
    }

    /// Admits `model`: on success its total is held until the ticket is dropped. A waiting policy
    /// also asks `memory` (the driver's free and total bytes, `None` when unknown) at every look.
    ///
    /// # Errors
    /// - [`crate::ProverError::Refused`] naming every term of the model, the budget and the bytes
    ///   in flight: with the refusing policy, when they do not fit together now; with a waiting
    ///   policy, at once when the model alone exceeds the budget (it could never be admitted).
    /// - [`ProverError::WaitTimedOut`]: a waiting policy's timeout passed first.
    /// - [`ProverError::Input`]: a cross-process admission's directory cannot be used;
    ///   [`ProverError::UnsafePath`]: a file of its queue is a symbolic link or not a regular file
    ///   of this user (nothing is written through it).
    pub fn admit_on(&self, model: &MemoryModel, memory: &dyn Fn() -> Option<DeviceMemory>) -> Result<Ticket> {
        let bytes = model.total();
        let start = Instant::now();
        match (self.inner.wait, &self.inner.shared) {
            (None, _) => {
                // Checked and counted under one lock, so concurrent commits cannot both fit.
                let mut state = self.inner.local();
                admit(model, self.inner.budget, state.in_flight)?;
                state.admit(bytes);
                Ok(Ticket { inner: Arc::clone(&self.inner), bytes, settled: false, reservation: None })
            }
            (Some(timeout), None) => self.wait_local(model, memory, start, start.checked_add(timeout)),
            (Some(timeout), Some(res)) => self.wait_shared(res, model, memory, start, start.checked_add(timeout)),
        }
    }

    fn refuse_if_never_fits(&self, model: &MemoryModel, in_flight: usize) -> Result<()> {
        if model.total() > self.inner.budget {
            let refusal = Refusal { model: model.clone(), budget: self.inner.budget, in_flight };
            return Err(crate::ProverError::Refused(Box::new(refusal)));
        }
        Ok(())
    }

    fn timed_out(&self, model: &MemoryModel, start: Instant, why: Blocked) -> ProverError {
        ProverError::WaitTimedOut {
            needed: model.total(),
            budget: self.inner.budget,
            device: self.inner.device.clone(),
            waited: start.elapsed(),
            blocked: why,
        }
    }

    fn wait_local(
        &self,
        model: &MemoryModel,
        memory: &dyn Fn() -> Option<DeviceMemory>,
        start: Instant,
        deadline: Option<Instant>,
    ) -> Result<Ticket> {
        let bytes = model.total();
        let wake = &self.inner.wake;
        let mut state = self.inner.local();
        self.refuse_if_never_fits(model, state.in_flight)?;
        let me = state.next;
        state.next += 1;
        state.queue.push_back(me);
        loop {
            let ahead = state.queue.iter().take_while(|&&q| q != me).count();
            let view = QueueView {
                admitted: state.in_flight,
                pending: state.pending,
                admitted_count: state.admitted_count,
                ahead,
            };
            let why = match blocked(bytes, self.inner.budget, view, memory()) {
                None => {
                    state.queue.retain(|&q| q != me);
                    state.admit(bytes);
                    // The next in line may fit too.
                    wake.notify_all();
                    return Ok(Ticket { inner: Arc::clone(&self.inner), bytes, settled: false, reservation: None });
                }
                Some(why) => why,
            };
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                state.queue.retain(|&q| q != me);
                wake.notify_all();
                return Err(self.timed_out(model, start, why));
            }
            let nap = deadline.map_or(POLL, |d| (d - now).min(POLL));
            state = wake.wait_timeout(state, nap).unwrap_or_else(PoisonError::into_inner).0;
        }
    }

    fn wait_shared(
        &self,
        res: &Reservations,
        model: &MemoryModel,
        memory: &dyn Fn() -> Option<DeviceMemory>,
        start: Instant,
        deadline: Option<Instant>,
    ) -> Result<Ticket> {
        let bytes = model.total();
        self.refuse_if_never_fits(model, 0)?;
        let mut me = res.enqueue(bytes)?;
        loop {
            let mem = memory();
            let budget = self.inner.budget;
            let why = match res.poll(&mut me, |view| {
                let why = blocked(bytes, budget, view, mem);
                (why.is_none(), why)
            }) {
                Ok(why) => why,
                Err(e) => {
                    res.release(me);
                    return Err(e.into());
                }
            };
            let Some(why) = why else {
                return Ok(self.inner.hold(bytes, Some(me)));
            };
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                res.release(me);
                return Err(self.timed_out(model, start, why));
            }
            std::thread::sleep(deadline.map_or(POLL, |d| (d - now).min(POLL)));
        }
    }
}

/// Bytes admitted to one commit; released when dropped.
#[derive(Debug)]
pub struct Ticket {
    inner: Arc<Inner>,
    bytes: usize,
    /// Whether [`Ticket::shrink_to`] said the commit has made its last allocation.
    settled: bool,
    /// The cross-process reservation, when the admission has one.
    reservation: Option<Reservation>,
}

impl Ticket {
    /// Bytes this ticket holds.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Settles the ticket: its commit has made its last allocation (so the driver's free memory
    /// now shows it) and keeps only `bytes` on the device; it releases the rest (it never grows).
    /// [`crate::commit_admitted`] calls this when the commit's transient buffers are freed and
    /// only its results stay. Until then a waiting admission counts the ticket's bytes as still
    /// to be allocated.
    pub fn shrink_to(&mut self, bytes: usize) {
        let bytes = bytes.min(self.bytes);
        if self.settled && bytes == self.bytes {
            return;
        }
        if let (Some(res), Some(r)) = (&self.inner.shared, self.reservation.as_mut()) {
            // Should the rewrite fail, the reservation keeps claiming its old size, unsettled:
            // safe, only less is admitted beside it until it is dropped.
            if res.settle(r, bytes).is_err() {
                return;
            }
        }
        let mut state = self.inner.local();
        state.in_flight -= self.bytes - bytes;
        if !self.settled {
            state.pending -= self.bytes;
        }
        drop(state);
        self.bytes = bytes;
        self.settled = true;
        self.inner.wake.notify_all();
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if let (Some(res), Some(r)) = (&self.inner.shared, self.reservation.take()) {
            res.release(r);
        }
        let mut state = self.inner.local();
        state.in_flight -= self.bytes;
        if !self.settled {
            state.pending -= self.bytes;
        }
        state.admitted_count -= 1;
        drop(state);
        self.inner.wake.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn a_budget_of_usize_max_refuses_what_would_wrap() {
        let half = model(1 << 61); // 2^63 bytes in all
        // Refusing policy: the second 2^63 B does not fit beside the first.
        let a = Admission::new(usize::MAX);
        let first = a.admit(&half).unwrap();
        match a.admit(&half) {
            Err(ProverError::Refused(r)) => assert_eq!((r.in_flight, r.budget), (1 << 63, usize::MAX)),
            other => panic!("expected Refused, got {other:?}"),
        }
        assert_eq!(a.in_flight(), 1 << 63);
        drop(first);
        assert_eq!(a.in_flight(), 0);
        // Waiting policy: the second waits, and times out with a typed error.
        let w = Admission::waiting(usize::MAX, Duration::ZERO, "test device");
        let first = w.admit(&half).unwrap();
        match w.admit(&half) {
            Err(ProverError::WaitTimedOut { needed, blocked: Blocked::Budget { admitted, .. }, .. }) => {
                assert_eq!((needed, admitted), (1 << 63, 1 << 63));
            }
            other => panic!("expected WaitTimedOut on the budget, got {other:?}"),
        }
        drop(first);
        assert_eq!(w.in_flight(), 0);
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
        assert!(matches!(err, crate::ProverError::Refused(ref r) if r.in_flight == 1000));
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

    #[test]
    fn the_waiting_rule_checks_queue_budget_then_device_memory() {
        let view = |admitted, admitted_count, ahead| QueueView { admitted, pending: 0, admitted_count, ahead };
        let mem = |free, total| Some(DeviceMemory { free, total });
        assert_eq!(blocked(10, 100, view(90, 3, 0), None), None);
        assert_eq!(blocked(10, 100, view(0, 0, 2), None), Some(Blocked::Queue { ahead: 2 }));
        assert_eq!(blocked(11, 100, view(90, 3, 0), None), Some(Blocked::Budget { admitted: 90, commits: 3 }));
        // Free memory short: another program holds it.
        assert_eq!(
            blocked(10, 100, view(0, 0, 0), mem(9, 1000)),
            Some(Blocked::DeviceMemory { free: 9, total: 1000, admitted: 0, pending: 0 })
        );
        assert_eq!(blocked(10, 100, view(0, 0, 0), mem(10, 1000)), None);
        // Plenty free (the admitted commits have not allocated yet) but the device's total less
        // what is admitted is short.
        assert_eq!(
            blocked(10, 100, view(95, 1, 0), mem(1000, 100)),
            Some(Blocked::Budget { admitted: 95, commits: 1 })
        );
        assert_eq!(
            blocked(10, 200, view(95, 1, 0), mem(1000, 100)),
            Some(Blocked::DeviceMemory { free: 1000, total: 100, admitted: 95, pending: 0 })
        );
        assert_eq!(blocked(5, 200, view(95, 1, 0), mem(1000, 100)), None);
        // An admitted commit still allocating is not in the free figure yet: it counts against it.
        let allocating = QueueView { admitted: 30, pending: 30, admitted_count: 1, ahead: 0 };
        assert_eq!(
            blocked(10, 100, allocating, mem(39, 1000)),
            Some(Blocked::DeviceMemory { free: 39, total: 1000, admitted: 30, pending: 30 })
        );
        assert_eq!(blocked(10, 100, allocating, mem(40, 1000)), None);
    }

    #[test]
    fn a_waiting_commit_is_admitted_when_a_ticket_drops() {
        let a = Admission::waiting(1000, Duration::from_secs(30), "test device");
        let held = a.admit(&model(200)).unwrap(); // 800
        // The clock starts before the waiter is spawned: on a loaded machine the thread may start
        // late, and the wait is measured against the drop below, not against its start.
        let t0 = Instant::now();
        std::thread::scope(|s| {
            let waiter = s.spawn(|| {
                let t = a.admit(&model(100)).unwrap(); // 400: waits for `held`
                (t0.elapsed(), t.bytes())
            });
            std::thread::sleep(Duration::from_millis(150));
            assert_eq!(a.in_flight(), 800, "the waiter must not be admitted beside `held`");
            drop(held);
            let (waited, bytes) = waiter.join().unwrap();
            assert!(waited >= Duration::from_millis(140), "admitted after {waited:?}");
            assert_eq!(bytes, 400);
        });
        assert_eq!(a.in_flight(), 0);
    }

    #[test]
    fn timeouts_name_what_was_waited_for_and_never_fitting_is_refused_at_once() {
        let a = Admission::waiting(1000, Duration::from_millis(60), "cuda GPU-test");
        let _held = a.admit(&model(200)).unwrap();
        let t0 = Instant::now();
        let err = a.admit(&model(100)).unwrap_err();
        assert!(t0.elapsed() >= Duration::from_millis(60));
        let msg = err.to_string();
        assert!(
            matches!(
                err,
                ProverError::WaitTimedOut {
                    needed: 400,
                    budget: 1000,
                    blocked: Blocked::Budget { admitted: 800, commits: 1 },
                    ..
                }
            ),
            "{err:?}"
        );
        for part in ["400 B", "cuda GPU-test", "1000 B", "800 B", "1 other commit"] {
            assert!(msg.contains(part), "{part:?} missing from: {msg}");
        }
        assert_eq!(err.exit_code(), crate::EXIT_WAIT_TIMED_OUT);
        // A model above the whole budget could never be admitted: refused, not waited for.
        let t0 = Instant::now();
        let err = a.admit(&model(300)).unwrap_err();
        assert!(t0.elapsed() < Duration::from_millis(50), "refusal took {:?}", t0.elapsed());
        assert!(matches!(err, ProverError::Refused(_)), "{err:?}");
        // Device memory held by someone else blocks too, and a zero timeout looks once.
        let b = Admission::waiting(1000, Duration::ZERO, "dev");
        let err = b.admit_on(&model(10), &|| Some(DeviceMemory { free: 39, total: 10_000 })).unwrap_err();
        assert!(matches!(err, ProverError::WaitTimedOut { blocked: Blocked::DeviceMemory { free: 39, .. }, .. }));
        assert!(err.to_string().contains("39 B"), "{err}");
        b.admit_on(&model(10), &|| Some(DeviceMemory { free: 40, total: 10_000 })).unwrap();
    }

    #[test]
    fn commits_still_allocating_count_against_the_free_memory() {
        let a = Admission::waiting(1000, Duration::from_millis(50), "dev");
        let free = || Some(DeviceMemory { free: 500, total: 10_000 });
        let mut first = a.admit_on(&model(100), &free).unwrap();
        // The first commit's 400 B may not be allocated yet: 400 + 400 > 500 free.
        let err = a.admit_on(&model(100), &free).unwrap_err();
        assert!(
            matches!(err, ProverError::WaitTimedOut { blocked: Blocked::DeviceMemory { pending: 400, .. }, .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains("400 B (400 B) of them still allocating"), "{err}");
        // Settled: the driver's free figure already shows it.
        first.shrink_to(400);
        assert_eq!(first.bytes(), 400);
        let second = a.admit_on(&model(100), &free).unwrap();
        drop(first);
        drop(second);
        assert_eq!(a.in_flight(), 0);
        // Dropping an unsettled ticket releases its pending bytes too.
        let third = a.admit_on(&model(100), &free).unwrap();
        drop(third);
        a.admit_on(&model(100), &free).unwrap();
    }

    #[test]
    fn waiting_commits_are_served_in_arrival_order() {
        // Budget 1000; one commit holds 600. Then a large (800) and, later, a small (400) commit
        // arrive. The small one fits beside the held one, but the large one came first: it must
        // not be overtaken. The small one does not fit beside the large one either, so it is
        // admitted only once the large one has recorded itself and finished: the recorded order
        // is the admission order, with no race between the two threads' pushes.
        let a = Admission::waiting(1000, Duration::from_secs(30), "dev");
        let held = a.admit(&model(150)).unwrap();
        let order = Mutex::new(Vec::new());
        std::thread::scope(|s| {
            let large = s.spawn(|| {
                let t = a.admit(&model(200)).unwrap();
                order.lock().unwrap().push("large");
                std::thread::sleep(Duration::from_millis(50));
                drop(t);
            });
            // Wait until the large commit is queued (a fixed sleep loses this race on a loaded
            // machine, and the small one would then rightly go first).
            let queued = Instant::now();
            while a.inner.local().queue.is_empty() {
                assert!(queued.elapsed() < Duration::from_secs(30), "the large commit never queued");
                std::thread::sleep(Duration::from_millis(1));
            }
            let small = s.spawn(|| {
                let _t = a.admit(&model(100)).unwrap();
                order.lock().unwrap().push("small");
            });
            std::thread::sleep(Duration::from_millis(150));
            assert!(order.lock().unwrap().is_empty(), "nothing may pass the large commit: {:?}", order.lock());
            drop(held);
            large.join().unwrap();
            small.join().unwrap();
        });
        assert_eq!(*order.lock().unwrap(), ["large", "small"]);
    }

    #[test]
    fn cross_process_admissions_share_one_budget() {
        let scratch = tempfile::tempdir().unwrap();
        let root = scratch.path().join("admission");
        // Two admissions over one directory behave as two processes (each ticket is its own
        // locked file).
        let a = Admission::cross_process(1000, Duration::from_millis(80), &root, "GPU-x").unwrap();
        let b = Admission::cross_process(1000, Duration::from_secs(30), &root, "GPU-x").unwrap();
        let other = Admission::cross_process(1000, Duration::ZERO, &root, "GPU y/1").unwrap();
        assert_eq!(other.queue_dir(), Some(root.join("GPU_y_1").as_path()));
        assert_eq!(Admission::new(1).queue_dir(), None);
        let mut held = a.admit(&model(200)).unwrap();
        assert_eq!(b.device_in_flight().unwrap(), 800);
        assert_eq!(other.device_in_flight().unwrap(), 0, "another device's queue is separate");
        let _elsewhere = other.admit(&model(200)).unwrap();
        let err = a.admit(&model(100)).unwrap_err();
        assert!(
            matches!(err, ProverError::WaitTimedOut { blocked: Blocked::Budget { admitted: 800, .. }, .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains("GPU-x"), "{err}");
        held.shrink_to(500);
        assert_eq!(b.device_in_flight().unwrap(), 500);
        std::thread::scope(|s| {
            let waiter = s.spawn(|| b.admit(&model(150)).map(|t| t.bytes()));
            std::thread::sleep(Duration::from_millis(100));
            drop(held);
            assert_eq!(waiter.join().unwrap().unwrap(), 600);
        });
        assert_eq!(a.in_flight(), 0);
    }
}
