//! `core_memory_append` and `core_memory_replace`: the paper's working-context edits.

use crate::function::{FunctionContext, FunctionError};
use crate::memgpt_fn;
use crate::memory::{MemoryBlock, MemoryError};

/// Appends to a block of your core memory (always in view).
#[memgpt_fn]
async fn core_memory_append(
    ctx: &mut FunctionContext<'_>,
    /// The block to edit, e.g. "persona" or "human".
    label: String,
    /// Text to add on a new line.
    content: String,
) -> Result<String, FunctionError> {
    let block = ctx.edit_block(&label, |b| b.append(&content)).await?;
    Ok(block_usage(block))
}

/// Replaces text in a block of your core memory. old_content must match exactly; an empty
/// new_content deletes it.
#[memgpt_fn]
async fn core_memory_replace(
    ctx: &mut FunctionContext<'_>,
    /// The block to edit, e.g. "persona" or "human".
    label: String,
    /// The exact text to replace.
    old_content: String,
    /// The replacement text.
    new_content: String,
) -> Result<String, FunctionError> {
    let replaced = std::sync::atomic::AtomicUsize::new(0);
    let block = ctx
        .edit_block(&label, |b| {
            let n = b.replace(&old_content, &new_content)?;
            replaced.store(n, std::sync::atomic::Ordering::Relaxed);
            Ok(())
        })
        .await?;
    let usage = block_usage(block);
    let times = match replaced.into_inner() {
        1 => String::new(),
        n => format!(" ({n} occurrences)"),
    };
    Ok(format!("Replaced{times}. {usage}"))
}

/// What an edited block now holds, for the model.
pub(super) fn block_usage(block: &MemoryBlock) -> String {
    format!(
        "Block `{}` now holds {}/{} characters.",
        block.label(),
        block.chars(),
        block.limit()
    )
}

/// Replaces `old`, which must occur exactly once (Letta's `memory_replace` and `memory`'s
/// `str_replace`); an empty `old` is [`MemoryError::EmptyPattern`].
pub(super) fn replace_once(
    block: &mut MemoryBlock,
    old: &str,
    new: &str,
) -> Result<(), MemoryError> {
    let occurrences = if old.is_empty() {
        0
    } else {
        block.value().matches(old).count()
    };
    if occurrences > 1 {
        return Err(MemoryError::Ambiguous {
            label: block.label().to_owned(),
            occurrences,
        });
    }
    block.replace(old, new).map(|_| ())
}
