//! `BackendMmcs`: Plonky3's Keccak-256 `MerkleTreeMmcs` over Goldilocks whose leaf hashes and
//! Merkle tree run on a [`Backend`].

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use backend_api::{
    Backend, CopyRange, DIGEST_WORDS, DeviceBuffer, Error, LeafLayout, LeafSpec, MatrixShape, TreeShape,
};
use p3_commit::{BatchOpening, BatchOpeningRef, Mmcs};
use p3_goldilocks::Goldilocks;
use p3_matrix::{Dimensions, Matrix};
use p3_merkle_tree::{MerkleCap, MerkleTreeError};
use rayon::prelude::*;

use crate::convert::{as_words, concat_rows};
use crate::digest::{Keccak256, MmcsHash};
#[cfg(doc)]
use crate::digest::{KeccakMerkleMmcs, Poseidon2, Poseidon2MerkleMmcs};

/// Node levels of the last tree segment kept on the host after a commit: the top `2^TOP_LEVELS`
/// digests (64 KiB), which hold the cap and serve the upper levels of every authentication path
/// without a download.
const TOP_LEVELS: u32 = 11;

/// How many commits a [`BackendMmcs`] made where, and what its openings cost (clones share the
/// counters).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MmcsStats {
    /// Commits whose leaves and tree the backend computed.
    pub device_commits: usize,
    /// Commits computed by Plonky3's own `MerkleTree` on the host: fewer elements than
    /// [`BackendMmcs::with_min_device_elems`], a tallest height that is not a power of two, a
    /// height whose matrices all have width 0, or a device error.
    pub host_commits: usize,
    /// Device errors met (each then handled on the host: the commit or the opening is unchanged).
    pub device_errors: usize,
    /// Downloads of node digests made for openings, one per opening (its digests below the top
    /// of the tree, which is on the host, gathered on the device first).
    pub digest_downloads: usize,
    /// Host copies made of a committed LDE that a fused commit left on the device, for a caller
    /// that asked for the matrices themselves (`Mmcs::get_matrices`: a quotient evaluated on the
    /// host, an opening that fell back to it). Zero in a proof whose quotient and openings ran on
    /// the device: the LDE never came down.
    pub lde_downloads: usize,
    /// Downloads of rows of such an LDE for the query openings: one per opening of several rows
    /// (gathered on the device first), one per single row.
    pub lde_row_downloads: usize,
}

#[derive(Default)]
struct Counters {
    device_commits: AtomicUsize,
    host_commits: AtomicUsize,
    device_errors: AtomicUsize,
    digest_downloads: AtomicUsize,
    lde_downloads: AtomicUsize,
    lde_row_downloads: AtomicUsize,
}

/// Plonky3's [`Mmcs`] over Goldilocks with the commitment, the proofs and the opened values of
/// [`KeccakMerkleMmcs`] (the same types, the same bytes), whose leaf hashes and Merkle tree are
/// computed by a [`Backend`].
///
/// Use it wherever Plonky3 takes the Keccak byte MMCS, e.g. as the `InputMmcs` of
/// `TwoAdicFriPcs` and inside the FRI `ExtensionMmcs`; proofs are byte-identical to stock and
/// verify with the stock verifier (stock configuration types, deserialized proof).
///
/// - **Commit.** The leaves of the matrices of the tallest height are hashed as one row-major
///   matrix from host memory with [`Backend::hash_leaves_from_host`] (`rows` layout; one matrix
///   straight from its storage, several first concatenated row by row in the backend's fastest
///   host memory; a GPU uploads it, the CPU backend reads it where it is) into the node array,
///   and the tree completed with [`Backend::merkle_tree_in_place`]. Shorter matrices (Plonky3
///   injects them at the level of their height: `node = H(H(left || right) || H(row))`) start a
///   new tree segment on the device whose leaves interleave the level below with their row
///   hashes ([`Backend::batched_copy`]), so mixed heights stay on the device too.
/// - **Prover data** keeps the device node arrays, the top of the last tree on the host
///   (the cap and the upper path levels), and the committed matrices themselves, which
///   [`Mmcs::get_matrices`] returns (the PCS reads them back). Uploaded copies are freed once
///   hashed.
/// - **Openings.** Rows come from the host matrices; the sibling digests below the cached top are
///   gathered on the device ([`Backend::batched_copy`]) and come down in one
///   [`Backend::download`] per opening. `open_multi_batch` sends the pruned frontier Plonky3
///   sends, in its order.
/// - **Host fallbacks** (the result is the same, [`MmcsStats`] counts them):
///   - A commit smaller than [`BackendMmcs::with_min_device_elems`] (none by default).
///   - A tallest height that is not a power of two: Plonky3 pads such layers with zero digests,
///     our tree repeats the last leaf, so the commit is Plonky3's own `MerkleTree` on the host.
///     Two-adic PCS heights are powers of two; this only concerns direct users of the MMCS.
///   - A height whose matrices all have width 0 (a leaf over no bytes, which our leaf specs
///     refuse): Plonky3's `MerkleTree`.
///   - A device error (out of memory, a lost device) during a commit: a `tracing` warning and
///     Plonky3's `MerkleTree`. `Mmcs::commit` cannot return an error, and a host commit beats a
///     panic. During an opening: one warning, and the tree's digests are recomputed on the host
///     from the committed matrices for that tree's openings.
/// - **Panics** only where [`KeccakMerkleMmcs`] panics, with its messages: heights off
///   Plonky3's `ceil(max_height / 2^k)` ladder, no matrices or only empty ones (the commit is
///   handed to Plonky3, which refuses it), and an opening index past the tallest height.
/// - **Verification** is Plonky3's: `verify_batch` and `verify_multi_batch` are those of
///   [`KeccakMerkleMmcs`].
pub struct BackendMmcs<B: Backend, H: MmcsHash = Keccak256> {
    backend: Arc<B>,
    stock: H::Stock,
    cap_height: usize,
    min_device_elems: usize,
    counters: Arc<Counters>,
}

impl<B: Backend, H: MmcsHash> Clone for BackendMmcs<B, H> {
    fn clone(&self) -> Self {
        Self {
            backend: Arc::clone(&self.backend),
            stock: self.stock.clone(),
            cap_height: self.cap_height,
            min_device_elems: self.min_device_elems,
            counters: Arc::clone(&self.counters),
        }
    }
}

impl<B: Backend, H: MmcsHash> fmt::Debug for BackendMmcs<B, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BackendMmcs")
            .field("backend", &std::any::type_name::<B>())
            .field("hash", &H::KIND)
            .field("cap_height", &self.cap_height)
            .field("min_device_elems", &self.min_device_elems)
            .field("stats", &self.stats())
            .finish()
    }
}

