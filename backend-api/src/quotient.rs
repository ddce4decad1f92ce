//! Constraint programs: an AIR's constraints as data, and the quotient they fold to
//! ([`Backend::quotient_values`](crate::Backend::quotient_values)).
//!
//! A STARK's quotient is, at every point `x` of a coset of the quotient domain, the AIR's
//! constraints evaluated over the trace's low-degree extension at `x` (the row at `x` and the row
//! at `x` times the trace domain's generator), folded by powers of a challenge `alpha` and divided
//! by the trace domain's vanishing polynomial. The constraints are the same polynomial at every
//! row, so they are compiled once, on the host, into a [`ConstraintProgram`]: straight-line code
//! over registers holding base-field values, which every backend runs the same way at every row
//! (CONVENTIONS.md, "Quotient values"). The program knows nothing of the prover that made it:
//! the Plonky3 adapter compiles Plonky3's symbolic constraints into one, and another prover can
//! build one from its own constraint representation with [`Instr`].
//!
//! Values are exact field elements, so any evaluation order that is mathematically equal gives the
//! same bytes: a compiler may share subexpressions, reorder independent instructions or reuse
//! registers freely.

use crate::error::{Error, Result};
use crate::field;
use crate::shape::{MAX_EXTENSION_DEGREE, MAX_LOG_DOMAIN, MatrixShape};

/// The most registers a program may use: 2^16 (half a megabyte of values per row in flight).
pub const MAX_PROGRAM_REGISTERS: usize = 1 << 16;

/// The most instructions a program may hold: 2^24.
pub const MAX_PROGRAM_INSTRUCTIONS: usize = 1 << 24;

/// The most working memory a quotient evaluation should take for its register files beside its
/// output: 256 MiB. The built-in backends bound theirs by it (a program of many registers then
/// evaluates fewer points at a time), and the `commit` crate's memory model counts it.
pub const SCRATCH_BYTES: usize = 256 << 20;

/// The words of one encoded instruction ([`ConstraintProgram::code`]).
pub const INSTR_WORDS: usize = 4;

/// One of the trace domain's Lagrange selectors, as Plonky3 defines them over a coset of the
/// quotient domain (unnormalised: no division by the trace length).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Selector {
    /// `(x^n - 1) / (x - 1)`: zero on the trace domain except at its first point.
    FirstRow,
    /// `(x^n - 1) / (x - w^-1)` (`w` the trace domain's generator): zero on it except at its last.
    LastRow,
    /// `x - w^-1`: zero at the trace domain's last point only.
    Transition,
}

impl Selector {
    /// The three selectors, in their encoded order (`FirstRow` is 0).
    pub const ALL: [Selector; 3] = [Selector::FirstRow, Selector::LastRow, Selector::Transition];

    /// The selector's code in [`ConstraintProgram::code`].
    pub const fn code(self) -> u32 {
        match self {
            Selector::FirstRow => 0,
            Selector::LastRow => 1,
            Selector::Transition => 2,
        }
    }
}

/// One instruction of a [`ConstraintProgram`]. Registers hold base-field values; every register an
/// instruction reads was written by an earlier one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Instr {
    /// `r[dst] =` column `col` of the row at `x` (`next`: of the row at `x w`).
    Column {
        /// The register written.
        dst: u32,
        /// The LDE's column.
        col: u32,
        /// The next row instead of the current one.
        next: bool,
    },
    /// `r[dst] = values[index]`: a constant or a public value, given with each call.
    Value {
        /// The register written.
        dst: u32,
        /// The index into the call's values.
        index: u32,
    },
    /// `r[dst] =` the selector at `x`.
    Selector {
        /// The register written.
        dst: u32,
        /// Which selector.
        which: Selector,
    },
    /// `r[dst] = r[a] + r[b]`.
    Add {
        /// The register written.
        dst: u32,
        /// The first operand's register.
        a: u32,
        /// The second operand's register.
        b: u32,
    },
    /// `r[dst] = r[a] - r[b]`.
    Sub {
        /// The register written.
        dst: u32,
        /// The first operand's register.
        a: u32,
        /// The second operand's register.
        b: u32,
    },
    /// `r[dst] = r[a] * r[b]`.
    Mul {
        /// The register written.
        dst: u32,
        /// The first operand's register.
        a: u32,
        /// The second operand's register.
        b: u32,
    },
    /// `r[dst] = -r[a]`.
    Neg {
        /// The register written.
        dst: u32,
        /// The operand's register.
        a: u32,
    },
    /// `acc += alpha_powers[constraint] * r[src]`: constraint `constraint` is `r[src]`.
    Fold {
        /// The register holding the constraint's value.
        src: u32,
        /// The constraint's index: its power of the challenge is the call's
        /// `alpha_powers[constraint * d .. (constraint + 1) * d]`.
        constraint: u32,
    },
}

