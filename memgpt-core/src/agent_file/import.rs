//! Reading an [`AgentFile`] into a store, all or nothing.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use super::AgentFileError;
use super::schema::*;
use crate::config::{AgentConfig, AgentGroup, LoopStyle};
use crate::function::FunctionRegistry;
use crate::ids::{AgentId, BlockId, MessageId, PassageId};
use crate::memory::{MemoryBlock, WorkingContext};
use crate::message::{Message, MessageKind, ToolCall};
use crate::rules::ToolRule;
use crate::store::{AgentState, Commit, Passage, SharedBlock, Storage, StoreError};

/// How to import.
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// The imported agent's name (default: the file's). With several agents it names the
    /// first (the group's manager); the others are called `NAME-THEIR_NAME`. Names are unique
    /// per store unless [`ImportOptions::allow_duplicate_name`].
    pub name: Option<String>,
    /// The new agents' ids: the first agent's ([`ImportReport::id`]), then those of
    /// [`ImportReport::related`] in order (default: fresh ones),
    /// for callers that record them before the import (a server recording the owner first).
    /// See [`AgentFile::importable`] for how many a file needs.
    pub ids: Vec<AgentId>,
    /// Skips the check that no agent of the store has the name (a multi-tenant server, whose
    /// tenants' names are separate and must not reveal each other).
    pub allow_duplicate_name: bool,
    /// Imports only this agent of a file with several (its file id, `agent-1`, or its name).
    pub agent: Option<String>,
    /// Where the file's tools are looked up (default: the functions linked into the program,
    /// [`FunctionRegistry::linked`]). A registry holding MCP servers' tools (named
    /// `SERVER__TOOL`) also takes Letta's `external_mcp` tools: the tool `search` becomes the
    /// function `SERVER__search` when exactly one server offers it.
    pub registry: Option<FunctionRegistry>,
    /// The [`scope`](crate::store::SharedBlock::scope) of the shared blocks the import creates
    /// (a block the file gives to several imported agents becomes one shared block): a
    /// multi-tenant server's tenant.
    pub block_scope: Option<String>,
}

/// What an import did.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ImportReport {
    /// The new agent's id (the first agent, the group's manager when there is a group).
    pub id: AgentId,
    /// Its name.
    pub name: String,
    /// Messages written to recall storage.
    pub messages: usize,
    /// Passages written to archival storage.
    pub passages: usize,
    /// Memory blocks.
    pub blocks: usize,
    /// Skills (procedural memory the agent loads when needed).
    pub skills: usize,
    /// What was not imported, one line each: tools without a memgpt function, secrets and
    /// tool environment variables, files and sources, blocks no agent uses, message kinds
    /// memgpt does not have, agents left out.
    pub unmapped: Vec<String>,
    /// What was imported changed, one line each (a limit raised to fit its block, a shared
    /// block copied to each agent, default instructions for an agent without any).
    pub adjusted: Vec<String>,
    /// Fields memgpt does not use but keeps, so that an export gives them back.
    pub kept: Vec<String>,
    /// The file's other agents, imported with this one (a sleep-time companion...).
    pub related: Vec<ImportReport>,
}

/// Letta's tools and the memgpt functions that do their job (`memory_insert`,
/// `memory_replace`, `memory_rethink` and `memory_finish_edits` are memgpt functions of the same
/// name and arguments).
const TOOL_MAP: &[(&str, &str)] = &[
    ("conversation_search_date", "conversation_search"),
    // Letta's multi-agent tools (its agents message each other by id; memgpt's function takes
    // a name or an id, and `wait`).
    (
        "send_message_to_agent_and_wait_for_reply",
        "send_message_to_agent",
    ),
    ("send_message_to_agent_async", "send_message_to_agent"),
];

/// Agent fields that mean nothing in another store (ids of Letta's objects, copies of what the
/// file holds elsewhere) or must not travel (secrets): never kept.
const NOT_KEPT: &[&str] = &[
    "memory_blocks",
    "tools",
    "files_agents",
    "tool_exec_environment_variables",
    "secrets",
    "multi_agent_group",
];

