//! Host transfers of the wgpu backend across staging-chunk and segment boundaries: writes and
//! reads at odd offsets and lengths, checked against the source slices themselves (the expected
//! buffer is built on the host by plain slice copies), with chunks small enough
//! (`WgpuOptions::transfer_chunk_bytes`) that every transfer of more than a few hundred elements
//! runs through the staging rings, several times round each ring.
//!
//! Without an adapter every test prints `SKIPPED` (or fails with `REQUIRE_WGPU=1`).

use std::sync::OnceLock;

use backend_api::{Backend, DeviceBuffer as _, Error, PendingDownload as _};
use backend_wgpu::{WgpuBackend, WgpuOptions};
use conformance::parity::or_skip;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// 8000 B chunks: 1000 elements, neither a power of two nor a divisor of a segment, so chunk
/// and segment boundaries fall at different places. Transfers of at most 500 B (62 elements)
/// go directly; from 63 elements on through the rings.
const CHUNK: usize = 8000;
const CHUNK_ELEMS: usize = CHUNK / 8;
/// The largest direct transfer, in elements.
const DIRECT_ELEMS: usize = CHUNK / 16 / 8;
/// Three slots per ring, as `staging::SLOTS`: the rings' bytes once made.
const RING_BYTES: usize = 3 * CHUNK;
/// The small download buffer: the largest direct transfer (500 B) rounded up to a multiple of 8.
const SMALL_BYTES: usize = 504;

fn options(small_segments: bool) -> WgpuOptions {
    WgpuOptions {
        allow_software: true,
        // 8 KiB segments (1024 elements): a 5000-element buffer is five segments.
        max_segment_bytes: small_segments.then_some(8 << 10),
        transfer_chunk_bytes: Some(CHUNK),
        ..Default::default()
    }
}

fn backend(small_segments: bool) -> Option<&'static WgpuBackend> {
    static SMALL: OnceLock<Result<WgpuBackend, String>> = OnceLock::new();
    static FULL: OnceLock<Result<WgpuBackend, String>> = OnceLock::new();
    let cell = if small_segments { &SMALL } else { &FULL };
    let made = cell.get_or_init(|| WgpuBackend::new(options(small_segments)).map_err(|e| e.to_string()));
    match made {
        Ok(b) => Some(b),
        Err(e) => {
            conformance::reference::skip::skip("backend-wgpu transfer test", e, "REQUIRE_WGPU");
            None
        }
    }
}

fn both(test: impl Fn(&WgpuBackend)) {
    for small in [true, false] {
        if let Some(b) = backend(small) {
            test(b);
        }
    }
}

/// Random words over the whole u64 range: most are >= p (non-canonical), and stay as written.
fn words(rng: &mut ChaCha8Rng, n: usize) -> Vec<u64> {
    (0..n).map(|_| rng.random()).collect()
}

/// Buffer length: five 1024-element segments less three, five chunks less three.
const LEN: usize = 5 * 1024 - 3;

/// Offsets and lengths around the direct threshold, chunk, ring (three chunks) and segment
/// boundaries, and the whole buffer.
fn cases() -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for offset in [0, 1, 7, 1023, 1024, 1999, 3001] {
        for len in [
            1,
            DIRECT_ELEMS,
            DIRECT_ELEMS + 1,
            CHUNK_ELEMS - 1,
            CHUNK_ELEMS,
            CHUNK_ELEMS + 1,
            2047,
            3 * CHUNK_ELEMS + 1,
            LEN - offset,
        ] {
            if offset + len <= LEN {
                out.push((offset, len));
            }
        }
    }
    out
}

/// Every write lands exactly where it was put and nowhere else: the buffer is uploaded with a
/// background, overwritten at each case's window, read back whole and compared with the
/// background with the source slice copied over the window.
#[test]
fn writes_across_chunk_and_segment_boundaries_keep_every_word() {
    both(|b| {
        let mut rng = ChaCha8Rng::seed_from_u64(0x5eed_0001);
        for (offset, len) in cases() {
            let mut expected = words(&mut rng, LEN);
            let mut buf = b.upload(&expected).unwrap();
            let src = words(&mut rng, len);
            b.write(&mut buf, offset, &src).unwrap();
            expected[offset..offset + len].copy_from_slice(&src);
            let mut back = vec![0u64; LEN];
            b.download(&buf, 0, &mut back).unwrap();
            assert!(back == expected, "write of {len} at {offset} (segment {})", b.segment_elems());
        }
    });
}

/// Reads at every case's window return exactly the uploaded words there (the output around
/// the window untouched), and a queued download of the whole buffer returns all of them.
#[test]
fn reads_across_chunk_and_segment_boundaries_return_the_source() {
    both(|b| {
        let mut rng = ChaCha8Rng::seed_from_u64(0x5eed_0002);
        let data = words(&mut rng, LEN);
        let buf = b.upload(&data).unwrap();
        for (offset, len) in cases() {
            let guard = u64::MAX - 1;
            let mut out = vec![guard; len + 2];
            b.download(&buf, offset, &mut out[1..=len]).unwrap();
            assert_eq!(out[0], guard, "read of {len} at {offset} wrote before its output");
            assert_eq!(out[len + 1], guard, "read of {len} at {offset} wrote past its output");
            assert!(out[1..=len] == data[offset..offset + len], "read of {len} at {offset}");
        }
        let queued = b.queue_download(&buf).unwrap().wait().unwrap();
        assert!(queued == data, "queued download of {LEN}");
    });
}

