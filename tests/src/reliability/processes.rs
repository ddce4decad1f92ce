//! Waiting admission across processes: real `prover commit --wait-for-memory` processes sharing
//! one device's reservation queue.
//!
//! The checks drive the `prover` binary (its path comes from the caller: the prover crate's
//! integration tests have it as `CARGO_BIN_EXE_prover`). The test process itself joins the queue
//! with an [`Admission::cross_process`] of its own, so that it can hold the budget while the
//! processes start: every process then provably waits, whatever the machine's speed. Each check
//! uses a fresh reservation directory, so checks never see each other's queues.
//!
//! The queue's files are read directly to watch the processes (`r-<seq>-<pid>` holding
//! `"<bytes> waiting|admitted|settled"`, the format docs/operations.md documents).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use backend_api::{MatrixShape, hex};
use commit::memory::MemoryModel;
use commit::{Admission, CommitParams, EXIT_WAIT_TIMED_OUT, Ticket, synthetic_trace};

use super::table::{Table, oracle};
use crate::{Failure, Outcome, ensure};

/// The synthetic table every process commits: `2^LOG_ROWS x COLS`, seed [`SEED`].
pub const LOG_ROWS: u32 = 8;
/// Columns of that table.
pub const COLS: usize = 8;
/// Its seed.
pub const SEED: u64 = 11;
/// How long a process that is meant to wait may wait; far above anything the checks need.
pub const LONG_WAIT: &str = "120s";
/// How long a process that is meant to time out waits.
pub const SHORT_WAIT: &str = "300ms";

/// What a process check needs: the `prover` binary, the backend to run, and the key of that
/// backend's device queue (`prover::select::SelectedBackend::device_key`).
pub struct ProcessSetup<'a> {
    /// The `prover` executable.
    pub exe: &'a Path,
    /// The `--backend` value.
    pub backend: &'a str,
    /// The device's reservation key.
    pub device_key: &'a str,
}

/// A process check.
pub type ProcessCheck = fn(&ProcessSetup<'_>) -> Outcome;

/// The table, its modelled bytes and its expected roots (the CPU oracle, itself checked against
/// the naive references).
struct Expected {
    model: usize,
    roots: Vec<String>,
}

fn expected() -> Result<Expected, Failure> {
    let shape = MatrixShape::new(1 << LOG_ROWS, COLS).map_err(|e| Failure(e.to_string()))?;
    let table = Table {
        name: format!("synthetic 2^{LOG_ROWS} x {COLS}, seed {SEED}"),
        rows: 1 << LOG_ROWS,
        cols: COLS,
        data: synthetic_trace(shape, SEED),
        params: CommitParams::default(),
    };
    let model = table.plan()?.model.total();
    let roots = oracle(&table)?.roots.iter().map(|r| hex(r)).collect();
    Ok(Expected { model, roots })
}

/// A fresh reservation directory for one check on one backend (the checks of several backends
/// may run at once in one test process, so the backend is part of the name).
fn fresh_root(setup: &ProcessSetup<'_>, check: &str) -> PathBuf {
    let root =
        std::env::temp_dir().join(format!("stark-commit-processes-{}-{}-{check}", std::process::id(), setup.backend));
    let _ = std::fs::remove_dir_all(&root);
    root
}

/// Holds `bytes` in the device's queue under `root` from this test process; returns the ticket
/// and the queue's directory.
fn hold(setup: &ProcessSetup<'_>, root: &Path, budget: usize, bytes: usize) -> Result<(Ticket, PathBuf), Failure> {
    let admission = Admission::cross_process(budget, Duration::from_secs(10), root, setup.device_key)
        .map_err(|e| Failure(format!("joining the queue: {e}")))?;
    let dir = admission.queue_dir().ok_or_else(|| Failure("a cross-process admission has a queue".into()))?.to_owned();
    let model = MemoryModel { lde: bytes, trace: 0, trees: 0, scratch: 0, twiddles: 0 };
    let ticket = admission.admit(&model).map_err(|e| Failure(format!("holding {bytes} B of the budget: {e}")))?;
    Ok((ticket, dir))
}

/// Starts `prover commit` of the check's table, waiting up to `wait`.
fn spawn(setup: &ProcessSetup<'_>, root: &Path, budget: usize, wait: &str) -> Result<Child, Failure> {
    Command::new(setup.exe)
        .args(["commit", "--backend", setup.backend, "--log-rows", &LOG_ROWS.to_string(), "--cols", &COLS.to_string()])
        .args(["--seed", &SEED.to_string(), "--budget", &budget.to_string(), "--wait-for-memory", wait])
        .arg("--reservations")
        .arg(root)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Failure(format!("starting {}: {e}", setup.exe.display())))
}

