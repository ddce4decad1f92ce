//! The portable wgpu backend (WGSL kernels, u32-pair 64-bit arithmetic).
