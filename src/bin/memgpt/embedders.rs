//! The embedder: what the [`EmbedderChoice`] resolves to ([`EmbedderPlan`], before anything
//! is loaded: what `memgpt config` prints), loaded, and checked against the vectors a store
//! already holds. The same for every chat provider, and for commands without one.

use std::sync::Arc;

use anyhow::{Context, Result, bail};
use memgpt::embed::Embedder;
use memgpt::models::{ALL_MINILM_L6_V2, ModelCache, ModelSpec};
use memgpt::openai::{OpenAiConfig, OpenAiEmbedder};
use memgpt::store::EmbeddingSpace;

use crate::choices::{EmbedderChoice, embedding_endpoint, local_model};
use crate::settings::Settings;

/// What `auto` does when the local model it picks is not in the model cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WhenMissing {
    /// Go without an embedder (searches match words until `memgpt reindex`).
    GoWithout,
    /// Pull it, asking first (or with `--yes`): the all-local chat, `memgpt reindex`.
    Pull,
}

/// How the embedder was chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    /// Named by the `embedder` setting.
    Named,
    /// `auto` for a store without vectors: the light local model.
    Auto,
    /// `auto` following the model of the store's vectors.
    Stored,
}

/// Why there is no embedder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoEmbedder {
    /// `embedder = none`.
    Disabled,
    /// `auto`'s local model is not in the model cache (and is not pulled).
    NotDownloaded {
        /// The model.
        spec: &'static ModelSpec,
        /// Whether it is the store's model.
        stored: bool,
    },
    /// The store's vectors come from an endpoint model, and no endpoint is configured.
    Unreachable(String),
}

/// What the embedder settings resolve to: decided without loading a model or calling an
/// endpoint.
#[derive(Clone, Debug)]
pub enum EmbedderPlan {
    /// No embedder: messages and passages are matched by words.
    None(NoEmbedder),
    /// A local model of the catalog (pulled when missing).
    Local {
        /// The model.
        spec: &'static ModelSpec,
        /// Whether it is in the model cache already.
        present: bool,
        /// How it was chosen.
        why: Why,
    },
    /// A model behind the OpenAI-compatible endpoint.
    OpenAi {
        /// The endpoint, with the embedding model as its model.
        config: Box<OpenAiConfig>,
        /// How it was chosen.
        why: Why,
    },
}