/// The opcodes of [`ConstraintProgram::code`] (CONVENTIONS.md, "Quotient values").
pub mod opcode {
    /// `r[dst] = lde[row][a]`.
    pub const COLUMN: u32 = 0;
    /// `r[dst] = lde[next row][a]`.
    pub const COLUMN_NEXT: u32 = 1;
    /// `r[dst] = values[a]`.
    pub const VALUE: u32 = 2;
    /// `r[dst] = selector a` (0 first row, 1 last row, 2 transition).
    pub const SELECTOR: u32 = 3;
    /// `r[dst] = r[a] + r[b]`.
    pub const ADD: u32 = 4;
    /// `r[dst] = r[a] - r[b]`.
    pub const SUB: u32 = 5;
    /// `r[dst] = r[a] * r[b]`.
    pub const MUL: u32 = 6;
    /// `r[dst] = -r[a]`.
    pub const NEG: u32 = 7;
    /// `acc += alpha_powers[b] * r[a]`.
    pub const FOLD: u32 = 8;
}

impl Instr {
    /// The instruction's encoding: `[opcode, dst, a, b]` ([`opcode`]; unused words 0).
    pub const fn encode(self) -> [u32; INSTR_WORDS] {
        match self {
            Instr::Column { dst, col, next: false } => [opcode::COLUMN, dst, col, 0],
            Instr::Column { dst, col, next: true } => [opcode::COLUMN_NEXT, dst, col, 0],
            Instr::Value { dst, index } => [opcode::VALUE, dst, index, 0],
            Instr::Selector { dst, which } => [opcode::SELECTOR, dst, which.code(), 0],
            Instr::Add { dst, a, b } => [opcode::ADD, dst, a, b],
            Instr::Sub { dst, a, b } => [opcode::SUB, dst, a, b],
            Instr::Mul { dst, a, b } => [opcode::MUL, dst, a, b],
            Instr::Neg { dst, a } => [opcode::NEG, dst, a, 0],
            Instr::Fold { src, constraint } => [opcode::FOLD, 0, src, constraint],
        }
    }

    /// The instruction an encoding stands for, `None` for words no instruction encodes to.
    pub fn decode(words: [u32; INSTR_WORDS]) -> Option<Instr> {
        let [op, dst, a, b] = words;
        let no_b = b == 0;
        Some(match op {
            opcode::COLUMN if no_b => Instr::Column { dst, col: a, next: false },
            opcode::COLUMN_NEXT if no_b => Instr::Column { dst, col: a, next: true },
            opcode::VALUE if no_b => Instr::Value { dst, index: a },
            opcode::SELECTOR if no_b => Instr::Selector { dst, which: *Selector::ALL.get(a as usize)? },
            opcode::ADD => Instr::Add { dst, a, b },
            opcode::SUB => Instr::Sub { dst, a, b },
            opcode::MUL => Instr::Mul { dst, a, b },
            opcode::NEG if no_b => Instr::Neg { dst, a },
            opcode::FOLD if dst == 0 => Instr::Fold { src: a, constraint: b },
            _ => return None,
        })
    }

