//! Throughput prototypes for the coset LDE's arithmetic on one GPU: Goldilocks multiplies and
//! radix-2 butterflies on the integer pipe, on the FP64 pipe and on both; radix-8 / radix-32
//! blocks with power-of-two inner twiddles against general twiddles; radix-16 / radix-32 blocks
//! in a redundant representation (four signed limbs of 24 bits, no modular corrections); and
//! radix-16 blocks on the integer pipe against the same blocks as byte-matrix products on the
//! tensor cores
//! (kernels: `lab/cuda-probes/kernels/pipes.cu`, compiled to CUBIN by NVRTC at run time).
//!
//! ```text
//! cargo run --release -p cuda-probes --bin ntt_proto -- [--reps 5] [--scale 1] [--only NAME,..]
//! ```
//! Each kernel runs one full wave (the device's SM count x the blocks per SM that its registers
//! allow, 256 threads each) of long dependent chains, timed with CUDA events (one warm-up, the
//! median of `--reps`); `--scale` multiplies the iteration counts. Every output is checked
//! against backend-api's host field arithmetic on a sample of threads; a mismatch makes the
//! exit status 1. Figures are operations per second and the ratio to the integer-pipe kernel of
//! the same family measured in the same run.

use std::ffi::CString;
use std::sync::Arc;

use backend_api::field;
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, LaunchConfig, PushKernelArg, sys as cu_sys};
use cudarc::nvrtc::{Ptx, result as nvrtc_result, sys as nvrtc_sys};

/// The prototype kernels (they include the backend's `common.cuh`).
const PIPES: &str = include_str!("../../kernels/pipes.cu");

/// Threads per block of every prototype launch.
const BLOCK: u32 = 256;
/// Dynamic shared memory of `proto_r16_wgd64` (two tiles per warpgroup and W', 16 KB each).
const PROTO_WGD_SMEM: u32 = 5 * 16 * 1024;

/// Threads whose outputs are recomputed on the host.
const SAMPLE_THREADS: usize = 48;

/// What one kernel computes per thread, for the host reference and the operation count.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Family {
    /// 8 chains x <- x * c.
    Mul,
    /// 16 values, four DIT stages (32 butterflies) per iteration, twiddles from 8 constants.
    Bfly,
    /// Radix-2^L blocks (`pow2`: outer general multiplies, then power-of-two inner twiddles).
    Radix { log: u32, blocks: usize, pow2: bool },
}

impl Family {
    /// u64 values each thread reads and writes.
    fn values(self) -> usize {
        match self {
            Family::Mul => 8,
            Family::Bfly => 16,
            Family::Radix { log, blocks, .. } => blocks << log,
        }
    }

    /// Constants the kernel reads (multipliers or twiddles).
    fn consts(self) -> usize {
        match self {
            Family::Mul | Family::Bfly => 8,
            Family::Radix { .. } => 64,
        }
    }

    /// Multiplies (Mul) or radix-2 butterflies (the others) per thread and iteration.
    fn ops_per_iter(self) -> u64 {
        match self {
            Family::Mul => 8,
            Family::Bfly => 32,
            Family::Radix { log, blocks, .. } => ((blocks as u64) * u64::from(log)) << (log - 1),
        }
    }

    /// Iterations per launch at `--scale 1` (about 10-20 ms per launch on an H200).
    fn iters(self) -> u32 {
        match self {
            Family::Mul => 8192,
            Family::Bfly => 1024,
            Family::Radix { log: 3, .. } => 1024,
            Family::Radix { log: 4, blocks, .. } => 1024 / blocks as u32,
            Family::Radix { .. } => 384,
        }
    }

    /// Kernels with the same key are compared: the first one run is the baseline of the others
    /// (the radix blocks grouped by radix).
    fn key(self) -> (u8, u32) {
        match self {
            Family::Mul => (0, 0),
            Family::Bfly => (1, 0),
            Family::Radix { log, .. } => (2, log),
        }
    }

    fn unit(self) -> &'static str {
        if self == Family::Mul { "mul/s" } else { "butterfly/s" }
    }
}

