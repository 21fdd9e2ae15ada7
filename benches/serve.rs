//! `memgpt serve` under load: steps per second and latency through the HTTP API, the LLM an
//! in-process model that answers at once (every step: one LLM call, `send_message`, commit).
//!
//! The servers are child processes (this program again); the parent is the client. It creates
//! 100 agents spread over the servers, then sends each agent 20 messages one after another,
//! with `--concurrency` requests in flight at a time. With several servers (PostgreSQL), an
//! agent's requests alternate between them (any process can serve any agent; each then first
//! catches up with the other's commits), or with `--sticky` always go to the same one.
//!
//! ```text
//! cargo bench --bench serve --features server -- sqlite
//! cargo bench --bench serve --features server -- sqlite --store "sqlite://DIR?recall=tantivy&vectors=usearch"
//! MEMGPT_TEST_POSTGRES_URL=postgres://... cargo bench --bench serve --features server,postgres -- postgres --servers 2
//! ```
//!
//! Options: `--agents N` (100), `--messages N` (20 per agent), `--concurrency N` (8),
//! `--servers N` (1; PostgreSQL only for more), `--sticky`, `--store URL`.
//!
//! `--fleet` measures many agents instead (issue 37): it creates `--agents` agents (spread
//! over the servers, each then always sent to its server), gives each one step, lets them
//! idle, then sends `--messages` steps in all to agents picked across the whole fleet. It
//! reports create and step latencies, the agents each server holds loaded (`/metrics`), and the
//! servers' resident memory (`VmRSS`) before the agents, after them and per idle agent.
//! `--live N` caps the agents a server keeps loaded (the server's `live_agents`, 10,000 by
//! default), so the last pass also measures unloading and loading again.
//!
//! ```text
//! cargo bench --bench serve --features server -- sqlite --fleet --agents 10000 --messages 5000
//! cargo bench --bench serve --features server -- sqlite --fleet --agents 10000 --messages 5000 --live 1000
//! MEMGPT_TEST_POSTGRES_URL=postgres://... cargo bench --bench serve --features server,postgres -- postgres --fleet --servers 2 --agents 10000 --messages 5000
//! ```

#[path = "support/fleet.rs"]
mod fleet;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use memgpt::llm::{
    ChatRequest, ChatResponse, FinishReason, LlmError, LlmProvider, ToolCall, Usage,
};
use memgpt::server::{Server, ServerConfig};
use serde_json::{Value, json};

const ADMIN: &str = "bench-admin-key";

/// A model that answers every request at once with `send_message`.
#[derive(Debug)]
struct InstantModel;

#[async_trait]
impl LlmProvider for InstantModel {
    fn model(&self) -> &str {
        "instant"
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let prompt: usize = request.messages.iter().map(|m| m.content.len() / 4).sum();
        Ok(ChatResponse {
            content: "Replying.".into(),
            tool_calls: vec![ToolCall {
                id: "call_0".into(),
                name: "send_message".into(),
                arguments: json!({"message": "ok"}).to_string(),
            }],
            usage: Usage {
                prompt_tokens: prompt as u64,
                completion_tokens: 12,
                cached_prompt_tokens: 0,
            },
            finish_reason: FinishReason::ToolCalls,
            model: "instant".into(),
        })
    }
}

/// Child mode: serve `url` on an ephemeral port, print it, stop when stdin closes.
fn serve_child(url: &str) -> ! {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let mut config = ServerConfig {
            admin_key: Some(ADMIN.to_owned()),
            ..ServerConfig::default()
        };
        if let Some(live) = std::env::var("MEMGPT_BENCH_LIVE_AGENTS")
            .ok()
            .and_then(|n| n.parse().ok())
        {
            config.live_agents = live;
        }
        let server = Server::open(url, Arc::new(InstantModel), None, config)
            .await
            .expect("the server opens its store");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        println!("{}", listener.local_addr().expect("an address"));
        std::io::stdout().flush().ok();
        let stop = async {
            let _ = tokio::task::spawn_blocking(|| {
                let mut line = String::new();
                let _ = std::io::stdin().read_line(&mut line);
            })
            .await;
        };
        server.serve(listener, stop).await.expect("serving");
    });
    std::process::exit(0)
}

