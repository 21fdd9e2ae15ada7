//! Step overhead: wall and CPU time of one agent step excluding the LLM's own time.
//!
//! The LLM is the fake OpenAI-compatible server from `tests/support`, answering every request
//! instantly (a pre-rendered `send_message` call; the request body is read but not parsed),
//! over real HTTP on 127.0.0.1. It runs on its own thread
//! and runtime; the agent runs on the main thread (a current-thread runtime), so the CPU time
//! measured on the main thread is the agent's alone: building the prompt, serialising the
//! request, the HTTP client, parsing the reply, running the function, committing the step.
//!
//! Rows run on the in-memory store and, with the `sqlite` feature, on SQLite (FTS5, exact
//! vectors) and (with `tantivy` and `usearch`) the embedded stack, each in a fresh temporary
//! directory; the step's commit (one SQLite transaction) is part of every measured step.
//!
//! ```text
//! cargo bench --bench step_overhead                 # full run
//! cargo bench --bench step_overhead -- --quick      # fewer samples
//! cargo bench --bench step_overhead --features tantivy,usearch   # with the embedded stack
//! cargo bench --bench step_overhead -- --history 1000 --store sqlite   # one row
//! MEMGPT_TEST_POSTGRES_URL=postgres://... cargo bench --bench step_overhead --features postgres
//! ```
//!
//! With the `postgres` feature and `MEMGPT_TEST_POSTGRES_URL` set, a PostgreSQL row runs too,
//! in a schema of its own (dropped afterwards). `--history N` keeps the rows at N messages
//! (0, 1000 or 10000; repeatable) and `--store NAME` the rows of that store (repeatable).
//! `--skills N` gives every agent N skills of about 3.7 KB each (`--skills 46`: the 171 KB of
//! Letta's lettabot file), which live in the agent's state and are written with every commit.

#[path = "../tests/support/fake_openai.rs"]
mod fake_openai;

use std::sync::Arc;
use std::time::{Duration, Instant};

use fake_openai::{FakeOpenAi, Reply};
use memgpt::llm::ChatMessage;
use memgpt::openai::{OpenAiConfig, OpenAiProvider};
use memgpt::store::Storage;
use memgpt::tokens::{TiktokenCounter, TokenCounter};
use memgpt::{Agent, StopReason};
use serde_json::json;

/// CPU time of the calling thread.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the valid pointer we pass.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

#[derive(Default)]
struct Samples {
    wall: Vec<Duration>,
    cpu: Vec<Duration>,
    overhead: Vec<Duration>,
    commit: Vec<Duration>,
}

impl Samples {
    fn percentile(values: &[Duration], p: f64) -> Duration {
        let mut sorted = values.to_vec();
        sorted.sort();
        let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
        sorted[index]
    }
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1000.0)
}

/// One provider (one HTTP connection pool) shared by every agent, as in an application.
fn provider(base_url: &str) -> Arc<OpenAiProvider> {
    static PROVIDER: std::sync::OnceLock<Arc<OpenAiProvider>> = std::sync::OnceLock::new();
    PROVIDER
        .get_or_init(|| {
            let config = OpenAiConfig::new(base_url, "gpt-4o-mini").with_api_key("sk-bench");
            Arc::new(OpenAiProvider::new(config).expect("provider"))
        })
        .clone()
}

async fn agent(base_url: String, storage: Option<Storage>) -> Agent {
    let mut builder = Agent::builder()
        .provider(provider(&base_url))
        .context_window(128_000);
    let skills: usize = values_of("--skills")
        .first()
        .map_or(0, |n| n.parse().expect("--skills N"));
    for i in 0..skills {
        let text = format!(
            "---\nname: skill-{i}\ndescription: Does task {i} the way the team does it.\n---\n{}",
            "Run the checks, then write the result down in the notes file. ".repeat(58)
        );
        builder = builder.skill(memgpt::memory::Skill::from_files(
            format!("skill-{i}"),
            [("SKILL.md".to_owned(), text)].into(),
            None,
        ));
    }
    match storage {
        Some(storage) => builder.storage(storage),
        None => builder,
    }
    .build()
    .await
    .expect("agent")
}

/// The stores the rows run on: a name and where (`None`: in memory; a `sqlite://` URL's query;
/// a `postgres://` URL).
fn stores() -> Vec<(&'static str, Option<String>)> {
    #[allow(unused_mut)]
    let mut stores = vec![("memory", None)];
    #[cfg(feature = "sqlite")]
    stores.push(("sqlite", Some("?recall=fts5&vectors=exact".to_owned())));
    #[cfg(all(feature = "tantivy", feature = "usearch"))]
    stores.push((
        "sqlite+tantivy+usearch",
        Some("?recall=tantivy&vectors=usearch".to_owned()),
    ));
    #[cfg(feature = "postgres")]
    if let Ok(base) = std::env::var("MEMGPT_TEST_POSTGRES_URL") {
        let separator = if base.contains('?') { '&' } else { '?' };
        stores.push((
            "postgres",
            Some(format!(
                "{base}{separator}schema=step_bench_{}",
                std::process::id()
            )),
        ));
    }
    stores
}

/// The values given to every `flag VALUE` on the command line.
fn values_of(flag: &str) -> Vec<String> {
    let args: Vec<String> = std::env::args().collect();
    args.windows(2)
        .filter(|w| w[0] == flag)
        .map(|w| w[1].clone())
        .collect()
}

