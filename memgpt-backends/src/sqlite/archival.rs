//! Archival storage: passages with embeddings; vector (exact or usearch), FTS5 and hybrid search.

use std::collections::HashMap;

use async_trait::async_trait;
use memgpt_core::embed::Embedding;
use memgpt_core::ids::{AgentId, PassageId};
use memgpt_core::store::{
    ArchivalQuery, ArchivalStore, Hit, Page, Passage, SearchMode, SearchPage, StoreError,
};
use sqlx::sqlite::SqliteRow;
use sqlx::{QueryBuilder, Row, Sqlite};

use super::SqliteStore;
use super::agents::{agent_token, check_space};
use crate::codec::{blob_to_vector, blob_to_vector_into, corrupt, db, from_micros, fts5_query};
use crate::vector::{TopK, cosine_to_unit, normalized};
use crate::{RRF_K, rank_fusion};

const PASSAGE_COLUMNS: &str =
    "p.seq, p.id, p.agent_id, p.text, p.embedding, p.metadata, p.created_at";

/// Rows read per batch by the exact scan.
const SCAN_BATCH: i64 = 4_096;

fn passage_from_row(
    row: &SqliteRow,
    space: Option<&(String, usize)>,
) -> Result<Passage, StoreError> {
    let get_err = |e: sqlx::Error| db("reading a passage", e);
    let embedding: Option<Vec<u8>> = row.try_get("embedding").map_err(get_err)?;
    let metadata: String = row.try_get("metadata").map_err(get_err)?;
    let embedding = match embedding {
        None => None,
        Some(blob) => {
            let (model, _) =
                space.ok_or_else(|| corrupt("an embedding in a store with no embedding model"))?;
            Some(Embedding {
                model: model.clone(),
                vector: blob_to_vector(&blob)?,
            })
        }
    };
    Ok(Passage {
        id: PassageId::from_uuid(row.try_get("id").map_err(get_err)?),
        agent_id: AgentId::from_uuid(row.try_get("agent_id").map_err(get_err)?),
        text: row.try_get("text").map_err(get_err)?,
        embedding,
        metadata: serde_json::from_str(&metadata)
            .map_err(|e| corrupt(format!("passage metadata: {e}")))?,
        created_at: from_micros(row.try_get("created_at").map_err(get_err)?)?,
    })
}

impl SqliteStore {
    /// Passages by sequence number, in the order given (missing ones skipped).
    pub(crate) async fn passages_by_seq(
        &self,
        seqs: &[i64],
    ) -> Result<Vec<(i64, Passage)>, StoreError> {
        let space = self.space().await?;
        let mut found: HashMap<i64, Passage> = HashMap::with_capacity(seqs.len());
        for chunk in seqs.chunks(500) {
            let mut sql = QueryBuilder::<Sqlite>::new(format!(
                "SELECT {PASSAGE_COLUMNS} FROM passages p WHERE p.seq IN ("
            ));
            let mut list = sql.separated(", ");
            for seq in chunk {
                list.push_bind(*seq);
            }
            sql.push(")");
            for row in sql
                .build()
                .fetch_all(&self.pool)
                .await
                .map_err(|e| db("reading passages", e))?
            {
                let seq: i64 = row.try_get("seq").map_err(|e| db("reading passages", e))?;
                found.insert(seq, passage_from_row(&row, space.as_ref())?);
            }
        }
        Ok(seqs
            .iter()
            .filter_map(|seq| Some((*seq, found.remove(seq)?)))
            .collect())
    }

