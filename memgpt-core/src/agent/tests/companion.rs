//! Memory consolidation: a companion that reads its primary's conversation and keeps their
//! shared blocks current, recorded like any step, with a cursor that moves with its commits.

use super::*;
use crate::consolidation::Consolidation;
use crate::llm::LlmError;

async fn pair(
    storage: &Storage,
    llm: &Arc<ScriptedProvider>,
    companion_llm: &Arc<ScriptedProvider>,
) -> (Agent, Agent) {
    let mut evie = Agent::builder()
        .provider(llm.clone())
        .storage(storage.clone())
        .name("evie")
        .build()
        .await
        .unwrap();
    let companion = evie
        .add_companion(
            Agent::builder().provider(companion_llm.clone()),
            2,
            None,
            None,
        )
        .await
        .unwrap();
    (evie, companion)
}

#[tokio::test]
async fn a_fact_said_to_the_primary_reaches_its_memory_through_the_companion() {
    let storage = Storage::in_memory();
    let (llm, companion_llm) = (llm(), llm());
    let (mut evie, mut companion) = pair(&storage, &llm, &companion_llm).await;
    // Both hold the same blocks, shared; the relation is on both.
    assert!(evie.memory().blocks().iter().all(|b| b.shared().is_some()));
    assert_eq!(companion.memory().shared_ids(), evie.memory().shared_ids());
    let relation = Consolidation::of(evie.id(), evie.config()).unwrap();
    assert_eq!(
        (relation.companion, relation.every_steps),
        (companion.id(), 2)
    );
    assert_eq!(
        Consolidation::of(companion.id(), companion.config()),
        Some(relation)
    );

    // Evie hears a fact and does not write it down herself.
    llm.push_call("send_message", json!({"message": "How nice!"}));
    evie.step(Event::user("My sister Ada moved to Lisbon."))
        .await
        .unwrap();

    // The companion reads it and writes it to the shared `human` block.
    companion_llm.push_call(
        "core_memory_append",
        json!({"label": "human", "content": "Sister: Ada, lives in Lisbon.", "request_heartbeat": true}),
    );
    companion_llm.push_call("memory_finish_edits", json!({}));
    let record = companion.consolidate().await.unwrap().unwrap();
    assert_eq!(record.event, "consolidation");
    assert_eq!(record.stop_reason, StopReason::EndTurn);
    let transcript = &record.messages[0].text;
    assert!(
        transcript.contains("user: My sister Ada moved to Lisbon."),
        "{transcript}"
    );
    assert!(transcript.contains("evie: How nice!"), "{transcript}");
    assert_eq!(
        record
            .function_calls
            .iter()
            .map(|c| (c.name.as_str(), c.ok))
            .collect::<Vec<_>>(),
        [("core_memory_append", true), ("memory_finish_edits", true)]
    );
    // Nothing new since: no run. The cursor was committed with the step.
    assert!(companion.consolidate().await.unwrap().is_none());
    let stored = storage
        .agents
        .load_agent(companion.id())
        .await
        .unwrap()
        .unwrap();
    assert!(stored.consolidated_until.is_some());

    // Evie's next step starts from the consolidated block and answers from it.
    llm.push_call("send_message", json!({"message": "Ada lives in Lisbon."}));
    let step = evie
        .step(Event::user("Where does my sister live?"))
        .await
        .unwrap();
    assert_eq!(step.shared_blocks_changed, ["human"]);
    let prompt = llm.agent_requests().last().unwrap().messages[0]
        .content
        .clone();
    assert!(prompt.contains("Sister: Ada, lives in Lisbon."), "{prompt}");
    assert_eq!(step.reply(), "Ada lives in Lisbon.");
}