impl<B: Backend> BackendMmcs<B> {
    /// The Keccak-256 MMCS on `backend` with a cap of `2^cap_height` digests (0: the commitment
    /// is one root): the same as `KeccakMerkleMmcs::new(SerializingHasher::new(Keccak256Hash {}),
    /// CompressionFunctionFromHasher::new(Keccak256Hash {}), cap_height)`. Other hashes:
    /// [`BackendMmcs::with_hash`].
    pub fn new(backend: Arc<B>, cap_height: usize) -> Self {
        Self::with_hash(backend, cap_height)
    }
}

impl<B: Backend, H: MmcsHash> BackendMmcs<B, H> {
    /// The MMCS of hash `H` on `backend` with a cap of `2^cap_height` digests: the same as
    /// Plonky3's MMCS of `H` ([`MmcsHash::Stock`]) with that cap height, e.g.
    /// `BackendMmcs::<_, Poseidon2>::with_hash(backend, 0)` for [`Poseidon2MerkleMmcs`].
    pub fn with_hash(backend: Arc<B>, cap_height: usize) -> Self {
        Self { backend, stock: H::stock(cap_height), cap_height, min_device_elems: 0, counters: Arc::default() }
    }

    /// The same MMCS with commits of fewer than `elems` elements in all (the committed matrices'
    /// `height * width`, summed) made on the host by Plonky3's own `MerkleTree`
    /// ([`MmcsStats::host_commits`]): the commitment and the proofs are the same, only where the
    /// work runs differs. A device's fixed costs (allocations, launches, the upload, the tree's
    /// top coming down) outweigh a small tree's hashing on the host. The default is 0: every
    /// commit the device takes runs there. [`crate::BackendPcs`] gives the MMCS of its unfused
    /// commits its DFT's threshold. Clones share the counters and keep the threshold.
    #[must_use]
    pub fn with_min_device_elems(mut self, elems: usize) -> Self {
        self.min_device_elems = elems;
        self
    }

    /// Commits of fewer elements than this run on the host
    /// ([`BackendMmcs::with_min_device_elems`]).
    pub fn min_device_elems(&self) -> usize {
        self.min_device_elems
    }

    /// The backend.
    pub fn backend(&self) -> &Arc<B> {
        &self.backend
    }

    /// The cap height.
    pub fn cap_height(&self) -> usize {
        self.cap_height
    }

    /// Plonky3's MMCS this one reproduces (its host fallback and its verifier).
    pub fn stock(&self) -> &H::Stock {
        &self.stock
    }

    /// Where the commits ran so far.
    pub fn stats(&self) -> MmcsStats {
        let c = &self.counters;
        MmcsStats {
            device_commits: c.device_commits.load(Ordering::Relaxed),
            host_commits: c.host_commits.load(Ordering::Relaxed),
            device_errors: c.device_errors.load(Ordering::Relaxed),
            digest_downloads: c.digest_downloads.load(Ordering::Relaxed),
            lde_downloads: c.lde_downloads.load(Ordering::Relaxed),
            lde_row_downloads: c.lde_row_downloads.load(Ordering::Relaxed),
        }
    }

    fn host_commit<M: Matrix<Goldilocks>>(&self, inputs: Vec<M>) -> (MerkleCap<Goldilocks, H::Digest>, Tree<B, H, M>) {
        self.counters.host_commits.fetch_add(1, Ordering::Relaxed);
        let (cap, tree) = self.stock.commit(inputs);
        (cap, Tree::Host(tree))
    }

    /// Hashes the rows of the matrices of `group`, side by side (one row-major `height x width`
    /// matrix), into `out` from digest `out_digest` on, from host memory
    /// ([`Backend::hash_leaves_from_host`]): a single matrix with contiguous rows is read where it
    /// is; several are first put side by side in the backend's host memory (page-locked on CUDA).
    fn hash_group<M: Matrix<Goldilocks>>(
        &self,
        inputs: &[M],
        group: &Group,
        out: &mut B::Buffer,
        out_digest: usize,
    ) -> backend_api::Result<()> {
        let shape = MatrixShape::new(group.height, group.width)?;
        let spec = LeafSpec::new(H::KIND, LeafLayout::Rows, 0..group.width)?;
        let members: Vec<&M> = group.members.iter().map(|&i| &inputs[i]).filter(|m| m.width() > 0).collect();
        if let [single] = members[..]
            && let Some(rows) = single.contiguous_rows(0..single.height())
        {
            return self.backend.hash_leaves_from_host(as_words(&rows), shape, &spec, out, out_digest);
        }
        let mut host = self.backend.alloc_host(shape.len())?;
        concat_rows(&members, &mut host)?;
        self.backend.hash_leaves_from_host(&host, shape, &spec, out, out_digest)
    }

    /// The leaves and the tree on the device: the node arrays and where each of Plonky3's digest
    /// layers lies in them. `hash_rows(g, out, at)` writes the row digests of `plan`'s group `g`
    /// (one per row, in the order committed) into `out` from digest `at` on: hashed from host
    /// matrices ([`Self::hash_group`]) or from device LDEs ([`Self::hash_lde_rows`]).
    fn device_tree(
        &self,
        plan: &Plan,
        mut hash_rows: impl FnMut(usize, &mut B::Buffer, usize) -> backend_api::Result<()>,
    ) -> backend_api::Result<Segments<B, H>> {
        let backend = &*self.backend;
        let mut buffers: Vec<B::Buffer> = Vec::with_capacity(plan.groups.len());
        let mut layers: Vec<LayerAt> = Vec::with_capacity(plan.log_max as usize + 1);
        for (g, group) in plan.groups.iter().enumerate() {
            let log_height = group.height.trailing_zeros();
            if g == 0 {
                // The tallest matrices' rows are the leaves of the first segment.
                let tree = TreeShape::new(group.height)?;
                let mut nodes = backend.alloc(tree.words())?;
                hash_rows(g, &mut nodes, tree.first_leaf())?;
                tracing::debug_span!("tree: nodes")
                    .in_scope(|| backend.merkle_tree_in_place(&mut nodes, tree, H::KIND))?;
                buffers.push(nodes);
                layers.extend((0..=log_height).map(|d| LayerAt::heap_level(0, log_height - d)));
            } else {
                // Injection at layer `d`, whose `n` nodes become H(folded_i || H(rows_i)): a tree
                // over the `2n` leaves `folded_0, H(rows_0), folded_1, H(rows_1), ...` has them as
                // its next level, and every level above is Plonky3's up to the next injection.
                let n = group.height;
                let d = (plan.log_max - log_height) as usize;
                let mut injected = backend.alloc(n * DIGEST_WORDS)?;
                hash_rows(g, &mut injected, 0)?;
                let tree = TreeShape::new(2 * n)?;
                let mut nodes = backend.alloc(tree.words())?;
                let first = tree.first_leaf();
                let folded = layers[d];
                let from_folded: Vec<CopyRange> = (0..n)
                    .map(|i| {
                        CopyRange::new((folded.offset + i) * DIGEST_WORDS, (first + 2 * i) * DIGEST_WORDS, DIGEST_WORDS)
                    })
                    .collect();
                backend.batched_copy(&buffers[folded.segment], &mut nodes, &from_folded)?;
                let from_rows: Vec<CopyRange> = (0..n)
                    .map(|i| CopyRange::new(i * DIGEST_WORDS, (first + 2 * i + 1) * DIGEST_WORDS, DIGEST_WORDS))
                    .collect();
                backend.batched_copy(&injected, &mut nodes, &from_rows)?;
                drop(injected);
                tracing::debug_span!("tree: nodes")
                    .in_scope(|| backend.merkle_tree_in_place(&mut nodes, tree, H::KIND))?;
                let segment = buffers.len();
                buffers.push(nodes);
                layers.truncate(d);
                layers.extend((0..=log_height).map(|e| LayerAt::heap_level(segment, log_height - e)));
            }
        }
        tracing::debug_span!("tree: top down").in_scope(|| Segments::new(backend, buffers, layers))
    }

