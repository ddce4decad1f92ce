//! [`CudaOptions`]: how a [`crate::CudaBackend`] runs its kernels, set once when it is opened.
//!
//! Every setting gives the same bytes: the kernel variants exist to measure and test them, and
//! the kernel cache setting says where compiled kernels are kept between processes. The library
//! reads no environment variable of its own: [`CudaOptions::from_env`] is what the prover CLI,
//! the benches and the test suites call, so that one environment runs all of them under one
//! configuration.

use std::path::PathBuf;

use backend_api::{Error, Result};

/// The environment variable [`CudaOptions::from_env`] reads the kernel cache setting from.
pub const KERNEL_CACHE_ENV: &str = "STARK_COMMIT_KERNEL_CACHE";

/// Where the backend keeps the kernel images it compiled, so that a later process loads them
/// instead of compiling them again (seconds per kernel file; see
/// [`crate::CudaBackend::prepare_kernels`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum KernelCacheSetting {
    /// The platform's cache directory, resolved when the backend is opened:
    /// `$XDG_CACHE_HOME/stark-commit/kernels` (else `~/.cache/stark-commit/kernels`) on Linux,
    /// `~/Library/Caches/stark-commit/kernels` on macOS, `%LOCALAPPDATA%\stark-commit\kernels`
    /// on Windows; no cache when none of those variables names a directory.
    #[default]
    Default,
    /// This directory, an absolute path, created (mode `0700`) at first use. A directory owned
    /// by another user, or not private and not ours to fix, is not used (one warning).
    Dir(PathBuf),
    /// No cache: every process compiles the kernels it launches.
    Off,
}

impl KernelCacheSetting {
    /// Parses the value of [`KERNEL_CACHE_ENV`]: `off`, `0` or `none` is [`Self::Off`], any
    /// other value a directory ([`Self::Dir`]).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the variable when the directory is not an absolute path
    /// (a relative one would name a different directory in each working directory).
    pub fn parse_env(value: &str) -> Result<Self> {
        let setting = match value {
            "off" | "0" | "none" => Self::Off,
            dir => Self::Dir(PathBuf::from(dir)),
        };
        setting.validate().map_err(|_| {
            Error::InvalidArgument(format!(
                "{KERNEL_CACHE_ENV}={value:?}: expected an absolute directory, or off to disable the kernel cache"
            ))
        })?;
        Ok(setting)
    }

    /// Checks that a [`Self::Dir`] is an absolute path.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the path.
    pub fn validate(&self) -> Result<()> {
        match self {
            Self::Dir(dir) if !dir.is_absolute() => Err(Error::InvalidArgument(format!(
                "cuda: the kernel cache directory must be an absolute path, got {:?}",
                dir.display().to_string()
            ))),
            _ => Ok(()),
        }
    }
}

/// How the in-place transpose executes the plan's [`backend_api::plan::Step::Copies`] batches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TransposeRoute {
    /// The default: gather kernels; consecutive batches of whole runs are fused into one launch
    /// that moves every run once.
    #[default]
    Kernel,
    /// One `cuMemcpyBatchAsync` per batch (the copy engine).
    Batched,
    /// One `cuMemcpyDtoDAsync` per copy.
    Unbatched,
}

impl TransposeRoute {
    /// Every route.
    pub const ALL: [TransposeRoute; 3] = [TransposeRoute::Kernel, TransposeRoute::Batched, TransposeRoute::Unbatched];

    /// The spelling of `CUDA_TRANSPOSE_ROUTE`: `kernel`, `batched`, `unbatched`.
    pub fn name(self) -> &'static str {
        match self {
            TransposeRoute::Kernel => "kernel",
            TransposeRoute::Batched => "batched",
            TransposeRoute::Unbatched => "unbatched",
        }
    }

    /// Parses [`TransposeRoute::name`].
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the accepted values.
    pub fn parse(s: &str) -> Result<Self> {
        Self::ALL.into_iter().find(|r| r.name() == s).ok_or_else(|| {
            Error::InvalidArgument(format!("transpose route {s:?}: expected one of kernel, batched, unbatched"))
        })
    }
}

