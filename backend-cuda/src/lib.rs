//! The CUDA backend (cudarc, dynamic loading, NVRTC-compiled kernels).
