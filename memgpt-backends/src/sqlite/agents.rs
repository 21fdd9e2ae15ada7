//! Agent state and the atomic commit.

use async_trait::async_trait;
use memgpt_core::backend::DocumentBuilder;
use memgpt_core::embed::Embedding;
use memgpt_core::ids::AgentId;
use memgpt_core::message::Message;
use memgpt_core::retrieval::document_terms;
use memgpt_core::store::{
    AgentState, AgentStore, Commit, EmbeddingSpace, MAX_MESSAGE_WINDOWS, MessageEmbedding, Passage,
    PassageEmbedding, StateRecord, StoreError,
};
use sqlx::{Row, SqliteConnection};
use tracing::debug;

use super::SqliteStore;
use super::batch::Batch;
use super::blocks::write_attachments;
use super::documents::{count_documents, count_passage};
use super::meta::embedding_space;
use super::queue::{LIST_AGENTS, LOAD_AGENT, parse_queue, write_queue};
use super::write_tx::WriteTransaction;
use crate::codec::{corrupt, db, micros, vector_to_blob};
use crate::sql::CachedBuilder;

/// The state's row: everything but the queue, which has rows of its own.
fn state_json(state: &AgentState) -> Result<String, StoreError> {
    serde_json::to_string(&StateRecord::of(state)).map_err(|e| db("encoding agent state", e))
}

/// A state read with its queue ([`LOAD_AGENT`]).
fn parse_state((json, queue): &(String, Option<String>)) -> Result<AgentState, StoreError> {
    let mut state: AgentState =
        serde_json::from_str(json).map_err(|e| corrupt(format!("agent state: {e}")))?;
    state.fifo = parse_queue(queue.as_deref())?;
    Ok(state)
}

/// The agent id as FTS5 sees it (one token).
pub(super) fn agent_token(id: AgentId) -> String {
    id.as_uuid().simple().to_string()
}

#[async_trait]
impl AgentStore for SqliteStore {
    async fn create_agent(&self, state: &AgentState) -> Result<(), StoreError> {
        state.check_text()?;
        let (_writer, mut tx) = self.begin_commit().await?;
        insert_agent(&mut tx, state, state.version).await?;
        let mut batch = Batch::new("creating an agent's queue");
        write_queue(&mut tx, &mut batch, state, None, true).await?;
        batch.send(&mut tx).await?;
        if state.memory.has_shared() {
            write_attachments(&mut tx, state).await?;
        }
        finish_commit(tx).await
    }

