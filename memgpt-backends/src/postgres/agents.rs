//! Agent state, the atomic commit, and the cross-process agent lock.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use memgpt_core::backend::DocumentBuilder;
use memgpt_core::embed::Embedding;
use memgpt_core::ids::AgentId;
use memgpt_core::message::Message;
use memgpt_core::store::{
    AgentLease, AgentState, AgentStore, Commit, EmbeddingSpace, MAX_MESSAGE_WINDOWS,
    MessageEmbedding, Passage, PassageEmbedding, PassageRetirement, StateRecord, StoreError,
};
use sqlx::pool::PoolConnection;
use sqlx::types::Json;
use sqlx::{PgConnection, Postgres};
use tracing::{debug, info, warn};

use super::blocks::write_attachments;
use super::documents::{Collection, count_documents, passage_search_text};
use super::message_rows::{MessageRows, insert_message_rows};
use super::queue::{LIST_AGENTS, LOAD_AGENT, StateRow, state_of, write_queue};
use super::{PgStore, SPACE_LOCK, agent_lock_key, read_space};
use crate::codec::db;

#[async_trait]
impl AgentStore for PgStore {
    async fn create_agent(&self, state: &AgentState) -> Result<(), StoreError> {
        state.check_text()?;
        let mut tx = crate::sql::begin(&self.pool, None, "starting to create an agent").await?;
        insert_agent(&mut *tx, state, state.version).await?;
        write_queue(&mut tx, state, None, true).await?;
        if state.memory.has_shared() {
            write_attachments(&mut tx, state).await?;
        }
        tx.commit()
            .await
            .map_err(|e| db("committing a new agent", e))
    }

