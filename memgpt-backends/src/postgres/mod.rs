//! PostgreSQL + pgvector: one database shared by several processes.
//!
//! Agent state, every message and every passage live in one schema (the `schema=` parameter of
//! the store URL, else the connection's current schema). One agent step is one transaction that
//! locks the agent's row, checks its version and writes everything; [`AgentStore::lock_agent`]
//! takes a session-level advisory lock so two processes never run the same agent's step at once.
//!
//! * Recall search: candidates from a generated `tsvector` (configuration `simple`) over each
//!   message's search document (memgpt-core's analysed terms), with a GIN index, and from
//!   pgvector HNSW over the message embeddings; memgpt-core ranks them.
//! * Archival vector search: pgvector. The `embedding` columns have no fixed dimension; the
//!   first embedding fixes the store's embedding space (model and dimension), and with it HNSW
//!   indexes over `embedding::vector(D)` with cosine distance, which queries use.
//! * Hybrid archival search: reciprocal-rank fusion
//!   ([`reciprocal_rank_fusion`](memgpt_core::retrieval::reciprocal_rank_fusion)) of both
//!   rankings.
//!
//! The schema is created by embedded migrations, applied under a transaction-level advisory lock
//! so processes opening the store at the same time do not race.
//!
//! [`AgentStore::lock_agent`]: memgpt_core::store::AgentStore::lock_agent

mod agents;
mod archival;
mod blocks;
mod dialect;
mod documents;
mod message_rows;
mod meta;
mod queue;
mod recall;
mod step;

use meta::meta;
use std::fmt;
use std::str::FromStr;

use memgpt_core::store::{EmbeddingSpace, StoreError};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{Connection, Executor, PgConnection};
use tracing::{debug, info};

use crate::codec::{corrupt, db};
use crate::url::{StoreUrlError, query_pairs};

/// Where and how to open a [`PgStore`].
///
/// ```
/// use memgpt_backends::PgOptions;
///
/// let options = PgOptions::new("postgres://me:secret@db.example/memgpt?sslmode=require&schema=tenant_a");
/// assert_eq!(options.url, "postgres://me:secret@db.example/memgpt?sslmode=require");
/// assert_eq!(options.schema.as_deref(), Some("tenant_a"));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct PgOptions {
    /// The connection URL, as sqlx reads it (`postgres://user:password@host:port/database?...`),
    /// without the `schema` parameter.
    pub url: String,
    /// The schema holding the store's tables (created if missing); `None` uses the connection's
    /// current schema (normally `public`).
    pub schema: Option<String>,
    /// Size of the pool that serves queries and commits, and the most connections of a second
    /// pool, connected as needed, for a step's usual one-statement commit (it holds as many
    /// as such commits ran at once): a store may hold up to twice this many connections, plus
    /// the leases'.
    pub max_connections: u32,
    /// Size of the separate pool of agent-lock connections: each
    /// [`lock_agent`](memgpt_core::store::AgentStore::lock_agent) lease holds one for the length
    /// of a step, so this is how many agents' steps one process can run at once (more wait).
    pub max_leases: u32,
    /// The smallest `hnsw.ef_search` of a vector search (the `ef_search=N` URL parameter;
    /// default 100): larger finds more of the true nearest neighbours, slower. Deep pages raise
    /// it to twice their depth, up to pgvector's maximum of 1,000.
    pub ef_search: usize,
}

impl PgOptions {
    /// Options for a store URL: its `schema=NAME` and `ef_search=N` query parameters (if any)
    /// become [`PgOptions::schema`] and [`PgOptions::ef_search`] (an `ef_search` outside 1-1000
    /// is ignored here; [`PgOptions::from_url`] rejects it), and the rest of the URL
    /// goes to sqlx.
    pub fn new(url: &str) -> Self {
        let url = url.trim();
        let (base, query) = match url.split_once('?') {
            Some((base, query)) => (base, query),
            None => (url, ""),
        };
        let mut schema = None;
        let mut ef_search = DEFAULT_EF_SEARCH;
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some(("schema", value)) => {
                    schema = Some(percent_decode(value)).filter(|s| !s.is_empty())
                }
                Some(("ef_search", value)) => {
                    if let Some(n) = parse_ef_search(value) {
                        ef_search = n;
                    }
                }
                _ => kept.push(pair),
            }
        }
        let url = if kept.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        Self {
            url,
            schema,
            max_connections: 10,
            max_leases: 16,
            ef_search,
        }
    }

    /// Options for a `postgres://` (or `postgresql://`) store URL, like [`PgOptions::new`] but
    /// rejecting an `ef_search` outside 1-1000.
    ///
    /// ```
    /// use memgpt_backends::PgOptions;
    ///
    /// assert_eq!(PgOptions::from_url("postgres://db/x?ef_search=40").unwrap().ef_search, 40);
    /// assert!(PgOptions::from_url("postgres://db/x?ef_search=0").is_err());
    /// ```
    pub fn from_url(url: &str) -> Result<Self, StoreUrlError> {
        let query = url.split_once('?').map_or("", |(_, q)| q);
        for (name, value) in query_pairs(query) {
            if name == "ef_search" && parse_ef_search(value).is_none() {
                return Err(StoreUrlError::invalid(
                    name,
                    value,
                    "an integer from 1 to 1000",
                ));
            }
        }
        Ok(Self::new(url))
    }

    /// The same options with the tables in `schema`.
    pub fn with_schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = Some(schema.into());
        self
    }
}

