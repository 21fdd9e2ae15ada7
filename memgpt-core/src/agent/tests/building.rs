//! Building agents: windows too small, unknown tools, panicking functions, `Send` steps.

use super::*;

#[tokio::test]
async fn a_window_too_small_for_the_prompt_fails_at_creation() {
    let storage = Storage::in_memory();
    let err = Agent::builder()
        .provider(llm())
        .storage(storage.clone())
        .context_window(600)
        .build()
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("(a context window of 600 minus 150 kept for the completion)"),
        "{err}"
    );
    assert!(
        storage.agents.list_agents().await.unwrap().is_empty(),
        "nothing was stored"
    );
}

#[tokio::test]
async fn unknown_tools_fail_at_creation() {
    let err = Agent::builder()
        .provider(llm())
        .function("no_such_tool")
        .build()
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("no function named `no_such_tool` is registered"),
        "{err}"
    );
}

/// Panics when called.
#[crate::memgpt_fn]
async fn explode() -> String {
    panic!("kaboom")
}

#[tokio::test]
async fn a_panicking_function_is_a_failed_call() {
    let llm = llm();
    llm.push_call("explode", json!({"request_heartbeat": false}));
    llm.push_call("send_message", json!({"message": "sorry"}));
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .function("explode")
        .build()
        .await
        .unwrap();
    let record = agent.step("go").await.unwrap();
    assert_eq!(
        record.function_calls[0].output,
        "function `explode` crashed: kaboom"
    );
    assert_eq!(record.stop_reason, StopReason::EndTurn);
}

#[test]
fn steps_are_send() {
    fn assert_send<T: Send>(_: &T) {}
    let llm = llm();
    let fut = async move {
        let mut agent = agent(&llm).await;
        agent.step("x").await.ok();
    };
    assert_send(&fut);
}
