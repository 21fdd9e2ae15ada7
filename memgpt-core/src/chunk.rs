//! Splitting long text into passages for archival storage.

use std::fmt;

use crate::embed::Embedder;
use crate::tokens::TokenCounter;

/// Counts a passage's tokens so that chunking at `max_tokens` keeps every chunk within both
/// budgets: `max_tokens` of the agent's own tokens (what the passage costs in a prompt) and
/// the embedder's window ([`Embedder::window_tokens`], in the embedder's tokens), so that every
/// word of a passage is embedded. A text's count is the larger of its count in the agent's
/// tokens and its count in the embedder's tokens scaled to `max_tokens`. Without an embedder,
/// or one that does not know its window, it counts like `counter`.
///
/// ```
/// use memgpt_core::chunk::{PassageBudget, chunk_text};
/// use memgpt_core::embed::HashingEmbedder;
/// use memgpt_core::tokens::TiktokenCounter;
///
/// let counter = TiktokenCounter::cl100k();
/// let embedder = HashingEmbedder::new(64);
/// let budget = PassageBudget::new(&counter, Some(&embedder), 300);
/// let chunks = chunk_text("Short notes fit in one passage.", 300, &budget);
/// assert_eq!(chunks.len(), 1);
/// ```
pub struct PassageBudget<'a> {
    counter: &'a dyn TokenCounter,
    /// The embedder and its window, when it reads fewer tokens than `max_tokens` may hold.
    window: Option<(&'a dyn Embedder, usize)>,
    max_tokens: usize,
}

impl<'a> PassageBudget<'a> {
    /// The budget of passages of at most `max_tokens` of `counter`'s tokens, embedded by
    /// `embedder`.
    pub fn new(
        counter: &'a dyn TokenCounter,
        embedder: Option<&'a dyn Embedder>,
        max_tokens: usize,
    ) -> Self {
        let window = embedder.and_then(|e| {
            let window = e.window_tokens()?;
            // Only an embedder that can count its own tokens can be held to its window.
            e.count_tokens("")?;
            Some((e, window.max(1)))
        });
        Self {
            counter,
            window,
            max_tokens: max_tokens.max(1),
        }
    }
}

impl fmt::Debug for PassageBudget<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PassageBudget")
            .field("counter", &self.counter)
            .field("window", &self.window.map(|(_, w)| w))
            .field("max_tokens", &self.max_tokens)
            .finish()
    }
}

impl TokenCounter for PassageBudget<'_> {
    fn count_text(&self, text: &str) -> usize {
        let own = self.counter.count_text(text);
        let Some((embedder, window)) = self.window else {
            return own;
        };
        let theirs = embedder.count_tokens(text).unwrap_or(0);
        // theirs <= window  <=>  scaled <= max_tokens
        let scaled = theirs.saturating_mul(self.max_tokens).div_ceil(window);
        own.max(scaled)
    }
}

/// Splits `text` into chunks of at most `max_tokens` tokens, preferring to cut between
/// paragraphs, then between sentences, then between words. Whitespace-only input gives no chunks.
///
/// ```
/// use memgpt_core::chunk::chunk_text;
/// use memgpt_core::tokens::TiktokenCounter;
///
/// let text = "First paragraph.\n\nSecond paragraph, a little longer than the first one.";
/// let chunks = chunk_text(text, 12, &TiktokenCounter::cl100k());
/// assert_eq!(chunks, ["First paragraph.", "Second paragraph, a little longer than the first one."]);
/// ```
pub fn chunk_text(text: &str, max_tokens: usize, counter: &dyn TokenCounter) -> Vec<String> {
    chunk_text_with_overlap(text, max_tokens, 0, counter)
}

