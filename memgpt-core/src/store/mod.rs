//! Storage seams: the agent's durable state, recall storage and archival storage.
//!
//! * [`AgentStore`] keeps each agent's state (system prompt, memory blocks, FIFO membership,
//!   recursive summary, config) and is the **only write path**: one agent step is persisted by
//!   one [`AgentStore::commit`], atomically, together with the messages and passages it created.
//! * [`RecallStore`] reads the append-only log of every message: hybrid search (ranked once, for
//!   every store, by [`retrieval`](crate::retrieval)), date ranges, pagination, counts.
//! * [`ArchivalStore`] reads passages with embeddings: vector, text or hybrid search (ranked
//!   once, for every store, by [`retrieval`](crate::retrieval)) with pagination, counts.
//!
//! [`InMemoryStore`] implements all three and is the reference the real backends
//! (`memgpt-backends`) are tested against. A [`Storage`] bundles the three handles an agent uses.

mod blocks;
mod error;
mod memory;
mod queue;
mod search;
mod space;
mod types;

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;

pub use blocks::{
    BlockEdit, BlockStore, BlockUpdate, NoSharedBlocks, SharedBlock, refresh_shared_blocks,
};
pub use error::StoreError;
pub use memory::InMemoryStore;
pub use queue::{QueueChange, StateRecord};
pub(crate) use search::search_passages_with;
pub use search::{search_messages, search_messages_found_by, search_passages};
pub use space::EmbeddingSpace;
pub(crate) use types::json_holds_nul;
pub use types::{
    AgentState, ArchivalQuery, Commit, Hit, MAX_MESSAGE_WINDOWS, MessageEmbedding, Page, Passage,
    PassageCandidate, PassageEmbedding, PassageRetirement, PendingApproval, RecallQuery,
    SearchPage, Summary, SummaryRevision, TAGS_KEY, TimeRange, Validity, storable,
};

/// Re-exported from [`retrieval`](crate::retrieval): the archival ranking a query asks for.
pub use crate::retrieval::SearchMode;

use crate::embed::Embedding;
use crate::ids::{AgentId, MessageId, PassageId};
use crate::message::Message;
use crate::retrieval::{
    CandidateKey, NearestPassages, PassageMatches, RecallCandidate, TextCandidates,
};

/// Durable agent state, and the single atomic write path of an agent step.
#[async_trait]
pub trait AgentStore: Send + Sync + fmt::Debug {
    /// Persists a new agent (its `version` must be 0). Fails with [`StoreError::AgentExists`] if
    /// the id is taken.
    async fn create_agent(&self, state: &AgentState) -> Result<(), StoreError>;

    /// Loads an agent's state.
    async fn load_agent(&self, id: AgentId) -> Result<Option<AgentState>, StoreError>;

    /// Every agent's state, oldest first.
    async fn list_agents(&self) -> Result<Vec<AgentState>, StoreError>;

    /// The ids of the agents named `name`, oldest first: how a server keeps names unique
    /// without reading every agent. The default reads every agent's state; stores with an index
    /// on names override it.
    async fn agents_named(&self, name: &str) -> Result<Vec<AgentId>, StoreError> {
        Ok(self
            .list_agents()
            .await?
            .into_iter()
            .filter(|a| a.name == name)
            .map(|a| a.id)
            .collect())
    }

    /// Deletes an agent with all its messages and passages. Returns whether it existed.
    async fn delete_agent(&self, id: AgentId) -> Result<bool, StoreError>;

    /// Persists one step **atomically**: the new state, the messages appended to recall, and the
    /// passages added to or deleted from archival storage. Either all of it becomes visible or
    /// none of it does.
    ///
    /// The commit succeeds only if the stored version is `commit.state.version - 1`; otherwise it
    /// fails with [`StoreError::Conflict`] and changes nothing.
    ///
    /// Embeddings: a store holds vectors of one model and dimension, fixed by the first
    /// embedded passage it stores; a commit bringing others fails with
    /// [`StoreError::EmbeddingMismatch`] and changes nothing.
    async fn commit(&self, commit: &Commit) -> Result<(), StoreError>;

