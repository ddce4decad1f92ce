//! `prover prepare`: the CUDA kernel cache filled ahead of the first commit, for named
//! architectures without a device (what a container image's build runs), with every refusal
//! typed and its exit code documented. No GPU needed; NVRTC for the compiling cases
//! (`REQUIRE_NVRTC=1` makes its absence a failure).

mod common;

use common::text;
#[cfg(feature = "cuda")]
use common::{path_str, temp_dir};

/// Runs the prover with `args` and the kernel cache in `cache` (or the default when `None`).
fn prepare(args: &[&str], cache: Option<&std::path::Path>) -> std::process::Output {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_prover"));
    cmd.arg("prepare").args(args);
    if let Some(dir) = cache {
        cmd.env("STARK_COMMIT_KERNEL_CACHE", dir);
    }
    cmd.output().expect("run the prover binary")
}

/// Expects exit `code` and `want` in stderr, and no panic.
fn expect_error(out: &std::process::Output, code: i32, want: &str) {
    let (stdout, stderr) = text(out);
    assert_eq!(out.status.code(), Some(code), "stdout: {stdout}\nstderr: {stderr}");
    assert!(stderr.contains(want), "stderr lacks {want:?}:\n{stderr}");
    assert!(!stderr.contains("panicked"), "panicked:\n{stderr}");
}

#[test]
fn prepare_refuses_other_backends() {
    expect_error(&prepare(&["--backend", "cpu"], None), 2, "`--backend cpu` has nothing to prepare ahead");
    expect_error(&prepare(&["--backend", "nope"], None), 2, "invalid value 'nope'");
}

#[cfg(not(feature = "cuda"))]
#[test]
fn prepare_without_the_cuda_feature_says_how_to_rebuild() {
    expect_error(&prepare(&["--arch", "sm_90"], None), 1, "rebuild with `--features cuda`");
    expect_error(&prepare(&[], None), 1, "rebuild with `--features cuda`");
}

#[cfg(feature = "cuda")]
#[test]
fn prepare_refuses_bad_architectures_and_cache_settings() {
    for bad in ["sm_90a", "compute_90", "sm90", "9", "", "sm_90,", "sm_1000"] {
        expect_error(&prepare(&["--arch", bad], None), 2, "expected sm_XX or XX");
    }
    expect_error(&prepare(&["--arch", "sm_75"], None), 2, "name sm_80 or newer");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_prover"))
        .args(["prepare", "--arch", "sm_90"])
        .env("STARK_COMMIT_KERNEL_CACHE", "relative/dir")
        .output()
        .unwrap();
    expect_error(&out, 2, "expected an absolute directory");
}

/// Without a device the default (the device's own architecture) is unavailable, and the message
/// says how to prepare without one.
#[cfg(feature = "cuda")]
#[test]
fn prepare_without_a_device_names_the_arch_flag() {
    let dir = temp_dir("prepare-nodev");
    let out = prepare(&[], Some(&*dir));
    if out.status.success() {
        // A machine with a GPU: the device's units are ready, each on its own line.
        let (stdout, _) = text(&out);
        assert!(stdout.contains("on ") && stdout.contains("(device 0)"), "{stdout}");
        return;
    }
    expect_error(&out, 1, "prover prepare --arch sm_90");
}

/// `prepare --arch` without a device: an architecture this binary has no images for is compiled
/// into the cache, then found there; one it has images for needs nothing.
#[cfg(feature = "cuda")]
#[test]
fn prepare_named_architectures_fills_the_cache_once() {
    let base = temp_dir("prepare-arch");
    let dir = base.join("kernels");
    let json = |args: &[&str]| -> serde_json::Value {
        let out = prepare(args, Some(&dir));
        let (stdout, stderr) = text(&out);
        if !out.status.success() && stderr.contains("NVRTC") {
            naive_reference::skip::skip("prover prepare --arch", &stderr, "REQUIRE_NVRTC");
            return serde_json::Value::Null;
        }
        assert!(out.status.success(), "prover prepare {args:?}\nstdout: {stdout}\nstderr: {stderr}");
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
    };
    let units = |v: &serde_json::Value| -> Vec<(String, String, String)> {
        v["prepared"][0]["units"]
            .as_array()
            .expect("a unit list")
            .iter()
            .map(|u| {
                let s = |k: &str| u[k].as_str().unwrap().to_string();
                (s("unit"), s("origin"), s("target"))
            })
            .collect()
    };
    // sm_130: newer than any NVRTC 13.0 knows, so never embedded: PTX for the newest it knows.
    let first = json(&["--arch", "sm_130", "--json"]);
    if first.is_null() {
        return;
    }
    assert_eq!(first["prepared"][0]["arch"], "sm_130");
    assert_eq!(first["prepared"][0]["cache_dir"], path_str(&dir));
    let compiled = units(&first);
    assert!(compiled.len() >= 15, "{compiled:?}");
    for (unit, origin, target) in &compiled {
        assert_eq!(origin, "compiled", "{unit}");
        assert!(target.starts_with("compute_"), "{unit}: {target}");
    }
    assert!(
        compiled.iter().any(|u| u.0 == "lde.cu:ntt_dif_pass_lean16") && compiled.iter().any(|u| u.0 == "merkle.cu")
    );
    let entries = || std::fs::read_dir(&dir).unwrap().count();
    assert_eq!(entries(), compiled.len(), "one cache entry per unit");
    // Again: everything is in the cache, nothing is compiled, nothing is added.
    let out = prepare(&["--arch", "130"], Some(&dir));
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let n = compiled.len();
    assert!(stdout.contains(&format!("sm_130: {n} units: 0 embedded, 0 compiled now, {n} already cached")), "{stdout}");
    assert!(stdout.contains(&format!("kernel cache: {}", dir.display())), "{stdout}");
    assert_eq!(entries(), n);
    // sm_90 and sm_80 at once: embedded when this binary has images (nothing stored), else
    // compiled for that architecture.
    let both = json(&["--arch", "sm_90,sm_80", "--json"]);
    let embedded = !both["embedded"].as_str().unwrap().starts_with("none");
    for (i, arch) in ["sm_90", "sm_80"].into_iter().enumerate() {
        let v = serde_json::json!({ "prepared": [both["prepared"][i].clone()] });
        assert_eq!(both["prepared"][i]["arch"], arch);
        for (unit, origin, target) in units(&v) {
            assert_eq!(origin, if embedded { "embedded" } else { "compiled" }, "{arch} {unit}");
            assert_eq!(target, arch, "{unit}");
        }
    }
    assert_eq!(entries(), if embedded { n } else { 3 * n });
}
