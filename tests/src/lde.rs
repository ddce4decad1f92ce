//! Checks of [`Backend::coset_lde`], [`Backend::coset_lde_in_place`],
//! [`Backend::coset_lde_from_host`] and [`Backend::coset_lde_from_host_and_download`] against the naive `O(n^2)` interpolate-and-evaluate reference
//! in `u128 % p` arithmetic ([`reference::coset_lde`]).
//!
//! The in-place entry gets an `N x m` buffer whose rows `[0, n)` hold the trace and whose rows
//! `[n, N)` hold anything: the checks fill those rows with garbage (random `u64`s, values `>= p`,
//! `u64::MAX`, a stale copy of the trace), which must not change a byte of the result.

use backend_api::{
    Backend, DeviceBuffer as _, Error, LdeParams, MatrixShape, PendingDownload as _, field::LdeTwiddles,
};

use crate::reference::{self, P};
use crate::{Context as _, Gen, Outcome, ensure, ensure_live, ensure_words_eq, expect_error};

/// Trace row counts checked: `2^0 ..= 2^6`.
pub const TRACE_ROWS: [usize; 7] = [1, 2, 4, 8, 16, 32, 64];
/// Blowups checked: `2^0 ..= 2^4`.
pub const BLOWUPS: [usize; 5] = [1, 2, 4, 8, 16];

/// Runs the backend's LDE of `host` (row-major, `n x m`) and compares it with the reference;
/// also checks that every output value is canonical and that the trace buffer is unchanged. Then
/// the same with [`Backend::coset_lde_owned`], which must give the same bytes and free the trace
/// it takes.
///
/// # Errors
/// A [`crate::Failure`] naming the parameters and the first differing element.
pub fn check_lde<B: Backend>(backend: &B, host: &[u64], n: usize, m: usize, blowup: usize, shift: u64) -> Outcome {
    let what = format!("coset_lde n = {n}, m = {m}, blowup {blowup}, shift {shift:#x}");
    let params = LdeParams::new(MatrixShape::new(n, m).ctx(&what)?, blowup, shift).ctx(&what)?;
    let trace = backend.upload(host).ctx(format_args!("{what}: upload"))?;
    let lde = backend.coset_lde(&trace, &params).ctx(&what)?;
    ensure!(lde.len() == n * blowup * m, "{what}: output holds {} elements, expected {}", lde.len(), n * blowup * m);
    let got = backend.download_vec(&lde).ctx(format_args!("{what}: download"))?;
    if let Some(i) = got.iter().position(|&x| x >= P) {
        return Err(crate::Failure(format!("{what}: output element {i} = {:#018x} is not canonical (>= p)", got[i])));
    }
    ensure_words_eq(&what, &reference::coset_lde(host, n, m, blowup, shift), &got)?;
    let kept = backend.download_vec(&trace).ctx(format_args!("{what}: download the trace"))?;
    ensure_words_eq(format!("{what}: the trace buffer after the LDE"), host, &kept)?;
    drop((trace, lde));
    let trace = backend.upload(host).ctx(format_args!("{what}: upload"))?;
    let live = backend.memory().live;
    let owned = format!("{what}, owned");
    let lde = backend.coset_lde_owned(trace, &params).ctx(&owned)?;
    let after = backend.memory().live;
    ensure!(
        after + n * m * 8 == live + n * blowup * m * 8,
        "{owned}: {live} live bytes before, {after} after: the trace was not freed or more stayed allocated"
    );
    let again = backend.download_vec(&lde).ctx(format_args!("{owned}: download"))?;
    ensure_words_eq(&owned, &got, &again)
}

