//! Keeps recall storage's message embeddings complete.
//!
//! Conversation messages are embedded in batches: with their step (before its commit, unless
//! [`AgentConfig::defer_message_embeddings`](crate::AgentConfig::defer_message_embeddings)), by
//! the agent's next step or [`Agent::call`](crate::Agent::call) for whatever is still missing
//! (up to a bound, before it runs: searches only read), and by
//! [`Agent::reindex`](crate::Agent::reindex) for everything missing (a backfill after an import
//! without an embedder, an embedder outage or a crash). A message is never left out for good: a
//! store lists what is missing ([`RecallStore::unembedded_messages`]).
//!
//! [`reindex_store`] switches a whole store to another embedding model in place (what
//! `memgpt reindex --embedder NAME` runs): it forgets the old vectors, then embeds every agent's
//! messages and passages again, resumably.
//!
//! [`RecallStore::unembedded_messages`]: crate::store::RecallStore::unembedded_messages

use tracing::{debug, warn};

use crate::embed::{EmbedError, Embedder, Embedding};
use crate::ids::AgentId;
use crate::message::Message;
use crate::retrieval::{document_text, is_conversation};
use crate::store::{
    AgentState, MAX_MESSAGE_WINDOWS, MessageEmbedding, PassageEmbedding, Storage, StoreError,
};

/// Messages embedded per embedder call.
pub(crate) const EMBED_BATCH: usize = 64;

/// Why filling in embeddings stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IndexingError {
    /// The embedder failed (nothing of the failed batch was stored).
    #[error(transparent)]
    Embed(#[from] EmbedError),
    /// The store failed.
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

/// What [`reindex_store`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReindexReport {
    /// Whether the store held vectors of another model, which were forgotten first.
    pub cleared: bool,
    /// The agents visited.
    pub agents: usize,
    /// Messages embedded by this run.
    pub messages: usize,
    /// Passages embedded by this run.
    pub passages: usize,
}

/// Progress of [`reindex_store`]: after each batch, the agent and how many of its messages and
/// passages this run has embedded so far.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct ReindexProgress<'a> {
    /// The agent being embedded.
    pub agent: &'a AgentState,
    /// Its messages embedded so far by this run.
    pub messages: usize,
    /// Its passages embedded so far by this run.
    pub passages: usize,
}

/// Embeds every agent's messages and passages in `storage` with `embedder`, in place.
///
/// When the store holds vectors of another model or dimension, they are all forgotten first
/// ([`AgentStore::clear_embeddings`](crate::store::AgentStore::clear_embeddings), one
/// transaction); then whatever has no vector is embedded, batch by batch, each batch stored
/// as it is done. An interrupted run loses at most one batch of work: run it again and it
/// continues where it stopped (the store's vectors are then of `embedder`'s model, so nothing
/// is cleared twice). What the agents remember is never touched; until their messages are
/// embedded again, searches match them by words. Processes using the store must not write
/// embeddings meanwhile.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use std::sync::Arc;
/// use memgpt_core::embed::HashingEmbedder;
/// use memgpt_core::indexing::reindex_store;
/// use memgpt_core::store::{InMemoryStore, Storage};
///
/// let storage = Storage::from_store(Arc::new(InMemoryStore::new()));
/// let report = reindex_store(&storage, &HashingEmbedder::new(64), &mut |p| {
///     println!("{}: {} messages, {} passages", p.agent.name, p.messages, p.passages)
/// })
/// .await?;
/// println!("{} agents, {} messages re-embedded", report.agents, report.messages);
/// assert!(!report.cleared, "an empty store holds no vectors to forget");
/// # Ok::<_, memgpt_core::indexing::IndexingError>(())
/// # }).unwrap();
/// ```
pub async fn reindex_store(
    storage: &Storage,
    embedder: &dyn Embedder,
    progress: &mut (dyn FnMut(ReindexProgress<'_>) + Send),
) -> Result<ReindexReport, IndexingError> {
    let mut report = ReindexReport::default();
    if let Some(space) = storage.agents.embedding_space().await?
        && space
            .check_model(embedder.model(), embedder.dimension())
            .is_err()
    {
        tracing::info!(
            from = %space.model,
            to = embedder.model(),
            "forgetting the store's embeddings before re-embedding"
        );
        storage.agents.clear_embeddings().await?;
        report.cleared = true;
    }
    for agent in storage.agents.list_agents().await? {
        report.agents += 1;
        let (mut messages, mut passages) = (0usize, 0usize);
        loop {
            let (done, more) = embed_pending(storage, embedder, agent.id, EMBED_BATCH).await?;
            messages += done;
            progress(ReindexProgress {
                agent: &agent,
                messages,
                passages,
            });
            if !more || done == 0 {
                break;
            }
        }
        loop {
            let pending = storage
                .archival
                .unembedded_passages(agent.id, EMBED_BATCH)
                .await?;
            if pending.is_empty() {
                break;
            }
            let texts: Vec<String> = pending.iter().map(|p| p.text.clone()).collect();
            let vectors = embedder.embed(&texts).await?;
            if vectors.len() != texts.len()
                || vectors.iter().any(|v| v.len() != embedder.dimension())
            {
                return Err(EmbedError::InvalidResponse {
                    message: format!(
                        "{} vectors for {} passages, or of the wrong dimension",
                        vectors.len(),
                        texts.len()
                    ),
                }
                .into());
            }
            let embeddings: Vec<PassageEmbedding> = pending
                .iter()
                .zip(vectors)
                .map(|(passage, vector)| PassageEmbedding {
                    passage: passage.id,
                    embedding: Embedding {
                        model: embedder.model().to_owned(),
                        vector,
                    },
                })
                .collect();
            storage
                .agents
                .store_passage_embeddings(agent.id, &embeddings)
                .await?;
            passages += embeddings.len();
            progress(ReindexProgress {
                agent: &agent,
                messages,
                passages,
            });
            if pending.len() < EMBED_BATCH {
                break;
            }
        }
        report.messages += messages;
        report.passages += passages;
    }
    Ok(report)
}