    /// The register the instruction writes, if any.
    pub const fn dst(self) -> Option<u32> {
        match self {
            Instr::Column { dst, .. }
            | Instr::Value { dst, .. }
            | Instr::Selector { dst, .. }
            | Instr::Add { dst, .. }
            | Instr::Sub { dst, .. }
            | Instr::Mul { dst, .. }
            | Instr::Neg { dst, .. } => Some(dst),
            Instr::Fold { .. } => None,
        }
    }

    /// The registers the instruction reads (up to two).
    pub fn reads(self) -> impl Iterator<Item = u32> {
        let (a, b) = match self {
            Instr::Add { a, b, .. } | Instr::Sub { a, b, .. } | Instr::Mul { a, b, .. } => (Some(a), Some(b)),
            Instr::Neg { a, .. } => (Some(a), None),
            Instr::Fold { src, .. } => (Some(src), None),
            Instr::Column { .. } | Instr::Value { .. } | Instr::Selector { .. } => (None, None),
        };
        a.into_iter().chain(b)
    }
}

/// A validated constraint program: straight-line code whose every read register was written
/// before, within the bounds it declares. Built once per AIR ([`ConstraintProgram::new`]) and run at
/// every row of the quotient domain by [`Backend::quotient_values`](crate::Backend::quotient_values).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConstraintProgram {
    code: Vec<u32>,
    registers: usize,
    columns: usize,
    values: usize,
    constraints: usize,
    selectors: [bool; 3],
}

impl ConstraintProgram {
    /// Validates `instrs` into a program.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty program, one without a [`Instr::Fold`], more than
    /// [`MAX_PROGRAM_INSTRUCTIONS`] instructions, a register at or past
    /// [`MAX_PROGRAM_REGISTERS`], a register read before any instruction wrote it, or a column,
    /// value or constraint index past `u32::MAX - 1`; each message names the instruction.
    pub fn new(instrs: &[Instr]) -> Result<Self> {
        if instrs.len() > MAX_PROGRAM_INSTRUCTIONS {
            return Err(invalid(format!(
                "{} instructions, more than the {MAX_PROGRAM_INSTRUCTIONS} a program may hold",
                instrs.len()
            )));
        }
        let mut written = vec![false; 0];
        let (mut registers, mut columns, mut values, mut constraints) = (0usize, 0usize, 0usize, 0usize);
        let mut selectors = [false; 3];
        let mut code = Vec::with_capacity(instrs.len() * INSTR_WORDS);
        for (at, &instr) in instrs.iter().enumerate() {
            for r in instr.reads() {
                if !written.get(r as usize).copied().unwrap_or(false) {
                    return Err(invalid(format!(
                        "instruction {at} ({instr:?}) reads register {r} before it is written"
                    )));
                }
            }
            let index_bound = |i: u32, what: &str| -> Result<usize> {
                if i == u32::MAX {
                    return Err(invalid(format!("instruction {at} ({instr:?}): {what} index {i} is out of range")));
                }
                Ok(i as usize + 1)
            };
            match instr {
                Instr::Column { col, .. } => columns = columns.max(index_bound(col, "column")?),
                Instr::Value { index, .. } => values = values.max(index_bound(index, "value")?),
                Instr::Selector { which, .. } => selectors[which.code() as usize] = true,
                Instr::Fold { constraint, .. } => constraints = constraints.max(index_bound(constraint, "constraint")?),
                Instr::Add { .. } | Instr::Sub { .. } | Instr::Mul { .. } | Instr::Neg { .. } => {}
            }
            if let Some(dst) = instr.dst() {
                let dst = dst as usize;
                if dst >= MAX_PROGRAM_REGISTERS {
                    return Err(invalid(format!(
                        "instruction {at} ({instr:?}) writes register {dst}; a program has at most {MAX_PROGRAM_REGISTERS}"
                    )));
                }
                if dst >= written.len() {
                    written.resize(dst + 1, false);
                }
                written[dst] = true;
                registers = registers.max(dst + 1);
            }
            code.extend_from_slice(&instr.encode());
        }
        if constraints == 0 {
            return Err(invalid("a program folds at least one constraint (it has no Fold)".into()));
        }
        Ok(Self { code, registers, columns, values, constraints, selectors })
    }