/// Runs the backend's in-place LDE on an `N x m` buffer (`N = n * blowup`) whose rows `[0, n)`
/// hold `host` (row-major, `n x m`) and whose rows `[n, N)` hold `tail` (`(N - n) * m` elements,
/// anything), both written with [`Backend::write`]; compares the buffer with the reference and
/// checks that every value is canonical, the buffer keeps its length and nothing stays allocated.
///
/// # Errors
/// A [`crate::Failure`] naming the parameters, the tail and the first differing element.
pub fn check_lde_in_place<B: Backend>(
    backend: &B,
    (host, tail, tail_kind): (&[u64], &[u64], &str),
    (n, m, blowup, shift): (usize, usize, usize, u64),
) -> Outcome {
    let what =
        format!("coset_lde_in_place n = {n}, m = {m}, blowup {blowup}, shift {shift:#x}, rows [n, N) {tail_kind}");
    let params = LdeParams::new(MatrixShape::new(n, m).ctx(&what)?, blowup, shift).ctx(&what)?;
    let len = params.lde_shape().len();
    ensure!(host.len() == n * m && tail.len() == len - n * m, "{what}: the check was given the wrong lengths");
    let mut buf = backend.alloc(len).ctx(format_args!("{what}: alloc"))?;
    backend.write(&mut buf, 0, host).ctx(format_args!("{what}: write the trace"))?;
    backend.write(&mut buf, n * m, tail).ctx(format_args!("{what}: write rows [n, N)"))?;
    let live = backend.memory().live;
    backend.coset_lde_in_place(&mut buf, &params).ctx(&what)?;
    ensure!(buf.len() == len, "{what}: the buffer holds {} elements afterwards, expected {len}", buf.len());
    ensure_live(backend, live, &what)?;
    let got = backend.download_vec(&buf).ctx(format_args!("{what}: download"))?;
    if let Some(i) = got.iter().position(|&x| x >= P) {
        return Err(crate::Failure(format!("{what}: output element {i} = {:#018x} is not canonical (>= p)", got[i])));
    }
    ensure_words_eq(&what, &reference::coset_lde(host, n, m, blowup, shift), &got)
}

/// In place: every `n` in `1..=64` and blowup in `1..=16` (powers of two: `n = 1`, `B = 1`,
/// `n < B` and the largest blowup of the suite), 1 and 3 columns, shifts 7 and `p - 1`; traces with
/// non-canonical values, rows `[n, N)` random (non-canonical values included).
///
/// # Errors
/// The first LDE that differs.
pub fn coset_lde_in_place_small_domains<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("coset_lde_in_place_small_domains");
    for n in TRACE_ROWS {
        for blowup in BLOWUPS {
            for (m, shift) in [(1, 7), (3, P - 1)] {
                let host = g.matrix(n * m);
                let tail = g.matrix((blowup - 1) * n * m);
                check_lde_in_place(backend, (&host, &tail, "random"), (n, m, blowup, shift))?;
            }
        }
    }
    Ok(())
}

/// In place: whatever rows `[n, N)` hold on entry is overwritten unread. Each shape runs with
/// those rows all `u64::MAX`, all `p`, uniform random `u64`s, values `>= p` only, and stale
/// copies of the trace; traces of values `>= p` only and an all-`p` (zero) trace too. Shapes
/// include `n = 1`, one column, `n < B` and blowup 1 (no rows to ignore) with shift 1 (the
/// canonicalised trace).
///
/// # Errors
/// A result that depends on rows `[n, N)`, is not canonical, or differs from the reference.
pub fn coset_lde_in_place_garbage_rows<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("coset_lde_in_place_garbage_rows");
    let shapes =
        [(1, 2, 1, 7), (1, 16, 3, 7), (2, 16, 2, 3), (8, 4, 3, 7), (16, 2, 5, P + 7), (64, 16, 1, 7), (8, 1, 3, 1)];
    for (n, blowup, m, shift) in shapes {
        let tail_len = (blowup - 1) * n * m;
        let high: Vec<u64> = (0..n * m).map(|i| [P, P + 1, u64::MAX, P + 7 + g.u64() % 1000][i % 4]).collect();
        for (trace_kind, host) in [("mixed", g.matrix(n * m)), ("high", high), ("all p", vec![P; n * m])] {
            let stale: Vec<u64> = host.iter().copied().cycle().take(tail_len).collect();
            let tails: [(&str, Vec<u64>); 5] = [
                ("all u64::MAX", vec![u64::MAX; tail_len]),
                ("all p", vec![P; tail_len]),
                ("uniform u64", (0..tail_len).map(|_| g.u64()).collect()),
                ("values >= p", (0..tail_len).map(|_| P + g.u64() % (u64::MAX - P + 1)).collect()),
                ("stale copies of the trace", stale),
            ];
            for (tail_kind, tail) in &tails {
                let kind = format!("{tail_kind} (trace {trace_kind})");
                check_lde_in_place(backend, (&host, tail, &kind), (n, m, blowup, shift))?;
            }
        }
    }
    Ok(())
}

