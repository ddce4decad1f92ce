// Out-of-place transpose of a row-major block (plan step TransposeBlock) through workgroup
// memory, 32 x 32 elements per workgroup.
//
// args: 0 src (virtual element of the block), 1 dst, 2 rows of the block, 3 cols,
//       4 r0, 5 c0 (the corner of this dispatch's sub-block), 6 nr, 7 nc (its size),
//       8 tiles along the columns of the sub-block.
// dst[c * rows + r] = src[r * cols + c] for r in [r0, r0 + nr), c in [c0, c0 + nc).

const TILE: u32 = 32u;
// Separate lo / hi planes with one column of padding: column reads are free of bank conflicts.
var<workgroup> tile_lo: array<u32, 1056>;
var<workgroup> tile_hi: array<u32, 1056>;

@compute @workgroup_size(32, 8)
fn transpose_block(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let t = group_index(wid);
    // Uniform per workgroup: every invocation takes the same branch (barriers below).
    if t >= P.count {
        return;
    }
    let src = arg(0);
    let dst = arg(1);
    let rows = arg(2);
    let cols = arg(3);
    let r0 = arg(4) + (t / arg(8)) * TILE;
    let c0 = arg(5) + (t % arg(8)) * TILE;
    let r_end = arg(4) + arg(6);
    let c_end = arg(5) + arg(7);
    // Load: invocation (x, y) reads rows y, y+8, .. of column x: row-contiguous global reads.
    for (var k = 0u; k < TILE; k += 8u) {
        let r = r0 + lid.y + k;
        let c = c0 + lid.x;
        if r < r_end && c < c_end {
            let v = ld_a(src + r * cols + c);
            tile_lo[(lid.y + k) * 33u + lid.x] = v.x;
            tile_hi[(lid.y + k) * 33u + lid.x] = v.y;
        }
    }
    workgroupBarrier();
    // Store: invocation (x, y) writes column y + k, rows r0 + x: column-contiguous global writes.
    for (var k = 0u; k < TILE; k += 8u) {
        let c = c0 + lid.y + k;
        let r = r0 + lid.x;
        if r < r_end && c < c_end {
            let i = lid.x * 33u + lid.y + k;
            st_a(dst + c * rows + r, vec2<u32>(tile_lo[i], tile_hi[i]));
        }
    }
}
