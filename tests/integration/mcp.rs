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

/// `memgpt mcp` for the agent `notes` in `dir`, configured as the README configures Claude
/// Desktop: the data directory (and here the model cache) only, no endpoint, no key, no model
/// (`env -i`: nothing else is inherited either). None of its tools needs an LLM.
fn memgpt_mcp(dir: &std::path::Path) -> McpServerConfig {
    let env = |key: &str, value: &std::path::Path| format!("{key}={}", value.display());
    McpServerConfig::stdio(
        "memory",
        "env",
        [
            "-i".to_owned(),
            env("MEMGPT_DATA_DIR", &dir.join("data")),
            env("MEMGPT_HOME", &dir.join("home")),
            env!("CARGO_BIN_EXE_memgpt").to_owned(),
            "mcp".to_owned(),
            "--agent".to_owned(),
            "notes".to_owned(),
        ],
    )
    .timeout(Duration::from_secs(60))
}

/// The `memgpt` binary with the data directory of [`memgpt_mcp`] and `llm` as its model, run
/// to completion.
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
    let client = memgpt_mcp(dir.path()).connect().await.unwrap();
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
    let client = memgpt_mcp(dir.path()).connect().await.unwrap();
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

/// The FastMCP calculator (`tests/support/fastmcp_calc.py`, official Python SDK) over stdio.
fn fastmcp_stdio(python: &str, pythonpath: &str) -> McpServerConfig {
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/fastmcp_calc.py");
    let mut config = McpServerConfig::stdio("calc", python, [script.display().to_string()]);
    if let McpTransport::Stdio { env, .. } = &mut config.transport {
        env.insert("PYTHONPATH".into(), pythonpath.to_owned());
    }
    config.timeout(Duration::from_secs(30))
}

/// The FastMCP calculator over streamable HTTP on `port`, as a process of its own.
fn fastmcp_http(python: &str, pythonpath: &str, port: u16) -> tokio::process::Child {
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/fastmcp_calc.py");
    tokio::process::Command::new(python)
        .arg(&script)
        .args(["http", &port.to_string()])
        .env("PYTHONPATH", pythonpath)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("python3")
}

async fn wait_for_port(port: u16) {
    for _ in 0..300 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("nothing listens on 127.0.0.1:{port}");
}

async fn try_call(
    client: &memgpt::mcp::client::McpClient,
    tool: &str,
    arguments: Value,
) -> Result<(bool, String), String> {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object")
    };
    client
        .call(tool, arguments)
        .await
        .map(|r| (r.ok, r.text))
        .map_err(|e| e.to_string())
}

/// A stdio server that exits is started again on the next call: the call it died in fails
/// (saying so), and every later call works.
#[memgpt_test_harness::test]
async fn a_stdio_server_that_exits_is_restarted_on_the_next_call() {
    use memgpt::mcp::client::ServerHealth;
    let Some((python, pythonpath)) = crate::fastmcp_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("exited").display().to_string();
    let client = fastmcp_stdio(&python, &pythonpath).connect().await.unwrap();
    assert_eq!(client.health(), ServerHealth::Up);
    let died = try_call(&client, "exit_once", json!({ "marker": marker }))
        .await
        .unwrap_err();
    assert!(
        died.contains("`calc` stopped while running `exit_once`")
            && died.contains("restarted on the next call"),
        "{died}"
    );
    assert!(std::path::Path::new(&marker).exists());
    assert_ne!(client.health(), ServerHealth::Up);
    // A new process answers, again and again.
    for (a, b) in [(2, 3), (20, 22)] {
        let (ok, text) = try_call(&client, "add", json!({ "a": a, "b": b }))
            .await
            .unwrap();
        assert!(ok && text == (a + b).to_string(), "{text}");
    }
    assert_eq!(client.health(), ServerHealth::Up);
    let (ok, text) = try_call(&client, "exit_once", json!({ "marker": marker }))
        .await
        .unwrap();
    assert!(ok && text == "still running", "{text}");
    client.close().await;
}

/// A server whose command is gone by the time it must restart is down, with the reason, and
/// tried again after a backoff instead of on every call.
#[memgpt_test_harness::test]
async fn a_server_that_cannot_restart_is_down_and_retried_with_backoff() {
    use memgpt::mcp::client::ServerHealth;
    let Some((python, pythonpath)) = crate::fastmcp_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // The server runs through a link that is removed once it is up: a restart cannot start it.
    let link = dir.path().join("python3");
    std::os::unix::fs::symlink(&python, &link).unwrap();
    let marker = dir.path().join("exited").display().to_string();
    let client = fastmcp_stdio(link.to_str().unwrap(), &pythonpath)
        .connect()
        .await
        .unwrap();
    std::fs::remove_file(&link).unwrap();
    try_call(&client, "exit_once", json!({ "marker": marker }))
        .await
        .unwrap_err();
    let down = try_call(&client, "add", json!({"a": 1, "b": 1}))
        .await
        .unwrap_err();
    assert!(
        down.contains("`calc` is down (could not start")
            && down.contains("tries to restart it again in 1 s"),
        "{down}"
    );
    // Within the backoff, calls fail at once with the same reason (no new process).
    let again = try_call(&client, "add", json!({"a": 1, "b": 1}))
        .await
        .unwrap_err();
    assert!(again.contains("is down (could not start"), "{again}");
    assert!(
        matches!(client.health(), ServerHealth::Down { .. }),
        "{:?}",
        client.health()
    );
    // Once the command is back and the backoff is over, the next call starts it.
    std::os::unix::fs::symlink(&python, &link).unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (ok, text) = try_call(&client, "add", json!({"a": 1, "b": 1}))
        .await
        .unwrap();
    assert!(ok && text == "2", "{text}");
    assert_eq!(client.health(), ServerHealth::Up);
}

/// An HTTP server that goes away and comes back is reconnected: calls fail while it is gone
/// (naming it), and work again once it is back, with no new client.
#[memgpt_test_harness::test]
async fn an_http_server_that_goes_away_is_reconnected_when_it_is_back() {
    let Some((python, pythonpath)) = crate::fastmcp_python() else {
        return;
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut server = fastmcp_http(&python, &pythonpath, port);
    wait_for_port(port).await;
    let client = McpServerConfig::http("calc", format!("http://127.0.0.1:{port}/mcp"))
        .timeout(Duration::from_secs(10))
        .connect()
        .await
        .unwrap();
    let (ok, text) = try_call(&client, "add", json!({"a": 2, "b": 3}))
        .await
        .unwrap();
    assert!(ok && text == "5", "{text}");
    server.kill().await.unwrap();
    let gone = try_call(&client, "add", json!({"a": 2, "b": 3})).await;
    assert!(
        gone.as_ref().is_err_and(|e| e.contains("`calc`")),
        "{gone:?}"
    );
    let _server = fastmcp_http(&python, &pythonpath, port);
    wait_for_port(port).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let back = loop {
        match try_call(&client, "add", json!({"a": 20, "b": 22})).await {
            Ok(result) => break result,
            Err(e) => {
                assert!(tokio::time::Instant::now() < deadline, "never back: {e}");
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
    };
    assert_eq!(back, (true, "42".to_owned()));
}
