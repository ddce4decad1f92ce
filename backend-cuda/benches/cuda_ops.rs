//! Release bench of every CUDA operation at a shape given by flags (one warm-up, then the median
//! of `--reps`), each quoted as a ratio to a device-to-device copy of the same bytes measured in
//! the same run. Each run is timed on the host from an idle device to the device's end of the
//! work (`synchronize` before and after), so a figure includes the launches' host time.
//!
//! ```text
//! cargo bench -p backend-cuda --bench cuda_ops -- --log-rows 22 --cols 316 --blowup 2 --reps 5
//!     [--ops copy,transpose,leaves,leaves+transpose,merkle,lde,host-lde] [--upload-groups 1,2,4,8]
//! ```
//!
//! The backend opens with `CudaOptions::from_env()` (`CUDA_UPLOAD_GROUPS`,
//! `STARK_COMMIT_KERNEL_CACHE`).
//!
//! `--log-rows` is log2 of the LDE's rows `N` (the matrix the transpose and the leaves work on);
//! the LDE starts from a trace of `N / blowup` rows. The LDE is timed three ways, back to back:
//! in place on a buffer whose first rows hold the trace (the route of a host trace; the trace is
//! copied in untimed before each run), `coset_lde` from a trace buffer that stays (allocate, then
//! the first inverse pass reads the trace where it is), and `coset_lde_owned` (the route of a
//! commit's device trace: the inverse runs in the trace's buffer, a fresh copy of which is made
//! untimed before each run). `host-lde` times a trace in page-locked host memory reaching the
//! LDE: the bare host-to-device write of its bytes, the write followed by the in-place LDE, and
//! `coset_lde_from_host` for each `--upload-groups` count (1 is the write then the LDE; more
//! overlap the column groups' copies with the LDE). `leaves+transpose` times
//! `hash_leaves_then_transpose` (one tree over every column, the leaves hashed beside the
//! transpose's block pass) for each hash. Whole commits are timed with the pipeline, by prover's
//! `commit` bench (`cargo bench -p prover --features cuda --bench commit`). Inputs are random
//! (never zeros: zeros hide unwritten outputs and can run faster than real data).

use std::time::Instant;

use backend_api::{
    Backend, CopyRange, DEFAULT_SCRATCH_CAP, HashKind, LdeParams, LeafJob, LeafLayout, LeafSpec, MatrixShape, Result,
    TreeShape,
};
use backend_cuda::{CudaBackend, CudaBuffer, CudaOptions};

struct Args {
    log_rows: u32,
    cols: usize,
    blowup: usize,
    reps: usize,
    ops: Vec<String>,
    upload_groups: Vec<u32>,
}

fn parse_args() -> std::result::Result<Args, String> {
    let mut a = Args {
        log_rows: 22,
        cols: 316,
        blowup: 2,
        reps: 5,
        ops: ["copy", "transpose", "leaves", "leaves+transpose", "merkle", "lde", "host-lde"]
            .map(String::from)
            .to_vec(),
        // Empty: the value of the backend's options (CudaOptions::from_env).
        upload_groups: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--bench" {
            continue; // passed by `cargo bench`
        }
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let num = |v: String| v.parse::<usize>().map_err(|e| format!("{flag} {v}: {e}"));
        match flag.as_str() {
            "--log-rows" => a.log_rows = num(value()?)? as u32,
            "--cols" => a.cols = num(value()?)?,
            "--blowup" => a.blowup = num(value()?)?,
            "--reps" => a.reps = num(value()?)?.max(1),
            "--ops" => a.ops = value()?.split(',').map(String::from).collect(),
            "--upload-groups" => {
                a.upload_groups = value()?
                    .split(',')
                    .map(|g| g.parse::<u32>().map_err(|e| format!("--upload-groups {g}: {e}")))
                    .collect::<std::result::Result<_, _>>()?
            }
            other => return Err(format!("unknown flag {other}")),
        }
    }
    if !a.blowup.is_power_of_two() || a.blowup > 1 << a.log_rows {
        return Err(format!("--blowup {} must be a power of two at most 2^{}", a.blowup, a.log_rows));
    }
    Ok(a)
}

/// The flag's values, or the options' value `d` when the flag was not given.
fn or_base<T: Copy>(v: &[T], d: T) -> Vec<T> {
    if v.is_empty() { vec![d] } else { v.to_vec() }
}

/// Milliseconds from an idle device to the end of the work `f` queues.
fn timed(b: &CudaBackend, f: impl FnOnce() -> Result<()>) -> Result<f64> {
    b.synchronize()?;
    let t = Instant::now();
    f()?;
    b.synchronize()?;
    Ok(t.elapsed().as_secs_f64() * 1e3)
}

/// Median, min and max of `reps` timed runs of `f` ([`timed`]), after one untimed warm-up.
fn time(b: &CudaBackend, reps: usize, mut f: impl FnMut() -> Result<()>) -> Result<(f64, f64, f64)> {
    f()?;
    b.synchronize()?;
    let mut v = Vec::with_capacity(reps);
    for _ in 0..reps {
        v.push(timed(b, &mut f)?);
    }
    v.sort_by(|a, b| a.total_cmp(b));
    Ok((v[v.len() / 2], v[0], v[v.len() - 1]))
}

