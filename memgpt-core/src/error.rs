//! The crate's error type.

use crate::embed::EmbedError;
pub use crate::error_kind::ErrorKind;
use crate::function::RegistryError;
use crate::ids::{AgentId, MessageId, PassageId};
use crate::memory::MemoryError;
use crate::passages::PassageError;
use crate::queue::PolicyError;
use crate::store::StoreError;

/// Why an agent operation failed. When a step fails with one of these, nothing of it was
/// stored and the agent is as it was before the step.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Storage failed or refused (conflict, embedding mismatch...). A store's refusal of a
    /// shared block's edit converts to [`Error::Memory`], as the same edit of an agent's own
    /// block reports it.
    #[error(transparent)]
    Store(StoreError),
    /// A function could not be found or registered.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// A working-context edit was rejected.
    #[error(transparent)]
    Memory(#[from] MemoryError),
    /// Embedding failed.
    #[error("embedding failed: {0}")]
    Embed(#[from] EmbedError),
    /// An eviction policy name did not resolve.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// Messages handed to an agent belong to another agent.
    #[error("message {message} belongs to agent {owner}, not {agent}")]
    ForeignMessage {
        /// The message.
        message: MessageId,
        /// The agent it belongs to.
        owner: AgentId,
        /// The agent it was given to.
        agent: AgentId,
    },
    /// A document upload was larger than [`AgentConfig::max_document_bytes`](crate::agent::AgentConfig::max_document_bytes).
    #[error(
        "document \"{name}\" is {bytes} bytes, over the limit of {limit} bytes; split it or raise \
         AgentConfig::max_document_bytes"
    )]
    DocumentTooLarge {
        /// The document.
        name: String,
        /// Its size.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// A document upload had no text.
    #[error("document \"{name}\" has no text")]
    EmptyDocument {
        /// The document.
        name: String,
    },
    /// An event's message alone does not fit the context window.
    #[error(
        "the message is {tokens} tokens but only {available} fit in the context window next to the system \
         instructions, functions and memory; send long text as a document upload instead"
    )]
    MessageTooLarge {
        /// The message's tokens.
        tokens: usize,
        /// The room left for it.
        available: usize,
    },
    /// System instructions, functions and working context leave no room for messages.
    #[error(
        "the system instructions, functions and core memory take {fixed_tokens} of the {budget} tokens the prompt may \
         use, leaving no room for messages; shorten core memory (Agent::update_memory) or raise the context window"
    )]
    ContextFull {
        /// Tokens outside the queue.
        fixed_tokens: usize,
        /// The prompt budget.
        budget: usize,
    },
    /// The agent was configured inconsistently.
    #[error("invalid agent configuration: {0}")]
    Config(String),
    /// The agent waits for a person to approve or deny a function call
    /// ([`ToolRule::RequiresApproval`](crate::rules::ToolRule::RequiresApproval)); other events
    /// wait until then.
    #[error(
        "the agent is waiting for approval of its call of `{function}` (call id `{call_id}`): approve or deny it first"
    )]
    ApprovalPending {
        /// The pending call's id.
        call_id: String,
        /// The function it calls.
        function: String,
    },
    /// An archival passage to update or forget is not one of the agent's.
    #[error("the agent has no archival passage {0}")]
    PassageNotFound(PassageId),
    /// An archival passage to update or forget is no longer a current fact.
    #[error("passage {id} is not a current fact: {why}")]
    PassageRetired {
        /// The passage.
        id: PassageId,
        /// Superseded (by which passage), forgotten (why) or expired.
        why: String,
    },
    /// An approval or denial names a call that is not waiting for one.
    #[error("no function call with id `{call_id}` is waiting for approval")]
    NoPendingApproval {
        /// The id given.
        call_id: String,
    },
}

impl Error {
    /// What kind of failure this is.
    ///
    /// ```
    /// use memgpt_core::{Error, ErrorKind};
    ///
    /// let error = Error::EmptyDocument { name: "notes.txt".into() };
    /// assert_eq!(error.kind(), ErrorKind::InvalidInput);
    /// ```
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Store(e) => e.kind(),
            Error::Registry(_)
            | Error::Policy(_)
            | Error::Config(_)
            | Error::ContextFull { .. } => ErrorKind::Config,
            Error::Memory(_)
            | Error::DocumentTooLarge { .. }
            | Error::EmptyDocument { .. }
            | Error::MessageTooLarge { .. }
            | Error::ForeignMessage { .. }
            | Error::NoPendingApproval { .. } => ErrorKind::InvalidInput,
            Error::PassageNotFound(_) => ErrorKind::NotFound,
            Error::PassageRetired { .. } => ErrorKind::Conflict,
            Error::ApprovalPending { .. } => ErrorKind::Conflict,
            Error::Embed(EmbedError::Transient { .. }) => ErrorKind::Unavailable,
            Error::Embed(_) => ErrorKind::Backend,
        }
    }
}

impl From<StoreError> for Error {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::BlockRefused(refused) => Error::Memory(refused),
            other => Error::Store(other),
        }
    }
}

impl Error {
    /// The error of writing the document `name` as archival passages.
    pub(crate) fn from_passages(name: &str, error: PassageError) -> Self {
        match error {
            PassageError::TooLarge { bytes, limit } => Self::DocumentTooLarge {
                name: name.to_owned(),
                bytes,
                limit,
            },
            PassageError::Empty => Self::EmptyDocument {
                name: name.to_owned(),
            },
            PassageError::Embed(e) => Self::Embed(e),
        }
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<crate::indexing::IndexingError> for Error {
    fn from(e: crate::indexing::IndexingError) -> Self {
        match e {
            crate::indexing::IndexingError::Embed(e) => Error::Embed(e),
            crate::indexing::IndexingError::Store(e) => Error::Store(e),
        }
    }
}
