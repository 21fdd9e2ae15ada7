//! Facts with a lifetime: passages that are superseded, forgotten or expire, and searches that
//! see the facts valid at an instant. The same in every store as in the in-memory reference.

use std::sync::Arc;

use chrono::Duration;
use memgpt_core::ids::{AgentId, PassageId};
use memgpt_core::store::{
    ArchivalQuery, InMemoryStore, Page, Passage, PassageRetirement, SearchMode, SearchPage,
    Storage, Validity,
};

use super::StoreUnderTest;
use super::fixtures::*;

/// Retirements are stored as the reference applies them (an earlier end stands), every field
/// of a passage's lifetime reads back, the history stays listed, and searches at every instant,
/// in every mode and on every page, rank and count as the reference does. A current search
/// never returns a superseded, forgotten or expired fact; a search as of an earlier time does.
pub async fn facts_with_a_lifetime_agree_with_the_reference(backend: &StoreUnderTest) {
    let s = backend.open().await;
    let reference = Storage::from_store(Arc::new(InMemoryStore::new()));
    let (mut a, mut other) = (state(AgentId::new(), "a"), state(AgentId::new(), "other"));
    let (mut ra, mut rother) = (a.clone(), other.clone());
    for store in [&s, &reference] {
        store.agents.create_agent(&a).await.unwrap();
        store.agents.create_agent(&other).await.unwrap();
    }
    let day = |n: i64| t0() + Duration::days(n);
    let fact = |text: &str, embedded: bool| {
        let mut p = passage(a.id, text, t0());
        if !embedded {
            p.embedding = None;
        }
        p
    };
    let berlin = fact("the user lives in Berlin near the river", true);
    let acme = fact("the user works at Acme on rockets", true).valid_until(day(10));
    let tea = fact("the user likes green tea in the morning", false);
    let coffee = fact("the user drinks coffee every morning", true);
    let mut paris = fact("the user lives in Paris near the river", true);
    paris.valid_from = Some(day(5));
    paris.created_at = day(5);
    let theirs = passage(other.id, "the user lives in Rome", t0());
    let retire = |id: PassageId, at, by: Option<PassageId>, reason: &str| PassageRetirement {
        id,
        at,
        superseded_by: by,
        reason: reason.to_owned(),
    };
    for (store, a, other) in [(&s, &mut a, &mut other), (&reference, &mut ra, &mut rother)] {
        store
            .agents
            .commit(&a.next_commit(
                vec![],
                vec![berlin.clone(), acme.clone(), tea.clone(), coffee.clone()],
            ))
            .await
            .unwrap();
        store
            .agents
            .commit(&other.next_commit(vec![], vec![theirs.clone()]))
            .await
            .unwrap();
        // The update: the new version and the old one's retirement in one commit.
        let mut update = a.next_commit(vec![], vec![paris.clone()]);
        update.retired_passages = vec![
            retire(berlin.id, day(5), Some(paris.id), "superseded"),
            retire(coffee.id, day(6), None, "stopped drinking coffee"),
            // Another agent's passage is not this agent's to retire.
            retire(theirs.id, day(5), None, "not mine"),
        ];
        store.agents.commit(&update).await.unwrap();
        // A later retirement leaves an earlier end (here a time to live) as it was.
        let mut late = a.next_commit(vec![], vec![]);
        late.retired_passages = vec![retire(acme.id, day(20), None, "left the company")];
        store.agents.commit(&late).await.unwrap();
    }

    // Every field of every passage reads back as the reference holds it.
    let ids = [berlin.id, acme.id, tea.id, coffee.id, paris.id];
    let ours = s.archival.get_passages(a.id, &ids).await.unwrap();
    let expected = reference.archival.get_passages(a.id, &ids).await.unwrap();
    assert_eq!(ours, expected, "{}: stored lifetimes", backend.name());
    let stored = |id: PassageId| ours.iter().find(|p| p.id == id).cloned().unwrap();
    assert_eq!(
        stored(berlin.id).valid_to,
        Some(day(5)),
        "{}",
        backend.name()
    );
    assert_eq!(stored(berlin.id).superseded_by, Some(paris.id));
    assert_eq!(
        stored(acme.id).valid_to,
        Some(day(10)),
        "{}",
        backend.name()
    );
    assert_eq!(stored(acme.id).retired_reason, None, "{}", backend.name());
    assert_eq!(
        stored(coffee.id).retired_reason.as_deref(),
        Some("stopped drinking coffee")
    );
    let untouched = s
        .archival
        .get_passages(other.id, &[theirs.id])
        .await
        .unwrap();
    assert_eq!(untouched[0].valid_to, None, "{}", backend.name());
    // The history stays: nothing is deleted.
    assert_eq!(s.archival.count_passages(a.id).await.unwrap(), 5);

    let validities = [
        Validity::Current,
        Validity::AsOf(day(1)),
        Validity::AsOf(day(5)),
        Validity::AsOf(day(7)),
        Validity::AsOf(day(15)),
        Validity::Any,
    ];
    let queries = [
        "where does the user live river",
        "the user morning",
        "rockets at Acme",
    ];
    for validity in validities {
        for text in queries {
            for mode in [SearchMode::Vector, SearchMode::Text, SearchMode::Hybrid] {
                for page in [Page::first(2), Page::new(1, 2), Page::first(10)] {
                    let q = ArchivalQuery {
                        validity,
                        ..ArchivalQuery::new(text, mode, page).with_embedding(embed(text))
                    };
                    let ours = s.archival.search(a.id, &q).await.unwrap();
                    let theirs = reference.archival.search(a.id, &q).await.unwrap();
                    assert_eq!(
                        ranked(&ours),
                        ranked(&theirs),
                        "{}: {validity:?} {mode:?} {text:?} page {}",
                        backend.name(),
                        page.number
                    );
                    assert_eq!(
                        ours.total,
                        theirs.total,
                        "{}: {validity:?} {mode:?} {text:?} total",
                        backend.name()
                    );
                }
            }
        }
    }

    // What each instant sees of where the user lives.
    let lives = |validity| {
        let s = &s;
        async move {
            let q = ArchivalQuery {
                validity,
                ..ArchivalQuery::new("user lives river", SearchMode::Hybrid, Page::first(10))
                    .with_embedding(embed("user lives river"))
            };
            let mut found: Vec<String> = s
                .archival
                .search(a.id, &q)
                .await
                .unwrap()
                .hits
                .into_iter()
                .filter(|h| h.item.text.contains("lives"))
                .map(|h| h.item.text)
                .collect();
            found.sort();
            found
        }
    };
    assert_eq!(
        lives(Validity::Current).await,
        [paris.text.as_str()],
        "{}",
        backend.name()
    );
    assert_eq!(lives(Validity::AsOf(day(1))).await, [berlin.text.as_str()]);
    assert_eq!(lives(Validity::AsOf(day(5))).await, [paris.text.as_str()]);
    assert_eq!(
        lives(Validity::Any).await,
        [berlin.text.as_str(), paris.text.as_str()]
    );
}

/// A page's texts and scores, in order.
fn ranked(page: &SearchPage<Passage>) -> Vec<(String, i64)> {
    page.hits
        .iter()
        .map(|h| (h.item.text.clone(), (h.score * 1e4).round() as i64))
        .collect()
}
