//! Per-operation timings of the wgpu backend at a chosen shape, each as a ratio to a
//! `copy_buffer_to_buffer` of the same bytes measured in the same run.
//!
//! ```sh
//! cargo run --release -p wgpu-probes --bin wgpu_bench -- --log-rows 21 --cols 316 --blowup 2 --iters 5
//! ```
//!
//! The trace is `2^log_rows x cols` random elements; the LDE (`N = 2^log_rows * blowup` rows)
//! is the matrix every other operation runs on. Each figure is the median of `iters` runs (after
//! one untimed warm-up run that also compiles the kernels) of two clocks: the wall time of
//! record, submit, wait for the queue; and, where the adapter has timestamp queries inside
//! encoders, the device time from timestamps the GPU writes at the start and end of every
//! command encoder the operation submits (`span`: first start to last end, idle gaps between
//! submissions included; `busy`: the sum over encoders), and the host time of record + submit
//! alone (`host`, before the wait). `--software` accepts a CPU adapter (llvmpipe);
//! `--max-segment-bytes` caps the segment size; `--scratch-cap` sets the transpose's scratch cap
//! in bytes (default 256 MiB); `--portable` keeps u32-pair arithmetic where the adapter has
//! `SHADER_INT64`; `--only NAME` runs the operations whose name contains NAME (`--only
//! coset_lde`: the LDE in place and through `coset_lde`; `--only host`: the trace written from
//! and read back into host memory).

use std::time::Instant;

use backend_api::{
    Backend, CopyRange, DEFAULT_SCRATCH_CAP, DeviceBuffer as _, HashKind, LdeParams, LeafLayout, LeafSpec, MatrixShape,
    TreeShape,
};
use backend_wgpu::{DeviceTime, WgpuBackend, WgpuOptions};

struct Args {
    log_rows: u32,
    cols: usize,
    blowup: usize,
    iters: usize,
    software: bool,
    max_segment_bytes: Option<u64>,
    only: Option<String>,
    scratch_cap: usize,
    portable: bool,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        log_rows: 16,
        cols: 316,
        blowup: 2,
        iters: 5,
        software: false,
        max_segment_bytes: None,
        only: None,
        scratch_cap: DEFAULT_SCRATCH_CAP,
        portable: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--log-rows" => a.log_rows = val()?.parse().map_err(|e| format!("--log-rows: {e}"))?,
            "--cols" => a.cols = val()?.parse().map_err(|e| format!("--cols: {e}"))?,
            "--blowup" => a.blowup = val()?.parse().map_err(|e| format!("--blowup: {e}"))?,
            "--iters" => a.iters = val()?.parse().map_err(|e| format!("--iters: {e}"))?,
            "--max-segment-bytes" => {
                a.max_segment_bytes = Some(val()?.parse().map_err(|e| format!("--max-segment-bytes: {e}"))?)
            }
            "--only" => a.only = Some(val()?),
            "--scratch-cap" => a.scratch_cap = val()?.parse().map_err(|e| format!("--scratch-cap: {e}"))?,
            "--software" => a.software = true,
            "--portable" => a.portable = true,
            other => return Err(format!("unknown flag {other}")),
        }
    }
    if a.iters == 0 {
        return Err("--iters must be at least 1".into());
    }
    Ok(a)
}

