// Coset LDE kernels over a row-major matrix in window A; the shared twiddle tables
// (backend_api::field::LdeTwiddles: inverse twiddles, forward twiddles, coset powers) are one
// buffer at binding 7. One invocation per (row or butterfly, column): consecutive invocations
// touch consecutive columns of a row, so every access is coalesced.
//
// The LDE of an n-row trace at blowup B (N = nB), in place in the N-row buffer whose first n
// rows hold the trace (lde.rs, `coset_lde_in_place`):
// 1. The passes (inverse, DIF) over rows [0, n): their lazy butterflies take any u64, trace values
//    >= p included; the last pass's scaling canonicalises.
//    Position p then holds coefficient j = br(p) times n; a size-N bit-reversed array keeps that
//    coefficient at br_N(j) = pB, and since the first log2(B) forward (DIT) stages over a block
//    of B positions with one non-zero entry only copy it, it belongs at all B rows [pB, pB + B).
//    The last pass scales it by s^j / n and stores it there (PASS_WIDE), over its groups in
//    ranges from the top down, each range's targets above every row that it or a later range
//    reads, group 0 last (lde.rs, `in_place_steps`, proves the order).
// 2. Only where a group's 2^r B target rows do not fit a segment's span, or B > 64: the last pass
//    stores row p at p instead, and lde_scale moves rows p of [lo, hi) to their B rows in waves
//    from the top down, each wave's targets above every row still to be read; row 0 last.
// 3. The passes (forward, DIT) with half-sizes B, 2B, .., N/2: natural-order evaluations.
//
// No invocation loops more than a few hundred times, whatever B: the host keeps the wide stores
// (4B per ntt_pass_x2 invocation) to B <= 64 and gives each lde_scale invocation at most
// SCALE_TARGETS rows. Mesa's llvmpipe silently ends an invocation's loops after 65,535 iterations
// in all (LP_MAX_TGSI_LOOP_ITERATIONS), which left rows unwritten where one invocation stored
// every one of B rows.
//
// ntt_pass_x2 runs up to PASS_LOG consecutive radix-2 stages per dispatch over workgroup tiles
// of the 2^r rows of a column that those stages combine, so that an element is read and written
// once per pass instead of once per stage (ntt_pass runs the passes of one stage). The host
// (lde.rs) picks r per pass so that a pass's rows fit the bound segments.

@group(0) @binding(7) var<storage, read> tw: array<vec2<u32>>;

// Target rows one lde_scale invocation stores at most (SCALE_TARGETS in lde.rs).
const SCALE_TARGETS: u32 = 64u;

// Row p to its target rows pB + s for s in [s0, s1) (a subset of its block [pB, pB + B)), times
// s^br(p) / n where arg 8 is 1. args: 0 base, 1 m, 2 B, 3 log2(n), 4 coset offset, 5 p0 (first
// row), 6 s0, 7 s1, 8 scale (1) or copy (0), 9 chunks = ceil((s1 - s0) / SCALE_TARGETS);
// count = rows * chunks * m, item t = ((p - p0) chunks + chunk) m + column. The host keeps every
// source row out of the dispatch's targets, but row 0 scaled in place (s0 = 0, s1 = 1), where
// each invocation reads its element before it writes it.
@compute @workgroup_size(256)
fn lde_scale(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = group_index(wid) * 256u + lid;
    if t >= P.count {
        return;
    }
    let m = arg(1);
    let c = t % m;
    let u = t / m;
    let p = arg(5) + u / arg(9);
    let s0 = arg(6) + (u % arg(9)) * SCALE_TARGETS;
    let s1 = min(arg(7), s0 + SCALE_TARGETS);
    var v = ld_a(arg(0) + p * m + c);
    if arg(8) == 1u {
        v = gl_mul(v, tw[arg(4) + coefficient(p, arg(3))]);
    }
    let g = arg(0) + p * arg(2) * m + c;
    for (var s = s0; s < s1; s++) {
        st_a(g + s * m, v);
    }
}

// The coefficient j = br(p) (bits-bit reversal) that position p of the inverse's output holds.
fn coefficient(p: u32, bits: u32) -> u32 {
    if bits == 0u {
        return 0u;
    }
    return reverseBits(p) >> (32u - bits);
}

// Most stages one pass runs: a group of 2^PASS_LOG rows per column.
const PASS_LOG: u32 = 5u;

// The tile of ntt_pass_x2: (1024 >> r) (group, column) items x 2^r rows, item-fastest, so that a
// row's consecutive columns are consecutive invocations (coalesced loads and stores).
var<workgroup> ntt_tile: array<vec2<u32>, 1024>;

