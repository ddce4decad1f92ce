//! The `Backend` trait, the checked front of device memory and the commit kernels, and the types
//! its calls pass.

use std::ops::Range;

use crate::error::{Error, Result};
use crate::fault::{AllocTracker, MemoryCounters};
use crate::port::RawBackend;
use crate::prepare::{Preparation, TransferFloor};
use crate::shape::{CopyRange, DIGEST_WORDS, HashKind, LdeParams, LeafSpec, MatrixShape, RowStride, TreeShape};

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

/// One tree's leaves for [`Backend::hash_leaves_then_transpose`]: hashed per `spec` into `out`
/// from digest index `out_digest` on, as [`Backend::hash_leaves_into`] would.
pub struct LeafJob<'a, B> {
    /// Which hash, layout and columns.
    pub spec: &'a LeafSpec,
    /// The digest buffer (a tree's node array, for a commit).
    pub out: &'a mut B,
    /// The digest index of the first leaf in `out`.
    pub out_digest: usize,
}

/// An owned device buffer of `u64` elements, freed on drop.
///
/// Digests live in buffers too: one 32-byte digest is [`DIGEST_WORDS`] elements whose
/// little-endian bytes are the digest's bytes.
pub trait DeviceBuffer: Send + Sync {
    /// Length in `u64` elements.
    fn len(&self) -> usize;

    /// The tracker this buffer's bytes are reserved in: its backend's [`RawBackend::tracker`]
    /// (for a buffer holding a [`crate::Reservation`], [`crate::Reservation::tracker`]). The
    /// front ([`Backend`]) compares it with the backend's own to refuse buffers of other
    /// instances, so it must be the same object for every buffer of one instance and another
    /// object for every other instance. A buffer keeps its tracker alive, so the address cannot be
    /// reused while the buffer exists.
    fn tracker(&self) -> &AllocTracker;

    /// Whether the buffer holds no elements.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Host memory a backend allocates ([`Backend::alloc_host`]) and downloads into
/// ([`PendingDownload::wait`]): a slice of `u64` elements to fill or read, and the fastest host
/// memory for the backend's transfers. On CUDA it is page-locked, so the copy engine reads and
/// writes it directly at bus speed; a plain `Vec<u64>` is the host buffer of backends that have no
/// such memory.
///
/// A host buffer needs no special call: pass it (or a sub-slice, through `Deref`) wherever a
/// `&[u64]` or `&mut [u64]` goes, e.g. [`Backend::upload`], [`Backend::download`] or the prover's
/// `TraceInput::host`; the backend recognises its own memory.
pub trait HostBuffer: std::ops::DerefMut<Target = [u64]> + Send + Sync + std::fmt::Debug {
    /// Whether the memory is page-locked (the copy engine reads and writes it directly).
    fn is_page_locked(&self) -> bool {
        false
    }
}

impl HostBuffer for Vec<u64> {}

/// A device-to-host copy queued behind the work already issued; [`PendingDownload::wait`] blocks
/// until it has landed.
pub trait PendingDownload: Send {
    /// The host memory the copy lands in: the backend's [`Backend::HostBuffer`].
    type Host: HostBuffer;

    /// Waits for the copy and returns the host data (dropping it gives a page-locked buffer back
    /// to the backend's pool for the next download).
    ///
    /// # Errors
    /// A device error raised by the copy or by any work queued before it.
    fn wait(self) -> Result<Self::Host>;
}

mod sealed {
    /// Only the blanket implementation over [`super::RawBackend`] makes a [`super::Backend`].
    pub trait Sealed {}
    impl<T: super::RawBackend> Sealed for T {}
}

/// A compute backend for the commit kernels: the checked front every caller uses.
///
/// Every [`RawBackend`] is a `Backend`, through one blanket implementation that nothing can
/// replace (the trait is sealed). Each method validates its arguments with [`crate::validate`],
/// then calls the [`RawBackend`] method of the same name, which trusts them: a port implements
/// [`RawBackend`] and gets every check, including ones it would not think of, for free.
///
/// - **Validation happens once, in front of the kernels.** Shapes and parameters are valid by
///   construction ([`MatrixShape::new`], [`LdeParams::new`], [`TreeShape::new`],
///   [`LeafSpec::new`]). What a caller can still get wrong (a buffer of another backend instance or
///   of a dropped one, a buffer that does not hold the shape, a scratch cap below one run, a digest
///   offset past the output, a range past a buffer's end, a size that overflows) is refused here
///   with a typed error before anything is allocated or issued.
/// - **Ownership.** A buffer is used only with the backend instance that allocated it (or a handle
///   sharing that instance's device and tracker); any other gets [`Error::ForeignBuffer`].
/// - **One queue.** Operations are issued in call order on one queue per backend instance; they
///   may run asynchronously and report device faults at the next blocking call
///   ([`Backend::download`], [`PendingDownload::wait`], [`Backend::synchronize`]).
/// - **Observable memory.** Every allocation goes through [`Backend::tracker`], so memory
///   counters and fault injection see the same bytes on every backend.
///
/// Byte-level semantics are fixed by the repository's `CONVENTIONS.md`; the conformance suite
/// (`conformance` crate) checks an implementation against independent references.
pub trait Backend: Send + Sync + sealed::Sealed {
    /// The backend's owned device buffer, freed on drop ([`RawBackend::Buffer`]).
    type Buffer: DeviceBuffer;
    /// A queued device-to-host copy, landing in the backend's host buffer.
    type Download: PendingDownload<Host = Self::HostBuffer>;
    /// The backend's host memory ([`Backend::alloc_host`]): page-locked where the backend has
    /// such memory, a plain `Vec<u64>` otherwise.
    type HostBuffer: HostBuffer + 'static;

