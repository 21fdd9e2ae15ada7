//! Hybrid recall search, message embeddings, filters and extreme pages: the same in every store.
//!
//! **Tolerance.** Stores only choose candidates; memgpt-core ranks them. When a store's
//! candidate pools hold every match (as here: fewer messages than
//! `RecallRanking::candidates`), its ranking must equal the in-memory reference's exactly:
//! same messages, same order. Approximate vector indexes (usearch, pgvector HNSW) may only
//! differ past the pool, which these corpora never reach.

use std::sync::Arc;

use chrono::Duration;
use memgpt_core::Agent;
use memgpt_core::embed::{Embedder, Embedding, HashingEmbedder};
use memgpt_core::ids::AgentId;
use memgpt_core::message::{Message, MessageKind};
use memgpt_core::store::{
    ArchivalQuery, InMemoryStore, MAX_MESSAGE_WINDOWS, MessageEmbedding, Page, Passage,
    PassageEmbedding, RecallQuery, SearchMode, Storage, StoreError, TAGS_KEY, TimeRange,
};
use memgpt_core::testing::ScriptedProvider;
use serde_json::json;

use super::StoreUnderTest;
use super::fixtures::*;

/// A conversation between two named speakers over several sessions, with embeddings.
fn conversation(agent: AgentId) -> (Vec<Message>, Vec<MessageEmbedding>) {
    let sessions: [&[(&str, &str)]; 4] = [
        &[
            ("Ann", "Did you go to the charity race on Saturday?"),
            ("Bob", "Yes! It was for mental health awareness."),
            ("Ann", "I adopted a puppy named Rex this week."),
            ("Bob", "Lovely. Is Rex a retriever?"),
        ],
        &[
            ("Bob", "I started painting sunsets in oil."),
            ("Ann", "Painting sounds relaxing. I went hiking with Rex."),
            ("Bob", "Where did you hike?"),
            ("Ann", "Up the ridge trail, Rex loved it."),
        ],
        &[
            ("Ann", "My sister visits in June."),
            ("Bob", "Take her hiking on the ridge trail."),
            ("Ann", "She prefers painting classes, like yours."),
        ],
        &[
            ("Bob", "The race raised money for the shelter."),
            ("Ann", "Rex came from that shelter!"),
        ],
    ];
    let e = embedder();
    let mut messages = Vec::new();
    let mut embeddings = Vec::new();
    for (s, turns) in sessions.iter().enumerate() {
        let start = t0() + Duration::days(30 * s as i64);
        for (i, (who, text)) in turns.iter().enumerate() {
            let kind = if *who == "Ann" {
                MessageKind::User
            } else {
                MessageKind::Assistant
            };
            let mut m = Message::new(agent, kind, *text, start + Duration::minutes(i as i64));
            m.name = Some((*who).to_owned());
            if i % 3 != 2 {
                // Some messages stay unembedded: they are found by words only.
                embeddings.push(MessageEmbedding {
                    message: m.id,
                    window: 0,
                    embedding: Embedding {
                        model: e.model().to_owned(),
                        vector: e.vector(&format!("{who}: {text}")),
                    },
                });
            }
            messages.push(m);
        }
    }
    (messages, embeddings)
}

async fn load(storage: &Storage, agent: &mut memgpt_core::store::AgentState) -> Vec<Message> {
    let (messages, embeddings) = conversation(agent.id);
    let mut c = agent.next_commit(messages.clone(), vec![]);
    c.message_embeddings = embeddings;
    storage.agents.commit(&c).await.expect("commit");
    messages
}

fn ids(page: &memgpt_core::store::SearchPage<Message>) -> Vec<String> {
    page.hits.iter().map(|h| h.item.text.clone()).collect()
}

