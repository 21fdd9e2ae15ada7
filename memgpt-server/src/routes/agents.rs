//! Agents: create, list, get, update, delete, and the compiled context window.

use aide::axum::ApiRouter;
use aide::axum::routing::{get, post};
use axum::Json;
use axum::extract::{Path, State};
use memgpt_core::LoopStyle;
use memgpt_core::ids::AgentId;
use memgpt_core::llm::Role;
use memgpt_core::memory::MemoryBlock;
use memgpt_core::rules::ToolRule;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::params::AgentPath;
use crate::auth::Caller;
use crate::body::Body;
use crate::error::{ApiError, ApiResult};
use crate::reply::{Created, NoContent};
use crate::state::AppState;
use crate::views::{AgentView, ContextView};

pub(super) fn routes() -> ApiRouter<AppState> {
    ApiRouter::new()
        .api_route("/v1/agents", post(create).get(list))
        .api_route(
            "/v1/agents/{agent_id}",
            get(show).patch(update).delete(remove),
        )
        .api_route("/v1/agents/{agent_id}/context", get(context))
}

/// A new agent.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CreateAgent {
    /// Its name (1-200 characters, unique among the tenant's agents).
    #[schemars(
        length(min = 1, max = 200),
        pattern(crate::routes::document::NOT_BLANK)
    )]
    name: String,
    /// The `persona` block: who the agent is.
    persona: Option<String>,
    /// The `human` block: what it knows about the user.
    human: Option<String>,
    /// Replaces the system instructions (default: MemGPT's).
    system: Option<String>,
    /// The chat model (default: the server's).
    model: Option<String>,
    /// The context window in tokens (default: the model's; 512 to 100,000,000).
    #[schemars(range(min = 512, max = 100_000_000))]
    context_window: Option<usize>,
    /// The page-replacement policy by name (default `paper`).
    policy: Option<String>,
    /// Functions (tools) offered besides the base ones, by registered name.
    #[serde(default)]
    tools: Vec<String>,
    /// Whether the base functions (`send_message`, memory editing and search) are offered
    /// (default `true`).
    include_base_tools: Option<bool>,
    /// The character limit of each memory block (default 2,000).
    block_limit: Option<usize>,
    /// More memory blocks besides `persona` and `human`.
    #[serde(default)]
    blocks: Vec<NewBlock>,
    /// Which functions the model may call when (run first, terminal, children, call limits...).
    #[serde(default)]
    tool_rules: Vec<ToolRule>,
    /// How a step goes on after a function call: `heartbeat` (the paper's `request_heartbeat`
    /// flag, the default) or `until_reply` (Letta-v1-style: no flag; the step goes on until
    /// `send_message`).
    loop_style: Option<LoopStyle>,
}

/// A memory block to create.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NewBlock {
    /// Its label (unique among the agent's blocks).
    #[schemars(length(min = 1), pattern(crate::routes::document::NOT_BLANK))]
    label: String,
    /// Its text.
    value: String,
    /// Its character limit (default: the agent's `block_limit`).
    limit: Option<usize>,
    /// What it is for.
    description: Option<String>,
    /// Whether the agent may not edit it.
    #[serde(default)]
    read_only: bool,
}

/// A context window from a request: 512 to 100,000,000 tokens.
fn check_window(tokens: usize) -> ApiResult<usize> {
    if (512..=100_000_000).contains(&tokens) {
        Ok(tokens)
    } else {
        Err(ApiError::invalid(format!(
            "a context window of {tokens} tokens is out of range: use 512 to 100,000,000"
        )))
    }
}

pub(crate) fn check_name(name: &str) -> ApiResult<&str> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 200 {
        return Err(ApiError::invalid("an agent's name has 1 to 200 characters"));
    }
    Ok(name)
}

