//! Page replacement carried out on main context.
//!
//! Three parts share the work, each with one job: an [`EvictionPolicy`](crate::queue::EvictionPolicy)
//! decides *when* and *what*, the [`QueueManager`] turns its choice into a plan that keeps the
//! queue's invariants, and the [`Pager`] acts: it measures what the policy asked for, evicts the
//! plan from the queue, and folds the evicted messages into the recursive summary.
//!
//! The pager lives beside `queue` and `context` rather than inside `queue`: it works on
//! [`MainContext`], which holds the queue, so placing it in `queue` would make the two modules
//! import each other.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tracing::{debug, warn};

use crate::context::MainContext;
use crate::embed::{Embedder, cosine};
use crate::ids::MessageId;
use crate::queue::{EntryView, Pressure, PressureLines, QueueManager};
use crate::store::{Summary, SummaryRevision};
use crate::summarizer::Summarizer;

/// One flush of the FIFO queue.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FlushRecord {
    /// Messages evicted (still in recall storage).
    pub evicted_messages: usize,
    /// Tokens freed.
    pub evicted_tokens: usize,
    /// Whether the recursive summary was rewritten (false: the summarizer failed and the old
    /// summary was kept).
    pub summary_updated: bool,
    /// Whether it was forced by a provider context-overflow error.
    pub forced: bool,
    /// Prompt tokens before and after.
    pub tokens_before: usize,
    /// Prompt tokens after.
    pub tokens_after: usize,
}

/// What [`Pager::flush`] did.
#[derive(Clone, Debug, PartialEq)]
pub struct Flush {
    /// The flush, as a step reports it.
    pub record: FlushRecord,
    /// Time spent in the summarizer.
    pub summarizer_time: Duration,
}

/// The paging state of main context as the policy sees it, without changing anything: what an
/// inspector shows (see [`Pager::preview`]).
#[derive(Clone, Debug, PartialEq)]
pub struct PagingPreview {
    /// The policy's name.
    pub policy: String,
    /// The queued messages as the policy sees them, oldest first: tokens, recency, uses,
    /// relevance (as last measured: relevance is measured before a flush) and the policy's
    /// signals.
    pub entries: Vec<EntryView>,
    /// The names of the policy's signals ([`EvictionPolicy::signals`](crate::queue::EvictionPolicy::signals)),
    /// in the order of each entry's [`EntryView::signals`].
    pub signals: Vec<String>,
    /// Indices into [`PagingPreview::entries`] that a flush would evict now, ascending (the
    /// manager's invariants applied: calls stay with their results, the newest turn stays).
    pub evict_next: Vec<usize>,
    /// Tokens those messages hold.
    pub evict_tokens: usize,
    /// Where the policy starts to warn and to flush, in prompt tokens.
    pub lines: PressureLines,
}

/// Carries out page replacement on [`MainContext`] for one agent.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use std::sync::Arc;
/// use memgpt_core::message::{Message, MessageKind};
/// use memgpt_core::paging::Pager;
/// use memgpt_core::summarizer::{SummarizeError, Summarizer};
/// use memgpt_core::tokens::{TiktokenCounter, TokenCounter};
/// use memgpt_core::{MainContext, QueueManager, WorkingContext};
///
/// #[derive(Debug)]
/// struct Count;
/// #[async_trait::async_trait]
/// impl Summarizer for Count {
///     async fn summarize(&self, _: &str, evicted: &[Arc<Message>]) -> Result<String, SummarizeError> {
///         Ok(format!("{} messages", evicted.len()))
///     }
/// }
///
/// let now = chrono::Utc::now();
/// let counter: Arc<dyn TokenCounter> = Arc::new(TiktokenCounter::cl100k());
/// let mut context = MainContext::new(
///     "You are helpful.".into(),
///     WorkingContext::default(),
///     Arc::from(vec![]),
///     4_000,
///     counter.clone(),
///     now,
/// );
/// let agent = memgpt_core::ids::AgentId::new();
/// for i in 0..10 {
///     let m = Message::new(agent, MessageKind::User, format!("message {i}"), now);
///     context.queue_mut().push(Arc::new(m), counter.as_ref());
/// }
///
/// // The paper's policy: evict about half the queue, oldest first, into the summary.
/// let manager = QueueManager::default();
/// let pager = Pager::new(&manager, &Count, None);
/// let flush = pager.flush(&mut context, &[], false, || now).await.unwrap();
/// assert!(flush.record.evicted_messages > 0);
/// assert_eq!(flush.record.evicted_messages + context.queue().len(), 10);
/// assert_eq!(context.summary().text, format!("{} messages", flush.record.evicted_messages));
/// // The summary remembers what each flush evicted.
/// let revision = &context.summary().history[0];
/// assert_eq!(revision.evicted_messages as usize, flush.record.evicted_messages);
/// assert_eq!(revision.text, context.summary().text);
/// # }
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Pager<'a> {
    manager: &'a QueueManager,
    summarizer: &'a dyn Summarizer,
    embedder: Option<&'a dyn Embedder>,
}