    async fn load_agent(&self, id: AgentId) -> Result<Option<AgentState>, StoreError> {
        let row: Option<(String, Option<String>)> = sqlx::query_as(LOAD_AGENT)
            .bind(id.as_uuid())
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| db("loading an agent", e))?;
        row.as_ref().map(parse_state).transpose()
    }

    async fn agent_version(&self, id: AgentId) -> Result<Option<u64>, StoreError> {
        let version: Option<i64> = sqlx::query_scalar("SELECT version FROM agents WHERE id = ?")
            .bind(id.as_uuid())
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| db("reading an agent's version", e))?;
        Ok(version.map(|v| v as u64))
    }

    async fn agents_named(&self, name: &str) -> Result<Vec<AgentId>, StoreError> {
        let ids: Vec<uuid::Uuid> =
            sqlx::query_scalar("SELECT id FROM agents WHERE name = ? ORDER BY created_at, rowid")
                .bind(name)
                .fetch_all(&self.pool)
                .await
                .map_err(|e| db("finding agents by name", e))?;
        Ok(ids.into_iter().map(AgentId::from_uuid).collect())
    }

    async fn list_agents(&self) -> Result<Vec<AgentState>, StoreError> {
        let rows: Vec<(String, Option<String>)> = sqlx::query_as(LIST_AGENTS)
            .fetch_all(&self.pool)
            .await
            .map_err(|e| db("listing agents", e))?;
        rows.iter().map(parse_state).collect()
    }

    async fn delete_agent(&self, id: AgentId) -> Result<bool, StoreError> {
        let _writer = self.writer.lock().await;
        let mut tx = crate::sql::begin(
            &self.pool,
            Some("BEGIN IMMEDIATE"),
            "starting a transaction",
        )
        .await?;
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
        let mut batch = Batch::new("deleting an agent");
        count_documents(&mut batch, -documents, -terms);
        batch.send(&mut tx).await?;
        for sql in [
            "DELETE FROM message_terms WHERE rowid IN (SELECT seq FROM messages WHERE agent_id = ?)",
            "DELETE FROM message_embeddings WHERE agent_id = ?",
            "DELETE FROM messages WHERE agent_id = ?",
            "DELETE FROM passage_terms WHERE rowid IN (SELECT seq FROM passages WHERE agent_id = ?)",
            "DELETE FROM passage_tags WHERE agent_id = ?",
            "DELETE FROM passages WHERE agent_id = ?",
            "DELETE FROM passage_deletions WHERE agent_id = ?",
            "DELETE FROM archival_statistics WHERE agent_id = ?",
            "DELETE FROM block_attachments WHERE agent_id = ?",
            "DELETE FROM agent_queue WHERE agent_id = ?",
        ] {
            sqlx::query(sql)
                .bind(uuid)
                .execute(&mut *tx)
                .await
                .map_err(|e| db("deleting an agent", e))?;
        }
        give_numbers_again_if_faulty(&mut tx).await?;
        let deleted = sqlx::query("DELETE FROM agents WHERE id = ?")
            .bind(uuid)
            .execute(&mut *tx)
            .await
            .map_err(|e| db("deleting an agent", e))?
            .rows_affected()
            > 0;
        // The derived indexes forget the agent and move to the new generation with it; one
        // that misses this sees a generation it did not move to, and rebuilds.
        let generation: i64 = sqlx::query_scalar(
            "UPDATE memgpt_meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation' \
             RETURNING CAST(value AS INTEGER)",
        )
        .fetch_one(&mut *tx)
        .await
        .map_err(|e| db("deleting an agent", e))?;
        tx.commit()
            .await
            .map_err(|e| db("committing an agent deletion", e))?;
        self.after_delete(id, generation).await;
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
        let vectors: Vec<&Embedding> = embeddings.iter().map(|e| &e.embedding).collect();
        let mut write = self.embedding_write(&vectors).await?;
        let mut batch = Batch::new("storing message embeddings");
        insert_message_embeddings(&mut write.tx, &mut batch, agent, embeddings).await?;
        batch.send(&mut write.tx).await?;
        self.finish_embedding_write(write).await?;
        self.after_commit(agent, embeddings.len()).await;
        Ok(())
    }

    async fn embedding_space(&self) -> Result<Option<EmbeddingSpace>, StoreError> {
        self.space().await
    }

    async fn store_passage_embeddings(
        &self,
        agent: AgentId,
        embeddings: &[PassageEmbedding],
    ) -> Result<(), StoreError> {
        if embeddings.is_empty() {
            return Ok(());
        }
        let vectors: Vec<&Embedding> = embeddings.iter().map(|e| &e.embedding).collect();
        let mut write = self.embedding_write(&vectors).await?;
        let tx = &mut write.tx;
        let mut batch = Batch::new("storing passage embeddings");
        for e in embeddings {
            batch
                .statement("UPDATE passages SET embedding = ")
                .bind(vector_to_blob(&e.embedding.vector))
                .sql(" WHERE id = ")
                .bind(e.passage.as_uuid())
                .sql(" AND agent_id = ")
                .bind(agent.as_uuid())
                .sql(" AND embedding IS NULL");
            batch.send_if_full(tx).await?;
        }
        batch.send(tx).await?;
        self.finish_embedding_write(write).await?;
        // The usearch index replays rows newer than its watermark; passages embedded after the
        // fact may be older, so the agent's index is rebuilt on its next search.
        #[cfg(feature = "usearch")]
        if let Some(indexes) = &self.usearch {
            indexes.forget_agent(agent)?;
        }
        Ok(())
    }

    async fn clear_embeddings(&self) -> Result<(), StoreError> {
        let writer = self.writer.lock().await;
        let mut tx = crate::sql::begin(
            &self.pool,
            Some("BEGIN IMMEDIATE"),
            "starting to clear embeddings",
        )
        .await?;
        for (sql, what) in [
            (
                "DELETE FROM message_embeddings",
                "clearing message embeddings",
            ),
            (
                "UPDATE messages SET embedded = 0 WHERE embedded = 1",
                "clearing message embeddings",
            ),
            (
                "UPDATE passages SET embedding = NULL WHERE embedding IS NOT NULL",
                "clearing passage embeddings",
            ),
            (
                "DELETE FROM memgpt_meta WHERE key IN ('embedding_model', 'embedding_dimension')",
                "forgetting the embedding model",
            ),
        ] {
            sqlx::query(sql)
                .execute(&mut *tx)
                .await
                .map_err(|e| db(what, e))?;
        }
        tx.commit()
            .await
            .map_err(|e| db("committing cleared embeddings", e))?;
        self.space.clear();
        drop(writer);
        #[cfg(feature = "usearch")]
        for indexes in [&self.usearch, &self.recall_vectors].into_iter().flatten() {
            indexes.forget_all()?;
        }
        Ok(())
    }
}

