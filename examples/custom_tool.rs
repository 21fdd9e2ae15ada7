//! Extension point: a **function** (tool) the LLM can call.
//!
//! `#[memgpt_fn]` turns an async Rust function into one: its doc comment becomes the
//! description, its parameters (with their doc comments) the JSON schema, and it registers
//! itself at link time. Offer it to an agent by name with `AgentBuilder::function`.
//!
//! Runs offline: a scripted provider plays the LLM.
//!
//! ```text
//! cargo run --example custom_tool
//! ```

use std::sync::Arc;

use memgpt::backend::testing::ScriptedProvider;
use memgpt::function::FunctionError;
use memgpt::{Agent, memgpt_fn};
use serde_json::json;

/// Converts a temperature from degrees Celsius to degrees Fahrenheit.
#[memgpt_fn]
async fn celsius_to_fahrenheit(
    /// The temperature in degrees Celsius.
    celsius: f64,
) -> Result<String, FunctionError> {
    if celsius < -273.15 {
        return Err(FunctionError::new("below absolute zero"));
    }
    Ok(format!("{:.1} °F", celsius * 9.0 / 5.0 + 32.0))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let llm = Arc::new(ScriptedProvider::new());
    // The model calls the tool (asking to continue), then answers with what it returned.
    llm.push_call(
        "celsius_to_fahrenheit",
        json!({"celsius": 21.0, "request_heartbeat": true}),
    );
    llm.push_call("send_message", json!({"message": "21 °C is 69.8 °F."}));

    let mut agent = Agent::builder()
        .provider(llm.clone())
        .function("celsius_to_fahrenheit")
        .build()
        .await?;
    let record = agent.step("How warm is 21 °C in Fahrenheit?").await?;

    let call = &record.function_calls[0];
    println!("{} returned {}", call.name, call.output);
    assert!(call.ok && call.output.contains("69.8"));
    println!("agent: {}", record.reply());
    assert_eq!(record.reply(), "21 °C is 69.8 °F.");
    Ok(())
}
