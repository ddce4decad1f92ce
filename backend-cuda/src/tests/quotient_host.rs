//! The quotient kernels (`shaders/cuda/quotient.cu`) compiled for the host by the system C++
//! compiler and run, thread by thread, with exactly the launches the backend computes
//! ([`Launch::new`]: kernel, points per thread, grid, the register file's shared and global parts, constants,
//! scalar arguments), against the naive reference. So the interpreter's indexing (the point slots,
//! the register file's layout in shared and in global memory, the masked slots past the domain,
//! the grid-stride loop, the column-major reads), the launch's arguments and the choice of kernel
//! are checked on every machine, GPU or not, and so is every write of a register file: none past
//! the shared memory or the scratch the launch sizes (sentinels after them must survive).
//!
//! The threads of a block run one after the other: the kernels share nothing between threads
//! (each thread's registers are its own words of the file) and have no barrier, so the order does
//! not change a value. Off a GPU, `common.cuh` takes its portable branches; the device's own
//! arithmetic is checked by the conformance suite on a GPU. Without a C++ compiler the test prints
//! SKIPPED (`REQUIRE_CXX=1` makes that a failure); `CXX` names the compiler (default `c++`).

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use backend_api::quotient::{ConstraintProgram, Instr, QuotientCall, QuotientDomain, Selector};
use backend_api::{MAX_EXTENSION_DEGREE, MatrixShape};

use crate::quotient::{BLOCK, Launch, POINTS};

/// The launch emulated on the host: CUDA's qualifiers and built-in variables as plain C++, the
/// kernels of quotient.cu looked up by name, each request's grid run block by block and thread by
/// thread.
const HARNESS: &str = r#"
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#define __device__
#define __host__
#define __global__
#define __shared__
#define __constant__
#define __forceinline__ inline
#define __launch_bounds__(x)
struct uint4 { unsigned x, y, z, w; };
struct dim { unsigned x, y, z; };
static dim blockIdx, blockDim, threadIdx, gridDim;
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
    return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
static inline unsigned __brev(unsigned x) {
    unsigned r = 0;
    for (int i = 0; i < 32; ++i) r = (r << 1) | ((x >> i) & 1u);
    return r;
}
static inline unsigned __byte_perm(unsigned a, unsigned b, unsigned s) {
    unsigned long long v = ((unsigned long long)b << 32) | a, r = 0;
    for (int i = 0; i < 4; ++i) r |= ((v >> (8 * ((s >> (4 * i)) & 7u))) & 0xffull) << (8 * i);
    return (unsigned)r;
}
// A block's dynamic shared memory: 64 KiB, more than the 48 KiB a launch may take.
unsigned long long smem[1 << 13];
#include "quotient.cu"

typedef void (*Kernel)(const u64*, const u64*, const uint4*, const u64*, const u64*, const u64*, u64*, u64*, u64,
                       u64, u64, u64, u64, u64, u64, u64, u64, u64);
#define K(D, P) {"quotient_values_d" #D "_p" #P, quotient_values_d##D##_p##P}
static const struct { const char* name; Kernel run; } KERNELS[] = {
    K(1, 1), K(2, 1), K(3, 1), K(4, 1), K(5, 1), K(6, 1), K(7, 1), K(8, 1),
    K(1, 4), K(2, 4), K(3, 4), K(4, 4), K(5, 4), K(6, 4), K(7, 4), K(8, 4),
};

static std::vector<u64> words(size_t n) {
    std::vector<u64> v(n);
    for (auto& w : v) if (scanf("%llx", &w) != 1) { fprintf(stderr, "short input\n"); std::exit(2); }
    return v;
}

