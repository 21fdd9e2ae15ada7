//! A content-aware online policy, prototyped in the lab: a flush evicts the messages that say
//! the least first. A message's *salience* is what a later question could ask about: its
//! distinct content words (stemmed, stop words out), plus its names and numbers. It reads only
//! the message's own text, so an agent can compute it when the message arrives.

use std::collections::HashMap;
use std::sync::Mutex;

use memgpt::ids::MessageId;
use memgpt::queue::{ContextUsage, EvictionPolicy, PaperPolicy, Pressure, QueueView};
use memgpt::retrieval::query_terms;

/// How much a message says: distinct content terms, plus capitalised words inside sentences
/// (names, places) and words with digits (dates, counts, times).
pub fn salience(text: &str) -> f32 {
    // Lab turns are `speaker: words`; the speaker's name says nothing.
    let body = text.split_once(": ").map_or(text, |(_, rest)| rest);
    let terms = query_terms(body).len();
    let (mut names, mut numbers) = (0usize, 0usize);
    let mut sentence_start = true;
    for word in body.split_whitespace() {
        let clean = word.trim_matches(|c: char| !c.is_alphanumeric());
        if clean.chars().any(|c| c.is_ascii_digit()) {
            numbers += 1;
        } else if !sentence_start
            && clean != "I"
            && clean.chars().next().is_some_and(char::is_uppercase)
        {
            names += 1;
        }
        sentence_start = word.ends_with(['.', '!', '?']);
    }
    (terms + names + numbers) as f32
}

/// Evicts the least salient messages first (ties: oldest first), at the paper's thresholds.
#[derive(Debug, Default)]
pub struct Salience {
    scores: Mutex<HashMap<MessageId, f32>>,
    paper: PaperPolicy,
}

impl Salience {
    /// Scores a message as it arrives.
    pub fn note(&self, id: MessageId, text: &str) {
        if let Ok(mut scores) = self.scores.lock() {
            scores.insert(id, salience(text));
        }
    }
}

impl EvictionPolicy for Salience {
    fn name(&self) -> &str {
        "salience"
    }

    fn pressure(&self, usage: &ContextUsage) -> Pressure {
        self.paper.pressure(usage)
    }

    fn select(&self, view: &QueueView<'_>) -> Vec<usize> {
        let Ok(scores) = self.scores.lock() else {
            return Vec::new();
        };
        let score = |i: usize| scores.get(&view.entries[i].id).copied().unwrap_or(0.0);
        let mut order: Vec<usize> = (0..view.entries.len()).collect();
        order.sort_by(|&a, &b| score(a).total_cmp(&score(b)).then(a.cmp(&b)));
        view.take_until_freed(order, self.paper.evict_fraction)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_say_more_than_small_talk() {
        let fact = salience(
            "Melanie: I ran a charity race for mental health on 20 May 2023 with Caroline.",
        );
        let talk = salience("Caroline: Wow, that's so great!");
        assert!(fact > 2.0 * talk, "{fact} vs {talk}");
        assert_eq!(salience("Ann: "), 0.0);
    }
}
