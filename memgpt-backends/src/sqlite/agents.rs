//! Agent state and the atomic commit.

use async_trait::async_trait;
use memgpt_core::embed::Embedding;
use memgpt_core::ids::AgentId;
use memgpt_core::message::Message;
use memgpt_core::retrieval::DocumentBuilder;
use memgpt_core::store::{
    AgentState, AgentStore, Commit, EmbeddingSpace, MessageEmbedding, Passage, StoreError,
};
use sqlx::{Row, SqliteConnection};

use super::documents::{builder_for, count_documents, passage_document, write_message_document};
use super::{SqliteStore, embedding_space};
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
        state.check_text()?;
        insert_agent(&self.pool, state, state.version).await
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
        let row = sqlx::query(
            "SELECT count(*) AS documents, coalesce(sum(document_length), 0) AS terms FROM messages WHERE agent_id = ?",
        )
        .bind(uuid)
        .fetch_one(&mut *tx)
        .await
        .map_err(|e| db("deleting an agent", e))?;
        let documents: i64 = row
            .try_get("documents")
            .map_err(|e| db("deleting an agent", e))?;
        let terms: i64 = row
            .try_get("terms")
            .map_err(|e| db("deleting an agent", e))?;
        count_documents(&mut tx, -documents, -terms).await?;
        for sql in [
            "DELETE FROM message_terms WHERE rowid IN (SELECT seq FROM messages WHERE agent_id = ?)",
            "DELETE FROM message_embeddings WHERE agent_id = ?",
            "DELETE FROM messages WHERE agent_id = ?",
            "DELETE FROM passage_terms WHERE rowid IN (SELECT seq FROM passages WHERE agent_id = ?)",
            "DELETE FROM passage_tags WHERE agent_id = ?",
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
        self.write(commit, false).await
    }

    async fn create_agent_with(&self, commit: &Commit) -> Result<(), StoreError> {
        self.write(commit, true).await
    }

    async fn store_message_embeddings(
        &self,
        agent: AgentId,
        embeddings: &[MessageEmbedding],
    ) -> Result<(), StoreError> {
        if embeddings.is_empty() {
            return Ok(());
        }
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(|e| db("starting to store embeddings", e))?;
        let vectors: Vec<&Embedding> = embeddings.iter().map(|e| &e.embedding).collect();
        let space = fix_space(&mut tx, &vectors).await?;
        insert_message_embeddings(&mut tx, agent, embeddings).await?;
        tx.commit()
            .await
            .map_err(|e| db("committing message embeddings", e))?;
        if let Some(space) = space {
            let _ = self.space.set(space);
        }
        self.after_commit(agent, embeddings.len()).await;
        Ok(())
    }

    async fn embedding_space(&self) -> Result<Option<EmbeddingSpace>, StoreError> {
        self.space().await
    }
}

/// Rejects embeddings of another space than the store holds; fixes the store's space with the
/// first one. Returns the space when there are embeddings.
async fn fix_space(
    tx: &mut SqliteConnection,
    embeddings: &[&Embedding],
) -> Result<Option<EmbeddingSpace>, StoreError> {
    if embeddings.is_empty() {
        return Ok(None);
    }
    let stored = embedding_space(&mut *tx).await?;
    let first_ever = stored.is_none();
    let space = EmbeddingSpace::settle(stored, embeddings.iter().copied())?;
    if let (true, Some(space)) = (first_ever, &space) {
        for (key, value) in [
            ("embedding_model", space.model.clone()),
            ("embedding_dimension", space.dimension.to_string()),
        ] {
            sqlx::query("INSERT INTO memgpt_meta (key, value) VALUES (?, ?)")
                .bind(key)
                .bind(value)
                .execute(&mut *tx)
                .await
                .map_err(|e| db("recording the embedding model", e))?;
        }
    }
    Ok(space)
}

