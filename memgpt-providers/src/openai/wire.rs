//! OpenAI's JSON wire format.

use std::borrow::Cow;

use memgpt_core::llm::{ChatMessage, ChatRequest, FinishReason, Role, ToolChoice, Usage};
use memgpt_core::message::ToolCall;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use super::calling::{Prepared, TextMessage, text_history};
use super::config::ToolCalling;

#[derive(Serialize)]
pub(super) struct ChatBody<'a> {
    pub(super) model: &'a str,
    pub(super) messages: Vec<WireEntry<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) tool_choice: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) parallel_tool_calls: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) max_completion_tokens: Option<u32>,
    /// [`ToolCalling::JsonSchema`]: the union schema of the functions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) response_format: Option<&'a Value>,
    /// [`ToolCalling::GuidedJson`] (vLLM): the union schema of the functions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) guided_json: Option<&'a Value>,
    /// [`ToolCalling::Grammar`] (llama.cpp): the GBNF grammar of the calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) grammar: Option<&'a str>,
    /// Server-sent events instead of one body.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(super) stream: bool,
    /// Asks for token usage in a last chunk when streaming.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) stream_options: Option<StreamOptions>,
}

/// `stream_options` of a streamed request.
#[derive(Serialize)]
pub(super) struct StreamOptions {
    pub(super) include_usage: bool,
}

/// A message of the body: encoded now, or its JSON as encoded before
/// ([`EncodedMessages`](super::encoded::EncodedMessages)).
#[derive(Serialize)]
#[serde(untagged)]
pub(super) enum WireEntry<'a> {
    Message(WireMessage<'a>),
    Encoded(&'a RawValue),
}

#[derive(Serialize)]
pub(super) struct WireMessage<'a> {
    role: &'static str,
    /// `null` for an assistant message that only calls functions.
    content: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<WireToolCall<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
}

#[derive(Serialize)]
struct WireToolCall<'a> {
    id: &'a str,
    r#type: &'static str,
    function: WireFunctionCall<'a>,
}

#[derive(Serialize)]
struct WireFunctionCall<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[derive(Serialize)]
pub(super) struct WireTool<'a> {
    r#type: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

impl<'a> ChatBody<'a> {
    /// The body for `request`. `structured` is set when function calls are requested through a
    /// non-native [`ToolCalling`] mode (and the request offers functions). `encoded`, when
    /// given, is the wire JSON of each of the request's messages (native calling only; the
    /// text-only history is a different list).
    pub(super) fn new(
        request: &'a ChatRequest,
        default_model: &'a str,
        config: &super::config::OpenAiConfig,
        structured: Option<&'a Prepared>,
        encoded: Option<&'a [std::sync::Arc<RawValue>]>,
    ) -> Self {
        let model = if request.model.is_empty() {
            default_model
        } else {
            request.model.as_str()
        };
        let max_tokens = request
            .max_tokens
            .filter(|_| !config.uses_max_completion_tokens());
        let max_completion_tokens = request
            .max_tokens
            .filter(|_| config.uses_max_completion_tokens());
        if config.tool_calling != ToolCalling::Native {
            // Servers without tool support: no `tools`, a text-only history.
            let messages = text_history(&request.messages, structured.map(|p| p.prompt.as_str()))
                .into_iter()
                .map(|m| WireEntry::Message(WireMessage::from(m)))
                .collect();
            return Self {
                model,
                messages,
                tools: Vec::new(),
                tool_choice: None,
                parallel_tool_calls: None,
                temperature: request.temperature,
                max_tokens,
                max_completion_tokens,
                response_format: structured.and_then(|p| p.response_format.as_ref()),
                guided_json: structured.and_then(|p| p.guided_json.as_ref()),
                grammar: structured.and_then(|p| p.grammar.as_deref()),
                stream: false,
                stream_options: None,
            };
        }
        let tools: Vec<WireTool<'a>> = request
            .tools
            .iter()
            .map(|t| WireTool {
                r#type: "function",
                function: WireFunction {
                    name: &t.name,
                    description: &t.description,
                    parameters: &t.parameters,
                },
            })
            .collect();
        let tool_choice = (!tools.is_empty() && config.supports_tool_choice).then_some(
            match request.tool_choice {
                ToolChoice::Auto => "auto",
                ToolChoice::Required => "required",
                ToolChoice::None => "none",
            },
        );
        Self {
            model,
            messages: match encoded {
                Some(encoded) => encoded.iter().map(|j| WireEntry::Encoded(j)).collect(),
                None => request
                    .messages
                    .iter()
                    .map(|m| WireEntry::Message(WireMessage::from(&**m)))
                    .collect(),
            },
            parallel_tool_calls: if tools.is_empty() {
                None
            } else {
                config.parallel_tool_calls
            },
            tools,
            tool_choice,
            temperature: request.temperature,
            max_tokens,
            max_completion_tokens,
            response_format: None,
            guided_json: None,
            grammar: None,
            stream: false,
            stream_options: None,
        }
    }

