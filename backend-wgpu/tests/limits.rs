//! The wgpu backend at the edges of what its API accepts, against independent references:
//! - coset LDEs at every blowup up to the largest the backend accepts (beyond it, a typed
//!   refusal that names the limit), against `conformance::reference`'s naive DFT;
//! - in-place transposes of tall, narrow matrices at every scratch cap from the smallest
//!   accepted (one row plus one run) upwards, against a naive index transpose;
//! - every `WgpuOptions` field out of range, refused with its name, value and range.
//!
//! Shapes are small, so that Mesa's software device (llvmpipe, CI's adapter) finishes in seconds;
//! they still make one invocation's work (blowups up to 2^24) and the number of dispatches in one
//! operation (a transpose of 2^16 one-element runs) as large as any production shape does.
//!
//! Without an adapter every test prints `SKIPPED` (or fails with `REQUIRE_WGPU=1`).

use std::sync::OnceLock;

use backend_api::plan::TransposeGeometry;
use backend_api::{Backend, Error, LdeParams, MAX_LOG_DOMAIN, MatrixShape};
use backend_wgpu::{MIN_SEGMENT_BYTES, MIN_TRANSFER_CHUNK_BYTES, WgpuBackend, WgpuOptions};
use conformance::parity::or_skip;
use conformance::reference::{self, P};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// 8 KiB segments (1024 elements): a blowup's target rows cross many segments.
const SMALL_SEGMENT: u64 = 8 << 10;

fn backend(small: bool) -> Option<&'static WgpuBackend> {
    static FULL: OnceLock<Option<WgpuBackend>> = OnceLock::new();
    static SMALL: OnceLock<Option<WgpuBackend>> = OnceLock::new();
    let cell = if small { &SMALL } else { &FULL };
    cell.get_or_init(|| {
        let options = WgpuOptions {
            allow_software: true,
            max_segment_bytes: small.then_some(SMALL_SEGMENT),
            ..Default::default()
        };
        or_skip(WgpuBackend::new(options), "backend-wgpu limits", "REQUIRE_WGPU")
    })
    .as_ref()
}

/// One test at a time: the large buffers of one would crowd another's out of a software
/// device's memory.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn rng(name: &str) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(name.bytes().fold(0x2545_f491_4f6c_dd1du64, |h, b| (h ^ u64::from(b)).wrapping_mul(31)))
}

/// Values with non-canonical ones (>= p) and the edges mixed in.
fn matrix(r: &mut ChaCha8Rng, len: usize) -> Vec<u64> {
    (0..len)
        .map(|_| match r.random_range(0..4) {
            0 => P + r.random_range(0..0xFFFF_FFFFu64),
            1 => [0, 1, P - 1, P, u64::MAX][r.random_range(0..5)],
            _ => r.random(),
        })
        .collect()
}

/// The LDE of `trace` (`n x m`) at blowup `2^log_b` on `b`, or its error.
fn lde(b: &WgpuBackend, trace: &[u64], n: usize, m: usize, log_b: u32) -> Result<Vec<u64>, Error> {
    let params = LdeParams::new(MatrixShape::new(n, m)?, 1 << log_b, 7)?;
    let dev = b.upload(trace)?;
    let out = b.coset_lde(&dev, &params)?;
    b.download_vec(&out)
}

/// Blowups from 1 to 2^16 on traces of 1 to 8 rows, and the shape whose LDE came back wrong at
/// 16,384 (4 x 3) and a one-row trace at 2^20 (zeros from row 65,535 on, when one invocation
/// stored every target row and llvmpipe cut its loop at 65,535 iterations), on both segment
/// sizes: against the naive DFT, every element.
#[test]
fn extreme_blowups_match_the_naive_dft() {
    let _serial = serial();
    let mut r = rng("extreme-blowups");
    for small in [false, true] {
        let Some(b) = backend(small) else { return };
        let mut cases: Vec<(usize, usize, u32)> = Vec::new();
        for (n, m) in [(1, 1), (1, 3), (2, 1), (4, 3), (8, 2)] {
            cases.extend([6, 7, 8, 11, 13, 14, 16].map(|log_b| (n, m, log_b)));
        }
        cases.extend([(1, 1, 20), (2, 2, 17)]);
        for (n, m, log_b) in cases {
            let trace = matrix(&mut r, n * m);
            let what = format!("{n} x {m} at blowup 2^{log_b}, {} segments", if small { "8 KiB" } else { "adapter" });
            let got = lde(b, &trace, n, m, log_b).unwrap_or_else(|e| panic!("{what}: {e}"));
            let want = reference::coset_lde(&trace, n, m, 1 << log_b, 7);
            if let Some(i) = (0..want.len()).find(|&i| got[i] != want[i]) {
                let wrong = (0..want.len()).filter(|&i| got[i] != want[i]).count();
                panic!(
                    "{what}: {wrong} of {} elements wrong, the first at {i}: {:#x}, expected {:#x}",
                    want.len(),
                    got[i],
                    want[i]
                );
            }
        }
    }
}

