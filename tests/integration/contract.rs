//! The API's contract as outside tools read it, against a real `memgpt serve` process (SQLite,
//! the fake OpenAI server as its model): `openapi-spec-validator` and schemathesis (every
//! check, the stateful phase included) on the served document, and the generated clients of
//! `clients/` (Python and TypeScript) through a whole session.
//!
//! The tools come from `.ci/python-api.sh` (a virtualenv: `MEMGPT_TEST_API_TOOLS` is its bin
//! folder) and `clients/typescript` (npm). Without them the tests are reported ignored; under
//! `CI=true` they fail instead.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

use crate::fake_openai::{FakeOpenAi, Reply, is_agent_request};

const ADMIN: &str = "contract-admin-key-0123456789";

/// An HTTP client (with the TLS provider the workspace uses).
fn http() -> reqwest::Client {
    memgpt::http::client(&Default::default()).unwrap()
}

/// The tools' bin folder; without it the test is reported ignored (a failure under `CI=true`).
fn tools() -> Option<PathBuf> {
    match std::env::var("MEMGPT_TEST_API_TOOLS") {
        Ok(dir) => Some(PathBuf::from(dir)),
        Err(_) => memgpt_test_harness::skip(
            "needs the API contract tools: set MEMGPT_TEST_API_TOOLS to what .ci/python-api.sh prints",
        ),
    }
}

/// A `memgpt serve` process on a fresh SQLite directory, its model a fake OpenAI server that
/// always answers with `send_message`.
struct Served {
    base: String,
    _llm: FakeOpenAi,
    _child: tokio::process::Child,
    _dir: tempfile::TempDir,
}

impl Served {
    async fn start() -> Self {
        let llm = FakeOpenAi::start().await;
        // "please fail" makes the model fail (a permanent error: no retries), and so does the
        // first request holding "flaky-probe".
        let flaked = std::sync::atomic::AtomicBool::new(false);
        llm.respond_with(move |body| {
            // What the newest user message asks (earlier ones are history).
            let text = body["messages"]
                .as_array()
                .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
                .map(|m| m["content"].to_string())
                .unwrap_or_default();
            let flaky = text.contains("flaky-probe")
                && !flaked.swap(true, std::sync::atomic::Ordering::SeqCst);
            if text.contains("please fail") || flaky {
                Reply::status(400, "the model refuses")
            } else if is_agent_request(body) {
                Reply::call("send_message", json!({"message": "Noted."}))
            } else {
                Reply::text("A summary of the conversation.")
            }
        });
        llm.summarize_with(|_| Reply::text("A summary of the conversation."));
        llm.set_recording(false);
        let dir = tempfile::tempdir().unwrap();
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_memgpt"))
            .args(["serve", "--listen", "127.0.0.1:0"])
            .current_dir(dir.path())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("MEMGPT_DATA_DIR", dir.path().join("data"))
            .env("MEMGPT_BASE_URL", llm.base_url())
            .env("MEMGPT_MODEL", "gpt-4o-mini")
            .env("MEMGPT_EMBEDDER", "none")
            .env("MEMGPT_HOME", dir.path())
            .env("MEMGPT_ADMIN_KEY", ADMIN)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the memgpt binary");
        let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let address = loop {
            let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
                .await
                .expect("memgpt serve starts within a minute")
                .unwrap()
                .expect("memgpt serve says where it listens");
            if let Some(rest) = line.split(" on http://").nth(1) {
                break rest.split(' ').next().unwrap().to_owned();
            }
        };
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Self {
            base: format!("http://{address}"),
            _llm: llm,
            _child: child,
            _dir: dir,
        }
    }

