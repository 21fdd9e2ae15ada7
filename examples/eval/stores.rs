//! The stores a retrieval run can measure (`--store`): every composition users build from the
//! crate's features, each opened empty for every conversation.

use anyhow::{Context, Result, bail};
use memgpt::StoreConfig;
use memgpt::store::Storage;

/// A store composition under measurement.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EvalStore {
    /// The in-memory store (tests, `Storage::in_memory`).
    Memory,
    /// SQLite alone: FTS5 candidates, exact vectors (the crate's default features).
    Sqlite,
    /// SQLite with the tantivy and usearch indexes (`sqlite://DIR`, the `memgpt` command's).
    #[default]
    SqliteTantivyUsearch,
    /// PostgreSQL + pgvector (`MEMGPT_TEST_POSTGRES_URL`), in a schema of its own.
    Postgres,
}

impl EvalStore {
    /// Every store, in the order the tables list them.
    pub const ALL: [EvalStore; 4] = [
        EvalStore::Memory,
        EvalStore::Sqlite,
        EvalStore::SqliteTantivyUsearch,
        EvalStore::Postgres,
    ];

    /// Reads `--store`'s value.
    pub fn parse(name: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|s| s.name() == name)
            .with_context(|| {
                format!("--store {name}: use memory, sqlite, sqlite-tantivy-usearch or postgres")
            })
    }

    /// The name `--store` takes (and result files carry).
    pub fn name(self) -> &'static str {
        match self {
            EvalStore::Memory => "memory",
            EvalStore::Sqlite => "sqlite",
            EvalStore::SqliteTantivyUsearch => "sqlite-tantivy-usearch",
            EvalStore::Postgres => "postgres",
        }
    }

    /// What the report calls it.
    pub fn describe(self) -> &'static str {
        match self {
            EvalStore::Memory => "in memory",
            EvalStore::Sqlite => "SQLite + FTS5 + exact vectors",
            EvalStore::SqliteTantivyUsearch => "SQLite + tantivy + usearch",
            EvalStore::Postgres => "PostgreSQL + pgvector",
        }
    }

    /// An empty store (for SQLite in a temporary directory, kept until the guard drops; for
    /// PostgreSQL the schema `eval_retrieval`, emptied of agents).
    pub async fn open(self) -> Result<(Storage, Option<tempfile::TempDir>)> {
        let sqlite = |query: &str| -> Result<(String, Option<tempfile::TempDir>)> {
            let dir = tempfile::tempdir()?;
            Ok((
                format!("sqlite://{}{query}", dir.path().display()),
                Some(dir),
            ))
        };
        let (url, guard) = match self {
            EvalStore::Memory => return Ok((Storage::in_memory(), None)),
            EvalStore::Sqlite => sqlite("?recall=fts5&vectors=exact")?,
            EvalStore::SqliteTantivyUsearch => sqlite("?recall=tantivy&vectors=usearch")?,
            EvalStore::Postgres => {
                let Ok(base) = std::env::var("MEMGPT_TEST_POSTGRES_URL") else {
                    bail!("--store postgres needs MEMGPT_TEST_POSTGRES_URL (see .ci/postgres.sh)");
                };
                let separator = if base.contains('?') { '&' } else { '?' };
                (format!("{base}{separator}schema=eval_retrieval"), None)
            }
        };
        let config: StoreConfig = url.parse().with_context(|| format!("store URL {url}"))?;
        let storage = config
            .open()
            .await
            .with_context(|| format!("opening {url}"))?;
        // A run stopped half-way leaves its agent behind: start empty.
        for agent in storage.agents.list_agents().await? {
            storage.agents.delete_agent(agent.id).await?;
        }
        Ok((storage, guard))
    }
}
