//! The FIFO queue's rows (`agent_queue`, migration 8): read back into the state, changed by
//! each commit in what the step changed ([`QueueChange`]), so a step writes a few rows
//! whatever the length of the queue.

use memgpt_core::ids::{AgentId, MessageId};
use memgpt_core::store::{AgentState, QueueChange, StoreError};
use sqlx::SqliteConnection;
use uuid::Uuid;

use super::batch::Batch;
use crate::codec::corrupt;

/// Rows per statement when the whole queue is written (one statement shape, prepared once).
const ROWS_PER_INSERT: usize = 256;

/// Adds to `batch` what brings the agent's rows to `state.fifo`: `change` when there is one
/// and the agent has rows to change (`create` false), else the whole queue.
pub(super) async fn write_queue(
    tx: &mut SqliteConnection,
    batch: &mut Batch,
    state: &AgentState,
    change: Option<&QueueChange>,
    create: bool,
) -> Result<(), StoreError> {
    match change {
        Some(change) if !create => write_change(tx, batch, state.id, change).await,
        _ => write_whole(tx, batch, state.id, &state.fifo, create).await,
    }
}

/// Deletes the rows of the ids that left, then appends the new ids after the last position.
async fn write_change(
    tx: &mut SqliteConnection,
    batch: &mut Batch,
    agent: AgentId,
    change: &QueueChange,
) -> Result<(), StoreError> {
    for id in &change.removed {
        batch
            .statement("DELETE FROM agent_queue WHERE agent_id = ")
            .bind(agent.as_uuid())
            .sql(" AND message_id = ")
            .bind(id.as_uuid());
        batch.send_if_full(tx).await?;
    }
    for id in &change.appended {
        batch
            .statement("INSERT INTO agent_queue (agent_id, position, message_id) VALUES (")
            .bind(agent.as_uuid())
            .sql(", coalesce((SELECT max(position) FROM agent_queue WHERE agent_id = ")
            .bind(agent.as_uuid())
            .sql("), 0) + 1, ")
            .bind(id.as_uuid())
            .sql(")");
        batch.send_if_full(tx).await?;
    }
    Ok(())
}

/// Replaces the agent's rows with `fifo` (positions 1 to n).
async fn write_whole(
    tx: &mut SqliteConnection,
    batch: &mut Batch,
    agent: AgentId,
    fifo: &[MessageId],
    create: bool,
) -> Result<(), StoreError> {
    if !create {
        batch
            .statement("DELETE FROM agent_queue WHERE agent_id = ")
            .bind(agent.as_uuid());
    }
    let mut position = 0i64;
    for chunk in fifo.chunks(ROWS_PER_INSERT) {
        // Full chunks share one shape; the last, shorter one goes a row per statement.
        let rows: Vec<&[MessageId]> = if chunk.len() == ROWS_PER_INSERT {
            vec![chunk]
        } else {
            chunk.chunks(1).collect()
        };
        for rows in rows {
            batch.statement("INSERT INTO agent_queue (agent_id, position, message_id) VALUES ");
            for (i, id) in rows.iter().enumerate() {
                position += 1;
                batch
                    .sql(if i == 0 { "(" } else { ", (" })
                    .bind(agent.as_uuid())
                    .sql(", ")
                    .bind(position)
                    .sql(", ")
                    .bind(id.as_uuid())
                    .sql(")");
            }
            batch.send_if_full(tx).await?;
        }
    }
    Ok(())
}

/// The column that reads an agent's queue in the same statement as its state (so both come
/// from one snapshot), in a query over `agents`: the ids in hex, comma-separated, in queue
/// order ([`parse_queue`] reads it).
macro_rules! queue_column {
    () => {
        "(SELECT group_concat(hex(q.message_id), ',' ORDER BY q.position) \
         FROM agent_queue AS q WHERE q.agent_id = agents.id)"
    };
}

/// One agent's state and queue.
pub(super) const LOAD_AGENT: &str = concat!(
    "SELECT state, ",
    queue_column!(),
    " FROM agents WHERE id = ?"
);

/// Every agent's state and queue, in creation order.
pub(super) const LIST_AGENTS: &str = concat!(
    "SELECT state, ",
    queue_column!(),
    " FROM agents ORDER BY created_at, rowid"
);

/// The queue the column of [`LOAD_AGENT`] and [`LIST_AGENTS`] read (`None`: an empty queue).
pub(super) fn parse_queue(column: Option<&str>) -> Result<Vec<MessageId>, StoreError> {
    let Some(column) = column.filter(|c| !c.is_empty()) else {
        return Ok(Vec::new());
    };
    column
        .split(',')
        .map(|hex| {
            Uuid::try_parse(hex)
                .map(MessageId::from_uuid)
                .map_err(|e| corrupt(format!("a queued message id: {e}")))
        })
        .collect()
}
