//! The device timer: timestamp queries around every command encoder an operation submits.

use backend_api::{Error, Result};

use super::{Gpu, NAME, lock};

/// Timestamp queries written at the start and end of every command encoder an operation
/// submits (see [`Gpu::time_device`]).
pub(super) struct Timer {
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

impl Gpu {
    /// Whether [`Gpu::time_device`] can time on the device (timestamp queries inside encoders).
    pub fn has_device_timer(&self) -> bool {
        self.hw
            .device
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
        let set = self.hw.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("backend-wgpu device timer"),
            ty: wgpu::QueryType::Timestamp,
            count: TIMER_QUERIES,
        });
        *lock(&self.timer) = Some(Timer { set, next: 0, overflow: false });
        let ran = f();
        let timer = lock(&self.timer).take();
        ran?;
        let Some(timer) = timer else {
            return Err(super::device_error(
                "time_device",
                super::WgpuError::NoAnswer("the timer query set went missing".into()),
            ));
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
        let mut encoder = self.hw.device.create_command_encoder(&Default::default());
        encoder.resolve_query_set(&timer.set, 0..n, &resolve, 0);
        encoder.copy_buffer_to_buffer(&resolve, 0, &staging, 0, Some(bytes));
        let index = self.hw.queue.submit([encoder.finish()]);
        let mut ticks = vec![0u64; n as usize];
        crate::staging::read_mapped(self, &staging, Some(index), &mut ticks)?;
        let period_ms = self.hw.queue.get_timestamp_period() as f64 * 1e-6;
        let pairs = ticks.chunks_exact(2);
        let busy: u64 = pairs.clone().map(|p| p[1].saturating_sub(p[0])).sum();
        let span = ticks[ticks.len() - 1].saturating_sub(ticks[0]);
        Ok(Some(DeviceTime {
            span_ms: span as f64 * period_ms,
            busy_ms: busy as f64 * period_ms,
            submissions: pairs.len() as u32,
        }))
    }
}
