//! The provider fault matrix: every way a provider's server or network can fail, injected by
//! real servers on 127.0.0.1, through a whole agent step where the fault reaches one.
//!
//! For each fault: no panic; retries are bounded (the number of requests is counted) and spaced
//! by backoff; the failure is a typed error (`StopReason::ProviderError` with the right
//! `retryable`, or the `LlmError` variant); and the user's message is not lost. The policy, as
//! documented on `Agent::step`: a step whose LLM call fails for good ends with
//! `StopReason::ProviderError` and *commits* what it has, the user's message first, so nothing
//! needs resending; the next step carries on from it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use memgpt::llm::{ChatMessage, ChatRequest, LlmError, LlmProvider};
use memgpt::message::MessageKind;
use memgpt::openai::{OpenAiConfig, OpenAiProvider};
use memgpt::store::{Page, RecallQuery};
use memgpt::{Agent, StopReason};
use serde_json::{Value, json};

use crate::fake_openai::{FakeOpenAi, Reply};
use crate::fault_server::{Fault, FaultServer, unreachable_address};
use crate::quick_retry;

/// Attempts a retried fault gets: the first and `quick_retry().max_retries` more.
const ATTEMPTS: usize = 4;
/// The request timeout of these tests.
const TIMEOUT: Duration = Duration::from_millis(400);

fn openai(base_url: String) -> Arc<OpenAiProvider> {
    let config = OpenAiConfig::new(base_url, "gpt-4o-mini")
        .with_api_key("sk-test")
        .with_retry(quick_retry())
        .with_timeout(TIMEOUT);
    Arc::new(OpenAiProvider::new(config).expect("provider"))
}

/// An OpenAI chat completion calling `send_message(text)`.
fn openai_reply(text: &str) -> Fault {
    let arguments = json!({ "message": text }).to_string();
    Fault::json(
        200,
        &json!({
            "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o-mini",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": null,
                "tool_calls": [{"id": "call_1", "type": "function",
                                "function": {"name": "send_message", "arguments": arguments}}]}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        }),
    )
}

fn error_body(message: &str) -> Value {
    json!({"error": {"message": message, "type": "server_error"}})
}

/// What a fault must come to.
struct Expect {
    /// Requests the server receives.
    attempts: usize,
    /// Whether the error says retrying later may help.
    retryable: bool,
    /// Words the error message contains.
    mentions: &'static str,
}

/// Steps an agent whose server plays `faults`, checks the failure, then shows the user's message
/// was kept and the agent steps on once the server behaves.
async fn fault_through_a_step(name: &str, faults: Vec<Fault>, expect: Expect) {
    let server = FaultServer::start().await;
    for fault in faults {
        server.push(fault);
    }
    let mut agent = Agent::builder()
        .provider(openai(server.base_url()))
        .build()
        .await
        .expect("agent");
    let said = format!("the user's words before the {name} fault");
    let started = Instant::now();
    let record = agent.step(said.as_str()).await.expect("the step commits");
    let elapsed = started.elapsed();
    match &record.stop_reason {
        StopReason::ProviderError {
            message, retryable, ..
        } => {
            assert_eq!(*retryable, expect.retryable, "{name}: {message}");
            assert!(
                message.contains(expect.mentions),
                "{name}: {message:?} should mention {:?}",
                expect.mentions
            );
        }
        other => panic!("{name}: stopped with {other:?}"),
    }
    assert_eq!(server.requests(), expect.attempts, "{name}: requests");
    // Retries are spaced (10, 20, 40 ms of backoff at least half-jittered) and bounded.
    if expect.attempts > 1 {
        assert!(elapsed >= Duration::from_millis(35), "{name}: {elapsed:?}");
    }
    assert!(elapsed < Duration::from_secs(10), "{name}: {elapsed:?}");

    // The user's message was committed with the step.
    let kept = agent
        .storage()
        .recall
        .search(
            agent.id(),
            &RecallQuery::text(said.as_str(), Page::first(3)),
        )
        .await
        .expect("search");
    assert!(
        kept.hits
            .iter()
            .any(|h| h.item.kind == MessageKind::User && h.item.text == said),
        "{name}: the user's message was kept"
    );
    assert_eq!(agent.version(), 1, "{name}: the step committed");

    // And the agent carries on once the server behaves.
    server.push(openai_reply("back again"));
    let record = agent.step("are you there?").await.expect("step");
    assert_eq!(record.stop_reason, StopReason::EndTurn, "{name}");
    assert_eq!(record.replies, ["back again"], "{name}");
}

fn repeated(fault: Fault, times: usize) -> Vec<Fault> {
    vec![fault; times]
}

