//! Shared memory blocks: a tenant's blocks, each attachable to several of its agents. An edit
//! is one transaction on the block (applied to its current text); the agents holding it see
//! it on their next step. Limits and the read-only flag hold for every writer.

use aide::axum::ApiRouter;
use aide::axum::routing::{get, post};
use axum::Json;
use axum::extract::{Path, State};
use chrono::{DateTime, Utc};
use memgpt_core::MemoryBlock;
use memgpt_core::ids::{AgentId, BlockId};
use memgpt_core::memory::MemoryError;
use memgpt_core::store::{BlockUpdate, SharedBlock};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::params::AgentPath;
use crate::auth::Caller;
use crate::body::Body;
use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::hub::LiveAgent;
use crate::reply::{Created, NoContent};
use crate::state::AppState;
use crate::views::BlockView;

pub(super) fn routes() -> ApiRouter<AppState> {
    ApiRouter::new()
        .api_route("/v1/blocks", post(create).get(list))
        .api_route(
            "/v1/blocks/{block_id}",
            get(show).patch(update).delete(remove),
        )
        .api_route("/v1/blocks/{block_id}/append", post(append))
        .api_route(
            "/v1/agents/{agent_id}/blocks/{block_id}",
            post(attach).delete(detach),
        )
}

/// A shared block as the API shows it.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct SharedBlockView {
    /// Its id.
    #[schemars(with = "String")]
    pub(crate) id: BlockId,
    /// Its label, text, limit, description and read-only flag.
    #[serde(flatten)]
    pub(crate) block: BlockView,
    /// Bumped by every edit (1 when created).
    pub(crate) version: u64,
    /// When it was created.
    pub(crate) created_at: DateTime<Utc>,
    /// When it was last edited.
    pub(crate) updated_at: DateTime<Utc>,
    /// The agent that made the last edit; absent for a person (the API, the CLI).
    #[schemars(with = "Option<String>")]
    pub(crate) updated_by: Option<AgentId>,
    /// The agents holding it, oldest first.
    #[schemars(with = "Vec<String>")]
    pub(crate) agents: Vec<AgentId>,
}

impl SharedBlockView {
    fn new(block: &SharedBlock, agents: Vec<AgentId>) -> Self {
        Self {
            id: block.id,
            block: BlockView::from(&block.attached()),
            version: block.version,
            created_at: block.created_at,
            updated_at: block.updated_at,
            updated_by: block.updated_by,
            agents,
        }
    }
}

/// The caller's shared blocks.
#[derive(Debug, Serialize, JsonSchema)]
struct SharedBlocks {
    /// Oldest first.
    blocks: Vec<SharedBlockView>,
}

/// A new shared block.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CreateBlock {
    /// Its label, as the agents' prompts show it (`organization`, `project`...).
    #[schemars(pattern(crate::routes::document::NOT_BLANK))]
    label: String,
    /// Its first text.
    #[serde(default)]
    value: String,
    /// Characters allowed (default 2,000).
    limit: Option<usize>,
    /// What the block is for, shown to the agents.
    description: Option<String>,
    /// Whether no writer may change its text (default false).
    #[serde(default)]
    read_only: bool,
}

/// Creates a shared block of the caller's (`422 block_over_limit` if the text is over the
/// limit); attach it to agents with `POST /v1/agents/{agent_id}/blocks/{block_id}`.
async fn create(
    State(state): State<AppState>,
    caller: Caller,
    Body(request): Body<CreateBlock>,
) -> ApiResult<Created<SharedBlockView>> {
    let label = request.label.trim();
    if label.is_empty() {
        return Err(ApiError::new(
            ErrorCode::InvalidInput,
            "a block needs a label",
        ));
    }
    let mut block = MemoryBlock::new(label, "");
    if let Some(limit) = request.limit {
        block = block.with_limit(limit);
    }
    block
        .set(request.value)
        .map_err(memgpt_core::Error::Memory)?;
    block.set_description(request.description);
    block.set_read_only(request.read_only);
    let shared = SharedBlock::new(block, Utc::now()).in_scope(caller.tenant.to_string());
    state.hub.storage().blocks.create_block(&shared).await?;
    Ok(Created(SharedBlockView::new(&shared, Vec::new())))
}

/// The caller's shared blocks, oldest first.
async fn list(State(state): State<AppState>, caller: Caller) -> ApiResult<Json<SharedBlocks>> {
    let blocks = &state.hub.storage().blocks;
    let mut views = Vec::new();
    for block in blocks.list_blocks(Some(&caller.tenant.to_string())).await? {
        let agents = blocks.block_agents(block.id).await?;
        views.push(SharedBlockView::new(&block, agents));
    }
    Ok(Json(SharedBlocks { blocks: views }))
}

/// `/v1/blocks/{block_id}`.
#[derive(Debug, Deserialize, JsonSchema)]
struct SharedBlockPath {
    /// The block's id.
    block_id: String,
}

impl SharedBlockPath {
    /// The caller's block: `404` if it is not theirs (or does not exist).
    async fn owned(&self, state: &AppState, caller: Caller) -> ApiResult<SharedBlock> {
        owned_block(state, caller, &self.block_id).await
    }
}

/// The caller's block `id`: `404` if it is not theirs (or does not exist, or is malformed).
async fn owned_block(state: &AppState, caller: Caller, id: &str) -> ApiResult<SharedBlock> {
    let not_found = || ApiError::not_found(format_args!("shared block {id}"));
    let id: BlockId = id.parse().map_err(|_| not_found())?;
    let block = state
        .hub
        .storage()
        .blocks
        .get_blocks(&[id])
        .await?
        .pop()
        .ok_or_else(not_found)?;
    if block.scope.as_deref() != Some(caller.tenant.to_string().as_str()) {
        return Err(not_found());
    }
    Ok(block)
}

