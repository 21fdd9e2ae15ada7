//! The OpenAI-compatible provider against the fake server: retries, errors, embeddings, and
//! function calls through a JSON schema or the text protocol.

use std::time::{Duration, Instant};

use memgpt::StopReason;
use memgpt::embed::Embedder;
use memgpt::llm::{ChatMessage, ChatRequest, LlmError, LlmProvider};
use memgpt::openai::{OpenAiEmbedder, OpenAiProvider, ToolCalling};
use memgpt::structured::{INVALID_REPLY_FUNCTION, PROTOCOL_HEADING};
use serde_json::{Value, json};

use crate::fake_openai::{FAKE_EMBEDDING_DIMENSION, FakeOpenAi, Reply};
use crate::{agent, config, provider};

fn hello() -> ChatRequest {
    ChatRequest::new("", vec![ChatMessage::user("hello")])
}

#[memgpt_test_harness::test]
async fn a_rate_limit_is_retried_after_the_requested_wait() {
    let server = FakeOpenAi::start().await;
    server.push(Reply::rate_limited(Duration::from_millis(300)));
    server.push(Reply::call("send_message", json!({"message": "made it"})));
    let mut agent = agent(&server).await;
    let started = Instant::now();
    let record = agent.step("hi").await.unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "Retry-After was honoured"
    );
    assert_eq!(record.replies, ["made it"]);
    assert_eq!(
        record.llm_calls, 1,
        "the retry happened inside the provider"
    );
    assert_eq!(server.agent_requests().len(), 2);
}

#[memgpt_test_harness::test]
async fn server_errors_are_retried_then_reported() {
    let server = FakeOpenAi::start().await;
    for _ in 0..4 {
        server.push(Reply::status(503, "overloaded"));
    }
    let mut agent = agent(&server).await;
    let record = agent.step("hi").await.unwrap();
    assert_eq!(
        server.agent_requests().len(),
        4,
        "one attempt and three retries"
    );
    match record.stop_reason {
        StopReason::ProviderError {
            message, retryable, ..
        } => {
            assert!(retryable);
            assert_eq!(message, "transient provider error (HTTP 503): overloaded");
        }
        other => panic!("unexpected stop: {other:?}"),
    }
}

#[memgpt_test_harness::test]
async fn permanent_errors_are_not_retried() {
    let server = FakeOpenAi::start().await;
    server.push(Reply::status(401, "Incorrect API key provided"));
    let p = provider(&server);
    let err = p
        .complete(&hello().with_tools_for_test())
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            LlmError::Permanent {
                status: Some(401),
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(server.requests().len(), 1);

    let server = FakeOpenAi::start().await;
    server.push(Reply::Status {
        status: 429,
        body: json!({"error": {"message": "You exceeded your current quota", "code": "insufficient_quota"}}),
        headers: vec![],
    });
    let err = provider(&server)
        .complete(&hello().with_tools_for_test())
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            LlmError::Permanent {
                status: Some(429),
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(
        server.requests().len(),
        1,
        "an exhausted quota is not retried"
    );
}

#[memgpt_test_harness::test]
async fn context_overflow_is_typed() {
    let server = FakeOpenAi::start().await;
    server.push(Reply::context_overflow());
    let err = provider(&server)
        .complete(&hello().with_tools_for_test())
        .await
        .unwrap_err();
    assert!(err.is_context_overflow(), "{err}");
    assert_eq!(server.requests().len(), 1);
}

#[memgpt_test_harness::test]
async fn an_overflow_reported_as_a_server_error_is_not_retried() {
    let server = FakeOpenAi::start().await;
    server.push(Reply::status(
        500,
        "the request exceeds the available context size, try increasing it",
    ));
    let err = provider(&server)
        .complete(&hello().with_tools_for_test())
        .await
        .unwrap_err();
    assert!(err.is_context_overflow(), "{err}");
    assert_eq!(
        server.requests().len(),
        1,
        "resending an overlong prompt cannot help"
    );
}

#[memgpt_test_harness::test]
async fn a_server_side_overflow_forces_a_flush_and_a_retry() {
    let server = FakeOpenAi::start().await;
    let mut agent = agent(&server).await;
    for i in 0..5 {
        server.push(Reply::call(
            "send_message",
            json!({"message": format!("reply {i}")}),
        ));
        agent.step(format!("message {i}")).await.unwrap();
    }
    server.push(Reply::context_overflow());
    server.push_summary("We exchanged five messages.");
    server.push(Reply::call(
        "send_message",
        json!({"message": "still here"}),
    ));
    let record = agent.step("one more").await.unwrap();
    assert_eq!(record.replies, ["still here"]);
    assert_eq!(record.flushes.len(), 1);
    assert!(record.flushes[0].forced);
    let last = server.agent_requests().pop().unwrap();
    assert!(
        last.messages()[1]["content"]
            .as_str()
            .unwrap()
            .contains("We exchanged five messages.")
    );
}

#[memgpt_test_harness::test]
async fn timeouts_are_retried() {
    let server = FakeOpenAi::start().await;
    server.push(
        Reply::call("send_message", json!({"message": "slow"})).delayed(Duration::from_millis(800)),
    );
    server.push(Reply::call("send_message", json!({"message": "fast"})));
    let p = OpenAiProvider::new(config(&server).with_timeout(Duration::from_millis(200))).unwrap();
    let response = p.complete(&hello().with_tools_for_test()).await.unwrap();
    assert!(response.tool_calls[0].arguments.contains("fast"));
    assert_eq!(server.requests().len(), 2);
}

#[memgpt_test_harness::test]
async fn requests_carry_the_key_model_and_tools() {
    let server = FakeOpenAi::start().await;
    server.push(Reply::call("send_message", json!({"message": "hi"})));
    let mut agent = agent(&server).await;
    agent.step("hi").await.unwrap();
    let request = &server.requests()[0];
    assert_eq!(request.authorization.as_deref(), Some("Bearer sk-test"));
    assert_eq!(request.body["model"], "gpt-4o-mini");
    assert_eq!(request.body["tool_choice"], "required");
    let names: Vec<&str> = request.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, memgpt::builtin::DEFAULT_FUNCTIONS);
    let send = &request.body["tools"][0]["function"];
    assert!(
        send["parameters"]["properties"]
            .get("request_heartbeat")
            .is_none(),
        "send_message is terminal"
    );
    let append = &request.body["tools"][2]["function"]["parameters"];
    assert_eq!(
        append["required"],
        json!(["label", "content", "request_heartbeat"])
    );
}

#[memgpt_test_harness::test]
async fn embeddings_round_trip_in_batches_and_order() {
    let server = FakeOpenAi::start().await;
    let mut c = config(&server);
    c.model = "text-embedding-fake".into();
    let embedder = OpenAiEmbedder::detect(c).await.unwrap().with_batch_size(2);
    assert_eq!(embedder.dimension(), FAKE_EMBEDDING_DIMENSION);
    let texts: Vec<String> = (0..5).map(|i| format!("text number {i}")).collect();
    let vectors = embedder.embed(&texts).await.unwrap();
    assert_eq!(vectors.len(), 5);
    let expected =
        memgpt::embed::HashingEmbedder::new(FAKE_EMBEDDING_DIMENSION).vector("text number 3");
    assert_eq!(vectors[3], expected);
    let batches = server
        .all_requests()
        .iter()
        .filter(|r| r.path == "/v1/embeddings")
        .count();
    assert_eq!(batches, 1 + 3, "the probe plus ceil(5 / 2) batches");

    let wrong = OpenAiEmbedder::new(config(&server), 8).unwrap();
    let err = wrong.embed(&["x".to_owned()]).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("returned a 64-d vector, expected 8"),
        "{err}"
    );
}