#[memgpt_test_harness::test]
async fn rate_limits_with_and_without_retry_after() {
    // With Retry-After: the wait is honoured and the retry succeeds.
    let server = FaultServer::start().await;
    server.push(Fault::json_with(
        429,
        &error_body("slow down"),
        &[("retry-after", "0.3")],
    ));
    server.push(openai_reply("made it"));
    let mut agent = Agent::builder()
        .provider(openai(server.base_url()))
        .build()
        .await
        .unwrap();
    let started = Instant::now();
    let record = agent.step("hi").await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(record.replies, ["made it"]);
    assert_eq!(server.requests(), 2);

    // Without: backoff, bounded, then a retryable error.
    fault_through_a_step(
        "429",
        repeated(Fault::json(429, &error_body("rate limited")), ATTEMPTS),
        Expect {
            attempts: ATTEMPTS,
            retryable: true,
            mentions: "429",
        },
    )
    .await;
}

#[memgpt_test_harness::test]
async fn server_errors_are_retried_a_bounded_number_of_times() {
    for status in [500, 502, 503] {
        fault_through_a_step(
            &format!("HTTP {status}"),
            repeated(
                Fault::json(status, &error_body("the server broke")),
                ATTEMPTS,
            ),
            Expect {
                attempts: ATTEMPTS,
                retryable: true,
                mentions: "the server broke",
            },
        )
        .await;
    }
}

#[memgpt_test_harness::test]
async fn connection_resets_are_retried() {
    fault_through_a_step(
        "connection reset",
        repeated(Fault::Reset, ATTEMPTS),
        Expect {
            attempts: ATTEMPTS,
            retryable: true,
            mentions: "request failed",
        },
    )
    .await;
}

#[memgpt_test_harness::test]
async fn a_read_timeout_mid_body_is_retried() {
    let stall = Fault::Stall {
        content_type: "application/json",
        declared: Some(2_000),
        sent: br#"{"id": "chatcmpl-1", "choices": [{"#.to_vec(),
    };
    fault_through_a_step(
        "stall mid-body",
        repeated(stall, ATTEMPTS),
        Expect {
            attempts: ATTEMPTS,
            retryable: true,
            mentions: "timed out",
        },
    )
    .await;
}

#[memgpt_test_harness::test]
async fn a_truncated_body_is_retried() {
    let truncated = Fault::Truncated {
        declared: 5_000,
        sent: br#"{"id": "chatcmpl-1", "choices": [{"#.to_vec(),
    };
    fault_through_a_step(
        "truncated body",
        repeated(truncated, ATTEMPTS),
        Expect {
            attempts: ATTEMPTS,
            retryable: true,
            mentions: "end of file before message length reached",
        },
    )
    .await;
}

#[memgpt_test_harness::test]
async fn a_body_that_is_not_json_is_an_invalid_response() {
    fault_through_a_step(
        "not JSON",
        vec![Fault::not_json()],
        Expect {
            attempts: 1,
            retryable: false,
            mentions: "invalid provider response",
        },
    )
    .await;
}

#[memgpt_test_harness::test]
async fn a_50_mb_body_is_not_read_past_the_cap() {
    for declare in [true, false] {
        fault_through_a_step(
            if declare {
                "50 MB declared"
            } else {
                "50 MB undeclared"
            },
            vec![Fault::Huge {
                bytes: 50 << 20,
                declare,
            }],
            Expect {
                attempts: 1,
                retryable: false,
                mentions: "larger than the 16777216-byte limit",
            },
        )
        .await;
    }
}

#[memgpt_test_harness::test]
async fn a_connect_timeout_is_retried_and_bounded() {
    let (addr, _guard) = unreachable_address().await;
    let mut config = OpenAiConfig::new(format!("http://{addr}/v1"), "gpt-4o-mini")
        .with_api_key("sk-test")
        .with_retry(quick_retry());
    config.http.connect_timeout = Duration::from_millis(200);
    let provider = OpenAiProvider::new(config).unwrap();
    let started = Instant::now();
    let request = ChatRequest::new("", vec![ChatMessage::user("hello")]);
    let err = provider.complete(&request).await.unwrap_err();
    let elapsed = started.elapsed();
    assert!(
        matches!(&err, LlmError::Transient { status: None, .. }) && err.is_transient(),
        "{err}"
    );
    // Four attempts of 200 ms each plus the backoff between them, not the OS's minutes.
    assert!(
        elapsed >= Duration::from_millis(4 * 200) && elapsed < Duration::from_secs(5),
        "{elapsed:?}: {err}"
    );
}

