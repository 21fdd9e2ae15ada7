//! JSON schema to llama.cpp GBNF grammar.
//!
//! Each value rule consumes the (bounded) whitespace after it, so whitespace is only ever
//! allowed in one place between two tokens and a model cannot loop on spaces. Object properties
//! come in schema order; optional ones may be left out.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use serde_json::{Map, Value};

use super::SchemaError;

/// Where whitespace may go between JSON tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Whitespace {
    /// None at all: the most compact output (fewest tokens).
    None,
    /// Up to this many spaces, tabs or newlines between two tokens (`ws ::= [ \t\n]{0,N}`).
    Limited(u8),
}

/// How [`json_schema_to_gbnf`] writes the grammar.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GbnfOptions {
    /// Whitespace between tokens. Default: [`Whitespace::Limited`]`(2)`.
    pub whitespace: Whitespace,
}

impl Default for GbnfOptions {
    fn default() -> Self {
        Self {
            whitespace: Whitespace::Limited(2),
        }
    }
}

/// Why a schema could not be turned into a grammar.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GbnfError {
    /// The functions' schemas could not be combined (see [`tool_call_grammar`](super::tool_call_grammar)).
    #[error(transparent)]
    Schema(#[from] SchemaError),
    /// A `false` schema (or an empty `enum`/`anyOf`): nothing is valid there.
    #[error("at `{path}`: the schema accepts no value")]
    NothingValid {
        /// Where, as a rule-name path.
        path: String,
    },
    /// A `$ref` that does not resolve inside the schema.
    #[error(
        "at `{path}`: cannot resolve `$ref` `{reference}` (only local `#/...` references are supported)"
    )]
    UnresolvedRef {
        /// Where.
        path: String,
        /// The reference.
        reference: String,
    },
    /// A construct the converter does not handle.
    #[error("at `{path}`: unsupported schema: {what}")]
    Unsupported {
        /// Where.
        path: String,
        /// What.
        what: String,
    },
}

/// Converts a JSON schema into a llama.cpp GBNF grammar whose root rule (`root`) matches
/// exactly the JSON texts valid under the schema, within the supported keywords:
///
/// * `type` (one or an array such as `["string", "null"]`, which schemars emits for
///   `Option<T>`), `const` and `enum` of any JSON value, `anyOf`/`oneOf`, `allOf` (merged),
///   `$ref` to `#`, `#/$defs/...`, `#/definitions/...` or any local JSON pointer (recursion
///   allowed);
/// * objects: `properties` in order, `required`, `additionalProperties` (`false`, `true`/absent
///   or a schema: extra members come after the declared ones);
/// * arrays: `items`, `prefixItems`, `minItems`, `maxItems`;
/// * integers and numbers (`minimum >= 0` forbids the sign); strings with JSON escapes.
///
/// String lengths, `pattern` and `format`, numeric ranges other than the sign and
/// `patternProperties` are not enforced (the grammar accepts more than the schema there).
/// `const`/`enum` values must be written in compact JSON form.
///
/// ```
/// use memgpt_providers::structured::{GbnfOptions, json_schema_to_gbnf};
/// use serde_json::json;
///
/// let grammar = json_schema_to_gbnf(
///     &json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"], "additionalProperties": false}),
///     &GbnfOptions::default(),
/// ).unwrap();
/// assert!(grammar.starts_with(r#"root ::= "{" ws "\"ok\"" ws ":" ws boolean "}" ws"#), "{grammar}");
/// ```
pub fn json_schema_to_gbnf(schema: &Value, options: &GbnfOptions) -> Result<String, GbnfError> {
    let mut converter = Converter {
        root: schema,
        ws: match options.whitespace {
            Whitespace::None | Whitespace::Limited(0) => None,
            Whitespace::Limited(n) => Some(n),
        },
        rules: Vec::new(),
        taken: HashSet::from(["root".to_owned()]),
        by_body: HashMap::new(),
        refs: HashMap::new(),
        primitives: Vec::new(),
    };
    let root = converter.body(schema, "root")?;
    let mut out = String::new();
    let _ = writeln!(out, "root ::= {root}");
    for (name, body) in &converter.rules {
        let _ = writeln!(out, "{name} ::= {body}");
    }
    for primitive in converter.closure() {
        let _ = writeln!(
            out,
            "{} ::= {}",
            primitive.name(),
            converter.primitive_body(primitive)
        );
    }
    Ok(out)
}

/// The fixed rules a grammar may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Primitive {
    Value,
    Object,
    Array,
    String,
    Char,
    Number,
    NonNegativeNumber,
    Integer,
    NonNegativeInteger,
    IntegralPart,
    Boolean,
    Null,
    Ws,
}

impl Primitive {
    const ALL: [Primitive; 13] = [
        Primitive::Value,
        Primitive::Object,
        Primitive::Array,
        Primitive::String,
        Primitive::Char,
        Primitive::Number,
        Primitive::NonNegativeNumber,
        Primitive::Integer,
        Primitive::NonNegativeInteger,
        Primitive::IntegralPart,
        Primitive::Boolean,
        Primitive::Null,
        Primitive::Ws,
    ];

