//! The embedder behind the vector and hybrid arms: the local all-MiniLM-L6-v2 (no network),
//! or an OpenAI-compatible embeddings endpoint.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use memgpt::embed::Embedder;
use memgpt::openai::{OpenAiConfig, OpenAiEmbedder};
use memgpt_providers::local_embed::LocalEmbedder;
use memgpt_providers::models::{ALL_MINILM_L6_V2, ModelCache};

use crate::args::Args;

/// The embedder the options name, and a label saying which model it is.
pub fn embedder(args: &Args) -> Result<Arc<dyn Embedder>> {
    if let Some(url) = &args.embed_base_url {
        let model = args
            .embed_model
            .clone()
            .context("--embed-base-url needs --embed-model")?;
        let mut config = OpenAiConfig::new(url.clone(), model);
        config.api_key = std::env::var("OPENAI_API_KEY").ok();
        return Ok(Arc::new(OpenAiEmbedder::new(config, args.embed_dim)?));
    }
    let dir = match &args.embedder {
        Some(dir) => dir.clone(),
        None => local_model_dir().with_context(|| {
            format!(
                "the local embedder ({}) has not been pulled: run\n  cargo run --release \
                 --example models --features models -- pull {}\nor pass --embedder DIR, or \
                 --embed-base-url URL --embed-model NAME for an embeddings endpoint",
                ALL_MINILM_L6_V2.name, ALL_MINILM_L6_V2.name
            )
        })?,
    };
    if !dir.join("model.safetensors").exists() {
        bail!("{} holds no model.safetensors", dir.display());
    }
    Ok(Arc::new(
        LocalEmbedder::from_dir(&dir)
            .with_context(|| format!("loading the embedder in {}", dir.display()))?
            .with_model_id(ALL_MINILM_L6_V2.name),
    ))
}

/// The pulled all-MiniLM-L6-v2: `$MEMGPT_TEST_MODELS/all-minilm-l6-v2` (what CI fetches), or
/// the model cache (`$MEMGPT_HOME/models`).
fn local_model_dir() -> Option<PathBuf> {
    if let Some(root) = std::env::var_os("MEMGPT_TEST_MODELS") {
        let dir = PathBuf::from(root).join(ALL_MINILM_L6_V2.name);
        if dir.join("model.safetensors").exists() {
            return Some(dir);
        }
    }
    ModelCache::from_env().find(&ALL_MINILM_L6_V2)
}

/// Embeds many texts in batches, with a progress bar.
pub async fn embed_all(
    embedder: &dyn Embedder,
    texts: &[String],
    what: &str,
) -> Result<Vec<Vec<f32>>> {
    let bar = crate::report::progress(texts.len(), what);
    let mut out = Vec::with_capacity(texts.len());
    for chunk in texts.chunks(64) {
        out.extend(embedder.embed(chunk).await?);
        bar.inc(chunk.len() as u64);
    }
    bar.finish_and_clear();
    Ok(out)
}

/// Cosine similarity of two L2-normalised vectors.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Remembers every vector it computed, so the same text (a passage inserted into one agent
/// per question) is embedded once.
#[derive(Debug)]
pub struct CachedEmbedder {
    inner: Arc<dyn Embedder>,
    cache: std::sync::Mutex<std::collections::HashMap<String, Vec<f32>>>,
}

impl CachedEmbedder {
    pub fn new(inner: Arc<dyn Embedder>) -> Self {
        Self {
            inner,
            cache: std::sync::Mutex::default(),
        }
    }

    /// Adds known vectors.
    pub fn seed(&self, texts: &[String], vectors: &[Vec<f32>]) {
        if let Ok(mut cache) = self.cache.lock() {
            for (t, v) in texts.iter().zip(vectors) {
                cache.insert(t.clone(), v.clone());
            }
        }
    }
}

#[async_trait::async_trait]
impl Embedder for CachedEmbedder {
    fn model(&self) -> &str {
        self.inner.model()
    }

    fn dimension(&self) -> usize {
        self.inner.dimension()
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, memgpt::embed::EmbedError> {
        let missing: Vec<String> = {
            let cache =
                self.cache
                    .lock()
                    .map_err(|_| memgpt::embed::EmbedError::InvalidResponse {
                        message: "embedding cache poisoned".into(),
                    })?;
            texts
                .iter()
                .filter(|t| !cache.contains_key(*t))
                .cloned()
                .collect()
        };
        let fresh = if missing.is_empty() {
            Vec::new()
        } else {
            self.inner.embed(&missing).await?
        };
        let mut cache =
            self.cache
                .lock()
                .map_err(|_| memgpt::embed::EmbedError::InvalidResponse {
                    message: "embedding cache poisoned".into(),
                })?;
        for (t, v) in missing.into_iter().zip(fresh) {
            cache.insert(t, v);
        }
        texts
            .iter()
            .map(|t| {
                cache
                    .get(t)
                    .cloned()
                    .ok_or_else(|| memgpt::embed::EmbedError::InvalidResponse {
                        message: "the embedder returned too few vectors".into(),
                    })
            })
            .collect()
    }
}
