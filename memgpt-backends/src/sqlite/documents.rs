//! Search documents: what the full-text tables index for messages and passages, kept in step
//! with memgpt-core's analyzer.
//!
//! A message's document comes from a [`DocumentBuilder`] continued from the agent's latest
//! conversation turns (read in the commit's transaction), and is stored in the row
//! (`document`, `document_length`) and in `message_terms`. The number of documents and their
//! total length (BM25's collection statistics) are counters in `memgpt_meta`, updated by the
//! same transactions. When the analyzer version recorded in `memgpt_meta` differs from
//! [`ANALYZER_VERSION`] (a store created before hybrid search, or a newer analyzer), every
//! document and both full-text tables are rebuilt on open.

use std::collections::HashMap;

use memgpt_core::backend::{ANALYZER_VERSION, MessageDocument, TermStatistics};
use memgpt_core::ids::AgentId;
use memgpt_core::retrieval::document_terms;
use memgpt_core::store::StoreError;
use sqlx::{SqliteConnection, SqlitePool};
use tracing::info;

use super::batch::Batch;
use super::meta::meta;
use crate::codec::db;
use crate::sql::{DocumentRebuild, SqlDialect};

/// The `memgpt_meta` keys of the message collection's statistics.
const DOCUMENTS: &str = "message_documents";
const TERMS: &str = "message_terms";
const ANALYZER: &str = "analyzer";

/// Rows rewritten per batch while rebuilding.
const REBUILD_BATCH: i64 = 5_000;

/// Adds documents to the collection statistics (negative to remove).
pub(crate) fn count_documents(batch: &mut Batch, documents: i64, terms: i64) {
    if documents == 0 && terms == 0 {
        return;
    }
    for (key, delta) in [(DOCUMENTS, documents), (TERMS, terms)] {
        batch
            .values("INSERT INTO memgpt_meta (key, value) VALUES (")
            .push_bind(key)
            .push_bind(delta)
            .push_unseparated(
                ") ON CONFLICT (key) DO UPDATE SET value = CAST(value AS INTEGER) + excluded.value",
            );
    }
}

/// How many message documents the store holds and how many terms they have together (the
/// counters every commit and deletion keeps).
pub(crate) async fn message_totals(conn: &mut SqliteConnection) -> Result<(u64, u64), StoreError> {
    let counter = |value: Option<String>| value.and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    let documents = counter(meta(&mut *conn, DOCUMENTS).await?);
    let total_terms = counter(meta(&mut *conn, TERMS).await?);
    Ok((documents, total_terms))
}

/// The collection statistics of `terms` from `message_terms` and the counters.
pub(crate) async fn fts_statistics(
    pool: &SqlitePool,
    terms: &[String],
) -> Result<TermStatistics, StoreError> {
    let mut conn = pool
        .acquire()
        .await
        .map_err(|e| db("reading term statistics", e))?;
    let (documents, total_terms) = message_totals(&mut conn).await?;
    Ok(TermStatistics {
        documents,
        total_terms,
        document_frequency: document_frequencies(&mut conn, "message_terms_vocab", terms).await?,
    })
}

/// In how many documents of the full-text table behind `vocab` (an fts5vocab `col` table)
/// each of `terms` occurs, in order.
async fn document_frequencies(
    conn: &mut SqliteConnection,
    vocab: &'static str,
    terms: &[String],
) -> Result<Vec<u64>, StoreError> {
    let sql = format!("SELECT doc FROM {vocab} WHERE term = ? AND col = 'body'");
    let mut out = Vec::with_capacity(terms.len());
    for term in terms {
        let df: Option<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql.as_str()))
            .bind(term)
            .fetch_optional(&mut *conn)
            .await
            .map_err(|e| db("reading term statistics", e))?;
        out.push(df.unwrap_or(0).max(0) as u64);
    }
    Ok(out)
}