/// The key of [`AgentConfig::carried`] holding the metadata of the file an agent was
/// imported from (Letta's `revision_id`), written back at the file's top level on export.
pub(super) const FILE_METADATA: &str = "file_metadata";

/// memgpt's name for Letta's function `name`.
fn letta_name(name: &str) -> &str {
    TOOL_MAP
        .iter()
        .find(|(letta, _)| *letta == name)
        .map_or(name, |(_, ours)| *ours)
}

impl AgentFile {
    /// How many agents [`import`] writes for `options` (the ids a caller must provide in
    /// [`ImportOptions::ids`], if it provides them).
    pub fn importable(&self, options: &ImportOptions) -> Result<usize, AgentFileError> {
        Ok(chosen_agents(self, options)?.len())
    }

    /// The names [`import`] gives the agents it writes for `options`, in the order of
    /// [`ImportOptions::ids`] (for callers that keep names unique their own way).
    pub fn import_names(&self, options: &ImportOptions) -> Result<Vec<String>, AgentFileError> {
        Ok(agent_names(
            &chosen_agents(self, options)?,
            options.name.as_deref(),
        ))
    }
}

/// The file's agents to import, the group's manager (or the first) first.
fn chosen_agents<'f>(
    file: &'f AgentFile,
    options: &ImportOptions,
) -> Result<Vec<&'f AgentSchema>, AgentFileError> {
    let invalid = |m: String| AgentFileError::Invalid(m);
    if file.agents.is_empty() {
        return Err(invalid("the file holds no agent".into()));
    }
    if let Some(wanted) = &options.agent {
        return file
            .agents
            .iter()
            .find(|a| &a.id == wanted || &a.name == wanted)
            .map(|a| vec![a])
            .ok_or_else(|| {
                invalid(format!(
                    "no agent `{wanted}` in the file (it holds {})",
                    file.agents
                        .iter()
                        .map(|a| format!("{} `{}`", a.id, a.name))
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            });
    }
    let manager = file.groups.iter().find_map(|g| {
        g.pointer("/manager_config/manager_agent_id")
            .or_else(|| g.get("manager_agent_id"))
            .and_then(Value::as_str)
    });
    let mut agents: Vec<&AgentSchema> = file.agents.iter().collect();
    if let Some(at) = manager.and_then(|m| agents.iter().position(|a| a.id == m)) {
        let first = agents.remove(at);
        agents.insert(0, first);
    }
    Ok(agents)
}

/// Imports the file's agents into `storage` as new agents (new ids, same content): every
/// agent, or the one [`ImportOptions::agent`] names. Each agent is one store transaction
/// where the store offers one, and an import that fails part-way deletes the agents it wrote:
/// it lands whole or not at all. Fails without writing anything if the file breaks the
/// format's rules (duplicate ids, references that do not resolve) or a name is taken.
pub async fn import(
    storage: &Storage,
    file: &AgentFile,
    options: ImportOptions,
) -> Result<ImportReport, AgentFileError> {
    let invalid = |m: String| AgentFileError::Invalid(m);
    check_ids(file)?;
    let agents = chosen_agents(file, &options)?;
    if !options.ids.is_empty() && options.ids.len() != agents.len() {
        return Err(invalid(format!(
            "{} ids given for {} agents",
            options.ids.len(),
            agents.len()
        )));
    }
    let ids: Vec<AgentId> = (0..agents.len())
        .map(|i| options.ids.get(i).copied().unwrap_or_default())
        .collect();
    let new_id: HashMap<&str, AgentId> = agents
        .iter()
        .zip(&ids)
        .map(|(a, id)| (a.id.as_str(), *id))
        .collect();
    let names = agent_names(&agents, options.name.as_deref());
    if !options.allow_duplicate_name {
        let taken: HashSet<String> = storage
            .agents
            .list_agents()
            .await?
            .into_iter()
            .map(|a| a.name)
            .collect();
        if let Some(name) = names.iter().find(|n| taken.contains(*n)) {
            return Err(invalid(format!(
                "an agent named `{name}` already exists (import it under another name)"
            )));
        }
    }

    // What the file holds that no imported agent takes.
    let mut file_notes = Vec::new();
    let used_blocks: HashSet<&str> = agents
        .iter()
        .flat_map(|a| a.block_ids.iter().map(String::as_str))
        .collect();
    for block in file
        .blocks
        .iter()
        .filter(|b| !used_blocks.contains(b.id.as_str()))
    {
        file_notes.push(format!(
            "block `{}` ({}): no imported agent uses it",
            block.label, block.id
        ));
    }
    for (what, count) in [
        ("files", file.files.len()),
        ("sources", file.sources.len()),
        ("MCP servers", file.mcp_servers.len()),
    ] {
        if count > 0 {
            file_notes.push(format!(
                "{count} {what}: memgpt does not import {what} (attach documents with `memgpt ingest`, MCP servers in memgpt.toml)"
            ));
        }
    }
    for skipped in file
        .agents
        .iter()
        .filter(|a| !new_id.contains_key(a.id.as_str()))
    {
        file_notes.push(format!(
            "agent {} `{}`: not chosen",
            skipped.id, skipped.name
        ));
    }
    // A block given to several imported agents is one shared block of the store (Letta's
    // shared memory); a store without shared blocks gives each agent its own copy.
    let mut shared: HashMap<&str, SharedBlock> = HashMap::new();
    let mut shared_notes = Vec::new();
    for block in &file.blocks {
        let holders: Vec<&str> = agents
            .iter()
            .filter(|a| a.block_ids.contains(&block.id))
            .map(|a| a.id.as_str())
            .collect();
        if holders.len() > 1 {
            let mut notes = Vec::new();
            let mut stored = SharedBlock::new(memory_block(block, &mut notes), Utc::now());
            stored.scope = options.block_scope.clone();
            shared_notes.extend(notes);
            shared.insert(block.id.as_str(), stored);
        }
    }
    let mut created_blocks = Vec::new();
    for block in shared.values() {
        match storage.blocks.create_block(block).await {
            Ok(()) => created_blocks.push(block.id),
            Err(StoreError::Unsupported(_)) if created_blocks.is_empty() => {
                for (file_id, block) in shared.drain() {
                    shared_notes.push(format!(
                        "block `{}` ({file_id}) is shared in the file, but this store keeps no shared blocks: each agent has its own copy",
                        block.block.label()
                    ));
                }
                break;
            }
            Err(e) => {
                remove_blocks(storage, &created_blocks).await;
                return Err(e.into());
            }
        }
    }

    let registry = match &options.registry {
        Some(registry) => registry.clone(),
        None => FunctionRegistry::linked()
            .map_err(|e| invalid(format!("the function registry: {e}")))?,
    };
    let mut commits = Vec::new();
    let mut reports = Vec::new();
    for (i, agent) in agents.iter().enumerate() {
        let (commit, mut report) = match agent_commit(
            file,
            (i, agent),
            ids[i],
            &names[i],
            &new_id,
            &registry,
            &shared,
        ) {
            Ok(done) => done,
            Err(e) => {
                remove_blocks(storage, &created_blocks).await;
                return Err(e);
            }
        };
        if i == 0 {
            report.unmapped.append(&mut file_notes);
            report.adjusted.append(&mut shared_notes);
        }
        commits.push(commit);
        reports.push(report);
    }
    let mut written: Vec<AgentId> = Vec::new();
    for commit in &commits {
        if let Err(e) = storage.agents.create_agent_with(commit).await {
            for id in written {
                if let Err(undo) = storage.agents.delete_agent(id).await {
                    tracing::warn!(agent = %id, error = %undo, "could not remove an agent of a failed import");
                }
            }
            remove_blocks(storage, &created_blocks).await;
            return Err(e.into());
        }
        written.push(commit.state.id);
    }
    let mut reports = reports.into_iter();
    let mut first = reports
        .next()
        .ok_or_else(|| invalid("the file holds no agent".into()))?;
    first.related = reports.collect();
    Ok(first)
}

/// Deletes the shared blocks a failed import created (its agents are deleted first).
async fn remove_blocks(storage: &Storage, blocks: &[BlockId]) {
    for id in blocks {
        if let Err(undo) = storage.blocks.delete_block(*id).await {
            tracing::warn!(block = %id, error = %undo, "could not remove a shared block of a failed import");
        }
    }
}

/// A file's block as a memory block; a text over its limit raises the limit (said in
/// `adjusted`).
fn memory_block(block: &BlockSchema, adjusted: &mut Vec<String>) -> MemoryBlock {
    let chars = block.value.chars().count();
    let mut limit = block.limit.unwrap_or(crate::memory::DEFAULT_BLOCK_LIMIT);
    if chars > limit {
        adjusted.push(format!(
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
    b
}

/// The imported agents' names: the option or the file's for the first; the others their own,
/// prefixed with the option when it is given.
fn agent_names(agents: &[&AgentSchema], chosen: Option<&str>) -> Vec<String> {
    let own = |a: &AgentSchema, i: usize| {
        Some(a.name.trim().to_owned())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| format!("imported-{}", i + 1))
    };
    agents
        .iter()
        .enumerate()
        .map(|(i, a)| match (i, chosen) {
            (0, Some(name)) => name.to_owned(),
            (_, Some(name)) => format!("{name}-{}", own(a, i)),
            (_, None) => own(a, i),
        })
        .collect()
}

/// One agent's state, messages and passages, and what became of the file's fields.
fn agent_commit(
    file: &AgentFile,
    (index, agent): (usize, &AgentSchema),
    id: AgentId,
    name: &str,
    new_id: &HashMap<&str, AgentId>,
    registry: &FunctionRegistry,
    shared: &HashMap<&str, SharedBlock>,
) -> Result<(Commit, ImportReport), AgentFileError> {
    let invalid = |m: String| AgentFileError::Invalid(m);
    let extras = file
        .memgpt
        .as_ref()
        .and_then(|x| x.agents.iter().find(|a| a.agent == agent.id));
    let mut unmapped = Vec::new();
    let mut adjusted = Vec::new();
    let mut kept = Vec::new();

    // Configuration: memgpt's own if the file has it, else what Letta's fields say.
    let mut config = match extras {
        Some(extras) => extras.config.clone(),
        None => letta_config(
            file,
            agent,
            registry,
            &mut unmapped,
            &mut adjusted,
            &mut kept,
        )?,
    };
    if extras.is_some() {
        // The functions must exist in this program.
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
    config.group = group_of(file, agent, new_id, &mut unmapped);

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
    for block_id in &agent.block_ids {
        match shared.get(block_id.as_str()) {
            Some(block) => blocks.push(block.attached()),
            None => blocks.push(memory_block(blocks_by_id[block_id.as_str()], &mut adjusted)),
        }
    }
    let block_count = blocks.len();
    let mut memory = WorkingContext::from_blocks(blocks)
        .map_err(|e| invalid(format!("agent {}: memory blocks: {e}", agent.id)))?;
    let skills = super::skills::skills_of(file, index, extras, &mut adjusted, &mut unmapped);
    let skill_count = skills.len();
    for skill in skills {
        memory
            .add_skill(skill)
            .map_err(|e| invalid(format!("agent {}: skills: {e}", agent.id)))?;
    }
    if skill_count > 0
        && registry.get("skill").is_some()
        && !config.functions.iter().any(|f| f == "skill")
    {
        config.functions.push("skill".to_owned());
    }
    if index == 0 && extras.is_none() && !file.metadata.is_empty() {
        // Letta's file metadata (its `revision_id`) goes back into the files memgpt writes.
        config.carried.insert(
            FILE_METADATA.to_owned(),
            serde_json::to_value(&file.metadata).unwrap_or_default(),
        );
    }

    // Messages: the history under `memgpt`, then the agent's own, oldest first.
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
    let mut system = agent.system.clone().filter(|s| !s.trim().is_empty());
    let mut system_created_at = None;
    let mut converted: Vec<(&str, Message)> = Vec::new();
    let history = extras.map(|x| x.history.as_slice()).unwrap_or_default();
    for schema in history.iter().chain(&agent.messages) {
        if Some(&schema.id) == system_id.as_ref() {
            if system.is_none() {
                system = Some(schema.content.joined()).filter(|s| !s.trim().is_empty());
            }
            system_created_at = schema.created_at;
            continue;
        }
        match to_messages(id, schema, fallback_time) {
            Some(messages) => {
                converted.extend(messages.into_iter().map(|m| (schema.id.as_str(), m)))
            }
            None => unmapped.push(format!(
                "message {} (role `{}`): memgpt has no such message",
                schema.id, schema.role
            )),
        }
    }
    converted.sort_by_key(|(_, m)| m.created_at);
    let converted = pair_calls(converted, &mut unmapped);
    let mut new_ids: HashMap<&str, MessageId> = HashMap::new();
    let mut in_file_order: HashMap<&str, Vec<MessageId>> = HashMap::new();
    for (file_id, message) in &converted {
        new_ids.entry(file_id).or_insert(message.id);
        in_file_order.entry(file_id).or_default().push(message.id);
    }
    let messages: Vec<Message> = converted.into_iter().map(|(_, m)| m).collect();
    // An agent without instructions runs on memgpt's defaults (the loader fills them in).
    let system = system.unwrap_or_else(|| {
        adjusted.push(format!(
            "agent {}: no system instructions in the file; it runs on memgpt's defaults",
            agent.id
        ));
        String::new()
    });
    let fifo: Vec<MessageId> = agent
        .in_context_message_ids
        .iter()
        .flat_map(|m| in_file_order.get(m.as_str()).cloned().unwrap_or_default())
        .collect();
    let pinned = extras
        .map(|x| {
            x.pinned
                .iter()
                .filter_map(|m| new_ids.get(m.as_str()).copied())
                .collect()
        })
        .unwrap_or_default();

    let file_passages = extras.map(|x| x.passages.as_slice()).unwrap_or_default();
    let mut passages: Vec<Passage> = file_passages
        .iter()
        .map(|p| {
            let mut passage = Passage::new(id, p.text.clone(), p.created_at);
            passage.metadata = p.metadata.clone();
            passage.embedding = p.embedding.clone();
            passage.valid_from = p.valid_from;
            passage.valid_to = p.valid_to;
            passage.retired_reason = p.retired_reason.clone();
            passage
        })
        .collect();
    // Passages get new ids: a replacement is found by its id in the file.
    let new_ids: HashMap<&str, PassageId> = file_passages
        .iter()
        .zip(&passages)
        .filter_map(|(p, new)| Some((p.id.as_deref()?, new.id)))
        .collect();
    for (p, passage) in file_passages.iter().zip(&mut passages) {
        passage.superseded_by = p
            .superseded_by
            .as_deref()
            .and_then(|old| new_ids.get(old).copied());
    }

    let now = Utc::now();
    // A sleep-time companion comes with the conversation its primary had in the file already
    // consolidated: it reads what is said from the import on.
    let consolidated_until = crate::consolidation::Consolidation::of(id, &config)
        .filter(|c| c.companion == id)
        .map(|_| now);
    let created_at = system_created_at
        .or_else(|| messages.first().map(|m| m.created_at))
        .unwrap_or(now);
    let state = AgentState {
        id,
        name: name.to_owned(),
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
        consolidated_until,
    };
    let report = ImportReport {
        id,
        name: name.to_owned(),
        messages: messages.len(),
        passages: passages.len(),
        blocks: block_count,
        skills: skill_count,
        unmapped,
        adjusted,
        kept,
        related: Vec::new(),
    };
    let commit = Commit {
        messages,
        passages,
        ..Commit::state(state)
    };
    Ok((commit, report))
}

/// The configuration a Letta agent's fields describe; what memgpt does not use is kept in
/// [`AgentConfig::carried`] (or reported, for secrets).
fn letta_config(
    file: &AgentFile,
    agent: &AgentSchema,
    registry: &FunctionRegistry,
    unmapped: &mut Vec<String>,
    adjusted: &mut Vec<String>,
    kept: &mut Vec<String>,
) -> Result<AgentConfig, AgentFileError> {
    let mut config = AgentConfig::default();
    let mut carried = Map::new();
    if let Some(llm) = &agent.llm_config {
        config.model = llm.model.clone();
        if let Some(window) = llm.context_window {
            config.context_window = window;
        }
        config.temperature = llm.temperature.map(|t| t as f32);
        let mut rest = llm.other.clone();
        rest.retain(|_, v| !v.is_null());
        // memgpt keeps a completion's tokens free in the window: a Letta `max_tokens` that
        // leaves the prompt less than three quarters of it is kept, not applied.
        match llm.max_tokens {
            Some(tokens) if tokens <= config.context_window / 4 => {
                config.max_completion_tokens = u32::try_from(tokens).ok();
            }
            Some(tokens) => {
                adjusted.push(format!(
                    "llm_config.max_tokens: {tokens} of a {}-token window would leave the prompt too little; memgpt keeps its own reserve (the value is kept for export)",
                    config.context_window
                ));
                rest.insert("max_tokens".to_owned(), Value::from(tokens));
            }
            None => {}
        }
        for (key, value) in [
            ("model_endpoint_type", &llm.model_endpoint_type),
            (
                "model_endpoint",
                &llm.model_endpoint.clone().unwrap_or_default(),
            ),
        ] {
            if !value.is_empty() {
                rest.insert(key.to_owned(), Value::String(value.clone()));
            }
        }
        if !rest.is_empty() {
            kept.push(format!(
                "llm_config: {}",
                rest.keys().cloned().collect::<Vec<_>>().join(", ")
            ));
            carried.insert("llm_config".to_owned(), Value::Object(rest));
        }
    }
    config.functions = map_tools(file, agent, registry, unmapped);
    match agent.agent_type.as_deref() {
        // Letta's v1 agents loop until they reply, without heartbeats.
        Some("letta_v1_agent") => config.loop_style = LoopStyle::UntilReply,
        Some(other) if other != "memgpt_agent" => {
            carried.insert("agent_type".to_owned(), Value::String(other.to_owned()));
        }
        _ => {}
    }
    let mut rules: Vec<ToolRule> = Vec::new();
    for value in &agent.tool_rules {
        match ToolRule::from_letta(value, |name| letta_name(name).to_owned()) {
            // Two Letta tools mapped onto one function give the same rule twice.
            Ok(rule) if rules.contains(&rule) => {}
            Ok(rule) => rules.push(rule),
            Err(why) => unmapped.push(format!("tool rule: {why}")),
        }
    }
    config.tool_rules = rules;
    if let Some(embedding) = &agent.embedding_config {
        kept.push("embedding_config".to_owned());
        carried.insert(
            "embedding_config".to_owned(),
            serde_json::to_value(embedding).unwrap_or_default(),
        );
    }
    for (key, value) in [
        ("description", agent.description.clone().map(Value::String)),
        (
            "tags",
            (!agent.tags.is_empty()).then(|| Value::from(agent.tags.clone())),
        ),
        ("metadata", agent.metadata.clone().map(Value::Object)),
    ] {
        if let Some(value) = value.filter(|v| !is_empty(v)) {
            kept.push(key.to_owned());
            carried.insert(key.to_owned(), value);
        }
    }
    for (key, value) in &agent.other {
        if is_empty(value) {
            continue;
        }
        if NOT_KEPT.contains(&key.as_str()) || key.ends_with("_id") || key.ends_with("_ids") {
            let why = match key.as_str() {
                "tool_exec_environment_variables" | "secrets" => {
                    "secrets are not imported: set them in this program's environment"
                }
                _ => "it refers to Letta's own objects",
            };
            unmapped.push(format!("{key}: {why}"));
        } else {
            kept.push(key.clone());
            carried.insert(key.clone(), value.clone());
        }
    }
    config.carried = carried;
    Ok(config)
}

/// `null`, `""`, `[]` and `{}`.
fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// The group the agent belongs to among the imported agents, if all its agents came along.
fn group_of(
    file: &AgentFile,
    agent: &AgentSchema,
    new_id: &HashMap<&str, AgentId>,
    unmapped: &mut Vec<String>,
) -> Option<AgentGroup> {
    for group in &file.groups {
        let ids = |v: Option<&Value>| -> Vec<String> {
            v.and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default()
        };
        let members = ids(group.get("agent_ids"));
        let config = group
            .get("manager_config")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let manager = config
            .get("manager_agent_id")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let involved = members.contains(&agent.id) || manager.as_deref() == Some(&agent.id);
        if !involved {
            continue;
        }
        let all: Vec<&String> = members.iter().chain(manager.iter()).collect();
        if let Some(missing) = all.iter().find(|m| !new_id.contains_key(m.as_str())) {
            unmapped.push(format!(
                "group {}: its agent {missing} was not imported, so the relation is dropped",
                group.get("id").and_then(Value::as_str).unwrap_or("?")
            ));
            return None;
        }
        let mut settings = config;
        let kind = settings
            .remove("manager_type")
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        settings.remove("manager_agent_id");
        if let Some(description) = group.get("description").filter(|v| !is_empty(v)) {
            settings.insert("description".to_owned(), description.clone());
        }
        return Some(AgentGroup {
            kind,
            manager: manager.and_then(|m| new_id.get(m.as_str()).copied()),
            members: members
                .iter()
                .filter_map(|m| new_id.get(m.as_str()).copied())
                .collect(),
            settings,
        });
    }
    None
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
    for (i, agent) in file.agents.iter().enumerate() {
        let missing = agent
            .block_ids
            .iter()
            .position(|b| !blocks.contains(b.as_str()))
            .map(|at| ("block_ids", at, &agent.block_ids[at]))
            .or_else(|| {
                agent
                    .tool_ids
                    .iter()
                    .position(|t| !tools.contains(t.as_str()))
                    .map(|at| ("tool_ids", at, &agent.tool_ids[at]))
            })
            .or_else(|| {
                agent
                    .in_context_message_ids
                    .iter()
                    .position(|m| !message_ids.contains(m.as_str()))
                    .map(|at| {
                        (
                            "in_context_message_ids",
                            at,
                            &agent.in_context_message_ids[at],
                        )
                    })
            });
        if let Some((field, at, id)) = missing {
            return Err(AgentFileError::Invalid(format!(
                "agents[{i}].{field}[{at}]: `{id}` is not in the file"
            )));
        }
    }
    Ok(())
}

/// The memgpt functions for the agent's Letta tools (send_message always among them).
fn map_tools(
    file: &AgentFile,
    agent: &AgentSchema,
    registry: &FunctionRegistry,
    unmapped: &mut Vec<String>,
) -> Vec<String> {
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
        let kind = tool.tool_type.as_deref().unwrap_or("custom");
        let ours = match letta_name(name) {
            ours if registry.get(ours).is_some() => Some(ours.to_owned()),
            // An MCP tool: the attached server that offers it.
            _ if kind == "external_mcp" => {
                let suffix = format!("__{name}");
                let offered: Vec<&str> =
                    registry.names().filter(|f| f.ends_with(&suffix)).collect();
                match offered.as_slice() {
                    [only] => Some((*only).to_owned()),
                    _ => None,
                }
            }
            _ => None,
        };
        match ours {
            Some(ours) => {
                if !functions.contains(&ours) {
                    functions.push(ours);
                }
            }
            None => {
                let how = if kind == "external_mcp" {
                    "attach an MCP server offering it in memgpt.toml"
                } else {
                    "write one with #[memgpt_fn]"
                };
                unmapped.push(format!(
                    "tool `{name}` ({kind}): no memgpt function of that name ({how})"
                ));
            }
        }
    }
    functions
}

/// Letta's tool-return envelope `{"status": ..., "message": ...}`: the text and whether the
/// call failed. A `null` message is an empty result.
fn tool_result(text: &str, status: Option<&str>) -> (String, bool) {
    let envelope: Option<Map<String, Value>> = serde_json::from_str(text).ok();
    let envelope_status = envelope
        .as_ref()
        .and_then(|e| e.get("status"))
        .and_then(Value::as_str);
    let failed =
        matches!(status, Some("error")) || matches!(envelope_status, Some("Failed" | "error"));
    let text = match envelope.as_ref().map(|e| e.get("message")) {
        Some(Some(Value::String(text))) => text.clone(),
        Some(Some(Value::Null)) => String::new(),
        Some(Some(other)) => other.to_string(),
        _ => text.to_owned(),
    };
    (text, failed)
}

/// memgpt's messages for one Letta message (a tool message with several parallel returns
/// gives one each; an approval request is the assistant's call; an approval answer gives
/// none), or `None` for kinds memgpt lacks.
fn to_messages(
    agent: AgentId,
    schema: &MessageSchema,
    fallback: DateTime<Utc>,
) -> Option<Vec<Message>> {
    let at = schema.created_at.unwrap_or(fallback);
    let content = schema.content.joined();
    let message = match schema.role.as_str() {
        "system" => Message::new(agent, MessageKind::SystemAlert, content, at),
        "user" => {
            let envelope: Option<Map<String, Value>> = serde_json::from_str(&content).ok();
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
        "assistant" | "approval" => {
            if schema.role == "approval" && schema.tool_calls.is_empty() {
                // The answer to an approval request: the tool message after it holds the result.
                return Some(Vec::new());
            }
            let calls = schema
                .tool_calls
                .iter()
                .map(|call| ToolCall {
                    id: call.id.clone(),
                    name: letta_name(&call.function.name).to_owned(),
                    arguments: call.function.arguments.clone(),
                })
                .collect();
            Message::assistant(agent, content, calls, at)
        }
        "tool" | "function" => {
            if schema.tool_returns.len() > 1
                || (content.is_empty() && !schema.tool_returns.is_empty())
            {
                let messages = schema
                    .tool_returns
                    .iter()
                    .map(|r| {
                        let text = r.get("func_response").and_then(Value::as_str).unwrap_or("");
                        let (text, failed) =
                            tool_result(text, r.get("status").and_then(Value::as_str));
                        let kind = if failed {
                            MessageKind::FunctionError
                        } else {
                            MessageKind::FunctionReturn
                        };
                        let mut message = Message::new(agent, kind, text, at);
                        message.tool_call_id = r
                            .get("tool_call_id")
                            .and_then(Value::as_str)
                            .map(str::to_owned)
                            .or_else(|| schema.tool_call_id.clone());
                        message.name = schema.name.clone();
                        message
                    })
                    .collect();
                return Some(messages);
            }
            let status = schema
                .tool_returns
                .iter()
                .find_map(|r| r.get("status").and_then(Value::as_str));
            let (text, failed) = tool_result(&content, status);
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
    Some(vec![message])
}

/// Keeps function calls and their results together, as every chat API requires: a result
/// whose call is not in the file is dropped, and so is a call whose result is not (a call
/// still waiting for approval when the file was written). Both are reported.
fn pair_calls<'f>(
    mut messages: Vec<(&'f str, Message)>,
    unmapped: &mut Vec<String>,
) -> Vec<(&'f str, Message)> {
    let is_result = |m: &Message| {
        matches!(
            m.kind,
            MessageKind::FunctionReturn | MessageKind::FunctionError
        )
    };
    // Results without ids (older files) answer the calls before them, in order.
    let mut open: Vec<String> = Vec::new();
    for (_, message) in &mut messages {
        if !message.tool_calls.is_empty() {
            open = message.tool_calls.iter().map(|c| c.id.clone()).collect();
        } else if is_result(message) {
            match &message.tool_call_id {
                Some(id) => open.retain(|c| c != id),
                None if !open.is_empty() => message.tool_call_id = Some(open.remove(0)),
                None => {}
            }
        }
    }
    let calls: HashSet<String> = messages
        .iter()
        .flat_map(|(_, m)| m.tool_calls.iter().map(|c| c.id.clone()))
        .collect();
    let results: HashSet<String> = messages
        .iter()
        .filter(|(_, m)| is_result(m))
        .filter_map(|(_, m)| m.tool_call_id.clone())
        .collect();
    let mut paired = Vec::with_capacity(messages.len());
    for (file_id, mut message) in messages {
        if is_result(&message) {
            let call = message.tool_call_id.as_deref().unwrap_or("without an id");
            if !calls.contains(call) {
                unmapped.push(format!(
                    "message {file_id}: the result of the call {call}, which is not in the file"
                ));
                continue;
            }
        }
        let before = message.tool_calls.len();
        message.tool_calls.retain(|c| results.contains(&c.id));
        if message.tool_calls.len() < before {
            unmapped.push(format!(
                "message {file_id}: {} call(s) without a result in the file (awaiting approval?)",
                before - message.tool_calls.len()
            ));
            if message.tool_calls.is_empty() && message.text.trim().is_empty() {
                continue;
            }
        }
        paired.push((file_id, message));
    }
    paired
}
