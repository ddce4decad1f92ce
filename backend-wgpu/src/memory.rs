//! Device buffers (lists of segments), allocation through the tracker, upload and download.
//!
//! A [`WgpuBuffer`] of `len` elements is `ceil(len / S)` wgpu buffers ("segments") of `S`
//! elements each (the last one shorter), `S` the largest power of two the adapter can bind as
//! one storage buffer (`Gpu::seg_elems`). Kernels see segments through windows (see
//! `context::Space`), so one device buffer may be far larger than the binding limit.
//!
//! Host transfers: small ones directly, large ones through the staging rings of `staging`,
//! whose bytes count as page-locked host memory, not in the tracker's `live`.
//!
//! Freed segments go to a pool and are reused by later allocations of the same size, as CUDA's
//! stream-ordered pool does: creating and destroying a 1 GiB wgpu buffer costs tens of
//! milliseconds of driver time, and wgpu zero-fills every new buffer at its first use. The pool
//! only ever holds what was live before, so live plus pooled bytes never exceed the tracker's
//! peak; an allocation that fails for lack of memory empties the pool and tries once more, and
//! [`crate::WgpuBackend::trim_pool`] empties it on demand.
//!
//! The pool also keeps the last kernel table freed under a key ([`cached_table`]: the LDE's
//! twiddle tables, 40 MB at 2^21 -> 2^22 rows), so that the next call with the same key skips the
//! upload. Like a freed segment it is pooled, not live, until it is taken again.

use std::sync::Arc;

use backend_api::{AllocTracker, DeviceBuffer, Error, PendingDownload, Reserved, Result, validate};

use crate::context::{Gpu, NAME, lock};
use crate::staging;

/// An owned device buffer of `u64` elements: one or more wgpu buffers, returned to the pool
/// (segments, keyed tables) or freed (other tables) on drop.
pub struct WgpuBuffer {
    gpu: Arc<Gpu>,
    pub(crate) segs: Vec<wgpu::Buffer>,
    len: usize,
    /// The buffer's bytes in the tracker, given back on drop (`None` while the buffer is being
    /// built: its reservation is then refused apart).
    mark: Option<Reserved>,
    /// Where the wgpu buffers go on drop.
    home: Home,
}

/// Where a [`WgpuBuffer`]'s wgpu buffers go when it is dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Home {
    /// Freed (a table without a key).
    Free,
    /// The pool's free segments ([`alloc`]).
    Segments,
    /// The pool's table slot, under this key ([`cached_table`]).
    Table(TableKey),
}

/// What a kernel table's contents are a function of: for the LDE's twiddle tables,
/// `(log2 n, log2 B, coset shift)`.
pub(crate) type TableKey = (u32, u32, u64);

/// Freed segments by size in bytes, and the last keyed table freed.
#[derive(Default)]
pub(crate) struct Pool {
    free: std::collections::HashMap<u64, Vec<wgpu::Buffer>>,
    table: Option<(TableKey, wgpu::Buffer)>,
    bytes: u64,
}

impl Pool {
    fn take(&mut self, size: u64) -> Option<wgpu::Buffer> {
        let b = self.free.get_mut(&size)?.pop()?;
        self.bytes -= size;
        Some(b)
    }

    fn put(&mut self, b: wgpu::Buffer) {
        self.bytes += b.size();
        self.free.entry(b.size()).or_default().push(b);
    }

    /// The table kept under `key`, if it is the one the pool holds.
    fn take_table(&mut self, key: TableKey) -> Option<wgpu::Buffer> {
        if self.table.as_ref()?.0 != key {
            return None;
        }
        let (_, b) = self.table.take()?;
        self.bytes -= b.size();
        Some(b)
    }

    /// Keeps `b` as the table under `key`, dropping the one kept before.
    fn put_table(&mut self, key: TableKey, b: wgpu::Buffer) {
        self.bytes += b.size();
        if let Some((_, old)) = self.table.replace((key, b)) {
            self.bytes -= old.size();
        }
    }

    /// Drops every pooled segment and the kept table (wgpu frees each once queued work using it
    /// has finished); returns the bytes released.
    pub(crate) fn trim(&mut self) -> u64 {
        self.free.clear();
        self.table = None;
        std::mem::take(&mut self.bytes)
    }

    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl std::fmt::Debug for WgpuBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WgpuBuffer").field("len", &self.len).field("segments", &self.segs.len()).finish()
    }
}

