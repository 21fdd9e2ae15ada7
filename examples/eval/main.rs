//! The MemGPT paper's experiments as runnable harnesses, plus the memory system's own offline
//! retrieval metrics.
//!
//! ```text
//! # offline: no LLM, no network (the LoCoMo metric needs the local embedder, pulled once)
//! cargo run --example models --features models -- pull all-minilm-l6-v2
//! cargo run --release --example eval -- locomo-retrieval
//! cargo run --release --example eval -- nested-kv --offline
//! cargo run --release --example eval -- doc-qa-retrieval
//! cargo run --release --example eval -- embeddings   # real vectors for the storage benchmark
//!
//! # against any OpenAI-compatible endpoint (flags, or MEMGPT_BASE_URL / MEMGPT_MODEL / OPENAI_API_KEY)
//! cargo run --release --example eval -- nested-kv --base-url http://localhost:11434/v1 --model qwen2.5:7b
//! cargo run --release --example eval -- doc-qa --model gpt-4o-mini --limit 50
//! cargo run --release --example eval -- locomo --model gpt-4o-mini --jobs 4
//! cargo run --release --example eval -- opener --model gpt-4o-mini
//! ```
//!
//! Every harness takes `--data PATH` (another file of the same format), `--limit N`,
//! `--seed N`, `--jobs N`, `--out DIR` (default `target/eval`) and `--fresh`. Results are
//! appended to `DIR/<harness>.jsonl` one item at a time, so an interrupted run resumes where it
//! stopped; the summary (`DIR/<harness>.md` and `.summary.json`) is rebuilt from every finished
//! item. Data files default to `../shared/data/...` relative to the project root (see
//! `../shared/data/README.md`).

mod args;
mod data;
mod doc_qa;
mod embed;
mod llm;
mod locomo;
mod locomo_retrieval;
mod nested_kv;
mod opener;
mod oracle;
mod report;
mod score;
mod stores;
mod vectors;

#[cfg(test)]
#[path = "../../tests/support/fake_openai.rs"]
mod fake_openai;
#[cfg(test)]
mod tests;

use anyhow::Result;

use crate::args::Args;

const USAGE: &str = "\
usage: eval <harness> [options]

harnesses:
  nested-kv          nested key/value retrieval (paper fig. 7): baseline vs MemGPT, levels 0-5
  doc-qa             NaturalQuestions-Open over archival storage: fixed-context top-K vs MemGPT
  doc-qa-retrieval   offline: retriever recall@K of the gold passage (BM25, vector, hybrid)
  locomo             deep memory retrieval on LoCoMo: recursive summary vs MemGPT
  locomo-retrieval   offline: evidence recall@5/@10 of conversation search on LoCoMo (--data) and
                     BEAM chats (--beam DIR), next to plain BM25 over single messages
  opener             conversation opener, scored by persona similarity (CSIM)
  embeddings         writes real MiniLM embeddings of the data as .fvecs (storage benchmark)

options:
  --data PATH        input file (default: ../shared/data/...)
  --beam DIR         locomo-retrieval: BEAM chats (e.g. BEAM's chats/500K); alone, BEAM only
  --limit N          first N items only (locomo-retrieval: first N conversations per family)
  --store S          locomo-retrieval: memory, sqlite, sqlite-tantivy-usearch (default) or postgres
                     (MEMGPT_TEST_POSTGRES_URL)
  --seed N           with --limit: a seeded random sample instead of the first N
  --jobs N           items run concurrently (default 1)
  --out DIR          results folder (default target/eval)
  --fresh            ignore earlier results in DIR
  --offline          nested-kv: the scripted oracle policy instead of an LLM
  --model NAME       LLM model (or MEMGPT_MODEL)
  --base-url URL     OpenAI-compatible endpoint (or MEMGPT_BASE_URL; OPENAI_API_KEY for OpenAI)
  --judge            also score answers with the LLM as judge
  --levels LIST      nested-kv levels (default 0,1,2,3,4,5)
  --k LIST           doc-qa: K values of the fixed-context baseline (default 1,5,10,20,50)
  --embedder DIR     local embedder folder (default: the pulled all-minilm-l6-v2)
  --embed-base-url URL, --embed-model NAME, --embed-dim N (default 1536)
                     embeddings from an OpenAI-compatible endpoint instead";

#[tokio::main]
async fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = match Args::parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("{e}\n\n{USAGE}");
            std::process::exit(2);
        }
    };
    let summary = match args.command.as_str() {
        "nested-kv" => nested_kv::run(&args).await?,
        "doc-qa" => doc_qa::run(&args).await?,
        "doc-qa-retrieval" => doc_qa::run_retrieval(&args).await?,
        "locomo" => locomo::run(&args).await?,
        "locomo-retrieval" => locomo_retrieval::run(&args).await?,
        "opener" => opener::run(&args).await?,
        "embeddings" => vectors::run(&args).await?,
        "help" | "--help" | "-h" => {
            println!("{USAGE}");
            return Ok(());
        }
        other => {
            eprintln!("unknown harness `{other}`\n\n{USAGE}");
            std::process::exit(2);
        }
    };
    println!("{summary}");
    Ok(())
}
