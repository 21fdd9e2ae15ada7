//! The one way text becomes archival passages: the size check, splitting into chunks of at most
//! a token budget, and embedding every chunk in one batch.
//!
//! Document uploads, [`Agent::insert_archival`](crate::Agent::insert_archival) and the
//! `archival_memory_insert` function all write through [`PassageWriter`], so a limit or a
//! chunking rule changes in one place.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use crate::chunk::{PassageBudget, chunk_text};
use crate::embed::{EmbedError, Embedder, Embedding};
use crate::ids::AgentId;
use crate::store::Passage;
use crate::tokens::TokenCounter;

/// Why text could not become passages.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PassageError {
    /// The text is over the size limit.
    #[error("{bytes} bytes, over the limit of {limit} bytes")]
    TooLarge { bytes: usize, limit: usize },
    /// The text has nothing but whitespace.
    #[error("no text")]
    Empty,
    /// Embedding the chunks failed.
    #[error(transparent)]
    Embed(#[from] EmbedError),
}

/// Splits and embeds text for archival storage.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PassageWriter<'a> {
    /// Counts each chunk's tokens.
    pub(crate) counter: &'a dyn TokenCounter,
    /// Embeds the chunks, when the agent has an embedder.
    pub(crate) embedder: Option<&'a dyn Embedder>,
    /// Maximum tokens per passage.
    pub(crate) passage_tokens: usize,
    /// Maximum bytes of text accepted at once.
    pub(crate) max_bytes: usize,
    /// Time to live in days by tag: a passage ends that long after it is stored.
    pub(crate) ttl_days: &'a std::collections::BTreeMap<String, u32>,
}

impl PassageWriter<'_> {
    /// `text` as passages of `agent`, each with `metadata`, stored at `now`. With
    /// `numbered`, each passage's metadata also holds its position as `"chunk"` (0-based).
    pub(crate) async fn write(
        &self,
        agent: AgentId,
        text: &str,
        metadata: Map<String, Value>,
        numbered: bool,
        now: DateTime<Utc>,
    ) -> Result<Vec<Passage>, PassageError> {
        if text.len() > self.max_bytes {
            return Err(PassageError::TooLarge {
                bytes: text.len(),
                limit: self.max_bytes,
            });
        }
        let budget = PassageBudget::new(self.counter, self.embedder, self.passage_tokens);
        let chunks = chunk_text(text, self.passage_tokens, &budget);
        if chunks.is_empty() {
            return Err(PassageError::Empty);
        }
        let chunks = chunks
            .into_iter()
            .enumerate()
            .map(|(i, text)| {
                let mut metadata = metadata.clone();
                if numbered {
                    metadata.insert("chunk".into(), Value::from(i));
                }
                (text, metadata)
            })
            .collect();
        self.embed_chunks(agent, chunks, now).await
    }

    /// Ready-made chunks (each with its own metadata) as passages of `agent`, embedded in one
    /// batch, stored at `now`. Empty chunks are an error.
    pub(crate) async fn embed_chunks(
        &self,
        agent: AgentId,
        chunks: Vec<(String, Map<String, Value>)>,
        now: DateTime<Utc>,
    ) -> Result<Vec<Passage>, PassageError> {
        if chunks.is_empty() || chunks.iter().any(|(text, _)| text.trim().is_empty()) {
            return Err(PassageError::Empty);
        }
        let bytes: usize = chunks.iter().map(|(text, _)| text.len()).sum();
        if bytes > self.max_bytes {
            return Err(PassageError::TooLarge {
                bytes,
                limit: self.max_bytes,
            });
        }
        let vectors = match self.embedder {
            Some(embedder) => {
                let texts: Vec<String> = chunks.iter().map(|(text, _)| text.clone()).collect();
                let vectors = embedder.embed(&texts).await?;
                if vectors.len() != texts.len() {
                    return Err(EmbedError::InvalidResponse {
                        message: format!("{} vectors for {} texts", vectors.len(), texts.len()),
                    }
                    .into());
                }
                vectors.into_iter().map(Some).collect()
            }
            None => vec![None; chunks.len()],
        };
        Ok(chunks
            .into_iter()
            .zip(vectors)
            .map(|((text, metadata), vector)| {
                let mut passage = Passage::new(agent, text, now);
                passage.metadata = metadata;
                passage.valid_to = passage
                    .tags()
                    .iter()
                    .filter_map(|tag| self.ttl_days.get(tag))
                    .min()
                    .map(|days| now + chrono::Duration::days(i64::from(*days)));
                passage.embedding = vector.map(|vector| Embedding {
                    model: self
                        .embedder
                        .map(|e| e.model().to_owned())
                        .unwrap_or_default(),
                    vector,
                });
                passage
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::HashingEmbedder;
    use crate::tokens::TiktokenCounter;

    static NO_TTL: std::collections::BTreeMap<String, u32> = std::collections::BTreeMap::new();

    fn writer<'a>(
        counter: &'a TiktokenCounter,
        embedder: Option<&'a dyn Embedder>,
    ) -> PassageWriter<'a> {
        PassageWriter {
            counter,
            embedder,
            passage_tokens: 20,
            max_bytes: 2_000,
            ttl_days: &NO_TTL,
        }
    }

    #[tokio::test]
    async fn text_is_split_embedded_and_numbered() {
        let counter = TiktokenCounter::cl100k();
        let embedder = HashingEmbedder::new(32);
        let text = "The quick brown fox jumps over the lazy dog. ".repeat(10);
        let mut metadata = Map::new();
        metadata.insert("source".into(), Value::from("fox.txt"));
        let passages = writer(&counter, Some(&embedder))
            .write(AgentId::new(), &text, metadata, true, Utc::now())
            .await
            .unwrap();
        assert!(passages.len() > 1);
        for (i, p) in passages.iter().enumerate() {
            assert_eq!(p.metadata["source"], "fox.txt");
            assert_eq!(p.metadata["chunk"], i);
            let embedding = p.embedding.as_ref().unwrap();
            assert_eq!(embedding.model, embedder.model());
            assert_eq!(embedding.vector.len(), 32);
        }
        let plain = writer(&counter, None)
            .write(
                AgentId::new(),
                "one short note",
                Map::new(),
                false,
                Utc::now(),
            )
            .await
            .unwrap();
        assert_eq!(plain.len(), 1);
        assert!(plain[0].embedding.is_none());
        assert!(!plain[0].metadata.contains_key("chunk"));
    }

    #[tokio::test]
    async fn oversize_and_empty_text_are_refused() {
        let counter = TiktokenCounter::cl100k();
        let w = writer(&counter, None);
        let err = w
            .write(
                AgentId::new(),
                &"x".repeat(2_001),
                Map::new(),
                false,
                Utc::now(),
            )
            .await
            .unwrap_err();
        assert!(matches!(
            err,
            PassageError::TooLarge {
                bytes: 2_001,
                limit: 2_000
            }
        ));
        let err = w
            .write(AgentId::new(), " \n\t ", Map::new(), false, Utc::now())
            .await
            .unwrap_err();
        assert!(matches!(err, PassageError::Empty));
    }
}
