//! `/healthz` (the process answers) and `/readyz` (it can reach its database).

use aide::axum::ApiRouter;
use aide::axum::routing::get;
use axum::Json;
use axum::extract::State;
use schemars::JsonSchema;
use serde::Serialize;

use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::state::AppState;

pub(super) fn routes() -> ApiRouter<AppState> {
    ApiRouter::new()
        .api_route("/healthz", get(healthz))
        .api_route("/readyz", get(readyz))
}

/// A health answer.
#[derive(Debug, Serialize, JsonSchema)]
struct Health {
    /// `ok`.
    status: &'static str,
    /// Agents loaded in this process.
    loaded_agents: usize,
}

/// The process is up.
async fn healthz(State(state): State<AppState>) -> Json<Health> {
    Json(Health {
        status: "ok",
        loaded_agents: state.hub.loaded(),
    })
}

/// The process can serve: its database and tenant store answer.
async fn readyz(State(state): State<AppState>) -> ApiResult<Json<Health>> {
    state
        .hub
        .storage()
        .agents
        .embedding_space()
        .await
        .map_err(|e| unready("the store", e))?;
    state
        .tenants
        .tenants()
        .await
        .map_err(|e| unready("the tenant store", e))?;
    Ok(Json(Health {
        status: "ok",
        loaded_agents: state.hub.loaded(),
    }))
}

/// `503 unavailable` naming what does not answer; why goes to the log (a readiness probe is
/// not authenticated, and the cause may name a host).
fn unready(what: &str, error: impl std::fmt::Display) -> ApiError {
    tracing::error!(error = %error, "readiness: {what} does not answer");
    ApiError::new(
        ErrorCode::Unavailable,
        format!("{what} does not answer; the log has why"),
    )
}
