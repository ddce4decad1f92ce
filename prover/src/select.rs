//! Choosing a backend at run time: which are compiled in, which are usable here, and `auto`.
//!
//! The pipeline is generic over [`Backend`]; this module is the one place that names the
//! concrete backends. [`Registry::select_from`] picks the first usable backend of a fallback list
//! (`"cuda,wgpu,cpu"`), with or without software adapters; [`Registry::select`] takes one name.
//! A [`SelectedBackend`] runs work written once, generically: a body with
//! [`with_backend!`](crate::with_backend), or a [`BackendVisitor`].
//!
//! # Ports
//!
//! A backend crate outside this one reaches the CLI through a [`Registry`]: wrap its constructor
//! in a [`Port`] and pass it to [`crate::cli::main_with`]. The port is then listed by
//! `prover backends`, selectable with `--backend <name>`, and runs every subcommand through the
//! same generic code as the built-in backends (no trait objects: the port's type is a type
//! parameter of the registry). Several ports are a tuple, `(port_a, port_b)`, nested for more
//! (`(a, (b, c))`).
//!
//! # What `auto` picks
//!
//! `auto` tries candidates in descending rank and takes the first that is usable: CUDA has rank
//! [`AUTO_RANK_CUDA`], a hardware (non-software) wgpu adapter [`AUTO_RANK_WGPU`], and a port the
//! rank it was given with [`Port::auto_rank`] (a port without one is never picked by `auto`).
//! Between equal ranks the built-in backend comes first, then ports in registration order. The
//! CPU comes last, always: it is always usable. `auto` skips a software adapter (llvmpipe, WARP)
//! and goes on; `select_from("auto", true)` accepts one, and an explicit `wgpu` always does.

use std::marker::PhantomData;

use backend_api::Backend;
use backend_cpu::CpuBackend;

use crate::{ProverError, Result};

/// The name that asks for `auto`'s choice.
pub const AUTO: &str = "auto";
/// `auto`'s rank of the CUDA backend: tried first among the built-ins.
pub const AUTO_RANK_CUDA: u32 = 200;
/// `auto`'s rank of a hardware wgpu adapter: tried after CUDA.
pub const AUTO_RANK_WGPU: u32 = 100;

/// The names of the built-in backends, in listing order.
const BUILTIN: [&str; 3] = ["cpu", "cuda", "wgpu"];

/// A constructed backend: a built-in one or one of the ports' (`X`, see [`PortBackend`]).
pub enum SelectedBackend<X = NoPort> {
    /// The CPU backend.
    Cpu(CpuBackend),
    /// The CUDA backend.
    #[cfg(feature = "cuda")]
    Cuda(backend_cuda::CudaBackend),
    /// The wgpu backend.
    #[cfg(feature = "wgpu")]
    Wgpu(backend_wgpu::WgpuBackend),
    /// A port's backend.
    Port(X),
}

/// Runs a closure-like body on the backend inside a
/// [`SelectedBackend`](crate::select::SelectedBackend) of the built-in backends (what
/// [`Registry::builtin`](crate::select::Registry::builtin) selects), with `b` bound to the
/// concrete backend: `with_backend!(selected, |b| body)` (`selected` by value or by reference;
/// it is only borrowed).
///
/// The body is compiled once per backend compiled in (`b` is a `&CpuBackend`, a
/// `&CudaBackend`, a `&WgpuBackend` in turn), so it can call generic code such as
/// [`commit()`](crate::commit()) and keep the concrete buffer types; its value must have the same
/// type for every backend. It uses local variables as a closure body would, but it is not a
/// closure: `?` and `return` in it act on the enclosing function.
///
/// Why a macro: a Rust closure cannot be generic over its argument's type, and the backends'
/// buffer types differ, so `selected.run(|b| ...)` cannot exist without trait objects (which
/// the associated buffer types of [`Backend`](crate::prelude::Backend) rule out). The macro
/// expands to a `match` over the variants, one arm per backend compiled into `prover`.
///
/// A registry with ports selects a `SelectedBackend<X>` whose port type `X` the macro cannot
/// name; there, write the work as a [`BackendVisitor`](crate::select::BackendVisitor) (a struct
/// with a generic method) and call [`visit`](crate::select::SelectedBackend::visit). Given such
/// a selection, the macro does not compile (`expected NoPort`).
///
/// ```
/// use prover::prelude::*;
///
/// let (selected, _skipped) = Registry::builtin().select_from("cuda,wgpu,cpu", true)?;
/// let trace: Vec<u64> = (0..64).collect();
/// let shape = MatrixShape::new(16, 4)?;
/// let roots = prover::with_backend!(&selected, |b| {
///     commit(b, TraceInput::host(&trace, shape), &CommitParams::default(), &NoProgress)?.roots_hex()
/// });
/// assert_eq!(roots.len(), 1);
/// # Ok::<(), ProverError>(())
/// ```
#[cfg(all(feature = "cuda", feature = "wgpu"))]
#[macro_export]
macro_rules! with_backend {
    ($selected:expr, |$b:ident| $body:expr) => {
        match &$selected {
            $crate::select::SelectedBackend::Cpu($b) => $body,
            $crate::select::SelectedBackend::Cuda($b) => $body,
            $crate::select::SelectedBackend::Wgpu($b) => $body,
            $crate::select::SelectedBackend::Port(port) => $crate::select::NoPort::never(port),
        }
    };
}

