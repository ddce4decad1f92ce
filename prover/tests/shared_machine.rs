//! `prover` on a machine shared with other users: the reservation queue's directories and files
//! cannot be redirected or forged by another user, two users commit on one device side by side,
//! and `--input` / `--out` refuse what would hang, read without bound or write through a link.
//!
//! The tests that need a second real user (a directory owned by another uid, a process running
//! as uid 65534 through `setpriv`) run when the tests run as root, as in CI; elsewhere they print
//! `SKIPPED` (with `REQUIRE_MULTIUSER=1` that is a failure).

#![cfg(unix)]

mod common;

use std::os::unix::fs::{PermissionsExt as _, symlink};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use backend_api::{HashKind, LeafLayout, MatrixShape};
use common::{TestDir, naive_lde, path_str, temp_dir, text};

/// The commit: small, CPU, waiting for memory so that it joins the reservation queue.
const COMMIT: [&str; 9] = ["commit", "--backend", "cpu", "--log-rows", "8", "--cols", "4", "--wait-for-memory", "1s"];

/// The other user of the two-user tests (`nobody` on Debian).
const OTHER_UID: u32 = 65534;
/// A third uid, for files planted by "another user" (needs no account: only the number matters).
const MALLORY_UID: u32 = 65533;

const PRECIOUS: &str = "precious victim data\n";

fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Whether the tests that need a second user can run; prints SKIPPED when not.
fn multiuser(test: &str) -> bool {
    if euid() == 0 {
        return true;
    }
    assert!(
        std::env::var_os("REQUIRE_MULTIUSER").is_none_or(|v| v != "1"),
        "{test}: REQUIRE_MULTIUSER=1 but the tests do not run as root"
    );
    println!("SKIPPED {test}: needs root to act as a second user (chown, setpriv)");
    false
}

/// The synthetic table's root (seed 0, blowup 2, keccak256, rows) from the naive references.
fn reference_root(log_rows: u32, cols: usize) -> String {
    let n = 1usize << log_rows;
    let trace = prover::synthetic_trace(MatrixShape::new(n, cols).unwrap(), 0);
    let lde = naive_lde(&trace, n, cols, 2, 7);
    let leaves = common::leaf_digests(&lde, cols, HashKind::Keccak256, LeafLayout::Rows, 0..cols);
    common::hex(&common::merkle_root(&leaves, HashKind::Keccak256))
}

/// A scratch area: `tmp` is a world-writable sticky directory standing in for `/tmp`.
struct Machine {
    base: TestDir,
    tmp: PathBuf,
}

impl Machine {
    fn new(name: &str) -> Self {
        let base = temp_dir(&format!("shared-{name}"));
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).unwrap();
        let tmp = base.join("tmp");
        std::fs::create_dir(&tmp).unwrap();
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o1777)).unwrap();
        Self { base, tmp }
    }

    /// The default reservation root of `uid` when `XDG_RUNTIME_DIR` is unset and `TMPDIR` is
    /// this machine's `tmp`.
    fn default_root(&self, uid: u32) -> PathBuf {
        self.tmp.join(format!("stark-commit-{uid}"))
    }

    /// `prover` with `args`, as this user, with the default reservation root in `tmp`.
    fn prover(&self, args: &[&str]) -> Output {
        self.command(env!("CARGO_BIN_EXE_prover"), None).args(args).output().expect("run prover")
    }

    fn command(&self, exe: &str, uid: Option<u32>) -> Command {
        let mut cmd = match uid {
            None => Command::new(exe),
            Some(uid) => {
                let mut c = Command::new("setpriv");
                c.args([&format!("--reuid={uid}"), &format!("--regid={uid}"), "--clear-groups", "--", exe]);
                c
            }
        };
        cmd.env_remove("XDG_RUNTIME_DIR").env("TMPDIR", &self.tmp).current_dir(&self.base);
        cmd
    }

    /// A copy of the `prover` binary that every user can run (the build tree may not be
    /// reachable by them).
    fn shared_prover(&self) -> PathBuf {
        let exe = self.base.join("prover");
        std::fs::copy(env!("CARGO_BIN_EXE_prover"), &exe).unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        exe
    }
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Asserts that `out` is the typed refusal of an unsafe path: exit code 2, and stderr naming
/// `path` and containing each of `words`.
fn assert_refused(out: &Output, path: &Path, words: &[&str]) {
    let (stdout, stderr) = text(out);
    assert_eq!(out.status.code(), Some(2), "expected the unsafe-path refusal, got:\n{stdout}\n{stderr}");
    assert!(
        stderr.contains(&format!("error: {}: ", path.display())),
        "the error must name {}: {stderr}",
        path.display()
    );
    for w in words {
        assert!(stderr.contains(w), "{w:?} missing from: {stderr}");
    }
}

