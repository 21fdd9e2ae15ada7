//! The loop: sends, heartbeats, failed and refused calls, the chain limit, provider errors.

use super::*;

#[tokio::test]
async fn send_message_ends_the_turn_and_commits_the_step() {
    let llm = llm();
    llm.push_calls(
        "Greet them.",
        &[("send_message", json!({"message": "Hello!"}))],
    );
    let mut agent = agent(&llm).await;
    let record = agent.step("hi there").await.unwrap();
    assert_eq!(record.replies, ["Hello!"]);
    assert_eq!(record.stop_reason, StopReason::EndTurn);
    assert_eq!(record.llm_calls, 1);
    assert_eq!(
        kinds(&record),
        [
            MessageKind::User,
            MessageKind::Assistant,
            MessageKind::FunctionReturn
        ]
    );
    assert_eq!(record.messages[1].text, "Greet them.");
    assert_eq!(agent.version(), 1);
    assert_eq!(
        agent
            .storage()
            .recall
            .count_messages(agent.id())
            .await
            .unwrap(),
        3
    );
    let stored = agent
        .storage()
        .agents
        .load_agent(agent.id())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        stored.fifo,
        record.messages.iter().map(|m| m.id).collect::<Vec<_>>()
    );
    // The request carried the system prompt, memory, and all eight functions.
    let request = &llm.requests()[0];
    assert_eq!(request.tools.len(), 8);
    assert!(request.messages[0].content.contains("<persona characters="));
    assert!(
        request
            .messages
            .last()
            .unwrap()
            .content
            .contains("hi there")
    );
}

#[tokio::test]
async fn terminal_functions_tolerate_a_heartbeat_flag() {
    let llm = llm();
    llm.push_call(
        "send_message",
        json!({"message": "hi", "request_heartbeat": false}),
    );
    let mut agent = agent(&llm).await;
    let record = agent.step("hello").await.unwrap();
    assert_eq!(record.replies, ["hi"]);
    assert!(record.function_calls[0].ok);
    assert_eq!(record.llm_calls, 1);
}

#[tokio::test]
async fn a_flush_never_evicts_the_result_the_model_must_read() {
    let llm = llm();
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .system_prompt("You are a test agent.")
        .persona("I am T.")
        .functions(["send_message", "archival_memory_search"])
        .context_window(2_400)
        .build()
        .await
        .unwrap();
    for i in 0..3 {
        llm.push_call("send_message", json!({"message": format!("reply {i}")}));
        agent.step(format!("small talk {i}")).await.unwrap();
    }
    for i in 0..5 {
        let text = format!(
            "Vault note {i}: {}",
            "the code is kept in the blue binder. ".repeat(27)
        );
        agent
            .insert_archival(&text, Default::default())
            .await
            .unwrap();
    }
    // The search result (five long hits) pushes the context into the flush zone before the
    // next call, which must still see it.
    llm.push_call(
        "archival_memory_search",
        json!({"query": "vault note", "request_heartbeat": true}),
    );
    llm.push_summary(Ok("Earlier: small talk.".into()));
    llm.push_call(
        "send_message",
        json!({"message": "It is in the blue binder."}),
    );
    let record = agent.step("Where is the vault code kept?").await.unwrap();
    assert_eq!(record.stop_reason, StopReason::EndTurn);
    assert_eq!(record.flushes.len(), 1, "the result caused a flush");
    let requests = llm.agent_requests();
    let second = &requests.last().unwrap().messages;
    let n = second.len();
    assert!(second[n - 1].content.contains("\"type\":\"heartbeat\""));
    assert!(
        second[n - 2].content.contains("Showing results 1-5 of 5"),
        "the function result survived the flush"
    );
    assert!(
        second
            .iter()
            .any(|m| m.content.contains("Where is the vault code kept?")),
        "the event survived"
    );
    assert!(
        !second.iter().any(|m| m.content.contains("small talk 0")),
        "older history was evicted instead"
    );
}

