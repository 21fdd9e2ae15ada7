//! A local sentence embedder: BERT-family sentence encoders (all-MiniLM-L6-v2,
//! all-mpnet-base-v2) run on the CPU. No network, no API key.
//!
//! Texts are tokenized with the model's own `tokenizer.json`, run through the encoder, mean-pooled
//! over their tokens and L2-normalised, exactly as sentence-transformers does for these models.
//!
//! **Long texts** are not cut off: a text longer than the model's window
//! ([`LocalEmbedder::max_tokens`]: 256 tokens for MiniLM, 384 for MPNet) is embedded as several
//! consecutive windows ([`LocalEmbedder::embed_windows_blocking`], [`Embedder::embed_windows`]),
//! up to [`LocalEmbedder::with_max_windows`] of them; [`Embedder::embed`] returns the first
//! window's vector, as sentence-transformers' truncation does.
//!
//! **Speed.** The encoder is our own (`encoder.rs`): the windows of a batch are packed end to end
//! so the dense layers are a few large matrix products with no padding, attention runs per
//! window and head in parallel, and bias, residual, GELU and layer norm are fused around the
//! products; both cores work on every batch. BENCHMARKS.md has the figures against the previous
//! candle-based embedder.
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

mod bf16;
mod encoder;
mod kernels;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use memgpt_core::embed::{EmbedError, Embedder};
use tokenizers::Tokenizer;

use encoder::{Encoder, EncoderConfig};

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

/// The arithmetic of the encoder's large matrix products.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Precision {
    /// bfloat16 products with f32 sums where the CPU has AVX-512 BF16 (twice as fast; vectors
    /// within about 1e-3 cosine of f32 ones), f32 elsewhere. The default.
    #[default]
    Fastest,
    /// f32 throughout, on every CPU.
    F32,
}

/// Whether this CPU runs the encoder's large products in bfloat16 ([`Precision::Fastest`]).
pub fn bf16_available() -> bool {
    bf16::available()
}

/// Sentence embeddings computed locally (see the [module docs](self)).
#[derive(Clone)]
pub struct LocalEmbedder {
    inner: Arc<Inner>,
    model_id: String,
    max_windows: usize,
    batch_tokens: usize,
}

struct Inner {
    encoder: Encoder,
    tokenizer: Tokenizer,
    /// Tokens per window, special tokens included.
    max_tokens: usize,
    /// The special tokens the tokenizer adds to every window (`[CLS]`, `[SEP]`...).
    specials: usize,
}

impl std::fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("model", &self.model_id)
            .field("dimension", &self.inner.encoder.hidden())
            .field("max_tokens", &self.inner.max_tokens)
            .field("max_windows", &self.max_windows)
            .finish_non_exhaustive()
    }
}

/// The longest input, in tokens, sentence-transformers gives a model when its folder does not
/// say (`sentence_bert_config.json`): all-MiniLM-L6-v2's.
const DEFAULT_MAX_TOKENS: usize = 256;

/// Windows per text by default: about 4,000 tokens of MiniLM, 6,000 of MPNet.
pub const DEFAULT_MAX_WINDOWS: usize = 16;

/// Tokens run through the encoder at once by default.
const DEFAULT_BATCH_TOKENS: usize = 4096;

impl LocalEmbedder {
    /// Loads a model from a folder holding `config.json`, `tokenizer.json` and
    /// `model.safetensors` (a Hugging Face BERT or MPNet checkpoint), and optionally
    /// `sentence_bert_config.json` (its `max_seq_length` sets the window). The model id stored
    /// with every vector is the folder's name; see [`LocalEmbedder::with_model_id`].
    pub fn from_dir(dir: impl AsRef<Path>) -> Result<Self, LocalEmbedError> {
        Self::load(dir, Precision::default())
    }

