//! Shared memory blocks: stored once, edited in serialised transactions from any handle (two
//! handles on a database are two processes' pools), attached by the agents' commits.

use std::collections::HashSet;

use memgpt_core::MemoryBlock;
use memgpt_core::ids::{AgentId, BlockId};
use memgpt_core::memory::MemoryError;
use memgpt_core::store::{BlockUpdate, SharedBlock, StoreError};

use super::StoreUnderTest;
use super::fixtures::*;

/// Appends `line` to a block, as an agent's `core_memory_append` does.
async fn append(
    storage: &memgpt_core::store::Storage,
    id: BlockId,
    line: String,
    by: AgentId,
) -> Result<SharedBlock, StoreError> {
    let edit = move |b: &mut MemoryBlock| b.append(&line);
    storage
        .blocks
        .update_block(id, &BlockUpdate::new(&edit, t0()).by(by))
        .await
}

/// Blocks read back field for field, listed by scope; 4 writers on two handles append 30
/// lines each at once and every line is kept, with the version counting every edit; refused
/// edits (over the limit, read-only, a rewrite of an older version, NUL) change nothing;
/// attachments follow the agents' commits, a commit holding an unknown block writes nothing,
/// a held block cannot be deleted, and deleting an agent lets go of its blocks.
pub async fn shared_blocks_are_exact(backend: &StoreUnderTest) {
    let name = backend.name();
    let s1 = backend.open().await;
    let s2 = backend.another_handle(&s1).await;
    let log = SharedBlock::new(
        MemoryBlock::new("log", "start")
            .with_limit(10_000)
            .with_description("what happened"),
        t0(),
    )
    .in_scope("tenant-a");
    let other = SharedBlock::new(MemoryBlock::new("org", "Acme"), t0()).in_scope("tenant-b");
    s1.blocks.create_block(&log).await.unwrap();
    s1.blocks.create_block(&other).await.unwrap();
    assert!(
        matches!(
            s2.blocks.create_block(&log).await,
            Err(StoreError::BlockExists(_))
        ),
        "{name}: a taken id"
    );
    assert_eq!(
        s2.blocks
            .get_blocks(&[other.id, BlockId::new(), log.id])
            .await
            .unwrap(),
        vec![other.clone(), log.clone()],
        "{name}: blocks read back in the order asked, unknown ids skipped"
    );
    assert_eq!(
        s2.blocks.list_blocks(Some("tenant-a")).await.unwrap(),
        vec![log.clone()],
        "{name}: listing by scope"
    );
    assert_eq!(
        s2.blocks.list_blocks(None).await.unwrap().len(),
        2,
        "{name}"
    );

    // Concurrent appends through two handles: serialised, none lost.
    let writer = AgentId::new();
    let mut tasks = Vec::new();
    for w in 0..4 {
        let storage = if w % 2 == 0 { s1.clone() } else { s2.clone() };
        tasks.push(tokio::spawn(async move {
            for i in 0..30 {
                append(&storage, log.id, format!("w{w}-{i}"), writer)
                    .await
                    .unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let stored = s1.blocks.get_blocks(&[log.id]).await.unwrap().remove(0);
    assert_eq!(stored.version, 1 + 4 * 30, "{name}: one version per edit");
    let lines: HashSet<&str> = stored.block.value().lines().collect();
    assert_eq!(lines.len(), 1 + 4 * 30, "{name}: an edit was lost");
    assert_eq!(stored.updated_by, Some(writer), "{name}");
    assert_eq!(stored.block.description(), Some("what happened"), "{name}");

    // Refused edits change nothing.
    let too_long = "x".repeat(10_000);
    let over = append(&s2, log.id, too_long, writer).await;
    assert!(
        matches!(
            over,
            Err(StoreError::BlockRefused(MemoryError::OverLimit { .. }))
        ),
        "{name}: {over:?}"
    );
    let rewrite = |b: &mut MemoryBlock| b.set("rewritten".into());
    let stale = s2
        .blocks
        .update_block(log.id, &BlockUpdate::new(&rewrite, t0()).based_on(5))
        .await;
    assert!(
        matches!(
            stale,
            Err(StoreError::BlockRefused(MemoryError::Changed { .. }))
        ),
        "{name}: a rewrite of version 5: {stale:?}"
    );
    let nul = append(&s2, log.id, "a\0b".into(), writer).await;
    assert!(
        matches!(nul, Err(StoreError::NulCharacter(_))),
        "{name}: {nul:?}"
    );
    let freeze = |b: &mut MemoryBlock| {
        b.set_read_only(true);
        Ok(())
    };
    s2.blocks
        .update_block(other.id, &BlockUpdate::new(&freeze, t0()))
        .await
        .unwrap();
    let frozen = append(&s1, other.id, "more".into(), writer).await;
    assert!(
        matches!(
            frozen,
            Err(StoreError::BlockRefused(MemoryError::ReadOnly { .. }))
        ),
        "{name}: {frozen:?}"
    );
    assert_eq!(
        s1.blocks.get_blocks(&[log.id]).await.unwrap()[0],
        stored,
        "{name}: refused edits changed the block"
    );
    let current = s1.blocks.get_blocks(&[log.id]).await.unwrap().remove(0);
    let rewritten = s2
        .blocks
        .update_block(
            log.id,
            &BlockUpdate::new(&rewrite, t0()).based_on(current.version),
        )
        .await
        .unwrap();
    assert_eq!(
        (
            rewritten.block.value(),
            rewritten.version,
            rewritten.updated_by
        ),
        ("rewritten", current.version + 1, None),
        "{name}"
    );

    // Attachments follow the agents' states.
    let mut a = state(AgentId::new(), "a");
    a.memory.add(log.attached()).unwrap();
    s1.agents.create_agent(&a).await.unwrap();
    let mut b = new_agent(&s2, "b").await;
    assert_eq!(
        s1.blocks.block_agents(log.id).await.unwrap(),
        vec![a.id],
        "{name}"
    );
    b.memory.add(log.attached()).unwrap();
    b.memory.add(other.attached()).unwrap();
    let mut attach = b.next_commit(vec![], vec![]);
    attach.attachments_changed = true;
    s2.agents.commit(&attach).await.unwrap();
    assert_eq!(
        s1.blocks.block_agents(log.id).await.unwrap(),
        vec![a.id, b.id],
        "{name}: attachments, oldest agent first"
    );
    let mut ghost = b.clone();
    ghost
        .memory
        .add(SharedBlock::new(MemoryBlock::new("ghost", ""), t0()).attached())
        .unwrap();
    let mut bad = ghost.next_commit(vec![user(b.id, "lost", t0())], vec![]);
    bad.attachments_changed = true;
    let refused = s1.agents.commit(&bad).await;
    assert!(
        matches!(refused, Err(StoreError::BlockNotFound(_))),
        "{name}: attaching an unknown block: {refused:?}"
    );
    assert_eq!(
        s1.agents.agent_version(b.id).await.unwrap(),
        Some(b.version),
        "{name}: the refused commit wrote something"
    );
    let held = s1.blocks.delete_block(other.id).await;
    assert!(
        matches!(&held, Err(StoreError::BlockInUse { agents, .. }) if agents == &vec![b.id]),
        "{name}: {held:?}"
    );
    // Detaching `other` from b, and deleting a, frees both blocks.
    b.memory.remove("org").unwrap();
    let mut detach = b.next_commit(vec![], vec![]);
    detach.attachments_changed = true;
    s1.agents.commit(&detach).await.unwrap();
    assert!(s2.blocks.delete_block(other.id).await.unwrap(), "{name}");
    assert!(
        !s2.blocks.delete_block(other.id).await.unwrap(),
        "{name}: deleted twice"
    );
    assert!(s1.agents.delete_agent(a.id).await.unwrap());
    assert_eq!(
        s2.blocks.block_agents(log.id).await.unwrap(),
        vec![b.id],
        "{name}"
    );
    let stored_b = s2.agents.load_agent(b.id).await.unwrap().unwrap();
    assert_eq!(stored_b.memory.shared_ids(), vec![log.id], "{name}");
}
