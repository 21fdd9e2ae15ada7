//! `memgpt serve` over real HTTP on 127.0.0.1: every route, tenant isolation, the SSE stream's
//! order, malformed and oversized bodies, and tenants that persist in the data directory.
//! The LLM is the scripted in-process provider.

use std::sync::Arc;

use memgpt::backend::testing::ScriptedProvider;
use memgpt::server::{Server, ServerConfig, ServerTables};
use memgpt::store::Storage;
use reqwest::{Client, Method, StatusCode};
use serde_json::{Value, json};

pub(crate) const ADMIN: &str = "admin-secret-for-tests";

/// A server on an ephemeral port, its address and its model (`M`: whatever handle the test
/// keeps on it; the other suites' real or fake models need none).
pub(crate) struct Running<M = Arc<ScriptedProvider>> {
    pub(crate) base: String,
    llm: M,
    http: Client,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    served: tokio::task::JoinHandle<()>,
}

pub(crate) async fn start_with<M>(server: Server, llm: M) -> Running<M> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(async move {
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
        shutdown: Some(tx),
        served,
    }
}

fn config() -> ServerConfig {
    ServerConfig {
        admin_key: Some(ADMIN.to_owned()),
        max_body_bytes: 64 * 1024,
        timer_poll: std::time::Duration::from_millis(20),
        ..ServerConfig::default()
    }
}

async fn start() -> Running {
    let llm = Arc::new(ScriptedProvider::new());
    let server = Server::with_parts(
        Storage::in_memory(),
        ServerTables::in_memory(),
        llm.clone(),
        None,
        config(),
    );
    start_with(server, llm).await
}

