//! The embedded default: one data directory holding an SQLite database (WAL mode) and, with the
//! `tantivy` and `usearch` features, a full-text recall index and HNSW indexes of archival and
//! message embeddings.
//!
//! SQLite is the source of truth. Agent state, every message (with its search document and
//! embedding) and every passage (with its embedding) are written by one transaction per agent
//! step. The indexes are derived: before
//! each search (and after commits, once a few thousand rows have piled up) they catch up with
//! the rows they have not seen, tracked by a watermark. The same catch-up runs on open, which is
//! how they repair themselves after a crash between the SQLite commit and their own.
//!
//! One process at a time may open a data directory with a tantivy index (tantivy holds a
//! writer lock); SQLite alone may be shared by several processes.

mod agents;
mod archival;
mod audit;
mod batch;
mod blocks;
mod dialect;
mod documents;
mod meta;
mod queue;
mod recall;
#[cfg(feature = "tantivy")]
mod tantivy_archival;
#[cfg(feature = "tantivy")]
mod tantivy_index;
#[cfg(feature = "tantivy")]
mod tantivy_recall;
#[cfg(feature = "tantivy")]
mod tantivy_search;
mod url;
#[cfg(feature = "usearch")]
mod usearch_index;
mod write_tx;

pub use audit::IndexAudit;
#[cfg(feature = "tantivy")]
pub use tantivy_recall::TantivyRecall;
#[cfg(feature = "usearch")]
pub use usearch_index::{Quantization, UsearchIndexes, UsearchOptions};

use std::path::{Path, PathBuf};
use std::time::Duration;

use memgpt_core::store::{EmbeddingSpace, StoreError};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
#[cfg(any(feature = "tantivy", feature = "usearch"))]
use tracing::warn;

use crate::codec::db;

/// How recall (message) text search is served.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecallIndex {
    /// SQLite's FTS5, inside the database.
    #[default]
    Fts5,
    /// tantivy indexes next to the database: `recall.tantivy/` of the messages and
    /// `archival.tantivy/` of the passages (both text searches prune with block-max WAND).
    #[cfg(feature = "tantivy")]
    Tantivy,
}

/// How archival vector search is served.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub enum VectorIndex {
    /// An exact scan of the agent's embeddings in SQLite.
    #[default]
    Exact,
    /// usearch HNSW indexes in `archival.usearch/` (passages) and `recall.usearch/` (message
    /// embeddings) next to the database.
    #[cfg(feature = "usearch")]
    Usearch(usearch_index::UsearchOptions),
}

/// Where and how to open an [`SqliteStore`].
#[derive(Clone, Debug, PartialEq)]
pub struct SqliteOptions {
    /// The data directory (created if missing). The database is `memgpt.db` inside it.
    pub dir: PathBuf,
    /// Recall text search.
    pub recall: RecallIndex,
    /// Archival vector search.
    pub vectors: VectorIndex,
    /// `synchronous=FULL` (survives power loss) instead of `NORMAL` (survives process crashes,
    /// the default).
    pub full_sync: bool,
    /// Pool size (readers run in parallel; SQLite serialises writers).
    pub max_connections: u32,
    /// Opens the database for reading only, next to a process that writes it: no migration,
    /// no derived index (tantivy and usearch allow one process per directory; text search
    /// falls back to FTS5 and vector search to an exact scan), and every write refused.
    /// The directory must hold a store already.
    pub read_only: bool,
}

impl SqliteOptions {
    /// The given directory with FTS5 recall and exact vector search.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            recall: RecallIndex::default(),
            vectors: VectorIndex::default(),
            full_sync: false,
            max_connections: 8,
            read_only: false,
        }
    }

    /// The recommended embedded stack with the features compiled in: tantivy recall and usearch
    /// archival when available.
    pub fn recommended(dir: impl Into<PathBuf>) -> Self {
        #[allow(unused_mut)]
        let mut options = Self::new(dir);
        #[cfg(feature = "tantivy")]
        {
            options.recall = RecallIndex::Tantivy;
        }
        #[cfg(feature = "usearch")]
        {
            options.vectors = VectorIndex::Usearch(Default::default());
        }
        options
    }
}

