//! Rendering a [`ChatRequest`] for a chat template, and reading a grammar-constrained reply
//! back into function calls.
//!
//! Small local models rarely know a tool-calling protocol, and their templates rarely have a
//! `tool` role, so functions are described in the system prompt, each earlier call is shown as
//! the JSON object the model itself produces (`{"thinking": ..., "function": ...,
//! "arguments": {...}}`), and each function result as a user turn starting with
//! `FUNCTION RETURN`.

use std::fmt::Write as _;
use std::ops::Range;

use memgpt_core::llm::{ChatMessage, ChatRequest, Role, ToolSchema};
use memgpt_core::message::ToolCall;
use serde_json::{Map, Value};

/// One templated chat turn: role and content.
pub(crate) type Turn = (String, String);

/// Where one request message's text sits in the prompt: its turn, and the byte range of the
/// turn's content it took.
pub(crate) type Span = (usize, Range<usize>);

/// The prompt turns for `request`.
#[cfg(test)]
pub(crate) fn turns(request: &ChatRequest) -> Vec<Turn> {
    turns_with_spans(request).0
}

/// The prompt turns for `request`, and where each request message landed in them (in request
/// order).
pub(crate) fn turns_with_spans(request: &ChatRequest) -> (Vec<Turn>, Vec<Span>) {
    let mut turns: Vec<Turn> = Vec::with_capacity(request.messages.len() + 1);
    let mut spans: Vec<Span> = Vec::with_capacity(request.messages.len());
    let tools = (!request.tools.is_empty()).then(|| tool_instructions(&request.tools));
    let mut system_done = false;
    for message in &request.messages {
        let (role, content) = match message.role {
            Role::System if !system_done && turns.is_empty() => {
                let mut content = message.content.clone();
                spans.push((turns.len(), 0..content.len()));
                if let Some(tools) = &tools {
                    content.push_str("\n\n");
                    content.push_str(tools);
                }
                turns.push(("system".into(), content));
                system_done = true;
                continue;
            }
            Role::System | Role::User => ("user", message.content.clone()),
            Role::Assistant => ("assistant", assistant_text(message)),
            Role::Tool => ("user", function_return(message)),
        };
        spans.push((turns.len(), 0..content.len()));
        turns.push((role.into(), content));
    }
    if !system_done && let Some(tools) = tools {
        turns.insert(0, ("system".into(), tools));
        for span in &mut spans {
            span.0 += 1;
        }
    }
    // Templates expect alternation; merge consecutive turns of the same role.
    let mut merged: Vec<Turn> = Vec::with_capacity(turns.len());
    let mut moved: Vec<(usize, usize)> = Vec::with_capacity(turns.len()); // (turn, offset)
    for (role, content) in turns {
        let count = merged.len();
        match merged.last_mut() {
            Some((last, text)) if *last == role && role != "system" => {
                text.push_str("\n\n");
                moved.push((count - 1, text.len()));
                text.push_str(&content);
            }
            _ => {
                moved.push((count, 0));
                merged.push((role, content));
            }
        }
    }
    for span in &mut spans {
        let (turn, offset) = moved[span.0];
        *span = (turn, span.1.start + offset..span.1.end + offset);
    }
    (merged, spans)
}

/// The system-prompt section that lists the functions and the reply format.
pub(crate) fn tool_instructions(tools: &[ToolSchema]) -> String {
    let mut out = String::from(
        "# Functions\nEvery reply is exactly one JSON object calling one function:\n\
         {\"thinking\": \"<your private reasoning>\", \"function\": \"<name>\", \"arguments\": {<arguments>}}\n\
         Available functions:\n",
    );
    for tool in tools {
        let _ = write!(out, "- {}(", tool.name);
        let required: Vec<&str> = tool
            .parameters
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if let Some(properties) = tool.parameters.get("properties").and_then(Value::as_object) {
            let params: Vec<String> = properties
                .iter()
                .map(|(name, schema)| {
                    let optional = if required.contains(&name.as_str()) {
                        ""
                    } else {
                        "?"
                    };
                    format!("{name}{optional}: {}", type_name(schema))
                })
                .collect();
            out.push_str(&params.join(", "));
        }
        let summary = tool.description.lines().next().unwrap_or_default().trim();
        let _ = writeln!(out, "): {summary}");
    }
    out
}

fn type_name(schema: &Value) -> String {
    match schema.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(types)) => types
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join("|"),
        _ if schema.get("enum").is_some() => "enum".into(),
        _ => "any".into(),
    }
}

