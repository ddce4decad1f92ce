//! Choosing a backend at run time: which are compiled in, which are usable here, and `auto`.
//!
//! The pipeline is generic over [`Backend`]; this module is the one place that names the
//! concrete backends. A [`SelectedBackend`] hands its backend to a [`BackendVisitor`], so callers
//! write their work once, generically.

use backend_api::Backend;
use backend_cpu::CpuBackend;

use crate::error::Result;

/// Which backend to run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendChoice {
    /// CUDA when a device is usable, else a hardware (non-software) wgpu adapter, else the CPU.
    Auto,
    /// The CPU (rayon) backend, always available.
    Cpu,
    /// The CUDA backend, device 0 (needs the `cuda` feature).
    Cuda,
    /// The wgpu backend, software adapters allowed (needs the `wgpu` feature).
    Wgpu,
}

/// A constructed backend.
pub enum SelectedBackend {
    /// The CPU backend.
    Cpu(CpuBackend),
    /// The CUDA backend.
    #[cfg(feature = "cuda")]
    Cuda(backend_cuda::CudaBackend),
    /// The wgpu backend.
    #[cfg(feature = "wgpu")]
    Wgpu(backend_wgpu::WgpuBackend),
}

/// Work written once over any backend.
pub trait BackendVisitor {
    /// What the work returns.
    type Output;
    /// Runs the work on `backend`.
    fn visit<B: Backend>(self, backend: &B) -> Self::Output;
}

impl SelectedBackend {
    /// Runs `visitor` on the backend inside.
    pub fn visit<V: BackendVisitor>(&self, visitor: V) -> V::Output {
        match self {
            SelectedBackend::Cpu(b) => visitor.visit(b),
            #[cfg(feature = "cuda")]
            SelectedBackend::Cuda(b) => visitor.visit(b),
            #[cfg(feature = "wgpu")]
            SelectedBackend::Wgpu(b) => visitor.visit(b),
        }
    }

    /// The backend's short name.
    pub fn name(&self) -> &'static str {
        match self {
            SelectedBackend::Cpu(_) => "cpu",
            #[cfg(feature = "cuda")]
            SelectedBackend::Cuda(_) => "cuda",
            #[cfg(feature = "wgpu")]
            SelectedBackend::Wgpu(_) => "wgpu",
        }
    }

    /// Whether this is a software adapter (only wgpu can be).
    pub fn is_software(&self) -> bool {
        match self {
            #[cfg(feature = "wgpu")]
            SelectedBackend::Wgpu(b) => b.is_software(),
            _ => false,
        }
    }
}

#[cfg(not(all(feature = "cuda", feature = "wgpu")))]
fn not_compiled(name: &str) -> backend_api::Error {
    backend_api::Error::BackendUnavailable {
        backend: name.into(),
        reason: format!("not compiled into this binary (rebuild with `--features {name}`)"),
    }
}

/// Constructs the CUDA backend on device 0.
///
/// # Errors
/// [`backend_api::Error::BackendUnavailable`] when the `cuda` feature is off; the backend's own error when no
/// driver or device is usable.
pub fn cuda() -> Result<SelectedBackend> {
    #[cfg(feature = "cuda")]
    {
        Ok(SelectedBackend::Cuda(backend_cuda::CudaBackend::new(0)?))
    }
    #[cfg(not(feature = "cuda"))]
    {
        Err(not_compiled("cuda").into())
    }
}

/// Constructs the wgpu backend; `allow_software` admits software adapters (lavapipe, WARP).
///
/// # Errors
/// [`backend_api::Error::BackendUnavailable`] when the `wgpu` feature is off; the backend's own error when no
/// adapter is usable.
pub fn wgpu(allow_software: bool) -> Result<SelectedBackend> {
    #[cfg(feature = "wgpu")]
    {
        let options = backend_wgpu::WgpuOptions { allow_software, ..Default::default() };
        Ok(SelectedBackend::Wgpu(backend_wgpu::WgpuBackend::new(options)?))
    }
    #[cfg(not(feature = "wgpu"))]
    {
        let _ = allow_software;
        Err(not_compiled("wgpu").into())
    }
}

