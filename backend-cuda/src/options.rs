//! [`CudaOptions`]: how a [`crate::CudaBackend`] runs its kernels, set once when it is opened.
//!
//! Every setting gives the same bytes: the kernel cache setting says where compiled kernels are
//! kept between processes, and the upload settings how a host trace's upload overlaps its LDE.
//! The library reads no environment variable of its own: [`CudaOptions::from_env`] is what the
//! prover CLI, the benches and the test suites call, so that one environment runs all of them
//! under one configuration.

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

/// How [`crate::CudaBackend::open`] configures the backend. [`Default`] is the fastest measured
/// configuration with the kernel cache in the platform's cache directory; every setting gives the
/// same bytes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CudaOptions {
    /// Where compiled kernel images are kept between processes (`STARK_COMMIT_KERNEL_CACHE`: a
    /// directory, or `off`). Fixed for a device when it is opened:
    /// [`crate::CudaBackend::with_options`] refuses another setting.
    ///
    /// Change it when the home directory is not writable or is shared between machines with
    /// different GPUs or drivers (a directory per machine, [`KernelCacheSetting::Dir`]), or to
    /// measure a cold start ([`KernelCacheSetting::Off`]: every process compiles the kernels it
    /// launches, seconds per kernel file).
    pub kernel_cache: KernelCacheSetting,
    /// Column groups of [`backend_api::Backend::coset_lde_from_host`] from page-locked memory
    /// (`CUDA_UPLOAD_GROUPS`, 1 to [`MAX_UPLOAD_GROUPS`]; default 4): the trace's columns are split
    /// into up to this many groups of whole 8-column NTT tiles, each uploaded by its own
    /// `cuMemcpy2DAsync` on the device's copy stream while the compute stream extends the groups
    /// already there. 1 is no overlap (one copy, then the LDE).
    ///
    /// Change it when the bus and the LDE take very different times on your machine: with
    /// upload `U` and LDE `L` the call takes about `U + L / G`, and every group adds the launches
    /// of one LDE plan, so more groups pay off on a slow bus (PCIe 4 or a shared link) and fewer
    /// on a narrow trace; `cargo bench -p backend-cuda --bench cuda_ops -- --ops host-lde
    /// --upload-groups 1,2,4,8` measures the choice.
    pub upload_groups: u32,
    /// The smallest trace, in bytes, that [`backend_api::Backend::coset_lde_from_host`] uploads in
    /// groups (default [`UPLOAD_OVERLAP_MIN_BYTES`]); a smaller one is one copy, then the LDE,
    /// since a few launches more cost more than a short copy hides.
    ///
    /// Change it only together with [`Self::upload_groups`], after measuring small traces on
    /// your machine; tests set 0 to run the grouped path on small shapes.
    pub upload_overlap_min_bytes: usize,
    /// Points of the quotient domain each thread of [`backend_api::Backend::quotient_values`]
    /// evaluates at once (`CUDA_QUOTIENT_POINTS`, 1, the default, or [`QUOTIENT_POINTS`]): the
    /// interpreter fetches and dispatches each instruction once for that many points. One is the
    /// default since the kernel runs its own instruction set (leaves read in place, folds fused):
    /// on an H100 on 2026-12-07, the Fibonacci AIR's quotient took 8.7 ms at 2^21 points and one
    /// point per thread against 12.9 ms at four (1.0 against 2.0 ms at 2^17). A program whose
    /// register files for four points per thread do not fit in 48 KiB of shared memory per block
    /// runs one either way.
    ///
    /// Change it only to measure the choice (the prove bench of the Plonky3 adapter, whose
    /// default device reads the environment); every setting gives the same values.
    pub quotient_points: u32,
}

/// The points per thread [`CudaOptions::quotient_points`] takes beside 1 (the default).
pub const QUOTIENT_POINTS: u32 = 4;

/// The most column groups [`CudaOptions::upload_groups`] accepts.
pub const MAX_UPLOAD_GROUPS: u32 = 64;
/// The default [`CudaOptions::upload_overlap_min_bytes`]: 16 MiB, about 0.3 ms on the bus at
/// 55 GB/s, where the copy to hide is worth a few launches more.
pub const UPLOAD_OVERLAP_MIN_BYTES: usize = 16 << 20;

impl Default for CudaOptions {
    fn default() -> Self {
        Self {
            kernel_cache: KernelCacheSetting::Default,
            upload_groups: 4,
            upload_overlap_min_bytes: UPLOAD_OVERLAP_MIN_BYTES,
            quotient_points: 1,
        }
    }
}

/// Every variable [`CudaOptions::from_env`] reads.
const ENV_VARS: [&str; 3] = ["CUDA_UPLOAD_GROUPS", KERNEL_CACHE_ENV, "CUDA_QUOTIENT_POINTS"];

