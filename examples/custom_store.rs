//! Extension point: a **store**, here a wrapper around another store.
//!
//! An agent reads and writes through three seams (`AgentStore`, `RecallStore`,
//! `ArchivalStore`, bundled in a `Storage`). A wrapper can add behaviour to one of them (audit,
//! metrics, quotas, encryption of state) and hand the rest through. Delegate *every* method,
//! the ones with defaults too (`agent_version`, `lock_agent`, `create_agent_with`): PostgreSQL's `lock_agent` is a
//! real cross-process lock that a forgotten delegation would silently drop.
//!
//! A store written from scratch should pass the conformance suite the built-in ones pass: with
//! `memgpt-backends`' `conformance` feature, `memgpt_backends::store_conformance_tests!` turns a
//! `StoreUnderTest` into one test per case; see ARCHITECTURE.md, "Where to add things".
//!
//! ```text
//! cargo run --example custom_store
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use memgpt::Agent;
use memgpt::backend::testing::ScriptedProvider;
use memgpt::ids::AgentId;
use memgpt::store::{
    AgentLease, AgentState, AgentStore, Commit, EmbeddingSpace, InMemoryStore, MessageEmbedding,
    Storage, StoreError,
};
use serde_json::json;

/// Counts the steps committed and the messages they appended.
#[derive(Debug)]
struct AuditedAgents {
    inner: Arc<dyn AgentStore>,
    commits: AtomicUsize,
    messages: AtomicUsize,
}

#[async_trait]
impl AgentStore for AuditedAgents {
    async fn create_agent(&self, state: &AgentState) -> Result<(), StoreError> {
        self.inner.create_agent(state).await
    }

    async fn load_agent(&self, id: AgentId) -> Result<Option<AgentState>, StoreError> {
        self.inner.load_agent(id).await
    }

    async fn list_agents(&self) -> Result<Vec<AgentState>, StoreError> {
        self.inner.list_agents().await
    }

    async fn delete_agent(&self, id: AgentId) -> Result<bool, StoreError> {
        self.inner.delete_agent(id).await
    }

    async fn commit(&self, commit: &Commit) -> Result<(), StoreError> {
        self.inner.commit(commit).await?;
        // Only what was committed counts: a refused commit changed nothing.
        self.commits.fetch_add(1, Ordering::Relaxed);
        self.messages
            .fetch_add(commit.messages.len(), Ordering::Relaxed);
        Ok(())
    }

    async fn store_message_embeddings(
        &self,
        agent: AgentId,
        embeddings: &[MessageEmbedding],
    ) -> Result<(), StoreError> {
        self.inner.store_message_embeddings(agent, embeddings).await
    }

    async fn embedding_space(&self) -> Result<Option<EmbeddingSpace>, StoreError> {
        self.inner.embedding_space().await
    }

    async fn agent_version(&self, id: AgentId) -> Result<Option<u64>, StoreError> {
        self.inner.agent_version(id).await
    }

    async fn lock_agent(&self, id: AgentId) -> Result<Box<dyn AgentLease>, StoreError> {
        self.inner.lock_agent(id).await
    }

    async fn create_agent_with(&self, commit: &Commit) -> Result<(), StoreError> {
        // An import: one transaction in the inner store, so it stays all or nothing.
        self.inner.create_agent_with(commit).await
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let store = Arc::new(InMemoryStore::new());
    let audited = Arc::new(AuditedAgents {
        inner: store.clone(),
        commits: AtomicUsize::new(0),
        messages: AtomicUsize::new(0),
    });
    let storage = Storage {
        agents: audited.clone(),
        recall: store.clone(),
        archival: store.clone(),
        blocks: store,
    };

    let llm = Arc::new(ScriptedProvider::new());
    llm.push_call("send_message", json!({"message": "Noted."}));
    let mut agent = Agent::builder()
        .provider(llm)
        .storage(storage)
        .build()
        .await?;
    agent.step("Remember that I like tea.").await?;

    let (commits, messages) = (
        audited.commits.load(Ordering::Relaxed),
        audited.messages.load(Ordering::Relaxed),
    );
    println!("{commits} commit(s), {messages} message(s) appended to recall storage");
    assert!(commits >= 1 && messages >= 2);
    Ok(())
}