/// Random elements (splitmix64), generated on all cores.
fn random(len: usize, seed: u64) -> Vec<u64> {
    let mut v = vec![0u64; len];
    let threads = std::thread::available_parallelism().map_or(4, |n| n.get());
    let per = len.div_ceil(threads).max(1);
    std::thread::scope(|s| {
        for (k, chunk) in v.chunks_mut(per).enumerate() {
            s.spawn(move || {
                let mut x = seed ^ (k as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                for e in chunk {
                    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
                    let mut z = x;
                    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                    *e = z ^ (z >> 31);
                }
            });
        }
    });
    v
}

fn median(mut t: Vec<f64>) -> f64 {
    t.sort_by(|a, b| a.total_cmp(b));
    t[t.len() / 2]
}

/// Medians of one operation: wall ms, and device span / busy ms where the adapter times them.
#[derive(Clone, Copy)]
struct Timing {
    wall: f64,
    /// Record and submit only: the host's share of the wall time, before the wait.
    host: f64,
    device: Option<DeviceTime>,
}

/// Runs `f` once untimed, then `iters` times, each followed by a wait, under the device timer.
fn time(b: &WgpuBackend, iters: usize, mut f: impl FnMut()) -> Timing {
    f();
    b.synchronize().expect("synchronize");
    let mut walls = Vec::with_capacity(iters);
    let mut hosts = Vec::with_capacity(iters);
    let mut devices = Vec::with_capacity(iters);
    for _ in 0..iters {
        let device = b
            .time_device(|| {
                let t = Instant::now();
                f();
                hosts.push(t.elapsed().as_secs_f64() * 1e3);
                b.synchronize()?;
                walls.push(t.elapsed().as_secs_f64() * 1e3);
                Ok(())
            })
            .expect("timed run");
        devices.extend(device);
    }
    let device = (devices.len() == iters).then(|| DeviceTime {
        span_ms: median(devices.iter().map(|d| d.span_ms).collect()),
        busy_ms: median(devices.iter().map(|d| d.busy_ms).collect()),
        submissions: devices[0].submissions,
    });
    Timing { wall: median(walls), host: median(hosts), device }
}

fn main() {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("bench: {e}");
            std::process::exit(2);
        }
    };
    let b = match WgpuBackend::new(WgpuOptions {
        allow_software: args.software,
        max_segment_bytes: args.max_segment_bytes,
        portable_arithmetic: args.portable,
        ..WgpuOptions::default()
    }) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("bench: {e}");
            std::process::exit(1);
        }
    };
    let info = b.adapter_info();
    let n = 1usize << args.log_rows;
    let trace_shape = MatrixShape::new(n, args.cols).expect("trace shape");
    let params = LdeParams::new(trace_shape, args.blowup, 7).expect("LDE parameters");
    let lde_shape = params.lde_shape();
    let big_n = lde_shape.rows();
    let bytes = lde_shape.bytes();
    println!(
        "device: {} ({:?}, {:?}, driver {} {}); native u64 arithmetic {}; segment {} elements",
        info.name,
        info.device_type,
        info.backend,
        info.driver,
        info.driver_info,
        b.uses_int64(),
        b.segment_elems()
    );
    println!(
        "trace 2^{} x {} (blowup {}): LDE {} x {} = {bytes} B; {} iterations, medians of wall time (record + \
         submit + wait) and device time (timestamps: span first start to last end, busy summed per encoder; {})",
        args.log_rows,
        args.cols,
        args.blowup,
        big_n,
        args.cols,
        args.iters,
        if b.has_device_timer() { "available" } else { "NOT available on this adapter: n/a" }
    );
    let run = |name: &str| args.only.as_deref().is_none_or(|o| name.contains(o));

    let t0 = Instant::now();
    let trace = b.upload(&random(trace_shape.len(), 0x5eed)).expect("upload the trace");
    println!("upload of the trace: {:.1} s", t0.elapsed().as_secs_f64());
    let mut lde = b.coset_lde(&trace, &params).expect("LDE");
    b.synchronize().expect("synchronize");
    println!("first LDE (kernel compilation included): {:.2} s", t0.elapsed().as_secs_f64());
    let mut other = b.alloc(lde.len()).expect("a second LDE-sized buffer");

    println!(
        "\n| operation | wall ms | wall x copy | host ms | device span ms | span x copy | device busy ms | busy x copy | \
         submits | GB/s (operand bytes / span) |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    );
    // The baseline: copy_buffer_to_buffer of the LDE's bytes, segment by segment.
    let copy = time(&b, args.iters, || {
        b.raw_copy(&lde, &mut other).expect("copy_buffer_to_buffer");
    });
    // Each row is printed as soon as it is measured, so a run cut short keeps what it had.
    let row = |name: &str, t: Timing, nbytes: usize| {
        let (span, busy, submits, gbs) = match (t.device, copy.device) {
            (Some(d), Some(c)) => (
                format!("{:.2} | {:.2}", d.span_ms, d.span_ms / c.span_ms),
                format!("{:.2} | {:.2}", d.busy_ms, d.busy_ms / c.busy_ms),
                d.submissions.to_string(),
                nbytes as f64 / d.span_ms / 1e6,
            ),
            _ => ("n/a | n/a".into(), "n/a | n/a".into(), "n/a".into(), nbytes as f64 / t.wall / 1e6),
        };
        println!(
            "| {name} | {:.2} | {:.2} | {:.2} | {span} | {busy} | {submits} | {gbs:.1} |",
            t.wall,
            t.wall / copy.wall,
            t.host
        );
    };
    row("copy_buffer_to_buffer (baseline)", copy, bytes);
    // Host transfers of the trace's bytes through the staging rings (every core copies into or
    // out of mapped staging while the device copies the neighbouring chunks); the host vectors
    // are touched by the untimed first run.
    if run("host") {
        let host = random(trace_shape.len(), 0x5eed);
        let mut dst = b.alloc(host.len()).expect("a trace-sized buffer");
        let ms = time(&b, args.iters, || b.write(&mut dst, 0, &host).expect("write"));
        row("write of the trace (host -> device)", ms, trace_shape.bytes());
        let mut back = vec![0u64; host.len()];
        let ms = time(&b, args.iters, || b.download(&dst, 0, &mut back).expect("download"));
        row("download of the trace (device -> host)", ms, trace_shape.bytes());
        assert!(back == host, "the trace read back differs from what was written");
    }
    if run("batched_copy") {
        let copies = [CopyRange::new(0, 0, lde.len())];
        let ms = time(&b, args.iters, || b.batched_copy(&lde, &mut other, &copies).expect("batched_copy"));
        row("batched_copy (copy shader, 1 copy)", ms, bytes);
    }
    if run("transpose") {
        // The same row-major shape every run: the transpose moves whatever bytes are there.
        let ms = time(&b, args.iters, || {
            b.transpose_in_place(&mut lde, lde_shape, args.scratch_cap).expect("transpose");
        });
        row(&format!("transpose_in_place ({} MiB cap)", args.scratch_cap >> 20), ms, bytes);
    }
    for hash in HashKind::ALL {
        for layout in LeafLayout::ALL.into_iter().filter(|&l| hash.supports(l)) {
            let name = format!("hash_leaves {hash} {layout}");
            // Poseidon2 defines the rows layout only.
            if !hash.supports(layout) || !run(&name) {
                continue;
            }
            let spec = LeafSpec::new(hash, layout, 0..args.cols).expect("leaf spec");
            let leaves = spec.validate(lde_shape).expect("leaf spec");
            let mut out = b.alloc(leaves * 4).expect("digests");
            let ms = time(&b, args.iters, || b.hash_leaves_into(&lde, lde_shape, &spec, &mut out, 0).expect("hash"));
            row(&name, ms, bytes);
        }
        let name = format!("merkle_tree {hash} over {big_n} leaves");
        if run(&name) {
            let tree = TreeShape::new(big_n).expect("tree");
            let mut nodes = b.alloc(tree.words()).expect("nodes");
            let ms = time(&b, args.iters, || b.merkle_tree_in_place(&mut nodes, tree, hash).expect("merkle"));
            row(&name, ms, tree.bytes());
        }
    }
    // What an operation that returns a new buffer pays besides its kernels: creating the
    // buffer, wgpu's zero-initialisation of it at first use (outside the operation's own
    // encoders), and freeing it.
    if run("alloc") {
        let ms = time(&b, args.iters, || drop(b.alloc(lde.len()).expect("alloc")));
        row("alloc + free of an LDE-sized buffer (no use)", ms, bytes);
        let copies = [CopyRange::new(0, 0, lde.len())];
        let ms = time(&b, args.iters, || {
            let mut fresh = b.alloc(lde.len()).expect("alloc");
            b.batched_copy(&lde, &mut fresh, &copies).expect("batched_copy");
            drop(fresh);
        });
        row("alloc + batched_copy into it + free", ms, bytes);
    }
    // The LDE two ways, in one run: in place in an allocated LDE buffer (whatever its first n
    // rows hold is the trace: the work does not depend on the values); and `coset_lde` as a
    // caller that keeps its trace gets it (allocate, copy the trace in, extend in place).
    if run("coset_lde") {
        drop(other);
        let ms = time(&b, args.iters, || b.coset_lde_in_place(&mut lde, &params).expect("coset_lde_in_place"));
        row(&format!("coset_lde_in_place 2^{} -> {}", args.log_rows, big_n), ms, bytes);
        let ms = time(&b, args.iters, || drop(b.coset_lde(&trace, &params).expect("coset_lde")));
        row(&format!("coset_lde 2^{} -> {} (alloc, copy, in place)", args.log_rows, big_n), ms, bytes);
    }
}