/// Agent state, recall and archival storage in one SQLite database, with optional tantivy and
/// usearch indexes. Implements every storage seam; cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct SqliteStore {
    pool: SqlitePool,
    dir: PathBuf,
    #[cfg(feature = "tantivy")]
    tantivy: Option<tantivy_recall::TantivyRecall>,
    /// The tantivy index of passages (with `recall=tantivy`: both text indexes).
    #[cfg(feature = "tantivy")]
    tantivy_archival: Option<tantivy_archival::TantivyArchival>,
    #[cfg(feature = "usearch")]
    usearch: Option<usearch_index::UsearchIndexes>,
    /// HNSW indexes of the message embeddings (with `vectors=usearch`).
    #[cfg(feature = "usearch")]
    recall_vectors: Option<usearch_index::UsearchIndexes>,
    /// The store's embedding space as this process last read or fixed it (it changes only when
    /// [`AgentStore::clear_embeddings`](memgpt_core::store::AgentStore::clear_embeddings) forgets
    /// it, in this process: one process opens a data directory at a time).
    space: crate::sql::SpaceCache,
    /// Rows committed since the derived indexes last caught up.
    #[cfg_attr(not(any(feature = "tantivy", feature = "usearch")), allow(dead_code))]
    unindexed: std::sync::atomic::AtomicUsize,
    /// Each agent's search-document builder after its last commit in this process.
    builders: crate::sql::BuilderCache,
    /// Held by this process's write transactions, so its writers queue here in order instead
    /// of polling SQLite's lock (its busy handler sleeps up to 100 ms between tries).
    writer: tokio::sync::Mutex<()>,
}

/// The schema, in order. Each is applied once, in its own transaction.
const MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        "init",
        include_str!("../../migrations/sqlite/0001_init.sql"),
    ),
    (
        2,
        "embedded_passages",
        include_str!("../../migrations/sqlite/0002_embedded_passages.sql"),
    ),
    (
        3,
        "message_search",
        include_str!("../../migrations/sqlite/0003_message_search.sql"),
    ),
    (
        4,
        "message_windows",
        include_str!("../../migrations/sqlite/0004_message_windows.sql"),
    ),
    (
        5,
        "passage_statistics",
        include_str!("../../migrations/sqlite/0005_passage_statistics.sql"),
    ),
    (
        6,
        "passage_lifetimes",
        include_str!("../../migrations/sqlite/0006_passage_lifetimes.sql"),
    ),
    (
        7,
        "shared_blocks",
        include_str!("../../migrations/sqlite/0007_shared_blocks.sql"),
    ),
    (
        8,
        "queue_rows",
        include_str!("../../migrations/sqlite/0008_queue_rows.sql"),
    ),
    (
        9,
        "unembedded_passages",
        include_str!("../../migrations/sqlite/0009_unembedded_passages.sql"),
    ),
    (
        10,
        "agents_by_name",
        include_str!("../../migrations/sqlite/0010_agents_by_name.sql"),
    ),
    (
        11,
        "commit_guard",
        include_str!("../../migrations/sqlite/0011_commit_guard.sql"),
    ),
    (
        12,
        "sequences_never_reused",
        include_str!("../../migrations/sqlite/0012_sequences_never_reused.sql"),
    ),
];

/// Committed rows after which the derived indexes catch up at commit time instead of waiting
/// for the next search (bounds the work a search may find waiting).
const INDEX_LAG_LIMIT: usize = 2_000;

impl SqliteStore {
    /// Opens (creating if needed) the store in `options.dir`, applies pending migrations, and
    /// brings the derived indexes up to date with the database.
    pub async fn open(options: SqliteOptions) -> Result<Self, StoreError> {
        if options.read_only {
            return Self::open_read_only(options).await;
        }
        std::fs::create_dir_all(&options.dir).map_err(|e| {
            db(
                &format!("creating data directory {}", options.dir.display()),
                e,
            )
        })?;
        let connect = SqliteConnectOptions::new()
            .filename(options.dir.join("memgpt.db"))
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(if options.full_sync {
                SqliteSynchronous::Full
            } else {
                SqliteSynchronous::Normal
            })
            .busy_timeout(Duration::from_secs(30))
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(options.max_connections.max(1))
            // A connection to a local file cannot have been dropped by a server; the check
            // would cost every acquire a round trip to the connection's worker thread.
            .test_before_acquire(false)
            .connect_with(connect)
            .await
            .map_err(|e| db("opening the SQLite database", e))?;
        migrate(&pool).await?;
        documents::rebuild_if_stale::<Self>(&pool).await?;
        documents::count_passages_if_missing(&pool).await?;
        let store = Self {
            #[cfg(feature = "tantivy")]
            tantivy: match options.recall {
                RecallIndex::Tantivy => Some(
                    tantivy_recall::TantivyRecall::open(&options.dir.join("recall.tantivy"), &pool)
                        .await?,
                ),
                RecallIndex::Fts5 => None,
            },
            #[cfg(feature = "tantivy")]
            tantivy_archival: match options.recall {
                RecallIndex::Tantivy => Some(
                    tantivy_archival::TantivyArchival::open(
                        &options.dir.join("archival.tantivy"),
                        &pool,
                    )
                    .await?,
                ),
                RecallIndex::Fts5 => None,
            },
            #[cfg(feature = "usearch")]
            usearch: match &options.vectors {
                VectorIndex::Usearch(usearch_options) => Some(usearch_index::UsearchIndexes::open(
                    &options.dir.join("archival.usearch"),
                    usearch_index::VectorSource::Passages,
                    usearch_options.clone(),
                )?),
                VectorIndex::Exact => None,
            },
            #[cfg(feature = "usearch")]
            recall_vectors: match &options.vectors {
                VectorIndex::Usearch(usearch_options) => Some(usearch_index::UsearchIndexes::open(
                    &options.dir.join("recall.usearch"),
                    usearch_index::VectorSource::Messages,
                    usearch_options.clone(),
                )?),
                VectorIndex::Exact => None,
            },
            pool,
            dir: options.dir,
            unindexed: std::sync::atomic::AtomicUsize::new(0),
            builders: crate::sql::BuilderCache::default(),
            writer: tokio::sync::Mutex::new(()),
            space: crate::sql::SpaceCache::default(),
        };
        Ok(store)
    }

