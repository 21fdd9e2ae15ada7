//! A step's usual commit in one statement, one round trip without `BEGIN` or `COMMIT`: the
//! version check is the `UPDATE` of the agent's row, and every other write of the statement
//! happens only if that row was updated (data-modifying `WITH` queries see one snapshot and
//! commit or fail together).
//!
//! "Usual" is a commit of messages, a queue change and the new state (what a step without
//! archival writes or embeddings commits), of an agent this store committed before: the
//! messages' search documents continue the [`DocumentBuilder`] that commit left, and the
//! statement also checks that nothing was committed since (the agent's version and number of
//! conversation turns). Anything else goes through the transaction in `agents.rs`.

use memgpt_core::backend::DocumentBuilder;
use memgpt_core::store::{Commit, QueueChange, StateRecord, StoreError};
use sqlx::Row;
use sqlx::types::Json;
use tracing::debug;

use super::PgStore;
use super::message_rows::{MessageRows, insert_message_rows};
use super::queue::{queue_change_ctes, uuids};
use crate::codec::db;
use crate::sql::CachedBuilder;

/// The statement: message rows at `$1..$11`, then the agent (`$12`), its new name, version,
/// state and update time (`$13..$16`), the version and turn count the commit expects
/// (`$17`, `$18`), the documents and terms added (`$19`, `$20`), and the queue's removed and
/// appended message ids (`$21`, `$22`). Returns 1 if it wrote, 0 if the check failed.
const WRITE_STEP: &str = concat!(
    "WITH state AS ( \
        UPDATE agents SET name = $13, version = $14, state = $15, updated_at = $16 \
        WHERE id = $12 AND version = $17 \
          AND coalesce((SELECT max(m.turn) + 1 FROM messages m \
                        WHERE m.agent_id = $12 AND m.turn IS NOT NULL), 0) = $18 \
        RETURNING id), \
     appended AS (",
    insert_message_rows!("EXISTS (SELECT 1 FROM state)"),
    "), \
     counted AS ( \
        INSERT INTO recall_statistics (agent_id, documents, terms) \
        SELECT id, $19, $20 FROM state WHERE $19 <> 0 OR $20 <> 0 \
        ON CONFLICT (agent_id) DO UPDATE SET documents = recall_statistics.documents + EXCLUDED.documents, \
                                             terms = recall_statistics.terms + EXCLUDED.terms), \
     ",
    queue_change_ctes!("$12", "$21", "$22", "EXISTS (SELECT 1 FROM state)"),
    " SELECT count(*) FROM state"
);

/// The queue change of a step's usual commit (messages, a queue change and the state only);
/// `None` for any other commit.
pub(super) fn usual_step(commit: &Commit) -> Option<&QueueChange> {
    let usual = !commit.attachments_changed
        && commit.message_embeddings.is_empty()
        && commit.passages.is_empty()
        && commit.deleted_passages.is_empty()
        && commit.retired_passages.is_empty();
    commit.queue.as_ref().filter(|_| usual)
}

impl PgStore {
    /// Writes a usual step's commit ([`usual_step`]: `queue` is its change) in one statement,
    /// its documents continuing `cached`. Returns the builder the commit ends with, or `None` (nothing
    /// written) when `cached` is not current for the commit's base version or the database
    /// shows another commit since: the caller then commits the careful way, which also reports
    /// a version conflict or a missing agent as such.
    pub(super) async fn write_step(
        &self,
        commit: &Commit,
        queue: &QueueChange,
        cached: CachedBuilder,
    ) -> Result<Option<DocumentBuilder>, StoreError> {
        let base = commit.state.version.saturating_sub(1);
        if cached.version != base || commit.state.version == 0 {
            return Ok(None);
        }
        let CachedBuilder { mut builder, .. } = cached;
        let turns = builder.next_turn();
        let rows = MessageRows::new(&commit.messages, &mut builder)?;
        let (documents, terms) = (rows.len() as i64, rows.terms);
        let state = &commit.state;
        let query = rows
            .bind(sqlx::query(WRITE_STEP))
            .bind(state.id.as_uuid())
            .bind(&state.name)
            .bind(state.version as i64)
            .bind(Json(StateRecord::of(state)))
            .bind(state.updated_at)
            .bind(base as i64)
            .bind(turns as i64)
            .bind(documents)
            .bind(terms)
            .bind(uuids(&queue.removed))
            .bind(uuids(&queue.appended));
        memgpt_core::failpoint::hit("commit.before");
        let written: i64 = query
            .fetch_one(&self.steps)
            .await
            .and_then(|row| row.try_get(0))
            .map_err(|e| db("committing a step", e))?;
        if written == 0 {
            debug!(agent = %state.id, "committed since this store's last commit of the agent");
            return Ok(None);
        }
        memgpt_core::failpoint::hit("commit.after");
        Ok(Some(builder))
    }
}

