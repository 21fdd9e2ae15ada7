//! Working context: the fixed-size, read/write part of main context.
//!
//! It is split into labelled [`MemoryBlock`]s (by default `persona` and `human`), each with a
//! character limit. The LLM changes them only through function calls
//! (`core_memory_append`, `core_memory_replace`); an edit that would exceed a limit fails with a
//! message saying how far over it is.

mod block;
pub mod patch;
mod skills;
mod working;

pub use block::{DEFAULT_BLOCK_LIMIT, MAX_LABEL_CHARS, MemoryBlock, SharedRef, check_label};
pub use skills::{
    LISTED_DESCRIPTION_CHARS, LISTING_CHARS, SKILL_FILE, Skill, Skills, front_matter,
};
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
    /// A label a block cannot have.
    #[error("`{label}` cannot be a block label: {reason}")]
    InvalidLabel {
        /// The label.
        label: String,
        /// Why not.
        reason: &'static str,
    },
    /// The change would let memory take more of the context window than it may.
    #[error(
        "refused: memory would take about {would_be} tokens (blocks, a new block at its character limit, skills \
         listed and loaded) but may take {budget} of this agent's context window; unload a skill, delete or shorten a block, \
         or move details to archival memory"
    )]
    OverBudget {
        /// Tokens memory would take.
        would_be: usize,
        /// Tokens it may take.
        budget: usize,
    },
    /// No skill has this name.
    #[error("there is no skill named `{name}`; the skills are: {}", available.join(", "))]
    UnknownSkill {
        /// The name asked for.
        name: String,
        /// The skills there are.
        available: Vec<String>,
    },
    /// A skill with this name already exists.
    #[error("a skill named `{name}` already exists")]
    DuplicateSkill {
        /// The name.
        name: String,
    },
    /// A line number outside the block.
    #[error(
        "edit rejected: block `{label}` has {lines} lines, so the line must be 0 (before the first) to {lines}, \
         or -1 for the end; {line} is outside"
    )]
    InvalidLine {
        /// The block.
        label: String,
        /// The line asked for.
        line: i64,
        /// The lines it has.
        lines: usize,
    },
    /// A memory patch could not be applied.
    #[error(transparent)]
    Patch(#[from] patch::PatchError),
    /// A skill has no such file, or no files at all.
    #[error("skill `{name}` has no file `{file}`; its files are: {}", files.join(", "))]
    UnknownSkillFile {
        /// The skill.
        name: String,
        /// The file asked for.
        file: String,
        /// The files it has (none: it was imported by reference only).
        files: Vec<String>,
    },
}
