//! Writing an agent from a store into an [`AgentFile`].

use std::collections::HashMap;

use chrono::Utc;
use serde_json::json;

use super::AgentFileError;
use super::schema::*;
use crate::function::FunctionRegistry;
use crate::ids::{AgentId, MessageId};
use crate::llm::Role;
use crate::message::{Message, MessageKind};
use crate::store::{Page, RecallQuery, Storage, StoreError};

/// How many rows one store read fetches.
const BATCH: usize = 500;

/// The agent `id` of `storage` as an agent file: its state, blocks and functions, the messages
/// in its context window, and (under `memgpt`) its older history, passages, summary and
/// configuration.
pub async fn export(storage: &Storage, id: AgentId) -> Result<AgentFile, AgentFileError> {
    let state = storage
        .agents
        .load_agent(id)
        .await?
        .ok_or(StoreError::AgentNotFound(id))?;

    // Every recall message, oldest first.
    let mut messages = Vec::new();
    let mut page = 0;
    loop {
        let query = RecallQuery::kinds(MessageKind::ALL, Page::new(page, BATCH));
        let found = storage.recall.list_messages(id, &query).await?;
        let done = !found.has_more();
        messages.extend(found.hits.into_iter().map(|hit| hit.item));
        if done {
            break;
        }
        page += 1;
    }
    let mut passages = Vec::new();
    let mut page = 0;
    loop {
        let found = storage
            .archival
            .list_passages(id, Page::new(page, BATCH))
            .await?;
        let done = !found.has_more();
        passages.extend(found.hits.into_iter().map(|hit| hit.item));
        if done {
            break;
        }
        page += 1;
    }

    // File-local ids: the system message first, then every message in order.
    let mut file_ids: HashMap<MessageId, String> = HashMap::new();
    for (i, message) in messages.iter().enumerate() {
        file_ids.insert(message.id, format!("message-{}", i + 1));
    }
    let in_context: std::collections::HashSet<MessageId> = state.fifo.iter().copied().collect();
    let system_message = MessageSchema {
        id: "message-0".into(),
        role: "system".into(),
        content: Content::text(state.system.clone()),
        created_at: Some(state.created_at),
        ..MessageSchema::default()
    };
    let mut context_messages = vec![system_message];
    let mut history = Vec::new();
    for message in &messages {
        let schema = message_schema(message, &file_ids[&message.id]);
        if in_context.contains(&message.id) {
            context_messages.push(schema);
        } else {
            history.push(schema);
        }
    }
    // In FIFO order (which is chronological for memgpt's own agents).
    let position: HashMap<&MessageId, usize> =
        state.fifo.iter().enumerate().map(|(i, m)| (m, i)).collect();
    let by_file_id: HashMap<&str, MessageId> =
        file_ids.iter().map(|(m, f)| (f.as_str(), *m)).collect();
    context_messages[1..].sort_by_key(|m| {
        by_file_id
            .get(m.id.as_str())
            .and_then(|id| position.get(id))
            .copied()
            .unwrap_or(usize::MAX)
    });
    let in_context_message_ids = context_messages.iter().map(|m| m.id.clone()).collect();

    let blocks: Vec<BlockSchema> = state
        .memory
        .blocks()
        .iter()
        .enumerate()
        .map(|(i, block)| BlockSchema {
            id: format!("block-{i}"),
            label: block.label().to_owned(),
            value: block.value().to_owned(),
            limit: Some(block.limit()),
            description: block.description().map(str::to_owned),
            read_only: block.is_read_only(),
        })
        .collect();

    let registry = FunctionRegistry::linked().ok();
    let tools: Vec<ToolSchema> = state
        .config
        .functions
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let schema = registry.as_ref().and_then(|r| r.get(name)).map(|f| &f.schema);
            ToolSchema {
                id: format!("tool-{i}"),
                name: Some(name.clone()),
                description: schema.map(|s| s.description.clone()),
                tool_type: Some(tool_type(name).to_owned()),
                source_type: Some("json".into()),
                source_code: None,
                json_schema: schema.map(|s| {
                    json!({ "name": s.name, "description": s.description, "parameters": s.parameters })
                }),
                tags: Vec::new(),
            }
        })
        .collect();

    let space = storage.agents.embedding_space().await?;
    let embedding_config = space.as_ref().map(|space| EmbeddingConfig {
        embedding_endpoint_type: "openai".into(),
        embedding_model: space.model.clone(),
        embedding_dim: Some(space.dimension),
    });
    let agent = AgentSchema {
        id: "agent-0".into(),
        name: state.name.clone(),
        system: Some(state.system.clone()),
        agent_type: Some("memgpt_agent".into()),
        description: None,
        llm_config: Some(LlmConfig {
            model: state.config.model.clone(),
            model_endpoint_type: "openai".into(),
            model_endpoint: None,
            context_window: Some(state.config.context_window),
        }),
        embedding_config,
        tool_rules: Vec::new(),
        tags: Vec::new(),
        tool_ids: tools.iter().map(|t| t.id.clone()).collect(),
        block_ids: blocks.iter().map(|b| b.id.clone()).collect(),
        messages: context_messages,
        in_context_message_ids,
        metadata: None,
    };
    let extras = AgentExtras {
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
                text: p.text,
                metadata: p.metadata,
                created_at: p.created_at,
                embedding: p.embedding,
            })
            .collect(),
        embedding_model: space.map(|s| s.model),
    };
    Ok(AgentFile {
        agents: vec![agent],
        blocks,
        tools,
        metadata: [(
            "exported_by".to_owned(),
            format!("memgpt-rs {}", env!("CARGO_PKG_VERSION")),
        )]
        .into_iter()
        .collect(),
        created_at: Some(Utc::now()),
        memgpt: Some(Extension {
            format: 1,
            agents: vec![extras],
        }),
        ..AgentFile::default()
    })
}

/// Letta's tool type for one of memgpt's functions.
fn tool_type(name: &str) -> &'static str {
    match name {
        "send_message"
        | "conversation_search"
        | "conversation_search_date"
        | "archival_memory_insert"
        | "archival_memory_search"
        | "pause_heartbeats" => "letta_core",
        "core_memory_append" | "core_memory_replace" => "letta_memory_core",
        _ => "custom",
    }
}

/// A message as Letta stores it: the envelope memgpt sends the LLM.
fn message_schema(message: &Message, id: &str) -> MessageSchema {
    let chat = message.to_chat();
    MessageSchema {
        id: id.to_owned(),
        role: match chat.role {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
        .to_owned(),
        content: Content::text(chat.content),
        name: chat.name,
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
        created_at: Some(message.created_at),
    }
}
