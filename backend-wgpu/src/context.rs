//! The device context: adapter choice, limits, error capture, kernels, and the recorder that
//! turns an operation's dispatches into command buffers.
//!
//! Every dispatch uses one bind group layout (see `shaders/wgsl/window.wgsl`): a dynamic-offset
//! uniform parameter block, window A (four storage slots), window B (two slots) and one read-only
//! table. Parameter blocks and small tables live in one persistent *arena* buffer, written with
//! `Queue::write_buffer` before each submission, so that an operation allocates nothing beyond
//! what it documents.

use std::borrow::Cow;
use std::collections::HashMap;
use std::num::NonZeroU64;
use std::sync::{Arc, Mutex, MutexGuard};

use backend_api::fault::AllocTracker;
use backend_api::{Error, Result};
use bytemuck::{Pod, Zeroable};

/// The backend's name in errors and [`backend_api::DeviceInfo`].
pub(crate) const NAME: &str = "wgpu";

/// Size of the persistent arena (parameter blocks and copy tables), in bytes.
pub(crate) const ARENA_BYTES: u64 = 1 << 20;

/// Elements per workgroup of the copy kernel (`CHUNK` in copy.wgsl).
pub(crate) const COPY_CHUNK_ELEMS: u32 = 4096;

/// Marks an unused window slot.
const NO_SEGMENT: u32 = u32::MAX;

/// The parameter block of every kernel (`struct Params` in window.wgsl).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub(crate) struct Params {
    seg_a: [u32; 4],
    seg_b: [u32; 4],
    shift: u32,
    mask: u32,
    count: u32,
    groups_x: u32,
    arg: [u32; 12],
}

/// The kernel sources a pipeline is built from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Module {
    Copy,
    Transpose,
    Hash,
    Merkle,
    Lde,
}

impl Module {
    /// The module's WGSL; `int64` picks the native-u64 Goldilocks arithmetic.
    fn source(self, int64: bool) -> String {
        use shaders::wgsl::*;
        let field = if int64 { GOLDILOCKS_INT64 } else { GOLDILOCKS };
        let parts: &[&str] = match self {
            Module::Copy => &[WINDOW, COPY],
            Module::Transpose => &[WINDOW, TRANSPOSE],
            Module::Hash => &[WINDOW, field, KECCAK, BLAKE3, HASH],
            Module::Merkle => &[WINDOW, KECCAK, BLAKE3, MERKLE],
            Module::Lde => &[WINDOW, field, LDE],
        };
        parts.join("\n")
    }

