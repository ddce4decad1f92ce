//! The `prover` binary end to end: every bad input gets a clear message and the documented exit
//! code (2 usage/input, 1 refusal/device), and good runs produce checked output.

mod common;

use backend_api::{HashKind, LeafLayout};
use common::{naive_lde, path_str, prover, read_u64s, temp_dir, text, transpose, values, write_u64s};

/// Runs `args`, expects exit `code` and `want` in stderr, and no panic.
fn expect_error(args: &[&str], code: i32, want: &str) -> String {
    expect_error_with(&[], args, code, want)
}

/// [`expect_error`] with the environment variables `env` set for the run.
fn expect_error_with(env: &[(&str, &str)], args: &[&str], code: i32, want: &str) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_prover"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run the prover binary");
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(code), "prover {args:?}\nstdout: {stdout}\nstderr: {stderr}");
    assert!(stderr.contains(want), "prover {args:?}: stderr lacks {want:?}:\n{stderr}");
    assert!(!stderr.contains("panicked"), "prover {args:?} panicked:\n{stderr}");
    stderr
}

#[test]
fn input_file_of_the_wrong_length() {
    let dir = temp_dir("bad-length");
    let f = dir.join("t.bin");
    std::fs::write(&f, vec![0u8; 4 * 3 * 8 - 1]).unwrap();
    expect_error(
        &["commit", "--input", path_str(&f), "--rows", "4", "--cols", "3"],
        2,
        "the trace file holds 95 B, but 4 rows x 3 cols of u64 need 96 B (rows * cols * 8)",
    );
    expect_error(
        &["commit", "--input", path_str(&dir.join("missing.bin")), "--rows", "4", "--cols", "3"],
        2,
        "cannot read the trace file",
    );
}

#[test]
fn zero_rows_or_columns() {
    let dir = temp_dir("zero");
    let f = dir.join("empty.bin");
    std::fs::write(&f, []).unwrap();
    expect_error(
        &["commit", "--input", path_str(&f), "--rows", "0", "--cols", "4"],
        2,
        "invalid shape: a matrix needs at least one row and one column, got 0 x 4",
    );
    expect_error(
        &["commit", "--cols", "0"],
        2,
        "invalid shape: a matrix needs at least one row and one column, got 65536 x 0",
    );
}

#[test]
fn rows_or_blowup_not_a_power_of_two() {
    let dir = temp_dir("pow2");
    let f = dir.join("t.bin");
    write_u64s(&f, &values(3 * 2, 1));
    expect_error(
        &["commit", "--input", path_str(&f), "--rows", "3", "--cols", "2"],
        2,
        "invalid shape: the trace row count must be a power of two, got 3",
    );
    expect_error(
        &["commit", "--log-rows", "4", "--blowup", "3"],
        2,
        "invalid shape: the blowup must be a power of two, got 3",
    );
    expect_error(
        &["commit", "--log-rows", "4", "--blowup", "0"],
        2,
        "invalid shape: the blowup must be a power of two, got 0",
    );
}

#[test]
fn lde_domain_above_2_pow_32() {
    // Refused before the 2^31-row table is generated: this returns at once.
    let t = std::time::Instant::now();
    expect_error(
        &["commit", "--log-rows", "31", "--blowup", "4"],
        2,
        "invalid shape: the LDE domain 2147483648 x 4 = 2^33 rows exceeds the field's 2^32",
    );
    expect_error(
        &["plan", "--log-rows", "33", "--cols", "8", "--blowup", "1", "--memory", "1TiB"],
        2,
        "exceeds the field's 2^32",
    );
    assert!(t.elapsed().as_secs() < 10, "validation took {:?}", t.elapsed());
}

#[test]
fn split_outside_the_columns() {
    for split in ["0", "64", "100"] {
        expect_error(
            &["commit", "--log-rows", "4", "--split", split],
            2,
            &format!("invalid argument: split column {split} is outside 1..=63 for a table of 64 columns"),
        );
    }
    expect_error(&["commit", "--log-rows", "4", "--cols", "1", "--split", "1"], 2, "a split needs at least 2 columns");
}

#[test]
fn scratch_cap_smaller_than_one_run() {
    expect_error(
        &["commit", "--log-rows", "4", "--cols", "8", "--scratch-cap", "64"],
        2,
        "scratch cap 64 B is smaller than one run: a 8-column transpose needs at least 72 B",
    );
    expect_error(&["commit", "--scratch-cap", "12 parsecs"], 2, "unknown unit");
}

