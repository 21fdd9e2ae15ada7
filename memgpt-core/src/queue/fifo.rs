//! [`FifoQueue`]: the messages in main context, oldest first, with what policies know of each
//! ([`QueueEntry`]).

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Arc;

use crate::ids::MessageId;
use crate::llm::ChatMessage;
use crate::message::{Message, MessageKind};
use crate::tokens::TokenCounter;

use super::policy::{EvictionPolicy, PaperPolicy, eviction_units};

/// One message in the FIFO queue, rendered and counted once.
#[derive(Clone, Debug)]
pub struct QueueEntry {
    message: Arc<Message>,
    chat: Arc<ChatMessage>,
    tokens: usize,
    /// Logical time of the last use (append, retrieval or reference).
    last_used: u64,
    /// How often it was used.
    uses: u32,
    pinned: bool,
    /// Its similarity to the latest turns, when last measured.
    relevance: Option<f32>,
    /// The queue's policy's signals of it, in the order of [`EvictionPolicy::signals`].
    signals: Box<[f32]>,
}

impl QueueEntry {
    /// The stored message.
    pub fn message(&self) -> &Arc<Message> {
        &self.message
    }

    /// The message as the LLM sees it.
    pub fn chat(&self) -> &ChatMessage {
        &self.chat
    }

    /// The same, shared: what a [`ChatRequest`](crate::llm::ChatRequest) holds.
    pub fn shared_chat(&self) -> &Arc<ChatMessage> {
        &self.chat
    }

    /// Its token count in the prompt.
    pub fn tokens(&self) -> usize {
        self.tokens
    }

    /// Logical time of its last use.
    pub fn last_used(&self) -> u64 {
        self.last_used
    }

    /// How many times it was used.
    pub fn uses(&self) -> u32 {
        self.uses
    }

    /// Whether it is pinned (never evicted).
    pub fn is_pinned(&self) -> bool {
        self.pinned
    }

    /// Its similarity to the latest turns, when last measured (before a flush, for policies
    /// that ask for it).
    pub fn relevance(&self) -> Option<f32> {
        self.relevance
    }

    /// The values of the queue's policy's signals for it, in the order of
    /// [`EvictionPolicy::signals`] (see [`FifoQueue::signal`] to read one by name).
    pub fn signals(&self) -> &[f32] {
        &self.signals
    }

    fn is_function_result(&self) -> bool {
        matches!(
            self.message.kind,
            MessageKind::FunctionReturn | MessageKind::FunctionError
        )
    }

    fn calls_functions(&self) -> bool {
        self.message.kind == MessageKind::Assistant && !self.message.tool_calls.is_empty()
    }
}

/// The recent messages in context, oldest first.
///
/// The queue keeps what every policy may read of an entry (tokens, recency, uses, pins,
/// relevance) and lets its [`EvictionPolicy`] keep its own per-entry signals: the policy's
/// hooks run when a message is queued, used and attended to
/// ([`EvictionPolicy::on_queued`], [`on_touched`](EvictionPolicy::on_touched),
/// [`on_attended`](EvictionPolicy::on_attended)).
#[derive(Clone, Debug)]
pub struct FifoQueue {
    entries: VecDeque<QueueEntry>,
    tokens: usize,
    clock: u64,
    policy: Arc<dyn EvictionPolicy>,
}

impl Default for FifoQueue {
    /// An empty queue under the paper's policy (which keeps no signals).
    fn default() -> Self {
        Self::with_policy(Arc::new(PaperPolicy::default()))
    }
}

impl FifoQueue {
    /// An empty queue under the paper's policy.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty queue whose entries keep `policy`'s signals.
    pub fn with_policy(policy: Arc<dyn EvictionPolicy>) -> Self {
        Self {
            entries: VecDeque::new(),
            tokens: 0,
            clock: 0,
            policy,
        }
    }

    /// The policy whose signals the entries keep.
    pub fn policy(&self) -> &Arc<dyn EvictionPolicy> {
        &self.policy
    }

