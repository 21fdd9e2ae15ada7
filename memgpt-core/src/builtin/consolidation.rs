//! `memory_rethink`, `memory_replace`, `memory_insert` and `memory_finish_edits`: Letta's
//! sleep-time functions, with which a
//! companion rewrites memory blocks into a clean, current whole. Offered when an agent lists
//! them ([`CONSOLIDATION_FUNCTIONS`](crate::config::CONSOLIDATION_FUNCTIONS)).

use super::core_memory::{block_usage, replace_once};
use crate::function::{FunctionContext, FunctionError};
use crate::memgpt_fn;

/// Rewrites a memory block as a whole: new_memory replaces its text, so it must keep
/// everything in the block that is still true, integrate what is new, and drop what is
/// outdated or contradicted. Refused, with the current text, if the block changed since you
/// read it.
#[memgpt_fn]
async fn memory_rethink(
    ctx: &mut FunctionContext<'_>,
    /// The block to rewrite, e.g. "human".
    target_block_label: String,
    /// The block's complete new text.
    new_memory: String,
) -> Result<String, FunctionError> {
    let block = ctx.rewrite_block(&target_block_label, &new_memory).await?;
    Ok(format!("Rewritten. {}", block_usage(block)))
}

/// Call when you have finished editing memory: it ends your turn.
#[memgpt_fn(terminal)]
async fn memory_finish_edits(_ctx: &mut FunctionContext<'_>) -> &'static str {
    "Memory edits finished."
}

/// Replaces text in a memory block (Letta's memory_replace): old_str must occur in the block
/// exactly once; an empty new_str deletes it.
#[memgpt_fn]
async fn memory_replace(
    ctx: &mut FunctionContext<'_>,
    /// The block to edit.
    label: String,
    /// The exact text to replace (it must occur once).
    old_str: String,
    /// The replacement text.
    new_str: String,
) -> Result<String, FunctionError> {
    let block = ctx
        .edit_block(&label, |b| replace_once(b, &old_str, &new_str))
        .await?;
    Ok(format!("Replaced. {}", block_usage(block)))
}

/// Inserts text into a memory block at a line (Letta's memory_insert): after line insert_line
/// (0 puts it first), or at the end with -1 (the default).
#[memgpt_fn]
async fn memory_insert(
    ctx: &mut FunctionContext<'_>,
    /// The block to edit.
    label: String,
    /// The text to insert, one or more lines.
    new_str: String,
    /// The line after which it goes (0: first; -1: at the end).
    insert_line: Option<i64>,
) -> Result<String, FunctionError> {
    let at = insert_line.unwrap_or(-1);
    let block = ctx
        .edit_block(&label, |b| {
            let mut lines: Vec<&str> = if b.value().is_empty() {
                Vec::new()
            } else {
                b.value().split('\n').collect()
            };
            let index = usize::try_from(at).map_or(lines.len(), |n| n.min(lines.len()));
            lines.insert(index, new_str.as_str());
            b.set(lines.join("\n"))
        })
        .await?;
    Ok(format!("Inserted. {}", block_usage(block)))
}
