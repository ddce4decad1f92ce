//! The Poseidon2 constant files of the kernels (`cuda/poseidon2_constants.cuh`,
//! `wgsl/poseidon2_constants.wgsl`) are generated from p3-goldilocks's own tables, and this test
//! keeps them so: it renders both from `GOLDILOCKS_POSEIDON2_RC_8_*` and
//! `MATRIX_DIAG_8_GOLDILOCKS` and compares them with the files. After a Plonky3 upgrade that
//! changes the constants, `UPDATE_POSEIDON2_CONSTANTS=1 cargo test -p shaders` rewrites them.

use std::fmt::Write as _;
use std::path::Path;

use p3_field::PrimeField64;
use p3_goldilocks::{
    GOLDILOCKS_POSEIDON2_RC_8_EXTERNAL_FINAL, GOLDILOCKS_POSEIDON2_RC_8_EXTERNAL_INITIAL,
    GOLDILOCKS_POSEIDON2_RC_8_INTERNAL, Goldilocks, MATRIX_DIAG_8_GOLDILOCKS,
};

const HEADER: &str = "Generated from p3-goldilocks 0.9.0-rc.2 (GOLDILOCKS_POSEIDON2_RC_8_EXTERNAL_INITIAL, \
                      GOLDILOCKS_POSEIDON2_RC_8_INTERNAL, GOLDILOCKS_POSEIDON2_RC_8_EXTERNAL_FINAL, \
                      MATRIX_DIAG_8_GOLDILOCKS) by shaders/tests/poseidon2_constants.rs; do not edit.";

fn flat() -> (Vec<u64>, Vec<u64>, Vec<u64>) {
    let c = |x: &Goldilocks| x.as_canonical_u64();
    let external: Vec<u64> = GOLDILOCKS_POSEIDON2_RC_8_EXTERNAL_INITIAL
        .iter()
        .chain(&GOLDILOCKS_POSEIDON2_RC_8_EXTERNAL_FINAL)
        .flat_map(|round| round.iter().map(c))
        .collect();
    let internal = GOLDILOCKS_POSEIDON2_RC_8_INTERNAL.iter().map(c).collect();
    let diag = MATRIX_DIAG_8_GOLDILOCKS.iter().map(c).collect();
    (external, internal, diag)
}

fn cuda() -> String {
    let (external, internal, diag) = flat();
    let mut s = format!(
        "// {HEADER}\n//\n// External round constants: rounds 0-3 (initial) then 4-7 (final), 8 per round.\n#pragma once\n\n"
    );
    let mut array = |name: &str, values: &[u64]| {
        writeln!(s, "__device__ __constant__ static const unsigned long long {name}[{}] = {{", values.len()).unwrap();
        for v in values {
            writeln!(s, "    0x{v:016x}ull,").unwrap();
        }
        s.push_str("};\n\n");
    };
    array("P2_EXTERNAL_RC", &external);
    array("P2_INTERNAL_RC", &internal);
    array("P2_INTERNAL_DIAG", &diag);
    s.pop();
    s
}

fn wgsl() -> String {
    let (external, internal, diag) = flat();
    let mut s = format!(
        "// {HEADER}\n//\n// Each constant as vec2<u32>(low, high). External round constants: rounds 0-3 (initial) \
         then 4-7 (final), 8 per round.\n\n"
    );
    let mut array = |name: &str, values: &[u64]| {
        writeln!(s, "const {name} = array<vec2<u32>, {}>(", values.len()).unwrap();
        for v in values {
            writeln!(s, "    vec2<u32>(0x{:08x}u, 0x{:08x}u),", *v as u32, (v >> 32) as u32).unwrap();
        }
        s.push_str(");\n\n");
    };
    array("P2_EXTERNAL_RC", &external);
    array("P2_INTERNAL_RC", &internal);
    array("P2_INTERNAL_DIAG", &diag);
    s.pop();
    s
}

fn check(relative: &str, expected: String) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    if std::env::var_os("UPDATE_POSEIDON2_CONSTANTS").is_some() {
        std::fs::write(&path, &expected).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        return;
    }
    let actual = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    assert!(
        actual == expected,
        "{} is not what p3-goldilocks's tables give; run UPDATE_POSEIDON2_CONSTANTS=1 cargo test -p shaders",
        path.display()
    );
}

#[test]
fn the_cuda_constants_are_plonky3s() {
    check("cuda/poseidon2_constants.cuh", cuda());
}

#[test]
fn the_wgsl_constants_are_plonky3s() {
    check("wgsl/poseidon2_constants.wgsl", wgsl());
}

#[test]
fn the_tables_have_the_shape_the_kernels_assume() {
    let (external, internal, diag) = flat();
    assert_eq!((external.len(), internal.len(), diag.len()), (64, 22, 8));
}

/// The CUDA kernel (cuda/poseidon2.cuh, `p2_internal`) multiplies by the internal diagonal with
/// additions and halvings for these values: -2, 1, 2, 1/2, 3, -1/2, -3, -4.
#[test]
fn the_internal_diagonal_is_the_one_the_cuda_kernel_specialises() {
    const P: u64 = 0xFFFF_FFFF_0000_0001;
    let half = P.div_ceil(2); // (p + 1) / 2 = 1/2
    let (_, _, diag) = flat();
    assert_eq!(diag, [P - 2, 1, 2, half, 3, P - half, P - 3, P - 4]);
}
