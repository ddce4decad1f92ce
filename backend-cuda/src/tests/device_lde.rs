//! Device tests of the coset LDE: every route (in place, from a trace buffer, owned, from host
//! memory in column groups) against a naive reference, the tables the device keeps, and the
//! grouped upload's error path. Each needs a GPU: skipped visibly without one
//! ([`super::device_or_skip`]).

use super::{PINNED_COUNT, assert_same_words, device_or_skip, table};
use crate::driver;

/// The one naive reference of the workspace (`naive-reference`): u128 % p, its own roots, O(n^2).
use naive_reference::coset_lde as naive_lde;

/// The in-place LDE (inverse NTT in the buffer's first rows, its last pass in ranges of tiles
/// from the top down, the forward NTT), `coset_lde` from a trace buffer (its first inverse pass
/// reads the trace) and `coset_lde_owned` (the inverse in the trace's buffer) against the naive
/// reference, with the shipped kernels (the shared-memory kernel for traces below 2^5 rows, the
/// radix-16 register kernel above, one pass per direction up to 2^11 rows and two from 2^12), on
/// edge shapes: n = 1,
/// n < B, n = B, B = 1, m = 1, odd m, a last inverse pass of one tile and of many (n = 2^12: tiles
/// with lo != 0 in both directions; n = 2^13: passes of 7 and 6 stages), and a non-canonical
/// shift. The trace holds non-canonical values, rows [n, N) of the in-place buffer hold garbage,
/// the bytes must equal the reference's, and the trace buffer must come back unchanged.
#[test]
fn every_lde_route_matches_the_naive_reference() {
    use backend_api::{Backend, LdeParams, MatrixShape};
    let Some(backend) = device_or_skip("every_lde_route_matches_the_naive_reference") else {
        return;
    };
    let p = backend_api::field::P;
    // (log n, m, log B, shift)
    let shapes = [
        (0, 1, 0, 7),
        (0, 3, 3, 7),
        (1, 2, 3, 7 + p),
        (2, 5, 2, 7),
        (3, 1, 3, 3),
        (4, 4, 1, 7),
        (5, 3, 3, 7),
        (6, 1, 1, 7 + p),
        (7, 4, 2, 7),
        (9, 9, 1, 7),
        (10, 2, 0, 5),
        (11, 2, 1, 7),
        (12, 3, 1, 7 + p),
        (13, 2, 1, 7),
    ];
    for (i, &(log_n, m, log_b, shift)) in shapes.iter().enumerate() {
        let (n, blowup) = (1usize << log_n, 1usize << log_b);
        let trace = table(n * m, 11 + i as u64);
        let garbage = table((n * blowup - n) * m, 101 + i as u64);
        let params = LdeParams::new(MatrixShape::new(n, m).unwrap(), blowup, shift).unwrap();
        let want = naive_lde(&trace, n, m, blowup, shift);
        {
            let what = format!("n {n}, m {m}, B {blowup}, shift {shift}");
            let b = &backend;
            let mut buf = b.alloc(n * blowup * m).unwrap();
            b.write(&mut buf, 0, &trace).unwrap();
            b.write(&mut buf, n * m, &garbage).unwrap();
            b.coset_lde_in_place(&mut buf, &params).unwrap_or_else(|e| panic!("{what}: {e}"));
            let got = b.download_vec(&buf).unwrap();
            assert_same_words(&what, &got, &want, m);
            let kept = b.upload(&trace).unwrap();
            let lde = b.coset_lde(&kept, &params).unwrap_or_else(|e| panic!("{what}, from a trace buffer: {e}"));
            assert_same_words(&format!("{what}, from a trace buffer"), &b.download_vec(&lde).unwrap(), &want, m);
            assert_eq!(b.download_vec(&kept).unwrap(), trace, "{what}: the trace buffer changed");
            let lde = b.coset_lde_owned(kept, &params).unwrap_or_else(|e| panic!("{what}, owned trace: {e}"));
            assert_same_words(&format!("{what}, owned trace"), &b.download_vec(&lde).unwrap(), &want, m);
        }
    }
    assert_eq!(backend.memory().live, 0, "the LDEs left device memory allocated");
}

