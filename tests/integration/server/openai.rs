//! The OpenAI-compatible facade: agents by name or id.

use super::*;

/// Any OpenAI client talks to an agent through `/v1/chat/completions`: here memgpt's own
/// OpenAI provider, then raw requests (streaming included). Only the newest user message
/// reaches the agent.
#[memgpt_test_harness::test]
async fn openai_clients_talk_to_agents_by_name_or_id() {
    use memgpt::llm::{ChatMessage, ChatRequest, LlmProvider};
    use memgpt::openai::{OpenAiConfig, OpenAiProvider};

    let s = start().await;
    let key = s.tenant("acme").await;
    let id = s.agent(&key, "ada").await;
    s.llm
        .push_call("send_message", json!({"message": "Hello from Ada."}));
    let client = OpenAiProvider::new(OpenAiConfig {
        api_key: Some(key.clone()),
        ..OpenAiConfig::new(format!("{}/v1", s.base), "ada")
    })
    .unwrap();
    let answer = client
        .complete(&ChatRequest::new(
            "ada",
            vec![
                ChatMessage::system("You are a helpful assistant."),
                ChatMessage::user("An old message the agent must not see."),
                ChatMessage::user("Hi Ada!"),
            ],
        ))
        .await
        .unwrap();
    assert_eq!(answer.content, "Hello from Ada.");
    assert!(answer.usage.prompt_tokens > 0);
    let kinds_and_texts: Vec<(String, String)> = {
        let (_, page) = s.get(&format!("/v1/agents/{id}/messages"), &key).await;
        page["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["kind"].as_str().unwrap().to_owned(),
                    m["text"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    assert_eq!(
        kinds_and_texts[0],
        ("user".to_owned(), "Hi Ada!".to_owned())
    );
    assert!(
        !kinds_and_texts
            .iter()
            .any(|(_, t)| t.contains("old message"))
    );

    // By id, streamed: the role, the reply as content, the finish reason, [DONE].
    s.llm.push_calls(
        "Two things to say.",
        &[
            ("send_message", json!({"message": "First."})),
            ("send_message", json!({"message": "Second."})),
        ],
    );
    let body = s
        .http
        .post(format!("{}/v1/chat/completions", s.base))
        .bearer_auth(&key)
        .json(&json!({
            "model": id,
            "stream": true,
            "temperature": 0.2,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Talk to me."}]}]
        }))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let data: Vec<&str> = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect();
    assert_eq!(data.last(), Some(&"[DONE]"), "{body}");
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let content: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(content, "First.\nSecond.");
    assert_eq!(
        chunks.last().unwrap()["choices"][0]["finish_reason"],
        "stop"
    );
    assert!(
        chunks
            .iter()
            .all(|c| c["object"] == "chat.completion.chunk")
    );

    // Unknown agents and other tenants' agents are unknown models.
    let other = s.tenant("other").await;
    for (model, key) in [("nobody", &key), ("ada", &other), (id.as_str(), &other)] {
        let (status, body) = s
            .post(
                "/v1/chat/completions",
                key,
                json!({"model": model, "messages": [{"role": "user", "content": "hi"}]}),
            )
            .await;
        assert_eq!(
            (status, code(&body)),
            (StatusCode::NOT_FOUND, "not_found"),
            "{model}"
        );
    }
    let (_, models) = s.get("/v1/models", &key).await;
    assert_eq!(models["data"][0]["id"], "ada");
    assert_eq!(models["data"][0]["agent_id"], id.as_str());
}
