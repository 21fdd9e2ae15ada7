//! The API's JSON shapes: what the routes return, converted from the core types.
//!
//! These are the wire format (and the OpenAPI schemas); the core types can change without
//! changing them.

use chrono::{DateTime, Utc};
use memgpt_core::agent::{FunctionCallRecord, StopReason};
use memgpt_core::context::ContextStats;
use memgpt_core::ids::{AgentId, BlockId, MessageId, PassageId};
use memgpt_core::memory::MemoryBlock;
use memgpt_core::message::Message;
use memgpt_core::paging::FlushRecord;
use memgpt_core::store::{AgentState, Hit, Passage, SearchPage};
use memgpt_core::{Agent, StepRecord};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value};

/// An agent: configuration, memory and where its main context stands.
#[derive(Debug, Serialize, JsonSchema)]
pub struct AgentView {
    /// Its id.
    #[schemars(with = "String")]
    pub id: AgentId,
    /// Its name.
    pub name: String,
    /// Commits so far (every step, memory edit and archival insert is one).
    pub version: u64,
    /// The chat model ("" = the provider's default).
    pub model: String,
    /// The context window in tokens.
    pub context_window: usize,
    /// The page-replacement policy.
    pub policy: String,
    /// The functions (tools) the agent may call.
    pub tools: Vec<String>,
    /// Which of them the model may call when.
    pub tool_rules: Vec<memgpt_core::rules::ToolRule>,
    /// How a step goes on after a function call (`heartbeat` or `until_reply`).
    pub loop_style: memgpt_core::LoopStyle,
    /// Working context: the memory blocks.
    pub memory: Vec<BlockView>,
    /// Skills: procedural memory, listed in context and loaded by the agent when a task needs
    /// one.
    pub skills: Vec<SkillView>,
    /// The recursive summary of evicted messages.
    pub summary: String,
    /// Messages in the FIFO queue of main context.
    pub queued_messages: usize,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it last committed.
    pub updated_at: DateTime<Utc>,
}

impl From<&AgentState> for AgentView {
    fn from(state: &AgentState) -> Self {
        Self {
            id: state.id,
            name: state.name.clone(),
            version: state.version,
            model: state.config.model.clone(),
            context_window: state.config.context_window,
            policy: state.config.policy.clone(),
            tools: state.config.functions.clone(),
            tool_rules: state.config.tool_rules.clone(),
            loop_style: state.config.loop_style,
            memory: state.memory.blocks().iter().map(BlockView::from).collect(),
            skills: SkillView::all(&state.memory),
            summary: state.summary.text.clone(),
            queued_messages: state.fifo.len(),
            created_at: state.created_at,
            updated_at: state.updated_at,
        }
    }
}

impl From<&Agent> for AgentView {
    fn from(agent: &Agent) -> Self {
        let config = agent.config();
        Self {
            id: agent.id(),
            name: agent.name().to_owned(),
            version: agent.version(),
            model: config.model.clone(),
            context_window: config.context_window,
            policy: config.policy.clone(),
            tools: config.functions.clone(),
            tool_rules: config.tool_rules.clone(),
            loop_style: config.loop_style,
            memory: agent
                .memory()
                .blocks()
                .iter()
                .map(BlockView::from)
                .collect(),
            skills: SkillView::all(agent.memory()),
            summary: agent.summary().text.clone(),
            queued_messages: agent.stats().queue_messages,
            created_at: agent.created_at(),
            updated_at: agent.updated_at(),
        }
    }
}

/// A memory block of working context.
#[derive(Debug, Serialize, JsonSchema)]
pub struct BlockView {
    /// Its label (`persona`, `human`, ...).
    pub label: String,
    /// Its text.
    pub value: String,
    /// Characters used.
    pub chars: usize,
    /// Characters allowed.
    pub limit: usize,
    /// What the block is for, if said.
    pub description: Option<String>,
    /// Whether the agent may edit it.
    pub read_only: bool,
    /// The shared block it is a copy of (`/v1/blocks/{block_id}`), if it is shared.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub block_id: Option<BlockId>,
}

impl From<&MemoryBlock> for BlockView {
    fn from(block: &MemoryBlock) -> Self {
        Self {
            label: block.label().to_owned(),
            value: block.value().to_owned(),
            chars: block.chars(),
            limit: block.limit(),
            description: block.description().map(str::to_owned),
            read_only: block.is_read_only(),
            block_id: block.shared().map(|s| s.id),
        }
    }
}

/// A skill of the agent's (its files are in the agent file export).
#[derive(Debug, Serialize, JsonSchema)]
pub struct SkillView {
    /// Its name.
    pub name: String,
    /// What it is for (from its `SKILL.md`).
    pub description: String,
    /// Its files' paths; empty for a skill known only by its source.
    pub files: Vec<String>,
    /// Where it comes from, if known.
    pub source_url: Option<String>,
    /// The files the agent has loaded into its context.
    pub loaded: Vec<String>,
}

