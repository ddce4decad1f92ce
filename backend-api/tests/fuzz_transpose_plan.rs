//! The `transpose_plan` fuzz target's checks (`fuzz/fuzz_targets/transpose_plan_check.rs`) on
//! seeded inputs, so that `cargo test` runs them where cargo-fuzz and nightly are absent.
//!
//! 3,000 inputs of 0..=24 random bytes: every shape mode (bounded and raw), cap mode and fusion
//! limit mode is hit hundreds of times; matrices stay at most 2^14 elements, so the whole run
//! takes a few seconds.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[path = "../../fuzz/fuzz_targets/transpose_plan_check.rs"]
mod transpose_plan_check;

#[test]
fn the_fuzz_target_checks_hold_on_seeded_inputs() {
    let mut rng = ChaCha8Rng::seed_from_u64(0x7472_616e_7370_6f73);
    for _ in 0..3000 {
        let len = rng.random_range(0..=24);
        let data: Vec<u8> = (0..len).map(|_| rng.random()).collect();
        transpose_plan_check::run(&data);
    }
    // The empty input and the all-ones input (every mode's last choice).
    transpose_plan_check::run(&[]);
    transpose_plan_check::run(&[0xff; 24]);
}
