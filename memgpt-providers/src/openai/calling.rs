//! Function calls without native tool calling: what the [`ToolCalling`] modes other than
//! `Native` send, how they show the history, and how they read replies.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use memgpt_core::llm::{ChatMessage, FinishReason, LlmError, Role, ToolSchema};
use memgpt_core::message::ToolCall;
use serde_json::{Value, json};
use tracing::{debug, warn};

use super::ToolCalling;
use crate::structured::{
    self, CallError, GbnfOptions, INVALID_REPLY_FUNCTION, UnionOptions, call_text,
};

/// The name of the schema in `response_format` (OpenAI wants one).
const SCHEMA_NAME: &str = "function_call";

/// What a structured request carries, computed once per set of functions.
#[derive(Debug)]
pub(super) struct Prepared {
    tools: Arc<[ToolSchema]>,
    mode: ToolCalling,
    /// The system-prompt addendum.
    pub(super) prompt: String,
    /// `response_format` (JSON-schema mode).
    pub(super) response_format: Option<Value>,
    /// `guided_json` (vLLM mode).
    pub(super) guided_json: Option<Value>,
    /// `grammar` (llama.cpp mode).
    pub(super) grammar: Option<String>,
}

impl Prepared {
    fn build(tools: &Arc<[ToolSchema]>, mode: ToolCalling) -> Result<Self, LlmError> {
        let invalid = |what: &str, e: &dyn std::fmt::Display| LlmError::Permanent {
            status: None,
            message: format!("could not build the function-call {what}: {e}"),
        };
        let union = UnionOptions::default();
        let schema = match mode {
            ToolCalling::JsonSchema | ToolCalling::GuidedJson => {
                Some(structured::union_schema(tools, &union).map_err(|e| invalid("schema", &e))?)
            }
            _ => None,
        };
        let grammar = match mode {
            ToolCalling::Grammar => Some(
                structured::tool_call_grammar(tools, &union, &GbnfOptions::default())
                    .map_err(|e| invalid("grammar", &e))?,
            ),
            _ => None,
        };
        let (response_format, guided_json) = match mode {
            ToolCalling::JsonSchema => (
                schema.map(|schema| {
                    json!({
                        "type": "json_schema",
                        "json_schema": {"name": SCHEMA_NAME, "strict": true, "schema": schema},
                    })
                }),
                None,
            ),
            ToolCalling::GuidedJson => (None, schema),
            _ => (None, None),
        };
        Ok(Self {
            tools: tools.clone(),
            mode,
            prompt: structured::protocol_prompt(tools),
            response_format,
            guided_json,
            grammar,
        })
    }

    /// Reads a reply's text as one function call. Never fails: a reply that is not a call
    /// becomes a call to [`INVALID_REPLY_FUNCTION`] whose `error` argument tells the model
    /// what to do, and the reply itself stays the content (see [`ToolCalling`]).
    pub(super) fn read_reply(
        &self,
        text: &str,
        reasoning: Option<&str>,
        finish: &FinishReason,
    ) -> (String, ToolCall) {
        let id = format!("call_{:016x}", fastrand::u64(..));
        let parsed = match self.mode {
            ToolCalling::Text => structured::parse_lenient(text, &self.tools),
            // Constrained output should parse as is; a server that ignored the constraint
            // still gets the lenient reading.
            _ => structured::parse_call(text, &self.tools)
                .or_else(|_| structured::parse_lenient(text, &self.tools)),
        };
        match parsed {
            Ok(call) => {
                if !call.repairs.is_empty() {
                    debug!(function = %call.function, repairs = ?call.repairs, "repaired a function call");
                }
                let (mut monologue, call) = call.into_parts(id);
                if monologue.is_empty() {
                    monologue = reasoning.unwrap_or_default().trim().to_owned();
                }
                (monologue, call)
            }
            Err(error) => {
                warn!(%error, mode = %self.mode, "the reply is not a function call; telling the model");
                (
                    text.to_owned(),
                    invalid_reply(&error, &self.tools, finish, id),
                )
            }
        }
    }
}