/// [`chunk_text`], with each chunk after the first starting with the last sentences (or
/// paragraphs) of the previous one, up to `overlap_tokens` tokens, so a fact that straddles a
/// cut is whole in at least one chunk. The overlap never makes a chunk exceed `max_tokens`, and
/// every chunk brings new text.
///
/// ```
/// use memgpt_core::chunk::chunk_text_with_overlap;
/// use memgpt_core::tokens::TiktokenCounter;
///
/// let text = "One fish. Two fish. Red fish. Blue fish. Old fish. New fish.";
/// let chunks = chunk_text_with_overlap(text, 10, 4, &TiktokenCounter::cl100k());
/// assert!(chunks.len() > 1);
/// for pair in chunks.windows(2) {
///     // Each chunk repeats the last sentence of the one before.
///     let last_sentence = pair[0].rsplit(". ").next().unwrap();
///     assert!(pair[1].starts_with(last_sentence), "{chunks:?}");
/// }
/// ```
pub fn chunk_text_with_overlap(
    text: &str,
    max_tokens: usize,
    overlap_tokens: usize,
    counter: &dyn TokenCounter,
) -> Vec<String> {
    let max_tokens = max_tokens.max(1);
    // (unit text, its tokens, starts a new paragraph)
    let mut units: Vec<(String, usize, bool)> = Vec::new();
    for paragraph in paragraphs(text) {
        let tokens = counter.count_text(paragraph);
        if tokens <= max_tokens {
            units.push((paragraph.to_owned(), tokens, true));
            continue;
        }
        let mut first = true;
        let sentences = sentences(paragraph);
        let whole = sentences.len() == 1;
        for sentence in sentences {
            // A paragraph of one sentence was just counted: over the limit.
            let tokens = if whole {
                usize::MAX
            } else {
                counter.count_text(sentence)
            };
            if tokens <= max_tokens {
                units.push((sentence.to_owned(), tokens, first));
            } else {
                for (i, (piece, tokens)) in split_words(sentence, max_tokens, counter)
                    .into_iter()
                    .enumerate()
                {
                    units.push((piece, tokens, first && i == 0));
                }
            }
            first = false;
        }
    }

    let mut chunks = Vec::new();
    // The units of the chunk being built: (text, tokens, starts a paragraph).
    let mut current: Vec<(String, usize, bool)> = Vec::new();
    let mut current_tokens = 0;
    let mut fresh = false; // whether `current` holds anything not carried over
    for (unit, tokens, new_paragraph) in units {
        if fresh && current_tokens + tokens + 1 > max_tokens {
            chunks.push(join_units(&current));
            // Carry the tail of this chunk into the next, within the overlap and leaving room.
            let mut carried = Vec::new();
            let mut carried_tokens = 0;
            for entry in current.iter().rev() {
                let with = carried_tokens + entry.1 + 1;
                if with > overlap_tokens || with + tokens + 1 > max_tokens {
                    break;
                }
                carried_tokens = with;
                carried.push(entry.clone());
            }
            carried.reverse();
            current = carried;
            current_tokens = carried_tokens;
        }
        if !current.is_empty() {
            current_tokens += 1;
        }
        current.push((unit, tokens, new_paragraph));
        current_tokens += tokens;
        fresh = true;
    }
    if fresh {
        chunks.push(join_units(&current));
    }
    chunks
}

fn join_units(units: &[(String, usize, bool)]) -> String {
    let mut out = String::new();
    for (i, (unit, _, new_paragraph)) in units.iter().enumerate() {
        if i > 0 {
            out.push_str(if *new_paragraph { "\n\n" } else { " " });
        }
        out.push_str(unit);
    }
    out
}

fn paragraphs(text: &str) -> impl Iterator<Item = &str> {
    text.split("\n\n")
        .flat_map(|p| p.split("\r\n\r\n"))
        .map(str::trim)
        .filter(|p| !p.is_empty())
}

fn sentences(paragraph: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let bytes: Vec<(usize, char)> = paragraph.char_indices().collect();
    for window in bytes.windows(2) {
        let (_, c) = window[0];
        let (next_index, next) = window[1];
        if matches!(c, '.' | '!' | '?' | '\n') && next.is_whitespace() {
            let sentence = paragraph[start..next_index].trim();
            if !sentence.is_empty() {
                out.push(sentence);
            }
            start = next_index;
        }
    }
    let rest = paragraph[start..].trim();
    if !rest.is_empty() {
        out.push(rest);
    }
    out
}

