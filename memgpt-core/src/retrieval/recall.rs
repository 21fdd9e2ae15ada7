//! Hybrid recall search: how `conversation_search` ranks an agent's messages in every store.
//!
//! A store contributes three primitives of [`RecallStore`](crate::store::RecallStore): the
//! messages whose documents contain a query term (`text_candidates`, with the collection
//! statistics of those terms), the messages whose embeddings are nearest the query's
//! (`vector_candidates`), and the details of both (`candidates`).
//! [`search_recall`](crate::store::search_recall) then ranks the union with
//! [`rank_candidates`], the same way for every store:
//!
//! 1. **BM25** of each candidate's document (the message with the turns before it, see
//!    [`DocumentBuilder`](super::DocumentBuilder)) for the query's stemmed terms;
//! 2. **cosine similarity** of each candidate's embedding to the query's;
//! 3. **cues**: a participant the query names ([`QueryCues::named_participant`]) multiplies
//!    their messages' BM25 and raises their similarity; so does a month or year it names;
//! 4. **weighted reciprocal-rank fusion** of the BM25 ranking and the similarity ranking, the
//!    similarity's vote weighing [`RecallRanking::vector_weight`] of BM25's (ties: newest
//!    first).
//!
//! Without a query embedding (no embedder) the ranking is BM25 with the cues alone.
//!
//! Stores only choose the candidates (their own full-text ranking and vector index may pick
//! them), so two stores rank identically whenever both pools hold every match; with more
//! matches than [`RecallRanking::candidates`], only the tail of the list may differ.

use serde::{Deserialize, Serialize};

use super::analyzer::count_terms;
use super::bm25::{Bm25, TermStatistics};
use super::cues::QueryCues;
use super::document::is_conversation;
use super::fusion::{RRF_K, reciprocal_rank_fusion};
use crate::embed::cosine;
use crate::message::Message;

/// A store's handle on one message during a search (its row number, index position...).
pub type CandidateKey = i64;

/// The most candidates a search takes from each list, whatever page is asked for: pages past
/// `2 * MAX_CANDIDATES` results are empty.
pub const MAX_CANDIDATES: usize = 1_000;

/// What a store found by text: candidate keys (best first, as far as the store can tell) and
/// the statistics of the query terms.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TextCandidates {
    /// Messages whose documents contain at least one query term.
    pub keys: Vec<CandidateKey>,
    /// The collection statistics of the query terms, in the order asked.
    pub statistics: TermStatistics,
}

/// One candidate as the ranking sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct RecallCandidate {
    /// The store's key for it.
    pub key: CandidateKey,
    /// The message.
    pub message: Message,
    /// Its search document as stored ([`MessageDocument::text`](super::MessageDocument::text)).
    pub document: String,
    /// Its embedding, if it has one.
    pub embedding: Option<Vec<f32>>,
}

/// How much a cue lifts a message: its BM25 score is multiplied by `bm25_factor` and
/// `cosine_bonus` is added to its similarity.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CueBoost {
    /// Multiplies the BM25 score.
    pub bm25_factor: f32,
    /// Is added to the cosine similarity.
    pub cosine_bonus: f32,
}

impl CueBoost {
    /// No boost.
    pub const NONE: CueBoost = CueBoost {
        bm25_factor: 1.0,
        cosine_bonus: 0.0,
    };
}

/// The query-time parameters of hybrid recall search, with their defaults.
///
/// The defaults were chosen on LoCoMo conversations (see BENCHMARKS.md) as the simplest
/// settings that hold up on each conversation alone, not tuned per conversation.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RecallRanking {
    /// The similarity ranking's vote in the fusion, relative to BM25's 1.0 (default 0.3:
    /// conversation turns are short and colloquial, and a small embedding model ranks them far
    /// worse than BM25 does, so its vote mostly breaks ties).
    pub vector_weight: f32,
    /// The fusion constant `k` (default 60).
    pub rrf_k: f32,
    /// Candidates taken from each list (default 50; raised to the requested page's depth, at
    /// most [`MAX_CANDIDATES`]).
    pub candidates: usize,
    /// The boost of the participant a query names (default ×1.15, +0.03).
    pub speaker_boost: CueBoost,
    /// The boost of messages from the months/years a query names (default ×1.5, +0.05).
    pub date_boost: CueBoost,
    /// BM25 parameters.
    pub bm25: Bm25,
}

