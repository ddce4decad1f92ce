//! Running a reliability check (one at a time, memory checked afterwards) and the macros that
//! generate one `#[test]` per check.

use std::sync::Mutex;
use std::time::Instant;

use backend_api::Backend;

use super::ReliabilityCheck;
use crate::{Failure, Outcome, ensure_live};

/// One reliability check at a time in a process: fault injection arms the shared tracker, and the
/// concurrency check reads the shared memory counters.
static SERIAL: Mutex<()> = Mutex::new(());

/// Runs one check on `backend`, printing the device, and checks that live memory returns to what it
/// was before the check.
///
/// # Errors
/// The check's own failure, or a [`Failure`] for memory left allocated.
pub fn run_reliability_outcome<B: Backend>(backend: &'static B, name: &str, check: ReliabilityCheck<B>) -> Outcome {
    let _serial = SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let info = backend.info();
    println!(
        "reliability {name}: backend {} on {} ({} B total, {} B free)",
        info.backend, info.device, info.total_memory, info.free_memory
    );
    let baseline = backend.memory().live;
    let start = Instant::now();
    check(backend).map_err(|f| Failure(format!("{name} on {} ({}): {f}", info.backend, info.device)))?;
    println!("reliability {name}: passed in {:.2} s", start.elapsed().as_secs_f64());
    ensure_live(backend, baseline, format_args!("{name} on {} ({})", info.backend, info.device))
}

/// The body of every test [`reliability_suite!`](crate::reliability_suite) generates: skips
/// visibly (or fails, when `require_env` is `1`) if the backend could not be made, otherwise runs
/// the check and panics on failure.
///
/// # Panics
/// When the check fails, or when the backend could not be made and `require_env` is `1`.
pub fn run_reliability_check<B: Backend>(
    backend: Result<&'static B, &str>,
    backend_name: &str,
    name: &str,
    require_env: &str,
    check: ReliabilityCheck<B>,
) {
    let required = crate::reference::skip::required(require_env);
    crate::run_or_skip(backend, backend_name, name, require_env, required, |b| run_reliability_outcome(b, name, check));
}

/// Generates one `#[test]` per reliability check for a backend type.
///
/// ```ignore
/// conformance::reliability_suite!(backend_cpu::CpuBackend, || Ok(backend_cpu::CpuBackend::new()), "REQUIRE_CPU");
/// ```
///
/// The arguments are those of [`conformance_suite!`](crate::conformance_suite). It also defines
/// `__reliability_backend()` at the call site (`Result<&'static $ty, &'static str>`), so an
/// instantiation can add backend-specific checks with [`run_reliability_check`].
#[macro_export]
macro_rules! reliability_suite {
    ($ty:ty, $make:expr, $require_env:literal) => {
        $crate::__backend_once!(__reliability_backend, $ty, $make);

        $crate::__reliability_tests! { $ty, $require_env;
            concurrent_commits_under_admission,
            commit_fault_injection,
            commit_repeated_100,
            commit_rayon_thread_counts,
            batched_copy_overlaps_refused,
            device_set_over_logical_devices,
        }
    };
}

/// Expands the reliability checks into tests; not for direct use.
#[doc(hidden)]
#[macro_export]
macro_rules! __reliability_tests {
    ($ty:ty, $require_env:literal; $($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                $crate::reliability::run_reliability_check::<$ty>(
                    __reliability_backend(),
                    stringify!($ty),
                    stringify!($name),
                    $require_env,
                    $crate::reliability::$name::<$ty> as $crate::reliability::ReliabilityCheck<$ty>,
                );
            }
        )*
    };
}
