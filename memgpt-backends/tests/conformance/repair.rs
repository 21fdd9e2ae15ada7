//! The derived indexes (tantivy recall, usearch archival) repair themselves from SQLite.

use memgpt_backends::StoreConfig;
use memgpt_core::ids::AgentId;
use memgpt_core::store::{ArchivalQuery, Page, RecallQuery, SearchMode, Storage};

use memgpt_backends::conformance::fixtures::*;

async fn open(dir: &std::path::Path, params: &str) -> Storage {
    let config: StoreConfig = format!("sqlite://{}{params}", dir.display())
        .parse()
        .expect("store URL");
    config.open().await.expect("open store")
}

async fn assert_found(s: &Storage, agent: memgpt_core::ids::AgentId, word: &str, what: &str) {
    let recall = s
        .recall
        .search(agent, &RecallQuery::text(word, Page::first(5)))
        .await
        .unwrap();
    assert!(
        recall.hits[0].item.text.contains(word),
        "{what}: recall finds {word}: {recall:?}"
    );
    let text = format!("passage about {word}");
    let q = ArchivalQuery {
        text: text.clone(),
        embedding: Some(embed(&text)),
        mode: SearchMode::Vector,
        page: Page::first(1),
        tags: Vec::new(),
        range: Default::default(),
        validity: Default::default(),
    };
    let hits = s.archival.search(agent, &q).await.unwrap();
    assert_eq!(
        hits.hits[0].item.text, text,
        "{what}: archival finds {word}"
    );
}

#[memgpt_test_harness::test]
async fn indexes_behind_the_database_catch_up_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let agent = {
        // Indexes built, then writes they never see (as if the process died between the SQLite
        // commit and the index commits).
        let s = open(dir.path(), "").await;
        let mut a = new_agent(&s, "a").await;
        s.agents
            .commit(&a.next_commit(
                vec![user(a.id, "first walrus", t0())],
                vec![passage(a.id, "passage about walrus", t0())],
            ))
            .await
            .unwrap();
        drop(s);
        let s = open(dir.path(), "?recall=fts5&vectors=exact").await;
        a.version = s.agents.agent_version(a.id).await.unwrap().unwrap();
        s.agents
            .commit(&a.next_commit(
                vec![user(a.id, "later narwhal", t0())],
                vec![passage(a.id, "passage about narwhal", t0())],
            ))
            .await
            .unwrap();
        a.id
    };
    let s = open(dir.path(), "").await;
    assert_found(&s, agent, "walrus", "old data").await;
    assert_found(
        &s,
        agent,
        "narwhal",
        "data written behind the indexes' back",
    )
    .await;
}

#[memgpt_test_harness::test]
async fn missing_or_corrupt_indexes_are_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let agent = {
        let s = open(dir.path(), "").await;
        let mut a = new_agent(&s, "a").await;
        s.agents
            .commit(&a.next_commit(
                vec![user(a.id, "the puffin", t0())],
                vec![passage(a.id, "passage about puffin", t0())],
            ))
            .await
            .unwrap();
        a.id
    };
    // Deleted recall index, corrupted archival index.
    std::fs::remove_dir_all(dir.path().join("recall.tantivy")).unwrap();
    for entry in std::fs::read_dir(dir.path().join("archival.usearch")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "usearch") {
            std::fs::write(&path, b"not an index").unwrap();
        }
    }
    let s = open(dir.path(), "").await;
    assert_found(&s, agent, "puffin", "rebuilt indexes").await;

    // A deleted agent disappears from the indexes, and others survive it.
    let mut b = new_agent(&s, "b").await;
    s.agents
        .commit(&b.next_commit(
            vec![user(b.id, "the puffin and the gannet", t0())],
            vec![passage(b.id, "passage about gannet", t0())],
        ))
        .await
        .unwrap();
    assert!(s.agents.delete_agent(agent).await.unwrap());
    assert_eq!(
        s.recall
            .search(agent, &RecallQuery::text("puffin", Page::first(5)))
            .await
            .unwrap()
            .total,
        0
    );
    assert_eq!(
        s.recall
            .search(b.id, &RecallQuery::text("puffin", Page::first(5)))
            .await
            .unwrap()
            .total,
        1
    );
    drop(s);
    let s = open(dir.path(), "").await;
    assert_eq!(
        s.recall
            .search(b.id, &RecallQuery::text("puffin", Page::first(5)))
            .await
            .unwrap()
            .total,
        1,
        "after reopen"
    );
    assert_found(&s, b.id, "gannet", "the surviving agent").await;
}

