//! MCP both ways, against real peers: the SDK's own server (rmcp's `#[tool_router]`, served
//! over streamable HTTP on 127.0.0.1) gives an agent its tools; the `memgpt mcp` binary serves
//! an agent's memory over stdio to an rmcp client.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use memgpt::Agent;
use memgpt::function::FunctionRegistry;
use memgpt::mcp::client::{McpServerConfig, McpTransport};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock};
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use rmcp::{schemars, tool, tool_router};
use serde_json::{Value, json};

use crate::fake_openai::{FakeOpenAi, Reply};
use crate::provider;

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct AddRequest {
    /// The first addend.
    a: i64,
    /// The second addend.
    b: i64,
}

/// The counterpart: an MCP server written with the SDK's macros, counting the calls it runs.
#[derive(Clone, Debug)]
struct Calculator {
    calls: Arc<AtomicUsize>,
}

#[tool_router(server_handler)]
impl Calculator {
    #[tool(description = "Add two integers.")]
    fn add(&self, Parameters(AddRequest { a, b }): Parameters<AddRequest>) -> String {
        self.calls.fetch_add(1, Ordering::SeqCst);
        (a + b).to_string()
    }

    #[tool(description = "Refuse politely.")]
    fn refuse(&self) -> CallToolResult {
        self.calls.fetch_add(1, Ordering::SeqCst);
        CallToolResult::error(vec![ContentBlock::text("the calculator is out of paper")])
    }

    #[tool(description = "Take a long time.")]
    async fn slow(&self) -> String {
        self.calls.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(30)).await;
        "late".to_owned()
    }
}

