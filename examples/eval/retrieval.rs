//! Conversation search over dialog turns, as the offline metrics run it.
//!
//! Three retrievers over the same turns:
//!
//! * **BM25**: Okapi BM25 ([`Bm25Index`]) over stemmed words (Snowball English). Each turn is
//!   indexed *with its neighbours* (two turns either side in the same session; the turn itself
//!   counts twice), because a reply rarely repeats what it answers ("Yes, last Saturday!"
//!   answers "Did you go to the race?"). Query words are the question's words without stop
//!   words.
//! * **vector**: cosine similarity between the question's embedding and each turn's
//!   embedding.
//! * **hybrid**: weighted reciprocal-rank fusion (k = 60) of the two rankings. For
//!   conversations the vector ranking's vote weighs 0.3 of BM25's: turns are short and
//!   colloquial and the small offline embedding model ranks them much worse than BM25 does
//!   (see BENCHMARKS.md); for documents the two weigh the same.
//!
//! Both rankings are speaker- and date-aware: when a question names exactly one of the two
//! speakers, that speaker's turns get a small boost (the question is about what *they* said or
//! did); when it names a month or a year ("camping in June", "on October 13, 2023"), turns of
//! sessions held then or in the month after (when such events get told) get one too.
//! Nothing here looks at answers or evidence: it is what conversation search can do for any
//! conversation.

use std::collections::HashMap;

use chrono::{DateTime, Datelike, Utc};
use memgpt::retrieval::{Bm25Index, query_terms, tokenize};
use rust_stemmers::{Algorithm, Stemmer};

/// A turn as the retrievers see it.
#[derive(Clone, Debug)]
pub struct TurnDoc {
    pub dia_id: String,
    pub speaker: String,
    pub session: usize,
    /// When its session took place, if known.
    pub date: Option<DateTime<Utc>>,
    pub content: String,
}

/// Which ranking.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Retriever {
    Bm25,
    Vector,
    Hybrid,
}

impl Retriever {
    pub const ALL: [Retriever; 3] = [Retriever::Bm25, Retriever::Vector, Retriever::Hybrid];

    pub fn name(self) -> &'static str {
        match self {
            Retriever::Bm25 => "bm25",
            Retriever::Vector => "vector",
            Retriever::Hybrid => "hybrid",
        }
    }
}

/// Lowercases and stems words.
pub struct Analyzer {
    stemmer: Stemmer,
}

impl Default for Analyzer {
    fn default() -> Self {
        Self {
            stemmer: Stemmer::create(Algorithm::English),
        }
    }
}

impl std::fmt::Debug for Analyzer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Analyzer(snowball english)")
    }
}

impl Analyzer {
    /// A document's terms.
    pub fn document(&self, text: &str) -> Vec<String> {
        tokenize(text)
            .iter()
            .map(|w| self.stemmer.stem(w).into_owned())
            .collect()
    }

    /// A query's terms (stop words dropped unless nothing else is left).
    pub fn query(&self, text: &str) -> Vec<String> {
        query_terms(text)
            .iter()
            .map(|w| self.stemmer.stem(w).into_owned())
            .collect()
    }
}

/// How much a named speaker's turns are boosted (a multiplier on BM25 scores, an addition to
/// cosine similarities).
const SPEAKER_BOOST_BM25: f32 = 1.15;
const SPEAKER_BOOST_COSINE: f32 = 0.03;
/// How much turns of the sessions a question's date points at are boosted (a multiplier on
/// BM25 scores, an addition to cosine similarities).
const DATE_BOOST_BM25: f32 = 1.5;
const DATE_BOOST_COSINE: f32 = 0.05;

const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

/// The months (1-12) and years a question names. "may" counts as a month only next to a
/// number or after "in"/"of" ("in May", "May 23", "8 May").
pub fn question_dates(question: &str) -> (Vec<u32>, Vec<i32>) {
    let words = tokenize(question);
    let is_number = |w: Option<&String>| w.is_some_and(|w| w.chars().all(|c| c.is_ascii_digit()));
    let mut months = Vec::new();
    let mut years = Vec::new();
    for (i, w) in words.iter().enumerate() {
        if let Some(m) = MONTHS.iter().position(|m| m == w) {
            let may_ok = *w != "may"
                || is_number(words.get(i + 1))
                || i.checked_sub(1).is_some_and(|p| {
                    is_number(words.get(p)) || matches!(words[p].as_str(), "in" | "of")
                });
            if may_ok {
                months.push(m as u32 + 1);
            }
        } else if w.len() == 4
            && let Ok(year) = w.parse::<i32>()
            && (1900..2100).contains(&year)
        {
            years.push(year);
        }
    }
    (months, years)
}

