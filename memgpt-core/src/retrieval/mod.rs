//! Retrieval: how recall and archival search find and rank what an agent stored.
//!
//! One module serves every store, so every backend ranks the same way:
//!
//! * [`analyzer`](tokenize): words, Snowball stemming and stop words ([`document_terms`],
//!   [`query_terms`]); stores index and look up only these terms.
//! * [`DocumentBuilder`]: what recall storage indexes for a message (the message with the ends
//!   of the two conversation turns before it, its own words counted twice).
//! * [`Bm25`] and [`TermStatistics`]: lexical relevance; [`Bm25Index`] for documents in memory.
//! * [`QueryCues`]: the participant and the months/years a query names.
//! * [`reciprocal_rank_fusion`]: how archival rankings are combined (recall search fuses scaled
//!   scores instead, see [`rank_candidates`]).
//! * [`rank_candidates`] and [`RecallRanking`]: hybrid recall ranking of the candidates a
//!   [`RecallStore`](crate::store::RecallStore) finds by text and by vector (the search itself
//!   is [`store::search_messages`](crate::store::search_messages)).
//! * [`rank_passages`] and [`SearchMode`]: archival ranking of the candidates an
//!   [`ArchivalStore`](crate::store::ArchivalStore) finds by text and by vector (the search
//!   itself is [`store::search_passages`](crate::store::search_passages)).
//!
//! The defaults and how they were chosen are in BENCHMARKS.md ("LoCoMo: evidence recall of
//! conversation search").

pub(crate) mod analyzer;
pub(crate) mod bm25;
mod cues;
pub(crate) mod document;
mod fusion;
mod mode;
mod passages;
mod recall;

pub use analyzer::{
    MAX_TERM_BYTES, count_terms, document_terms, query_terms, term_frequencies, tokenize,
};
pub(crate) use bm25::TermStatistics;
pub use bm25::{Bm25, Bm25Index};
pub use cues::QueryCues;
pub(crate) use document::DocumentBuilder;
pub use document::{NEIGHBOUR_TERMS, SESSION_GAP, document_text, is_conversation};
pub use fusion::{RRF_K, reciprocal_rank_fusion};
pub use mode::SearchMode;
pub use passages::{NearestPassages, PassageDocument, PassageMatches, passage_pool, rank_passages};
pub use recall::{
    CandidateKey, CueBoost, FoundBy, MAX_CANDIDATES, RecallCandidate, RecallRanking,
    TextCandidates, rank_candidates,
};