/// A write of embeddings after the fact (`store_*_embeddings`): the writer lock, its
/// transaction, and the embedding space the vectors fix when the store had none.
struct EmbeddingWrite<'a> {
    _writer: tokio::sync::MutexGuard<'a, ()>,
    tx: sqlx::Transaction<'static, sqlx::Sqlite>,
    space: Option<EmbeddingSpace>,
}

impl SqliteStore {
    /// Takes the writer lock and opens the transaction that stores `vectors`, after checking
    /// them against the store's embedding space.
    async fn embedding_write(
        &self,
        vectors: &[&Embedding],
    ) -> Result<EmbeddingWrite<'_>, StoreError> {
        let writer = self.writer.lock().await;
        let mut tx = crate::sql::begin(
            &self.pool,
            Some("BEGIN IMMEDIATE"),
            "starting to store embeddings",
        )
        .await?;
        let space = fix_space(&mut tx, vectors, self.space.get().as_ref()).await?;
        Ok(EmbeddingWrite {
            _writer: writer,
            tx,
            space,
        })
    }

    /// Commits `write`, then remembers the space it fixed.
    async fn finish_embedding_write(&self, write: EmbeddingWrite<'_>) -> Result<(), StoreError> {
        let EmbeddingWrite {
            _writer: writer,
            tx,
            space,
        } = write;
        tx.commit()
            .await
            .map_err(|e| db("committing embeddings", e))?;
        drop(writer);
        if let Some(space) = space {
            self.space.set(space);
        }
        Ok(())
    }
}

/// Rejects embeddings of another space than the store holds; fixes the store's space with the
/// first one. Returns the space when there are embeddings. `known` is the space this process
/// already read or fixed (a store's space never changes once fixed), which saves the read.
async fn fix_space(
    tx: &mut SqliteConnection,
    embeddings: &[&Embedding],
    known: Option<&EmbeddingSpace>,
) -> Result<Option<EmbeddingSpace>, StoreError> {
    if embeddings.is_empty() {
        return Ok(None);
    }
    if let Some(known) = known {
        return EmbeddingSpace::settle(Some(known.clone()), embeddings.iter().copied());
    }
    let stored = embedding_space(&mut *tx).await?;
    let first_ever = stored.is_none();
    let space = EmbeddingSpace::settle(stored, embeddings.iter().copied())?;
    if let (true, Some(space)) = (first_ever, &space) {
        crate::sql::record_space::<SqliteStore>(space)
            .build()
            .execute(&mut *tx)
            .await
            .map_err(|e| db("recording the embedding model", e))?;
    }
    Ok(space)
}

