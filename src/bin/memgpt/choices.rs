//! The settings that decide what runs, parsed once into types: the chat provider
//! ([`ProviderChoice`], resolved into a [`ProviderPlan`]) and the embedder
//! ([`EmbedderChoice`]). Nothing else reads the strings of `provider` and `embedder`.
//!
//! The two are chosen independently: whichever chat model runs, the embedder is the one
//! `embedder` names (`auto`: the model of the store's vectors, or the light local model).
//! Only `openai:MODEL` depends on the settings naming an OpenAI-compatible endpoint.

use std::fmt;

use anyhow::{Context, Result, bail};
use memgpt::models::{ALL_MINILM_L6_V2, CATALOG, ModelCache, ModelKind, ModelSpec};
use memgpt::openai::{ConfigError, OpenAiConfig};

use crate::provider::ProviderKind;
use crate::settings::{Settings, Source};

/// The `provider` setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProviderChoice {
    /// Anthropic when `ANTHROPIC_API_KEY` is set, else the endpoint the settings name, else
    /// the local model.
    Auto,
    /// An OpenAI-compatible endpoint (`base_url`, `api_key`).
    OpenAi,
    /// Anthropic's Messages API.
    Anthropic,
    /// The local model, offline.
    Local,
}

impl ProviderChoice {
    /// Reads `provider`; an unknown value is an error naming the choices.
    pub fn from_settings(settings: &Settings) -> Result<Self> {
        match settings.get("provider").unwrap_or("auto") {
            "auto" => Ok(Self::Auto),
            "openai" => Ok(Self::OpenAi),
            "anthropic" => Ok(Self::Anthropic),
            "local" => Ok(Self::Local),
            other => bail!("setting `provider` is `{other}`: use auto, openai, anthropic or local"),
        }
    }

    /// Whether the chat goes to Anthropic: then `base_url` and `api_key` are Anthropic's.
    fn speaks_anthropic(self, settings: &Settings) -> bool {
        self == Self::Anthropic || (self == Self::Auto && anthropic_key(settings))
    }
}

/// Whether the key came from `ANTHROPIC_API_KEY` (what `provider = auto` follows).
fn anthropic_key(settings: &Settings) -> bool {
    matches!(
        settings.source("api_key"),
        Some(Source::Env("ANTHROPIC_API_KEY"))
    )
}

/// The OpenAI-compatible endpoint the settings name, if they name one.
pub fn endpoint(settings: &Settings) -> Result<Option<OpenAiConfig>> {
    match OpenAiConfig::from_lookup(settings.provider_lookup()) {
        Ok(config) => Ok(Some(config)),
        Err(ConfigError::NotConfigured { .. }) => Ok(None),
        Err(e) => Err(e).context("reading the endpoint settings (base_url, model, tool_calling)"),
    }
}

/// The endpoint `openai:MODEL` embedders are reached at: the OpenAI-compatible endpoint of
/// the settings, whatever the chat provider, except when `base_url` and `api_key` are
/// Anthropic's (`None` then).
pub fn embedding_endpoint(settings: &Settings) -> Result<Option<OpenAiConfig>> {
    if ProviderChoice::from_settings(settings)?.speaks_anthropic(settings) {
        return Ok(None);
    }
    endpoint(settings)
}

/// The chat provider the settings resolve to, before anything is built or loaded.
#[derive(Clone, Debug)]
pub enum ProviderPlan {
    /// An OpenAI-compatible endpoint.
    OpenAi {
        /// Its configuration.
        config: Box<OpenAiConfig>,
        /// Chosen by `provider = auto`.
        auto: bool,
    },
    /// Anthropic's Messages API.
    Anthropic {
        /// Chosen by `provider = auto` (`ANTHROPIC_API_KEY` is set).
        auto: bool,
    },
    /// The local model.
    Local {
        /// Chosen by `provider = auto` (no endpoint, no key).
        auto: bool,
    },
}

