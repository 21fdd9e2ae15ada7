//! The searches every store runs: candidates from the store's primitives, ranked once by
//! [`retrieval`](crate::retrieval): messages with [`rank_candidates`] ([`search_messages`]),
//! passages with [`rank_passages`] ([`search_passages`]).

use std::collections::{HashMap, HashSet};
use std::future::{Future, poll_fn};
use std::pin::pin;
use std::sync::Mutex;
use std::task::Poll;

use super::{
    ArchivalQuery, ArchivalStore, EmbeddingSpace, Hit, Passage, PassageCandidate,
    PassageRetirement, RecallQuery, RecallStore, SearchMode, SearchPage, StoreError, Validity,
};
use crate::ids::{AgentId, PassageId};
use crate::message::Message;
use crate::retrieval::{
    CandidateKey, FoundBy, NearestPassages, PassageDocument, PassageMatches, QueryCues,
    TextCandidates, document_terms, passage_pool, query_terms, rank_candidates, rank_passages,
};

/// Searches the messages of any [`RecallStore`] (what [`RecallStore::search`] runs): gathers
/// candidates from the store's primitives and ranks them with [`rank_candidates`] (see
/// [`retrieval`](crate::retrieval)). Queries without text are listed chronologically by the
/// store.
///
/// The total counts the ranked candidates; pages past it are empty, whatever their number.
pub async fn search_messages<S: RecallStore + ?Sized>(
    store: &S,
    agent: AgentId,
    query: &RecallQuery,
) -> Result<SearchPage<Message>, StoreError> {
    search_messages_found_by(store, agent, query)
        .await
        .map(|(page, _)| page)
}

/// [`search_messages`], with why each hit on the page was found ([`FoundBy`], in the order of
/// the hits; empty for a listing).
pub async fn search_messages_found_by<S: RecallStore + ?Sized>(
    store: &S,
    agent: AgentId,
    query: &RecallQuery,
) -> Result<(SearchPage<Message>, Vec<FoundBy>), StoreError> {
    let Some(text) = query.text_query() else {
        return Ok((store.list_messages(agent, query).await?, Vec::new()));
    };
    let ranking = &query.ranking;
    let terms = query_terms(text);
    let pool = ranking.pool(query.page.depth());
    // Both lists at once: where a store waits on I/O for one, it works on the other.
    let by_text = async {
        if terms.is_empty() {
            Ok(TextCandidates::default())
        } else {
            store.text_candidates(agent, &terms, query, pool).await
        }
    };
    let by_vector = async {
        match &query.embedding {
            Some(embedding) => store.vector_candidates(agent, embedding, query, pool).await,
            None => Ok(Vec::new()),
        }
    };
    let (lexical, semantic) = join(by_text, by_vector).await;
    let (lexical, semantic) = (lexical?, semantic?);
    let keys = union(&lexical.keys, &semantic);
    if keys.is_empty() {
        return Ok((SearchPage::empty(query.page), Vec::new()));
    }
    let mut candidates = store.candidates(agent, &keys).await?;
    // The last guard: whatever a store's index returned, only what the query admits is ranked.
    candidates.retain(|c| {
        guarded(
            c.message.agent_id == agent && query.admits(&c.message),
            c.key,
            "recall",
        )
    });
    let cues = QueryCues::parse(text);
    let ranked = rank_candidates(
        &candidates,
        &terms,
        &lexical.statistics,
        query.embedding.as_ref().map(|e| e.vector.as_slice()),
        &cues,
        ranking,
    );
    let found_by: Vec<FoundBy> = query
        .page
        .slice(ranked.iter().map(|(i, _)| *i).collect())
        .into_iter()
        .map(|i| FoundBy::of(&candidates[i], &terms))
        .collect();
    let page = SearchPage::from_ranking(query.page, ranked, |(i, score)| Hit {
        item: candidates[i].message.clone(),
        score,
    });
    Ok((page, found_by))
}