    /// The row digests of the natural-order row-major `shape` LDE `lde` in Plonky3's order (leaf
    /// `i` the digest of row `br(i)`) into `out` from digest `at` on: hashed where they are into a
    /// buffer of one digest per row, then permuted into place on the device.
    fn hash_lde_rows(
        &self,
        lde: &B::Buffer,
        shape: MatrixShape,
        out: &mut B::Buffer,
        at: usize,
    ) -> backend_api::Result<()> {
        let backend = &*self.backend;
        let rows = shape.rows();
        let spec = LeafSpec::new(H::KIND, LeafLayout::Rows, 0..shape.cols())?;
        let mut leaves = backend.alloc(rows * DIGEST_WORDS)?;
        tracing::debug_span!("tree: leaves")
            .in_scope(|| backend.hash_leaves_into(lde, shape, &spec, &mut leaves, 0))?;
        let digests = MatrixShape::new(rows, DIGEST_WORDS)?;
        tracing::debug_span!("tree: leaves bit-reversed")
            .in_scope(|| backend.bit_reversed_rows(&leaves, 0, digests, 0..rows, out, at * DIGEST_WORDS))
    }

    /// Commits matrices whose LDEs are already on the backend, in natural row order, one LDE per
    /// height: `ldes[g]` holds the row-major matrix of its shape whose row `br(i)` is row `i` of
    /// the concatenation of the matrices of the `g`-th height, tallest first, in the order given
    /// (the same LDEs on the host, in the bit-reversed row order the PCS commits). The leaves are
    /// hashed from each LDE in natural order and put in Plonky3's order on the device, through a
    /// buffer of one digest per row (`4 / width` of the LDE's bytes), and the shorter heights are
    /// injected into the tree at their level as [`BackendMmcs`]'s commit of host matrices does.
    ///
    /// With `keep`, the prover data holds the LDEs for the openings
    /// ([`BackendProverData::device_lde_of`]); otherwise they are freed here. `guard` (a memory
    /// admission's ticket) is dropped with the prover data, after its device buffers; `recycle`,
    /// where given, then receives the host matrices instead of freeing them.
    ///
    /// # Errors
    /// The backend's errors; [`Error::InvalidArgument`] when the matrices' heights and widths,
    /// grouped by height, are not the LDEs' shapes (a caller's bug).
    pub(crate) fn commit_device_ldes<M: Matrix<Goldilocks>>(
        &self,
        ldes: Vec<(B::Buffer, MatrixShape)>,
        matrices: DeviceLdeMatrices<B, M>,
        guard: Option<Box<dyn Send + Sync>>,
        recycle: Option<fn(Vec<M>)>,
    ) -> backend_api::Result<Committed<B, M, H>> {
        let (host, keep) = match matrices {
            DeviceLdeMatrices::Host { matrices, keep } => {
                let dims = matrices.iter().map(|m| (m.height(), m.width())).collect();
                (HostMatrices::given(matrices, dims), keep)
            }
            DeviceLdeMatrices::OnFirstUse { dims, download } => {
                (HostMatrices { ready: OnceLock::new(), dims, download: Some(download) }, true)
            }
        };
        let shapes: Vec<MatrixShape> = ldes.iter().map(|(_, shape)| *shape).collect();
        let plan = Plan::from_dims(&host.dims)
            .ok()
            .filter(|p| {
                p.groups.len() == shapes.len()
                    && p.groups.iter().zip(&shapes).all(|(g, s)| g.height == s.rows() && g.width == s.cols())
            })
            .ok_or_else(|| {
                let shapes: Vec<String> = shapes.iter().map(ToString::to_string).collect();
                Error::InvalidArgument(format!(
                    "the committed matrices are not the groups of the device LDEs [{}]",
                    shapes.join(", ")
                ))
            })?;
        let segments = self.device_tree(&plan, |g, out, at| self.hash_lde_rows(&ldes[g].0, shapes[g], out, at))?;
        self.counters.device_commits.fetch_add(1, Ordering::Relaxed);
        // Matrix `i`'s LDE and first column: its group's, after the members before it.
        let mut placement = vec![(0, 0); host.dims.len()];
        for (g, group) in plan.groups.iter().enumerate() {
            let mut col = 0;
            for &i in &group.members {
                placement[i] = (g, col);
                col += host.dims[i].1;
            }
        }
        let mut committed = self.device_commit_of(host, plan, segments);
        if let Tree::Device(tree) = &mut committed.1.tree {
            if keep {
                tree.ldes = ldes.into_iter().map(|(buffer, shape)| DeviceLde { buffer, shape }).collect();
                tree.placement = placement;
            }
            tree.guard = guard;
            tree.recycle = recycle;
        }
        Ok(committed)
    }

