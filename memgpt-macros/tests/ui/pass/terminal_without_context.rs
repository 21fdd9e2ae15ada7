//! A `terminal` tool without a context parameter: no `request_heartbeat` flag.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use memgpt_core::function::FunctionRegistry;
use memgpt_core::memgpt_fn;

/// Say goodbye and end the conversation.
#[memgpt_fn(terminal)]
async fn say_goodbye(
    /// Who to say goodbye to.
    name: String,
) -> String {
    format!("Goodbye, {name}.")
}

/// Polls a future that never waits.
fn now_or_never<F: Future>(future: F) -> F::Output {
    match pin!(future).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("the future was not ready"),
    }
}

fn main() {
    // The annotated function itself is kept as written.
    assert_eq!(now_or_never(say_goodbye("Ada".into())), "Goodbye, Ada.");

    let registry = FunctionRegistry::linked().expect("no duplicate names");
    let function = registry
        .get("say_goodbye")
        .expect("say_goodbye is registered");
    assert!(function.function.is_terminal());
    assert_eq!(
        function.schema.description,
        "Say goodbye and end the conversation."
    );

    let parameters = &function.schema.parameters;
    let properties = parameters["properties"].as_object().expect("properties");
    assert_eq!(properties.keys().collect::<Vec<_>>(), ["name"]);
    assert!(properties.get("request_heartbeat").is_none());
    let required = parameters["required"].as_array().expect("a required list");
    assert_eq!(required.len(), 1);
    assert_eq!(required[0], "name");
}
