//! A retried request is one request: the same `Idempotency-Key`, or an OpenAI SDK's numbered
//! retry of the same body, never stores the user's message twice; a retry after the model
//! failed resumes the step. And what a tenant reads of a failure names no internal address.

use super::*;

/// The model fails as an upstream endpoint does, naming its address.
fn upstream_down() -> memgpt::llm::LlmError {
    memgpt::llm::LlmError::Permanent {
        message: "error sending request for url (http://127.0.0.1:9/v1/chat/completions)".into(),
        status: None,
    }
}

impl Running {
    /// POSTs `body` to `path` with extra headers: status, the `Idempotent-Replayed` header and
    /// the JSON (or text) body.
    async fn post_with(
        &self,
        path: &str,
        key: &str,
        headers: &[(&str, &str)],
        body: Value,
    ) -> (StatusCode, bool, Value) {
        let mut request = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(key)
            .json(&body);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        let replayed = response
            .headers()
            .get("idempotent-replayed")
            .is_some_and(|v| v == "true");
        let text = response.text().await.unwrap();
        let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, replayed, value)
    }

    /// How many of the agent's user messages say `text`.
    async fn stored(&self, key: &str, id: &str, text: &str) -> usize {
        messages(self, key, id)
            .await
            .iter()
            .filter(|m| m["kind"] == "user" && m["text"] == text)
            .count()
    }
}

/// The native API: a step that failed at the model and its retries under one key store the
/// message once; the retry that reaches the model resumes the step; later retries replay it;
/// the key with another request is refused.
#[memgpt_test_harness::test]
async fn a_keyed_message_is_stored_once_and_its_retry_resumes_the_step() {
    let s = start().await;
    let key = s.tenant("acme").await;
    let id = s.agent(&key, "sam").await;
    let path = format!("/v1/agents/{id}/messages");
    let send = json!({"text": "retry-probe"});
    let once = [("Idempotency-Key", "order-42")];

    s.llm.push_error(upstream_down());
    let (status, replayed, body) = s.post_with(&path, &key, &once, send.clone()).await;
    assert_eq!(
        (status, code(&body), replayed),
        (StatusCode::BAD_GATEWAY, "llm_error", false)
    );
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        !message.contains("127.0.0.1") && !message.contains("http"),
        "an internal address reached the tenant: {message}"
    );

    // The same request again, while the model is still down: resumed, not stored again.
    s.llm.push_error(upstream_down());
    let (status, _, _) = s.post_with(&path, &key, &once, send.clone()).await;
    assert_eq!(status, StatusCode::BAD_GATEWAY);

    // The model is back: the retry resumes the step, and the agent answers the message.
    s.llm
        .push_call("send_message", json!({"message": "Here now."}));
    let (status, replayed, step) = s.post_with(&path, &key, &once, send.clone()).await;
    assert_eq!((status, replayed), (StatusCode::OK, false), "{step}");
    assert_eq!(step["event"], "resume");
    assert_eq!(step["replies"], json!(["Here now."]));

    // Once more: the step that answered, replayed; the model is not asked again.
    let calls = s.llm.requests().len();
    let (status, replayed, again) = s.post_with(&path, &key, &once, send.clone()).await;
    assert_eq!((status, replayed), (StatusCode::OK, true));
    assert_eq!(again, step);
    assert_eq!(s.llm.requests().len(), calls);
    assert_eq!(s.stored(&key, &id, "retry-probe").await, 1);

    // The key with another request is refused; a new key is a new message.
    let (status, _, body) = s
        .post_with(&path, &key, &once, json!({"text": "something else"}))
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNPROCESSABLE_ENTITY, "idempotency_key_reused")
    );
    s.llm
        .push_call("send_message", json!({"message": "Again?"}));
    let (status, _, _) = s
        .post_with(&path, &key, &[("Idempotency-Key", "order-43")], send)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(s.stored(&key, &id, "retry-probe").await, 2);
}

