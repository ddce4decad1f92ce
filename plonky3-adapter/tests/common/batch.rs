//! Many tables in one proof: p3-batch-stark over the configurations of [`super::stark`], with one
//! AIR type for every table a batch mixes (the Fibonacci AIR, with or without sending its rows on
//! a lookup bus, a table receiving them, Keccak-f, BLAKE3 and Poseidon2), shared by the batch
//! proof tests and the prove bench's batch statement.

#![allow(dead_code)]

use p3_air::{Air, AirBuilder, BaseAir, WindowAccess};
use p3_batch_stark::{BatchProof, ProverData, StarkGenericConfig, StarkInstance, prove_batch, verify_batch};
use p3_field::coset::TwoAdicMultiplicativeCoset;
use p3_lookup::InteractionBuilder;
use p3_matrix::Matrix;
use p3_matrix::dense::RowMajorMatrix;

use super::stark::{Challenge, FibonacciAir, Poseidon2Air, Val, fibonacci_trace};

/// One table of a batch. p3-batch-stark proves instances of one AIR type, so a virtual machine
/// declares an enum of its tables, as this one does.
#[derive(Clone, Debug)]
pub enum Table {
    /// [`FibonacciAir`].
    Fibonacci(FibonacciAir),
    /// [`FibonacciAir`] whose rows also send their first pair `(a, b)` on the named bus, once
    /// each.
    FibonacciSends(FibonacciAir, &'static str),
    /// Two columns of any values, each row received once from the named bus: a lookup holds when
    /// the rows are the sender's rows in any order.
    Receives(&'static str),
    /// Plonky3's Keccak-f AIR (2,633 columns, 24 rows per permutation).
    Keccak,
    /// Plonky3's BLAKE3 compression AIR (one row per compression, no next-row reads: opened at
    /// one point).
    Blake3,
    /// Plonky3's Goldilocks Poseidon2 AIR (one row per permutation).
    Poseidon2(Box<Poseidon2Air>),
    /// One main column equal, row by row, to a preprocessed column holding the row numbers, over
    /// this many rows: a table with preprocessed columns (a third commitment, opened with the
    /// others).
    Counter(usize),
}

impl BaseAir<Val> for Table {
    fn width(&self) -> usize {
        match self {
            Table::Fibonacci(air) | Table::FibonacciSends(air, _) => BaseAir::<Val>::width(air),
            Table::Receives(_) => 2,
            Table::Keccak => BaseAir::<Val>::width(&p3_keccak_air::KeccakAir {}),
            Table::Blake3 => BaseAir::<Val>::width(&p3_blake3_air::Blake3Air {}),
            Table::Poseidon2(air) => BaseAir::<Val>::width(&**air),
            Table::Counter(_) => 1,
        }
    }

    fn preprocessed_trace(&self) -> Option<RowMajorMatrix<Val>> {
        match *self {
            Table::Counter(rows) => Some(RowMajorMatrix::new((0..rows as u64).map(Val::new).collect(), 1)),
            _ => None,
        }
    }

    fn preprocessed_width(&self) -> usize {
        usize::from(matches!(self, Table::Counter(_)))
    }

    fn num_public_values(&self) -> usize {
        match self {
            Table::Fibonacci(air) | Table::FibonacciSends(air, _) => BaseAir::<Val>::num_public_values(air),
            _ => 0,
        }
    }

    fn main_next_row_columns(&self) -> Vec<usize> {
        match self {
            Table::Fibonacci(air) | Table::FibonacciSends(air, _) => BaseAir::<Val>::main_next_row_columns(air),
            Table::Receives(_) | Table::Counter(_) => vec![],
            Table::Keccak => BaseAir::<Val>::main_next_row_columns(&p3_keccak_air::KeccakAir {}),
            Table::Blake3 => BaseAir::<Val>::main_next_row_columns(&p3_blake3_air::Blake3Air {}),
            Table::Poseidon2(air) => BaseAir::<Val>::main_next_row_columns(&**air),
        }
    }

    fn max_constraint_degree(&self) -> Option<usize> {
        match self {
            Table::Fibonacci(air) => BaseAir::<Val>::max_constraint_degree(air),
            Table::Keccak => BaseAir::<Val>::max_constraint_degree(&p3_keccak_air::KeccakAir {}),
            Table::Blake3 => BaseAir::<Val>::max_constraint_degree(&p3_blake3_air::Blake3Air {}),
            Table::Poseidon2(air) => BaseAir::<Val>::max_constraint_degree(&**air),
            Table::Counter(_) => Some(1),
            // The lookup's constraints are not counted by the AIR's own bound.
            Table::FibonacciSends(..) | Table::Receives(_) => None,
        }
    }
}

impl<AB: AirBuilder<F = Val> + InteractionBuilder> Air<AB> for Table {
    fn eval(&self, builder: &mut AB) {
        match self {
            Table::Fibonacci(air) => air.eval(builder),
            Table::FibonacciSends(air, bus) => {
                air.eval(builder);
                let main = builder.main();
                let (a, b) = (main.current_slice()[0], main.current_slice()[1]);
                builder.push_interaction(bus, [a, b], -1);
            }
            Table::Receives(bus) => {
                let main = builder.main();
                let (a, b) = (main.current_slice()[0], main.current_slice()[1]);
                builder.push_interaction(bus, [a, b], 1);
            }
            Table::Keccak => p3_keccak_air::KeccakAir {}.eval(builder),
            Table::Blake3 => p3_blake3_air::Blake3Air {}.eval(builder),
            Table::Poseidon2(air) => air.eval(builder),
            Table::Counter(_) => {
                let row = builder.preprocessed().current(0).expect("one preprocessed column");
                let main = builder.main().current_slice()[0];
                builder.assert_eq(main, row);
            }
        }
    }
}

/// A table and its trace's height, as a batch statement lists them.
#[derive(Clone, Debug)]
pub enum Shape {
    /// `pairs` Fibonacci sequences over `rows` rows.
    Fibonacci { pairs: usize, rows: usize },
    /// Them, the first pair's rows sent on `bus`, and a table of `rows` rows receiving them.
    FibonacciLookup { pairs: usize, rows: usize, bus: &'static str },
    /// `hashes` Keccak-f permutations (24 rows each, padded to a power of two).
    Keccak { hashes: usize },
    /// `rows` BLAKE3 compressions (a power of two).
    Blake3 { rows: usize },
    /// `rows` Poseidon2 permutations (a power of two).
    Poseidon2 { rows: usize },
    /// [`Table::Counter`] over `rows` rows (a power of two).
    Counter { rows: usize },
}

/// A batch statement: each table, its trace and its public values, in the order proved.
pub struct Batch {
    pub tables: Vec<Table>,
    pub traces: Vec<RowMajorMatrix<Val>>,
    pub public_values: Vec<Vec<Val>>,
}

impl Batch {
    /// The tables of `shapes` with seeded traces (a lookup shape is two tables: the sender, then
    /// the receiver, whose rows are the sender's reversed).
    pub fn new(shapes: &[Shape]) -> Self {
        let mut batch = Batch { tables: vec![], traces: vec![], public_values: vec![] };
        for shape in shapes {
            match *shape {
                Shape::Fibonacci { pairs, rows } => {
                    let (trace, public) = fibonacci_trace(pairs, rows);
                    batch.push(Table::Fibonacci(FibonacciAir { pairs }), trace, public);
                }
                Shape::FibonacciLookup { pairs, rows, bus } => {
                    let (trace, public) = fibonacci_trace(pairs, rows);
                    let width = trace.width();
                    let received: Vec<Val> =
                        trace.values.chunks(width).rev().flat_map(|row| [row[0], row[1]]).collect();
                    batch.push(Table::FibonacciSends(FibonacciAir { pairs }, bus), trace, public);
                    batch.push(Table::Receives(bus), RowMajorMatrix::new(received, 2), vec![]);
                }
                Shape::Keccak { hashes } => batch.push(Table::Keccak, super::stark::keccak_trace(hashes), vec![]),
                Shape::Blake3 { rows } => batch.push(Table::Blake3, super::stark::blake3_trace(rows), vec![]),
                Shape::Counter { rows } => {
                    let trace = RowMajorMatrix::new((0..rows as u64).map(Val::new).collect(), 1);
                    batch.push(Table::Counter(rows), trace, vec![]);
                }
                Shape::Poseidon2 { rows } => {
                    let air = super::stark::poseidon2_air();
                    let trace = super::stark::poseidon2_trace(&air, rows);
                    batch.push(Table::Poseidon2(Box::new(air)), trace, vec![]);
                }
            }
        }
        batch
    }

    fn push(&mut self, table: Table, trace: RowMajorMatrix<Val>, public_values: Vec<Val>) {
        self.tables.push(table);
        self.traces.push(trace);
        self.public_values.push(public_values);
    }

    /// How many tables take part in a lookup (each has a permutation trace).
    pub fn lookup_tables(&self) -> usize {
        self.tables.iter().filter(|t| matches!(t, Table::FibonacciSends(..) | Table::Receives(_))).count()
    }

    /// p3-batch-stark's instances of the tables, with their traces and public values.
    pub fn instances<SC: BatchConfig>(&self) -> Vec<StarkInstance<'_, SC, Table>> {
        self.tables
            .iter()
            .zip(&self.traces)
            .zip(&self.public_values)
            .map(|((air, trace), public_values)| StarkInstance { air, trace, public_values: public_values.clone() })
            .collect()
    }

    /// Each trace's (height, width).
    pub fn dims(&self) -> Vec<(usize, usize)> {
        self.traces.iter().map(|t| (t.height(), t.width())).collect()
    }
}

/// A p3-batch-stark configuration over Goldilocks with this module's challenge field and a
/// two-adic PCS.
pub trait BatchConfig:
    StarkGenericConfig<
        Challenge = Challenge,
        Pcs: p3_commit::Pcs<
            Challenge,
            Self::Challenger,
            Domain = TwoAdicMultiplicativeCoset<Val>,
            ProverData: Sync,
            Commitment: Sync,
        > + Sync,
        Challenger: p3_challenger::GrindingChallenger<Witness = Val>,
    >
{
}

impl<SC> BatchConfig for SC where
    SC: StarkGenericConfig<
            Challenge = Challenge,
            Pcs: p3_commit::Pcs<
                Challenge,
                SC::Challenger,
                Domain = TwoAdicMultiplicativeCoset<Val>,
                ProverData: Sync,
                Commitment: Sync,
            > + Sync,
            Challenger: p3_challenger::GrindingChallenger<Witness = Val>,
        >
{
}

/// The batch proof of `batch` with `config`.
///
/// # Panics
/// When proving fails.
pub fn prove<SC: BatchConfig>(config: &SC, batch: &Batch) -> BatchProof<SC>
where
    p3_uni_stark::PcsProverError<SC>: Send + std::fmt::Debug,
{
    try_prove(config, batch).expect("proving the batch succeeds")
}

/// `prove_batch` of `batch` with `config`.
pub fn try_prove<SC: BatchConfig>(
    config: &SC,
    batch: &Batch,
) -> Result<BatchProof<SC>, p3_uni_stark::ProvingError<p3_uni_stark::PcsProverError<SC>>>
where
    p3_uni_stark::PcsProverError<SC>: Send,
{
    let instances = batch.instances::<SC>();
    let prover_data = ProverData::from_instances(config, &instances)?;
    prove_batch(config, &instances, &prover_data)
}

/// [`plonky3_adapter::prove_batch`] of `batch` with `config`: each table's quotient where its
/// trace's LDE lies.
///
/// # Panics
/// When proving fails.
pub fn prove_on_device<SC: BatchConfig>(config: &SC, batch: &Batch) -> BatchProof<SC>
where
    SC::Pcs: plonky3_adapter::DeviceQuotientPcs<Challenge, SC::Challenger>,
    p3_uni_stark::PcsProverError<SC>: Send + std::fmt::Debug,
{
    try_prove_on_device(config, batch).expect("proving the batch succeeds")
}

/// [`plonky3_adapter::prove_batch`] of `batch` with `config`.
pub fn try_prove_on_device<SC: BatchConfig>(
    config: &SC,
    batch: &Batch,
) -> Result<BatchProof<SC>, p3_uni_stark::ProvingError<p3_uni_stark::PcsProverError<SC>>>
where
    SC::Pcs: plonky3_adapter::DeviceQuotientPcs<Challenge, SC::Challenger>,
    p3_uni_stark::PcsProverError<SC>: Send,
{
    let instances = batch.instances::<SC>();
    let prover_data = ProverData::from_instances(config, &instances)?;
    plonky3_adapter::prove_batch(config, &instances, &prover_data)
}

/// The proof's bytes, after checking that `verify_batch` with the stock configuration `stock`
/// (its types and parameters) accepts the proof deserialized from them, and refuses them with one
/// bit flipped in the middle (which must not deserialize, or not verify) and with a wrong public
/// value where a table has one.
pub fn check_against<SC: BatchConfig, V: BatchConfig>(proof: &BatchProof<SC>, stock: &V, batch: &Batch) -> Vec<u8>
where
    p3_batch_stark::PcsError<V>: std::fmt::Debug,
{
    let bytes = postcard::to_allocvec(proof).expect("the proof serializes");
    let instances = batch.instances::<V>();
    let common = ProverData::from_instances(stock, &instances).expect("the batch's common data").common;
    let verify = |bytes: &[u8], public_values: &[Vec<Val>]| {
        postcard::from_bytes::<BatchProof<V>>(bytes)
            .map_err(|e| format!("{e}"))
            .and_then(|p| verify_batch(stock, &batch.tables, &p, public_values, &common).map_err(|e| format!("{e:?}")))
    };
    verify(&bytes, &batch.public_values).expect("the stock verifier accepts the batch proof");
    let mut flipped = bytes.clone();
    flipped[bytes.len() / 2] ^= 0x10;
    assert!(verify(&flipped, &batch.public_values).is_err(), "a batch proof with a flipped bit verified");
    if let Some(i) = batch.public_values.iter().position(|p| !p.is_empty()) {
        let mut wrong = batch.public_values.clone();
        wrong[i][0] += Val::new(1);
        assert!(verify(&bytes, &wrong).is_err(), "a batch proof verified with a wrong public value of table {i}");
    }
    bytes
}