/// As [`time`] for `f` on `state`, with `setup` queued on it untimed before each run (the
/// in-place LDE consumes its input).
fn time_with_setup<S>(
    b: &CudaBackend,
    reps: usize,
    state: &mut S,
    mut setup: impl FnMut(&mut S) -> Result<()>,
    mut f: impl FnMut(&mut S) -> Result<()>,
) -> Result<(f64, f64, f64)> {
    setup(state)?;
    f(state)?;
    b.synchronize()?;
    let mut v = Vec::with_capacity(reps);
    for _ in 0..reps {
        setup(state)?;
        v.push(timed(b, || f(state))?);
    }
    v.sort_by(|a, b| a.total_cmp(b));
    Ok((v[v.len() / 2], v[0], v[v.len() - 1]))
}

/// Random words from a fast seeded generator, filled on all host threads.
fn random_words(len: usize, seed: u64) -> Vec<u64> {
    let mut v = vec![0u64; len];
    let threads = std::thread::available_parallelism().map_or(4, |n| n.get());
    let chunk = len.div_ceil(threads).max(1);
    std::thread::scope(|s| {
        for (t, part) in v.chunks_mut(chunk).enumerate() {
            s.spawn(move || {
                let mut x = seed ^ (t as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                for w in part {
                    // splitmix64
                    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
                    let mut z = x;
                    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                    *w = z ^ (z >> 31);
                }
            });
        }
    });
    v
}

struct Report {
    copy_ms: f64,
    copy_bytes: usize,
}

impl Report {
    fn line(&self, op: &str, shape: &str, bytes: usize, t: (f64, f64, f64)) {
        // The ratio is against a copy of the same bytes: the copy's time scaled to `bytes`.
        let copy_same = self.copy_ms * bytes as f64 / self.copy_bytes as f64;
        println!(
            "{op:<34} {shape:<22} median {:>9.3} ms  (min {:>9.3}, max {:>9.3})  {:>6.2}x D2D copy  {:>8.1} GB/s",
            t.0,
            t.1,
            t.2,
            t.0 / copy_same,
            bytes as f64 / t.0 / 1e6
        );
    }
}

fn run(a: &Args) -> std::result::Result<(), Box<dyn std::error::Error>> {
    // The environment's options, varied below by `--upload-groups`.
    let b = CudaBackend::open(0, CudaOptions::from_env()?)?;
    let info = b.info();
    let rows = 1usize << a.log_rows;
    let shape = MatrixShape::new(rows, a.cols)?;
    let trace_shape = MatrixShape::new(rows / a.blowup, a.cols)?;
    println!(
        "device: {} (sm_{}{}), {:.1} GiB total, {:.1} GiB free; shape {} ({:.2} GB), trace {}, blowup {}, reps {}",
        info.device,
        b.compute_capability().0,
        b.compute_capability().1,
        info.total_memory as f64 / (1u64 << 30) as f64,
        info.free_memory as f64 / (1u64 << 30) as f64,
        shape,
        shape.bytes() as f64 / 1e9,
        trace_shape,
        a.blowup,
        a.reps
    );
    let t = Instant::now();
    let host = random_words(shape.len(), 1);
    let mut matrix = b.upload(&host)?;
    drop(host);
    b.synchronize()?;
    println!("(generated and uploaded the matrix in {:.2} s)", t.elapsed().as_secs_f64());

    // The yardstick: a device-to-device copy of the whole matrix on the copy engine.
    let copy_ms = {
        let mut dst = b.alloc(shape.len())?;
        // One copy this long goes to the copy engine.
        let whole = [CopyRange::new(0, 0, shape.len())];
        let t = time(&b, a.reps, || b.batched_copy(&matrix, &mut dst, &whole))?;
        println!(
            "{:<34} {:<22} median {:>9.3} ms  (min {:>9.3}, max {:>9.3})  {:>8.1} GB/s read+write",
            "d2d copy (copy engine)",
            shape.to_string(),
            t.0,
            t.1,
            t.2,
            2.0 * shape.bytes() as f64 / t.0 / 1e6
        );
        t.0
    };
    let r = Report { copy_ms, copy_bytes: shape.bytes() };
    let want = |op: &str| a.ops.iter().any(|o| o == op || o == "all");

    if want("transpose") {
        let t = time(&b, a.reps, || b.transpose_in_place(&mut matrix, shape, DEFAULT_SCRATCH_CAP))?;
        r.line("transpose in place", &shape.to_string(), shape.bytes(), t);
    }

    let tree = TreeShape::new(rows)?;
    let mut nodes: Option<CudaBuffer> = None;
    if want("leaves") {
        let mut out = b.alloc(tree.words())?;
        for hash in HashKind::ALL {
            for layout in LeafLayout::ALL.into_iter().filter(|&l| hash.supports(l)) {
                let spec = LeafSpec::new(hash, layout, 0..a.cols)?;
                let first = if layout == LeafLayout::Rows { tree.first_leaf() } else { 0 };
                let t = time(&b, a.reps, || b.hash_leaves_into(&matrix, shape, &spec, &mut out, first))?;
                r.line(&format!("leaves {hash} {layout}"), &shape.to_string(), shape.bytes(), t);
            }
        }
        nodes = Some(out);
    }
    if want("leaves+transpose") {
        // The commit's step from the row-major LDE to its leaves and its column-major copy, the
        // leaves hashed beside the transpose's block pass.
        let mut out = match nodes.take() {
            Some(n) => n,
            None => b.alloc(tree.words())?,
        };
        for hash in HashKind::ALL {
            let spec = LeafSpec::new(hash, LeafLayout::Rows, 0..a.cols)?;
            let t = time(&b, a.reps, || {
                let mut jobs = [LeafJob { spec: &spec, out: &mut out, out_digest: tree.first_leaf() }];
                b.hash_leaves_then_transpose(&mut matrix, shape, &mut jobs, DEFAULT_SCRATCH_CAP)
            })?;
            r.line(&format!("leaves {hash} + transpose"), &shape.to_string(), shape.bytes(), t);
        }
        nodes = Some(out);
    }
    if want("merkle") {
        let mut nodes = match nodes.take() {
            Some(n) => n,
            None => b.upload(&random_words(tree.words(), 2))?,
        };
        for hash in HashKind::ALL {
            let t = time(&b, a.reps, || b.merkle_tree_in_place(&mut nodes, tree, hash))?;
            r.line(&format!("merkle {hash} over {rows} leaves"), &format!("{} nodes", tree.nodes()), tree.bytes(), t);
        }
    }
    drop(nodes);
    drop(matrix);

    if want("lde") {
        let trace = b.upload(&random_words(trace_shape.len(), 3))?;
        let params = LdeParams::new(trace_shape, a.blowup, backend_api::field::DEFAULT_SHIFT)?;
        // The in-place LDE's buffer; each run first gets the trace copied into its first n rows
        // (untimed), as a host trace's upload puts it there.
        let mut lde = b.alloc(shape.len())?;
        let fill = [CopyRange::new(0, 0, trace_shape.len())];
        let what = format!("{} -> {}", trace_shape, shape);
        // The three routes back to back, so that their ratios are of one run.
        let t = time_with_setup(
            &b,
            a.reps,
            &mut lde,
            |lde| b.batched_copy(&trace, lde, &fill),
            |lde| b.coset_lde_in_place(lde, &params),
        )?;
        r.line("coset lde in place", &what, shape.bytes(), t);
        let t = time(&b, a.reps, || b.coset_lde(&trace, &params).map(drop))?;
        r.line("coset lde from a trace buffer", &what, shape.bytes(), t);
        // The owned route consumes its trace: each run gets a fresh copy, untimed.
        let t = time_with_setup(
            &b,
            a.reps,
            &mut None,
            |t| {
                let mut fresh = b.alloc(trace_shape.len())?;
                b.batched_copy(&trace, &mut fresh, &fill)?;
                *t = Some(fresh);
                Ok(())
            },
            |t| b.coset_lde_owned(t.take().expect("a fresh trace"), &params).map(drop),
        )?;
        r.line("coset lde of an owned trace", &what, shape.bytes(), t);
    }

    if want("host-lde") {
        let params = LdeParams::new(trace_shape, a.blowup, backend_api::field::DEFAULT_SHIFT)?;
        let mut host = b.alloc_host(trace_shape.len())?;
        host.copy_from_slice(&random_words(trace_shape.len(), 4));
        let mut lde = b.alloc(shape.len())?;
        let what = format!("{} -> {}", trace_shape, shape);
        let t = time(&b, a.reps, || b.write(&mut lde, 0, &host))?;
        r.line("h2d write of the trace (page-locked)", &trace_shape.to_string(), trace_shape.bytes(), t);
        let t = time(&b, a.reps, || {
            b.write(&mut lde, 0, &host)?;
            b.coset_lde_in_place(&mut lde, &params)
        })?;
        r.line("write, then coset lde in place", &what, shape.bytes(), t);
        for groups in or_base(&a.upload_groups, b.options().upload_groups) {
            let bg = b.with_options(CudaOptions { upload_groups: groups, ..b.options() })?;
            let t = time(&bg, a.reps, || bg.coset_lde_from_host(&mut lde, &host, &params))?;
            r.line(&format!("coset lde from host, {groups} groups"), &what, shape.bytes(), t);
        }
    }

    let m = b.memory();
    println!("tracker: live {} B, peak {} B, {} allocations", m.live, m.peak, m.allocations);
    Ok(())
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("cuda_ops: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(&args) {
        eprintln!("cuda_ops: {e}");
        std::process::exit(1);
    }
}
