//! Builders for test data: agents, messages, passages and commits with fixed dates and
//! deterministic embeddings, so every store sees exactly the same input.

use chrono::{DateTime, Duration, Utc};
use memgpt_core::AgentConfig;
use memgpt_core::embed::{Embedder, Embedding, HashingEmbedder};
use memgpt_core::ids::AgentId;
use memgpt_core::message::{Message, MessageKind, ToolCall};
use memgpt_core::store::{AgentState, Commit, Passage, QueueChange, Storage, Summary};

/// The embedder every test uses (deterministic, 64-d).
pub fn embedder() -> HashingEmbedder {
    HashingEmbedder::new(64)
}

/// The [`embedder`]'s embedding of `text`.
pub fn embed(text: &str) -> Embedding {
    let e = embedder();
    Embedding {
        model: e.model().to_owned(),
        vector: e.vector(text),
    }
}

/// The instant every fixture is dated from: 2024-03-01 12:00 UTC.
pub fn t0() -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp(1_709_294_400, 0).unwrap_or_default()
}

/// A fresh agent state (version 0, default configuration, empty memory) named `name`.
pub fn state(id: AgentId, name: &str) -> AgentState {
    AgentState {
        id,
        name: name.to_owned(),
        version: 0,
        config: AgentConfig::default(),
        system: "system".into(),
        memory: Default::default(),
        summary: Summary::default(),
        fifo: Vec::new(),
        pinned: Vec::new(),
        pressure_warned: false,
        heartbeats_paused_until: None,
        memory_updated_at: t0(),
        created_at: t0(),
        updated_at: t0(),
        pending_approval: None,
        consolidated_until: None,
    }
}

/// Creates an agent and returns its state.
pub async fn new_agent(storage: &Storage, name: &str) -> AgentState {
    let s = state(AgentId::new(), name);
    storage.agents.create_agent(&s).await.expect("create agent");
    s
}

/// Builds the next [`Commit`] of an agent's state.
pub trait NextCommit {
    /// The next commit of this state with these messages and passages: the version goes up by
    /// one and the messages join the FIFO queue. The arguments may read the state (for example
    /// `state.next_commit(vec![user(state.id, "hi", t0())], vec![])`).
    fn next_commit(&mut self, messages: Vec<Message>, passages: Vec<Passage>) -> Commit;
}

impl NextCommit for AgentState {
    fn next_commit(&mut self, messages: Vec<Message>, passages: Vec<Passage>) -> Commit {
        self.version += 1;
        let before = self.fifo.clone();
        self.fifo.extend(messages.iter().map(|m| m.id));
        let queue = QueueChange::between(&before, &self.fifo);
        Commit {
            state: self.clone(),
            messages,
            message_embeddings: Vec::new(),
            passages,
            deleted_passages: Vec::new(),
            retired_passages: Vec::new(),
            attachments_changed: false,
            queue,
        }
    }
}

/// A user message.
pub fn user(agent: AgentId, text: &str, at: DateTime<Utc>) -> Message {
    Message::new(agent, MessageKind::User, text, at)
}

/// An assistant message that thinks `thought` and calls `send_message` with `said`.
pub fn assistant_calling(agent: AgentId, thought: &str, said: &str, at: DateTime<Utc>) -> Message {
    let call = ToolCall {
        id: "call_1".into(),
        name: "send_message".into(),
        arguments: serde_json::json!({ "message": said }).to_string(),
    };
    Message::assistant(agent, thought, vec![call], at)
}

/// An archival passage embedded by [`embedder`], with `source` metadata.
pub fn passage(agent: AgentId, text: &str, at: DateTime<Utc>) -> Passage {
    let mut p = Passage::new(agent, text, at);
    p.embedding = Some(embed(text));
    p.metadata
        .insert("source".into(), serde_json::json!("test"));
    p
}

/// `n` user messages on consecutive days from `t0`, every `every`-th mentioning "kiwi".
pub fn corpus(agent: AgentId, n: usize, every: usize) -> Vec<Message> {
    (0..n)
        .map(|i| {
            let text = if i % every == 0 {
                format!("message {i}: we talked about the kiwi orchard")
            } else {
                format!("message {i}: nothing special about day {i}")
            };
            user(agent, &text, t0() + Duration::days(i as i64))
        })
        .collect()
}
