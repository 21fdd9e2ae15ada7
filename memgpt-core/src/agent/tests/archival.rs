//! Documents and passages in archival storage, searched within the step that wrote them.

use super::*;

#[tokio::test]
async fn documents_go_to_archival_storage_within_limits() {
    let llm = llm();
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .embedder(Arc::new(HashingEmbedder::new(64)))
        .config(AgentConfig {
            max_document_bytes: 2_000,
            passage_tokens: 40,
            ..AgentConfig::default()
        })
        .build()
        .await
        .unwrap();
    let doc = (0..12)
        .map(|i| format!("Paragraph {i} talks about topic {i} in some detail."))
        .collect::<Vec<_>>()
        .join("\n\n");
    llm.push_call(
        "archival_memory_search",
        json!({"query": "topic 7", "request_heartbeat": true}),
    );
    llm.push_call("send_message", json!({"message": "read it"}));
    let record = agent.step(Event::document("notes.txt", doc)).await.unwrap();
    assert_eq!(record.messages[0].kind, MessageKind::DocumentUpload);
    assert!(record.messages[0].text.contains("\"notes.txt\""));
    // The search in the same step already sees the uploaded passages.
    assert!(
        record.function_calls[0]
            .output
            .contains("Paragraph 7 talks about topic 7"),
        "{}",
        record.function_calls[0].output
    );
    let stored = agent
        .storage()
        .archival
        .count_passages(agent.id())
        .await
        .unwrap();
    assert!(stored > 1);
    let page = agent
        .storage()
        .archival
        .list_passages(agent.id(), Page::first(1))
        .await
        .unwrap();
    assert_eq!(page.hits[0].item.metadata["source"], "notes.txt");
    assert_eq!(
        page.hits[0].item.embedding.as_ref().unwrap().model,
        "memgpt-hashing-v1-64"
    );

    let err = agent
        .step(Event::document("big.txt", "x".repeat(5_000)))
        .await
        .unwrap_err();
    assert!(matches!(
        err,
        Error::DocumentTooLarge {
            bytes: 5_000,
            limit: 2_000,
            ..
        }
    ));
    let err = agent
        .step(Event::document("empty.txt", "  \n\n "))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::EmptyDocument { .. }));
    // The same limits hold for the three ways text enters archival storage.
    let err = agent
        .insert_archival(&"y".repeat(2_001), Default::default())
        .await
        .unwrap_err();
    assert!(matches!(
        err,
        Error::DocumentTooLarge {
            bytes: 2_001,
            limit: 2_000,
            ..
        }
    ));
    let record = agent
        .call(
            "archival_memory_insert",
            json!({"content": "z".repeat(2_001), "request_heartbeat": false}),
        )
        .await
        .unwrap();
    assert!(!record.ok);
    assert_eq!(
        record.output,
        "the content is 2001 bytes, over the limit of 2000 bytes: insert it in smaller parts"
    );
    assert_eq!(
        agent
            .storage()
            .archival
            .count_passages(agent.id())
            .await
            .unwrap(),
        stored
    );
}

#[tokio::test]
async fn inserted_passages_are_searchable_in_the_same_step() {
    let llm = llm();
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .embedder(Arc::new(HashingEmbedder::new(128)))
        .build()
        .await
        .unwrap();
    agent
        .insert_archival("Chad's sister is called Maria.", Default::default())
        .await
        .unwrap();
    llm.push_call(
        "archival_memory_insert",
        json!({"content": "Chad's dog is called Rex.", "request_heartbeat": true}),
    );
    llm.push_call(
        "archival_memory_search",
        json!({"query": "Chad's dog", "request_heartbeat": true}),
    );
    llm.push_call("send_message", json!({"message": "Rex"}));
    let record = agent.step("what's my dog's name?").await.unwrap();
    assert!(
        record.function_calls[0]
            .output
            .contains("archival memory now holds 2")
    );
    let output = &record.function_calls[1].output;
    assert!(output.starts_with("Showing results 1-2 of 2"), "{output}");
    assert!(
        output.lines().nth(1).unwrap().contains("Rex"),
        "the new passage ranks first: {output}"
    );
    assert!(
        llm.requests()[2].messages[0]
            .content
            .contains("2 passages in archival memory")
    );
}