    async fn load_agent(&self, id: AgentId) -> Result<Option<AgentState>, StoreError> {
        let row: Option<StateRow> = sqlx::query_as(LOAD_AGENT)
            .bind(id.as_uuid())
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| db("loading an agent", e))?;
        Ok(row.map(state_of))
    }

    async fn agent_version(&self, id: AgentId) -> Result<Option<u64>, StoreError> {
        let version: Option<i64> = sqlx::query_scalar("SELECT version FROM agents WHERE id = $1")
            .bind(id.as_uuid())
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| db("reading an agent's version", e))?;
        Ok(version.map(|v| v as u64))
    }

    async fn agents_named(&self, name: &str) -> Result<Vec<AgentId>, StoreError> {
        let ids: Vec<uuid::Uuid> =
            sqlx::query_scalar("SELECT id FROM agents WHERE name = $1 ORDER BY created_at, seq")
                .bind(name)
                .fetch_all(&self.pool)
                .await
                .map_err(|e| db("finding agents by name", e))?;
        Ok(ids.into_iter().map(AgentId::from_uuid).collect())
    }

    async fn list_agents(&self) -> Result<Vec<AgentState>, StoreError> {
        let rows: Vec<StateRow> = sqlx::query_as(LIST_AGENTS)
            .fetch_all(&self.pool)
            .await
            .map_err(|e| db("listing agents", e))?;
        Ok(rows.into_iter().map(state_of).collect())
    }

    async fn delete_agent(&self, id: AgentId) -> Result<bool, StoreError> {
        let mut tx = crate::sql::begin(&self.pool, None, "starting a transaction").await?;
        let uuid = id.as_uuid();
        // The agent's row first: that waits for a commit in flight and makes later ones fail
        // with AgentNotFound, so nothing is appended after the deletes below.
        let deleted = sqlx::query("DELETE FROM agents WHERE id = $1")
            .bind(uuid)
            .execute(&mut *tx)
            .await
            .map_err(|e| db("deleting an agent", e))?
            .rows_affected()
            > 0;
        for sql in [
            "DELETE FROM message_embeddings WHERE agent_id = $1",
            "DELETE FROM messages WHERE agent_id = $1",
            "DELETE FROM recall_statistics WHERE agent_id = $1",
            "DELETE FROM archival_statistics WHERE agent_id = $1",
            "DELETE FROM passages WHERE agent_id = $1",
            "DELETE FROM agent_embedded_counts WHERE agent_id = $1",
            "DELETE FROM block_attachments WHERE agent_id = $1",
            "DELETE FROM agent_queue WHERE agent_id = $1",
        ] {
            sqlx::query(sql)
                .bind(uuid)
                .execute(&mut *tx)
                .await
                .map_err(|e| db("deleting an agent", e))?;
        }
        tx.commit()
            .await
            .map_err(|e| db("committing an agent deletion", e))?;
        self.builders.take(id);
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
        let mut tx = crate::sql::begin(&self.pool, None, "starting to store embeddings").await?;
        let vectors: Vec<&Embedding> = embeddings.iter().map(|e| &e.embedding).collect();
        let space = self.check_embeddings(&mut tx, &vectors).await?;
        insert_message_embeddings(&mut tx, agent, embeddings).await?;
        tx.commit()
            .await
            .map_err(|e| db("committing message embeddings", e))?;
        if let Some(space) = space {
            self.remember_space(space);
        }
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
        let Some(first) = embeddings.first() else {
            return Ok(());
        };
        let mut tx =
            crate::sql::begin(&self.pool, None, "starting to store passage embeddings").await?;
        let vectors: Vec<&Embedding> = embeddings.iter().map(|e| &e.embedding).collect();
        let space = self.check_embeddings(&mut tx, &vectors).await?;
        let dimension = first.embedding.dimension() as i32;
        let ids: Vec<uuid::Uuid> = embeddings.iter().map(|e| *e.passage.as_uuid()).collect();
        let mut flat: Vec<f32> = Vec::with_capacity(embeddings.len() * dimension as usize);
        for e in embeddings {
            flat.extend_from_slice(&e.embedding.vector);
        }
        let updated = sqlx::query(
            "UPDATE passages p SET embedding = (($3::real[])[(u.ord - 1) * $4 + 1 : u.ord * $4])::vector \
             FROM UNNEST($2::uuid[]) WITH ORDINALITY AS u(id, ord) \
             WHERE p.id = u.id AND p.agent_id = $1 AND p.embedding IS NULL",
        )
        .bind(agent.as_uuid())
        .bind(ids)
        .bind(flat)
        .bind(dimension)
        .execute(&mut *tx)
        .await
        .map_err(|e| db("storing passage embeddings", e))?
        .rows_affected();
        if updated > 0 {
            sqlx::query(
                "INSERT INTO agent_embedded_counts (agent_id, embedded) VALUES ($1, $2) \
                 ON CONFLICT (agent_id) DO UPDATE SET embedded = agent_embedded_counts.embedded + EXCLUDED.embedded",
            )
            .bind(agent.as_uuid())
            .bind(updated as i64)
            .execute(&mut *tx)
            .await
            .map_err(|e| db("counting embedded passages", e))?;
        }
        tx.commit()
            .await
            .map_err(|e| db("committing passage embeddings", e))?;
        if let Some(space) = space {
            self.remember_space(space);
        }
        Ok(())
    }

    async fn clear_embeddings(&self) -> Result<(), StoreError> {
        let mut tx = crate::sql::begin(&self.pool, None, "starting to clear embeddings").await?;
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(SPACE_LOCK)
            .execute(&mut *tx)
            .await
            .map_err(|e| db("waiting for the embedding space lock", e))?;
        for (sql, what) in [
            (
                "DELETE FROM message_embeddings",
                "clearing message embeddings",
            ),
            (
                "UPDATE messages SET embedded = false WHERE embedded",
                "clearing message embeddings",
            ),
            (
                "UPDATE passages SET embedding = NULL WHERE embedding IS NOT NULL",
                "clearing passage embeddings",
            ),
            (
                "DELETE FROM agent_embedded_counts",
                "clearing embedded counts",
            ),
            // The HNSW indexes are over vectors of the old dimension; the next space makes new
            // ones.
            (
                "DROP INDEX IF EXISTS passages_embedding_hnsw",
                "dropping an HNSW index",
            ),
            (
                "DROP INDEX IF EXISTS message_embeddings_hnsw",
                "dropping an HNSW index",
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
        self.forget_space();
        Ok(())
    }

    async fn lock_agent(&self, id: AgentId) -> Result<Box<dyn AgentLease>, StoreError> {
        let key = agent_lock_key(&self.schema, id.as_uuid());
        // From the pool of lock connections: leases held by steps never starve their commits.
        let conn = self
            .locks
            .acquire()
            .await
            .map_err(|e| db("taking a connection for an agent lock", e))?;
        // Until the lock is granted, dropping this (a cancelled wait) closes the connection:
        // returned to the pool, it would still get the lock when the server grants it.
        let mut waiting = Waiting(Some(conn));
        if let Some(conn) = waiting.0.as_mut() {
            sqlx::query("SELECT pg_advisory_lock($1)")
                .bind(key)
                .execute(&mut **conn)
                .await
                .map_err(|e| db("taking an agent lock", e))?;
        }
        debug!(agent = %id, "agent lock taken");
        Ok(Box::new(PgLease {
            conn: waiting.0.take(),
            key,
            agent: id,
        }))
    }
}

impl PgStore {
    /// One commit in one transaction: after the version check, or (`create`) creating the
    /// agent in the same transaction, as an import does.
    async fn write(&self, commit: &Commit, create: bool) -> Result<(), StoreError> {
        commit.check_text()?;
        let id = commit.state.id;
        if !create
            && let Some(queue) = super::step::usual_step(commit)
            && let Some(cached) = self.builders.take(id)
            && let Some(builder) = self.write_step(commit, queue, cached).await?
        {
            self.builders.keep(id, commit.state.version, builder);
            return Ok(());
        }
        let (space, builder) = self.write_carefully(commit, create).await?;
        if let Some(builder) = builder {
            self.builders.keep(id, commit.state.version, builder);
        }
        if let Some(space) = space {
            self.remember_space(space);
        }
        Ok(())
    }

    /// A commit in a transaction, checked before it writes (or creating the agent), its
    /// documents continuing the agent's latest turns as read from the database. Returns the
    /// embedding space the commit fixed and the document builder it ended with, if any.
    async fn write_carefully(
        &self,
        commit: &Commit,
        create: bool,
    ) -> Result<(Option<EmbeddingSpace>, Option<DocumentBuilder>), StoreError> {
        let id = commit.state.id;
        let mut tx = crate::sql::begin(&self.pool, None, "starting a commit").await?;
        if create {
            commit.check_version(0)?;
            insert_agent(&mut *tx, &commit.state, 0).await?;
            if commit.state.memory.has_shared() {
                write_attachments(&mut tx, &commit.state).await?;
            }
        } else {
            // The row lock makes concurrent commits of this agent take turns; each then sees
            // the version the previous one wrote.
            let current: Option<i64> =
                sqlx::query_scalar("SELECT version FROM agents WHERE id = $1 FOR UPDATE")
                    .bind(id.as_uuid())
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(|e| db("reading an agent's version", e))?;
            commit.check_version(current.ok_or(StoreError::AgentNotFound(id))? as u64)?;
        }
        let written = self.write_commit(&mut tx, commit, create).await?;
        memgpt_core::failpoint::hit("commit.before");
        tx.commit().await.map_err(|e| db("committing a step", e))?;
        memgpt_core::failpoint::hit("commit.after");
        Ok(written)
    }

    /// Everything a commit writes after its version check (messages, embeddings, passages,
    /// deletions, the new state), inside the caller's transaction. Returns the embedding space
    /// the commit fixed, if it fixed one, and the document builder its messages ended with.
    /// `create`: the agent's row was just inserted (its queue is written whole).
    async fn write_commit(
        &self,
        tx: &mut PgConnection,
        commit: &Commit,
        create: bool,
    ) -> Result<(Option<EmbeddingSpace>, Option<DocumentBuilder>), StoreError> {
        let id = commit.state.id;
        let embeddings: Vec<&Embedding> = commit.embeddings().collect();
        let space = self.check_embeddings(&mut *tx, &embeddings).await?;
        let mut builder = None;
        if !commit.messages.is_empty() {
            let builder = builder.insert(builder_for(&mut *tx, id).await?);
            let terms = insert_messages(&mut *tx, &commit.messages, builder).await?;
            count_documents(
                &mut *tx,
                Collection::Messages,
                id,
                commit.messages.len() as i64,
                terms,
            )
            .await?;
        }
        insert_message_embeddings(&mut *tx, id, &commit.message_embeddings).await?;
        // Deletions before insertions, as in the reference store: a passage both added and
        // deleted by one commit stays.
        let mut embedded_delta = commit
            .passages
            .iter()
            .filter(|p| p.embedding.is_some())
            .count() as i64;
        if !commit.deleted_passages.is_empty() {
            let ids: Vec<uuid::Uuid> = commit
                .deleted_passages
                .iter()
                .map(|p| *p.as_uuid())
                .collect();
            let (deleted_embedded, deleted, deleted_terms): (i64, i64, i64) = sqlx::query_as(
                "WITH gone AS (DELETE FROM passages WHERE agent_id = $1 AND id = ANY($2) \
                 RETURNING embedding IS NOT NULL AS embedded, cardinality(string_to_array(search_text, ' ')) AS terms) \
                 SELECT count(*) FILTER (WHERE embedded), count(*), coalesce(sum(terms), 0)::bigint FROM gone",
            )
            .bind(id.as_uuid())
            .bind(ids)
            .fetch_one(&mut *tx)
            .await
            .map_err(|e| db("deleting passages", e))?;
            embedded_delta -= deleted_embedded;
            count_documents(&mut *tx, Collection::Passages, id, -deleted, -deleted_terms).await?;
        }
        let added_terms = insert_passages(&mut *tx, &commit.passages, space.as_ref()).await?;
        retire_passages(&mut *tx, id, &commit.retired_passages).await?;
        count_documents(
            &mut *tx,
            Collection::Passages,
            id,
            commit.passages.len() as i64,
            added_terms,
        )
        .await?;
        if embedded_delta != 0 {
            sqlx::query(
                "INSERT INTO agent_embedded_counts (agent_id, embedded) VALUES ($1, $2) \
                 ON CONFLICT (agent_id) DO UPDATE SET embedded = agent_embedded_counts.embedded + EXCLUDED.embedded",
            )
            .bind(id.as_uuid())
            .bind(embedded_delta)
            .execute(&mut *tx)
            .await
            .map_err(|e| db("counting embedded passages", e))?;
        }
        if commit.attachments_changed {
            write_attachments(&mut *tx, &commit.state).await?;
        }
        write_queue(&mut *tx, &commit.state, commit.queue.as_ref(), create).await?;
        sqlx::query(
            "UPDATE agents SET name = $1, version = $2, state = $3, updated_at = $4 WHERE id = $5",
        )
        .bind(&commit.state.name)
        .bind(commit.state.version as i64)
        .bind(Json(StateRecord::of(&commit.state)))
        .bind(commit.state.updated_at)
        .bind(id.as_uuid())
        .execute(&mut *tx)
        .await
        .map_err(|e| db("writing agent state", e))?;
        Ok((space, builder))
    }

    /// Rejects embeddings of another model or dimension than the store holds. The first
    /// embedded passage fixes the space: recorded in `memgpt_meta` and given its HNSW index in
    /// this transaction, under [`SPACE_LOCK`] so two first commits cannot fix different spaces.
    /// Returns the space when the commit has embeddings.
    async fn check_embeddings(
        &self,
        tx: &mut PgConnection,
        embeddings: &[&Embedding],
    ) -> Result<Option<EmbeddingSpace>, StoreError> {
        if embeddings.is_empty() {
            return Ok(None);
        }
        // Read on this transaction's connection: a second one from the pool could wait forever
        // while every connection is in a commit.
        let stored = match self.known_space() {
            Some(space) => Some(space),
            None => match read_space(&mut *tx).await? {
                Some(space) => Some(space),
                None => {
                    sqlx::query("SELECT pg_advisory_xact_lock($1)")
                        .bind(SPACE_LOCK)
                        .execute(&mut *tx)
                        .await
                        .map_err(|e| db("waiting for the embedding space lock", e))?;
                    // Another commit may have fixed it while this one waited.
                    read_space(&mut *tx).await?
                }
            },
        };
        let first_ever = stored.is_none();
        let space = EmbeddingSpace::settle(stored, embeddings.iter().copied())?;
        if let (true, Some(space)) = (first_ever, &space) {
            fix_space(tx, space).await?;
        }
        Ok(space)
    }
}

/// Records `space` as the store's and creates the HNSW index over vectors of its dimension
/// (the caller holds [`SPACE_LOCK`] in this transaction).
async fn fix_space(tx: &mut PgConnection, space: &EmbeddingSpace) -> Result<(), StoreError> {
    if space.dimension == 0 {
        return Err(StoreError::InvalidQuery(
            "pgvector cannot store an embedding of dimension 0".into(),
        ));
    }
    crate::sql::record_space::<PgStore>(space)
        .build()
        .execute(&mut *tx)
        .await
        .map_err(|e| db("recording the embedding model", e))?;
    info!(model = %space.model, dimension = space.dimension, "fixing the store's embedding space and creating its HNSW indexes");
    PgStore::create_vector_indexes(tx, space.dimension).await
}

/// Inserts an agent's row at `version` (its queue is written apart); an existing id is [`StoreError::AgentExists`].
async fn insert_agent<'c, E>(
    executor: E,
    state: &AgentState,
    version: u64,
) -> Result<(), StoreError>
where
    E: sqlx::Executor<'c, Database = sqlx::Postgres>,
{
    let inserted = sqlx::query(
        "INSERT INTO agents (id, name, version, state, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6) \
         ON CONFLICT (id) DO NOTHING",
    )
    .bind(state.id.as_uuid())
    .bind(&state.name)
    .bind(version as i64)
    .bind(Json(StateRecord::of(state)))
    .bind(state.created_at)
    .bind(state.updated_at)
    .execute(executor)
    .await
    .map_err(|e| db("creating an agent", e))?
    .rows_affected();
    if inserted == 0 {
        return Err(StoreError::AgentExists(state.id));
    }
    Ok(())
}