impl DeviceBuffer for WgpuBuffer {
    fn len(&self) -> usize {
        self.len
    }

    fn tracker(&self) -> &AllocTracker {
        &self.gpu.tracker
    }
}

impl Drop for WgpuBuffer {
    fn drop(&mut self) {
        // A pooled segment may be handed out while queued work still uses it: the new owner's
        // work is submitted later on the same queue, so it runs after. Dropped handles are freed
        // by wgpu once queued work that uses them has finished.
        match self.home {
            Home::Free => {}
            Home::Segments => {
                let mut pool = lock(&self.gpu.pool);
                for seg in self.segs.drain(..) {
                    pool.put(seg);
                }
            }
            Home::Table(key) => {
                if let Some(seg) = self.segs.pop() {
                    lock(&self.gpu.pool).put_table(key, seg);
                }
            }
        }
        self.segs.clear();
        if let Some(mark) = self.mark.take() {
            // The mark was reserved in this buffer's own tracker.
            let _ = self.gpu.tracker.release(mark);
        }
    }
}

impl WgpuBuffer {
    /// The segment holding element `i`, and `i`'s offset in it.
    fn locate(&self, i: usize) -> (usize, usize) {
        (i >> self.gpu.hw.seg_shift, i & (self.gpu.seg_elems() - 1))
    }

    /// `[start, start + len)` as (segment, offset in segment, elements) pieces.
    pub(crate) fn pieces(&self, start: usize, len: usize) -> Vec<(usize, usize, usize)> {
        let mut out = Vec::new();
        let mut at = start;
        let end = start + len;
        while at < end {
            let (s, o) = self.locate(at);
            let n = (self.gpu.seg_elems() - o).min(end - at);
            out.push((s, o, n));
            at += n;
        }
        out
    }

    /// Queues on `encoder` the copy of elements `[start, start + len)` into `staging` from its
    /// first byte on, one `copy_buffer_to_buffer` per segment the range covers.
    pub(crate) fn copy_to_staging(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        start: usize,
        len: usize,
        staging: &wgpu::Buffer,
    ) {
        let mut at = 0;
        for (s, o, m) in self.pieces(start, len) {
            encoder.copy_buffer_to_buffer(
                &self.segs[s],
                (o * 8) as u64,
                staging,
                (at * 8) as u64,
                Some((m * 8) as u64),
            );
            at += m;
        }
    }

    /// Queues on `encoder` the copy of `staging`'s first `len` elements into elements
    /// `[start, start + len)`, one `copy_buffer_to_buffer` per segment the range covers.
    pub(crate) fn copy_from_staging(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        staging: &wgpu::Buffer,
        start: usize,
        len: usize,
    ) {
        let mut at = 0;
        for (s, o, m) in self.pieces(start, len) {
            encoder.copy_buffer_to_buffer(
                staging,
                (at * 8) as u64,
                &self.segs[s],
                (o * 8) as u64,
                Some((m * 8) as u64),
            );
            at += m;
        }
    }
}

/// Allocates `len` elements (contents unspecified).
///
/// # Errors
/// [`Error::SizeOverflow`]; [`Error::OutOfMemory`] at once for more bytes than the device has
/// (so that no such buffer is built segment by segment before the device runs out), or when a
/// segment cannot be made; an injected fault. Nothing stays reserved, and the peak does not count
/// a refused allocation.
pub(crate) fn alloc(gpu: &Arc<Gpu>, len: usize) -> Result<WgpuBuffer> {
    let bytes = validate::alloc_bytes(len)?;
    let total = gpu.hw.total_memory;
    if total > 0 && bytes > total {
        let free = total.saturating_sub(gpu.tracker.counters().live);
        return Err(Error::OutOfMemory { backend: NAME, requested: bytes, free, total });
    }
    let reserved = gpu.tracker.reserve(bytes)?;
    // Until every segment is made the buffer holds no reserved bytes: dropping it returns the
    // segments made so far to the pool, and the reservation is refused apart.
    let mut buf = WgpuBuffer { gpu: gpu.clone(), segs: Vec::new(), len, mark: None, home: Home::Segments };
    let s = gpu.seg_elems();
    let mut left = len;
    while left > 0 {
        let n = left.min(s);
        match segment(gpu, (n * 8) as u64) {
            Ok(seg) => buf.segs.push(seg),
            Err(e) => {
                drop(buf);
                gpu.tracker.refuse(reserved)?;
                return Err(e);
            }
        }
        left -= n;
    }
    buf.mark = Some(reserved);
    Ok(buf)
}