    /// Switches to `policy`: every entry's signals start afresh from
    /// [`EvictionPolicy::on_queued`] (what the old policy observed is dropped).
    pub fn set_policy(&mut self, policy: Arc<dyn EvictionPolicy>) {
        self.policy = policy;
        for entry in &mut self.entries {
            entry.signals = Self::first_signals(self.policy.as_ref(), &entry.message);
        }
    }

    fn first_signals(policy: &dyn EvictionPolicy, message: &Message) -> Box<[f32]> {
        let mut signals = vec![0.0; policy.signals().len()].into_boxed_slice();
        if !signals.is_empty() {
            policy.on_queued(message, &mut signals);
        }
        signals
    }

    /// The value of the signal `name` of the entry at `index`, if the policy keeps it.
    pub fn signal(&self, index: usize, name: &str) -> Option<f32> {
        let at = self.policy.signals().iter().position(|s| *s == name)?;
        self.entries.get(index)?.signals.get(at).copied()
    }

    /// Appends a message, counting its tokens once.
    pub fn push(&mut self, message: Arc<Message>, counter: &dyn TokenCounter) {
        let chat = message.to_chat();
        let tokens = counter.count_message(&chat);
        let signals = Self::first_signals(self.policy.as_ref(), &message);
        self.clock += 1;
        self.tokens += tokens;
        self.entries.push_back(QueueEntry {
            message,
            chat: Arc::new(chat),
            tokens,
            last_used: self.clock,
            uses: 1,
            pinned: false,
            relevance: None,
            signals,
        });
    }