/// Appends a message with its search document; returns the document's length.
async fn insert_message(
    tx: &mut SqliteConnection,
    message: &Message,
    builder: &mut DocumentBuilder,
) -> Result<i64, StoreError> {
    let tool_calls = if message.tool_calls.is_empty() {
        None
    } else {
        Some(serde_json::to_string(&message.tool_calls).map_err(|e| db("encoding tool calls", e))?)
    };
    let document = builder.add(message);
    let row = sqlx::query(
        "INSERT INTO messages (id, agent_id, kind, text, tool_calls, tool_call_id, name, created_at, turn, \
         document, document_length) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq",
    )
    .bind(message.id.as_uuid())
    .bind(message.agent_id.as_uuid())
    .bind(message.kind.as_str())
    .bind(&message.text)
    .bind(tool_calls)
    .bind(&message.tool_call_id)
    .bind(&message.name)
    .bind(micros(message.created_at))
    .bind(document.turn.map(|t| t as i64))
    .bind(document.text())
    .bind(document.len() as i64)
    .fetch_one(&mut *tx)
    .await
    .map_err(|e| db("appending a message", e))?;
    let seq: i64 = row
        .try_get("seq")
        .map_err(|e| db("appending a message", e))?;
    write_message_document(tx, seq, message.agent_id, &document, false).await?;
    Ok(document.len() as i64)
}

/// Stores embeddings of the agent's conversation messages (others and repeats are ignored).
async fn insert_message_embeddings(
    tx: &mut SqliteConnection,
    agent: AgentId,
    embeddings: &[MessageEmbedding],
) -> Result<(), StoreError> {
    for e in embeddings {
        let seq: Option<i64> = sqlx::query_scalar(
            "UPDATE messages SET embedded = 1 WHERE id = ? AND agent_id = ? AND turn IS NOT NULL \
             AND embedded = 0 RETURNING seq",
        )
        .bind(e.message.as_uuid())
        .bind(agent.as_uuid())
        .fetch_optional(&mut *tx)
        .await
        .map_err(|e| db("storing a message embedding", e))?;
        let Some(seq) = seq else { continue };
        sqlx::query(
            "INSERT INTO message_embeddings (message_seq, agent_id, embedding) VALUES (?, ?, ?)",
        )
        .bind(seq)
        .bind(agent.as_uuid())
        .bind(vector_to_blob(&e.embedding.vector))
        .execute(&mut *tx)
        .await
        .map_err(|e| db("storing a message embedding", e))?;
    }
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
    sqlx::query("INSERT INTO passage_terms (rowid, agent, body) VALUES (?, ?, ?)")
        .bind(seq)
        .bind(token)
        .bind(passage_document(passage))
        .execute(&mut *tx)
        .await
        .map_err(|e| db("indexing a passage", e))?;
    for tag in passage.tags() {
        sqlx::query(
            "INSERT OR IGNORE INTO passage_tags (passage_seq, agent_id, tag) VALUES (?, ?, ?)",
        )
        .bind(seq)
        .bind(passage.agent_id.as_uuid())
        .bind(tag)
        .execute(&mut *tx)
        .await
        .map_err(|e| db("tagging a passage", e))?;
    }
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
        for sql in [
            "DELETE FROM passage_terms WHERE rowid = ?",
            "DELETE FROM passage_tags WHERE passage_seq = ?",
        ] {
            sqlx::query(sql)
                .bind(seq)
                .execute(&mut *tx)
                .await
                .map_err(|e| db("deleting a passage", e))?;
        }
        sqlx::query("INSERT INTO passage_deletions (passage_seq, agent_id) VALUES (?, ?)")
            .bind(seq)
            .bind(agent.as_uuid())
            .execute(&mut *tx)
            .await
            .map_err(|e| db("recording a passage deletion", e))?;
    }
    Ok(())
}