/// Whether a session held at `date` fits the question's months and years (a session in the
/// month after a named month fits too: that is when events get told).
fn date_fits(date: DateTime<Utc>, months: &[u32], years: &[i32]) -> bool {
    let month_ok = months.is_empty()
        || months
            .iter()
            .any(|&m| date.month() == m || date.month() == m % 12 + 1);
    let year_ok = years.is_empty() || years.contains(&date.year());
    month_ok && year_ok
}
/// The usual reciprocal-rank-fusion constant.
const RRF_K: f32 = 60.0;
/// The vector ranking's weight in conversation search's fusion (BM25's is 1).
const CONVERSATION_VECTOR_WEIGHT: f32 = 0.3;
/// Turns either side of a turn in its BM25 document.
const BM25_NEIGHBOURS: usize = 2;

/// BM25 over stemmed words, and optionally vectors, over any list of texts.
#[derive(Debug)]
pub struct TextIndex {
    analyzer: Analyzer,
    bm25: Bm25Index,
    vectors: Vec<Vec<f32>>,
}

impl TextIndex {
    /// Indexes `texts`; `vectors` are their embeddings (empty: BM25 only).
    pub fn new<'a>(texts: impl IntoIterator<Item = &'a str>, vectors: Vec<Vec<f32>>) -> Self {
        let analyzer = Analyzer::default();
        let bm25 = Bm25Index::from_terms(texts.into_iter().map(|t| analyzer.document(t)));
        Self {
            analyzer,
            bm25,
            vectors,
        }
    }

    /// BM25 scores of every text.
    pub fn bm25_scores(&self, query: &str) -> Vec<f32> {
        self.bm25.scores_for_terms(&self.analyzer.query(query))
    }

    /// Cosine similarities of every text (empty without vectors).
    pub fn cosine_scores(&self, query: &[f32]) -> Vec<f32> {
        self.vectors
            .iter()
            .map(|v| crate::embed::dot(v, query))
            .collect()
    }

    /// Ranks with the given scores: BM25 keeps matching texts only; hybrid fuses the two, the
    /// vector ranking's vote weighted by `vector_weight`.
    pub fn rank(
        bm25: Option<Vec<f32>>,
        cosine: Option<Vec<f32>>,
        retriever: Retriever,
        vector_weight: f32,
        k: usize,
    ) -> Vec<usize> {
        let by_bm25 = |s: Vec<f32>| ranked(s, |x| x > 0.0);
        let by_cosine = |s: Vec<f32>| ranked(s, |_| true);
        let mut out = match (retriever, bm25, cosine) {
            (Retriever::Vector, _, Some(c)) => by_cosine(c),
            (Retriever::Hybrid, Some(b), Some(c)) => {
                reciprocal_rank_fusion(&[(by_bm25(b), 1.0), (by_cosine(c), vector_weight)])
            }
            (Retriever::Bm25 | Retriever::Hybrid, Some(b), _) => by_bm25(b),
            _ => Vec::new(),
        };
        out.truncate(k);
        out
    }

    /// Text indexes, best first (at most `k`). Vector and hybrid need `embedding`; hybrid
    /// without one is BM25.
    pub fn search(
        &self,
        query: &str,
        embedding: Option<&[f32]>,
        retriever: Retriever,
        k: usize,
    ) -> Vec<usize> {
        let bm25 = (retriever != Retriever::Vector).then(|| self.bm25_scores(query));
        let cosine = embedding
            .filter(|_| retriever != Retriever::Bm25 && !self.vectors.is_empty())
            .map(|e| self.cosine_scores(e));
        Self::rank(bm25, cosine, retriever, 1.0, k)
    }
}

/// The search index of one conversation.
#[derive(Debug)]
pub struct ConversationIndex {
    turns: Vec<TurnDoc>,
    index: TextIndex,
    speakers: Vec<String>,
}

impl ConversationIndex {
    /// The text BM25 indexes for turn `i`: [`BM25_NEIGHBOURS`] turns either side in the same
    /// session, the turn itself twice.
    pub fn bm25_text(turns: &[TurnDoc], i: usize) -> String {
        let line = |t: &TurnDoc| format!("{}: {}", t.speaker, t.content);
        let first = i.saturating_sub(BM25_NEIGHBOURS);
        let last = (i + BM25_NEIGHBOURS).min(turns.len().saturating_sub(1));
        let mut parts = Vec::new();
        for (j, t) in turns.iter().enumerate().take(last + 1).skip(first) {
            if t.session == turns[i].session {
                parts.push(line(t));
                if j == i {
                    parts.push(line(t));
                }
            }
        }
        parts.join("\n")
    }

