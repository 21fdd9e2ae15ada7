//! Step overhead: wall and CPU time of one agent step excluding the LLM's own time.
//!
//! The LLM is the fake OpenAI-compatible server from `tests/support`, answering every request
//! instantly with a `send_message` call, over real HTTP on 127.0.0.1. It runs on its own thread
//! and runtime; the agent runs on the main thread (a current-thread runtime), so the CPU time
//! measured on the main thread is the agent's alone: building the prompt, serialising the
//! request, the HTTP client, parsing the reply, running the function, committing the step.
//!
//! ```text
//! cargo bench --bench step_overhead                 # full run
//! cargo bench --bench step_overhead -- --quick      # fewer samples
//! ```

#[path = "../tests/support/fake_openai.rs"]
mod fake_openai;

use std::sync::Arc;
use std::time::{Duration, Instant};

use fake_openai::{FakeOpenAi, Reply};
use memgpt::llm::ChatMessage;
use memgpt::openai::{OpenAiConfig, OpenAiProvider};
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

struct Samples {
    wall: Vec<Duration>,
    cpu: Vec<Duration>,
    overhead: Vec<Duration>,
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

async fn agent(base_url: String) -> Agent {
    let config = OpenAiConfig::new(base_url, "gpt-4o-mini").with_api_key("sk-bench");
    Agent::builder()
        .provider(Arc::new(OpenAiProvider::new(config).expect("provider")))
        .context_window(128_000)
        .build()
        .await
        .expect("agent")
}

async fn measure(agent: &mut Agent, steps: usize) -> Samples {
    let mut samples = Samples {
        wall: Vec::new(),
        cpu: Vec::new(),
        overhead: Vec::new(),
    };
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
    }
    samples
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (measured, warmup) = if quick { (50, 10) } else { (300, 30) };

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
            server.set_recording(false);
            server.respond_with(|_| Reply::call("send_message", json!({"message": "Noted!"})));
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
        let fresh = agent(base_url.clone()).await;
        let counter = TiktokenCounter::for_model("gpt-4o-mini");
        let mut prompt = fresh.prompt();
        prompt.push(ChatMessage::user(
            json!({"type": "user_message", "message": "Hi! I'm Chad. What can you do?", "time": "2026-12-02T12:00:00Z"}).to_string(),
        ));
        let message_tokens: usize = prompt.iter().map(|m| counter.count_message(m)).sum();
        let tool_tokens = counter.count_tools(fresh.toolset().schemas());
        println!(
            "prompt at message 1: {} tokens ({} in messages, {} in {} function schemas; tiktoken {})",
            message_tokens + tool_tokens,
            message_tokens,
            tool_tokens,
            fresh.toolset().len(),
            counter.encoding()
        );

        let mut rows = Vec::new();
        for history in [0usize, 1_000] {
            let mut agent = agent(base_url.clone()).await;
            // Each step appends three messages (user, assistant, function result).
            let fill = history / 3 + usize::from(history % 3 != 0);
            measure(&mut agent, fill).await;
            measure(&mut agent, warmup).await;
            let before = agent.storage().recall.count_messages(agent.id()).await.expect("count");
            let samples = measure(&mut agent, measured).await;
            let after = agent.storage().recall.count_messages(agent.id()).await.expect("count");
            rows.push((history, before, after, agent.stats().total_tokens, samples));
        }

        println!();
        println!("| history (messages) | prompt tokens at end | wall p50 ms | wall p99 ms | agent CPU p50 ms | agent CPU p99 ms | non-LLM p50 ms |");
        println!("|---|---|---|---|---|---|---|");
        for (history, before, after, tokens, s) in &rows {
            println!(
                "| {history} ({before}-{after}) | {tokens} | {} | {} | {} | {} | {} |",
                ms(Samples::percentile(&s.wall, 0.5)),
                ms(Samples::percentile(&s.wall, 0.99)),
                ms(Samples::percentile(&s.cpu, 0.5)),
                ms(Samples::percentile(&s.cpu, 0.99)),
                ms(Samples::percentile(&s.overhead, 0.5)),
            );
        }
        println!("\n{measured} measured steps per row after {warmup} warm-up steps.");
    });
}
