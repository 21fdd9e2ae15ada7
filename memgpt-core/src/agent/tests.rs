//! Agent-loop tests against the scripted in-process provider.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use chrono::{Duration, TimeZone, Utc};
use serde_json::json;

use super::*;
use crate::embed::HashingEmbedder;
use crate::llm::{LlmError, LlmProvider};
use crate::message::MessageKind;
use crate::store::{AgentStore, InMemoryStore, Page, RecallQuery, RecallStore, StoreError};
use crate::testing::ScriptedProvider;
use crate::time::ManualClock;

fn llm() -> Arc<ScriptedProvider> {
    Arc::new(ScriptedProvider::new())
}

async fn agent(llm: &Arc<ScriptedProvider>) -> Agent {
    Agent::builder()
        .provider(llm.clone())
        .build()
        .await
        .unwrap()
}

/// A small agent whose context fills after a handful of steps.
async fn small_agent(llm: &Arc<ScriptedProvider>, window: usize) -> Agent {
    Agent::builder()
        .provider(llm.clone())
        .system_prompt("You are a test agent.")
        .persona("I am T.")
        .block_limit(200)
        .functions(["send_message", "conversation_search"])
        .context_window(window)
        .build()
        .await
        .unwrap()
}

fn kinds(record: &StepRecord) -> Vec<MessageKind> {
    record.messages.iter().map(|m| m.kind).collect()
}

#[tokio::test]
async fn send_message_ends_the_turn_and_commits_the_step() {
    let llm = llm();
    llm.push_calls(
        "Greet them.",
        &[("send_message", json!({"message": "Hello!"}))],
    );
    let mut agent = agent(&llm).await;
    let record = agent.step("hi there").await.unwrap();
    assert_eq!(record.replies, ["Hello!"]);
    assert_eq!(record.stop_reason, StopReason::EndTurn);
    assert_eq!(record.llm_calls, 1);
    assert_eq!(
        kinds(&record),
        [
            MessageKind::User,
            MessageKind::Assistant,
            MessageKind::FunctionReturn
        ]
    );
    assert_eq!(record.messages[1].text, "Greet them.");
    assert_eq!(agent.version(), 1);
    assert_eq!(
        agent
            .storage()
            .recall
            .count_messages(agent.id())
            .await
            .unwrap(),
        3
    );
    let stored = agent
        .storage()
        .agents
        .load_agent(agent.id())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        stored.fifo,
        record.messages.iter().map(|m| m.id).collect::<Vec<_>>()
    );
    // The request carried the system prompt, memory, and all eight functions.
    let request = &llm.requests()[0];
    assert_eq!(request.tools.len(), 8);
    assert!(request.messages[0].content.contains("<persona characters="));
    assert!(
        request
            .messages
            .last()
            .unwrap()
            .content
            .contains("hi there")
    );
}

#[tokio::test]
async fn terminal_functions_tolerate_a_heartbeat_flag() {
    let llm = llm();
    llm.push_call(
        "send_message",
        json!({"message": "hi", "request_heartbeat": false}),
    );
    let mut agent = agent(&llm).await;
    let record = agent.step("hello").await.unwrap();
    assert_eq!(record.replies, ["hi"]);
    assert!(record.function_calls[0].ok);
    assert_eq!(record.llm_calls, 1);
}

#[tokio::test]
async fn a_flush_never_evicts_the_result_the_model_must_read() {
    let llm = llm();
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .system_prompt("You are a test agent.")
        .persona("I am T.")
        .functions(["send_message", "archival_memory_search"])
        .context_window(2_400)
        .build()
        .await
        .unwrap();
    for i in 0..3 {
        llm.push_call("send_message", json!({"message": format!("reply {i}")}));
        agent.step(format!("small talk {i}")).await.unwrap();
    }
    for i in 0..5 {
        let text = format!(
            "Vault note {i}: {}",
            "the code is kept in the blue binder. ".repeat(27)
        );
        agent
            .insert_archival(&text, Default::default())
            .await
            .unwrap();
    }
    // The search result (five long hits) pushes the context into the flush zone before the
    // next call, which must still see it.
    llm.push_call(
        "archival_memory_search",
        json!({"query": "vault note", "request_heartbeat": true}),
    );
    llm.push_summary(Ok("Earlier: small talk.".into()));
    llm.push_call(
        "send_message",
        json!({"message": "It is in the blue binder."}),
    );
    let record = agent.step("Where is the vault code kept?").await.unwrap();
    assert_eq!(record.stop_reason, StopReason::EndTurn);
    assert_eq!(record.flushes.len(), 1, "the result caused a flush");
    let requests = llm.agent_requests();
    let second = &requests.last().unwrap().messages;
    let n = second.len();
    assert!(second[n - 1].content.contains("\"type\":\"heartbeat\""));
    assert!(
        second[n - 2].content.contains("Showing results 1-5 of 5"),
        "the function result survived the flush"
    );
    assert!(
        second
            .iter()
            .any(|m| m.content.contains("Where is the vault code kept?")),
        "the event survived"
    );
    assert!(
        !second.iter().any(|m| m.content.contains("small talk 0")),
        "older history was evicted instead"
    );
}

#[tokio::test]
async fn heartbeats_chain_through_archival_pages() {
    let llm = llm();
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .page_size(2)
        .build()
        .await
        .unwrap();
    for i in 0..5 {
        agent
            .insert_archival(
                &format!("fact {i}: the project codename is Bluebird"),
                Default::default(),
            )
            .await
            .unwrap();
    }
    for page in 0..3 {
        llm.push_call(
            "archival_memory_search",
            json!({"query": "codename", "page": page, "request_heartbeat": true}),
        );
    }
    llm.push_call("send_message", json!({"message": "It is Bluebird."}));
    let record = agent.step("what is the codename?").await.unwrap();
    assert_eq!(record.stop_reason, StopReason::EndTurn);
    assert_eq!(record.llm_calls, 4);
    let outputs: Vec<&str> = record
        .function_calls
        .iter()
        .map(|c| c.output.as_str())
        .collect();
    assert!(
        outputs[0].starts_with("Showing results 1-2 of 5 (page 0 of 0-2)"),
        "{}",
        outputs[0]
    );
    assert!(outputs[0].ends_with("call again with page=1."));
    assert!(outputs[2].starts_with("Showing results 5-5 of 5 (page 2 of 0-2)"));
    assert!(!outputs[2].contains("More results"));
    let heartbeats = record
        .messages
        .iter()
        .filter(|m| m.kind == MessageKind::Heartbeat)
        .count();
    assert_eq!(heartbeats, 3);
    // Each follow-up request ends with the heartbeat that caused it.
    for request in &llm.requests()[1..] {
        assert!(
            request
                .messages
                .last()
                .unwrap()
                .content
                .contains("\"type\":\"heartbeat\"")
        );
    }
}

#[tokio::test]
async fn failed_calls_give_control_back_with_a_precise_error() {
    let llm = llm();
    llm.push_call("send_mesage", json!({"message": "typo"}));
    llm.push_raw_calls(
        "",
        vec![("core_memory_append".into(), "{\"label\": \"human\",".into())],
    );
    llm.push_call(
        "core_memory_append",
        json!({"label": "human", "request_heartbeat": false}),
    );
    llm.push_call(
        "core_memory_append",
        json!({"label": "human", "content": 5, "request_heartbeat": false}),
    );
    llm.push_call("send_message", json!({"message": "done", "extra": 1}));
    llm.push_call("send_message", json!({"message": "done"}));
    let mut agent = agent(&llm).await;
    let record = agent.step("hello").await.unwrap();
    assert_eq!(record.stop_reason, StopReason::EndTurn);
    assert_eq!(record.llm_calls, 6);
    let errors: Vec<&str> = record
        .function_calls
        .iter()
        .filter(|c| !c.ok)
        .map(|c| c.output.as_str())
        .collect();
    assert_eq!(errors.len(), 5);
    assert!(
        errors[0].starts_with(
            "unknown function `send_mesage`; the available functions are: send_message,"
        )
    );
    assert!(errors[1].starts_with("the arguments to `core_memory_append` are not valid JSON"));
    assert_eq!(
        errors[2],
        "invalid arguments for `core_memory_append`: missing field `content`"
    );
    assert!(errors[3].starts_with("invalid arguments for `core_memory_append`: `content`: invalid type: integer `5`, expected a string"));
    assert!(errors[4].contains("unknown field `extra`"));
    // The model saw each error in the next request, followed by a failure heartbeat.
    let second = &llm.requests()[1];
    let n = second.messages.len();
    assert!(
        second.messages[n - 2]
            .content
            .contains("\"status\":\"Failed\"")
    );
    assert!(
        second.messages[n - 1]
            .content
            .contains("A function call failed")
    );
    assert_eq!(
        agent.memory().get("human").unwrap().value(),
        "",
        "no failed call changed memory"
    );
}

#[tokio::test]
async fn oversize_arguments_are_refused_before_parsing_with_a_way_out() {
    let llm = llm();
    let limit = AgentConfig::default().max_function_argument_bytes;
    let huge = "x".repeat(limit + 1);
    llm.push_call(
        "archival_memory_insert",
        json!({"content": huge, "request_heartbeat": true}),
    );
    let fits = "y".repeat(limit - 100);
    llm.push_call(
        "archival_memory_insert",
        json!({"content": fits, "request_heartbeat": true}),
    );
    llm.push_call("send_message", json!({"message": "stored"}));
    let mut agent = agent(&llm).await;
    let record = agent.step("store this").await.unwrap();
    assert_eq!(record.stop_reason, StopReason::EndTurn);
    let refused = &record.function_calls[0];
    assert!(!refused.ok);
    assert!(
        refused
            .output
            .contains("over the limit of 1048576 bytes per call")
            && refused.output.contains("split the content"),
        "{}",
        refused.output
    );
    // Nothing of the refused call was stored; the one within the limit was.
    assert!(
        record.function_calls[1].ok,
        "{}",
        record.function_calls[1].output
    );
    let archival = &agent.storage().archival;
    let stored = archival.count_passages(agent.id()).await.unwrap();
    assert!(stored > 0);
    let page = archival
        .list_passages(agent.id(), Page::first(stored as usize))
        .await
        .unwrap();
    assert_eq!(page.hits.len() as u64, stored);
    assert!(
        page.hits.iter().all(|h| !h.item.text.contains('x')),
        "no passage of the refused call"
    );
}