/// Runs a closure-like body on the backend inside a `SelectedBackend` (this build of
/// `prover` has the CUDA backend, not the wgpu one); see the documentation of a build with
/// every feature.
#[cfg(all(feature = "cuda", not(feature = "wgpu")))]
#[macro_export]
macro_rules! with_backend {
    ($selected:expr, |$b:ident| $body:expr) => {
        match &$selected {
            $crate::select::SelectedBackend::Cpu($b) => $body,
            $crate::select::SelectedBackend::Cuda($b) => $body,
            $crate::select::SelectedBackend::Port(port) => $crate::select::NoPort::never(port),
        }
    };
}

/// Runs a closure-like body on the backend inside a `SelectedBackend` (this build of
/// `prover` has the wgpu backend, not the CUDA one); see the documentation of a build with
/// every feature.
#[cfg(all(not(feature = "cuda"), feature = "wgpu"))]
#[macro_export]
macro_rules! with_backend {
    ($selected:expr, |$b:ident| $body:expr) => {
        match &$selected {
            $crate::select::SelectedBackend::Cpu($b) => $body,
            $crate::select::SelectedBackend::Wgpu($b) => $body,
            $crate::select::SelectedBackend::Port(port) => $crate::select::NoPort::never(port),
        }
    };
}

/// Runs a closure-like body on the backend inside a `SelectedBackend` (this build of
/// `prover` has only the CPU backend); see the documentation of a build with every feature.
#[cfg(not(any(feature = "cuda", feature = "wgpu")))]
#[macro_export]
macro_rules! with_backend {
    ($selected:expr, |$b:ident| $body:expr) => {
        match &$selected {
            $crate::select::SelectedBackend::Cpu($b) => $body,
            $crate::select::SelectedBackend::Port(port) => $crate::select::NoPort::never(port),
        }
    };
}

/// Work written once over any backend.
pub trait BackendVisitor {
    /// What the work returns.
    type Output;
    /// Runs the work on `backend`.
    fn visit<B: Backend>(self, backend: &B) -> Self::Output;
}

impl<X: PortBackend> SelectedBackend<X> {
    /// Runs `visitor` on the backend inside.
    pub fn visit<V: BackendVisitor>(&self, visitor: V) -> V::Output {
        match self {
            SelectedBackend::Cpu(b) => visitor.visit(b),
            #[cfg(feature = "cuda")]
            SelectedBackend::Cuda(b) => visitor.visit(b),
            #[cfg(feature = "wgpu")]
            SelectedBackend::Wgpu(b) => visitor.visit(b),
            SelectedBackend::Port(b) => b.visit(visitor),
        }
    }

    /// The backend's short name (a port's is the name it was registered under).
    pub fn name(&self) -> &'static str {
        match self {
            SelectedBackend::Cpu(_) => "cpu",
            #[cfg(feature = "cuda")]
            SelectedBackend::Cuda(_) => "cuda",
            #[cfg(feature = "wgpu")]
            SelectedBackend::Wgpu(_) => "wgpu",
            SelectedBackend::Port(b) => b.name(),
        }
    }

    /// A name of the physical device that is the same in every process, safe as a file name: the
    /// key of its cross-process reservation queue (`--wait-for-memory`), the backend's
    /// [`Backend::device_key`]. CUDA: `cuda-GPU-<uuid>`; wgpu:
    /// `wgpu-<adapter name>-<vendor>-<device>-<PCI bus>`; CPU: `cpu`; a port: its own, by default
    /// `<name>-<device>`. Programs using one GPU through different APIs get different keys; the
    /// driver's free memory still accounts for each other's use.
    pub fn device_key(&self) -> String {
        self.visit(DeviceKey)
    }

    /// Runs `work` on this thread while the backend prepares, on another, what `prep` names
    /// ([`Backend::prepare`]: CUDA compiles or loads the commit's kernels, page-locks its staging
    /// ring and grows its memory pool; wgpu creates the commit's pipelines and pools an LDE-sized
    /// buffer; both build the LDE's host tables; the CPU has nothing to prepare; a port does what
    /// it implements), each step traced (`STARK_COMMIT_TRACE=1`). Returns `work`'s result and the
    /// preparation's.
    pub fn while_preparing<T>(&self, prep: Preparation, work: impl FnOnce() -> T) -> (T, Result<()>) {
        self.visit(Preparing { prep, work })
    }

    /// The backend's fastest host <-> device copies of `data`'s bytes (median of three each), the
    /// floor `prover bench` compares uploads with ([`Backend::transfer_floor`]): page-locked
    /// copies on CUDA; `None` on the CPU (no bus to cross) and wgpu (no page-locked host memory).
    ///
    /// # Errors
    /// A device error, or page-locked memory the host refuses.
    pub fn transfer_floor(&self, data: &[u64]) -> Result<Option<crate::bench::TransferFloor>> {
        let floor = self.visit(Floor(data))?;
        Ok(floor.map(|f| crate::bench::TransferFloor {
            what: f.what,
            h2d_seconds: f.h2d_seconds,
            d2h_seconds: f.d2h_seconds,
        }))
    }

    /// Whether the device is a software emulation ([`Backend::is_software`]; only wgpu's can be
    /// among the built-in backends).
    pub fn is_software(&self) -> bool {
        self.visit(Software)
    }
}

