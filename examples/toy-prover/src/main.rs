//! The `prover` CLI with the toy backend added: `toy-prover backends` lists it and
//! `toy-prover commit --backend toy` commits on it; every other backend and subcommand is as in
//! `prover`.

use prover::select::Port;

fn main() -> std::process::ExitCode {
    // First, while no other thread exists.
    prover::cli::quiet_headless_vulkan();
    prover::cli::main_with(Port::new("toy", "a single-threaded host backend (examples/toy-backend)", || {
        Ok(toy_backend::ToyBackend::new())
    }))
}
