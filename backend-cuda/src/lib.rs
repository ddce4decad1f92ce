//! The CUDA backend: every [`Backend`] operation as NVRTC-compiled kernels on one stream.
//!
//! - **Loads at run time, builds anywhere.** cudarc with dynamic loading: the crate builds with no
//!   CUDA installed, and [`CudaBackend::new`] returns [`Error::BackendUnavailable`] (never a
//!   panic) when the driver, NVRTC or the device is missing.
//! - **Layered.** Driver and NVRTC calls go through cudarc's `result` layer at their call sites;
//!   `driver` holds only what cudarc does not wrap (2D copies, host registration, pool
//!   attributes, NVRTC programs with headers and CUBIN output) and the one function mapping result
//!   codes to [`Error`]. `context`, `module` and `memory` build owning types on it (a
//!   [`CudaBuffer`] frees itself, stream-ordered, on drop; events and the context release
//!   themselves); kernel arguments are typed (`launch`: `#[repr(C)]` parameter blocks through a
//!   borrowing builder); the operation files (`transpose`, `copy`, `hash`, `merkle`, `lde`) only
//!   use those.
//! - **Kernels are files, compiled ahead where possible.** `shaders/cuda/*.cu`. With the
//!   `embedded-kernels` feature (default) and NVRTC present where the crate is built (the CUDA 13
//!   toolkit, or the `nvidia-cuda-nvrtc` wheel's `lib` folder on `LD_LIBRARY_PATH`), the build
//!   script compiles every unit to CUBIN for one architecture per major version from `sm_80` up
//!   that this NVRTC supports (`sm_80`, `sm_90`, `sm_100`, `sm_110`, `sm_120` with NVRTC 13.0;
//!   each runs on its major version's newer minors, `sm_89` on `sm_80`'s) and embeds the images:
//!   a device of those architectures loads its kernels at once, with no NVRTC installed and nothing on disk
//!   ([`embedded_kernels`] says what a binary holds). Otherwise (another architecture, a build
//!   without NVRTC or with the feature off, which the build reports in a `cargo:warning`) they are
//!   compiled by NVRTC for the device's own architecture at first use (the heavy files one kernel
//!   per program), kept on disk in a private cache keyed by source, architecture and NVRTC
//!   version ([`CudaOptions::kernel_cache`] chooses its directory or turns it off; see
//!   [`CudaBackend::prepare_kernels`], and [`prepare_kernel_cache`] to fill it ahead without a
//!   device), and loaded once per context; a compile error carries NVRTC's log.
//! - **One stream, no hidden waits.** Every operation of an instance is queued on one
//!   non-default stream; only calls that return host data (`download`, `wait`, `synchronize`)
//!   block. Small metadata (copy lists, plan moves) travels as kernel parameters, so operations
//!   allocate nothing beyond what the memory model counts.
//! - **Tracked memory.** Every allocation is reserved in the instance's [`AllocTracker`] first and
//!   released when freed, so fault injection and the memory model see the same bytes as on the CPU.
//! - **The in-place transpose as kernels.** The plan's run batches run as one fused gather launch
//!   per pair of batches (each run moves once), with the host schedule cached per shape; the
//!   commit's leaves are hashed beside its block pass (`hash_leaves_then_transpose`).
//! - **The LDE in place, in four passes** at 2^21 -> 2^22: register-blocked radix-16 NTT passes
//!   (1024 threads) over 2^11-row x 8-column shared-memory tiles, each tile's twiddles and coset
//!   factors gathered into shared memory first, each 16-point register window in four-step form
//!   (15 general multiplications, then stages whose twiddles are powers of two); the inverse by
//!   decimation in frequency on the trace's own rows `[0, n)` of the LDE buffer, its last pass
//!   storing position `p` at row `B*p` in ranges of tiles from the top down (`lde`'s module doc
//!   proves the order race-free); the forward by decimation in time reading rows `B*p` for all
//!   `B` replicas; Goldilocks arithmetic on PTX carry chains with lazy reduction (canonical only
//!   where stored last).
//! - **Options, not globals.** The kernel cache and the host upload's overlap are
//!   [`CudaOptions`], fixed when a backend is opened ([`CudaBackend::open`]);
//!   [`CudaBackend::with_options`] gives another handle on the same device with other upload
//!   settings. The library reads no environment variable of its own (only the platform's home and
//!   cache directory variables, to find the default kernel cache); [`CudaOptions::from_env`] reads
//!   the options, for the CLI, benches and suites.

mod context;
mod copy;
mod driver;
mod embedded;
mod hash;
mod host;
mod kernel_cache;
mod kernel_units;
mod launch;
mod lde;
mod memory;
mod merkle;
mod module;
mod open;
mod options;
mod quotient;
mod staging;
mod transpose;

use std::ops::Range;
use std::sync::Arc;

