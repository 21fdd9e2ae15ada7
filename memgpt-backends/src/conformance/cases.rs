//! The conformance cases, each an async function of the [`StoreUnderTest`] that panics on
//! the first broken expectation, naming the store.

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use chrono::Duration;
use memgpt_core::ids::{AgentId, MessageId};
use memgpt_core::message::MessageKind;
use memgpt_core::store::{
    ArchivalQuery, InMemoryStore, Page, RecallQuery, SearchMode, Storage, StoreError, TimeRange,
};

use super::StoreUnderTest;
pub use super::blocks::shared_blocks_are_exact;
pub use super::documents::documents_follow_commits_of_another_handle;
use super::fixtures::*;
pub use super::hybrid::{
    archival_filters_by_tag_and_date, archival_ranking_agrees_with_the_reference,
    embeddings_can_be_cleared_and_rebuilt, extreme_pages_are_safe,
    hybrid_recall_agrees_with_the_reference, long_messages_are_found_by_every_window,
    message_embeddings_are_checked_and_backfilled,
};
pub use super::lifetimes::facts_with_a_lifetime_agree_with_the_reference;
pub use super::queue::queues_change_by_what_a_step_changed;
pub use super::sequences::{dropped_calls_leave_nothing_open, rows_after_deletions_are_found};

/// Agents are created once (a second create is `AgentExists`), load back equal, list oldest
/// first, and deleting one removes its messages and passages and nobody else's.
pub async fn agents_lifecycle(backend: &StoreUnderTest) {
    let s = backend.open().await;
    let a = new_agent(&s, "alice").await;
    let b = new_agent(&s, "bob").await;
    assert!(
        matches!(s.agents.create_agent(&a).await, Err(StoreError::AgentExists(id)) if id == a.id),
        "{}",
        backend.name()
    );
    assert_eq!(s.agents.load_agent(a.id).await.unwrap().unwrap(), a);
    assert_eq!(s.agents.agent_version(a.id).await.unwrap(), Some(0));
    assert_eq!(s.agents.agent_version(AgentId::new()).await.unwrap(), None);
    assert!(s.agents.load_agent(AgentId::new()).await.unwrap().is_none());
    let names: Vec<String> = s
        .agents
        .list_agents()
        .await
        .unwrap()
        .into_iter()
        .map(|a| a.name)
        .collect();
    assert_eq!(names, ["alice", "bob"], "{}: oldest first", backend.name());
    let mut twin = new_agent(&s, "bob").await;
    assert_eq!(
        s.agents.agents_named("bob").await.unwrap(),
        [b.id, twin.id],
        "{}: agents by name, oldest first",
        backend.name()
    );
    assert!(s.agents.agents_named("carol").await.unwrap().is_empty());
    twin.name = "carol".into();
    // Skills live in the agent's state, loaded files included.
    let skill = memgpt_core::memory::Skill::from_files(
        "pdf",
        [(
            "SKILL.md".to_owned(),
            "---\nname: pdf\ndescription: Fill forms.\n---\nUse pdftk.".to_owned(),
        )]
        .into(),
        Some("anthropic:pdf".into()),
    );
    twin.memory.add_skill(skill).unwrap();
    twin.memory.load_skill("pdf", None).unwrap();
    s.agents
        .commit(&twin.next_commit(vec![], vec![]))
        .await
        .unwrap();
    let loaded = s.agents.load_agent(twin.id).await.unwrap().unwrap();
    assert_eq!(
        loaded.memory.skills(),
        twin.memory.skills(),
        "{}: skills",
        backend.name()
    );
    assert_eq!(s.agents.agents_named("carol").await.unwrap(), [twin.id]);
    assert_eq!(s.agents.agents_named("bob").await.unwrap(), [b.id]);
    assert!(s.agents.delete_agent(twin.id).await.unwrap());
    assert!(s.agents.agents_named("carol").await.unwrap().is_empty());

    let mut a2 = a.clone();
    let c = a2.next_commit(
        corpus(a.id, 3, 1),
        vec![passage(a.id, "alice's passage", t0())],
    );
    s.agents.commit(&c).await.unwrap();
    let mut b2 = b.clone();
    s.agents
        .commit(&b2.next_commit(corpus(b.id, 2, 1), vec![]))
        .await
        .unwrap();

    assert!(s.agents.delete_agent(a.id).await.unwrap());
    assert!(!s.agents.delete_agent(a.id).await.unwrap());
    assert!(s.agents.load_agent(a.id).await.unwrap().is_none());
    assert_eq!(
        s.recall.count_messages(a.id).await.unwrap(),
        0,
        "{}: messages deleted",
        backend.name()
    );
    assert_eq!(s.archival.count_passages(a.id).await.unwrap(), 0);
    let kiwi = s
        .recall
        .search(a.id, &RecallQuery::text("kiwi", Page::first(10)))
        .await
        .unwrap();
    assert_eq!(
        kiwi.total,
        0,
        "{}: deleted messages are not found",
        backend.name()
    );
    assert_eq!(
        s.recall.count_messages(b.id).await.unwrap(),
        2,
        "{}: other agents untouched",
        backend.name()
    );
}

