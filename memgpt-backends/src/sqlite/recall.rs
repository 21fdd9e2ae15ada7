//! Recall storage: messages, searched with FTS5 (or tantivy) and listed by time.

use std::collections::HashMap;

use async_trait::async_trait;
use memgpt_core::ids::{AgentId, MessageId};
use memgpt_core::message::{Message, MessageKind, ToolCall};
use memgpt_core::store::{Hit, RecallQuery, RecallStore, SearchPage, StoreError};
use sqlx::sqlite::SqliteRow;
use sqlx::{QueryBuilder, Row, Sqlite};

use super::SqliteStore;
use super::agents::agent_token;
use crate::codec::{corrupt, db, from_micros, fts5_query, micros};

const MESSAGE_COLUMNS: &str =
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
fn push_filters(sql: &mut QueryBuilder<Sqlite>, query: &RecallQuery) {
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

impl SqliteStore {
    /// Messages by their append sequence numbers, in the order given (missing ones skipped).
    #[cfg(feature = "tantivy")]
    pub(crate) async fn messages_by_seq(
        &self,
        seqs: &[i64],
    ) -> Result<Vec<(i64, Message)>, StoreError> {
        let mut found: HashMap<i64, Message> = HashMap::with_capacity(seqs.len());
        for chunk in seqs.chunks(500) {
            let mut sql = QueryBuilder::<Sqlite>::new(format!(
                "SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.seq IN ("
            ));
            let mut list = sql.separated(", ");
            for seq in chunk {
                list.push_bind(*seq);
            }
            sql.push(")");
            let rows = sql
                .build()
                .fetch_all(&self.pool)
                .await
                .map_err(|e| db("reading messages", e))?;
            for row in &rows {
                let seq: i64 = row.try_get("seq").map_err(|e| db("reading messages", e))?;
                found.insert(seq, message_from_row(row)?);
            }
        }
        Ok(seqs
            .iter()
            .filter_map(|seq| Some((*seq, found.remove(seq)?)))
            .collect())
    }

    async fn search_fts(
        &self,
        agent: AgentId,
        query: &RecallQuery,
        text: &str,
    ) -> Result<SearchPage<Message>, StoreError> {
        let Some(expr) = fts5_query(&agent_token(agent), text) else {
            return Ok(SearchPage::empty(query.page));
        };
        let mut count = QueryBuilder::<Sqlite>::new(
            "SELECT count(*) FROM messages_fts CROSS JOIN messages m ON m.seq = messages_fts.rowid WHERE messages_fts MATCH ",
        );
        count
            .push_bind(expr.clone())
            .push(" AND m.agent_id = ")
            .push_bind(*agent.as_uuid());
        push_filters(&mut count, query);
        let total: i64 = count
            .build_query_scalar()
            .fetch_one(&self.pool)
            .await
            .map_err(|e| db("searching recall storage", e))?;

        let mut sql = QueryBuilder::<Sqlite>::new(format!(
            "SELECT {MESSAGE_COLUMNS}, -bm25(messages_fts, 0.0, 1.0) AS score FROM messages_fts \
             CROSS JOIN messages m ON m.seq = messages_fts.rowid WHERE messages_fts MATCH "
        ));
        sql.push_bind(expr)
            .push(" AND m.agent_id = ")
            .push_bind(*agent.as_uuid());
        push_filters(&mut sql, query);
        sql.push(" ORDER BY score DESC, m.created_at DESC, m.seq DESC LIMIT ")
            .push_bind(query.page.size as i64)
            .push(" OFFSET ")
            .push_bind(query.page.offset() as i64);
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
                        .try_get::<f64, _>("score")
                        .map_err(|e| db("searching recall storage", e))?
                        as f32,
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
            QueryBuilder::<Sqlite>::new("SELECT count(*) FROM messages m WHERE m.agent_id = ");
        count.push_bind(*agent.as_uuid());
        push_filters(&mut count, query);
        let total: i64 = count
            .build_query_scalar()
            .fetch_one(&self.pool)
            .await
            .map_err(|e| db("listing recall storage", e))?;
        let mut sql = QueryBuilder::<Sqlite>::new(format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.agent_id = "
        ));
        sql.push_bind(*agent.as_uuid());
        push_filters(&mut sql, query);
        sql.push(" ORDER BY m.created_at, m.seq LIMIT ")
            .push_bind(query.page.size as i64)
            .push(" OFFSET ")
            .push_bind(query.page.offset() as i64);
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
impl RecallStore for SqliteStore {
    async fn search(
        &self,
        agent: AgentId,
        query: &RecallQuery,
    ) -> Result<SearchPage<Message>, StoreError> {
        match query.text_query() {
            None => self.list_chronological(agent, query).await,
            Some(text) => {
                #[cfg(feature = "tantivy")]
                if let Some(tantivy) = &self.tantivy {
                    tantivy.catch_up(&self.pool).await?;
                    let (total, ranked) = tantivy.search(agent, query, text)?;
                    let seqs: Vec<i64> = ranked.iter().map(|(_, seq)| *seq).collect();
                    let scores: HashMap<i64, f32> = ranked
                        .into_iter()
                        .map(|(score, seq)| (seq, score))
                        .collect();
                    // In rank order; a message missing from SQLite is skipped.
                    let hits = self
                        .messages_by_seq(&seqs)
                        .await?
                        .into_iter()
                        .map(|(seq, item)| Hit {
                            score: scores.get(&seq).copied().unwrap_or_default(),
                            item,
                        })
                        .collect();
                    return Ok(SearchPage {
                        hits,
                        page: query.page,
                        total,
                    });
                }
                self.search_fts(agent, query, text).await
            }
        }
    }

    async fn get_messages(
        &self,
        agent: AgentId,
        ids: &[MessageId],
    ) -> Result<Vec<Message>, StoreError> {
        let mut found: HashMap<MessageId, Message> = HashMap::with_capacity(ids.len());
        for chunk in ids.chunks(500) {
            let mut sql = QueryBuilder::<Sqlite>::new(format!(
                "SELECT {MESSAGE_COLUMNS} FROM messages m WHERE +m.agent_id = "
            ));
            sql.push_bind(*agent.as_uuid()).push(" AND m.id IN (");
            // `+agent_id`: look rows up by their unique id, not by walking the agent's index.
            let mut list = sql.separated(", ");
            for id in chunk {
                list.push_bind(*id.as_uuid());
            }
            sql.push(")");
            let rows = sql
                .build()
                .fetch_all(&self.pool)
                .await
                .map_err(|e| db("reading messages", e))?;
            for row in &rows {
                let message = message_from_row(row)?;
                found.insert(message.id, message);
            }
        }
        Ok(ids.iter().filter_map(|id| found.remove(id)).collect())
    }

    async fn count_messages(&self, agent: AgentId) -> Result<u64, StoreError> {
        let count: i64 = sqlx::query_scalar("SELECT count(*) FROM messages WHERE agent_id = ?")
            .bind(agent.as_uuid())
            .fetch_one(&self.pool)
            .await
            .map_err(|e| db("counting messages", e))?;
        Ok(count as u64)
    }
}
