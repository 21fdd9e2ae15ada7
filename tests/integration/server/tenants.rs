//! Tenants, keys and isolation: a key never reaches another tenant's agent.

use super::*;

#[memgpt_test_harness::test]
async fn admin_creates_tenants_and_keys_and_revokes_them() {
    let s = start().await;
    // Without the admin key, nothing.
    let (status, body) = s
        .post("/v1/admin/tenants", "wrong", json!({"name": "x"}))
        .await;
    assert_eq!((status, code(&body)), (StatusCode::FORBIDDEN, "admin_only"));
    let key = s.tenant("acme").await;
    assert!(key.starts_with("mgk_"), "{key}");
    let (status, body) = s
        .post("/v1/admin/tenants", ADMIN, json!({"name": "acme"}))
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::CONFLICT, "already_exists")
    );
    let (_, tenants) = s.get("/v1/admin/tenants", ADMIN).await;
    let tenant = tenants["tenants"][0]["id"].as_str().unwrap().to_owned();
    let (_, keys) = s
        .get(&format!("/v1/admin/tenants/{tenant}/keys"), ADMIN)
        .await;
    let listed = &keys["keys"][0];
    // Listed without the secret, recognisable by its prefix.
    assert!(listed.get("key").is_none(), "{listed}");
    assert!(key.starts_with(listed["prefix"].as_str().unwrap()));
    // A tenant key is not an admin key, and the admin key is no tenant's.
    let (status, _) = s.get("/v1/admin/tenants", &key).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, body) = s.get("/v1/agents", ADMIN).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNAUTHORIZED, "unauthorized")
    );
    let (status, _) = s.get("/v1/agents", &key).await;
    assert_eq!(status, StatusCode::OK);
    // Revoked: refused at once.
    let key_id = listed["id"].as_str().unwrap();
    let (status, _) = s
        .call(
            Method::DELETE,
            &format!("/v1/admin/keys/{key_id}"),
            ADMIN,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, body) = s.get("/v1/agents", &key).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNAUTHORIZED, "unauthorized")
    );
    let response = s
        .http
        .get(format!("{}/v1/agents", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
}

/// Every agent route tried with another tenant's key answers 404, exactly as for an agent
/// that does not exist, and changes nothing.
#[memgpt_test_harness::test]
async fn a_key_never_reaches_another_tenants_agent() {
    let s = start().await;
    let alice = s.tenant("alice").await;
    let bob = s.tenant("bob").await;
    let agent = s.agent(&alice, "private").await;
    let missing = memgpt::ids::AgentId::new().to_string();
    let routes: Vec<(Method, String, Option<Value>)> = vec![
        (Method::GET, "".into(), None),
        (Method::PATCH, "".into(), Some(json!({"policy": "lru"}))),
        (
            Method::POST,
            "/messages".into(),
            Some(json!({"text": "hi"})),
        ),
        (
            Method::POST,
            "/messages/stream".into(),
            Some(json!({"text": "hi"})),
        ),
        (Method::GET, "/messages".into(), None),
        (Method::GET, "/memory".into(), None),
        (Method::GET, "/memory/human".into(), None),
        (
            Method::PUT,
            "/memory/human".into(),
            Some(json!({"value": "pwned"})),
        ),
        (
            Method::POST,
            "/memory/human/append".into(),
            Some(json!({"text": "pwned"})),
        ),
        (
            Method::POST,
            "/archival".into(),
            Some(json!({"text": "pwned"})),
        ),
        (Method::GET, "/archival".into(), None),
        (
            Method::POST,
            "/archival/search".into(),
            Some(json!({"query": "x"})),
        ),
        (
            Method::DELETE,
            format!("/archival/{}", memgpt::ids::PassageId::new()),
            None,
        ),
        (
            Method::POST,
            "/recall/search".into(),
            Some(json!({"query": "x"})),
        ),
        (Method::GET, "/context".into(), None),
        (Method::GET, "/export".into(), None),
        (
            Method::POST,
            "/timers".into(),
            Some(json!({"reason": "pwned", "in_seconds": 0})),
        ),
        (Method::GET, "/timers".into(), None),
        (
            Method::DELETE,
            format!("/timers/{}", memgpt::ids::AgentId::new()),
            None,
        ),
        (Method::DELETE, "".into(), None),
    ];
    for (method, tail, body) in &routes {
        let theirs = s
            .call(
                method.clone(),
                &format!("/v1/agents/{agent}{tail}"),
                &bob,
                body.clone(),
            )
            .await;
        let nobodys = s
            .call(
                method.clone(),
                &format!("/v1/agents/{missing}{tail}"),
                &bob,
                body.clone(),
            )
            .await;
        assert_eq!(
            theirs.0,
            StatusCode::NOT_FOUND,
            "{method} {tail}: {}",
            theirs.1
        );
        assert_eq!(code(&theirs.1), "not_found");
        // Same answer as for an agent that does not exist, apart from the id in the message.
        assert_eq!(nobodys.0, theirs.0, "{method} {tail}");
        assert_eq!(
            theirs.1["error"]["message"]
                .as_str()
                .unwrap()
                .replace(&agent, "ID"),
            nobodys.1["error"]["message"]
                .as_str()
                .unwrap()
                .replace(&missing, "ID"),
        );
    }
    let (_, listed) = s.get("/v1/agents", &bob).await;
    assert_eq!(listed["agents"], json!([]));
    // Alice's agent is untouched: no step ran, no memory changed, nothing stored.
    let (status, view) = s.get(&format!("/v1/agents/{agent}"), &alice).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(view["version"], 0, "{view}");
    assert_eq!(view["memory"][1]["value"], "Nothing yet.");
    assert_eq!(s.llm.requests().len(), 0);
}
