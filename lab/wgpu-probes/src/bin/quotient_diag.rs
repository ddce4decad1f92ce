//! Which part of the wgpu quotient kernel (`shaders/wgsl/quotient.wgsl`) gives a wrong value on an
//! adapter: one program per instruction kind (a column of the current and of the next row, a
//! value, each selector, each arithmetic operation, folds at degrees 1 to 3), then random
//! programs, each over small and large domains, on the native-u64 and the u32-pair arithmetic,
//! against the naive reference. Prints one line per case (`ok`, or the first point that differs
//! with both values) and a summary; exits 1 when any case differs.
//!
//! ```sh
//! cargo run --release -p wgpu-probes --bin quotient_diag -- [--software]
//! ```

use backend_api::quotient::{ConstraintProgram, Instr, QuotientCall, QuotientDomain, Selector};
use backend_api::{Backend, MatrixShape};
use backend_wgpu::{WgpuBackend, WgpuOptions};

/// A xorshift generator: words spread over [0, 2^64), so that non-canonical words (>= p) occur.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn words(&mut self, n: usize) -> Vec<u64> {
        (0..n).map(|_| self.next()).collect()
    }
}

/// One program per instruction kind, each folding what it computes (two columns `a`, `b`).
fn kind_programs() -> Vec<(&'static str, ConstraintProgram)> {
    let col = |dst, col, next| Instr::Column { dst, col, next };
    let fold = |src, constraint| Instr::Fold { src, constraint };
    let two = [col(0, 0, false), col(1, 1, false)];
    let with = |extra: &[Instr]| -> ConstraintProgram {
        let mut v = two.to_vec();
        v.extend_from_slice(extra);
        ConstraintProgram::new(&v).expect("well formed")
    };
    vec![
        ("column", with(&[fold(0, 0)])),
        ("column next", with(&[col(2, 1, true), fold(2, 0)])),
        ("value", with(&[Instr::Value { dst: 2, index: 0 }, fold(2, 0)])),
        ("selector first row", with(&[Instr::Selector { dst: 2, which: Selector::FirstRow }, fold(2, 0)])),
        ("selector last row", with(&[Instr::Selector { dst: 2, which: Selector::LastRow }, fold(2, 0)])),
        ("selector transition", with(&[Instr::Selector { dst: 2, which: Selector::Transition }, fold(2, 0)])),
        ("add", with(&[Instr::Add { dst: 2, a: 0, b: 1 }, fold(2, 0)])),
        ("sub", with(&[Instr::Sub { dst: 2, a: 0, b: 1 }, fold(2, 0)])),
        ("mul", with(&[Instr::Mul { dst: 2, a: 0, b: 1 }, fold(2, 0)])),
        ("neg", with(&[Instr::Neg { dst: 2, a: 1 }, fold(2, 0)])),
        ("two folds", with(&[fold(0, 0), fold(1, 1)])),
        ("register reuse", with(&[Instr::Mul { dst: 0, a: 0, b: 1 }, Instr::Add { dst: 0, a: 0, b: 0 }, fold(0, 0)])),
    ]
}

/// A random program as the conformance suite makes them: every kind, registers reused.
fn random_program(r: &mut Rng, len: usize, cols: usize) -> ConstraintProgram {
    let regs = (len / 3).max(4);
    let mut written: Vec<u32> = Vec::new();
    let mut v = Vec::new();
    let mut constraint = 0;
    while v.len() < len || written.is_empty() {
        let dst = r.below(regs) as u32;
        let kind = if written.len() < 2 { r.below(3) } else { r.below(9) };
        let pick = |r: &mut Rng| written[r.below(written.len())];
        let i = match kind {
            0 => Instr::Column { dst, col: r.below(cols) as u32, next: r.below(2) == 1 },
            1 => Instr::Value { dst, index: r.below(2) as u32 },
            2 => Instr::Selector { dst, which: Selector::ALL[r.below(3)] },
            3 => Instr::Add { dst, a: pick(r), b: pick(r) },
            4 => Instr::Sub { dst, a: pick(r), b: pick(r) },
            5 | 6 => Instr::Mul { dst, a: pick(r), b: pick(r) },
            7 => Instr::Neg { dst, a: pick(r) },
            _ => {
                v.push(Instr::Fold { src: pick(r), constraint });
                constraint += 1;
                continue;
            }
        };
        v.push(i);
        if !written.contains(&dst) {
            written.push(dst);
        }
    }
    v.push(Instr::Fold { src: written[0], constraint });
    ConstraintProgram::new(&v).expect("well formed")
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let software = std::env::args().any(|a| a == "--software");
    let mut failed = 0;
    let mut cases = 0;
    for portable in [false, true] {
        let b = WgpuBackend::new(WgpuOptions {
            allow_software: software,
            portable_arithmetic: portable,
            ..WgpuOptions::default()
        })?;
        let info = b.adapter_info();
        println!(
            "adapter {} ({:?}, {}), {} arithmetic",
            info.name,
            info.device_type,
            info.driver_info,
            if b.uses_int64() { "native u64" } else { "u32-pair" }
        );
        let mut r = Rng(0x9e37_79b9_7f4a_7c15);
        let mut programs = kind_programs();
        for len in [12, 40, 200] {
            programs.push(("random", random_program(&mut r, len, 3)));
        }
        // (log2 n, log2 q, LDE rows per point)
        for (log_n, log_q, stride) in [(0, 0, 1), (2, 2, 1), (3, 4, 1), (5, 6, 2), (9, 10, 1), (12, 14, 1)] {
            for d in [1, 2, 3] {
                for (name, program) in &programs {
                    cases += 1;
                    let cols = 3;
                    let shape = MatrixShape::new((1 << log_q) * stride, cols)?;
                    let host = r.words(shape.len());
                    let values = r.words(2);
                    let alpha = r.words(program.constraints() * d);
                    let domain = loop {
                        if let Ok(dom) = QuotientDomain::new(log_n, log_q, r.next()) {
                            break dom;
                        }
                    };
                    let call = QuotientCall { program, domain, values: &values, alpha_powers: &alpha };
                    let want = naive_reference::quotient_values(&host, cols, program, domain, &values, &alpha);
                    let lde = b.upload(&host)?;
                    let mut out = b.upload(&vec![0xdead_beef; want.len()])?;
                    let got = match b.quotient_values(&lde, shape, &call, &mut out) {
                        Ok(()) => b.download_vec(&out)?,
                        Err(e) => {
                            failed += 1;
                            println!("  {name} ({} instrs) d {d} 2^{log_n}/2^{log_q}: error {e}", program.len());
                            continue;
                        }
                    };
                    let bad: Vec<usize> = (0..want.len()).filter(|&k| want[k] != got[k]).collect();
                    if bad.is_empty() {
                        continue;
                    }
                    failed += 1;
                    let k = bad[0];
                    println!(
                        "  {name} ({} instrs) d {d} 2^{log_n}/2^{log_q} stride {stride}: {} of {} words differ; first at \
                         point {} word {}: want {:#018x} got {:#018x}",
                        program.len(),
                        bad.len(),
                        want.len(),
                        k / d,
                        k % d,
                        want[k],
                        got[k]
                    );
                }
            }
        }
    }
    println!("{failed} of {cases} cases differ");
    if failed > 0 {
        std::process::exit(1);
    }
    Ok(())
}