#[tokio::test]
async fn tool_errors_are_reported_and_memory_limits_say_how_far_over() {
    let llm = llm();
    llm.push_call(
        "core_memory_append",
        json!({"label": "human", "content": "x".repeat(30), "request_heartbeat": false}),
    );
    llm.push_call("core_memory_replace", json!({"label": "human", "old_content": "nope", "new_content": "y", "request_heartbeat": false}));
    llm.push_call("send_message", json!({"message": "ok"}));
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .block_limit(20)
        .persona("I am T.")
        .human("Name: Chad")
        .build()
        .await
        .unwrap();
    let record = agent.step("remember this").await.unwrap();
    assert_eq!(
        record.function_calls[0].output,
        "edit rejected: block `human` would hold 41 characters but its limit is 20 (21 over); shorten the text, \
         replace older content, or move details to archival memory"
    );
    assert!(
        record.function_calls[1]
            .output
            .contains("was not found in block `human`")
    );
    assert_eq!(record.stop_reason, StopReason::EndTurn);
}

#[tokio::test]
async fn memory_edits_show_in_the_next_prompt_and_persist() {
    let llm = llm();
    llm.push_call(
        "core_memory_append",
        json!({"label": "human", "content": "Name: Chad", "request_heartbeat": true}),
    );
    llm.push_call("core_memory_replace", json!({"label": "persona", "old_content": "Sam", "new_content": "Samantha", "request_heartbeat": true}));
    llm.push_call("send_message", json!({"message": "Nice to meet you, Chad"}));
    let mut agent = agent(&llm).await;
    agent.step("I'm Chad").await.unwrap();
    assert!(llm.requests()[1].messages[0].content.contains("Name: Chad"));
    assert!(
        llm.requests()[2].messages[0]
            .content
            .contains("I am Samantha")
    );
    let stored = agent
        .storage()
        .agents
        .load_agent(agent.id())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.memory.get("human").unwrap().value(), "Name: Chad");
}

#[tokio::test]
async fn the_chain_is_bounded() {
    let llm = llm();
    for _ in 0..20 {
        llm.push_call(
            "conversation_search",
            json!({"query": "x", "request_heartbeat": true}),
        );
    }
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .max_chain_length(4)
        .build()
        .await
        .unwrap();
    let record = agent.step("loop forever").await.unwrap();
    assert_eq!(record.stop_reason, StopReason::ChainLimit { limit: 4 });
    assert_eq!(record.llm_calls, 4);
    assert_eq!(
        record.messages.last().unwrap().kind,
        MessageKind::FunctionReturn,
        "no dangling heartbeat"
    );
}

#[tokio::test]
async fn text_without_a_call_is_inner_monologue() {
    let llm = llm();
    llm.push_text("I should think about this.");
    let mut agent = agent(&llm).await;
    let record = agent.step("hm").await.unwrap();
    assert_eq!(record.stop_reason, StopReason::NoFunctionCall);
    assert!(record.replies.is_empty());
    assert_eq!(record.messages[1].kind, MessageKind::Assistant);
    assert_eq!(record.messages[1].text, "I should think about this.");
}

#[tokio::test]
async fn provider_errors_end_the_step_but_keep_the_message() {
    let llm = llm();
    llm.push_error(LlmError::Transient {
        status: Some(503),
        message: "overloaded".into(),
        retry_after: None,
    });
    let mut agent = agent(&llm).await;
    let record = agent.step("are you there?").await.unwrap();
    assert!(matches!(
        record.stop_reason,
        StopReason::ProviderError {
            retryable: true,
            ..
        }
    ));
    assert_eq!(
        agent
            .storage()
            .recall
            .count_messages(agent.id())
            .await
            .unwrap(),
        1
    );
    assert_eq!(agent.context().queue().len(), 1);
}

#[tokio::test]
async fn the_warning_fires_once_and_a_flush_summarises() {
    let llm = llm();
    let mut agent = small_agent(&llm, 900).await;
    let mut warnings = Vec::new();
    let mut flush_step = None;
    for i in 0..40 {
        llm.push_call(
            "send_message",
            json!({"message": format!("reply number {i} with some padding words")}),
        );
        llm.push_summary(Ok(format!(
            "Summary after step {i}: we exchanged numbered messages."
        )));
        let record = agent
            .step(format!("message {i}: the secret word is word{i}"))
            .await
            .unwrap();
        assert_eq!(record.stop_reason, StopReason::EndTurn);
        if record.pressure_warning {
            warnings.push(i);
        }
        if !record.flushes.is_empty() {
            flush_step = Some((i, record));
            break;
        }
    }
    let (flushed_at, record) = flush_step.expect("the queue flushed");
    assert_eq!(
        warnings.len(),
        1,
        "one warning before the flush, not one per message: {warnings:?}"
    );
    assert!(warnings[0] < flushed_at);
    let flush = &record.flushes[0];
    assert!(!flush.forced && flush.summary_updated);
    assert!(flush.tokens_after < flush.tokens_before);
    assert!(flush.evicted_messages > 0 && flush.evicted_tokens > 0);

    // The summary heads the queue and counts the evicted messages.
    let summary = agent.summary().clone();
    assert!(summary.text.starts_with("Summary after step"));
    assert_eq!(summary.evicted_messages, flush.evicted_messages as u64);
    let prompt = agent.prompt();
    assert!(prompt[1].content.contains(&format!(
        "Summary of the {} earlier messages",
        flush.evicted_messages
    )));
    assert!(
        !prompt
            .iter()
            .any(|m| m.content.contains("the secret word is word0"))
    );
    // The summarizer saw the evicted messages and no functions.
    let summary_request = &llm.summary_requests()[0];
    assert!(summary_request.tools.is_empty());
    assert!(
        summary_request.messages[1]
            .content
            .contains("the secret word is word0")
    );
    // Evicted messages remain in recall storage.
    let found = agent
        .storage()
        .recall
        .search(agent.id(), &RecallQuery::text("word0", Page::first(5)))
        .await
        .unwrap();
    assert!(
        found.hits[0].item.text.contains("the secret word is word0"),
        "{found:?}"
    );
    // The queue never starts with a function result.
    let first = agent.context().queue().get(0).unwrap().message().kind;
    assert!(!matches!(
        first,
        MessageKind::FunctionReturn | MessageKind::FunctionError
    ));
    // The warning message itself was a system alert the model saw.
    let alerts = agent
        .storage()
        .recall
        .search(
            agent.id(),
            &RecallQuery {
                text: Some("memory pressure".into()),
                ..RecallQuery::kinds([MessageKind::SystemAlert], Page::first(5))
            },
        )
        .await
        .unwrap();
    assert_eq!(alerts.total, 1);
}

#[tokio::test]
async fn a_failed_summary_keeps_the_old_one_and_loses_no_message() {
    for empty in [false, true] {
        a_failed_or_empty_summary_keeps_the_old_one(empty).await;
    }
}

/// The summariser fails (or, `empty`, returns only whitespace) at the first flush.
async fn a_failed_or_empty_summary_keeps_the_old_one(empty: bool) {
    let llm = llm();
    let mut agent = small_agent(&llm, 700).await;
    let mut flushed = false;
    for i in 0..40 {
        llm.push_call("send_message", json!({"message": format!("reply {i}")}));
        llm.push_summary(if empty {
            Ok("  \n ".to_owned())
        } else {
            Err(LlmError::Transient {
                status: Some(500),
                message: "down".into(),
                retry_after: None,
            })
        });
        let record = agent
            .step(format!(
                "message {i} padded with several extra words to fill context"
            ))
            .await
            .unwrap();
        if let Some(flush) = record.flushes.first() {
            assert!(!flush.summary_updated);
            flushed = true;
            break;
        }
    }
    assert!(flushed);
    assert_eq!(agent.summary().text, "");
    assert!(agent.summary().evicted_messages > 0);
    let total = agent
        .storage()
        .recall
        .count_messages(agent.id())
        .await
        .unwrap();
    assert!(total as usize > agent.context().queue().len());
    let all = agent
        .storage()
        .recall
        .search(agent.id(), &RecallQuery::kinds([], Page::first(1000)))
        .await
        .unwrap();
    assert_eq!(all.total as u64, total);
}

#[tokio::test]
async fn a_context_overflow_forces_a_flush_and_one_retry() {
    let llm = llm();
    let mut agent = small_agent(&llm, 100_000).await;
    for i in 0..6 {
        llm.push_call("send_message", json!({"message": format!("reply {i}")}));
        agent.step(format!("filler {i}")).await.unwrap();
    }
    llm.push_error(LlmError::ContextOverflow {
        message: "maximum context length is 4096".into(),
    });
    llm.push_call("send_message", json!({"message": "after the flush"}));
    llm.push_summary(Ok("Earlier: filler.".into()));
    let record = agent.step("one more").await.unwrap();
    assert_eq!(record.stop_reason, StopReason::EndTurn);
    assert_eq!(record.llm_calls, 2);
    assert_eq!(record.flushes.len(), 1);
    assert!(record.flushes[0].forced);
    assert_eq!(agent.summary().text, "Earlier: filler.");

    // A second overflow in the same step is not retried again.
    llm.push_error(LlmError::ContextOverflow {
        message: "still too long".into(),
    });
    llm.push_error(LlmError::ContextOverflow {
        message: "still too long".into(),
    });
    llm.push_summary(Ok("Earlier: more filler.".into()));
    let record = agent.step("and again").await.unwrap();
    assert!(matches!(
        record.stop_reason,
        StopReason::ProviderError {
            retryable: false,
            ..
        }
    ));
    assert_eq!(record.llm_calls, 2);
}

