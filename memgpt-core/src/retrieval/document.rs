//! What recall storage indexes for each message: its terms with the end of the turns before it.
//!
//! A reply rarely repeats what it answers ("Yes, last Saturday!" answers "Did you go to the
//! race?"), so a conversation message (user or assistant) is indexed together with the
//! [`WINDOW_NEIGHBOURS`] conversation messages before it in the same session, its own words
//! counted twice. Of each neighbour only the last [`NEIGHBOUR_TERMS`] terms count: what a reply
//! answers is the end of the turn before it, and a long neighbour (an assistant's answer with
//! code, a pasted log) would otherwise drown a short message's own words. Sessions end at a pause
//! longer than [`SESSION_GAP`]. Only earlier messages are used, so a document never changes once
//! written: every store indexes append-only.
//!
//! Other messages (function results, alerts, events) are indexed on their own words (counted
//! twice, so lengths compare with conversation documents) and are nobody's neighbours.

use std::collections::VecDeque;

use chrono::{DateTime, Duration, Utc};

use super::analyzer::document_terms;
use crate::message::{Message, MessageKind};

/// Conversation messages before a message that its document includes.
pub const WINDOW_NEIGHBOURS: usize = 2;

/// The most terms of each neighbour a document includes: the neighbour's last ones.
pub const NEIGHBOUR_TERMS: usize = 40;

/// A pause after which the conversation counts as a new session (its messages are not
/// neighbours of the earlier ones).
pub const SESSION_GAP: Duration = Duration::hours(1);

/// Whether messages of this kind are conversation turns (user and assistant messages), which
/// are embedded, numbered and indexed with their neighbours.
pub fn is_conversation(kind: MessageKind) -> bool {
    MessageKind::CONVERSATION.contains(&kind)
}

/// The text a message is indexed and embedded as: `name: text` for a conversation message of a
/// named speaker, else its searchable text
/// ([`Message::searchable_text`]).
pub fn document_text(message: &Message) -> String {
    let text = message.searchable_text();
    match (&message.name, is_conversation(message.kind)) {
        (Some(name), true) if !name.trim().is_empty() => format!("{name}: {text}"),
        _ => text,
    }
}

/// One message's search document: its terms and, for conversation messages, its turn number
/// (0, 1, 2... per agent, in append order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageDocument {
    /// The message's place among its agent's conversation messages, if it is one.
    pub turn: Option<u64>,
    terms: Vec<String>,
}

impl MessageDocument {
    /// The terms, in order.
    pub fn terms(&self) -> &[String] {
        &self.terms
    }

    /// How many terms the document has.
    pub fn len(&self) -> usize {
        self.terms.len()
    }

    /// Whether the document has no term.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The terms joined by single spaces: what stores keep and feed to their full-text index
    /// (whose tokenizer splits it back into exactly these terms) and what
    /// [`count_terms`](super::count_terms) reads.
    pub fn text(&self) -> String {
        self.terms.join(" ")
    }
}

/// Builds the documents of one agent's messages in append order.
///
/// ```
/// use chrono::{Duration, TimeZone, Utc};
/// use memgpt_core::ids::AgentId;
/// use memgpt_core::message::{Message, MessageKind};
/// use memgpt_core::backend::DocumentBuilder;
///
/// let agent = AgentId::new();
/// let t = Utc.with_ymd_and_hms(2024, 1, 1, 9, 0, 0).unwrap();
/// let question = Message::new(agent, MessageKind::User, "Did you go to the race?", t);
/// let reply = Message::new(agent, MessageKind::Assistant, "Yes, last Saturday!", t + Duration::minutes(1));
/// let mut builder = DocumentBuilder::new([], 0);
/// assert_eq!(builder.add(&question).turn, Some(0));
/// let doc = builder.add(&reply);
/// assert_eq!(doc.turn, Some(1));
/// assert!(doc.terms().contains(&"race".to_owned()), "the reply is found through its question");
/// ```
#[derive(Clone, Debug)]
pub struct DocumentBuilder {
    /// The latest conversation messages of the current session: (time, own terms).
    recent: VecDeque<(DateTime<Utc>, Vec<String>)>,
    next_turn: u64,
}