    fn file(self) -> &'static str {
        match self {
            Module::Copy => "copy.wgsl",
            Module::Transpose => "transpose.wgsl",
            Module::Hash => "hash.wgsl",
            Module::Merkle => "merkle.wgsl",
            Module::Lde => "lde.wgsl",
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

/// How a device failed, as the callbacks saw it.
#[derive(Default)]
struct Faults {
    lost: Option<String>,
    errors: Vec<String>,
}

/// The device and everything shared by the operations on it.
pub(crate) struct Gpu {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub info: wgpu::AdapterInfo,
    pub limits: wgpu::Limits,
    /// Device-local memory the adapter reports (0 where the platform does not say).
    pub total_memory: usize,
    /// log2 of the elements per segment.
    pub seg_shift: u32,
    /// The adapter offers `SHADER_INT64` (whether or not it was requested).
    pub adapter_int64: bool,
    /// Most radix-2 stages per LDE pass (1..=`lde::PASS_LOG`).
    pub lde_pass_stages: u32,
    /// Freed segments kept for reuse (see `memory::alloc`).
    pub pool: Mutex<crate::memory::Pool>,
    pub tracker: AllocTracker,
    faults: Arc<Mutex<Faults>>,
    layout: wgpu::BindGroupLayout,
    pipeline_layout: wgpu::PipelineLayout,
    pipelines: Mutex<HashMap<&'static str, wgpu::ComputePipeline>>,
    /// Tiny buffers bound to unused slots: read-write slots and the read-only table (one buffer
    /// cannot be both within a dispatch).
    dummy: wgpu::Buffer,
    dummy_table: wgpu::Buffer,
    arena: wgpu::Buffer,
    /// Serialises recording: the arena is rewritten per submission.
    record: Mutex<()>,
    /// The device timer, while [`Gpu::time_device`] runs an operation.
    timer: Mutex<Option<Timer>>,
}

/// Timestamp queries written at the start and end of every command encoder an operation
/// submits (see [`Gpu::time_device`]).
struct Timer {
    set: wgpu::QuerySet,
    next: u32,
    overflow: bool,
}

/// Queries of one device timer: two per submission.
const TIMER_QUERIES: u32 = wgpu::QUERY_SET_MAX_QUERIES;

/// Device time of one operation, from timestamps written by the GPU.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DeviceTime {
    /// From the first encoder's start to the last encoder's end, in ms (idle gaps included).
    pub span_ms: f64,
    /// Sum over encoders of end minus start, in ms (the time the GPU spent on the operation's
    /// command buffers).
    pub busy_ms: f64,
    /// Command encoders (submissions) the operation used.
    pub submissions: u32,
}

/// Adapter selection and device limits (see [`crate::WgpuOptions`]).
pub(crate) struct Setup {
    pub allow_software: bool,
    pub max_segment_bytes: Option<u64>,
    /// Never use `SHADER_INT64`, even where the adapter has it.
    pub portable_arithmetic: bool,
    /// Most radix-2 stages per LDE pass, already validated.
    pub lde_pass_stages: u32,
}

impl Gpu {
    /// Picks the best adapter (discrete > integrated > virtual > other > software when allowed),
    /// requests a device with the adapter's own limits and `SHADER_INT64` when present (and
    /// wanted: [`Setup::portable_arithmetic`] keeps every kernel on u32 pairs).
    pub fn new(setup: &Setup) -> Result<Arc<Gpu>> {
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
        // Vulkan, Metal, DX12 (and WebGPU in a browser): the compute APIs. GL only when asked for
        // with WGPU_BACKEND (its EGL probing is noisy on headless machines).
        desc.backends = wgpu::Backends::from_env().unwrap_or(wgpu::Backends::PRIMARY);
        let backends = desc.backends;
        let instance = wgpu::Instance::new(desc);
        let adapters = pollster::block_on(instance.enumerate_adapters(backends));
        let rank = |t: wgpu::DeviceType| match t {
            wgpu::DeviceType::DiscreteGpu => 0,
            wgpu::DeviceType::IntegratedGpu => 1,
            wgpu::DeviceType::VirtualGpu => 2,
            wgpu::DeviceType::Other => 3,
            wgpu::DeviceType::Cpu => 4,
        };
        let seen: Vec<String> =
            adapters.iter().map(|a| format!("{} ({:?})", a.get_info().name, a.get_info().device_type)).collect();
        let adapter = adapters
            .into_iter()
            .filter(|a| setup.allow_software || a.get_info().device_type != wgpu::DeviceType::Cpu)
            .min_by_key(|a| rank(a.get_info().device_type))
            .ok_or_else(|| Error::BackendUnavailable {
                backend: NAME.into(),
                reason: if seen.is_empty() {
                    "no wgpu adapter found (no Vulkan, Metal, DX12 or GL driver; on Debian install \
                     mesa-vulkan-drivers and libvulkan1 for a software device)"
                        .into()
                } else {
                    format!("no hardware adapter (software adapters are not allowed here); found: {}", seen.join(", "))
                },
            })?;
        let info = adapter.get_info();
        let limits = adapter.limits();
        // Timestamps only serve `time_device` (benchmarks); requesting them costs nothing else.
        let int64 = if setup.portable_arithmetic { wgpu::Features::empty() } else { wgpu::Features::SHADER_INT64 };
        let features = adapter.features()
            & (int64 | wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS);
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("backend-wgpu"),
            required_features: features,
            required_limits: limits.clone(),
            ..Default::default()
        }))
        .map_err(|e| Error::BackendUnavailable {
            backend: NAME.into(),
            reason: format!("{} ({:?}): request_device failed: {e}", info.name, info.device_type),
        })?;

        let storage_slots = 7; // windows A and B, and the table
        if limits.max_storage_buffers_per_shader_stage < storage_slots {
            return Err(Error::BackendUnavailable {
                backend: NAME.into(),
                reason: format!(
                    "{}: max_storage_buffers_per_shader_stage is {}, the kernels bind {storage_slots}",
                    info.name, limits.max_storage_buffers_per_shader_stage
                ),
            });
        }
        let mut seg_bytes = limits.max_storage_buffer_binding_size.min(limits.max_buffer_size);
        if let Some(cap) = setup.max_segment_bytes {
            seg_bytes = seg_bytes.min(cap.max(64));
        }
        // A power of two of elements, at most 2^28 (2 GiB): element offsets stay u32 words apart.
        let seg_shift = (seg_bytes / 8).ilog2().min(28);

        let faults = Arc::new(Mutex::new(Faults::default()));
        {
            let f = faults.clone();
            device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
                lock(&f).errors.push(e.to_string());
            }));
            let f = faults.clone();
            device.set_device_lost_callback(move |reason, message| {
                lock(&f).lost = Some(format!("{reason:?}: {message}"));
            });
        }

        let storage = |binding: u32, read_only: bool| wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage { read_only },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        };
        let mut entries = vec![wgpu::BindGroupLayoutEntry {
            binding: 0,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Uniform,
                has_dynamic_offset: true,
                min_binding_size: NonZeroU64::new(std::mem::size_of::<Params>() as u64),
            },
            count: None,
        }];
        entries.extend((1..=6).map(|b| storage(b, false)));
        entries.push(storage(7, true));
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("backend-wgpu window layout"),
            entries: &entries,
        });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("backend-wgpu pipeline layout"),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let dummy = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("backend-wgpu unused slot"),
            size: 256,
            usage: wgpu::BufferUsages::STORAGE,
            mapped_at_creation: false,
        });
        let dummy_table = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("backend-wgpu unused table"),
            size: 256,
            usage: wgpu::BufferUsages::STORAGE,
            mapped_at_creation: false,
        });
        let arena = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("backend-wgpu arena"),
            size: ARENA_BYTES,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let total_memory = device_memory(&adapter).unwrap_or(0);
        let gpu = Gpu {
            device,
            queue,
            info,
            limits,
            total_memory,
            seg_shift,
            adapter_int64: adapter.features().contains(wgpu::Features::SHADER_INT64),
            lde_pass_stages: setup.lde_pass_stages,
            pool: Mutex::new(crate::memory::Pool::default()),
            tracker: AllocTracker::new(),
            faults,
            layout,
            pipeline_layout,
            pipelines: Mutex::new(HashMap::new()),
            dummy,
            dummy_table,
            arena,
            record: Mutex::new(()),
            timer: Mutex::new(None),
        };
        gpu.check("device setup")?;
        Ok(Arc::new(gpu))
    }

    /// Elements per segment.
    pub fn seg_elems(&self) -> usize {
        1usize << self.seg_shift
    }

    /// `Err` when the device was lost or an error was captured since the last check.
    pub fn check(&self, op: &str) -> Result<()> {
        let mut f = lock(&self.faults);
        if let Some(reason) = &f.lost {
            return Err(Error::DeviceLost { backend: NAME.into(), reason: reason.clone() });
        }
        if !f.errors.is_empty() {
            let message = std::mem::take(&mut f.errors).join("; ");
            return Err(Error::Device { backend: NAME.into(), op: op.into(), message });
        }
        Ok(())
    }

    /// Waits for all submitted work.
    pub fn wait(&self, op: &str) -> Result<()> {
        self.check(op)?;
        let polled = self.device.poll(wgpu::PollType::wait_indefinitely());
        self.check(op)?;
        polled.map(|_| ()).map_err(|e| Error::Device {
            backend: NAME.into(),
            op: format!("{op}: wait for the queue"),
            message: e.to_string(),
        })
    }

    /// Creates a buffer, turning an out-of-memory or validation error into an [`Error`].
    pub fn create_buffer(&self, label: &str, size: u64, usage: wgpu::BufferUsages) -> Result<wgpu::Buffer> {
        if size > self.limits.max_buffer_size {
            return Err(Error::InvalidArgument(format!(
                "{NAME}: a {size} B buffer exceeds the adapter's max_buffer_size of {} B",
                self.limits.max_buffer_size
            )));
        }
        let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let valid = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage,
            mapped_at_creation: false,
        });
        let invalid = pollster::block_on(valid.pop());
        let out_of_memory = pollster::block_on(oom.pop());
        if let Some(e) = out_of_memory {
            let _ = e;
            let live = self.tracker.counters().live;
            return Err(Error::OutOfMemory {
                backend: NAME.into(),
                requested: size as usize,
                free: self.total_memory.saturating_sub(live),
                total: self.total_memory,
            });
        }
        if let Some(e) = invalid {
            return Err(Error::Device {
                backend: NAME.into(),
                op: format!("create_buffer({label}, {size} B)"),
                message: e.to_string(),
            });
        }
        Ok(buffer)
    }

    fn pipeline(&self, kernel: Kernel) -> Result<wgpu::ComputePipeline> {
        let mut cache = lock(&self.pipelines);
        if let Some(p) = cache.get(kernel.entry) {
            return Ok(p.clone());
        }
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = self.device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some(kernel.module.file()),
            source: wgpu::ShaderSource::Wgsl(Cow::Owned(kernel.module.source(self.int64()))),
        });
        let pipeline = self.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(kernel.entry),
            layout: Some(&self.pipeline_layout),
            module: &module,
            entry_point: Some(kernel.entry),
            compilation_options: Default::default(),
            cache: None,
        });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(Error::KernelCompile {
                backend: NAME.into(),
                kernel: format!("{} ({})", kernel.module.file(), kernel.entry),
                log: e.to_string(),
            });
        }
        cache.insert(kernel.entry, pipeline.clone());
        Ok(pipeline)
    }

    /// Goldilocks arithmetic in native u64: the device was given `SHADER_INT64` (requested only
    /// where the adapter has it and `portable_arithmetic` is off).
    pub fn int64(&self) -> bool {
        self.device.features().contains(wgpu::Features::SHADER_INT64)
    }

    /// Whether [`Gpu::time_device`] can time on the device (timestamp queries inside encoders).
    pub fn has_device_timer(&self) -> bool {
        self.device
            .features()
            .contains(wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS)
    }

    /// Writes a timestamp into `encoder` when a device timer runs (a no-op otherwise). Every
    /// submission path calls this first and last on its encoder.
    pub fn stamp(&self, encoder: &mut wgpu::CommandEncoder) {
        let mut timer = lock(&self.timer);
        if let Some(t) = timer.as_mut() {
            if t.next < TIMER_QUERIES {
                encoder.write_timestamp(&t.set, t.next);
                t.next += 1;
            } else {
                t.overflow = true;
            }
        }
    }

    /// Runs `f` (which submits work), waits for the queue and returns the device time of the
    /// command encoders `f` submitted; `None` when the adapter lacks timestamp queries.
    ///
    /// # Errors
    /// `f`'s error; [`Error::InvalidArgument`] when `f` submitted more encoders than one query
    /// set holds (2048); a device error while resolving the queries.
    pub fn time_device(&self, f: impl FnOnce() -> Result<()>) -> Result<Option<DeviceTime>> {
        if !self.has_device_timer() {
            f()?;
            self.wait("time_device")?;
            return Ok(None);
        }
        self.wait("time_device")?;
        let set = self.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("backend-wgpu device timer"),
            ty: wgpu::QueryType::Timestamp,
            count: TIMER_QUERIES,
        });
        *lock(&self.timer) = Some(Timer { set, next: 0, overflow: false });
        let ran = f();
        let timer = lock(&self.timer).take();
        ran?;
        let Some(timer) = timer else {
            return Err(Error::Device { backend: NAME.into(), op: "time_device".into(), message: "timer lost".into() });
        };
        if timer.overflow {
            return Err(Error::InvalidArgument(format!(
                "{NAME}: time_device: the operation submitted more than {} encoders",
                TIMER_QUERIES / 2
            )));
        }
        let n = timer.next;
        if n < 2 {
            self.wait("time_device")?;
            return Ok(Some(DeviceTime { span_ms: 0.0, busy_ms: 0.0, submissions: 0 }));
        }
        let bytes = (n as u64 * 8).next_multiple_of(wgpu::QUERY_RESOLVE_BUFFER_ALIGNMENT);
        let resolve = self.create_buffer(
            "backend-wgpu timer resolve",
            bytes,
            wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
        )?;
        let staging = self.create_buffer(
            "backend-wgpu timer staging",
            bytes,
            wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        )?;
        let mut encoder = self.device.create_command_encoder(&Default::default());
        encoder.resolve_query_set(&timer.set, 0..n, &resolve, 0);
        encoder.copy_buffer_to_buffer(&resolve, 0, &staging, 0, Some(bytes));
        self.queue.submit([encoder.finish()]);
        let mut ticks = vec![0u64; n as usize];
        crate::memory::read_mapped(self, &staging, &mut ticks)?;
        let period_ms = self.queue.get_timestamp_period() as f64 * 1e-6;
        let pairs = ticks.chunks_exact(2);
        let busy: u64 = pairs.clone().map(|p| p[1].saturating_sub(p[0])).sum();
        let span = ticks[ticks.len() - 1].saturating_sub(ticks[0]);
        Ok(Some(DeviceTime {
            span_ms: span as f64 * period_ms,
            busy_ms: busy as f64 * period_ms,
            submissions: pairs.len() as u32,
        }))
    }

    /// A bind group of the shared layout: the arena's parameter block (dynamic offset), the
    /// slots of `key` (the unused-slot buffer where empty) and its table.
    fn bind_group(&self, key: &BindKey, label: &str) -> wgpu::BindGroup {
        let mut entries = vec![wgpu::BindGroupEntry {
            binding: 0,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: &self.arena,
                offset: 0,
                size: NonZeroU64::new(std::mem::size_of::<Params>() as u64),
            }),
        }];
        for (k, buf) in key.slots.iter().enumerate() {
            entries.push(wgpu::BindGroupEntry {
                binding: 1 + k as u32,
                resource: whole(buf.as_ref().unwrap_or(&self.dummy)),
            });
        }
        let table = match &key.table {
            TableKey::None => &self.dummy_table,
            TableKey::Arena => &self.arena,
            TableKey::Buffer(b) => b,
        };
        entries.push(wgpu::BindGroupEntry { binding: 7, resource: whole(table) });
        self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(label),
            layout: &self.layout,
            entries: &entries,
        })
    }

    /// Starts recording an operation; holds the recording lock until the recorder is dropped.
    pub fn recorder(&self, op: &'static str) -> Recorder<'_> {
        Recorder {
            gpu: self,
            op,
            _guard: lock(&self.record),
            ops: Vec::new(),
            arena: Vec::new(),
            bind_groups: HashMap::new(),
        }
    }
}

