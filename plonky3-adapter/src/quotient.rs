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
//! constraint, each constraint folded right after its root; leaves (cells, selectors, constants)
//! are loaded where they are used rather than kept, and registers are reused as soon as their
//! last reader has run (a linear scan over the schedule, lowest free register first). The
//! constraints run in an order that keeps a shared value's readers together: after each, one
//! that reads the live shared value with the fewest readers left. So a row holds only what the
//! constraints still to come will read, and little of that: the Keccak-f AIR's program needs 35
//! registers, against 260 in Plonky3's order (its 64 `c xor c'` bits per column, read by the
//! five rows' limbs far apart), the BLAKE3 AIR's 20 against 260.
//!
//! Plonky3 folds constraint `j` of `K` with `alpha^(K - 1 - j)` in the extension field; a
//! base-field constraint times an extension element is `d` base-field products, so the program is
//! base-field code throughout and every extension degree runs the same program.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::sync::Arc;

use backend_api::quotient::{ConstraintProgram, Instr, Selector};
use p3_air::Air;
use p3_air::symbolic::{
    AirLayout, BaseEntry, BaseLeaf, ConstraintLayout, SymbolicAirBuilder, SymbolicExpr, SymbolicExpression,
    SymbolicExpressionExt,
};
use p3_batch_stark::symbolic::{get_constraint_layout, get_symbolic_constraints};
use p3_field::{Algebra, ExtensionField, PrimeField64};
use p3_goldilocks::Goldilocks;
use p3_lookup::InteractionSymbolicBuilder;
use p3_lookup::logup::LogUpGadget;

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
        check_layout(&layout)?;
        let mut builder = SymbolicAirBuilder::<Goldilocks>::new(layout);
        air.eval(&mut builder);
        Self::from_constraints(&builder.base_constraints(), &builder.constraint_layout(), layout)
    }

    /// Compiles the constraints of one table of a p3-batch-stark proof: `air` under `layout` as
    /// `p3_batch_stark::prove_batch` builds it, through p3-lookup's symbolic builder (the one
    /// such AIRs implement). A table with lookups is refused: its permutation columns and
    /// constraints are in the extension field.
    ///
    /// # Errors
    /// [`Uncompiled`] for lookups, then as [`CompiledAir::compile`].
    pub fn compile_table<A, Challenge>(
        air: &A,
        layout: AirLayout,
        lookups: &[p3_lookup::Lookup<Goldilocks>],
    ) -> Result<Self, Uncompiled>
    where
        A: Air<InteractionSymbolicBuilder<Goldilocks, Challenge>>,
        Challenge: ExtensionField<Goldilocks>,
        SymbolicExpressionExt<Goldilocks, Challenge>: Algebra<Challenge>,
    {
        if !lookups.is_empty() {
            return Err(Uncompiled(format!("{} lookups (extension-field permutation columns)", lookups.len())));
        }
        check_layout(&layout)?;
        let gadget = LogUpGadget::new();
        let (base, _) = get_symbolic_constraints::<Goldilocks, Challenge, A, _>(air, layout, lookups, &gadget);
        let order = get_constraint_layout::<Goldilocks, Challenge, A, _>(air, layout, lookups, &gadget);
        Self::from_constraints(&base, &order, layout)
    }

    /// The program of the base-field `constraints`, numbered by `order` (Plonky3's global
    /// constraint indices) under `layout`.
    fn from_constraints(
        constraints: &[SymbolicExpression<Goldilocks>],
        order: &ConstraintLayout,
        layout: AirLayout,
    ) -> Result<Self, Uncompiled> {
        if !order.ext_indices.is_empty() {
            return Err(Uncompiled(format!("{} extension-field constraints", order.ext_indices.len())));
        }
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
        let instrs = schedule(&dag, &roots, layout.num_public_values)?;
        let program = ConstraintProgram::new(&instrs).map_err(|e| Uncompiled(format!("the compiled program: {e}")))?;
        Ok(Self { program, constants: dag.constants, public_values: layout.num_public_values, nodes })
    }

    /// The program with every column index moved `first` columns on: the same constraints over
    /// an LDE that holds the trace's columns from column `first` on (a table of a batch, beside
    /// the other tables of its height).
    ///
    /// # Errors
    /// [`Uncompiled`] when a column index would pass the program's limit.
    pub fn program_at(&self, first: usize) -> Result<ConstraintProgram, Uncompiled> {
        let first = u32::try_from(first).map_err(|_| too_many())?;
        let moved: Vec<Instr> = self
            .program
            .instrs()
            .map(|instr| match instr {
                Instr::Column { dst, col, next } => {
                    col.checked_add(first).map(|col| Instr::Column { dst, col, next }).ok_or_else(too_many)
                }
                other => Ok(other),
            })
            .collect::<Result<_, _>>()?;
        ConstraintProgram::new(&moved).map_err(|e| Uncompiled(format!("the program moved {first} columns on: {e}")))
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

/// The layouts the compiler takes: no preprocessed, periodic or permutation columns.
fn check_layout(layout: &AirLayout) -> Result<(), Uncompiled> {
    if layout.preprocessed_width > 0 {
        return Err(Uncompiled(format!("{} preprocessed columns", layout.preprocessed_width)));
    }
    if layout.num_periodic_columns > 0 {
        return Err(Uncompiled(format!("{} periodic columns", layout.num_periodic_columns)));
    }
    if layout.permutation_width > 0 || layout.num_permutation_challenges > 0 || layout.num_permutation_values > 0 {
        return Err(Uncompiled("a permutation (lookup) trace".into()));
    }
    Ok(())
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

/// The order in which the constraints are evaluated: each constraint's interior nodes depth first
/// as before, but the constraints themselves reordered so that values several constraints share
/// are read by all of them soon after they are computed, instead of staying in a register until
/// Plonky3's order reaches their last reader. The greedy rule: after each constraint, take next
/// a constraint that reads the live shared value with the fewest readers left (the oldest on
/// ties); with none live, the first constraint left in Plonky3's order. The fold's powers of
/// alpha stay with their constraints, so the sum, and the bytes, are unchanged.
///
/// The cones (each constraint's interior nodes) are walked once; an AIR whose cones add up to more
/// than [`CONE_BUDGET`] nodes keeps Plonky3's order.
fn root_order(dag: &Dag, roots: &[(Node, u32)]) -> Vec<usize> {
    let plonky3 = (0..roots.len()).collect::<Vec<_>>();
    // Each root's cone, as one flat list.
    let mut cones: Vec<u32> = Vec::new();
    let mut starts = Vec::with_capacity(roots.len() + 1);
    let mut seen = vec![u32::MAX; dag.interior.len()];
    let mut stack = Vec::new();
    for (i, &(root, _)) in roots.iter().enumerate() {
        starts.push(cones.len());
        let Node::Interior(r) = root else { continue };
        stack.push(r);
        while let Some(n) = stack.pop() {
            if seen[n as usize] == i as u32 {
                continue;
            }
            seen[n as usize] = i as u32;
            cones.push(n);
            if cones.len() > CONE_BUDGET {
                return plonky3;
            }
            for operand in dag.interior[n as usize].operands() {
                if let Node::Interior(c) = operand {
                    stack.push(c);
                }
            }
        }
    }
    starts.push(cones.len());
    // How many roots' cones hold each node (left to run, as the order grows); the roots of each
    // node held by two or more.
    let mut holders = vec![0u32; dag.interior.len()];
    for &n in &cones {
        holders[n as usize] += 1;
    }
    let shared: Vec<bool> = holders.iter().map(|&h| h > 1).collect();
    // By node: the roots reading it (shared nodes only), the first of them not yet ordered,
    // and when it was first computed (0: not yet).
    let mut readers: Vec<Vec<u32>> = vec![Vec::new(); dag.interior.len()];
    for i in 0..roots.len() {
        for &n in &cones[starts[i]..starts[i + 1]] {
            if shared[n as usize] {
                readers[n as usize].push(i as u32);
            }
        }
    }
    let mut next_reader = vec![0usize; dag.interior.len()];
    let mut computed = vec![0u64; dag.interior.len()];
    let mut live: BTreeSet<(u32, u64, u32)> = BTreeSet::new();
    let mut done = vec![false; roots.len()];
    let mut order = Vec::with_capacity(roots.len());
    let mut first_left = 0;
    let mut seq = 0u64;
    while order.len() < roots.len() {
        // The next root: a reader of the live shared node with the fewest readers left.
        let mut pick = None;
        while let Some(&(left, at, n)) = live.first() {
            let list = &readers[n as usize];
            let k = &mut next_reader[n as usize];
            while *k < list.len() && done[list[*k] as usize] {
                *k += 1;
            }
            if *k < list.len() {
                pick = Some(list[*k] as usize);
                break;
            }
            live.remove(&(left, at, n));
        }
        let i = pick.unwrap_or_else(|| {
            while done[first_left] {
                first_left += 1;
            }
            first_left
        });
        done[i] = true;
        order.push(i);
        for &n in &cones[starts[i]..starts[i + 1]] {
            if !shared[n as usize] {
                continue;
            }
            if computed[n as usize] == 0 {
                seq += 1;
                computed[n as usize] = seq;
            }
            let at = computed[n as usize];
            let left = holders[n as usize];
            live.remove(&(left, at, n));
            holders[n as usize] -= 1;
            if left > 1 {
                live.insert((left - 1, at, n));
            }
        }
    }
    order
}

/// The most cone nodes [`root_order`] walks (all constraints' cones together) before it keeps
/// Plonky3's order: a few milliseconds of compilation.
const CONE_BUDGET: usize = 1 << 22;

/// The program: interior nodes depth first per constraint, each constraint folded after its root,
/// registers reused after their last read.
fn schedule(dag: &Dag, roots: &[(Node, u32)], public_values: usize) -> Result<Vec<Instr>, Uncompiled> {
    let constants = u32::try_from(dag.constants.len()).map_err(|_| too_many())?;
    if constants.checked_add(u32::try_from(public_values).map_err(|_| too_many())?).is_none_or(|n| n == u32::MAX) {
        return Err(too_many());
    }
    let value_index = |v: u32| if v > u32::MAX - public_values as u32 { constants + (u32::MAX - v) } else { v };

    // The order: each root's interior nodes depth first (operands before their node), roots in order.
    let mut order: Vec<u32> = Vec::with_capacity(dag.interior.len());
    let mut placed = vec![false; dag.interior.len()];
    for i in root_order(dag, roots) {
        let Node::Interior(r) = roots[i].0 else { continue };
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
            for operand in dag.interior[n as usize].operands() {
                if let Node::Interior(c) = operand
                    && !placed[c as usize]
                {
                    stack.push((c, false));
                }
            }
        }
    }
    // Reads left per interior node: as an operand, and as a constraint.
    let mut reads = vec![0u32; dag.interior.len()];
    for op in &dag.interior {
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
    let mut home: Vec<u32> = vec![u32::MAX; dag.interior.len()];
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
        let op = dag.interior[n as usize];
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

    /// The hash AIRs' programs keep few values live at once, so that a point's register file fits
    /// a GPU thread's share of shared memory (48 words at 128 threads per block): constraints that
    /// read one shared value run together. In Plonky3's order the Keccak-f and BLAKE3 AIRs' programs
    /// need 260 registers each (the Keccak-f AIR's 64 `c xor c'` bits of each column, read by its
    /// five rows' limbs far apart, and the like).
    #[test]
    fn hash_airs_fit_a_small_register_file() {
        fn registers<A: Air<SymbolicAirBuilder<Goldilocks>>>(air: &A, main_width: usize) -> usize {
            let c = CompiledAir::compile(air, AirLayout { main_width, ..Default::default() }).unwrap();
            c.program().registers()
        }
        let keccak = registers(&p3_keccak_air::KeccakAir {}, p3_keccak_air::NUM_KECCAK_COLS);
        let blake3 = registers(&p3_blake3_air::Blake3Air {}, p3_blake3_air::NUM_BLAKE3_COLS);
        assert!(keccak <= 40 && blake3 <= 24, "Keccak-f {keccak}, BLAKE3 {blake3} registers");
    }
}