/// Serves a fresh [`Calculator`] per session at `http://127.0.0.1:PORT/mcp`.
async fn calculator() -> (String, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let service = StreamableHttpService::new(
        move || {
            Ok(Calculator {
                calls: counted.clone(),
            })
        },
        LocalSessionManager::default().into(),
        StreamableHttpServerConfig::default(),
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    (format!("http://127.0.0.1:{}/mcp", address.port()), calls)
}

fn say(message: &str) -> Reply {
    Reply::call("send_message", json!({ "message": message }))
}

/// The function results the agent sent back to the model, in order.
fn tool_results(server: &FakeOpenAi) -> Vec<String> {
    let requests = server.agent_requests();
    let last = requests.last().expect("a request");
    last.messages()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[memgpt_test_harness::test]
async fn an_agent_calls_the_tools_of_an_sdk_server_over_streamable_http() {
    let (url, calls) = calculator().await;
    let client = McpServerConfig::http("calc", url)
        .timeout(Duration::from_secs(2))
        .connect()
        .await
        .unwrap();
    let mut registry = FunctionRegistry::linked().unwrap();
    let names = client.register(&mut registry).unwrap();
    assert_eq!(names, ["calc__add", "calc__refuse", "calc__slow"]);

    let server = FakeOpenAi::start().await;
    let mut builder = Agent::builder()
        .provider(provider(&server))
        .registry(registry);
    for name in &names {
        builder = builder.function(name);
    }
    let mut agent = builder.build().await.unwrap();
    // The model sees the server's schema (with the paper's heartbeat flag added).
    let add = agent.function_set().schema("calc__add").unwrap().clone();
    assert_eq!(add.description, "Add two integers.");
    assert_eq!(add.parameters["properties"]["a"]["type"], "integer");
    assert_eq!(
        add.parameters["required"],
        json!(["a", "b", "request_heartbeat"])
    );

    server.push_all([
        // A wrong type never reaches the server; the model reads what to fix.
        Reply::call(
            "calc__add",
            json!({"a": "two", "b": 3, "request_heartbeat": true}),
        ),
        Reply::call(
            "calc__add",
            json!({"a": 2, "b": 3, "request_heartbeat": true}),
        ),
        Reply::call("calc__refuse", json!({"request_heartbeat": true})),
        Reply::call("calc__slow", json!({"request_heartbeat": true})),
        say("2 + 3 = 5"),
    ]);
    let record = agent.step("what is 2 + 3?").await.unwrap();
    let outputs: Vec<(bool, &str)> = record
        .function_calls
        .iter()
        .map(|c| (c.ok, c.output.as_str()))
        .collect();
    assert_eq!(
        outputs[0],
        (
            false,
            "invalid arguments for `calc__add`: `a`: expected an integer, got a string"
        )
    );
    assert_eq!(outputs[1], (true, "5"));
    assert_eq!(outputs[2], (false, "the calculator is out of paper"));
    assert!(!outputs[3].0);
    assert!(
        outputs[3].1.contains("did not answer `slow` within 2 s"),
        "{}",
        outputs[3].1
    );
    assert_eq!(record.replies, ["2 + 3 = 5"]);
    // add (once: the mistyped call was stopped here), refuse, slow.
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    let results = tool_results(&server);
    assert!(results.iter().any(|r| r.contains('5')), "{results:?}");
    assert!(
        results.iter().any(|r| r.contains("out of paper")),
        "{results:?}"
    );
}

#[memgpt_test_harness::test]
async fn attaching_fails_clearly() {
    let missing = McpServerConfig::stdio("ghost", "/nonexistent/mcp-server", Vec::<String>::new())
        .connect()
        .await
        .unwrap_err();
    assert!(
        missing
            .to_string()
            .starts_with("could not start the MCP server `ghost`"),
        "{missing}"
    );
    let refused = McpServerConfig::http("gone", "http://127.0.0.1:9/mcp")
        .timeout(Duration::from_secs(5))
        .connect()
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("`gone`"), "{refused}");
    let (url, _) = calculator().await;
    let bad_name = McpServerConfig::http("no spaces", url)
        .connect()
        .await
        .unwrap_err();
    assert!(
        bad_name.to_string().contains("invalid MCP server name"),
        "{bad_name}"
    );
}

/// `memgpt mcp` for the agent `notes` in `dir`, its model the fake server (never called).
fn memgpt_mcp(dir: &std::path::Path, llm: &FakeOpenAi) -> McpServerConfig {
    let mut config = McpServerConfig::stdio(
        "memory",
        env!("CARGO_BIN_EXE_memgpt"),
        ["mcp", "--agent", "notes"],
    );
    if let McpTransport::Stdio { env, .. } = &mut config.transport {
        for (key, value) in [
            ("MEMGPT_DATA_DIR", dir.join("data").display().to_string()),
            ("MEMGPT_HOME", dir.join("home").display().to_string()),
            ("MEMGPT_BASE_URL", llm.base_url()),
            ("MEMGPT_MODEL", "gpt-4o-mini".to_owned()),
            ("MEMGPT_EMBEDDER", "none".to_owned()),
        ] {
            env.insert(key.to_owned(), value);
        }
    }
    config.timeout(Duration::from_secs(60))
}

/// The `memgpt` binary with the environment of [`memgpt_mcp`], run to completion.
async fn memgpt_cli(
    dir: &std::path::Path,
    llm: &FakeOpenAi,
    args: &[&str],
    stdin: &str,
) -> std::process::Output {
    use std::io::Write;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_memgpt"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("MEMGPT_DATA_DIR", dir.join("data"))
        .env("MEMGPT_HOME", dir.join("home"))
        .env("MEMGPT_BASE_URL", llm.base_url())
        .env("MEMGPT_MODEL", "gpt-4o-mini")
        .env("MEMGPT_EMBEDDER", "none")
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the memgpt binary");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap()
}

async fn call(
    client: &memgpt::mcp::client::McpClient,
    tool: &str,
    arguments: Value,
) -> (bool, String) {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object")
    };
    let result = client.call(tool, arguments).await.unwrap();
    (result.ok, result.text)
}

