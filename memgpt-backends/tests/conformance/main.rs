//! One conformance suite, run against every storage backend this build includes.
//!
//! The cases are the public kit in `memgpt_backends::conformance` (the same one an outside store
//! author runs); the in-memory reference is both a backend under test and the oracle the others
//! are compared with. What the kit cannot offer lives here: the SIGKILL crash test (it spawns
//! this binary as a child process), the self-repair of the derived indexes, and the PostgreSQL
//! leases.
//!
//! PostgreSQL runs when `MEMGPT_TEST_POSTGRES_URL` is set; without it the Postgres tests are
//! reported ignored, with the reason, except under `CI=true`, where a missing URL fails them.
//! The binary's harness is `memgpt-test-harness` (libtest's command line and report): the kit's
//! cases are trials built at run time for every stack, the rest are registered functions.

mod crash;
#[cfg(feature = "postgres")]
mod leases;
mod migrations;
mod model;
#[cfg(all(feature = "tantivy", feature = "usearch"))]
mod repair;

use memgpt_backends::conformance::StoreUnderTest;

/// A SQLite store in a fresh temporary directory, opened from its URL with these parameters.
#[cfg(feature = "sqlite")]
fn sqlite(name: &'static str, params: &'static str) -> StoreUnderTest {
    let dir = tempfile::tempdir().expect("temporary directory");
    let url = format!("sqlite://{}{params}", dir.path().display());
    StoreUnderTest::from_url(name, url).keep(dir)
}

/// The database at `MEMGPT_TEST_POSTGRES_URL`; without it the test is reported ignored (under
/// `CI=true` it fails).
#[cfg(feature = "postgres")]
fn postgres_base() -> String {
    match std::env::var("MEMGPT_TEST_POSTGRES_URL") {
        Ok(base) => base,
        Err(_) => memgpt_test_harness::skip(
            "needs PostgreSQL + pgvector: set MEMGPT_TEST_POSTGRES_URL (.ci/postgres.sh start; .ci/postgres.sh url)",
        ),
    }
}

/// PostgreSQL in a fresh schema of the database at `base`, dropped with the store under test.
#[cfg(feature = "postgres")]
fn postgres_in_fresh_schema(base: &str) -> StoreUnderTest {
    let schema = format!("memgpt_test_{}", uuid::Uuid::now_v7().simple());
    let separator = if base.contains('?') { '&' } else { '?' };
    StoreUnderTest::from_url("postgres", format!("{base}{separator}schema={schema}")).keep(
        DroppedSchema {
            base: base.to_owned(),
            schema,
        },
    )
}

/// PostgreSQL in a fresh schema of the database at `MEMGPT_TEST_POSTGRES_URL` (see
/// [`postgres_base`]).
#[cfg(feature = "postgres")]
fn postgres() -> StoreUnderTest {
    postgres_in_fresh_schema(&postgres_base())
}

/// Drops a test's schema when the test is done with it.
#[cfg(feature = "postgres")]
struct DroppedSchema {
    base: String,
    schema: String,
}

#[cfg(feature = "postgres")]
impl Drop for DroppedSchema {
    fn drop(&mut self) {
        let (base, schema) = (self.base.clone(), self.schema.clone());
        // A thread of its own: the store under test may be dropped inside a runtime.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            runtime.block_on(async {
                let pool = sqlx::PgPool::connect(&base).await.ok()?;
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"
                )))
                .execute(&pool)
                .await
                .ok()?;
                pool.close().await;
                Some(())
            })
        })
        .join();
        if !matches!(dropped, Ok(Some(()))) {
            eprintln!("could not drop the test schema {}", self.schema);
        }
    }
}

/// A store stack the kit's cases run on: its module in the test names, how to open a fresh
/// one, and whether it is persistent (then it also runs the persistence case and the crash
/// campaign).
struct Stack {
    module: &'static str,
    open: fn() -> StoreUnderTest,
    persistent: bool,
}