    fn name(self) -> &'static str {
        match self {
            Primitive::Value => "value",
            Primitive::Object => "object",
            Primitive::Array => "array",
            Primitive::String => "string",
            Primitive::Char => "char",
            Primitive::Number => "number",
            Primitive::NonNegativeNumber => "nonnegative-number",
            Primitive::Integer => "integer",
            Primitive::NonNegativeInteger => "nonnegative-integer",
            Primitive::IntegralPart => "integral-part",
            Primitive::Boolean => "boolean",
            Primitive::Null => "null",
            Primitive::Ws => "ws",
        }
    }

    /// The primitives this one's rule refers to.
    fn uses(self) -> &'static [Primitive] {
        match self {
            Primitive::Value => &[
                Primitive::Object,
                Primitive::Array,
                Primitive::String,
                Primitive::Number,
                Primitive::Boolean,
                Primitive::Null,
            ],
            Primitive::Object => &[Primitive::String, Primitive::Value, Primitive::Ws],
            Primitive::Array => &[Primitive::Value, Primitive::Ws],
            Primitive::String => &[Primitive::Char, Primitive::Ws],
            Primitive::Number
            | Primitive::NonNegativeNumber
            | Primitive::Integer
            | Primitive::NonNegativeInteger => &[Primitive::IntegralPart, Primitive::Ws],
            Primitive::Boolean | Primitive::Null => &[Primitive::Ws],
            Primitive::Char | Primitive::IntegralPart | Primitive::Ws => &[],
        }
    }
}

struct Converter<'a> {
    root: &'a Value,
    /// The most whitespace characters between two tokens; `None`: no whitespace at all.
    ws: Option<u8>,
    /// Named rules other than `root` and the primitives, in creation order.
    rules: Vec<(String, String)>,
    taken: HashSet<String>,
    by_body: HashMap<String, String>,
    /// `$ref` text -> rule name (set before the target is converted, for recursion).
    refs: HashMap<String, String>,
    primitives: Vec<Primitive>,
}

/// Keys that describe a schema without constraining it.
const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$id",
    "$defs",
    "definitions",
    "$comment",
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
];

