//! The "Bad input" table of docs/cli.md, row by row, with each row's example run verbatim and its whole
//! message and exit code checked; then bad inputs the table does not list yet (candidates for new
//! rows), and inputs that look bad but are valid.
//!
//! `cli.rs` covers the same rows with narrower message checks; this file pins the exact text the
//! page quotes, so a change of wording fails here until the page is updated with it.

mod common;

use std::time::{Duration, Instant};

use common::{P, naive_lde, path_str as s, prover, read_u64s, temp_dir, text, transpose, write_u64s};

/// Runs `args`; expects exit `code`, every `want` in stderr (`error: ` first), an empty stdout
/// and no panic; returns stderr.
fn expect(args: &[&str], code: i32, want: &[&str]) -> String {
    let out = prover(args);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(code), "prover {args:?}\nstdout: {stdout}\nstderr: {stderr}");
    assert!(stderr.starts_with("error: "), "prover {args:?}: stderr does not start with `error: `:\n{stderr}");
    for w in want {
        assert!(stderr.contains(w), "prover {args:?}: stderr lacks {w:?}:\n{stderr}");
    }
    assert!(!stderr.contains("panicked"), "prover {args:?} panicked:\n{stderr}");
    assert!(stdout.trim().is_empty(), "prover {args:?} printed a report on failure:\n{stdout}");
    stderr
}

/// Every row of the table in docs/cli.md, in the table's order, with the example from its "example"
/// column and the text of its "message" column.
#[test]
fn every_readme_row_gives_its_documented_message_and_exit_code() {
    let dir = temp_dir("readme-rows");
    let t95 = dir.join("t.bin");
    std::fs::write(&t95, vec![0u8; 95]).unwrap();
    let empty = dir.join("empty.bin");
    std::fs::write(&empty, []).unwrap();
    let t3x2 = dir.join("t3x2.bin");
    write_u64s(&t3x2, &[1, 2, 3, 4, 5, 6]);
    let missing = dir.join("missing.bin");
    let out_missing = dir.join("no-such-dir").join("lde.bin");

    // trace file length != rows*cols*8
    expect(
        &["commit", "--input", s(&t95), "--rows", "4", "--cols", "3"],
        2,
        &[&format!(
            "{}: the trace file holds 95 B, but 4 rows x 3 cols of u64 need 96 B (rows * cols * 8)",
            t95.display()
        )],
    );
    // missing trace file
    expect(
        &["commit", "--input", s(&missing), "--rows", "4", "--cols", "3"],
        2,
        &[&format!("{}: cannot read the trace file: No such file or directory (os error 2)", missing.display())],
    );
    // zero rows
    expect(
        &["commit", "--input", s(&empty), "--rows", "0", "--cols", "4"],
        2,
        &["invalid shape: a matrix needs at least one row and one column, got 0 x 4"],
    );
    // zero columns
    expect(
        &["commit", "--cols", "0"],
        2,
        &["invalid shape: a matrix needs at least one row and one column, got 65536 x 0"],
    );
    // rows not a power of two
    expect(
        &["commit", "--input", s(&t3x2), "--rows", "3", "--cols", "2"],
        2,
        &["invalid shape: the trace row count must be a power of two, got 3"],
    );
    // blowup not a power of two
    expect(&["commit", "--blowup", "3"], 2, &["invalid shape: the blowup must be a power of two, got 3"]);
    // LDE domain N > 2^32
    expect(
        &["commit", "--log-rows", "31", "--blowup", "4"],
        2,
        &["invalid shape: the LDE domain 2147483648 x 4 = 2^33 rows exceeds the field's 2^32"],
    );
    // split outside 1..cols-1
    expect(
        &["commit", "--split", "64"],
        2,
        &["invalid argument: split column 64 is outside 1..=63 for a table of 64 columns"],
    );
    // split of a 1-column table
    expect(
        &["commit", "--cols", "1", "--split", "1"],
        2,
        &["invalid argument: split column 1 is impossible: a split needs at least 2 columns, the table has 1"],
    );
    // scratch cap smaller than one run
    expect(
        &["commit", "--cols", "8", "--scratch-cap", "64"],
        2,
        &[
            "scratch cap 64 B is smaller than one run: a 8-column transpose needs at least 72 B (one row block of 1 row plus one run, (cols + 1) * 8 B)",
        ],
    );
    // unreadable size
    expect(
        &["commit", "--scratch-cap", "12 parsecs"],
        2,
        &[
            "invalid value '12 parsecs' for '--scratch-cap <BYTES>': \"12 parsecs\": unknown unit \"parsecs\"; use B, KiB, MiB, GiB or TiB",
        ],
    );
    // lambda-vm-pairs with N < 2
    expect(
        &["commit", "--log-rows", "0", "--blowup", "1", "--layout", "lambda-vm-pairs"],
        2,
        &["invalid argument: the lambda-vm-pairs layout needs a power-of-two row count >= 2, got 1"],
    );
    // shift = 0 mod p
    expect(
        &["commit", "--shift", "18446744069414584321"],
        2,
        &["invalid argument: the coset shift must be non-zero mod p, got 18446744069414584321"],
    );
    // --rows without --input
    expect(&["commit", "--rows", "4"], 2, &["the following required arguments were not provided", "--input <FILE>"]);
    // --out in a missing directory
    expect(
        &["commit", "--out", s(&out_missing)],
        2,
        &[&format!(
            "{}: cannot write the LDE: {} is not a directory",
            out_missing.display(),
            dir.join("no-such-dir").display()
        )],
    );
    // unknown backend
    let stderr = expect(&["commit", "--backend", "metal"], 2, &["invalid value 'metal' for '--backend <BACKEND>'"]);
    for possible in ["auto", "cpu"] {
        assert!(stderr.contains(possible), "the possible values are not listed:\n{stderr}");
    }
    // Only the backends compiled in are listed.
    for (backend, compiled) in [("cuda", cfg!(feature = "cuda")), ("wgpu", cfg!(feature = "wgpu"))] {
        assert_eq!(stderr.contains(backend), compiled, "{backend} listed as possible value:\n{stderr}");
    }
    // backend not compiled in / compiled in with no device
    for (backend, compiled) in [("cuda", cfg!(feature = "cuda")), ("wgpu", cfg!(feature = "wgpu"))] {
        if !compiled {
            expect(
                &["commit", "--backend", backend],
                1,
                &[&format!(
                    "backend {backend} is unavailable: not compiled into this binary (rebuild with `--features {backend}`)"
                )],
            );
        }
    }
    // budget too small
    let stderr = expect(
        &["commit", "--log-rows", "10", "--cols", "8", "--budget", "64KiB"],
        1,
        &[
            "commit refused: it needs 430048 B (419.97 KiB), the budget is 65536 B (64.00 KiB) with 0 B (0 B) already admitted",
        ],
    );
    for term in ["LDE", "trace", "Merkle trees", "transpose scratch", "twiddles", "total"] {
        assert!(stderr.lines().any(|l| l.trim_start().starts_with(term)), "no line for {term:?}:\n{stderr}");
    }
    // unreadable --memory
    expect(
        &["plan", "--log-rows", "10", "--cols", "8", "--memory", "lots"],
        2,
        &[
            "invalid value 'lots' for '--memory <BYTES>': \"lots\": expected a number of bytes, e.g. 4096, 256MiB or 80GiB",
        ],
    );
}

