//! The public conformance suite: generic checks every [`Backend`] implementation runs, compared
//! with independent naive references.
//!
//! - **One line per backend.** [`conformance_suite!`] expands to one `#[test]` per check, so ours
//!   (CPU, CUDA, wgpu) and a hardware porter's backend run exactly the same suite.
//! - **Independent references.** [`reference`](mod@reference) recomputes everything the slow, obvious way: an
//!   index-by-index transpose, an `O(n^2)` LDE in `u128 % p` arithmetic with its own roots of
//!   unity (it never calls `backend_api::field`), leaf preimages serialised by hand and fed to the
//!   `sha3` / `blake3` crates, a recursive Merkle root and a naive node array.
//! - **Checks are functions.** Each check is a `pub fn name<B: Backend>(&B) -> Outcome` in a module
//!   named after the backend file it exercises ([`transpose`], [`copy`], [`hash`], [`merkle`],
//!   [`lde`], [`open`], [`memory`]); a port can call any one of them directly, and the crate's own tests
//!   prove each check can fail by running it against deliberately broken backends.
//! - **Seeded inputs.** [`Gen`] is a ChaCha8 generator seeded from the check's name (see
//!   [`Gen::new`]): every run sees the same matrices, including non-canonical values
//!   (`>= p`, with `p`, `p + 1` and `u64::MAX` always present in matrices of 3+ elements).
//! - **Memory is part of the contract.** Every check must leave `backend.memory().live` where it
//!   found it; the transpose checks also bound the scratch by the cap.
//! - **Skips are loud.** A backend that cannot be constructed (no device) prints
//!   `SKIPPED <backend>::<check>: <reason>` on stderr, unless the named environment variable
//!   (e.g. `REQUIRE_CUDA=1`) turns that into a failure.
//!
//! # Running the suite against your backend
//!
//! 1. Implement [`backend_api::RawBackend`] for your type (it is then a [`Backend`], the checked
//!    front), routing every device allocation through its [`backend_api::AllocTracker`].
//! 2. Add `conformance` as a dev-dependency and create `tests/conformance.rs` in your crate with
//!    one line:
//!
//!    ```ignore
//!    conformance::conformance_suite!(my_port::MyBackend, || my_port::MyBackend::new(0), "REQUIRE_MY_PORT");
//!    ```
//!
//!    The second argument is any expression callable as `() -> backend_api::Result<MyBackend>`;
//!    it runs once per test binary.
//! 3. Run `REQUIRE_MY_PORT=1 cargo test -p my-port --test conformance` (drop the variable to let
//!    a machine without the device skip visibly; add `-- --nocapture` to see the device each
//!    check ran on). Run one check with `... --test conformance transpose_block_tails`.
//!
//! The checks share one backend and run one at a time (a process-wide lock), so the memory
//! counters they read are not disturbed by other checks. `CONFORMANCE_SEED=<u64>` perturbs every
//! generator seed, for a wider sweep than the fixed default.

use std::cell::RefCell;
use std::fmt;
use std::sync::Mutex;

use backend_api::{Backend, Error};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

pub use backend_api;

pub mod contract;
pub mod copy;
pub mod hash;
pub mod lde;
pub mod memory;
pub mod merkle;
pub mod open;
pub mod parity;
pub mod quotient;
pub use naive_reference as reference;
pub mod reliability;
pub mod transpose;
#[cfg(feature = "wgpu")]
pub mod wgpu_setups;