/// The shape of the NTT register kernels of the coset LDE: elements each thread holds (the radix
/// of its butterfly groups) and columns per shared-memory tile.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum NttKernel {
    /// Radix 32, 8 columns per 2^11-row tile (512 threads), the one with every lazy-reduction
    /// form ([`CudaOptions::ntt_lazy`]).
    Radix32Cols8,
    /// Radix 16, 8 columns per tile (1024 threads of at most 64 registers: twice the warps of
    /// radix 32); lazy in the lean form only ([`CudaOptions::ntt_lean`]). The default: in its lean
    /// form the LDE 2^21 -> 2^22 x 316 took 63.5 ms on the H200 against 66.2 ms at radix 32
    /// (BENCHMARKS.md, "The lean form at radix 16").
    #[default]
    Radix16Cols8,
    /// Radix 32, 4 columns per tile: half the shared memory, two blocks per multiprocessor.
    Radix32Cols4,
}

impl NttKernel {
    /// Every variant.
    pub const ALL: [NttKernel; 3] = [NttKernel::Radix32Cols8, NttKernel::Radix16Cols8, NttKernel::Radix32Cols4];

    /// Elements per thread: 32 or 16.
    pub fn radix(self) -> u32 {
        match self {
            NttKernel::Radix32Cols8 | NttKernel::Radix32Cols4 => 32,
            NttKernel::Radix16Cols8 => 16,
        }
    }

    /// Columns per tile: 8 or 4.
    pub fn cols(self) -> u32 {
        match self {
            NttKernel::Radix32Cols8 | NttKernel::Radix16Cols8 => 8,
            NttKernel::Radix32Cols4 => 4,
        }
    }

    /// The variant of a radix (`CUDA_NTT_RADIX`) and a column count (`CUDA_NTT_COLS`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for any pair other than 32 x 8, 16 x 8 and 32 x 4.
    pub fn from_radix_cols(radix: u32, cols: u32) -> Result<Self> {
        Self::ALL.into_iter().find(|k| (k.radix(), k.cols()) == (radix, cols)).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "NTT kernel radix {radix} with {cols} columns per tile: the kernels are 32 x 8, 16 x 8 and 32 x 4"
            ))
        })
    }
}

