//! The FIFO queue's rows (`agent_queue`, migration 8): read back into the state, changed by
//! each commit in what the step changed ([`QueueChange`]), so a step writes a few rows
//! whatever the length of the queue.

use memgpt_core::ids::MessageId;
use memgpt_core::store::{AgentState, QueueChange, StoreError};
use sqlx::PgConnection;
use sqlx::types::Json;
use uuid::Uuid;

use crate::codec::db;

/// The column that reads an agent's queue in the same statement as its state (one snapshot),
/// in a query over `agents`.
macro_rules! queue_column {
    () => {
        "(SELECT array_agg(q.message_id ORDER BY q.position) \
         FROM agent_queue AS q WHERE q.agent_id = agents.id)"
    };
}

/// One agent's state and queue.
pub(super) const LOAD_AGENT: &str = concat!(
    "SELECT state, ",
    queue_column!(),
    " FROM agents WHERE id = $1"
);

/// Every agent's state and queue, in creation order.
pub(super) const LIST_AGENTS: &str = concat!(
    "SELECT state, ",
    queue_column!(),
    " FROM agents ORDER BY created_at, seq"
);

/// A row of [`LOAD_AGENT`] or [`LIST_AGENTS`].
pub(super) type StateRow = (Json<AgentState>, Option<Vec<Uuid>>);

/// The state of a [`StateRow`], its queue filled in.
pub(super) fn state_of((Json(mut state), queue): StateRow) -> AgentState {
    state.fifo = queue
        .unwrap_or_default()
        .into_iter()
        .map(MessageId::from_uuid)
        .collect();
    state
}

/// The two `WITH` queries that apply a [`QueueChange`] to an agent's rows in one statement:
/// `dequeued` deletes the removed ids, `queued` appends the appended ones after the largest
/// position (both see the statement's snapshot). The arguments name the parameters holding the
/// agent, the removed ids and the appended ids (`uuid[]`), and a condition both write under
/// (`true` for none).
macro_rules! queue_change_ctes {
    ($agent:literal, $removed:literal, $appended:literal, $when:literal) => {
        concat!(
            "dequeued AS (DELETE FROM agent_queue WHERE agent_id = ",
            $agent,
            " AND message_id = ANY(",
            $removed,
            ") AND ",
            $when,
            "), ",
            "queued AS (INSERT INTO agent_queue (agent_id, position, message_id) SELECT ",
            $agent,
            ", coalesce((SELECT max(position) FROM agent_queue WHERE agent_id = ",
            $agent,
            "), 0) + q.n, q.id FROM unnest(",
            $appended,
            "::uuid[]) WITH ORDINALITY AS q (id, n) WHERE ",
            $when,
            ")"
        )
    };
}
pub(super) use queue_change_ctes;

/// The ids as PostgreSQL binds them.
pub(super) fn uuids(ids: &[MessageId]) -> Vec<Uuid> {
    ids.iter().map(|id| *id.as_uuid()).collect()
}

/// Brings the agent's rows to `state.fifo`: `change` when there is one and the agent has rows
/// to change (`create` false), else the whole queue.
pub(super) async fn write_queue(
    tx: &mut PgConnection,
    state: &AgentState,
    change: Option<&QueueChange>,
    create: bool,
) -> Result<(), StoreError> {
    let agent = state.id.as_uuid();
    match change {
        Some(change) if !create => {
            if change.is_empty() {
                return Ok(());
            }
            sqlx::query(concat!(
                "WITH ",
                queue_change_ctes!("$1", "$2", "$3", "true"),
                " SELECT 1"
            ))
            .bind(agent)
            .bind(uuids(&change.removed))
            .bind(uuids(&change.appended))
            .execute(&mut *tx)
            .await
            .map_err(|e| db("changing an agent's queue", e))?;
        }
        _ => {
            if !create {
                sqlx::query("DELETE FROM agent_queue WHERE agent_id = $1")
                    .bind(agent)
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| db("rewriting an agent's queue", e))?;
            }
            if !state.fifo.is_empty() {
                sqlx::query(
                    "INSERT INTO agent_queue (agent_id, position, message_id) \
                     SELECT $1, q.n, q.id FROM unnest($2::uuid[]) WITH ORDINALITY AS q (id, n)",
                )
                .bind(agent)
                .bind(uuids(&state.fifo))
                .execute(&mut *tx)
                .await
                .map_err(|e| db("writing an agent's queue", e))?;
            }
        }
    }
    Ok(())
}