const R8: Family = Family::Radix { log: 3, blocks: 2, pow2: false };
const R8P: Family = Family::Radix { log: 3, blocks: 2, pow2: true };
const R16P: Family = Family::Radix { log: 4, blocks: 2, pow2: true };
/// The tensor-core kernels: one radix-16 block (the `pow2` kind) per thread and iteration, a
/// warp's 32 blocks computed together.
const R16TC: Family = Family::Radix { log: 4, blocks: 1, pow2: true };
/// The redundant-limb radix-16 kernel: one block per thread (its 16 values take 64 registers).
const R16S: Family = Family::Radix { log: 4, blocks: 1, pow2: true };
const R32: Family = Family::Radix { log: 5, blocks: 1, pow2: false };
const R32P: Family = Family::Radix { log: 5, blocks: 1, pow2: true };

/// Every prototype kernel, in the order run, with the dynamic shared memory it is launched with;
/// the first of each family is its baseline.
const KERNELS: &[(&str, Family, u32)] = &[
    ("proto_mul_int", Family::Mul, 0),
    ("proto_mul_fp", Family::Mul, 0),
    ("proto_mul_mix", Family::Mul, 0),
    ("proto_mul_warp", Family::Mul, 0),
    ("proto_bfly_int", Family::Bfly, 0),
    ("proto_bfly_int1", Family::Bfly, 0),
    ("proto_bfly_fp", Family::Bfly, 0),
    ("proto_bfly_mix", Family::Bfly, 0),
    ("proto_bfly_warp", Family::Bfly, 0),
    ("proto_r8_general", R8, 0),
    ("proto_r8_pow2", R8P, 0),
    ("proto_r16_pow2", R16P, 0),
    ("proto_r16_s96", R16S, 0),
    ("proto_r16_tc2", R16TC, 0),
    ("proto_r16_tc4", R16TC, 0),
    ("proto_r16_tc1s", R16TC, 0),
    ("proto_r16_tc2s", R16TC, 0),
    ("proto_r16_wg", R16TC, 0),
    ("proto_r16_wgs64", R16TC, 0),
    ("proto_r16_wgt64", R16TC, 0),
    ("proto_r16_wgs32", R16TC, 0),
    ("proto_r16_wgs32o3", R16TC, 0),
    ("proto_r16_wgx64", R16TC, 0),
    ("proto_r16_wgd64", R16TC, PROTO_WGD_SMEM),
    ("proto_r32_general", R32, 0),
    ("proto_r32_pow2", R32P, 0),
    ("proto_r32_s96", R32P, 0),
];

/// `E_m` of the kernels' `root_exp`: 2^(E_m) is this field's primitive 2^m-th root of unity.
const ROOT_EXP: [u64; 6] = [96, 48, 120, 156, 78, 39];

fn main() {
    match run() {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("ntt_proto: {e}");
            std::process::exit(2);
        }
    }
}

struct Args {
    reps: usize,
    scale: f64,
    only: Option<Vec<String>>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args { reps: 5, scale: 1.0, only: None };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--reps" => a.reps = value.parse().map_err(|e| format!("--reps {value}: {e}"))?,
            "--scale" => a.scale = value.parse().map_err(|e| format!("--scale {value}: {e}"))?,
            "--only" => a.only = Some(value.split(',').map(String::from).collect()),
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    if a.reps == 0 || a.scale <= 0.0 {
        return Err("--reps and --scale must be positive".into());
    }
    Ok(a)
}

