//! One agent through every route, and the context view a policy's signals show in.

use super::*;

#[memgpt_test_harness::test]
async fn an_agent_lives_through_every_route() {
    let s = start().await;
    let key = s.tenant("acme").await;
    let (status, created) = s
        .post(
            "/v1/agents",
            &key,
            json!({
                "name": "ada",
                "persona": "I am Ada.",
                "human": "The user.",
                "policy": "lru",
                "blocks": [{"label": "notes", "value": "", "limit": 100}]
            }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["policy"], "lru");
    let id = created["id"].as_str().unwrap().to_owned();
    let agent = format!("/v1/agents/{id}");

    // A step, as JSON.
    s.llm.push_calls(
        "Remember the cat.",
        &[
            ("core_memory_append", json!({"label": "human", "content": "Has a cat called Miso.", "request_heartbeat": true})),
        ],
    );
    s.llm
        .push_call("send_message", json!({"message": "Noted: Miso."}));
    let (status, step) = s
        .post(
            &format!("{agent}/messages"),
            &key,
            json!({"text": "My cat is called Miso."}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{step}");
    assert_eq!(step["replies"], json!(["Noted: Miso."]));
    assert_eq!(step["stop_reason"], "end_turn");
    assert_eq!(step["messages"][0]["kind"], "user");
    assert_eq!(step["function_calls"][0]["name"], "core_memory_append");

    // Listing the conversation.
    let (status, page) = s.get(&format!("{agent}/messages?size=2"), &key).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["items"].as_array().unwrap().len(), 2);
    assert_eq!(page["total"], 6, "{page}");
    assert_eq!(page["items"][0]["text"], "My cat is called Miso.");

    // Memory: what the LLM wrote, then edits with the LLM's limits.
    let (_, human) = s.get(&format!("{agent}/memory/human"), &key).await;
    assert!(human["value"].as_str().unwrap().contains("Miso"), "{human}");
    let (status, body) = s
        .call(
            Method::PUT,
            &format!("{agent}/memory/notes"),
            &key,
            Some(json!({"value": "x".repeat(101)})),
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNPROCESSABLE_ENTITY, "block_over_limit"),
        "{body}"
    );
    let (_, notes) = s.get(&format!("{agent}/memory/notes"), &key).await;
    assert_eq!(notes["value"], "", "a rejected edit changes nothing");
    let (status, notes) = s
        .post(
            &format!("{agent}/memory/notes/append"),
            &key,
            json!({"text": "likes tea"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{notes}");
    assert_eq!(notes["value"], "likes tea");
    assert_eq!(notes["limit"], 100);
    let (status, body) = s.get(&format!("{agent}/memory/nope"), &key).await;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, "not_found"));
    let (_, blocks) = s.get(&format!("{agent}/memory"), &key).await;
    let labels: Vec<&str> = blocks["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["persona", "human", "notes"]);

    // Archival: insert, list, search, delete.
    let (status, inserted) = s
        .post(
            &format!("{agent}/archival"),
            &key,
            json!({"text": "The launch code is 4242.", "tags": ["secrets"]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{inserted}");
    let passage = inserted["ids"][0].as_str().unwrap().to_owned();
    s.post(
        &format!("{agent}/archival"),
        &key,
        json!({"text": "Bananas are yellow."}),
    )
    .await;
    let (_, listed) = s.get(&format!("{agent}/archival"), &key).await;
    assert_eq!(listed["total"], 2, "{listed}");
    assert_eq!(listed["items"][0]["tags"], json!(["secrets"]));
    let (status, found) = s
        .post(
            &format!("{agent}/archival/search"),
            &key,
            json!({"query": "launch code"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{found}");
    assert_eq!(found["items"][0]["text"], "The launch code is 4242.");
    let (_, tagged) = s
        .post(
            &format!("{agent}/archival/search"),
            &key,
            json!({"query": "yellow", "tags": ["secrets"]}),
        )
        .await;
    assert!(
        tagged["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["tags"] == json!(["secrets"])),
        "{tagged}"
    );
    let (status, _) = s
        .call(
            Method::DELETE,
            &format!("{agent}/archival/{passage}"),
            &key,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = s
        .call(
            Method::DELETE,
            &format!("{agent}/archival/{passage}"),
            &key,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, listed) = s.get(&format!("{agent}/archival"), &key).await;
    assert_eq!(listed["total"], 1);

    // Recall search.
    let (status, recalled) = s
        .post(
            &format!("{agent}/recall/search"),
            &key,
            json!({"query": "Miso"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{recalled}");
    assert!(recalled["total"].as_u64().unwrap() >= 1, "{recalled}");
    assert_eq!(recalled["semantic"], false);

    // The context window as the model sees it.
    let (status, context) = s.get(&format!("{agent}/context"), &key).await;
    assert_eq!(status, StatusCode::OK, "{context}");
    assert_eq!(context["messages"][0]["role"], "system");
    assert!(
        context["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("likes tea")
    );
    assert!(context["tokens"]["total_tokens"].as_u64().unwrap() > 0);
    assert!(
        context["functions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["name"] == "send_message")
    );

    // Policy update.
    let (status, updated) = s
        .call(
            Method::PATCH,
            &agent,
            &key,
            Some(json!({"policy": "paper"})),
        )
        .await;
    assert_eq!(
        (status, &updated["policy"]),
        (StatusCode::OK, &json!("paper")),
        "{updated}"
    );
    let (status, renamed) = s
        .call(
            Method::PATCH,
            &agent,
            &key,
            Some(json!({"name": "ada lovelace", "tools": ["send_message", "archival_memory_search"], "context_window": 4096})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{renamed}");
    assert_eq!(renamed["name"], "ada lovelace");
    assert_eq!(
        renamed["tools"],
        json!(["send_message", "archival_memory_search"])
    );
    assert_eq!(renamed["context_window"], 4096);
    assert!(
        renamed["memory"][1]["value"]
            .as_str()
            .unwrap()
            .contains("Miso"),
        "memory stays"
    );
    let (_, context) = s.get(&format!("{agent}/context"), &key).await;
    assert_eq!(
        context["functions"].as_array().unwrap().len(),
        2,
        "{context}"
    );
    let (status, ruled) = s
        .call(
            Method::PATCH,
            &agent,
            &key,
            Some(json!({"tool_rules": [{"type": "terminal", "tool": "send_message"}]})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{ruled}");
    assert_eq!(ruled["tool_rules"][0]["type"], "terminal");
    assert_eq!(ruled["loop_style"], "heartbeat");
    let (status, styled) = s
        .call(
            Method::PATCH,
            &agent,
            &key,
            Some(json!({"loop_style": "until_reply"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{styled}");
    assert_eq!(styled["loop_style"], "until_reply");
    let (_, context) = s.get(&format!("{agent}/context"), &key).await;
    assert!(
        !context["functions"]
            .to_string()
            .contains("request_heartbeat"),
        "{context}"
    );
    let (status, body) = s
        .call(
            Method::PATCH,
            &agent,
            &key,
            Some(json!({"loop_style": "sideways"})),
        )
        .await;
    assert_eq!((status, code(&body)), (StatusCode::BAD_REQUEST, "bad_json"));
    let message = body["error"]["message"].as_str().unwrap();
    assert_eq!(
        message
            .matches("unknown variant `sideways`, expected `heartbeat` or `until_reply`")
            .count(),
        1,
        "said once: {message}"
    );
    let (status, body) = s
        .call(
            Method::PATCH,
            &agent,
            &key,
            Some(json!({"tool_rules": [{"type": "run_first", "tool": "web_search"}]})),
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNPROCESSABLE_ENTITY, "invalid_config"),
        "{body}"
    );
    let (status, body) = s
        .call(
            Method::PATCH,
            &agent,
            &key,
            Some(json!({"tools": ["no_such_tool"]})),
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNPROCESSABLE_ENTITY, "unknown_tool"),
        "{body}"
    );
    let (_, unchanged) = s.get(&agent, &key).await;
    assert_eq!(
        unchanged["tools"].as_array().unwrap().len(),
        2,
        "a rejected change stores nothing"
    );
    let (status, body) = s
        .call(
            Method::PATCH,
            &agent,
            &key,
            Some(json!({"policy": "nonsense"})),
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNPROCESSABLE_ENTITY, "unknown_policy"),
        "{body}"
    );

    // Export, import as a copy.
    let (status, file) = s.get(&format!("{agent}/export"), &key).await;
    assert_eq!(status, StatusCode::OK);
    assert!(file["agents"].as_array().is_some(), "{file}");
    let (status, imported) = s.post("/v1/agents/import?name=ada-copy", &key, file).await;
    assert_eq!(status, StatusCode::CREATED, "{imported}");
    assert_eq!(imported["agent"]["name"], "ada-copy");
    let copy = imported["agent"]["id"].as_str().unwrap().to_owned();
    let (_, copied) = s
        .get(&format!("/v1/agents/{copy}/memory/human"), &key)
        .await;
    assert!(copied["value"].as_str().unwrap().contains("Miso"));
    let (_, agents) = s.get("/v1/agents", &key).await;
    assert_eq!(agents["agents"].as_array().unwrap().len(), 2);

    let metrics = s
        .http
        .get(format!("{}/metrics", s.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("memgpt_steps_total{outcome=\"ok\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("memgpt_step_seconds_count 1"), "{metrics}");
    assert!(metrics.contains("memgpt_llm_calls_total 2"), "{metrics}");

    // Delete: gone, and gone from the list.
    let (status, _) = s.call(Method::DELETE, &agent, &key, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = s.get(&agent, &key).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, agents) = s.get("/v1/agents", &key).await;
    assert_eq!(agents["agents"].as_array().unwrap().len(), 1);
}

/// A policy defined outside memgpt keeps a signal of its own (`words`, see registries.rs): the
/// context view shows it by name for every queued message, as it shows the built-in policies'
/// signals, with no server code for it.
/// Facts that change over HTTP: a passage updated and forgotten, searched now, as of an earlier
/// time and with its history; a retired passage cannot change again (409), another tenant's
/// passage is not found (404).
#[memgpt_test_harness::test]
async fn archival_facts_are_updated_forgotten_and_searched_as_of() {
    let s = start().await;
    let key = s.tenant("acme").await;
    let other = s.tenant("globex").await;
    let (_, created) = s.post("/v1/agents", &key, json!({"name": "ada"})).await;
    let agent = format!("/v1/agents/{}", created["id"].as_str().unwrap());
    let (_, inserted) = s
        .post(
            &format!("{agent}/archival"),
            &key,
            json!({"text": "The user lives in Berlin.", "tags": ["home"]}),
        )
        .await;
    let berlin = inserted["ids"][0].as_str().unwrap().to_owned();
    let before = chrono::Utc::now();
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;

    let (status, updated) = s
        .call(
            Method::PATCH,
            &format!("{agent}/archival/{berlin}"),
            &key,
            Some(json!({"text": "The user lives in Paris."})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{updated}");
    let paris = updated["ids"][0].as_str().unwrap().to_owned();
    let search = |body: Value| {
        let (s, key, agent) = (&s, &key, &agent);
        async move {
            let (status, found) = s.post(&format!("{agent}/archival/search"), key, body).await;
            assert_eq!(status, StatusCode::OK, "{found}");
            found["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["text"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        search(json!({"query": "user lives"})).await,
        ["The user lives in Paris."]
    );
    assert_eq!(
        search(json!({"query": "user lives", "as_of": before})).await,
        ["The user lives in Berlin."]
    );
    assert_eq!(
        search(json!({"query": "user lives", "include_retired": true}))
            .await
            .len(),
        2
    );
    let (_, listed) = s.get(&format!("{agent}/archival"), &key).await;
    let old = &listed["items"][0];
    assert_eq!(old["superseded_by"], paris.as_str(), "{listed}");
    assert_eq!(old["retired_reason"], "superseded");
    assert_eq!(listed["items"][1]["tags"], json!(["home"]));

    // The old version is history: it cannot be updated or forgotten.
    let (status, body) = s
        .call(
            Method::PATCH,
            &format!("{agent}/archival/{berlin}"),
            &key,
            Some(json!({"text": "Rome"})),
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::CONFLICT, "conflict"),
        "{body}"
    );
    let forget = format!("{agent}/archival/{paris}/forget");
    let (status, body) = s
        .post(&forget, &other, json!({"reason": "not yours"}))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, _) = s.post(&forget, &key, json!({"reason": "moved away"})).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert!(search(json!({"query": "user lives"})).await.is_empty());
    let (status, body) = s.post(&forget, &key, json!({"reason": "again"})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let (status, body) = s
        .post(
            &format!("{agent}/archival/{}/forget", memgpt::ids::PassageId::new()),
            &key,
            json!({"reason": "x"}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
}

#[memgpt_test_harness::test]
async fn a_custom_policy_signal_shows_in_the_context_view() {
    let s = start().await;
    let key = s.tenant("acme").await;
    for (policy, signal) in [("newest-first", "words"), ("salience", "salience")] {
        let (status, created) = s
            .post(
                "/v1/agents",
                &key,
                json!({ "name": policy, "policy": policy }),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{created}");
        let id = created["id"].as_str().unwrap().to_owned();
        s.llm.push_call(
            "send_message",
            json!({"message": "Noted.", "request_heartbeat": false}),
        );
        let (status, step) = s
            .post(
                &format!("/v1/agents/{id}/messages"),
                &key,
                json!({"text": "My cat Miso is three years old"}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{step}");
        let (status, context) = s.get(&format!("/v1/agents/{id}/context"), &key).await;
        assert_eq!(status, StatusCode::OK, "{context}");
        assert_eq!(context["paging"]["policy"], policy);
        let user = context["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["content"].as_str().is_some_and(|c| c.contains("Miso")))
            .expect("the user's message is queued");
        let signals = &user["queued"]["signals"];
        assert_eq!(
            signals.as_object().map(|o| o.len()),
            Some(1),
            "{policy}: {signals}"
        );
        assert!(
            signals[signal].as_f64().unwrap() > 0.0,
            "{policy}: {signals}"
        );
    }
}
