//! Checks of buffers, transfers and allocation accounting: upload/download round trips,
//! out-of-bounds downloads, the tracker's counters, queued downloads that snapshot the buffer,
//! and fault injection at every allocation of every operation (nothing may leak on failure).

use backend_api::{
    Backend, CopyRange, DEFAULT_SCRATCH_CAP, DeviceBuffer as _, Error, FaultSite, HashKind, LdeParams, LeafLayout,
    LeafSpec, MatrixShape, PendingDownload as _, Preparation,
};

use crate::{Context as _, Failure, Gen, Outcome, ensure, ensure_live, ensure_words_eq, expect_error, reference};

/// Uploads round-trip bit for bit (non-canonical values included: transfers never canonicalise);
/// partial downloads at offsets return the right slice; `write` at an offset replaces exactly its
/// range; a download or write past the end is [`Error::OutOfBounds`] and changes nothing.
///
/// # Errors
/// A value that changed, or a download accepted past the end.
pub fn memory_upload_download<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("memory_upload_download");
    for len in [1, 2, 3, 100, 4097] {
        let host = g.matrix(len);
        let buf = backend.upload(&host).ctx("upload")?;
        ensure!(buf.len() == len, "upload of {len} elements made a buffer of {}", buf.len());
        ensure_words_eq(format!("round trip of {len} elements"), &host, &backend.download_vec(&buf).ctx("download")?)?;
        for (offset, count) in [(0, len), (len - 1, 1), (len / 2, len - len / 2), (len, 0), (len / 3, len / 3)] {
            let mut out = vec![0u64; count];
            backend.download(&buf, offset, &mut out).ctx(format_args!("download {count} at {offset} of {len}"))?;
            ensure_words_eq(format!("download {count} at {offset} of {len}"), &host[offset..offset + count], &out)?;
        }
        for (offset, count) in [(0, len + 1), (len, 1), (1, len), (usize::MAX, 2)] {
            let mut out = vec![0u64; count.min(len + 1)];
            let what = format!("download of {} at {offset} from {len} elements", out.len());
            expect_error(backend.download(&buf, offset, &mut out), &what, |e| matches!(e, Error::OutOfBounds { .. }))?;
        }
        // `write` replaces exactly its range and keeps every other element.
        let mut buf = buf;
        let mut expect = host.clone();
        for (offset, count) in [(0, len.min(3)), (len - 1, 1), (len / 3, len / 3), (len, 0)] {
            let patch = g.matrix(count);
            backend.write(&mut buf, offset, &patch).ctx(format_args!("write {count} at {offset} of {len}"))?;
            expect[offset..offset + count].copy_from_slice(&patch);
            let got = backend.download_vec(&buf).ctx("download after write")?;
            ensure_words_eq(format!("{len} elements after a write of {count} at {offset}"), &expect, &got)?;
        }
        for (offset, count) in [(0, len + 1), (len, 1), (1, len), (usize::MAX, 2)] {
            let patch = vec![7u64; count.min(len + 1)];
            let what = format!("write of {} at {offset} into {len} elements", patch.len());
            expect_error(backend.write(&mut buf, offset, &patch), &what, |e| matches!(e, Error::OutOfBounds { .. }))?;
        }
        let got = backend.download_vec(&buf).ctx("download after refused writes")?;
        ensure_words_eq(format!("{len} elements after refused writes"), &expect, &got)?;
    }
    Ok(())
}