#[test]
fn lambda_vm_pairs_needs_two_rows() {
    expect_error(
        &["commit", "--log-rows", "0", "--blowup", "1", "--layout", "lambda-vm-pairs"],
        2,
        "the lambda-vm-pairs layout needs a power-of-two row count >= 2, got 1",
    );
}

#[test]
fn unknown_backend() {
    expect_error(&["commit", "--backend", "metal"], 2, "invalid value 'metal' for '--backend <BACKEND>'");
}

#[test]
fn unavailable_backend() {
    // Without the feature the binary says so; with it, no CUDA device is visible (an empty
    // `CUDA_VISIBLE_DEVICES` hides a GPU the machine may have).
    let hidden = [("CUDA_VISIBLE_DEVICES", "")];
    let stderr = expect_error_with(&hidden, &["commit", "--log-rows", "4", "--backend", "cuda"], 1, "error: ");
    assert!(stderr.to_lowercase().contains("cuda"), "{stderr}");
    if !cfg!(feature = "cuda") {
        assert!(
            stderr.contains(
                "backend cuda is unavailable: not compiled into this binary (rebuild with `--features cuda`)"
            ),
            "{stderr}"
        );
    }
    if !cfg!(feature = "wgpu") {
        expect_error(
            &["commit", "--log-rows", "4", "--backend", "wgpu"],
            1,
            "backend wgpu is unavailable: not compiled",
        );
    }
}

#[test]
fn budget_too_small_is_refused_listing_every_term() {
    let stderr = expect_error(
        &["commit", "--log-rows", "10", "--cols", "8", "--budget", "64KiB"],
        1,
        "error: commit refused: it needs",
    );
    for term in ["LDE", "trace", "Merkle trees", "transpose scratch", "twiddles", "total", "the budget is 65536 B"] {
        assert!(stderr.contains(term), "{term:?} missing from:\n{stderr}");
    }
}

#[test]
fn input_round_trip_is_the_column_major_lde() {
    let dir = temp_dir("round-trip");
    let (n, m, blowup) = (8, 3, 4);
    let trace = values(n * m, 42);
    let (input, out) = (dir.join("trace.bin"), dir.join("lde.bin"));
    write_u64s(&input, &trace);
    // The trace, its shape and the output, the same for every run.
    let io = ["--input", path_str(&input), "--rows", "8", "--cols", "3", "--out", path_str(&out)];
    for (backend, hash) in [("cpu", "keccak256"), ("auto", "blake3")] {
        let args = [&["commit", "--backend", backend, "--hash", hash, "--blowup", "4"][..], &io].concat();
        let o = prover(&args);
        assert!(o.status.success(), "{:?}", text(&o));
        let got = read_u64s(&out);
        assert_eq!(got, transpose(&naive_lde(&trace, n, m, blowup, 7), n * blowup, m), "prover {args:?}");
        let (stdout, _) = text(&o);
        let want = if backend == "cpu" { "backend: cpu on " } else { "backend: " };
        assert!(stdout.contains(want) && stdout.contains("root of columns [0, 3)"), "{stdout}");
    }
    // A non-default shift reaches the LDE.
    let o = prover(&[&["commit", "--blowup", "2", "--shift", "5"][..], &io].concat());
    assert!(o.status.success(), "{:?}", text(&o));
    assert_eq!(read_u64s(&out), transpose(&naive_lde(&trace, n, m, 2, 5), n * 2, m));
}

