//! Shared memory blocks: one block attached to several agents, edited by the model and by
//! people, seen by every holder on its next step.

use super::*;
use crate::memory::{MemoryBlock, MemoryError};
use crate::store::{BlockUpdate, SharedBlock};

async fn shared(storage: &Storage, label: &str, value: &str, limit: usize) -> SharedBlock {
    let block = SharedBlock::new(MemoryBlock::new(label, value).with_limit(limit), Utc::now());
    storage.blocks.create_block(&block).await.unwrap();
    block
}

async fn holder(llm: &Arc<ScriptedProvider>, storage: &Storage, block: &SharedBlock) -> Agent {
    Agent::builder()
        .provider(llm.clone())
        .storage(storage.clone())
        .shared_block(block)
        .build()
        .await
        .unwrap()
}

/// The system message of the latest agent request: what the model was shown.
fn last_system_prompt(llm: &ScriptedProvider) -> String {
    let requests = llm.agent_requests();
    let request = requests.last().unwrap();
    request.messages[0].content.clone()
}

#[tokio::test]
async fn an_edit_by_one_agent_is_in_the_others_next_prompt_and_step_record() {
    let storage = Storage::in_memory();
    let project = shared(&storage, "project", "Launch: May 3", 500).await;
    let (llm_a, llm_b) = (llm(), llm());
    let mut a = holder(&llm_a, &storage, &project).await;
    let mut b = holder(&llm_b, &storage, &project).await;
    assert_eq!(
        storage.blocks.block_agents(project.id).await.unwrap(),
        vec![a.id(), b.id()]
    );

    llm_a.push_call(
        "core_memory_append",
        json!({"label": "project", "content": "Launch moved to May 10.", "request_heartbeat": false}),
    );
    let record = a
        .step(Event::user("the launch moved to May 10"))
        .await
        .unwrap();
    assert!(
        record.function_calls[0].ok,
        "{}",
        record.function_calls[0].output
    );
    assert!(record.shared_blocks_changed.is_empty());

    llm_b.push_call("send_message", json!({"message": "ok"}));
    let record = b.step(Event::user("when is the launch?")).await.unwrap();
    assert_eq!(record.shared_blocks_changed, vec!["project".to_owned()]);
    assert!(
        last_system_prompt(&llm_b).contains("Launch: May 3\nLaunch moved to May 10."),
        "{}",
        last_system_prompt(&llm_b)
    );
    assert_eq!(
        b.memory().get("project").unwrap().value(),
        "Launch: May 3\nLaunch moved to May 10."
    );

    // Nothing changed since: the next step says so, and a reloaded agent holds the text too.
    llm_b.push_call("send_message", json!({"message": "ok"}));
    let record = b.step(Event::user("and now?")).await.unwrap();
    assert!(record.shared_blocks_changed.is_empty());
    let reloaded = Agent::builder()
        .provider(llm_b.clone())
        .storage(storage.clone())
        .load(b.id())
        .await
        .unwrap();
    assert_eq!(reloaded.memory(), b.memory());
}

#[tokio::test]
async fn limits_and_read_only_hold_for_every_writer() {
    let storage = Storage::in_memory();
    let project = shared(&storage, "project", "12345", 10).await;
    let llm = llm();
    let mut a = holder(&llm, &storage, &project).await;

    // The model: over the limit, refused with the reason, nothing stored.
    llm.push_calls(
        "",
        &[(
            "core_memory_append",
            json!({"label": "project", "content": "678910", "request_heartbeat": false}),
        )],
    );
    llm.push_call("send_message", json!({"message": "ok"}));
    let record = a.step(Event::user("x")).await.unwrap();
    let call = &record.function_calls[0];
    assert!(!call.ok);
    assert!(call.output.contains("limit is 10"), "{}", call.output);
    // A person through the agent's API: the same limit.
    let err = a
        .edit_block("project", |b| b.append("678910"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Memory(MemoryError::OverLimit { .. })),
        "{err}"
    );
    // Read-only: refused for the model and for the API alike.
    storage
        .blocks
        .update_block(
            project.id,
            &BlockUpdate::new(
                &|b: &mut MemoryBlock| {
                    b.set_read_only(true);
                    Ok(())
                },
                Utc::now(),
            ),
        )
        .await
        .unwrap();
    llm.push_calls(
        "",
        &[(
            "core_memory_replace",
            json!({"label": "project", "old_content": "123", "new_content": "9", "request_heartbeat": false}),
        )],
    );
    llm.push_call("send_message", json!({"message": "ok"}));
    let record = a.step(Event::user("y")).await.unwrap();
    assert!(record.function_calls[0].output.contains("read-only"));
    assert!(a.edit_block("project", |b| b.append("x")).await.is_err());
    let stored = storage.blocks.get_blocks(&[project.id]).await.unwrap();
    assert_eq!(stored[0].block.value(), "12345");
    assert_eq!(stored[0].version, 2, "only the read-only switch was stored");
}

