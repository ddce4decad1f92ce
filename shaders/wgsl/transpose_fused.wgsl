// The fused run-pass launch of the in-place transpose (backend_api::plan::schedule's
// Launch::Fused): a parallel assignment of whole slots of `unit` elements, slot dst <- what slot
// src held before the launch. Every slot lies inside one segment.
//
// This kernel has its own bind group layout ("wide"): the parameter block (binding 0, the same
// `Params` layout as window.wgsl), twelve segment slots s0..s11 (bindings 1-12) and the table
// (binding 13). The host prepends `const STAGE_ELEMS: u32 = ...;`, the workgroup staging size
// in elements (the adapter's workgroup storage limit / 8, at most 6144).
//
// args: 0 the table's base (vec4 units), 1 moves n, 2 unit, 3 log2 of the window.
// Table entry k: (src slot binding, src offset in its segment, dst slot binding, dst offset).
//
// Workgroup w owns offsets [w * win, w * win + win) of every slot: it reads that window of every
// source into workgroup memory, then writes every destination. Slots only ever move whole to
// whole, so two workgroups never touch one element, and within a workgroup every read happens
// before any write: each run moves once.

struct Params {
    seg_a: vec4<u32>,
    seg_b: vec4<u32>,
    shift: u32,
    mask: u32,
    count: u32,
    groups_x: u32,
    arg: array<vec4<u32>, 3>,
}

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read_write> s0: array<vec2<u32>>;
@group(0) @binding(2) var<storage, read_write> s1: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read_write> s2: array<vec2<u32>>;
@group(0) @binding(4) var<storage, read_write> s3: array<vec2<u32>>;
@group(0) @binding(5) var<storage, read_write> s4: array<vec2<u32>>;
@group(0) @binding(6) var<storage, read_write> s5: array<vec2<u32>>;
@group(0) @binding(7) var<storage, read_write> s6: array<vec2<u32>>;
@group(0) @binding(8) var<storage, read_write> s7: array<vec2<u32>>;
@group(0) @binding(9) var<storage, read_write> s8: array<vec2<u32>>;
@group(0) @binding(10) var<storage, read_write> s9: array<vec2<u32>>;
@group(0) @binding(11) var<storage, read_write> s10: array<vec2<u32>>;
@group(0) @binding(12) var<storage, read_write> s11: array<vec2<u32>>;
@group(0) @binding(13) var<storage, read> moves: array<vec4<u32>>;

var<workgroup> stage: array<vec2<u32>, STAGE_ELEMS>;

fn arg(i: u32) -> u32 {
    return P.arg[i / 4u][i % 4u];
}

fn ld(slot: u32, o: u32) -> vec2<u32> {
    switch slot {
        case 0u: { return s0[o]; }
        case 1u: { return s1[o]; }
        case 2u: { return s2[o]; }
        case 3u: { return s3[o]; }
        case 4u: { return s4[o]; }
        case 5u: { return s5[o]; }
        case 6u: { return s6[o]; }
        case 7u: { return s7[o]; }
        case 8u: { return s8[o]; }
        case 9u: { return s9[o]; }
        case 10u: { return s10[o]; }
        default: { return s11[o]; }
    }
}

fn st(slot: u32, o: u32, v: vec2<u32>) {
    switch slot {
        case 0u: { s0[o] = v; }
        case 1u: { s1[o] = v; }
        case 2u: { s2[o] = v; }
        case 3u: { s3[o] = v; }
        case 4u: { s4[o] = v; }
        case 5u: { s5[o] = v; }
        case 6u: { s6[o] = v; }
        case 7u: { s7[o] = v; }
        case 8u: { s8[o] = v; }
        case 9u: { s9[o] = v; }
        case 10u: { s10[o] = v; }
        default: { s11[o] = v; }
    }
}

@compute @workgroup_size(256)
fn transpose_fused_runs(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let w = wid.x + wid.y * P.groups_x;
    // Uniform per workgroup: every invocation takes the same branch (barrier below).
    if w >= P.count {
        return;
    }
    let base = arg(0);
    let n = arg(1);
    let unit = arg(2);
    let log_win = arg(3);
    let win = 1u << log_win;
    let off = w << log_win;
    let len = min(win, unit - off);
    let total = n << log_win;
    for (var i = lid; i < total; i += 256u) {
        let e = i & (win - 1u);
        if e < len {
            let m = moves[base + (i >> log_win)];
            stage[i] = ld(m.x, m.y + off + e);
        }
    }
    workgroupBarrier();
    for (var i = lid; i < total; i += 256u) {
        let e = i & (win - 1u);
        if e < len {
            let m = moves[base + (i >> log_win)];
            st(m.z, m.w + off + e, stage[i]);
        }
    }
}