/// Appends a message with its search document (its `messages` row, then its `message_terms`
/// row keyed by the new row's `seq`); returns the document's length.
fn insert_message(
    batch: &mut Batch,
    message: &Message,
    builder: &mut DocumentBuilder,
) -> Result<i64, StoreError> {
    let tool_calls = if message.tool_calls.is_empty() {
        None
    } else {
        Some(serde_json::to_string(&message.tool_calls).map_err(|e| db("encoding tool calls", e))?)
    };
    let document = builder.add(message);
    let length = document.len() as i64;
    let text = document.text();
    batch
        .values(
            "INSERT INTO messages (id, agent_id, kind, text, tool_calls, tool_call_id, name, \
             created_at, turn, document, document_length) VALUES (",
        )
        .push_bind(message.id.as_uuid())
        .push_bind(message.agent_id.as_uuid())
        .push_bind(message.kind.as_str())
        .push_bind(message.text.as_str())
        .push_bind(tool_calls)
        .push_bind(message.tool_call_id.as_deref())
        .push_bind(message.name.as_deref())
        .push_bind(micros(message.created_at))
        .push_bind(document.turn.map(|t| t as i64))
        .push_bind(text.clone())
        .push_bind(length)
        .push_unseparated(")");
    batch
        .values("INSERT INTO message_terms (rowid, agent, body) VALUES (last_insert_rowid(), ")
        .push_bind(agent_token(message.agent_id))
        .push_bind(text)
        .push_unseparated(")");
    Ok(length)
}

/// Stores embeddings of the agent's conversation messages, every window of a message before the
/// message is marked embedded (others and repeats are ignored).
async fn insert_message_embeddings(
    tx: &mut SqliteConnection,
    batch: &mut Batch,
    agent: AgentId,
    embeddings: &[MessageEmbedding],
) -> Result<(), StoreError> {
    // The embedding rows first (while their messages are still unembedded), then the marks.
    let embeddings: Vec<&MessageEmbedding> = embeddings
        .iter()
        .filter(|e| e.window < MAX_MESSAGE_WINDOWS)
        .collect();
    for e in &embeddings {
        batch
            .statement(
                "INSERT OR IGNORE INTO message_embeddings (message_seq, window_index, agent_id, embedding) \
                 SELECT seq, ",
            )
            .bind(i64::from(e.window))
            .sql(", agent_id, ")
            .bind(vector_to_blob(&e.embedding.vector))
            .sql(" FROM messages WHERE id = ")
            .bind(e.message.as_uuid())
            .sql(" AND agent_id = ")
            .bind(agent.as_uuid())
            .sql(" AND turn IS NOT NULL AND embedded = 0");
        batch.send_if_full(tx).await?;
    }
    let mut marked = std::collections::HashSet::new();
    for e in embeddings.iter().filter(|e| marked.insert(e.message)) {
        batch
            .statement("UPDATE messages SET embedded = 1 WHERE id = ")
            .bind(e.message.as_uuid())
            .sql(" AND agent_id = ")
            .bind(agent.as_uuid())
            .sql(" AND turn IS NOT NULL AND embedded = 0");
        batch.send_if_full(tx).await?;
    }
    Ok(())
}

/// Stores a passage with its search document and tags.
async fn insert_passage(
    tx: &mut SqliteConnection,
    batch: &mut Batch,
    passage: &Passage,
    token: &str,
) -> Result<(), StoreError> {
    let metadata =
        serde_json::to_string(&passage.metadata).map_err(|e| db("encoding passage metadata", e))?;
    batch
        .values(
            "INSERT INTO passages (id, agent_id, text, embedding, metadata, created_at, \
             valid_from, valid_to, superseded_by, retired_reason) VALUES (",
        )
        .push_bind(passage.id.as_uuid())
        .push_bind(passage.agent_id.as_uuid())
        .push_bind(passage.text.as_str())
        .push_bind(
            passage
                .embedding
                .as_ref()
                .map(|e| vector_to_blob(&e.vector)),
        )
        .push_bind(metadata)
        .push_bind(micros(passage.created_at))
        .push_bind(passage.valid_from.map(micros))
        .push_bind(passage.valid_to.map(micros))
        .push_bind(passage.superseded_by.map(|id| *id.as_uuid()))
        .push_bind(passage.retired_reason.clone())
        .push_unseparated(")");
    let words = document_terms(&passage.text);
    batch
        .values("INSERT INTO passage_terms (rowid, agent, body) VALUES (last_insert_rowid(), ")
        .push_bind(token)
        .push_bind(words.join(" "))
        .push_unseparated(")");
    count_passage(batch, passage.agent_id, 1, words.len() as i64);
    for tag in passage.tags() {
        batch
            .statement(
                "INSERT OR IGNORE INTO passage_tags (passage_seq, agent_id, tag) \
                 SELECT seq, agent_id, ",
            )
            .bind(tag.to_owned())
            .sql(" FROM passages WHERE id = ")
            .bind(passage.id.as_uuid());
    }
    batch.send_if_full(tx).await
}