#[tokio::test]
async fn concurrent_edits_from_many_agents_are_all_kept() {
    let storage = Storage::in_memory();
    let log = shared(&storage, "log", "", 5_000).await;
    let llm = llm();
    let mut tasks = Vec::new();
    for writer in 0..8 {
        let mut agent = holder(&llm, &storage, &log).await;
        tasks.push(tokio::spawn(async move {
            for i in 0..25 {
                agent
                    .edit_block("log", |b| b.append(&format!("w{writer}-{i}")))
                    .await
                    .unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let stored = storage
        .blocks
        .get_blocks(&[log.id])
        .await
        .unwrap()
        .remove(0);
    assert_eq!(stored.version, 1 + 8 * 25);
    let lines: std::collections::HashSet<&str> = stored.block.value().lines().collect();
    assert_eq!(lines.len(), 8 * 25, "no edit lost");
}

#[tokio::test]
async fn a_rewrite_based_on_an_old_copy_is_refused_with_the_current_text() {
    let storage = Storage::in_memory();
    let notes = shared(&storage, "notes", "v1", 500).await;
    let llm = llm();
    let mut a = Agent::builder()
        .provider(llm.clone())
        .storage(storage.clone())
        .shared_block(&notes)
        .functions(["send_message", "memory_rethink", "memory_finish_edits"])
        .build()
        .await
        .unwrap();
    let mut b = holder(&llm, &storage, &notes).await;
    b.edit_block("notes", |x| x.append("from b")).await.unwrap();
    // A's copy is still "v1": rewriting what it read would erase B's line.
    let rethink =
        json!({"target_block_label": "notes", "new_memory": "v2", "request_heartbeat": false});
    let record = a.call("memory_rethink", rethink.clone()).await.unwrap();
    assert!(!record.ok);
    assert!(
        record.output.contains("changed by another writer"),
        "{}",
        record.output
    );
    assert!(record.output.contains("v1\nfrom b"), "{}", record.output);
    // Once it has seen the current text, the rewrite applies.
    assert_eq!(
        a.refresh_shared_blocks().await.unwrap(),
        vec!["notes".to_owned()]
    );
    let record = a.call("memory_rethink", rethink).await.unwrap();
    assert!(record.ok, "{}", record.output);
    let stored = storage
        .blocks
        .get_blocks(&[notes.id])
        .await
        .unwrap()
        .remove(0);
    assert_eq!(
        (stored.block.value(), stored.updated_by),
        ("v2", Some(a.id()))
    );
    assert_eq!(a.memory().get("notes").unwrap().value(), "v2");
}

#[tokio::test]
async fn attach_detach_and_delete_keep_the_store_exact() {
    let storage = Storage::in_memory();
    let team = shared(&storage, "team", "Ada, Grace", 500).await;
    let llm = llm();
    let mut a = agent_on(&llm, &storage).await;
    // Unknown blocks and duplicate labels are refused, the agent unchanged.
    let version = a.version();
    assert!(matches!(
        a.attach_block(crate::ids::BlockId::new()).await,
        Err(Error::Store(StoreError::BlockNotFound(_)))
    ));
    a.attach_block(team.id).await.unwrap();
    assert!(matches!(
        a.attach_block(team.id).await,
        Err(Error::Memory(MemoryError::DuplicateLabel { .. }))
    ));
    assert_eq!(a.version(), version + 1);
    // The model cannot edit the copy behind the store's back.
    assert!(matches!(
        a.update_memory(|m| m.append("team", "Linus")).await,
        Err(Error::Memory(MemoryError::Shared { .. }))
    ));
    // Deleting a held block is refused; after detaching it is allowed.
    assert!(matches!(
        storage.blocks.delete_block(team.id).await,
        Err(StoreError::BlockInUse { .. })
    ));
    let detached = a.detach_block("team").await.unwrap();
    assert_eq!(detached.value(), "Ada, Grace");
    assert!(a.memory().get("team").is_none());
    assert!(
        storage
            .blocks
            .block_agents(team.id)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(storage.blocks.delete_block(team.id).await.unwrap());
}

async fn agent_on(llm: &Arc<ScriptedProvider>, storage: &Storage) -> Agent {
    Agent::builder()
        .provider(llm.clone())
        .storage(storage.clone())
        .build()
        .await
        .unwrap()
}
