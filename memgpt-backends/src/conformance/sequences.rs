//! Rows written after others were deleted are found: the sequences users reported, where an
//! index built from the rows took a new row for one it had seen.

use memgpt_core::ids::AgentId;
use memgpt_core::message::MessageKind;
use memgpt_core::store::{ArchivalQuery, Page, RecallQuery, SearchMode, Storage};

use super::StoreUnderTest;
use super::fixtures::*;

/// Whether the agent's archival search by text, vector and hybrid, and its recall search by
/// text, find a passage or message holding `word` (1) or not (0).
async fn found(s: &Storage, agent: AgentId, word: &str) -> [usize; 4] {
    let mut out = [0; 4];
    for (i, mode) in [SearchMode::Text, SearchMode::Vector, SearchMode::Hybrid]
        .into_iter()
        .enumerate()
    {
        let query = ArchivalQuery::new(word, mode, Page::first(10)).with_embedding(embed(word));
        let page = s.archival.search(agent, &query).await.unwrap();
        out[i] = page
            .hits
            .iter()
            .filter(|h| h.item.text.contains(word))
            .count();
    }
    let query = RecallQuery::text(word, Page::first(10));
    let page = s.recall.search(agent, &query).await.unwrap();
    out[3] = page
        .hits
        .iter()
        .filter(|h| h.item.text.contains(word))
        .count();
    out
}

/// The reported sequence, and its variants: a passage and a message of agent A are searched
/// (so every index has applied them), A is deleted, and agent E's new passage and message are
/// found by every search; so is a passage stored after the newest one was deleted. With a
/// persistent store, the same holds after reopening it.
pub async fn rows_after_deletions_are_found(backend: &StoreUnderTest) {
    let name = backend.name();
    let s = backend.open().await;
    let mut a = new_agent(&s, "a").await;
    let mut e = new_agent(&s, "e").await;
    let commit = a.next_commit(
        vec![user(a.id, "alpha note about zebras", t0())],
        vec![passage(a.id, "alpha note about zebras", t0())],
    );
    s.agents.commit(&commit).await.unwrap();
    assert_eq!(found(&s, a.id, "zebras").await, [1, 1, 1, 1], "{name}: A's");
    assert!(s.agents.delete_agent(a.id).await.unwrap());
    let commit = e.next_commit(
        vec![user(e.id, "the quokka lives on Rottnest", t0())],
        vec![passage(e.id, "the quokka lives on Rottnest", t0())],
    );
    s.agents.commit(&commit).await.unwrap();
    assert_eq!(
        found(&s, e.id, "quokka").await,
        [1, 1, 1, 1],
        "{name}: E's passage and message after A was deleted (text, vector, hybrid, recall)"
    );
    assert_eq!(
        found(&s, a.id, "zebras").await,
        [0, 0, 0, 0],
        "{name}: A is gone"
    );

    // The newest passage deleted, then another stored.
    let newest = passage(e.id, "a wombat digs a burrow", t0());
    let commit = e.next_commit(vec![], vec![newest.clone()]);
    s.agents.commit(&commit).await.unwrap();
    assert_eq!(found(&s, e.id, "wombat").await[..3], [1, 1, 1], "{name}");
    let mut deletion = e.next_commit(vec![], vec![]);
    deletion.deleted_passages.push(newest.id);
    s.agents.commit(&deletion).await.unwrap();
    let commit = e.next_commit(vec![], vec![passage(e.id, "a numbat eats termites", t0())]);
    s.agents.commit(&commit).await.unwrap();
    assert_eq!(
        found(&s, e.id, "numbat").await[..3],
        [1, 1, 1],
        "{name}: a passage stored after the newest one was deleted"
    );
    assert_eq!(found(&s, e.id, "wombat").await[..3], [0, 0, 0], "{name}");

    // Once more around a restart: search, delete, reopen, write, search.
    let mut b = new_agent(&s, "b").await;
    let commit = b.next_commit(
        vec![user(b.id, "bilby burrows", t0())],
        vec![passage(b.id, "bilby burrows", t0())],
    );
    s.agents.commit(&commit).await.unwrap();
    assert_eq!(found(&s, b.id, "bilby").await, [1, 1, 1, 1], "{name}");
    assert!(s.agents.delete_agent(b.id).await.unwrap());
    let s = if backend.is_persistent() {
        drop(s);
        backend.open().await
    } else {
        s
    };
    let commit = e.next_commit(
        vec![user(e.id, "a dingo howls", t0())],
        vec![passage(e.id, "a dingo howls", t0())],
    );
    s.agents.commit(&commit).await.unwrap();
    assert_eq!(
        found(&s, e.id, "dingo").await,
        [1, 1, 1, 1],
        "{name}: after a deletion and a restart"
    );
    let everything = RecallQuery::kinds([MessageKind::User], Page::first(100));
    assert_eq!(
        s.recall.search(e.id, &everything).await.unwrap().total,
        2,
        "{name}: E's messages"
    );
}

