//! Working context: the fixed-size, read/write part of main context.
//!
//! It is split into labelled [`MemoryBlock`]s (by default `persona` and `human`), each with a
//! character limit. The LLM changes them only through function calls
//! (`core_memory_append`, `core_memory_replace`); an edit that would exceed a limit fails with a
//! message saying how far over it is.

mod block;
mod working;

pub use block::{DEFAULT_BLOCK_LIMIT, MemoryBlock, SharedRef};
pub use working::WorkingContext;

/// Why a working-context edit was rejected. The messages are written for the LLM to read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryError {
    /// No block has this label.
    #[error("there is no memory block labelled `{label}`; the blocks are: {}", available.join(", "))]
    UnknownBlock {
        /// The label asked for.
        label: String,
        /// The labels that exist.
        available: Vec<String>,
    },
    /// The edit would exceed the block's character limit.
    #[error(
        "edit rejected: block `{label}` would hold {would_be} characters but its limit is {limit} ({} over); \
         shorten the text, replace older content, or move details to archival memory",
        would_be - limit
    )]
    OverLimit {
        /// The block.
        label: String,
        /// Its character limit.
        limit: usize,
        /// The length the edit would produce.
        would_be: usize,
    },
    /// `core_memory_replace` was given text that does not occur in the block.
    #[error(
        "edit rejected: the text to replace was not found in block `{label}`; it must match the block's \
         current text exactly (case, spacing and punctuation included)"
    )]
    NotFound {
        /// The block.
        label: String,
    },
    /// `memory_replace` was given a text that occurs more than once.
    #[error(
        "edit rejected: the text to replace occurs {occurrences} times in block `{label}`; give a longer \
         text that occurs once"
    )]
    Ambiguous {
        /// The block.
        label: String,
        /// How many times it occurs.
        occurrences: usize,
    },
    /// `core_memory_replace` was given an empty text to replace.
    #[error("edit rejected: the text to replace is empty; give the exact text to change")]
    EmptyPattern,
    /// The block is read-only.
    #[error("edit rejected: block `{label}` is read-only")]
    ReadOnly {
        /// The block.
        label: String,
    },
    /// The block is shared with other agents: its edits go to the block store
    /// ([`FunctionContext::edit_block`](crate::function::FunctionContext::edit_block),
    /// [`Agent::edit_block`](crate::Agent::edit_block)), not to one agent's copy.
    #[error(
        "block `{label}` is shared with other agents: edit it through FunctionContext::edit_block \
         or Agent::edit_block, which write it where it is shared"
    )]
    Shared {
        /// The block.
        label: String,
    },
    /// A shared block changed since the version the edit was based on (another agent or
    /// person edited it): read its current text and edit again.
    #[error(
        "edit rejected: block `{label}` was changed by another writer since you read it; its text is now:\n{current}"
    )]
    Changed {
        /// The block.
        label: String,
        /// Its current text.
        current: String,
    },
    /// A block with this label already exists.
    #[error("a memory block labelled `{label}` already exists")]
    DuplicateLabel {
        /// The label.
        label: String,
    },
}
