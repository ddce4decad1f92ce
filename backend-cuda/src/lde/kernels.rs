//! Which kernel runs an NTT pass, and its launch shape: threads per block and dynamic shared
//! memory, sized here to what lde.cu's kernels lay out.
//!
//! A pass of fewer than [`REG_MIN_STAGES`] stages (only the passes of a trace below 2^5 rows)
//! runs the shared-memory kernel (`ntt_dif_pass`, `ntt_dit_pass`: 512 threads, canonical
//! arithmetic); every other pass the register kernel (`ntt_dif_pass_lean16`,
//! `ntt_dit_pass_lean16`): radix 16 over 8 columns, 1024 threads of at most 64 registers for a
//! 2^11-row tile, lazy reduction, its 16-point windows in four-step form. On the H200 the LDE
//! 2^21 -> 2^22 x 316 took 63.5 ms with it against 66.2 ms with the radix-32 kernel that it
//! replaced (the git history of BENCHMARKS.md, "The lean form at radix 16"), and less since (the four-step windows
//! and the fused power-of-two butterflies).

use backend_api::ELEM_BYTES;

use crate::context::Device;

/// Columns per tile (`NTT_COLS` and the register kernel's `COLS` in lde.cu).
pub(super) const NTT_COLS: usize = 8;
/// Threads per block of the shared-memory kernel (`__launch_bounds__(512)`).
const BLOCK: u32 = 512;
/// Elements per thread of the register kernel (`R = 2^LOGR` in lde.cu).
const RADIX: u32 = 16;
/// Stages per pass from which the register kernel runs a pass.
pub(super) const REG_MIN_STAGES: u32 = 5;
/// The most NTT stages one pass fuses: a 2^11-row tile of 8 columns is 128 KiB of shared memory.
pub(super) const MAX_NTT_STAGES: u32 = 11;

/// Stages per pass: the most the device's shared memory allows (the register kernel's tile and
/// twiddles), up to [`MAX_NTT_STAGES`], and at least 1: 11 on the H100 and H200 (227 KiB per
/// block), fewer on devices with less shared memory per block.
pub(super) fn stages_per_pass(device: &Device) -> u32 {
    stages_fitting(device.max_shared_optin)
}

/// The most stages per pass whose register-kernel block fits `max_shared` bytes of shared memory
/// per block, 2 to [`MAX_NTT_STAGES`], else 1.
fn stages_fitting(max_shared: usize) -> u32 {
    (2..=MAX_NTT_STAGES).rev().find(|&k| reg_block_bytes(k) <= max_shared).unwrap_or(1)
}

/// The kernel of one NTT pass: inverse (`dit` false) or forward, register kernel or shared-memory
/// kernel.
pub(crate) fn pass_kernel(dit: bool, reg: bool) -> &'static str {
    match (dit, reg) {
        (false, false) => "ntt_dif_pass",
        (true, false) => "ntt_dit_pass",
        (false, true) => "ntt_dif_pass_lean16",
        (true, true) => "ntt_dit_pass_lean16",
    }
}

/// How one NTT pass launches.
pub(super) struct PassLaunch {
    /// The kernel ([`pass_kernel`]).
    pub(super) name: &'static str,
    /// Threads per block.
    pub(super) threads: u32,
    /// Dynamic shared memory per block, in bytes.
    pub(super) shared: usize,
    /// Columns per tile: a block covers this many columns of its tile's rows.
    pub(super) cols: usize,
}

/// The launch of a pass of `k` stages, forward (`dit`) or inverse, the inverse's last (`finish`)
/// or another.
pub(super) fn pass_launch(dit: bool, k: u32, finish: bool) -> PassLaunch {
    let reg = k >= REG_MIN_STAGES;
    let name = pass_kernel(dit, reg);
    if reg {
        let threads = ((1usize << k) * NTT_COLS / RADIX as usize) as u32;
        PassLaunch { name, threads, shared: reg_pass_bytes(k, dit, finish), cols: NTT_COLS }
    } else {
        PassLaunch { name, threads: BLOCK, shared: (1usize << k) * NTT_COLS * ELEM_BYTES, cols: NTT_COLS }
    }
}