#[cfg(doc)]
use backend_api::Backend;
use backend_api::DeviceBuffer as _;
use backend_api::contract;
use backend_api::{
    AllocTracker, CopyRange, DeviceInfo, Error, HashKind, LdeParams, LeafJob, LeafSpec, MatrixShape, Preparation,
    Result, RowStride, TransferFloor, TreeShape,
};

pub use embedded::EmbeddedKernels;
pub use host::PinnedHost;
pub use kernel_cache::ImageOrigin;
pub use memory::{CudaBuffer, CudaDownload};
pub use module::{KernelCacheReport, KernelPrep, UnitPrep};
pub use options::{
    CudaOptions, KERNEL_CACHE_ENV, KernelCacheSetting, MAX_UPLOAD_GROUPS, QUOTIENT_POINTS, UPLOAD_OVERLAP_MIN_BYTES,
};

use context::Device;

/// The instructions the quotient kernel dispatches per point for `program`
/// ([`backend_api::Backend::quotient_values`]): its arithmetic, with each leaf load (a cell, a
/// value, a selector) read by the instructions that use it and each fold done by the instruction
/// that computes its constraint, where the program allows. The interpreter's time goes with this
/// count, not with the program's length.
pub fn quotient_dispatches(program: &backend_api::quotient::ConstraintProgram) -> usize {
    quotient::lower(program).len()
}

/// The kernel images this binary carries: compiled when the crate was built (the
/// `embedded-kernels` feature, with NVRTC present at build time), for which architectures, by
/// which NVRTC; or why there are none.
pub fn embedded_kernels() -> EmbeddedKernels {
    embedded::summary()
}

/// Parses an architecture as `sm_90` or `90` into its number (`90`).
///
/// # Errors
/// [`Error::InvalidArgument`] for anything else (`compute_90`, an architecture-specific `sm_90a`,
/// a number that is no compute capability), with the accepted forms.
pub fn parse_arch(text: &str) -> Result<i32> {
    let digits = text.strip_prefix("sm_").unwrap_or(text);
    match digits.parse::<i32>() {
        Ok(a) if (10..=999).contains(&a) && digits.bytes().all(|b| b.is_ascii_digit()) => Ok(a),
        _ => Err(Error::InvalidArgument(format!(
            "cuda: {text:?} is not a GPU architecture: expected sm_XX or XX, e.g. sm_90 for compute capability 9.0 \
             (architecture-specific targets such as sm_90a are not used)"
        ))),
    }
}

/// Makes every kernel ready, ahead of any process that runs them, for a device of architecture
/// `arch` (`90` for `sm_90`, [`parse_arch`]) without needing such a device, or any GPU: for each
/// unit, the embedded image when this binary has one for `arch` (nothing to do), else the image
/// from the kernel cache `cache` selects when it is there, else NVRTC compiles it (CUBIN for
/// `sm_XX` when this NVRTC knows it, else PTX for the newest `compute_XX` below, as for a
/// device) and stores it there, on as many threads as the machine has. A process on such a
/// device with the same cache setting then compiles nothing. For a container image: run it in
/// the image's build with the cache directory the containers will use.
///
/// # Errors
/// [`Error::InvalidArgument`] for a relative cache directory or an architecture older than
/// `sm_80` (the kernels use its asynchronous copies); [`Error::BackendUnavailable`] when
/// a unit needs compiling and NVRTC is missing or knows no architecture at or below `arch`;
/// [`Error::KernelCompile`] with NVRTC's log.
pub fn prepare_kernel_cache(arch: i32, cache: &KernelCacheSetting) -> Result<KernelCacheReport> {
    cache.validate()?;
    if arch < kernel_units::EMBED_MIN_ARCH {
        return Err(Error::InvalidArgument(format!(
            "cuda: sm_{arch} is older than the kernels support: they use sm_80's asynchronous copies (cp.async); name \
             sm_80 or newer"
        )));
    }
    let kc = kernel_cache::KernelCache::from_setting(cache);
    let threads = std::thread::available_parallelism().map_or(4, |n| n.get());
    let units = module::prepare_for_arch(&module::Unit::all(), (arch / 10, arch % 10), threads, &kc)?;
    Ok(KernelCacheReport { arch, cache_dir: kc.dir().map(|d| d.to_path_buf()), units, warnings: kc.warnings() })
}

/// The CUDA backend on one device.
pub struct CudaBackend {
    device: Arc<Device>,
    options: CudaOptions,
}

impl std::fmt::Debug for CudaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaBackend")
            .field("ordinal", &self.device.ordinal)
            .field("device", &self.device.name)
            .field("uuid", &self.device.uuid)
            .field("options", &self.options)
            .finish()
    }
}

impl CudaBackend {
    /// Opens CUDA device `ordinal` with its own stream and the default [`CudaOptions`] (the
    /// fastest measured configuration).
    ///
    /// # Errors
    /// As [`CudaBackend::open`].
    pub fn new(ordinal: usize) -> Result<Self> {
        Self::open(ordinal, CudaOptions::default())
    }

