//! Crash safety: a child process runs agent steps against the store and is killed with SIGKILL
//! at a random moment; after reopening, nothing it reported committed is lost and nothing
//! half-written is visible.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use memgpt_backends::StoreConfig;
use memgpt_core::embed::HashingEmbedder;
use memgpt_core::ids::AgentId;
use memgpt_core::llm::{ChatRequest, ChatResponse, FinishReason, LlmError, LlmProvider, Usage};
use memgpt_core::message::ToolCall;
use memgpt_core::store::{ArchivalQuery, Page, RecallQuery, SearchMode, Storage};
use memgpt_core::{Agent, StopReason};

const URL_VAR: &str = "MEMGPT_CRASH_CHILD_URL";
const AGENT_VAR: &str = "MEMGPT_CRASH_CHILD_AGENT";

/// Each step: the event, an archival insert with a heartbeat, the heartbeat, a reply.
const MESSAGES_PER_STEP: u64 = 6;

/// A model that always does the same two-call step: store a fact, then say so.
#[derive(Debug)]
struct Looping;

#[async_trait]
impl LlmProvider for Looping {
    fn model(&self) -> &str {
        "looping"
    }

    fn context_window(&self) -> Option<usize> {
        Some(1_000_000)
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let last = request
            .messages
            .last()
            .map(|m| m.content.as_str())
            .unwrap_or_default();
        let call = if last.contains("\"type\":\"heartbeat\"") {
            ToolCall {
                id: "c2".into(),
                name: "send_message".into(),
                arguments: r#"{"message":"stored"}"#.into(),
            }
        } else {
            let token = last
                .split("token ")
                .nth(1)
                .and_then(|t| t.split('"').next())
                .unwrap_or("none");
            let arguments = serde_json::json!({ "content": format!("fact number {token}"), "request_heartbeat": true });
            ToolCall {
                id: "c1".into(),
                name: "archival_memory_insert".into(),
                arguments: arguments.to_string(),
            }
        };
        Ok(ChatResponse {
            content: String::new(),
            tool_calls: vec![call],
            usage: Usage::default(),
            finish_reason: FinishReason::ToolCalls,
            model: "looping".into(),
        })
    }
}

async fn agent_on(storage: Storage, id: Option<AgentId>) -> Agent {
    let builder = Agent::builder()
        .provider(Arc::new(Looping))
        .storage(storage)
        .embedder(Arc::new(HashingEmbedder::new(64)));
    match id {
        Some(id) => builder.load(id).await.expect("load agent"),
        None => builder.build().await.expect("build agent"),
    }
}

fn token(version: u64) -> String {
    format!("tok{version}")
}

/// Runs in the child process: steps the agent forever, reporting each commit.
pub fn child_main() {
    let (Ok(url), Ok(agent)) = (std::env::var(URL_VAR), std::env::var(AGENT_VAR)) else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let storage = url
            .parse::<StoreConfig>()
            .expect("store URL")
            .open()
            .await
            .expect("open store");
        let mut agent = agent_on(storage, Some(agent.parse().expect("agent id"))).await;
        loop {
            let next = agent.version() + 1;
            let record = agent
                .step(format!("step token {}", token(next)))
                .await
                .expect("step");
            assert_eq!(record.stop_reason, StopReason::EndTurn);
            println!("COMMITTED {}", agent.version());
            use std::io::Write;
            let _ = std::io::stdout().flush();
        }
    });
}

/// A small pseudo-random number from the clock (no dependency needed for jitter).
fn jitter(below: u64) -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0) as u64;
    (nanos
        .wrapping_mul(6_364_136_223_846_793_005)
        .rotate_left(17))
        % below.max(1)
}