#[tokio::test]
async fn a_failed_consolidation_is_read_again_and_the_next_sees_other_writers() {
    let storage = Storage::in_memory();
    let (llm, companion_llm) = (llm(), llm());
    let (mut evie, mut companion) = pair(&storage, &llm, &companion_llm).await;
    llm.push_call("send_message", json!({"message": "Noted."}));
    evie.step(Event::user("I switched to decaf."))
        .await
        .unwrap();

    // The model fails: the step is recorded, the messages wait for the next run.
    companion_llm.push_error(LlmError::Permanent {
        status: Some(500),
        message: "down".into(),
    });
    let failed = companion.consolidate().await.unwrap().unwrap();
    assert!(matches!(
        failed.stop_reason,
        StopReason::ProviderError { .. }
    ));
    let pending = companion.pending_consolidation().await.unwrap().unwrap();
    assert!(pending.text.contains("I switched to decaf."));

    // Meanwhile Evie herself edits `human`: the companion's next run starts from that text
    // (its step record says so) and its rewrite keeps Evie's line.
    evie.edit_block("human", |b| b.append("Name: Sam"))
        .await
        .unwrap();
    companion_llm.push_call(
        "memory_rethink",
        json!({"target_block_label": "human", "new_memory": "Name: Sam\nDrinks decaf.", "request_heartbeat": true}),
    );
    companion_llm.push_call("memory_finish_edits", json!({}));
    let record = companion.consolidate().await.unwrap().unwrap();
    assert_eq!(record.shared_blocks_changed, ["human"]);
    let prompt = companion_llm.agent_requests().last().unwrap().messages[0]
        .content
        .clone();
    assert!(prompt.contains("Name: Sam"), "{prompt}");
    assert!(
        record.function_calls[0].ok,
        "{}",
        record.function_calls[0].output
    );
    assert_eq!(
        evie.refresh_shared_blocks().await.unwrap(),
        vec!["human".to_owned()]
    );
    assert_eq!(
        evie.memory().get("human").unwrap().value(),
        "Name: Sam\nDrinks decaf."
    );
    assert!(companion.consolidate().await.unwrap().is_none());
    // An agent without a companion cannot consolidate, nor have two.
    assert!(evie.consolidate().await.is_err());
    assert!(
        evie.add_companion(Agent::builder().provider(llm.clone()), 1, None, None)
            .await
            .is_err()
    );
}

#[tokio::test]
async fn a_pair_travels_in_an_agent_file_as_letta_writes_it() {
    let storage = Storage::in_memory();
    let (llm, companion_llm) = (llm(), llm());
    let (evie, companion) = pair(&storage, &llm, &companion_llm).await;
    let file = crate::agent_file::export(&storage, evie.id())
        .await
        .unwrap();
    assert_eq!(file.agents.len(), 2);
    let group = &file.groups[0];
    assert_eq!(group["manager_config"]["manager_type"], "sleeptime");
    assert_eq!(group["manager_config"]["sleeptime_agent_frequency"], 2);
    // The blocks both hold are written once and listed as shared.
    assert_eq!(file.blocks.len(), 2);
    assert_eq!(group["shared_block_ids"].as_array().unwrap().len(), 2);

    let other = Storage::in_memory();
    let report = crate::agent_file::import(&other, &file, Default::default())
        .await
        .unwrap();
    let primary = other.agents.load_agent(report.id).await.unwrap().unwrap();
    let relation = Consolidation::of(primary.id, &primary.config).unwrap();
    assert_eq!(relation.every_steps, 2);
    assert_eq!(relation.companion, report.related[0].id);
    let copy = other
        .agents
        .load_agent(relation.companion)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(copy.memory.shared_ids(), primary.memory.shared_ids());
    assert_eq!(copy.name, companion.name());
    assert_eq!(
        copy.config.functions,
        companion.config().functions,
        "the companion keeps its functions"
    );
}

/// A companion that answers in text instead of calling functions has not consolidated: the
/// same messages wait for its next run (a quiet skip would lose them for good).
#[tokio::test]
async fn a_consolidation_answered_in_text_is_read_again() {
    let storage = Storage::in_memory();
    let (llm, companion_llm) = (llm(), llm());
    let (mut evie, mut companion) = pair(&storage, &llm, &companion_llm).await;
    llm.push_call("send_message", json!({"message": "Noted."}));
    evie.step(Event::user("My cat is called Miso."))
        .await
        .unwrap();
    companion_llm.push_text("I have read the conversation; nothing to change.");
    let answered = companion.consolidate().await.unwrap().unwrap();
    assert!(answered.function_calls.is_empty());
    let pending = companion.pending_consolidation().await.unwrap();
    assert!(
        pending.is_some_and(|p| p.text.contains("My cat is called Miso.")),
        "the messages were skipped"
    );
    // A run that says it is done moves the cursor.
    companion_llm.push_call("memory_finish_edits", json!({}));
    companion.consolidate().await.unwrap().unwrap();
    assert!(companion.pending_consolidation().await.unwrap().is_none());
}
