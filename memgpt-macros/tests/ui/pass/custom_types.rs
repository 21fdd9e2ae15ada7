//! Parameter types of the user's own, deriving through the runtime crate's re-exports only.

use memgpt_core::function::FunctionRegistry;
use memgpt_core::memgpt_fn;
use memgpt_core::schemars::JsonSchema;
use memgpt_core::serde::Deserialize;

/// How urgent a reminder is.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(crate = "memgpt_core::serde", rename_all = "lowercase")]
#[schemars(crate = "memgpt_core::schemars")]
pub enum Urgency {
    /// Whenever.
    Low,
    /// Soon.
    High,
}

/// When to remind.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(crate = "memgpt_core::serde")]
#[schemars(crate = "memgpt_core::schemars")]
pub struct At {
    /// Hour of day, 0-23.
    pub hour: u8,
}

/// Set a reminder.
#[memgpt_fn]
async fn remind(
    /// What to remind about.
    what: String,
    /// How urgent.
    urgency: Urgency,
    /// When.
    at: At,
    /// Tags.
    tags: Vec<String>,
) -> String {
    format!("{what} {urgency:?} {} {}", at.hour, tags.len())
}

fn main() {
    let registry = FunctionRegistry::linked().unwrap();
    let schema = &registry.get("remind").unwrap().schema.parameters;
    // Documented variants become `oneOf` entries, each a `const` with its description.
    let variants = schema["properties"]["urgency"]["oneOf"].as_array().unwrap();
    let consts: Vec<&str> = variants.iter().map(|v| v["const"].as_str().unwrap()).collect();
    assert_eq!(consts, ["low", "high"]);
    assert_eq!(variants[1]["description"], "Soon.");
    assert_eq!(schema["properties"]["urgency"]["description"], "How urgent.");
    assert_eq!(schema["properties"]["at"]["properties"]["hour"]["description"], "Hour of day, 0-23.");
    assert_eq!(schema["properties"]["tags"]["type"], "array");
    assert!(schema.get("$defs").is_none(), "subschemas are inlined");
    assert_eq!(
        schema["required"],
        memgpt_core::serde_json::json!(["what", "urgency", "at", "tags", "request_heartbeat"])
    );
}