fn percentile(values: &mut [Duration], p: f64) -> Duration {
    values.sort();
    values[((values.len() - 1) as f64 * p).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e3)
}

struct Options {
    label: String,
    store: String,
    agents: usize,
    messages: usize,
    concurrency: usize,
    servers: usize,
    /// Each agent's requests go to one server (else alternately to all).
    sticky: bool,
    /// Many agents: create, one step each, idle, steps across the fleet.
    fleet: bool,
    /// The agents a server keeps loaded (`None`: its default).
    live: Option<usize>,
}

fn options() -> Options {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let mut o = Options {
        label: "sqlite".into(),
        store: String::new(),
        agents: 100,
        messages: 20,
        concurrency: 8,
        servers: 1,
        sticky: false,
        fleet: false,
        live: None,
    };
    while let Some(arg) = args.next() {
        let mut value = || args.next().unwrap_or_default();
        match arg.as_str() {
            "--store" => o.store = value(),
            "--agents" => o.agents = value().parse().expect("--agents N"),
            "--messages" => o.messages = value().parse().expect("--messages N"),
            "--concurrency" => o.concurrency = value().parse().expect("--concurrency N"),
            "--servers" => o.servers = value().parse().expect("--servers N"),
            "--sticky" => o.sticky = true,
            "--fleet" => o.fleet = true,
            "--live" => o.live = Some(value().parse().expect("--live N")),
            label => o.label = label.to_owned(),
        }
    }
    if o.store.is_empty() {
        o.store = match o.label.as_str() {
            "postgres" => {
                let base = std::env::var("MEMGPT_TEST_POSTGRES_URL")
                    .expect("postgres needs MEMGPT_TEST_POSTGRES_URL");
                let separator = if base.contains('?') { '&' } else { '?' };
                format!(
                    "{base}{separator}schema=memgpt_serve_bench_{}",
                    std::process::id()
                )
            }
            _ => {
                let dir =
                    std::env::temp_dir().join(format!("memgpt-serve-bench-{}", std::process::id()));
                format!("sqlite://{}", dir.display())
            }
        };
    }
    o
}

/// Starts a server child on `url` (keeping at most `live` agents loaded); its address.
fn spawn_server(url: &str, live: Option<usize>) -> (Child, String) {
    let mut command = Command::new(std::env::current_exe().expect("this program"));
    if let Some(live) = live {
        command.env("MEMGPT_BENCH_LIVE_AGENTS", live.to_string());
    }
    let mut child = command
        .env("MEMGPT_BENCH_SERVE", url)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("a server process");
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().expect("its stdout"))
        .read_line(&mut line)
        .expect("its address");
    (child, format!("http://{}", line.trim()))
}