/// Hides the password.
impl fmt::Debug for PgOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgOptions")
            .field("url", &redacted(&self.url))
            .field("schema", &self.schema)
            .field("max_connections", &self.max_connections)
            .field("max_leases", &self.max_leases)
            .field("ef_search", &self.ef_search)
            .finish()
    }
}

/// `url` with the password of its user-info part replaced by `***`.
fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((user_info, host)) => match user_info.split_once(':') {
            Some((user, _password)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

/// Decodes `%XX` escapes (a malformed escape is kept as it is).
fn percent_decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(high), Some(low)) => {
                out.push((high * 16 + low) as u8);
                i += 3;
            }
            (b'+', _, _) => {
                out.push(b' ');
                i += 1;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// [`PgOptions::ef_search`] unless the URL says otherwise.
const DEFAULT_EF_SEARCH: usize = 100;

/// pgvector's largest `hnsw.ef_search` (iterative scans go on past it).
pub(crate) const MAX_EF_SEARCH: usize = 1_000;

/// An `ef_search` URL value pgvector accepts (1 to [`MAX_EF_SEARCH`]).
fn parse_ef_search(value: &str) -> Option<usize> {
    value
        .parse()
        .ok()
        .filter(|n| (1..=MAX_EF_SEARCH).contains(n))
}

/// Agent state, recall and archival storage in PostgreSQL with pgvector. Implements every
/// storage seam; cheap to share behind an `Arc`, and safe to open from several processes on the
/// same database and schema.
#[derive(Debug)]
pub struct PgStore {
    pool: PgPool,
    /// A step's usual commit (`step.rs`), on connections that let PostgreSQL reuse the
    /// statement's plan (`pool` plans every query for its arguments: see [`PgStore::open`]).
    steps: PgPool,
    /// Connections holding agent locks (session-level advisory locks), one per lease.
    locks: PgPool,
    schema: String,
    /// Known once the first embedding is committed; changes only when
    /// [`AgentStore::clear_embeddings`](memgpt_core::store::AgentStore::clear_embeddings) forgets
    /// it (processes sharing the store must be stopped for that: their handles keep the space
    /// they know).
    space: crate::sql::SpaceCache,
    /// [`PgOptions::ef_search`].
    ef_search: usize,
    /// Each agent's search-document builder as this process's last commit of it left it, for
    /// the next step's one-statement commit (`step.rs`).
    builders: crate::sql::BuilderCache,
}

/// The schema, in order; all pending ones are applied in one transaction.
const MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        "init",
        include_str!("../../migrations/postgres/0001_init.sql"),
    ),
    (
        2,
        "embedded_counts",
        include_str!("../../migrations/postgres/0002_embedded_counts.sql"),
    ),
    (
        3,
        "message_search",
        include_str!("../../migrations/postgres/0003_message_search.sql"),
    ),
    (
        4,
        "message_windows",
        include_str!("../../migrations/postgres/0004_message_windows.sql"),
    ),
    (
        5,
        "passage_statistics",
        include_str!("../../migrations/postgres/0005_passage_statistics.sql"),
    ),
    (
        6,
        "passage_lifetimes",
        include_str!("../../migrations/postgres/0006_passage_lifetimes.sql"),
    ),
    (
        7,
        "shared_blocks",
        include_str!("../../migrations/postgres/0007_shared_blocks.sql"),
    ),
    (
        8,
        "queue_rows",
        include_str!("../../migrations/postgres/0008_queue_rows.sql"),
    ),
    (
        9,
        "agents_by_name",
        include_str!("../../migrations/postgres/0009_agents_by_name.sql"),
    ),
];

