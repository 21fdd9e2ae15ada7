//! Reading an [`AgentFile`] into a store, all or nothing.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::AgentFileError;
use super::schema::*;
use crate::config::AgentConfig;
use crate::function::FunctionRegistry;
use crate::ids::{AgentId, MessageId};
use crate::memory::{MemoryBlock, WorkingContext};
use crate::message::{Message, MessageKind, ToolCall};
use crate::rules::ToolRule;
use crate::store::{AgentState, Commit, Passage, Storage};

/// How to import.
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// The imported agent's name (default: the file's). Names are unique per store unless
    /// [`ImportOptions::allow_duplicate_name`].
    pub name: Option<String>,
    /// The new agent's id (default: a fresh one), for callers that record it before the
    /// import (a server recording the agent's owner first).
    pub id: Option<AgentId>,
    /// Skips the check that no agent of the store has the name (a multi-tenant server, whose
    /// tenants' names are separate and must not reveal each other).
    pub allow_duplicate_name: bool,
}

/// What an import did.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ImportReport {
    /// The new agent's id.
    pub id: AgentId,
    /// Its name.
    pub name: String,
    /// Messages written to recall storage.
    pub messages: usize,
    /// Passages written to archival storage.
    pub passages: usize,
    /// Memory blocks.
    pub blocks: usize,
    /// What could not be carried over, one line each (tools without a memgpt function, message
    /// kinds memgpt does not have, blocks whose limit had to grow).
    pub unmapped: Vec<String>,
}

/// Letta's memory tools and the memgpt functions that do their job.
const TOOL_MAP: &[(&str, &str)] = &[
    ("memory_insert", "core_memory_append"),
    ("memory_replace", "core_memory_replace"),
    ("conversation_search_date", "conversation_search"),
];

/// memgpt's name for Letta's function `name`.
fn letta_name(name: &str) -> &str {
    TOOL_MAP
        .iter()
        .find(|(letta, _)| *letta == name)
        .map_or(name, |(_, ours)| *ours)
}

