//! The suite tested on itself: a small host backend passes every check, and deliberately broken
//! variants of it fail the checks that should catch them (so no check is vacuous).
//!
//! The host backend is written independently of [`crate::reference`] where it can be: its
//! transpose executes the shared plan ([`TransposePlan::execute_host`]), its LDE uses
//! `backend_api::field` arithmetic, its Merkle tree is built bottom-up level by level. Its
//! Poseidon2 is the reference's (the suite has no second one): its bugs are in how it calls it.

use std::sync::Arc;

use backend_api::copy::{BatchTarget, validate_batch};
use backend_api::field;
use backend_api::plan::TransposePlan;
use backend_api::validate::{self, LeafOutput};
use backend_api::{
    AllocTracker, Backend, CopyRange, DIGEST_WORDS, DeviceBuffer, DeviceInfo, HashKind, LdeParams, LeafJob, LeafLayout,
    LeafSpec, MatrixShape, PendingDownload, Result, RowStride, TreeShape,
};
use sha3::Digest as _;

use crate::reference;

/// A deliberate bug.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bug {
    /// No bug.
    None,
    /// The transpose swaps the first two runs of column 0 when there are several blocks.
    SwapRuns,
    /// The transpose allocates a full-matrix scratch, whatever the cap.
    ScratchOverCap,
    /// The transpose never frees its scratch.
    LeakScratch,
    /// Copies skip batch validation.
    NoCopyValidation,
    /// Leaves hash raw (non-canonical) element bytes.
    HashRawBytes,
    /// `lambda-vm-pairs` leaves use little-endian bytes.
    PairsLittleEndian,
    /// `lambda-vm-pairs` leaves pair rows 2i, 2i+1 without the bit reversal.
    PairsNoBitReverse,
    /// BLAKE3 leaves longer than one chunk hash only the first 1024 bytes.
    Blake3FirstChunkOnly,
    /// Keccak uses SHA3-256 padding.
    Sha3NotKeccak,
    /// Merkle padding repeats a zero digest instead of the last leaf.
    ZeroPadding,
    /// Poseidon2 leaves whose length is a multiple of the rate absorb one more (zero) block.
    Poseidon2ExtraBlock,
    /// Poseidon2 nodes go through the sponge (two blocks) instead of the compression.
    Poseidon2SpongeNodes,
    /// The LDE returns the raw input when blowup = 1 and shift = 1 (no canonicalisation).
    IdentityShortcut,
    /// The LDE truncates the shift to 32 bits (p + 7 becomes 8).
    ShiftTruncated,
    /// The LDE leaves small values of every column but the first as `x + p` (non-canonical).
    LdeNonCanonical,
    /// Downloads ignore the offset.
    DownloadIgnoresOffset,
    /// The LDE leaks its first table when a later allocation (its second table) fails.
    LeakOnError,
    /// The in-place LDE copies the trace rows to a temporary of their own (as an out-of-place
    /// LDE behind the in-place entry would): the result is right, the memory is not.
    TraceSizedTemporary,
    /// The in-place LDE assumes rows `[n, N)` are zero on entry: it reads them as the high
    /// coefficients of a zero-padded forward transform. Fresh allocations are zeroed here, so the
    /// allocating [`Backend::coset_lde`] still gives the right bytes; only garbage in those rows
    /// shows it.
    AssumesZeroTail,
    /// Allocations bypass the tracker.
    Untracked,
    /// `alloc_host` hands out memory that is not zeroed.
    HostNotZeroed,
    /// Skips every `backend_api::validate` check and trusts what the caller passed: buffer
    /// lengths, scratch caps, digest offsets, download ranges, allocation sizes.
    TrustsParameters,
    /// `coset_lde_from_host` extends only whole groups of 8 columns: the columns past the last
    /// multiple of 8 keep what the upload left (the trace in rows `[0, n)`, the buffer's old
    /// contents below), as a grouped upload that dropped its narrow last group would.
    FromHostSkipsTailColumns,
    /// `hash_leaves_from_host` uploads the matrix one element short, so the last element reads
    /// as 0 (an off-by-one staging copy).
    FromHostLeavesShort,
    /// `hash_leaves_then_transpose` transposes first and hashes the column-major bytes.
    LeavesAfterTranspose,
    /// `hash_leaves_then_transpose` hashes each tree before it validates the next tree and the
    /// transpose: a refused call has written digests.
    LeavesBeforeValidation,
    /// The opening products add reduced products in 64 bits and fold an overflow back in, but
    /// never subtract the last `p`: an output may be non-canonical (`p` for a sum of zero).
    DotLazyReduction,
    /// `column_dot_products` reads `count` consecutive rows from `first`, ignoring the step.
    ColumnDotIgnoresStep,
    /// `fri_fold` takes the factor of pair `i` as `w^-i / 2`, in natural order instead of at the
    /// bit-reversed index.
    FoldNaturalOrder,
    /// `fri_fold` adds the addend without its challenge.
    FoldAddendUnscaled,
    /// `bit_reversed_rows` copies the rows of its range in natural order.
    RowsNaturalOrder,
    /// `bit_reversed_rows` reverses the bits of the row's index within the range, not the matrix.
    RowsReversedWithinRange,
    /// Every instance counts its bytes in one process-wide tracker, so a buffer's tracker cannot
    /// tell one instance from another: the front then takes other instances' buffers for its own.
    SharedTracker,
    /// Under [`HostBackend::with_queued_frees`]: `free_memory` counts a dropped buffer's bytes
    /// as free at once, while its release still waits in the queue (until `synchronize`).
    FreeBeforeRelease,
    /// Answers [`backend_api::Error::Unsupported`] for every optional operation.
    NoOptional,
    /// `reduce_openings` takes row `j`'s point at the bit-reversed index, `shift * w^br(j)`.
    ReduceBitReversedPoints,
    /// `reduce_openings` leaves the row's combination unscaled (`S` taken as the identity).
    ReduceIgnoresRescale,
    /// `quotient_values` reads the next row as the adjacent quotient row, not `q / n` rows on.
    QuotientNextAdjacent,
    /// `quotient_values` divides the first-row selector by the trace length (the normalised
    /// Lagrange basis polynomial, not Plonky3's).
    QuotientNormalisedFirstRow,
}

/// A simulated device of [`QueuedFrees::CAPACITY`] bytes whose frees run in queue order: a
/// dropped buffer's bytes leave the tracker at once (the contract) but are held on the "device"
/// until the next `synchronize`, as a stream-ordered free is.
#[derive(Debug, Default)]
pub struct QueuedFrees {
    /// Bytes of dropped buffers whose release has not run yet.
    pending: std::sync::atomic::AtomicUsize,
}