    /// The text embedded for a turn: `Speaker: content`. (Embedding each turn with its
    /// neighbours ranks no better in the fusion and costs three times the compute.)
    pub fn turn_text(turn: &TurnDoc) -> String {
        format!("{}: {}", turn.speaker, turn.content)
    }

    /// Indexes `turns`; `vectors` are the embeddings of [`ConversationIndex::turn_text`]
    /// (empty when there is no embedder: only BM25 then works).
    pub fn new(turns: Vec<TurnDoc>, vectors: Vec<Vec<f32>>) -> Self {
        let windows: Vec<String> = (0..turns.len())
            .map(|i| Self::bm25_text(&turns, i))
            .collect();
        let index = TextIndex::new(windows.iter().map(String::as_str), vectors);
        let mut speakers: Vec<String> = turns.iter().map(|t| t.speaker.clone()).collect();
        speakers.sort();
        speakers.dedup();
        Self {
            turns,
            index,
            speakers,
        }
    }

    /// The turns.
    pub fn turns(&self) -> &[TurnDoc] {
        &self.turns
    }

    /// The one speaker the question names, if exactly one.
    fn named_speaker(&self, question: &str) -> Option<&str> {
        let words: Vec<String> = tokenize(question);
        let named: Vec<&str> = self
            .speakers
            .iter()
            .filter(|s| {
                let s = s.to_lowercase();
                words.contains(&s)
            })
            .map(String::as_str)
            .collect();
        match named[..] {
            [one] => Some(one),
            _ => None,
        }
    }

    /// Turn indexes, best first (at most `k`).
    pub fn search(
        &self,
        question: &str,
        embedding: Option<&[f32]>,
        retriever: Retriever,
        k: usize,
    ) -> Vec<usize> {
        let speaker = self.named_speaker(question);
        let of_speaker = |i: usize| Some(self.turns[i].speaker.as_str()) == speaker;
        let (months, years) = question_dates(question);
        let dated = !months.is_empty() || !years.is_empty();
        let in_time = |i: usize| {
            dated
                && self.turns[i]
                    .date
                    .is_some_and(|d| date_fits(d, &months, &years))
        };
        let bm25 = (retriever != Retriever::Vector).then(|| {
            let mut s = self.index.bm25_scores(question);
            for (i, x) in s.iter_mut().enumerate() {
                if of_speaker(i) {
                    *x *= SPEAKER_BOOST_BM25;
                }
                if in_time(i) {
                    *x *= DATE_BOOST_BM25;
                }
            }
            s
        });
        let cosine = embedding
            .filter(|_| retriever != Retriever::Bm25 && !self.index.vectors.is_empty())
            .map(|e| {
                let mut s = self.index.cosine_scores(e);
                for (i, x) in s.iter_mut().enumerate() {
                    if of_speaker(i) {
                        *x += SPEAKER_BOOST_COSINE;
                    }
                    if in_time(i) {
                        *x += DATE_BOOST_COSINE;
                    }
                }
                s
            });
        TextIndex::rank(bm25, cosine, retriever, CONVERSATION_VECTOR_WEIGHT, k)
    }
}

/// Indexes sorted by descending score (ties: earlier index first), keeping those `keep` admits.
fn ranked(scores: Vec<f32>, keep: impl Fn(f32) -> bool) -> Vec<usize> {
    let mut order: Vec<usize> = (0..scores.len()).filter(|&i| keep(scores[i])).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    order
}