/// Searches the passages of any [`ArchivalStore`] (what [`ArchivalStore::search`] runs):
/// gathers candidates from the store's primitives and ranks them with [`rank_passages`] (see
/// [`retrieval`](crate::retrieval)).
///
/// The total counts every passage the mode could return: the embedded passages the filters
/// admit ([`SearchMode::Vector`]), the admitted passages holding a query term
/// ([`SearchMode::Text`]), or both together ([`SearchMode::Hybrid`]). Pages past
/// [`passage_pool`] results are empty.
pub async fn search_passages<S: ArchivalStore + ?Sized>(
    store: &S,
    agent: AgentId,
    query: &ArchivalQuery,
) -> Result<SearchPage<Passage>, StoreError> {
    search_passages_with(store, agent, query, &[], &[]).await
}

/// [`search_passages`] over the store's passages and a step's writes not committed yet: the
/// `pending` passages it inserted and the stored passages it `retired`, ranked as if the step
/// had committed: one scorer, one list, one total.
pub(crate) async fn search_passages_with<S: ArchivalStore + ?Sized>(
    store: &S,
    agent: AgentId,
    query: &ArchivalQuery,
    pending: &[Passage],
    retired: &[PassageRetirement],
) -> Result<SearchPage<Passage>, StoreError> {
    // Every part of the search sees the same "now".
    let resolved;
    let query = if query.validity == Validity::Current {
        resolved = ArchivalQuery {
            validity: query.validity.resolved(),
            ..query.clone()
        };
        &resolved
    } else {
        query
    };
    // Stored passages this step retired before the query's instant are gone from its view.
    let gone: Vec<PassageId> = match query.validity.instant() {
        Some(at) => retired
            .iter()
            .filter(|r| r.at <= at)
            .map(|r| r.id)
            .collect(),
        None => Vec::new(),
    };
    let embedding = match (query.mode, &query.embedding) {
        (SearchMode::Vector, None) => {
            return Err(StoreError::InvalidQuery(
                "vector search needs a query embedding".into(),
            ));
        }
        (SearchMode::Text, _) => None,
        (_, embedding) => embedding.as_ref(),
    };
    let mode = match (query.mode, embedding) {
        (SearchMode::Hybrid, None) => SearchMode::Text,
        (mode, _) => mode,
    };
    let terms = query_terms(&query.text);
    let pool = passage_pool(query.page.depth()) + gone.len();
    // Each list's passages are read as soon as that list is known, those of the other list's
    // keys once: the reads of the first list overlap the search for the second.
    let claimed = Mutex::new(HashSet::new());
    let read = |keys: &[CandidateKey]| {
        let unread: Vec<CandidateKey> = {
            // Held for no await; a panic while it was held left a usable set.
            let mut claimed = claimed.lock().unwrap_or_else(|e| e.into_inner());
            keys.iter()
                .copied()
                .filter(|k| claimed.insert(*k))
                .collect()
        };
        async move {
            if unread.is_empty() {
                Ok(Vec::new())
            } else {
                store.passage_candidates(agent, &unread).await
            }
        }
    };
    let by_text = async {
        let matches = if mode == SearchMode::Vector || terms.is_empty() {
            PassageMatches::default()
        } else {
            store.text_candidates(agent, &terms, query, pool).await?
        };
        let passages = read(&matches.keys).await?;
        Ok::<_, StoreError>((matches, passages))
    };
    let by_vector = async {
        let nearest = match embedding {
            Some(embedding) => {
                store
                    .vector_candidates(agent, embedding, query, pool)
                    .await?
            }
            None => NearestPassages::default(),
        };
        let passages = read(&nearest.keys).await?;
        Ok::<_, StoreError>((nearest, passages))
    };
    let (lexical, semantic) = join(by_text, by_vector).await;
    let ((mut lexical, by_text), (mut semantic, by_vector)) = (lexical?, semantic?);
    // In the order of the keys, text candidates first.
    let mut by_key: HashMap<CandidateKey, PassageCandidate> = by_text
        .into_iter()
        .chain(by_vector)
        .map(|c| (c.key, c))
        .collect();
    // The last guard: whatever a store's index returned, only what the query admits is ranked.
    let mut candidates: Vec<PassageCandidate> = union(&lexical.keys, &semantic.keys)
        .into_iter()
        .filter_map(|key| by_key.remove(&key))
        .filter(|c| {
            guarded(
                c.passage.agent_id == agent && query.admits(&c.passage),
                c.key,
                "archival",
            )
        })
        .collect();
    if !gone.is_empty() {
        // Take them out of the candidates and the totals they were counted in (the store's
        // filters admitted them, valid as stored); the collection statistics keep them, as
        // they will once the retirement is stored.
        for passage in store.get_passages(agent, &gone).await? {
            if !query.admits(&passage) {
                continue;
            }
            let words = document_terms(&passage.text);
            let matches = terms.iter().any(|t| words.contains(t));
            let (text, unembedded, vector) =
                counted_in_totals(&passage, matches, mode, embedding.is_some());
            lexical.total = lexical.total.saturating_sub(text);
            lexical.unembedded = lexical.unembedded.saturating_sub(unembedded);
            semantic.total = semantic.total.saturating_sub(vector);
        }
        candidates.retain(|c| !gone.contains(&c.passage.id));
    }
    // Pending passages join as if committed: counted in the statistics and the totals, keyed
    // below every store key (stores key by non-negative row numbers).
    for (i, passage) in pending.iter().enumerate() {
        let words = document_terms(&passage.text);
        lexical.statistics.documents += 1;
        lexical.statistics.total_terms += words.len() as u64;
        let mut matches = false;
        for (df, term) in lexical.statistics.document_frequency.iter_mut().zip(&terms) {
            if words.contains(term) {
                *df += 1;
                matches = true;
            }
        }
        if !query.admits(passage) {
            continue;
        }
        let (text, unembedded, vector) =
            counted_in_totals(passage, matches, mode, embedding.is_some());
        lexical.total += text;
        lexical.unembedded += unembedded;
        semantic.total += vector;
        if matches || passage.embedding.is_some() {
            candidates.push(PassageCandidate {
                key: -1 - i as CandidateKey,
                passage: passage.clone(),
            });
        }
    }
    if let (Some(embedding), Some(stored)) =
        (embedding, pending.iter().find_map(|p| p.embedding.as_ref()))
    {
        EmbeddingSpace::of(stored).check(embedding)?;
    }
    let documents: Vec<PassageDocument<'_>> = candidates.iter().map(|c| c.document()).collect();
    let ranked = rank_passages(
        &documents,
        &terms,
        &lexical.statistics,
        embedding.map(|e| e.vector.as_slice()),
        mode,
    );
    let total = match mode {
        SearchMode::Vector => semantic.total,
        SearchMode::Text => lexical.total,
        SearchMode::Hybrid => semantic.total + lexical.unembedded,
    };
    let mut page = SearchPage::from_ranking(query.page, ranked, |(i, score)| Hit {
        item: candidates[i].passage.clone(),
        score,
    });
    page.total = usize::try_from(total).unwrap_or(usize::MAX);
    Ok(page)
}

