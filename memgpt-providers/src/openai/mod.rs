//! OpenAI-compatible chat completions and embeddings.
//!
//! Works with anything that speaks OpenAI's `/chat/completions` and `/embeddings` API. Point
//! [`OpenAiConfig::base_url`] at it:
//!
//! | server | base URL | key |
//! |---|---|---|
//! | OpenAI | `https://api.openai.com/v1` | required |
//! | Ollama | `http://localhost:11434/v1` | none |
//! | vLLM | `http://localhost:8000/v1` | optional |
//! | llama.cpp server | `http://localhost:8080/v1` | optional |
//! | LM Studio | `http://localhost:1234/v1` | none |
//! | OpenRouter | `https://openrouter.ai/api/v1` | required |
//!
//! ```no_run
//! use memgpt_providers::openai::{OpenAiConfig, OpenAiProvider};
//!
//! let provider = OpenAiProvider::new(OpenAiConfig::ollama("llama3.1:8b")).unwrap();
//! # let _ = provider;
//! ```

mod chat;
mod config;
mod embed;
mod wire;

pub use chat::OpenAiProvider;
pub use config::{ConfigError, OpenAiConfig};
pub use embed::OpenAiEmbedder;

use crate::http::HttpFailure;
use memgpt_core::llm::LlmError;

/// Maps a failed request to the core's error kinds.
fn llm_error(failure: HttpFailure) -> LlmError {
    match failure {
        HttpFailure::Transport(e) => LlmError::Transient {
            status: None,
            message: transport_message(&e),
            retry_after: None,
        },
        HttpFailure::Status(response) => {
            let status = response.status.as_u16();
            let message =
                wire::error_message(&response.body).unwrap_or_else(|| truncate(&response.body));
            if wire::is_context_overflow(status, &response.body) {
                LlmError::ContextOverflow { message }
            } else if crate::http::is_retryable(response.status)
                && !wire::is_quota_exhausted(&response.body)
            {
                LlmError::Transient {
                    status: Some(status),
                    message,
                    retry_after: crate::http::retry_after(&response.headers),
                }
            } else {
                LlmError::Permanent {
                    status: Some(status),
                    message,
                }
            }
        }
    }
}

fn transport_message(e: &reqwest::Error) -> String {
    let what = if e.is_timeout() {
        "request timed out"
    } else if e.is_connect() {
        "could not connect"
    } else {
        "request failed"
    };
    let mut message = format!("{what}: {e}");
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        message.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    message
}

fn truncate(body: &str) -> String {
    const MAX: usize = 500;
    match body.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}...", &body[..cut]),
        None if body.trim().is_empty() => "(empty response body)".to_owned(),
        None => body.to_owned(),
    }
}