/// One segment of `size` bytes: a pooled one, else a new one; a new one that fails for lack of
/// memory is tried once more after the pool is emptied.
fn segment(gpu: &Gpu, size: u64) -> Result<wgpu::Buffer> {
    if let Some(b) = lock(&gpu.pool).take(size) {
        return Ok(b);
    }
    let create = || {
        gpu.create_buffer(
            "backend-wgpu segment",
            size,
            wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
        )
    };
    match create() {
        Err(Error::OutOfMemory { .. }) if lock(&gpu.pool).trim() > 0 => {
            // Let wgpu free the dropped segments before trying again.
            gpu.wait("alloc")?;
            create()
        }
        other => other,
    }
}

/// Allocates a one-segment buffer holding the concatenation of `parts` (kernel tables), whatever
/// the segment size, up to the adapter's binding limit.
pub(crate) fn upload_table(gpu: &Arc<Gpu>, parts: &[&[u64]], what: &str) -> Result<WgpuBuffer> {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    let bytes = len * 8;
    let limit = gpu.hw.limits.max_storage_buffer_binding_size.min(gpu.hw.limits.max_buffer_size) as usize;
    if bytes > limit {
        return Err(Error::InvalidArgument(format!(
            "{NAME}: {what} take {bytes} B, over one storage binding (max_storage_buffer_binding_size / \
             max_buffer_size {limit} B)"
        )));
    }
    let reserved = gpu.tracker.reserve(bytes)?;
    let usage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST;
    let seg = match gpu.create_buffer("backend-wgpu table", bytes.max(8) as u64, usage) {
        Ok(b) => b,
        Err(e) => {
            gpu.tracker.refuse(reserved)?;
            return Err(e);
        }
    };
    let mut at = 0u64;
    for part in parts {
        gpu.hw.queue.write_buffer(&seg, at, bytemuck::cast_slice(part));
        at += part.len() as u64 * 8;
    }
    gpu.check("upload a table")?;
    Ok(WgpuBuffer { gpu: gpu.clone(), segs: vec![seg], len, mark: Some(reserved), home: Home::Free })
}

/// A table whose contents are a function of `key`: the one the pool keeps under `key` when there
/// is one (no upload), else `upload()`'s ([`upload_table`]). Either way the buffer goes back to
/// the pool's table slot when dropped, replacing the table kept there, so that it is pooled, not
/// live, between calls.
pub(crate) fn cached_table(
    gpu: &Arc<Gpu>,
    key: TableKey,
    len: usize,
    upload: impl FnOnce() -> Result<WgpuBuffer>,
) -> Result<WgpuBuffer> {
    let kept = lock(&gpu.pool).take_table(key);
    if let Some(seg) = kept {
        let bytes = len * 8;
        // A table under the same key has the same length; anything else is dropped.
        if seg.size() == bytes.max(8) as u64 {
            let mark = gpu.tracker.reserve(bytes)?;
            return Ok(WgpuBuffer { gpu: gpu.clone(), segs: vec![seg], len, mark: Some(mark), home: Home::Table(key) });
        }
    }
    let mut buf = upload()?;
    buf.home = Home::Table(key);
    Ok(buf)
}

/// Allocates a buffer holding a copy of `host`.
pub(crate) fn upload(gpu: &Arc<Gpu>, host: &[u64]) -> Result<WgpuBuffer> {
    let buf = alloc(gpu, host.len())?;
    write(gpu, &buf, 0, host)?;
    Ok(buf)
}

/// Writes `host` at element `offset` of `buf`: small writes through `Queue::write_buffer`,
/// large ones through the upload staging ring (`staging::upload`).
pub(crate) fn write(gpu: &Gpu, buf: &WgpuBuffer, offset: usize, host: &[u64]) -> Result<()> {
    write_observed(gpu, buf, offset, host, &mut |_| {})
}

