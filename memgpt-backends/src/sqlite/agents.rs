//! Agent state and the atomic commit.

use async_trait::async_trait;
use memgpt_core::embed::Embedding;
use memgpt_core::ids::AgentId;
use memgpt_core::message::Message;
use memgpt_core::store::{AgentState, AgentStore, Commit, Passage, StoreError};
use sqlx::{Row, SqliteConnection};

use super::{SqliteStore, meta};
use crate::codec::{corrupt, db, micros, vector_to_blob};

fn state_json(state: &AgentState) -> Result<String, StoreError> {
    serde_json::to_string(state).map_err(|e| db("encoding agent state", e))
}

fn parse_state(json: &str) -> Result<AgentState, StoreError> {
    serde_json::from_str(json).map_err(|e| corrupt(format!("agent state: {e}")))
}

/// The agent id as FTS5 sees it (one token).
pub(super) fn agent_token(id: AgentId) -> String {
    id.as_uuid().simple().to_string()
}

#[async_trait]
impl AgentStore for SqliteStore {
    async fn create_agent(&self, state: &AgentState) -> Result<(), StoreError> {
        let result = sqlx::query(
            "INSERT INTO agents (id, name, version, state, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(state.id.as_uuid())
        .bind(&state.name)
        .bind(state.version as i64)
        .bind(state_json(state)?)
        .bind(micros(state.created_at))
        .bind(micros(state.updated_at))
        .execute(&self.pool)
        .await;
        match result {
            Ok(_) => Ok(()),
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                Err(StoreError::AgentExists(state.id))
            }
            Err(e) => Err(db("creating an agent", e)),
        }
    }

    async fn load_agent(&self, id: AgentId) -> Result<Option<AgentState>, StoreError> {
        let json: Option<String> = sqlx::query_scalar("SELECT state FROM agents WHERE id = ?")
            .bind(id.as_uuid())
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| db("loading an agent", e))?;
        json.as_deref().map(parse_state).transpose()
    }

    async fn agent_version(&self, id: AgentId) -> Result<Option<u64>, StoreError> {
        let version: Option<i64> = sqlx::query_scalar("SELECT version FROM agents WHERE id = ?")
            .bind(id.as_uuid())
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| db("reading an agent's version", e))?;
        Ok(version.map(|v| v as u64))
    }

    async fn list_agents(&self) -> Result<Vec<AgentState>, StoreError> {
        let rows: Vec<String> =
            sqlx::query_scalar("SELECT state FROM agents ORDER BY created_at, rowid")
                .fetch_all(&self.pool)
                .await
                .map_err(|e| db("listing agents", e))?;
        rows.iter().map(|json| parse_state(json)).collect()
    }

    async fn delete_agent(&self, id: AgentId) -> Result<bool, StoreError> {
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(|e| db("starting a transaction", e))?;
        let uuid = id.as_uuid();
        for sql in [
            "DELETE FROM messages_fts WHERE rowid IN (SELECT seq FROM messages WHERE agent_id = ?)",
            "DELETE FROM messages WHERE agent_id = ?",
            "DELETE FROM passages_fts WHERE rowid IN (SELECT seq FROM passages WHERE agent_id = ?)",
            "DELETE FROM passages WHERE agent_id = ?",
            "DELETE FROM passage_deletions WHERE agent_id = ?",
        ] {
            sqlx::query(sql)
                .bind(uuid)
                .execute(&mut *tx)
                .await
                .map_err(|e| db("deleting an agent", e))?;
        }
        let deleted = sqlx::query("DELETE FROM agents WHERE id = ?")
            .bind(uuid)
            .execute(&mut *tx)
            .await
            .map_err(|e| db("deleting an agent", e))?
            .rows_affected()
            > 0;
        // Derived indexes notice the generation change and rebuild.
        sqlx::query(
            "UPDATE memgpt_meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'",
        )
        .execute(&mut *tx)
        .await
        .map_err(|e| db("deleting an agent", e))?;
        tx.commit()
            .await
            .map_err(|e| db("committing an agent deletion", e))?;
        self.after_delete(id).await;
        Ok(deleted)
    }

    async fn commit(&self, commit: &Commit) -> Result<(), StoreError> {
        let id = commit.state.id;
        // IMMEDIATE takes the write lock up front: the version check and the writes cannot
        // interleave with another writer's.
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(|e| db("starting a commit", e))?;
        let current: Option<i64> = sqlx::query_scalar("SELECT version FROM agents WHERE id = ?")
            .bind(id.as_uuid())
            .fetch_optional(&mut *tx)
            .await
            .map_err(|e| db("reading an agent's version", e))?;
        let current = current.ok_or(StoreError::AgentNotFound(id))? as u64;
        let expected = commit.state.version.saturating_sub(1);
        if current != expected || commit.state.version == 0 {
            return Err(StoreError::Conflict {
                agent: id,
                expected,
                found: current,
            });
        }
        check_embeddings(&mut tx, &commit.passages).await?;
        let token = agent_token(id);
        for message in &commit.messages {
            insert_message(&mut tx, message, &token).await?;
        }
        for passage in &commit.passages {
            insert_passage(&mut tx, passage, &token).await?;
        }
        for passage_id in &commit.deleted_passages {
            delete_passage(&mut tx, id, *passage_id).await?;
        }
        sqlx::query(
            "UPDATE agents SET name = ?, version = ?, state = ?, updated_at = ? WHERE id = ?",
        )
        .bind(&commit.state.name)
        .bind(commit.state.version as i64)
        .bind(state_json(&commit.state)?)
        .bind(micros(commit.state.updated_at))
        .bind(id.as_uuid())
        .execute(&mut *tx)
        .await
        .map_err(|e| db("writing agent state", e))?;
        tx.commit().await.map_err(|e| db("committing a step", e))?;
        let rows = commit.messages.len() + commit.passages.len() + commit.deleted_passages.len();
        self.after_commit(id, rows).await;
        Ok(())
    }
}

