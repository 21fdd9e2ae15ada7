//! The text protocol: a system-prompt addendum asking for one JSON object, and a tolerant
//! parser for what comes back.

use std::fmt::Write as _;

use memgpt_core::llm::ToolSchema;
use serde_json::{Map, Number, Value};

use super::union::{ARGUMENTS_FIELD, FUNCTION_FIELD, THINKING_FIELD};
use super::{CallError, ParsedCall, Repair, json_kind, json_repair};

/// The heading that starts [`protocol_prompt`]'s addendum (stable: tests and tools may look
/// for it).
pub const PROTOCOL_HEADING: &str = "# Function calls";

/// The name of the synthetic call a provider returns when a reply could not be read as a
/// function call.
///
/// Its arguments are `{"error": FEEDBACK}` (see [`feedback`]). No such function exists, so the
/// agent records a failed call and gives the model control back with a heartbeat, instead of
/// ending the step; providers that render history as text show the model the feedback in
/// place of the "unknown function" result. Do not register a function with this name.
pub const INVALID_REPLY_FUNCTION: &str = "__invalid_reply";

const THINKING_ALIASES: &[&str] = &[
    THINKING_FIELD,
    "inner_monologue",
    "inner_thoughts",
    "thought",
    "thoughts",
    "reasoning",
];
const FUNCTION_ALIASES: &[&str] = &[
    FUNCTION_FIELD,
    "name",
    "function_name",
    "tool",
    "tool_name",
    "action",
];
const ARGUMENTS_ALIASES: &[&str] = &[
    ARGUMENTS_FIELD,
    "args",
    "parameters",
    "params",
    "input",
    "tool_input",
    "action_input",
];
const NESTED_CALL_KEYS: &[&str] = &["tool_calls", "function_call", "tool_call", "call"];

/// How many `{` positions [`parse_lenient`] tries before giving up (replies are untrusted).
const MAX_CANDIDATES: usize = 16;

/// The system-prompt addendum of the text protocol: the reply format and every function
/// with its description and parameters schema. Starts with [`PROTOCOL_HEADING`].
pub fn protocol_prompt(tools: &[ToolSchema]) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "{PROTOCOL_HEADING}\n\n\
         Reply to every message with exactly one JSON object and nothing else (no other text, no code fences), \
         in this shape:\n\
         {{\"thinking\": \"<your private inner monologue>\", \"function\": \"<function name>\", \"arguments\": {{<named arguments>}}}}\n\
         Think briefly in \"thinking\", then call one function. \"arguments\" is a JSON object matching the \
         function's parameters (a JSON schema below): give every required parameter, with the right types \
         (true/false for booleans, numbers unquoted). Write valid JSON: double quotes, escaped quotes and \
         newlines inside strings, no trailing commas.\n\nFunctions:\n"
    );
    for tool in tools {
        let _ = writeln!(
            out,
            "- {}: {}\n  parameters: {}",
            tool.name,
            tool.description.trim(),
            tool.parameters
        );
    }
    if let Some(tool) = example_tool(tools) {
        let _ = write!(out, "\nExample reply:\n{}", example(tool));
    }
    out
}

