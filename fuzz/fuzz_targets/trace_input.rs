//! Fuzzes the prover's input handling: everything a user hands the `prover` CLI before a device is
//! touched.
//!
//! Each input exercises three public entry points of the `prover` crate, and checks that none
//! panics and that each answers consistently:
//! 1. **Byte sizes** (`units::parse_bytes`, the parser of `--budget` and `--scratch-cap`): on any
//!    text it returns a value or a message quoting the text; a value round-trips through its plain
//!    decimal spelling, and text of plain digits parses to exactly that number.
//! 2. **Commit validation** (`CommitPlan::new`, what `prover commit` and `prover plan` run on
//!    `--rows`, `--cols`, `--blowup`, `--shift`, `--split`, `--hash`, `--layout`,
//!    `--scratch-cap`): any values, including zero, huge and overflowing ones, either validate —
//!    and then satisfy every documented precondition, with a memory model whose terms sum without
//!    overflow — or are refused with an error whose CLI exit code is the usage code, 2.
//! 3. **Raw trace files** (`read_trace_file`, `--input`): a file of the fuzzer's bytes against a
//!    declared shape is read back exactly when its length is `rows * cols * 8`, as little-endian
//!    `u64`s, and refused otherwise with an input error (exit code 2) naming both lengths.
//!
//! Input decoding: byte 0 is the length of the size text that follows; then eight little-endian
//! `u64`s for the commit parameters; then two bytes for the trace file's shape (`1..=16` rows and
//! columns, so the expected length is often hit); the rest is the file's content.

#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use backend_api::{ELEM_BYTES, HashKind, LeafLayout, MatrixShape};
use libfuzzer_sys::fuzz_target;
use prover::units::parse_bytes;
use prover::{CommitParams, CommitPlan, EXIT_USAGE, ProverError, read_trace_file, write_u64_file};

const P: u64 = 0xFFFF_FFFF_0000_0001;

/// Reads from the fuzzer's bytes; zero once they run out.
struct Bytes<'a>(&'a [u8]);

impl<'a> Bytes<'a> {
    fn slice(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.0.len());
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        head
    }
    fn u8(&mut self) -> u8 {
        self.slice(1).first().copied().unwrap_or(0)
    }
    fn u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        let s = self.slice(8);
        b[..s.len()].copy_from_slice(s);
        u64::from_le_bytes(b)
    }
}

/// A per-process scratch file for the trace-file check.
fn scratch_path() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let dir = if std::path::Path::new("/dev/shm").is_dir() { "/dev/shm".into() } else { std::env::temp_dir() };
        dir.join(format!("stark-commit-fuzz-trace-{}.bin", std::process::id()))
    })
}

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let text_len = b.u8() as usize % 24;
    let text = String::from_utf8_lossy(b.slice(text_len)).into_owned();
    check_bytes(&text);

    let raw: [u64; 8] = std::array::from_fn(|_| b.u64());
    check_commit_plan(raw);

    let rows = 1 + b.u8() as usize % 16;
    let cols = 1 + b.u8() as usize % 16;
    check_trace_file(MatrixShape::new(rows, cols).expect("small shape"), b.0);
});

fn check_bytes(text: &str) {
    match parse_bytes(text) {
        Ok(n) => {
            assert_eq!(parse_bytes(&n.to_string()), Ok(n), "{text:?} -> {n} does not round-trip");
            let t = text.trim();
            if !t.is_empty() && t.bytes().all(|c| c.is_ascii_digit()) {
                assert_eq!(Some(n), t.parse::<usize>().ok(), "{text:?} is a plain integer");
            }
        }
        Err(msg) => assert!(msg.contains(&format!("{text:?}")), "the message {msg:?} does not quote {text:?}"),
    }
}

fn check_commit_plan(raw: [u64; 8]) {
    // Small values are the interesting ones for most fields: a value with its top bit clear is
    // reduced to `bits` bits; one with the top bit set is used whole (huge, overflowing).
    let small = |x: u64, bits: u32| if x >> 63 == 1 { x as usize } else { (x % (1u64 << bits)) as usize };
    let rows = small(raw[0], 24);
    let cols = small(raw[1], 12);
    let blowup = small(raw[2], 6);
    // 0 and p are the two u64 values that are zero mod p.
    let shift = match raw[3] % 8 {
        0 => 0,
        1 => P,
        _ => raw[3] >> 3,
    };
    let split = (!raw[4].is_multiple_of(3)).then(|| small(raw[4] >> 2, 12));
    let params = CommitParams {
        blowup,
        shift,
        hash: HashKind::ALL[raw[5] as usize % 3],
        layout: LeafLayout::ALL[(raw[5] >> 2) as usize % 2],
        split,
        scratch_cap: small(raw[6], 32),
        budget: Some(raw[7] as usize),
        ..CommitParams::default()
    };
    match CommitPlan::new(rows, cols, &params) {
        Ok(plan) => {
            assert!(rows.is_power_of_two() && blowup.is_power_of_two(), "{rows} x {cols}, blowup {blowup} accepted");
            let big = rows.checked_mul(blowup).expect("accepted domain overflows");
            assert!(big <= 1 << 32, "domain of {big} rows accepted");
            assert!(shift % P != 0, "zero shift {shift} accepted");
            if let Some(s) = split {
                assert!(s >= 1 && s < cols, "split {s} of {cols} columns accepted");
            }
            assert!(params.layout == LeafLayout::Rows || big >= 2, "pairs layout over {big} rows accepted");
            assert_eq!((plan.lde_shape().rows(), plan.lde_shape().cols()), (big, cols));
            assert_eq!(plan.trees.len(), if split.is_some() { 2 } else { 1 });
            let terms = plan.model.terms();
            let sum = terms.iter().try_fold(0usize, |acc, t| acc.checked_add(t.1));
            assert!(sum.is_some(), "the memory model of an accepted commit overflows: {terms:?}");
            assert!(plan.model.scratch <= params.scratch_cap, "scratch {} over the cap", plan.model.scratch);
        }
        Err(e) => {
            assert_eq!(e.exit_code(), EXIT_USAGE, "validation error with a non-usage exit code: {e}");
            assert!(!e.to_string().is_empty());
        }
    }
}

fn check_trace_file(shape: MatrixShape, content: &[u8]) {
    let path = scratch_path();
    std::fs::write(path, content).expect("write the scratch file");
    let expected = shape.len() * ELEM_BYTES;
    match read_trace_file(path, shape) {
        Ok(values) => {
            assert_eq!(content.len(), expected, "accepted a file of {} B for {shape}", content.len());
            let decoded: Vec<u64> =
                content.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect();
            assert_eq!(values, decoded);
            // Writing the values back gives the same bytes.
            write_u64_file(path, &values).expect("write back");
            assert_eq!(std::fs::read(path).expect("read back"), content);
        }
        Err(e) => {
            assert_ne!(content.len(), expected, "refused a file of the right length: {e}");
            assert!(matches!(e, ProverError::Input { .. }), "wrong error kind: {e:?}");
            assert_eq!(e.exit_code(), EXIT_USAGE);
            let msg = e.to_string();
            assert!(msg.contains(&format!("{} B", content.len())) && msg.contains(&format!("{expected} B")), "{msg}");
        }
    }
}