/// Appends messages in order with their search documents (one statement; `seq` follows the
/// order given); returns how many terms the documents hold.
async fn insert_messages(
    tx: &mut PgConnection,
    messages: &[Message],
    builder: &mut DocumentBuilder,
) -> Result<i64, StoreError> {
    if messages.is_empty() {
        return Ok(0);
    }
    let rows = MessageRows::new(messages, builder)?;
    let terms = rows.terms;
    rows.bind(sqlx::query(insert_message_rows!("true")))
        .execute(&mut *tx)
        .await
        .map_err(|e| db("appending messages", e))?;
    Ok(terms)
}

/// Stores embeddings of the agent's conversation messages, all windows of a message with the
/// mark that it is embedded (others and repeats are ignored).
async fn insert_message_embeddings(
    tx: &mut PgConnection,
    agent: AgentId,
    embeddings: &[MessageEmbedding],
) -> Result<(), StoreError> {
    let embeddings: Vec<&MessageEmbedding> = embeddings
        .iter()
        .filter(|e| e.window < MAX_MESSAGE_WINDOWS)
        .collect();
    let Some(first) = embeddings.first() else {
        return Ok(());
    };
    let dimension = first.embedding.dimension() as i32;
    let ids: Vec<uuid::Uuid> = embeddings.iter().map(|e| *e.message.as_uuid()).collect();
    let windows: Vec<i32> = embeddings
        .iter()
        .map(|e| i32::try_from(e.window).unwrap_or(i32::MAX))
        .collect();
    let mut vectors: Vec<f32> = Vec::with_capacity(embeddings.len() * dimension as usize);
    for e in &embeddings {
        vectors.extend_from_slice(&e.embedding.vector);
    }
    sqlx::query(
        "WITH input AS (SELECT * FROM UNNEST($2::uuid[], $5::integer[]) WITH ORDINALITY AS u(id, win, ord)), \
         marked AS ( \
             UPDATE messages m SET embedded = true \
             WHERE m.agent_id = $1 AND m.turn IS NOT NULL AND NOT m.embedded \
               AND m.id IN (SELECT id FROM input) \
             RETURNING m.seq, m.id) \
         INSERT INTO message_embeddings (message_seq, window_index, agent_id, embedding) \
         SELECT marked.seq, input.win, $1, (($3::real[])[(input.ord - 1) * $4 + 1 : input.ord * $4])::vector \
         FROM marked JOIN input ON input.id = marked.id ORDER BY input.ord \
         ON CONFLICT DO NOTHING",
    )
    .bind(agent.as_uuid())
    .bind(ids)
    .bind(vectors)
    .bind(dimension)
    .bind(windows)
    .execute(&mut *tx)
    .await
    .map_err(|e| db("storing message embeddings", e))?;
    Ok(())
}