/// A commit is all or nothing: a writer working from a stale version conflicts and leaves no
/// message, passage or state behind; a commit for an unknown agent fails; passage deletions are
/// part of the commit.
pub async fn commits_are_atomic_and_versioned(backend: &StoreUnderTest) {
    let s = backend.open().await;
    let mut a = new_agent(&s, "a").await;
    let first = a.next_commit(
        corpus(a.id, 4, 2),
        vec![passage(a.id, "first passage", t0())],
    );
    s.agents.commit(&first).await.unwrap();
    assert_eq!(s.agents.load_agent(a.id).await.unwrap().unwrap(), a);

    // A writer that started from version 0 conflicts, and none of its writes are visible.
    let mut stale = first.state.clone();
    stale.version = 0;
    let conflicting = stale.next_commit(
        vec![user(a.id, "lost update", t0())],
        vec![passage(a.id, "lost", t0())],
    );
    let err = s.agents.commit(&conflicting).await.unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Conflict {
                expected: 0,
                found: 1,
                ..
            }
        ),
        "{}: {err}",
        backend.name()
    );
    assert_eq!(s.recall.count_messages(a.id).await.unwrap(), 4);
    assert_eq!(s.archival.count_passages(a.id).await.unwrap(), 1);
    let lost = s
        .recall
        .search(a.id, &RecallQuery::text("lost update", Page::first(5)))
        .await
        .unwrap();
    assert_eq!(
        lost.total,
        0,
        "{}: a rejected commit leaves nothing",
        backend.name()
    );

    // A commit for an unknown agent fails.
    let mut ghost = state(AgentId::new(), "ghost");
    assert!(matches!(
        s.agents.commit(&ghost.next_commit(vec![], vec![])).await,
        Err(StoreError::AgentNotFound(_))
    ));

    // Deletions are part of the commit.
    let keep = passage(a.id, "keep me", t0());
    let drop = passage(a.id, "drop me", t0());
    let drop_id = drop.id;
    s.agents
        .commit(&a.next_commit(vec![], vec![keep, drop]))
        .await
        .unwrap();
    let mut deletion = a.next_commit(vec![], vec![]);
    deletion.deleted_passages.push(drop_id);
    s.agents.commit(&deletion).await.unwrap();
    assert_eq!(s.archival.count_passages(a.id).await.unwrap(), 2);
    assert!(
        s.archival
            .get_passages(a.id, &[drop_id])
            .await
            .unwrap()
            .is_empty()
    );
}

/// Recall text search counts every match, pages without overlap, returns only the agent's own
/// messages, and ranks best first.
pub async fn recall_text_search_and_pagination(backend: &StoreUnderTest) {
    let s = backend.open().await;
    let mut a = new_agent(&s, "a").await;
    let other = new_agent(&s, "other").await;
    let messages = corpus(a.id, 30, 3); // "kiwi" in 10 of them
    s.agents
        .commit(&a.next_commit(messages.clone(), vec![]))
        .await
        .unwrap();
    let mut o = other.clone();
    s.agents
        .commit(&o.next_commit(corpus(other.id, 6, 1), vec![]))
        .await
        .unwrap();

    let mut seen = BTreeSet::new();
    for number in 0..4 {
        let page = s
            .recall
            .search(
                a.id,
                &RecallQuery::text("kiwi orchard", Page::new(number, 3)),
            )
            .await
            .unwrap();
        assert_eq!(
            page.total,
            10,
            "{}: total counts every match",
            backend.name()
        );
        assert_eq!(
            page.hits.len(),
            if number < 3 { 3 } else { 1 },
            "{}: page {number}",
            backend.name()
        );
        for hit in &page.hits {
            assert!(
                hit.item.text.contains("kiwi"),
                "{}: {}",
                backend.name(),
                hit.item.text
            );
            assert_eq!(
                hit.item.agent_id,
                a.id,
                "{}: only this agent's messages",
                backend.name()
            );
            assert!(
                seen.insert(hit.item.id),
                "{}: pages do not overlap",
                backend.name()
            );
        }
        let scores: Vec<f32> = page.hits.iter().map(|h| h.score).collect();
        assert!(
            scores.windows(2).all(|w| w[0] >= w[1]),
            "{}: best first: {scores:?}",
            backend.name()
        );
    }
    assert_eq!(seen.len(), 10);

    // Function-call arguments are searchable (what the assistant said with send_message).
    let said = assistant_calling(a.id, "thinking", "the pomegranate is ripe", t0());
    s.agents
        .commit(&a.next_commit(vec![said.clone()], vec![]))
        .await
        .unwrap();
    let found = s
        .recall
        .search(a.id, &RecallQuery::text("pomegranate", Page::first(5)))
        .await
        .unwrap();
    assert_eq!(
        found.hits.first().map(|h| h.item.id),
        Some(said.id),
        "{}",
        backend.name()
    );
    assert_eq!(
        found.hits[0].item,
        said,
        "{}: messages round-trip exactly",
        backend.name()
    );

    // Messages come back by id, in the order asked, unknown ids skipped.
    let ids = [messages[7].id, MessageId::new(), messages[2].id];
    let got = s.recall.get_messages(a.id, &ids).await.unwrap();
    assert_eq!(
        got,
        vec![messages[7].clone(), messages[2].clone()],
        "{}",
        backend.name()
    );
    assert!(
        s.recall
            .get_messages(other.id, &ids)
            .await
            .unwrap()
            .is_empty(),
        "{}: ids are per agent",
        backend.name()
    );
    assert_eq!(s.recall.count_messages(a.id).await.unwrap(), 31);
}