/// Adds passages of `agent` to the archival collection statistics (negative to remove).
pub(crate) fn count_passage(batch: &mut Batch, agent: AgentId, documents: i64, terms: i64) {
    batch
        .statement("INSERT INTO archival_statistics (agent_id, documents, terms) VALUES (")
        .bind(*agent.as_uuid())
        .sql(", ")
        .bind(documents)
        .sql(", ")
        .bind(terms)
        .sql(
            ") ON CONFLICT (agent_id) DO UPDATE SET documents = documents + excluded.documents, \
             terms = terms + excluded.terms",
        );
}

/// The collection statistics of `terms` over every passage: the per-agent counters summed, and
/// document frequencies from `passage_terms_vocab`.
pub(crate) async fn passage_statistics(
    pool: &SqlitePool,
    terms: &[String],
) -> Result<TermStatistics, StoreError> {
    let get = |e| db("reading passage term statistics", e);
    let mut conn = pool.acquire().await.map_err(get)?;
    let (documents, total_terms) = passage_totals(&mut conn).await?;
    Ok(TermStatistics {
        documents,
        total_terms,
        document_frequency: document_frequencies(&mut conn, "passage_terms_vocab", terms).await?,
    })
}

/// How many passages the store holds and how many terms their documents hold, all agents'
/// (from the per-agent counters: one row per agent).
pub(crate) async fn passage_totals(conn: &mut SqliteConnection) -> Result<(u64, u64), StoreError> {
    let (documents, total_terms): (i64, i64) = sqlx::query_as(
        "SELECT coalesce(sum(documents), 0), coalesce(sum(terms), 0) FROM archival_statistics",
    )
    .fetch_one(&mut *conn)
    .await
    .map_err(|e| db("reading passage term statistics", e))?;
    Ok((documents.max(0) as u64, total_terms.max(0) as u64))
}

/// The `memgpt_meta` key present once `archival_statistics` counts every passage.
const PASSAGE_STATISTICS: &str = "passage_statistics";

/// Counts every passage afresh into `archival_statistics` (in the caller's transaction); with
/// `reindex`, also writes each passage's `passage_terms` row (the table was emptied), in the
/// same pass.
async fn recount_passages(tx: &mut SqliteConnection, reindex: bool) -> Result<(), StoreError> {
    let get = |e| db("counting passages", e);
    sqlx::query("DELETE FROM archival_statistics")
        .execute(&mut *tx)
        .await
        .map_err(get)?;
    let mut counts: HashMap<uuid::Uuid, (i64, i64)> = HashMap::new();
    let mut after = 0i64;
    loop {
        let rows: Vec<(i64, uuid::Uuid, String)> = sqlx::query_as(
            "SELECT seq, agent_id, text FROM passages WHERE seq > ? ORDER BY seq LIMIT ?",
        )
        .bind(after)
        .bind(REBUILD_BATCH)
        .fetch_all(&mut *tx)
        .await
        .map_err(get)?;
        let Some(last) = rows.last() else { break };
        after = last.0;
        for (seq, agent, text) in &rows {
            let words = document_terms(text);
            let count = counts.entry(*agent).or_default();
            count.0 += 1;
            count.1 += words.len() as i64;
            if reindex {
                sqlx::query("INSERT INTO passage_terms (rowid, agent, body) VALUES (?, ?, ?)")
                    .bind(seq)
                    .bind(agent.simple().to_string())
                    .bind(words.join(" "))
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| db("indexing a passage", e))?;
            }
        }
    }
    for (agent, (documents, terms)) in counts {
        sqlx::query(
            "INSERT INTO archival_statistics (agent_id, documents, terms) VALUES (?, ?, ?)",
        )
        .bind(agent)
        .bind(documents)
        .bind(terms)
        .execute(&mut *tx)
        .await
        .map_err(get)?;
    }
    sqlx::query(
        "INSERT INTO memgpt_meta (key, value) VALUES (?, '1') ON CONFLICT (key) DO NOTHING",
    )
    .bind(PASSAGE_STATISTICS)
    .execute(&mut *tx)
    .await
    .map_err(get)?;
    Ok(())
}