struct DeviceKey;

impl BackendVisitor for DeviceKey {
    type Output = String;
    fn visit<B: Backend>(self, backend: &B) -> String {
        backend.device_key()
    }
}

struct Software;

impl BackendVisitor for Software {
    type Output = bool;
    fn visit<B: Backend>(self, backend: &B) -> bool {
        backend.is_software()
    }
}

struct Floor<'a>(&'a [u64]);

impl BackendVisitor for Floor<'_> {
    type Output = backend_api::Result<Option<backend_api::TransferFloor>>;
    fn visit<B: Backend>(self, backend: &B) -> Self::Output {
        backend.transfer_floor(self.0)
    }
}

struct Preparing<F> {
    prep: Preparation,
    work: F,
}

impl<T, F: FnOnce() -> T> BackendVisitor for Preparing<F> {
    type Output = (T, Result<()>);
    fn visit<B: Backend>(self, backend: &B) -> Self::Output {
        let Self { prep, work } = self;
        std::thread::scope(|s| {
            let prepare = s.spawn(|| {
                let mut step = |line: &str| crate::trace::step(line);
                backend.prepare(&prep, &mut step).map_err(Into::into)
            });
            let out = work();
            let prepared = match prepare.join() {
                Ok(r) => r,
                Err(panic) => std::panic::resume_unwind(panic),
            };
            (out, prepared)
        })
    }
}

/// A port's constructed backend, as a [`SelectedBackend::Port`] holds it: something that can run
/// a [`BackendVisitor`] on a concrete [`Backend`]. [`Port`] and tuples of ports implement it
/// through [`Ports`]; a port's crate does not implement it by hand.
pub trait PortBackend {
    /// The name it was registered under.
    fn name(&self) -> &'static str;
    /// Runs `visitor` on the backend inside.
    fn visit<V: BackendVisitor>(&self, visitor: V) -> V::Output;
}

/// The port backend of a registry without ports: it has no values.
pub enum NoPort {}

impl NoPort {
    /// Any type from a value that cannot exist: the port arm of [`with_backend!`](crate::with_backend).
    pub fn never<T>(port: &NoPort) -> T {
        match *port {}
    }
}

impl PortBackend for NoPort {
    fn name(&self) -> &'static str {
        match *self {}
    }
    fn visit<V: BackendVisitor>(&self, _: V) -> V::Output {
        match *self {}
    }
}

/// A backend `B` registered under a name.
pub struct Named<B> {
    name: &'static str,
    backend: B,
}

impl<B: Backend> PortBackend for Named<B> {
    fn name(&self) -> &'static str {
        self.name
    }
    fn visit<V: BackendVisitor>(&self, visitor: V) -> V::Output {
        visitor.visit(&self.backend)
    }
}

/// The backend of one port of a pair: the first's or the second's.
pub enum Either<A, B> {
    /// The first port's backend.
    First(A),
    /// The second port's backend.
    Second(B),
}

impl<A: PortBackend, B: PortBackend> PortBackend for Either<A, B> {
    fn name(&self) -> &'static str {
        match self {
            Either::First(a) => a.name(),
            Either::Second(b) => b.name(),
        }
    }
    fn visit<V: BackendVisitor>(&self, visitor: V) -> V::Output {
        match self {
            Either::First(a) => a.visit(visitor),
            Either::Second(b) => b.visit(visitor),
        }
    }
}

/// A port's entry in the registry: its name, a one-line description, and its rank for `auto`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortEntry {
    /// The `--backend` value.
    pub name: &'static str,
    /// One line for `--help`.
    pub about: &'static str,
    /// `auto`'s rank, or `None` when `auto` never picks it.
    pub auto_rank: Option<u32>,
}

/// One backend type a port adds to the CLI: its name and how to construct it.
///
/// ```
/// # use prover::select::Port;
/// let port = Port::new("rayon", "the CPU backend under another name", || Ok(backend_cpu::CpuBackend::new()))
///     .auto_rank(50);
/// # let _ = prover::select::Registry::with_ports(port).unwrap();
/// ```
pub struct Port<B, F> {
    entry: PortEntry,
    make: F,
    backend: PhantomData<fn() -> B>,
}

impl<B, F> Port<B, F>
where
    B: Backend,
    F: Fn() -> backend_api::Result<B>,
{
    /// A port named `name` (the `--backend` value: ASCII letters, digits, `-` and `_`, not a
    /// built-in name), described by `about`, constructed by `make` each time it is selected or
    /// probed. `make` returns the backend's own error when its device is unusable.
    pub fn new(name: &'static str, about: &'static str, make: F) -> Self {
        Self { entry: PortEntry { name, about, auto_rank: None }, make, backend: PhantomData }
    }

    /// Lets `auto` pick this port, at `rank` (see the [module docs](self): above
    /// [`AUTO_RANK_CUDA`] it is tried before CUDA, below [`AUTO_RANK_WGPU`] after wgpu; the CPU
    /// is always last).
    pub fn auto_rank(mut self, rank: u32) -> Self {
        self.entry.auto_rank = Some(rank);
        self
    }
}

