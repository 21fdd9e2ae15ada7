//! Extension point: a **page-replacement policy**, with a signal of its own.
//!
//! An `EvictionPolicy` decides *when* main context is under pressure and *what* to evict from
//! the FIFO queue; the queue manager carries the decision out and keeps its invariants (a call
//! stays with its results, pinned messages stay, enough is freed). A policy may keep its own
//! numbers for each queued message (*signals*): it names them in `signals()` and sets them in
//! hooks the queue calls when a message is queued, used or attended to. The agent hands them
//! back in every view of the queue, and `memgpt serve`'s context view and the inspector show
//! them by name, with no code for them anywhere else. `register_policy!` makes the policy
//! resolvable by name, so an agent stored with `policy = "keep-facts"` finds it again when it
//! is loaded (and `memgpt serve` can create agents with it).
//!
//! ```text
//! cargo run --example custom_policy
//! ```

use std::sync::Arc;

use memgpt::backend::testing::ScriptedProvider;
use memgpt::message::{Message, MessageKind};
use memgpt::queue::{ContextUsage, EvictionPolicy, PaperPolicy, Pressure, QueueView};
use memgpt::store::{InMemoryStore, Storage};
use memgpt::{Agent, register_policy};
use serde_json::json;

/// The paper's thresholds, but the messages that state the fewest numbers (dates, amounts,
/// times) go first, and user messages last: about half of the queue's tokens are freed.
#[derive(Debug, Default)]
struct KeepFactsPolicy {
    thresholds: PaperPolicy,
}

impl EvictionPolicy for KeepFactsPolicy {
    fn name(&self) -> &str {
        "keep-facts"
    }

    fn pressure(&self, usage: &ContextUsage) -> Pressure {
        self.thresholds.pressure(usage)
    }

    fn select(&self, view: &QueueView<'_>) -> Vec<usize> {
        let mut order: Vec<usize> = (0..view.entries.len()).collect();
        // Stable: equal keys keep queue order (oldest first).
        order.sort_by(|&a, &b| {
            let (a, b) = (&view.entries[a], &view.entries[b]);
            let key = |e: &memgpt::queue::EntryView| (e.kind == MessageKind::User, e.signals[0]);
            key(a)
                .partial_cmp(&key(b))
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        view.take_until_freed(order, 0.5)
    }

    /// One signal per queued message, shown by name wherever the queue is shown.
    fn signals(&self) -> &[&'static str] {
        &["numbers"]
    }

    /// Counts the words holding a digit when the message joins the queue.
    fn on_queued(&self, message: &Message, signals: &mut [f32]) {
        signals[0] = message
            .text
            .split_whitespace()
            .filter(|word| word.chars().any(|c| c.is_ascii_digit()))
            .count() as f32;
    }
}

register_policy!("keep-facts", KeepFactsPolicy::default());

/// Creates an agent with the policy, talks to it, prints the queue as the inspector shows it,
/// and loads the agent again by the policy's name.
async fn run() -> anyhow::Result<Vec<(String, f32)>> {
    let storage = Storage::from_store(Arc::new(InMemoryStore::new()));
    let llm = Arc::new(ScriptedProvider::new());
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .storage(storage.clone())
        .policy_named("keep-facts")
        .build()
        .await?;
    for text in [
        "Hi there!",
        "My flight leaves on 12 March at 07:45 from gate 22.",
    ] {
        llm.push_call(
            "send_message",
            json!({"message": "Noted.", "request_heartbeat": false}),
        );
        agent.step(text).await?;
    }

    // The queue as the policy sees it: what `GET /v1/agents/{id}/context` returns under
    // `queued.signals` and the inspector prints next to each message.
    let preview = agent.paging_preview();
    let mut shown = Vec::new();
    for entry in &preview.entries {
        let signals: Vec<String> = preview
            .signals
            .iter()
            .zip(&entry.signals)
            .map(|(name, value)| format!("{name} {value}"))
            .collect();
        println!("{:<16} {}", entry.kind.as_str(), signals.join(" · "));
        shown.push((entry.kind.as_str().to_owned(), entry.signals[0]));
    }

    // Loading resolves the stored name through the registry: no policy object is passed.
    let id = agent.id();
    drop(agent);
    let loaded = Agent::builder()
        .provider(Arc::new(ScriptedProvider::new()))
        .storage(storage)
        .load(id)
        .await?;
    println!("agent {id} loaded with policy `{}`", loaded.config().policy);
    anyhow::ensure!(loaded.config().policy == "keep-facts");
    Ok(shown)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    run().await.map(drop)
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn the_signal_is_kept_for_every_queued_message() {
        let shown = super::run().await.unwrap();
        let numbers = |needle: &str| -> Vec<f32> {
            shown
                .iter()
                .filter(|(kind, _)| kind == needle)
                .map(|(_, n)| *n)
                .collect()
        };
        // "Hi there!" states no number; the flight states three (12, 07:45, 22).
        assert_eq!(numbers("user"), [0.0, 3.0]);
    }
}
