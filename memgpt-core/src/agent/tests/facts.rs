//! Facts that change: archival passages updated, forgotten and expiring, through the functions
//! the model calls and the agent's own API, within a step and across steps.

use super::*;
use crate::config::FACT_FUNCTIONS;
use crate::ids::PassageId;
use crate::store::{SearchMode, TimeRange, Validity};

/// An agent offering the fact functions, on a manual clock, with an embedder.
async fn fact_agent(llm: &Arc<ScriptedProvider>, clock: &Arc<ManualClock>) -> Agent {
    let mut config = AgentConfig::default();
    config
        .functions
        .extend(FACT_FUNCTIONS.iter().map(|f| (*f).to_owned()));
    config.archival_ttl_days.insert("plans".into(), 7);
    Agent::builder()
        .provider(llm.clone())
        .embedder(Arc::new(HashingEmbedder::new(64)))
        .clock(clock.clone())
        .config(config)
        .build()
        .await
        .unwrap()
}

fn start() -> chrono::DateTime<Utc> {
    Utc.with_ymd_and_hms(2025, 3, 1, 9, 0, 0).unwrap()
}

/// The passage ids a search output shows, in order.
fn shown_ids(output: &str) -> Vec<PassageId> {
    output
        .split("(id ")
        .skip(1)
        .filter_map(|rest| rest.split(')').next()?.parse().ok())
        .collect()
}

async fn call(agent: &mut Agent, function: &str, arguments: serde_json::Value) -> String {
    let record = agent.call(function, arguments).await.unwrap();
    assert!(record.ok, "{function}: {}", record.output);
    record.output
}

#[tokio::test]
async fn an_updated_fact_replaces_the_old_one_which_stays_as_history() {
    let (llm, clock) = (llm(), Arc::new(ManualClock::new(start())));
    let mut agent = fact_agent(&llm, &clock).await;
    call(
        &mut agent,
        "archival_memory_insert",
        json!({"content": "The user lives in Berlin.", "request_heartbeat": false}),
    )
    .await;
    clock.advance(Duration::days(30));
    let found = call(
        &mut agent,
        "archival_memory_search",
        json!({"query": "where does the user live", "request_heartbeat": false}),
    )
    .await;
    let berlin = shown_ids(&found)[0];
    let out = call(
        &mut agent,
        "archival_memory_update",
        json!({"id": berlin.to_string(), "content": "The user lives in Paris.", "request_heartbeat": false}),
    )
    .await;
    assert!(
        out.starts_with(&format!("Passage {berlin} is superseded by passage ")),
        "{out}"
    );

    // Now: Paris only. As of before the move: Berlin only.
    let now = call(
        &mut agent,
        "archival_memory_search",
        json!({"query": "where does the user live", "request_heartbeat": false}),
    )
    .await;
    assert!(now.contains("Paris") && !now.contains("Berlin"), "{now}");
    let before = call(
        &mut agent,
        "archival_memory_search_as_of",
        json!({"query": "where does the user live", "as_of": "2025-03-15", "request_heartbeat": false}),
    )
    .await;
    assert!(
        before.contains("Berlin") && !before.contains("Paris"),
        "{before}"
    );
    assert!(before.contains("[superseded 2025-03-31"), "{before}");

    // The old version is kept, retired, and cannot be updated again.
    let stored = agent
        .storage()
        .archival
        .get_passages(agent.id(), &[berlin])
        .await
        .unwrap();
    let paris = shown_ids(&now)[0];
    assert_eq!(stored[0].superseded_by, Some(paris));
    assert_eq!(stored[0].valid_to, Some(start() + Duration::days(30)));
    let again = agent
        .call(
            "archival_memory_update",
            json!({"id": berlin.to_string(), "content": "Rome", "request_heartbeat": false}),
        )
        .await
        .unwrap();
    assert!(!again.ok);
    assert!(
        again.output.contains("superseded by passage"),
        "{}",
        again.output
    );
    assert_eq!(
        agent
            .storage()
            .archival
            .count_passages(agent.id())
            .await
            .unwrap(),
        2
    );
}