/// The backend's host memory ([`Backend::alloc_host`]) is zeroed and behaves as any slice:
/// uploads from it, downloads into a sub-slice of it (the elements before the sub-slice stay) and
/// writes from a sub-slice keep every byte (CUDA copies page-locked memory directly, a path of its
/// own), and a queued download returns the buffer's bytes. A size no host holds (twice its memory
/// included) is a typed error ([`Error::HostOutOfMemory`] or [`Error::SizeOverflow`]), never a
/// panic. With the page-locking
/// fault armed ([`FaultSite::PinnedHostAlloc`]) an allocation either succeeds (a warned pageable
/// fallback, a pooled block, or a backend without page-locked memory) and transfers correctly, or
/// is a typed out-of-memory error. No device memory is left behind.
///
/// # Errors
/// A value that changed, a buffer that is not zeroed, or a refusal that is not typed.
pub fn memory_host_buffers<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("memory_host_buffers");
    let baseline = backend.memory().live;
    for len in [1, 5, 4097, (1 << 18) + 3] {
        let data = g.matrix(len);
        let mut host = backend.alloc_host(len).ctx(format_args!("alloc_host({len})"))?;
        ensure!(host.len() == len, "alloc_host({len}) holds {} elements", host.len());
        ensure!(host.iter().all(|&x| x == 0), "alloc_host({len}) is not zeroed");
        host.copy_from_slice(&data);
        let buf = backend.upload(&host).ctx("upload from a host buffer")?;
        host.fill(0);
        let got = backend.download_vec(&buf).ctx("download")?;
        ensure_words_eq(format!("upload of {len} elements from a host buffer"), &data, &got)?;
        let off = len / 3;
        backend.download(&buf, off, &mut host[off..]).ctx("download into a sub-slice")?;
        ensure!(host[..off].iter().all(|&x| x == 0), "a download into host[{off}..] of {len} wrote before it");
        ensure_words_eq(format!("download of {len} elements into host[{off}..]"), &data[off..], &host[off..])?;
        let mut other = backend.alloc(len).ctx("alloc")?;
        backend.write(&mut other, 0, &vec![0u64; len]).ctx("zero")?;
        backend.write(&mut other, off, &host[off..]).ctx("write from a sub-slice")?;
        let mut expect = vec![0u64; len];
        expect[off..].copy_from_slice(&data[off..]);
        ensure_words_eq(
            format!("write of host[{off}..] of {len}"),
            &expect,
            &backend.download_vec(&other).ctx("download")?,
        )?;
        let queued = backend.queue_download(&buf).ctx("queue_download")?.wait().ctx("wait")?;
        ensure_words_eq(format!("queued download of {len} elements"), &data, &queued)?;
    }
    for len in [1usize << 60, usize::MAX] {
        expect_error(backend.alloc_host(len), format!("alloc_host({len})"), |e| {
            matches!(e, Error::HostOutOfMemory { .. } | Error::SizeOverflow { .. })
        })?;
    }
    // Twice the host's memory: an overcommitting host would promise it, and fail only when the
    // pages are touched; the front refuses it first.
    if let Some(total) = backend_api::host_total_memory() {
        let len = total / 4;
        expect_error(backend.alloc_host(len), format!("alloc_host of twice the host's {total} B"), |e| {
            matches!(e, Error::HostOutOfMemory { .. })
        })?;
    }
    backend.tracker().fail_site(FaultSite::PinnedHostAlloc);
    let armed = backend.alloc_host(4099);
    // Clear the site if this backend did not pass through it (no page-locked memory, or a pooled
    // block), so that no later allocation of another check sees it.
    let _ = backend.tracker().site_fails(FaultSite::PinnedHostAlloc);
    match armed {
        Ok(mut host) => {
            let data = g.matrix(4099);
            host.copy_from_slice(&data);
            let buf = backend.upload(&host).ctx("upload from a host buffer made with the fault armed")?;
            let got = backend.download_vec(&buf).ctx("download")?;
            ensure_words_eq("a host buffer made with the page-locking fault armed", &data, &got)?;
        }
        Err(e) => ensure!(e.is_out_of_memory(), "a refused page-locking gave an untyped error: {e}"),
    }
    ensure_live(backend, baseline, "memory_host_buffers")
}