#[cfg(test)]
mod selftest;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selftest::{Bug, HostBackend};

    #[test]
    fn a_panic_in_a_check_is_a_failure_that_names_the_check() {
        fn boom(_: &HostBackend) -> Outcome {
            panic!("index {} out of range", 7)
        }
        fn literal(_: &HostBackend) -> Outcome {
            panic!("plain literal")
        }
        let b = HostBackend::new(Bug::None);
        let err = run_check_outcome(&b, "boom_check", boom).expect_err("a panicking check must fail");
        assert!(err.0.contains("backend panicked in boom_check: index 7 out of range"), "{err}");
        let err = run_check_outcome(&b, "literal_check", literal).expect_err("a panicking check must fail");
        assert!(err.0.contains("backend panicked in literal_check: plain literal"), "{err}");
    }

    #[test]
    fn a_missing_backend_skips_or_fails_as_required() {
        let check: Check<HostBackend> = crate::transpose::transpose_errors::<HostBackend>;
        // Not required: prints SKIPPED and returns.
        let run = |b: &HostBackend| run_check_outcome(b, "transpose_errors", check);
        run_or_skip::<HostBackend>(Err("no such device"), "HostBackend", "transpose_errors", "REQUIRE_X", false, run);
        // Required: panics with the reason.
        let err = std::panic::catch_unwind(|| {
            run_or_skip::<HostBackend>(Err("no such device"), "HostBackend", "transpose_errors", "REQUIRE_X", true, run)
        })
        .expect_err("a required backend that is missing must fail");
        let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(msg.contains("REQUIRE_X=1") && msg.contains("no such device"), "{msg}");
        // A failing check panics through run_or_skip too.
        let broken = HostBackend::new(Bug::SwapRuns);
        let failed = std::panic::catch_unwind(|| {
            run_or_skip(Ok(&broken), "HostBackend", "transpose_block_tails", "REQUIRE_X", false, |b| {
                run_check_outcome(b, "transpose_block_tails", crate::transpose::transpose_block_tails::<HostBackend>)
            })
        });
        assert!(failed.is_err(), "a failing check must fail its test");
    }
}

/// A failed check: what was expected, what the backend did, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure(pub String);

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Failure {}

/// The result of one check.
pub type Outcome = Result<(), Failure>;

/// A check, as the suite lists it.
pub type Check<B> = fn(&B) -> Outcome;

/// Adds a description of the call to a backend error, turning it into a [`Failure`].
pub trait Context<T> {
    /// `Err(e)` becomes `Failure("<what>: unexpected error: <e>")`.
    ///
    /// # Errors
    /// When `self` is an error.
    fn ctx(self, what: impl fmt::Display) -> Result<T, Failure>;
}

impl<T> Context<T> for Result<T, Error> {
    fn ctx(self, what: impl fmt::Display) -> Result<T, Failure> {
        self.map_err(|e| Failure(format!("{what}: unexpected error: {e}")))
    }
}

/// Returns a [`Failure`] built from the format arguments unless the condition holds.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $($arg:tt)+) => {
        if !$cond {
            return ::std::result::Result::Err($crate::Failure(::std::format!($($arg)+)));
        }
    };
}

/// Checks that `result` is an error accepted by `pred` and returns it.
///
/// # Errors
/// A [`Failure`] naming `what` when the call succeeded or failed with another error.
pub fn expect_error<T>(
    result: Result<T, Error>,
    what: impl fmt::Display,
    pred: impl Fn(&Error) -> bool,
) -> Result<Error, Failure> {
    match result {
        Ok(_) => Err(Failure(format!("{what}: expected an error, the call succeeded"))),
        Err(e) if pred(&e) => Ok(e),
        Err(e) => Err(Failure(format!("{what}: wrong error: {e} ({e:?})"))),
    }
}

/// Compares two element slices and names the first difference.
///
/// # Errors
/// A [`Failure`] naming `what`, the first differing index and both values.
pub fn ensure_words_eq(what: impl fmt::Display, expected: &[u64], actual: &[u64]) -> Outcome {
    if expected.len() != actual.len() {
        return Err(Failure(format!("{what}: expected {} elements, got {}", expected.len(), actual.len())));
    }
    if let Some(i) = (0..expected.len()).find(|&i| expected[i] != actual[i]) {
        let wrong = (0..expected.len()).filter(|&i| expected[i] != actual[i]).count();
        return Err(Failure(format!(
            "{what}: element {i} is {:#018x}, expected {:#018x} ({wrong} of {} elements differ)",
            actual[i],
            expected[i],
            expected.len()
        )));
    }
    Ok(())
}