impl QueuedFrees {
    pub const CAPACITY: usize = 64 << 20;
}

/// The one tracker of every [`Bug::SharedTracker`] instance.
static SHARED_TRACKER: std::sync::LazyLock<Arc<AllocTracker>> = std::sync::LazyLock::new(Arc::default);

pub struct HostBuffer {
    data: Vec<u64>,
    mark: Option<backend_api::Reserved>,
    tracker: Arc<AllocTracker>,
    /// The backend's queue of frees, under [`HostBackend::with_queued_frees`].
    frees: Option<Arc<QueuedFrees>>,
}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        if let Some(mark) = self.mark.take() {
            let bytes = mark.bytes();
            let _ = self.tracker.release(mark);
            if let Some(frees) = &self.frees {
                frees.pending.fetch_add(bytes, std::sync::atomic::Ordering::SeqCst);
            }
        }
    }
}

impl DeviceBuffer for HostBuffer {
    fn len(&self) -> usize {
        self.data.len()
    }

    fn tracker(&self) -> &AllocTracker {
        &self.tracker
    }
}

pub struct Ready(Vec<u64>);

impl PendingDownload for Ready {
    type Host = Vec<u64>;

    fn wait(self) -> Result<Vec<u64>> {
        Ok(self.0)
    }
}

pub struct HostBackend {
    tracker: Arc<AllocTracker>,
    bug: Bug,
    /// Calls of `synchronize`, so that a test sees the front forward them.
    syncs: std::sync::atomic::AtomicUsize,
    /// A simulated device with queued frees ([`HostBackend::with_queued_frees`]), or none (no
    /// memory limit, and `info` reports no memory).
    frees: Option<Arc<QueuedFrees>>,
}

impl HostBackend {
    pub fn new(bug: Bug) -> Self {
        let tracker = if bug == Bug::SharedTracker { Arc::clone(&SHARED_TRACKER) } else { Arc::default() };
        Self { tracker, bug, syncs: Default::default(), frees: None }
    }

    /// A backend on a simulated device of [`QueuedFrees::CAPACITY`] bytes whose frees are queued.
    pub fn with_queued_frees(bug: Bug) -> Self {
        Self { frees: Some(Arc::default()), ..Self::new(bug) }
    }

    /// `Unsupported` under [`Bug::NoOptional`].
    fn optional(&self, op: &'static str) -> Result<()> {
        if self.bug == Bug::NoOptional {
            return Err(backend_api::Error::Unsupported { backend: "selftest-host", op });
        }
        Ok(())
    }

    fn hash(&self, kind: HashKind, bytes: &[u8]) -> [u8; 32] {
        match kind {
            HashKind::Poseidon2 if self.bug == Bug::Poseidon2ExtraBlock && bytes.len().is_multiple_of(32) => {
                reference::hash(kind, &[bytes, &[0u8; 32][..]].concat())
            }
            HashKind::Poseidon2 => reference::hash(kind, bytes),
            HashKind::Keccak256 if self.bug == Bug::Sha3NotKeccak => sha3::Sha3_256::digest(bytes).into(),
            HashKind::Keccak256 => sha3::Keccak256::digest(bytes).into(),
            HashKind::Blake3 if self.bug == Bug::Blake3FirstChunkOnly => {
                *blake3::hash(&bytes[..bytes.len().min(1024)]).as_bytes()
            }
            HashKind::Blake3 => *blake3::hash(bytes).as_bytes(),
        }
    }

    /// Runs a `backend_api::validate` check, unless this backend trusts its parameters.
    /// The sum of canonical `terms` mod p (lazily reduced under [`Bug::DotLazyReduction`]).
    fn dot(&self, terms: impl Iterator<Item = u64>) -> u64 {
        if self.bug == Bug::DotLazyReduction {
            terms.fold(0u64, |s, t| {
                let (s, over) = s.overflowing_add(t);
                if over { s.wrapping_add(0xFFFF_FFFF) } else { s }
            })
        } else {
            terms.fold(0, field::add)
        }
    }

    fn check(&self, validate: impl FnOnce() -> Result<()>) -> Result<()> {
        if self.bug == Bug::TrustsParameters { Ok(()) } else { validate() }
    }

    fn digest_into(&self, out: &mut [u64], d: &[u8; 32]) {
        out.copy_from_slice(&backend_api::digest_to_words(d));
    }
}

impl backend_api::RawBackend for HostBackend {
    type Buffer = HostBuffer;
    type Download = Ready;
    type HostBuffer = Vec<u64>;

    fn info(&self) -> DeviceInfo {
        let (total_memory, free_memory) = match &self.frees {
            None => (0, 0),
            Some(frees) => {
                let live = self.tracker.counters().live;
                let queued = frees.pending.load(std::sync::atomic::Ordering::SeqCst);
                let used = if self.bug == Bug::FreeBeforeRelease { live } else { live + queued };
                (QueuedFrees::CAPACITY, QueuedFrees::CAPACITY.saturating_sub(used))
            }
        };
        DeviceInfo { backend: "selftest-host", device: format!("host, bug {:?}", self.bug), total_memory, free_memory }
    }

    fn tracker(&self) -> &AllocTracker {
        &self.tracker
    }

    unsafe fn alloc(&self, len: usize) -> Result<HostBuffer> {
        let bytes = if self.bug == Bug::TrustsParameters { len.wrapping_mul(8) } else { validate::alloc_bytes(len)? };
        let bytes = if self.bug == Bug::Untracked { 0 } else { bytes };
        if let Some(frees) = &self.frees {
            let held = self.tracker.counters().live + frees.pending.load(std::sync::atomic::Ordering::SeqCst);
            if held.saturating_add(bytes) > QueuedFrees::CAPACITY {
                let free = QueuedFrees::CAPACITY.saturating_sub(held);
                return Err(backend_api::Error::OutOfMemory {
                    backend: "selftest-host",
                    requested: bytes,
                    free,
                    total: QueuedFrees::CAPACITY,
                });
            }
        }
        let reserved = self.tracker.reserve(bytes)?;
        let fill = if self.bug == Bug::AssumesZeroTail { 0 } else { 0xdead_beef };
        let mut data = Vec::new();
        if data.try_reserve_exact(len).is_err() {
            let _ = self.tracker.refuse(reserved);
            return Err(backend_api::Error::OutOfMemory {
                backend: "selftest-host",
                requested: bytes,
                free: 0,
                total: 0,
            });
        }
        data.resize(len, fill);
        Ok(HostBuffer { data, mark: Some(reserved), tracker: self.tracker.clone(), frees: self.frees.clone() })
    }