/// A 0600 file holding [`PRECIOUS`], and a check that it still does.
fn precious(path: &Path) {
    std::fs::write(path, PRECIOUS).unwrap();
    chmod(path, 0o600);
}

fn assert_untouched(path: &Path) {
    assert_eq!(std::fs::read_to_string(path).unwrap(), PRECIOUS, "{} was written through a link", path.display());
}

fn root_of(out: &Output) -> String {
    let (stdout, stderr) = text(out);
    assert!(out.status.success(), "exit {:?}:\n{stdout}\n{stderr}", out.status.code());
    stdout
        .lines()
        .find(|l| l.trim_start().starts_with("root of "))
        .and_then(|l| l.split_whitespace().last())
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("no root line in:\n{stdout}"))
}

/// The four steps of the trap, by one user on themselves: a world-writable directory where the
/// default root will be, its `seq` a link to a private file. The commit is refused, the error
/// names the directory, and the file is unchanged (the unpatched queue wrote `1` into it).
#[test]
fn a_symlink_trap_in_a_world_writable_default_root_is_refused_and_the_target_is_unchanged() {
    let m = Machine::new("trap-same-uid");
    let notes = m.base.join("notes.txt");
    precious(&notes);
    let root = m.default_root(euid());
    std::fs::create_dir_all(root.join("cpu")).unwrap();
    chmod(&root, 0o777);
    chmod(&root.join("cpu"), 0o777);
    symlink(&notes, root.join("cpu").join("seq")).unwrap();
    let out = m.prover(&COMMIT);
    assert_untouched(&notes);
    assert_refused(&out, &root, &["mode 777", "other users", "chmod 700"]);
    assert_eq!(std::fs::read_link(root.join("cpu").join("seq")).unwrap(), notes, "the link itself is left alone");
}

/// The four steps with real users: "mallory" (uid 65533, files made by root and given
/// to that uid) sets the trap in the shared temporary directory before the victim (uid 65534,
/// a real process through `setpriv`) ever runs; the victim's commit is refused, the error names
/// the directory and the victim's 0600 notes are unchanged.
#[test]
fn another_users_symlink_trap_is_refused_and_the_victims_file_is_unchanged() {
    if !multiuser("another_users_symlink_trap_is_refused_and_the_victims_file_is_unchanged") {
        return;
    }
    let m = Machine::new("trap-two-uids");
    let exe = m.shared_prover();
    let home = m.base.join("victim-home");
    std::fs::create_dir(&home).unwrap();
    let notes = home.join("notes.txt");
    precious(&notes);
    std::os::unix::fs::chown(&notes, Some(OTHER_UID), Some(OTHER_UID)).unwrap();
    std::os::unix::fs::chown(&home, Some(OTHER_UID), Some(OTHER_UID)).unwrap();
    chmod(&home, 0o700);
    // mallory: mkdir -p /tmp/stark-commit-$V/cpu && chmod 777 ... && ln -s ~victim/notes.txt .../cpu/seq
    let root = m.default_root(OTHER_UID);
    let cpu = root.join("cpu");
    std::fs::create_dir_all(&cpu).unwrap();
    chmod(&root, 0o777);
    chmod(&cpu, 0o777);
    symlink(&notes, cpu.join("seq")).unwrap();
    for p in [&root, &cpu] {
        std::os::unix::fs::chown(p, Some(MALLORY_UID), Some(MALLORY_UID)).unwrap();
    }
    std::os::unix::fs::lchown(cpu.join("seq"), Some(MALLORY_UID), Some(MALLORY_UID)).unwrap();
    let out = m.command(path_str(&exe), Some(OTHER_UID)).env("HOME", &home).args(COMMIT).output().unwrap();
    assert_untouched(&notes);
    assert_refused(&out, &root, &[&format!("owned by uid {MALLORY_UID}, not by this user (uid {OTHER_UID})")]);
}

