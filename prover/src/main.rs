//! The `prover` CLI: commit a table on the best backend here, plan a shape against a device's
//! memory, list the backends. The code lives in [`prover::cli`].

fn main() -> std::process::ExitCode {
    prover::cli::main()
}