/// Checks that the backend's live bytes are back at `baseline`.
///
/// # Errors
/// A [`Failure`] naming `what` and both byte counts.
pub fn ensure_live<B: Backend>(backend: &B, baseline: usize, what: impl fmt::Display) -> Outcome {
    let live = backend.memory().live;
    ensure!(live == baseline, "{what}: {live} B live afterwards, {baseline} B before (a leak or a double release)");
    Ok(())
}

/// FNV-1a of a string: the per-check seed.
const fn fnv1a(s: &str) -> u64 {
    let bytes = s.as_bytes();
    let mut h = 0xcbf2_9ce4_8422_2325_u64;
    let mut i = 0;
    while i < bytes.len() {
        h ^= bytes[i] as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
        i += 1;
    }
    h
}

/// Field elements that every generated matrix mixes in: zero, one, `p - 1` and the
/// non-canonical values `p`, `p + 1`, `p + 7`, `u64::MAX`.
pub const SPECIAL_VALUES: [u64; 8] =
    [0, 1, reference::P - 1, reference::P, reference::P + 1, reference::P + 7, u64::MAX - 1, u64::MAX];

/// A seeded generator of test inputs (ChaCha8).
///
/// The seed is the 64-bit FNV-1a hash of the name given to [`Gen::new`] (each check passes its
/// own name, so checks are independent and reproducible), XOR the value of the environment
/// variable `CONFORMANCE_SEED` when it is set to a `u64`.
#[derive(Clone, Debug)]
pub struct Gen {
    rng: ChaCha8Rng,
    seed: u64,
}

impl Gen {
    /// A generator seeded from `name` (and `CONFORMANCE_SEED`, if set).
    pub fn new(name: &str) -> Self {
        let extra = std::env::var("CONFORMANCE_SEED").ok().and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
        let seed = fnv1a(name) ^ extra;
        Self { rng: ChaCha8Rng::seed_from_u64(seed), seed }
    }

    /// The seed in use.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// A uniform `u64`.
    pub fn u64(&mut self) -> u64 {
        self.rng.random()
    }

    /// A uniform value in `[0, n)`; `n > 0`.
    pub fn below(&mut self, n: usize) -> usize {
        self.rng.random_range(0..n)
    }

    /// A field element as an input may hold it: one time in eight one of [`SPECIAL_VALUES`], one
    /// in eight a non-canonical value `p + k` (`k < 2^32 - 1`), otherwise a uniform `u64`.
    pub fn element(&mut self) -> u64 {
        match self.rng.random_range(0..8u32) {
            0 => SPECIAL_VALUES[self.below(SPECIAL_VALUES.len())],
            1 => reference::P + self.rng.random_range(0..0xFFFF_FFFEu64),
            _ => self.u64(),
        }
    }

    /// `len` elements from [`Gen::element`]; when `len >= 3`, `u64::MAX`, `p` and `p + 1` are
    /// written at three distinct random positions so every matrix holds non-canonical values.
    pub fn matrix(&mut self, len: usize) -> Vec<u64> {
        let mut v: Vec<u64> = (0..len).map(|_| self.element()).collect();
        if len >= 3 {
            let start = self.below(len);
            for (k, x) in [u64::MAX, reference::P, reference::P + 1].into_iter().enumerate() {
                v[(start + k) % len] = x;
            }
        }
        v
    }

    /// `count` random 32-byte digests.
    pub fn digests(&mut self, count: usize) -> Vec<[u8; 32]> {
        (0..count)
            .map(|_| {
                let mut d = [0u8; 32];
                self.rng.fill(&mut d[..]);
                d
            })
            .collect()
    }
}

/// One check at a time in a process: the memory counters they read belong to one shared backend.
static SERIAL: Mutex<()> = Mutex::new(());

/// Runs one check on `backend`, printing the device, and checks that live memory returns to what
/// it was before the check.
///
/// A panic inside the check (the backend's, typically: an index out of bounds on a call it
/// should have refused) is caught and becomes a failure that names the check.
///
/// # Errors
/// The check's own failure, `"backend panicked in <check>: <message>"`, or a [`Failure`] for
/// memory left allocated.
pub fn run_check_outcome<B: Backend>(backend: &B, name: &str, check: Check<B>) -> Outcome {
    run_check_outcome_with(backend, name, &check)
}

