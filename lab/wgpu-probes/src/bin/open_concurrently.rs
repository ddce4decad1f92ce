//! Whether backends can be opened and dropped from several threads of one process at once on
//! this machine: for each variant (wgpu only, CUDA only, both interleaved, and wgpu on one thread
//! as the control), a child process runs `--threads` threads that each open a backend, move one
//! word up and down, and drop it, `--rounds` times. The child runs under a time limit; each
//! variant prints `ok` with its time, `HANG` (killed at the limit) or `CRASH` (the signal or exit
//! status). Exits 1 when any variant did not finish.
//!
//! ```sh
//! cargo run --release -p wgpu-probes --bin open_concurrently -- [--threads 6] [--rounds 4] [--timeout 30]
//! ```

use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use backend_api::Backend;

const VARIANTS: [&str; 4] = ["wgpu-one-thread", "wgpu", "cuda", "both"];

fn flag(args: &[String], name: &str, default: u64) -> u64 {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// One open, round trip and drop of `kind`'s backend.
fn once(kind: &str) -> Result<(), String> {
    fn round_trip<B: Backend>(b: &B) -> Result<(), String> {
        let buf = b.upload(&[7u64]).map_err(|e| e.to_string())?;
        let back = b.download_vec(&buf).map_err(|e| e.to_string())?;
        if back == [7] { Ok(()) } else { Err(format!("read back {back:?}")) }
    }
    match kind {
        "wgpu" => {
            let options = backend_wgpu::WgpuOptions { allow_software: true, ..Default::default() };
            round_trip(&backend_wgpu::WgpuBackend::new(options).map_err(|e| e.to_string())?)
        }
        _ => round_trip(&backend_cuda::CudaBackend::new(0).map_err(|e| e.to_string())?),
    }
}

fn child(variant: &str, threads: u64, rounds: u64) -> ExitCode {
    let threads = if variant == "wgpu-one-thread" { 1 } else { threads };
    let failed = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    for r in 0..rounds {
                        let kind = match variant {
                            "cuda" => "cuda",
                            "both" if (t + r) % 2 == 1 => "cuda",
                            _ => "wgpu",
                        };
                        if let Err(e) = once(kind) {
                            println!("  thread {t} round {r} {kind}: {e}");
                            return true;
                        }
                    }
                    false
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or(true)).fold(false, |a, b| a | b)
    });
    if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (threads, rounds) = (flag(&args, "--threads", 6), flag(&args, "--rounds", 4));
    if let Some(i) = args.iter().position(|a| a == "--child") {
        return child(&args[i + 1], threads, rounds);
    }
    let limit = Duration::from_secs(flag(&args, "--timeout", 30));
    let exe = std::env::current_exe().expect("the probe's own path");
    let mut all_ok = true;
    for variant in VARIANTS {
        let started = Instant::now();
        let mut c = Command::new(&exe)
            .args(["--child", variant, "--threads", &threads.to_string(), "--rounds", &rounds.to_string()])
            .spawn()
            .expect("spawn the child");
        let status = loop {
            if let Some(status) = c.try_wait().expect("wait for the child") {
                break Some(status);
            }
            if started.elapsed() > limit {
                let _ = c.kill();
                let _ = c.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let secs = started.elapsed().as_secs_f64();
        let verdict = match status {
            Some(s) if s.success() => format!("ok in {secs:.2} s"),
            Some(s) => {
                use std::os::unix::process::ExitStatusExt;
                all_ok = false;
                match s.signal() {
                    Some(sig) => format!("CRASH (signal {sig}) after {secs:.2} s"),
                    None => format!("FAILED ({s}) after {secs:.2} s"),
                }
            }
            None => {
                all_ok = false;
                format!("HANG (killed at {} s)", limit.as_secs())
            }
        };
        println!("{variant:>16}: {threads} threads x {rounds} rounds: {verdict}");
    }
    if all_ok { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}