#[cfg(all(test, feature = "conformance"))]
mod tests {
    use memgpt_core::ids::AgentId;
    use memgpt_core::store::{AgentStore, Page, RecallQuery, RecallStore};

    use super::super::PgOptions;
    use super::*;
    use crate::conformance::fixtures::{state, t0, user};

    /// How many generic and custom plans the statements with parameters of `pool`'s one
    /// connection got that begin with `prefix` (`pg_prepared_statements` is per session; a
    /// statement without parameters has one plan, generic).
    async fn plans(pool: &sqlx::PgPool, prefix: &str) -> (i64, i64) {
        sqlx::query_as(
            "SELECT coalesce(sum(generic_plans), 0)::int8, coalesce(sum(custom_plans), 0)::int8 \
             FROM pg_prepared_statements \
             WHERE statement LIKE $1 || '%' AND cardinality(parameter_types) > 0",
        )
        .bind(prefix)
        .fetch_one(pool)
        .await
        .unwrap()
    }

    /// A step's usual commit runs on connections where PostgreSQL keeps a generic plan once it
    /// is no costlier (the statement is planned once, not every step), while searches stay on
    /// connections that plan every query for its arguments.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "needs PostgreSQL + pgvector: set MEMGPT_TEST_POSTGRES_URL (.ci/postgres.sh), and run with --ignored (.ci/run does)"]
    async fn step_commits_reuse_a_plan_and_searches_do_not() {
        let base = std::env::var("MEMGPT_TEST_POSTGRES_URL")
            .expect("set MEMGPT_TEST_POSTGRES_URL to a database with pgvector");
        let schema = format!("memgpt_plans_{}", uuid::Uuid::now_v7().simple());
        let separator = if base.contains('?') { '&' } else { '?' };
        let mut options = PgOptions::new(&format!("{base}{separator}schema={schema}"));
        // One connection per pool: the plans counted are the ones the commits and searches got.
        options.max_connections = 1;
        let store = PgStore::open(options).await.unwrap();
        let mut agent = state(AgentId::new(), "plans");
        store.create_agent(&agent).await.unwrap();
        for step in 0..12 {
            let messages: Vec<_> = (0..3)
                .map(|i| {
                    user(
                        agent.id,
                        &format!("step {step} message {i} about kiwis"),
                        t0(),
                    )
                })
                .collect();
            // A full context: from the second step on, the three oldest leave as three arrive.
            let before = agent.fifo.clone();
            agent.version += 1;
            agent.fifo.extend(messages.iter().map(|m| m.id));
            if step > 0 {
                agent.fifo.drain(..3);
            }
            let commit = Commit {
                state: agent.clone(),
                messages,
                message_embeddings: Vec::new(),
                passages: Vec::new(),
                deleted_passages: Vec::new(),
                retired_passages: Vec::new(),
                attachments_changed: false,
                queue: QueueChange::between(&before, &agent.fifo),
            };
            store.commit(&commit).await.unwrap();
            let query = RecallQuery::text("kiwis", Page::first(5));
            store.search(agent.id, &query).await.unwrap();
        }
        let (generic, custom) = plans(&store.steps, "WITH state AS").await;
        assert!(
            generic > 0,
            "{generic} generic, {custom} custom plans of the step's commit"
        );
        let (generic, custom) = plans(&store.pool, "").await;
        assert_eq!(
            generic, 0,
            "{generic} generic, {custom} custom plans of the searches"
        );
        assert!(custom > 0);
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP SCHEMA \"{schema}\" CASCADE"
        )))
        .execute(&store.pool)
        .await
        .unwrap();
        store.close().await;
    }
}