    /// The device's name and memory.
    fn info(&self) -> DeviceInfo;

    /// The allocation tracker every device allocation of this backend goes through: buffers,
    /// scratch, tables.
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
    /// [`Error::ForeignBuffer`]; [`Error::OutOfBounds`] when `offset + host.len()` passes the
    /// buffer's end ([`crate::validate::write`]); a device error from the copy.
    fn write(&self, buf: &mut Self::Buffer, offset: usize, host: &[u64]) -> Result<()>;

    /// Copies `out.len()` elements starting at element `offset` of `buf` to `out`, after all
    /// work issued before.
    ///
    /// # Errors
    /// [`Error::ForeignBuffer`], [`Error::OutOfBounds`], or a device error from this or earlier
    /// work.
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

    /// Allocates `len` zeroed host elements in the memory this backend transfers fastest from and
    /// to: page-locked on CUDA, so that uploading, writing or downloading any slice of it is a
    /// direct copy at bus speed instead of a copy through staging. Generate or read data straight
    /// into it. Page-locked memory is a limited resource of the host: allocate it once and reuse
    /// it. Its page-locked bytes show in [`MemoryCounters::pinned_host`].
    ///
    /// # Errors
    /// [`Error::SizeOverflow`], or [`Error::HostOutOfMemory`] for more than the host's memory,
    /// before anything is allocated ([`crate::validate::alloc_host`]); [`Error::HostOutOfMemory`]
    /// when the host cannot give the memory (more than it has available); nothing stays
    /// allocated. A backend that cannot lock the memory may instead warn and return pageable
    /// memory ([`HostBuffer::is_page_locked`] then says so).
    fn alloc_host(&self, len: usize) -> Result<Self::HostBuffer>;

    /// Turns a row-major `shape` matrix in `buf` into the column-major matrix, in place, with at
    /// most `scratch_cap` bytes of scratch (see [`crate::plan`]). Bytes are moved, never changed.
    ///
    /// # Errors
    /// [`Error::ForeignBuffer`]; [`Error::LengthMismatch`] when `buf` does not hold exactly
    /// `shape`; [`Error::ScratchTooSmall`] when the cap cannot hold one block of one row plus one
    /// run; out of memory for the scratch.
    fn transpose_in_place(&self, buf: &mut Self::Buffer, shape: MatrixShape, scratch_cap: usize) -> Result<()>;

    /// Copies each `(src, dst, len)` from `src` to `dst`.
    ///
    /// # Errors
    /// [`Error::ForeignBuffer`]; the batch is validated first ([`crate::copy::validate_batch`]):
    /// out of bounds, or two destination ranges that overlap, and nothing moves.
    fn batched_copy(&self, src: &Self::Buffer, dst: &mut Self::Buffer, copies: &[CopyRange]) -> Result<()>;

    /// Copies each `(src, dst, len)` within `buf`.
    ///
    /// # Errors
    /// As [`Backend::batched_copy`]; here a destination overlapping any source (its own
    /// included) also rejects the batch.
    fn batched_copy_within(&self, buf: &mut Self::Buffer, copies: &[CopyRange]) -> Result<()>;

    /// Copies rows `br(rows.start) .. br(rows.end - 1)`, in that order, of the row-major `shape`
    /// matrix that starts at element `src_at` of `src` into consecutive rows of `dst` from element
    /// `dst_at` on. `shape.rows()` is a power of two and `br` reverses the low `log2(shape.rows())`
    /// bits of a row index. Over all rows it is the matrix in bit-reversed row order, out of place
    /// (Plonky3's `reverse_matrix_index_bits`, the row order of its LDEs and Merkle leaves); over
    /// a range, one chunk of that (a download in that order, a chunk at a time). The bytes are
    /// those of a [`Backend::batched_copy`] of one range per row, without a list of ranges.
    ///
    /// # Errors
    /// [`Error::ForeignBuffer`]; the refusals of [`crate::validate::bit_reversed_rows`] (rows not
    /// a power of two, a row range past the matrix, the matrix past `src`, the rows past `dst`),
    /// before anything is written; a device error from this or earlier work.
    fn bit_reversed_rows(
        &self,
        src: &Self::Buffer,
        src_at: usize,
        shape: MatrixShape,
        rows: Range<usize>,
        dst: &mut Self::Buffer,
        dst_at: usize,
    ) -> Result<()>;

