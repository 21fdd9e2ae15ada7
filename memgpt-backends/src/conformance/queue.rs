//! The FIFO queue as stores keep it: commits that change it by a [`QueueChange`] (what a step
//! evicted and queued) and commits that rewrite it whole read back exactly.

use memgpt_core::store::{AgentState, Commit, QueueChange, StoreError};

use super::StoreUnderTest;
use super::fixtures::*;

/// The next commit of `state` with its queue set to `fifo`, changed by `QueueChange::between`
/// (`whole`: without a change, so the store rewrites the queue).
fn requeue(state: &mut AgentState, fifo: Vec<memgpt_core::ids::MessageId>, whole: bool) -> Commit {
    state.version += 1;
    let queue = if whole {
        None
    } else {
        QueueChange::between(&state.fifo, &fifo)
    };
    state.fifo = fifo;
    Commit {
        queue,
        ..Commit::state(state.clone())
    }
}

/// Appends, evictions from the front and the middle, a message moved to the end, whole
/// rewrites (an import's, a custom store's commit) and changes after them all read back as
/// committed, through `load_agent`, `list_agents` and a second handle; a refused commit leaves
/// the queue as it was; deleting the agent deletes its queue.
pub async fn queues_change_by_what_a_step_changed(backend: &StoreUnderTest) {
    let name = backend.name();
    let s = backend.open().await;
    let mut a = new_agent(&s, "queued").await;
    let other = new_agent(&s, "other").await;
    let loaded = |s: memgpt_core::store::Storage, id| async move {
        s.agents.load_agent(id).await.unwrap().unwrap()
    };

    // Three steps, each appending its messages.
    for step in 0..3 {
        let commit = a.next_commit(corpus(a.id, 4, 2), vec![]);
        assert!(commit.queue.is_some(), "{name}: step {step}");
        s.agents.commit(&commit).await.unwrap();
        assert_eq!(
            loaded(s.clone(), a.id).await,
            a,
            "{name}: after step {step}"
        );
    }
    let fifo = a.fifo.clone();
    assert_eq!(fifo.len(), 12);

    // A flush: the oldest five and one in the middle leave, two new ones come.
    let mut evicted: Vec<_> = fifo[5..].to_vec();
    evicted.remove(3);
    let new = corpus(a.id, 2, 1);
    evicted.extend(new.iter().map(|m| m.id));
    let mut commit = requeue(&mut a, evicted, false);
    commit.messages = new;
    let change = commit.queue.clone().unwrap();
    assert_eq!((change.removed.len(), change.appended.len()), (6, 2));
    s.agents.commit(&commit).await.unwrap();
    assert_eq!(loaded(s.clone(), a.id).await, a, "{name}: after a flush");

    // An entry moved to the end (removed and appended again).
    let mut moved = a.fifo.clone();
    let first = moved.remove(0);
    moved.push(first);
    s.agents
        .commit(&requeue(&mut a, moved, false))
        .await
        .unwrap();
    assert_eq!(loaded(s.clone(), a.id).await, a, "{name}: after a move");

    // A whole rewrite, then a change on top of it.
    let mut rewritten: Vec<_> = a.fifo.iter().rev().copied().collect();
    rewritten.truncate(5);
    s.agents
        .commit(&requeue(&mut a, rewritten, true))
        .await
        .unwrap();
    assert_eq!(loaded(s.clone(), a.id).await, a, "{name}: after a rewrite");
    let commit = a.next_commit(corpus(a.id, 1, 1), vec![]);
    s.agents.commit(&commit).await.unwrap();
    assert_eq!(
        loaded(s.clone(), a.id).await,
        a,
        "{name}: after a rewrite and a step"
    );

    // A refused commit (a stale version) changes nothing; nor does one with a NUL.
    let mut stale = a.clone();
    stale.version -= 1;
    let refused = requeue(&mut stale, Vec::new(), false);
    assert!(
        matches!(
            s.agents.commit(&refused).await,
            Err(StoreError::Conflict { .. })
        ),
        "{name}"
    );
    let mut nul = a.clone();
    nul.name = "nul\0".into();
    let refused = requeue(&mut nul, Vec::new(), false);
    assert!(s.agents.commit(&refused).await.is_err(), "{name}");
    assert_eq!(loaded(s.clone(), a.id).await, a, "{name}: after refusals");

    // Emptied, and filled again.
    s.agents
        .commit(&requeue(&mut a, Vec::new(), false))
        .await
        .unwrap();
    assert_eq!(loaded(s.clone(), a.id).await, a, "{name}: emptied");
    let commit = a.next_commit(corpus(a.id, 2, 1), vec![]);
    s.agents.commit(&commit).await.unwrap();

    // Every reader sees the same queues.
    let listed = s.agents.list_agents().await.unwrap();
    assert_eq!(listed, [a.clone(), other.clone()], "{name}: listed");
    let s2 = backend.another_handle(&s).await;
    assert_eq!(loaded(s2, a.id).await, a, "{name}: another handle");

    // Deleting the agent deletes its queue; a new agent of the same id starts empty.
    assert!(s.agents.delete_agent(a.id).await.unwrap());
    let again = state(a.id, "again");
    s.agents.create_agent(&again).await.unwrap();
    assert_eq!(loaded(s.clone(), a.id).await, again, "{name}: recreated");
    assert_eq!(loaded(s.clone(), other.id).await, other, "{name}: other");
}