#[tokio::test]
async fn a_step_sees_its_own_updates_and_forgets_before_they_commit() {
    let (llm, clock) = (llm(), Arc::new(ManualClock::new(start())));
    let mut agent = fact_agent(&llm, &clock).await;
    let coffee = agent
        .insert_archival("The user drinks coffee every morning.", Default::default())
        .await
        .unwrap()[0];
    let tea = agent
        .insert_archival("The user likes green tea.", Default::default())
        .await
        .unwrap()[0];
    clock.advance(Duration::days(1));
    // One step forgets the coffee, updates the tea and searches: the search sees both changes,
    // with the totals the committed store gives.
    llm.push_calls(
        "tidying",
        &[
            (
                "archival_memory_forget",
                json!({"id": coffee.to_string(), "reason": "quit coffee", "request_heartbeat": true}),
            ),
            (
                "archival_memory_update",
                json!({"id": tea.to_string(), "content": "The user likes black tea now.", "request_heartbeat": true}),
            ),
            (
                "archival_memory_search",
                json!({"query": "user morning coffee tea", "request_heartbeat": true}),
            ),
        ],
    );
    llm.push_call("send_message", json!({"message": "done"}));
    let record = agent
        .step("I quit coffee, and I prefer black tea.")
        .await
        .unwrap();
    let search = &record.function_calls[2].output;
    assert!(
        search.contains("black tea")
            && !search.contains("coffee every")
            && !search.contains("green"),
        "{search}"
    );
    assert!(search.starts_with("Showing results 1-1 of 1"), "{search}");
    // The same search after the commit gives the same page.
    let after = call(
        &mut agent,
        "archival_memory_search",
        json!({"query": "user morning coffee tea", "request_heartbeat": false}),
    )
    .await;
    assert_eq!(&after, search);
    let gone = agent
        .storage()
        .archival
        .get_passages(agent.id(), &[coffee])
        .await
        .unwrap();
    assert_eq!(gone[0].retired_reason.as_deref(), Some("quit coffee"));
    assert_eq!(gone[0].superseded_by, None);
    // Forgetting twice is refused.
    let twice = agent
        .call(
            "archival_memory_forget",
            json!({"id": coffee.to_string(), "reason": "again", "request_heartbeat": false}),
        )
        .await
        .unwrap();
    assert!(
        !twice.ok && twice.output.contains("forgotten: quit coffee"),
        "{}",
        twice.output
    );
    let unknown = agent
        .call(
            "archival_memory_forget",
            json!({"id": "not-an-id", "reason": "x", "request_heartbeat": false}),
        )
        .await
        .unwrap();
    assert!(!unknown.ok && unknown.output.contains("is not a passage id"));
}

/// How many passages a text search for "dinner" finds.
async fn dinner(agent: &Agent, validity: Validity) -> usize {
    agent
        .search_archival(
            "dinner",
            Some(SearchMode::Text),
            Page::first(10),
            &[],
            TimeRange::default(),
            validity,
        )
        .await
        .unwrap()
        .total
}

#[tokio::test]
async fn facts_expire_by_tag_or_by_their_own_time_to_live() {
    let (llm, clock) = (llm(), Arc::new(ManualClock::new(start())));
    let mut agent = fact_agent(&llm, &clock).await;
    call(
        &mut agent,
        "archival_memory_insert",
        json!({"content": "Dinner plans with Ana on Friday.", "tags": ["plans"], "request_heartbeat": false}),
    )
    .await;
    let stored = call(
        &mut agent,
        "archival_memory_insert",
        json!({"content": "Dinner discount code WINTER until Sunday.", "request_heartbeat": false}),
    )
    .await;
    // The model gives it a time to live: forgotten in three days.
    let code = stored
        .trim_start_matches("Stored as passage ")
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let out = call(
        &mut agent,
        "archival_memory_forget",
        json!({"id": code, "reason": "the code ends on Sunday", "after_days": 3, "request_heartbeat": false}),
    )
    .await;
    assert!(out.ends_with("in 3 days."), "{out}");
    call(
        &mut agent,
        "archival_memory_insert",
        json!({"content": "Dinner is usually at seven.", "request_heartbeat": false}),
    )
    .await;
    assert_eq!(dinner(&agent, Validity::Current).await, 3);
    clock.advance(Duration::days(4));
    assert_eq!(
        dinner(&agent, Validity::Current).await,
        2,
        "the code expired after three days"
    );
    clock.advance(Duration::days(4));
    assert_eq!(
        dinner(&agent, Validity::Current).await,
        1,
        "the plans expired after a week"
    );
    assert_eq!(
        dinner(&agent, Validity::AsOf(start() + Duration::days(1))).await,
        3
    );
    assert_eq!(dinner(&agent, Validity::Any).await, 3);
}