    /// Hashes the leaves of a row-major `shape` matrix per `spec` and writes the digests to
    /// `out`, starting at digest index `out_digest` (element `out_digest * DIGEST_WORDS`).
    ///
    /// # Errors
    /// [`Error::ForeignBuffer`]; [`LeafSpec::validate`]'s errors; [`Error::LengthMismatch`] when
    /// `matrix` does not hold `shape`; [`Error::OutOfBounds`] when `out` is too short.
    fn hash_leaves_into(
        &self,
        matrix: &Self::Buffer,
        shape: MatrixShape,
        spec: &LeafSpec,
        out: &mut Self::Buffer,
        out_digest: usize,
    ) -> Result<()>;

    /// Hashes the leaves of a row-major `shape` matrix held in host memory, per `spec`, into `out`
    /// from digest index `out_digest` on: the digests [`Backend::hash_leaves_into`] writes for the
    /// same matrix uploaded. For a matrix that is only hashed (a Merkle tree's input), this saves
    /// the upload's device copy where the backend can read host memory (the CPU backend hashes the
    /// slice where it is); elsewhere it is the upload followed by the hash. The call returns once
    /// `matrix` is no longer read.
    ///
    /// # Errors
    /// As [`Backend::hash_leaves_into`] ([`crate::validate::hash_leaves`], with `matrix.len()`),
    /// all refused before anything is written; then out of memory for the upload.
    fn hash_leaves_from_host(
        &self,
        matrix: &[u64],
        shape: MatrixShape,
        spec: &LeafSpec,
        out: &mut Self::Buffer,
        out_digest: usize,
    ) -> Result<()>;

