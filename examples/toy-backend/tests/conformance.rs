//! The conformance suite on the toy backend.

conformance::conformance_suite!(toy_backend::ToyBackend, || Ok(toy_backend::ToyBackend::new()), "REQUIRE_TOY");

/// The freed-memory rule on a simulated device small enough for the check to fill.
#[test]
fn free_memory_is_allocatable_under_a_simulated_limit() {
    let toy = toy_backend::ToyBackend::with_memory(64 << 20);
    if let Err(f) = conformance::memory::memory_free_memory_is_allocatable(&toy) {
        panic!("{f}");
    }
}
