// The quotient of a constraint program (backend_api::quotient; CONVENTIONS.md, "Quotient values"),
// over the Goldilocks functions the backend prepends (gl_mul reduces any two u64, gl_add and gl_sub
// canonicalise).
//
// One invocation per point i = arg(0) + t of the quotient domain interprets the instructions
// [arg(5), arg(6)) of the program. Its registers and its d = arg(7) accumulators live in the scratch
// bound as window B, so that a program longer than one invocation's loop budget (Mesa's llvmpipe
// silently ends an invocation's loops after 65,535 iterations in total) runs as several dispatches
// over ranges of instructions, each carrying on from the scratch the previous one left:
//
//   accumulator k of point t:  t * d + k          (the point's d outputs, contiguous, so that the
//                                                  host copies a dispatch's outputs in one move)
//   register r of point t:     threads * d + r * threads + t   (neighbouring invocations read
//                                                  neighbouring words), threads = arg(1)
//
// The LDE is window A, read at element row + c (its current row) and next_row + c (the row q / n
// points on, cyclically). The table (binding 7) holds, as u64 elements, the coset's shift, the
// quotient domain's generator v and the trace domain's w^-1 (elements 0-2, element 3 unused), then
// the program's code (an instruction [opcode, dst, a, b] is one vec4 from vec4 CODE on), then the
// values (from element arg(10)) and the challenge powers (from element arg(11)), canonical.
//
// Arguments: 0 first point, 1 threads (the scratch's register stride), 2 q - 1, 3 LDE elements
// between two points' rows, 4 q / n, 5-6 the instruction range, 7 d, 8 flags, 9 log2 n, 10-11 the
// values' and the challenge powers' first elements.

@group(0) @binding(7) var<storage, read> tbl: array<vec4<u32>>;

// backend_api::quotient::opcode.
const OP_COLUMN: u32 = 0u;
const OP_COLUMN_NEXT: u32 = 1u;
const OP_VALUE: u32 = 2u;
const OP_SELECTOR: u32 = 3u;
const OP_ADD: u32 = 4u;
const OP_SUB: u32 = 5u;
const OP_MUL: u32 = 6u;
const OP_NEG: u32 = 7u;
const OP_FOLD: u32 = 8u;

// Flags (arg 8): the first range zeroes the accumulators, the last divides them by x^n - 1; the
// selectors the range reads (4 << the selector's code) are computed for it.
const FIRST_RANGE: u32 = 1u;
const LAST_RANGE: u32 = 2u;
const USES_FIRST_ROW: u32 = 4u;
const USES_LAST_ROW: u32 = 8u;
const USES_TRANSITION: u32 = 16u;

// The first vec4 of the code.
const CODE: u32 = 2u;

const ZERO: vec2<u32> = vec2<u32>(0u, 0u);
const ONE: vec2<u32> = vec2<u32>(1u, 0u);

// Table element e.
fn tbl_elem(e: u32) -> vec2<u32> {
    let v = tbl[e / 2u];
    if (e & 1u) == 0u {
        return v.xy;
    }
    return v.zw;
}

@compute @workgroup_size(64)
fn quotient_values(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = group_index(wid) * 64u + lid;
    if t >= P.count {
        return;
    }
    let i = arg(0) + t;
    let threads = arg(1);
    let d = arg(7);
    let flags = arg(8);
    let row = i * arg(3);
    // u32 addition wraps: with q = 2^32 (mask 2^32 - 1) the sum is already taken mod q.
    let next_row = ((i + arg(4)) & arg(2)) * arg(3);
    let acc = t * d;
    let regs = threads * d + t;

    // The point x = shift v^i, x^n - 1 and the selectors this range reads.
    var z_h = ZERO;
    var first_row = ZERO;
    var last_row = ZERO;
    var transition = ZERO;
    if (flags & (LAST_RANGE | USES_FIRST_ROW | USES_LAST_ROW | USES_TRANSITION)) != 0u {
        let x = gl_mul(tbl_elem(0u), gl_pow(tbl_elem(1u), i));
        var x_n = x;
        for (var k = 0u; k < arg(9); k++) {
            x_n = gl_mul(x_n, x_n);
        }
        z_h = gl_sub(x_n, ONE);
        transition = gl_sub(x, tbl_elem(2u));
        if (flags & USES_FIRST_ROW) != 0u {
            first_row = gl_mul(z_h, gl_inverse(gl_sub(x, ONE)));
        }
        if (flags & USES_LAST_ROW) != 0u {
            last_row = gl_mul(z_h, gl_inverse(transition));
        }
    }

    if (flags & FIRST_RANGE) != 0u {
        for (var k = 0u; k < d; k++) {
            st_b(acc + k, ZERO);
        }
    }
    for (var j = arg(5); j < arg(6); j++) {
        let ins = tbl[CODE + j];
        let op = ins.x;
        if op == OP_FOLD {
            let c = ld_b(regs + ins.z * threads);
            let power = arg(11) + ins.w * d;
            for (var k = 0u; k < d; k++) {
                st_b(acc + k, gl_add(ld_b(acc + k), gl_mul(tbl_elem(power + k), c)));
            }
        } else {
            var r: vec2<u32>;
            if op == OP_COLUMN {
                r = gl_canon(ld_a(row + ins.z));
            } else if op == OP_COLUMN_NEXT {
                r = gl_canon(ld_a(next_row + ins.z));
            } else if op == OP_VALUE {
                r = tbl_elem(arg(10) + ins.z);
            } else if op == OP_SELECTOR {
                r = first_row;
                if ins.z == 1u {
                    r = last_row;
                } else if ins.z == 2u {
                    r = transition;
                }
            } else {
                let a = ld_b(regs + ins.z * threads);
                if op == OP_NEG {
                    r = gl_sub(ZERO, a);
                } else {
                    let b = ld_b(regs + ins.w * threads);
                    if op == OP_ADD {
                        r = gl_add(a, b);
                    } else if op == OP_SUB {
                        r = gl_sub(a, b);
                    } else {
                        // OP_MUL: the program is validated, no other opcode is left.
                        r = gl_mul(a, b);
                    }
                }
            }
            st_b(regs + ins.y * threads, r);
        }
    }
    if (flags & LAST_RANGE) != 0u {
        let inv_z_h = gl_inverse(z_h);
        for (var k = 0u; k < d; k++) {
            st_b(acc + k, gl_mul(ld_b(acc + k), inv_z_h));
        }
    }
}
