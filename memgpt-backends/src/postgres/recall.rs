//! Recall storage: messages listed by time, and the candidate primitives hybrid search ranks
//! (PostgreSQL full-text search over the message documents, pgvector HNSW over the message
//! embeddings).

use std::collections::HashMap;

use async_trait::async_trait;
use memgpt_core::embed::Embedding;
use memgpt_core::ids::{AgentId, MessageId};
use memgpt_core::message::Message;
use memgpt_core::retrieval::{CandidateKey, RecallCandidate, TextCandidates};
use memgpt_core::store::{RecallQuery, RecallStore, SearchPage, StoreError};
use sqlx::{Postgres, QueryBuilder, Row};

use super::PgStore;
use super::dialect::{MESSAGE_COLUMNS, message_from_row, push_filters};
use super::documents::{Collection, statistics, terms_tsquery};
use crate::codec::db;
use crate::sql::{self, push_candidate_window, sql_int};

#[async_trait]
impl RecallStore for PgStore {
    async fn list_messages(
        &self,
        agent: AgentId,
        query: &RecallQuery,
    ) -> Result<SearchPage<Message>, StoreError> {
        sql::list_messages(self, agent, query).await
    }

    async fn text_candidates(
        &self,
        agent: AgentId,
        terms: &[String],
        query: &RecallQuery,
        limit: usize,
    ) -> Result<TextCandidates, StoreError> {
        let statistics = statistics(&self.pool, Collection::Messages, terms).await?;
        let Some(tsquery) = terms_tsquery(terms) else {
            return Ok(TextCandidates {
                keys: Vec::new(),
                statistics,
            });
        };
        let mut sql =
            QueryBuilder::<Postgres>::new("SELECT m.seq FROM messages m WHERE m.agent_id = ");
        sql.push_bind(*agent.as_uuid())
            .push(" AND m.search @@ ")
            .push_bind(tsquery.clone())
            .push("::tsquery");
        push_filters(&mut sql, query);
        sql.push(" ORDER BY ts_rank_cd(m.search, ")
            .push_bind(tsquery)
            .push("::tsquery) DESC, m.seq DESC LIMIT ")
            .push_bind(sql_int(limit));
        let keys = sql
            .build_query_scalar()
            .fetch_all(&self.pool)
            .await
            .map_err(|e| db("searching recall storage", e))?;
        Ok(TextCandidates { keys, statistics })
    }

    async fn vector_candidates(
        &self,
        agent: AgentId,
        embedding: &Embedding,
        query: &RecallQuery,
        limit: usize,
    ) -> Result<Vec<CandidateKey>, StoreError> {
        let Some(space) = self.space().await? else {
            return Ok(Vec::new());
        };
        space.check(embedding)?;
        if limit == 0 || embedding.vector.iter().all(|x| *x == 0.0) {
            // A zero vector is equally (un)similar to everything; similarity cannot rank.
            return Ok(Vec::new());
        }
        let d = space.dimension;
        // Nearest windows first, folded into messages at their best window, until `limit`
        // distinct messages are found (a message has one or a few windows).
        let mut fetch = limit.saturating_mul(2).max(limit + 16);
        loop {
            let mut tx = crate::sql::begin(&self.pool, None, "starting a vector search").await?;
            super::archival::set_search_depth(&mut tx, fetch, self.ef_search).await?;
            let mut sql = QueryBuilder::<Postgres>::new(
                "SELECT e.message_seq FROM message_embeddings e JOIN messages m ON m.seq = e.message_seq \
                 WHERE e.agent_id = ",
            );
            sql.push_bind(*agent.as_uuid());
            push_filters(&mut sql, query);
            sql.push(format!(" ORDER BY e.embedding::vector({d}) <=> "))
                .push_bind(embedding.vector.clone())
                .push(format!("::real[]::vector({d}) LIMIT "))
                .push_bind(sql_int(fetch));
            let rows: Vec<i64> = sql
                .build_query_scalar()
                .fetch_all(&mut *tx)
                .await
                .map_err(|e| db("searching message embeddings", e))?;
            tx.commit()
                .await
                .map_err(|e| db("finishing a vector search", e))?;
            let mut seen = std::collections::HashSet::new();
            let keys: Vec<CandidateKey> = rows
                .iter()
                .copied()
                .filter(|seq| seen.insert(*seq))
                .take(limit)
                .collect();
            if keys.len() >= limit || rows.len() < fetch {
                return Ok(keys);
            }
            fetch = fetch.saturating_mul(4);
        }
    }

    async fn candidates(
        &self,
        agent: AgentId,
        keys: &[CandidateKey],
    ) -> Result<Vec<RecallCandidate>, StoreError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT m.seq, {MESSAGE_COLUMNS}, m.search_text, e.embedding::real[] AS embedding FROM messages m \
             LEFT JOIN message_embeddings e ON e.message_seq = m.seq WHERE m.agent_id = $1 AND m.seq = ANY($2) \
             ORDER BY m.seq, e.window_index"
        )))
        .bind(agent.as_uuid())
        .bind(keys)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| db("reading search candidates", e))?;
        // One row per window, folded into one candidate per message.
        let mut out: Vec<RecallCandidate> = Vec::with_capacity(keys.len());
        for row in &rows {
            let get = |e| db("reading search candidates", e);
            let key: i64 = row.try_get("seq").map_err(get)?;
            let vector: Option<Vec<f32>> = row.try_get("embedding").map_err(get)?;
            push_candidate_window(&mut out, key, vector, || {
                Ok(RecallCandidate {
                    key,
                    message: message_from_row(row)?,
                    document: row.try_get("search_text").map_err(get)?,
                    embeddings: Vec::new(),
                })
            })?;
        }
        Ok(out)
    }

    async fn unembedded_messages(
        &self,
        agent: AgentId,
        limit: usize,
    ) -> Result<Vec<Message>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.agent_id = $1 AND m.turn IS NOT NULL \
             AND NOT m.embedded ORDER BY m.seq LIMIT $2"
        )))
        .bind(agent.as_uuid())
        .bind(sql_int(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(|e| db("listing unembedded messages", e))?;
        rows.iter().map(message_from_row).collect()
    }

    async fn get_messages(
        &self,
        agent: AgentId,
        ids: &[MessageId],
    ) -> Result<Vec<Message>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let uuids: Vec<uuid::Uuid> = ids.iter().map(|id| *id.as_uuid()).collect();
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.agent_id = $1 AND m.id = ANY($2)"
        )))
        .bind(agent.as_uuid())
        .bind(uuids)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| db("reading messages", e))?;
        let mut found: HashMap<MessageId, Message> = HashMap::with_capacity(rows.len());
        for row in &rows {
            let message = message_from_row(row)?;
            found.insert(message.id, message);
        }
        // In the order asked, as the reference store answers (an id asked twice comes twice).
        Ok(ids.iter().filter_map(|id| found.get(id).cloned()).collect())
    }

    async fn count_messages(&self, agent: AgentId) -> Result<u64, StoreError> {
        let count: i64 = sqlx::query_scalar("SELECT count(*) FROM messages WHERE agent_id = $1")
            .bind(agent.as_uuid())
            .fetch_one(&self.pool)
            .await
            .map_err(|e| db("counting messages", e))?;
        Ok(count as u64)
    }
}