/// Several large writes queued back to back, each longer than the ring, with no wait between
/// them, and interleaved with reads: every word of each survives (a slot refilled before the
/// device had copied it out would show here as another write's words).
#[test]
fn back_to_back_writes_reuse_the_ring_safely() {
    both(|b| {
        let mut rng = ChaCha8Rng::seed_from_u64(0x5eed_0003);
        let n = 7 * CHUNK_ELEMS + 5;
        let mut bufs = Vec::new();
        let mut sources = Vec::new();
        for _ in 0..4 {
            let src = words(&mut rng, n);
            let mut buf = b.alloc(n).unwrap();
            b.write(&mut buf, 0, &src).unwrap();
            bufs.push(buf);
            sources.push(src);
        }
        for (buf, src) in bufs.iter().zip(&sources) {
            let mut back = vec![0u64; n];
            b.download(buf, 0, &mut back).unwrap();
            assert!(&back == src);
        }
    });
}

/// The rings are made once per direction, at the first transfer through them, and the small
/// download buffer at the first direct download; all are kept, reused and counted as page-locked
/// host memory, and a direct upload makes none.
#[test]
fn staging_rings_are_made_once_and_counted() {
    let Some(b) = or_skip(WgpuBackend::new(options(true)), "staging_rings_are_made_once_and_counted", "REQUIRE_WGPU")
    else {
        return;
    };
    let pinned = || b.memory().pinned_host;
    let mut buf = b.alloc(LEN).unwrap();
    b.write(&mut buf, 0, &[1; DIRECT_ELEMS]).unwrap();
    assert_eq!(pinned(), 0, "a direct upload made a staging buffer");
    // Direct downloads of every length up to the largest, at odd offsets, through one buffer.
    for n in [1, 2, DIRECT_ELEMS - 1, DIRECT_ELEMS] {
        let mut small = vec![0u64; n];
        b.download(&buf, 0, &mut small).unwrap();
        assert_eq!(small, vec![1; n]);
        assert_eq!(pinned(), SMALL_BYTES, "the small download buffer, made once ({n} elements)");
    }
    let data: Vec<u64> = (0..LEN as u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).collect();
    b.write(&mut buf, 0, &data).unwrap();
    let mut small = [0u64; DIRECT_ELEMS];
    b.download(&buf, 7, &mut small).unwrap();
    assert!(small[..] == data[7..7 + DIRECT_ELEMS], "a reused small buffer returned stale words");
    assert_eq!(pinned(), SMALL_BYTES + RING_BYTES, "upload ring");
    let mut back = vec![0u64; LEN];
    b.download(&buf, 0, &mut back).unwrap();
    assert!(back == data);
    assert_eq!(pinned(), SMALL_BYTES + 2 * RING_BYTES, "both rings");
    b.write(&mut buf, 0, &data).unwrap();
    b.download(&buf, 0, &mut back).unwrap();
    b.download(&buf, 3, &mut small).unwrap();
    assert!(small[..] == data[3..3 + DIRECT_ELEMS]);
    assert_eq!(pinned(), SMALL_BYTES + 2 * RING_BYTES, "rings are reused, not remade");
    assert_eq!(b.memory().pinned_host_peak, SMALL_BYTES + 2 * RING_BYTES);
    assert_eq!(b.memory().live, LEN * 8, "the rings are not device allocations");
    drop(buf);
}

/// Small downloads from several threads at once: each gets its own words, whoever holds the
/// small buffer (a thread that finds it taken makes its own), and afterwards the device keeps
/// exactly one small buffer.
#[test]
fn concurrent_small_downloads_read_their_own_words() {
    let Some(b) =
        or_skip(WgpuBackend::new(options(false)), "concurrent_small_downloads_read_their_own_words", "REQUIRE_WGPU")
    else {
        return;
    };
    let mut rng = ChaCha8Rng::seed_from_u64(0x5eed_0009);
    let data = words(&mut rng, LEN);
    let buf = b.upload(&data).unwrap();
    let before = b.memory().pinned_host;
    std::thread::scope(|s| {
        for t in 0..4usize {
            let (b, buf, data) = (&b, &buf, &data);
            s.spawn(move || {
                for i in 0..50 {
                    let len = 1 + (t * 13 + i * 7) % DIRECT_ELEMS;
                    let offset = (t * 997 + i * 131) % (LEN - len);
                    let mut out = vec![0u64; len];
                    b.download(buf, offset, &mut out).unwrap();
                    assert!(out[..] == data[offset..offset + len], "thread {t}, read {i}: {len} at {offset}");
                }
            });
        }
    });
    assert_eq!(b.memory().pinned_host - before, SMALL_BYTES, "one small buffer kept, the others freed");
}

/// A chunk size that is not a positive multiple of 8 is refused with its value named.
#[test]
fn bad_transfer_chunk_is_refused() {
    for bad in [0, 12, 8001] {
        let got = WgpuBackend::new(WgpuOptions { transfer_chunk_bytes: Some(bad), ..options(true) });
        match got {
            Err(Error::InvalidArgument(m)) => assert!(m.contains(&bad.to_string()), "{m}"),
            other => panic!("transfer_chunk_bytes {bad}: {other:?}"),
        }
    }
}

/// Out-of-range windows are refused before any transfer, through the rings or not.
#[test]
fn out_of_range_transfers_are_refused() {
    both(|b| {
        let mut buf = b.alloc(LEN).unwrap();
        for len in [DIRECT_ELEMS, 3 * CHUNK_ELEMS] {
            let src = vec![0u64; len];
            assert!(b.write(&mut buf, LEN - len + 1, &src).is_err(), "write of {len} past the end");
            let mut out = vec![0u64; len];
            assert!(b.download(&buf, LEN - len + 1, &mut out).is_err(), "read of {len} past the end");
        }
        assert_eq!(buf.len(), LEN);
    });
}