/// Recall search in every mode (text, vector, hybrid), with role and date filters, ranks a
/// two-speaker conversation exactly as the in-memory reference does; a question naming a
/// speaker finds that speaker's reply.
pub async fn hybrid_recall_agrees_with_the_reference(backend: &StoreUnderTest) {
    let s = backend.open().await;
    let reference = Storage::from_store(Arc::new(InMemoryStore::new()));
    let mut a = state(AgentId::new(), "a");
    let mut r = a.clone();
    s.agents.create_agent(&a).await.unwrap();
    reference.agents.create_agent(&r).await.unwrap();
    load(&s, &mut a).await;
    load(&reference, &mut r).await;
    let queries = [
        "When did Bob run the charity race?",
        "What does Bob paint?",
        "Where did Ann hike with her puppy?",
        "shelter",
        "Who visits in June?",
        "zzz unmatched words",
    ];
    for text in queries {
        for (label, mut query) in [
            ("text", RecallQuery::text(text, Page::first(20))),
            (
                "hybrid",
                RecallQuery::text(text, Page::first(20)).with_embedding(embed(text)),
            ),
        ] {
            let ours = s.recall.search(a.id, &query).await.unwrap();
            let theirs = reference.recall.search(a.id, &query).await.unwrap();
            assert_eq!(
                ids(&ours),
                ids(&theirs),
                "{}: {label} ranking of {text:?}",
                backend.name()
            );
            assert_eq!(
                ours.total,
                theirs.total,
                "{}: {label} total",
                backend.name()
            );
            // Filters: roles and a date range.
            query.kinds = vec![MessageKind::Assistant];
            query.range = TimeRange {
                start: Some(t0() + Duration::days(20)),
                end: Some(t0() + Duration::days(70)),
            };
            let ours = s.recall.search(a.id, &query).await.unwrap();
            let theirs = reference.recall.search(a.id, &query).await.unwrap();
            assert_eq!(
                ids(&ours),
                ids(&theirs),
                "{}: filtered {label} {text:?}",
                backend.name()
            );
            assert!(
                ours.hits
                    .iter()
                    .all(|h| h.item.kind == MessageKind::Assistant
                        && query.range.contains(h.item.created_at)),
                "{}: filters hold",
                backend.name()
            );
        }
    }
    // The reply is found through the question it answers; the named speaker wins.
    let race = s
        .recall
        .search(
            a.id,
            &RecallQuery::text("When did Bob go to the race?", Page::first(3)),
        )
        .await
        .unwrap();
    assert!(
        race.hits
            .iter()
            .any(|h| h.item.text.starts_with("Yes! It was for mental")),
        "{}: {:?}",
        backend.name(),
        ids(&race)
    );
    let paint = s
        .recall
        .search(
            a.id,
            &RecallQuery::text("What does Bob paint?", Page::first(1)),
        )
        .await
        .unwrap();
    assert_eq!(
        ids(&paint),
        ["I started painting sunsets in oil."],
        "{}",
        backend.name()
    );
}

/// Messages committed without embeddings are listed as pending (oldest first) and backfilled
/// idempotently; a message embedding of another model or dimension is refused as a whole and
/// writes nothing; a query of another space is an error, never garbage.
pub async fn message_embeddings_are_checked_and_backfilled(backend: &StoreUnderTest) {
    let s = backend.open().await;
    let mut a = new_agent(&s, "a").await;
    let (messages, embeddings) = conversation(a.id);
    s.agents
        .commit(&a.next_commit(messages.clone(), vec![]))
        .await
        .unwrap();
    let pending = s.recall.unembedded_messages(a.id, 100).await.unwrap();
    assert_eq!(
        pending.len(),
        messages.len(),
        "{}: every turn pending",
        backend.name()
    );
    assert_eq!(
        pending[0].id,
        messages[0].id,
        "{}: oldest first",
        backend.name()
    );
    assert_eq!(
        s.recall.unembedded_messages(a.id, 3).await.unwrap().len(),
        3
    );

    // Another model is refused as a whole.
    let mut wrong = embeddings.clone();
    wrong[1].embedding = Embedding {
        model: "other-model".into(),
        vector: vec![0.5; 64],
    };
    // The space is not fixed yet: the first vector fixes it, the odd one is refused.
    assert!(matches!(
        s.agents.store_message_embeddings(a.id, &wrong).await,
        Err(StoreError::EmbeddingMismatch { .. })
    ));
    assert_eq!(
        s.recall.unembedded_messages(a.id, 100).await.unwrap().len(),
        messages.len(),
        "{}: nothing was written",
        backend.name()
    );
    s.agents
        .store_message_embeddings(a.id, &embeddings)
        .await
        .unwrap();
    s.agents
        .store_message_embeddings(a.id, &embeddings)
        .await
        .unwrap();
    let left = s.recall.unembedded_messages(a.id, 100).await.unwrap();
    assert_eq!(
        left.len(),
        messages.len() - embeddings.len(),
        "{}: idempotent",
        backend.name()
    );
    let space = s.agents.embedding_space().await.unwrap().unwrap();
    assert_eq!(
        (space.model.as_str(), space.dimension),
        ("memgpt-hashing-v1-64", 64)
    );

    // A commit bringing another space changes nothing.
    let mut m = user(a.id, "one more", t0() + Duration::days(400));
    m.name = Some("Ann".into());
    let mut c = a.clone().next_commit(vec![m.clone()], vec![]);
    c.message_embeddings = vec![MessageEmbedding {
        message: m.id,
        window: 0,
        embedding: Embedding {
            model: "memgpt-hashing-v1-64".into(),
            vector: vec![0.1; 32],
        },
    }];
    assert!(matches!(
        s.agents.commit(&c).await,
        Err(StoreError::EmbeddingMismatch { .. })
    ));
    assert_eq!(
        s.recall.count_messages(a.id).await.unwrap(),
        messages.len() as u64,
        "{}: the commit left nothing",
        backend.name()
    );
    // A query of another space is an error, never garbage.
    let q = RecallQuery::text("race", Page::first(5)).with_embedding(Embedding {
        model: "other-model".into(),
        vector: vec![0.1; 64],
    });
    assert!(matches!(
        s.recall.search(a.id, &q).await,
        Err(StoreError::EmbeddingMismatch { .. })
    ));
}