/// Bad inputs the table does not list (yet): each gets a message naming the value and the usage
/// exit code, and none panics or starts work.
#[test]
fn bad_inputs_not_in_the_table() {
    let dir = temp_dir("extra");
    let t = dir.join("t.bin");
    write_u64s(&t, &[1, 2, 3, 4, 5, 6, 7, 8]);
    // Sizes whose element count or byte count overflows: refused as shapes, before any file is
    // read or table generated.
    expect(
        &["commit", "--input", s(&t), "--rows", "18446744073709551615", "--cols", "2"],
        2,
        &["invalid shape: 18446744073709551615 x 2 u64 overflows the address space"],
    );
    expect(&["commit", "--log-rows", "4", "--cols", "2305843009213693952"], 2, &["overflows the address space"]);
    // A shape that fits, with a snapshot that does not: 2^32 x 2^28 is 2^63 B, and the snapshot
    // doubles it. The plan names the overflow instead of wrapping it into a fit.
    let huge = ["--log-rows", "32", "--cols", "268435456", "--blowup", "1", "--scratch-cap", "8GiB"];
    let plan = |extra: &[&'static str]| [&["plan"][..], &huge, extra].concat();
    expect(&plan(&["--snapshot", "--memory", "1TiB"]), 2, &["commit memory model", "overflows the address space"]);
    // Without the snapshot the model fits usize, and no device of 1 TiB holds it.
    let out = prover(&plan(&["--memory", "1TiB"]));
    let (stdout, stderr) = text(&out);
    assert_ne!(out.status.code(), Some(0), "a 8 EiB commit fits 1 TiB?\n{stdout}{stderr}");
    assert!(!stdout.contains("FITS"), "{stdout}");
    // Out-of-range and unparsable flag values (clap).
    expect(&["commit", "--log-rows", "64"], 2, &["invalid value '64' for '--log-rows <LOG_ROWS>'"]);
    expect(&["commit", "--shift", "seven"], 2, &["invalid value 'seven' for '--shift <SHIFT>'"]);
    expect(&["commit", "--shift", "18446744073709551616"], 2, &["invalid value '18446744073709551616' for '--shift"]);
    expect(&["commit", "--hash", "sha256"], 2, &["invalid value 'sha256' for '--hash <HASH>'"]);
    expect(&["commit", "--layout", "columns"], 2, &["invalid value 'columns' for '--layout <LAYOUT>'"]);
    expect(&["commit", "--cols", "-3"], 2, &["unexpected argument '-3'"]);
    expect(&["frobnicate"], 2, &["unrecognized subcommand 'frobnicate'"]);
    // --input with a synthetic-table flag.
    expect(&["commit", "--input", s(&t), "--rows", "4", "--cols", "2", "--log-rows", "4"], 2, &["cannot be used with"]);
    // Byte sizes: decimal units are ambiguous, too large overflows, a zero scratch cap is too small.
    expect(&["commit", "--budget", "12 GB"], 2, &["decimal units are ambiguous here; use KiB, MiB, GiB or TiB"]);
    expect(&["commit", "--budget", "99999999999999999999"], 2, &["\"99999999999999999999\" is too large"]);
    expect(&["commit", "--budget", "16777216TiB"], 2, &["is too large"]);
    expect(&["commit", "--log-rows", "4", "--scratch-cap", "0"], 2, &["scratch cap 0 B is smaller than one run"]);
    // A zero shift (the other u64 that is 0 mod p).
    expect(&["commit", "--shift", "0"], 2, &["the coset shift must be non-zero mod p, got 0"]);
    // A directory given as the trace file: an input error naming it, never a panic.
    let d = dir.join("a-directory");
    std::fs::create_dir_all(&d).unwrap();
    expect(
        &["commit", "--input", s(&d), "--rows", "4", "--cols", "2"],
        2,
        &[&format!("{}: cannot read the trace file: the path is a directory", d.display())],
    );
    // --out naming a directory.
    expect(&["commit", "--log-rows", "4", "--out", s(&dir)], 2, &["cannot write the LDE: the path is a directory"]);
    // plan needs --memory.
    expect(&["plan", "--log-rows", "4", "--cols", "2"], 2, &["--memory <BYTES>"]);
}

/// A table far larger than the machine is refused by admission at once: nothing is generated or
/// allocated first (a 2^32 x 4096 table would be 128 TiB).
#[test]
fn an_enormous_table_is_refused_before_it_is_generated() {
    let start = Instant::now();
    expect(
        &["commit", "--log-rows", "32", "--cols", "4096", "--blowup", "1", "--backend", "cpu"],
        1,
        &["commit refused: it needs", "LDE", "total"],
    );
    expect(&["commit", "--log-rows", "30", "--cols", "1024", "--backend", "cpu", "--json"], 1, &["commit refused"]);
    assert!(start.elapsed() < Duration::from_secs(10), "refusals took {:?}", start.elapsed());
}

/// Values that look bad but are valid field inputs: a trace file of non-canonical values (`p`,
/// `p + 1`, `u64::MAX`, ...) is accepted and reduced mod p, giving the naive reference's LDE.
#[test]
fn non_canonical_trace_values_are_accepted_and_reduced() {
    let dir = temp_dir("non-canonical");
    let (n, m) = (8, 3);
    let trace: Vec<u64> = (0..n * m)
        .map(|i| [P, P + 1, u64::MAX, P - 1, u64::MAX - 1, P + 7][i % 6].wrapping_add((i / 6) as u64))
        .collect();
    let input = dir.join("t.bin");
    let out = dir.join("lde.bin");
    write_u64s(&input, &trace);
    let o = prover(&[
        "commit",
        "--input",
        s(&input),
        "--rows",
        &n.to_string(),
        "--cols",
        &m.to_string(),
        "--out",
        s(&out),
        "--backend",
        "cpu",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let expected = transpose(&naive_lde(&trace, n, m, 2, 7), 2 * n, m);
    assert_eq!(read_u64s(&out), expected);
    assert!(read_u64s(&out).iter().all(|&x| x < P), "the LDE is not canonical");
}