/// How [`crate::CudaBackend::open`] configures the backend. [`Default`] is the fastest measured
/// configuration with the kernel cache in the platform's cache directory; every setting gives the
/// same bytes (the reliability suite checks all of the kernel variants).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CudaOptions {
    /// The in-place transpose's run pass (`CUDA_TRANSPOSE_ROUTE`).
    pub transpose_route: TransposeRoute,
    /// Radix-2 NTT stages fused per LDE pass, 1 to 11 (1 is one stage per launch), capped by the
    /// device's shared memory; `None` is the most the shared memory allows (`CUDA_NTT_STAGES`,
    /// where 0 means `None`).
    pub ntt_stages: Option<u32>,
    /// The NTT register kernel (`CUDA_NTT_RADIX`, `CUDA_NTT_COLS`; `CUDA_NTT_COLS=4` alone is radix
    /// 32, the one 4-column kernel).
    pub ntt_kernel: NttKernel,
    /// Whether the 8-column NTT kernels reduce lazily: values inside a transform are any
    /// u64 congruent mod p, canonicalised by the last pass (the default, `true`), or canonical
    /// after every operation (`CUDA_NTT_LAZY=0`). Radix 16 reduces lazily in the lean form
    /// ([`Self::ntt_lean`]) only; radix 32 x 4 columns always reduces canonically.
    pub ntt_lazy: bool,
    /// Whether the lazy radix-32, 8-column kernel runs its passes in their power-of-two form
    /// (`CUDA_NTT_POW2`, 1 or 0): each element scaled once by a power of a per-tile twiddle
    /// (before a forward pass, after an inverse one), so that the five stages of the pass's
    /// lowest register window have powers of two as twiddles (shifts, no table loads). Ignored by
    /// the other kernels (radix 16 runs its lean form) and by canonical reduction. Off by
    /// default: on the H200 it gives the same bytes but ran 1.72x slower (BENCHMARKS.md, "the
    /// power-of-two form of the lazy passes").
    pub ntt_pow2: bool,
    /// Whether the lazy 8-column kernels (radix 32 and 16) run their lean form (`CUDA_NTT_LEAN`, 1
    /// or 0): the same arithmetic, with each tile's global addresses as one running offset, the
    /// shared-memory exchanges at compile-time offsets, each twiddle at a compile-time offset from
    /// the thread's row of a table gathered by window, and the last inverse pass's coset factors
    /// made per tile in shared memory: ~11 fewer instructions per butterfly in the SASS
    /// (BENCHMARKS.md, "instructions per butterfly from the SASS"). At radix 16 it also runs the
    /// first forward pass's first window and the last inverse pass's last window with
    /// compile-time power-of-two twiddles (BENCHMARKS.md, "the inverse kernel's spills,
    /// power-of-two first window"), and its other windows in four-step form: 15 general
    /// multiplications per 16 elements, then stages whose twiddles are powers of two, the same
    /// values in other (congruent) words inside the transform (BENCHMARKS.md, "The four-step
    /// windows at radix 16"). Ignored by the 4-column
    /// kernel, by canonical reduction and when [`Self::ntt_pow2`] is set. On by default: the
    /// LDE 2^21 -> 2^22 x 316 took 78.1 ms against 83.1 ms without it on the H200, both with
    /// per-stage twiddle loads (BENCHMARKS.md, "call 2 of 13:37 UTC").
    pub ntt_lean: bool,
    /// Where compiled kernel images are kept between processes (`STARK_COMMIT_KERNEL_CACHE`: a
    /// directory, or `off`). Fixed for a device when it is opened:
    /// [`crate::CudaBackend::with_options`] refuses another setting.
    pub kernel_cache: KernelCacheSetting,
    /// Column groups of [`backend_api::Backend::coset_lde_from_host`] from page-locked memory
    /// (`CUDA_UPLOAD_GROUPS`, 1 to [`MAX_UPLOAD_GROUPS`]; default 4): the trace's columns are split
    /// into up to this many groups of whole 8-column NTT tiles, each uploaded by its own
    /// `cuMemcpy2DAsync` on the device's copy stream while the compute stream extends the groups
    /// already there. 1 is no overlap (one copy, then the LDE).
    pub upload_groups: u32,
    /// The smallest trace, in bytes, that [`backend_api::Backend::coset_lde_from_host`] uploads in
    /// groups (default [`UPLOAD_OVERLAP_MIN_BYTES`]); a smaller one is one copy, then the LDE,
    /// since a few launches more cost more than a short copy hides. Tests set 0 to run the
    /// grouped path on small shapes.
    pub upload_overlap_min_bytes: usize,
    /// Whether [`backend_api::Backend::hash_leaves_then_transpose`] hashes the leaves beside the
    /// transpose's block pass (`CUDA_FUSED_LEAVES`, 1 or 0; default on): each launch of the block
    /// pass moves one block of rows and hashes the next, and consecutive launches overlap
    /// (programmatic dependent launch, compute capability 9.0+), so the copies run beside the
    /// hashing instead of after it. Off is the leaves, then the transpose. Only `rows`-layout
    /// leaves of one hash (at most eight trees, BLAKE3 leaves of at most 16 KiB) over a row count
    /// that the transpose's blocks divide are fused; other calls run unfused either way. While
    /// the host builds a shape's transpose plan for the first time in a process, the leaves of
    /// the first blocks (Keccak-256) or all leaves (BLAKE3) are hashed first. On the H200 at
    /// 2^22 x 316 the keccak256 leaves and transpose took 32.9 ms against 35.6 ms unfused (33.5
    /// against 35.7 ms in a fresh process), BLAKE3 19.2 against 19.8 ms (BENCHMARKS.md, "The
    /// leaves beside the transpose's block pass").
    pub fused_leaves: bool,
}

/// The most column groups [`CudaOptions::upload_groups`] accepts.
pub const MAX_UPLOAD_GROUPS: u32 = 64;
/// The default [`CudaOptions::upload_overlap_min_bytes`]: 16 MiB, about 0.3 ms on the bus at
/// 55 GB/s, where the copy to hide is worth a few launches more.
pub const UPLOAD_OVERLAP_MIN_BYTES: usize = 16 << 20;

