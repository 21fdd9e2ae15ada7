//! Message embeddings: with the step, deferred, backfilled, refused across spaces.

use super::*;

#[tokio::test]
async fn steps_embed_their_conversation_messages_before_committing() {
    let llm = llm();
    let mut agent = embedded_agent(&llm, Storage::in_memory(), 32, false).await;
    llm.push_call("send_message", json!({"message": "Noted."}));
    let record = agent.step("My cat is called Mochi.").await.unwrap();
    assert_eq!(
        unembedded(&agent).await,
        0,
        "user and assistant messages embedded"
    );
    assert!(record.timings.embedding > std::time::Duration::ZERO);
    let space = agent
        .storage()
        .agents
        .embedding_space()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (space.model.as_str(), space.dimension),
        ("memgpt-hashing-v1-32", 32)
    );
}

#[tokio::test]
async fn deferred_embeddings_are_made_by_the_next_step_or_call_or_a_reindex() {
    let llm = llm();
    let mut agent = embedded_agent(&llm, Storage::in_memory(), 32, true).await;
    llm.push_call("send_message", json!({"message": "Noted."}));
    agent.step("My cat is called Mochi.").await.unwrap();
    assert_eq!(
        unembedded(&agent).await,
        2,
        "the user message and the reply"
    );
    let record = agent
        .call(
            "conversation_search",
            json!({"query": "cat name", "request_heartbeat": false}),
        )
        .await
        .unwrap();
    assert!(record.ok, "{}", record.output);
    assert!(
        !record.output.contains("ranked by words only"),
        "{}",
        record.output
    );
    assert!(
        record.output.contains("My cat is called Mochi."),
        "{}",
        record.output
    );
    assert_eq!(
        unembedded(&agent).await,
        0,
        "embedded by the call, before it ran"
    );

    llm.push_call("send_message", json!({"message": "Sunny."}));
    agent.step("The weather is sunny.").await.unwrap();
    assert_eq!(unembedded(&agent).await, 2);
    // A search only reads: it says what it matched by words alone.
    let found = agent
        .search_recall(&RecallQuery::text("weather", Page::first(5)))
        .await
        .unwrap();
    assert!(
        found
            .note
            .as_deref()
            .is_some_and(|n| n.contains("not embedded yet")),
        "{:?}",
        found.note
    );
    assert_eq!(unembedded(&agent).await, 2, "the search wrote nothing");
    // The next step embeds them before it runs; its own messages wait for the one after.
    llm.push_call("send_message", json!({"message": "You're welcome."}));
    agent.step("Thanks.").await.unwrap();
    assert_eq!(
        unembedded(&agent).await,
        2,
        "only the new step's own messages"
    );
    assert_eq!(agent.reindex().await.unwrap(), 2);
    assert_eq!(unembedded(&agent).await, 0);
    assert_eq!(agent.reindex().await.unwrap(), 0, "nothing left");
}

#[tokio::test]
async fn an_agent_without_embedder_imports_and_a_later_one_backfills() {
    let llm = llm();
    let storage = Storage::in_memory();
    let mut plain = Agent::builder()
        .provider(llm.clone())
        .storage(storage.clone())
        .build()
        .await
        .unwrap();
    let at = Utc.with_ymd_and_hms(2023, 5, 8, 13, 56, 0).unwrap();
    let history: Vec<Message> = (0..70)
        .map(|i| {
            Message::new(
                plain.id(),
                if i % 2 == 0 {
                    MessageKind::User
                } else {
                    MessageKind::Assistant
                },
                format!("turn {i}"),
                at + Duration::minutes(i),
            )
        })
        .collect();
    plain.import_history(history).await.unwrap();
    assert_eq!(
        storage
            .recall
            .unembedded_messages(plain.id(), 1_000)
            .await
            .unwrap()
            .len(),
        70
    );
    let mut embedded = Agent::builder()
        .provider(llm.clone())
        .storage(storage.clone())
        .embedder(Arc::new(HashingEmbedder::new(16)))
        .load(plain.id())
        .await
        .unwrap();
    assert_eq!(
        embedded.reindex().await.unwrap(),
        70,
        "in batches, none skipped"
    );
    assert!(
        storage
            .recall
            .unembedded_messages(plain.id(), 1_000)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn an_embedder_of_another_space_is_refused_when_the_agent_is_built() {
    let llm = llm();
    let storage = Storage::in_memory();
    let mut first = embedded_agent(&llm, storage.clone(), 32, false).await;
    llm.push_call("send_message", json!({"message": "ok"}));
    first.step("hello").await.unwrap();
    let err = Agent::builder()
        .provider(llm.clone())
        .storage(storage.clone())
        .embedder(Arc::new(HashingEmbedder::new(16)))
        .build()
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Store(StoreError::EmbeddingMismatch {
                expected_dimension: 32,
                found_dimension: 16,
                ..
            })
        ),
        "{err}"
    );
    let err = Agent::builder()
        .provider(llm.clone())
        .storage(storage)
        .embedder(Arc::new(HashingEmbedder::new(16)))
        .load(first.id())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("embedding mismatch"), "{err}");
}
