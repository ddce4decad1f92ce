//! The portable wgpu backend: every [`Backend`] operation as WGSL compute kernels.
//!
//! - **Portable arithmetic.** Every 64-bit value (Goldilocks elements, Keccak lanes) is a pair of
//!   `u32` in the kernels, so the backend runs on adapters without `SHADER_INT64` (WebGPU, most
//!   mobile GPUs). Storage buffers hold `u32` words: a `u64` element is two words (lo, hi). Where
//!   the adapter has `SHADER_INT64`, Goldilocks arithmetic runs in native u64
//!   (`shaders/wgsl/goldilocks_int64.wgsl`: the same functions on the same element layout, with
//!   64-bit adds, compares and 32 x 32 -> 64-bit products as single operations, where the
//!   portable `goldilocks.wgsl` builds them from u32 pieces and 16-bit halves).
//!   [`WgpuOptions::portable_arithmetic`] keeps the portable path on such adapters, so that both
//!   paths are tested on one machine.
//! - **Buffers beyond the binding limit.** A device buffer is a list of segments (wgpu buffers)
//!   of the largest power-of-two size the adapter binds as one storage buffer; every dispatch
//!   binds the (at most four) segments it touches, and the host cuts each operation into such
//!   dispatches. The adapter's real limits are requested, not the defaults.
//! - **Three hashes.** Leaves and Merkle nodes in Keccak-256, BLAKE3 or Plonky3's Goldilocks
//!   Poseidon2 of width 8 (`shaders/wgsl/poseidon2.wgsl`: every round written out, the round
//!   constants as immediates, so the state stays in registers), one invocation per leaf or node.
//!   On a software adapter (llvmpipe), which silently ends an invocation's loops after 65,535
//!   iterations, leaves longer than [`software_max_leaf_bytes`] are refused rather than hashed
//!   wrong.
//! - **The quotient as an interpreter.** [`Backend::quotient_values`] runs the constraint program
//!   (`shaders/wgsl/quotient.wgsl`) with one invocation per point, over the LDE where it lies:
//!   the program, its values and the challenge powers go up once as one table; each point's
//!   registers live in a scratch buffer laid out register-major (`[register * threads + point]`),
//!   so that neighbouring invocations touch neighbouring words; the host cuts a call into
//!   dispatches of at most 2^16 points, and the program into ranges of instructions that keep
//!   every invocation below llvmpipe's loop limit. The table is padded to whole `vec4`s: bound as
//!   `array<vec4<u32>>`, a buffer's length rounds down to whole 16-byte words, and an H100 through
//!   Vulkan read an odd table's last element (a challenge power) as 0 where llvmpipe read it
//!   anyway. Checked on llvmpipe in CI and on an H100 through Vulkan (2026-12-07).
//! - **Same plans, same tables.** The in-place transpose executes the schedule of
//!   [`backend_api::plan::TransposePlan`] (every run-pass batch through the copy shader); the LDE
//!   uses [`backend_api::field::LdeTwiddles`]. Kernels live in `shaders/wgsl/*.wgsl`.
//! - **Accounted memory.** Every device buffer goes through the backend's [`AllocTracker`]; a
//!   1 MiB parameter arena and a 256 B placeholder are allocated once at construction (outside
//!   the tracker, they are fixed overhead, like a context).
//!   Freed segments are pooled for reuse ([`WgpuBackend::pooled_bytes`],
//!   [`WgpuBackend::trim_pool`]), as CUDA's stream-ordered pool keeps freed memory.
//! - **Host transfers at bus speed.** Large uploads and downloads go through two small rings of
//!   mapped staging buffers (three 64 MiB buffers per direction, made at first use and kept),
//!   filled and emptied by every core while the device copies the neighbouring chunks; their
//!   bytes count as page-locked host memory ([`backend_api::MemoryCounters::pinned_host`]).
//!   Small transfers go straight through `Queue::write_buffer` or one staging buffer.
//! - **Typed failures** ([`backend_api::Error`]). No adapter is `BackendUnavailable`, a lost
//!   device `DeviceLost`, a wgpu error `Device`, a shader that does not compile `KernelCompile`,
//!   and a shape beyond what one dispatch can bind `InvalidArgument` naming the limit. wgpu's uncaptured errors are captured, never
//!   panics.
//! - **Quiet on headless machines.** Without a display, Mesa's Vulkan layer prints
//!   `error: XDG_RUNTIME_DIR is invalid` twice per instance although nothing failed; call
//!   [`quiet_headless_vulkan`] first in `main` to switch that layer off (safely: it checks that
//!   no other thread runs).