/// Imports the file's agent into `storage` as a new agent (new ids, same content), in one
/// store transaction where the store offers one. Fails without writing anything if the file
/// breaks the format's rules (duplicate ids, references that do not resolve, more than one
/// agent) or an agent of that name exists.
pub async fn import(
    storage: &Storage,
    file: &AgentFile,
    options: ImportOptions,
) -> Result<ImportReport, AgentFileError> {
    let invalid = |m: String| AgentFileError::Invalid(m);
    let [agent] = file.agents.as_slice() else {
        return Err(invalid(format!(
            "the file holds {} agents; memgpt imports files with exactly one",
            file.agents.len()
        )));
    };
    check_ids(file)?;
    let extras = file
        .memgpt
        .as_ref()
        .and_then(|x| x.agents.iter().find(|a| a.agent == agent.id));
    let mut unmapped = Vec::new();

    let name = options
        .name
        .clone()
        .or_else(|| Some(agent.name.clone()).filter(|n| !n.trim().is_empty()))
        .unwrap_or_else(|| "imported".to_owned());
    if !options.allow_duplicate_name
        && storage
            .agents
            .list_agents()
            .await?
            .iter()
            .any(|a| a.name == name)
    {
        return Err(invalid(format!(
            "an agent named `{name}` already exists (import it under another name)"
        )));
    }

    // Configuration: memgpt's own if the file has it, else what Letta's fields say.
    let mut config = match extras {
        Some(extras) => extras.config.clone(),
        None => {
            let mut config = AgentConfig::default();
            if let Some(llm) = &agent.llm_config {
                config.model = llm.model.clone();
                if let Some(window) = llm.context_window {
                    config.context_window = window;
                }
            }
            config.functions = map_tools(file, agent, &mut unmapped)?;
            // Letta's v1 agents loop until they reply, without heartbeats.
            if agent.agent_type.as_deref() == Some("letta_v1_agent") {
                config.loop_style = crate::config::LoopStyle::UntilReply;
            }
            for value in &agent.tool_rules {
                match ToolRule::from_letta(value, |name| letta_name(name).to_owned()) {
                    Ok(rule) => config.tool_rules.push(rule),
                    Err(why) => unmapped.push(format!("tool rule: {why}")),
                }
            }
            config
        }
    };
    if extras.is_some() {
        // The functions must exist in this program.
        let registry = FunctionRegistry::linked()
            .map_err(|e| invalid(format!("the function registry: {e}")))?;
        config.functions.retain(|name| {
            let known = registry.get(name).is_some();
            if !known {
                unmapped.push(format!(
                    "function `{name}`: not linked into this program (register it with #[memgpt_fn])"
                ));
            }
            known
        });
    }

    // A rule about a function the agent does not have would stop it from loading.
    let functions = config.functions.clone();
    config.tool_rules.retain(|rule| {
        let missing: Vec<&str> = rule
            .names()
            .into_iter()
            .filter(|name| !functions.iter().any(|f| f == name))
            .collect();
        if !missing.is_empty() {
            unmapped.push(format!(
                "tool rule on `{}`: it names {}, which the agent does not have",
                rule.tool(),
                crate::rules::list(&missing)
            ));
        }
        missing.is_empty()
    });

    // Blocks.
    let blocks_by_id: HashMap<&str, &BlockSchema> =
        file.blocks.iter().map(|b| (b.id.as_str(), b)).collect();
    let mut blocks = Vec::new();
    for id in &agent.block_ids {
        let block = blocks_by_id[id.as_str()];
        let chars = block.value.chars().count();
        let mut limit = block.limit.unwrap_or(crate::memory::DEFAULT_BLOCK_LIMIT);
        if chars > limit {
            unmapped.push(format!(
                "block `{}`: {chars} characters over its limit of {limit}; the limit was raised to {chars}",
                block.label
            ));
            limit = chars;
        }
        let mut b = MemoryBlock::new(block.label.clone(), block.value.clone()).with_limit(limit);
        if let Some(description) = &block.description {
            b = b.with_description(description.clone());
        }
        if block.read_only {
            b = b.read_only();
        }
        blocks.push(b);
    }
    let block_count = blocks.len();
    let memory =
        WorkingContext::from_blocks(blocks).map_err(|e| invalid(format!("memory blocks: {e}")))?;

    // Messages: the history under `memgpt`, then the agent's own, oldest first.
    let id = options.id.unwrap_or_default();
    let fallback_time = file.created_at.unwrap_or_else(Utc::now);
    let system_id = agent
        .in_context_message_ids
        .first()
        .filter(|first| {
            agent
                .messages
                .iter()
                .any(|m| &m.id == *first && m.role == "system")
        })
        .cloned();
    let mut system = agent.system.clone();
    let mut system_created_at = None;
    let mut new_ids: HashMap<&str, MessageId> = HashMap::new();
    let mut messages: Vec<Message> = Vec::new();
    let history = extras.map(|x| x.history.as_slice()).unwrap_or_default();
    for schema in history.iter().chain(&agent.messages) {
        if Some(&schema.id) == system_id.as_ref() {
            if system.is_none() {
                system = Some(schema.content.joined());
            }
            system_created_at = schema.created_at;
            continue;
        }
        match to_message(id, schema, fallback_time) {
            Some(message) => {
                new_ids.insert(schema.id.as_str(), message.id);
                messages.push(message);
            }
            None => unmapped.push(format!(
                "message {} (role `{}`): memgpt has no such message",
                schema.id, schema.role
            )),
        }
    }
    messages.sort_by_key(|m| m.created_at);
    let Some(system) = system.filter(|s| !s.trim().is_empty()) else {
        return Err(invalid(format!(
            "agent `{}` has no system instructions (`system`, or a system message first in context)",
            agent.id
        )));
    };
    let fifo: Vec<MessageId> = agent
        .in_context_message_ids
        .iter()
        .filter_map(|m| new_ids.get(m.as_str()).copied())
        .collect();
    let pinned = extras
        .map(|x| {
            x.pinned
                .iter()
                .filter_map(|m| new_ids.get(m.as_str()).copied())
                .collect()
        })
        .unwrap_or_default();

    let passages: Vec<Passage> = extras
        .map(|x| x.passages.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|p| {
            let mut passage = Passage::new(id, p.text.clone(), p.created_at);
            passage.metadata = p.metadata.clone();
            passage.embedding = p.embedding.clone();
            passage
        })
        .collect();

    let now = Utc::now();
    let created_at = system_created_at
        .or_else(|| messages.first().map(|m| m.created_at))
        .unwrap_or(now);
    let state = AgentState {
        id,
        name: name.clone(),
        version: 1,
        config,
        system,
        memory,
        summary: extras.map(|x| x.summary.clone()).unwrap_or_default(),
        fifo,
        pinned,
        pressure_warned: extras.is_some_and(|x| x.pressure_warned),
        heartbeats_paused_until: extras.and_then(|x| x.heartbeats_paused_until),
        memory_updated_at: extras.and_then(|x| x.memory_updated_at).unwrap_or(now),
        created_at,
        updated_at: now,
        pending_approval: None,
    };
    let report = ImportReport {
        id,
        name,
        messages: messages.len(),
        passages: passages.len(),
        blocks: block_count,
        unmapped,
    };
    let commit = Commit {
        messages,
        passages,
        ..Commit::state(state)
    };
    storage.agents.create_agent_with(&commit).await?;
    Ok(report)
}