/// A default root that another user made first is refused, whatever its mode.
#[test]
fn a_root_owned_by_another_uid_is_refused() {
    if !multiuser("a_root_owned_by_another_uid_is_refused") {
        return;
    }
    let m = Machine::new("foreign-root");
    let root = m.default_root(euid());
    std::fs::create_dir(&root).unwrap();
    chmod(&root, 0o700);
    std::os::unix::fs::chown(&root, Some(OTHER_UID), Some(OTHER_UID)).unwrap();
    let out = m.prover(&COMMIT);
    assert_refused(&out, &root, &[&format!("owned by uid {OTHER_UID}"), "--reservations DIR"]);
    // The same through --reservations, and for the device's directory inside a root of ours.
    let mine = m.base.join("mine");
    std::fs::create_dir(&mine).unwrap();
    std::fs::create_dir(mine.join("cpu")).unwrap();
    std::os::unix::fs::chown(mine.join("cpu"), Some(OTHER_UID), Some(OTHER_UID)).unwrap();
    let out = m.prover(&[&COMMIT[..], &["--reservations", path_str(&mine)]].concat());
    assert_refused(&out, &mine.join("cpu"), &[&format!("owned by uid {OTHER_UID}")]);
}

/// Group or other write on the root or the device's directory is refused, the mode named.
#[test]
fn a_root_with_group_or_other_write_is_refused() {
    let m = Machine::new("loose-mode");
    let root = m.base.join("res");
    for mode in [0o770, 0o720, 0o702, 0o777, 0o1777, 0o775] {
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir(&root).unwrap();
        chmod(&root, mode);
        let out = m.prover(&[&COMMIT[..], &["--reservations", path_str(&root)]].concat());
        assert_refused(&out, &root, &[&format!("mode {mode:o} lets other users"), "chmod 700"]);
        assert!(!root.join("cpu").exists(), "mode {mode:o}: nothing may be created in a refused root");
    }
    // 0755 and 0700 are fine; so is the device directory only when it is not writable by others.
    for mode in [0o755, 0o700, 0o750] {
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir(&root).unwrap();
        chmod(&root, mode);
        let out = m.prover(&[&COMMIT[..], &["--reservations", path_str(&root)]].concat());
        assert_eq!(root_of(&out), reference_root(8, 4), "mode {mode:o}");
        let made = std::fs::metadata(root.join("cpu")).unwrap().permissions().mode() & 0o777;
        assert_eq!(made, 0o700, "the device directory is created 0700");
    }
    chmod(&root.join("cpu"), 0o730);
    let out = m.prover(&[&COMMIT[..], &["--reservations", path_str(&root)]].concat());
    assert_refused(&out, &root.join("cpu"), &["mode 730"]);
}

