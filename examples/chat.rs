//! An interactive MemGPT agent on any OpenAI-compatible endpoint.
//!
//! ```text
//! OPENAI_API_KEY=sk-... cargo run --example chat
//! MEMGPT_BASE_URL=http://localhost:11434/v1 MEMGPT_MODEL=llama3.1:8b cargo run --example chat
//! ```
//!
//! Type messages; `/help` lists the commands. The agent's memory is kept in `MEMGPT_STORE`
//! (default `sqlite://./memgpt-data`; also `postgres://...` with the `postgres` feature, or
//! `memory://`), so the next run resumes the same agent.

use std::io::Write;
use std::sync::Arc;

use anyhow::{Context, Result};
use memgpt::backends::StoreConfig;
use memgpt::builtin::DEFAULT_FUNCTIONS;
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

    let config = match OpenAiConfig::from_env() {
        Ok(config) => config,
        Err(ConfigError::NotConfigured) => {
            eprintln!(
                "No LLM endpoint is configured.\n\n\
                 OpenAI:        export OPENAI_API_KEY=sk-...            (optional: MEMGPT_MODEL=gpt-4o)\n\
                 Ollama:        export MEMGPT_BASE_URL=http://localhost:11434/v1 MEMGPT_MODEL=llama3.1:8b\n\
                 vLLM:          export MEMGPT_BASE_URL=http://localhost:8000/v1 MEMGPT_MODEL=<served model>\n\
                 llama.cpp:     export MEMGPT_BASE_URL=http://localhost:8080/v1 MEMGPT_MODEL=<any>\n\
                 LM Studio:     export MEMGPT_BASE_URL=http://localhost:1234/v1 MEMGPT_MODEL=<loaded model>\n\
                 OpenRouter:    export MEMGPT_BASE_URL=https://openrouter.ai/api/v1 MEMGPT_API_KEY=... MEMGPT_MODEL=openai/gpt-4o\n\n\
                 Optional: MEMGPT_CONTEXT_WINDOW=<tokens>, MEMGPT_EMBEDDING_MODEL=<model> for vector archival search.\n\
                 Then run `cargo run --example chat` again."
            );
            std::process::exit(2);
        }
        Err(e) => return Err(e).context("reading the endpoint configuration"),
    };
    let provider = Arc::new(OpenAiProvider::new(config.clone())?);

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
        .provider(provider)
        .storage(storage)
        .name("sam")
        .tools(tools);
    if let Ok(model) = std::env::var("MEMGPT_EMBEDDING_MODEL") {
        let embed_config = OpenAiConfig {
            model,
            ..config.clone()
        };
        let embedder = OpenAiEmbedder::detect(embed_config)
            .await
            .context("probing the embedding model")?;
        builder = builder.embedder(Arc::new(embedder));
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

    println!(
        "memgpt chat: model {} at {}. /help for commands.",
        config.model, config.base_url
    );
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
    for call in &record.tool_calls {
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
