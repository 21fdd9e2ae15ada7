//! Opening what a command needs from the settings: the store, the LLM, the embedder, an agent.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use memgpt::backends::StoreConfig;
use memgpt::builtin::DEFAULT_FUNCTIONS;
use memgpt::llm::LlmProvider;
use memgpt::openai::OpenAiProvider;
use memgpt::store::{AgentState, EmbeddingSpace, Storage};
use memgpt::{Agent, AgentBuilder};

use crate::choices::ProviderPlan;
use crate::embedders::WhenMissing;
pub use crate::provider::{Llm, ProviderKind};
use crate::settings::Settings;
use crate::tools::Attached;

/// How long a short command waits for another process holding the embedded store.
const BUSY_WAIT: Duration = Duration::from_secs(60);

/// How long opening the store may take before a short command says it is waiting.
const BUSY_NOTICE: Duration = Duration::from_secs(1);

/// What opening the store does while another memgpt process holds its embedded indexes.
#[derive(Clone, Copy, Debug)]
enum OnBusy {
    /// Wait for it, up to this long, as SQLite's busy timeout does (short commands).
    Wait(Duration),
    /// Refuse with what to do (long-running writers: a second one would wait for hours).
    Refuse,
}

/// The store the settings name, for a command that writes and ends (`blocks`, `ingest`,
/// `agents import` ...); the data directory is created if needed. While another memgpt
/// process holds the embedded indexes, it waits for it (up to a minute, saying so on stderr),
/// so two short commands at once both succeed.
pub async fn storage(settings: &Settings) -> Result<Storage> {
    open_store(settings, OnBusy::Wait(BUSY_WAIT)).await
}

/// The store the settings name, for a writer that runs until it is stopped (`chat`, `mcp`):
/// another process holding the embedded indexes is an error saying what to do.
pub async fn session_storage(settings: &Settings) -> Result<Storage> {
    open_store(settings, OnBusy::Refuse).await
}

async fn open_store(settings: &Settings, on_busy: OnBusy) -> Result<Storage> {
    let url = settings.store_url();
    if settings.get("store").is_none() {
        let dir = settings.data_dir();
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("creating the data directory {}", dir.display()))?;
    }
    let config: StoreConfig = url.parse().with_context(|| {
        let url = crate::settings::without_password(&url);
        format!("setting `store`: {url} is not a store URL")
    })?;
    let started = Instant::now();
    let mut told = false;
    loop {
        let attempt = config.open();
        let result = match on_busy {
            OnBusy::Wait(limit) if !told => {
                // Opening takes milliseconds unless another process holds the store (or an
                // index is rebuilt): say why the command may be waiting once it clearly is.
                tokio::pin!(attempt);
                tokio::select! {
                    result = &mut attempt => result,
                    () = tokio::time::sleep(BUSY_NOTICE) => {
                        eprintln!(
                            "memgpt: waiting for {} (another memgpt process may hold it; up to \
                             {} s)...",
                            crate::settings::without_password(&url),
                            limit.as_secs()
                        );
                        told = true;
                        attempt.await
                    }
                }
            }
            _ => attempt.await,
        };
        let error = match result {
            Ok(storage) => return Ok(storage),
            Err(error) => error,
        };
        match on_busy {
            OnBusy::Wait(limit) if is_busy(&error) && started.elapsed() < limit => {
                // The store itself polls the lock for a few seconds before it reports it busy.
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            _ => return Err(explain_busy(&url, error)),
        }
    }
}

/// The store the settings name, opened for reading only: commands that only look (`agents
/// list`, `agents show`, `context`, `export`) work next to a running `memgpt chat`, `mcp` or
/// `serve`. An embedded store that does not exist yet reads as empty (nothing is created).
pub async fn reader(settings: &Settings) -> Result<Storage> {
    let url = settings.store_url();
    let mut config: StoreConfig = url.parse().with_context(|| {
        let url = crate::settings::without_password(&url);
        format!("setting `store`: {url} is not a store URL")
    })?;
    if let StoreConfig::Sqlite(options) = &mut config {
        if !options.dir.join("memgpt.db").exists() {
            return Ok(Storage::in_memory());
        }
        options.read_only = true;
    }
    config.open().await.with_context(|| {
        let url = crate::settings::without_password(&url);
        format!("opening the store {url} for reading")
    })
}