mod context;
mod copy;
mod hash;
mod lde;
mod memory;
mod merkle;
mod open;
mod quotient;
mod staging;
mod transpose;

use std::sync::Arc;

#[cfg(doc)]
use backend_api::Backend;
use backend_api::DeviceBuffer as _;
use backend_api::contract;
use backend_api::{
    AllocTracker, CopyRange, DeviceInfo, HashKind, LdeParams, LeafSpec, MatrixShape, Preparation, Result, RowStride,
    TreeShape,
};

pub use context::{DeviceTime, PipelinePrep, QuietHeadless, WgpuError, quiet_headless_vulkan};
pub use hash::{SOFTWARE_MAX_LEAF_BYTES, SOFTWARE_MAX_POSEIDON2_LEAF_BYTES, software_max_leaf_bytes};
pub use memory::{WgpuBuffer, WgpuDownload};

use context::{Gpu, Setup};

/// How [`WgpuBackend::new`] picks and configures its device. [`WgpuBackend::new`] validates
/// every field and refuses a value outside its range with [`backend_api::Error::InvalidArgument`]
/// naming the field, the value and the range.
#[derive(Clone, Debug, Default)]
pub struct WgpuOptions {
    /// Accept a software adapter (`DeviceType::Cpu`, e.g. Mesa's llvmpipe) when no hardware
    /// adapter exists. The prover's `--backend auto` passes `false`; tests pass `true`.
    pub allow_software: bool,
    /// Caps the segment size (bytes) below the adapter's binding limit, so that tests exercise
    /// multi-segment buffers at small shapes. `None` uses the adapter's limit. At least
    /// [`MIN_SEGMENT_BYTES`]; a value that is not a power of two of elements is rounded down to
    /// one, and a value above the adapter's binding limit means the limit.
    pub max_segment_bytes: Option<u64>,
    /// Never use `SHADER_INT64`, even where the adapter offers it: Goldilocks arithmetic runs on
    /// u32 pairs, as on adapters without 64-bit integers. `false` (the default) uses native u64
    /// where available; [`WgpuBackend::uses_int64`] says which path runs.
    pub portable_arithmetic: bool,
    /// Bytes per staging chunk of large uploads and downloads (each direction keeps three such
    /// mapped buffers, counted as page-locked host memory). `None` is 64 MiB. A multiple of 8
    /// from [`MIN_TRANSFER_CHUNK_BYTES`] up to the adapter's `max_buffer_size`. Lower it where
    /// the 384 MiB of staging is too much host memory; transfers of at most a sixteenth of a
    /// chunk skip the staging buffers.
    pub transfer_chunk_bytes: Option<usize>,
}

/// The smallest [`WgpuOptions::max_segment_bytes`]: 64 B, eight elements.
pub const MIN_SEGMENT_BYTES: u64 = 64;

/// The smallest [`WgpuOptions::transfer_chunk_bytes`]: 64 B. A chunk is copied by the host in 64
/// pieces of a multiple of 8 bytes each, so a smaller one would have pieces of no bytes.
pub const MIN_TRANSFER_CHUNK_BYTES: usize = 64;

