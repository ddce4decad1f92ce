//! Fuzzes the in-place transpose plan and its fused schedule for any rows, cols, scratch cap and
//! fusion limits; the contract and the input decoding are in `transpose_plan_check.rs`.

#![no_main]

use libfuzzer_sys::fuzz_target;

mod transpose_plan_check;

fuzz_target!(|data: &[u8]| transpose_plan_check::run(data));
