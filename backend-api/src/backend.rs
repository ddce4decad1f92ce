//! The `Backend` trait: device memory and the commit kernels.

use crate::error::{Error, Result};
use crate::fault::{AllocTracker, MemoryCounters};
use crate::shape::{CopyRange, DIGEST_WORDS, HashKind, LdeParams, LeafSpec, MatrixShape, TreeShape};

/// Static facts about the device a backend runs on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The backend's short name: `cpu`, `cuda`, `wgpu`, or a port's own.
    pub backend: &'static str,
    /// The device's name as its driver reports it.
    pub device: String,
    /// Total device memory, in bytes.
    pub total_memory: usize,
    /// Free device memory now, in bytes.
    pub free_memory: usize,
}

/// An owned device buffer of `u64` elements, freed on drop.
///
/// Digests live in buffers too: one 32-byte digest is [`DIGEST_WORDS`] elements whose
/// little-endian bytes are the digest's bytes.
pub trait DeviceBuffer: Send + Sync {
    /// Length in `u64` elements.
    fn len(&self) -> usize;

    /// Whether the buffer holds no elements.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A device-to-host copy queued behind the work already issued; [`PendingDownload::wait`] blocks
/// until it has landed.
pub trait PendingDownload: Send {
    /// Waits for the copy and returns the host data.
    ///
    /// # Errors
    /// A device error raised by the copy or by any work queued before it.
    fn wait(self) -> Result<Vec<u64>>;
}

/// A compute backend for the commit kernels.
///
/// Operations are issued in call order on one queue per backend instance; they may run
/// asynchronously and report device faults at the next blocking call ([`Backend::download`],
/// [`PendingDownload::wait`], [`Backend::synchronize`]). Every allocation goes through
/// [`Backend::tracker`], so memory counters and fault injection see the same bytes on every
/// backend.
///
/// Byte-level semantics are fixed by the repository's `CONVENTIONS.md`; the conformance suite
/// (`conformance` crate) checks an implementation against independent references.
///
/// **Validation happens once, in front of the kernels.** Shapes and parameters are valid by
/// construction ([`MatrixShape::new`], [`LdeParams::new`], [`TreeShape::new`], [`LeafSpec::new`]).
/// What a caller can still get wrong (a buffer that does not hold the shape, a scratch cap below
/// one run, a digest offset past the output, a range past a buffer's end, a size that overflows)
/// each implementation refuses by calling the function of [`crate::validate`] named after the
/// method (and [`crate::copy::validate_batch`] for copies) before it allocates or issues work;
/// past that point it trusts its arguments. The errors below are those functions' errors.
pub trait Backend: Send + Sync {
    /// The backend's owned device buffer. It must give the bytes it reserved in
    /// [`Backend::tracker`] back when it drops (the suite checks that live bytes return to their
    /// baseline after every check): hold a [`crate::Reservation`] from
    /// [`AllocTracker::reserve_owned`] in it, which releases them on drop.
    type Buffer: DeviceBuffer;
    /// A queued device-to-host copy.
    type Download: PendingDownload;

    /// The device's name and memory.
    fn info(&self) -> DeviceInfo;

    /// The allocation tracker every device allocation of this backend goes through: buffers,
    /// scratch, tables. A backend keeps it in an `Arc<AllocTracker>` and shares it with its
    /// buffers through their [`crate::Reservation`]s, so a buffer that outlives a borrow of the
    /// backend can still release its bytes.
    fn tracker(&self) -> &AllocTracker;

    /// Allocates `len` elements; the contents are unspecified.
    ///
    /// # Errors
    /// [`Error::SizeOverflow`] when `len * 8` overflows `usize` ([`crate::validate::alloc_bytes`]),
    /// [`Error::OutOfMemory`] (or an injected fault); nothing stays allocated.
    fn alloc(&self, len: usize) -> Result<Self::Buffer>;

    /// Allocates a buffer holding a copy of `host`.
    ///
    /// # Errors
    /// As [`Backend::alloc`], or a device error from the copy.
    fn upload(&self, host: &[u64]) -> Result<Self::Buffer>;

    /// Copies `host` into `buf` from element `offset` on, after all work issued before; the
    /// other elements of `buf` keep their contents. This is how a trace reaches the first rows of
    /// an LDE buffer without a buffer of its own ([`Backend::coset_lde_in_place`]).
    ///
    /// # Errors
    /// [`Error::OutOfBounds`] when `offset + host.len()` passes the buffer's end
    /// ([`crate::validate::write`]), or a device error from the copy.
    fn write(&self, buf: &mut Self::Buffer, offset: usize, host: &[u64]) -> Result<()>;

