//! [`FunctionError`] and reading a call's raw arguments into typed ones.

use std::fmt;

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::embed::EmbedError;
use crate::memory::MemoryError;
use crate::store::StoreError;

/// An error a function reports to the LLM. Its message is what the LLM reads, so say what went
/// wrong and how to fix the call.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct FunctionError {
    message: String,
}

impl FunctionError {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl From<MemoryError> for FunctionError {
    fn from(e: MemoryError) -> Self {
        Self::new(e.to_string())
    }
}

impl From<StoreError> for FunctionError {
    fn from(e: StoreError) -> Self {
        Self::new(e.to_string())
    }
}

impl From<EmbedError> for FunctionError {
    fn from(e: EmbedError) -> Self {
        Self::new(e.to_string())
    }
}

impl From<String> for FunctionError {
    fn from(message: String) -> Self {
        Self::new(message)
    }
}

impl From<&str> for FunctionError {
    fn from(message: &str) -> Self {
        Self::new(message)
    }
}

/// What a `#[memgpt_fn]` function may return: text for the LLM, or an error.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be returned from a #[memgpt_fn] function",
    note = "return `String`, `()`, `serde_json::Value`, `memgpt::function::Json<T>` or a `Result` of one of those with an error that implements `Display`"
)]
pub trait IntoFunctionOutput {
    /// `Ok(text)` for the LLM, or `Err(error text)`.
    fn into_function_output(self) -> Result<String, String>;
}

impl IntoFunctionOutput for String {
    fn into_function_output(self) -> Result<String, String> {
        Ok(self)
    }
}

impl IntoFunctionOutput for &'static str {
    fn into_function_output(self) -> Result<String, String> {
        Ok(self.to_owned())
    }
}

impl IntoFunctionOutput for () {
    fn into_function_output(self) -> Result<String, String> {
        Ok("OK".to_owned())
    }
}

impl IntoFunctionOutput for serde_json::Value {
    fn into_function_output(self) -> Result<String, String> {
        Ok(self.to_string())
    }
}

/// Returns any serialisable value to the LLM as JSON.
#[derive(Clone, Debug, PartialEq)]
pub struct Json<T>(pub T);

impl<T: Serialize> IntoFunctionOutput for Json<T> {
    fn into_function_output(self) -> Result<String, String> {
        serde_json::to_string(&self.0)
            .map_err(|e| format!("the function's result could not be serialised: {e}"))
    }
}

impl<T: IntoFunctionOutput, E: fmt::Display> IntoFunctionOutput for Result<T, E> {
    fn into_function_output(self) -> Result<String, String> {
        match self {
            Ok(value) => value.into_function_output(),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// Types a `#[memgpt_fn]` parameter may have: deserialisable from JSON, with a JSON schema.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a #[memgpt_fn] parameter",
    label = "needs serde::Deserialize + schemars::JsonSchema",
    note = "derive `serde::Deserialize` and `schemars::JsonSchema` (schemars 1) for your own types; both crates are re-exported as `memgpt::serde` and `memgpt::schemars`"
)]
pub trait FunctionParameter: DeserializeOwned + JsonSchema + Send {}

// `do_not_recommend`: a type that cannot be a parameter gets one error, with the message above,
// rather than one per missing bound.
#[diagnostic::do_not_recommend]
impl<T: DeserializeOwned + JsonSchema + Send> FunctionParameter for T {}

/// Deserialises the LLM's arguments into `T`, with an error message that names the function,
/// the offending field and what was expected.
pub fn parse_arguments<T: DeserializeOwned>(
    function: &str,
    arguments: serde_json::Value,
) -> Result<T, String> {
    if !arguments.is_object() {
        return Err(format!(
            "invalid arguments for `{function}`: expected a JSON object of named arguments, got {}",
            json_kind(&arguments)
        ));
    }
    serde_path_to_error::deserialize(arguments).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner().to_string();
        if path == "." || path.is_empty() {
            format!("invalid arguments for `{function}`: {inner}")
        } else {
            format!("invalid arguments for `{function}`: `{path}`: {inner}")
        }
    })
}

fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// The JSON schema of a function's arguments struct: inlined (no `$ref`/`$defs`), with no
/// `$schema` or `title`, and without schemars' non-standard numeric formats (`uint32`...), which
/// is what chat APIs and grammar generators handle best and costs the fewest prompt tokens.
pub fn parameters_schema<T: JsonSchema>() -> serde_json::Value {
    let generator = SchemaSettings::draft2020_12()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator();
    let mut value = generator.into_root_schema_for::<T>().to_value();
    if let Some(object) = value.as_object_mut() {
        object.remove("title");
        object.remove("$schema");
    }
    strip_numeric_formats(&mut value);
    value
}

/// Removes `"format": "int32"`-style annotations (schemars' own, not JSON Schema's) everywhere,
/// keeping standard formats such as `date-time`.
fn strip_numeric_formats(value: &mut serde_json::Value) {
    const NUMERIC: &[&str] = &[
        "int8", "int16", "int32", "int64", "int128", "uint", "uint8", "uint16", "uint32", "uint64",
        "uint128", "int", "float", "double",
    ];
    match value {
        serde_json::Value::Object(map) => {
            if map
                .get("format")
                .and_then(|f| f.as_str())
                .is_some_and(|f| NUMERIC.contains(&f))
            {
                map.remove("format");
            }
            map.values_mut().for_each(strip_numeric_formats);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(strip_numeric_formats),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Debug, Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Args {
        /// The label.
        label: String,
        page: Option<u32>,
        request_heartbeat: bool,
    }

    #[test]
    fn errors_name_the_function_and_field() {
        let e = parse_arguments::<Args>("f", json!({"request_heartbeat": true})).unwrap_err();
        assert_eq!(e, "invalid arguments for `f`: missing field `label`");
        let e = parse_arguments::<Args>(
            "f",
            json!({"label": "x", "page": "two", "request_heartbeat": true}),
        )
        .unwrap_err();
        assert!(
            e.starts_with(
                "invalid arguments for `f`: `page`: invalid type: string \"two\", expected"
            ),
            "{e}"
        );
        let e = parse_arguments::<Args>(
            "f",
            json!({"label": "x", "pg": 1, "request_heartbeat": true}),
        )
        .unwrap_err();
        assert!(
            e.contains("unknown field `pg`, expected one of `label`, `page`, `request_heartbeat`"),
            "{e}"
        );
        let e = parse_arguments::<Args>("f", json!([1])).unwrap_err();
        assert!(e.contains("got an array"));
        let e = parse_arguments::<Args>("f", json!({"label": "x", "request_heartbeat": "yes"}))
            .unwrap_err();
        assert!(
            e.contains("`request_heartbeat`: invalid type: string \"yes\", expected a boolean"),
            "{e}"
        );
    }

    #[test]
    fn schema_is_inlined_and_options_are_optional() {
        let schema = parameters_schema::<Args>();
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["required"], json!(["label", "request_heartbeat"]));
        assert_eq!(schema["properties"]["label"]["description"], "The label.");
        assert_eq!(schema["additionalProperties"], json!(false));
        assert!(schema.get("$schema").is_none() && schema.get("title").is_none());
        assert_eq!(
            schema["properties"]["page"],
            json!({"type": ["integer", "null"], "minimum": 0})
        );
        let keys: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            ["label", "page", "request_heartbeat"],
            "declaration order"
        );
    }

    #[test]
    fn outputs_convert() {
        assert_eq!(
            Ok::<_, FunctionError>("x".to_owned()).into_function_output(),
            Ok("x".into())
        );
        assert_eq!(
            Err::<String, _>(FunctionError::new("bad")).into_function_output(),
            Err("bad".into())
        );
        assert_eq!(Json(vec![1, 2]).into_function_output(), Ok("[1,2]".into()));
        assert_eq!(().into_function_output(), Ok("OK".into()));
    }
}