/// [`write()`], calling `after_chunk(j)` once staged chunk `j` is submitted (tests lose the
/// device there).
pub(crate) fn write_observed(
    gpu: &Gpu,
    buf: &WgpuBuffer,
    offset: usize,
    host: &[u64],
    after_chunk: &mut dyn FnMut(usize),
) -> Result<()> {
    if host.len() * 8 > gpu.transfer_chunk / staging::DIRECT_FRACTION {
        return staging::upload(gpu, buf, offset, host, after_chunk);
    }
    let mut done = 0;
    for (s, o, n) in buf.pieces(offset, host.len()) {
        let src = &host[done..done + n];
        gpu.hw.queue.write_buffer(&buf.segs[s], (o * 8) as u64, bytemuck::cast_slice(src));
        done += n;
    }
    gpu.hw.queue.submit([]);
    gpu.check("upload")
}

/// Copies the whole of `src` into `dst` (same length) with one `copy_buffer_to_buffer` per
/// segment, in one command encoder: the device's plain copy, the benchmarks' baseline.
pub(crate) fn raw_copy(gpu: &Gpu, src: &WgpuBuffer, dst: &mut WgpuBuffer) -> Result<()> {
    if src.len != dst.len {
        return Err(Error::LengthMismatch { what: "raw_copy destination", expected: src.len, actual: dst.len });
    }
    gpu.check("raw_copy")?;
    let mut encoder = gpu.hw.device.create_command_encoder(&Default::default());
    gpu.stamp(&mut encoder);
    for (a, b) in src.segs.iter().zip(&dst.segs) {
        encoder.copy_buffer_to_buffer(a, 0, b, 0, Some(a.size()));
    }
    gpu.stamp(&mut encoder);
    gpu.hw.queue.submit([encoder.finish()]);
    gpu.check("raw_copy")
}

/// Copies `out.len()` elements from element `offset` of `buf`, after all issued work: large
/// reads through the download staging ring (`staging::download`), small ones through one
/// staging buffer of their size.
pub(crate) fn download(gpu: &Gpu, buf: &WgpuBuffer, offset: usize, out: &mut [u64]) -> Result<()> {
    validate::download(buf.len, offset, out.len())?;
    if out.is_empty() {
        return gpu.check("download");
    }
    if out.len() * 8 > gpu.transfer_chunk / staging::DIRECT_FRACTION {
        return staging::download(gpu, buf, offset, out);
    }
    staging::download_small(gpu, buf, offset, out)
}

/// A queued device-to-host copy: the staging buffers it landed in.
pub struct WgpuDownload {
    gpu: Arc<Gpu>,
    parts: Vec<(wgpu::Buffer, usize)>,
    len: usize,
    /// The submission holding every part's copy.
    index: wgpu::SubmissionIndex,
}

impl std::fmt::Debug for WgpuDownload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WgpuDownload").field("len", &self.len).finish()
    }
}

/// Queues a copy of the whole of `buf` to host staging memory and returns at once.
pub(crate) fn queue_download(gpu: &Arc<Gpu>, buf: &WgpuBuffer) -> Result<WgpuDownload> {
    gpu.check("queue_download")?;
    let part_elems = ((gpu.hw.limits.max_buffer_size as usize).min(256 << 20) / 8).max(1);
    let mut parts = Vec::new();
    let mut encoder = gpu.hw.device.create_command_encoder(&Default::default());
    let mut done = 0;
    while done < buf.len {
        let n = part_elems.min(buf.len - done);
        let staging = gpu.create_buffer(
            "backend-wgpu queued download",
            (n * 8) as u64,
            wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        )?;
        buf.copy_to_staging(&mut encoder, done, n, &staging);
        parts.push((staging, n));
        done += n;
    }
    let index = gpu.hw.queue.submit([encoder.finish()]);
    gpu.check("queue_download")?;
    Ok(WgpuDownload { gpu: gpu.clone(), parts, len: buf.len, index })
}

impl PendingDownload for WgpuDownload {
    type Host = Vec<u64>;

    fn wait(self) -> Result<Vec<u64>> {
        let mut out = vec![0u64; self.len];
        let mut at = 0;
        for (staging, n) in &self.parts {
            staging::read_mapped(&self.gpu, staging, Some(self.index.clone()), &mut out[at..at + n])?;
            at += n;
        }
        Ok(out)
    }
}