    unsafe fn upload(&self, host: &[u64]) -> Result<HostBuffer> {
        // SAFETY: our contract: `host.len() * 8` fits `usize`.
        let mut b = unsafe { backend_api::RawBackend::alloc(self, host.len()) }?;
        b.data.copy_from_slice(host);
        Ok(b)
    }

    unsafe fn write(&self, buf: &mut HostBuffer, offset: usize, host: &[u64]) -> Result<()> {
        self.check(|| validate::write(buf.data.len(), offset, host.len()))?;
        buf.data[offset..offset + host.len()].copy_from_slice(host);
        Ok(())
    }

    unsafe fn download(&self, buf: &HostBuffer, offset: usize, out: &mut [u64]) -> Result<()> {
        let offset = if self.bug == Bug::DownloadIgnoresOffset { 0 } else { offset };
        self.check(|| validate::download(buf.data.len(), offset, out.len()))?;
        out.copy_from_slice(&buf.data[offset..offset + out.len()]);
        Ok(())
    }

    unsafe fn queue_download(&self, buf: &HostBuffer) -> Result<Ready> {
        Ok(Ready(buf.data.clone()))
    }

    unsafe fn alloc_host(&self, len: usize) -> Result<Vec<u64>> {
        let mut v = backend_api::host_vec("selftest-host", len)?;
        if self.bug == Bug::HostNotZeroed {
            v.fill(0xdead_beef);
        }
        Ok(v)
    }

    fn synchronize(&self) -> Result<()> {
        self.syncs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if let Some(frees) = &self.frees {
            // The queue has run: its frees with it.
            frees.pending.store(0, std::sync::atomic::Ordering::SeqCst);
        }
        Ok(())
    }

    /// Builds the LDE's host tables and says so.
    unsafe fn prepare(&self, prep: &backend_api::Preparation, step: &mut dyn FnMut(&str)) -> Result<()> {
        step(&format!("host tables of {} B built", prep.build_lde_tables()));
        Ok(())
    }

    /// A key that is not a file name as it stands, for the front to make safe.
    fn device_key(&self) -> String {
        format!("selftest host/{:?}", self.bug)
    }

    /// A host copy of `data`, timed: the "bus" of a host backend.
    fn transfer_floor(&self, data: &[u64]) -> Result<Option<backend_api::TransferFloor>> {
        let t = std::time::Instant::now();
        let copy = data.to_vec();
        let h2d_seconds = t.elapsed().as_secs_f64();
        let t = std::time::Instant::now();
        drop(std::hint::black_box(copy).to_vec());
        Ok(Some(backend_api::TransferFloor {
            what: "host copy".into(),
            h2d_seconds,
            d2h_seconds: t.elapsed().as_secs_f64(),
        }))
    }

    /// The suite's stand-in device is an emulation on the host.
    fn is_software(&self) -> bool {
        true
    }

    unsafe fn transpose_in_place(&self, buf: &mut HostBuffer, shape: MatrixShape, scratch_cap: usize) -> Result<()> {
        self.check(|| validate::transpose(shape, buf.data.len(), scratch_cap).map(drop))?;
        let plan = TransposePlan::new(shape, scratch_cap)?;
        let g = plan.geometry;
        let scratch_len =
            if self.bug == Bug::ScratchOverCap { shape.len() + shape.cols() + 1 } else { g.scratch_elems };
        // SAFETY: the scratch (one plan's, or the deliberate bug's matrix plus a row) is no larger
        // than a buffer that exists, so its bytes fit `usize`.
        let mut scratch = unsafe { backend_api::RawBackend::alloc(self, scratch_len) }?;
        plan.execute_host(&mut buf.data, &mut scratch.data);
        if self.bug == Bug::SwapRuns && g.full_blocks >= 2 && shape.cols() >= 2 {
            let r = g.run_rows;
            let (a, b) = buf.data.split_at_mut(r);
            a.swap_with_slice(&mut b[..r]);
        }
        if self.bug == Bug::LeakScratch {
            std::mem::forget(scratch);
        }
        Ok(())
    }

    unsafe fn batched_copy(&self, src: &HostBuffer, dst: &mut HostBuffer, copies: &[CopyRange]) -> Result<()> {
        if self.bug != Bug::NoCopyValidation {
            validate_batch(copies, BatchTarget::Between { src_len: src.data.len(), dst_len: dst.data.len() })?;
        }
        for c in copies {
            if c.src.saturating_add(c.len) > src.data.len() || c.dst.saturating_add(c.len) > dst.data.len() {
                continue;
            }
            dst.data[c.dst..c.dst + c.len].copy_from_slice(&src.data[c.src..c.src + c.len]);
        }
        Ok(())
    }

    unsafe fn bit_reversed_rows(
        &self,
        src: &HostBuffer,
        src_at: usize,
        shape: MatrixShape,
        rows: std::ops::Range<usize>,
        dst: &mut HostBuffer,
        dst_at: usize,
    ) -> Result<()> {
        let (cols, bits) = (shape.cols(), shape.rows().trailing_zeros());
        let (first, count) = (rows.start, rows.len());
        for (i, r) in rows.enumerate() {
            let from = match self.bug {
                Bug::RowsNaturalOrder => r,
                Bug::RowsReversedWithinRange => first + field::bit_reverse(i, count.max(1).ilog2()),
                _ => field::bit_reverse(r, bits),
            };
            let from = src_at + from * cols;
            dst.data[dst_at + i * cols..dst_at + (i + 1) * cols].copy_from_slice(&src.data[from..from + cols]);
        }
        Ok(())
    }

    unsafe fn batched_copy_within(&self, buf: &mut HostBuffer, copies: &[CopyRange]) -> Result<()> {
        if self.bug != Bug::NoCopyValidation {
            validate_batch(copies, BatchTarget::Within { len: buf.data.len() })?;
        }
        for c in copies {
            if c.src.saturating_add(c.len) > buf.data.len() || c.dst.saturating_add(c.len) > buf.data.len() {
                continue;
            }
            buf.data.copy_within(c.src..c.src + c.len, c.dst);
        }
        Ok(())
    }