/// A set of ports: `()` (none), one [`Port`], or a pair of sets (nest pairs for more).
pub trait Ports {
    /// The backend one of these ports constructs.
    type Backend: PortBackend;
    /// The ports' entries, in registration order.
    fn entries(&self) -> Vec<PortEntry>;
    /// Constructs the port named `name`; `None` when no port has that name.
    fn make(&self, name: &str) -> Option<backend_api::Result<Self::Backend>>;
}

impl Ports for () {
    type Backend = NoPort;
    fn entries(&self) -> Vec<PortEntry> {
        Vec::new()
    }
    fn make(&self, _: &str) -> Option<backend_api::Result<NoPort>> {
        None
    }
}

impl<B, F> Ports for Port<B, F>
where
    B: Backend,
    F: Fn() -> backend_api::Result<B>,
{
    type Backend = Named<B>;
    fn entries(&self) -> Vec<PortEntry> {
        vec![self.entry.clone()]
    }
    fn make(&self, name: &str) -> Option<backend_api::Result<Named<B>>> {
        (name == self.entry.name).then(|| (self.make)().map(|backend| Named { name: self.entry.name, backend }))
    }
}

impl<P: Ports, Q: Ports> Ports for (P, Q) {
    type Backend = Either<P::Backend, Q::Backend>;
    fn entries(&self) -> Vec<PortEntry> {
        let mut all = self.0.entries();
        all.extend(self.1.entries());
        all
    }
    fn make(&self, name: &str) -> Option<backend_api::Result<Self::Backend>> {
        match self.0.make(name) {
            Some(made) => Some(made.map(Either::First)),
            None => self.1.make(name).map(|made| made.map(Either::Second)),
        }
    }
}

/// What [`SelectedBackend::while_preparing`] prepares for a commit ([`Backend::prepare`]).
pub use backend_api::Preparation;

#[cfg(not(all(feature = "cuda", feature = "wgpu")))]
fn not_compiled(name: &'static str) -> backend_api::Error {
    backend_api::Error::BackendUnavailable {
        backend: name,
        reason: format!("not compiled into this binary (rebuild with `--features {name}`)"),
    }
}

/// Constructs the CUDA backend on device 0, with the options of the environment
/// (`backend_cuda::CudaOptions::from_env`: `CUDA_UPLOAD_GROUPS`, `STARK_COMMIT_KERNEL_CACHE`,
/// `CUDA_QUOTIENT_POINTS`).
///
/// # Errors
/// [`backend_api::Error::BackendUnavailable`] when the `cuda` feature is off; the backend's own error when no
/// driver or device is usable, or an environment variable holds a bad value.
pub fn cuda<X>() -> Result<SelectedBackend<X>> {
    #[cfg(feature = "cuda")]
    {
        let options = backend_cuda::CudaOptions::from_env()?;
        Ok(SelectedBackend::Cuda(backend_cuda::CudaBackend::open(0, options)?))
    }
    #[cfg(not(feature = "cuda"))]
    {
        Err(not_compiled("cuda").into())
    }
}

/// Constructs the wgpu backend; `allow_software` admits software adapters (lavapipe, WARP).
///
/// # Errors
/// [`backend_api::Error::BackendUnavailable`] when the `wgpu` feature is off; the backend's own error when no
/// adapter is usable.
pub fn wgpu<X>(allow_software: bool) -> Result<SelectedBackend<X>> {
    #[cfg(feature = "wgpu")]
    {
        let options = backend_wgpu::WgpuOptions { allow_software, ..Default::default() };
        Ok(SelectedBackend::Wgpu(backend_wgpu::WgpuBackend::new(options)?))
    }
    #[cfg(not(feature = "wgpu"))]
    {
        let _ = allow_software;
        Err(not_compiled("wgpu").into())
    }
}

/// The backends a binary can run on: the built-in ones and a set of ports `P`.
pub struct Registry<P = ()> {
    ports: P,
    entries: Vec<PortEntry>,
}

impl Registry {
    /// The built-in backends only: `cpu`, and `cuda` / `wgpu` where their features are on.
    pub fn builtin() -> Self {
        Self { ports: (), entries: Vec::new() }
    }
}

impl<P: Ports> Registry<P> {
    /// The built-in backends and `ports`.
    ///
    /// # Errors
    /// [`ProverError::Usage`] when a port's name is empty, has a character other than ASCII
    /// letters, digits, `-` and `_`, or is taken (by `auto`, a built-in backend or another port).
    pub fn with_ports(ports: P) -> Result<Self> {
        let entries = ports.entries();
        for (i, e) in entries.iter().enumerate() {
            let valid =
                !e.name.is_empty() && e.name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_');
            if !valid {
                return Err(ProverError::Usage(format!(
                    "port name {:?} is not a valid --backend value (use ASCII letters, digits, '-' and '_')",
                    e.name
                )));
            }
            let taken = e.name == AUTO || BUILTIN.contains(&e.name) || entries[..i].iter().any(|o| o.name == e.name);
            if taken {
                return Err(ProverError::Usage(format!("port name `{}` is already taken", e.name)));
            }
        }
        Ok(Self { ports, entries })
    }

    /// The ports' entries, in registration order.
    pub fn ports(&self) -> &[PortEntry] {
        &self.entries
    }

