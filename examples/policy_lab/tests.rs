use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use memgpt::ids::MessageId;
use memgpt::message::MessageKind;
use memgpt::queue::{ContextUsage, EntryView, QueueView};

use super::*;
use crate::replay::{Event, ExtractiveSummary};

fn view_entries(n: usize) -> Vec<EntryView> {
    (0..n)
        .map(|i| EntryView {
            id: MessageId::new(),
            kind: MessageKind::User,
            tokens: 10,
            created_at: DateTime::<Utc>::UNIX_EPOCH,
            last_used: i as u64,
            uses: 1,
            relevance: None,
            signals: Vec::new(),
            pinned: false,
        })
        .collect()
}

#[test]
fn the_clairvoyant_evicts_what_is_needed_furthest_in_the_future() {
    let entries = view_entries(4);
    let clairvoyant = Clairvoyant::default();
    clairvoyant.set_now(10);
    // 0: needed at 11; 1: never again; 2: needed at 50; 3: needed at 5 (past) then 20.
    clairvoyant.set_future(HashMap::from([
        (entries[0].id, vec![11]),
        (entries[2].id, vec![50]),
        (entries[3].id, vec![5, 20]),
    ]));
    let usage = ContextUsage {
        window: 40,
        fixed_tokens: 0,
        queue_tokens: 40,
        queue_messages: 4,
    };
    let view = QueueView {
        entries: &entries,
        usage,
    };
    assert_eq!(
        clairvoyant.select(&view),
        vec![1, 2],
        "never, then furthest"
    );
}

#[test]
fn the_lab_summary_keeps_first_sentences_within_its_budget() {
    let counter = TiktokenCounter::cl100k();
    let mut s = ExtractiveSummary::new(20);
    s.add(1, "Ann: I adopted a puppy. It is called Rex.", &counter);
    assert!(s.holds(1));
    assert_eq!(s.lines[0].1, "Ann: I adopted a puppy.");
    for t in 2..10 {
        s.add(t, "Bob: something else entirely happened today.", &counter);
    }
    assert!(s.tokens <= 20);
    assert!(!s.holds(1), "the oldest lines go first");
    assert!(s.holds(9));
}

/// The dev conversations of the shared evaluation data. The tests that read them are
/// `#[ignore]`d (the data lives next to the project, not in it, and libtest cannot ignore at
/// run time): `.ci/run` runs them with `--ignored` when the data is there.
fn dev_data() -> Vec<data::Conversation> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data/locomo/locomo5_dev.json");
    assert!(
        path.exists(),
        "{} is missing (see ../shared/data/README.md)",
        path.display()
    );
    data::locomo(&path).unwrap()
}

#[test]
#[ignore = "needs ../shared/data/locomo/locomo5_dev.json (the evaluation data next to the project): run with --ignored (.ci/run does)"]
fn questions_come_after_their_evidence_and_search_only_what_was_said() {
    let conversations = dev_data();
    let replay = prepare(&conversations[0], 7);
    let mut said = HashSet::new();
    let mut posed = 0;
    for event in &replay.trace {
        match *event {
            Event::Turn(i) => {
                said.insert(i);
            }
            Event::Question(q) => {
                posed += 1;
                let question = &replay.questions[q];
                assert!(question.evidence.iter().all(|t| said.contains(t)));
                assert!(question.search.iter().all(|t| said.contains(t)));
                assert!(question.search.len() <= replay::SEARCH_HITS);
            }
        }
    }
    assert_eq!(
        posed,
        replay.questions.len(),
        "every question is posed once"
    );
    let again = prepare(&conversations[0], 7);
    assert_eq!(
        format!("{:?}", again.trace),
        format!("{:?}", replay.trace),
        "seeded"
    );
    assert_ne!(
        conversation_seed(1, 1),
        conversation_seed(2, 0),
        "neighbouring seeds do not share placements"
    );
}

#[test]
#[ignore = "needs ../shared/data/locomo/locomo5_dev.json (the evaluation data next to the project): run with --ignored (.ci/run does)"]
fn the_upper_bound_is_above_every_policy_and_misses_cost_reloads() {
    let conversations = dev_data();
    let counter = TiktokenCounter::cl100k();
    let embedder = HashingEmbedder::new(256);
    let replay = prepare(&conversations[0], conversation_seed(3, 0));
    let tokens = replay.turn_tokens(&counter);
    let window = 4096;
    let mut best = 0;
    for name in ["paper", "lru", "attention", "salience", CLAIRVOYANT] {
        let outcome = LabPolicy::new(name)
            .unwrap()
            .run(&replay, None, window, &counter, &embedder);
        assert_eq!(outcome.overfull_events, 0, "{name}: {outcome:?}");
        assert_eq!(
            outcome.hits + outcome.in_summary + outcome.faults,
            outcome.references
        );
        assert!(
            outcome.misses > 0 && outcome.reloaded_messages > 0,
            "{name}: {outcome:?}"
        );
        assert!(
            outcome.reload_tokens >= outcome.reloaded_messages,
            "{outcome:?}"
        );
        // Deterministic per seed.
        let again = LabPolicy::new(name)
            .unwrap()
            .run(&replay, None, window, &counter, &embedder);
        assert_eq!(format!("{again:?}"), format!("{outcome:?}"), "{name}");
        best = best.max(outcome.hits);
    }
    let input = replay.bound_input(&tokens, window, &counter);
    assert!(
        input.filled_since.iter().any(Option::is_some),
        "the capacity fills up"
    );
    assert!(input.retained < input.capacity);
    let bound = bound::upper_bound(&input, best as f64);
    let references: usize = replay.questions.iter().map(|q| q.evidence.len()).sum();
    assert!(bound.hits >= best, "{bound:?} under a policy's {best} hits");
    assert!(
        bound.hits < references,
        "the bound binds: {bound:?} of {references}"
    );
}