impl EmbedderPlan {
    /// What `choice` resolves to, with the endpoint `openai:MODEL` may reach, the model of
    /// the store's vectors (`stored`) and what `auto` does when its model is missing.
    pub fn resolve(
        choice: &EmbedderChoice,
        endpoint: Option<&OpenAiConfig>,
        stored: Option<&EmbeddingSpace>,
        when_missing: WhenMissing,
    ) -> Result<Self> {
        let cache = ModelCache::from_env();
        let local = |spec: &'static ModelSpec, why| {
            let present = cache.find(spec).is_some();
            if !present && why != Why::Named && when_missing == WhenMissing::GoWithout {
                return Self::None(NoEmbedder::NotDownloaded {
                    spec,
                    stored: why == Why::Stored,
                });
            }
            Self::Local { spec, present, why }
        };
        let openai = |model: &str, why| match endpoint {
            Some(endpoint) => Ok(Self::OpenAi {
                config: Box::new(OpenAiConfig {
                    model: model.to_owned(),
                    ..endpoint.clone()
                }),
                why,
            }),
            None => bail!(
                "embedder `openai:{model}` needs an OpenAI-compatible endpoint (base_url or \
                 api_key of an OpenAI-compatible server; not Anthropic's)"
            ),
        };
        match choice {
            EmbedderChoice::None => Ok(Self::None(NoEmbedder::Disabled)),
            EmbedderChoice::Local(spec) => Ok(local(spec, Why::Named)),
            EmbedderChoice::OpenAi(model) => openai(model, Why::Named),
            EmbedderChoice::Auto => match stored {
                None => Ok(local(&ALL_MINILM_L6_V2, Why::Auto)),
                Some(space) => match local_model(&space.model) {
                    Some(spec) => Ok(local(spec, Why::Stored)),
                    None if endpoint.is_some() => openai(&space.model, Why::Stored),
                    None => Ok(Self::None(NoEmbedder::Unreachable(space.model.clone()))),
                },
            },
        }
    }

    /// The model it names, if any.
    pub fn model(&self) -> Option<&str> {
        match self {
            Self::None(_) => None,
            Self::Local { spec, .. } => Some(spec.name),
            Self::OpenAi { config, .. } => Some(&config.model),
        }
    }

    /// What will run, as one line: `all-minilm-l6-v2 (local, auto)`, `none (embedder = none)`.
    pub fn describe(&self) -> String {
        let why = |why: Why| match why {
            Why::Named => "",
            Why::Auto => ", auto",
            Why::Stored => ", auto: the store's model",
        };
        match self {
            Self::None(NoEmbedder::Disabled) => {
                "none (embedder = none: searches match words only)".to_owned()
            }
            Self::None(NoEmbedder::NotDownloaded { spec, stored }) => format!(
                "none (auto: {}{} is not in the model cache; `memgpt models pull {}` to embed)",
                if *stored { "the store's model " } else { "" },
                spec.name,
                spec.name
            ),
            Self::None(NoEmbedder::Unreachable(model)) => format!(
                "none (auto: the store's vectors come from {model}, and no OpenAI-compatible \
                 endpoint is configured)"
            ),
            Self::Local {
                spec,
                present,
                why: reason,
            } => format!(
                "{} (local{}{})",
                spec.name,
                why(*reason),
                if *present {
                    ""
                } else {
                    "; not downloaded yet: pulled on first use"
                }
            ),
            Self::OpenAi {
                config,
                why: reason,
            } => format!(
                "openai:{} at {}{}",
                config.model,
                config.base_url,
                match reason {
                    Why::Named => "",
                    Why::Auto | Why::Stored => " (auto: the store's model)",
                }
            ),
        }
    }

    /// Loads it: a local model (pulled first if missing, asking or with `yes`), or the
    /// endpoint's model (probed for its dimension).
    pub async fn load(self, yes: bool) -> Result<Option<Arc<dyn Embedder>>> {
        match self {
            Self::None(NoEmbedder::Unreachable(model)) => {
                eprintln!(
                    "note: this store's vectors come from {model}, which this configuration \
                     cannot reach (no endpoint): new messages are matched by words until they \
                     are embedded (`memgpt reindex`)"
                );
                Ok(None)
            }
            Self::None(_) => Ok(None),
            Self::Local { spec, .. } => local_embedder(spec, yes).await.map(Some),
            Self::OpenAi { config, .. } => {
                let model = config.model.clone();
                let embedder = OpenAiEmbedder::detect(*config)
                    .await
                    .with_context(|| format!("probing the embedding model {model}"))?;
                Ok(Some(Arc::new(embedder)))
            }
        }
    }
}

/// The embedder plan of the settings, for a store whose vectors come from `stored`.
pub fn plan(
    settings: &Settings,
    stored: Option<&EmbeddingSpace>,
    when_missing: WhenMissing,
) -> Result<EmbedderPlan> {
    let choice = EmbedderChoice::from_settings(settings)?;
    let endpoint = embedding_endpoint(settings)?;
    EmbedderPlan::resolve(&choice, endpoint.as_ref(), stored, when_missing)
}

