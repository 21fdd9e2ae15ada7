//! The Anthropic provider against a fake Messages API server: a real agent step, streaming,
//! retries and typed errors.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use memgpt::anthropic::{AnthropicConfig, AnthropicProvider};
use memgpt::llm::{
    ChatMessage, ChatRequest, LlmError, LlmProvider, StreamDelta, StreamingProvider, ToolSchema,
};
use memgpt::{Agent, StopReason};
use serde_json::{Value, json};

use crate::fake_anthropic::{FakeAnthropic, Reply};
use crate::quick_retry;

fn config(server: &FakeAnthropic) -> AnthropicConfig {
    AnthropicConfig::new(server.base_url(), "claude-sonnet-4-5")
        .with_api_key("sk-ant-test")
        .with_retry(quick_retry())
}

pub(crate) fn provider(server: &FakeAnthropic) -> Arc<AnthropicProvider> {
    Arc::new(AnthropicProvider::new(config(server)).expect("provider"))
}

/// A request the fake server answers from its agent queue (it offers a tool).
pub(crate) fn hello() -> ChatRequest {
    let mut request = ChatRequest::new("", vec![ChatMessage::user("hello")]);
    request.tools = Arc::from(vec![ToolSchema {
        name: "send_message".into(),
        description: "Say something to the user.".into(),
        parameters: json!({"type": "object", "properties": {"message": {"type": "string"}}}),
    }]);
    request
}

/// A sink recording every piece, and what it recorded.
#[allow(clippy::type_complexity)]
fn recorder() -> (
    Arc<Mutex<Vec<String>>>,
    impl Fn(StreamDelta<'_>) + Send + Sync + 'static,
) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let sink = move |delta: StreamDelta<'_>| {
        let piece = match delta {
            StreamDelta::Text(text) => format!("text:{text}"),
            StreamDelta::ToolCallStart { index, id, name } => format!("call{index}:{id}:{name}"),
            StreamDelta::ToolArguments { index, json } => format!("args{index}:{json}"),
            other => format!("{other:?}"),
        };
        log.lock().unwrap().push(piece);
    };
    (seen, sink)
}

fn roles(messages: &[Value]) -> Vec<&str> {
    messages
        .iter()
        .map(|m| m["role"].as_str().unwrap_or("?"))
        .collect()
}

#[memgpt_test_harness::test]
async fn an_agent_step_with_a_heartbeat_runs_on_anthropic() {
    let server = FakeAnthropic::start().await;
    let mut agent = Agent::builder()
        .provider(provider(&server))
        .build()
        .await
        .unwrap();
    server.push_all([
        Reply::calls(
            "The user told me their name. Saving it.",
            &[(
                "core_memory_append",
                json!({"label": "human", "content": "Name: Chad", "request_heartbeat": true}),
            )],
        ),
        Reply::calls(
            "Now greet him.",
            &[(
                "send_message",
                json!({"message": "Nice to meet you, Chad!"}),
            )],
        ),
    ]);
    let record = agent.step("Hi, I'm Chad").await.unwrap();
    assert_eq!(record.stop_reason, StopReason::EndTurn);
    assert_eq!(record.replies, ["Nice to meet you, Chad!"]);
    assert_eq!(record.llm_calls, 2);
    assert!(
        agent
            .memory()
            .get("human")
            .unwrap()
            .value()
            .contains("Name: Chad")
    );

    let requests = server.agent_requests();
    assert_eq!(requests.len(), 2);
    let first = &requests[0];
    assert_eq!(first.api_key.as_deref(), Some("sk-ant-test"));
    assert_eq!(first.version.as_deref(), Some("2023-06-01"));
    assert_eq!(first.body["model"], "claude-sonnet-4-5");
    assert_eq!(first.body["tool_choice"], json!({"type": "any"}));
    assert!(first.body["max_tokens"].as_u64().is_some());
    assert!(first.body.get("stream").is_none());
    // A top-level system prompt in two blocks: the stable prefix, cached, then the rest.
    let blocks = first.body["system"].as_array().expect("system blocks");
    assert_eq!(blocks.len(), 2);
    assert_eq!(blocks[0]["cache_control"], json!({"type": "ephemeral"}));
    let system = blocks[0]["text"].as_str().unwrap();
    assert!(system.contains("Core memory"), "{system}");
    let names: Vec<&str> = first.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, memgpt::builtin::DEFAULT_FUNCTIONS);
    assert_eq!(
        first.body["tools"][2]["input_schema"]["required"],
        json!(["label", "content", "request_heartbeat"])
    );
    assert!(first.all_text().contains("Hi, I'm Chad"));

    // The heartbeat request replays the call and its result as Anthropic wants them.
    let second = requests[1].messages();
    let roles = roles(second);
    assert_eq!(roles.first(), Some(&"user"));
    assert!(
        roles.windows(2).all(|w| w[0] != w[1]),
        "roles alternate: {roles:?}"
    );
    assert!(second.iter().all(|m| m.get("tool_calls").is_none()));
    let call_turn = &second[second.len() - 2];
    assert_eq!(call_turn["role"], "assistant");
    assert_eq!(
        call_turn["content"][0],
        json!({"type": "text", "text": "The user told me their name. Saving it."})
    );
    let tool_use = &call_turn["content"][1];
    assert_eq!(tool_use["type"], "tool_use");
    assert_eq!(tool_use["name"], "core_memory_append");
    assert_eq!(
        tool_use["input"],
        json!({"label": "human", "content": "Name: Chad", "request_heartbeat": true})
    );
    assert!(tool_use["id"].as_str().unwrap().starts_with("toolu_fake_"));
    let result_turn = &second[second.len() - 1];
    assert_eq!(result_turn["role"], "user");
    let result = &result_turn["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(result["tool_use_id"], tool_use["id"]);
    let envelope: Value = serde_json::from_str(result["content"].as_str().unwrap()).unwrap();
    assert_eq!(envelope["status"], "OK");
    let heartbeat = &result_turn["content"][1];
    assert_eq!(heartbeat["type"], "text");
    assert!(
        heartbeat["text"]
            .as_str()
            .unwrap()
            .contains("\"type\":\"heartbeat\"")
    );
}