    unsafe fn hash_leaves_into(
        &self,
        matrix: &HostBuffer,
        shape: MatrixShape,
        spec: &LeafSpec,
        out: &mut HostBuffer,
        out_digest: usize,
    ) -> Result<()> {
        let LeafOutput { leaves, start } = match self.bug {
            Bug::TrustsParameters => {
                LeafOutput { leaves: spec.layout().leaf_count(shape.rows()), start: out_digest * DIGEST_WORDS }
            }
            _ => validate::hash_leaves(shape, spec, matrix.data.len(), out.data.len(), out_digest)?,
        };
        let canon = |x: u64| if self.bug == Bug::HashRawBytes { x } else { field::canonical(x) };
        let row = |r: usize, big: bool, bytes: &mut Vec<u8>| {
            for c in spec.cols().clone() {
                let x = canon(matrix.data[r * shape.cols() + c]);
                bytes.extend_from_slice(&if big { x.to_be_bytes() } else { x.to_le_bytes() });
            }
        };
        let bits = shape.rows().trailing_zeros();
        for i in 0..leaves {
            let mut bytes = Vec::new();
            match spec.layout() {
                LeafLayout::Rows => row(i, false, &mut bytes),
                LeafLayout::LambdaVmPairs => {
                    let big = self.bug != Bug::PairsLittleEndian;
                    let br = |j| if self.bug == Bug::PairsNoBitReverse { j } else { field::bit_reverse(j, bits) };
                    row(br(2 * i), big, &mut bytes);
                    row(br(2 * i + 1), big, &mut bytes);
                }
            }
            let d = self.hash(spec.hash(), &bytes);
            let at = start + i * DIGEST_WORDS;
            self.digest_into(&mut out.data[at..at + DIGEST_WORDS], &d);
        }
        Ok(())
    }