    /// [`SqliteStore::open`] with [`SqliteOptions::read_only`]: SQLite in WAL mode lets this
    /// process read while another writes.
    async fn open_read_only(options: SqliteOptions) -> Result<Self, StoreError> {
        let file = options.dir.join("memgpt.db");
        if !file.exists() {
            return Err(StoreError::Unsupported(format!(
                "reading {}: there is no store there yet",
                file.display()
            )));
        }
        let connect = SqliteConnectOptions::new()
            .filename(file)
            .read_only(true)
            .busy_timeout(Duration::from_secs(30))
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(options.max_connections.max(1))
            .test_before_acquire(false)
            .connect_with(connect)
            .await
            .map_err(|e| db("opening the SQLite database for reading", e))?;
        let applied: Option<i64> = sqlx::query_scalar("SELECT MAX(version) FROM memgpt_migrations")
            .fetch_one(&pool)
            .await
            .map_err(|e| db("reading applied migrations", e))?;
        let latest = MIGRATIONS.last().map_or(0, |m| m.0);
        if applied.unwrap_or(0) < latest {
            return Err(StoreError::Unsupported(format!(
                "reading a store at schema version {} (this program needs {latest}): open it \
                 once for writing to upgrade it",
                applied.unwrap_or(0)
            )));
        }
        Ok(Self {
            #[cfg(feature = "tantivy")]
            tantivy: None,
            #[cfg(feature = "tantivy")]
            tantivy_archival: None,
            #[cfg(feature = "usearch")]
            usearch: None,
            #[cfg(feature = "usearch")]
            recall_vectors: None,
            pool,
            dir: options.dir,
            unindexed: std::sync::atomic::AtomicUsize::new(0),
            builders: crate::sql::BuilderCache::default(),
            writer: tokio::sync::Mutex::new(()),
            space: crate::sql::SpaceCache::default(),
        })
    }

    /// Opens `dir` with the recommended stack ([`SqliteOptions::recommended`]).
    pub async fn open_dir(dir: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open(SqliteOptions::recommended(dir.as_ref())).await
    }

