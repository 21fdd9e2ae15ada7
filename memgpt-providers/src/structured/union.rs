//! One JSON schema whose instances are exactly the valid function calls.

use std::collections::HashSet;

use memgpt_core::llm::ToolSchema;
use memgpt_core::message::ToolCall;
use serde_json::{Map, Value, json};

use super::{CallError, ParsedCall, json_kind};

/// The field holding the model's inner monologue in a structured reply.
pub const THINKING_FIELD: &str = "thinking";
/// The field naming the function in a structured reply.
pub const FUNCTION_FIELD: &str = "function";
/// The field holding the arguments object in a structured reply.
pub const ARGUMENTS_FIELD: &str = "arguments";

/// How [`union_schema`] shapes a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnionOptions {
    /// Put a required `"thinking"` string before `"function"` for the inner monologue (MemGPT
    /// agents think before they act, and a model decoded under a schema has nowhere else to
    /// think). Default `true`.
    pub thinking: bool,
    /// Set `"additionalProperties": false` on every object schema of the arguments that does not
    /// say otherwise, so a constrained model cannot invent parameters. Each function's own
    /// `required` list is kept. Default `true`.
    pub strict_arguments: bool,
}

impl Default for UnionOptions {
    fn default() -> Self {
        Self {
            thinking: true,
            strict_arguments: true,
        }
    }
}

/// Why the functions' schemas could not be combined.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaError {
    /// No function was given: there is no valid call.
    #[error("no functions were given, so no function call can be valid")]
    NoFunctions,
    /// Two functions share a name, so a call could not say which one it means.
    #[error("two functions are named `{name}`")]
    DuplicateFunction {
        /// The name.
        name: String,
    },
    /// A `$ref` that does not point into the schema's own `$defs`/`definitions`.
    #[error(
        "function `{function}`: unsupported `$ref` `{reference}` (only `#`, `#/$defs/...` and `#/definitions/...` are)"
    )]
    UnsupportedRef {
        /// The function whose schema has it.
        function: String,
        /// The reference.
        reference: String,
    },
}

/// The JSON schema of "one call to one of `tools`":
///
/// ```json
/// {"anyOf": [
///   {"type": "object",
///    "properties": {"thinking": {"type": "string"}, "function": {"const": "send_message"},
///                   "arguments": {...send_message's parameters...}},
///    "required": ["thinking", "function", "arguments"], "additionalProperties": false},
///   ...],
///  "$defs": {...}}
/// ```
///
/// Each function's `$defs` (or `definitions`) are hoisted to the root as `NAME__DEF`, with
/// every `$ref` rewritten, so schemars' non-inlined output works; a `#` self-reference becomes
/// a reference to the hoisted `NAME__root`. Descriptions are kept.
///
/// Servers that decode under the schema (llama.cpp, vLLM, Ollama, LM Studio) then guarantee a
/// well-formed call. It is not meant for OpenAI's strict mode, which wants an object at the
/// root and every property required: use native tool calling there.
///
/// ```
/// use memgpt_core::llm::ToolSchema;
/// use memgpt_providers::structured::{UnionOptions, union_schema};
/// use serde_json::json;
///
/// let tools = [ToolSchema {
///     name: "send_message".into(),
///     description: "Sends a message to the user.".into(),
///     parameters: json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}),
/// }];
/// let schema = union_schema(&tools, &UnionOptions::default()).unwrap();
/// let branch = &schema["anyOf"][0];
/// assert_eq!(branch["properties"]["function"], json!({"const": "send_message"}));
/// assert_eq!(branch["properties"]["arguments"]["additionalProperties"], json!(false));
/// ```
pub fn union_schema(tools: &[ToolSchema], options: &UnionOptions) -> Result<Value, SchemaError> {
    if tools.is_empty() {
        return Err(SchemaError::NoFunctions);
    }
    let mut seen = HashSet::new();
    let mut defs = Map::new();
    let mut branches = Vec::with_capacity(tools.len());
    for tool in tools {
        if !seen.insert(tool.name.as_str()) {
            return Err(SchemaError::DuplicateFunction {
                name: tool.name.clone(),
            });
        }
        let arguments = arguments_schema(tool, options, &mut defs)?;
        let mut properties = Map::new();
        if options.thinking {
            properties.insert(
                THINKING_FIELD.into(),
                json!({"type": "string", "description": "Your private inner monologue: brief thoughts before you act."}),
            );
        }
        properties.insert(FUNCTION_FIELD.into(), json!({ "const": tool.name }));
        properties.insert(ARGUMENTS_FIELD.into(), arguments);
        let required: Vec<&str> = properties.keys().map(String::as_str).collect();
        let mut branch = json!({
            "type": "object",
            "properties": {},
            "required": required,
            "additionalProperties": false,
        });
        branch["properties"] = Value::Object(properties);
        if !tool.description.is_empty() {
            branch["description"] = Value::String(tool.description.clone());
        }
        branches.push(branch);
    }
    let mut root = json!({ "anyOf": branches });
    if !defs.is_empty() {
        root["$defs"] = Value::Object(defs);
    }
    Ok(root)
}