/// One shared block, with the agents holding it.
async fn show(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<SharedBlockPath>,
) -> ApiResult<Json<SharedBlockView>> {
    let block = path.owned(&state, caller).await?;
    let agents = state.hub.storage().blocks.block_agents(block.id).await?;
    Ok(Json(SharedBlockView::new(&block, agents)))
}

/// Changes to a shared block; fields left out stay as they are.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct UpdateBlock {
    /// The whole new text (at most the limit; refused while read-only).
    value: Option<String>,
    /// The new character limit (at least the current text's length).
    limit: Option<usize>,
    /// The new description (an empty one removes it).
    description: Option<String>,
    /// Makes the block read-only for every writer, or writable again.
    read_only: Option<bool>,
    /// Apply only if the block is still at this version (`409` with its current text if
    /// another writer changed it): a rewrite of what you read never erases another's edit.
    based_on_version: Option<u64>,
}

/// Changes a shared block in one transaction (`422` over the limit or while read-only, `409`
/// if `based_on_version` is stale). The agents holding it see it on their next step.
async fn update(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<SharedBlockPath>,
    Body(request): Body<UpdateBlock>,
) -> ApiResult<Json<SharedBlockView>> {
    let block = path.owned(&state, caller).await?;
    let edit = |b: &mut MemoryBlock| -> Result<(), MemoryError> {
        // The flags first: making a block writable lets the same request change its text.
        if let Some(read_only) = request.read_only.filter(|r| !r) {
            b.set_read_only(read_only);
        }
        if let Some(limit) = request.limit {
            b.set_limit(limit)?;
        }
        if let Some(value) = &request.value {
            b.set(value.clone())?;
        }
        if let Some(description) = &request.description {
            b.set_description(Some(description.clone()).filter(|d| !d.is_empty()));
        }
        if request.read_only == Some(true) {
            b.set_read_only(true);
        }
        Ok(())
    };
    let mut update = BlockUpdate::new(&edit, Utc::now());
    if let Some(version) = request.based_on_version {
        update = update.based_on(version);
    }
    edited(&state, block.id, &update).await
}

/// Text to add to a shared block.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AppendText {
    /// Added on a new line of the block's current text (the block must stay within its limit).
    text: String,
}

/// Appends to a shared block's current text (`422` over the limit or while read-only).
async fn append(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<SharedBlockPath>,
    Body(request): Body<AppendText>,
) -> ApiResult<Json<SharedBlockView>> {
    let block = path.owned(&state, caller).await?;
    let edit = |b: &mut MemoryBlock| b.append(&request.text);
    edited(&state, block.id, &BlockUpdate::new(&edit, Utc::now())).await
}

/// Applies `update` to block `id` and shows the result.
async fn edited(
    state: &AppState,
    id: BlockId,
    update: &BlockUpdate<'_>,
) -> ApiResult<Json<SharedBlockView>> {
    let blocks = &state.hub.storage().blocks;
    let block = blocks.update_block(id, update).await?;
    let agents = blocks.block_agents(id).await?;
    Ok(Json(SharedBlockView::new(&block, agents)))
}

/// Deletes a shared block no agent holds (`409` while agents hold it: detach it first).
async fn remove(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<SharedBlockPath>,
) -> ApiResult<NoContent> {
    let block = path.owned(&state, caller).await?;
    state.hub.storage().blocks.delete_block(block.id).await?;
    Ok(NoContent)
}

/// `/v1/agents/{agent_id}/blocks/{block_id}`.
#[derive(Debug, Deserialize, JsonSchema)]
struct AttachmentPath {
    /// The agent.
    agent_id: String,
    /// The shared block.
    block_id: String,
}

impl AttachmentPath {
    /// The caller's block and agent (locked for the request): `404` if either is not theirs.
    async fn resolve(
        &self,
        state: &AppState,
        caller: Caller,
    ) -> ApiResult<(SharedBlock, LiveAgent)> {
        let block = owned_block(state, caller, &self.block_id).await?;
        let agent = AgentPath {
            agent_id: self.agent_id.clone(),
        }
        .live(state, caller)
        .await?;
        Ok((block, agent))
    }
}

/// The agent's memory blocks after an attachment changed.
#[derive(Debug, Serialize, JsonSchema)]
struct AgentBlocks {
    /// Every memory block of the agent, in prompt order.
    blocks: Vec<BlockView>,
}

impl AgentBlocks {
    fn of(agent: &memgpt_core::Agent) -> Self {
        Self {
            blocks: agent
                .memory()
                .blocks()
                .iter()
                .map(BlockView::from)
                .collect(),
        }
    }
}

/// Attaches one of the caller's shared blocks to one of the caller's agents (`409` if the
/// agent has a block of that label already): from its next step on, its prompt shows it.
async fn attach(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<AttachmentPath>,
) -> ApiResult<Json<AgentBlocks>> {
    let (block, mut agent) = path.resolve(&state, caller).await?;
    agent.attach_block(block.id).await?;
    Ok(Json(AgentBlocks::of(&agent)))
}

/// Detaches a shared block from an agent (the block stays, for the agents still holding it).
async fn detach(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<AttachmentPath>,
) -> ApiResult<Json<AgentBlocks>> {
    let (block, mut agent) = path.resolve(&state, caller).await?;
    let label = agent
        .memory()
        .blocks()
        .iter()
        .find(|b| b.shared().is_some_and(|s| s.id == block.id))
        .map(|b| b.label().to_owned())
        .ok_or_else(|| {
            ApiError::not_found(format_args!("shared block {} on this agent", block.id))
        })?;
    agent.detach_block(&label).await?;
    Ok(Json(AgentBlocks::of(&agent)))
}
