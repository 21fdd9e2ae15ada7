//! Graceful shutdown and request timeouts: a step in progress always commits.

use super::*;

/// Shutting down mid-step: the step finishes and commits, its caller gets the answer, and the
/// server stops afterwards.
#[memgpt_test_harness::test]
async fn a_graceful_shutdown_lets_a_step_in_progress_finish() {
    let mut s = start_slow(std::time::Duration::from_millis(400)).await;
    let llm = s.llm.clone();
    let key = s.tenant("acme").await;
    let id = s.agent(&key, "slowpoke").await;
    llm.push_call("send_message", json!({"message": "Done thinking."}));
    let request = s
        .http
        .post(format!("{}/v1/agents/{id}/messages", s.base))
        .bearer_auth(&key)
        .json(&json!({"text": "Think hard."}))
        .send();
    let pending = tokio::spawn(request);
    tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    let _ = s.shutdown.take().unwrap().send(());
    let response = pending.await.unwrap().unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let step: Value = response.json().await.unwrap();
    assert_eq!(step["replies"], json!(["Done thinking."]));
    tokio::time::timeout(std::time::Duration::from_secs(5), &mut s.served)
        .await
        .expect("the server stops once the step is answered")
        .unwrap();
    // Nothing listens any more.
    assert!(
        s.http
            .get(format!("{}/healthz", s.base))
            .send()
            .await
            .is_err()
    );
}

/// A step that outlives the request timeout is answered `504 timeout`, and still commits.
#[memgpt_test_harness::test]
async fn a_request_that_takes_too_long_times_out_but_its_step_commits() {
    let llm = Arc::new(ScriptedProvider::new());
    let slow = Arc::new(SlowModel(
        llm.clone(),
        std::time::Duration::from_millis(300),
    ));
    let config = ServerConfig {
        request_timeout: std::time::Duration::from_millis(100),
        ..config()
    };
    let server = Server::with_parts(
        Storage::in_memory(),
        ServerTables::in_memory(),
        slow,
        None,
        config,
    );
    let s = start_with(server, llm.clone()).await;
    let key = s.tenant("acme").await;
    let id = s.agent(&key, "slowpoke").await;
    llm.push_call("send_message", json!({"message": "Eventually."}));
    let (status, body) = s
        .post(
            &format!("/v1/agents/{id}/messages"),
            &key,
            json!({"text": "Quick!"}),
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::GATEWAY_TIMEOUT, "timeout"),
        "{body}"
    );
    eventually("the step to commit anyway", async || {
        s.get(&format!("/v1/agents/{id}"), &key).await.1["version"] == 1
    })
    .await;
}