/// A long message embedded as several windows is one candidate with every window's vector, in
/// window order, and vector search finds it by any window (scored by its best), with and
/// without filters, ranked as the in-memory reference ranks it; its windows are stored once
/// however often they are offered; windows past [`MAX_MESSAGE_WINDOWS`] are ignored; a later
/// message's single window still works beside it.
pub async fn long_messages_are_found_by_every_window(backend: &StoreUnderTest) {
    let s = backend.open().await;
    let reference = Storage::from_store(Arc::new(InMemoryStore::new()));
    let mut a = state(AgentId::new(), "a");
    let mut r = a.clone();
    s.agents.create_agent(&a).await.unwrap();
    reference.agents.create_agent(&r).await.unwrap();
    let e = embedder();
    let windows = [
        "the deployment runbook: build the image and tag it",
        "then migrate the database schema before switching traffic",
        "finally rotate the redis credentials and purge the cdn cache",
    ];
    let long_text = windows.join(" ");
    let mut messages = vec![user(a.id, "short question about lunch plans", t0())];
    messages.push({
        let mut m = Message::new(
            a.id,
            MessageKind::Assistant,
            long_text.as_str(),
            t0() + Duration::minutes(1),
        );
        m.name = Some("Bob".into());
        m
    });
    messages.push(user(
        a.id,
        "what about the weather tomorrow",
        t0() + Duration::minutes(2),
    ));
    let vector = |text: &str| Embedding {
        model: e.model().to_owned(),
        vector: e.vector(text),
    };
    let mut embeddings = vec![
        MessageEmbedding {
            message: messages[0].id,
            window: 0,
            embedding: vector("short question about lunch plans"),
        },
        MessageEmbedding {
            message: messages[2].id,
            window: 0,
            embedding: vector("what about the weather tomorrow"),
        },
    ];
    for (w, text) in windows.iter().enumerate() {
        embeddings.push(MessageEmbedding {
            message: messages[1].id,
            window: w as u32,
            embedding: vector(text),
        });
    }
    // A window past the limit is ignored, not stored.
    embeddings.push(MessageEmbedding {
        message: messages[1].id,
        window: MAX_MESSAGE_WINDOWS,
        embedding: vector("lunch plans"),
    });
    for (storage, state) in [(&s, &mut a), (&reference, &mut r)] {
        storage
            .agents
            .commit(&state.next_commit(messages.clone(), vec![]))
            .await
            .unwrap();
        storage
            .agents
            .store_message_embeddings(state.id, &embeddings)
            .await
            .unwrap();
        // Offered again: stored once.
        storage
            .agents
            .store_message_embeddings(state.id, &embeddings)
            .await
            .unwrap();
    }
    assert!(
        s.recall
            .unembedded_messages(a.id, 10)
            .await
            .unwrap()
            .is_empty(),
        "{}: every message is embedded",
        backend.name()
    );
    // The long message's candidate holds its three windows, in order.
    let seek = RecallQuery::text("zzz", Page::first(3)).with_embedding(vector(windows[2]));
    let keys = s
        .recall
        .vector_candidates(a.id, seek.embedding.as_ref().unwrap(), &seek, 3)
        .await
        .unwrap();
    assert_eq!(
        keys.len(),
        3,
        "{}: distinct messages: {keys:?}",
        backend.name()
    );
    let candidates = s.recall.candidates(a.id, &keys).await.unwrap();
    let long = candidates
        .iter()
        .find(|c| c.message.id == messages[1].id)
        .expect("the long message is a candidate");
    assert_eq!(
        long.embeddings,
        windows.iter().map(|t| e.vector(t)).collect::<Vec<_>>(),
        "{}: every window, in order",
        backend.name()
    );
    for c in candidates.iter().filter(|c| c.message.id != messages[1].id) {
        assert_eq!(c.embeddings.len(), 1, "{}", backend.name());
    }
    // Each window finds the message first, through the store's vector index, filtered by
    // role or not, as the reference ranks it.
    for (w, text) in windows.iter().enumerate() {
        let plain = RecallQuery::text("zzz", Page::first(3)).with_embedding(vector(text));
        let mut filtered = plain.clone();
        filtered.kinds = vec![MessageKind::Assistant];
        for query in [plain, filtered] {
            let ours = s.recall.search(a.id, &query).await.unwrap();
            let theirs = reference.recall.search(r.id, &query).await.unwrap();
            assert_eq!(
                ours.hits.first().map(|h| h.item.id),
                Some(messages[1].id),
                "{}: window {w} ({:?})",
                backend.name(),
                query.kinds
            );
            assert_eq!(ids(&ours), ids(&theirs), "{}: window {w}", backend.name());
        }
    }
    // A message's other windows do not crowd out other messages: a query near the short
    // message still lists all three.
    let lunch = RecallQuery::text("zzz", Page::first(5)).with_embedding(vector("lunch plans"));
    let ours = s.recall.search(a.id, &lunch).await.unwrap();
    assert_eq!(ours.hits.len(), 3, "{}", backend.name());
    assert_eq!(ours.hits[0].item.id, messages[0].id, "{}", backend.name());
}

