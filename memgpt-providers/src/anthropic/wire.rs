//! Anthropic's JSON wire format: the request body built from a core [`ChatRequest`], and the
//! response, stream-event and error bodies.
//!
//! The Messages API differs from OpenAI's chat format in ways the mapping has to absorb:
//!
//! * one top-level `system` prompt: the leading system messages are joined into it, and later
//!   ones become user text;
//! * only `user` and `assistant` turns, strictly alternating: function results are
//!   `tool_result` blocks in a user turn, and consecutive turns of one role are merged;
//! * every `tool_use` must be answered by a `tool_result` in the very next turn, results
//!   first, and every `tool_result` must answer a `tool_use` of the turn before: see
//!   [`repair`];
//! * text blocks may not be empty, and `tool_use.input` must be a JSON object.

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::Arc;

use memgpt_core::llm::{ChatMessage, ChatRequest, FinishReason, Role, ToolChoice, Usage};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::config::AnthropicConfig;

/// The key under which arguments that are not a JSON object are replayed (see
/// [`tool_input`]).
pub(super) const RAW_ARGUMENTS_KEY: &str = "_raw";

/// The text of a `tool_result` invented for a call whose result is missing from the history.
pub(super) const MISSING_RESULT: &str = "No result was recorded for this function call.";

#[derive(Debug, Serialize)]
pub(super) struct MessagesBody<'a> {
    pub(super) model: &'a str,
    pub(super) max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) system: Option<SystemPrompt>,
    pub(super) messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) tool_choice: Option<WireToolChoice>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) temperature: Option<f32>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(super) stream: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum WireRole {
    User,
    Assistant,
}

#[derive(Debug, PartialEq, Serialize)]
pub(super) struct WireMessage<'a> {
    pub(super) role: WireRole,
    pub(super) content: Vec<Block<'a>>,
}

#[derive(Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum Block<'a> {
    Text {
        text: Cow<'a, str>,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Value,
    },
    ToolResult {
        tool_use_id: Cow<'a, str>,
        #[serde(skip_serializing_if = "str::is_empty")]
        content: Cow<'a, str>,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
}

#[derive(Debug, Serialize)]
pub(super) struct WireTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
}

/// The `system` prompt: one text, or blocks when the stable prefix carries a cache breakpoint.
#[derive(Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub(super) enum SystemPrompt {
    Text(String),
    Blocks(Vec<SystemBlock>),
}