    /// Commits one matrix whose rows are already on the backend in the order committed: `rows`
    /// holds the row-major `shape` matrix (an FRI layer folded on the device), `matrix` its host
    /// copy, which the prover data keeps for the openings. The leaves are hashed where they are
    /// ([`Backend::hash_leaves_into`]). After a device error (counted, with a warning) or for a
    /// matrix the device tree does not take, `matrix` is committed through [`Mmcs::commit`]
    /// instead: the commitment is the same.
    pub(crate) fn commit_device_rows<M: Matrix<Goldilocks>>(
        &self,
        rows: &B::Buffer,
        shape: MatrixShape,
        matrix: M,
    ) -> Committed<B, M, H> {
        let plan = match Plan::new(std::slice::from_ref(&matrix)) {
            Ok(plan) if plan.groups.len() == 1 && matrix.height() == shape.rows() && matrix.width() == shape.cols() => {
                plan
            }
            _ => return self.commit(vec![matrix]),
        };
        match self.rows_tree(rows, shape) {
            Ok(segments) => {
                self.counters.device_commits.fetch_add(1, Ordering::Relaxed);
                self.device_commit(vec![matrix], plan, segments)
            }
            Err(e) => {
                self.counters.device_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    "plonky3-adapter: committing {shape} rows on the device failed: {e}; committing from the host"
                );
                self.commit(vec![matrix])
            }
        }
    }

    /// The tree over the rows of the row-major `shape` matrix `rows` on the device, one leaf a
    /// row hashed where it is, in the order the rows lie.
    fn rows_tree(&self, rows: &B::Buffer, shape: MatrixShape) -> backend_api::Result<Segments<B, H>> {
        let backend = &*self.backend;
        let (height, log_rows) = (shape.rows(), shape.rows().trailing_zeros());
        let tree = TreeShape::new(height)?;
        let mut nodes = backend.alloc(tree.words())?;
        let spec = LeafSpec::new(H::KIND, LeafLayout::Rows, 0..shape.cols())?;
        tracing::debug_span!("tree: leaves")
            .in_scope(|| backend.hash_leaves_into(rows, shape, &spec, &mut nodes, tree.first_leaf()))?;
        tracing::debug_span!("tree: nodes").in_scope(|| backend.merkle_tree_in_place(&mut nodes, tree, H::KIND))?;
        let layers = (0..=log_rows).map(|d| LayerAt::heap_level(0, log_rows - d)).collect();
        tracing::debug_span!("tree: top down").in_scope(|| Segments::new(backend, vec![nodes], layers))
    }

    /// The commitment and prover data of a tree on the device over host `matrices`.
    fn device_commit<M: Matrix<Goldilocks>>(
        &self,
        matrices: Vec<M>,
        plan: Plan,
        segments: Segments<B, H>,
    ) -> Committed<B, M, H> {
        let dims = matrices.iter().map(|m| (m.height(), m.width())).collect();
        self.device_commit_of(HostMatrices::given(matrices, dims), plan, segments)
    }

    /// The commitment and prover data of a tree on the device.
    fn device_commit_of<M: Matrix<Goldilocks>>(
        &self,
        host: HostMatrices<B, M>,
        plan: Plan,
        segments: Segments<B, H>,
    ) -> Committed<B, M, H> {
        let tree = DeviceTree {
            backend: Arc::clone(&self.backend),
            host,
            plan,
            segments,
            counters: Arc::clone(&self.counters),
            host_layers: OnceLock::new(),
            ldes: Vec::new(),
            placement: Vec::new(),
            guard: None,
            recycle: None,
        };
        // The cap: the layer `cap_height` below the root (Plonky3 caps the height at the root).
        let root = tree.segments.layers.len() - 1;
        let layer = root - self.cap_height.min(root);
        let wanted: Vec<(usize, usize)> = (0..1usize << (root - layer)).map(|i| (layer, i)).collect();
        let cap = MerkleCap::new(tree.digests(&wanted));
        (cap, BackendProverData { tree: Tree::Device(Box::new(tree)) })
    }
}

impl<B: Backend, H: MmcsHash> BackendMmcs<B, H> {
    /// Each committed matrix's (height, width), without making a host copy that is not there.
    pub(crate) fn dims<M: Matrix<Goldilocks>>(&self, data: &BackendProverData<B, M, H>) -> Vec<(usize, usize)> {
        match &data.tree {
            Tree::Device(tree) => tree.host.dims.clone(),
            Tree::Host(tree) => self.stock.get_matrices(tree).iter().map(|m| (m.height(), m.width())).collect(),
        }
    }
}

/// A commitment and what [`BackendMmcs`] keeps of it.
pub(crate) type Committed<B, M, H> = (MerkleCap<Goldilocks, <H as MmcsHash>::Digest>, BackendProverData<B, M, H>);

/// What [`BackendMmcs`] keeps of a commit: the committed matrices, and the device tree (or, for
/// a host fallback, Plonky3's `MerkleTree`).
pub struct BackendProverData<B: Backend, M, H: MmcsHash = Keccak256> {
    tree: Tree<B, H, M>,
}

impl<B: Backend, M, H: MmcsHash> BackendProverData<B, M, H> {
    /// Whether the tree lives on the device (otherwise the commit fell back to Plonky3's
    /// `MerkleTree` on the host; see [`BackendMmcs`]).
    pub fn is_on_device(&self) -> bool {
        matches!(self.tree, Tree::Device(_))
    }

    /// Whether the committed LDEs themselves stay on the device for the openings (a
    /// [`crate::BackendPcs`] fused commit on a backend with the opening products).
    pub fn holds_device_lde(&self) -> bool {
        matches!(&self.tree, Tree::Device(d) if !d.ldes.is_empty())
    }

    /// The backend, the device LDE that holds committed matrix `i` and the matrix's first column
    /// in it, where the commit kept its LDEs on the device.
    pub(crate) fn device_lde_of(&self, i: usize) -> Option<(&Arc<B>, &DeviceLde<B>, usize)> {
        match &self.tree {
            Tree::Device(d) => {
                let &(g, col) = d.placement.get(i)?;
                d.ldes.get(g).map(|lde| (&d.backend, lde, col))
            }
            Tree::Host(_) => None,
        }
    }
}

impl<B: Backend, M, H: MmcsHash> fmt::Debug for BackendProverData<B, M, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.tree {
            Tree::Device(d) => f
                .debug_struct("BackendProverData")
                .field("on_device", &true)
                .field("matrices", &d.host.dims.len())
                .field("host_copy", &d.host.ready.get().is_some())
                .field("layers", &d.segments.layers.len())
                .field("device_ldes", &d.ldes.iter().map(|l| l.shape).collect::<Vec<_>>())
                .finish(),
            Tree::Host(_) => f.debug_struct("BackendProverData").field("on_device", &false).finish(),
        }
    }
}

enum Tree<B: Backend, H: MmcsHash, M> {
    Device(Box<DeviceTree<B, H, M>>),
    Host(<H::Stock as Mmcs<Goldilocks>>::ProverData<M>),
}

/// Where one of Plonky3's digest layers lies: `len` digests from digest `offset` of segment
/// `segment`'s node array.
#[derive(Clone, Copy, Debug)]
struct LayerAt {
    segment: usize,
    offset: usize,
}

impl LayerAt {
    /// The level of `2^log_nodes` nodes of a heap-ordered node array (CONVENTIONS.md, "Merkle
    /// tree": the level of `k` nodes starts at node `k - 1`).
    fn heap_level(segment: usize, log_nodes: u32) -> Self {
        Self { segment, offset: (1usize << log_nodes) - 1 }
    }
}

/// The device node arrays of one commit.
struct Segments<B: Backend, H: MmcsHash> {
    buffers: Vec<B::Buffer>,
    /// Plonky3's digest layers, leaves first, root last.
    layers: Vec<LayerAt>,
    /// The first digests of `buffers[top_segment]`, on the host.
    top: Vec<H::Digest>,
    top_segment: usize,
}

