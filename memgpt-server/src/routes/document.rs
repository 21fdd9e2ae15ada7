//! The OpenAPI document as generated clients and contract testers read it: what the types
//! generate, made explicit where generators stumble.
//!
//! * `oneOf` lists of string constants (enums whose variants carry documentation) become
//!   `enum`s, their documentation a list in the description.
//! * `true` schemas ("anything") become `{}`; the agent-file export is an object.
//! * Strings cannot hold U+0000 (no store holds it): every string without a format or a pattern
//!   of its own says so.
//! * The bearer scheme is declared and required, except for the health checks.

use serde_json::{Map, Value, json};

/// The pattern of a string without U+0000.
const NO_NUL: &str = "^[^\\u0000]*$";

/// The pattern of a name, a label or a text that must say something: not only white space,
/// and no U+0000.
pub(crate) const NOT_BLANK: &str = "^[^\\u0000]*[^\\s\\u0000][^\\u0000]*$";

/// Makes the generated document explicit (see the module documentation).
pub(super) fn polish(document: &mut Value) {
    hoist_variants(document);
    let requests = request_schemas(document);
    if let Some(schemas) = document
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    {
        for (name, schema) in schemas.iter_mut() {
            walk(schema, requests.contains(name));
        }
    }
    if let Some(paths) = document.get_mut("paths").and_then(Value::as_object_mut) {
        for (path, item) in paths.iter_mut() {
            let Some(item) = item.as_object_mut() else {
                continue;
            };
            for (method, operation) in item.iter_mut() {
                if let Some(id) = operation_id(method, path) {
                    operation["operationId"] = json!(id);
                }
                if let Some(parameters) = operation.get_mut("parameters") {
                    walk(parameters, true);
                }
                walk(operation, false);
                if path == "/healthz" || path == "/readyz" {
                    operation["security"] = json!([]);
                }
            }
        }
        if let Some(schema) = paths
            .get_mut("/v1/agents/{agent_id}/export")
            .and_then(|export| {
                export.pointer_mut("/get/responses/200/content/application~1json/schema")
            })
        {
            *schema = json!({
                "type": "object",
                "description": "A Letta agent file (schema v2), with memgpt's extras under `memgpt`",
            });
        }
    }
    let components = document
        .as_object_mut()
        .map(|d| d.entry("components").or_insert_with(|| json!({})));
    if let Some(components) = components {
        components["securitySchemes"] = json!({
            "bearer": {
                "type": "http",
                "scheme": "bearer",
                "description": "A tenant's API key (`mgk_...`), or the admin key for `/v1/admin`",
            }
        });
    }
    document["security"] = json!([{"bearer": []}]);
}