/// An agent whose provider gets function calls through `mode`.
async fn agent_calling(server: &FakeOpenAi, mode: ToolCalling) -> memgpt::Agent {
    let provider = OpenAiProvider::new(config(server).with_tool_calling(mode)).unwrap();
    memgpt::Agent::builder()
        .provider(std::sync::Arc::new(provider))
        .build()
        .await
        .expect("agent")
}

/// The content of the last message of `role` in a request.
fn last_of(request: &crate::fake_openai::Received, role: &str) -> String {
    request
        .messages()
        .iter()
        .rev()
        .find(|m| m["role"] == role)
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

#[memgpt_test_harness::test]
async fn json_schema_mode_chains_calls_without_native_tools() {
    let server = FakeOpenAi::start().await;
    server.push(Reply::json_call(
        "Remember the name.",
        "core_memory_append",
        json!({"label": "human", "content": "Name: Ada", "request_heartbeat": true}),
    ));
    server.push(Reply::json_call(
        "Now greet her.",
        "send_message",
        json!({"message": "Nice to meet you, Ada!"}),
    ));
    let mut agent = agent_calling(&server, ToolCalling::JsonSchema).await;
    let record = agent.step("I'm Ada").await.unwrap();
    assert_eq!(record.stop_reason, StopReason::EndTurn);
    assert_eq!(record.replies, ["Nice to meet you, Ada!"]);
    assert_eq!(record.llm_calls, 2);
    let calls: Vec<(&str, bool, bool)> = record
        .function_calls
        .iter()
        .map(|c| (c.name.as_str(), c.ok, c.request_heartbeat))
        .collect();
    assert_eq!(
        calls,
        [
            ("core_memory_append", true, true),
            ("send_message", true, false)
        ]
    );
    assert_eq!(agent.memory().get("human").unwrap().value(), "Name: Ada");
    let thoughts: Vec<&str> = record
        .messages
        .iter()
        .filter(|m| m.kind == memgpt::message::MessageKind::Assistant)
        .map(|m| m.text.as_str())
        .collect();
    assert_eq!(thoughts, ["Remember the name.", "Now greet her."]);

    let requests = server.agent_requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert!(!request.has_tools() && request.body.get("tool_choice").is_none());
        let format = &request.body["response_format"];
        assert_eq!(format["type"], "json_schema");
        assert_eq!(format["json_schema"]["name"], "function_call");
        assert_eq!(format["json_schema"]["strict"], true);
        let names: Vec<&str> = format["json_schema"]["schema"]["anyOf"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["properties"]["function"]["const"].as_str().unwrap())
            .collect();
        assert_eq!(names, memgpt::builtin::DEFAULT_FUNCTIONS);
        assert!(request.system_prompt().contains(PROTOCOL_HEADING));
        assert!(
            request
                .messages()
                .iter()
                .all(|m| m["role"] != "tool" && m.get("tool_calls").is_none())
        );
    }
    // The second request shows the first call as JSON and its result as a user message.
    let call: Value = serde_json::from_str(&last_of(&requests[1], "assistant")).unwrap();
    assert_eq!(call["thinking"], "Remember the name.");
    assert_eq!(call["function"], "core_memory_append");
    assert_eq!(call["arguments"]["request_heartbeat"], true);
    let result = requests[1].last_content();
    assert!(
        result.starts_with("[function result for core_memory_append] {\"status\":\"OK\""),
        "{result}"
    );
    assert!(
        result.contains("request_heartbeat=true"),
        "the heartbeat is merged into the same user message: {result}"
    );
}

