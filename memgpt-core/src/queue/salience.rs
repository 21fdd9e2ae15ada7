//! Salience: a flush evicts the messages that state the least.
//!
//! A later question can only be about something a message *stated*. A message's salience is
//! counted from its own text when it enters the queue ([`salience`]): the distinct content words
//! of its statements (sentences that are not questions; stemmed, stop words out), plus its names
//! (capitalised words inside a sentence) and its numbers (dates, counts, times). Small talk
//! ("Wow, that's great!") and questions score low; "I ran a charity race on 20 May with
//! Caroline" scores high.
//!
//! [`SaliencePolicy`] evicts the least salient messages first (ties: oldest first), and evicts
//! little at a time: just enough to bring the prompt back under the warning line. Measured in the
//! policy lab (BENCHMARKS.md): more evidence stays in context than under the paper's policy, at
//! the price of more, smaller flushes (each one a summarizer call).

use super::policy::{ContextUsage, EvictionPolicy, Pressure, QueueView, threshold_pressure};
use crate::retrieval::query_terms;

/// How much `text` states: distinct content terms of its statements, plus names and numbers.
///
/// ```
/// use memgpt_core::queue::salience;
///
/// let fact = salience("I ran a charity race for mental health on 20 May 2023 with Caroline.");
/// let talk = salience("Wow, that's so great! How are you?");
/// assert!(fact > 3.0 * talk, "{fact} vs {talk}");
/// assert_eq!(salience(""), 0.0);
/// ```
pub fn salience(text: &str) -> f32 {
    let stated: String = text
        .split_inclusive(['.', '!', '?', '\n'])
        .filter(|sentence| !sentence.trim_end().ends_with('?'))
        .collect();
    let terms = query_terms(&stated).len();
    let (mut names, mut numbers) = (0usize, 0usize);
    let mut sentence_start = true;
    for word in stated.split_whitespace() {
        let clean = word.trim_matches(|c: char| !c.is_alphanumeric());
        if clean.chars().any(|c| c.is_ascii_digit()) {
            numbers += 1;
        } else if !sentence_start
            && clean != "I"
            && clean.chars().next().is_some_and(char::is_uppercase)
        {
            names += 1;
        }
        sentence_start = word.ends_with(['.', '!', '?', ':']);
    }
    (terms + names + numbers) as f32
}

/// Evicts the least salient messages first (ties: oldest first), only as many as it takes to
/// bring the prompt back under [`evict_to`](Self::evict_to) of the window.
///
/// The warning line sits at the same fraction by default, so after each flush the model is
/// warned once more before the next one.
///
/// ```
/// use memgpt_core::queue::{EvictionPolicy, SaliencePolicy};
///
/// let policy = SaliencePolicy::default();
/// assert_eq!((policy.warn_at, policy.flush_at, policy.evict_to), (0.9, 1.0, 0.9));
/// assert_eq!(policy.name(), "salience");
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SaliencePolicy {
    /// Fraction of the window at which to warn.
    pub warn_at: f64,
    /// Fraction of the window at which to flush.
    pub flush_at: f64,
    /// A flush evicts until the prompt is under this fraction of the window.
    pub evict_to: f64,
}

impl Default for SaliencePolicy {
    fn default() -> Self {
        Self {
            warn_at: 0.9,
            flush_at: 1.0,
            evict_to: 0.9,
        }
    }
}

impl EvictionPolicy for SaliencePolicy {
    fn name(&self) -> &str {
        "salience"
    }

    fn pressure(&self, usage: &ContextUsage) -> Pressure {
        threshold_pressure(usage, self.warn_at, self.flush_at)
    }

    fn select(&self, view: &QueueView<'_>) -> Vec<usize> {
        let usage = view.usage;
        let target = (self.evict_to * usage.window as f64).floor() as usize;
        let excess = usage.total_tokens().saturating_sub(target);
        if excess == 0 || usage.queue_tokens == 0 {
            return Vec::new();
        }
        let mut order: Vec<usize> = (0..view.entries.len()).collect();
        order.sort_by(|&a, &b| {
            view.entries[a]
                .salience
                .total_cmp(&view.entries[b].salience)
                .then(a.cmp(&b))
        });
        view.take_until_freed(order, excess as f64 / usage.queue_tokens as f64)
    }
}

crate::register_policy!("salience", SaliencePolicy::default());

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::*;
    use crate::ids::MessageId;
    use crate::message::MessageKind;
    use crate::queue::EntryView;

    fn entry(tokens: usize, salience: f32) -> EntryView {
        EntryView {
            id: MessageId::new(),
            kind: MessageKind::User,
            tokens,
            created_at: Utc::now(),
            last_used: 0,
            uses: 1,
            attention: 0.0,
            relevance: None,
            salience,
            pinned: false,
        }
    }

    #[test]
    fn questions_state_nothing() {
        assert_eq!(salience("Where did you go on holiday last summer?"), 0.0);
        assert!(salience("Where did you go? We went to Lisbon in June.") > 0.0);
    }

    #[test]
    fn a_flush_takes_the_least_salient_until_under_the_line() {
        // 1000-token window, 100 fixed, 1000 queued: 100 over the flush line, 200 over 90%.
        let entries = [
            entry(250, 9.0),
            entry(250, 1.0),
            entry(250, 5.0),
            entry(250, 1.0),
        ];
        let view = QueueView {
            entries: &entries,
            usage: ContextUsage {
                window: 1000,
                fixed_tokens: 100,
                queue_tokens: 1000,
                queue_messages: 4,
            },
        };
        // 200 tokens must go: the least salient first, ties oldest first, and no more.
        assert_eq!(SaliencePolicy::default().select(&view), vec![1]);
        let more = QueueView {
            usage: ContextUsage {
                fixed_tokens: 400,
                ..view.usage
            },
            ..view
        };
        assert_eq!(SaliencePolicy::default().select(&more), vec![1, 3]);
    }
}
