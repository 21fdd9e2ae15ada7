//! One conformance suite, run against every storage backend this build includes.
//!
//! Each backend gets a module with the same tests (see `suite.rs`); the in-memory reference is
//! both a backend under test and the oracle the others are compared with. Persistent backends
//! additionally get the reopen and SIGKILL crash tests (`crash.rs`).
//!
//! PostgreSQL runs when `MEMGPT_TEST_POSTGRES_URL` is set; without it the Postgres tests say
//! loudly that they were skipped, except under `CI=true`, where a missing URL fails them.

mod crash;
mod fixtures;
mod hybrid;
#[cfg(feature = "postgres")]
mod leases;
#[cfg(all(feature = "tantivy", feature = "usearch"))]
mod repair;
mod suite;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use memgpt_backends::{InMemoryStore, Storage};
use tempfile::TempDir;

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Opens a backend, possibly again (to test persistence).
pub struct Backend {
    /// For messages.
    pub name: &'static str,
    /// Whether data survives `reopen`.
    pub persistent: bool,
    /// A store URL a child process can open (persistent backends).
    pub url: Option<String>,
    open: Box<dyn Fn() -> BoxFuture<'static, Storage> + Send + Sync>,
    _dir: Option<TempDir>,
}

impl Backend {
    /// A fresh handle on the backend's data.
    pub async fn open(&self) -> Storage {
        (self.open)().await
    }

    pub fn memory() -> Self {
        let storage = Storage::from_store(Arc::new(InMemoryStore::new()));
        Self {
            name: "memory",
            persistent: false,
            url: None,
            open: Box::new(move || {
                let storage = storage.clone();
                Box::pin(async move { storage })
            }),
            _dir: None,
        }
    }

    /// A backend opened from a store URL built for a fresh temporary directory.
    pub fn sqlite(name: &'static str, params: &'static str) -> Self {
        let dir = tempfile::tempdir().expect("temporary directory");
        let url = format!("sqlite://{}{params}", dir.path().display());
        let open_url = url.clone();
        Self {
            name,
            persistent: true,
            url: Some(url),
            open: Box::new(move || {
                let url = open_url.clone();
                Box::pin(async move {
                    let config: memgpt_backends::StoreConfig = url.parse().expect("store URL");
                    config.open().await.expect("open store")
                })
            }),
            _dir: Some(dir),
        }
    }

    /// PostgreSQL in a fresh schema of the database at `MEMGPT_TEST_POSTGRES_URL`, or `None`
    /// (after saying so) when it is not set outside CI.
    #[cfg(feature = "postgres")]
    pub fn postgres() -> Option<Self> {
        let Ok(base) = std::env::var("MEMGPT_TEST_POSTGRES_URL") else {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!(
                    "CI=true but MEMGPT_TEST_POSTGRES_URL is not set: the Postgres conformance tests must run in CI"
                );
            }
            eprintln!(
                "SKIPPED: PostgreSQL conformance tests (set MEMGPT_TEST_POSTGRES_URL to run them)"
            );
            return None;
        };
        let schema = format!("memgpt_test_{}", uuid_like());
        let separator = if base.contains('?') { '&' } else { '?' };
        let url = format!("{base}{separator}schema={schema}");
        let open_url = url.clone();
        Some(Self {
            name: "postgres",
            persistent: true,
            url: Some(url),
            open: Box::new(move || {
                let url = open_url.clone();
                Box::pin(async move {
                    let config: memgpt_backends::StoreConfig = url.parse().expect("store URL");
                    config.open().await.expect("open store")
                })
            }),
            _dir: None,
        })
    }
}

#[cfg(feature = "postgres")]
fn uuid_like() -> String {
    use std::time::{SystemTime, UNIX_EPOCH};
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{:x}{:x}", nanos, std::process::id())
}

/// One module of tests per backend.
macro_rules! conformance {
    ($module:ident, $backend:expr) => {
        mod $module {
            use super::*;

            fn backend() -> Option<Backend> {
                $backend
            }

            macro_rules! case {
                ($test:ident) => {
                    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                    async fn $test() {
                        if let Some(backend) = backend() {
                            suite::$test(&backend).await;
                        }
                    }
                };
            }

            case!(agents_lifecycle);
            case!(commits_are_atomic_and_versioned);
            case!(recall_text_search_and_pagination);
            case!(recall_date_ranges_and_kinds);
            case!(unicode_and_long_texts);
            case!(hostile_queries_never_error);
            case!(archival_insert_search_delete);
            case!(archival_hybrid_and_text);
            case!(embedding_space_is_enforced);
            case!(persistence_across_reopen);
            case!(concurrent_commits);
            case!(agrees_with_the_reference);
            case!(crash_mid_step_loses_nothing_committed);

            macro_rules! hybrid_case {
                ($test:ident) => {
                    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                    async fn $test() {
                        if let Some(backend) = backend() {
                            hybrid::$test(&backend).await;
                        }
                    }
                };
            }

            hybrid_case!(hybrid_recall_agrees_with_the_reference);
            hybrid_case!(message_embeddings_are_checked_and_backfilled);
            hybrid_case!(extreme_pages_are_safe);
            hybrid_case!(archival_filters_by_tag_and_date);
        }
    };
}

conformance!(memory, Some(Backend::memory()));
#[cfg(feature = "sqlite")]
conformance!(
    sqlite_fts5_exact,
    Some(Backend::sqlite(
        "sqlite (FTS5, exact)",
        "?recall=fts5&vectors=exact"
    ))
);
#[cfg(feature = "tantivy")]
conformance!(
    sqlite_tantivy_exact,
    Some(Backend::sqlite(
        "sqlite + tantivy",
        "?recall=tantivy&vectors=exact"
    ))
);
#[cfg(feature = "usearch")]
conformance!(
    sqlite_fts5_usearch,
    Some(Backend::sqlite(
        "sqlite + usearch",
        "?recall=fts5&vectors=usearch"
    ))
);
#[cfg(all(feature = "tantivy", feature = "usearch"))]
conformance!(
    sqlite_tantivy_usearch,
    Some(Backend::sqlite("sqlite + tantivy + usearch", ""))
);
#[cfg(feature = "postgres")]
conformance!(postgres, Backend::postgres());

/// What only stores with a real cross-process agent lock can show.
#[cfg(feature = "postgres")]
mod postgres_leases {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn leases_are_exclusive_and_freed_on_drop() {
        if let Some(backend) = Backend::postgres() {
            leases::leases_are_exclusive_and_freed_on_drop(&backend).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn leases_do_not_starve_commits() {
        if let Some(backend) = Backend::postgres() {
            leases::leases_do_not_starve_commits(&backend).await;
        }
    }
}

/// The entry point of crash-test child processes (a no-op unless spawned as one).
#[test]
fn crash_child_entry() {
    crash::child_main();
}
