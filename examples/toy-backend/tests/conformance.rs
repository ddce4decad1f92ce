//! The conformance suite on the toy backend.

conformance::conformance_suite!(toy_backend::ToyBackend, || Ok(toy_backend::ToyBackend::new()), "REQUIRE_TOY");