/// Compiles `pipes.cu` (with `common.cuh` inlined) to CUBIN for `sm_XX`, or for `sm_90a` on
/// sm_90 so that the warpgroup-MMA kernels (`proto_r16_wg*`, which need the architecture-specific
/// features) are built too.
fn compile(arch: i32) -> Result<Vec<u8>, String> {
    let arch = if arch == 90 { "90a".to_string() } else { arch.to_string() };
    let src = PIPES.replace("#include \"common.cuh\"", shaders::cuda::COMMON);
    let src = CString::new(src).map_err(|e| format!("kernel source: {e}"))?;
    let name = CString::new("pipes.cu").expect("no NUL");
    let prog = nvrtc_result::create_program(&src, Some(&name)).map_err(|e| format!("nvrtcCreateProgram: {e:?}"))?;
    let opts = [format!("--gpu-architecture=sm_{arch}"), "-std=c++17".into(), "-DNVRTC_BUILD=1".into()];
    // SAFETY: `prog` is a live program; the options hold no NUL byte.
    let compiled = unsafe { nvrtc_result::compile_program(prog, &opts) };
    let image = match compiled {
        Ok(()) => {
            let mut size = 0usize;
            // SAFETY: `prog` is compiled; the size is written to a local.
            let r = unsafe { nvrtc_sys::nvrtcGetCUBINSize(prog, &mut size) };
            let mut cubin = vec![0u8; size];
            // SAFETY: `cubin` holds the `size` bytes NVRTC reported.
            let r2 = unsafe { nvrtc_sys::nvrtcGetCUBIN(prog, cubin.as_mut_ptr().cast()) };
            if r != nvrtc_sys::nvrtcResult::NVRTC_SUCCESS || r2 != nvrtc_sys::nvrtcResult::NVRTC_SUCCESS {
                Err(format!("nvrtcGetCUBIN: {r:?} {r2:?}"))
            } else {
                Ok(cubin)
            }
        }
        Err(e) => {
            // SAFETY: `prog` is live.
            let log = unsafe { nvrtc_result::get_program_log(prog) }.unwrap_or_default();
            let log: String = log.iter().map(|&c| c as u8 as char).collect();
            Err(format!("pipes.cu does not compile ({e:?}):\n{log}"))
        }
    };
    // SAFETY: `prog` is live and not used after this.
    let _ = unsafe { nvrtc_result::destroy_program(prog) };
    image
}

/// A seeded xorshift stream; every 61st value is pushed to [p, 2^64) (non-canonical inputs).
fn random_values(n: usize, seed: u64) -> Vec<u64> {
    let mut x = seed | 1;
    (0..n)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if i % 61 == 0 { field::P + (x % (u64::MAX - field::P)) } else { x }
        })
        .collect()
}

/// The host reference of one thread: its values after `iters` iterations, canonical.
fn reference(family: Family, input: &[u64], consts: &[u64], iters: u32) -> Vec<u64> {
    let mut v: Vec<u64> = input.iter().map(|&x| field::canonical(x)).collect();
    for _ in 0..iters {
        match family {
            Family::Mul => {
                for (x, &c) in v.iter_mut().zip(consts) {
                    *x = field::mul(*x, c);
                }
            }
            Family::Bfly => dit_stages(&mut v, 4, |s, q| consts[(q + s) % 8]),
            Family::Radix { log, pow2, .. } => {
                for block in v.chunks_mut(1 << log) {
                    if pow2 {
                        for j in 1..block.len() {
                            block[j] = field::mul(block[j], consts[j]);
                        }
                        dit_stages(block, log as usize, |s, q| {
                            let t = (q & ((1 << s) - 1)) as u64;
                            field::pow(2, (t * ROOT_EXP[s]) % 192)
                        });
                    } else {
                        dit_stages(block, log as usize, |s, q| consts[(q + s) % 64]);
                    }
                }
            }
        }
    }
    v
}

/// `stages` radix-2 DIT stages over `v` (half-span 2^s at stage s), butterfly q of stage s
/// using twiddle `tw(s, q)`.
fn dit_stages(v: &mut [u64], stages: usize, tw: impl Fn(usize, usize) -> u64) {
    for s in 0..stages {
        let half = 1 << s;
        for q in 0..v.len() / 2 {
            let j0 = ((q >> s) << (s + 1)) | (q & (half - 1));
            let j1 = j0 + half;
            let y = field::mul(v[j1], tw(s, q));
            let x = v[j0];
            v[j0] = field::add(x, y);
            v[j1] = field::sub(x, y);
        }
    }
}

