//! A tool defined in another crate with nothing but `#[memgpt_fn]` is callable by the agent.

// The example crate is only named here: this is what keeps its tools linked.
use memgpt_example_tools as _;

use memgpt::function::FunctionRegistry;
use memgpt::{Agent, StopReason};
use serde_json::json;

use crate::fake_openai::{FakeOpenAi, Reply};
use crate::provider;

#[memgpt_test_harness::test]
async fn an_example_crate_tool_is_registered_and_callable() {
    let registry = FunctionRegistry::linked().unwrap();
    let calculate = &registry
        .get("calculate")
        .expect("linked from memgpt-example-tools")
        .schema;
    assert!(
        calculate
            .description
            .starts_with("Evaluates an arithmetic expression")
    );
    assert_eq!(
        calculate.parameters["properties"]["expression"]["description"],
        "The expression to evaluate."
    );

    let server = FakeOpenAi::start().await;
    server.push(Reply::call(
        "calculate",
        json!({"expression": "2 * (3 + 4)", "request_heartbeat": true}),
    ));
    server.push(Reply::call(
        "calculate",
        json!({"expression": "2 +", "request_heartbeat": false}),
    ));
    server.push(Reply::call("send_message", json!({"message": "It is 14."})));
    let mut agent = Agent::builder()
        .provider(provider(&server))
        .function("calculate")
        .function("current_time")
        .build()
        .await
        .unwrap();
    let record = agent.step("what is 2*(3+4)?").await.unwrap();
    assert_eq!(record.stop_reason, StopReason::EndTurn);
    assert_eq!(record.function_calls[0].output, "14");
    assert!(record.function_calls[0].ok);
    assert_eq!(
        record.function_calls[1].output,
        "the expression ends too early"
    );
    assert!(!record.function_calls[1].ok);
    let offered: Vec<String> = server.agent_requests()[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(offered.ends_with(&["calculate".to_owned(), "current_time".to_owned()]));
}