    /// Opens CUDA device `ordinal` with its own stream, configured by `options`
    /// ([`CudaOptions::from_env`] reads them from the environment).
    ///
    /// # Errors
    /// [`Error::BackendUnavailable`] when the CUDA driver or NVRTC cannot be loaded, the driver
    /// does not initialise, or there is no such device; [`Error::InvalidArgument`] for options
    /// outside their ranges ([`CudaOptions::validate`]).
    pub fn open(ordinal: usize, options: CudaOptions) -> Result<Self> {
        options.validate()?;
        let cache = kernel_cache::KernelCache::from_setting(&options.kernel_cache);
        let device = Arc::new(Device::open(ordinal, cache)?);
        Ok(Self { device, options })
    }

    /// Another handle on the same device, stream, memory tracker and compiled kernels, configured
    /// by `options`: buffers of either handle may be passed to the other. Cheap (no context,
    /// stream or compile), so a measurement or a test can run several upload settings on one
    /// device.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for options outside their ranges, or a
    /// [`CudaOptions::kernel_cache`] other than this handle's (the device's kernels come from the
    /// cache chosen when it was opened).
    pub fn with_options(&self, options: CudaOptions) -> Result<Self> {
        options.validate()?;
        if options.kernel_cache != self.options.kernel_cache {
            return Err(Error::InvalidArgument(format!(
                "cuda: with_options cannot change the kernel cache ({:?} -> {:?}): it is fixed when the device is \
                 opened; open another backend instead",
                self.options.kernel_cache, options.kernel_cache
            )));
        }
        Ok(Self { device: Arc::clone(&self.device), options })
    }

    /// How many CUDA devices the driver reports (ordinals `0..count`).
    ///
    /// # Errors
    /// [`Error::BackendUnavailable`] when the CUDA driver or NVRTC cannot be loaded or the driver
    /// does not initialise.
    pub fn device_count() -> Result<usize> {
        context::device_count()
    }

    /// The device ordinal this backend opened.
    pub fn ordinal(&self) -> usize {
        self.device.ordinal
    }

    /// The device's UUID as `nvidia-smi` prints it (`GPU-xxxxxxxx-...`): the same in every
    /// process, whatever `CUDA_VISIBLE_DEVICES` makes its ordinal.
    pub fn uuid(&self) -> &str {
        &self.device.uuid
    }

    /// The options this handle runs with.
    pub fn options(&self) -> CudaOptions {
        self.options.clone()
    }

    /// The device's compute capability, e.g. `(9, 0)`.
    pub fn compute_capability(&self) -> (i32, i32) {
        self.device.capability
    }

    /// Free and total device memory now (`cuMemGetInfo`), in bytes.
    ///
    /// # Errors
    /// A driver error.
    pub fn mem_get_info(&self) -> Result<(usize, usize)> {
        self.device.bind()?;
        cudarc::driver::result::mem_get_info().map_err(driver::err("cuMemGetInfo"))
    }

    /// The most bytes the stream-ordered allocator has held from the device since the last call
    /// (`CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH` of the default pool), then resets that mark.
    ///
    /// # Errors
    /// A driver error.
    pub fn pool_reserved_high(&self) -> Result<u64> {
        self.device.bind()?;
        // SAFETY: the device's live default pool, with its context current.
        unsafe { driver::pool_reserved_high(self.device.pool()) }
    }

    /// Compiles (or reads from the on-disk kernel cache) and loads, in parallel, every kernel a
    /// commit with leaf hash `hash` launches, instead of one by one
    /// at first launch; returns what each compiled unit cost. Kernels already loaded are skipped,
    /// so a second call returns an empty list.
    ///
    /// The cache is the one [`CudaOptions::kernel_cache`] chose when the device was opened (by
    /// default the platform's cache directory, `~/.cache/stark-commit/kernels` on Linux); see
    /// [`CudaBackend::kernel_cache_dir`].
    ///
    /// # Errors
    /// [`Error::KernelCompile`] with NVRTC's log, or a driver error loading an image.
    pub fn prepare_kernels(&self, hash: HashKind) -> Result<Vec<KernelPrep>> {
        use module::{Source, Unit};
        let mut units = vec![
            Unit::of(Source::Lde, lde::pass_kernel(false, false)),
            Unit::of(Source::Lde, lde::pass_kernel(true, false)),
            Unit::of(Source::Lde, lde::pass_kernel(false, true)),
            Unit::of(Source::Lde, lde::pass_kernel(true, true)),
        ];
        for layout in [backend_api::LeafLayout::Rows, backend_api::LeafLayout::LambdaVmPairs] {
            units.push(Unit::of(Source::Hash, hash::kernel_name(hash, layout, 0)));
        }
        // The commit hashes `rows` leaves beside the transpose's block pass (except Poseidon2's).
        units.extend(hash::block_pass_kernel(hash).map(|(kernel, _)| Unit::of(Source::Hash, kernel)));
        units.extend([Source::Merkle, Source::Transpose, Source::Copy].map(|s| Unit { source: s, kernel: None }));
        let threads = std::thread::available_parallelism().map_or(4, |n| n.get());
        self.device.bind()?;
        self.device.prepare(&units, threads)
    }