#[memgpt_test_harness::test]
async fn streaming_reports_pieces_as_they_arrive_and_matches_complete() {
    let server = FakeAnthropic::start().await;
    let reply = Reply::calls(
        "Thinking about tea — ✓ and more words to split.",
        &[
            (
                "core_memory_append",
                json!({"label": "human", "content": "Likes tea ☕", "request_heartbeat": true}),
            ),
            ("send_message", json!({"message": "Tea it is."})),
        ],
    );
    server.push_all([reply.clone(), reply]);
    let p = provider(&server);
    let whole = p.complete(&hello()).await.unwrap();

    let gate = server.hold_streams();
    let (seen, record) = recorder();
    let sink = move |delta: StreamDelta<'_>| {
        // The server holds the rest of the stream until the first piece is seen here.
        if matches!(delta, StreamDelta::Text(_)) {
            gate.notify_one();
        }
        record(delta);
    };
    let streamed = p.complete_streaming(&hello(), &sink).await.unwrap();
    assert_eq!(
        server.released(),
        1,
        "the first piece reached the sink before the server sent the rest"
    );
    assert!(server.requests()[1].streams());

    // Identical apart from the server-made call ids.
    assert_eq!(streamed.content, whole.content);
    assert_eq!(streamed.usage, whole.usage);
    assert_eq!(streamed.finish_reason, whole.finish_reason);
    assert_eq!(streamed.model, whole.model);
    assert_eq!(streamed.tool_calls.len(), 2);
    for (s, w) in streamed.tool_calls.iter().zip(&whole.tool_calls) {
        assert_eq!((&s.name, &s.arguments), (&w.name, &w.arguments));
        assert!(s.id.starts_with("toolu_fake_"));
    }
    assert_eq!(
        whole.tool_calls[0].arguments,
        r#"{"label":"human","content":"Likes tea ☕","request_heartbeat":true}"#
    );

    let seen = seen.lock().unwrap().clone();
    let text: String = seen
        .iter()
        .filter_map(|s| s.strip_prefix("text:"))
        .collect();
    assert_eq!(text, streamed.content);
    assert!(
        seen.iter().filter(|s| s.starts_with("text:")).count() > 3,
        "text arrived in pieces: {seen:?}"
    );
    let args: String = seen
        .iter()
        .filter_map(|s| s.strip_prefix("args0:"))
        .collect();
    let args: Value = serde_json::from_str(&args).unwrap();
    assert_eq!(
        args,
        serde_json::from_str::<Value>(&streamed.tool_calls[0].arguments).unwrap()
    );
    assert!(seen.contains(&format!("call1:{}:send_message", streamed.tool_calls[1].id)));
}