    /// Every backend this binary can be asked for, with a one-line description: `auto`, the
    /// built-in backends compiled in (`cpu` always; `cuda` and `wgpu` only with their features),
    /// the ports. [`Registry::probe_all`] says which of them are usable here.
    pub fn choices(&self) -> Vec<(&'static str, &'static str)> {
        let mut all = vec![
            (AUTO, "the first usable backend in `auto`'s order (`prover backends` shows it)"),
            ("cpu", "the CPU (rayon) backend, always available"),
        ];
        if cfg!(feature = "cuda") {
            all.push(("cuda", "the CUDA backend, device 0"));
        }
        if cfg!(feature = "wgpu") {
            all.push(("wgpu", "the wgpu backend, software adapters allowed"));
        }
        all.extend(self.entries.iter().map(|e| (e.name, e.about)));
        all
    }

    /// The names `auto` tries, in order (see the [module docs](self)); the CPU is last.
    pub fn auto_order(&self) -> Vec<&'static str> {
        let mut ranked = vec![("cuda", AUTO_RANK_CUDA), ("wgpu", AUTO_RANK_WGPU)];
        ranked.extend(self.entries.iter().filter_map(|e| e.auto_rank.map(|r| (e.name, r))));
        // A stable sort keeps the built-ins before ports of equal rank, and ports in order.
        ranked.sort_by_key(|&(_, rank)| std::cmp::Reverse(rank));
        ranked.into_iter().map(|(name, _)| name).chain(["cpu"]).collect()
    }

    /// The backend `name` names, and for `auto` why each candidate before the chosen one was
    /// skipped. An explicit name admits a software adapter (`wgpu` on lavapipe); `auto` skips
    /// one and goes on, ending on the CPU. For a fallback list, or `auto` with software adapters
    /// admitted, use [`Registry::select_from`].
    ///
    /// # Errors
    /// [`ProverError::Usage`] for a name that is neither `auto` nor a backend of this registry;
    /// for an explicit choice, [`backend_api::Error::BackendUnavailable`] (not compiled in) or
    /// the backend's own construction error. `auto` never fails: the CPU is always there.
    pub fn select(&self, name: &str) -> Result<(SelectedBackend<P::Backend>, Vec<String>)> {
        if name != AUTO {
            return Ok((self.make(name, true)?, Vec::new()));
        }
        let mut skipped = Vec::new();
        for candidate in self.auto_order() {
            match self.make(candidate, false) {
                Ok(b) if !b.is_software() => return Ok((b, skipped)),
                Ok(_) => skipped.push(format!("{candidate}: only a software adapter is available")),
                Err(e) => skipped.push(format!("{candidate}: {e}")),
            }
        }
        unreachable!("auto_order ends with the CPU, which is always usable")
    }

    /// The first usable backend of a comma-separated fallback list, e.g. `"cuda,wgpu,cpu"`, and
    /// why each one before it was skipped. Names are tried in the order given; `auto` in the list
    /// stands for `auto`'s order ([`Registry::auto_order`]). `allow_software` admits software
    /// adapters (lavapipe/llvmpipe, WARP) for every name of the list, `auto` included; without it
    /// a backend on a software adapter is skipped like an unusable one. A name of a backend that
    /// is not compiled in is skipped with that reason, so one list serves every build.
    ///
    /// [`Registry::select`] differs in two ways: it takes one name, and an explicit name admits a
    /// software adapter while `auto` does not.
    ///
    /// ```
    /// # use prover::select::Registry;
    /// let registry = Registry::builtin();
    /// let (backend, skipped) = registry.select_from("cuda,wgpu,cpu", false)?;
    /// // Without GPUs: the CPU, after CUDA and wgpu were each skipped with a reason.
    /// # if !cfg!(feature = "cuda") && !cfg!(feature = "wgpu") {
    /// assert_eq!((backend.name(), skipped.len()), ("cpu", 2));
    /// # }
    /// # Ok::<(), prover::ProverError>(())
    /// ```
    ///
    /// # Errors
    /// [`ProverError::Usage`] for an empty list, an empty entry, or a name that is none of
    /// `auto`, `cpu`, `cuda`, `wgpu` or a port's; [`ProverError::NoBackendUsable`], naming each
    /// backend tried and why, when none of the list is usable.
    pub fn select_from(&self, list: &str, allow_software: bool) -> Result<(SelectedBackend<P::Backend>, Vec<String>)> {
        let mut names: Vec<&str> = Vec::new();
        for name in list.split(',').map(str::trim) {
            if name == AUTO {
                names.extend(self.auto_order());
            } else if name.is_empty() {
                return Err(ProverError::Usage(format!(
                    "backend list `{list}` has an empty entry; give names separated by commas, e.g. `cuda,wgpu,cpu`"
                )));
            } else if BUILTIN.contains(&name) || self.entries.iter().any(|e| e.name == name) {
                names.push(name);
            } else {
                return Err(self.unknown(name));
            }
        }
        let mut skipped = Vec::new();
        for (i, candidate) in names.iter().enumerate() {
            if names[..i].contains(candidate) {
                continue;
            }
            match self.make(candidate, allow_software) {
                Ok(b) if allow_software || !b.is_software() => return Ok((b, skipped)),
                Ok(_) => skipped.push(format!(
                    "{candidate}: only a software adapter is available (allow software adapters to use it)"
                )),
                Err(e) => skipped.push(format!("{candidate}: {e}")),
            }
        }
        Err(ProverError::NoBackendUsable { list: list.to_owned(), tried: skipped })
    }

    /// The error for a name that is no backend of this registry.
    fn unknown(&self, name: &str) -> ProverError {
        ProverError::Usage(format!(
            "unknown backend `{name}`; this binary has: {}",
            self.choices().iter().map(|c| c.0).collect::<Vec<_>>().join(", ")
        ))
    }

    /// Constructs the backend `name`; `allow_software` admits software wgpu adapters.
    fn make(&self, name: &str, allow_software: bool) -> Result<SelectedBackend<P::Backend>> {
        match name {
            "cpu" => Ok(SelectedBackend::Cpu(CpuBackend::new())),
            "cuda" => cuda(),
            "wgpu" => wgpu(allow_software),
            _ => match self.ports.make(name) {
                Some(made) => Ok(SelectedBackend::Port(made?)),
                None => Err(self.unknown(name)),
            },
        }
    }

    /// Tries to construct every backend (built-in ones first, then the ports) and reports each.
    pub fn probe_all(&self) -> Vec<BackendStatus> {
        let names = BUILTIN.iter().copied().chain(self.entries.iter().map(|e| e.name));
        names
            .map(|backend| {
                let compiled =
                    (backend != "cuda" || cfg!(feature = "cuda")) && (backend != "wgpu" || cfg!(feature = "wgpu"));
                let port = !BUILTIN.contains(&backend);
                match self.make(backend, true) {
                    Ok(b) => BackendStatus {
                        backend,
                        compiled,
                        port,
                        device: Some(b.visit(DeviceName)),
                        software: b.is_software(),
                        reason: None,
                    },
                    Err(e) => BackendStatus {
                        backend,
                        compiled,
                        port,
                        device: None,
                        software: false,
                        reason: Some(e.to_string()),
                    },
                }
            })
            .collect()
    }
}

