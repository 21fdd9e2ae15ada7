//! Switching a store to another embedding model.

use super::*;

/// A [`HashingEmbedder`](crate::embed::HashingEmbedder) that fails its `fail_at`-th call.
#[derive(Debug)]
struct FailsOnce {
    inner: crate::embed::HashingEmbedder,
    calls: std::sync::atomic::AtomicUsize,
    fail_at: usize,
}

#[async_trait::async_trait]
impl crate::embed::Embedder for FailsOnce {
    fn model(&self) -> &str {
        crate::embed::Embedder::model(&self.inner)
    }
    fn dimension(&self) -> usize {
        crate::embed::Embedder::dimension(&self.inner)
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, crate::embed::EmbedError> {
        let call = self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        if call == self.fail_at {
            return Err(crate::embed::EmbedError::InvalidResponse {
                message: "interrupted".into(),
            });
        }
        self.inner.embed(texts).await
    }
}

#[tokio::test]
async fn a_store_is_reindexed_with_another_model_resumably() {
    use crate::indexing::reindex_store;
    let llm = llm();
    let storage = Storage::in_memory();
    let mut agent = embedded_agent(&llm, storage.clone(), 32, false).await;
    llm.push_call("send_message", json!({"message": "Noted."}));
    agent.step("My cat is called Mochi.").await.unwrap();
    let record = agent
        .call(
            "archival_memory_insert",
            json!({"content": "Mochi was adopted in 2021.", "request_heartbeat": false}),
        )
        .await
        .unwrap();
    assert!(record.ok, "{}", record.output);
    drop(agent);

    // Another model of another dimension: the first run clears the old vectors, embeds the
    // messages, and is interrupted while embedding the passages.
    let flaky = FailsOnce {
        inner: crate::embed::HashingEmbedder::new(48),
        calls: Default::default(),
        fail_at: 2,
    };
    let mut seen = Vec::new();
    let err = reindex_store(&storage, &flaky, &mut |p| {
        seen.push((p.messages, p.passages))
    })
    .await
    .unwrap_err();
    assert!(err.to_string().contains("interrupted"), "{err}");
    assert_eq!(
        seen,
        [(2, 0)],
        "the messages were stored before the failure"
    );
    let space = storage.agents.embedding_space().await.unwrap().unwrap();
    assert_eq!(space.dimension, 48, "the store switched to the new model");

    // Run again: nothing is cleared twice, only the passage is left to do.
    let report = reindex_store(&storage, &flaky, &mut |_| {}).await.unwrap();
    assert_eq!(
        (
            report.cleared,
            report.agents,
            report.messages,
            report.passages
        ),
        (false, 1, 0, 1)
    );
    let id = storage.agents.list_agents().await.unwrap()[0].id;
    assert!(
        storage
            .archival
            .unembedded_passages(id, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        storage
            .recall
            .unembedded_messages(id, 10)
            .await
            .unwrap()
            .is_empty()
    );

    // The agent opens with the new model and finds its memories by meaning and by words.
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .storage(storage.clone())
        .embedder(Arc::new(crate::embed::HashingEmbedder::new(48)))
        .load(id)
        .await
        .unwrap();
    let record = agent
        .call(
            "archival_memory_search",
            json!({"query": "when was Mochi adopted", "request_heartbeat": false}),
        )
        .await
        .unwrap();
    assert!(record.output.contains("2021"), "{}", record.output);
    // A store already on the model: nothing to do.
    let again = reindex_store(
        &storage,
        &crate::embed::HashingEmbedder::new(48),
        &mut |_| {},
    )
    .await
    .unwrap();
    assert_eq!(
        (again.cleared, again.messages, again.passages),
        (false, 0, 0)
    );
    // The old model is now the mismatch.
    let old = Agent::builder()
        .provider(llm.clone())
        .storage(storage.clone())
        .embedder(Arc::new(crate::embed::HashingEmbedder::new(32)))
        .load(id)
        .await;
    assert!(old.is_err());
}
