//! Adapter choice: the instance, the best adapter, the device request with the adapter's own
//! limits, and the segment size those limits allow.

use backend_api::{Error, Result};

use super::NAME;

/// Adapter selection and device limits (see [`crate::WgpuOptions`]).
pub(crate) struct Setup {
    pub allow_software: bool,
    pub max_segment_bytes: Option<u64>,
    /// Never use `SHADER_INT64`, even where the adapter has it.
    pub portable_arithmetic: bool,
    /// Bytes per staging chunk of host transfers, validated: a multiple of 8, at least
    /// [`crate::MIN_TRANSFER_CHUNK_BYTES`] (the adapter's bound is checked once it is open).
    pub transfer_chunk: usize,
}

/// What [`open`] found: the device, its queue and what the adapter reports.
pub(crate) struct Opened {
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
}

/// Picks the best adapter (discrete > integrated > virtual > other > software when allowed),
/// requests a device with the adapter's own limits and `SHADER_INT64` when present (and
/// wanted: [`Setup::portable_arithmetic`] keeps every kernel on u32 pairs).
pub(super) fn open(setup: &Setup) -> Result<Opened> {
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
            backend: NAME,
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
        backend: NAME,
        reason: format!("{} ({:?}): request_device failed: {e}", info.name, info.device_type),
    })?;

    let storage_slots = 7; // windows A and B, and the table
    if limits.max_storage_buffers_per_shader_stage < storage_slots {
        return Err(Error::BackendUnavailable {
            backend: NAME,
            reason: format!(
                "{}: max_storage_buffers_per_shader_stage is {}, the kernels bind {storage_slots}",
                info.name, limits.max_storage_buffers_per_shader_stage
            ),
        });
    }
    let mut seg_bytes = limits.max_storage_buffer_binding_size.min(limits.max_buffer_size);
    if let Some(cap) = setup.max_segment_bytes {
        // Validated: at least `MIN_SEGMENT_BYTES`.
        seg_bytes = seg_bytes.min(cap.max(crate::MIN_SEGMENT_BYTES));
    }
    // A power of two of elements, at most 2^28 (2 GiB): element offsets stay u32 words apart.
    let seg_shift = (seg_bytes / 8).ilog2().min(28);
    let total_memory = device_memory(&adapter).unwrap_or(0);
    let adapter_int64 = adapter.features().contains(wgpu::Features::SHADER_INT64);
    Ok(Opened { device, queue, info, limits, total_memory, seg_shift, adapter_int64 })
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