/// In place on larger domains, where NTT implementations change strategy: `n` from 128 to 2048
/// with blowups 2 and 4 (`N` up to 4096), rows `[n, N)` random.
///
/// # Errors
/// The first LDE that differs.
pub fn coset_lde_in_place_larger_domains<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("coset_lde_in_place_larger_domains");
    for (n, blowup, m) in [(128, 4, 3), (256, 2, 2), (1024, 4, 1), (2048, 2, 1)] {
        let (host, tail) = (g.matrix(n * m), g.matrix((blowup - 1) * n * m));
        check_lde_in_place(backend, (&host, &tail, "random"), (n, m, blowup, 7))?;
    }
    Ok(())
}

/// In place, the LDE needs no buffer of the trace's size: during the call the tracker's peak rises
/// above the buffer by at most the twiddle tables the memory model counts
/// ([`LdeTwiddles::bytes_for`]), and they are freed on return. The shapes are ones whose trace is
/// at least twice those tables, so a trace-sized temporary cannot hide in the bound.
///
/// # Errors
/// More memory at peak than the tables, memory left allocated, or a wrong LDE.
pub fn coset_lde_in_place_allocates_only_its_tables<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("coset_lde_in_place_allocates_only_its_tables");
    for (n, blowup, m) in [(64, 2, 32), (256, 4, 24), (32, 16, 40), (1024, 2, 8)] {
        let what = format!("coset_lde_in_place n = {n}, m = {m}, blowup {blowup}");
        let params = LdeParams::new(MatrixShape::new(n, m).ctx(&what)?, blowup, 7).ctx(&what)?;
        let tables = LdeTwiddles::bytes_for(params.log_trace_rows(), params.log_blowup());
        let trace_bytes = n * m * 8;
        ensure!(trace_bytes >= 2 * tables, "{what}: a {trace_bytes} B trace would hide beside {tables} B of tables");
        let host = g.matrix(n * blowup * m);
        let mut buf = backend.upload(&host).ctx(format_args!("{what}: upload"))?;
        backend.synchronize().ctx(format_args!("{what}: synchronize"))?;
        let live = backend.memory().live;
        backend.tracker().reset_peak();
        backend.coset_lde_in_place(&mut buf, &params).ctx(&what)?;
        backend.synchronize().ctx(format_args!("{what}: synchronize"))?;
        let extra = backend.memory().peak.saturating_sub(live);
        ensure!(
            extra <= tables,
            "{what}: the tracker's peak rose {extra} B above the buffer during the call, more than the {tables} B of \
             twiddle tables the memory model counts (the trace is {trace_bytes} B)"
        );
        ensure_live(backend, live, format_args!("{what}: tables not freed"))?;
        let got = backend.download_vec(&buf).ctx(format_args!("{what}: download"))?;
        ensure_words_eq(&what, &reference::coset_lde(&host[..n * m], n, m, blowup, 7), &got)?;
    }
    Ok(())
}