/// Creates an agent owned by the caller's tenant.
async fn create(
    State(state): State<AppState>,
    caller: Caller,
    Body(request): Body<CreateAgent>,
) -> ApiResult<Created<AgentView>> {
    let name = check_name(&request.name)?.to_owned();
    let _naming = state.naming.lock().await;
    name_is_free(&state, caller.tenant, &name, None).await?;
    let id = AgentId::new();
    let mut builder = state.hub.builder().id(id).name(name);
    if let Some(limit) = request.block_limit {
        builder = builder.block_limit(limit);
    }
    if let Some(persona) = request.persona {
        builder = builder.persona(persona);
    }
    if let Some(human) = request.human {
        builder = builder.human(human);
    }
    if let Some(system) = request.system {
        builder = builder.system_prompt(system);
    }
    if let Some(model) = request.model {
        builder = builder.model(model);
    }
    if let Some(window) = request.context_window {
        builder = builder.context_window(check_window(window)?);
    }
    if let Some(policy) = request.policy {
        builder = builder.policy_named(policy);
    }
    if request.include_base_tools == Some(false) {
        builder = builder.functions(Vec::<String>::new());
    }
    for tool in request.tools {
        builder = builder.function(tool);
    }
    builder = builder.tool_rules(request.tool_rules);
    if let Some(style) = request.loop_style {
        builder = builder.loop_style(style);
    }
    for block in request.blocks {
        let mut b = MemoryBlock::new(block.label, block.value);
        if let Some(limit) = block.limit.or(request.block_limit) {
            b = b.with_limit(limit);
        }
        if let Some(description) = block.description {
            b = b.with_description(description);
        }
        if block.read_only {
            b = b.read_only();
        }
        builder = builder.block(b);
    }
    // Owner first: an agent never exists without one. A failed creation releases the claim.
    state.tenants.claim_agent(id, caller.tenant).await?;
    match builder.build().await {
        Ok(agent) => {
            let view = AgentView::from(&agent);
            state.hub.adopt(agent).await;
            Ok(Created(view))
        }
        Err(e) => {
            if let Err(release) = state.tenants.release_agent(id).await {
                tracing::warn!(agent = %id, error = %release, "could not release the claim of an agent that was not created");
            }
            Err(e.into())
        }
    }
}

/// Refuses a name another agent of `tenant` has (`409 already_exists`); `except` is the agent
/// being renamed. Callers hold [`ServerState::naming`](crate::state::ServerState) until the
/// name is stored.
pub(crate) async fn name_is_free(
    state: &AppState,
    tenant: crate::tenants::TenantId,
    name: &str,
    except: Option<AgentId>,
) -> ApiResult<()> {
    for id in state.hub.storage().agents.agents_named(name).await? {
        if Some(id) == except {
            continue;
        }
        if state.tenants.owner(id).await? == Some(tenant) {
            return Err(ApiError::new(
                crate::error::ErrorCode::AlreadyExists,
                format!(
                    "an agent named `{name}` exists already (agent {id}): names are unique per tenant"
                ),
            ));
        }
    }
    Ok(())
}

/// Agents.
#[derive(Debug, Serialize, JsonSchema)]
struct Agents {
    /// The tenant's agents, oldest first.
    agents: Vec<AgentView>,
}

/// Lists the caller's agents.
async fn list(State(state): State<AppState>, caller: Caller) -> ApiResult<Json<Agents>> {
    let ids = state.tenants.agents_of(caller.tenant).await?;
    let mut agents = Vec::with_capacity(ids.len());
    for id in ids {
        // A claim whose creation never finished (a crash in between) names no agent.
        if let Some(agent) = state.hub.storage().agents.load_agent(id).await? {
            agents.push(AgentView::from(&agent));
        }
    }
    Ok(Json(Agents { agents }))
}

/// An agent's stored state.
async fn show(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<AgentPath>,
) -> ApiResult<Json<AgentView>> {
    Ok(Json(AgentView::from(&path.stored(&state, caller).await?)))
}

/// Changes to an agent; what is left out stays as it is.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct UpdateAgent {
    /// A new name (1-200 characters, unique among the tenant's agents).
    #[schemars(
        length(min = 1, max = 200),
        pattern(crate::routes::document::NOT_BLANK)
    )]
    name: Option<String>,
    /// A new chat model.
    model: Option<String>,
    /// A new context window in tokens (512 to 100,000,000).
    #[schemars(range(min = 512, max = 100_000_000))]
    context_window: Option<usize>,
    /// A new page-replacement policy by name.
    policy: Option<String>,
    /// The functions (tools) offered, replacing the current list (base functions included).
    tools: Option<Vec<String>>,
    /// The longest chain of LLM calls in one step.
    max_chain_length: Option<usize>,
    /// The tool rules, replacing the current ones.
    tool_rules: Option<Vec<ToolRule>>,
    /// A new loop style (`heartbeat` or `until_reply`); an agent on the default system
    /// instructions gets the new style's.
    loop_style: Option<LoopStyle>,
}

