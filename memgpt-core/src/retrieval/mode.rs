//! [`SearchMode`]: text, vector or hybrid search.

use serde::{Deserialize, Serialize};

/// How archival search ranks passages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchMode {
    /// By embedding similarity (needs a query embedding).
    Vector,
    /// By lexical relevance (BM25 or the backend's full-text ranking).
    Text,
    /// Reciprocal-rank fusion of both; falls back to text when there is no query embedding.
    #[default]
    Hybrid,
}