impl ProviderPlan {
    /// What `provider` resolves to with the rest of the settings: `auto` is Anthropic with
    /// `ANTHROPIC_API_KEY`, else the endpoint, else the local model.
    pub fn resolve(settings: &Settings) -> Result<Self> {
        let choice = ProviderChoice::from_settings(settings)?;
        let auto = choice == ProviderChoice::Auto;
        if choice.speaks_anthropic(settings) {
            return Ok(Self::Anthropic { auto });
        }
        if choice == ProviderChoice::Local {
            return Ok(Self::Local { auto });
        }
        match endpoint(settings)? {
            Some(config) => Ok(Self::OpenAi {
                config: Box::new(config),
                auto,
            }),
            None if auto => Ok(Self::Local { auto }),
            None => bail!(
                "provider `openai` needs `base_url` or `api_key` (MEMGPT_BASE_URL, OPENAI_API_KEY)"
            ),
        }
    }

    /// The API the provider speaks.
    pub fn kind(&self) -> ProviderKind {
        match self {
            Self::OpenAi { .. } => ProviderKind::OpenAi,
            Self::Anthropic { .. } => ProviderKind::Anthropic,
            Self::Local { .. } => ProviderKind::Local,
        }
    }

    /// What will run, as `memgpt config` prints it.
    pub fn describe(&self) -> String {
        let (what, auto, why) = match self {
            Self::OpenAi { config, auto } => (
                format!("openai: {} at {}", config.model, config.base_url),
                *auto,
                "an endpoint or API key is set",
            ),
            Self::Anthropic { auto } => (
                "anthropic: Claude's Messages API".to_owned(),
                *auto,
                "ANTHROPIC_API_KEY is set",
            ),
            Self::Local { auto } => {
                let spec = &memgpt::models::SMOLLM2_135M_INSTRUCT;
                let present = ModelCache::from_env().find(spec).is_some();
                (
                    format!(
                        "local: {}{}",
                        spec.name,
                        if present {
                            ""
                        } else {
                            ", not downloaded yet: `memgpt chat --yes` pulls it"
                        }
                    ),
                    *auto,
                    "no endpoint or API key is set",
                )
            }
        };
        if auto {
            format!("{what} (auto: {why})")
        } else {
            what
        }
    }
}

/// The `embedder` setting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EmbedderChoice {
    /// The model the store's vectors come from; for a store without vectors, the light local
    /// model.
    Auto,
    /// No embedder: searches match words only.
    None,
    /// A local model of the catalog (`local` is the light one, all-minilm-l6-v2).
    Local(&'static ModelSpec),
    /// A model behind the OpenAI-compatible endpoint (`openai:MODEL`).
    OpenAi(String),
}

impl EmbedderChoice {
    /// Reads `embedder`; an unknown value is an error naming the choices and where it was set.
    pub fn from_settings(settings: &Settings) -> Result<Self> {
        let text = settings.get("embedder").unwrap_or("auto");
        Self::parse(text).with_context(|| match settings.source("embedder") {
            Some(source) => format!("setting `embedder` (from {source})"),
            None => "setting `embedder`".to_owned(),
        })
    }

    /// Parses a value of `embedder` (or `--embedder`).
    pub fn parse(text: &str) -> Result<Self> {
        if let Some(model) = text.strip_prefix("openai:") {
            if model.trim().is_empty() {
                bail!("`openai:` needs a model name, e.g. openai:text-embedding-3-small");
            }
            return Ok(Self::OpenAi(model.to_owned()));
        }
        match text {
            "auto" => Ok(Self::Auto),
            "none" => Ok(Self::None),
            "local" => Ok(Self::Local(&ALL_MINILM_L6_V2)),
            other => match local_model(other) {
                Some(spec) => Ok(Self::Local(spec)),
                None => bail!(
                    "`{other}` is not an embedder: use auto, none, local, {} or openai:MODEL",
                    CATALOG
                        .iter()
                        .filter(|s| s.kind == ModelKind::Embedding)
                        .map(|s| s.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            },
        }
    }

    /// The choice that gives the model `model` (a stored space's): its catalog name, or
    /// `openai:MODEL`.
    pub fn for_model(model: &str) -> Self {
        match local_model(model) {
            Some(spec) => Self::Local(spec),
            None => Self::OpenAi(model.to_owned()),
        }
    }
}

impl fmt::Display for EmbedderChoice {
    /// The value of `embedder` (or `--embedder`) that makes this choice.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Auto => f.write_str("auto"),
            Self::None => f.write_str("none"),
            Self::Local(spec) => f.write_str(spec.name),
            Self::OpenAi(model) => write!(f, "openai:{model}"),
        }
    }
}

