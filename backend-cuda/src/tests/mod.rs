//! The backend's unit tests, in two groups:
//!
//! - [`nvrtc`]: no GPU needed. Every kernel file compiles with NVRTC for sm_90 (when NVRTC is
//!   present; `REQUIRE_NVRTC=1` makes its absence a failure), the compile error path carries the
//!   log, the cache key covers what changes an image, and the driver layer reports a missing
//!   device as a typed error instead of panicking.
//! - [`embedded`]: no GPU needed. The kernel images embedded at build time: every unit for every
//!   architecture, byte-equal to NVRTC's run-time output, lookups that refuse other architectures
//!   and sources; a named architecture's kernel cache filled without a device.
//! - [`quotient_host`]: no GPU needed. The quotient kernels compiled for the host by the C++
//!   compiler and run with the launches the backend computes, against the naive reference.
//! - [`device`] and [`device_lde`]: need a CUDA device. Without one each prints `SKIPPED` and
//!   passes; `REQUIRE_CUDA=1` makes that a failure (set it on GPU machines).
//!
//! The conformance suite (`tests/tests/cuda.rs`) checks every `Backend` method against its naive
//! references; these tests check what is particular to this backend.

use crate::driver;

mod device;
mod device_lde;
mod embedded;
mod nvrtc;
mod quotient_host;

/// Prints a visible skip of `test` (straight to the process's stderr, past the test harness's
/// capture), or fails when the environment variable `require` is `1`.
fn skip(test: &str, reason: &str, require: &str) {
    naive_reference::skip::skip(&format!("backend_cuda::{test}"), reason, require);
}

/// `true` when NVRTC is loadable; otherwise a visible skip ([`skip`], `REQUIRE_NVRTC`).
fn nvrtc_or_skip(test: &str) -> bool {
    if driver::nvrtc_present() {
        return true;
    }
    let reason = "NVRTC (libnvrtc.so.13) not found; `pip install nvidia-cuda-nvrtc==13.0.88` and put \
                  site-packages/nvidia/cu13/lib on LD_LIBRARY_PATH";
    skip(test, reason, "REQUIRE_NVRTC");
    false
}

/// A backend on device 0, or `None` after a visible skip ([`skip`], `REQUIRE_CUDA`).
fn device_or_skip(test: &str) -> Option<crate::CudaBackend> {
    match crate::CudaBackend::new(0) {
        Ok(b) => Some(b),
        Err(e) => {
            skip(test, &e.to_string(), "REQUIRE_CUDA");
            None
        }
    }
}

/// Panics at the first element of the row-major `m`-column matrix `got` that differs from `want`
/// (or at a length mismatch), naming its row and column.
fn assert_same_words(what: &str, got: &[u64], want: &[u64], m: usize) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    if let Some(at) = got.iter().zip(want).position(|(g, w)| g != w) {
        panic!("{what}: element {at} (row {}, column {}) is {:#x}, not {:#x}", at / m, at % m, got[at], want[at]);
    }
}

/// Seeded values over all of u64 (about one in 2^32 non-canonical), with p, p + 1 and u64::MAX
/// planted at the start.
fn table(len: usize, seed: u64) -> Vec<u64> {
    let mut s = seed | 1;
    let mut v: Vec<u64> = (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        })
        .collect();
    for (slot, x) in v.iter_mut().zip([backend_api::field::P, backend_api::field::P + 1, u64::MAX]) {
        *slot = x;
    }
    v
}

/// Serialises the tests that read the process-wide page-locked byte count.
static PINNED_COUNT: std::sync::Mutex<()> = std::sync::Mutex::new(());