/// Retires stored passages of `agent` (one statement); an earlier end (a shorter time to live,
/// an earlier retirement) stands.
async fn retire_passages(
    tx: &mut PgConnection,
    agent: AgentId,
    retired: &[PassageRetirement],
) -> Result<(), StoreError> {
    if retired.is_empty() {
        return Ok(());
    }
    memgpt_core::failpoint::hit("passages.retire");
    let ids: Vec<uuid::Uuid> = retired.iter().map(|r| *r.id.as_uuid()).collect();
    let at: Vec<DateTime<Utc>> = retired.iter().map(|r| r.at).collect();
    let newer: Vec<Option<uuid::Uuid>> = retired
        .iter()
        .map(|r| r.superseded_by.map(|p| *p.as_uuid()))
        .collect();
    let reasons: Vec<&str> = retired.iter().map(|r| r.reason.as_str()).collect();
    sqlx::query(
        "UPDATE passages p SET valid_to = u.at, superseded_by = u.newer, retired_reason = u.reason \
         FROM UNNEST($2::uuid[], $3::timestamptz[], $4::uuid[], $5::text[]) AS u(id, at, newer, reason) \
         WHERE p.agent_id = $1 AND p.id = u.id AND (p.valid_to IS NULL OR p.valid_to > u.at)",
    )
    .bind(agent.as_uuid())
    .bind(ids)
    .bind(at)
    .bind(newer)
    .bind(reasons)
    .execute(&mut *tx)
    .await
    .map_err(|e| db("retiring passages", e))?;
    Ok(())
}

