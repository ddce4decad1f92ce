//! Cross-process reservations of one device's memory: a queue of files, each held by a `flock`.
//!
//! A directory per device (named by its key, e.g. the CUDA UUID) holds:
//! - `lock`: every reader and writer holds an exclusive `flock` on it for one short scan or
//!   update, never while waiting, so the directory is always seen in a consistent state;
//! - `seq`: the next queue number (decimal text), replaced through `seq.tmp` and a rename;
//! - `r-<seq>-<pid>`: one reservation, `"<bytes> waiting"`, `"<bytes> admitted"` (its commit may
//!   still be allocating) or `"<bytes> settled"` (its commit has made its last allocation, so the
//!   driver's free memory already counts it). Its owner holds an exclusive `flock` on it from
//!   creation to release.
//!
//! **Crash safety.** The kernel drops a process's `flock`s when it dies, however it dies. A scan
//! that can lock someone else's reservation file has found a dead owner: it deletes the file, and
//! the bytes (or the queue place) are free again at the next poll of any waiter, within
//! [`crate::admission::POLL`]. Nothing needs cleaning by hand.
//!
//! **Order.** Queue numbers are handed out under the directory lock, so they follow arrival;
//! a reservation is admitted only when no older one is still waiting (first come, first served).
//!
//! **One user's.** The root and the device's directory are [`PrivateDir`]s: created `0700`,
//! refused unless owned by the effective user, not writable by group or others and not symbolic
//! links, then used through their descriptors. Every file is opened relative to the directory
//! without following links or blocking, refused unless a regular file of the same user, and read
//! through a small bound. Another user can therefore neither redirect a write of the queue nor
//! forge or stall a reservation; each user has a queue of their own, and users see each other
//! only through the driver's free memory (`docs/files-and-permissions.md`).
//!
//! `flock` locks belong to an open file description, so two threads of one process that each
//! open a reservation see each other exactly as two processes do.

use std::fs::{File, TryLockError};
use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::secure_fs::{FsError, Open, PrivateDir, read_small};

/// One device's reservation directory.
#[derive(Debug)]
pub(crate) struct Reservations {
    dir: PrivateDir,
}

/// A reservation this process holds; its file stays locked until it is dropped.
#[derive(Debug)]
pub(crate) struct Reservation {
    name: String,
    file: File,
    seq: u64,
    bytes: usize,
}

/// What a scan of the directory found, seen from one reservation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct QueueView {
    /// Bytes admitted to the other live reservations.
    pub(crate) admitted: usize,
    /// Of those, bytes of reservations not yet settled: their commits may still be allocating,
    /// so the driver's free memory may not show them yet.
    pub(crate) pending: usize,
    /// Live reservations admitted, other than the one asking.
    pub(crate) admitted_count: usize,
    /// Live reservations still waiting that are older than the one asking.
    pub(crate) ahead: usize,
}

/// The names of the directory's fixed files.
const LOCK: &str = "lock";
const SEQ: &str = "seq";

impl Reservations {
    /// Opens (creating it if needed) the reservation directory of device `key` under `root`.
    ///
    /// `root` and the device's directory are created `0700` and must be owned by the effective
    /// user, not writable by group or others, and not symbolic links (checked at every open);
    /// otherwise [`FsError::Unsafe`] names the directory, what is wrong and the fix.
    pub(crate) fn open(root: &Path, key: &str) -> Result<Self, FsError> {
        let dir = PrivateDir::open_root(root)?.open_subdir(&sanitize(key))?;
        Ok(Self { dir })
    }

    /// The directory.
    pub(crate) fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn io(&self, name: &str, action: &'static str) -> impl FnOnce(io::Error) -> FsError + use<> {
        let path = self.dir.path().join(name);
        move |source| FsError::Io { path, action, source }
    }

