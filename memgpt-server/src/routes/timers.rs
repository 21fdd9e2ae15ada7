//! Timer events of an agent: one-off or repeating, stored with the agents.

use aide::axum::ApiRouter;
use aide::axum::routing::{delete, post};
use axum::Json;
use axum::extract::{Path, State};
use chrono::{DateTime, Duration, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::params::AgentPath;
use crate::auth::Caller;
use crate::body::Body;
use crate::error::{ApiError, ApiResult};
use crate::reply::{Created, NoContent};
use crate::state::AppState;
use crate::timers::{Timer, TimerId};

pub(super) fn routes() -> ApiRouter<AppState> {
    ApiRouter::new()
        .api_route("/v1/agents/{agent_id}/timers", post(create).get(list))
        .api_route("/v1/agents/{agent_id}/timers/{timer_id}", delete(remove))
}

/// A timer to set.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("oneOf" = [
    {"required": ["at"], "properties": {"at": {"type": "string"}, "in_seconds": {"type": "null"}}},
    {"required": ["in_seconds"], "properties": {"in_seconds": {"type": "integer"}, "at": {"type": "null"}}}
]))]
struct CreateTimer {
    /// Why: the text of the timer event the agent receives.
    #[schemars(pattern(crate::routes::document::NOT_BLANK))]
    reason: String,
    /// When it fires first (give this or `in_seconds`).
    at: Option<DateTime<Utc>>,
    /// Seconds from now until it fires first (at most 100 years).
    #[schemars(range(max = 3_155_760_000u64))]
    in_seconds: Option<u64>,
    /// Repeats every this many seconds (1 to 100 years); one-off without it.
    #[schemars(range(min = 1, max = 3_155_760_000u64))]
    every_seconds: Option<u64>,
}

/// The longest delay or period of a timer, in seconds.
const HUNDRED_YEARS: u64 = 3_155_760_000;

/// Sets a timer: at its time the agent steps with a timer event, on exactly one server process.
async fn create(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<AgentPath>,
    Body(request): Body<CreateTimer>,
) -> ApiResult<Created<Timer>> {
    let agent = path.owned(&state, caller).await?;
    let reason = request.reason.trim();
    if reason.is_empty() {
        return Err(ApiError::invalid("`reason` is empty"));
    }
    let now = Utc::now();
    let next_at = match (request.at, request.in_seconds) {
        (Some(at), None) => at,
        (None, Some(seconds)) => i64::try_from(seconds)
            .ok()
            .and_then(Duration::try_seconds)
            .and_then(|d| now.checked_add_signed(d))
            .ok_or_else(|| ApiError::invalid("`in_seconds` is too large"))?,
        _ => {
            return Err(ApiError::invalid(
                "give exactly one of `at` and `in_seconds`",
            ));
        }
    };
    if request.every_seconds == Some(0) {
        return Err(ApiError::invalid("`every_seconds` is at least 1"));
    }
    if [request.in_seconds, request.every_seconds]
        .iter()
        .flatten()
        .any(|s| *s > HUNDRED_YEARS)
    {
        return Err(ApiError::invalid(
            "`in_seconds` and `every_seconds` are at most 100 years (3,155,760,000 s)",
        ));
    }
    let timer = Timer {
        id: TimerId::new(),
        agent_id: agent,
        reason: reason.to_owned(),
        next_at,
        every_seconds: request.every_seconds,
        created_at: now,
    };
    state
        .timers
        .add(&timer)
        .await
        .map_err(|e| ApiError::internal("storing a timer", e))?;
    Ok(Created(timer))
}

/// Timers.
#[derive(Debug, Serialize, JsonSchema)]
struct Timers {
    /// The agent's timers, soonest first.
    timers: Vec<Timer>,
}

/// The agent's timers.
async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<AgentPath>,
) -> ApiResult<Json<Timers>> {
    let agent = path.owned(&state, caller).await?;
    let timers = state
        .timers
        .of_agent(agent)
        .await
        .map_err(|e| ApiError::internal("reading timers", e))?;
    Ok(Json(Timers { timers }))
}

/// `/v1/agents/{agent_id}/timers/{timer_id}`.
#[derive(Debug, Deserialize, JsonSchema)]
struct TimerPath {
    /// The agent.
    agent_id: String,
    /// The timer.
    timer_id: String,
}

/// Cancels a timer.
async fn remove(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<TimerPath>,
) -> ApiResult<NoContent> {
    let agent = AgentPath {
        agent_id: path.agent_id.clone(),
    }
    .owned(&state, caller)
    .await?;
    let not_found = || ApiError::not_found(format_args!("timer {}", path.timer_id));
    let id = path
        .timer_id
        .parse()
        .map(TimerId)
        .map_err(|_| not_found())?;
    let removed = state
        .timers
        .remove(agent, id)
        .await
        .map_err(|e| ApiError::internal("removing a timer", e))?;
    if removed {
        Ok(NoContent)
    } else {
        Err(not_found())
    }
}