/// Updates an agent's name and configuration, checked as at creation (`422 unknown_tool`,
/// `unknown_policy`, `invalid_config`; nothing changes then). Memory and history stay.
async fn update(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<AgentPath>,
    Body(request): Body<UpdateAgent>,
) -> ApiResult<Json<AgentView>> {
    let mut agent = path.live(&state, caller).await?;
    let mut builder = state.hub.builder();
    let mut _naming = None;
    if let Some(name) = &request.name {
        _naming = Some(state.naming.lock().await);
        name_is_free(&state, caller.tenant, name, Some(agent.id())).await?;
        builder = builder.name(check_name(name)?);
    }
    if let Some(model) = request.model {
        builder = builder.model(model);
    }
    if let Some(window) = request.context_window {
        builder = builder.context_window(check_window(window)?);
    }
    if let Some(policy) = request.policy {
        builder = builder.policy_named(policy);
    }
    if let Some(tools) = request.tools {
        builder = builder.functions(tools);
    }
    if let Some(calls) = request.max_chain_length {
        builder = builder.max_chain_length(calls);
    }
    if let Some(rules) = request.tool_rules {
        builder = builder.tool_rules(rules);
    }
    if let Some(style) = request.loop_style {
        builder = builder.loop_style(style);
    }
    // The locked agent is replaced by the reconfigured one: the next request uses it.
    *agent = builder.reconfigure(agent.id()).await?;
    Ok(Json(AgentView::from(&*agent)))
}

/// Deletes an agent and everything it remembers.
async fn remove(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<AgentPath>,
) -> ApiResult<NoContent> {
    let id = path.owned(&state, caller).await?;
    // Waits for a step in progress; the agent is gone before its owner record.
    let agent = state.hub.lock(id).await;
    state.hub.storage().agents.delete_agent(id).await?;
    state.hub.forget(id);
    drop(agent);
    if let Err(e) = state.timers.remove_agent(id).await {
        // Harmless: a timer of a deleted agent removes itself when it fires.
        tracing::warn!(agent = %id, error = %e, "could not remove a deleted agent's timers");
    }
    state.tenants.release_agent(id).await?;
    Ok(NoContent)
}

/// The context window exactly as the LLM receives it.
#[derive(Debug, Serialize, JsonSchema)]
struct ContextWindow {
    /// Tokens per section.
    tokens: ContextView,
    /// The messages of the prompt in order: the system message (instructions, memory blocks,
    /// the memory header and the recursive summary), then the FIFO queue.
    messages: Vec<PromptMessage>,
    /// The functions offered, with their JSON schemas.
    functions: Vec<FunctionView>,
    /// The eviction policy's view: where it warns and flushes, what a flush would evict now.
    paging: PagingView,
    /// The recursive summary (of every message evicted so far).
    summary: SummaryView,
}

/// The eviction policy's view of the context.
#[derive(Debug, Serialize, JsonSchema)]
struct PagingView {
    /// The policy's name.
    policy: String,
    /// The fewest prompt tokens at which it warns the model of memory pressure (absent: it
    /// does not warn before flushing).
    warn_tokens: Option<usize>,
    /// The fewest prompt tokens at which it flushes.
    flush_tokens: Option<usize>,
    /// Queued messages a flush would evict now (their prompt messages carry
    /// `queued.evict_next`).
    evict_messages: usize,
    /// Tokens they hold.
    evict_tokens: usize,
}

/// What the policy knows of one queued message.
#[derive(Debug, Serialize, JsonSchema)]
struct QueuedView {
    /// The message's id (in recall storage too).
    #[schemars(with = "String")]
    id: memgpt_core::ids::MessageId,
    /// Its kind (`user`, `assistant`, `function_return`, ...).
    kind: String,
    /// When it was created.
    created_at: chrono::DateTime<chrono::Utc>,
    /// Logical time of its last use (appended, retrieved or referenced); larger is more recent.
    last_used: u64,
    /// How many times it was used.
    uses: u32,
    /// Similarity to the latest turns, as measured before the last flush (policies that ask
    /// for it, agents with an embedder).
    #[serde(skip_serializing_if = "Option::is_none")]
    relevance: Option<f32>,
    /// The policy's own signals of it, by name: `attention` (what the model attended to, under
    /// the `attention` policy), `salience` (how much it states, under the `salience` policy),
    /// or whatever a custom policy keeps; empty for a policy that keeps none.
    signals: std::collections::BTreeMap<String, f32>,
    /// Whether it may not be evicted.
    pinned: bool,
    /// Whether a flush now would evict it.
    evict_next: bool,
}

/// The recursive summary.
#[derive(Debug, Serialize, JsonSchema)]
struct SummaryView {
    /// Its text (empty before the first flush).
    text: String,
    /// How many messages it covers.
    evicted_messages: u64,
    /// When it was last rewritten.
    updated_at: Option<chrono::DateTime<chrono::Utc>>,
    /// The latest flushes, oldest first: what each evicted (list the messages created from
    /// `evicted_from` until `evicted_until` to see them) and the summary it left.
    history: Vec<SummaryRevisionView>,
}