/// A whole buffer as a binding.
fn whole(b: &wgpu::Buffer) -> wgpu::BindingResource<'_> {
    wgpu::BindingResource::Buffer(wgpu::BufferBinding { buffer: b, offset: 0, size: None })
}

/// Locks a mutex, ignoring poisoning (the data stays consistent: every critical section is a
/// plain push or take).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The largest device-local memory heap, from Vulkan where wgpu runs on it.
fn device_memory(adapter: &wgpu::Adapter) -> Option<usize> {
    #[cfg(any(target_os = "linux", target_os = "android", target_os = "windows"))]
    {
        // SAFETY: the hal adapter is only used for the duration of this block, through
        // read-only queries on the physical device it was created from.
        let hal = unsafe { adapter.as_hal::<wgpu::hal::api::Vulkan>() }?;
        let instance = hal.shared_instance().raw_instance();
        // SAFETY: the physical device handle belongs to this instance and outlives the call.
        let props = unsafe { instance.get_physical_device_memory_properties(hal.raw_physical_device()) };
        let heaps = &props.memory_heaps[..props.memory_heap_count as usize];
        // Bit 0 is VK_MEMORY_HEAP_DEVICE_LOCAL_BIT.
        heaps.iter().filter(|h| h.flags.as_raw() & 1 != 0).map(|h| h.size as usize).max()
    }
    #[cfg(not(any(target_os = "linux", target_os = "android", target_os = "windows")))]
    {
        let _ = adapter;
        None
    }
}