#[memgpt_test_harness::test]
async fn text_mode_repairs_replies_and_feeds_unreadable_ones_back() {
    let server = FakeOpenAi::start().await;
    server.push_all([
        // Prose, a code fence, single quotes, a string for a boolean, trailing commas.
        Reply::text(
            "Sure! Let me save that first.\n```json\n{'function': 'core_memory_append', 'arguments': \
             {'label': 'human', 'content': 'Name: Ada', 'request_heartbeat': 'true',},}\n```",
        ),
        // Nothing to recover.
        Reply::text("Hmm, I am not sure what to do now."),
        Reply::text(
            r#"{"thinking": "Answer her.", "function": "send_message", "arguments": {"message": "Hi Ada!"}}"#,
        ),
    ]);
    let mut agent = agent_calling(&server, ToolCalling::Text).await;
    let record = agent.step("I'm Ada").await.unwrap();
    assert_eq!(record.stop_reason, StopReason::EndTurn);
    assert_eq!(record.replies, ["Hi Ada!"]);
    assert_eq!(record.llm_calls, 3, "no stall: the error was fed back");
    let calls: Vec<(&str, bool)> = record
        .function_calls
        .iter()
        .map(|c| (c.name.as_str(), c.ok))
        .collect();
    assert_eq!(
        calls,
        [
            ("core_memory_append", true),
            (INVALID_REPLY_FUNCTION, false),
            ("send_message", true)
        ]
    );
    assert_eq!(
        record.function_calls[0].arguments,
        r#"{"label":"human","content":"Name: Ada","request_heartbeat":true}"#
    );
    assert_eq!(agent.memory().get("human").unwrap().value(), "Name: Ada");

    let requests = server.agent_requests();
    assert_eq!(requests.len(), 3);
    for request in &requests {
        assert!(!request.has_tools());
        assert!(request.body.get("response_format").is_none());
        assert!(request.system_prompt().contains(PROTOCOL_HEADING));
        assert!(request.system_prompt().contains("- core_memory_append: "));
    }
    // The repaired call is shown back to the model as valid JSON, with the prose as thought.
    let repaired: Value = serde_json::from_str(&last_of(&requests[1], "assistant")).unwrap();
    assert_eq!(repaired["thinking"], "Sure! Let me save that first.");
    assert_eq!(repaired["arguments"]["request_heartbeat"], true);
    // The unreadable reply is shown as written, then the feedback, as a heartbeat.
    assert_eq!(
        last_of(&requests[2], "assistant"),
        "Hmm, I am not sure what to do now."
    );
    let feedback = requests[2].last_content();
    assert!(
        feedback.starts_with(
            "[function call error] Your reply was not a valid function call: it contains no JSON object. \
             Reply with exactly one JSON object and nothing else, like {\"thinking\": \"...\", \"function\": \"send_message\""
        ),
        "{feedback}"
    );
    assert!(
        feedback.contains("A function call failed; you have control again."),
        "{feedback}"
    );
}

#[memgpt_test_harness::test]
async fn summarizer_requests_stay_plain_in_structured_modes() {
    let server = FakeOpenAi::start().await;
    server.push_summary("A summary.");
    let provider =
        OpenAiProvider::new(config(&server).with_tool_calling(ToolCalling::Text)).unwrap();
    let response = provider.complete(&hello()).await.unwrap();
    assert_eq!(response.content, "A summary.");
    assert!(response.tool_calls.is_empty());
    let request = server.last_request().unwrap();
    assert!(!request.is_agent());
    assert_eq!(request.messages().len(), 1);
}

trait ForTest {
    fn with_tools_for_test(self) -> Self;
}

impl ForTest for ChatRequest {
    /// The fake server answers agent requests (those with tools) from its queue.
    fn with_tools_for_test(mut self) -> Self {
        self.tools = std::sync::Arc::from(vec![memgpt::llm::ToolSchema {
            name: "send_message".into(),
            description: "say".into(),
            parameters: json!({"type": "object"}),
        }]);
        self
    }
}
