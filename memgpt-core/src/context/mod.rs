//! Main context: exactly the tokens the LLM sees.
//!
//! In order: the read-only **system instructions**, then the **memory header** (recall and
//! archival counts, last modification) and **working context** blocks, all in the system
//! message; then the **FIFO queue**, whose first entry is the **recursive summary** of every
//! evicted message. The function schemas travel with the request and are counted too.

mod stats;

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::json;

pub use stats::ContextStats;

use crate::llm::{ChatMessage, ToolSchema};
use crate::memory::WorkingContext;
use crate::queue::FifoQueue;
use crate::store::Summary;
use crate::time::format_time;
use crate::tokens::TokenCounter;

/// Counts shown in the memory header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryCounts {
    /// Messages in recall storage.
    pub recall: u64,
    /// Passages in archival storage.
    pub archival: u64,
}

/// The prompt an agent sends, kept incrementally: every part is rendered and counted once and
/// re-rendered only when it changes.
#[derive(Clone, Debug)]
pub struct MainContext {
    system: String,
    system_tokens: usize,
    memory: WorkingContext,
    memory_rendered: String,
    memory_tokens: usize,
    memory_revision: u64,
    memory_updated_at: DateTime<Utc>,
    counts: MemoryCounts,
    summary: Summary,
    summary_chat: Option<Arc<ChatMessage>>,
    summary_tokens: usize,
    queue: FifoQueue,
    tools: Arc<[ToolSchema]>,
    tools_tokens: usize,
    window: usize,
    counter: Arc<dyn TokenCounter>,
}

impl MainContext {
    /// Main context with `system` instructions, working context `memory`, the functions
    /// `tools`, a `window` of tokens, and an empty queue.
    pub fn new(
        system: String,
        memory: WorkingContext,
        tools: Arc<[ToolSchema]>,
        window: usize,
        counter: Arc<dyn TokenCounter>,
        memory_updated_at: DateTime<Utc>,
    ) -> Self {
        let mut ctx = Self {
            system_tokens: counter.count_text(&system),
            system,
            memory_rendered: String::new(),
            memory_tokens: 0,
            memory_revision: 0,
            memory_updated_at,
            counts: MemoryCounts::default(),
            summary: Summary::default(),
            summary_chat: None,
            summary_tokens: 0,
            queue: FifoQueue::new(),
            tools_tokens: counter.count_tools(&tools),
            tools,
            window,
            memory,
            counter,
        };
        ctx.render_memory();
        ctx
    }

    /// The read-only system instructions.
    pub fn system(&self) -> &str {
        &self.system
    }

    /// Working context.
    pub fn memory(&self) -> &WorkingContext {
        &self.memory
    }

    /// Working context for editing. Call [`MainContext::memory_changed`] afterwards so the
    /// rendered prompt follows.
    pub fn memory_mut(&mut self) -> &mut WorkingContext {
        &mut self.memory
    }

    /// Re-renders working context if it changed since the last render; returns whether it did.
    pub fn memory_changed(&mut self, now: DateTime<Utc>) -> bool {
        if self.memory.revision() == self.memory_revision {
            return false;
        }
        self.memory_updated_at = now;
        self.render_memory();
        true
    }

    /// When working context last changed.
    pub fn memory_updated_at(&self) -> DateTime<Utc> {
        self.memory_updated_at
    }

    /// The counts shown in the memory header.
    pub fn counts(&self) -> MemoryCounts {
        self.counts
    }

    /// Sets the counts shown in the memory header.
    pub fn set_counts(&mut self, counts: MemoryCounts) {
        self.counts = counts;
    }

    /// The recursive summary.
    pub fn summary(&self) -> &Summary {
        &self.summary
    }

    /// Replaces the recursive summary.
    pub fn set_summary(&mut self, summary: Summary) {
        self.summary_chat = (!summary.text.trim().is_empty()).then(|| {
            let text = format!(
                "Summary of the {} earlier messages evicted from context (the conversation remains \
                 searchable with conversation_search):\n{}",
                summary.evicted_messages,
                summary.text.trim()
            );
            let time = summary.updated_at.map(format_time).unwrap_or_default();
            Arc::new(ChatMessage::user(
                json!({ "type": "system_alert", "message": text, "time": time }).to_string(),
            ))
        });
        self.summary_tokens = self
            .summary_chat
            .as_ref()
            .map_or(0, |c| self.counter.count_message(c));
        self.summary = summary;
    }