/// Whether opening a store failed because another process holds its embedded indexes
/// (tantivy takes one writer per data directory).
fn is_busy(error: &(dyn std::error::Error + 'static)) -> bool {
    chain(error).contains("LockBusy")
}

/// An error of opening the store at `url`, explained when another process holds it (tantivy
/// and usearch take one writer per data directory).
pub fn explain_busy(
    url: &str,
    error: impl std::error::Error + Send + Sync + 'static,
) -> anyhow::Error {
    // Said on stderr: a PostgreSQL URL's password stays out of it.
    let url = crate::settings::without_password(url);
    if is_busy(&error) {
        anyhow::anyhow!(
            "{url} is in use by another memgpt process (the embedded indexes allow one process at a \
             time): close it first, or share agents between processes with PostgreSQL \
             (store = \"postgres://...\")"
        )
    } else {
        anyhow::Error::new(error).context(format!("opening the store {url}"))
    }
}

/// Finds an agent by name.
pub async fn find_agent(storage: &Storage, name: &str) -> Result<Option<AgentState>> {
    Ok(storage
        .agents
        .list_agents()
        .await?
        .into_iter()
        .find(|a| a.name == name))
}

/// The provider the settings choose, or `None` when the user declines to download the local
/// model (`provider = auto` with no endpoint and no local model).
///
/// The embedder is chosen on its own (see [`crate::embedders`]): the same for every provider.
/// `stored` is the model of the vectors the store holds, if any: `auto` follows it.
pub async fn llm(settings: &Settings, stored: Option<&EmbeddingSpace>) -> Result<Option<Llm>> {
    let plan = ProviderPlan::resolve(settings)?;
    let kind = plan.kind();
    let (provider, description): (Arc<dyn LlmProvider>, String) = match plan {
        ProviderPlan::OpenAi { mut config, .. } => {
            if let Some(window) = settings.number("context_window")? {
                config.context_window = Some(window);
            }
            let description = format!("at {}", config.base_url);
            let provider =
                OpenAiProvider::new(*config).context("setting up the OpenAI provider")?;
            (Arc::new(provider), description)
        }
        ProviderPlan::Anthropic { .. } => anthropic(settings)?,
        ProviderPlan::Local { .. } => match crate::local::provider(settings).await? {
            Some(local) => (local.provider, local.description),
            None => return Ok(None),
        },
    };
    // Offline, `auto` pulls the embedder too: the local agent is all local.
    let when_missing = match kind {
        ProviderKind::Local => WhenMissing::Pull,
        ProviderKind::OpenAi | ProviderKind::Anthropic => WhenMissing::GoWithout,
    };
    let embedder = crate::embedders::embedder(settings, stored, when_missing).await?;
    let description = match kind {
        ProviderKind::Local => format!(
            "{description}{}, offline",
            match &embedder {
                Some(e) => format!(" with the local embedder {}", e.model()),
                None => String::new(),
            }
        ),
        _ => description,
    };
    Ok(Some(Llm {
        provider,
        embedder,
        kind,
        description,
    }))
}

#[cfg(feature = "anthropic")]
fn anthropic(settings: &Settings) -> Result<(Arc<dyn LlmProvider>, String)> {
    use memgpt::anthropic::{AnthropicConfig, AnthropicProvider};
    let lookup = settings.provider_lookup();
    let config = AnthropicConfig::from_lookup(|var| match var {
        "ANTHROPIC_API_KEY" => lookup("MEMGPT_API_KEY"),
        "ANTHROPIC_BASE_URL" => settings.get("base_url").map(str::to_owned),
        other => lookup(other),
    })
    .context("reading the Anthropic settings (api_key, base_url, model)")?;
    let description = format!("at {}", config.base_url);
    Ok((Arc::new(AnthropicProvider::new(config)?), description))
}

#[cfg(not(feature = "anthropic"))]
fn anthropic(_: &Settings) -> Result<(Arc<dyn LlmProvider>, String)> {
    anyhow::bail!("provider `anthropic` needs a memgpt built with the `anthropic` feature")
}

/// The embedding model and dimension of the vectors `storage` holds, if any.
pub async fn stored_space(storage: &Storage) -> Result<Option<EmbeddingSpace>> {
    storage
        .agents
        .embedding_space()
        .await
        .context("reading the store's embedding model")
}

/// The builder every command starts from: provider, storage and embedder. Configuration
/// (functions, model, rules) is left to the stored agent, or to the defaults for a new one.
pub fn builder(llm: &Llm, storage: Storage) -> AgentBuilder {
    let mut builder = Agent::builder()
        .provider(llm.provider.clone())
        .storage(storage);
    if let Some(embedder) = &llm.embedder {
        builder = builder.embedder(embedder.clone());
    }
    builder
}

/// The model a stored agent should be sent to, when it is not the one it stored: the `model`
/// the user set (flag, environment, `memgpt.toml`) always wins; otherwise an agent's own model
/// stays unless this provider cannot serve it (an imported Claude agent on an OpenAI endpoint),
/// which falls back to the provider's model with a note.
pub fn model_for(settings: &Settings, llm: &Llm, stored: &AgentState) -> Option<String> {
    if llm.kind == ProviderKind::Local {
        // The local provider runs its one model whatever the agent names.
        return None;
    }
    let user_set = !matches!(
        settings.source("model"),
        None | Some(crate::settings::Source::Default)
    );
    if user_set {
        let model = settings.get("model").unwrap_or_default();
        return (model != stored.config.model).then(|| model.to_owned());
    }
    let own = &stored.config.model;
    if own.is_empty() || llm.kind.serves(own) {
        return None;
    }
    eprintln!(
        "note: agent {} was made for the model {own}, which this {:?} provider cannot serve: \
         using {} (set --model to choose)",
        stored.name,
        llm.kind,
        llm.provider.model()
    );
    Some(String::new())
}

/// What the agent is sent to, as one line: `model gpt-4o-mini at http://...`.
pub fn describe_model(llm: &Llm, agent: &Agent) -> String {
    llm.describe(&agent.config().model)
}

/// An opened agent: whether it was just created, and the MCP servers attached to it.
pub struct Opened {
    pub agent: Agent,
    pub created: bool,
    /// The `[mcp_servers]` of memgpt.toml serving this agent (sessions live as long as this).
    pub tools: Option<Attached>,
}

/// The functions a stored agent loads with: its own, without the MCP tools of servers that are
/// not attached now (a function no registry has would stop it from loading), plus the tools
/// of those that are. What was left out is said on stderr.
pub fn functions_for(state: &AgentState, attached: Option<&Attached>) -> Vec<String> {
    let offered: Vec<&String> = attached.iter().flat_map(|a| a.functions()).collect();
    let (mut functions, dropped): (Vec<String>, Vec<String>) = state
        .config
        .functions
        .iter()
        .cloned()
        .partition(|f| !Attached::is_mcp_name(f) || offered.contains(&f));
    for function in offered {
        if !functions.contains(function) {
            functions.push(function.clone());
        }
    }
    let (down, detached): (Vec<String>, Vec<String>) = dropped
        .into_iter()
        .partition(|f| attached.is_some_and(|a| a.is_down(f)));
    if !down.is_empty() {
        eprintln!(
            "note: agent {} goes without {} this session (their MCP server is down: /mcp)",
            state.name,
            down.join(", ")
        );
    }
    if !detached.is_empty() {
        eprintln!(
            "note: agent {} goes without {} (their MCP server is not attached: see [mcp_servers] in memgpt.toml)",
            state.name,
            detached.join(", ")
        );
    }
    functions
}

/// Resumes the agent called `name`, or creates it; with `attach`, the MCP servers memgpt.toml
/// names for it are connected and their tools offered.
pub async fn open_or_create(
    settings: &Settings,
    llm: &Llm,
    storage: Storage,
    name: &str,
    attach: bool,
) -> Result<Opened> {
    let existing = find_agent(&storage, name).await?;
    let tools = if attach {
        crate::tools::attach(settings, Some(name)).await?
    } else {
        None
    };
    let mut builder = builder(llm, storage).name(name);
    if let Some(tools) = &tools {
        builder = builder.registry(tools.registry.clone());
    }
    if let Some(window) = settings.number("context_window")? {
        builder = builder.context_window(window);
    }
    match existing {
        Some(state) => {
            if let Some(model) = model_for(settings, llm, &state) {
                builder = builder.model(model);
            }
            let functions = functions_for(&state, tools.as_ref());
            if functions != state.config.functions {
                builder = builder.functions(functions);
            }
            let agent = builder
                .load(state.id)
                .await
                .with_context(|| format!("loading agent {name}"))?;
            Ok(Opened {
                agent,
                created: false,
                tools,
            })
        }
        None => {
            let functions = DEFAULT_FUNCTIONS
                .iter()
                .map(|f| (*f).to_owned())
                .chain(tools.iter().flat_map(|t| t.functions().cloned()));
            builder = builder.functions(functions);
            if let Some(policy) = settings.get("policy") {
                builder = builder.policy_named(policy);
            }
            if let Some(style) = settings.get("loop_style") {
                let style = memgpt::LoopStyle::from_name(style).with_context(|| {
                    format!("unknown loop_style `{style}` (heartbeat or until_reply)")
                })?;
                builder = builder.loop_style(style);
            }
            let agent = builder
                .build()
                .await
                .with_context(|| format!("creating agent {name}"))?;
            Ok(Opened {
                agent,
                created: true,
                tools,
            })
        }
    }
}

/// An error and its sources, as one line.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