/// An allocation whose bytes overflow `usize` (`usize::MAX / 8 + 1` elements and more) is
/// [`Error::SizeOverflow`] naming the element count, on every backend: not out of memory, not a
/// panic, and nothing is left allocated.
///
/// # Errors
/// An allocation that succeeds, fails with another error, or leaves bytes live.
pub fn memory_size_overflow<B: Backend>(backend: &B) -> Outcome {
    let baseline = backend.memory().live;
    for len in [usize::MAX / 8 + 1, usize::MAX / 2, usize::MAX] {
        let what = format!("alloc({len}) ({len} x 8 B overflows usize)");
        let err = expect_error(backend.alloc(len), &what, |e| matches!(e, Error::SizeOverflow { .. }))?;
        ensure!(
            matches!(err, Error::SizeOverflow { elems, .. } if elems == len),
            "{what}: the error names another size: {err}"
        );
        ensure!(!err.is_out_of_memory(), "{what}: a size overflow counts as out of memory: {err}");
        ensure_live(backend, baseline, &what)?;
    }
    Ok(())
}

/// Allocations whose bytes fit `usize` but no device holds (`usize::MAX / 8` elements, 2^60 bytes,
/// and the device's total memory plus one element) are refused with a typed out-of-memory error
/// at once: no panic, no hang (no backend may build such a buffer piece by piece before it finds
/// out), nothing left live, and the peak does not count the refused bytes.
///
/// # Errors
/// An allocation that succeeds or fails untyped, or counters that keep the refused bytes.
pub fn memory_huge_allocations<B: Backend>(backend: &B) -> Outcome {
    let before = backend.memory();
    backend.tracker().reset_peak();
    let peak = backend.memory().peak;
    let total = backend.info().total_memory;
    let mut lens = vec![usize::MAX / 8, 1 << 57];
    if total > 0 && total < usize::MAX / 2 {
        lens.push(total / 8 + 1);
    }
    for len in lens {
        let what = format!("alloc({len}) ({} B, the device has {total} B)", len as u128 * 8);
        let err = expect_error(backend.alloc(len), &what, |e| e.is_out_of_memory())?;
        ensure!(!matches!(err, Error::SizeOverflow { .. }), "{what}: bytes that fit usize refused as an overflow");
        let now = backend.memory();
        ensure!(now.live == before.live, "{what}: {} B live after the refusal, {} B before", now.live, before.live);
        ensure!(now.peak == peak, "{what}: the peak counts the refused bytes: {} B, {peak} B before", now.peak);
    }
    Ok(())
}

/// The most free memory this check fills: it allocates about what the device reports free, so a
/// device that reports more (a GPU, or the host's memory) is left out with a `SKIPPED` line.
pub const FILL_LIMIT: usize = 4 << 30;

/// `DeviceInfo::free_memory` is free now: right after a buffer is dropped (its release possibly
/// still queued behind earlier work), an allocation of what the device reports free, less a
/// sixteenth for the allocator's own rounding and caches, succeeds. A backend that counts memory
/// whose queued release has not run as free fails here: admission would admit commits that then
/// run out of memory. Runs on a device that reports its memory and at most [`FILL_LIMIT`] bytes
/// free (a port with a simulated limit), and prints `SKIPPED` otherwise.
///
/// # Errors
/// The allocation refused, or bytes left live.
pub fn memory_free_memory_is_allocatable<B: Backend>(backend: &B) -> Outcome {
    let check = "memory_free_memory_is_allocatable";
    backend.synchronize().ctx("synchronize")?;
    let info = backend.info();
    if info.total_memory == 0 || info.free_memory > FILL_LIMIT || info.free_memory < 1 << 16 {
        crate::reference::skip::announce(format_args!(
            "{}::{check}: {} B free of {} B reported (the check fills the device: it runs where between \
             64 KiB and {FILL_LIMIT} B are free, as under a simulated memory limit)",
            info.backend, info.free_memory, info.total_memory
        ));
        return Ok(());
    }
    let baseline = backend.memory().live;
    // Half the free memory, written and read by queued work, then dropped at once.
    let half = info.free_memory / 2 / 8;
    let mut held = backend.alloc(half).ctx(format_args!("alloc({half})"))?;
    backend.write(&mut held, 0, &vec![7; half.min(1 << 16)]).ctx("write")?;
    let queued = backend.queue_download(&held).ctx("queue_download")?;
    drop(held);
    let free = backend.info().free_memory;
    let want = (free - free / 16) / 8;
    let filled = backend.alloc(want);
    let waited = queued.wait().ctx("wait for the queued download");
    let refused = filled.as_ref().err().map(ToString::to_string);
    drop(filled);
    backend.synchronize().ctx("synchronize")?;
    waited?;
    if let Some(e) = refused {
        return Err(Failure(format!(
            "{} B reported free right after a buffer of {} B was dropped, but an allocation of {} B failed: \
             {e}; report memory whose queued release has not run as used",
            free,
            half * 8,
            want * 8
        )));
    }
    ensure_live(backend, baseline, check)
}