/// Stores passages in order (one statement). Their vectors travel as one flat `real[]` (exact
/// binary floats), each embedded passage taking the slice at its slot. Returns how many words
/// (analysed terms) the passages have together.
async fn insert_passages(
    tx: &mut PgConnection,
    passages: &[Passage],
    space: Option<&EmbeddingSpace>,
) -> Result<i64, StoreError> {
    if passages.is_empty() {
        return Ok(0);
    }
    let mut words = 0i64;
    let n = passages.len();
    let dimension = space.map_or(0, |s| s.dimension) as i32;
    let (mut valid_from, mut valid_to, mut superseded_by, mut reasons) = (
        Vec::<Option<DateTime<Utc>>>::with_capacity(n),
        Vec::<Option<DateTime<Utc>>>::with_capacity(n),
        Vec::<Option<uuid::Uuid>>::with_capacity(n),
        Vec::<Option<&str>>::with_capacity(n),
    );
    let (mut ids, mut agents, mut texts, mut slots, mut metadata, mut times, mut searches) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::<DateTime<Utc>>::with_capacity(n),
        Vec::with_capacity(n),
    );
    let mut vectors: Vec<f32> = Vec::new();
    let mut next_slot = 0i32;
    for p in passages {
        memgpt_core::failpoint::hit("passages.insert");
        ids.push(*p.id.as_uuid());
        agents.push(*p.agent_id.as_uuid());
        texts.push(p.text.as_str());
        slots.push(p.embedding.as_ref().map(|e| {
            vectors.extend_from_slice(&e.vector);
            next_slot += 1;
            next_slot - 1
        }));
        metadata.push(
            serde_json::to_string(&p.metadata).map_err(|e| db("encoding passage metadata", e))?,
        );
        times.push(p.created_at);
        valid_from.push(p.valid_from);
        valid_to.push(p.valid_to);
        superseded_by.push(p.superseded_by.map(|id| *id.as_uuid()));
        reasons.push(p.retired_reason.as_deref());
        let search = passage_search_text(&p.text);
        words += search.split(' ').filter(|w| !w.is_empty()).count() as i64;
        searches.push(search);
    }
    sqlx::query(
        "INSERT INTO passages (id, agent_id, text, embedding, metadata, created_at, search_text, \
                               valid_from, valid_to, superseded_by, retired_reason) \
         SELECT u.id, u.agent_id, u.text, \
                CASE WHEN u.slot IS NULL THEN NULL \
                     ELSE ($4::real[])[u.slot * $5 + 1 : (u.slot + 1) * $5]::vector END, \
                u.metadata::jsonb, u.created_at, u.search_text, \
                u.valid_from, u.valid_to, u.superseded_by, u.retired_reason \
         FROM UNNEST($1::uuid[], $2::uuid[], $3::text[], $6::int4[], $7::text[], $8::timestamptz[], $9::text[], \
                     $10::timestamptz[], $11::timestamptz[], $12::uuid[], $13::text[]) \
              WITH ORDINALITY AS u(id, agent_id, text, slot, metadata, created_at, search_text, \
                                   valid_from, valid_to, superseded_by, retired_reason, ord) \
         ORDER BY u.ord",
    )
    .bind(ids)
    .bind(agents)
    .bind(texts)
    .bind(vectors)
    .bind(dimension)
    .bind(slots)
    .bind(metadata)
    .bind(times)
    .bind(searches)
    .bind(valid_from)
    .bind(valid_to)
    .bind(superseded_by)
    .bind(reasons)
    .execute(&mut *tx)
    .await
    .map_err(|e| db("storing passages", e))?;
    Ok(words)
}