impl SkillView {
    fn all(memory: &memgpt_core::memory::WorkingContext) -> Vec<Self> {
        memory
            .skills()
            .all()
            .iter()
            .map(|skill| Self {
                name: skill.name.clone(),
                description: skill.description.clone(),
                files: skill.files.keys().cloned().collect(),
                source_url: skill.source_url.clone(),
                loaded: skill.loaded.clone(),
            })
            .collect()
    }
}

/// A message of the conversation (user, assistant, function result, heartbeat, alert...).
#[derive(Debug, Serialize, JsonSchema)]
pub struct MessageView {
    /// Its id.
    #[schemars(with = "String")]
    pub id: MessageId,
    /// `user`, `system_alert`, `heartbeat`, `login`, `timer`, `document_upload`, `assistant`,
    /// `function_return` or `function_error`.
    pub kind: String,
    /// The text (the assistant's inner monologue, a function's result...).
    pub text: String,
    /// The assistant's function calls.
    pub function_calls: Vec<CallView>,
    /// For a function's result: the call it answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// The user's or function's name, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// When it was appended.
    pub created_at: DateTime<Utc>,
}

impl From<&Message> for MessageView {
    fn from(message: &Message) -> Self {
        Self {
            id: message.id,
            kind: kind_name(message),
            text: message.text.clone(),
            function_calls: message
                .tool_calls
                .iter()
                .map(|c| CallView {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    arguments: c.arguments.clone(),
                })
                .collect(),
            call_id: message.tool_call_id.clone(),
            name: message.name.clone(),
            created_at: message.created_at,
        }
    }
}

fn kind_name(message: &Message) -> String {
    match serde_json::to_value(message.kind) {
        Ok(Value::String(name)) => name,
        _ => format!("{:?}", message.kind).to_lowercase(),
    }
}

/// A function call the assistant made.
#[derive(Debug, Serialize, JsonSchema)]
pub struct CallView {
    /// The call's id (its result names it).
    pub id: String,
    /// The function.
    pub name: String,
    /// The arguments, as the model wrote them (JSON text).
    pub arguments: String,
}

/// A function call and how it went.
#[derive(Debug, Serialize, JsonSchema)]
pub struct CallRecordView {
    /// The function.
    pub name: String,
    /// The arguments (JSON text).
    pub arguments: String,
    /// Whether it succeeded.
    pub ok: bool,
    /// Its result or error, as the model read it.
    pub output: String,
    /// Whether it asked to continue (a heartbeat).
    pub request_heartbeat: bool,
}

impl From<&FunctionCallRecord> for CallRecordView {
    fn from(record: &FunctionCallRecord) -> Self {
        Self {
            name: record.name.clone(),
            arguments: record.arguments.clone(),
            ok: record.ok,
            output: record.output.clone(),
            request_heartbeat: record.request_heartbeat,
        }
    }
}

/// A flush: messages evicted from main context into recall, folded into the summary.
#[derive(Debug, Serialize, JsonSchema)]
pub struct FlushView {
    /// Messages evicted.
    pub evicted_messages: usize,
    /// Their tokens.
    pub evicted_tokens: usize,
    /// Whether the summary was rewritten.
    pub summary_updated: bool,
    /// Main-context tokens before.
    pub tokens_before: usize,
    /// And after.
    pub tokens_after: usize,
}

impl From<&FlushRecord> for FlushView {
    fn from(flush: &FlushRecord) -> Self {
        Self {
            evicted_messages: flush.evicted_messages,
            evicted_tokens: flush.evicted_tokens,
            summary_updated: flush.summary_updated,
            tokens_before: flush.tokens_before,
            tokens_after: flush.tokens_after,
        }
    }
}

/// Main context by section, in tokens (window, system, tools, memory, summary, queue, total,
/// and the fraction of the window in use).
pub type ContextView = ContextStats;

/// What one step did: the committed record.
#[derive(Debug, Serialize, JsonSchema)]
pub struct StepView {
    /// The event's kind (`user_message`, `system_alert`, `login`, `timer`).
    pub event: String,
    /// Every message the step appended, in order.
    pub messages: Vec<MessageView>,
    /// What the agent said to the user (`send_message`), in order.
    pub replies: Vec<String>,
    /// Every function call.
    pub function_calls: Vec<CallRecordView>,
    /// LLM calls.
    pub llm_calls: usize,
    /// Prompt tokens over those calls.
    pub prompt_tokens: u64,
    /// Completion tokens over those calls.
    pub completion_tokens: u64,
    /// Of the prompt tokens, those the provider read from its prompt cache.
    pub cached_prompt_tokens: u64,
    /// Whether the memory-pressure warning was given.
    pub pressure_warning: bool,
    /// Flushes.
    pub flushes: Vec<FlushView>,
    /// Why the step ended: `end_turn`, `no_function_call`, `chain_limit`, `timers_paused`,
    /// `provider_error` or `awaiting_approval` (a call waits for a person: see
    /// `pending_approval`).
    pub stop_reason: String,
    /// For `provider_error`, what kind of failure it was; for `chain_limit`, the limit; for
    /// `awaiting_approval`, the id of the call to approve or deny.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_detail: Option<String>,
    /// With `awaiting_approval`: the call to approve or deny.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending_approval: Option<PendingCallView>,
    /// Main context after the step.
    pub context: ContextView,
    /// The agent's version after the step.
    pub version: u64,
    /// Labels of the shared blocks other writers had changed since the agent's last step:
    /// the step started from their new text.
    pub shared_blocks_changed: Vec<String>,
}