/// Each operation's name in generated clients (`client.create_agent(...)`).
fn operation_id(method: &str, path: &str) -> Option<&'static str> {
    Some(match (method, path) {
        ("post", "/v1/admin/tenants") => "create_tenant",
        ("get", "/v1/admin/tenants") => "list_tenants",
        ("post", "/v1/admin/tenants/{tenant_id}/keys") => "create_key",
        ("get", "/v1/admin/tenants/{tenant_id}/keys") => "list_keys",
        ("delete", "/v1/admin/keys/{key_id}") => "revoke_key",
        ("get", "/v1/admin/whoami") => "whoami",
        ("post", "/v1/agents") => "create_agent",
        ("get", "/v1/agents") => "list_agents",
        ("get", "/v1/agents/{agent_id}") => "get_agent",
        ("patch", "/v1/agents/{agent_id}") => "update_agent",
        ("delete", "/v1/agents/{agent_id}") => "delete_agent",
        ("get", "/v1/agents/{agent_id}/context") => "get_context",
        ("post", "/v1/agents/{agent_id}/messages") => "send_message",
        ("get", "/v1/agents/{agent_id}/messages") => "list_messages",
        ("post", "/v1/agents/{agent_id}/messages/stream") => "stream_message",
        ("get", "/v1/agents/{agent_id}/memory") => "list_blocks",
        ("get", "/v1/agents/{agent_id}/memory/{label}") => "get_block",
        ("put", "/v1/agents/{agent_id}/memory/{label}") => "replace_block",
        ("post", "/v1/agents/{agent_id}/memory/{label}/append") => "append_block",
        ("post", "/v1/blocks") => "create_shared_block",
        ("get", "/v1/blocks") => "list_shared_blocks",
        ("get", "/v1/blocks/{block_id}") => "get_shared_block",
        ("patch", "/v1/blocks/{block_id}") => "update_shared_block",
        ("delete", "/v1/blocks/{block_id}") => "delete_shared_block",
        ("post", "/v1/blocks/{block_id}/append") => "append_shared_block",
        ("post", "/v1/agents/{agent_id}/blocks/{block_id}") => "attach_block",
        ("delete", "/v1/agents/{agent_id}/blocks/{block_id}") => "detach_block",
        ("post", "/v1/agents/{agent_id}/companion") => "create_companion",
        ("post", "/v1/agents/{agent_id}/archival") => "insert_passages",
        ("get", "/v1/agents/{agent_id}/archival") => "list_passages",
        ("post", "/v1/agents/{agent_id}/archival/search") => "search_archival",
        ("delete", "/v1/agents/{agent_id}/archival/{passage_id}") => "delete_passage",
        ("patch", "/v1/agents/{agent_id}/archival/{passage_id}") => "update_passage",
        ("post", "/v1/agents/{agent_id}/archival/{passage_id}/forget") => "forget_passage",
        ("post", "/v1/agents/{agent_id}/recall/search") => "search_recall",
        ("post", "/v1/agents/{agent_id}/timers") => "create_timer",
        ("get", "/v1/agents/{agent_id}/timers") => "list_timers",
        ("delete", "/v1/agents/{agent_id}/timers/{timer_id}") => "delete_timer",
        ("get", "/v1/agents/{agent_id}/export") => "export_agent",
        ("post", "/v1/agents/import") => "import_agent",
        ("post", "/v1/chat/completions") => "create_chat_completion",
        ("get", "/v1/models") => "list_models",
        ("get", "/v1/models/{model}") => "get_model",
        ("get", "/healthz") => "healthz",
        ("get", "/readyz") => "readyz",
        _ => return None,
    })
}

/// The variants of a tagged union (`oneOf` objects told apart by a constant `type`) as
/// components of their own (`ToolRule` + `children` = `ToolRuleChildren`): generators name
/// them after the union instead of numbering them, and numbered inline models collide.
fn hoist_variants(document: &mut Value) {
    let Some(schemas) = document
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    let mut hoisted = Vec::new();
    for (name, schema) in schemas.iter_mut() {
        let Some(Value::Array(variants)) = schema.get_mut("oneOf") else {
            continue;
        };
        let tags: Vec<Option<String>> = variants
            .iter()
            .map(|v| {
                v.pointer("/properties/type/const")
                    .and_then(Value::as_str)
                    .filter(|_| v.get("type") == Some(&json!("object")))
                    .map(str::to_owned)
            })
            .collect();
        if tags.iter().any(Option::is_none) {
            continue;
        }
        for (variant, tag) in variants.iter_mut().zip(tags.into_iter().flatten()) {
            let component = format!("{name}{}", camel(&tag));
            let schema = std::mem::replace(
                variant,
                json!({"$ref": format!("#/components/schemas/{component}")}),
            );
            hoisted.push((component, schema));
        }
    }
    for (name, schema) in hoisted {
        schemas.insert(name, schema);
    }
}

/// `by_output` as `ByOutput`.
fn camel(snake: &str) -> String {
    snake
        .split('_')
        .map(|word| {
            let mut chars = word.chars();
            chars
                .next()
                .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// The component schemas requests use (bodies and parameters, and what they refer to): the
/// ones whose strings the server refuses with U+0000. Responses may echo what was sent.
fn request_schemas(document: &Value) -> std::collections::HashSet<String> {
    let mut found = std::collections::HashSet::new();
    let mut pending: Vec<String> = Vec::new();
    if let Some(paths) = document.get("paths").and_then(Value::as_object) {
        for item in paths.values() {
            for operation in item.as_object().into_iter().flat_map(|o| o.values()) {
                for part in ["requestBody", "parameters"] {
                    if let Some(value) = operation.get(part) {
                        references(value, &mut pending);
                    }
                }
            }
        }
    }
    while let Some(name) = pending.pop() {
        if found.insert(name.clone())
            && let Some(schema) = document.pointer(&format!("/components/schemas/{name}"))
        {
            references(schema, &mut pending);
        }
    }
    found
}

/// The component names `value` refers to (`$ref: #/components/schemas/NAME`).
fn references(value: &Value, names: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if let Some(name) = map
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix("#/components/schemas/"))
            {
                names.push(name.to_owned());
            }
            map.values().for_each(|v| references(v, names));
        }
        Value::Array(items) => items.iter().for_each(|v| references(v, names)),
        _ => {}
    }
}