/// Every blowup of a one-row and a two-row trace from 1 up to the largest the backend accepts,
/// and beyond it up to the largest `LdeParams` accepts (a domain of 2^32 rows): each accepted
/// blowup gives the naive DFT's bytes (for a one-row trace past 2^18, the same answer computed
/// directly: its canonical value in every row), and the first refused one, and every one after
/// it, is refused with a typed error that names the limit.
#[test]
fn every_blowup_is_right_or_refused_by_name() {
    let _serial = serial();
    let Some(b) = backend(false) else { return };
    let mut r = rng("every-blowup");
    for n in [1usize, 2] {
        let trace = matrix(&mut r, n);
        let mut refused = None;
        for log_b in 0..=MAX_LOG_DOMAIN - n.ilog2() {
            let what = format!("{n} x 1 at blowup 2^{log_b}");
            match (lde(b, &trace, n, 1, log_b), refused) {
                (Ok(got), None) => {
                    if n == 1 && log_b > 18 {
                        // The naive DFT's answer, without its cost: the constant polynomial.
                        let v = trace[0] % P;
                        if let Some(i) = got.iter().position(|&x| x != v) {
                            panic!("{what}: element {i} is {:#x}, every element must be {v:#x}", got[i]);
                        }
                    } else {
                        assert!(got == reference::coset_lde(&trace, n, 1, 1 << log_b, 7), "{what}: wrong LDE");
                    }
                }
                (Ok(_), Some(first)) => panic!("{what} accepted after 2^{first} was refused"),
                (Err(e), _) => {
                    let named = match &e {
                        Error::InvalidArgument(msg) => {
                            msg.contains("max_storage_buffer_binding_size") || msg.contains("2^32 u64 elements")
                        }
                        Error::OutOfMemory { .. } => true,
                        _ => false,
                    };
                    assert!(named, "{what}: refused without naming the limit: {e:?}");
                    refused.get_or_insert(log_b);
                }
            }
        }
        // The refusal, where there is one, comes from a device limit well past the blowups that
        // used to come back wrong (2^14 and up).
        if let Some(first) = refused {
            assert!(first > 16, "{n} x 1: refused from blowup 2^{first} on");
        }
        eprintln!("{n} x 1: blowups accepted up to 2^{}", refused.map_or(MAX_LOG_DOMAIN, |f| f - 1));
    }
    assert_eq!(b.memory().live, 0, "the refused LDEs left memory allocated");
}

/// The matrix `host` (`rows x cols`, row-major) transposed, the naive way.
fn naive_transpose(host: &[u64], rows: usize, cols: usize) -> Vec<u64> {
    (0..rows * cols).map(|i| host[(i % rows) * cols + i / rows]).collect()
}

