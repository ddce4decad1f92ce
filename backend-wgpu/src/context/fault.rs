//! Fault capture: wgpu reports validation errors and device loss through callbacks; they are kept
//! here and turned into typed errors at the next check, never panics. [`device_error`] is the one
//! mapping from wgpu's errors to [`Error::Device`], which keeps them whole as its source.

use std::sync::{Arc, Mutex};

use backend_api::{Error, Result};

use super::{NAME, lock};

/// How a device failed, as the callbacks saw it.
#[derive(Default)]
pub(super) struct Faults {
    lost: Option<String>,
    errors: Vec<wgpu::Error>,
}

/// What the wgpu stack reported, kept whole as the `#[source]` of [`Error::Device`].
#[derive(Debug, thiserror::Error)]
pub enum WgpuError {
    /// Errors wgpu raised outside any error scope since the last check, in order.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Uncaptured(Vec<wgpu::Error>),
    /// An error scope around one call caught this error.
    #[error(transparent)]
    Scoped(wgpu::Error),
    /// Waiting for the queue failed.
    #[error(transparent)]
    Poll(#[from] wgpu::PollError),
    /// Mapping a buffer for reading failed.
    #[error(transparent)]
    Map(#[from] wgpu::BufferAsyncError),
    /// Reading a mapped range failed.
    #[error(transparent)]
    MapRange(#[from] wgpu::MapRangeError),
    /// wgpu never answered: a mapping that did not complete, a timer that went missing.
    #[error("{0}")]
    NoAnswer(String),
}

/// The one mapping from wgpu's errors to [`Error::Device`]: the backend's name, the operation,
/// and wgpu's error as the source.
pub(crate) fn device_error(op: impl Into<String>, e: impl Into<WgpuError>) -> Error {
    Error::Device { backend: NAME, op: op.into(), source: Box::new(e.into()) }
}

impl Faults {
    /// Installs the uncaptured-error and device-lost callbacks on `device`, recording into the
    /// returned state.
    pub fn install(device: &wgpu::Device) -> Arc<Mutex<Faults>> {
        let faults = Arc::new(Mutex::new(Faults::default()));
        let f = faults.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            lock(&f).errors.push(e);
        }));
        let f = faults.clone();
        device.set_device_lost_callback(move |reason, message| {
            lock(&f).lost = Some(format!("{reason:?}: {message}"));
        });
        faults
    }

    /// `Err` when the device was lost, or the errors captured since the last call (cleared).
    pub fn take(&mut self, op: &str) -> Result<()> {
        if let Some(reason) = &self.lost {
            return Err(Error::DeviceLost { backend: NAME, reason: reason.clone() });
        }
        if !self.errors.is_empty() {
            return Err(device_error(op, WgpuError::Uncaptured(std::mem::take(&mut self.errors))));
        }
        Ok(())
    }
}
