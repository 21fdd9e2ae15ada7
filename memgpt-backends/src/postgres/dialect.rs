//! The Postgres dialect of the shared SQL code ([`SqlDialect`]): row decoding, filters, binding.

use memgpt_core::embed::Embedding;
use memgpt_core::ids::{AgentId, MessageId, PassageId};
use memgpt_core::message::{Message, MessageKind, ToolCall};
use memgpt_core::store::{EmbeddingSpace, Passage, RecallQuery, StoreError};
use sqlx::postgres::PgRow;
use sqlx::types::Json;
use sqlx::{Postgres, QueryBuilder, Row};

use super::PgStore;
use crate::codec::{corrupt, db};

pub(crate) const MESSAGE_COLUMNS: &str =
    "m.id, m.agent_id, m.kind, m.text, m.tool_calls, m.tool_call_id, m.name, m.created_at";

/// Decodes a row selected with [`MESSAGE_COLUMNS`].
pub(crate) fn message_from_row(row: &PgRow) -> Result<Message, StoreError> {
    let get_err = |e: sqlx::Error| db("reading a message", e);
    let kind: String = row.try_get("kind").map_err(get_err)?;
    let tool_calls: Option<Json<Vec<ToolCall>>> = row.try_get("tool_calls").map_err(get_err)?;
    Ok(Message {
        id: MessageId::from_uuid(row.try_get("id").map_err(get_err)?),
        agent_id: AgentId::from_uuid(row.try_get("agent_id").map_err(get_err)?),
        kind: MessageKind::parse(&kind).ok_or_else(|| corrupt(format!("message kind `{kind}`")))?,
        text: row.try_get("text").map_err(get_err)?,
        tool_calls: tool_calls.map(|Json(calls)| calls).unwrap_or_default(),
        tool_call_id: row.try_get("tool_call_id").map_err(get_err)?,
        name: row.try_get("name").map_err(get_err)?,
        created_at: row.try_get("created_at").map_err(get_err)?,
    })
}

/// Appends the kind and time filters of `query` (after a `WHERE m.agent_id = $1`).
pub(crate) fn push_filters(sql: &mut QueryBuilder<Postgres>, query: &RecallQuery) {
    if !query.kinds.is_empty() {
        let kinds: Vec<&str> = query.kinds.iter().map(|k| k.as_str()).collect();
        sql.push(" AND m.kind = ANY(").push_bind(kinds).push(")");
    }
    if let Some(start) = query.range.start {
        sql.push(" AND m.created_at >= ").push_bind(start);
    }
    if let Some(end) = query.range.end {
        let before = if memgpt_core::failpoint::fault("fault.postgres.recall_range_end_included") {
            " AND m.created_at <= "
        } else {
            " AND m.created_at < "
        };
        sql.push(before).push_bind(end);
    }
}

pub(crate) const PASSAGE_COLUMNS: &str = "p.seq, p.id, p.agent_id, p.text, p.embedding::real[] AS embedding, p.metadata, \
     p.created_at, p.valid_from, p.valid_to, p.superseded_by, p.retired_reason";

pub(crate) fn passage_from_row(
    row: &PgRow,
    space: Option<&EmbeddingSpace>,
) -> Result<Passage, StoreError> {
    let get_err = |e: sqlx::Error| db("reading a passage", e);
    let vector: Option<Vec<f32>> = row.try_get("embedding").map_err(get_err)?;
    let embedding = match vector {
        None => None,
        Some(vector) => {
            let space =
                space.ok_or_else(|| corrupt("an embedding in a store with no embedding model"))?;
            Some(Embedding {
                model: space.model.clone(),
                vector,
            })
        }
    };
    let Json(metadata): Json<serde_json::Map<String, serde_json::Value>> =
        row.try_get("metadata").map_err(get_err)?;
    Ok(Passage {
        id: PassageId::from_uuid(row.try_get("id").map_err(get_err)?),
        agent_id: AgentId::from_uuid(row.try_get("agent_id").map_err(get_err)?),
        text: row.try_get("text").map_err(get_err)?,
        embedding,
        metadata,
        created_at: row.try_get("created_at").map_err(get_err)?,
        valid_from: row.try_get("valid_from").map_err(get_err)?,
        valid_to: row.try_get("valid_to").map_err(get_err)?,
        superseded_by: row
            .try_get::<Option<uuid::Uuid>, _>("superseded_by")
            .map_err(get_err)?
            .map(PassageId::from_uuid),
        retired_reason: row.try_get("retired_reason").map_err(get_err)?,
    })
}

crate::sql::impl_sql_dialect!(PgStore, Postgres, PgRow);
