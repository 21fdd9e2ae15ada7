//! The Sqlite dialect of the shared SQL code ([`SqlDialect`]): row decoding, filters, binding.

use memgpt_core::embed::Embedding;
use memgpt_core::ids::{AgentId, MessageId, PassageId};
use memgpt_core::message::{Message, MessageKind, ToolCall};
use memgpt_core::store::{EmbeddingSpace, Passage, RecallQuery, StoreError};
use sqlx::sqlite::SqliteRow;
use sqlx::{QueryBuilder, Row, Sqlite};

use super::SqliteStore;
use crate::codec::{blob_to_vector, corrupt, db, from_micros, micros};

pub(crate) const MESSAGE_COLUMNS: &str =
    "m.seq, m.id, m.agent_id, m.kind, m.text, m.tool_calls, m.tool_call_id, m.name, m.created_at";

/// Decodes a row selected with [`MESSAGE_COLUMNS`].
pub(crate) fn message_from_row(row: &SqliteRow) -> Result<Message, StoreError> {
    let get_err = |e: sqlx::Error| db("reading a message", e);
    let kind: String = row.try_get("kind").map_err(get_err)?;
    let tool_calls: Option<String> = row.try_get("tool_calls").map_err(get_err)?;
    Ok(Message {
        id: MessageId::from_uuid(row.try_get("id").map_err(get_err)?),
        agent_id: AgentId::from_uuid(row.try_get("agent_id").map_err(get_err)?),
        kind: MessageKind::parse(&kind).ok_or_else(|| corrupt(format!("message kind `{kind}`")))?,
        text: row.try_get("text").map_err(get_err)?,
        tool_calls: match tool_calls {
            Some(json) => serde_json::from_str::<Vec<ToolCall>>(&json)
                .map_err(|e| corrupt(format!("tool calls: {e}")))?,
            None => Vec::new(),
        },
        tool_call_id: row.try_get("tool_call_id").map_err(get_err)?,
        name: row.try_get("name").map_err(get_err)?,
        created_at: from_micros(row.try_get("created_at").map_err(get_err)?)?,
    })
}

/// Appends the kind and time filters of `query` (after a `WHERE m.agent_id = ?`).
pub(crate) fn push_filters(sql: &mut QueryBuilder<Sqlite>, query: &RecallQuery) {
    if !query.kinds.is_empty() {
        sql.push(" AND m.kind IN (");
        let mut kinds = sql.separated(", ");
        for kind in &query.kinds {
            kinds.push_bind(kind.as_str());
        }
        sql.push(")");
    }
    if let Some(start) = query.range.start {
        sql.push(" AND m.created_at >= ").push_bind(micros(start));
    }
    if let Some(end) = query.range.end {
        sql.push(" AND m.created_at < ").push_bind(micros(end));
    }
}

pub(crate) const PASSAGE_COLUMNS: &str = "p.seq, p.id, p.agent_id, p.text, p.embedding, p.metadata, p.created_at, \
     p.valid_from, p.valid_to, p.superseded_by, p.retired_reason";

pub(crate) fn passage_from_row(
    row: &SqliteRow,
    space: Option<&EmbeddingSpace>,
) -> Result<Passage, StoreError> {
    let get_err = |e: sqlx::Error| db("reading a passage", e);
    let embedding: Option<Vec<u8>> = row.try_get("embedding").map_err(get_err)?;
    let metadata: String = row.try_get("metadata").map_err(get_err)?;
    let embedding = match embedding {
        None => None,
        Some(blob) => {
            let space =
                space.ok_or_else(|| corrupt("an embedding in a store with no embedding model"))?;
            Some(Embedding {
                model: space.model.clone(),
                vector: blob_to_vector(&blob)?,
            })
        }
    };
    Ok(Passage {
        id: PassageId::from_uuid(row.try_get("id").map_err(get_err)?),
        agent_id: AgentId::from_uuid(row.try_get("agent_id").map_err(get_err)?),
        text: row.try_get("text").map_err(get_err)?,
        embedding,
        metadata: serde_json::from_str(&metadata)
            .map_err(|e| corrupt(format!("passage metadata: {e}")))?,
        created_at: from_micros(row.try_get("created_at").map_err(get_err)?)?,
        valid_from: row
            .try_get::<Option<i64>, _>("valid_from")
            .map_err(get_err)?
            .map(from_micros)
            .transpose()?,
        valid_to: row
            .try_get::<Option<i64>, _>("valid_to")
            .map_err(get_err)?
            .map(from_micros)
            .transpose()?,
        superseded_by: row
            .try_get::<Option<uuid::Uuid>, _>("superseded_by")
            .map_err(get_err)?
            .map(PassageId::from_uuid),
        retired_reason: row.try_get("retired_reason").map_err(get_err)?,
    })
}

crate::sql::impl_sql_dialect!(SqliteStore, Sqlite, SqliteRow);