/// A text block of the system prompt.
#[derive(Debug, PartialEq, Serialize)]
pub(super) struct SystemBlock {
    r#type: &'static str,
    text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

/// A prompt-cache breakpoint: everything up to here (tools, then system) is cached.
#[derive(Debug, PartialEq, Serialize)]
pub(super) struct CacheControl {
    r#type: &'static str,
}

#[derive(Debug, PartialEq, Serialize)]
pub(super) struct WireToolChoice {
    r#type: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    disable_parallel_tool_use: Option<bool>,
}

impl<'a> MessagesBody<'a> {
    /// The body for `request`; `stream` asks for server-sent events.
    pub(super) fn new(request: &'a ChatRequest, config: &'a AnthropicConfig, stream: bool) -> Self {
        let model = if request.model.is_empty() {
            config.model.as_str()
        } else {
            request.model.as_str()
        };
        let (system, messages) = conversation(&request.messages);
        let cached = request
            .cache_prefix
            .filter(|_| config.prompt_caching)
            .and_then(|stable| cached_system(&request.messages, stable));
        let system = cached.or_else(|| system.map(SystemPrompt::Text));
        let tools: Vec<WireTool<'a>> = request
            .tools
            .iter()
            .map(|t| WireTool {
                name: &t.name,
                description: &t.description,
                input_schema: &t.parameters,
            })
            .collect();
        let tool_choice = (!tools.is_empty()).then(|| {
            let (kind, may_disable_parallel) = match request.tool_choice {
                ToolChoice::Auto => ("auto", true),
                ToolChoice::Required => ("any", true),
                ToolChoice::None => ("none", false),
            };
            WireToolChoice {
                r#type: kind,
                disable_parallel_tool_use: (may_disable_parallel
                    && config.parallel_tool_calls == Some(false))
                .then_some(true),
            }
        });
        Self {
            model,
            max_tokens: request.max_tokens.unwrap_or(config.max_tokens),
            system,
            messages,
            tools,
            tool_choice,
            temperature: request.temperature,
            stream,
        }
    }
}

/// The system prompt in two blocks, a cache breakpoint after the first: the first `stable`
/// bytes of the first message (instructions and memory blocks), then the rest of it and any
/// further leading system messages. `None` when there is no such split.
fn cached_system(messages: &[Arc<ChatMessage>], stable: usize) -> Option<SystemPrompt> {
    let first = messages.first().filter(|m| m.role == Role::System)?;
    let head = first.content.get(..stable)?;
    if head.trim().is_empty() {
        return None;
    }
    let mut rest: Vec<&str> = vec![first.content.get(stable..)?.trim()];
    rest.extend(
        messages[1..]
            .iter()
            .take_while(|m| m.role == Role::System)
            .map(|m| m.content.trim()),
    );
    rest.retain(|part| !part.is_empty());
    let mut blocks = vec![SystemBlock {
        r#type: "text",
        text: head.to_owned(),
        cache_control: Some(CacheControl {
            r#type: "ephemeral",
        }),
    }];
    if !rest.is_empty() {
        blocks.push(SystemBlock {
            r#type: "text",
            text: rest.join("\n\n"),
            cache_control: None,
        });
    }
    Some(SystemPrompt::Blocks(blocks))
}

/// Splits `messages` into the system prompt and alternating user/assistant turns.
pub(super) fn conversation(
    messages: &[Arc<ChatMessage>],
) -> (Option<String>, Vec<WireMessage<'_>>) {
    let leading = messages
        .iter()
        .take_while(|m| m.role == Role::System)
        .count();
    let system: Vec<&str> = messages[..leading]
        .iter()
        .map(|m| m.content.trim())
        .filter(|c| !c.is_empty())
        .collect();
    let system = (!system.is_empty()).then(|| system.join("\n\n"));
    let mut turns: Vec<WireMessage<'_>> = Vec::with_capacity(messages.len() - leading);
    for m in &messages[leading..] {
        let (role, blocks) = match m.role {
            // Anthropic has one system prompt; a later system message is read as user text.
            Role::System | Role::User => (WireRole::User, text(&m.content).into_iter().collect()),
            Role::Assistant => {
                let mut blocks: Vec<Block<'_>> = text(&m.content).into_iter().collect();
                blocks.extend(m.tool_calls.iter().map(|call| Block::ToolUse {
                    id: &call.id,
                    name: &call.name,
                    input: tool_input(&call.arguments),
                }));
                (WireRole::Assistant, blocks)
            }
            Role::Tool => (
                WireRole::User,
                vec![Block::ToolResult {
                    tool_use_id: Cow::Borrowed(m.tool_call_id.as_deref().unwrap_or_default()),
                    content: Cow::Borrowed(&m.content),
                    is_error: false,
                }],
            ),
        };
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some(last) if last.role == role => last.content.extend(blocks),
            _ => turns.push(WireMessage {
                role,
                content: blocks,
            }),
        }
    }
    repair(&mut turns);
    (system, turns)
}

/// A text block, unless `content` is blank (Anthropic rejects blank text blocks).
fn text(content: &str) -> Option<Block<'_>> {
    (!content.trim().is_empty()).then_some(Block::Text {
        text: Cow::Borrowed(content),
    })
}

