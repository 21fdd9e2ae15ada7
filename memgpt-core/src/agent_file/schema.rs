//! The agent file's JSON: Letta's `AgentFileSchema` (v2), as far as memgpt reads and writes it,
//! plus memgpt's extension.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use crate::config::AgentConfig;
use crate::embed::Embedding;
use crate::store::Summary;

/// `null` reads as the type's default (Letta writes `null` for many empty lists).
fn nullable<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// A whole agent file: Letta's top level, and memgpt's extras under `memgpt` (which Letta
/// ignores).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentFile {
    /// The agents (memgpt writes one).
    #[serde(deserialize_with = "nullable")]
    pub agents: Vec<AgentSchema>,
    /// Multi-agent groups (kept empty by memgpt).
    #[serde(default, deserialize_with = "nullable")]
    pub groups: Vec<Value>,
    /// Memory blocks, referenced by the agents' `block_ids`.
    #[serde(default, deserialize_with = "nullable")]
    pub blocks: Vec<BlockSchema>,
    /// Files attached to sources (not used by memgpt).
    #[serde(default, deserialize_with = "nullable")]
    pub files: Vec<Value>,
    /// Data sources (not used by memgpt).
    #[serde(default, deserialize_with = "nullable")]
    pub sources: Vec<Value>,
    /// Tools, referenced by the agents' `tool_ids`.
    #[serde(default, deserialize_with = "nullable")]
    pub tools: Vec<ToolSchema>,
    /// MCP servers (not used by memgpt yet).
    #[serde(default, deserialize_with = "nullable")]
    pub mcp_servers: Vec<Value>,
    /// Skills: procedural memory the agents load when a task needs it
    /// ([`Skill`](crate::memory::Skill)).
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub skills: Vec<SkillSchema>,
    /// Export information, such as `revision_id`.
    #[serde(default, deserialize_with = "nullable")]
    pub metadata: BTreeMap<String, String>,
    /// When the file was written.
    #[serde(default)]
    pub created_at: Option<DateTime<Utc>>,
    /// memgpt's extras: archival passages, recall history beyond main context, the summary,
    /// the configuration (policy, functions, window), the embedding model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memgpt: Option<Extension>,
}

/// One agent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentSchema {
    /// File-local id (`agent-0`).
    pub id: String,
    /// Its name.
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    /// System instructions.
    #[serde(default)]
    pub system: Option<String>,
    /// Letta's agent type (`memgpt_agent` for the paper's loop).
    #[serde(default)]
    pub agent_type: Option<String>,
    /// A description for people.
    #[serde(default)]
    pub description: Option<String>,
    /// The model.
    #[serde(default)]
    pub llm_config: Option<LlmConfig>,
    /// The embedding model.
    #[serde(default)]
    pub embedding_config: Option<EmbeddingConfig>,
    /// Letta's tool rules (memgpt's [`ToolRule`](crate::rules::ToolRule)s in Letta's form).
    #[serde(default, deserialize_with = "nullable")]
    pub tool_rules: Vec<Value>,
    /// Tags.
    #[serde(default, deserialize_with = "nullable")]
    pub tags: Vec<String>,
    /// The agent's tools.
    #[serde(default, deserialize_with = "nullable")]
    pub tool_ids: Vec<String>,
    /// The agent's memory blocks.
    #[serde(default, deserialize_with = "nullable")]
    pub block_ids: Vec<String>,
    /// Conversation messages (memgpt writes those in main context).
    #[serde(default, deserialize_with = "nullable")]
    pub messages: Vec<MessageSchema>,
    /// Which messages are in the context window, in order (the system message first).
    #[serde(default, deserialize_with = "nullable")]
    pub in_context_message_ids: Vec<String>,
    /// Free-form metadata.
    #[serde(default)]
    pub metadata: Option<Map<String, Value>>,
    /// Letta's sleep-time and multi-agent groups the agent belongs to (file-local ids).
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub group_ids: Vec<String>,
    /// Every other field of Letta's agent (`timezone`, `tool_exec_environment_variables`,
    /// `enable_sleeptime`...): memgpt reads none of them, keeps the harmless ones for export
    /// and reports the rest as not imported.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// Letta's `LLMConfig`, the fields memgpt uses.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LlmConfig {
    /// Model name.
    #[serde(default, deserialize_with = "nullable")]
    pub model: String,
    /// Endpoint kind (`openai`, `anthropic`, ...).
    #[serde(default, deserialize_with = "nullable")]
    pub model_endpoint_type: String,
    /// Endpoint URL.
    #[serde(default)]
    pub model_endpoint: Option<String>,
    /// Context window in tokens (Letta writes whole numbers; `8192.0` reads as 8192).
    #[serde(default, deserialize_with = "whole_number")]
    pub context_window: Option<usize>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// The most tokens of one completion.
    #[serde(
        default,
        deserialize_with = "whole_number",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_tokens: Option<usize>,
    /// Letta's other model parameters (`model_wrapper`, `put_inner_thoughts_in_kwargs`,
    /// `handle`, `reasoning_effort`...), kept as they are.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// A whole number that may be written as `8192.0`; `null` is absent.
