//! Scale in one process: 10,000 resident agents (memory per idle agent) and 1,000 concurrent
//! steps across agents against the zero-latency fake LLM server (steps per second, latency
//! percentiles), on SQLite and, when `MEMGPT_TEST_POSTGRES_URL` is set, on PostgreSQL.
//!
//! Memory is the growth of the process's resident set while the agents are built and kept
//! (each has had one step, so its queue holds the greeting turn): allocator slack included, the
//! store's own caches excluded as far as possible by building the agents after opening it.
//!
//! `million` instead builds one agent with 1,000,000 recall messages and 1,000,000 archival
//! passages (imported in batches, embedded with the 64-d hashing embedder) and times its steps
//! that search both (a scripted in-process model), on SQLite with FTS5 and exact vectors, with
//! `million stack` on SQLite + tantivy + usearch, or with `million postgres` on PostgreSQL
//! (`--rows N` fills N of each instead of a million). Two steps (one of each search) run
//! before the measured ones, so the figures are warm (`--searches N`: N of each, default 20). `--dir DIR` keeps the SQLite store in
//! `DIR`: a later run with the same `DIR` only searches (for profiling).
//!
//! One store per process (the resident-set growth of a second run in the same process would
//! reuse the first run's freed memory):
//!
//! ```text
//! cargo bench --bench scale -- million
//! cargo bench --bench scale --features tantivy,usearch -- million stack
//! MEMGPT_TEST_POSTGRES_URL=postgres://... cargo bench --bench scale --features postgres -- million postgres --rows 200000
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