    /// Creates an agent together with its first commit (version 1: messages, passages), as an
    /// import does: afterwards the agent exists with all of it, or (on error) not at all.
    ///
    /// The default creates the agent at version 0, commits, and deletes the agent again if the
    /// commit fails; a process killed between the two leaves an empty agent behind. Stores with
    /// transactions override it to write everything in one (SQLite and PostgreSQL do).
    async fn create_agent_with(&self, commit: &Commit) -> Result<(), StoreError> {
        let mut created = commit.state.clone();
        created.version = 0;
        self.create_agent(&created).await?;
        if let Err(e) = self.commit(commit).await {
            if let Err(cleanup) = self.delete_agent(created.id).await {
                tracing::warn!(error = %cleanup, "could not remove a half-created agent");
            }
            return Err(e);
        }
        Ok(())
    }

    /// Stores embeddings of an agent's conversation messages that were committed without one
    /// (see [`RecallStore::unembedded_messages`]). Embeddings are derived data: writing them never
    /// changes what the agent remembers, so this is the one write outside [`AgentStore::commit`].
    /// Idempotent; ids of unknown or non-conversation messages are ignored. Fails with
    /// [`StoreError::EmbeddingMismatch`] (writing nothing) for vectors of another space.
    async fn store_message_embeddings(
        &self,
        agent: AgentId,
        embeddings: &[MessageEmbedding],
    ) -> Result<(), StoreError>;

    /// The embedding model and dimension of every vector the store holds (messages and
    /// passages), fixed by the first one stored; `None` while it holds none.
    async fn embedding_space(&self) -> Result<Option<EmbeddingSpace>, StoreError>;

    /// Stores embeddings of passages committed without one (see
    /// [`ArchivalStore::unembedded_passages`]): derived data like
    /// [`AgentStore::store_message_embeddings`], with the same checks. Idempotent; passages
    /// that already have an embedding, or are unknown, are left alone.
    ///
    /// The default refuses with [`StoreError::Unsupported`].
    async fn store_passage_embeddings(
        &self,
        agent: AgentId,
        embeddings: &[PassageEmbedding],
    ) -> Result<(), StoreError> {
        let _ = (agent, embeddings);
        Err(StoreError::Unsupported(
            "storing passage embeddings after the fact".into(),
        ))
    }

    /// Forgets every embedding the store holds, of every agent's messages and passages, and
    /// the embedding space with them, in one transaction: the first step of switching to
    /// another embedding model (`memgpt reindex`), after which every message and passage is
    /// listed as unembedded and the next vectors stored fix the new space. What the agents
    /// remember (messages, passages, memory) is untouched; until they are embedded again,
    /// searches match them by words only.
    ///
    /// Processes sharing the store must not be writing embeddings meanwhile. The default
    /// refuses with [`StoreError::Unsupported`].
    async fn clear_embeddings(&self) -> Result<(), StoreError> {
        Err(StoreError::Unsupported("clearing embeddings".into()))
    }

    /// The stored version of an agent, cheaply (the agent loop calls this before every step to
    /// notice that another process advanced the agent).
    async fn agent_version(&self, id: AgentId) -> Result<Option<u64>, StoreError> {
        Ok(self.load_agent(id).await?.map(|state| state.version))
    }

    /// Takes the right to run a step of agent `id`, waiting while another holder has it, and
    /// returns a lease that gives it back.
    ///
    /// Stores shared by several processes (PostgreSQL) implement it with a real lock, so two
    /// processes never run the same agent's step at once. The default is no lock: a single
    /// process already runs one step per agent at a time (`Agent::step` takes `&mut self`), and
    /// versioned commits reject any interleaving with [`StoreError::Conflict`].
    async fn lock_agent(&self, id: AgentId) -> Result<Box<dyn AgentLease>, StoreError> {
        let _ = id;
        Ok(Box::new(NoLease))
    }
}

/// The right to run one agent's step, from [`AgentStore::lock_agent`].
///
/// Call [`AgentLease::release`] when the step is over. A lease dropped without release (a
/// cancelled step) must still free the lock eventually; implementations do that in `Drop`.
#[async_trait]
pub trait AgentLease: Send + Sync + fmt::Debug {
    /// Gives the lock back.
    async fn release(self: Box<Self>) -> Result<(), StoreError>;
}