impl<B: Backend, H: MmcsHash> Segments<B, H> {
    /// The node arrays, with the top of the last one (the cap and the upper path levels)
    /// downloaded to the host.
    fn new(backend: &B, buffers: Vec<B::Buffer>, layers: Vec<LayerAt>) -> backend_api::Result<Self> {
        let last = buffers.len() - 1;
        let top_digests = (buffers[last].len() / DIGEST_WORDS).min((1 << TOP_LEVELS) - 1);
        let mut words = vec![0u64; top_digests * DIGEST_WORDS];
        backend.download(&buffers[last], 0, &mut words)?;
        Ok(Self { buffers, layers, top: H::from_words(&words), top_segment: last })
    }
}

/// What a fused commit hands [`BackendMmcs`] for the host side of its device LDE.
pub(crate) enum DeviceLdeMatrices<B: Backend, M> {
    /// The matrices, already on the host; `keep` keeps the LDE on the device too.
    Host {
        /// The committed matrices (bit-reversed rows).
        matrices: Vec<M>,
        /// Whether the prover data keeps the device LDE for the openings.
        keep: bool,
    },
    /// Not on the host: the device LDEs are kept, and `download` makes the matrices of these
    /// dimensions from them the first time a caller asks for them ([`Mmcs::get_matrices`]); the
    /// openings' products and the query rows read the device LDEs instead.
    OnFirstUse {
        /// Each matrix's (height, width), in order (its height is its LDE's).
        dims: Vec<(usize, usize)>,
        /// The download.
        download: LdeDownload<B, M>,
    },
}

/// Makes the host matrices of a commit's device LDEs (one per height, tallest first).
pub(crate) type LdeDownload<B, M> = Box<dyn Fn(&B, &[DeviceLde<B>]) -> backend_api::Result<Vec<M>> + Send + Sync>;

/// A device tree's committed matrices on the host: given at the commit, or downloaded from the
/// device LDE on first use.
struct HostMatrices<B: Backend, M> {
    ready: OnceLock<Vec<M>>,
    /// Each matrix's (height, width), known without the host copy.
    dims: Vec<(usize, usize)>,
    download: Option<LdeDownload<B, M>>,
}

impl<B: Backend, M> HostMatrices<B, M> {
    fn given(matrices: Vec<M>, dims: Vec<(usize, usize)>) -> Self {
        Self { ready: OnceLock::from(matrices), dims, download: None }
    }
}

struct DeviceTree<B: Backend, H: MmcsHash, M> {
    backend: Arc<B>,
    host: HostMatrices<B, M>,
    plan: Plan,
    segments: Segments<B, H>,
    counters: Arc<Counters>,
    /// Every digest layer recomputed on the host, after a device error during an opening.
    host_layers: OnceLock<Vec<Vec<H::Digest>>>,
    /// The committed LDEs, one per height (tallest first), kept on the device for the openings'
    /// products (fused commits only; empty otherwise).
    ldes: Vec<DeviceLde<B>>,
    /// Where each committed matrix lies in `ldes`: the LDE's index and the matrix's first column
    /// (empty with `ldes`).
    placement: Vec<(usize, usize)>,
    /// Held as long as the tree's device memory (a memory admission's ticket), released on drop.
    guard: Option<Box<dyn Send + Sync>>,
    /// Where the host matrices go on drop, if not freed (a fused commit's LDE, kept for the next
    /// download of its size).
    recycle: Option<fn(Vec<M>)>,
}

impl<B: Backend, H: MmcsHash, M> Drop for DeviceTree<B, H, M> {
    /// Frees (or hands to `recycle`) the host matrices and frees the device buffers inside a
    /// span, so a profile of a proof sees what dropping the prover data costs.
    fn drop(&mut self) {
        let _span = tracing::debug_span!("drop device tree").entered();
        if let Some(matrices) = self.host.ready.take() {
            match self.recycle {
                Some(recycle) => recycle(matrices),
                None => drop(matrices),
            }
        }
        drop(std::mem::take(&mut self.ldes));
        // After the device memory it accounts for.
        drop(self.guard.take());
    }
}

/// A committed LDE kept on the device after a fused commit: the committed matrices side by side
/// (matrix `i`'s columns after those of matrices `0..i`), in natural row order, so that row
/// `br(r)` of `buffer` is row `r` of each host matrix.
pub(crate) struct DeviceLde<B: Backend> {
    pub(crate) buffer: B::Buffer,
    pub(crate) shape: MatrixShape,
}

impl<B: Backend, H: MmcsHash, M: Matrix<Goldilocks>> DeviceTree<B, H, M> {
    /// The layers an authentication path crosses under a cap of height `cap_height`.
    fn proof_levels(&self, cap_height: usize) -> usize {
        let top = self.segments.layers.len() - 1;
        top - cap_height.min(top)
    }

    /// The device LDEs' shapes, for messages.
    fn lde_shapes(&self) -> String {
        let shapes: Vec<String> = self.ldes.iter().map(|l| l.shape.to_string()).collect();
        shapes.join(", ")
    }

    /// The committed matrices on the host, downloaded from the device LDEs on the first call where
    /// the commit left them there.
    ///
    /// # Panics
    /// When that download fails: the LDEs on the device are then the committed matrices' only copy.
    fn host(&self) -> &[M] {
        self.host.ready.get_or_init(|| {
            let Some(download) = self.host.download.as_ref().filter(|_| !self.ldes.is_empty()) else {
                unreachable!("a device tree without host matrices holds its LDEs and their download")
            };
            let _span = tracing::debug_span!("host matrices: LDE down").entered();
            self.counters.lde_downloads.fetch_add(1, Ordering::Relaxed);
            download(&self.backend, &self.ldes).unwrap_or_else(|e| {
                panic!(
                    "plonky3-adapter: {} download of the committed LDEs [{}] failed: {e}; their only copy is on the device",
                    self.backend.info().backend,
                    self.lde_shapes()
                )
            })
        })
    }

    /// The opened rows at global `index` (Plonky3's `index >> (log_max - log_height)`): from the
    /// host matrices, or, where they are not on the host, the rows of the device LDEs.
    fn rows_at(&self, index: usize) -> Vec<Vec<Goldilocks>> {
        if self.host.ready.get().is_none() && !self.ldes.is_empty() {
            return self.device_rows(&[index]).pop().unwrap_or_default();
        }
        self.host()
            .iter()
            .map(|m| {
                let reduced = index >> (self.plan.log_max - m.height().trailing_zeros());
                // `index < max_height` and every height is a power of two dividing it.
                m.row(reduced).map(|r| r.into_iter().collect()).unwrap_or_else(|| {
                    panic!("plonky3-adapter: a committed matrix of height {} has no row {reduced}", m.height())
                })
            })
            .collect()
    }

    /// [`Self::rows_at`] at each of `indices`: where the matrices are only on the device, read
    /// there ([`Self::device_rows`]) in one download.
    fn rows_at_each(&self, indices: &[usize]) -> Vec<Vec<Vec<Goldilocks>>> {
        if self.host.ready.get().is_none() && !self.ldes.is_empty() {
            return self.device_rows(indices);
        }
        indices.iter().map(|&i| self.rows_at(i)).collect()
    }

