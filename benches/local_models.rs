//! Throughput of the offline models on this machine: the local embedder (ms per text at 16, 128
//! and 256 tokens and per 300-token chunk, against the previous candle embedder in the same run)
//! and the local chat model (prompt and generation tokens/s, with and without the
//! function-call grammar).
//!
//! ```text
//! cargo run --release --features cli -- models pull smollm2-135m-instruct all-minilm-l6-v2 all-mpnet-base-v2
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
use memgpt::local_embed::{LocalEmbedder, Precision};
use memgpt::models::{ALL_MINILM_L6_V2, ALL_MPNET_BASE_V2, ModelCache, SMOLLM2_135M_INSTRUCT};

#[path = "../tests/support/candle_embedder.rs"]
mod candle_embedder;
#[path = "support/words.rs"]
mod vocabulary;
use candle_embedder::CandleEmbedder;
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

/// `n` texts of about `tokens` wordpieces each (varied words), trimmed with the model's own
/// tokenizer.
fn texts_of(embedder: &LocalEmbedder, n: usize, tokens: usize) -> Vec<String> {
    let mut state = 0x2545_f491u32 ^ tokens as u32;
    (0..n)
        .map(|_| {
            let mut words: Vec<&str> = Vec::new();
            loop {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                words.push(WORDS[state as usize % WORDS.len()]);
                let text = words.join(" ");
                if embedder.count_tokens(&text).unwrap_or(0) + 2 >= tokens {
                    return text;
                }
            }
        })
        .collect()
}

/// 300-token chunks as `memgpt ingest` cuts them (tiktoken), from the NQ-Open gold passages
/// when ../shared/data is there, else from generated sentences.
fn chunks_300(n: usize) -> (Vec<String>, &'static str) {
    use memgpt::tokens::TiktokenCounter;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/data/nq_open/nq-open-oracle.jsonl.gz");
    let mut text = String::new();
    let mut source = "generated sentences";
    if let Ok(file) = std::fs::File::open(&path) {
        use std::io::BufRead;
        let reader = std::io::BufReader::new(flate2::read::GzDecoder::new(file));
        for line in reader.lines().map_while(Result::ok) {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            for c in v["ctxs"].as_array().into_iter().flatten() {
                text.push_str(c["title"].as_str().unwrap_or_default());
                text.push('\n');
                text.push_str(c["text"].as_str().unwrap_or_default());
                text.push_str("\n\n");
            }
            if text.len() > n * 1_600 {
                source = "NQ-Open gold passages";
                break;
            }
        }
    }
    if text.len() < n * 1_600 {
        text = sentences(n * 12).join(". ");
        source = "generated sentences";
    }
    let counter = TiktokenCounter::for_model("gpt-4o-mini");
    let mut chunks = memgpt::chunk::chunk_text(&text, 300, &counter);
    chunks.truncate(n);
    (chunks, source)
}

/// Embeds `texts` in one call `rounds` times; the best time per text, in ms.
fn best_ms(rounds: usize, texts: &[&str], mut run: impl FnMut(&[&str])) -> f64 {
    (0..rounds)
        .map(|_| {
            let started = Instant::now();
            run(texts);
            started.elapsed().as_secs_f64() * 1e3 / texts.len() as f64
        })
        .fold(f64::INFINITY, f64::min)
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
    let embedder = LocalEmbedder::from_dir(&dir).expect("embedder");
    println!(
        "\n## Local embedder ({}, 384-d)\n\nload: {:.0} ms; bf16 kernel: {}\n",
        ALL_MINILM_L6_V2.name,
        started.elapsed().as_secs_f64() * 1e3,
        if memgpt::local_embed::bf16_available() {
            "yes (AVX-512 BF16)"
        } else {
            "no (f32)"
        },
    );
    let f32_embedder = LocalEmbedder::load(&dir, Precision::F32).expect("embedder");
    let previous = CandleEmbedder::from_dir(&dir).expect("the previous embedder");
    println!(
        "Side by side in one run, best of 3, both cores. *previous*: candle's BertModel, batches \
         of 32 texts of similar length padded to the longest (the embedder until 2026-12-06); \
         *f32* and *default*: the packed encoder (default: bf16 products where the CPU has AVX-512 \
         BF16).\n"
    );
    println!(
        "| texts | previous ms/text | f32 ms/text | default ms/text | default texts/s | speed-up |"
    );
    println!("|---|---|---|---|---|---|");
    let (chunks, source) = chunks_300(64);
    let mut cases: Vec<(String, Vec<String>)> = [16usize, 128, 256]
        .into_iter()
        .map(|t| {
            (
                format!("{t} tokens"),
                texts_of(&embedder, if t == 16 { 256 } else { 64 }, t),
            )
        })
        .collect();
    cases.push((format!("300-token chunks ({source})"), chunks));
    for (name, texts) in &cases {
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        embedder.embed_blocking(&refs[..4]).expect("warm-up");
        let old = best_ms(3, &refs, |t| {
            previous.embed(t).expect("embed");
        });
        let f32 = best_ms(3, &refs, |t| {
            f32_embedder.embed_blocking(t).expect("embed");
        });
        let new = best_ms(3, &refs, |t| {
            embedder.embed_blocking(t).expect("embed");
        });
        println!(
            "| {} x {name} | {old:.2} | {f32:.2} | {new:.2} | {:.0} | {:.1}x |",
            refs.len(),
            1e3 / new,
            old / new
        );
    }
    let query = ["Which versions of the tools did I say I was using to start my project?"];
    let latency = best_ms(10, &query, |t| {
        embedder.embed_blocking(t).expect("embed");
    });
    println!("\nOne query (16 tokens) alone: {latency:.2} ms.");
    if let Some(dir) = cache.find(&ALL_MPNET_BASE_V2) {
        let mpnet = LocalEmbedder::from_dir(&dir).expect("mpnet");
        let (chunks, _) = chunks_300(32);
        let refs: Vec<&str> = chunks.iter().map(String::as_str).collect();
        let ms = best_ms(2, &refs, |t| {
            mpnet.embed_blocking(t).expect("embed");
        });
        let latency = best_ms(10, &query, |t| {
            mpnet.embed_blocking(t).expect("embed");
        });
        println!(
            "\n{} (768-d, 384-token window): {ms:.1} ms per 300-token chunk ({:.1}/s); one query: {latency:.2} ms.",
            ALL_MPNET_BASE_V2.name,
            1e3 / ms
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