// Each request: the kernel's name; degree, grid, block, shared bytes, scratch words, q, then the
// lengths of the code, the constants, the LDE and the column copy (0: none), the challenge powers'
// and the vanishing table's offsets, the ten scalar arguments; then the four arrays. One line of
// q * degree output words per request.
int main() {
    char name[64];
    while (scanf("%63s", name) == 1) {
        std::vector<u64> h = words(12), args = words(10);
        const u64 d = h[0], grid = h[1], block = h[2], shared = h[3], scratch_words = h[4], q = h[5];
        const std::vector<u64> code = words(h[6]), constants = words(h[7]), lde = words(h[8]), columns = words(h[9]);
        const u64 alpha_at = h[10], vanishing_at = h[11];
        Kernel run = nullptr;
        for (const auto& k : KERNELS) if (!strcmp(k.name, name)) run = k.run;
        if (!run) { printf("no kernel %s\n", name); return 3; }
        // A launch takes at most 48 KiB of dynamic shared memory without opting in.
        if (shared > 48 * 1024) { printf("%llu bytes of shared memory\n", shared); return 4; }
        // Past the words the launch allocates, shared and global, sentinels that must survive.
        const u64 SENTINEL = 0x5a5a5a5a5a5a5a5aull, GUARD = 1024;
        // The sentinels cover every word a register of any thread could reach, were the global
        // part indexed from register 0 (the file's registers times the points per thread, times
        // the grid's threads).
        const u64 reach = (shared / (8 * block) + scratch_words / (grid * block)) * grid * block;
        std::vector<u64> scratch(std::max(scratch_words, reach) + GUARD, SENTINEL), out(q * d, 0xdeadbeefull);
        gridDim = {(unsigned)grid, 1, 1};
        blockDim = {(unsigned)block, 1, 1};
        for (unsigned b = 0; b < grid; ++b) {
            for (u64 w = 0; w < sizeof(smem) / 8; ++w) smem[w] = SENTINEL;
            for (unsigned t = 0; t < block; ++t) {
                blockIdx = {b, 0, 0};
                threadIdx = {t, 0, 0};
                run(lde.data(), columns.empty() ? nullptr : columns.data(), (const uint4*)code.data(),
                    constants.data(), constants.data() + alpha_at, constants.data() + vanishing_at,
                    scratch_words ? scratch.data() : nullptr, out.data(), args[0], args[1], args[2], args[3],
                    args[4], args[5], args[6], args[7], args[8], args[9]);
            }
            for (u64 w = shared / 8; w < sizeof(smem) / 8; ++w)
                if (smem[w] != SENTINEL) { printf("%s wrote shared word %llu of %llu\n", name, w, shared / 8); return 5; }
        }
        for (u64 w = scratch_words; w < scratch.size(); ++w)
            if (scratch[w] != SENTINEL) { printf("%s wrote scratch word %llu of %llu\n", name, w, scratch_words); return 6; }
        for (u64 w : out) printf("%llx ", w);
        printf("\n");
    }
    return 0;
}
"#;

/// A splitmix64 stream: words over all of `[0, 2^64)`, so that non-canonical ones occur.
struct Words(u64);

impl Words {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn vec(&mut self, n: usize) -> Vec<u64> {
        (0..n).map(|_| self.next()).collect()
    }
}

/// A random program of about `len` instructions over `registers` registers (every one written
/// once first, so the program declares them all), reading `cols` columns (`spread`: anywhere;
/// else in column order) and `values` values, folding `constraints` constraints.
fn program(
    g: &mut Words,
    len: usize,
    registers: usize,
    cols: usize,
    spread: bool,
    values: usize,
    constraints: usize,
) -> ConstraintProgram {
    let mut instrs = Vec::with_capacity(len + registers + constraints);
    let mut col = 0;
    let mut load = |g: &mut Words, dst: u32| {
        col = if spread { g.below(cols) } else { (col + 1) % cols };
        Instr::Column { dst, col: col as u32, next: g.below(2) == 1 }
    };
    for r in 0..registers as u32 {
        instrs.push(match g.below(4) {
            0 if values > 0 => Instr::Value { dst: r, index: g.below(values) as u32 },
            1 => Instr::Selector { dst: r, which: Selector::ALL[g.below(3)] },
            _ => load(g, r),
        });
    }
    let mut folded = 0;
    while instrs.len() < registers + len || folded < constraints {
        let (dst, a, b) = (g.below(registers) as u32, g.below(registers) as u32, g.below(registers) as u32);
        instrs.push(match g.below(10) {
            0 => load(g, dst),
            1 if values > 0 => Instr::Value { dst, index: g.below(values) as u32 },
            2 => Instr::Selector { dst, which: Selector::ALL[g.below(3)] },
            3 => Instr::Neg { dst, a },
            4 | 5 => Instr::Add { dst, a, b },
            6 => Instr::Sub { dst, a, b },
            7 | 8 => Instr::Mul { dst, a, b },
            _ => {
                // Half the folds read the register the instruction before wrote (an arithmetic
                // result the kernel may fold where it is computed).
                let src = match instrs.last().and_then(|i: &Instr| i.dst()) {
                    Some(dst) if g.below(2) == 0 => dst,
                    _ => a,
                };
                folded += 1;
                Instr::Fold { src, constraint: ((folded - 1) % constraints) as u32 }
            }
        });
    }
    ConstraintProgram::new(&instrs).expect("a random program is well formed")
}

fn shaders_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shaders/cuda")
}

