//! Opening what a command needs from the settings: the store, the LLM, the embedder, an agent.

use std::sync::Arc;

use anyhow::{Context, Result, bail};
use memgpt::backends::StoreConfig;
use memgpt::builtin::DEFAULT_FUNCTIONS;
use memgpt::llm::LlmProvider;
use memgpt::openai::{ConfigError, OpenAiConfig, OpenAiProvider};
use memgpt::store::{AgentState, EmbeddingSpace, Storage};
use memgpt::{Agent, AgentBuilder};

pub use crate::embedders::{choose_embedder, embedder};
pub use crate::provider::{Llm, ProviderKind};
use crate::settings::Settings;
use crate::tools::Attached;

/// The store the settings name; the data directory is created if needed.
pub async fn storage(settings: &Settings) -> Result<Storage> {
    let url = settings.store_url();
    if settings.get("store").is_none() {
        let dir = settings.data_dir();
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("creating the data directory {}", dir.display()))?;
    }
    let config: StoreConfig = url
        .parse()
        .with_context(|| format!("setting `store`: {url} is not a store URL"))?;
    config.open().await.map_err(|e| explain_busy(&url, e))
}

/// The store the settings name, opened for reading only: commands that only look (`agents
/// list`, `agents show`, `context`, `export`) work next to a running `memgpt chat`, `mcp` or
/// `serve`. An embedded store that does not exist yet reads as empty (nothing is created).
pub async fn reader(settings: &Settings) -> Result<Storage> {
    let url = settings.store_url();
    let mut config: StoreConfig = url
        .parse()
        .with_context(|| format!("setting `store`: {url} is not a store URL"))?;
    if let StoreConfig::Sqlite(options) = &mut config {
        if !options.dir.join("memgpt.db").exists() {
            return Ok(Storage::in_memory());
        }
        options.read_only = true;
    }
    config
        .open()
        .await
        .with_context(|| format!("opening the store {url} for reading"))
}

/// An error of opening the store at `url`, explained when another process holds it (tantivy
/// and usearch take one writer per data directory).
pub fn explain_busy(
    url: &str,
    error: impl std::error::Error + Send + Sync + 'static,
) -> anyhow::Error {
    if chain(&error).contains("LockBusy") {
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

/// The provider the settings choose, or `None` when nothing is configured (`provider = auto`
/// with no endpoint and no local model).
///
/// `stored` is the model of the vectors the store holds, if any: the embedder follows it (see
/// [`embedder`]).
pub async fn llm(settings: &Settings, stored: Option<&EmbeddingSpace>) -> Result<Option<Llm>> {
    let provider = settings.get("provider").unwrap_or("auto");
    let chosen = match provider {
        "auto" | "openai" | "anthropic" | "local" => provider,
        other => bail!("setting `provider` is `{other}`: use auto, openai, anthropic or local"),
    };
    if chosen == "anthropic" || (chosen == "auto" && anthropic_key(settings)) {
        return anthropic(settings).map(Some);
    }
    if chosen == "local" {
        return crate::local::llm(settings, stored).await;
    }
    match endpoint(settings)? {
        Some(mut config) => {
            if let Some(window) = settings.number("context_window")? {
                config.context_window = Some(window);
            }
            let provider = Arc::new(
                OpenAiProvider::new(config.clone()).context("setting up the OpenAI provider")?,
            );
            let embedder = embedder(settings, Some(&config), stored).await?;
            Ok(Some(Llm {
                provider,
                embedder,
                kind: ProviderKind::OpenAi,
                description: format!("at {}", config.base_url),
            }))
        }
        None if chosen == "auto" => crate::local::llm(settings, stored).await,
        None => bail!(
            "provider `openai` needs `base_url` or `api_key` (MEMGPT_BASE_URL, OPENAI_API_KEY)"
        ),
    }
}

/// The OpenAI-compatible endpoint the settings name, if they name one.
pub fn endpoint(settings: &Settings) -> Result<Option<OpenAiConfig>> {
    match OpenAiConfig::from_lookup(settings.provider_lookup()) {
        Ok(config) => Ok(Some(config)),
        Err(ConfigError::NotConfigured { .. }) => Ok(None),
        Err(e) => Err(e).context("reading the endpoint settings (base_url, model, tool_calling)"),
    }
}

fn anthropic_key(settings: &Settings) -> bool {
    matches!(
        settings.source("api_key"),
        Some(crate::settings::Source::Env("ANTHROPIC_API_KEY"))
    )
}

#[cfg(feature = "anthropic")]
fn anthropic(settings: &Settings) -> Result<Llm> {
    use memgpt::anthropic::{AnthropicConfig, AnthropicProvider};
    let lookup = settings.provider_lookup();
    let config = AnthropicConfig::from_lookup(|var| match var {
        "ANTHROPIC_API_KEY" => lookup("MEMGPT_API_KEY"),
        "ANTHROPIC_BASE_URL" => settings.get("base_url").map(str::to_owned),
        other => lookup(other),
    })
    .context("reading the Anthropic settings (api_key, base_url, model)")?;
    let description = format!("at {}", config.base_url);
    Ok(Llm {
        provider: Arc::new(AnthropicProvider::new(config)?),
        embedder: None,
        kind: ProviderKind::Anthropic,
        description,
    })
}

#[cfg(not(feature = "anthropic"))]
fn anthropic(_: &Settings) -> Result<Llm> {
    bail!("provider `anthropic` needs a memgpt built with the `anthropic` feature")
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
    if !dropped.is_empty() {
        eprintln!(
            "note: agent {} goes without {} (their MCP server is not attached: see [mcp_servers] in memgpt.toml)",
            state.name,
            dropped.join(", ")
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