impl Default for CudaOptions {
    fn default() -> Self {
        Self {
            transpose_route: TransposeRoute::default(),
            ntt_stages: None,
            ntt_kernel: NttKernel::default(),
            ntt_lazy: true,
            ntt_pow2: false,
            ntt_lean: true,
            kernel_cache: KernelCacheSetting::Default,
            upload_groups: 4,
            upload_overlap_min_bytes: UPLOAD_OVERLAP_MIN_BYTES,
            fused_leaves: true,
        }
    }
}

/// Every variable [`CudaOptions::from_env`] reads.
const ENV_VARS: [&str; 10] = [
    "CUDA_TRANSPOSE_ROUTE",
    "CUDA_NTT_STAGES",
    "CUDA_NTT_RADIX",
    "CUDA_NTT_COLS",
    "CUDA_NTT_LAZY",
    "CUDA_NTT_POW2",
    "CUDA_NTT_LEAN",
    "CUDA_UPLOAD_GROUPS",
    "CUDA_FUSED_LEAVES",
    KERNEL_CACHE_ENV,
];

/// The most NTT stages one pass fuses: a 2^11-row tile of 8 columns is 128 KiB of shared memory.
pub(crate) const MAX_NTT_STAGES: u32 = 11;

impl CudaOptions {
    /// These options with the NTT flags that [`Self::ntt_kernel`] ignores cleared, so that two
    /// options run the same NTT kernels exactly when their `ntt_effective()` are equal: radix 32 x
    /// 8 honours all three (the power-of-two form over the lean one, both lazy only); radix 16 is
    /// lazy only in its lean form and has no power-of-two form; radix 32 x 4 reduces canonically.
    pub fn ntt_effective(&self) -> CudaOptions {
        let (ntt_lazy, ntt_pow2, ntt_lean) = match self.ntt_kernel {
            NttKernel::Radix32Cols8 => {
                (self.ntt_lazy, self.ntt_lazy && self.ntt_pow2, self.ntt_lazy && !self.ntt_pow2 && self.ntt_lean)
            }
            NttKernel::Radix16Cols8 => {
                let lean = self.ntt_lazy && self.ntt_lean;
                (lean, false, lean)
            }
            NttKernel::Radix32Cols4 => (false, false, false),
        };
        CudaOptions { ntt_lazy, ntt_pow2, ntt_lean, ..self.clone() }
    }

    /// Every NTT launch configuration of the coset LDE on top of `self`'s other settings: stages
    /// per pass 1, 2, 4 and the most shared memory allows ([`Self::ntt_stages`] `None`), each
    /// register kernel ([`NttKernel::ALL`]), and each form that kernel has: lazy, lazy
    /// power-of-two, lazy lean and canonical for radix 32 x 8 columns, lazy lean and canonical for
    /// radix 16, canonical for radix 32 x 4 columns. Every one gives the same bytes; the backend's
    /// device tests and the reliability suite run each against a reference.
    pub fn ntt_variants(&self) -> Vec<CudaOptions> {
        // Every (lazy, pow2, lean) of every kernel, as the kernel runs it (ntt_effective), once.
        let mut out: Vec<CudaOptions> = Vec::new();
        for ntt_stages in [Some(1), Some(2), Some(4), None] {
            for ntt_kernel in NttKernel::ALL {
                for ntt_lazy in [true, false] {
                    for (ntt_pow2, ntt_lean) in [(false, false), (true, false), (false, true)] {
                        let o = CudaOptions { ntt_stages, ntt_kernel, ntt_lazy, ntt_pow2, ntt_lean, ..self.clone() }
                            .ntt_effective();
                        if !out.contains(&o) {
                            out.push(o);
                        }
                    }
                }
            }
        }
        out
    }

    /// The default options with each setting overridden by its environment variable where that
    /// is set and not empty: `CUDA_TRANSPOSE_ROUTE` (`kernel`, `batched`, `unbatched`),
    /// `CUDA_NTT_STAGES` (0 to 11, 0 = the most shared memory allows), `CUDA_NTT_RADIX` (32, 16),
    /// `CUDA_NTT_COLS` (8, 4), `CUDA_NTT_LAZY` (1, 0), `CUDA_NTT_POW2` (1, 0), `CUDA_NTT_LEAN` (1, 0),
    /// `CUDA_UPLOAD_GROUPS` (1 to [`MAX_UPLOAD_GROUPS`]), `CUDA_FUSED_LEAVES` (1, 0),
    /// `STARK_COMMIT_KERNEL_CACHE` (an absolute directory, or `off`:
    /// [`KernelCacheSetting::parse_env`]).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the variable and its value when a value is not Unicode,
    /// does not parse or is out of range.
    pub fn from_env() -> Result<Self> {
        let mut set = std::collections::HashMap::new();
        for name in ENV_VARS {
            match std::env::var(name) {
                Ok(v) if !v.is_empty() => {
                    set.insert(name, v);
                }
                Ok(_) | Err(std::env::VarError::NotPresent) => {}
                Err(std::env::VarError::NotUnicode(v)) => {
                    return Err(Error::InvalidArgument(format!("{name}={v:?}: the value is not valid Unicode")));
                }
            }
        }
        Self::from_vars(|name| set.get(name).cloned())
    }

