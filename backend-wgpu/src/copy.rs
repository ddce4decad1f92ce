//! Batched copies: the copy shader (`shaders/wgsl/copy.wgsl`), a few dispatches per batch.
//!
//! Each copy is cut only where it crosses a segment boundary (of its source or destination),
//! into *pieces*; one piece is one table entry `(src, dst, len, first chunk)` however long it
//! is, and the kernel runs one workgroup per chunk of [`COPY_CHUNK_ELEMS`] elements, finding its
//! piece by a binary search over the `first chunk` prefix sums. So the host's work and the table
//! it uploads grow with the number of copies, not with the bytes they move (a transpose of
//! 2^22 x 316 moves its 64 Ki-element runs as ~40 K entries instead of ~650 K per-tile ones).
//! Pieces are grouped into dispatches that touch at most four segments (window A). A batch is
//! independent (validated first), so its chunks run in any order. The same path executes the
//! copy steps of the transpose plan, where source and destination may be the same wgpu buffer
//! (which `copy_buffer_to_buffer` forbids).
//!
//! [`backend_api::Backend::bit_reversed_rows`] has its own kernel (`bit_reversed_rows` in
//! copy.wgsl) that computes each row's source on the device, so no list of a range per row is
//! built, uploaded or searched: a dispatch per block of output rows, or, where the matrix is
//! larger than the segments one dispatch binds, per block and residue of the row index (below).

use std::ops::Range;

use backend_api::copy::{BatchTarget, validate_batch};
use backend_api::field::bit_reverse;
use backend_api::{CopyRange, Error, MatrixShape, Result};

use crate::context::{Gpu, Kernel, Module, NAME, Recorder, Space, Table, Window};
use crate::memory::WgpuBuffer;

/// Elements per workgroup of the copy kernel (`CHUNK` in copy.wgsl).
pub(crate) const COPY_CHUNK_ELEMS: u32 = 4096;

pub(crate) const COPY: Kernel = Kernel { module: Module::Copy, entry: "copy_pieces", items_per_group: 1 };

/// Elements per workgroup of the bit-reversal kernel (four per invocation, in copy.wgsl).
const BIT_REVERSED: Kernel = Kernel { module: Module::Copy, entry: "bit_reversed_rows", items_per_group: 1024 };

/// A copy in a [`Space`]: virtual source, virtual destination, length, in elements.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Move {
    pub src: u64,
    pub dst: u64,
    pub len: u64,
}

/// A piece of a copy inside one source and one destination segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Piece {
    src_seg: u64,
    dst_seg: u64,
    src: u64,
    dst: u64,
    len: u64,
}

/// Records the independent copies `moves` (one batch) into `rec`.
pub(crate) fn record_moves(
    gpu: &Gpu,
    rec: &mut Recorder<'_>,
    space: &Space<'_>,
    moves: &[Move],
    op: &str,
) -> Result<()> {
    let shift = gpu.hw.seg_shift;
    let seg = 1u64 << shift;
    let chunk = u64::from(COPY_CHUNK_ELEMS);
    let mut pieces: Vec<Piece> = Vec::with_capacity(moves.len());
    for m in moves {
        let (mut s, mut d, mut left) = (m.src, m.dst, m.len);
        while left > 0 {
            let n = left.min(seg - (s & (seg - 1))).min(seg - (d & (seg - 1)));
            pieces.push(Piece { src_seg: s >> shift, dst_seg: d >> shift, src: s, dst: d, len: n });
            s += n;
            d += n;
            left -= n;
        }
    }
    pieces.sort_unstable();
    let max_pieces = rec.max_table_words() / 4;
    // Workgroups one dispatch may run (a piece is at most one segment, 2^28 elements, so one
    // piece alone always fits).
    let max_dim = u64::from(gpu.hw.limits.max_compute_workgroups_per_dimension.max(1));
    let max_chunks = (max_dim * max_dim).min(u64::from(u32::MAX));
    let mut start = 0;
    while start < pieces.len() {
        // Grow the group while it touches at most four segments.
        let mut segs = [0u64; 4];
        let mut nsegs = 0;
        let mut chunks = 0u64;
        let mut end = start;
        while end < pieces.len() && end - start < max_pieces {
            let p = pieces[end];
            let added = usize::from(!segs[..nsegs].contains(&p.src_seg))
                + usize::from(p.dst_seg != p.src_seg && !segs[..nsegs].contains(&p.dst_seg));
            let c = p.len.div_ceil(chunk);
            if nsegs + added > 4 || chunks + c > max_chunks {
                break;
            }
            for x in [p.src_seg, p.dst_seg] {
                if !segs[..nsegs].contains(&x) {
                    segs[nsegs] = x;
                    nsegs += 1;
                }
            }
            chunks += c;
            end += 1;
        }
        if end == start {
            return Err(Error::InvalidArgument(format!(
                "{NAME}: {op}: a copy piece of {} elements needs more than the {max_chunks} workgroups one dispatch runs",
                pieces[start].len
            )));
        }
        let group = &pieces[start..end];
        let spans: Vec<(u64, u64)> = segs[..nsegs].iter().map(|&s| (s << shift, (s << shift) + 1)).collect();
        let window = space.window::<4>(&spans, op)?;
        let mut words: Vec<u32> = Vec::with_capacity(group.len() * 4);
        let mut first = 0u64;
        for p in group {
            words.extend([p.src as u32, p.dst as u32, p.len as u32, first as u32]);
            first += p.len.div_ceil(chunk);
        }
        // Arg 0 (the table's base) is set by the recorder for `Table::Arena`.
        rec.dispatch(COPY, chunks as u32, &[0, group.len() as u32], window, Window::empty(), Table::Arena(words))?;
        start = end;
    }
    Ok(())
}