/// The catalog's embedding model called `name`.
pub fn local_model(name: &str) -> Option<&'static ModelSpec> {
    memgpt::models::lookup(name).filter(|spec| spec.kind == ModelKind::Embedding)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &'static [(&'static str, &'static str)]) -> Settings {
        Settings::load(
            None,
            move |name| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| (*v).to_owned())
            },
            &[],
        )
        .unwrap()
    }

    #[test]
    fn embedder_settings_parse_into_choices_and_back() {
        for (text, choice) in [
            ("auto", EmbedderChoice::Auto),
            ("none", EmbedderChoice::None),
            ("local", EmbedderChoice::Local(&ALL_MINILM_L6_V2)),
            (
                "all-mpnet-base-v2",
                EmbedderChoice::Local(&memgpt::models::ALL_MPNET_BASE_V2),
            ),
            (
                "openai:text-embedding-3-small",
                EmbedderChoice::OpenAi("text-embedding-3-small".into()),
            ),
        ] {
            assert_eq!(EmbedderChoice::parse(text).unwrap(), choice, "{text}");
        }
        assert_eq!(
            EmbedderChoice::parse("local").unwrap().to_string(),
            "all-minilm-l6-v2"
        );
        // The chat model is not an embedder.
        let err = EmbedderChoice::parse("smollm2-135m-instruct").unwrap_err();
        assert!(err.to_string().contains("all-mpnet-base-v2"), "{err}");
        assert!(EmbedderChoice::parse("openai:").is_err());
        let err =
            EmbedderChoice::from_settings(&settings(&[("MEMGPT_EMBEDDER", "bert")])).unwrap_err();
        assert!(format!("{err:#}").contains("$MEMGPT_EMBEDDER"), "{err:#}");
    }

    #[test]
    fn auto_picks_anthropic_then_the_endpoint_then_the_local_model() {
        let anthropic = ProviderPlan::resolve(&settings(&[("ANTHROPIC_API_KEY", "sk-ant-x")]));
        assert!(matches!(
            anthropic.unwrap(),
            ProviderPlan::Anthropic { auto: true }
        ));
        let endpoint = ProviderPlan::resolve(&settings(&[("MEMGPT_BASE_URL", "http://h:1/v1")]));
        match endpoint.unwrap() {
            ProviderPlan::OpenAi { config, auto } => {
                assert!(auto);
                assert_eq!(config.base_url, "http://h:1/v1");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            ProviderPlan::resolve(&settings(&[])).unwrap(),
            ProviderPlan::Local { auto: true }
        ));
        let err = ProviderPlan::resolve(&settings(&[("MEMGPT_PROVIDER", "openai")])).unwrap_err();
        assert!(err.to_string().contains("needs `base_url`"), "{err}");
        let err = ProviderPlan::resolve(&settings(&[("MEMGPT_PROVIDER", "gemini")])).unwrap_err();
        assert!(err.to_string().contains("use auto, openai"), "{err}");
    }

    #[test]
    fn embeddings_reach_the_endpoint_only_when_it_is_not_anthropics() {
        let openai = settings(&[("MEMGPT_BASE_URL", "http://h:1/v1")]);
        assert!(embedding_endpoint(&openai).unwrap().is_some());
        // A local chat model still embeds through an endpoint the settings name.
        let local = settings(&[
            ("MEMGPT_BASE_URL", "http://h:1/v1"),
            ("MEMGPT_PROVIDER", "local"),
        ]);
        assert!(embedding_endpoint(&local).unwrap().is_some());
        let anthropic = settings(&[("ANTHROPIC_API_KEY", "sk-ant-x")]);
        assert!(embedding_endpoint(&anthropic).unwrap().is_none());
    }
}