    /// The program decoded from its encoding ([`ConstraintProgram::code`]), validated as
    /// [`ConstraintProgram::new`] validates it.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a length that is not a whole number of instructions or words
    /// no instruction encodes to; then [`ConstraintProgram::new`]'s.
    pub fn from_code(code: &[u32]) -> Result<Self> {
        if !code.len().is_multiple_of(INSTR_WORDS) {
            return Err(invalid(format!(
                "{} words are not a whole number of {INSTR_WORDS}-word instructions",
                code.len()
            )));
        }
        let instrs = code
            .chunks_exact(INSTR_WORDS)
            .enumerate()
            .map(|(at, w)| {
                let words = [w[0], w[1], w[2], w[3]];
                Instr::decode(words)
                    .ok_or_else(|| invalid(format!("instruction {at}: {words:?} encodes no instruction")))
            })
            .collect::<Result<Vec<_>>>()?;
        Self::new(&instrs)
    }

    /// The encoded instructions, [`INSTR_WORDS`] words each (`[opcode, dst, a, b]`, [`opcode`]):
    /// what a kernel reads.
    pub fn code(&self) -> &[u32] {
        &self.code
    }

    /// The instructions.
    pub fn instrs(&self) -> impl ExactSizeIterator<Item = Instr> + '_ {
        self.code.chunks_exact(INSTR_WORDS).map(|w| Instr::decode([w[0], w[1], w[2], w[3]]).expect("validated"))
    }

    /// The number of instructions.
    pub fn len(&self) -> usize {
        self.code.len() / INSTR_WORDS
    }

    /// Whether the program has no instructions (never: a program folds a constraint).
    pub fn is_empty(&self) -> bool {
        self.code.is_empty()
    }

    /// The registers a row's evaluation holds: one more than the highest written.
    pub fn registers(&self) -> usize {
        self.registers
    }

    /// The columns the program reads: one more than the highest (the LDE has at least as many).
    pub fn columns(&self) -> usize {
        self.columns
    }

    /// The values a call gives at least: one more than the highest index read.
    pub fn values(&self) -> usize {
        self.values
    }

    /// The constraints folded: one more than the highest index (a call gives as many powers of
    /// the challenge).
    pub fn constraints(&self) -> usize {
        self.constraints
    }

    /// Whether the program reads `which`.
    pub fn uses(&self, which: Selector) -> bool {
        self.selectors[which.code() as usize]
    }

    /// The multiplications one row costs: the program's `Mul`s, `d` per `Fold`, the selectors'
    /// divisions (about 90 multiplications each, Fermat's inverse) and the final product by the
    /// vanishing polynomial's inverse (`d` and one inverse). A cost model for ceilings, not a
    /// count of any backend's instructions.
    pub fn muls_per_row(&self, d: usize) -> usize {
        const INVERSE: usize = 90;
        let body: usize = self
            .instrs()
            .map(|i| match i {
                Instr::Mul { .. } => 1,
                Instr::Fold { .. } => d,
                _ => 0,
            })
            .sum();
        let divisions = usize::from(self.uses(Selector::FirstRow)) + usize::from(self.uses(Selector::LastRow)) + 1;
        body + d + divisions * INVERSE
    }
}

/// Where a quotient is evaluated: the `2^log_quotient_rows` points `shift * v^i` of a coset of
/// the quotient domain (`v` its generator, [`field::root_of_unity`]), for a trace domain of
/// `2^log_trace_rows` points (generator `w`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct QuotientDomain {
    log_trace_rows: u32,
    log_quotient_rows: u32,
    shift: u64,
}

