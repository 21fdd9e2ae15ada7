//! Writing agents from a store into an [`AgentFile`] that Letta loads.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;

use chrono::Utc;
use serde_json::{Map, Value, json};

use super::AgentFileError;
use super::schema::*;
use crate::function::FunctionRegistry;
use crate::ids::{AgentId, BlockId, MessageId, PassageId};
use crate::llm::Role;
use crate::message::{Message, MessageKind};
use crate::store::{
    AgentState, Page, RecallQuery, SearchPage, Storage, StoreError, refresh_shared_blocks,
};

/// How many rows one store read fetches.
const BATCH: usize = 500;

/// memgpt's functions that Letta ships under the same name, with Letta's tool type. Any other
/// function is exported as a `custom` tool with its JSON schema (Letta needs its code to run
/// it; memgpt's functions are compiled in).
const LETTA_TOOLS: &[(&str, &str)] = &[
    ("send_message", "letta_core"),
    ("conversation_search", "letta_core"),
    ("archival_memory_insert", "letta_core"),
    ("archival_memory_search", "letta_core"),
    ("core_memory_append", "letta_memory_core"),
    ("core_memory_replace", "letta_memory_core"),
    ("memory_insert", "letta_sleeptime_core"),
    ("memory_replace", "letta_sleeptime_core"),
    ("memory_rethink", "letta_sleeptime_core"),
    ("memory_finish_edits", "letta_sleeptime_core"),
    ("memory", "letta_memory_core"),
    ("memory_apply_patch", "letta_memory_core"),
];

/// The agent `id` of `storage` as an agent file: its state, blocks and functions, the messages
/// in its context window, and (under `memgpt`) its older history, passages, summary and
/// configuration. An agent imported with related agents (a sleep-time companion) is written
/// with them and their group, as Letta wrote it.
pub async fn export(storage: &Storage, id: AgentId) -> Result<AgentFile, AgentFileError> {
    let state = storage
        .agents
        .load_agent(id)
        .await?
        .ok_or(StoreError::AgentNotFound(id))?;
    let mut states = vec![state];
    let group = states[0].config.group.clone();
    if let Some(group) = &group {
        let others = group
            .manager
            .iter()
            .chain(&group.members)
            .filter(|other| **other != id);
        for other in others {
            match storage.agents.load_agent(*other).await? {
                Some(state) => states.push(state),
                // A member was deleted: the group is gone, this agent goes alone.
                None => {
                    states.truncate(1);
                    break;
                }
            }
        }
    }
    // The manager first, as Letta writes it.
    if let Some(manager) = group.as_ref().and_then(|g| g.manager)
        && let Some(at) = states.iter().position(|s| s.id == manager)
    {
        let first = states.remove(at);
        states.insert(0, first);
    }

    let mut writer = Writer::default();
    for (i, state) in states.iter_mut().enumerate() {
        // Shared blocks as they are now, not as the agent last saw them.
        refresh_shared_blocks(&mut state.memory, storage.blocks.as_ref()).await?;
        writer.agent(storage, state, i).await?;
    }
    // Blocks several of the file's agents hold (Letta lists them on the group too).
    let mut holders: HashMap<&str, usize> = HashMap::new();
    for agent in &writer.agents {
        for id in &agent.block_ids {
            *holders.entry(id.as_str()).or_default() += 1;
        }
    }
    let shared_block_ids: Vec<String> = writer
        .blocks
        .iter()
        .filter(|b| holders.get(b.id.as_str()).is_some_and(|n| *n > 1))
        .map(|b| b.id.clone())
        .collect();
    let file_ids: HashMap<AgentId, String> = states
        .iter()
        .enumerate()
        .map(|(i, s)| (s.id, format!("agent-{i}")))
        .collect();
    let groups = match group {
        Some(group) if states.len() > 1 => {
            let mut manager_config = Map::new();
            manager_config.insert("manager_type".into(), Value::String(group.kind.clone()));
            if let Some(manager) = group.manager.and_then(|m| file_ids.get(&m)) {
                manager_config.insert("manager_agent_id".into(), Value::String(manager.clone()));
            }
            let mut settings = group.settings.clone();
            let description = settings
                .remove("description")
                .unwrap_or(Value::String(String::new()));
            manager_config.extend(settings);
            vec![json!({
                "id": "group-0",
                "agent_ids": group.members.iter().filter_map(|m| file_ids.get(m)).collect::<Vec<_>>(),
                "description": description,
                "manager_config": manager_config,
                "shared_block_ids": shared_block_ids,
            })]
        }
        _ => Vec::new(),
    };
    if !groups.is_empty() {
        for agent in &mut writer.agents {
            agent.group_ids = vec!["group-0".to_owned()];
        }
    }
    if writer.skills.is_empty() {
        // Which agent holds which skill matters only where there are skills.
        for extras in &mut writer.extras {
            extras.skills = None;
        }
    }
    let mut metadata = std::mem::take(&mut writer.file_metadata);
    metadata.insert(
        "exported_by".to_owned(),
        format!("memgpt-rs {}", env!("CARGO_PKG_VERSION")),
    );
    Ok(AgentFile {
        agents: writer.agents,
        groups,
        blocks: writer.blocks,
        tools: writer.tools,
        skills: writer.skills,
        metadata,
        created_at: Some(Utc::now()),
        memgpt: Some(Extension {
            format: 1,
            agents: writer.extras,
        }),
        ..AgentFile::default()
    })
}