/// One agent with a million messages and a million passages: how long filling takes, and the
/// time of steps that search both.
async fn million(url: &str, label: &str, rows: usize, searches: usize) {
    use memgpt::backend::testing::ScriptedProvider;
    use memgpt::embed::HashingEmbedder;
    use memgpt::message::{Message, MessageKind};

    const BATCH: usize = 10_000;
    let rows = rows.div_ceil(BATCH) * BATCH;
    let storage = open(url).await;
    let llm = Arc::new(ScriptedProvider::new());
    // `--dir DIR` keeps the store: a second run finds the agent filled and only searches.
    let filled = storage
        .agents
        .list_agents()
        .await
        .expect("list")
        .into_iter()
        .find(|a| a.name == "million");
    let builder = Agent::builder()
        .provider(llm.clone())
        .storage(storage)
        .embedder(Arc::new(HashingEmbedder::new(64)));
    let mut agent = match &filled {
        Some(state) => builder.load(state.id).await.expect("agent"),
        None => builder.name("million").build().await.expect("agent"),
    };
    let rows = if filled.is_some() { 0 } else { rows };
    let words = [
        "Lisbon", "sister", "jazz", "hiking", "spring", "piano", "garden", "Paris",
    ];
    let started = Instant::now();
    let base = memgpt::chrono::Utc::now() - memgpt::chrono::Duration::days(400);
    for batch in 0..rows / BATCH {
        let messages: Vec<Message> = (0..BATCH)
            .map(|i| {
                let n = batch * BATCH + i;
                let kind = if n.is_multiple_of(2) {
                    MessageKind::User
                } else {
                    MessageKind::Assistant
                };
                let text = format!(
                    "message {n} about {} and {} on day {}",
                    words[n % 8],
                    words[(n / 8) % 8],
                    n / 2_500
                );
                Message::new(
                    agent.id(),
                    kind,
                    text,
                    base + memgpt::chrono::Duration::seconds(n as i64 * 30),
                )
            })
            .collect();
        agent.import_history(messages).await.expect("import");
    }
    let messages_took = started.elapsed();
    let started = Instant::now();
    for batch in 0..rows / BATCH {
        let chunks = (0..BATCH)
            .map(|i| {
                let n = batch * BATCH + i;
                (
                    format!(
                        "fact {n}: the user likes {} in {}",
                        words[n % 8],
                        words[(n / 8) % 8]
                    ),
                    Default::default(),
                )
            })
            .collect();
        agent
            .insert_archival_chunks(chunks)
            .await
            .expect("passages");
    }
    let passages_took = started.elapsed();
    let span = agent
        .storage()
        .archival
        .count_passages(agent.id())
        .await
        .expect("count")
        .max(1) as usize;
    // Searches of each kind, the first two unmeasured (warming the indexes and caches).
    let (mut recall, mut archival) = (Vec::new(), Vec::new());
    let (mut recall_search, mut archival_search) = (Vec::new(), Vec::new());
    for i in 0..2 + 2 * searches {
        let (function, query) = if i % 2 == 0 {
            (
                "conversation_search",
                format!("message {} Lisbon", (i * 49_999) % span),
            )
        } else {
            (
                "archival_memory_search",
                format!("fact {} jazz", (i * 49_999) % span),
            )
        };
        llm.push_call(function, json!({"query": query, "request_heartbeat": true}));
        llm.push_call("send_message", json!({"message": "found it"}));
        let begun = Instant::now();
        let record = agent.step(format!("look up {query}")).await.expect("step");
        let took = begun.elapsed();
        assert_eq!(record.stop_reason, StopReason::EndTurn);
        assert!(
            record.function_calls[0].ok,
            "{}",
            record.function_calls[0].output
        );
        if i < 2 {
            continue;
        }
        // The function's time is the search as the agent runs it (the query embedded, hybrid
        // candidates from both indexes, ranked, the page read).
        if i % 2 == 0 {
            recall.push(took);
            recall_search.push(record.timings.functions);
        } else {
            archival.push(took);
            archival_search.push(record.timings.functions);
        }
    }
    println!(
        "| store | messages | passages | import messages s | insert passages s | step with conversation_search p50 / max ms | its search p50 ms | step with archival_memory_search p50 / max ms | its search p50 / max ms |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    println!(
        "| {label} | {} | {} | {:.0} | {:.0} | {} / {} | {} | {} / {} | {} / {} |",
        agent
            .storage()
            .recall
            .count_messages(agent.id())
            .await
            .expect("count"),
        agent
            .storage()
            .archival
            .count_passages(agent.id())
            .await
            .expect("count"),
        messages_took.as_secs_f64(),
        passages_took.as_secs_f64(),
        ms(percentile(&mut recall, 0.5)),
        ms(percentile(&mut recall, 1.0)),
        ms(percentile(&mut recall_search, 0.5)),
        ms(percentile(&mut archival, 0.5)),
        ms(percentile(&mut archival, 1.0)),
        ms(percentile(&mut archival_search, 0.5)),
        ms(percentile(&mut archival_search, 1.0)),
    );
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
        let args: Vec<String> = std::env::args().skip(1).collect();
        if args.iter().any(|a| a == "million") {
            let rows = args
                .iter()
                .position(|a| a == "--rows")
                .and_then(|i| args.get(i + 1)?.parse().ok())
                .unwrap_or(1_000_000);
            let searches = args
                .iter()
                .position(|a| a == "--searches")
                .and_then(|i| args.get(i + 1)?.parse().ok())
                .unwrap_or(20);
            if args.iter().any(|a| a == "postgres") {
                let base = std::env::var("MEMGPT_TEST_POSTGRES_URL")
                    .expect("million postgres needs MEMGPT_TEST_POSTGRES_URL");
                let separator = if base.contains('?') { '&' } else { '?' };
                let url = format!("{base}{separator}schema=million_bench_{}", std::process::id());
                million(&url, "postgres", rows, searches).await;
                return;
            }
            let dir = tempfile::tempdir().expect("temporary directory");
            let kept = args
                .iter()
                .position(|a| a == "--dir")
                .and_then(|i| args.get(i + 1))
                .map(std::path::PathBuf::from);
            let path = kept.as_deref().unwrap_or(dir.path());
            let (params, label) = if args.iter().any(|a| a == "stack") {
                ("?recall=tantivy&vectors=usearch", "sqlite+tantivy+usearch")
            } else {
                ("?recall=fts5&vectors=exact", "sqlite")
            };
            million(
                &format!("sqlite://{}{params}", path.display()),
                label,
                rows,
                searches,
            )
            .await;
            return;
        }
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
