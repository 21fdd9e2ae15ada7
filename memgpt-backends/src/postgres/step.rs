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
            .fetch_one(&self.pool)
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