/// From host memory: [`Backend::coset_lde_from_host`] into an `N x m` buffer pre-filled with
/// garbage (random `u64`s, values `>= p` included, over all `N` rows: nothing of it may survive),
/// from an ordinary `Vec` and from the backend's own host memory ([`Backend::alloc_host`],
/// page-locked on CUDA, where a backend may overlap the upload with the extension). Shapes: `n = 1`,
/// one column, fewer than 8 columns, column counts that are not multiples of 8 (8 is a typical
/// GPU tile width, so 9, 13, 17 and 23 leave partial tiles), 8, 16 and 24, blowups 1 to 8, traces
/// with values `>= p`. Then the refusals: a trace or a buffer of the wrong length is a
/// [`Error::LengthMismatch`] before anything moves (the buffer keeps its contents).
///
/// # Errors
/// A result that differs from the reference, a non-canonical value, memory left allocated, or a
/// refusal missing or wrong.
pub fn coset_lde_from_host<B: Backend>(backend: &B) -> Outcome {
    let shapes = [
        (1, 1, 1, 7),
        (1, 4, 9, 3),
        (2, 2, 3, 7),
        (4, 1, 5, P + 7),
        (8, 4, 7, 7),
        (16, 2, 8, 7),
        (32, 2, 13, P - 1),
        (64, 8, 17, 7),
        (128, 2, 16, 7),
        (256, 4, 23, 7),
        (512, 2, 24, 3),
    ];
    let mut g = Gen::new("coset_lde_from_host");
    for_each_host_trace(backend, &mut g, "coset_lde_from_host", &shapes, |g, what, params, trace, expected| {
        let len = params.lde_shape().len();
        let garbage: Vec<u64> =
            (0..len).map(|i| if i % 3 == 0 { P + g.u64() % (u64::MAX - P + 1) } else { g.u64() }).collect();
        let mut buf = backend.upload(&garbage).ctx(format_args!("{what}: upload the garbage"))?;
        let live = backend.memory().live;
        backend.coset_lde_from_host(&mut buf, trace, params).ctx(what)?;
        ensure!(buf.len() == len, "{what}: the buffer holds {} elements afterwards, expected {len}", buf.len());
        let got = backend.download_vec(&buf).ctx(format_args!("{what}: download"))?;
        ensure_live(backend, live, what)?;
        if let Some(i) = got.iter().position(|&x| x >= P) {
            return Err(crate::Failure(format!(
                "{what}: output element {i} = {:#018x} is not canonical (>= p)",
                got[i]
            )));
        }
        ensure_words_eq(what, expected, &got)
    })?;
    host_trace_refusals(backend, &mut g, "coset_lde_from_host", |buf, trace, params| {
        backend.coset_lde_from_host(buf, trace, params)
    })
}

/// [`Backend::coset_lde_from_host_and_download`]: the buffer holds the LDE, as
/// [`Backend::coset_lde_from_host`] defines it, and so does the download, even though the buffer
/// is transposed in place and overwritten with garbage right after the call (work a backend must
/// order behind a download that may still be reading). Shapes as in [`coset_lde_from_host`], from
/// an ordinary `Vec` and from [`Backend::alloc_host`] memory; then the same refusals, before
/// anything moves.
///
/// # Errors
/// A buffer or a download that differs from the reference, a download that saw later work, memory
/// left allocated, or a refusal missing or wrong.
pub fn coset_lde_from_host_and_download<B: Backend>(backend: &B) -> Outcome {
    let shapes = [
        (1, 1, 1, 7),
        (2, 2, 3, 7),
        (4, 1, 5, P + 7),
        (16, 2, 8, 7),
        (32, 2, 13, P - 1),
        (64, 8, 17, 7),
        (256, 4, 23, 7),
    ];
    let name = "coset_lde_from_host_and_download";
    let mut g = Gen::new(name);
    for_each_host_trace(backend, &mut g, name, &shapes, |g, what, params, trace, expected| {
        let (len, lde_shape) = (params.lde_shape().len(), params.lde_shape());
        let mut buf = backend.upload(&g.matrix(len)).ctx(format_args!("{what}: upload the garbage"))?;
        let live = backend.memory().live;
        let pending = backend.coset_lde_from_host_and_download(&mut buf, trace, params).ctx(what)?;
        // Work behind the download: it must not reach the copy.
        backend
            .transpose_in_place(&mut buf, lde_shape, backend_api::DEFAULT_SCRATCH_CAP)
            .ctx(format_args!("{what}: transpose after the call"))?;
        let columns = backend.download_vec(&buf).ctx(format_args!("{what}: download the buffer"))?;
        ensure_words_eq(
            format!("{what}: the buffer, transposed"),
            &reference::transpose(expected, lde_shape.rows(), lde_shape.cols()),
            &columns,
        )?;
        let overwrite = g.matrix(len);
        backend.write(&mut buf, 0, &overwrite).ctx(format_args!("{what}: overwrite after the call"))?;
        let copy = pending.wait().ctx(format_args!("{what}: wait for the download"))?;
        ensure!(copy.len() == len, "{what}: the download holds {} elements, expected {len}", copy.len());
        ensure_words_eq(format!("{what}: the download"), expected, &copy[..])?;
        ensure_words_eq(
            format!("{what}: the buffer after the overwrite"),
            &overwrite,
            &backend.download_vec(&buf).ctx("download")?,
        )?;
        drop(copy);
        ensure_live(backend, live, what)
    })?;
    host_trace_refusals(backend, &mut g, name, |buf, trace, params| {
        backend.coset_lde_from_host_and_download(buf, trace, params).map(drop)
    })
}

