//! Text analysis: the one way every store and ranker turns text into terms.
//!
//! Words are maximal runs of alphanumeric characters (any script), lowercased, then stemmed with
//! the Snowball English stemmer ("painting", "paints" and "painted" all become `paint`). Stores
//! index the terms of [`document_terms`] and rankers look up the terms of [`query_terms`], so a
//! query can only ever match what the same analyzer produced: no backend's own tokenizer,
//! stemmer or query syntax is involved.

use rust_stemmers::{Algorithm, Stemmer};

/// Names this analyzer and the document layout of [`super::DocumentBuilder`]. Stores record it
/// next to their text indexes and rebuild them when it changes.
pub const ANALYZER_VERSION: &str = "memgpt-en-2";

/// Words longer than this many bytes are left out (no backend indexes them the same way, and
/// nobody searches for them).
pub const MAX_TERM_BYTES: usize = 64;

/// Common English function words, dropped from queries when other words remain.
const STOP_WORDS: &[&str] = &[
    "a", "about", "an", "and", "are", "as", "at", "be", "by", "did", "do", "does", "for", "from",
    "had", "has", "have", "he", "her", "his", "how", "i", "in", "is", "it", "its", "me", "my",
    "of", "on", "or", "our", "she", "so", "that", "the", "their", "them", "they", "this", "to",
    "was", "we", "were", "what", "when", "where", "which", "who", "why", "will", "with", "you",
    "your",
];

/// Splits text into lowercase alphanumeric words (any script; everything else separates).
///
/// ```
/// use memgpt_core::retrieval::tokenize;
///
/// assert_eq!(tokenize("Hello, wörld! it's 9:30"), ["hello", "wörld", "it", "s", "9", "30"]);
/// ```
pub fn tokenize(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty() && w.len() <= MAX_TERM_BYTES)
        .map(str::to_lowercase)
        .collect()
}

fn stemmer() -> Stemmer {
    Stemmer::create(Algorithm::English)
}

/// The terms a document is indexed under: every word of [`tokenize`], stemmed, in order (a word
/// said twice counts twice).
///
/// ```
/// use memgpt_core::retrieval::document_terms;
///
/// assert_eq!(document_terms("Painting sunsets; she paints daily."), ["paint", "sunset", "she", "paint", "daili"]);
/// ```
pub fn document_terms(text: &str) -> Vec<String> {
    let stemmer = stemmer();
    tokenize(text)
        .iter()
        .map(|w| stemmer.stem(w).into_owned())
        .collect()
}

/// The distinct terms of a query: its words without stop words (unless nothing else is left),
/// stemmed, sorted. Backends build their full-text queries from these, never from the raw
/// string, so characters that are syntax in their query languages cannot cause errors.
///
/// ```
/// use memgpt_core::retrieval::query_terms;
///
/// assert_eq!(query_terms("what's \"Mochi\" (my cat) eating?"), ["cat", "eat", "mochi", "s"]);
/// assert_eq!(query_terms("what is it"), ["is", "it", "what"]);
/// ```
pub fn query_terms(query: &str) -> Vec<String> {
    let words = tokenize(query);
    let content: Vec<&String> = words
        .iter()
        .filter(|w| !STOP_WORDS.contains(&w.as_str()))
        .collect();
    let kept: Vec<&String> = if content.is_empty() {
        words.iter().collect()
    } else {
        content
    };
    let stemmer = stemmer();
    let mut terms: Vec<String> = kept
        .into_iter()
        .map(|w| stemmer.stem(w).into_owned())
        .collect();
    terms.sort();
    terms.dedup();
    terms
}

/// Counts how often each of `terms` occurs in a stored document (its terms joined by spaces, as
/// [`MessageDocument::text`](crate::backend::MessageDocument::text) writes them) and how many terms the document has.
///
/// ```
/// use memgpt_core::retrieval::count_terms;
///
/// let (tf, length) = count_terms("paint sunset paint", &["paint".into(), "cat".into()]);
/// assert_eq!((tf, length), (vec![2, 0], 3));
/// ```
pub fn count_terms(document: &str, terms: &[String]) -> (Vec<u32>, u32) {
    let mut tf = vec![0u32; terms.len()];
    let mut length = 0u32;
    for word in document.split(' ').filter(|w| !w.is_empty()) {
        length += 1;
        if let Some(i) = terms.iter().position(|t| t == word) {
            tf[i] += 1;
        }
    }
    (tf, length)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_words_are_dropped_unless_alone() {
        assert_eq!(query_terms("what is the cat's name"), ["cat", "name", "s"]);
        assert_eq!(query_terms("What IS it?"), ["is", "it", "what"]);
        assert!(query_terms("  ::: \"\" ").is_empty());
    }

    #[test]
    fn queries_and_documents_stem_alike() {
        let doc = document_terms("We went running and she paints landscapes");
        for term in query_terms("who runs? painting landscape") {
            assert!(doc.contains(&term), "{term} in {doc:?}");
        }
    }

    #[test]
    fn hostile_and_long_input_is_harmless() {
        for q in ["", "\"", "a:b AND (c", "*", "\u{0}", "😀😀", "NEAR(x y)"] {
            let _ = query_terms(q);
            let _ = document_terms(q);
        }
        let long = "x".repeat(MAX_TERM_BYTES + 1);
        assert_eq!(document_terms(&format!("{long} kiwi")), ["kiwi"]);
        assert_eq!(query_terms(&long), Vec::<String>::new());
    }

    #[test]
    fn terms_have_no_spaces() {
        for t in document_terms("tab\there\u{a0}nbsp\u{2003}em-space ünïcödé 東京") {
            assert!(!t.contains(char::is_whitespace), "{t:?}");
        }
    }
}
