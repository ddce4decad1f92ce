//! Freeing large host allocations off the prover's thread.
//!
//! Unmapping an allocation of ordinary 4 KiB pages costs the thread that frees it about 50 ms
//! per GB: the kernel tears down one page-table entry per page (4.3 GB took 231 ms on an H200's
//! host, `host_path transfers 21 256`). A fused commit is done with its input matrices once the
//! trace is on the device, and Plonky3's prover gives them to the PCS by value, so their free
//! would land inside `Pcs::commit` (the 2.1 GB trace of a 2^20 x 256 proof: about 100 ms). They
//! are handed here instead: one thread of this process frees what it is given, in order, while the
//! prover goes on.
//!
//! - **Bounded:** at most [`QUEUED`] values wait for the thread; a caller blocks while the queue
//!   is full, so memory awaiting its free stays bounded by a few commits' inputs.
//! - **Never lost:** where the thread cannot be started or has gone, the caller frees the value
//!   itself, as it would have without this module.

use std::sync::OnceLock;
use std::sync::mpsc::{self, SyncSender};

/// Values that may wait for the freeing thread before [`drop_later`] blocks.
pub(crate) const QUEUED: usize = 2;

/// Anything the freeing thread can drop.
type Garbage = Box<dyn Send>;

/// The freeing thread's queue, started by the first [`drop_later`]; `None` where the thread could
/// not be started.
static QUEUE: OnceLock<Option<SyncSender<Garbage>>> = OnceLock::new();

/// Drops `value` on this process's freeing thread (see the [module](self) documentation), or
/// here where that thread is unavailable. For large allocations: a small one costs less to free
/// than to send.
pub(crate) fn drop_later<T: Send + 'static>(value: T) {
    let queue = QUEUE.get_or_init(|| {
        let (tx, rx) = mpsc::sync_channel::<Garbage>(QUEUED);
        std::thread::Builder::new()
            .name("plonky3-adapter free".into())
            .spawn(move || rx.into_iter().for_each(drop))
            .map(|_| tx)
            .map_err(|e| tracing::warn!("plonky3-adapter: no thread for deferred frees ({e}); freeing in place"))
            .ok()
    });
    match queue {
        Some(tx) => {
            if let Err(mpsc::SendError(value)) = tx.send(Box::new(value)) {
                drop(value);
            }
        }
        None => drop(value),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc::Sender;
    use std::thread::{self, ThreadId};
    use std::time::Duration;

    use super::*;

    /// Reports the thread that drops it.
    struct Reporter(Sender<ThreadId>);

    impl Drop for Reporter {
        fn drop(&mut self) {
            let _ = self.0.send(thread::current().id());
        }
    }

    #[test]
    fn values_are_dropped_on_another_thread_in_order() {
        let (tx, rx) = mpsc::channel();
        let here = thread::current().id();
        // More than the queue holds: the caller blocks until the thread takes one, never drops
        // one itself while the thread runs.
        for _ in 0..QUEUED * 4 {
            drop_later(Reporter(tx.clone()));
        }
        let mut dropped_on = Vec::new();
        for _ in 0..QUEUED * 4 {
            dropped_on.push(rx.recv_timeout(Duration::from_secs(30)).expect("every value is dropped"));
        }
        assert!(dropped_on.iter().all(|&t| t != here), "dropped on the freeing thread, not the caller's");
        assert!(dropped_on.windows(2).all(|w| w[0] == w[1]), "one freeing thread");
        assert!(rx.try_recv().is_err(), "each value dropped once");
    }

    #[test]
    fn a_large_vector_is_freed() {
        let (tx, rx) = mpsc::channel();
        drop_later((vec![7u64; 1 << 20], Reporter(tx)));
        rx.recv_timeout(Duration::from_secs(30)).expect("the pair is dropped");
    }
}