/// Packs words into pieces of at most `max_tokens`; a single word longer than that is cut by
/// characters. Each word is counted once (with the space before it, as BPE tokenizers attach
/// it), so the cost is linear in the sentence; a piece whose exact count is over (word
/// boundaries can merge differently) is cut again exactly.
fn split_words(
    sentence: &str,
    max_tokens: usize,
    counter: &dyn TokenCounter,
) -> Vec<(String, usize)> {
    // Pieces in order: `done` is final, `pieces` still to be checked exactly.
    let mut done = Vec::new();
    let mut pieces = Vec::new();
    let mut current = String::new();
    let mut current_tokens = 0;
    let mut spaced = String::new();
    for word in sentence.split_whitespace() {
        if !current.is_empty() {
            spaced.clear();
            spaced.push(' ');
            spaced.push_str(word);
            let tokens = counter.count_text(&spaced);
            if current_tokens + tokens <= max_tokens {
                current.push(' ');
                current.push_str(word);
                current_tokens += tokens;
                continue;
            }
            pieces.push(std::mem::take(&mut current));
        }
        // The word starts a piece: counted on its own.
        let alone = counter.count_text(word);
        if alone <= max_tokens {
            current.push_str(word);
            current_tokens = alone;
        } else {
            current_tokens = 0;
            done.append(&mut verified(
                std::mem::take(&mut pieces),
                max_tokens,
                counter,
            ));
            done.extend(split_chars(word, max_tokens, counter));
        }
    }
    if !current.is_empty() {
        pieces.push(current);
    }
    done.append(&mut verified(pieces, max_tokens, counter));
    done
}

/// Bytes per window when cutting one very long word: windows are counted once each and packed.
const WINDOW: usize = 32;

/// Cuts a word longer than `max_tokens` into pieces: windows of [`WINDOW`] bytes (on character
/// boundaries) are counted once each and packed greedily, then each piece is checked exactly.
/// Linear in the word's length.
fn split_chars(word: &str, max_tokens: usize, counter: &dyn TokenCounter) -> Vec<(String, usize)> {
    let mut pieces = Vec::new();
    let mut current = String::new();
    let mut current_tokens = 0;
    let mut start = 0;
    while start < word.len() {
        let mut end = (start + WINDOW).min(word.len());
        while !word.is_char_boundary(end) {
            end += 1;
        }
        let window = &word[start..end];
        start = end;
        let tokens = counter.count_text(window);
        if !current.is_empty() && current_tokens + tokens > max_tokens {
            pieces.push(std::mem::take(&mut current));
            current_tokens = 0;
        }
        if tokens > max_tokens {
            pieces.extend(split_chars_exactly(window, max_tokens, counter));
            continue;
        }
        current.push_str(window);
        current_tokens += tokens;
    }
    if !current.is_empty() {
        pieces.push(current);
    }
    verified(pieces, max_tokens, counter)
}

/// Each piece with its exact count; pieces over `max_tokens` cut again character by character
/// (they are short: at most a few windows).
fn verified(
    pieces: Vec<String>,
    max_tokens: usize,
    counter: &dyn TokenCounter,
) -> Vec<(String, usize)> {
    let mut out = Vec::with_capacity(pieces.len());
    for piece in pieces {
        let tokens = counter.count_text(&piece);
        if tokens <= max_tokens {
            out.push((piece, tokens));
        } else {
            for part in split_chars_exactly(&piece, max_tokens, counter) {
                let tokens = counter.count_text(&part);
                out.push((part, tokens));
            }
        }
    }
    out
}