/// The synthetic call standing for a reply that is not a call.
fn invalid_reply(
    error: &CallError,
    tools: &[ToolSchema],
    finish: &FinishReason,
    id: String,
) -> ToolCall {
    let mut message = structured::feedback(error, tools);
    if *finish == FinishReason::Length {
        message = format!(
            "Your reply was cut off at the completion token limit; keep it shorter. {message}"
        );
    }
    ToolCall {
        id,
        name: INVALID_REPLY_FUNCTION.to_owned(),
        arguments: json!({ "error": message }).to_string(),
    }
}

/// The [`Prepared`] request parts for the latest set of functions (agents send the same
/// `Arc` every step, so this is built once).
#[derive(Clone, Debug, Default)]
pub(super) struct PreparedCache(Arc<Mutex<Option<Arc<Prepared>>>>);

impl PreparedCache {
    pub(super) fn get(
        &self,
        tools: &Arc<[ToolSchema]>,
        mode: ToolCalling,
    ) -> Result<Arc<Prepared>, LlmError> {
        let mut slot = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(prepared) = slot.as_ref()
            && prepared.mode == mode
            && (Arc::ptr_eq(&prepared.tools, tools) || prepared.tools == *tools)
        {
            return Ok(prepared.clone());
        }
        let prepared = Arc::new(Prepared::build(tools, mode)?);
        *slot = Some(prepared.clone());
        Ok(prepared)
    }
}

/// A message of the text-only history.
#[derive(Debug, PartialEq)]
pub(super) struct TextMessage<'a> {
    pub(super) role: &'static str,
    pub(super) content: Cow<'a, str>,
}

