//! Archival search: how `archival_memory_search` ranks an agent's passages in every store.
//!
//! A store contributes three primitives of [`ArchivalStore`](crate::store::ArchivalStore), the
//! shape recall search has: the passages holding a query term (`text_candidates`, with the
//! collection statistics of those terms and how many match in all), the embedded passages
//! nearest the query's embedding (`vector_candidates`), and the passages behind both
//! (`passage_candidates`, as [`PassageCandidate`](crate::store::PassageCandidate)s).
//! [`search_passages`](crate::store::search_passages) then ranks them
//! with [`rank_passages`], the same way for every store:
//!
//! * [`SearchMode::Text`]: **BM25** of the passage's words ([`document_terms`](super::document_terms)) for the query's
//!   terms, with the statistics the store reports over every passage it indexes;
//! * [`SearchMode::Vector`]: **cosine similarity** of the passage's embedding to the query's;
//! * [`SearchMode::Hybrid`]: **reciprocal-rank fusion** of both lists ([`RRF_K`]).
//!
//! Ties go to the newer passage. Stores only choose the candidates (their own full-text ranking
//! or vector index may pick them), so two stores rank identically whenever both pools hold every
//! match; a search takes [`passage_pool`] candidates from each list.

use super::analyzer::term_frequencies;
use super::bm25::{Bm25, TermStatistics};
use super::fusion::{RRF_K, reciprocal_rank_fusion};
use super::mode::SearchMode;
use super::recall::{CandidateKey, MAX_CANDIDATES};
use chrono::{DateTime, Utc};

use crate::embed::cosine;

/// What a store's full-text index found for an archival query.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PassageMatches {
    /// Passages the query's filters admit holding at least one query term, best first as far
    /// as the store can tell; at most the limit asked for.
    pub keys: Vec<CandidateKey>,
    /// The collection statistics of the query terms, in the order asked, over every passage
    /// the store indexes (all agents').
    pub statistics: TermStatistics,
    /// How many admitted passages hold a query term (all of them, not only `keys`). Only a
    /// [`SearchMode::Text`](crate::store::SearchMode::Text) search's page total is this count,
    /// so a store whose index prunes (it never visits every match) may count it for those
    /// queries only, and give at least `keys.len()` and `unembedded` for the others.
    pub total: u64,
    /// How many of those have no embedding (they cannot be in the vector list).
    pub unembedded: u64,
}

/// What a store's vectors found for an archival query.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NearestPassages {
    /// Embedded passages the query's filters admit, nearest the query first (exactly or by an
    /// approximate index); at most the limit asked for.
    pub keys: Vec<CandidateKey>,
    /// How many embedded passages the filters admit.
    pub total: u64,
}

/// What the archival ranking reads of one candidate passage.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PassageDocument<'a> {
    /// The store's key for it (ties after the time: the larger key first).
    pub key: CandidateKey,
    /// Its text (analysed with [`document_terms`](super::document_terms), as stores index it).
    pub text: &'a str,
    /// Its embedding's vector, if it has one.
    pub embedding: Option<&'a [f32]>,
    /// When it was stored (ties: newer first).
    pub created_at: DateTime<Utc>,
}

/// How many candidates an archival search takes from each list for a page ending at `depth`:
/// twice the depth, at least 100, at most [`MAX_CANDIDATES`] (pages past that are empty).
pub fn passage_pool(depth: usize) -> usize {
    depth.saturating_mul(2).clamp(100, MAX_CANDIDATES)
}

/// Ranks archival candidates for a query: `(index into documents, score)`, best first (ties:
/// newer first). `terms` are the query's analysed terms, `statistics` their collection
/// statistics, `embedding` the query's (needed by the vector and hybrid modes; hybrid without
/// one ranks by text).
///
/// Scores: cosine similarity in [`SearchMode::Vector`] (comparable across searches), BM25 in
/// [`SearchMode::Text`], the fused reciprocal-rank score in [`SearchMode::Hybrid`]. Candidates
/// holding no query term are left out of the text list; candidates without an embedding out
/// of the vector list.
///
/// ```
/// use memgpt_core::backend::TermStatistics;
/// use memgpt_core::retrieval::{PassageDocument, SearchMode, query_terms, rank_passages};
///
/// let now = chrono::Utc::now();
/// let candidates: Vec<PassageDocument> = ["Mochi likes tuna", "the weather is nice"]
///     .iter()
///     .enumerate()
///     .map(|(i, text)| PassageDocument { key: i as i64, text, embedding: None, created_at: now })
///     .collect();
/// let terms = query_terms("what does Mochi eat");
/// let stats = TermStatistics { documents: 2, total_terms: 5, document_frequency: vec![1; terms.len()] };
/// let ranked = rank_passages(&candidates, &terms, &stats, None, SearchMode::Text);
/// assert_eq!(ranked.len(), 1);
/// assert_eq!(ranked[0].0, 0);
/// ```
pub fn rank_passages(
    candidates: &[PassageDocument<'_>],
    terms: &[String],
    statistics: &TermStatistics,
    embedding: Option<&[f32]>,
    mode: SearchMode,
) -> Vec<(usize, f32)> {
    let newer_first = |a: &usize, b: &usize| {
        let (pa, pb) = (&candidates[*a], &candidates[*b]);
        pb.created_at.cmp(&pa.created_at).then(pb.key.cmp(&pa.key))
    };
    let sorted = |mut ranked: Vec<(usize, f32)>| {
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| newer_first(&a.0, &b.0)));
        ranked
    };
    let by_vector = |query: &[f32]| {
        sorted(
            candidates
                .iter()
                .enumerate()
                .filter_map(|(i, c)| Some((i, cosine(query, c.embedding?))))
                .collect(),
        )
    };
    let by_text = || {
        let bm25 = Bm25::default();
        sorted(
            candidates
                .iter()
                .enumerate()
                .filter_map(|(i, c)| {
                    let (tf, length) = term_frequencies(c.text, terms);
                    let score = bm25.score(statistics, &tf, length);
                    (score > 0.0).then_some((i, score))
                })
                .collect(),
        )
    };
    match (mode, embedding) {
        (SearchMode::Vector, Some(query)) => by_vector(query),
        (SearchMode::Vector, None) => Vec::new(),
        (SearchMode::Text, _) | (SearchMode::Hybrid, None) => by_text(),
        (SearchMode::Hybrid, Some(query)) => {
            let vector: Vec<usize> = by_vector(query).into_iter().map(|(i, _)| i).collect();
            let text: Vec<usize> = by_text().into_iter().map(|(i, _)| i).collect();
            reciprocal_rank_fusion(&[(&vector[..], 1.0), (&text[..], 1.0)], RRF_K, newer_first)
        }
    }
}