/// Runs `check` on each `(n, blowup, m, shift)` of `shapes` with a random `n x m` trace, a quarter
/// of its values `>= p`, and its reference LDE, once from an ordinary `Vec` and once from
/// [`Backend::alloc_host`] memory (the two routes a from-host upload may take).
fn for_each_host_trace<B: Backend>(
    backend: &B,
    g: &mut Gen,
    name: &str,
    shapes: &[(usize, usize, usize, u64)],
    mut check: impl FnMut(&mut Gen, &str, &LdeParams, &[u64], &[u64]) -> Outcome,
) -> Outcome {
    for &(n, blowup, m, shift) in shapes {
        let params = LdeParams::new(MatrixShape::new(n, m).ctx("shape")?, blowup, shift).ctx("params")?;
        let host: Vec<u64> =
            (0..n * m).map(|i| if i % 4 == 1 { P + g.u64() % (u64::MAX - P + 1) } else { g.u64() }).collect();
        let expected = reference::coset_lde(&host, n, m, blowup, shift);
        let mut pinned = backend.alloc_host(n * m).ctx("alloc_host")?;
        pinned.copy_from_slice(&host);
        for (source, trace) in [("a Vec", &host[..]), ("alloc_host memory", &pinned[..])] {
            let what = format!("{name} n = {n}, m = {m}, blowup {blowup}, shift {shift:#x}, from {source}");
            check(g, &what, &params, trace, &expected)?;
        }
    }
    Ok(())
}

/// The refusals of an LDE from a host trace: 8 x 3 at blowup 2 is a 24-element trace and a
/// 48-element buffer, and every other length of either is [`Error::LengthMismatch`], naming the
/// expected and the given length, before anything moves (the buffer keeps its contents) or stays
/// allocated.
fn host_trace_refusals<B: Backend>(
    backend: &B,
    g: &mut Gen,
    name: &str,
    call: impl Fn(&mut B::Buffer, &[u64], &LdeParams) -> backend_api::Result<()>,
) -> Outcome {
    let params = LdeParams::new(MatrixShape::new(8, 3).ctx("shape")?, 2, 7).ctx("params")?;
    let baseline = backend.memory().live;
    for (trace_len, buf_len, expected, actual) in
        [(23, 48, 24, 23), (25, 48, 24, 25), (48, 48, 24, 48), (24, 47, 48, 47), (24, 24, 48, 24), (24, 96, 48, 96)]
    {
        let what = format!("{name} of a {trace_len}-element trace into a {buf_len}-element buffer");
        let before = g.matrix(buf_len);
        let mut buf = backend.upload(&before).ctx("upload")?;
        let live = backend.memory().live;
        let err = expect_error(call(&mut buf, &g.matrix(trace_len), &params), &what, |e| {
            matches!(e, Error::LengthMismatch { .. })
        })?;
        ensure!(
            matches!(err, Error::LengthMismatch { expected: e, actual: a, .. } if e == expected && a == actual),
            "{what}: the error names other lengths than {expected} expected, {actual} given: {err}"
        );
        ensure_live(backend, live, &what)?;
        ensure_words_eq(
            format!("{what}: the buffer after the refusal"),
            &before,
            &backend.download_vec(&buf).ctx("download")?,
        )?;
    }
    ensure_live(backend, baseline, format_args!("{name} refusals"))
}

/// Every `n` in `1..=64` and blowup in `1..=16` (powers of two), 1, 3 (one ext3 column) and 5
/// columns, default shift 7; inputs include non-canonical values.
///
/// # Errors
/// The first LDE that differs.
pub fn coset_lde_small_domains<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("coset_lde_small_domains");
    for n in TRACE_ROWS {
        for blowup in BLOWUPS {
            for m in [1, 3, 5] {
                check_lde(backend, &g.matrix(n * m), n, m, blowup, 7)?;
            }
        }
    }
    Ok(())
}