/// Recall date ranges are start-inclusive and end-exclusive, list oldest first and page; kind
/// filters apply to listings and to text search alike.
pub async fn recall_date_ranges_and_kinds(backend: &StoreUnderTest) {
    let s = backend.open().await;
    let mut a = new_agent(&s, "a").await;
    let mut messages = corpus(a.id, 10, 5);
    messages.push(memgpt_core::message::Message::new(
        a.id,
        MessageKind::SystemAlert,
        "kiwi alert",
        t0() + Duration::days(3),
    ));
    s.agents
        .commit(&a.next_commit(messages.clone(), vec![]))
        .await
        .unwrap();

    let range = TimeRange {
        start: Some(t0() + Duration::days(2)),
        end: Some(t0() + Duration::days(6)),
    };
    let page = s
        .recall
        .search(a.id, &RecallQuery::range(range, Page::first(10)))
        .await
        .unwrap();
    let days: Vec<String> = page.hits.iter().map(|h| h.item.text.clone()).collect();
    assert_eq!(
        page.total,
        4,
        "{}: start inclusive, end exclusive, conversation kinds only: {days:?}",
        backend.name()
    );
    assert!(
        page.hits
            .windows(2)
            .all(|w| w[0].item.created_at <= w[1].item.created_at),
        "{}: oldest first",
        backend.name()
    );
    assert_eq!(page.hits[0].item.text, messages[2].text);

    let second = s
        .recall
        .search(a.id, &RecallQuery::range(range, Page::new(1, 3)))
        .await
        .unwrap();
    assert_eq!(
        second.hits.iter().map(|h| h.item.id).collect::<Vec<_>>(),
        vec![messages[5].id],
        "{}",
        backend.name()
    );

    // Every kind, no range, no text: the whole log in order.
    let all = RecallQuery {
        text: None,
        range: TimeRange::default(),
        kinds: vec![],
        page: Page::first(100),
        embedding: None,
        ranking: Default::default(),
    };
    let page = s.recall.search(a.id, &all).await.unwrap();
    assert_eq!(page.total, 11);
    // Kind filters apply to text search too.
    let alerts = RecallQuery {
        text: Some("kiwi".into()),
        range: TimeRange::default(),
        kinds: vec![MessageKind::SystemAlert],
        page: Page::first(10),
        embedding: None,
        ranking: Default::default(),
    };
    let page = s.recall.search(a.id, &alerts).await.unwrap();
    assert_eq!(page.total, 1, "{}", backend.name());
    assert_eq!(page.hits[0].item.kind, MessageKind::SystemAlert);
    let ranged_text = RecallQuery {
        range,
        ..RecallQuery::text("kiwi", Page::first(10))
    };
    let page = s.recall.search(a.id, &ranged_text).await.unwrap();
    assert_eq!(page.total, 1, "{}: day 5 only", backend.name());

    // Stores keep microseconds: a message stamped with nanoseconds is inside a range that starts
    // at its time and ends at the next microsecond (what a flush's history records).
    let at = t0() + Duration::days(20) + Duration::nanoseconds(123_456_789);
    let precise = user(a.id, "stamped to the nanosecond", at);
    s.agents
        .commit(&a.next_commit(vec![precise.clone()], vec![]))
        .await
        .unwrap();
    let micro = at - Duration::nanoseconds(789);
    let listed = |end| RecallQuery {
        kinds: vec![],
        ..RecallQuery::range(
            TimeRange {
                start: Some(at),
                end: Some(end),
            },
            Page::first(10),
        )
    };
    let page = s
        .recall
        .list_messages(a.id, &listed(micro + Duration::microseconds(1)))
        .await
        .unwrap();
    assert_eq!(
        page.hits.iter().map(|h| h.item.id).collect::<Vec<_>>(),
        vec![precise.id],
        "{}: the next microsecond ends a range holding it",
        backend.name()
    );
}

/// Texts in any script round-trip byte for byte and are found by their exact words
/// (case-insensitively); very long messages and passages round-trip too.
pub async fn unicode_and_long_texts(backend: &StoreUnderTest) {
    let s = backend.open().await;
    let mut a = new_agent(&s, "a").await;
    let texts = [
        "emoji 🎉🥝 party with the kiwi 🥝",
        "日本語 東京 タワー の 夜景",
        "Ünïcödé café naïve résumé",
        "עברית מימין לשמאל",
        "combining e\u{301}clair and zero\u{200B}width",
    ];
    let mut messages: Vec<_> = texts.iter().map(|t| user(a.id, t, t0())).collect();
    let long = format!(
        "{} needle {}",
        "lorem ipsum ".repeat(60_000),
        "dolor sit ".repeat(40_000)
    );
    messages.push(user(a.id, &long, t0()));
    let long_passage = passage(a.id, &long, t0());
    s.agents
        .commit(&a.next_commit(messages.clone(), vec![long_passage.clone()]))
        .await
        .unwrap();

    let got = s
        .recall
        .get_messages(a.id, &messages.iter().map(|m| m.id).collect::<Vec<_>>())
        .await
        .unwrap();
    assert_eq!(
        got,
        messages,
        "{}: texts round-trip byte for byte",
        backend.name()
    );
    // Exact forms match everywhere (case-insensitively); the message saying it ranks first (the
    // turns after it hold it in their documents too).
    for (query, holder) in [
        ("東京", 1),
        ("🥝 kiwi", 0),
        ("café", 2),
        ("RÉSUMÉ", 2),
        ("needle", 5),
        ("מימין", 3),
    ] {
        let page = s
            .recall
            .search(a.id, &RecallQuery::text(query, Page::first(5)))
            .await
            .unwrap();
        assert!(page.total >= 1, "{}: query {query:?}", backend.name());
        assert_eq!(
            page.hits[0].item.id,
            messages[holder].id,
            "{}: query {query:?}",
            backend.name()
        );
    }
    let p = s
        .archival
        .get_passages(a.id, &[long_passage.id])
        .await
        .unwrap();
    assert_eq!(
        p[0].text.len(),
        long.len(),
        "{}: a {}-byte passage round-trips",
        backend.name(),
        long.len()
    );
    assert_eq!(p[0], long_passage);
}

