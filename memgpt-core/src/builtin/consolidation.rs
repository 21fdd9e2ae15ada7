//! `memory_rethink` and `memory_finish_edits`: Letta's sleep-time functions, with which a
//! companion rewrites memory blocks into a clean, current whole. Offered when an agent lists
//! them ([`CONSOLIDATION_FUNCTIONS`](crate::config::CONSOLIDATION_FUNCTIONS)).

use super::core_memory::block_usage;
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
