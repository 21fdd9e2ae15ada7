//! The agent inspector: a browser view of every agent of a tenant, served at `/` from assets
//! compiled into the binary (no Node toolchain, no external requests: the page's Content
//! Security Policy allows only this server).
//!
//! It is a client of the `/v1` API and nothing else: the API key entered once authorises every
//! call, so it sees exactly what that key may see. Views: agents (create, delete, export,
//! import), chat with the streamed step (inner monologue, replies as they are written,
//! function calls and results, heartbeats, pressure warnings and flushes), the context window
//! as the model receives it (tokens per section against the window, the policy's warning and
//! flush lines, what a flush would evict next, each queued message's policy signals), memory
//! blocks (edited under the same limits as the LLM's edits), archival passages (search by
//! meaning, words or both; insert; delete), recall search with dates, and the recursive
//! summary.

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

const INDEX: &str = include_str!("index.html");
const SCRIPT: &str = include_str!("app.js");
const STYLE: &str = include_str!("app.css");

/// Only this server: scripts, styles, fetches; images from data URLs (downloads).
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self' data:; form-action 'none'; base-uri 'none'; frame-ancestors 'none'";

/// `GET /` and the inspector's assets under `/inspector/`.
pub(crate) fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route(
            "/",
            get(|| async { asset("text/html; charset=utf-8", INDEX) }),
        )
        .route(
            "/inspector/app.js",
            get(|| async { asset("text/javascript; charset=utf-8", SCRIPT) }),
        )
        .route(
            "/inspector/app.css",
            get(|| async { asset("text/css; charset=utf-8", STYLE) }),
        )
}

fn asset(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_SECURITY_POLICY, CSP),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
}