    /// Total tokens of every entry (O(1)).
    pub fn tokens(&self) -> usize {
        self.tokens
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the queue is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries, oldest first.
    pub fn entries(&self) -> impl ExactSizeIterator<Item = &QueueEntry> + DoubleEndedIterator {
        self.entries.iter()
    }

    /// The entry at `index`.
    pub fn get(&self, index: usize) -> Option<&QueueEntry> {
        self.entries.get(index)
    }

    /// Position of the message `id`.
    pub fn position(&self, id: MessageId) -> Option<usize> {
        self.entries.iter().position(|e| e.message.id == id)
    }

    /// The message ids, oldest first (what the agent store persists).
    pub fn ids(&self) -> Vec<MessageId> {
        self.entries.iter().map(|e| e.message.id).collect()
    }

    /// Hands attention weights, one per entry in queue order (what a provider reported for the
    /// queue's part of the prompt), to the policy ([`EvictionPolicy::on_attended`]). Ignored
    /// unless there is exactly one weight per entry; weights that are not finite are skipped.
    pub fn add_attention(&mut self, weights: &[f32]) {
        if weights.len() != self.entries.len() {
            return;
        }
        for (entry, w) in self.entries.iter_mut().zip(weights) {
            if w.is_finite() {
                self.policy.on_attended(*w, &mut entry.signals);
            }
        }
    }

    /// Records the relevance of the entry at `index` to the latest turns.
    pub fn set_relevance(&mut self, index: usize, relevance: f32) {
        if let Some(entry) = self.entries.get_mut(index) {
            entry.relevance = Some(relevance);
        }
    }

    /// Pins or unpins the message `id`; returns whether it is in the queue.
    pub fn set_pinned(&mut self, id: MessageId, pinned: bool) -> bool {
        match self.entries.iter_mut().find(|e| e.message.id == id) {
            Some(entry) => {
                entry.pinned = pinned;
                true
            }
            None => false,
        }
    }

    /// Records a use of the message `id` (it was retrieved or referenced): LRU-style policies
    /// read this.
    pub fn touch(&mut self, id: MessageId) {
        self.clock += 1;
        let clock = self.clock;
        if let Some(entry) = self.entries.iter_mut().find(|e| e.message.id == id) {
            entry.last_used = clock;
            entry.uses = entry.uses.saturating_add(1);
            self.policy.on_touched(&mut entry.signals);
        }
    }

    /// Splits the queue into eviction units: an assistant message that calls functions together
    /// with the function results that follow it; every other message alone. Evicting whole
    /// units never separates a call from its result.
    pub fn units(&self) -> Vec<Range<usize>> {
        eviction_units(
            self.entries.len(),
            |i| self.entries[i].calls_functions(),
            |i| self.entries[i].is_function_result(),
        )
    }

    /// Removes the entries at `indices` (any order, duplicates ignored) and returns them oldest
    /// first.
    pub fn remove(&mut self, indices: &[usize]) -> Vec<QueueEntry> {
        let mut sorted: Vec<usize> = indices
            .iter()
            .copied()
            .filter(|&i| i < self.entries.len())
            .collect();
        sorted.sort_unstable();
        sorted.dedup();
        let mut removed = Vec::with_capacity(sorted.len());
        // The common case (the paper's policy, oldest first): a prefix, popped in O(k).
        if sorted.iter().enumerate().all(|(n, &i)| n == i) {
            for _ in 0..sorted.len() {
                if let Some(entry) = self.entries.pop_front() {
                    self.tokens -= entry.tokens;
                    removed.push(entry);
                }
            }
            return removed;
        }
        // Otherwise one pass; the capacity is kept, so the next append does not reallocate.
        let mut kept = VecDeque::with_capacity(self.entries.capacity());
        let mut next = sorted.iter().peekable();
        for (i, entry) in std::mem::take(&mut self.entries).into_iter().enumerate() {
            if next.peek() == Some(&&i) {
                next.next();
                self.tokens -= entry.tokens;
                removed.push(entry);
            } else {
                kept.push_back(entry);
            }
        }
        self.entries = kept;
        removed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::AgentId;
    use crate::message::ToolCall;
    use crate::tokens::ApproxCounter;
    use chrono::Utc;

    fn msg(kind: MessageKind, calls: usize) -> Arc<Message> {
        let mut m = Message::new(AgentId::new(), kind, "x".repeat(40), Utc::now());
        m.tool_calls = (0..calls)
            .map(|i| ToolCall {
                id: format!("c{i}"),
                name: "f".into(),
                arguments: "{}".into(),
            })
            .collect();
        Arc::new(m)
    }

    #[test]
    fn totals_follow_pushes_and_removals() {
        let mut q = FifoQueue::new();
        for _ in 0..5 {
            q.push(msg(MessageKind::User, 0), &ApproxCounter);
        }
        let per = q.get(0).unwrap().tokens();
        assert_eq!(q.tokens(), 5 * per);
        let removed = q.remove(&[3, 1, 3]);
        assert_eq!(removed.len(), 2);
        assert_eq!(q.tokens(), 3 * per);
        assert_eq!(q.len(), 3);
    }

    #[test]
    fn calls_and_results_form_one_unit() {
        let mut q = FifoQueue::new();
        q.push(msg(MessageKind::User, 0), &ApproxCounter);
        q.push(msg(MessageKind::Assistant, 2), &ApproxCounter);
        q.push(msg(MessageKind::FunctionReturn, 0), &ApproxCounter);
        q.push(msg(MessageKind::FunctionError, 0), &ApproxCounter);
        q.push(msg(MessageKind::Heartbeat, 0), &ApproxCounter);
        q.push(msg(MessageKind::Assistant, 0), &ApproxCounter);
        assert_eq!(q.units(), vec![0..1, 1..4, 4..5, 5..6]);
    }

    #[test]
    fn touch_updates_recency() {
        let mut q = FifoQueue::new();
        q.push(msg(MessageKind::User, 0), &ApproxCounter);
        q.push(msg(MessageKind::User, 0), &ApproxCounter);
        let first = q.get(0).unwrap().message().id;
        q.touch(first);
        assert!(q.get(0).unwrap().last_used() > q.get(1).unwrap().last_used());
        assert_eq!(q.get(0).unwrap().uses(), 2);
    }
}