#[tokio::test]
async fn the_agent_api_updates_and_forgets_with_typed_errors() {
    let (llm, clock) = (llm(), Arc::new(ManualClock::new(start())));
    let mut agent = fact_agent(&llm, &clock).await;
    let mut metadata = serde_json::Map::new();
    metadata.insert("tags".into(), json!(["home"]));
    let old = agent
        .insert_archival("The user lives in Berlin.", metadata)
        .await
        .unwrap()[0];
    clock.advance(Duration::days(2));
    let version = agent.version();
    let new = agent
        .update_archival(old, "The user lives in Paris.")
        .await
        .unwrap();
    assert_eq!(agent.version(), version + 1, "one commit");
    let stored = agent
        .storage()
        .archival
        .get_passages(agent.id(), &[old, new[0]])
        .await
        .unwrap();
    assert_eq!(stored[1].tags(), ["home"], "the tags carry over");
    assert_eq!(stored[1].valid_from, Some(start() + Duration::days(2)));
    assert_eq!(stored[0].superseded_by, Some(new[0]));
    assert!(matches!(
        agent.update_archival(old, "Rome").await,
        Err(Error::PassageRetired { id, .. }) if id == old
    ));
    let stranger = PassageId::new();
    let missing = agent.forget_archival(stranger, "no").await.unwrap_err();
    assert_eq!(missing.kind(), crate::ErrorKind::NotFound);
    agent.forget_archival(new[0], "moved away").await.unwrap();
    let now = agent
        .search_archival(
            "user lives",
            None,
            Page::first(5),
            &[],
            TimeRange::default(),
            Validity::Current,
        )
        .await
        .unwrap();
    assert_eq!(now.total, 0);
    assert_eq!(agent.version(), version + 2);
}

#[tokio::test]
async fn an_agent_file_carries_the_history_of_a_fact() {
    let (llm, clock) = (llm(), Arc::new(ManualClock::new(start())));
    let storage = crate::store::Storage::in_memory();
    let mut config = AgentConfig::default();
    config.archival_ttl_days.insert("plans".into(), 7);
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .clock(clock.clone())
        .storage(storage.clone())
        .config(config)
        .build()
        .await
        .unwrap();
    let old = agent
        .insert_archival("The user lives in Berlin.", Default::default())
        .await
        .unwrap()[0];
    clock.advance(Duration::days(3));
    let new = agent
        .update_archival(old, "The user lives in Paris.")
        .await
        .unwrap()[0];

    let file = crate::agent_file::export(&storage, agent.id())
        .await
        .unwrap();
    let json = serde_json::to_string(&file).unwrap();
    let elsewhere = crate::store::Storage::in_memory();
    let report = crate::agent_file::import(
        &elsewhere,
        &crate::agent_file::parse(&json).unwrap(),
        Default::default(),
    )
    .await
    .unwrap();
    let imported = elsewhere
        .archival
        .list_passages(report.id, Page::first(10))
        .await
        .unwrap();
    let (berlin, paris) = (&imported.hits[0].item, &imported.hits[1].item);
    assert_ne!(paris.id, new, "imported passages get new ids");
    assert_eq!(
        berlin.superseded_by,
        Some(paris.id),
        "the link follows the new ids"
    );
    assert_eq!(berlin.valid_to, Some(start() + Duration::days(3)));
    assert_eq!(berlin.retired_reason.as_deref(), Some("superseded"));
    assert_eq!(paris.valid_from, Some(start() + Duration::days(3)));
    assert_eq!(report.passages, 2);
    let state = elsewhere
        .agents
        .load_agent(report.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(state.config.archival_ttl_days.get("plans"), Some(&7));
}
