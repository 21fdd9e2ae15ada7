//! The agent: an LLM with a virtual context, driven by events.
//!
//! An [`Event`] (user message, system alert, login, document upload, timer) starts a **step**:
//! the event is appended to the FIFO queue (and recall storage); the queue manager checks
//! memory pressure (warning at 70%, flush and recursive summary at 100% with the paper's
//! policy); main context is compiled and sent to the LLM; the function calls it returns are
//! validated and run, their results appended; and if a function requested a heartbeat, or a
//! call failed, the LLM runs again at once, up to [`AgentConfig::max_chain_length`] calls.
//! Then control returns to the caller with a [`StepRecord`].
//!
//! A step is atomic: everything it appended and changed is committed to the
//! [`AgentStore`](crate::store::AgentStore) in one transaction at its end. If the step fails (or
//! its future is dropped), nothing is stored and the in-memory agent is restored to where it
//! was.

mod access;
mod approval;
mod builder;
mod calls;
mod companion;
mod event;
mod intake;
mod pressure;
mod progress;
pub mod prompt;
mod record;
mod reply_stream;
mod run;
mod services;
mod shared;
mod step;
mod telemetry;
/// The archival part of one commit.
#[derive(Debug, Default)]
pub(crate) struct ArchivalChanges {
    /// Passages to store.
    pub(crate) added: Vec<crate::store::Passage>,
    /// Stored passages to delete.
    pub(crate) deleted: Vec<PassageId>,
    /// Stored passages to retire.
    pub(crate) retired: Vec<crate::store::PassageRetirement>,
}

#[cfg(test)]
mod tests;

use std::sync::Arc;

use chrono::{DateTime, Utc};

pub use crate::config::{AgentConfig, DEFAULT_COMPLETION_RESERVE};
pub use crate::paging::FlushRecord;
pub use builder::AgentBuilder;
pub use event::{Event, EventKind};
pub use progress::{StepObserver, StepProgress};
pub use record::{FunctionCallRecord, StepRecord, StepTimings, StopReason};
pub(crate) use services::Services;

use crate::context::{ContextStats, MainContext, MemoryCounts};
use crate::error::{Error, Result};
use crate::function::FunctionSet;
use crate::ids::{AgentId, MessageId, PassageId};
use crate::llm::{ChatMessage, ChatRequest};
use crate::memory::{MemoryError, WorkingContext};
use crate::message::Message;
use crate::passages::PassageWriter;
use crate::queue::{EvictionPolicy, QueueManager};
use crate::store::{
    AgentState, Commit, MessageEmbedding, Passage, QueueChange, Storage, StoreError, Summary,
};

/// The most unembedded messages a step (or [`Agent::call`]) embeds before it runs; the rest
/// wait for the next one or [`Agent::reindex`].
const BACKLOG_EMBEDDINGS: usize = 512;

/// A MemGPT agent.
///
/// Create one with [`Agent::builder`], drive it with [`Agent::step`].
pub struct Agent {
    state: AgentState,
    context: MainContext,
    committed_passages: u64,
    rt: Services,
    /// A commit was started and its future dropped before it finished: whether it landed is
    /// unknown, so the agent reloads itself from storage before its next operation.
    stale: bool,
    /// Set while a commit is awaited.
    commit_in_flight: bool,
    /// Committed conversation messages may lack their embeddings (deferred, an embedder
    /// failure, or unknown since the agent was loaded): the next step or [`Agent::call`]
    /// embeds them first ([`Agent::embed_backlog`]).
    embedding_backlog: bool,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("id", &self.state.id)
            .field("name", &self.state.name)
            .field("version", &self.state.version)
            .field("context", &self.context.stats())
            .finish_non_exhaustive()
    }
}

/// What a failed or cancelled operation restores.
struct Snapshot {
    state: AgentState,
    context: MainContext,
    committed_passages: u64,
}

/// Puts the agent back as it was when an operation fails or its future is dropped part-way.
/// Disarm it with [`Rollback::keep`] once the operation has committed.
struct Rollback<'a> {
    agent: &'a mut Agent,
    snapshot: Option<Snapshot>,
}

impl<'a> Rollback<'a> {
    fn new(agent: &'a mut Agent) -> Self {
        let snapshot = Some(agent.snapshot());
        Self { agent, snapshot }
    }