    /// The rows at each global index of `indices` of matrices that lie in device LDEs, side by
    /// side within a height (a fused commit's): host row `r` of a height's matrices is natural
    /// row `br(r)` of its LDE, `r` the index reduced to that height. One row of one LDE comes down
    /// from where it lies; otherwise every LDE's rows are gathered into one buffer first
    /// ([`Backend::batched_copy`], one batch per LDE) and come down at once.
    ///
    /// # Panics
    /// When the download fails: the LDEs on the device are the matrices' only copy.
    fn device_rows(&self, indices: &[usize]) -> Vec<Vec<Vec<Goldilocks>>> {
        if indices.is_empty() {
            return Vec::new();
        }
        let k = indices.len();
        // Per LDE: the copies of its rows at every index, and where they start in the download.
        let mut starts = Vec::with_capacity(self.ldes.len());
        let mut total = 0;
        let copies: Vec<Vec<CopyRange>> = self
            .ldes
            .iter()
            .map(|lde| {
                let (rows, cols) = (lde.shape.rows(), lde.shape.cols());
                let log_rows = rows.trailing_zeros();
                let first = total;
                starts.push(first);
                total += k * cols;
                indices
                    .iter()
                    .enumerate()
                    .map(|(j, &index)| {
                        let reduced = index >> (self.plan.log_max - log_rows);
                        assert!(
                            reduced < rows,
                            "plonky3-adapter: a committed matrix of height {rows} has no row {reduced}"
                        );
                        let row = p3_util::reverse_bits_len(reduced, log_rows as usize);
                        CopyRange::new(row * cols, first + j * cols, cols)
                    })
                    .collect()
            })
            .collect();
        let fetched = (|| -> backend_api::Result<Vec<u64>> {
            if let ([lde], [only]) = (&self.ldes[..], &copies[..])
                && let [one] = only[..]
            {
                let mut words = vec![0u64; one.len];
                self.backend.download(&lde.buffer, one.src, &mut words)?;
                return Ok(words);
            }
            let mut out = self.backend.alloc(total)?;
            for (lde, copies) in self.ldes.iter().zip(&copies) {
                self.backend.batched_copy(&lde.buffer, &mut out, copies)?;
            }
            self.backend.download_vec(&out)
        })();
        let words = fetched.unwrap_or_else(|e| {
            panic!(
                "plonky3-adapter: {} read of {k} rows of the committed LDEs [{}] failed: {e}; their only copy is on the device",
                self.backend.info().backend,
                self.lde_shapes()
            )
        });
        self.counters.lde_row_downloads.fetch_add(1, Ordering::Relaxed);
        (0..k)
            .map(|j| {
                self.placement
                    .iter()
                    .zip(&self.host.dims)
                    .map(|(&(g, col), &(_, width))| {
                        let at = starts[g] + j * self.ldes[g].shape.cols() + col;
                        words[at..at + width].iter().map(|&x| Goldilocks::new(x)).collect()
                    })
                    .collect()
            })
            .collect()
    }

    /// The digests at `(layer, index)`, from the cached top, one download, or (after a device
    /// error) the host's own recomputation of the tree.
    fn digests(&self, wanted: &[(usize, usize)]) -> Vec<H::Digest> {
        if let Some(host) = self.host_layers.get() {
            return wanted.iter().map(|&(l, i)| host[l][i]).collect();
        }
        match self.device_digests(wanted) {
            Ok(d) => d,
            Err(e) => {
                self.counters.device_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    "plonky3-adapter: {} download of Merkle digests for an opening failed: {e}; recomputing this tree on the host",
                    self.backend.info().backend
                );
                let host = self.host_layers.get_or_init(|| host_layers::<H, M>(self.host(), &self.plan));
                wanted.iter().map(|&(l, i)| host[l][i]).collect()
            }
        }
    }

    /// The digests at `(layer, index)`: those of the cached top from the host, the others gathered
    /// on the device into one buffer ([`Backend::batched_copy`], one batch per segment) and
    /// downloaded at once, so an opening waits for one transfer, not one per digest.
    fn device_digests(&self, wanted: &[(usize, usize)]) -> backend_api::Result<Vec<H::Digest>> {
        let s = &self.segments;
        // Where each wanted digest comes from: the cached top, or the `i`-th of the downloaded ones.
        enum From {
            Top(usize),
            Fetched { segment: usize, i: usize },
        }
        let mut per_segment: Vec<Vec<usize>> = vec![Vec::new(); s.buffers.len()];
        let mut from = Vec::with_capacity(wanted.len());
        for &(layer, index) in wanted {
            let at = s.layers[layer];
            let node = at.offset + index;
            if at.segment == s.top_segment && node < s.top.len() {
                from.push(From::Top(node));
            } else {
                from.push(From::Fetched { segment: at.segment, i: per_segment[at.segment].len() });
                per_segment[at.segment].push(node);
            }
        }
        // Segment `g`'s digests follow those of segments `0..g` in the download.
        let firsts: Vec<usize> = per_segment
            .iter()
            .scan(0, |n, nodes| {
                let first = *n;
                *n += nodes.len();
                Some(first)
            })
            .collect();
        let total: usize = per_segment.iter().map(Vec::len).sum();
        let mut fetched = Vec::new();
        if total > 0 {
            let mut gathered = self.backend.alloc(total * DIGEST_WORDS)?;
            for ((nodes, &first), buffer) in per_segment.iter().zip(&firsts).zip(&s.buffers) {
                let copies: Vec<CopyRange> = nodes
                    .iter()
                    .enumerate()
                    .map(|(i, &node)| CopyRange::new(node * DIGEST_WORDS, (first + i) * DIGEST_WORDS, DIGEST_WORDS))
                    .collect();
                if !copies.is_empty() {
                    self.backend.batched_copy(buffer, &mut gathered, &copies)?;
                }
            }
            let mut words = vec![0u64; total * DIGEST_WORDS];
            self.backend.download(&gathered, 0, &mut words)?;
            self.counters.digest_downloads.fetch_add(1, Ordering::Relaxed);
            fetched = H::from_words(&words);
        }
        Ok(from
            .into_iter()
            .map(|f| match f {
                From::Top(node) => s.top[node],
                From::Fetched { segment, i } => fetched[firsts[segment] + i],
            })
            .collect())
    }
}

/// The matrices of one height, in the order they were given.
#[derive(Clone, Debug)]
struct Group {
    height: usize,
    /// The sum of the members' widths (> 0).
    width: usize,
    members: Vec<usize>,
}

/// A commit the device path takes: every height a power of two, groups tallest first.
#[derive(Clone, Debug)]
struct Plan {
    log_max: u32,
    groups: Vec<Group>,
}

/// Why a commit goes to Plonky3's `MerkleTree` instead of the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HostReason {
    /// No matrices, an empty one, or heights off Plonky3's ladder: Plonky3 refuses (panics).
    Refused,
    /// The tallest height is not a power of two.
    NotPowerOfTwo(usize),
    /// Every matrix of one height has width 0.
    NoColumns(usize),
}