impl Default for RecallRanking {
    fn default() -> Self {
        Self {
            vector_weight: 0.3,
            rrf_k: RRF_K,
            candidates: 50,
            speaker_boost: CueBoost {
                bm25_factor: 1.15,
                cosine_bonus: 0.03,
            },
            date_boost: CueBoost {
                bm25_factor: 1.5,
                cosine_bonus: 0.05,
            },
            bm25: Bm25::default(),
        }
    }
}

impl RecallRanking {
    /// How many candidates to take from each list for a page ending at `depth`.
    pub fn pool(&self, depth: usize) -> usize {
        self.candidates.max(depth).clamp(1, MAX_CANDIDATES)
    }
}

/// Ranks candidates for a query: `(index into candidates, fused score)`, best first.
///
/// `terms` are the query's [`query_terms`](super::query_terms) and `statistics` their collection statistics;
/// `query_vector` is the query's embedding, if any.
pub fn rank_candidates(
    candidates: &[RecallCandidate],
    terms: &[String],
    statistics: &TermStatistics,
    query_vector: Option<&[f32]>,
    cues: &QueryCues,
    ranking: &RecallRanking,
) -> Vec<(usize, f32)> {
    let mut participants: Vec<&str> = candidates
        .iter()
        .filter(|c| is_conversation(c.message.kind))
        .filter_map(|c| c.message.name.as_deref())
        .collect();
    participants.sort_unstable();
    participants.dedup();
    let named = cues.named_participant(participants.iter().copied());
    let boosts = |c: &RecallCandidate| {
        let mut boost = CueBoost::NONE;
        let mut apply = |b: CueBoost| {
            boost.bm25_factor *= b.bm25_factor;
            boost.cosine_bonus += b.cosine_bonus;
        };
        if named.is_some() && c.message.name == named {
            apply(ranking.speaker_boost);
        }
        if cues.fits_date(c.message.created_at) {
            apply(ranking.date_boost);
        }
        boost
    };
    let mut lexical: Vec<(usize, f32)> = Vec::new();
    let mut semantic: Vec<(usize, f32)> = Vec::new();
    for (i, candidate) in candidates.iter().enumerate() {
        let boost = boosts(candidate);
        if !terms.is_empty() {
            let (tf, length) = count_terms(&candidate.document, terms);
            let score = ranking.bm25.score(statistics, &tf, length);
            if score > 0.0 {
                lexical.push((i, score * boost.bm25_factor));
            }
        }
        if let (Some(query), Some(vector)) = (query_vector, &candidate.embedding)
            && vector.len() == query.len()
        {
            semantic.push((i, cosine(query, vector) + boost.cosine_bonus));
        }
    }
    let newer_first = |a: &usize, b: &usize| {
        let (x, y) = (&candidates[*a], &candidates[*b]);
        y.message
            .created_at
            .cmp(&x.message.created_at)
            .then(y.key.cmp(&x.key))
    };
    for list in [&mut lexical, &mut semantic] {
        list.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| newer_first(&a.0, &b.0)));
    }
    let lexical: Vec<usize> = lexical.into_iter().map(|(i, _)| i).collect();
    let semantic: Vec<usize> = semantic.into_iter().map(|(i, _)| i).collect();
    reciprocal_rank_fusion(
        &[(&lexical[..], 1.0), (&semantic[..], ranking.vector_weight)],
        ranking.rrf_k,
        newer_first,
    )
}

#[cfg(test)]
mod tests {
    use chrono::{Duration, TimeZone, Utc};

    use super::*;
    use crate::ids::AgentId;
    use crate::message::MessageKind;
    use crate::retrieval::{DocumentBuilder, query_terms};