/// A function call waiting for a person's approval: send a message of `type` `approval` with
/// its `call_id` and `approve` (`text` says why, with a denial).
#[derive(Debug, Serialize, JsonSchema)]
pub struct PendingCallView {
    /// The call's id.
    pub call_id: String,
    /// The function it calls.
    pub function: String,
    /// Its JSON arguments as the model wrote them.
    pub arguments: String,
}

impl StepView {
    /// The view of `record`, which left the agent at `version`.
    pub fn new(record: &StepRecord, version: u64) -> Self {
        let (stop_reason, stop_detail) = match &record.stop_reason {
            StopReason::EndTurn => ("end_turn", None),
            StopReason::NoFunctionCall => ("no_function_call", None),
            StopReason::ChainLimit { limit } => ("chain_limit", Some(limit.to_string())),
            StopReason::TimersPaused => ("timers_paused", None),
            StopReason::ProviderError { failure, .. } => {
                ("provider_error", Some(failure.to_string()))
            }
            StopReason::AwaitingApproval { call_id, .. } => {
                ("awaiting_approval", Some(call_id.clone()))
            }
            _ => ("other", Some(format!("{:?}", record.stop_reason))),
        };
        Self {
            event: record.event.clone(),
            messages: record.messages.iter().map(MessageView::from).collect(),
            replies: record.replies.clone(),
            function_calls: record
                .function_calls
                .iter()
                .map(CallRecordView::from)
                .collect(),
            llm_calls: record.llm_calls,
            prompt_tokens: record.usage.prompt_tokens,
            completion_tokens: record.usage.completion_tokens,
            cached_prompt_tokens: record.usage.cached_prompt_tokens,
            pressure_warning: record.pressure_warning,
            flushes: record.flushes.iter().map(FlushView::from).collect(),
            stop_reason: stop_reason.to_owned(),
            stop_detail,
            pending_approval: match &record.stop_reason {
                StopReason::AwaitingApproval {
                    call_id,
                    function,
                    arguments,
                } => Some(PendingCallView {
                    call_id: call_id.clone(),
                    function: function.clone(),
                    arguments: arguments.clone(),
                }),
                _ => None,
            },
            context: record.context,
            version,
            shared_blocks_changed: record.shared_blocks_changed.clone(),
        }
    }
}

/// An archival passage.
#[derive(Debug, Serialize, JsonSchema)]
pub struct PassageView {
    /// Its id.
    #[schemars(with = "String")]
    pub id: PassageId,
    /// Its text.
    pub text: String,
    /// Its tags.
    pub tags: Vec<String>,
    /// Its metadata (source, chunk position, tags...).
    pub metadata: Map<String, Value>,
    /// When it was stored.
    pub created_at: DateTime<Utc>,
    /// When the fact became true, where known (a newer version holds from when it replaced the
    /// old one); absent: for as long as memory can tell.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub valid_from: Option<DateTime<Utc>>,
    /// When it stopped (or stops) being a current fact: superseded, forgotten, or the end of its
    /// time to live; absent: current until retired.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub valid_to: Option<DateTime<Utc>>,
    /// The passage that replaced it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub superseded_by: Option<PassageId>,
    /// Why it was retired.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retired_reason: Option<String>,
}

impl From<&Passage> for PassageView {
    fn from(p: &Passage) -> Self {
        Self {
            id: p.id,
            text: p.text.clone(),
            tags: p.tags(),
            metadata: p.metadata.clone(),
            created_at: p.created_at,
            valid_from: p.valid_from,
            valid_to: p.valid_to,
            superseded_by: p.superseded_by,
            retired_reason: p.retired_reason.clone(),
        }
    }
}

/// One page of results.
#[derive(Debug, Serialize, JsonSchema)]
pub struct PageView<T> {
    /// The results on this page, best first (oldest first for listings).
    pub items: Vec<ScoredView<T>>,
    /// The page number, from 0.
    pub page: usize,
    /// Results per page.
    pub size: usize,
    /// Results on all pages together.
    pub total: usize,
}

/// A result and its score.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ScoredView<T> {
    /// Relevance (higher is better; 0 in listings).
    pub score: f32,
    /// The result.
    #[serde(flatten)]
    pub item: T,
}

impl<T> PageView<T> {
    /// `page` with each item converted by `view`.
    pub fn new<S>(page: &SearchPage<S>, view: impl Fn(&S) -> T) -> Self {
        Self {
            items: page
                .hits
                .iter()
                .map(|Hit { item, score }| ScoredView {
                    score: *score,
                    item: view(item),
                })
                .collect(),
            page: page.page.number,
            size: page.page.size,
            total: page.total,
        }
    }
}