/// A pooled connection waiting for an advisory lock; closed if dropped while still waiting.
struct Waiting(Option<PoolConnection<Postgres>>);

impl Drop for Waiting {
    fn drop(&mut self) {
        if let Some(conn) = self.0.take() {
            // Closing the socket ends the server session, and with it the lock request.
            drop(conn.detach());
        }
    }
}

/// A held `pg_advisory_lock` on its own pooled connection (the lock belongs to that session).
#[derive(Debug)]
struct PgLease {
    conn: Option<PoolConnection<Postgres>>,
    key: i64,
    agent: AgentId,
}

#[async_trait]
impl AgentLease for PgLease {
    async fn release(mut self: Box<Self>) -> Result<(), StoreError> {
        // The connection stays in `self` until the unlock is answered: if this future is
        // dropped half-way, `Drop` still frees the lock.
        let Some(conn) = self.conn.as_mut() else {
            return Ok(());
        };
        let result = sqlx::query_scalar::<_, bool>("SELECT pg_advisory_unlock($1)")
            .bind(self.key)
            .fetch_one(&mut **conn)
            .await;
        let conn = self.conn.take();
        match result {
            Ok(released) => {
                if !released {
                    warn!(agent = %self.agent, "the agent lock was not held when released");
                }
                debug!(agent = %self.agent, "agent lock released");
                drop(conn); // back to the pool
                Ok(())
            }
            Err(e) => {
                // Ending the session frees every lock it holds.
                if let Some(conn) = conn {
                    drop(conn.detach());
                }
                Err(db("releasing an agent lock", e))
            }
        }
    }
}