impl QuotientDomain {
    /// Validates the domain.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] unless `log_trace_rows <= log_quotient_rows <=`
    /// [`MAX_LOG_DOMAIN`] and the coset is disjoint from the subgroup of its size (`shift^q != 1`
    /// for `q` points, `shift` taken mod p): on such a coset no point is a root of the vanishing
    /// polynomial or of a selector's denominator, so every division is defined; a shift of 0 is no
    /// coset.
    pub fn new(log_trace_rows: u32, log_quotient_rows: u32, shift: u64) -> Result<Self> {
        if log_trace_rows > log_quotient_rows || log_quotient_rows > MAX_LOG_DOMAIN {
            return Err(invalid(format!(
                "a quotient domain of 2^{log_quotient_rows} points for a trace of 2^{log_trace_rows} rows \
                 (the trace's at most the quotient's, at most 2^{MAX_LOG_DOMAIN})"
            )));
        }
        let shift = field::canonical(shift);
        if shift == 0 {
            return Err(invalid("shift 0: every point of the coset would be 0".into()));
        }
        if field::pow(shift, 1u64 << log_quotient_rows) == 1 {
            return Err(invalid(format!(
                "shift {shift}: the coset of 2^{log_quotient_rows} points meets the subgroup of that order, \
                 where the vanishing polynomial is zero"
            )));
        }
        Ok(Self { log_trace_rows, log_quotient_rows, shift })
    }

    /// `log2` of the trace domain's size.
    pub const fn log_trace_rows(&self) -> u32 {
        self.log_trace_rows
    }

    /// `log2` of the quotient domain's size.
    pub const fn log_quotient_rows(&self) -> u32 {
        self.log_quotient_rows
    }

    /// The quotient domain's size.
    pub const fn quotient_rows(&self) -> usize {
        1 << self.log_quotient_rows
    }

    /// The coset's shift (canonical).
    pub const fn shift(&self) -> u64 {
        self.shift
    }

    /// How many quotient rows apart a row and its next row are: `q / n`.
    pub const fn next_step(&self) -> usize {
        1 << (self.log_quotient_rows - self.log_trace_rows)
    }
}

/// What a [`Backend::quotient_values`](crate::Backend::quotient_values) call evaluates, besides
/// the LDE it reads.
#[derive(Clone, Copy, Debug)]
pub struct QuotientCall<'a> {
    /// The constraints.
    pub program: &'a ConstraintProgram,
    /// The points.
    pub domain: QuotientDomain,
    /// The values [`Instr::Value`] reads (the AIR's constants and public values), any words.
    pub values: &'a [u64],
    /// The powers of the challenge, `d` coordinates each, constraint `j`'s at `j * d`: in
    /// Plonky3's order constraint `j` of `K` gets `alpha^(K - 1 - j)`.
    pub alpha_powers: &'a [u64],
}

impl QuotientCall<'_> {
    /// The extension degree: coordinates per challenge power (valid after the front's check).
    pub fn degree(&self) -> usize {
        self.alpha_powers.len() / self.program.constraints()
    }
}

/// The arguments of a [`Backend::quotient_values`](crate::Backend::quotient_values) call, checked
/// against each other ([`crate::validate::quotient_values`]). Returns the extension degree `d`.
pub(crate) fn check_call(
    lde: MatrixShape,
    lde_len: usize,
    program: &ConstraintProgram,
    domain: &QuotientDomain,
    values_len: usize,
    alpha_len: usize,
    out_len: usize,
) -> Result<usize> {
    lde.check_len("quotient_values LDE", lde_len)?;
    let q = domain.quotient_rows();
    if !lde.rows().is_power_of_two() || lde.rows() < q {
        return Err(invalid(format!(
            "quotient_values: an LDE of {} rows does not hold a quotient domain of {q} points \
             (a power of two of at least that many rows, every (rows / {q})-th one read)",
            lde.rows()
        )));
    }
    if program.columns() > lde.cols() {
        return Err(invalid(format!(
            "quotient_values: the program reads {} columns, the LDE has {}",
            program.columns(),
            lde.cols()
        )));
    }
    if values_len < program.values() {
        return Err(Error::LengthMismatch {
            what: "quotient_values values (at least the program reads)",
            expected: program.values(),
            actual: values_len,
        });
    }
    let k = program.constraints();
    if !alpha_len.is_multiple_of(k) || !(1..=MAX_EXTENSION_DEGREE).contains(&(alpha_len / k)) {
        return Err(invalid(format!(
            "quotient_values: {alpha_len} words of challenge powers for {k} constraints \
             (d words each, d from 1 to {MAX_EXTENSION_DEGREE})"
        )));
    }
    let d = alpha_len / k;
    let expected = q.checked_mul(d).ok_or(Error::SizeOverflow { what: "quotient_values output", elems: q })?;
    if out_len != expected {
        return Err(Error::LengthMismatch { what: "quotient_values output (points x d)", expected, actual: out_len });
    }
    Ok(d)
}