/// What one passage the filters admit counts for in a search's totals, as a store counts it:
/// (a text match, a text match without an embedding, an embedded passage of a vector search).
/// `matches` says whether its words hold a query term.
fn counted_in_totals(
    passage: &Passage,
    matches: bool,
    mode: SearchMode,
    by_vector: bool,
) -> (u64, u64, u64) {
    let embedded = passage.embedding.is_some();
    let text = matches && mode != SearchMode::Vector;
    (
        u64::from(text),
        u64::from(text && !embedded),
        u64::from(embedded && by_vector),
    )
}

/// The last guard of a search: whether a store's candidate (its key, of `what` storage) is
/// `admitted` by the query; one that is not is a store bug, logged, and left out.
fn guarded(admitted: bool, key: CandidateKey, what: &str) -> bool {
    if !admitted {
        tracing::error!(
            key,
            "a store returned a {what} candidate its query does not admit; it is left out"
        );
    }
    admitted
}

/// The keys of both candidate lists, each once, text candidates first.
fn union(text: &[CandidateKey], vector: &[CandidateKey]) -> Vec<CandidateKey> {
    let mut seen = HashSet::with_capacity(text.len() + vector.len());
    text.iter()
        .chain(vector)
        .copied()
        .filter(|k| seen.insert(*k))
        .collect()
}