    unsafe fn hash_leaves_then_transpose(
        &self,
        buf: &mut HostBuffer,
        shape: MatrixShape,
        jobs: &mut [LeafJob<'_, HostBuffer>],
        scratch_cap: usize,
    ) -> Result<()> {
        if self.bug != Bug::LeavesBeforeValidation {
            let specs: Vec<_> = jobs.iter().map(|j| (j.spec, j.out.data.len(), j.out_digest)).collect();
            validate::leaves_then_transpose(shape, buf.data.len(), &specs, scratch_cap)?;
        }
        // SAFETY: our contract is `hash_leaves_then_transpose`'s (the front validated every job
        // and the transpose; the bugs reorder the calls, not their arguments).
        unsafe {
            if self.bug == Bug::LeavesAfterTranspose {
                backend_api::RawBackend::transpose_in_place(self, buf, shape, scratch_cap)?;
            }
            for job in jobs.iter_mut() {
                backend_api::RawBackend::hash_leaves_into(self, buf, shape, job.spec, job.out, job.out_digest)?;
            }
            if self.bug == Bug::LeavesAfterTranspose {
                Ok(())
            } else {
                backend_api::RawBackend::transpose_in_place(self, buf, shape, scratch_cap)
            }
        }
    }

    unsafe fn row_dot_products(
        &self,
        matrix: &HostBuffer,
        shape: MatrixShape,
        coeffs: &[u64],
        out: &mut [u64],
    ) -> Result<()> {
        self.optional("row_dot_products")?;
        self.check(|| validate::row_dot_products(shape, matrix.data.len(), coeffs.len(), out.len()).map(drop))?;
        let cols = shape.cols();
        let k = coeffs.len() / cols;
        for (r, row) in matrix.data.chunks(cols).enumerate() {
            for (j, vector) in coeffs.chunks(cols).enumerate() {
                out[r * k + j] = self.dot(row.iter().zip(vector).map(|(&x, &c)| field::mul(x, c)));
            }
        }
        Ok(())
    }

    unsafe fn column_dot_products(
        &self,
        matrix: &HostBuffer,
        shape: MatrixShape,
        rows: RowStride,
        weights: &[u64],
        out: &mut [u64],
    ) -> Result<()> {
        self.optional("column_dot_products")?;
        self.check(|| {
            validate::column_dot_products(shape, matrix.data.len(), rows, weights.len(), out.len()).map(drop)
        })?;
        let cols = shape.cols();
        let step = if self.bug == Bug::ColumnDotIgnoresStep { 1 } else { rows.step };
        for (j, vector) in weights.chunks(rows.count).enumerate() {
            for c in 0..cols {
                let terms = vector
                    .iter()
                    .enumerate()
                    .map(|(i, &w)| field::mul(w, matrix.data[(rows.first + i * step) * cols + c]));
                out[j * cols + c] = self.dot(terms);
            }
        }
        Ok(())
    }

    unsafe fn quotient_values(
        &self,
        lde: &HostBuffer,
        shape: MatrixShape,
        call: &backend_api::QuotientCall<'_>,
        out: &mut HostBuffer,
    ) -> Result<()> {
        use backend_api::quotient::{Instr, Selector};
        self.optional("quotient_values")?;
        self.check(|| validate::quotient_values(shape, lde.data.len(), call, out.data.len()).map(drop))?;
        let (domain, d, cols) = (call.domain, call.degree(), shape.cols());
        let q = domain.quotient_rows();
        let n = 1u64 << domain.log_trace_rows();
        let stride = shape.rows() / q;
        let next = if self.bug == Bug::QuotientNextAdjacent { 1 } else { domain.next_step() };
        let v = field::root_of_unity(domain.log_quotient_rows());
        let w_inv = field::inverse(field::root_of_unity(domain.log_trace_rows()));
        let mut regs = vec![0u64; call.program.registers()];
        for i in 0..q {
            let x = field::mul(domain.shift(), field::pow(v, i as u64));
            let z_h = field::sub(field::pow(x, n), 1);
            let mut acc = vec![0u64; d];
            for instr in call.program.instrs() {
                let value = match instr {
                    Instr::Column { col, next: is_next, .. } => {
                        let r = if is_next { (i + next) % q } else { i };
                        field::canonical(lde.data[r * stride * cols + col as usize])
                    }
                    Instr::Value { index, .. } => field::canonical(call.values[index as usize]),
                    Instr::Selector { which: Selector::FirstRow, .. } => {
                        let first = field::mul(z_h, field::inverse(field::sub(x, 1)));
                        if self.bug == Bug::QuotientNormalisedFirstRow {
                            field::mul(first, field::inverse(n))
                        } else {
                            first
                        }
                    }
                    Instr::Selector { which: Selector::LastRow, .. } => {
                        field::mul(z_h, field::inverse(field::sub(x, w_inv)))
                    }
                    Instr::Selector { which: Selector::Transition, .. } => field::sub(x, w_inv),
                    Instr::Add { a, b, .. } => field::add(regs[a as usize], regs[b as usize]),
                    Instr::Sub { a, b, .. } => field::sub(regs[a as usize], regs[b as usize]),
                    Instr::Mul { a, b, .. } => field::mul(regs[a as usize], regs[b as usize]),
                    Instr::Neg { a, .. } => field::sub(0, regs[a as usize]),
                    Instr::Fold { src, constraint } => {
                        let power = &call.alpha_powers[constraint as usize * d..][..d];
                        for (acc, &p) in acc.iter_mut().zip(power) {
                            *acc = field::add(*acc, field::mul(p, regs[src as usize]));
                        }
                        continue;
                    }
                };
                regs[instr.dst().expect("every other instruction writes") as usize] = value;
            }
            let inv_z_h = field::inverse(z_h);
            for (o, a) in out.data[i * d..(i + 1) * d].iter_mut().zip(acc) {
                *o = field::mul(a, inv_z_h);
            }
        }
        Ok(())
    }

    unsafe fn reduce_openings(
        &self,
        matrix: &HostBuffer,
        shape: MatrixShape,
        call: &backend_api::ReductionCall<'_>,
        acc: &mut HostBuffer,
    ) -> Result<()> {
        self.optional("reduce_openings")?;
        self.check(|| validate::reduce_openings(shape, matrix.data.len(), call, acc.data.len()).map(drop))?;
        let (rows, cols, d) = (shape.rows(), shape.cols(), call.degree());
        let w = field::root_of_unity(rows.trailing_zeros());
        let times = |m: &[u64], v: &[u64], r: usize| self.dot((0..d).map(|c| field::mul(m[r * d + c], v[c])));
        for j in 0..rows {
            let at =
                if self.bug == Bug::ReduceBitReversedPoints { field::bit_reverse(j, rows.trailing_zeros()) } else { j };
            let x = field::mul(field::canonical(call.shift), field::pow(w, at as u64));
            let row = &matrix.data[j * cols..(j + 1) * cols];
            let v: Vec<u64> =
                (0..d).map(|t| self.dot((0..cols).map(|c| field::mul(call.coeffs[t * cols + c], row[c])))).collect();
            let mut sum: Vec<u64> =
                (0..d).map(|t| if call.accumulate { field::canonical(acc.data[j * d + t]) } else { 0 }).collect();
            for point in call.points {
                let u: Vec<u64> = (0..d)
                    .map(|r| {
                        let sv =
                            if self.bug == Bug::ReduceIgnoresRescale { v[r] } else { times(point.rescale(), &v, r) };
                        field::sub(point.value()[r], sv)
                    })
                    .collect();
                // -adj(x I - Z)(x) u / chi(x): the adjugate's matrices summed by powers of x.
                let chi = point.charpoly().iter().rev().fold(1, |s, &c| field::add(field::mul(s, x), c));
                let factor = field::sub(0, field::inverse(chi));
                let mut x_k = 1;
                for b in point.adjugate().chunks(d * d) {
                    for (r, s) in sum.iter_mut().enumerate() {
                        *s = field::add(*s, field::mul(field::mul(factor, x_k), times(b, &u, r)));
                    }
                    x_k = field::mul(x_k, x);
                }
            }
            acc.data[j * d..(j + 1) * d].copy_from_slice(&sum);
        }
        Ok(())
    }

    unsafe fn fri_fold(
        &self,
        input: &HostBuffer,
        beta: &[u64],
        addend: Option<(&HostBuffer, &[u64])>,
        out: &mut HostBuffer,
    ) -> Result<()> {
        self.optional("fri_fold")?;
        self.check(|| {
            validate::fri_fold(
                input.data.len(),
                beta.len(),
                addend.map(|(v, g)| (v.data.len(), g.len())),
                out.data.len(),
            )
            .map(drop)
        })?;
        let d = beta.len().isqrt();
        let n = out.data.len() / d;
        let half = field::inverse(2);
        // Running powers of `w^-1`, read at `br(i)`.
        let table = field::powers(field::inverse(field::root_of_unity(n.trailing_zeros() + 1)), n);
        let times = |m: &[u64], v: &[u64], r: usize| self.dot((0..d).map(|c| field::mul(m[r * d + c], v[c])));
        for i in 0..n {
            let pair = &input.data[2 * i * d..(2 * i + 2) * d];
            let (a, b) = pair.split_at(d);
            let at = if self.bug == Bug::FoldNaturalOrder { i } else { field::bit_reverse(i, n.trailing_zeros()) };
            let factor = field::mul(table[at], half);
            let odd: Vec<u64> = (0..d).map(|c| field::mul(field::sub(a[c], b[c]), factor)).collect();
            for r in 0..d {
                let mut o = field::add(field::mul(field::add(a[r], b[r]), half), times(beta, &odd, r));
                if let Some((v, gamma)) = addend {
                    let v = &v.data[i * d..(i + 1) * d];
                    o = field::add(o, if self.bug == Bug::FoldAddendUnscaled { v[r] } else { times(gamma, v, r) });
                }
                out.data[i * d + r] = o;
            }
        }
        Ok(())
    }

    unsafe fn merkle_tree_in_place(&self, nodes: &mut HostBuffer, tree: TreeShape, hash: HashKind) -> Result<()> {
        self.check(|| validate::merkle_tree(tree, nodes.data.len()))?;
        let digest = |n: &[u64], i: usize| -> [u8; 32] {
            backend_api::digests_from_words(&n[i * DIGEST_WORDS..(i + 1) * DIGEST_WORDS])[0]
        };
        let first = tree.first_leaf();
        let pad = if self.bug == Bug::ZeroPadding { [0u8; 32] } else { digest(&nodes.data, first + tree.leaves() - 1) };
        for i in first + tree.leaves()..tree.nodes() {
            self.digest_into(&mut nodes.data[i * DIGEST_WORDS..(i + 1) * DIGEST_WORDS], &pad);
        }
        // Level by level from the leaves' level up.
        let mut level_start = first;
        while level_start > 0 {
            let parent_start = (level_start - 1) / 2;
            for p in parent_start..level_start {
                let mut bytes = [0u8; 64];
                bytes[..32].copy_from_slice(&digest(&nodes.data, 2 * p + 1));
                bytes[32..].copy_from_slice(&digest(&nodes.data, 2 * p + 2));
                let d = if hash == HashKind::Poseidon2 && self.bug != Bug::Poseidon2SpongeNodes {
                    reference::parent(hash, &digest(&nodes.data, 2 * p + 1), &digest(&nodes.data, 2 * p + 2))
                } else {
                    self.hash(hash, &bytes)
                };
                self.digest_into(&mut nodes.data[p * DIGEST_WORDS..(p + 1) * DIGEST_WORDS], &d);
            }
            level_start = parent_start;
        }
        Ok(())
    }

    unsafe fn hash_leaves_from_host(
        &self,
        matrix: &[u64],
        shape: MatrixShape,
        spec: &LeafSpec,
        out: &mut HostBuffer,
        out_digest: usize,
    ) -> Result<()> {
        let mut copy = matrix.to_vec();
        if self.bug == Bug::FromHostLeavesShort
            && let Some(last) = copy.last_mut()
        {
            *last = 0;
        }
        // The provided chunked upload, in chunks of 3 rows, so the suite's shapes take every case
        // (one chunk, whole chunks, a shorter last chunk).
        // SAFETY: our contract is that function's (`copy` has `matrix`'s length).
        unsafe { backend_api::hash_leaves_in_chunks(self, &copy, shape, spec, out, out_digest, 3) }
    }

    unsafe fn coset_lde_from_host(&self, buf: &mut HostBuffer, trace: &[u64], params: &LdeParams) -> Result<()> {
        validate::coset_lde_from_host(params, trace.len(), buf.data.len())?;
        // SAFETY: checked just above: the trace fits the LDE buffer's first rows, and the buffer
        // holds the LDE's shape.
        unsafe { backend_api::RawBackend::write(self, buf, 0, trace) }?;
        if self.bug != Bug::FromHostSkipsTailColumns {
            // SAFETY: as above.
            return unsafe { backend_api::RawBackend::coset_lde_in_place(self, buf, params) };
        }
        let m = params.trace().cols();
        let tail = m / 8 * 8;
        let before = buf.data.clone();
        // SAFETY: as above.
        unsafe { backend_api::RawBackend::coset_lde_in_place(self, buf, params) }?;
        for (row, old) in buf.data.chunks_mut(m).zip(before.chunks(m)) {
            row[tail..].copy_from_slice(&old[tail..]);
        }
        Ok(())
    }

    unsafe fn coset_lde_in_place(&self, buf: &mut HostBuffer, params: &LdeParams) -> Result<()> {
        self.check(|| validate::coset_lde_in_place(params, buf.data.len()))?;
        let (n, m) = (params.trace().rows(), params.trace().cols());
        let big_n = n * params.blowup();
        if self.bug == Bug::IdentityShortcut && params.blowup() == 1 && field::canonical(params.shift()) == 1 {
            return Ok(());
        }
        // The tables a real backend uploads (`LdeTwiddles::bytes_for`: the inverse twiddles and
        // the coset table, then the forward twiddles), allocated and tracked in that order; under
        // `TraceSizedTemporary` a copy of the trace rows first, as an out-of-place LDE would need.
        let copy = if self.bug == Bug::TraceSizedTemporary {
            // SAFETY: smaller than the LDE buffer, which exists, so its bytes fit `usize`.
            Some(unsafe { backend_api::RawBackend::alloc(self, n * m) }?)
        } else {
            None
        };
        // SAFETY: as above.
        let first = unsafe { backend_api::RawBackend::alloc(self, n / 2 + n) }?;
        // SAFETY: as above.
        let second = match unsafe { backend_api::RawBackend::alloc(self, big_n / 2) } {
            Ok(t) => t,
            Err(e) => {
                if self.bug == Bug::LeakOnError {
                    std::mem::forget(first);
                }
                return Err(e);
            }
        };
        drop((copy, first, second));
        let shift = if self.bug == Bug::ShiftTruncated { params.shift() & 0xFFFF_FFFF } else { params.shift() };
        let w_inv = field::inverse(field::root_of_unity(params.log_trace_rows()));
        let w_big = field::root_of_unity(params.log_trace_rows() + params.log_blowup());
        let n_inv = field::inverse(n as u64);
        let xs = field::powers(w_big, big_n);
        // Column by column: column c's trace is read before any of its rows is written.
        for c in 0..m {
            let col: Vec<u64> = (0..n).map(|j| buf.data[j * m + c]).collect();
            let mut coeffs: Vec<u64> = (0..n)
                .map(|k| {
                    let wk = field::pow(w_inv, k as u64);
                    let (mut acc, mut w) = (0, 1);
                    for &t in &col {
                        acc = field::add(acc, field::mul(t, w));
                        w = field::mul(w, wk);
                    }
                    field::mul(acc, n_inv)
                })
                .collect();
            if self.bug == Bug::AssumesZeroTail {
                coeffs.extend((n..big_n).map(|k| field::canonical(buf.data[k * m + c])));
            }
            for (i, &wi) in xs.iter().enumerate() {
                let x = field::mul(shift, wi);
                let v = coeffs.iter().rev().fold(0, |acc, &a| field::add(field::mul(acc, x), a));
                buf.data[i * m + c] =
                    if self.bug == Bug::LdeNonCanonical && c > 0 && v < 0xFFFF_FFFF { v + field::P } else { v };
            }
        }
        Ok(())
    }
}

fn outcome(bug: Bug, name: &str) -> crate::Outcome {
    let b = HostBackend::new(bug);
    let (_, check) = crate::checks::<HostBackend>()
        .into_iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no check {name}"));
    crate::run_check_outcome(&b, name, check)
}

#[test]
fn a_correct_backend_passes_every_check() {
    let b = HostBackend::new(Bug::None);
    let results = crate::run_all(&b);
    assert_eq!(results.len(), crate::checks::<HostBackend>().len());
    let failed: Vec<_> = results.iter().filter_map(|(n, r)| r.as_ref().err().map(|e| format!("{n}: {e}"))).collect();
    assert!(failed.is_empty(), "{failed:#?}");
}

/// Each bug, and the checks that must catch it.
const CAUGHT_BY: &[(Bug, &[&str])] = &[
    (Bug::SwapRuns, &["transpose_block_tails", "transpose_wide_columns", "transpose_scratch_within_cap"]),
    (Bug::ScratchOverCap, &["transpose_scratch_within_cap", "transpose_block_tails"]),
    (Bug::LeakScratch, &["transpose_edge_shapes", "transpose_default_cap", "memory_queue_download_snapshot"]),
    (
        Bug::HashRawBytes,
        &["hash_leaves_keccak_rows", "hash_leaves_blake3_pairs", "hash_leaves_non_canonical", "memory_fault_injection"],
    ),
    (Bug::PairsLittleEndian, &["hash_leaves_keccak_pairs", "hash_leaves_blake3_pairs", "hash_leaves_into_offset"]),
    (Bug::PairsNoBitReverse, &["hash_leaves_keccak_pairs", "hash_leaves_blake3_pairs", "hash_leaves_wide_rows"]),
    (Bug::Blake3FirstChunkOnly, &["hash_leaves_wide_rows"]),
    (Bug::Sha3NotKeccak, &["hash_leaves_keccak_rows", "merkle_tree_keccak", "merkle_tree_in_place"]),
    (Bug::ZeroPadding, &["merkle_tree_keccak", "merkle_tree_blake3", "merkle_tree_poseidon2", "merkle_tree_in_place"]),
    (Bug::Poseidon2ExtraBlock, &["hash_leaves_poseidon2_rows", "hash_leaves_wide_rows", "leaves_then_transpose"]),
    (Bug::Poseidon2SpongeNodes, &["merkle_tree_poseidon2", "merkle_tree_in_place"]),
    (Bug::IdentityShortcut, &["coset_lde_identity", "coset_lde_in_place_garbage_rows"]),
    (Bug::ShiftTruncated, &["coset_lde_shifts", "coset_lde_in_place_small_domains", "coset_lde_in_place_garbage_rows"]),
    (
        Bug::LdeNonCanonical,
        &["coset_lde_canonical_output", "coset_lde_in_place_small_domains", "coset_lde_in_place_garbage_rows"],
    ),
    (Bug::AssumesZeroTail, &["coset_lde_in_place_small_domains", "coset_lde_in_place_garbage_rows"]),
    (Bug::TraceSizedTemporary, &["coset_lde_in_place_allocates_only_its_tables"]),
    (Bug::DownloadIgnoresOffset, &["memory_upload_download", "memory_host_buffers"]),
    (Bug::HostNotZeroed, &["memory_host_buffers"]),
    (Bug::LeakOnError, &["memory_fault_injection"]),
    (Bug::Untracked, &["memory_counters"]),
    (Bug::FromHostSkipsTailColumns, &["coset_lde_from_host"]),
    (Bug::FromHostLeavesShort, &["hash_leaves_from_host"]),
    (Bug::LeavesAfterTranspose, &["leaves_then_transpose"]),
    (Bug::SwapRuns, &["leaves_then_transpose"]),
    (Bug::HashRawBytes, &["leaves_then_transpose"]),
    // Random sums almost never land in [p, 2^64): only the edge case shows it.
    (Bug::DotLazyReduction, &["dot_products_large_sums"]),
    (Bug::ColumnDotIgnoresStep, &["column_dot_products_random"]),
    (Bug::FoldNaturalOrder, &["fri_fold_random"]),
    (Bug::FoldAddendUnscaled, &["fri_fold_random"]),
    (Bug::RowsNaturalOrder, &["bit_reversed_rows_random"]),
    (Bug::RowsReversedWithinRange, &["bit_reversed_rows_random"]),
    (Bug::ReduceBitReversedPoints, &["reduce_openings_random"]),
    (Bug::ReduceIgnoresRescale, &["reduce_openings_random"]),
    (Bug::QuotientNextAdjacent, &["quotient_values_random", "quotient_values_selectors"]),
    (Bug::QuotientNormalisedFirstRow, &["quotient_values_random", "quotient_values_selectors"]),
];

/// Port bugs that the checked front makes harmless: a port that validates nothing, skips copy-batch
/// validation, or hashes before it checks the later jobs is still refused exactly as the contract
/// says, because [`Backend`]'s methods validate every call before the port's method runs. Each
/// pair names a check that caught the bug when ports validated for themselves.
const MADE_HARMLESS_BY_THE_FRONT: &[(Bug, &[&str])] = &[
    (Bug::NoCopyValidation, &["batched_copy_rejects_overlap", "batched_copy_rejects_out_of_bounds"]),
    (Bug::LeavesBeforeValidation, &["leaves_then_transpose_errors"]),
    (
        Bug::TrustsParameters,
        &[
            "transpose_errors",
            "hash_leaves_errors",
            "merkle_tree_errors",
            "coset_lde_errors",
            "dot_products_errors",
            "fri_fold_errors",
            "quotient_values_errors",
            "reduce_openings_errors",
            "bit_reversed_rows_errors",
            "memory_upload_download",
            "memory_size_overflow",
        ],
    ),
];

#[test]
fn the_front_validates_for_a_port_that_checks_nothing() {
    for &(bug, checks) in MADE_HARMLESS_BY_THE_FRONT {
        for &name in checks {
            outcome(bug, name).unwrap_or_else(|f| panic!("{bug:?} got past the front in {name}: {f}"));
        }
    }
    // The port itself really does skip: called below the front, it accepts what the front refuses.
    let port = HostBackend::new(Bug::TrustsParameters);
    let mut buf = Backend::alloc(&port, 4).unwrap();
    let shape = MatrixShape::new(2, 3).unwrap();
    assert!(Backend::transpose_in_place(&port, &mut buf, shape, 1 << 20).is_err(), "the front refuses 4 != 2 x 3");
    let below = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: not met, deliberately: this port is safe Rust over a `Vec`, so a call outside the
        // contract can at worst panic (caught here), never touch memory it does not own.
        unsafe { backend_api::RawBackend::transpose_in_place(&port, &mut buf, shape, 1 << 20) }
    }));
    assert!(!matches!(below, Ok(Err(_))), "the port's own method must not validate, or this test proves nothing");
}

