use serde::{Deserialize, Serialize};

use crate::builtin::DEFAULT_FUNCTIONS;
use crate::llm::ToolChoice;
use crate::store::SearchMode;

/// An agent's persistent configuration (stored with its state).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentConfig {
    /// The chat model; empty means the provider's default.
    pub model: String,
    /// The context window in tokens that the queue manager keeps the prompt within.
    pub context_window: usize,
    /// The most LLM calls one event may trigger through heartbeats.
    pub max_chain_length: usize,
    /// Results per page of the search functions.
    pub page_size: usize,
    /// The functions offered, by name, in order.
    pub tools: Vec<String>,
    /// Whether every reply must be a function call (MemGPT's protocol: `Required`).
    pub tool_choice: ToolChoice,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Completion token limit per call.
    pub max_completion_tokens: Option<u32>,
    /// How `archival_memory_search` ranks.
    pub archival_search: SearchMode,
    /// Maximum tokens per archival passage.
    pub passage_tokens: usize,
    /// The largest document a document-upload event accepts, in bytes.
    pub max_document_bytes: usize,
    /// The eviction policy's name (informational; the policy object is given at build time).
    pub policy: String,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            model: String::new(),
            context_window: 8_192,
            max_chain_length: 10,
            page_size: 5,
            tools: DEFAULT_FUNCTIONS.iter().map(|s| (*s).to_owned()).collect(),
            tool_choice: ToolChoice::Required,
            temperature: None,
            max_completion_tokens: None,
            archival_search: SearchMode::Hybrid,
            passage_tokens: 300,
            max_document_bytes: 10 * 1024 * 1024,
            policy: "paper".to_owned(),
        }
    }
}