    /// [`CudaBackend::prepare_kernels`] for every kernel this backend can launch (every unit of
    /// every kernel file, both hashes and layouts): compiles what is neither embedded nor in the
    /// kernel cache, stores it there, and loads it. What `prover prepare` runs on a machine with
    /// the device.
    ///
    /// # Errors
    /// As [`CudaBackend::prepare_kernels`].
    pub fn prepare_all_kernels(&self) -> Result<Vec<KernelPrep>> {
        let threads = std::thread::available_parallelism().map_or(4, |n| n.get());
        self.device.bind()?;
        self.device.prepare(&module::Unit::all(), threads)
    }

    /// Allocates `len` page-locked host elements (zeroed) that transfers read and write at bus
    /// speed: fill it, then [`Backend::upload`] / [`Backend::write`] a slice of it (a direct
    /// copy), or [`CudaBackend::upload_pinned`]. Taken from the device's pool of page-locked
    /// blocks when one fits, given back to it on drop ([`CudaBackend::trim_host_pool`] frees the
    /// pool). Unlike [`Backend::alloc_host`], never falls back to pageable memory.
    ///
    /// # Errors
    /// [`Error::SizeOverflow`]; [`Error::HostOutOfMemory`] when the host cannot give or lock that
    /// much memory (more than it has available, a locked-memory limit, or the fault injected at
    /// [`backend_api::FaultSite::PinnedHostAlloc`]); nothing stays allocated.
    pub fn alloc_pinned(&self, len: usize) -> Result<PinnedHost> {
        PinnedHost::take(&self.device, len, host::Lock::Required, true)
    }

    /// Frees the page-locked host blocks the device's pool keeps for reuse (those of dropped
    /// [`PinnedHost`] buffers and finished downloads).
    ///
    /// # Errors
    /// A driver error binding the context.
    pub fn trim_host_pool(&self) -> Result<()> {
        self.device.bind()?;
        self.device.host_pool.release(&self.device);
        Ok(())
    }

    /// Bytes of page-locked host blocks the device's pool keeps for reuse now.
    pub fn host_pool_bytes(&self) -> usize {
        self.device.host_pool.pooled_bytes()
    }

    /// Allocates a device buffer and queues a direct copy of `host` into it. Writing to `host`
    /// (through `DerefMut`) or dropping it waits for that copy first.
    ///
    /// # Errors
    /// As [`Backend::alloc`], or a driver error (the buffer is then freed).
    pub fn upload_pinned(&self, host: &mut PinnedHost) -> Result<CudaBuffer> {
        if !host.belongs_to(&self.device) {
            return Err(Error::InvalidArgument("a pinned buffer of another CudaBackend instance was passed".into()));
        }
        let buf = CudaBuffer::alloc(&self.device, host.len())?;
        if !host.is_empty() {
            self.device.bind()?;
            // SAFETY: `buf` holds `host.len()` elements; `host` is page-locked and is neither
            // written nor freed before the event recorded below completes (`PinnedHost`).
            unsafe { cudarc::driver::result::memcpy_htod_async(buf.ptr(), &host[..], self.device.stream()) }
                .map_err(driver::err("cuMemcpyHtoDAsync"))?;
            host.mark_pending()?;
        }
        Ok(buf)
    }

    /// Copies all of `buf` into `host` (same length) after the work queued before, at bus speed,
    /// and returns when `host` holds it.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`], or a driver error.
    pub fn download_pinned(&self, buf: &CudaBuffer, host: &mut PinnedHost) -> Result<()> {
        self.check_owned(buf, "download_pinned")?;
        if !host.belongs_to(&self.device) {
            return Err(Error::InvalidArgument("a pinned buffer of another CudaBackend instance was passed".into()));
        }
        if buf.len() != host.len() {
            return Err(Error::LengthMismatch { what: "download_pinned", expected: buf.len(), actual: host.len() });
        }
        host.wait()?;
        if !host.is_empty() {
            self.device.bind()?;
            // SAFETY: `buf` holds `host.len()` elements; `host` is page-locked, exclusively
            // borrowed, and the copy completes before this returns (`wait` below).
            unsafe { cudarc::driver::result::memcpy_dtoh_async(&mut host[..], buf.ptr(), self.device.stream()) }
                .map_err(driver::err("cuMemcpyDtoHAsync"))?;
            host.mark_pending()?;
            host.wait()?;
        }
        Ok(())
    }