/// [`Backend::prepare`] refuses, with a typed error and before it builds anything, a commit that
/// no device holds: an LDE whose bytes overflow, one larger than the device (a `2^31`-row trace,
/// whose twiddle tables alone are 40 GiB, and whose LDE's leaf digests are 128 GiB), a pool
/// growth larger than the device. A small commit's preparation still succeeds, and nothing stays
/// live.
///
/// # Errors
/// A refusal missing or untyped, or a small preparation that fails.
pub fn memory_prepare_refusals<B: Backend>(backend: &B) -> Outcome {
    let baseline = backend.memory().live;
    let total = backend.info().total_memory;
    let small = LdeParams::new(MatrixShape::new(1 << 4, 3).ctx("shape")?, 2, 7).ctx("params")?;
    let prep = |lde: Option<LdeParams>, lde_elems: usize, device_bytes: Option<usize>| Preparation {
        hash: HashKind::Keccak256,
        pageable_upload_bytes: 0,
        device_bytes,
        lde_elems,
        lde,
    };
    let mut step = |_: &str| {};
    expect_error(
        backend.prepare(&prep(None, usize::MAX, None), &mut step),
        "prepare of usize::MAX LDE elements",
        |e| matches!(e, Error::SizeOverflow { .. }),
    )?;
    let oom = |e: &Error| e.is_out_of_memory();
    // A device that does not report its memory cannot be held to it.
    if total > 0 && total < usize::MAX / 2 {
        let huge = LdeParams::new(MatrixShape::new(1 << 31, 1).ctx("shape")?, 2, 7).ctx("params")?;
        let start = std::time::Instant::now();
        let what = "prepare of a 2^31-row trace's LDE";
        expect_error(backend.prepare(&prep(Some(huge), 1 << 32, None), &mut step), what, oom)?;
        ensure!(
            start.elapsed() < std::time::Duration::from_secs(5),
            "{what} took {:?} to refuse (it built something first)",
            start.elapsed()
        );
        let what = format!("prepare growing the pool by {} B on a device of {total} B", total + 1);
        expect_error(backend.prepare(&prep(Some(small), 96, Some(total + 1)), &mut step), &what, oom)?;
    }
    backend.prepare(&prep(Some(small), 96, None), &mut step).ctx("prepare of a 16 x 3 trace's LDE")?;
    backend.synchronize().ctx("synchronize")?;
    ensure_live(backend, baseline, "memory_prepare_refusals")
}

