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
//! | [`UsearchArchival`] | `usearch` | HNSW archival indexes next to the SQLite file |
//! | [`PgStore`] | `postgres` | PostgreSQL + pgvector (HNSW) for several processes sharing one database |
//!
//! [`StoreConfig`] picks and composes them from a URL (`sqlite://path`, `postgres://...`,
//! `memory://`).
//!
//! # Feature flags
//!
//! * `sqlite` (default): [`SqliteStore`].
//! * `tantivy`: [`TantivyRecall`] (implies `sqlite`).
//! * `usearch`: [`UsearchArchival`] (implies `sqlite`).
//! * `postgres`: [`PgStore`] ([`PgOptions`]).

#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "_sql")]
mod codec;
mod config;
pub mod vector;

#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "sqlite")]
pub mod sqlite;
#[cfg(feature = "tantivy")]
mod tantivy_recall;
#[cfg(feature = "usearch")]
mod usearch_archival;

use std::collections::HashMap;

pub use config::{ConfigError, StoreConfig};
pub use memgpt_core::store::{InMemoryStore, Storage};
#[cfg(feature = "postgres")]
pub use postgres::{PgOptions, PgStore};
#[cfg(feature = "sqlite")]
pub use sqlite::{RecallIndex, SqliteOptions, SqliteStore, VectorIndex};
#[cfg(feature = "tantivy")]
pub use tantivy_recall::TantivyRecall;
#[cfg(feature = "usearch")]
pub use usearch_archival::{Quantization, UsearchArchival, UsearchOptions};

/// The constant of reciprocal-rank fusion (Cormack et al. 2009), as in the reference store.
pub const RRF_K: f32 = 60.0;

/// Fuses rankings of `(score, key)` lists, each best first: a key scores the sum of
/// `1 / (k + rank)` over the lists it appears in. Best first; ties prefer the larger key (the
/// newer row).
pub fn rank_fusion(lists: &[Vec<(f32, i64)>], k: f32) -> Vec<(f32, i64)> {
    let mut fused: HashMap<i64, f32> = HashMap::new();
    for list in lists {
        for (rank, &(_, key)) in list.iter().enumerate() {
            *fused.entry(key).or_default() += 1.0 / (k + rank as f32 + 1.0);
        }
    }
    let mut ranked: Vec<(f32, i64)> = fused.into_iter().map(|(key, score)| (score, key)).collect();
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)));
    ranked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fusion_rewards_agreement() {
        let fused = rank_fusion(
            &[vec![(0.9, 1), (0.8, 2), (0.1, 3)], vec![(5.0, 2), (1.0, 4)]],
            RRF_K,
        );
        assert_eq!(fused[0].1, 2, "ranked well in both lists");
        assert_eq!(fused.len(), 4);
    }
}