#[tokio::test]
async fn an_oversize_message_is_refused_before_anything_is_stored() {
    let llm = llm();
    let mut agent = small_agent(&llm, 1000).await;
    let err = agent.step("word ".repeat(2000)).await.unwrap_err();
    assert!(matches!(err, Error::MessageTooLarge { .. }), "{err}");
    assert_eq!(
        agent
            .storage()
            .recall
            .count_messages(agent.id())
            .await
            .unwrap(),
        0
    );
    assert_eq!(agent.version(), 0);
    assert!(llm.requests().is_empty());
}

/// An agent store that can refuse commits, or apply them and then acknowledge late.
#[derive(Debug)]
struct FaultyStore {
    inner: Arc<InMemoryStore>,
    fail: AtomicBool,
    ack_delay: Option<std::time::Duration>,
}

impl FaultyStore {
    /// Storage whose commits go through a `FaultyStore`, and the store behind it.
    fn storage(
        ack_delay: Option<std::time::Duration>,
    ) -> (Arc<InMemoryStore>, Arc<FaultyStore>, Storage) {
        let inner = Arc::new(InMemoryStore::new());
        let faulty = Arc::new(FaultyStore {
            inner: inner.clone(),
            fail: AtomicBool::new(false),
            ack_delay,
        });
        let storage = Storage {
            agents: faulty.clone(),
            recall: inner.clone(),
            archival: inner.clone(),
        };
        (inner, faulty, storage)
    }
}

#[async_trait]
impl AgentStore for FaultyStore {
    async fn create_agent(&self, state: &AgentState) -> Result<(), StoreError> {
        self.inner.create_agent(state).await
    }
    async fn load_agent(&self, id: AgentId) -> Result<Option<AgentState>, StoreError> {
        self.inner.load_agent(id).await
    }
    async fn list_agents(&self) -> Result<Vec<AgentState>, StoreError> {
        self.inner.list_agents().await
    }
    async fn delete_agent(&self, id: AgentId) -> Result<bool, StoreError> {
        self.inner.delete_agent(id).await
    }
    async fn commit(&self, commit: &Commit) -> Result<(), StoreError> {
        if self.fail.load(Ordering::SeqCst) {
            return Err(StoreError::Backend {
                message: "disk full".into(),
                transient: false,
                source: None,
            });
        }
        self.inner.commit(commit).await?;
        if let Some(delay) = self.ack_delay {
            tokio::time::sleep(delay).await;
        }
        Ok(())
    }
    async fn store_message_embeddings(
        &self,
        agent: AgentId,
        embeddings: &[crate::store::MessageEmbedding],
    ) -> Result<(), StoreError> {
        self.inner.store_message_embeddings(agent, embeddings).await
    }
    async fn embedding_space(&self) -> Result<Option<crate::store::EmbeddingSpace>, StoreError> {
        self.inner.embedding_space().await
    }
}

#[tokio::test]
async fn a_failed_commit_leaves_the_agent_as_it_was() {
    let (inner, flaky, storage) = FaultyStore::storage(None);
    let llm = llm();
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .storage(storage)
        .build()
        .await
        .unwrap();
    llm.push_call("send_message", json!({"message": "first"}));
    agent.step("one").await.unwrap();
    let before = (
        agent.version(),
        agent.context().queue().ids(),
        agent.memory().clone(),
        agent.stats(),
    );

    flaky.fail.store(true, Ordering::SeqCst);
    llm.push_call(
        "core_memory_append",
        json!({"label": "human", "content": "Likes tea", "request_heartbeat": true}),
    );
    llm.push_call("send_message", json!({"message": "second"}));
    let err = agent.step("two").await.unwrap_err();
    assert!(err.to_string().contains("disk full"));
    assert_eq!(
        (
            agent.version(),
            agent.context().queue().ids(),
            agent.memory().clone(),
            agent.stats()
        ),
        before
    );

    // The same event can be retried once storage recovers.
    flaky.fail.store(false, Ordering::SeqCst);
    llm.push_call("send_message", json!({"message": "second"}));
    let record = agent.step("two").await.unwrap();
    assert_eq!(record.replies, ["second"]);
    assert_eq!(inner.count_messages(agent.id()).await.unwrap(), 6);
}

#[tokio::test]
async fn a_commit_interrupted_after_landing_is_resynchronised() {
    let (inner, _, storage) = FaultyStore::storage(Some(std::time::Duration::from_millis(200)));
    let llm = llm();
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .storage(storage)
        .build()
        .await
        .unwrap();
    llm.push_call("send_message", json!({"message": "one"}));
    // The commit lands, but the caller gives up before it is acknowledged.
    let interrupted =
        tokio::time::timeout(std::time::Duration::from_millis(50), agent.step("first")).await;
    assert!(interrupted.is_err());
    assert_eq!(agent.version(), 0, "the in-memory agent was rolled back");
    assert_eq!(
        inner.load_agent(agent.id()).await.unwrap().unwrap().version,
        1,
        "but the commit landed"
    );

    // The next step first reloads what was stored, so nothing conflicts and nothing is lost.
    llm.push_call("send_message", json!({"message": "two"}));
    let record = agent.step("second").await.unwrap();
    assert_eq!(record.replies, ["two"]);
    assert_eq!(agent.version(), 2);
    assert_eq!(inner.count_messages(agent.id()).await.unwrap(), 6);
    let last = &llm.agent_requests()[1].messages;
    assert!(
        last.iter()
            .any(|m| m.content.contains("\"message\":\"first\"")),
        "the landed step is in context"
    );
}

#[tokio::test]
async fn a_failed_pin_changes_nothing() {
    let (inner, flaky, storage) = FaultyStore::storage(None);
    let llm = llm();
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .storage(storage)
        .build()
        .await
        .unwrap();
    llm.push_call("send_message", json!({"message": "hi"}));
    let record = agent.step("remember this one").await.unwrap();
    let id = record.messages[0].id;
    flaky.fail.store(true, Ordering::SeqCst);
    assert!(agent.pin(id, true).await.is_err());
    assert!(!agent.context().queue().entries().any(|e| e.is_pinned()));
    flaky.fail.store(false, Ordering::SeqCst);
    assert!(agent.pin(id, true).await.unwrap());
    assert!(agent.context().queue().get(0).unwrap().is_pinned());
    assert_eq!(
        inner.load_agent(agent.id()).await.unwrap().unwrap().pinned,
        vec![id]
    );
    assert!(
        !agent.pin(crate::ids::MessageId::new(), true).await.unwrap(),
        "not queued"
    );
}

#[tokio::test]
async fn two_handles_on_one_agent_take_turns_without_conflict() {
    // Two processes sharing a store each hold the same agent.
    let storage = Storage::in_memory();
    let llm = llm();
    let mut a = Agent::builder()
        .provider(llm.clone())
        .storage(storage.clone())
        .build()
        .await
        .unwrap();
    let mut b = Agent::builder()
        .provider(llm.clone())
        .storage(storage.clone())
        .load(a.id())
        .await
        .unwrap();
    llm.push_call("send_message", json!({"message": "from a"}));
    a.step("to a").await.unwrap();
    llm.push_call("send_message", json!({"message": "from b"}));
    let record = b.step("to b").await.unwrap();
    assert_eq!(record.replies, ["from b"]);
    assert_eq!(b.version(), 2, "b caught up with a's step before its own");
    let seen = &llm.agent_requests()[1].messages;
    assert!(
        seen.iter()
            .any(|m| m.content.contains("\"message\":\"to a\"")),
        "b saw a's step"
    );
    // And a catches up in turn.
    llm.push_call("send_message", json!({"message": "a again"}));
    a.step("to a again").await.unwrap();
    assert_eq!(a.version(), 3);
    assert_eq!(storage.recall.count_messages(a.id()).await.unwrap(), 9);
}

#[tokio::test]
async fn loading_applies_the_builders_settings() {
    let storage = Storage::in_memory();
    let agent = Agent::builder()
        .provider(llm())
        .storage(storage.clone())
        .build()
        .await
        .unwrap();
    let loaded = Agent::builder()
        .provider(llm())
        .storage(storage)
        .page_size(2)
        .max_chain_length(3)
        .function("explode")
        .load(agent.id())
        .await
        .unwrap();
    assert_eq!(loaded.config().page_size, 2);
    assert_eq!(loaded.config().max_chain_length, 3);
    assert_eq!(loaded.function_set().names().last(), Some("explode"));
    assert_eq!(
        loaded.config().context_window,
        agent.config().context_window,
        "unset settings keep their stored value"
    );
}

#[derive(Debug)]
struct Stalled;

#[async_trait]
impl crate::llm::LlmProvider for Stalled {
    fn model(&self) -> &str {
        "stalled"
    }
    async fn complete(
        &self,
        _: &crate::llm::ChatRequest,
    ) -> Result<crate::llm::ChatResponse, LlmError> {
        std::future::pending().await
    }
}

#[tokio::test]
async fn a_cancelled_step_leaves_no_trace() {
    let mut agent = Agent::builder()
        .provider(Arc::new(Stalled))
        .build()
        .await
        .unwrap();
    let stats = agent.stats();
    let result =
        tokio::time::timeout(std::time::Duration::from_millis(20), agent.step("hello?")).await;
    assert!(result.is_err(), "the step timed out");
    assert_eq!(agent.stats(), stats);
    assert_eq!(agent.context().queue().len(), 0);
    assert_eq!(
        agent
            .storage()
            .recall
            .count_messages(agent.id())
            .await
            .unwrap(),
        0
    );
}