// The passes' args (ntt_pass and ntt_pass_x2): 0 base, 1 row stride (elements), 2 m, 3 log2 h
//       (the pass's smallest half-size), 4 r (stages, 1..PASS_LOG), 5 twiddle offset, 6 log2 of
//       the smallest stage's twiddle step, 7 g0 (first group), 8 inverse (1: DIF with inverse
//       twiddles, half-sizes h 2^(r-1) down to h; 0: DIT, half-sizes h up to h 2^(r-1)), 9 flags
//       (PASS_CANONICAL, PASS_SCALE, PASS_WIDE), 10 log2(B), 11 coset offset;
//       count = groups * m * 2^(r-1) (butterflies per stage).
//
// Group g holds the rows i0 + j h, j < 2^r, where i0 = (g / h) h 2^r + g % h: exactly the rows
// that the stages with half-sizes h .. h 2^(r-1) combine among themselves. In the stage of
// half-size H = h 2^s the pair (j, j + 2^s), bit s of j clear, is a butterfly whose twiddle
// index is (i0 + j h) mod H = g % h + (j mod 2^s) h, times the stage's step.
//
// The passes are bound by the instructions they issue, not by their memory traffic
// (the git history of BENCHMARKS.md, "Where the wgpu LDE's time goes"), so they keep them few: ntt_pass_x2 runs two
// butterflies per invocation per stage, sharing their index arithmetic and twiddles; the stages
// are written out with literal s (ntt_stage_dit, ntt_stage_dif), so that their tile indices fold;
// an invocation keeps its twiddles in registers; and the butterflies are lazy (gl_add_lazy,
// gl_sub_lazy, gl_mul_lazy take and give any u64 congruent to the value), canonicalised only
// where the transform ends (PASS_CANONICAL; the inverse's scaling multiplies, which
// canonicalises).
// Flags (arg 9). PASS_CANONICAL (the forward transform's last pass): canonicalise every stored
// value; the other passes store the lazy words as they are. PASS_SCALE (the inverse's last pass,
// h = 1, stride m): row p's output is scaled by s^br(p) / n (tw[arg 11 + br(p)]),
// n = 2^log_rows = 2^(arg 6 + arg 3 + 1). PASS_WIDE (with PASS_SCALE): every row p is stored to
// the B rows [pB, pB + B) instead of row p, B = 2^arg 10. The host dispatches such a pass over
// group ranges whose targets lie above every row the dispatch loads, but for group 0 alone
// (rows [0, 2^r)), whose targets [0, 2^r B) cover its own rows: ntt_pass loads both of a
// column's rows in the one invocation before storing either, and ntt_pass_x2 loads all of a
// column's 2^r rows in one workgroup before the barriers that precede any store.
const PASS_CANONICAL: u32 = 1u;
const PASS_SCALE: u32 = 2u;
const PASS_WIDE: u32 = 4u;

// The tile slots of a butterfly in stage s: pair q = j with bit s removed, of item bi, at rows j
// and j + 2^s (slot row * per + item, per = 2^per_log).
fn ntt_slots(s: u32, q: u32, bi: u32, per_log: u32) -> vec2<u32> {
    let j = ((q >> s) << (s + 1u)) | (q & ((1u << s) - 1u));
    let x = (j << per_log) + bi;
    return vec2<u32>(x, x + ((1u << s) << per_log));
}

// A DIT butterfly of stage s: (x, y) -> (x + y w, x - y w).
fn ntt_stage_dit(s: u32, q: u32, bi: u32, per_log: u32, w: vec2<u32>) {
    let at = ntt_slots(s, q, bi, per_log);
    let x = ntt_tile[at.x];
    let yw = gl_mul_lazy(ntt_tile[at.y], w);
    ntt_tile[at.x] = gl_add_lazy(x, yw);
    ntt_tile[at.y] = gl_sub_lazy(x, yw);
}

// A DIF butterfly of stage s: (x, y) -> (x + y, (x - y) w).
fn ntt_stage_dif(s: u32, q: u32, bi: u32, per_log: u32, w: vec2<u32>) {
    let at = ntt_slots(s, q, bi, per_log);
    let x = ntt_tile[at.x];
    let y = ntt_tile[at.y];
    ntt_tile[at.x] = gl_add_lazy(x, y);
    ntt_tile[at.y] = gl_mul_lazy(gl_sub_lazy(x, y), w);
}