impl CudaOptions {
    /// The default options with each setting overridden by its environment variable where that
    /// is set and not empty: `CUDA_UPLOAD_GROUPS` (1 to [`MAX_UPLOAD_GROUPS`]),
    /// `STARK_COMMIT_KERNEL_CACHE` (an absolute directory, or `off`:
    /// [`KernelCacheSetting::parse_env`]), `CUDA_QUOTIENT_POINTS` (1 or [`QUOTIENT_POINTS`]).
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
        if let Some(v) = var(KERNEL_CACHE_ENV) {
            o.kernel_cache = KernelCacheSetting::parse_env(&v)?;
        }
        if let Some(v) = var("CUDA_UPLOAD_GROUPS") {
            o.upload_groups = v.parse().ok().filter(|g| (1..=MAX_UPLOAD_GROUPS).contains(g)).ok_or_else(|| {
                Error::InvalidArgument(format!("CUDA_UPLOAD_GROUPS={v:?}: expected 1 to {MAX_UPLOAD_GROUPS}"))
            })?;
        }
        if let Some(v) = var("CUDA_QUOTIENT_POINTS") {
            o.quotient_points = v.parse().ok().filter(|&p| p == 1 || p == QUOTIENT_POINTS).ok_or_else(|| {
                Error::InvalidArgument(format!("CUDA_QUOTIENT_POINTS={v:?}: expected 1 or {QUOTIENT_POINTS}"))
            })?;
        }
        o.validate()?;
        Ok(o)
    }

    /// Checks the ranges [`crate::CudaBackend::open`] accepts.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for `upload_groups` outside 1 to [`MAX_UPLOAD_GROUPS`], a
    /// `quotient_points` other than 1 or [`QUOTIENT_POINTS`], or a kernel cache directory that is
    /// not an absolute path.
    pub fn validate(&self) -> Result<()> {
        self.kernel_cache.validate()?;
        if !(1..=MAX_UPLOAD_GROUPS).contains(&self.upload_groups) {
            return Err(Error::InvalidArgument(format!(
                "cuda: upload_groups must be 1 to {MAX_UPLOAD_GROUPS} (1 is no overlap), got {}",
                self.upload_groups
            )));
        }
        if self.quotient_points != 1 && self.quotient_points != QUOTIENT_POINTS {
            return Err(Error::InvalidArgument(format!(
                "cuda: quotient_points must be 1 or {QUOTIENT_POINTS}, got {}",
                self.quotient_points
            )));
        }
        Ok(())
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
    fn no_variables_give_the_defaults() {
        let o = parse(&[]).unwrap();
        assert_eq!(o, CudaOptions::default());
        assert_eq!(o.kernel_cache, KernelCacheSetting::Default);
        assert_eq!((o.upload_groups, o.upload_overlap_min_bytes), (4, UPLOAD_OVERLAP_MIN_BYTES));
        assert_eq!(o.quotient_points, 1);
    }

    #[test]
    fn quotient_points_are_one_or_four() {
        for p in [0, 2, 3, 5, 8, u32::MAX] {
            let o = CudaOptions { quotient_points: p, ..CudaOptions::default() };
            match o.validate() {
                Err(Error::InvalidArgument(m)) => {
                    assert!(m.contains("quotient_points") && m.contains(&p.to_string()), "{m}")
                }
                other => panic!("{p}: expected InvalidArgument, got {other:?}"),
            }
        }
        for p in [1, QUOTIENT_POINTS] {
            CudaOptions { quotient_points: p, ..CudaOptions::default() }.validate().unwrap();
            assert_eq!(parse(&[("CUDA_QUOTIENT_POINTS", &p.to_string())]).unwrap().quotient_points, p);
        }
    }

    #[test]
    fn every_variable_is_read() {
        let o = parse(&[
            ("CUDA_UPLOAD_GROUPS", "7"),
            ("STARK_COMMIT_KERNEL_CACHE", "/var/cache/kernels"),
            ("CUDA_QUOTIENT_POINTS", "1"),
        ])
        .unwrap();
        assert_eq!(
            o,
            CudaOptions {
                kernel_cache: KernelCacheSetting::Dir(PathBuf::from("/var/cache/kernels")),
                upload_groups: 7,
                upload_overlap_min_bytes: UPLOAD_OVERLAP_MIN_BYTES,
                quotient_points: 1,
            }
        );
        // from_env collects exactly the variables from_vars asks for.
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
    }

    /// The variables of the kernel variants that were removed are not read: setting one changes
    /// nothing.
    #[test]
    fn removed_variant_variables_are_ignored() {
        for name in [
            "CUDA_TRANSPOSE_ROUTE",
            "CUDA_NTT_STAGES",
            "CUDA_NTT_RADIX",
            "CUDA_NTT_COLS",
            "CUDA_NTT_LAZY",
            "CUDA_NTT_LEAN",
            "CUDA_NTT_POW2",
            "CUDA_FUSED_LEAVES",
        ] {
            assert!(!ENV_VARS.contains(&name), "{name}");
            assert_eq!(parse(&[(name, "0")]).unwrap(), CudaOptions::default(), "{name}");
        }
    }

    #[test]
    fn bad_values_name_the_variable() {
        for (name, value) in [
            ("CUDA_UPLOAD_GROUPS", "0"),
            ("CUDA_UPLOAD_GROUPS", "65"),
            ("CUDA_UPLOAD_GROUPS", "four"),
            ("CUDA_UPLOAD_GROUPS", "-1"),
            ("CUDA_QUOTIENT_POINTS", "0"),
            ("CUDA_QUOTIENT_POINTS", "2"),
            ("CUDA_QUOTIENT_POINTS", "8"),
            ("CUDA_QUOTIENT_POINTS", "four"),
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
}
