//! The one rule for a test that cannot run here (no device, no driver, no compiler): say so
//! loudly, or fail when the environment demands it.
//!
//! A test whose backend cannot be made prints `SKIPPED <what>: <reason> (set <VAR>=1 to make this
//! a failure)` straight to the process's stderr (past the test harness's capture, so a plain
//! `cargo test` shows it) and on stdout (for logs that keep it). With `<VAR>=1` (`REQUIRE_CUDA`,
//! `REQUIRE_WGPU`, `REQUIRE_NVRTC`, a port's own) the same situation panics instead, so a machine
//! that is meant to have the device cannot pass by skipping. `<VAR>=all` requires the device too,
//! and a conformance suite reads it as "every optional operation as well" ([`required_all`]).

use std::fmt::Display;
use std::io::Write as _;

/// Whether `require_env` is set to `1` or `all`: a skip is then a failure.
pub fn required(require_env: &str) -> bool {
    level(std::env::var(require_env).ok().as_deref()) >= 1
}

/// Whether `require_env` is set to `all`: the backend must be there, and implement every
/// optional operation (an answer of "unsupported" fails the check that asked instead of skipping).
pub fn required_all(require_env: &str) -> bool {
    level(std::env::var(require_env).ok().as_deref()) == 2
}

/// 0: skips allowed; 1 (`1`): the device is required; 2 (`all`): its optional operations too.
fn level(value: Option<&str>) -> u8 {
    match value {
        Some("1") => 1,
        Some("all") => 2,
        _ => 0,
    }
}

/// Reports that `what` could not run because of `reason`: a visible `SKIPPED` line, or a panic
/// when `require_env` is `1`.
///
/// # Panics
/// When `require_env` is `1`, with `what`, the variable and `reason` in the message.
pub fn skip(what: &str, reason: impl Display, require_env: &str) {
    skip_if_allowed(required(require_env), what, reason, require_env);
}

/// [`skip`] with the variable already read: panics when `required`.
///
/// # Panics
/// When `required`.
pub fn skip_if_allowed(required: bool, what: &str, reason: impl Display, require_env: &str) {
    if required {
        panic!("{what}: {require_env}=1 but it cannot run here: {reason}");
    }
    announce(format_args!("{what}: {reason} (set {require_env}=1 to make this a failure)"));
}

/// Prints `SKIPPED <what>` straight to the process's stderr (past the test harness's capture, so a
/// plain `cargo test` shows it) and on stdout (for logs that keep it): the line of every skip,
/// also of a check that passes without running (an optional operation a backend lacks).
pub fn announce(what: std::fmt::Arguments<'_>) {
    let line = format!("SKIPPED {what}");
    let _ = writeln!(std::io::stderr(), "{line}");
    println!("{line}");
}

/// The value `made` holds, or `None` after [`skip`] with its error as the reason.
///
/// # Panics
/// When `made` is an error and `require_env` is `1`.
pub fn or_skip<T, E: Display>(made: Result<T, E>, what: &str, require_env: &str) -> Option<T> {
    match made {
        Ok(value) => Some(value),
        Err(reason) => {
            skip(what, reason, require_env);
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_requires_the_device_and_all_its_optional_operations_too() {
        assert_eq!([None, Some(""), Some("0"), Some("yes"), Some("ALL")].map(level), [0; 5]);
        assert_eq!((level(Some("1")), level(Some("all"))), (1, 2));
    }

    #[test]
    fn an_unset_variable_skips_and_a_required_one_fails() {
        // A name no environment sets.
        let var = format!("NAIVE_REFERENCE_SKIP_TEST_{}", std::process::id());
        assert!(!required(&var));
        assert_eq!(or_skip::<u8, _>(Err("no such device"), "t::skips", &var), None);
        assert_eq!(or_skip::<u8, &str>(Ok(7), "t::skips", &var), Some(7));
        skip_if_allowed(false, "t::skips", "no such device", "REQUIRE_X");
        let err = std::panic::catch_unwind(|| skip_if_allowed(true, "t::required", "no such device", "REQUIRE_X"))
            .expect_err("a required skip must fail");
        let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(msg.contains("REQUIRE_X=1") && msg.contains("no such device") && msg.contains("t::required"), "{msg}");
    }
}
