//! Release bench of every CUDA operation at a shape given by flags, timed with CUDA events on the
//! backend's stream (one warm-up, then the median of `--reps`), each quoted as a ratio to a
//! device-to-device copy of the same bytes measured in the same run.
//!
//! ```text
//! cargo bench -p backend-cuda --bench cuda_ops -- --log-rows 22 --cols 316 --blowup 2 --reps 5
//!     [--ops copy,transpose,leaves,leaves+transpose,merkle,lde,host-lde] [--routes kernel,batched,unbatched]
//!     [--route-reps 2] [--ntt-stages 0,1] [--ntt-variants 32x8,16x8,32x4] [--ntt-lazy 1,0] [--ntt-pow2 1,0]
//!     [--upload-groups 1,2,4,8]
//!     [--ntt-lean 1,0]
//! ```
//!
//! The backend opens with `CudaOptions::from_env()` (`CUDA_TRANSPOSE_ROUTE`, `CUDA_NTT_*`); the
//! `--ntt-*` flags vary those options (`--ntt-stages 0` is the most shared memory allows), and
//! each one left out keeps the environment's value.
//!
//! `--log-rows` is log2 of the LDE's rows `N` (the matrix the transpose and the leaves work on);
//! the LDE starts from a trace of `N / blowup` rows. Each NTT configuration times the LDE three
//! ways, back to back: in place on a buffer whose first rows hold the trace (the route of a host
//! trace; the trace is copied in untimed before each run), `coset_lde` from a trace buffer that
//! stays (allocate, then the first inverse pass reads the trace where it is), and
//! `coset_lde_owned` (the route of a commit's device trace: the inverse runs in the trace's
//! buffer, a fresh copy of which is made untimed before each run). `host-lde` times a trace in page-locked host memory reaching the LDE:
//! the bare host-to-device write of its bytes, the write followed by the in-place LDE, and
//! `coset_lde_from_host` for each `--upload-groups` count (1 is the write then the LDE; more
//! overlap the column groups' copies with the LDE); events on the compute stream, which waits for
//! the copy stream, bracket each. `leaves+transpose` times `hash_leaves_then_transpose` (one tree
//! over every column) with the leaves fused into the transpose's block pass and without, back to
//! back, for each hash. Whole commits are timed with the pipeline,
//! by prover's `commit` bench (`cargo bench -p prover --features cuda --bench commit`). Inputs
//! are random (never zeros: zeros hide unwritten outputs and can run faster than real data).

use std::time::Instant;

use backend_api::{
    Backend, CopyRange, DEFAULT_SCRATCH_CAP, HashKind, LdeParams, LeafJob, LeafLayout, LeafSpec, MatrixShape, Result,
    TreeShape,
};
use backend_cuda::{CudaBackend, CudaBuffer, CudaOptions, NttKernel, TransposeRoute};

struct Args {
    log_rows: u32,
    cols: usize,
    blowup: usize,
    reps: usize,
    route_reps: usize,
    ops: Vec<String>,
    routes: Vec<TransposeRoute>,
    ntt_stages: Vec<Option<u32>>,
    ntt_variants: Vec<NttKernel>,
    ntt_lazy: Vec<bool>,
    ntt_pow2: Vec<bool>,
    upload_groups: Vec<u32>,
    ntt_lean: Vec<bool>,
}

