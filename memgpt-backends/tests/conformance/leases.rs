//! Cross-process agent leases (`AgentStore::lock_agent`) of stores that really lock
//! (PostgreSQL): exclusive per agent, across pools, and freed by a lease dropped unreleased.

use std::time::Duration;

use memgpt_core::store::Storage;
use tokio::time::timeout;

use memgpt_backends::conformance::StoreUnderTest;
use memgpt_backends::conformance::fixtures::*;

/// Long enough for a granted lock to be noticed, short enough to keep the test quick.
const WAIT: Duration = Duration::from_millis(300);
/// How long a lock that should come free may take.
const FREED: Duration = Duration::from_secs(10);

pub async fn leases_are_exclusive_and_freed_on_drop(backend: &StoreUnderTest) {
    let s = backend.open().await;
    // A second handle with its own pool, as another process would have.
    let other: Storage = backend.open().await;
    let a = new_agent(&s, "a").await;
    let b = new_agent(&s, "b").await;

    let held = s.agents.lock_agent(a.id).await.expect("lock a");
    assert!(
        timeout(WAIT, other.agents.lock_agent(a.id)).await.is_err(),
        "{}: a second lease on the same agent waits",
        backend.name()
    );
    // That cancelled wait left nothing behind: another agent locks at once, from either handle.
    let lease_b = timeout(FREED, other.agents.lock_agent(b.id))
        .await
        .expect("another agent is not blocked")
        .expect("lock b");
    lease_b.release().await.expect("release b");

    // A waiter gets the lease as soon as it is released, not before.
    let waiter = tokio::spawn({
        let other = other.clone();
        async move { other.agents.lock_agent(a.id).await }
    });
    tokio::time::sleep(WAIT).await;
    assert!(
        !waiter.is_finished(),
        "{}: the waiter waits",
        backend.name()
    );
    held.release().await.expect("release a");
    let second = timeout(FREED, waiter)
        .await
        .expect("the waiter gets the lease once it is released")
        .expect("waiter task")
        .expect("lock a again");

    // A lease dropped without release (a cancelled step) frees the lock too.
    drop(second);
    let third = timeout(FREED, s.agents.lock_agent(a.id))
        .await
        .expect("a dropped lease frees the lock")
        .expect("lock a a third time");
    third.release().await.expect("release");

    // Every lease is gone: the lock is free for the first handle and for the second.
    for storage in [&s, &other] {
        let lease = timeout(FREED, storage.agents.lock_agent(a.id))
            .await
            .expect("free")
            .expect("lock");
        lease.release().await.expect("release");
    }
}

/// Steps hold their leases while they commit: with more leases held than the store has query
/// connections, commits still go through (leases have their own connections).
pub async fn leases_do_not_starve_commits(backend: &StoreUnderTest) {
    let url = backend.url().expect("a store URL");
    let mut options = memgpt_backends::PgOptions::new(url);
    options.max_connections = 1;
    options.max_leases = 4;
    let store = std::sync::Arc::new(memgpt_backends::PgStore::open(options).await.expect("open"));
    let s = Storage::from_store(store);
    let mut agents = Vec::new();
    for n in 0..3 {
        agents.push(new_agent(&s, &format!("agent {n}")).await);
    }
    let mut leases = Vec::new();
    for a in &agents {
        leases.push(s.agents.lock_agent(a.id).await.expect("lock"));
    }
    for a in &mut agents {
        let m = user(a.id, "committed under a lease", t0());
        let p = passage(a.id, "a passage too", t0());
        let c = a.next_commit(vec![m], vec![p]);
        timeout(FREED, s.agents.commit(&c))
            .await
            .expect("a commit does not wait for lease connections")
            .expect("commit");
    }
    for lease in leases {
        lease.release().await.expect("release");
    }
}