/// The file being written: agents, their blocks and tools, and the file-local ids handed out.
#[derive(Default)]
struct Writer {
    agents: Vec<AgentSchema>,
    blocks: Vec<BlockSchema>,
    tools: Vec<ToolSchema>,
    extras: Vec<AgentExtras>,
    /// The agents' skills (each name once), at the file's top level as Letta has them.
    skills: Vec<SkillSchema>,
    /// The metadata of the file the first agent was imported from (Letta's `revision_id`).
    file_metadata: BTreeMap<String, String>,
    /// Messages numbered so far (ids are unique across the file).
    messages: usize,
    /// The file ids of the shared blocks written so far: an agent holding one refers to it.
    shared: HashMap<BlockId, String>,
}

impl Writer {
    async fn agent(
        &mut self,
        storage: &Storage,
        state: &AgentState,
        index: usize,
    ) -> Result<(), AgentFileError> {
        let id = state.id;
        // Every recall message and every passage, oldest first.
        let messages = all_pages(|page| {
            let query = RecallQuery::kinds(MessageKind::ALL, page);
            async move { storage.recall.list_messages(id, &query).await }
        })
        .await?;
        let passages = all_pages(|page| storage.archival.list_passages(id, page)).await?;

        // File-local ids: the system message first, then every message in order.
        let first = self.messages;
        self.messages += messages.len() + 1;
        let file_ids: HashMap<MessageId, String> = messages
            .iter()
            .enumerate()
            .map(|(i, message)| (message.id, format!("message-{}", first + i + 1)))
            .collect();
        let schema_of = |message: &Message| message_schema(message, &file_ids[&message.id]);
        // Passages are numbered in the agent's own list (what `superseded_by` refers to).
        let passage_ids: HashMap<PassageId, String> = passages
            .iter()
            .enumerate()
            .map(|(i, p)| (p.id, format!("passage-{i}")))
            .collect();
        let system_message = MessageSchema {
            id: format!("message-{first}"),
            role: "system".into(),
            content: Content::text(state.system.clone()),
            created_at: Some(state.created_at),
            ..MessageSchema::default()
        };
        // Main context in FIFO order; everything else is history.
        let by_id: HashMap<MessageId, &Message> = messages.iter().map(|m| (m.id, m)).collect();
        let context_messages: Vec<MessageSchema> = std::iter::once(system_message)
            .chain(
                state
                    .fifo
                    .iter()
                    .filter_map(|id| by_id.get(id))
                    .map(|m| schema_of(m)),
            )
            .collect();
        let in_context: HashSet<MessageId> = state.fifo.iter().copied().collect();
        let history: Vec<MessageSchema> = messages
            .iter()
            .filter(|m| !in_context.contains(&m.id))
            .map(schema_of)
            .collect();
        let in_context_message_ids = context_messages.iter().map(|m| m.id.clone()).collect();

        let mut block_ids = Vec::new();
        for block in state.memory.blocks() {
            if let Some(written) = block.shared().and_then(|s| self.shared.get(&s.id)) {
                block_ids.push(written.clone());
                continue;
            }
            let block_id = format!("block-{}", self.blocks.len());
            if let Some(shared) = block.shared() {
                self.shared.insert(shared.id, block_id.clone());
            }
            block_ids.push(block_id.clone());
            self.blocks.push(BlockSchema {
                id: block_id,
                label: block.label().to_owned(),
                value: block.value().to_owned(),
                limit: Some(block.limit()),
                description: block.description().map(str::to_owned),
                read_only: block.is_read_only(),
            });
        }

        let registry = FunctionRegistry::linked().ok();
        let mut tool_ids = Vec::new();
        for name in &state.config.functions {
            if let Some(tool) = self.tools.iter().find(|t| t.name.as_ref() == Some(name)) {
                tool_ids.push(tool.id.clone());
                continue;
            }
            let schema = registry
                .as_ref()
                .and_then(|r| r.get(name))
                .map(|f| &f.schema);
            let tool_type = LETTA_TOOLS
                .iter()
                .find(|(letta, _)| letta == name)
                .map_or("custom", |(_, kind)| kind);
            let tool_id = format!("tool-{}", self.tools.len());
            tool_ids.push(tool_id.clone());
            self.tools.push(ToolSchema {
                id: tool_id,
                name: Some(name.clone()),
                description: schema.map(|s| s.description.clone()),
                tool_type: Some(tool_type.to_owned()),
                source_type: Some("json".into()),
                source_code: None,
                json_schema: schema.map(|s| {
                    json!({ "name": s.name, "description": s.description, "parameters": s.parameters })
                }),
                tags: Vec::new(),
            });
        }

        let space = storage.agents.embedding_space().await?;
        let mut carried = state.config.carried.clone();
        let embedding_config = match carried.remove("embedding_config") {
            Some(value) => serde_json::from_value(value).ok(),
            None => space.as_ref().map(|space| EmbeddingConfig {
                embedding_endpoint_type: "openai".into(),
                embedding_model: space.model.clone(),
                embedding_dim: Some(space.dimension),
                other: Map::new(),
            }),
        };
        let agent_type = match carried.remove("agent_type") {
            Some(Value::String(kind)) => kind,
            _ => match state.config.loop_style {
                crate::config::LoopStyle::Heartbeat => "memgpt_agent",
                crate::config::LoopStyle::UntilReply => "letta_v1_agent",
            }
            .to_owned(),
        };
        let mut llm_other = match carried.remove("llm_config") {
            Some(Value::Object(map)) => map,
            _ => Map::new(),
        };
        let text = |v: Option<Value>| v.and_then(|v| v.as_str().map(str::to_owned));
        let model_endpoint_type =
            text(llm_other.remove("model_endpoint_type")).unwrap_or_else(|| {
                if state.config.model.starts_with("claude") {
                    "anthropic".to_owned()
                } else {
                    "openai".to_owned()
                }
            });
        let model_endpoint = text(llm_other.remove("model_endpoint"));
        let description = text(carried.remove("description"));
        let tags = match carried.remove("tags") {
            Some(value) => serde_json::from_value(value).unwrap_or_default(),
            None => Vec::new(),
        };
        if let Some(Value::Object(imported)) = carried.remove(super::import::FILE_METADATA)
            && index == 0
        {
            self.file_metadata = imported
                .into_iter()
                .filter_map(|(k, v)| Some((k, v.as_str()?.to_owned())))
                .collect();
        }
        let skills = state.memory.skills().all();
        for skill in skills {
            if !self.skills.iter().any(|s| s.name == skill.name) {
                self.skills.push(super::skills::schema_of(skill));
            }
        }
        let metadata = match carried.remove("metadata") {
            Some(Value::Object(map)) => Some(map),
            _ => None,
        };
        let agent = AgentSchema {
            id: format!("agent-{index}"),
            name: state.name.clone(),
            system: Some(state.system.clone()),
            agent_type: Some(agent_type),
            description,
            llm_config: Some(LlmConfig {
                model: state.config.model.clone(),
                model_endpoint_type,
                model_endpoint,
                context_window: Some(state.config.context_window),
                // Through its shortest decimal form: 0.7f32 is 0.7, not 0.699999988.
                temperature: state
                    .config
                    .temperature
                    .and_then(|t| t.to_string().parse().ok()),
                max_tokens: state
                    .config
                    .max_completion_tokens
                    .map(|t| t as usize)
                    .or_else(|| {
                        llm_other
                            .remove("max_tokens")
                            .and_then(|t| t.as_u64())
                            .map(|t| t as usize)
                    }),
                other: llm_other,
            }),
            embedding_config,
            tool_rules: state
                .config
                .tool_rules
                .iter()
                .map(crate::rules::ToolRule::to_letta)
                .collect(),
            tags,
            tool_ids,
            block_ids,
            messages: context_messages,
            in_context_message_ids,
            metadata,
            group_ids: Vec::new(),
            other: carried,
        };
        self.extras.push(AgentExtras {
            agent: agent.id.clone(),
            config: state.config.clone(),
            summary: state.summary.clone(),
            pinned: state
                .pinned
                .iter()
                .filter_map(|id| file_ids.get(id).cloned())
                .collect(),
            pressure_warned: state.pressure_warned,
            heartbeats_paused_until: state.heartbeats_paused_until,
            memory_updated_at: Some(state.memory_updated_at),
            history,
            passages: passages
                .into_iter()
                .map(|p| PassageSchema {
                    id: Some(passage_ids[&p.id].clone()),
                    text: p.text,
                    metadata: p.metadata,
                    created_at: p.created_at,
                    embedding: p.embedding,
                    valid_from: p.valid_from,
                    valid_to: p.valid_to,
                    superseded_by: p.superseded_by.and_then(|id| passage_ids.get(&id).cloned()),
                    retired_reason: p.retired_reason,
                })
                .collect(),
            embedding_model: space.map(|s| s.model),
            skills: Some(skills.iter().map(|s| s.name.clone()).collect()),
            loaded_skills: super::skills::loaded_of(skills),
        });
        self.agents.push(agent);
        Ok(())
    }
}