    fn keep(mut self) {
        self.snapshot = None;
    }
}

impl Drop for Rollback<'_> {
    fn drop(&mut self) {
        if let Some(snapshot) = self.snapshot.take() {
            // A commit that was interrupted may or may not have landed: resynchronise.
            if self.agent.commit_in_flight {
                self.agent.commit_in_flight = false;
                self.agent.stale = true;
            }
            self.agent.restore(snapshot);
        }
    }
}

impl Agent {
    /// A builder for a new agent (or for loading a stored one).
    pub fn builder() -> AgentBuilder {
        AgentBuilder::new()
    }

    fn assemble(
        rt: Services,
        state: AgentState,
        queued: Vec<Message>,
        counts: MemoryCounts,
    ) -> Result<Self> {
        let mut context = services::main_context(&rt, &state, counts);
        for message in queued {
            let pinned = state.pinned.contains(&message.id);
            let id = message.id;
            context
                .queue_mut()
                .push(Arc::new(message), rt.counter.as_ref());
            if pinned {
                context.queue_mut().set_pinned(id, true);
            }
        }
        Ok(Self {
            committed_passages: counts.archival,
            state,
            context,
            rt,
            stale: false,
            commit_in_flight: false,
            embedding_backlog: true,
        })
    }

    /// The agent's id.
    pub fn id(&self) -> AgentId {
        self.state.id
    }

    /// The agent's name.
    pub fn name(&self) -> &str {
        &self.state.name
    }

    /// The number of commits so far.
    pub fn version(&self) -> u64 {
        self.state.version
    }

    /// When the agent was created.
    pub fn created_at(&self) -> DateTime<Utc> {
        self.state.created_at
    }

    /// When the agent last committed.
    pub fn updated_at(&self) -> DateTime<Utc> {
        self.state.updated_at
    }

    /// The configuration.
    pub fn config(&self) -> &AgentConfig {
        &self.state.config
    }

    /// Main context.
    pub fn context(&self) -> &MainContext {
        &self.context
    }

    /// Working context.
    pub fn memory(&self) -> &WorkingContext {
        self.context.memory()
    }

    /// The recursive summary.
    pub fn summary(&self) -> &Summary {
        self.context.summary()
    }

    /// Token use of main context.
    pub fn stats(&self) -> ContextStats {
        self.context.stats()
    }

    /// The storage handles.
    pub fn storage(&self) -> &Storage {
        &self.rt.storage
    }

    /// Watches this agent's steps as they run from now on (`None` stops watching); see
    /// [`StepObserver`].
    pub fn set_observer(&mut self, observer: Option<Arc<dyn StepObserver>>) {
        self.rt.observer = observer;
    }

    /// The functions the agent may call.
    pub fn function_set(&self) -> &FunctionSet {
        &self.rt.functions
    }

    /// The function call waiting for a person's approval, if a step paused on one (see
    /// [`StopReason::AwaitingApproval`]).
    pub fn pending_approval(&self) -> Option<&crate::store::PendingApproval> {
        self.state.pending_approval.as_ref()
    }

    /// Until when timer events are ignored, if they are.
    pub fn timers_paused_until(&self) -> Option<DateTime<Utc>> {
        self.state.heartbeats_paused_until
    }

    /// The request the next LLM call would send (main context, functions, settings).
    pub fn request(&self) -> ChatRequest {
        ChatRequest {
            model: self.state.config.model.clone(),
            messages: self.context.shared_messages(),
            tools: self.context.tools().clone(),
            tool_choice: self.state.config.tool_choice.clone(),
            temperature: self.state.config.temperature,
            max_tokens: self.state.config.max_completion_tokens,
            cache_prefix: Some(self.context.stable_prefix_len()),
        }
    }

    /// The prompt the next LLM call would send.
    pub fn prompt(&self) -> Vec<ChatMessage> {
        self.context.messages()
    }

