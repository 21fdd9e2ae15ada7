//! Eviction policies chosen by name: recency, attention and salience.

use super::*;

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