/// A buffer is used only with the backend instance that allocated it. Every operation of `backend`
/// given a buffer of another instance (made by `make`), in any argument, is refused with
/// [`Error::ForeignBuffer`] and moves nothing: both instances' buffers keep their bytes. So is a
/// buffer whose backend has been dropped. Neither instance is disturbed: a valid call on each
/// still works afterwards.
///
/// # Errors
/// A foreign buffer accepted, or refused with another error; a buffer whose bytes changed.
pub fn memory_foreign_buffers<B: Backend>(backend: &B, make: &dyn Fn() -> backend_api::Result<B>) -> Outcome {
    let mut g = Gen::new("memory_foreign_buffers");
    let other = make().ctx("making a second backend instance")?;
    let baseline = backend.memory().live;
    let shape = MatrixShape::new(8, 4).expect("8 x 4");
    let params = LdeParams::new(MatrixShape::new(4, 4).expect("4 x 4"), 2, 7).expect("blowup 2");
    let spec = LeafSpec::new(HashKind::Keccak256, LeafLayout::Rows, 0..4).expect("4 columns");
    let tree = backend_api::TreeShape::new(8).expect("8 leaves");
    let (ours_data, theirs_data) = (g.matrix(32), g.matrix(32));
    let mut ours = backend.upload(&ours_data).ctx("upload to the backend")?;
    let mut theirs = other.upload(&theirs_data).ctx("upload to the other instance")?;
    let mut our_nodes = backend.upload(&vec![5; tree.words()]).ctx("upload nodes")?;
    let mut their_nodes = other.upload(&vec![6; tree.words()]).ctx("upload nodes to the other")?;
    let foreign = |r: backend_api::Result<()>, what: &str| {
        expect_error(r, format!("{what} with a buffer of another instance"), |e| {
            matches!(e, Error::ForeignBuffer { .. })
        })
        .map(drop)
    };
    foreign(backend.write(&mut theirs, 0, &[7; 4]), "write")?;
    foreign(backend.download(&theirs, 0, &mut [0; 4]), "download")?;
    foreign(backend.queue_download(&theirs).map(drop), "queue_download")?;
    foreign(backend.transpose_in_place(&mut theirs, shape, DEFAULT_SCRATCH_CAP), "transpose_in_place")?;
    let copy = [CopyRange::new(0, 0, 4)];
    foreign(backend.batched_copy(&theirs, &mut ours, &copy), "batched_copy (source)")?;
    foreign(backend.batched_copy(&ours, &mut theirs, &copy), "batched_copy (destination)")?;
    foreign(backend.batched_copy_within(&mut theirs, &[CopyRange::new(0, 8, 4)]), "batched_copy_within")?;
    foreign(backend.bit_reversed_rows(&theirs, 0, shape, 0..8, &mut ours, 0), "bit_reversed_rows (source)")?;
    foreign(backend.bit_reversed_rows(&ours, 0, shape, 0..8, &mut theirs, 0), "bit_reversed_rows (destination)")?;
    foreign(backend.hash_leaves_into(&theirs, shape, &spec, &mut our_nodes, 7), "hash_leaves_into (matrix)")?;
    foreign(backend.hash_leaves_into(&ours, shape, &spec, &mut their_nodes, 7), "hash_leaves_into (output)")?;
    foreign(backend.hash_leaves_from_host(&ours_data, shape, &spec, &mut their_nodes, 7), "hash_leaves_from_host")?;
    let mut jobs = [backend_api::LeafJob { spec: &spec, out: &mut our_nodes, out_digest: 7 }];
    foreign(backend.hash_leaves_then_transpose(&mut theirs, shape, &mut jobs, DEFAULT_SCRATCH_CAP), "leaves (matrix)")?;
    let mut jobs = [backend_api::LeafJob { spec: &spec, out: &mut their_nodes, out_digest: 7 }];
    foreign(backend.hash_leaves_then_transpose(&mut ours, shape, &mut jobs, DEFAULT_SCRATCH_CAP), "leaves (output)")?;
    foreign(backend.merkle_tree_in_place(&mut their_nodes, tree, HashKind::Keccak256), "merkle_tree_in_place")?;
    foreign(backend.coset_lde_in_place(&mut theirs, &params), "coset_lde_in_place")?;
    let mut ours_half = backend.upload(&ours_data[..16]).ctx("upload half")?;
    let mut theirs_half = other.upload(&theirs_data[..16]).ctx("upload half to the other")?;
    foreign(backend.fri_fold(&theirs, &[1], None, &mut ours_half), "fri_fold (input)")?;
    foreign(backend.fri_fold(&ours, &[1], None, &mut theirs_half), "fri_fold (output)")?;
    foreign(backend.fri_fold(&ours, &[1], Some((&theirs_half, &[1])), &mut ours_half), "fri_fold (addend)")?;
    ensure_words_eq(
        "the other instance's fold output after the refusals",
        &theirs_data[..16],
        &other.download_vec(&theirs_half).ctx("download")?,
    )?;
    drop((ours_half, theirs_half));
    foreign(backend.coset_lde_from_host(&mut theirs, &ours_data[..16], &params), "coset_lde_from_host")?;
    let mut trace = other.upload(&theirs_data[..16]).ctx("upload a trace to the other")?;
    foreign(backend.coset_lde(&trace, &params).map(drop), "coset_lde")?;
    // The owned form frees the trace either way; the other instance's bytes go back to it.
    let other_live = other.memory().live;
    foreign(backend.coset_lde_owned(trace, &params).map(drop), "coset_lde_owned")?;
    ensure!(other.memory().live + 128 == other_live, "a refused coset_lde_owned kept the other instance's trace");
    trace = other.upload(&theirs_data[..16]).ctx("upload a trace to the other")?;
    ensure_words_eq(
        "the other instance's buffer after the refusals",
        &theirs_data,
        &other.download_vec(&theirs).ctx("download")?,
    )?;
    ensure_words_eq(
        "the backend's buffer after the refusals",
        &ours_data,
        &backend.download_vec(&ours).ctx("download")?,
    )?;
    let nodes = other.download_vec(&their_nodes).ctx("download the other's nodes")?;
    ensure!(nodes.iter().all(|&x| x == 6), "the other instance's node buffer changed");
    let nodes = backend.download_vec(&our_nodes).ctx("download nodes")?;
    ensure!(nodes.iter().all(|&x| x == 5), "the backend's node buffer changed");
    // A buffer outliving its backend.
    let gone = make().ctx("making a third backend instance")?;
    let orphan = gone.upload(&ours_data).ctx("upload to the third instance")?;
    drop(gone);
    foreign(backend.download(&orphan, 0, &mut [0; 4]), "download of a buffer whose backend was dropped")?;
    drop((orphan, trace, theirs, their_nodes));
    // Both instances still work.
    backend.transpose_in_place(&mut ours, shape, DEFAULT_SCRATCH_CAP).ctx("a valid transpose afterwards")?;
    ensure_words_eq(
        "a transpose after the refusals",
        &reference::transpose(&ours_data, 8, 4),
        &backend.download_vec(&ours).ctx("download")?,
    )?;
    let again = other.upload(&[1, 2, 3]).ctx("the other instance afterwards")?;
    ensure_words_eq("the other instance afterwards", &[1, 2, 3], &other.download_vec(&again).ctx("download")?)?;
    drop((ours, our_nodes, again));
    ensure_live(backend, baseline, "memory_foreign_buffers")
}

