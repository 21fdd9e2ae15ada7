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
    // (unit text, starts a new paragraph)
    let mut units: Vec<(String, bool)> = Vec::new();
    for paragraph in paragraphs(text) {
        if counter.count_text(paragraph) <= max_tokens {
            units.push((paragraph.to_owned(), true));
            continue;
        }
        let mut first = true;
        for sentence in sentences(paragraph) {
            if counter.count_text(sentence) <= max_tokens {
                units.push((sentence.to_owned(), first));
            } else {
                for (i, piece) in split_words(sentence, max_tokens, counter)
                    .into_iter()
                    .enumerate()
                {
                    units.push((piece, first && i == 0));
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
    for (unit, new_paragraph) in units {
        let tokens = counter.count_text(&unit);
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
/// characters.
fn split_words(sentence: &str, max_tokens: usize, counter: &dyn TokenCounter) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut current = String::new();
    for word in sentence.split_whitespace() {
        let candidate = if current.is_empty() {
            word.to_owned()
        } else {
            format!("{current} {word}")
        };
        if counter.count_text(&candidate) <= max_tokens {
            current = candidate;
            continue;
        }
        if !current.is_empty() {
            pieces.push(std::mem::take(&mut current));
        }
        if counter.count_text(word) <= max_tokens {
            current = word.to_owned();
        } else {
            pieces.extend(split_chars(word, max_tokens, counter));
        }
    }
    if !current.is_empty() {
        pieces.push(current);
    }
    pieces
}

fn split_chars(word: &str, max_tokens: usize, counter: &dyn TokenCounter) -> Vec<String> {
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
    fn blank_text_gives_no_chunks() {
        assert!(chunk_text(" \n\n \t", 10, &TiktokenCounter::cl100k()).is_empty());
    }
}
