//! Agent files (Letta's `.af` schema v2, memgpt's extras under `memgpt`): export and import,
//! the same files as `memgpt agents export/import`.

use aide::axum::ApiRouter;
use aide::axum::routing::{get, post};
use axum::Json;
use axum::extract::{Path, State};
use memgpt_core::agent_file::{self, AgentFileError, ImportOptions};
use memgpt_core::ids::AgentId;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::params::AgentPath;
use crate::auth::Caller;
use crate::body::Body;
use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::query::Query;
use crate::reply::Created;
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

/// `?name=` and `?agent=` of an import.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ImportQuery {
    /// The new agent's name (default: the file's). With several agents it names the first;
    /// the others are called `NAME-THEIR_NAME`.
    name: Option<String>,
    /// Import only this agent of a file with several (its file id, `agent-1`, or its name).
    agent: Option<String>,
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
    /// What was changed to fit (a raised block limit, a shared block copied), one line each.
    adjusted: Vec<String>,
    /// The file's other agents, imported with this one (a sleep-time companion...).
    related: Vec<AgentView>,
}

/// An agent file as a request body: Letta's document, or (as some published files are) a
/// JSON string holding it.
#[derive(Debug, Deserialize)]
#[serde(transparent)]
struct AgentFileBody(serde_json::Value);

impl JsonSchema for AgentFileBody {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "AgentFile".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A Letta agent file (schema v2; see Letta's `AgentFileSchema`). Its \
                            ids must resolve: each agent's `block_ids`, `tool_ids` and \
                            `in_context_message_ids` name entries of the file. (A JSON string \
                            holding the document, as some published files are, is read too.)",
            "type": "object",
            "required": ["agents"],
            "properties": {
                "agents": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["id"],
                        "properties": {"id": {"type": "string"}}
                    }
                }
            }
        })
    }
}

/// Imports an agent file (the body; a Letta file or a memgpt export) as a new agent of the
/// caller's tenant. Nothing is written if the file is invalid.
async fn import(
    State(state): State<AppState>,
    caller: Caller,
    Query(query): Query<ImportQuery>,
    Body(AgentFileBody(body)): Body<AgentFileBody>,
) -> ApiResult<Created<Imported>> {
    let text = match body {
        serde_json::Value::String(inner) => inner,
        document => document.to_string(),
    };
    let file = agent_file::parse(&text).map_err(file_error)?;
    let mut options = ImportOptions {
        name: query.name,
        agent: query.agent,
        allow_duplicate_name: true,
        block_scope: Some(caller.tenant.to_string()),
        ..ImportOptions::default()
    };
    let _naming = state.naming.lock().await;
    for name in file.import_names(&options).map_err(file_error)? {
        super::agents::name_is_free(&state, caller.tenant, &name, None).await?;
    }
    let count = file.importable(&options).map_err(file_error)?;
    options.ids = (0..count).map(|_| AgentId::new()).collect();
    for (i, id) in options.ids.iter().enumerate() {
        if let Err(e) = state.tenants.claim_agent(*id, caller.tenant).await {
            release(&state, &options.ids[..i]).await;
            return Err(e.into());
        }
    }
    let report = match agent_file::import(state.hub.storage(), &file, options.clone()).await {
        Ok(report) => report,
        Err(e) => {
            release(&state, &options.ids).await;
            return Err(file_error(e));
        }
    };
    let storage = state.hub.storage();
    let view = |id: AgentId| async move {
        storage
            .agents
            .load_agent(id)
            .await?
            .map(|agent| AgentView::from(&agent))
            .ok_or_else(|| ApiError::not_found(format_args!("agent {id}")))
    };
    let agent = view(report.id).await?;
    let mut related = Vec::new();
    for other in &report.related {
        related.push(view(other.id).await?);
    }
    Ok(Created(Imported {
        agent,
        messages: report.messages,
        passages: report.passages,
        unmapped: report.unmapped,
        adjusted: report.adjusted,
        related,
    }))
}

/// Gives back the claims of agents that were not imported.
async fn release(state: &AppState, ids: &[AgentId]) {
    for id in ids {
        if let Err(release) = state.tenants.release_agent(*id).await {
            tracing::warn!(agent = %id, error = %release, "could not release the claim of an agent that was not imported");
        }
    }
}
