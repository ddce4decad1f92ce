//! The device context: adapter choice, limits, error capture, kernels, and the recorder that
//! turns an operation's dispatches into command buffers.
//!
//! Every dispatch uses one bind group layout (see `shaders/wgsl/window.wgsl`): a dynamic-offset
//! uniform parameter block, window A (four storage slots), window B (two slots) and one read-only
//! table. Parameter blocks and small tables live in one persistent *arena* buffer, written with
//! `Queue::write_buffer` before each submission, so that an operation allocates nothing beyond
//! what it documents.
//!
//! One file per concern, as wgpu-hal splits a backend:
//! - `adapter.rs`: the instance, adapter choice and the device request ([`Setup`]);
//! - `device.rs`: [`Gpu`], what every operation on the device shares;
//! - `fault.rs`: wgpu's error and device-lost callbacks, turned into typed errors;
//! - `headless.rs`: [`quiet_headless_vulkan`], no window-system error lines without a display;
//! - `pipeline.rs`: the WGSL modules ([`Module`], [`Kernel`]), the pipeline cache and its
//!   parallel preparation ([`PipelinePrep`]);
//! - `space.rs`: buffers as one virtual element space, and the segment windows a dispatch binds;
//! - `command.rs`: the [`Recorder`], the arena and the bind groups;
//! - `timer.rs`: timestamp queries around an operation's encoders ([`DeviceTime`]).

use std::sync::{Mutex, MutexGuard};

mod adapter;
mod command;
mod device;
mod fault;
mod headless;
mod pipeline;
mod space;
mod timer;

pub(crate) use adapter::Setup;
pub(crate) use command::{Recorder, Table};
pub(crate) use device::Gpu;
pub use fault::WgpuError;
pub(crate) use fault::device_error;
pub use headless::{QuietHeadless, quiet_headless_vulkan};
pub use pipeline::PipelinePrep;
pub(crate) use pipeline::{Kernel, Module};
pub(crate) use space::{Space, Window};
pub use timer::DeviceTime;

/// The backend's name in errors and [`backend_api::DeviceInfo`].
pub(crate) const NAME: &str = "wgpu";

/// Loop iterations one invocation of a looping kernel runs at most: half of the 65,535 after which
/// Mesa's llvmpipe silently ends an invocation's loops (all its loops together), so that software
/// adapters compute what hardware does. Kernels whose work per invocation grows with the call's
/// arguments are dispatched in ranges that stay below it.
pub(crate) const LOOP_BUDGET: usize = 1 << 15;

/// Locks a mutex, ignoring poisoning (the data stays consistent: every critical section is a
/// plain push or take).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