impl WgpuOptions {
    /// Checks the fields that need no adapter to check.
    fn validate(&self) -> Result<()> {
        let invalid = |field: &str, value: String, range: &str| {
            Err(backend_api::Error::InvalidArgument(format!(
                "wgpu: WgpuOptions::{field} is {value}; it must be {range}"
            )))
        };
        if let Some(bytes) = self.max_segment_bytes
            && bytes < MIN_SEGMENT_BYTES
        {
            return invalid(
                "max_segment_bytes",
                format!("Some({bytes})"),
                &format!("None or at least {MIN_SEGMENT_BYTES}"),
            );
        }
        if let Some(bytes) = self.transfer_chunk_bytes
            && (bytes < MIN_TRANSFER_CHUNK_BYTES || !bytes.is_multiple_of(8))
        {
            return invalid(
                "transfer_chunk_bytes",
                format!("Some({bytes})"),
                &format!("None or a multiple of 8 from {MIN_TRANSFER_CHUNK_BYTES} up to the adapter's max_buffer_size"),
            );
        }
        Ok(())
    }
}

/// The wgpu backend: one device, one queue.
pub struct WgpuBackend {
    gpu: Arc<Gpu>,
}

impl std::fmt::Debug for WgpuBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WgpuBackend")
            .field("adapter", &self.gpu.hw.info.name)
            .field("type", &self.gpu.hw.info.device_type)
            .field("segment_elems", &self.gpu.seg_elems())
            .finish()
    }
}

impl WgpuBackend {
    /// Opens the best adapter wgpu finds (discrete, then integrated, then virtual or other GPUs,
    /// then — only with `allow_software` — a CPU adapter).
    ///
    /// Any thread may call it, several at once: a process opens (and drops) its wgpu devices one
    /// at a time, because an NVIDIA Vulkan driver hung or crashed on concurrent ones (an H100,
    /// driver 580, 2026-12-07); the operations of open backends run concurrently.
    ///
    /// # Errors
    /// `Error::InvalidArgument` naming the field, its value and its range for an option out of
    /// range ([`WgpuOptions`]), before any adapter is opened where the range needs none;
    /// `Error::BackendUnavailable` when no acceptable adapter exists or the device cannot be
    /// created; `Error::Device` when setup raises a wgpu error.
    pub fn new(options: WgpuOptions) -> Result<Self> {
        options.validate()?;
        let gpu = Gpu::new(&Setup {
            allow_software: options.allow_software,
            max_segment_bytes: options.max_segment_bytes,
            portable_arithmetic: options.portable_arithmetic,
            transfer_chunk: options.transfer_chunk_bytes.unwrap_or(staging::DEFAULT_CHUNK_BYTES),
        })?;
        // The staging slots are buffers of one chunk each.
        let max = gpu.hw.limits.max_buffer_size;
        if let Some(bytes) = options.transfer_chunk_bytes
            && bytes as u64 > max
        {
            return Err(backend_api::Error::InvalidArgument(format!(
                "wgpu: WgpuOptions::transfer_chunk_bytes is Some({bytes}); it must be None or a multiple of 8 \
                 from {MIN_TRANSFER_CHUNK_BYTES} up to the adapter's max_buffer_size, {max} B on {}",
                gpu.hw.info.name
            )));
        }
        Ok(Self { gpu })
    }

    /// Creates, on several threads at once, the compute pipelines a commit with leaf hash `hash`
    /// launches (the coset LDE, the leaf hash, the Merkle levels, the in-place transpose and the
    /// copy shader), instead of one by one at their first dispatch, so that a program can do it
    /// while it makes its table; returns what each cost. Pipelines already created are skipped,
    /// so a second call returns an empty list.
    ///
    /// # Errors
    /// [`backend_api::Error::KernelCompile`] with the shader's error.
    pub fn prepare_kernels(&self, hash: HashKind) -> Result<Vec<PipelinePrep>> {
        let mut kernels = lde::KERNELS.to_vec();
        kernels.extend(hash::kernels(hash));
        kernels.extend(merkle::kernels(hash));
        kernels.extend(transpose::KERNELS);
        let threads = std::thread::available_parallelism().map_or(4, |n| n.get());
        self.gpu.prepare(&kernels, threads)
    }

    /// Whether the device is a software rasteriser (`DeviceType::Cpu`, e.g. llvmpipe).
    pub fn is_software(&self) -> bool {
        self.gpu.hw.info.device_type == wgpu::DeviceType::Cpu
    }

