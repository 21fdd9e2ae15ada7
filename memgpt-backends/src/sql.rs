//! What the SQL backends share: how result pages are assembled (one rule for counting,
//! stopping past the end, binding a page as `LIMIT`/`OFFSET`, attaching ranked scores) and the
//! listings written once over a [`SqlDialect`], which SQLite and PostgreSQL each implement.

use std::collections::HashMap;

use memgpt_core::backend::{DocumentBuilder, MessageDocument, WINDOW_NEIGHBOURS};
use memgpt_core::ids::{AgentId, BlockId};
use memgpt_core::message::Message;
use memgpt_core::retrieval::{CandidateKey, RecallCandidate};
use memgpt_core::store::{
    EmbeddingSpace, Hit, Page, Passage, RecallQuery, SearchPage, SharedBlock, StoreError,
};
use sqlx::{Database, Pool, QueryBuilder, Transaction};

/// Begins a transaction on `pool` (with `statement`, else the database's plain `BEGIN`) in a
/// task of its own; `what` names it in errors.
///
/// sqlx 0.9's `begin` is not safe to cancel: a future dropped after its `BEGIN` reached the
/// database but before the `Transaction` existed hands the connection back to the pool inside
/// a transaction nobody owns, and the next user's writes on that connection land in it,
/// uncommitted, and are gone when it closes (the model-based test found this, dropping a
/// PostgreSQL search at one of its awaits: a block created next was missing after a reopen).
/// Spawned, the begin always runs to its end, and a `Transaction` nobody receives is dropped,
/// which rolls it back.
pub(crate) async fn begin<DB: Database>(
    pool: &Pool<DB>,
    statement: Option<&'static str>,
    what: &str,
) -> Result<Transaction<'static, DB>, StoreError> {
    let pool = pool.clone();
    let begun = tokio::spawn(async move {
        match statement {
            Some(statement) => pool.begin_with(statement).await,
            None => pool.begin().await,
        }
    });
    match begun.await {
        Ok(result) => result.map_err(|e| crate::codec::db(what, e)),
        Err(e) => Err(crate::codec::db(what, e)),
    }
}

/// Adds one row of a search-candidates query to `out`. The query returns one row per window of
/// a message (its messages in order, each message's windows in order): a row of the message
/// `out` ends with adds its window's vector there; a row of another message becomes a new
/// candidate, made by `candidate` (whose `embeddings` this fills).
pub(crate) fn push_candidate_window(
    out: &mut Vec<RecallCandidate>,
    key: CandidateKey,
    vector: Option<Vec<f32>>,
    candidate: impl FnOnce() -> Result<RecallCandidate, StoreError>,
) -> Result<(), StoreError> {
    if let Some(last) = out.last_mut().filter(|c| c.key == key) {
        last.embeddings.extend(vector);
        return Ok(());
    }
    let mut new = candidate()?;
    new.embeddings = vector.into_iter().collect();
    out.push(new);
    Ok(())
}

/// The embedding space a store handle knows, shared by its tasks: a store's space never changes
/// once fixed (until every embedding is cleared), so it is read once.
#[derive(Debug, Default)]
pub(crate) struct SpaceCache(std::sync::RwLock<Option<EmbeddingSpace>>);

impl SpaceCache {
    /// The space, if this handle knows it.
    pub(crate) fn get(&self) -> Option<EmbeddingSpace> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Remembers the space a committed transaction fixed or confirmed.
    pub(crate) fn set(&self, space: EmbeddingSpace) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = Some(space);
    }

    /// Forgets the space (after clearing every embedding).
    pub(crate) fn clear(&self) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// The known space, or the one `read` finds in the store (remembered once there is one).
    pub(crate) async fn get_or_read(
        &self,
        read: impl Future<Output = Result<Option<EmbeddingSpace>, StoreError>>,
    ) -> Result<Option<EmbeddingSpace>, StoreError> {
        if let Some(space) = self.get() {
            return Ok(Some(space));
        }
        let space = read.await?;
        if let Some(space) = &space {
            self.set(space.clone());
        }
        Ok(space)
    }
}

/// The embedding space recorded in `memgpt_meta` (`embedding_model`, `embedding_dimension`),
/// if both are there.
pub(crate) fn space_from_meta(
    model: Option<String>,
    dimension: Option<String>,
) -> Result<Option<EmbeddingSpace>, StoreError> {
    Ok(match (model, dimension) {
        (Some(model), Some(dimension)) => Some(EmbeddingSpace {
            model,
            dimension: dimension
                .parse()
                .map_err(|_| crate::codec::corrupt("embedding_dimension"))?,
        }),
        _ => None,
    })
}