/// Queries full of search-syntax characters, quotes, operators and control characters never
/// make recall or archival search fail (in any mode); the words in them still match.
pub async fn hostile_queries_never_error(backend: &StoreUnderTest) {
    let s = backend.open().await;
    let mut a = new_agent(&s, "a").await;
    s.agents
        .commit(&a.next_commit(
            corpus(a.id, 5, 1),
            vec![passage(
                a.id,
                "a (tricky) \"quoted\" text: with colons",
                t0(),
            )],
        ))
        .await
        .unwrap();
    let hostile = [
        "",
        " ",
        "\"",
        "\"\"",
        "'",
        "\\",
        ":",
        "a:b",
        "title:x",
        "(",
        ")",
        "(()",
        "[x]",
        "{y}",
        "*",
        "kiwi*",
        "^kiwi",
        "-kiwi",
        "+kiwi",
        "AND",
        "OR",
        "NOT",
        "kiwi AND",
        "NEAR(kiwi orchard)",
        "kiwi~2",
        "kiwi^3",
        "/regex/",
        "%",
        "_",
        ";DROP TABLE messages;--",
        "' OR 1=1 --",
        "\u{0}",
        "😀",
        "a\nb\tc",
        &"x".repeat(10_000),
        "agent:00000000000000000000000000000000",
        "{body}: kiwi",
        "kiwi\" OR \"x",
    ];
    for q in hostile {
        let recall = s
            .recall
            .search(a.id, &RecallQuery::text(q, Page::first(5)))
            .await;
        assert!(
            recall.is_ok(),
            "{}: recall query {q:?} failed: {:?}",
            backend.name(),
            recall.err()
        );
        for mode in [SearchMode::Text, SearchMode::Hybrid, SearchMode::Vector] {
            let query = ArchivalQuery {
                text: q.to_owned(),
                embedding: Some(embed(q)),
                mode,
                page: Page::first(5),
                tags: Vec::new(),
                range: Default::default(),
                validity: Default::default(),
            };
            let archival = s.archival.search(a.id, &query).await;
            assert!(
                archival.is_ok(),
                "{}: archival {mode:?} query {q:?} failed: {:?}",
                backend.name(),
                archival.err()
            );
        }
    }
    let tricky = ArchivalQuery {
        text: "tricky\" (quoted)".into(),
        embedding: None,
        mode: SearchMode::Text,
        page: Page::first(5),
        tags: Vec::new(),
        range: Default::default(),
        validity: Default::default(),
    };
    assert_eq!(
        s.archival.search(a.id, &tricky).await.unwrap().total,
        1,
        "{}: syntax characters are ignored, words still match",
        backend.name()
    );
}

/// Archival vector search finds every embedded passage, nearest first by cosine similarity,
/// pages without overlap until every passage is reached, and forgets deleted passages.
pub async fn archival_insert_search_delete(backend: &StoreUnderTest) {
    let s = backend.open().await;
    let mut a = new_agent(&s, "a").await;
    let other = new_agent(&s, "other").await;
    let topics = [
        "the launch code is 4242",
        "apples are red and sweet",
        "bananas are yellow",
        "the moon orbits the earth",
        "tea with milk and honey",
    ];
    let passages: Vec<_> = topics
        .iter()
        .enumerate()
        .map(|(i, t)| passage(a.id, t, t0() + Duration::minutes(i as i64)))
        .collect();
    s.agents
        .commit(&a.next_commit(vec![], passages.clone()))
        .await
        .unwrap();
    let mut o = other.clone();
    s.agents
        .commit(&o.next_commit(
            vec![],
            vec![passage(other.id, "the launch code is 4242", t0())],
        ))
        .await
        .unwrap();

    let query = |text: &str, mode, page| ArchivalQuery {
        text: text.into(),
        embedding: Some(embed(text)),
        mode,
        page,
        tags: Vec::new(),
        range: Default::default(),
        validity: Default::default(),
    };
    let page = s
        .archival
        .search(
            a.id,
            &query("launch code 4242", SearchMode::Vector, Page::first(2)),
        )
        .await
        .unwrap();
    assert_eq!(
        page.total,
        5,
        "{}: every embedded passage is a vector match",
        backend.name()
    );
    assert_eq!(
        page.hits[0].item,
        passages[0],
        "{}: the nearest passage first, round-tripped",
        backend.name()
    );
    assert!(
        page.hits[0].score > 0.5 && page.hits[0].score <= 1.0001,
        "{}: cosine similarity, got {}",
        backend.name(),
        page.hits[0].score
    );
    assert!(
        page.hits.iter().all(|h| h.item.agent_id == a.id),
        "{}",
        backend.name()
    );

    let mut seen = BTreeSet::new();
    for number in 0..3 {
        let page = s
            .archival
            .search(
                a.id,
                &query("fruit", SearchMode::Vector, Page::new(number, 2)),
            )
            .await
            .unwrap();
        for hit in page.hits {
            assert!(
                seen.insert(hit.item.id),
                "{}: vector pages do not overlap",
                backend.name()
            );
        }
    }
    assert_eq!(
        seen.len(),
        5,
        "{}: paging reaches every passage",
        backend.name()
    );

    let listed = s
        .archival
        .list_passages(a.id, Page::new(1, 2))
        .await
        .unwrap();
    assert_eq!(listed.total, 5);
    assert_eq!(
        listed.hits.iter().map(|h| h.item.id).collect::<Vec<_>>(),
        vec![passages[2].id, passages[3].id],
        "{}: oldest first",
        backend.name()
    );
    let got = s
        .archival
        .get_passages(a.id, &[passages[4].id, passages[1].id])
        .await
        .unwrap();
    assert_eq!(got, vec![passages[4].clone(), passages[1].clone()]);

    // Found (and so in any index a search catches up) before it is deleted.
    let before = s
        .archival
        .search(
            a.id,
            &query("launch code 4242", SearchMode::Text, Page::first(5)),
        )
        .await
        .unwrap();
    assert_eq!(before.total, 1, "{}", backend.name());
    let mut deletion = a.next_commit(vec![], vec![]);
    deletion.deleted_passages = vec![passages[0].id, other_passage_id(&s, other.id).await];
    s.agents.commit(&deletion).await.unwrap();
    assert_eq!(s.archival.count_passages(a.id).await.unwrap(), 4);
    assert_eq!(
        s.archival.count_passages(other.id).await.unwrap(),
        1,
        "{}: another agent's passage cannot be deleted",
        backend.name()
    );
    for mode in [SearchMode::Vector, SearchMode::Text, SearchMode::Hybrid] {
        let page = s
            .archival
            .search(a.id, &query("launch code 4242", mode, Page::first(5)))
            .await
            .unwrap();
        assert!(
            page.hits.iter().all(|h| h.item.id != passages[0].id),
            "{}: {mode:?} forgot the deleted passage",
            backend.name()
        );
        if mode == SearchMode::Text {
            assert_eq!(
                page.total,
                0,
                "{}: the deleted passage is not counted either",
                backend.name()
            );
        }
    }
    // Nor is it in the collection statistics: the other agent's copy is the one left.
    let terms = memgpt_core::retrieval::query_terms("4242");
    let filter = query("4242", SearchMode::Text, Page::first(5));
    let matches = s
        .archival
        .text_candidates(a.id, &terms, &filter, 10)
        .await
        .unwrap();
    assert_eq!(
        (
            matches.statistics.documents,
            matches.statistics.document_frequency.clone()
        ),
        (5, vec![1]),
        "{}",
        backend.name()
    );
}

