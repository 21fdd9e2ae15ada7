//! The reply streams to the caller while the model writes it: the observer of a step sees
//! `send_message`'s text in pieces (decoded from the call's arguments as they arrive, every
//! character its own delta on the fake servers), before the message that holds it.

use std::sync::{Arc, Mutex};

use memgpt::Agent;
use memgpt::agent::StepProgress;
use memgpt::llm::{LlmProvider, StreamDelta, complete_streaming};
use serde_json::json;

use crate::fake_openai::{FakeOpenAi, Reply};
use crate::provider;

/// A reply with escapes, quotes and characters of every UTF-8 length.
const REPLY: &str = "Hi \"Chad\" — tea ☕ at 5\\6?\nSure 🐱, ünï.";

/// What an observer saw: the pieces of reply and of thinking, and when the assistant message
/// arrived (as an index into the reply pieces).
#[derive(Debug, Default)]
struct Seen {
    reply: Vec<String>,
    thinking: Vec<String>,
    message_after: Option<usize>,
}

fn watch(agent: &mut Agent) -> Arc<Mutex<Seen>> {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let log = seen.clone();
    agent.set_observer(Some(Arc::new(move |p: StepProgress<'_>| {
        let mut seen = log.lock().unwrap();
        match p {
            StepProgress::ReplyDelta(text) => seen.reply.push(text.to_owned()),
            StepProgress::ThinkingDelta(text) => seen.thinking.push(text.to_owned()),
            StepProgress::Message(m) if m.tool_calls.iter().any(|c| c.name == "send_message") => {
                seen.message_after = Some(seen.reply.len());
            }
            _ => {}
        }
    })));
    seen
}

fn check(seen: &Seen, thought: &str) {
    assert_eq!(seen.reply.concat(), REPLY);
    assert!(
        seen.reply.len() >= REPLY.chars().count() / 2,
        "{:?}",
        seen.reply
    );
    assert_eq!(seen.thinking.concat(), thought);
    assert!(seen.thinking.len() > 1, "{:?}", seen.thinking);
    assert_eq!(
        seen.message_after,
        Some(seen.reply.len()),
        "the pieces come before the message"
    );
}

#[memgpt_test_harness::test]
async fn openai_streams_the_reply_as_it_is_written() {
    let server = FakeOpenAi::start().await;
    let mut agent = Agent::builder()
        .provider(provider(&server))
        .build()
        .await
        .unwrap();
    let seen = watch(&mut agent);
    server.push(Reply::calls(
        "Greeting him.",
        &[("send_message", json!({ "message": REPLY }))],
    ));
    let record = agent.step("hello").await.unwrap();
    assert_eq!(record.replies, [REPLY]);
    check(&seen.lock().unwrap(), "Greeting him.");
    let request = &server.agent_requests()[0].body;
    assert_eq!(request["stream"], true);
    assert_eq!(request["stream_options"]["include_usage"], true);
    assert!(
        record.usage.prompt_tokens > 0,
        "usage arrives in the last chunk"
    );

    // Without an observer nothing streams.
    agent.set_observer(None);
    server.push(Reply::call("send_message", json!({ "message": "ok" })));
    agent.step("again").await.unwrap();
    assert!(server.agent_requests()[1].body.get("stream").is_none());
}

#[memgpt_test_harness::test]
async fn the_openai_stream_assembles_what_complete_returns() {
    let server = FakeOpenAi::start().await;
    let provider = provider(&server);
    let reply = Reply::calls(
        "Two calls.",
        &[
            (
                "core_memory_append",
                json!({"label": "human", "content": "Likes ☕", "request_heartbeat": true}),
            ),
            ("send_message", json!({ "message": REPLY })),
        ],
    );
    server.push_all([reply.clone(), reply]);
    let agent = Agent::builder()
        .provider(provider.clone())
        .build()
        .await
        .unwrap();
    let request = agent.request();
    let whole = provider.complete(&request).await.unwrap();
    let deltas = Mutex::new(Vec::new());
    let streamed = complete_streaming(provider.as_ref(), &request, &|d: StreamDelta<'_>| {
        deltas.lock().unwrap().push(format!("{d:?}"));
    })
    .await
    .unwrap();
    assert_eq!(streamed.content, whole.content);
    assert_eq!(streamed.finish_reason, whole.finish_reason);
    let calls = |r: &memgpt::llm::ChatResponse| -> Vec<(String, String)> {
        r.tool_calls
            .iter()
            .map(|c| (c.name.clone(), c.arguments.clone()))
            .collect()
    };
    assert_eq!(calls(&streamed), calls(&whole));
    assert!(
        streamed
            .tool_calls
            .iter()
            .all(|c| c.id.starts_with("call_"))
    );
    let deltas = deltas.into_inner().unwrap();
    assert!(
        deltas.len() > 100,
        "one delta per character: {}",
        deltas.len()
    );
    assert!(provider.as_streaming().is_some());
}

#[cfg(feature = "anthropic")]
#[memgpt_test_harness::test]
async fn anthropic_streams_the_reply_as_it_is_written() {
    use crate::fake_anthropic::{FakeAnthropic, Reply as AnthropicReply};

    let server = FakeAnthropic::start().await;
    let mut agent = Agent::builder()
        .provider(crate::anthropic::provider(&server))
        .build()
        .await
        .unwrap();
    let seen = watch(&mut agent);
    server.push(AnthropicReply::calls(
        "Greeting him.",
        &[("send_message", json!({ "message": REPLY }))],
    ));
    let record = agent.step("hello").await.unwrap();
    assert_eq!(record.replies, [REPLY]);
    check(&seen.lock().unwrap(), "Greeting him.");
    assert!(server.agent_requests()[0].streams());
}
