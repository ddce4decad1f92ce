//! Device tests of what is particular to this backend: kernel preparation, the field arithmetic on
//! the device, transfers (staging ring, page-locked buffers and pools), the memory pool, the
//! kernel cache setting, and the error paths of queued work. Each needs a GPU: skipped visibly
//! without one ([`super::device_or_skip`]).

use backend_api::Error;

use super::{PINNED_COUNT, device_or_skip, table};
use crate::context::Lane;
use crate::driver;
use crate::module::Source;

/// `prepare_kernels(hash)` loads every leaf kernel a commit with that hash launches, the fused
/// block-pass kernel of `hash_leaves_then_transpose` included: afterwards the leaves and the
/// transpose of a table whose plan has several blocks load no further `hash.cu` unit (a unit
/// loaded at first use would be compiled or read from disk inside a one-shot commit's timed
/// phases).
#[test]
fn prepare_kernels_loads_the_fused_leaf_kernels_a_commit_launches() {
    use backend_api::{Backend, HashKind, LeafJob, LeafLayout, LeafSpec, MatrixShape, TreeShape};
    let Some(backend) = device_or_skip("prepare_kernels_loads_the_fused_leaf_kernels_a_commit_launches") else {
        return;
    };
    let hash_units = || -> std::collections::BTreeSet<String> {
        backend.device.modules.loaded_labels().into_iter().filter(|l| l.starts_with("hash.cu:")).collect()
    };
    let (rows, cols) = (256, 20);
    let shape = MatrixShape::new(rows, cols).unwrap();
    let tree = TreeShape::new(rows).unwrap();
    let host: Vec<u64> = (0..(rows * cols) as u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).collect();
    for hash in HashKind::ALL {
        backend.prepare_kernels(hash).unwrap();
        let prepared = hash_units();
        // Poseidon2's leaves never ride the block pass: it has no fused kernel.
        if let Some((kernel, _)) = crate::hash::block_pass_kernel(hash) {
            assert!(prepared.contains(&format!("hash.cu:{kernel}")), "{hash}: {prepared:?}");
        }
        let mut buf = backend.upload(&host).unwrap();
        let mut nodes = backend.alloc(tree.words()).unwrap();
        let spec = LeafSpec::new(hash, LeafLayout::Rows, 0..cols).unwrap();
        let mut jobs = [LeafJob { spec: &spec, out: &mut nodes, out_digest: tree.first_leaf() }];
        // Blocks of 32 rows: eight blocks, so the fused block pass runs (Keccak-256, BLAKE3).
        backend.hash_leaves_then_transpose(&mut buf, shape, &mut jobs, (cols + 1) * 8 * 32).unwrap();
        backend.synchronize().unwrap();
        assert_eq!(hash_units(), prepared, "{hash}: a leaf kernel was loaded after prepare_kernels");
    }
    // Every function of every prepared unit is on the device: none is loaded at its first launch.
    backend.device.bind().unwrap();
    backend.prepare_kernels(HashKind::Keccak256).unwrap();
    match backend.device.modules.units_not_wholly_loaded() {
        Some(partial) => assert!(partial.is_empty(), "units with functions left to lazy loading: {partial:?}"),
        None => println!("SKIPPED the loading check: this driver cannot enumerate a module's functions"),
    }
}

/// `queue_download` failing after its copy is queued (the completion event's recording, made to
/// fail through [`FaultSite::DownloadQueued`]) returns its error only once no copy into the host
/// memory it is about to free is pending: the stream is idle when the error arrives. A 256 MiB
/// copy takes milliseconds, so an error path that skipped the wait would find the stream busy.
/// The site fires once: the next download returns the bytes, and no device memory leaks.
#[test]
fn a_failed_queue_download_waits_for_its_copy() {
    use backend_api::{Backend, CopyRange, FaultSite, PendingDownload};
    let _count = PINNED_COUNT.lock().unwrap_or_else(|p| p.into_inner());
    let Some(backend) = device_or_skip("a_failed_queue_download_waits_for_its_copy") else { return };
    let len = 32 << 20;
    let host: Vec<u64> = (0..len as u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (i >> 7)).collect();
    let baseline = backend.memory().live;
    {
        let buf = backend.upload(&host).unwrap();
        let mut busy = backend.alloc(len).unwrap();
        // One long copy goes to the copy engine: milliseconds of work queued ahead.
        for _ in 0..4 {
            backend.batched_copy(&buf, &mut busy, &[CopyRange { src: 0, dst: 0, len }]).unwrap();
        }
        backend.tracker().fail_site(FaultSite::DownloadQueued);
        let err = backend.queue_download(&buf).expect_err("the injected fault must surface");
        // SAFETY: the backend's live streams, with its context current.
        let idle = unsafe { driver::stream_query(backend.device.stream()) }.unwrap()
            && unsafe { driver::stream_query(backend.device.lane(Lane::Download)) }.unwrap();
        assert!(err.to_string().contains("cuEventRecord"), "{err}");
        assert!(idle, "queue_download returned its error while its copy could still be writing into the host memory");
        let got = backend.queue_download(&buf).unwrap().wait().unwrap();
        assert!(got[..] == host[..], "the download after the fault returned other bytes");
        // A download dropped without `wait` releases its memory only after the copy too.
        drop(backend.queue_download(&buf).unwrap());
        // SAFETY: as above.
        let idle = unsafe { driver::stream_query(backend.device.lane(Lane::Download)) }.unwrap();
        assert!(idle, "a dropped download left its copy pending");
    }
    backend.synchronize().unwrap();
    assert_eq!(backend.memory().live, baseline, "device memory leaked");
}