fn run_check_outcome_with<B: Backend>(backend: &B, name: &str, check: &dyn Fn(&B) -> Outcome) -> Outcome {
    let _serial = SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let info = backend.info();
    println!(
        "conformance {name}: backend {} on {} ({} B total, {} B free)",
        info.backend, info.device, info.total_memory, info.free_memory
    );
    let baseline = backend.memory().live;
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(backend)))
        .unwrap_or_else(|panic| Err(Failure(format!("backend panicked in {name}: {}", panic_message(&*panic)))));
    outcome.map_err(|f| Failure(format!("{name} on {} ({}): {f}", info.backend, info.device)))?;
    ensure_live(backend, baseline, format_args!("{name} on {} ({})", info.backend, info.device))
}

/// The text of a panic payload (`panic!` with a literal or with format arguments).
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    match (payload.downcast_ref::<&str>(), payload.downcast_ref::<String>()) {
        (Some(s), _) => s,
        (_, Some(s)) => s,
        _ => "(a panic payload that is not a string)",
    }
}

/// The body of every test [`conformance_suite!`] generates: skips visibly (or fails, when
/// `require_env` is `1`) if the backend could not be made, otherwise runs the check and panics on
/// failure.
///
/// # Panics
/// When the check fails, or when the backend could not be made and `require_env` is `1`.
pub fn run_check<B: Backend>(
    backend: Result<&B, &str>,
    backend_name: &str,
    name: &str,
    require_env: &str,
    check: Check<B>,
) {
    let required = reference::skip::required(require_env);
    require_optional(reference::skip::required_all(require_env).then_some(require_env));
    run_or_skip(backend, backend_name, name, require_env, required, |b| run_check_outcome(b, name, check));
}