/// `alloc(n)` and `upload` raise live bytes by at least `8n` and dropping gives them back; the
/// allocation count grows; `reset_peak` then a larger allocation moves the peak.
///
/// # Errors
/// Counters that do not move as described.
pub fn memory_counters<B: Backend>(backend: &B) -> Outcome {
    let before = backend.memory();
    let a = backend.alloc(1000).ctx("alloc 1000")?;
    ensure!(a.len() == 1000, "alloc(1000) made a buffer of {}", a.len());
    let after_a = backend.memory();
    ensure!(
        after_a.live >= before.live + 8000,
        "alloc(1000) raised live bytes from {} only to {}",
        before.live,
        after_a.live
    );
    ensure!(
        after_a.allocations > before.allocations,
        "alloc(1000) was not counted: {} allocations before and after",
        before.allocations
    );
    backend.tracker().reset_peak();
    let b = backend.upload(&[7u64; 512]).ctx("upload 512")?;
    let with_b = backend.memory();
    ensure!(
        with_b.live >= after_a.live + 4096,
        "upload(512) raised live bytes from {} only to {}",
        after_a.live,
        with_b.live
    );
    ensure!(with_b.peak >= with_b.live, "peak {} is below live {}", with_b.peak, with_b.live);
    drop(b);
    ensure_live(backend, after_a.live, "dropping an uploaded buffer")?;
    drop(a);
    ensure_live(backend, before.live, "dropping an allocated buffer")?;
    ensure!(backend.memory().peak >= with_b.live, "the peak forgot the upload after it was dropped");
    Ok(())
}