/// Searches `agent`'s passages for a few of their own texts; each must come back first.
async fn assert_each_finds_itself(s: &Storage, agent: AgentId, texts: &[String], what: &str) {
    for text in texts.iter().step_by(37) {
        let q = ArchivalQuery {
            text: text.clone(),
            embedding: Some(embed(text)),
            mode: SearchMode::Vector,
            page: Page::first(3),
            tags: Vec::new(),
            range: Default::default(),
            validity: Default::default(),
        };
        let page = s.archival.search(agent, &q).await.unwrap();
        assert_eq!(page.total, texts.len(), "{what}: every passage indexed");
        assert_eq!(&page.hits[0].item.text, text, "{what}: {text} finds itself");
    }
}

#[memgpt_test_harness::test]
async fn every_quantization_indexes_persists_and_rebuilds() {
    for quantization in ["f32", "f16", "bf16", "i8"] {
        let dir = tempfile::tempdir().unwrap();
        // The graph is walked (no full scan), so what persists is the HNSW index itself.
        let params =
            format!("?recall=fts5&vectors=usearch&full_scan_kb=0&quantization={quantization}");
        let texts: Vec<String> = (0..300)
            .map(|i| format!("passage about creature{i} number{}", i * 7))
            .collect();
        let agent = {
            let s = open(dir.path(), &params).await;
            let mut a = new_agent(&s, "a").await;
            let passages = texts.iter().map(|t| passage(a.id, t, t0())).collect();
            s.agents
                .commit(&a.next_commit(vec![], passages))
                .await
                .unwrap();
            assert_each_finds_itself(&s, a.id, &texts, quantization).await;
            a.id
        };
        // Closing saved the index with its quantization recorded beside it.
        let sidecar = std::fs::read_dir(dir.path().join("archival.usearch"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|e| e == "json"))
            .expect("a saved index");
        let sidecar: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(sidecar).unwrap()).unwrap();
        assert_eq!(sidecar["quantization"], quantization);
        let s = open(dir.path(), &params).await;
        assert_each_finds_itself(&s, agent, &texts, &format!("{quantization} reopened")).await;
        drop(s);
        // Another quantization cannot use the saved file: it rebuilds from SQLite.
        let other = if quantization == "f32" { "i8" } else { "f32" };
        let s = open(
            dir.path(),
            &format!("?recall=fts5&vectors=usearch&full_scan_kb=0&quantization={other}"),
        )
        .await;
        assert_each_finds_itself(&s, agent, &texts, &format!("{quantization} → {other}")).await;
    }
}