impl<'a> Pager<'a> {
    /// A pager that evicts what `manager` plans, summarises with `summarizer`, and measures
    /// relevance with `embedder` when the policy asks for it.
    pub fn new(
        manager: &'a QueueManager,
        summarizer: &'a dyn Summarizer,
        embedder: Option<&'a dyn Embedder>,
    ) -> Self {
        Self {
            manager,
            summarizer,
            embedder,
        }
    }

    /// How full `context` is, in the policy's terms.
    pub fn pressure(&self, context: &MainContext) -> Pressure {
        let stats = context.stats();
        let fixed = stats.total_tokens - stats.queue_tokens;
        self.manager.pressure(context.queue(), stats.window, fixed)
    }

    /// What a flush would evict now and why, without evicting anything.
    pub fn preview(&self, context: &MainContext) -> PagingPreview {
        let stats = context.stats();
        let fixed = stats.total_tokens - stats.queue_tokens;
        let plan = self.manager.plan(context.queue(), stats.window, fixed, &[]);
        PagingPreview {
            policy: self.manager.policy().name().to_owned(),
            entries: QueueManager::view_entries(context.queue(), &[]),
            signals: (context.queue().policy().signals().iter())
                .map(|name| (*name).to_owned())
                .collect(),
            evict_next: plan.indices,
            evict_tokens: plan.tokens,
            lines: self
                .manager
                .pressure_lines(context.queue(), stats.window, fixed),
        }
    }

    /// Whether the policy reads attention weights (so the caller should ask the provider for
    /// them).
    pub fn wants_attention(&self) -> bool {
        self.manager.policy().wants_attention()
    }

    /// Records the attention the provider reports for a prompt of `prompt_messages` messages:
    /// the weights of its last messages (the queue's) go to the queue entries. Weights of
    /// another length are ignored.
    pub fn observe_attention(
        &self,
        context: &mut MainContext,
        weights: &[f32],
        prompt_messages: usize,
    ) {
        if weights.len() != prompt_messages {
            return;
        }
        let queued = context.queue().len();
        let tail = &weights[weights.len().saturating_sub(queued)..];
        context.queue_mut().add_attention(tail);
    }