/// The model misbehaves within a well-formed response: the agent answers it, never the caller.
#[memgpt_test_harness::test]
async fn bad_calls_are_reported_to_the_model_and_an_endless_chain_is_cut() {
    let server = FakeOpenAi::start().await;
    server.push(Reply::raw_call("core_memory_append", "{label: human, oops"));
    server.push(Reply::call("recall_everything", json!({})));
    server.push(Reply::call("send_message", json!({"message": "sorry"})));
    let mut agent = Agent::builder()
        .provider(Arc::new(
            OpenAiProvider::new(
                OpenAiConfig::new(server.base_url(), "gpt-4o-mini")
                    .with_api_key("sk-test")
                    .with_retry(quick_retry()),
            )
            .unwrap(),
        ))
        .max_chain_length(6)
        .build()
        .await
        .unwrap();
    let record = agent.step("go").await.unwrap();
    assert_eq!(record.stop_reason, StopReason::EndTurn);
    let errors: Vec<String> = record
        .messages
        .iter()
        .filter(|m| m.kind == MessageKind::FunctionError)
        .map(|m| m.text.clone())
        .collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors[0].contains("not valid JSON"), "{errors:?}");
    assert!(errors[1].contains("unknown function"), "{errors:?}");

    // A model that asks for another heartbeat forever is stopped at the chain bound.
    server.respond_with(|_| {
        Reply::call(
            "conversation_search",
            json!({"query": "anything", "request_heartbeat": true}),
        )
    });
    let before = server.agent_requests().len();
    let record = agent.step("loop").await.unwrap();
    assert_eq!(record.stop_reason, StopReason::ChainLimit { limit: 6 });
    assert_eq!(server.agent_requests().len() - before, 6);
    assert_eq!(agent.version(), 2, "both steps committed");
}

/// The streaming provider's faults: a stall mid-stream, an endless event line, a huge body.
#[cfg(feature = "anthropic")]
mod anthropic {
    use memgpt::anthropic::{AnthropicConfig, AnthropicProvider};
    use memgpt::llm::{StreamDelta, StreamingProvider};

    use super::*;

    fn anthropic_config(base_url: String) -> AnthropicConfig {
        AnthropicConfig::new(base_url, "claude-sonnet-4-5")
            .with_api_key("sk-ant-test")
            .with_retry(quick_retry())
            .with_timeout(TIMEOUT)
    }

    #[memgpt_test_harness::test]
    async fn a_stream_that_stalls_mid_way_times_out_with_a_typed_error() {
        let server = FaultServer::start().await;
        server.push(Fault::Stall {
            content_type: "text/event-stream",
            declared: None,
            sent: b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":5,\"output_tokens\":0}}}\n\n".to_vec(),
        });
        let provider = AnthropicProvider::new(anthropic_config(server.base_url())).unwrap();
        let started = Instant::now();
        let sink = |_: StreamDelta<'_>| {};
        let err = provider
            .complete_streaming(&crate::anthropic::hello(), &sink)
            .await
            .unwrap_err();
        assert!(err.is_transient(), "{err}");
        assert!(err.to_string().contains("timed out"), "{err}");
        // A stream that started is not retried by the provider (part of it may have been shown).
        assert_eq!(server.requests(), 1);
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[memgpt_test_harness::test]
    async fn a_10_mb_event_stream_line_is_refused() {
        let server = FaultServer::start().await;
        server.push(Fault::EndlessSseLine { bytes: 10 << 20 });
        let mut config = anthropic_config(server.base_url());
        config.http.timeout = Duration::from_secs(30);
        let provider = AnthropicProvider::new(config).unwrap();
        let sink = |_: StreamDelta<'_>| {};
        let err = provider
            .complete_streaming(&crate::anthropic::hello(), &sink)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, LlmError::InvalidResponse { message } if message.contains("larger than 8388608 bytes")),
            "{err}"
        );
        assert_eq!(server.requests(), 1);
    }

    #[memgpt_test_harness::test]
    async fn an_anthropic_body_over_the_cap_is_refused() {
        let server = FaultServer::start().await;
        server.push(Fault::Huge {
            bytes: 50 << 20,
            declare: false,
        });
        let mut config = anthropic_config(server.base_url());
        config.http.timeout = Duration::from_secs(30);
        let provider = AnthropicProvider::new(config).unwrap();
        let err = provider
            .complete(&crate::anthropic::hello())
            .await
            .unwrap_err();
        assert!(
            matches!(&err, LlmError::InvalidResponse { message } if message.contains("larger than")),
            "{err}"
        );
        assert_eq!(server.requests(), 1);
    }
}