/// Every stack this build includes.
fn stacks() -> Vec<Stack> {
    #[allow(unused_mut)]
    let mut stacks = vec![Stack {
        module: "memory",
        open: StoreUnderTest::in_memory,
        persistent: false,
    }];
    #[cfg(feature = "sqlite")]
    stacks.push(Stack {
        module: "sqlite_fts5_exact",
        open: || sqlite("sqlite (FTS5, exact)", "?recall=fts5&vectors=exact"),
        persistent: true,
    });
    #[cfg(feature = "tantivy")]
    stacks.push(Stack {
        module: "sqlite_tantivy_exact",
        open: || sqlite("sqlite + tantivy", "?recall=tantivy&vectors=exact"),
        persistent: true,
    });
    #[cfg(feature = "usearch")]
    stacks.push(Stack {
        module: "sqlite_fts5_usearch",
        open: || sqlite("sqlite + usearch", "?recall=fts5&vectors=usearch"),
        persistent: true,
    });
    #[cfg(all(feature = "tantivy", feature = "usearch"))]
    stacks.push(Stack {
        module: "sqlite_tantivy_usearch",
        open: || {
            sqlite(
                "sqlite + tantivy + usearch",
                "?recall=tantivy&vectors=usearch&save_every=8",
            )
        },
        persistent: true,
    });
    #[cfg(feature = "postgres")]
    stacks.push(Stack {
        module: "postgres",
        open: postgres,
        persistent: true,
    });
    stacks
}

/// The kit's cases on every stack (and the crash campaign on the persistent ones), as trials
/// beside the tests registered with `#[memgpt_test_harness::test]`.
fn main() {
    use memgpt_backends::conformance::cases::{ALL_CASES, CaseFn, PERSISTENT_CASES};
    use memgpt_test_harness::{Runtime, TestFuture, async_trial};

    let mut trials = Vec::new();
    for stack in stacks() {
        let persistent: &[(&str, CaseFn)] = if stack.persistent {
            PERSISTENT_CASES
        } else {
            &[]
        };
        for &(name, case) in ALL_CASES.iter().chain(persistent) {
            let open = stack.open;
            trials.push(async_trial(
                format!("{}::{name}", stack.module),
                Runtime::MultiThread(2),
                move || -> TestFuture {
                    Box::pin(async move {
                        let store = open();
                        case(&store).await;
                        Ok(())
                    })
                },
            ));
        }
        if stack.persistent {
            let open = stack.open;
            trials.push(async_trial(
                format!(
                    "{}::crash_campaign_loses_nothing_acknowledged",
                    stack.module
                ),
                Runtime::MultiThread(2),
                move || -> TestFuture {
                    Box::pin(async move {
                        let store = open();
                        let url = store.url().expect("a persistent store has a URL");
                        crash::run(store.name(), url).await;
                        Ok(())
                    })
                },
            ));
        }
    }
    memgpt_test_harness::main_with(trials)
}

/// What only stores with a real cross-process agent lock can show.
#[cfg(feature = "postgres")]
mod postgres_leases {
    use super::*;

    #[memgpt_test_harness::test(flavor = "multi_thread", worker_threads = 2)]
    async fn leases_are_exclusive_and_freed_on_drop() {
        leases::leases_are_exclusive_and_freed_on_drop(&postgres()).await;
    }

    #[memgpt_test_harness::test(flavor = "multi_thread", worker_threads = 2)]
    async fn leases_do_not_starve_commits() {
        leases::leases_do_not_starve_commits(&postgres()).await;
    }
}

/// A PostgreSQL store whose documents were built by another analyzer rebuilds them on open:
/// recall and archival search find and rank the same, with the same statistics.
#[cfg(feature = "postgres")]
mod postgres_documents {
    use memgpt_backends::conformance::fixtures::*;
    use memgpt_core::retrieval::query_terms;
    use memgpt_core::store::{ArchivalQuery, Page, RecallQuery, SearchMode};

    use super::*;

