//! [`OpenAiEmbedder`]: embeddings from an OpenAI-compatible endpoint.

use async_trait::async_trait;
use memgpt_core::embed::{EmbedError, Embedder};
use memgpt_core::llm::LlmError;
use reqwest::Client;

use super::wire::{EmbeddingBody, EmbeddingResponse};
use super::{ConfigError, OpenAiConfig, OpenAiProvider, llm_error};
use crate::http;

/// An embedder for any OpenAI-compatible `/embeddings` endpoint. The config's `model` is the
/// embedding model.
#[derive(Clone, Debug)]
pub struct OpenAiEmbedder {
    provider: OpenAiProvider,
    dimension: usize,
    batch_size: usize,
}

impl OpenAiEmbedder {
    /// An embedder whose model produces `dimension`-d vectors.
    pub fn new(config: OpenAiConfig, dimension: usize) -> Result<Self, ConfigError> {
        if dimension == 0 {
            return Err(ConfigError::Invalid(
                "the embedding dimension must be positive".into(),
            ));
        }
        Ok(Self {
            provider: OpenAiProvider::new(config)?,
            dimension,
            batch_size: 128,
        })
    }

    /// An embedder for a model of known dimension (OpenAI's `text-embedding-3-small`,
    /// `text-embedding-3-large`, `text-embedding-ada-002`; `nomic-embed-text`,
    /// `mxbai-embed-large`, `all-minilm`), or `None`.
    pub fn for_known_model(config: OpenAiConfig) -> Option<Result<Self, ConfigError>> {
        let dimension = known_dimension(&config.model)?;
        Some(Self::new(config, dimension))
    }

    /// An embedder whose dimension is found by embedding one probe text.
    pub async fn detect(config: OpenAiConfig) -> Result<Self, EmbedError> {
        let mut embedder = Self::new(config, 1).map_err(|e| EmbedError::Permanent {
            message: e.to_string(),
        })?;
        let vectors = embedder.request(&["dimension probe".to_owned()]).await?;
        embedder.dimension = vectors
            .first()
            .map(Vec::len)
            .filter(|&d| d > 0)
            .ok_or_else(|| EmbedError::InvalidResponse {
                message: "the probe returned no vector".into(),
            })?;
        Ok(embedder)
    }

    /// Texts per request (default 128).
    pub fn with_batch_size(mut self, size: usize) -> Self {
        self.batch_size = size.max(1);
        self
    }

    async fn request(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let config = self.provider.config();
        let body = serde_json::to_vec(&EmbeddingBody {
            model: &config.model,
            input: texts,
            encoding_format: "float",
        })
        .map(bytes::Bytes::from)
        .map_err(|e| EmbedError::Permanent {
            message: e.to_string(),
        })?;
        let url = config.url("embeddings");
        let client: &Client = &self.provider.client;
        let response = http::send_with_retry(
            &config.http,
            || self.provider.request(client, &url, &body),
            |_| false,
        )
        .await
        .map_err(|f| match llm_error(f) {
            e @ LlmError::Transient { .. } => EmbedError::Transient {
                message: e.to_string(),
            },
            e => EmbedError::Permanent {
                message: e.to_string(),
            },
        })?;
        let parsed: EmbeddingResponse =
            serde_json::from_str(&response.body).map_err(|e| EmbedError::InvalidResponse {
                message: format!("{e}: {}", super::truncate(&response.body)),
            })?;
        if parsed.data.len() != texts.len() {
            return Err(EmbedError::InvalidResponse {
                message: format!("{} vectors for {} texts", parsed.data.len(), texts.len()),
            });
        }
        let mut data = parsed.data;
        data.sort_by_key(|d| d.index.unwrap_or(usize::MAX));
        Ok(data.into_iter().map(|d| d.embedding).collect())
    }
}

fn known_dimension(model: &str) -> Option<usize> {
    let model = model.rsplit('/').next().unwrap_or(model);
    let model = model.split(':').next().unwrap_or(model);
    match model {
        "text-embedding-3-small" | "text-embedding-ada-002" => Some(1536),
        "text-embedding-3-large" => Some(3072),
        "nomic-embed-text" => Some(768),
        "mxbai-embed-large" => Some(1024),
        "all-minilm" | "all-MiniLM-L6-v2" => Some(384),
        _ => None,
    }
}

#[async_trait]
impl Embedder for OpenAiEmbedder {
    fn model(&self) -> &str {
        &self.provider.config().model
    }

    fn dimension(&self) -> usize {
        self.dimension
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(self.batch_size) {
            let vectors = self.request(batch).await?;
            if let Some(bad) = vectors.iter().find(|v| v.len() != self.dimension) {
                return Err(EmbedError::InvalidResponse {
                    message: format!(
                        "model {} returned a {}-d vector, expected {}",
                        self.model(),
                        bad.len(),
                        self.dimension
                    ),
                });
            }
            out.extend(vectors);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dimensions() {
        assert_eq!(known_dimension("text-embedding-3-small"), Some(1536));
        assert_eq!(known_dimension("nomic-embed-text:latest"), Some(768));
        assert_eq!(known_dimension("openai/text-embedding-3-large"), Some(3072));
        assert_eq!(known_dimension("mystery"), None);
    }
}