    /// Candidates `spacing` apart (20 days: each its own session; minutes: one session).
    fn candidates_spaced(
        texts: &[(&str, &str)],
        vectors: &[Vec<f32>],
        spacing: Duration,
    ) -> Vec<RecallCandidate> {
        let agent = AgentId::new();
        let t0 = Utc.with_ymd_and_hms(2023, 5, 1, 9, 0, 0).unwrap();
        let mut builder = DocumentBuilder::new([], 0);
        texts
            .iter()
            .enumerate()
            .map(|(i, (name, text))| {
                let kind = if i % 2 == 0 {
                    MessageKind::User
                } else {
                    MessageKind::Assistant
                };
                let mut m = Message::new(agent, kind, *text, t0 + spacing * i as i32);
                m.name = Some((*name).to_owned());
                RecallCandidate {
                    key: i as i64,
                    document: builder.add(&m).text(),
                    message: m,
                    embedding: vectors.get(i).cloned(),
                }
            })
            .collect()
    }

    fn candidates(texts: &[(&str, &str)], vectors: &[Vec<f32>]) -> Vec<RecallCandidate> {
        candidates_spaced(texts, vectors, Duration::days(20))
    }

    fn stats(c: &[RecallCandidate], terms: &[String]) -> TermStatistics {
        TermStatistics {
            documents: c.len() as u64,
            total_terms: c
                .iter()
                .map(|c| count_terms(&c.document, &[]).1 as u64)
                .sum(),
            document_frequency: terms
                .iter()
                .map(|t| {
                    c.iter()
                        .filter(|c| count_terms(&c.document, std::slice::from_ref(t)).0[0] > 0)
                        .count() as u64
                })
                .collect(),
        }
    }

    fn order(c: &[RecallCandidate], q: &str, v: Option<&[f32]>) -> Vec<i64> {
        let terms = query_terms(q);
        let s = stats(c, &terms);
        rank_candidates(
            c,
            &terms,
            &s,
            v,
            &QueryCues::parse(q),
            &RecallRanking::default(),
        )
        .into_iter()
        .map(|(i, _)| c[i].key)
        .collect()
    }

    #[test]
    fn replies_are_found_through_what_they_answer() {
        let c = candidates_spaced(
            &[
                ("Ann", "Did you go to the charity race?"),
                ("Bob", "Yes, last Saturday! It was for mental health."),
                ("Ann", "I adopted a puppy named Rex."),
                ("Bob", "Lovely. I am painting sunsets these days."),
            ],
            &[],
            Duration::minutes(1),
        );
        let top = order(&c, "When did Bob run the charity race?", None);
        assert!(top[..2].contains(&1), "{top:?}");
        assert_eq!(order(&c, "What does Bob paint?", None)[0], 3, "stemmed");
    }

    #[test]
    fn the_named_speaker_and_the_named_month_win_ties() {
        let c = candidates(
            &[
                ("Ann", "I love hiking."),
                ("Bob", "I love hiking."),
                ("Ann", "unrelated words here"),
                ("Bob", "more unrelated words"),
            ],
            &[],
        );
        // Both say the same; the question is about Bob (and a month neither fits).
        assert_eq!(order(&c, "Does Bob love hiking?", None)[0], 1);
        // Messages 2 and 3 (June) fit the month but match no word; 0 and 1 tie.
        let june = order(&c, "who loves hiking in June 2023?", None);
        assert_eq!(june[0], 1, "newer first on a tie");
    }

    #[test]
    fn vectors_vote_and_break_ties() {
        let c = candidates(
            &[
                ("Ann", "alpha"),
                ("Bob", "beta"),
                ("Ann", "gamma"),
                ("Bob", "delta"),
            ],
            &[
                vec![1.0, 0.0],
                vec![0.0, 1.0],
                vec![0.7, 0.7],
                vec![0.0, 1.0],
            ],
        );
        // No word matches: the similarity ranking alone.
        assert_eq!(order(&c, "zzz", Some(&[0.0, 1.0]))[..2], [3, 1]);
        // A text match outranks similarity, which still orders the rest.
        let top = order(&c, "alpha", Some(&[0.0, 1.0]));
        assert_eq!(top[0], 0);
        assert_eq!(top.len(), 4);
        // Vectors of another dimension are ignored, not compared.
        let top = order(&c, "zzz", Some(&[1.0, 0.0, 0.0]));
        assert!(top.is_empty());
    }
}