impl Plan {
    fn new<M: Matrix<Goldilocks>>(inputs: &[M]) -> Result<Self, HostReason> {
        Self::from_dims(&inputs.iter().map(|m| (m.height(), m.width())).collect::<Vec<_>>())
    }

    /// The plan of matrices of these (height, width)s.
    fn from_dims(inputs: &[(usize, usize)]) -> Result<Self, HostReason> {
        let max = inputs.iter().map(|d| d.0).max().ok_or(HostReason::Refused)?;
        if max == 0 {
            return Err(HostReason::Refused);
        }
        if !max.is_power_of_two() {
            return Err(HostReason::NotPowerOfTwo(max));
        }
        // Under a power-of-two maximum, Plonky3's ladder `ceil(max / 2^k)` is the powers of two
        // up to it; anything else is refused by Plonky3 itself.
        if inputs.iter().any(|d| !d.0.is_power_of_two()) {
            return Err(HostReason::Refused);
        }
        // Tallest first, in the given order within one height (Plonky3's stable sort).
        let mut order: Vec<usize> = (0..inputs.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(inputs[i].0));
        let mut groups: Vec<Group> = Vec::new();
        for i in order {
            let (height, width) = inputs[i];
            match groups.last_mut() {
                Some(g) if g.height == height => {
                    g.width = g.width.checked_add(width).ok_or(HostReason::Refused)?;
                    g.members.push(i);
                }
                _ => groups.push(Group { height, width, members: vec![i] }),
            }
        }
        if let Some(g) = groups.iter().find(|g| g.width == 0) {
            return Err(HostReason::NoColumns(g.height));
        }
        Ok(Self { log_max: max.trailing_zeros(), groups })
    }
}

/// Every digest layer of a device-path tree, computed on the host with Plonky3's hash and
/// compression: the fallback of openings after a device error.
fn host_layers<H: MmcsHash, M: Matrix<Goldilocks>>(matrices: &[M], plan: &Plan) -> Vec<Vec<H::Digest>> {
    let row_hashes = |group: &Group| -> Vec<H::Digest> {
        (0..group.height)
            .into_par_iter()
            .map(|r| H::hash_row(group.members.iter().flat_map(|&i| matrices[i].row(r).into_iter().flatten())))
            .collect()
    };
    let mut layers = vec![row_hashes(&plan.groups[0])];
    let mut injections = plan.groups[1..].iter().peekable();
    while layers.last().is_some_and(|l| l.len() > 1) {
        let below = layers.last().map(Vec::as_slice).unwrap_or_default();
        let mut level: Vec<H::Digest> = below.par_chunks_exact(2).map(|p| H::compress(p[0], p[1])).collect();
        if let Some(group) = injections.next_if(|g| g.height == level.len()) {
            let rows = row_hashes(group);
            level.par_iter_mut().zip(rows).for_each(|(node, row)| *node = H::compress(*node, row));
        }
        layers.push(level);
    }
    layers
}

impl<B: Backend, H: MmcsHash> Mmcs<Goldilocks> for BackendMmcs<B, H> {
    type ProverData<M> = BackendProverData<B, M, H>;
    type Commitment = MerkleCap<Goldilocks, H::Digest>;
    type Proof = Vec<H::Digest>;
    type MultiProof = <H::Stock as Mmcs<Goldilocks>>::MultiProof;
    type Error = MerkleTreeError;

    /// On the backend (see [`BackendMmcs`] for the host fallbacks).
    ///
    /// # Panics
    /// Where [`KeccakMerkleMmcs::commit`] panics: no matrices, only empty ones, or heights off
    /// Plonky3's `ceil(max_height / 2^k)` ladder.
    fn commit<M: Matrix<Goldilocks>>(&self, inputs: Vec<M>) -> (Self::Commitment, Self::ProverData<M>) {
        if self.min_device_elems > 0 {
            let elems = inputs.iter().fold(0usize, |n, m| n.saturating_add(m.height().saturating_mul(m.width())));
            if elems < self.min_device_elems {
                let (cap, tree) = self.host_commit(inputs);
                return (cap, BackendProverData { tree });
            }
        }
        let plan = match Plan::new(&inputs) {
            Ok(plan) => plan,
            Err(reason) => {
                tracing::debug!("plonky3-adapter: BackendMmcs commits on the host ({reason:?})");
                let (cap, tree) = self.host_commit(inputs);
                return (cap, BackendProverData { tree });
            }
        };
        let segments = match self.device_tree(&plan, |g, out, at| self.hash_group(&inputs, &plan.groups[g], out, at)) {
            Ok(s) => s,
            Err(e) => {
                self.counters.device_errors.fetch_add(1, Ordering::Relaxed);
                let dims: Vec<String> = inputs.iter().map(|m| format!("{}x{}", m.height(), m.width())).collect();
                tracing::warn!(
                    "plonky3-adapter: {} Merkle commit of [{}] failed: {e}; committing with Plonky3's MerkleTree on the host",
                    self.backend.info().backend,
                    dims.join(", ")
                );
                let (cap, tree) = self.host_commit(inputs);
                return (cap, BackendProverData { tree });
            }
        };
        self.counters.device_commits.fetch_add(1, Ordering::Relaxed);
        self.device_commit(inputs, plan, segments)
    }

    /// # Panics
    /// When `index` is not below the tallest height, as [`KeccakMerkleMmcs::open_batch`].
    fn open_batch<M: Matrix<Goldilocks>>(
        &self,
        index: usize,
        prover_data: &Self::ProverData<M>,
    ) -> BatchOpening<Goldilocks, Self> {
        match &prover_data.tree {
            Tree::Host(tree) => {
                let (values, proof) = self.stock.open_batch(index, tree).unpack();
                BatchOpening::new(values, proof)
            }
            Tree::Device(tree) => {
                let max_height = 1usize << tree.plan.log_max;
                assert!(index < max_height, "index {index} out of bounds for height {max_height}");
                let wanted: Vec<(usize, usize)> =
                    (0..tree.proof_levels(self.cap_height)).map(|l| (l, (index >> l) ^ 1)).collect();
                BatchOpening::new(tree.rows_at(index), tree.digests(&wanted))
            }
        }
    }