/// A data directory written before hybrid search (schema version 2: unstemmed FTS tables, no
/// documents, no message embeddings) opens with its history searchable the new way, every
/// conversation message listed for embedding, and its passage tags indexed.
#[memgpt_test_harness::test]
async fn a_version_2_store_is_migrated_and_its_documents_built() {
    use sqlx::sqlite::{SqliteConnectOptions, SqlitePool};
    let dir = tempfile::tempdir().unwrap();
    let a = state(AgentId::new(), "old");
    let (question, reply) = (
        user(a.id, "Did you go to the charity race?", t0()),
        memgpt_core::message::Message::new(
            a.id,
            memgpt_core::message::MessageKind::Assistant,
            "Yes, last Saturday!",
            t0() + chrono::Duration::minutes(1),
        ),
    );
    let mut tagged = passage(a.id, "Paintings of sunsets", t0());
    tagged
        .metadata
        .insert("tags".into(), serde_json::json!(["art"]));
    {
        let pool = SqlitePool::connect_with(
            SqliteConnectOptions::new()
                .filename(dir.path().join("memgpt.db"))
                .create_if_missing(true),
        )
        .await
        .unwrap();
        sqlx::raw_sql(
            "CREATE TABLE memgpt_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT",
        )
        .execute(&pool)
        .await
        .unwrap();
        for (version, sql) in [
            (1, include_str!("../../migrations/sqlite/0001_init.sql")),
            (
                2,
                include_str!("../../migrations/sqlite/0002_embedded_passages.sql"),
            ),
        ] {
            sqlx::raw_sql(sql).execute(&pool).await.unwrap();
            sqlx::query("INSERT INTO memgpt_migrations VALUES (?, 'old', 0)")
                .bind(version)
                .execute(&pool)
                .await
                .unwrap();
        }
        sqlx::query("INSERT INTO agents (id, name, version, state, created_at, updated_at) VALUES (?, 'old', 0, ?, 0, 0)")
            .bind(a.id.as_uuid())
            .bind(serde_json::to_string(&a).unwrap())
            .execute(&pool)
            .await
            .unwrap();
        for m in [&question, &reply] {
            sqlx::query("INSERT INTO messages (id, agent_id, kind, text, created_at) VALUES (?, ?, ?, ?, ?)")
                .bind(m.id.as_uuid())
                .bind(a.id.as_uuid())
                .bind(m.kind.as_str())
                .bind(&m.text)
                .bind(m.created_at.timestamp_micros())
                .execute(&pool)
                .await
                .unwrap();
        }
        sqlx::query("INSERT INTO passages (id, agent_id, text, metadata, created_at) VALUES (?, ?, ?, ?, ?)")
            .bind(tagged.id.as_uuid())
            .bind(a.id.as_uuid())
            .bind(&tagged.text)
            .bind(serde_json::to_string(&tagged.metadata).unwrap())
            .bind(tagged.created_at.timestamp_micros())
            .execute(&pool)
            .await
            .unwrap();
        pool.close().await;
    }
    // FTS5 first (the migration and the document rebuild), then tantivy over the result.
    for params in ["?recall=fts5&vectors=exact", ""] {
        let s = open(dir.path(), params).await;
        // "races" finds the question, and the reply through it (stemmed, with its turn before).
        let found = s
            .recall
            .search(a.id, &RecallQuery::text("races", Page::first(5)))
            .await
            .unwrap();
        let texts: Vec<&str> = found.hits.iter().map(|h| h.item.text.as_str()).collect();
        assert_eq!(texts.len(), 2, "{params}: {texts:?}");
        assert!(
            texts.contains(&"Yes, last Saturday!"),
            "{params}: {texts:?}"
        );
        assert_eq!(
            s.recall.unembedded_messages(a.id, 10).await.unwrap().len(),
            2
        );
        let q = ArchivalQuery {
            tags: vec!["art".into()],
            ..ArchivalQuery::new("painting", SearchMode::Text, Page::first(5))
        };
        let hits = s.archival.search(a.id, &q).await.unwrap();
        assert_eq!(hits.total, 1, "{params}: stemmed and tagged passage found");
    }
    // New commits continue the agent's turns.
    let s = open(dir.path(), "").await;
    let mut current = s.agents.load_agent(a.id).await.unwrap().unwrap();
    s.agents
        .commit(&current.next_commit(
            vec![user(
                a.id,
                "Which charity?",
                t0() + chrono::Duration::minutes(2),
            )],
            vec![],
        ))
        .await
        .unwrap();
    let found = s
        .recall
        .search(a.id, &RecallQuery::text("saturday", Page::first(5)))
        .await
        .unwrap();
    assert_eq!(found.total, 2, "the new turn's document holds the reply");
}

/// A data directory written before archival statistics (schema version 4) opens with every
/// passage counted, so archival search ranks its old passages as a new store would.
#[memgpt_test_harness::test]
async fn a_version_4_store_counts_its_passages_on_open() {
    use sqlx::sqlite::{SqliteConnectOptions, SqlitePool};
    let dir = tempfile::tempdir().unwrap();
    let texts = ["tea in the kitchen", "green tea", "a garden ladder"];
    let s = open(dir.path(), "?recall=fts5&vectors=exact").await;
    let mut a = new_agent(&s, "old").await;
    let passages = texts.iter().map(|t| passage(a.id, t, t0())).collect();
    s.agents
        .commit(&a.next_commit(vec![], passages))
        .await
        .unwrap();
    let terms = memgpt_core::retrieval::query_terms("tea kitchen");
    let filter = ArchivalQuery::new("tea kitchen", SearchMode::Text, Page::first(5));
    let before = s
        .archival
        .text_candidates(a.id, &terms, &filter, 10)
        .await
        .unwrap();
    assert_eq!(before.statistics.documents, 3);
    drop(s);
    {
        let pool = SqlitePool::connect_with(
            SqliteConnectOptions::new().filename(dir.path().join("memgpt.db")),
        )
        .await
        .unwrap();
        sqlx::raw_sql(
            "DROP TABLE archival_statistics; DROP TABLE passage_terms_vocab; \
             DELETE FROM memgpt_migrations WHERE version = 5; \
             DELETE FROM memgpt_meta WHERE key = 'passage_statistics';",
        )
        .execute(&pool)
        .await
        .unwrap();
        pool.close().await;
    }
    let s = open(dir.path(), "?recall=fts5&vectors=exact").await;
    let after = s
        .archival
        .text_candidates(a.id, &terms, &filter, 10)
        .await
        .unwrap();
    assert_eq!(
        after, before,
        "the upgraded store counts what the new one did"
    );
}
