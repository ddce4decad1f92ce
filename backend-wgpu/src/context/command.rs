//! The recorder: an operation's dispatches into command buffers, their parameter blocks and
//! small tables in the persistent arena, and bind groups of the shared layout.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::num::NonZeroU64;
use std::sync::MutexGuard;

use backend_api::{Error, Result};
use bytemuck::{Pod, Zeroable};

use super::space::NO_SEGMENT;
use super::{Gpu, Kernel, NAME, Window, lock};

/// Size of the persistent arena (parameter blocks and copy tables), in bytes.
pub(crate) const ARENA_BYTES: u64 = 1 << 20;

/// The parameter block of every kernel (`struct Params` in window.wgsl).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub(crate) struct Params {
    seg_a: [u32; 4],
    seg_b: [u32; 4],
    shift: u32,
    mask: u32,
    count: u32,
    groups_x: u32,
    arg: [u32; 12],
}

/// The shared bind group layout (see `shaders/wgsl/window.wgsl`) and the fixed buffers every
/// bind group may bind: the arena and the placeholders for unused slots.
pub(super) struct Bindings {
    pub layout: wgpu::BindGroupLayout,
    pub pipeline_layout: wgpu::PipelineLayout,
    /// Tiny buffers bound to unused slots: read-write slots and the read-only table (one buffer
    /// cannot be both within a dispatch).
    dummy: wgpu::Buffer,
    dummy_table: wgpu::Buffer,
    arena: wgpu::Buffer,
}

impl Bindings {
    /// The layout: a dynamic-offset uniform parameter block (binding 0), windows A and B
    /// (bindings 1-6, read-write storage) and the read-only table (binding 7).
    pub fn new(device: &wgpu::Device) -> Self {
        let storage = |binding: u32, read_only: bool| wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage { read_only },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        };
        let mut entries = vec![wgpu::BindGroupLayoutEntry {
            binding: 0,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Uniform,
                has_dynamic_offset: true,
                min_binding_size: NonZeroU64::new(std::mem::size_of::<Params>() as u64),
            },
            count: None,
        }];
        entries.extend((1..=6).map(|b| storage(b, false)));
        entries.push(storage(7, true));
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("backend-wgpu window layout"),
            entries: &entries,
        });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("backend-wgpu pipeline layout"),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let dummy = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("backend-wgpu unused slot"),
            size: 256,
            usage: wgpu::BufferUsages::STORAGE,
            mapped_at_creation: false,
        });
        let dummy_table = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("backend-wgpu unused table"),
            size: 256,
            usage: wgpu::BufferUsages::STORAGE,
            mapped_at_creation: false,
        });
        let arena = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("backend-wgpu arena"),
            size: ARENA_BYTES,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        Self { layout, pipeline_layout, dummy, dummy_table, arena }
    }
}

/// The read-only table of a dispatch (binding 7).
pub(crate) enum Table<'b> {
    /// Nothing bound (the unused-slot buffer).
    None,
    /// `u32` words written into the arena with the submission. The whole arena is bound, so
    /// that dispatches share bind groups; the recorder sets kernel arg 0 to the table's offset
    /// in the arena, in `vec4<u32>` units.
    Arena(Vec<u32>),
    /// A whole device buffer.
    Buffer(&'b wgpu::Buffer),
}

enum Op {
    Dispatch { pipeline: wgpu::ComputePipeline, bind_group: wgpu::BindGroup, params_offset: u32, groups: (u32, u32) },
}

/// What a bind group binds besides the arena's parameter block: windows A and B (`None` for
/// the unused-slot buffer), and the table.
#[derive(Clone, PartialEq, Eq, Hash)]
struct BindKey {
    slots: Vec<Option<wgpu::Buffer>>,
    table: TableKey,
}

/// What one dispatch binds: segment ids for the parameter block, and the slots' buffers.
struct Bound {
    seg_a: [u32; 4],
    seg_b: [u32; 4],
    slots: Vec<Option<wgpu::Buffer>>,
}

#[derive(Clone, PartialEq, Eq, Hash)]
enum TableKey {
    None,
    Arena,
    Buffer(wgpu::Buffer),
}

