//! Kernel sources for the GPU backends, kept as files (`cuda/*.cu`, `wgsl/*.wgsl`) and embedded
//! with `include_str!` so that each backend compiles them at run time (NVRTC, naga).

/// CUDA C++ kernel sources, one per operation family, compiled by NVRTC at first use. Every
/// kernel here is one the CUDA backend launches.
pub mod cuda {
    /// Integer types, Goldilocks arithmetic, two-buffer locations (`#include "common.cuh"`).
    pub const COMMON: &str = include_str!("../cuda/common.cuh");
    /// Keccak-f\[1600\] and the BLAKE3 compression function (`#include "hashes.cuh"`).
    pub const HASHES: &str = include_str!("../cuda/hashes.cuh");
    /// The Poseidon2 permutation over Goldilocks, width 8 (`#include "poseidon2.cuh"`).
    pub const POSEIDON2: &str = include_str!("../cuda/poseidon2.cuh");
    /// Poseidon2's round constants, generated from p3-goldilocks (`#include
    /// "poseidon2_constants.cuh"`; `tests/poseidon2_constants.rs` keeps it so).
    pub const POSEIDON2_CONSTANTS: &str = include_str!("../cuda/poseidon2_constants.cuh");
    /// The in-place transpose: tiled block transpose and the fused run-pass kernel.
    pub const TRANSPOSE: &str = include_str!("../cuda/transpose.cu");
    /// Batched copies: one gather launch per batch.
    pub const COPY: &str = include_str!("../cuda/copy.cu");
    /// Leaf hashing: both layouts for the byte hashes, Poseidon2 over rows, column ranges.
    pub const HASH: &str = include_str!("../cuda/hash.cu");
    /// Merkle tree levels and leaf padding.
    pub const MERKLE: &str = include_str!("../cuda/merkle.cu");
    /// Coset LDE: fused radix-2 NTT passes (a shared-memory kernel for short transforms, the
    /// radix-16 register kernel for the rest), coset scaling, zero-extension.
    pub const LDE: &str = include_str!("../cuda/lde.cu");
    /// The opening products: row dot products (a warp per row) and column dot products (partial
    /// sums per row chunk, then one sum per output).
    pub const OPEN: &str = include_str!("../cuda/open.cu");
    /// The quotient of a constraint program: a thread per point interpreting the program.
    pub const QUOTIENT: &str = include_str!("../cuda/quotient.cu");

    /// The headers every kernel file may `#include`, as (include name, text), for NVRTC.
    pub const HEADERS: &[(&str, &str)] = &[
        ("common.cuh", COMMON),
        ("hashes.cuh", HASHES),
        ("poseidon2.cuh", POSEIDON2),
        ("poseidon2_constants.cuh", POSEIDON2_CONSTANTS),
    ];
    /// Every kernel file, as (file name, text).
    pub const SOURCES: &[(&str, &str)] = &[
        ("transpose.cu", TRANSPOSE),
        ("copy.cu", COPY),
        ("hash.cu", HASH),
        ("merkle.cu", MERKLE),
        ("lde.cu", LDE),
        ("open.cu", OPEN),
        ("quotient.cu", QUOTIENT),
    ];
}

/// WGSL kernel sources, one per operation family.
///
/// Every kernel source is [`WINDOW`](wgsl::WINDOW) (bindings and segmented element access) followed by the
/// helpers it uses and its own file; the wgpu backend concatenates them.
pub mod wgsl {
    /// Bindings, the parameter block and element access through segment windows.
    pub const WINDOW: &str = include_str!("../wgsl/window.wgsl");
    /// Goldilocks arithmetic on u32 pairs (portable: no 64-bit integer type needed).
    pub const GOLDILOCKS: &str = include_str!("../wgsl/goldilocks.wgsl");
    /// The same functions in native u64 (needs `SHADER_INT64`); replaces [`GOLDILOCKS`].
    pub const GOLDILOCKS_INT64: &str = include_str!("../wgsl/goldilocks_int64.wgsl");
    /// `gl_pow` (x^e, square-and-multiply) and `gl_inverse` (Fermat) over [`GOLDILOCKS`] or
    /// [`GOLDILOCKS_INT64`].
    pub const GOLDILOCKS_POW: &str = include_str!("../wgsl/goldilocks_pow.wgsl");
    /// Keccak-f\[1600\] on u32 pairs.
    pub const KECCAK: &str = include_str!("../wgsl/keccak.wgsl");
    /// The BLAKE3 compression function.
    pub const BLAKE3: &str = include_str!("../wgsl/blake3.wgsl");
    /// Poseidon2's round constants and internal diagonal (Plonky3's Goldilocks width 8), generated
    /// from p3-goldilocks and checked against it by this crate's tests.
    pub const POSEIDON2_CONSTANTS: &str = include_str!("../wgsl/poseidon2_constants.wgsl");
    /// The Poseidon2 permutation (Plonky3's Goldilocks width 8), every round written out, over
    /// [`GOLDILOCKS`] or [`GOLDILOCKS_INT64`] and [`POSEIDON2_CONSTANTS`].
    pub const POSEIDON2: &str = include_str!("../wgsl/poseidon2.wgsl");
    /// Batched copies (a table of pieces) and rows in bit-reversed order.
    pub const COPY: &str = include_str!("../wgsl/copy.wgsl");
    /// The block transpose of the in-place transpose plan.
    pub const TRANSPOSE: &str = include_str!("../wgsl/transpose.wgsl");
    /// Leaf hashing: Keccak-256 and BLAKE3 over both layouts, Poseidon2's sponge over rows.
    pub const HASH: &str = include_str!("../wgsl/hash.wgsl");
    /// Merkle tree levels (Keccak-256, BLAKE3, Poseidon2's compression) and leaf padding.
    pub const MERKLE: &str = include_str!("../wgsl/merkle.wgsl");
    /// Coset LDE: multi-stage NTT passes, coset scaling and the spreading of rows to their blocks.
    pub const LDE: &str = include_str!("../wgsl/lde.wgsl");
    /// The opening products: row dot products (up to 32 invocations per row) and column dot products
    /// (partial sums per chunk of rows and column, then a workgroup per output); FRI's fold; the
    /// reduced openings' point terms (eight rows an invocation, one inversion per point).
    pub const OPEN: &str = include_str!("../wgsl/open.wgsl");
    /// The quotient: a constraint program interpreted by an invocation per point, its registers in
    /// a scratch buffer, in dispatches over ranges of instructions.
    pub const QUOTIENT: &str = include_str!("../wgsl/quotient.wgsl");
}
