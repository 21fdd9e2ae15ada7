//! Throughput of the offline models on this machine: the local embedder (sentences/s at batch
//! 1 and 32) and the local chat model (prompt and generation tokens/s, with and without the
//! function-call grammar).
//!
//! ```text
//! cargo run --release --example models --features models -- pull smollm2-135m-instruct all-minilm-l6-v2
//! cargo bench --bench local_models --features local,local-embed,models
//! MEMGPT_TEST_MODELS=/path/to/cache cargo bench --bench local_models --features local,local-embed,models
//! ```
//!
//! The model cache is `MEMGPT_TEST_MODELS` when set, else `$MEMGPT_HOME/models`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use memgpt::builtin::DEFAULT_FUNCTIONS;
use memgpt::function::FunctionRegistry;
use memgpt::llm::{ChatMessage, ChatRequest, LlmProvider, ToolChoice};
use memgpt::local::{LlamaConfig, LlamaProvider};
use memgpt::local_embed::LocalEmbedder;
use memgpt::models::{ALL_MINILM_L6_V2, ModelCache, SMOLLM2_135M_INSTRUCT};

#[path = "support/words.rs"]
mod vocabulary;
use vocabulary::WORDS;

fn sentences(n: usize) -> Vec<String> {
    let mut state = 0x9e37_79b9u32;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            let len = 8 + (state % 18) as usize;
            (0..len)
                .map(|i| WORDS[(state as usize / (i + 1) + i * 7) % WORDS.len()])
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

fn cache() -> ModelCache {
    match std::env::var_os("MEMGPT_TEST_MODELS") {
        Some(root) => ModelCache::new(root),
        None => ModelCache::from_env(),
    }
}

fn per_second(n: usize, elapsed: Duration) -> f64 {
    n as f64 / elapsed.as_secs_f64()
}

fn embedder_bench(cache: &ModelCache) {
    let Some(dir) = cache.find(&ALL_MINILM_L6_V2) else {
        println!(
            "skipping the embedder: {} is not pulled",
            ALL_MINILM_L6_V2.name
        );
        return;
    };
    let started = Instant::now();
    let embedder = LocalEmbedder::from_dir(dir).expect("embedder");
    println!(
        "\n## Local embedder ({}, 384-d)\n\nload: {:.0} ms\n",
        ALL_MINILM_L6_V2.name,
        started.elapsed().as_secs_f64() * 1e3
    );
    let texts = sentences(256);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let words: usize = texts.iter().map(|t| t.split(' ').count()).sum();
    println!(
        "{} sentences of 8-25 words (mean {:.1})\n",
        texts.len(),
        words as f64 / texts.len() as f64
    );
    println!("| batch | sentences/s | ms per sentence |");
    println!("|---|---|---|");
    embedder.embed_blocking(&refs[..8]).expect("warm-up");
    for batch in [1usize, 32] {
        let e = embedder.clone().with_batch_size(batch);
        let started = Instant::now();
        if batch == 1 {
            for t in &refs {
                e.embed_blocking(&[*t]).expect("embed");
            }
        } else {
            e.embed_blocking(&refs).expect("embed");
        }
        let elapsed = started.elapsed();
        println!(
            "| {batch} | {:.0} | {:.2} |",
            per_second(refs.len(), elapsed),
            elapsed.as_secs_f64() * 1e3 / refs.len() as f64
        );
    }
}

async fn llm_bench(cache: &ModelCache) {
    let Some(dir) = cache.find(&SMOLLM2_135M_INSTRUCT) else {
        println!(
            "skipping the chat model: {} is not pulled",
            SMOLLM2_135M_INSTRUCT.name
        );
        return;
    };
    let tools: Vec<_> = FunctionRegistry::linked()
        .and_then(|r| r.function_set(&DEFAULT_FUNCTIONS))
        .expect("the built-in functions")
        .schemas()
        .to_vec();
    println!(
        "\n## Local chat model ({}, GGUF Q4_1)\n",
        SMOLLM2_135M_INSTRUCT.name
    );
    println!(
        "| threads | prompt tokens | prompt tokens/s | free generation tokens/s | grammar generation tokens/s | sampling ms/token, free | sampling ms/token, grammar |"
    );
    println!("|---|---|---|---|---|---|---|");
    let history: String = sentences(60).join(". ");
    for threads in [1u32, 2] {
        let provider = Arc::new(
            LlamaProvider::new(
                LlamaConfig::new(dir.join("model.gguf"))
                    .with_threads(threads)
                    .with_context_window(4096),
            )
            .expect("model"),
        );
        let mut prompt_rates = Vec::new();
        let mut free_rates = Vec::new();
        let mut grammar_rates = Vec::new();
        let mut free_sampling = Vec::new();
        let mut grammar_sampling = Vec::new();
        let per_token = |g: &memgpt::local::Generation| {
            g.sampling_time.as_secs_f64() * 1e3 / g.completion_tokens.max(1) as f64
        };
        let mut prompt_tokens = 0;
        for run in 0..3 {
            // A different first message every run, so nothing comes from the KV cache.
            let messages = vec![
                ChatMessage::system(format!(
                    "Run {run}. You are a helpful assistant that remembers conversations."
                )),
                ChatMessage::user(format!("Here is what we discussed: {history}")),
                ChatMessage::user("Write a short story about the people above."),
            ];
            let mut free = ChatRequest::new("", messages.clone());
            free.max_tokens = Some(128);
            provider.complete(&free).await.expect("generate");
            let g = provider.last_generation().expect("timings");
            prompt_tokens = g.prompt_tokens;
            prompt_rates.push(per_second(g.prompt_tokens_processed, g.prompt_time));
            free_rates.push(per_second(g.completion_tokens, g.generation_time));
            free_sampling.push(per_token(&g));

            let mut constrained = ChatRequest::new("", messages);
            constrained.tools = Arc::from(tools.clone());
            constrained.tool_choice = ToolChoice::Required;
            constrained.max_tokens = Some(128);
            provider.complete(&constrained).await.expect("generate");
            let g = provider.last_generation().expect("timings");
            grammar_rates.push(per_second(g.completion_tokens, g.generation_time));
            grammar_sampling.push(per_token(&g));
        }
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let (prompt, free, grammar) = (
            median(&mut prompt_rates),
            median(&mut free_rates),
            median(&mut grammar_rates),
        );
        let (free_ms, grammar_ms) = (median(&mut free_sampling), median(&mut grammar_sampling));
        println!(
            "| {threads} | {prompt_tokens} | {prompt:.0} | {free:.1} | {grammar:.1} | {free_ms:.2} | {grammar_ms:.2} |"
        );
    }
}

fn main() {
    let cache = cache();
    embedder_bench(&cache);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(llm_bench(&cache));
}
