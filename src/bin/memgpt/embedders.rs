//! Choosing the embedder the settings name (`auto`, `none`, `local`, a catalog model, or
//! `openai:MODEL`), checked against the vectors a store already holds.

use std::sync::Arc;

use anyhow::{Context, Result, bail};
use memgpt::embed::Embedder;
use memgpt::models::{ModelCache, ModelSpec};
use memgpt::openai::{OpenAiConfig, OpenAiEmbedder};
use memgpt::store::EmbeddingSpace;

use crate::settings::Settings;

/// The embedder the settings choose (see [`choose_embedder`]), checked against the vectors
/// the store already holds (`stored`): a model of another space is refused with the way out
/// (`memgpt reindex`), before anything is written.
pub async fn embedder(
    settings: &Settings,
    endpoint: Option<&OpenAiConfig>,
    stored: Option<&EmbeddingSpace>,
) -> Result<Option<Arc<dyn Embedder>>> {
    let embedder = choose_embedder(settings, endpoint, stored, false).await?;
    if let (Some(embedder), Some(space)) = (&embedder, stored)
        && space
            .check_model(embedder.model(), embedder.dimension())
            .is_err()
    {
        let choice = settings.get("embedder").unwrap_or("auto");
        bail!(
            "this store's vectors come from {} ({} dimensions) but the embedder `{choice}` is {}              ({} dimensions): re-embed the store with `memgpt reindex --embedder {choice}`              (resumable; what the agents remember is kept), or keep its model with --embedder {}",
            space.model,
            space.dimension,
            embedder.model(),
            embedder.dimension(),
            embedder_setting(&space.model)
        );
    }
    Ok(embedder)
}

/// What to pass as `--embedder` to get the model `model`.
fn embedder_setting(model: &str) -> String {
    match local_model(model) {
        Some(spec) => spec.name.to_owned(),
        None => format!("openai:{model}"),
    }
}

/// The catalog's embedding model called `name`.
fn local_model(name: &str) -> Option<&'static memgpt::models::ModelSpec> {
    memgpt::models::lookup(name).filter(|spec| spec.kind == memgpt::models::ModelKind::Embedding)
}

/// The embedder the settings name: `none`; `local` (the light local model, all-minilm-l6-v2);
/// a local model of the catalog by name (`all-minilm-l6-v2`, `all-mpnet-base-v2`), pulled if
/// missing (asking first, or with `--yes`); `openai:MODEL` through the endpoint; `auto` = the
/// model the store's vectors come from (`stored`), or the light local model for a store
/// without vectors, used only when already present (with `required`, pulled like a named one).
pub async fn choose_embedder(
    settings: &Settings,
    endpoint: Option<&OpenAiConfig>,
    stored: Option<&EmbeddingSpace>,
    required: bool,
) -> Result<Option<Arc<dyn Embedder>>> {
    use memgpt::models::ALL_MINILM_L6_V2;
    let yes = settings.assume_yes;
    let choice = settings.get("embedder").unwrap_or("auto");
    let openai = |model: &str| {
        let Some(endpoint) = endpoint else {
            bail!(
                "embedder `openai:{model}` needs an OpenAI-compatible endpoint (base_url or api_key)"
            )
        };
        Ok(OpenAiConfig {
            model: model.to_owned(),
            ..endpoint.clone()
        })
    };
    match choice {
        "none" => Ok(None),
        "auto" => match stored {
            None => local_embedder(&ALL_MINILM_L6_V2, required, yes).await,
            Some(space) => match local_model(&space.model) {
                Some(spec) => local_embedder(spec, required, yes).await,
                None if endpoint.is_some() => {
                    let config = openai(&space.model)?;
                    Ok(Some(detect_openai(config).await?))
                }
                None => {
                    eprintln!(
                        "note: this store's vectors come from {}, which this configuration cannot \
                         reach (no endpoint): new messages are matched by words until they are \
                         embedded (`memgpt reindex`)",
                        space.model
                    );
                    Ok(None)
                }
            },
        },
        "local" => local_embedder(&ALL_MINILM_L6_V2, true, yes).await,
        other => match (other.strip_prefix("openai:"), local_model(other)) {
            (Some(model), _) => Ok(Some(detect_openai(openai(model)?).await?)),
            (None, Some(spec)) => local_embedder(spec, true, yes).await,
            (None, None) => bail!(
                "setting `embedder` is `{other}`: use auto, none, local, {} or openai:MODEL",
                memgpt::models::CATALOG
                    .iter()
                    .filter(|s| s.kind == memgpt::models::ModelKind::Embedding)
                    .map(|s| s.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        },
    }
}

async fn detect_openai(config: OpenAiConfig) -> Result<Arc<dyn Embedder>> {
    let model = config.model.clone();
    let embedder = OpenAiEmbedder::detect(config)
        .await
        .with_context(|| format!("probing the embedding model {model}"))?;
    Ok(Arc::new(embedder))
}

/// The local embedding model `spec`: `required` pulls it if missing (asking first, or with
/// `--yes`); otherwise it is used only when already present.
pub async fn local_embedder(
    spec: &ModelSpec,
    required: bool,
    yes: bool,
) -> Result<Option<Arc<dyn Embedder>>> {
    let cache = ModelCache::from_env();
    let dir = match cache.find(spec) {
        Some(dir) => dir,
        None if required => match crate::pull::ensure(&cache, spec, yes).await? {
            Some(dir) => dir,
            None => bail!(
                "the embedder {} was not downloaded (set embedder = \"none\" to go without)",
                spec.name
            ),
        },
        None => return Ok(None),
    };
    Ok(Some(Arc::new(
        memgpt::local_embed::LocalEmbedder::from_dir(dir)
            .with_context(|| format!("loading the local embedder {}", spec.name))?,
    )))
}
