//! [`RawBackend`]: what a port implements, the operations behind the checked front [`Backend`].

use std::ops::Range;

#[cfg(doc)]
use crate::backend::Backend;
use crate::backend::{DeviceBuffer, DeviceInfo, HostBuffer, LeafJob, PendingDownload};
use crate::error::Result;
use crate::fault::AllocTracker;
use crate::field::bit_reverse;
use crate::prepare::{Preparation, TransferFloor};
use crate::shape::{CopyRange, HashKind, LdeParams, LeafSpec, MatrixShape, RowStride, TreeShape};

/// The device memory and commit kernels of one backend, as a port implements them.
///
/// Nothing calls these methods but the checked front: every `RawBackend` is a [`Backend`]
/// (a blanket implementation that no type can replace), and [`Backend`]'s methods validate every
/// argument with [`crate::validate`] before they call the method of the same name here. So an
/// implementation never repeats those checks, and cannot forget one (the way wgpu-core validates
/// each call before wgpu-hal runs it).
///
/// Every method that takes a buffer, a length, a range or a host slice is an `unsafe fn` whose
/// `# Safety` contract is the front's checks, so safe code cannot reach the port past them (as
/// wgpu-hal's methods are `unsafe` and only wgpu-core calls them). A port writes `unsafe fn` in
/// its impl; where its own code calls one of its raw methods, it writes `unsafe { .. }` with a
/// `// SAFETY:` line saying why the checks hold. Safe code calls [`Backend`]:
///
/// ```compile_fail,E0133
/// use backend_api::RawBackend;
///
/// // A caller holding any backend and a buffer: the raw write skips the front, so safe code
/// // cannot call it (error E0133: call to unsafe function requires an unsafe block).
/// fn skip_the_front<B: RawBackend>(backend: &B, buf: &mut <B as RawBackend>::Buffer) {
///     let _ = RawBackend::write(backend, buf, 1 << 40, &[7; 4096]);
/// }
/// ```
///
/// The same call through the front compiles, and is refused at run time with
/// [`crate::Error::OutOfBounds`] (and a buffer of another instance with
/// [`crate::Error::ForeignBuffer`]):
///
/// ```
/// use backend_api::{Backend, Result};
///
/// fn through_the_front<B: Backend>(backend: &B, buf: &mut B::Buffer) -> Result<()> {
///     backend.write(buf, 1 << 40, &[7; 4096])
/// }
/// ```
///
/// On entry to every method:
///
/// - every buffer argument belongs to this instance: its [`DeviceBuffer::tracker`] is this
///   backend's [`RawBackend::tracker`] (a buffer of another instance, or of a dropped one, is
///   refused with [`crate::Error::ForeignBuffer`]);
/// - lengths hold their shapes exactly, ranges and digest offsets lie inside their buffers with no
///   overflow, element counts of allocations fit `usize` bytes, copy batches are independent, and
///   scratch caps hold one run of the transpose plan.
///
/// What an implementation still reports: out of memory (through [`RawBackend::tracker`] first,
/// then the device's own refusal) and device errors. Operations are issued in call order on one
/// queue per instance and may run asynchronously, reporting device faults at the next blocking
/// call ([`RawBackend::download`], [`PendingDownload::wait`], [`RawBackend::synchronize`]).
///
/// Byte-level semantics are fixed by the repository's `CONVENTIONS.md` and documented on the
/// [`Backend`] method of the same name; the `conformance` crate checks an implementation against
/// independent references.
pub trait RawBackend: Send + Sync {
    /// The backend's owned device buffer. It must give the bytes it reserved in
    /// [`RawBackend::tracker`] back when it drops (the suite checks that live bytes return to
    /// their baseline after every check): hold a [`crate::Reservation`] from
    /// [`AllocTracker::reserve_owned`] in it, which releases them on drop, and answer
    /// [`DeviceBuffer::tracker`] with the tracker the bytes are reserved in.
    type Buffer: DeviceBuffer;
    /// A queued device-to-host copy, landing in the backend's host buffer.
    type Download: PendingDownload<Host = Self::HostBuffer>;
    /// The backend's host memory ([`RawBackend::alloc_host`]): page-locked where the backend has
    /// such memory, a plain `Vec<u64>` otherwise.
    type HostBuffer: HostBuffer + 'static;

