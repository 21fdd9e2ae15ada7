//! The agent loop end to end over HTTP.

use std::collections::HashSet;
use std::sync::Arc;

use memgpt::openai::OpenAiEmbedder;
use memgpt::store::{Page, RecallQuery};
use memgpt::{Agent, StopReason};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::fake_openai::{FAKE_EMBEDDING_DIMENSION, FakeOpenAi, Reply};
use crate::{agent, config, provider};

#[memgpt_test_harness::test]
async fn heartbeats_page_through_archival_search() {
    let server = FakeOpenAi::start().await;
    let mut embed_config = config(&server);
    embed_config.model = "text-embedding-fake".into();
    let embedder = OpenAiEmbedder::new(embed_config, FAKE_EMBEDDING_DIMENSION).unwrap();
    let mut agent = Agent::builder()
        .provider(provider(&server))
        .embedder(Arc::new(embedder))
        .page_size(3)
        .build()
        .await
        .unwrap();
    for i in 0..7 {
        agent
            .insert_archival(
                &format!("Trip log {i}: we hiked the Cinque Terre trail on day {i}."),
                Default::default(),
            )
            .await
            .unwrap();
    }
    server.push_all([
        Reply::call(
            "archival_memory_search",
            json!({"query": "hiking trip", "request_heartbeat": true}),
        ),
        Reply::call(
            "archival_memory_search",
            json!({"query": "hiking trip", "page": 1, "request_heartbeat": true}),
        ),
        Reply::call(
            "archival_memory_search",
            json!({"query": "hiking trip", "page": 2, "request_heartbeat": true}),
        ),
        Reply::calls(
            "I have read everything.",
            &[(
                "send_message",
                json!({"message": "Seven days on the Cinque Terre!"}),
            )],
        ),
    ]);
    let record = agent.step("Remind me about our hiking trip").await.unwrap();
    assert_eq!(record.stop_reason, StopReason::EndTurn);
    assert_eq!(record.replies, ["Seven days on the Cinque Terre!"]);
    assert_eq!(record.llm_calls, 4);

    let requests = server.agent_requests();
    assert_eq!(requests.len(), 4);
    for (i, request) in requests.iter().enumerate().skip(1) {
        assert!(
            request.last_content().contains("\"type\":\"heartbeat\""),
            "request {i} was triggered by a heartbeat"
        );
        let tool_result = &request.messages()[request.messages().len() - 2];
        assert_eq!(tool_result["role"], "tool");
        let expected = format!("(page {} of 0-2)", i - 1);
        assert!(
            tool_result["content"].as_str().unwrap().contains(&expected),
            "{tool_result}"
        );
    }
    // Query embeddings went to the server too.
    assert!(
        server
            .all_requests()
            .iter()
            .any(|r| r.path == "/v1/embeddings" && r.body["input"] == json!(["hiking trip"]))
    );
}

#[memgpt_test_harness::test]
async fn failed_calls_trigger_a_heartbeat_with_the_error() {
    let server = FakeOpenAi::start().await;
    let mut agent = agent(&server).await;
    server.push_all([
        Reply::call("recall_everything", json!({})),
        Reply::raw_call("core_memory_append", "{'label': 'human'}"),
        Reply::call(
            "core_memory_append",
            json!({"label": "humans", "content": "x", "request_heartbeat": false}),
        ),
        Reply::call(
            "core_memory_append",
            json!({"label": "human", "content": "Name: Chad", "request_heartbeat": false}),
        ),
    ]);
    let record = agent.step("I'm Chad").await.unwrap();
    assert_eq!(record.stop_reason, StopReason::EndTurn);
    assert_eq!(record.llm_calls, 4);
    let requests = server.agent_requests();
    let error_of = |i: usize| {
        let m = requests[i].messages();
        let tool: Value =
            serde_json::from_str(m[m.len() - 2]["content"].as_str().unwrap()).unwrap();
        assert_eq!(tool["status"], "Failed");
        assert!(
            requests[i]
                .last_content()
                .contains("A function call failed")
        );
        tool["message"].as_str().unwrap().to_owned()
    };
    assert!(error_of(1).starts_with("unknown function `recall_everything`"));
    assert!(error_of(2).starts_with("the arguments to `core_memory_append` are not valid JSON"));
    assert_eq!(
        error_of(3),
        "there is no memory block labelled `humans`; the blocks are: persona, human"
    );
    assert_eq!(agent.memory().get("human").unwrap().value(), "Name: Chad");
}

