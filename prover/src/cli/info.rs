//! `prover plan`, `prover backends` and `prover prepare`: what fits, what is here, and kernels
//! made ready ahead.

use super::*;

pub(super) fn run_plan(args: &PlanArgs) -> Result<u8> {
    let params = params_of(&args.shape);
    let rows = 1usize << args.log_rows;
    let plan = CommitPlan::new(rows, args.cols, &params)?;
    let (budget, source) = match params.budget {
        Some(b) => (b, "--budget"),
        None => (default_budget(args.memory), "80% of memory"),
    };
    let report = PlanReport::new(&plan, &params, args.memory, budget, source);
    print(&if args.shape.json { to_json(&report)? } else { report.to_string() })?;
    Ok(if report.fits { EXIT_OK } else { EXIT_REFUSED_OR_DEVICE })
}

pub(super) fn run_backends<P: Ports>(args: &BackendsArgs, registry: &Registry<P>) -> Result<u8> {
    let status = registry.probe_all();
    let auto = registry.select(AUTO).map(|(b, _)| b.name()).unwrap_or("none");
    if args.json {
        let v = serde_json::json!({ "backends": status, "auto": auto, "auto_order": registry.auto_order() });
        print(&to_json(&v)?)?;
        return Ok(EXIT_OK);
    }
    let width = status.iter().map(|s| s.backend.len()).max().unwrap_or(0).max(5);
    let mut text = String::from("backends:\n");
    for s in &status {
        let line = match (&s.device, &s.reason) {
            (Some(d), _) => format!("usable: {d}{}", if s.software { " (software adapter)" } else { "" }),
            (None, r) => r.clone().unwrap_or_else(|| "unavailable".into()),
        };
        let port = if s.port { " [port]" } else { "" };
        text.push_str(&format!("  {:<width$} {line}{port}\n", s.backend));
    }
    text.push_str(&format!("--backend auto tries: {}\n", registry.auto_order().join(", ")));
    text.push_str(&format!("--backend auto picks: {auto}"));
    print(&text)?;
    Ok(EXIT_OK)
}

/// One kernel unit as `prover prepare` reports it.
#[cfg(feature = "cuda")]
#[derive(serde::Serialize, Debug)]
pub(super) struct PreparedUnit {
    /// `lde.cu:ntt_dif_pass_lean16`, or a whole file such as `merkle.cu`.
    pub(super) unit: String,
    /// `embedded`, `compiled` or `cached`.
    pub(super) origin: &'static str,
    /// What the image is for: `sm_90` (CUBIN) or `compute_90` (PTX); empty when not known.
    pub(super) target: String,
    /// Time to compile the unit or read it from the cache.
    pub(super) seconds: f64,
    /// The image's size.
    pub(super) bytes: usize,
}

/// What `prover prepare` did for one architecture.
#[cfg(feature = "cuda")]
#[derive(serde::Serialize, Debug)]
pub(super) struct PreparedArch {
    /// `sm_90`.
    pub(super) arch: String,
    /// The device prepared, when it was one (`NVIDIA H200 (device 0)`), else `null`.
    pub(super) device: Option<String>,
    /// The kernel cache directory (`null`: caching is off).
    pub(super) cache_dir: Option<PathBuf>,
    /// Every unit.
    pub(super) units: Vec<PreparedUnit>,
}

