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
    words(text).map(str::to_lowercase).collect()
}

/// The words of `text` as written (before lowercasing): maximal alphanumeric runs of at most
/// [`MAX_TERM_BYTES`] bytes.
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty() && w.len() <= MAX_TERM_BYTES)
}

/// Whether lowercasing leaves `c` as it is.
fn is_lowercase_already(c: char) -> bool {
    let mut lower = c.to_lowercase();
    lower.next() == Some(c) && lower.next().is_none()
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

/// How often each of `terms` occurs among the terms [`document_terms`] gives `text`, and how
/// many terms that is: the same counts, without building the list. A word is stemmed only when
/// some term begins with its first letter (stemming never changes a word's first letter: the
/// English stemmer only rewrites suffixes and a few whole words, each keeping its first
/// letter), so ranking a candidate's text mostly just splits it.
///
/// ```
/// use memgpt_core::retrieval::term_frequencies;
///
/// let terms = ["paint".to_string(), "cat".to_string()];
/// assert_eq!(term_frequencies("Painting sunsets; she paints daily.", &terms), (vec![2, 0], 5));
/// ```
pub fn term_frequencies(text: &str, terms: &[String]) -> (Vec<u32>, u32) {
    let stemmer = stemmer();
    let mut tf = vec![0u32; terms.len()];
    let mut length = 0u32;
    for word in words(text) {
        length += 1;
        let lowered;
        let word = if word.chars().all(is_lowercase_already) {
            word
        } else {
            // As `tokenize` lowers it (a final sigma depends on its neighbours).
            lowered = word.to_lowercase();
            lowered.as_str()
        };
        let Some(first) = word.chars().next() else {
            continue;
        };
        if !terms.iter().any(|t| t.starts_with(first)) {
            continue;
        }
        let stem = stemmer.stem(word);
        for (t, n) in terms.iter().zip(&mut tf) {
            if *t == stem {
                *n += 1;
            }
        }
    }
    (tf, length)
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

    /// `term_frequencies` counts what `document_terms` lists, for every word its shortcut
    /// skips: the stemmer's exceptions, every suffix class, capitals, a final sigma, a dotted
    /// capital I, other scripts, digits, overlong words.
    #[test]
    fn term_frequencies_count_what_document_terms_list() {
        let texts = [
            "Skis skies dying lying tying idly gently ugly early only singly sky news howe atlas \
             cosmos bias andes inning outing canning herring earring proceed exceed succeed",
            "Yelling youths yearly; Yvonne's yachts. You're YOUNG. y Y yy ies sses ied eed ing",
            "relational conditional rational valenci hesitanci digitizer conformabli radicalli \
             differentli vileli analogousli vietnamization predication operator feudalism \
             decisiveness hopefulness callousness formaliti sensitiviti sensibiliti",
            "triplicate formative formalize electriciti electrical hopeful goodness revival \
             allowance inference airliner gyroscopic adjustable defensible irritant replacement \
             adjustment dependent adoption homologou communism activate angulariti homologous \
             effective bowdlerize",
            "ΣΊΣΥΦΟΣ Οδυσσεύς İstanbul ǅungla Straße ÉCLAIR naïve café 東京 9:30 4th 2nd x86_64",
            "The CATS sat; cat-like catty caterers cataloged catalogues. Catching caught cats!",
        ];
        let long = "q".repeat(MAX_TERM_BYTES + 1);
        let texts: Vec<String> = texts
            .iter()
            .map(|t| t.to_string())
            .chain([format!("{long} quick {long}q queue")])
            .collect();
        for text in &texts {
            let words = document_terms(text);
            let mut terms: Vec<String> = words.clone();
            terms.extend(["zzz", "s", "i", "y", "ski", "die", "q"].map(String::from));
            terms.sort();
            terms.dedup();
            // All terms at once, and each alone (the shortcut looks at the terms' first letters).
            let mut sets = vec![terms.clone()];
            sets.extend(terms.iter().map(|t| vec![t.clone()]));
            for set in sets {
                let expected: Vec<u32> = set
                    .iter()
                    .map(|t| words.iter().filter(|w| *w == t).count() as u32)
                    .collect();
                assert_eq!(
                    term_frequencies(text, &set),
                    (expected, words.len() as u32),
                    "{set:?} in {text:?}"
                );
            }
        }
    }

    #[test]
    fn terms_have_no_spaces() {
        for t in document_terms("tab\there\u{a0}nbsp\u{2003}em-space ünïcödé 東京") {
            assert!(!t.contains(char::is_whitespace), "{t:?}");
        }
    }
}
