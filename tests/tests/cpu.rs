//! The conformance suite on the CPU backend (always available: a construction failure is a bug).

conformance::conformance_suite!(backend_cpu::CpuBackend, || Ok(backend_cpu::CpuBackend::new()), "REQUIRE_CPU");