#[tokio::test]
async fn paused_timers_are_ignored() {
    let llm = llm();
    let start = Utc.with_ymd_and_hms(2025, 6, 1, 9, 0, 0).unwrap();
    let clock = Arc::new(ManualClock::new(start));
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .clock(clock.clone())
        .build()
        .await
        .unwrap();
    llm.push_calls(
        "",
        &[(
            "pause_heartbeats",
            json!({"minutes": 30, "request_heartbeat": false}),
        )],
    );
    let record = agent.step(Event::timer("hourly check-in")).await.unwrap();
    assert_eq!(record.stop_reason, StopReason::EndTurn);
    assert_eq!(
        agent.timers_paused_until(),
        Some(start + Duration::minutes(30))
    );

    clock.advance(Duration::minutes(10));
    let calls = llm.requests().len();
    let record = agent.step(Event::timer("hourly check-in")).await.unwrap();
    assert_eq!(record.stop_reason, StopReason::TimersPaused);
    assert!(record.messages.is_empty());
    assert_eq!(llm.requests().len(), calls);

    clock.advance(Duration::minutes(25));
    llm.push_call("send_message", json!({"message": "checking in"}));
    let record = agent.step(Event::timer("hourly check-in")).await.unwrap();
    assert_eq!(record.replies, ["checking in"]);

    let bad = llm.requests().len();
    llm.push_call(
        "pause_heartbeats",
        json!({"minutes": 1000, "request_heartbeat": false}),
    );
    llm.push_call("send_message", json!({"message": "ok"}));
    let record = agent.step("pause a lot").await.unwrap();
    assert!(record.function_calls[0].output.contains("at most 360"));
    assert!(llm.requests().len() > bad);
}

#[tokio::test]
async fn logins_mention_the_previous_one() {
    let llm = llm();
    let start = Utc.with_ymd_and_hms(2025, 6, 1, 9, 0, 0).unwrap();
    let clock = Arc::new(ManualClock::new(start));
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .clock(clock.clone())
        .build()
        .await
        .unwrap();
    llm.push_call("send_message", json!({"message": "welcome"}));
    let first = agent.step(Event::login()).await.unwrap();
    assert_eq!(
        first.messages[0].text,
        "The user logged in for the first time."
    );
    clock.advance(Duration::days(2));
    llm.push_call("send_message", json!({"message": "welcome back"}));
    let second = agent.step(Event::login()).await.unwrap();
    assert_eq!(
        second.messages[0].text,
        "The user logged in. Their previous login was at 2025-06-01T09:00:00Z."
    );
}

#[tokio::test]
async fn documents_go_to_archival_storage_within_limits() {
    let llm = llm();
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .embedder(Arc::new(HashingEmbedder::new(64)))
        .config(AgentConfig {
            max_document_bytes: 2_000,
            passage_tokens: 40,
            ..AgentConfig::default()
        })
        .build()
        .await
        .unwrap();
    let doc = (0..12)
        .map(|i| format!("Paragraph {i} talks about topic {i} in some detail."))
        .collect::<Vec<_>>()
        .join("\n\n");
    llm.push_call(
        "archival_memory_search",
        json!({"query": "topic 7", "request_heartbeat": true}),
    );
    llm.push_call("send_message", json!({"message": "read it"}));
    let record = agent.step(Event::document("notes.txt", doc)).await.unwrap();
    assert_eq!(record.messages[0].kind, MessageKind::DocumentUpload);
    assert!(record.messages[0].text.contains("\"notes.txt\""));
    // The search in the same step already sees the uploaded passages.
    assert!(
        record.function_calls[0]
            .output
            .contains("Paragraph 7 talks about topic 7"),
        "{}",
        record.function_calls[0].output
    );
    let stored = agent
        .storage()
        .archival
        .count_passages(agent.id())
        .await
        .unwrap();
    assert!(stored > 1);
    let page = agent
        .storage()
        .archival
        .list_passages(agent.id(), Page::first(1))
        .await
        .unwrap();
    assert_eq!(page.hits[0].item.metadata["source"], "notes.txt");
    assert_eq!(
        page.hits[0].item.embedding.as_ref().unwrap().model,
        "memgpt-hashing-v1-64"
    );

    let err = agent
        .step(Event::document("big.txt", "x".repeat(5_000)))
        .await
        .unwrap_err();
    assert!(matches!(
        err,
        Error::DocumentTooLarge {
            bytes: 5_000,
            limit: 2_000,
            ..
        }
    ));
    let err = agent
        .step(Event::document("empty.txt", "  \n\n "))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::EmptyDocument { .. }));
    // The same limits hold for the three ways text enters archival storage.
    let err = agent
        .insert_archival(&"y".repeat(2_001), Default::default())
        .await
        .unwrap_err();
    assert!(matches!(
        err,
        Error::DocumentTooLarge {
            bytes: 2_001,
            limit: 2_000,
            ..
        }
    ));
    let record = agent
        .call(
            "archival_memory_insert",
            json!({"content": "z".repeat(2_001), "request_heartbeat": false}),
        )
        .await
        .unwrap();
    assert!(!record.ok);
    assert_eq!(
        record.output,
        "the content is 2001 bytes, over the limit of 2000 bytes: insert it in smaller parts"
    );
    assert_eq!(
        agent
            .storage()
            .archival
            .count_passages(agent.id())
            .await
            .unwrap(),
        stored
    );
}

#[tokio::test]
async fn inserted_passages_are_searchable_in_the_same_step() {
    let llm = llm();
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .embedder(Arc::new(HashingEmbedder::new(128)))
        .build()
        .await
        .unwrap();
    agent
        .insert_archival("Chad's sister is called Maria.", Default::default())
        .await
        .unwrap();
    llm.push_call(
        "archival_memory_insert",
        json!({"content": "Chad's dog is called Rex.", "request_heartbeat": true}),
    );
    llm.push_call(
        "archival_memory_search",
        json!({"query": "Chad's dog", "request_heartbeat": true}),
    );
    llm.push_call("send_message", json!({"message": "Rex"}));
    let record = agent.step("what's my dog's name?").await.unwrap();
    assert!(
        record.function_calls[0]
            .output
            .contains("archival memory now holds 2")
    );
    let output = &record.function_calls[1].output;
    assert!(output.starts_with("Showing results 1-2 of 2"), "{output}");
    assert!(
        output.lines().nth(1).unwrap().contains("Rex"),
        "the new passage ranks first: {output}"
    );
    assert!(
        llm.requests()[2].messages[0]
            .content
            .contains("2 passages in archival memory")
    );
}

#[tokio::test]
async fn conversation_search_by_date_reads_recall() {
    let llm = llm();
    let mut agent = agent(&llm).await;
    let day = |d| Utc.with_ymd_and_hms(2024, 3, d, 12, 0, 0).unwrap();
    for d in 1..=4 {
        llm.push_call("send_message", json!({"message": format!("noted day {d}")}));
        agent
            .step(Event::user(format!("it is day {d}")).at(day(d)))
            .await
            .unwrap();
    }
    llm.push_call(
        "conversation_search_date",
        json!({"start_date": "2024-03-02", "end_date": "2024-03-03", "request_heartbeat": true}),
    );
    llm.push_call(
        "conversation_search",
        json!({"query": "day 4", "request_heartbeat": true}),
    );
    llm.push_call("send_message", json!({"message": "found"}));
    let record = agent
        .step("what did I say on the 2nd and 3rd?")
        .await
        .unwrap();
    let by_date = &record.function_calls[0].output;
    assert!(by_date.starts_with("Showing results 1-4 of 4"), "{by_date}");
    assert!(by_date.contains("[2024-03-02T12:00:00Z] user: it is day 2"));
    assert!(by_date.contains("assistant: noted day 3"));
    assert!(!by_date.contains("day 1") && !by_date.contains("day 4"));
    let by_text = &record.function_calls[1].output;
    assert!(by_text.contains("it is day 4"), "{by_text}");
}

#[tokio::test]
async fn agents_reload_from_storage() {
    let llm = llm();
    let storage = Storage::in_memory();
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .storage(storage.clone())
        .name("sam")
        .build()
        .await
        .unwrap();
    llm.push_call(
        "core_memory_append",
        json!({"label": "human", "content": "Likes jazz", "request_heartbeat": true}),
    );
    llm.push_call("send_message", json!({"message": "jazz, noted"}));
    agent.step("I like jazz").await.unwrap();
    agent
        .insert_archival("an archived fact", Default::default())
        .await
        .unwrap();

    let reloaded = Agent::builder()
        .provider(llm.clone())
        .storage(storage.clone())
        .load(agent.id())
        .await
        .unwrap();
    assert_eq!(reloaded.name(), "sam");
    assert_eq!(reloaded.version(), agent.version());
    assert_eq!(reloaded.memory(), agent.memory());
    assert_eq!(
        reloaded.context().queue().ids(),
        agent.context().queue().ids()
    );
    assert_eq!(reloaded.prompt(), agent.prompt());
    assert_eq!(reloaded.context().counts(), agent.context().counts());

    let missing = Agent::builder()
        .provider(llm)
        .storage(storage)
        .load(AgentId::new())
        .await;
    assert!(matches!(missing, Err(ref e) if e.kind() == crate::ErrorKind::NotFound));
}

#[tokio::test]
async fn a_window_too_small_for_the_prompt_fails_at_creation() {
    let storage = Storage::in_memory();
    let err = Agent::builder()
        .provider(llm())
        .storage(storage.clone())
        .context_window(600)
        .build()
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("(a context window of 600 minus 150 kept for the completion)"),
        "{err}"
    );
    assert!(
        storage.agents.list_agents().await.unwrap().is_empty(),
        "nothing was stored"
    );
}

#[tokio::test]
async fn unknown_tools_fail_at_creation() {
    let err = Agent::builder()
        .provider(llm())
        .function("no_such_tool")
        .build()
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("no function named `no_such_tool` is registered"),
        "{err}"
    );
}

/// Panics when called.
#[crate::memgpt_fn]
async fn explode() -> String {
    panic!("kaboom")
}

#[tokio::test]
async fn a_panicking_function_is_a_failed_call() {
    let llm = llm();
    llm.push_call("explode", json!({"request_heartbeat": false}));
    llm.push_call("send_message", json!({"message": "sorry"}));
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .function("explode")
        .build()
        .await
        .unwrap();
    let record = agent.step("go").await.unwrap();
    assert_eq!(
        record.function_calls[0].output,
        "function `explode` crashed: kaboom"
    );
    assert_eq!(record.stop_reason, StopReason::EndTurn);
}

