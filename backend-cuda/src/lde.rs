//! The coset LDE (lde.cu): an inverse NTT of size `n` by decimation in frequency on rows `B*p` of
//! the output, coset scaling with the `1/n` folded in plus the zero-extension, then a forward NTT of
//! size `N` by decimation in time, in place. Each launch is a pass of up to `k` radix-2 stages over
//! shared-memory tiles of `2^k` rows x 8 columns (see lde.cu); the twiddles, coset powers and
//! inverse twiddles are backend-api's shared [`LdeTwiddles`] (built once per shape per process),
//! uploaded once per call into one tracked buffer.

use backend_api::DeviceBuffer as _;
use backend_api::field::LdeTwiddles;
use backend_api::{ELEM_BYTES, LdeParams, Result, validate};

use crate::context::Device;
use crate::launch::{KernelParam, LaunchArgs, LaunchConfig};
use crate::memory::{self, CudaBuffer};
use crate::module::Source;
use crate::options::{CudaOptions, MAX_NTT_STAGES, NttKernel};

/// Columns per tile (`NTT_COLS` in lde.cu).
const NTT_COLS: usize = 8;
/// Threads per block of the shared-memory kernel (`__launch_bounds__(512)`).
const BLOCK: u32 = 512;

/// The parameter of the NTT kernels; layout identical to `NttPass` in lde.cu.
#[repr(C)]
#[derive(Clone, Copy)]
struct NttPass {
    src: u64,
    dst: u64,
    tw: u64,
    coset: u64,
    src_stride: u64,
    dst_stride: u64,
    cols: u64,
    log_size: u64,
    log_h_small: u64,
    k: u64,
    canon_in: u64,
    finish_inverse: u64,
    log_blowup: u64,
    replicate_out: u64,
    replicated_in: u64,
    canon_out: u64,
}

// SAFETY: `#[repr(C)]` u64 fields, the layout of lde.cu's `NttPass` (src, dst, tw, coset,
// src_stride, dst_stride, cols, log_size, log_h_small, k, canon_in, finish_inverse, log_blowup,
// replicate_out, replicated_in, canon_out); no padding.
unsafe impl KernelParam for NttPass {}
const _: () = assert!(std::mem::size_of::<NttPass>() == 16 * 8, "NttPass is sixteen u64, unpadded");

/// Stages per pass from which the register kernel (radix-32 groups) runs a pass.
const REG_MIN_STAGES: u32 = 5;

/// Splits `stages` into passes of at most `max` stages, as even as possible (larger ones first);
/// zero stages is one empty pass.
fn split(stages: u32, max: u32) -> Vec<u32> {
    if stages == 0 {
        return vec![0];
    }
    let passes = stages.div_ceil(max);
    (0..passes).map(|i| stages / passes + u32::from(i < stages % passes)).collect()
}

/// Stages per pass: [`CudaOptions::ntt_stages`] (1 is one radix-2 stage per launch) or else the
/// most the device's shared memory allows, up to [`MAX_NTT_STAGES`].
fn stages_per_pass(device: &Device, options: &CudaOptions) -> u32 {
    let fit = (device.max_shared_optin / (NTT_COLS * ELEM_BYTES)).max(2).ilog2().min(MAX_NTT_STAGES);
    options.ntt_stages.map_or(fit, |k| k.min(fit))
}

/// The register kernel variant the options select: (radix, columns per tile, lazy).
/// Lazy reduction (radix 32, 8 columns only): values inside the transform are any u64 congruent
/// mod p; the last pass canonicalises, and the shared-memory kernel canonicalises what it loads.
pub(crate) fn variant(options: &CudaOptions) -> (u32, usize, bool) {
    let k = options.ntt_kernel;
    (k.radix(), k.cols() as usize, options.ntt_lazy && k == NttKernel::Radix32Cols8)
}

/// The kernel of one NTT pass: inverse (`dit` false) or forward, register kernel or shared-memory
/// kernel, for a [`variant`].
pub(crate) fn pass_kernel(dit: bool, reg: bool, (radix, reg_cols, lazy): (u32, usize, bool)) -> &'static str {
    match (dit, reg, radix, reg_cols) {
        (false, false, _, _) => "ntt_dif_pass",
        (true, false, _, _) => "ntt_dit_pass",
        (false, true, _, _) if lazy => "ntt_dif_pass_lazy",
        (true, true, _, _) if lazy => "ntt_dit_pass_lazy",
        (false, true, 16, _) => "ntt_dif_pass_reg16",
        (true, true, 16, _) => "ntt_dit_pass_reg16",
        (false, true, _, 4) => "ntt_dif_pass_reg_c4",
        (true, true, _, 4) => "ntt_dit_pass_reg_c4",
        (false, true, _, _) => "ntt_dif_pass_reg",
        (true, true, _, _) => "ntt_dit_pass_reg",
    }
}

