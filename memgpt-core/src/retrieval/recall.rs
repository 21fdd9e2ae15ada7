//! Hybrid recall search: how `conversation_search` ranks an agent's messages in every store.
//!
//! A store contributes three primitives of [`RecallStore`](crate::store::RecallStore): the
//! messages whose documents contain a query term (`text_candidates`, with the collection
//! statistics of those terms), the messages whose embeddings are nearest the query's
//! (`vector_candidates`), and the details of both (`candidates`).
//! [`search_messages`](crate::store::search_messages) then ranks the union with
//! [`rank_candidates`], the same way for every store:
//!
//! 1. **BM25** of each candidate's document (the message with the ends of the turns before it,
//!    see [`DocumentBuilder`](super::DocumentBuilder)) for the query's stemmed terms;
//! 2. **cosine similarity** of the query's embedding to the candidate's best window (a long
//!    message has one embedding per window of the embedder), windows after the first
//!    discounted by [`RecallRanking::later_window_discount`]: a window cut from the middle of a
//!    message has lost the opening that says what it is about;
//! 3. **cues**: a participant the query names ([`QueryCues::named_participant`]), or the user
//!    when the query speaks in the first person ([`QueryCues::speaks_as_user`]), multiplies
//!    their messages' BM25 and raises their similarity; so does a month or year it names;
//! 4. **fusion**: each signal is scaled to 0..1 over the candidates (min-max), and the fused
//!    score is their weighted sum, BM25 weighing [`RecallRanking::bm25_weight`] (ties: newest
//!    first). A candidate missing from one signal scores 0 on it.
//!
//! Without a query embedding (no embedder) the ranking is BM25 with the cues alone.
//!
//! Stores only choose the candidates (their own full-text ranking and vector index may pick
//! them), so two stores rank identically whenever both pools hold every match; with more
//! matches than [`RecallRanking::candidates`], only the tail of the list may differ.
//!
//! Why scores and not ranks (reciprocal-rank fusion, used before): how much each signal knows
//! differs by conversation. Short chit-chat turns share rare words with the questions about
//! them, so BM25 separates the right turn by a wide margin; long technical messages share many
//! words with everything, and BM25's margins shrink while the embedding's do not. Scaled scores
//! let the signal with the clearer margin lead; ranks hide the margins. Measured on both
//! development families in BENCHMARKS.md ("conversation search").

use serde::{Deserialize, Deserializer, Serialize};

use super::analyzer::count_terms;
use super::bm25::{Bm25, TermStatistics};
use super::cues::QueryCues;
use super::document::is_conversation;
use crate::embed::cosine;
use crate::message::{Message, MessageKind};

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
    /// Its search document as stored ([`MessageDocument::text`](crate::backend::MessageDocument::text)).
    pub document: String,
    /// Its embeddings, one per window of its text, in order (empty when it has none).
    pub embeddings: Vec<Vec<f32>>,
}

/// Why a recall search found a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FoundBy {
    /// Its own words hold a query term.
    Words,
    /// Only the conversation turns just before it hold a query term: it is the context around
    /// a match (a message's search document holds the terms of the turns before it, so an
    /// answer is found by the question's words).
    Context,
    /// Only its meaning (embedding) is near the query's.
    Meaning,
}

impl FoundBy {
    /// Why `candidate` is a match for the query's analysed `terms`.
    pub fn of(candidate: &RecallCandidate, terms: &[String]) -> Self {
        let own =
            crate::retrieval::document_terms(&crate::retrieval::document_text(&candidate.message));
        if terms.iter().any(|t| own.contains(t)) {
            FoundBy::Words
        } else if crate::retrieval::count_terms(&candidate.document, terms)
            .0
            .iter()
            .any(|&tf| tf > 0)
        {
            FoundBy::Context
        } else {
            FoundBy::Meaning
        }
    }
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
/// The defaults were chosen on two families of conversations (LoCoMo's chit-chat between two
/// people, BEAM's user/assistant technical chats; see BENCHMARKS.md) as the simplest settings
/// that hold on both, not tuned per conversation or per family.
///
/// Agents store their ranking with their configuration; an agent saved with the defaults of an
/// earlier version ([`RecallRanking::is_legacy_default`]) gets the current defaults when
/// loaded, while one configured otherwise keeps its settings.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RecallRanking {
    /// BM25's share of the fused score, 0 to 1; the similarity has the rest (default 0.5).
    pub bm25_weight: f32,
    /// Subtracted from the similarity of a long message's windows after its first (default
    /// 0.08), so that its later windows find it when they match clearly better than its opening,
    /// and length alone (more windows, more chances) does not lift it.
    pub later_window_discount: f32,
    /// Candidates taken from each list (default 50; raised to the requested page's depth, at
    /// most [`MAX_CANDIDATES`]).
    pub candidates: usize,
    /// The boost of the participant a query names (default ×1.15, +0.03).
    pub speaker_boost: CueBoost,
    /// The boost of the user's messages when the query speaks in the first person ("what did
    /// I decide...", "my deadline": the user asking about themselves; default ×1.5, +0.05).
    pub user_boost: CueBoost,
    /// The boost of messages from the months/years a query names (default ×1.5, +0.05).
    pub date_boost: CueBoost,
    /// BM25 parameters.
    pub bm25: Bm25,
}

