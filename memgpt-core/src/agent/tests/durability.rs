//! Atomic steps: failed, interrupted and cancelled commits, two handles on one agent, reloads.

use super::*;

/// An agent store that can refuse commits, or apply them and then acknowledge late.
#[derive(Debug)]
struct FaultyStore {
    inner: Arc<InMemoryStore>,
    fail: AtomicBool,
    ack_delay: Option<std::time::Duration>,
}

impl FaultyStore {
    /// Storage whose commits go through a `FaultyStore`, and the store behind it.
    fn storage(
        ack_delay: Option<std::time::Duration>,
    ) -> (Arc<InMemoryStore>, Arc<FaultyStore>, Storage) {
        let inner = Arc::new(InMemoryStore::new());
        let faulty = Arc::new(FaultyStore {
            inner: inner.clone(),
            fail: AtomicBool::new(false),
            ack_delay,
        });
        let storage = Storage {
            agents: faulty.clone(),
            recall: inner.clone(),
            archival: inner.clone(),
            blocks: inner.clone(),
        };
        (inner, faulty, storage)
    }
}

#[async_trait]
impl AgentStore for FaultyStore {
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
        if self.fail.load(Ordering::SeqCst) {
            return Err(StoreError::Backend {
                message: "disk full".into(),
                transient: false,
                source: None,
            });
        }
        self.inner.commit(commit).await?;
        if let Some(delay) = self.ack_delay {
            tokio::time::sleep(delay).await;
        }
        Ok(())
    }
    async fn store_message_embeddings(
        &self,
        agent: AgentId,
        embeddings: &[crate::store::MessageEmbedding],
    ) -> Result<(), StoreError> {
        self.inner.store_message_embeddings(agent, embeddings).await
    }
    async fn embedding_space(&self) -> Result<Option<crate::store::EmbeddingSpace>, StoreError> {
        self.inner.embedding_space().await
    }
}

#[tokio::test]
async fn a_failed_commit_leaves_the_agent_as_it_was() {
    let (inner, flaky, storage) = FaultyStore::storage(None);
    let llm = llm();
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .storage(storage)
        .build()
        .await
        .unwrap();
    llm.push_call("send_message", json!({"message": "first"}));
    agent.step("one").await.unwrap();
    let before = (
        agent.version(),
        agent.context().queue().ids(),
        agent.memory().clone(),
        agent.stats(),
    );

    flaky.fail.store(true, Ordering::SeqCst);
    llm.push_call(
        "core_memory_append",
        json!({"label": "human", "content": "Likes tea", "request_heartbeat": true}),
    );
    llm.push_call("send_message", json!({"message": "second"}));
    let err = agent.step("two").await.unwrap_err();
    assert!(err.to_string().contains("disk full"));
    assert_eq!(
        (
            agent.version(),
            agent.context().queue().ids(),
            agent.memory().clone(),
            agent.stats()
        ),
        before
    );

    // The same event can be retried once storage recovers.
    flaky.fail.store(false, Ordering::SeqCst);
    llm.push_call("send_message", json!({"message": "second"}));
    let record = agent.step("two").await.unwrap();
    assert_eq!(record.replies, ["second"]);
    assert_eq!(inner.count_messages(agent.id()).await.unwrap(), 6);
}

#[tokio::test]
async fn a_commit_interrupted_after_landing_is_resynchronised() {
    let (inner, _, storage) = FaultyStore::storage(Some(std::time::Duration::from_millis(200)));
    let llm = llm();
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .storage(storage)
        .build()
        .await
        .unwrap();
    llm.push_call("send_message", json!({"message": "one"}));
    // The commit lands, but the caller gives up before it is acknowledged.
    let interrupted =
        tokio::time::timeout(std::time::Duration::from_millis(50), agent.step("first")).await;
    assert!(interrupted.is_err());
    assert_eq!(agent.version(), 0, "the in-memory agent was rolled back");
    assert_eq!(
        inner.load_agent(agent.id()).await.unwrap().unwrap().version,
        1,
        "but the commit landed"
    );

    // The next step first reloads what was stored, so nothing conflicts and nothing is lost.
    llm.push_call("send_message", json!({"message": "two"}));
    let record = agent.step("second").await.unwrap();
    assert_eq!(record.replies, ["two"]);
    assert_eq!(agent.version(), 2);
    assert_eq!(inner.count_messages(agent.id()).await.unwrap(), 6);
    let last = &llm.agent_requests()[1].messages;
    assert!(
        last.iter()
            .any(|m| m.content.contains("\"message\":\"first\"")),
        "the landed step is in context"
    );
}