impl SqliteStore {
    /// One commit in one transaction: after the version check, or (`create`) creating the
    /// agent in the same transaction, as an import does.
    async fn write(&self, commit: &Commit, create: bool) -> Result<(), StoreError> {
        commit.check_text()?;
        let id = commit.state.id;
        // IMMEDIATE takes the write lock up front: the version check and the writes cannot
        // interleave with another writer's.
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(|e| db("starting a commit", e))?;
        if create {
            commit.check_version(0)?;
            insert_agent(&mut *tx, &commit.state, 0).await?;
        } else {
            let current: Option<i64> =
                sqlx::query_scalar("SELECT version FROM agents WHERE id = ?")
                    .bind(id.as_uuid())
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(|e| db("reading an agent's version", e))?;
            commit.check_version(current.ok_or(StoreError::AgentNotFound(id))? as u64)?;
        }
        let space = write_commit(&mut tx, commit).await?;
        memgpt_core::failpoint::hit("commit.before");
        tx.commit().await.map_err(|e| db("committing a step", e))?;
        memgpt_core::failpoint::hit("commit.after");
        if let Some(space) = space {
            let _ = self.space.set(space);
        }
        let rows = commit.messages.len()
            + commit.message_embeddings.len()
            + commit.passages.len()
            + commit.deleted_passages.len();
        self.after_commit(id, rows).await;
        Ok(())
    }
}

/// Inserts an agent's row at `version`; an existing id is [`StoreError::AgentExists`].
async fn insert_agent<'c, E>(
    executor: E,
    state: &AgentState,
    version: u64,
) -> Result<(), StoreError>
where
    E: sqlx::Executor<'c, Database = sqlx::Sqlite>,
{
    let result = sqlx::query(
        "INSERT INTO agents (id, name, version, state, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
    )
    .bind(state.id.as_uuid())
    .bind(&state.name)
    .bind(version as i64)
    .bind(state_json(state)?)
    .bind(micros(state.created_at))
    .bind(micros(state.updated_at))
    .execute(executor)
    .await;
    match result {
        Ok(_) => Ok(()),
        Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
            Err(StoreError::AgentExists(state.id))
        }
        Err(e) => Err(db("creating an agent", e)),
    }
}

/// Everything a commit writes after its version check: messages (with their search documents
/// and embeddings), passages, deletions and the new state. Returns the embedding space the
/// commit fixed, if it fixed one.
async fn write_commit(
    tx: &mut SqliteConnection,
    commit: &Commit,
) -> Result<Option<EmbeddingSpace>, StoreError> {
    let id = commit.state.id;
    let embeddings: Vec<&Embedding> = commit.embeddings().collect();
    let space = fix_space(&mut *tx, &embeddings).await?;
    let token = agent_token(id);
    if !commit.messages.is_empty() {
        let mut builder = builder_for(&mut *tx, id).await?;
        let (mut documents, mut terms) = (0i64, 0i64);
        for message in &commit.messages {
            let length = insert_message(&mut *tx, message, &mut builder).await?;
            documents += 1;
            terms += length;
        }
        count_documents(&mut *tx, documents, terms).await?;
    }
    insert_message_embeddings(&mut *tx, id, &commit.message_embeddings).await?;
    for passage in &commit.passages {
        memgpt_core::failpoint::hit("passages.insert");
        insert_passage(&mut *tx, passage, &token).await?;
    }
    for passage_id in &commit.deleted_passages {
        delete_passage(&mut *tx, id, *passage_id).await?;
    }
    sqlx::query("UPDATE agents SET name = ?, version = ?, state = ?, updated_at = ? WHERE id = ?")
        .bind(&commit.state.name)
        .bind(commit.state.version as i64)
        .bind(state_json(&commit.state)?)
        .bind(micros(commit.state.updated_at))
        .bind(id.as_uuid())
        .execute(&mut *tx)
        .await
        .map_err(|e| db("writing agent state", e))?;
    Ok(space)
}