/// A call dropped at any of its awaits (a client that went away) leaves nothing behind: no
/// transaction open on a pooled connection that the next call's writes would land in, no index
/// half caught up. Each round stores a passage, drops a text and a vector search, a hybrid
/// recall search, a block edit and a commit at their `k`-th pending await (the next search
/// finds the passage), then creates a block and commits a step, and (for a persistent store)
/// reopens: the block and the step are there, and the dropped commit landed whole or not at all.
pub async fn dropped_calls_leave_nothing_open(backend: &StoreUnderTest) {
    use memgpt_core::memory::MemoryBlock;
    use memgpt_core::store::{BlockUpdate, SharedBlock};

    use super::drop_after_waits;

    let name = backend.name();
    let mut s = backend.open().await;
    let mut a = new_agent(&s, "a").await;
    let commit = a.next_commit(
        vec![user(a.id, "the kiwi orchard", t0())],
        vec![passage(a.id, "kiwi orchard notes", t0())],
    );
    s.agents.commit(&commit).await.unwrap();
    let edited = SharedBlock::new(MemoryBlock::new("notes", "kiwi"), t0());
    s.blocks.create_block(&edited).await.unwrap();
    let mut made = Vec::new();
    for k in 0..12u8 {
        // A passage the dropped searches start indexing: the next search finds it.
        let word = format!("round{k}");
        let fresh = a.next_commit(vec![], vec![passage(a.id, &format!("kiwi {word}"), t0())]);
        s.agents.commit(&fresh).await.unwrap();
        let text = ArchivalQuery::new(&word, SearchMode::Text, Page::first(5));
        drop_after_waits(s.archival.search(a.id, &text), k).await;
        let vector = ArchivalQuery::new("kiwi", SearchMode::Vector, Page::first(5))
            .with_embedding(embed("kiwi"));
        drop_after_waits(s.archival.search(a.id, &vector), k).await;
        assert_eq!(
            s.archival.search(a.id, &text).await.unwrap().total,
            1,
            "{name}: round {k}: a passage a dropped search began to index is not found"
        );
        let recall = RecallQuery::text("kiwi", Page::first(5)).with_embedding(embed("kiwi"));
        drop_after_waits(s.recall.search(a.id, &recall), k).await;
        let append = |b: &mut MemoryBlock| b.append("more");
        let update = BlockUpdate::new(&append, t0());
        drop_after_waits(s.blocks.update_block(edited.id, &update), k).await;
        let dropped = a.next_commit(vec![user(a.id, &format!("dropped {k}"), t0())], vec![]);
        drop_after_waits(s.agents.commit(&dropped), k).await;

        // What comes next must be stored for good, even when nothing else follows it on that
        // connection before the store closes.
        let block = SharedBlock::new(MemoryBlock::new(format!("b{k}"), "made"), t0());
        s.blocks.create_block(&block).await.unwrap();
        made.push(block.id);
        if backend.is_persistent() {
            drop(s);
            s = backend.open().await;
        }
        let found = s.blocks.get_blocks(&made).await.unwrap();
        assert_eq!(
            found.len(),
            made.len(),
            "{name}: round {k}: a block created after a dropped call is gone"
        );
        // The dropped commit landed or not: go on from whichever version is stored.
        let stored = s.agents.agent_version(a.id).await.unwrap().unwrap();
        assert!(
            stored + 1 == a.version || stored == a.version,
            "{name}: round {k}: stored version {stored}, the dropped commit was {}",
            a.version
        );
        a = s.agents.load_agent(a.id).await.unwrap().unwrap();
        let kept = a.next_commit(vec![user(a.id, &format!("kept {k}"), t0())], vec![]);
        s.agents.commit(&kept).await.unwrap();
        if backend.is_persistent() {
            drop(s);
            s = backend.open().await;
        }
        assert_eq!(
            s.agents.agent_version(a.id).await.unwrap(),
            Some(a.version),
            "{name}: round {k}: a step committed after a dropped call is gone"
        );
    }
}