/// A queued download is a snapshot: work issued after it (a copy, a transpose; dropping the buffer
/// and writing a new one in its memory) does not change what it returns, and the buffer itself
/// does change.
///
/// # Errors
/// A snapshot that sees later writes, or later work that did not happen.
pub fn memory_queue_download_snapshot<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("memory_queue_download_snapshot");
    let (rows, cols) = (64, 5);
    let host = g.matrix(rows * cols);
    let mut buf = backend.upload(&host).ctx("upload")?;
    let pending = backend.queue_download(&buf).ctx("queue_download")?;
    backend.batched_copy_within(&mut buf, &[CopyRange::new(0, 100, 50)]).ctx("copy after queue")?;
    let shape = MatrixShape::new(rows, cols).ctx("shape")?;
    backend.transpose_in_place(&mut buf, shape, DEFAULT_SCRATCH_CAP).ctx("transpose after queue")?;
    let snapshot = pending.wait().ctx("wait")?;
    ensure_words_eq("queued download vs the buffer when it was queued", &host, &snapshot[..])?;
    let mut moved = host.clone();
    reference::apply_copies(&host, &mut moved, &[CopyRange::new(0, 100, 50)]);
    let expected = reference::transpose(&moved, rows, cols);
    ensure_words_eq(
        "the buffer after the work queued behind the download",
        &expected,
        &backend.download_vec(&buf).ctx("download")?,
    )?;
    // A buffer dropped while its download is queued, its memory taken at once by a new buffer
    // that is written: the download still holds the dropped buffer's bytes.
    let pending = backend.queue_download(&buf).ctx("queue_download")?;
    drop(buf);
    let garbage = g.matrix(rows * cols);
    let mut again = backend.alloc(rows * cols).ctx("alloc after the drop")?;
    backend.write(&mut again, 0, &garbage).ctx("write after the drop")?;
    let snapshot = pending.wait().ctx("wait")?;
    ensure_words_eq("a queued download of a buffer dropped behind it", &expected, &snapshot[..])?;
    ensure_words_eq("the new buffer", &garbage, &backend.download_vec(&again).ctx("download")?)
}

/// Makes each allocation of an operation fail in turn (`tracker().fail_at`) until the operation
/// succeeds; every failure must be an out-of-memory error, leave live bytes where they were, and
/// the final success must still be correct.
///
/// # Errors
/// A failure that is not out of memory, a leak, an operation that never succeeds within 64
/// injected faults, or an operation that allocated nothing through the tracker (every operation
/// checked here needs device memory).
fn inject_each<B: Backend, T>(backend: &B, what: &str, mut op: impl FnMut() -> Result<T, Error>) -> Result<T, Failure> {
    for k in 0..64 {
        let before = backend.memory();
        backend.tracker().fail_at(before.allocations + k);
        let result = op();
        backend.tracker().disarm();
        match result {
            Ok(v) => {
                ensure!(
                    k > 0,
                    "{what}: succeeded with its next allocation armed to fail: it allocates nothing through the tracker"
                );
                return Ok(v);
            }
            Err(e) => {
                ensure!(
                    e.is_out_of_memory(),
                    "{what}, allocation #{k} failed: got {e}, expected the injected out-of-memory"
                );
                ensure_live(backend, before.live, format_args!("{what} with allocation #{k} failed"))?;
            }
        }
    }
    Err(Failure(format!("{what}: still failing after 64 injected faults")))
}