async fn other_passage_id(s: &Storage, agent: AgentId) -> memgpt_core::ids::PassageId {
    s.archival
        .list_passages(agent, Page::first(1))
        .await
        .unwrap()
        .hits[0]
        .item
        .id
}

/// Hundreds of passages sharing one embedding form a plateau on which an HNSW walk settles and
/// misses even an exact match of the query (usearch did so once in the 1,000-kill crash
/// campaign); the exact match still comes first, with and without a filter.
pub async fn archival_finds_an_exact_match_among_equal_vectors(backend: &StoreUnderTest) {
    let s = backend.open().await;
    let mut a = new_agent(&s, "a").await;
    let plateau = embed("bulk part");
    let mut passages: Vec<_> = (0..400)
        .map(|i| {
            // The second half is dated a day later, so the filtered search below admits it.
            let mut p = passage(
                a.id,
                &format!("bulk part {i}"),
                t0() + Duration::days(i / 200),
            );
            p.embedding = Some(plateau.clone());
            p
        })
        .collect();
    let needle = "fact number tok363";
    passages.insert(150, passage(a.id, needle, t0() + Duration::days(1)));
    s.agents
        .commit(&a.next_commit(vec![], passages))
        .await
        .unwrap();
    let mut q = ArchivalQuery {
        text: needle.to_owned(),
        embedding: Some(embed(needle)),
        mode: SearchMode::Vector,
        page: Page::first(5),
        tags: Vec::new(),
        range: Default::default(),
        validity: Default::default(),
    };
    let page = s.archival.search(a.id, &q).await.unwrap();
    assert_eq!(
        page.hits[0].item.text,
        needle,
        "{}, unfiltered: {page:?}",
        backend.name()
    );
    q.range = TimeRange {
        start: Some(t0() + Duration::hours(1)),
        end: None,
    };
    let page = s.archival.search(a.id, &q).await.unwrap();
    assert_eq!(
        page.hits[0].item.text,
        needle,
        "{}, filtered: {page:?}",
        backend.name()
    );
}

/// Archival hybrid search matches embedded passages and unembedded text alike; a query without
/// an embedding falls back to text; passages without embeddings round-trip.
pub async fn archival_hybrid_and_text(backend: &StoreUnderTest) {
    let s = backend.open().await;
    let mut a = new_agent(&s, "a").await;
    let mut unembedded = memgpt_core::store::Passage::new(a.id, "plain note about kiwi jam", t0());
    unembedded.metadata.insert("n".into(), serde_json::json!(1));
    let passages = vec![
        passage(a.id, "kiwi fruit is green inside", t0()),
        passage(a.id, "orchards need water", t0()),
        unembedded.clone(),
    ];
    s.agents
        .commit(&a.next_commit(vec![], passages))
        .await
        .unwrap();

    let text = ArchivalQuery {
        text: "kiwi".into(),
        embedding: None,
        mode: SearchMode::Text,
        page: Page::first(5),
        tags: Vec::new(),
        range: Default::default(),
        validity: Default::default(),
    };
    let page = s.archival.search(a.id, &text).await.unwrap();
    assert_eq!(page.total, 2, "{}", backend.name());
    let hybrid = ArchivalQuery {
        text: "kiwi".into(),
        embedding: Some(embed("kiwi")),
        mode: SearchMode::Hybrid,
        page: Page::first(5),
        tags: Vec::new(),
        range: Default::default(),
        validity: Default::default(),
    };
    let page = s.archival.search(a.id, &hybrid).await.unwrap();
    assert_eq!(
        page.total,
        3,
        "{}: every embedded passage plus unembedded text matches",
        backend.name()
    );
    assert!(
        page.hits[0].item.text.contains("kiwi"),
        "{}",
        backend.name()
    );
    let hybrid_without_vector = ArchivalQuery {
        embedding: None,
        ..hybrid
    };
    assert_eq!(
        s.archival
            .search(a.id, &hybrid_without_vector)
            .await
            .unwrap()
            .total,
        2,
        "{}: falls back to text",
        backend.name()
    );
    let got = s
        .archival
        .get_passages(a.id, &[unembedded.id])
        .await
        .unwrap();
    assert_eq!(
        got,
        vec![unembedded],
        "{}: passages without embeddings round-trip",
        backend.name()
    );
}