#[tokio::test]
async fn heartbeats_chain_through_archival_pages() {
    let llm = llm();
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .page_size(2)
        .build()
        .await
        .unwrap();
    for i in 0..5 {
        agent
            .insert_archival(
                &format!("fact {i}: the project codename is Bluebird"),
                Default::default(),
            )
            .await
            .unwrap();
    }
    for page in 0..3 {
        llm.push_call(
            "archival_memory_search",
            json!({"query": "codename", "page": page, "request_heartbeat": true}),
        );
    }
    llm.push_call("send_message", json!({"message": "It is Bluebird."}));
    let record = agent.step("what is the codename?").await.unwrap();
    assert_eq!(record.stop_reason, StopReason::EndTurn);
    assert_eq!(record.llm_calls, 4);
    let outputs: Vec<&str> = record
        .function_calls
        .iter()
        .map(|c| c.output.as_str())
        .collect();
    assert!(
        outputs[0].starts_with("Showing results 1-2 of 5 (page 0 of 0-2)"),
        "{}",
        outputs[0]
    );
    assert!(outputs[0].ends_with("call again with page=1."));
    assert!(outputs[2].starts_with("Showing results 5-5 of 5 (page 2 of 0-2)"));
    assert!(!outputs[2].contains("More results"));
    let heartbeats = record
        .messages
        .iter()
        .filter(|m| m.kind == MessageKind::Heartbeat)
        .count();
    assert_eq!(heartbeats, 3);
    // Each follow-up request ends with the heartbeat that caused it.
    for request in &llm.requests()[1..] {
        assert!(
            request
                .messages
                .last()
                .unwrap()
                .content
                .contains("\"type\":\"heartbeat\"")
        );
    }
}

#[tokio::test]
async fn failed_calls_give_control_back_with_a_precise_error() {
    let llm = llm();
    llm.push_call("send_mesage", json!({"message": "typo"}));
    llm.push_raw_calls(
        "",
        vec![("core_memory_append".into(), "{\"label\": \"human\",".into())],
    );
    llm.push_call(
        "core_memory_append",
        json!({"label": "human", "request_heartbeat": false}),
    );
    llm.push_call(
        "core_memory_append",
        json!({"label": "human", "content": 5, "request_heartbeat": false}),
    );
    llm.push_call("send_message", json!({"message": "done", "extra": 1}));
    llm.push_call("send_message", json!({"message": "done"}));
    let mut agent = agent(&llm).await;
    let record = agent.step("hello").await.unwrap();
    assert_eq!(record.stop_reason, StopReason::EndTurn);
    assert_eq!(record.llm_calls, 6);
    let errors: Vec<&str> = record
        .function_calls
        .iter()
        .filter(|c| !c.ok)
        .map(|c| c.output.as_str())
        .collect();
    assert_eq!(errors.len(), 5);
    assert!(
        errors[0].starts_with(
            "unknown function `send_mesage`; the available functions are: send_message,"
        )
    );
    assert!(errors[1].starts_with("the arguments to `core_memory_append` are not valid JSON"));
    assert_eq!(
        errors[2],
        "invalid arguments for `core_memory_append`: missing field `content`"
    );
    assert!(errors[3].starts_with("invalid arguments for `core_memory_append`: `content`: invalid type: integer `5`, expected a string"));
    assert!(errors[4].contains("unknown field `extra`"));
    // The model saw each error in the next request, followed by a failure heartbeat.
    let second = &llm.requests()[1];
    let n = second.messages.len();
    assert!(
        second.messages[n - 2]
            .content
            .contains("\"status\":\"Failed\"")
    );
    assert!(
        second.messages[n - 1]
            .content
            .contains("A function call failed")
    );
    assert_eq!(
        agent.memory().get("human").unwrap().value(),
        "",
        "no failed call changed memory"
    );
}

#[tokio::test]
async fn oversize_arguments_are_refused_before_parsing_with_a_way_out() {
    let llm = llm();
    let limit = AgentConfig::default().max_function_argument_bytes;
    let huge = "x".repeat(limit + 1);
    llm.push_call(
        "archival_memory_insert",
        json!({"content": huge, "request_heartbeat": true}),
    );
    let fits = "y".repeat(limit - 100);
    llm.push_call(
        "archival_memory_insert",
        json!({"content": fits, "request_heartbeat": true}),
    );
    llm.push_call("send_message", json!({"message": "stored"}));
    let mut agent = agent(&llm).await;
    let record = agent.step("store this").await.unwrap();
    assert_eq!(record.stop_reason, StopReason::EndTurn);
    let refused = &record.function_calls[0];
    assert!(!refused.ok);
    assert!(
        refused
            .output
            .contains("over the limit of 1048576 bytes per call")
            && refused.output.contains("split the content"),
        "{}",
        refused.output
    );
    // Nothing of the refused call was stored; the one within the limit was.
    assert!(
        record.function_calls[1].ok,
        "{}",
        record.function_calls[1].output
    );
    let archival = &agent.storage().archival;
    let stored = archival.count_passages(agent.id()).await.unwrap();
    assert!(stored > 0);
    let page = archival
        .list_passages(agent.id(), Page::first(stored as usize))
        .await
        .unwrap();
    assert_eq!(page.hits.len() as u64, stored);
    assert!(
        page.hits.iter().all(|h| !h.item.text.contains('x')),
        "no passage of the refused call"
    );
}