/// Records the dispatches of one operation; [`Recorder::flush`] writes the arena and submits.
/// Flushes by itself when the arena is full.
pub(crate) struct Recorder<'g> {
    gpu: &'g Gpu,
    /// The operation, for error messages.
    op: &'static str,
    _guard: MutexGuard<'g, ()>,
    ops: Vec<Op>,
    arena: Vec<u8>,
    /// Bind groups already made by this recorder: an operation's dispatches mostly bind the same
    /// few segments, and creating a bind group per dispatch costs host time.
    bind_groups: HashMap<BindKey, wgpu::BindGroup>,
}

impl Recorder<'_> {
    /// Largest table (in `u32` words) one dispatch may carry in the arena.
    pub fn max_table_words(&self) -> usize {
        (ARENA_BYTES as usize - 2 * 256) / 4
    }

    /// Queues one dispatch of `items` work items of `kernel`, binding windows A and B.
    pub fn dispatch(
        &mut self,
        kernel: Kernel,
        items: u32,
        args: &[u32],
        a: Window<'_, 4>,
        b: Window<'_, 2>,
        table: Table<'_>,
    ) -> Result<()> {
        let mut seg_b = [NO_SEGMENT; 4];
        seg_b[..2].copy_from_slice(&b.ids);
        let slots = a.bufs.iter().chain(b.bufs.iter()).map(|b| b.cloned()).collect();
        self.push(kernel, items, args, Bound { seg_a: a.ids, seg_b, slots }, table)
    }

    fn push(&mut self, kernel: Kernel, items: u32, args: &[u32], bound: Bound, table: Table<'_>) -> Result<()> {
        let op = self.op;
        if items == 0 {
            return Ok(());
        }
        let gpu = self.gpu;
        let pipeline = gpu.pipeline(kernel)?;
        let groups_total = items.div_ceil(kernel.items_per_group);
        let max_dim = gpu.hw.limits.max_compute_workgroups_per_dimension.max(1);
        let groups =
            if groups_total <= max_dim { (groups_total, 1) } else { (max_dim, groups_total.div_ceil(max_dim)) };
        if groups.1 > max_dim {
            return Err(Error::InvalidArgument(format!(
                "{NAME}: {op}: {groups_total} workgroups exceed {max_dim} x {max_dim}"
            )));
        }
        let mut params = Params {
            seg_a: bound.seg_a,
            seg_b: bound.seg_b,
            shift: gpu.hw.seg_shift,
            mask: (1u32 << gpu.hw.seg_shift) - 1,
            count: items,
            groups_x: groups.0,
            ..Default::default()
        };
        params.arg[..args.len()].copy_from_slice(args);

        // The table (if any) and the parameter block go into the arena of one submission. Both
        // places are reserved at once, flushing at most once *before* either is written: a flush
        // between them would submit the table with the earlier dispatches and leave this
        // dispatch's parameters pointing at an offset of the next arena, where other words lie.
        // An earlier version reserved the table, then the block, with a room check of two
        // uniform-offset alignments for the 96 B block: at llvmpipe's 32 B alignment (64 B of
        // room) the block's reservation flushed whenever the table ended within 96 B of the
        // arena's end, and a transpose of thousands of tiny copy batches (32768 x 2 under a 24 B
        // cap) returned 1,422 wrong elements. At an alignment of 64 B or more the padded block always
        // fitted that room, which is why the same transposes agreed on the H200.
        let ualign = gpu.hw.limits.min_uniform_buffer_offset_alignment.max(1) as usize;
        let words: &[u32] = if let Table::Arena(w) = &table { w } else { &[] };
        let table_bytes = if matches!(table, Table::Arena(_)) { (words.len() * 4).max(16) } else { 0 };
        let place = |len: usize| {
            let table_at = len.next_multiple_of(16);
            let params_at = (table_at + table_bytes).next_multiple_of(ualign);
            (table_at, params_at, params_at + std::mem::size_of::<Params>())
        };
        if place(self.arena.len()).2 > ARENA_BYTES as usize && !self.arena.is_empty() {
            self.flush()?;
        }
        let (table_at, params_at, end) = place(self.arena.len());
        if end > ARENA_BYTES as usize {
            return Err(Error::InvalidArgument(format!(
                "{NAME}: {op}: a table of {table_bytes} B and its kernel parameters exceed the {ARENA_BYTES} B arena"
            )));
        }
        self.arena.resize(end, 0);
        if matches!(table, Table::Arena(_)) {
            self.arena[table_at..table_at + words.len() * 4].copy_from_slice(bytemuck::cast_slice(words));
            params.arg[0] = (table_at / 16) as u32;
        }
        self.arena[params_at..end].copy_from_slice(bytemuck::bytes_of(&params));

        let key = BindKey {
            slots: bound.slots,
            table: match &table {
                Table::None => TableKey::None,
                Table::Arena(_) => TableKey::Arena,
                Table::Buffer(b) => TableKey::Buffer((*b).clone()),
            },
        };
        let bind_group = match self.bind_groups.entry(key) {
            Entry::Occupied(e) => e.get().clone(),
            Entry::Vacant(e) => {
                let group = gpu.bind_group(e.key(), kernel.entry);
                e.insert(group).clone()
            }
        };
        self.ops.push(Op::Dispatch { pipeline, bind_group, params_offset: params_at as u32, groups });
        Ok(())
    }

    /// Writes the arena and submits everything recorded so far.
    pub fn flush(&mut self) -> Result<()> {
        let op = self.op;
        if self.ops.is_empty() {
            return Ok(());
        }
        let gpu = self.gpu;
        gpu.check(op)?;
        gpu.hw.queue.write_buffer(&gpu.bindings.arena, 0, &self.arena);
        let mut encoder = gpu.hw.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(op) });
        gpu.stamp(&mut encoder);
        {
            let mut pass =
                encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some(op), timestamp_writes: None });
            for o in &self.ops {
                match o {
                    Op::Dispatch { pipeline, bind_group, params_offset, groups } => {
                        pass.set_pipeline(pipeline);
                        pass.set_bind_group(0, bind_group, &[*params_offset]);
                        pass.dispatch_workgroups(groups.0, groups.1, 1);
                    }
                }
            }
        }
        gpu.stamp(&mut encoder);
        gpu.hw.queue.submit([encoder.finish()]);
        self.ops.clear();
        self.arena.clear();
        gpu.check(op)
    }
}

