//! Plonky3's symbolic constraints compiled into a backend-neutral [`ConstraintProgram`], and the
//! quotient evaluated with it on the backend where the trace's LDE lies.
//!
//! **What is compiled.** The constraints `p3_air`'s [`SymbolicAirBuilder`] records for the AIR (the
//! path p3-uni-stark itself takes to size the quotient): main-trace cells of the current and next
//! rows, the three selectors, public values and constants. An AIR with preprocessed or periodic
//! columns, or with constraints in the extension field (lookups), is refused with the reason
//! ([`Uncompiled`]); the prover then evaluates its quotient with Plonky3's own code.
//!
//! **How.** The expression DAG is flattened with shared subexpressions merged: by node identity
//! first (Plonky3 shares `Arc`s), then structurally (an `x * y` built twice is one node; `+` and `*`
//! are normalised for commutativity). Interior nodes are scheduled depth first, constraint by
//! constraint in Plonky3's order, each constraint folded right after its root; leaves (cells,
//! selectors, constants) are loaded where they are used rather than kept, and registers are
//! reused as soon as their last reader has run (a linear scan over the schedule, lowest free
//! register first). So a row holds only what the constraints still to come will read. Where that
//! is still more than a small register file (32 values), cheap shared subexpressions are
//! recomputed in each constraint that reads them instead of kept between constraints far apart:
//! the cheapest such threshold that fits is taken (the Keccak-f AIR: 260 registers become 6 for
//! 24% more instructions), else the one with the fewest registers.
//!
//! Plonky3 folds constraint `j` of `K` with `alpha^(K - 1 - j)` in the extension field; a
//! base-field constraint times an extension element is `d` base-field products, so the program is
//! base-field code throughout and every extension degree runs the same program.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::sync::Arc;

use backend_api::quotient::{ConstraintProgram, Instr, Selector};
use p3_air::Air;
use p3_air::symbolic::{AirLayout, BaseEntry, BaseLeaf, SymbolicAirBuilder, SymbolicExpr, SymbolicExpression};
use p3_field::{ExtensionField, PrimeField64};
use p3_goldilocks::Goldilocks;
use rayon::prelude::*;

/// Why an AIR's constraints were not compiled: its quotient is then Plonky3's host code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Uncompiled(pub String);

impl fmt::Display for Uncompiled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An AIR's constraints as a [`ConstraintProgram`], with the constants its values table starts
/// with (the public values follow them, per proof).
#[derive(Clone, Debug)]
pub struct CompiledAir {
    program: ConstraintProgram,
    constants: Vec<u64>,
    public_values: usize,
    nodes: usize,
}

