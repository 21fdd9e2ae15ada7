//! Checking JSON arguments against a JSON schema, for functions whose schema is only known at
//! run time (MCP tools, functions loaded from configuration).
//!
//! `#[memgpt_fn]` functions are checked by deserialising into their typed parameters; a function
//! that only has a schema gets the same kind of message from [`validate_arguments`]: the
//! function, the path of the offending value, what was expected and what came. The keywords
//! that tool schemas use are understood (`type`, `properties`, `required`,
//! `additionalProperties`, `items`, `prefixItems`, `enum`, `const`, the numeric and length
//! bounds, `anyOf`, `oneOf`, `allOf`, `not`, local `$ref`s); others are ignored, as JSON Schema
//! prescribes for unknown keywords.

use serde_json::{Map, Value};

/// How deep `$ref`s may nest before the schema is called recursive without end.
const MAX_DEPTH: usize = 64;

/// Checks `arguments` (the LLM's JSON, already parsed) against `schema`, the function's
/// parameters schema. The error names `function` and the path of the first offending value.
///
/// ```
/// use memgpt_core::function::validate_arguments;
/// use serde_json::json;
///
/// let schema = json!({
///     "type": "object",
///     "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
///     "required": ["city"],
/// });
/// assert!(validate_arguments("forecast", &schema, &json!({"city": "Oslo", "days": 3})).is_ok());
/// let error = validate_arguments("forecast", &schema, &json!({"city": "Oslo", "days": "3"})).unwrap_err();
/// assert_eq!(error, "invalid arguments for `forecast`: `days`: expected an integer, got a string");
/// ```
pub fn validate_arguments(function: &str, schema: &Value, arguments: &Value) -> Result<(), String> {
    if !arguments.is_object() {
        return Err(format!(
            "invalid arguments for `{function}`: expected a JSON object of named arguments, got {}",
            kind(arguments)
        ));
    }
    let checker = Checker { root: schema };
    checker
        .check(schema, arguments, &mut Vec::new(), 0)
        .map_err(|Violation { path, message }| {
            if path.is_empty() {
                format!("invalid arguments for `{function}`: {message}")
            } else {
                format!("invalid arguments for `{function}`: `{path}`: {message}")
            }
        })
}

struct Violation {
    path: String,
    message: String,
}

struct Checker<'a> {
    root: &'a Value,
}