/// The query of whether some passage of `agent` has a lifetime (a known start or an end): the
/// rows the partial index `passages_with_lifetime` holds, so it is one index probe, answered
/// as a count of 0 or 1. `None` when `filter` sees every passage anyway (no validity instant).
/// (SQLite asks only before an approximate usearch search.)
#[cfg(any(feature = "postgres", feature = "usearch"))]
pub(crate) fn lifetimes_exist<S: SqlDialect>(
    agent: AgentId,
    filter: &memgpt_core::store::ArchivalQuery,
) -> Option<QueryBuilder<S::Db>> {
    filter.validity.instant()?;
    // `count(*)` over at most one row: an integer in both dialects, where EXISTS is a boolean
    // in one and an integer in the other.
    let mut sql =
        QueryBuilder::new("SELECT count(*) FROM (SELECT 1 FROM passages WHERE agent_id = ");
    S::push_agent(&mut sql, agent);
    sql.push(" AND (valid_from IS NOT NULL OR valid_to IS NOT NULL) LIMIT 1) AS found");
    Some(sql)
}

/// The statement recording a newly fixed embedding space in `memgpt_meta`: the rows
/// [`space_from_meta`] reads back.
pub(crate) fn record_space<S: SqlDialect>(space: &EmbeddingSpace) -> QueryBuilder<S::Db> {
    let mut sql =
        QueryBuilder::new("INSERT INTO memgpt_meta (key, value) VALUES ('embedding_model', ");
    S::push_text(&mut sql, space.model.clone());
    sql.push("), ('embedding_dimension', ");
    S::push_text(&mut sql, space.dimension.to_string());
    sql.push(")");
    sql
}

/// One SQL backend's dialect: how it binds values, filters, decodes rows and runs queries.
/// The listings of this module are written once against it.
pub(crate) trait SqlDialect: Sync {
    /// The sqlx driver.
    type Db: Database;
    /// The message columns [`SqlDialect::message_from_row`] decodes (table alias `m`).
    const MESSAGE_COLUMNS: &'static str;
    /// The passage columns [`SqlDialect::passage_from_row`] decodes (table alias `p`).
    const PASSAGE_COLUMNS: &'static str;

    /// Binds an agent id.
    fn push_agent(sql: &mut QueryBuilder<Self::Db>, agent: AgentId);
    /// Binds an integer.
    fn push_int(sql: &mut QueryBuilder<Self::Db>, n: i64);
    /// Binds a text.
    fn push_text(sql: &mut QueryBuilder<Self::Db>, text: String);
    /// Appends ` AND ...` conditions for a recall query's kinds and time range.
    fn push_message_filters(sql: &mut QueryBuilder<Self::Db>, query: &RecallQuery);
    /// Decodes a row selected with [`SqlDialect::MESSAGE_COLUMNS`].
    fn message_from_row(row: &<Self::Db as Database>::Row) -> Result<Message, StoreError>;
    /// Reads the integer column `name` of a row.
    fn int_column(row: &<Self::Db as Database>::Row, name: &str) -> Result<i64, StoreError>;
    /// Decodes a row selected with [`SqlDialect::PASSAGE_COLUMNS`].
    fn passage_from_row(
        row: &<Self::Db as Database>::Row,
        space: Option<&EmbeddingSpace>,
    ) -> Result<Passage, StoreError>;

    /// The store's embedding space, if it has one yet.
    fn space(&self) -> impl Future<Output = Result<Option<EmbeddingSpace>, StoreError>> + Send;
    /// Runs a `SELECT count(*) ...`; `what` names the operation in errors.
    fn count(
        &self,
        sql: QueryBuilder<Self::Db>,
        what: &'static str,
    ) -> impl Future<Output = Result<usize, StoreError>> + Send;
    /// Runs a query and returns its rows; `what` names the operation in errors.
    fn rows(
        &self,
        sql: QueryBuilder<Self::Db>,
        what: &'static str,
    ) -> impl Future<Output = Result<Vec<<Self::Db as Database>::Row>, StoreError>> + Send;
}