#[memgpt_test_harness::test]
async fn memory_pressure_warns_once_then_flushes_with_a_summary() {
    let server = FakeOpenAi::start().await;
    let mut agent = Agent::builder()
        .provider(provider(&server))
        .system_prompt("You are a test agent.")
        .persona("I am T.")
        .block_limit(200)
        .functions(["send_message"])
        .context_window(1_200)
        .build()
        .await
        .unwrap();
    let mut warned_at = Vec::new();
    let mut flush = None;
    for i in 0..60 {
        server.push(Reply::call(
            "send_message",
            json!({"message": format!("Got it, item {i} noted.")}),
        ));
        server.push_summary(&format!(
            "The user listed items 0 to {i}; item 0 was a red kite."
        ));
        let text = if i == 0 {
            "Item 0 is a red kite.".to_owned()
        } else {
            format!("Item {i} is a plain box.")
        };
        let record = agent.step(text).await.unwrap();
        if record.pressure_warning {
            warned_at.push(i);
        }
        if let Some(f) = record.flushes.first() {
            flush = Some((i, f.clone()));
            break;
        }
    }
    let (flushed_at, flush) = flush.expect("the queue was flushed");
    assert_eq!(
        warned_at.len(),
        1,
        "exactly one warning before the flush: {warned_at:?}"
    );
    assert!(warned_at[0] < flushed_at);
    assert!(flush.summary_updated && !flush.forced);

    // The warning reached the model as a system alert, once.
    let alerts: usize = server
        .agent_requests()
        .last()
        .map(|r| {
            r.messages()
                .iter()
                .filter(|m| {
                    m["content"]
                        .as_str()
                        .unwrap_or("")
                        .contains("Memory pressure")
                })
                .count()
        })
        .unwrap();
    assert!(alerts <= 1);
    // The summarizer got the evicted messages without tools, and its summary now heads the queue.
    // With a small window the summarizer folds the evicted messages in several calls, each
    // starting from the previous one's result.
    let summarize = server.summary_requests();
    assert!(!summarize.is_empty());
    for request in &summarize {
        assert!(
            request.body.get("tools").is_none(),
            "no functions are offered to the summarizer"
        );
    }
    assert!(
        summarize[0]
            .last_content()
            .contains("Item 0 is a red kite.")
    );
    if summarize.len() > 1 {
        assert!(
            summarize[1]
                .last_content()
                .starts_with("Previous summary:\nThe user listed items")
        );
    }
    server.push(Reply::call("send_message", json!({"message": "ok"})));
    agent.step("next").await.unwrap();
    let last = server.agent_requests().pop().unwrap();
    let head = last.messages()[1]["content"].as_str().unwrap().to_owned();
    assert!(
        head.contains("Summary of the") && head.contains("item 0 was a red kite"),
        "{head}"
    );
    assert!(!last.messages().iter().any(|m| {
        m["content"]
            .as_str()
            .unwrap_or("")
            .contains("Item 0 is a red kite.")
    }));
    // Evicted messages are still in recall storage.
    let hits = agent
        .storage()
        .recall
        .search(agent.id(), &RecallQuery::text("red kite", Page::first(5)))
        .await
        .unwrap();
    assert!(
        hits.hits[0].item.text.contains("Item 0 is a red kite."),
        "{hits:?}"
    );
}

#[memgpt_test_harness::test]
async fn an_unscripted_server_ends_the_step_cleanly() {
    let server = FakeOpenAi::start().await;
    let mut agent = agent(&server).await;
    let record = agent.step("hello?").await.unwrap();
    match record.stop_reason {
        StopReason::ProviderError {
            message, retryable, ..
        } => {
            assert!(!retryable);
            assert!(message.contains("no scripted reply left"), "{message}");
        }
        other => panic!("unexpected stop: {other:?}"),
    }
    assert_eq!(server.agent_requests().len(), 1, "a 400 is not retried");
    assert_eq!(
        agent
            .storage()
            .recall
            .count_messages(agent.id())
            .await
            .unwrap(),
        1,
        "the user's message is kept"
    );
}

/// Checks OpenAI's rule on every request: each tool message answers a call of the assistant
/// message just before its group, and every call is answered.
fn check_pairing(messages: &[Value]) -> Result<(), String> {
    let mut i = 0;
    while i < messages.len() {
        let m = &messages[i];
        match m["role"].as_str() {
            Some("tool") => return Err(format!("tool message {i} without a preceding call")),
            Some("assistant") if m.get("tool_calls").is_some() => {
                let ids: HashSet<&str> = m["tool_calls"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|c| c["id"].as_str().unwrap())
                    .collect();
                let mut answered = HashSet::new();
                i += 1;
                while i < messages.len() && messages[i]["role"] == "tool" {
                    let id = messages[i]["tool_call_id"].as_str().unwrap();
                    if !ids.contains(id) {
                        return Err(format!("tool message {i} answers unknown call {id}"));
                    }
                    answered.insert(id);
                    i += 1;
                }
                if answered != ids {
                    return Err(format!("calls {ids:?} answered only by {answered:?}"));
                }
            }
            _ => i += 1,
        }
    }
    Ok(())
}

#[derive(Clone, Debug)]
struct ScriptedTurn {
    /// (function, heartbeat, text length) of each call; empty means plain text.
    calls: Vec<(u8, bool, usize)>,
}

fn scripted_turn() -> impl Strategy<Value = ScriptedTurn> {
    prop::collection::vec((0u8..3, any::<bool>(), 5usize..120), 0..4)
        .prop_map(|calls| ScriptedTurn { calls })
}

