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
/// per question, a conversation imported again by the next run) is embedded once. With
/// [`CachedEmbedder::persistent`] the vectors are also kept on disk, per model, and a later run
/// starts with them (the vectors are the embedder's own: results do not change, only the time).
#[derive(Debug)]
pub struct CachedEmbedder {
    inner: Arc<dyn Embedder>,
    cache: std::sync::Mutex<Cache>,
}

#[derive(Debug, Default)]
struct Cache {
    /// By [`key`]: a text's first window (`embed`) or all its windows (`embed_windows`).
    vectors: std::collections::HashMap<[u8; 32], Vec<Vec<f32>>>,
    file: Option<std::fs::File>,
}

/// The cache key of `text` embedded whole (`windows`) or by its first window.
fn key(text: &str, windows: bool) -> [u8; 32] {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(if windows { b"w" } else { b"1" });
    h.update(text.as_bytes());
    h.finalize().into()
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
                cache.vectors.insert(key(t, false), vec![v.clone()]);
            }
        }
    }

    /// Keeps the vectors in `dir/<model>.vectors` too (records of the key, the window count,
    /// the dimension and the floats), loading what an earlier run stored. A torn last record
    /// is dropped.
    pub fn persistent(self, dir: &std::path::Path) -> Result<Self> {
        use std::io::{Read, Write};
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let name: String = self
            .inner
            .model()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let path = dir.join(format!("{name}.windows"));
        let mut good = 0u64;
        {
            let mut cache = self
                .cache
                .lock()
                .map_err(|_| anyhow::anyhow!("embedding cache poisoned"))?;
            if let Ok(file) = std::fs::File::open(&path) {
                let mut reader = std::io::BufReader::new(file);
                loop {
                    let mut head = [0u8; 38];
                    if reader.read_exact(&mut head).is_err() {
                        break;
                    }
                    let count = u16::from_le_bytes([head[32], head[33]]) as usize;
                    let dim = u32::from_le_bytes([head[34], head[35], head[36], head[37]]) as usize;
                    if dim != self.inner.dimension() {
                        break;
                    }
                    let mut bytes = vec![0u8; count * dim * 4];
                    if reader.read_exact(&mut bytes).is_err() {
                        break;
                    }
                    let floats: Vec<f32> = bytes
                        .chunks_exact(4)
                        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                        .collect();
                    let mut k = [0u8; 32];
                    k.copy_from_slice(&head[..32]);
                    cache
                        .vectors
                        .insert(k, floats.chunks(dim.max(1)).map(<[f32]>::to_vec).collect());
                    good += 38 + bytes.len() as u64;
                }
            }
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .with_context(|| format!("opening {}", path.display()))?;
            if file.metadata()?.len() != good {
                file.set_len(good)?;
            }
            file.flush()?;
            cache.file = Some(file);
            if !cache.vectors.is_empty() {
                eprintln!(
                    "note: {} cached embeddings of {} from {}",
                    cache.vectors.len(),
                    self.inner.model(),
                    path.display()
                );
            }
        }
        Ok(self)
    }

    /// Each text's vectors, from the cache or (the missing ones) from the embedder.
    async fn lookup(
        &self,
        texts: &[String],
        windows: bool,
    ) -> Result<Vec<Vec<Vec<f32>>>, memgpt::embed::EmbedError> {
        let poisoned = || memgpt::embed::EmbedError::InvalidResponse {
            message: "embedding cache poisoned".into(),
        };
        let keys: Vec<[u8; 32]> = texts.iter().map(|t| key(t, windows)).collect();
        let missing: Vec<(usize, String)> = {
            let cache = self.cache.lock().map_err(|_| poisoned())?;
            let mut seen = std::collections::HashSet::new();
            texts
                .iter()
                .zip(&keys)
                .enumerate()
                .filter(|(_, (_, k))| !cache.vectors.contains_key(*k) && seen.insert(**k))
                .map(|(i, (t, _))| (i, t.clone()))
                .collect()
        };
        let fresh: Vec<Vec<Vec<f32>>> = if missing.is_empty() {
            Vec::new()
        } else {
            let texts: Vec<String> = missing.iter().map(|(_, t)| t.clone()).collect();
            if windows {
                self.inner.embed_windows(&texts).await?
            } else {
                self.inner
                    .embed(&texts)
                    .await?
                    .into_iter()
                    .map(|v| vec![v])
                    .collect()
            }
        };
        let mut cache = self.cache.lock().map_err(|_| poisoned())?;
        let mut record = Vec::new();
        for ((i, _), vs) in missing.iter().zip(fresh) {
            record.extend_from_slice(&keys[*i]);
            record.extend_from_slice(&(vs.len() as u16).to_le_bytes());
            record.extend_from_slice(&(vs.first().map_or(0, Vec::len) as u32).to_le_bytes());
            for v in &vs {
                for x in v {
                    record.extend_from_slice(&x.to_le_bytes());
                }
            }
            cache.vectors.insert(keys[*i], vs);
        }
        if let Some(file) = cache.file.as_mut()
            && !record.is_empty()
        {
            use std::io::Write;
            if let Err(e) = file.write_all(&record) {
                eprintln!("warning: the embedding cache could not be written: {e}");
                cache.file = None;
            }
        }
        keys.iter()
            .map(|k| {
                cache.vectors.get(k).cloned().ok_or_else(|| {
                    memgpt::embed::EmbedError::InvalidResponse {
                        message: "the embedder returned too few vectors".into(),
                    }
                })
            })
            .collect()
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

    fn window_tokens(&self) -> Option<usize> {
        self.inner.window_tokens()
    }

    fn count_tokens(&self, text: &str) -> Option<usize> {
        self.inner.count_tokens(text)
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, memgpt::embed::EmbedError> {
        Ok(self
            .lookup(texts, false)
            .await?
            .into_iter()
            .map(|mut v| v.swap_remove(0))
            .collect())
    }

    async fn embed_windows(
        &self,
        texts: &[String],
    ) -> Result<Vec<Vec<Vec<f32>>>, memgpt::embed::EmbedError> {
        self.lookup(texts, true).await
    }
}
