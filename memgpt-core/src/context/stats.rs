//! [`ContextStats`]: the tokens of each section of main context against the window.

use serde::{Deserialize, Serialize};

/// How main context's tokens are spent.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ContextStats {
    /// The context window.
    pub window: usize,
    /// System instructions.
    pub system_tokens: usize,
    /// Function schemas.
    pub tools_tokens: usize,
    /// Memory header and working-context blocks.
    pub memory_tokens: usize,
    /// The recursive summary.
    pub summary_tokens: usize,
    /// The FIFO queue's messages.
    pub queue_tokens: usize,
    /// How many messages are queued.
    pub queue_messages: usize,
    /// Everything together.
    pub total_tokens: usize,
    /// `total_tokens / window`.
    pub fraction: f64,
}

impl ContextStats {
    pub(crate) fn new(
        window: usize,
        system_tokens: usize,
        tools_tokens: usize,
        memory_tokens: usize,
        summary_tokens: usize,
        queue_tokens: usize,
        queue_messages: usize,
    ) -> Self {
        let total_tokens =
            system_tokens + tools_tokens + memory_tokens + summary_tokens + queue_tokens;
        Self {
            window,
            system_tokens,
            tools_tokens,
            memory_tokens,
            summary_tokens,
            queue_tokens,
            queue_messages,
            total_tokens,
            fraction: total_tokens as f64 / window.max(1) as f64,
        }
    }
}

impl std::fmt::Display for ContextStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}/{} tokens ({:.1}%): system {}, functions {}, memory {}, summary {}, queue {} ({} messages)",
            self.total_tokens,
            self.window,
            self.fraction * 100.0,
            self.system_tokens,
            self.tools_tokens,
            self.memory_tokens,
            self.summary_tokens,
            self.queue_tokens,
            self.queue_messages
        )
    }
}
