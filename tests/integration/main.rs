//! Cross-crate integration tests: real agents, the real OpenAI-compatible provider over real
//! HTTP, and a fake LLM server on 127.0.0.1 speaking OpenAI's wire protocol (and, with the
//! `anthropic` feature, a fake Anthropic Messages API server).
//!
//! One test binary (not one per file) keeps the build small.

#[cfg(feature = "anthropic")]
#[path = "../support/fake_anthropic.rs"]
mod fake_anthropic;
#[path = "../support/fake_openai.rs"]
mod fake_openai;
#[path = "../support/fault_server.rs"]
mod fault_server;

mod agent_file;
mod agent_loop;
#[cfg(feature = "anthropic")]
mod anthropic;
#[cfg(feature = "cli")]
mod cli;
#[cfg(feature = "server")]
mod contract;
mod custom_tools;
mod faults;
#[cfg(feature = "server")]
mod inspector;
mod layering;
mod letta_tools;
#[cfg(feature = "local-embed")]
mod local;
#[cfg(feature = "mcp")]
mod mcp;
#[cfg(feature = "models")]
mod models;
mod prompt_cache;
mod providers;
mod registries;
#[cfg(feature = "server")]
mod server;
mod streaming;
#[cfg(feature = "otel")]
mod telemetry;

use std::sync::Arc;
use std::time::Duration;

/// The harness lists every test, and reports those that cannot run here as ignored.
fn main() {
    memgpt_test_harness::main()
}

use fake_openai::FakeOpenAi;
use memgpt::http::RetryPolicy;
use memgpt::openai::{OpenAiConfig, OpenAiProvider};

/// Retries fast enough for tests.
fn quick_retry() -> RetryPolicy {
    RetryPolicy {
        max_retries: 3,
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(40),
        max_retry_after: Duration::from_secs(2),
    }
}

fn config(server: &FakeOpenAi) -> OpenAiConfig {
    OpenAiConfig::new(server.base_url(), "gpt-4o-mini")
        .with_api_key("sk-test")
        .with_retry(quick_retry())
}

fn provider(server: &FakeOpenAi) -> Arc<OpenAiProvider> {
    Arc::new(OpenAiProvider::new(config(server)).expect("provider"))
}

/// An agent with every default, talking to `server`.
async fn agent(server: &FakeOpenAi) -> memgpt::Agent {
    memgpt::Agent::builder()
        .provider(provider(server))
        .build()
        .await
        .expect("agent")
}

/// The Python interpreter and the folder holding the MCP SDK (`.ci/python-mcp.sh`); without
/// them the test is reported ignored (under `CI=true` it fails instead).
pub(crate) fn fastmcp_python() -> Option<(String, String)> {
    let Ok(path) = std::env::var("MEMGPT_TEST_MCP_PYTHONPATH") else {
        memgpt_test_harness::skip(
            "needs the MCP SDK for Python: set MEMGPT_TEST_MCP_PYTHONPATH to what .ci/python-mcp.sh prints",
        );
    };
    let output = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3");
    let python = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    Some((python, path))
}