/// A fresh default root is created 0700, and used again on the next run.
#[test]
fn the_default_root_is_created_private_and_reused() {
    let m = Machine::new("fresh");
    for _ in 0..2 {
        let out = m.prover(&COMMIT);
        assert_eq!(root_of(&out), reference_root(8, 4));
    }
    let root = m.default_root(euid());
    for d in [&root, &root.join("cpu")] {
        let meta = std::fs::symlink_metadata(d).unwrap();
        assert!(meta.is_dir());
        assert_eq!(meta.permissions().mode() & 0o777, 0o700, "{}", d.display());
    }
    for f in ["lock", "seq"] {
        let meta = std::fs::symlink_metadata(root.join("cpu").join(f)).unwrap();
        assert!(meta.is_file() && meta.permissions().mode() & 0o077 == 0, "{f}: {meta:?}");
    }
    // Two commits, two queue numbers; no temporary file left.
    assert_eq!(std::fs::read_to_string(root.join("cpu").join("seq")).unwrap(), "2\n");
    assert!(!root.join("cpu").join("seq.tmp").exists());
}

/// A root (or a device directory) that is a symbolic link is refused, even to a private
/// directory of the same user.
#[test]
fn a_root_that_is_a_symlink_is_refused() {
    let m = Machine::new("link-root");
    let real = m.base.join("real");
    std::fs::create_dir(&real).unwrap();
    chmod(&real, 0o700);
    let link = m.default_root(euid());
    symlink(&real, &link).unwrap();
    let out = m.prover(&COMMIT);
    assert_refused(&out, &link, &["a symbolic link (to ", "it is not followed"]);
    assert_eq!(std::fs::read_dir(&real).unwrap().count(), 0, "nothing is created through the link");
    // With a trailing slash too (which would otherwise resolve the link).
    let with_slash = format!("{}/", link.display());
    let out = m.prover(&[&COMMIT[..], &["--reservations", &with_slash]].concat());
    assert_refused(&out, &link, &["a symbolic link"]);
    // The device's directory as a link inside a good root.
    let root = m.base.join("res");
    std::fs::create_dir(&root).unwrap();
    symlink(&real, root.join("cpu")).unwrap();
    let out = m.prover(&[&COMMIT[..], &["--reservations", path_str(&root)]].concat());
    assert_refused(&out, &root.join("cpu"), &["a symbolic link"]);
    assert_eq!(std::fs::read_dir(&real).unwrap().count(), 0);
}

/// A regular file where the root or the device's directory should be is refused.
#[test]
fn a_root_that_is_a_regular_file_is_refused() {
    let m = Machine::new("file-root");
    let file = m.base.join("a-file");
    precious(&file);
    let out = m.prover(&[&COMMIT[..], &["--reservations", path_str(&file)]].concat());
    assert_refused(&out, &file, &["a regular file, where a directory must be"]);
    assert_untouched(&file);
    let root = m.base.join("res");
    std::fs::create_dir(&root).unwrap();
    precious(&root.join("cpu"));
    let out = m.prover(&[&COMMIT[..], &["--reservations", path_str(&root)]].concat());
    assert_refused(&out, &root.join("cpu"), &["a regular file, where a directory must be"]);
    assert_untouched(&root.join("cpu"));
}

/// Plants `name` in the device directory of a fresh private root as a link to a precious file,
/// runs the commit and checks the refusal and the target.
fn planted_link_is_refused(name: &str) {
    let m = Machine::new(&format!("link-{name}"));
    let root = m.base.join("res");
    let cpu = root.join("cpu");
    std::fs::create_dir_all(&cpu).unwrap();
    chmod(&root, 0o700);
    chmod(&cpu, 0o700);
    let target = m.base.join("target.txt");
    precious(&target);
    symlink(&target, cpu.join(name)).unwrap();
    let out = m.prover(&[&COMMIT[..], &["--reservations", path_str(&root)]].concat());
    assert_refused(&out, &cpu.join(name), &["a symbolic link (to ", "where a regular file must be", "remove it"]);
    assert_untouched(&target);
    assert!(std::fs::symlink_metadata(cpu.join(name)).unwrap().file_type().is_symlink());
}

#[test]
fn a_symlinked_lock_is_refused_and_its_target_unchanged() {
    planted_link_is_refused("lock");
}

#[test]
fn a_symlinked_seq_is_refused_and_its_target_unchanged() {
    planted_link_is_refused("seq");
}