    /// Evicts what the policy (and the manager's invariants) choose and folds it into the
    /// recursive summary; `protected` messages stay. `now` dates a new summary. A failed or
    /// empty summary keeps the previous one. `None` when nothing can be evicted.
    pub async fn flush(
        &self,
        context: &mut MainContext,
        protected: &[MessageId],
        forced: bool,
        now: impl Fn() -> DateTime<Utc>,
    ) -> Option<Flush> {
        self.measure_relevance(context).await;
        let before = context.stats();
        let fixed = before.total_tokens - before.queue_tokens;
        let plan = self
            .manager
            .plan(context.queue(), before.window, fixed, protected);
        if plan.is_empty() {
            warn!(
                tokens = before.total_tokens,
                window = before.window,
                "memory pressure, but nothing can be evicted"
            );
            return None;
        }
        let evicted: Vec<_> = context
            .queue_mut()
            .remove(&plan.indices)
            .into_iter()
            .map(|entry| entry.message().clone())
            .collect();
        let previous = context.summary().clone();
        let started = Instant::now();
        let result = self.summarizer.summarize(&previous.text, &evicted).await;
        let summarizer_time = started.elapsed();
        crate::failpoint::hit("flush.summarized");
        let flushed_at = now();
        let (text, updated_at, summary_updated) = match result {
            Ok(text) if !text.trim().is_empty() => (text, Some(flushed_at), true),
            Ok(_) => {
                warn!("the summarizer returned nothing; keeping the previous summary");
                (previous.text, previous.updated_at, false)
            }
            Err(e) => {
                warn!(error = %e, "the summarizer failed; keeping the previous summary");
                (previous.text, previous.updated_at, false)
            }
        };
        let mut summary = Summary {
            text,
            evicted_messages: previous.evicted_messages + evicted.len() as u64,
            updated_at,
            history: previous.history,
        };
        if let (Some(first), Some(last)) = (
            evicted.iter().map(|m| m.created_at).min(),
            evicted.iter().map(|m| m.created_at).max(),
        ) {
            summary.record(SummaryRevision {
                at: flushed_at,
                evicted_messages: evicted.len() as u64,
                evicted_tokens: plan.tokens as u64,
                evicted_from: first,
                evicted_until: just_after(last),
                forced,
                summary_updated,
                text: summary.text.clone(),
            });
        }
        context.set_summary(summary);
        let after = context.stats();
        debug!(
            evicted = evicted.len(),
            tokens = plan.tokens,
            forced,
            summary_updated,
            "flushed the queue"
        );
        Some(Flush {
            record: FlushRecord {
                evicted_messages: evicted.len(),
                evicted_tokens: plan.tokens,
                summary_updated,
                forced,
                tokens_before: before.total_tokens,
                tokens_after: after.total_tokens,
            },
            summarizer_time,
        })
    }

    /// For a policy that asks for it (and a pager with an embedder): each queued message's
    /// cosine similarity to the observation window (the latest messages), into the queue.
    /// Embedding failures leave relevance unmeasured; the flush goes on.
    async fn measure_relevance(&self, context: &mut MainContext) {
        let (Some(window), Some(embedder)) =
            (self.manager.policy().relevance_window(), self.embedder)
        else {
            return;
        };
        let queue = context.queue();
        let n = queue.len();
        if n <= window {
            return;
        }
        let text = |i: usize| {
            queue
                .get(i)
                .map(|e| e.message().text.clone())
                .unwrap_or_default()
        };
        let observation = (n - window..n).map(text).collect::<Vec<_>>().join("\n");
        let mut texts = vec![observation];
        texts.extend((0..n - window).map(text));
        match embedder.embed(&texts).await {
            Ok(vectors) if vectors.len() == texts.len() => {
                for (i, vector) in vectors[1..].iter().enumerate() {
                    context
                        .queue_mut()
                        .set_relevance(i, cosine(&vectors[0], vector));
                }
            }
            Ok(_) => {
                warn!("the embedder returned the wrong number of vectors; relevance not measured")
            }
            Err(e) => warn!(error = %e, "embedding for relevance failed; relevance not measured"),
        }
    }
}

/// The first instant every store orders after `t`: stores keep microseconds (SQLite's integer
/// micros, PostgreSQL's timestamptz), so `t` rounded down to its microsecond plus one. A range
/// ending there holds a message created at `t` on every store.
fn just_after(t: DateTime<Utc>) -> DateTime<Utc> {
    let sub_micro = i64::from(t.timestamp_subsec_nanos() % 1_000);
    t - chrono::TimeDelta::nanoseconds(sub_micro) + chrono::TimeDelta::microseconds(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn just_after_is_the_next_microsecond() {
        let t = DateTime::<Utc>::from_timestamp(1_700_000_000, 123_456_789).unwrap();
        let after = just_after(t);
        assert_eq!(after.timestamp_subsec_nanos(), 123_457_000);
        assert!(after > t);
        let whole = DateTime::<Utc>::from_timestamp(1_700_000_000, 5_000).unwrap();
        assert_eq!(just_after(whole).timestamp_subsec_nanos(), 6_000);
    }
}