fn parse_args() -> std::result::Result<Args, String> {
    let mut a = Args {
        log_rows: 22,
        cols: 316,
        blowup: 2,
        reps: 5,
        route_reps: 2,
        ops: ["copy", "transpose", "leaves", "leaves+transpose", "merkle", "lde", "host-lde"]
            .map(String::from)
            .to_vec(),
        routes: TransposeRoute::ALL.to_vec(),
        // Empty: the value of the backend's options (CudaOptions::from_env).
        ntt_stages: Vec::new(),
        ntt_variants: Vec::new(),
        ntt_lazy: Vec::new(),
        ntt_pow2: Vec::new(),
        upload_groups: Vec::new(),
        ntt_lean: Vec::new(),
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
            "--route-reps" => a.route_reps = num(value()?)?.max(1),
            "--ops" => a.ops = value()?.split(',').map(String::from).collect(),
            "--routes" => {
                a.routes = value()?
                    .split(',')
                    .map(|r| TransposeRoute::parse(r).map_err(|e| e.to_string()))
                    .collect::<std::result::Result<_, _>>()?
            }
            "--ntt-lazy" => a.ntt_lazy = value()?.split(',').map(|v| v != "0").collect(),
            "--ntt-pow2" => a.ntt_pow2 = value()?.split(',').map(|v| v != "0").collect(),
            "--upload-groups" => {
                a.upload_groups = value()?
                    .split(',')
                    .map(|g| g.parse::<u32>().map_err(|e| format!("--upload-groups {g}: {e}")))
                    .collect::<std::result::Result<_, _>>()?
            }
            "--ntt-lean" => a.ntt_lean = value()?.split(',').map(|v| v != "0").collect(),
            "--ntt-variants" => {
                // radix x columns per tile, e.g. 32x8,16x8,32x4
                a.ntt_variants = value()?
                    .split(',')
                    .map(|v| {
                        let (r, c) = v.split_once('x').ok_or_else(|| format!("--ntt-variants {v}: radix x columns"))?;
                        let (r, c) = (
                            r.parse::<u32>().map_err(|e| e.to_string())?,
                            c.parse::<u32>().map_err(|e| e.to_string())?,
                        );
                        NttKernel::from_radix_cols(r, c).map_err(|e| e.to_string())
                    })
                    .collect::<std::result::Result<_, String>>()?
            }
            "--ntt-stages" => {
                a.ntt_stages = value()?
                    .split(',')
                    .map(|s| s.parse::<u32>().map(|k| (k != 0).then_some(k)).map_err(|e| e.to_string()))
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

/// Median, min and max of `reps` timed runs of `f` (milliseconds of device time), after one
/// untimed warm-up.
fn time(b: &CudaBackend, reps: usize, mut f: impl FnMut() -> Result<()>) -> Result<(f64, f64, f64)> {
    f()?;
    b.synchronize()?;
    let mut v = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t0 = b.record_event()?;
        f()?;
        let t1 = b.record_event()?;
        v.push(t0.elapsed_ms(&t1)? as f64);
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
        let t0 = b.record_event()?;
        f(state)?;
        let t1 = b.record_event()?;
        v.push(t0.elapsed_ms(&t1)? as f64);
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
    // The environment's options (CUDA_TRANSPOSE_ROUTE, CUDA_NTT_*), varied below by the flags.
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
        let t = time(&b, a.reps, || b.copy_engine_copy(&matrix, &mut dst))?;
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
        {
            let mut dst = b.alloc(shape.len())?;
            let t = time(&b, a.reps, || b.transpose_out_of_place(&matrix, &mut dst, shape))?;
            r.line("transpose out of place (tile kernel)", &shape.to_string(), shape.bytes(), t);
        }
        for &route in &a.routes {
            let br = b.with_options(CudaOptions { transpose_route: route, ..b.options() })?;
            let reps = if route == TransposeRoute::Kernel { a.reps } else { a.route_reps };
            let t = time(&br, reps, || br.transpose_in_place(&mut matrix, shape, DEFAULT_SCRATCH_CAP))?;
            r.line(&format!("transpose in place, route {}", route.name()), &shape.to_string(), shape.bytes(), t);
        }
    }

    let tree = TreeShape::new(rows)?;
    let mut nodes: Option<CudaBuffer> = None;
    if want("leaves") {
        let mut out = b.alloc(tree.words())?;
        for hash in HashKind::ALL {
            for layout in LeafLayout::ALL {
                let spec = LeafSpec::new(hash, layout, 0..a.cols)?;
                let first = if layout == LeafLayout::Rows { tree.first_leaf() } else { 0 };
                let t = time(&b, a.reps, || b.hash_leaves_into(&matrix, shape, &spec, &mut out, first))?;
                r.line(&format!("leaves {hash} {layout}"), &shape.to_string(), shape.bytes(), t);
            }
        }
        nodes = Some(out);
    }
    if want("leaves+transpose") {
        // The commit's step from the row-major LDE to its leaves and its column-major copy, with
        // the leaves hashed beside the transpose's block pass (the default) and without (the
        // leaves, then the transpose), back to back.
        let mut out = match nodes.take() {
            Some(n) => n,
            None => b.alloc(tree.words())?,
        };
        for hash in HashKind::ALL {
            let spec = LeafSpec::new(hash, LeafLayout::Rows, 0..a.cols)?;
            for fused_leaves in [true, false] {
                let bf = b.with_options(CudaOptions { fused_leaves, ..b.options() })?;
                let t = time(&bf, a.reps, || {
                    let mut jobs = [LeafJob { spec: &spec, out: &mut out, out_digest: tree.first_leaf() }];
                    bf.hash_leaves_then_transpose(&mut matrix, shape, &mut jobs, DEFAULT_SCRATCH_CAP)
                })?;
                let how = if fused_leaves { "fused" } else { "unfused" };
                r.line(&format!("leaves {hash} + transpose, {how}"), &shape.to_string(), shape.bytes(), t);
            }
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
        let base = b.options();
        // Every combination asked for, each kernel form once: the flags a kernel ignores
        // (`CudaOptions::ntt_effective`) would time the same kernels again.
        let mut seen = Vec::new();
        for stages in or_base(&a.ntt_stages, base.ntt_stages) {
            for kernel in or_base(&a.ntt_variants, base.ntt_kernel) {
                for lazy in or_base(&a.ntt_lazy, base.ntt_lazy) {
                    for pow2 in or_base(&a.ntt_pow2, base.ntt_pow2) {
                        for lean in or_base(&a.ntt_lean, base.ntt_lean) {
                            let options = CudaOptions {
                                ntt_stages: stages,
                                ntt_kernel: kernel,
                                ntt_lazy: lazy,
                                ntt_pow2: pow2,
                                ntt_lean: lean,
                                ..b.options()
                            }
                            .ntt_effective();
                            if seen.contains(&options) {
                                continue;
                            }
                            seen.push(options.clone());
                            let form = (options.ntt_lazy, options.ntt_pow2, options.ntt_lean);
                            let bl = b.with_options(options)?;
                            let (radix, cols) = (kernel.radix(), kernel.cols());
                            let lazy_label = match form {
                                (true, true, _) => ", lazy, pow2",
                                (true, false, true) => ", lazy, lean",
                                (true, false, false) => ", lazy",
                                _ => "",
                            };
                            let config = match stages {
                                None => format!("radix {radix}, {cols} cols{lazy_label}"),
                                Some(k) => format!("{k} stages/pass, radix {radix}, {cols} cols{lazy_label}"),
                            };
                            let what = format!("{} -> {}", trace_shape, shape);
                            // The two routes back to back, so that their ratio is of one run.
                            let t = time_with_setup(
                                &bl,
                                a.reps,
                                &mut lde,
                                |lde| bl.batched_copy(&trace, lde, &fill),
                                |lde| bl.coset_lde_in_place(lde, &params),
                            )?;
                            r.line(&format!("coset lde in place ({config})"), &what, shape.bytes(), t);
                            let t = time(&bl, a.reps, || bl.coset_lde(&trace, &params).map(drop))?;
                            r.line(&format!("coset lde from a trace buffer ({config})"), &what, shape.bytes(), t);
                            // The owned route consumes its trace: each run gets a fresh copy, untimed.
                            let t = time_with_setup(
                                &bl,
                                a.reps,
                                &mut None,
                                |t| {
                                    let mut fresh = bl.alloc(trace_shape.len())?;
                                    bl.batched_copy(&trace, &mut fresh, &fill)?;
                                    *t = Some(fresh);
                                    Ok(())
                                },
                                |t| bl.coset_lde_owned(t.take().expect("a fresh trace"), &params).map(drop),
                            )?;
                            r.line(&format!("coset lde of an owned trace ({config})"), &what, shape.bytes(), t);
                        }
                    }
                }
            }
        }
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
