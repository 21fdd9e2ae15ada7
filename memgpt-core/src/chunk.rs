//! Splitting long text into passages for archival storage.

use crate::tokens::TokenCounter;

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