/// The front hands the hooks to the port (the device key made file-safe on the way).
#[test]
fn the_front_forwards_the_hooks_to_the_port() {
    use std::sync::atomic::Ordering;
    let b = HostBackend::new(Bug::None);
    assert_eq!(Backend::device_key(&b), "selftest-host-None");
    assert!(Backend::is_software(&b));
    let lde = LdeParams::new(MatrixShape::new(16, 2).unwrap(), 2, 7).unwrap();
    let prep = backend_api::Preparation {
        hash: HashKind::Blake3,
        pageable_upload_bytes: 0,
        device_bytes: None,
        lde_elems: 64,
        lde: Some(lde),
    };
    let mut steps = Vec::new();
    Backend::prepare(&b, &prep, &mut |s| steps.push(s.to_string())).unwrap();
    assert_eq!(steps, [format!("host tables of {} B built", backend_api::field::LdeTwiddles::bytes_for(4, 1))]);
    let floor = Backend::transfer_floor(&b, &[1, 2, 3]).unwrap().expect("a floor");
    assert_eq!(floor.what, "host copy");
    let before = b.syncs.load(Ordering::SeqCst);
    Backend::synchronize(&b).unwrap();
    assert_eq!(b.syncs.load(Ordering::SeqCst), before + 1);
}

