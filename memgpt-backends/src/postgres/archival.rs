//! Archival storage: passages with embeddings; the candidates of archival search by pgvector
//! HNSW and by full-text match (memgpt-core ranks them).

use std::collections::HashMap;

use async_trait::async_trait;
use memgpt_core::embed::Embedding;
use memgpt_core::ids::{AgentId, PassageId};
use memgpt_core::retrieval::{CandidateKey, NearestPassages, PassageMatches};
use memgpt_core::store::{
    ArchivalQuery, ArchivalStore, EmbeddingSpace, Page, Passage, PassageCandidate, SearchPage,
    StoreError,
};
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row};

use super::dialect::{PASSAGE_COLUMNS, passage_from_row};
use super::documents::{Collection, statistics, terms_tsquery};
use super::{MAX_EF_SEARCH, PgStore};
use crate::codec::db;
use crate::sql;

/// Decodes `(distance, seq)` lists.
fn distances(rows: &[PgRow]) -> Result<Vec<(f64, i64)>, StoreError> {
    rows.iter()
        .map(|row| {
            let seq: i64 = row
                .try_get("seq")
                .map_err(|e| db("searching embeddings", e))?;
            let distance: f64 = row
                .try_get("distance")
                .map_err(|e| db("searching embeddings", e))?;
            Ok((distance, seq))
        })
        .collect()
}

/// Decodes `(score, seq)` rankings.
fn ranking(rows: &[PgRow], context: &str) -> Result<Vec<(f32, i64)>, StoreError> {
    rows.iter()
        .map(|row| {
            let seq: i64 = row.try_get("seq").map_err(|e| db(context, e))?;
            let score: f64 = row.try_get("score").map_err(|e| db(context, e))?;
            Ok((score as f32, seq))
        })
        .collect()
}

/// The tag, time and validity filters of an archival query for passages aliased `p`, as SQL
/// reading parameters `$n` (start), `$n+1` (end), `$n+2` (tags) and `$n+3` (the instant the
/// passages must be valid at); unset filters bind NULL or an empty array, which the planner
/// (custom plans) folds away.
fn filter_sql(n: usize) -> String {
    format!(
        "(${n}::timestamptz IS NULL OR p.created_at >= ${n}) AND (${m}::timestamptz IS NULL OR p.created_at < ${m}) \
         AND (cardinality(${t}::text[]) = 0 OR (p.metadata -> 'tags') ?| ${t}) \
         AND (${v}::timestamptz IS NULL OR ((p.valid_from IS NULL OR p.valid_from <= ${v}) \
              AND (p.valid_to IS NULL OR p.valid_to > ${v})))",
        m = n + 1,
        t = n + 2,
        v = n + 3
    )
}

/// Binds the parameters of [`filter_sql`].
fn bind_filter<'q>(
    query: sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
    filter: &ArchivalQuery,
) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
    query
        .bind(filter.range.start)
        .bind(filter.range.end)
        .bind(filter.tags.clone())
        .bind(filter.validity.instant())
}

/// Whether a query filters passages by tag or time.
fn is_filtered(query: &ArchivalQuery) -> bool {
    !query.tags.is_empty() || !query.range.is_unbounded()
}

/// Whether `filter`'s validity check can leave out any passage of `agent`: only when some
/// passage of the agent has a lifetime (found through a partial index).
async fn validity_filters(
    conn: &mut PgConnection,
    agent: AgentId,
    filter: &ArchivalQuery,
) -> Result<bool, StoreError> {
    let Some(mut sql) = sql::lifetimes_exist::<PgStore>(agent, filter) else {
        return Ok(false);
    };
    let found: i64 = sql
        .build_query_scalar()
        .fetch_one(conn)
        .await
        .map_err(|e| db("looking for passages with a lifetime", e))?;
    Ok(found != 0)
}