/// The transaction-level advisory lock serialising schema creation and migrations (any store in
/// the database: creating schemas and extensions races too).
const MIGRATION_LOCK: i64 = 0x6d65_6d67_7074_0001; // "memgpt" 0 1

/// The transaction-level advisory lock under which a commit fixes the embedding space.
const SPACE_LOCK: i64 = 0x6d65_6d67_7074_0002;

impl PgStore {
    /// Connects, creates the schema and the pgvector extension if needed, and applies pending
    /// migrations.
    ///
    /// Creating the extension needs a role allowed to (a superuser on most servers); where it
    /// cannot, have an administrator run `CREATE EXTENSION vector` in the database once.
    pub async fn open(options: PgOptions) -> Result<Self, StoreError> {
        let connect = PgConnectOptions::from_str(&options.url)
            .map_err(|e| db("reading the PostgreSQL URL", e))?
            .application_name("memgpt");
        let (schema, search_path) = bootstrap(&connect, options.schema.as_deref()).await?;
        let set_search_path = format!("SET search_path TO {search_path}");
        // No ping when a connection leaves the pool: it would be a round trip before every
        // statement. A connection the server dropped fails its next statement, which reports
        // the error (nothing half-written: every write is one transaction) and is closed.
        let pool_options = |plan_cache_mode: &'static str| {
            let set_search_path = set_search_path.clone();
            PgPoolOptions::new()
                .max_connections(options.max_connections.max(1))
                .test_before_acquire(false)
                .after_connect(move |conn, _meta| {
                    let sql = set_search_path.clone();
                    Box::pin(async move {
                        conn.execute(sqlx::AssertSqlSafe(sql)).await?;
                        conn.execute(sqlx::AssertSqlSafe(format!(
                            "SET plan_cache_mode TO {plan_cache_mode}"
                        )))
                        .await?;
                        Ok(())
                    })
                })
        };
        // Custom plans always: every query binds its text-search query, vector and agent, and a
        // generic plan cannot judge their selectivity (it would scan an agent's whole history
        // instead of the GIN or HNSW index).
        let pool = pool_options("force_custom_plan")
            .connect_with(connect.clone())
            .await
            .map_err(|e| db("connecting to PostgreSQL", e))?;
        // A step's commit statement is the same every step and its plan does not depend on its
        // arguments (rows by key, one agent's queue): planning it anew took about a fifth of
        // the commit. PostgreSQL's default (`auto`) keeps a generic plan once it is no costlier
        // than the custom ones. Connected as commits need it: as many connections as commits
        // ran at once.
        let steps = pool_options("auto").connect_lazy_with(connect.clone());
        let locks = PgPoolOptions::new()
            .max_connections(options.max_leases.max(1))
            .connect_lazy_with(connect);
        info!(schema = %schema, "opened the PostgreSQL store");
        let store = Self {
            pool,
            steps,
            locks,
            schema,
            space: crate::sql::SpaceCache::default(),
            ef_search: options.ef_search.clamp(1, MAX_EF_SEARCH),
            builders: crate::sql::BuilderCache::default(),
        };
        store.space().await?;
        Ok(store)
    }

    /// Opens the store at a URL (see [`PgOptions::new`]).
    pub async fn open_url(url: &str) -> Result<Self, StoreError> {
        Self::open(PgOptions::new(url)).await
    }

    /// The connection pool (every connection's `search_path` starts with the store's schema),
    /// for inspection and maintenance.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Refreshes the planner's statistics of the store's tables. PostgreSQL's autovacuum does
    /// this within a minute or so of large changes; call it after a bulk load to get index plans
    /// right away (on an unanalysed table the planner may scan instead of using the GIN and
    /// HNSW indexes).
    pub async fn analyze(&self) -> Result<(), StoreError> {
        sqlx::query("ANALYZE messages, passages")
            .execute(&self.pool)
            .await
            .map_err(|e| db("analyzing the store's tables", e))?;
        Ok(())
    }

    /// The schema holding the store's tables.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// Closes every connection, waiting for those in use (and the leases held) to come back.
    pub async fn close(&self) {
        self.pool.close().await;
        self.steps.close().await;
        self.locks.close().await;
    }

    /// The store's embedding space if this handle already knows it.
    pub(crate) fn known_space(&self) -> Option<EmbeddingSpace> {
        self.space.get()
    }

    /// The store's embedding space, once fixed.
    pub(crate) async fn space(&self) -> Result<Option<EmbeddingSpace>, StoreError> {
        self.space
            .get_or_read(async {
                let mut conn = self
                    .pool
                    .acquire()
                    .await
                    .map_err(|e| db("reading store metadata", e))?;
                read_space(&mut conn).await
            })
            .await
    }

    /// Remembers the embedding space a committed transaction fixed or confirmed.
    pub(crate) fn remember_space(&self, space: EmbeddingSpace) {
        self.space.set(space);
    }

    /// Forgets the embedding space (after clearing every embedding).
    pub(crate) fn forget_space(&self) {
        self.space.clear();
    }
}