#[test]
fn steps_are_send() {
    fn assert_send<T: Send>(_: &T) {}
    let llm = llm();
    let fut = async move {
        let mut agent = agent(&llm).await;
        agent.step("x").await.ok();
    };
    assert_send(&fut);
}

#[tokio::test]
async fn imported_history_is_searchable_but_not_queued() {
    let llm = llm();
    let mut agent = agent(&llm).await;
    let queued = agent.context().queue().len();
    let at = Utc.with_ymd_and_hms(2023, 5, 8, 13, 56, 0).unwrap();
    let history = vec![
        Message::new(
            agent.id(),
            MessageKind::User,
            "Ann: I adopted a puppy named Rex.",
            at,
        ),
        Message::new(
            agent.id(),
            MessageKind::Assistant,
            "Bob: Congratulations!",
            at + Duration::minutes(1),
        ),
    ];
    agent.import_history(history).await.unwrap();
    assert_eq!(
        agent.context().queue().len(),
        queued,
        "not in the FIFO queue"
    );
    assert!(
        agent.context().counts().recall >= 2,
        "the memory header counts it"
    );
    let hits = agent
        .storage()
        .recall
        .search(agent.id(), &RecallQuery::text("puppy", Page::first(5)))
        .await
        .unwrap();
    assert!(hits.hits[0].item.text.contains("puppy"), "{hits:?}");
    assert_eq!(hits.hits[0].item.created_at, at, "its own timestamp");

    // Another agent's message is refused and nothing is written.
    let before = agent
        .storage()
        .recall
        .count_messages(agent.id())
        .await
        .unwrap();
    let stranger = Message::new(AgentId::new(), MessageKind::User, "not mine", at);
    assert!(agent.import_history(vec![stranger]).await.is_err());
    assert_eq!(
        agent
            .storage()
            .recall
            .count_messages(agent.id())
            .await
            .unwrap(),
        before
    );

    // The agent searches it like any other history.
    llm.push_calls(
        "",
        &[(
            "conversation_search",
            json!({"query": "puppy", "request_heartbeat": true}),
        )],
    );
    llm.push_call("send_message", json!({"message": "Rex!"}));
    let record = agent
        .step(Event::user("What is my puppy called?"))
        .await
        .unwrap();
    assert!(
        record.function_calls[0].output.contains("puppy named Rex"),
        "{:?}",
        record.function_calls
    );
}

#[tokio::test]
async fn policies_are_chosen_by_name_and_searches_refresh_recency() {
    let llm = llm();
    let err = Agent::builder()
        .provider(llm.clone())
        .policy_named("clock")
        .build()
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("unknown eviction policy `clock`"),
        "{err}"
    );

    let mut agent = Agent::builder()
        .provider(llm.clone())
        .policy_named("lru")
        .build()
        .await
        .unwrap();
    assert_eq!(agent.config().policy, "lru");
    llm.push_call("send_message", json!({"message": "Noted: Mochi."}));
    agent
        .step(Event::user("My cat is called Mochi."))
        .await
        .unwrap();
    llm.push_call("send_message", json!({"message": "Sunny."}));
    agent
        .step(Event::user("The weather is sunny."))
        .await
        .unwrap();
    let recency = |agent: &Agent, text: &str| {
        let q = agent.context().queue();
        (0..q.len())
            .filter_map(|i| q.get(i))
            .find(|e| e.message().text.contains(text))
            .map(|e| e.last_used())
            .unwrap()
    };
    assert!(recency(&agent, "Mochi") < recency(&agent, "sunny"));
    // A search that returns the older message makes it the most recently used.
    llm.push_calls(
        "",
        &[(
            "conversation_search",
            json!({"query": "Mochi cat", "request_heartbeat": true}),
        )],
    );
    llm.push_call("send_message", json!({"message": "Mochi!"}));
    agent
        .step(Event::user("What is my cat called?"))
        .await
        .unwrap();
    assert!(recency(&agent, "My cat is called Mochi") > recency(&agent, "sunny"));
}

/// Reports attention like a local model could: most of it on messages about giraffes.
#[derive(Debug)]
struct Attentive(Arc<ScriptedProvider>);

#[async_trait]
impl LlmProvider for Attentive {
    fn model(&self) -> &str {
        "attentive"
    }

    async fn complete(
        &self,
        request: &crate::llm::ChatRequest,
    ) -> Result<crate::llm::ChatResponse, LlmError> {
        self.0.complete(request).await
    }

    fn as_attention(&self) -> Option<&dyn crate::llm::AttentionProvider> {
        Some(self)
    }
}

#[async_trait]
impl crate::llm::AttentionProvider for Attentive {
    async fn complete_with_attention(
        &self,
        request: &crate::llm::ChatRequest,
    ) -> Result<(crate::llm::ChatResponse, Option<Vec<f32>>), LlmError> {
        let weights = request
            .messages
            .iter()
            .map(|m| {
                if m.content.contains("giraffe") {
                    1.0
                } else {
                    0.01
                }
            })
            .collect();
        Ok((self.0.complete(request).await?, Some(weights)))
    }
}

/// An agent under `policy` (a 900-token window, only `send_message`) whose queue flushes within
/// a few dozen steps; the caller adds the provider.
fn flushing_agent(policy: &str) -> AgentBuilder {
    Agent::builder()
        .policy_named(policy)
        .system_prompt("You are a test agent.")
        .persona("I am T.")
        .block_limit(200)
        .functions(["send_message"])
        .context_window(900)
}

/// Runs steps until the first flush under `policy`; returns the giraffe message if it is
/// still queued, with the agent.
async fn giraffe_after_a_flush(policy: &str) -> (Agent, Option<crate::queue::QueueEntry>) {
    let scripted = llm();
    let mut agent = flushing_agent(policy)
        .provider(Arc::new(Attentive(scripted.clone())))
        .embedder(Arc::new(HashingEmbedder::new(64)))
        .build()
        .await
        .unwrap();
    for i in 0..40 {
        scripted.push_call(
            "send_message",
            json!({"message": format!("reply {i} with padding")}),
        );
        scripted.push_summary(Ok(format!("Summary after step {i}.")));
        let text = if i == 0 {
            "My favourite animal is the giraffe.".to_owned()
        } else {
            format!("message {i}: filler words about nothing in particular, word{i}")
        };
        let record = agent.step(text).await.unwrap();
        if !record.flushes.is_empty() {
            let queue = agent.context().queue();
            let giraffe = (0..queue.len())
                .filter_map(|i| queue.get(i))
                .find(|e| e.message().text.contains("giraffe"))
                .cloned();
            return (agent, giraffe);
        }
    }
    panic!("no flush in 40 steps");
}

#[tokio::test]
async fn attention_eviction_keeps_the_old_message_the_model_attends_to() {
    let (agent, giraffe) = giraffe_after_a_flush("attention").await;
    let giraffe = giraffe.expect("the attended message survived the flush");
    let attention = giraffe.signals()[0];
    assert!(attention > 1.0, "{attention}");
    assert!(agent.summary().evicted_messages > 0);
    // Relevance was measured for the messages outside the observation window.
    assert!(giraffe.relevance().is_some());
    // The paper's policy evicts it: it is the oldest.
    let (_, giraffe) = giraffe_after_a_flush("paper").await;
    assert!(giraffe.is_none());
}

/// Under `policy`, a dense fact first and then small talk until the first flush: whether the
/// fact is still queued after it.
async fn fact_survives_the_first_flush(policy: &str) -> bool {
    let scripted = llm();
    let mut agent = flushing_agent(policy)
        .provider(scripted.clone())
        .build()
        .await
        .unwrap();
    for i in 0..60 {
        scripted.push_call("send_message", json!({"message": "ok"}));
        scripted.push_summary(Ok(format!("Summary after step {i}.")));
        let text = if i == 0 {
            "On 12 May 2024 I moved to Lisbon with my sister Ana and our dog Rex."
        } else {
            "Haha, nice!"
        };
        let record = agent.step(text).await.unwrap();
        if !record.flushes.is_empty() {
            let queue = agent.context().queue();
            return (0..queue.len())
                .filter_map(|i| queue.get(i))
                .any(|e| e.message().text.contains("Lisbon"));
        }
    }
    panic!("no flush in 60 steps");
}

#[tokio::test]
async fn salience_eviction_keeps_the_fact_and_lets_small_talk_go() {
    assert!(fact_survives_the_first_flush("salience").await);
    // The paper's policy evicts it: it is the oldest.
    assert!(!fact_survives_the_first_flush("paper").await);
}

/// An agent on `storage` with a hashing embedder of `dimension` and the default functions.
async fn embedded_agent(
    llm: &Arc<ScriptedProvider>,
    storage: Storage,
    dimension: usize,
    defer: bool,
) -> Agent {
    Agent::builder()
        .provider(llm.clone())
        .storage(storage)
        .embedder(Arc::new(HashingEmbedder::new(dimension)))
        .defer_message_embeddings(defer)
        .build()
        .await
        .unwrap()
}

async fn unembedded(agent: &Agent) -> usize {
    agent
        .storage()
        .recall
        .unembedded_messages(agent.id(), 100)
        .await
        .unwrap()
        .len()
}

#[tokio::test]
async fn steps_embed_their_conversation_messages_before_committing() {
    let llm = llm();
    let mut agent = embedded_agent(&llm, Storage::in_memory(), 32, false).await;
    llm.push_call("send_message", json!({"message": "Noted."}));
    let record = agent.step("My cat is called Mochi.").await.unwrap();
    assert_eq!(
        unembedded(&agent).await,
        0,
        "user and assistant messages embedded"
    );
    assert!(record.timings.embedding > std::time::Duration::ZERO);
    let space = agent
        .storage()
        .agents
        .embedding_space()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (space.model.as_str(), space.dimension),
        ("memgpt-hashing-v1-32", 32)
    );
}

