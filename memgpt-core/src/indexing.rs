//! Keeps recall storage's message embeddings complete.
//!
//! Conversation messages are embedded in batches: with their step (before its commit, unless
//! [`AgentConfig::defer_message_embeddings`](crate::AgentConfig::defer_message_embeddings)), by
//! the next recall search for whatever is still missing (on demand), and by
//! [`Agent::reindex`](crate::Agent::reindex) for everything missing (a backfill after an import
//! without an embedder, an embedder outage or a crash). A message is never left out for good: a
//! store lists what is missing ([`RecallStore::unembedded_messages`]).

use tracing::{debug, warn};

use crate::embed::{EmbedError, Embedder, Embedding};
use crate::ids::AgentId;
use crate::message::Message;
use crate::retrieval::{document_text, is_conversation};
use crate::store::{MAX_MESSAGE_WINDOWS, MessageEmbedding, Storage, StoreError};

/// Messages embedded per embedder call.
pub(crate) const EMBED_BATCH: usize = 64;

/// Why filling in embeddings stopped.
#[derive(Debug, thiserror::Error)]
pub(crate) enum IndexingError {
    #[error(transparent)]
    Embed(#[from] EmbedError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The embeddings of the conversation messages among `messages`, one per window of each
/// ([`Embedder::embed_windows`]; one embedder call per [`EMBED_BATCH`] messages).
pub(crate) async fn embed_messages(
    embedder: &dyn Embedder,
    messages: &[Message],
) -> Result<Vec<MessageEmbedding>, EmbedError> {
    let conversation: Vec<&Message> = messages
        .iter()
        .filter(|m| is_conversation(m.kind))
        .collect();
    let mut out = Vec::with_capacity(conversation.len());
    for batch in conversation.chunks(EMBED_BATCH) {
        let texts: Vec<String> = batch.iter().map(|m| document_text(m)).collect();
        let windows = embedder.embed_windows(&texts).await?;
        if windows.len() != texts.len() {
            return Err(EmbedError::InvalidResponse {
                message: format!("vectors for {} of {} texts", windows.len(), texts.len()),
            });
        }
        for (message, vectors) in batch.iter().zip(windows) {
            if vectors.is_empty() {
                return Err(EmbedError::InvalidResponse {
                    message: "no vector for a text".to_owned(),
                });
            }
            let windows = vectors.into_iter().take(MAX_MESSAGE_WINDOWS as usize);
            for (window, vector) in windows.enumerate() {
                if vector.len() != embedder.dimension() {
                    return Err(EmbedError::InvalidResponse {
                        message: format!(
                            "a {}-d vector from an embedder of dimension {}",
                            vector.len(),
                            embedder.dimension()
                        ),
                    });
                }
                out.push(MessageEmbedding {
                    message: message.id,
                    window: u32::try_from(window).unwrap_or(u32::MAX),
                    embedding: Embedding {
                        model: embedder.model().to_owned(),
                        vector,
                    },
                });
            }
        }
    }
    Ok(out)
}

/// Embeds and stores up to `limit` of the agent's unembedded conversation messages, oldest
/// first. Returns how many were embedded and whether some are still missing.
pub(crate) async fn embed_pending(
    storage: &Storage,
    embedder: &dyn Embedder,
    agent: AgentId,
    limit: usize,
) -> Result<(usize, bool), IndexingError> {
    let mut done = 0usize;
    while done < limit {
        let want = EMBED_BATCH.min(limit - done);
        let pending = storage.recall.unembedded_messages(agent, want).await?;
        if pending.is_empty() {
            return Ok((done, false));
        }
        let embeddings = embed_messages(embedder, &pending).await?;
        if embeddings.is_empty() {
            // The store listed messages that are not conversation messages: nothing to do.
            warn!(%agent, "the store listed unembedded messages that are not conversation turns");
            return Ok((done, false));
        }
        storage
            .agents
            .store_message_embeddings(agent, &embeddings)
            .await?;
        done += embeddings.iter().filter(|e| e.window == 0).count();
        debug!(%agent, done, "embedded pending messages");
        if pending.len() < want {
            return Ok((done, false));
        }
    }
    let more = !storage
        .recall
        .unembedded_messages(agent, 1)
        .await?
        .is_empty();
    Ok((done, more))
}