/// Creates the schema and the extension if needed and applies pending migrations, all in one
/// transaction under [`MIGRATION_LOCK`]. Returns the schema and the `search_path` value every
/// pooled connection uses (the schema, then pgvector's schema).
async fn bootstrap(
    connect: &PgConnectOptions,
    schema: Option<&str>,
) -> Result<(String, String), StoreError> {
    let mut conn = PgConnection::connect_with(connect)
        .await
        .map_err(|e| db("connecting to PostgreSQL", e))?;
    let result = set_up(&mut conn, schema).await;
    if let Err(e) = conn.close().await {
        debug!(error = %e, "closing the setup connection");
    }
    result
}

/// What [`bootstrap`] does, on its connection.
async fn set_up(
    conn: &mut PgConnection,
    schema: Option<&str>,
) -> Result<(String, String), StoreError> {
    let mut tx = conn
        .begin()
        .await
        .map_err(|e| db("starting the schema setup", e))?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(MIGRATION_LOCK)
        .execute(&mut *tx)
        .await
        .map_err(|e| db("waiting for the schema setup lock", e))?;
    let schema = match schema {
        Some(schema) => {
            let sql = format!("CREATE SCHEMA IF NOT EXISTS {}", quote_ident(schema));
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .execute(&mut *tx)
                .await
                .map_err(|e| db(&format!("creating the schema {schema}"), e))?;
            schema.to_owned()
        }
        None => {
            let current: Option<String> = sqlx::query_scalar("SELECT current_schema()")
                .fetch_one(&mut *tx)
                .await
                .map_err(|e| db("reading the current schema", e))?;
            current.ok_or_else(|| {
                StoreError::InvalidQuery(
                    "the connection has no current schema: add ?schema=NAME to the store URL"
                        .into(),
                )
            })?
        }
    };
    let vector_schema = match vector_schema(&mut tx).await? {
        Some(found) => found,
        None => {
            info!("creating the pgvector extension");
            sqlx::query("CREATE EXTENSION IF NOT EXISTS vector")
                .execute(&mut *tx)
                .await
                .map_err(|e| db(NO_EXTENSION, e))?;
            vector_schema(&mut tx)
                .await?
                .ok_or_else(|| corrupt("the vector extension vanished"))?
        }
    };
    let search_path = if vector_schema == schema {
        quote_ident(&schema)
    } else {
        format!("{}, {}", quote_ident(&schema), quote_ident(&vector_schema))
    };
    let sql = format!("SET LOCAL search_path TO {search_path}");
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .execute(&mut *tx)
        .await
        .map_err(|e| db("setting the search path", e))?;
    migrate(&mut tx).await?;
    documents::rebuild_if_stale::<PgStore>(&mut tx).await?;
    if let Some(space) = read_space(&mut tx).await? {
        PgStore::create_vector_indexes(&mut tx, space.dimension).await?;
    }
    tx.commit()
        .await
        .map_err(|e| db("committing the schema setup", e))?;
    Ok((schema, search_path))
}

/// Why `CREATE EXTENSION vector` may fail, and what to do.
const NO_EXTENSION: &str = "creating the pgvector extension (it must be installed on the server, \
    and creating it needs a privileged role: have an administrator run `CREATE EXTENSION vector` \
    in the database once)";

/// The schema the `vector` extension is installed in, if it is.
async fn vector_schema(conn: &mut PgConnection) -> Result<Option<String>, StoreError> {
    sqlx::query_scalar(
        "SELECT n.nspname::text FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace \
         WHERE e.extname = 'vector'",
    )
    .fetch_optional(&mut *conn)
    .await
    .map_err(|e| db("looking for the pgvector extension", e))
}

