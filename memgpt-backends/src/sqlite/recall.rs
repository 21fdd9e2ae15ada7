//! Recall storage: messages listed by time, and the candidate primitives hybrid search ranks
//! (FTS5 or tantivy for text, an exact scan or usearch for vectors).

use std::collections::HashMap;

use async_trait::async_trait;
use memgpt_core::embed::Embedding;
use memgpt_core::ids::{AgentId, MessageId};
use memgpt_core::message::Message;
use memgpt_core::retrieval::{CandidateKey, RecallCandidate, TextCandidates};
use memgpt_core::store::{RecallQuery, RecallStore, SearchPage, StoreError};
use sqlx::{QueryBuilder, Row, Sqlite};

use super::SqliteStore;
use super::agents::agent_token;
use super::dialect::{MESSAGE_COLUMNS, message_from_row, push_filters};
use crate::codec::{blob_to_vector, blob_to_vector_into, db, from_micros, fts5_terms_query};
use crate::sql::{self, push_candidate_window, sql_int};
use crate::vector::{TopK, cosine_to_unit, normalized};

/// Rows read per batch by the exact vector scan.
const SCAN_BATCH: i64 = 4_096;

impl SqliteStore {
    /// Up to `limit` of the agent's messages matching any of `terms`, best first by FTS5's BM25.
    async fn fts_candidates(
        &self,
        agent: AgentId,
        terms: &[String],
        query: &RecallQuery,
        limit: usize,
    ) -> Result<Vec<CandidateKey>, StoreError> {
        let Some(expr) = fts5_terms_query(&agent_token(agent), terms) else {
            return Ok(Vec::new());
        };
        let mut sql = QueryBuilder::<Sqlite>::new(
            "SELECT m.seq FROM message_terms CROSS JOIN messages m ON m.seq = message_terms.rowid \
             WHERE message_terms MATCH ",
        );
        sql.push_bind(expr)
            .push(" AND m.agent_id = ")
            .push_bind(*agent.as_uuid());
        push_filters(&mut sql, query);
        sql.push(" ORDER BY bm25(message_terms, 0.0, 1.0), m.seq DESC LIMIT ")
            .push_bind(sql_int(limit));
        sql.build_query_scalar()
            .fetch_all(&self.pool)
            .await
            .map_err(|e| db("searching recall storage", e))
    }

    /// Every embedded message of the agent passing the filters by cosine similarity (exact scan),
    /// best first; at most `limit`.
    async fn exact_message_ranking(
        &self,
        agent: AgentId,
        query_vector: &[f32],
        query: &RecallQuery,
        limit: usize,
    ) -> Result<Vec<CandidateKey>, StoreError> {
        let query_vector = normalized(query_vector);
        let mut top = TopK::new(limit);
        let mut pending: Option<(i64, f32)> = None;
        let mut after = 0i64;
        let mut vector = Vec::with_capacity(query_vector.len());
        let get = |e| db("scanning message embeddings", e);
        loop {
            // Keyset over the embeddings alone (filters are applied per row, so a batch the
            // filters empty does not end the scan).
            let rows = sqlx::query(
                "SELECT e.seq AS eseq, e.message_seq, e.embedding, m.kind, m.created_at \
                 FROM message_embeddings e JOIN messages m ON m.seq = e.message_seq \
                 WHERE e.agent_id = ? AND e.seq > ? ORDER BY e.seq LIMIT ?",
            )
            .bind(agent.as_uuid())
            .bind(after)
            .bind(SCAN_BATCH)
            .fetch_all(&self.pool)
            .await
            .map_err(get)?;
            let Some(last) = rows.last() else { break };
            after = last.try_get("eseq").map_err(get)?;
            for row in &rows {
                let kind: String = row.try_get("kind").map_err(get)?;
                let at = from_micros(row.try_get("created_at").map_err(get)?)?;
                let admitted = (query.kinds.is_empty()
                    || query.kinds.iter().any(|k| k.as_str() == kind))
                    && query.range.contains(at);
                if !admitted {
                    continue;
                }
                let seq: i64 = row.try_get("message_seq").map_err(get)?;
                let blob: &[u8] = row.try_get("embedding").map_err(get)?;
                blob_to_vector_into(blob, &mut vector)?;
                let score = cosine_to_unit(&query_vector, &vector);
                // A message's windows are stored together, so its rows are adjacent: it
                // enters the ranking once, with its best window.
                match &mut pending {
                    Some((current, best)) if *current == seq => *best = best.max(score),
                    _ => {
                        if let Some((done, best)) = pending.replace((seq, score)) {
                            top.push(best, done);
                        }
                    }
                }
            }
        }
        if let Some((done, best)) = pending {
            top.push(best, done);
        }
        Ok(top.into_sorted().into_iter().map(|(_, seq)| seq).collect())
    }
}

