//! Recall storage: messages, searched with PostgreSQL full-text search and listed by time.

use std::collections::HashMap;

use async_trait::async_trait;
use memgpt_core::ids::{AgentId, MessageId};
use memgpt_core::message::{Message, MessageKind, ToolCall};
use memgpt_core::store::{Hit, RecallQuery, RecallStore, SearchPage, StoreError};
use sqlx::postgres::PgRow;
use sqlx::types::Json;
use sqlx::{Postgres, QueryBuilder, Row};

use super::{PgStore, ts_query};
use crate::codec::{corrupt, db};

const MESSAGE_COLUMNS: &str =
    "m.id, m.agent_id, m.kind, m.text, m.tool_calls, m.tool_call_id, m.name, m.created_at";

/// Decodes a row selected with [`MESSAGE_COLUMNS`].
fn message_from_row(row: &PgRow) -> Result<Message, StoreError> {
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
fn push_filters(sql: &mut QueryBuilder<Postgres>, query: &RecallQuery) {
    if !query.kinds.is_empty() {
        let kinds: Vec<&str> = query.kinds.iter().map(|k| k.as_str()).collect();
        sql.push(" AND m.kind = ANY(").push_bind(kinds).push(")");
    }
    if let Some(start) = query.range.start {
        sql.push(" AND m.created_at >= ").push_bind(start);
    }
    if let Some(end) = query.range.end {
        sql.push(" AND m.created_at < ").push_bind(end);
    }
}

/// A page's `LIMIT` and `OFFSET`.
fn push_page(sql: &mut QueryBuilder<Postgres>, query: &RecallQuery) {
    sql.push(" LIMIT ")
        .push_bind(query.page.size.min(i64::MAX as usize) as i64)
        .push(" OFFSET ")
        .push_bind(query.page.offset().min(i64::MAX as usize) as i64);
}

impl PgStore {
    async fn search_text(
        &self,
        agent: AgentId,
        query: &RecallQuery,
        text: &str,
    ) -> Result<SearchPage<Message>, StoreError> {
        let Some(tsquery) = ts_query(text) else {
            return Ok(SearchPage::empty(query.page));
        };
        let mut count =
            QueryBuilder::<Postgres>::new("SELECT count(*) FROM messages m WHERE m.agent_id = ");
        count
            .push_bind(*agent.as_uuid())
            .push(" AND m.search @@ ")
            .push_bind(tsquery.clone())
            .push("::tsquery");
        push_filters(&mut count, query);
        let total: i64 = count
            .build_query_scalar()
            .fetch_one(&self.pool)
            .await
            .map_err(|e| db("searching recall storage", e))?;
        if total == 0 || query.page.offset() >= total as usize {
            return Ok(SearchPage {
                hits: Vec::new(),
                page: query.page,
                total: total as usize,
            });
        }

        let mut sql = QueryBuilder::<Postgres>::new(format!(
            "SELECT {MESSAGE_COLUMNS}, ts_rank_cd(m.search, "
        ));
        sql.push_bind(tsquery.clone())
            .push("::tsquery) AS score FROM messages m WHERE m.agent_id = ")
            .push_bind(*agent.as_uuid())
            .push(" AND m.search @@ ")
            .push_bind(tsquery)
            .push("::tsquery");
        push_filters(&mut sql, query);
        sql.push(" ORDER BY score DESC, m.created_at DESC, m.seq DESC");
        push_page(&mut sql, query);
        let rows = sql
            .build()
            .fetch_all(&self.pool)
            .await
            .map_err(|e| db("searching recall storage", e))?;
        let hits = rows
            .iter()
            .map(|row| {
                Ok(Hit {
                    item: message_from_row(row)?,
                    score: row
                        .try_get::<f32, _>("score")
                        .map_err(|e| db("searching recall storage", e))?,
                })
            })
            .collect::<Result<_, StoreError>>()?;
        Ok(SearchPage {
            hits,
            page: query.page,
            total: total as usize,
        })
    }

    async fn list_chronological(
        &self,
        agent: AgentId,
        query: &RecallQuery,
    ) -> Result<SearchPage<Message>, StoreError> {
        let mut count =
            QueryBuilder::<Postgres>::new("SELECT count(*) FROM messages m WHERE m.agent_id = ");
        count.push_bind(*agent.as_uuid());
        push_filters(&mut count, query);
        let total: i64 = count
            .build_query_scalar()
            .fetch_one(&self.pool)
            .await
            .map_err(|e| db("listing recall storage", e))?;
        if total == 0 || query.page.offset() >= total as usize {
            return Ok(SearchPage {
                hits: Vec::new(),
                page: query.page,
                total: total as usize,
            });
        }
        let mut sql = QueryBuilder::<Postgres>::new(format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.agent_id = "
        ));
        sql.push_bind(*agent.as_uuid());
        push_filters(&mut sql, query);
        sql.push(" ORDER BY m.created_at, m.seq");
        push_page(&mut sql, query);
        let rows = sql
            .build()
            .fetch_all(&self.pool)
            .await
            .map_err(|e| db("listing recall storage", e))?;
        let hits = rows
            .iter()
            .map(|row| {
                Ok(Hit {
                    item: message_from_row(row)?,
                    score: 0.0,
                })
            })
            .collect::<Result<_, StoreError>>()?;
        Ok(SearchPage {
            hits,
            page: query.page,
            total: total as usize,
        })
    }
}

#[async_trait]
impl RecallStore for PgStore {
    async fn search(
        &self,
        agent: AgentId,
        query: &RecallQuery,
    ) -> Result<SearchPage<Message>, StoreError> {
        match query.text_query() {
            None => self.list_chronological(agent, query).await,
            Some(text) => self.search_text(agent, query, text).await,
        }
    }

    async fn get_messages(
        &self,
        agent: AgentId,
        ids: &[MessageId],
    ) -> Result<Vec<Message>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let uuids: Vec<uuid::Uuid> = ids.iter().map(|id| *id.as_uuid()).collect();
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.agent_id = $1 AND m.id = ANY($2)"
        )))
        .bind(agent.as_uuid())
        .bind(uuids)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| db("reading messages", e))?;
        let mut found: HashMap<MessageId, Message> = HashMap::with_capacity(rows.len());
        for row in &rows {
            let message = message_from_row(row)?;
            found.insert(message.id, message);
        }
        // In the order asked, as the reference store answers (an id asked twice comes twice).
        Ok(ids.iter().filter_map(|id| found.get(id).cloned()).collect())
    }

    async fn count_messages(&self, agent: AgentId) -> Result<u64, StoreError> {
        let count: i64 = sqlx::query_scalar("SELECT count(*) FROM messages WHERE agent_id = $1")
            .bind(agent.as_uuid())
            .fetch_one(&self.pool)
            .await
            .map_err(|e| db("counting messages", e))?;
        Ok(count as u64)
    }
}