    /// The adapter's name, type, driver and backend API, as wgpu reports them.
    pub fn adapter_info(&self) -> wgpu::AdapterInfo {
        self.gpu.hw.info.clone()
    }

    /// Whether Goldilocks arithmetic runs in native u64 (`SHADER_INT64` requested from the
    /// adapter) rather than on u32 pairs. Both give the same bytes.
    pub fn uses_int64(&self) -> bool {
        self.gpu.int64()
    }

    /// Whether the adapter offers `SHADER_INT64` at all.
    pub fn adapter_has_int64(&self) -> bool {
        self.gpu.hw.adapter_int64
    }

    /// Elements per segment: the largest power of two the adapter binds as one storage buffer,
    /// or less under [`WgpuOptions::max_segment_bytes`].
    pub fn segment_elems(&self) -> usize {
        self.gpu.seg_elems()
    }

    /// Queues a plain device copy of the whole of `src` into `dst`: one `copy_buffer_to_buffer`
    /// per segment in one command encoder. The baseline benchmarks compare every operation with.
    ///
    /// # Errors
    /// `Error::LengthMismatch` when the lengths differ; a device error.
    pub fn raw_copy(&self, src: &WgpuBuffer, dst: &mut WgpuBuffer) -> Result<()> {
        let tracker = &self.gpu.tracker;
        backend_api::validate::owned(tracker, src.tracker(), "WgpuBackend", "raw_copy source")?;
        backend_api::validate::owned(tracker, dst.tracker(), "WgpuBackend", "raw_copy destination")?;
        memory::raw_copy(&self.gpu, src, dst)
    }

    /// Creates a buffer of `len` elements, clears it on the device and frees it, so that its
    /// segments wait in the pool: a later allocation of the same length (a commit's LDE) then
    /// skips buffer creation (~48 ms per GiB on the H200) and wgpu's zero fill at first use.
    /// Returns when the clear has finished. The pooled bytes count in
    /// [`WgpuBackend::pooled_bytes`] until reused or trimmed.
    ///
    /// # Errors
    /// As [`Backend::alloc`] (`OutOfMemory` when the device cannot hold it; nothing is kept),
    /// or a device error.
    pub fn prepare_buffer(&self, len: usize) -> Result<()> {
        let buf = memory::alloc(&self.gpu, len)?;
        let mut encoder = self
            .gpu
            .hw
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("backend-wgpu prepare_buffer") });
        for seg in &buf.segs {
            encoder.clear_buffer(seg, 0, None);
        }
        self.gpu.hw.queue.submit([encoder.finish()]);
        self.gpu.wait("prepare_buffer")
    }

    /// Makes now the upload staging ring that large writes and uploads go through (three mapped
    /// buffers of the transfer chunk size, 192 MiB by default, counted as page-locked host
    /// memory), made at the first large write otherwise, so that its creation and wgpu's zero
    /// fill of it can overlap other host work. Does nothing when the ring exists.
    ///
    /// # Errors
    /// `Error::OutOfMemory` or a device error creating the buffers; nothing is kept.
    pub fn prepare_staging(&self) -> Result<()> {
        self.gpu.check("prepare_staging")?;
        staging::prepare_upload(&self.gpu)
    }

    /// Transfers from or to host memory of more than this many bytes go through the staging
    /// rings ([`WgpuBackend::prepare_staging`]); smaller ones through `Queue::write_buffer` or
    /// one staging buffer of their size. A sixteenth of the transfer chunk (4 MiB by default).
    pub fn staged_transfer_min_bytes(&self) -> usize {
        self.gpu.transfer_chunk / staging::DIRECT_FRACTION + 1
    }

    /// Frees what the pool keeps for reuse: freed buffers' segments (kept so that later
    /// allocations of the same size skip buffer creation and wgpu's zero fill) and the last LDE's
    /// twiddle tables (kept so that the next LDE of the same shape and shift skips their upload);
    /// returns the bytes released. Never needed for correctness: an allocation that runs out of
    /// memory empties the pool itself.
    pub fn trim_pool(&self) -> u64 {
        context::lock(&self.gpu.pool).trim()
    }

    /// Bytes the pool keeps for reuse, freed segments and the last LDE's twiddle tables (device
    /// memory held beyond [`Backend::memory`]'s live bytes; live plus pooled never exceeds the
    /// tracker's peak).
    pub fn pooled_bytes(&self) -> u64 {
        context::lock(&self.gpu.pool).bytes()
    }

    /// Whether [`WgpuBackend::time_device`] measures on the device (the adapter offers
    /// `TIMESTAMP_QUERY` and `TIMESTAMP_QUERY_INSIDE_ENCODERS`).
    pub fn has_device_timer(&self) -> bool {
        self.gpu.has_device_timer()
    }

    /// Runs `f`, which queues work on this backend, waits for it, and returns its device time
    /// from timestamps the GPU writes at the start and end of every command encoder the work
    /// submits; `None` when the adapter has no timestamp queries. For benchmarks: work queued
    /// by another thread meanwhile is counted too.
    ///
    /// # Errors
    /// `f`'s error; `Error::InvalidArgument` past 2048 submissions; a device error.
    pub fn time_device(&self, f: impl FnOnce() -> Result<()>) -> Result<Option<DeviceTime>> {
        self.gpu.time_device(f)
    }
}

