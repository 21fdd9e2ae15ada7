//! The embedding seam: texts in, vectors out.
//!
//! Every stored vector carries the model id and dimension that produced it ([`Embedding`]), so
//! comparing vectors from different models is an error, never silent garbage.

use std::fmt;
use std::hash::{Hash, Hasher};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// A vector together with the model that produced it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Embedding {
    /// The embedding model id.
    pub model: String,
    /// The vector (its length is the dimension).
    pub vector: Vec<f32>,
}

impl Embedding {
    /// The vector's dimension.
    pub fn dimension(&self) -> usize {
        self.vector.len()
    }
}

/// Why embedding failed.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmbedError {
    /// A failure that may succeed later (already retried by the provider).
    #[error("transient embedding error: {message}")]
    Transient {
        /// What happened.
        message: String,
    },
    /// A failure that will not go away by retrying.
    #[error("embedding error: {message}")]
    Permanent {
        /// What happened.
        message: String,
    },
    /// The provider returned vectors of the wrong count or dimension.
    #[error("invalid embedding response: {message}")]
    InvalidResponse {
        /// What was wrong.
        message: String,
    },
}

/// Turns texts into vectors.
#[async_trait]
pub trait Embedder: Send + Sync + fmt::Debug {
    /// The model id stored with every vector.
    fn model(&self) -> &str;

    /// The vectors' dimension.
    fn dimension(&self) -> usize;

    /// Embeds a batch of texts: one vector of [`Embedder::dimension`] floats per text, in order.
    /// A text longer than the model reads is embedded by what the model reads of it (its first
    /// window); see [`Embedder::embed_windows`].
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError>;

    /// The most tokens, in the model's own tokens, one window of text holds (special tokens
    /// excluded), when the embedder knows: what archival chunking keeps passages under, so that
    /// every word of a passage is embedded. `None` (the default) when unknown.
    fn window_tokens(&self) -> Option<usize> {
        None
    }

    /// How many of the model's tokens `text` is, when the embedder knows ([`None`] by default;
    /// then callers count with their own tokenizer).
    fn count_tokens(&self, text: &str) -> Option<usize> {
        let _ = text;
        None
    }

    /// Embeds texts of any length: one or more vectors per text, in order, one per consecutive
    /// window of the text the model can read (a text within one window gets one). Recall search
    /// scores a message by its best window.
    ///
    /// The default embeds each text once with [`Embedder::embed`].
    async fn embed_windows(&self, texts: &[String]) -> Result<Vec<Vec<Vec<f32>>>, EmbedError> {
        Ok(self
            .embed(texts)
            .await?
            .into_iter()
            .map(|v| vec![v])
            .collect())
    }

    /// Embeds one text into an [`Embedding`].
    async fn embed_one(&self, text: &str) -> Result<Embedding, EmbedError> {
        let mut vectors = self.embed(&[text.to_owned()]).await?;
        let vector = vectors.pop().ok_or_else(|| EmbedError::InvalidResponse {
            message: "no vector returned".into(),
        })?;
        Ok(Embedding {
            model: self.model().to_owned(),
            vector,
        })
    }
}

/// A lexical embedder that needs no model: feature hashing of words and character trigrams
/// into a fixed number of signed buckets, L2-normalised.
///
/// It captures word overlap, not meaning. It is deterministic, fast and offline, which makes it
/// a fallback for machines without an embedding model, and good at exact tokens such as UUIDs
/// where semantic models are weak.
///
/// ```
/// use memgpt_core::embed::{cosine, HashingEmbedder};
///
/// let e = HashingEmbedder::new(256);
/// let a = e.vector("the cat sat on the mat");
/// let b = e.vector("a cat sat on a mat");
/// let c = e.vector("quarterly revenue forecast");
/// assert!(cosine(&a, &b) > cosine(&a, &c));
/// ```
#[derive(Clone, Debug)]
pub struct HashingEmbedder {
    dimension: usize,
    model: String,
}

impl HashingEmbedder {
    /// An embedder producing `dimension`-d vectors.
    pub fn new(dimension: usize) -> Self {
        let dimension = dimension.max(1);
        Self {
            dimension,
            model: format!("memgpt-hashing-v1-{dimension}"),
        }
    }

    /// Embeds one text synchronously.
    pub fn vector(&self, text: &str) -> Vec<f32> {
        let mut v = vec![0f32; self.dimension];
        let lower = text.to_lowercase();
        for word in lower
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
        {
            self.add(&mut v, ("w", word), 1.0);
            let chars: Vec<char> = word.chars().collect();
            if chars.len() > 3 {
                for gram in chars.windows(3) {
                    self.add(&mut v, ("g", gram), 0.5);
                }
            }
        }
        normalize(&mut v);
        v
    }

    fn add(&self, v: &mut [f32], feature: impl Hash, weight: f32) {
        let mut hasher = Fnv1a::default();
        feature.hash(&mut hasher);
        let h = hasher.finish();
        let bucket = (h % self.dimension as u64) as usize;
        let sign = if (h >> 63) == 0 { 1.0 } else { -1.0 };
        v[bucket] += sign * weight;
    }
}

#[async_trait]
impl Embedder for HashingEmbedder {
    fn model(&self) -> &str {
        &self.model
    }

    fn dimension(&self) -> usize {
        self.dimension
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts.iter().map(|t| self.vector(t)).collect())
    }
}

/// FNV-1a: a fixed, platform-independent hash (std's default hasher is randomly seeded).
struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv1a {
    fn finish(&self) -> u64 {
        // A final avalanche so low bits (used for bucketing) depend on every input byte.
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// Scales `v` to unit length (a zero vector stays zero).
pub fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// Cosine similarity of two vectors of equal length (0 when either is zero).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let (mut dot, mut na, mut nb) = (0f32, 0f32, 0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashing_vectors_are_normalised_and_deterministic() {
        let e = HashingEmbedder::new(64);
        let a = e.vector("Hello, World");
        let b = e.vector("hello world");
        assert_eq!(a, b);
        let norm: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5);
        assert_eq!(e.vector(""), vec![0.0; 64]);
    }

    #[test]
    fn exact_tokens_match_best() {
        let e = HashingEmbedder::new(384);
        let key = "9f1c2d3e-aaaa-4bbb-8ccc-0123456789ab";
        let query = e.vector(key);
        let hit = e.vector(&format!("{key}: 1234abcd-0000-4000-8000-feedfacecafe"));
        let miss =
            e.vector("0a0b0c0d-1111-4222-8333-444455556666: 77777777-0000-4000-8000-000000000000");
        assert!(cosine(&query, &hit) > cosine(&query, &miss) + 0.2);
    }

    #[tokio::test]
    async fn embed_one_tags_the_model() {
        let e = HashingEmbedder::new(16);
        let emb = e.embed_one("x").await.unwrap();
        assert_eq!(emb.model, "memgpt-hashing-v1-16");
        assert_eq!(emb.dimension(), 16);
    }
}
