//! Opening what a command needs from the settings: the store, the LLM, the embedder, an agent.

use std::sync::Arc;

use anyhow::{Context, Result, bail};
use memgpt::backends::StoreConfig;
use memgpt::builtin::DEFAULT_FUNCTIONS;
use memgpt::embed::Embedder;
use memgpt::llm::LlmProvider;
use memgpt::openai::{ConfigError, OpenAiConfig, OpenAiEmbedder, OpenAiProvider};
use memgpt::store::{AgentState, Storage};
use memgpt::{Agent, AgentBuilder};

use crate::settings::Settings;

/// The chat model (and the embedder that goes with it).
pub struct Llm {
    pub provider: Arc<dyn LlmProvider>,
    pub embedder: Option<Arc<dyn Embedder>>,
    /// For the banner and `/model`.
    pub description: String,
}

impl std::fmt::Debug for Llm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.description)
    }
}

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
pub async fn llm(settings: &Settings) -> Result<Option<Llm>> {
    let provider = settings.get("provider").unwrap_or("auto");
    let chosen = match provider {
        "auto" | "openai" | "anthropic" | "local" => provider,
        other => bail!("setting `provider` is `{other}`: use auto, openai, anthropic or local"),
    };
    if chosen == "anthropic" || (chosen == "auto" && anthropic_key(settings)) {
        return anthropic(settings).map(Some);
    }
    if chosen == "local" {
        return crate::local::llm(settings).await;
    }
    match endpoint(settings)? {
        Some(mut config) => {
            if let Some(window) = settings.number("context_window")? {
                config.context_window = Some(window);
            }
            let provider = Arc::new(
                OpenAiProvider::new(config.clone()).context("setting up the OpenAI provider")?,
            );
            let embedder = embedder(settings, Some(&config)).await?;
            Ok(Some(Llm {
                provider,
                embedder,
                description: format!("model {} at {}", config.model, config.base_url),
            }))
        }
        None if chosen == "auto" => crate::local::llm(settings).await,
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
    let description = format!("model {} at {}", config.model, config.base_url);
    Ok(Llm {
        provider: Arc::new(AnthropicProvider::new(config)?),
        embedder: None,
        description,
    })
}

#[cfg(not(feature = "anthropic"))]
fn anthropic(_: &Settings) -> Result<Llm> {
    bail!("provider `anthropic` needs a memgpt built with the `anthropic` feature")
}

/// The embedder the settings choose: `none`; `local` (the local MiniLM model); `openai:MODEL`
/// (through the endpoint); `auto` = the local model when it is present, else none.
pub async fn embedder(
    settings: &Settings,
    endpoint: Option<&OpenAiConfig>,
) -> Result<Option<Arc<dyn Embedder>>> {
    let choice = settings.get("embedder").unwrap_or("auto");
    match choice {
        "none" => Ok(None),
        "auto" => crate::local::embedder(false, settings.assume_yes).await,
        "local" => crate::local::embedder(true, settings.assume_yes).await,
        other => match other.strip_prefix("openai:") {
            Some(model) => {
                let Some(endpoint) = endpoint else {
                    bail!(
                        "setting `embedder` = `{other}` needs an OpenAI-compatible endpoint (base_url or api_key)"
                    )
                };
                let config = OpenAiConfig {
                    model: model.to_owned(),
                    ..endpoint.clone()
                };
                let embedder = OpenAiEmbedder::detect(config)
                    .await
                    .with_context(|| format!("probing the embedding model {model}"))?;
                Ok(Some(Arc::new(embedder)))
            }
            None => bail!("setting `embedder` is `{other}`: use auto, none, local or openai:MODEL"),
        },
    }
}

/// The builder every command starts from: provider, storage, embedder and the functions.
pub fn builder(llm: &Llm, storage: Storage) -> AgentBuilder {
    let mut builder = Agent::builder()
        .provider(llm.provider.clone())
        .storage(storage)
        .functions(DEFAULT_FUNCTIONS.iter().copied());
    if let Some(embedder) = &llm.embedder {
        builder = builder.embedder(embedder.clone());
    }
    builder
}

/// Resumes the agent called `name`, or creates it; `true` when it was created.
pub async fn open_or_create(
    settings: &Settings,
    llm: &Llm,
    storage: Storage,
    name: &str,
) -> Result<(Agent, bool)> {
    let existing = find_agent(&storage, name).await?;
    let mut builder = builder(llm, storage).name(name);
    if let Some(window) = settings.number("context_window")? {
        builder = builder.context_window(window);
    }
    match existing {
        Some(state) => Ok((
            builder
                .load(state.id)
                .await
                .with_context(|| format!("loading agent {name}"))?,
            false,
        )),
        None => {
            if let Some(policy) = settings.get("policy") {
                builder = builder.policy_named(policy);
            }
            if let Some(style) = settings.get("loop_style") {
                let style = memgpt::LoopStyle::from_name(style).with_context(|| {
                    format!("unknown loop_style `{style}` (heartbeat or until_reply)")
                })?;
                builder = builder.loop_style(style);
            }
            Ok((
                builder
                    .build()
                    .await
                    .with_context(|| format!("creating agent {name}"))?,
                true,
            ))
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