    fn get_matrices<'a, M: Matrix<Goldilocks>>(&self, prover_data: &'a Self::ProverData<M>) -> Vec<&'a M> {
        match &prover_data.tree {
            Tree::Host(tree) => self.stock.get_matrices(tree),
            Tree::Device(tree) => tree.host().iter().collect(),
        }
    }

    /// The heights without a host copy of a device LDE (the default asks `get_matrices`).
    fn get_matrix_heights<M: Matrix<Goldilocks>>(&self, prover_data: &Self::ProverData<M>) -> Vec<usize> {
        self.dims(prover_data).into_iter().map(|(h, _)| h).collect()
    }

    /// The tallest height without a host copy of a device LDE (the default asks `get_matrices`).
    fn get_max_height<M: Matrix<Goldilocks>>(&self, prover_data: &Self::ProverData<M>) -> usize {
        self.get_matrix_heights(prover_data).into_iter().max().unwrap_or_else(|| panic!("No committed matrices?"))
    }

    /// [`KeccakMerkleMmcs::verify_batch`].
    fn verify_batch(
        &self,
        commit: &Self::Commitment,
        dimensions: &[Dimensions],
        index: usize,
        batch_opening: BatchOpeningRef<'_, Goldilocks, Self>,
    ) -> Result<(), Self::Error> {
        let (values, proof) = batch_opening.unpack();
        self.stock.verify_batch(commit, dimensions, index, BatchOpeningRef::new(values, proof))
    }

    /// The rows at every index and Plonky3's pruned authentication paths: each sibling digest
    /// that no other queried path recomputes, level by level, groups by ascending parent.
    ///
    /// # Panics
    /// When an index is not below the tallest height, as
    /// [`KeccakMerkleMmcs::open_multi_batch`].
    fn open_multi_batch<M: Matrix<Goldilocks>>(
        &self,
        indices: &[usize],
        prover_data: &Self::ProverData<M>,
    ) -> (Vec<Vec<Vec<Goldilocks>>>, Self::MultiProof) {
        let tree = match &prover_data.tree {
            Tree::Host(tree) => return self.stock.open_multi_batch(indices, tree),
            Tree::Device(tree) => tree,
        };
        let max_height = 1usize << tree.plan.log_max;
        if let Some(&index) = indices.iter().find(|&&i| i >= max_height) {
            panic!("index {index} out of bounds for height {max_height}");
        }
        let values = tree.rows_at_each(indices);
        // Plonky3's frontier walk (p3-merkle-tree's `prune_paths`) over a binary tree: at each
        // level the sorted distinct nodes pair up by parent, and each missing child is sent.
        let mut nodes = indices.to_vec();
        nodes.sort_unstable();
        nodes.dedup();
        let mut wanted = Vec::new();
        for level in 0..tree.proof_levels(self.cap_height) {
            let mut parents = Vec::with_capacity(nodes.len());
            let mut i = 0;
            while i < nodes.len() {
                let parent = nodes[i] / 2;
                for child in [2 * parent, 2 * parent + 1] {
                    if nodes.get(i) == Some(&child) {
                        i += 1;
                    } else {
                        wanted.push((level, child));
                    }
                }
                parents.push(parent);
            }
            nodes = parents;
        }
        (values, H::multi_proof(tree.digests(&wanted)))
    }

    /// [`KeccakMerkleMmcs::verify_multi_batch`].
    fn verify_multi_batch<R: AsRef<[Goldilocks]> + PartialEq>(
        &self,
        commit: &Self::Commitment,
        dimensions: &[Dimensions],
        indices: &[usize],
        opened_values: &[Vec<R>],
        proof: &Self::MultiProof,
    ) -> Result<(), Self::Error> {
        self.stock.verify_multi_batch(commit, dimensions, indices, opened_values, proof)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `height x width` matrix of ones (any width, 0 included, keeps its height).
    struct Ones {
        height: usize,
        width: usize,
    }

    impl Matrix<Goldilocks> for Ones {
        fn width(&self) -> usize {
            self.width
        }

        fn height(&self) -> usize {
            self.height
        }

        unsafe fn row_unchecked(
            &self,
            _r: usize,
        ) -> impl IntoIterator<Item = Goldilocks, IntoIter = impl Iterator<Item = Goldilocks> + Send + Sync> {
            std::iter::repeat_n(Goldilocks::new(1), self.width)
        }
    }

    fn dummy(height: usize, width: usize) -> Ones {
        Ones { height, width }
    }

    #[test]
    fn plans_group_tallest_first_in_order_and_name_the_host_cases() {
        let plan = Plan::new(&[dummy(4, 1), dummy(16, 2), dummy(4, 3), dummy(16, 0), dummy(16, 5)]).unwrap();
        let groups: Vec<_> = plan.groups.iter().map(|g| (g.height, g.width, g.members.clone())).collect();
        assert_eq!(groups, [(16, 7, vec![1, 3, 4]), (4, 4, vec![0, 2])]);
        assert_eq!(plan.log_max, 4);
        assert_eq!(Plan::new(&[dummy(12, 1)]).unwrap_err(), HostReason::NotPowerOfTwo(12));
        assert_eq!(Plan::new(&[dummy(8, 1), dummy(2, 0)]).unwrap_err(), HostReason::NoColumns(2));
        assert_eq!(Plan::new(&[dummy(8, 1), dummy(3, 1)]).unwrap_err(), HostReason::Refused);
        assert_eq!(Plan::new(&[dummy(0, 1)]).unwrap_err(), HostReason::Refused);
        assert_eq!(Plan::new::<Ones>(&[]).unwrap_err(), HostReason::Refused);
    }

    /// The host recomputation of a device tree (the openings' fallback after a device error)
    /// against the device's own digests, with hash `H`.
    fn host_recomputation_has_every_digest_of_the_device_tree<H: MmcsHash>() {
        use backend_cpu::CpuBackend;
        use p3_matrix::dense::RowMajorMatrix;
        use rand::{Rng, SeedableRng};

        // Mixed heights (three segments on the device) and a tallest level larger than the
        // cached top, so both the cache and the downloads are compared.
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        let shape = [(1usize << 12, 3usize), (1 << 7, 2), (1 << 12, 1), (4, 5)];
        let mats: Vec<RowMajorMatrix<Goldilocks>> = shape
            .iter()
            .map(|&(h, w)| RowMajorMatrix::new((0..h * w).map(|_| Goldilocks::new(rng.random())).collect(), w))
            .collect();
        let mmcs = BackendMmcs::<_, H>::with_hash(Arc::new(CpuBackend::new()), 0);
        let (_, data) = mmcs.commit(mats);
        let Tree::Device(tree) = &data.tree else { panic!("the commit fell back to the host") };
        assert_eq!(tree.segments.buffers.len(), 3);
        let host = host_layers::<H, _>(tree.host(), &tree.plan);
        assert_eq!(host.len(), tree.segments.layers.len());
        for (l, layer) in host.iter().enumerate() {
            assert_eq!(layer.len(), 1 << (12 - l), "{} layer {l}", H::KIND);
            let wanted: Vec<(usize, usize)> = (0..layer.len()).map(|i| (l, i)).collect();
            assert_eq!(&tree.device_digests(&wanted).unwrap(), layer, "{} layer {l}", H::KIND);
        }
    }

    #[test]
    fn the_host_recomputation_of_a_device_tree_has_every_digest_of_it() {
        host_recomputation_has_every_digest_of_the_device_tree::<Keccak256>();
        host_recomputation_has_every_digest_of_the_device_tree::<crate::digest::Poseidon2>();
    }
}