    /// The same body, asking for server-sent events (with usage in the last chunk).
    pub(super) fn streamed(mut self) -> Self {
        self.stream = true;
        self.stream_options = Some(StreamOptions {
            include_usage: true,
        });
        self
    }
}

impl<'a> From<TextMessage<'a>> for WireMessage<'a> {
    fn from(m: TextMessage<'a>) -> Self {
        Self {
            role: m.role,
            content: Some(m.content),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }
}

impl<'a> From<&'a ChatMessage> for WireMessage<'a> {
    fn from(m: &'a ChatMessage) -> Self {
        let role = match m.role {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        };
        let content =
            if m.role == Role::Assistant && m.content.is_empty() && !m.tool_calls.is_empty() {
                None
            } else {
                Some(Cow::Borrowed(m.content.as_str()))
            };
        Self {
            role,
            content,
            tool_calls: m
                .tool_calls
                .iter()
                .map(|c| WireToolCall {
                    id: &c.id,
                    r#type: "function",
                    function: WireFunctionCall {
                        name: &c.name,
                        arguments: &c.arguments,
                    },
                })
                .collect(),
            tool_call_id: m.tool_call_id.as_deref(),
        }
    }
}

#[derive(Deserialize)]
pub(super) struct ChatCompletion {
    #[serde(default)]
    pub(super) model: String,
    #[serde(default)]
    pub(super) choices: Vec<Choice>,
    #[serde(default)]
    pub(super) usage: Option<WireUsage>,
}

#[derive(Deserialize)]
pub(super) struct Choice {
    pub(super) message: ResponseMessage,
    #[serde(default)]
    pub(super) finish_reason: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct ResponseMessage {
    #[serde(default)]
    pub(super) content: Option<String>,
    /// Some servers (DeepSeek, vLLM reasoning parsers) put the model's thinking here.
    #[serde(default)]
    pub(super) reasoning_content: Option<String>,
    #[serde(default)]
    pub(super) tool_calls: Vec<ResponseToolCall>,
    /// The legacy single-function form.
    #[serde(default)]
    pub(super) function_call: Option<ResponseFunction>,
}

#[derive(Deserialize)]
pub(super) struct ResponseToolCall {
    #[serde(default)]
    pub(super) id: Option<String>,
    pub(super) function: ResponseFunction,
}

#[derive(Deserialize)]
pub(super) struct ResponseFunction {
    #[serde(default)]
    pub(super) name: String,
    /// A JSON string normally; some servers send an object.
    #[serde(default)]
    pub(super) arguments: Value,
}

#[derive(Deserialize)]
pub(super) struct WireUsage {
    #[serde(default)]
    pub(super) prompt_tokens: u64,
    #[serde(default)]
    pub(super) completion_tokens: u64,
    /// `cached_tokens`: prompt tokens read from the server's prompt cache.
    #[serde(default)]
    pub(super) prompt_tokens_details: Option<PromptTokensDetails>,
}

#[derive(Deserialize)]
pub(super) struct PromptTokensDetails {
    #[serde(default)]
    pub(super) cached_tokens: Option<u64>,
}

impl WireUsage {
    /// The core's usage.
    pub(super) fn to_usage(&self) -> Usage {
        Usage {
            prompt_tokens: self.prompt_tokens,
            completion_tokens: self.completion_tokens,
            cached_prompt_tokens: self
                .prompt_tokens_details
                .as_ref()
                .and_then(|d| d.cached_tokens)
                .unwrap_or(0),
        }
    }
}

impl ResponseMessage {
    /// The calls, with ids invented where the server gave none and arguments as a string.
    pub(super) fn calls(self) -> Vec<ToolCall> {
        let legacy = self.function_call.map(|f| ResponseToolCall {
            id: None,
            function: f,
        });
        self.tool_calls
            .into_iter()
            .chain(legacy)
            .enumerate()
            .map(|(i, call)| ToolCall {
                id: call
                    .id
                    .filter(|id| !id.is_empty())
                    .unwrap_or_else(|| format!("call_{i}")),
                name: call.function.name,
                arguments: match call.function.arguments {
                    Value::String(s) => s,
                    Value::Null => String::new(),
                    other => other.to_string(),
                },
            })
            .collect()
    }
}

pub(super) fn finish_reason(reason: Option<&str>) -> FinishReason {
    match reason {
        Some("stop") | None => FinishReason::Stop,
        Some("tool_calls" | "function_call") => FinishReason::ToolCalls,
        Some("length") => FinishReason::Length,
        Some("content_filter") => FinishReason::ContentFilter,
        Some(other) => FinishReason::Other(other.to_owned()),
    }
}

#[derive(Serialize)]
pub(super) struct EmbeddingBody<'a> {
    pub(super) model: &'a str,
    pub(super) input: &'a [String],
    pub(super) encoding_format: &'static str,
}

