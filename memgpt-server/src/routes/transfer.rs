//! Agent files (Letta's `.af` schema v2, memgpt's extras under `memgpt`): export and import,
//! the same files as `memgpt agents export/import`.

use aide::axum::ApiRouter;
use aide::axum::routing::{get, post};
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use memgpt_core::agent_file::{self, AgentFileError, ImportOptions};
use memgpt_core::ids::AgentId;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::AgentPath;
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::state::AppState;
use crate::views::AgentView;

pub(super) fn routes() -> ApiRouter<AppState> {
    ApiRouter::new()
        .api_route("/v1/agents/{agent_id}/export", get(export))
        .api_route("/v1/agents/import", post(import))
}

fn file_error(error: AgentFileError) -> ApiError {
    match error {
        AgentFileError::Store(e) => e.into(),
        AgentFileError::Json(e) => {
            ApiError::new(ErrorCode::BadJson, format!("not an agent file: {e}"))
        }
        other => ApiError::invalid(other.to_string()),
    }
}

/// The agent as an agent file (JSON).
async fn export(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<AgentPath>,
) -> ApiResult<Json<serde_json::Value>> {
    let id = path.owned(&state, caller).await?;
    let file = agent_file::export(state.hub.storage(), id)
        .await
        .map_err(file_error)?;
    serde_json::to_value(&file)
        .map(Json)
        .map_err(|e| ApiError::internal("writing the agent file", e))
}

/// `?name=` of an import.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ImportQuery {
    /// The new agent's name (default: the file's).
    name: Option<String>,
}

/// What an import did.
#[derive(Debug, Serialize, JsonSchema)]
struct Imported {
    /// The new agent.
    agent: AgentView,
    /// Messages written to recall storage.
    messages: usize,
    /// Passages written to archival storage.
    passages: usize,
    /// What could not be carried over, one line each.
    unmapped: Vec<String>,
}

/// Imports an agent file (the body; a Letta file or a memgpt export) as a new agent of the
/// caller's tenant. Nothing is written if the file is invalid.
async fn import(
    State(state): State<AppState>,
    caller: Caller,
    Query(query): Query<ImportQuery>,
    body: String,
) -> ApiResult<(StatusCode, Json<Imported>)> {
    let file = agent_file::parse(&body).map_err(file_error)?;
    let id = AgentId::new();
    state.tenants.claim_agent(id, caller.tenant).await?;
    let options = ImportOptions {
        name: query.name,
        id: Some(id),
        allow_duplicate_name: true,
    };
    let report = match agent_file::import(state.hub.storage(), &file, options).await {
        Ok(report) => report,
        Err(e) => {
            if let Err(release) = state.tenants.release_agent(id).await {
                tracing::warn!(agent = %id, error = %release, "could not release the claim of an agent that was not imported");
            }
            return Err(file_error(e));
        }
    };
    let agent = state
        .hub
        .storage()
        .agents
        .load_agent(report.id)
        .await?
        .ok_or_else(|| ApiError::not_found(format_args!("agent {}", report.id)))?;
    Ok((
        StatusCode::CREATED,
        Json(Imported {
            agent: AgentView::from(&agent),
            messages: report.messages,
            passages: report.passages,
            unmapped: report.unmapped,
        }),
    ))
}