#[test]
#[ignore = "needs ../shared/data/locomo/locomo5_dev.json (the evaluation data next to the project): run with --ignored (.ci/run does)"]
fn attention_paid_to_the_evidence_keeps_it() {
    let conversations = dev_data();
    let counter = TiktokenCounter::cl100k();
    let embedder = HashingEmbedder::new(256);
    let replay = prepare(&conversations[0], conversation_seed(3, 0));
    // An oracle's attention: every turn, once said, looks at each evidence turn said before it.
    let evidence: HashSet<usize> = replay
        .questions
        .iter()
        .flat_map(|q| q.evidence.iter().copied())
        .collect();
    let attention: Vec<Shares> = (0..replay.turns.len())
        .map(|j| {
            (0..j)
                .filter(|i| evidence.contains(i))
                .map(|i| (i, 1.0))
                .collect()
        })
        .collect();
    let policy = LabPolicy::new(ATTENTION_MODEL).unwrap();
    let blind = policy.run(&replay, None, 4096, &counter, &embedder);
    let fed = policy.run(&replay, Some(&attention), 4096, &counter, &embedder);
    assert!(
        fed.hits > blind.hits + blind.hits / 4,
        "{} hits fed vs {} blind",
        fed.hits,
        blind.hits
    );
    // Only the policy that is fed it sees it.
    let plain = LabPolicy::new("attention").unwrap().run(
        &replay,
        Some(&attention),
        4096,
        &counter,
        &embedder,
    );
    assert_eq!(plain.hits, blind.hits);
}

/// SmolLM2 reads a short conversation through a window small enough to slide, and reports
/// attention on earlier turns in the window only.
#[cfg(feature = "local")]
#[test]
#[ignore = "needs SmolLM2: set MEMGPT_TEST_MODELS to the model cache .ci/models.sh fills, and run with --ignored (.ci/run does)"]
fn the_local_model_reports_what_each_turn_attended_to() {
    use memgpt::tokens::TokenCounter;

    let model = default_model()
        .expect("SmolLM2 is not in MEMGPT_TEST_MODELS or the model cache (.ci/models.sh fills it)");
    let turns: Vec<String> = [
        "Ann: I adopted a puppy last week. His name is Rex.",
        "Bob: That's wonderful! What breed is he?",
        "Ann: A border collie. He already knows how to sit.",
        "Bob: I went hiking in the Alps with my sister in June.",
        "Ann: Rex would love the mountains.",
        "Bob: Maybe we can all go together next summer.",
    ]
    .map(String::from)
    .to_vec();
    let counter = TiktokenCounter::cl100k();
    // Sized as `measure` sizes them; the fourth turn makes the window slide.
    let agent = memgpt::ids::AgentId::new();
    let sizes: Vec<usize> = turns
        .iter()
        .map(|t| {
            let m = memgpt::message::Message::new(agent, MessageKind::User, t, Utc::now());
            counter.count_message(&m.to_chat())
        })
        .collect();
    let window = sizes[..3].iter().sum::<usize>() + 2;
    let conversations = BTreeMap::from([("c".to_owned(), turns.clone())]);
    let measured = attend::measure(&model, &conversations, window, &counter).unwrap();
    assert_eq!(measured.window, window);
    assert_eq!(measured.model, "smollm2-135m-instruct/model.gguf");
    let received = &measured.conversations["c"];
    assert_eq!(received.len(), turns.len());
    assert!(
        received[0].is_empty(),
        "the first turn has nothing before it"
    );
    let (mut slid, mut attending) = (false, 0);
    for (j, shares) in received.iter().enumerate().skip(1) {
        if shares.is_empty() {
            continue; // the window restarted at this turn
        }
        attending += 1;
        assert!(
            shares.iter().all(|&(i, w)| i < j && w > 0.0 && w < 1.0),
            "{shares:?}"
        );
        let total: f32 = shares.iter().map(|(_, w)| w).sum();
        assert!(total < 1.0, "turn {j}: {total}");
        slid |= shares.iter().all(|&(i, _)| i > 0);
    }
    assert!(slid, "the window never slid: {received:?}");
    assert!(attending >= 3, "{received:?}");
}