impl PgStore {
    /// Passages of `agent` by sequence number, in the order given (missing ones skipped).
    async fn passages_by_seq(
        &self,
        agent: AgentId,
        seqs: &[i64],
    ) -> Result<Vec<(i64, Passage)>, StoreError> {
        if seqs.is_empty() {
            return Ok(Vec::new());
        }
        let space = self.space().await?;
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {PASSAGE_COLUMNS} FROM passages p WHERE p.agent_id = $1 AND p.seq = ANY($2)"
        )))
        .bind(agent.as_uuid())
        .bind(seqs)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| db("reading passages", e))?;
        let mut found: HashMap<i64, Passage> = HashMap::with_capacity(rows.len());
        for row in &rows {
            let seq: i64 = row.try_get("seq").map_err(|e| db("reading passages", e))?;
            found.insert(seq, passage_from_row(row, space.as_ref())?);
        }
        Ok(seqs
            .iter()
            .filter_map(|seq| Some((*seq, found.remove(seq)?)))
            .collect())
    }

    /// The embedded passages of `agent` nearest to `query` by cosine similarity, best first (ties:
    /// newest first, as in the reference store); at most `limit`, and how many embedded passages
    /// the agent has.
    ///
    /// The HNSW index serves the nearest-neighbour scan (`hnsw.ef_search` raised for deep pages,
    /// iterative scans so the agent filter cannot starve it), ordered by distance alone, which is
    /// what the index can give; the final order is exact. Passages at exactly the distance where
    /// the list is cut (duplicate texts have equal vectors) are then all read, so the newest of
    /// them make the cut whatever order the index returned them in.
    async fn vector_ranking(
        &self,
        agent: AgentId,
        query: &[f32],
        space: &EmbeddingSpace,
        filter: &ArchivalQuery,
        limit: usize,
    ) -> Result<(Vec<(f32, i64)>, usize), StoreError> {
        let mut tx = crate::sql::begin(&self.pool, None, "starting a vector search").await?;
        let embedded: i64 = if is_filtered(filter)
            || validity_filters(&mut tx, agent, filter).await?
        {
            bind_filter(
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT count(*) AS n FROM passages p WHERE p.agent_id = $1 AND p.embedding IS NOT NULL AND {}",
                    filter_sql(2)
                )))
                .bind(agent.as_uuid()),
                filter,
            )
            .fetch_one(&mut *tx)
            .await
            .and_then(|row| row.try_get("n"))
            .map_err(|e| db("counting passages", e))?
        } else {
            sqlx::query_scalar(
                "SELECT coalesce((SELECT embedded FROM agent_embedded_counts WHERE agent_id = $1), 0)",
            )
            .bind(agent.as_uuid())
            .fetch_one(&mut *tx)
            .await
            .map_err(|e| db("counting passages", e))?
        };
        // Never deeper than what exists: a huge page costs nothing.
        let limit = limit.min(embedded.max(0) as usize);
        if limit == 0 {
            return Ok((Vec::new(), embedded.max(0) as usize));
        }
        if query.iter().all(|x| *x == 0.0) {
            // A zero vector is equally (un)similar to everything: cosine 0, as the reference
            // store scores it (pgvector's distance would be NaN).
            let rows = bind_filter(
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT p.seq, 0::float8 AS score FROM passages p WHERE p.agent_id = $1 AND p.embedding IS NOT NULL \
                     AND {} ORDER BY p.created_at DESC, p.seq DESC LIMIT $2",
                    filter_sql(3)
                )))
                .bind(agent.as_uuid())
                .bind(limit as i64),
                filter,
            )
            .fetch_all(&mut *tx)
            .await
            .map_err(|e| db("searching embeddings", e))?;
            tx.commit()
                .await
                .map_err(|e| db("finishing a vector search", e))?;
            return Ok((ranking(&rows, "searching embeddings")?, embedded as usize));
        }
        set_search_depth(&mut tx, limit, self.ef_search).await?;
        let d = space.dimension;
        let distance = format!("p.embedding::vector({d}) <=> $1::real[]::vector({d})");
        // One more than asked, to see whether equal distances straddle the cut.
        let rows = bind_filter(
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "WITH nearest AS MATERIALIZED ( \
                     SELECT p.seq, p.created_at, {distance} AS distance \
                     FROM passages p WHERE p.agent_id = $2 AND p.embedding IS NOT NULL AND {} \
                     ORDER BY distance LIMIT $3) \
                 SELECT seq, distance FROM nearest ORDER BY distance, created_at DESC, seq DESC",
                filter_sql(4)
            )))
            .bind(query)
            .bind(agent.as_uuid())
            .bind(limit as i64 + 1),
            filter,
        )
        .fetch_all(&mut *tx)
        .await
        .map_err(|e| db("searching embeddings", e))?;
        let mut nearest = distances(&rows)?;
        if nearest.len() > limit && nearest[limit].0 == nearest[limit - 1].0 {
            let cut = nearest[limit - 1].0;
            let rows = bind_filter(
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT seq, distance FROM ( \
                         SELECT p.seq, p.created_at, {distance} AS distance \
                         FROM passages p WHERE p.agent_id = $2 AND p.embedding IS NOT NULL AND {}) tied \
                     WHERE distance = $3 ORDER BY created_at DESC, seq DESC LIMIT $4",
                    filter_sql(5)
                )))
                .bind(query)
                .bind(agent.as_uuid())
                .bind(cut)
                .bind(limit as i64),
                filter,
            )
            .fetch_all(&mut *tx)
            .await
            .map_err(|e| db("searching embeddings", e))?;
            nearest.retain(|(distance, _)| *distance < cut);
            nearest.extend(distances(&rows)?);
        }
        nearest.truncate(limit);
        tx.commit()
            .await
            .map_err(|e| db("finishing a vector search", e))?;
        let ranked = nearest
            .into_iter()
            .map(|(distance, seq)| ((1.0 - distance) as f32, seq))
            .collect();
        Ok((ranked, embedded as usize))
    }

    /// Passages of `agent` matching `tsquery`, best first by `ts_rank_cd` (the candidates' final
    /// ranking is memgpt-core's; ties: newest first); at most `limit`.
    async fn text_ranking(
        &self,
        agent: AgentId,
        tsquery: &str,
        filter: &ArchivalQuery,
        limit: usize,
    ) -> Result<Vec<(f32, i64)>, StoreError> {
        let rows = bind_filter(
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT p.seq, ts_rank_cd(p.search, $2::tsquery)::float8 AS score FROM passages p \
                 WHERE p.agent_id = $1 AND p.search @@ $2::tsquery AND {} \
                 ORDER BY score DESC, p.created_at DESC, p.seq DESC LIMIT $3",
                filter_sql(4)
            )))
            .bind(agent.as_uuid())
            .bind(tsquery.to_owned())
            .bind(limit.min(i64::MAX as usize) as i64),
            filter,
        )
        .fetch_all(&self.pool)
        .await
        .map_err(|e| db("searching archival storage", e))?;
        ranking(&rows, "searching archival storage")
    }

    /// How many passages of `agent` match `tsquery`, in all and among those without embedding.
    async fn count_text_matches(
        &self,
        agent: AgentId,
        tsquery: &str,
        filter: &ArchivalQuery,
    ) -> Result<(usize, usize), StoreError> {
        let row = bind_filter(
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT count(*) AS matches, count(*) FILTER (WHERE p.embedding IS NULL) AS unembedded FROM passages p \
                 WHERE p.agent_id = $1 AND p.search @@ $2::tsquery AND {}",
                filter_sql(3)
            )))
            .bind(agent.as_uuid())
            .bind(tsquery.to_owned()),
            filter,
        )
        .fetch_one(&self.pool)
        .await
        .map_err(|e| db("counting passages", e))?;
        let matches: i64 = row
            .try_get("matches")
            .map_err(|e| db("counting passages", e))?;
        let unembedded: i64 = row
            .try_get("unembedded")
            .map_err(|e| db("counting passages", e))?;
        Ok((matches as usize, unembedded as usize))
    }
}