/// A message as Letta stores it: what the user said as plain text (with their name), the
/// rest as the envelope memgpt sends the LLM.
fn message_schema(message: &Message, id: &str) -> MessageSchema {
    let chat = message.to_chat();
    let (content, name) = match message.kind {
        MessageKind::User => (message.text.clone(), message.name.clone()),
        _ => (chat.content, chat.name),
    };
    MessageSchema {
        id: id.to_owned(),
        role: match chat.role {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
        .to_owned(),
        content: Content::text(content),
        name,
        tool_calls: chat
            .tool_calls
            .into_iter()
            .map(|call| ToolCallSchema {
                id: call.id,
                kind: "function".into(),
                function: FunctionCallSchema {
                    name: call.name,
                    arguments: call.arguments,
                },
            })
            .collect(),
        tool_call_id: chat.tool_call_id,
        tool_returns: Vec::new(),
        approvals: Vec::new(),
        created_at: Some(message.created_at),
    }
}

/// Every item of a paged store listing, fetched `BATCH` at a time.
async fn all_pages<T, F, Fut>(mut fetch: F) -> Result<Vec<T>, StoreError>
where
    F: FnMut(Page) -> Fut,
    Fut: Future<Output = Result<SearchPage<T>, StoreError>>,
{
    let mut items = Vec::new();
    for number in 0.. {
        let found = fetch(Page::new(number, BATCH)).await?;
        let done = !found.has_more();
        items.extend(found.hits.into_iter().map(|hit| hit.item));
        if done {
            break;
        }
    }
    Ok(items)
}
