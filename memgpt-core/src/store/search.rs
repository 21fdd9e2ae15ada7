//! The one recall search every store runs: candidates from the store's primitives, ranked by
//! [`retrieval`](crate::retrieval) (see [`rank_candidates`]).

use std::collections::HashSet;
use std::future::{Future, poll_fn};
use std::pin::pin;
use std::task::Poll;

use super::{Hit, RecallQuery, RecallStore, SearchPage, StoreError};
use crate::ids::AgentId;
use crate::message::Message;
use crate::retrieval::{CandidateKey, QueryCues, TextCandidates, query_terms, rank_candidates};

/// Runs a recall search with a text query on any [`RecallStore`]: gathers candidates from the
/// store's primitives and ranks them with [`rank_candidates`] (see [`retrieval`](crate::retrieval)).
/// Queries without text are listed chronologically by the store.
///
/// The total counts the ranked candidates; pages past it are empty, whatever their number.
pub async fn search_recall<S: RecallStore + ?Sized>(
    store: &S,
    agent: AgentId,
    query: &RecallQuery,
) -> Result<SearchPage<Message>, StoreError> {
    let Some(text) = query.text_query() else {
        return store.list_messages(agent, query).await;
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
    let mut seen = HashSet::with_capacity(lexical.keys.len() + semantic.len());
    let keys: Vec<CandidateKey> = lexical
        .keys
        .iter()
        .chain(&semantic)
        .copied()
        .filter(|k| seen.insert(*k))
        .collect();
    if keys.is_empty() {
        return Ok(SearchPage::empty(query.page));
    }
    let candidates = store.candidates(agent, &keys).await?;
    let cues = QueryCues::parse(text);
    let ranked = rank_candidates(
        &candidates,
        &terms,
        &lexical.statistics,
        query.embedding.as_ref().map(|e| e.vector.as_slice()),
        &cues,
        ranking,
    );
    Ok(SearchPage::from_ranking(
        query.page,
        ranked,
        |(i, score)| Hit {
            item: candidates[i].message.clone(),
            score,
        },
    ))
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