#[tokio::test]
async fn a_failed_pin_changes_nothing() {
    let (inner, flaky, storage) = FaultyStore::storage(None);
    let llm = llm();
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .storage(storage)
        .build()
        .await
        .unwrap();
    llm.push_call("send_message", json!({"message": "hi"}));
    let record = agent.step("remember this one").await.unwrap();
    let id = record.messages[0].id;
    flaky.fail.store(true, Ordering::SeqCst);
    assert!(agent.pin(id, true).await.is_err());
    assert!(!agent.context().queue().entries().any(|e| e.is_pinned()));
    flaky.fail.store(false, Ordering::SeqCst);
    assert!(agent.pin(id, true).await.unwrap());
    assert!(agent.context().queue().get(0).unwrap().is_pinned());
    assert_eq!(
        inner.load_agent(agent.id()).await.unwrap().unwrap().pinned,
        vec![id]
    );
    assert!(
        !agent.pin(crate::ids::MessageId::new(), true).await.unwrap(),
        "not queued"
    );
}

#[tokio::test]
async fn two_handles_on_one_agent_take_turns_without_conflict() {
    // Two processes sharing a store each hold the same agent.
    let storage = Storage::in_memory();
    let llm = llm();
    let mut a = Agent::builder()
        .provider(llm.clone())
        .storage(storage.clone())
        .build()
        .await
        .unwrap();
    let mut b = Agent::builder()
        .provider(llm.clone())
        .storage(storage.clone())
        .load(a.id())
        .await
        .unwrap();
    llm.push_call("send_message", json!({"message": "from a"}));
    a.step("to a").await.unwrap();
    llm.push_call("send_message", json!({"message": "from b"}));
    let record = b.step("to b").await.unwrap();
    assert_eq!(record.replies, ["from b"]);
    assert_eq!(b.version(), 2, "b caught up with a's step before its own");
    let seen = &llm.agent_requests()[1].messages;
    assert!(
        seen.iter()
            .any(|m| m.content.contains("\"message\":\"to a\"")),
        "b saw a's step"
    );
    // And a catches up in turn.
    llm.push_call("send_message", json!({"message": "a again"}));
    a.step("to a again").await.unwrap();
    assert_eq!(a.version(), 3);
    assert_eq!(storage.recall.count_messages(a.id()).await.unwrap(), 9);
}

#[tokio::test]
async fn loading_applies_the_builders_settings() {
    let storage = Storage::in_memory();
    let agent = Agent::builder()
        .provider(llm())
        .storage(storage.clone())
        .build()
        .await
        .unwrap();
    let loaded = Agent::builder()
        .provider(llm())
        .storage(storage)
        .page_size(2)
        .max_chain_length(3)
        .function("explode")
        .load(agent.id())
        .await
        .unwrap();
    assert_eq!(loaded.config().page_size, 2);
    assert_eq!(loaded.config().max_chain_length, 3);
    assert_eq!(loaded.function_set().names().last(), Some("explode"));
    assert_eq!(
        loaded.config().context_window,
        agent.config().context_window,
        "unset settings keep their stored value"
    );
}

#[derive(Debug)]
struct Stalled;

#[async_trait]
impl crate::llm::LlmProvider for Stalled {
    fn model(&self) -> &str {
        "stalled"
    }
    async fn complete(
        &self,
        _: &crate::llm::ChatRequest,
    ) -> Result<crate::llm::ChatResponse, LlmError> {
        std::future::pending().await
    }
}

#[tokio::test]
async fn a_cancelled_step_leaves_no_trace() {
    let mut agent = Agent::builder()
        .provider(Arc::new(Stalled))
        .build()
        .await
        .unwrap();
    let stats = agent.stats();
    let result =
        tokio::time::timeout(std::time::Duration::from_millis(20), agent.step("hello?")).await;
    assert!(result.is_err(), "the step timed out");
    assert_eq!(agent.stats(), stats);
    assert_eq!(agent.context().queue().len(), 0);
    assert_eq!(
        agent
            .storage()
            .recall
            .count_messages(agent.id())
            .await
            .unwrap(),
        0
    );
}
