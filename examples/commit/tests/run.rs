//! Runs the example as a user would and checks what it prints: every check passes, the refusal
//! and the invalid input are reported, and the CPU and wgpu (llvmpipe here) roots are equal.

use std::process::Command;

fn run(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_commit-example")).args(args).output().expect("the example runs");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

/// The `roots <backend> <root0> <root1>` lines.
fn roots(stdout: &str) -> Vec<(String, Vec<String>)> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("roots "))
        .map(|l| {
            let mut words = l.split(' ').map(String::from);
            (words.next().unwrap(), words.collect())
        })
        .collect()
}

#[test]
fn the_example_checks_out_on_every_backend_and_the_roots_agree() {
    let wgpu = cfg!(feature = "wgpu");
    let args: &[&str] = if wgpu { &["cpu", "wgpu"] } else { &["cpu", "auto"] };
    let (ok, stdout, stderr) = run(args);
    assert!(ok, "the example failed:\n{stdout}\n{stderr}");
    assert!(!stderr.contains("XDG_RUNTIME_DIR"), "headless Vulkan printed window-system errors:\n{stderr}");
    let roots = roots(&stdout);
    assert_eq!(roots.len(), 2, "{stdout}");
    assert_eq!(roots[0].0, "cpu");
    if wgpu {
        assert_eq!(roots[1].0, "wgpu", "{stdout}\n{stderr}");
    }
    for (backend, r) in &roots {
        assert_eq!(r.len(), 2, "two split trees: {stdout}");
        assert!(r.iter().all(|h| h.len() == 64 && h.bytes().all(|c| c.is_ascii_hexdigit())), "{backend}: {r:?}");
        for what in ["LDE", "column 5", "host copy", "roots"] {
            assert!(stdout.contains(&format!("check {backend} {what}: ok")), "{backend} {what}:\n{stdout}");
        }
        assert!(stdout.contains(&format!("refused {backend}: needs ")), "{stdout}");
        assert!(stdout.contains(&format!("invalid {backend}: invalid argument: split column 6")), "{stdout}");
    }
    assert_eq!(roots[0].1, roots[1].1, "{stdout}");
    assert!(!stdout.contains("FAILED"), "{stdout}");
}

#[test]
fn a_bad_backend_list_is_a_usage_error() {
    let (ok, _, stderr) = run(&["metal"]);
    assert!(!ok);
    assert!(stderr.contains("unknown backend `metal`"), "{stderr}");
}
