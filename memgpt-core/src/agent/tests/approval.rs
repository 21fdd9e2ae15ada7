//! Calls that wait for a person's approval.

use super::*;

async fn archived(agent: &Agent) -> u64 {
    agent
        .storage()
        .archival
        .count_passages(agent.id())
        .await
        .unwrap()
}

fn awaiting(record: &StepRecord) -> (String, String) {
    match &record.stop_reason {
        StopReason::AwaitingApproval {
            call_id, function, ..
        } => (call_id.clone(), function.clone()),
        other => panic!("not awaiting approval: {other:?}"),
    }
}

async fn approval_agent(llm: &Arc<ScriptedProvider>, storage: &crate::store::Storage) -> Agent {
    Agent::builder()
        .provider(llm.clone())
        .storage(storage.clone())
        .tool_rule(crate::rules::ToolRule::RequiresApproval {
            tool: "archival_memory_insert".into(),
        })
        .build()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_call_that_needs_approval_pauses_the_step_until_it_is_approved() {
    let (llm, storage) = (llm(), crate::store::Storage::in_memory());
    let mut agent = approval_agent(&llm, &storage).await;
    llm.push_calls(
        "Save it, and say so.",
        &[
            (
                "archival_memory_insert",
                json!({"content": "Ann keeps bees.", "request_heartbeat": true}),
            ),
            ("send_message", json!({"message": "too early"})),
        ],
    );
    let record = agent.step("Remember: I keep bees.").await.unwrap();
    let (call_id, function) = awaiting(&record);
    assert_eq!(function, "archival_memory_insert");
    assert_eq!(record.llm_calls, 1);
    // The rest of that response did not run, and the call has no result yet.
    assert!(record.replies.is_empty());
    assert_eq!(
        record.function_calls.len(),
        1,
        "{:?}",
        record.function_calls
    );
    assert!(
        record.function_calls[0]
            .output
            .contains("paused for approval of `archival_memory_insert`")
    );
    assert_eq!(archived(&agent).await, 0, "nothing inserted yet");
    let version = agent.version();

    // The pause survives a reload; other events wait (timers are skipped), nothing is stored.
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .storage(storage.clone())
        .load(agent.id())
        .await
        .unwrap();
    assert_eq!(
        agent.pending_approval().map(|p| p.call.id.as_str()),
        Some(call_id.as_str())
    );
    let err = agent.step("hello?").await.unwrap_err();
    assert!(matches!(err, Error::ApprovalPending { .. }), "{err}");
    assert_eq!(err.kind(), crate::ErrorKind::Conflict);
    let skipped = agent.step(Event::timer("daily check")).await.unwrap();
    assert!(matches!(
        skipped.stop_reason,
        StopReason::AwaitingApproval { .. }
    ));
    let err = agent
        .step(Event::approve("call-that-is-not-waiting"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NoPendingApproval { .. }), "{err}");
    assert_eq!(agent.version(), version);
    assert_eq!(llm.agent_requests().len(), 1, "no LLM call while waiting");

    // Approved: the call runs, its heartbeat is honoured, the step goes on to the reply.
    llm.push_call("send_message", json!({"message": "Saved: you keep bees."}));
    let record = agent.step(Event::approve(call_id.clone())).await.unwrap();
    assert_eq!(record.stop_reason, StopReason::EndTurn);
    assert_eq!(record.replies, ["Saved: you keep bees."]);
    assert_eq!(record.event, "approval");
    assert_eq!(
        kinds(&record),
        [
            MessageKind::FunctionReturn,
            MessageKind::Heartbeat,
            MessageKind::Assistant,
            MessageKind::FunctionReturn
        ]
    );
    assert_eq!(
        record.messages[0].tool_call_id.as_deref(),
        Some(call_id.as_str())
    );
    assert_eq!(archived(&agent).await, 1);
    assert!(agent.pending_approval().is_none());
    // The model read the call's result right after the call, in order.
    let request = llm.agent_requests().pop().unwrap();
    let n = request.messages.len();
    assert_eq!(
        request.messages[n - 2].tool_call_id.as_deref(),
        Some(call_id.as_str())
    );
    let stored = storage
        .agents
        .load_agent(agent.id())
        .await
        .unwrap()
        .unwrap();
    assert!(stored.pending_approval.is_none());
    // Approving twice is refused.
    assert!(matches!(
        agent.step(Event::approve(call_id)).await.unwrap_err(),
        Error::NoPendingApproval { .. }
    ));
}

#[tokio::test]
async fn a_denied_call_reaches_the_model_as_its_result() {
    let (llm, storage) = (llm(), crate::store::Storage::in_memory());
    let mut agent = approval_agent(&llm, &storage).await;
    llm.push_call(
        "archival_memory_insert",
        json!({"content": "the door code is 1234", "request_heartbeat": false}),
    );
    let record = agent.step("The door code is 1234.").await.unwrap();
    let (call_id, _) = awaiting(&record);
    llm.push_call(
        "send_message",
        json!({"message": "Understood, I won't store it."}),
    );
    let record = agent
        .step(Event::deny(call_id, "no secrets in long-term memory"))
        .await
        .unwrap();
    assert_eq!(record.stop_reason, StopReason::EndTurn);
    let denial = &record.function_calls[0];
    assert!(!denial.ok);
    assert_eq!(
        denial.output,
        "the user denied this call of `archival_memory_insert`: no secrets in long-term memory"
    );
    // A denial gives the model control back even though the call asked for no heartbeat.
    assert_eq!(record.llm_calls, 1);
    assert_eq!(record.replies, ["Understood, I won't store it."]);
    assert_eq!(archived(&agent).await, 0);
}