/// The device's Goldilocks arithmetic (the PTX multiplication included) against backend-api's
/// host arithmetic, on every pair of edge values and 2^20 random pairs.
#[test]
fn device_field_arithmetic_matches_the_host() {
    use backend_api::Backend;
    let _count = PINNED_COUNT.lock().unwrap_or_else(|p| p.into_inner());
    use backend_api::field::{P, add, canonical, mul, pow, sub};
    let Some(backend) = device_or_skip("device_field_arithmetic_matches_the_host") else { return };
    let edge = [
        0,
        1,
        2,
        P - 2,
        P - 1,
        P,
        P + 1,
        u64::MAX,
        u64::MAX - 1,
        0xFFFF_FFFF,
        1 << 32,
        (1 << 32) + 1,
        1 << 63,
        (1 << 63) - 1,
        0xFFFF_FFFF_0000_0000,
        0x0000_0001_FFFF_FFFF,
        0xFFFF_FFFE_FFFF_FFFF,
    ];
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for &x in &edge {
        for &y in &edge {
            a.push(x);
            b.push(y);
        }
    }
    let mut s = 0x2545_f491_4f6c_dd1d_u64;
    for _ in 0..1 << 20 {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        a.push(s);
        let t = s.rotate_left(23) ^ 0x9e37_79b9_7f4a_7c15;
        // Operands near p and near 2^64 too, where the carries happen.
        b.push(match s % 4 {
            0 => P - (t % 1024),
            1 => u64::MAX - (t % 1024),
            _ => t,
        });
    }
    let n = a.len();
    let (da, db) = (backend.upload(&a).unwrap(), backend.upload(&b).unwrap());
    // Outputs per pair of gl_selftest (field_selftest.cu).
    const OUTPUTS: usize = 10;
    let out = backend.alloc(OUTPUTS * n).unwrap();
    let kernel = backend.device.kernel(Source::FieldSelfTest, "gl_selftest", 0).unwrap();
    let (pa, pb, po, pn) = (da.ptr(), db.ptr(), out.ptr(), n as u64);
    let args = crate::launch::LaunchArgs::new().arg(&pa).arg(&pb).arg(&po).arg(&pn);
    // SAFETY: (const u64*, const u64*, u64*, u64) as gl_selftest declares; `out` holds OUTPUTS n.
    unsafe { backend.device.launch(&kernel, crate::launch::LaunchConfig::linear(1024, 256, 0), args).unwrap() };
    let got = backend.download_vec(&out).unwrap();
    assert_eq!(got.len(), OUTPUTS * n);
    let (mut shifts, mut fused) = ([false; 96], [false; 96]);
    for i in 0..n {
        let (x, y) = (a[i], b[i]);
        assert_eq!(got[OUTPUTS * i], mul(x, y), "mul({x:#x}, {y:#x})");
        assert_eq!(got[OUTPUTS * i + 1], add(canonical(x), canonical(y)), "add({x:#x}, {y:#x})");
        assert_eq!(got[OUTPUTS * i + 2], sub(canonical(x), canonical(y)), "sub({x:#x}, {y:#x})");
        // The lazy operations take any u64 (non-canonical included) and agree after canonicalising.
        assert_eq!(got[OUTPUTS * i + 3], mul(x, y), "lazy mul({x:#x}, {y:#x})");
        assert_eq!(got[OUTPUTS * i + 4], add(x, y), "lazy add({x:#x}, {y:#x})");
        assert_eq!(got[OUTPUTS * i + 5], sub(x, y), "lazy sub({x:#x}, {y:#x})");
        // Multiplication by 2^s through shifts (the NTT's power-of-two twiddles), 0 < s < 96.
        let s = 1 + y % 95;
        shifts[s as usize] = true;
        assert_eq!(got[OUTPUTS * i + 6], mul(x, pow(2, s)), "{x:#x} * 2^{s}");
        // The fused DIT butterfly (x, y) -> (x + y 2^f, x - y 2^f) and the bounded reduction of
        // x 2^f (its negation for f >= 64) under it, 0 < f < 96, against the host's products, in u128.
        let f = 1 + i % 95;
        fused[f] = true;
        let (pp, yw) = (u128::from(P), u128::from(mul(y, pow(2, f as u64))));
        let (x128, xw) = (u128::from(x) % pp, u128::from(mul(x, pow(2, f as u64))));
        assert_eq!(u128::from(got[OUTPUTS * i + 7]), (x128 + yw) % pp, "{x:#x} + {y:#x} * 2^{f}");
        assert_eq!(u128::from(got[OUTPUTS * i + 8]), (x128 + pp - yw) % pp, "{x:#x} - {y:#x} * 2^{f}");
        let r = got[OUTPUTS * i + 9];
        assert!(r < P, "gl_pow2_red({x:#x}, {f}) = {r:#x} > p - 1");
        let want = if f >= 64 { (pp - xw) % pp } else { xw };
        assert_eq!(u128::from(r), want, "gl_pow2_red({x:#x}, {f})");
    }
    assert!(shifts[1..].iter().all(|&s| s), "every shift 1..95 was tried");
    assert!(fused[1..].iter().all(|&f| f), "every fused butterfly exponent 1..95 was tried");
}