/// A set of device buffers seen as one virtual element space: buffer k's segments follow
/// buffer k-1's, each segment `2^seg_shift` elements of the space (the last of a buffer may be
/// shorter). Kernels address elements of the space with u32 indices.
pub(crate) struct Space<'b> {
    segs: Vec<&'b wgpu::Buffer>,
    shift: u32,
}

impl<'b> Space<'b> {
    /// The space over `buffers`, and each buffer's base (virtual element of its element 0).
    pub fn new(gpu: &Gpu, buffers: &[&'b [wgpu::Buffer]]) -> Result<(Self, Vec<u32>)> {
        let mut segs = Vec::new();
        let mut bases = Vec::new();
        for b in buffers {
            bases.push(segs.len() << gpu.seg_shift);
            segs.extend(b.iter());
        }
        let end = segs.len() << gpu.seg_shift;
        if end > u32::MAX as usize {
            return Err(Error::InvalidArgument(format!(
                "{NAME}: an operation addresses at most 2^32 u64 elements (kernels index with u32); \
                 these buffers take {} segments of 2^{} elements",
                segs.len(),
                gpu.seg_shift
            )));
        }
        Ok((Self { segs, shift: gpu.seg_shift }, bases.into_iter().map(|b| b as u32).collect()))
    }

    /// The distinct segments touched by the element ranges `[start, end)`.
    fn segments(&self, spans: &[(u64, u64)]) -> Vec<u32> {
        let mut out: Vec<u32> = Vec::new();
        for &(s, e) in spans {
            if e <= s {
                continue;
            }
            for seg in (s >> self.shift)..=((e - 1) >> self.shift) {
                if !out.contains(&(seg as u32)) {
                    out.push(seg as u32);
                }
            }
        }
        out
    }

    /// The window (segment ids and buffers, `N` slots) covering the element ranges `spans`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the segment size when the ranges touch more than `N`
    /// segments (the callers cut their work so that this does not happen for any shape whose
    /// rows fit a segment).
    pub fn window<const N: usize>(&self, spans: &[(u64, u64)], op: &str) -> Result<Window<'b, N>> {
        let segs = self.segments(spans);
        let too_many = || {
            Error::InvalidArgument(format!(
                "{NAME}: {op}: one dispatch would touch {} segments of 2^{} elements ({} B, the storage \
                 binding limit rounded down to a power of two); at most {N} can be bound",
                segs.len(),
                self.shift,
                8u64 << self.shift
            ))
        };
        if segs.len() > N {
            return Err(too_many());
        }
        let mut ids = [NO_SEGMENT; N];
        let mut bufs = [None; N];
        for (k, &s) in segs.iter().enumerate() {
            ids[k] = s;
            bufs[k] = Some(*self.segs.get(s as usize).ok_or_else(too_many)?);
        }
        Ok(Window { ids, bufs })
    }
}