impl Gpu {
    /// A bind group of the shared layout: the arena's parameter block (dynamic offset), the
    /// slots of `key` (the unused-slot buffer where empty) and its table.
    fn bind_group(&self, key: &BindKey, label: &str) -> wgpu::BindGroup {
        let layout = &self.bindings.layout;
        let mut entries = vec![wgpu::BindGroupEntry {
            binding: 0,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: &self.bindings.arena,
                offset: 0,
                size: NonZeroU64::new(std::mem::size_of::<Params>() as u64),
            }),
        }];
        for (k, buf) in key.slots.iter().enumerate() {
            entries.push(wgpu::BindGroupEntry {
                binding: 1 + k as u32,
                resource: whole(buf.as_ref().unwrap_or(&self.bindings.dummy)),
            });
        }
        let table = match &key.table {
            TableKey::None => &self.bindings.dummy_table,
            TableKey::Arena => &self.bindings.arena,
            TableKey::Buffer(b) => b,
        };
        entries.push(wgpu::BindGroupEntry { binding: 1 + key.slots.len() as u32, resource: whole(table) });
        self.hw.device.create_bind_group(&wgpu::BindGroupDescriptor { label: Some(label), layout, entries: &entries })
    }

    /// Starts recording an operation; holds the recording lock until the recorder is dropped.
    pub fn recorder(&self, op: &'static str) -> Recorder<'_> {
        Recorder {
            gpu: self,
            op,
            _guard: lock(&self.record),
            ops: Vec::new(),
            arena: Vec::new(),
            bind_groups: HashMap::new(),
        }
    }
}

/// A whole buffer as a binding.
fn whole(b: &wgpu::Buffer) -> wgpu::BindingResource<'_> {
    wgpu::BindingResource::Buffer(wgpu::BufferBinding { buffer: b, offset: 0, size: None })
}