/// One flush in the summary's history.
#[derive(Debug, Serialize, JsonSchema)]
struct SummaryRevisionView {
    /// When it happened.
    at: chrono::DateTime<chrono::Utc>,
    /// Messages evicted.
    evicted_messages: u64,
    /// Their prompt tokens.
    evicted_tokens: u64,
    /// Creation time of the oldest evicted message.
    evicted_from: chrono::DateTime<chrono::Utc>,
    /// Just after the creation time of the newest evicted message (exclusive, as the
    /// messages listing's `end`).
    evicted_until: chrono::DateTime<chrono::Utc>,
    /// Whether a provider's context-overflow error forced it.
    forced: bool,
    /// Whether the summarizer rewrote the summary (false: it failed and the text was kept).
    summary_updated: bool,
    /// The summary after the flush.
    text: String,
}

/// One message of the prompt.
#[derive(Debug, Serialize, JsonSchema)]
struct PromptMessage {
    /// Which part of main context it is: `system` (instructions, memory blocks and header),
    /// `summary` (the recursive summary, after the first flush) or `queue` (the FIFO queue).
    section: &'static str,
    /// `system`, `user`, `assistant` or `tool`.
    role: String,
    /// Its text.
    content: String,
    /// Function calls (assistant messages).
    function_calls: Vec<crate::views::CallView>,
    /// Its tokens.
    tokens: usize,
    /// For the FIFO queue's messages: what the eviction policy knows of it.
    #[serde(skip_serializing_if = "Option::is_none")]
    queued: Option<QueuedView>,
}

/// A function as offered to the model.
#[derive(Debug, Serialize, JsonSchema)]
struct FunctionView {
    /// Its name.
    name: String,
    /// Its description.
    description: String,
    /// Its parameters' JSON schema.
    parameters: serde_json::Value,
}

/// The compiled context window.
async fn context(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<AgentPath>,
) -> ApiResult<Json<ContextWindow>> {
    let mut agent = path.live(&state, caller).await?;
    // Commits made by other processes show too.
    agent.refresh().await?;
    let request = agent.request();
    let counter = agent.context().counter().clone();
    let preview = agent.paging_preview();
    // The prompt is the system message, then one message per queued entry.
    let first_queued = request.messages.len().saturating_sub(preview.entries.len());
    let queued = |i: usize| -> Option<QueuedView> {
        let index = i.checked_sub(first_queued)?;
        let e = preview.entries.get(index)?;
        Some(QueuedView {
            id: e.id,
            kind: e.kind.as_str().to_owned(),
            created_at: e.created_at,
            last_used: e.last_used,
            uses: e.uses,
            relevance: e.relevance,
            signals: preview
                .signals
                .iter()
                .cloned()
                .zip(e.signals.iter().copied())
                .collect(),
            pinned: e.pinned,
            evict_next: preview.evict_next.binary_search(&index).is_ok(),
        })
    };
    let messages = request
        .messages
        .iter()
        .enumerate()
        .map(|(i, m)| PromptMessage {
            section: match i {
                0 => "system",
                i if i < first_queued => "summary",
                _ => "queue",
            },
            role: match m.role {
                Role::System => "system",
                Role::User => "user",
                Role::Assistant => "assistant",
                Role::Tool => "tool",
            }
            .to_owned(),
            content: m.content.clone(),
            function_calls: m
                .tool_calls
                .iter()
                .map(|c| crate::views::CallView {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    arguments: c.arguments.clone(),
                })
                .collect(),
            tokens: counter.count_message(m),
            queued: queued(i),
        })
        .collect();
    let functions = request
        .tools
        .iter()
        .map(|t| FunctionView {
            name: t.name.clone(),
            description: t.description.clone(),
            parameters: t.parameters.clone(),
        })
        .collect();
    let summary = agent.summary();
    Ok(Json(ContextWindow {
        tokens: agent.stats(),
        messages,
        functions,
        paging: PagingView {
            policy: preview.policy.clone(),
            warn_tokens: preview.lines.warn_tokens,
            flush_tokens: preview.lines.flush_tokens,
            evict_messages: preview.evict_next.len(),
            evict_tokens: preview.evict_tokens,
        },
        summary: SummaryView {
            text: summary.text.clone(),
            evicted_messages: summary.evicted_messages,
            updated_at: summary.updated_at,
            history: summary
                .history
                .iter()
                .map(|r| SummaryRevisionView {
                    at: r.at,
                    evicted_messages: r.evicted_messages,
                    evicted_tokens: r.evicted_tokens,
                    evicted_from: r.evicted_from,
                    evicted_until: r.evicted_until,
                    forced: r.forced,
                    summary_updated: r.summary_updated,
                    text: r.text.clone(),
                })
                .collect(),
        },
    }))
}
