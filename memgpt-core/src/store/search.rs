//! The one recall search every store runs: candidates from the store's primitives, ranked by
//! [`retrieval`](crate::retrieval) (see [`rank_candidates`]).

use std::collections::HashSet;

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
    let lexical = if terms.is_empty() {
        TextCandidates::default()
    } else {
        store.text_candidates(agent, &terms, query, pool).await?
    };
    let semantic = match &query.embedding {
        Some(embedding) => {
            store
                .vector_candidates(agent, embedding, query, pool)
                .await?
        }
        None => Vec::new(),
    };
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