#[memgpt_test_harness::test]
async fn rate_limits_and_overload_are_retried_before_the_stream_starts() {
    let server = FakeAnthropic::start().await;
    server.push_all([
        Reply::rate_limited(Duration::from_millis(300)),
        Reply::overloaded(),
        Reply::call("send_message", json!({"message": "made it"})),
    ]);
    let p = provider(&server);
    let started = Instant::now();
    let response = p.complete(&hello()).await.unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "retry-after was honoured"
    );
    assert!(response.tool_calls[0].arguments.contains("made it"));
    assert_eq!(server.requests().len(), 3);

    server.push_all([
        Reply::overloaded(),
        Reply::status(500, "api_error", "Internal server error"),
        Reply::text("streamed anyway"),
    ]);
    let (_, sink) = recorder();
    let response = p.complete_streaming(&hello(), &sink).await.unwrap();
    assert_eq!(response.content, "streamed anyway");
    assert_eq!(server.requests().len(), 6);
}

#[memgpt_test_harness::test]
async fn errors_are_typed_and_only_transient_ones_retried() {
    let server = FakeAnthropic::start().await;
    let p = provider(&server);

    server.push(Reply::prompt_too_long());
    let err = p.complete(&hello()).await.unwrap_err();
    assert!(err.is_context_overflow(), "{err}");
    assert_eq!(server.requests().len(), 1);

    server.push(Reply::status(
        401,
        "authentication_error",
        "invalid x-api-key",
    ));
    let err = p.complete(&hello()).await.unwrap_err();
    assert!(
        matches!(&err, LlmError::Permanent { status: Some(401), message } if message == "invalid x-api-key"),
        "{err:?}"
    );
    assert_eq!(server.requests().len(), 2);

    server.push(Reply::status(
        404,
        "not_found_error",
        "model: claude-nonexistent",
    ));
    let (_, sink) = recorder();
    let err = p.complete_streaming(&hello(), &sink).await.unwrap_err();
    assert!(
        matches!(
            err,
            LlmError::Permanent {
                status: Some(404),
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(server.requests().len(), 3);

    for _ in 0..4 {
        server.push(Reply::overloaded());
    }
    let err = p.complete(&hello()).await.unwrap_err();
    assert!(
        matches!(
            &err,
            LlmError::Transient {
                status: Some(529),
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        server.requests().len(),
        3 + 4,
        "one attempt and three retries"
    );
}

#[memgpt_test_harness::test]
async fn a_failure_mid_stream_is_reported_not_retried() {
    let server = FakeAnthropic::start().await;
    let p = provider(&server);

    server.push(Reply::stream_error(
        "Let me think about",
        "overloaded_error",
        "Overloaded",
    ));
    let (seen, sink) = recorder();
    let err = p.complete_streaming(&hello(), &sink).await.unwrap_err();
    match &err {
        LlmError::Transient {
            status: None,
            message,
            ..
        } => assert!(message.contains("Overloaded"), "{message}"),
        other => panic!("unexpected: {other:?}"),
    }
    let text: String = seen
        .lock()
        .unwrap()
        .iter()
        .filter_map(|s| s.strip_prefix("text:").map(str::to_owned))
        .collect();
    assert_eq!(
        text, "Let me think about",
        "pieces before the error were reported"
    );
    assert_eq!(
        server.requests().len(),
        1,
        "no retry once the stream started"
    );

    server.push(Reply::truncated("Half an ans"));
    let (_, sink) = recorder();
    let err = p.complete_streaming(&hello(), &sink).await.unwrap_err();
    assert!(
        err.is_transient() && err.to_string().contains("message_stop"),
        "{err}"
    );
    assert_eq!(server.requests().len(), 2);
}

#[memgpt_test_harness::test]
async fn a_prompt_too_long_forces_a_flush_with_an_anthropic_summary() {
    let server = FakeAnthropic::start().await;
    let mut agent = Agent::builder()
        .provider(provider(&server))
        .build()
        .await
        .unwrap();
    for i in 0..5 {
        server.push(Reply::call(
            "send_message",
            json!({"message": format!("reply {i}")}),
        ));
        agent.step(format!("message {i}")).await.unwrap();
    }
    server.push(Reply::prompt_too_long());
    server.push_summary("We exchanged five messages.");
    server.push(Reply::call(
        "send_message",
        json!({"message": "still here"}),
    ));
    let record = agent.step("one more").await.unwrap();
    assert_eq!(record.replies, ["still here"]);
    assert_eq!(record.flushes.len(), 1);
    assert!(record.flushes[0].forced);

    let summary = &server.summary_requests()[0];
    assert!(summary.body.get("tools").is_none());
    assert!(
        summary.body["system"]
            .as_str()
            .is_some_and(|s| !s.is_empty())
    );
    assert_eq!(roles(summary.messages()), ["user"]);
    let last = server.agent_requests().pop().unwrap();
    assert!(last.all_text().contains("We exchanged five messages."));
    assert_eq!(roles(last.messages()).first(), Some(&"user"));
}

/// `memgpt chat` on Anthropic embeds what is said, as on an OpenAI endpoint: the embedder is
/// chosen apart from the chat provider (`auto`: the local model when it is in the model cache;
/// or named), and `memgpt config` says which one will run.
#[cfg(feature = "cli")]
#[memgpt_test_harness::test]
async fn chat_on_anthropic_embeds_its_messages_with_the_local_embedder() {
    use memgpt::models::ALL_MINILM_L6_V2;
    use tokio::io::AsyncWriteExt;
    let Some(mini) = crate::local::model_dir(&ALL_MINILM_L6_V2) else {
        return;
    };
    let server = FakeAnthropic::start().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("home")).unwrap();
    std::os::unix::fs::symlink(mini.parent().unwrap(), dir.path().join("home/models")).unwrap();
    let memgpt = async |args: &[&str], stdin: &str| {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_memgpt"))
            .args(args)
            .current_dir(dir.path())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("ANTHROPIC_API_KEY", "sk-ant-test")
            .env("MEMGPT_BASE_URL", server.base_url())
            .env("MEMGPT_HOME", dir.path().join("home"))
            .env("NO_COLOR", "1")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut input = child.stdin.take().unwrap();
        input.write_all(stdin.as_bytes()).await.unwrap();
        drop(input);
        let output = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
            .await
            .unwrap()
            .unwrap();
        let out = String::from_utf8_lossy(&output.stdout).into_owned();
        let err = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(output.status.success(), "memgpt {args:?}\n{out}\n{err}");
        out
    };
    let config = memgpt(&["config"], "").await;
    assert!(
        config.contains(
            "provider        = anthropic: Claude's Messages API (auto: ANTHROPIC_API_KEY is set)"
        ),
        "{config}"
    );
    assert!(
        config.contains("embedder        = all-minilm-l6-v2 (local, auto)  [default]"),
        "{config}"
    );

    let say = |text: &str| Reply::call("send_message", json!({ "message": text }));
    server.push_all([say("Hello, Ada."), say("Sailing, lovely.")]);
    let out = memgpt(
        &["chat", "--agent", "ada"],
        "Hi, I'm Ada.\nI sail on weekends.\n",
    )
    .await;
    assert!(out.contains("ada> Sailing, lovely."), "{out}");
    server.push(say("Noted."));
    memgpt(
        &["chat", "--agent", "ada", "--embedder", "all-minilm-l6-v2"],
        "My boat is called Wren.\n",
    )
    .await;
    assert_eq!(server.agent_requests().len(), 3);
    // Now that the store holds vectors, `auto` follows their model.
    let config = memgpt(&["config"], "").await;
    assert!(
        config.contains("embedder        = all-minilm-l6-v2 (local, auto: the store's model)"),
        "{config}"
    );

    let url = format!(
        "sqlite://{}?recall=fts5&vectors=exact",
        dir.path().join("memgpt-data").display()
    );
    let storage = url
        .parse::<memgpt::StoreConfig>()
        .unwrap()
        .open()
        .await
        .unwrap();
    let space = storage.agents.embedding_space().await.unwrap().unwrap();
    assert_eq!(
        (space.model.as_str(), space.dimension),
        ("all-minilm-l6-v2", 384)
    );
    let ada = storage.agents.list_agents().await.unwrap()[0].id;
    let messages = storage.recall.count_messages(ada).await.unwrap();
    assert!(
        messages >= 6,
        "three user messages and three replies: {messages}"
    );
    let missing = storage.recall.unembedded_messages(ada, 100).await.unwrap();
    assert!(
        missing.is_empty(),
        "every conversation message is embedded: {} of {messages} are not",
        missing.len()
    );
}
