//! Where a CUDA process spends its time before and around the first kernels: device open, kernel
//! preparation (compile or cache), the first launch, host transfers (staged, pinned, device to
//! device) and the first-use costs of the coset LDE.
//!
//! ```text
//! cargo run --release -p cuda-probes --bin host_path -- first-kernel [--lazy]
//! cargo run --release -p cuda-probes --bin host_path -- transfers [LOG_ROWS] [COLS]
//! cargo run --release -p cuda-probes --bin host_path -- memory [LOG_ROWS] [COLS] [--cold]
//! ```
//! The backend opens with `CudaOptions::from_env()` (so `STARK_COMMIT_KERNEL_CACHE` applies).
//! `first-kernel` prints the time from `main` to each step (add the process start from `time`):
//! loading the libraries and `cuInit` (`device_count`), opening the device, then either the
//! parallel preparation of a commit's kernels (default) or nothing (`--lazy`: kernels compile one
//! by one at first launch), then a 1024 x 8 LDE downloaded, then closing the backend.
//! `memory` (default 2^21 x 316, blowup 2; run it in a fresh process) grows the memory pool by
//! the trace's and the LDE's bytes with `prepare_memory` (not with `--cold`), then times the
//! allocation of a trace-sized and an LDE-sized buffer and prints how much the pool grew during
//! them: 0 when the prepared pool served them.
//! `transfers` (default 2^21 x 316) prints wall and device times of: the staged upload of a
//! pageable table, the same upload again, pinned allocation, the pinned upload, a device-to-device
//! copy of the same bytes, the staged and pinned downloads, `alloc_host` (fresh and pooled) with
//! direct transfers from and into it, the queued host copy of a buffer twice the trace (pool miss,
//! then reuse), the LDE one-shot and warm, and the host twiddle tables.

use std::time::Instant;

use backend_api::field::LdeTwiddles;
use backend_api::{Backend, HashKind, LdeParams, MatrixShape, PendingDownload as _};
use backend_cuda::{CudaBackend, CudaOptions};

fn main() {
    let t0 = Instant::now();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;
    match args.first().map(String::as_str) {
        Some("first-kernel") => {
            let t = Instant::now();
            let count = CudaBackend::device_count().expect("the CUDA driver");
            println!("libraries_and_cuinit_ms {:.1} ({count} devices)", ms(t));
            let t = Instant::now();
            let b = open();
            println!("open_ms {:.1} (at {:.1})", ms(t), ms(t0));
            println!("kernel_cache {:?}", b.kernel_cache_dir());
            if !args.iter().any(|a| a == "--lazy") {
                let t = Instant::now();
                let report = b.prepare_kernels(HashKind::Keccak256).expect("prepare");
                for p in &report {
                    println!(
                        "unit {:<34} {:?} image_ms {:8.1} load_ms {:6.1} bytes {}",
                        p.unit,
                        p.origin,
                        p.image_time.as_secs_f64() * 1e3,
                        p.load_time.as_secs_f64() * 1e3,
                        p.image_bytes
                    );
                }
                println!("prepare_ms {:.1} (at {:.1})", ms(t), ms(t0));
            }
            let shape = MatrixShape::new(1024, 8).unwrap();
            let trace: Vec<u64> = (0..shape.len() as u64).collect();
            let t = Instant::now();
            let d = b.upload(&trace).unwrap();
            let lde = b.coset_lde(&d, &LdeParams::new(shape, 2, 7).unwrap()).unwrap();
            let out = b.download_vec(&lde).unwrap();
            println!("first_lde_ms {:.1} (at {:.1}) len {}", ms(t), ms(t0), out.len());
            drop((d, lde));
            let t = Instant::now();
            drop(b);
            println!("close_ms {:.1} (at {:.1})", ms(t), ms(t0));
        }
        Some("memory") => {
            let log_rows: u32 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(21);
            let cols: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(316);
            memory(log_rows, cols, args.iter().any(|a| a == "--cold"));
        }
        Some("transfers") => {
            let log_rows: u32 = args.get(1).map_or(21, |s| s.parse().unwrap());
            let cols: usize = args.get(2).map_or(316, |s| s.parse().unwrap());
            transfers(log_rows, cols);
        }
        _ => eprintln!(
            "usage: host_path first-kernel [--lazy] | transfers [LOG_ROWS] [COLS] | memory [LOG_ROWS] [COLS] [--cold]"
        ),
    }
}

/// Device 0 with the options of the environment.
fn open() -> CudaBackend {
    CudaOptions::from_env().and_then(|o| CudaBackend::open(0, o)).expect("CUDA device 0")
}