/// Shifts 1, 3, `p + 7` (non-canonical, meaning 7), `p - 1` and a random one, over every `n` and
/// blowup of the small grid, 2 columns.
///
/// # Errors
/// The first LDE that differs.
pub fn coset_lde_shifts<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("coset_lde_shifts");
    let random_shift = 1 + g.u64() % (P - 1);
    for shift in [1, 3, P + 7, P - 1, random_shift] {
        for n in TRACE_ROWS {
            for blowup in BLOWUPS {
                check_lde(backend, &g.matrix(n * 2), n, 2, blowup, shift)?;
            }
        }
    }
    // p + 7 and 7 are the same shift: the same output, bit for bit.
    let host = g.matrix(16 * 3);
    let params = |s| LdeParams::new(MatrixShape::new(16, 3).expect("shape"), 4, s);
    let trace = backend.upload(&host).ctx("upload")?;
    let a = backend.coset_lde(&trace, &params(7).ctx("params")?).ctx("shift 7")?;
    let b = backend.coset_lde(&trace, &params(P + 7).ctx("params")?).ctx("shift p + 7")?;
    ensure_words_eq(
        "coset_lde with shift p + 7 vs 7",
        &backend.download_vec(&a).ctx("download")?,
        &backend.download_vec(&b).ctx("download")?,
    )
}

/// Larger domains, where NTT implementations change strategy (shared-memory tiles, several
/// kernel passes): `n` from 128 to 2048 with blowups 2 and 4 (`N` up to 4096).
///
/// # Errors
/// The first LDE that differs.
pub fn coset_lde_larger_domains<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("coset_lde_larger_domains");
    for (n, blowup, m) in [(128, 4, 3), (256, 2, 2), (512, 4, 1), (1024, 4, 1), (2048, 2, 1)] {
        check_lde(backend, &g.matrix(n * m), n, m, blowup, 7)?;
    }
    Ok(())
}

/// Traces made only of `p`, `p + 1`, `u64::MAX` and other values `>= p` (and all-`p`, which is
/// zero) give canonical outputs equal to the reference.
///
/// # Errors
/// A non-canonical output value or a difference from the reference.
pub fn coset_lde_canonical_output<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("coset_lde_canonical_output");
    for (n, blowup, m) in [(1, 1, 1), (1, 8, 3), (4, 1, 2), (8, 4, 3), (32, 2, 2)] {
        let high: Vec<u64> = (0..n * m).map(|i| [P, P + 1, u64::MAX, P + 7 + g.u64() % 1000][i % 4]).collect();
        check_lde(backend, &high, n, m, blowup, 7)?;
        check_lde(backend, &vec![P; n * m], n, m, blowup, 7)?;
        check_lde(backend, &vec![u64::MAX; n * m], n, m, blowup, 3)?;
    }
    Ok(())
}

/// With blowup 1 and shift 1 the LDE is the identity after canonicalisation (CONVENTIONS.md).
///
/// # Errors
/// An output that is not the canonicalised input.
pub fn coset_lde_identity<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("coset_lde_identity");
    for (n, m) in [(1, 1), (1, 4), (2, 3), (16, 1), (64, 5)] {
        let host = g.matrix(n * m);
        for shift in [1, P + 1] {
            let what = format!("coset_lde identity n = {n}, m = {m}, shift {shift:#x}");
            let params = LdeParams::new(MatrixShape::new(n, m).ctx(&what)?, 1, shift).ctx(&what)?;
            let trace = backend.upload(&host).ctx("upload")?;
            let lde = backend.coset_lde(&trace, &params).ctx(&what)?;
            let expected: Vec<u64> = host.iter().map(|&x| reference::canon(x)).collect();
            ensure_words_eq(&what, &expected, &backend.download_vec(&lde).ctx("download")?)?;
        }
    }
    Ok(())
}