    /// The device's name and memory ([`Backend::info`]).
    fn info(&self) -> DeviceInfo;

    /// The allocation tracker every device allocation of this backend goes through: buffers,
    /// scratch, tables. Keep it in an `Arc<AllocTracker>` (or inside an `Arc` of the device) and
    /// share it with the buffers, so that a buffer outliving a borrow of the backend can still
    /// release its bytes, and so that the front can tell this instance's buffers from others'.
    fn tracker(&self) -> &AllocTracker;

    /// [`Backend::alloc`]: `len * 8` fits `usize`.
    ///
    /// # Safety
    /// The preconditions above and the trait's entry conditions (every buffer argument belongs to
    /// this instance) hold. The checked front establishes them before it calls this; a port that
    /// calls it itself establishes them too.
    ///
    /// # Errors
    /// [`crate::Error::OutOfMemory`] (or an injected fault from the tracker); nothing stays
    /// allocated, and the peak does not count the refused bytes ([`AllocTracker::refuse`]).
    unsafe fn alloc(&self, len: usize) -> Result<Self::Buffer>;

    /// [`Backend::upload`]: `host.len() * 8` fits `usize`.
    ///
    /// # Safety
    /// The preconditions above and the trait's entry conditions (every buffer argument belongs to
    /// this instance) hold. The checked front establishes them before it calls this; a port that
    /// calls it itself establishes them too.
    ///
    /// # Errors
    /// As [`RawBackend::alloc`], or a device error from the copy.
    unsafe fn upload(&self, host: &[u64]) -> Result<Self::Buffer>;

    /// [`Backend::write`]: `[offset, offset + host.len())` lies inside `buf`.
    ///
    /// # Safety
    /// The preconditions above and the trait's entry conditions (every buffer argument belongs to
    /// this instance) hold. The checked front establishes them before it calls this; a port that
    /// calls it itself establishes them too.
    ///
    /// # Errors
    /// A device error from the copy.
    unsafe fn write(&self, buf: &mut Self::Buffer, offset: usize, host: &[u64]) -> Result<()>;

    /// [`Backend::download`]: `[offset, offset + out.len())` lies inside `buf`.
    ///
    /// # Safety
    /// The preconditions above and the trait's entry conditions (every buffer argument belongs to
    /// this instance) hold. The checked front establishes them before it calls this; a port that
    /// calls it itself establishes them too.
    ///
    /// # Errors
    /// A device error from this or earlier work.
    unsafe fn download(&self, buf: &Self::Buffer, offset: usize, out: &mut [u64]) -> Result<()>;

    /// [`Backend::queue_download`].
    ///
    /// # Safety
    /// The preconditions above and the trait's entry conditions (every buffer argument belongs to
    /// this instance) hold. The checked front establishes them before it calls this; a port that
    /// calls it itself establishes them too.
    ///
    /// # Errors
    /// As [`RawBackend::download`].
    unsafe fn queue_download(&self, buf: &Self::Buffer) -> Result<Self::Download>;

    /// [`Backend::synchronize`].
    ///
    /// # Errors
    /// A device error from any issued work.
    fn synchronize(&self) -> Result<()>;

    /// [`Backend::alloc_host`]: `len * 8` fits `usize`.
    ///
    /// # Safety
    /// The preconditions above and the trait's entry conditions (every buffer argument belongs to
    /// this instance) hold. The checked front establishes them before it calls this; a port that
    /// calls it itself establishes them too.
    ///
    /// # Errors
    /// [`crate::Error::HostOutOfMemory`]; nothing stays allocated.
    unsafe fn alloc_host(&self, len: usize) -> Result<Self::HostBuffer>;

    /// [`Backend::transpose_in_place`]: `buf` holds exactly `shape`, and `scratch_cap` admits a
    /// plan ([`crate::plan::TransposeGeometry::new`] accepts it).
    ///
    /// # Safety
    /// The preconditions above and the trait's entry conditions (every buffer argument belongs to
    /// this instance) hold. The checked front establishes them before it calls this; a port that
    /// calls it itself establishes them too.
    ///
    /// # Errors
    /// Out of memory for the scratch, which leaves `buf` as it was.
    unsafe fn transpose_in_place(&self, buf: &mut Self::Buffer, shape: MatrixShape, scratch_cap: usize) -> Result<()>;