/// Ids are unique across the file and every reference resolves.
fn check_ids(file: &AgentFile) -> Result<(), AgentFileError> {
    let history = file
        .memgpt
        .iter()
        .flat_map(|x| x.agents.iter().flat_map(|a| a.history.iter()));
    let message_ids: Vec<&str> = file
        .agents
        .iter()
        .flat_map(|a| a.messages.iter())
        .chain(history)
        .map(|m| m.id.as_str())
        .collect();
    let mut seen = HashSet::new();
    let ids = file
        .agents
        .iter()
        .map(|a| a.id.as_str())
        .chain(file.blocks.iter().map(|b| b.id.as_str()))
        .chain(file.tools.iter().map(|t| t.id.as_str()))
        .chain(message_ids.iter().copied());
    for id in ids {
        if !seen.insert(id) {
            return Err(AgentFileError::Invalid(format!(
                "the id `{id}` is used twice"
            )));
        }
    }
    let message_ids: HashSet<&str> = message_ids.into_iter().collect();
    let blocks: HashSet<&str> = file.blocks.iter().map(|b| b.id.as_str()).collect();
    let tools: HashSet<&str> = file.tools.iter().map(|t| t.id.as_str()).collect();
    for agent in &file.agents {
        let missing = agent
            .block_ids
            .iter()
            .find(|b| !blocks.contains(b.as_str()))
            .map(|b| ("block", b))
            .or_else(|| {
                agent
                    .tool_ids
                    .iter()
                    .find(|t| !tools.contains(t.as_str()))
                    .map(|t| ("tool", t))
            })
            .or_else(|| {
                agent
                    .in_context_message_ids
                    .iter()
                    .find(|m| !message_ids.contains(m.as_str()))
                    .map(|m| ("message", m))
            });
        if let Some((kind, id)) = missing {
            return Err(AgentFileError::Invalid(format!(
                "agent `{}` refers to the {kind} `{id}`, which the file does not contain",
                agent.id
            )));
        }
    }
    Ok(())
}

