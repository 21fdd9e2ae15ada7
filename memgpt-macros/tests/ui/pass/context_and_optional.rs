//! A tool taking `&mut FunctionContext` first, with documented and optional parameters: its schema,
//! and a real dispatch through an agent driven by the scripted provider.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use memgpt_core::function::{FunctionRegistry, FunctionContext, FunctionError};
use memgpt_core::memgpt_fn;
use memgpt_core::testing::ScriptedProvider;
use memgpt_core::{Agent, StopReason};

/// The unit the forecast is given in (an agent extension).
struct Unit(&'static str);

/// Look up the weather for a city.
///
/// Temperatures are in degrees Celsius.
#[memgpt_fn]
async fn get_weather(
    ctx: &mut FunctionContext<'_>,
    /// The city, e.g. "Paris".
    city: String,
    /// Days ahead
    /// (0 = today).
    days: Option<u32>,
) -> Result<String, FunctionError> {
    let unit = ctx.extension::<Unit>().ok_or("no unit configured")?.0;
    Ok(format!(
        "20{unit} in {city}, {} days ahead",
        days.unwrap_or(0)
    ))
}

/// Runs a future that needs no reactor (in-memory storage, scripted provider).
fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..10_000 {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        std::thread::yield_now();
    }
    panic!("the future did not complete");
}

fn check_schema() {
    let registry = FunctionRegistry::linked().expect("no duplicate names");
    let function = registry
        .get("get_weather")
        .expect("get_weather is registered");
    let schema = &function.schema;
    assert_eq!(schema.name, "get_weather");
    assert_eq!(
        schema.description,
        "Look up the weather for a city.\n\nTemperatures are in degrees Celsius."
    );
    assert!(!function.function.is_terminal());

    let parameters = &schema.parameters;
    assert_eq!(parameters["type"], "object");
    assert_eq!(parameters["additionalProperties"], false);
    let required: Vec<&str> = parameters["required"]
        .as_array()
        .expect("a required list")
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(required, ["city", "request_heartbeat"]);

    let properties = parameters["properties"].as_object().expect("properties");
    let mut names: Vec<&str> = properties.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(names, ["city", "days", "request_heartbeat"]);
    assert_eq!(properties["city"]["type"], "string");
    assert_eq!(
        properties["city"]["description"],
        "The city, e.g. \"Paris\"."
    );
    // Wrapped doc lines are joined into one description.
    assert_eq!(properties["days"]["description"], "Days ahead (0 = today).");
    assert_eq!(properties["request_heartbeat"]["type"], "boolean");
    let heartbeat_doc = properties["request_heartbeat"]["description"].as_str();
    assert!(heartbeat_doc.is_some_and(|doc| !doc.is_empty()));
}

fn check_dispatch() {
    let llm = Arc::new(ScriptedProvider::new());
    let call = |arguments: &str| vec![("get_weather".to_owned(), arguments.to_owned())];
    llm.push_raw_calls("", call(r#"{"city": "Paris", "request_heartbeat": true}"#));
    llm.push_raw_calls("", call(r#"{"city": 3, "request_heartbeat": true}"#));
    llm.push_raw_calls(
        "",
        call(r#"{"city": "Oslo", "days": 2, "request_heartbeat": false}"#),
    );

    let step = block_on(async {
        let mut agent = Agent::builder()
            .provider(llm.clone())
            .function("get_weather")
            .extension(Unit("°C"))
            .build()
            .await?;
        agent.step("What's the weather?").await
    })
    .expect("the step runs");

    assert!(
        llm.agent_requests()[0]
            .tools
            .iter()
            .any(|t| t.name == "get_weather")
    );
    assert_eq!(step.stop_reason, StopReason::EndTurn);
    let calls = &step.function_calls;
    assert_eq!(calls.len(), 3, "{calls:#?}");

    assert!(calls[0].ok && calls[0].request_heartbeat, "{:?}", calls[0]);
    assert_eq!(calls[0].output, "20°C in Paris, 0 days ahead");

    assert!(!calls[1].ok, "{:?}", calls[1]);
    assert!(
        calls[1]
            .output
            .starts_with("invalid arguments for `get_weather`: `city`: invalid type: integer `3`"),
        "{}",
        calls[1].output
    );

    assert!(calls[2].ok && !calls[2].request_heartbeat, "{:?}", calls[2]);
    assert_eq!(calls[2].output, "20°C in Oslo, 2 days ahead");
}

fn main() {
    check_schema();
    check_dispatch();
}