fn reply_for(turn: &ScriptedTurn, n: usize) -> Reply {
    if turn.calls.is_empty() {
        return Reply::text("just thinking");
    }
    let calls: Vec<(&str, Value)> = turn
        .calls
        .iter()
        .enumerate()
        .map(|(j, &(f, heartbeat, len))| {
            let text = format!("{n}-{j} {}", "lorem ".repeat(len / 6 + 1));
            match f {
                0 => ("send_message", json!({"message": text})),
                1 => (
                    "conversation_search",
                    json!({"query": "lorem", "request_heartbeat": heartbeat}),
                ),
                _ => (
                    "archival_memory_insert",
                    json!({"content": text, "request_heartbeat": heartbeat}),
                ),
            }
        })
        .collect();
    Reply::calls("", &calls)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, failure_persistence: None, .. ProptestConfig::default() })]

    /// Random conversations under a tiny window: every request on the wire keeps calls and
    /// results together, whatever was evicted.
    #[memgpt_test_harness::test]
    fn eviction_never_splits_calls_from_results(turns in prop::collection::vec(scripted_turn(), 20..40)) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let server = FakeOpenAi::start().await;
            let mut agent = Agent::builder()
                .provider(provider(&server))
                .system_prompt("Test.")
                .persona("T")
                .block_limit(100)
                .functions(["send_message", "conversation_search", "archival_memory_insert"])
                .context_window(900)
                .max_chain_length(3)
                .build()
                .await
                .unwrap();
            let mut flushes = 0;
            for (n, turn) in turns.iter().enumerate() {
                // Every step may chain up to three calls; script enough for all of them.
                for k in 0..3 {
                    server.push(reply_for(turn, n * 3 + k));
                }
                for _ in 0..4 {
                    server.push_summary("summary");
                }
                let record = agent.step(format!("turn {n}")).await.unwrap();
                flushes += record.flushes.len();
            }
            for request in server.agent_requests() {
                if let Err(e) = check_pairing(request.messages()) {
                    panic!("{e}");
                }
            }
            assert!(flushes > 0, "the window is small enough that eviction happens");
        });
    }
}

#[memgpt_test_harness::test]
fn the_pairing_check_catches_violations() {
    let call = |ids: &[&str]| json!({"role": "assistant", "content": null, "tool_calls": ids.iter().map(|id| json!({"id": id, "type": "function", "function": {"name": "f", "arguments": "{}"}})).collect::<Vec<_>>()});
    let result = |id: &str| json!({"role": "tool", "tool_call_id": id, "content": "{}"});
    let user = json!({"role": "user", "content": "x"});
    assert!(
        check_pairing(&[
            user.clone(),
            call(&["a", "b"]),
            result("a"),
            result("b"),
            user.clone()
        ])
        .is_ok()
    );
    assert!(
        check_pairing(&[result("a"), user.clone()]).is_err(),
        "orphan result"
    );
    assert!(
        check_pairing(&[call(&["a", "b"]), result("a"), user.clone()]).is_err(),
        "unanswered call"
    );
    assert!(
        check_pairing(&[call(&["a"]), result("z")]).is_err(),
        "wrong id"
    );
}

#[memgpt_test_harness::test]
async fn an_agent_on_sqlite_survives_a_restart() {
    let dir = tempfile_dir();
    let url = format!("sqlite://{}", dir.display());
    let server = FakeOpenAi::start().await;
    let (id, queued) = {
        let storage = url
            .parse::<memgpt::StoreConfig>()
            .unwrap()
            .open()
            .await
            .unwrap();
        let mut agent = Agent::builder()
            .provider(provider(&server))
            .storage(storage)
            .build()
            .await
            .unwrap();
        server.push(Reply::call("core_memory_append", json!({"label": "human", "content": "Has a cat named Mochi", "request_heartbeat": true})));
        server.push(Reply::call("send_message", json!({"message": "Noted!"})));
        agent.step("My cat is called Mochi").await.unwrap();
        (agent.id(), agent.context().queue().len())
    };
    // A new process: everything comes back from the data directory.
    let storage = url
        .parse::<memgpt::StoreConfig>()
        .unwrap()
        .open()
        .await
        .unwrap();
    let mut agent = Agent::builder()
        .provider(provider(&server))
        .storage(storage)
        .load(id)
        .await
        .unwrap();
    assert_eq!(
        agent.memory().get("human").unwrap().value(),
        "Has a cat named Mochi"
    );
    assert_eq!(agent.context().queue().len(), queued);
    server.push(Reply::call(
        "conversation_search",
        json!({"query": "cat", "request_heartbeat": true}),
    ));
    server.push(Reply::call("send_message", json!({"message": "Mochi!"})));
    let record = agent.step("What is my cat's name?").await.unwrap();
    assert!(
        record.function_calls[0]
            .output
            .contains("My cat is called Mochi"),
        "{}",
        record.function_calls[0].output
    );
    std::fs::remove_dir_all(dir).ok();
}

pub(crate) fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("memgpt-it-{}", memgpt::ids::AgentId::new()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
