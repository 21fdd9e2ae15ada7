//! Lexical relevance for the reference store: a tokenizer and Okapi BM25.

use std::collections::HashMap;

/// Splits text into lowercase alphanumeric words (any script; everything else separates).
///
/// ```
/// assert_eq!(memgpt_core::store::tokenize("Hello, wörld! it's 9:30"), ["hello", "wörld", "it", "s", "9", "30"]);
/// ```
pub fn tokenize(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Common English function words, dropped from queries when other words remain.
const STOP_WORDS: &[&str] = &[
    "a", "about", "an", "and", "are", "as", "at", "be", "by", "did", "do", "does", "for", "from",
    "had", "has", "have", "he", "her", "his", "how", "i", "in", "is", "it", "its", "me", "my",
    "of", "on", "or", "our", "she", "so", "that", "the", "their", "them", "they", "this", "to",
    "was", "we", "were", "what", "when", "where", "which", "who", "why", "will", "with", "you",
    "your",
];

/// The query's distinct terms, without stop words unless nothing else is left. Backends build
/// their own full-text queries from these (never from the raw string), so characters that are
/// syntax in their query languages cannot cause errors.
///
/// ```
/// assert_eq!(memgpt_core::store::query_terms("what's \"Mochi\" (my cat) eating?"), ["cat", "eating", "mochi", "s"]);
/// ```
pub fn query_terms(query: &str) -> Vec<String> {
    let mut terms = tokenize(query);
    terms.sort();
    terms.dedup();
    let content: Vec<String> = terms
        .iter()
        .filter(|t| !STOP_WORDS.contains(&t.as_str()))
        .cloned()
        .collect();
    if content.is_empty() { terms } else { content }
}

/// An Okapi BM25 scorer (k1 = 1.2, b = 0.75) over a fixed set of documents.
///
/// ```
/// use memgpt_core::store::Bm25Index;
///
/// let index = Bm25Index::new(["my cat Mochi", "the weather is nice", "Mochi likes tuna"]);
/// let scores = index.scores("what does Mochi like to eat? tuna");
/// assert!(scores[2] > scores[0] && scores[0] > 0.0 && scores[1] == 0.0);
/// ```
#[derive(Clone, Debug, Default)]
pub struct Bm25Index {
    docs: Vec<HashMap<String, u32>>,
    lengths: Vec<u32>,
    document_frequency: HashMap<String, u32>,
    average_length: f32,
}

impl Bm25Index {
    const K1: f32 = 1.2;
    const B: f32 = 0.75;

    /// Indexes `docs` with [`tokenize`]; scores come back in the same order.
    pub fn new<'a>(docs: impl IntoIterator<Item = &'a str>) -> Self {
        Self::from_tokens(docs.into_iter().map(tokenize))
    }

    /// Indexes documents already split into terms by the caller's own analyzer (a stemmer,
    /// say); query them with [`Bm25Index::scores_for_terms`] using the same analyzer.
    pub fn from_tokens(docs: impl IntoIterator<Item = Vec<String>>) -> Self {
        let mut index = Self::default();
        let mut total = 0u64;
        for tokens in docs {
            let mut tf: HashMap<String, u32> = HashMap::new();
            total += tokens.len() as u64;
            index.lengths.push(tokens.len() as u32);
            for token in tokens {
                *tf.entry(token).or_default() += 1;
            }
            for term in tf.keys() {
                *index.document_frequency.entry(term.clone()).or_default() += 1;
            }
            index.docs.push(tf);
        }
        index.average_length = if index.docs.is_empty() {
            0.0
        } else {
            total as f32 / index.docs.len() as f32
        };
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

    /// The BM25 score of every document for `query` (0 where no term matches).
    pub fn scores(&self, query: &str) -> Vec<f32> {
        self.scores_for_terms(&query_terms(query))
    }

    /// The BM25 score of every document for the given query terms (each distinct term
    /// counts once).
    pub fn scores_for_terms(&self, terms: &[String]) -> Vec<f32> {
        let mut terms = terms.to_vec();
        terms.sort();
        terms.dedup();
        let n = self.docs.len() as f32;
        let idf: Vec<(String, f32)> = terms
            .into_iter()
            .filter_map(|t| {
                let df = *self.document_frequency.get(&t)? as f32;
                Some((t, ((n - df + 0.5) / (df + 0.5) + 1.0).ln()))
            })
            .collect();
        self.docs
            .iter()
            .zip(&self.lengths)
            .map(|(tf, &len)| {
                let norm = Self::K1
                    * (1.0 - Self::B + Self::B * len as f32 / self.average_length.max(1.0));
                idf.iter()
                    .filter_map(|(term, idf)| {
                        let f = *tf.get(term)? as f32;
                        Some(idf * f * (Self::K1 + 1.0) / (f + norm))
                    })
                    .sum()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_words_are_dropped_unless_alone() {
        assert_eq!(query_terms("what is the cat's name"), ["cat", "name", "s"]);
        assert_eq!(query_terms("what is it"), ["is", "it", "what"]);
    }

    #[test]
    fn rarer_terms_weigh_more() {
        let index = Bm25Index::new(["apple banana", "apple cherry", "apple durian"]);
        let s = index.scores("apple cherry");
        assert!(s[1] > s[0] && s[0] > 0.0);
    }

    #[test]
    fn hostile_queries_do_not_panic() {
        let index = Bm25Index::new(["a:b (c) \"d\""]);
        for q in ["", "\"", "a:b AND (c", "*", "\u{0}", "😀😀"] {
            let _ = index.scores(q);
        }
        assert!(index.scores("(c)")[0] > 0.0);
    }
}