/// Switching embedding models: clearing forgets every vector and the space in one go (what the
/// agents remember stays, found by words), every message and passage is listed as unembedded
/// again, and vectors of another model and dimension then fix the new space and are searched;
/// the old model's queries are refused.
pub async fn embeddings_can_be_cleared_and_rebuilt(backend: &StoreUnderTest) {
    let s = backend.open().await;
    let mut a = new_agent(&s, "a").await;
    let (messages, embeddings) = conversation(a.id);
    let mut passages: Vec<Passage> = ["Rex is a golden retriever", "The ridge trail is steep"]
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut p = passage(a.id, t, t0() + Duration::minutes(i as i64));
            p.embedding = Some(embed(t));
            p
        })
        .collect();
    let mut plain = passage(a.id, "no vector here", t0() + Duration::minutes(9));
    plain.embedding = None;
    passages.push(plain);
    let mut c = a.next_commit(messages.clone(), passages.clone());
    c.message_embeddings = embeddings.clone();
    s.agents.commit(&c).await.unwrap();
    assert!(s.agents.embedding_space().await.unwrap().is_some());

    s.agents.clear_embeddings().await.unwrap();
    assert_eq!(
        s.agents.embedding_space().await.unwrap(),
        None,
        "{}",
        backend.name()
    );
    assert_eq!(
        s.recall.unembedded_messages(a.id, 100).await.unwrap().len(),
        messages.len(),
        "{}: every turn is unembedded",
        backend.name()
    );
    let pending = s.archival.unembedded_passages(a.id, 100).await.unwrap();
    assert_eq!(
        pending.iter().map(|p| p.id).collect::<Vec<_>>(),
        passages.iter().map(|p| p.id).collect::<Vec<_>>(),
        "{}: every passage, oldest first",
        backend.name()
    );
    assert_eq!(
        s.archival.unembedded_passages(a.id, 2).await.unwrap().len(),
        2
    );
    // Nothing is lost: words still find messages and passages.
    let found = s
        .recall
        .search(a.id, &RecallQuery::text("puppy Rex", Page::first(5)))
        .await
        .unwrap();
    assert!(!found.hits.is_empty(), "{}", backend.name());
    let texts = s
        .archival
        .search(
            a.id,
            &ArchivalQuery::new("retriever", SearchMode::Text, Page::first(5)),
        )
        .await
        .unwrap();
    assert_eq!(texts.hits.len(), 1, "{}", backend.name());

    // Another model (other dimension) now fixes the space.
    let other = memgpt_core::embed::HashingEmbedder::new(32);
    let vector = |t: &str| Embedding {
        model: other.model().to_owned(),
        vector: other.vector(t),
    };
    let rebuilt: Vec<MessageEmbedding> = embeddings
        .iter()
        .map(|e| MessageEmbedding {
            message: e.message,
            window: 0,
            embedding: vector(
                &messages
                    .iter()
                    .find(|m| m.id == e.message)
                    .map(|m| m.text.clone())
                    .unwrap_or_default(),
            ),
        })
        .collect();
    s.agents
        .store_message_embeddings(a.id, &rebuilt)
        .await
        .unwrap();
    let passage_vectors: Vec<PassageEmbedding> = passages
        .iter()
        .map(|p| PassageEmbedding {
            passage: p.id,
            embedding: vector(&p.text),
        })
        .collect();
    s.agents
        .store_passage_embeddings(a.id, &passage_vectors)
        .await
        .unwrap();
    // Idempotent.
    s.agents
        .store_passage_embeddings(a.id, &passage_vectors)
        .await
        .unwrap();
    let space = s.agents.embedding_space().await.unwrap().unwrap();
    assert_eq!(space.dimension, 32, "{}", backend.name());
    assert!(
        s.archival
            .unembedded_passages(a.id, 10)
            .await
            .unwrap()
            .is_empty()
    );
    let by_vector = s
        .archival
        .search(
            a.id,
            &ArchivalQuery::new("", SearchMode::Vector, Page::first(5))
                .with_embedding(vector("The ridge trail is steep")),
        )
        .await
        .unwrap();
    assert_eq!(
        by_vector.hits.first().map(|h| h.item.text.as_str()),
        Some("The ridge trail is steep"),
        "{}",
        backend.name()
    );
    assert_eq!(
        by_vector.hits.len(),
        3,
        "{}: every passage has a vector",
        backend.name()
    );
    let recalled = s
        .recall
        .search(
            a.id,
            &RecallQuery::text("zzz", Page::first(3))
                .with_embedding(vector("I started painting sunsets in oil.")),
        )
        .await
        .unwrap();
    assert_eq!(
        recalled.hits.first().map(|h| h.item.text.as_str()),
        Some("I started painting sunsets in oil."),
        "{}",
        backend.name()
    );
    // The old model's vectors are refused now.
    let old = RecallQuery::text("race", Page::first(5)).with_embedding(embed("race"));
    assert!(matches!(
        s.recall.search(a.id, &old).await,
        Err(StoreError::EmbeddingMismatch { .. })
    ));
}

