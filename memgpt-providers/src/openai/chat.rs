//! [`OpenAiProvider`]: chat completions over OpenAI-compatible endpoints, streaming included.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use memgpt_core::llm::{
    ChatRequest, ChatResponse, FinishReason, LlmError, LlmProvider, StreamSink, StreamingProvider,
    ToolChoice, Usage, replay,
};
use reqwest::Client;
use tracing::debug;

use super::calling::{Prepared, PreparedCache};
use super::encoded::EncodedMessages;
use super::stream::StreamDecoder;
use super::wire::{ChatBody, ChatCompletion, finish_reason};
use super::{ConfigError, OpenAiConfig, ToolCalling, llm_error, wire};
use crate::http::{self, HttpResponse};
use crate::known_context_window;
use crate::structured::INVALID_REPLY_FUNCTION;

/// A chat provider for any OpenAI-compatible server.
///
/// Transient failures (429, 5xx, timeouts, connection errors) are retried per the config's
/// [`RetryPolicy`](crate::http::RetryPolicy), honouring `Retry-After`; an exhausted quota is
/// permanent; "context length exceeded" becomes [`LlmError::ContextOverflow`] so the agent can
/// flush and retry.
///
/// Function calls go natively or through a schema, a grammar or the text protocol, per
/// [`OpenAiConfig::tool_calling`] (see [`ToolCalling`]).
#[derive(Clone, Debug)]
pub struct OpenAiProvider {
    config: OpenAiConfig,
    pub(super) client: Client,
    prepared: PreparedCache,
    encoded: EncodedMessages,
}

impl OpenAiProvider {
    /// A provider for `config`.
    pub fn new(config: OpenAiConfig) -> Result<Self, ConfigError> {
        let client = http::client(&config.http)
            .map_err(|e| ConfigError::Invalid(format!("HTTP client: {e}")))?;
        Ok(Self {
            config,
            client,
            prepared: PreparedCache::default(),
            encoded: EncodedMessages::default(),
        })
    }

    /// A provider configured from the environment (see [`OpenAiConfig::from_env`]).
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::new(OpenAiConfig::from_env()?)
    }

    /// The configuration.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    /// The schema/grammar/prompt parts of a request whose function calls go through a
    /// non-native mode; `None` for native calling or when no call is wanted.
    fn structured(&self, request: &ChatRequest) -> Result<Option<Arc<Prepared>>, LlmError> {
        if self.config.tool_calling == ToolCalling::Native
            || request.tools.is_empty()
            || request.tool_choice == ToolChoice::None
        {
            return Ok(None);
        }
        self.prepared
            .get(&request.tools, self.config.tool_calling)
            .map(Some)
    }

    pub(super) fn request(
        &self,
        client: &Client,
        url: &str,
        body: &Bytes,
    ) -> reqwest::RequestBuilder {
        let mut request = client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.clone());
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

    fn provider_name(&self) -> &str {
        "openai"
    }

    fn context_window(&self) -> Option<usize> {
        self.config
            .context_window
            .or_else(|| known_context_window(&self.config.model))
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let structured = self.structured(request)?;
        let body = self.encode(request, structured.as_deref(), false)?;
        let url = self.config.url("chat/completions");
        debug!(%url, bytes = body.len(), messages = request.messages.len(), "chat completion");
        let response = http::send_with_retry(
            &self.config.http,
            || self.request(&self.client, &url, &body),
            give_up,
        )
        .await
        .map_err(llm_error)?;
        parse_completion(&response.body, structured.as_deref())
    }

    fn as_streaming(&self) -> Option<&dyn StreamingProvider> {
        Some(self)
    }
}