fn main() {
    if let Ok(url) = std::env::var("MEMGPT_BENCH_SERVE") {
        serve_child(&url);
    }
    let o = options();
    let mut children = Vec::new();
    let mut bases = Vec::new();
    for _ in 0..o.servers {
        let (child, base) = spawn_server(&o.store, o.live);
        children.push(child);
        bases.push(base);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    if o.fleet {
        let pids: Vec<u32> = children.iter().map(Child::id).collect();
        runtime.block_on(fleet::run(&o, &bases, &pids));
    } else {
        runtime.block_on(drive(&o, &bases));
    }
    for mut child in children {
        drop(child.stdin.take());
        let _ = child.wait();
    }
    if o.label != "postgres"
        && let Some(dir) = o.store.strip_prefix("sqlite://")
    {
        let dir = dir.split('?').next().unwrap_or(dir);
        if dir.contains("memgpt-serve-bench-") {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// A tenant and its API key on the servers (made through the first).
async fn tenant_key(http: &reqwest::Client, base: &str) -> String {
    let post = |base: &str, path: &str, key: &str, body: Value| {
        http.post(format!("{base}{path}"))
            .bearer_auth(key)
            .json(&body)
            .send()
    };
    let tenant: Value = post(base, "/v1/admin/tenants", ADMIN, json!({"name": "bench"}))
        .await
        .expect("a tenant")
        .json()
        .await
        .expect("tenant JSON");
    let tenant = tenant["id"].as_str().expect("a tenant id").to_owned();
    let key: Value = post(
        base,
        &format!("/v1/admin/tenants/{tenant}/keys"),
        ADMIN,
        json!({}),
    )
    .await
    .expect("a key")
    .json()
    .await
    .expect("key JSON");
    key["key"].as_str().expect("a key").to_owned()
}

async fn drive(o: &Options, bases: &[String]) {
    let http = memgpt::http::client(&Default::default()).expect("an HTTP client");
    let post = |base: &str, path: &str, key: &str, body: Value| {
        http.post(format!("{base}{path}"))
            .bearer_auth(key)
            .json(&body)
            .send()
    };
    let key = tenant_key(&http, &bases[0]).await;
    let mut agents = Vec::new();
    for i in 0..o.agents {
        let agent: Value = post(
            &bases[i % bases.len()],
            "/v1/agents",
            &key,
            json!({"name": format!("agent {i}")}),
        )
        .await
        .expect("an agent")
        .json()
        .await
        .expect("agent JSON");
        agents.push(agent["id"].as_str().expect("an agent id").to_owned());
    }

    let started = Instant::now();
    let semaphore = Arc::new(tokio::sync::Semaphore::new(o.concurrency));
    let mut tasks = Vec::new();
    for (i, agent) in agents.into_iter().enumerate() {
        let (http, key, bases, semaphore, messages, sticky) = (
            http.clone(),
            key.clone(),
            bases.to_vec(),
            semaphore.clone(),
            o.messages,
            o.sticky,
        );
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(messages);
            let mut failures = 0usize;
            for m in 0..messages {
                let _permit = semaphore.acquire().await.expect("the semaphore");
                let base = &bases[if sticky { i } else { i + m } % bases.len()];
                let sent = Instant::now();
                let response = http
                    .post(format!("{base}/v1/agents/{agent}/messages"))
                    .bearer_auth(&key)
                    .json(&json!({"text": format!("message {m}")}))
                    .send()
                    .await;
                match response {
                    Ok(r) if r.status().is_success() => {
                        let _ = r.bytes().await;
                        latencies.push(sent.elapsed());
                    }
                    Ok(r) => {
                        failures += 1;
                        eprintln!("{}: {}", r.status(), r.text().await.unwrap_or_default());
                    }
                    Err(e) => {
                        failures += 1;
                        eprintln!("{e}");
                    }
                }
            }
            (latencies, failures)
        }));
    }
    let mut latencies = Vec::new();
    let mut failures = 0;
    for task in tasks {
        let (l, f) = task.await.expect("a client task");
        latencies.extend(l);
        failures += f;
    }
    let elapsed = started.elapsed();
    let steps = latencies.len();
    let rate = steps as f64 / elapsed.as_secs_f64();
    let p50 = percentile(&mut latencies, 0.50);
    let p99 = percentile(&mut latencies, 0.99);
    let routing = match (o.servers, o.sticky) {
        (1, _) => "",
        (_, true) => " (sticky)",
        (_, false) => " (alternating)",
    };
    println!(
        "| {} | {}{routing} | {} x {} | {} | {steps} | {failures} | {rate:.0} | {} | {} |",
        o.label,
        o.servers,
        o.agents,
        o.messages,
        o.concurrency,
        ms(p50),
        ms(p99)
    );
}