/// Median of the kernel's timed launches, in ms.
fn time_kernel(
    stream: &Arc<CudaStream>,
    ctx: &Arc<CudaContext>,
    launch: &mut dyn FnMut() -> Result<(), String>,
    reps: usize,
) -> Result<f64, String> {
    let de = |e: cudarc::driver::DriverError| format!("{e:?}");
    launch()?; // warm-up
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        let a = ctx.new_event(Some(cu_sys::CUevent_flags::CU_EVENT_DEFAULT)).map_err(de)?;
        let b = ctx.new_event(Some(cu_sys::CUevent_flags::CU_EVENT_DEFAULT)).map_err(de)?;
        a.record(stream).map_err(de)?;
        launch()?;
        b.record(stream).map_err(de)?;
        b.synchronize().map_err(de)?;
        times.push(f64::from(a.elapsed_ms(&b).map_err(de)?));
    }
    times.sort_by(f64::total_cmp);
    Ok(times[reps / 2])
}

fn run() -> Result<bool, String> {
    let args = parse_args()?;
    // SAFETY: `is_culib_present` only tries to dlopen the candidate names and drops them.
    let present = unsafe { cudarc::driver::sys::is_culib_present() && cudarc::nvrtc::sys::is_culib_present() };
    if !present {
        return Err("the CUDA driver (libcuda) or NVRTC (libnvrtc.so.13) was not found".into());
    }
    for (m, &e) in ROOT_EXP.iter().enumerate() {
        let m = m as u32 + 1;
        assert_eq!(field::pow(2, e), field::root_of_unity(m), "2^{e} is not the field's 2^{m}-th root");
    }
    let de = |e: cudarc::driver::DriverError| format!("{e:?}");
    let ctx = CudaContext::new(0).map_err(de)?;
    let stream = ctx.new_stream().map_err(de)?;
    let (major, minor) = ctx.compute_capability().map_err(de)?;
    let sms = ctx.attribute(cu_sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT).map_err(de)? as u32;
    println!("device {} sm_{major}{minor}, {sms} SMs", ctx.name().map_err(de)?);
    let cubin = compile(major * 10 + minor)?;
    let module = ctx.load_module(Ptx::from_binary(cubin)).map_err(de)?;

    println!(
        "{:<18} {:>6} {:>9} {:>6} {:>10} {:>12} {:>11} {:>7}",
        "kernel", "regs", "blocks/SM", "iters", "median ms", "ops/s", "unit", "x base"
    );
    let mut ok = true;
    let mut base: Option<(Family, f64)> = None;
    for &(name, family, smem) in KERNELS {
        if args.only.as_ref().is_some_and(|o| !o.iter().any(|n| name.contains(n.as_str()))) {
            continue;
        }
        let f = match module.load_function(name) {
            Ok(f) => f,
            Err(_) if name.starts_with("proto_r16_wg") => {
                println!("{name:<18} skipped: warpgroup MMA needs sm_90a, this device is sm_{major}{minor}");
                continue;
            }
            Err(e) => return Err(de(e)),
        };
        let regs = f.get_attribute(cu_sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_NUM_REGS).map_err(de)?;
        if smem > 0 {
            let attr = cu_sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
            f.set_attribute(attr, smem as i32).map_err(de)?;
        }
        let per_sm = f.occupancy_max_active_blocks_per_multiprocessor(BLOCK, smem as usize, None).map_err(de)?.max(1);
        let grid = sms * per_sm;
        let threads = (grid * BLOCK) as usize;
        let iters = ((f64::from(family.iters()) * args.scale).round() as u32).max(1);
        let input = random_values(threads * family.values(), 0x9e37_79b9_7f4a_7c15 ^ name.len() as u64);
        let consts = random_values(family.consts(), 0xbf58_476d_1ce4_e5b9);
        let d_in = stream.clone_htod(&input).map_err(de)?;
        let d_consts = stream.clone_htod(&consts).map_err(de)?;
        let mut d_out: CudaSlice<u64> = stream.alloc_zeros(input.len()).map_err(de)?;
        let cfg = LaunchConfig { grid_dim: (grid, 1, 1), block_dim: (BLOCK, 1, 1), shared_mem_bytes: smem };
        let mut launch = || -> Result<(), String> {
            let mut b = stream.launch_builder(&f);
            b.arg(&d_in).arg(&d_consts).arg(&mut d_out).arg(&iters);
            // SAFETY: the kernel takes (const u64* in, const u64* consts, u64* out, u32 iters);
            // `in` and `out` hold `values()` u64 per launched thread, `consts` `consts()` u64.
            unsafe { b.launch(cfg) }.map(|_| ()).map_err(de)
        };
        let ms = time_kernel(&stream, &ctx, &mut launch, args.reps)?;
        let out = stream.clone_dtoh(&d_out).map_err(de)?;
        // The sample: first and last threads, and threads spread over the grid.
        let mut bad = 0;
        for s in 0..SAMPLE_THREADS {
            let t = if s + 1 == SAMPLE_THREADS { threads - 1 } else { s * threads / SAMPLE_THREADS + s % 7 };
            let n = family.values();
            let want = reference(family, &input[t * n..(t + 1) * n], &consts, iters);
            if out[t * n..(t + 1) * n] != want[..] {
                bad += 1;
                if bad <= 2 {
                    let wrong: Vec<usize> = (0..n).filter(|&e| out[t * n + e] != want[e]).collect();
                    eprintln!(
                        "{name}: thread {t} (block {}, lane {}): values {wrong:?} differ",
                        t / BLOCK as usize,
                        t % 32
                    );
                }
            }
        }
        let ops = threads as f64 * iters as f64 * family.ops_per_iter() as f64 / (ms * 1e-3);
        let ratio = match base {
            Some((bf, b)) if bf.key() == family.key() => ops / b,
            _ => {
                base = Some((family, ops));
                1.0
            }
        };
        println!(
            "{name:<18} {regs:>6} {per_sm:>9} {iters:>6} {ms:>10.3} {ops:>12.4e} {:>11} {ratio:>7.3}{}",
            family.unit(),
            if bad == 0 { String::new() } else { format!("  MISMATCH in {bad} of {SAMPLE_THREADS} sampled threads") }
        );
        ok &= bad == 0;
    }
    println!("check: {}", if ok { "every sampled thread matches the host reference" } else { "MISMATCH" });
    Ok(ok)
}