/// The message that tells a model why its reply was not a function call and what to send
/// instead, e.g.: *Your reply was not a valid function call: the JSON is malformed: ... Reply
/// with exactly one JSON object and nothing else, like {"thinking": "...", "function":
/// "send_message", "arguments": {"message": "..."}}. The functions are: ...*
pub fn feedback(error: &CallError, tools: &[ToolSchema]) -> String {
    let mut out = format!(
        "Your reply was not a valid function call: {error}. Reply with exactly one JSON object and nothing \
         else, like "
    );
    match example_tool(tools) {
        Some(tool) => out.push_str(&example(tool)),
        None => {
            out.push_str(r#"{"thinking": "...", "function": "<function name>", "arguments": {}}"#)
        }
    }
    out.push('.');
    if !tools.is_empty() {
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        let _ = write!(out, " The functions are: {}.", names.join(", "));
    }
    out
}

/// `send_message` if offered (the call every MemGPT turn ends with), else the first.
fn example_tool(tools: &[ToolSchema]) -> Option<&ToolSchema> {
    tools
        .iter()
        .find(|t| t.name == "send_message")
        .or_else(|| tools.first())
}

/// An example call of `tool` with placeholder values for its required parameters.
fn example(tool: &ToolSchema) -> String {
    let properties = tool.parameters.get("properties").and_then(Value::as_object);
    let required: Vec<&str> = tool
        .parameters
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut arguments = Map::new();
    if let Some(properties) = properties {
        for (name, schema) in properties {
            if !required.contains(&name.as_str()) {
                continue;
            }
            let kinds = types(schema);
            let placeholder = if kinds.contains(&"string") {
                Value::String("...".into())
            } else if kinds.contains(&"boolean") {
                Value::Bool(false)
            } else if kinds.contains(&"integer") || kinds.contains(&"number") {
                Value::from(0)
            } else if kinds.contains(&"array") {
                Value::Array(Vec::new())
            } else if kinds.contains(&"object") {
                Value::Object(Map::new())
            } else {
                Value::Null
            };
            arguments.insert(name.clone(), placeholder);
        }
    }
    let mut call = Map::new();
    call.insert(THINKING_FIELD.into(), Value::String("...".into()));
    call.insert(FUNCTION_FIELD.into(), Value::String(tool.name.clone()));
    call.insert(ARGUMENTS_FIELD.into(), Value::Object(arguments));
    // Spaced like a person would write it, which models copy well.
    let text = Value::Object(call).to_string();
    spaced(&text)
}

/// Adds a space after `:` and `,` outside strings.
fn spaced(json: &str) -> String {
    let mut out = String::with_capacity(json.len() + 16);
    let mut in_string = false;
    let mut escaped = false;
    for c in json.chars() {
        out.push(c);
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
        } else {
            match c {
                '"' => in_string = true,
                ':' | ',' => out.push(' '),
                _ => {}
            }
        }
    }
    out
}

/// Finds and repairs the function call in a free-form reply.
///
/// Tries each `{` in turn (at most 16): the first JSON object there (read strictly, or else
/// leniently, see [`Repair`]) that describes a call wins. Prose and code fences around it
/// become [`ParsedCall::prose`]. Then:
///
/// * field names: `"function"` (or `"name"`, `"tool"`...), `"arguments"` (or `"args"`,
///   `"parameters"`...), `"thinking"` (or `"inner_monologue"`, `"thought"`...); nested forms
///   (`{"function": {"name", "arguments"}}`, `{"tool_calls": [...]}`, `{"send_message":
///   {...}}`) are unwrapped; arguments written next to `"function"` are gathered;
/// * the function must be one of `tools` (case and `-`/`_` are forgiven); with no `tools`,
///   any name is accepted and nothing is coerced;
/// * arguments given as a JSON string are decoded; arguments the function's schema types as
///   boolean, integer or number are coerced from strings (`"true"`, `"2"`); a missing
///   `request_heartbeat` (when the function has one) becomes `false`.
///
/// Whether required arguments are present is left to the function (the agent reports that
/// precisely). On failure, the error says what was wrong with the most promising candidate;
/// [`feedback`] turns it into a message for the model.
pub fn parse_lenient(text: &str, tools: &[ToolSchema]) -> Result<ParsedCall, CallError> {
    // A reply that is one JSON string holding the call (double-encoded).
    if let Ok(Value::String(inner)) = serde_json::from_str::<Value>(text.trim())
        && inner.trim_start().starts_with('{')
    {
        let mut call = parse_lenient(&inner, tools)?;
        call.repairs.insert(0, Repair::ArgumentsAsString);
        return Ok(call);
    }
    let mut first_error = None;
    for (start, _) in text.match_indices('{').take(MAX_CANDIDATES) {
        let mut repairs = Vec::new();
        let mut strict = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
        let read = match strict.next() {
            Some(Ok(value)) => Ok((value, start + strict.byte_offset())),
            _ => json_repair::parse_at(text, start, &mut repairs),
        };
        let attempt = match read {
            Ok((Value::Object(object), end)) => {
                call_from_object(object, tools, &mut repairs).map(|call| (call, end))
            }
            Ok((other, _)) => Err(CallError::NotAnObject {
                found: json_kind(&other),
            }),
            Err(message) => Err(CallError::Json { message }),
        };
        match attempt {
            Ok((mut call, end)) => {
                call.prose = prose(&text[..start], &text[end..]);
                if !call.prose.is_empty() || text[..start].contains("```") {
                    repairs.insert(0, Repair::SurroundingText);
                }
                call.repairs = repairs;
                return Ok(call);
            }
            Err(error) => {
                first_error.get_or_insert(error);
            }
        }
    }
    Err(first_error.unwrap_or(CallError::NoObject))
}

