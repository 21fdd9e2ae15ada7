//! Every failure reaches the client as an error, streamed or not.

use super::*;

/// Every way a request can fail reaches the client as an error it can see: a failed model in
/// a stream, a taken name, an unknown route or method, a malformed query.
#[memgpt_test_harness::test]
async fn every_failure_is_an_error_the_client_sees() {
    let s = start().await;
    let key = s.tenant("acme").await;
    let id = s.agent(&key, "sam").await;
    let failing = || memgpt::llm::LlmError::Permanent {
        message: "the model endpoint is down".into(),
        status: Some(500),
    };

    // The facade, streamed: an error event in OpenAI's shape, no "stop".
    s.llm.push_error(failing());
    let body = s
        .http
        .post(format!("{}/v1/chat/completions", s.base))
        .bearer_auth(&key)
        .json(&json!({"model": "sam", "stream": true, "messages": [{"role": "user", "content": "Hi"}]}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let chunks = sse_data(&body);
    let error = chunks
        .iter()
        .find(|c| c.get("error").is_some())
        .unwrap_or_else(|| panic!("no error event: {body}"));
    assert_eq!(error["error"]["code"], "llm_error", "{body}");
    assert_eq!(error["error"]["type"], "server_error");
    // What kind of failure, not the provider's own words (those are the operator's).
    let message = error["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("the model provider refused the request (HTTP 500)")
            && !message.contains("the model endpoint is down"),
        "{message}"
    );
    assert!(
        !chunks
            .iter()
            .any(|c| c["choices"][0]["finish_reason"] == "stop"),
        "{body}"
    );
    assert_eq!(chunks.last().unwrap(), "[DONE]");
    // Not streamed: 502 llm_error; the agent's own routes alike.
    s.llm.push_error(failing());
    let (status, body) = s
        .post(
            "/v1/chat/completions",
            &key,
            json!({"model": "sam", "messages": [{"role": "user", "content": "Hi"}]}),
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::BAD_GATEWAY, "llm_error")
    );
    s.llm.push_error(failing());
    let (status, body) = s
        .post(
            &format!("/v1/agents/{id}/messages"),
            &key,
            json!({"text": "Hi"}),
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::BAD_GATEWAY, "llm_error")
    );
    s.llm.push_error(failing());
    let body = s
        .http
        .post(format!("{}/v1/agents/{id}/messages/stream", s.base))
        .bearer_auth(&key)
        .json(&json!({"text": "Hi"}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let (last, data) = sse(&body).pop().unwrap();
    assert_eq!(
        (last.as_str(), code(&data)),
        ("error", "llm_error"),
        "{body}"
    );

    // A stream that asked for usage ends with it.
    s.llm
        .push_call("send_message", json!({"message": "Hello."}));
    let body = s
        .http
        .post(format!("{}/v1/chat/completions", s.base))
        .bearer_auth(&key)
        .json(
            &json!({"model": "sam", "stream": true, "stream_options": {"include_usage": true},
                      "messages": [{"role": "user", "content": "Hi"}]}),
        )
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let chunks = sse_data(&body);
    let usage = &chunks[chunks.len() - 2];
    assert_eq!(usage["choices"], json!([]), "{body}");
    assert!(usage["usage"]["total_tokens"].is_u64(), "{body}");
    assert!(chunks[0]["usage"].is_null() && chunks[0].get("usage").is_some());

    // An agent created without a model says which one it runs on.
    let (_, view) = s.get(&format!("/v1/agents/{id}"), &key).await;
    assert_eq!(view["model"], "scripted", "{view}");

    // Names are unique per tenant: a second `sam` (created, renamed or imported) is refused.
    let (status, body) = s.post("/v1/agents", &key, json!({"name": "sam"})).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::CONFLICT, "already_exists")
    );
    let other = s.agent(&key, "max").await;
    let (status, body) = s
        .call(
            Method::PATCH,
            &format!("/v1/agents/{other}"),
            &key,
            Some(json!({"name": "sam"})),
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::CONFLICT, "already_exists")
    );
    let (_, file) = s.get(&format!("/v1/agents/{id}/export"), &key).await;
    let (status, body) = s.post("/v1/agents/import", &key, file).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::CONFLICT, "already_exists")
    );
    // Another tenant may use the name.
    let other_tenant = s.tenant("zeta").await;
    s.agent(&other_tenant, "sam").await;
    // The facade's models: one per name, each readable.
    let (_, models) = s.get("/v1/models", &key).await;
    assert_eq!(models["data"].as_array().unwrap().len(), 2, "{models}");
    let (status, model) = s.get("/v1/models/sam", &key).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        (model["id"].as_str(), model["object"].as_str()),
        (Some("sam"), Some("model"))
    );
    let (status, body) = s.get("/v1/models/nobody", &key).await;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, "not_found"));

    // Routes, methods and query strings: JSON errors with codes.
    let (status, body) = s.get("/v1/nothing/here", &key).await;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, "not_found"));
    let (status, body) = s
        .call(Method::PUT, "/v1/agents", &key, Some(json!({})))
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed")
    );
    let (status, body) = s
        .get(&format!("/v1/agents/{id}/archival?size=abc"), &key)
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::BAD_REQUEST, "invalid_input")
    );
    let (status, body) = s
        .get(&format!("/v1/agents/{id}/archival?colour=red"), &key)
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNPROCESSABLE_ENTITY, "unknown_field")
    );
}