    /// Page-locked host bytes this process holds through the CUDA backend now: staging rings,
    /// [`PinnedHost`] buffers and the pools' blocks (per device: [`Backend::memory`]'s
    /// `pinned_host`).
    pub fn pinned_host_bytes() -> usize {
        host::pinned_host_bytes()
    }

    /// Allocates now the small page-locked staging ring that large uploads and downloads from
    /// ordinary host memory go through (made at the first large transfer otherwise; about 60 ms
    /// of page locking on an H200 host), so that it can overlap other host work. When the host
    /// refuses page-locked memory, transfers use the driver's pageable path, with one warning.
    ///
    /// # Errors
    /// A driver error binding the context.
    pub fn prepare_staging(&self) -> Result<()> {
        self.device.bind()?;
        self.device.staging.ensure(&self.device.tracker);
        Ok(())
    }

    /// Transfers from or to ordinary host memory of at least this many bytes go through the
    /// page-locked staging ring ([`CudaBackend::prepare_staging`]); smaller ones go straight
    /// through the driver, so a program that moves nothing this large need not make the ring.
    pub const STAGED_TRANSFER_MIN_BYTES: usize = staging::STAGE_MIN_BYTES;

    /// Grows the device's stream-ordered memory pool by allocating `bytes` and freeing them, so
    /// that later allocations up to that many bytes in all are served from memory the pool
    /// already holds instead of mapping new device memory inside the work that asks for it (the
    /// first 5.3 GB of a process cost ~20 ms more than later ones on an H200). The pool keeps
    /// freed memory (its release threshold is set to unlimited when the device is opened) until
    /// [`CudaBackend::trim_pool`], so the driver reports those bytes as used meanwhile. Returns
    /// when the pool holds them. The bytes are not counted by the allocation tracker: no buffer
    /// exists afterwards.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] when the device cannot provide `bytes` now (the pool keeps nothing
    /// new then), or a driver error.
    pub fn prepare_memory(&self, bytes: usize) -> Result<()> {
        use cudarc::driver::result as cu;
        if bytes == 0 {
            return Ok(());
        }
        self.device.bind()?;
        let stream = self.device.stream();
        // SAFETY: the stream is live for the life of the device, whose context is current; the
        // allocation is freed just below, in stream order, and nothing uses it.
        let ptr = unsafe { cu::malloc_async(stream, bytes) }.map_err(|e| match e.0 {
            cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => {
                let (free, total) = cu::mem_get_info().unwrap_or((0, 0));
                Error::OutOfMemory { backend: driver::BACKEND, requested: bytes, free, total }
            }
            code => driver::error_from("cuMemAllocAsync", code),
        })?;
        // SAFETY: `ptr` was allocated on this stream just above and is not used by anything.
        unsafe { cu::free_async(ptr, stream) }.map_err(driver::err("cuMemFreeAsync"))?;
        self.device.synchronize()
    }

    /// The on-disk kernel cache directory this backend's device uses, `None` when caching is off
    /// ([`KernelCacheSetting::Off`], or the default with no home directory to put it in).
    pub fn kernel_cache_dir(&self) -> Option<&std::path::Path> {
        self.device.kernel_cache.dir()
    }

    /// Frees the last LDE's twiddle tables, which the device keeps between calls (40 MB at
    /// 2^21 -> 2^22 rows), waits for the stream, then returns the stream-ordered allocator's unused
    /// memory to the device (freed buffers are otherwise kept for reuse), so that `cuMemGetInfo`
    /// shows only live allocations.
    ///
    /// # Errors
    /// A device error.
    pub fn trim_pool(&self) -> Result<()> {
        self.device.release_lde_tables();
        self.device.synchronize()?;
        // SAFETY: the device's live default pool, with its context current (bound by
        // `synchronize`); trimming keeps the memory of live allocations.
        unsafe { cudarc::driver::result::mem_pool::trim_to(self.device.pool(), 0) }
            .map_err(driver::err("cuMemPoolTrimTo"))
    }

    /// The ownership check of the checked front, for the inherent methods that take a buffer.
    fn check_owned(&self, buf: &CudaBuffer, what: &'static str) -> Result<()> {
        backend_api::validate::owned(&self.device.tracker, buf.tracker(), "backend_cuda::CudaBackend", what)
    }
}

/// The port behind [`Backend`]: the front has checked every argument (ownership included) before
/// a method here runs.
impl backend_api::RawBackend for CudaBackend {
    type Buffer = CudaBuffer;
    type Download = CudaDownload;
    type HostBuffer = PinnedHost;

    fn info(&self) -> DeviceInfo {
        let free = self.mem_get_info().map(|(f, _)| f).unwrap_or(0);
        DeviceInfo {
            backend: driver::BACKEND,
            device: self.device.name.clone(),
            total_memory: self.device.total_memory,
            free_memory: free,
        }
    }

    fn tracker(&self) -> &AllocTracker {
        &self.device.tracker
    }

