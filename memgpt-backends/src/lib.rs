//! Storage backends for memgpt-rs.
//!
//! Every backend implements the storage seams of [`memgpt_core::store`]
//! ([`AgentStore`](memgpt_core::store::AgentStore), [`RecallStore`](memgpt_core::store::RecallStore),
//! [`ArchivalStore`](memgpt_core::store::ArchivalStore)) and passes the same conformance suite
//! as the in-memory reference, [`InMemoryStore`].
//!
//! | backend | feature | what |
//! |---|---|---|
//! | [`SqliteStore`] | `sqlite` (default) | one data directory; FTS5 recall, exact vector search |
//! | [`TantivyRecall`] | `tantivy` | a BM25 recall index next to the SQLite file |
//! | [`UsearchIndexes`] | `usearch` | HNSW indexes of passage and message embeddings next to the SQLite file |
//! | [`PgStore`] | `postgres` | PostgreSQL + pgvector (HNSW) for several processes sharing one database |
//!
//! [`StoreConfig`] picks and composes them from a URL (`sqlite://path`, `postgres://...`,
//! `memory://`).
//!
//! # Feature flags
//!
//! * `sqlite` (default): [`SqliteStore`].
//! * `tantivy`: [`TantivyRecall`] (implies `sqlite`).
//! * `usearch`: [`UsearchIndexes`] (implies `sqlite`).
//! * `postgres`: [`PgStore`] ([`PgOptions`]).
//! * `conformance`: [`conformance`], the suite every store here passes, for stores written
//!   elsewhere.
//!
//! Every store ranks recall search the same way: it only picks candidates, and
//! [`memgpt_core::retrieval`] scores them (BM25 over stemmed message documents, embedding
//! similarity, the query's speaker and date cues, weighted reciprocal-rank fusion).

#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "_sql")]
mod codec;
mod config;
#[cfg(feature = "_sql")]
mod sql;
mod url;
pub mod vector;

#[cfg(feature = "conformance")]
pub mod conformance;

#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "sqlite")]
pub mod sqlite;

pub use config::StoreConfig;
pub use memgpt_core::store::{InMemoryStore, Storage};
#[cfg(feature = "postgres")]
pub use postgres::{PgOptions, PgStore};
#[cfg(feature = "tantivy")]
pub use sqlite::TantivyRecall;
#[cfg(feature = "sqlite")]
pub use sqlite::{IndexAudit, RecallIndex, SqliteOptions, SqliteStore, VectorIndex};
#[cfg(feature = "usearch")]
pub use sqlite::{Quantization, UsearchIndexes, UsearchOptions};
pub use url::StoreUrlError;