fn assistant_text(message: &ChatMessage) -> String {
    if message.tool_calls.is_empty() {
        return message.content.clone();
    }
    message
        .tool_calls
        .iter()
        .map(|call| {
            let arguments = serde_json::from_str::<Value>(&call.arguments)
                .unwrap_or_else(|_| Value::String(call.arguments.clone()));
            let mut object = Map::new();
            object.insert("thinking".into(), Value::String(message.content.clone()));
            object.insert("function".into(), Value::String(call.name.clone()));
            object.insert("arguments".into(), arguments);
            Value::Object(object).to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn function_return(message: &ChatMessage) -> String {
    match &message.name {
        Some(name) => format!("FUNCTION RETURN ({name}): {}", message.content),
        None => format!("FUNCTION RETURN: {}", message.content),
    }
}

/// Reads a reply generated under the function-call grammar. The grammar guarantees the shape
/// unless generation was cut short; then the raw text is returned as a call whose arguments do
/// not parse, so the agent reports the problem to the model (with a heartbeat) instead of
/// stalling.
pub(crate) fn parse_call(text: &str, call_id: String) -> (String, ToolCall) {
    if let Ok(Value::Object(mut object)) = serde_json::from_str::<Value>(text.trim()) {
        let thinking = match object.remove("thinking") {
            Some(Value::String(t)) => t,
            _ => String::new(),
        };
        if let Some(Value::String(name)) = object.remove("function") {
            // The model's own text of the arguments (what was streamed), when it is complete.
            let arguments = match super::stream::scan(text).arguments {
                Some((raw, true)) => raw.to_owned(),
                _ => object
                    .remove("arguments")
                    .unwrap_or_else(|| Value::Object(Map::new()))
                    .to_string(),
            };
            return (
                thinking,
                ToolCall {
                    id: call_id,
                    name,
                    arguments,
                },
            );
        }
    }
    let name = text
        .split("\"function\"")
        .nth(1)
        .and_then(|rest| rest.split('"').nth(1))
        .unwrap_or("invalid_function_call")
        .to_owned();
    (
        String::new(),
        ToolCall {
            id: call_id,
            name,
            arguments: text.to_owned(),
        },
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;

    fn tools() -> Vec<ToolSchema> {
        vec![ToolSchema {
            name: "send_message".into(),
            description: "Sends a message to the user.\nMore detail.".into(),
            parameters: json!({"type": "object", "properties": {"message": {"type": "string"}, "request_heartbeat": {"type": "boolean"}}, "required": ["message"]}),
        }]
    }

    #[test]
    fn history_is_rendered_for_a_template_without_tool_roles() {
        let mut request = ChatRequest::new(
            "",
            vec![ChatMessage::system("You are Sam."), ChatMessage::user("hi")],
        );
        request.tools = Arc::from(tools());
        let mut call = ChatMessage::assistant("greet them");
        call.tool_calls.push(ToolCall {
            id: "c1".into(),
            name: "send_message".into(),
            arguments: r#"{"message":"hello"}"#.into(),
        });
        request.messages.push(call.into());
        let mut result = ChatMessage::new(Role::Tool, r#"{"status":"OK"}"#);
        result.name = Some("send_message".into());
        result.tool_call_id = Some("c1".into());
        request.messages.push(result.into());
        request
            .messages
            .push(ChatMessage::user("how are you?").into());

        let turns = turns(&request);
        let roles: Vec<&str> = turns.iter().map(|(r, _)| r.as_str()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "user"]);
        assert!(turns[0].1.contains("- send_message(message: string, request_heartbeat?: boolean): Sends a message to the user."));
        assert!(!turns[0].1.contains("More detail"));
        let shown: Value = serde_json::from_str(&turns[2].1).unwrap();
        assert_eq!(
            shown,
            json!({"thinking": "greet them", "function": "send_message", "arguments": {"message": "hello"}})
        );
        assert!(
            turns[3]
                .1
                .starts_with("FUNCTION RETURN (send_message): {\"status\":\"OK\"}")
        );
        assert!(turns[3].1.ends_with("how are you?"));

        // Every message's text is where its span says, merged turns included.
        let (again, spans) = turns_with_spans(&request);
        assert_eq!(again, turns);
        assert_eq!(spans.len(), request.messages.len());
        let text = |i: usize| {
            let (turn, range) = spans[i].clone();
            turns[turn].1[range].to_owned()
        };
        assert_eq!(text(0), "You are Sam.");
        assert_eq!(text(1), "hi");
        assert_eq!(text(2), turns[2].1);
        assert_eq!(
            text(3),
            "FUNCTION RETURN (send_message): {\"status\":\"OK\"}"
        );
        assert_eq!(text(4), "how are you?");
        assert_eq!(
            (spans[3].0, spans[4].0),
            (3, 3),
            "merged into one user turn"
        );
    }

    #[test]
    fn replies_become_calls_and_cut_replies_become_reportable_errors() {
        let (thinking, call) = parse_call(
            r#"{"thinking": "say hi", "function": "send_message", "arguments": {"message": "hi"}}"#,
            "call_1".into(),
        );
        assert_eq!(thinking, "say hi");
        assert_eq!(call.name, "send_message");
        assert_eq!(
            call.arguments, r#"{"message": "hi"}"#,
            "the model's own text"
        );

        let (_, cut) = parse_call(
            r#"{"thinking": "say hi", "function": "send_message", "arguments": {"mess"#,
            "call_2".into(),
        );
        assert_eq!(cut.name, "send_message");
        assert!(serde_json::from_str::<Value>(&cut.arguments).is_err());
    }
}