/// Rejects embeddings of another model or dimension than the store holds; fixes the store's
/// embedding space with the first one.
async fn check_embeddings(
    tx: &mut SqliteConnection,
    passages: &[Passage],
) -> Result<(), StoreError> {
    let Some(first) = passages.iter().find_map(|p| p.embedding.as_ref()) else {
        return Ok(());
    };
    let model = meta(&mut *tx, "embedding_model").await?;
    let dimension = meta(&mut *tx, "embedding_dimension").await?;
    let (model, dimension) = match (model, dimension) {
        (Some(model), Some(dimension)) => (
            model,
            dimension
                .parse::<usize>()
                .map_err(|_| corrupt("embedding_dimension"))?,
        ),
        _ => {
            for (key, value) in [
                ("embedding_model", first.model.clone()),
                ("embedding_dimension", first.dimension().to_string()),
            ] {
                sqlx::query("INSERT INTO memgpt_meta (key, value) VALUES (?, ?)")
                    .bind(key)
                    .bind(value)
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| db("recording the embedding model", e))?;
            }
            (first.model.clone(), first.dimension())
        }
    };
    for embedding in passages.iter().filter_map(|p| p.embedding.as_ref()) {
        check_space(&model, dimension, embedding)?;
    }
    Ok(())
}

/// The error for an embedding outside the store's space.
pub(super) fn check_space(
    model: &str,
    dimension: usize,
    embedding: &Embedding,
) -> Result<(), StoreError> {
    if embedding.model != model || embedding.dimension() != dimension {
        return Err(StoreError::EmbeddingMismatch {
            expected_model: model.to_owned(),
            expected_dimension: dimension,
            found_model: embedding.model.clone(),
            found_dimension: embedding.dimension(),
        });
    }
    Ok(())
}

async fn insert_message(
    tx: &mut SqliteConnection,
    message: &Message,
    token: &str,
) -> Result<(), StoreError> {
    let tool_calls = if message.tool_calls.is_empty() {
        None
    } else {
        Some(serde_json::to_string(&message.tool_calls).map_err(|e| db("encoding tool calls", e))?)
    };
    let row = sqlx::query(
        "INSERT INTO messages (id, agent_id, kind, text, tool_calls, tool_call_id, name, created_at) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq",
    )
    .bind(message.id.as_uuid())
    .bind(message.agent_id.as_uuid())
    .bind(message.kind.as_str())
    .bind(&message.text)
    .bind(tool_calls)
    .bind(&message.tool_call_id)
    .bind(&message.name)
    .bind(micros(message.created_at))
    .fetch_one(&mut *tx)
    .await
    .map_err(|e| db("appending a message", e))?;
    let seq: i64 = row
        .try_get("seq")
        .map_err(|e| db("appending a message", e))?;
    sqlx::query("INSERT INTO messages_fts (rowid, agent, body) VALUES (?, ?, ?)")
        .bind(seq)
        .bind(token)
        .bind(message.searchable_text())
        .execute(&mut *tx)
        .await
        .map_err(|e| db("indexing a message", e))?;
    Ok(())
}

async fn insert_passage(
    tx: &mut SqliteConnection,
    passage: &Passage,
    token: &str,
) -> Result<(), StoreError> {
    let metadata =
        serde_json::to_string(&passage.metadata).map_err(|e| db("encoding passage metadata", e))?;
    let row = sqlx::query(
        "INSERT INTO passages (id, agent_id, text, embedding, metadata, created_at) VALUES (?, ?, ?, ?, ?, ?) \
         RETURNING seq",
    )
    .bind(passage.id.as_uuid())
    .bind(passage.agent_id.as_uuid())
    .bind(&passage.text)
    .bind(passage.embedding.as_ref().map(|e| vector_to_blob(&e.vector)))
    .bind(metadata)
    .bind(micros(passage.created_at))
    .fetch_one(&mut *tx)
    .await
    .map_err(|e| db("storing a passage", e))?;
    let seq: i64 = row.try_get("seq").map_err(|e| db("storing a passage", e))?;
    sqlx::query("INSERT INTO passages_fts (rowid, agent, body) VALUES (?, ?, ?)")
        .bind(seq)
        .bind(token)
        .bind(&passage.text)
        .execute(&mut *tx)
        .await
        .map_err(|e| db("indexing a passage", e))?;
    Ok(())
}

async fn delete_passage(
    tx: &mut SqliteConnection,
    agent: AgentId,
    passage: memgpt_core::ids::PassageId,
) -> Result<(), StoreError> {
    let seq: Option<i64> =
        sqlx::query_scalar("DELETE FROM passages WHERE id = ? AND agent_id = ? RETURNING seq")
            .bind(passage.as_uuid())
            .bind(agent.as_uuid())
            .fetch_optional(&mut *tx)
            .await
            .map_err(|e| db("deleting a passage", e))?;
    if let Some(seq) = seq {
        sqlx::query("DELETE FROM passages_fts WHERE rowid = ?")
            .bind(seq)
            .execute(&mut *tx)
            .await
            .map_err(|e| db("deleting a passage", e))?;
        sqlx::query("INSERT INTO passage_deletions (passage_seq, agent_id) VALUES (?, ?)")
            .bind(seq)
            .bind(agent.as_uuid())
            .execute(&mut *tx)
            .await
            .map_err(|e| db("recording a passage deletion", e))?;
    }
    Ok(())
}