#[test]
fn a_symlinked_reservation_entry_is_refused_and_its_target_unchanged() {
    planted_link_is_refused("r-00000000000000000000-1");
}

/// FIFOs and directories where the queue's files should be: refused at once, never a hang (the
/// unpatched queue blocked forever reading a FIFO named `seq`).
#[test]
fn fifos_and_directories_in_the_queue_are_refused_without_hanging() {
    for name in ["seq", "lock", "r-00000000000000000000-1"] {
        for fifo in [true, false] {
            let m = Machine::new(&format!("special-{name}-{fifo}"));
            let root = m.base.join("res");
            let cpu = root.join("cpu");
            std::fs::create_dir_all(&cpu).unwrap();
            chmod(&root, 0o700);
            chmod(&cpu, 0o700);
            if fifo {
                rustix::fs::mknodat(
                    rustix::fs::CWD,
                    cpu.join(name),
                    rustix::fs::FileType::Fifo,
                    rustix::fs::Mode::from_raw_mode(0o600),
                    0,
                )
                .unwrap();
            } else {
                std::fs::create_dir(cpu.join(name)).unwrap();
            }
            let t0 = Instant::now();
            let mut child = m
                .command(env!("CARGO_BIN_EXE_prover"), None)
                .args(COMMIT)
                .arg("--reservations")
                .arg(&root)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            while child.try_wait().unwrap().is_none() {
                if t0.elapsed() > Duration::from_secs(30) {
                    let _ = child.kill();
                    panic!("{name} as a {}: the commit hung", if fifo { "FIFO" } else { "directory" });
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let out = child.wait_with_output().unwrap();
            let kind = if fifo { "a FIFO" } else { "a directory" };
            assert_refused(&out, &cpu.join(name), &[kind, "where a regular file"]);
        }
    }
}

/// Two users on one device, each with the queue of their own (the documented model): run at
/// once, both commits finish with the reference root, each root directory belongs to its user
/// and is private, and a user who points `--reservations` at the other's queue is refused.
#[test]
fn two_users_commit_side_by_side_with_a_queue_each() {
    if !multiuser("two_users_commit_side_by_side_with_a_queue_each") {
        return;
    }
    let m = Machine::new("two-users");
    let exe = m.shared_prover();
    let want = reference_root(8, 4);
    let wait = [&COMMIT[..8], &["30s"]].concat();
    for round in 0..3 {
        let mine = m.command(path_str(&exe), None).args(&wait).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn();
        let theirs = m
            .command(path_str(&exe), Some(OTHER_UID))
            .args(&wait)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let (mine, theirs) = (mine.unwrap().wait_with_output().unwrap(), theirs.unwrap().wait_with_output().unwrap());
        assert_eq!(root_of(&mine), want, "round {round}: this user's commit");
        assert_eq!(root_of(&theirs), want, "round {round}: uid {OTHER_UID}'s commit");
    }
    for uid in [euid(), OTHER_UID] {
        let root = m.default_root(uid);
        for d in [root.clone(), root.join("cpu")] {
            let meta = std::fs::symlink_metadata(&d).unwrap();
            use std::os::unix::fs::MetadataExt as _;
            assert_eq!((meta.uid(), meta.mode() & 0o7777), (uid, 0o700), "{}", d.display());
        }
    }
    // Sharing a queue is not the model: each is refused in the other's.
    let out = m
        .command(path_str(&exe), Some(OTHER_UID))
        .args(&wait)
        .arg("--reservations")
        .arg(m.default_root(euid()))
        .output()
        .unwrap();
    // uid 65534 cannot even enter a 0700 directory of root: refused all the same, exit 2.
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&m.default_root(euid()).display().to_string()), "{stderr}");
    let out = m.prover(&[&wait[..], &["--reservations", path_str(&m.default_root(OTHER_UID))]].concat());
    assert_refused(&out, &m.default_root(OTHER_UID), &[&format!("owned by uid {OTHER_UID}")]);
}