/// Implements [`SqlDialect`] for `$store` (a store with a `pool` of driver `$db` and an
/// inherent `space()`), from the items of the dialect module it is invoked in:
/// `MESSAGE_COLUMNS`, `PASSAGE_COLUMNS`, `push_filters`, `message_from_row` and
/// `passage_from_row`.
macro_rules! impl_sql_dialect {
    ($store:ty, $db:ty, $row:ty) => {
        impl $crate::sql::SqlDialect for $store {
            type Db = $db;
            const MESSAGE_COLUMNS: &'static str = MESSAGE_COLUMNS;
            const PASSAGE_COLUMNS: &'static str = PASSAGE_COLUMNS;

            fn push_agent(sql: &mut ::sqlx::QueryBuilder<$db>, agent: ::memgpt_core::ids::AgentId) {
                sql.push_bind(*agent.as_uuid());
            }

            fn push_int(sql: &mut ::sqlx::QueryBuilder<$db>, n: i64) {
                sql.push_bind(n);
            }

            fn push_text(sql: &mut ::sqlx::QueryBuilder<$db>, text: String) {
                sql.push_bind(text);
            }

            fn push_message_filters(
                sql: &mut ::sqlx::QueryBuilder<$db>,
                query: &::memgpt_core::store::RecallQuery,
            ) {
                push_filters(sql, query);
            }

            fn message_from_row(
                row: &$row,
            ) -> Result<::memgpt_core::message::Message, ::memgpt_core::store::StoreError> {
                message_from_row(row)
            }

            fn int_column(row: &$row, name: &str) -> Result<i64, ::memgpt_core::store::StoreError> {
                ::sqlx::Row::try_get(row, name)
                    .map_err(|e| $crate::codec::db(&format!("reading column {name}"), e))
            }

            fn passage_from_row(
                row: &$row,
                space: Option<&::memgpt_core::store::EmbeddingSpace>,
            ) -> Result<::memgpt_core::store::Passage, ::memgpt_core::store::StoreError> {
                passage_from_row(row, space)
            }

            async fn space(
                &self,
            ) -> Result<
                Option<::memgpt_core::store::EmbeddingSpace>,
                ::memgpt_core::store::StoreError,
            > {
                <$store>::space(self).await
            }

            async fn count(
                &self,
                mut sql: ::sqlx::QueryBuilder<$db>,
                what: &'static str,
            ) -> Result<usize, ::memgpt_core::store::StoreError> {
                let n: i64 = sql
                    .build_query_scalar()
                    .fetch_one(&self.pool)
                    .await
                    .map_err(|e| $crate::codec::db(what, e))?;
                Ok(usize::try_from(n).unwrap_or(0))
            }

            async fn rows(
                &self,
                mut sql: ::sqlx::QueryBuilder<$db>,
                what: &'static str,
            ) -> Result<Vec<$row>, ::memgpt_core::store::StoreError> {
                sql.build()
                    .fetch_all(&self.pool)
                    .await
                    .map_err(|e| $crate::codec::db(what, e))
            }
        }
    };
}
pub(crate) use impl_sql_dialect;

/// The query of an agent's latest [`WINDOW_NEIGHBOURS`] conversation turns, newest first,
/// with their `turn` numbers: what a commit reads (in its transaction) to continue the agent's
/// search documents ([`builder_from_latest_turns`]).
pub(crate) fn latest_turns<S: SqlDialect>(agent: AgentId) -> QueryBuilder<S::Db> {
    let mut sql = QueryBuilder::new(format!(
        "SELECT {}, m.turn FROM messages m WHERE m.agent_id = ",
        S::MESSAGE_COLUMNS
    ));
    S::push_agent(&mut sql, agent);
    sql.push(" AND m.turn IS NOT NULL ORDER BY m.turn DESC LIMIT ");
    S::push_int(&mut sql, WINDOW_NEIGHBOURS as i64);
    sql
}

/// A document builder continuing after the rows of [`latest_turns`].
pub(crate) fn builder_from_latest_turns<S: SqlDialect>(
    rows: &[<S::Db as Database>::Row],
) -> Result<DocumentBuilder, StoreError> {
    let next_turn = match rows.first() {
        Some(row) => S::int_column(row, "turn")?.max(0) as u64 + 1,
        None => 0,
    };
    let mut recent = rows
        .iter()
        .map(S::message_from_row)
        .collect::<Result<Vec<Message>, _>>()?;
    recent.reverse();
    Ok(DocumentBuilder::new(&recent, next_turn))
}

/// Rebuilding every message's search document when the analyzer changed: batch by batch in
/// append order, each agent's builder continued from its previous message, documents counted
/// per agent. A store reads each [`DocumentRebuild::next_batch`], turns the rows into
/// documents here, and writes them its own way (its full-text table, its statistics).
#[derive(Debug, Default)]
pub(crate) struct DocumentRebuild {
    builders: HashMap<AgentId, DocumentBuilder>,
    /// Documents and their terms, per agent, so far.
    pub(crate) totals: HashMap<AgentId, (i64, i64)>,
    /// The last message read.
    after: i64,
}