    /// [`LocalEmbedder::from_dir`] with a choice of [`Precision`].
    pub fn load(dir: impl AsRef<Path>, precision: Precision) -> Result<Self, LocalEmbedError> {
        let dir = dir.as_ref();
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read_to_string(&path).map_err(|e| LocalEmbedError::File {
                path,
                message: e.to_string(),
            })
        };
        let config: EncoderConfig =
            serde_json::from_str(&read("config.json")?).map_err(|e| LocalEmbedError::File {
                path: dir.join("config.json"),
                message: e.to_string(),
            })?;
        let configured = read("sentence_bert_config.json")
            .ok()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .and_then(|v| v["max_seq_length"].as_u64())
            .map(|n| n as usize);
        let tokenizer_path = dir.join("tokenizer.json");
        let mut tokenizer =
            Tokenizer::from_file(&tokenizer_path).map_err(|e| LocalEmbedError::File {
                path: tokenizer_path.clone(),
                message: e.to_string(),
            })?;
        // The shipped tokenizers pad every text to 128 tokens and truncate it; windows are cut
        // here instead, and nothing is padded.
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(None)
            .map_err(|e| LocalEmbedError::Model(e.to_string()))?;
        let weights = dir.join("model.safetensors");
        if !weights.is_file() {
            return Err(LocalEmbedError::File {
                path: weights,
                message: "not found".into(),
            });
        }
        let encoder = Encoder::load(
            &weights,
            &config,
            precision == Precision::Fastest && bf16::available(),
        )
        .map_err(LocalEmbedError::Model)?;
        let max_tokens = configured
            .unwrap_or(DEFAULT_MAX_TOKENS)
            .min(encoder.max_positions());
        if max_tokens < 3 {
            return Err(LocalEmbedError::Model(format!(
                "a window of {max_tokens} tokens holds no text"
            )));
        }
        let specials = tokenizer
            .encode("", true)
            .map_err(|e| LocalEmbedError::Model(e.to_string()))?
            .get_ids()
            .len();
        let model_id = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "local-bert".to_owned());
        Ok(Self {
            inner: Arc::new(Inner {
                encoder,
                tokenizer,
                max_tokens,
                specials,
            }),
            model_id,
            max_windows: DEFAULT_MAX_WINDOWS,
            batch_tokens: DEFAULT_BATCH_TOKENS,
        })
    }

    /// Sets the model id stored with every vector (it must stay the same for as long as
    /// stored vectors are searched).
    pub fn with_model_id(mut self, id: impl Into<String>) -> Self {
        self.model_id = id.into();
        self
    }

    /// Sets how many tokens are run through the encoder at once (default 4,096; at least one
    /// window's worth). Results do not depend on it.
    pub fn with_batch_tokens(mut self, tokens: usize) -> Self {
        self.batch_tokens = tokens.max(1);
        self
    }

    /// Sets how many texts are run through the encoder at once: kept for compatibility, it
    /// sets a token budget of `size` full windows ([`LocalEmbedder::with_batch_tokens`]).
    pub fn with_batch_size(self, size: usize) -> Self {
        let tokens = size.max(1) * self.inner.max_tokens;
        self.with_batch_tokens(tokens)
    }

    /// Sets the most windows a long text is embedded as (default [`DEFAULT_MAX_WINDOWS`]; at
    /// least 1). Text past the last window has no vector (its words are still indexed for text
    /// search).
    pub fn with_max_windows(mut self, windows: usize) -> Self {
        self.max_windows = windows.max(1);
        self
    }

    /// The tokens one window holds, special tokens included.
    pub fn max_tokens(&self) -> usize {
        self.inner.max_tokens
    }

    /// The tokens of text one window holds (special tokens excluded).
    pub fn window_tokens(&self) -> usize {
        self.inner
            .max_tokens
            .saturating_sub(self.inner.specials)
            .max(1)
    }

    /// How many tokens the model's tokenizer makes of `text`, special tokens excluded.
    pub fn count_tokens(&self, text: &str) -> Result<usize, EmbedError> {
        let encoding = self
            .inner
            .tokenizer
            .encode(text, false)
            .map_err(|e| failed(&e))?;
        Ok(encoding.get_ids().len())
    }

    /// Embeds texts on the calling thread (blocking; [`Embedder::embed`] runs this on tokio's
    /// blocking pool): each text's first window.
    pub fn embed_blocking(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        // One window per text (an empty text too), so the vectors are in text order.
        self.run(&self.windows(texts, 1)?)
    }

    /// Embeds texts on the calling thread: every window of each text (at most
    /// [`LocalEmbedder::with_max_windows`]), in order.
    pub fn embed_windows_blocking(&self, texts: &[&str]) -> Result<Vec<Vec<Vec<f32>>>, EmbedError> {
        let windows = self.windows(texts, self.max_windows)?;
        let mut vectors = self.run(&windows)?.into_iter();
        let mut out: Vec<Vec<Vec<f32>>> = vec![Vec::new(); texts.len()];
        for (text, _) in &windows {
            if let Some(v) = vectors.next() {
                out[*text].push(v);
            }
        }
        Ok(out)
    }

    /// The token windows of `texts`: `(text index, ids with special tokens)`, at most `max` per
    /// text, in text order.
    fn windows(&self, texts: &[&str], max: usize) -> Result<Vec<(usize, Vec<u32>)>, EmbedError> {
        let encodings = self
            .inner
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| failed(&e))?;
        let mut out = Vec::with_capacity(texts.len());
        for (t, encoding) in encodings.iter().enumerate() {
            let ids = encoding.get_ids();
            let special = encoding.get_special_tokens_mask();
            let lead = special.iter().take_while(|&&s| s == 1).count();
            let trail = special[lead..]
                .iter()
                .rev()
                .take_while(|&&s| s == 1)
                .count();
            let (head, body, tail) = (
                &ids[..lead],
                &ids[lead..ids.len() - trail],
                &ids[ids.len() - trail..],
            );
            let room = self.inner.max_tokens.saturating_sub(lead + trail).max(1);
            let pieces: Vec<&[u32]> = if body.is_empty() {
                vec![body]
            } else {
                body.chunks(room).take(max).collect()
            };
            for piece in pieces {
                let mut window = Vec::with_capacity(piece.len() + lead + trail);
                window.extend_from_slice(head);
                window.extend_from_slice(piece);
                window.extend_from_slice(tail);
                out.push((t, window));
            }
        }
        Ok(out)
    }

    /// Runs windows through the encoder in batches of about `batch_tokens` tokens; vectors in
    /// window order.
    fn run(&self, windows: &[(usize, Vec<u32>)]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut out = Vec::with_capacity(windows.len());
        let mut start = 0;
        while start < windows.len() {
            let mut end = start;
            let mut tokens = 0;
            while end < windows.len()
                && (end == start || tokens + windows[end].1.len() <= self.batch_tokens)
            {
                tokens += windows[end].1.len();
                end += 1;
            }
            let batch: Vec<&[u32]> = windows[start..end]
                .iter()
                .map(|(_, w)| w.as_slice())
                .collect();
            out.extend(self.inner.encoder.embed(&batch).map_err(|e| failed(&e))?);
            start = end;
        }
        Ok(out)
    }
}

