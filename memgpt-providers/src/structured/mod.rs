//! Function calls that are valid by construction, for servers without (reliable) native tool
//! calling: local models behind llama.cpp, vLLM, Ollama or LM Studio.
//!
//! The most common failure of a MemGPT agent on a local model is a broken function call:
//! invalid JSON, a misspelt function, a missing `request_heartbeat`. This module offers three
//! remedies, from strongest to weakest, all plain `serde_json` (no feature flag):
//!
//! * [`union_schema`]: one JSON schema whose instances are exactly the valid calls,
//!   `{"thinking": ..., "function": NAME, "arguments": {...}}`. Servers that decode under a
//!   schema (`response_format: json_schema`) then cannot emit anything else. [`parse_call`]
//!   turns the reply back into a [`ToolCall`], [`call_text`] renders a call in that shape.
//! * [`json_schema_to_gbnf`] / [`tool_call_grammar`]: the same constraint as a llama.cpp GBNF
//!   grammar, for the server's `grammar` field or an in-process llama.cpp backend.
//! * [`protocol_prompt`] and [`parse_lenient`]: for servers with neither, a system-prompt
//!   addendum telling the model the JSON shape, and a tolerant parser that finds the call in
//!   the reply and repairs the usual defects (trailing commas, single quotes, Python literals,
//!   `"true"` for `true`, arguments as a JSON string...). When nothing can be recovered,
//!   [`feedback`] words the error for the model, so it can correct itself.
//!
//! The OpenAI-compatible provider uses all of them through
//! [`ToolCalling`](crate::openai::ToolCalling) (feature `openai`).
//!
//! # Example
//!
//! ```
//! use memgpt_core::llm::ToolSchema;
//! use memgpt_providers::structured::{parse_lenient, Repair};
//! use serde_json::json;
//!
//! let tools = [ToolSchema {
//!     name: "send_message".into(),
//!     description: "Sends a message to the user.".into(),
//!     parameters: json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}),
//! }];
//! let reply = "Sure!\n```json\n{'function': 'send_message', 'arguments': {'message': 'Hi!',},}\n```";
//! let call = parse_lenient(reply, &tools).unwrap();
//! assert_eq!(call.function, "send_message");
//! assert_eq!(call.arguments["message"], "Hi!");
//! assert!(call.repairs.contains(&Repair::SingleQuotes));
//! ```

mod gbnf;
#[cfg(test)]
mod gbnf_check;
#[cfg(any(test, feature = "local"))]
pub(crate) mod gbnf_match;
#[cfg(any(test, feature = "local"))]
mod gbnf_parse;
mod json_repair;
mod text_protocol;
mod union;

use memgpt_core::llm::ToolSchema;
use memgpt_core::message::ToolCall;
use serde_json::{Map, Value};

pub use gbnf::{GbnfError, GbnfOptions, Whitespace, json_schema_to_gbnf};
pub use text_protocol::{
    INVALID_REPLY_FUNCTION, PROTOCOL_HEADING, feedback, parse_lenient, protocol_prompt,
};
pub use union::{
    ARGUMENTS_FIELD, FUNCTION_FIELD, SchemaError, THINKING_FIELD, UnionOptions, call_text,
    parse_call, union_schema,
};

/// The llama.cpp GBNF grammar of "one call to one of `tools`": [`union_schema`] converted by
/// [`json_schema_to_gbnf`].
///
/// ```
/// use memgpt_core::llm::ToolSchema;
/// use memgpt_providers::structured::{GbnfOptions, UnionOptions, tool_call_grammar};
/// use serde_json::json;
///
/// let tools = [ToolSchema {
///     name: "send_message".into(),
///     description: String::new(),
///     parameters: json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}),
/// }];
/// let grammar = tool_call_grammar(&tools, &UnionOptions::default(), &GbnfOptions::default()).unwrap();
/// assert!(grammar.starts_with("root ::= "));
/// assert!(grammar.contains(r#""\"send_message\"""#));
/// ```
pub fn tool_call_grammar(
    tools: &[ToolSchema],
    union: &UnionOptions,
    options: &GbnfOptions,
) -> Result<String, GbnfError> {
    let schema = union_schema(tools, union)?;
    json_schema_to_gbnf(&schema, options)
}

/// A function call recovered from a model's text reply.
#[derive(Clone, Debug, PartialEq)]
pub struct ParsedCall {
    /// The `"thinking"` field (inner monologue); empty when there was none.
    pub thinking: String,
    /// The function name (one of the offered functions).
    pub function: String,
    /// The named arguments.
    pub arguments: Map<String, Value>,
    /// Text around the JSON object (prose, minus code fences); empty for [`parse_call`].
    pub prose: String,
    /// What [`parse_lenient`] had to fix, in the order it fixed it (empty for valid replies).
    pub repairs: Vec<Repair>,
}

impl ParsedCall {
    /// The arguments as compact JSON text, as [`ToolCall::arguments`] holds them.
    pub fn arguments_json(&self) -> String {
        // Serialising a map of JSON values cannot fail.
        serde_json::to_string(&self.arguments).unwrap_or_else(|_| "{}".to_owned())
    }

