//! The `toy-prover` binary end to end: the port is listed, selectable, and its commitments are
//! the independent references' (a naive LDE, the hash crates, a recursive Merkle root).

use backend_api::{HashKind, LeafLayout};
use conformance::reference::{coset_lde, leaf_digests, merkle_root, transpose};

fn toy_prover(args: &[&str]) -> (std::process::Output, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toy-prover")).args(args).output().expect("run toy-prover");
    let (stdout, stderr) =
        (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
    (out, stdout, stderr)
}

fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// A fresh private directory for one test, removed with all it holds when dropped.
fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(&format!("toy-prover-test-{name}-")).tempdir().expect("temp dir")
}

#[test]
fn backends_lists_the_port_as_usable() {
    let (o, stdout, stderr) = toy_prover(&["backends"]);
    assert!(o.status.success(), "{stderr}");
    assert!(stdout.contains("toy   usable: one host thread [port]"), "{stdout}");
    assert!(stdout.contains("cpu   usable: "), "{stdout}");
    // Unranked, so `auto` does not try it.
    assert!(stdout.contains("--backend auto tries: cuda, wgpu, cpu\n"), "{stdout}");
    let (o, stdout, _) = toy_prover(&["backends", "--json"]);
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let names: Vec<&str> = v["backends"].as_array().unwrap().iter().map(|b| b["backend"].as_str().unwrap()).collect();
    assert_eq!(names, ["cpu", "cuda", "wgpu", "toy"]);
    assert_eq!((v["backends"][3]["port"].as_bool(), v["backends"][3]["compiled"].as_bool()), (Some(true), Some(true)));
    assert_eq!(v["backends"][3]["device"], "one host thread");
}

#[test]
fn commit_on_the_port_gives_the_reference_lde_and_roots() {
    let dir = temp_dir("commit");
    let (n, m, blowup) = (16, 5, 4);
    // Non-canonical values (>= p) among them.
    let p = backend_api::field::P;
    let trace: Vec<u64> =
        (0..(n * m) as u64).map(|i| if i % 7 == 0 { p + i } else { i.wrapping_mul(0x9e37_79b9_7f4a_7c15) }).collect();
    let (input, out) = (dir.path().join("trace.bin"), dir.path().join("lde.bin"));
    std::fs::write(&input, trace.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
    let (o, stdout, stderr) = toy_prover(&[
        "commit",
        "--backend",
        "toy",
        "--json",
        "--input",
        input.to_str().unwrap(),
        "--rows",
        "16",
        "--cols",
        "5",
        "--blowup",
        "4",
        "--hash",
        "blake3",
        "--split",
        "2",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("one JSON object");
    assert_eq!(v["backend"], "toy");
    assert_eq!(v["device"], "one host thread");
    let lde = coset_lde(&trace, n, m, blowup, backend_api::field::DEFAULT_SHIFT);
    let bytes = std::fs::read(&out).unwrap();
    let got: Vec<u64> = bytes.chunks_exact(8).map(|b| u64::from_le_bytes(b.try_into().unwrap())).collect();
    assert_eq!(got, transpose(&lde, n * blowup, m));
    let want: Vec<String> = [(0, 2), (2, 5)]
        .iter()
        .map(|&(c0, c1)| {
            hex(&merkle_root(&leaf_digests(&lde, m, HashKind::Blake3, LeafLayout::Rows, c0..c1), HashKind::Blake3))
        })
        .collect();
    let roots: Vec<&str> = v["roots"].as_array().unwrap().iter().map(|r| r.as_str().unwrap()).collect();
    assert_eq!(roots, want);
}

#[test]
fn the_built_in_backends_and_errors_are_unchanged() {
    let (o, stdout, stderr) = toy_prover(&["commit", "--backend", "cpu", "--log-rows", "4", "--cols", "2"]);
    assert!(o.status.success(), "{stderr}");
    assert!(stdout.contains("backend: cpu on "), "{stdout}");
    let (o, _, stderr) = toy_prover(&["commit", "--backend", "metal"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr.contains("invalid value 'metal' for '--backend <BACKEND>'"), "{stderr}");
    // The built-in backends compiled into this build (features of `prover`, unified over the
    // workspace: `cuda` and `wgpu` are there or not), as `backends` lists them, then the port.
    let (o, listed, listed_err) = toy_prover(&["backends"]);
    assert!(o.status.success(), "{listed_err}");
    let compiled: Vec<&str> = listed
        .lines()
        .skip_while(|l| *l != "backends:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter(|l| !l.contains("not compiled into this binary") && !l.contains("[port]"))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(compiled.first(), Some(&"cpu"), "{listed}");
    let possible = format!("[possible values: auto, {}, toy]", compiled.join(", "));
    assert!(stderr.contains(&possible), "{stderr}");
}