    /// Edits working context directly (not through the LLM) and commits the change. A rejected
    /// edit or a failed commit leaves the agent unchanged.
    pub async fn update_memory<R>(
        &mut self,
        edit: impl FnOnce(&mut WorkingContext) -> Result<R, MemoryError>,
    ) -> Result<R> {
        self.sync_with_store().await?;
        let guard = Rollback::new(self);
        let value = edit(guard.agent.context.memory_mut())?;
        let now = guard.agent.rt.clock.now();
        guard.agent.context.memory_changed(now);
        guard
            .agent
            .commit(now, Vec::new(), Vec::new(), Vec::new())
            .await?;
        guard.keep();
        Ok(value)
    }

    /// Switches the page-replacement policy and commits the change (the agent's
    /// [`AgentConfig::policy`] names it, so the next load uses it too). A failed commit leaves
    /// the agent on its old policy.
    pub async fn set_policy(&mut self, policy: Arc<dyn EvictionPolicy>) -> Result<()> {
        self.sync_with_store().await?;
        let guard = Rollback::new(self);
        guard.agent.state.config.policy = policy.name().to_owned();
        // The queue's entries keep the new policy's signals from now on (the context is part
        // of the snapshot the guard restores on failure).
        guard.agent.context.queue_mut().set_policy(policy.clone());
        let old = std::mem::replace(&mut guard.agent.rt.manager, QueueManager::new(policy));
        let now = guard.agent.rt.clock.now();
        if let Err(e) = guard
            .agent
            .commit(now, Vec::new(), Vec::new(), Vec::new())
            .await
        {
            guard.agent.rt.manager = old;
            return Err(e);
        }
        guard.keep();
        Ok(())
    }

    /// [`Agent::set_policy`] by registered name (see [`policy_names`](crate::queue::policy_names)).
    pub async fn set_policy_named(&mut self, name: &str) -> Result<()> {
        let policy = crate::queue::policy_by_name(name)?;
        self.set_policy(policy).await
    }

