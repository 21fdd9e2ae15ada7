//! Prompt size, NUL characters, responses with too many calls.

use super::*;

#[tokio::test]
async fn the_first_prompt_with_all_eight_functions_stays_under_1600_tokens() {
    let llm = llm();
    let mut agent = agent(&llm).await;
    assert_eq!(agent.function_set().len(), 8);
    println!("main context before the first message: {:?}", agent.stats());
    llm.push_call("send_message", json!({"message": "Hi!"}));
    agent.step("Hello, who are you?").await.unwrap();
    let request = &llm.requests()[0];
    let counter = crate::tokens::TiktokenCounter::cl100k();
    let messages: usize = request
        .messages
        .iter()
        .map(|m| crate::tokens::TokenCounter::count_message(&counter, m))
        .sum();
    let tools: usize = request
        .tools
        .iter()
        .map(|t| {
            crate::tokens::TokenCounter::count_text(&counter, &serde_json::to_string(t).unwrap())
        })
        .sum();
    let total = messages + tools;
    println!("first prompt: {total} tokens ({tools} in the function schemas)");
    assert!(total <= 1_600, "the first prompt is {total} tokens");
}

/// Returns binary-looking text with NUL characters.
#[crate::memgpt_fn]
async fn read_binary() -> String {
    "header\0\0payload".to_owned()
}

#[tokio::test]
async fn nul_characters_are_refused_from_callers_and_cleaned_from_the_model_and_tools() {
    let llm = llm();
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .function("read_binary")
        .build()
        .await
        .unwrap();

    // From the caller: refused before any LLM call, nothing stored.
    let err = agent.step("before\0after").await.unwrap_err();
    assert_eq!(err.kind(), crate::ErrorKind::InvalidInput, "{err}");
    assert!(err.to_string().contains("NUL character"), "{err}");
    assert_eq!(agent.version(), 0);
    assert_eq!(llm.remaining(), 0);
    let err = agent
        .insert_archival("a\0b", Default::default())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), crate::ErrorKind::InvalidInput, "{err}");
    assert_eq!(agent.version(), 0);

    // In function arguments: reported to the model, which tries again; lone surrogates are not
    // JSON at all.
    llm.push_raw_calls(
        "Store it.",
        vec![
            (
                "archival_memory_insert".into(),
                r#"{"content": "x\u0000y", "request_heartbeat": true}"#.into(),
            ),
            (
                "core_memory_append".into(),
                r#"{"label": "human", "content": "\ud800", "request_heartbeat": true}"#.into(),
            ),
        ],
    );
    // From the model's own words and a tool's output: cleaned (U+FFFD), and the step commits.
    llm.push_raw_calls(
        "Odd\0thought.",
        vec![(
            "read_binary".into(),
            r#"{"request_heartbeat": true}"#.into(),
        )],
    );
    llm.push_call("send_message", json!({"message": "done"}));
    let record = agent.step("store x and y").await.unwrap();
    assert_eq!(record.stop_reason, StopReason::EndTurn);
    let calls = &record.function_calls;
    assert!(
        !calls[0].ok && calls[0].output.contains("NUL character"),
        "{}",
        calls[0].output
    );
    assert!(
        !calls[1].ok && calls[1].output.contains("not valid JSON"),
        "{}",
        calls[1].output
    );
    assert!(calls[2].ok);
    assert_eq!(calls[2].output, "header\u{FFFD}\u{FFFD}payload");
    let assistant = record
        .messages
        .iter()
        .find(|m| m.text.starts_with("Odd"))
        .unwrap();
    assert_eq!(assistant.text, "Odd\u{FFFD}thought.");
    assert_eq!(agent.version(), 1);
    assert_eq!(
        agent
            .storage()
            .archival
            .count_passages(agent.id())
            .await
            .unwrap(),
        0
    );
}

#[tokio::test]
async fn a_response_of_100k_calls_runs_a_bounded_number_and_says_so() {
    let llm = llm();
    let calls: Vec<(String, String)> = (0..100_000)
        .map(|i| {
            (
                "archival_memory_insert".to_owned(),
                json!({"content": format!("fact {i}"), "request_heartbeat": true}).to_string(),
            )
        })
        .collect();
    llm.push_raw_calls("Storing everything.", calls);
    llm.push_call("send_message", json!({"message": "stored some"}));
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .context_window(8_000)
        .build()
        .await
        .unwrap();
    let record = agent.step("store all").await.unwrap();
    assert_eq!(record.stop_reason, StopReason::EndTurn);
    let limit = AgentConfig::default().max_calls_per_response;
    assert_eq!(record.function_calls.len(), limit + 1);
    assert_eq!(
        agent
            .storage()
            .archival
            .count_passages(agent.id())
            .await
            .unwrap(),
        limit as u64
    );
    let alert = record
        .messages
        .iter()
        .find(|m| m.kind == MessageKind::SystemAlert)
        .expect("the model is told");
    assert!(
        alert
            .text
            .contains("held 100000 function calls; only the first 16 ran"),
        "{}",
        alert.text
    );
    // The stored assistant message holds the calls that ran, each with its result.
    let assistant = &record.messages[1];
    assert_eq!(assistant.tool_calls.len(), limit);
    // The second request (after the heartbeat) fit the window.
    let stats = agent.context().stats();
    assert!(stats.total_tokens <= stats.window, "{stats:?}");
}