impl DocumentRebuild {
    /// The next `size` messages after the last one read, in append order.
    pub(crate) fn next_batch<S: SqlDialect>(&self, size: i64) -> QueryBuilder<S::Db> {
        let mut sql = QueryBuilder::new(format!(
            "SELECT m.seq AS rebuild_seq, {} FROM messages m WHERE m.seq > ",
            S::MESSAGE_COLUMNS
        ));
        S::push_int(&mut sql, self.after);
        sql.push(" ORDER BY m.seq LIMIT ");
        S::push_int(&mut sql, size);
        sql
    }

    /// The documents of a batch's messages: `(seq, agent, document)` in order. An empty batch
    /// is the end.
    pub(crate) fn documents<S: SqlDialect>(
        &mut self,
        rows: &[<S::Db as Database>::Row],
    ) -> Result<Vec<(i64, AgentId, MessageDocument)>, StoreError> {
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let seq = S::int_column(row, "rebuild_seq")?;
            let message = S::message_from_row(row)?;
            let document = self
                .builders
                .entry(message.agent_id)
                .or_insert_with(|| DocumentBuilder::new([], 0))
                .add(&message);
            let total = self.totals.entry(message.agent_id).or_default();
            total.0 += 1;
            total.1 += document.len() as i64;
            self.after = seq;
            out.push((seq, message.agent_id, document));
        }
        Ok(out)
    }
}

/// An agent's messages matching a recall query's filters, oldest first (ties: append order).
pub(crate) async fn list_messages<S: SqlDialect>(
    store: &S,
    agent: AgentId,
    query: &RecallQuery,
) -> Result<SearchPage<Message>, StoreError> {
    let mut count = QueryBuilder::new("SELECT count(*) FROM messages m WHERE m.agent_id = ");
    S::push_agent(&mut count, agent);
    S::push_message_filters(&mut count, query);
    let total = store.count(count, "listing recall storage").await?;
    listing(query.page, total, |limit, offset| async move {
        let mut sql = QueryBuilder::new(format!(
            "SELECT {} FROM messages m WHERE m.agent_id = ",
            S::MESSAGE_COLUMNS
        ));
        S::push_agent(&mut sql, agent);
        S::push_message_filters(&mut sql, query);
        sql.push(" ORDER BY m.created_at, m.seq LIMIT ");
        S::push_int(&mut sql, limit);
        sql.push(" OFFSET ");
        S::push_int(&mut sql, offset);
        let rows = store.rows(sql, "listing recall storage").await?;
        rows.iter().map(S::message_from_row).collect()
    })
    .await
}

/// How many passages an agent has.
pub(crate) async fn count_passages<S: SqlDialect>(
    store: &S,
    agent: AgentId,
) -> Result<usize, StoreError> {
    let mut sql = QueryBuilder::new("SELECT count(*) FROM passages WHERE agent_id = ");
    S::push_agent(&mut sql, agent);
    store.count(sql, "counting passages").await
}

/// An agent's passages in insertion order.
pub(crate) async fn list_passages<S: SqlDialect>(
    store: &S,
    agent: AgentId,
    page: Page,
) -> Result<SearchPage<Passage>, StoreError> {
    let total = count_passages(store, agent).await?;
    listing(page, total, |limit, offset| async move {
        let space = store.space().await?;
        let mut sql = QueryBuilder::new(format!(
            "SELECT {} FROM passages p WHERE p.agent_id = ",
            S::PASSAGE_COLUMNS
        ));
        S::push_agent(&mut sql, agent);
        sql.push(" ORDER BY p.seq LIMIT ");
        S::push_int(&mut sql, limit);
        sql.push(" OFFSET ");
        S::push_int(&mut sql, offset);
        let rows = store.rows(sql, "listing passages").await?;
        rows.iter()
            .map(|row| S::passage_from_row(row, space.as_ref()))
            .collect()
    })
    .await
}

/// Up to `limit` of an agent's passages without an embedding, oldest first.
pub(crate) async fn unembedded_passages<S: SqlDialect>(
    store: &S,
    agent: AgentId,
    limit: usize,
) -> Result<Vec<Passage>, StoreError> {
    let mut sql = QueryBuilder::new(format!(
        "SELECT {} FROM passages p WHERE p.agent_id = ",
        S::PASSAGE_COLUMNS
    ));
    S::push_agent(&mut sql, agent);
    sql.push(" AND p.embedding IS NULL ORDER BY p.seq LIMIT ");
    S::push_int(&mut sql, sql_int(limit));
    let rows = store.rows(sql, "listing unembedded passages").await?;
    rows.iter()
        .map(|row| S::passage_from_row(row, None))
        .collect()
}