    /// Hashes the leaves of every job from the row-major `shape` matrix in `buf`, then turns
    /// `buf` column-major in place: the bytes of [`Backend::hash_leaves_into`] for each job, in
    /// order, followed by [`Backend::transpose_in_place`] under `scratch_cap`. It is the commit's
    /// step from the row-major LDE to its leaves and its column-major copy; a backend may hash the
    /// leaves beside the transpose's block pass ([`RawBackend::hash_leaves_then_transpose`]).
    ///
    /// # Errors
    /// Every buffer's owner, every job and the transpose are validated before anything is written
    /// ([`crate::validate::leaves_then_transpose`]): a refused call leaves `buf` and every output
    /// as they were. Then out of memory for the scratch, which leaves `buf` as it was (the outputs
    /// may hold digests already).
    fn hash_leaves_then_transpose(
        &self,
        buf: &mut Self::Buffer,
        shape: MatrixShape,
        jobs: &mut [LeafJob<'_, Self::Buffer>],
        scratch_cap: usize,
    ) -> Result<()>;

    /// Completes a Merkle tree whose `tree.leaves` leaf digests are already at node indices
    /// `[L-1, L-1+leaves)` of `nodes` (`2L - 1` digests): pads the leaves to `L` by repeating the
    /// last one and fills every inner node, `node[p] = H(node[2p+1] || node[2p+2])`.
    ///
    /// # Errors
    /// [`Error::ForeignBuffer`]; [`Error::LengthMismatch`] when `nodes` is not `tree.words()` long.
    fn merkle_tree_in_place(&self, nodes: &mut Self::Buffer, tree: TreeShape, hash: HashKind) -> Result<()>;

    /// The coset low-degree extension of a row-major `n x m` trace, in place in the LDE's own
    /// `N x m` buffer, `N = n * B` for the blowup `B = params.blowup()`: no second buffer of the
    /// trace's size is needed.
    ///
    /// **On entry** `buf` holds exactly `params.lde_shape()` (`N * m` elements). Rows `[0, n)`
    /// (elements `[0, n * m)`) hold the trace, row-major, in natural order; its values may be any
    /// `u64` and are read mod p. Rows `[n, N)` may hold anything: they are overwritten unread.
    ///
    /// **On return** `buf` holds the LDE: row `i` is `(P_0(s * w_N^i), ..., P_{m-1}(s * w_N^i))`
    /// in natural order, row-major, every value canonical.
    ///
    /// **Definition.** For each column `c`, `P_c` is the unique polynomial of degree `< n` with
    /// `P_c(w_n^j) = trace[j][c]` for `j = 0..n` (values read mod p, `w_n = w_N^B`), evaluated on
    /// the coset `s * <w_N>` of the size-`N` subgroup, with `s = params.shift()` and `w_N` the
    /// primitive `N`-th root of unity `g32^(2^32 / N)`, `g32 = 7^((p - 1) / 2^32)`. With `B = 1`
    /// and `s = 1` the result is the canonicalised trace.
    ///
    /// # Errors
    /// [`Error::ForeignBuffer`]; [`Error::LengthMismatch`] when `buf` does not hold exactly
    /// `params.lde_shape()` ([`crate::validate::coset_lde_in_place`]); out of memory for tables or
    /// scratch; on error the contents of `buf` are unspecified.
    fn coset_lde_in_place(&self, buf: &mut Self::Buffer, params: &LdeParams) -> Result<()>;

    /// The coset low-degree extension of a row-major `n x m` trace held in host memory, into the
    /// LDE's own `N x m` buffer: writes `trace` into rows `[0, n)` of `buf` and extends it in place.
    /// On return `buf` holds the bytes [`Backend::coset_lde_in_place`] defines; its contents on
    /// entry are never read. A backend may overlap the upload with the extension. The call returns
    /// once `trace` is no longer read: the caller may reuse it at once, while the extension may
    /// still be running on the device.
    ///
    /// # Errors
    /// [`Error::ForeignBuffer`]; [`Error::LengthMismatch`] when `trace` does not hold
    /// `params.trace()` (`n * m` elements) or `buf` does not hold exactly `params.lde_shape()`
    /// (`N * m` elements) ([`crate::validate::coset_lde_from_host`]), both refused before anything
    /// moves; then the copy's and the extension's errors, after which the contents of `buf` are
    /// unspecified.
    fn coset_lde_from_host(&self, buf: &mut Self::Buffer, trace: &[u64], params: &LdeParams) -> Result<()>;

    /// [`Backend::coset_lde_from_host`], and the row-major LDE it leaves in `buf` queued for
    /// download as [`Backend::queue_download`] right after would queue it: the returned download
    /// holds the same bytes. A backend may start the download of each part of the LDE as soon as
    /// that part is final, while the upload and the extension of the rest still run (CUDA does,
    /// column group by column group, on a stream of its own), so that a caller who wants the
    /// extension in host memory too pays little more than the longer of the two transfers.
    /// Later operations may modify `buf` without affecting the copy.
    ///
    /// # Errors
    /// As [`Backend::coset_lde_from_host`] and [`Backend::queue_download`].
    fn coset_lde_from_host_and_download(
        &self,
        buf: &mut Self::Buffer,
        trace: &[u64],
        params: &LdeParams,
    ) -> Result<Self::Download>;

    /// The coset low-degree extension of a row-major `n x m` trace into a new row-major `N x m`
    /// buffer: the same bytes as [`Backend::coset_lde_in_place`], for a trace that already has a
    /// device buffer (the caller's, or a snapshot it keeps). `trace` is left unchanged. The
    /// trace's and the LDE's bytes are held at once; a host trace that is not kept goes straight
    /// into the LDE buffer instead ([`Backend::coset_lde_from_host`]).
    ///
    /// # Errors
    /// [`Error::ForeignBuffer`]; [`Error::LengthMismatch`] when `trace` does not hold
    /// `params.trace()` ([`crate::validate::coset_lde`]); out of memory; nothing stays allocated
    /// on error.
    fn coset_lde(&self, trace: &Self::Buffer, params: &LdeParams) -> Result<Self::Buffer>;

    /// [`Backend::coset_lde`] of a trace whose device buffer the caller gives up (a commit's
    /// device input): the same bytes, into a new buffer, and `trace` is freed. A backend may use
    /// the trace's buffer as the inverse transform's workspace first (CUDA does).
    ///
    /// # Errors
    /// As [`Backend::coset_lde`]; the trace is freed either way, and nothing stays allocated on
    /// error.
    fn coset_lde_owned(&self, trace: Self::Buffer, params: &LdeParams) -> Result<Self::Buffer>;
    /// The dot product of every row of the row-major `shape` matrix `matrix` with each of `k`
    /// coefficient vectors, mod p: `out[r * k + j] = sum_c coeffs[j * cols + c] * matrix[r][c]`,
    /// where `coeffs` holds the `k` vectors one after the other (`k = coeffs.len() / cols`, 1 to
    /// [`crate::MAX_DOT_VECTORS`]) and `out` is row-major `rows x k`. Inputs may be non-canonical;
    /// every output is canonical (CONVENTIONS.md, "Opening products"). This is the hot loop of a
    /// PCS's reduced openings: an extension-field vector of powers of a challenge is `k` base-field
    /// vectors, one per coordinate. Blocks until `out` is written.
    ///
    /// Optional: a backend without it answers [`Error::Unsupported`] and the caller computes the
    /// products on the host.
    ///
    /// # Errors
    /// [`Error::ForeignBuffer`]; the refusals of [`crate::validate::row_dot_products`], before
    /// anything is issued; [`Error::Unsupported`]; out of memory for the coefficients; a device
    /// error from this or earlier work.
    fn row_dot_products(
        &self,
        matrix: &Self::Buffer,
        shape: MatrixShape,
        coeffs: &[u64],
        out: &mut [u64],
    ) -> Result<()>;

    /// The dot product of every column of the rows `rows` of the row-major `shape` matrix
    /// `matrix` with each of `k` weight vectors, mod p: `out[j * cols + c] = sum_i weights[j *
    /// count + i] * matrix[first + i * step][c]`, where `weights` holds the `k` vectors of
    /// `rows.count` weights one after the other (`k` from 1 to [`crate::MAX_DOT_VECTORS`]) and
    /// `out` is row-major `k x cols`. Inputs may be non-canonical; every output is canonical
    /// (CONVENTIONS.md, "Opening products"). This is a PCS's evaluation of committed columns at an
    /// opening point by barycentric weights over the trace coset (the LDE's rows `0, blowup,
    /// 2 * blowup, ...`). Blocks until `out` is written.
    ///
    /// Optional, as [`Backend::row_dot_products`].
    ///
    /// # Errors
    /// [`Error::ForeignBuffer`]; the refusals of [`crate::validate::column_dot_products`], before
    /// anything is issued; [`Error::Unsupported`]; out of memory for the weights or partial sums;
    /// a device error from this or earlier work.
    fn column_dot_products(
        &self,
        matrix: &Self::Buffer,
        shape: MatrixShape,
        rows: RowStride,
        weights: &[u64],
        out: &mut [u64],
    ) -> Result<()>;

    /// One arity-2 FRI fold over a degree-`d` extension of Goldilocks (CONVENTIONS.md, "FRI
    /// folding"). `input` holds `2n` extension elements, each `d` coordinates in a row, in the
    /// bit-reversed order of the subgroup of order `2n` (`n` a power of two, `2n <= 2^32`); `beta`
    /// is the challenge as the `d x d` matrix of multiplication by it (`(beta v)[r] = sum_c
    /// beta[r * d + c] v[c]`, `1 <= d <=` [`crate::MAX_EXTENSION_DEGREE`]); `out` receives the `n`
    /// folded elements:
    ///
    /// `out[i] = (a + b) / 2 + beta (a - b) w^-br(i) / 2 [+ gamma addend[i]]`
    ///
    /// with `a = input[2i]`, `b = input[2i + 1]`, `w` the primitive `2n`-th root of unity of
    /// CONVENTIONS.md and `br` the reversal of `log2 n` bits; `addend`, where given, is `n`
    /// elements and the matrix of its challenge `gamma`. Inputs may be non-canonical; every output
    /// is canonical. This is Plonky3's `TwoAdicFriFolding` of one round (an arity-`2^k` round is `k`
    /// of them with `beta, beta^2, ...`), and the addend its roll-in of the next input.
    ///
    /// Optional, as [`Backend::row_dot_products`]: the caller then folds on the host.
    ///
    /// # Errors
    /// [`Error::ForeignBuffer`]; the refusals of [`crate::validate::fri_fold`], before anything is
    /// issued; [`Error::Unsupported`]; out of memory for the challenges; a device error from this or
    /// earlier work.
    fn fri_fold(
        &self,
        input: &Self::Buffer,
        beta: &[u64],
        addend: Option<(&Self::Buffer, &[u64])>,
        out: &mut Self::Buffer,
    ) -> Result<()>;

    /// FRI's input from the openings of the row-major `shape` matrix `matrix` (CONVENTIONS.md,
    /// "Reduced openings"): at row `j`, the point `x = call.shift * w_R^j` of a coset of the
    /// subgroup of order `R = rows`, with `v` the row's combination by `call.coeffs` (`d`
    /// vectors of `cols`: an extension element), `acc[j]` (`d` words) becomes
    /// `sum_z (Z - x I)^-1 (y_z - S_z v)` over the points of `call`, plus its old value where
    /// `call.accumulate` says so. Inputs may be non-canonical; every output word is canonical.
    /// This is the per-row sum of a PCS's openings (Plonky3's `TwoAdicFriPcs::open`) over an LDE
    /// still on the device: only the coefficients and the points go up. Issues the work; the
    /// accumulator is ready for the backend's next operation (a download waits for it).
    ///
    /// Optional, as [`Backend::row_dot_products`]: the caller then reduces on the host.
    ///
    /// # Errors
    /// [`Error::ForeignBuffer`]; the refusals of [`crate::validate::reduce_openings`], before
    /// anything is issued; [`Error::Unsupported`]; out of memory for the coefficients or the
    /// points; a device error from this or earlier work.
    fn reduce_openings(
        &self,
        matrix: &Self::Buffer,
        shape: MatrixShape,
        call: &crate::ReductionCall<'_>,
        acc: &mut Self::Buffer,
    ) -> Result<()>;

    /// The quotient of a STARK's constraints over the row-major `shape` LDE `lde`, into `out`
    /// (CONVENTIONS.md, "Quotient values"): at each of the `q` points `x_i = shift * v^i` of
    /// `call.domain`, the program runs over row `i * (rows / q)` of `lde` (its current row) and the
    /// row `q / n` points later, cyclically (its next row), with the trace domain's selectors at
    /// `x_i`; its folded constraints, `acc = sum_j alpha_powers[j] * c_j` in `d` coordinates, times
    /// `1 / (x_i^n - 1)` are `out[i * d .. (i + 1) * d]`. Inputs may be non-canonical; every output
    /// is canonical. This is a STARK prover's quotient step over the trace's LDE where it already
    /// lies: only the program, its values and the challenge powers go up. Issues the work; the
    /// output is ready for the backend's next operation (a download waits for it).
    ///
    /// Optional, as [`Backend::row_dot_products`]: the caller then evaluates on the host.
    ///
    /// # Errors
    /// [`Error::ForeignBuffer`]; the refusals of [`crate::validate::quotient_values`], before
    /// anything is issued; [`Error::Unsupported`]; out of memory for the program or the powers; a
    /// device error from this or earlier work.
    fn quotient_values(
        &self,
        lde: &Self::Buffer,
        shape: MatrixShape,
        call: &crate::QuotientCall<'_>,
        out: &mut Self::Buffer,
    ) -> Result<()>;

    /// Makes ready, ahead of a commit, what its first calls would otherwise pay for
    /// ([`RawBackend::prepare`]), telling `step` one line per step done, for a trace log.
    ///
    /// # Errors
    /// The refusals of [`crate::validate::preparation`] (an LDE, pool growth or twiddle tables
    /// larger than the device, tables larger than the host), before anything is built; a device
    /// error.
    fn prepare(&self, prep: &Preparation, step: &mut dyn FnMut(&str)) -> Result<()>;

    /// The device's cross-process name ([`RawBackend::device_key`]), safe as one file name
    /// ([`crate::file_safe_key`]).
    fn device_key(&self) -> String;

    /// The fastest host <-> device copies of `data`'s bytes, or `None`
    /// ([`RawBackend::transfer_floor`]).
    ///
    /// # Errors
    /// A device error.
    fn transfer_floor(&self, data: &[u64]) -> Result<Option<TransferFloor>>;

    /// Whether the device is a software emulation ([`RawBackend::is_software`]).
    fn is_software(&self) -> bool;

    /// The allocation counters now.
    fn memory(&self) -> MemoryCounters {
        self.tracker().counters()
    }

    /// Downloads the whole buffer into a new `Vec`.
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

impl<T: RawBackend> Backend for T {
    type Buffer = <T as RawBackend>::Buffer;
    type Download = <T as RawBackend>::Download;
    type HostBuffer = <T as RawBackend>::HostBuffer;

    fn info(&self) -> DeviceInfo {
        RawBackend::info(self)
    }

    fn tracker(&self) -> &AllocTracker {
        RawBackend::tracker(self)
    }

    fn alloc(&self, len: usize) -> Result<Self::Buffer> {
        crate::validate::alloc_bytes(len)?;
        // SAFETY: the check above is the raw method's contract.
        unsafe { RawBackend::alloc(self, len) }
    }

    fn upload(&self, host: &[u64]) -> Result<Self::Buffer> {
        crate::validate::alloc_bytes(host.len())?;
        // SAFETY: the check above is the raw method's contract.
        unsafe { RawBackend::upload(self, host) }
    }

    fn write(&self, buf: &mut Self::Buffer, offset: usize, host: &[u64]) -> Result<()> {
        crate::contract::write(self, buf, offset, host.len())?;
        // SAFETY: the check above is the raw method's contract.
        unsafe { RawBackend::write(self, buf, offset, host) }
    }

    fn download(&self, buf: &Self::Buffer, offset: usize, out: &mut [u64]) -> Result<()> {
        crate::contract::download(self, buf, offset, out.len())?;
        // SAFETY: the check above is the raw method's contract.
        unsafe { RawBackend::download(self, buf, offset, out) }
    }

    fn queue_download(&self, buf: &Self::Buffer) -> Result<Self::Download> {
        crate::contract::queue_download(self, buf)?;
        // SAFETY: the check above is the raw method's contract.
        unsafe { RawBackend::queue_download(self, buf) }
    }

    fn synchronize(&self) -> Result<()> {
        RawBackend::synchronize(self)
    }

    fn alloc_host(&self, len: usize) -> Result<Self::HostBuffer> {
        crate::validate::alloc_host(|| RawBackend::info(self).backend, len, host_total_memory())?;
        // SAFETY: the check above is the raw method's contract.
        unsafe { RawBackend::alloc_host(self, len) }
    }

    fn transpose_in_place(&self, buf: &mut Self::Buffer, shape: MatrixShape, scratch_cap: usize) -> Result<()> {
        crate::contract::transpose_in_place(self, buf, shape, scratch_cap)?;
        // SAFETY: the check above is the raw method's contract.
        unsafe { RawBackend::transpose_in_place(self, buf, shape, scratch_cap) }
    }

    fn batched_copy(&self, src: &Self::Buffer, dst: &mut Self::Buffer, copies: &[CopyRange]) -> Result<()> {
        crate::contract::batched_copy(self, src, dst, copies)?;
        // SAFETY: the check above is the raw method's contract.
        unsafe { RawBackend::batched_copy(self, src, dst, copies) }
    }

    fn batched_copy_within(&self, buf: &mut Self::Buffer, copies: &[CopyRange]) -> Result<()> {
        crate::contract::batched_copy_within(self, buf, copies)?;
        // SAFETY: the check above is the raw method's contract.
        unsafe { RawBackend::batched_copy_within(self, buf, copies) }
    }

    fn bit_reversed_rows(
        &self,
        src: &Self::Buffer,
        src_at: usize,
        shape: MatrixShape,
        rows: Range<usize>,
        dst: &mut Self::Buffer,
        dst_at: usize,
    ) -> Result<()> {
        crate::contract::bit_reversed_rows(self, src, src_at, shape, &rows, dst, dst_at)?;
        // SAFETY: the check above is the raw method's contract.
        unsafe { RawBackend::bit_reversed_rows(self, src, src_at, shape, rows, dst, dst_at) }
    }

    fn hash_leaves_into(
        &self,
        matrix: &Self::Buffer,
        shape: MatrixShape,
        spec: &LeafSpec,
        out: &mut Self::Buffer,
        out_digest: usize,
    ) -> Result<()> {
        crate::contract::hash_leaves_into(self, matrix, shape, spec, out, out_digest)?;
        // SAFETY: the check above is the raw method's contract.
        unsafe { RawBackend::hash_leaves_into(self, matrix, shape, spec, out, out_digest) }
    }

    fn hash_leaves_from_host(
        &self,
        matrix: &[u64],
        shape: MatrixShape,
        spec: &LeafSpec,
        out: &mut Self::Buffer,
        out_digest: usize,
    ) -> Result<()> {
        crate::contract::hash_leaves_from_host(self, matrix.len(), shape, spec, out, out_digest)?;
        // SAFETY: the check above is the raw method's contract.
        unsafe { RawBackend::hash_leaves_from_host(self, matrix, shape, spec, out, out_digest) }
    }

    fn hash_leaves_then_transpose(
        &self,
        buf: &mut Self::Buffer,
        shape: MatrixShape,
        jobs: &mut [LeafJob<'_, Self::Buffer>],
        scratch_cap: usize,
    ) -> Result<()> {
        crate::contract::hash_leaves_then_transpose(self, buf, shape, jobs, scratch_cap)?;
        // SAFETY: the check above is the raw method's contract.
        unsafe { RawBackend::hash_leaves_then_transpose(self, buf, shape, jobs, scratch_cap) }
    }

    fn merkle_tree_in_place(&self, nodes: &mut Self::Buffer, tree: TreeShape, hash: HashKind) -> Result<()> {
        crate::contract::merkle_tree_in_place(self, nodes, tree)?;
        // SAFETY: the check above is the raw method's contract.
        unsafe { RawBackend::merkle_tree_in_place(self, nodes, tree, hash) }
    }

    fn coset_lde_in_place(&self, buf: &mut Self::Buffer, params: &LdeParams) -> Result<()> {
        crate::contract::coset_lde_in_place(self, buf, params)?;
        // SAFETY: the check above is the raw method's contract.
        unsafe { RawBackend::coset_lde_in_place(self, buf, params) }
    }

    fn coset_lde_from_host(&self, buf: &mut Self::Buffer, trace: &[u64], params: &LdeParams) -> Result<()> {
        crate::contract::coset_lde_from_host(self, buf, trace.len(), params)?;
        // SAFETY: the check above is the raw method's contract.
        unsafe { RawBackend::coset_lde_from_host(self, buf, trace, params) }
    }

    fn coset_lde_from_host_and_download(
        &self,
        buf: &mut Self::Buffer,
        trace: &[u64],
        params: &LdeParams,
    ) -> Result<Self::Download> {
        crate::contract::coset_lde_from_host(self, buf, trace.len(), params)?;
        // SAFETY: the check above is the raw method's contract (the download reads the whole of
        // the buffer just checked to be this instance's).
        unsafe { RawBackend::coset_lde_from_host_and_download(self, buf, trace, params) }
    }

    fn coset_lde(&self, trace: &Self::Buffer, params: &LdeParams) -> Result<Self::Buffer> {
        crate::contract::coset_lde(self, trace, params)?;
        // SAFETY: the check above is the raw method's contract.
        unsafe { RawBackend::coset_lde(self, trace, params) }
    }

    fn coset_lde_owned(&self, trace: Self::Buffer, params: &LdeParams) -> Result<Self::Buffer> {
        crate::contract::coset_lde(self, &trace, params)?;
        // SAFETY: the check above is the raw method's contract.
        unsafe { RawBackend::coset_lde_owned(self, trace, params) }
    }

    fn row_dot_products(
        &self,
        matrix: &Self::Buffer,
        shape: MatrixShape,
        coeffs: &[u64],
        out: &mut [u64],
    ) -> Result<()> {
        crate::contract::row_dot_products(self, matrix, shape, coeffs.len(), out.len())?;
        // SAFETY: the check above is the raw method's contract.
        unsafe { RawBackend::row_dot_products(self, matrix, shape, coeffs, out) }
    }

    fn column_dot_products(
        &self,
        matrix: &Self::Buffer,
        shape: MatrixShape,
        rows: RowStride,
        weights: &[u64],
        out: &mut [u64],
    ) -> Result<()> {
        crate::contract::column_dot_products(self, matrix, shape, rows, weights.len(), out.len())?;
        // SAFETY: the check above is the raw method's contract.
        unsafe { RawBackend::column_dot_products(self, matrix, shape, rows, weights, out) }
    }

    fn fri_fold(
        &self,
        input: &Self::Buffer,
        beta: &[u64],
        addend: Option<(&Self::Buffer, &[u64])>,
        out: &mut Self::Buffer,
    ) -> Result<()> {
        crate::contract::fri_fold(self, input, beta.len(), addend.map(|(b, g)| (b, g.len())), out)?;
        // SAFETY: the check above is the raw method's contract.
        unsafe { RawBackend::fri_fold(self, input, beta, addend, out) }
    }

    fn reduce_openings(
        &self,
        matrix: &Self::Buffer,
        shape: MatrixShape,
        call: &crate::ReductionCall<'_>,
        acc: &mut Self::Buffer,
    ) -> Result<()> {
        crate::contract::reduce_openings(self, matrix, shape, call, acc)?;
        // SAFETY: the check above is the raw method's contract.
        unsafe { RawBackend::reduce_openings(self, matrix, shape, call, acc) }
    }

    fn quotient_values(
        &self,
        lde: &Self::Buffer,
        shape: MatrixShape,
        call: &crate::QuotientCall<'_>,
        out: &mut Self::Buffer,
    ) -> Result<()> {
        crate::contract::quotient_values(self, lde, shape, call, out)?;
        // SAFETY: the check above is the raw method's contract.
        unsafe { RawBackend::quotient_values(self, lde, shape, call, out) }
    }

    fn prepare(&self, prep: &Preparation, step: &mut dyn FnMut(&str)) -> Result<()> {
        let info = RawBackend::info(self);
        crate::validate::preparation(prep, info.backend, info.total_memory, info.free_memory, host_total_memory())?;
        // SAFETY: the check above is the raw method's contract.
        unsafe { RawBackend::prepare(self, prep, step) }
    }

    fn device_key(&self) -> String {
        crate::prepare::file_safe_key(&RawBackend::device_key(self))
    }

    fn transfer_floor(&self, data: &[u64]) -> Result<Option<TransferFloor>> {
        RawBackend::transfer_floor(self, data)
    }

    fn is_software(&self) -> bool {
        RawBackend::is_software(self)
    }
}

/// The host's memory, `(total, available)` bytes (Linux's `/proc/meminfo`: `MemTotal`,
/// `MemAvailable`), or `None` where the host does not say.
pub fn host_memory() -> Option<(usize, usize)> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let field = |name: &str| -> Option<usize> {
        let line = text.lines().find(|l| l.starts_with(name))?;
        let kib: usize = line[name.len()..].trim().trim_end_matches("kB").trim().parse().ok()?;
        kib.checked_mul(1024)
    };
    Some((field("MemTotal:")?, field("MemAvailable:")?))
}

/// The host's total memory in bytes ([`host_memory`], read once per process), or `None`.
pub fn host_total_memory() -> Option<usize> {
    static TOTAL: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    *TOTAL.get_or_init(|| host_memory().map(|(total, _)| total))
}

/// `len` zeroed elements of ordinary host memory: the [`Backend::alloc_host`] of a backend whose
/// host buffer is a `Vec<u64>`. Large allocations come as fresh zero pages (`alloc_zeroed`), so
/// the pages are first touched by whoever fills them, in parallel if it fills in parallel.
///
/// # Errors
/// [`Error::SizeOverflow`] when `len * 8` overflows; [`Error::HostOutOfMemory`] (named after
/// `backend`) for more bytes than the host has ([`host_total_memory`]), or when the allocator
/// refuses; nothing stays allocated.
pub fn host_vec(backend: &'static str, len: usize) -> Result<Vec<u64>> {
    let bytes = crate::validate::alloc_host(|| backend, len, host_total_memory())?;
    if len == 0 {
        return Ok(Vec::new());
    }
    let refused =
        |reason: &str| Error::HostOutOfMemory { backend, requested: bytes, available: None, reason: reason.into() };
    let layout = std::alloc::Layout::array::<u64>(len).map_err(|_| refused("no layout for that many elements"))?;
    // SAFETY: `layout` has a non-zero size (`len > 0`).
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<u64>();
    if ptr.is_null() {
        return Err(refused("the allocator refused"));
    }
    // SAFETY: `ptr` was allocated by the global allocator with the layout of `[u64; len]`, and its
    // `len` elements are initialised (zeroed); the Vec owns it from here.
    Ok(unsafe { Vec::from_raw_parts(ptr, len, len) })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_vec_is_zeroed_and_refuses_what_no_host_holds() {
        for len in [0, 1, 1000, (1 << 20) + 3] {
            let v = host_vec("test", len).unwrap();
            assert_eq!(v.len(), len);
            assert!(v.iter().all(|&x| x == 0), "{len} elements");
            assert!(!HostBuffer::is_page_locked(&v));
        }
        // 2^60 elements: the bytes fit usize, no allocator gives them.
        match host_vec("test", 1 << 60) {
            Err(Error::HostOutOfMemory { backend: "test", requested, .. }) => assert_eq!(requested, 1 << 63),
            other => panic!("expected HostOutOfMemory, got {other:?}"),
        }
        // 2^61 elements: the byte count overflows.
        assert!(matches!(host_vec("test", 1 << 61), Err(Error::SizeOverflow { elems, .. }) if elems == 1 << 61));
        let msg = host_vec("test", 1 << 60).unwrap_err().to_string();
        assert!(msg.contains("out of host memory") && msg.contains(&(1usize << 63).to_string()), "{msg}");
    }
}