/// The first embedding fixes the store's embedding space (model and dimension): a passage or
/// query of another model or dimension is `EmbeddingMismatch`, and the rejected commit leaves
/// nothing; other agents in the store share the space.
pub async fn embedding_space_is_enforced(backend: &StoreUnderTest) {
    let s = backend.open().await;
    let mut a = new_agent(&s, "a").await;
    s.agents
        .commit(&a.next_commit(vec![], vec![passage(a.id, "first", t0())]))
        .await
        .unwrap();
    let mut wrong = memgpt_core::store::Passage::new(a.id, "other model", t0());
    wrong.embedding = Some(memgpt_core::embed::Embedding {
        model: "other-model".into(),
        vector: vec![0.1; 64],
    });
    let err = s
        .agents
        .commit(
            &a.clone()
                .next_commit(vec![user(a.id, "with it", t0())], vec![wrong]),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::EmbeddingMismatch { ref expected_model, expected_dimension: 64, .. } if expected_model == "memgpt-hashing-v1-64"),
        "{}: {err}",
        backend.name()
    );
    let mut short = memgpt_core::store::Passage::new(a.id, "short", t0());
    short.embedding = Some(memgpt_core::embed::Embedding {
        model: "memgpt-hashing-v1-64".into(),
        vector: vec![0.1; 8],
    });
    assert!(matches!(
        s.agents
            .commit(&a.clone().next_commit(vec![], vec![short]))
            .await,
        Err(StoreError::EmbeddingMismatch {
            found_dimension: 8,
            ..
        })
    ));
    assert_eq!(
        s.recall.count_messages(a.id).await.unwrap(),
        0,
        "{}: the rejected commit left nothing",
        backend.name()
    );
    // Another agent in the same store shares the space.
    let mut b = new_agent(&s, "b").await;
    let mut other = memgpt_core::store::Passage::new(b.id, "x", t0());
    other.embedding = Some(memgpt_core::embed::Embedding {
        model: "other-model".into(),
        vector: vec![0.1; 64],
    });
    assert!(matches!(
        s.agents.commit(&b.next_commit(vec![], vec![other])).await,
        Err(StoreError::EmbeddingMismatch { .. })
    ));
    // Queries too.
    let bad = ArchivalQuery {
        text: "x".into(),
        embedding: Some(memgpt_core::embed::Embedding {
            model: "other-model".into(),
            vector: vec![0.1; 64],
        }),
        mode: SearchMode::Vector,
        page: Page::first(5),
        tags: Vec::new(),
        range: Default::default(),
        validity: Default::default(),
    };
    assert!(
        matches!(
            s.archival.search(a.id, &bad).await,
            Err(StoreError::EmbeddingMismatch { .. })
        ),
        "{}",
        backend.name()
    );
    let no_vector = ArchivalQuery {
        embedding: None,
        ..bad
    };
    assert!(
        matches!(
            s.archival.search(a.id, &no_vector).await,
            Err(StoreError::InvalidQuery(_))
        ),
        "{}",
        backend.name()
    );
}

/// State, messages, passages and the version survive dropping every handle and opening the
/// store again. Only for persistent stores: it fails for one that is not.
pub async fn persistence_across_reopen(backend: &StoreUnderTest) {
    assert!(
        backend.is_persistent(),
        "{}: the persistence case needs a persistent store (StoreUnderTest::persistent)",
        backend.name()
    );
    let (a, messages, passages) = {
        let s = backend.open().await;
        let mut a = new_agent(&s, "durable").await;
        let messages = corpus(a.id, 12, 4);
        let passages: Vec<_> = (0..6)
            .map(|i| passage(a.id, &format!("durable fact {i}"), t0()))
            .collect();
        s.agents
            .commit(&a.next_commit(messages.clone(), passages.clone()))
            .await
            .unwrap();
        (a, messages, passages)
    };
    let s = backend.open().await;
    assert_eq!(
        s.agents.load_agent(a.id).await.unwrap().unwrap(),
        a,
        "{}",
        backend.name()
    );
    assert_eq!(
        s.recall.get_messages(a.id, &a.fifo).await.unwrap(),
        messages,
        "{}",
        backend.name()
    );
    assert_eq!(
        s.recall
            .search(a.id, &RecallQuery::text("kiwi", Page::first(10)))
            .await
            .unwrap()
            .total,
        3,
        "{}",
        backend.name()
    );
    let ids: Vec<_> = passages.iter().map(|p| p.id).collect();
    assert_eq!(s.archival.get_passages(a.id, &ids).await.unwrap(), passages);
    let q = ArchivalQuery {
        text: "durable fact 3".into(),
        embedding: Some(embed("durable fact 3")),
        mode: SearchMode::Vector,
        page: Page::first(1),
        tags: Vec::new(),
        range: Default::default(),
        validity: Default::default(),
    };
    assert_eq!(
        s.archival.search(a.id, &q).await.unwrap().hits[0].item.id,
        passages[3].id,
        "{}",
        backend.name()
    );
}

/// Many agents commit in parallel without losing a write; racing writers on one agent win
/// each version exactly once, with one message per won commit.
pub async fn concurrent_commits(backend: &StoreUnderTest) {
    let s = backend.open().await;
    // Many agents, committing in parallel tasks.
    let mut tasks = Vec::new();
    for n in 0..8 {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            let mut a = new_agent(&s, &format!("agent {n}")).await;
            for i in 0..15 {
                let m = user(
                    a.id,
                    &format!("agent {n} message {i} about concurrency"),
                    t0() + Duration::seconds(i),
                );
                let p = passage(a.id, &format!("agent {n} passage {i}"), t0());
                s.agents
                    .commit(&a.next_commit(vec![m], vec![p]))
                    .await
                    .expect("commit");
            }
            a.id
        }));
    }
    for task in tasks {
        let id = task.await.unwrap();
        assert_eq!(
            s.recall.count_messages(id).await.unwrap(),
            15,
            "{}",
            backend.name()
        );
        assert_eq!(s.archival.count_passages(id).await.unwrap(), 15);
        assert_eq!(s.agents.agent_version(id).await.unwrap(), Some(15));
        assert_eq!(
            s.recall
                .search(id, &RecallQuery::text("concurrency", Page::first(1)))
                .await
                .unwrap()
                .total,
            15,
            "{}",
            backend.name()
        );
    }
    // Racing writers on one agent: every version is won exactly once.
    let base = new_agent(&s, "contended").await;
    let mut racers = Vec::new();
    for r in 0..4 {
        let s = s.clone();
        let base = base.clone();
        racers.push(tokio::spawn(async move {
            let mut wins = 0;
            let mut state = base;
            for attempt in 0..20 {
                state.version = s.agents.agent_version(state.id).await.unwrap().unwrap();
                let m = user(state.id, &format!("racer {r} attempt {attempt}"), t0());
                match s.agents.commit(&state.next_commit(vec![m], vec![])).await {
                    Ok(()) => wins += 1,
                    Err(StoreError::Conflict { .. }) => {}
                    Err(e) => panic!("unexpected error: {e}"),
                }
            }
            wins
        }));
    }
    let mut wins = 0;
    for racer in racers {
        wins += racer.await.unwrap();
    }
    assert_eq!(
        s.agents.agent_version(base.id).await.unwrap(),
        Some(wins),
        "{}",
        backend.name()
    );
    assert_eq!(
        s.recall.count_messages(base.id).await.unwrap(),
        wins,
        "{}: one message per won commit",
        backend.name()
    );
}