// A pass of one stage (r = 1: the top pass of a transform whose rows lie far apart, and the
// groups whose rows straddle segment boundaries): one invocation per butterfly, item
// group_index * 256 + lid, rows i0 and i0 + h, in registers (no tile, no barrier).
@compute @workgroup_size(256)
fn ntt_pass(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let item = group_index(wid) * 256u + lid;
    if item >= P.count {
        return;
    }
    let m = arg(2);
    let lh = arg(3);
    let g = arg(7) + item / m;
    let col = item % m;
    let blo = g & ((1u << lh) - 1u);
    let row0 = ((g >> lh) << (lh + 1u)) + blo;
    let row1 = row0 + (1u << lh);
    let at0 = arg(0) + row0 * arg(1) + col;
    let at1 = arg(0) + row1 * arg(1) + col;
    let x = ld_a(at0);
    let y = ld_a(at1);
    let w = tw[arg(5) + (blo << arg(6))];
    var o0: vec2<u32>;
    var o1: vec2<u32>;
    if arg(8) == 1u {
        o0 = gl_add_lazy(x, y);
        o1 = gl_mul_lazy(gl_sub_lazy(x, y), w);
    } else {
        let yw = gl_mul_lazy(y, w);
        o0 = gl_add_lazy(x, yw);
        o1 = gl_sub_lazy(x, yw);
    }
    let flags = arg(9);
    ntt_store(flags, at0, row0, col, o0);
    ntt_store(flags, at1, row1, col, o1);
}

// Passes of r >= 2 stages: a tile of 1024 elements, per = 2^(10 - r) items x 2^r rows; each
// invocation moves four elements of one item (rows q + k 2^(r-2), k < 4, q = lid / per) and runs
// two butterflies per stage, pairs q and q + 2^(r-2). The index arithmetic, the division by m and
// the r twiddles of pair q then serve both butterflies: pair q + 2^(r-2) shares pair q's twiddle
// in every stage but the last (s = r - 1), where its index has bit r - 2 set (wt). Every global
// load comes before the tile's stores, so that all of an invocation's loads are in flight at
// once.
@compute @workgroup_size(256)
fn ntt_pass_x2(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let m = arg(2);
    let lh = arg(3);
    let r = arg(4);
    let tw_off = arg(5);
    let lstep = arg(6);
    let lo_mask = (1u << lh) - 1u;
    let items = P.count >> (r - 1u);
    let per_log = 10u - r;
    let per = 1u << per_log;

    let bi = lid & (per - 1u);
    let item = group_index(wid) * per + bi;
    let g = arg(7) + item / m;
    let col = item % m;
    let q = lid >> per_log;
    let quarter = 1u << (r - 2u);
    let q2 = q + quarter;
    let row0 = ((g >> lh) << (lh + r)) + (g & lo_mask) + (q << lh);
    let row_step = quarter << lh;
    let at0 = arg(0) + row0 * arg(1) + col;
    let at_step = row_step * arg(1);
    let live = item < items;
    let blo = g & lo_mask;

    var v0 = vec2<u32>(0u, 0u);
    var v1 = vec2<u32>(0u, 0u);
    var v2 = vec2<u32>(0u, 0u);
    var v3 = vec2<u32>(0u, 0u);
    var w0 = vec2<u32>(0u, 0u);
    var w1 = vec2<u32>(0u, 0u);
    var w2 = vec2<u32>(0u, 0u);
    var w3 = vec2<u32>(0u, 0u);
    var w4 = vec2<u32>(0u, 0u);
    var wt = vec2<u32>(0u, 0u);
    if live {
        v0 = ld_a(at0);
        v1 = ld_a(at0 + at_step);
        v2 = ld_a(at0 + 2u * at_step);
        v3 = ld_a(at0 + 3u * at_step);
        w0 = tw[tw_off + (blo << lstep)];
        w1 = tw[tw_off + ((blo + ((q & 1u) << lh)) << (lstep - 1u))];
        if r > 2u {
            w2 = tw[tw_off + ((blo + ((q & 3u) << lh)) << (lstep - 2u))];
        }
        if r > 3u {
            w3 = tw[tw_off + ((blo + ((q & 7u) << lh)) << (lstep - 3u))];
        }
        if r > 4u {
            w4 = tw[tw_off + ((blo + ((q & 15u) << lh)) << (lstep - 4u))];
        }
        wt = tw[tw_off + ((blo + (q2 << lh)) << (lstep - (r - 1u)))];
    }
    ntt_tile[lid] = v0;
    ntt_tile[lid + 256u] = v1;
    ntt_tile[lid + 512u] = v2;
    ntt_tile[lid + 768u] = v3;
    workgroupBarrier();

    // Pair q2's twiddle: pair q's, but wt in the last stage.
    if arg(8) == 1u {
        if r > 4u {
            if live {
                ntt_stage_dif(4u, q, bi, per_log, w4);
                ntt_stage_dif(4u, q2, bi, per_log, wt);
            }
            workgroupBarrier();
        }
        if r > 3u {
            if live {
                ntt_stage_dif(3u, q, bi, per_log, w3);
                ntt_stage_dif(3u, q2, bi, per_log, select(w3, wt, r == 4u));
            }
            workgroupBarrier();
        }
        if r > 2u {
            if live {
                ntt_stage_dif(2u, q, bi, per_log, w2);
                ntt_stage_dif(2u, q2, bi, per_log, select(w2, wt, r == 3u));
            }
            workgroupBarrier();
        }
        if live {
            ntt_stage_dif(1u, q, bi, per_log, w1);
            ntt_stage_dif(1u, q2, bi, per_log, select(w1, wt, r == 2u));
        }
        workgroupBarrier();
        if live {
            ntt_stage_dif(0u, q, bi, per_log, w0);
            ntt_stage_dif(0u, q2, bi, per_log, w0);
        }
        workgroupBarrier();
    } else {
        if live {
            ntt_stage_dit(0u, q, bi, per_log, w0);
            ntt_stage_dit(0u, q2, bi, per_log, w0);
        }
        workgroupBarrier();
        if live {
            ntt_stage_dit(1u, q, bi, per_log, w1);
            ntt_stage_dit(1u, q2, bi, per_log, select(w1, wt, r == 2u));
        }
        workgroupBarrier();
        if r > 2u {
            if live {
                ntt_stage_dit(2u, q, bi, per_log, w2);
                ntt_stage_dit(2u, q2, bi, per_log, select(w2, wt, r == 3u));
            }
            workgroupBarrier();
        }
        if r > 3u {
            if live {
                ntt_stage_dit(3u, q, bi, per_log, w3);
                ntt_stage_dit(3u, q2, bi, per_log, select(w3, wt, r == 4u));
            }
            workgroupBarrier();
        }
        if r > 4u {
            if live {
                ntt_stage_dit(4u, q, bi, per_log, w4);
                ntt_stage_dit(4u, q2, bi, per_log, wt);
            }
            workgroupBarrier();
        }
    }
    if live {
        let flags = arg(9);
        ntt_store(flags, at0, row0, col, ntt_tile[lid]);
        ntt_store(flags, at0 + at_step, row0 + row_step, col, ntt_tile[lid + 256u]);
        ntt_store(flags, at0 + 2u * at_step, row0 + 2u * row_step, col, ntt_tile[lid + 512u]);
        ntt_store(flags, at0 + 3u * at_step, row0 + 3u * row_step, col, ntt_tile[lid + 768u]);
    }
}