impl CompiledAir {
    /// Compiles `air`'s constraints under `layout` (as p3-uni-stark builds it: main width, public
    /// values; no preprocessed, periodic or permutation columns).
    ///
    /// # Errors
    /// [`Uncompiled`] for preprocessed, periodic or permutation columns, extension-field
    /// constraints, an AIR without constraints, or a program past the backends' limits.
    pub fn compile<A: Air<SymbolicAirBuilder<Goldilocks>>>(air: &A, layout: AirLayout) -> Result<Self, Uncompiled> {
        if layout.preprocessed_width > 0 {
            return Err(Uncompiled(format!("{} preprocessed columns", layout.preprocessed_width)));
        }
        if layout.num_periodic_columns > 0 {
            return Err(Uncompiled(format!("{} periodic columns", layout.num_periodic_columns)));
        }
        if layout.permutation_width > 0 || layout.num_permutation_challenges > 0 || layout.num_permutation_values > 0 {
            return Err(Uncompiled("a permutation (lookup) trace".into()));
        }
        let mut builder = SymbolicAirBuilder::<Goldilocks>::new(layout);
        air.eval(&mut builder);
        let order = builder.constraint_layout();
        if !order.ext_indices.is_empty() {
            return Err(Uncompiled(format!("{} extension-field constraints", order.ext_indices.len())));
        }
        let constraints = builder.base_constraints();
        if constraints.is_empty() {
            return Err(Uncompiled("no constraints".into()));
        }
        let mut dag = Dag::default();
        let roots: Vec<(Node, u32)> = constraints
            .iter()
            .zip(&order.base_indices)
            .map(|(c, &global)| Ok((dag.node(c)?, u32::try_from(global).map_err(|_| too_many())?)))
            .collect::<Result<_, Uncompiled>>()?;
        let nodes = dag.interior.len();
        // The cheapest rematerialization that brings the register file down to SMALL_FILE, else
        // the one with the fewest registers (then instructions); the candidates are scheduled at
        // once, on the host's idle cores while the trace commits.
        let candidates: Vec<Result<ConstraintProgram, Uncompiled>> = REMAT_COSTS
            .par_iter()
            .map(|&max_cost| {
                let (interior, roots) = rematerialize(&dag.interior, &roots, max_cost);
                let code = schedule(&interior, dag.constants.len(), &roots, layout.num_public_values)?;
                ConstraintProgram::new(&code).map_err(|e| Uncompiled(format!("the compiled program: {e}")))
            })
            .collect();
        let mut best: Option<ConstraintProgram> = None;
        for candidate in candidates {
            let program = match (candidate, &best) {
                (Ok(p), _) => p,
                // A copy past the program's limits: the cheaper candidates stand.
                (Err(_), Some(_)) => break,
                (Err(e), None) => return Err(e),
            };
            let small = program.registers() <= SMALL_FILE;
            if best.as_ref().is_none_or(|b| (program.registers(), program.len()) < (b.registers(), b.len())) {
                best = Some(program);
            }
            if small {
                break;
            }
        }
        let program = best.expect("REMAT_COSTS is not empty");
        Ok(Self { program, constants: dag.constants, public_values: layout.num_public_values, nodes })
    }

    /// The program.
    pub fn program(&self) -> &ConstraintProgram {
        &self.program
    }

    /// The distinct arithmetic nodes of the constraints after sharing (the program's size before
    /// leaves are loaded and constraints folded).
    pub fn nodes(&self) -> usize {
        self.nodes
    }

    /// The values table of a proof: the constants, then `public_values`.
    ///
    /// # Errors
    /// [`Uncompiled`] when the AIR declares another number of public values.
    pub fn values(&self, public_values: &[Goldilocks]) -> Result<Vec<u64>, Uncompiled> {
        if public_values.len() != self.public_values {
            return Err(Uncompiled(format!(
                "{} public values given, the AIR declares {}",
                public_values.len(),
                self.public_values
            )));
        }
        Ok(self.constants.iter().copied().chain(public_values.iter().map(|v| v.as_canonical_u64())).collect())
    }

    /// The challenge powers in the program's layout: constraint `j` of `K` gets `alpha^(K - 1 -
    /// j)` (Plonky3's fold), `d` base-field coordinates each.
    pub fn alpha_powers<Challenge: ExtensionField<Goldilocks>>(&self, alpha: Challenge) -> Vec<u64> {
        let k = self.program.constraints();
        let mut powers: Vec<Challenge> = alpha.powers().take(k).collect();
        powers.reverse();
        powers
            .iter()
            .flat_map(|p| p.as_basis_coefficients_slice().iter().map(|c| c.as_canonical_u64()).collect::<Vec<_>>())
            .collect()
    }
}

fn too_many() -> Uncompiled {
    Uncompiled("more constraints, columns or values than a program indexes (2^32)".into())
}

/// A node of the flattened DAG: a leaf, loaded where it is used, or an interior node (its index
/// in [`Dag::interior`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Node {
    Column { col: u32, next: bool },
    Value(u32),
    Selector(Selector),
    Interior(u32),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Op {
    Add(Node, Node),
    Sub(Node, Node),
    Mul(Node, Node),
    Neg(Node),
}

impl Op {
    fn operands(self) -> impl Iterator<Item = Node> {
        let (a, b) = match self {
            Op::Add(a, b) | Op::Sub(a, b) | Op::Mul(a, b) => (a, Some(b)),
            Op::Neg(a) => (a, None),
        };
        std::iter::once(a).chain(b)
    }
}