    /// [`Backend::batched_copy`]: the batch is valid ([`crate::copy::validate_batch`]).
    ///
    /// # Safety
    /// The preconditions above and the trait's entry conditions (every buffer argument belongs to
    /// this instance) hold. The checked front establishes them before it calls this; a port that
    /// calls it itself establishes them too.
    ///
    /// # Errors
    /// A device error.
    unsafe fn batched_copy(&self, src: &Self::Buffer, dst: &mut Self::Buffer, copies: &[CopyRange]) -> Result<()>;

    /// [`Backend::batched_copy_within`]: the batch is valid within one buffer.
    ///
    /// # Safety
    /// The preconditions above and the trait's entry conditions (every buffer argument belongs to
    /// this instance) hold. The checked front establishes them before it calls this; a port that
    /// calls it itself establishes them too.
    ///
    /// # Errors
    /// A device error.
    unsafe fn batched_copy_within(&self, buf: &mut Self::Buffer, copies: &[CopyRange]) -> Result<()>;

    /// [`Backend::bit_reversed_rows`]: `shape.rows()` is a power of two, `rows` lies inside it,
    /// `src` holds the matrix from `src_at` and `dst` the copied rows from `dst_at`
    /// ([`crate::validate::bit_reversed_rows`]).
    ///
    /// The default is one [`RawBackend::batched_copy`] of a range per row; a backend whose batch
    /// costs host work per range (a list built, uploaded or launched) computes `br` on the device
    /// instead.
    ///
    /// # Safety
    /// The preconditions above and the trait's entry conditions (every buffer argument belongs to
    /// this instance) hold. The checked front establishes them before it calls this; a port that
    /// calls it itself establishes them too.
    ///
    /// # Errors
    /// A device error.
    unsafe fn bit_reversed_rows(
        &self,
        src: &Self::Buffer,
        src_at: usize,
        shape: MatrixShape,
        rows: Range<usize>,
        dst: &mut Self::Buffer,
        dst_at: usize,
    ) -> Result<()> {
        let (cols, log_rows) = (shape.cols(), shape.rows().trailing_zeros());
        let copies: Vec<CopyRange> = rows
            .enumerate()
            .map(|(i, r)| CopyRange::new(src_at + bit_reverse(r, log_rows) * cols, dst_at + i * cols, cols))
            .collect();
        // SAFETY: both buffers are this instance's (our caller's contract), and every range lies
        // inside its buffer: row `br(r) < rows` of the matrix at `src_at`, and the `i`-th copied
        // row at `dst_at`, which the caller's contract bounds; one source and one destination
        // range per row, so no two destination ranges overlap.
        unsafe { self.batched_copy(src, dst, &copies) }
    }

    /// [`Backend::hash_leaves_into`]: `spec` accepts `shape`, `matrix` holds `shape`, and the
    /// digests fit `out` from digest `out_digest` on ([`crate::validate::hash_leaves`]).
    ///
    /// # Safety
    /// The preconditions above and the trait's entry conditions (every buffer argument belongs to
    /// this instance) hold. The checked front establishes them before it calls this; a port that
    /// calls it itself establishes them too.
    ///
    /// # Errors
    /// A device error.
    unsafe fn hash_leaves_into(
        &self,
        matrix: &Self::Buffer,
        shape: MatrixShape,
        spec: &LeafSpec,
        out: &mut Self::Buffer,
        out_digest: usize,
    ) -> Result<()>;

    /// [`Backend::hash_leaves_from_host`]: as [`RawBackend::hash_leaves_into`], with the matrix
    /// in host memory. The default uploads it in chunks of about [`HOST_LEAF_CHUNK_BYTES`] and
    /// hashes each chunk's leaves as it arrives ([`hash_leaves_in_chunks`]), so the device holds
    /// one chunk, not the matrix; a backend that reads host memory directly hashes it where it is
    /// (the CPU backend does).
    ///
    /// # Safety
    /// The preconditions above and the trait's entry conditions (every buffer argument belongs to
    /// this instance) hold. The checked front establishes them before it calls this; a port that
    /// calls it itself establishes them too.
    ///
    /// # Errors
    /// Out of memory for a chunk; a device error.
    unsafe fn hash_leaves_from_host(
        &self,
        matrix: &[u64],
        shape: MatrixShape,
        spec: &LeafSpec,
        out: &mut Self::Buffer,
        out_digest: usize,
    ) -> Result<()> {
        // SAFETY: the contract of `hash_leaves_in_chunks` is this method's.
        unsafe { hash_leaves_in_chunks(self, matrix, shape, spec, out, out_digest, host_leaf_chunk_rows(shape.cols())) }
    }

