//! `STARK_COMMIT_TRACE=1`: the `prover` CLI prints a timestamp on stderr at each step of its
//! process (entry to `main`, backend opened, kernels and staging and memory prepared, table made,
//! commit done, report printed, backend closed), so that where a short process spends its time
//! can be read off one run: `trace <ms since main> ms unix <seconds> <step>`. The Unix time lets
//! a script that noted the time before starting the process add the process start and, after it
//! ends, the exit.

use std::sync::OnceLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// The environment variable that turns the trace on (`1`).
pub const TRACE_ENV: &str = "STARK_COMMIT_TRACE";

static START: OnceLock<Option<Instant>> = OnceLock::new();

/// Starts the clock when [`TRACE_ENV`] is `1` and prints the first step; the CLI calls it first.
pub(crate) fn start() {
    START.get_or_init(|| std::env::var_os(TRACE_ENV).is_some_and(|v| v == "1").then(Instant::now));
    step("main");
}

/// Prints `what` with the time since [`start`], when the trace is on.
pub(crate) fn step(what: &str) {
    if let Some(Some(t0)) = START.get() {
        let unix = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        eprintln!("trace {:9.3} ms unix {unix:.6} {what}", t0.elapsed().as_secs_f64() * 1e3);
    }
}