#[derive(Default)]
struct Dag {
    interior: Vec<Op>,
    /// Structural sharing: each interior operation's node.
    shared: HashMap<Op, Node>,
    /// Identity sharing: each visited expression's node, by address (the expressions outlive the
    /// compilation).
    seen: HashMap<*const SymbolicExpression<Goldilocks>, Node>,
    constants: Vec<u64>,
    constant_at: HashMap<u64, u32>,
}

impl Dag {
    fn node(&mut self, e: &SymbolicExpression<Goldilocks>) -> Result<Node, Uncompiled> {
        let key = e as *const _;
        if let Some(&n) = self.seen.get(&key) {
            return Ok(n);
        }
        // Depth first with an explicit stack: hash AIRs nest thousands of levels deep.
        let mut stack: Vec<(&SymbolicExpression<Goldilocks>, bool)> = vec![(e, false)];
        while let Some((e, expanded)) = stack.pop() {
            let key = e as *const _;
            if self.seen.contains_key(&key) {
                continue;
            }
            let children: Vec<&Arc<SymbolicExpression<Goldilocks>>> = match e {
                SymbolicExpr::Leaf(_) => vec![],
                SymbolicExpr::Add { x, y, .. } | SymbolicExpr::Sub { x, y, .. } | SymbolicExpr::Mul { x, y, .. } => {
                    vec![x, y]
                }
                SymbolicExpr::Neg { x, .. } => vec![x],
            };
            let pending: Vec<_> = children.iter().filter(|c| !self.seen.contains_key(&Arc::as_ptr(c))).collect();
            if !expanded && !pending.is_empty() {
                stack.push((e, true));
                stack.extend(pending.into_iter().map(|c| (&***c, false)));
                continue;
            }
            let node = self.make(e)?;
            self.seen.insert(key, node);
        }
        Ok(self.seen[&key])
    }

    /// The node of `e`, whose children have nodes.
    fn make(&mut self, e: &SymbolicExpression<Goldilocks>) -> Result<Node, Uncompiled> {
        let child = |c: &Arc<SymbolicExpression<Goldilocks>>| self.seen[&Arc::as_ptr(c)];
        let op = match e {
            SymbolicExpr::Leaf(leaf) => return self.leaf(leaf),
            SymbolicExpr::Add { x, y, .. } => {
                let (a, b) = (child(x), child(y));
                Op::Add(a.min(b), a.max(b))
            }
            SymbolicExpr::Mul { x, y, .. } => {
                let (a, b) = (child(x), child(y));
                Op::Mul(a.min(b), a.max(b))
            }
            SymbolicExpr::Sub { x, y, .. } => Op::Sub(child(x), child(y)),
            SymbolicExpr::Neg { x, .. } => Op::Neg(child(x)),
        };
        if let Some(&n) = self.shared.get(&op) {
            return Ok(n);
        }
        let n = Node::Interior(u32::try_from(self.interior.len()).map_err(|_| too_many())?);
        self.interior.push(op);
        self.shared.insert(op, n);
        Ok(n)
    }

    fn leaf(&mut self, leaf: &BaseLeaf<Goldilocks>) -> Result<Node, Uncompiled> {
        let index = |i: usize| u32::try_from(i).map_err(|_| too_many());
        Ok(match leaf {
            BaseLeaf::Variable(v) => match v.entry {
                BaseEntry::Main { offset: 0 } => Node::Column { col: index(v.index)?, next: false },
                BaseEntry::Main { offset: 1 } => Node::Column { col: index(v.index)?, next: true },
                BaseEntry::Main { offset } => {
                    return Err(Uncompiled(format!("a main-trace cell at row offset {offset}")));
                }
                // Public values follow the constants in the values table; the constants' count is
                // known only at the end, so they are numbered from the top for now.
                BaseEntry::Public => Node::Value(u32::MAX - index(v.index)?),
                BaseEntry::Preprocessed { .. } => return Err(Uncompiled("a preprocessed cell".into())),
                BaseEntry::Periodic => return Err(Uncompiled("a periodic cell".into())),
            },
            BaseLeaf::IsFirstRow => Node::Selector(Selector::FirstRow),
            BaseLeaf::IsLastRow => Node::Selector(Selector::LastRow),
            BaseLeaf::IsTransition => Node::Selector(Selector::Transition),
            BaseLeaf::Constant(c) => {
                let c = c.as_canonical_u64();
                let next = index(self.constants.len())?;
                let at = *self.constant_at.entry(c).or_insert(next);
                if at == next {
                    self.constants.push(c);
                }
                Node::Value(at)
            }
        })
    }
}

