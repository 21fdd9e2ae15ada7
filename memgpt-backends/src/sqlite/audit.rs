//! Checks that the derived indexes agree with the database, for operators and crash tests.

use memgpt_core::ids::AgentId;
use memgpt_core::store::StoreError;

use super::SqliteStore;
use crate::codec::db;

/// What [`SqliteStore::audit_indexes`] found for one agent, after every derived index caught
/// up: the rows in SQLite, and what each index holds (`None` when the store has no such index).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct IndexAudit {
    /// The agent's messages in SQLite.
    pub messages: u64,
    /// The agent's documents in the tantivy recall index.
    pub recall_documents: Option<u64>,
    /// The agent's message embeddings in SQLite.
    pub message_embeddings: u64,
    /// Vectors in the agent's usearch index of message embeddings.
    pub message_vectors: Option<u64>,
    /// The agent's passages with an embedding in SQLite.
    pub embedded_passages: u64,
    /// Vectors in the agent's usearch index of passages.
    pub passage_vectors: Option<u64>,
    /// The agent's passages in SQLite.
    pub passages: u64,
    /// The agent's documents in the tantivy archival index.
    pub passage_documents: Option<u64>,
}

impl IndexAudit {
    /// Each disagreement between an index and the database, in words (empty when they agree).
    pub fn mismatches(&self) -> Vec<String> {
        let pairs = [
            (
                "tantivy recall documents",
                self.recall_documents,
                self.messages,
                "messages",
            ),
            (
                "usearch message vectors",
                self.message_vectors,
                self.message_embeddings,
                "message embeddings",
            ),
            (
                "usearch passage vectors",
                self.passage_vectors,
                self.embedded_passages,
                "embedded passages",
            ),
            (
                "tantivy archival documents",
                self.passage_documents,
                self.passages,
                "passages",
            ),
        ];
        pairs
            .into_iter()
            .filter_map(|(index, held, rows, what)| {
                held.filter(|held| *held != rows)
                    .map(|held| format!("{held} {index} for {rows} {what}"))
            })
            .collect()
    }

    /// Whether every index holds exactly what the database holds.
    pub fn is_consistent(&self) -> bool {
        self.mismatches().is_empty()
    }
}

impl SqliteStore {
    /// Lets every derived index catch up with the database, then counts what the database and
    /// each index hold for `agent`. A consistent store has equal counts ([`IndexAudit::
    /// is_consistent`]); the crash campaign checks this after every kill.
    pub async fn audit_indexes(&self, agent: AgentId) -> Result<IndexAudit, StoreError> {
        let count = |sql: &'static str| {
            let pool = self.pool.clone();
            async move {
                sqlx::query_scalar::<_, i64>(sql)
                    .bind(agent.as_uuid())
                    .fetch_one(&pool)
                    .await
                    .map(|n| n as u64)
                    .map_err(|e| db("counting rows for an index audit", e))
            }
        };
        #[allow(unused_mut)]
        let mut audit = IndexAudit {
            messages: count("SELECT count(*) FROM messages WHERE agent_id = ?").await?,
            message_embeddings: count("SELECT count(*) FROM message_embeddings WHERE agent_id = ?")
                .await?,
            embedded_passages: count(
                "SELECT count(*) FROM passages WHERE agent_id = ? AND embedding IS NOT NULL",
            )
            .await?,
            passages: count("SELECT count(*) FROM passages WHERE agent_id = ?").await?,
            ..IndexAudit::default()
        };
        #[cfg(feature = "tantivy")]
        if let Some(tantivy) = &self.tantivy {
            tantivy.index.catch_up(&self.pool).await?;
            audit.recall_documents = Some(tantivy.index.count_documents(agent)?);
        }
        #[cfg(feature = "tantivy")]
        if let Some(archival) = &self.tantivy_archival {
            archival.index.catch_up(&self.pool).await?;
            audit.passage_documents = Some(archival.index.count_documents(agent)?);
        }
        #[cfg(feature = "usearch")]
        if let Some(space) = self.space().await? {
            if let Some(indexes) = &self.recall_vectors {
                audit.message_vectors =
                    Some(indexes.count(&self.pool, agent, space.dimension).await? as u64);
            }
            if let Some(indexes) = &self.usearch {
                audit.passage_vectors =
                    Some(indexes.count(&self.pool, agent, space.dimension).await? as u64);
            }
        }
        Ok(audit)
    }
}
