//! Writing an agent from a store into an [`AgentFile`].

use std::collections::{HashMap, HashSet};
use std::future::Future;

use chrono::Utc;
use serde_json::json;

use super::AgentFileError;
use super::schema::*;
use crate::function::FunctionRegistry;
use crate::ids::{AgentId, MessageId};
use crate::llm::Role;
use crate::message::{Message, MessageKind};
use crate::store::{Page, RecallQuery, SearchPage, Storage, StoreError};

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

    // Every recall message and every passage, oldest first.
    let messages = all_pages(|page| {
        let query = RecallQuery::kinds(MessageKind::ALL, page);
        async move { storage.recall.list_messages(id, &query).await }
    })
    .await?;
    let passages = all_pages(|page| storage.archival.list_passages(id, page)).await?;

    // File-local ids: the system message first, then every message in order.
    let file_ids: HashMap<MessageId, String> = messages
        .iter()
        .enumerate()
        .map(|(i, message)| (message.id, format!("message-{}", i + 1)))
        .collect();
    let schema_of = |message: &Message| message_schema(message, &file_ids[&message.id]);
    let system_message = MessageSchema {
        id: "message-0".into(),
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
        agent_type: Some(
            match state.config.loop_style {
                crate::config::LoopStyle::Heartbeat => "memgpt_agent",
                crate::config::LoopStyle::UntilReply => "letta_v1_agent",
            }
            .into(),
        ),
        description: None,
        llm_config: Some(LlmConfig {
            model: state.config.model.clone(),
            model_endpoint_type: "openai".into(),
            model_endpoint: None,
            context_window: Some(state.config.context_window),
        }),
        embedding_config,
        tool_rules: state
            .config
            .tool_rules
            .iter()
            .map(crate::rules::ToolRule::to_letta)
            .collect(),
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
