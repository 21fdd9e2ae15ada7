use async_trait::async_trait;
use memgpt_core::llm::{
    ChatRequest, ChatResponse, LlmError, LlmProvider, Usage, known_context_window,
};
use reqwest::Client;
use tracing::debug;

use super::wire::{ChatBody, ChatCompletion, finish_reason};
use super::{ConfigError, OpenAiConfig, llm_error, wire};
use crate::http;

/// A chat provider for any OpenAI-compatible server.
///
/// Transient failures (429, 5xx, timeouts, connection errors) are retried per the config's
/// [`RetryPolicy`](crate::http::RetryPolicy), honouring `Retry-After`; an exhausted quota is
/// permanent; "context length exceeded" becomes [`LlmError::ContextOverflow`] so the agent can
/// flush and retry.
#[derive(Clone, Debug)]
pub struct OpenAiProvider {
    config: OpenAiConfig,
    pub(super) client: Client,
}

impl OpenAiProvider {
    /// A provider for `config`.
    pub fn new(config: OpenAiConfig) -> Result<Self, ConfigError> {
        let client = http::client(&config.http)
            .map_err(|e| ConfigError::Invalid(format!("HTTP client: {e}")))?;
        Ok(Self { config, client })
    }

    /// A provider configured from the environment (see [`OpenAiConfig::from_env`]).
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::new(OpenAiConfig::from_env()?)
    }

    /// The configuration.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    pub(super) fn request(
        &self,
        client: &Client,
        url: &str,
        body: &[u8],
    ) -> reqwest::RequestBuilder {
        let mut request = client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_vec());
        if let Some(key) = &self.config.api_key {
            request = request.bearer_auth(key);
        }
        for (name, value) in &self.config.extra_headers {
            request = request.header(name, value);
        }
        request
    }
}

#[async_trait]
impl LlmProvider for OpenAiProvider {
    fn model(&self) -> &str {
        &self.config.model
    }

    fn context_window(&self) -> Option<usize> {
        self.config
            .context_window
            .or_else(|| known_context_window(&self.config.model))
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let body = ChatBody::new(request, &self.config.model, &self.config);
        let body = serde_json::to_vec(&body).map_err(|e| LlmError::Permanent {
            status: None,
            message: format!("could not encode the request: {e}"),
        })?;
        let url = self.config.url("chat/completions");
        debug!(%url, bytes = body.len(), messages = request.messages.len(), "chat completion");
        let response = http::send_with_retry(
            &self.config.http.retry,
            || self.request(&self.client, &url, &body),
            |r| {
                // Retrying an exhausted quota or an overlong prompt cannot help; the agent
                // flushes on a context overflow.
                wire::is_quota_exhausted(&r.body)
                    || wire::is_context_overflow(r.status.as_u16(), &r.body)
            },
        )
        .await
        .map_err(llm_error)?;
        parse_completion(&response.body)
    }
}

fn parse_completion(body: &str) -> Result<ChatResponse, LlmError> {
    let completion: ChatCompletion =
        serde_json::from_str(body).map_err(|e| LlmError::InvalidResponse {
            message: format!("{e}: {}", super::truncate(body)),
        })?;
    let choice =
        completion
            .choices
            .into_iter()
            .next()
            .ok_or_else(|| LlmError::InvalidResponse {
                message: "the response has no choices".to_owned(),
            })?;
    let finish = finish_reason(choice.finish_reason.as_deref());
    let message = choice.message;
    let content = message
        .content
        .clone()
        .filter(|c| !c.trim().is_empty())
        .or_else(|| message.reasoning_content.clone())
        .unwrap_or_default();
    let usage = completion.usage.map_or(Usage::default(), |u| Usage {
        prompt_tokens: u.prompt_tokens,
        completion_tokens: u.completion_tokens,
    });
    Ok(ChatResponse {
        content,
        tool_calls: message.calls(),
        usage,
        finish_reason: finish,
        model: completion.model,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use memgpt_core::llm::{ChatMessage, FinishReason, ToolChoice, ToolSchema};
    use memgpt_core::message::ToolCall;
    use serde_json::json;

    use super::*;

    #[test]
    fn request_body_matches_the_wire_format() {
        let mut request = ChatRequest::new(
            "",
            vec![ChatMessage::system("sys"), ChatMessage::user("hi")],
        );
        let mut assistant = ChatMessage::assistant("");
        assistant.tool_calls.push(ToolCall {
            id: "c1".into(),
            name: "f".into(),
            arguments: "{}".into(),
        });
        request.messages.push(assistant);
        let mut tool = ChatMessage::new(memgpt_core::llm::Role::Tool, "{\"status\":\"OK\"}");
        tool.tool_call_id = Some("c1".into());
        tool.name = Some("f".into());
        request.messages.push(tool);
        request.tools = Arc::from(vec![ToolSchema {
            name: "f".into(),
            description: "does f".into(),
            parameters: json!({"type": "object", "properties": {}}),
        }]);
        request.tool_choice = ToolChoice::Required;
        let config = OpenAiConfig::new("http://x/v1", "m-default");
        let body = serde_json::to_value(ChatBody::new(&request, "m-default", &config)).unwrap();
        assert_eq!(body["model"], "m-default");
        assert_eq!(body["tool_choice"], "required");
        assert_eq!(body["tools"][0]["type"], "function");
        assert_eq!(body["tools"][0]["function"]["name"], "f");
        assert_eq!(body["messages"][2]["content"], serde_json::Value::Null);
        assert_eq!(
            body["messages"][2]["tool_calls"][0]["function"]["arguments"],
            "{}"
        );
        assert_eq!(body["messages"][3]["role"], "tool");
        assert_eq!(body["messages"][3]["tool_call_id"], "c1");
        assert!(body.get("temperature").is_none() && body.get("parallel_tool_calls").is_none());
    }

    #[test]
    fn completions_parse() {
        let body = json!({
            "model": "m",
            "choices": [{"message": {"role": "assistant", "content": "thinking",
                "tool_calls": [{"id": "a", "type": "function", "function": {"name": "send_message", "arguments": "{\"message\":\"hi\"}"}}]},
                "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        });
        let r = parse_completion(&body.to_string()).unwrap();
        assert_eq!(r.content, "thinking");
        assert_eq!(r.tool_calls[0].name, "send_message");
        assert_eq!(r.usage.total(), 15);
        assert_eq!(r.finish_reason, FinishReason::ToolCalls);
        assert!(matches!(
            parse_completion("{\"choices\": []}"),
            Err(LlmError::InvalidResponse { .. })
        ));
        assert!(matches!(
            parse_completion("<html>"),
            Err(LlmError::InvalidResponse { .. })
        ));
    }
}
