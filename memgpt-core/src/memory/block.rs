//! [`MemoryBlock`]: one labelled, size-limited section of working context.

use serde::{Deserialize, Serialize};

use super::MemoryError;
use crate::ids::BlockId;

/// The default character limit of a block (Letta's default for `persona` and `human`).
pub const DEFAULT_BLOCK_LIMIT: usize = 2_000;

/// One labelled section of working context, e.g. `persona` or `human`.
///
/// ```
/// use memgpt_core::memory::MemoryBlock;
///
/// let mut human = MemoryBlock::new("human", "Name: Chad").with_limit(30);
/// human.append("Likes: hiking").unwrap();
/// assert_eq!(human.value(), "Name: Chad\nLikes: hiking");
/// let err = human.append("Dislikes: rain").unwrap_err();
/// assert!(err.to_string().contains("39 characters but its limit is 30 (9 over)"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryBlock {
    label: String,
    value: String,
    limit: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    #[serde(default)]
    read_only: bool,
    /// Set when the block is shared: this is the agent's copy of a block kept in the
    /// [`BlockStore`](crate::store::BlockStore).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    shared: Option<SharedRef>,
}

/// The longest label a block may have, in characters.
pub const MAX_LABEL_CHARS: usize = 100;

/// Checks that `label` can name a block: not empty, at most [`MAX_LABEL_CHARS`] characters,
/// letters, digits and `_ - . /` only (it is written as a tag in the prompt; Letta's
/// `system/human/work` labels fit).
pub fn check_label(label: &str) -> Result<(), MemoryError> {
    let invalid = |reason| {
        Err(MemoryError::InvalidLabel {
            label: label.to_owned(),
            reason,
        })
    };
    if label.is_empty() {
        return invalid("it is empty");
    }
    if label.chars().count() > MAX_LABEL_CHARS {
        return invalid("it is longer than 100 characters");
    }
    if !label
        .chars()
        .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'))
    {
        return invalid("use letters, digits, `_`, `-`, `.` and `/` only");
    }
    Ok(())
}

/// Where a shared block lives: its id in the [`BlockStore`](crate::store::BlockStore) and the
/// version an agent's copy shows (every edit bumps it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SharedRef {
    /// The block's id.
    pub id: BlockId,
    /// The version of the copy.
    pub version: u64,
}

impl MemoryBlock {
    /// A block with the default limit of [`DEFAULT_BLOCK_LIMIT`] characters.
    pub fn new(label: impl Into<String>, value: impl Into<String>) -> Self {
        Self {
            label: label.into(),
            value: value.into(),
            limit: DEFAULT_BLOCK_LIMIT,
            description: None,
            read_only: false,
            shared: None,
        }
    }