/// Uploads and downloads through the staging ring keep every byte: lengths below the staging
/// threshold, at it, around one block and past the whole ring (so blocks are reused while
/// earlier copies may still run), a download at an offset, and a host slice overwritten as soon
/// as the upload returns.
#[test]
fn staged_transfers_keep_every_byte() {
    use crate::staging::{SLOT_BYTES, SLOTS, STAGE_MIN_BYTES};
    use backend_api::Backend;
    let _count = PINNED_COUNT.lock().unwrap_or_else(|p| p.into_inner());
    let Some(b) = device_or_skip("staged_transfers_keep_every_byte") else { return };
    let slot = SLOT_BYTES / 8;
    for len in
        [1, STAGE_MIN_BYTES / 8 - 1, STAGE_MIN_BYTES / 8, slot - 1, slot + 1, SLOTS * slot + 3, 2 * SLOTS * slot + 7]
    {
        let mut host = table(len, len as u64);
        let expected = host.clone();
        let d = b.upload(&host).unwrap();
        // The caller may reuse its slice as soon as the upload returns.
        host.iter_mut().for_each(|x| *x = !*x);
        let second = b.upload(&host).unwrap();
        assert!(b.download_vec(&d).unwrap() == expected, "{len} elements: the first upload changed");
        assert!(b.download_vec(&second).unwrap() == host, "{len} elements: the second upload changed");
        let off = len / 3;
        let mut part = vec![0u64; len - off];
        b.download(&d, off, &mut part).unwrap();
        assert!(part[..] == expected[off..], "{len} elements: download at offset {off}");
    }
    assert_eq!(crate::host::pinned_host_bytes(), SLOTS * SLOT_BYTES, "one ring, reused");
    drop(b);
    assert_eq!(crate::host::pinned_host_bytes(), 0, "the ring is freed with its device");
}