/// The rematerialization thresholds [`CompiledAir::compile`] tries, cheapest first: the most
/// operations a shared subexpression may cost and still be recomputed in each constraint that
/// reads it ([`rematerialize`]). 0 recomputes nothing.
const REMAT_COSTS: [u32; 11] = [0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32];

/// The register file a program should fit in, in values per point: 32 (CUDA then keeps four
/// blocks' files in 128 KiB of shared memory per multiprocessor). The Keccak-f AIR's constraints,
/// scheduled in Plonky3's order, keep 260 values live (XORs of two bits that constraints far apart
/// read); recomputing the shared subexpressions of at most 12 operations in each constraint
/// brings them to 6 for 24% more instructions.
const SMALL_FILE: usize = 32;

/// The DAG with each cheap subexpression (at most `max_cost` operations, counting the cheap
/// subexpressions it is built from) copied into every constraint that reads it: shared within a
/// constraint, recomputed across constraints. A hash AIR reads such values (an XOR of two bits,
/// `a + b - 2ab`) from constraints far apart in Plonky3's order, and kept, they would fill the
/// register file between them. Dearer nodes stay shared by every constraint.
fn rematerialize(interior: &[Op], roots: &[(Node, u32)], max_cost: u32) -> (Vec<Op>, Vec<(Node, u32)>) {
    // Operands precede their nodes in `interior`, so one pass in order prices every node.
    let mut cost = vec![0u32; interior.len()];
    for (n, op) in interior.iter().enumerate() {
        let inherited: u32 = op
            .operands()
            .filter_map(|o| match o {
                Node::Interior(c) if cost[c as usize] <= max_cost => Some(cost[c as usize]),
                _ => None,
            })
            .sum();
        cost[n] = inherited.saturating_add(1);
    }
    let cheap = |n: u32| cost[n as usize] <= max_cost;
    let mut out: Vec<Op> = Vec::with_capacity(interior.len());
    let mut global: HashMap<u32, Node> = HashMap::new();
    let mut new_roots = Vec::with_capacity(roots.len());
    for &(root, constraint) in roots {
        let Node::Interior(r) = root else {
            new_roots.push((root, constraint));
            continue;
        };
        // This constraint's copies of cheap nodes.
        let mut local: HashMap<u32, Node> = HashMap::new();
        let mut stack = vec![(r, false)];
        while let Some((n, expanded)) = stack.pop() {
            let done = if cheap(n) { local.contains_key(&n) } else { global.contains_key(&n) };
            if done {
                continue;
            }
            let op = interior[n as usize];
            if !expanded {
                stack.push((n, true));
                for operand in op.operands() {
                    if let Node::Interior(c) = operand {
                        stack.push((c, false));
                    }
                }
                continue;
            }
            let map = |o: Node| match o {
                Node::Interior(c) if cheap(c) => local[&c],
                Node::Interior(c) => global[&c],
                leaf => leaf,
            };
            let copy = match op {
                Op::Add(a, b) => Op::Add(map(a), map(b)),
                Op::Sub(a, b) => Op::Sub(map(a), map(b)),
                Op::Mul(a, b) => Op::Mul(map(a), map(b)),
                Op::Neg(a) => Op::Neg(map(a)),
            };
            // Fewer than 2^32 nodes: each constraint copies at most the nodes it reads, and the
            // program's own limits refuse a larger one.
            let node = Node::Interior(out.len() as u32);
            out.push(copy);
            if cheap(n) {
                local.insert(n, node);
            } else {
                global.insert(n, node);
            }
        }
        new_roots.push((if cheap(r) { local[&r] } else { global[&r] }, constraint));
    }
    (out, new_roots)
}

