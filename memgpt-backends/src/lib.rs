//! Storage backends for memgpt-rs.
//!
//! Every backend implements the storage seams of [`memgpt_core::store`]
//! ([`AgentStore`](memgpt_core::store::AgentStore), [`RecallStore`](memgpt_core::store::RecallStore),
//! [`ArchivalStore`](memgpt_core::store::ArchivalStore)) and is checked against the in-memory
//! reference, [`InMemoryStore`], which this crate re-exports.
//!
//! The persistent backends (SQLite, PostgreSQL + pgvector, tantivy, usearch) are not part of
//! this release yet; each will come behind its own Cargo feature.

#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

pub use memgpt_core::store::{InMemoryStore, Storage};