/// The segments bound at a window's slots.
#[derive(Clone, Copy)]
pub(crate) struct Window<'b, const N: usize> {
    ids: [u32; N],
    bufs: [Option<&'b wgpu::Buffer>; N],
}

impl<const N: usize> Window<'_, N> {
    /// A window with no segment bound.
    pub fn empty() -> Self {
        Window { ids: [NO_SEGMENT; N], bufs: [None; N] }
    }
}

/// The read-only table of a dispatch (binding 7).
pub(crate) enum Table<'b> {
    /// Nothing bound (the unused-slot buffer).
    None,
    /// `u32` words written into the arena with the submission. The whole arena is bound, so
    /// that dispatches share bind groups; the recorder sets kernel arg 0 to the table's offset
    /// in the arena, in `vec4<u32>` units.
    Arena(Vec<u32>),
    /// A whole device buffer.
    Buffer(&'b wgpu::Buffer),
}

enum Op {
    Dispatch { pipeline: wgpu::ComputePipeline, bind_group: wgpu::BindGroup, params_offset: u32, groups: (u32, u32) },
}

/// What a bind group binds besides the arena's parameter block: windows A and B (`None` for the
/// unused-slot buffer), and the table.
#[derive(Clone, PartialEq, Eq, Hash)]
struct BindKey {
    slots: [Option<wgpu::Buffer>; 6],
    table: TableKey,
}