#[derive(Deserialize)]
pub(super) struct EmbeddingResponse {
    pub(super) data: Vec<EmbeddingData>,
}

#[derive(Deserialize)]
pub(super) struct EmbeddingData {
    #[serde(default)]
    pub(super) index: Option<usize>,
    pub(super) embedding: Vec<f32>,
}

/// The `error.message` of an error body, if it has one.
pub(super) fn error_message(body: &str) -> Option<String> {
    let value: Value = serde_json::from_str(body).ok()?;
    let error = value.get("error")?;
    match error {
        Value::String(s) => Some(s.clone()),
        Value::Object(_) => error.get("message")?.as_str().map(str::to_owned),
        _ => None,
    }
}

fn error_code(body: &str) -> Option<String> {
    let value: Value = serde_json::from_str(body).ok()?;
    let error = value.get("error")?;
    error
        .get("code")
        .or_else(|| error.get("type"))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// Whether an error response means the prompt was too long. Servers word this differently:
/// OpenAI sets `code: context_length_exceeded`; others only say it in the message.
pub(super) fn is_context_overflow(status: u16, body: &str) -> bool {
    if !matches!(status, 400 | 413 | 422 | 500) {
        return false;
    }
    if error_code(body).as_deref() == Some("context_length_exceeded") {
        return true;
    }
    let text = error_message(body)
        .unwrap_or_else(|| body.to_owned())
        .to_lowercase();
    [
        "maximum context length",
        "context length exceeded",
        "context_length_exceeded",
        "exceeds the context",
        "exceed the context",
        "exceeds the available context",
        "reduce the length of the messages",
        "prompt is too long",
        "input is too long",
    ]
    .iter()
    .any(|needle| text.contains(needle))
}

/// Whether a 429 means the account is out of credit (retrying will not help).
pub(super) fn is_quota_exhausted(body: &str) -> bool {
    error_code(body).as_deref() == Some("insufficient_quota")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn overflow_detection_reads_codes_and_messages() {
        let openai = json!({"error": {"message": "This model's maximum context length is 8192 tokens.", "code": "context_length_exceeded"}});
        assert!(is_context_overflow(400, &openai.to_string()));
        let llamacpp = json!({"error": {"message": "the request exceeds the available context size, try increasing it"}});
        assert!(is_context_overflow(400, &llamacpp.to_string()));
        assert!(!is_context_overflow(
            400,
            &json!({"error": {"message": "invalid model"}}).to_string()
        ));
        assert!(!is_context_overflow(429, &openai.to_string()));
        let max_tokens = json!({"error": {"message": "max_tokens is too large: 100000. This model supports at most 16384 completion tokens"}});
        assert!(
            !is_context_overflow(400, &max_tokens.to_string()),
            "a completion limit is not a context overflow"
        );
    }

    #[test]
    fn quota_is_not_a_rate_limit() {
        assert!(is_quota_exhausted(
            &json!({"error": {"code": "insufficient_quota", "message": "x"}}).to_string()
        ));
        assert!(!is_quota_exhausted(
            &json!({"error": {"code": "rate_limit_exceeded"}}).to_string()
        ));
    }

    #[test]
    fn calls_get_ids_and_string_arguments() {
        let m: ResponseMessage = serde_json::from_value(json!({
            "content": null,
            "tool_calls": [
                {"function": {"name": "a", "arguments": {"x": 1}}},
                {"id": "c9", "type": "function", "function": {"name": "b", "arguments": "{\"y\":2}"}}
            ]
        }))
        .unwrap();
        let calls = m.calls();
        assert_eq!(calls[0].id, "call_0");
        assert_eq!(calls[0].arguments, "{\"x\":1}");
        assert_eq!(calls[1].id, "c9");
        let legacy: ResponseMessage =
            serde_json::from_value(json!({"function_call": {"name": "f", "arguments": "{}"}}))
                .unwrap();
        assert_eq!(legacy.calls()[0].name, "f");
    }
}