/// A page-locked buffer round-trips, waits for its copy before it can be written, goes back to
/// the device's pool on drop and is reused from it, and an allocation the host cannot lock is a
/// typed out-of-memory error that leaves nothing held. Bytes are counted process-wide and in the
/// device's tracker.
#[test]
fn pinned_buffers_round_trip_pool_and_refuse_absurd_sizes() {
    use crate::host::BLOCK_ALIGN;
    use backend_api::Backend;
    let _count = PINNED_COUNT.lock().unwrap_or_else(|p| p.into_inner());
    let Some(b) = device_or_skip("pinned_buffers_round_trip_pool_and_refuse_absurd_sizes") else { return };
    let before = crate::CudaBackend::pinned_host_bytes();
    let n: usize = (3 << 20) + 5;
    let block = (n * 8).next_multiple_of(BLOCK_ALIGN);
    let mut pinned = b.alloc_pinned(n).unwrap();
    assert!(pinned.is_page_locked());
    assert!(pinned.iter().all(|&x| x == 0), "allocated zeroed");
    assert_eq!(crate::CudaBackend::pinned_host_bytes(), before + block);
    assert_eq!(b.memory().pinned_host, block, "the device's tracker counts the block");
    let expected = table(n, 9);
    pinned.copy_from_slice(&expected);
    let d = b.upload_pinned(&mut pinned).unwrap();
    // Writing waits for the queued copy: the device keeps the old contents.
    pinned.fill(7);
    let mut back = b.alloc_pinned(n).unwrap();
    b.download_pinned(&d, &mut back).unwrap();
    assert!(back[..] == expected[..], "pinned round trip");
    // Length and ownership checks.
    let mut short = b.alloc_pinned(n - 1).unwrap();
    assert!(matches!(b.download_pinned(&d, &mut short), Err(Error::LengthMismatch { .. })));
    let other = device_or_skip("pinned_buffers_round_trip_pool_and_refuse_absurd_sizes").unwrap();
    // A device buffer of another instance is refused first, then a pinned buffer of another.
    assert!(matches!(other.download_pinned(&d, &mut back), Err(Error::ForeignBuffer { .. })));
    // (Three words: no staging ring, whose page-locked bytes the counts below would see.)
    let theirs = other.upload(&[1, 2, 3]).unwrap();
    assert!(matches!(other.download_pinned(&theirs, &mut back), Err(Error::InvalidArgument(_))));
    drop((theirs, other));
    drop((pinned, back, short));
    // Dropped buffers stay page-locked in the pool, and the next allocation that fits reuses one,
    // zeroed again.
    assert_eq!(b.host_pool_bytes(), 3 * block);
    let held = crate::CudaBackend::pinned_host_bytes();
    let again = b.alloc_pinned(n - 100).unwrap();
    assert!(again.iter().all(|&x| x == 0), "a reused block is zeroed");
    assert_eq!(crate::CudaBackend::pinned_host_bytes(), held, "a pooled block was reused");
    assert_eq!(b.host_pool_bytes(), 2 * block);
    drop(again);
    // A request the pooled blocks do not fit frees them first.
    let big = b.alloc_pinned(3 * n).unwrap();
    assert_eq!(b.host_pool_bytes(), 0);
    assert_eq!(crate::CudaBackend::pinned_host_bytes(), before + (3 * n * 8).next_multiple_of(BLOCK_ALIGN));
    drop(big);
    b.trim_host_pool().unwrap();
    assert_eq!(crate::CudaBackend::pinned_host_bytes(), before);
    assert_eq!(b.memory().pinned_host, 0);
    // Sizes no host can lock: typed errors, nothing held afterwards.
    for len in [usize::MAX / 4, 1 << 42] {
        match b.alloc_pinned(len) {
            Err(e) => assert!(e.is_out_of_memory() || matches!(e, Error::SizeOverflow { .. }), "{len} elements: {e}"),
            Ok(_) => panic!("{len} elements were page-locked"),
        }
        assert!(matches!(b.alloc_host(len), Err(Error::HostOutOfMemory { .. } | Error::SizeOverflow { .. })));
        assert_eq!(crate::CudaBackend::pinned_host_bytes(), before, "{len} elements");
    }
    let empty = b.alloc_pinned(0).unwrap();
    assert!(empty.is_empty());
}

