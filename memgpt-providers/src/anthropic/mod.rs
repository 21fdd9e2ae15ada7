//! Anthropic's Messages API: Claude models, with function calling and streaming.
//!
//! [`AnthropicProvider`] implements [`LlmProvider`](memgpt_core::llm::LlmProvider) over
//! `POST {base_url}/v1/messages`. Configure it in code or from the environment
//! (`ANTHROPIC_API_KEY`, optional `ANTHROPIC_BASE_URL`, `MEMGPT_MODEL` or `ANTHROPIC_MODEL`,
//! `MEMGPT_CONTEXT_WINDOW`: see [`AnthropicConfig::from_env`]).
//!
//! ```no_run
//! use std::sync::Arc;
//!
//! use memgpt_core::llm::{ChatMessage, ChatRequest, LlmProvider, StreamDelta, StreamingProvider};
//! use memgpt_providers::anthropic::{AnthropicConfig, AnthropicProvider};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let provider = Arc::new(AnthropicProvider::new(
//!     AnthropicConfig::from_env()?.with_max_tokens(1024),
//! )?);
//! let request = ChatRequest::new("", vec![ChatMessage::user("Say hello.")]);
//! // Whole, or streamed piece by piece (the same response either way).
//! let whole = provider.complete(&request).await?;
//! let streamed = provider
//!     .complete_streaming(&request, &|delta| {
//!         if let StreamDelta::Text(text) = delta {
//!             print!("{text}");
//!         }
//!     })
//!     .await?;
//! # let _ = (whole, streamed);
//! # Ok(()) }
//! ```
//!
//! # How a core request maps to the Messages API
//!
//! * The leading system messages are joined (with a blank line) into the top-level `system`
//!   prompt; a system message later in the conversation becomes user text.
//! * Function results (role `tool`) become `tool_result` blocks of a user turn, consecutive
//!   turns of one role are merged (Anthropic requires strict alternation), and results come
//!   first in their turn.
//! * An assistant's function calls become `tool_use` blocks whose `input` is the parsed
//!   arguments. Arguments that are not a JSON object (a malformed call kept in the history) are
//!   sent as `{"_raw": "<the arguments as written>"}`, so replaying the history cannot fail.
//! * A function result whose call is not in the turn before is sent as user text, and a call
//!   without a result gets an `is_error` result saying none was recorded. MemGPT's queue keeps
//!   calls and results together, so this only matters for histories built elsewhere.
//! * [`ToolChoice`](memgpt_core::llm::ToolChoice) `Required` is `{"type":"any"}`, `Auto` is
//!   `{"type":"auto"}`, `None` is `{"type":"none"}`. `max_tokens` (required by Anthropic) is
//!   the request's, else [`AnthropicConfig::max_tokens`].
//!
//! In the response, text blocks are joined into the content (with a blank line between text
//! blocks that a function call separates), `tool_use` blocks become calls whose arguments
//! are the `input` serialized as JSON, and cached input tokens count as prompt tokens.

mod chat;
mod config;
mod response;
mod stream;
mod wire;

/// Re-exported: the configuration error of every provider.
pub use crate::ConfigError;
pub use chat::AnthropicProvider;
pub use config::AnthropicConfig;

use std::time::Duration;

use memgpt_core::llm::LlmError;

use crate::http::{self, HttpFailure};
use wire::ErrorDetail;

/// Maps a failed request to the core's error kinds.
fn llm_error(failure: HttpFailure) -> LlmError {
    match failure {
        HttpFailure::Transport(e) => LlmError::Transient {
            status: None,
            message: http::describe_transport_error(&e),
            retry_after: None,
        },
        HttpFailure::TooLarge { limit } => LlmError::InvalidResponse {
            message: HttpFailure::too_large_message(limit),
        },
        HttpFailure::Status(response) => {
            let detail = wire::error_detail(&response.body);
            let message = detail
                .as_ref()
                .filter(|d| !d.message.is_empty())
                .map(|d| d.message.clone())
                .unwrap_or_else(|| http::truncate_body(&response.body));
            classify(
                response.status.as_u16(),
                detail.as_ref(),
                message,
                Some(response.status.as_u16()),
                http::retry_after(&response.headers),
            )
        }
    }
}