#[derive(Clone, PartialEq, Eq, Hash)]
enum TableKey {
    None,
    Arena,
    Buffer(wgpu::Buffer),
}

/// Records the dispatches of one operation; [`Recorder::flush`] writes the arena and submits.
/// Flushes by itself when the arena is full.
pub(crate) struct Recorder<'g> {
    gpu: &'g Gpu,
    /// The operation, for error messages.
    op: &'static str,
    _guard: MutexGuard<'g, ()>,
    ops: Vec<Op>,
    arena: Vec<u8>,
    /// Bind groups already made by this recorder: an operation's dispatches mostly bind the same
    /// few segments, and creating a bind group per dispatch costs host time.
    bind_groups: HashMap<BindKey, wgpu::BindGroup>,
}

impl Recorder<'_> {
    /// Reserves `bytes` of arena at an offset aligned to `align`; flushes first when full.
    fn arena_alloc(&mut self, bytes: usize, align: usize) -> Result<usize> {
        let op = self.op;
        let at = self.arena.len().next_multiple_of(align);
        if at + bytes > ARENA_BYTES as usize {
            if self.arena.is_empty() {
                return Err(Error::InvalidArgument(format!(
                    "{NAME}: {op}: {bytes} B of kernel parameters exceed the {ARENA_BYTES} B arena"
                )));
            }
            self.flush()?;
            return self.arena_alloc(bytes, align);
        }
        self.arena.resize(at + bytes, 0);
        Ok(at)
    }

    /// Largest table (in `u32` words) one dispatch may carry in the arena.
    pub fn max_table_words(&self) -> usize {
        (ARENA_BYTES as usize - 2 * 256) / 4
    }

    /// Queues one dispatch of `items` work items of `kernel`.
    pub fn dispatch(
        &mut self,
        kernel: Kernel,
        items: u32,
        args: &[u32],
        a: Window<'_, 4>,
        b: Window<'_, 2>,
        table: Table<'_>,
    ) -> Result<()> {
        let op = self.op;
        if items == 0 {
            return Ok(());
        }
        let gpu = self.gpu;
        let pipeline = gpu.pipeline(kernel)?;
        let groups_total = items.div_ceil(kernel.items_per_group);
        let max_dim = gpu.limits.max_compute_workgroups_per_dimension.max(1);
        let groups =
            if groups_total <= max_dim { (groups_total, 1) } else { (max_dim, groups_total.div_ceil(max_dim)) };
        if groups.1 > max_dim {
            return Err(Error::InvalidArgument(format!(
                "{NAME}: {op}: {groups_total} workgroups exceed {max_dim} x {max_dim}"
            )));
        }
        let mut params = Params {
            seg_a: a.ids,
            shift: gpu.seg_shift,
            mask: (1u32 << gpu.seg_shift) - 1,
            count: items,
            groups_x: groups.0,
            ..Default::default()
        };
        params.seg_b[..2].copy_from_slice(&b.ids);
        params.seg_b[2..].fill(NO_SEGMENT);
        params.arg[..args.len()].copy_from_slice(args);

        // Write the table first: a flush inside must not separate it from its parameters.
        let ualign = gpu.limits.min_uniform_buffer_offset_alignment as usize;
        if let Table::Arena(words) = &table {
            let bytes = (words.len() * 4).max(16);
            // Room for this table and its parameters in one submission.
            if self.arena.len().next_multiple_of(16) + bytes + 2 * ualign > ARENA_BYTES as usize
                && !self.arena.is_empty()
            {
                self.flush()?;
            }
            let at = self.arena_alloc(bytes, 16)?;
            self.arena[at..at + words.len() * 4].copy_from_slice(bytemuck::cast_slice(words));
            params.arg[0] = (at / 16) as u32;
        }
        let params_at = self.arena_alloc(std::mem::size_of::<Params>(), ualign)?;
        self.arena[params_at..params_at + std::mem::size_of::<Params>()].copy_from_slice(bytemuck::bytes_of(&params));

        let mut slots: [Option<wgpu::Buffer>; 6] = Default::default();
        for (slot, buf) in slots.iter_mut().zip(a.bufs.iter().chain(b.bufs.iter())) {
            *slot = buf.cloned();
        }
        let key = BindKey {
            slots,
            table: match &table {
                Table::None => TableKey::None,
                Table::Arena(_) => TableKey::Arena,
                Table::Buffer(b) => TableKey::Buffer((*b).clone()),
            },
        };
        let bind_group = self.bind_groups.entry(key).or_insert_with_key(|k| gpu.bind_group(k, kernel.entry)).clone();
        self.ops.push(Op::Dispatch { pipeline, bind_group, params_offset: params_at as u32, groups });
        Ok(())
    }

    /// Writes the arena and submits everything recorded so far.
    pub fn flush(&mut self) -> Result<()> {
        let op = self.op;
        if self.ops.is_empty() {
            return Ok(());
        }
        let gpu = self.gpu;
        gpu.check(op)?;
        gpu.queue.write_buffer(&gpu.arena, 0, &self.arena);
        let mut encoder = gpu.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(op) });
        gpu.stamp(&mut encoder);
        {
            let mut pass =
                encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some(op), timestamp_writes: None });
            for o in &self.ops {
                match o {
                    Op::Dispatch { pipeline, bind_group, params_offset, groups } => {
                        pass.set_pipeline(pipeline);
                        pass.set_bind_group(0, bind_group, &[*params_offset]);
                        pass.dispatch_workgroups(groups.0, groups.1, 1);
                    }
                }
            }
        }
        gpu.stamp(&mut encoder);
        gpu.queue.submit([encoder.finish()]);
        self.ops.clear();
        self.arena.clear();
        gpu.check(op)
    }
}