impl DocumentBuilder {
    /// A builder continuing after `recent`, the agent's latest conversation messages (oldest
    /// first; only the last [`WINDOW_NEIGHBOURS`] matter), when `next_turn` conversation
    /// messages exist so far.
    pub fn new<'a>(recent: impl IntoIterator<Item = &'a Message>, next_turn: u64) -> Self {
        let mut builder = Self {
            recent: VecDeque::with_capacity(WINDOW_NEIGHBOURS + 1),
            next_turn,
        };
        for message in recent {
            if is_conversation(message.kind) {
                builder.remember(message.created_at, document_terms(&document_text(message)));
            }
        }
        builder
    }

    fn remember(&mut self, at: DateTime<Utc>, mut terms: Vec<String>) {
        if let Some((last, _)) = self.recent.back()
            && (at - *last).abs() > SESSION_GAP
        {
            self.recent.clear();
        }
        if terms.len() > NEIGHBOUR_TERMS {
            terms.drain(..terms.len() - NEIGHBOUR_TERMS);
        }
        self.recent.push_back((at, terms));
        while self.recent.len() > WINDOW_NEIGHBOURS {
            self.recent.pop_front();
        }
    }

    /// The document of the next message (messages must be added in append order).
    pub fn add(&mut self, message: &Message) -> MessageDocument {
        let own = document_terms(&document_text(message));
        if !is_conversation(message.kind) {
            let mut terms = own.clone();
            terms.extend(own);
            return MessageDocument { turn: None, terms };
        }
        if let Some((last, _)) = self.recent.back()
            && (message.created_at - *last).abs() > SESSION_GAP
        {
            self.recent.clear();
        }
        let mut terms: Vec<String> = self
            .recent
            .iter()
            .flat_map(|(_, t)| t.iter().cloned())
            .collect();
        terms.extend(own.iter().cloned());
        terms.extend(own.iter().cloned());
        let turn = self.next_turn;
        self.next_turn += 1;
        self.remember(message.created_at, own);
        MessageDocument {
            turn: Some(turn),
            terms,
        }
    }

    /// The turn the next conversation message will get.
    pub fn next_turn(&self) -> u64 {
        self.next_turn
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;
    use crate::ids::AgentId;

    fn at(minutes: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2024, 1, 1, 9, 0, 0).unwrap() + Duration::minutes(minutes)
    }

    #[test]
    fn windows_hold_two_earlier_turns_of_the_session() {
        let agent = AgentId::new();
        let m = |kind, text: &str, t| Message::new(agent, kind, text, at(t));
        let mut b = DocumentBuilder::new([], 7);
        let d1 = b.add(&m(MessageKind::User, "alpha", 0));
        assert_eq!((d1.turn, d1.text()), (Some(7), "alpha alpha".to_owned()));
        // A function result is neither numbered nor a neighbour.
        let f = b.add(&m(MessageKind::FunctionReturn, "gamma", 1));
        assert_eq!((f.turn, f.text()), (None, "gamma gamma".to_owned()));
        b.add(&m(MessageKind::Assistant, "beta", 2));
        let d3 = b.add(&m(MessageKind::User, "delta", 3));
        assert_eq!(d3.text(), "alpha beta delta delta");
        let d4 = b.add(&m(MessageKind::Assistant, "echo", 4));
        assert_eq!(
            (d4.turn, d4.text()),
            (Some(10), "beta delta echo echo".to_owned())
        );
        // After a long pause: a new session, no neighbours.
        let d5 = b.add(&m(MessageKind::User, "fox", 200));
        assert_eq!(d5.text(), "fox fox");
        assert_eq!(b.next_turn(), 12);
    }

    #[test]
    fn only_the_end_of_a_long_neighbour_counts() {
        let agent = AgentId::new();
        let long: Vec<String> = (0..100).map(|i| format!("w{i}")).collect();
        let mut b = DocumentBuilder::new([], 0);
        b.add(&Message::new(
            agent,
            MessageKind::Assistant,
            long.join(" "),
            at(0),
        ));
        let reply = b.add(&Message::new(agent, MessageKind::User, "yes", at(1)));
        let terms = reply.terms();
        assert_eq!(terms.len(), NEIGHBOUR_TERMS + 2);
        assert_eq!(terms[0], "w60");
        assert_eq!(terms[NEIGHBOUR_TERMS - 1], "w99");
        assert_eq!(&terms[NEIGHBOUR_TERMS..], ["yes", "yes"]);
    }

    #[test]
    fn a_builder_continues_where_storage_left_off() {
        let agent = AgentId::new();
        let earlier = [
            Message::new(agent, MessageKind::User, "one", at(0)),
            Message::new(agent, MessageKind::Assistant, "two", at(1)),
            Message::new(agent, MessageKind::User, "three", at(2)),
        ];
        let mut b = DocumentBuilder::new(&earlier, 3);
        let d = b.add(&Message::new(agent, MessageKind::Assistant, "four", at(3)));
        assert_eq!(
            (d.turn, d.text()),
            (Some(3), "two three four four".to_owned())
        );
    }

    #[test]
    fn named_speakers_are_part_of_the_text() {
        let mut m = Message::new(AgentId::new(), MessageKind::User, "hi", at(0));
        assert_eq!(document_text(&m), "hi");
        m.name = Some("Caroline".into());
        assert_eq!(document_text(&m), "Caroline: hi");
    }
}
