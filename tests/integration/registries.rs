//! Names resolve through registries, and the docs list what the registries hold.

use std::sync::Arc;

use memgpt::Agent;
use memgpt::backend::testing::ScriptedProvider;
use memgpt::function::FunctionRegistry;
use memgpt::queue::{ContextUsage, EvictionPolicy, PaperPolicy, Pressure, QueueView};
use memgpt::store::{InMemoryStore, Storage};

/// A policy defined outside memgpt: evicts the newest half, and keeps a signal of its own
/// (`words`: the words of a message, plus one per use), which the server's context view shows
/// (server.rs, `a_custom_policy_signal_shows_in_the_context_view`).
#[derive(Debug, Default)]
struct NewestFirst(PaperPolicy);

impl EvictionPolicy for NewestFirst {
    fn name(&self) -> &str {
        "newest-first"
    }
    fn pressure(&self, usage: &ContextUsage) -> Pressure {
        self.0.pressure(usage)
    }
    fn select(&self, view: &QueueView<'_>) -> Vec<usize> {
        (view.entries.len() / 2..view.entries.len()).collect()
    }
    fn signals(&self) -> &[&'static str] {
        &["words"]
    }
    fn on_queued(&self, message: &memgpt::message::Message, signals: &mut [f32]) {
        signals[0] = message.text.split_whitespace().count() as f32;
    }
    fn on_touched(&self, signals: &mut [f32]) {
        signals[0] += 1.0;
    }
}

memgpt::register_policy!("newest-first", NewestFirst::default());

#[memgpt_test_harness::test]
async fn a_user_policy_resolves_when_the_agent_is_loaded() {
    let storage = Storage::from_store(Arc::new(InMemoryStore::new()));
    let agent = Agent::builder()
        .provider(Arc::new(ScriptedProvider::new()))
        .storage(storage.clone())
        .policy_named("newest-first")
        .build()
        .await
        .unwrap();
    let id = agent.id();
    drop(agent);
    let loaded = Agent::builder()
        .provider(Arc::new(ScriptedProvider::new()))
        .storage(storage.clone())
        .load(id)
        .await
        .unwrap();
    assert_eq!(loaded.config().policy, "newest-first");

    let unknown = Agent::builder()
        .provider(Arc::new(ScriptedProvider::new()))
        .storage(storage)
        .policy_named("clock")
        .build()
        .await
        .unwrap_err();
    assert_eq!(unknown.kind(), memgpt::ErrorKind::Config);
    assert!(unknown.to_string().contains("`newest-first`"), "{unknown}");
}

/// The rows of the README table under `heading`: the first backticked word of each row.
fn readme_table_names(heading: &str) -> Vec<String> {
    let readme = include_str!("../../README.md");
    let section = readme
        .split(heading)
        .nth(1)
        .unwrap_or_else(|| panic!("README has no `{heading}`"));
    section
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| l.split('`').nth(1).map(str::to_owned))
        .collect()
}

#[memgpt_test_harness::test]
fn the_readme_lists_exactly_the_built_in_policies() {
    let mut documented = readme_table_names("## Page replacement");
    documented.sort();
    let mut built_in: Vec<String> = memgpt::queue::POLICIES
        .iter()
        .filter(|r| r.module_path.starts_with("memgpt_core"))
        .map(|r| r.name.to_owned())
        .collect();
    built_in.sort();
    assert_eq!(documented, built_in);
}

#[memgpt_test_harness::test]
fn the_readme_names_every_built_in_function() {
    let readme = include_str!("../../README.md");
    let registry = FunctionRegistry::linked().unwrap();
    for name in memgpt::builtin::DEFAULT_FUNCTIONS {
        assert!(registry.get(name).is_some(), "`{name}` is not registered");
        assert!(
            readme.contains(&format!("`{name}")),
            "README does not mention `{name}`"
        );
    }
}