#[tokio::test]
async fn deferred_embeddings_are_made_by_the_next_step_or_call_or_a_reindex() {
    let llm = llm();
    let mut agent = embedded_agent(&llm, Storage::in_memory(), 32, true).await;
    llm.push_call("send_message", json!({"message": "Noted."}));
    agent.step("My cat is called Mochi.").await.unwrap();
    assert_eq!(
        unembedded(&agent).await,
        2,
        "the user message and the reply"
    );
    let record = agent
        .call(
            "conversation_search",
            json!({"query": "cat name", "request_heartbeat": false}),
        )
        .await
        .unwrap();
    assert!(record.ok, "{}", record.output);
    assert!(
        !record.output.contains("ranked by words only"),
        "{}",
        record.output
    );
    assert!(
        record.output.contains("My cat is called Mochi."),
        "{}",
        record.output
    );
    assert_eq!(
        unembedded(&agent).await,
        0,
        "embedded by the call, before it ran"
    );

    llm.push_call("send_message", json!({"message": "Sunny."}));
    agent.step("The weather is sunny.").await.unwrap();
    assert_eq!(unembedded(&agent).await, 2);
    // A search only reads: it says what it matched by words alone.
    let found = agent
        .search_recall(&RecallQuery::text("weather", Page::first(5)))
        .await
        .unwrap();
    assert!(
        found
            .note
            .as_deref()
            .is_some_and(|n| n.contains("not embedded yet")),
        "{:?}",
        found.note
    );
    assert_eq!(unembedded(&agent).await, 2, "the search wrote nothing");
    // The next step embeds them before it runs; its own messages wait for the one after.
    llm.push_call("send_message", json!({"message": "You're welcome."}));
    agent.step("Thanks.").await.unwrap();
    assert_eq!(
        unembedded(&agent).await,
        2,
        "only the new step's own messages"
    );
    assert_eq!(agent.reindex().await.unwrap(), 2);
    assert_eq!(unembedded(&agent).await, 0);
    assert_eq!(agent.reindex().await.unwrap(), 0, "nothing left");
}

#[tokio::test]
async fn an_agent_without_embedder_imports_and_a_later_one_backfills() {
    let llm = llm();
    let storage = Storage::in_memory();
    let mut plain = Agent::builder()
        .provider(llm.clone())
        .storage(storage.clone())
        .build()
        .await
        .unwrap();
    let at = Utc.with_ymd_and_hms(2023, 5, 8, 13, 56, 0).unwrap();
    let history: Vec<Message> = (0..70)
        .map(|i| {
            Message::new(
                plain.id(),
                if i % 2 == 0 {
                    MessageKind::User
                } else {
                    MessageKind::Assistant
                },
                format!("turn {i}"),
                at + Duration::minutes(i),
            )
        })
        .collect();
    plain.import_history(history).await.unwrap();
    assert_eq!(
        storage
            .recall
            .unembedded_messages(plain.id(), 1_000)
            .await
            .unwrap()
            .len(),
        70
    );
    let mut embedded = Agent::builder()
        .provider(llm.clone())
        .storage(storage.clone())
        .embedder(Arc::new(HashingEmbedder::new(16)))
        .load(plain.id())
        .await
        .unwrap();
    assert_eq!(
        embedded.reindex().await.unwrap(),
        70,
        "in batches, none skipped"
    );
    assert!(
        storage
            .recall
            .unembedded_messages(plain.id(), 1_000)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn an_embedder_of_another_space_is_refused_when_the_agent_is_built() {
    let llm = llm();
    let storage = Storage::in_memory();
    let mut first = embedded_agent(&llm, storage.clone(), 32, false).await;
    llm.push_call("send_message", json!({"message": "ok"}));
    first.step("hello").await.unwrap();
    let err = Agent::builder()
        .provider(llm.clone())
        .storage(storage.clone())
        .embedder(Arc::new(HashingEmbedder::new(16)))
        .build()
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Store(StoreError::EmbeddingMismatch {
                expected_dimension: 32,
                found_dimension: 16,
                ..
            })
        ),
        "{err}"
    );
    let err = Agent::builder()
        .provider(llm.clone())
        .storage(storage)
        .embedder(Arc::new(HashingEmbedder::new(16)))
        .load(first.id())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("embedding mismatch"), "{err}");
}

#[tokio::test]
async fn conversation_search_filters_by_role_and_date_and_survives_any_page() {
    let llm = llm();
    let mut agent = agent(&llm).await;
    let t0 = Utc.with_ymd_and_hms(2024, 3, 1, 9, 0, 0).unwrap();
    let mut history = Vec::new();
    for (day, (user, reply)) in [
        ("I planted tomatoes today.", "Tomatoes love sun."),
        ("The tomatoes have flowers.", "Flowers mean fruit soon."),
        ("First red tomato!", "Enjoy your tomato."),
    ]
    .into_iter()
    .enumerate()
    {
        let at = t0 + Duration::days(day as i64);
        history.push(Message::new(agent.id(), MessageKind::User, user, at));
        history.push(Message::new(
            agent.id(),
            MessageKind::Assistant,
            reply,
            at + Duration::minutes(1),
        ));
    }
    agent.import_history(history).await.unwrap();
    let search = |args: serde_json::Value| {
        let mut args = args;
        args["request_heartbeat"] = json!(false);
        args
    };
    let out = agent
        .call("conversation_search", search(json!({"query": "tomato"})))
        .await
        .unwrap();
    assert!(
        out.output
            .starts_with("(ranked by words only (no embedding model"),
        "{}",
        out.output
    );
    let users = agent
        .call(
            "conversation_search",
            search(json!({"query": "tomato", "roles": ["user"]})),
        )
        .await
        .unwrap();
    assert!(users.output.contains("of 3 "), "{}", users.output);
    assert!(!users.output.contains("assistant:"), "{}", users.output);
    let day2 = agent
        .call(
            "conversation_search",
            search(
                json!({"query": "tomato", "start_date": "2024-03-02", "end_date": "2024-03-02"}),
            ),
        )
        .await
        .unwrap();
    assert!(day2.output.contains("of 2 "), "{}", day2.output);
    assert!(day2.output.contains("flowers"), "{}", day2.output);
    let far = agent
        .call(
            "conversation_search",
            search(json!({"query": "tomato", "page": u32::MAX})),
        )
        .await
        .unwrap();
    assert!(
        far.ok && far.output.contains("is past the end"),
        "{}",
        far.output
    );
    let bad = agent
        .call(
            "conversation_search",
            search(json!({"query": "tomato", "roles": ["system"]})),
        )
        .await
        .unwrap();
    assert!(
        !bad.ok && bad.output.contains("`roles[0]`"),
        "{}",
        bad.output
    );
    let bad = agent
        .call(
            "conversation_search",
            search(
                json!({"query": "tomato", "start_date": "2024-03-03", "end_date": "2024-03-01"}),
            ),
        )
        .await
        .unwrap();
    assert!(
        !bad.ok && bad.output.contains("must be before"),
        "{}",
        bad.output
    );
}

#[tokio::test]
async fn archival_memory_filters_by_tag_and_date_and_survives_any_page() {
    let llm = llm();
    let clock = Arc::new(ManualClock::new(
        Utc.with_ymd_and_hms(2024, 6, 1, 9, 0, 0).unwrap(),
    ));
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .clock(clock.clone())
        .build()
        .await
        .unwrap();
    let insert = |content: &str, tags: serde_json::Value| json!({"content": content, "tags": tags, "request_heartbeat": false});
    agent
        .call(
            "archival_memory_insert",
            insert("Sam likes green tea.", json!(["drinks"])),
        )
        .await
        .unwrap();
    clock.advance(Duration::days(10));
    agent
        .call(
            "archival_memory_insert",
            insert("Sam's tea kettle is blue.", json!(["home", " home "])),
        )
        .await
        .unwrap();
    assert_eq!(
        agent
            .storage()
            .archival
            .count_passages(agent.id())
            .await
            .unwrap(),
        2,
        "committed"
    );
    let search = |extra: serde_json::Value| {
        let mut args = json!({"query": "tea", "request_heartbeat": false});
        for (k, v) in extra.as_object().unwrap() {
            args[k] = v.clone();
        }
        args
    };
    let all = agent
        .call("archival_memory_search", search(json!({})))
        .await
        .unwrap();
    assert!(all.output.contains("of 2 "), "{}", all.output);
    assert!(all.output.contains("[tags: home]"), "{}", all.output);
    let home = agent
        .call("archival_memory_search", search(json!({"tags": ["home"]})))
        .await
        .unwrap();
    assert!(
        home.output.contains("of 1 ") && home.output.contains("kettle"),
        "{}",
        home.output
    );
    let june1 = agent
        .call(
            "archival_memory_search",
            search(json!({"start_date": "2024-06-01", "end_date": "2024-06-01"})),
        )
        .await
        .unwrap();
    assert!(
        june1.output.contains("of 1 ") && june1.output.contains("green tea"),
        "{}",
        june1.output
    );
    let far = agent
        .call("archival_memory_search", search(json!({"page": u32::MAX})))
        .await
        .unwrap();
    assert!(
        far.ok && far.output.contains("is past the end"),
        "{}",
        far.output
    );
}

#[tokio::test]
async fn the_first_prompt_with_all_eight_functions_stays_under_1600_tokens() {
    let llm = llm();
    let mut agent = agent(&llm).await;
    assert_eq!(agent.function_set().len(), 8);
    println!("main context before the first message: {:?}", agent.stats());
    llm.push_call("send_message", json!({"message": "Hi!"}));
    agent.step("Hello, who are you?").await.unwrap();
    let request = &llm.requests()[0];
    let counter = crate::tokens::TiktokenCounter::cl100k();
    let messages: usize = request
        .messages
        .iter()
        .map(|m| crate::tokens::TokenCounter::count_message(&counter, m))
        .sum();
    let tools: usize = request
        .tools
        .iter()
        .map(|t| {
            crate::tokens::TokenCounter::count_text(&counter, &serde_json::to_string(t).unwrap())
        })
        .sum();
    let total = messages + tools;
    println!("first prompt: {total} tokens ({tools} in the function schemas)");
    assert!(total <= 1_600, "the first prompt is {total} tokens");
}

/// Returns binary-looking text with NUL characters.
#[crate::memgpt_fn]
async fn read_binary() -> String {
    "header\0\0payload".to_owned()
}