    /// The FIFO queue.
    pub fn queue(&self) -> &FifoQueue {
        &self.queue
    }

    /// The FIFO queue, for appending and evicting.
    pub fn queue_mut(&mut self) -> &mut FifoQueue {
        &mut self.queue
    }

    /// The function schemas sent with every request.
    pub fn tools(&self) -> &Arc<[ToolSchema]> {
        &self.tools
    }

    /// The context window in tokens.
    pub fn window(&self) -> usize {
        self.window
    }

    /// Changes the context window.
    pub fn set_window(&mut self, window: usize) {
        self.window = window;
    }

    /// The token counter.
    pub fn counter(&self) -> &Arc<dyn TokenCounter> {
        &self.counter
    }

    /// Tokens outside the FIFO queue proper: system message, functions and summary.
    pub fn fixed_tokens(&self) -> usize {
        let stats = self.stats();
        stats.total_tokens - stats.queue_tokens
    }

    /// Token use per section.
    pub fn stats(&self) -> ContextStats {
        let header_tokens = self.counter.count_text(&self.memory_heading())
            + self.counter.count_text(&self.memory_counts());
        ContextStats::new(
            self.window,
            self.system_tokens + crate::tokens::TOKENS_PER_MESSAGE,
            self.tools_tokens,
            header_tokens + self.memory_tokens,
            self.summary_tokens,
            self.queue.tokens(),
            self.queue.len(),
        )
    }

    /// The system message: instructions, then working context under its heading, then the
    /// counts of recall and archival storage. Everything before the counts changes only when
    /// memory is edited ([`MainContext::stable_prefix_len`]), so prompt caches keep it.
    pub fn system_message(&self) -> ChatMessage {
        let heading = self.memory_heading();
        let counts = self.memory_counts();
        let mut content = String::with_capacity(
            self.system.len() + heading.len() + self.memory_rendered.len() + counts.len() + 4,
        );
        content.push_str(&self.system);
        content.push_str("\n\n");
        content.push_str(&heading);
        content.push('\n');
        content.push_str(&self.memory_rendered);
        content.push_str("\n\n");
        content.push_str(&counts);
        ChatMessage::system(content)
    }

    /// The bytes of [`MainContext::system_message`] that stay the same from step to step
    /// until memory is edited: the instructions and working context, up to the counts.
    pub fn stable_prefix_len(&self) -> usize {
        self.system.len() + 2 + self.memory_heading().len() + 1 + self.memory_rendered.len()
    }

    /// The whole prompt, in order: system message, summary (if any), queue.
    pub fn messages(&self) -> Vec<ChatMessage> {
        self.shared_messages()
            .into_iter()
            .map(Arc::unwrap_or_clone)
            .collect()
    }

    /// [`MainContext::messages`], each message shared with this context instead of copied
    /// (what a [`ChatRequest`](crate::llm::ChatRequest) holds): building a step's request copies
    /// the system message alone.
    pub fn shared_messages(&self) -> Vec<Arc<ChatMessage>> {
        let mut messages = Vec::with_capacity(self.queue.len() + 2);
        messages.push(Arc::new(self.system_message()));
        messages.extend(self.summary_chat.iter().cloned());
        messages.extend(self.queue.entries().map(|e| e.shared_chat().clone()));
        messages
    }

    /// The heading of working context (changes only when memory is edited).
    fn memory_heading(&self) -> String {
        format!(
            "### Memory [last modified: {}]\nCore memory (limited size, always in view):",
            format_time(self.memory_updated_at),
        )
    }

    /// What external storage holds (changes with every message).
    fn memory_counts(&self) -> String {
        format!(
            "{} messages are in recall memory and {} passages in archival memory (search them \
             with functions).",
            self.counts.recall, self.counts.archival
        )
    }

