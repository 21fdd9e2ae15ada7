//! `#[memgpt_fn(name = "...")]` and forwarded `#[serde]` attributes on parameters.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use memgpt_core::function::FunctionRegistry;
use memgpt_core::memgpt_fn;

/// Scale a number.
#[memgpt_fn(name = "renamed")]
pub async fn scale(
    /// The number to scale.
    #[serde(rename = "x")]
    value: f64,
    /// The factor (default 2).
    #[serde(default)]
    factor: Option<f64>,
) -> String {
    (value * factor.unwrap_or(2.0)).to_string()
}

/// Polls a future that never waits.
fn now_or_never<F: Future>(future: F) -> F::Output {
    match pin!(future).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("the future was not ready"),
    }
}

fn main() {
    // The Rust name and parameters are unchanged.
    assert_eq!(now_or_never(scale(1.5, None)), "3");

    let registry = FunctionRegistry::linked().expect("no duplicate names");
    assert!(
        registry.get("scale").is_none(),
        "registered under its new name only"
    );
    let function = registry.get("renamed").expect("renamed is registered");
    assert_eq!(function.schema.name, "renamed");
    assert_eq!(function.schema.description, "Scale a number.");

    let parameters = &function.schema.parameters;
    let properties = parameters["properties"].as_object().expect("properties");
    assert!(properties.get("value").is_none());
    assert_eq!(properties["x"]["type"], "number");
    assert_eq!(properties["x"]["description"], "The number to scale.");
    let required: Vec<&str> = parameters["required"]
        .as_array()
        .expect("a required list")
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(required, ["x", "request_heartbeat"]);
}
