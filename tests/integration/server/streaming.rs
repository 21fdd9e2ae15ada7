//! The SSE stream: messages in order, memory pressure, flushes, then the record.

use super::*;

/// A small window: the stream shows the memory-pressure warning and the flush as they happen.
#[memgpt_test_harness::test]
async fn the_stream_shows_memory_pressure_and_flushes() {
    let s = start().await;
    let key = s.tenant("acme").await;
    let (status, agent) = s
        .post(
            "/v1/agents",
            &key,
            json!({"name": "tiny", "context_window": 4000, "block_limit": 500}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{agent}");
    let id = agent["id"].as_str().unwrap().to_owned();
    let mut seen = Vec::new();
    for i in 0..12 {
        s.llm
            .push_call("send_message", json!({"message": format!("Noted {i}.")}));
        s.llm
            .push_summary(Ok(format!("Summary after message {i}.")));
        let body = s
            .http
            .post(format!("{}/v1/agents/{id}/messages/stream", s.base))
            .bearer_auth(&key)
            .json(&json!({"text": format!("Fact {i}: {}", "the quick brown fox jumps over the lazy dog ".repeat(12))}))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        for (event, data) in sse(&body) {
            seen.push((event, data["kind"].as_str().unwrap_or_default().to_owned()));
        }
        if seen.iter().any(|(e, _)| e == "flush") {
            break;
        }
    }
    assert!(
        seen.iter()
            .any(|(e, k)| e == "message" && k == "system_alert"),
        "{seen:?}"
    );
    assert!(seen.iter().any(|(e, _)| e == "flush"), "{seen:?}");
    assert_eq!(seen.last().map(|(e, _)| e.as_str()), Some("step"));

    // The context view after the flush: the summary, the policy's lines (MemGPT's 70% and
    // 100% of the window), and what the policy knows of each queued message.
    let (status, context) = s.get(&format!("/v1/agents/{id}/context"), &key).await;
    assert_eq!(status, StatusCode::OK, "{context}");
    assert!(
        context["summary"]["text"]
            .as_str()
            .unwrap()
            .starts_with("Summary after message"),
        "{context}"
    );
    assert!(context["summary"]["evicted_messages"].as_u64().unwrap() > 0);
    let window = context["tokens"]["window"].as_f64().unwrap();
    let paging = &context["paging"];
    assert_eq!(paging["policy"], "paper");
    assert!(
        (paging["warn_tokens"].as_f64().unwrap() - 0.7 * window).abs() <= 1.0,
        "{paging}"
    );
    assert_eq!(paging["flush_tokens"].as_f64().unwrap(), window);
    let messages = context["messages"].as_array().unwrap();
    assert!(messages[0].get("queued").is_none(), "the system message");
    assert_eq!(messages[0]["section"], "system");
    assert_eq!(messages[1]["section"], "summary");
    assert!(
        messages[1]["content"]
            .as_str()
            .unwrap()
            .contains("Summary after message")
    );
    let queued: Vec<&Value> = messages[2..].iter().map(|m| &m["queued"]).collect();
    assert!(messages[2..].iter().all(|m| m["section"] == "queue"));
    assert_eq!(
        queued.len() as u64,
        context["tokens"]["queue_messages"].as_u64().unwrap()
    );
    for q in &queued {
        assert!(
            q["id"].is_string()
                && q["uses"].is_u64()
                && q["signals"] == json!({})
                && q["evict_next"].is_boolean(),
            "{q}"
        );
    }
    // A flush now would take the oldest messages first (the paper's policy) and never the
    // newest turn.
    let evict: Vec<bool> = queued.iter().map(|q| q["evict_next"] == true).collect();
    assert_eq!(
        evict.iter().filter(|e| **e).count() as u64,
        paging["evict_messages"].as_u64().unwrap()
    );
    if let Some(first_kept) = evict.iter().position(|e| !e) {
        assert!(evict[first_kept..].iter().all(|e| !e), "{evict:?}");
    }
    // The summary's history holds every flush (fewer than its limit here), and listing the
    // messages of a flush's range gives exactly what it evicted.
    let history = context["summary"]["history"].as_array().unwrap();
    assert!(!history.is_empty());
    let evicted: u64 = history
        .iter()
        .map(|r| r["evicted_messages"].as_u64().unwrap())
        .sum();
    assert_eq!(
        evicted,
        context["summary"]["evicted_messages"].as_u64().unwrap()
    );
    for revision in history {
        // Timestamps hold `:` and may hold `+`: the URL encodes them.
        let mut url = reqwest::Url::parse(&format!("{}/v1/agents/{id}/messages", s.base)).unwrap();
        url.query_pairs_mut()
            .append_pair("size", "1000")
            .append_pair("start", revision["evicted_from"].as_str().unwrap())
            .append_pair("end", revision["evicted_until"].as_str().unwrap());
        let path = &url.as_str()[s.base.len()..];
        let (status, listed) = s.get(path, &key).await;
        assert_eq!(status, StatusCode::OK, "{listed}");
        assert_eq!(listed["total"], revision["evicted_messages"], "{revision}");
    }
    assert!(!evict.last().unwrap());
}

#[memgpt_test_harness::test]
async fn a_streamed_step_reports_each_message_in_order_then_the_record() {
    let s = start().await;
    let key = s.tenant("acme").await;
    let id = s.agent(&key, "streamer").await;
    s.llm.push_calls(
        "Looking it up.",
        &[(
            "conversation_search",
            json!({"query": "tea", "request_heartbeat": true}),
        )],
    );
    s.llm
        .push_call("send_message", json!({"message": "Nothing about tea yet."}));
    let response = s
        .http
        .post(format!("{}/v1/agents/{id}/messages/stream", s.base))
        .bearer_auth(&key)
        .json(&json!({"text": "What did I say about tea?"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let events = sse(&response.text().await.unwrap());
    let names: Vec<&str> = events.iter().map(|(e, _)| e.as_str()).collect();
    let kinds: Vec<&str> = events
        .iter()
        .filter(|(e, _)| e == "message")
        .map(|(_, m)| m["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "user",
            "assistant",
            "function_return",
            "heartbeat",
            "assistant",
            "function_return"
        ],
        "{names:?}"
    );
    assert_eq!(names.last(), Some(&"step"));
    let (_, record) = events.last().unwrap();
    assert_eq!(record["replies"], json!(["Nothing about tea yet."]));
    // The reply's text came as it was written, before the message holding it.
    let reply: String = events
        .iter()
        .filter(|(e, _)| e == "reply_delta")
        .map(|(_, d)| d["text"].as_str().unwrap())
        .collect();
    assert_eq!(reply, "Nothing about tea yet.");
    let first_delta = names.iter().position(|n| *n == "reply_delta").unwrap();
    let last_assistant = events
        .iter()
        .rposition(|(e, m)| e == "message" && m["kind"] == "assistant")
        .unwrap();
    assert!(first_delta < last_assistant, "{names:?}");
    // The record's messages are the streamed ones, in the same order.
    let streamed: Vec<&Value> = events
        .iter()
        .filter(|(e, _)| e == "message")
        .map(|(_, m)| &m["id"])
        .collect();
    let recorded: Vec<&Value> = record["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| &m["id"])
        .collect();
    assert_eq!(streamed, recorded);

    // A failing model ends the stream with the step's outcome, and nothing half-written.
    s.llm.push_error(memgpt::llm::LlmError::Permanent {
        message: "model exploded".into(),
        status: Some(500),
    });
    let body = s
        .http
        .post(format!("{}/v1/agents/{id}/messages/stream", s.base))
        .bearer_auth(&key)
        .json(&json!({"text": "again"}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let events = sse(&body);
    let (last, data) = events.last().unwrap();
    assert!(
        (last == "step" && data["stop_reason"] == "provider_error") || last == "error",
        "{events:?}"
    );
}
