//! Kernel sources for the GPU backends, kept as files (`cuda/*.cu`, `wgsl/*.wgsl`) and embedded
//! with `include_str!` so that each backend compiles them at run time (NVRTC, naga).

/// CUDA C++ kernel sources, one per operation family, compiled by NVRTC at first use.
pub mod cuda {
    /// Integer types, Goldilocks arithmetic, two-buffer locations (`#include "common.cuh"`).
    pub const COMMON: &str = include_str!("../cuda/common.cuh");
    /// Keccak-f[1600] and the BLAKE3 compression function (`#include "hashes.cuh"`).
    pub const HASHES: &str = include_str!("../cuda/hashes.cuh");
    /// The in-place transpose: tiled block transpose and the fused run-pass kernel.
    pub const TRANSPOSE: &str = include_str!("../cuda/transpose.cu");
    /// Batched copies: one gather launch per batch.
    pub const COPY: &str = include_str!("../cuda/copy.cu");
    /// Leaf hashing, both layouts, both hashes, column ranges.
    pub const HASH: &str = include_str!("../cuda/hash.cu");
    /// Merkle tree levels and leaf padding.
    pub const MERKLE: &str = include_str!("../cuda/merkle.cu");
    /// Coset LDE: fused radix-2 NTT passes, coset scaling, zero-extension.
    pub const LDE: &str = include_str!("../cuda/lde.cu");

    /// The headers every kernel file may `#include`, as (include name, text), for NVRTC.
    pub const HEADERS: &[(&str, &str)] = &[("common.cuh", COMMON), ("hashes.cuh", HASHES)];
    /// Every kernel file, as (file name, text).
    pub const SOURCES: &[(&str, &str)] =
        &[("transpose.cu", TRANSPOSE), ("copy.cu", COPY), ("hash.cu", HASH), ("merkle.cu", MERKLE), ("lde.cu", LDE)];
}


/// WGSL kernel sources, one per operation family.
pub mod wgsl {}