/// The program: interior nodes depth first per constraint, each constraint folded after its root,
/// registers reused after their last read.
fn schedule(
    interior: &[Op],
    constants: usize,
    roots: &[(Node, u32)],
    public_values: usize,
) -> Result<Vec<Instr>, Uncompiled> {
    let constants = u32::try_from(constants).map_err(|_| too_many())?;
    if constants.checked_add(u32::try_from(public_values).map_err(|_| too_many())?).is_none_or(|n| n == u32::MAX) {
        return Err(too_many());
    }
    let value_index = |v: u32| if v > u32::MAX - public_values as u32 { constants + (u32::MAX - v) } else { v };

    // The order: each root's interior nodes depth first (operands before their node), roots in order.
    let mut order: Vec<u32> = Vec::with_capacity(interior.len());
    let mut placed = vec![false; interior.len()];
    for &(root, _) in roots {
        let Node::Interior(r) = root else { continue };
        let mut stack = vec![(r, false)];
        while let Some((n, expanded)) = stack.pop() {
            if placed[n as usize] {
                continue;
            }
            if expanded {
                placed[n as usize] = true;
                order.push(n);
                continue;
            }
            stack.push((n, true));
            for operand in interior[n as usize].operands() {
                if let Node::Interior(c) = operand
                    && !placed[c as usize]
                {
                    stack.push((c, false));
                }
            }
        }
    }
    // Reads left per interior node: as an operand, and as a constraint.
    let mut reads = vec![0u32; interior.len()];
    for op in interior {
        for operand in op.operands() {
            if let Node::Interior(c) = operand {
                reads[c as usize] += 1;
            }
        }
    }
    let mut folds: HashMap<u32, Vec<u32>> = HashMap::new();
    let mut leaf_roots = Vec::new();
    for &(root, constraint) in roots {
        match root {
            Node::Interior(r) => {
                reads[r as usize] += 1;
                folds.entry(r).or_default().push(constraint);
            }
            leaf => leaf_roots.push((leaf, constraint)),
        }
    }

    let mut regs = Registers::default();
    let mut home: Vec<u32> = vec![u32::MAX; interior.len()];
    let mut code = Vec::with_capacity(order.len() * 2 + roots.len());
    let load = |leaf: Node, dst: u32| match leaf {
        Node::Column { col, next } => Instr::Column { dst, col, next },
        Node::Value(v) => Instr::Value { dst, index: value_index(v) },
        Node::Selector(which) => Instr::Selector { dst, which },
        Node::Interior(_) => unreachable!("interior nodes live in registers"),
    };
    for (leaf, constraint) in leaf_roots {
        let r = regs.take();
        code.push(load(leaf, r));
        code.push(Instr::Fold { src: r, constraint });
        regs.free(r);
    }
    for n in order {
        let op = interior[n as usize];
        // Each operand's register: an interior node's home, a leaf loaded into a temporary.
        let mut operand_regs = [0u32; 2];
        let mut temporaries = Vec::new();
        let mut last_reads = Vec::new();
        for (slot, operand) in op.operands().enumerate() {
            operand_regs[slot] = match operand {
                Node::Interior(c) => {
                    reads[c as usize] -= 1;
                    if reads[c as usize] == 0 {
                        last_reads.push(home[c as usize]);
                    }
                    home[c as usize]
                }
                leaf => {
                    let r = regs.take();
                    code.push(load(leaf, r));
                    temporaries.push(r);
                    r
                }
            };
        }
        // Operands are read before the result is written, so the result may take their registers.
        for r in temporaries.into_iter().chain(last_reads) {
            regs.free(r);
        }
        let dst = regs.take();
        let [a, b] = operand_regs;
        code.push(match op {
            Op::Add(..) => Instr::Add { dst, a, b },
            Op::Sub(..) => Instr::Sub { dst, a, b },
            Op::Mul(..) => Instr::Mul { dst, a, b },
            Op::Neg(..) => Instr::Neg { dst, a },
        });
        home[n as usize] = dst;
        if let Some(constraints) = folds.get(&n) {
            for &constraint in constraints {
                code.push(Instr::Fold { src: dst, constraint });
                reads[n as usize] -= 1;
            }
        }
        if reads[n as usize] == 0 {
            regs.free(dst);
        }
    }
    Ok(code)
}

