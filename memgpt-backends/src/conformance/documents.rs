//! Search documents continue an agent's conversation whichever handle commits it.

use chrono::Duration;
use memgpt_core::store::{Page, RecallQuery};

use super::StoreUnderTest;
use super::fixtures::*;

/// A store may keep each agent's search-document builder between its own commits (and send
/// a step's commit in one statement on the strength of it); a commit through another handle on
/// the same data (as another process makes) must make it read the agent's latest turns again,
/// so every document still holds the turns before it, and no commit is lost or doubled.
pub async fn documents_follow_commits_of_another_handle(backend: &StoreUnderTest) {
    let name = backend.name();
    let first = backend.open().await;
    let second = backend.another_handle(&first).await;
    let mut a = new_agent(&first, "documents").await;
    let minute = Duration::minutes(1);
    let steps = [
        (&first, "one walrus"),
        (&first, "two"),
        (&second, "three narwhal"),
        (&first, "four"),
        (&first, "five"),
        (&second, "six"),
        (&first, "seven"),
    ];
    for (i, (store, text)) in steps.into_iter().enumerate() {
        let message = user(a.id, text, t0() + minute * i as i32);
        store
            .agents
            .commit(&a.next_commit(vec![message], vec![]))
            .await
            .unwrap_or_else(|e| panic!("{name}: commit {i}: {e}"));
    }
    let texts = |word: &'static str| {
        let (s, id) = (&first, a.id);
        async move {
            let mut found: Vec<String> = s
                .recall
                .search(id, &RecallQuery::text(word, Page::first(10)))
                .await
                .unwrap()
                .hits
                .into_iter()
                .map(|h| h.item.text)
                .collect();
            found.sort();
            found
        }
    };
    // Each document holds its message and the two turns before it.
    assert_eq!(
        texts("walrus").await,
        ["one walrus", "three narwhal", "two"],
        "{name}"
    );
    assert_eq!(
        texts("narwhal").await,
        ["five", "four", "three narwhal"],
        "{name}"
    );
    let loaded = first.agents.load_agent(a.id).await.unwrap().unwrap();
    assert_eq!(loaded, a, "{name}: the state and queue as committed");
    let all = first
        .recall
        .list_messages(a.id, &RecallQuery::text("", Page::first(20)))
        .await
        .unwrap();
    let texts: Vec<&str> = all.hits.iter().map(|h| h.item.text.as_str()).collect();
    assert_eq!(
        texts,
        [
            "one walrus",
            "two",
            "three narwhal",
            "four",
            "five",
            "six",
            "seven"
        ],
        "{name}: every message once, in order"
    );
}
