//! Pathological sizes: how long the framework takes over one very large input, the LLM aside.
//!
//! Each row is one large input handled once: token counting, chunking, and a whole agent step
//! whose only function call is an `archival_memory_insert` of that input (a scripted in-process
//! provider, so the time is the framework's alone: counting, chunking, storing, the step's
//! bookkeeping). Calls over `AgentConfig::max_function_argument_bytes` are refused at once.
//!
//! ```text
//! cargo bench --bench pathological_inputs --features sqlite
//! ```

#[path = "support/words.rs"]
mod vocabulary;

use std::sync::Arc;
use std::time::{Duration, Instant};

use memgpt::backend::testing::ScriptedProvider;
use memgpt::chunk::chunk_text_with_overlap;
use memgpt::tokens::{TiktokenCounter, TokenCounter};
use serde_json::json;
use vocabulary::WORDS;

/// `bytes` of one "word" with no space: letters, as a paste of a hash or a minified blob.
fn no_spaces(bytes: usize) -> String {
    let mut state = 0x2545_f491_u32;
    (0..bytes)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            char::from(b'a' + (state % 26) as u8)
        })
        .collect()
}

/// Ordinary words, one paragraph with no sentence break, about `tokens` tokens.
fn words(tokens: usize) -> String {
    // The first 20 of the shared vocabulary, as the figures in BENCHMARKS.md were measured.
    let words = &WORDS[..20];
    (0..tokens)
        .map(|i| words[(i * 7 + i / 3) % words.len()])
        .collect::<Vec<_>>()
        .join(" ")
}

fn time<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let started = Instant::now();
    let out = f();
    (out, started.elapsed())
}

async fn insert_step(content: &str, sqlite: bool) -> Duration {
    let provider = Arc::new(ScriptedProvider::new());
    provider.push_call(
        "archival_memory_insert",
        json!({"content": content, "request_heartbeat": false}),
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let mut builder = memgpt::Agent::builder().provider(provider);
    if sqlite {
        let url = format!("sqlite://{}", dir.path().join("agent.db").display());
        let storage = memgpt::StoreConfig::from_url(&url)
            .expect("a store URL")
            .open()
            .await
            .expect("the store");
        builder = builder.storage(storage);
    }
    let mut agent = builder.build().await.expect("the agent");
    let started = Instant::now();
    let record = agent.step("store this").await.expect("the step");
    let elapsed = started.elapsed();
    let call = &record.function_calls[0];
    eprintln!(
        "    ({}: {})",
        if call.ok { "stored" } else { "refused" },
        call.output.chars().take(100).collect::<String>()
    );
    elapsed
}

fn main() {
    let counter = TiktokenCounter::cl100k();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    println!(
        "| input | count_text | chunk_text (300/50) | archival_memory_insert step, memory | same, SQLite |"
    );
    println!("|---|---|---|---|---|");
    // The largest call an agent accepts by default (AgentConfig::max_function_argument_bytes,
    // 1 MiB, minus the JSON around the content), and five times more (refused at once).
    let largest = (1 << 20) - 100;
    for (name, text) in [
        ("5 MB, no spaces", no_spaces(5_000_000)),
        ("1 MiB, no spaces", no_spaces(largest)),
        ("1M tokens of words, one paragraph", words(1_000_000)),
        ("1 MiB of words, one paragraph", {
            let mut w = words(200_000);
            w.truncate(largest);
            w
        }),
    ] {
        let (tokens, counting) = time(|| counter.count_text(&text));
        let (chunks, chunking) = time(|| chunk_text_with_overlap(&text, 300, 50, &counter));
        let memory = runtime.block_on(insert_step(&text, false));
        let sqlite = runtime.block_on(insert_step(&text, true));
        println!(
            "| {name} ({} bytes, {tokens} tokens, {} chunks) | {:.2} s | {:.2} s | {:.2} s | {:.2} s |",
            text.len(),
            chunks.len(),
            counting.as_secs_f64(),
            chunking.as_secs_f64(),
            memory.as_secs_f64(),
            sqlite.as_secs_f64()
        );
    }
}