/// Pages far past the end, huge page sizes and page numbers near `usize::MAX` are safe in every
/// recall and archival mode, leave later normal pages intact, and work through the paging
/// functions the LLM calls.
pub async fn extreme_pages_are_safe(backend: &StoreUnderTest) {
    let s = backend.open().await;
    let mut a = new_agent(&s, "a").await;
    let messages = load(&s, &mut a).await;
    let passages: Vec<Passage> = (0..12)
        .map(|i| {
            let mut p = passage(a.id, &format!("passage about rivers {i}"), t0());
            p.embedding = Some(embed(&p.text));
            p
        })
        .collect();
    s.agents
        .commit(&a.next_commit(vec![], passages))
        .await
        .unwrap();
    for number in [u32::MAX as usize, usize::MAX / 5, usize::MAX] {
        let page = Page::new(number, 5);
        let text = RecallQuery::text("Rex", page).with_embedding(embed("Rex"));
        let found = s.recall.search(a.id, &text).await.unwrap();
        assert!(
            found.hits.is_empty() && found.total > 0,
            "{}: hybrid page {number}",
            backend.name()
        );
        let listed = s
            .recall
            .search(a.id, &RecallQuery::kinds([], page))
            .await
            .unwrap();
        assert!(
            listed.hits.is_empty(),
            "{}: listing page {number}",
            backend.name()
        );
        assert_eq!(listed.total, messages.len(), "{}", backend.name());
        for mode in [SearchMode::Vector, SearchMode::Text, SearchMode::Hybrid] {
            let q = ArchivalQuery::new("rivers", mode, page).with_embedding(embed("rivers"));
            let found = s.archival.search(a.id, &q).await.unwrap();
            assert!(
                found.hits.is_empty(),
                "{}: archival {mode:?} page {number}",
                backend.name()
            );
            assert!(
                found.total >= 12,
                "{}: archival {mode:?} total",
                backend.name()
            );
        }
        let listed = s.archival.list_passages(a.id, page).await.unwrap();
        assert!(
            listed.hits.is_empty() && listed.total == 12,
            "{}",
            backend.name()
        );
    }
    // Normal pages still work afterwards (no shared search depth was left raised or broken).
    let q = ArchivalQuery::new("rivers", SearchMode::Vector, Page::first(3))
        .with_embedding(embed("passage about rivers 7"));
    let top = s.archival.search(a.id, &q).await.unwrap();
    assert_eq!(
        top.hits[0].item.text,
        "passage about rivers 7",
        "{}",
        backend.name()
    );

    // Through the functions, as the LLM would page.
    let mut agent = Agent::builder()
        .provider(Arc::new(ScriptedProvider::new()))
        .storage(s.clone())
        .embedder(Arc::new(HashingEmbedder::new(64)))
        .load(a.id)
        .await
        .unwrap();
    for (function, query) in [
        ("conversation_search", "Rex"),
        ("archival_memory_search", "rivers"),
    ] {
        let record = agent
            .call(
                function,
                json!({"query": query, "page": u32::MAX, "request_heartbeat": false}),
            )
            .await
            .unwrap();
        assert!(
            record.ok && record.output.contains("is past the end"),
            "{}: {function}: {}",
            backend.name(),
            record.output
        );
    }
}

