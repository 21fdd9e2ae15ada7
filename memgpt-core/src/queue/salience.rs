//! Salience: a flush evicts the messages that state the least.
//!
//! A later question can only be about something a message *stated*. A message's salience is
//! counted from its own text when it enters the queue ([`salience`]): the distinct content words
//! of its statements (sentences that are not questions; stemmed, stop words out), plus its names
//! (capitalised words inside a sentence) and its numbers (dates, counts, times). Small talk
//! ("Wow, that's great!") and questions score low; "I ran a charity race on 20 May with
//! Caroline" scores high.
//!
//! [`SaliencePolicy`] evicts the least salient messages first, weighing salience by recency (a
//! message at the head of the queue counts its salience once, the newest almost twice: a
//! question is likelier about what was said lately), and evicts little at a time: just enough to bring the
//! prompt back under the warning line. Measured in the
//! policy lab (BENCHMARKS.md): more evidence stays in context than under the paper's policy, at
//! the price of more, smaller flushes (each one a summarizer call).

use std::ops::Range;

use super::policy::{ContextUsage, EvictionPolicy, Pressure, QueueView, threshold_pressure};
use crate::message::Message;
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
            && clean.split(['\'', '\u{2019}']).next() != Some("I")
            && clean.chars().next().is_some_and(char::is_uppercase)
        {
            names += 1;
        }
        sentence_start = word.ends_with(['.', '!', '?', ':']);
    }
    (terms + names + numbers) as f32
}