    /// Holds the directory lock for the duration of `f`.
    fn locked<T>(&self, f: impl FnOnce() -> Result<T, FsError>) -> Result<T, FsError> {
        let lock = self.dir.open_file(LOCK, Open::CreateOrExisting)?.ok_or_else(|| FsError::Io {
            path: self.dir.path().join(LOCK),
            action: "open it",
            source: io::ErrorKind::NotFound.into(),
        })?;
        lock.lock().map_err(self.io(LOCK, "lock it"))?;
        let out = f();
        // Closing the file drops the lock too; unlocking first keeps the order explicit.
        let _ = lock.unlock();
        out
    }

    /// The next queue number: the one `seq` holds, and never one a live reservation already has
    /// (should `seq` have been lost or garbled). Under the directory lock.
    fn next_seq(&self) -> Result<u64, FsError> {
        let stored = match self.dir.open_file(SEQ, Open::Existing)? {
            Some(file) => read_small(&file, &self.dir.path().join(SEQ))?.trim().parse::<u64>().unwrap_or(0),
            None => 0,
        };
        let used = self.dir.names()?.iter().filter_map(|n| parse_name(n)).max().map_or(0, |s| s.saturating_add(1));
        Ok(stored.max(used))
    }

    /// Joins the queue: a new `waiting` reservation of `bytes`, locked by this process.
    pub(crate) fn enqueue(&self, bytes: usize) -> Result<Reservation, FsError> {
        self.locked(|| {
            let seq = self.next_seq()?;
            // Written to a new file renamed over `seq`: never through a path someone could
            // have pointed elsewhere.
            self.dir.replace(SEQ, format!("{}\n", seq.saturating_add(1)).as_bytes())?;
            let name = format!("r-{seq:020}-{}", std::process::id());
            let file = self.dir.open_file(&name, Open::CreateNew)?.ok_or_else(|| FsError::Io {
                path: self.dir.path().join(&name),
                action: "create it",
                source: io::ErrorKind::NotFound.into(),
            })?;
            // Locked before the directory lock is released, so no scan ever sees it unlocked.
            file.lock().map_err(self.io(&name, "lock it"))?;
            let mut r = Reservation { name, file, seq, bytes };
            r.write_state(State::Waiting).map_err(self.io(&r.name, "write it"))?;
            Ok(r)
        })
    }

    /// Scans the queue as `me` sees it, deleting the files of dead owners, then lets `decide`
    /// admit `me` (its state is rewritten to `admitted`) or not, all under the directory lock.
    pub(crate) fn poll<T>(
        &self,
        me: &mut Reservation,
        decide: impl FnOnce(QueueView) -> (bool, T),
    ) -> Result<T, FsError> {
        self.locked(|| {
            let view = self.scan(Some(me.seq))?;
            let (admit, out) = decide(view);
            if admit {
                me.write_state(State::Admitted).map_err(self.io(&me.name, "write it"))?;
            }
            Ok(out)
        })
    }

    /// The queue as an outsider sees it (every live reservation), dead owners' files deleted.
    pub(crate) fn view(&self) -> Result<QueueView, FsError> {
        self.locked(|| self.scan(None))
    }

    /// Rewrites `me` to hold `bytes` (no more than before) and marks it settled: its commit has
    /// made its last allocation. Under the directory lock.
    pub(crate) fn settle(&self, me: &mut Reservation, bytes: usize) -> Result<(), FsError> {
        self.locked(|| {
            me.bytes = bytes;
            me.write_state(State::Settled).map_err(self.io(&me.name, "write it"))
        })
    }

    /// Gives `me` back: its file is deleted and its lock dropped.
    pub(crate) fn release(&self, me: Reservation) {
        // Deleted under the directory lock so that no scan reads a half-gone reservation; if
        // anything fails the file stays, unlocked once `me` drops, and the next scan deletes it.
        let _ = self.locked(|| self.dir.remove(&me.name));
        drop(me);
    }