/// Archival search with tag and date-range filters, in every mode, returns exactly what the
/// in-memory reference returns.
pub async fn archival_filters_by_tag_and_date(backend: &StoreUnderTest) {
    let s = backend.open().await;
    let mut a = new_agent(&s, "a").await;
    let tagged = |text: &str, tags: &[&str], days: i64| {
        let mut p = passage(a.id, text, t0() + Duration::days(days));
        p.embedding = Some(embed(text));
        if !tags.is_empty() {
            p.metadata.insert(TAGS_KEY.into(), json!(tags));
        }
        p
    };
    let passages = vec![
        tagged("green tea in the morning", &["drinks"], 0),
        tagged("the blue tea kettle", &["home", "kitchen"], 10),
        tagged("tea with lemon", &[], 20),
        tagged("kitchen tiles are white", &["kitchen"], 30),
    ];
    s.agents
        .commit(&a.next_commit(vec![], passages.clone()))
        .await
        .unwrap();
    let reference = Storage::from_store(Arc::new(InMemoryStore::new()));
    let mut r = state(a.id, "a");
    reference.agents.create_agent(&r).await.unwrap();
    reference
        .agents
        .commit(&r.next_commit(vec![], passages))
        .await
        .unwrap();
    let filters: [(Vec<&str>, TimeRange); 4] = [
        (vec!["kitchen"], TimeRange::default()),
        (vec!["drinks", "home"], TimeRange::default()),
        (
            vec![],
            TimeRange {
                start: Some(t0() + Duration::days(5)),
                end: Some(t0() + Duration::days(25)),
            },
        ),
        (
            vec!["kitchen"],
            TimeRange {
                start: None,
                end: Some(t0() + Duration::days(15)),
            },
        ),
    ];
    for (tags, range) in filters {
        for mode in [SearchMode::Vector, SearchMode::Text, SearchMode::Hybrid] {
            let q = ArchivalQuery {
                tags: tags.iter().map(|t| (*t).to_owned()).collect(),
                range,
                ..ArchivalQuery::new("tea kitchen", mode, Page::first(10))
                    .with_embedding(embed("tea kitchen"))
            };
            let ours = s.archival.search(a.id, &q).await.unwrap();
            let theirs = reference.archival.search(a.id, &q).await.unwrap();
            let texts = |p: &memgpt_core::store::SearchPage<Passage>| {
                let mut t: Vec<String> = p.hits.iter().map(|h| h.item.text.clone()).collect();
                t.sort();
                t
            };
            assert_eq!(
                texts(&ours),
                texts(&theirs),
                "{}: {mode:?} with tags {tags:?} and {range:?}",
                backend.name()
            );
            assert_eq!(ours.total, theirs.total, "{}: total", backend.name());
            assert!(
                ours.hits.iter().all(|h| q.admits(&h.item)),
                "{}",
                backend.name()
            );
        }
    }
}