    fn render_memory(&mut self) {
        self.memory_rendered = self.memory.render();
        self.memory_tokens = self.counter.count_text(&self.memory_rendered);
        self.memory_revision = self.memory.revision();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::AgentId;
    use crate::memory::MemoryBlock;
    use crate::message::{Message, MessageKind};
    use crate::tokens::TiktokenCounter;

    fn ctx() -> MainContext {
        let memory = WorkingContext::from_blocks([
            MemoryBlock::new("persona", "I am Sam."),
            MemoryBlock::new("human", ""),
        ])
        .unwrap();
        MainContext::new(
            "You are a helpful agent.".into(),
            memory,
            Arc::from(Vec::new()),
            1000,
            Arc::new(TiktokenCounter::cl100k()),
            Utc::now(),
        )
    }

    #[test]
    fn stats_match_a_full_recount() {
        let mut c = ctx();
        c.set_counts(MemoryCounts {
            recall: 12,
            archival: 3,
        });
        for i in 0..20 {
            let m = Message::new(
                AgentId::new(),
                MessageKind::User,
                format!("message number {i}"),
                Utc::now(),
            );
            c.queue_mut().push(Arc::new(m), &TiktokenCounter::cl100k());
        }
        c.set_summary(Summary {
            text: "We talked about numbers.".into(),
            evicted_messages: 4,
            updated_at: Some(Utc::now()),
            history: Vec::new(),
        });
        let stats = c.stats();
        let counter = TiktokenCounter::cl100k();
        let recount: usize = c.messages().iter().map(|m| counter.count_message(m)).sum();
        // Sections are counted separately; BPE merges across their joins may differ by a few tokens.
        assert!(
            stats.total_tokens.abs_diff(recount) <= 4,
            "{} vs {recount}",
            stats.total_tokens
        );
        assert_eq!(stats.queue_messages, 20);
        assert!((stats.fraction - stats.total_tokens as f64 / 1000.0).abs() < 1e-9);
    }

    #[test]
    fn the_system_message_keeps_a_stable_prefix_until_memory_changes() {
        let mut c = ctx();
        let before = c.system_message().content;
        let stable = c.stable_prefix_len();
        assert!(
            before[..stable].ends_with("</human>"),
            "{}",
            &before[..stable]
        );
        assert!(before[..stable].contains("I am Sam."));
        assert!(before[stable..].contains("0 messages are in recall memory"));
        let mut counts = c.counts();
        counts.recall += 5;
        c.set_counts(counts);
        let after = c.system_message().content;
        assert_ne!(before, after);
        assert_eq!(before[..stable], after[..c.stable_prefix_len()]);
        c.memory_mut().append("human", "Likes tea.").unwrap();
        c.memory_changed(Utc::now());
        let edited = c.system_message().content;
        assert_ne!(edited[..c.stable_prefix_len()], before[..stable]);
    }

    #[test]
    fn prompt_is_system_then_summary_then_queue() {
        let mut c = ctx();
        c.queue_mut().push(
            Arc::new(Message::new(
                AgentId::new(),
                MessageKind::User,
                "hi",
                Utc::now(),
            )),
            &TiktokenCounter::cl100k(),
        );
        assert_eq!(c.messages().len(), 2, "no summary before the first flush");
        c.set_summary(Summary {
            text: "earlier stuff".into(),
            evicted_messages: 7,
            updated_at: None,
            history: Vec::new(),
        });
        let messages = c.messages();
        assert_eq!(messages.len(), 3);
        assert!(
            messages[0]
                .content
                .contains("<persona characters=\"9/2000\">")
        );
        assert!(
            messages[0]
                .content
                .contains("0 messages are in recall memory")
        );
        assert!(
            messages[1]
                .content
                .contains("Summary of the 7 earlier messages")
        );
        assert!(messages[2].content.contains("\"message\":\"hi\""));
    }

    #[test]
    fn memory_edits_are_re_rendered_once() {
        let mut c = ctx();
        let before = c.stats().memory_tokens;
        assert!(!c.memory_changed(Utc::now()));
        c.memory_mut()
            .append("human", "Name: Chad. Likes hiking and rock climbing.")
            .unwrap();
        assert!(c.memory_changed(Utc::now()));
        assert!(c.stats().memory_tokens > before);
        assert!(c.system_message().content.contains("Likes hiking"));
    }
}
