//! The `prover` CLI: commit a table on the best backend here, plan a shape against a device's
//! memory, list the backends. The code lives in [`prover::cli`].

fn main() -> std::process::ExitCode {
    // First, while no other thread exists.
    prover::cli::quiet_headless_vulkan();
    prover::cli::main()
}
