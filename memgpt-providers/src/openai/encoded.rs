//! Each message's wire JSON, encoded once. An agent resends its whole context every call (a
//! thousand messages, 150 KB, at a long history) and only its newest messages are new; the
//! others are the same shared [`ChatMessage`]s as last call (the agent's queue hands out
//! `Arc`s), so their JSON is copied from this cache instead of escaped again.
//!
//! An entry is keyed by the message's allocation and holds a [`Weak`] to it: while the entry
//! lives the allocation cannot be reused for another message, and a message cannot change
//! while a `Weak` to it exists (`Arc::get_mut` refuses; `Arc::make_mut` moves the value to a
//! new allocation), so an entry whose allocation is the request's message holds that
//! message's JSON.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use memgpt_core::llm::ChatMessage;
use serde_json::value::RawValue;

use super::wire::WireMessage;

/// Past this many bytes of JSON held, the cache starts over (a server's many agents share a
/// provider; their messages are encoded again as they are sent).
const MAX_BYTES: usize = 64 << 20;

/// The wire JSON of the messages a provider sent, by message (see the module documentation).
/// Clones share the cache.
#[derive(Clone, Default)]
pub(super) struct EncodedMessages(Arc<Mutex<Entries>>);

impl std::fmt::Debug for EncodedMessages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EncodedMessages").finish_non_exhaustive()
    }
}

#[derive(Default)]
struct Entries {
    by_message: HashMap<usize, Entry>,
    /// The bytes of JSON held.
    bytes: usize,
    /// How many entries the last sweep kept.
    kept: usize,
}

struct Entry {
    message: Weak<ChatMessage>,
    json: Arc<RawValue>,
}

impl Entry {
    fn holds(&self, message: &Arc<ChatMessage>) -> bool {
        std::ptr::eq(self.message.as_ptr(), Arc::as_ptr(message)) && self.message.strong_count() > 0
    }
}

fn key(message: &Arc<ChatMessage>) -> usize {
    Arc::as_ptr(message) as usize
}

impl EncodedMessages {
    /// The wire JSON of each of `messages`, in order: from the cache where a message was sent
    /// before, else encoded now (outside the lock) and kept.
    pub(super) fn encode(
        &self,
        messages: &[Arc<ChatMessage>],
    ) -> Result<Vec<Arc<RawValue>>, serde_json::Error> {
        let mut found: Vec<Option<Arc<RawValue>>> = {
            let entries = self.lock();
            messages
                .iter()
                .map(|m| {
                    let entry = entries.by_message.get(&key(m))?;
                    entry.holds(m).then(|| entry.json.clone())
                })
                .collect()
        };
        let mut fresh = Vec::new();
        for (message, slot) in messages.iter().zip(&mut found) {
            if slot.is_none() {
                let json: Arc<RawValue> =
                    serde_json::value::to_raw_value(&WireMessage::from(&**message))?.into();
                *slot = Some(json.clone());
                fresh.push((message, json));
            }
        }
        if !fresh.is_empty() {
            self.lock().keep(fresh);
        }
        Ok(found.into_iter().flatten().collect())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().by_message.len()
    }
}

impl Entries {
    fn keep(&mut self, fresh: Vec<(&Arc<ChatMessage>, Arc<RawValue>)>) {
        for (message, json) in fresh {
            self.bytes += json.get().len();
            let entry = Entry {
                message: Arc::downgrade(message),
                json,
            };
            if let Some(old) = self.by_message.insert(key(message), entry) {
                self.bytes -= old.json.get().len();
            }
        }
        // Entries of dropped messages go once they are as many as the live ones (amortised:
        // a sweep visits every entry), or when the bytes held pass the cap.
        if self.by_message.len() > 2 * self.kept.max(1024) || self.bytes > MAX_BYTES {
            self.sweep();
        }
        if self.bytes > MAX_BYTES {
            self.by_message.clear();
            (self.bytes, self.kept) = (0, 0);
        }
    }

    /// Drops the entries of messages dropped since.
    fn sweep(&mut self) {
        self.by_message.retain(|_, e| e.message.strong_count() > 0);
        self.bytes = self.by_message.values().map(|e| e.json.get().len()).sum();
        self.kept = self.by_message.len();
    }
}

#[cfg(test)]
mod tests {
    use memgpt_core::llm::Role;
    use memgpt_core::message::ToolCall;

    use super::*;

    fn wire(message: &ChatMessage) -> String {
        serde_json::to_string(&WireMessage::from(message)).unwrap()
    }

    /// A message sent again is copied from the cache; a new or changed one is encoded afresh,
    /// and what comes out is always what encoding the message now gives.
    #[test]
    fn messages_are_encoded_once_and_never_stale() {
        let cache = EncodedMessages::default();
        let mut call = ChatMessage::new(Role::Assistant, "");
        call.tool_calls.push(ToolCall {
            id: "c1".into(),
            name: "send_message".into(),
            arguments: r#"{"message":"hi \"you\""}"#.into(),
        });
        let mut messages = vec![
            Arc::new(ChatMessage::new(Role::System, "be brief\n\t\u{1}")),
            Arc::new(ChatMessage::new(Role::User, "hello")),
            Arc::new(call),
        ];
        let first = cache.encode(&messages).unwrap();
        let second = cache.encode(&messages).unwrap();
        for ((a, b), m) in first.iter().zip(&second).zip(&messages) {
            assert!(Arc::ptr_eq(a, b), "copied, not encoded again");
            assert_eq!(a.get(), wire(m));
        }
        // `make_mut` with the cache's `Weak` outstanding moves the message: encoded afresh.
        Arc::make_mut(&mut messages[1]).content = "changed".into();
        // A message dropped and another allocated (perhaps at the same address).
        messages[2] = Arc::new(ChatMessage::new(Role::User, "a new one"));
        let third = cache.encode(&messages).unwrap();
        for (json, m) in third.iter().zip(&messages) {
            assert_eq!(json.get(), wire(m));
        }
        assert!(Arc::ptr_eq(&third[0], &first[0]));
    }

    /// Entries of dropped messages are swept once they outnumber the live ones.
    #[test]
    fn dropped_messages_are_swept() {
        let cache = EncodedMessages::default();
        let live: Vec<Arc<ChatMessage>> = (0..10)
            .map(|i| Arc::new(ChatMessage::new(Role::User, format!("live {i}"))))
            .collect();
        cache.encode(&live).unwrap();
        for round in 0..5 {
            let dropped: Vec<Arc<ChatMessage>> = (0..1000)
                .map(|i| Arc::new(ChatMessage::new(Role::User, format!("gone {round} {i}"))))
                .collect();
            cache.encode(&dropped).unwrap();
        }
        assert!(cache.len() <= 2 * 1024 + 1000, "{} entries", cache.len());
        let again = cache.encode(&live).unwrap();
        for (json, m) in again.iter().zip(&live) {
            assert_eq!(json.get(), wire(m));
        }
    }
}
