// Bindings and element access shared by every kernel; the backend prepends this file to each
// kernel source.
//
// A device buffer is a list of segments (wgpu buffers) of 2^shift u64 elements each (the last may
// be shorter). A dispatch sees up to four segments through window A (bindings 1-4) and two
// through window B (bindings 5-6); `seg_a` / `seg_b` name the virtual segment bound at each slot
// (0xffffffff for an unused slot). A virtual element index g lives in segment g >> shift at
// offset g & mask. The host cuts every dispatch so that everything it touches is bound.
//
// A u64 element is a vec2<u32> (lo, hi), little-endian words, so that adapters without
// SHADER_INT64 run every kernel.

struct Params {
    seg_a: vec4<u32>,
    seg_b: vec4<u32>,
    shift: u32,
    mask: u32,
    // Work items of this dispatch (threads, or tiles for tile kernels).
    count: u32,
    // Workgroups along x; dispatches over the per-dimension limit are two-dimensional.
    groups_x: u32,
    arg: array<vec4<u32>, 3>,
}

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read_write> a0: array<vec2<u32>>;
@group(0) @binding(2) var<storage, read_write> a1: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read_write> a2: array<vec2<u32>>;
@group(0) @binding(4) var<storage, read_write> a3: array<vec2<u32>>;
@group(0) @binding(5) var<storage, read_write> b0: array<vec2<u32>>;
@group(0) @binding(6) var<storage, read_write> b1: array<vec2<u32>>;

// Kernel argument i (0..12).
fn arg(i: u32) -> u32 {
    return P.arg[i / 4u][i % 4u];
}

// The linear workgroup index of a (possibly two-dimensional) dispatch.
fn group_index(wid: vec3<u32>) -> u32 {
    return wid.x + wid.y * P.groups_x;
}

// Element g of window A.
fn ld_a(g: u32) -> vec2<u32> {
    let s = g >> P.shift;
    let o = g & P.mask;
    if s == P.seg_a.x {
        return a0[o];
    }
    if s == P.seg_a.y {
        return a1[o];
    }
    if s == P.seg_a.z {
        return a2[o];
    }
    return a3[o];
}

fn st_a(g: u32, v: vec2<u32>) {
    let s = g >> P.shift;
    let o = g & P.mask;
    if s == P.seg_a.x {
        a0[o] = v;
    } else if s == P.seg_a.y {
        a1[o] = v;
    } else if s == P.seg_a.z {
        a2[o] = v;
    } else {
        a3[o] = v;
    }
}

// Element g of window B.
fn ld_b(g: u32) -> vec2<u32> {
    let o = g & P.mask;
    if (g >> P.shift) == P.seg_b.x {
        return b0[o];
    }
    return b1[o];
}

fn st_b(g: u32, v: vec2<u32>) {
    let o = g & P.mask;
    if (g >> P.shift) == P.seg_b.x {
        b0[o] = v;
    } else {
        b1[o] = v;
    }
}