impl<'a> Converter<'a> {
    /// `" ws"`-style suffix: the whitespace rule, or nothing.
    fn w(&mut self) -> &'static str {
        if self.ws.is_some() {
            self.use_primitive(Primitive::Ws);
            " ws"
        } else {
            ""
        }
    }

    fn use_primitive(&mut self, primitive: Primitive) -> &'static str {
        if !self.primitives.contains(&primitive) {
            self.primitives.push(primitive);
        }
        primitive.name()
    }

    /// The primitives used, with everything they use, in a fixed order.
    fn closure(&self) -> Vec<Primitive> {
        let mut needed: Vec<Primitive> = self.primitives.clone();
        let mut i = 0;
        while i < needed.len() {
            for &used in needed[i].uses() {
                if used == Primitive::Ws && self.ws.is_none() {
                    continue;
                }
                if !needed.contains(&used) {
                    needed.push(used);
                }
            }
            i += 1;
        }
        Primitive::ALL
            .into_iter()
            .filter(|p| needed.contains(p))
            .collect()
    }

    fn primitive_body(&self, primitive: Primitive) -> String {
        let w = if self.ws.is_some() { " ws" } else { "" };
        match primitive {
            Primitive::Value => "object | array | string | number | boolean | null".to_owned(),
            Primitive::Object => format!(
                r#""{{"{w} ( string ":"{w} value ( ","{w} string ":"{w} value )* )? "}}"{w}"#
            ),
            Primitive::Array => {
                format!(r#""["{w} ( value ( ","{w} value )* )? "]"{w}"#)
            }
            Primitive::String => format!(r#""\"" char* "\""{w}"#),
            Primitive::Char => {
                r#"[^"\\\x7F\x00-\x1F] | [\\] ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )"#.to_owned()
            }
            Primitive::Number => {
                format!(
                    r#""-"? integral-part ( "." [0-9]{{1,16}} )? ( [eE] [-+]? [0-9]{{1,3}} )?{w}"#
                )
            }
            Primitive::NonNegativeNumber => {
                format!(r#"integral-part ( "." [0-9]{{1,16}} )? ( [eE] [-+]? [0-9]{{1,3}} )?{w}"#)
            }
            Primitive::Integer => format!(r#""-"? integral-part{w}"#),
            Primitive::NonNegativeInteger => format!("integral-part{w}"),
            Primitive::IntegralPart => r#""0" | [1-9] [0-9]{0,15}"#.to_owned(),
            Primitive::Boolean => format!(r#"( "true" | "false" ){w}"#),
            Primitive::Null => format!(r#""null"{w}"#),
            Primitive::Ws => format!(r"[ \t\n]{{0,{}}}", self.ws.unwrap_or(0)),
        }
    }

    /// A fresh rule name derived from `hint`.
    fn fresh(&mut self, hint: &str) -> String {
        let base = rule_name(hint);
        let mut name = base.clone();
        let mut n = 2;
        while self.taken.contains(&name) || Primitive::ALL.iter().any(|p| p.name() == name) {
            name = format!("{base}-{n}");
            n += 1;
        }
        self.taken.insert(name.clone());
        name
    }

    /// `body` as something usable inside another rule: itself if it is a single rule name,
    /// otherwise a (shared) named rule.
    fn named(&mut self, body: String, hint: &str) -> String {
        if is_rule_name(&body) || is_literal_expression(&body) {
            return body;
        }
        if let Some(name) = self.by_body.get(&body) {
            return name.clone();
        }
        let name = self.fresh(hint);
        self.by_body.insert(body.clone(), name.clone());
        self.rules.push((name.clone(), body));
        name
    }

    fn expr(&mut self, schema: &'a Value, hint: &str) -> Result<String, GbnfError> {
        let body = self.body(schema, hint)?;
        Ok(self.named(body, hint))
    }

    /// The body of a rule matching `schema` (and the whitespace after it).
    fn body(&mut self, schema: &'a Value, hint: &str) -> Result<String, GbnfError> {
        let map = match schema {
            Value::Bool(true) => return Ok(self.use_primitive(Primitive::Value).to_owned()),
            Value::Bool(false) => {
                return Err(GbnfError::NothingValid {
                    path: hint.to_owned(),
                });
            }
            Value::Object(map) => map,
            _ => {
                return Err(GbnfError::Unsupported {
                    path: hint.to_owned(),
                    what: format!("a schema must be an object or a boolean, not {schema}"),
                });
            }
        };
        if let Some(reference) = map.get("$ref") {
            let Value::String(reference) = reference else {
                return Err(GbnfError::Unsupported {
                    path: hint.to_owned(),
                    what: "`$ref` must be a string".to_owned(),
                });
            };
            return self.reference(reference, hint);
        }
        if let Some(value) = map.get("const") {
            return Ok(self.literal(value));
        }
        if let Some(values) = map.get("enum") {
            let Value::Array(values) = values else {
                return Err(GbnfError::Unsupported {
                    path: hint.to_owned(),
                    what: "`enum` must be an array".to_owned(),
                });
            };
            if values.is_empty() {
                return Err(GbnfError::NothingValid {
                    path: hint.to_owned(),
                });
            }
            let literals: Vec<String> = values.iter().map(|v| self.literal(v)).collect();
            return Ok(alternatives(&literals));
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(branches) = map.get(key) {
                return self.any_of(map, key, branches, hint);
            }
        }
        if let Some(parts) = map.get("allOf") {
            let merged = self.merge_all_of(map, parts, hint)?;
            // The merged schema is owned: convert it into a rule now.
            return self.owned_body(merged, hint);
        }
        match map.get("type") {
            Some(Value::String(kind)) => self.typed(kind, map, hint),
            Some(Value::Array(kinds)) => {
                let mut branches = Vec::with_capacity(kinds.len());
                for kind in kinds {
                    let Value::String(kind) = kind else {
                        return Err(GbnfError::Unsupported {
                            path: hint.to_owned(),
                            what: "`type` array entries must be strings".to_owned(),
                        });
                    };
                    let sub_hint = format!("{hint}-{kind}");
                    let body = self.typed(kind, map, &sub_hint)?;
                    branches.push(self.named(body, &sub_hint));
                }
                if branches.is_empty() {
                    return Err(GbnfError::NothingValid {
                        path: hint.to_owned(),
                    });
                }
                Ok(alternatives(&branches))
            }
            Some(_) => Err(GbnfError::Unsupported {
                path: hint.to_owned(),
                what: "`type` must be a string or an array of strings".to_owned(),
            }),
            None => {
                if ["properties", "required", "additionalProperties"]
                    .iter()
                    .any(|k| map.contains_key(*k))
                {
                    self.object(map, hint)
                } else if ["items", "prefixItems", "minItems", "maxItems"]
                    .iter()
                    .any(|k| map.contains_key(*k))
                {
                    self.array(map, hint)
                } else {
                    Ok(self.use_primitive(Primitive::Value).to_owned())
                }
            }
        }
    }

    /// Converts a schema built during conversion (a merged `allOf`, a distributed `anyOf`),
    /// which lives shorter than the root, with a converter that borrows it and shares this
    /// one's state. Recursion goes only through `$ref`s, which point into the root.
    fn owned_body(&mut self, schema: Value, hint: &str) -> Result<String, GbnfError> {
        let mut sub = Converter {
            root: self.root,
            ws: self.ws,
            rules: Vec::new(),
            taken: std::mem::take(&mut self.taken),
            by_body: std::mem::take(&mut self.by_body),
            refs: std::mem::take(&mut self.refs),
            primitives: std::mem::take(&mut self.primitives),
        };
        let result = sub.body(&schema, hint);
        self.taken = sub.taken;
        self.by_body = sub.by_body;
        self.refs = sub.refs;
        self.primitives = sub.primitives;
        self.rules.append(&mut sub.rules);
        result
    }

    fn any_of(
        &mut self,
        map: &'a Map<String, Value>,
        key: &str,
        branches: &'a Value,
        hint: &str,
    ) -> Result<String, GbnfError> {
        let Value::Array(branches) = branches else {
            return Err(GbnfError::Unsupported {
                path: hint.to_owned(),
                what: format!("`{key}` must be an array"),
            });
        };
        if branches.is_empty() {
            return Err(GbnfError::NothingValid {
                path: hint.to_owned(),
            });
        }
        // Constraints next to `anyOf` apply to every branch: distribute them.
        let siblings: Map<String, Value> = map
            .iter()
            .filter(|(k, _)| k.as_str() != key && !ANNOTATIONS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if let ([only], true) = (branches.as_slice(), siblings.is_empty()) {
            return self.body(only, hint);
        }
        let mut names = Vec::with_capacity(branches.len());
        for (i, branch) in branches.iter().enumerate() {
            let sub_hint = format!("{hint}-{i}");
            let name = if siblings.is_empty() {
                self.expr(branch, &sub_hint)?
            } else {
                let resolved = self.resolve_owned(branch, &sub_hint)?;
                let merged = merge(Value::Object(siblings.clone()), resolved);
                let body = self.owned_body(merged, &sub_hint)?;
                self.named(body, &sub_hint)
            };
            names.push(name);
        }
        Ok(alternatives(&names))
    }

    /// `schema` with a top-level `$ref` followed (for merging).
    fn resolve_owned(&self, schema: &Value, hint: &str) -> Result<Value, GbnfError> {
        let mut current = schema;
        for _ in 0..32 {
            match current.get("$ref").and_then(Value::as_str) {
                Some(reference) => current = self.resolve(reference, hint)?,
                None => return Ok(current.clone()),
            }
        }
        Err(GbnfError::Unsupported {
            path: hint.to_owned(),
            what: "a cycle of `$ref`s inside `allOf`/`anyOf`".to_owned(),
        })
    }

    fn merge_all_of(
        &self,
        map: &Map<String, Value>,
        parts: &Value,
        hint: &str,
    ) -> Result<Value, GbnfError> {
        let Value::Array(parts) = parts else {
            return Err(GbnfError::Unsupported {
                path: hint.to_owned(),
                what: "`allOf` must be an array".to_owned(),
            });
        };
        let mut merged: Value = Value::Object(
            map.iter()
                .filter(|(k, _)| k.as_str() != "allOf")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        );
        for part in parts {
            merged = merge(merged, self.resolve_owned(part, hint)?);
        }
        Ok(merged)
    }

    fn resolve(&self, reference: &str, hint: &str) -> Result<&'a Value, GbnfError> {
        let unresolved = || GbnfError::UnresolvedRef {
            path: hint.to_owned(),
            reference: reference.to_owned(),
        };
        let pointer = reference.strip_prefix('#').ok_or_else(unresolved)?;
        if pointer.is_empty() {
            return Ok(self.root);
        }
        self.root.pointer(pointer).ok_or_else(unresolved)
    }

    fn reference(&mut self, reference: &str, hint: &str) -> Result<String, GbnfError> {
        if let Some(name) = self.refs.get(reference) {
            return Ok(name.clone());
        }
        if reference == "#" {
            // The root rule itself.
            self.refs.insert(reference.to_owned(), "root".to_owned());
            return Ok("root".to_owned());
        }
        let target = self.resolve(reference, hint)?;
        let last = reference.rsplit('/').next().unwrap_or(reference);
        let name = self.fresh(&format!("ref-{last}"));
        self.refs.insert(reference.to_owned(), name.clone());
        let body = self.body(target, &name)?;
        self.rules.push((name.clone(), body));
        Ok(name)
    }

    /// A JSON value written exactly, in compact form.
    fn literal(&mut self, value: &Value) -> String {
        let text = value.to_string();
        format!("{}{}", gbnf_literal(&text), self.w())
    }

    fn typed(
        &mut self,
        kind: &str,
        map: &'a Map<String, Value>,
        hint: &str,
    ) -> Result<String, GbnfError> {
        let non_negative = ["minimum", "exclusiveMinimum"].iter().any(|k| {
            map.get(*k)
                .and_then(Value::as_f64)
                .is_some_and(|m| m >= 0.0)
        });
        let primitive = match kind {
            "string" => Primitive::String,
            "boolean" => Primitive::Boolean,
            "null" => Primitive::Null,
            "integer" if non_negative => Primitive::NonNegativeInteger,
            "integer" => Primitive::Integer,
            "number" if non_negative => Primitive::NonNegativeNumber,
            "number" => Primitive::Number,
            "object" => return self.object(map, hint),
            "array" => return self.array(map, hint),
            other => {
                return Err(GbnfError::Unsupported {
                    path: hint.to_owned(),
                    what: format!("unknown type `{other}`"),
                });
            }
        };
        Ok(self.use_primitive(primitive).to_owned())
    }

    fn object(&mut self, map: &'a Map<String, Value>, hint: &str) -> Result<String, GbnfError> {
        let w = self.w();
        let required: Vec<&str> = match map.get("required") {
            Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        // (member expression, required)
        let mut members: Vec<(String, bool)> = Vec::new();
        if let Some(properties) = map.get("properties") {
            let Value::Object(properties) = properties else {
                return Err(GbnfError::Unsupported {
                    path: hint.to_owned(),
                    what: "`properties` must be an object".to_owned(),
                });
            };
            for (name, schema) in properties {
                let value = self.expr(schema, &format!("{hint}-{name}"))?;
                let key = gbnf_literal(&Value::String(name.clone()).to_string());
                members.push((
                    format!(r#"{key}{w} ":"{w} {value}"#),
                    required.contains(&name.as_str()),
                ));
            }
        }
        for name in &required {
            let declared = map.get("properties").and_then(|p| p.get(*name)).is_some();
            if !declared {
                let value = self.use_primitive(Primitive::Value);
                let key = gbnf_literal(&Value::String((*name).to_owned()).to_string());
                members.push((format!(r#"{key}{w} ":"{w} {value}"#), true));
            }
        }
        let extra = match map.get("additionalProperties") {
            Some(Value::Bool(false)) => None,
            None | Some(Value::Bool(true)) => Some(self.use_primitive(Primitive::Value).to_owned()),
            Some(schema) => Some(self.expr(schema, &format!("{hint}-additional"))?),
        };
        let extra = extra.map(|value| {
            let key = self.use_primitive(Primitive::String);
            format!(r#"{key} ":"{w} {value}"#)
        });

        // After a member has been written, each later one is preceded by a comma.
        let tail = |from: usize| -> String {
            let mut parts: Vec<String> = members[from..]
                .iter()
                .map(|(member, required)| {
                    if *required {
                        format!(r#"","{w} {member}"#)
                    } else {
                        format!(r#"( ","{w} {member} )?"#)
                    }
                })
                .collect();
            if let Some(extra) = &extra {
                parts.push(format!(r#"( ","{w} {extra} )*"#));
            }
            parts.join(" ")
        };
        // The first member written: any optional one before the first required one, or that.
        let first_required = members.iter().position(|(_, required)| *required);
        let last_candidate = first_required.unwrap_or(members.len().saturating_sub(1));
        let mut firsts: Vec<String> = Vec::new();
        if !members.is_empty() {
            for (i, (member, _)) in members.iter().enumerate().take(last_candidate + 1) {
                firsts.push(join_nonempty(&[member.as_str(), &tail(i + 1)]));
            }
        }
        if first_required.is_none()
            && let Some(extra) = &extra
        {
            firsts.push(format!(r#"{extra} ( ","{w} {extra} )*"#));
        }
        let inner = match (firsts.len(), first_required) {
            (0, _) => String::new(),
            (1, Some(_)) => firsts.remove(0),
            (_, Some(_)) => format!("( {} )", firsts.join(" | ")),
            (_, None) => format!("( {} )?", firsts.join(" | ")),
        };
        Ok(join_nonempty(&[
            &format!(r#""{{"{w}"#),
            &inner,
            &format!(r#""}}"{w}"#),
        ]))
    }

    fn array(&mut self, map: &'a Map<String, Value>, hint: &str) -> Result<String, GbnfError> {
        let w = self.w();
        let count = |key: &str| map.get(key).and_then(Value::as_u64);
        let min = count("minItems").unwrap_or(0);
        let max = count("maxItems");
        if max.is_some_and(|max| max < min) {
            return Err(GbnfError::NothingValid {
                path: hint.to_owned(),
            });
        }
        let open = format!(r#""["{w}"#);
        let close = format!(r#""]"{w}"#);
        if let Some(Value::Array(prefix)) = map.get("prefixItems") {
            let mut elements = Vec::with_capacity(prefix.len());
            for (i, schema) in prefix.iter().enumerate() {
                elements.push(self.expr(schema, &format!("{hint}-{i}"))?);
            }
            let rest = match map.get("items") {
                Some(Value::Bool(false)) => None,
                None | Some(Value::Bool(true)) => {
                    Some(self.use_primitive(Primitive::Value).to_owned())
                }
                Some(schema) => Some(self.expr(schema, &format!("{hint}-item"))?),
            };
            let mut inner = elements.join(&format!(r#" ","{w} "#));
            if let Some(rest) = rest {
                inner = if inner.is_empty() {
                    format!(r#"( {rest} ( ","{w} {rest} )* )?"#)
                } else {
                    format!(r#"{inner} ( ","{w} {rest} )*"#)
                };
            }
            return Ok(join_nonempty(&[&open, &inner, &close]));
        }
        let item = match map.get("items") {
            None | Some(Value::Bool(true)) => self.use_primitive(Primitive::Value).to_owned(),
            Some(Value::Bool(false)) => return Ok(join_nonempty(&[&open, &close])),
            Some(schema) => self.expr(schema, &format!("{hint}-item"))?,
        };
        if max == Some(0) {
            return Ok(join_nonempty(&[&open, &close]));
        }
        let more = |lo: u64, hi: Option<u64>| -> String {
            let group = format!(r#"( ","{w} {item} )"#);
            match (lo, hi) {
                (_, Some(0)) => String::new(),
                (0, None) => format!("{group}*"),
                (1, None) => format!("{group}+"),
                (0, Some(1)) => format!("{group}?"),
                (lo, None) => format!("{group}{{{lo},}}"),
                (lo, Some(hi)) if lo == hi => format!("{group}{{{lo}}}"),
                (lo, Some(hi)) => format!("{group}{{{lo},{hi}}}"),
            }
        };
        let inner = if min == 0 {
            format!(
                "( {} )?",
                join_nonempty(&[&item, &more(0, max.map(|m| m - 1))])
            )
        } else {
            join_nonempty(&[&item, &more(min - 1, max.map(|m| m - 1))])
        };
        Ok(join_nonempty(&[&open, &inner, &close]))
    }
}

/// Merges two schemas for `allOf`: properties are combined (the later wins on a clash),
/// `required` lists concatenated, `additionalProperties: false` kept only if both say so,
/// other keywords taken from the later schema.
fn merge(base: Value, other: Value) -> Value {
    let (Value::Object(mut base), Value::Object(other)) = (base, other) else {
        return Value::Bool(true);
    };
    for (key, value) in other {
        match (key.as_str(), base.get_mut(&key), value) {
            ("properties", Some(Value::Object(existing)), Value::Object(more)) => {
                existing.extend(more);
            }
            ("required", Some(Value::Array(existing)), Value::Array(more)) => {
                for name in more {
                    if !existing.contains(&name) {
                        existing.push(name);
                    }
                }
            }
            ("additionalProperties", Some(existing), value) => {
                if !(*existing == Value::Bool(false) && value == Value::Bool(false)) {
                    *existing = Value::Bool(true);
                }
            }
            (_, _, value) => {
                base.insert(key, value);
            }
        }
    }
    Value::Object(base)
}

fn alternatives(items: &[String]) -> String {
    items.join(" | ")
}

fn join_nonempty(parts: &[&str]) -> String {
    parts
        .iter()
        .filter(|p| !p.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join(" ")
}

/// A rule name (`[a-zA-Z0-9-]+`) derived from a path.
fn rule_name(hint: &str) -> String {
    let mut name = String::with_capacity(hint.len());
    for c in hint.chars() {
        if c.is_ascii_alphanumeric() {
            name.push(c);
        } else if !name.ends_with('-') {
            name.push('-');
        }
    }
    let name = name.trim_matches('-');
    if name.is_empty() {
        "rule".to_owned()
    } else {
        name.to_owned()
    }
}

/// Whether `text` is one literal, optionally followed by ` ws` (short enough to inline).
fn is_literal_expression(text: &str) -> bool {
    let Some(rest) = text.strip_prefix('"') else {
        return false;
    };
    let mut escaped = false;
    for (i, c) in rest.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => return matches!(&rest[i + 1..], "" | " ws"),
            _ => {}
        }
    }
    false
}

fn is_rule_name(text: &str) -> bool {
    !text.is_empty() && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

/// `text` as a GBNF string literal.
fn gbnf_literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7F => {
                let _ = write!(out, "\\x{:02X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::structured::gbnf_match::CompiledGrammar;
    use crate::structured::gbnf_parse::Grammar;
    use crate::structured::tests::builtin_tools;
    use crate::structured::{UnionOptions, tool_call_grammar};

    fn grammar(schema: Value) -> Grammar {
        let text = json_schema_to_gbnf(&schema, &GbnfOptions::default()).unwrap();
        Grammar::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
    }

    /// Checks the recognizer, and that the incremental matcher used for local decoding agrees
    /// with it fed whole and fed one byte at a time (characters cut between "tokens").
    fn check(grammar: &Grammar, accepted: &[&str], rejected: &[&str]) {
        let incremental = CompiledGrammar::new(&grammar.to_string()).unwrap();
        let whole = |text: &str| {
            incremental
                .accept(&incremental.start(), text.as_bytes())
                .is_some_and(|s| s.is_complete())
        };
        let bytewise = |text: &str| {
            let mut state = Some(incremental.start());
            for b in text.as_bytes() {
                state = state.and_then(|s| incremental.accept(&s, std::slice::from_ref(b)));
            }
            state.is_some_and(|s| s.is_complete())
        };
        for text in accepted {
            assert!(grammar.accepts(text), "should accept {text}\n{grammar}");
            assert!(
                whole(text) && bytewise(text),
                "matcher should accept {text}"
            );
        }
        for text in rejected {
            assert!(!grammar.accepts(text), "should reject {text}\n{grammar}");
            assert!(
                !whole(text) && !bytewise(text),
                "matcher should reject {text}"
            );
        }
    }

    #[test]
    fn strings_follow_json_escaping() {
        let g = grammar(json!({"type": "string"}));
        check(
            &g,
            &[
                r#""""#,
                r#""plain""#,
                r#""quote \" backslash \\ slash \/ \b\f\n\r\t""#,
                r#""\u00e9\uD83D\uDE00""#,
                "\"unicode é 😀\"",
                "\"trailing\" \n",
            ],
            &[
                r#""unterminated"#,
                r#""bad \x escape""#,
                r#""short \u12 escape""#,
                "\"raw\nnewline\"",
                "\"tab\tinside\"",
                r#""a" "b""#,
                "\"a\"   ",
                "'single'",
            ],
        );
    }

    #[test]
    fn numbers_integers_booleans_null() {
        let g = grammar(json!({"type": "integer"}));
        check(
            &g,
            &["0", "-7", "42", "1234567890"],
            &["01", "1.5", "+1", "-", "1e3", "\"1\""],
        );
        let g = grammar(json!({"type": "integer", "minimum": 0}));
        check(&g, &["0", "3"], &["-3"]);
        let g = grammar(json!({"type": "number"}));
        check(
            &g,
            &["0", "-0.5", "3.25", "1e10", "2.5E-3"],
            &[".5", "1.", "1e", "NaN"],
        );
        check(
            &grammar(json!({"type": "boolean"})),
            &["true", "false"],
            &["True", "1", "\"true\""],
        );
        check(
            &grammar(json!({"type": "null"})),
            &["null"],
            &["None", "nul"],
        );
    }

    #[test]
    fn objects_keep_order_and_honour_required() {
        let g = grammar(json!({
            "type": "object",
            "properties": {
                "a": {"type": "string"},
                "b": {"type": "integer"},
                "c": {"type": "boolean"}
            },
            "required": ["b"],
            "additionalProperties": false
        }));
        check(
            &g,
            &[
                r#"{"b":1}"#,
                r#"{"a":"x","b":1}"#,
                r#"{"b":1,"c":true}"#,
                r#"{"a":"x","b":1,"c":false}"#,
                "{\n \"a\": \"x\",\n \"b\": 1\n}",
            ],
            &[
                r#"{}"#,
                r#"{"a":"x"}"#,
                r#"{"b":1,"a":"x"}"#,
                r#"{"b":"1"}"#,
                r#"{"b":1,"d":2}"#,
                r#"{"b":1,}"#,
                r#"{,"b":1}"#,
                r#"{"b":1}x"#,
            ],
        );
        let all_optional = grammar(json!({
            "type": "object",
            "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
            "additionalProperties": false
        }));
        check(
            &all_optional,
            &[r#"{}"#, r#"{"a":"x"}"#, r#"{"b":2}"#, r#"{"a":"x","b":2}"#],
            &[r#"{"b":2,"a":"x"}"#, r#"{,}"#],
        );
        let open = grammar(json!({
            "type": "object",
            "properties": {"a": {"type": "string"}},
            "required": ["a"]
        }));
        check(
            &open,
            &[r#"{"a":"x"}"#, r#"{"a":"x","other":[1,{"y":null}]}"#],
            &[r#"{"other":1}"#],
        );
        let typed_extras =
            grammar(json!({"type": "object", "additionalProperties": {"type": "integer"}}));
        check(
            &typed_extras,
            &[r#"{}"#, r#"{"x":1,"y":2}"#],
            &[r#"{"x":"1"}"#],
        );
    }

    #[test]
    fn arrays_enums_consts_and_alternatives() {
        let g = grammar(
            json!({"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3}),
        );
        check(
            &g,
            &[r#"["a"]"#, r#"["a","b","c"]"#, r#"[ "a", "b" ]"#],
            &[r#"[]"#, r#"["a","b","c","d"]"#, r#"[1]"#, r#"["a",]"#],
        );
        check(
            &grammar(json!({"type": "array", "items": {"type": "integer"}})),
            &["[]", "[1]", "[1,2,3]"],
            &["[1,]", "[,]"],
        );
        check(
            &grammar(
                json!({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false}),
            ),
            &[r#"["a",1]"#],
            &[r#"["a"]"#, r#"["a",1,2]"#],
        );
        let g = grammar(json!({"enum": ["human", "persona", 3, null, {"a": [1]}]}));
        check(
            &g,
            &[r#""human""#, r#""persona""#, "3", "null", r#"{"a":[1]}"#],
            &[r#""Human""#, "4", r#""3""#],
        );
        let g = grammar(json!({"const": "say \"hi\"\n"}));
        check(&g, &[r#""say \"hi\"\n""#], &[r#""say "hi"""#]);
        let g = grammar(json!({"anyOf": [{"type": "integer"}, {"type": "string", "enum": ["x"]}]}));
        check(&g, &["1", r#""x""#], &[r#""y""#, "true"]);
        let g = grammar(json!({"type": ["string", "null"]}));
        check(&g, &[r#""s""#, "null"], &["1"]);
        check(
            &grammar(json!({"type": ["integer", "null"], "minimum": 0})),
            &["0", "5", "null"],
            &["-1", "\"5\""],
        );
    }

    #[test]
    fn refs_defs_recursion_and_all_of() {
        let g = grammar(json!({
            "type": "object",
            "properties": {
                "note": {"$ref": "#/$defs/Note"},
                "mood": {"anyOf": [{"$ref": "#/$defs/Mood"}, {"type": "null"}]}
            },
            "required": ["note"],
            "additionalProperties": false,
            "$defs": {
                "Note": {"type": "object", "properties": {"text": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/Note"}}}, "required": ["text"], "additionalProperties": false},
                "Mood": {"type": "string", "enum": ["happy", "sad"]}
            }
        }));
        check(
            &g,
            &[
                r#"{"note":{"text":"a"}}"#,
                r#"{"note":{"text":"a","children":[{"text":"b","children":[]}]},"mood":"sad"}"#,
                r#"{"note":{"text":"a"},"mood":null}"#,
            ],
            &[
                r#"{"note":{"children":[]}}"#,
                r#"{"note":{"text":"a"},"mood":"meh"}"#,
                r#"{"note":{"text":"a","children":[{"x":1}]}}"#,
            ],
        );
        let merged = grammar(json!({
            "allOf": [
                {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                {"properties": {"b": {"type": "integer"}}, "required": ["b"]}
            ],
            "additionalProperties": false
        }));
        check(
            &merged,
            &[r#"{"a":"x","b":1}"#],
            &[r#"{"a":"x"}"#, r#"{"b":1}"#],
        );
        let missing =
            json_schema_to_gbnf(&json!({"$ref": "#/$defs/Nope"}), &GbnfOptions::default());
        assert!(matches!(missing, Err(GbnfError::UnresolvedRef { .. })));
        assert!(matches!(
            json_schema_to_gbnf(&json!({"enum": []}), &GbnfOptions::default()),
            Err(GbnfError::NothingValid { .. })
        ));
        assert!(matches!(
            json_schema_to_gbnf(&json!({"type": "decimal"}), &GbnfOptions::default()),
            Err(GbnfError::Unsupported { .. })
        ));
    }

    #[test]
    fn pretty_printing_needs_a_larger_whitespace_bound() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}, "required": ["a"], "additionalProperties": false});
        let pretty = serde_json::to_string_pretty(&json!({"a": [1, 2]})).unwrap();
        assert!(!grammar(schema.clone()).accepts(&pretty));
        let text = json_schema_to_gbnf(
            &schema,
            &GbnfOptions {
                whitespace: Whitespace::Limited(8),
            },
        )
        .unwrap();
        assert!(text.contains(r"ws ::= [ \t\n]{0,8}"), "{text}");
        assert!(Grammar::parse(&text).unwrap().accepts(&pretty));
    }

    #[test]
    fn whitespace_is_bounded() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"], "additionalProperties": false});
        let g = grammar(schema.clone());
        check(
            &g,
            &[r#"{"a":1}"#, "{ \"a\" : 1 }", "{\n\t\"a\":\n 1\n}"],
            &["{   \"a\":1}", "{\"a\":1}   ", " {\"a\":1}"],
        );
        let compact = json_schema_to_gbnf(
            &schema,
            &GbnfOptions {
                whitespace: Whitespace::None,
            },
        )
        .unwrap();
        assert!(!compact.contains("ws"), "{compact}");
        let compact = Grammar::parse(&compact).unwrap();
        check(&compact, &[r#"{"a":1}"#], &["{ \"a\":1}"]);
    }

    fn memgpt_grammar() -> Grammar {
        let text = tool_call_grammar(
            &builtin_tools(),
            &UnionOptions::default(),
            &GbnfOptions::default(),
        )
        .unwrap();
        Grammar::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
    }

    #[test]
    fn memgpt_calls_are_accepted() {
        let g = memgpt_grammar();
        check(
            &g,
            &[
                r#"{"thinking":"greet them","function":"send_message","arguments":{"message":"Hello! How are you?"}}"#,
                r#"{"thinking":"","function":"core_memory_append","arguments":{"label":"human","content":"Name: Ada","request_heartbeat":true}}"#,
                r#"{"thinking":"look it up","function":"archival_memory_search","arguments":{"query":"cats","page":null,"request_heartbeat":true}}"#,
                r#"{"thinking":"next page","function":"archival_memory_search","arguments":{"query":"cats","page":2,"request_heartbeat":false}}"#,
                r#"{"thinking":"first page","function":"archival_memory_search","arguments":{"query":"cats","request_heartbeat":false}}"#,
                "{\n\t\"thinking\": \"ok\",\n\t\"function\": \"send_message\",\n\t\"arguments\": {\"message\": \"line\\nbreak \\\"quoted\\\"\"}\n}\n",
            ],
            &[
                // Wrong function name.
                r#"{"thinking":"","function":"send_messages","arguments":{"message":"hi"}}"#,
                // Arguments of another function.
                r#"{"thinking":"","function":"send_message","arguments":{"query":"x","request_heartbeat":true}}"#,
                // Wrong argument types.
                r#"{"thinking":"","function":"core_memory_append","arguments":{"label":"human","content":"x","request_heartbeat":"true"}}"#,
                r#"{"thinking":"","function":"archival_memory_search","arguments":{"query":"x","page":"2","request_heartbeat":true}}"#,
                r#"{"thinking":"","function":"archival_memory_search","arguments":{"query":"x","page":-1,"request_heartbeat":true}}"#,
                // Missing required fields.
                r#"{"thinking":"","function":"core_memory_append","arguments":{"label":"human","content":"x"}}"#,
                r#"{"function":"send_message","arguments":{"message":"hi"}}"#,
                r#"{"thinking":"","function":"send_message"}"#,
                // Invented argument.
                r#"{"thinking":"","function":"send_message","arguments":{"message":"hi","mood":"happy"}}"#,
                // Wrong field order.
                r#"{"function":"send_message","thinking":"","arguments":{"message":"hi"}}"#,
                // Trailing garbage, prose, fences, syntax errors.
                r#"{"thinking":"","function":"send_message","arguments":{"message":"hi"}} done"#,
                r#"Sure! {"thinking":"","function":"send_message","arguments":{"message":"hi"}}"#,
                "```json\n{\"thinking\":\"\",\"function\":\"send_message\",\"arguments\":{\"message\":\"hi\"}}\n```",
                r#"{"thinking":"","function":"send_message","arguments":{"message":"hi",}}"#,
                r#"{'thinking':'','function':'send_message','arguments':{'message':'hi'}}"#,
            ],
        );
    }

    #[test]
    fn the_grammar_is_stable_and_readable() {
        let text = tool_call_grammar(
            &builtin_tools()[..1],
            &UnionOptions::default(),
            &GbnfOptions::default(),
        )
        .unwrap();
        let expected = r#"root ::= "{" ws "\"thinking\"" ws ":" ws string "," ws "\"function\"" ws ":" ws "\"send_message\"" ws "," ws "\"arguments\"" ws ":" ws root-arguments "}" ws
root-arguments ::= "{" ws "\"message\"" ws ":" ws string "}" ws
string ::= "\"" char* "\"" ws
char ::= [^"\\\x7F\x00-\x1F] | [\\] ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
ws ::= [ \t\n]{0,2}
"#;
        assert_eq!(text, expected);
    }
}
