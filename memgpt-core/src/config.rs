//! An agent's persistent configuration and its defaults: the settings every layer reads
//! (stores keep it, the agent and its functions obey it).

use serde::{Deserialize, Serialize};

use crate::llm::ToolChoice;
use crate::retrieval::{RecallRanking, SearchMode};

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
    /// The functions offered, by name, in order (stored configs may still call it `tools`).
    #[serde(alias = "tools")]
    pub functions: Vec<String>,
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
    /// The eviction policy, by its registered name (built in: `paper`, the default, `lru` and
    /// `attention`; see [`policy_by_name`](crate::queue::policy_by_name)), resolved when the
    /// agent is built or loaded unless the builder is given a policy object.
    pub policy: String,
    /// Longest function result the model sees, in characters; longer results are cut with a
    /// note saying how much was left out (Letta's limit, 6,000 by default).
    pub max_function_output_chars: usize,
    /// Largest arguments one function call may carry, in bytes (default 1 MiB). A larger call
    /// is refused before it is parsed, with an error (and a heartbeat) telling the model to
    /// split the content; a step's cost stays bounded whatever the model writes. Larger
    /// documents go in through [`Agent::insert_archival`](crate::Agent::insert_archival) (up to
    /// [`AgentConfig::max_document_bytes`]) or `memgpt ingest`.
    pub max_function_argument_bytes: usize,
    /// Most function calls run from one model response (default 16). Calls past it are dropped
    /// before they run or are recorded, and a system alert (with a heartbeat) tells the model
    /// how many ran and to send the rest in later responses: a response of 100,000 calls cannot
    /// bury the context window under 100,000 results in one turn.
    pub max_calls_per_response: usize,
    /// How `conversation_search` ranks (see [`RecallRanking`]). A configuration stored with
    /// an earlier version's defaults loads with today's.
    #[serde(deserialize_with = "RecallRanking::deserialize_stored")]
    pub recall_ranking: RecallRanking,
    /// Commit a step's messages without embedding them (default `false`: with an embedder,
    /// the step's conversation messages are embedded in one batch before its commit). When
    /// deferred, the agent's next step (or [`Agent::call`](crate::Agent::call)) embeds them
    /// before it runs, or [`Agent::reindex`](crate::Agent::reindex) does: a step does not wait
    /// for the embedder with its own messages.
    pub defer_message_embeddings: bool,
    /// Rules about which functions the model may call when ([`crate::rules`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_rules: Vec<crate::rules::ToolRule>,
    /// Time to live, in days, of archival passages by tag: a passage stored with one of these
    /// tags stops being a current fact that many days after it is stored (the shortest wins;
    /// it stays findable as of an earlier date). Empty: passages live until retired.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub archival_ttl_days: std::collections::BTreeMap<String, u32>,
    /// How a step decides to go on after a function call (see [`LoopStyle`]).
    pub loop_style: LoopStyle,
    /// The agents this one was related to in an agent file (Letta's groups: a sleep-time
    /// companion, a supervisor): kept, and written back when the agent is exported with them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<AgentGroup>,
    /// Fields of an imported agent file that memgpt does not use (Letta's `tags`,
    /// `description`, `timezone`, `llm_config` parameters...), kept so that an export gives
    /// them back.
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    pub carried: serde_json::Map<String, serde_json::Value>,
}

/// Agents that work together, as an agent file relates them (Letta's `groups`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentGroup {
    /// Letta's manager type: `sleeptime` (a companion that consolidates the manager's memory),
    /// `round_robin`, `supervisor`, `dynamic`...
    pub kind: String,
    /// The agent that manages the group, if the kind has one.
    pub manager: Option<crate::ids::AgentId>,
    /// The other agents.
    pub members: Vec<crate::ids::AgentId>,
    /// The rest of the group's settings as the file gave them (`sleeptime_agent_frequency`...).
    pub settings: serde_json::Map<String, serde_json::Value>,
}

/// How the agent loop decides whether a step goes on after a function call.
///
/// Both styles share the same guarantees: at most [`AgentConfig::max_chain_length`] LLM calls
/// per step, failed calls always give control back to the model, tool rules apply, and the
/// step commits whole or not at all.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum LoopStyle {
    /// The paper's loop (the default): every non-terminal function takes a required
    /// `request_heartbeat` flag, and the step goes on only when a call sets it (or fails, or a
    /// [`Continue`](crate::rules::ToolRule::Continue) rule applies). Each continuation adds a
    /// heartbeat message to the queue.
    #[default]
    Heartbeat,
    /// A Letta-v1-style loop: no `request_heartbeat` flag in any schema; the step goes on
    /// after every function call until the model calls a terminal function (`send_message`)
    /// or a [`Terminal`](crate::rules::ToolRule::Terminal) rule's function, and no heartbeat
    /// messages are added: each function result is the model's next input. Shorter schemas,
    /// and no flag for small models to forget.
    UntilReply,
}

impl LoopStyle {
    /// Its name in configuration (`heartbeat` or `until_reply`).
    pub fn name(self) -> &'static str {
        match self {
            LoopStyle::Heartbeat => "heartbeat",
            LoopStyle::UntilReply => "until_reply",
        }
    }

    /// The style named `name` (`heartbeat`, or `until_reply`, also accepted as `letta_v1`).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "heartbeat" | "paper" => Some(LoopStyle::Heartbeat),
            "until_reply" | "letta_v1" => Some(LoopStyle::UntilReply),
            _ => None,
        }
    }
}