/// The reservations in the queue now: `(pid, admitted)` per live file, the test's own excluded.
/// A file caught mid-rewrite is skipped (the next look sees it whole).
fn queue(dir: &Path) -> Vec<(u32, bool)> {
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let pid: u32 = name.strip_prefix("r-")?.split_once('-')?.1.parse().ok()?;
            let text = std::fs::read_to_string(e.path()).ok()?;
            let admitted = match text.split_whitespace().nth(1)? {
                "admitted" | "settled" => true,
                "waiting" => false,
                _ => return None,
            };
            (pid != me).then_some((pid, admitted))
        })
        .collect()
}

/// Polls until `done(queue)` or `timeout`.
fn wait_for(dir: &Path, timeout: Duration, what: &str, done: impl Fn(&[(u32, bool)]) -> bool) -> Outcome {
    let start = Instant::now();
    loop {
        let q = queue(dir);
        if done(&q) {
            return Ok(());
        }
        if start.elapsed() > timeout {
            return Err(Failure(format!("{what}: not seen within {timeout:?}; the queue holds {q:?}")));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits for `child` for at most `timeout`, killing it after that (a hang is a failure).
fn finish(mut child: Child, timeout: Duration) -> Result<Output, Failure> {
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if start.elapsed() > timeout => {
                let _ = child.kill();
                let out = child.wait_with_output().map_err(|e| Failure(e.to_string()))?;
                return Err(Failure(format!(
                    "a prover process hung for {timeout:?} (killed); stderr: {}",
                    String::from_utf8_lossy(&out.stderr)
                )));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(Failure(format!("waiting for a prover process: {e}"))),
        }
    }
    child.wait_with_output().map_err(|e| Failure(format!("collecting a prover process's output: {e}")))
}

/// The roots a successful text report prints (`root of columns [a, b) (...): <hex>`).
fn roots_of(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.trim_start().starts_with("root of columns"))
        .filter_map(|l| l.split_whitespace().last().map(str::to_owned))
        .collect()
}

/// Checks that `out` is a success with the expected roots.
fn ensure_correct(out: &Output, exp: &Expected, what: &str) -> Outcome {
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(out.status.success(), "{what}: exit {:?}, stderr: {stderr}", out.status.code());
    let roots = roots_of(out);
    ensure!(roots == exp.roots, "{what}: roots {roots:?}, expected {:?}", exp.roots);
    Ok(())
}

/// Eight `prover commit` processes (not threads) on one device, each with a budget that admits two
/// of them at a time. The test process holds two commits' worth of the queue while they start:
/// four wait up to [`LONG_WAIT`], four up to [`SHORT_WAIT`]. Checked:
/// - none is admitted while the budget is held: the long waiters are all seen waiting;
/// - the four short waiters fail cleanly: exit [`EXIT_WAIT_TIMED_OUT`], a message naming the
///   bytes waited for and the device, nothing on stdout;
/// - once the hold is dropped, the four long waiters all finish with the CPU oracle's roots;
/// - at no sample are more than two processes admitted at once;
/// - the queue is empty afterwards.
///
/// # Errors
/// Any of the above violated.
pub fn eight_processes_under_a_two_commit_budget(setup: &ProcessSetup<'_>) -> Outcome {
    let exp = expected()?;
    let budget = 2 * exp.model + exp.model / 2;
    let root = fresh_root(setup, "eight");
    let (held, dir) = hold(setup, &root, budget, 2 * exp.model)?;
    let mut long = Vec::new();
    let mut short = Vec::new();
    for i in 0..8 {
        let wait = if i % 2 == 0 { LONG_WAIT } else { SHORT_WAIT };
        let child = spawn(setup, &root, budget, wait);
        match child {
            Ok(c) if i % 2 == 0 => long.push(c),
            Ok(c) => short.push(c),
            Err(f) => {
                for mut c in long.into_iter().chain(short) {
                    let _ = c.kill();
                    let _ = c.wait();
                }
                return Err(f);
            }
        }
    }
    // The short waiters give up while the budget is still held (300 ms after they queue).
    let short_out: Vec<_> = short.into_iter().map(|c| finish(c, Duration::from_secs(60))).collect();
    let long_pids: Vec<u32> = long.iter().map(Child::id).collect();
    let mut failure = wait_for(&dir, Duration::from_secs(60), "the four long waiters queued and waiting", |q| {
        long_pids.iter().all(|p| q.contains(&(*p, false)))
    })
    .err();
    let admitted_while_held = queue(&dir).iter().filter(|&&(_, a)| a).count();
    drop(held);
    // Watch the queue while the long waiters run.
    let mut most_admitted = 0;
    let mut pending = long;
    let mut long_out = Vec::new();
    let start = Instant::now();
    while !pending.is_empty() {
        most_admitted = most_admitted.max(queue(&dir).iter().filter(|&&(_, a)| a).count());
        let mut still = Vec::new();
        for mut c in pending {
            match c.try_wait() {
                Ok(Some(_)) => long_out.push(finish(c, Duration::from_secs(5))),
                _ if start.elapsed() > Duration::from_secs(120) => long_out.push(finish(c, Duration::ZERO)),
                _ => still.push(c),
            }
        }
        pending = still;
        std::thread::sleep(Duration::from_millis(2));
    }
    let leftover = queue(&dir);
    let _ = std::fs::remove_dir_all(&root);

    if let Some(f) = failure.take() {
        return Err(f);
    }
    ensure!(admitted_while_held == 0, "{admitted_while_held} process(es) admitted while the budget was held");
    for (i, out) in short_out.into_iter().enumerate() {
        let out = out?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        ensure!(
            out.status.code() == Some(i32::from(EXIT_WAIT_TIMED_OUT)),
            "short waiter {i}: exit {:?}, expected {EXIT_WAIT_TIMED_OUT}; stderr: {stderr}",
            out.status.code()
        );
        let needed = format!("waiting for {} B", exp.model);
        ensure!(
            stderr.contains("timed out after") && stderr.contains(&needed) && stderr.contains(setup.device_key),
            "short waiter {i}: the message must say what was waited for ({needed}, {}): {stderr}",
            setup.device_key
        );
        ensure!(out.stdout.is_empty(), "short waiter {i} printed a report: {}", String::from_utf8_lossy(&out.stdout));
    }
    for (i, out) in long_out.into_iter().enumerate() {
        ensure_correct(&out?, &exp, &format!("long waiter {i}"))?;
    }
    ensure!(most_admitted <= 2, "{most_admitted} processes were admitted at once under a budget for two");
    ensure!(leftover.is_empty(), "the queue still holds {leftover:?}");
    Ok(())
}

/// A process waiting in the queue is killed with SIGKILL: its reservation disappears without any
/// cleanup by hand, so the process queued behind it (first come, first served: it could not pass
/// a live one) is admitted and commits correctly once the budget is free.
///
/// # Errors
/// The killed process's file still there after 10 s, or the second process not finishing
/// correctly.
pub fn sigkill_of_a_waiting_process_frees_its_share(setup: &ProcessSetup<'_>) -> Outcome {
    let exp = expected()?;
    let budget = exp.model + exp.model / 2;
    let root = fresh_root(setup, "sigkill");
    let (held, dir) = hold(setup, &root, budget, exp.model)?;
    let mut first = spawn(setup, &root, budget, LONG_WAIT)?;
    let first_pid = first.id();
    let queued = wait_for(&dir, Duration::from_secs(60), "the first process queued", |q| {
        q.iter().any(|&(p, a)| p == first_pid && !a)
    });
    let second = match queued {
        Ok(()) => spawn(setup, &root, budget, LONG_WAIT),
        Err(f) => Err(f),
    };
    let result = (|| {
        let second = second?;
        let second_pid = second.id();
        wait_for(&dir, Duration::from_secs(60), "the second process queued behind the first", |q| {
            q.iter().any(|&(p, _)| p == second_pid)
        })?;
        // Child::kill is SIGKILL on Unix: no handler runs, nothing is cleaned up by the process.
        first.kill().map_err(|e| Failure(format!("SIGKILL of the first process: {e}")))?;
        let _ = first.wait();
        // The second process's polls find the dead owner's unlocked file and delete it.
        wait_for(&dir, Duration::from_secs(10), "the killed process's reservation gone", |q| {
            q.iter().all(|&(p, _)| p != first_pid)
        })?;
        drop(held);
        let out = finish(second, Duration::from_secs(120))?;
        ensure_correct(&out, &exp, "the process queued behind the killed one")?;
        let left = queue(&dir);
        ensure!(left.is_empty(), "the queue still holds {left:?}");
        Ok(())
    })();
    let _ = first.kill();
    let _ = first.wait();
    let _ = std::fs::remove_dir_all(&root);
    result
}

/// Runs a process check on `backend` (the prover binary at `exe`, whose device queue for that
/// backend has the key `device_key`), or prints `SKIPPED <backend>::<name>: <reason>` when the
/// caller could not make the backend (`device_key` is then `Err(reason)`; a failure when
/// `require_env` is `1`).
///
/// The caller forms the key the binary forms (`prover`'s own tests take it from
/// `prover::select`), so this crate needs neither the binary's crate nor its backend selection.
///
/// # Panics
/// When the check fails, or when the backend could not be made and `require_env` is `1`.
pub fn run_process_check(
    exe: &Path,
    backend: &str,
    device_key: Result<String, String>,
    name: &str,
    require_env: &str,
    check: ProcessCheck,
) {
    match device_key {
        Ok(device_key) => {
            let start = Instant::now();
            if let Err(f) = check(&ProcessSetup { exe, backend, device_key: &device_key }) {
                panic!("{backend}::{name}: {f}");
            }
            println!("{backend}::{name}: passed in {:.2} s", start.elapsed().as_secs_f64());
        }
        Err(reason) => crate::reference::skip::skip(
            &format!("{backend}::{name}"),
            format_args!("the backend could not be made: {reason}"),
            require_env,
        ),
    }
}