/// A stored call's arguments as a `tool_use` input, which Anthropic requires to be a JSON
/// object. Arguments are kept exactly as the model wrote them, so they may be anything: empty
/// arguments become `{}`, and arguments that are not a JSON object (invalid JSON, usually)
/// are sent as `{"_raw": "<the text>"}`, so a history holding a malformed call replays
/// instead of failing the request.
pub(super) fn tool_input(arguments: &str) -> Value {
    if arguments.trim().is_empty() {
        return Value::Object(Map::new());
    }
    match serde_json::from_str::<Value>(arguments) {
        Ok(object @ Value::Object(_)) => object,
        _ => {
            let mut raw = Map::new();
            raw.insert(
                RAW_ARGUMENTS_KEY.to_owned(),
                Value::String(arguments.to_owned()),
            );
            Value::Object(raw)
        }
    }
}

/// Makes the turns acceptable to Anthropic, whatever the history holds:
///
/// * a `tool_result` that does not answer a `tool_use` of the turn before (or answers one
///   twice) becomes a text block quoting it;
/// * a `tool_use` left unanswered by the next turn gets a `tool_result` marked `is_error`
///   saying no result was recorded (in a new user turn if the conversation ends there);
/// * in every user turn the `tool_result` blocks come first, as Anthropic requires.
///
/// MemGPT's queue keeps calls and results together, so this only changes histories built by
/// hand or truncated elsewhere.
pub(super) fn repair(turns: &mut Vec<WireMessage<'_>>) {
    let mut i = 0;
    while i < turns.len() {
        match turns[i].role {
            WireRole::User => {
                let calls = match i.checked_sub(1).map(|p| &turns[p]) {
                    Some(previous) => tool_use_ids(previous),
                    None => HashSet::new(),
                };
                let mut answered = HashSet::new();
                for block in &mut turns[i].content {
                    if let Block::ToolResult {
                        tool_use_id,
                        content,
                        ..
                    } = block
                    {
                        if calls.contains(&**tool_use_id) && answered.insert(tool_use_id.clone()) {
                            continue;
                        }
                        let quoted = format!("Result of function call `{tool_use_id}`: {content}");
                        *block = Block::Text {
                            text: Cow::Owned(quoted),
                        };
                    }
                }
            }
            WireRole::Assistant => {
                let calls: Vec<&str> = turns[i]
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        Block::ToolUse { id, .. } => Some(*id),
                        _ => None,
                    })
                    .collect();
                if !calls.is_empty() {
                    let answered: HashSet<String> = turns
                        .get(i + 1)
                        .map(|next| {
                            next.content
                                .iter()
                                .filter_map(|b| match b {
                                    Block::ToolResult { tool_use_id, .. } => {
                                        Some(tool_use_id.to_string())
                                    }
                                    _ => None,
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    let missing: Vec<Block<'_>> = calls
                        .into_iter()
                        .filter(|id| !answered.contains(*id))
                        .map(|id| Block::ToolResult {
                            tool_use_id: Cow::Owned(id.to_owned()),
                            content: Cow::Borrowed(MISSING_RESULT),
                            is_error: true,
                        })
                        .collect();
                    if !missing.is_empty() {
                        match turns.get_mut(i + 1) {
                            Some(next) => next.content.extend(missing),
                            None => turns.push(WireMessage {
                                role: WireRole::User,
                                content: missing,
                            }),
                        }
                    }
                }
            }
        }
        if turns[i].role == WireRole::User {
            // Results first, the rest after, each in its original order.
            turns[i]
                .content
                .sort_by_key(|b| !matches!(b, Block::ToolResult { .. }));
        }
        i += 1;
    }
}

fn tool_use_ids<'a>(turn: &WireMessage<'a>) -> HashSet<&'a str> {
    if turn.role != WireRole::Assistant {
        return HashSet::new();
    }
    turn.content
        .iter()
        .filter_map(|b| match b {
            Block::ToolUse { id, .. } => Some(*id),
            _ => None,
        })
        .collect()
}