/// A queued message's salience: its text, plus for an assistant turn the string values of its
/// calls' arguments (what `send_message` says is there; the JSON keys are not).
pub(super) fn message_salience(message: &Message) -> f32 {
    if message.tool_calls.is_empty() {
        return salience(&message.text);
    }
    fn strings(value: &serde_json::Value, out: &mut String) {
        match value {
            serde_json::Value::String(s) => {
                out.push('\n');
                out.push_str(s);
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
            serde_json::Value::Object(map) => map.values().for_each(|v| strings(v, out)),
            _ => {}
        }
    }
    let mut text = message.text.clone();
    for call in &message.tool_calls {
        match serde_json::from_str::<serde_json::Value>(&call.arguments) {
            Ok(arguments) => strings(&arguments, &mut text),
            Err(_) => {
                text.push('\n');
                text.push_str(&call.arguments);
            }
        }
    }
    salience(&text)
}

/// Evicts the least salient messages first, only as many as it takes to bring the prompt back
/// under [`evict_to`](Self::evict_to) of the window.
///
/// A message's worth is its salience times its recency, `1 + position / queued`: from 1 at the
/// head of the queue to almost 2 at its tail, so an old message must state about twice as much
/// as a new one to outstay it (ties: oldest first).
///
/// It ranks what the manager evicts: an assistant turn together with the function results that
/// follow it, worth its most salient message (so a terse result like "Sent." never takes a
/// telling reply with it), counted with all its tokens. A flush the provider forces while the
/// count is under the flush line (its tokenizer saw more than ours) frees half the queue, as
/// the paper's policy would. The warning line sits at [`evict_to`](Self::evict_to) by default,
/// so after each flush the model is warned once more before the next one.
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
        let (usage, entries) = (view.usage, view.entries);
        let target = if usage.fraction() < self.flush_at {
            // Asked under the flush line: a forced flush (the provider overflowed).
            usage.queue_tokens.div_ceil(2)
        } else {
            let line = (self.evict_to * usage.window as f64).floor() as usize;
            usage.total_tokens().saturating_sub(line)
        };
        if target == 0 {
            return Vec::new();
        }
        // Units the manager would evict whole, each worth its most salient message, weighed
        // by recency: from 1x at the oldest to 2x at the newest.
        let queued = entries.len().max(1) as f32;
        let mut units: Vec<(f32, Range<usize>)> = view
            .units()
            .into_iter()
            .filter(|unit| unit.clone().all(|i| !entries[i].pinned))
            .map(|unit| {
                let salience = unit
                    .clone()
                    .map(|i| entries[i].signals.first().copied().unwrap_or(0.0))
                    .fold(0.0, f32::max);
                let recency = 1.0 + unit.start as f32 / queued;
                (salience * recency, unit)
            })
            .collect();
        // Stable: equal worth keeps queue order (oldest first).
        units.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut freed = 0;
        let mut chosen = Vec::new();
        for (_, unit) in units {
            if freed >= target {
                break;
            }
            freed += unit.clone().map(|i| entries[i].tokens).sum::<usize>();
            chosen.extend(unit);
        }
        chosen
    }

    fn signals(&self) -> &[&'static str] {
        &["salience"]
    }

    /// Counts how much the message states, once, when it is queued.
    fn on_queued(&self, message: &Message, signals: &mut [f32]) {
        if let Some(salience) = signals.first_mut() {
            *salience = message_salience(message);
        }
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
        kind_entry(MessageKind::User, tokens, salience)
    }

    fn kind_entry(kind: MessageKind, tokens: usize, salience: f32) -> EntryView {
        EntryView {
            id: MessageId::new(),
            kind,
            tokens,
            created_at: Utc::now(),
            last_used: 0,
            uses: 1,
            relevance: None,
            signals: vec![salience],
            pinned: false,
        }
    }

    #[test]
    fn questions_state_nothing() {
        assert_eq!(salience("Where did you go on holiday last summer?"), 0.0);
        assert!(salience("Where did you go? We went to Lisbon in June.") > 0.0);
        // "I'm" is no name; "Lisbon" is.
        assert_eq!(salience("Well, I'm here."), salience("Well, you're here."));
        assert!(salience("Well, Lisbon is here.") > salience("Well, lisbon is here."));
    }

    #[test]
    fn a_reply_is_scored_by_what_it_says_not_its_json() {
        let mut turn = Message::new(
            crate::ids::AgentId::new(),
            MessageKind::Assistant,
            "",
            Utc::now(),
        );
        turn.tool_calls.push(crate::llm::ToolCall {
            id: "c1".into(),
            name: "send_message".into(),
            arguments: r#"{"message": "Rex is my dog.", "request_heartbeat": true}"#.into(),
        });
        assert_eq!(message_salience(&turn), salience("Rex is my dog."));
    }

    #[test]
    fn a_call_and_its_results_go_together_worth_their_best() {
        // A telling reply whose result is terse, then a dull message: the dull one goes first,
        // and when more must go the reply leaves with its result, counted in full.
        let entries = [
            kind_entry(MessageKind::Assistant, 100, 9.0),
            kind_entry(MessageKind::FunctionReturn, 300, 1.0),
            entry(100, 2.0),
        ];
        let usage = ContextUsage {
            window: 500,
            fixed_tokens: 50,
            queue_tokens: 500,
            queue_messages: 3,
        };
        let view = QueueView {
            entries: &entries,
            usage,
        };
        // 550 tokens, the line at 450: 100 must go.
        assert_eq!(SaliencePolicy::default().select(&view), vec![2]);
        let more = QueueView {
            usage: ContextUsage {
                fixed_tokens: 200,
                ..usage
            },
            ..view
        };
        // 700 tokens: 250 must go; the whole unit (400 tokens) covers it.
        assert_eq!(SaliencePolicy::default().select(&more), vec![2, 0, 1]);
    }

    /// What the policy evicts from `entries` in a 1000-token window with `fixed` other tokens.
    fn evicted(entries: &[EntryView], fixed: usize) -> Vec<usize> {
        let view = QueueView {
            entries,
            usage: ContextUsage {
                window: 1000,
                fixed_tokens: fixed,
                queue_tokens: entries.iter().map(|e| e.tokens).sum(),
                queue_messages: entries.len(),
            },
        };
        SaliencePolicy::default().select(&view)
    }

    #[test]
    fn recency_weighs_salience() {
        // Four messages of 250 tokens, 1100 in the prompt: 200 must go, one message. An old
        // message stating a little more goes before a new one stating a little less
        // (3 x 1 < 2 x 1.75), but not before one stating far less (3 x 1 > 1 x 1.75).
        let saliences = |s: [f32; 4]| s.map(|s| entry(250, s));
        assert_eq!(evicted(&saliences([3.0, 9.0, 9.0, 2.0]), 100), vec![0]);
        assert_eq!(evicted(&saliences([3.0, 9.0, 9.0, 1.0]), 100), vec![3]);
        // Equal worth (nothing stated): the oldest goes first.
        assert_eq!(evicted(&saliences([9.0, 0.0, 9.0, 0.0]), 100), vec![1]);
    }

    #[test]
    fn a_forced_flush_under_the_line_frees_half() {
        let entries = [1.0, 5.0, 3.0, 2.0].map(|s| entry(100, s));
        assert_eq!(evicted(&entries, 100), vec![0, 3]);
    }

    #[test]
    fn a_flush_takes_the_least_salient_until_under_the_line() {
        // 1000-token window, 100 fixed, 1000 queued: 100 over the flush line, 200 over 90%.
        let entries = [9.0, 1.0, 5.0, 1.0].map(|s| entry(250, s));
        // 200 tokens must go: the least worth first (1 x 1.25 before 1 x 1.75), and no more.
        assert_eq!(evicted(&entries, 100), vec![1]);
        assert_eq!(evicted(&entries, 400), vec![1, 3]);
    }
}
