//! Okapi BM25: the lexical relevance every store's search is scored with.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::analyzer::{document_terms, query_terms};

/// The parameters of Okapi BM25.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bm25 {
    /// Term-frequency saturation (default 1.2).
    pub k1: f32,
    /// Length normalisation, 0 (none) to 1 (full) (default 0.75).
    pub b: f32,
}

impl Default for Bm25 {
    fn default() -> Self {
        Self { k1: 1.2, b: 0.75 }
    }
}

/// What BM25 needs to know about the collection a document is scored in: its size, its average
/// length, and in how many documents each query term occurs.
///
/// Stores report these for the terms of a query over **all the documents of their text index**
/// (every agent's), as a search engine reports them over its index.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TermStatistics {
    /// Documents in the collection.
    pub documents: u64,
    /// Terms in all documents together (for the average length).
    pub total_terms: u64,
    /// For each query term, in order, how many documents contain it.
    pub document_frequency: Vec<u64>,
}

impl TermStatistics {
    /// The average document length (at least 1).
    pub fn average_length(&self) -> f32 {
        if self.documents == 0 {
            1.0
        } else {
            (self.total_terms as f32 / self.documents as f32).max(1.0)
        }
    }
}

impl Bm25 {
    /// The inverse document frequency of a term in `df` of `documents` documents (Lucene's
    /// variant: never negative).
    pub fn idf(documents: u64, df: u64) -> f32 {
        let n = documents as f32;
        let df = (df as f32).min(n);
        ((n - df + 0.5) / (df + 0.5) + 1.0).ln()
    }

    /// The score of a document of `length` terms holding the query terms `tf` times each
    /// (`tf[i]` for `stats.document_frequency[i]`).
    ///
    /// ```
    /// use memgpt_core::backend::TermStatistics;
    /// use memgpt_core::retrieval::Bm25;
    ///
    /// let stats = TermStatistics { documents: 100, total_terms: 1_000, document_frequency: vec![2, 50] };
    /// let bm25 = Bm25::default();
    /// let rare = bm25.score(&stats, &[1, 0], 10);
    /// let common = bm25.score(&stats, &[0, 1], 10);
    /// assert!(rare > common && common > 0.0);
    /// assert_eq!(bm25.score(&stats, &[0, 0], 10), 0.0);
    /// ```
    pub fn score(&self, stats: &TermStatistics, tf: &[u32], length: u32) -> f32 {
        let norm = self.k1 * (1.0 - self.b + self.b * length as f32 / stats.average_length());
        tf.iter()
            .zip(&stats.document_frequency)
            .filter(|(f, _)| **f > 0)
            .map(|(&f, &df)| {
                let f = f as f32;
                Self::idf(stats.documents, df) * f * (self.k1 + 1.0) / (f + norm)
            })
            .sum()
    }
}

/// BM25 over a fixed list of documents held in memory, analysed with
/// [`document_terms`](super::document_terms) (or by the caller).
///
/// ```
/// use memgpt_core::retrieval::Bm25Index;
///
/// let index = Bm25Index::new(["my cat Mochi", "the weather is nice", "Mochi likes tuna"]);
/// let scores = index.scores("what does Mochi like to eat? tuna");
/// assert!(scores[2] > scores[0] && scores[0] > 0.0 && scores[1] == 0.0);
/// ```
#[derive(Clone, Debug, Default)]
pub struct Bm25Index {
    docs: Vec<HashMap<String, u32>>,
    lengths: Vec<u32>,
    document_frequency: HashMap<String, u64>,
    total_terms: u64,
    bm25: Bm25,
}

impl Bm25Index {
    /// Indexes `docs`; scores come back in the same order.
    pub fn new<'a>(docs: impl IntoIterator<Item = &'a str>) -> Self {
        Self::from_terms(docs.into_iter().map(document_terms))
    }

    /// Indexes documents already split into terms (by [`document_terms`] or the caller's own
    /// analyzer; query them with terms from the same analyzer).
    pub fn from_terms(docs: impl IntoIterator<Item = Vec<String>>) -> Self {
        let mut index = Self::default();
        for terms in docs {
            let mut tf: HashMap<String, u32> = HashMap::new();
            index.total_terms += terms.len() as u64;
            index.lengths.push(terms.len() as u32);
            for term in terms {
                *tf.entry(term).or_default() += 1;
            }
            for term in tf.keys() {
                *index.document_frequency.entry(term.clone()).or_default() += 1;
            }
            index.docs.push(tf);
        }
        index
    }

    /// The number of documents indexed.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// Whether no document is indexed.
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// The BM25 score of every document for `query` (analysed with
    /// [`query_terms`](super::query_terms); 0 where no term matches).
    pub fn scores(&self, query: &str) -> Vec<f32> {
        self.scores_for_terms(&query_terms(query))
    }

    /// The BM25 score of every document for these query terms (each distinct term counts
    /// once).
    pub fn scores_for_terms(&self, terms: &[String]) -> Vec<f32> {
        let mut terms = terms.to_vec();
        terms.sort();
        terms.dedup();
        let stats = TermStatistics {
            documents: self.docs.len() as u64,
            total_terms: self.total_terms,
            document_frequency: terms
                .iter()
                .map(|t| self.document_frequency.get(t).copied().unwrap_or(0))
                .collect(),
        };
        self.docs
            .iter()
            .zip(&self.lengths)
            .map(|(doc, &length)| {
                let tf: Vec<u32> = terms
                    .iter()
                    .map(|t| doc.get(t).copied().unwrap_or(0))
                    .collect();
                self.bm25.score(&stats, &tf, length)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rarer_terms_weigh_more() {
        let index = Bm25Index::new(["apple banana", "apple cherry", "apple durian"]);
        let s = index.scores("apple cherry");
        assert!(s[1] > s[0] && s[0] > 0.0);
    }

    #[test]
    fn stems_match() {
        let index = Bm25Index::new(["she paints sunsets", "weather"]);
        assert!(index.scores("painting")[0] > 0.0);
    }

    #[test]
    fn idf_is_never_negative() {
        assert!(Bm25::idf(10, 10) > 0.0);
        assert!(
            Bm25::idf(10, 50) > 0.0,
            "a stale df above the count is clamped"
        );
        assert!(Bm25::idf(0, 0) > 0.0);
    }
}