/// Opens a store in a fresh directory (kept until the returned guard drops), or a
/// PostgreSQL schema.
async fn open_store(params: Option<&str>) -> (Option<Storage>, Option<tempfile::TempDir>) {
    let Some(params) = params else {
        return (None, None);
    };
    let (url, dir) = if params.starts_with("postgres") {
        (params.to_owned(), None)
    } else {
        let dir = tempfile::tempdir().expect("temporary directory");
        (
            format!("sqlite://{}{params}", dir.path().display()),
            Some(dir),
        )
    };
    let storage = url
        .parse::<memgpt::StoreConfig>()
        .expect("store URL")
        .open()
        .await
        .expect("open store");
    (Some(storage), dir)
}

async fn measure(agent: &mut Agent, steps: usize, samples: &mut Samples) {
    for i in 0..steps {
        let cpu = thread_cpu();
        let wall = Instant::now();
        let record = agent
            .step(format!(
                "benchmark message number {i}, with a few more words to be typical"
            ))
            .await
            .expect("step");
        let wall = wall.elapsed();
        let cpu = thread_cpu() - cpu;
        assert_eq!(record.stop_reason, StopReason::EndTurn);
        samples.wall.push(wall);
        samples.cpu.push(cpu);
        samples.overhead.push(record.timings.overhead());
        samples.commit.push(record.timings.commit);
    }
}

/// Measures `agents x steps` steps taken at `history` messages: each agent is filled to
/// `history` messages (not measured), then measured for `steps` steps, so the history stays
/// within `history..history + 3 * steps` during measurement.
async fn measure_at(
    base_url: &str,
    store: Option<&str>,
    history: usize,
    agents: usize,
    steps: usize,
) -> (Samples, usize) {
    let mut samples = Samples::default();
    let mut discard = Samples::default();
    let mut tokens = 0;
    let (storage, _dir) = open_store(store).await;
    for _ in 0..agents {
        let mut agent = agent(base_url.to_owned(), storage.clone()).await;
        // Each step appends three messages (user, assistant, function result).
        measure(&mut agent, history.div_ceil(3), &mut discard).await;
        measure(&mut agent, steps, &mut samples).await;
        tokens = agent.stats().total_tokens;
    }
    (samples, tokens)
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let measured = if quick { 50 } else { 300 };

    // The fake LLM: its own thread, its own runtime.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let server = FakeOpenAi::start().await;
            server
                .respond_instantly(Reply::call("send_message", json!({"message": "Noted!"})))
                .await;
            tx.send(server.base_url()).expect("send url");
            std::future::pending::<()>().await;
        });
    });
    let base_url = rx.recv().expect("server url");

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        // Prompt size at message 1 with all eight built-in functions.
        let fresh = agent(base_url.clone(), None).await;
        let counter = TiktokenCounter::for_model("gpt-4o-mini");
        let mut prompt = fresh.prompt();
        prompt.push(ChatMessage::user(
            json!({"type": "user_message", "message": "Hi! I'm Chad. What can you do?", "time": "2026-12-02T12:00:00Z"}).to_string(),
        ));
        let message_tokens: usize = prompt.iter().map(|m| counter.count_message(m)).sum();
        let tool_tokens = counter.count_tools(fresh.function_set().schemas());
        println!(
            "prompt at message 1: {} tokens ({} in messages, {} in {} function schemas; tiktoken {})",
            message_tokens + tool_tokens,
            message_tokens,
            tool_tokens,
            fresh.function_set().len(),
            counter.encoding()
        );

        // Warm up the process (allocator, connection pool, caches).
        measure_at(&base_url, None, 30, 3, 10).await;
        let mut rows = Vec::new();
        let (histories, only) = (values_of("--history"), values_of("--store"));
        for (store, params) in stores() {
            if !only.is_empty() && !only.iter().any(|s| s == store) {
                continue;
            }
            let sizes = [
                (0, measured, 1),
                (1_000, measured / 10, 10),
                (10_000, (measured / 100).max(1), 10),
            ];
            for (history, agents, steps) in sizes {
                if !histories.is_empty() && !histories.iter().any(|h| *h == history.to_string()) {
                    continue;
                }
                let (samples, tokens) =
                    measure_at(&base_url, params.as_deref(), history, agents, steps).await;
                rows.push((store, history, history + 3 * steps, tokens, samples));
            }
        }

        println!();
        println!(
            "| store | history (messages) | prompt tokens | wall p50 ms | wall p99 ms | agent CPU p50 ms | agent CPU p99 ms | non-LLM p50 ms | commit p50 ms |"
        );
        println!("|---|---|---|---|---|---|---|---|---|");
        for (store, from, to, tokens, s) in &rows {
            println!(
                "| {store} | {from}-{to} | {tokens} | {} | {} | {} | {} | {} | {} |",
                ms(Samples::percentile(&s.wall, 0.5)),
                ms(Samples::percentile(&s.wall, 0.99)),
                ms(Samples::percentile(&s.cpu, 0.5)),
                ms(Samples::percentile(&s.cpu, 0.99)),
                ms(Samples::percentile(&s.overhead, 0.5)),
                ms(Samples::percentile(&s.commit, 0.5)),
            );
        }
        println!(
            "\n{measured} measured steps per row at 0 messages, {} at 1,000, {} at 10,000 (caches \
             warm: each agent's store was just written).",
            measured / 10 * 10,
            (measured / 100).max(1) * 10
        );
    });
}