/// `--input` that is not a regular file: a typed error at once, never a hang or an unbounded
/// read.
#[test]
fn input_that_is_not_a_regular_file_is_refused_at_once() {
    let m = Machine::new("input");
    let fifo = m.base.join("fifo");
    rustix::fs::mknodat(rustix::fs::CWD, &fifo, rustix::fs::FileType::Fifo, rustix::fs::Mode::from_raw_mode(0o600), 0)
        .unwrap();
    let link_to_zero = m.base.join("zero-link");
    symlink("/dev/zero", &link_to_zero).unwrap();
    let dir = m.base.join("a-dir");
    std::fs::create_dir(&dir).unwrap();
    let cases: [(&Path, &str); 4] = [
        (&fifo, "it is a FIFO, not a regular file"),
        (Path::new("/dev/zero"), "it is a character device, not a regular file"),
        (&link_to_zero, "it is a character device, not a regular file"),
        (&dir, "the path is a directory"),
    ];
    for (path, message) in cases {
        let t0 = Instant::now();
        let out = m.prover(&["commit", "--backend", "cpu", "--input", path_str(path), "--rows", "4", "--cols", "3"]);
        let (_, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{}: {stderr}", path.display());
        assert!(stderr.contains(&format!("{}: cannot read the trace file: {message}", path.display())), "{stderr}");
        assert!(t0.elapsed() < Duration::from_secs(30), "{}: took {:?}", path.display(), t0.elapsed());
    }
}

/// `--out`: an existing regular file is replaced whole (a hard link to it keeps the old bytes),
/// a symbolic link, a FIFO or a device is refused and left as it was.
#[test]
fn out_replaces_a_regular_file_and_refuses_links_and_special_files() {
    let m = Machine::new("out");
    let args = |out: &Path| {
        ["commit", "--backend", "cpu", "--log-rows", "4", "--cols", "2", "--out", path_str(out)]
            .map(str::to_owned)
            .to_vec()
    };
    let run = |out: &Path| {
        let a = args(out);
        m.prover(&a.iter().map(String::as_str).collect::<Vec<_>>())
    };
    // The reference: a fresh file.
    let fresh = m.base.join("fresh.bin");
    assert!(run(&fresh).status.success());
    let lde = std::fs::read(&fresh).unwrap();
    assert_eq!(lde.len(), 16 * 2 * 2 * 8);
    // An existing file, with a second hard link: replaced, the other link keeps the old bytes.
    let existing = m.base.join("existing.bin");
    precious(&existing);
    let other_link = m.base.join("other-link.bin");
    std::fs::hard_link(&existing, &other_link).unwrap();
    let out = run(&existing);
    assert!(out.status.success(), "{}", text(&out).1);
    assert_eq!(std::fs::read(&existing).unwrap(), lde);
    assert_untouched(&other_link);
    // A symbolic link: refused, its target unchanged.
    let target = m.base.join("target.txt");
    precious(&target);
    let link = m.base.join("link.bin");
    symlink(&target, &link).unwrap();
    let out = run(&link);
    assert_refused(&out, &link, &["a symbolic link (to ", "never written through a link"]);
    assert_untouched(&target);
    // A dangling link too (it would create the file it names).
    let dangling = m.base.join("dangling.bin");
    symlink(m.base.join("created-through-link"), &dangling).unwrap();
    assert_refused(&run(&dangling), &dangling, &["a symbolic link"]);
    assert!(!m.base.join("created-through-link").exists());
    // A FIFO (nobody reads it: a write would block) and a device.
    let fifo = m.base.join("fifo");
    rustix::fs::mknodat(rustix::fs::CWD, &fifo, rustix::fs::FileType::Fifo, rustix::fs::Mode::from_raw_mode(0o600), 0)
        .unwrap();
    assert_refused(&run(&fifo), &fifo, &["a FIFO, not a regular file"]);
    assert_refused(&run(Path::new("/dev/null")), Path::new("/dev/null"), &["a character device"]);
    // No temporary file is left anywhere.
    let left: Vec<_> = std::fs::read_dir(&m.base)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}
