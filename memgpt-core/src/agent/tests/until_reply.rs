//! The until-reply loop style.

use super::*;

async fn until_reply_agent(llm: &Arc<ScriptedProvider>) -> Agent {
    Agent::builder()
        .provider(llm.clone())
        .loop_style(crate::LoopStyle::UntilReply)
        .build()
        .await
        .unwrap()
}

#[tokio::test]
async fn the_until_reply_loop_goes_on_until_send_message_without_heartbeats() {
    let llm = llm();
    llm.push_calls(
        "Save it.",
        &[(
            "core_memory_append",
            json!({"label": "human", "content": "Likes tea."}),
        )],
    );
    llm.push_calls(
        "Check.",
        &[("conversation_search", json!({"query": "tea"}))],
    );
    // A model trained on the paper's loop may still send the flag: it is accepted and ignored.
    llm.push_calls(
        "Answer.",
        &[(
            "send_message",
            json!({"message": "Noted!", "request_heartbeat": true}),
        )],
    );
    let mut agent = until_reply_agent(&llm).await;
    assert_eq!(agent.config().loop_style, crate::LoopStyle::UntilReply);
    let record = agent.step("I like tea").await.unwrap();
    assert_eq!(record.stop_reason, StopReason::EndTurn);
    assert_eq!(
        (record.llm_calls, record.replies.clone()),
        (3, vec!["Noted!".to_owned()])
    );
    assert!(
        record.function_calls.iter().all(|c| c.ok),
        "{:?}",
        record.function_calls
    );
    assert_eq!(
        kinds(&record),
        [
            MessageKind::User,
            MessageKind::Assistant,
            MessageKind::FunctionReturn,
            MessageKind::Assistant,
            MessageKind::FunctionReturn,
            MessageKind::Assistant,
            MessageKind::FunctionReturn,
        ],
        "no heartbeat messages between the calls"
    );
    assert!(
        agent
            .memory()
            .get("human")
            .unwrap()
            .value()
            .contains("Likes tea.")
    );
    // Not one schema offers the flag, and the instructions do not mention it.
    for request in llm.agent_requests() {
        for tool in request.tools.iter() {
            let text = tool.parameters.to_string();
            assert!(!text.contains("request_heartbeat"), "{}: {text}", tool.name);
        }
        assert!(!request.messages[0].content.contains("request_heartbeat"));
    }
}

#[tokio::test]
async fn the_until_reply_loop_keeps_the_chain_bound_and_the_failure_path() {
    let llm = llm();
    llm.push_calls(
        "Oops.",
        &[(
            "core_memory_append",
            json!({"label": "nope", "content": "x"}),
        )],
    );
    for _ in 0..20 {
        llm.push_calls(
            "Again.",
            &[("conversation_search", json!({"query": "tea"}))],
        );
    }
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .loop_style(crate::LoopStyle::UntilReply)
        .max_chain_length(4)
        .build()
        .await
        .unwrap();
    let record = agent.step("hi").await.unwrap();
    assert_eq!(record.stop_reason, StopReason::ChainLimit { limit: 4 });
    assert_eq!(record.llm_calls, 4);
    assert!(!record.function_calls[0].ok);
    assert!(
        record.function_calls[0].output.contains("nope"),
        "{}",
        record.function_calls[0].output
    );
    assert!(!kinds(&record).contains(&MessageKind::Heartbeat));
    assert_eq!(agent.version(), 1, "the step committed whole");
}

#[tokio::test]
async fn the_until_reply_loop_obeys_tool_rules() {
    use crate::rules::ToolRule;
    let llm = llm();
    // A terminal rule on a non-terminal function ends the step...
    llm.push_calls(
        "Save.",
        &[("archival_memory_insert", json!({"content": "tea"}))],
    );
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .loop_style(crate::LoopStyle::UntilReply)
        .tool_rule(ToolRule::Terminal {
            tool: "archival_memory_insert".into(),
        })
        .tool_rule(ToolRule::RequiredBeforeExit {
            tool: "conversation_search".into(),
        })
        .build()
        .await
        .unwrap();
    let record = agent.step("hi").await.unwrap();
    assert_eq!(
        (record.stop_reason.clone(), record.llm_calls),
        (StopReason::EndTurn, 1)
    );
    // ...and a reply before a required function does not.
    llm.push_calls("Reply.", &[("send_message", json!({"message": "hello"}))]);
    llm.push_calls(
        "Search.",
        &[("conversation_search", json!({"query": "tea"}))],
    );
    llm.push_calls(
        "Reply.",
        &[("send_message", json!({"message": "hello again"}))],
    );
    let record = agent.step("hi").await.unwrap();
    assert_eq!(
        (record.stop_reason.clone(), record.llm_calls),
        (StopReason::EndTurn, 3)
    );
    let heartbeats: Vec<&str> = record
        .messages
        .iter()
        .filter(|m| m.kind == MessageKind::Heartbeat)
        .map(|m| m.text.as_str())
        .collect();
    assert_eq!(heartbeats.len(), 1, "{heartbeats:?}");
    assert!(
        heartbeats[0].contains("call `conversation_search` first"),
        "{}",
        heartbeats[0]
    );
}

#[tokio::test]
async fn switching_loop_style_switches_default_instructions_and_schemas_only() {
    let (llm, storage) = (llm(), crate::store::Storage::in_memory());
    let agent = Agent::builder()
        .provider(llm.clone())
        .storage(storage.clone())
        .build()
        .await
        .unwrap();
    let heartbeat = agent.stats();
    let changed = Agent::builder()
        .provider(llm.clone())
        .storage(storage.clone())
        .loop_style(crate::LoopStyle::UntilReply)
        .reconfigure(agent.id())
        .await
        .unwrap();
    let until_reply = changed.stats();
    assert!(
        !changed.request().messages[0]
            .content
            .contains("request_heartbeat")
    );
    assert!(
        agent.request().messages[0]
            .content
            .contains("request_heartbeat")
    );
    assert!(until_reply.tools_tokens < heartbeat.tools_tokens);
    // The prompt tokens each style pays on every call (default functions and instructions).
    println!(
        "loop style prompt tokens: heartbeat system {} + functions {} = {}; until_reply system {} + functions {} = {}",
        heartbeat.system_tokens,
        heartbeat.tools_tokens,
        heartbeat.system_tokens + heartbeat.tools_tokens,
        until_reply.system_tokens,
        until_reply.tools_tokens,
        until_reply.system_tokens + until_reply.tools_tokens,
    );
    // Custom instructions are the user's: they stay.
    let custom = Agent::builder()
        .provider(llm.clone())
        .storage(storage.clone())
        .system_prompt("Be brief.")
        .build()
        .await
        .unwrap();
    let custom = Agent::builder()
        .provider(llm)
        .storage(storage)
        .loop_style(crate::LoopStyle::UntilReply)
        .reconfigure(custom.id())
        .await
        .unwrap();
    assert!(
        custom.request().messages[0]
            .content
            .starts_with("Be brief.\n\n### Memory")
    );
}