    #[memgpt_test_harness::test(flavor = "multi_thread", worker_threads = 2)]
    async fn documents_are_rebuilt_when_the_analyzer_changes() {
        let store = postgres();
        let s = store.open().await;
        let mut a = new_agent(&s, "a").await;
        let messages = corpus(a.id, 30, 4);
        let passages = (0..12)
            .map(|i| passage(a.id, &format!("kiwi orchard note {i}"), t0()))
            .collect();
        s.agents
            .commit(&a.next_commit(messages, passages))
            .await
            .unwrap();
        let recall = RecallQuery::text("kiwi", Page::first(10));
        let terms = query_terms("kiwi orchard");
        let archival = ArchivalQuery::new("kiwi orchard", SearchMode::Text, Page::first(10));
        let before = (
            s.recall.search(a.id, &recall).await.unwrap(),
            s.archival.search(a.id, &archival).await.unwrap(),
            s.recall
                .text_candidates(a.id, &terms, &recall, 100)
                .await
                .unwrap(),
            s.archival
                .text_candidates(a.id, &terms, &archival, 100)
                .await
                .unwrap(),
        );
        drop(s);

        // Mark the documents stale, as a newer analyzer would find them.
        let url = store.url().unwrap();
        let (base, schema) = url.split_once("schema=").unwrap();
        let pool = sqlx::PgPool::connect(base.trim_end_matches(['?', '&']))
            .await
            .unwrap();
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE \"{schema}\".memgpt_meta SET value = 'an-older-analyzer' WHERE key = 'analyzer'"
        )))
        .execute(&pool)
        .await
        .unwrap();
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE \"{schema}\".messages SET search_text = '', document_length = 0"
        )))
        .execute(&pool)
        .await
        .unwrap();
        pool.close().await;

        let s = store.open().await;
        let after = (
            s.recall.search(a.id, &recall).await.unwrap(),
            s.archival.search(a.id, &archival).await.unwrap(),
            s.recall
                .text_candidates(a.id, &terms, &recall, 100)
                .await
                .unwrap(),
            s.archival
                .text_candidates(a.id, &terms, &archival, 100)
                .await
                .unwrap(),
        );
        assert_eq!(after, before);
        assert!(before.0.total > 0 && before.1.total == 12);
    }
}

/// The entry point of crash-test child processes (a no-op unless spawned as one).
#[memgpt_test_harness::test]
fn crash_child_entry() {
    crash::child_main();
}

/// The kit fails a store that breaks the contract: here one that lists agents newest first.
mod a_broken_store_fails {
    use std::sync::Arc;

    use async_trait::async_trait;
    use memgpt_backends::conformance::{StoreUnderTest, block_on, cases};
    use memgpt_backends::{InMemoryStore, Storage};
    use memgpt_core::ids::AgentId;
    use memgpt_core::store::{
        AgentLease, AgentState, AgentStore, Commit, EmbeddingSpace, MessageEmbedding, StoreError,
    };

    #[derive(Debug)]
    struct NewestFirst(Arc<InMemoryStore>);

    #[async_trait]
    impl AgentStore for NewestFirst {
        async fn create_agent(&self, state: &AgentState) -> Result<(), StoreError> {
            self.0.create_agent(state).await
        }
        async fn load_agent(&self, id: AgentId) -> Result<Option<AgentState>, StoreError> {
            self.0.load_agent(id).await
        }
        async fn list_agents(&self) -> Result<Vec<AgentState>, StoreError> {
            let mut agents = self.0.list_agents().await?;
            agents.reverse();
            Ok(agents)
        }
        async fn delete_agent(&self, id: AgentId) -> Result<bool, StoreError> {
            self.0.delete_agent(id).await
        }
        async fn commit(&self, commit: &Commit) -> Result<(), StoreError> {
            self.0.commit(commit).await
        }
        async fn store_message_embeddings(
            &self,
            agent: AgentId,
            embeddings: &[MessageEmbedding],
        ) -> Result<(), StoreError> {
            self.0.store_message_embeddings(agent, embeddings).await
        }
        async fn embedding_space(&self) -> Result<Option<EmbeddingSpace>, StoreError> {
            self.0.embedding_space().await
        }
        async fn agent_version(&self, id: AgentId) -> Result<Option<u64>, StoreError> {
            self.0.agent_version(id).await
        }
        async fn lock_agent(&self, id: AgentId) -> Result<Box<dyn AgentLease>, StoreError> {
            self.0.lock_agent(id).await
        }
        async fn create_agent_with(&self, commit: &Commit) -> Result<(), StoreError> {
            self.0.create_agent_with(commit).await
        }
    }

    fn newest_first() -> StoreUnderTest {
        let inner = Arc::new(InMemoryStore::new());
        let storage = Storage {
            agents: Arc::new(NewestFirst(inner.clone())),
            recall: inner.clone(),
            archival: inner.clone(),
            blocks: inner,
        };
        StoreUnderTest::new("newest first", move || {
            let storage = storage.clone();
            async move { storage }
        })
    }

    #[memgpt_test_harness::test]
    fn the_lifecycle_case_catches_it() {
        let caught = std::panic::catch_unwind(|| {
            block_on(cases::agents_lifecycle(&newest_first()));
        });
        let message = caught
            .err()
            .and_then(|p| p.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        assert!(
            message.contains("newest first: oldest first"),
            "the case did not fail the broken store: {message:?}"
        );
    }

    #[memgpt_test_harness::test]
    fn cases_it_does_not_touch_still_pass() {
        block_on(cases::recall_text_search_and_pagination(&newest_first()));
    }
}