/// The lease of stores without a cross-process lock.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoLease;

#[async_trait]
impl AgentLease for NoLease {
    async fn release(self: Box<Self>) -> Result<(), StoreError> {
        Ok(())
    }
}

/// Read access to recall storage: every message ever exchanged.
///
/// A store implements the primitives; [`RecallStore::search`] is provided and ranks with
/// [`search_messages`], so every store searches the same way.
///
/// **What a store indexes.** Each message has a search document built by a
/// [`DocumentBuilder`](crate::backend::DocumentBuilder) in append order (stores keep each
/// agent's latest conversation messages to continue it), and conversation messages may have an
/// embedding ([`Commit::message_embeddings`], [`AgentStore::store_message_embeddings`]).
#[async_trait]
pub trait RecallStore: Send + Sync + fmt::Debug {
    /// Searches an agent's messages.
    ///
    /// With [`RecallQuery::text`] set, hits are ranked by relevance (see
    /// [`retrieval`](crate::retrieval); ties: newest first) and [`SearchPage::total`] counts the
    /// ranked candidates; otherwise they are listed oldest first
    /// ([`RecallStore::list_messages`]) and the total counts every match. Any page number is
    /// safe: pages past the total are empty.
    async fn search(
        &self,
        agent: AgentId,
        query: &RecallQuery,
    ) -> Result<SearchPage<Message>, StoreError> {
        search_messages(self, agent, query).await
    }

    /// The agent's messages passing the query's kind and time filters, oldest first (ties: in
    /// append order), one page of them; the total counts them all. The text is ignored.
    async fn list_messages(
        &self,
        agent: AgentId,
        query: &RecallQuery,
    ) -> Result<SearchPage<Message>, StoreError>;

    /// Up to `limit` of the agent's messages passing the query's filters whose documents contain
    /// at least one of `terms` (analysed query terms), best first as far as the store's own
    /// full-text index can tell, with the collection statistics of `terms` (over every document
    /// the store indexes).
    async fn text_candidates(
        &self,
        agent: AgentId,
        terms: &[String],
        query: &RecallQuery,
        limit: usize,
    ) -> Result<TextCandidates, StoreError>;

    /// Up to `limit` of the agent's embedded messages passing the query's filters, nearest to
    /// `embedding` first (exactly or by an approximate index). Fails with
    /// [`StoreError::EmbeddingMismatch`] for a query of another space than the store's.
    async fn vector_candidates(
        &self,
        agent: AgentId,
        embedding: &Embedding,
        query: &RecallQuery,
        limit: usize,
    ) -> Result<Vec<CandidateKey>, StoreError>;

    /// The candidates with these keys (any order; unknown keys skipped): each message with its
    /// stored document and embedding.
    async fn candidates(
        &self,
        agent: AgentId,
        keys: &[CandidateKey],
    ) -> Result<Vec<RecallCandidate>, StoreError>;

    /// The messages with these ids, in the order asked (missing ids are skipped).
    async fn get_messages(
        &self,
        agent: AgentId,
        ids: &[MessageId],
    ) -> Result<Vec<Message>, StoreError>;

    /// How many messages the agent has.
    async fn count_messages(&self, agent: AgentId) -> Result<u64, StoreError>;

    /// Up to `limit` of the agent's conversation messages that have no embedding yet, oldest
    /// first (to embed them: [`Agent::reindex`](crate::Agent::reindex) and searches do).
    async fn unembedded_messages(
        &self,
        agent: AgentId,
        limit: usize,
    ) -> Result<Vec<Message>, StoreError>;
}

/// Read access to archival storage: passages with embeddings.
///
/// A store implements the primitives; [`ArchivalStore::search`] is provided and ranks with
/// [`search_passages`], so every store searches the same way (the shape of [`RecallStore`]).
///
/// **What a store indexes.** Each passage's words as [`document_terms`](crate::retrieval::document_terms)
/// analyses its text, and its embedding when it has one.
#[async_trait]
pub trait ArchivalStore: Send + Sync + fmt::Debug {
    /// Searches an agent's passages by vector, text or both (see [`SearchMode`]), best first.
    ///
    /// In [`SearchMode::Vector`], [`Hit::score`] is the cosine similarity of the passage to the
    /// query embedding (so scores compare across stores); in the other modes it is only
    /// meaningful for ordering within one result list. Fails with
    /// [`StoreError::InvalidQuery`] for a vector search without a query embedding.
    async fn search(
        &self,
        agent: AgentId,
        query: &ArchivalQuery,
    ) -> Result<SearchPage<Passage>, StoreError> {
        search_passages(self, agent, query).await
    }