async fn delete_passage(
    tx: &mut SqliteConnection,
    agent: AgentId,
    passage: memgpt_core::ids::PassageId,
) -> Result<(), StoreError> {
    let deleted: Option<(i64, String)> =
        sqlx::query_as("DELETE FROM passages WHERE id = ? AND agent_id = ? RETURNING seq, text")
            .bind(passage.as_uuid())
            .bind(agent.as_uuid())
            .fetch_optional(&mut *tx)
            .await
            .map_err(|e| db("deleting a passage", e))?;
    if let Some((seq, text)) = deleted {
        let mut batch = Batch::new("deleting a passage");
        count_passage(&mut batch, agent, -1, -(document_terms(&text).len() as i64));
        batch.send(&mut *tx).await?;
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
        give_numbers_again_if_faulty(tx).await?;
    }
    Ok(())
}

/// The seeded fault `fault.sqlite.reused_sequence_numbers` (see memgpt-core's `failpoint`):
/// makes SQLite give the numbers of deleted newest rows again, as it did before migration 12.
async fn give_numbers_again_if_faulty(tx: &mut SqliteConnection) -> Result<(), StoreError> {
    if !memgpt_core::failpoint::fault("fault.sqlite.reused_sequence_numbers") {
        return Ok(());
    }
    for table in ["messages", "passages", "message_embeddings"] {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE sqlite_sequence SET seq = (SELECT coalesce(max(seq), 0) FROM {table}) \
             WHERE name = '{table}'"
        )))
        .execute(&mut *tx)
        .await
        .map_err(|e| db("seeding a fault", e))?;
    }
    Ok(())
}

/// What a commit leaves for the store to remember: the embedding space it fixed (if any) and
/// the agent's document builder after its messages.
type Written = (Option<EmbeddingSpace>, Option<DocumentBuilder>);

/// Puts in `batch` the query of the version a careful commit checks.
fn check_version(batch: &mut Batch, agent: AgentId) {
    batch
        .query("SELECT version FROM agents WHERE id = ")
        .bind(agent.as_uuid());
}

/// Puts in `batch` the guard of an optimistic commit: a statement that ends the transaction
/// (`RAISE(ROLLBACK)` in the `commit_guard` trigger) unless the agent is at the version the
/// commit expects and the version and turn count `cached` continues, and writes nothing.
fn guard_version_and_turns(batch: &mut Batch, commit: &Commit, cached: &CachedBuilder) {
    let agent = commit.state.id.as_uuid();
    let expected = commit.state.version.checked_sub(1);
    let cached_version = (Some(cached.version) == expected).then_some(cached.version as i64);
    batch
        .statement("INSERT INTO commit_guard (ok) VALUES ((SELECT version = ")
        .bind(cached_version)
        .sql(" AND (SELECT coalesce(max(turn) + 1, 0) FROM messages WHERE agent_id = ")
        .bind(agent)
        .sql(" AND turn IS NOT NULL) = ")
        .bind(cached.builder.next_turn() as i64)
        .sql(" FROM agents WHERE id = ")
        .bind(agent)
        .sql(") IS 1)");
}

/// Reads the row of [`check_version`].
fn stored_version(batch: &mut Batch, agent: AgentId) -> Result<u64, StoreError> {
    let rows = batch.take_rows().unwrap_or_default();
    let row = rows.first().ok_or(StoreError::AgentNotFound(agent))?;
    let version: i64 = row
        .try_get(0)
        .map_err(|e| db("reading an agent's version", e))?;
    Ok(version as u64)
}

/// Commits a step's transaction (between the crash campaign's two failpoints).
async fn finish_commit(tx: sqlx::Transaction<'_, sqlx::Sqlite>) -> Result<(), StoreError> {
    memgpt_core::failpoint::hit("commit.before");
    tx.commit().await.map_err(|e| db("committing a step", e))?;
    memgpt_core::failpoint::hit("commit.after");
    Ok(())
}