/// One function's parameters, with its definitions moved into `defs` and made strict.
fn arguments_schema(
    tool: &ToolSchema,
    options: &UnionOptions,
    defs: &mut Map<String, Value>,
) -> Result<Value, SchemaError> {
    let mut schema = match &tool.parameters {
        Value::Object(map) if !map.is_empty() => tool.parameters.clone(),
        // `{}`, `true` or nothing: a function without parameters.
        _ => json!({"type": "object", "properties": {}}),
    };
    let mut own_defs = Map::new();
    if let Value::Object(map) = &mut schema {
        for key in ["$defs", "definitions"] {
            if let Some(Value::Object(found)) = map.remove(key) {
                own_defs.extend(found);
            }
        }
        map.remove("$schema");
        map.remove("$id");
    }
    let mut self_referenced = false;
    rewrite_refs(&tool.name, &mut schema, &mut self_referenced)?;
    for def in own_defs.values_mut() {
        rewrite_refs(&tool.name, def, &mut self_referenced)?;
    }
    if options.strict_arguments {
        strictify(&mut schema);
        own_defs.values_mut().for_each(strictify);
    }
    for (name, def) in own_defs {
        defs.insert(hoisted_name(&tool.name, &name), def);
    }
    if self_referenced {
        let name = hoisted_name(&tool.name, "root");
        defs.insert(name.clone(), schema);
        return Ok(json!({ "$ref": format!("#/$defs/{}", pointer_escape(&name)) }));
    }
    Ok(schema)
}

fn hoisted_name(function: &str, def: &str) -> String {
    format!("{function}__{def}")
}

fn pointer_escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

fn pointer_unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