/// Character by character, counting the growing piece: exact, quadratic, for short texts only.
fn split_chars_exactly(word: &str, max_tokens: usize, counter: &dyn TokenCounter) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut current = String::new();
    for c in word.chars() {
        current.push(c);
        if counter.count_text(&current) > max_tokens {
            current.pop();
            if current.is_empty() {
                // One character is over the limit on its own: keep it rather than loop.
                pieces.push(c.to_string());
                continue;
            }
            pieces.push(std::mem::take(&mut current));
            current.push(c);
        }
    }
    if !current.is_empty() {
        pieces.push(current);
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::TiktokenCounter;

    /// Counts words and reads windows of `window` words.
    #[derive(Debug)]
    struct WordWindows {
        window: usize,
    }

    #[async_trait::async_trait]
    impl Embedder for WordWindows {
        fn model(&self) -> &str {
            "words"
        }
        fn dimension(&self) -> usize {
            1
        }
        async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, crate::embed::EmbedError> {
            Ok(texts.iter().map(|_| vec![1.0]).collect())
        }
        fn window_tokens(&self) -> Option<usize> {
            Some(self.window)
        }
        fn count_tokens(&self, text: &str) -> Option<usize> {
            Some(text.split_whitespace().count())
        }
    }

    #[test]
    fn passages_fit_the_embedders_window_and_the_agents_budget() {
        let counter = TiktokenCounter::cl100k();
        let text = "Sentences of seven words each go here. ".repeat(60);
        // The embedder reads 20 words: 300 agent tokens would overflow it.
        let small = WordWindows { window: 20 };
        let budget = PassageBudget::new(&counter, Some(&small), 300);
        let chunks = chunk_text(&text, 300, &budget);
        assert!(chunks.len() >= 21, "{} chunks", chunks.len());
        for chunk in &chunks {
            assert!(chunk.split_whitespace().count() <= 20, "{chunk}");
        }
        // A window larger than the budget changes nothing: the agent's budget binds.
        let large = WordWindows { window: 100_000 };
        let budget = PassageBudget::new(&counter, Some(&large), 30);
        assert_eq!(
            chunk_text(&text, 30, &budget),
            chunk_text(&text, 30, &counter)
        );
        // No embedder: the agent's count.
        let plain = PassageBudget::new(&counter, None, 30);
        assert_eq!(plain.count_text(&text), counter.count_text(&text));
    }

    #[test]
    fn every_chunk_respects_the_limit_and_nothing_is_lost() {
        let counter = TiktokenCounter::cl100k();
        let text = format!(
            "{}\n\n{}\n\nshort\n\n{}",
            "word ".repeat(500),
            "A sentence here. Another one follows! Does it? ".repeat(40),
            "x".repeat(3000)
        );
        let chunks = chunk_text(&text, 50, &counter);
        assert!(chunks.len() > 10);
        for chunk in &chunks {
            assert!(
                counter.count_text(chunk) <= 50,
                "{} tokens",
                counter.count_text(chunk)
            );
        }
        let squash = |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
        assert_eq!(squash(&chunks.join(" ")), squash(&text));
    }

    #[test]
    fn pathological_inputs_keep_the_limit_and_lose_nothing() {
        let counter = TiktokenCounter::cl100k();
        let squash = |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
        let mut state = 7u32;
        let hash: String = (0..200_000)
            .map(|i| {
                state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                // Letters, with a multi-byte character now and then (cuts respect them).
                if i % 997 == 0 {
                    'é'
                } else {
                    char::from(b'a' + (state >> 16) as u8 % 26)
                }
            })
            .collect();
        let words = "the user mentioned that her sister moved to Lisbon ".repeat(4_000);
        for text in [hash, words] {
            for max in [300, 7] {
                let chunks = chunk_text_with_overlap(&text, max, max / 6, &counter);
                assert!(chunks.len() > 10);
                for chunk in &chunks {
                    assert!(
                        counter.count_text(chunk) <= max,
                        "{} > {max}",
                        counter.count_text(chunk)
                    );
                }
                if max == 300 {
                    let overlap_free = chunk_text(&text, max, &counter);
                    assert_eq!(squash(&overlap_free.concat()), squash(&text));
                }
            }
        }
    }

    #[test]
    fn blank_text_gives_no_chunks() {
        assert!(chunk_text(" \n\n \t", 10, &TiktokenCounter::cl100k()).is_empty());
    }
}
