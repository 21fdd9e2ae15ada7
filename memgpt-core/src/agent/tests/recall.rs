//! Recall storage: searching by date, reloading agents, imported history.

use super::*;

#[tokio::test]
async fn conversation_search_by_date_reads_recall() {
    let llm = llm();
    let mut agent = agent(&llm).await;
    let day = |d| Utc.with_ymd_and_hms(2024, 3, d, 12, 0, 0).unwrap();
    for d in 1..=4 {
        llm.push_call("send_message", json!({"message": format!("noted day {d}")}));
        agent
            .step(Event::user(format!("it is day {d}")).at(day(d)))
            .await
            .unwrap();
    }
    llm.push_call(
        "conversation_search_date",
        json!({"start_date": "2024-03-02", "end_date": "2024-03-03", "request_heartbeat": true}),
    );
    llm.push_call(
        "conversation_search",
        json!({"query": "day 4", "request_heartbeat": true}),
    );
    llm.push_call("send_message", json!({"message": "found"}));
    let record = agent
        .step("what did I say on the 2nd and 3rd?")
        .await
        .unwrap();
    let by_date = &record.function_calls[0].output;
    assert!(by_date.starts_with("Showing results 1-4 of 4"), "{by_date}");
    assert!(by_date.contains("[2024-03-02T12:00:00Z] user: it is day 2"));
    assert!(by_date.contains("assistant: noted day 3"));
    assert!(!by_date.contains("day 1") && !by_date.contains("day 4"));
    let by_text = &record.function_calls[1].output;
    assert!(by_text.contains("it is day 4"), "{by_text}");
}

#[tokio::test]
async fn agents_reload_from_storage() {
    let llm = llm();
    let storage = Storage::in_memory();
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .storage(storage.clone())
        .name("sam")
        .build()
        .await
        .unwrap();
    llm.push_call(
        "core_memory_append",
        json!({"label": "human", "content": "Likes jazz", "request_heartbeat": true}),
    );
    llm.push_call("send_message", json!({"message": "jazz, noted"}));
    agent.step("I like jazz").await.unwrap();
    agent
        .insert_archival("an archived fact", Default::default())
        .await
        .unwrap();

    let reloaded = Agent::builder()
        .provider(llm.clone())
        .storage(storage.clone())
        .load(agent.id())
        .await
        .unwrap();
    assert_eq!(reloaded.name(), "sam");
    assert_eq!(reloaded.version(), agent.version());
    assert_eq!(reloaded.memory(), agent.memory());
    assert_eq!(
        reloaded.context().queue().ids(),
        agent.context().queue().ids()
    );
    assert_eq!(reloaded.prompt(), agent.prompt());
    assert_eq!(reloaded.context().counts(), agent.context().counts());

    let missing = Agent::builder()
        .provider(llm)
        .storage(storage)
        .load(AgentId::new())
        .await;
    assert!(matches!(missing, Err(ref e) if e.kind() == crate::ErrorKind::NotFound));
}