/// Sets the HNSW search depth for this transaction: at least `min_ef` candidates and enough for
/// `depth` results, and pgvector 0.8's iterative scans, which keep scanning when the agent
/// filter removes candidates.
pub(crate) async fn set_search_depth(
    tx: &mut PgConnection,
    depth: usize,
    min_ef: usize,
) -> Result<(), StoreError> {
    let ef_search = depth.saturating_mul(2).max(min_ef).min(MAX_EF_SEARCH);
    sqlx::query(
        "SELECT set_config('hnsw.ef_search', $1, true), set_config('hnsw.iterative_scan', 'relaxed_order', true)",
    )
    .bind(ef_search.to_string())
    .execute(&mut *tx)
    .await
    .map_err(|e| db("configuring the vector search", e))?;
    Ok(())
}

#[async_trait]
impl ArchivalStore for PgStore {
    async fn text_candidates(
        &self,
        agent: AgentId,
        terms: &[String],
        query: &ArchivalQuery,
        limit: usize,
    ) -> Result<PassageMatches, StoreError> {
        let statistics = statistics(&self.pool, Collection::Passages, terms).await?;
        let Some(tsquery) = terms_tsquery(terms) else {
            return Ok(PassageMatches {
                statistics,
                ..PassageMatches::default()
            });
        };
        let (total, unembedded) = self.count_text_matches(agent, &tsquery, query).await?;
        let keys = if total == 0 {
            Vec::new()
        } else {
            self.text_ranking(agent, &tsquery, query, limit)
                .await?
                .into_iter()
                .map(|(_, seq)| seq)
                .collect()
        };
        Ok(PassageMatches {
            keys,
            statistics,
            total: total as u64,
            unembedded: unembedded as u64,
        })
    }

    async fn vector_candidates(
        &self,
        agent: AgentId,
        embedding: &Embedding,
        query: &ArchivalQuery,
        limit: usize,
    ) -> Result<NearestPassages, StoreError> {
        let Some(space) = self.space().await? else {
            // No passage has ever been embedded.
            return Ok(NearestPassages::default());
        };
        space.check(embedding)?;
        let (ranked, total) = self
            .vector_ranking(agent, &embedding.vector, &space, query, limit)
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
            .passages_by_seq(agent, keys)
            .await?
            .into_iter()
            .map(|(key, passage)| PassageCandidate { key, passage })
            .collect())
    }

    async fn get_passages(
        &self,
        agent: AgentId,
        ids: &[PassageId],
    ) -> Result<Vec<Passage>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let space = self.space().await?;
        let uuids: Vec<uuid::Uuid> = ids.iter().map(|id| *id.as_uuid()).collect();
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {PASSAGE_COLUMNS} FROM passages p WHERE p.agent_id = $1 AND p.id = ANY($2)"
        )))
        .bind(agent.as_uuid())
        .bind(uuids)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| db("reading passages", e))?;
        let mut found: HashMap<PassageId, Passage> = HashMap::with_capacity(rows.len());
        for row in &rows {
            let passage = passage_from_row(row, space.as_ref())?;
            found.insert(passage.id, passage);
        }
        // In the order asked, as the reference store answers (an id asked twice comes twice).
        Ok(ids.iter().filter_map(|id| found.get(id).cloned()).collect())
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