/// Spawns the child, lets it commit a few steps, SIGKILLs it; returns the last version it
/// reported.
fn run_and_kill(url: &str, agent: AgentId) -> u64 {
    let exe = std::env::current_exe().expect("test binary");
    let mut child = Command::new(exe)
        .args([
            "crash_child_entry",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(URL_VAR, url)
        .env(AGENT_VAR, agent.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn child");
    // The reader stays alive until the kill: a closed pipe would make the child fail on its
    // next print, at a step boundary instead of inside a step.
    let mut reader = BufReader::new(child.stdout.take().expect("child stdout"));
    let wanted = 2 + jitter(5);
    let mut last = 0;
    let mut seen = 0;
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        if let Some(version) = line.strip_prefix("COMMITTED ") {
            last = version.trim().parse().expect("version");
            seen += 1;
            if seen >= wanted {
                break;
            }
        }
    }
    assert!(
        seen >= wanted,
        "the child stopped early after {seen} commits"
    );
    // Kill somewhere inside the next step (they take a few milliseconds).
    std::thread::sleep(Duration::from_micros(jitter(4_000)));
    child.kill().expect("SIGKILL");
    let status = child.wait().expect("wait");
    drop(reader);
    assert!(!status.success());
    last
}

pub async fn run(name: &str, url: &str) {
    let agent = {
        let storage = url
            .parse::<StoreConfig>()
            .expect("store URL")
            .open()
            .await
            .expect("open store");
        agent_on(storage, None).await.id()
    };
    for round in 0..3 {
        let reported = tokio::task::spawn_blocking({
            let url = url.to_owned();
            move || run_and_kill(&url, agent)
        })
        .await
        .expect("child run");

        let storage = url
            .parse::<StoreConfig>()
            .expect("store URL")
            .open()
            .await
            .expect("reopen store");
        let version = storage
            .agents
            .agent_version(agent)
            .await
            .unwrap()
            .expect("agent exists");
        assert!(
            version >= reported,
            "{name} round {round}: reported {reported} committed, store has {version}"
        );
        // Whole steps only: every committed step's messages and passage, nothing of a partial one.
        assert_eq!(
            storage.recall.count_messages(agent).await.unwrap(),
            MESSAGES_PER_STEP * version,
            "{name} round {round}"
        );
        assert_eq!(
            storage.archival.count_passages(agent).await.unwrap(),
            version,
            "{name} round {round}"
        );
        let state = storage.agents.load_agent(agent).await.unwrap().unwrap();
        let queued = storage
            .recall
            .get_messages(agent, &state.fifo)
            .await
            .unwrap();
        assert_eq!(
            queued.len(),
            state.fifo.len(),
            "{name}: every queued message is in recall storage"
        );
        // The derived indexes caught up with the last commit.
        let last = token(version);
        let found = storage
            .recall
            .search(agent, &RecallQuery::text(&last, Page::first(5)))
            .await
            .unwrap();
        // The event, the call that stored the fact, and the reply after them (whose search
        // document holds the turns before it).
        assert_eq!(
            found.total, 3,
            "{name} round {round}: the last step's messages are searchable ({last})"
        );
        assert!(
            found
                .hits
                .iter()
                .any(|h| h.item.text == format!("step token {last}")),
            "{name} round {round}: the event is found"
        );
        let embedder = HashingEmbedder::new(64);
        let query = ArchivalQuery {
            text: format!("fact number {last}"),
            embedding: Some(memgpt_core::embed::Embedding {
                model: "memgpt-hashing-v1-64".into(),
                vector: embedder.vector(&format!("fact number {last}")),
            }),
            mode: SearchMode::Vector,
            page: Page::first(3),
            tags: Vec::new(),
            range: Default::default(),
        };
        let hits = storage.archival.search(agent, &query).await.unwrap();
        assert!(
            hits.hits.iter().any(|h| h.item.text.contains(&last)),
            "{name} round {round}: the last passage is findable"
        );
        // And the agent loads and runs again from there.
        let mut resumed = agent_on(storage, Some(agent)).await;
        let record = resumed
            .step(format!("step token {}", token(version + 1)))
            .await
            .unwrap();
        assert_eq!(record.stop_reason, StopReason::EndTurn);
    }
}