fn whole_number<'de, D>(deserializer: D) -> Result<Option<usize>, D::Error>
where
    D: Deserializer<'de>,
{
    match Option::<f64>::deserialize(deserializer)? {
        None => Ok(None),
        Some(n) if n >= 0.0 && n.fract() == 0.0 && n <= usize::MAX as f64 => Ok(Some(n as usize)),
        Some(n) => Err(serde::de::Error::custom(format!(
            "expected a whole number, got {n}"
        ))),
    }
}

/// Letta's `EmbeddingConfig`, the fields memgpt uses.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EmbeddingConfig {
    /// Endpoint kind.
    #[serde(default, deserialize_with = "nullable")]
    pub embedding_endpoint_type: String,
    /// Model name.
    #[serde(default, deserialize_with = "nullable")]
    pub embedding_model: String,
    /// Dimension.
    #[serde(default)]
    pub embedding_dim: Option<usize>,
    /// Letta's other embedding settings (`embedding_endpoint`, `embedding_chunk_size`...),
    /// kept as they are.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// A message as Letta stores it: the same packed envelopes memgpt sends the LLM.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MessageSchema {
    /// File-local id (`message-3`).
    pub id: String,
    /// `system`, `user`, `assistant` or `tool` (Letta also writes `function` and `approval`).
    pub role: String,
    /// A string or a list of typed parts (`{"type": "text", "text": ...}`).
    #[serde(default)]
    pub content: Content,
    /// The user's name or the function's name.
    #[serde(default)]
    pub name: Option<String>,
    /// Function calls (assistant messages), in OpenAI's format.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub tool_calls: Vec<ToolCallSchema>,
    /// The call a tool message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Letta's structured tool returns (`status`: `success` or `error`, `func_response`);
    /// one tool message may carry the returns of several parallel calls.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub tool_returns: Vec<Value>,
    /// Letta's answers to approval requests (role `approval`): memgpt keeps the calls and their
    /// results, not the approvals.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub approvals: Vec<Value>,
    /// When it was created.
    #[serde(default)]
    pub created_at: Option<DateTime<Utc>>,
}

/// Message content: Letta accepts a plain string or typed parts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Content {
    /// Plain text.
    Text(String),
    /// Typed parts; `text` and `reasoning` parts carry text.
    Parts(Vec<Value>),
}

impl Default for Content {
    fn default() -> Self {
        Content::Parts(Vec::new())
    }
}

impl Content {
    /// One text part.
    pub fn text(text: impl Into<String>) -> Self {
        Content::Parts(vec![
            serde_json::json!({ "type": "text", "text": text.into() }),
        ])
    }

    /// The text of every text-bearing part, joined by newlines.
    pub fn joined(&self) -> String {
        match self {
            Content::Text(text) => text.clone(),
            Content::Parts(parts) => parts
                .iter()
                .filter_map(|part| {
                    ["text", "reasoning"]
                        .iter()
                        .find_map(|field| part.get(field).and_then(Value::as_str))
                })
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

/// An OpenAI-format function call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCallSchema {
    /// The call's id.
    pub id: String,
    /// Always `function`.
    #[serde(rename = "type", default = "function_type")]
    pub kind: String,
    /// Name and JSON-encoded arguments.
    pub function: FunctionCallSchema,
}

fn function_type() -> String {
    "function".to_owned()
}

/// The function half of [`ToolCallSchema`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FunctionCallSchema {
    /// Function name.
    pub name: String,
    /// Arguments as a JSON string.
    #[serde(default, deserialize_with = "nullable")]
    pub arguments: String,
}

/// A memory block.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BlockSchema {
    /// File-local id (`block-0`).
    pub id: String,
    /// Its label (`persona`, `human`, ...).
    pub label: String,
    /// Its content.
    #[serde(default, deserialize_with = "nullable")]
    pub value: String,
    /// Its character limit.
    #[serde(default)]
    pub limit: Option<usize>,
    /// What it is for.
    #[serde(default)]
    pub description: Option<String>,
    /// Whether the agent may not edit it.
    #[serde(default, deserialize_with = "nullable")]
    pub read_only: bool,
}

