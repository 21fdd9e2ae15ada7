//! `core_memory_append` and `core_memory_replace`: the paper's working-context edits.

use crate::function::{FunctionContext, FunctionError};
use crate::memgpt_fn;

/// Appends to a block of your core memory (always in view).
#[memgpt_fn]
async fn core_memory_append(
    ctx: &mut FunctionContext<'_>,
    /// The block to edit, e.g. "persona" or "human".
    label: String,
    /// Text to add on a new line.
    content: String,
) -> Result<String, FunctionError> {
    ctx.memory_mut().append(&label, &content)?;
    Ok(block_usage(ctx, &label))
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
    let replaced = ctx
        .memory_mut()
        .replace(&label, &old_content, &new_content)?;
    let times = if replaced == 1 {
        String::new()
    } else {
        format!(" ({replaced} occurrences)")
    };
    Ok(format!("Replaced{times}. {}", block_usage(ctx, &label)))
}

fn block_usage(ctx: &FunctionContext<'_>, label: &str) -> String {
    match ctx.memory().get(label) {
        Some(block) => format!(
            "Block `{label}` now holds {}/{} characters.",
            block.chars(),
            block.limit()
        ),
        None => String::new(),
    }
}
