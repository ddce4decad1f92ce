//! `prover commit` as a job system uses it: `--repeat` / `--logical` / `--devices` batches with a
//! per-device report, `--wait-for-memory` and its queue directory, and their bad inputs.

mod common;

use backend_api::{HashKind, LeafLayout, MatrixShape};
use common::{naive_lde, path_str, prover, temp_dir, text};

/// The roots of the synthetic `2^log_rows x cols` table (seed 0, blowup 2, keccak256, rows), from
/// the naive LDE and the hash crates.
fn reference_roots(log_rows: u32, cols: usize) -> Vec<String> {
    let n = 1usize << log_rows;
    let trace = prover::synthetic_trace(MatrixShape::new(n, cols).unwrap(), 0);
    let lde = naive_lde(&trace, n, cols, 2, 7);
    let leaves = common::leaf_digests(&lde, cols, HashKind::Keccak256, LeafLayout::Rows, 0..cols);
    vec![common::hex(&common::merkle_root(&leaves, HashKind::Keccak256))]
}

fn json(out: &std::process::Output) -> serde_json::Value {
    let (stdout, stderr) = text(out);
    assert!(out.status.success(), "exit {:?}: {stderr}", out.status.code());
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

fn strings(v: &serde_json::Value) -> Vec<String> {
    v.as_array().unwrap().iter().map(|r| r.as_str().unwrap().to_string()).collect()
}

#[test]
fn a_batch_over_logical_devices_reports_each_device_and_agrees_with_the_reference() {
    let out = prover(&[
        "commit",
        "--log-rows",
        "6",
        "--cols",
        "5",
        "--backend",
        "cpu",
        "--repeat",
        "7",
        "--logical",
        "3",
        "--json",
    ]);
    let v = json(&out);
    let want = reference_roots(6, 5);
    assert_eq!(strings(&v["roots"]), want);
    assert_eq!(v["roots_identical"], true);
    assert_eq!((v["commits"].as_u64(), v["succeeded"].as_u64()), (Some(7), Some(7)));
    let devices = v["devices"].as_array().unwrap();
    let labels: Vec<&str> = devices.iter().map(|d| d["label"].as_str().unwrap()).collect();
    assert_eq!(labels, ["cpu#0", "cpu#1", "cpu#2"]);
    // Seven equal jobs over three equal members: 3, 2, 2.
    let jobs: Vec<u64> = devices.iter().map(|d| d["jobs"].as_u64().unwrap()).collect();
    assert_eq!(jobs, [3, 2, 2]);
    let budgets: Vec<u64> = devices.iter().map(|d| d["budget_bytes"].as_u64().unwrap()).collect();
    assert!(budgets.iter().all(|&b| b == budgets[0] && b > 0), "{budgets:?}");
    for job in v["jobs"].as_array().unwrap() {
        assert_eq!(strings(&job["roots"]), want, "{job}");
        assert!(job["error"].is_null(), "{job}");
    }
    // The text report says the same.
    let out = prover(&["commit", "--log-rows", "6", "--cols", "5", "--backend", "cpu", "--repeat", "2"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("roots identical across every commit and device: yes"), "{stdout}");
    assert!(stdout.contains(&want[0]) && stdout.contains("2/2 succeeded"), "{stdout}");
}

#[test]
fn waiting_for_memory_commits_and_reports_the_wait() {
    let dir = temp_dir("wait-json");
    let out = prover(&[
        "commit",
        "--log-rows",
        "6",
        "--cols",
        "5",
        "--backend",
        "cpu",
        "--wait-for-memory",
        "10s",
        "--reservations",
        path_str(&dir),
        "--json",
    ]);
    let v = json(&out);
    assert_eq!(strings(&v["roots"]), reference_roots(6, 5));
    assert!(v["admission_wait_seconds"].as_f64().is_some_and(|w| (0.0..10.0).contains(&w)), "{v}");
    // The device's queue directory was made, and nothing is left queued in it.
    let queue = dir.join("cpu");
    assert!(queue.join("lock").exists() && queue.join("seq").exists(), "{}", queue.display());
    let left: Vec<_> = std::fs::read_dir(&queue)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("r-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // Without waiting the report has no wait.
    let v = json(&prover(&["commit", "--log-rows", "6", "--cols", "5", "--backend", "cpu", "--json"]));
    assert!(v["admission_wait_seconds"].is_null(), "{v}");
}

#[test]
fn a_commit_above_the_budget_is_refused_at_once_even_when_waiting() {
    let dir = temp_dir("wait-refused");
    let t0 = std::time::Instant::now();
    let out = prover(&[
        "commit",
        "--log-rows",
        "10",
        "--cols",
        "8",
        "--budget",
        "64KiB",
        "--wait-for-memory",
        "10m",
        "--reservations",
        path_str(&dir),
    ]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("commit refused: it needs 430048 B"), "{stderr}");
    assert!(t0.elapsed() < std::time::Duration::from_secs(60), "a commit that can never fit must not wait");
}

#[test]
fn bad_batch_and_wait_flags_are_usage_errors() {
    let cases: [(&[&str], &str); 8] = [
        (
            &["commit", "--backend", "cpu", "--devices", "1"],
            "--devices \"1\": backend cpu has 1 device(s), ordinals 0..=0",
        ),
        (&["commit", "--backend", "cpu", "--devices", "0,x"], "\"x\" is not a device ordinal; use `all` or e.g. `0,1`"),
        (&["commit", "--backend", "cpu", "--devices", "0,0"], "device 0 is listed twice"),
        (&["commit", "--backend", "cpu", "--repeat", "0"], "--repeat and --logical need at least 1"),
        (&["commit", "--backend", "cpu", "--logical", "0"], "--repeat and --logical need at least 1"),
        (&["commit", "--wait-for-memory", "10 parsecs"], "unknown unit \"parsecs\"; use ms, s, m or h"),
        (&["commit", "--reservations", "/tmp"], "--wait-for-memory <DURATION>"),
        (&["commit", "--repeat", "2", "--out", "x.bin"], "cannot be used with"),
    ];
    for (args, message) in cases {
        let out = prover(args);
        let (_, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {message:?} missing from: {stderr}");
    }
}