thread_local! {
    /// The variable whose value `all` makes an optional operation the backend does not implement a
    /// failure, or `None` (the default): see [`require_optional`]. Per thread, because tests run
    /// in parallel threads of one process and each sets it from its own variable.
    static OPTIONAL_REQUIRED: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Whether the checks run after this call require every optional operation
/// ([`Backend::row_dot_products`], [`Backend::column_dot_products`], [`Backend::fri_fold`],
/// [`Backend::quotient_values`]):
/// with `Some(variable)`, a backend that answers [`Error::Unsupported`] fails the check that asked
/// (the failure names `<variable>=all`); with `None`, the check prints `SKIPPED` and passes. The
/// tests [`conformance_suite!`] generates set it from their variable (`REQUIRE_<PORT>=all`); a
/// port that drives the suite itself ([`run_all`]) sets it here. The setting is the calling
/// thread's: it applies to the checks this thread runs, never to another test's.
pub fn require_optional(variable: Option<&str>) {
    OPTIONAL_REQUIRED.with(|v| *v.borrow_mut() = variable.map(str::to_owned));
}

/// The outcome of a check whose backend answered [`Error::Unsupported`] for an optional
/// operation: a visible `SKIPPED` line and a pass, or a failure under [`require_optional`].
pub(crate) fn unsupported<B: Backend>(backend: &B, check: &str, e: &Error) -> Outcome {
    match OPTIONAL_REQUIRED.with(|v| v.borrow().clone()).as_deref() {
        Some(variable) => Err(Failure(format!(
            "{check}: {e}, and {variable}=all requires every optional operation (set {variable}=1 to let \
             it skip)"
        ))),
        None => {
            reference::skip::announce(format_args!("{}::{check}: {e}", backend.info().backend));
            Ok(())
        }
    }
}

/// Runs `run` on the backend, or reports why it could not be made: a visible `SKIPPED` line, or a
/// panic when `required`. Shared by the tests [`conformance_suite!`] and
/// [`reliability_suite!`](crate::reliability_suite) generate.
pub(crate) fn run_or_skip<'b, B: Backend>(
    backend: Result<&'b B, &str>,
    backend_name: &str,
    name: &str,
    require_env: &str,
    required: bool,
    run: impl FnOnce(&'b B) -> Outcome,
) {
    match backend {
        Ok(backend) => {
            if let Err(f) = run(backend) {
                panic!("{f}");
            }
        }
        Err(reason) => reference::skip::skip_if_allowed(
            required,
            &format!("{backend_name}::{name}"),
            format_args!("the backend could not be made: {reason}"),
            require_env,
        ),
    }
}

/// Every check of the suite, by name, for ports that drive the suite themselves.
pub fn checks<B: Backend>() -> Vec<(&'static str, Check<B>)> {
    __conformance_checks!(list B)
}

/// Runs every check on `backend` and returns the outcomes by name (no panics).
pub fn run_all<B: Backend>(backend: &B) -> Vec<(&'static str, Outcome)> {
    checks::<B>().into_iter().map(|(name, check)| (name, run_check_outcome(backend, name, check))).collect()
}

/// Defines `fn $name() -> Result<&'static $ty, &'static str>` that makes the backend once per
/// test binary (a `OnceLock`) and hands every test the same one, or the reason it could not be
/// made. Shared by [`conformance_suite!`] and [`reliability_suite!`](crate::reliability_suite).
#[doc(hidden)]
#[macro_export]
macro_rules! __backend_once {
    ($name:ident, $ty:ty, $make:expr) => {
        fn $name() -> ::std::result::Result<&'static $ty, &'static str> {
            static BACKEND: ::std::sync::OnceLock<::std::result::Result<$ty, ::std::string::String>> =
                ::std::sync::OnceLock::new();
            BACKEND
                .get_or_init(|| {
                    let made: $crate::backend_api::Result<$ty> = ($make)();
                    made.map_err(|e| e.to_string())
                })
                .as_ref()
                .map_err(|e| e.as_str())
        }
    };
}

/// The list of checks, handed to a callback macro. The one place a new check is registered.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_checks {
    ($($mode:tt)*) => {
        $crate::__conformance_expand! { [$($mode)*]
            transpose::transpose_edge_shapes,
            transpose::transpose_block_tails,
            transpose::transpose_wide_columns,
            transpose::transpose_ext3,
            transpose::transpose_default_cap,
            transpose::transpose_scratch_within_cap,
            transpose::transpose_errors,
            transpose::leaves_then_transpose,
            transpose::leaves_then_transpose_errors,
            copy::batched_copy_random,
            copy::batched_copy_within_random,
            copy::batched_copy_rejects_overlap,
            copy::batched_copy_rejects_out_of_bounds,
            copy::bit_reversed_rows_random,
            copy::bit_reversed_rows_errors,
            hash::hash_known_answers,
            hash::hash_leaves_keccak_rows,
            hash::hash_leaves_blake3_rows,
            hash::hash_leaves_poseidon2_rows,
            hash::hash_leaves_keccak_pairs,
            hash::hash_leaves_blake3_pairs,
            hash::hash_leaves_wide_rows,
            hash::hash_leaves_many_rows,
            hash::hash_leaves_non_canonical,
            hash::hash_leaves_into_offset,
            hash::hash_leaves_errors,
            hash::hash_leaves_from_host,
            merkle::merkle_tree_keccak,
            merkle::merkle_tree_blake3,
            merkle::merkle_tree_poseidon2,
            merkle::merkle_tree_in_place,
            merkle::merkle_tree_errors,
            lde::coset_lde_small_domains,
            lde::coset_lde_shifts,
            lde::coset_lde_larger_domains,
            lde::coset_lde_canonical_output,
            lde::coset_lde_identity,
            lde::coset_lde_errors,
            lde::coset_lde_in_place_small_domains,
            lde::coset_lde_in_place_garbage_rows,
            lde::coset_lde_in_place_larger_domains,
            lde::coset_lde_in_place_allocates_only_its_tables,
            lde::coset_lde_from_host,
            lde::coset_lde_from_host_and_download,
            open::row_dot_products_random,
            open::column_dot_products_random,
            open::dot_products_large_sums,
            open::dot_products_errors,
            open::fri_fold_random,
            open::fri_fold_errors,
            open::reduce_openings_random,
            open::reduce_openings_errors,
            quotient::quotient_values_random,
            quotient::quotient_values_selectors,
            quotient::quotient_values_errors,
            memory::memory_upload_download,
            memory::memory_host_buffers,
            memory::memory_size_overflow,
            memory::memory_counters,
            memory::memory_queue_download_snapshot,
            memory::memory_fault_injection,
            memory::memory_huge_allocations,
            memory::memory_free_memory_is_allocatable,
            memory::memory_prepare_refusals,
        }
    };
}