#[test]
fn foreign_buffers_are_caught_where_instances_share_a_tracker() {
    let check = crate::memory::memory_foreign_buffers::<HostBackend>;
    let make = || Ok(HostBackend::new(Bug::None));
    crate::run_instance_check_outcome(&make().unwrap(), &make, "memory_foreign_buffers", check)
        .unwrap_or_else(|f| panic!("a correct backend failed: {f}"));
    let shared = || Ok(HostBackend::new(Bug::SharedTracker));
    let f = crate::run_instance_check_outcome(&shared().unwrap(), &shared, "memory_foreign_buffers", check)
        .expect_err("buffers of instances sharing a tracker pass as each other's");
    assert!(f.0.contains("with a buffer of another instance: expected an error"), "{f}");
}

/// The default `hash_leaves_from_host` (as the selftest port runs it, chunks of 3 rows) holds one
/// chunk and the shorter last one on the device, never the whole matrix.
#[test]
fn leaves_from_host_hold_a_chunk_not_the_matrix() {
    use backend_api::{Backend as _, DIGEST_WORDS, HashKind, LeafLayout, LeafSpec, MatrixShape};
    let backend = HostBackend::new(Bug::None);
    let (rows, cols) = (16, 8);
    let host: Vec<u64> = (0..(rows * cols) as u64).collect();
    let mut out = backend.alloc(rows * DIGEST_WORDS).unwrap();
    let shape = MatrixShape::new(rows, cols).unwrap();
    let spec = LeafSpec::new(HashKind::Keccak256, LeafLayout::Rows, 0..cols).unwrap();
    backend.tracker().reset_peak();
    let before = backend.memory();
    backend.hash_leaves_from_host(&host, shape, &spec, &mut out, 0).unwrap();
    let held = backend.memory().peak - before.live;
    assert!(held <= (3 + 1) * cols * 8, "{held} B held on the device for a 3-row chunk and a 1-row tail of 8 columns");
    assert!(held > 0, "the chunks are device buffers");
    assert_eq!(backend.memory().live, before.live, "the chunks are freed");
    // A port's own call with chunks of 0 rows reads them as 1 (no panic), with the same digests.
    let mut again = backend.alloc(rows * DIGEST_WORDS).unwrap();
    // SAFETY: the call the front accepted above, into a second output of the same length.
    unsafe { backend_api::hash_leaves_in_chunks(&backend, &host, shape, &spec, &mut again, 0, 0) }.unwrap();
    assert_eq!(backend.download_vec(&again).unwrap(), backend.download_vec(&out).unwrap());
}