#[cfg(test)]
mod tests {
    /// The prototypes compile for sm_89 and for sm_90a (what `compile` builds for an sm_90
    /// device), whose image alone holds the warpgroup-MMA kernels, so that a broken prototype
    /// fails here rather than on the GPU. Skipped visibly without NVRTC (a failure under
    /// `REQUIRE_NVRTC=1`).
    #[test]
    fn the_prototypes_compile_for_sm_89_and_sm_90a() {
        // SAFETY: only checks whether the library can be loaded.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            assert!(std::env::var("REQUIRE_NVRTC").as_deref() != Ok("1"), "REQUIRE_NVRTC=1: NVRTC not found");
            eprintln!("SKIPPED cuda_probes::ntt_proto: NVRTC not found");
            return;
        }
        // NVRTC's optimiser recurses deeply over the fully unrolled radix-32 blocks: more than a
        // test thread's 2 MiB of stack.
        let compile = |arch: i32| {
            std::thread::Builder::new()
                .stack_size(64 << 20)
                .spawn(move || super::compile(arch))
                .unwrap()
                .join()
                .unwrap()
        };
        for (arch, wgmma) in [(89, false), (90, true)] {
            let cubin = compile(arch).unwrap_or_else(|e| panic!("sm_{arch}: {e}"));
            assert_eq!(&cubin[..4], b"\x7fELF", "sm_{arch}: not a CUBIN");
            let has = cubin.windows(13).any(|w| w == b"proto_r16_wgs");
            assert_eq!(has, wgmma, "sm_{arch}: warpgroup-MMA kernels present: {has}");
        }
    }
}
