//! The cross-process admission checks of the reliability suite (`conformance::reliability::processes`),
//! run against this crate's `prover` binary: eight processes under a budget for two, and a
//! waiting process killed with SIGKILL. CPU always; CUDA and wgpu where compiled in, printing
//! `SKIPPED` without a device (`REQUIRE_CUDA=1` / `REQUIRE_WGPU=1` make that a failure).
//!
//! `PROVER_BIN` names another `prover` binary to drive: for a test executable carried to a GPU
//! machine without the build tree (cargo bakes this crate's binary path in at build time).

use std::path::PathBuf;

use conformance::reliability::{
    ProcessCheck, eight_processes_under_a_two_commit_budget as eight, run_process_check,
    sigkill_of_a_waiting_process_frees_its_share as sigkill,
};

fn run(backend: &str, name: &str, require_env: &str, check: ProcessCheck) {
    let exe = std::env::var_os("PROVER_BIN").map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_prover")), PathBuf::from);
    // The key the binary's `--wait-for-memory` queue uses for this backend's device.
    let device_key =
        prover::select::Registry::builtin().select(backend).map(|(b, _)| b.device_key()).map_err(|e| e.to_string());
    run_process_check(&exe, backend, device_key, name, require_env, check);
}

#[test]
fn cpu_eight_processes_under_a_two_commit_budget() {
    run("cpu", "eight_processes_under_a_two_commit_budget", "REQUIRE_CPU", eight);
}

#[test]
fn cpu_sigkill_of_a_waiting_process_frees_its_share() {
    run("cpu", "sigkill_of_a_waiting_process_frees_its_share", "REQUIRE_CPU", sigkill);
}

#[cfg(feature = "cuda")]
#[test]
fn cuda_eight_processes_under_a_two_commit_budget() {
    run("cuda", "eight_processes_under_a_two_commit_budget", "REQUIRE_CUDA", eight);
}

#[cfg(feature = "cuda")]
#[test]
fn cuda_sigkill_of_a_waiting_process_frees_its_share() {
    run("cuda", "sigkill_of_a_waiting_process_frees_its_share", "REQUIRE_CUDA", sigkill);
}

#[cfg(feature = "wgpu")]
#[test]
fn wgpu_eight_processes_under_a_two_commit_budget() {
    run("wgpu", "eight_processes_under_a_two_commit_budget", "REQUIRE_WGPU", eight);
}

#[cfg(feature = "wgpu")]
#[test]
fn wgpu_sigkill_of_a_waiting_process_frees_its_share() {
    run("wgpu", "sigkill_of_a_waiting_process_frees_its_share", "REQUIRE_WGPU", sigkill);
}
