//! The device and everything shared by the operations on it: the opened adapter, the segment
//! pool, the allocation tracker, fault capture, the pipeline cache, the recording lock and the
//! device timer.

use std::collections::HashMap;
use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::sync::{Arc, Mutex};

use backend_api::fault::AllocTracker;
use backend_api::{Error, Result};

use super::adapter::{self, Opened, Setup};
use super::command::Bindings;
use super::fault::{Faults, WgpuError, device_error};
use super::timer::Timer;
use super::{NAME, lock};

/// Opening and closing devices, one at a time in a process: on an H100 through Vulkan (driver
/// 580), backends opened and dropped from six threads at once hung, or crashed the process beside
/// CUDA backends, where one thread at a time never did (`open_concurrently` in `lab/wgpu-probes`,
/// 2026-12-07). Operations on open devices are not serialised.
static LIFECYCLE: Mutex<()> = Mutex::new(());

/// The device and everything shared by the operations on it ([`State`]), opened and dropped
/// under [`LIFECYCLE`].
pub(crate) struct Gpu(ManuallyDrop<State>);

impl Deref for Gpu {
    type Target = State;
    fn deref(&self) -> &State {
        &self.0
    }
}

impl Drop for Gpu {
    fn drop(&mut self) {
        let _one_at_a_time = lock(&LIFECYCLE);
        // SAFETY: dropped once, here, and never used again.
        unsafe { ManuallyDrop::drop(&mut self.0) }
    }
}

/// The device and everything shared by the operations on it.
pub(crate) struct State {
    /// The device, its queue and what the adapter reports ([`adapter::open`]).
    pub hw: Opened,
    /// Freed segments kept for reuse (see `memory::alloc`).
    pub pool: Mutex<crate::memory::Pool>,
    /// The staging rings of large host transfers (see `staging`).
    pub staging: Mutex<crate::staging::Rings>,
    /// Bytes per staging chunk of host transfers, a multiple of 8.
    pub transfer_chunk: usize,
    pub tracker: AllocTracker,
    faults: Arc<Mutex<Faults>>,
    pub(super) bindings: Bindings,
    pub(super) pipelines: Mutex<HashMap<&'static str, wgpu::ComputePipeline>>,
    /// Serialises recording: the arena is rewritten per submission.
    pub(super) record: Mutex<()>,
    /// The device timer, while [`Gpu::time_device`] runs an operation.
    pub(super) timer: Mutex<Option<Timer>>,
}

impl Gpu {
    /// Opens the best adapter ([`adapter::open`]) and sets up what every operation shares.
    pub fn new(setup: &Setup) -> Result<Arc<Gpu>> {
        let one_at_a_time = lock(&LIFECYCLE);
        let o = adapter::open(setup)?;
        let faults = Faults::install(&o.device);
        let bindings = Bindings::new(&o.device);
        let state = State {
            hw: o,
            pool: Mutex::new(crate::memory::Pool::default()),
            staging: Mutex::new(crate::staging::Rings::default()),
            transfer_chunk: setup.transfer_chunk,
            tracker: AllocTracker::new(),
            faults,
            bindings,
            pipelines: Mutex::new(HashMap::new()),
            record: Mutex::new(()),
            timer: Mutex::new(None),
        };
        // A failed setup drops the device here, still under the lock.
        state.check("device setup")?;
        drop(one_at_a_time);
        Ok(Arc::new(Gpu(ManuallyDrop::new(state))))
    }
}

impl State {
    /// Elements per segment.
    pub fn seg_elems(&self) -> usize {
        1usize << self.hw.seg_shift
    }

    /// `Err` when the device was lost or an error was captured since the last check.
    pub fn check(&self, op: &str) -> Result<()> {
        lock(&self.faults).take(op)
    }

    /// Waits for all submitted work.
    pub fn wait(&self, op: &str) -> Result<()> {
        self.wait_for(None, op)
    }

    /// Waits for submission `index` (every submission so far when `None`) and the callbacks it
    /// completes.
    pub fn wait_for(&self, index: Option<wgpu::SubmissionIndex>, op: &str) -> Result<()> {
        self.check(op)?;
        let polled = self.hw.device.poll(wgpu::PollType::Wait { submission_index: index, timeout: None });
        self.check(op)?;
        polled.map(|_| ()).map_err(|e| device_error(format!("{op}: wait for the queue"), e))
    }

    /// Creates a buffer, turning an out-of-memory or validation error into an [`Error`].
    pub fn create_buffer(&self, label: &str, size: u64, usage: wgpu::BufferUsages) -> Result<wgpu::Buffer> {
        self.new_buffer(label, size, usage, false)
    }

    /// As [`Gpu::create_buffer`], the buffer mapped for the host at creation.
    pub fn create_mapped_buffer(&self, label: &str, size: u64, usage: wgpu::BufferUsages) -> Result<wgpu::Buffer> {
        self.new_buffer(label, size, usage, true)
    }

    fn new_buffer(&self, label: &str, size: u64, usage: wgpu::BufferUsages, mapped: bool) -> Result<wgpu::Buffer> {
        if size > self.hw.limits.max_buffer_size {
            return Err(Error::InvalidArgument(format!(
                "{NAME}: a {size} B buffer exceeds the adapter's max_buffer_size of {} B",
                self.hw.limits.max_buffer_size
            )));
        }
        let oom = self.hw.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let valid = self.hw.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let buffer = self.hw.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage,
            mapped_at_creation: mapped,
        });
        let invalid = pollster::block_on(valid.pop());
        let out_of_memory = pollster::block_on(oom.pop());
        if let Some(e) = out_of_memory {
            let _ = e;
            let live = self.tracker.counters().live;
            return Err(Error::OutOfMemory {
                backend: NAME,
                requested: size as usize,
                free: self.hw.total_memory.saturating_sub(live),
                total: self.hw.total_memory,
            });
        }
        if let Some(e) = invalid {
            return Err(device_error(format!("create_buffer({label}, {size} B)"), WgpuError::Scoped(e)));
        }
        Ok(buffer)
    }

    /// where the adapter has it and `portable_arithmetic` is off).
    pub fn int64(&self) -> bool {
        self.hw.device.features().contains(wgpu::Features::SHADER_INT64)
    }
}