/// Fault injection at every allocation of alloc, upload, transpose, hash_leaves, merkle_tree,
/// coset_lde, coset_lde_owned and coset_lde_in_place: out of memory, nothing leaked, and the retry that succeeds is correct. A transpose
/// that runs out of memory must do so before it moves a byte (allocate the scratch first), so the
/// retry transposes the original matrix.
///
/// # Errors
/// As `inject_each`, or a wrong final result.
pub fn memory_fault_injection<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("memory_fault_injection");
    inject_each(backend, "alloc(100)", || backend.alloc(100))?;
    let host = g.matrix(40 * 6);
    let up = inject_each(backend, "upload", || backend.upload(&host))?;
    ensure_words_eq("upload after injected faults", &host, &backend.download_vec(&up).ctx("download")?)?;

    let shape = MatrixShape::new(40, 6).ctx("shape")?;
    let mut buf = backend.upload(&host).ctx("upload")?;
    // The plan needs scratch for this shape, and scratch is device memory: it must be tracked.
    inject_each(backend, "transpose_in_place 40 x 6 under a 2-row cap", || {
        // A failed attempt must leave the matrix as it was, so the retry transposes the original.
        backend.transpose_in_place(&mut buf, shape, (6 + 1) * 8 * 2)
    })?;
    ensure_words_eq(
        "transpose after injected faults",
        &reference::transpose(&host, 40, 6),
        &backend.download_vec(&buf).ctx("download")?,
    )?;

    let matrix = backend.upload(&host).ctx("upload")?;
    for kind in HashKind::ALL {
        let spec = LeafSpec::new(kind, LeafLayout::Rows, 1..5).ctx("leaf spec")?;
        let leaves = inject_each(backend, "hash_leaves", || backend.hash_leaves(&matrix, shape, &spec))?;
        let words = backend.download_vec(&leaves).ctx("download")?;
        let expected = reference::leaf_digests(&host, 6, kind, LeafLayout::Rows, 1..5);
        ensure!(
            reference::words_to_digests(&words) == expected,
            "hash_leaves {kind} after injected faults differs from the reference"
        );
        let nodes = inject_each(backend, "merkle_tree", || backend.merkle_tree(&leaves, kind))?;
        let words = backend.download_vec(&nodes).ctx("download")?;
        ensure!(
            reference::words_to_digests(&words) == reference::merkle_nodes(&expected, kind),
            "merkle_tree {kind} after injected faults differs from the reference"
        );
    }

    let trace_host = g.matrix(16 * 3);
    let trace = backend.upload(&trace_host).ctx("upload")?;
    let params = LdeParams::new(MatrixShape::new(16, 3).ctx("shape")?, 4, 7).ctx("params")?;
    let lde = inject_each(backend, "coset_lde 16 x 3, blowup 4", || backend.coset_lde(&trace, &params))?;
    let expected = reference::coset_lde(&trace_host, 16, 3, 4, 7);
    ensure_words_eq("coset_lde after injected faults", &expected, &backend.download_vec(&lde).ctx("download")?)?;
    // Owned: each attempt uploads its own trace, which a failed attempt must free too.
    let lde = inject_each(backend, "coset_lde_owned 16 x 3, blowup 4", || {
        backend.coset_lde_owned(backend.upload(&trace_host)?, &params)
    })?;
    ensure_words_eq("coset_lde_owned after injected faults", &expected, &backend.download_vec(&lde).ctx("download")?)?;

    // In place: a failed attempt leaves the buffer unspecified, so each attempt writes the trace
    // rows again (rows [n, N) keep whatever the failed attempt left there).
    let mut buf = backend.upload(&g.matrix(16 * 4 * 3)).ctx("upload")?;
    inject_each(backend, "coset_lde_in_place 16 x 3, blowup 4", || {
        backend.write(&mut buf, 0, &trace_host)?;
        backend.coset_lde_in_place(&mut buf, &params)
    })?;
    ensure_words_eq("coset_lde_in_place after injected faults", &expected, &backend.download_vec(&buf).ctx("download")?)
}