/// Fills in `archival_statistics` for a store upgraded from before it existed.
pub(crate) async fn count_passages_if_missing(pool: &SqlitePool) -> Result<(), StoreError> {
    if meta(pool, PASSAGE_STATISTICS).await?.is_some() {
        return Ok(());
    }
    let mut tx =
        crate::sql::begin(pool, Some("BEGIN IMMEDIATE"), "starting to count passages").await?;
    // Another process may have counted while this one waited for the lock.
    if meta(&mut *tx, PASSAGE_STATISTICS).await?.is_none() {
        info!("counting every passage for archival search statistics");
        recount_passages(&mut tx, false).await?;
    }
    tx.commit()
        .await
        .map_err(|e| db("committing the passage counts", e))
}

/// Rebuilds every document and both full-text tables unless they were built by this analyzer.
pub(crate) async fn rebuild_if_stale<S: SqlDialect<Db = sqlx::Sqlite>>(
    pool: &SqlitePool,
) -> Result<(), StoreError> {
    if meta(pool, ANALYZER).await?.as_deref() == Some(ANALYZER_VERSION) {
        return Ok(());
    }
    let mut tx =
        crate::sql::begin(pool, Some("BEGIN IMMEDIATE"), "starting the search rebuild").await?;
    // Another process may have rebuilt while this one waited for the lock.
    if meta(&mut *tx, ANALYZER).await?.as_deref() == Some(ANALYZER_VERSION) {
        return Ok(());
    }
    info!(
        analyzer = ANALYZER_VERSION,
        "building the search documents of every message and passage"
    );
    for table in ["message_terms", "passage_terms"] {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO {table} ({table}) VALUES ('delete-all')"
        )))
        .execute(&mut *tx)
        .await
        .map_err(|e| db("clearing a full-text table", e))?;
    }
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
        for (seq, agent, document) in rebuild.documents::<S>(&rows)? {
            write_message_document(&mut tx, seq, agent, &document, true).await?;
        }
    }
    let (documents, terms) = rebuild
        .totals
        .values()
        .fold((0, 0), |(d, t), (dd, tt)| (d + dd, t + tt));
    for key in [DOCUMENTS, TERMS] {
        sqlx::query("DELETE FROM memgpt_meta WHERE key = ?")
            .bind(key)
            .execute(&mut *tx)
            .await
            .map_err(|e| db("resetting search statistics", e))?;
    }
    let mut batch = Batch::new("counting search documents");
    count_documents(&mut batch, documents, terms);
    batch.send(&mut tx).await?;
    recount_passages(&mut tx, true).await?;
    sqlx::query(
        "INSERT INTO memgpt_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
    )
    .bind(ANALYZER)
    .bind(ANALYZER_VERSION)
    .execute(&mut *tx)
    .await
    .map_err(|e| db("recording the analyzer", e))?;
    tx.commit()
        .await
        .map_err(|e| db("committing the search rebuild", e))?;
    info!(documents, "search documents built");
    Ok(())
}

/// Stores a message's document in its row (when `update_row`: rows inserted by a commit already
/// carry it) and in `message_terms`.
pub(crate) async fn write_message_document(
    tx: &mut SqliteConnection,
    seq: i64,
    agent: AgentId,
    document: &MessageDocument,
    update_row: bool,
) -> Result<(), StoreError> {
    let text = document.text();
    if update_row {
        sqlx::query(
            "UPDATE messages SET turn = ?, document = ?, document_length = ? WHERE seq = ?",
        )
        .bind(document.turn.map(|t| t as i64))
        .bind(&text)
        .bind(document.len() as i64)
        .bind(seq)
        .execute(&mut *tx)
        .await
        .map_err(|e| db("storing a search document", e))?;
    }
    sqlx::query("INSERT INTO message_terms (rowid, agent, body) VALUES (?, ?, ?)")
        .bind(seq)
        .bind(agent.as_uuid().simple().to_string())
        .bind(text)
        .execute(&mut *tx)
        .await
        .map_err(|e| db("indexing a message", e))?;
    Ok(())
}
