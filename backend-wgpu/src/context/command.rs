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

/// Segment slots of the wide layout (the fused transpose kernel): bindings 1-12, table 13.
pub(crate) const WIDE_SLOTS: usize = 12;

/// The wide layout: parameter block, [`WIDE_SLOTS`] read-write slots, the table.
pub(super) struct Wide {
    layout: wgpu::BindGroupLayout,
    pub pipeline_layout: wgpu::PipelineLayout,
}

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
    /// The wide layout, where the adapter binds `WIDE_SLOTS + 1` storage buffers per stage.
    pub wide: Option<Wide>,
}

impl Bindings {
    /// The layout: a dynamic-offset uniform parameter block (binding 0), windows A and B
    /// (bindings 1-6, read-write storage) and the read-only table (binding 7); and the wide
    /// layout (bindings 1-12 and the table at 13) where `limits` allow it.
    pub fn new(device: &wgpu::Device, limits: &wgpu::Limits) -> Self {
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
        let wide_entries: Vec<wgpu::BindGroupLayoutEntry> = entries
            .iter()
            .cloned()
            .chain((1..=WIDE_SLOTS as u32).map(|b| storage(b, false)))
            .chain([storage(WIDE_SLOTS as u32 + 1, true)])
            .collect();
        entries.extend((1..=6).map(|b| storage(b, false)));
        entries.push(storage(7, true));
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("backend-wgpu window layout"),
            entries: &entries,
        });
        let wide = (limits.max_storage_buffers_per_shader_stage > WIDE_SLOTS as u32).then(|| {
            let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some("backend-wgpu wide layout"),
                entries: &wide_entries,
            });
            let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some("backend-wgpu wide pipeline layout"),
                bind_group_layouts: &[Some(&layout)],
                immediate_size: 0,
            });
            Wide { layout, pipeline_layout }
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
        Self { layout, pipeline_layout, dummy, dummy_table, arena, wide }
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

/// What a bind group binds besides the arena's parameter block: windows A and B, or the wide
/// layout's slots (`None` for the unused-slot buffer), and the table.
#[derive(Clone, PartialEq, Eq, Hash)]
struct BindKey {
    slots: Vec<Option<wgpu::Buffer>>,
    wide: bool,
    table: TableKey,
}

/// What one dispatch binds: segment ids for the parameter block, and the slots' buffers.
struct Bound {
    seg_a: [u32; 4],
    seg_b: [u32; 4],
    slots: Vec<Option<wgpu::Buffer>>,
    wide: bool,
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
    /// Reserves `bytes` of arena at an offset aligned to `align`; flushes first when full.
    fn arena_alloc(&mut self, bytes: usize, align: usize) -> Result<usize> {
        let op = self.op;
        let at = self.arena.len().next_multiple_of(align);
        if at + bytes > ARENA_BYTES as usize {
            if self.arena.is_empty() {
                return Err(Error::InvalidArgument(format!(
                    "{NAME}: {op}: {bytes} B of kernel parameters exceed the {ARENA_BYTES} B arena"
                )));
            }
            self.flush()?;
            return self.arena_alloc(bytes, align);
        }
        self.arena.resize(at + bytes, 0);
        Ok(at)
    }

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
        self.push(kernel, items, args, Bound { seg_a: a.ids, seg_b, slots, wide: false }, table)
    }

    /// Queues one dispatch of `items` work items of `kernel` on the wide layout: `slots` (at most
    /// [`WIDE_SLOTS`] segments) at bindings 1.., the table at binding 13. The kernel addresses
    /// slots by their index here; the parameter block's segment ids are unused.
    pub fn dispatch_wide(
        &mut self,
        kernel: Kernel,
        items: u32,
        args: &[u32],
        slots: &[&wgpu::Buffer],
        table: Table<'_>,
    ) -> Result<()> {
        if slots.len() > WIDE_SLOTS {
            return Err(Error::InvalidArgument(format!(
                "{NAME}: {}: {} segments for a layout of {WIDE_SLOTS}",
                self.op,
                slots.len()
            )));
        }
        let mut bound: Vec<Option<wgpu::Buffer>> = slots.iter().map(|b| Some((*b).clone())).collect();
        bound.resize(WIDE_SLOTS, None);
        let none = [NO_SEGMENT; 4];
        self.push(kernel, items, args, Bound { seg_a: none, seg_b: none, slots: bound, wide: true }, table)
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

        // Write the table first: a flush inside must not separate it from its parameters.
        let ualign = gpu.hw.limits.min_uniform_buffer_offset_alignment as usize;
        if let Table::Arena(words) = &table {
            let bytes = (words.len() * 4).max(16);
            // Room for this table and its parameters in one submission.
            if self.arena.len().next_multiple_of(16) + bytes + 2 * ualign > ARENA_BYTES as usize
                && !self.arena.is_empty()
            {
                self.flush()?;
            }
            let at = self.arena_alloc(bytes, 16)?;
            self.arena[at..at + words.len() * 4].copy_from_slice(bytemuck::cast_slice(words));
            params.arg[0] = (at / 16) as u32;
        }
        let params_at = self.arena_alloc(std::mem::size_of::<Params>(), ualign)?;
        self.arena[params_at..params_at + std::mem::size_of::<Params>()].copy_from_slice(bytemuck::bytes_of(&params));

        let key = BindKey {
            slots: bound.slots,
            wide: bound.wide,
            table: match &table {
                Table::None => TableKey::None,
                Table::Arena(_) => TableKey::Arena,
                Table::Buffer(b) => TableKey::Buffer((*b).clone()),
            },
        };
        let bind_group = match self.bind_groups.entry(key) {
            Entry::Occupied(e) => e.get().clone(),
            Entry::Vacant(e) => {
                let group = gpu.bind_group(e.key(), kernel.entry)?;
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
    /// A bind group of the shared layout (or the wide one): the arena's parameter block
    /// (dynamic offset), the slots of `key` (the unused-slot buffer where empty) and its table.
    fn bind_group(&self, key: &BindKey, label: &str) -> Result<wgpu::BindGroup> {
        let layout = match (key.wide, &self.bindings.wide) {
            (false, _) => &self.bindings.layout,
            (true, Some(wide)) => &wide.layout,
            (true, None) => {
                return Err(Error::InvalidArgument(format!("{NAME}: {label}: the adapter has no wide layout")));
            }
        };
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
        Ok(self.hw.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(label),
            layout,
            entries: &entries,
        }))
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