impl Drop for PgLease {
    /// A lease dropped without [`AgentLease::release`] (a cancelled step) unlocks in a task on
    /// the current tokio runtime, or, outside one, closes its connection: either frees the lock.
    fn drop(&mut self) {
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        let (key, agent) = (self.key, self.agent);
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    let result = sqlx::query_scalar::<_, bool>("SELECT pg_advisory_unlock($1)")
                        .bind(key)
                        .fetch_one(&mut *conn)
                        .await;
                    match result {
                        Ok(_) => debug!(agent = %agent, "a dropped agent lease was released"),
                        Err(e) => {
                            warn!(agent = %agent, error = %e, "could not release a dropped agent lease; closing its connection");
                            drop(conn.detach());
                        }
                    }
                });
            }
            Err(_) => drop(conn.detach()),
        }
    }
}

impl PgStore {
    pub(super) async fn create_vector_indexes(
        tx: &mut PgConnection,
        d: usize,
    ) -> Result<(), StoreError> {
        for (name, table) in [
            ("passages_embedding_hnsw", "passages"),
            ("message_embeddings_hnsw", "message_embeddings"),
        ] {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "CREATE INDEX IF NOT EXISTS {name} ON {table} USING hnsw ((embedding::vector({d})) vector_cosine_ops)"
            )))
            .execute(&mut *tx)
            .await
            .map_err(|e| db("creating an HNSW index", e))?;
        }
        Ok(())
    }
}

/// A builder continuing the agent's documents from its latest conversation turns (the caller
/// holds the agent's row lock, so no other commit adds turns meanwhile).
async fn builder_for(tx: &mut PgConnection, agent: AgentId) -> Result<DocumentBuilder, StoreError> {
    let rows = crate::sql::latest_turns::<PgStore>(agent)
        .build()
        .fetch_all(&mut *tx)
        .await
        .map_err(|e| db("reading the latest turns", e))?;
    crate::sql::builder_from_latest_turns::<PgStore>(&rows)
}
