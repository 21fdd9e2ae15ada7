//! Prompt caching: the prompt's stable prefix (function schemas, instructions, memory blocks)
//! stays byte-identical from step to step until memory is edited, Anthropic requests mark its
//! end with a `cache_control` breakpoint, and the cached tokens the provider reports reach the
//! step record. The fake servers cache like the real ones: a prefix equal to the last one is
//! read from the cache.

use memgpt::Agent;
use serde_json::{Value, json};

use crate::fake_openai::{FakeOpenAi, Reply};
use crate::provider;

fn system(body: &Value) -> String {
    body["messages"][0]["content"].as_str().unwrap().to_owned()
}

#[memgpt_test_harness::test]
async fn the_prefix_stays_identical_across_steps_and_openai_reports_cached_tokens() {
    let server = FakeOpenAi::start().await;
    let mut agent = Agent::builder()
        .provider(provider(&server))
        .build()
        .await
        .unwrap();
    let say = |m: &str| Reply::call("send_message", json!({ "message": m }));
    server.push_all([say("Hi."), say("Hi again.")]);
    let first = agent.step("hello").await.unwrap();
    let stable = agent.request().cache_prefix.unwrap();
    let second = agent.step("hello again").await.unwrap();
    assert_eq!(agent.request().cache_prefix, Some(stable));

    let requests = server.agent_requests();
    let (a, b) = (&requests[0].body, &requests[1].body);
    assert_eq!(
        a["tools"], b["tools"],
        "the schemas are sent byte for byte the same"
    );
    let (sa, sb) = (system(a), system(b));
    assert_eq!(
        sa[..stable],
        sb[..stable],
        "instructions and memory blocks unchanged"
    );
    assert_ne!(sa, sb, "only the counts after them changed");
    assert!(sa[stable..].contains("messages are in recall memory"));
    assert_eq!(first.usage.cached_prompt_tokens, 0, "nothing cached yet");
    assert!(
        second.usage.cached_prompt_tokens >= stable as u64 / 4,
        "{:?}",
        second.usage
    );

    // A memory edit changes the prefix: the call after it misses the cache there.
    server.push_all([
        Reply::call(
            "core_memory_append",
            json!({"label": "human", "content": "Likes tea.", "request_heartbeat": true}),
        ),
        say("Noted."),
    ]);
    let third = agent.step("I like tea").await.unwrap();
    let requests = server.agent_requests();
    let (c, d) = (system(&requests[2].body), system(&requests[3].body));
    assert_eq!(c[..stable], sa[..stable]);
    assert_ne!(d[..stable], c[..stable], "the edit is inside the prefix");
    assert!(d.contains("Likes tea."));
    // The cache still holds what comes before the edit (the tools, the instructions).
    let edited_at = c.bytes().zip(d.bytes()).take_while(|(x, y)| x == y).count();
    assert!(edited_at > 0 && edited_at < stable);
    assert!(third.usage.cached_prompt_tokens > second.usage.cached_prompt_tokens);
}

#[cfg(feature = "anthropic")]
#[memgpt_test_harness::test]
async fn anthropic_requests_carry_a_breakpoint_after_the_memory_blocks() {
    use crate::fake_anthropic::{FakeAnthropic, Reply as AnthropicReply};

    let server = FakeAnthropic::start().await;
    let mut agent = Agent::builder()
        .provider(crate::anthropic::provider(&server))
        .build()
        .await
        .unwrap();
    let say = |m: &str| AnthropicReply::call("send_message", json!({ "message": m }));
    server.push_all([say("Hi."), say("Hi again.")]);
    let first = agent.step("hello").await.unwrap();
    let second = agent.step("hello again").await.unwrap();
    let requests = server.agent_requests();
    let blocks = |i: usize| requests[i].body["system"].as_array().unwrap().clone();
    let (a, b) = (blocks(0), blocks(1));
    assert_eq!(a[0]["cache_control"], json!({"type": "ephemeral"}));
    assert!(a[1].get("cache_control").is_none());
    assert_eq!(
        a[0]["text"], b[0]["text"],
        "the cached block is byte-identical"
    );
    assert!(a[0]["text"].as_str().unwrap().ends_with("</human>"));
    assert!(
        a[1]["text"]
            .as_str()
            .unwrap()
            .contains("messages are in recall memory")
    );
    assert_ne!(a[1], b[1]);
    assert_eq!(first.usage.cached_prompt_tokens, 0);
    assert!(
        second.usage.cached_prompt_tokens > 100,
        "{:?}",
        second.usage
    );
    assert!(
        second.usage.prompt_tokens >= second.usage.cached_prompt_tokens,
        "cached tokens are part of the prompt tokens: {:?}",
        second.usage
    );
}