/// The text around the JSON object, without code fences.
fn prose(before: &str, after: &str) -> String {
    let keep = |text: &str| -> String {
        text.lines()
            .filter(|line| !line.trim_start().starts_with("```"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let before = keep(before);
    let after = keep(after);
    let parts: Vec<&str> = [before.trim(), after.trim()]
        .into_iter()
        .filter(|p| !p.is_empty())
        .collect();
    parts.join("\n")
}

fn take_alias(
    object: &mut Map<String, Value>,
    aliases: &[&str],
    repairs: &mut Vec<Repair>,
) -> Option<Value> {
    for (i, alias) in aliases.iter().enumerate() {
        if let Some(value) = object.remove(*alias) {
            if i > 0 {
                note(repairs, Repair::AliasedField);
            }
            return Some(value);
        }
    }
    None
}

fn note(repairs: &mut Vec<Repair>, repair: Repair) {
    if !repairs.contains(&repair) {
        repairs.push(repair);
    }
}

fn call_from_object(
    mut object: Map<String, Value>,
    tools: &[ToolSchema],
    repairs: &mut Vec<Repair>,
) -> Result<ParsedCall, CallError> {
    let mut thinking = take_string(&mut object, repairs);
    // {"tool_calls": [{...}]}, {"function_call": {...}}: the call is inside.
    for key in NESTED_CALL_KEYS {
        let inner = match object.get(*key) {
            Some(Value::Array(calls)) => calls.first().cloned(),
            Some(value @ Value::Object(_)) => Some(value.clone()),
            _ => None,
        };
        if let Some(Value::Object(inner)) = inner {
            note(repairs, Repair::NestedCall);
            object = inner;
            if let Some(inner_thinking) = take_string(&mut object, repairs) {
                thinking = Some(inner_thinking);
            }
            break;
        }
    }
    let mut arguments_value = None;
    let name = match take_alias(&mut object, FUNCTION_ALIASES, repairs) {
        Some(Value::String(name)) => name,
        // {"function": {"name": ..., "arguments": ...}} (OpenAI's own shape).
        Some(Value::Object(mut nested)) => {
            note(repairs, Repair::NestedCall);
            match nested.remove("name") {
                Some(Value::String(name)) => {
                    arguments_value = take_alias(&mut nested, ARGUMENTS_ALIASES, repairs);
                    name
                }
                _ => return Err(CallError::FunctionNotAString { found: "an object" }),
            }
        }
        Some(other) => {
            return Err(CallError::FunctionNotAString {
                found: json_kind(&other),
            });
        }
        None => {
            // {"send_message": {"message": "hi"}}
            let single = (object.len() == 1)
                .then(|| object.iter().next())
                .flatten()
                .filter(|(key, value)| {
                    value.is_object() && (tools.is_empty() || tools.iter().any(|t| &t.name == *key))
                })
                .map(|(key, _)| key.clone());
            match single {
                Some(name) => {
                    note(repairs, Repair::NestedCall);
                    arguments_value = object.remove(&name);
                    name
                }
                None => return Err(CallError::MissingFunction),
            }
        }
    };
    let tool = if tools.is_empty() {
        None
    } else {
        Some(resolve(&name, tools, repairs)?)
    };
    let name = tool.map_or(name, |t| t.name.clone());
    if arguments_value.is_none() {
        arguments_value = take_alias(&mut object, ARGUMENTS_ALIASES, repairs);
    }
    let mut arguments = match arguments_value {
        Some(Value::Object(arguments)) => arguments,
        Some(Value::String(text)) => {
            note(repairs, Repair::ArgumentsAsString);
            if text.trim().is_empty() {
                Map::new()
            } else {
                match text
                    .find('{')
                    .map(|start| json_repair::parse_at(&text, start, repairs))
                {
                    Some(Ok((Value::Object(arguments), _))) => arguments,
                    _ => return Err(CallError::ArgumentsNotAnObject { found: "a string" }),
                }
            }
        }
        Some(Value::Null) => Map::new(),
        Some(other) => {
            return Err(CallError::ArgumentsNotAnObject {
                found: json_kind(&other),
            });
        }
        None if !object.is_empty() => {
            note(repairs, Repair::FlattenedArguments);
            std::mem::take(&mut object)
        }
        None => {
            note(repairs, Repair::MissingArguments);
            Map::new()
        }
    };
    if let Some(tool) = tool {
        // Arguments of this function written next to "arguments" (often request_heartbeat).
        if let Some(properties) = tool.parameters.get("properties").and_then(Value::as_object) {
            for (key, value) in std::mem::take(&mut object) {
                if properties.contains_key(&key) && !arguments.contains_key(&key) {
                    note(repairs, Repair::FlattenedArguments);
                    arguments.insert(key, value);
                }
            }
        }
        coerce_object(&mut arguments, &tool.parameters, repairs);
        let has_heartbeat = tool
            .parameters
            .get("properties")
            .is_some_and(|p| p.get("request_heartbeat").is_some());
        if has_heartbeat && !arguments.contains_key("request_heartbeat") {
            note(repairs, Repair::DefaultHeartbeat);
            arguments.insert("request_heartbeat".into(), Value::Bool(false));
        }
    }
    Ok(ParsedCall {
        thinking: thinking.unwrap_or_default(),
        function: name,
        arguments,
        prose: String::new(),
        repairs: Vec::new(),
    })
}

fn take_string(object: &mut Map<String, Value>, repairs: &mut Vec<Repair>) -> Option<String> {
    let key = THINKING_ALIASES
        .iter()
        .position(|k| object.get(*k).is_some_and(Value::is_string))?;
    if key > 0 {
        note(repairs, Repair::AliasedField);
    }
    match object.remove(THINKING_ALIASES[key]) {
        Some(Value::String(text)) => Some(text),
        _ => None,
    }
}

/// The offered function called `name`, forgiving case and `-` for `_`.
fn resolve<'t>(
    name: &str,
    tools: &'t [ToolSchema],
    repairs: &mut Vec<Repair>,
) -> Result<&'t ToolSchema, CallError> {
    if let Some(tool) = tools.iter().find(|t| t.name == name) {
        return Ok(tool);
    }
    let normal = |s: &str| s.trim().to_lowercase().replace(['-', ' '], "_");
    let wanted = normal(name);
    let mut matches = tools.iter().filter(|t| normal(&t.name) == wanted);
    match (matches.next(), matches.next()) {
        (Some(tool), None) => {
            note(repairs, Repair::FunctionNameCase);
            Ok(tool)
        }
        _ => Err(CallError::UnknownFunction {
            name: name.to_owned(),
        }),
    }
}

/// The `type`s a schema allows (looking into `anyOf`/`oneOf` one level).
fn types(schema: &Value) -> Vec<&str> {
    let mut out = Vec::new();
    match schema.get("type") {
        Some(Value::String(t)) => out.push(t.as_str()),
        Some(Value::Array(ts)) => out.extend(ts.iter().filter_map(Value::as_str)),
        _ => {}
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = schema.get(key) {
            for branch in branches {
                match branch.get("type") {
                    Some(Value::String(t)) => out.push(t.as_str()),
                    Some(Value::Array(ts)) => out.extend(ts.iter().filter_map(Value::as_str)),
                    _ => {}
                }
            }
        }
    }
    if out.is_empty()
        && let Some(Value::Array(values)) = schema.get("enum")
    {
        // An enum of strings is a string.
        if values.iter().all(Value::is_string) {
            out.push("string");
        }
    }
    out
}

fn coerce_object(arguments: &mut Map<String, Value>, schema: &Value, repairs: &mut Vec<Repair>) {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (key, value) in arguments.iter_mut() {
        if let Some(property) = properties.get(key) {
            coerce(value, property, repairs);
        }
    }
}

/// Turns a value into the type its schema wants, where the intent is unambiguous.
fn coerce(value: &mut Value, schema: &Value, repairs: &mut Vec<Repair>) {
    let kinds = types(schema);
    if kinds.is_empty() {
        return;
    }
    let wants = |kind: &str| kinds.contains(&kind);
    match value {
        Value::String(text) if !wants("string") => {
            let trimmed = text.trim();
            let lower = trimmed.to_lowercase();
            if wants("boolean") && matches!(lower.as_str(), "true" | "false" | "yes" | "no") {
                note(repairs, Repair::CoercedBoolean);
                *value = Value::Bool(matches!(lower.as_str(), "true" | "yes"));
            } else if wants("integer")
                && let Ok(n) = trimmed.parse::<i64>()
            {
                note(repairs, Repair::CoercedNumber);
                *value = Value::from(n);
            } else if wants("number")
                && let Some(n) = trimmed.parse::<f64>().ok().and_then(Number::from_f64)
            {
                note(repairs, Repair::CoercedNumber);
                *value = Value::Number(n);
            } else if wants("null") && matches!(lower.as_str(), "null" | "none" | "") {
                note(repairs, Repair::PythonLiteral);
                *value = Value::Null;
            }
        }
        Value::Number(n) if wants("integer") && !wants("number") && !n.is_i64() && !n.is_u64() => {
            if let Some(f) = n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15) {
                note(repairs, Repair::CoercedNumber);
                *value = Value::from(f as i64);
            }
        }
        Value::Number(n) if wants("boolean") && !wants("integer") && !wants("number") => {
            match n.as_i64() {
                Some(0) => *value = Value::Bool(false),
                Some(1) => *value = Value::Bool(true),
                _ => return,
            }
            note(repairs, Repair::CoercedBoolean);
        }
        Value::Object(object) => coerce_object(object, schema, repairs),
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) {
                for item in items {
                    coerce(item, item_schema, repairs);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::structured::tests::builtin_tools;

    /// Real-world broken replies of local models, what they must become, and what was fixed.
    #[test]
    fn broken_replies_are_repaired() {
        let tools = builtin_tools();
        let cases: &[(&str, &str, Value, &[Repair])] = &[
            (
                r#"{"thinking": "say hi", "function": "send_message", "arguments": {"message": "Hi!"}}"#,
                "send_message",
                json!({"message": "Hi!"}),
                &[],
            ),
            (
                "Sure! Here is my reply:\n```json\n{\"function\": \"send_message\", \"arguments\": {\"message\": \"Hi!\"}}\n```\nLet me know!",
                "send_message",
                json!({"message": "Hi!"}),
                &[Repair::SurroundingText],
            ),
            (
                "{'function': 'core_memory_append', 'arguments': {'label': 'human', 'content': 'Likes tea', 'request_heartbeat': True,},}",
                "core_memory_append",
                json!({"label": "human", "content": "Likes tea", "request_heartbeat": true}),
                &[
                    Repair::SingleQuotes,
                    Repair::PythonLiteral,
                    Repair::TrailingComma,
                ],
            ),
            (
                r#"{function: "archival_memory_search", arguments: {query: "cats", page: "2", request_heartbeat: "true"}}"#,
                "archival_memory_search",
                json!({"query": "cats", "page": 2, "request_heartbeat": true}),
                &[
                    Repair::UnquotedKey,
                    Repair::CoercedNumber,
                    Repair::CoercedBoolean,
                ],
            ),
            (
                r#"{"function": "core_memory_append", "arguments": "{\"label\": \"human\", \"content\": \"x\"}"}"#,
                "core_memory_append",
                json!({"label": "human", "content": "x", "request_heartbeat": false}),
                &[Repair::ArgumentsAsString, Repair::DefaultHeartbeat],
            ),
            (
                r#"{"function": "archival_memory_search", "arguments": {"query": "x", "page": 1.0, "request_heartbeat": "False"}}"#,
                "archival_memory_search",
                json!({"query": "x", "page": 1, "request_heartbeat": false}),
                &[Repair::CoercedNumber, Repair::CoercedBoolean],
            ),
            (
                r#"{"name": "send_message", "parameters": {"message": "hi"}}"#,
                "send_message",
                json!({"message": "hi"}),
                &[Repair::AliasedField],
            ),
            (
                r#"{"function": {"name": "send_message", "arguments": "{\"message\": \"hi\"}"}}"#,
                "send_message",
                json!({"message": "hi"}),
                &[Repair::NestedCall, Repair::ArgumentsAsString],
            ),
            (
                r#"{"tool_calls": [{"function": "send_message", "arguments": {"message": "hi"}}]}"#,
                "send_message",
                json!({"message": "hi"}),
                &[Repair::NestedCall],
            ),
            (
                r#"{"send_message": {"message": "hi"}}"#,
                "send_message",
                json!({"message": "hi"}),
                &[Repair::NestedCall],
            ),
            (
                r#"{"function": "core_memory_append", "label": "human", "content": "x", "request_heartbeat": true}"#,
                "core_memory_append",
                json!({"label": "human", "content": "x", "request_heartbeat": true}),
                &[Repair::FlattenedArguments],
            ),
            (
                r#"{"function": "core_memory_append", "arguments": {"label": "human", "content": "x"}, "request_heartbeat": true}"#,
                "core_memory_append",
                json!({"label": "human", "content": "x", "request_heartbeat": true}),
                &[Repair::FlattenedArguments],
            ),
            (
                r#"{"function": "Send-Message", "arguments": {"message": "hi"}}"#,
                "send_message",
                json!({"message": "hi"}),
                &[Repair::FunctionNameCase],
            ),
            (
                "{\"function\": \"send_message\", \"arguments\": {\"message\": \"Two\nlines with \"quotes\"\"}}",
                "send_message",
                json!({"message": "Two\nlines with \"quotes\""}),
                &[Repair::RawControlCharacter, Repair::UnescapedQuote],
            ),
            (
                "{\"function\": \"send_message\", \"arguments\": {\"message\": \"cut off\"",
                "send_message",
                json!({"message": "cut off"}),
                &[Repair::UnclosedBracket],
            ),
            (
                "{\n  \"thinking\": \"I should store this\"\n  \"function\": \"archival_memory_insert\"\n  \"arguments\": {\"content\": \"The user's cat is Mochi\", \"request_heartbeat\": false}\n}",
                "archival_memory_insert",
                json!({"content": "The user's cat is Mochi", "request_heartbeat": false}),
                &[Repair::MissingComma],
            ),
            (
                r#""{\"function\": \"send_message\", \"arguments\": {\"message\": \"hi\"}}""#,
                "send_message",
                json!({"message": "hi"}),
                &[Repair::ArgumentsAsString],
            ),
            (
                "I'll use {curly} braces, then: {\"function\": \"send_message\", \"arguments\": {\"message\": \"hi\"}}",
                "send_message",
                json!({"message": "hi"}),
                &[Repair::SurroundingText],
            ),
            (
                r#"{"inner_monologue": "hm", "function": "send_message", "arguments": {"message": "hi"}}"#,
                "send_message",
                json!({"message": "hi"}),
                &[Repair::AliasedField],
            ),
            (
                r#"{"function": "pause_heartbeats", "arguments": {"minutes": "15"}}"#,
                "pause_heartbeats",
                json!({"minutes": 15, "request_heartbeat": false}),
                &[Repair::CoercedNumber, Repair::DefaultHeartbeat],
            ),
            (
                r#"{"function": "send_message", "arguments": {"message": "hi"}} // done"#,
                "send_message",
                json!({"message": "hi"}),
                &[Repair::SurroundingText],
            ),
        ];
        for (text, function, arguments, repairs) in cases {
            let call = parse_lenient(text, &tools).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(&call.function, function, "{text}");
            assert_eq!(&Value::Object(call.arguments.clone()), arguments, "{text}");
            assert_eq!(&call.repairs, repairs, "{text}");
        }
    }

    #[test]
    fn thinking_and_prose_become_the_monologue() {
        let tools = builtin_tools();
        let call = parse_lenient(
            r#"{"thinking": "they said hi", "function": "send_message", "arguments": {"message": "Hello"}}"#,
            &tools,
        )
        .unwrap();
        assert_eq!(call.monologue(), "they said hi");
        let call = parse_lenient(
            "The user greeted me.\n```json\n{\"function\": \"send_message\", \"arguments\": {\"message\": \"Hello\"}}\n```",
            &tools,
        )
        .unwrap();
        assert_eq!(call.prose, "The user greeted me.");
        let (monologue, tool_call) = call.into_parts("call_1");
        assert_eq!(monologue, "The user greeted me.");
        assert_eq!(tool_call.id, "call_1");
        assert_eq!(tool_call.arguments, r#"{"message":"Hello"}"#);
    }

    #[test]
    fn hopeless_replies_get_errors_for_the_model() {
        let tools = builtin_tools();
        let cases: &[(&str, &str)] = &[
            ("I don't know what to do.", "it contains no JSON object"),
            (
                r#"{"function": "fly_to_the_moon", "arguments": {}}"#,
                "there is no function named `fly_to_the_moon`",
            ),
            (r#"{"message": "hi"}"#, "no \"function\" field"),
            (
                r#"{"function": "send_message", "arguments": ["hi"]}"#,
                "\"arguments\" must be a JSON object of named arguments, not an array",
            ),
            (
                r#"{"function": 7, "arguments": {}}"#,
                "\"function\" must be a string (the function's name), not a number",
            ),
            (
                r#"{"function": "send_message", "arguments": {"message": "unterminated}"#,
                "the JSON is malformed: unterminated string at line 1",
            ),
            (
                r#"{"function": "send_message", "arguments": "not json"}"#,
                "\"arguments\" must be a JSON object of named arguments, not a string",
            ),
        ];
        for (text, expected) in cases {
            let error = parse_lenient(text, &tools).unwrap_err();
            assert!(error.to_string().contains(expected), "{text}: {error}");
            let message = feedback(&error, &tools);
            assert!(
                message.starts_with("Your reply was not a valid function call: "),
                "{message}"
            );
            assert!(message.contains(
                r#"like {"thinking": "...", "function": "send_message", "arguments": {"message": "..."}}."#
            ), "{message}");
            assert!(message.contains("The functions are: send_message, pause_heartbeats,"));
        }
    }

    #[test]
    fn the_prompt_lists_every_function_and_the_shape() {
        let tools = builtin_tools();
        let prompt = protocol_prompt(&tools);
        assert!(prompt.starts_with(PROTOCOL_HEADING));
        for tool in &tools {
            assert!(
                prompt.contains(&format!("- {}: ", tool.name)),
                "{}",
                tool.name
            );
        }
        assert!(prompt.contains(r#""request_heartbeat""#));
        assert!(prompt.ends_with(
            r#"{"thinking": "...", "function": "send_message", "arguments": {"message": "..."}}"#
        ));
        // The example in the prompt is itself a valid call.
        let example = prompt.rsplit('\n').next().unwrap();
        assert!(crate::structured::parse_call(example, &tools).is_ok());
    }

    #[test]
    fn without_tools_any_name_is_taken_as_is() {
        let call = parse_lenient(r#"{"function": "f", "arguments": {"x": "1"}}"#, &[]).unwrap();
        assert_eq!(call.function, "f");
        assert_eq!(call.arguments["x"], "1");
    }

    mod properties {
        use proptest::prelude::*;
        use serde_json::json;

        use super::super::*;
        use crate::structured::tests::builtin_tools;

        fn text() -> impl Strategy<Value = String> {
            prop::string::string_regex("[a-zA-Z0-9 ,.!?'\"{}\\[\\]:\\\\\n\té😀]{0,40}")
                .expect("regex")
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]

            /// Any valid call, however its strings look, is read back exactly, from compact or
            /// pretty JSON and with prose around it.
            #[test]
            fn valid_calls_round_trip(thinking in text(), message in text(), label in text(), heartbeat in any::<bool>(), pretty in any::<bool>(), before in "[a-zA-Z .!]{0,20}") {
                let tools = builtin_tools();
                let value = json!({
                    "thinking": thinking,
                    "function": "core_memory_append",
                    "arguments": {"label": label, "content": message, "request_heartbeat": heartbeat}
                });
                let json = if pretty { serde_json::to_string_pretty(&value).unwrap() } else { value.to_string() };
                let reply = format!("{before}\n{json}");
                let call = parse_lenient(&reply, &tools).unwrap();
                prop_assert_eq!(&call.thinking, &thinking);
                prop_assert_eq!(&Value::Object(call.arguments.clone()), &value["arguments"]);
                prop_assert!(call.repairs.iter().all(|r| *r == Repair::SurroundingText), "{:?}", call.repairs);
            }

            /// Python-style dict syntax (single quotes, True/False, trailing commas) of
            /// apostrophe-free text is repaired into the same call.
            #[test]
            fn python_dicts_are_repaired(message in "[a-zA-Z0-9 ,.!?]{0,40}", heartbeat in any::<bool>(), trailing in any::<bool>()) {
                let tools = builtin_tools();
                let comma = if trailing { "," } else { "" };
                let flag = if heartbeat { "True" } else { "False" };
                let reply = format!("{{'function': 'core_memory_append', 'arguments': {{'label': 'human', 'content': '{message}', 'request_heartbeat': {flag}{comma}}}{comma}}}");
                let call = parse_lenient(&reply, &tools).unwrap();
                prop_assert_eq!(&call.arguments["content"], &json!(message));
                prop_assert_eq!(&call.arguments["request_heartbeat"], &json!(heartbeat));
            }

            /// Whatever the reply, the parser returns (no panic, no hang).
            #[test]
            fn arbitrary_text_never_panics(reply in "[{}\\[\\]\"':,a-z0-9 \\\\\n]{0,80}") {
                let _ = parse_lenient(&reply, &builtin_tools());
            }
        }
    }
}