#[test]
fn every_bug_is_caught_by_its_checks() {
    let mut missed = Vec::new();
    for &(bug, checks) in CAUGHT_BY {
        for &name in checks {
            match outcome(bug, name) {
                Ok(()) => missed.push(format!("{bug:?} passed {name}")),
                Err(f) => println!("{bug:?} caught by {name}: {f}"),
            }
        }
    }
    assert!(missed.is_empty(), "checks that did not catch a deliberate bug: {missed:#?}");
}

/// Fresh allocations are zero under [`Bug::AssumesZeroTail`], so the allocating `coset_lde` checks
/// pass it: only the in-place checks, which put garbage in rows `[n, N)`, can catch it.
#[test]
fn a_zero_tail_assumption_is_invisible_to_the_allocating_checks() {
    for name in ["coset_lde_small_domains", "coset_lde_larger_domains", "coset_lde_canonical_output"] {
        outcome(Bug::AssumesZeroTail, name).unwrap_or_else(|f| panic!("{name} caught the zero-tail bug: {f}"));
    }
}

#[test]
fn failures_name_the_deepest_node_and_the_expected_preimage() {
    let merkle = outcome(Bug::ZeroPadding, "merkle_tree_keccak").expect_err("zero padding is caught");
    assert!(merkle.0.contains("deepest differing node is") && merkle.0.contains("leaf slot"), "{merkle}");
    // 1 x 1 matrix, the first case of the sweep: one 8-byte preimage, shown whole.
    let leaf = outcome(Bug::HashRawBytes, "hash_leaves_keccak_rows").expect_err("raw bytes are caught");
    assert!(leaf.0.contains("expected preimage (") && leaf.0.contains(" B): "), "{leaf}");
}

// The macro, instantiated inside the crate on the host backend: proves it expands and runs.
mod macro_expansion {
    crate::conformance_suite!(super::HostBackend, || Ok(super::HostBackend::new(super::Bug::None)), "REQUIRE_SELFTEST");
}

#[test]
fn free_memory_that_counts_queued_frees_as_free_is_caught() {
    let check = crate::memory::memory_free_memory_is_allocatable::<HostBackend>;
    let name = "memory_free_memory_is_allocatable";
    // A queue-ordered device that reports queued frees as used passes, and so does every other
    // check on it.
    let honest = HostBackend::with_queued_frees(Bug::None);
    crate::run_check_outcome(&honest, name, check).unwrap_or_else(|f| panic!("an honest queued device: {f}"));
    let failed: Vec<_> = crate::run_all(&honest).into_iter().filter_map(|(n, r)| r.err().map(|e| (n, e))).collect();
    assert!(failed.is_empty(), "{failed:#?}");
    // One that reports them free at once is caught, by this check alone.
    let lying = HostBackend::with_queued_frees(Bug::FreeBeforeRelease);
    let err = crate::run_check_outcome(&lying, name, check).expect_err("free memory counting queued frees must fail");
    assert!(err.0.contains("whose queued release has not run"), "{err}");
    // A device that does not report its memory, or reports more than the check fills, is skipped.
    crate::run_check_outcome(&HostBackend::new(Bug::FreeBeforeRelease), name, check).unwrap();
}

#[test]
fn a_missing_optional_operation_fails_only_where_all_are_required() {
    let b = HostBackend::new(Bug::NoOptional);
    let optional = [
        "row_dot_products_random",
        "column_dot_products_random",
        "dot_products_large_sums",
        "fri_fold_random",
        "reduce_openings_random",
        "quotient_values_random",
        "quotient_values_selectors",
    ];
    for name in optional {
        outcome(Bug::NoOptional, name).unwrap_or_else(|f| panic!("{name} must skip an unsupported operation: {f}"));
    }
    crate::require_optional(Some("REQUIRE_SELFTEST"));
    let results: Vec<_> = optional.iter().map(|&name| (name, outcome(Bug::NoOptional, name))).collect();
    crate::require_optional(None);
    for (name, result) in results {
        let err = result.expect_err("an unsupported operation under =all must fail");
        assert!(err.0.contains("REQUIRE_SELFTEST=all requires every optional operation"), "{name}: {err}");
    }
    // Through the generated tests' entry: the variable's value `all` turns it on, then off again.
    let var = format!("CONFORMANCE_SELFTEST_UNSET_{}", std::process::id());
    let (_, check) = crate::checks::<HostBackend>().into_iter().find(|(n, _)| *n == optional[0]).unwrap();
    crate::run_check(Ok(&b), "HostBackend", optional[0], &var, check);
}
