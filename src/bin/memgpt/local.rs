//! The offline path: the local chat model (pure Rust, on candle) and the local embedder that
//! goes with it, pulled into the model cache on first use.

use std::sync::Arc;

use anyhow::{Context, Result};
use memgpt::models::ModelCache;

use crate::provider::{Llm, ProviderKind};
use crate::settings::Settings;

/// The local chat model and embedder; `Ok(None)` when the user declines the download.
pub async fn llm(
    settings: &Settings,
    stored: Option<&memgpt::store::EmbeddingSpace>,
) -> Result<Option<Llm>> {
    use memgpt::local::{LlamaConfig, LlamaProvider};
    use memgpt::models::SMOLLM2_135M_INSTRUCT;

    let cache = ModelCache::from_env();
    let Some(dir) =
        crate::pull::ensure(&cache, &SMOLLM2_135M_INSTRUCT, settings.assume_yes).await?
    else {
        return Ok(None);
    };
    let threads = std::env::var("MEMGPT_THREADS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(1);
    let mut config = LlamaConfig::new(dir.join("model.gguf")).with_threads(threads);
    config.model_id = Some(SMOLLM2_135M_INSTRUCT.name.to_owned());
    let provider = LlamaProvider::new(config).context("loading the local chat model")?;
    // Offline, `auto` pulls the embedder too: the local agent is all local.
    let embedder = match settings.get("embedder").unwrap_or("auto") {
        "none" => None,
        "auto" => crate::embedders::choose_embedder(settings, None, stored, true).await?,
        _ => crate::embedders::embedder(settings, None, stored).await?,
    };
    Ok(Some(Llm {
        provider: Arc::new(provider),
        kind: ProviderKind::Local,
        description: format!(
            "local model {} on {threads} thread(s){}, offline",
            SMOLLM2_135M_INSTRUCT.name,
            match &embedder {
                Some(e) => format!(" with the local embedder {}", e.model()),
                None => String::new(),
            }
        ),
        embedder,
    }))
}