#[tokio::test]
async fn nul_characters_are_refused_from_callers_and_cleaned_from_the_model_and_tools() {
    let llm = llm();
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .function("read_binary")
        .build()
        .await
        .unwrap();

    // From the caller: refused before any LLM call, nothing stored.
    let err = agent.step("before\0after").await.unwrap_err();
    assert_eq!(err.kind(), crate::ErrorKind::InvalidInput, "{err}");
    assert!(err.to_string().contains("NUL character"), "{err}");
    assert_eq!(agent.version(), 0);
    assert_eq!(llm.remaining(), 0);
    let err = agent
        .insert_archival("a\0b", Default::default())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), crate::ErrorKind::InvalidInput, "{err}");
    assert_eq!(agent.version(), 0);

    // In function arguments: reported to the model, which tries again; lone surrogates are not
    // JSON at all.
    llm.push_raw_calls(
        "Store it.",
        vec![
            (
                "archival_memory_insert".into(),
                r#"{"content": "x\u0000y", "request_heartbeat": true}"#.into(),
            ),
            (
                "core_memory_append".into(),
                r#"{"label": "human", "content": "\ud800", "request_heartbeat": true}"#.into(),
            ),
        ],
    );
    // From the model's own words and a tool's output: cleaned (U+FFFD), and the step commits.
    llm.push_raw_calls(
        "Odd\0thought.",
        vec![(
            "read_binary".into(),
            r#"{"request_heartbeat": true}"#.into(),
        )],
    );
    llm.push_call("send_message", json!({"message": "done"}));
    let record = agent.step("store x and y").await.unwrap();
    assert_eq!(record.stop_reason, StopReason::EndTurn);
    let calls = &record.function_calls;
    assert!(
        !calls[0].ok && calls[0].output.contains("NUL character"),
        "{}",
        calls[0].output
    );
    assert!(
        !calls[1].ok && calls[1].output.contains("not valid JSON"),
        "{}",
        calls[1].output
    );
    assert!(calls[2].ok);
    assert_eq!(calls[2].output, "header\u{FFFD}\u{FFFD}payload");
    let assistant = record
        .messages
        .iter()
        .find(|m| m.text.starts_with("Odd"))
        .unwrap();
    assert_eq!(assistant.text, "Odd\u{FFFD}thought.");
    assert_eq!(agent.version(), 1);
    assert_eq!(
        agent
            .storage()
            .archival
            .count_passages(agent.id())
            .await
            .unwrap(),
        0
    );
}

#[tokio::test]
async fn a_response_of_100k_calls_runs_a_bounded_number_and_says_so() {
    let llm = llm();
    let calls: Vec<(String, String)> = (0..100_000)
        .map(|i| {
            (
                "archival_memory_insert".to_owned(),
                json!({"content": format!("fact {i}"), "request_heartbeat": true}).to_string(),
            )
        })
        .collect();
    llm.push_raw_calls("Storing everything.", calls);
    llm.push_call("send_message", json!({"message": "stored some"}));
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .context_window(8_000)
        .build()
        .await
        .unwrap();
    let record = agent.step("store all").await.unwrap();
    assert_eq!(record.stop_reason, StopReason::EndTurn);
    let limit = AgentConfig::default().max_calls_per_response;
    assert_eq!(record.function_calls.len(), limit + 1);
    assert_eq!(
        agent
            .storage()
            .archival
            .count_passages(agent.id())
            .await
            .unwrap(),
        limit as u64
    );
    let alert = record
        .messages
        .iter()
        .find(|m| m.kind == MessageKind::SystemAlert)
        .expect("the model is told");
    assert!(
        alert
            .text
            .contains("held 100000 function calls; only the first 16 ran"),
        "{}",
        alert.text
    );
    // The stored assistant message holds the calls that ran, each with its result.
    let assistant = &record.messages[1];
    assert_eq!(assistant.tool_calls.len(), limit);
    // The second request (after the heartbeat) fit the window.
    let stats = agent.context().stats();
    assert!(stats.total_tokens <= stats.window, "{stats:?}");
}

async fn until_reply_agent(llm: &Arc<ScriptedProvider>) -> Agent {
    Agent::builder()
        .provider(llm.clone())
        .loop_style(crate::LoopStyle::UntilReply)
        .build()
        .await
        .unwrap()
}

#[tokio::test]
async fn the_until_reply_loop_goes_on_until_send_message_without_heartbeats() {
    let llm = llm();
    llm.push_calls(
        "Save it.",
        &[(
            "core_memory_append",
            json!({"label": "human", "content": "Likes tea."}),
        )],
    );
    llm.push_calls(
        "Check.",
        &[("conversation_search", json!({"query": "tea"}))],
    );
    // A model trained on the paper's loop may still send the flag: it is accepted and ignored.
    llm.push_calls(
        "Answer.",
        &[(
            "send_message",
            json!({"message": "Noted!", "request_heartbeat": true}),
        )],
    );
    let mut agent = until_reply_agent(&llm).await;
    assert_eq!(agent.config().loop_style, crate::LoopStyle::UntilReply);
    let record = agent.step("I like tea").await.unwrap();
    assert_eq!(record.stop_reason, StopReason::EndTurn);
    assert_eq!(
        (record.llm_calls, record.replies.clone()),
        (3, vec!["Noted!".to_owned()])
    );
    assert!(
        record.function_calls.iter().all(|c| c.ok),
        "{:?}",
        record.function_calls
    );
    assert_eq!(
        kinds(&record),
        [
            MessageKind::User,
            MessageKind::Assistant,
            MessageKind::FunctionReturn,
            MessageKind::Assistant,
            MessageKind::FunctionReturn,
            MessageKind::Assistant,
            MessageKind::FunctionReturn,
        ],
        "no heartbeat messages between the calls"
    );
    assert!(
        agent
            .memory()
            .get("human")
            .unwrap()
            .value()
            .contains("Likes tea.")
    );
    // Not one schema offers the flag, and the instructions do not mention it.
    for request in llm.agent_requests() {
        for tool in request.tools.iter() {
            let text = tool.parameters.to_string();
            assert!(!text.contains("request_heartbeat"), "{}: {text}", tool.name);
        }
        assert!(!request.messages[0].content.contains("request_heartbeat"));
    }
}

#[tokio::test]
async fn the_until_reply_loop_keeps_the_chain_bound_and_the_failure_path() {
    let llm = llm();
    llm.push_calls(
        "Oops.",
        &[(
            "core_memory_append",
            json!({"label": "nope", "content": "x"}),
        )],
    );
    for _ in 0..20 {
        llm.push_calls(
            "Again.",
            &[("conversation_search", json!({"query": "tea"}))],
        );
    }
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .loop_style(crate::LoopStyle::UntilReply)
        .max_chain_length(4)
        .build()
        .await
        .unwrap();
    let record = agent.step("hi").await.unwrap();
    assert_eq!(record.stop_reason, StopReason::ChainLimit { limit: 4 });
    assert_eq!(record.llm_calls, 4);
    assert!(!record.function_calls[0].ok);
    assert!(
        record.function_calls[0].output.contains("nope"),
        "{}",
        record.function_calls[0].output
    );
    assert!(!kinds(&record).contains(&MessageKind::Heartbeat));
    assert_eq!(agent.version(), 1, "the step committed whole");
}

#[tokio::test]
async fn the_until_reply_loop_obeys_tool_rules() {
    use crate::rules::ToolRule;
    let llm = llm();
    // A terminal rule on a non-terminal function ends the step...
    llm.push_calls(
        "Save.",
        &[("archival_memory_insert", json!({"content": "tea"}))],
    );
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .loop_style(crate::LoopStyle::UntilReply)
        .tool_rule(ToolRule::Terminal {
            tool: "archival_memory_insert".into(),
        })
        .tool_rule(ToolRule::RequiredBeforeExit {
            tool: "conversation_search".into(),
        })
        .build()
        .await
        .unwrap();
    let record = agent.step("hi").await.unwrap();
    assert_eq!(
        (record.stop_reason.clone(), record.llm_calls),
        (StopReason::EndTurn, 1)
    );
    // ...and a reply before a required function does not.
    llm.push_calls("Reply.", &[("send_message", json!({"message": "hello"}))]);
    llm.push_calls(
        "Search.",
        &[("conversation_search", json!({"query": "tea"}))],
    );
    llm.push_calls(
        "Reply.",
        &[("send_message", json!({"message": "hello again"}))],
    );
    let record = agent.step("hi").await.unwrap();
    assert_eq!(
        (record.stop_reason.clone(), record.llm_calls),
        (StopReason::EndTurn, 3)
    );
    let heartbeats: Vec<&str> = record
        .messages
        .iter()
        .filter(|m| m.kind == MessageKind::Heartbeat)
        .map(|m| m.text.as_str())
        .collect();
    assert_eq!(heartbeats.len(), 1, "{heartbeats:?}");
    assert!(
        heartbeats[0].contains("call `conversation_search` first"),
        "{}",
        heartbeats[0]
    );
}

#[tokio::test]
async fn switching_loop_style_switches_default_instructions_and_schemas_only() {
    let (llm, storage) = (llm(), crate::store::Storage::in_memory());
    let agent = Agent::builder()
        .provider(llm.clone())
        .storage(storage.clone())
        .build()
        .await
        .unwrap();
    let heartbeat = agent.stats();
    let changed = Agent::builder()
        .provider(llm.clone())
        .storage(storage.clone())
        .loop_style(crate::LoopStyle::UntilReply)
        .reconfigure(agent.id())
        .await
        .unwrap();
    let until_reply = changed.stats();
    assert!(
        !changed.request().messages[0]
            .content
            .contains("request_heartbeat")
    );
    assert!(
        agent.request().messages[0]
            .content
            .contains("request_heartbeat")
    );
    assert!(until_reply.tools_tokens < heartbeat.tools_tokens);
    // The prompt tokens each style pays on every call (default functions and instructions).
    println!(
        "loop style prompt tokens: heartbeat system {} + functions {} = {}; until_reply system {} + functions {} = {}",
        heartbeat.system_tokens,
        heartbeat.tools_tokens,
        heartbeat.system_tokens + heartbeat.tools_tokens,
        until_reply.system_tokens,
        until_reply.tools_tokens,
        until_reply.system_tokens + until_reply.tools_tokens,
    );
    // Custom instructions are the user's: they stay.
    let custom = Agent::builder()
        .provider(llm.clone())
        .storage(storage.clone())
        .system_prompt("Be brief.")
        .build()
        .await
        .unwrap();
    let custom = Agent::builder()
        .provider(llm)
        .storage(storage)
        .loop_style(crate::LoopStyle::UntilReply)
        .reconfigure(custom.id())
        .await
        .unwrap();
    assert!(
        custom.request().messages[0]
            .content
            .starts_with("Be brief.\n\n### Memory")
    );
}

