//! The conformance suite on the CPU backend (always available: a construction failure is a bug).

conformance::conformance_suite!(backend_cpu::CpuBackend, || Ok(backend_cpu::CpuBackend::new()), "REQUIRE_CPU");

/// The freed-memory rule on a simulated device small enough for the check to fill.
#[test]
fn free_memory_is_allocatable_under_a_simulated_limit() {
    let cpu = backend_cpu::CpuBackend::with_memory(64 << 20);
    if let Err(f) = conformance::memory::memory_free_memory_is_allocatable(&cpu) {
        panic!("{f}");
    }
}
