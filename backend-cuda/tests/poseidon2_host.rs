//! The CUDA Poseidon2 permutation (`shaders/cuda/poseidon2.cuh`) compiled for the host by the
//! system C++ compiler and checked against the naive reference, so that its round structure (the
//! order of the layers, `M4`, the internal diagonal written as additions and halvings, the round
//! constants' indices) is checked on every machine, GPU or not.
//!
//! Off a GPU, `common.cuh` takes its portable branches (the `#ifndef __CUDA_ARCH__` forms of the
//! field operations, the `u128` product), so this checks the permutation's structure and the
//! portable arithmetic; the inline-PTX arithmetic of the device branch is the one the LDE and its
//! field self-test already exercise on the device, and the conformance suite checks the whole
//! kernel there. Without a C++ compiler the test prints SKIPPED (`REQUIRE_CXX=1` makes that a
//! failure); `CXX` names the compiler (default `c++`).

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use naive_reference::poseidon2::permute;
use naive_reference::skip;

/// Stand-ins for the CUDA qualifiers and intrinsics that the kernel headers use.
const HOST_SHIM: &str = r#"
#include <cstdio>
#define __device__
#define __host__
#define __constant__
#define __forceinline__ inline
#define __launch_bounds__(x)
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
    return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
static inline unsigned __brev(unsigned x) {
    unsigned r = 0;
    for (int i = 0; i < 32; ++i) r = (r << 1) | ((x >> i) & 1u);
    return r;
}
static inline unsigned __byte_perm(unsigned a, unsigned b, unsigned s) {
    unsigned long long v = ((unsigned long long)b << 32) | a, r = 0;
    for (int i = 0; i < 4; ++i) r |= ((v >> (8 * ((s >> (4 * i)) & 7u))) & 0xffull) << (8 * i);
    return (unsigned)r;
}
#include "poseidon2.cuh"
// Reads states of 8 words from stdin; writes each permuted state, canonical, and each state's
// compression of (first 4 words, last 4 words).
int main() {
    u64 s[8];
    while (scanf("%llx %llx %llx %llx %llx %llx %llx %llx", &s[0], &s[1], &s[2], &s[3], &s[4], &s[5], &s[6], &s[7]) == 8) {
        u64 c[4];
        poseidon2_compress(s, c);
        poseidon2_permute(s);
        for (int i = 0; i < 8; ++i) printf("%llx ", gl_canon(s[i]));
        for (int i = 0; i < 4; ++i) printf("%llx ", c[i]);
        printf("\n");
    }
    return 0;
}
"#;

fn shaders_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shaders/cuda")
}

/// Deterministic states: Plonky3's known-answer input, edge values around p and 2^64, and
/// splitmix64 words (a third of them forced to be non-canonical).
fn states() -> Vec<[u64; 8]> {
    const P: u64 = 0xFFFF_FFFF_0000_0001;
    let mut out = vec![[0, 1, 2, 3, 4, 5, 6, 7], [0; 8], [P - 1; 8], [P; 8], [u64::MAX; 8]];
    out.push([P, P + 1, u64::MAX, 0, 1, P - 1, 1 << 63, (1 << 32) - 1]);
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    for k in 0..200 {
        let mut s = [0u64; 8];
        for (i, w) in s.iter_mut().enumerate() {
            let r = next();
            *w = if (k + i) % 3 == 0 { P + r % (u64::MAX - P + 1) } else { r };
        }
        out.push(s);
    }
    out
}

#[test]
fn the_cuda_permutation_compiled_for_the_host_matches_the_reference() {
    let what = "the_cuda_permutation_compiled_for_the_host_matches_the_reference";
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let dir = std::env::temp_dir().join(format!("stark-commit-poseidon2-host-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary directory");
    let (source, binary) = (dir.join("poseidon2_host.cpp"), dir.join("poseidon2_host"));
    std::fs::write(&source, HOST_SHIM).expect("write the harness");
    let built = Command::new(&cxx)
        .args(["-std=c++17", "-O1", "-x", "c++"])
        .arg("-I")
        .arg(shaders_dir())
        .arg(&source)
        .arg("-o")
        .arg(&binary)
        .output();
    let built = match built {
        Ok(out) => out,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            skip::skip(what, format_args!("no C++ compiler `{cxx}`: {e}"), "REQUIRE_CXX");
            return;
        }
    };
    assert!(built.status.success(), "{cxx} failed on poseidon2.cuh:\n{}", String::from_utf8_lossy(&built.stderr));

    let states = states();
    let input: String = states.iter().map(|s| s.iter().map(|w| format!("{w:x} ")).collect::<String>() + "\n").collect();
    let mut child =
        Command::new(&binary).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("run the harness");
    child.stdin.take().expect("stdin").write_all(input.as_bytes()).expect("feed the harness");
    let out = child.wait_with_output().expect("harness output");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "the harness failed");
    let lines: Vec<String> = String::from_utf8(out.stdout).expect("text").lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), states.len(), "one line per state");
    for (state, line) in states.iter().zip(&lines) {
        let got: Vec<u64> = line.split_whitespace().map(|w| u64::from_str_radix(w, 16).expect("hex")).collect();
        let mut expected = *state;
        permute(&mut expected);
        assert_eq!(got[..8], expected, "permutation of {state:x?}");
        let compressed = naive_reference::poseidon2::compress(
            &state[..4].try_into().expect("4 words"),
            &state[4..].try_into().expect("4 words"),
        );
        assert_eq!(got[8..], compressed, "compression of {state:x?}");
    }
}