    unsafe fn alloc(&self, len: usize) -> Result<CudaBuffer> {
        CudaBuffer::alloc(&self.device, len)
    }

    unsafe fn upload(&self, host: &[u64]) -> Result<CudaBuffer> {
        memory::upload(&self.device, host)
    }

    unsafe fn write(&self, buf: &mut CudaBuffer, offset: usize, host: &[u64]) -> Result<()> {
        contract::debug_assert_holds("cuda write", || contract::write(self, buf, offset, host.len()));
        memory::write(buf, offset, host)
    }

    /// Page-locked memory from the device's pool; when the host refuses to lock memory, pageable
    /// memory with one warning (see [`PinnedHost::is_page_locked`]).
    unsafe fn alloc_host(&self, len: usize) -> Result<PinnedHost> {
        PinnedHost::take(&self.device, len, host::Lock::Preferred, true)
    }

    unsafe fn download(&self, buf: &CudaBuffer, offset: usize, out: &mut [u64]) -> Result<()> {
        contract::debug_assert_holds("cuda download", || contract::download(self, buf, offset, out.len()));
        memory::download(buf, offset, out)
    }

    unsafe fn queue_download(&self, buf: &CudaBuffer) -> Result<CudaDownload> {
        contract::debug_assert_holds("cuda queue_download", || contract::queue_download(self, buf));
        memory::queue_download(buf)
    }

    fn synchronize(&self) -> Result<()> {
        self.device.synchronize()
    }

    unsafe fn transpose_in_place(&self, buf: &mut CudaBuffer, shape: MatrixShape, scratch_cap: usize) -> Result<()> {
        contract::debug_assert_holds("cuda transpose_in_place", || {
            contract::transpose_in_place(self, buf, shape, scratch_cap)
        });
        buf.settle_readers()?;
        transpose::transpose_in_place(&self.device, buf, shape, scratch_cap)
    }

    unsafe fn batched_copy(&self, src: &CudaBuffer, dst: &mut CudaBuffer, copies: &[CopyRange]) -> Result<()> {
        contract::debug_assert_holds("cuda batched_copy", || contract::batched_copy(self, src, dst, copies));
        dst.settle_readers()?;
        copy::batched_copy(&self.device, src, dst, copies)
    }

    unsafe fn batched_copy_within(&self, buf: &mut CudaBuffer, copies: &[CopyRange]) -> Result<()> {
        contract::debug_assert_holds("cuda batched_copy_within", || contract::batched_copy_within(self, buf, copies));
        buf.settle_readers()?;
        copy::batched_copy_within(&self.device, buf, copies)
    }

    unsafe fn bit_reversed_rows(
        &self,
        src: &CudaBuffer,
        src_at: usize,
        shape: MatrixShape,
        rows: Range<usize>,
        dst: &mut CudaBuffer,
        dst_at: usize,
    ) -> Result<()> {
        contract::debug_assert_holds("cuda bit_reversed_rows", || {
            contract::bit_reversed_rows(self, src, src_at, shape, &rows, dst, dst_at)
        });
        dst.settle_readers()?;
        copy::bit_reversed_rows(&self.device, src, src_at, shape, rows, dst, dst_at)
    }

    unsafe fn hash_leaves_into(
        &self,
        matrix: &CudaBuffer,
        shape: MatrixShape,
        spec: &LeafSpec,
        out: &mut CudaBuffer,
        out_digest: usize,
    ) -> Result<()> {
        contract::debug_assert_holds("cuda hash_leaves_into", || {
            contract::hash_leaves_into(self, matrix, shape, spec, out, out_digest)
        });
        out.settle_readers()?;
        hash::hash_leaves_into(&self.device, matrix, shape, spec, out, out_digest)
    }

