//! Malformed and oversized bodies get stable codes; the OpenAPI document covers every route.

use super::*;

#[memgpt_test_harness::test]
async fn malformed_and_oversized_bodies_get_stable_codes() {
    let s = start().await;
    let key = s.tenant("acme").await;
    let id = s.agent(&key, "strict").await;
    let raw = |body: &'static str| {
        s.http
            .post(format!("{}/v1/agents/{id}/messages", s.base))
            .bearer_auth(&key)
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let response = raw("{not json").await.unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let body: Value = response.json().await.unwrap();
    assert_eq!(code(&body), "bad_json");
    let response = raw(r#"{"text": 5}"#).await.unwrap();
    let body: Value = response.json().await.unwrap();
    assert_eq!(code(&body), "bad_json", "{body}");
    let (status, body) = s
        .post(
            &format!("/v1/agents/{id}/messages"),
            &key,
            json!({"text": "hi", "colour": "red"}),
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNPROCESSABLE_ENTITY, "unknown_field"),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("colour")
    );
    let (status, body) = s
        .post(
            &format!("/v1/agents/{id}/messages"),
            &key,
            json!({"text": "  "}),
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::BAD_REQUEST, "invalid_input")
    );
    let (status, body) = s
        .post(
            &format!("/v1/agents/{id}/archival"),
            &key,
            json!({"text": "x".repeat(100 * 1024)}),
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::PAYLOAD_TOO_LARGE, "body_too_large"),
        "{body}"
    );
    let (status, body) = s
        .post(
            "/v1/agents",
            &key,
            json!({"name": "t", "tools": ["no_such_tool"]}),
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNPROCESSABLE_ENTITY, "unknown_tool"),
        "{body}"
    );
    let (_, agents) = s.get("/v1/agents", &key).await;
    assert_eq!(
        agents["agents"].as_array().unwrap().len(),
        1,
        "a failed creation leaves no agent"
    );
    let (status, body) = s.get("/v1/agents/not-a-uuid", &key).await;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, "not_found"));
    let (status, body) = s
        .get(&format!("/v1/agents/{id}/messages?size=0"), &key)
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::BAD_REQUEST, "invalid_input"),
        "{body}"
    );

    // Every one of those errors is counted by its code.
    let metrics = s
        .http
        .get(format!("{}/metrics", s.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for line in [
        "memgpt_http_errors_total{code=\"bad_json\"} 2",
        "memgpt_http_errors_total{code=\"unknown_field\"} 1",
        "memgpt_http_errors_total{code=\"body_too_large\"} 1",
        "memgpt_http_errors_total{code=\"unknown_tool\"} 1",
        "memgpt_http_errors_total{code=\"not_found\"} 1",
        "memgpt_http_errors_total{code=\"invalid_input\"} 2",
        "memgpt_steps_total{outcome=\"ok\"} 0",
    ] {
        assert!(metrics.contains(line), "{line} in\n{metrics}");
    }
}

/// The OpenAPI document is generated from the handlers: every route is in it, with its
/// request and response schemas.
#[memgpt_test_harness::test]
async fn the_openapi_document_describes_every_route() {
    let s = start().await;
    let (status, document) = s.get("/openapi.json", "").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        document["openapi"].as_str().unwrap().starts_with("3.1"),
        "{}",
        document["openapi"]
    );
    let paths = document["paths"].as_object().unwrap();
    for (path, method) in [
        ("/v1/admin/tenants", "post"),
        ("/v1/admin/tenants/{tenant_id}/keys", "post"),
        ("/v1/admin/keys/{key_id}", "delete"),
        ("/v1/agents", "post"),
        ("/v1/agents", "get"),
        ("/v1/agents/{agent_id}", "patch"),
        ("/v1/agents/{agent_id}", "delete"),
        ("/v1/agents/{agent_id}/messages", "post"),
        ("/v1/agents/{agent_id}/messages/stream", "post"),
        ("/v1/agents/{agent_id}/memory/{label}", "put"),
        ("/v1/agents/{agent_id}/memory/{label}/append", "post"),
        ("/v1/agents/{agent_id}/archival/search", "post"),
        ("/v1/agents/{agent_id}/archival/{passage_id}", "delete"),
        ("/v1/agents/{agent_id}/archival/{passage_id}", "patch"),
        ("/v1/agents/{agent_id}/archival/{passage_id}/forget", "post"),
        ("/v1/agents/{agent_id}/recall/search", "post"),
        ("/v1/agents/{agent_id}/context", "get"),
        ("/v1/agents/import", "post"),
        ("/v1/agents/{agent_id}/export", "get"),
        ("/v1/agents/{agent_id}/timers", "post"),
        ("/v1/agents/{agent_id}/timers/{timer_id}", "delete"),
        ("/v1/chat/completions", "post"),
        ("/v1/models", "get"),
        ("/healthz", "get"),
        ("/readyz", "get"),
    ] {
        let operation = &paths
            .get(path)
            .unwrap_or_else(|| panic!("{path} is not documented"))[method];
        assert!(operation.is_object(), "{method} {path}");
        assert!(
            operation["responses"]
                .as_object()
                .is_some_and(|r| !r.is_empty()),
            "{method} {path}"
        );
    }
    // Every operation has a name for generated clients (`client.update_passage(...)`), not
    // one a generator makes up from its path.
    for (path, item) in paths {
        for (method, operation) in item.as_object().unwrap() {
            let id = operation["operationId"].as_str().unwrap_or_default();
            assert!(
                !id.is_empty() && !id.contains("v1"),
                "{method} {path} has no operation name of its own: {id:?}"
            );
        }
    }
    let create = &paths["/v1/agents"]["post"];
    assert!(create["requestBody"].is_object(), "{create}");
    // The document and the server agree: the library's copy is what is served.
    assert_eq!(
        document,
        serde_json::to_value(memgpt::server::openapi()).unwrap()
    );
    // And every documented operation is a route that exists: without a key it is refused by
    // the handler (a JSON error), never by the router (an empty 404 or a 405).
    let mut operations = 0;
    for (path, item) in paths {
        let url = path
            .replace("{agent_id}", &memgpt::ids::AgentId::new().to_string())
            .replace("{tenant_id}", "t")
            .replace("{key_id}", "k")
            .replace("{label}", "human")
            .replace("{passage_id}", "p")
            .replace("{timer_id}", "x");
        for method in ["get", "post", "put", "patch", "delete"] {
            if item.get(method).is_none() {
                continue;
            }
            operations += 1;
            let response = s
                .http
                .request(
                    method.to_uppercase().parse().unwrap(),
                    format!("{}{url}", s.base),
                )
                .header("content-type", "application/json")
                .body("{}")
                .send()
                .await
                .unwrap();
            let status = response.status();
            let body = response.text().await.unwrap();
            assert_ne!(status, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
            assert!(
                status != StatusCode::NOT_FOUND || body.contains("not_found"),
                "{method} {path}: no such route"
            );
        }
    }
    assert!(operations >= 30, "{operations} operations documented");
}