/// The port behind [`Backend`]: the front has checked every argument (ownership included) before
/// a method here runs.
impl backend_api::RawBackend for WgpuBackend {
    type Buffer = WgpuBuffer;
    type Download = WgpuDownload;
    /// Ordinary host memory. wgpu has no page-locked memory to hand out: a large upload is copied
    /// by every core into the backend's mapped staging ring whatever the source, and a mapped
    /// `MAP_WRITE` buffer is only writable through a write-only guard that borrows it, so it
    /// cannot be a long-lived `&mut [u64]` that a trace builder fills and any call accepts.
    type HostBuffer = Vec<u64>;

    fn info(&self) -> DeviceInfo {
        let live = self.gpu.tracker.counters().live;
        DeviceInfo {
            backend: "wgpu",
            device: format!(
                "{} ({:?}, {:?}, {})",
                self.gpu.hw.info.name,
                self.gpu.hw.info.device_type,
                self.gpu.hw.info.backend,
                if self.gpu.int64() { "native u64 arithmetic" } else { "u32-pair arithmetic" }
            ),
            total_memory: self.gpu.hw.total_memory,
            free_memory: self.gpu.hw.total_memory.saturating_sub(live),
        }
    }

    fn tracker(&self) -> &AllocTracker {
        &self.gpu.tracker
    }

    unsafe fn alloc(&self, len: usize) -> Result<WgpuBuffer> {
        self.gpu.check("alloc")?;
        memory::alloc(&self.gpu, len)
    }

    unsafe fn upload(&self, host: &[u64]) -> Result<WgpuBuffer> {
        self.gpu.check("upload")?;
        memory::upload(&self.gpu, host)
    }

    unsafe fn write(&self, buf: &mut WgpuBuffer, offset: usize, host: &[u64]) -> Result<()> {
        contract::debug_assert_holds("wgpu write", || contract::write(self, buf, offset, host.len()));
        self.gpu.check("write")?;
        memory::write(&self.gpu, buf, offset, host)
    }

    unsafe fn download(&self, buf: &WgpuBuffer, offset: usize, out: &mut [u64]) -> Result<()> {
        contract::debug_assert_holds("wgpu download", || contract::download(self, buf, offset, out.len()));
        self.gpu.check("download")?;
        memory::download(&self.gpu, buf, offset, out)
    }

    unsafe fn queue_download(&self, buf: &WgpuBuffer) -> Result<WgpuDownload> {
        contract::debug_assert_holds("wgpu queue_download", || contract::queue_download(self, buf));
        memory::queue_download(&self.gpu, buf)
    }

    fn synchronize(&self) -> Result<()> {
        self.gpu.wait("synchronize")
    }

    unsafe fn alloc_host(&self, len: usize) -> Result<Vec<u64>> {
        backend_api::host_vec("wgpu", len)
    }