/// `prover prepare`: the kernel cache filled for the device here or for named architectures.
pub(super) fn run_prepare(args: &PrepareArgs) -> Result<u8> {
    if args.backend != "cuda" {
        return Err(ProverError::Usage(format!(
            "prepare: only the cuda backend keeps compiled kernels between processes; `--backend {}` has nothing to \
             prepare ahead",
            args.backend
        )));
    }
    #[cfg(feature = "cuda")]
    {
        use backend_cuda::ImageOrigin;
        let origin = |o: ImageOrigin| match o {
            ImageOrigin::Embedded => "embedded",
            ImageOrigin::Compiled => "compiled",
            ImageOrigin::Cache => "cached",
        };
        let archs =
            args.arch.iter().map(|a| backend_cuda::parse_arch(a.trim())).collect::<std::result::Result<Vec<_>, _>>()?;
        let options = backend_cuda::CudaOptions::from_env()?;
        let mut done = Vec::new();
        if archs.is_empty() {
            let backend = backend_cuda::CudaBackend::open(0, options.clone()).map_err(|e| match e {
                backend_api::Error::BackendUnavailable { backend, reason } => backend_api::Error::BackendUnavailable {
                    backend,
                    reason: format!(
                        "{reason}; to prepare without a device, name the architecture: prover prepare --arch sm_90"
                    ),
                },
                e => e,
            })?;
            let (major, minor) = backend.compute_capability();
            let units = backend.prepare_all_kernels()?;
            done.push(PreparedArch {
                arch: format!("sm_{major}{minor}"),
                device: Some(format!("{} (device 0)", Backend::info(&backend).device)),
                cache_dir: backend.kernel_cache_dir().map(|d| d.to_path_buf()),
                units: units
                    .into_iter()
                    .map(|u| PreparedUnit {
                        unit: u.unit,
                        origin: origin(u.origin),
                        target: String::new(),
                        seconds: u.image_time.as_secs_f64(),
                        bytes: u.image_bytes,
                    })
                    .collect(),
            });
        }
        for arch in archs {
            let report = backend_cuda::prepare_kernel_cache(arch, &options.kernel_cache)?;
            done.push(PreparedArch {
                arch: format!("sm_{arch}"),
                device: None,
                cache_dir: report.cache_dir,
                units: report
                    .units
                    .into_iter()
                    .map(|u| PreparedUnit {
                        unit: u.unit,
                        origin: origin(u.origin),
                        target: u.target,
                        seconds: u.time.as_secs_f64(),
                        bytes: u.image_bytes,
                    })
                    .collect(),
            });
        }
        let embedded = backend_cuda::embedded_kernels();
        let embedded_text = match (&embedded.nvrtc_version, &embedded.not_built) {
            (Some((major, minor)), _) => format!(
                "{} images for {} (NVRTC {major}.{minor}, {:.1} MB)",
                embedded.images,
                embedded.archs.iter().map(|a| format!("sm_{a}")).collect::<Vec<_>>().join(", "),
                embedded.bytes as f64 / 1e6
            ),
            (None, reason) => format!("none ({})", reason.as_deref().unwrap_or("not built")),
        };
        if args.json {
            let v = serde_json::json!({ "embedded": embedded_text, "prepared": done });
            print(&to_json(&v)?)?;
            return Ok(EXIT_OK);
        }
        let mut text = format!("embedded kernels: {embedded_text}\n");
        for a in &done {
            let dir = a.cache_dir.as_ref().map_or("off (nothing is kept)".to_string(), |d| d.display().to_string());
            let on = a.device.as_ref().map_or(String::new(), |d| format!(" on {d}"));
            text.push_str(&format!("{}{on}, kernel cache: {dir}\n", a.arch));
            let width = a.units.iter().map(|u| u.unit.len()).max().unwrap_or(0);
            for u in &a.units {
                let detail = match u.origin {
                    "embedded" => String::new(),
                    _ => format!(
                        "  {}{:.2} s  {} B",
                        if u.target.is_empty() { String::new() } else { format!("{}  ", u.target) },
                        u.seconds,
                        u.bytes
                    ),
                };
                text.push_str(&format!("  {:<width$}  {:<8}{detail}\n", u.unit, u.origin));
            }
            let count = |o: &str| a.units.iter().filter(|u| u.origin == o).count();
            text.push_str(&format!(
                "{}: {} units: {} embedded, {} compiled now, {} already cached\n",
                a.arch,
                a.units.len(),
                count("embedded"),
                count("compiled"),
                count("cached")
            ));
        }
        print(text.trim_end())?;
        Ok(EXIT_OK)
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = (&args.arch, args.json);
        Err(backend_api::Error::BackendUnavailable {
            backend: "cuda",
            reason: "not compiled into this binary (rebuild with `--features cuda`)".into(),
        }
        .into())
    }
}