    fn scan(&self, me: Option<u64>) -> Result<QueueView, FsError> {
        let mut view = QueueView::default();
        for name in self.dir.names()? {
            let Some(seq) = parse_name(&name) else { continue };
            if Some(seq) == me {
                continue;
            }
            // Not followed if it is a link, refused if it is not a regular file of this user.
            let Some(file) = self.dir.open_file(&name, Open::Existing)? else { continue };
            match file.try_lock() {
                Ok(()) => {
                    // Nobody holds it: its owner is gone (killed, crashed), so is its claim.
                    let _ = self.dir.remove(&name);
                    continue;
                }
                Err(TryLockError::WouldBlock) => {}
                Err(TryLockError::Error(e)) => return Err(self.io(&name, "lock it")(e)),
            }
            let path = self.dir.path().join(&name);
            let text = read_small(&file, &path)?;
            let (bytes, state) = parse_state(&text).ok_or_else(|| FsError::Io {
                path: path.clone(),
                action: "read the reservation",
                source: io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("a live reservation reads {text:?}, expected \"<bytes> waiting|admitted|settled\""),
                ),
            })?;
            match state {
                State::Waiting => {
                    if me.is_none_or(|m| seq < m) {
                        view.ahead += 1;
                    }
                }
                State::Admitted | State::Settled => {
                    view.admitted = view.admitted.saturating_add(bytes);
                    view.admitted_count += 1;
                    if state == State::Admitted {
                        view.pending = view.pending.saturating_add(bytes);
                    }
                }
            }
        }
        Ok(view)
    }
}

/// Where a reservation stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Waiting,
    Admitted,
    Settled,
}

impl Reservation {
    fn write_state(&mut self, state: State) -> io::Result<()> {
        let word = match state {
            State::Waiting => "waiting",
            State::Admitted => "admitted",
            State::Settled => "settled",
        };
        let text = format!("{} {word}\n", self.bytes);
        self.file.set_len(0)?;
        self.file.seek(SeekFrom::Start(0))?;
        self.file.write_all(text.as_bytes())?;
        self.file.flush()
    }
}

/// The queue number of a reservation file name `r-<seq>-<pid>`.
fn parse_name(name: &str) -> Option<u64> {
    let rest = name.strip_prefix("r-")?;
    let (seq, pid) = rest.split_once('-')?;
    pid.parse::<u32>().ok()?;
    seq.parse().ok()
}

/// `"<bytes> waiting|admitted|settled"`.
fn parse_state(text: &str) -> Option<(usize, State)> {
    let mut words = text.split_whitespace();
    let bytes = words.next()?.parse().ok()?;
    let state = match words.next()? {
        "waiting" => State::Waiting,
        "admitted" => State::Admitted,
        "settled" => State::Settled,
        _ => return None,
    };
    words.next().is_none().then_some((bytes, state))
}

/// A device key as one file name: letters, digits, `.`, `_` and `-`; anything else becomes `_`.
pub(crate) fn sanitize(key: &str) -> String {
    let s: String =
        key.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '_' }).collect();
    if s.is_empty() || s.starts_with('.') { format!("_{s}") } else { s }
}

/// Where reservation directories live by default: `$XDG_RUNTIME_DIR/stark-commit` when that
/// variable names a directory (per user, cleared at logout), else `<temp>/stark-commit-<uid>`
/// (the effective uid). Each user has a queue of their own there; the directory is created `0700`
/// and refused when it is not the user's alone (another user may have made it first in a shared
/// temporary directory): see `docs/files-and-permissions.md`.
pub fn default_reservation_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from).filter(|d| d.is_dir()) {
        return dir.join("stark-commit");
    }
    std::env::temp_dir().join(format!("stark-commit-{}", user_tag()))
}

