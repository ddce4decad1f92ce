//! The reliability checks on the toy backend.

conformance::reliability_suite!(toy_backend::ToyBackend, || Ok(toy_backend::ToyBackend::new()), "REQUIRE_TOY");