/// A skill (Letta's `SkillSchema`): its files, or where to find them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SkillSchema {
    /// Its name, unique in the file.
    pub name: String,
    /// Its files by path; `SKILL.md` holds the instructions and front matter. `None` for a
    /// skill given by `source_url` only.
    #[serde(default)]
    pub files: Option<BTreeMap<String, String>>,
    /// Where it comes from (`letta:slack`, `owner/repo/path`).
    #[serde(default)]
    pub source_url: Option<String>,
}

/// A tool.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolSchema {
    /// File-local id (`tool-0`).
    pub id: String,
    /// The function name.
    #[serde(default)]
    pub name: Option<String>,
    /// What it does.
    #[serde(default)]
    pub description: Option<String>,
    /// Letta's kind (`letta_core`, `letta_memory_core`, `custom`, ...).
    #[serde(default)]
    pub tool_type: Option<String>,
    /// The source language (`python`, `json`, ...).
    #[serde(default)]
    pub source_type: Option<String>,
    /// The source code of custom tools (memgpt's functions are compiled in: none).
    #[serde(default)]
    pub source_code: Option<String>,
    /// `{name, description, parameters}`.
    #[serde(default)]
    pub json_schema: Option<Value>,
    /// Tags.
    #[serde(default, deserialize_with = "nullable")]
    pub tags: Vec<String>,
}

/// memgpt's extras, under the top-level `memgpt` key.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Extension {
    /// The extension's format version (1).
    pub format: u32,
    /// Per agent, by file-local id.
    pub agents: Vec<AgentExtras>,
}

/// What memgpt keeps about an agent that Letta's schema has no place for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentExtras {
    /// The agent's file-local id.
    pub agent: String,
    /// The whole configuration (policy, functions, window, ranking...).
    pub config: AgentConfig,
    /// The recursive summary of evicted messages.
    pub summary: Summary,
    /// Pinned messages (file-local ids).
    #[serde(default)]
    pub pinned: Vec<String>,
    /// Whether the memory-pressure warning was given since the last flush.
    #[serde(default)]
    pub pressure_warned: bool,
    /// Timers paused until then.
    #[serde(default)]
    pub heartbeats_paused_until: Option<DateTime<Utc>>,
    /// When core memory last changed (the memory header tells the model).
    #[serde(default)]
    pub memory_updated_at: Option<DateTime<Utc>>,
    /// Recall messages evicted from main context, oldest first, in the same format as
    /// `agents[].messages`.
    #[serde(default)]
    pub history: Vec<MessageSchema>,
    /// Archival passages, oldest first.
    #[serde(default)]
    pub passages: Vec<PassageSchema>,
    /// The embedding model of the passages and messages, if any.
    #[serde(default)]
    pub embedding_model: Option<String>,
    /// The names of the file's skills this agent holds (`None`: the file's first agent
    /// holds them all, as for Letta's files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skills: Option<Vec<String>>,
    /// The files of its skills it had loaded into context, by skill.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub loaded_skills: BTreeMap<String, Vec<String>>,
}

/// An archival passage.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PassageSchema {
    /// The text.
    pub text: String,
    /// Metadata (source, tags...).
    #[serde(default)]
    pub metadata: Map<String, Value>,
    /// When it was stored.
    pub created_at: DateTime<Utc>,
    /// Its embedding, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedding: Option<Embedding>,
    /// Its id among the agent's passages in this file (`passage-<n>`), which `superseded_by`
    /// refers to (the passage gets a new id when imported).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// When the fact became true, where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_from: Option<DateTime<Utc>>,
    /// When it stopped (or stops) being a current fact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_to: Option<DateTime<Utc>>,
    /// The id (among the agent's passages in this file) of the passage that replaced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<String>,
    /// Why it was retired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retired_reason: Option<String>,
}