/// The embedder the settings choose (whatever the chat provider), checked against the vectors
/// the store already holds (`stored`): a model of another space is refused with the way out
/// (`memgpt reindex`), before anything is written.
pub async fn embedder(
    settings: &Settings,
    stored: Option<&EmbeddingSpace>,
    when_missing: WhenMissing,
) -> Result<Option<Arc<dyn Embedder>>> {
    let choice = EmbedderChoice::from_settings(settings)?;
    let embedder = plan(settings, stored, when_missing)?
        .load(settings.assume_yes)
        .await?;
    if let (Some(embedder), Some(space)) = (&embedder, stored)
        && space
            .check_model(embedder.model(), embedder.dimension())
            .is_err()
    {
        bail!(
            "this store's vectors come from {} ({} dimensions) but the embedder `{choice}` is {} \
             ({} dimensions): re-embed the store with `memgpt reindex --embedder {choice}` \
             (resumable; what the agents remember is kept), or keep its model with --embedder {}",
            space.model,
            space.dimension,
            embedder.model(),
            embedder.dimension(),
            EmbedderChoice::for_model(&space.model)
        );
    }
    Ok(embedder)
}

/// The embedder `memgpt reindex` switches the store to: the one the settings name (`auto`:
/// the store's own model, pulled if missing); an error when they name none.
pub async fn required_embedder(
    settings: &Settings,
    stored: Option<&EmbeddingSpace>,
) -> Result<Arc<dyn Embedder>> {
    match plan(settings, stored, WhenMissing::Pull)?
        .load(settings.assume_yes)
        .await?
    {
        Some(embedder) => Ok(embedder),
        None => bail!(
            "reindex needs an embedder: pass --embedder all-minilm-l6-v2, all-mpnet-base-v2 or \
             openai:MODEL"
        ),
    }
}

/// The local embedding model `spec`, pulled if missing (asking first, or with `yes`).
async fn local_embedder(spec: &ModelSpec, yes: bool) -> Result<Arc<dyn Embedder>> {
    let cache = ModelCache::from_env();
    let Some(dir) = crate::pull::ensure(&cache, spec, yes).await? else {
        bail!(
            "the embedder {} was not downloaded (set embedder = \"none\" to go without)",
            spec.name
        );
    };
    Ok(Arc::new(
        memgpt::local_embed::LocalEmbedder::from_dir(dir)
            .with_context(|| format!("loading the local embedder {}", spec.name))?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn space(model: &str) -> EmbeddingSpace {
        EmbeddingSpace {
            model: model.to_owned(),
            dimension: 384,
        }
    }

    #[test]
    fn plans_are_decided_without_loading_anything() {
        let endpoint = OpenAiConfig::new("http://h:1/v1", "gpt-4o-mini");
        let plan = |choice: &str, endpoint, stored, when| {
            EmbedderPlan::resolve(
                &EmbedderChoice::parse(choice).unwrap(),
                endpoint,
                stored,
                when,
            )
        };
        let off = plan("none", Some(&endpoint), None, WhenMissing::Pull).unwrap();
        assert!(off.describe().starts_with("none (embedder = none"));
        // `auto` follows an endpoint model of the store through the endpoint.
        let stored = space("text-embedding-3-small");
        let follows = plan(
            "auto",
            Some(&endpoint),
            Some(&stored),
            WhenMissing::GoWithout,
        );
        let follows = follows.unwrap();
        assert_eq!(follows.model(), Some("text-embedding-3-small"));
        assert_eq!(
            follows.describe(),
            "openai:text-embedding-3-small at http://h:1/v1 (auto: the store's model)"
        );
        // ... and says why there is none without one.
        let cut_off = plan("auto", None, Some(&stored), WhenMissing::GoWithout).unwrap();
        assert!(matches!(
            cut_off,
            EmbedderPlan::None(NoEmbedder::Unreachable(_))
        ));
        let err = plan("openai:x", None, None, WhenMissing::GoWithout).unwrap_err();
        assert!(
            err.to_string().contains("needs an OpenAI-compatible"),
            "{err}"
        );
        // A named local model is always the plan, pulled when missing.
        let named = plan("all-mpnet-base-v2", None, None, WhenMissing::GoWithout).unwrap();
        assert_eq!(named.model(), Some("all-mpnet-base-v2"));
        assert!(named.describe().starts_with("all-mpnet-base-v2 (local"));
    }
}