impl<'a> Checker<'a> {
    fn check(
        &self,
        schema: &'a Value,
        value: &Value,
        path: &mut Vec<String>,
        depth: usize,
    ) -> Result<(), Violation> {
        let fail = |path: &[String], message: String| Violation {
            path: path.join("."),
            message,
        };
        let schema = match schema {
            Value::Bool(true) => return Ok(()),
            Value::Bool(false) => return Err(fail(path, "no value is allowed here".into())),
            Value::Object(map) => map,
            _ => return Ok(()),
        };
        if depth > MAX_DEPTH {
            return Err(fail(path, "the schema nests too deeply to check".into()));
        }
        if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
            let target = self
                .resolve(reference)
                .ok_or_else(|| fail(path, format!("the schema refers to unknown `{reference}`")))?;
            self.check(target, value, path, depth + 1)?;
        }
        if let Some(expected) = schema.get("type") {
            let names: Vec<&str> = match expected {
                Value::String(name) => vec![name.as_str()],
                Value::Array(names) => names.iter().filter_map(Value::as_str).collect(),
                _ => Vec::new(),
            };
            if !names.is_empty() && !names.iter().any(|name| has_type(value, name)) {
                let wanted: Vec<String> = names.iter().map(|name| type_phrase(name)).collect();
                return Err(fail(
                    path,
                    format!("expected {}, got {}", wanted.join(" or "), kind(value)),
                ));
            }
        }
        if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
            && !allowed.iter().any(|candidate| candidate == value)
        {
            let listed: Vec<String> = allowed.iter().map(Value::to_string).collect();
            return Err(fail(
                path,
                format!("expected one of {}, got {}", listed.join(", "), value),
            ));
        }
        if let Some(constant) = schema.get("const")
            && constant != value
        {
            return Err(fail(path, format!("expected {constant}, got {value}")));
        }
        match value {
            Value::Number(number) => Self::bounds(schema, number.as_f64(), path)?,
            Value::String(text) => {
                let chars = text.chars().count();
                if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
                    && (chars as u64) < min
                {
                    return Err(fail(
                        path,
                        format!("expected at least {min} characters, got {chars}"),
                    ));
                }
                if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
                    && (chars as u64) > max
                {
                    return Err(fail(
                        path,
                        format!("expected at most {max} characters, got {chars}"),
                    ));
                }
            }
            Value::Array(items) => self.array(schema, items, path, depth)?,
            Value::Object(fields) => self.object(schema, fields, path, depth)?,
            Value::Null | Value::Bool(_) => {}
        }
        if let Some(all) = schema.get("allOf").and_then(Value::as_array) {
            for part in all {
                self.check(part, value, path, depth + 1)?;
            }
        }
        if let Some(any) = schema.get("anyOf").and_then(Value::as_array) {
            self.alternatives(any, value, path, depth, false)?;
        }
        if let Some(one) = schema.get("oneOf").and_then(Value::as_array) {
            self.alternatives(one, value, path, depth, true)?;
        }
        if let Some(not) = schema.get("not")
            && self.check(not, value, &mut path.clone(), depth + 1).is_ok()
        {
            return Err(fail(
                path,
                "the value matches a form the schema excludes".into(),
            ));
        }
        Ok(())
    }

    fn bounds(
        schema: &Map<String, Value>,
        number: Option<f64>,
        path: &[String],
    ) -> Result<(), Violation> {
        let Some(number) = number else { return Ok(()) };
        let fail = |message: String| Violation {
            path: path.join("."),
            message,
        };
        let bound = |key: &str| schema.get(key).and_then(Value::as_f64);
        if let Some(min) = bound("minimum")
            && number < min
        {
            return Err(fail(format!("expected at least {min}, got {number}")));
        }
        if let Some(max) = bound("maximum")
            && number > max
        {
            return Err(fail(format!("expected at most {max}, got {number}")));
        }
        if let Some(min) = bound("exclusiveMinimum")
            && number <= min
        {
            return Err(fail(format!("expected more than {min}, got {number}")));
        }
        if let Some(max) = bound("exclusiveMaximum")
            && number >= max
        {
            return Err(fail(format!("expected less than {max}, got {number}")));
        }
        Ok(())
    }

    fn array(
        &self,
        schema: &'a Map<String, Value>,
        items: &[Value],
        path: &mut Vec<String>,
        depth: usize,
    ) -> Result<(), Violation> {
        let count = items.len() as u64;
        if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
            && count < min
        {
            return Err(Violation {
                path: path.join("."),
                message: format!("expected at least {min} items, got {count}"),
            });
        }
        if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
            && count > max
        {
            return Err(Violation {
                path: path.join("."),
                message: format!("expected at most {max} items, got {count}"),
            });
        }
        let prefix = schema
            .get("prefixItems")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice);
        for (index, item) in items.iter().enumerate() {
            let item_schema = match prefix.get(index) {
                Some(schema) => schema,
                None => match schema.get("items") {
                    Some(schema) => schema,
                    None => continue,
                },
            };
            path.push(index.to_string());
            self.check(item_schema, item, path, depth + 1)?;
            path.pop();
        }
        Ok(())
    }

    fn object(
        &self,
        schema: &'a Map<String, Value>,
        fields: &Map<String, Value>,
        path: &mut Vec<String>,
        depth: usize,
    ) -> Result<(), Violation> {
        if let Some(required) = schema.get("required").and_then(Value::as_array) {
            for name in required.iter().filter_map(Value::as_str) {
                if !fields.contains_key(name) {
                    return Err(Violation {
                        path: path.join("."),
                        message: format!("missing field `{name}`"),
                    });
                }
            }
        }
        let properties = schema.get("properties").and_then(Value::as_object);
        for (name, field) in fields {
            let field_schema = match properties.and_then(|p| p.get(name)) {
                Some(schema) => schema,
                None => match schema.get("additionalProperties") {
                    Some(Value::Bool(false)) => {
                        let known: Vec<&str> = properties
                            .map(|p| p.keys().map(String::as_str).collect())
                            .unwrap_or_default();
                        return Err(Violation {
                            path: path.join("."),
                            message: format!(
                                "unknown field `{name}`, expected one of {}",
                                known
                                    .iter()
                                    .map(|k| format!("`{k}`"))
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                        });
                    }
                    Some(extra) => extra,
                    None => continue,
                },
            };
            path.push(name.clone());
            self.check(field_schema, field, path, depth + 1)?;
            path.pop();
        }
        Ok(())
    }

    fn alternatives(
        &self,
        options: &'a [Value],
        value: &Value,
        path: &[String],
        depth: usize,
        exactly_one: bool,
    ) -> Result<(), Violation> {
        let mut first_error = None;
        let mut matched = 0;
        for option in options {
            match self.check(option, value, &mut path.to_vec(), depth + 1) {
                Ok(()) => matched += 1,
                Err(error) => {
                    first_error.get_or_insert(error);
                }
            }
        }
        match (matched, exactly_one) {
            (0, _) => Err(match first_error {
                Some(error) if options.len() == 1 => error,
                _ => Violation {
                    path: path.join("."),
                    message: format!(
                        "{value} matches none of the {} allowed forms",
                        options.len()
                    ),
                },
            }),
            (1, _) | (_, false) => Ok(()),
            (n, true) => Err(Violation {
                path: path.join("."),
                message: format!("{value} matches {n} of the allowed forms, expected exactly one"),
            }),
        }
    }

    /// A local reference (`#`, `#/$defs/x`, `#/definitions/x`, any JSON pointer into the
    /// schema). Remote references are not followed.
    fn resolve(&self, reference: &str) -> Option<&'a Value> {
        let pointer = reference.strip_prefix('#')?;
        self.root.pointer(pointer)
    }
}