/// The memgpt functions for the agent's Letta tools (send_message always among them).
fn map_tools(
    file: &AgentFile,
    agent: &AgentSchema,
    unmapped: &mut Vec<String>,
) -> Result<Vec<String>, AgentFileError> {
    let registry = FunctionRegistry::linked()
        .map_err(|e| AgentFileError::Invalid(format!("the function registry: {e}")))?;
    let tools: HashMap<&str, &ToolSchema> = file.tools.iter().map(|t| (t.id.as_str(), t)).collect();
    let mut functions: Vec<String> = vec!["send_message".to_owned()];
    for id in &agent.tool_ids {
        let tool = tools[id.as_str()];
        let Some(name) = tool.name.as_deref().or_else(|| {
            tool.json_schema
                .as_ref()
                .and_then(|s| s.get("name"))
                .and_then(Value::as_str)
        }) else {
            unmapped.push(format!("tool {id}: it has no name"));
            continue;
        };
        let ours = letta_name(name);
        if registry.get(ours).is_some() {
            if !functions.iter().any(|f| f == ours) {
                functions.push(ours.to_owned());
            }
        } else {
            let kind = tool.tool_type.as_deref().unwrap_or("custom");
            unmapped.push(format!(
                "tool `{name}` ({kind}): no memgpt function of that name (write one with #[memgpt_fn])"
            ));
        }
    }
    Ok(functions)
}

/// One of memgpt's messages for a Letta message, or `None` for kinds memgpt lacks.
fn to_message(agent: AgentId, schema: &MessageSchema, fallback: DateTime<Utc>) -> Option<Message> {
    let at = schema.created_at.unwrap_or(fallback);
    let content = schema.content.joined();
    let message = match schema.role.as_str() {
        "system" => Message::new(agent, MessageKind::SystemAlert, content, at),
        "user" => {
            let envelope: Option<serde_json::Map<String, Value>> =
                serde_json::from_str(&content).ok();
            let field = |name: &str| {
                envelope
                    .as_ref()
                    .and_then(|e| e.get(name))
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            };
            let (kind, text) = match field("type").as_deref() {
                Some("user_message") => (MessageKind::User, field("message")),
                Some("system_alert") => (MessageKind::SystemAlert, field("message")),
                Some("heartbeat") => (MessageKind::Heartbeat, field("reason")),
                Some("login") => (
                    MessageKind::Login,
                    field("message").or_else(|| {
                        field("last_login")
                            .map(|last| format!("The user logged in (previous login: {last})."))
                    }),
                ),
                Some("timer") => (MessageKind::Timer, field("message")),
                Some("document_upload") => (MessageKind::DocumentUpload, field("message")),
                _ => (MessageKind::User, None),
            };
            let mut message = Message::new(agent, kind, text.unwrap_or(content), at);
            if kind == MessageKind::User {
                message.name = field("name").or_else(|| schema.name.clone());
            }
            message
        }
        "assistant" => {
            let calls = schema
                .tool_calls
                .iter()
                .map(|call| ToolCall {
                    id: call.id.clone(),
                    name: call.function.name.clone(),
                    arguments: call.function.arguments.clone(),
                })
                .collect();
            Message::assistant(agent, content, calls, at)
        }
        "tool" | "function" => {
            let envelope: Option<serde_json::Map<String, Value>> =
                serde_json::from_str(&content).ok();
            let status = envelope
                .as_ref()
                .and_then(|e| e.get("status"))
                .and_then(Value::as_str);
            let returned_error = schema
                .tool_returns
                .iter()
                .any(|r| r.get("status").and_then(Value::as_str) == Some("error"));
            let failed = returned_error || matches!(status, Some("Failed" | "error"));
            let text = match envelope.as_ref().and_then(|e| e.get("message")) {
                Some(Value::String(text)) => text.clone(),
                Some(other) => other.to_string(),
                None => content,
            };
            let kind = if failed {
                MessageKind::FunctionError
            } else {
                MessageKind::FunctionReturn
            };
            let mut message = Message::new(agent, kind, text, at);
            message.tool_call_id = schema.tool_call_id.clone();
            message.name = schema.name.clone();
            message
        }
        _ => return None,
    };
    Some(message)
}
