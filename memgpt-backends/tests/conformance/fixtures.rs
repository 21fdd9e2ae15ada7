//! Builders for test data.

use chrono::{DateTime, Duration, TimeZone, Utc};
use memgpt_core::AgentConfig;
use memgpt_core::embed::{Embedder, Embedding, HashingEmbedder};
use memgpt_core::ids::AgentId;
use memgpt_core::message::{Message, MessageKind, ToolCall};
use memgpt_core::store::{AgentState, Commit, Passage, Storage, Summary};

/// The embedder every test uses (deterministic, 64-d).
pub fn embedder() -> HashingEmbedder {
    HashingEmbedder::new(64)
}

pub fn embed(text: &str) -> Embedding {
    let e = embedder();
    Embedding {
        model: e.model().to_owned(),
        vector: e.vector(text),
    }
}

pub fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2024, 3, 1, 12, 0, 0).unwrap()
}

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
    }
}

/// Creates an agent and returns its state.
pub async fn new_agent(storage: &Storage, name: &str) -> AgentState {
    let s = state(AgentId::new(), name);
    storage.agents.create_agent(&s).await.expect("create agent");
    s
}

/// The next commit of `state` with these messages and passages (arguments are evaluated before
/// `state` is borrowed, so they may read it).
macro_rules! commit {
    ($state:expr, $messages:expr, $passages:expr) => {{
        let messages = $messages;
        let passages = $passages;
        $crate::fixtures::commit_to(&mut $state, messages, passages)
    }};
}
pub(crate) use commit;

/// The next commit of `state` with these messages and passages.
pub fn commit_to(state: &mut AgentState, messages: Vec<Message>, passages: Vec<Passage>) -> Commit {
    state.version += 1;
    state.fifo.extend(messages.iter().map(|m| m.id));
    Commit {
        state: state.clone(),
        messages,
        message_embeddings: Vec::new(),
        passages,
        deleted_passages: Vec::new(),
    }
}

pub fn user(agent: AgentId, text: &str, at: DateTime<Utc>) -> Message {
    Message::new(agent, MessageKind::User, text, at)
}

pub fn assistant_calling(agent: AgentId, thought: &str, said: &str, at: DateTime<Utc>) -> Message {
    let call = ToolCall {
        id: "call_1".into(),
        name: "send_message".into(),
        arguments: serde_json::json!({ "message": said }).to_string(),
    };
    Message::assistant(agent, thought, vec![call], at)
}

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
