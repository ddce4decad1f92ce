//! Everything a commit needs, and run-time backend choice, in one import:
//! `use prover::prelude::*;`.
//!
//! It is [`commit::prelude`] (the backend trait, shapes, hashes, layouts, the
//! pipeline, its errors, a refusal's terms) plus [`Registry`] and [`SelectedBackend`] to choose a
//! backend from a name or a fallback list, [`BackendVisitor`] for work written once over every
//! backend, and the [`with_backend!`](crate::with_backend) macro.

pub use ::commit::prelude::*;

pub use crate::select::{BackendVisitor, Registry, SelectedBackend};
pub use crate::with_backend;