/// The effective user id on Unix, else the user name.
fn user_tag() -> String {
    #[cfg(unix)]
    {
        rustix::process::geteuid().as_raw().to_string()
    }
    #[cfg(not(unix))]
    {
        std::env::var("USERNAME")
            .or_else(|_| std::env::var("USER"))
            .map(|u| sanitize(&u))
            .unwrap_or_else(|_| "user".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::fs;

    /// A reservation root not yet created (the library makes it), inside a private scratch
    /// directory removed with it when the returned guard drops.
    fn temp_root(name: &str) -> (tempfile::TempDir, PathBuf) {
        let scratch = tempfile::Builder::new().prefix("stark-commit-test-").tempdir().unwrap();
        let root = scratch.path().join(name);
        (scratch, root)
    }

    #[test]
    fn names_states_and_keys_parse_strictly() {
        assert_eq!(parse_name("r-00000000000000000042-1234"), Some(42));
        for bad in ["r-42", "x-1-2", "r--2", "r-1-", "r-1-x", "lock", "seq"] {
            assert_eq!(parse_name(bad), None, "{bad}");
        }
        assert_eq!(parse_state("123 waiting\n"), Some((123, State::Waiting)));
        assert_eq!(parse_state("7 admitted"), Some((7, State::Admitted)));
        assert_eq!(parse_state("9 settled"), Some((9, State::Settled)));
        for bad in ["", "12", "x waiting", "12 done", "12 admitted extra"] {
            assert_eq!(parse_state(bad), None, "{bad}");
        }
        assert_eq!(sanitize("cuda GPU-1a2b/../x"), "cuda_GPU-1a2b_.._x");
        assert_eq!(sanitize(".."), "_..");
        assert_eq!(sanitize(""), "_");
    }

    #[test]
    fn queue_order_admission_and_release() {
        let (_scratch, root) = temp_root("queue");
        let res = Reservations::open(&root, "dev").unwrap();
        let mut a = res.enqueue(100).unwrap();
        let mut b = res.enqueue(50).unwrap();
        assert!(a.seq < b.seq);
        let view = |admitted, pending, admitted_count, ahead| QueueView { admitted, pending, admitted_count, ahead };
        // b sees a waiting ahead of it; a sees nobody ahead.
        assert_eq!(res.poll(&mut b, |v| (false, v)).unwrap(), view(0, 0, 0, 1));
        assert_eq!(res.poll(&mut a, |v| (true, v)).unwrap(), QueueView::default());
        // Admitted, not settled: its bytes are pending too.
        assert_eq!(res.poll(&mut b, |v| (false, v)).unwrap(), view(100, 100, 1, 0));
        assert_eq!(res.view().unwrap(), view(100, 100, 1, 1));
        res.settle(&mut a, 30).unwrap();
        assert_eq!(a.bytes, 30);
        assert_eq!(res.view().unwrap(), view(30, 0, 1, 1));
        res.release(a);
        assert_eq!(res.poll(&mut b, |v| (true, v)).unwrap(), QueueView::default());
        assert_eq!(res.view().unwrap(), view(50, 50, 1, 0));
        res.release(b);
        assert_eq!(res.view().unwrap(), QueueView::default());
    }

    #[test]
    fn an_unlocked_reservation_is_a_dead_owner_and_is_deleted() {
        let (_scratch, root) = temp_root("dead");
        let res = Reservations::open(&root, "dev").unwrap();
        let mut a = res.enqueue(100).unwrap();
        res.poll(&mut a, |_| (true, ())).unwrap();
        let path = res.dir().join(&a.name);
        // What the kernel does when the owner dies: the lock goes, the file stays.
        a.file.unlock().unwrap();
        std::mem::forget(a);
        assert!(path.exists());
        assert_eq!(res.view().unwrap(), QueueView::default());
        assert!(!path.exists(), "a dead owner's file must be deleted by the scan");
        // A live reservation whose file was garbled is an error that names the file.
        let b = res.enqueue(1).unwrap();
        fs::write(res.dir().join(&b.name), "garbage").unwrap();
        let err = res.view().unwrap_err();
        assert!(err.to_string().contains("garbage") && err.to_string().contains("r-"), "{err}");
        res.release(b);
    }

    /// The queue number never repeats one a live reservation has, even when `seq` was lost or
    /// garbled; `seq` is replaced through a new file, never rewritten in place.
    #[test]
    fn queue_numbers_survive_a_lost_or_garbled_seq() {
        let (_scratch, root) = temp_root("seq");
        let res = Reservations::open(&root, "dev").unwrap();
        let a = res.enqueue(1).unwrap();
        let b = res.enqueue(1).unwrap();
        assert_eq!((a.seq, b.seq), (0, 1));
        let seq = res.dir().join(SEQ);
        for garbage in ["", "not a number\n", "0\n"] {
            fs::write(&seq, garbage).unwrap();
            let c = res.enqueue(1).unwrap();
            assert_eq!(c.seq, 2, "seq {garbage:?}: must follow the live reservations");
            res.release(c);
        }
        fs::remove_file(&seq).unwrap();
        let c = res.enqueue(1).unwrap();
        assert_eq!(c.seq, 2);
        assert_eq!(fs::read_to_string(&seq).unwrap(), "3\n");
        // A hard link to `seq` keeps its old bytes: the file is replaced, not rewritten.
        let other = root.join("seq-link");
        fs::hard_link(&seq, &other).unwrap();
        let d = res.enqueue(1).unwrap();
        assert_eq!(
            (fs::read_to_string(&other).unwrap().as_str(), fs::read_to_string(&seq).unwrap().as_str()),
            ("3\n", "4\n")
        );
        for r in [a, b, c, d] {
            res.release(r);
        }
    }

    /// A live reservation longer than one line, a FIFO or another user's file in the queue is
    /// refused with the typed error naming it: never read without bound, waited on, or trusted.
    #[cfg(unix)]
    #[test]
    fn oversized_special_and_foreign_entries_are_refused() {
        let (_scratch, root) = temp_root("entries");
        let res = Reservations::open(&root, "dev").unwrap();
        // A live (locked) reservation whose file grew past one line.
        // One of exactly the bound is read; one byte more is refused.
        let a = res.enqueue(1).unwrap();
        let path = res.dir().join(&a.name);
        let line = format!("7 admitted{}", " ".repeat(246));
        assert_eq!(line.len() as u64, crate::secure_fs::SMALL_FILE_MAX);
        fs::write(&path, &line).unwrap();
        assert_eq!(res.view().unwrap().admitted, 7);
        fs::write(&path, format!("{line} ")).unwrap();
        let err = res.view().unwrap_err().to_string();
        assert!(err.contains(&a.name) && err.contains("more than 256 B"), "{err}");
        res.release(a);
        // A socket where the lock should be (it cannot even be opened): refused, named.
        let lock = res.dir().join(LOCK);
        fs::remove_file(&lock).unwrap();
        let listener = std::os::unix::net::UnixListener::bind(&lock).unwrap();
        match res.view().unwrap_err() {
            FsError::Unsafe { path, problem, .. } => {
                assert_eq!(path, lock);
                assert_eq!(problem, "a socket, where a regular file must be");
            }
            e => panic!("expected the unsafe-path refusal, got {e}"),
        }
        drop(listener);
        fs::remove_file(&lock).unwrap();
        // A FIFO named like a reservation.
        let fifo = res.dir().join("r-00000000000000000099-1");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        match res.view().unwrap_err() {
            FsError::Unsafe { path, problem, fix } => {
                assert_eq!(path, fifo);
                assert!(problem.contains("a FIFO") && fix.contains("remove it"), "{problem}; {fix}");
            }
            e => panic!("expected the unsafe-path refusal, got {e}"),
        }
        fs::remove_file(&fifo).unwrap();
        assert_eq!(res.view().unwrap(), QueueView::default());
        // Another user's file (needs root to make one).
        if rustix::process::geteuid().is_root() {
            let foreign = res.dir().join("r-00000000000000000098-1");
            fs::write(&foreign, "1 admitted\n").unwrap();
            std::os::unix::fs::chown(&foreign, Some(65534), Some(65534)).unwrap();
            let err = res.view().unwrap_err().to_string();
            assert!(err.contains("owned by uid 65534, not by this user (uid 0)"), "{err}");
            // The conversion the CLI prints and exits with.
            let err: crate::ProverError = res.view().unwrap_err().into();
            assert!(matches!(err, crate::ProverError::UnsafePath { .. }) && err.exit_code() == crate::EXIT_USAGE);
        } else {
            println!("SKIPPED the foreign-owner case: needs root to chown a file");
        }
    }
}
