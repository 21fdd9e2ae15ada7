//! Consolidation companions on the server: made for an agent or imported with it from a Letta
//! sleep-time file, run by the timers after the agent's steps (which never wait for them), and
//! recorded like any step.

use super::*;

#[memgpt_test_harness::test]
async fn a_companion_consolidates_in_the_background_and_the_agent_answers_from_it() {
    let s = start().await;
    let key = s.tenant("acme").await;
    let evie = s.agent(&key, "evie").await;
    let (status, companion) = s
        .post(
            &format!("/v1/agents/{evie}/companion"),
            &key,
            json!({"every_steps": 1}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{companion}");
    assert_eq!(companion["name"], "evie-companion");
    let companion = companion["id"].as_str().unwrap().to_owned();
    let (_, memory) = s.get(&format!("/v1/agents/{evie}/memory"), &key).await;
    assert!(
        memory["blocks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|b| b["block_id"].is_string()),
        "{memory}"
    );
    let (status, again) = s
        .post(&format!("/v1/agents/{evie}/companion"), &key, json!({}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{again}");
    assert!(
        again["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already has")
    );

    // Evie's reply, then the companion's run: queued in the order they are asked for.
    s.llm
        .push_call("send_message", json!({"message": "How nice!"}));
    s.llm.push_call(
        "core_memory_append",
        json!({"label": "human", "content": "Sister: Ada, lives in Lisbon.", "request_heartbeat": true}),
    );
    s.llm.push_call("memory_finish_edits", json!({}));
    let (status, step) = s
        .post(
            &format!("/v1/agents/{evie}/messages"),
            &key,
            json!({"text": "My sister Ada moved to Lisbon."}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{step}");
    assert_eq!(step["replies"], json!(["How nice!"]));
    eventually("the companion to write the fact", async || {
        let (_, human) = s
            .get(&format!("/v1/agents/{evie}/memory/human"), &key)
            .await;
        human["value"]
            .as_str()
            .is_some_and(|v| v.contains("Sister: Ada"))
    })
    .await;
    // The companion's run is a recorded step: the transcript, its calls.
    let (_, page) = s
        .get(&format!("/v1/agents/{companion}/messages?size=100"), &key)
        .await;
    let text = page.to_string();
    assert!(text.contains("My sister Ada moved to Lisbon."), "{page}");
    assert!(text.contains("memory_finish_edits"), "{page}");

    s.llm
        .push_call("send_message", json!({"message": "In Lisbon."}));
    let (_, step) = s
        .post(
            &format!("/v1/agents/{evie}/messages"),
            &key,
            json!({"text": "Where does my sister live?"}),
        )
        .await;
    assert_eq!(step["shared_blocks_changed"], json!(["human"]), "{step}");
    let prompt = s.llm.agent_requests().last().unwrap().messages[0]
        .content
        .clone();
    assert!(prompt.contains("Sister: Ada, lives in Lisbon."), "{prompt}");
}

/// Letta's sleep-time pair (Evie and her companion, frequency 5) runs as it did in Letta: after
/// five messages to Evie her companion edits the blocks they share.
#[memgpt_test_harness::test]
async fn a_letta_sleep_time_pair_imports_and_runs() {
    let file = evie();
    let llm = Arc::new(ScriptedProvider::new());
    let server = Server::with_parts(
        Storage::in_memory(),
        ServerTables::in_memory(),
        llm.clone(),
        None,
        ServerConfig {
            max_body_bytes: 8 * 1024 * 1024,
            ..config()
        },
    );
    let s = start_with(server, llm).await;
    let key = s.tenant("acme").await;
    let (status, imported) = s.post("/v1/agents/import", &key, file).await;
    assert_eq!(status, StatusCode::CREATED, "{imported}");
    let evie = imported["agent"]["id"].as_str().unwrap().to_owned();
    let companion = imported["related"][0]["id"].as_str().unwrap().to_owned();
    let before = kinds(&s, &key, &companion).await.len();

    for i in 0..4 {
        s.llm
            .push_call("send_message", json!({"message": format!("reply {i}")}));
        let (status, step) = s
            .post(
                &format!("/v1/agents/{evie}/messages"),
                &key,
                json!({"text": format!("message {i}")}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{step}");
    }
    // Four messages: the companion waits for the fifth.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(kinds(&s, &key, &companion).await.len(), before);
    s.llm
        .push_call("send_message", json!({"message": "reply 4"}));
    s.llm.push_call(
        "memory_insert",
        json!({"label": "social_scores", "new_str": "Ada: 5", "request_heartbeat": true}),
    );
    s.llm.push_call("memory_finish_edits", json!({}));
    let (status, _) = s
        .post(
            &format!("/v1/agents/{evie}/messages"),
            &key,
            json!({"text": "Ada was very kind today."}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    eventually("the companion to run", async || {
        let (_, block) = s
            .get(&format!("/v1/agents/{evie}/memory/social_scores"), &key)
            .await;
        block["value"]
            .as_str()
            .is_some_and(|v| v.ends_with("Ada: 5"))
    })
    .await;
    let (_, page) = s
        .get(&format!("/v1/agents/{companion}/messages?size=1000"), &key)
        .await;
    let transcript = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["text"].as_str())
        .find(|t| t.contains("[automated, consolidation]"))
        .unwrap_or_default()
        .to_owned();
    assert!(transcript.contains("(10 messages)"), "{transcript}");
    assert!(
        transcript.contains("Ada was very kind today."),
        "{transcript}"
    );
}