/// Tall, narrow matrices at every scratch cap, one byte step at a time, from 8 B (refused: the
/// smallest cap holds one row plus one run, `(cols + 1) x 8` B) up to a few times that, then at
/// every run length (every power of two rows) up to the whole matrix. A cap's plan depends only
/// on its run length, so each distinct plan runs on the device once and every cap in between is
/// checked, on the host, to make that same plan. Under tiny caps a transpose is tens of
/// thousands of one-element copy batches, each a dispatch with its own table in the recorder's
/// arena: 32768 x 2 under 24 B came back with 1,422 wrong elements when a table and its
/// parameters were split across two submissions.
#[test]
fn tall_narrow_transposes_at_every_cap_match_naive() {
    let _serial = serial();
    let mut r = rng("tall-narrow");
    for small in [false, true] {
        let Some(b) = backend(small) else { return };
        let shapes: &[(usize, usize)] = if small { &[(2048, 5)] } else { &[(32768, 2), (16384, 4), (8192, 3)] };
        for &(rows, cols) in shapes {
            let shape = MatrixShape::new(rows, cols).unwrap();
            let host = matrix(&mut r, rows * cols);
            let want = naive_transpose(&host, rows, cols);
            let row_bytes = (cols + 1) * 8;
            let mut caps: Vec<usize> = (1..=4 * row_bytes / 8).map(|k| 8 * k).collect();
            caps.extend((2..=rows.ilog2()).map(|k| row_bytes << k));
            let mut ran: Vec<(usize, usize)> = Vec::new();
            for cap in caps {
                let what =
                    format!("{rows} x {cols} under {cap} B, {} segments", if small { "8 KiB" } else { "adapter" });
                let Ok(geometry) = TransposeGeometry::new(shape, cap) else {
                    assert!(cap < row_bytes, "{what}: refused by the plan");
                    let mut dev = b.upload(&host).unwrap();
                    let err = b.transpose_in_place(&mut dev, shape, cap).expect_err(&what);
                    assert!(
                        matches!(err, Error::ScratchTooSmall { cap: c, min, .. } if c == cap && min == row_bytes),
                        "{what}: {err:?}"
                    );
                    assert_eq!(b.download_vec(&dev).unwrap(), host, "{what}: a refused transpose changed the matrix");
                    continue;
                };
                if let Some(&(_, elems)) = ran.iter().find(|&&(run, _)| run == geometry.run_rows) {
                    // The same plan as a cap already run (the plan is a function of the run length).
                    assert_eq!(elems, geometry.scratch_elems, "{what}");
                    continue;
                }
                let mut dev = b.upload(&host).unwrap();
                b.transpose_in_place(&mut dev, shape, cap).unwrap_or_else(|e| panic!("{what}: {e}"));
                let got = b.download_vec(&dev).unwrap();
                if got != want {
                    let wrong = got.iter().zip(&want).filter(|(g, w)| g != w).count();
                    let first = got.iter().zip(&want).position(|(g, w)| g != w).unwrap_or(0);
                    panic!("{what}: {wrong} of {} elements wrong, the first at {first}", want.len());
                }
                ran.push((geometry.run_rows, geometry.scratch_elems));
            }
            assert_eq!(ran.len(), rows.ilog2() as usize + 1, "{rows} x {cols}: every run length from 1 to {rows}");
        }
    }
}

/// Every `WgpuOptions` field that has a range refuses a value outside it before the backend
/// exists, naming the field, the value and the range; the smallest accepted values work (a
/// transfer through 64 B staging chunks, a transpose and an LDE on 64 B segments).
#[test]
fn options_out_of_range_are_refused_by_name() {
    let _serial = serial();
    let base = WgpuOptions { allow_software: true, ..Default::default() };
    let bad_chunks =
        (0..MIN_TRANSFER_CHUNK_BYTES).chain([MIN_TRANSFER_CHUNK_BYTES + 4, 8001, 65_537, usize::MAX - 7, usize::MAX]);
    for bytes in bad_chunks {
        let got = WgpuBackend::new(WgpuOptions { transfer_chunk_bytes: Some(bytes), ..base.clone() });
        match got {
            Err(Error::InvalidArgument(msg)) => assert!(
                msg.contains("transfer_chunk_bytes")
                    && msg.contains(&format!("Some({bytes})"))
                    && msg.contains("multiple of 8"),
                "transfer_chunk_bytes {bytes}: {msg}"
            ),
            Err(Error::BackendUnavailable { .. }) if !conformance::reference::skip::required("REQUIRE_WGPU") => {
                // Only above the adapter's max_buffer_size does the check need the adapter.
                assert!(bytes > MIN_TRANSFER_CHUNK_BYTES && bytes.is_multiple_of(8), "{bytes} not refused first");
            }
            other => panic!("transfer_chunk_bytes {bytes}: {other:?}"),
        }
    }
    for bytes in [0, 1, 8, MIN_SEGMENT_BYTES - 1] {
        match WgpuBackend::new(WgpuOptions { max_segment_bytes: Some(bytes), ..base.clone() }) {
            Err(Error::InvalidArgument(msg)) => assert!(
                msg.contains("max_segment_bytes")
                    && msg.contains(&format!("Some({bytes})"))
                    && msg.contains(&MIN_SEGMENT_BYTES.to_string()),
                "max_segment_bytes {bytes}: {msg}"
            ),
            other => panic!("max_segment_bytes {bytes}: {other:?}"),
        }
    }

    // The smallest accepted values.
    let tiny = WgpuOptions {
        transfer_chunk_bytes: Some(MIN_TRANSFER_CHUNK_BYTES),
        max_segment_bytes: Some(MIN_SEGMENT_BYTES),
        ..base
    };
    let Some(b) = or_skip(WgpuBackend::new(tiny), "options_out_of_range_are_refused_by_name", "REQUIRE_WGPU") else {
        return;
    };
    assert_eq!(b.segment_elems(), MIN_SEGMENT_BYTES as usize / 8);
    let mut r = rng("tiny-options");
    let host = matrix(&mut r, 1000);
    let mut dev = b.upload(&host).unwrap();
    assert_eq!(b.download_vec(&dev).unwrap(), host, "a round trip through 64 B chunks");
    let shape = MatrixShape::new(200, 5).unwrap();
    b.transpose_in_place(&mut dev, shape, 6 * 8 * 4).unwrap();
    assert_eq!(b.download_vec(&dev).unwrap(), naive_transpose(&host, 200, 5), "a transpose on 64 B segments");
    let trace = matrix(&mut r, 16 * 3);
    assert_eq!(
        lde(&b, &trace, 16, 3, 2).unwrap(),
        reference::coset_lde(&trace, 16, 3, 4, 7),
        "an LDE on 64 B segments"
    );
    // A row wider than a segment is refused by name, not computed wrong.
    let wide = matrix(&mut r, 2 * 9);
    match lde(&b, &wide, 2, 9, 1) {
        Err(Error::InvalidArgument(msg)) => assert!(msg.contains("exceeds one segment"), "{msg}"),
        other => panic!("a 9-column LDE on 8-element segments: {other:?}"),
    }
    // The opening products on 8-element segments: right for rows that fit one, refused by name
    // for a row that does not (never computed wrong).
    let host = matrix(&mut r, 40 * 5);
    let dev = b.upload(&host).unwrap();
    let shape = MatrixShape::new(40, 5).unwrap();
    let coeffs = matrix(&mut r, 2 * 5);
    let mut out = vec![0; 80];
    b.row_dot_products(&dev, shape, &coeffs, &mut out).unwrap();
    assert_eq!(out, reference::row_dot_products(&host, 5, &coeffs), "row products on 64 B segments");
    let weights = matrix(&mut r, 2 * 13);
    let mut out = vec![0; 10];
    b.column_dot_products(&dev, shape, backend_api::RowStride::new(1, 3, 13), &weights, &mut out).unwrap();
    assert_eq!(out, reference::column_dot_products(&host, 5, 1, 3, 13, &weights), "column products on 64 B segments");
    let wide = b.upload(&matrix(&mut r, 2 * 9)).unwrap();
    let wide_shape = MatrixShape::new(2, 9).unwrap();
    let refusals = [
        b.row_dot_products(&wide, wide_shape, &[1; 9], &mut [0; 2]),
        b.column_dot_products(&wide, wide_shape, backend_api::RowStride::all(2), &[1; 2], &mut [0; 9]),
    ];
    for refused in refusals {
        match refused {
            Err(Error::InvalidArgument(msg)) => assert!(msg.contains("exceeds one segment"), "{msg}"),
            other => panic!("opening products of 9-element rows on 8-element segments: {other:?}"),
        }
    }
}