    /// The store's embedding space, once fixed; cached after the first read.
    pub(crate) async fn space(&self) -> Result<Option<EmbeddingSpace>, StoreError> {
        self.space
            .get_or_read(async {
                let mut conn = self
                    .pool
                    .acquire()
                    .await
                    .map_err(|e| db("reading store metadata", e))?;
                meta::embedding_space(&mut conn).await
            })
            .await
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The connection pool, for inspection and maintenance.
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// Saves the derived indexes to disk (they are also saved periodically, and rebuilt or
    /// caught up from the database on open, so this only shortens the next open).
    pub async fn checkpoint(&self) -> Result<(), StoreError> {
        #[cfg(feature = "usearch")]
        for indexes in [&self.usearch, &self.recall_vectors].into_iter().flatten() {
            indexes.save_all()?;
        }
        Ok(())
    }

    /// Removes a deleted agent from the derived indexes, after the database deleted its rows
    /// and moved from generation `generation - 1` to `generation`. Failures are logged: a
    /// tantivy index that missed it rebuilds on its next catch-up (it sees a generation it did
    /// not move to), and a usearch file of a deleted agent is never read again (sequence numbers
    /// are never given twice, and an agent id is not reused).
    async fn after_delete(&self, agent: memgpt_core::ids::AgentId, generation: i64) {
        self.builders.take(agent);
        #[cfg(feature = "tantivy")]
        if let Some(tantivy) = &self.tantivy
            && let Err(e) = tantivy
                .index
                .forget_agent(agent, generation - 1, generation)
                .await
        {
            warn!(error = %e, "the tantivy recall index could not forget a deleted agent; it rebuilds");
        }
        #[cfg(feature = "tantivy")]
        if let Some(archival) = &self.tantivy_archival
            && let Err(e) = archival
                .index
                .forget_agent(agent, generation - 1, generation)
                .await
        {
            warn!(error = %e, "the tantivy archival index could not forget a deleted agent; it rebuilds");
        }
        #[cfg(feature = "usearch")]
        for indexes in [&self.usearch, &self.recall_vectors].into_iter().flatten() {
            if let Err(e) = indexes.forget_agent(agent) {
                warn!(error = %e, "could not remove a deleted agent's usearch index");
            }
        }
        let _ = (agent, generation);
    }

    /// Counts `rows` just committed and lets the derived indexes catch up once enough have
    /// piled up. Searches catch up first anyway, so a step's commit stays one SQLite
    /// transaction (no index commit, no fsync) in the common case. Failures are logged: the
    /// database is the truth, and the next search or open retries.
    async fn after_commit(&self, agent: memgpt_core::ids::AgentId, rows: usize) {
        use std::sync::atomic::Ordering;
        #[cfg(feature = "usearch")]
        for indexes in [&self.usearch, &self.recall_vectors].into_iter().flatten() {
            indexes.mark_dirty(agent);
        }
        let pending = self.unindexed.fetch_add(rows, Ordering::Relaxed) + rows;
        if pending < INDEX_LAG_LIMIT {
            return;
        }
        self.unindexed.store(0, Ordering::Relaxed);
        #[cfg(feature = "tantivy")]
        if let Some(tantivy) = &self.tantivy
            && let Err(e) = tantivy.index.catch_up(&self.pool).await
        {
            warn!(error = %e, "the tantivy recall index could not catch up; it will retry");
        }
        #[cfg(feature = "tantivy")]
        if let Some(archival) = &self.tantivy_archival
            && let Err(e) = archival.index.catch_up(&self.pool).await
        {
            warn!(error = %e, "the tantivy archival index could not catch up; it will retry");
        }
        #[cfg(feature = "usearch")]
        if let Ok(Some(space)) = self.space().await {
            for indexes in [&self.usearch, &self.recall_vectors].into_iter().flatten() {
                if let Err(e) = indexes.catch_up(&self.pool, agent, space.dimension).await {
                    warn!(error = %e, "a usearch index could not catch up; it will retry");
                }
            }
        }
        let _ = agent;
    }
}

impl Drop for SqliteStore {
    fn drop(&mut self) {
        #[cfg(feature = "usearch")]
        for indexes in [&self.usearch, &self.recall_vectors].into_iter().flatten() {
            if let Err(e) = indexes.save_all() {
                warn!(error = %e, "could not save the usearch indexes on close; they will be caught up on open");
            }
        }
    }
}

async fn migrate(pool: &SqlitePool) -> Result<(), StoreError> {
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS memgpt_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, \
         applied_at INTEGER NOT NULL) STRICT",
    )
    .execute(pool)
    .await
    .map_err(|e| db("creating the migrations table", e))?;
    for &(version, name, sql) in MIGRATIONS {
        let mut tx =
            crate::sql::begin(pool, Some("BEGIN IMMEDIATE"), "starting a migration").await?;
        let applied: Option<i64> =
            sqlx::query_scalar("SELECT version FROM memgpt_migrations WHERE version = ?")
                .bind(version)
                .fetch_optional(&mut *tx)
                .await
                .map_err(|e| db("reading applied migrations", e))?;
        if applied.is_some() {
            continue;
        }
        sqlx::raw_sql(sql)
            .execute(&mut *tx)
            .await
            .map_err(|e| db(&format!("applying migration {version} ({name})"), e))?;
        sqlx::query("INSERT INTO memgpt_migrations (version, name, applied_at) VALUES (?, ?, ?)")
            .bind(version)
            .bind(name)
            .bind(chrono::Utc::now().timestamp_micros())
            .execute(&mut *tx)
            .await
            .map_err(|e| db("recording a migration", e))?;
        tx.commit()
            .await
            .map_err(|e| db("committing a migration", e))?;
    }
    Ok(())
}