/// Runs the same data and queries through the backend and the in-memory reference.
pub async fn agrees_with_the_reference(backend: &StoreUnderTest) {
    let s = backend.open().await;
    let reference = Storage::from_store(Arc::new(InMemoryStore::new()));
    let words = [
        "kiwi", "orchard", "river", "lantern", "copper", "meadow", "violin", "harbor",
    ];
    let mut states = Vec::new();
    let agent_id = AgentId::new();
    for store in [&s, &reference] {
        let mut a = state(agent_id, "ref");
        store.agents.create_agent(&a).await.unwrap();
        states.push(a.id);
        let mut messages = Vec::new();
        let mut passages = Vec::new();
        for i in 0..60usize {
            let text = format!(
                "{} {} {}",
                words[i % 8],
                words[(i * 3 + 1) % 8],
                words[(i * 5 + 2) % 8]
            );
            let mut m = user(a.id, &text, t0() + Duration::hours(i as i64));
            m.id = MessageId::from_uuid(uuid_from(i as u128 + 1));
            messages.push(m);
            let mut p = passage(a.id, &text, t0() + Duration::hours(i as i64));
            p.id = memgpt_core::ids::PassageId::from_uuid(uuid_from(1_000 + i as u128));
            passages.push(p);
        }
        store
            .agents
            .commit(&a.next_commit(messages, passages))
            .await
            .unwrap();
    }
    let (id, ref_id) = (states[0], states[1]);
    assert_eq!(id, ref_id);
    for word in words {
        let q = RecallQuery::text(word, Page::first(100));
        let ours: BTreeSet<_> = s
            .recall
            .search(id, &q)
            .await
            .unwrap()
            .hits
            .into_iter()
            .map(|h| h.item.id)
            .collect();
        let theirs: BTreeSet<_> = reference
            .recall
            .search(id, &q)
            .await
            .unwrap()
            .hits
            .into_iter()
            .map(|h| h.item.id)
            .collect();
        assert_eq!(
            ours,
            theirs,
            "{}: recall matches for {word:?}",
            backend.name()
        );
        let range = RecallQuery::range(
            TimeRange {
                start: Some(t0() + Duration::hours(10)),
                end: Some(t0() + Duration::hours(25)),
            },
            Page::new(1, 4),
        );
        let ours: Vec<_> = s
            .recall
            .search(id, &range)
            .await
            .unwrap()
            .hits
            .into_iter()
            .map(|h| h.item.id)
            .collect();
        let theirs: Vec<_> = reference
            .recall
            .search(id, &range)
            .await
            .unwrap()
            .hits
            .into_iter()
            .map(|h| h.item.id)
            .collect();
        assert_eq!(ours, theirs, "{}: a page of a date range", backend.name());
        let v = ArchivalQuery {
            text: word.into(),
            embedding: Some(embed(word)),
            mode: SearchMode::Vector,
            page: Page::first(10),
            tags: Vec::new(),
            range: Default::default(),
            validity: Default::default(),
        };
        let ours: Vec<_> = s
            .archival
            .search(id, &v)
            .await
            .unwrap()
            .hits
            .into_iter()
            .map(|h| h.item.id)
            .collect();
        let theirs: Vec<_> = reference
            .archival
            .search(id, &v)
            .await
            .unwrap()
            .hits
            .into_iter()
            .map(|h| h.item.id)
            .collect();
        let overlap = ours.iter().filter(|id| theirs.contains(id)).count();
        assert!(
            overlap >= 9,
            "{}: vector top-10 for {word:?} shares only {overlap} with exact search",
            backend.name()
        );
    }
}

fn uuid_from(n: u128) -> uuid::Uuid {
    uuid::Uuid::from_u128(0x0190_0000_0000_7000_8000_0000_0000_0000 | n)
}