/// Whether one backend is compiled in and usable here.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct BackendStatus {
    /// `cpu`, `cuda`, `wgpu` or a port's name.
    pub backend: &'static str,
    /// Whether this binary was built with it.
    pub compiled: bool,
    /// Whether it is a port (registered through [`Registry::with_ports`]).
    pub port: bool,
    /// The device name when usable.
    pub device: Option<String>,
    /// Whether it runs on a software adapter (wgpu only).
    pub software: bool,
    /// Why it is unusable, when it is.
    pub reason: Option<String>,
}

/// The device name of a backend.
struct DeviceName;

impl BackendVisitor for DeviceName {
    type Output = String;
    fn visit<B: Backend>(self, backend: &B) -> String {
        backend.info().device
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ProverError;
    use backend_api::Error;

    /// A second CPU backend under another name: a port whose construction always works.
    fn rayon_port(rank: Option<u32>) -> impl Ports {
        let port = Port::new("rayon", "the CPU backend again", || Ok(CpuBackend::new()));
        match rank {
            Some(r) => port.auto_rank(r),
            None => port,
        }
    }

    /// A port whose device is never there.
    fn absent_port(name: &'static str, rank: u32) -> impl Ports {
        Port::new(name, "never usable", move || -> backend_api::Result<CpuBackend> {
            Err(Error::BackendUnavailable { backend: "absent", reason: format!("no {name} device here") })
        })
        .auto_rank(rank)
    }

    #[test]
    fn cpu_is_always_there_and_auto_falls_back_to_it_without_gpus() {
        let registry = Registry::builtin();
        let status = registry.probe_all();
        assert_eq!(status.iter().map(|s| s.backend).collect::<Vec<_>>(), ["cpu", "cuda", "wgpu"]);
        assert!(status[0].device.is_some() && status[0].reason.is_none() && !status[0].port, "{status:?}");
        if !cfg!(feature = "cuda") {
            let reason = status[1].reason.as_deref().unwrap_or_default();
            assert!(reason.contains("--features cuda"), "{reason}");
            let err = registry.select("cuda").err().expect("cuda is not compiled in");
            assert!(matches!(err, ProverError::Backend(Error::BackendUnavailable { .. })), "{err}");
            assert_eq!(err.exit_code(), crate::EXIT_REFUSED_OR_DEVICE);
        }
        if !cfg!(feature = "cuda") && !cfg!(feature = "wgpu") {
            let (b, skipped) = registry.select(AUTO).unwrap();
            assert_eq!(b.name(), "cpu");
            assert_eq!(skipped.len(), 2, "{skipped:?}");
        }
    }

    #[test]
    fn auto_order_follows_the_ranks_with_builtins_first_on_ties() {
        let ports = (
            absent_port("first", AUTO_RANK_CUDA + 1),
            (
                absent_port("tie", AUTO_RANK_WGPU),
                (absent_port("low", 1), (absent_port("between", AUTO_RANK_WGPU + 1), rayon_port(None))),
            ),
        );
        let registry = Registry::with_ports(ports).unwrap();
        assert_eq!(registry.auto_order(), ["first", "cuda", "between", "wgpu", "tie", "low", "cpu"]);
        assert_eq!(
            registry.ports().iter().map(|e| e.name).collect::<Vec<_>>(),
            ["first", "tie", "low", "between", "rayon"]
        );
        let compiled = 2 + usize::from(cfg!(feature = "cuda")) + usize::from(cfg!(feature = "wgpu"));
        assert_eq!(registry.choices().len(), compiled + 5);
        if !cfg!(feature = "cuda") && !cfg!(feature = "wgpu") {
            // Every ranked candidate fails, so auto names each one and ends on the CPU.
            let (b, skipped) = registry.select(AUTO).unwrap();
            assert_eq!(b.name(), "cpu");
            let names: Vec<&str> = skipped.iter().map(|s| s.split(':').next().unwrap()).collect();
            assert_eq!(names, ["first", "cuda", "between", "wgpu", "tie", "low"]);
            assert!(skipped[0].contains("no first device here"), "{skipped:?}");
        }
    }

    #[test]
    fn a_ranked_usable_port_is_auto_s_choice_and_selectable_by_name() {
        let registry = Registry::with_ports(rayon_port(Some(AUTO_RANK_CUDA + 1))).unwrap();
        let (b, skipped) = registry.select(AUTO).unwrap();
        assert_eq!((b.name(), skipped.len()), ("rayon", 0));
        assert!(matches!(b, SelectedBackend::Port(_)));
        assert_eq!(b.visit(DeviceName), CpuBackend::new().info().device);
        let (b, _) = registry.select("rayon").unwrap();
        assert_eq!(b.name(), "rayon");
        let status = registry.probe_all();
        assert_eq!((status[3].backend, status[3].port, status[3].reason.as_deref()), ("rayon", true, None));

        // Unranked, auto never picks it, but it stays selectable.
        let registry = Registry::with_ports(rayon_port(None)).unwrap();
        assert!(!registry.auto_order().contains(&"rayon"));
        assert_eq!(registry.select("rayon").unwrap().0.name(), "rayon");
        let err = registry.select("metal").err().unwrap();
        let builtin = match (cfg!(feature = "cuda"), cfg!(feature = "wgpu")) {
            (true, true) => "auto, cpu, cuda, wgpu",
            (true, false) => "auto, cpu, cuda",
            (false, true) => "auto, cpu, wgpu",
            (false, false) => "auto, cpu",
        };
        assert_eq!(err.to_string(), format!("unknown backend `metal`; this binary has: {builtin}, rayon"));
        assert_eq!(err.exit_code(), crate::EXIT_USAGE);
    }

    #[test]
    fn an_unusable_port_is_refused_by_name_and_reported_by_probe() {
        let registry = Registry::with_ports(absent_port("absent", 1)).unwrap();
        let err = registry.select("absent").err().unwrap();
        assert!(err.to_string().contains("no absent device here"), "{err}");
        assert_eq!(err.exit_code(), crate::EXIT_REFUSED_OR_DEVICE);
        let status = registry.probe_all();
        assert!(status[3].reason.as_deref().unwrap().contains("no absent device here"), "{status:?}");
        assert!(status[3].device.is_none() && status[3].port);
    }

    #[test]
    fn choices_list_only_what_is_compiled_in() {
        let names: Vec<&str> = Registry::builtin().choices().iter().map(|c| c.0).collect();
        assert_eq!(names[..2], ["auto", "cpu"]);
        assert_eq!(names.contains(&"cuda"), cfg!(feature = "cuda"), "{names:?}");
        assert_eq!(names.contains(&"wgpu"), cfg!(feature = "wgpu"), "{names:?}");
        // Every name listed is selectable by name or fails only for want of a device.
        let registry = Registry::builtin();
        for name in names {
            if let Err(e) = registry.select(name) {
                assert!(
                    matches!(e, ProverError::Backend(ref b) if b.is_unavailable() || b.is_device_error()),
                    "{name}: {e}"
                );
                assert!(!e.to_string().contains("not compiled"), "{name}: {e}");
            }
        }
    }

    #[test]
    fn a_fallback_list_is_tried_in_its_order() {
        let ports = (absent_port("absent", 1), rayon_port(None));
        let registry = Registry::with_ports(ports).unwrap();
        // The absent port is skipped with its reason; an unranked port is reachable by name.
        let (b, skipped) = registry.select_from("absent, rayon ,cpu", false).unwrap();
        assert_eq!(b.name(), "rayon");
        assert_eq!(skipped.len(), 1);
        assert!(skipped[0].starts_with("absent: ") && skipped[0].contains("no absent device here"), "{skipped:?}");
        // A name given twice is tried once.
        let err = registry.select_from("absent,absent", true).err().unwrap();
        match &err {
            ProverError::NoBackendUsable { list, tried } => {
                assert_eq!((list.as_str(), tried.len()), ("absent,absent", 1), "{err}");
            }
            other => panic!("expected NoBackendUsable, got {other}"),
        }
        assert_eq!(err.exit_code(), crate::EXIT_REFUSED_OR_DEVICE);
        assert!(err.to_string().starts_with("no backend of `absent,absent` is usable here: absent: "), "{err}");
        // `auto` in a list is auto's order; the CPU ends it.
        let (b, skipped) = registry.select_from("absent,auto", false).unwrap();
        if !cfg!(feature = "cuda") && !cfg!(feature = "wgpu") {
            assert_eq!(b.name(), "cpu");
            let names: Vec<&str> = skipped.iter().map(|s| s.split(':').next().unwrap()).collect();
            assert_eq!(names, ["absent", "cuda", "wgpu"], "{skipped:?}");
        }
        // Hostile lists: usage errors before anything is constructed.
        for list in ["", ",", "cpu,", " , cpu", "cpu,metal", "CPU", "cpu;wgpu"] {
            let err = registry.select_from(list, true).err().unwrap();
            assert_eq!(err.exit_code(), crate::EXIT_USAGE, "{list:?}: {err}");
        }
        let err = registry.select_from("cpu,metal", true).err().unwrap();
        assert!(err.to_string().contains("unknown backend `metal`"), "{err}");
        // A built-in that is not compiled in is skipped, not a usage error.
        if !cfg!(feature = "cuda") {
            let (b, skipped) = registry.select_from("cuda,cpu", false).unwrap();
            assert_eq!(b.name(), "cpu");
            assert!(skipped[0].contains("--features cuda"), "{skipped:?}");
        }
    }

    /// The software flag decides whether a software adapter counts, for `auto` as for `wgpu`.
    #[cfg(feature = "wgpu")]
    #[test]
    fn the_software_flag_admits_a_software_adapter() {
        let registry = Registry::builtin();
        let Some((wgpu, _)) = naive_reference::skip::or_skip(registry.select("wgpu"), "wgpu selection", "REQUIRE_WGPU")
        else {
            return;
        };
        if !wgpu.is_software() {
            return;
        }
        let (b, _) = registry.select_from("wgpu,cpu", true).unwrap();
        assert_eq!(b.name(), "wgpu");
        let (b, skipped) = registry.select_from("wgpu,cpu", false).unwrap();
        assert_eq!(b.name(), "cpu");
        assert!(skipped[0].contains("software adapter"), "{skipped:?}");
        assert!(matches!(registry.select_from("wgpu", false), Err(ProverError::NoBackendUsable { .. })));
        if !cfg!(feature = "cuda") {
            assert_eq!(registry.select_from("auto", true).unwrap().0.name(), "wgpu");
            assert_eq!(registry.select_from("auto", false).unwrap().0.name(), "cpu");
        }
    }

    /// Each usable built-in backend's device key is one safe file name: it names a directory of
    /// the cross-process reservation queue.
    #[test]
    fn every_device_key_is_one_safe_file_name() {
        let registry = Registry::builtin();
        let mut seen = 0;
        for (name, _) in registry.choices().into_iter().filter(|c| c.0 != AUTO) {
            let Ok((b, _)) = registry.select(name) else { continue };
            let key = b.device_key();
            seen += 1;
            assert!(!key.is_empty() && key.len() <= 255, "{name}: {key:?}");
            assert!(key.bytes().all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(&c)), "{name}: {key:?}");
            assert!(!key.starts_with(['.', '-']) && !key.ends_with(['-', '.']), "{name}: {key:?}");
            assert!(key.starts_with(name), "{name}: {key:?}");
            // The key is stable: a second instance of the same device gives the same one.
            assert_eq!(registry.select(name).unwrap().0.device_key(), key, "{name}");
        }
        assert_eq!(registry.select("cpu").unwrap().0.device_key(), "cpu");
        if cfg!(feature = "wgpu") && naive_reference::skip::required("REQUIRE_WGPU") {
            assert!(seen >= 2, "wgpu is required but was not usable");
        }
    }

