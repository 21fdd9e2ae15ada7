//! Data written under an older schema reads back the same after the store migrates it.

use memgpt_core::ids::{AgentId, MessageId};
use memgpt_core::store::{AgentState, Commit, Storage};

use memgpt_backends::conformance::StoreUnderTest;
use memgpt_backends::conformance::fixtures::*;

/// Two agents with queues (one emptied) as the store keeps them today.
async fn agents_with_queues(s: &Storage) -> Vec<AgentState> {
    let mut a = new_agent(s, "a").await;
    let commit = a.next_commit(corpus(a.id, 5, 1), vec![]);
    s.agents.commit(&commit).await.unwrap();
    let mut b = new_agent(s, "b").await;
    b.version += 1;
    b.fifo = vec![MessageId::new()];
    s.agents.commit(&Commit::state(b.clone())).await.unwrap();
    b.version += 1;
    b.fifo.clear();
    s.agents.commit(&Commit::state(b.clone())).await.unwrap();
    vec![a, b]
}

/// The statements that take a store of schema version 8 back to version 7, where each
/// agent's queue was the `fifo` array of its state's JSON (as sqlx encodes uuids: text).
fn back_to_version_7(agents: &[AgentState], table: &dyn Fn(&str) -> String) -> Vec<String> {
    let mut sql: Vec<String> = agents
        .iter()
        .map(|a| {
            // The whole state, `fifo` included, as version 7 wrote it.
            let state = serde_json::to_string(a).unwrap().replace('\'', "''");
            format!(
                "UPDATE {} SET state = '{state}' WHERE name = '{}'",
                table("agents"),
                a.name
            )
        })
        .collect();
    sql.push(format!("DROP TABLE {}", table("agent_queue")));
    sql.push(format!(
        "DELETE FROM {} WHERE version = 8",
        table("memgpt_migrations")
    ));
    sql
}

async fn assert_migrated(s: &Storage, agents: &[AgentState], what: &str) {
    for a in agents {
        assert_eq!(
            s.agents.load_agent(a.id).await.unwrap().as_ref(),
            Some(a),
            "{what}"
        );
    }
    assert_eq!(s.agents.list_agents().await.unwrap(), agents, "{what}");
    assert!(s.agents.load_agent(AgentId::new()).await.unwrap().is_none());
}

/// A SQLite store of schema version 7 opens with every queue in order.
#[cfg(feature = "sqlite")]
#[memgpt_test_harness::test]
async fn a_version_7_sqlite_store_keeps_its_queues() {
    use sqlx::sqlite::{SqliteConnectOptions, SqlitePool};
    let dir = tempfile::tempdir().unwrap();
    let url = format!(
        "sqlite://{}?recall=fts5&vectors=exact",
        dir.path().display()
    );
    let store = StoreUnderTest::from_url("sqlite", url);
    let s = store.open().await;
    let agents = agents_with_queues(&s).await;
    drop(s);
    let pool = SqlitePool::connect_with(
        SqliteConnectOptions::new().filename(dir.path().join("memgpt.db")),
    )
    .await
    .unwrap();
    for sql in back_to_version_7(&agents, &|t| t.to_owned()) {
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&pool)
            .await
            .unwrap();
    }
    let rows: Vec<String> = sqlx::query_scalar("SELECT state FROM agents")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert!(rows.iter().all(|r| r.contains("\"fifo\"")));
    pool.close().await;

    let s = store.open().await;
    assert_migrated(&s, &agents, "sqlite").await;
    drop(s);
    let pool = SqlitePool::connect_with(
        SqliteConnectOptions::new().filename(dir.path().join("memgpt.db")),
    )
    .await
    .unwrap();
    let rows: Vec<String> = sqlx::query_scalar("SELECT state FROM agents")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert!(rows.iter().all(|r| !r.contains("\"fifo\"")), "{rows:?}");
}

/// A PostgreSQL store of schema version 7 opens with every queue in order.
#[cfg(feature = "postgres")]
#[memgpt_test_harness::test]
async fn a_version_7_postgres_store_keeps_its_queues() {
    let store = super::postgres();
    let s = store.open().await;
    let agents = agents_with_queues(&s).await;
    drop(s);
    let url = store.url().unwrap();
    let (base, schema) = url.split_once("schema=").unwrap();
    let pool = sqlx::PgPool::connect(base.trim_end_matches(['?', '&']))
        .await
        .unwrap();
    for sql in back_to_version_7(&agents, &|t| format!("\"{schema}\".{t}")) {
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&pool)
            .await
            .unwrap();
    }
    let s = store.open().await;
    assert_migrated(&s, &agents, "postgres").await;
    let with_fifo: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT count(*) FROM \"{schema}\".agents WHERE state ? 'fifo'"
    )))
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(with_fifo, 0);
}
