//! A local sentence embedder: BERT-family models (all-MiniLM-L6-v2 by default) run on the CPU
//! with candle. No network, no API key.
//!
//! Texts are tokenized with the model's own `tokenizer.json` (with its fixed 128-token padding
//! replaced by padding to the longest text of each batch: short texts are ~8x cheaper), run
//! through the encoder, mean-pooled over real tokens (the attention mask), and L2-normalised,
//! exactly as sentence-transformers does for this model. Batches are formed from texts of
//! similar length so little work is spent on padding.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use memgpt_core::embed::Embedder;
//! use memgpt_providers::local_embed::LocalEmbedder;
//! use memgpt_providers::models::{ModelCache, ALL_MINILM_L6_V2};
//!
//! let dir = ModelCache::from_env().find(&ALL_MINILM_L6_V2).ok_or("run: cargo run --example models -- pull all-minilm-l6-v2")?;
//! let embedder = LocalEmbedder::from_dir(&dir)?;
//! let vectors = embedder.embed(&["The cat sat on the mat".to_owned()]).await?;
//! assert_eq!(vectors[0].len(), 384);
//! # Ok(()) }
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use memgpt_core::embed::{EmbedError, Embedder};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

/// Why a local embedding model could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LocalEmbedError {
    /// A model file is missing or unreadable.
    #[error("{path}: {message}")]
    File {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// The model could not be built from its files.
    #[error("loading the model: {0}")]
    Model(String),
}

/// Sentence embeddings computed locally with candle (see the [module docs](self)).
#[derive(Clone)]
pub struct LocalEmbedder {
    inner: Arc<Inner>,
    model_id: String,
}

struct Inner {
    model: BertModel,
    tokenizer: Tokenizer,
    device: Device,
    dimension: usize,
    batch_size: usize,
}

impl std::fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("model", &self.model_id)
            .field("dimension", &self.inner.dimension)
            .field("batch_size", &self.inner.batch_size)
            .finish_non_exhaustive()
    }
}

/// Longest input, in tokens, as sentence-transformers configures all-MiniLM-L6-v2.
const MAX_TOKENS: usize = 256;

impl LocalEmbedder {
    /// Loads a model from a folder holding `config.json`, `tokenizer.json` and
    /// `model.safetensors` (a Hugging Face BERT checkpoint). The model id stored with every
    /// vector is the folder's name; see [`LocalEmbedder::with_model_id`].
    pub fn from_dir(dir: impl AsRef<Path>) -> Result<Self, LocalEmbedError> {
        let dir = dir.as_ref();
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read_to_string(&path).map_err(|e| LocalEmbedError::File {
                path,
                message: e.to_string(),
            })
        };
        let config: Config =
            serde_json::from_str(&read("config.json")?).map_err(|e| LocalEmbedError::File {
                path: dir.join("config.json"),
                message: e.to_string(),
            })?;
        let tokenizer_path = dir.join("tokenizer.json");
        let mut tokenizer =
            Tokenizer::from_file(&tokenizer_path).map_err(|e| LocalEmbedError::File {
                path: tokenizer_path.clone(),
                message: e.to_string(),
            })?;
        // The shipped tokenizer pads every text to 128 tokens; pad per batch instead.
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            pad_id: config.pad_token_id as u32,
            ..PaddingParams::default()
        }));
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS.min(config.max_position_embeddings),
                ..TruncationParams::default()
            }))
            .map_err(|e| LocalEmbedError::Model(e.to_string()))?;
        let weights = dir.join("model.safetensors");
        if !weights.is_file() {
            return Err(LocalEmbedError::File {
                path: weights,
                message: "not found".into(),
            });
        }
        let device = Device::Cpu;
        // SAFETY: the weights file is memory-mapped read-only; like every mmap it must not be
        // truncated while the model is alive, which the model cache never does (files are
        // replaced by rename, never rewritten in place).
        let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[&weights], DType::F32, &device) }
            .map_err(|e| LocalEmbedError::Model(e.to_string()))?;
        let model =
            BertModel::load(vb, &config).map_err(|e| LocalEmbedError::Model(e.to_string()))?;
        let model_id = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "local-bert".to_owned());
        Ok(Self {
            inner: Arc::new(Inner {
                model,
                tokenizer,
                device,
                dimension: config.hidden_size,
                batch_size: 32,
            }),
            model_id,
        })
    }

    /// Sets the model id stored with every vector (it must stay the same for as long as
    /// stored vectors are searched).
    pub fn with_model_id(mut self, id: impl Into<String>) -> Self {
        self.model_id = id.into();
        self
    }

    /// Sets how many texts are run through the model at once (default 32).
    pub fn with_batch_size(mut self, size: usize) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.batch_size = size.max(1);
        }
        self
    }

    /// Embeds texts on the calling thread (blocking; [`Embedder::embed`] runs this on tokio's
    /// blocking pool).
    pub fn embed_blocking(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.inner.embed(texts)
    }
}

impl Inner {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        // Similar lengths together: padding is wasted work.
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| texts[i].len());
        let mut out = vec![Vec::new(); texts.len()];
        for chunk in order.chunks(self.batch_size) {
            let batch: Vec<&str> = chunk.iter().map(|&i| texts[i]).collect();
            for (i, vector) in chunk.iter().zip(self.batch(&batch)?) {
                out[*i] = vector;
            }
        }
        Ok(out)
    }

    fn batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let failed = |e: &dyn std::fmt::Display| EmbedError::Permanent {
            message: format!("local embedding failed: {e}"),
        };
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| failed(&e))?;
        let len = encodings.first().map_or(0, |e| e.get_ids().len());
        let n = encodings.len();
        let mut ids = Vec::with_capacity(n * len);
        let mut mask = Vec::with_capacity(n * len);
        for encoding in &encodings {
            ids.extend_from_slice(encoding.get_ids());
            mask.extend_from_slice(encoding.get_attention_mask());
        }
        let run = || -> candle_core::Result<Vec<Vec<f32>>> {
            let ids = Tensor::from_vec(ids, (n, len), &self.device)?;
            let mask = Tensor::from_vec(mask, (n, len), &self.device)?;
            let token_types = ids.zeros_like()?;
            let hidden = self.model.forward(&ids, &token_types, Some(&mask))?;
            // Mean over real tokens, then unit length.
            let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
            let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
            let counts = mask.sum(1)?.clamp(1e-9f32, f32::MAX)?;
            let mean = summed.broadcast_div(&counts)?;
            let norms = mean
                .sqr()?
                .sum_keepdim(1)?
                .sqrt()?
                .clamp(1e-12f32, f32::MAX)?;
            mean.broadcast_div(&norms)?.to_vec2::<f32>()
        };
        run().map_err(|e| failed(&e))
    }
}

#[async_trait]
impl Embedder for LocalEmbedder {
    fn model(&self) -> &str {
        &self.model_id
    }

    fn dimension(&self) -> usize {
        self.inner.dimension
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let inner = Arc::clone(&self.inner);
        let texts = texts.to_vec();
        tokio::task::spawn_blocking(move || {
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            inner.embed(&refs)
        })
        .await
        .map_err(|e| EmbedError::Permanent {
            message: format!("local embedding task failed: {e}"),
        })?
    }
}
