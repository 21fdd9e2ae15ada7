//! Imported history.

use super::*;

#[tokio::test]
async fn imported_history_is_searchable_but_not_queued() {
    let llm = llm();
    let mut agent = agent(&llm).await;
    let queued = agent.context().queue().len();
    let at = Utc.with_ymd_and_hms(2023, 5, 8, 13, 56, 0).unwrap();
    let history = vec![
        Message::new(
            agent.id(),
            MessageKind::User,
            "Ann: I adopted a puppy named Rex.",
            at,
        ),
        Message::new(
            agent.id(),
            MessageKind::Assistant,
            "Bob: Congratulations!",
            at + Duration::minutes(1),
        ),
    ];
    agent.import_history(history).await.unwrap();
    assert_eq!(
        agent.context().queue().len(),
        queued,
        "not in the FIFO queue"
    );
    assert!(
        agent.context().counts().recall >= 2,
        "the memory header counts it"
    );
    let hits = agent
        .storage()
        .recall
        .search(agent.id(), &RecallQuery::text("puppy", Page::first(5)))
        .await
        .unwrap();
    assert!(hits.hits[0].item.text.contains("puppy"), "{hits:?}");
    assert_eq!(hits.hits[0].item.created_at, at, "its own timestamp");

    // Another agent's message is refused and nothing is written.
    let before = agent
        .storage()
        .recall
        .count_messages(agent.id())
        .await
        .unwrap();
    let stranger = Message::new(AgentId::new(), MessageKind::User, "not mine", at);
    assert!(agent.import_history(vec![stranger]).await.is_err());
    assert_eq!(
        agent
            .storage()
            .recall
            .count_messages(agent.id())
            .await
            .unwrap(),
        before
    );

    // The agent searches it like any other history.
    llm.push_calls(
        "",
        &[(
            "conversation_search",
            json!({"query": "puppy", "request_heartbeat": true}),
        )],
    );
    llm.push_call("send_message", json!({"message": "Rex!"}));
    let record = agent
        .step(Event::user("What is my puppy called?"))
        .await
        .unwrap();
    assert!(
        record.function_calls[0].output.contains("puppy named Rex"),
        "{:?}",
        record.function_calls
    );
}