/// [`create_agent_with`](memgpt_core::store::AgentStore::create_agent_with) lands an agent with
/// its messages and passages whole, or not at all: a clash of ids or a passage of another
/// embedding space leaves no agent behind.
pub async fn imports_are_all_or_nothing(backend: &StoreUnderTest) {
    let s = backend.open().await;
    // Fix the store's embedding space first.
    let mut first = new_agent(&s, "first").await;
    s.agents
        .commit(&first.next_commit(vec![], vec![passage(first.id, "fixes the space", t0())]))
        .await
        .unwrap();

    let mut imported = state(AgentId::new(), "imported");
    let id = imported.id;
    let commit = imported.next_commit(
        corpus(id, 6, 2),
        vec![passage(id, "an imported passage", t0())],
    );
    s.agents.create_agent_with(&commit).await.unwrap();
    assert_eq!(
        s.agents.load_agent(id).await.unwrap().unwrap(),
        commit.state,
        "{}",
        backend.name()
    );
    assert_eq!(
        s.recall.count_messages(id).await.unwrap(),
        6,
        "{}",
        backend.name()
    );
    assert_eq!(
        s.archival.count_passages(id).await.unwrap(),
        1,
        "{}",
        backend.name()
    );
    let page = s
        .recall
        .search(id, &RecallQuery::text("kiwi", Page::first(10)))
        .await
        .unwrap();
    assert_eq!(
        page.total,
        3,
        "{}: imported messages are searchable",
        backend.name()
    );

    // The same id again: refused, nothing changes.
    assert!(
        matches!(s.agents.create_agent_with(&commit).await, Err(StoreError::AgentExists(x)) if x == id),
        "{}",
        backend.name()
    );
    assert_eq!(
        s.recall.count_messages(id).await.unwrap(),
        6,
        "{}",
        backend.name()
    );

    // A passage of another space: refused, and no agent is left behind.
    let mut broken = state(AgentId::new(), "broken");
    let broken_id = broken.id;
    let mut odd = passage(broken_id, "another model's passage", t0());
    odd.embedding = Some(memgpt_core::embed::Embedding {
        model: "other-model".into(),
        vector: vec![0.5; 64],
    });
    let commit = broken.next_commit(corpus(broken_id, 3, 1), vec![odd]);
    assert!(
        matches!(
            s.agents.create_agent_with(&commit).await,
            Err(StoreError::EmbeddingMismatch { .. })
        ),
        "{}",
        backend.name()
    );
    assert!(
        s.agents.load_agent(broken_id).await.unwrap().is_none(),
        "{}",
        backend.name()
    );
    assert_eq!(
        s.recall.count_messages(broken_id).await.unwrap(),
        0,
        "{}",
        backend.name()
    );
    assert_eq!(
        s.agents.list_agents().await.unwrap().len(),
        2,
        "{}",
        backend.name()
    );
}

/// Text with a NUL character (U+0000) is refused alike by every store, wherever it hides (a
/// message, a tool call, a passage or its metadata, a memory block, the agent's name), with
/// [`StoreError::NulCharacter`] and nothing written; other control characters and astral-plane
/// text are stored exactly.
pub async fn nul_characters_are_refused_alike(backend: &StoreUnderTest) {
    let s = backend.open().await;
    let name = backend.name();
    let mut nameless = state(AgentId::new(), "bad\0name");
    nameless.version = 0;
    assert!(
        matches!(
            s.agents.create_agent(&nameless).await,
            Err(StoreError::NulCharacter(_))
        ),
        "{name}: an agent named with NUL"
    );
    assert!(s.agents.load_agent(nameless.id).await.unwrap().is_none());

    let a = new_agent(&s, "nul").await;
    let mut bad_call = assistant_calling(a.id, "thinking", "said", t0());
    bad_call.tool_calls[0].arguments = "{\"message\":\"a\0b\"}".into();
    let mut tagged = passage(a.id, "fine text", t0());
    tagged
        .metadata
        .insert("tags".into(), serde_json::json!(["ok", "b\0d"]));
    let mut blocked = a.clone();
    blocked
        .memory
        .add(memgpt_core::MemoryBlock::new("notes", "x\0y"))
        .unwrap();
    let attempts: Vec<(&str, memgpt_core::store::Commit)> = vec![
        (
            "message text",
            a.clone()
                .next_commit(vec![user(a.id, "one\0two", t0())], vec![]),
        ),
        ("tool call", a.clone().next_commit(vec![bad_call], vec![])),
        (
            "passage text",
            a.clone()
                .next_commit(vec![], vec![passage(a.id, "p\0q", t0())]),
        ),
        (
            "passage metadata",
            a.clone().next_commit(vec![], vec![tagged]),
        ),
        ("memory block", blocked.next_commit(vec![], vec![])),
    ];
    for (what, commit) in attempts {
        let err = s.agents.commit(&commit).await.unwrap_err();
        assert!(
            matches!(err, StoreError::NulCharacter(_)),
            "{name}: {what}: {err}"
        );
        assert_eq!(err.kind(), memgpt_core::ErrorKind::InvalidInput);
        assert_eq!(
            s.agents.agent_version(a.id).await.unwrap(),
            Some(0),
            "{name}: {what}"
        );
        assert_eq!(
            s.recall.count_messages(a.id).await.unwrap(),
            0,
            "{name}: {what}"
        );
        assert_eq!(
            s.archival.count_passages(a.id).await.unwrap(),
            0,
            "{name}: {what}"
        );
    }

    // Everything short of NUL round-trips exactly.
    let text = "tab\there, bell\u{7}, escape\u{1b}[0m, DEL\u{7f}, U+FFFD \u{FFFD}, astral \u{1F600}\u{10FFFF}";
    let mut good = a.clone();
    let message = user(a.id, text, t0());
    let id = message.id;
    s.agents
        .commit(&good.next_commit(vec![message], vec![passage(a.id, text, t0())]))
        .await
        .unwrap();
    let stored = s.recall.get_messages(a.id, &[id]).await.unwrap();
    assert_eq!(stored[0].text, text, "{name}");
    let passages = s
        .archival
        .list_passages(a.id, Page::first(5))
        .await
        .unwrap();
    assert_eq!(passages.hits[0].item.text, text, "{name}");
}

/// A conformance case as a function pointer: what [`ALL_CASES`] lists, for harnesses that build
/// their tests at run time.
pub type CaseFn = for<'a> fn(&'a StoreUnderTest) -> Pin<Box<dyn Future<Output = ()> + 'a>>;

/// The `(name, case)` pairs of the cases named (what [`ALL_CASES`] and [`PERSISTENT_CASES`]
/// hold).
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_case_list {
    ($($case:ident),* $(,)?) => {
        &[$((::core::stringify!($case), |store| ::std::boxed::Box::pin($case(store)))),*]
    };
}

/// Every case [`store_conformance_tests!`](crate::store_conformance_tests) runs on any store,
/// by name.
pub const ALL_CASES: &[(&str, CaseFn)] =
    crate::__every_conformance_case!(__conformance_case_list {});

/// The cases only a [persistent](super::StoreUnderTest::persistent) store runs, by name.
pub const PERSISTENT_CASES: &[(&str, CaseFn)] =
    crate::__conformance_case_list!(persistence_across_reopen);
