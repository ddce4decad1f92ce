//! The LDE's twiddle tables on the device, and the set the device keeps between calls.

use std::sync::Arc;

use backend_api::field::LdeTwiddles;
use backend_api::{LdeParams, Result};

use crate::context::{Device, KeptTables};
use crate::memory::{self, CudaBuffer};

/// The twiddles, inverse twiddles and coset powers of one LDE shape ([`LdeTwiddles`]) in one
/// tracked device buffer, read by every column group's launches. The device keeps the last ones
/// between calls (`Device::keep_lde_tables`, not counted as live meanwhile): an LDE of the same
/// shape and shift reuses them with no upload, which otherwise costs the host's staging of the
/// tables and the copy before the first pass can start (about 1.3 ms at 2^21 -> 2^22 rows on an
/// H200, 40 MB). `CudaBackend::trim_pool` and an allocation that runs out of memory free them.
/// They come from a pool of their own (`Device::tables_pool`), apart from the commit's buffers.
pub(super) struct Tables {
    /// `None` only while dropping.
    buf: Option<CudaBuffer>,
    /// `(log2 n, log2 B, shift)`.
    key: (u32, u32, u64),
}

impl Tables {
    /// The tables of `params`: the ones the device keeps, else uploaded (on the compute stream).
    pub(super) fn get(device: &Arc<Device>, params: &LdeParams) -> Result<Self> {
        let key = (params.log_trace_rows(), params.log_blowup(), params.shift());
        if let Some(t) = device.take_lde_tables(key) {
            // SAFETY: the cache owned the allocation alone; it was made on this device's stream
            // by the `CudaBuffer::alloc_from` below and holds `t.len` elements.
            let buf = unsafe { CudaBuffer::from_raw(device, t.ptr, t.len) }?;
            return Ok(Self { buf: Some(buf), key });
        }
        let tables = LdeTwiddles::shared(key.0, key.1, key.2);
        let (inv, fwd, coset) = (&tables.inv_twiddles, &tables.twiddles, &tables.coset);
        device.bind()?;
        let buf = CudaBuffer::alloc_from(device, inv.len() + fwd.len() + coset.len(), Some(device.tables_pool()))?;
        memory::write(&buf, 0, inv)?;
        memory::write(&buf, inv.len(), fwd)?;
        memory::write(&buf, inv.len() + fwd.len(), coset)?;
        Ok(Self { buf: Some(buf), key })
    }

    pub(super) fn buf(&self) -> &CudaBuffer {
        self.buf.as_ref().expect("tables are only taken when dropped")
    }

    /// Where the forward twiddles and the coset powers start (after the inverse twiddles).
    pub(super) fn offsets(&self) -> (usize, usize) {
        let [inv, fwd, _] = LdeTwiddles::lens(self.key.0, self.key.1);
        (inv, inv + fwd)
    }
}

impl Drop for Tables {
    /// Back to the device's keeping (after the work queued on them: later users are queued on the
    /// same stream).
    fn drop(&mut self) {
        if let Some(buf) = self.buf.take() {
            let device = Arc::clone(buf.device());
            // Tables are never read by a copy; should that ever fail, the buffer frees itself.
            if let Ok((ptr, len)) = buf.into_raw() {
                device.keep_lde_tables(KeptTables { key: self.key, ptr, len });
            }
        }
    }
}