/// Fuses rankings: each item scores the sum of `weight / (60 + rank)` over the lists it is in.
pub fn reciprocal_rank_fusion(lists: &[(Vec<usize>, f32)]) -> Vec<usize> {
    let mut fused: HashMap<usize, f32> = HashMap::new();
    for (list, weight) in lists {
        for (rank, &i) in list.iter().enumerate() {
            *fused.entry(i).or_default() += weight / (RRF_K + rank as f32 + 1.0);
        }
    }
    let mut items: Vec<(usize, f32)> = fused.into_iter().collect();
    items.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    items.into_iter().map(|(i, _)| i).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(id: &str, speaker: &str, session: usize, content: &str) -> TurnDoc {
        TurnDoc {
            dia_id: id.into(),
            speaker: speaker.into(),
            session,
            date: None,
            content: content.into(),
        }
    }

    fn turns() -> Vec<TurnDoc> {
        vec![
            turn("D1:1", "Ann", 1, "Did you go to the charity race?"),
            turn(
                "D1:2",
                "Bob",
                1,
                "Yes, last Saturday! It was for mental health.",
            ),
            turn("D2:1", "Ann", 2, "I adopted a puppy named Rex."),
            turn(
                "D2:2",
                "Bob",
                2,
                "Lovely. I am painting sunsets these days.",
            ),
        ]
    }

    #[test]
    fn bm25_documents_hold_two_neighbours_and_the_turn_twice() {
        let t = turns();
        assert_eq!(
            ConversationIndex::bm25_text(&t, 0),
            "Ann: Did you go to the charity race?\nAnn: Did you go to the charity race?\nBob: Yes, last Saturday! It was for mental health."
        );
        assert_eq!(
            ConversationIndex::bm25_text(&t, 3).matches("Bob:").count(),
            2
        );
        assert_eq!(
            ConversationIndex::bm25_text(&t, 3).matches("Ann:").count(),
            1
        );
    }

    #[test]
    fn questions_name_months_and_years() {
        assert_eq!(
            question_dates("When did Mel go camping in June?"),
            (vec![6], vec![])
        );
        assert_eq!(
            question_dates("What did she paint on October 13, 2023?"),
            (vec![10], vec![2023])
        );
        assert_eq!(
            question_dates("What did Jon find on 1 February, 2023?"),
            (vec![2], vec![2023])
        );
        assert_eq!(
            question_dates("May I ask what you may like?"),
            (vec![], vec![])
        );
        assert_eq!(question_dates("What happened in May?"), (vec![5], vec![]));
        assert_eq!(
            question_dates("How many in 12345 or 1234?"),
            (vec![], vec![])
        );
        let june = crate::data::parse_locomo_date("1:00 pm on 2 June, 2023").unwrap();
        let july = crate::data::parse_locomo_date("1:00 pm on 2 July, 2023").unwrap();
        let august = crate::data::parse_locomo_date("1:00 pm on 2 August, 2023").unwrap();
        assert!(date_fits(june, &[6], &[]) && date_fits(july, &[6], &[]));
        assert!(!date_fits(august, &[6], &[]));
        assert!(!date_fits(june, &[6], &[2022]));
        assert!(date_fits(
            crate::data::parse_locomo_date("1:00 pm on 2 January, 2024").unwrap(),
            &[12],
            &[]
        ));
    }

    #[test]
    fn bm25_stems_and_finds_the_reply_through_its_neighbour() {
        let index = ConversationIndex::new(turns(), Vec::new());
        let top = index.search(
            "When did Bob run the charity race?",
            None,
            Retriever::Bm25,
            2,
        );
        assert_eq!(top.len(), 2);
        assert!(
            top.contains(&1),
            "the reply is found through its question: {top:?}"
        );
        // "paints" matches "painting" once stemmed.
        assert_eq!(
            index.search("What does Bob paint?", None, Retriever::Bm25, 1),
            [3]
        );
        // The named speaker's turn wins a tie.
        assert_eq!(index.named_speaker("What did Bob say?"), Some("Bob"));
        assert_eq!(index.named_speaker("What did Bob tell Ann?"), None);
    }

    #[test]
    fn vectors_and_fusion() {
        let vectors = vec![
            vec![1.0, 0.0],
            vec![0.8, 0.6],
            vec![0.0, 1.0],
            vec![0.6, 0.8],
        ];
        let index = ConversationIndex::new(turns(), vectors);
        assert_eq!(
            index.search("puppy", Some(&[0.0, 1.0]), Retriever::Vector, 2),
            [2, 3]
        );
        assert!(index.search("x", None, Retriever::Vector, 3).is_empty());
        let hybrid = index.search("puppy Rex", Some(&[0.0, 1.0]), Retriever::Hybrid, 1);
        assert_eq!(hybrid, [2], "first in both lists");
        assert_eq!(
            reciprocal_rank_fusion(&[(vec![1, 2], 1.0), (vec![2, 1], 1.0)]),
            [1, 2]
        );
        assert_eq!(
            reciprocal_rank_fusion(&[(vec![1, 2], 1.0), (vec![2, 3], 1.0)]),
            [2, 1, 3]
        );
        assert_eq!(
            reciprocal_rank_fusion(&[(vec![1, 2], 1.0), (vec![2, 1], 0.3)]),
            [1, 2],
            "a lighter list breaks no ranking it disagrees with"
        );
        assert_eq!(
            reciprocal_rank_fusion(&[(vec![1, 2], 0.3), (vec![2, 1], 1.0)]),
            [2, 1]
        );
    }
}
