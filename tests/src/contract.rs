//! A port's own guard behind the front: raw calls that break their contract stop, in debug
//! builds, before any kernel runs.
//!
//! Safe code cannot call a [`RawBackend`] method (they are `unsafe fn`). Unsafe code that breaks a
//! method's contract is a bug of its own; a backend whose kernels write by computed addresses
//! (CUDA, wgpu) still checks each contract again at the method's entry in debug builds
//! ([`backend_api::contract::debug_assert_holds`]), so such a bug panics in tests instead of
//! writing past a buffer. This is not part of the conformance suite (a port may leave it out);
//! CUDA's and wgpu's test binaries run it.

use backend_api::{Backend, DeviceBuffer as _, HashKind, LeafJob, LeafLayout, LeafSpec, MatrixShape, RawBackend};

use crate::{Context as _, Failure, Outcome, ensure};

/// Each call the front refuses, made below it: a copy of 32 bit-reversed rows of a 16-row matrix,
/// one landing from element 40 of a 64-element buffer, a write into another instance's buffer, a
/// fused leaves-and-transpose whose second output is too short, and a quotient over 64 points of
/// a 16-row LDE whose output holds 16 words. Each must panic (in a debug
/// build) and leave the neighbouring buffer, allocated right after the destination, unchanged.
///
/// # Errors
/// A call that returned instead of panicking, or a buffer it changed.
pub fn raw_calls_outside_the_contract_stop<B: RawBackend>(
    backend: &B,
    make: &dyn Fn() -> backend_api::Result<B>,
) -> Outcome {
    if !cfg!(debug_assertions) {
        crate::reference::skip::announce(format_args!(
            "raw_calls_outside_the_contract_stop: a build without debug assertions"
        ));
        return Ok(());
    }
    let other = make().ctx("a second instance")?;
    let shape = MatrixShape::new(16, 4).ctx("shape")?;
    let src = Backend::upload(backend, &(0..64).collect::<Vec<u64>>()).ctx("upload")?;
    let mut dst = Backend::upload(backend, &[1; 64]).ctx("upload")?;
    let neighbour = Backend::upload(backend, &[2; 64]).ctx("upload")?;
    let mut foreign = Backend::upload(&other, &[3; 64]).ctx("upload")?;
    let spec = LeafSpec::new(HashKind::Keccak256, LeafLayout::Rows, 0..4).ctx("spec")?;
    let mut out_a = Backend::alloc(backend, 16 * 4).ctx("alloc")?;
    let mut out_b = Backend::alloc(backend, 8 * 4).ctx("alloc")?;
    let mut matrix = Backend::upload(backend, &[4; 64]).ctx("upload")?;

    let stops = |what: &str, call: &mut dyn FnMut()| -> Outcome {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(call));
        ensure!(result.is_err(), "{what}: a raw call outside its contract returned instead of stopping");
        Ok(())
    };
    // Every call below breaks its contract, deliberately, in a way the backend's debug-build entry
    // check catches before any device work is issued; this check fails if one gets through.
    stops("bit_reversed_rows of rows 0..32 of a 16-row matrix", &mut || {
        // SAFETY: not met, deliberately (above): the entry check stops the call.
        let _ = unsafe { RawBackend::bit_reversed_rows(backend, &src, 0, shape, 0..32, &mut dst, 0) };
    })?;
    stops("bit_reversed_rows of 16 rows into element 40 of 64", &mut || {
        // SAFETY: not met, deliberately (above): the entry check stops the call.
        let _ = unsafe { RawBackend::bit_reversed_rows(backend, &src, 0, shape, 0..16, &mut dst, 40) };
    })?;
    stops("write into another instance's buffer", &mut || {
        // SAFETY: not met, deliberately (above): the entry check stops the call.
        let _ = unsafe { RawBackend::write(backend, &mut foreign, 0, &[7; 64]) };
    })?;
    stops("hash_leaves_then_transpose with a second output of 8 digests for 16 rows", &mut || {
        let mut jobs = [
            LeafJob { spec: &spec, out: &mut out_a, out_digest: 0 },
            LeafJob { spec: &spec, out: &mut out_b, out_digest: 0 },
        ];
        // SAFETY: not met, deliberately (above): the entry check stops the call.
        let _ = unsafe { RawBackend::hash_leaves_then_transpose(backend, &mut matrix, shape, &mut jobs, 1 << 20) };
    })?;
    let program = backend_api::ConstraintProgram::new(&[
        backend_api::Instr::Column { dst: 0, col: 3, next: true },
        backend_api::Instr::Fold { src: 0, constraint: 0 },
    ])
    .ctx("program")?;
    let domain = backend_api::QuotientDomain::new(4, 6, 7).ctx("domain")?;
    let call = backend_api::QuotientCall { program: &program, domain, values: &[], alpha_powers: &[1] };
    stops("quotient_values of 64 points over a 16-row LDE into 64 words", &mut || {
        // SAFETY: not met, deliberately (above): the entry check stops the call.
        let _ = unsafe { RawBackend::quotient_values(backend, &matrix, shape, &call, &mut dst) };
    })?;
    Backend::synchronize(backend).ctx("synchronize")?;
    for (what, buf, by, value) in [
        ("the destination", &dst, backend as &B, 1),
        ("its neighbour", &neighbour, backend, 2),
        ("the other instance's buffer", &foreign, &other, 3),
        ("the fused call's matrix", &matrix, backend, 4),
    ] {
        let mut got = vec![0; buf.len()];
        Backend::download(by, buf, 0, &mut got).ctx("download")?;
        if let Some(i) = got.iter().position(|&x| x != value) {
            return Err(Failure(format!("{what} changed at element {i}: {} (was {value})", got[i])));
        }
    }
    Ok(())
}