/// The slots of the register kernel's gathered twiddles for a pass of `k >= log2(RADIX)` stages,
/// by window (lde.cu's `gather_four_step`, in the rows of the lean layout): the window at local
/// bit `w` has `2^w` rows of `RADIX - 1`, and the windows are, for DIT, at `w = min(n log2(RADIX),
/// k - log2(RADIX))` and, for DIF, at `w = max(k - (n + 1) log2(RADIX), 0)`, `n < ceil(k /
/// log2(RADIX))`. Below one window (`k < log2(RADIX)`, only in the search for the most stages
/// that fit), `2^k`.
fn twiddle_slots(k: u32, dit: bool) -> usize {
    let log_r = RADIX.trailing_zeros();
    if k < log_r {
        return 1 << k;
    }
    (0..k.div_ceil(log_r))
        .map(|n| {
            let w = if dit { (n * log_r).min(k - log_r) } else { k.saturating_sub((n + 1) * log_r) };
            (1usize << w) * (RADIX as usize - 1)
        })
        .sum()
}

/// Shared memory of a register kernel's block for a pass of `k` stages, forward (`dit`) or
/// inverse, the inverse's last (`finish`) or another: the tile (`2^k x 8`, padded by 8 elements
/// per `RADIX` rows: lde.cu's `tile_slot`), the tile's gathered twiddles ([`twiddle_slots`]) and,
/// for the last inverse pass (`coset_factors`), the tile's `2^k` coset factors with one slot
/// skipped after every `RADIX` (lde.cu's `cf_slot`).
///
/// The other passes do not reserve the coset factors' slots: the multiprocessor's shared memory
/// and L1 cache are one array, and the driver sizes the shared part to the blocks that run. A
/// 2^11 x 8 tile with its twiddles fits a 164 KiB carve-out, 16 KiB more take the next one (196
/// KiB), and the L1 cache that the forward passes' twiddle gathers hit shrinks by a third
/// (the git history of BENCHMARKS.md, "shared-memory banks of the exchanges").
fn reg_pass_bytes(k: u32, dit: bool, finish: bool) -> usize {
    let (rows, pad) = (1usize << k, (1usize << k) / RADIX as usize);
    let cf = if finish && !dit { rows + pad } else { 0 };
    (rows * NTT_COLS + pad * NTT_COLS + twiddle_slots(k, dit) + cf) * ELEM_BYTES
}