/// A check that needs more instances of the backend than the one it is given: it makes them with
/// `make` (the suite's constructor expression).
pub type InstanceCheck<B> = fn(&B, &dyn Fn() -> backend_api::Result<B>) -> Outcome;

/// Every [`InstanceCheck`] of the suite, by name.
pub fn instance_checks<B: Backend>() -> Vec<(&'static str, InstanceCheck<B>)> {
    vec![("memory_foreign_buffers", memory::memory_foreign_buffers::<B> as InstanceCheck<B>)]
}

/// Runs one [`InstanceCheck`] as [`run_check_outcome`] runs a check.
///
/// # Errors
/// As [`run_check_outcome`].
pub fn run_instance_check_outcome<B: Backend>(
    backend: &B,
    make: &dyn Fn() -> backend_api::Result<B>,
    name: &str,
    check: InstanceCheck<B>,
) -> Outcome {
    let bound = |b: &B| check(b, make);
    run_check_outcome_with(backend, name, &bound)
}

/// Generates one `#[test]` per check of the suite for a backend type.
///
/// ```ignore
/// conformance::conformance_suite!(backend_cpu::CpuBackend, || Ok(backend_cpu::CpuBackend::new()), "REQUIRE_CPU");
/// ```
///
/// - `$ty`: the [`Backend`] type.
/// - `$make`: an expression callable as `() -> backend_api::Result<$ty>`; it runs once per test
///   binary (a `OnceLock`), and every test shares the backend it made.
/// - `$require_env`: an environment variable; when it is `1`, a backend that cannot be made fails
///   every test instead of printing `SKIPPED <backend>::<check>: <reason>`.
///
/// Invoke it once per module (it defines the test functions and a helper function
/// `__conformance_backend` at the call site).
#[macro_export]
macro_rules! conformance_suite {
    ($ty:ty, $make:expr, $require_env:literal) => {
        $crate::__backend_once!(__conformance_backend, $ty, $make);

        $crate::__conformance_checks!(tests $ty, $require_env);

        #[test]
        fn memory_foreign_buffers() {
            let required = $crate::reference::skip::required($require_env);
            let make = || -> $crate::backend_api::Result<$ty> { ($make)() };
            $crate::run_instance_check::<$ty>(
                __conformance_backend(),
                &make,
                stringify!($ty),
                "memory_foreign_buffers",
                $require_env,
                required,
                $crate::memory::memory_foreign_buffers::<$ty>,
            );
        }
    };
}

/// The body of the test [`conformance_suite!`] generates for an [`InstanceCheck`].
///
/// # Panics
/// As [`run_check`].
pub fn run_instance_check<B: Backend>(
    backend: Result<&B, &str>,
    make: &dyn Fn() -> backend_api::Result<B>,
    backend_name: &str,
    name: &str,
    require_env: &str,
    required: bool,
    check: InstanceCheck<B>,
) {
    require_optional(reference::skip::required_all(require_env).then_some(require_env));
    run_or_skip(backend, backend_name, name, require_env, required, |b| {
        run_instance_check_outcome(b, make, name, check)
    });
}

/// Expands the list of checks into tests or a vector; not for direct use.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_expand {
    ([list $b:ident] $($module:ident :: $name:ident),* $(,)?) => {
        vec![$((stringify!($name), $crate::$module::$name::<$b> as $crate::Check<$b>)),*]
    };
    ([tests $ty:ty, $require_env:literal] $($module:ident :: $name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                $crate::run_check::<$ty>(
                    __conformance_backend(),
                    stringify!($ty),
                    stringify!($name),
                    $require_env,
                    $crate::$module::$name::<$ty>,
                );
            }
        )*
    };
}