    /// Copies `out.len()` elements starting at element `offset` of `buf` to `out`, after all
    /// work issued before.
    ///
    /// # Errors
    /// [`Error::OutOfBounds`], or a device error from this or earlier work.
    fn download(&self, buf: &Self::Buffer, offset: usize, out: &mut [u64]) -> Result<()>;

    /// Queues a copy of the whole of `buf` to the host behind the work already issued and
    /// returns at once; later operations may modify `buf` without affecting the copy.
    ///
    /// # Errors
    /// As [`Backend::download`].
    fn queue_download(&self, buf: &Self::Buffer) -> Result<Self::Download>;

    /// Waits for all issued work.
    ///
    /// # Errors
    /// A device error from any issued work.
    fn synchronize(&self) -> Result<()>;

    /// Turns a row-major `shape` matrix in `buf` into the column-major matrix, in place, with at
    /// most `scratch_cap` bytes of scratch (see [`crate::plan`]). Bytes are moved, never changed.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when `buf` does not hold exactly `shape`,
    /// [`Error::ScratchTooSmall`] when the cap cannot hold one block of one row plus one run,
    /// out of memory for the scratch.
    fn transpose_in_place(&self, buf: &mut Self::Buffer, shape: MatrixShape, scratch_cap: usize) -> Result<()>;

    /// Copies each `(src, dst, len)` from `src` to `dst`.
    ///
    /// # Errors
    /// The batch is validated first ([`crate::copy::validate_batch`]): out of bounds, or two
    /// destination ranges that overlap, and nothing moves.
    fn batched_copy(&self, src: &Self::Buffer, dst: &mut Self::Buffer, copies: &[CopyRange]) -> Result<()>;

    /// Copies each `(src, dst, len)` within `buf`.
    ///
    /// # Errors
    /// As [`Backend::batched_copy`]; here a destination overlapping any source (its own
    /// included) also rejects the batch.
    fn batched_copy_within(&self, buf: &mut Self::Buffer, copies: &[CopyRange]) -> Result<()>;

    /// Hashes the leaves of a row-major `shape` matrix per `spec` and writes the digests to
    /// `out`, starting at digest index `out_digest` (element `out_digest * DIGEST_WORDS`).
    ///
    /// # Errors
    /// [`LeafSpec::validate`]'s errors, [`Error::LengthMismatch`] when `matrix` does not hold
    /// `shape`, [`Error::OutOfBounds`] when `out` is too short.
    fn hash_leaves_into(
        &self,
        matrix: &Self::Buffer,
        shape: MatrixShape,
        spec: &LeafSpec,
        out: &mut Self::Buffer,
        out_digest: usize,
    ) -> Result<()>;

    /// Completes a Merkle tree whose `tree.leaves` leaf digests are already at node indices
    /// `[L-1, L-1+leaves)` of `nodes` (`2L - 1` digests): pads the leaves to `L` by repeating the
    /// last one and fills every inner node, `node[p] = H(node[2p+1] || node[2p+2])`.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when `nodes` is not `tree.words()` long.
    fn merkle_tree_in_place(&self, nodes: &mut Self::Buffer, tree: TreeShape, hash: HashKind) -> Result<()>;

    /// The coset low-degree extension of a row-major `n x m` trace, in place in the LDE's own
    /// `N x m` buffer, `N = n * B` for the blowup `B = params.blowup()`: no second buffer of the
    /// trace's size is needed.
    ///
    /// **On entry** `buf` holds exactly `params.lde_shape()` (`N * m` elements). Rows `[0, n)`
    /// (elements `[0, n * m)`) hold the trace, row-major, in natural order; its values may be any
    /// `u64` and are read mod p. Rows `[n, N)` may hold anything: they are overwritten unread.
    ///
    /// **On return** `buf` holds the LDE, the bytes [`Backend::coset_lde`] defines: row `i` is
    /// `(P_0(s * w_N^i), ..., P_{m-1}(s * w_N^i))` in natural order, row-major, every value
    /// canonical.
    ///
    /// **Definition.** For each column `c`, `P_c` is the unique polynomial of degree `< n` with
    /// `P_c(w_n^j) = trace[j][c]` for `j = 0..n` (values read mod p, `w_n = w_N^B`), evaluated on
    /// the coset `s * <w_N>` of the size-`N` subgroup, with `s = params.shift()` and `w_N` the
    /// primitive `N`-th root of unity `g32^(2^32 / N)`, `g32 = 7^((p - 1) / 2^32)`. With `B = 1`
    /// and `s = 1` the result is the canonicalised trace.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when `buf` does not hold exactly `params.lde_shape()`
    /// ([`crate::validate::coset_lde_in_place`]), out of memory for tables or scratch; on error the
    /// contents of `buf` are unspecified.
    fn coset_lde_in_place(&self, buf: &mut Self::Buffer, params: &LdeParams) -> Result<()>;

