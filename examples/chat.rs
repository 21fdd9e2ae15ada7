//! An interactive MemGPT agent on any OpenAI-compatible endpoint, or fully offline on a local
//! model.
//!
//! ```text
//! OPENAI_API_KEY=sk-... cargo run --example chat
//! MEMGPT_BASE_URL=http://localhost:11434/v1 MEMGPT_MODEL=llama3.1:8b cargo run --example chat
//!
//! # offline: pull the two local models once, then run with the local features
//! cargo run --release --example models --features models -- pull smollm2-135m-instruct all-minilm-l6-v2
//! cargo run --release --example chat --features local,local-embed,models
//! ```
//!
//! With no endpoint configured the example uses the local chat model and local embedder when
//! they have been pulled (and the example was built with their features), and otherwise prints
//! how to configure one or the other.
//!
//! Type messages; `/help` lists the commands. The agent's memory is kept in `MEMGPT_STORE`
//! (default `sqlite://./memgpt-data`; also `postgres://...` with the `postgres` feature, or
//! `memory://`), so the next run resumes the same agent.

use std::io::Write;
use std::sync::Arc;

use anyhow::{Context, Result};
use memgpt::backends::StoreConfig;
use memgpt::builtin::DEFAULT_FUNCTIONS;
use memgpt::embed::Embedder;
use memgpt::llm::LlmProvider;
use memgpt::message::MessageKind;
use memgpt::openai::{ConfigError, OpenAiConfig, OpenAiEmbedder, OpenAiProvider};
use memgpt::{Agent, Event, StepRecord, StopReason};
use tokio::io::{AsyncBufReadExt, BufReader};
// Names the example tools crate so the linker keeps its #[memgpt_fn] tools.
use memgpt_example_tools as _;

const HELP: &str = "\
commands:
  /memory         show core memory
  /stats          show how the context window is used
  /login          send a login event
  /upload PATH    upload a text file into archival memory
  /timer          fire a timer event
  /quit           leave (also Ctrl-D)";

#[tokio::main]
async fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();

    let Some(llm) = choose_llm().await? else {
        eprintln!("{}", HOW_TO_CONFIGURE);
        std::process::exit(2);
    };

    let mut tools: Vec<&str> = DEFAULT_FUNCTIONS.to_vec();
    tools.extend(["calculate", "current_time"]);
    // Memory lives in MEMGPT_STORE (default: ./memgpt-data, SQLite), so the agent remembers
    // across runs; `memory://` forgets on exit.
    let store_url =
        std::env::var("MEMGPT_STORE").unwrap_or_else(|_| "sqlite://./memgpt-data".to_owned());
    let storage = store_url
        .parse::<StoreConfig>()
        .context("MEMGPT_STORE")?
        .open()
        .await
        .with_context(|| format!("opening {store_url}"))?;
    let existing = storage
        .agents
        .list_agents()
        .await?
        .into_iter()
        .find(|a| a.name == "sam")
        .map(|a| a.id);
    let mut builder = Agent::builder()
        .provider(llm.provider)
        .storage(storage)
        .name("sam")
        .functions(tools);
    if let Some(embedder) = llm.embedder {
        builder = builder.embedder(embedder);
    }
    let mut agent = match existing {
        Some(id) => builder.load(id).await?,
        None => builder.build().await?,
    };
    let resumed = if existing.is_some() {
        "resumed"
    } else {
        "created"
    };
    println!(
        "agent sam {resumed} in {store_url} ({} messages in recall memory)",
        agent.context().counts().recall
    );

    println!("memgpt chat: {}. /help for commands.", llm.description);
    println!("{}", agent.stats());
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    loop {
        print!("you> ");
        std::io::stdout().flush()?;
        let Some(line) = lines.next_line().await? else {
            break;
        };
        let line = line.trim();
        let event = match line
            .split_once(' ')
            .map_or((line, ""), |(a, b)| (a, b.trim()))
        {
            ("", _) => continue,
            ("/quit" | "/exit", _) => break,
            ("/help", _) => {
                println!("{HELP}");
                continue;
            }
            ("/memory", _) => {
                for block in agent.memory().blocks() {
                    println!(
                        "[{}] {}/{} chars\n{}\n",
                        block.label(),
                        block.chars(),
                        block.limit(),
                        block.value()
                    );
                }
                continue;
            }
            ("/stats", _) => {
                println!("{}", agent.stats());
                continue;
            }
            ("/login", _) => Event::login(),
            ("/timer", _) => Event::timer("the user asked for a timer event"),
            ("/upload", path) if !path.is_empty() => match std::fs::read_to_string(path) {
                Ok(text) => Event::document(path, text),
                Err(e) => {
                    println!("could not read {path}: {e}");
                    continue;
                }
            },
            _ => Event::user(line),
        };
        match agent.step(event).await {
            Ok(record) => print_step(&record),
            Err(e) => println!("(step failed, nothing was stored: {e})"),
        }
    }
    Ok(())
}

const HOW_TO_CONFIGURE: &str = "\
No LLM is configured.

Use an endpoint:
  OpenAI:        export OPENAI_API_KEY=sk-...            (optional: MEMGPT_MODEL=gpt-4o)
  Anthropic:     export ANTHROPIC_API_KEY=sk-ant-...     (build with --features anthropic; optional: MEMGPT_MODEL)
  Ollama:        export MEMGPT_BASE_URL=http://localhost:11434/v1 MEMGPT_MODEL=llama3.1:8b
  vLLM:          export MEMGPT_BASE_URL=http://localhost:8000/v1 MEMGPT_MODEL=<served model>
  llama.cpp:     export MEMGPT_BASE_URL=http://localhost:8080/v1 MEMGPT_MODEL=<any>
  LM Studio:     export MEMGPT_BASE_URL=http://localhost:1234/v1 MEMGPT_MODEL=<loaded model>
  OpenRouter:    export MEMGPT_BASE_URL=https://openrouter.ai/api/v1 MEMGPT_API_KEY=... MEMGPT_MODEL=openai/gpt-4o
  Optional: MEMGPT_CONTEXT_WINDOW=<tokens>, MEMGPT_EMBEDDING_MODEL=<model> for vector archival search.
  Then run `cargo run --example chat` again.