/// Rewrites `#/$defs/X` and `#/definitions/X` to `#/$defs/FUNCTION__X`, and `#` to
/// `#/$defs/FUNCTION__root` (setting `self_referenced`).
fn rewrite_refs(
    function: &str,
    schema: &mut Value,
    self_referenced: &mut bool,
) -> Result<(), SchemaError> {
    match schema {
        Value::Object(map) => {
            if let Some(Value::String(reference)) = map.get_mut("$ref") {
                let def = if reference == "#" {
                    *self_referenced = true;
                    Some("root".to_owned())
                } else {
                    reference
                        .strip_prefix("#/$defs/")
                        .or_else(|| reference.strip_prefix("#/definitions/"))
                        .filter(|rest| !rest.contains('/'))
                        .map(pointer_unescape)
                };
                let Some(def) = def else {
                    return Err(SchemaError::UnsupportedRef {
                        function: function.to_owned(),
                        reference: reference.clone(),
                    });
                };
                *reference = format!("#/$defs/{}", pointer_escape(&hoisted_name(function, &def)));
            }
            for (key, value) in map.iter_mut() {
                // `const`, `enum`, `default` and `examples` hold data, not schemas.
                if !matches!(key.as_str(), "const" | "enum" | "default" | "examples") {
                    rewrite_refs(function, value, self_referenced)?;
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                rewrite_refs(function, item, self_referenced)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// Adds `"additionalProperties": false` to every object schema that does not set it, except
/// inside `allOf` (whose parts each see only some of the properties).
fn strictify(schema: &mut Value) {
    let Value::Object(map) = schema else { return };
    let is_object = map.contains_key("properties")
        || match map.get("type") {
            Some(Value::String(t)) => t == "object",
            Some(Value::Array(types)) => types.iter().any(|t| t == "object"),
            _ => false,
        };
    if is_object && !map.contains_key("additionalProperties") && !map.contains_key("allOf") {
        map.insert("additionalProperties".into(), Value::Bool(false));
    }
    for key in ["properties", "patternProperties", "$defs", "definitions"] {
        if let Some(Value::Object(children)) = map.get_mut(key) {
            children.values_mut().for_each(strictify);
        }
    }
    for key in ["anyOf", "oneOf", "prefixItems"] {
        if let Some(Value::Array(children)) = map.get_mut(key) {
            children.iter_mut().for_each(strictify);
        }
    }
    for key in ["items", "additionalProperties"] {
        match map.get_mut(key) {
            Some(child @ Value::Object(_)) => strictify(child),
            Some(Value::Array(children)) => children.iter_mut().for_each(strictify),
            _ => {}
        }
    }
}

/// Parses a reply in [`union_schema`]'s shape (what a schema-constrained server returns).
///
/// Strict: the text must be exactly one JSON object (surrounding whitespace aside) with a
/// string `"function"` naming one of `tools` (any name when `tools` is empty), an
/// `"arguments"` object (a JSON string holding one is unwrapped) and an optional `"thinking"`
/// string. Use [`parse_lenient`](super::parse_lenient) for free-form replies.
pub fn parse_call(text: &str, tools: &[ToolSchema]) -> Result<ParsedCall, CallError> {
    let value: Value = serde_json::from_str(text.trim()).map_err(|e| CallError::Json {
        message: e.to_string(),
    })?;
    let Value::Object(mut map) = value else {
        return Err(CallError::NotAnObject {
            found: json_kind(&value),
        });
    };
    let function = match map.remove(FUNCTION_FIELD) {
        Some(Value::String(name)) => name,
        Some(other) => {
            return Err(CallError::FunctionNotAString {
                found: json_kind(&other),
            });
        }
        None => return Err(CallError::MissingFunction),
    };
    if !tools.is_empty() && !tools.iter().any(|t| t.name == function) {
        return Err(CallError::UnknownFunction { name: function });
    }
    let arguments = match map.remove(ARGUMENTS_FIELD) {
        Some(Value::Object(arguments)) => arguments,
        Some(Value::String(text)) => match serde_json::from_str(&text) {
            Ok(Value::Object(arguments)) => arguments,
            _ => {
                return Err(CallError::ArgumentsNotAnObject { found: "a string" });
            }
        },
        Some(Value::Null) | None => Map::new(),
        Some(other) => {
            return Err(CallError::ArgumentsNotAnObject {
                found: json_kind(&other),
            });
        }
    };
    let thinking = match map.remove(THINKING_FIELD) {
        Some(Value::String(thinking)) => thinking,
        _ => String::new(),
    };
    Ok(ParsedCall {
        thinking,
        function,
        arguments,
        prose: String::new(),
        repairs: Vec::new(),
    })
}

/// Renders a call in [`union_schema`]'s shape (compact JSON, fields in schema order), e.g. to
/// show a model its own earlier calls. Arguments that are not a JSON object are kept as a
/// string.
///
/// ```
/// use memgpt_core::message::ToolCall;
/// use memgpt_providers::structured::call_text;
///
/// let call = ToolCall { id: "c1".into(), name: "send_message".into(), arguments: r#"{"message":"hi"}"#.into() };
/// assert_eq!(
///     call_text(Some("greet"), &call),
///     r#"{"thinking":"greet","function":"send_message","arguments":{"message":"hi"}}"#
/// );
/// ```
pub fn call_text(thinking: Option<&str>, call: &ToolCall) -> String {
    let mut map = Map::new();
    if let Some(thinking) = thinking {
        map.insert(THINKING_FIELD.into(), Value::String(thinking.to_owned()));
    }
    map.insert(FUNCTION_FIELD.into(), Value::String(call.name.clone()));
    let arguments = match serde_json::from_str::<Value>(&call.arguments) {
        Ok(value @ Value::Object(_)) => value,
        _ if call.arguments.trim().is_empty() => Value::Object(Map::new()),
        _ => Value::String(call.arguments.clone()),
    };
    map.insert(ARGUMENTS_FIELD.into(), arguments);
    Value::Object(map).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::structured::tests::builtin_tools;

    fn tool(name: &str, parameters: Value) -> ToolSchema {
        ToolSchema {
            name: name.into(),
            description: format!("does {name}"),
            parameters,
        }
    }

    #[test]
    fn branches_have_thinking_function_arguments_in_order() {
        let tools = builtin_tools();
        let schema = union_schema(&tools, &UnionOptions::default()).unwrap();
        let branches = schema["anyOf"].as_array().unwrap();
        assert_eq!(branches.len(), tools.len());
        for (branch, tool) in branches.iter().zip(&tools) {
            let keys: Vec<&String> = branch["properties"].as_object().unwrap().keys().collect();
            assert_eq!(keys, ["thinking", "function", "arguments"]);
            assert_eq!(
                branch["required"],
                json!(["thinking", "function", "arguments"])
            );
            assert_eq!(branch["additionalProperties"], json!(false));
            assert_eq!(branch["properties"]["function"]["const"], tool.name);
            let arguments = &branch["properties"]["arguments"];
            assert_eq!(arguments["additionalProperties"], json!(false));
            assert_eq!(
                arguments["required"], tool.parameters["required"],
                "the function's own required list is kept"
            );
        }
        assert!(schema.get("$defs").is_none());
        let open = [tool(
            "f",
            json!({"type": "object", "properties": {"o": {"type": "object", "properties": {}}}}),
        )];
        let strict = union_schema(&open, &UnionOptions::default()).unwrap();
        let arguments = &strict["anyOf"][0]["properties"]["arguments"];
        assert_eq!(arguments["additionalProperties"], json!(false));
        assert_eq!(
            arguments["properties"]["o"]["additionalProperties"],
            json!(false)
        );
        let plain = union_schema(
            &open,
            &UnionOptions {
                thinking: false,
                strict_arguments: false,
            },
        )
        .unwrap();
        assert_eq!(
            plain["anyOf"][0]["required"],
            json!(["function", "arguments"])
        );
        assert!(
            plain["anyOf"][0]["properties"]["arguments"]
                .get("additionalProperties")
                .is_none()
        );
    }

    #[test]
    fn schemars_defs_are_hoisted_and_refs_rewritten() {
        use memgpt_core::schemars::{self, JsonSchema};
        #[derive(JsonSchema)]
        #[allow(dead_code)]
        enum Mood {
            Happy,
            Sad,
        }
        #[derive(JsonSchema)]
        #[allow(dead_code)]
        struct Note {
            text: String,
            mood: Option<Mood>,
        }
        #[derive(JsonSchema)]
        #[allow(dead_code)]
        struct Args {
            note: Note,
            notes: Vec<Note>,
        }
        let parameters = schemars::schema_for!(Args).to_value();
        assert!(parameters.get("$defs").is_some(), "{parameters}");
        let tools = [
            tool("save", parameters.clone()),
            tool("also_save", parameters),
        ];
        let schema = union_schema(&tools, &UnionOptions::default()).unwrap();
        let defs = schema["$defs"].as_object().unwrap();
        assert!(defs.contains_key("save__Note") && defs.contains_key("also_save__Mood"));
        assert_eq!(defs["save__Note"]["additionalProperties"], json!(false));
        let arguments = &schema["anyOf"][0]["properties"]["arguments"];
        assert_eq!(
            arguments["properties"]["note"]["$ref"],
            "#/$defs/save__Note"
        );
        assert_eq!(
            arguments["properties"]["notes"]["items"]["$ref"],
            "#/$defs/save__Note"
        );
        assert!(arguments.get("$schema").is_none() && arguments.get("$defs").is_none());
        let text = schema.to_string();
        assert!(!text.contains("\"#/$defs/Note\""), "{text}");
    }

    #[test]
    fn self_references_and_foreign_refs() {
        let tree = json!({"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#"}}}});
        let schema = union_schema(&[tool("tree", tree)], &UnionOptions::default()).unwrap();
        assert_eq!(
            schema["anyOf"][0]["properties"]["arguments"]["$ref"],
            "#/$defs/tree__root"
        );
        assert_eq!(
            schema["$defs"]["tree__root"]["properties"]["children"]["items"]["$ref"],
            "#/$defs/tree__root"
        );
        let foreign = json!({"type": "object", "properties": {"a": {"$ref": "https://x/y.json"}}});
        assert!(matches!(
            union_schema(&[tool("f", foreign)], &UnionOptions::default()),
            Err(SchemaError::UnsupportedRef { .. })
        ));
        assert_eq!(
            union_schema(&[], &UnionOptions::default()),
            Err(SchemaError::NoFunctions)
        );
        let twice = [tool("f", json!({})), tool("f", json!({}))];
        assert!(matches!(
            union_schema(&twice, &UnionOptions::default()),
            Err(SchemaError::DuplicateFunction { .. })
        ));
        let empty = union_schema(&[tool("f", Value::Null)], &UnionOptions::default()).unwrap();
        assert_eq!(
            empty["anyOf"][0]["properties"]["arguments"],
            json!({"type": "object", "properties": {}, "additionalProperties": false})
        );
    }

    #[test]
    fn strict_parsing_round_trips_call_text() {
        let tools = builtin_tools();
        let call = ToolCall {
            id: "c".into(),
            name: "core_memory_append".into(),
            arguments: r#"{"label":"human","content":"likes tea","request_heartbeat":true}"#.into(),
        };
        let text = call_text(Some("note it"), &call);
        let parsed = parse_call(&text, &tools).unwrap();
        assert_eq!(parsed.thinking, "note it");
        let (thinking, back) = parsed.into_parts("c");
        assert_eq!(thinking, "note it");
        assert_eq!(back, call);

        assert!(matches!(
            parse_call(r#"{"function":"nope","arguments":{}}"#, &tools),
            Err(CallError::UnknownFunction { .. })
        ));
        assert!(matches!(
            parse_call(r#"{"arguments":{}}"#, &tools),
            Err(CallError::MissingFunction)
        ));
        assert!(matches!(
            parse_call(r#"{"function":"send_message","arguments":[1]}"#, &tools),
            Err(CallError::ArgumentsNotAnObject { found: "an array" })
        ));
        assert!(matches!(
            parse_call("[1]", &tools),
            Err(CallError::NotAnObject { .. })
        ));
        assert!(matches!(
            parse_call("{\"function\": ", &tools),
            Err(CallError::Json { .. })
        ));
        let unwrapped = parse_call(
            r#"{"function":"send_message","arguments":"{\"message\":\"hi\"}"}"#,
            &tools,
        )
        .unwrap();
        assert_eq!(unwrapped.arguments["message"], "hi");
        let raw = ToolCall {
            id: "c".into(),
            name: "f".into(),
            arguments: "{oops".into(),
        };
        assert_eq!(
            call_text(None, &raw),
            r#"{"function":"f","arguments":"{oops"}"#
        );
    }
}
