//! A call that waits for a person's approval, over HTTP.

use super::*;

#[memgpt_test_harness::test]
async fn a_call_waits_for_approval_over_http() {
    let s = start().await;
    let key = s.tenant("acme").await;
    let (status, agent) = s
        .post(
            "/v1/agents",
            &key,
            json!({"name": "careful", "tool_rules": [
                {"type": "requires_approval", "tool": "archival_memory_insert"}
            ]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{agent}");
    assert_eq!(agent["tool_rules"][0]["type"], "requires_approval");
    let messages = format!("/v1/agents/{}/messages", agent["id"].as_str().unwrap());
    s.llm.push_call(
        "archival_memory_insert",
        json!({"content": "Ann keeps bees.", "request_heartbeat": true}),
    );
    let (status, paused) = s
        .post(&messages, &key, json!({"text": "I keep bees."}))
        .await;
    assert_eq!(status, StatusCode::OK, "{paused}");
    assert_eq!(paused["stop_reason"], "awaiting_approval");
    let pending = &paused["pending_approval"];
    assert_eq!(pending["function"], "archival_memory_insert");
    let call_id = pending["call_id"].as_str().unwrap().to_owned();
    assert_eq!(paused["stop_detail"], call_id.as_str());

    // Other messages wait; a malformed or unknown approval is refused.
    let (status, body) = s.post(&messages, &key, json!({"text": "hello?"})).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::CONFLICT, "approval_pending"),
        "{body}"
    );
    let (status, body) = s
        .post(
            &messages,
            &key,
            json!({"type": "approval", "call_id": call_id}),
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::BAD_REQUEST, "invalid_input"),
        "{body}"
    );
    let (status, body) = s
        .post(
            &messages,
            &key,
            json!({"type": "approval", "call_id": "nope", "approve": true}),
        )
        .await;
    // The agent is there; the call it names is not the one it waits on.
    assert_eq!(
        (status, code(&body)),
        (StatusCode::CONFLICT, "conflict"),
        "{body}"
    );
    let (status, body) = s
        .post(&messages, &key, json!({"text": "hi", "approve": true}))
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::BAD_REQUEST, "invalid_input"),
        "{body}"
    );

    // Denied through the stream: the model reads why and answers.
    s.llm
        .push_call("send_message", json!({"message": "All right, I won't."}));
    let response = s
        .http
        .post(format!("{}{messages}/stream", s.base))
        .bearer_auth(&key)
        .json(&json!({"type": "approval", "call_id": call_id, "approve": false, "text": "not now"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let events = sse(&response.text().await.unwrap());
    let (_, first) = events.iter().find(|(e, _)| e == "message").unwrap();
    assert_eq!(first["kind"], "function_error");
    assert!(
        first["text"]
            .as_str()
            .unwrap()
            .contains("the user denied this call of `archival_memory_insert`: not now"),
        "{first}"
    );
    let (name, record) = events.last().unwrap();
    assert_eq!(name, "step");
    assert_eq!(record["event"], "approval");
    assert_eq!(record["stop_reason"], "end_turn");
    assert_eq!(record["replies"], json!(["All right, I won't."]));
    let (status, _) = s
        .post(&messages, &key, json!({"text": "hello again"}))
        .await;
    assert_ne!(
        status,
        StatusCode::CONFLICT,
        "the agent takes messages again"
    );
}
