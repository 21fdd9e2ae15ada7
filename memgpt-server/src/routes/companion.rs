//! An agent's consolidation companion (Letta's sleep-time agent): made here, run by the
//! server's timers after the agent's steps.

use aide::axum::ApiRouter;
use aide::axum::routing::post;
use axum::extract::{Path, State};
use memgpt_core::consolidation::Consolidation;
use memgpt_core::ids::AgentId;
use schemars::JsonSchema;
use serde::Deserialize;

use super::agents::{check_name, name_is_free};
use super::params::AgentPath;
use crate::auth::Caller;
use crate::body::Body;
use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::reply::Created;
use crate::state::AppState;
use crate::views::AgentView;

pub(super) fn routes() -> ApiRouter<AppState> {
    ApiRouter::new().api_route("/v1/agents/{agent_id}/companion", post(create))
}

/// A consolidation companion for an agent.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CreateCompanion {
    /// Its name (default: the agent's name with `-companion`).
    name: Option<String>,
    /// It runs after this many user messages of the agent (default 5, Letta's default).
    every_steps: Option<u32>,
    /// It also runs this many minutes after the agent's last step, if anything is left to
    /// consolidate (default: only every `every_steps`).
    idle_minutes: Option<u32>,
    /// Its chat model (default: the server's).
    model: Option<String>,
}

/// Gives an agent a consolidation companion: the agent's blocks become shared blocks both
/// hold, and after the agent's steps the companion reads what was said and keeps them current
/// (in the background: the agent never waits for it). `409` if the agent has one already (or
/// is one).
async fn create(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<AgentPath>,
    Body(request): Body<CreateCompanion>,
) -> ApiResult<Created<AgentView>> {
    let mut primary = path.live(&state, caller).await?;
    if Consolidation::of(primary.id(), primary.config()).is_some() {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            format!(
                "agent {} already has a consolidation companion (or is one)",
                primary.name()
            ),
        ));
    }
    let name = match &request.name {
        Some(name) => check_name(name)?.to_owned(),
        None => format!("{}-companion", primary.name()),
    };
    let _naming = state.naming.lock().await;
    name_is_free(&state, caller.tenant, &name, None).await?;
    let id = AgentId::new();
    let mut builder = state.hub.builder().id(id).name(name);
    if let Some(model) = request.model {
        builder = builder.model(model);
    }
    // Owner first: an agent never exists without one. A failed creation releases the claim.
    state.tenants.claim_agent(id, caller.tenant).await?;
    let idle = request
        .idle_minutes
        .map(|m| chrono::Duration::minutes(i64::from(m)));
    let scope = caller.tenant.to_string();
    match primary
        .add_companion(
            builder,
            request.every_steps.unwrap_or(5),
            idle,
            Some(&scope),
        )
        .await
    {
        Ok(companion) => {
            let view = AgentView::from(&companion);
            state.hub.adopt(companion).await;
            Ok(Created(view))
        }
        Err(e) => {
            if let Err(release) = state.tenants.release_agent(id).await {
                tracing::warn!(agent = %id, error = %release, "could not release a failed companion's claim");
            }
            Err(e.into())
        }
    }
}