/// The device keeps the last LDE's tables under (log2 n, log2 B, shift), uncounted as live: an LDE
/// of another shift must not reuse them (both results against the naive reference), the same
/// shape and shift reuses the kept allocation, and `trim_pool` frees it.
#[test]
fn lde_tables_are_kept_per_shape_and_shift() {
    use backend_api::{Backend, LdeParams, MatrixShape};
    let Some(b) = device_or_skip("lde_tables_are_kept_per_shape_and_shift") else { return };
    let kept = |b: &crate::CudaBackend| b.device.lde_tables.lock().unwrap().as_ref().map(|t| (t.key, t.ptr));
    let (n, m, blowup) = (1usize << 11, 3, 2);
    let trace = table(n * m, 41);
    let trace_buf = b.upload(&trace).unwrap();
    let mut first = None;
    for (round, shift) in [7u64, 5, 5, 7].into_iter().enumerate() {
        let params = LdeParams::new(MatrixShape::new(n, m).unwrap(), blowup, shift).unwrap();
        let lde = b.coset_lde(&trace_buf, &params).unwrap();
        let what = format!("round {round}, shift {shift}");
        assert_same_words(&what, &b.download_vec(&lde).unwrap(), &naive_lde(&trace, n, m, blowup, shift), m);
        let (key, ptr) = kept(&b).unwrap_or_else(|| panic!("{what}: no tables kept"));
        assert_eq!(key, (11, 1, shift), "{what}");
        if round == 2 {
            assert_eq!(Some(ptr), first, "{what}: the kept tables were not reused");
        }
        first = Some(ptr);
    }
    drop(trace_buf);
    assert_eq!(b.memory().live, 0, "the kept tables are counted as live");
    b.trim_pool().unwrap();
    assert!(kept(&b).is_none(), "trim_pool left the tables kept");
}

/// [`backend_api::Backend::coset_lde_from_host`] from page-locked memory with 1, 2, 3, 4 and 7
/// column groups (the overlap forced on every size: `upload_overlap_min_bytes` 0) against the
/// naive reference: n = 1, B = 1, fewer than 8 columns (one tile: the default route), column
/// counts that are not multiples of 8 (a narrow last group), more groups than tiles, two register
/// passes per direction (n = 2^11), values >= p and a non-canonical shift. The buffer is
/// pre-filled with garbage over all its rows, and the host trace is overwritten as soon as the
/// call returns (the copies must be done by then).
#[test]
fn lde_from_host_matches_the_naive_reference_for_every_group_count() {
    use crate::CudaOptions;
    use backend_api::{Backend, LdeParams, MatrixShape};
    let _count = PINNED_COUNT.lock().unwrap_or_else(|p| p.into_inner());
    let Some(backend) = device_or_skip("lde_from_host_matches_the_naive_reference_for_every_group_count") else {
        return;
    };
    let p = backend_api::field::P;
    // (log n, m, log B, shift)
    let shapes =
        [(0, 17, 1, 7), (1, 9, 3, 7 + p), (3, 24, 2, 7), (5, 16, 0, 7), (6, 7, 1, 7), (7, 33, 2, 3), (11, 9, 1, 7)];
    let baseline = backend.memory().live;
    for (i, &(log_n, m, log_b, shift)) in shapes.iter().enumerate() {
        let (n, blowup) = (1usize << log_n, 1usize << log_b);
        let trace = table(n * m, 211 + i as u64);
        let params = LdeParams::new(MatrixShape::new(n, m).unwrap(), blowup, shift).unwrap();
        let want = naive_lde(&trace, n, m, blowup, shift);
        let mut host = backend.alloc_host(n * m).unwrap();
        for groups in [1, 2, 3, 4, 7] {
            let options = CudaOptions { upload_groups: groups, upload_overlap_min_bytes: 0, ..backend.options() };
            let what = format!("n {n}, m {m}, B {blowup}, shift {shift}, {groups} groups");
            let b = backend.with_options(options).unwrap();
            host.copy_from_slice(&trace);
            let mut buf = b.upload(&table(n * blowup * m, 307 + groups as u64)).unwrap();
            b.coset_lde_from_host(&mut buf, &host, &params).unwrap_or_else(|e| panic!("{what}: {e}"));
            host.iter_mut().for_each(|x| *x = !*x);
            let got = b.download_vec(&buf).unwrap();
            assert_same_words(&what, &got, &want, m);
        }
    }
    assert_eq!(backend.memory().live, baseline, "the LDEs left device memory allocated");
}