impl Default for RecallRanking {
    fn default() -> Self {
        Self {
            bm25_weight: 0.5,
            later_window_discount: 0.08,
            candidates: 50,
            speaker_boost: CueBoost {
                bm25_factor: 1.15,
                cosine_bonus: 0.03,
            },
            user_boost: CueBoost {
                bm25_factor: 1.5,
                cosine_bonus: 0.05,
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

    /// Whether `stored` is a ranking as agents stored it with the defaults of the first
    /// version (reciprocal-rank fusion with the similarity's vote at 0.3 of BM25's, `k` 60, no
    /// user boost), which loads as today's defaults.
    pub fn is_legacy_default(stored: &serde_json::Value) -> bool {
        let legacy = serde_json::json!({
            "vector_weight": 0.3,
            "rrf_k": 60.0,
            "candidates": 50,
            "speaker_boost": {"bm25_factor": 1.15, "cosine_bonus": 0.03},
            "date_boost": {"bm25_factor": 1.5, "cosine_bonus": 0.05},
            "bm25": Bm25::default(),
        });
        /// Equal objects, with numbers equal up to f32 rounding (stored as f32).
        fn same(a: &serde_json::Value, b: &serde_json::Value) -> bool {
            match (a.as_object(), b.as_object(), a.as_f64(), b.as_f64()) {
                (Some(x), Some(y), ..) => {
                    x.len() == y.len()
                        && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
                }
                (_, _, Some(x), Some(y)) => (x - y).abs() < 1e-6,
                _ => a == b,
            }
        }
        same(stored, &legacy)
    }

    /// Deserializes a stored ranking, mapping [legacy defaults](RecallRanking::is_legacy_default)
    /// to today's (use with `#[serde(deserialize_with = ...)]`).
    pub fn deserialize_stored<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(deserializer)?;
        if Self::is_legacy_default(&value) {
            return Ok(Self::default());
        }
        serde_json::from_value(value).map_err(serde::de::Error::custom)
    }
}

/// Scales scores to 0..1 over a list (all 1 when they are equal).
fn min_max(list: &mut [(usize, f32)]) {
    let max = list.iter().map(|x| x.1).fold(f32::NEG_INFINITY, f32::max);
    let min = list.iter().map(|x| x.1).fold(f32::INFINITY, f32::min);
    let span = max - min;
    for (_, v) in list.iter_mut() {
        *v = if span > f32::EPSILON {
            (*v - min) / span
        } else {
            1.0
        };
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
    let as_user = cues.speaks_as_user();
    let boosts = |c: &RecallCandidate| {
        let mut boost = CueBoost::NONE;
        let mut apply = |b: CueBoost| {
            boost.bm25_factor *= b.bm25_factor;
            boost.cosine_bonus += b.cosine_bonus;
        };
        if named.is_some() && c.message.name == named {
            apply(ranking.speaker_boost);
        }
        if as_user && c.message.kind == MessageKind::User {
            apply(ranking.user_boost);
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
        if let Some(query) = query_vector
            && let Some(best) = candidate
                .embeddings
                .iter()
                .enumerate()
                .filter(|(_, v)| v.len() == query.len())
                .map(|(w, v)| {
                    let discount = if w == 0 {
                        0.0
                    } else {
                        ranking.later_window_discount
                    };
                    cosine(query, v) - discount
                })
                .reduce(f32::max)
        {
            semantic.push((i, best + boost.cosine_bonus));
        }
    }
    min_max(&mut lexical);
    min_max(&mut semantic);
    let weight = ranking.bm25_weight.clamp(0.0, 1.0);
    let mut fused = vec![None::<f32>; candidates.len()];
    for (i, v) in lexical {
        *fused[i].get_or_insert(0.0) += weight * v;
    }
    for (i, v) in semantic {
        *fused[i].get_or_insert(0.0) += (1.0 - weight) * v;
    }
    let mut ranked: Vec<(usize, f32)> = fused
        .into_iter()
        .enumerate()
        .filter_map(|(i, v)| Some((i, v?)))
        .collect();
    ranked.sort_by(|a, b| {
        let (x, y) = (&candidates[a.0], &candidates[b.0]);
        b.1.total_cmp(&a.1).then_with(|| {
            y.message
                .created_at
                .cmp(&x.message.created_at)
                .then(y.key.cmp(&x.key))
        })
    });
    ranked
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
                    embeddings: vectors.get(i).cloned().into_iter().collect(),
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
    fn scaled_scores_are_fused_and_the_best_window_counts() {
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
        // No word matches: the similarity ranking alone (ties: newest first).
        assert_eq!(order(&c, "zzz", Some(&[0.0, 1.0]))[..3], [3, 1, 2]);
        // A text match at full weight against similarity at full weight: equal shares, so a
        // tie, which the newest wins; the weakest on both comes last.
        let top = order(&c, "alpha", Some(&[0.0, 1.0]));
        assert_eq!(top, [3, 1, 0, 2]);
        // A text match that is also similar wins outright.
        assert_eq!(order(&c, "alpha", Some(&[1.0, 0.0]))[0], 0);
        // Vectors of another dimension are ignored, not compared.
        let top = order(&c, "zzz", Some(&[1.0, 0.0, 0.0]));
        assert!(top.is_empty());
        // A long message is scored by its best window, later windows discounted: a later
        // window as close as another message's first loses to it, a clearly closer one wins.
        let mut c = c;
        c[1].embeddings = vec![vec![0.0, 1.0], vec![1.0, 0.0]];
        assert_eq!(order(&c, "zzz", Some(&[1.0, 0.0]))[..2], [0, 1]);
        c[0].embeddings = vec![vec![0.8, 0.6]];
        assert_eq!(order(&c, "zzz", Some(&[1.0, 0.0]))[..2], [1, 0]);
    }

    #[test]
    fn the_first_person_lifts_the_users_messages() {
        // Equal words, user (even) and assistant (odd) alternating.
        let c = candidates(
            &[
                ("", "the deployment deadline is March 1"),
                ("", "the deployment deadline is March 1"),
            ],
            &[],
        );
        assert_eq!(order(&c, "What deployment deadline did I set?", None)[0], 0);
        assert_eq!(
            order(&c, "What is the deployment deadline?", None)[0],
            1,
            "newest"
        );
    }

    #[test]
    fn legacy_default_rankings_load_as_todays() {
        let legacy = serde_json::json!({
            "vector_weight": 0.3, "rrf_k": 60.0, "candidates": 50,
            "speaker_boost": {"bm25_factor": 1.15, "cosine_bonus": 0.03},
            "date_boost": {"bm25_factor": 1.5, "cosine_bonus": 0.05},
            "bm25": {"k1": 1.2, "b": 0.75}
        });
        assert!(RecallRanking::is_legacy_default(&legacy));
        let config: crate::AgentConfig =
            serde_json::from_value(serde_json::json!({ "recall_ranking": legacy })).unwrap();
        assert_eq!(config.recall_ranking, RecallRanking::default());
        // A customised ranking is kept.
        let mut custom = legacy.clone();
        custom["candidates"] = 80.into();
        assert!(!RecallRanking::is_legacy_default(&custom));
        let config: crate::AgentConfig =
            serde_json::from_value(serde_json::json!({ "recall_ranking": {"candidates": 80} }))
                .unwrap();
        assert_eq!(config.recall_ranking.candidates, 80);
        assert_eq!(config.recall_ranking.bm25_weight, 0.5);
        // Today's defaults round-trip.
        let today = serde_json::to_value(crate::AgentConfig::default()).unwrap();
        let back: crate::AgentConfig = serde_json::from_value(today).unwrap();
        assert_eq!(back.recall_ranking, RecallRanking::default());
    }
}