    unsafe fn transpose_in_place(&self, buf: &mut WgpuBuffer, shape: MatrixShape, scratch_cap: usize) -> Result<()> {
        contract::debug_assert_holds("wgpu transpose_in_place", || {
            contract::transpose_in_place(self, buf, shape, scratch_cap)
        });
        self.gpu.check("transpose_in_place")?;
        transpose::transpose_in_place(&self.gpu, buf, shape, scratch_cap)
    }

    unsafe fn batched_copy(&self, src: &WgpuBuffer, dst: &mut WgpuBuffer, copies: &[CopyRange]) -> Result<()> {
        contract::debug_assert_holds("wgpu batched_copy", || contract::batched_copy(self, src, dst, copies));
        self.gpu.check("batched_copy")?;
        copy::batched_copy(&self.gpu, src, dst, copies)
    }

    unsafe fn batched_copy_within(&self, buf: &mut WgpuBuffer, copies: &[CopyRange]) -> Result<()> {
        contract::debug_assert_holds("wgpu batched_copy_within", || contract::batched_copy_within(self, buf, copies));
        self.gpu.check("batched_copy_within")?;
        copy::batched_copy_within(&self.gpu, buf, copies)
    }

    unsafe fn bit_reversed_rows(
        &self,
        src: &WgpuBuffer,
        src_at: usize,
        shape: MatrixShape,
        rows: std::ops::Range<usize>,
        dst: &mut WgpuBuffer,
        dst_at: usize,
    ) -> Result<()> {
        contract::debug_assert_holds("wgpu bit_reversed_rows", || {
            contract::bit_reversed_rows(self, src, src_at, shape, &rows, dst, dst_at)
        });
        self.gpu.check("bit_reversed_rows")?;
        copy::bit_reversed_rows(&self.gpu, src, src_at, shape, rows, dst, dst_at)
    }

    unsafe fn hash_leaves_into(
        &self,
        matrix: &WgpuBuffer,
        shape: MatrixShape,
        spec: &LeafSpec,
        out: &mut WgpuBuffer,
        out_digest: usize,
    ) -> Result<()> {
        contract::debug_assert_holds("wgpu hash_leaves_into", || {
            contract::hash_leaves_into(self, matrix, shape, spec, out, out_digest)
        });
        self.gpu.check("hash_leaves")?;
        hash::hash_leaves_into(&self.gpu, matrix, shape, spec, out, out_digest)
    }

    unsafe fn fri_fold(
        &self,
        input: &WgpuBuffer,
        beta: &[u64],
        addend: Option<(&WgpuBuffer, &[u64])>,
        out: &mut WgpuBuffer,
    ) -> Result<()> {
        contract::debug_assert_holds("wgpu fri_fold", || {
            contract::fri_fold(self, input, beta.len(), addend.map(|(b, g)| (b, g.len())), out)
        });
        self.gpu.check("fri_fold")?;
        open::fri_fold(&self.gpu, input, beta, addend, out)
    }

    unsafe fn row_dot_products(
        &self,
        matrix: &WgpuBuffer,
        shape: MatrixShape,
        coeffs: &[u64],
        out: &mut [u64],
    ) -> Result<()> {
        contract::debug_assert_holds("wgpu row_dot_products", || {
            contract::row_dot_products(self, matrix, shape, coeffs.len(), out.len())
        });
        self.gpu.check("row_dot_products")?;
        open::row_dot_products(&self.gpu, matrix, shape, coeffs, out)
    }

    unsafe fn column_dot_products(
        &self,
        matrix: &WgpuBuffer,
        shape: MatrixShape,
        rows: RowStride,
        weights: &[u64],
        out: &mut [u64],
    ) -> Result<()> {
        contract::debug_assert_holds("wgpu column_dot_products", || {
            contract::column_dot_products(self, matrix, shape, rows, weights.len(), out.len())
        });
        self.gpu.check("column_dot_products")?;
        open::column_dot_products(&self.gpu, matrix, shape, rows, weights, out)
    }

