//! Archival storage: passages with embeddings; the candidates of archival search by vector (exact
//! or usearch) and by FTS5 (memgpt-core ranks them).

use std::collections::HashMap;

use async_trait::async_trait;
use memgpt_core::embed::Embedding;
use memgpt_core::ids::{AgentId, PassageId};
use memgpt_core::retrieval::{CandidateKey, NearestPassages, PassageMatches};
use memgpt_core::store::{
    ArchivalQuery, ArchivalStore, Page, Passage, PassageCandidate, SearchPage, StoreError,
};
use sqlx::{QueryBuilder, Row, Sqlite};

use super::SqliteStore;
use super::agents::agent_token;
use super::dialect::{PASSAGE_COLUMNS, passage_from_row};
use super::documents::passage_statistics;
#[cfg(feature = "tantivy")]
use super::documents::passage_totals;
use crate::codec::{blob_to_vector_into, db, fts5_terms_query, micros};
use crate::sql::{self, sql_int};
use crate::vector::{TopK, cosine_to_unit, normalized};

/// Rows read per batch by the exact scan.
const SCAN_BATCH: i64 = 4_096;

/// Appends the tag, time and validity filters of `query` for the passages aliased `p` (after a
/// `WHERE`).
fn push_passage_filters(sql: &mut QueryBuilder<Sqlite>, agent: AgentId, query: &ArchivalQuery) {
    if let Some(at) = query.validity.instant() {
        sql.push(" AND (p.valid_from IS NULL OR p.valid_from <= ")
            .push_bind(micros(at))
            .push(") AND (p.valid_to IS NULL OR p.valid_to > ")
            .push_bind(micros(at))
            .push(")");
    }
    if let Some(start) = query.range.start {
        sql.push(" AND p.created_at >= ").push_bind(micros(start));
    }
    if let Some(end) = query.range.end {
        sql.push(" AND p.created_at < ").push_bind(micros(end));
    }
    if !query.tags.is_empty() {
        sql.push(" AND p.seq IN (SELECT passage_seq FROM passage_tags WHERE agent_id = ")
            .push_bind(*agent.as_uuid())
            .push(" AND tag IN (");
        let mut tags = sql.separated(", ");
        for tag in &query.tags {
            tags.push_bind(tag.clone());
        }
        sql.push("))");
    }
}