    /// The inner monologue: the `"thinking"` field, or else the prose around the call.
    pub fn monologue(&self) -> &str {
        if self.thinking.trim().is_empty() {
            self.prose.trim()
        } else {
            &self.thinking
        }
    }

    /// The call, with id `id`.
    pub fn to_tool_call(&self, id: impl Into<String>) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: self.function.clone(),
            arguments: self.arguments_json(),
        }
    }

    /// The inner monologue (see [`ParsedCall::monologue`]) and the call, with id `id`: what a
    /// provider puts into [`ChatResponse`](memgpt_core::llm::ChatResponse)'s `content` and
    /// `tool_calls`.
    pub fn into_parts(self, id: impl Into<String>) -> (String, ToolCall) {
        let call = self.to_tool_call(id);
        let monologue = self.monologue().to_owned();
        (monologue, call)
    }
}

/// Why a reply is not a function call. The messages are written for the model; wrap them with
/// [`feedback`] to tell it how to reply instead.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// The reply has no `{`.
    #[error("it contains no JSON object")]
    NoObject,
    /// The JSON could not be parsed (or repaired).
    #[error("the JSON is malformed: {message}")]
    Json {
        /// What the parser said.
        message: String,
    },
    /// The reply is JSON, but not an object.
    #[error("it is {found}, not a JSON object")]
    NotAnObject {
        /// What it is (`"an array"`...).
        found: &'static str,
    },
    /// No field names the function.
    #[error("the object has no \"function\" field naming the function to call")]
    MissingFunction,
    /// The function field is not a string.
    #[error("\"function\" must be a string (the function's name), not {found}")]
    FunctionNotAString {
        /// What it is.
        found: &'static str,
    },
    /// The named function was not offered.
    #[error("there is no function named `{name}`")]
    UnknownFunction {
        /// The name the model wrote.
        name: String,
    },
    /// The arguments are not an object.
    #[error("\"arguments\" must be a JSON object of named arguments, not {found}")]
    ArgumentsNotAnObject {
        /// What they are.
        found: &'static str,
    },
}

/// A defect [`parse_lenient`] repaired.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Repair {
    /// Prose or code fences around the JSON object were dropped.
    SurroundingText,
    /// A comma before `}` or `]` was dropped.
    TrailingComma,
    /// A missing comma between members or elements was assumed.
    MissingComma,
    /// A single-quoted string or key was read.
    SingleQuotes,
    /// An unquoted key was read.
    UnquotedKey,
    /// A bare word value (`send_message`) was read as a string.
    UnquotedString,
    /// `True`, `False` or `None` (Python) was read as `true`, `false` or `null`.
    PythonLiteral,
    /// A raw newline, tab or other control character inside a string was kept.
    RawControlCharacter,
    /// A `"` inside a string that does not end it was kept.
    UnescapedQuote,
    /// An invalid escape such as `\'` or `\d` was read literally.
    InvalidEscape,
    /// A `//` or `/* */` comment was skipped.
    Comment,
    /// Missing closing brackets at the end of the reply were added.
    UnclosedBracket,
    /// A number in a non-JSON form (`+1`, `.5`, `1.`) was normalised.
    NumberFormat,
    /// Arguments given as a JSON string were decoded.
    ArgumentsAsString,
    /// Missing arguments were taken as `{}`.
    MissingArguments,
    /// Arguments written next to `"function"` instead of inside `"arguments"` were gathered.
    FlattenedArguments,
    /// A field was given under another common name (`"name"`, `"args"`, `"parameters"`...).
    AliasedField,
    /// The call was nested (`{"function": {"name": ..., "arguments": ...}}` or `tool_calls`).
    NestedCall,
    /// The function name matched only ignoring case or `-`/`_`.
    FunctionNameCase,
    /// A string such as `"true"` was turned into the boolean the schema wants.
    CoercedBoolean,
    /// A string such as `"2"` (or `2.0` for an integer) was turned into the number the schema
    /// wants.
    CoercedNumber,
    /// A missing `request_heartbeat` was set to `false`.
    DefaultHeartbeat,
}

/// "a string", "an object"...: how error messages name a JSON value's kind.
pub(crate) fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use memgpt_core::builtin::DEFAULT_FUNCTIONS;
    use memgpt_core::function::FunctionRegistry;
    use memgpt_core::llm::ToolSchema;

    /// The real MemGPT functions' schemas, as the agent offers them.
    pub(crate) fn builtin_tools() -> Vec<ToolSchema> {
        let registry = FunctionRegistry::linked().expect("built-in functions");
        let toolset = registry
            .function_set(&DEFAULT_FUNCTIONS)
            .expect("default toolset");
        toolset.schemas().to_vec()
    }

    #[test]
    fn the_builtin_schemas_are_what_the_tests_assume() {
        let tools = builtin_tools();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, DEFAULT_FUNCTIONS);
        let search = tools
            .iter()
            .find(|t| t.name == "archival_memory_search")
            .unwrap();
        assert_eq!(
            search.parameters["properties"]["page"]["type"],
            serde_json::json!(["integer", "null"]),
            "{}",
            search.parameters
        );
    }
}