    /// Every embedded passage of `agent` by cosine similarity to `query` (exact scan), best
    /// first; at most `limit` of them, and how many there are.
    pub(crate) async fn exact_vector_ranking(
        &self,
        agent: AgentId,
        query: &[f32],
        limit: usize,
    ) -> Result<(Vec<(f32, i64)>, usize), StoreError> {
        let query = normalized(query);
        let mut top = TopK::new(limit);
        let mut after = 0i64;
        let mut vector = Vec::with_capacity(query.len());
        loop {
            let rows = sqlx::query(
                "SELECT seq, embedding FROM passages WHERE agent_id = ? AND seq > ? AND embedding IS NOT NULL \
                 ORDER BY seq LIMIT ?",
            )
            .bind(agent.as_uuid())
            .bind(after)
            .bind(SCAN_BATCH)
            .fetch_all(&self.pool)
            .await
            .map_err(|e| db("scanning embeddings", e))?;
            let Some(last) = rows.last() else { break };
            after = last
                .try_get("seq")
                .map_err(|e| db("scanning embeddings", e))?;
            for row in &rows {
                let seq: i64 = row
                    .try_get("seq")
                    .map_err(|e| db("scanning embeddings", e))?;
                let blob: &[u8] = row
                    .try_get("embedding")
                    .map_err(|e| db("scanning embeddings", e))?;
                blob_to_vector_into(blob, &mut vector)?;
                top.push(cosine_to_unit(&query, &vector), seq);
            }
        }
        let seen = top.seen();
        Ok((top.into_sorted(), seen))
    }

    /// Passages of `agent` matching `text` by BM25, best first; at most `limit`.
    async fn text_ranking(
        &self,
        agent: AgentId,
        text: &str,
        limit: usize,
    ) -> Result<Vec<(f32, i64)>, StoreError> {
        let Some(expr) = fts5_query(&agent_token(agent), text) else {
            return Ok(Vec::new());
        };
        let rows = sqlx::query(
            "SELECT rowid AS seq, -bm25(passages_fts, 0.0, 1.0) AS score FROM passages_fts WHERE passages_fts MATCH ? \
             ORDER BY score DESC, rowid DESC LIMIT ?",
        )
        .bind(expr)
        .bind(limit.min(i64::MAX as usize) as i64)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| db("searching archival storage", e))?;
        rows.iter()
            .map(|row| {
                let seq: i64 = row
                    .try_get("seq")
                    .map_err(|e| db("searching archival storage", e))?;
                let score: f64 = row
                    .try_get("score")
                    .map_err(|e| db("searching archival storage", e))?;
                Ok((score as f32, seq))
            })
            .collect()
    }

    /// The vector ranking from the usearch index if there is one, else from an exact scan;
    /// `limit` bounds the length, and the second value is how many embedded passages exist.
    async fn vector_ranking(
        &self,
        agent: AgentId,
        query: &[f32],
        limit: usize,
    ) -> Result<(Vec<(f32, i64)>, usize), StoreError> {
        #[cfg(feature = "usearch")]
        if let Some(usearch) = &self.usearch {
            let Some((_, dimension)) = self.space().await? else {
                return Ok((Vec::new(), 0));
            };
            let total = usearch.count(&self.pool, agent, dimension).await?;
            let ranked = usearch
                .search(&self.pool, agent, dimension, query, limit.min(total))
                .await?;
            return Ok((ranked, total));
        }
        self.exact_vector_ranking(agent, query, limit).await
    }

    async fn page_of(
        &self,
        ranked: Vec<(f32, i64)>,
        page: Page,
        total: usize,
    ) -> Result<SearchPage<Passage>, StoreError> {
        let ranked = page.slice(ranked);
        let scores: HashMap<i64, f32> = ranked.iter().map(|(score, seq)| (*seq, *score)).collect();
        let seqs: Vec<i64> = ranked.iter().map(|(_, seq)| *seq).collect();
        let hits = self
            .passages_by_seq(&seqs)
            .await?
            .into_iter()
            .map(|(seq, item)| Hit {
                score: scores.get(&seq).copied().unwrap_or_default(),
                item,
            })
            .collect();
        Ok(SearchPage { hits, page, total })
    }
}

