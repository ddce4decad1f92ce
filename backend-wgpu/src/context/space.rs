//! Segment windows: a set of device buffers as one virtual element space, and the (at most four
//! or two) segments one dispatch binds.

use backend_api::{Error, Result};

use super::{Gpu, NAME};

/// Marks an unused window slot.
pub(super) const NO_SEGMENT: u32 = u32::MAX;

/// A set of device buffers seen as one virtual element space: buffer k's segments follow
/// buffer k-1's, each segment `2^seg_shift` elements of the space (the last of a buffer may be
/// shorter). Kernels address elements of the space with u32 indices.
pub(crate) struct Space<'b> {
    segs: Vec<&'b wgpu::Buffer>,
    shift: u32,
}

impl<'b> Space<'b> {
    /// The space over `buffers`, and each buffer's base (virtual element of its element 0).
    pub fn new(gpu: &Gpu, buffers: &[&'b [wgpu::Buffer]]) -> Result<(Self, Vec<u32>)> {
        let mut segs = Vec::new();
        let mut bases = Vec::new();
        for b in buffers {
            bases.push(segs.len() << gpu.hw.seg_shift);
            segs.extend(b.iter());
        }
        let end = segs.len() << gpu.hw.seg_shift;
        if end > u32::MAX as usize {
            return Err(Error::InvalidArgument(format!(
                "{NAME}: an operation addresses at most 2^32 u64 elements (kernels index with u32); \
                 these buffers take {} segments of 2^{} elements",
                segs.len(),
                gpu.hw.seg_shift
            )));
        }
        Ok((Self { segs, shift: gpu.hw.seg_shift }, bases.into_iter().map(|b| b as u32).collect()))
    }

    /// The distinct segments touched by the element ranges `[start, end)`.
    fn segments(&self, spans: &[(u64, u64)]) -> Vec<u32> {
        let mut out: Vec<u32> = Vec::new();
        for &(s, e) in spans {
            if e <= s {
                continue;
            }
            for seg in (s >> self.shift)..=((e - 1) >> self.shift) {
                if !out.contains(&(seg as u32)) {
                    out.push(seg as u32);
                }
            }
        }
        out
    }

    /// The window (segment ids and buffers, `N` slots) covering the element ranges `spans`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the segment size when the ranges touch more than `N`
    /// segments (the callers cut their work so that this does not happen for any shape whose
    /// rows fit a segment).
    pub fn window<const N: usize>(&self, spans: &[(u64, u64)], op: &str) -> Result<Window<'b, N>> {
        let segs = self.segments(spans);
        let too_many = || {
            Error::InvalidArgument(format!(
                "{NAME}: {op}: one dispatch would touch {} segments of 2^{} elements ({} B, the storage \
                 binding limit rounded down to a power of two); at most {N} can be bound",
                segs.len(),
                self.shift,
                8u64 << self.shift
            ))
        };
        if segs.len() > N {
            return Err(too_many());
        }
        let mut ids = [NO_SEGMENT; N];
        let mut bufs = [None; N];
        for (k, &s) in segs.iter().enumerate() {
            ids[k] = s;
            bufs[k] = Some(*self.segs.get(s as usize).ok_or_else(too_many)?);
        }
        Ok(Window { ids, bufs })
    }
}

/// The segments bound at a window's slots.
#[derive(Clone, Copy)]
pub(crate) struct Window<'b, const N: usize> {
    pub(super) ids: [u32; N],
    pub(super) bufs: [Option<&'b wgpu::Buffer>; N],
}

impl<const N: usize> Window<'_, N> {
    /// A window with no segment bound.
    pub fn empty() -> Self {
        Window { ids: [NO_SEGMENT; N], bufs: [None; N] }
    }
}