#[memgpt_test_harness::test]
async fn memgpt_mcp_serves_an_agents_memory_to_an_mcp_client() {
    let dir = tempfile::tempdir().unwrap();
    let llm = FakeOpenAi::start().await;
    // `memgpt mcp` serves agents that exist: a typo is an error, and creates nothing.
    let typo = memgpt_cli(dir.path(), &llm, &["mcp", "--agent", "nots"], "").await;
    let stderr = String::from_utf8_lossy(&typo.stderr);
    assert!(
        !typo.status.success() && stderr.contains("no agent named `nots`"),
        "{stderr}"
    );
    let listed = memgpt_cli(dir.path(), &llm, &["agents", "list"], "").await;
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains("no agents"),
        "{listed:?}"
    );
    // `memgpt chat` creates on first use (end of input right away: no step).
    let created = memgpt_cli(dir.path(), &llm, &["chat", "--agent", "notes"], "").await;
    assert!(created.status.success(), "{created:?}");
    let client = memgpt_mcp(dir.path(), &llm).connect().await.unwrap();
    let tools: Vec<&str> = client
        .server_tools()
        .iter()
        .map(|t| t.name.as_ref())
        .collect();
    assert_eq!(
        tools,
        [
            "core_memory_read",
            "core_memory_append",
            "core_memory_replace",
            "archival_memory_insert",
            "archival_memory_search",
            "conversation_search",
            "conversation_search_date",
        ]
    );
    // The schemas are the agent's own, without the heartbeat flag.
    let append = &client.server_tools()[1];
    assert!(
        append.input_schema["properties"]
            .get("request_heartbeat")
            .is_none()
    );
    assert!(append.input_schema["properties"].get("label").is_some());

    let (ok, text) = call(
        &client,
        "core_memory_append",
        json!({"label": "human", "content": "Likes sailing."}),
    )
    .await;
    assert!(ok, "{text}");
    let (ok, text) = call(
        &client,
        "archival_memory_insert",
        json!({"content": "The boat is called Ada."}),
    )
    .await;
    assert!(ok, "{text}");
    let (ok, text) = call(
        &client,
        "archival_memory_search",
        json!({"query": "boat name"}),
    )
    .await;
    assert!(ok && text.contains("The boat is called Ada."), "{text}");
    // Limits hold exactly as for the model: the error is the one it would read.
    let (ok, text) = call(
        &client,
        "core_memory_append",
        json!({"label": "human", "content": "x".repeat(10_000)}),
    )
    .await;
    assert!(!ok && text.contains("limit"), "{text}");
    // Optional fields have one type (form-based clients cannot render a list of types), and
    // numbers sent as strings, as the MCP Inspector sends them, are read as numbers.
    let search = client
        .server_tools()
        .iter()
        .find(|t| t.name == "conversation_search")
        .unwrap();
    assert_eq!(search.input_schema["properties"]["page"]["type"], "integer");
    let (ok, text) = call(
        &client,
        "conversation_search",
        json!({"query": "sailing", "page": "0"}),
    )
    .await;
    assert!(ok, "{text}");
    // An unknown field is named with the fields this server offers (no heartbeat flag).
    let (ok, text) = call(
        &client,
        "archival_memory_search",
        json!({"query": "boat", "colour": "red"}),
    )
    .await;
    assert!(
        !ok && text.contains("unknown field `colour`") && !text.contains("request_heartbeat"),
        "{text}"
    );
    let (ok, text) = call(&client, "core_memory_append", json!({"label": 7})).await;
    assert!(
        !ok && text.contains("invalid arguments for `core_memory_append`"),
        "{text}"
    );
    client.close().await;

    // Committed: a new session (a new process) reads what the first one wrote.
    let client = memgpt_mcp(dir.path(), &llm).connect().await.unwrap();
    let (ok, blocks) = call(&client, "core_memory_read", json!({})).await;
    assert!(ok, "{blocks}");
    assert!(
        blocks.contains("[human]") && blocks.contains("Likes sailing."),
        "{blocks}"
    );
    assert!(!blocks.contains("xxxxxxxxxx"), "{blocks}");
    client.close().await;
    assert!(
        llm.agent_requests().is_empty(),
        "memgpt mcp never calls the model"
    );
}