/// Maps an `error` event received mid-stream (with HTTP status 200) to the core's error
/// kinds, classified by the status Anthropic documents for its type.
fn stream_error(detail: &ErrorDetail) -> LlmError {
    let kind = if detail.kind.is_empty() {
        "unknown error"
    } else {
        detail.kind.as_str()
    };
    let message = format!("{} ({kind}, in the response stream)", detail.message);
    // An unknown type is most likely a new kind of server trouble: retryable.
    let status = wire::status_of_error_type(&detail.kind).unwrap_or(500);
    classify(status, Some(detail), message, None, None)
}

fn classify(
    status: u16,
    detail: Option<&ErrorDetail>,
    message: String,
    reported_status: Option<u16>,
    retry_after: Option<Duration>,
) -> LlmError {
    let retryable = reqwest::StatusCode::from_u16(status).is_ok_and(http::is_retryable);
    if wire::is_context_overflow(status, detail) {
        LlmError::ContextOverflow { message }
    } else if retryable {
        LlmError::Transient {
            status: reported_status,
            message,
            retry_after,
        }
    } else {
        LlmError::Permanent {
            status: reported_status,
            message,
        }
    }
}

#[cfg(test)]
mod tests {
    use reqwest::StatusCode;
    use reqwest::header::{HeaderMap, HeaderValue};
    use serde_json::json;

    use super::*;
    use crate::http::HttpResponse;

    fn failure(status: u16, body: serde_json::Value, headers: HeaderMap) -> LlmError {
        llm_error(HttpFailure::Status(HttpResponse {
            status: StatusCode::from_u16(status).unwrap(),
            headers,
            body: body.to_string(),
        }))
    }

    fn error_body(kind: &str, message: &str) -> serde_json::Value {
        json!({"type": "error", "error": {"type": kind, "message": message}})
    }

    #[test]
    fn statuses_map_to_error_kinds() {
        let overflow = failure(
            400,
            error_body(
                "invalid_request_error",
                "prompt is too long: 201234 tokens > 200000 maximum",
            ),
            HeaderMap::new(),
        );
        assert!(overflow.is_context_overflow(), "{overflow}");
        assert!(
            failure(
                413,
                error_body("request_too_large", "too big"),
                HeaderMap::new()
            )
            .is_context_overflow()
        );

        let mut headers = HeaderMap::new();
        headers.insert("retry-after", HeaderValue::from_static("7"));
        match failure(529, error_body("overloaded_error", "Overloaded"), headers) {
            LlmError::Transient {
                status,
                message,
                retry_after,
            } => {
                assert_eq!(status, Some(529));
                assert_eq!(message, "Overloaded");
                assert_eq!(retry_after, Some(Duration::from_secs(7)));
            }
            other => panic!("unexpected: {other:?}"),
        }
        assert!(
            failure(
                429,
                error_body("rate_limit_error", "slow"),
                HeaderMap::new()
            )
            .is_transient()
        );
        for (status, kind) in [
            (401, "authentication_error"),
            (403, "permission_error"),
            (404, "not_found_error"),
            (400, "invalid_request_error"),
        ] {
            let err = failure(status, error_body(kind, "no"), HeaderMap::new());
            assert!(
                matches!(err, LlmError::Permanent { status: Some(s), .. } if s == status),
                "{status}: {err}"
            );
        }
        // A body that is not Anthropic's error shape is quoted.
        let err = failure(502, json!("<html>bad gateway</html>"), HeaderMap::new());
        assert!(
            err.is_transient() && err.to_string().contains("bad gateway"),
            "{err}"
        );
    }

    #[test]
    fn stream_errors_are_classified_by_type() {
        let detail = |kind: &str, message: &str| ErrorDetail {
            kind: kind.into(),
            message: message.into(),
        };
        let overloaded = stream_error(&detail("overloaded_error", "Overloaded"));
        assert!(
            matches!(&overloaded, LlmError::Transient { status: None, message, .. }
                if message == "Overloaded (overloaded_error, in the response stream)"),
            "{overloaded:?}"
        );
        assert!(stream_error(&detail("api_error", "oops")).is_transient());
        assert!(stream_error(&detail("something_new", "?")).is_transient());
        assert!(matches!(
            stream_error(&detail("invalid_request_error", "bad")),
            LlmError::Permanent { status: None, .. }
        ));
    }
}