fn has_type(value: &Value, name: &str) -> bool {
    match name {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "number" => value.is_number(),
        "integer" => match value {
            Value::Number(n) => {
                n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            _ => false,
        },
        _ => true,
    }
}

fn type_phrase(name: &str) -> String {
    match name {
        "object" => "an object".into(),
        "array" => "an array".into(),
        "string" => "a string".into(),
        "boolean" => "a boolean".into(),
        "null" => "null".into(),
        "number" => "a number".into(),
        "integer" => "an integer".into(),
        other => format!("`{other}`"),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "an integer",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::validate_arguments;

    fn error(schema: serde_json::Value, arguments: serde_json::Value) -> String {
        validate_arguments("f", &schema, &arguments).unwrap_err()
    }

    #[test]
    fn objects_name_the_missing_unknown_or_mistyped_field() {
        let schema = json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 1},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
                "limit": {"type": ["integer", "null"], "maximum": 10},
            },
            "required": ["name"],
            "additionalProperties": false,
        });
        assert!(validate_arguments("f", &schema, &json!({"name": "x", "limit": null})).is_ok());
        assert_eq!(
            error(schema.clone(), json!({})),
            "invalid arguments for `f`: missing field `name`"
        );
        assert_eq!(
            error(schema.clone(), json!({"name": "x", "colour": 1})),
            "invalid arguments for `f`: unknown field `colour`, expected one of `name`, `tags`, `limit`"
        );
        assert_eq!(
            error(schema.clone(), json!({"name": "x", "tags": ["a", 2]})),
            "invalid arguments for `f`: `tags.1`: expected a string, got an integer"
        );
        assert_eq!(
            error(schema.clone(), json!({"name": "x", "limit": 11})),
            "invalid arguments for `f`: `limit`: expected at most 10, got 11"
        );
        assert_eq!(
            error(schema.clone(), json!({"name": "x", "limit": 1.5})),
            "invalid arguments for `f`: `limit`: expected an integer or null, got a number"
        );
        assert_eq!(
            error(schema.clone(), json!({"name": ""})),
            "invalid arguments for `f`: `name`: expected at least 1 characters, got 0"
        );
        assert_eq!(
            error(schema, json!("x")),
            "invalid arguments for `f`: expected a JSON object of named arguments, got a string"
        );
    }

    #[test]
    fn enums_alternatives_and_references() {
        let schema = json!({
            "type": "object",
            "$defs": {"unit": {"enum": ["c", "f"]}},
            "properties": {
                "unit": {"$ref": "#/$defs/unit"},
                "at": {"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 0}]},
                "exact": {"oneOf": [{"type": "number"}, {"type": "integer"}]},
            },
        });
        assert!(validate_arguments("f", &schema, &json!({"unit": "c", "at": 3})).is_ok());
        assert_eq!(
            error(schema.clone(), json!({"unit": "k"})),
            "invalid arguments for `f`: `unit`: expected one of \"c\", \"f\", got \"k\""
        );
        assert_eq!(
            error(schema.clone(), json!({"at": -1})),
            "invalid arguments for `f`: `at`: -1 matches none of the 2 allowed forms"
        );
        assert_eq!(
            error(schema, json!({"exact": 2})),
            "invalid arguments for `f`: `exact`: 2 matches 2 of the allowed forms, expected exactly one"
        );
    }

    #[test]
    fn a_self_referencing_schema_is_checked_to_its_depth_and_stops() {
        let schema = json!({
            "type": "object",
            "properties": {"node": {"$ref": "#/$defs/node"}},
            "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}},
        });
        let mut nested = json!({});
        for _ in 0..10 {
            nested = json!({"next": nested});
        }
        assert!(validate_arguments("f", &schema, &json!({"node": nested})).is_ok());
        let looping = json!({"type": "object", "$ref": "#"});
        assert!(error(looping, json!({})).contains("nests too deeply"));
        assert!(
            error(json!({"$ref": "#/$defs/none"}), json!({})).contains("unknown `#/$defs/none`")
        );
    }
}
