//! Quiet headless Vulkan: no window-system error lines on a machine without a display.

/// What [`quiet_headless_vulkan`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuietHeadless {
    /// It set `NODEVICE_SELECT=1`: Vulkan instances made from now on print no window-system
    /// errors.
    Quieted,
    /// Nothing to do: `XDG_RUNTIME_DIR` is an absolute path (a compositor can be reached), or the
    /// user set `NODEVICE_SELECT` or `MESA_VK_DEVICE_SELECT` (and keeps Mesa's layer as set).
    NotNeeded,
    /// Other threads were running, so the environment was left as it is: changing it while
    /// another thread may read it is undefined behaviour. Call the function first in `main`.
    OtherThreads {
        /// The process's threads when it looked, this one included.
        threads: usize,
    },
    /// The environment was left as it is because the process's threads could not be counted
    /// (no `/proc/self/task`: not Linux, or `/proc` not mounted), so setting it could not be
    /// shown to be safe.
    Unverified,
}

/// Keeps a headless program's stderr free of window-system errors that are not errors, safely.
///
/// wgpu 30 enables every window-system extension the Vulkan driver offers (its instance
/// descriptor has no compute-only option), and Mesa's device-selection layer
/// (`VK_LAYER_MESA_device_select`, installed with Mesa's Vulkan drivers) then connects to the
/// Wayland display to put the display's GPU first. Where `XDG_RUNTIME_DIR` is unset or not an
/// absolute path no compositor can be reached, and libwayland prints
/// `error: XDG_RUNTIME_DIR is invalid or not set in the environment.` twice per Vulkan instance
/// although nothing failed. There, this sets `NODEVICE_SELECT=1`, the layer's own off switch: the
/// adapter choice is unchanged ([`crate::WgpuBackend::new`] ranks the adapters itself) and every
/// real error still prints. Nothing is set when the user set `NODEVICE_SELECT` or
/// `MESA_VK_DEVICE_SELECT` or when `XDG_RUNTIME_DIR` is usable.
///
/// The layer reads only its environment variables, and neither wgpu nor Vulkan offers another
/// switch, so the environment is the one place to say it. Changing the environment is sound only
/// while no other thread runs; this function checks that itself (on Linux it counts
/// `/proc/self/task`) and otherwise changes nothing and says why. Call it as the first statement
/// of `main`, before any thread (rayon's pool, a runtime, a logger) starts:
///
/// ```no_run
/// // The first statement of `main`, while this is the process's only thread: `Quieted`, or
/// // `NotNeeded` where a compositor can be reached.
/// let quiet = backend_wgpu::quiet_headless_vulkan();
/// assert!(!matches!(quiet, backend_wgpu::QuietHeadless::OtherThreads { .. }));
/// // ... construct `WgpuBackend`s from here on.
/// ```
///
/// A test harness runs tests on threads, so there it returns [`QuietHeadless::OtherThreads`]; set
/// `NODEVICE_SELECT=1` in the test's environment instead.
pub fn quiet_headless_vulkan() -> QuietHeadless {
    let runtime_dir_usable = std::env::var_os("XDG_RUNTIME_DIR").is_some_and(|d| d.to_string_lossy().starts_with('/'));
    let user_chose =
        std::env::var_os("NODEVICE_SELECT").is_some() || std::env::var_os("MESA_VK_DEVICE_SELECT").is_some();
    if runtime_dir_usable || user_chose {
        return QuietHeadless::NotNeeded;
    }
    match process_threads() {
        Some(1) => {
            // SAFETY: this thread is the process's only one (counted just above; only a running
            // thread can start another, and this one is here), so no other code can read or write
            // the environment while it changes.
            unsafe { std::env::set_var("NODEVICE_SELECT", "1") };
            QuietHeadless::Quieted
        }
        Some(threads) => QuietHeadless::OtherThreads { threads },
        None => QuietHeadless::Unverified,
    }
}

/// The process's threads, this one included: the entries of `/proc/self/task`, or `None` where
/// they cannot be counted.
fn process_threads() -> Option<usize> {
    let entries = std::fs::read_dir("/proc/self/task").ok()?;
    let mut threads = 0;
    for entry in entries {
        entry.ok()?;
        threads += 1;
    }
    (threads > 0).then_some(threads)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_is_left_alone_while_other_threads_run() {
        // The harness runs this test beside its main thread, so setting the environment here is
        // never shown to be safe; the environment is read before and after.
        let before = std::env::var_os("NODEVICE_SELECT");
        let _other = std::thread::spawn(|| std::thread::sleep(std::time::Duration::from_millis(200)));
        match quiet_headless_vulkan() {
            QuietHeadless::OtherThreads { threads } => assert!(threads >= 2, "{threads}"),
            QuietHeadless::NotNeeded | QuietHeadless::Unverified => {}
            QuietHeadless::Quieted => panic!("set the environment while another thread ran"),
        }
        assert_eq!(std::env::var_os("NODEVICE_SELECT"), before);
        if cfg!(target_os = "linux") {
            assert!(process_threads().is_some_and(|t| t >= 2), "{:?}", process_threads());
        }
    }
}