// ntt_pass's store of output row `row`, column `col` (element `at`), under `flags`.
fn ntt_store(flags: u32, at: u32, row: u32, col: u32, v: vec2<u32>) {
    if (flags & PASS_SCALE) == 0u {
        if (flags & PASS_CANONICAL) != 0u {
            st_a(at, gl_canon(v));
        } else {
            st_a(at, v);
        }
        return;
    }
    let log_n = arg(6) + arg(3) + 1u;
    let w = gl_mul(v, tw[arg(11) + coefficient(row, log_n)]);
    if (flags & PASS_WIDE) != 0u {
        let lb = arg(10);
        let m = arg(2);
        let first = arg(0) + (row << lb) * m + col;
        for (var s = 0u; s < (1u << lb); s++) {
            st_a(first + s * m, w);
        }
    } else {
        st_a(at, w);
    }
}

// The field self-test (backend-wgpu's unit tests, against u128 arithmetic): for each pair
// (a[i], b[i]), out[9i..9i+9] = a + b, a - b, a * b, canon(a), the _c add and subtract of the
// canonicalised pair, and the lazy add, subtract and multiply of the pair, canonicalised.
// args: 0 a base, 1 b base, 2 out base; count = pairs.
@compute @workgroup_size(256)
fn gl_selftest(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = group_index(wid) * 256u + lid;
    if t >= P.count {
        return;
    }
    let a = ld_a(arg(0) + t);
    let b = ld_a(arg(1) + t);
    let o = arg(2) + 9u * t;
    st_a(o, gl_add(a, b));
    st_a(o + 1u, gl_sub(a, b));
    st_a(o + 2u, gl_mul(a, b));
    st_a(o + 3u, gl_canon(a));
    st_a(o + 4u, gl_add_c(gl_canon(a), gl_canon(b)));
    st_a(o + 5u, gl_sub_c(gl_canon(a), gl_canon(b)));
    st_a(o + 6u, gl_canon(gl_add_lazy(a, b)));
    st_a(o + 7u, gl_canon(gl_sub_lazy(a, b)));
    st_a(o + 8u, gl_canon(gl_mul_lazy(a, b)));
}