#[async_trait]
impl ArchivalStore for SqliteStore {
    async fn search(
        &self,
        agent: AgentId,
        query: &ArchivalQuery,
    ) -> Result<SearchPage<Passage>, StoreError> {
        if let (Some(embedding), Some((model, dimension))) = (&query.embedding, self.space().await?)
        {
            check_space(&model, dimension, embedding)?;
        }
        let depth = query.page.offset() + query.page.size;
        match (query.mode, &query.embedding) {
            (SearchMode::Vector, None) => Err(StoreError::InvalidQuery(
                "vector search needs a query embedding".into(),
            )),
            (SearchMode::Vector, Some(embedding)) => {
                let (ranked, total) = self.vector_ranking(agent, &embedding.vector, depth).await?;
                self.page_of(ranked, query.page, total).await
            }
            (SearchMode::Text, _) | (SearchMode::Hybrid, None) => {
                let ranked = self.text_ranking(agent, &query.text, usize::MAX).await?;
                let total = ranked.len();
                self.page_of(ranked, query.page, total).await
            }
            (SearchMode::Hybrid, Some(embedding)) => {
                // With exact vectors both lists are complete, so the fusion equals the reference
                // store's; with an ANN index each list is cut at a generous depth.
                let exact = !self.has_vector_index();
                let depth = if exact {
                    usize::MAX
                } else {
                    (4 * depth).max(100)
                };
                let (by_vector, embedded) =
                    self.vector_ranking(agent, &embedding.vector, depth).await?;
                let by_text = self.text_ranking(agent, &query.text, depth).await?;
                let unembedded_matches = self.count_unembedded(&by_text).await?;
                let fused = rank_fusion(&[by_vector, by_text], RRF_K);
                self.page_of(fused, query.page, embedded + unembedded_matches)
                    .await
            }
        }
    }

    async fn get_passages(
        &self,
        agent: AgentId,
        ids: &[PassageId],
    ) -> Result<Vec<Passage>, StoreError> {
        let space = self.space().await?;
        let mut found: HashMap<PassageId, Passage> = HashMap::with_capacity(ids.len());
        for chunk in ids.chunks(500) {
            let mut sql = QueryBuilder::<Sqlite>::new(format!(
                "SELECT {PASSAGE_COLUMNS} FROM passages p WHERE +p.agent_id = "
            ));
            sql.push_bind(*agent.as_uuid()).push(" AND p.id IN (");
            // `+agent_id`: look rows up by their unique id, not by walking the agent's index.
            let mut list = sql.separated(", ");
            for id in chunk {
                list.push_bind(*id.as_uuid());
            }
            sql.push(")");
            for row in sql
                .build()
                .fetch_all(&self.pool)
                .await
                .map_err(|e| db("reading passages", e))?
            {
                let passage = passage_from_row(&row, space.as_ref())?;
                found.insert(passage.id, passage);
            }
        }
        Ok(ids.iter().filter_map(|id| found.remove(id)).collect())
    }

    async fn list_passages(
        &self,
        agent: AgentId,
        page: Page,
    ) -> Result<SearchPage<Passage>, StoreError> {
        let space = self.space().await?;
        let total = self.count_passages(agent).await? as usize;
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {PASSAGE_COLUMNS} FROM passages p WHERE p.agent_id = ? ORDER BY p.seq LIMIT ? OFFSET ?"
        )))
        .bind(agent.as_uuid())
        .bind(page.size as i64)
        .bind(page.offset() as i64)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| db("listing passages", e))?;
        let hits = rows
            .iter()
            .map(|row| {
                Ok(Hit {
                    item: passage_from_row(row, space.as_ref())?,
                    score: 0.0,
                })
            })
            .collect::<Result<_, StoreError>>()?;
        Ok(SearchPage { hits, page, total })
    }

    async fn count_passages(&self, agent: AgentId) -> Result<u64, StoreError> {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM passages WHERE agent_id = ?")
            .bind(agent.as_uuid())
            .fetch_one(&self.pool)
            .await
            .map_err(|e| db("counting passages", e))?;
        Ok(n as u64)
    }
}

impl SqliteStore {
    fn has_vector_index(&self) -> bool {
        #[cfg(feature = "usearch")]
        {
            self.usearch.is_some()
        }
        #[cfg(not(feature = "usearch"))]
        {
            false
        }
    }

    /// How many of these text hits have no embedding (they are absent from the vector list).
    async fn count_unembedded(&self, hits: &[(f32, i64)]) -> Result<usize, StoreError> {
        let mut n = 0usize;
        for chunk in hits.chunks(500) {
            let mut sql = QueryBuilder::<Sqlite>::new(
                "SELECT count(*) FROM passages WHERE embedding IS NULL AND seq IN (",
            );
            let mut list = sql.separated(", ");
            for (_, seq) in chunk {
                list.push_bind(*seq);
            }
            sql.push(")");
            let count: i64 = sql
                .build_query_scalar()
                .fetch_one(&self.pool)
                .await
                .map_err(|e| db("counting passages", e))?;
            n += count as usize;
        }
        Ok(n)
    }
}
