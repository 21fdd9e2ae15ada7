//! Search filters by role, tag and date, and extreme pages.

use super::*;

#[tokio::test]
async fn conversation_search_filters_by_role_and_date_and_survives_any_page() {
    let llm = llm();
    let mut agent = agent(&llm).await;
    let t0 = Utc.with_ymd_and_hms(2024, 3, 1, 9, 0, 0).unwrap();
    let mut history = Vec::new();
    for (day, (user, reply)) in [
        ("I planted tomatoes today.", "Tomatoes love sun."),
        ("The tomatoes have flowers.", "Flowers mean fruit soon."),
        ("First red tomato!", "Enjoy your tomato."),
    ]
    .into_iter()
    .enumerate()
    {
        let at = t0 + Duration::days(day as i64);
        history.push(Message::new(agent.id(), MessageKind::User, user, at));
        history.push(Message::new(
            agent.id(),
            MessageKind::Assistant,
            reply,
            at + Duration::minutes(1),
        ));
    }
    agent.import_history(history).await.unwrap();
    let search = |args: serde_json::Value| {
        let mut args = args;
        args["request_heartbeat"] = json!(false);
        args
    };
    let out = agent
        .call("conversation_search", search(json!({"query": "tomato"})))
        .await
        .unwrap();
    assert!(
        out.output
            .starts_with("(ranked by words only (no embedding model"),
        "{}",
        out.output
    );
    let users = agent
        .call(
            "conversation_search",
            search(json!({"query": "tomato", "roles": ["user"]})),
        )
        .await
        .unwrap();
    assert!(users.output.contains("of 3 "), "{}", users.output);
    assert!(!users.output.contains("assistant:"), "{}", users.output);
    let day2 = agent
        .call(
            "conversation_search",
            search(
                json!({"query": "tomato", "start_date": "2024-03-02", "end_date": "2024-03-02"}),
            ),
        )
        .await
        .unwrap();
    assert!(day2.output.contains("of 2 "), "{}", day2.output);
    assert!(day2.output.contains("flowers"), "{}", day2.output);
    let far = agent
        .call(
            "conversation_search",
            search(json!({"query": "tomato", "page": u32::MAX})),
        )
        .await
        .unwrap();
    assert!(
        far.ok && far.output.contains("is past the end"),
        "{}",
        far.output
    );
    let bad = agent
        .call(
            "conversation_search",
            search(json!({"query": "tomato", "roles": ["system"]})),
        )
        .await
        .unwrap();
    assert!(
        !bad.ok && bad.output.contains("`roles[0]`"),
        "{}",
        bad.output
    );
    let bad = agent
        .call(
            "conversation_search",
            search(
                json!({"query": "tomato", "start_date": "2024-03-03", "end_date": "2024-03-01"}),
            ),
        )
        .await
        .unwrap();
    assert!(
        !bad.ok && bad.output.contains("must be before"),
        "{}",
        bad.output
    );
}

#[tokio::test]
async fn archival_memory_filters_by_tag_and_date_and_survives_any_page() {
    let llm = llm();
    let clock = Arc::new(ManualClock::new(
        Utc.with_ymd_and_hms(2024, 6, 1, 9, 0, 0).unwrap(),
    ));
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .clock(clock.clone())
        .build()
        .await
        .unwrap();
    let insert = |content: &str, tags: serde_json::Value| json!({"content": content, "tags": tags, "request_heartbeat": false});
    agent
        .call(
            "archival_memory_insert",
            insert("Sam likes green tea.", json!(["drinks"])),
        )
        .await
        .unwrap();
    clock.advance(Duration::days(10));
    agent
        .call(
            "archival_memory_insert",
            insert("Sam's tea kettle is blue.", json!(["home", " home "])),
        )
        .await
        .unwrap();
    assert_eq!(
        agent
            .storage()
            .archival
            .count_passages(agent.id())
            .await
            .unwrap(),
        2,
        "committed"
    );
    let search = |extra: serde_json::Value| {
        let mut args = json!({"query": "tea", "request_heartbeat": false});
        for (k, v) in extra.as_object().unwrap() {
            args[k] = v.clone();
        }
        args
    };
    let all = agent
        .call("archival_memory_search", search(json!({})))
        .await
        .unwrap();
    assert!(all.output.contains("of 2 "), "{}", all.output);
    assert!(all.output.contains("[tags: home]"), "{}", all.output);
    let home = agent
        .call("archival_memory_search", search(json!({"tags": ["home"]})))
        .await
        .unwrap();
    assert!(
        home.output.contains("of 1 ") && home.output.contains("kettle"),
        "{}",
        home.output
    );
    let june1 = agent
        .call(
            "archival_memory_search",
            search(json!({"start_date": "2024-06-01", "end_date": "2024-06-01"})),
        )
        .await
        .unwrap();
    assert!(
        june1.output.contains("of 1 ") && june1.output.contains("green tea"),
        "{}",
        june1.output
    );
    let far = agent
        .call("archival_memory_search", search(json!({"page": u32::MAX})))
        .await
        .unwrap();
    assert!(
        far.ok && far.output.contains("is past the end"),
        "{}",
        far.output
    );
}