fn failed(e: &dyn std::fmt::Display) -> EmbedError {
    EmbedError::Permanent {
        message: format!("local embedding failed: {e}"),
    }
}

#[async_trait]
impl Embedder for LocalEmbedder {
    fn model(&self) -> &str {
        &self.model_id
    }

    fn dimension(&self) -> usize {
        self.inner.encoder.hidden()
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let this = self.clone();
        let texts = texts.to_vec();
        blocking(move || {
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            this.embed_blocking(&refs)
        })
        .await
    }

    fn window_tokens(&self) -> Option<usize> {
        Some(LocalEmbedder::window_tokens(self))
    }

    fn count_tokens(&self, text: &str) -> Option<usize> {
        LocalEmbedder::count_tokens(self, text).ok()
    }

    async fn embed_windows(&self, texts: &[String]) -> Result<Vec<Vec<Vec<f32>>>, EmbedError> {
        let this = self.clone();
        let texts = texts.to_vec();
        blocking(move || {
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            this.embed_windows_blocking(&refs)
        })
        .await
    }
}

/// Runs embedding work on tokio's blocking pool.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, EmbedError> + Send + 'static,
) -> Result<T, EmbedError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| EmbedError::Permanent {
            message: format!("local embedding task failed: {e}"),
        })?
}
