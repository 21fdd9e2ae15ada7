//! Why a storage operation failed.

use crate::error_kind::ErrorKind;
use crate::ids::{AgentId, BlockId};
use crate::memory::MemoryError;

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
    /// The shared block does not exist.
    #[error("shared block {0} not found")]
    BlockNotFound(BlockId),
    /// A shared block with this id already exists.
    #[error("shared block {0} already exists")]
    BlockExists(BlockId),
    /// An edit of a shared block was refused (over its limit, read-only, text not found, or
    /// based on a version another writer has since replaced); nothing changed.
    #[error("{0}")]
    BlockRefused(MemoryError),
    /// The shared block is attached to agents, so it cannot be deleted.
    #[error(
        "shared block {id} is attached to {} agent(s) ({}); detach it from them first",
        agents.len(),
        agents.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
    )]
    BlockInUse {
        /// The block.
        id: BlockId,
        /// The agents holding it.
        agents: Vec<AgentId>,
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
    /// Text to be written contains U+0000, which no store accepts (PostgreSQL's text types
    /// cannot hold it, so every store refuses it alike); the field is named.
    #[error(
        "cannot store {0}: it contains a NUL character (U+0000), which no store holds (PostgreSQL \
         text cannot); remove it or encode the data first"
    )]
    NulCharacter(String),
    /// The store does not offer this operation (a custom store implementing only the required
    /// methods of a seam).
    #[error("not supported by this store: {0}")]
    Unsupported(String),
    /// Stored data is corrupt or inconsistent (an undecodable row, a queued message missing
    /// from recall storage...).
    #[error("corrupt or inconsistent stored data: {0}")]
    Corrupt(String),
    /// The backend failed (I/O, SQL, index).
    #[error("storage backend error: {message}")]
    Backend {
        /// What failed.
        message: String,
        /// Whether retrying may succeed (lost connection, pool timeout, a busy database).
        transient: bool,
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
            transient: false,
            source: Some(Box::new(source)),
        }
    }

    /// A backend error that retrying may fix (see [`ErrorKind::Unavailable`]).
    pub fn transient(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        StoreError::Backend {
            message: message.into(),
            transient: true,
            source: Some(Box::new(source)),
        }
    }

    /// What kind of failure this is, for callers deciding what to do about it.
    ///
    /// ```
    /// use memgpt_core::ErrorKind;
    /// use memgpt_core::ids::AgentId;
    /// use memgpt_core::store::StoreError;
    ///
    /// assert_eq!(StoreError::AgentNotFound(AgentId::new()).kind(), ErrorKind::NotFound);
    /// ```
    pub fn kind(&self) -> ErrorKind {
        match self {
            StoreError::AgentNotFound(_) | StoreError::BlockNotFound(_) => ErrorKind::NotFound,
            StoreError::BlockExists(_) => ErrorKind::AlreadyExists,
            StoreError::BlockRefused(MemoryError::Changed { .. })
            | StoreError::BlockInUse { .. } => ErrorKind::Conflict,
            StoreError::BlockRefused(_) => ErrorKind::InvalidInput,
            StoreError::AgentExists(_) => ErrorKind::AlreadyExists,
            StoreError::Conflict { .. } => ErrorKind::Conflict,
            StoreError::EmbeddingMismatch { .. } => ErrorKind::Config,
            StoreError::InvalidQuery(_) | StoreError::NulCharacter(_) => ErrorKind::InvalidInput,
            StoreError::Corrupt(_) => ErrorKind::Corrupt,
            StoreError::Unsupported(_) => ErrorKind::Config,
            StoreError::Backend {
                transient: true, ..
            } => ErrorKind::Unavailable,
            StoreError::Backend { .. } => ErrorKind::Backend,
        }
    }
}
