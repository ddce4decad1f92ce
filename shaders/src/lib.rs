//! Kernel sources for the GPU backends, kept as files (`cuda/*.cu`, `wgsl/*.wgsl`) and embedded
//! with `include_str!` so that each backend compiles them at run time (NVRTC, naga).

/// CUDA C++ kernel sources, one per operation family, compiled by NVRTC at first use.
pub mod cuda {}

/// WGSL kernel sources, one per operation family.
pub mod wgsl {}