fn invalid(message: String) -> Error {
    Error::InvalidArgument(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(dst: u32, col: u32) -> Instr {
        Instr::Column { dst, col, next: false }
    }

    #[test]
    fn every_instruction_round_trips_through_its_encoding() {
        let all = [
            col(1, 2),
            Instr::Column { dst: 3, col: 4, next: true },
            Instr::Value { dst: 5, index: 6 },
            Instr::Selector { dst: 7, which: Selector::LastRow },
            Instr::Add { dst: 8, a: 9, b: 10 },
            Instr::Sub { dst: 11, a: 12, b: 13 },
            Instr::Mul { dst: 14, a: 15, b: 16 },
            Instr::Neg { dst: 17, a: 18 },
            Instr::Fold { src: 19, constraint: 20 },
        ];
        for i in all {
            assert_eq!(Instr::decode(i.encode()), Some(i));
        }
        for bad in [[9, 0, 0, 0], [opcode::SELECTOR, 0, 3, 0], [opcode::FOLD, 1, 0, 0], [opcode::COLUMN, 0, 0, 1]] {
            assert_eq!(Instr::decode(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_program_declares_what_it_reads() {
        let p = ConstraintProgram::new(&[
            col(0, 4),
            Instr::Value { dst: 1, index: 2 },
            Instr::Selector { dst: 2, which: Selector::Transition },
            Instr::Mul { dst: 0, a: 0, b: 2 },
            Instr::Fold { src: 0, constraint: 3 },
            Instr::Fold { src: 1, constraint: 0 },
        ])
        .unwrap();
        assert_eq!((p.len(), p.registers(), p.columns(), p.values(), p.constraints()), (6, 3, 5, 3, 4));
        assert!(p.uses(Selector::Transition) && !p.uses(Selector::FirstRow) && !p.uses(Selector::LastRow));
        assert_eq!(ConstraintProgram::from_code(p.code()).unwrap(), p);
        // 1 Mul, 2 folds of d = 2, the final product (2) and the vanishing polynomial's inverse.
        assert_eq!(p.muls_per_row(2), 1 + 4 + 2 + 90);
    }

    #[test]
    fn malformed_programs_are_refused() {
        let refused = |instrs: &[Instr], needle: &str| {
            let e = ConstraintProgram::new(instrs).unwrap_err();
            assert!(matches!(&e, Error::InvalidArgument(m) if m.contains(needle)), "{e}");
        };
        refused(&[], "at least one constraint");
        refused(&[col(0, 0)], "at least one constraint");
        refused(&[Instr::Fold { src: 0, constraint: 0 }], "reads register 0 before");
        refused(&[col(0, 0), Instr::Add { dst: 1, a: 0, b: 1 }], "reads register 1 before");
        refused(&[col(0, 0), Instr::Neg { dst: 2, a: 1 }], "reads register 1 before");
        refused(&[col(MAX_PROGRAM_REGISTERS as u32, 0)], "writes register");
        refused(&[col(0, u32::MAX)], "column index");
        refused(&[Instr::Value { dst: 0, index: u32::MAX }], "value index");
        refused(&[col(0, 0), Instr::Fold { src: 0, constraint: u32::MAX }], "constraint index");
        let e = ConstraintProgram::from_code(&[0, 0, 0]).unwrap_err();
        assert!(matches!(&e, Error::InvalidArgument(m) if m.contains("whole number")), "{e}");
        let e = ConstraintProgram::from_code(&[42, 0, 0, 0]).unwrap_err();
        assert!(matches!(&e, Error::InvalidArgument(m) if m.contains("encodes no instruction")), "{e}");
        // The highest register is fine.
        let top = MAX_PROGRAM_REGISTERS as u32 - 1;
        ConstraintProgram::new(&[col(top, 0), Instr::Fold { src: top, constraint: 0 }]).unwrap();
    }

    #[test]
    fn quotient_domains_avoid_the_vanishing_polynomials_roots() {
        let d = QuotientDomain::new(3, 5, field::GENERATOR + field::P).unwrap();
        assert_eq!((d.quotient_rows(), d.next_step(), d.shift()), (32, 4, field::GENERATOR));
        assert_eq!(QuotientDomain::new(5, 5, 7).unwrap().next_step(), 1);
        assert!(QuotientDomain::new(6, 5, 7).is_err(), "a trace larger than the quotient domain");
        assert!(QuotientDomain::new(0, MAX_LOG_DOMAIN + 1, 7).is_err());
        for shift in [0, 1, field::P + 1, field::root_of_unity(5), field::root_of_unity(3)] {
            assert!(QuotientDomain::new(3, 5, shift).is_err(), "shift {shift}");
        }
        // An element of order 2^6 is outside the subgroup of order 2^5.
        QuotientDomain::new(3, 5, field::root_of_unity(6)).unwrap();
    }

    #[test]
    fn calls_are_checked_against_the_program() {
        let p = ConstraintProgram::new(&[
            col(0, 2),
            Instr::Value { dst: 1, index: 0 },
            Instr::Fold { src: 0, constraint: 0 },
            Instr::Fold { src: 1, constraint: 1 },
        ])
        .unwrap();
        let domain = QuotientDomain::new(2, 3, 7).unwrap();
        let lde = MatrixShape::new(16, 3).unwrap();
        assert_eq!(check_call(lde, 48, &p, &domain, 1, 4, 16).unwrap(), 2);
        assert_eq!(check_call(MatrixShape::new(8, 3).unwrap(), 24, &p, &domain, 1, 2, 8).unwrap(), 1);
        assert_eq!(check_call(lde, 48, &p, &domain, 1, 10, 40).unwrap(), 5, "degree 5 of 2 constraints");
        assert!(matches!(check_call(lde, 47, &p, &domain, 1, 4, 16), Err(Error::LengthMismatch { .. })));
        for rows in [4, 12] {
            let shape = MatrixShape::new(rows, 3).unwrap();
            let e = check_call(shape, rows * 3, &p, &domain, 1, 4, 16).unwrap_err();
            assert!(matches!(&e, Error::InvalidArgument(m) if m.contains("does not hold")), "{rows}: {e}");
        }
        let narrow = MatrixShape::new(16, 2).unwrap();
        assert!(
            matches!(check_call(narrow, 32, &p, &domain, 1, 4, 16), Err(Error::InvalidArgument(m)) if m.contains("columns"))
        );
        assert_eq!(check_call(lde, 48, &p, &domain, 2, 4, 16).unwrap(), 2, "values the program does not read");
        assert!(matches!(
            check_call(lde, 48, &p, &domain, 0, 4, 16),
            Err(Error::LengthMismatch {
                what: "quotient_values values (at least the program reads)",
                expected: 1,
                actual: 0
            })
        ));
        for alpha in [0, 3, 2 * (MAX_EXTENSION_DEGREE + 1)] {
            let e = check_call(lde, 48, &p, &domain, 1, alpha, 16).unwrap_err();
            assert!(matches!(&e, Error::InvalidArgument(m) if m.contains("challenge powers")), "{alpha}: {e}");
        }
        assert!(matches!(
            check_call(lde, 48, &p, &domain, 1, 4, 17),
            Err(Error::LengthMismatch { what: "quotient_values output (points x d)", expected: 16, actual: 17 })
        ));
    }
}
