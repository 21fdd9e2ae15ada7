//! `memgpt serve` over real HTTP on 127.0.0.1: every route, tenant isolation, the SSE stream's
//! order, malformed and oversized bodies, and tenants that persist in the data directory.
//! The LLM is the scripted in-process provider.

use std::sync::Arc;

use memgpt::server::tenants::MemoryTenants;
use memgpt::server::{Server, ServerConfig};
use memgpt::store::Storage;
use memgpt::testing::ScriptedProvider;
use reqwest::{Client, Method, StatusCode};
use serde_json::{Value, json};

const ADMIN: &str = "admin-secret-for-tests";

/// A server on an ephemeral port, its address and its model.
struct Running {
    base: String,
    llm: Arc<ScriptedProvider>,
    http: Client,
    _shutdown: tokio::sync::oneshot::Sender<()>,
}

async fn start_with(server: Server, llm: Arc<ScriptedProvider>) -> Running {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        server
            .serve(listener, async move {
                let _ = rx.await;
            })
            .await
            .unwrap();
    });
    let http = memgpt::http::client(&Default::default()).unwrap();
    Running {
        base,
        llm,
        http,
        _shutdown: tx,
    }
}

fn config() -> ServerConfig {
    ServerConfig {
        admin_key: Some(ADMIN.to_owned()),
        max_body_bytes: 64 * 1024,
        ..ServerConfig::default()
    }
}

async fn start() -> Running {
    let llm = Arc::new(ScriptedProvider::new());
    let server = Server::with_parts(
        Storage::in_memory(),
        Arc::new(MemoryTenants::new()),
        llm.clone(),
        None,
        config(),
    );
    start_with(server, llm).await
}

impl Running {
    /// Sends `method path` with `key` and an optional JSON body: status and JSON (or text as a
    /// JSON string).
    async fn call(
        &self,
        method: Method,
        path: &str,
        key: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(key);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        let text = response.text().await.unwrap();
        let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, value)
    }

    async fn get(&self, path: &str, key: &str) -> (StatusCode, Value) {
        self.call(Method::GET, path, key, None).await
    }

    async fn post(&self, path: &str, key: &str, body: Value) -> (StatusCode, Value) {
        self.call(Method::POST, path, key, Some(body)).await
    }

    /// A new tenant and one API key for it.
    async fn tenant(&self, name: &str) -> String {
        let (status, tenant) = self
            .post("/v1/admin/tenants", ADMIN, json!({"name": name}))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{tenant}");
        let id = tenant["id"].as_str().unwrap();
        let (status, key) = self
            .post(
                &format!("/v1/admin/tenants/{id}/keys"),
                ADMIN,
                json!({"name": "test"}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{key}");
        key["key"].as_str().unwrap().to_owned()
    }

    async fn agent(&self, key: &str, name: &str) -> String {
        let (status, agent) = self
            .post(
                "/v1/agents",
                key,
                json!({"name": name, "persona": "I am a test agent.", "human": "Nothing yet."}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{agent}");
        agent["id"].as_str().unwrap().to_owned()
    }
}

fn code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or("(no code)")
}

#[tokio::test]
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

#[tokio::test]
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

    // Delete: gone, and gone from the list.
    let (status, _) = s.call(Method::DELETE, &agent, &key, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = s.get(&agent, &key).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, agents) = s.get("/v1/agents", &key).await;
    assert_eq!(agents["agents"].as_array().unwrap().len(), 1);
}

/// Every agent route tried with another tenant's key answers 404, exactly as for an agent
/// that does not exist, and changes nothing.
#[tokio::test]
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

/// Parses a Server-Sent Events body into (event, data) pairs.
fn sse(body: &str) -> Vec<(String, Value)> {
    body.split("\n\n")
        .filter_map(|block| {
            let mut event = None;
            let mut data = String::new();
            for line in block.lines() {
                if let Some(name) = line.strip_prefix("event: ") {
                    event = Some(name.to_owned());
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data.push_str(d);
                }
            }
            Some((event?, serde_json::from_str(&data).unwrap()))
        })
        .collect()
}

#[tokio::test]
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

#[tokio::test]
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
}

/// The OpenAPI document is generated from the handlers: every route is in it, with its
/// request and response schemas.
#[tokio::test]
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
        ("/v1/agents/{agent_id}/recall/search", "post"),
        ("/v1/agents/{agent_id}/context", "get"),
        ("/v1/agents/import", "post"),
        ("/healthz", "get"),
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
    let create = &paths["/v1/agents"]["post"];
    assert!(create["requestBody"].is_object(), "{create}");
    // The document and the server agree: the library's copy is what is served.
    assert_eq!(
        document,
        serde_json::to_value(memgpt::server::openapi()).unwrap()
    );
}