    #[test]
    fn with_backend_runs_generic_work_on_the_selected_backend() {
        let (selected, _) = Registry::builtin().select("cpu").unwrap();
        let trace: Vec<u64> = (0..32).collect();
        let shape = backend_api::MatrixShape::new(8, 4).unwrap();
        let run = || -> crate::Result<Vec<String>> {
            Ok(crate::with_backend!(selected, |b| {
                crate::commit(
                    b,
                    crate::TraceInput::host(&trace, shape),
                    &crate::CommitParams::default(),
                    &crate::NoProgress,
                )?
                .roots_hex()
            }))
        };
        let roots = run().unwrap();
        let want = crate::commit(
            &CpuBackend::new(),
            crate::TraceInput::host(&trace, shape),
            &crate::CommitParams::default(),
            &crate::NoProgress,
        )
        .unwrap()
        .roots_hex();
        assert_eq!(roots, want);
        let by_ref = crate::with_backend!(&selected, |b| b.info().backend);
        assert_eq!(by_ref, "cpu");
    }

    #[test]
    fn port_names_must_be_new_and_valid() {
        for name in ["auto", "cpu", "cuda", "wgpu"] {
            let err = Registry::with_ports(absent_port(name, 1)).err().unwrap();
            assert_eq!(err.to_string(), format!("port name `{name}` is already taken"));
        }
        let err = Registry::with_ports((rayon_port(None), rayon_port(None))).err().unwrap();
        assert_eq!(err.to_string(), "port name `rayon` is already taken");
        for name in ["", "my port", "gpu!", "é"] {
            let err = Registry::with_ports(absent_port(name, 1)).err().unwrap();
            assert!(err.to_string().contains("is not a valid --backend value"), "{name:?}: {err}");
        }
        Registry::with_ports(absent_port("my-port_2", 1)).unwrap();
    }
}
