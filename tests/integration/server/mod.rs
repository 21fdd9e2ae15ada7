//! `memgpt serve` over real HTTP on 127.0.0.1: every route, tenant isolation, the SSE stream's
//! order, malformed and oversized bodies, and tenants that persist in the data directory.
//! The LLM is the scripted in-process provider. One module per topic (as axum splits
//! `routing/tests/`); the server harness and the helpers they share are here.

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

/// Letta's published sleep-time pair (Evie and her companion), as JSON.
fn evie() -> Value {
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
    serde_json::from_str(&text).unwrap()
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

    pub(crate) async fn get(&self, path: &str, key: &str) -> (StatusCode, Value) {
        self.call(Method::GET, path, key, None).await
    }

    pub(crate) async fn post(&self, path: &str, key: &str, body: Value) -> (StatusCode, Value) {
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

/// A server on the in-memory store whose model thinks for `delay` before answering as
/// scripted (through the returned server's `llm`).
async fn start_slow(delay: std::time::Duration) -> Running {
    let llm = Arc::new(ScriptedProvider::new());
    let slow = Arc::new(SlowModel(llm.clone(), delay));
    let server = Server::with_parts(
        Storage::in_memory(),
        ServerTables::in_memory(),
        slow,
        None,
        config(),
    );
    start_with(server, llm).await
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

/// A fresh schema of the PostgreSQL database at `MEMGPT_TEST_POSTGRES_URL`, or `None` (after
/// saying so) when it is not set outside CI.
#[cfg(feature = "postgres")]
fn postgres_url() -> Option<String> {
    let Ok(base) = std::env::var("MEMGPT_TEST_POSTGRES_URL") else {
        memgpt_test_harness::skip(
            "needs PostgreSQL + pgvector: set MEMGPT_TEST_POSTGRES_URL (.ci/postgres.sh start; .ci/postgres.sh url)",
        );
    };
    let separator = if base.contains('?') { '&' } else { '?' };
    Some(format!(
        "{base}{separator}schema=memgpt_server_{}",
        memgpt::ids::AgentId::new().to_string().replace('-', "")
    ))
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

/// An agent's messages (up to 1,000), oldest first.
async fn messages(s: &Running, key: &str, id: &str) -> Vec<Value> {
    let (_, page) = s
        .get(&format!("/v1/agents/{id}/messages?size=1000"), key)
        .await;
    page["items"].as_array().unwrap().clone()
}

/// The kinds of an agent's messages, oldest first.
async fn kinds(s: &Running, key: &str, id: &str) -> Vec<String> {
    messages(s, key, id)
        .await
        .iter()
        .map(|m| m["kind"].as_str().unwrap().to_owned())
        .collect()
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

/// The data lines of an SSE body without event names (OpenAI's stream): JSON values, and
/// `[DONE]` as a string.
fn sse_data(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).unwrap_or_else(|_| json!(data)))
        .collect()
}

mod agents;
mod approval;
mod blocks;
mod bodies;
mod companion;
mod errors;
mod lifecycle;
mod messaging;
mod openai;
mod persistence;
mod retries;
mod sequences;
mod streaming;
mod tenants;
mod timers;
mod transfer;
