//! Storage seams: the agent's durable state, recall storage and archival storage.
//!
//! * [`AgentStore`] keeps each agent's state (system prompt, memory blocks, FIFO membership,
//!   recursive summary, config) and is the **only write path**: one agent step is persisted by
//!   one [`AgentStore::commit`], atomically, together with the messages and passages it created.
//! * [`RecallStore`] reads the append-only log of every message: text search, date ranges,
//!   pagination, counts.
//! * [`ArchivalStore`] reads passages with embeddings: vector, text or hybrid search with
//!   pagination, counts.
//!
//! [`InMemoryStore`] implements all three and is the reference the real backends
//! (`memgpt-backends`) are tested against. A [`Storage`] bundles the three handles an agent uses.

mod memory;
mod text;
mod types;

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;

pub use memory::InMemoryStore;
pub(crate) use memory::{RRF_K, rank_passages};
pub use text::{Bm25Index, query_terms, tokenize};
pub use types::{
    AgentState, ArchivalQuery, Commit, Hit, Page, Passage, RecallQuery, SearchMode, SearchPage,
    Summary, TimeRange,
};

use crate::ids::{AgentId, MessageId, PassageId};
use crate::message::Message;

/// Why a storage operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The agent does not exist.
    #[error("agent {0} not found")]
    AgentNotFound(AgentId),
    /// An agent with this id already exists.
    #[error("agent {0} already exists")]
    AgentExists(AgentId),
    /// Another writer committed this agent since it was loaded (optimistic concurrency).
    #[error(
        "agent {agent} was changed by another writer: expected version {expected}, found {found}"
    )]
    Conflict {
        /// The agent.
        agent: AgentId,
        /// The version this writer started from.
        expected: u64,
        /// The version in the store.
        found: u64,
    },
    /// Vectors from a different embedding model or dimension than the store already holds.
    #[error(
        "embedding mismatch: this store holds {expected_model} vectors of dimension {expected_dimension}, \
         got {found_model} of dimension {found_dimension}"
    )]
    EmbeddingMismatch {
        /// The model the store holds.
        expected_model: String,
        /// The dimension the store holds.
        expected_dimension: usize,
        /// The model offered.
        found_model: String,
        /// The dimension offered.
        found_dimension: usize,
    },
    /// The query cannot be run (for example a vector search without a query vector).
    #[error("invalid query: {0}")]
    InvalidQuery(String),
    /// The backend failed (I/O, SQL, index).
    #[error("storage backend error: {message}")]
    Backend {
        /// What failed.
        message: String,
        /// The underlying error.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
}

impl StoreError {
    /// A backend error with a cause.
    pub fn backend(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        StoreError::Backend {
            message: message.into(),
            source: Some(Box::new(source)),
        }
    }
}

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
#[async_trait]
pub trait RecallStore: Send + Sync + fmt::Debug {
    /// Searches an agent's messages.
    ///
    /// With [`RecallQuery::text`] set, hits are ranked by relevance (ties: newest first);
    /// otherwise they are listed oldest first. [`SearchPage::total`] counts every match.
    async fn search(
        &self,
        agent: AgentId,
        query: &RecallQuery,
    ) -> Result<SearchPage<Message>, StoreError>;

    /// The messages with these ids, in the order asked (missing ids are skipped).
    async fn get_messages(
        &self,
        agent: AgentId,
        ids: &[MessageId],
    ) -> Result<Vec<Message>, StoreError>;

    /// How many messages the agent has.
    async fn count_messages(&self, agent: AgentId) -> Result<u64, StoreError>;
}

/// Read access to archival storage: passages with embeddings.
#[async_trait]
pub trait ArchivalStore: Send + Sync + fmt::Debug {
    /// Searches an agent's passages by vector, text or both (see [`SearchMode`]), best first.
    ///
    /// In [`SearchMode::Vector`], [`Hit::score`] is the cosine similarity of the passage to the
    /// query embedding (so scores compare across stores); in the other modes it is only
    /// meaningful for ordering within one result list.
    async fn search(
        &self,
        agent: AgentId,
        query: &ArchivalQuery,
    ) -> Result<SearchPage<Passage>, StoreError>;

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
}

/// The three storage handles an agent works with.
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
}

impl Storage {
    /// All three roles served by one store.
    pub fn from_store<S>(store: Arc<S>) -> Self
    where
        S: AgentStore + RecallStore + ArchivalStore + 'static,
    {
        Self {
            agents: store.clone(),
            recall: store.clone(),
            archival: store,
        }
    }

    /// A fresh [`InMemoryStore`] in all three roles.
    pub fn in_memory() -> Self {
        Self::from_store(Arc::new(InMemoryStore::new()))
    }
}
