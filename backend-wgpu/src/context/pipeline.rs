//! Kernels and the pipeline cache: the WGSL modules, their entry points, and one compute
//! pipeline per entry point, compiled at first use.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use backend_api::{Error, Result};

use super::{Gpu, NAME, lock};

/// The kernel sources a pipeline is built from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Module {
    Copy,
    Transpose,
    Hash,
    Merkle,
    Lde,
    Open,
    Quotient,
}

impl Module {
    /// The module's WGSL on `gpu`: the window bindings, the Goldilocks arithmetic (native u64
    /// or portable) where it computes, and its kernels.
    fn source(self, gpu: &Gpu) -> String {
        use shaders::wgsl::*;
        let field = if gpu.int64() { GOLDILOCKS_INT64 } else { GOLDILOCKS };
        let parts: &[&str] = match self {
            Module::Copy => &[WINDOW, COPY],
            Module::Transpose => &[WINDOW, TRANSPOSE],
            Module::Hash => &[WINDOW, field, KECCAK, BLAKE3, POSEIDON2_CONSTANTS, POSEIDON2, HASH],
            Module::Merkle => &[WINDOW, field, KECCAK, BLAKE3, POSEIDON2_CONSTANTS, POSEIDON2, MERKLE],
            Module::Lde => &[WINDOW, field, LDE],
            Module::Open => &[WINDOW, field, GOLDILOCKS_POW, OPEN],
            Module::Quotient => &[WINDOW, field, GOLDILOCKS_POW, QUOTIENT],
        };
        parts.join("\n")
    }

    /// Whether the module is compiled without the checks wgpu adds to shader code
    /// (`ShaderRuntimeChecks::unchecked`): index clamps on every workgroup-array access, a
    /// counter in every loop, guards on every division. Only lde.wgsl, where they cost 5% of the
    /// LDE on the H200 (the git history of BENCHMARKS.md, "Where the wgpu LDE's time goes") and where none can fire:
    /// its workgroup indices are inside the 1,024-element tile by construction (an invocation's
    /// slots `lid + 256 k`, k < 4, and its butterflies' rows of a 2^r-row tile of 2^(10 - r)
    /// items), its loops run at most 64 times (the wide stores, B <= 64; `lde_scale`, at
    /// most `SCALE_TARGETS` rows), its divisors are the column count (at least 1, validated) and
    /// `lde_scale`'s chunk count (at least 1, checked by the host before each dispatch), and its storage indices lie in the windows the host binds (`Space::window`
    /// checks every span), which the device's robust buffer access bounds as for every module.
    fn trusted(self) -> bool {
        self == Module::Lde
    }

    fn file(self) -> &'static str {
        match self {
            Module::Copy => "copy.wgsl",
            Module::Transpose => "transpose.wgsl",
            Module::Hash => "hash.wgsl",
            Module::Merkle => "merkle.wgsl",
            Module::Lde => "lde.wgsl",
            Module::Open => "open.wgsl",
            Module::Quotient => "quotient.wgsl",
        }
    }
}

/// One entry point: its module, its name, and its workgroup size (invocations per workgroup
/// along the work-item axis; tile kernels count one item per workgroup).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Kernel {
    pub module: Module,
    pub entry: &'static str,
    pub items_per_group: u32,
}

/// What creating one pipeline cost, as [`crate::WgpuBackend::prepare_kernels`] reports it.
#[derive(Clone, Debug)]
pub struct PipelinePrep {
    /// The kernel's entry point, e.g. `ntt_pass`.
    pub kernel: &'static str,
    /// The WGSL file it comes from.
    pub file: &'static str,
    /// Time to translate the module and create the compute pipeline (the driver's compile).
    pub time: Duration,
}

impl Gpu {
    /// Creates the pipelines of `kernels` not created yet, on up to `threads` threads at once
    /// (wgpu devices take pipeline creation from any thread; error scopes are per thread).
    ///
    /// # Errors
    /// The first [`Error::KernelCompile`]; the pipelines created before it are kept.
    pub fn prepare(&self, kernels: &[Kernel], threads: usize) -> Result<Vec<PipelinePrep>> {
        let todo: Vec<Kernel> = {
            let cache = lock(&self.pipelines);
            let mut seen = std::collections::HashSet::new();
            kernels.iter().copied().filter(|k| !cache.contains_key(k.entry) && seen.insert(k.entry)).collect()
        };
        let next = std::sync::atomic::AtomicUsize::new(0);
        let results: Vec<std::sync::Mutex<Option<Result<Duration>>>> =
            todo.iter().map(|_| std::sync::Mutex::new(None)).collect();
        std::thread::scope(|s| {
            for _ in 0..threads.clamp(1, todo.len().max(1)) {
                s.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(&kernel) = todo.get(i) else { break };
                        let t = Instant::now();
                        let r = self.pipeline(kernel).map(|_| t.elapsed());
                        *lock(&results[i]) = Some(r);
                    }
                });
            }
        });
        let mut report = Vec::with_capacity(todo.len());
        for (kernel, slot) in todo.into_iter().zip(results) {
            let r = slot.into_inner().unwrap_or_else(|p| p.into_inner());
            let time = r.unwrap_or_else(|| Err(Error::InvalidArgument("a pipeline thread stopped".into())))?;
            report.push(PipelinePrep { kernel: kernel.entry, file: kernel.module.file(), time });
        }
        Ok(report)
    }

    pub(super) fn pipeline(&self, kernel: Kernel) -> Result<wgpu::ComputePipeline> {
        if let Some(p) = lock(&self.pipelines).get(kernel.entry) {
            return Ok(p.clone());
        }
        let layout = &self.bindings.pipeline_layout;
        let scope = self.hw.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let desc = wgpu::ShaderModuleDescriptor {
            label: Some(kernel.module.file()),
            source: wgpu::ShaderSource::Wgsl(Cow::Owned(kernel.module.source(self))),
        };
        let module = if kernel.module.trusted() {
            // SAFETY: `Module::trusted` lists the modules whose every index, loop and divisor is
            // in range by construction (see there); the device's own robust buffer access stays.
            unsafe { self.hw.device.create_shader_module_trusted(desc, wgpu::ShaderRuntimeChecks::unchecked()) }
        } else {
            self.hw.device.create_shader_module(desc)
        };
        let pipeline = self.hw.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(kernel.entry),
            layout: Some(layout),
            module: &module,
            entry_point: Some(kernel.entry),
            compilation_options: Default::default(),
            cache: None,
        });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(Error::KernelCompile {
                backend: NAME,
                kernel: format!("{} ({})", kernel.module.file(), kernel.entry),
                log: e.to_string(),
            });
        }
        // Two threads may have created the same pipeline; the first one stored is kept.
        Ok(lock(&self.pipelines).entry(kernel.entry).or_insert(pipeline).clone())
    }
}
