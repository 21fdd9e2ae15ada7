//! Scale in one process: 10,000 resident agents (memory per idle agent) and 1,000 concurrent
//! steps across agents against the zero-latency fake LLM server (steps per second, latency
//! percentiles), on SQLite and, when `MEMGPT_TEST_POSTGRES_URL` is set, on PostgreSQL.
//!
//! Memory is the growth of the process's resident set while the agents are built and kept
//! (each has had one step, so its queue holds the greeting turn): allocator slack included, the
//! store's own caches excluded as far as possible by building the agents after opening it.
//!
//! One store per process (the resident-set growth of a second run in the same process would
//! reuse the first run's freed memory):
//!
//! ```text
//! cargo bench --bench scale -- sqlite
//! MEMGPT_TEST_POSTGRES_URL=postgres://... cargo bench --bench scale --features postgres -- postgres
//! ```

#[path = "../tests/support/fake_openai.rs"]
mod fake_openai;

use std::sync::Arc;
use std::time::{Duration, Instant};

use fake_openai::{FakeOpenAi, Reply};
use memgpt::openai::{OpenAiConfig, OpenAiProvider};
use memgpt::store::Storage;
use memgpt::{Agent, StopReason};
use serde_json::json;

const AGENTS: usize = 10_000;
const CONCURRENT: usize = 1_000;

/// Resident set size of this process, in bytes.
fn rss() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: usize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize
}

fn percentile(values: &mut [Duration], p: f64) -> Duration {
    values.sort();
    values[((values.len() - 1) as f64 * p).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e3)
}

async fn run(name: &str, storage: Storage, provider: Arc<OpenAiProvider>) {
    // Agents are built and stepped once, then kept idle.
    let before = rss();
    let started = Instant::now();
    let mut agents = Vec::with_capacity(AGENTS);
    for i in 0..AGENTS {
        let mut agent = Agent::builder()
            .provider(provider.clone())
            .storage(storage.clone())
            .name(format!("agent {i}"))
            .build()
            .await
            .expect("agent");
        let record = agent.step("hello").await.expect("step");
        assert_eq!(record.stop_reason, StopReason::EndTurn);
        agents.push(agent);
    }
    let built = started.elapsed();
    let per_agent = (rss().saturating_sub(before)) / AGENTS;
    let queued: usize = agents
        .iter()
        .map(|a| a.context().queue().len())
        .sum::<usize>()
        / AGENTS;

    // 1,000 concurrent steps, each on its own agent.
    let started = Instant::now();
    let tasks: Vec<_> = agents
        .drain(..CONCURRENT)
        .map(|mut agent| {
            tokio::spawn(async move {
                let begun = Instant::now();
                let record = agent.step("how are you?").await.expect("step");
                assert_eq!(record.stop_reason, StopReason::EndTurn);
                begun.elapsed()
            })
        })
        .collect();
    let mut latencies = Vec::with_capacity(CONCURRENT);
    for task in tasks {
        latencies.push(task.await.expect("task"));
    }
    let wall = started.elapsed();
    println!(
        "| {name} | {} | {:.1} | {} | {:.0} | {} | {} |",
        AGENTS,
        per_agent as f64 / 1024.0,
        queued,
        CONCURRENT as f64 / wall.as_secs_f64(),
        ms(percentile(&mut latencies, 0.5)),
        ms(percentile(&mut latencies, 0.99)),
    );
    eprintln!("{name}: {AGENTS} agents built and stepped once in {built:.1?}");
    drop(agents);
}

/// The store at `url`.
async fn open(url: &str) -> Storage {
    url.parse::<memgpt::StoreConfig>()
        .expect("store URL")
        .open()
        .await
        .expect("open the store")
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let server = FakeOpenAi::start().await;
        server
            .respond_instantly(Reply::call("send_message", json!({"message": "Fine!"})))
            .await;
        let config = OpenAiConfig::new(server.base_url(), "gpt-4o-mini").with_api_key("sk-bench");
        let provider = Arc::new(OpenAiProvider::new(config).expect("provider"));
        println!(
            "| store | agents resident | KB per idle agent | messages queued per agent | concurrent steps/s | p50 ms | p99 ms |"
        );
        println!("|---|---|---|---|---|---|---|");
        let store = std::env::args()
            .skip(1)
            .find(|a| a == "sqlite" || a == "postgres")
            .unwrap_or_else(|| "sqlite".to_owned());
        if store == "sqlite" {
            let dir = tempfile::tempdir().expect("temporary directory");
            let url = format!("sqlite://{}?recall=fts5&vectors=exact", dir.path().display());
            run("sqlite", open(&url).await, provider.clone()).await;
            return;
        }
        match std::env::var("MEMGPT_TEST_POSTGRES_URL") {
            #[cfg(feature = "postgres")]
            Ok(base) => {
                let separator = if base.contains('?') { '&' } else { '?' };
                let url = format!("{base}{separator}schema=scale_bench_{}", std::process::id());
                run("postgres", open(&url).await, provider.clone()).await;
            }
            _ => eprintln!(
                "postgres: skipped (set MEMGPT_TEST_POSTGRES_URL, build with --features postgres)"
            ),
        }
    });
}