/// A Messages API response (and the `message` of a `message_start` event).
#[derive(Debug, Deserialize)]
pub(super) struct MessageResponse {
    #[serde(default)]
    pub(super) model: String,
    #[serde(default)]
    pub(super) content: Vec<ResponseBlock>,
    #[serde(default)]
    pub(super) stop_reason: Option<String>,
    #[serde(default)]
    pub(super) usage: WireUsage,
}

/// A content block of a response.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum ResponseBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    /// Thinking, server tools, citations...: not part of a core response.
    #[serde(other)]
    Other,
}

/// Token usage. Every field is optional because `message_delta` events report only some.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
pub(super) struct WireUsage {
    #[serde(default)]
    pub(super) input_tokens: Option<u64>,
    #[serde(default)]
    pub(super) output_tokens: Option<u64>,
    #[serde(default)]
    pub(super) cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    pub(super) cache_read_input_tokens: Option<u64>,
}

impl WireUsage {
    /// Takes every count `later` reports (streamed counts are cumulative).
    pub(super) fn update(&mut self, later: WireUsage) {
        self.input_tokens = later.input_tokens.or(self.input_tokens);
        self.output_tokens = later.output_tokens.or(self.output_tokens);
        self.cache_creation_input_tokens = later
            .cache_creation_input_tokens
            .or(self.cache_creation_input_tokens);
        self.cache_read_input_tokens = later
            .cache_read_input_tokens
            .or(self.cache_read_input_tokens);
    }

    /// The core's usage: every input token, cached or not, counts as a prompt token.
    pub(super) fn to_usage(self) -> Usage {
        Usage {
            prompt_tokens: self.input_tokens.unwrap_or(0)
                + self.cache_creation_input_tokens.unwrap_or(0)
                + self.cache_read_input_tokens.unwrap_or(0),
            completion_tokens: self.output_tokens.unwrap_or(0),
            cached_prompt_tokens: self.cache_read_input_tokens.unwrap_or(0),
        }
    }
}

/// One server-sent event's JSON, by its `type`.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum StreamEvent {
    MessageStart {
        message: MessageResponse,
    },
    ContentBlockStart {
        index: usize,
        content_block: ResponseBlock,
    },
    ContentBlockDelta {
        index: usize,
        delta: BlockDelta,
    },
    ContentBlockStop {
        index: usize,
    },
    MessageDelta {
        delta: MessageDelta,
        #[serde(default)]
        usage: WireUsage,
    },
    MessageStop,
    Ping,
    Error {
        error: ErrorDetail,
    },
    /// Anthropic may add event types; unknown ones are ignored, as its docs ask.
    #[serde(other)]
    Unknown,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum BlockDelta {
    TextDelta {
        text: String,
    },
    InputJsonDelta {
        #[serde(default)]
        partial_json: String,
    },
    /// Thinking, signatures, citations: ignored.
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
pub(super) struct MessageDelta {
    #[serde(default)]
    pub(super) stop_reason: Option<String>,
}

/// The `error` object of an error body or `error` event.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub(super) struct ErrorDetail {
    #[serde(default, rename = "type")]
    pub(super) kind: String,
    #[serde(default)]
    pub(super) message: String,
}

#[derive(Deserialize)]
struct ErrorBody {
    error: ErrorDetail,
}

/// The `error` of an error body (`{"type":"error","error":{"type":...,"message":...}}`), if
/// the body is one.
pub(super) fn error_detail(body: &str) -> Option<ErrorDetail> {
    serde_json::from_str::<ErrorBody>(body)
        .ok()
        .map(|b| b.error)
}

/// The HTTP status Anthropic documents for an error type, so an `error` event in a stream
/// (which arrives with status 200) is classified like the same error as a status.
pub(super) fn status_of_error_type(kind: &str) -> Option<u16> {
    Some(match kind {
        "invalid_request_error" => 400,
        "authentication_error" => 401,
        "billing_error" => 402,
        "permission_error" => 403,
        "not_found_error" => 404,
        "request_too_large" => 413,
        "rate_limit_error" => 429,
        "api_error" => 500,
        "timeout_error" => 504,
        "overloaded_error" => 529,
        _ => return None,
    })
}

