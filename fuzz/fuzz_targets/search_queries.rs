//! Recall and archival query strings through every store: in memory, SQLite with FTS5, SQLite
//! with tantivy, and PostgreSQL (`MEMGPT_TEST_POSTGRES_URL`; required when `CI=true`, as for the
//! tests). Any text is a result page, never a panic or a query error leaking through.
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use memgpt_core::Agent;
use memgpt_core::ids::AgentId;
use memgpt_core::store::{ArchivalQuery, InMemoryStore, Page, RecallQuery, SearchMode, Storage};
use memgpt_core::testing::ScriptedProvider;

struct Fixture {
    stores: Vec<(Storage, AgentId)>,
    _dir: tempfile::TempDir,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temporary directory");
        let mut urls = vec![
            format!(
                "sqlite://{}?recall=fts5&vectors=exact",
                dir.path().join("fts5").display()
            ),
            format!(
                "sqlite://{}?recall=tantivy&vectors=exact",
                dir.path().join("tantivy").display()
            ),
        ];
        match std::env::var("MEMGPT_TEST_POSTGRES_URL") {
            Ok(base) => {
                let sep = if base.contains('?') { '&' } else { '?' };
                // One schema for every run: each run adds one agent to it.
                urls.push(format!("{base}{sep}schema=memgpt_fuzz_search_queries"));
            }
            Err(_) if std::env::var("CI").is_ok_and(|v| v == "true") => {
                panic!("CI=true: MEMGPT_TEST_POSTGRES_URL must name a PostgreSQL to fuzz")
            }
            Err(_) => eprintln!("MEMGPT_TEST_POSTGRES_URL is not set: PostgreSQL is not fuzzed"),
        }
        let stores = memgpt_fuzz::runtime().block_on(async {
            let mut storages = vec![Storage::from_store(Arc::new(InMemoryStore::new()))];
            for url in &urls {
                let config: memgpt_backends::StoreConfig = url.parse().expect("store URL");
                storages.push(config.open().await.expect("open store"));
            }
            let mut stores = Vec::new();
            for storage in storages {
                let mut agent = Agent::builder()
                    .provider(Arc::new(ScriptedProvider::new()))
                    .storage(storage.clone())
                    .build()
                    .await
                    .expect("agent");
                agent
                    .insert_archival(
                        "The user's sister moved to Lisbon last spring; \"quotes\" AND OR NOT * ^ - : ( )",
                        Default::default(),
                    )
                    .await
                    .expect("passage");
                stores.push((storage, agent.id()));
            }
            stores
        });
        Fixture {
            stores,
            _dir: dir,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let fixture = fixture();
    memgpt_fuzz::runtime().block_on(async {
        for (storage, agent) in &fixture.stores {
            let recall = storage
                .recall
                .search(*agent, &RecallQuery::text(text.as_ref(), Page::first(5)))
                .await;
            assert!(recall.is_ok(), "recall search failed: {recall:?}");
            let archival = storage
                .archival
                .search(
                    *agent,
                    &ArchivalQuery::new(text.as_ref(), SearchMode::Text, Page::first(5)),
                )
                .await;
            assert!(archival.is_ok(), "archival search failed: {archival:?}");
        }
    });
});