/// Applies the migrations not applied yet (the caller holds [`MIGRATION_LOCK`]).
async fn migrate(conn: &mut PgConnection) -> Result<(), StoreError> {
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS memgpt_migrations (version bigint PRIMARY KEY, name text NOT NULL, \
         applied_at timestamptz NOT NULL DEFAULT now())",
    )
    .execute(&mut *conn)
    .await
    .map_err(|e| db("creating the migrations table", e))?;
    for &(version, name, sql) in MIGRATIONS {
        let applied: Option<i64> =
            sqlx::query_scalar("SELECT version FROM memgpt_migrations WHERE version = $1")
                .bind(version)
                .fetch_optional(&mut *conn)
                .await
                .map_err(|e| db("reading applied migrations", e))?;
        if applied.is_some() {
            continue;
        }
        info!(version, name, "applying a PostgreSQL migration");
        sqlx::raw_sql(sql)
            .execute(&mut *conn)
            .await
            .map_err(|e| db(&format!("applying migration {version} ({name})"), e))?;
        sqlx::query("INSERT INTO memgpt_migrations (version, name) VALUES ($1, $2)")
            .bind(version)
            .bind(name)
            .execute(&mut *conn)
            .await
            .map_err(|e| db("recording a migration", e))?;
    }
    Ok(())
}

/// The embedding space recorded in `memgpt_meta`, if any.
async fn read_space(conn: &mut PgConnection) -> Result<Option<EmbeddingSpace>, StoreError> {
    let model = meta(&mut *conn, "embedding_model").await?;
    let dimension = meta(&mut *conn, "embedding_dimension").await?;
    crate::sql::space_from_meta(model, dimension)
}

/// `name` as a quoted SQL identifier.
pub(crate) fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The advisory-lock key of an agent in a schema: FNV-1a (stable across processes and builds)
/// over both.
pub(crate) fn agent_lock_key(schema: &str, agent: &uuid::Uuid) -> i64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in b"memgpt-agent\0"
        .iter()
        .chain(schema.as_bytes())
        .chain(b"\0")
        .chain(agent.as_bytes())
    {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_take_the_schema_out_of_the_url() {
        let o = PgOptions::new("postgres://u:p@h:5432/db?schema=s1");
        assert_eq!(o.url, "postgres://u:p@h:5432/db");
        assert_eq!(o.schema.as_deref(), Some("s1"));
        let o = PgOptions::new(
            "postgresql://h/db?sslmode=disable&schema=my%20schema&application_name=x",
        );
        assert_eq!(
            o.url,
            "postgresql://h/db?sslmode=disable&application_name=x"
        );
        assert_eq!(o.schema.as_deref(), Some("my schema"));
        let o = PgOptions::new("postgres://h/db");
        assert_eq!((o.url.as_str(), o.schema), ("postgres://h/db", None));
        assert_eq!(PgOptions::new("postgres://h/db?schema=").schema, None);
    }

    #[test]
    fn options_take_ef_search_out_of_the_url() {
        let o = PgOptions::new("postgres://h/db?ef_search=400&sslmode=disable");
        assert_eq!(
            (o.url.as_str(), o.ef_search),
            ("postgres://h/db?sslmode=disable", 400)
        );
        assert_eq!(
            PgOptions::new("postgres://h/db").ef_search,
            DEFAULT_EF_SEARCH
        );
        for bad in ["0", "1001", "many"] {
            let o = PgOptions::new(&format!("postgres://h/db?ef_search={bad}"));
            assert_eq!(
                (o.url.as_str(), o.ef_search),
                ("postgres://h/db", DEFAULT_EF_SEARCH)
            );
        }
    }

    #[test]
    fn debug_hides_the_password() {
        let shown = format!(
            "{:?}",
            PgOptions::new("postgres://me:hunter2@h:1/db?schema=s")
        );
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("me:***@h:1/db"), "{shown}");
    }

    #[test]
    fn identifiers_and_queries_are_quoted() {
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
        assert_eq!(
            documents::terms_tsquery(&memgpt_core::retrieval::query_terms(
                "what's \"Mochi\" (my cat) eating?"
            ))
            .as_deref(),
            Some("'cat' | 'eat' | 'mochi' | 's'")
        );
        assert_eq!(
            documents::terms_tsquery(&memgpt_core::retrieval::query_terms("(( ::: \"\" ))")),
            None
        );
        assert_eq!(
            documents::terms_tsquery(&["x".repeat(3_000), "kiwi".into(), "it's".into()]).as_deref(),
            Some("'kiwi' | 'it''s'")
        );
        assert_eq!(
            documents::passage_search_text("Mail bob@example.com re: v1.2!"),
            "mail bob exampl com re v1 2"
        );
    }

    #[test]
    fn lock_keys_are_stable_and_distinct() {
        let a = uuid::Uuid::from_u128(1);
        let b = uuid::Uuid::from_u128(2);
        assert_eq!(agent_lock_key("s", &a), agent_lock_key("s", &a));
        assert_ne!(agent_lock_key("s", &a), agent_lock_key("s", &b));
        assert_ne!(agent_lock_key("s", &a), agent_lock_key("t", &a));
    }
}