/// Whether a query filters passages at all.
#[cfg(feature = "usearch")]
fn is_filtered(query: &ArchivalQuery) -> bool {
    !query.tags.is_empty() || !query.range.is_unbounded()
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

    /// Every embedded passage of `agent` that `filter` admits by cosine similarity to `query`
    /// (exact scan), best first; at most `limit` of them, and how many there are.
    pub(crate) async fn exact_vector_ranking(
        &self,
        agent: AgentId,
        query: &[f32],
        filter: &ArchivalQuery,
        limit: usize,
    ) -> Result<(Vec<(f32, i64)>, usize), StoreError> {
        let query = normalized(query);
        let mut top = TopK::new(limit);
        let mut after = 0i64;
        let mut vector = Vec::with_capacity(query.len());
        loop {
            let mut sql = QueryBuilder::<Sqlite>::new(
                "SELECT p.seq, p.embedding FROM passages p WHERE p.agent_id = ",
            );
            sql.push_bind(*agent.as_uuid())
                .push(" AND p.seq > ")
                .push_bind(after)
                .push(" AND p.embedding IS NOT NULL");
            push_passage_filters(&mut sql, agent, filter);
            sql.push(" ORDER BY p.seq LIMIT ").push_bind(SCAN_BATCH);
            let rows = sql
                .build()
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

    /// Admitted passages of `agent` holding one of `terms`: up to `limit` of them by FTS5's
    /// BM25 (the candidates' final ranking is memgpt-core's), and how many there are, in all
    /// and without an embedding.
    async fn text_matches(
        &self,
        agent: AgentId,
        terms: &[String],
        filter: &ArchivalQuery,
        limit: usize,
    ) -> Result<(Vec<CandidateKey>, u64, u64), StoreError> {
        let Some(expr) = fts5_terms_query(&agent_token(agent), terms) else {
            return Ok((Vec::new(), 0, 0));
        };
        let get = |e| db("searching archival storage", e);
        let matching = |select: &str| {
            let mut sql = QueryBuilder::<Sqlite>::new(format!(
                "SELECT {select} FROM passage_terms CROSS JOIN passages p \
                 ON p.seq = passage_terms.rowid WHERE passage_terms MATCH "
            ));
            sql.push_bind(expr.clone());
            push_passage_filters(&mut sql, agent, filter);
            sql
        };
        let mut ranked = matching("p.seq");
        ranked
            .push(" ORDER BY bm25(passage_terms, 0.0, 1.0), p.seq DESC LIMIT ")
            .push_bind(sql_int(limit));
        let keys: Vec<CandidateKey> = ranked
            .build_query_scalar()
            .fetch_all(&self.pool)
            .await
            .map_err(get)?;
        let mut counted = matching("count(*), coalesce(sum(p.embedding IS NULL), 0)");
        let (total, unembedded): (i64, i64) = counted
            .build_query_as()
            .fetch_one(&self.pool)
            .await
            .map_err(get)?;
        Ok((keys, total.max(0) as u64, unembedded.max(0) as u64))
    }

    /// The agent's passages with a lifetime that `filter`'s validity instant leaves out (a
    /// lifetime changes after a passage is indexed, so the tantivy index does not hold it): read
    /// through the partial index of passages with a lifetime, usually few.
    #[cfg(feature = "tantivy")]
    async fn invalid_passages(
        &self,
        agent: AgentId,
        filter: &ArchivalQuery,
    ) -> Result<std::collections::HashSet<i64>, StoreError> {
        let Some(at) = filter.validity.instant() else {
            return Ok(Default::default());
        };
        let seqs: Vec<i64> = sqlx::query_scalar(
            "SELECT seq FROM passages WHERE agent_id = ?1 \
             AND (valid_from IS NOT NULL OR valid_to IS NOT NULL) \
             AND NOT ((valid_from IS NULL OR valid_from <= ?2) AND (valid_to IS NULL OR valid_to > ?2))",
        )
        .bind(agent.as_uuid())
        .bind(micros(at))
        .fetch_all(&self.pool)
        .await
        .map_err(|e| db("reading retired passages", e))?;
        Ok(seqs.into_iter().collect())
    }

    /// How many of the agent's passages without an embedding `filter` admits and hold one of
    /// `terms` (read through the partial index of unembedded passages, usually few).
    #[cfg(feature = "tantivy")]
    async fn unembedded_matches(
        &self,
        agent: AgentId,
        terms: &[String],
        filter: &ArchivalQuery,
    ) -> Result<u64, StoreError> {
        let mut sql =
            QueryBuilder::<Sqlite>::new("SELECT p.text FROM passages p WHERE p.agent_id = ");
        sql.push_bind(*agent.as_uuid())
            .push(" AND p.embedding IS NULL");
        push_passage_filters(&mut sql, agent, filter);
        let texts: Vec<String> = sql
            .build_query_scalar()
            .fetch_all(&self.pool)
            .await
            .map_err(|e| db("reading passages without an embedding", e))?;
        let wanted: std::collections::HashSet<&str> = terms.iter().map(String::as_str).collect();
        Ok(texts
            .iter()
            .filter(|text| {
                memgpt_core::retrieval::document_terms(text)
                    .iter()
                    .any(|t| wanted.contains(t.as_str()))
            })
            .count() as u64)
    }

    /// How many embedded passages of `agent` the filter admits.
    #[cfg(feature = "usearch")]
    async fn count_embedded(
        &self,
        agent: AgentId,
        filter: &ArchivalQuery,
    ) -> Result<usize, StoreError> {
        let mut sql =
            QueryBuilder::<Sqlite>::new("SELECT count(*) FROM passages p WHERE p.agent_id = ");
        sql.push_bind(*agent.as_uuid())
            .push(" AND p.embedding IS NOT NULL");
        push_passage_filters(&mut sql, agent, filter);
        let n: i64 = sql
            .build_query_scalar()
            .fetch_one(&self.pool)
            .await
            .map_err(|e| db("counting passages", e))?;
        Ok(n.max(0) as usize)
    }

    /// Whether `filter`'s validity check can leave out any passage of `agent`: only when some
    /// passage of the agent has a lifetime (found through a partial index).
    #[cfg(feature = "usearch")]
    async fn validity_filters(
        &self,
        agent: AgentId,
        filter: &ArchivalQuery,
    ) -> Result<bool, StoreError> {
        let Some(mut sql) = sql::lifetimes_exist::<SqliteStore>(agent, filter) else {
            return Ok(false);
        };
        let found: i64 = sql
            .build_query_scalar()
            .fetch_one(&self.pool)
            .await
            .map_err(|e| db("looking for passages with a lifetime", e))?;
        Ok(found != 0)
    }

    /// The vector ranking from the usearch index if there is one, else from an exact scan;
    /// `limit` bounds the length, and the second value is how many embedded passages the filter
    /// admits.
    async fn vector_ranking(
        &self,
        agent: AgentId,
        query: &[f32],
        filter: &ArchivalQuery,
        limit: usize,
    ) -> Result<(Vec<(f32, i64)>, usize), StoreError> {
        #[cfg(feature = "usearch")]
        if let Some(usearch) = &self.usearch {
            let Some(space) = self.space().await? else {
                return Ok((Vec::new(), 0));
            };
            if is_filtered(filter) || self.validity_filters(agent, filter).await? {
                let total = self.count_embedded(agent, filter).await?;
                let mut sql =
                    QueryBuilder::<Sqlite>::new("SELECT p.seq FROM passages p WHERE p.agent_id = ");
                sql.push_bind(*agent.as_uuid())
                    .push(" AND p.embedding IS NOT NULL");
                push_passage_filters(&mut sql, agent, filter);
                let admitted: std::collections::HashSet<u64> = sql
                    .build_query_scalar::<i64>()
                    .fetch_all(&self.pool)
                    .await
                    .map_err(|e| db("reading the admitted passages", e))?
                    .into_iter()
                    .map(|seq| seq as u64)
                    .collect();
                let ranked = usearch
                    .search_admitted(&self.pool, agent, space.dimension, query, &admitted, limit)
                    .await?;
                return Ok((ranked, total));
            }
            let total = usearch.count(&self.pool, agent, space.dimension).await?;
            let ranked = usearch
                .search(&self.pool, agent, space.dimension, query, limit.min(total))
                .await?;
            return Ok((ranked, total));
        }
        self.exact_vector_ranking(agent, query, filter, limit).await
    }
}

#[async_trait]
impl ArchivalStore for SqliteStore {
    async fn text_candidates(
        &self,
        agent: AgentId,
        terms: &[String],
        query: &ArchivalQuery,
        limit: usize,
    ) -> Result<PassageMatches, StoreError> {
        #[cfg(feature = "tantivy")]
        if let Some(index) = &self.tantivy_archival {
            // Caught up first and alone: a catch-up dropped half-way (as `try_join!` drops the
            // others when one read fails) could index a batch twice; and the retired facts
            // read after it are at least as new as the index, so a fact retired by a commit
            // the index already holds is left out.
            index.index.catch_up(&self.pool).await?;
            // The counts from SQLite's counters, the frequencies from the index (FTS5's
            // vocabulary table reads a term's whole list of documents to count them). The
            // three reads of SQLite do not wait on one another.
            let totals = async {
                let mut conn = self
                    .pool
                    .acquire()
                    .await
                    .map_err(|e| db("reading passage term statistics", e))?;
                passage_totals(&mut conn).await
            };
            let ((documents, total_terms), excluded, unembedded) = tokio::try_join!(
                totals,
                self.invalid_passages(agent, query),
                self.unembedded_matches(agent, terms, query),
            )?;
            let statistics = memgpt_core::backend::TermStatistics {
                documents,
                total_terms,
                document_frequency: index.document_frequencies(terms)?,
            };
            let keys = index.candidates(agent, terms, query, &excluded, limit)?;
            // Only a text search's page total is every match (see `PassageMatches::total`).
            let total = if query.mode == memgpt_core::store::SearchMode::Text {
                index.count(agent, terms, query, &excluded)?
            } else {
                (keys.len() as u64).max(unembedded)
            };
            return Ok(PassageMatches {
                keys,
                statistics,
                total,
                unembedded,
            });
        }
        let statistics = passage_statistics(&self.pool, terms).await?;
        let (keys, total, unembedded) = self.text_matches(agent, terms, query, limit).await?;
        Ok(PassageMatches {
            keys,
            statistics,
            total,
            unembedded,
        })
    }

    async fn vector_candidates(
        &self,
        agent: AgentId,
        embedding: &Embedding,
        query: &ArchivalQuery,
        limit: usize,
    ) -> Result<NearestPassages, StoreError> {
        if let Some(space) = self.space().await? {
            space.check(embedding)?;
        }
        let (ranked, total) = self
            .vector_ranking(agent, &embedding.vector, query, limit)
            .await?;
        Ok(NearestPassages {
            keys: ranked.into_iter().map(|(_, seq)| seq).collect(),
            total: total as u64,
        })
    }

    async fn passage_candidates(
        &self,
        agent: AgentId,
        keys: &[CandidateKey],
    ) -> Result<Vec<PassageCandidate>, StoreError> {
        Ok(self
            .passages_by_seq(keys)
            .await?
            .into_iter()
            .filter(|(_, passage)| passage.agent_id == agent)
            .map(|(key, passage)| PassageCandidate { key, passage })
            .collect())
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
        sql::list_passages(self, agent, page).await
    }

    async fn count_passages(&self, agent: AgentId) -> Result<u64, StoreError> {
        Ok(sql::count_passages(self, agent).await? as u64)
    }

    async fn unembedded_passages(
        &self,
        agent: AgentId,
        limit: usize,
    ) -> Result<Vec<Passage>, StoreError> {
        sql::unembedded_passages(self, agent, limit).await
    }
}