/// [`crate::CudaOptions::kernel_cache`] decides where a device's kernels are stored: a backend
/// opened with a directory writes the image of the one kernel file it launched there, unless the
/// binary embeds it (and gives correct bytes); `with_options` keeps that setting and refuses another; a backend opened with
/// the cache off writes nothing there.
#[test]
fn the_kernel_cache_setting_belongs_to_the_device() {
    use backend_api::{Backend as _, CopyRange};

    use crate::{CudaBackend, CudaOptions, KernelCacheSetting};

    let Some(probe) = device_or_skip("the_kernel_cache_setting_belongs_to_the_device") else { return };
    drop(probe);
    let dir = std::env::temp_dir().join(format!("stark-kc-device-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let entries = || std::fs::read_dir(&dir).map_or(0, |d| d.filter_map(|e| e.ok()).count());
    let src = table(1600, 11);
    // Sixteen short copies, reversed: one gather launch, the one kernel of copy.cu (the copy engine
    // takes only a few long copies).
    let copied = |b: &CudaBackend| {
        let s = b.upload(&src).unwrap();
        let mut d = b.alloc(src.len()).unwrap();
        let copies: Vec<CopyRange> =
            (0..16).map(|i| CopyRange { src: i * 100, dst: (15 - i) * 100, len: 100 }).collect();
        b.batched_copy(&s, &mut d, &copies).unwrap();
        let out = b.download_vec(&d).unwrap();
        for i in 0..16 {
            assert_eq!(out[(15 - i) * 100..][..100], src[i * 100..][..100], "copy {i}");
        }
    };

    let options = CudaOptions { kernel_cache: KernelCacheSetting::Dir(dir.clone()), ..CudaOptions::default() };
    let b = CudaBackend::open(0, options.clone()).unwrap();
    assert_eq!(b.kernel_cache_dir(), Some(dir.as_path()));
    copied(&b);
    // A device whose architecture this build embeds images for loads copy.cu's from the binary
    // and stores nothing; otherwise the one image compiled is stored.
    let embedded = crate::embedded::covers(crate::module::arch_of(b.compute_capability()));
    assert_eq!(entries(), usize::from(!embedded), "copy.cu's image in {} (embedded: {embedded})", dir.display());
    // Other upload settings on the same device keep the cache; another cache is refused.
    let other = b.with_options(CudaOptions { upload_groups: 2, ..options.clone() }).unwrap();
    assert_eq!(other.kernel_cache_dir(), Some(dir.as_path()));
    match b.with_options(CudaOptions { kernel_cache: KernelCacheSetting::Off, ..options.clone() }) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("kernel cache"), "{m}"),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    drop((b, other));

    let off = CudaBackend::open(0, CudaOptions { kernel_cache: KernelCacheSetting::Off, ..options }).unwrap();
    assert_eq!(off.kernel_cache_dir(), None);
    // The cache directory exists only where an image was stored (a device this build embeds no
    // images for); either way it is gone before the backend with the cache off runs.
    match std::fs::remove_dir_all(&dir) {
        Ok(()) => assert!(!embedded, "{} made on a device whose images are embedded", dir.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => assert!(embedded, "{} not made", dir.display()),
        Err(e) => panic!("remove {}: {e}", dir.display()),
    }
    copied(&off);
    assert!(!dir.exists(), "a backend with the cache off created {}", dir.display());
}

/// `prepare_memory` leaves no buffer behind (the tracker saw nothing), grows the pool by at
/// least the bytes asked for (its reserved high-water mark since the last reset), and refuses a
/// size no device has with a typed out-of-memory error, after which it still works.
#[test]
fn prepare_memory_grows_the_pool_and_refuses_absurd_sizes() {
    use backend_api::Backend as _;

    let Some(b) = device_or_skip("prepare_memory_grows_the_pool_and_refuses_absurd_sizes") else { return };
    b.prepare_memory(0).unwrap();
    b.prepare_memory(64 << 20).unwrap();
    let c = b.tracker().counters();
    assert_eq!((c.live, c.peak, c.allocations), (0, 0, 0), "prepare_memory is not a tracked allocation");
    let high = b.pool_reserved_high().unwrap();
    assert!(high >= 64 << 20, "the pool holds {high} B after preparing 64 MiB");
    match b.prepare_memory(1 << 50) {
        Err(e) => assert!(e.is_out_of_memory(), "1 PiB: {e}"),
        Ok(()) => panic!("1 PiB of device memory was allocated"),
    }
    b.prepare_memory(1 << 20).unwrap();
    assert_eq!(b.tracker().counters().live, 0);
}

/// Transfers whose host side lies in page-locked memory are direct copies, from any sub-slice:
/// upload, write at an offset and download at an offset keep every byte, the staging ring is never
/// made, and a host buffer written right after an upload returns does not change the device copy.
#[test]
fn transfers_from_page_locked_slices_are_direct() {
    use backend_api::{Backend, DeviceBuffer as _};
    let _count = PINNED_COUNT.lock().unwrap_or_else(|p| p.into_inner());
    let Some(b) = device_or_skip("transfers_from_page_locked_slices_are_direct") else { return };
    let n = (5 << 20) + 3;
    let expected = table(n, 11);
    let mut host = b.alloc_host(n).unwrap();
    assert!(backend_api::HostBuffer::is_page_locked(&host));
    host.copy_from_slice(&expected);
    let d = b.upload(&host).unwrap();
    host.iter_mut().for_each(|x| *x = !*x);
    let mut back = b.alloc_host(n).unwrap();
    b.download(&d, 0, &mut back).unwrap();
    assert!(back[..] == expected[..], "upload from a page-locked buffer");
    // A sub-slice at an odd offset, written into the middle of a larger buffer.
    let mut big = b.alloc(n + 1000).unwrap();
    b.write(&mut big, 17, &host[5..n - 9]).unwrap();
    let mut out = b.alloc_host(n - 14).unwrap();
    b.download(&big, 17, &mut out).unwrap();
    assert!(out[..] == host[5..n - 9], "write and download at offsets");
    // Downloads into part of a page-locked buffer leave the rest alone.
    let mut part = b.alloc_host(n).unwrap();
    b.download(&d, 100, &mut part[1..n - 99]).unwrap();
    assert_eq!(part[0], 0);
    assert!(part[1..n - 99] == expected[100..], "download into a sub-slice");
    assert_eq!(big.len(), n + 1000);
    assert!(!b.device.staging.is_made(), "a page-locked transfer made the staging ring");
}

/// `queue_download` lands in a page-locked block of the device's pool: the bytes are right, the
/// block returns to the pool when the result is dropped and the next download reuses it, so a
/// warm loop page-locks nothing new.
#[test]
fn queued_downloads_reuse_pooled_page_locked_blocks() {
    use backend_api::{Backend, PendingDownload as _};
    let _count = PINNED_COUNT.lock().unwrap_or_else(|p| p.into_inner());
    let Some(b) = device_or_skip("queued_downloads_reuse_pooled_page_locked_blocks") else { return };
    let n = (7 << 20) + 1;
    let expected = table(n, 13);
    let d = b.upload(&expected).unwrap();
    let first = b.queue_download(&d).unwrap().wait().unwrap();
    assert!(first.is_page_locked());
    assert!(first[..] == expected[..]);
    drop(first);
    let held = crate::CudaBackend::pinned_host_bytes();
    for round in 0..3 {
        let got = b.queue_download(&d).unwrap().wait().unwrap();
        assert!(got[..] == expected[..], "round {round}");
        assert_eq!(crate::CudaBackend::pinned_host_bytes(), held, "round {round} page-locked new memory");
    }
    drop(b);
}

/// A page-locking refused by the driver (injected at [`FaultSite::PinnedHostAlloc`]) is a typed
/// error for `alloc_pinned`, a pageable fallback for `alloc_host` and `queue_download` (with the
/// same bytes), and leaves no page-locked or device memory behind.
#[test]
fn a_refused_page_lock_is_an_error_or_a_pageable_fallback_and_leaks_nothing() {
    use backend_api::{Backend, FaultSite, PendingDownload as _};
    let _count = PINNED_COUNT.lock().unwrap_or_else(|p| p.into_inner());
    let Some(b) = device_or_skip("a_refused_page_lock_is_an_error_or_a_pageable_fallback_and_leaks_nothing") else {
        return;
    };
    let before = crate::CudaBackend::pinned_host_bytes();
    let n = (2 << 20) + 7;
    b.tracker().fail_site(FaultSite::PinnedHostAlloc);
    let err = b.alloc_pinned(n).expect_err("the injected refusal must surface");
    assert!(matches!(err, Error::HostOutOfMemory { .. }), "{err}");
    assert_eq!(crate::CudaBackend::pinned_host_bytes(), before);
    b.tracker().fail_site(FaultSite::PinnedHostAlloc);
    let mut host = b.alloc_host(n).expect("a pageable fallback");
    assert!(!host.is_page_locked());
    let expected = table(n, 17);
    host.copy_from_slice(&expected);
    let d = b.upload(&host).unwrap();
    assert!(b.download_vec(&d).unwrap() == expected);
    b.tracker().fail_site(FaultSite::PinnedHostAlloc);
    let got = b.queue_download(&d).unwrap().wait().unwrap();
    assert!(!got.is_page_locked());
    assert!(got[..] == expected[..], "pageable fallback download");
    drop((host, got, d));
    b.synchronize().unwrap();
    assert_eq!(b.memory().live, 0, "device memory leaked");
    b.trim_host_pool().unwrap();
    // The staging ring stays (made by the pageable transfers); nothing else is page-locked.
    assert_eq!(crate::CudaBackend::pinned_host_bytes(), before + b.memory().pinned_host);
    assert_eq!(b.host_pool_bytes(), 0);
}
