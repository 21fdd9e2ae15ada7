//! The offline chat model: SmolLM2 on candle, pure Rust, pulled into the model cache on first
//! use. (Its embedder is chosen like every provider's: `crate::embedders`.)

use std::sync::Arc;

use anyhow::{Context, Result};
use memgpt::llm::LlmProvider;
use memgpt::models::ModelCache;

use crate::settings::Settings;

/// The local chat model, loaded.
pub struct LocalModel {
    /// The provider.
    pub provider: Arc<dyn LlmProvider>,
    /// `local model smollm2-135m-instruct on 1 thread(s)`.
    pub description: String,
}

/// The local chat model; `Ok(None)` when the user declines the download.
pub async fn provider(settings: &Settings) -> Result<Option<LocalModel>> {
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
    Ok(Some(LocalModel {
        provider: Arc::new(provider),
        description: format!(
            "local model {} on {threads} thread(s)",
            SMOLLM2_135M_INSTRUCT.name
        ),
    }))
}