/// Runs two futures concurrently in the current task; both outputs when both are done.
async fn join<A, B>(a: impl Future<Output = A>, b: impl Future<Output = B>) -> (A, B) {
    let (mut a, mut b) = (pin!(a), pin!(b));
    let (mut done_a, mut done_b) = (None, None);
    poll_fn(|cx| {
        if done_a.is_none()
            && let Poll::Ready(out) = a.as_mut().poll(cx)
        {
            done_a = Some(out);
        }
        if done_b.is_none()
            && let Poll::Ready(out) = b.as_mut().poll(cx)
        {
            done_b = Some(out);
        }
        match (done_a.take(), done_b.take()) {
            (Some(a), Some(b)) => Poll::Ready((a, b)),
            (a, b) => {
                (done_a, done_b) = (a, b);
                Poll::Pending
            }
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use chrono::{Duration, TimeZone, Utc};

    use super::*;
    use crate::embed::{Embedder, Embedding, HashingEmbedder};
    use crate::store::{AgentState, Page, Storage, Summary};

    /// A step's pending passages rank exactly as they will once committed: one scorer, one
    /// list, one total, in every mode and on every page.
    #[tokio::test]
    async fn pending_passages_rank_as_if_committed() {
        let e = HashingEmbedder::new(64);
        let t = Utc.with_ymd_and_hms(2025, 1, 1, 0, 0, 0).unwrap();
        let texts = [
            "tea in the kitchen",
            "green tea and lemon",
            "the garden ladder",
            "kitchen shelf with tea cups",
            "weather in the garden",
            "tea tea tea in the garden",
        ];
        let (committed, split) = (Storage::in_memory(), Storage::in_memory());
        let mut state = AgentState {
            id: AgentId::new(),
            name: "a".into(),
            version: 0,
            config: crate::config::AgentConfig::default(),
            system: String::new(),
            memory: Default::default(),
            summary: Summary::default(),
            fifo: Vec::new(),
            pinned: Vec::new(),
            pressure_warned: false,
            heartbeats_paused_until: None,
            memory_updated_at: t,
            created_at: t,
            updated_at: t,
            pending_approval: None,
            consolidated_until: None,
        };
        let agent = state.id;
        for s in [&committed, &split] {
            s.agents.create_agent(&state).await.unwrap();
        }
        let mut passages = Vec::new();
        for (i, text) in texts.iter().enumerate() {
            let mut p = Passage::new(agent, *text, t + Duration::minutes(i as i64));
            if i % 2 == 0 {
                p.embedding = Some(e.embed_one(text).await.unwrap());
            }
            passages.push(p);
        }
        state.version = 1;
        let commit = |passages: Vec<Passage>| crate::store::Commit {
            state: state.clone(),
            messages: Vec::new(),
            message_embeddings: Vec::new(),
            passages,
            deleted_passages: Vec::new(),
            retired_passages: Vec::new(),
            attachments_changed: false,
            queue: None,
        };
        committed
            .agents
            .commit(&commit(passages.clone()))
            .await
            .unwrap();
        split
            .agents
            .commit(&commit(passages[..3].to_vec()))
            .await
            .unwrap();
        let pending = &passages[3..];
        for text in ["tea kitchen", "garden", "nothing here"] {
            let embedding: Embedding = e.embed_one(text).await.unwrap();
            for mode in [SearchMode::Vector, SearchMode::Text, SearchMode::Hybrid] {
                for page in [Page::first(2), Page::new(1, 2), Page::first(10)] {
                    let q = ArchivalQuery::new(text, mode, page).with_embedding(embedding.clone());
                    let all = committed.archival.search(agent, &q).await.unwrap();
                    let overlaid =
                        search_passages_with(split.archival.as_ref(), agent, &q, pending, &[])
                            .await
                            .unwrap();
                    assert_eq!(all, overlaid, "{mode:?} {text:?} page {}", page.number);
                }
            }
        }
    }
}