    unsafe fn reduce_openings(
        &self,
        matrix: &WgpuBuffer,
        shape: MatrixShape,
        call: &backend_api::ReductionCall<'_>,
        acc: &mut WgpuBuffer,
    ) -> Result<()> {
        contract::debug_assert_holds("wgpu reduce_openings", || {
            contract::reduce_openings(self, matrix, shape, call, acc)
        });
        self.gpu.check("reduce_openings")?;
        open::reduce_openings(&self.gpu, matrix, shape, call, acc)
    }

    unsafe fn quotient_values(
        &self,
        lde: &WgpuBuffer,
        shape: MatrixShape,
        call: &backend_api::QuotientCall<'_>,
        out: &mut WgpuBuffer,
    ) -> Result<()> {
        contract::debug_assert_holds("wgpu quotient_values", || contract::quotient_values(self, lde, shape, call, out));
        self.gpu.check("quotient_values")?;
        quotient::quotient_values(&self.gpu, lde, shape, call, out)
    }

    unsafe fn merkle_tree_in_place(&self, nodes: &mut WgpuBuffer, tree: TreeShape, hash: HashKind) -> Result<()> {
        contract::debug_assert_holds("wgpu merkle_tree_in_place", || contract::merkle_tree_in_place(self, nodes, tree));
        self.gpu.check("merkle_tree")?;
        merkle::merkle_tree_in_place(&self.gpu, nodes, tree, hash)
    }

    unsafe fn coset_lde_in_place(&self, buf: &mut WgpuBuffer, params: &LdeParams) -> Result<()> {
        contract::debug_assert_holds("wgpu coset_lde_in_place", || contract::coset_lde_in_place(self, buf, params));
        self.gpu.check("coset_lde_in_place")?;
        lde::coset_lde_in_place(&self.gpu, buf, params)
    }

    /// Creates the commit's compute pipelines on several threads
    /// ([`WgpuBackend::prepare_kernels`]); builds the LDE's host twiddle tables; makes the upload
    /// staging ring when the trace is large enough to go through it
    /// ([`WgpuBackend::prepare_staging`]); with `prep.device_bytes`, creates and clears an
    /// LDE-sized buffer into the pool ([`WgpuBackend::prepare_buffer`]). Out of memory for the
    /// ring or the buffer leaves them to the commit.
    unsafe fn prepare(&self, prep: &Preparation, step: &mut dyn FnMut(&str)) -> Result<()> {
        let made = self.prepare_kernels(prep.hash)?;
        for p in &made {
            step(&format!("  pipeline {}:{} {:.1} ms", p.file, p.kernel, p.time.as_secs_f64() * 1e3));
        }
        step(&format!("pipelines ready ({})", made.len()));
        if prep.build_lde_tables() > 0 {
            step("LDE tables built");
        }
        // wgpu has no page-locked host memory: whatever host buffer holds the trace, a large one
        // goes through the upload staging ring. The trace is at most half the LDE (blowup >= 2).
        if prep.lde_elems.saturating_mul(backend_api::ELEM_BYTES) / 2 >= self.staged_transfer_min_bytes() {
            match self.prepare_staging() {
                Ok(()) => step("upload staging ring ready"),
                Err(e) if e.is_out_of_memory() => step(&format!("upload staging ring not made: {e}")),
                Err(e) => return Err(e),
            }
        }
        if prep.device_bytes.is_some() {
            match self.prepare_buffer(prep.lde_elems) {
                Ok(()) => step(&format!("LDE buffer of {} elements pooled", prep.lde_elems)),
                Err(e) if e.is_out_of_memory() => step(&format!("LDE buffer not pooled: {e}")),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// `wgpu-<adapter name>-<vendor>-<device>-<PCI bus>`: the bus id tells two identical GPUs
    /// apart where the driver reports it.
    fn device_key(&self) -> String {
        let a = self.adapter_info();
        format!("wgpu-{}-{:04x}-{:04x}-{}", a.name, a.vendor, a.device, a.device_pci_bus_id)
    }

    fn is_software(&self) -> bool {
        WgpuBackend::is_software(self)
    }
}