impl SqliteStore {
    /// Starts a commit's transaction, after this process's other writers (the guard keeps
    /// the turn until the transaction ends). IMMEDIATE takes the write lock up front: the
    /// version check and the writes cannot interleave with another process's writer.
    pub(super) async fn begin_commit(
        &self,
    ) -> Result<
        (
            tokio::sync::MutexGuard<'_, ()>,
            sqlx::Transaction<'_, sqlx::Sqlite>,
        ),
        StoreError,
    > {
        let writer = self.writer.lock().await;
        let tx =
            crate::sql::begin(&self.pool, Some("BEGIN IMMEDIATE"), "starting a commit").await?;
        Ok((writer, tx))
    }

    /// One commit in one transaction: after the version check, or (`create`) creating the
    /// agent in the same transaction, as an import does.
    async fn write(&self, commit: &Commit, create: bool) -> Result<(), StoreError> {
        commit.check_text()?;
        let id = commit.state.id;
        let written = match self.builders.take(id) {
            Some(cached) if !create => self.write_optimistically(commit, cached).await?,
            _ => None,
        };
        let (space, builder) = match written {
            Some(written) => written,
            None => self.write_carefully(commit, create).await?,
        };
        if let Some(builder) = builder {
            self.builders.keep(id, commit.state.version, builder);
        }
        if let Some(space) = space {
            self.space.set(space);
        }
        let rows = commit.messages.len()
            + commit.message_embeddings.len()
            + commit.passages.len()
            + commit.deleted_passages.len();
        self.after_commit(id, rows).await;
        Ok(())
    }

    /// A step's usual commit, in one round trip when its writes fit one batch: `BEGIN`, a
    /// guard that ends the transaction unless the agent is still at the version and turn count
    /// `cached` (the builder this store's last commit of the agent left) continues, the writes,
    /// `COMMIT`. `None`, with everything rolled back, when the guard fails (another process
    /// committed, or the commit's version conflicts) or a write failed: the careful path then
    /// redoes the commit and reports any failure (a version conflict among them) as it always
    /// does.
    async fn write_optimistically(
        &self,
        commit: &Commit,
        cached: CachedBuilder,
    ) -> Result<Option<Written>, StoreError> {
        let mut batch = Batch::new("writing a step");
        let mut tx = WriteTransaction::begin(self, &mut batch).await?;
        guard_version_and_turns(&mut batch, commit, &cached);
        let known = self.space.get();
        let written = write_commit(
            tx.conn(),
            &mut batch,
            commit,
            false,
            known.as_ref(),
            Some(cached.builder),
        )
        .await;
        let Ok(written) = written else {
            tx.rollback().await;
            return Ok(None);
        };
        match tx.commit(&mut batch).await {
            Ok(()) => Ok(Some(written)),
            Err(e) => {
                debug!(agent = %commit.state.id, error = %e, "the optimistic commit did not apply; committing carefully");
                Ok(None)
            }
        }
    }

    /// A commit checked before it writes, its documents continuing the agent's latest turns as
    /// read from the database.
    async fn write_carefully(&self, commit: &Commit, create: bool) -> Result<Written, StoreError> {
        let id = commit.state.id;
        let mut batch = Batch::new("writing a step");
        let mut tx = WriteTransaction::begin(self, &mut batch).await?;
        let written = async {
            if create {
                batch.send(tx.conn()).await?;
                commit.check_version(0)?;
                insert_agent(tx.conn(), &commit.state, 0).await?;
                if commit.state.memory.has_shared() {
                    write_attachments(tx.conn(), &commit.state).await?;
                }
            } else {
                check_version(&mut batch, id);
                batch.send(tx.conn()).await?;
                commit.check_version(stored_version(&mut batch, id)?)?;
            }
            let known = self.space.get();
            write_commit(tx.conn(), &mut batch, commit, create, known.as_ref(), None).await
        }
        .await;
        match written {
            Ok(written) => {
                tx.commit(&mut batch).await?;
                Ok(written)
            }
            Err(e) => {
                tx.rollback().await;
                Err(e)
            }
        }
    }
}