/// [`backend_api::Backend::coset_lde`].
pub(crate) fn coset_lde(
    device: &Device,
    options: &CudaOptions,
    trace: &CudaBuffer,
    params: &LdeParams,
) -> Result<CudaBuffer> {
    validate::coset_lde(params, trace.len())?;
    let shape = params.trace();
    let (log_n, log_b) = (params.log_trace_rows(), params.log_blowup());
    let m = shape.cols();
    let big_n = shape.rows() << log_b;
    let tables = LdeTwiddles::shared(log_n, log_b, params.shift());
    let out = CudaBuffer::alloc(trace.device(), big_n * m)?;
    let (inv, fwd, coset) = (&tables.inv_twiddles, &tables.twiddles, &tables.coset);
    let tw = CudaBuffer::alloc(trace.device(), inv.len() + fwd.len() + coset.len())?;
    memory::write(&tw, 0, inv)?;
    memory::write(&tw, inv.len(), fwd)?;
    memory::write(&tw, inv.len() + fwd.len(), coset)?;

    let max_k = stages_per_pass(device, options);
    let shared_max = (1usize << max_k) * NTT_COLS * ELEM_BYTES + (1usize << max_k) / 32 * ELEM_BYTES;
    let inverse = split(log_n, max_k);
    // The forward NTT of size N runs the same stage split (its first log B stages are the
    // inverse's replication), without the empty pass of a 1-row trace.
    let forward: Vec<u32> = inverse.iter().copied().filter(|&k| k > 0).collect();
    // The register kernel skips the B - 1 replicas of each inverse output row (the first forward
    // pass reads the shared row for all of them); the shared-memory kernel writes them. Mixed
    // passes keep the replicas.
    let all_reg = inverse.iter().chain(&forward).all(|&k| k >= REG_MIN_STAGES);
    let (radix, reg_cols, lazy) = variant(options);
    let kernels = |dit: bool, k: u32| {
        let reg = k >= REG_MIN_STAGES;
        let name = pass_kernel(dit, reg, (radix, reg_cols, lazy));
        let cols = if reg { reg_cols } else { NTT_COLS };
        let threads = if reg { ((1usize << k) * cols / radix as usize) as u32 } else { BLOCK };
        // Register kernels pad their tile by one element per 32 rows.
        let smem = (1usize << k) * cols * ELEM_BYTES + if reg { (1usize << k) / 32 * ELEM_BYTES } else { 0 };
        device.kernel(Source::Lde, name, shared_max).map(|kernel| (kernel, threads, smem as u32, cols))
    };
    let grid = |log_size: u32, k: u32, reps: usize, cols: usize| {
        ((1usize << log_size >> k) / reps * m.div_ceil(cols)).clamp(1, device.sm_count as usize * 8) as u32
    };

    // Inverse NTT, natural order in, bit-reversed out, on rows B*p; the last pass scales (and
    // writes the replicas unless every pass runs the register kernel).
    let mut hi = log_n;
    for (idx, &k) in inverse.iter().enumerate() {
        let first = idx == 0;
        let last = idx + 1 == inverse.len();
        hi -= k;
        let pass = NttPass {
            src: if first { trace.ptr() } else { out.ptr() },
            dst: out.ptr(),
            tw: tw.ptr(),
            coset: tw.ptr_at(inv.len() + fwd.len()),
            src_stride: if first { m as u64 } else { (m << log_b) as u64 },
            dst_stride: (m << log_b) as u64,
            cols: m as u64,
            log_size: log_n as u64,
            log_h_small: hi as u64,
            k: k as u64,
            canon_in: u64::from(first || k < REG_MIN_STAGES),
            finish_inverse: u64::from(last),
            log_blowup: log_b as u64,
            replicate_out: u64::from(!all_reg),
            replicated_in: 0,
            canon_out: u64::from(last && forward.is_empty()),
        };
        let (kernel, threads, smem, cols) = kernels(false, k)?;
        let args = LaunchArgs::new().arg(&pass);
        // SAFETY: one NttPass as declared; tiles address rows < n of the trace and rows < N of
        // `out`, twiddle indices stay below n/2 and coset indices below n (lde.cu's invariants).
        unsafe { device.launch(&kernel, LaunchConfig::linear(grid(log_n, k, 1, cols), threads, smem), args)? };
    }

    // Forward NTT of size N, half-spans B .. N/2, bit-reversed in, natural out, in place.
    let log_big = log_n + log_b;
    let mut lo = log_b;
    for (idx, &k) in forward.iter().enumerate() {
        let replicated_in = all_reg && idx == 0;
        let pass = NttPass {
            src: out.ptr(),
            dst: out.ptr(),
            tw: tw.ptr_at(inv.len()),
            coset: 0,
            src_stride: m as u64,
            dst_stride: m as u64,
            cols: m as u64,
            log_size: log_big as u64,
            log_h_small: lo as u64,
            k: k as u64,
            canon_in: u64::from(k < REG_MIN_STAGES),
            finish_inverse: 0,
            log_blowup: log_b as u64,
            replicate_out: 0,
            replicated_in: u64::from(replicated_in),
            canon_out: u64::from(idx + 1 == forward.len()),
        };
        lo += k;
        let (kernel, threads, smem, cols) = kernels(true, k)?;
        let reps = if replicated_in { 1usize << log_b } else { 1 };
        let args = LaunchArgs::new().arg(&pass);
        // SAFETY: as above; twiddle indices stay below N/2.
        unsafe { device.launch(&kernel, LaunchConfig::linear(grid(log_big, k, reps, cols), threads, smem), args)? };
    }
    // The tables are freed once the passes that read them have run.
    drop(tw);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_is_even_and_covers_every_stage() {
        assert_eq!(split(0, 11), vec![0]);
        assert_eq!(split(21, 11), vec![11, 10]);
        assert_eq!(split(22, 11), vec![11, 11]);
        assert_eq!(split(23, 11), vec![8, 8, 7]);
        assert_eq!(split(5, 1), vec![1; 5]);
        for s in 0..=32 {
            for m in 1..=11 {
                let p = split(s, m);
                assert_eq!(p.iter().sum::<u32>(), s);
                assert!(p.iter().all(|&k| k <= m));
            }
        }
    }
}
