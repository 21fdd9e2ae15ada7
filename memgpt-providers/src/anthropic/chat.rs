//! [`AnthropicProvider`]: chat completions over Anthropic's Messages API, streaming included.

use async_trait::async_trait;
use bytes::Bytes;
use memgpt_core::llm::{
    ChatRequest, ChatResponse, LlmError, LlmProvider, StreamSink, StreamingProvider, replay,
};
use reqwest::Client;
use tracing::debug;

use super::response::ResponseBuilder;
use super::stream::StreamDecoder;
use super::wire::{self, MessageResponse, MessagesBody};
use super::{AnthropicConfig, ConfigError, llm_error};
use crate::http::{self, HttpResponse};
use crate::known_context_window;

/// A chat provider for Anthropic's Messages API (Claude models).
///
/// Transient failures (429, 5xx, 529 "overloaded", timeouts, connection errors) are retried
/// per the config's [`RetryPolicy`](crate::http::RetryPolicy), honouring `retry-after`;
/// "prompt is too long" becomes [`LlmError::ContextOverflow`] so the agent can flush and
/// retry; a bad key, a forbidden or unknown model are [`LlmError::Permanent`].
///
/// [`StreamingProvider::complete_streaming`] streams (`"stream": true`, server-sent events),
/// reporting text and function-call pieces as they arrive. Only failures before the response
/// starts are retried: once pieces have been reported, a dropped connection or an `error`
/// event ends the call (an overloaded server mid-stream is [`LlmError::Transient`]).
#[derive(Clone, Debug)]
pub struct AnthropicProvider {
    config: AnthropicConfig,
    client: Client,
}

impl AnthropicProvider {
    /// A provider for `config`.
    pub fn new(config: AnthropicConfig) -> Result<Self, ConfigError> {
        let client = http::client(&config.http)
            .map_err(|e| ConfigError::Invalid(format!("HTTP client: {e}")))?;
        Ok(Self { config, client })
    }

    /// A provider configured from the environment (see [`AnthropicConfig::from_env`]).
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::new(AnthropicConfig::from_env()?)
    }

    /// The configuration.
    pub fn config(&self) -> &AnthropicConfig {
        &self.config
    }

    fn request(&self, url: &str, body: &Bytes) -> reqwest::RequestBuilder {
        let mut request = self
            .client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header("anthropic-version", &self.config.api_version)
            .body(body.clone());
        if let Some(key) = &self.config.api_key {
            request = request.header("x-api-key", key);
        }
        for (name, value) in &self.config.extra_headers {
            request = request.header(name, value);
        }
        request
    }

    fn encode(&self, request: &ChatRequest, stream: bool) -> Result<Bytes, LlmError> {
        let body = MessagesBody::new(request, &self.config, stream);
        http::encode_body(&body, request)
    }
}

/// Retrying an overlong prompt cannot help; the agent flushes on a context overflow.
fn give_up(response: &HttpResponse) -> bool {
    wire::is_context_overflow(
        response.status.as_u16(),
        wire::error_detail(&response.body).as_ref(),
    )
}

#[async_trait]
impl LlmProvider for AnthropicProvider {
    fn model(&self) -> &str {
        &self.config.model
    }

    fn provider_name(&self) -> &str {
        "anthropic"
    }

    fn context_window(&self) -> Option<usize> {
        self.config
            .context_window
            .or_else(|| known_context_window(&self.config.model))
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let body = self.encode(request, false)?;
        let url = self.config.messages_url();
        debug!(%url, bytes = body.len(), messages = request.messages.len(), "anthropic message");
        let response =
            http::send_with_retry(&self.config.http, || self.request(&url, &body), give_up)
                .await
                .map_err(llm_error)?;
        parse_message(&response.body)
    }

    fn as_streaming(&self) -> Option<&dyn StreamingProvider> {
        Some(self)
    }
}

#[async_trait]
impl StreamingProvider for AnthropicProvider {
    async fn complete_streaming(
        &self,
        request: &ChatRequest,
        sink: &StreamSink<'_>,
    ) -> Result<ChatResponse, LlmError> {
        let body = self.encode(request, true)?;
        let url = self.config.messages_url();
        debug!(%url, bytes = body.len(), messages = request.messages.len(), "anthropic message stream");
        let response = http::send_with_retry_streaming(
            &self.config.http,
            || self.request(&url, &body),
            give_up,
        )
        .await
        .map_err(llm_error)?;
        if !crate::sse::is_event_stream(&response) {
            // A server (or proxy) that ignored `"stream": true` and answered in one piece.
            let text = http::read_text(response, self.config.http.max_response_bytes)
                .await
                .map_err(llm_error)?;
            let complete = parse_message(&text)?;
            replay(&complete, sink);
            return Ok(complete);
        }
        crate::sse::decode(
            response,
            self.config.http.max_response_bytes,
            StreamDecoder::default(),
            sink,
        )
        .await
    }
}

/// The response of a non-streaming call.
pub(super) fn parse_message(body: &str) -> Result<ChatResponse, LlmError> {
    let message: MessageResponse =
        serde_json::from_str(body).map_err(|e| LlmError::InvalidResponse {
            message: format!("{e}: {}", http::truncate_body(body)),
        })?;
    ResponseBuilder::whole(message)
}

#[cfg(test)]
mod tests {
    use memgpt_core::llm::{FinishReason, Usage};
    use serde_json::json;

    use super::*;

    #[test]
    fn responses_parse() {
        let body = json!({
            "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
            "content": [
                {"type": "text", "text": "The user is Chad."},
                {"type": "tool_use", "id": "toolu_01", "name": "core_memory_append",
                 "input": {"label": "human", "content": "Name: Chad", "request_heartbeat": true}}
            ],
            "stop_reason": "tool_use", "stop_sequence": null,
            "usage": {"input_tokens": 2095, "output_tokens": 503,
                      "cache_creation_input_tokens": 5, "cache_read_input_tokens": 0}
        });
        let r = parse_message(&body.to_string()).unwrap();
        assert_eq!(r.content, "The user is Chad.");
        assert_eq!(r.tool_calls.len(), 1);
        assert_eq!(r.tool_calls[0].id, "toolu_01");
        assert_eq!(r.tool_calls[0].name, "core_memory_append");
        assert_eq!(
            r.tool_calls[0].arguments,
            "{\"label\":\"human\",\"content\":\"Name: Chad\",\"request_heartbeat\":true}",
            "the input's key order is kept"
        );
        assert_eq!(
            r.usage,
            Usage {
                prompt_tokens: 2100,
                completion_tokens: 503,
                cached_prompt_tokens: 0,
            }
        );
        assert_eq!(r.finish_reason, FinishReason::ToolCalls);
        assert_eq!(r.model, "claude-sonnet-4-5-20250929");

        let text_only = json!({"model": "m", "content": [{"type": "text", "text": "Hi"}],
            "stop_reason": "end_turn", "usage": {"input_tokens": 3, "output_tokens": 1}});
        let r = parse_message(&text_only.to_string()).unwrap();
        assert_eq!((r.content.as_str(), r.tool_calls.len()), ("Hi", 0));
        assert_eq!(r.finish_reason, FinishReason::Stop);
        let refused = json!({"model": "m", "content": [], "stop_reason": "refusal"});
        assert_eq!(
            parse_message(&refused.to_string()).unwrap().finish_reason,
            FinishReason::ContentFilter
        );
        assert!(matches!(
            parse_message("<html>502</html>"),
            Err(LlmError::InvalidResponse { .. })
        ));
    }
}