#[test]
fn json_report_has_the_required_keys_and_the_reference_roots() {
    let dir = temp_dir("json");
    let input = dir.join("trace.bin");
    let (n, m) = (16, 5);
    let trace = values(n * m, 9);
    write_u64s(&input, &trace);
    let o = prover(&[
        "commit",
        "--json",
        "--backend",
        "cpu",
        "--input",
        path_str(&input),
        "--rows",
        "16",
        "--cols",
        "5",
        "--split",
        "2",
        "--layout",
        "lambda-vm-pairs",
        "--snapshot",
    ]);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    assert!(stderr.is_empty(), "--json must keep stderr quiet: {stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("one JSON object");
    for key in [
        "roots",
        "backend",
        "device",
        "lde_rows",
        "cols",
        "blowup",
        "hash",
        "layout",
        "phase_seconds",
        "modelled_device_bytes",
    ] {
        assert!(v.get(key).is_some(), "{key} missing from {v}");
    }
    assert_eq!(v["backend"], "cpu");
    assert_eq!((v["lde_rows"].as_u64(), v["cols"].as_u64(), v["blowup"].as_u64()), (Some(32), Some(5), Some(2)));
    assert_eq!((v["hash"].as_str(), v["layout"].as_str()), (Some("keccak256"), Some("lambda-vm-pairs")));
    for term in ["lde", "trace", "merkle_trees", "transpose_scratch", "twiddles", "total"] {
        assert!(v["modelled_device_bytes"][term].as_u64().is_some(), "{term} missing: {v}");
    }
    assert_eq!(v["modelled_device_bytes"]["lde"].as_u64(), Some(32 * 5 * 8));
    for phase in ["upload", "lde", "snapshot", "leaves+transpose", "merkle", "roots"] {
        assert!(v["phase_seconds"][phase].as_f64().is_some(), "{phase} missing: {v}");
    }
    // Roots, recomputed from the naive LDE with the hash crates.
    let lde = naive_lde(&trace, n, m, 2, 7);
    let want: Vec<String> = [(0, 2), (2, 5)]
        .iter()
        .map(|&(c0, c1)| {
            let leaves = common::leaf_digests(&lde, m, HashKind::Keccak256, LeafLayout::LambdaVmPairs, c0..c1);
            common::hex(&common::merkle_root(&leaves, HashKind::Keccak256))
        })
        .collect();
    let got: Vec<String> = v["roots"].as_array().unwrap().iter().map(|r| r.as_str().unwrap().to_string()).collect();
    assert_eq!(got, want);
}

#[test]
fn default_commit_runs_and_is_deterministic() {
    let a = prover(&["commit", "--json"]);
    let b = prover(&["commit", "--json", "--seed", "0"]);
    let c = prover(&["commit", "--json", "--seed", "1"]);
    let roots = |o: &std::process::Output| {
        assert!(o.status.success(), "{:?}", text(o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!((v["lde_rows"].as_u64(), v["cols"].as_u64()), (Some(1 << 17), Some(64)));
        v["roots"].clone()
    };
    assert_eq!(roots(&a), roots(&b));
    assert_ne!(roots(&a), roots(&c));
}

#[test]
fn plan_says_whether_a_shape_fits() {
    // 2^21 x 316 at blowup 2 models 11,079,778,272 B (backend-api's pinned figure): the trace lives
    // in the LDE buffer; --snapshot adds its 5,301,600,256 B.
    let fits = prover(&["plan", "--log-rows", "21", "--cols", "316", "--blowup", "2", "--memory", "141GiB"]);
    let (stdout, _) = text(&fits);
    assert_eq!(fits.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("FITS") && stdout.contains("11079778272 B") && stdout.contains("80% of memory"),
        "{stdout}"
    );
    assert!(stdout.contains("the trace in the LDE buffer's first rows"), "{stdout}");
    let tight = prover(&["plan", "--log-rows", "21", "--cols", "316", "--blowup", "2", "--memory", "12GiB"]);
    let (stdout, _) = text(&tight);
    assert_eq!(tight.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("DOES NOT FIT"), "{stdout}");
    let exact = prover(&[
        "plan",
        "--log-rows",
        "21",
        "--cols",
        "316",
        "--memory",
        "16GiB",
        "--budget",
        "11079778272",
        "--json",
    ]);
    assert_eq!(exact.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&exact.stdout).unwrap();
    assert_eq!(v["fits"], true);
    assert_eq!(v["snapshot"], false);
    assert_eq!(v["modelled_device_bytes"]["trace"].as_u64(), Some(0));
    assert_eq!(v["modelled_device_bytes"]["total"].as_u64(), Some(11_079_778_272));
    assert_eq!(v["budget_source"], "--budget");
    let over = prover(&["plan", "--log-rows", "21", "--cols", "316", "--memory", "16GiB", "--budget", "11079778271"]);
    assert_eq!(over.status.code(), Some(1), "{}", text(&over).0);
    // The snapshot is the one trace-sized buffer beside the LDE: the former 15.26 GiB.
    let snap = prover(&["plan", "--log-rows", "21", "--cols", "316", "--memory", "141GiB", "--snapshot", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&snap.stdout).unwrap();
    assert_eq!(v["snapshot"], true);
    assert_eq!(v["modelled_device_bytes"]["trace"].as_u64(), Some((1u64 << 21) * 316 * 8));
    assert_eq!(v["modelled_device_bytes"]["total"].as_u64(), Some(16_381_378_528));
    // 2^22 x 316 at blowup 2 on a 32 GiB card: 20.48 GiB of a 25.60 GiB budget; with the snapshot
    // 30.36 GiB does not fit.
    let card = prover(&["plan", "--log-rows", "22", "--cols", "316", "--memory", "32GiB"]);
    let (stdout, _) = text(&card);
    assert_eq!(card.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("FITS: needs 20.48 GiB of the 25.60 GiB budget"), "{stdout}");
    let card = prover(&["plan", "--log-rows", "22", "--cols", "316", "--memory", "32GiB", "--snapshot"]);
    let (stdout, _) = text(&card);
    assert_eq!(card.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("DOES NOT FIT: needs 30.36 GiB but the budget is 25.60 GiB"), "{stdout}");
    let split =
        prover(&["plan", "--log-rows", "21", "--cols", "316", "--split", "100", "--memory", "141GiB", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&split.stdout).unwrap();
    assert_eq!(v["modelled_device_bytes"]["merkle_trees"].as_u64(), Some(2 * ((1u64 << 23) - 1) * 32));
    expect_error(
        &["plan", "--log-rows", "10", "--cols", "8", "--memory", "lots"],
        2,
        "invalid value 'lots' for '--memory <BYTES>'",
    );
}

#[test]
fn backends_lists_cpu_as_usable() {
    let o = prover(&["backends"]);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    assert!(stdout.contains("cpu   usable: "), "{stdout}");
    assert!(
        stdout.contains("cuda") && stdout.contains("wgpu") && stdout.contains("--backend auto picks: "),
        "{stdout}"
    );
    let o = prover(&["backends", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["backends"][0]["backend"], "cpu");
    assert_eq!(v["backends"][1]["compiled"], cfg!(feature = "cuda"));
}

#[test]
fn other_bad_parameters() {
    expect_error(
        &["commit", "--log-rows", "4", "--shift", "18446744069414584321"],
        2,
        "invalid argument: the coset shift must be non-zero mod p, got 18446744069414584321",
    );
    expect_error(&["commit", "--rows", "4"], 2, "the following required arguments were not provided");
    let dir = temp_dir("out");
    let out = dir.join("no-such-dir").join("lde.bin");
    expect_error(&["commit", "--log-rows", "4", "--out", path_str(&out)], 2, "no-such-dir is not a directory");
    expect_error(&["commit", "--log-rows", "4", "--out", path_str(&dir)], 2, "the path is a directory");
}

/// `prover bench` on the CPU: the one-shot and warm phases are all reported, the warm count is
/// the one asked for, the roots are those `prover commit` gives for the same table, and the CPU
/// reports no transfer floor; `--runs 0` is a usage error.
#[test]
fn bench_on_cpu_reports_every_phase_and_the_commit_roots() {
    let shape = ["--backend", "cpu", "--log-rows", "9", "--cols", "6", "--seed", "3", "--hash", "blake3"];
    let out = prover(&[&["bench", "--runs", "3", "--json"], &shape[..]].concat());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    let bench: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let commit = prover(&[&["commit", "--json"], &shape[..]].concat());
    let commit: serde_json::Value = serde_json::from_str(&text(&commit).0).unwrap();
    assert_eq!(bench["roots"], commit["roots"], "bench committed another table");
    assert_eq!(bench["runs"], 3);
    assert_eq!((bench["trace_rows"].as_u64(), bench["cols"].as_u64()), (Some(512), Some(6)));
    // A host table without a snapshot is uploaded and extended in one phase.
    for phase in ["upload+lde", "leaves+transpose", "merkle", "roots"] {
        for summary in ["one_shot", "warm_median"] {
            let s = bench[summary]["phases"][phase].as_f64();
            assert!(s.is_some_and(|s| s >= 0.0), "{summary}.{phase}: {s:?}\n{stdout}");
        }
    }
    for phase in ["upload", "lde"] {
        assert!(bench["warm_median"]["phases"][phase].is_null(), "{phase} beside upload+lde: {stdout}");
    }
    let (one, warm) =
        (bench["one_shot"]["total_seconds"].as_f64().unwrap(), bench["warm_median"]["total_seconds"].as_f64().unwrap());
    assert!(one > 0.0 && warm > 0.0, "{stdout}");
    assert!(bench["floor"].is_null() && bench["upload_over_floor"].is_null(), "{stdout}");
    // The commits from device memory ran (the CPU has room for the second copy) and gave the same
    // roots (the bench refuses otherwise); with no floor there is no ratio to it.
    assert!(bench["device_resident_total_seconds"].as_f64().is_some_and(|d| d > 0.0), "{stdout}");
    assert!(bench["total_over_floor_plus_device_commit"].is_null(), "{stdout}");
    // The text report names the phases and says why there is no floor.
    let text_out = prover(&[&["bench", "--runs", "1"], &shape[..]].concat());
    let (t, _) = text(&text_out);
    assert!(t.contains("warm median/1") && t.contains("upload+lde") && t.contains("floor      none"), "{t}");
    assert!(t.contains("from device"), "{t}");
    expect_error(&[&["bench", "--runs", "0"], &shape[..]].concat(), 2, "--runs must be at least 1");
}

/// `--host-copy` changes no root; its wait and its page-locked block are phases of their own, and
/// so is its queueing where no earlier call queued it (with `--snapshot`; without, `upload+lde`
/// queues it as it extends the trace).
#[test]
fn host_copy_changes_no_root_and_is_timed_where_it_is_queued() {
    let args = ["commit", "--backend", "cpu", "--log-rows", "8", "--cols", "5", "--json"];
    let plain: serde_json::Value = serde_json::from_str(&text(&prover(&args)).0).unwrap();
    let out = prover(&[&args[..], &["--host-copy"]].concat());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let with: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(with["roots"], plain["roots"]);
    for phase in ["host_copy_wait", "host_copy_alloc"] {
        assert!(with["phase_seconds"][phase].as_f64().is_some_and(|s| s >= 0.0), "{phase}: {stdout}");
    }
    for phase in ["host_copy", "host_copy_wait", "host_copy_alloc"] {
        assert!(plain["phase_seconds"][phase].is_null(), "{phase} without --host-copy: {stdout}");
    }
    // A host trace without a snapshot: the `upload+lde` call queues the copy, no phase of its own.
    assert!(with["phase_seconds"]["host_copy"].is_null(), "host_copy beside upload+lde: {stdout}");
    assert!(with["phase_seconds"]["upload+lde"].as_f64().is_some(), "{stdout}");
    // With the snapshot the LDE extends a device buffer, and queueing the copy is a phase.
    let snapshot = prover(&[&args[..], &["--host-copy", "--snapshot"]].concat());
    let (stdout, stderr) = text(&snapshot);
    assert!(snapshot.status.success(), "{stderr}");
    let with: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(with["roots"], plain["roots"]);
    for phase in ["host_copy", "host_copy_wait", "host_copy_alloc", "upload", "lde"] {
        assert!(with["phase_seconds"][phase].as_f64().is_some_and(|s| s >= 0.0), "{phase} with --snapshot: {stdout}");
    }
    // The CPU backend has no page-locked memory; the field is there and says so.
    assert_eq!(with["peak_pinned_host_bytes"], 0, "{stdout}");
    let (t, _) = text(&prover(&["commit", "--backend", "cpu", "--log-rows", "8", "--cols", "5", "--host-copy"]));
    assert!(t.contains("host_copy_alloc") && t.contains("not in the total"), "{t}");
    expect_error(&["commit", "--host-copy", "--repeat", "2"], 2, "cannot be used with");
}

/// With wgpu compiled in, a clean run on a headless machine prints no error line: Mesa's
/// device-selection layer used to make libwayland print
/// `error: XDG_RUNTIME_DIR is invalid or not set in the environment.` twice per Vulkan instance.
#[cfg(feature = "wgpu")]
#[test]
fn a_clean_headless_run_prints_no_error_line() {
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_prover"))
            .args(args)
            .env_remove("XDG_RUNTIME_DIR")
            .env_remove("NODEVICE_SELECT")
            .env_remove("MESA_VK_DEVICE_SELECT")
            .output()
            .expect("run the prover binary");
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "prover {args:?}\nstdout: {stdout}\nstderr: {stderr}");
        let errors: Vec<&str> = stderr.lines().filter(|l| l.to_lowercase().contains("error")).collect();
        assert!(errors.is_empty(), "prover {args:?} printed error lines on a clean run:\n{stderr}");
        stdout
    };
    // The check means something only where a Vulkan instance is really created.
    let status: serde_json::Value = serde_json::from_str(&run(&["backends", "--json"])).unwrap();
    let wgpu = &status["backends"][2];
    assert_eq!(wgpu["backend"], "wgpu");
    if wgpu["device"].is_null() {
        let reason = wgpu["reason"].as_str().unwrap_or_default();
        return naive_reference::skip::skip("a_clean_headless_run_prints_no_error_line", reason, "REQUIRE_WGPU");
    }
    run(&["backends"]);
    run(&["commit", "--log-rows", "5", "--cols", "3"]);
    run(&["commit", "--log-rows", "5", "--cols", "3", "--backend", "wgpu"]);
}

/// `STARK_COMMIT_TRACE=1` prints each step of the process on stderr, in order and with
/// non-decreasing times, and the report on stdout is unchanged; without it nothing is traced.
#[test]
fn the_startup_trace_lists_each_step_in_order() {
    let args = ["commit", "--backend", "cpu", "--log-rows", "6", "--cols", "5", "--json"];
    let run = |trace: Option<&str>| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_prover"));
        cmd.args(args).env_remove(prover::TRACE_ENV);
        if let Some(v) = trace {
            cmd.env(prover::TRACE_ENV, v);
        }
        let out = cmd.output().expect("run the prover binary");
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "prover {args:?}\nstdout: {stdout}\nstderr: {stderr}");
        let report: serde_json::Value = serde_json::from_str(&stdout).expect("the report is JSON");
        (report, stderr)
    };
    let (plain, quiet) = run(None);
    let (traced, stderr) = run(Some("1"));
    assert!(!quiet.contains("trace "), "traced without {}:\n{quiet}", prover::TRACE_ENV);
    assert!(!run(Some("0")).1.contains("trace "), "{}=0 traced", prover::TRACE_ENV);
    assert_eq!(traced["roots"], plain["roots"]);
    let steps: Vec<(f64, &str)> = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("trace "))
        .map(|l| {
            let (ms, rest) = l.trim_start().split_once(" ms unix ").expect("trace line layout");
            let (_, what) = rest.split_once(' ').expect("a step name");
            (ms.parse().expect("milliseconds"), what)
        })
        .collect();
    let names: Vec<&str> = steps.iter().map(|s| s.1).collect();
    assert_eq!(
        names,
        ["main", "backend cpu open", "table ready", "prepared", "commit done", "report printed", "backend closed"],
        "{stderr}"
    );
    assert!(steps.windows(2).all(|w| w[0].0 <= w[1].0), "times go backwards:\n{stderr}");
}

/// `--no-prepare` commits the same table to the same roots (the preparation only moves work):
/// on the CPU, and on wgpu where it is compiled in (its prepared LDE buffer is the one the
/// commit then takes from the pool; a missing adapter skips that part visibly).
#[test]
fn no_prepare_gives_the_same_roots() {
    let roots = |backend: &str, extra: &[&str]| {
        let mut args = vec!["commit", "--backend", backend, "--log-rows", "7", "--cols", "6", "--json"];
        args.extend_from_slice(extra);
        let out = prover(&args);
        let (stdout, stderr) = text(&out);
        if !out.status.success() && stderr.contains("unavailable") {
            naive_reference::skip::skip(
                &format!("no_prepare_gives_the_same_roots on {backend}"),
                stderr,
                "REQUIRE_WGPU",
            );
            return None;
        }
        assert!(out.status.success(), "prover {args:?}\nstdout: {stdout}\nstderr: {stderr}");
        let report: serde_json::Value = serde_json::from_str(&stdout).expect("the report is JSON");
        Some(report["roots"].clone())
    };
    let cpu = roots("cpu", &[]).expect("the CPU backend");
    assert_eq!(roots("cpu", &["--no-prepare"]).as_ref(), Some(&cpu));
    if cfg!(feature = "wgpu")
        && let Some(prepared) = roots("wgpu", &[])
    {
        assert_eq!(prepared, cpu, "wgpu, prepared");
        assert_eq!(roots("wgpu", &["--no-prepare"]).as_ref(), Some(&cpu), "wgpu, --no-prepare");
    }
}
