//! The HTTP routes: one module per resource, all under `/v1`, plus `/healthz`, `/readyz` and
//! `/openapi.json`.
//!
//! | Route | What |
//! |---|---|
//! | `POST /v1/admin/tenants`, `GET /v1/admin/tenants` | tenants (admin key) |
//! | `POST/GET /v1/admin/tenants/{tenant_id}/keys`, `DELETE /v1/admin/keys/{key_id}` | API keys (admin key) |
//! | `POST/GET /v1/agents`, `GET/PATCH/DELETE /v1/agents/{agent_id}` | agents |
//! | `POST /v1/agents/{agent_id}/messages` | one step; `.../messages/stream` streams it (SSE) |
//! | `GET /v1/agents/{agent_id}/messages` | the conversation, paged |
//! | `GET /v1/agents/{agent_id}/memory[/{label}]`, `PUT .../{label}`, `POST .../{label}/append` | memory blocks |
//! | `POST/GET /v1/agents/{agent_id}/archival`, `POST .../archival/search`, `PATCH/DELETE .../archival/{passage_id}`, `POST .../archival/{passage_id}/forget` | archival storage (facts updated, forgotten, searched as of a time) |
//! | `POST/GET /v1/blocks`, `GET/PATCH/DELETE /v1/blocks/{block_id}`, `POST .../{block_id}/append` | shared memory blocks |
//! | `POST/DELETE /v1/agents/{agent_id}/blocks/{block_id}` | attaching a shared block to an agent |
//! | `POST /v1/agents/{agent_id}/companion` | a consolidation companion (sleep-time agent) |
//! | `POST /v1/agents/{agent_id}/recall/search` | recall storage |
//! | `GET /v1/agents/{agent_id}/context` | the compiled context window |
//! | `POST/GET /v1/agents/{agent_id}/timers`, `DELETE .../timers/{timer_id}` | timer events |
//! | `GET /v1/agents/{agent_id}/export`, `POST /v1/agents/import` | agent files |
//! | `POST /v1/chat/completions`, `GET /v1/models` | the OpenAI-compatible facade (`model` names an agent) |

mod admin;
mod agents;
mod archival;
mod blocks;
mod companion;
pub(crate) mod document;
mod health;
mod memory;
mod messages;
mod openai;
mod params;
mod recall;
mod timers;
mod transfer;

use std::sync::Arc;

use aide::axum::ApiRouter;
use aide::openapi::{Info, OpenApi};
use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};

use crate::error::{ApiError, ErrorCode};
use crate::state::AppState;

/// The documented routes, without state (the OpenAPI document is generated from these).
pub(crate) fn api_router() -> ApiRouter<AppState> {
    ApiRouter::new()
        .merge(admin::routes())
        .merge(agents::routes())
        .merge(messages::routes())
        .merge(memory::routes())
        .merge(archival::routes())
        .merge(blocks::routes())
        .merge(companion::routes())
        .merge(openai::routes())
        .merge(recall::routes())
        .merge(timers::routes())
        .merge(transfer::routes())
        .merge(health::routes())
}

/// Every route with its state, the body limit, the timeout and `/openapi.json`.
pub(crate) fn router(state: AppState) -> Router {
    let mut api = document();
    let routes = api_router().finish_api(&mut api);
    let document = Arc::new(polished(&api));
    let limit = state.config.max_body_bytes;
    routes
        .merge(crate::inspector::routes())
        .route(
            "/openapi.json",
            axum::routing::get(move || {
                let document = document.clone();
                async move { axum::Json(serde_json::Value::clone(&document)) }
            }),
        )
        .route(
            "/metrics",
            axum::routing::get(|State(state): State<AppState>| async move {
                (
                    [("content-type", "text/plain; version=0.0.4")],
                    state.metrics.render(state.hub.loaded()),
                )
            }),
        )
        // Unknown routes and methods answer like every other error: JSON with a code.
        .fallback(|uri: axum::http::Uri| async move {
            ApiError::not_found(format_args!("the route {}", shortened(uri.path())))
        })
        .method_not_allowed_fallback(
            |method: axum::http::Method, uri: axum::http::Uri| async move {
                ApiError::new(
                    ErrorCode::MethodNotAllowed,
                    format!("{} does not take {method}", shortened(uri.path())),
                )
            },
        )
        .layer(middleware::from_fn_with_state(state.clone(), timeout))
        .layer(middleware::from_fn_with_state(state.clone(), count_errors))
        .layer(middleware::from_fn(log_request))
        .layer(DefaultBodyLimit::max(limit))
        .with_state(state)
}

/// A path as an error message shows it: at most 200 characters.
fn shortened(path: &str) -> String {
    match path.char_indices().nth(200) {
        Some((at, _)) => format!("{}...", &path[..at]),
        None => path.to_owned(),
    }
}

/// The OpenAPI document of the routes (what `/openapi.json` serves), as JSON.
pub fn openapi() -> serde_json::Value {
    let mut api = document();
    let _ = api_router().finish_api(&mut api);
    polished(&api)
}

/// The generated document made explicit for generated clients ([`document::polish`]).
fn polished(api: &OpenApi) -> serde_json::Value {
    let mut value = serde_json::to_value(api).unwrap_or_default();
    document::polish(&mut value);
    value
}

/// The document's header: title, version, description.
fn document() -> OpenApi {
    OpenApi {
        info: Info {
            title: "memgpt-rs".to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            description: Some(
                "MemGPT agents as a service: agents with self-managed memory, their messages, \
                 memory blocks, archival and recall storage."
                    .to_owned(),
            ),
            ..Info::default()
        },
        ..OpenApi::default()
    }
}

/// Answers `504 timeout` when a request outlives [`ServerConfig::request_timeout`](crate::ServerConfig::request_timeout).
async fn timeout(State(state): State<AppState>, request: Request, next: Next) -> Response {
    match tokio::time::timeout(state.config.request_timeout, next.run(request)).await {
        Ok(response) => response,
        Err(_) => ApiError::new(
            ErrorCode::Timeout,
            format!(
                "the request took longer than {} s",
                state.config.request_timeout.as_secs_f64()
            ),
        )
        .into_response(),
    }
}

/// Logs each request: method, route, status, time taken, and the error code if any.
async fn log_request(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let route = request
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map_or_else(
            || request.uri().path().to_owned(),
            |p| p.as_str().to_owned(),
        );
    let started = std::time::Instant::now();
    let response = next.run(request).await;
    let status = response.status().as_u16();
    let millis = started.elapsed().as_secs_f64() * 1e3;
    match response.extensions().get::<ErrorCode>() {
        Some(code) if response.status().is_server_error() => {
            tracing::warn!(%method, route, status, millis, ?code, "request failed")
        }
        Some(code) => tracing::info!(%method, route, status, millis, ?code, "request refused"),
        None => tracing::info!(%method, route, status, millis, "request"),
    }
    response
}

/// Counts error responses by their code (every layer's errors included).
async fn count_errors(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    if let Some(code) = response.extensions().get::<ErrorCode>() {
        state.metrics.error(*code);
    }
    response
}
