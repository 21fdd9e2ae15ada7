//! Search documents in PostgreSQL: what `search_text` (and the generated `search` tsvector)
//! holds for messages and passages, kept in step with memgpt-core's analyzer.
//!
//! A commit continues the agent's [`DocumentBuilder`] from its latest conversation turns (read
//! under the agent's row lock) and keeps `recall_statistics` (documents and terms per agent,
//! summed for BM25's collection statistics). When the analyzer version in `memgpt_meta` is not
//! [`ANALYZER_VERSION`], every document is rebuilt while the store opens, under the migration
//! lock.

use std::collections::HashMap;

use memgpt_core::backend::{ANALYZER_VERSION, TermStatistics};
use memgpt_core::ids::AgentId;
use memgpt_core::retrieval::document_terms;
use memgpt_core::store::StoreError;
use sqlx::{PgConnection, PgPool, Row};
use tracing::info;

use super::meta::meta;
use crate::codec::db;
use crate::sql::{DocumentRebuild, SqlDialect};

const ANALYZER: &str = "analyzer";

/// Rows rewritten per batch while rebuilding.
const REBUILD_BATCH: i64 = 5_000;

/// PostgreSQL's longest lexeme, in bytes: longer words are left out of `tsvector`s (with a
/// notice), so a query term that long can match nothing and is dropped (a `tsquery` holding one
/// is an error).
pub(crate) const MAX_LEXEME_BYTES: usize = 2_047;

/// The text `search_text` holds for a passage: its stemmed words.
pub(crate) fn passage_search_text(text: &str) -> String {
    document_terms(text).join(" ")
}

/// A `tsquery` matching any of these analysed terms, each quoted as a literal lexeme, or `None`
/// when there are none. Bound as a parameter and cast with `::tsquery`, which takes lexemes as
/// written.
pub(crate) fn terms_tsquery(terms: &[String]) -> Option<String> {
    let quoted: Vec<String> = terms
        .iter()
        .filter(|t| !t.is_empty() && t.len() <= MAX_LEXEME_BYTES)
        .map(|t| format!("'{}'", t.replace('\\', "\\\\").replace('\'', "''")))
        .collect();
    if quoted.is_empty() {
        return None;
    }
    Some(quoted.join(" | "))
}

/// Adds to an agent's statistics of `collection` (negative to remove).
pub(crate) async fn count_documents(
    tx: &mut PgConnection,
    collection: Collection,
    agent: AgentId,
    documents: i64,
    terms: i64,
) -> Result<(), StoreError> {
    if documents == 0 && terms == 0 {
        return Ok(());
    }
    let (_, counters) = collection.tables();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO {counters} (agent_id, documents, terms) VALUES ($1, $2, $3) \
         ON CONFLICT (agent_id) DO UPDATE SET documents = {counters}.documents + EXCLUDED.documents, \
         terms = {counters}.terms + EXCLUDED.terms"
    )))
    .bind(agent.as_uuid())
    .bind(documents)
    .bind(terms)
    .execute(&mut *tx)
    .await
    .map_err(|e| db("counting search documents", e))?;
    Ok(())
}

/// The documents a search's statistics are over.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Collection {
    /// Every message document (`recall_statistics`).
    Messages,
    /// Every passage (`archival_statistics`).
    Passages,
}

impl Collection {
    /// The table of the documents, and the table of their per-agent counters.
    fn tables(self) -> (&'static str, &'static str) {
        match self {
            Collection::Messages => ("messages", "recall_statistics"),
            Collection::Passages => ("passages", "archival_statistics"),
        }
    }
}

/// The collection statistics of `terms` over every document of `collection` in the store.
pub(crate) async fn statistics(
    pool: &PgPool,
    collection: Collection,
    terms: &[String],
) -> Result<TermStatistics, StoreError> {
    let (documents_table, counters) = collection.tables();
    let row = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT coalesce(sum(documents), 0)::bigint AS documents, coalesce(sum(terms), 0)::bigint AS terms \
         FROM {counters}"
    )))
    .fetch_one(pool)
    .await
    .map_err(|e| db("reading term statistics", e))?;
    let documents: i64 = row
        .try_get("documents")
        .map_err(|e| db("reading term statistics", e))?;
    let total_terms: i64 = row
        .try_get("terms")
        .map_err(|e| db("reading term statistics", e))?;
    // One pass over the union of the terms' matches (GIN), counting each term's.
    let searchable: Vec<Option<String>> = terms
        .iter()
        .map(|t| terms_tsquery(std::slice::from_ref(t)))
        .collect();
    let present: Vec<&String> = searchable.iter().flatten().collect();
    let mut counts: HashMap<usize, u64> = HashMap::new();
    if let Some(any) = terms_tsquery(terms) {
        let mut sql = String::from("SELECT ");
        for i in 0..present.len() {
            if i > 0 {
                sql.push_str(", ");
            }
            sql.push_str(&format!(
                "count(*) FILTER (WHERE search @@ ${}::tsquery)",
                i + 2
            ));
        }
        sql.push_str(&format!(
            " FROM {documents_table} WHERE search @@ $1::tsquery"
        ));
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(any);
        for q in &present {
            query = query.bind(*q);
        }
        let row = query
            .fetch_one(pool)
            .await
            .map_err(|e| db("reading term statistics", e))?;
        let mut column = 0usize;
        for (i, q) in searchable.iter().enumerate() {
            if q.is_some() {
                let n: i64 = row
                    .try_get(column)
                    .map_err(|e| db("reading term statistics", e))?;
                counts.insert(i, n.max(0) as u64);
                column += 1;
            }
        }
    }
    Ok(TermStatistics {
        documents: documents.max(0) as u64,
        total_terms: total_terms.max(0) as u64,
        document_frequency: (0..terms.len())
            .map(|i| counts.get(&i).copied().unwrap_or(0))
            .collect(),
    })
}