/// Invalid parameters are rejected by [`LdeParams::new`] (row count or blowup not a power of two,
/// `N > 2^32`, shift 0 or `p`), and the backend rejects a trace buffer that does not hold
/// `params.trace` (and, in place, a buffer that does not hold `params.lde_shape()`) with
/// [`Error::LengthMismatch`], allocating nothing.
///
/// # Errors
/// Parameters accepted, a call that succeeds, or the wrong error.
pub fn coset_lde_errors<B: Backend>(backend: &B) -> Outcome {
    let shape = |r, c| MatrixShape::new(r, c).ctx("shape");
    let invalid_shape = |e: &Error| matches!(e, Error::InvalidShape(_));
    let invalid_arg = |e: &Error| matches!(e, Error::InvalidArgument(_));
    expect_error(LdeParams::new(shape(3, 2)?, 2, 7), "3 trace rows", invalid_shape)?;
    expect_error(LdeParams::new(shape(12, 1)?, 2, 7), "12 trace rows", invalid_shape)?;
    expect_error(LdeParams::new(shape(4, 2)?, 3, 7), "blowup 3", invalid_shape)?;
    expect_error(LdeParams::new(shape(4, 2)?, 0, 7), "blowup 0", invalid_shape)?;
    expect_error(LdeParams::new(shape(4, 2)?, 6, 7), "blowup 6", invalid_shape)?;
    expect_error(LdeParams::new(shape(1 << 30, 1)?, 8, 7), "N = 2^33", invalid_shape)?;
    expect_error(LdeParams::new(shape(1 << 32, 1)?, 2, 7), "N = 2^33 from 2^32 rows", invalid_shape)?;
    expect_error(LdeParams::new(shape(1, 1)?, 1 << 33, 7), "N = 2^33 from the blowup", invalid_shape)?;
    expect_error(LdeParams::new(shape(4, 1)?, 2, 0), "shift 0", invalid_arg)?;
    expect_error(LdeParams::new(shape(4, 1)?, 2, P), "shift p", invalid_arg)?;
    // The largest domain is accepted (nothing is allocated by constructing parameters).
    LdeParams::new(shape(1 << 31, 1)?, 2, 7).ctx("N = 2^32")?;

    let mut g = Gen::new("coset_lde_errors");
    let baseline = backend.memory().live;
    for (len, n, m) in [(16, 8, 3), (24, 8, 2), (1, 2, 1), (32, 16, 1)] {
        let trace = backend.upload(&g.matrix(len)).ctx("upload")?;
        let params = LdeParams::new(shape(n, m)?, 4, 7).ctx("params")?;
        let what = format!("coset_lde of a {len}-element buffer as {n} x {m}");
        let before = backend.memory().live;
        expect_error(backend.coset_lde(&trace, &params), &what, |e| matches!(e, Error::LengthMismatch { .. }))?;
        ensure_live(backend, before, &what)?;
    }
    // In place the buffer holds the whole LDE: 8 x 3 at blowup 4 is 96 elements.
    // A refused call runs nothing: the buffer keeps its contents.
    for (len, n, m) in [(24, 8, 3), (95, 8, 3), (97, 8, 3), (192, 8, 3), (63, 16, 1), (16, 16, 1), (8, 1, 1)] {
        let host = g.matrix(len);
        let mut buf = backend.upload(&host).ctx("upload")?;
        let params = LdeParams::new(shape(n, m)?, 4, 7).ctx("params")?;
        let what = format!("coset_lde_in_place in a {len}-element buffer as {n} x {m}, blowup 4");
        let before = backend.memory().live;
        let err = expect_error(backend.coset_lde_in_place(&mut buf, &params), &what, |e| {
            matches!(e, Error::LengthMismatch { .. })
        })?;
        let expected = n * 4 * m;
        ensure!(
            matches!(err, Error::LengthMismatch { expected: e, actual, .. } if e == expected && actual == len),
            "{what}: the error names other lengths than {expected} expected, {len} given: {err}"
        );
        ensure_live(backend, before, &what)?;
        ensure_words_eq(
            format!("{what}: the buffer after the refusal"),
            &host,
            &backend.download_vec(&buf).ctx("download")?,
        )?;
    }
    ensure_live(backend, baseline, "coset_lde_errors")
}