/// The most shared memory the register kernel needs for a pass of `k` stages, forward or inverse:
/// every NTT kernel's limit is raised to this once ([`Device::kernel`]).
pub(super) fn reg_block_bytes(k: u32) -> usize {
    reg_pass_bytes(k, false, true).max(reg_pass_bytes(k, true, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lean form's twiddle rows: the windows ntt_pass_reg runs (its loop, step by step) hold
    /// each stage once, and [`twiddle_slots`] counts `2^w` rows of `RADIX - 1` for each; the
    /// finish's other placement reads the same tables; the block fits an H200's shared memory
    /// (227 KiB) at 11 stages.
    #[test]
    fn lean_twiddle_rows_cover_the_windows_the_kernel_runs() {
        {
            let (log_r, radix) = (RADIX.trailing_zeros(), RADIX);
            for k in log_r..=MAX_NTT_STAGES {
                for dit in [false, true] {
                    // lde.cu's window loop: DIT from stage 0 up, DIF from k down.
                    let (mut windows, mut seen) = (Vec::new(), vec![0; k as usize]);
                    let (mut w, mut next) = (if dit { 0 } else { k - log_r }, if dit { 0 } else { k });
                    loop {
                        let stages = if dit { next..(next + log_r).min(k) } else { next.saturating_sub(log_r)..next };
                        for e in stages.clone() {
                            assert!(e >= w && e - w < log_r, "k {k}, radix {radix}, dit {dit}: stage {e} at w {w}");
                            seen[e as usize] += 1;
                        }
                        windows.push(w);
                        next = if dit { stages.end } else { stages.start };
                        if (dit && next >= k) || (!dit && next == 0) {
                            break;
                        }
                        w = if dit { next.min(k - log_r) } else { next.saturating_sub(log_r) };
                    }
                    assert!(seen.iter().all(|&c| c == 1), "k {k}, radix {radix}, dit {dit}: {seen:?}");
                    let rows: usize = windows.iter().map(|&w| (1usize << w) * (radix as usize - 1)).sum();
                    assert_eq!(twiddle_slots(k, dit), rows, "k {k}, radix {radix}, dit {dit}");
                    assert!(rows >= (1 << k) - 1, "k {k}: {rows} slots for {} twiddles", (1 << k) - 1);
                }
            }
        }
        // The radix-16 finish's placement (lde.cu's pow2_last): windows end at stage LOGR, and the
        // last, [0, LOGR), needs no table. Every stage above it must find its window's table at
        // the window's own index and bit, as the kernel computes its row from both.
        let log_r = 4u32;
        for k in log_r + 1..=MAX_NTT_STAGES {
            let table_w = |n: u32| k.saturating_sub((n + 1) * log_r);
            let (mut w, mut next, mut window) = (k - log_r, k, 0);
            while w != 0 {
                let bot = if next >= 2 * log_r { next - log_r } else { log_r };
                for e in bot..next {
                    assert_eq!((k - 1 - e) / log_r, window, "k {k}: stage {e}");
                    assert_eq!(table_w(window), w, "k {k}: stage {e} in window {window}");
                    assert!(e - w < log_r, "k {k}: stage {e} at w {w}");
                }
                next = bot;
                w = next.saturating_sub(log_r);
                window += 1;
            }
            assert_eq!(next, log_r, "k {k}: the last window is [0, {log_r})");
        }
        assert_eq!(twiddle_slots(11, false), 15 * (128 + 8 + 1));
        assert_eq!(twiddle_slots(11, true), 15 * (1 + 16 + 128));
        // Below a window (the stage search's small passes), a slot per row.
        assert_eq!((twiddle_slots(2, true), twiddle_slots(3, false)), (4, 8));
        assert!(reg_block_bytes(11) <= 227 * 1024, "{} bytes", reg_block_bytes(11));
        // The default kernel's passes without coset factors keep the 164 KiB carve-out: one block
        // of 2^11 rows or two of 2^10, with 1 KiB reserved per block.
        for dit in [false, true] {
            assert!(reg_pass_bytes(11, dit, false) + 1024 <= 164 * 1024, "dit {dit}");
            assert!(2 * (reg_pass_bytes(10, dit, false) + 1024) <= 164 * 1024, "dit {dit}");
        }
        let cf = reg_pass_bytes(10, false, true) - reg_pass_bytes(10, false, false);
        assert_eq!(cf, (1024 + 1024 / 16) * ELEM_BYTES, "the finish's coset factors, one slot skipped per 16");
        assert_eq!(reg_pass_bytes(10, true, true), reg_pass_bytes(10, true, false), "forward: none");
    }

    /// On every device with at least 64 KiB of shared memory per block (compute capability 7.0 and
    /// later), a pass runs the shared-memory kernel exactly when its transform is shorter than
    /// 2^5 rows (the module doc's claim): the stage split of a longer one has no pass below five
    /// stages. The H100 and H200 (227 KiB) fuse 11 stages per pass.
    #[test]
    fn only_transforms_below_32_rows_run_the_shared_memory_kernel() {
        assert_eq!(stages_fitting(227 * 1024), 11);
        for kib in [64, 96, 99, 100, 163, 227] {
            let max_k = stages_fitting(kib * 1024);
            assert!(max_k >= 9, "{kib} KiB: {max_k} stages");
            for log_n in 0..=32 {
                for k in super::super::plan::split(log_n, max_k) {
                    assert_eq!(k < REG_MIN_STAGES, log_n < REG_MIN_STAGES, "{kib} KiB, 2^{log_n} rows: a pass of {k}");
                }
            }
        }
    }

    /// The launch shapes: the shared-memory kernel below five stages, the register kernel from
    /// five, each with the threads and shared memory its tile takes.
    #[test]
    fn passes_launch_the_kernel_of_their_stage_count() {
        for k in 0..REG_MIN_STAGES {
            let l = pass_launch(false, k, true);
            assert_eq!((l.name, l.threads, l.cols), ("ntt_dif_pass", 512, 8), "k {k}");
            assert_eq!(l.shared, (1 << k) * 8 * ELEM_BYTES, "k {k}");
            assert_eq!(pass_launch(true, k, false).name, "ntt_dit_pass", "k {k}");
        }
        for k in REG_MIN_STAGES..=MAX_NTT_STAGES {
            let l = pass_launch(true, k, false);
            assert_eq!((l.name, l.threads), ("ntt_dit_pass_lean16", 1 << (k - 1)), "k {k}");
            assert_eq!(pass_launch(false, k, false).name, "ntt_dif_pass_lean16", "k {k}");
            assert!(pass_launch(false, k, true).shared > pass_launch(false, k, false).shared, "k {k}");
            assert!(l.shared <= reg_block_bytes(k), "k {k}");
        }
        assert_eq!(pass_launch(true, 11, false).threads, 1024);
    }
}