    /// [`Backend::hash_leaves_then_transpose`]: every job and the transpose are valid
    /// ([`crate::validate::leaves_then_transpose`]), and every output buffer belongs to this
    /// instance.
    ///
    /// The default makes the calls one after the other ([`leaves_then_transpose_in_turn`]). A
    /// backend may interleave them: the transpose's block pass (see [`crate::plan`]) reads each
    /// block of rows once, and the leaves of a `rows`-layout job read the same rows, so the leaves
    /// of a block can be hashed beside the block pass, before the block moves (the CUDA backend
    /// hashes block `k` in the launch that moves block `k - 1`).
    ///
    /// # Safety
    /// The preconditions above and the trait's entry conditions (every buffer argument belongs to
    /// this instance) hold. The checked front establishes them before it calls this; a port that
    /// calls it itself establishes them too.
    ///
    /// # Errors
    /// Out of memory for the scratch, which leaves `buf` as it was (the outputs may hold digests
    /// already).
    unsafe fn hash_leaves_then_transpose(
        &self,
        buf: &mut Self::Buffer,
        shape: MatrixShape,
        jobs: &mut [LeafJob<'_, Self::Buffer>],
        scratch_cap: usize,
    ) -> Result<()> {
        // SAFETY: the contract of `leaves_then_transpose_in_turn` is this method's.
        unsafe { leaves_then_transpose_in_turn(self, buf, shape, jobs, scratch_cap) }
    }

    /// [`Backend::merkle_tree_in_place`]: `nodes` is exactly `tree.words()` long.
    ///
    /// # Safety
    /// The preconditions above and the trait's entry conditions (every buffer argument belongs to
    /// this instance) hold. The checked front establishes them before it calls this; a port that
    /// calls it itself establishes them too.
    ///
    /// # Errors
    /// A device error.
    unsafe fn merkle_tree_in_place(&self, nodes: &mut Self::Buffer, tree: TreeShape, hash: HashKind) -> Result<()>;

    /// [`Backend::coset_lde_in_place`]: `buf` holds exactly `params.lde_shape()`.
    ///
    /// # Safety
    /// The preconditions above and the trait's entry conditions (every buffer argument belongs to
    /// this instance) hold. The checked front establishes them before it calls this; a port that
    /// calls it itself establishes them too.
    ///
    /// # Errors
    /// Out of memory for tables or scratch; on error the contents of `buf` are unspecified.
    unsafe fn coset_lde_in_place(&self, buf: &mut Self::Buffer, params: &LdeParams) -> Result<()>;

    /// [`Backend::coset_lde_from_host`]: `trace` holds `params.trace()` and `buf` exactly
    /// `params.lde_shape()`. The default is [`RawBackend::write`], then
    /// [`RawBackend::coset_lde_in_place`]; a backend may overlap the upload with the extension.
    /// It returns once `trace` is no longer read.
    ///
    /// # Safety
    /// The preconditions above and the trait's entry conditions (every buffer argument belongs to
    /// this instance) hold. The checked front establishes them before it calls this; a port that
    /// calls it itself establishes them too.
    ///
    /// # Errors
    /// [`RawBackend::write`]'s and [`RawBackend::coset_lde_in_place`]'s errors, after which the
    /// contents of `buf` are unspecified.
    unsafe fn coset_lde_from_host(&self, buf: &mut Self::Buffer, trace: &[u64], params: &LdeParams) -> Result<()> {
        // SAFETY: `buf` is this instance's and holds `params.lde_shape()`, whose first rows are
        // the trace's `trace.len()` elements, so the write lies inside it; then `buf` holds exactly
        // the LDE's shape, as `coset_lde_in_place` requires.
        unsafe {
            self.write(buf, 0, trace)?;
            self.coset_lde_in_place(buf, params)
        }
    }

    /// [`Backend::coset_lde_from_host_and_download`], on the same preconditions as
    /// [`RawBackend::coset_lde_from_host`]. The default is [`RawBackend::coset_lde_from_host`],
    /// then [`RawBackend::queue_download`] of the whole buffer; a backend may start downloading
    /// the parts of the LDE that are final while the rest is still uploaded and extended.
    ///
    /// # Safety
    /// As [`RawBackend::coset_lde_from_host`].
    ///
    /// # Errors
    /// [`RawBackend::coset_lde_from_host`]'s and [`RawBackend::queue_download`]'s errors.
    unsafe fn coset_lde_from_host_and_download(
        &self,
        buf: &mut Self::Buffer,
        trace: &[u64],
        params: &LdeParams,
    ) -> Result<Self::Download> {
        // SAFETY: the caller's contract is `coset_lde_from_host`'s; `buf` is this instance's, so
        // `queue_download`'s holds too.
        unsafe {
            self.coset_lde_from_host(buf, trace, params)?;
            self.queue_download(buf)
        }
    }

    /// [`Backend::coset_lde`]: `trace` holds `params.trace()`. The default allocates the LDE,
    /// copies the trace into its first `n` rows and extends it in place; a backend may instead
    /// read the trace where it is in the LDE's first pass (CUDA does), which saves the copy.
    ///
    /// # Safety
    /// The preconditions above and the trait's entry conditions (every buffer argument belongs to
    /// this instance) hold. The checked front establishes them before it calls this; a port that
    /// calls it itself establishes them too.
    ///
    /// # Errors
    /// Out of memory; nothing stays allocated on error.
    unsafe fn coset_lde(&self, trace: &Self::Buffer, params: &LdeParams) -> Result<Self::Buffer> {
        // SAFETY: the front validated `params`, so the LDE's element count fits `usize` bytes;
        // `out` is this instance's and holds the LDE, whose first `trace.len()` elements receive
        // the trace (one range inside both buffers); then `out` holds exactly the LDE's shape.
        unsafe {
            let mut out = self.alloc(params.lde_shape().len())?;
            self.batched_copy(trace, &mut out, &[CopyRange::new(0, 0, trace.len())])?;
            self.coset_lde_in_place(&mut out, params)?;
            Ok(out)
        }
    }

    /// [`Backend::coset_lde_owned`]: `trace` holds `params.trace()`. A backend may use the
    /// trace's buffer as the inverse transform's workspace first (CUDA does). The default is
    /// [`RawBackend::coset_lde`], then the trace is dropped.
    ///
    /// # Safety
    /// The preconditions above and the trait's entry conditions (every buffer argument belongs to
    /// this instance) hold. The checked front establishes them before it calls this; a port that
    /// calls it itself establishes them too.
    ///
    /// # Errors
    /// As [`RawBackend::coset_lde`]; the trace is freed either way.
    unsafe fn coset_lde_owned(&self, trace: Self::Buffer, params: &LdeParams) -> Result<Self::Buffer> {
        // SAFETY: this method's contract is `coset_lde`'s, for the trace borrowed.
        unsafe { self.coset_lde(&trace, params) }
    }

    /// [`Backend::row_dot_products`]: `matrix` holds exactly `shape`, `coeffs` is `k` vectors of
    /// `cols` coefficients (`k` from 1 to [`crate::MAX_DOT_VECTORS`]) and `out` is `rows * k`
    /// long ([`crate::validate::row_dot_products`]).
    ///
    /// The default answers [`crate::Error::Unsupported`]: the operation is optional, and a caller
    /// (the Plonky3 adapter's openings) then computes it on the host.
    ///
    /// # Safety
    /// The preconditions above and the trait's entry conditions (every buffer argument belongs to
    /// this instance) hold. The checked front establishes them before it calls this; a port that
    /// calls it itself establishes them too.
    ///
    /// # Errors
    /// Out of memory for the coefficients; a device error from this or earlier work.
    unsafe fn row_dot_products(
        &self,
        matrix: &Self::Buffer,
        shape: MatrixShape,
        coeffs: &[u64],
        out: &mut [u64],
    ) -> Result<()> {
        let _ = (matrix, shape, coeffs, out);
        Err(crate::Error::Unsupported { backend: self.info().backend, op: "row_dot_products" })
    }

    /// [`Backend::column_dot_products`]: `matrix` holds exactly `shape`, every row of `rows` is a
    /// row of `shape` (`count` and `step` at least 1), `weights` is `k` vectors of `rows.count`
    /// weights (`k` from 1 to [`crate::MAX_DOT_VECTORS`]) and `out` is `k * cols` long
    /// ([`crate::validate::column_dot_products`]).
    ///
    /// The default answers [`crate::Error::Unsupported`], as for [`RawBackend::row_dot_products`].
    ///
    /// # Safety
    /// The preconditions above and the trait's entry conditions (every buffer argument belongs to
    /// this instance) hold. The checked front establishes them before it calls this; a port that
    /// calls it itself establishes them too.
    ///
    /// # Errors
    /// Out of memory for the weights or partial sums; a device error from this or earlier work.
    unsafe fn column_dot_products(
        &self,
        matrix: &Self::Buffer,
        shape: MatrixShape,
        rows: RowStride,
        weights: &[u64],
        out: &mut [u64],
    ) -> Result<()> {
        let _ = (matrix, shape, rows, weights, out);
        Err(crate::Error::Unsupported { backend: self.info().backend, op: "column_dot_products" })
    }

    /// [`Backend::fri_fold`]: `beta` is `d x d` (`1 <= d <=` [`crate::MAX_EXTENSION_DEGREE`]),
    /// `out` is `n * d` long for a power of two `n` with `2n <= 2^32`, `input` twice that, and
    /// the addend, where given, `out`'s length with a `d x d` challenge
    /// ([`crate::validate::fri_fold`]). `input`, the addend and `out` are distinct buffers.
    ///
    /// The default answers [`crate::Error::Unsupported`], as for [`RawBackend::row_dot_products`].
    ///
    /// # Safety
    /// The preconditions above and the trait's entry conditions (every buffer argument belongs to
    /// this instance) hold. The checked front establishes them before it calls this; a port that
    /// calls it itself establishes them too.
    ///
    /// # Errors
    /// Out of memory for the challenges; a device error from this or earlier work.
    unsafe fn fri_fold(
        &self,
        input: &Self::Buffer,
        beta: &[u64],
        addend: Option<(&Self::Buffer, &[u64])>,
        out: &mut Self::Buffer,
    ) -> Result<()> {
        let _ = (input, beta, addend, out);
        Err(crate::Error::Unsupported { backend: self.info().backend, op: "fri_fold" })
    }

    /// [`Backend::reduce_openings`]: `matrix` holds exactly `shape`, a power of two of rows (at most
    /// 2^32); `call` has 1 to [`crate::open::MAX_REDUCTION_POINTS`] points of one degree `d` (1 to
    /// [`crate::MAX_EXTENSION_DEGREE`]), none singular on the matrix's coset, and `d * cols`
    /// coefficients; `acc` holds `rows * d` words ([`crate::validate::reduce_openings`]).
    /// `matrix` and `acc` are distinct buffers.
    ///
    /// The default answers [`crate::Error::Unsupported`], as for [`RawBackend::row_dot_products`]:
    /// the caller then reduces the openings on the host.
    ///
    /// # Safety
    /// The preconditions above and the trait's entry conditions (every buffer argument belongs to
    /// this instance) hold. The checked front establishes them before it calls this; a port that
    /// calls it itself establishes them too.
    ///
    /// # Errors
    /// Out of memory for the coefficients or the points; a device error from this or earlier
    /// work.
    unsafe fn reduce_openings(
        &self,
        matrix: &Self::Buffer,
        shape: MatrixShape,
        call: &crate::open::ReductionCall<'_>,
        acc: &mut Self::Buffer,
    ) -> Result<()> {
        let _ = (matrix, shape, call, acc);
        Err(crate::Error::Unsupported { backend: self.info().backend, op: "reduce_openings" })
    }

    /// [`Backend::quotient_values`]: `lde` holds exactly `shape`, a power of two of at least
    /// `call.domain`'s points and at least the program's columns; `call` gives the program's
    /// values and `d` words of challenge power per constraint (1 <= d <=
    /// [`crate::MAX_EXTENSION_DEGREE`]); `out` holds `d` words per point
    /// ([`crate::validate::quotient_values`]). `lde` and `out` are distinct buffers.
    ///
    /// The default answers [`crate::Error::Unsupported`], as for [`RawBackend::row_dot_products`]:
    /// the caller (the Plonky3 adapter's prover) then evaluates the quotient on the host.
    ///
    /// # Safety
    /// The preconditions above and the trait's entry conditions (every buffer argument belongs to
    /// this instance) hold. The checked front establishes them before it calls this; a port that
    /// calls it itself establishes them too.
    ///
    /// # Errors
    /// Out of memory for the program or the challenge powers; a device error from this or earlier
    /// work.
    unsafe fn quotient_values(
        &self,
        lde: &Self::Buffer,
        shape: MatrixShape,
        call: &crate::QuotientCall<'_>,
        out: &mut Self::Buffer,
    ) -> Result<()> {
        let _ = (lde, shape, call, out);
        Err(crate::Error::Unsupported { backend: self.info().backend, op: "quotient_values" })
    }

    /// Makes ready what the commit `prep` describes would otherwise pay for in its first calls
    /// (kernels compiled or loaded, staging page-locked, a pool grown, host tables built), and
    /// tells `step` one line per step as it is done, for a trace log. The CLI runs it on a thread
    /// of its own while it makes the table ([`Backend::prepare`]). The default prepares nothing.
    ///
    /// # Safety
    /// [`crate::validate::preparation`] accepted `prep` for this device and host (the checked
    /// front checks it first): the LDE, the pool growth and the tables fit the device, and the
    /// tables fit the host.
    ///
    /// # Errors
    /// A device error; running out of memory while growing a pool is not an error (the commit's
    /// own allocations decide), only a line saying so.
    unsafe fn prepare(&self, prep: &Preparation, step: &mut dyn FnMut(&str)) -> Result<()> {
        let _ = (prep, step);
        Ok(())
    }

    /// A name of the physical device that is the same in every process and differs between two
    /// devices of one host (a UUID or bus id where the driver gives one): the key of its
    /// cross-process reservation queue. The default is `<backend>-<device name>` from
    /// [`RawBackend::info`]; a port whose host can hold two devices of one model overrides it.
    /// The front makes it file-safe ([`crate::file_safe_key`]).
    fn device_key(&self) -> String {
        let info = self.info();
        format!("{}-{}", info.backend, info.device)
    }

    /// The fastest host <-> device copies of `data`'s bytes (median of three each), the floor a
    /// benchmark compares uploads with, or `None` for a backend with no bus to cross or no
    /// faster host memory to copy from (the default).
    ///
    /// # Errors
    /// A device error, or host memory the host refuses.
    fn transfer_floor(&self, data: &[u64]) -> Result<Option<TransferFloor>> {
        let _ = data;
        Ok(None)
    }

    /// Whether the device is a software emulation (a CPU adapter such as llvmpipe): correct, and
    /// slow. The default is `false`.
    fn is_software(&self) -> bool {
        false
    }
}

/// Bytes of host matrix per chunk of [`RawBackend::hash_leaves_from_host`]'s default: 128 MiB,
/// enough for a device's copy engine to run at full speed, and for the CUDA backend's staging ring
/// (four 32 MiB blocks) to overlap its transfers with its copies into the ring.
pub const HOST_LEAF_CHUNK_BYTES: usize = 128 << 20;

/// Rows of `cols` elements per chunk of [`RawBackend::hash_leaves_from_host`]'s default: as many
/// as [`HOST_LEAF_CHUNK_BYTES`] hold, at least one.
pub fn host_leaf_chunk_rows(cols: usize) -> usize {
    (HOST_LEAF_CHUNK_BYTES / cols.max(1).saturating_mul(crate::shape::ELEM_BYTES)).max(1)
}

/// [`RawBackend::hash_leaves_from_host`] as its default runs it, `chunk_rows` rows at a time: with
/// the `rows` layout (leaf `r` is row `r`), each chunk of rows is written into one device buffer
/// ([`RawBackend::write`]) and its leaves hashed into their place in `out`
/// ([`RawBackend::hash_leaves_into`] at digest `out_digest` plus the chunk's first row); the
/// buffer is reused for the next chunk, which a queue-ordered backend writes after the hash that
/// reads it (calls run in order; see docs/porting.md). The last, shorter chunk gets a buffer of
/// its own. Other layouts (`lambda-vm-pairs` pairs rows across the whole matrix) and matrices of
/// one chunk are uploaded whole; `chunk_rows` 0 is read as 1. The front has validated the call.
///
/// # Safety
/// [`RawBackend::hash_leaves_from_host`]'s contract holds for the call.
///
/// # Errors
/// Out of memory for a chunk; a device error.
pub unsafe fn hash_leaves_in_chunks<B: RawBackend + ?Sized>(
    backend: &B,
    matrix: &[u64],
    shape: MatrixShape,
    spec: &LeafSpec,
    out: &mut B::Buffer,
    out_digest: usize,
    chunk_rows: usize,
) -> Result<()> {
    let (rows, cols, chunk_rows) = (shape.rows(), shape.cols(), chunk_rows.max(1));
    if spec.layout() != crate::LeafLayout::Rows || chunk_rows >= rows {
        // SAFETY: `matrix` holds `shape` (our contract), whose byte count fits `usize`; the
        // uploaded copy then holds `shape` too, and `out` is as our contract has it.
        unsafe {
            let uploaded = backend.upload(matrix)?;
            return backend.hash_leaves_into(&uploaded, shape, spec, out, out_digest);
        }
    }
    // SAFETY: `chunk_rows < rows`, so a chunk (and the shorter tail) holds fewer elements than
    // `matrix`, whose bytes fit `usize`;
    // each write fills the chunk buffer from 0 with `len` whole rows of `matrix`, which that
    // buffer holds exactly; the chunk's digests are leaves `first..first + len` of the matrix,
    // which our contract places inside `out` from `out_digest`.
    unsafe {
        let mut chunk = backend.alloc(chunk_rows * cols)?;
        let mut tail: Option<B::Buffer> = None;
        for first in (0..rows).step_by(chunk_rows) {
            let len = chunk_rows.min(rows - first);
            let buf = if len == chunk_rows { &mut chunk } else { tail.insert(backend.alloc(len * cols)?) };
            backend.write(buf, 0, &matrix[first * cols..(first + len) * cols])?;
            backend.hash_leaves_into(buf, MatrixShape::new(len, cols)?, spec, out, out_digest + first)?;
        }
    }
    Ok(())
}

/// [`RawBackend::hash_leaves_then_transpose`] as its default runs it: each job's leaves
/// ([`RawBackend::hash_leaves_into`]) in order, then [`RawBackend::transpose_in_place`]. A backend
/// that overrides the method calls it for the calls it does not interleave. The front has
/// validated the call.
///
/// # Safety
/// [`RawBackend::hash_leaves_then_transpose`]'s contract holds for the call.
///
/// # Errors
/// As [`RawBackend::hash_leaves_then_transpose`].
pub unsafe fn leaves_then_transpose_in_turn<B: RawBackend + ?Sized>(
    backend: &B,
    buf: &mut B::Buffer,
    shape: MatrixShape,
    jobs: &mut [LeafJob<'_, B::Buffer>],
    scratch_cap: usize,
) -> Result<()> {
    // SAFETY: our contract is `hash_leaves_then_transpose`'s, which validates every job as a
    // `hash_leaves_into` of `buf` and the transpose as a `transpose_in_place` of it.
    unsafe {
        for job in jobs.iter_mut() {
            backend.hash_leaves_into(buf, shape, job.spec, job.out, job.out_digest)?;
        }
        backend.transpose_in_place(buf, shape, scratch_cap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_leaf_chunks_hold_128_mib_of_whole_rows() {
        assert_eq!(HOST_LEAF_CHUNK_BYTES, 128 * 1024 * 1024);
        for cols in [1usize, 3, 64, 316, 1000] {
            let rows = host_leaf_chunk_rows(cols);
            let bytes = rows * cols * 8;
            assert!(
                bytes <= HOST_LEAF_CHUNK_BYTES && bytes + cols * 8 > HOST_LEAF_CHUNK_BYTES,
                "{cols} columns: {rows} rows"
            );
        }
        assert_eq!(host_leaf_chunk_rows(1 << 30), 1, "a row wider than a chunk is a chunk of its own");
        assert_eq!(host_leaf_chunk_rows(usize::MAX), 1, "no overflow");
    }
}
