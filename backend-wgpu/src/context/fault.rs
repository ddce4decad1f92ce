//! Fault capture: wgpu reports validation errors and device loss through callbacks; they are kept
//! here and turned into typed errors at the next check, never panics.

use std::sync::{Arc, Mutex};

use backend_api::{Error, Result};

use super::{NAME, lock};

/// How a device failed, as the callbacks saw it.
#[derive(Default)]
pub(super) struct Faults {
    lost: Option<String>,
    errors: Vec<String>,
}

impl Faults {
    /// Installs the uncaptured-error and device-lost callbacks on `device`, recording into the
    /// returned state.
    pub fn install(device: &wgpu::Device) -> Arc<Mutex<Faults>> {
        let faults = Arc::new(Mutex::new(Faults::default()));
        let f = faults.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            lock(&f).errors.push(e.to_string());
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
            return Err(Error::DeviceLost { backend: NAME.into(), reason: reason.clone() });
        }
        if !self.errors.is_empty() {
            let message = std::mem::take(&mut self.errors).join("; ");
            return Err(Error::Device { backend: NAME.into(), op: op.into(), message });
        }
        Ok(())
    }
}
