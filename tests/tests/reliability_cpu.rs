//! The reliability checks on the CPU backend (always available: a construction failure is a bug).

conformance::reliability_suite!(backend_cpu::CpuBackend, || Ok(backend_cpu::CpuBackend::new()), "REQUIRE_CPU");