/// `n` as an SQL integer (saturating: a huge page number from an LLM never wraps).
pub(crate) fn sql_int(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A page of a chronological listing: `total` items match, and `rows(limit, offset)` reads the
/// page's items in order. Nothing is read for a page past the end.
pub(crate) async fn listing<T, F, Fut>(
    page: Page,
    total: usize,
    rows: F,
) -> Result<SearchPage<T>, StoreError>
where
    F: FnOnce(i64, i64) -> Fut,
    Fut: Future<Output = Result<Vec<T>, StoreError>>,
{
    if page.offset() >= total {
        return Ok(SearchPage {
            hits: Vec::new(),
            page,
            total,
        });
    }
    let hits = rows(sql_int(page.size), sql_int(page.offset()))
        .await?
        .into_iter()
        .map(|item| Hit { item, score: 0.0 })
        .collect();
    Ok(SearchPage { hits, page, total })
}

/// A shared block's `block` column: its [`MemoryBlock`](memgpt_core::MemoryBlock) as JSON.
#[cfg(feature = "sqlite")]
pub(crate) fn block_json(block: &SharedBlock) -> Result<String, StoreError> {
    serde_json::to_string(&block.block).map_err(|e| crate::codec::db("encoding a shared block", e))
}

/// Shared blocks read back, in the order `ids` asked for them.
pub(crate) fn blocks_in_order(mut found: Vec<SharedBlock>, ids: &[BlockId]) -> Vec<SharedBlock> {
    found.sort_by_key(|b| ids.iter().position(|id| *id == b.id));
    found
}

/// A shared block from its columns, as both SQL stores keep them.
pub(crate) fn block_parts(
    id: uuid::Uuid,
    block: &str,
    version: i64,
    scope: Option<String>,
    created_at: chrono::DateTime<chrono::Utc>,
    updated_at: chrono::DateTime<chrono::Utc>,
    updated_by: Option<uuid::Uuid>,
) -> Result<SharedBlock, StoreError> {
    Ok(SharedBlock {
        id: BlockId::from_uuid(id),
        block: serde_json::from_str(block)
            .map_err(|e| crate::codec::corrupt(format!("shared block {id}: {e}")))?,
        version: version as u64,
        scope,
        created_at,
        updated_at,
        updated_by: updated_by.map(AgentId::from_uuid),
    })
}

/// Each agent's [`DocumentBuilder`] as its last commit in this process left it, so the next
/// commit need not read the agent's latest turns again. An entry is only used when the agent's
/// version and number of conversation turns in the database are still the ones it was left at
/// (another process's commit changes the version); it is taken out for each commit and put back
/// only after the commit succeeds.
#[derive(Debug, Default)]
pub(crate) struct BuilderCache(std::sync::Mutex<HashMap<AgentId, CachedBuilder>>);

/// A cached builder and the agent version it is current for.
#[derive(Debug)]
pub(crate) struct CachedBuilder {
    pub(crate) version: u64,
    pub(crate) builder: DocumentBuilder,
}

impl BuilderCache {
    /// Entries kept at most (each is an agent's last two turns, as terms); past it the cache
    /// starts over.
    const CAPACITY: usize = 4_096;

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<AgentId, CachedBuilder>> {
        // The map holds plain values: a panic elsewhere cannot leave one half-written.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes `agent`'s entry out.
    pub(crate) fn take(&self, agent: AgentId) -> Option<CachedBuilder> {
        self.lock().remove(&agent)
    }

    /// Keeps `builder` as `agent`'s, current at `version`.
    pub(crate) fn keep(&self, agent: AgentId, version: u64, builder: DocumentBuilder) {
        let mut map = self.lock();
        if map.len() >= Self::CAPACITY {
            map.clear();
        }
        map.insert(agent, CachedBuilder { version, builder });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn listings_stop_past_the_end_and_saturate() {
        let page = Page::new(usize::MAX, 5);
        let out: SearchPage<u8> = listing(page, 3, |_, _| async {
            panic!("a page past the end reads nothing")
        })
        .await
        .unwrap();
        assert_eq!((out.hits.len(), out.total), (0, 3));
        let out = listing(Page::new(1, 2), 5, |limit, offset| async move {
            Ok(vec![limit as u8, offset as u8])
        })
        .await
        .unwrap();
        assert_eq!(
            out.hits.iter().map(|h| h.item).collect::<Vec<_>>(),
            vec![2, 2]
        );
        assert_eq!(sql_int(usize::MAX), i64::MAX);
    }
}