    /// A new tenant's API key.
    async fn tenant_key(&self, name: &str) -> String {
        let http = http();
        let tenant: Value = http
            .post(format!("{}/v1/admin/tenants", self.base))
            .bearer_auth(ADMIN)
            .json(&json!({"name": name}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let key: Value = http
            .post(format!(
                "{}/v1/admin/tenants/{}/keys",
                self.base,
                tenant["id"].as_str().unwrap()
            ))
            .bearer_auth(ADMIN)
            .json(&json!({"name": "contract"}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        key["key"].as_str().unwrap().to_owned()
    }
}

/// Runs `program args` to its end; panics with its output if it fails.
async fn run_tool(
    program: &Path,
    args: &[&str],
    cwd: Option<&Path>,
    env: &[(&str, &str)],
) -> String {
    let mut command = tokio::process::Command::new(program);
    command.args(args).kill_on_drop(true);
    if let Some(cwd) = cwd {
        command.current_dir(cwd);
    }
    for (key, value) in env {
        command.env(key, value);
    }
    let output = tokio::time::timeout(Duration::from_secs(900), command.output())
        .await
        .unwrap_or_else(|_| panic!("{} took more than 15 minutes", program.display()))
        .unwrap_or_else(|e| panic!("{}: {e}", program.display()));
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "{} {args:?} failed:\n{text}",
        program.display()
    );
    text
}

#[memgpt_test_harness::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_served_document_is_valid_and_schemathesis_finds_no_failure() {
    let Some(tools) = tools() else { return };
    let served = Served::start().await;
    let document = format!("{}/openapi.json", served.base);
    let text = http()
        .get(&document)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let file = served._dir.path().join("openapi.json");
    std::fs::write(&file, text).unwrap();
    run_tool(
        &tools.join("openapi-spec-validator"),
        &[file.to_str().unwrap()],
        None,
        &[],
    )
    .await;
    let key = served.tenant_key("schemathesis").await;
    let examples = std::env::var("MEMGPT_SCHEMATHESIS_EXAMPLES").unwrap_or_else(|_| "50".into());
    let config = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/contract/schemathesis.toml")
        .display()
        .to_string();
    let report = run_tool(
        &tools.join("schemathesis"),
        &[
            "--config-file",
            &config,
            "run",
            &document,
            "--phases",
            "examples,coverage,fuzzing,stateful",
            "--max-examples",
            &examples,
            "--header",
            &format!("Authorization: Bearer {key}"),
            "--request-timeout",
            "30",
            "--no-color",
            "--seed",
            "42",
        ],
        None,
        &[],
    )
    .await;
    eprintln!("{report}");
    // The admin routes, with the admin key.
    let report = run_tool(
        &tools.join("schemathesis"),
        &[
            "--config-file",
            &config,
            "run",
            &document,
            "--include-path-regex",
            "^/v1/admin/",
            "--phases",
            "examples,coverage,fuzzing,stateful",
            "--max-examples",
            &examples,
            "--header",
            &format!("Authorization: Bearer {ADMIN}"),
            "--request-timeout",
            "30",
            "--no-color",
            "--seed",
            "42",
        ],
        None,
        &[],
    )
    .await;
    eprintln!("{report}");
}

/// The checked-in clients were generated from the document the server serves now.
#[memgpt_test_harness::test]
fn the_checked_in_document_is_the_servers() {
    let checked_in: Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/openapi.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert!(
        checked_in == memgpt::server::openapi(),
        "clients/openapi.json is not the server's document: run clients/generate.sh"
    );
}

#[memgpt_test_harness::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_generated_python_client_runs_a_whole_session() {
    let Some(tools) = tools() else { return };
    let served = Served::start().await;
    let clients = Path::new(env!("CARGO_MANIFEST_DIR")).join("clients");
    let out = run_tool(
        &tools.join("python"),
        &[clients.join("smoke/python_smoke.py").to_str().unwrap()],
        None,
        &[
            ("PYTHONPATH", clients.join("python").to_str().unwrap()),
            ("MEMGPT_URL", &served.base),
            ("MEMGPT_ADMIN_KEY", ADMIN),
        ],
    )
    .await;
    assert!(out.contains("python client: ok"), "{out}");
}

/// hypothesis's stateful testing drives a `memgpt serve` process through the generated Python
/// client (clients/smoke/stateful.py): random sequences of agents, passages, messages and shared
/// blocks created, changed and deleted, and the server stopped by SIGTERM or SIGKILL and started
/// again; every search, listing and block read agrees with a plain model of what was stored.
#[memgpt_test_harness::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_agrees_with_a_model_through_random_sequences_and_restarts() {
    let Some(tools) = tools() else { return };
    let llm = FakeOpenAi::start().await;
    llm.respond_with(|body| {
        if is_agent_request(body) {
            Reply::call("send_message", json!({"message": "Noted."}))
        } else {
            Reply::text("A summary of the conversation.")
        }
    });
    llm.summarize_with(|_| Reply::text("A summary of the conversation."));
    llm.set_recording(false);
    let dir = tempfile::tempdir().unwrap();
    let clients = Path::new(env!("CARGO_MANIFEST_DIR")).join("clients");
    let data = dir.path().join("data");
    let examples = std::env::var("MEMGPT_STATEFUL_EXAMPLES").unwrap_or_else(|_| "12".into());
    let out = run_tool(
        &tools.join("python"),
        &[clients.join("smoke/stateful.py").to_str().unwrap()],
        None,
        &[
            ("PYTHONPATH", clients.join("python").to_str().unwrap()),
            ("MEMGPT_BIN", env!("CARGO_BIN_EXE_memgpt")),
            ("MEMGPT_LLM", &llm.base_url()),
            ("MEMGPT_DATA", data.to_str().unwrap()),
            ("MEMGPT_ADMIN_KEY", ADMIN),
            ("MEMGPT_STATEFUL_EXAMPLES", &examples),
        ],
    )
    .await;
    assert!(out.contains("stateful: ok"), "{out}");
    eprintln!("{}", out.trim());
}

#[memgpt_test_harness::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typescript_client_runs_a_whole_session() {
    let package = Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/typescript");
    if !package.join("node_modules").exists() {
        memgpt_test_harness::skip(
            "needs the TypeScript client's packages: run `npm ci` in clients/typescript",
        );
    }
    let served = Served::start().await;
    let npx = Path::new("npx");
    // Type-checks the client and the session against the generated types, then runs it.
    run_tool(npx, &["tsc"], Some(&package), &[]).await;
    let out = run_tool(
        Path::new("node"),
        &["dist/smoke.js"],
        Some(&package),
        &[("MEMGPT_URL", &served.base), ("MEMGPT_ADMIN_KEY", ADMIN)],
    )
    .await;
    assert!(out.contains("typescript client: ok"), "{out}");
}

#[memgpt_test_harness::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_openai_sdk_reads_replies_usage_and_failures() {
    let Some(tools) = tools() else { return };
    let served = Served::start().await;
    let key = served.tenant_key("openai").await;
    let created = http()
        .post(format!("{}/v1/agents", served.base))
        .bearer_auth(&key)
        .json(&json!({"name": "sam"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/smoke/openai_smoke.py");
    let out = run_tool(
        &tools.join("python"),
        &[script.to_str().unwrap()],
        None,
        &[("MEMGPT_URL", &served.base), ("MEMGPT_KEY", &key)],
    )
    .await;
    assert!(out.contains("openai sdk: ok"), "{out}");
}