/// Rewrites one schema (or operation) and everything inside it; `request`: strings refuse
/// U+0000.
fn walk(value: &mut Value, request: bool) {
    match value {
        Value::Object(map) => {
            enum_of_constants(map);
            for (key, inner) in map.iter_mut() {
                let schema_slot = matches!(
                    key.as_str(),
                    "schema" | "additionalProperties" | "items" | "not"
                );
                if schema_slot && *inner == Value::Bool(true) {
                    *inner = json!({});
                }
                if key == "properties"
                    && let Some(properties) = inner.as_object_mut()
                {
                    for property in properties.values_mut() {
                        if *property == Value::Bool(true) {
                            *property = json!({});
                        }
                    }
                }
                walk(inner, request);
            }
            if request {
                no_nul(map);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| walk(item, request)),
        _ => {}
    }
}

/// `{"oneOf": [{"type": "string", "const": "a", "description": ...}, ...]}` as
/// `{"type": "string", "enum": ["a", ...]}`.
fn enum_of_constants(map: &mut Map<String, Value>) {
    let Some(Value::Array(variants)) = map.get("oneOf") else {
        return;
    };
    let mut names = Vec::new();
    let mut docs = Vec::new();
    for variant in variants {
        match (
            variant.get("type"),
            variant.get("const").and_then(Value::as_str),
        ) {
            (Some(kind), Some(name)) if kind == "string" => {
                names.push(Value::String(name.to_owned()));
                if let Some(doc) = variant.get("description").and_then(Value::as_str) {
                    docs.push(format!("- `{name}`: {doc}"));
                }
            }
            _ => return,
        }
    }
    map.remove("oneOf");
    map.insert("type".into(), json!("string"));
    map.insert("enum".into(), Value::Array(names));
    if !docs.is_empty() {
        let head = map
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let text = if head.is_empty() {
            docs.join("\n")
        } else {
            format!("{head}\n\n{}", docs.join("\n"))
        };
        map.insert("description".into(), Value::String(text));
    }
}

/// A free-form string schema gets the pattern that refuses U+0000.
fn no_nul(map: &mut Map<String, Value>) {
    let is_string = match map.get("type") {
        Some(Value::String(kind)) => kind == "string",
        Some(Value::Array(kinds)) => kinds.iter().any(|k| k == "string"),
        _ => false,
    };
    let constrained = ["format", "pattern", "enum", "const"]
        .iter()
        .any(|k| map.contains_key(*k));
    if is_string && !constrained {
        map.insert("pattern".into(), json!(NO_NUL));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_become_enums_and_anything_an_empty_schema() {
        let mut document = json!({
            "paths": {"/things": {"post": {"requestBody": {"content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/Thing"}
            }}}}}},
            "components": {"schemas": {
                "Code": {"description": "Why.", "oneOf": [
                    {"type": "string", "const": "a", "description": "First."},
                    {"type": "string", "const": "b"}
                ]},
                "Thing": {"type": "object", "properties": {
                    "any": true,
                    "map": {"type": "object", "additionalProperties": true},
                    "text": {"type": "string"},
                    "when": {"type": "string", "format": "date-time"}
                }}
            }}
        });
        polish(&mut document);
        let schemas = &document["components"]["schemas"];
        assert_eq!(schemas["Code"]["enum"], json!(["a", "b"]));
        assert_eq!(schemas["Code"]["description"], "Why.\n\n- `a`: First.");
        assert_eq!(schemas["Thing"]["properties"]["any"], json!({}));
        assert_eq!(
            schemas["Thing"]["properties"]["map"]["additionalProperties"],
            json!({})
        );
        assert_eq!(schemas["Thing"]["properties"]["text"]["pattern"], NO_NUL);
        assert!(
            schemas["Thing"]["properties"]["when"]
                .get("pattern")
                .is_none()
        );
        assert_eq!(document["security"], json!([{"bearer": []}]));
    }
}