    /// The coset low-degree extension of a row-major `n x m` trace into a new row-major `N x m`
    /// buffer: the same bytes as [`Backend::coset_lde_in_place`] (see its definition), for a
    /// caller that keeps the trace. It allocates the LDE, copies the trace into its first `n`
    /// rows and extends it in place, so it needs the trace's and the LDE's bytes at once; a
    /// commit that does not keep the trace writes it straight into the LDE buffer instead
    /// ([`Backend::write`]).
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when `trace` does not hold `params.trace()`
    /// ([`crate::validate::coset_lde`]); out of memory; nothing stays allocated on error.
    fn coset_lde(&self, trace: &Self::Buffer, params: &LdeParams) -> Result<Self::Buffer> {
        crate::validate::coset_lde(params, trace.len())?;
        let mut out = self.alloc(params.lde_shape().len())?;
        self.batched_copy(trace, &mut out, &[CopyRange::new(0, 0, trace.len())])?;
        self.coset_lde_in_place(&mut out, params)?;
        Ok(out)
    }

    /// The allocation counters now.
    fn memory(&self) -> MemoryCounters {
        self.tracker().counters()
    }

    /// Downloads the whole buffer.
    ///
    /// # Errors
    /// As [`Backend::download`].
    fn download_vec(&self, buf: &Self::Buffer) -> Result<Vec<u64>> {
        let mut out = vec![0u64; buf.len()];
        self.download(buf, 0, &mut out)?;
        Ok(out)
    }

    /// Hashes leaves into a new buffer of `leaf_count * DIGEST_WORDS` elements.
    ///
    /// # Errors
    /// As [`Backend::hash_leaves_into`].
    fn hash_leaves(&self, matrix: &Self::Buffer, shape: MatrixShape, spec: &LeafSpec) -> Result<Self::Buffer> {
        let leaves = spec.validate(shape)?;
        let mut out = self.alloc(leaves * DIGEST_WORDS)?;
        self.hash_leaves_into(matrix, shape, spec, &mut out, 0)?;
        Ok(out)
    }

    /// Builds the `2L - 1` node array over `leaves` (a buffer of leaf digests).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty or ragged leaf buffer, out of memory.
    fn merkle_tree(&self, leaves: &Self::Buffer, hash: HashKind) -> Result<Self::Buffer> {
        if leaves.len() % DIGEST_WORDS != 0 {
            return Err(Error::InvalidArgument(format!(
                "a leaf buffer holds whole digests of {DIGEST_WORDS} elements, got {} elements",
                leaves.len()
            )));
        }
        let tree = TreeShape::new(leaves.len() / DIGEST_WORDS)?;
        let mut nodes = self.alloc(tree.words())?;
        let first = tree.first_leaf() * DIGEST_WORDS;
        self.batched_copy(leaves, &mut nodes, &[CopyRange::new(0, first, leaves.len())])?;
        self.merkle_tree_in_place(&mut nodes, tree, hash)?;
        Ok(nodes)
    }
}

/// The digests of a node or digest buffer's host copy, as 32-byte arrays.
pub fn digests_from_words(words: &[u64]) -> Vec<[u8; 32]> {
    words
        .chunks_exact(DIGEST_WORDS)
        .map(|w| {
            let mut d = [0u8; 32];
            for (i, x) in w.iter().enumerate() {
                d[i * 8..i * 8 + 8].copy_from_slice(&x.to_le_bytes());
            }
            d
        })
        .collect()
}

/// One 32-byte digest as the [`DIGEST_WORDS`] buffer elements that hold it.
pub fn digest_to_words(d: &[u8; 32]) -> [u64; DIGEST_WORDS] {
    std::array::from_fn(|i| u64::from_le_bytes(d[i * 8..i * 8 + 8].try_into().expect("8 bytes")))
}

/// Lower-case hex of a digest.
pub fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}
