//! The benches' one reader of numeric environment settings (`BENCH_COMMIT_LOG_ROWS=20` and the
//! like).

use std::ffi::OsString;

/// `name` parsed from the environment as a `usize`, or `default` when it is unset.
///
/// # Panics
/// When `name` is set to something that is not a non-negative integer: a bench must not measure
/// the default shape while its user believes it measured another.
pub fn env(name: &str, default: usize) -> usize {
    parse(name, std::env::var_os(name), default)
}

/// [`env`] of the value `value` that `name` holds (`None`: unset).
fn parse(name: &str, value: Option<OsString>, default: usize) -> usize {
    let Some(value) = value else { return default };
    let text = value.to_string_lossy();
    text.trim().parse().unwrap_or_else(|e| {
        panic!("{name}={text:?} is not a non-negative integer ({e}); unset it for the default {default}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_gives_the_default_set_gives_the_value_and_garbage_is_refused() {
        assert_eq!(parse("BENCH_X", None, 17), 17);
        assert_eq!(parse("BENCH_X", Some(" 20 ".into()), 17), 20);
        assert_eq!(parse("BENCH_X", Some("0".into()), 17), 0);
        for bad in ["2^20", "", "-1", "1e6"] {
            let err = std::panic::catch_unwind(|| parse("BENCH_X", Some(bad.into()), 17))
                .expect_err("a malformed value must be refused");
            let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
            assert!(msg.contains(&format!("BENCH_X={bad:?}")) && msg.contains("default 17"), "{bad}: {msg}");
        }
        // The public reader: a name no environment sets.
        assert_eq!(env(&format!("NAIVE_REFERENCE_ENV_TEST_{}", std::process::id()), 5), 5);
    }
}
