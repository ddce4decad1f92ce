//! The commit library as a prover calls it, end to end.
//!
//! `commit-example [BACKENDS...]` commits one table on each backend named (each argument a
//! fallback list such as `cuda,wgpu,cpu`; default `cpu` and `auto`), and on each:
//! prints the roots as hex; reads the column-major LDE back and checks it against a naive
//! evaluation; checks the two split trees' roots (lambda-vm-pairs layout) against naive Merkle
//! roots; takes the row-major host copy; shows a refusal under a tiny budget and an invalid
//! input as typed errors. It prints one `roots <backend> <root0> <root1>` line per backend and
//! exits with 1 when two backends give different roots or a check fails.

use std::process::ExitCode;

use naive_reference as naive;
use prover::prelude::*;

const ROWS: usize = 1 << 8;
const COLS: usize = 6;

fn main() -> ExitCode {
    // First, while no other thread runs: no `XDG_RUNTIME_DIR is invalid` lines from Vulkan.
    prover::cli::quiet_headless_vulkan();
    run().unwrap_or_else(|e| {
        eprintln!("error: {e}");
        ExitCode::from(e.exit_code())
    })
}

fn run() -> Result<ExitCode, ProverError> {
    let lists: Vec<String> = std::env::args().skip(1).collect();
    let lists = if lists.is_empty() { vec!["cpu".into(), "auto".into()] } else { lists };

    // A row-major ROWS x COLS trace; any u64 is accepted (read modulo p).
    let trace: Vec<u64> = (0..ROWS * COLS).map(|i| (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)).collect();
    let shape = MatrixShape::new(ROWS, COLS)?;
    // Two trees, over columns [0, 2) and [2, 6); leaves pair rows as lambda_vm does.
    let params = CommitParams {
        blowup: 4,
        split: Some(2),
        layout: LeafLayout::LambdaVmPairs,
        host_copy: true,
        ..CommitParams::default()
    };
    let big_n = ROWS * params.blowup;
    let want_lde = naive::coset_lde(&trace, ROWS, COLS, params.blowup, params.shift); // row-major
    let want_roots: Vec<[u8; 32]> = [0..2, 2..COLS]
        .map(|cols| {
            naive::merkle_root(&naive::leaf_digests(&want_lde, COLS, params.hash, params.layout, cols), params.hash)
        })
        .into();

    let mut all_roots: Vec<(&'static str, Vec<String>)> = Vec::new();
    let mut ok = true;
    for list in &lists {
        // `true`: a software adapter (llvmpipe) counts, as on a machine without a GPU.
        let (selected, skipped) = Registry::builtin().select_from(list, true)?;
        for why in skipped {
            eprintln!("{list}: skipped {why}");
        }
        let name = selected.name();
        let checks = with_backend!(selected, |b| {
            let mut c = commit(b, TraceInput::host(&trace, shape), &params, &NoProgress)?;
            println!("roots {name} {}", c.roots_hex().join(" "));
            all_roots.push((name, c.roots_hex()));
            // Column-major: column j is lde[j * N..(j + 1) * N].
            let lde = c.lde_to_host(b)?;
            let lde_ok = (0..big_n).all(|r| (0..COLS).all(|j| lde[j * big_n + r] == want_lde[r * COLS + j]));
            let column_ok = c.lde_column(b, 5)? == lde[5 * big_n..];
            // Row-major, queued before the leaves were hashed.
            let host_ok = *c.wait_host_copy()? == want_lde[..];
            [("LDE", lde_ok), ("column 5", column_ok), ("host copy", host_ok), ("roots", c.roots == want_roots)]
        });
        for (what, passed) in checks {
            println!("check {name} {what}: {}", if passed { "ok" } else { "FAILED" });
            ok &= passed;
        }

        // Typed errors: a budget of 64 KiB refuses the 48 KiB LDE with its trees and tables.
        let tiny = CommitParams { budget: Some(64 << 10), ..params.clone() };
        let err = with_backend!(selected, |b| commit(b, TraceInput::host(&trace, shape), &tiny, &NoProgress).err());
        match err.as_ref().and_then(ProverError::refusal) {
            Some(refusal) => {
                let terms: Vec<String> =
                    refusal.model.terms().iter().map(|(t, bytes)| format!("{t} {bytes} B")).collect();
                println!(
                    "refused {name}: needs {} B > budget {} B ({})",
                    refusal.model.total(),
                    refusal.budget,
                    terms.join(", ")
                );
            }
            None => {
                eprintln!("{name}: expected a refusal, got {err:?}");
                ok = false;
            }
        }
        // A split column outside 1..COLS: invalid input, the same on every backend.
        let bad = CommitParams { split: Some(COLS), ..params.clone() };
        let err = with_backend!(selected, |b| commit(b, TraceInput::host(&trace, shape), &bad, &NoProgress).err());
        match err {
            Some(e) if e.is_invalid_input() => println!("invalid {name}: {e}"),
            other => {
                eprintln!("{name}: expected invalid input, got {other:?}");
                ok = false;
            }
        }
    }

    if all_roots.windows(2).any(|w| w[0].1 != w[1].1) {
        eprintln!("roots differ between backends: {all_roots:?}");
        ok = false;
    }
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