/// A grouped upload failing after its first copy is queued ([`backend_api::FaultSite::HostUploadQueued`])
/// returns its error only once neither stream has work left (no copy still reads the caller's
/// host trace: a 64 MiB group takes over a millisecond on the bus), frees its tables, and the
/// same call then succeeds with the bytes of the default route (`write`, then
/// `coset_lde_in_place`, whose bytes the test above and the conformance suite check against the
/// naive reference). The site is reached only on the grouped path, so the error also shows that
/// a page-locked trace takes it.
#[test]
fn a_failed_grouped_upload_waits_for_its_copies() {
    use crate::CudaOptions;
    use backend_api::{Backend, FaultSite, LdeParams, MatrixShape};
    let _count = PINNED_COUNT.lock().unwrap_or_else(|p| p.into_inner());
    let Some(backend) = device_or_skip("a_failed_grouped_upload_waits_for_its_copies") else { return };
    let b = backend.with_options(CudaOptions { upload_groups: 4, ..backend.options() }).unwrap();
    let (n, m) = (1usize << 20, 32);
    let params = LdeParams::new(MatrixShape::new(n, m).unwrap(), 2, 7).unwrap();
    let mut host = b.alloc_host(n * m).unwrap();
    host.copy_from_slice(&table(n * m, 5));
    let baseline = b.memory().live;
    {
        let mut buf = b.alloc(2 * n * m).unwrap();
        b.tracker().fail_site(FaultSite::HostUploadQueued);
        let err = b.coset_lde_from_host(&mut buf, &host, &params).expect_err("the injected fault must surface");
        assert!(err.to_string().contains("cuMemcpy2DAsync"), "{err}");
        // SAFETY: the backend's live streams, with its context current.
        let (copies_idle, compute_idle) = unsafe {
            (driver::stream_query(b.device.copy_stream()).unwrap(), driver::stream_query(b.device.stream()).unwrap())
        };
        assert!(copies_idle, "coset_lde_from_host returned its error while a copy could still read the host trace");
        assert!(compute_idle, "coset_lde_from_host returned its error with work still queued");
        assert_eq!(b.memory().live, baseline + 2 * n * m * 8, "the tables of the failed call are still allocated");
        b.coset_lde_from_host(&mut buf, &host, &params).unwrap();
        let grouped = b.download_vec(&buf).unwrap();
        let mut plain = b.alloc(2 * n * m).unwrap();
        b.write(&mut plain, 0, &host).unwrap();
        b.coset_lde_in_place(&mut plain, &params).unwrap();
        assert!(grouped == b.download_vec(&plain).unwrap(), "the grouped LDE differs from the default route's");
    }
    b.synchronize().unwrap();
    assert_eq!(b.memory().live, baseline, "device memory leaked");
}

/// [`backend_api::Backend::coset_lde_from_host_and_download`] on the grouped route, at a size
/// where each group's download takes milliseconds on the bus: the buffer is a reader of the
/// download until the copies are done, the work queued right after the call (an in-place
/// transpose, then an overwrite of the whole buffer) waits for them, and the download holds the
/// LDE of the trace route (whose bytes the tests above check against the naive reference). Then a
/// fault after the first group's upload ([`backend_api::FaultSite::HostUploadQueued`]) returns
/// only once no stream has work left, and nothing stays allocated.
#[test]
fn a_grouped_download_of_the_lde_sees_none_of_the_work_after_it() {
    use crate::CudaOptions;
    use crate::context::Lane;
    use backend_api::{Backend, DEFAULT_SCRATCH_CAP, FaultSite, LdeParams, MatrixShape, PendingDownload};
    let _count = PINNED_COUNT.lock().unwrap_or_else(|p| p.into_inner());
    let Some(backend) = device_or_skip("a_grouped_download_of_the_lde_sees_none_of_the_work_after_it") else {
        return;
    };
    let b = backend.with_options(CudaOptions { upload_groups: 4, ..backend.options() }).unwrap();
    let (n, m) = (1usize << 20, 32);
    let params = LdeParams::new(MatrixShape::new(n, m).unwrap(), 2, 7).unwrap();
    let mut host = b.alloc_host(n * m).unwrap();
    host.copy_from_slice(&table(n * m, 17));
    let baseline = b.memory().live;
    {
        let want = {
            let trace = b.upload(&host).unwrap();
            b.download_vec(&b.coset_lde(&trace, &params).unwrap()).unwrap()
        };
        let mut buf = b.alloc(2 * n * m).unwrap();
        let pending = b.coset_lde_from_host_and_download(&mut buf, &host, &params).unwrap();
        assert!(buf.has_readers(), "the grouped route left no reader on the buffer it downloads");
        b.transpose_in_place(&mut buf, params.lde_shape(), DEFAULT_SCRATCH_CAP).unwrap();
        assert!(!buf.has_readers(), "the transpose was queued without waiting for the download");
        b.write(&mut buf, 0, &vec![u64::MAX; 2 * n * m]).unwrap();
        let got = pending.wait().unwrap();
        assert!(got[..] == want[..], "the download saw work queued after it, or holds another LDE");
        assert!(b.download_vec(&buf).unwrap().iter().all(|&x| x == u64::MAX), "the overwrite did not happen");

        b.tracker().fail_site(FaultSite::HostUploadQueued);
        let err =
            b.coset_lde_from_host_and_download(&mut buf, &host, &params).expect_err("the injected fault must surface");
        assert!(err.to_string().contains("cuMemcpy2DAsync"), "{err}");
        // SAFETY: the backend's live streams, with its context current.
        let idle = unsafe {
            [Lane::Compute, Lane::Copy, Lane::Download].map(|l| driver::stream_query(b.device.lane(l)).unwrap())
        };
        assert_eq!(idle, [true; 3], "an error returned with work still queued (compute, copy, download)");
    }
    b.synchronize().unwrap();
    assert_eq!(b.memory().live, baseline, "the downloads left device memory allocated");
}