/// Rebuilds every document (messages and passages) unless they were built by this analyzer.
/// Runs in the store's setup transaction, under the migration lock.
pub(crate) async fn rebuild_if_stale<S: SqlDialect<Db = sqlx::Postgres>>(
    tx: &mut PgConnection,
) -> Result<(), StoreError> {
    if meta(&mut *tx, ANALYZER).await?.as_deref() == Some(ANALYZER_VERSION) {
        return Ok(());
    }
    info!(
        analyzer = ANALYZER_VERSION,
        "building the search documents of every message and passage"
    );
    sqlx::query("DELETE FROM recall_statistics")
        .execute(&mut *tx)
        .await
        .map_err(|e| db("resetting search statistics", e))?;
    let mut rebuild = DocumentRebuild::default();
    loop {
        let rows = rebuild
            .next_batch::<S>(REBUILD_BATCH)
            .build()
            .fetch_all(&mut *tx)
            .await
            .map_err(|e| db("reading messages to index", e))?;
        if rows.is_empty() {
            break;
        }
        let (mut seqs, mut turns, mut texts, mut lengths) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (seq, _, document) in rebuild.documents::<S>(&rows)? {
            seqs.push(seq);
            turns.push(document.turn.map(|t| t as i64));
            texts.push(document.text());
            lengths.push(document.len() as i32);
        }
        sqlx::query(
            "UPDATE messages m SET turn = u.turn, search_text = u.search_text, document_length = u.len \
             FROM UNNEST($1::bigint[], $2::bigint[], $3::text[], $4::int4[]) AS u(seq, turn, search_text, len) \
             WHERE m.seq = u.seq",
        )
        .bind(seqs)
        .bind(turns)
        .bind(texts)
        .bind(lengths)
        .execute(&mut *tx)
        .await
        .map_err(|e| db("storing search documents", e))?;
    }
    for (agent, (documents, terms)) in rebuild.totals {
        count_documents(tx, Collection::Messages, agent, documents, terms).await?;
    }
    let mut after = 0i64;
    loop {
        let rows =
            sqlx::query("SELECT seq, text FROM passages WHERE seq > $1 ORDER BY seq LIMIT $2")
                .bind(after)
                .bind(REBUILD_BATCH)
                .fetch_all(&mut *tx)
                .await
                .map_err(|e| db("reading passages to index", e))?;
        let Some(last) = rows.last() else { break };
        after = last
            .try_get("seq")
            .map_err(|e| db("reading passages to index", e))?;
        let mut seqs = Vec::with_capacity(rows.len());
        let mut texts = Vec::with_capacity(rows.len());
        for row in &rows {
            seqs.push(
                row.try_get::<i64, _>("seq")
                    .map_err(|e| db("reading passages to index", e))?,
            );
            let text: String = row
                .try_get("text")
                .map_err(|e| db("reading passages to index", e))?;
            texts.push(passage_search_text(&text));
        }
        sqlx::query(
            "UPDATE passages p SET search_text = u.search_text \
             FROM UNNEST($1::bigint[], $2::text[]) AS u(seq, search_text) WHERE p.seq = u.seq",
        )
        .bind(seqs)
        .bind(texts)
        .execute(&mut *tx)
        .await
        .map_err(|e| db("storing passage documents", e))?;
    }
    for sql in [
        "DELETE FROM archival_statistics",
        "INSERT INTO archival_statistics (agent_id, documents, terms) \
         SELECT agent_id, count(*), coalesce(sum(cardinality(string_to_array(search_text, ' '))), 0) \
         FROM passages GROUP BY agent_id",
    ] {
        sqlx::query(sql)
            .execute(&mut *tx)
            .await
            .map_err(|e| db("counting passages", e))?;
    }
    sqlx::query(
        "INSERT INTO memgpt_meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
    )
    .bind(ANALYZER)
    .bind(ANALYZER_VERSION)
    .execute(&mut *tx)
    .await
    .map_err(|e| db("recording the analyzer", e))?;
    Ok(())
}