fn memory(log_rows: u32, cols: usize, cold: bool) {
    let b = open();
    let trace = (1usize << log_rows) * cols;
    let lde = 2 * trace;
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;
    let gb = |elems: usize| (elems * 8) as f64 / 1e9;
    if !cold {
        let t = Instant::now();
        b.prepare_memory((trace + lde) * 8).expect("prepare_memory");
        println!("prepare_memory {:.2} GB: {:.1} ms", gb(trace + lde), ms(t));
    }
    b.pool_reserved_high().expect("pool high-water mark");
    let before = b.pool_reserved_high().expect("pool high-water mark");
    b.synchronize().unwrap();
    let t = Instant::now();
    let x = b.alloc(trace).expect("trace-sized buffer");
    b.synchronize().unwrap();
    println!("alloc {:.2} GB (trace): {:.2} ms", gb(trace), ms(t));
    let t = Instant::now();
    let y = b.alloc(lde).expect("LDE-sized buffer");
    b.synchronize().unwrap();
    println!("alloc {:.2} GB (LDE): {:.2} ms", gb(lde), ms(t));
    let after = b.pool_reserved_high().expect("pool high-water mark");
    println!(
        "pool reserved before {:.2} GB, high during the allocations {:.2} GB: grew {:.2} GB ({})",
        before as f64 / 1e9,
        after as f64 / 1e9,
        after.saturating_sub(before) as f64 / 1e9,
        if cold { "cold" } else { "prepared" }
    );
    drop((x, y));
}