/// Leaves as long as a software adapter hashes correctly with each hash match the `sha3` and
/// `blake3` crates' digests and the naive Poseidon2 sponge; one element longer, on a software
/// adapter (llvmpipe), is refused with a typed error naming the limit, never hashed wrong. (A
/// hardware adapter hashes them: checked against the references too.)
#[test]
fn wide_leaves_are_right_or_refused_on_a_software_adapter() {
    use backend_api::{DIGEST_WORDS, HashKind, LeafLayout, LeafSpec};
    use backend_wgpu::software_max_leaf_bytes;
    let _serial = serial();
    let Some(b) = backend(false) else { return };
    let mut r = rng("wide-leaves");
    for hash in HashKind::ALL {
        let longest = software_max_leaf_bytes(hash) / 8;
        for cols in [longest, longest + 1, 34_000] {
            let shape = MatrixShape::new(1, cols).unwrap();
            let data = matrix(&mut r, cols);
            let spec = LeafSpec::new(hash, LeafLayout::Rows, 0..cols).unwrap();
            let dev = b.upload(&data).unwrap();
            let got = b.hash_leaves(&dev, shape, &spec).and_then(|d| b.download_vec(&d));
            match got {
                Ok(words) => {
                    assert_eq!(words.len(), DIGEST_WORDS);
                    let want = reference::leaf_digests(&data, cols, hash, LeafLayout::Rows, 0..cols);
                    assert_eq!(reference::words_to_digests(&words), want, "{hash:?} leaf of {cols} elements");
                }
                Err(e) => {
                    assert!(b.is_software() && cols > longest, "{hash:?}, {cols} columns refused: {e}");
                    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
                    assert!(e.to_string().contains("65,535 iterations"), "{e}");
                    assert!(e.to_string().contains(&format!("{} B", cols * 8)), "{e}");
                    assert!(e.to_string().contains(&format!("a {hash} leaf")), "{e}");
                }
            }
            if b.is_software() && cols > longest {
                b.hash_leaves(&dev, shape, &spec).expect_err("a software adapter hashed a leaf past its limit");
            }
        }
    }
}
