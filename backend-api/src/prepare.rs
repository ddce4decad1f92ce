//! What a backend can do ahead of a commit, and how it names its device: the hooks the pipeline
//! and the CLI call on every backend, a port included, instead of matching on concrete types.

use crate::shape::{HashKind, LdeParams};

/// What a commit is about to do, so that a backend can make ready, on another thread, what its
/// first calls would otherwise pay for ([`crate::RawBackend::prepare`]): kernels compiled or read
/// from a cache, a staging ring page-locked, a memory pool grown, host twiddle tables built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Preparation {
    /// The commit's leaf hash: which kernels it launches.
    pub hash: HashKind,
    /// Bytes the commit uploads from ordinary (pageable) host memory. A trace in the backend's
    /// own host memory ([`crate::Backend::alloc_host`]: page-locked on CUDA) is copied directly
    /// and counts 0.
    pub pageable_upload_bytes: usize,
    /// Device bytes to grow the backend's memory pool by ahead of the commit (its modelled
    /// bytes), or `None`: where other processes wait for the device's free memory, a pool
    /// holding memory no buffer uses would count against this one.
    pub device_bytes: Option<usize>,
    /// Elements of the commit's largest buffer, the LDE.
    pub lde_elems: usize,
    /// The commit's LDE, or `None`: its host twiddle tables can be built ahead
    /// ([`crate::field::LdeTwiddles::shared`], kept for the process).
    pub lde: Option<LdeParams>,
}

impl Preparation {
    /// Builds the LDE's host twiddle tables now (see [`Preparation::lde`]), for a backend that
    /// uploads them; returns their bytes, 0 without an LDE.
    pub fn build_lde_tables(&self) -> usize {
        use crate::field::LdeTwiddles;
        let Some(lde) = &self.lde else { return 0 };
        let (log_n, log_b) = (lde.log_trace_rows(), lde.log_blowup());
        drop(LdeTwiddles::shared(log_n, log_b, lde.shift()));
        LdeTwiddles::bytes_for(log_n, log_b)
    }
}

/// The page-locked (or otherwise fastest) host <-> device copies of a commit's trace bytes: the
/// floor a benchmark compares uploads with ([`crate::RawBackend::transfer_floor`]).
#[derive(Clone, Debug, PartialEq)]
pub struct TransferFloor {
    /// What was copied, e.g. `page-locked host <-> device`.
    pub what: String,
    /// Median seconds of the host-to-device copy.
    pub h2d_seconds: f64,
    /// Median seconds of the device-to-host copy of the same bytes.
    pub d2h_seconds: f64,
}

/// `key` made safe as one file name on every platform: ASCII letters, digits, `.` and `_` kept,
/// every other run of characters (`-` included) one `-`, no leading or trailing `-` or `.`, at most 128
/// bytes, and `device` when nothing is left. [`crate::Backend::device_key`] passes every port's
/// key through it.
pub fn file_safe_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for c in key.chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '.' | '_') {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let trimmed = out.trim_matches(|c| c == '-' || c == '.');
    let mut key: String = trimmed.chars().take(128).collect();
    while key.ends_with(['-', '.']) {
        key.pop();
    }
    if key.is_empty() { "device".into() } else { key }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lde_tables_are_built_and_their_bytes_counted() {
        use crate::field::LdeTwiddles;
        use crate::shape::MatrixShape;
        let lde = LdeParams::new(MatrixShape::new(1 << 6, 3).unwrap(), 4, 7).unwrap();
        let prep = |lde| Preparation {
            hash: HashKind::Keccak256,
            pageable_upload_bytes: 0,
            device_bytes: None,
            lde_elems: 0,
            lde,
        };
        // (2^6 / 2 + 2^6) + 2^8 / 2 elements of the inverse, coset and forward tables.
        assert_eq!(prep(Some(lde)).build_lde_tables(), LdeTwiddles::bytes_for(6, 2));
        assert_eq!(LdeTwiddles::bytes_for(6, 2), (32 + 64 + 128) * 8);
        assert_eq!(prep(None).build_lde_tables(), 0);
    }

    #[test]
    fn keys_become_single_safe_file_names() {
        assert_eq!(file_safe_key("cpu"), "cpu");
        assert_eq!(file_safe_key("cuda-GPU-6d1e0c7b-1a2b"), "cuda-GPU-6d1e0c7b-1a2b");
        assert_eq!(
            file_safe_key("wgpu-llvmpipe (LLVM 15.0.6, 256 bits)-10005-0000-"),
            "wgpu-llvmpipe-LLVM-15.0.6-256-bits-10005-0000"
        );
        assert_eq!(file_safe_key("../../etc/passwd"), "etc-passwd");
        assert_eq!(file_safe_key("a/b\\c:d\0e"), "a-b-c-d-e");
        assert_eq!(file_safe_key(""), "device");
        assert_eq!(file_safe_key("///"), "device");
        assert_eq!(file_safe_key(".."), "device");
        assert_eq!(file_safe_key("GPU \u{e9}t\u{e9}"), "GPU-t");
        let long = file_safe_key(&"x".repeat(1000));
        assert_eq!(long.len(), 128);
    }
}