#[async_trait]
impl StreamingProvider for OpenAiProvider {
    /// Streams the completion (server-sent events): text, and each function call's name and
    /// arguments as they are generated. Calls through a non-native [`ToolCalling`] mode are one
    /// JSON reply read as a call once complete: those are completed, then reported whole.
    async fn complete_streaming(
        &self,
        request: &ChatRequest,
        sink: &StreamSink<'_>,
    ) -> Result<ChatResponse, LlmError> {
        if self.structured(request)?.is_some() {
            let response = self.complete(request).await?;
            replay(&response, sink);
            return Ok(response);
        }
        let body = self.encode(request, None, true)?;
        let url = self.config.url("chat/completions");
        debug!(%url, bytes = body.len(), messages = request.messages.len(), "chat completion stream");
        let response = http::send_with_retry_streaming(
            &self.config.http,
            || self.request(&self.client, &url, &body),
            give_up,
        )
        .await
        .map_err(llm_error)?;
        if !crate::sse::is_event_stream(&response) {
            // A server that ignored `"stream": true` and answered in one piece.
            let text = http::read_text(response, self.config.http.max_response_bytes)
                .await
                .map_err(llm_error)?;
            let complete = parse_completion(&text, None)?;
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

impl OpenAiProvider {
    /// The JSON body of `request`.
    fn encode(
        &self,
        request: &ChatRequest,
        structured: Option<&Prepared>,
        stream: bool,
    ) -> Result<Bytes, LlmError> {
        // Native calling sends the messages as they are: most were sent last call, and their
        // JSON is copied from then.
        let encoded = match self.config.tool_calling {
            ToolCalling::Native => Some(
                self.encoded
                    .encode(&request.messages)
                    .map_err(http::unencodable)?,
            ),
            _ => None,
        };
        let body = ChatBody::new(
            request,
            &self.config.model,
            &self.config,
            structured,
            encoded.as_deref(),
        );
        let body = if stream { body.streamed() } else { body };
        http::encode_body(&body, request)
    }
}

/// Retrying an exhausted quota or an overlong prompt cannot help; the agent flushes on a
/// context overflow.
fn give_up(response: &HttpResponse) -> bool {
    wire::is_quota_exhausted(&response.body)
        || wire::is_context_overflow(response.status.as_u16(), &response.body)
}

/// Reads a completion; with `structured`, a reply without native calls is read as one call
/// (see [`ToolCalling`]).
fn parse_completion(body: &str, structured: Option<&Prepared>) -> Result<ChatResponse, LlmError> {
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
    let usage = completion
        .usage
        .as_ref()
        .map_or(Usage::default(), super::wire::WireUsage::to_usage);
    if let Some(prepared) = structured
        && message.tool_calls.is_empty()
        && message.function_call.is_none()
    {
        let content = message.content.as_deref().unwrap_or_default();
        let reasoning = message.reasoning_content.as_deref();
        // Some reasoning parsers move everything into `reasoning_content`.
        let text = match reasoning {
            Some(reasoning) if content.trim().is_empty() => reasoning,
            _ => content,
        };
        let (content, call) = prepared.read_reply(text, reasoning, &finish);
        let finish = if finish == FinishReason::Stop && call.name != INVALID_REPLY_FUNCTION {
            FinishReason::ToolCalls
        } else {
            finish
        };
        return Ok(ChatResponse {
            content,
            tool_calls: vec![call],
            usage,
            finish_reason: finish,
            model: completion.model,
        });
    }
    let content = message
        .content
        .clone()
        .filter(|c| !c.trim().is_empty())
        .or_else(|| message.reasoning_content.clone())
        .unwrap_or_default();
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
        request.messages.push(assistant.into());
        let mut tool = ChatMessage::new(memgpt_core::llm::Role::Tool, "{\"status\":\"OK\"}");
        tool.tool_call_id = Some("c1".into());
        tool.name = Some("f".into());
        request.messages.push(tool.into());
        request.tools = Arc::from(vec![ToolSchema {
            name: "f".into(),
            description: "does f".into(),
            parameters: json!({"type": "object", "properties": {}}),
        }]);
        request.tool_choice = ToolChoice::Required;
        let config = OpenAiConfig::new("http://x/v1", "m-default");
        let body = serde_json::to_value(ChatBody::new(&request, "m-default", &config, None, None))
            .unwrap();
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

    /// A MemGPT-like request: an earlier call with its result, then a heartbeat.
    fn memgpt_request() -> ChatRequest {
        let mut request = ChatRequest::new(
            "",
            vec![ChatMessage::system("You are Sam."), ChatMessage::user("hi")],
        );
        let mut assistant = ChatMessage::assistant("save the name");
        assistant.tool_calls.push(ToolCall {
            id: "c1".into(),
            name: "core_memory_append".into(),
            arguments: r#"{"label":"human","content":"Ada","request_heartbeat":true}"#.into(),
        });
        request.messages.push(assistant.into());
        let mut tool = ChatMessage::new(memgpt_core::llm::Role::Tool, "{\"status\":\"OK\"}");
        tool.tool_call_id = Some("c1".into());
        tool.name = Some("core_memory_append".into());
        request.messages.push(tool.into());
        request.messages.push(ChatMessage::user("heartbeat").into());
        request.tools = Arc::from(vec![
            ToolSchema {
                name: "send_message".into(),
                description: "Sends a message.".into(),
                parameters: json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}),
            },
            ToolSchema {
                name: "core_memory_append".into(),
                description: "Appends to core memory.".into(),
                parameters: json!({"type": "object", "properties": {"label": {"type": "string"}, "content": {"type": "string"}, "request_heartbeat": {"type": "boolean"}}, "required": ["label", "content", "request_heartbeat"]}),
            },
        ]);
        request.tool_choice = ToolChoice::Required;
        request
    }

    fn body_for(request: &ChatRequest, mode: ToolCalling) -> serde_json::Value {
        let config = OpenAiConfig::new("http://x/v1", "m").with_tool_calling(mode);
        let provider = OpenAiProvider::new(config.clone()).unwrap();
        let structured = provider.structured(request).unwrap();
        serde_json::from_slice(
            &provider
                .encode(request, structured.as_deref(), false)
                .unwrap(),
        )
        .unwrap()
    }

    /// The provider's body holds each message's JSON from the cache once sent: the same
    /// bytes as encoding the whole body afresh, on every call, as the context moves on.
    #[test]
    fn bodies_from_cached_messages_are_the_bodies_encoded_afresh() {
        let config = OpenAiConfig::new("http://x/v1", "m");
        let provider = OpenAiProvider::new(config.clone()).unwrap();
        let mut request = memgpt_request();
        for step in 0..3 {
            for stream in [false, true] {
                let fresh = ChatBody::new(&request, "m", &config, None, None);
                let fresh = if stream { fresh.streamed() } else { fresh };
                let sent = provider.encode(&request, None, stream).unwrap();
                assert_eq!(
                    std::str::from_utf8(&sent).unwrap(),
                    serde_json::to_string(&fresh).unwrap(),
                    "step {step}"
                );
            }
            // The next step: the oldest message leaves, two arrive.
            request.messages.remove(1);
            request
                .messages
                .push(ChatMessage::assistant(format!("reply {step} \"q\"")).into());
            request
                .messages
                .push(ChatMessage::user(format!("next {step}\n")).into());
        }
    }

    #[test]
    fn structured_modes_send_no_tools_and_a_text_history() {
        let request = memgpt_request();
        for mode in [
            ToolCalling::JsonSchema,
            ToolCalling::GuidedJson,
            ToolCalling::Grammar,
            ToolCalling::Text,
        ] {
            let body = body_for(&request, mode);
            assert!(
                body.get("tools").is_none() && body.get("tool_choice").is_none(),
                "{mode}"
            );
            let messages = body["messages"].as_array().unwrap();
            let roles: Vec<&str> = messages
                .iter()
                .map(|m| m["role"].as_str().unwrap())
                .collect();
            assert_eq!(roles, ["system", "user", "assistant", "user"], "{mode}");
            let system = messages[0]["content"].as_str().unwrap();
            assert!(
                system.starts_with("You are Sam.\n\n# Function calls"),
                "{mode}: {system}"
            );
            assert!(system.contains("- core_memory_append: Appends to core memory."));
            assert_eq!(
                messages[2]["content"],
                r#"{"thinking":"save the name","function":"core_memory_append","arguments":{"label":"human","content":"Ada","request_heartbeat":true}}"#
            );
            assert!(
                messages
                    .iter()
                    .all(|m| m.get("tool_calls").is_none() && m.get("tool_call_id").is_none())
            );
            assert_eq!(
                messages[3]["content"],
                "[function result for core_memory_append] {\"status\":\"OK\"}\n\nheartbeat"
            );
            let has = |field: &str| body.get(field).is_some();
            match mode {
                ToolCalling::JsonSchema => {
                    let format = &body["response_format"];
                    assert_eq!(format["type"], "json_schema");
                    assert_eq!(format["json_schema"]["name"], "function_call");
                    assert_eq!(format["json_schema"]["strict"], true);
                    let branches = format["json_schema"]["schema"]["anyOf"].as_array().unwrap();
                    assert_eq!(branches.len(), 2);
                    assert_eq!(
                        branches[1]["properties"]["function"]["const"],
                        "core_memory_append"
                    );
                    assert!(!has("guided_json") && !has("grammar"));
                }
                ToolCalling::GuidedJson => {
                    assert_eq!(body["guided_json"]["anyOf"].as_array().unwrap().len(), 2);
                    assert!(!has("response_format") && !has("grammar"));
                }
                ToolCalling::Grammar => {
                    let grammar = body["grammar"].as_str().unwrap();
                    assert!(grammar.starts_with("root ::= "), "{grammar}");
                    assert!(grammar.contains(r#""\"core_memory_append\"""#));
                    assert!(!has("response_format") && !has("guided_json"));
                }
                _ => assert!(!has("response_format") && !has("guided_json") && !has("grammar")),
            }
        }
        // No call wanted (a summarizer request, or tool_choice none): no addendum, no schema,
        // but still a history the server accepts.
        let mut plain = memgpt_request();
        plain.tool_choice = ToolChoice::None;
        let body = body_for(&plain, ToolCalling::JsonSchema);
        assert!(body.get("response_format").is_none());
        assert_eq!(body["messages"][0]["content"], "You are Sam.");
        assert_eq!(body["messages"][3]["role"], "user");
        // Native mode is unchanged.
        let native = body_for(&memgpt_request(), ToolCalling::Native);
        assert_eq!(native["tools"].as_array().unwrap().len(), 2);
        assert_eq!(native["messages"][3]["role"], "tool");
        assert!(native.get("response_format").is_none());
    }

    fn completion(content: &str, finish: &str) -> String {
        json!({
            "model": "m",
            "choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5}
        })
        .to_string()
    }

    #[test]
    fn structured_replies_become_calls() {
        let request = memgpt_request();
        let provider = OpenAiProvider::new(
            OpenAiConfig::new("http://x/v1", "m").with_tool_calling(ToolCalling::JsonSchema),
        )
        .unwrap();
        let prepared = provider.structured(&request).unwrap();
        let prepared = prepared.as_deref();
        let r = parse_completion(
            &completion(
                r#"{"thinking":"greet","function":"send_message","arguments":{"message":"Hi Ada"}}"#,
                "stop",
            ),
            prepared,
        )
        .unwrap();
        assert_eq!(r.content, "greet");
        assert_eq!(r.tool_calls.len(), 1);
        assert_eq!(r.tool_calls[0].name, "send_message");
        assert_eq!(r.tool_calls[0].arguments, r#"{"message":"Hi Ada"}"#);
        assert_eq!(r.finish_reason, FinishReason::ToolCalls);
        assert_eq!(r.usage.total(), 15);

        let r = parse_completion(&completion("I will not comply.", "stop"), prepared).unwrap();
        assert_eq!(r.content, "I will not comply.");
        assert_eq!(r.tool_calls[0].name, INVALID_REPLY_FUNCTION);
        assert!(
            r.tool_calls[0]
                .arguments
                .contains("Your reply was not a valid function call: it contains no JSON object")
        );
        assert_eq!(r.finish_reason, FinishReason::Stop);

        // A server that answers with native calls anyway is taken at its word.
        let native = json!({
            "choices": [{"message": {"content": null, "tool_calls": [{"id": "n1", "type": "function", "function": {"name": "send_message", "arguments": "{}"}}]}, "finish_reason": "tool_calls"}]
        });
        let r = parse_completion(&native.to_string(), prepared).unwrap();
        assert_eq!(r.tool_calls[0].id, "n1");
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
        let r = parse_completion(&body.to_string(), None).unwrap();
        assert_eq!(r.content, "thinking");
        assert_eq!(r.tool_calls[0].name, "send_message");
        assert_eq!(r.usage.total(), 15);
        assert_eq!(r.finish_reason, FinishReason::ToolCalls);
        assert!(matches!(
            parse_completion("{\"choices\": []}", None),
            Err(LlmError::InvalidResponse { .. })
        ));
        assert!(matches!(
            parse_completion("<html>", None),
            Err(LlmError::InvalidResponse { .. })
        ));
    }
}