/// On SQLite, tenants, keys and ownership live in the data directory with the agents.
#[tokio::test]
async fn tenants_and_agents_survive_a_restart_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().display());
    let llm = Arc::new(ScriptedProvider::new());
    let (key, id) = {
        let server = Server::open(&url, llm.clone(), None, config())
            .await
            .unwrap();
        let s = start_with(server, llm.clone()).await;
        let key = s.tenant("acme").await;
        let id = s.agent(&key, "durable").await;
        s.llm
            .push_call("send_message", json!({"message": "Stored."}));
        let (status, _) = s
            .post(
                &format!("/v1/agents/{id}/messages"),
                &key,
                json!({"text": "remember me"}),
            )
            .await;
        assert_eq!(status, StatusCode::OK);
        (key, id)
    };
    // The first server's connections close with it.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let server = Server::open(&url, llm.clone(), None, config())
        .await
        .unwrap();
    let s = start_with(server, llm).await;
    let (status, agents) = s.get("/v1/agents", &key).await;
    assert_eq!(status, StatusCode::OK, "{agents}");
    assert_eq!(agents["agents"][0]["id"], id.as_str());
    let (_, page) = s.get(&format!("/v1/agents/{id}/messages"), &key).await;
    assert_eq!(page["items"][0]["text"], "remember me");
    let (status, health) = s.get("/readyz", "").await;
    assert_eq!((status, &health["status"]), (StatusCode::OK, &json!("ok")));
}

/// A fresh schema of the PostgreSQL database at `MEMGPT_TEST_POSTGRES_URL`, or `None` (after
/// saying so) when it is not set outside CI.
#[cfg(feature = "postgres")]
fn postgres_url() -> Option<String> {
    let Ok(base) = std::env::var("MEMGPT_TEST_POSTGRES_URL") else {
        assert!(
            !std::env::var("CI").is_ok_and(|v| v == "true"),
            "CI=true but MEMGPT_TEST_POSTGRES_URL is not set: the server's PostgreSQL tests must run in CI"
        );
        eprintln!("SKIPPED: the server on PostgreSQL (set MEMGPT_TEST_POSTGRES_URL to run it)");
        return None;
    };
    let separator = if base.contains('?') { '&' } else { '?' };
    Some(format!(
        "{base}{separator}schema=memgpt_server_{}",
        memgpt::ids::AgentId::new().to_string().replace('-', "")
    ))
}

/// Two server processes' worth of servers on one PostgreSQL database: a key made through one
/// works on the other, a revocation is seen by both at once, and concurrent sends to one agent
/// through both run as whole steps one after another.
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_share_tenants_and_serialise_steps_on_postgres() {
    let Some(url) = postgres_url() else { return };
    let llm = Arc::new(ScriptedProvider::new());
    let a = start_with(
        Server::open(&url, llm.clone(), None, config())
            .await
            .unwrap(),
        llm.clone(),
    )
    .await;
    let b = start_with(
        Server::open(&url, llm.clone(), None, config())
            .await
            .unwrap(),
        llm.clone(),
    )
    .await;
    let key = a.tenant("acme").await;
    let id = b.agent(&key, "shared").await;
    let (status, view) = a.get(&format!("/v1/agents/{id}"), &key).await;
    assert_eq!(status, StatusCode::OK, "{view}");

    const SENDS: usize = 8;
    for i in 0..SENDS {
        llm.push_call("send_message", json!({"message": format!("reply {i}")}));
    }
    let sends: Vec<_> = (0..SENDS)
        .map(|i| {
            let server = if i % 2 == 0 { &a } else { &b };
            let request = server
                .http
                .post(format!("{}/v1/agents/{id}/messages", server.base))
                .bearer_auth(&key)
                .json(&json!({"text": format!("message {i}")}));
            tokio::spawn(async move {
                let response = request.send().await.unwrap();
                (response.status(), response.text().await.unwrap())
            })
        })
        .collect();
    for send in sends {
        let (status, body) = send.await.unwrap();
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let (_, view) = a.get(&format!("/v1/agents/{id}"), &key).await;
    assert_eq!(view["version"], SENDS as u64, "{view}");
    // Whole steps in sequence: each user message is followed by its own reply turn.
    let (_, page) = b
        .get(&format!("/v1/agents/{id}/messages?size=1000"), &key)
        .await;
    let items = page["items"].as_array().unwrap();
    assert_eq!(items.len(), SENDS * 3, "{page}");
    for step in items.chunks(3) {
        let kinds: Vec<&str> = step.iter().map(|m| m["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["user", "assistant", "function_return"], "{page}");
    }

    // A revocation through one server holds on the other at once.
    let (_, tenants) = a.get("/v1/admin/tenants", ADMIN).await;
    let tenant = tenants["tenants"][0]["id"].as_str().unwrap().to_owned();
    let (_, keys) = b
        .get(&format!("/v1/admin/tenants/{tenant}/keys"), ADMIN)
        .await;
    let key_id = keys["keys"][0]["id"].as_str().unwrap().to_owned();
    let (status, _) = a
        .call(
            Method::DELETE,
            &format!("/v1/admin/keys/{key_id}"),
            ADMIN,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = b.get("/v1/agents", &key).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}