    /// [`CudaOptions::from_env`] over any source of variables (`None` for unset).
    fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let mut o = Self::default();
        let bad = |name: &str, value: &str, expected: &str| {
            Error::InvalidArgument(format!("{name}={value:?}: expected {expected}"))
        };
        if let Some(v) = var(KERNEL_CACHE_ENV) {
            o.kernel_cache = KernelCacheSetting::parse_env(&v)?;
        }
        if let Some(v) = var("CUDA_TRANSPOSE_ROUTE") {
            o.transpose_route = TransposeRoute::parse(&v)
                .map_err(|_| bad("CUDA_TRANSPOSE_ROUTE", &v, "kernel, batched or unbatched"))?;
        }
        if let Some(v) = var("CUDA_NTT_STAGES") {
            let expected = format!("0 to {MAX_NTT_STAGES}");
            let k: u32 =
                v.parse().ok().filter(|&k| k <= MAX_NTT_STAGES).ok_or_else(|| bad("CUDA_NTT_STAGES", &v, &expected))?;
            o.ntt_stages = (k != 0).then_some(k);
        }
        let number = |name: &str, allowed: [u32; 2], default: u32| -> Result<u32> {
            match var(name) {
                None => Ok(default),
                Some(v) => v
                    .parse()
                    .ok()
                    .filter(|n| allowed.contains(n))
                    .ok_or_else(|| bad(name, &v, &format!("{} or {}", allowed[0], allowed[1]))),
            }
        };
        let cols = number("CUDA_NTT_COLS", [8, 4], o.ntt_kernel.cols())?;
        // The radix defaults to the default kernel's, or to 32 for a column count it lacks (4).
        let radix_default = NttKernel::from_radix_cols(o.ntt_kernel.radix(), cols).map_or(32, |_| o.ntt_kernel.radix());
        let radix = number("CUDA_NTT_RADIX", [32, 16], radix_default)?;
        o.ntt_kernel = NttKernel::from_radix_cols(radix, cols)?;
        o.ntt_lazy = number("CUDA_NTT_LAZY", [1, 0], 1)? == 1;
        o.ntt_pow2 = number("CUDA_NTT_POW2", [1, 0], u32::from(o.ntt_pow2))? == 1;
        if let Some(v) = var("CUDA_UPLOAD_GROUPS") {
            let expected = format!("1 to {MAX_UPLOAD_GROUPS}");
            o.upload_groups = v
                .parse()
                .ok()
                .filter(|g| (1..=MAX_UPLOAD_GROUPS).contains(g))
                .ok_or_else(|| bad("CUDA_UPLOAD_GROUPS", &v, &expected))?;
        }
        o.ntt_lean = number("CUDA_NTT_LEAN", [1, 0], u32::from(o.ntt_lean))? == 1;
        o.fused_leaves = number("CUDA_FUSED_LEAVES", [1, 0], u32::from(o.fused_leaves))? == 1;
        o.validate()?;
        Ok(o)
    }

    /// Checks the ranges [`crate::CudaBackend::open`] accepts.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for `ntt_stages` outside 1 to 11, `upload_groups` outside 1 to
    /// [`MAX_UPLOAD_GROUPS`], or a kernel cache directory that is not an absolute path.
    pub fn validate(&self) -> Result<()> {
        self.kernel_cache.validate()?;
        if !(1..=MAX_UPLOAD_GROUPS).contains(&self.upload_groups) {
            return Err(Error::InvalidArgument(format!(
                "cuda: upload_groups must be 1 to {MAX_UPLOAD_GROUPS} (1 is no overlap), got {}",
                self.upload_groups
            )));
        }
        match self.ntt_stages {
            Some(k) if !(1..=MAX_NTT_STAGES).contains(&k) => Err(Error::InvalidArgument(format!(
                "cuda: ntt_stages must be 1 to {MAX_NTT_STAGES} (or None for the most shared memory allows), got {k}"
            ))),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn parse(vars: &[(&str, &str)]) -> Result<CudaOptions> {
        let map: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        CudaOptions::from_vars(|name| map.get(name).cloned())
    }

    #[test]
    fn ntt_variants_are_distinct_keep_the_other_settings_and_include_the_default() {
        let base = CudaOptions { upload_groups: 7, transpose_route: TransposeRoute::Batched, ..CudaOptions::default() };
        let v = base.ntt_variants();
        // 4 stage settings x (4 forms of radix 32 x 8 + 2 of radix 16 + 1 of radix 32 x 4).
        assert_eq!(v.len(), 4 * (4 + 2 + 1));
        for (i, a) in v.iter().enumerate() {
            assert_eq!((a.upload_groups, a.transpose_route), (7, TransposeRoute::Batched), "{a:?}");
            assert!(v[i + 1..].iter().all(|b| b != a), "twice: {a:?}");
            // The power-of-two form is of the lazy radix-32, 8-column kernel only, the lean form of
            // the lazy 8-column kernels; each entry selects a kernel of its own.
            assert!(!a.ntt_pow2 || (a.ntt_lazy && a.ntt_kernel == NttKernel::Radix32Cols8), "{a:?}");
            assert!(!a.ntt_lean || (a.ntt_lazy && a.ntt_kernel.cols() == 8), "{a:?}");
            assert!(a.ntt_kernel == NttKernel::Radix32Cols8 || a.ntt_lazy == a.ntt_lean, "{a:?}");
            assert_eq!(&a.ntt_effective(), a, "an entry with a flag its kernel ignores");
        }
        let all = CudaOptions::default().ntt_variants();
        assert!(all.contains(&CudaOptions::default()), "the default (lazy, lean, the most stages)");
        let r32 = CudaOptions { ntt_kernel: NttKernel::Radix32Cols8, ..CudaOptions::default() };
        assert!(all.contains(&r32), "radix 32, lazy, lean");
        assert!(all.contains(&CudaOptions { ntt_lean: false, ..r32 }), "the plain lazy form");
    }

    #[test]
    fn ntt_effective_clears_only_the_flags_the_kernel_ignores() {
        let d = CudaOptions::default();
        assert_eq!(d.ntt_effective(), d, "the default honours its flags");
        let k = |ntt_kernel, ntt_lazy, ntt_pow2, ntt_lean| CudaOptions {
            ntt_kernel,
            ntt_lazy,
            ntt_pow2,
            ntt_lean,
            ..d.clone()
        };
        let eff = |o: CudaOptions| {
            let e = o.ntt_effective();
            (e.ntt_lazy, e.ntt_pow2, e.ntt_lean)
        };
        assert_eq!(eff(k(NttKernel::Radix32Cols8, true, true, true)), (true, true, false), "pow2 over lean");
        assert_eq!(eff(k(NttKernel::Radix32Cols8, false, true, true)), (false, false, false), "forms are lazy");
        assert_eq!(eff(k(NttKernel::Radix16Cols8, true, true, true)), (true, false, true), "no pow2 at radix 16");
        assert_eq!(eff(k(NttKernel::Radix16Cols8, true, false, false)), (false, false, false), "lazy only lean");
        assert_eq!(eff(k(NttKernel::Radix32Cols4, true, true, true)), (false, false, false));
        let o = CudaOptions { upload_groups: 3, ..k(NttKernel::Radix32Cols4, true, false, false) };
        assert_eq!(o.ntt_effective().upload_groups, 3, "the other settings stay");
    }

    #[test]
    fn no_variables_give_the_defaults() {
        let o = parse(&[]).unwrap();
        assert_eq!(o, CudaOptions::default());
        assert_eq!(o.transpose_route, TransposeRoute::Kernel);
        assert_eq!(o.ntt_stages, None);
        assert_eq!((o.ntt_kernel.radix(), o.ntt_kernel.cols()), (16, 8));
        assert!(o.ntt_lazy);
        assert!(!o.ntt_pow2);
        assert!(o.ntt_lean);
        assert_eq!(o.kernel_cache, KernelCacheSetting::Default);
        assert_eq!((o.upload_groups, o.upload_overlap_min_bytes), (4, UPLOAD_OVERLAP_MIN_BYTES));
        assert!(o.fused_leaves);
    }

    #[test]
    fn every_variable_is_read() {
        let o = parse(&[
            ("CUDA_TRANSPOSE_ROUTE", "unbatched"),
            ("CUDA_NTT_STAGES", "3"),
            ("CUDA_NTT_RADIX", "32"),
            ("CUDA_NTT_COLS", "4"),
            ("CUDA_NTT_LAZY", "0"),
            ("CUDA_NTT_POW2", "1"),
            ("CUDA_UPLOAD_GROUPS", "7"),
            ("CUDA_NTT_LEAN", "0"),
            ("CUDA_FUSED_LEAVES", "0"),
            ("STARK_COMMIT_KERNEL_CACHE", "/var/cache/kernels"),
        ])
        .unwrap();
        assert_eq!(
            o,
            CudaOptions {
                transpose_route: TransposeRoute::Unbatched,
                ntt_stages: Some(3),
                ntt_kernel: NttKernel::Radix32Cols4,
                ntt_lazy: false,
                ntt_pow2: true,
                ntt_lean: false,
                kernel_cache: KernelCacheSetting::Dir(PathBuf::from("/var/cache/kernels")),
                upload_groups: 7,
                upload_overlap_min_bytes: UPLOAD_OVERLAP_MIN_BYTES,
                fused_leaves: false,
            }
        );
        // from_env collects exactly the variables from_vars asks for (CUDA_NTT_POW2 was once
        // parsed here but never collected from the environment).
        let asked = std::cell::RefCell::new(Vec::new());
        CudaOptions::from_vars(|name| {
            asked.borrow_mut().push(name.to_string());
            None
        })
        .unwrap();
        let mut asked = asked.into_inner();
        asked.sort();
        asked.dedup();
        let mut listed: Vec<String> = ENV_VARS.iter().map(|s| s.to_string()).collect();
        listed.sort();
        assert_eq!(asked, listed, "CudaOptions::from_env must collect every variable from_vars reads");
        let o =
            parse(&[("CUDA_NTT_RADIX", "16"), ("CUDA_NTT_STAGES", "0"), ("CUDA_TRANSPOSE_ROUTE", "batched")]).unwrap();
        assert_eq!(o.ntt_kernel, NttKernel::Radix16Cols8);
        assert_eq!(o.ntt_stages, None);
        assert_eq!(o.transpose_route, TransposeRoute::Batched);
        assert_eq!(parse(&[("CUDA_NTT_STAGES", "11")]).unwrap().ntt_stages, Some(11));
        // 4 columns alone select the one 4-column kernel; either value alone keeps the other's default.
        assert_eq!(parse(&[("CUDA_NTT_COLS", "4")]).unwrap().ntt_kernel, NttKernel::Radix32Cols4);
        assert_eq!(parse(&[("CUDA_NTT_RADIX", "32")]).unwrap().ntt_kernel, NttKernel::Radix32Cols8);
        assert_eq!(parse(&[("CUDA_NTT_COLS", "8")]).unwrap().ntt_kernel, NttKernel::Radix16Cols8);
    }

    #[test]
    fn bad_values_name_the_variable() {
        for (name, value) in [
            ("CUDA_TRANSPOSE_ROUTE", "fast"),
            ("CUDA_NTT_STAGES", "12"),
            ("CUDA_NTT_STAGES", "-1"),
            ("CUDA_NTT_RADIX", "8"),
            ("CUDA_NTT_COLS", "16"),
            ("CUDA_NTT_LAZY", "yes"),
            ("CUDA_NTT_POW2", "2"),
            ("CUDA_UPLOAD_GROUPS", "0"),
            ("CUDA_UPLOAD_GROUPS", "65"),
            ("CUDA_UPLOAD_GROUPS", "four"),
            ("CUDA_NTT_LEAN", "on"),
            ("STARK_COMMIT_KERNEL_CACHE", "relative/dir"),
            ("STARK_COMMIT_KERNEL_CACHE", "OFF"),
        ] {
            match parse(&[(name, value)]) {
                Err(Error::InvalidArgument(m)) => {
                    assert!(m.contains(name) && m.contains(value), "{name}={value}: {m}")
                }
                other => panic!("{name}={value}: expected InvalidArgument, got {other:?}"),
            }
        }
        // Each value is allowed alone, not together: there is no radix-16, 4-column kernel.
        match parse(&[("CUDA_NTT_RADIX", "16"), ("CUDA_NTT_COLS", "4")]) {
            Err(Error::InvalidArgument(m)) => assert!(m.contains("16") && m.contains('4'), "{m}"),
            other => panic!("radix 16 x 4 columns: expected InvalidArgument, got {other:?}"),
        }
    }

    #[test]
    fn the_kernel_cache_variable_selects_off_or_a_directory() {
        for off in ["off", "0", "none"] {
            assert_eq!(parse(&[(KERNEL_CACHE_ENV, off)]).unwrap().kernel_cache, KernelCacheSetting::Off, "{off}");
        }
        let dir = std::env::temp_dir().join("stark-commit kernels");
        let o = parse(&[(KERNEL_CACHE_ENV, dir.to_str().unwrap())]).unwrap();
        assert_eq!(o.kernel_cache, KernelCacheSetting::Dir(dir));
        // The other settings keep their defaults.
        assert_eq!(CudaOptions { kernel_cache: KernelCacheSetting::Default, ..o }, CudaOptions::default());
    }

    #[test]
    fn kernel_cache_directories_must_be_absolute() {
        for bad in ["", "kernels", "./kernels"] {
            let o = CudaOptions { kernel_cache: KernelCacheSetting::Dir(PathBuf::from(bad)), ..CudaOptions::default() };
            match o.validate() {
                Err(Error::InvalidArgument(m)) => assert!(m.contains("absolute") && m.contains(bad), "{bad:?}: {m}"),
                other => panic!("{bad:?}: expected InvalidArgument, got {other:?}"),
            }
        }
        for good in
            [KernelCacheSetting::Default, KernelCacheSetting::Off, KernelCacheSetting::Dir(std::env::temp_dir())]
        {
            CudaOptions { kernel_cache: good, ..CudaOptions::default() }.validate().unwrap();
        }
    }

    #[test]
    fn stages_are_validated() {
        for k in [0, 12, u32::MAX] {
            let o = CudaOptions { ntt_stages: Some(k), ..CudaOptions::default() };
            assert!(matches!(o.validate(), Err(Error::InvalidArgument(_))), "{k}");
        }
        for k in 1..=MAX_NTT_STAGES {
            CudaOptions { ntt_stages: Some(k), ..CudaOptions::default() }.validate().unwrap();
        }
        CudaOptions::default().validate().unwrap();
    }

    #[test]
    fn upload_groups_are_validated() {
        for g in [0, MAX_UPLOAD_GROUPS + 1, u32::MAX] {
            let o = CudaOptions { upload_groups: g, ..CudaOptions::default() };
            match o.validate() {
                Err(Error::InvalidArgument(m)) => {
                    assert!(m.contains("upload_groups") && m.contains(&g.to_string()), "{m}")
                }
                other => panic!("{g}: expected InvalidArgument, got {other:?}"),
            }
        }
        for g in [1, 2, MAX_UPLOAD_GROUPS] {
            CudaOptions { upload_groups: g, ..CudaOptions::default() }.validate().unwrap();
            assert_eq!(parse(&[("CUDA_UPLOAD_GROUPS", &g.to_string())]).unwrap().upload_groups, g);
        }
    }

    #[test]
    fn kernel_variants_round_trip() {
        for k in NttKernel::ALL {
            assert_eq!(NttKernel::from_radix_cols(k.radix(), k.cols()).unwrap(), k);
        }
        assert!(NttKernel::from_radix_cols(16, 4).is_err());
    }

    #[test]
    fn transpose_routes_parse() {
        for r in TransposeRoute::ALL {
            assert_eq!(TransposeRoute::parse(r.name()).unwrap(), r);
        }
        assert!(matches!(TransposeRoute::parse("fast"), Err(Error::InvalidArgument(_))));
    }
}