Or run offline on local models (no key, no network once pulled):
  cargo run --release --example models --features models -- pull smollm2-135m-instruct all-minilm-l6-v2
  cargo run --release --example chat --features local,local-embed,models";

/// The chat model (and embedder) the example talks to.
struct Llm {
    provider: Arc<dyn LlmProvider>,
    embedder: Option<Arc<dyn Embedder>>,
    description: String,
}

/// An endpoint from the environment (Anthropic, with the `anthropic` feature, when
/// `ANTHROPIC_API_KEY` is set; else OpenAI-compatible), else the pulled local models, else
/// `None`.
async fn choose_llm() -> Result<Option<Llm>> {
    #[cfg(feature = "anthropic")]
    {
        use memgpt::anthropic::AnthropicProvider;
        match AnthropicProvider::from_env() {
            Ok(provider) => {
                let description = format!(
                    "model {} at {}",
                    provider.config().model,
                    provider.config().base_url
                );
                return Ok(Some(Llm {
                    provider: Arc::new(provider),
                    embedder: None,
                    description,
                }));
            }
            Err(ConfigError::NotConfigured { .. }) => {}
            Err(e) => return Err(e).context("reading the Anthropic configuration"),
        }
    }
    match OpenAiConfig::from_env() {
        Ok(config) => {
            let provider = Arc::new(OpenAiProvider::new(config.clone())?);
            let embedder: Option<Arc<dyn Embedder>> = match std::env::var("MEMGPT_EMBEDDING_MODEL")
            {
                Ok(model) => {
                    let embed_config = OpenAiConfig {
                        model,
                        ..config.clone()
                    };
                    let embedder = OpenAiEmbedder::detect(embed_config)
                        .await
                        .context("probing the embedding model")?;
                    Some(Arc::new(embedder))
                }
                Err(_) => None,
            };
            Ok(Some(Llm {
                provider,
                embedder,
                description: format!("model {} at {}", config.model, config.base_url),
            }))
        }
        Err(ConfigError::NotConfigured { .. }) => local_llm(),
        Err(e) => Err(e).context("reading the endpoint configuration"),
    }
}

#[cfg(all(feature = "local", feature = "models"))]
fn local_llm() -> Result<Option<Llm>> {
    use memgpt::local::{LlamaConfig, LlamaProvider};
    use memgpt::models::{ModelCache, SMOLLM2_135M_INSTRUCT};

    let cache = ModelCache::from_env();
    let Some(dir) = cache.find(&SMOLLM2_135M_INSTRUCT) else {
        return Ok(None);
    };
    let threads = std::env::var("MEMGPT_THREADS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(1);
    let provider =
        LlamaProvider::new(LlamaConfig::new(dir.join("model.gguf")).with_threads(threads))
            .context("loading the local chat model")?;
    let embedder = local_embedder(&cache)?;
    let description = format!(
        "local model {} on {threads} thread(s){}, offline",
        SMOLLM2_135M_INSTRUCT.name,
        if embedder.is_some() {
            " with the local embedder"
        } else {
            ""
        }
    );
    Ok(Some(Llm {
        provider: Arc::new(provider),
        embedder,
        description,
    }))
}

#[cfg(not(all(feature = "local", feature = "models")))]
fn local_llm() -> Result<Option<Llm>> {
    Ok(None)
}

#[cfg(all(feature = "local", feature = "models", feature = "local-embed"))]
fn local_embedder(cache: &memgpt::models::ModelCache) -> Result<Option<Arc<dyn Embedder>>> {
    use memgpt::local_embed::LocalEmbedder;
    use memgpt::models::ALL_MINILM_L6_V2;
    match cache.find(&ALL_MINILM_L6_V2) {
        Some(dir) => Ok(Some(Arc::new(
            LocalEmbedder::from_dir(dir).context("loading the local embedder")?,
        ))),
        None => Ok(None),
    }
}

#[cfg(all(feature = "local", feature = "models", not(feature = "local-embed")))]
fn local_embedder(_: &memgpt::models::ModelCache) -> Result<Option<Arc<dyn Embedder>>> {
    Ok(None)
}

fn print_step(record: &StepRecord) {
    for message in &record.messages {
        match message.kind {
            MessageKind::Assistant if !message.text.trim().is_empty() => {
                println!("  (thinks) {}", message.text.trim())
            }
            MessageKind::SystemAlert => println!("  (alert) {}", message.text),
            _ => {}
        }
    }
    for call in &record.function_calls {
        if call.name != "send_message" {
            let status = if call.ok { "ok" } else { "failed" };
            println!(
                "  (calls {} -> {status}) {}",
                call.name,
                first_line(&call.output)
            );
        }
    }
    for flush in &record.flushes {
        println!(
            "  (memory) evicted {} messages, {} tokens",
            flush.evicted_messages, flush.evicted_tokens
        );
    }
    for reply in &record.replies {
        println!("sam> {reply}");
    }
    if !matches!(record.stop_reason, StopReason::EndTurn) {
        println!("  (stopped: {:?})", record.stop_reason);
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}