/// The history as servers without tool support accept it: the addendum appended to the first
/// system message, calls as JSON text in assistant messages, results as user messages
/// (`[function result for NAME] ...`, or the feedback for an invalid reply), consecutive user
/// messages merged.
pub(super) fn text_history<'a>(
    messages: &'a [Arc<ChatMessage>],
    addendum: Option<&str>,
) -> Vec<TextMessage<'a>> {
    let mut out: Vec<TextMessage<'a>> = Vec::with_capacity(messages.len() + 1);
    // The calls of the latest assistant message, by id.
    let mut calls: HashMap<&str, &ToolCall> = HashMap::new();
    let mut addendum = addendum;
    for (i, message) in messages.iter().enumerate() {
        let (role, content): (&'static str, Cow<'a, str>) = match message.role {
            Role::System => match addendum.take() {
                Some(extra) => (
                    "system",
                    Cow::Owned(format!("{}\n\n{extra}", message.content)),
                ),
                None => ("system", Cow::Borrowed(message.content.as_str())),
            },
            Role::User => ("user", Cow::Borrowed(message.content.as_str())),
            Role::Assistant if message.tool_calls.is_empty() => {
                ("assistant", Cow::Borrowed(message.content.as_str()))
            }
            Role::Assistant => {
                calls = message
                    .tool_calls
                    .iter()
                    .map(|c| (c.id.as_str(), c))
                    .collect();
                let content = if message
                    .tool_calls
                    .iter()
                    .any(|c| c.name == INVALID_REPLY_FUNCTION)
                {
                    // What the model actually wrote.
                    if message.content.is_empty() {
                        Cow::Borrowed("(empty reply)")
                    } else {
                        Cow::Borrowed(message.content.as_str())
                    }
                } else {
                    let texts: Vec<String> = message
                        .tool_calls
                        .iter()
                        .enumerate()
                        .map(|(n, call)| {
                            let thinking = if n == 0 { message.content.as_str() } else { "" };
                            call_text(Some(thinking), call)
                        })
                        .collect();
                    Cow::Owned(texts.join("\n"))
                };
                ("assistant", content)
            }
            Role::Tool => {
                let call = message
                    .tool_call_id
                    .as_deref()
                    .and_then(|id| calls.get(id).copied());
                let invalid = call.map_or(message.name.as_deref(), |c| Some(c.name.as_str()))
                    == Some(INVALID_REPLY_FUNCTION);
                let content = if invalid {
                    let feedback = call
                        .and_then(|c| serde_json::from_str::<Value>(&c.arguments).ok())
                        .and_then(|v| v["error"].as_str().map(str::to_owned))
                        .unwrap_or_else(|| "Your reply was not a valid function call.".to_owned());
                    format!("[function call error] {feedback}")
                } else {
                    let name = message
                        .name
                        .as_deref()
                        .or(call.map(|c| c.name.as_str()))
                        .unwrap_or("function");
                    format!("[function result for {name}] {}", message.content)
                };
                ("user", Cow::Owned(content))
            }
        };
        if i == 0
            && role != "system"
            && let Some(extra) = addendum.take()
        {
            out.push(TextMessage {
                role: "system",
                content: Cow::Owned(extra.to_owned()),
            });
        }
        match out.last_mut() {
            Some(last) if role == "user" && last.role == "user" => {
                let merged = format!("{}\n\n{content}", last.content);
                last.content = Cow::Owned(merged);
            }
            _ => out.push(TextMessage { role, content }),
        }
    }
    if let Some(extra) = addendum {
        // No messages at all.
        out.push(TextMessage {
            role: "system",
            content: Cow::Owned(extra.to_owned()),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools() -> Arc<[ToolSchema]> {
        Arc::from(vec![
            ToolSchema {
                name: "send_message".into(),
                description: "Sends a message.".into(),
                parameters: json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}),
            },
            ToolSchema {
                name: "core_memory_append".into(),
                description: "Appends.".into(),
                parameters: json!({"type": "object", "properties": {"label": {"type": "string"}, "content": {"type": "string"}, "request_heartbeat": {"type": "boolean"}}, "required": ["label", "content", "request_heartbeat"]}),
            },
        ])
    }

    #[test]
    fn the_cache_rebuilds_only_for_new_functions_or_modes() {
        let cache = PreparedCache::default();
        let tools = tools();
        let a = cache.get(&tools, ToolCalling::JsonSchema).unwrap();
        let b = cache.get(&tools, ToolCalling::JsonSchema).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        let c = cache.get(&tools, ToolCalling::Grammar).unwrap();
        assert!(c.grammar.as_deref().unwrap().starts_with("root ::= "));
        assert!(c.response_format.is_none() && c.guided_json.is_none());
        let d = cache
            .get(&Arc::from(&tools[..1]), ToolCalling::Grammar)
            .unwrap();
        assert!(!Arc::ptr_eq(&c, &d));
        assert!(matches!(
            cache.get(&Arc::from(Vec::new()), ToolCalling::JsonSchema),
            Err(LlmError::Permanent { .. })
        ));
    }

    #[test]
    fn replies_become_calls_or_feedback() {
        let prepared = Prepared::build(&tools(), ToolCalling::JsonSchema).unwrap();
        let (thinking, call) = prepared.read_reply(
            r#"{"thinking":"hi back","function":"send_message","arguments":{"message":"Hello"}}"#,
            None,
            &FinishReason::Stop,
        );
        assert_eq!(thinking, "hi back");
        assert_eq!(call.name, "send_message");
        assert!(call.id.starts_with("call_") && call.id.len() == 21);
        // The server ignored the schema: the lenient reading still gets the call.
        let (_, call) = prepared.read_reply(
            "```json\n{'function': 'send_message', 'arguments': {'message': 'Hello'}}\n```",
            Some("reasoned"),
            &FinishReason::Stop,
        );
        assert_eq!(call.arguments, r#"{"message":"Hello"}"#);
        let (content, call) = prepared.read_reply(
            r#"{"thinking":"long","function":"send_message","arguments":{"message":"He"#,
            None,
            &FinishReason::Length,
        );
        assert_eq!(call.name, INVALID_REPLY_FUNCTION);
        assert!(content.starts_with(r#"{"thinking":"long""#));
        let error: Value = serde_json::from_str(&call.arguments).unwrap();
        let error = error["error"].as_str().unwrap();
        assert!(error.starts_with("Your reply was cut off"), "{error}");
        assert!(error.contains("Your reply was not a valid function call: "));
        let text = Prepared::build(&tools(), ToolCalling::Text).unwrap();
        let (thinking, call) = text.read_reply("nothing to call", None, &FinishReason::Stop);
        assert_eq!(
            (thinking.as_str(), call.name.as_str()),
            ("nothing to call", INVALID_REPLY_FUNCTION)
        );
        let (thinking, _) = text.read_reply(
            r#"{"function":"send_message","arguments":{"message":"x"}}"#,
            Some(" from the reasoning parser "),
            &FinishReason::Stop,
        );
        assert_eq!(thinking, "from the reasoning parser");
    }

    fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    #[test]
    fn history_is_rendered_as_text() {
        let mut assistant = ChatMessage::assistant("note it");
        assistant.tool_calls.push(call(
            "c1",
            "core_memory_append",
            r#"{"label":"human","content":"tea","request_heartbeat":true}"#,
        ));
        let mut result = ChatMessage::new(Role::Tool, r#"{"status":"OK"}"#);
        result.tool_call_id = Some("c1".into());
        result.name = Some("core_memory_append".into());
        let mut invalid = ChatMessage::assistant("I am confused");
        invalid.tool_calls.push(call(
            "c2",
            INVALID_REPLY_FUNCTION,
            &json!({"error": "Your reply was not a valid function call: x."}).to_string(),
        ));
        let mut invalid_result = ChatMessage::new(Role::Tool, "unknown function");
        invalid_result.tool_call_id = Some("c2".into());
        invalid_result.name = Some(INVALID_REPLY_FUNCTION.into());
        let messages = vec![
            ChatMessage::system("You are Sam."),
            ChatMessage::user("hi"),
            assistant,
            result,
            ChatMessage::user("heartbeat"),
            invalid,
            invalid_result,
            ChatMessage::user("heartbeat 2"),
        ]
        .into_iter()
        .map(Arc::new)
        .collect::<Vec<_>>();
        let rendered = text_history(&messages, Some("# Function calls"));
        let roles: Vec<&str> = rendered.iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            ["system", "user", "assistant", "user", "assistant", "user"]
        );
        assert_eq!(rendered[0].content, "You are Sam.\n\n# Function calls");
        assert_eq!(
            rendered[2].content,
            r#"{"thinking":"note it","function":"core_memory_append","arguments":{"label":"human","content":"tea","request_heartbeat":true}}"#
        );
        assert_eq!(
            rendered[3].content,
            "[function result for core_memory_append] {\"status\":\"OK\"}\n\nheartbeat"
        );
        assert_eq!(rendered[4].content, "I am confused");
        assert_eq!(
            rendered[5].content,
            "[function call error] Your reply was not a valid function call: x.\n\nheartbeat 2"
        );
        // A result whose call was evicted still reads as an error when it names the synthetic
        // function.
        let orphan = &messages[6..];
        let rendered = text_history(orphan, None);
        assert_eq!(
            rendered[0].content,
            "[function call error] Your reply was not a valid function call.\n\nheartbeat 2"
        );
        // Without a system message, the addendum becomes one; without an addendum nothing is
        // added.
        let plain = [Arc::new(ChatMessage::user("hi"))];
        let rendered = text_history(&plain, Some("# Function calls"));
        assert_eq!(rendered[0].role, "system");
        assert_eq!(rendered[1].content, "hi");
        assert_eq!(text_history(&plain, None).len(), 1);
        assert_eq!(text_history(&[], Some("x")).len(), 1);
    }
}