    /// Sets the character limit.
    pub fn with_limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }

    /// Sets a description shown to the LLM next to the block.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// Makes the block read-only for the LLM.
    pub fn read_only(mut self) -> Self {
        self.read_only = true;
        self
    }

    /// The label.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The current text.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// The character limit.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// The description, if any.
    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }

    /// Whether the LLM may edit it.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Where the block lives when it is shared by several agents, `None` for an agent's own.
    pub fn shared(&self) -> Option<SharedRef> {
        self.shared
    }

    /// The same block marked as the copy of shared block `id` at `version`.
    pub(crate) fn sharing(mut self, id: BlockId, version: u64) -> Self {
        self.shared = Some(SharedRef { id, version });
        self
    }

    /// The block's content and settings without its shared marker (what the block store keeps).
    pub(crate) fn unshared(mut self) -> Self {
        self.shared = None;
        self
    }

    /// Changes the character limit; refused when the current text is longer.
    pub fn set_limit(&mut self, limit: usize) -> Result<(), MemoryError> {
        let chars = self.chars();
        if chars > limit {
            return Err(MemoryError::OverLimit {
                label: self.label.clone(),
                limit,
                would_be: chars,
            });
        }
        self.limit = limit;
        Ok(())
    }

    /// Changes the label (the caller keeps labels unique).
    pub(crate) fn set_label(&mut self, label: String) {
        self.label = label;
    }

    /// Characters the block may come to hold: its limit, or its text if longer.
    pub fn chars_at_limit(&self) -> usize {
        self.limit.max(self.chars())
    }

    /// Changes the description shown to the LLM.
    pub fn set_description(&mut self, description: Option<String>) {
        self.description = description;
    }

    /// Makes the block read-only for every writer, or writable again.
    pub fn set_read_only(&mut self, read_only: bool) {
        self.read_only = read_only;
    }

    /// Its length in characters (what the limit counts).
    pub fn chars(&self) -> usize {
        self.value.chars().count()
    }

    /// Appends `content` on a new line.
    pub fn append(&mut self, content: &str) -> Result<(), MemoryError> {
        let new = if self.value.is_empty() {
            content.to_owned()
        } else {
            format!("{}\n{}", self.value, content)
        };
        self.set(new)
    }

    /// Replaces every occurrence of `old` with `new` (an empty `new` deletes); returns how many
    /// occurrences were replaced.
    pub fn replace(&mut self, old: &str, new: &str) -> Result<usize, MemoryError> {
        if old.is_empty() {
            return Err(MemoryError::EmptyPattern);
        }
        let count = self.value.matches(old).count();
        if count == 0 {
            return Err(MemoryError::NotFound {
                label: self.label.clone(),
            });
        }
        self.set(self.value.replace(old, new))?;
        Ok(count)
    }

    /// Replaces the whole text, checking the limit and the read-only flag.
    pub fn set(&mut self, value: String) -> Result<(), MemoryError> {
        if self.read_only {
            return Err(MemoryError::ReadOnly {
                label: self.label.clone(),
            });
        }
        let would_be = value.chars().count();
        if would_be > self.limit {
            return Err(MemoryError::OverLimit {
                label: self.label.clone(),
                limit: self.limit,
                would_be,
            });
        }
        self.value = value;
        Ok(())
    }

    /// Renders the block for the prompt: `<label characters="n/limit">text</label>`.
    pub fn render(&self, out: &mut String) {
        use std::fmt::Write;
        let _ = write!(
            out,
            "<{} characters=\"{}/{}\"",
            self.label,
            self.chars(),
            self.limit
        );
        if let Some(description) = &self.description {
            let _ = write!(out, " description=\"{}\"", description.replace('"', "'"));
        }
        if self.read_only {
            out.push_str(" read_only=\"true\"");
        }
        let _ = write!(out, ">\n{}\n</{}>", self.value, self.label);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_count_characters_not_bytes() {
        let mut b = MemoryBlock::new("human", "").with_limit(3);
        b.append("éé€").unwrap();
        assert_eq!(b.chars(), 3);
        assert!(matches!(
            b.append("x"),
            Err(MemoryError::OverLimit {
                would_be: 5,
                limit: 3,
                ..
            })
        ));
        assert_eq!(b.value(), "éé€", "a rejected edit changes nothing");
    }

    #[test]
    fn replace_requires_an_exact_match_and_reports_count() {
        let mut b = MemoryBlock::new("human", "likes tea. likes tea.");
        assert_eq!(b.replace("likes tea", "likes coffee").unwrap(), 2);
        assert_eq!(b.value(), "likes coffee. likes coffee.");
        assert_eq!(
            b.replace("Likes coffee", "x"),
            Err(MemoryError::NotFound {
                label: "human".into()
            })
        );
        assert_eq!(b.replace("", "x"), Err(MemoryError::EmptyPattern));
        assert_eq!(b.replace(" likes coffee.", "").unwrap(), 1);
        assert_eq!(b.value(), "likes coffee.");
    }

    #[test]
    fn read_only_blocks_reject_edits() {
        let mut b = MemoryBlock::new("rules", "be kind").read_only();
        assert_eq!(
            b.append("x"),
            Err(MemoryError::ReadOnly {
                label: "rules".into()
            })
        );
    }

    #[test]
    fn over_limit_message_says_how_far_over() {
        let err = MemoryError::OverLimit {
            label: "persona".into(),
            limit: 2000,
            would_be: 2150,
        };
        assert!(
            err.to_string()
                .contains("2150 characters but its limit is 2000 (150 over)")
        );
    }

    #[test]
    fn render_shows_usage() {
        let mut out = String::new();
        MemoryBlock::new("persona", "I am Sam.").render(&mut out);
        assert_eq!(
            out,
            "<persona characters=\"9/2000\">\nI am Sam.\n</persona>"
        );
    }
}
