//! Shared memory blocks on the server: a tenant's block attached to two of its agents, an edit
//! by one seen in the other's next step, limits and stale rewrites refused, no way in for
//! another tenant, and (PostgreSQL) two server processes appending at once without a loss.

use super::*;

async fn create_block(s: &Running, key: &str, body: Value) -> Value {
    let (status, block) = s.post("/v1/blocks", key, body).await;
    assert_eq!(status, StatusCode::CREATED, "{block}");
    block
}

#[memgpt_test_harness::test]
async fn a_block_shared_by_two_agents_is_edited_once_and_seen_by_both() {
    let s = start().await;
    let acme = s.tenant("acme").await;
    let globex = s.tenant("globex").await;
    let ann = s.agent(&acme, "ann").await;
    let bob = s.agent(&acme, "bob").await;
    let block = create_block(
        &s,
        &acme,
        json!({"label": "project", "value": "Launch: May 3", "limit": 100, "description": "the launch plan"}),
    )
    .await;
    let id = block["id"].as_str().unwrap().to_owned();
    assert_eq!(block["version"], 1);
    for agent in [&ann, &bob] {
        let (status, blocks) = s
            .post(&format!("/v1/agents/{agent}/blocks/{id}"), &acme, json!({}))
            .await;
        assert_eq!(status, StatusCode::OK, "{blocks}");
        assert_eq!(blocks["blocks"][2]["block_id"], id.as_str(), "{blocks}");
    }
    let (_, shown) = s.get(&format!("/v1/blocks/{id}"), &acme).await;
    assert_eq!(shown["agents"], json!([ann, bob]), "{shown}");

    // Ann's model edits the block; Bob's next step starts from it and says so.
    s.llm.push_call(
        "core_memory_append",
        json!({"label": "project", "content": "Moved to May 10.", "request_heartbeat": false}),
    );
    let (status, step) = s
        .post(
            &format!("/v1/agents/{ann}/messages"),
            &acme,
            json!({"text": "The launch moved to May 10."}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{step}");
    assert!(step["function_calls"][0]["ok"].as_bool().unwrap(), "{step}");
    let (_, memory) = s
        .get(&format!("/v1/agents/{bob}/memory/project"), &acme)
        .await;
    assert_eq!(
        memory["value"], "Launch: May 3\nMoved to May 10.",
        "{memory}"
    );
    s.llm
        .push_call("send_message", json!({"message": "May 10."}));
    let (_, step) = s
        .post(
            &format!("/v1/agents/{bob}/messages"),
            &acme,
            json!({"text": "When is the launch?"}),
        )
        .await;
    assert_eq!(step["shared_blocks_changed"], json!(["project"]), "{step}");
    let prompt = s.llm.agent_requests().last().unwrap().messages[0]
        .content
        .clone();
    assert!(prompt.contains("Moved to May 10."), "{prompt}");

    // Edits through an agent's memory route reach the shared block too; limits hold.
    let (status, edited) = s
        .post(
            &format!("/v1/agents/{bob}/memory/project/append"),
            &acme,
            json!({"text": "Owner: Bob"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{edited}");
    let (_, shown) = s.get(&format!("/v1/blocks/{id}"), &acme).await;
    assert_eq!(shown["version"], 3, "{shown}");
    assert!(shown["value"].as_str().unwrap().ends_with("Owner: Bob"));
    let (status, over) = s
        .post(
            &format!("/v1/blocks/{id}/append"),
            &acme,
            json!({"text": "x".repeat(100)}),
        )
        .await;
    assert_eq!(
        (status, over["error"]["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("block_over_limit"))
    );
    // A rewrite of version 1 would erase two edits: refused with the current text.
    let (status, stale) = s
        .call(
            Method::PATCH,
            &format!("/v1/blocks/{id}"),
            &acme,
            Some(json!({"value": "Launch: June", "based_on_version": 1})),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{stale}");
    assert!(
        stale["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Owner: Bob")
    );
    let (status, frozen) = s
        .call(
            Method::PATCH,
            &format!("/v1/blocks/{id}"),
            &acme,
            Some(json!({"value": "Launch: June", "based_on_version": 3, "read_only": true})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{frozen}");
    assert_eq!(
        (frozen["version"].as_u64(), frozen["read_only"].as_bool()),
        (Some(4), Some(true))
    );
    s.llm.push_call(
        "core_memory_append",
        json!({"label": "project", "content": "nope", "request_heartbeat": false}),
    );
    s.llm
        .push_call("send_message", json!({"message": "It is read-only."}));
    let (_, step) = s
        .post(
            &format!("/v1/agents/{ann}/messages"),
            &acme,
            json!({"text": "x"}),
        )
        .await;
    assert!(
        step["function_calls"][0]["output"]
            .as_str()
            .unwrap()
            .contains("read-only"),
        "{step}"
    );

    // Another tenant sees nothing and attaches nothing.
    let (status, _) = s.get(&format!("/v1/blocks/{id}"), &globex).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, theirs) = s.get("/v1/blocks", &globex).await;
    assert_eq!(theirs["blocks"], json!([]));
    let eve = s.agent(&globex, "eve").await;
    let (status, _) = s
        .post(&format!("/v1/agents/{eve}/blocks/{id}"), &globex, json!({}))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Deleting a held block is refused; detached from both, it goes.
    let (status, held) = s
        .call(Method::DELETE, &format!("/v1/blocks/{id}"), &acme, None)
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{held}");
    for agent in [&ann, &bob] {
        let (status, left) = s
            .call(
                Method::DELETE,
                &format!("/v1/agents/{agent}/blocks/{id}"),
                &acme,
                None,
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{left}");
        assert_eq!(left["blocks"].as_array().unwrap().len(), 2, "{left}");
    }
    let (status, _) = s
        .call(Method::DELETE, &format!("/v1/blocks/{id}"), &acme, None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
}

/// Two `memgpt serve` processes on one PostgreSQL database append to one shared block at
/// once, through the block route and through two agents' memory routes: every line is kept,
/// and the version counts every edit.
#[cfg(feature = "postgres")]
#[memgpt_test_harness::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_server_processes_never_lose_a_shared_block_edit_on_postgres() {
    use crate::fake_openai::FakeOpenAi;

    let Some(url) = postgres_url() else { return };
    let llm = FakeOpenAi::start().await;
    let home = tempfile::tempdir().unwrap();
    let (mut a, base_a) = serve_process(&url, &llm.base_url(), home.path()).await;
    let (mut b, base_b) = serve_process(&url, &llm.base_url(), home.path()).await;
    let client = |base: &str| Running {
        base: base.to_owned(),
        llm: Arc::new(ScriptedProvider::new()),
        http: memgpt::http::client(&Default::default()).unwrap(),
        shutdown: None,
        served: tokio::spawn(async {}),
    };
    let (ca, cb) = (client(&base_a), client(&base_b));
    let key = ca.tenant("acme").await;
    let (ann, bob) = (ca.agent(&key, "ann").await, cb.agent(&key, "bob").await);
    let block = create_block(&ca, &key, json!({"label": "log", "limit": 20_000})).await;
    let id = block["id"].as_str().unwrap().to_owned();
    for (c, agent) in [(&ca, &ann), (&cb, &bob)] {
        let (status, body) = c
            .post(&format!("/v1/agents/{agent}/blocks/{id}"), &key, json!({}))
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }

    const EACH: usize = 15;
    let mut writes = Vec::new();
    for (w, (c, path)) in [
        (&ca, format!("/v1/blocks/{id}/append")),
        (&cb, format!("/v1/blocks/{id}/append")),
        (&ca, format!("/v1/agents/{ann}/memory/log/append")),
        (&cb, format!("/v1/agents/{bob}/memory/log/append")),
    ]
    .into_iter()
    .enumerate()
    {
        let (http, base, key) = (c.http.clone(), c.base.clone(), key.clone());
        writes.push(tokio::spawn(async move {
            for i in 0..EACH {
                let response = http
                    .post(format!("{base}{path}"))
                    .bearer_auth(&key)
                    .json(&json!({"text": format!("writer {w} line {i}")}))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(response.status(), StatusCode::OK);
            }
        }));
    }
    for write in writes {
        write.await.unwrap();
    }
    let (_, shown) = cb.get(&format!("/v1/blocks/{id}"), &key).await;
    assert_eq!(shown["version"], 1 + 4 * EACH as u64, "{shown}");
    let lines: std::collections::HashSet<&str> = shown["value"].as_str().unwrap().lines().collect();
    assert_eq!(lines.len(), 4 * EACH, "an edit was lost: {shown}");
    // Both agents show the final text.
    for (c, agent) in [(&ca, &ann), (&cb, &bob)] {
        let (_, memory) = c.get(&format!("/v1/agents/{agent}/memory/log"), &key).await;
        assert_eq!(memory["value"], shown["value"]);
    }
    a.start_kill().unwrap();
    b.start_kill().unwrap();
}