#[async_trait]
impl RecallStore for SqliteStore {
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
        #[cfg(feature = "tantivy")]
        if let Some(tantivy) = &self.tantivy {
            tantivy.index.catch_up(&self.pool).await?;
            let totals = {
                let mut conn = self
                    .pool
                    .acquire()
                    .await
                    .map_err(|e| db("reading term statistics", e))?;
                super::documents::message_totals(&mut conn).await?
            };
            return tantivy.candidates(agent, terms, query, limit, totals);
        }
        let statistics = super::documents::fts_statistics(&self.pool, terms).await?;
        let keys = self.fts_candidates(agent, terms, query, limit).await?;
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
            // Nothing was ever embedded.
            return Ok(Vec::new());
        };
        space.check(embedding)?;
        #[cfg(feature = "usearch")]
        if let Some(usearch) = &self.recall_vectors {
            return usearch
                .search_filtered(
                    &self.pool,
                    agent,
                    space.dimension,
                    &embedding.vector,
                    query,
                    limit,
                )
                .await;
        }
        self.exact_message_ranking(agent, &embedding.vector, query, limit)
            .await
    }

    async fn candidates(
        &self,
        agent: AgentId,
        keys: &[CandidateKey],
    ) -> Result<Vec<RecallCandidate>, StoreError> {
        let mut out = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(500) {
            let mut sql = QueryBuilder::<Sqlite>::new(format!(
                "SELECT {MESSAGE_COLUMNS}, m.document, e.embedding FROM messages m \
                 LEFT JOIN message_embeddings e ON e.message_seq = m.seq WHERE +m.agent_id = "
            ));
            // One row per window (ordered), folded into one candidate per message below.
            // `+agent_id`: look rows up by their keys, not by walking the agent's index.
            sql.push_bind(*agent.as_uuid()).push(" AND m.seq IN (");
            let mut list = sql.separated(", ");
            for key in chunk {
                list.push_bind(*key);
            }
            sql.push(") ORDER BY m.seq, e.window_index");
            let rows = sql
                .build()
                .fetch_all(&self.pool)
                .await
                .map_err(|e| db("reading search candidates", e))?;
            for row in &rows {
                let get = |e| db("reading search candidates", e);
                let key: i64 = row.try_get("seq").map_err(get)?;
                let blob: Option<&[u8]> = row.try_get("embedding").map_err(get)?;
                let vector = blob.map(blob_to_vector).transpose()?;
                push_candidate_window(&mut out, key, vector, || {
                    Ok(RecallCandidate {
                        key,
                        message: message_from_row(row)?,
                        document: row.try_get("document").map_err(get)?,
                        embeddings: Vec::new(),
                    })
                })?;
            }
        }
        Ok(out)
    }

    async fn get_messages(
        &self,
        agent: AgentId,
        ids: &[MessageId],
    ) -> Result<Vec<Message>, StoreError> {
        let mut found: HashMap<MessageId, Message> = HashMap::with_capacity(ids.len());
        for chunk in ids.chunks(500) {
            let mut sql = QueryBuilder::<Sqlite>::new(format!(
                "SELECT {MESSAGE_COLUMNS} FROM messages m WHERE +m.agent_id = "
            ));
            sql.push_bind(*agent.as_uuid()).push(" AND m.id IN (");
            // `+agent_id`: look rows up by their unique id, not by walking the agent's index.
            let mut list = sql.separated(", ");
            for id in chunk {
                list.push_bind(*id.as_uuid());
            }
            sql.push(")");
            let rows = sql
                .build()
                .fetch_all(&self.pool)
                .await
                .map_err(|e| db("reading messages", e))?;
            for row in &rows {
                let message = message_from_row(row)?;
                found.insert(message.id, message);
            }
        }
        // In the order asked, as the reference store answers (an id asked twice comes twice).
        Ok(ids.iter().filter_map(|id| found.get(id).cloned()).collect())
    }

    async fn count_messages(&self, agent: AgentId) -> Result<u64, StoreError> {
        let count: i64 = sqlx::query_scalar("SELECT count(*) FROM messages WHERE agent_id = ?")
            .bind(agent.as_uuid())
            .fetch_one(&self.pool)
            .await
            .map_err(|e| db("counting messages", e))?;
        Ok(count as u64)
    }

    async fn unembedded_messages(
        &self,
        agent: AgentId,
        limit: usize,
    ) -> Result<Vec<Message>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.agent_id = ? AND m.turn IS NOT NULL \
             AND m.embedded = 0 ORDER BY m.seq LIMIT ?"
        )))
        .bind(agent.as_uuid())
        .bind(sql_int(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(|e| db("listing unembedded messages", e))?;
        rows.iter().map(message_from_row).collect()
    }
}