/// Whether an error means the prompt does not fit the context window: Anthropic answers 400
/// `invalid_request_error` "prompt is too long: 210000 tokens > 200000 maximum", or "input
/// length and `max_tokens` exceed context limit". A 413 `request_too_large` (over the size
/// limit in bytes) counts too, since shortening the prompt is also its remedy.
pub(super) fn is_context_overflow(status: u16, detail: Option<&ErrorDetail>) -> bool {
    if status == 413 || detail.is_some_and(|d| d.kind == "request_too_large") {
        return true;
    }
    let Some(detail) = detail else {
        return false;
    };
    if !matches!(status, 400 | 500) {
        return false;
    }
    let message = detail.message.to_lowercase();
    [
        "prompt is too long",
        "exceed context limit",
        "exceeds context limit",
        "context window",
        "context length",
    ]
    .iter()
    .any(|needle| message.contains(needle))
}

/// The core's finish reason for a `stop_reason`.
pub(super) fn finish_reason(reason: Option<&str>) -> FinishReason {
    match reason {
        Some("end_turn" | "stop_sequence") | None => FinishReason::Stop,
        Some("tool_use") => FinishReason::ToolCalls,
        // The second: generation stopped at the context window rather than at `max_tokens`.
        Some("max_tokens" | "model_context_window_exceeded") => FinishReason::Length,
        Some("refusal") => FinishReason::ContentFilter,
        Some(other) => FinishReason::Other(other.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use memgpt_core::llm::ToolSchema;
    use memgpt_core::message::ToolCall;
    use serde_json::json;

    use super::*;

    fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    fn assistant(content: &str, calls: Vec<ToolCall>) -> ChatMessage {
        let mut m = ChatMessage::assistant(content);
        m.tool_calls = calls;
        m
    }

    fn tool(id: &str, content: &str) -> ChatMessage {
        let mut m = ChatMessage::new(Role::Tool, content);
        m.tool_call_id = Some(id.into());
        m.name = Some("f".into());
        m
    }

    fn body_json(request: &ChatRequest, config: &AnthropicConfig, stream: bool) -> Value {
        serde_json::to_value(MessagesBody::new(request, config, stream)).unwrap()
    }

    #[test]
    fn a_memgpt_conversation_maps_to_alternating_turns() {
        let mut request = ChatRequest::new(
            "",
            vec![
                ChatMessage::system("You are MemGPT."),
                ChatMessage::system("Core memory: ..."),
                ChatMessage::user("{\"type\":\"system_alert\",\"message\":\"summary\"}"),
                ChatMessage::user("{\"type\":\"user_message\",\"message\":\"hi\"}"),
                assistant(
                    "Saving a fact.",
                    vec![
                        call(
                            "toolu_1",
                            "core_memory_append",
                            "{\"label\":\"human\",\"content\":\"x\",\"request_heartbeat\":true}",
                        ),
                        call("toolu_2", "conversation_search", ""),
                    ],
                ),
                tool("toolu_1", "{\"status\":\"OK\"}"),
                tool("toolu_2", "{\"status\":\"OK\",\"message\":\"none\"}"),
                ChatMessage::user("{\"type\":\"heartbeat\"}"),
                assistant("", vec![call("toolu_3", "send_message", "{'bad': json")]),
                tool("toolu_3", "{\"status\":\"Failed\"}"),
                ChatMessage::system("Memory pressure warning"),
            ],
        );
        request.tools = Arc::from(vec![ToolSchema {
            name: "send_message".into(),
            description: "Say something.".into(),
            parameters: json!({"type": "object", "properties": {"message": {"type": "string"}}}),
        }]);
        request.tool_choice = ToolChoice::Required;
        request.temperature = Some(0.5);
        let config = AnthropicConfig::new("http://x", "claude-default");
        let body = body_json(&request, &config, false);
        assert_eq!(
            body,
            json!({
                "model": "claude-default",
                "max_tokens": 4096,
                "system": "You are MemGPT.\n\nCore memory: ...",
                "messages": [
                    {"role": "user", "content": [
                        {"type": "text", "text": "{\"type\":\"system_alert\",\"message\":\"summary\"}"},
                        {"type": "text", "text": "{\"type\":\"user_message\",\"message\":\"hi\"}"}
                    ]},
                    {"role": "assistant", "content": [
                        {"type": "text", "text": "Saving a fact."},
                        {"type": "tool_use", "id": "toolu_1", "name": "core_memory_append",
                         "input": {"label": "human", "content": "x", "request_heartbeat": true}},
                        {"type": "tool_use", "id": "toolu_2", "name": "conversation_search", "input": {}}
                    ]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "{\"status\":\"OK\"}"},
                        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "{\"status\":\"OK\",\"message\":\"none\"}"},
                        {"type": "text", "text": "{\"type\":\"heartbeat\"}"}
                    ]},
                    {"role": "assistant", "content": [
                        {"type": "tool_use", "id": "toolu_3", "name": "send_message",
                         "input": {"_raw": "{'bad': json"}}
                    ]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_3", "content": "{\"status\":\"Failed\"}"},
                        {"type": "text", "text": "Memory pressure warning"}
                    ]}
                ],
                "tools": [{"name": "send_message", "description": "Say something.",
                           "input_schema": {"type": "object", "properties": {"message": {"type": "string"}}}}],
                "tool_choice": {"type": "any"},
                "temperature": 0.5
            })
        );
        assert_eq!(body_json(&request, &config, true)["stream"], true);
    }

    #[test]
    fn tool_choice_and_limits() {
        let mut request = ChatRequest::new("claude-haiku-4-5", vec![ChatMessage::user("hi")]);
        let mut config = AnthropicConfig::new("http://x", "default").with_max_tokens(1000);
        let body = body_json(&request, &config, false);
        assert_eq!(body["model"], "claude-haiku-4-5");
        assert_eq!(body["max_tokens"], 1000);
        assert!(body.get("tools").is_none() && body.get("tool_choice").is_none());
        assert!(body.get("system").is_none() && body.get("stream").is_none());

        request.max_tokens = Some(77);
        request.tools = Arc::from(vec![ToolSchema {
            name: "f".into(),
            description: "".into(),
            parameters: json!({"type": "object"}),
        }]);
        config.parallel_tool_calls = Some(false);
        for (choice, expected) in [
            (
                ToolChoice::Auto,
                json!({"type": "auto", "disable_parallel_tool_use": true}),
            ),
            (
                ToolChoice::Required,
                json!({"type": "any", "disable_parallel_tool_use": true}),
            ),
            (ToolChoice::None, json!({"type": "none"})),
        ] {
            request.tool_choice = choice;
            let body = body_json(&request, &config, false);
            assert_eq!(body["tool_choice"], expected);
            assert_eq!(body["max_tokens"], 77);
        }
    }

    #[test]
    fn broken_histories_are_repaired() {
        let messages = vec![
            // A result whose call was evicted, and one without an id.
            tool("toolu_gone", "{\"status\":\"OK\"}"),
            ChatMessage::new(Role::Tool, "orphan"),
            // Blank content is dropped, so the two assistant turns merge.
            assistant("  ", vec![]),
            assistant("thinking", vec![call("a", "f", "{}"), call("b", "f", "{}")]),
            // Text before the result, a duplicate result, a missing result for `b`.
            ChatMessage::user("heartbeat"),
            tool("a", "ok"),
            tool("a", "again"),
            assistant("", vec![call("c", "f", "{}")]),
        ]
        .into_iter()
        .map(Arc::new)
        .collect::<Vec<_>>();
        let (system, turns) = conversation(&messages);
        assert_eq!(system, None);
        let turns = serde_json::to_value(&turns).unwrap();
        assert_eq!(
            turns,
            json!([
                {"role": "user", "content": [
                    {"type": "text", "text": "Result of function call `toolu_gone`: {\"status\":\"OK\"}"},
                    {"type": "text", "text": "Result of function call ``: orphan"}
                ]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "thinking"},
                    {"type": "tool_use", "id": "a", "name": "f", "input": {}},
                    {"type": "tool_use", "id": "b", "name": "f", "input": {}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "a", "content": "ok"},
                    {"type": "tool_result", "tool_use_id": "b", "content": MISSING_RESULT, "is_error": true},
                    {"type": "text", "text": "heartbeat"},
                    {"type": "text", "text": "Result of function call `a`: again"}
                ]},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "c", "name": "f", "input": {}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "c", "content": MISSING_RESULT, "is_error": true}
                ]}
            ])
        );
    }

    #[test]
    fn arguments_always_become_an_object() {
        assert_eq!(tool_input(""), json!({}));
        assert_eq!(tool_input(" {\"a\": [1]} "), json!({"a": [1]}));
        assert_eq!(tool_input("[1, 2]"), json!({"_raw": "[1, 2]"}));
        assert_eq!(tool_input("{'a': 1}"), json!({"_raw": "{'a': 1}"}));
    }

    #[test]
    fn usage_counts_cached_input_and_takes_later_counts() {
        let mut usage: WireUsage = serde_json::from_value(json!({
            "input_tokens": 10, "output_tokens": 1,
            "cache_creation_input_tokens": 100, "cache_read_input_tokens": null
        }))
        .unwrap();
        usage.update(serde_json::from_value(json!({"output_tokens": 42})).unwrap());
        assert_eq!(
            usage.to_usage(),
            Usage {
                prompt_tokens: 110,
                completion_tokens: 42,
                cached_prompt_tokens: 0,
            }
        );
    }

    #[test]
    fn errors_are_read_and_classified() {
        let overflow = json!({"type": "error", "error": {"type": "invalid_request_error",
            "message": "prompt is too long: 210000 tokens > 200000 maximum"}})
        .to_string();
        let detail = error_detail(&overflow).unwrap();
        assert_eq!(detail.kind, "invalid_request_error");
        assert!(is_context_overflow(400, Some(&detail)));
        let limit = ErrorDetail {
            kind: "invalid_request_error".into(),
            message: "input length and `max_tokens` exceed context limit: 198000 + 4096 > 200000"
                .into(),
        };
        assert!(is_context_overflow(400, Some(&limit)));
        assert!(is_context_overflow(413, None));
        let other = ErrorDetail {
            kind: "invalid_request_error".into(),
            message: "max_tokens: 100000 > 64000, which is the maximum allowed".into(),
        };
        assert!(!is_context_overflow(400, Some(&other)));
        assert!(!is_context_overflow(429, Some(&detail)));
        assert_eq!(error_detail("<html>"), None);
        assert_eq!(status_of_error_type("overloaded_error"), Some(529));
        assert_eq!(status_of_error_type("brand_new_error"), None);
    }

    #[test]
    fn stop_reasons() {
        assert_eq!(finish_reason(Some("end_turn")), FinishReason::Stop);
        assert_eq!(finish_reason(Some("stop_sequence")), FinishReason::Stop);
        assert_eq!(finish_reason(Some("tool_use")), FinishReason::ToolCalls);
        assert_eq!(finish_reason(Some("max_tokens")), FinishReason::Length);
        assert_eq!(finish_reason(Some("refusal")), FinishReason::ContentFilter);
        assert_eq!(
            finish_reason(Some("pause_turn")),
            FinishReason::Other("pause_turn".into())
        );
    }
}