fn transfers(log_rows: u32, cols: usize) {
    let b = open();
    b.prepare_kernels(HashKind::Keccak256).expect("prepare");
    let shape = MatrixShape::new(1 << log_rows, cols).unwrap();
    let n = shape.len();
    let gb = (n * 8) as f64 / 1e9;
    let t = Instant::now();
    let host: Vec<u64> = {
        use rayon::prelude::*;
        let mut v = vec![0u64; n];
        v.par_chunks_mut(1 << 16).enumerate().for_each(|(i, c)| {
            let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ (i as u64).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            for e in c {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *e = x;
            }
        });
        v
    };
    println!(
        "table {} x {} = {:.2} GB, generated in {:.1} ms",
        shape.rows(),
        shape.cols(),
        gb,
        t.elapsed().as_secs_f64() * 1e3
    );
    let line = |what: &str, secs: f64| println!("{what:<40} {:9.2} ms {:7.1} GB/s", secs * 1e3, gb / secs);
    let wall = |f: &mut dyn FnMut()| {
        b.synchronize().unwrap();
        let t = Instant::now();
        f();
        b.synchronize().unwrap();
        t.elapsed().as_secs_f64()
    };

    // Uploads from pageable memory (staged), twice: the first makes the staging ring.
    let mut d = None;
    line("staged upload, first (ring made)", wall(&mut || d = Some(b.upload(&host).unwrap())));
    drop(d.take());
    line("staged upload, again", wall(&mut || d = Some(b.upload(&host).unwrap())));
    let d = d.unwrap();
    // Pinned buffer: allocation and fill, then the direct copy (the floor).
    let t = Instant::now();
    let mut pinned = b.alloc_pinned(n).unwrap();
    println!("{:<40} {:9.2} ms", "alloc_pinned (zeroed)", t.elapsed().as_secs_f64() * 1e3);
    let t = Instant::now();
    pinned.copy_from_slice(&host);
    println!("{:<40} {:9.2} ms", "fill pinned (one thread)", t.elapsed().as_secs_f64() * 1e3);
    let mut dp = None;
    line("pinned upload (floor)", wall(&mut || dp = Some(b.upload_pinned(&mut pinned).unwrap())));
    drop(dp.take());
    line("pinned upload, again", wall(&mut || dp = Some(b.upload_pinned(&mut pinned).unwrap())));
    let mut copy = b.alloc(n).unwrap();
    // One copy this long goes to the copy engine.
    let whole = [backend_api::CopyRange { src: 0, dst: 0, len: n }];
    line("device-to-device copy", wall(&mut || b.batched_copy(&d, &mut copy, &whole).unwrap()));
    drop(copy);
    drop(dp);
    // Downloads.
    let mut out = vec![0u64; n];
    line("staged download into fresh pageable", wall(&mut || b.download(&d, 0, &mut out).unwrap()));
    assert!(out == host, "staged round trip changed the bytes");
    line("staged download into the same pages", wall(&mut || b.download(&d, 0, &mut out).unwrap()));
    // What dropping a host matrix this large costs (the pages go back to the kernel).
    line("drop of that pageable vector", wall(&mut || drop(std::mem::take(&mut out))));
    // The same fresh download into pages advised as transparent huge pages (512 times fewer
    // faults where the kernel grants them).
    let mut out = vec![0u64; n];
    advise_huge_pages(&mut out);
    line("staged download, fresh MADV_HUGEPAGE", wall(&mut || b.download(&d, 0, &mut out).unwrap()));
    assert!(out == host, "staged round trip changed the bytes");
    line("drop of that vector", wall(&mut || drop(std::mem::take(&mut out))));
    println!(
        "transparent huge pages: {}",
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default().trim()
    );
    line("pinned download", wall(&mut || b.download_pinned(&d, &mut pinned).unwrap()));
    assert!(pinned[..] == host[..], "pinned round trip changed the bytes");
    drop(pinned);
    b.trim_host_pool().unwrap();
    println!("pinned host bytes now {}", CudaBackend::pinned_host_bytes());

    // The backend's host memory (alloc_host): a fresh page-locked block (touched on every core,
    // then registered), a pooled one, and transfers from and into it, which are direct copies.
    let t = Instant::now();
    let mut h = b.alloc_host(n).unwrap();
    line("alloc_host, fresh block (GB/s locked)", t.elapsed().as_secs_f64());
    let t = Instant::now();
    h.copy_from_slice(&host);
    line("fill alloc_host memory (one thread)", t.elapsed().as_secs_f64());
    let mut du = None;
    line("upload from alloc_host memory", wall(&mut || du = Some(b.upload(&h).unwrap())));
    drop(du);
    line("download into alloc_host memory", wall(&mut || b.download(&d, 0, &mut h).unwrap()));
    assert!(h[..] == host[..], "alloc_host round trip changed the bytes");
    drop(h);
    let t = Instant::now();
    let h = b.alloc_host(n).unwrap();
    line("alloc_host from the pool (zeroed)", t.elapsed().as_secs_f64());
    drop(h);
    // The queued host copy of a buffer twice the trace (the LDE's size at blowup 2): the first
    // makes its block, the next ones reuse it from the pool.
    let mut big = b.alloc(2 * n).unwrap();
    b.write(&mut big, 0, &host).unwrap();
    b.write(&mut big, n, &host).unwrap();
    let line2 = |what: &str, secs: f64| println!("{what:<40} {:9.2} ms {:7.1} GB/s", secs * 1e3, 2.0 * gb / secs);
    for what in ["queue_download + wait, block made (2x)", "queue_download + wait, pooled (2x)", "  again (2x)"] {
        let mut got = None;
        line2(what, wall(&mut || got = Some(b.queue_download(&big).unwrap().wait().unwrap())));
        let got = got.unwrap();
        assert!(got[..n] == host[..] && got[n..] == host[..], "queued host copy changed the bytes");
    }
    drop(big);
    println!("pinned host bytes now {} (pool {})", CudaBackend::pinned_host_bytes(), b.host_pool_bytes());
    b.trim_host_pool().unwrap();

    // LDE first use: one-shot, warm, and the host twiddles of a new shift.
    let params = LdeParams::new(shape, 2, 7).unwrap();
    let mut lde = None;
    line("coset_lde one-shot (GB of the trace)", wall(&mut || lde = Some(b.coset_lde(&d, &params).unwrap())));
    drop(lde.take());
    line("coset_lde warm", wall(&mut || lde = Some(b.coset_lde(&d, &params).unwrap())));
    drop(lde.take());
    line("coset_lde warm again", wall(&mut || lde = Some(b.coset_lde(&d, &params).unwrap())));
    drop(lde.take());
    let t = Instant::now();
    let tw = LdeTwiddles::new(log_rows, 1, 11);
    println!(
        "{:<40} {:9.2} ms ({} elements)",
        "host twiddles of a new shift",
        t.elapsed().as_secs_f64() * 1e3,
        tw.inv_twiddles.len() + tw.twiddles.len() + tw.coset.len()
    );
    let p2 = LdeParams::new(shape, 2, 11).unwrap();
    line("coset_lde, new shift (tables made)", wall(&mut || lde = Some(b.coset_lde(&d, &p2).unwrap())));
}

/// Advises the 2 MiB-aligned interior of `v` as transparent huge pages (before its first write).
fn advise_huge_pages(v: &mut [u64]) {
    const HUGE: usize = 2 << 20;
    let start = (v.as_mut_ptr() as usize).next_multiple_of(HUGE);
    let end = (v.as_mut_ptr() as usize + size_of_val(v)) & !(HUGE - 1);
    if end > start {
        // SAFETY: the range lies inside `v`'s allocation; the advice only changes how the kernel
        // backs those pages.
        let _ = unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
    }
}
