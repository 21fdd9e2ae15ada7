//! Memory blocks: read, replace, append. Limits are enforced exactly as for the LLM's own edits.

use aide::axum::ApiRouter;
use aide::axum::routing::{get, post};
use axum::Json;
use axum::extract::{Path, State};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use memgpt_core::store::refresh_shared_blocks;

use super::params::AgentPath;
use crate::auth::Caller;
use crate::body::Body;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use crate::views::BlockView;

pub(super) fn routes() -> ApiRouter<AppState> {
    ApiRouter::new()
        .api_route("/v1/agents/{agent_id}/memory", get(blocks))
        .api_route(
            "/v1/agents/{agent_id}/memory/{label}",
            get(block).put(replace),
        )
        .api_route("/v1/agents/{agent_id}/memory/{label}/append", post(append))
}

/// Working context.
#[derive(Debug, Serialize, JsonSchema)]
struct Blocks {
    /// The memory blocks, in prompt order.
    blocks: Vec<BlockView>,
}

/// Every memory block.
async fn blocks(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<AgentPath>,
) -> ApiResult<Json<Blocks>> {
    let mut agent = path.stored(&state, caller).await?;
    // Shared blocks as they are now, not as the agent last saw them.
    refresh_shared_blocks(&mut agent.memory, state.hub.storage().blocks.as_ref()).await?;
    Ok(Json(Blocks {
        blocks: agent.memory.blocks().iter().map(BlockView::from).collect(),
    }))
}

/// `/v1/agents/{agent_id}/memory/{label}`.
#[derive(Debug, Deserialize, JsonSchema)]
struct BlockPath {
    /// The agent.
    agent_id: String,
    /// The block's label.
    label: String,
}

impl BlockPath {
    fn agent(&self) -> AgentPath {
        AgentPath {
            agent_id: self.agent_id.clone(),
        }
    }
}

/// One memory block.
async fn block(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<BlockPath>,
) -> ApiResult<Json<BlockView>> {
    let Json(Blocks { blocks }) = blocks(State(state), caller, Path(path.agent())).await?;
    blocks
        .into_iter()
        .find(|b| b.label == path.label)
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format_args!("memory block `{}`", path.label)))
}

/// A block's new text.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReplaceBlock {
    /// The whole new text (at most the block's limit).
    value: String,
}

/// Text to add to a block.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AppendBlock {
    /// Added on a new line (the block must stay within its limit).
    text: String,
}

/// Replaces a block's text (`422 block_over_limit` past its limit; nothing changes then).
async fn replace(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<BlockPath>,
    Body(request): Body<ReplaceBlock>,
) -> ApiResult<Json<BlockView>> {
    edit(&state, caller, &path, move |block| {
        block.set(request.value.clone())
    })
    .await
}

/// Appends to a block (`422 block_over_limit` past its limit; nothing changes then).
async fn append(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<BlockPath>,
    Body(request): Body<AppendBlock>,
) -> ApiResult<Json<BlockView>> {
    edit(&state, caller, &path, move |block| {
        block.append(&request.text)
    })
    .await
}

/// Applies `change` to the block, as the agent's own edits are: committed with the agent
/// for its own blocks, in the block store for a shared one (the agents holding it see it on
/// their next step).
async fn edit(
    state: &AppState,
    caller: Caller,
    path: &BlockPath,
    change: impl Fn(&mut memgpt_core::MemoryBlock) -> Result<(), memgpt_core::memory::MemoryError>
    + Send
    + Sync,
) -> ApiResult<Json<BlockView>> {
    let mut agent = path.agent().live(state, caller).await?;
    let block = agent.edit_block(&path.label, change).await?;
    Ok(Json(BlockView::from(&block)))
}
