use std::fmt;

use chrono::{DateTime, Utc};

use crate::ids::MessageId;
use crate::message::MessageKind;

/// How full main context is, as judged by a policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Pressure {
    /// Nothing to do.
    Normal,
    /// Warn the LLM that eviction is near, so it saves what matters.
    Warn,
    /// Evict now.
    Flush,
}

/// What a policy sees of one queued message.
#[derive(Clone, Debug, PartialEq)]
pub struct EntryView {
    /// The message id.
    pub id: MessageId,
    /// Its kind.
    pub kind: MessageKind,
    /// Its token count in the prompt.
    pub tokens: usize,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// Logical time of its last use (appended, retrieved or referenced); larger is more recent.
    pub last_used: u64,
    /// How many times it was used.
    pub uses: u32,
    /// Whether it may not be evicted (pinned by the user, or protected for the step in
    /// progress). The manager drops such entries from any selection.
    pub pinned: bool,
}

/// How much of the window main context uses: what a policy needs to judge pressure, in O(1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContextUsage {
    /// The prompt budget in tokens (the context window minus the room kept for the completion).
    pub window: usize,
    /// Tokens outside the queue: system instructions, functions, working context, summary.
    pub fixed_tokens: usize,
    /// Tokens of the queued messages.
    pub queue_tokens: usize,
    /// How many messages are queued.
    pub queue_messages: usize,
}

impl ContextUsage {
    /// Tokens of the whole prompt.
    pub fn total_tokens(&self) -> usize {
        self.fixed_tokens + self.queue_tokens
    }

    /// The fraction of the window in use.
    pub fn fraction(&self) -> f64 {
        self.total_tokens() as f64 / self.window.max(1) as f64
    }
}

/// A read-only view of the queue for choosing what to evict.
#[derive(Clone, Debug)]
pub struct QueueView<'a> {
    /// The queued messages, oldest first.
    pub entries: &'a [EntryView],
    /// The context's usage.
    pub usage: ContextUsage,
}

/// A page-replacement policy: when to warn, when to flush, what to evict.
///
/// Policies decide; the [`QueueManager`](super::QueueManager) acts and enforces the invariants
/// (calls stay with their results, pinned messages stay, enough is evicted), so a policy can be
/// simple and still never corrupt the queue.
pub trait EvictionPolicy: Send + Sync + fmt::Debug {
    /// A short name (stored in the agent's config).
    fn name(&self) -> &str;

    /// How full the context is. Called before every LLM call, so it should be cheap.
    fn pressure(&self, usage: &ContextUsage) -> Pressure;

    /// Indices into `view.entries` to evict in a flush. Called at [`Pressure::Flush`], or when
    /// the provider reported a context overflow.
    fn select(&self, view: &QueueView<'_>) -> Vec<usize>;
}

/// MemGPT's policy: warn at 70% of the window, flush at 100%, and evict the oldest messages
/// until about 50% of the queue's tokens are freed.
///
/// ```
/// use memgpt_core::queue::{EvictionPolicy, PaperPolicy};
///
/// let policy = PaperPolicy::default();
/// assert_eq!((policy.warn_at, policy.flush_at, policy.evict_fraction), (0.7, 1.0, 0.5));
/// assert_eq!(policy.name(), "paper");
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PaperPolicy {
    /// Fraction of the window at which to warn.
    pub warn_at: f64,
    /// Fraction of the window at which to flush.
    pub flush_at: f64,
    /// Fraction of the queue's tokens to evict in a flush.
    pub evict_fraction: f64,
}

impl Default for PaperPolicy {
    fn default() -> Self {
        Self {
            warn_at: 0.7,
            flush_at: 1.0,
            evict_fraction: 0.5,
        }
    }
}

impl EvictionPolicy for PaperPolicy {
    fn name(&self) -> &str {
        "paper"
    }

    fn pressure(&self, usage: &ContextUsage) -> Pressure {
        let fraction = usage.fraction();
        if fraction >= self.flush_at {
            Pressure::Flush
        } else if fraction >= self.warn_at {
            Pressure::Warn
        } else {
            Pressure::Normal
        }
    }

    fn select(&self, view: &QueueView<'_>) -> Vec<usize> {
        let target = (view.usage.queue_tokens as f64 * self.evict_fraction).ceil() as usize;
        let mut freed = 0;
        let mut chosen = Vec::new();
        for (i, entry) in view.entries.iter().enumerate() {
            if freed >= target {
                break;
            }
            if entry.pinned {
                continue;
            }
            freed += entry.tokens;
            chosen.push(i);
        }
        chosen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(tokens: &[usize]) -> Vec<EntryView> {
        tokens
            .iter()
            .enumerate()
            .map(|(i, &tokens)| EntryView {
                id: MessageId::new(),
                kind: MessageKind::User,
                tokens,
                created_at: Utc::now(),
                last_used: i as u64,
                uses: 1,
                pinned: false,
            })
            .collect()
    }

    #[test]
    fn thresholds() {
        let policy = PaperPolicy::default();
        let usage = |fixed| ContextUsage {
            window: 1000,
            fixed_tokens: fixed,
            queue_tokens: 600,
            queue_messages: 6,
        };
        assert_eq!(policy.pressure(&usage(0)), Pressure::Normal);
        assert_eq!(policy.pressure(&usage(99)), Pressure::Normal);
        assert_eq!(policy.pressure(&usage(100)), Pressure::Warn);
        assert_eq!(policy.pressure(&usage(399)), Pressure::Warn);
        assert_eq!(policy.pressure(&usage(400)), Pressure::Flush);
    }

    #[test]
    fn evicts_oldest_half_by_tokens_skipping_pinned() {
        let policy = PaperPolicy::default();
        let mut e = entries(&[10, 10, 50, 10, 10, 10]);
        e[1].pinned = true;
        let usage = ContextUsage {
            window: 100,
            fixed_tokens: 0,
            queue_tokens: 100,
            queue_messages: 6,
        };
        let view = QueueView { entries: &e, usage };
        // 100 queue tokens: free 50, oldest first, never the pinned one.
        assert_eq!(policy.select(&view), vec![0, 2]);
    }
}