/// The functions every MemGPT agent gets by default, in the order they are offered.
pub const DEFAULT_FUNCTIONS: [&str; 8] = [
    "send_message",
    "pause_heartbeats",
    "core_memory_append",
    "core_memory_replace",
    "archival_memory_insert",
    "archival_memory_search",
    "conversation_search",
    "conversation_search_date",
];

/// Built-in functions for facts that change, offered when an agent lists them in
/// [`AgentConfig::functions`]: `archival_memory_update` (a new version supersedes a passage),
/// `archival_memory_forget` (a passage stops being current, now or after some days) and
/// `archival_memory_search_as_of` (the facts of a past day). With any of them,
/// `archival_memory_search` shows each passage's id.
pub const FACT_FUNCTIONS: [&str; 3] = [
    "archival_memory_update",
    "archival_memory_forget",
    "archival_memory_search_as_of",
];

/// The functions of a memory-consolidation (sleep-time) agent besides the paper's memory
/// functions, with Letta's names and arguments: `memory_rethink` (rewrite a block as a whole,
/// refused if it changed since it was read), `memory_replace` and `memory_insert` (Letta's
/// line-oriented edits) and `memory_finish_edits` (end the turn).
pub const CONSOLIDATION_FUNCTIONS: [&str; 4] = [
    "memory_rethink",
    "memory_replace",
    "memory_insert",
    "memory_finish_edits",
];

/// The functions a consolidation companion gets by default
/// ([`Agent::add_companion`](crate::Agent::add_companion)): the block edits of the paper and of
/// Letta's sleep-time agent, and archival memory (where details that do not belong in a block go).
pub const COMPANION_FUNCTIONS: [&str; 8] = [
    "core_memory_append",
    "core_memory_replace",
    "memory_rethink",
    "memory_replace",
    "memory_insert",
    "archival_memory_insert",
    "archival_memory_search",
    "memory_finish_edits",
];

/// The default limit on the bytes of text written at once ([`AgentConfig::max_document_bytes`](crate::AgentConfig::max_document_bytes)
/// and [`FunctionSettings::max_document_bytes`](crate::function::FunctionSettings::max_document_bytes)).
pub const DEFAULT_MAX_DOCUMENT_BYTES: usize = 10 * 1024 * 1024;

/// Tokens kept free for the completion when [`AgentConfig::max_completion_tokens`] is not set
/// (at most a quarter of the window).
pub const DEFAULT_COMPLETION_RESERVE: usize = 1_024;

impl AgentConfig {
    /// Tokens kept free in the window for the model's answer: `max_completion_tokens` when set,
    /// otherwise [`DEFAULT_COMPLETION_RESERVE`] or a quarter of the window, whichever is less.
    pub fn completion_reserve(&self) -> usize {
        match self.max_completion_tokens {
            Some(tokens) => tokens as usize,
            None => DEFAULT_COMPLETION_RESERVE.min(self.context_window / 4),
        }
    }

    /// The part of the context window the prompt may use: the window minus
    /// [`AgentConfig::completion_reserve`]. Memory pressure is measured against it.
    pub fn prompt_budget(&self) -> usize {
        self.context_window
            .saturating_sub(self.completion_reserve())
    }

    /// The tokens working context (blocks at their character limits, skills listed and loaded)
    /// may take when the model grows it (creates a block, loads a skill): the prompt budget
    /// minus `fixed_tokens` (system instructions and function schemas) and a quarter of the
    /// budget kept for messages.
    pub fn memory_budget(&self, fixed_tokens: usize) -> usize {
        let budget = self.prompt_budget();
        budget.saturating_sub(fixed_tokens + budget / 4)
    }
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            model: String::new(),
            context_window: 8_192,
            max_chain_length: 10,
            page_size: 5,
            functions: DEFAULT_FUNCTIONS.iter().map(|s| (*s).to_owned()).collect(),
            tool_choice: ToolChoice::Required,
            temperature: None,
            max_completion_tokens: None,
            archival_search: SearchMode::Hybrid,
            passage_tokens: 300,
            max_document_bytes: DEFAULT_MAX_DOCUMENT_BYTES,
            policy: "paper".to_owned(),
            max_function_output_chars: 6_000,
            max_function_argument_bytes: 1 << 20,
            max_calls_per_response: 16,
            recall_ranking: RecallRanking::default(),
            defer_message_embeddings: false,
            tool_rules: Vec::new(),
            archival_ttl_days: std::collections::BTreeMap::new(),
            loop_style: LoopStyle::Heartbeat,
            group: None,
            carried: serde_json::Map::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_stored_before_the_rename_still_load() {
        let old: AgentConfig =
            serde_json::from_str(r#"{"tools": ["send_message"], "page_size": 3}"#).unwrap();
        assert_eq!(old.functions, vec!["send_message"]);
        assert_eq!(old.page_size, 3);
        let new = serde_json::to_value(AgentConfig::default()).unwrap();
        assert!(new.get("functions").is_some() && new.get("tools").is_none());
    }

    #[test]
    fn the_completion_gets_room() {
        let mut c = AgentConfig {
            context_window: 8_192,
            ..AgentConfig::default()
        };
        assert_eq!(c.prompt_budget(), 8_192 - 1_024);
        c.context_window = 2_000;
        assert_eq!(c.prompt_budget(), 1_500);
        c.max_completion_tokens = Some(300);
        assert_eq!(c.prompt_budget(), 1_700);
    }
}