/// Inserts an agent's row at `version` (its queue is written apart); an existing id is
/// [`StoreError::AgentExists`].
async fn insert_agent(
    tx: &mut SqliteConnection,
    state: &AgentState,
    version: u64,
) -> Result<(), StoreError> {
    let result = sqlx::query(
        "INSERT INTO agents (id, name, version, state, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
    )
    .bind(state.id.as_uuid())
    .bind(&state.name)
    .bind(version as i64)
    .bind(state_json(state)?)
    .bind(micros(state.created_at))
    .bind(micros(state.updated_at))
    .execute(&mut *tx)
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
///
/// `builder` continues the agent's search documents (read from its latest turns when `None`
/// and the commit has messages); the builder the commit ends with is returned with the space.
/// The writes go through `batch` (which may already hold a check to run first) and the last of
/// them are still in it on return, for the caller to send with its `COMMIT`; `create`: the
/// agent's row was just inserted (its queue is written whole).
async fn write_commit(
    tx: &mut SqliteConnection,
    batch: &mut Batch,
    commit: &Commit,
    create: bool,
    known: Option<&EmbeddingSpace>,
    builder: Option<DocumentBuilder>,
) -> Result<Written, StoreError> {
    let id = commit.state.id;
    let embeddings: Vec<&Embedding> = commit.embeddings().collect();
    let space = fix_space(&mut *tx, &embeddings, known).await?;
    let token = agent_token(id);
    let mut builder = builder;
    if !commit.messages.is_empty() {
        let builder = match &mut builder {
            Some(builder) => builder,
            None => builder.insert(builder_for(&mut *tx, id).await?),
        };
        let (mut documents, mut terms) = (0i64, 0i64);
        for message in &commit.messages {
            terms += insert_message(batch, message, builder)?;
            documents += 1;
            batch.send_if_full(tx).await?;
        }
        count_documents(batch, documents, terms);
    }
    insert_message_embeddings(&mut *tx, batch, id, &commit.message_embeddings).await?;
    for passage in &commit.passages {
        memgpt_core::failpoint::hit("passages.insert");
        insert_passage(&mut *tx, batch, passage, &token).await?;
    }
    for retired in &commit.retired_passages {
        memgpt_core::failpoint::hit("passages.retire");
        // An earlier end (a shorter time to live, an earlier retirement) stands.
        batch
            .statement("UPDATE passages SET valid_to = ")
            .bind(micros(retired.at))
            .sql(", superseded_by = ")
            .bind(retired.superseded_by.map(|p| *p.as_uuid()))
            .sql(", retired_reason = ")
            .bind(retired.reason.clone())
            .sql(" WHERE id = ")
            .bind(retired.id.as_uuid())
            .sql(" AND agent_id = ")
            .bind(id.as_uuid())
            .sql(" AND (valid_to IS NULL OR valid_to > ")
            .bind(micros(retired.at))
            .sql(")");
        batch.send_if_full(tx).await?;
    }
    if !commit.deleted_passages.is_empty() {
        batch.send(tx).await?;
        for passage_id in &commit.deleted_passages {
            delete_passage(&mut *tx, id, *passage_id).await?;
        }
    }
    if commit.attachments_changed {
        batch.send(tx).await?;
        write_attachments(&mut *tx, &commit.state).await?;
    }
    write_queue(tx, batch, &commit.state, commit.queue.as_ref(), create).await?;
    batch
        .statement("UPDATE agents SET name = ")
        .bind(commit.state.name.as_str())
        .sql(", version = ")
        .bind(commit.state.version as i64)
        .sql(", state = ")
        .bind(state_json(&commit.state)?)
        .sql(", updated_at = ")
        .bind(micros(commit.state.updated_at))
        .sql(" WHERE id = ")
        .bind(id.as_uuid());
    Ok((space, builder))
}

/// A builder continuing the agent's documents: its latest conversation turns (read in `tx`).
async fn builder_for(
    tx: &mut SqliteConnection,
    agent: AgentId,
) -> Result<DocumentBuilder, StoreError> {
    let rows = crate::sql::latest_turns::<SqliteStore>(agent)
        .build()
        .fetch_all(&mut *tx)
        .await
        .map_err(|e| db("reading the latest turns", e))?;
    crate::sql::builder_from_latest_turns::<SqliteStore>(&rows)
}