/// The backend `choice` names, and for `auto` why each better candidate was skipped.
///
/// # Errors
/// For an explicit choice, [`backend_api::Error::BackendUnavailable`] (not compiled in) or the backend's own
/// construction error. `auto` never fails: the CPU is always there.
pub fn select(choice: BackendChoice) -> Result<(SelectedBackend, Vec<String>)> {
    match choice {
        BackendChoice::Cpu => Ok((SelectedBackend::Cpu(CpuBackend::new()), Vec::new())),
        BackendChoice::Cuda => Ok((cuda()?, Vec::new())),
        BackendChoice::Wgpu => Ok((wgpu(true)?, Vec::new())),
        BackendChoice::Auto => {
            let mut skipped = Vec::new();
            match cuda() {
                Ok(b) => return Ok((b, skipped)),
                Err(e) => skipped.push(format!("cuda: {e}")),
            }
            match wgpu(false) {
                Ok(b) if !b.is_software() => return Ok((b, skipped)),
                Ok(_) => skipped.push("wgpu: only a software adapter is available".into()),
                Err(e) => skipped.push(format!("wgpu: {e}")),
            }
            Ok((SelectedBackend::Cpu(CpuBackend::new()), skipped))
        }
    }
}

/// Whether one backend is compiled in and usable here.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct BackendStatus {
    /// `cpu`, `cuda` or `wgpu`.
    pub backend: &'static str,
    /// Whether this binary was built with it.
    pub compiled: bool,
    /// The device name when usable.
    pub device: Option<String>,
    /// Whether it runs on a software adapter (wgpu only).
    pub software: bool,
    /// Why it is unusable, when it is.
    pub reason: Option<String>,
}

/// Tries to construct every backend and reports each one.
pub fn probe_all() -> Vec<BackendStatus> {
    let probe = |backend: &'static str, compiled: bool, made: Result<SelectedBackend>| match made {
        Ok(b) => BackendStatus {
            backend,
            compiled,
            device: Some(b.visit(DeviceName)),
            software: b.is_software(),
            reason: None,
        },
        Err(e) => BackendStatus { backend, compiled, device: None, software: false, reason: Some(e.to_string()) },
    };
    vec![
        probe("cpu", true, select(BackendChoice::Cpu).map(|(b, _)| b)),
        probe("cuda", cfg!(feature = "cuda"), cuda()),
        probe("wgpu", cfg!(feature = "wgpu"), wgpu(true)),
    ]
}

/// The device name of a backend.
struct DeviceName;

impl BackendVisitor for DeviceName {
    type Output = String;
    fn visit<B: Backend>(self, backend: &B) -> String {
        backend.info().device
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ProverError;
    use backend_api::Error;

    #[test]
    fn cpu_is_always_there_and_auto_falls_back_to_it_without_gpus() {
        let status = probe_all();
        assert_eq!(status[0].backend, "cpu");
        assert!(status[0].device.is_some() && status[0].reason.is_none(), "{status:?}");
        if !cfg!(feature = "cuda") {
            let reason = status[1].reason.as_deref().unwrap_or_default();
            assert!(reason.contains("--features cuda"), "{reason}");
            let err = select(BackendChoice::Cuda).err().expect("cuda is not compiled in");
            assert!(matches!(err, ProverError::Backend(Error::BackendUnavailable { .. })), "{err}");
            assert_eq!(err.exit_code(), crate::error::EXIT_REFUSED_OR_DEVICE);
        }
        if !cfg!(feature = "cuda") && !cfg!(feature = "wgpu") {
            let (b, skipped) = select(BackendChoice::Auto).unwrap();
            assert_eq!(b.name(), "cpu");
            assert_eq!(skipped.len(), 2, "{skipped:?}");
        }
    }
}
