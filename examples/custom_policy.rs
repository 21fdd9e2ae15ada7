//! Extension point: a **page-replacement policy**.
//!
//! An `EvictionPolicy` decides *when* main context is under pressure and *what* to evict from
//! the FIFO queue; the queue manager carries the decision out and keeps its invariants (a call
//! stays with its results, pinned messages stay, enough is freed). `register_policy!` makes the
//! policy resolvable by name, so an agent stored with `policy = "keep-user"` finds it again
//! when it is loaded.
//!
//! ```text
//! cargo run --example custom_policy
//! ```

use std::sync::Arc;

use memgpt::message::MessageKind;
use memgpt::queue::{ContextUsage, EvictionPolicy, PaperPolicy, Pressure, QueueView};
use memgpt::store::{InMemoryStore, Storage};
use memgpt::testing::ScriptedProvider;
use memgpt::{Agent, register_policy};

/// The paper's thresholds, but user messages are evicted last: everything else goes first,
/// oldest first, until about half of the queue's tokens are freed.
#[derive(Debug, Default)]
struct KeepUserPolicy {
    thresholds: PaperPolicy,
}

impl EvictionPolicy for KeepUserPolicy {
    fn name(&self) -> &str {
        "keep-user"
    }

    fn pressure(&self, usage: &ContextUsage) -> Pressure {
        self.thresholds.pressure(usage)
    }

    fn select(&self, view: &QueueView<'_>) -> Vec<usize> {
        let by_preference = (0..view.entries.len())
            .filter(|&i| view.entries[i].kind != MessageKind::User)
            .chain((0..view.entries.len()).filter(|&i| view.entries[i].kind == MessageKind::User));
        view.take_until_freed(by_preference, 0.5)
    }
}

register_policy!("keep-user", KeepUserPolicy::default());

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let storage = Storage::from_store(Arc::new(InMemoryStore::new()));
    let agent = Agent::builder()
        .provider(Arc::new(ScriptedProvider::new()))
        .storage(storage.clone())
        .policy_named("keep-user")
        .build()
        .await?;
    let id = agent.id();
    drop(agent);

    // Loading resolves the stored name through the registry: no policy object is passed.
    let loaded = Agent::builder()
        .provider(Arc::new(ScriptedProvider::new()))
        .storage(storage)
        .load(id)
        .await?;
    println!("agent {id} loaded with policy `{}`", loaded.config().policy);
    assert_eq!(loaded.config().policy, "keep-user");
    Ok(())
}