    unsafe fn hash_leaves_then_transpose(
        &self,
        buf: &mut CudaBuffer,
        shape: MatrixShape,
        jobs: &mut [LeafJob<'_, CudaBuffer>],
        scratch_cap: usize,
    ) -> Result<()> {
        contract::debug_assert_holds("cuda hash_leaves_then_transpose", || {
            contract::hash_leaves_then_transpose(self, buf, shape, jobs, scratch_cap)
        });
        // A buffer a download still reads (the commit's host copy) has its leaves hashed first,
        // beside the download, and is transposed once the download is done, instead of hashing
        // each block beside the transpose's move of the block before it, which would wait for the
        // whole download.
        if buf.has_readers() {
            // SAFETY: this method's contract is that function's.
            return unsafe { backend_api::leaves_then_transpose_in_turn(self, buf, shape, jobs, scratch_cap) };
        }
        for job in jobs.iter() {
            job.out.settle_readers()?;
        }
        let fused =
            hash::BlockPassLeaves::new(&jobs.iter().map(|j| (j.spec, &*j.out, j.out_digest)).collect::<Vec<_>>());
        match fused {
            Some(leaves) => transpose::transpose_hashing(&self.device, buf, shape, scratch_cap, Some(&leaves)),
            // SAFETY: this method's contract is that function's.
            None => unsafe { backend_api::leaves_then_transpose_in_turn(self, buf, shape, jobs, scratch_cap) },
        }
    }

    unsafe fn reduce_openings(
        &self,
        matrix: &CudaBuffer,
        shape: MatrixShape,
        call: &backend_api::ReductionCall<'_>,
        acc: &mut CudaBuffer,
    ) -> Result<()> {
        contract::debug_assert_holds("cuda reduce_openings", || {
            contract::reduce_openings(self, matrix, shape, call, acc)
        });
        acc.settle_readers()?;
        open::reduce_openings(&self.device, matrix, shape, call, acc)
    }

    unsafe fn quotient_values(
        &self,
        lde: &CudaBuffer,
        shape: MatrixShape,
        call: &backend_api::QuotientCall<'_>,
        out: &mut CudaBuffer,
    ) -> Result<()> {
        contract::debug_assert_holds("cuda quotient_values", || contract::quotient_values(self, lde, shape, call, out));
        out.settle_readers()?;
        quotient::quotient_values(&self.device, self.options.quotient_points as usize, lde, shape, call, out)
    }

    unsafe fn fri_fold(
        &self,
        input: &CudaBuffer,
        beta: &[u64],
        addend: Option<(&CudaBuffer, &[u64])>,
        out: &mut CudaBuffer,
    ) -> Result<()> {
        contract::debug_assert_holds("cuda fri_fold", || {
            contract::fri_fold(self, input, beta.len(), addend.map(|(b, g)| (b, g.len())), out)
        });
        out.settle_readers()?;
        open::fri_fold(&self.device, input, beta, addend, out)
    }

    unsafe fn row_dot_products(
        &self,
        matrix: &CudaBuffer,
        shape: MatrixShape,
        coeffs: &[u64],
        out: &mut [u64],
    ) -> Result<()> {
        contract::debug_assert_holds("cuda row_dot_products", || {
            contract::row_dot_products(self, matrix, shape, coeffs.len(), out.len())
        });
        open::row_dot_products(&self.device, matrix, shape, coeffs, out)
    }

    unsafe fn column_dot_products(
        &self,
        matrix: &CudaBuffer,
        shape: MatrixShape,
        rows: RowStride,
        weights: &[u64],
        out: &mut [u64],
    ) -> Result<()> {
        contract::debug_assert_holds("cuda column_dot_products", || {
            contract::column_dot_products(self, matrix, shape, rows, weights.len(), out.len())
        });
        open::column_dot_products(&self.device, matrix, shape, rows, weights, out)
    }

    unsafe fn merkle_tree_in_place(&self, nodes: &mut CudaBuffer, tree: TreeShape, hash: HashKind) -> Result<()> {
        contract::debug_assert_holds("cuda merkle_tree_in_place", || contract::merkle_tree_in_place(self, nodes, tree));
        nodes.settle_readers()?;
        merkle::merkle_tree_in_place(&self.device, nodes, tree, hash)
    }

    unsafe fn coset_lde_in_place(&self, buf: &mut CudaBuffer, params: &LdeParams) -> Result<()> {
        contract::debug_assert_holds("cuda coset_lde_in_place", || contract::coset_lde_in_place(self, buf, params));
        buf.settle_readers()?;
        lde::coset_lde_in_place(&self.device, buf, params)
    }

    /// From page-locked memory ([`Backend::alloc_host`], or any slice inside a [`PinnedHost`]) the
    /// upload overlaps the LDE: the columns are split into up to [`CudaOptions::upload_groups`]
    /// groups of whole 8-column tiles, each copied by `cuMemcpy2DAsync` on the device's copy
    /// stream while the compute stream extends the groups already copied. A pageable trace, one
    /// smaller than [`CudaOptions::upload_overlap_min_bytes`], `upload_groups` 1 or fewer than 9
    /// columns take the default route ([`Backend::write`], then [`Backend::coset_lde_in_place`]).
    /// Returns once the copies are done (the host slice is free again); the LDE may still run.
    unsafe fn coset_lde_from_host(&self, buf: &mut CudaBuffer, trace: &[u64], params: &LdeParams) -> Result<()> {
        contract::debug_assert_holds("cuda coset_lde_from_host", || {
            contract::coset_lde_from_host(self, buf, trace.len(), params)
        });
        buf.settle_readers()?;
        lde::coset_lde_from_host(&self.device, &self.options, buf, trace, params)
    }

    /// On the overlapped route of [`Backend::coset_lde_from_host`] each column group's LDE goes
    /// down on the device's download stream as soon as its launches have run, while the next
    /// groups are uploaded and extended; the buffer keeps the download as a reader, so the work
    /// queued on it next waits for the copy only where it writes (the commit's leaves run beside
    /// it, its transpose after). Elsewhere, the LDE and then [`Backend::queue_download`].
    unsafe fn coset_lde_from_host_and_download(
        &self,
        buf: &mut CudaBuffer,
        trace: &[u64],
        params: &LdeParams,
    ) -> Result<CudaDownload> {
        contract::debug_assert_holds("cuda coset_lde_from_host_and_download", || {
            contract::coset_lde_from_host(self, buf, trace.len(), params)
        });
        buf.settle_readers()?;
        lde::coset_lde_from_host_and_download(&self.device, &self.options, buf, trace, params)
    }

    /// The first inverse pass reads `trace` where it is and writes the LDE buffer's first rows,
    /// so the trace is never copied into the LDE buffer first (the default's batched copy, 2.5 ms
    /// of a 2^21 x 316 trace on an H200); the rest is the in-place LDE.
    unsafe fn coset_lde(&self, trace: &CudaBuffer, params: &LdeParams) -> Result<CudaBuffer> {
        contract::debug_assert_holds("cuda coset_lde", || contract::coset_lde(self, trace, params));
        lde::coset_lde_from_trace(&self.device, trace, params)
    }

    /// The inverse NTT runs in place in `trace`'s buffer, its last pass storing the LDE buffer's
    /// rows `B*p` in one launch (in place, that pass runs as a dozen launches from the top down,
    /// the last few too small to fill the device).
    unsafe fn coset_lde_owned(&self, trace: CudaBuffer, params: &LdeParams) -> Result<CudaBuffer> {
        contract::debug_assert_holds("cuda coset_lde_owned", || contract::coset_lde(self, &trace, params));
        trace.settle_readers()?;
        lde::coset_lde_owned(&self.device, trace, params)
    }

    /// Compiles (or reads from the kernel cache) the kernels a commit with `prep.hash` launches,
    /// in parallel ([`CudaBackend::prepare_kernels`]); builds the LDE's host twiddle tables;
    /// page-locks the staging ring when a pageable upload (the trace and the tables) is large
    /// enough to go through it ([`CudaBackend::prepare_staging`]); grows the memory pool by
    /// `prep.device_bytes` ([`CudaBackend::prepare_memory`]).
    unsafe fn prepare(&self, prep: &Preparation, step: &mut dyn FnMut(&str)) -> Result<()> {
        let units = self.prepare_kernels(prep.hash)?;
        for u in &units {
            step(&format!(
                "  kernel {} {:?}: image {:.1} ms, load {:.1} ms, {} B",
                u.unit,
                u.origin,
                u.image_time.as_secs_f64() * 1e3,
                u.load_time.as_secs_f64() * 1e3,
                u.image_bytes
            ));
        }
        let count = |o: ImageOrigin| units.iter().filter(|u| u.origin == o).count();
        step(&format!(
            "kernels ready ({} units: {} embedded, {} from the cache, {} compiled)",
            units.len(),
            count(ImageOrigin::Embedded),
            count(ImageOrigin::Cache),
            count(ImageOrigin::Compiled)
        ));
        let tables = prep.build_lde_tables();
        if prep.lde.is_some() {
            step("LDE tables built");
        }
        if prep.pageable_upload_bytes + tables >= Self::STAGED_TRANSFER_MIN_BYTES {
            self.prepare_staging()?;
            step("staging ring ready");
        }
        if let Some(bytes) = prep.device_bytes {
            // Only a head start: a device that cannot give the bytes now leaves the growth to the
            // commit, whose own allocations then decide.
            match self.prepare_memory(bytes) {
                Ok(()) => step(&format!("memory pool grown by {bytes} B")),
                Err(e) if e.is_out_of_memory() => step(&format!("memory pool not grown: {e}")),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// `cuda-<device UUID>`: the same in every process, different for two GPUs of one model.
    fn device_key(&self) -> String {
        format!("cuda-{}", self.uuid())
    }

    /// Page-locked host <-> device copies of `data` ([`CudaBackend::upload_pinned`],
    /// [`CudaBackend::download_pinned`]), the median of three each.
    fn transfer_floor(&self, data: &[u64]) -> Result<Option<TransferFloor>> {
        let mut pinned = self.alloc_pinned(data.len())?;
        pinned.copy_from_slice(data);
        let (mut h2d, mut d2h) = (Vec::new(), Vec::new());
        for _ in 0..3 {
            self.device.synchronize()?;
            let t = std::time::Instant::now();
            let buf = self.upload_pinned(&mut pinned)?;
            self.device.synchronize()?;
            h2d.push(t.elapsed().as_secs_f64());
            let t = std::time::Instant::now();
            self.download_pinned(&buf, &mut pinned)?;
            d2h.push(t.elapsed().as_secs_f64());
        }
        let mid = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[1]
        };
        Ok(Some(TransferFloor {
            what: "page-locked host <-> device".into(),
            h2d_seconds: mid(h2d),
            d2h_seconds: mid(d2h),
        }))
    }
}

#[cfg(test)]
mod tests;