async fn archived(agent: &Agent) -> u64 {
    agent
        .storage()
        .archival
        .count_passages(agent.id())
        .await
        .unwrap()
}

fn awaiting(record: &StepRecord) -> (String, String) {
    match &record.stop_reason {
        StopReason::AwaitingApproval {
            call_id, function, ..
        } => (call_id.clone(), function.clone()),
        other => panic!("not awaiting approval: {other:?}"),
    }
}

async fn approval_agent(llm: &Arc<ScriptedProvider>, storage: &crate::store::Storage) -> Agent {
    Agent::builder()
        .provider(llm.clone())
        .storage(storage.clone())
        .tool_rule(crate::rules::ToolRule::RequiresApproval {
            tool: "archival_memory_insert".into(),
        })
        .build()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_call_that_needs_approval_pauses_the_step_until_it_is_approved() {
    let (llm, storage) = (llm(), crate::store::Storage::in_memory());
    let mut agent = approval_agent(&llm, &storage).await;
    llm.push_calls(
        "Save it, and say so.",
        &[
            (
                "archival_memory_insert",
                json!({"content": "Ann keeps bees.", "request_heartbeat": true}),
            ),
            ("send_message", json!({"message": "too early"})),
        ],
    );
    let record = agent.step("Remember: I keep bees.").await.unwrap();
    let (call_id, function) = awaiting(&record);
    assert_eq!(function, "archival_memory_insert");
    assert_eq!(record.llm_calls, 1);
    // The rest of that response did not run, and the call has no result yet.
    assert!(record.replies.is_empty());
    assert_eq!(
        record.function_calls.len(),
        1,
        "{:?}",
        record.function_calls
    );
    assert!(
        record.function_calls[0]
            .output
            .contains("paused for approval of `archival_memory_insert`")
    );
    assert_eq!(archived(&agent).await, 0, "nothing inserted yet");
    let version = agent.version();

    // The pause survives a reload; other events wait (timers are skipped), nothing is stored.
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .storage(storage.clone())
        .load(agent.id())
        .await
        .unwrap();
    assert_eq!(
        agent.pending_approval().map(|p| p.call.id.as_str()),
        Some(call_id.as_str())
    );
    let err = agent.step("hello?").await.unwrap_err();
    assert!(matches!(err, Error::ApprovalPending { .. }), "{err}");
    assert_eq!(err.kind(), crate::ErrorKind::Conflict);
    let skipped = agent.step(Event::timer("daily check")).await.unwrap();
    assert!(matches!(
        skipped.stop_reason,
        StopReason::AwaitingApproval { .. }
    ));
    let err = agent
        .step(Event::approve("call-that-is-not-waiting"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NoPendingApproval { .. }), "{err}");
    assert_eq!(agent.version(), version);
    assert_eq!(llm.agent_requests().len(), 1, "no LLM call while waiting");

    // Approved: the call runs, its heartbeat is honoured, the step goes on to the reply.
    llm.push_call("send_message", json!({"message": "Saved: you keep bees."}));
    let record = agent.step(Event::approve(call_id.clone())).await.unwrap();
    assert_eq!(record.stop_reason, StopReason::EndTurn);
    assert_eq!(record.replies, ["Saved: you keep bees."]);
    assert_eq!(record.event, "approval");
    assert_eq!(
        kinds(&record),
        [
            MessageKind::FunctionReturn,
            MessageKind::Heartbeat,
            MessageKind::Assistant,
            MessageKind::FunctionReturn
        ]
    );
    assert_eq!(
        record.messages[0].tool_call_id.as_deref(),
        Some(call_id.as_str())
    );
    assert_eq!(archived(&agent).await, 1);
    assert!(agent.pending_approval().is_none());
    // The model read the call's result right after the call, in order.
    let request = llm.agent_requests().pop().unwrap();
    let n = request.messages.len();
    assert_eq!(
        request.messages[n - 2].tool_call_id.as_deref(),
        Some(call_id.as_str())
    );
    let stored = storage
        .agents
        .load_agent(agent.id())
        .await
        .unwrap()
        .unwrap();
    assert!(stored.pending_approval.is_none());
    // Approving twice is refused.
    assert!(matches!(
        agent.step(Event::approve(call_id)).await.unwrap_err(),
        Error::NoPendingApproval { .. }
    ));
}

#[tokio::test]
async fn a_denied_call_reaches_the_model_as_its_result() {
    let (llm, storage) = (llm(), crate::store::Storage::in_memory());
    let mut agent = approval_agent(&llm, &storage).await;
    llm.push_call(
        "archival_memory_insert",
        json!({"content": "the door code is 1234", "request_heartbeat": false}),
    );
    let record = agent.step("The door code is 1234.").await.unwrap();
    let (call_id, _) = awaiting(&record);
    llm.push_call(
        "send_message",
        json!({"message": "Understood, I won't store it."}),
    );
    let record = agent
        .step(Event::deny(call_id, "no secrets in long-term memory"))
        .await
        .unwrap();
    assert_eq!(record.stop_reason, StopReason::EndTurn);
    let denial = &record.function_calls[0];
    assert!(!denial.ok);
    assert_eq!(
        denial.output,
        "the user denied this call of `archival_memory_insert`: no secrets in long-term memory"
    );
    // A denial gives the model control back even though the call asked for no heartbeat.
    assert_eq!(record.llm_calls, 1);
    assert_eq!(record.replies, ["Understood, I won't store it."]);
    assert_eq!(archived(&agent).await, 0);
}

/// A [`HashingEmbedder`](crate::embed::HashingEmbedder) that fails its `fail_at`-th call.
#[derive(Debug)]
struct FailsOnce {
    inner: crate::embed::HashingEmbedder,
    calls: std::sync::atomic::AtomicUsize,
    fail_at: usize,
}

#[async_trait::async_trait]
impl crate::embed::Embedder for FailsOnce {
    fn model(&self) -> &str {
        crate::embed::Embedder::model(&self.inner)
    }
    fn dimension(&self) -> usize {
        crate::embed::Embedder::dimension(&self.inner)
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, crate::embed::EmbedError> {
        let call = self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        if call == self.fail_at {
            return Err(crate::embed::EmbedError::InvalidResponse {
                message: "interrupted".into(),
            });
        }
        self.inner.embed(texts).await
    }
}

#[tokio::test]
async fn a_store_is_reindexed_with_another_model_resumably() {
    use crate::indexing::reindex_store;
    let llm = llm();
    let storage = Storage::in_memory();
    let mut agent = embedded_agent(&llm, storage.clone(), 32, false).await;
    llm.push_call("send_message", json!({"message": "Noted."}));
    agent.step("My cat is called Mochi.").await.unwrap();
    let record = agent
        .call(
            "archival_memory_insert",
            json!({"content": "Mochi was adopted in 2021.", "request_heartbeat": false}),
        )
        .await
        .unwrap();
    assert!(record.ok, "{}", record.output);
    drop(agent);

    // Another model of another dimension: the first run clears the old vectors, embeds the
    // messages, and is interrupted while embedding the passages.
    let flaky = FailsOnce {
        inner: crate::embed::HashingEmbedder::new(48),
        calls: Default::default(),
        fail_at: 2,
    };
    let mut seen = Vec::new();
    let err = reindex_store(&storage, &flaky, &mut |p| {
        seen.push((p.messages, p.passages))
    })
    .await
    .unwrap_err();
    assert!(err.to_string().contains("interrupted"), "{err}");
    assert_eq!(
        seen,
        [(2, 0)],
        "the messages were stored before the failure"
    );
    let space = storage.agents.embedding_space().await.unwrap().unwrap();
    assert_eq!(space.dimension, 48, "the store switched to the new model");

    // Run again: nothing is cleared twice, only the passage is left to do.
    let report = reindex_store(&storage, &flaky, &mut |_| {}).await.unwrap();
    assert_eq!(
        (
            report.cleared,
            report.agents,
            report.messages,
            report.passages
        ),
        (false, 1, 0, 1)
    );
    let id = storage.agents.list_agents().await.unwrap()[0].id;
    assert!(
        storage
            .archival
            .unembedded_passages(id, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        storage
            .recall
            .unembedded_messages(id, 10)
            .await
            .unwrap()
            .is_empty()
    );

    // The agent opens with the new model and finds its memories by meaning and by words.
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .storage(storage.clone())
        .embedder(Arc::new(crate::embed::HashingEmbedder::new(48)))
        .load(id)
        .await
        .unwrap();
    let record = agent
        .call(
            "archival_memory_search",
            json!({"query": "when was Mochi adopted", "request_heartbeat": false}),
        )
        .await
        .unwrap();
    assert!(record.output.contains("2021"), "{}", record.output);
    // A store already on the model: nothing to do.
    let again = reindex_store(
        &storage,
        &crate::embed::HashingEmbedder::new(48),
        &mut |_| {},
    )
    .await
    .unwrap();
    assert_eq!(
        (again.cleared, again.messages, again.passages),
        (false, 0, 0)
    );
    // The old model is now the mismatch.
    let old = Agent::builder()
        .provider(llm.clone())
        .storage(storage.clone())
        .embedder(Arc::new(crate::embed::HashingEmbedder::new(32)))
        .load(id)
        .await;
    assert!(old.is_err());
}