/// The register allocator's free list: the lowest free register first, so the file stays small.
#[derive(Default)]
struct Registers {
    free: BTreeSet<u32>,
    next: u32,
}

impl Registers {
    fn take(&mut self) -> u32 {
        self.free.pop_first().unwrap_or_else(|| {
            self.next += 1;
            self.next - 1
        })
    }

    fn free(&mut self, r: u32) {
        self.free.insert(r);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use p3_air::{AirBuilder, BaseAir, WindowAccess};
    use p3_field::{BasedVectorSpace, PrimeCharacteristicRing};

    /// x0' = x1, x1' = x0 + x1, with boundary constraints on public values, a constant and a
    /// shared subexpression.
    struct Fib;

    impl<F> BaseAir<F> for Fib {
        fn width(&self) -> usize {
            2
        }
        fn num_public_values(&self) -> usize {
            3
        }
    }

    impl<AB: AirBuilder> Air<AB> for Fib {
        fn eval(&self, builder: &mut AB) {
            let main = builder.main();
            let (local, next) = (main.current_slice().to_vec(), main.next_slice().to_vec());
            let pis: Vec<AB::Expr> = builder.public_values().iter().map(|&p| p.into()).collect();
            let (a, b): (AB::Expr, AB::Expr) = (local[0].into(), local[1].into());
            builder.when_first_row().assert_eq(a.clone(), pis[0].clone());
            builder.when_first_row().assert_eq(b.clone(), pis[1].clone());
            let sum = a.clone() + b.clone();
            builder.when_transition().assert_eq(next[0].into(), b.clone());
            builder.when_transition().assert_eq(next[1].into(), sum.clone());
            builder.when_last_row().assert_eq(b.clone(), pis[2].clone());
            // Shares `sum` and `a - b` with itself and the constraints above.
            let diff = a - b;
            builder.assert_zero(sum.clone() * diff.clone() * AB::Expr::from_u64(3) + sum * diff);
        }
    }

    fn layout() -> AirLayout {
        AirLayout { main_width: 2, num_public_values: 3, ..Default::default() }
    }

    #[test]
    fn a_small_air_compiles_to_a_small_program() {
        let compiled = CompiledAir::compile(&Fib, layout()).unwrap();
        let p = compiled.program();
        assert_eq!(p.constraints(), 6);
        assert_eq!(p.columns(), 2);
        assert!(p.uses(Selector::FirstRow) && p.uses(Selector::LastRow) && p.uses(Selector::Transition));
        assert!(p.registers() <= 4, "{} registers for six small constraints", p.registers());
        let values = compiled.values(&[Goldilocks::ONE, Goldilocks::TWO, Goldilocks::from_u64(5)]).unwrap();
        assert_eq!(&values[values.len() - 3..], &[1, 2, 5]);
        assert!(compiled.values(&[Goldilocks::ONE]).is_err());
    }

    #[test]
    fn alpha_powers_descend_in_plonky3s_order() {
        type Ef = p3_field::extension::BinomialExtensionField<Goldilocks, 2>;
        let compiled = CompiledAir::compile(&Fib, layout()).unwrap();
        let alpha = Ef::from_basis_coefficients_slice(&[Goldilocks::from_u64(3), Goldilocks::from_u64(5)]).unwrap();
        let words = compiled.alpha_powers(alpha);
        assert_eq!(words.len(), 12);
        let last = alpha.exp_u64(5);
        assert_eq!(
            &words[0..2],
            BasedVectorSpace::<Goldilocks>::as_basis_coefficients_slice(&last)
                .iter()
                .map(|c| c.as_canonical_u64())
                .collect::<Vec<_>>()
        );
        assert_eq!(&words[10..12], &[1, 0]);
    }

    /// `k` values, each the product of two columns (or, `deep`, of 40 columns), asserted zero
    /// twice: all of them times 3, then all of them times 5. Each value is live from its first
    /// constraint to its second, `k` constraints later.
    struct FarApart {
        k: usize,
        deep: bool,
    }

    impl FarApart {
        fn width(&self) -> usize {
            if self.deep { self.k + 40 } else { 2 * self.k }
        }
    }

    impl<F> BaseAir<F> for FarApart {
        fn width(&self) -> usize {
            FarApart::width(self)
        }
    }

    impl<AB: AirBuilder> Air<AB> for FarApart {
        fn eval(&self, builder: &mut AB) {
            let main = builder.main();
            let local: Vec<AB::Expr> = main.current_slice().iter().map(|&v| v.into()).collect();
            let values: Vec<AB::Expr> = (0..self.k)
                .map(|i| {
                    if self.deep {
                        (0..40).fold(local[i].clone(), |acc, j| acc * local[self.k + j].clone())
                    } else {
                        local[2 * i].clone() * local[2 * i + 1].clone()
                    }
                })
                .collect();
            for factor in [3u64, 5] {
                for v in &values {
                    builder.assert_zero(v.clone() * AB::Expr::from_u64(factor));
                }
            }
        }
    }

    fn far_apart(air: &FarApart) -> (CompiledAir, usize, usize) {
        let layout = AirLayout { main_width: air.width(), ..Default::default() };
        let compiled = CompiledAir::compile(air, layout).unwrap();
        // Without recomputation, as scheduled in Plonky3's order.
        let mut builder = SymbolicAirBuilder::<Goldilocks>::new(layout);
        air.eval(&mut builder);
        let mut dag = Dag::default();
        let roots: Vec<(Node, u32)> =
            builder.base_constraints().iter().enumerate().map(|(j, c)| (dag.node(c).unwrap(), j as u32)).collect();
        let (interior, roots) = rematerialize(&dag.interior, &roots, 0);
        let kept = ConstraintProgram::new(&schedule(&interior, dag.constants.len(), &roots, 0).unwrap()).unwrap();
        (compiled, kept.registers(), kept.len())
    }

    #[test]
    fn cheap_values_read_far_apart_are_recomputed_rather_than_kept() {
        let (compiled, kept_registers, kept_len) = far_apart(&FarApart { k: 40, deep: false });
        assert!(kept_registers >= 40, "kept: {kept_registers} registers");
        let p = compiled.program();
        assert!(p.registers() <= SMALL_FILE && p.registers() < 8, "{} registers", p.registers());
        // Each product computed twice: two more loads and a product per value.
        assert_eq!(p.len(), kept_len + 3 * 40, "{} instructions against {kept_len}", p.len());
        // Few enough values to keep: nothing is recomputed.
        let (compiled, kept_registers, kept_len) = far_apart(&FarApart { k: 8, deep: false });
        assert!(kept_registers <= SMALL_FILE);
        assert_eq!((compiled.program().registers(), compiled.program().len()), (kept_registers, kept_len));
    }

    #[test]
    fn dear_values_are_kept_when_no_threshold_fits_the_small_file() {
        // Each value costs 40 products, above every threshold: the fewest registers, then the
        // fewest instructions, is the program without recomputation.
        let (compiled, kept_registers, kept_len) = far_apart(&FarApart { k: 40, deep: true });
        assert!(kept_registers > SMALL_FILE);
        assert_eq!((compiled.program().registers(), compiled.program().len()), (kept_registers, kept_len));
    }

    #[test]
    fn unsupported_layouts_are_named() {
        for (l, needle) in [
            (AirLayout { preprocessed_width: 1, ..layout() }, "preprocessed"),
            (AirLayout { num_periodic_columns: 1, ..layout() }, "periodic"),
            (AirLayout { permutation_width: 1, ..layout() }, "permutation"),
        ] {
            let e = CompiledAir::compile(&Fib, l).unwrap_err();
            assert!(e.0.contains(needle), "{e}");
        }
    }
}