/// Archival search ranks like the in-memory reference in every mode, scores included: stores
/// only choose candidates, and their collection statistics (every agent's passages, kept up to
/// date through inserts, deletions and a deleted agent) are the reference's.
pub async fn archival_ranking_agrees_with_the_reference(backend: &StoreUnderTest) {
    let s = backend.open().await;
    let reference = Storage::from_store(Arc::new(InMemoryStore::new()));
    let texts = [
        "the kitchen kettle boils water for tea",
        "tea with lemon in the garden",
        "green tea and black tea in the kitchen cupboard",
        "the garden shed holds a ladder",
        "a ladder to reach the kitchen shelf",
        "notes about the launch of the rocket",
        "the rocket launch was postponed for weather",
        "weather in the garden was sunny",
    ];
    let (mut a, mut other) = (state(AgentId::new(), "a"), state(AgentId::new(), "other"));
    let (mut ra, mut rother) = (a.clone(), other.clone());
    for store in [&s, &reference] {
        store.agents.create_agent(&a).await.unwrap();
        store.agents.create_agent(&other).await.unwrap();
    }
    let passages: Vec<Passage> = texts
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let mut p = passage(a.id, text, t0() + Duration::minutes(i as i64));
            if i % 3 == 1 {
                p.embedding = None; // found by words only
            }
            p
        })
        .collect();
    let others: Vec<Passage> = ["tea tea tea", "kitchen garden weather", "unrelated words"]
        .iter()
        .map(|text| passage(other.id, text, t0()))
        .collect();
    let gone = passages[3].id;
    for (store, a, other) in [(&s, &mut a, &mut other), (&reference, &mut ra, &mut rother)] {
        store
            .agents
            .commit(&a.next_commit(vec![], passages.clone()))
            .await
            .unwrap();
        store
            .agents
            .commit(&other.next_commit(vec![], others.clone()))
            .await
            .unwrap();
        let mut delete = a.next_commit(vec![], vec![]);
        delete.deleted_passages = vec![gone];
        store.agents.commit(&delete).await.unwrap();
    }
    // A deleted agent's passages leave the statistics too.
    let doomed = new_agent(&s, "doomed").await;
    let mut doomed_state = doomed.clone();
    s.agents
        .commit(
            &doomed_state.next_commit(vec![], vec![passage(doomed.id, "tea kitchen tea", t0())]),
        )
        .await
        .unwrap();
    assert!(s.agents.delete_agent(doomed.id).await.unwrap());

    let queries = [
        "tea in the kitchen",
        "garden ladder",
        "rocket launch weather",
        "zzz nothing",
    ];
    for text in queries {
        for mode in [SearchMode::Vector, SearchMode::Text, SearchMode::Hybrid] {
            for page in [Page::first(3), Page::new(1, 3), Page::first(20)] {
                let q = ArchivalQuery::new(text, mode, page).with_embedding(embed(text));
                let ours = s.archival.search(a.id, &q).await.unwrap();
                let theirs = reference.archival.search(a.id, &q).await.unwrap();
                let ranked = |p: &memgpt_core::store::SearchPage<Passage>| {
                    p.hits
                        .iter()
                        .map(|h| (h.item.text.clone(), (h.score * 1e4).round() as i64))
                        .collect::<Vec<_>>()
                };
                assert_eq!(
                    ranked(&ours),
                    ranked(&theirs),
                    "{}: {mode:?} {text:?} page {}",
                    backend.name(),
                    page.number
                );
                assert_eq!(
                    ours.total,
                    theirs.total,
                    "{}: {mode:?} {text:?} total",
                    backend.name()
                );
            }
        }
        let terms = memgpt_core::retrieval::query_terms(text);
        let filter = ArchivalQuery::new(text, SearchMode::Text, Page::first(10));
        let ours = s
            .archival
            .text_candidates(a.id, &terms, &filter, 100)
            .await
            .unwrap();
        let theirs = reference
            .archival
            .text_candidates(a.id, &terms, &filter, 100)
            .await
            .unwrap();
        assert_eq!(
            ours.statistics,
            theirs.statistics,
            "{}: statistics of {text:?}",
            backend.name()
        );
        assert_eq!(
            (ours.total, ours.unembedded),
            (theirs.total, theirs.unembedded),
            "{}: matches of {text:?}",
            backend.name()
        );
    }
}