/// The OpenAI facade: an SDK's numbered retries (`x-stainless-retry-count`) of one request are
/// that request, streamed or not; a first attempt with the same words is a new message.
#[memgpt_test_harness::test]
async fn an_sdks_retries_are_one_request() {
    let s = start().await;
    let key = s.tenant("acme").await;
    let id = s.agent(&key, "sam").await;
    let request = json!({"model": "sam", "messages": [{"role": "user", "content": "sdk-probe"}]});
    let attempt = |n: &'static str| [("x-stainless-retry-count", n)];

    s.llm.push_error(upstream_down());
    let (status, _, body) = s
        .post_with("/v1/chat/completions", &key, &attempt("0"), request.clone())
        .await;
    assert_eq!(status, StatusCode::BAD_GATEWAY, "{body}");
    s.llm.push_error(upstream_down());
    let (status, _, _) = s
        .post_with("/v1/chat/completions", &key, &attempt("1"), request.clone())
        .await;
    assert_eq!(status, StatusCode::BAD_GATEWAY);
    s.llm
        .push_call("send_message", json!({"message": "Answered."}));
    let (status, _, completion) = s
        .post_with("/v1/chat/completions", &key, &attempt("2"), request.clone())
        .await;
    assert_eq!(status, StatusCode::OK, "{completion}");
    assert_eq!(completion["choices"][0]["message"]["content"], "Answered.");
    assert_eq!(s.stored(&key, &id, "sdk-probe").await, 1);
    // A retry of a completed request gets the same completion.
    let (status, replayed, again) = s
        .post_with("/v1/chat/completions", &key, &attempt("3"), request.clone())
        .await;
    assert_eq!((status, replayed), (StatusCode::OK, true));
    assert_eq!(again["id"], completion["id"]);

    // A streamed request and its retry: one message; the retry replays the stream.
    let streamed = json!({"model": "sam", "stream": true,
        "messages": [{"role": "user", "content": "stream-probe"}]});
    s.llm
        .push_call("send_message", json!({"message": "Streamed."}));
    let (status, _, first) = s
        .post_with(
            "/v1/chat/completions",
            &key,
            &attempt("0"),
            streamed.clone(),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, replayed, second) = s
        .post_with("/v1/chat/completions", &key, &attempt("1"), streamed)
        .await;
    assert_eq!((status, replayed), (StatusCode::OK, true));
    let text = |body: &Value| -> String {
        sse_data(body.as_str().unwrap())
            .iter()
            .filter_map(|c| {
                c["choices"][0]["delta"]["content"]
                    .as_str()
                    .map(str::to_owned)
            })
            .collect()
    };
    assert_eq!(
        (text(&first), text(&second)),
        ("Streamed.".into(), "Streamed.".into())
    );
    assert_eq!(s.stored(&key, &id, "stream-probe").await, 1);

    // The same words as a new first attempt: the user said them twice.
    s.llm
        .push_call("send_message", json!({"message": "Again."}));
    let (status, _, _) = s
        .post_with("/v1/chat/completions", &key, &attempt("0"), request)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(s.stored(&key, &id, "sdk-probe").await, 2);
}

/// A retry that arrives while the first attempt still runs (the client timed out) waits for it
/// and gets its answer.
#[memgpt_test_harness::test]
async fn a_retry_waits_for_the_attempt_still_running() {
    let s = start_slow(std::time::Duration::from_millis(400)).await;
    let key = s.tenant("acme").await;
    let id = s.agent(&key, "sam").await;
    s.llm
        .push_call("send_message", json!({"message": "Slowly."}));
    let path = format!("/v1/agents/{id}/messages");
    let headers = [("Idempotency-Key", "slow-1")];
    let body = json!({"text": "wait-probe"});
    let (first, second) = tokio::join!(s.post_with(&path, &key, &headers, body.clone()), async {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        s.post_with(&path, &key, &headers, body.clone()).await
    });
    assert_eq!(first.0, StatusCode::OK, "{}", first.2);
    assert_eq!((second.0, second.1), (StatusCode::OK, true), "{}", second.2);
    assert_eq!(first.2, second.2);
    assert_eq!(s.stored(&key, &id, "wait-probe").await, 1);
}