    /// Up to `limit` of the agent's passages passing the query's tag and time filters whose
    /// words contain at least one of `terms` (analysed query terms), best first as far as the
    /// store's own full-text index can tell; with the collection statistics of `terms` over
    /// every passage the store indexes, and how many admitted passages match in all.
    async fn text_candidates(
        &self,
        agent: AgentId,
        terms: &[String],
        query: &ArchivalQuery,
        limit: usize,
    ) -> Result<PassageMatches, StoreError>;

    /// Up to `limit` of the agent's embedded passages passing the query's filters, nearest to
    /// `embedding` first (exactly or by an approximate index), and how many embedded passages
    /// the filters admit. Fails with [`StoreError::EmbeddingMismatch`] for a query of another
    /// space than the store's.
    async fn vector_candidates(
        &self,
        agent: AgentId,
        embedding: &Embedding,
        query: &ArchivalQuery,
        limit: usize,
    ) -> Result<NearestPassages, StoreError>;

    /// The passages with these keys (any order; unknown keys skipped), with their embeddings.
    async fn passage_candidates(
        &self,
        agent: AgentId,
        keys: &[CandidateKey],
    ) -> Result<Vec<PassageCandidate>, StoreError>;

    /// The passages with these ids, in the order asked (missing ids are skipped).
    async fn get_passages(
        &self,
        agent: AgentId,
        ids: &[PassageId],
    ) -> Result<Vec<Passage>, StoreError>;

    /// An agent's passages, oldest first.
    async fn list_passages(
        &self,
        agent: AgentId,
        page: Page,
    ) -> Result<SearchPage<Passage>, StoreError>;

    /// How many passages the agent has.
    async fn count_passages(&self, agent: AgentId) -> Result<u64, StoreError>;

    /// Up to `limit` of the agent's passages without an embedding, oldest first (to embed them
    /// after a change of model: [`AgentStore::store_passage_embeddings`]).
    ///
    /// The default pages through [`ArchivalStore::list_passages`].
    async fn unembedded_passages(
        &self,
        agent: AgentId,
        limit: usize,
    ) -> Result<Vec<Passage>, StoreError> {
        let mut out = Vec::new();
        let size = 500;
        for number in 0.. {
            let page = self.list_passages(agent, Page::new(number, size)).await?;
            let last = !page.has_more() || page.hits.is_empty();
            out.extend(
                page.hits
                    .into_iter()
                    .map(|h| h.item)
                    .filter(|p| p.embedding.is_none())
                    .take(limit - out.len()),
            );
            if last || out.len() >= limit {
                break;
            }
        }
        Ok(out)
    }
}

/// The storage handles an agent works with.
///
/// ```
/// use memgpt_core::store::Storage;
///
/// let storage = Storage::in_memory();
/// # let _ = storage;
/// ```
#[derive(Clone, Debug)]
pub struct Storage {
    /// Durable state and the commit path.
    pub agents: Arc<dyn AgentStore>,
    /// Recall storage.
    pub recall: Arc<dyn RecallStore>,
    /// Archival storage.
    pub archival: Arc<dyn ArchivalStore>,
    /// Shared memory blocks.
    pub blocks: Arc<dyn BlockStore>,
}

impl Storage {
    /// Every role served by one store.
    pub fn from_store<S>(store: Arc<S>) -> Self
    where
        S: AgentStore + RecallStore + ArchivalStore + BlockStore + 'static,
    {
        Self {
            agents: store.clone(),
            recall: store.clone(),
            archival: store.clone(),
            blocks: store,
        }
    }

    /// A fresh [`InMemoryStore`] in every role.
    pub fn in_memory() -> Self {
        Self::from_store(Arc::new(InMemoryStore::new()))
    }
}
