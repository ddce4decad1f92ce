//! The `prover` CLI.

fn main() {}