#[tokio::test]
async fn tool_errors_are_reported_and_memory_limits_say_how_far_over() {
    let llm = llm();
    llm.push_call(
        "core_memory_append",
        json!({"label": "human", "content": "x".repeat(30), "request_heartbeat": false}),
    );
    llm.push_call("core_memory_replace", json!({"label": "human", "old_content": "nope", "new_content": "y", "request_heartbeat": false}));
    llm.push_call("send_message", json!({"message": "ok"}));
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .block_limit(20)
        .persona("I am T.")
        .human("Name: Chad")
        .build()
        .await
        .unwrap();
    let record = agent.step("remember this").await.unwrap();
    assert_eq!(
        record.function_calls[0].output,
        "edit rejected: block `human` would hold 41 characters but its limit is 20 (21 over); shorten the text, \
         replace older content, or move details to archival memory"
    );
    assert!(
        record.function_calls[1]
            .output
            .contains("was not found in block `human`")
    );
    assert_eq!(record.stop_reason, StopReason::EndTurn);
}

#[tokio::test]
async fn memory_edits_show_in_the_next_prompt_and_persist() {
    let llm = llm();
    llm.push_call(
        "core_memory_append",
        json!({"label": "human", "content": "Name: Chad", "request_heartbeat": true}),
    );
    llm.push_call("core_memory_replace", json!({"label": "persona", "old_content": "Sam", "new_content": "Samantha", "request_heartbeat": true}));
    llm.push_call("send_message", json!({"message": "Nice to meet you, Chad"}));
    let mut agent = agent(&llm).await;
    agent.step("I'm Chad").await.unwrap();
    assert!(llm.requests()[1].messages[0].content.contains("Name: Chad"));
    assert!(
        llm.requests()[2].messages[0]
            .content
            .contains("I am Samantha")
    );
    let stored = agent
        .storage()
        .agents
        .load_agent(agent.id())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.memory.get("human").unwrap().value(), "Name: Chad");
}

#[tokio::test]
async fn the_chain_is_bounded() {
    let llm = llm();
    for _ in 0..20 {
        llm.push_call(
            "conversation_search",
            json!({"query": "x", "request_heartbeat": true}),
        );
    }
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .max_chain_length(4)
        .build()
        .await
        .unwrap();
    let record = agent.step("loop forever").await.unwrap();
    assert_eq!(record.stop_reason, StopReason::ChainLimit { limit: 4 });
    assert_eq!(record.llm_calls, 4);
    assert_eq!(
        record.messages.last().unwrap().kind,
        MessageKind::FunctionReturn,
        "no dangling heartbeat"
    );
}

#[tokio::test]
async fn text_without_a_call_is_inner_monologue() {
    let llm = llm();
    llm.push_text("I should think about this.");
    let mut agent = agent(&llm).await;
    let record = agent.step("hm").await.unwrap();
    assert_eq!(record.stop_reason, StopReason::NoFunctionCall);
    assert!(record.replies.is_empty());
    assert_eq!(record.messages[1].kind, MessageKind::Assistant);
    assert_eq!(record.messages[1].text, "I should think about this.");
}

#[tokio::test]
async fn provider_errors_end_the_step_but_keep_the_message() {
    let llm = llm();
    llm.push_error(LlmError::Transient {
        status: Some(503),
        message: "overloaded".into(),
        retry_after: None,
    });
    let mut agent = agent(&llm).await;
    let record = agent.step("are you there?").await.unwrap();
    assert!(matches!(
        record.stop_reason,
        StopReason::ProviderError {
            retryable: true,
            ..
        }
    ));
    assert_eq!(
        agent
            .storage()
            .recall
            .count_messages(agent.id())
            .await
            .unwrap(),
        1
    );
    assert_eq!(agent.context().queue().len(), 1);
}