impl<M> Running<M> {
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
    pub(crate) async fn tenant(&self, name: &str) -> String {
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

/// Any OpenAI client talks to an agent through `/v1/chat/completions`: here memgpt's own
/// OpenAI provider, then raw requests (streaming included). Only the newest user message
/// reaches the agent.
#[tokio::test]
async fn openai_clients_talk_to_agents_by_name_or_id() {
    use memgpt::llm::{ChatMessage, ChatRequest, LlmProvider};
    use memgpt::openai::{OpenAiConfig, OpenAiProvider};

    let s = start().await;
    let key = s.tenant("acme").await;
    let id = s.agent(&key, "ada").await;
    s.llm
        .push_call("send_message", json!({"message": "Hello from Ada."}));
    let client = OpenAiProvider::new(OpenAiConfig {
        api_key: Some(key.clone()),
        ..OpenAiConfig::new(format!("{}/v1", s.base), "ada")
    })
    .unwrap();
    let answer = client
        .complete(&ChatRequest::new(
            "ada",
            vec![
                ChatMessage::system("You are a helpful assistant."),
                ChatMessage::user("An old message the agent must not see."),
                ChatMessage::user("Hi Ada!"),
            ],
        ))
        .await
        .unwrap();
    assert_eq!(answer.content, "Hello from Ada.");
    assert!(answer.usage.prompt_tokens > 0);
    let kinds_and_texts: Vec<(String, String)> = {
        let (_, page) = s.get(&format!("/v1/agents/{id}/messages"), &key).await;
        page["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["kind"].as_str().unwrap().to_owned(),
                    m["text"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    assert_eq!(
        kinds_and_texts[0],
        ("user".to_owned(), "Hi Ada!".to_owned())
    );
    assert!(
        !kinds_and_texts
            .iter()
            .any(|(_, t)| t.contains("old message"))
    );

    // By id, streamed: the role, the reply as content, the finish reason, [DONE].
    s.llm.push_calls(
        "Two things to say.",
        &[
            ("send_message", json!({"message": "First."})),
            ("send_message", json!({"message": "Second."})),
        ],
    );
    let body = s
        .http
        .post(format!("{}/v1/chat/completions", s.base))
        .bearer_auth(&key)
        .json(&json!({
            "model": id,
            "stream": true,
            "temperature": 0.2,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Talk to me."}]}]
        }))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let data: Vec<&str> = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect();
    assert_eq!(data.last(), Some(&"[DONE]"), "{body}");
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let content: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(content, "First.\nSecond.");
    assert_eq!(
        chunks.last().unwrap()["choices"][0]["finish_reason"],
        "stop"
    );
    assert!(
        chunks
            .iter()
            .all(|c| c["object"] == "chat.completion.chunk")
    );

    // Unknown agents and other tenants' agents are unknown models.
    let other = s.tenant("other").await;
    for (model, key) in [("nobody", &key), ("ada", &other), (id.as_str(), &other)] {
        let (status, body) = s
            .post(
                "/v1/chat/completions",
                key,
                json!({"model": model, "messages": [{"role": "user", "content": "hi"}]}),
            )
            .await;
        assert_eq!(
            (status, code(&body)),
            (StatusCode::NOT_FOUND, "not_found"),
            "{model}"
        );
    }
    let (_, models) = s.get("/v1/models", &key).await;
    assert_eq!(models["data"][0]["id"], "ada");
    assert_eq!(models["data"][0]["agent_id"], id.as_str());
}

/// A model that thinks for a while before answering as scripted.
#[derive(Debug)]
struct SlowModel(Arc<ScriptedProvider>, std::time::Duration);

#[async_trait::async_trait]
impl memgpt::llm::LlmProvider for SlowModel {
    fn model(&self) -> &str {
        "slow"
    }

    async fn complete(
        &self,
        request: &memgpt::llm::ChatRequest,
    ) -> Result<memgpt::llm::ChatResponse, memgpt::llm::LlmError> {
        tokio::time::sleep(self.1).await;
        self.0.complete(request).await
    }
}

/// Shutting down mid-step: the step finishes and commits, its caller gets the answer, and the
/// server stops afterwards.
#[tokio::test]
async fn a_graceful_shutdown_lets_a_step_in_progress_finish() {
    let llm = Arc::new(ScriptedProvider::new());
    let slow = Arc::new(SlowModel(
        llm.clone(),
        std::time::Duration::from_millis(400),
    ));
    let server = Server::with_parts(
        Storage::in_memory(),
        ServerTables::in_memory(),
        slow,
        None,
        config(),
    );
    let mut s = start_with(server, llm.clone()).await;
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
#[tokio::test]
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

/// A small window: the stream shows the memory-pressure warning and the flush as they happen.
#[tokio::test]
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
    // One process per data directory, said at start.
    let second = Server::open(&url, llm.clone(), None, config()).await;
    let error = second
        .expect_err("a second server on the same directory")
        .to_string();
    assert!(
        error.contains("one process serves a data directory"),
        "{error}"
    );
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

/// A timer due while two servers share the database fires on exactly one of them.
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timer_fires_once_across_two_servers_on_postgres() {
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
    let mut agents = Vec::new();
    for i in 0..5 {
        let id = a.agent(&key, &format!("sleeper {i}")).await;
        // Twice the replies needed: a second firing would find one and show up.
        llm.push_call("send_message", json!({"message": "Awake."}));
        llm.push_call("send_message", json!({"message": "Awake."}));
        let (status, _) = b
            .post(
                &format!("/v1/agents/{id}/timers"),
                &key,
                json!({"reason": "wake up", "in_seconds": 0}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED);
        agents.push(id);
    }
    for id in &agents {
        eventually("the timers", async || {
            a.get(&format!("/v1/agents/{id}/timers"), &key).await.1["timers"] == json!([])
        })
        .await;
    }
    // Time for a duplicate firing to show, then exactly one timer event per agent.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    for id in &agents {
        let kinds = kinds(&a, &key, id).await;
        assert_eq!(
            kinds.iter().filter(|k| *k == "timer").count(),
            1,
            "{kinds:?}"
        );
    }
}

/// Waits up to 5 s for `check` to hold.
async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    for _ in 0..250 {
        if check().await {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("timed out waiting for {what}");
}

/// The kinds of an agent's messages, oldest first.
async fn kinds(s: &Running, key: &str, id: &str) -> Vec<String> {
    let (_, page) = s
        .get(&format!("/v1/agents/{id}/messages?size=1000"), key)
        .await;
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["kind"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn timers_fire_once_or_repeat_and_can_be_cancelled() {
    let s = start().await;
    let key = s.tenant("acme").await;
    let id = s.agent(&key, "sleepy").await;
    let timers = format!("/v1/agents/{id}/timers");
    let (status, body) = s
        .post(
            &timers,
            &key,
            json!({"reason": "x", "in_seconds": 1, "at": "2030-01-01T00:00:00Z"}),
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::BAD_REQUEST, "invalid_input")
    );
    let (status, body) = s
        .post(
            &timers,
            &key,
            json!({"reason": "x", "in_seconds": 1, "every_seconds": 0}),
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::BAD_REQUEST, "invalid_input")
    );

    // One-off, due now: fires once, then is gone.
    s.llm
        .push_call("send_message", json!({"message": "Time to stretch!"}));
    let (status, timer) = s
        .post(
            &timers,
            &key,
            json!({"reason": "stretch break", "in_seconds": 0}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{timer}");
    eventually("the one-off timer", async || {
        s.get(&timers, &key).await.1["timers"] == json!([])
    })
    .await;
    assert_eq!(
        kinds(&s, &key, &id).await,
        ["timer", "assistant", "function_return"]
    );
    let (_, page) = s.get(&format!("/v1/agents/{id}/messages"), &key).await;
    assert!(
        page["items"][0]["text"]
            .as_str()
            .unwrap()
            .contains("stretch break"),
        "{page}"
    );

    // Repeating every second: fires, stays, moves on.
    s.llm.push_call("send_message", json!({"message": "Tick."}));
    s.llm
        .push_call("send_message", json!({"message": "Tick again."}));
    let (_, timer) = s
        .post(
            &timers,
            &key,
            json!({"reason": "tick", "in_seconds": 0, "every_seconds": 1}),
        )
        .await;
    let first = timer["next_at"].as_str().unwrap().to_owned();
    eventually("the repeating timer to fire and move on", async || {
        let listed = s.get(&timers, &key).await.1;
        listed["timers"][0]["next_at"]
            .as_str()
            .is_some_and(|next| next > first.as_str())
    })
    .await;
    let timer_id = timer["id"].as_str().unwrap();
    let (status, _) = s
        .call(Method::DELETE, &format!("{timers}/{timer_id}"), &key, None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(s.get(&timers, &key).await.1["timers"], json!([]));
    let fired = kinds(&s, &key, &id)
        .await
        .iter()
        .filter(|k| *k == "timer")
        .count();
    assert!((2..=3).contains(&fired), "{fired} timer events");
}

/// A timer set just before a restart fires after it: timers live in the data directory.
#[tokio::test]
async fn a_timer_survives_a_restart_on_sqlite() {
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
        let (status, _) = s
            .post(
                &format!("/v1/agents/{id}/timers"),
                &key,
                json!({"reason": "wake up", "in_seconds": 1}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED);
        (key, id)
    };
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    llm.push_call("send_message", json!({"message": "Awake."}));
    let server = Server::open(&url, llm.clone(), None, config())
        .await
        .unwrap();
    let s = start_with(server, llm).await;
    eventually("the timer after the restart", async || {
        kinds(&s, &key, &id)
            .await
            .first()
            .is_some_and(|k| k == "timer")
    })
    .await;
}

/// A `memgpt serve` process on `store`, its model the fake OpenAI server at `llm`; the
/// process and its address.
#[cfg(feature = "postgres")]
async fn serve_process(
    store: &str,
    llm: &str,
    home: &std::path::Path,
) -> (tokio::process::Child, String) {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_memgpt"))
        .args(["serve", "--listen", "127.0.0.1:0", "--store", store])
        .current_dir(home)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("MEMGPT_BASE_URL", llm)
        .env("MEMGPT_MODEL", "gpt-4o-mini")
        .env("MEMGPT_EMBEDDER", "none")
        .env("MEMGPT_HOME", home)
        .env("MEMGPT_ADMIN_KEY", ADMIN)
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the memgpt binary");
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let address = loop {
        let line = tokio::time::timeout(std::time::Duration::from_secs(60), lines.next_line())
            .await
            .expect("memgpt serve starts within a minute")
            .unwrap()
            .expect("memgpt serve says where it listens");
        assert!(!line.contains(":memgpt@"), "a password in the log: {line}");
        if let Some(rest) = line.split(" on http://").nth(1) {
            break rest.split(' ').next().unwrap().to_owned();
        }
    };
    // Keep draining its log so it never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, format!("http://{address}"))
}

/// Two `memgpt serve` processes on one PostgreSQL database: concurrent sends to one agent
/// through both run as whole steps; a process killed in the middle of a step (holding the
/// agent's lock, waiting for the model) leaves no lock behind and nothing half-written, and
/// the other process steps the agent at once.
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_processes_share_agents_and_a_killed_one_leaves_no_lock() {
    use crate::fake_openai::{FakeOpenAi, Reply};

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
    let id = cb.agent(&key, "shared").await;

    const SENDS: usize = 6;
    for i in 0..SENDS {
        llm.push(Reply::call(
            "send_message",
            json!({"message": format!("reply {i}")}),
        ));
    }
    let sends: Vec<_> = (0..SENDS)
        .map(|i| {
            let c = if i % 2 == 0 { &ca } else { &cb };
            let request = c
                .http
                .post(format!("{}/v1/agents/{id}/messages", c.base))
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
    let (_, page) = ca
        .get(&format!("/v1/agents/{id}/messages?size=1000"), &key)
        .await;
    let items = page["items"].as_array().unwrap();
    assert_eq!(items.len(), SENDS * 3, "{page}");
    for step in items.chunks(3) {
        let kinds: Vec<&str> = step.iter().map(|m| m["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["user", "assistant", "function_return"], "{page}");
    }

    // Process A takes the agent's lock and waits for a slow model; it is killed meanwhile.
    llm.push(
        Reply::call("send_message", json!({"message": "never delivered"}))
            .delayed(std::time::Duration::from_secs(30)),
    );
    let seen = llm.requests().len();
    let doomed = ca
        .http
        .post(format!("{base_a}/v1/agents/{id}/messages"))
        .bearer_auth(&key)
        .json(&json!({"text": "lost in the crash"}))
        .send();
    let doomed = tokio::spawn(doomed);
    eventually("process A to call the model", async || {
        llm.requests().len() > seen
    })
    .await;
    a.start_kill().unwrap();
    a.wait().await.unwrap();
    assert!(
        doomed.await.unwrap().is_err(),
        "the killed process answered"
    );

    // Process B steps the agent at once: no lock left behind, no trace of the killed step.
    llm.push(Reply::call(
        "send_message",
        json!({"message": "still here"}),
    ));
    let started = std::time::Instant::now();
    let (status, step) = cb
        .post(
            &format!("/v1/agents/{id}/messages"),
            &key,
            json!({"text": "are you there?"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{step}");
    assert_eq!(step["replies"], json!(["still here"]));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(step["version"], SENDS as u64 + 1);
    let (_, page) = cb
        .get(&format!("/v1/agents/{id}/messages?size=1000"), &key)
        .await;
    assert!(
        !page.to_string().contains("lost in the crash"),
        "the killed step left messages behind"
    );
    b.start_kill().unwrap();
}

#[tokio::test]
async fn a_call_waits_for_approval_over_http() {
    let s = start().await;
    let key = s.tenant("acme").await;
    let (status, agent) = s
        .post(
            "/v1/agents",
            &key,
            json!({"name": "careful", "tool_rules": [
                {"type": "requires_approval", "tool": "archival_memory_insert"}
            ]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{agent}");
    assert_eq!(agent["tool_rules"][0]["type"], "requires_approval");
    let messages = format!("/v1/agents/{}/messages", agent["id"].as_str().unwrap());
    s.llm.push_call(
        "archival_memory_insert",
        json!({"content": "Ann keeps bees.", "request_heartbeat": true}),
    );
    let (status, paused) = s
        .post(&messages, &key, json!({"text": "I keep bees."}))
        .await;
    assert_eq!(status, StatusCode::OK, "{paused}");
    assert_eq!(paused["stop_reason"], "awaiting_approval");
    let pending = &paused["pending_approval"];
    assert_eq!(pending["function"], "archival_memory_insert");
    let call_id = pending["call_id"].as_str().unwrap().to_owned();
    assert_eq!(paused["stop_detail"], call_id.as_str());

    // Other messages wait; a malformed or unknown approval is refused.
    let (status, body) = s.post(&messages, &key, json!({"text": "hello?"})).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::CONFLICT, "approval_pending"),
        "{body}"
    );
    let (status, body) = s
        .post(
            &messages,
            &key,
            json!({"type": "approval", "call_id": call_id}),
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::BAD_REQUEST, "invalid_input"),
        "{body}"
    );
    let (status, body) = s
        .post(
            &messages,
            &key,
            json!({"type": "approval", "call_id": "nope", "approve": true}),
        )
        .await;
    // The agent is there; the call it names is not the one it waits on.
    assert_eq!(
        (status, code(&body)),
        (StatusCode::CONFLICT, "conflict"),
        "{body}"
    );
    let (status, body) = s
        .post(&messages, &key, json!({"text": "hi", "approve": true}))
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::BAD_REQUEST, "invalid_input"),
        "{body}"
    );

    // Denied through the stream: the model reads why and answers.
    s.llm
        .push_call("send_message", json!({"message": "All right, I won't."}));
    let response = s
        .http
        .post(format!("{}{messages}/stream", s.base))
        .bearer_auth(&key)
        .json(&json!({"type": "approval", "call_id": call_id, "approve": false, "text": "not now"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let events = sse(&response.text().await.unwrap());
    let (_, first) = events.iter().find(|(e, _)| e == "message").unwrap();
    assert_eq!(first["kind"], "function_error");
    assert!(
        first["text"]
            .as_str()
            .unwrap()
            .contains("the user denied this call of `archival_memory_insert`: not now"),
        "{first}"
    );
    let (name, record) = events.last().unwrap();
    assert_eq!(name, "step");
    assert_eq!(record["event"], "approval");
    assert_eq!(record["stop_reason"], "end_turn");
    assert_eq!(record["replies"], json!(["All right, I won't."]));
    let (status, _) = s
        .post(&messages, &key, json!({"text": "hello again"}))
        .await;
    assert_ne!(
        status,
        StatusCode::CONFLICT,
        "the agent takes messages again"
    );
}

/// `memgpt serve`'s MCP servers: tools of a FastMCP server (official Python SDK) in the
/// server's function registry; an agent created with one in its `tools` calls it, and its
/// context (what the inspector shows) lists it.
#[cfg(feature = "mcp")]
#[tokio::test]
async fn agents_of_the_server_are_given_mcp_tools_by_name() {
    use memgpt::function::FunctionRegistry;
    use memgpt::mcp::client::{McpServerConfig, McpTransport};

    let Some((python, pythonpath)) = crate::fastmcp_python() else {
        return;
    };
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/fastmcp_calc.py");
    let mut calc = McpServerConfig::stdio("calc", python, [script.display().to_string()]);
    if let McpTransport::Stdio { env, .. } = &mut calc.transport {
        env.insert("PYTHONPATH".into(), pythonpath);
    }
    let calc = calc.connect().await.unwrap();
    let mut registry = FunctionRegistry::linked().unwrap();
    calc.register(&mut registry).unwrap();
    let llm = Arc::new(ScriptedProvider::new());
    let server = Server::with_parts(
        Storage::in_memory(),
        ServerTables::in_memory(),
        llm.clone(),
        None,
        ServerConfig {
            functions: Some(registry),
            ..config()
        },
    );
    let s = start_with(server, llm.clone()).await;
    let key = s.tenant("acme").await;
    let (status, agent) = s
        .post(
            "/v1/agents",
            &key,
            json!({"name": "adder", "tools": ["send_message", "calc__add"]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{agent}");
    let id = agent["id"].as_str().unwrap().to_owned();
    // A tool no server offers is refused as any unknown function.
    let (status, body) = s
        .post(
            "/v1/agents",
            &key,
            json!({"name": "other", "tools": ["send_message", "calc__divide"]}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");

    llm.push_call(
        "calc__add",
        json!({"a": 20, "b": 22, "request_heartbeat": true}),
    );
    llm.push_call("send_message", json!({"message": "42"}));
    let (status, step) = s
        .post(
            &format!("/v1/agents/{id}/messages"),
            &key,
            json!({"text": "What is 20 + 22?"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{step}");
    let text = step.to_string();
    assert!(text.contains("calc__add") && text.contains("42"), "{text}");
    let (status, context) = s.get(&format!("/v1/agents/{id}/context"), &key).await;
    assert_eq!(status, StatusCode::OK);
    let functions: Vec<&str> = context["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert!(functions.contains(&"calc__add"), "{functions:?}");
}

/// A Letta file with an agent and its sleep-time companion imports as two agents of the
/// caller's tenant (or one, chosen with `?agent=`); another tenant sees neither.
#[tokio::test]
async fn a_two_agent_letta_file_imports_into_one_tenant() {
    use std::io::Read;
    let mut text = String::new();
    flate2::read::GzDecoder::new(
        std::fs::File::open(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/letta/agent-file/evie.af.gz"),
        )
        .unwrap(),
    )
    .read_to_string(&mut text)
    .unwrap();
    let file: Value = serde_json::from_str(&text).unwrap();
    // The file is larger than the other tests' body limit.
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
    let other = s.tenant("other").await;
    let (status, imported) = s.post("/v1/agents/import", &key, file.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{imported}");
    assert_eq!(imported["agent"]["name"], "Evie");
    assert_eq!(imported["related"][0]["name"], "companion-sleeptime_copy");
    let (_, agents) = s.get("/v1/agents", &key).await;
    assert_eq!(agents["agents"].as_array().unwrap().len(), 2, "{agents}");
    let (_, theirs) = s.get("/v1/agents", &other).await;
    assert!(theirs["agents"].as_array().unwrap().is_empty(), "{theirs}");
    // Exporting either gives the pair back.
    let id = imported["related"][0]["id"].as_str().unwrap();
    let (status, pair) = s.get(&format!("/v1/agents/{id}/export"), &key).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(pair["agents"].as_array().unwrap().len(), 2);
    assert_eq!(
        pair["groups"][0]["manager_config"]["manager_type"],
        "sleeptime"
    );

    let (status, one) = s
        .post(
            "/v1/agents/import?agent=agent-1&name=helper",
            &key,
            file.clone(),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{one}");
    assert_eq!(one["agent"]["name"], "helper");
    assert!(one["related"].as_array().unwrap().is_empty());
    let (status, body) = s.post("/v1/agents/import?agent=nobody", &key, file).await;
    assert_eq!(status.as_u16() / 100, 4, "{body}");
    assert!(body.to_string().contains("no agent `nobody`"), "{body}");
    let (_, agents) = s.get("/v1/agents", &key).await;
    assert_eq!(agents["agents"].as_array().unwrap().len(), 3, "{agents}");
}

/// The data lines of an SSE body without event names (OpenAI's stream): JSON values, and
/// `[DONE]` as a string.
fn sse_data(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).unwrap_or_else(|_| json!(data)))
        .collect()
}

/// Every way a request can fail reaches the client as an error it can see: a failed model in
/// a stream, a taken name, an unknown route or method, a malformed query.
#[tokio::test]
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
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the model endpoint is down")
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

/// A policy defined outside memgpt keeps a signal of its own (`words`, see registries.rs): the
/// context view shows it by name for every queued message, as it shows the built-in policies'
/// signals, with no server code for it.
#[tokio::test]
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