#[test]
fn the_quotient_kernels_compiled_for_the_host_match_the_reference() {
    let what = "the_quotient_kernels_compiled_for_the_host_match_the_reference";
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let dir = std::env::temp_dir().join(format!("stark-commit-quotient-host-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary directory");
    let (source, binary) = (dir.join("quotient_host.cpp"), dir.join("quotient_host"));
    std::fs::write(&source, HARNESS).expect("write the harness");
    let built = Command::new(&cxx)
        .args(["-std=c++17", "-O1", "-x", "c++"])
        .arg("-I")
        .arg(shaders_dir())
        .arg(&source)
        .arg("-o")
        .arg(&binary)
        .output();
    let built = match built {
        Ok(out) => out,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            super::skip(what, &format!("no C++ compiler `{cxx}`: {e}"), "REQUIRE_CXX");
            return;
        }
    };
    assert!(built.status.success(), "{cxx} failed on quotient.cu:\n{}", String::from_utf8_lossy(&built.stderr));

    // (log2 n, log2 q, LDE rows per point): one point, a quotient domain as large as the trace's,
    // blowups of 2 to 8, every 2nd or 4th LDE row read, and domains that take several passes of a
    // small grid.
    let domains =
        [(0, 0, 1), (0, 1, 2), (2, 2, 1), (3, 4, 1), (3, 5, 2), (4, 6, 4), (5, 6, 1), (9, 10, 1), (10, 12, 1)];
    // (registers, columns, spread reads): a file of four points per thread in shared memory (at
    // most 12 registers), of one point (13 to 48), of one point split between shared and global
    // memory (more); reads in column order and scattered (a column copy).
    let shapes = [
        (3, 2, false),
        (12, 30, true),
        (13, 5, false),
        (40, 20, true),
        (49, 6, false),
        (70, 40, true),
        (130, 12, false),
    ];
    let mut g = Words(0x5eed);
    let (mut input, mut cases) = (String::new(), Vec::new());
    let mut seen = std::collections::BTreeSet::new();
    for (k, &(log_n, log_q, stride)) in domains.iter().enumerate() {
        for (j, &(registers, cols, spread)) in shapes.iter().enumerate() {
            for max_points in [1, POINTS] {
                let d = 1 + (k * shapes.len() + j + max_points) % MAX_EXTENSION_DEGREE;
                let (values, constraints) = (g.below(4), 1 + g.below(5));
                let len = 30 + g.below(40);
                let program = program(&mut g, len, registers, cols, spread, values, constraints);
                let shape = MatrixShape::new((1usize << log_q) * stride, cols).unwrap();
                let lde = g.vec(shape.len());
                let (values, alpha_powers) = (g.vec(values), g.vec(constraints * d));
                let domain = loop {
                    if let Ok(domain) = QuotientDomain::new(log_n, log_q, g.next()) {
                        break domain;
                    }
                };
                let call = QuotientCall { program: &program, domain, values: &values, alpha_powers: &alpha_powers };
                // Two multiprocessors: small grids, so larger domains take several passes.
                let launch = Launch::new(&call, shape, 2, max_points);
                let q = 1usize << log_q;
                let columns: Vec<u64> = match launch.columns {
                    true => (0..cols)
                        .flat_map(|c| (0..q).map(move |i| (i, c)))
                        .map(|(i, c)| lde[i * stride * cols + c])
                        .collect(),
                    false => Vec::new(),
                };
                seen.insert((launch.points, launch.scratch_words > 0, launch.columns));
                let header = [
                    d,
                    launch.grid,
                    BLOCK as usize,
                    launch.shared_bytes,
                    launch.scratch_words,
                    q,
                    launch.code.len(),
                    launch.constants.len(),
                    lde.len(),
                    columns.len(),
                    launch.alpha_at,
                    launch.vanishing_at,
                ];
                input.push_str(launch.kernel);
                for w in header.iter().map(|&x| x as u64).chain(launch.args).chain(launch.code.iter().copied()) {
                    input.push_str(&format!(" {w:x}"));
                }
                for w in launch.constants.iter().chain(&lde).chain(&columns) {
                    input.push_str(&format!(" {w:x}"));
                }
                input.push('\n');
                let expected = naive_reference::quotient_values(&lde, cols, &program, domain, &values, &alpha_powers);
                let label = format!(
                    "{} ({} instructions, {registers} registers, {cols} columns{}) at 2^{log_q} points, trace 2^{log_n}, \
                     stride {stride}, grid {}, {}",
                    launch.kernel,
                    program.len(),
                    if launch.columns { ", column copy" } else { "" },
                    launch.grid,
                    if launch.scratch_words > 0 { "global file" } else { "shared file" },
                );
                cases.push((label, expected));
            }
        }
    }
    // Every path ran: 1 and 4 points per thread in shared files, 1 in split ones, row and column
    // reads.
    for want in
        [(1, false, false), (4, false, false), (4, false, true), (1, false, true), (1, true, false), (1, true, true)]
    {
        assert!(seen.contains(&want), "no case of (points, global file, column copy) = {want:?}: {seen:?}");
    }

    let mut child =
        Command::new(&binary).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("run the harness");
    let mut stdin = child.stdin.take().expect("stdin");
    let feeder = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().expect("harness output");
    feeder.join().expect("feeder").expect("feed the harness");
    let _ = std::fs::remove_dir_all(&dir);
    let text = String::from_utf8(out.stdout).expect("text");
    assert!(out.status.success(), "the harness failed: {}", text.lines().last().unwrap_or(""));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), cases.len(), "one line per case");
    for ((label, expected), line) in cases.iter().zip(lines) {
        let got: Vec<u64> = line.split_whitespace().map(|w| u64::from_str_radix(w, 16).expect("hex")).collect();
        assert!(got == *expected, "{label}: the quotient differs from the reference");
    }
}