    /// How this agent turns text into archival passages.
    pub(crate) fn passage_writer(&self) -> PassageWriter<'_> {
        self.rt
            .settings
            .passage_writer(self.rt.counter.as_ref(), self.rt.embedder.as_deref())
    }

    /// Stores text in archival storage outside any step (split into passages and embedded as
    /// the `archival_memory_insert` function would) and commits it. Empty text, or text over
    /// [`AgentConfig::max_document_bytes`], is refused.
    pub async fn insert_archival(
        &mut self,
        text: &str,
        metadata: serde_json::Map<String, serde_json::Value>,
    ) -> Result<Vec<PassageId>> {
        self.sync_with_store().await?;
        let now = self.rt.clock.now();
        let passages = self
            .passage_writer()
            .write(self.id(), text, metadata, false, now)
            .await
            .map_err(|e| Error::from_passages("archival insert", e))?;
        self.commit_passages(now, passages).await
    }

    /// Stores ready-made chunks in archival storage (each with its own metadata; no further
    /// splitting), embedded in one batch and committed together: what a document ingester
    /// calls with chunks of its own. Empty chunks, or more than
    /// [`AgentConfig::max_document_bytes`] at once, are refused.
    pub async fn insert_archival_chunks(
        &mut self,
        chunks: Vec<(String, serde_json::Map<String, serde_json::Value>)>,
    ) -> Result<Vec<PassageId>> {
        self.sync_with_store().await?;
        let now = self.rt.clock.now();
        let passages = self
            .passage_writer()
            .embed_chunks(self.id(), chunks, now)
            .await
            .map_err(|e| Error::from_passages("archival insert", e))?;
        self.commit_passages(now, passages).await
    }

    /// Commits passages written outside a step; a failed commit leaves the agent unchanged.
    async fn commit_passages(
        &mut self,
        now: DateTime<Utc>,
        passages: Vec<Passage>,
    ) -> Result<Vec<PassageId>> {
        let ids = passages.iter().map(|p| p.id).collect();
        let guard = Rollback::new(self);
        guard
            .agent
            .commit(now, Vec::new(), Vec::new(), passages)
            .await?;
        guard.keep();
        Ok(ids)
    }

    /// Imports earlier conversation (from another system, or a replayed dataset) into recall
    /// storage and commits it: at once searchable with `conversation_search`, but not in the
    /// FIFO queue, as if it had been evicted long ago. Messages keep their own timestamps and
    /// must belong to this agent.
    ///
    /// With an embedder, the conversation messages are embedded in batches first; if the
    /// embedder fails they are imported without embeddings (a warning is logged) and
    /// [`Agent::reindex`] or the next search embeds them.
    pub async fn import_history(&mut self, messages: Vec<Message>) -> Result<()> {
        self.sync_with_store().await?;
        if let Some(m) = messages.iter().find(|m| m.agent_id != self.id()) {
            return Err(Error::ForeignMessage {
                message: m.id,
                owner: m.agent_id,
                agent: self.id(),
            });
        }
        let imported = messages.len() as u64;
        let embeddings = self.embed_for_commit(&messages).await;
        let now = self.rt.clock.now();
        let guard = Rollback::new(self);
        guard
            .agent
            .commit(now, messages, embeddings, Vec::new())
            .await?;
        let mut counts = guard.agent.context.counts();
        counts.recall += imported;
        guard.agent.context.set_counts(counts);
        guard.keep();
        Ok(())
    }

    /// Pins a queued message so no flush evicts it (or unpins it), and commits. Returns whether
    /// the message is in the queue.
    pub async fn pin(&mut self, id: MessageId, pinned: bool) -> Result<bool> {
        self.sync_with_store().await?;
        if self.context.queue().position(id).is_none() {
            return Ok(false);
        }
        let guard = Rollback::new(self);
        guard.agent.context.queue_mut().set_pinned(id, pinned);
        let now = guard.agent.rt.clock.now();
        guard
            .agent
            .commit(now, Vec::new(), Vec::new(), Vec::new())
            .await?;
        guard.keep();
        Ok(true)
    }

    /// Embeds every conversation message of the agent that has no embedding yet (messages
    /// imported or committed without an embedder, or while it failed) and stores the vectors;
    /// returns how many were embedded. Without an embedder it embeds nothing.
    ///
    /// Each step and [`Agent::call`] embeds what is missing first too (up to a bound), so this
    /// is for backfills: after attaching an embedder to an agent with a long history, or after
    /// an import. Searches never embed anything.
    pub async fn reindex(&mut self) -> Result<usize> {
        let Some(embedder) = self.rt.embedder.clone() else {
            return Ok(0);
        };
        let (done, _) = crate::indexing::embed_pending(
            &self.rt.storage,
            embedder.as_ref(),
            self.id(),
            usize::MAX,
        )
        .await?;
        self.embedding_backlog = false;
        Ok(done)
    }

    /// The embeddings of the conversation messages among `messages`, or none (with a warning)
    /// when there is no embedder or it fails: the messages are then committed without, and
    /// embedded later.
    async fn embed_for_commit(&mut self, messages: &[Message]) -> Vec<MessageEmbedding> {
        let Some(embedder) = &self.rt.embedder else {
            return Vec::new();
        };
        match crate::indexing::embed_messages(embedder.as_ref(), messages).await {
            Ok(embeddings) => embeddings,
            Err(e) => {
                tracing::warn!(error = %e, agent = %self.id(), "embedding messages failed; they are stored without embeddings and embedded later");
                self.embedding_backlog = true;
                Vec::new()
            }
        }
    }

    /// Embeds committed conversation messages that still lack embeddings (deferred by
    /// [`AgentConfig::defer_message_embeddings`], left by an embedder failure, or imported
    /// without an embedder), at most [`BACKLOG_EMBEDDINGS`] of them: what a step and
    /// [`Agent::call`] do first, so their searches rank those messages by meaning too. A
    /// failure is logged and retried next time; it never fails the caller. Returns the time
    /// spent.
    async fn embed_backlog(&mut self) -> std::time::Duration {
        let started = std::time::Instant::now();
        let (Some(embedder), true) = (self.rt.embedder.clone(), self.embedding_backlog) else {
            return started.elapsed();
        };
        match crate::indexing::embed_pending(
            &self.rt.storage,
            embedder.as_ref(),
            self.id(),
            BACKLOG_EMBEDDINGS,
        )
        .await
        {
            Ok((_, more)) => self.embedding_backlog = more,
            Err(e) => {
                tracing::warn!(error = %e, agent = %self.id(), "embedding earlier messages failed; searches match them by words until a later step embeds them");
            }
        }
        started.elapsed()
    }

    /// Catches up with the store: if another process committed a newer version of this agent
    /// (several processes on one PostgreSQL database), or an interrupted commit left this one
    /// unsure of what is stored, the agent is reloaded. Steps, memory edits and inserts do
    /// this themselves; call it before reading [`Agent::context`] or [`Agent::memory`] of an
    /// agent that others may advance.
    pub async fn refresh(&mut self) -> Result<()> {
        self.sync_with_store().await
    }

    /// Reloads the agent from storage if the store holds another version than this agent (another
    /// process advanced it) or an interrupted commit left it unsure of what is stored.
    async fn sync_with_store(&mut self) -> Result<()> {
        if !self.stale {
            match self.rt.storage.agents.agent_version(self.id()).await? {
                Some(version) if version == self.state.version => return Ok(()),
                Some(_) => self.stale = true,
                None => return Err(StoreError::AgentNotFound(self.id()).into()),
            }
        }
        self.resync_if_stale().await
    }

    /// Reloads the agent from storage if it is marked stale.
    async fn resync_if_stale(&mut self) -> Result<()> {
        if !self.stale {
            return Ok(());
        }
        let id = self.id();
        let state = self
            .rt
            .storage
            .agents
            .load_agent(id)
            .await?
            .ok_or(StoreError::AgentNotFound(id))?;
        let (queued, counts) = services::load_queue(&self.rt, &state).await?;
        *self = Agent::assemble(self.rt.clone(), state, queued, counts)?;
        tracing::info!(agent = %id, version = self.state.version, "resynchronised from storage after an interrupted commit");
        Ok(())
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot {
            state: self.state.clone(),
            context: self.context.clone(),
            committed_passages: self.committed_passages,
        }
    }

    fn restore(&mut self, snapshot: Snapshot) {
        self.state = snapshot.state;
        self.context = snapshot.context;
        self.committed_passages = snapshot.committed_passages;
    }

    /// Persists the current in-memory state with `messages` (and embeddings of some of them) and
    /// `passages` as one commit; gives the messages back.
    async fn commit(
        &mut self,
        now: DateTime<Utc>,
        messages: Vec<Message>,
        message_embeddings: Vec<MessageEmbedding>,
        passages: Vec<crate::store::Passage>,
    ) -> Result<Vec<Message>> {
        let archival = ArchivalChanges {
            added: passages,
            ..ArchivalChanges::default()
        };
        self.commit_with(now, messages, message_embeddings, archival)
            .await
    }

    /// [`Agent::commit`] with every kind of archival change (passages of the agent's only).
    async fn commit_with(
        &mut self,
        now: DateTime<Utc>,
        messages: Vec<Message>,
        message_embeddings: Vec<MessageEmbedding>,
        archival: ArchivalChanges,
    ) -> Result<Vec<Message>> {
        let ArchivalChanges {
            added: passages,
            deleted: deleted_passages,
            retired: retired_passages,
        } = archival;
        self.state.version += 1;
        let attachments_changed =
            self.state.memory.shared_ids() != self.context.memory().shared_ids();
        self.state.memory = self.context.memory().clone();
        self.state.summary = self.context.summary().clone();
        let fifo = self.context.queue().ids();
        let queue = QueueChange::between(&self.state.fifo, &fifo);
        self.state.fifo = fifo;
        self.state.pinned = self
            .context
            .queue()
            .entries()
            .filter(|e| e.is_pinned())
            .map(|e| e.message().id)
            .collect();
        self.state.memory_updated_at = self.context.memory_updated_at();
        self.state.updated_at = now;
        let added = passages.len() as u64;
        let removed = deleted_passages.len() as u64;
        let commit = Commit {
            state: self.state.clone(),
            messages,
            message_embeddings,
            passages,
            deleted_passages,
            retired_passages,
            attachments_changed,
            queue,
        };
        self.commit_in_flight = true;
        let result = self.rt.storage.agents.commit(&commit).await;
        self.commit_in_flight = false;
        if let Err(e) = result {
            // The store may have failed after applying the commit (a lost acknowledgement):
            // read the truth back before the next operation.
            self.stale = true;
            return Err(e.into());
        }
        self.committed_passages = (self.committed_passages + added).saturating_sub(removed);
        let mut counts = self.context.counts();
        counts.archival = self.committed_passages;
        self.context.set_counts(counts);
        Ok(commit.messages)
    }
}