/// [`backend_api::Backend::batched_copy`].
pub(crate) fn batched_copy(gpu: &Gpu, src: &WgpuBuffer, dst: &mut WgpuBuffer, copies: &[CopyRange]) -> Result<()> {
    use backend_api::DeviceBuffer as _;
    let op = "batched_copy";
    validate_batch(copies, BatchTarget::Between { src_len: src.len(), dst_len: dst.len() })?;
    let (space, bases) = Space::new(gpu, &[&src.segs, &dst.segs])?;
    let moves: Vec<Move> = copies
        .iter()
        .map(|c| Move { src: bases[0] as u64 + c.src as u64, dst: bases[1] as u64 + c.dst as u64, len: c.len as u64 })
        .collect();
    let mut rec = gpu.recorder(op);
    record_moves(gpu, &mut rec, &space, &moves, op)?;
    rec.flush()
}

/// [`backend_api::Backend::batched_copy_within`].
pub(crate) fn batched_copy_within(gpu: &Gpu, buf: &mut WgpuBuffer, copies: &[CopyRange]) -> Result<()> {
    use backend_api::DeviceBuffer as _;
    let op = "batched_copy_within";
    validate_batch(copies, BatchTarget::Within { len: buf.len() })?;
    let (space, _) = Space::new(gpu, &[&buf.segs])?;
    let moves: Vec<Move> =
        copies.iter().map(|c| Move { src: c.src as u64, dst: c.dst as u64, len: c.len as u64 }).collect();
    let mut rec = gpu.recorder(op);
    record_moves(gpu, &mut rec, &space, &moves, op)?;
    rec.flush()
}

/// [`backend_api::Backend::bit_reversed_rows`], on validated arguments.
///
/// Output row `r` reads the matrix's row `br(r)`, whose top `t` bits are the low `t` bits of `r`
/// reversed. So the output rows of one residue `r mod 2^t` read one block of `2^(k - t)`
/// consecutive matrix rows: with `t` the fewest bits that make a block fit three segments (four
/// bound, window A), a dispatch takes a block of output rows that fits one segment (two bound,
/// window B) and, within it, the rows of one residue. Where the matrix is at most three segments
/// (`t = 0`: a 4 GiB LDE on an H100 through Vulkan, whose segments are 2 GiB), that is one
/// dispatch per block of output rows, a few per call. A row wider than one segment goes through
/// the copy shader's pieces instead, a range per row, which cut it at segment boundaries.
pub(crate) fn bit_reversed_rows(
    gpu: &Gpu,
    src: &WgpuBuffer,
    src_at: usize,
    shape: MatrixShape,
    rows: Range<usize>,
    dst: &mut WgpuBuffer,
    dst_at: usize,
) -> Result<()> {
    let op = "bit_reversed_rows";
    let (cols, k) = (shape.cols(), shape.rows().trailing_zeros());
    let s = gpu.seg_elems();
    let mut rec = gpu.recorder(op);
    if cols > s {
        let (space, bases) = Space::new(gpu, &[&src.segs, &dst.segs])?;
        let (src0, dst0) = (bases[0] as u64 + src_at as u64, bases[1] as u64 + dst_at as u64);
        let moves: Vec<Move> = rows
            .clone()
            .enumerate()
            .map(|(i, r)| Move {
                src: src0 + (bit_reverse(r, k) * cols) as u64,
                dst: dst0 + (i * cols) as u64,
                len: cols as u64,
            })
            .collect();
        record_moves(gpu, &mut rec, &space, &moves, op)?;
        return rec.flush();
    }
    let (space_a, _) = Space::new(gpu, &[&src.segs])?;
    let (space_b, _) = Space::new(gpu, &[&dst.segs])?;
    // The fewest top bits t whose blocks of 2^(k - t) rows fit three segments, so that a block
    // at any offset touches at most four.
    let t = (0..=k).find(|&t| (cols << (k - t)) <= 3 * s).unwrap_or(k);
    let block_rows = 1usize << (k - t);
    // Output rows per dispatch block: one segment's worth.
    let out_rows = (s / cols).max(1);
    let mut r_lo = rows.start;
    while r_lo < rows.end {
        let r_hi = (r_lo + out_rows).min(rows.end);
        // The residues mod 2^t that occur in [r_lo, r_hi), each a dispatch.
        for r0 in r_lo..r_hi.min(r_lo + (1 << t)) {
            let count = ((r_hi - 1 - r0) >> t) + 1;
            let block = bit_reverse(r0, k) / block_rows;
            let (m0, m1) = (src_at + block * block_rows * cols, src_at + (block + 1) * block_rows * cols);
            let a = space_a.window::<4>(&[(m0 as u64, m1 as u64)], op)?;
            let d0 = dst_at + (r0 - rows.start) * cols;
            let d1 = d0 + (((count - 1) << t) + 1) * cols;
            let b = space_b.window::<2>(&[(d0 as u64, d1 as u64)], op)?;
            let args = [0, cols as u32, k, src_at as u32, r0 as u32, t, d0 as u32];
            rec.dispatch(BIT_REVERSED, (count * cols) as u32, &args, a, b, Table::None)?;
        }
        r_lo = r_hi;
    }
    rec.flush()
}
