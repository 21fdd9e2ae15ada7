//! OpenAI-compatible chat completions and embeddings.
//!
//! Works with anything that speaks OpenAI's `/chat/completions` and `/embeddings` API. Point
//! [`OpenAiConfig::base_url`] at it:
//!
//! | server | base URL | key | constructor | function calls |
//! |---|---|---|---|---|
//! | OpenAI | `https://api.openai.com/v1` | required | [`OpenAiConfig::openai`] | native |
//! | Ollama | `http://localhost:11434/v1` | none | [`OpenAiConfig::ollama`] | JSON schema |
//! | vLLM | `http://localhost:8000/v1` | optional | [`OpenAiConfig::vllm`] | JSON schema |
//! | llama.cpp server | `http://localhost:8080/v1` | optional | [`OpenAiConfig::llama_cpp_server`] | JSON schema |
//! | LM Studio | `http://localhost:1234/v1` | none | [`OpenAiConfig::lm_studio`] | JSON schema |
//! | OpenRouter | `https://openrouter.ai/api/v1` | required | [`OpenAiConfig::new`] | native |
//!
//! How function calls are requested and read is [`ToolCalling`]: natively, under a JSON schema
//! or grammar that makes every reply a valid call, or as text read by a tolerant parser (for
//! servers that have neither). See its docs for how the history is shown to the server and
//! what happens to a reply that is not a call.
//!
//! ```no_run
//! use memgpt_providers::openai::{OpenAiConfig, OpenAiProvider};
//!
//! let provider = OpenAiProvider::new(OpenAiConfig::ollama("llama3.1:8b")).unwrap();
//! # let _ = provider;
//! ```

mod calling;
mod chat;
mod config;
mod embed;
mod encoded;
mod stream;
mod wire;

/// Re-exported: the configuration error of every provider.
pub use crate::ConfigError;
pub use chat::OpenAiProvider;
pub use config::{OpenAiConfig, ToolCalling};
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
        HttpFailure::TooLarge { limit } => LlmError::InvalidResponse {
            message: HttpFailure::too_large_message(limit),
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
