//! Extension point: an **LLM provider**.
//!
//! Implement `LlmProvider::complete` for your backend (an in-house gateway, a model you run
//! in-process...): take the `ChatRequest` (main context as chat messages, the function
//! schemas), return the model's text and function calls. Retry transient failures inside the
//! provider, and map "prompt too long" to `LlmError::ContextOverflow` so the agent flushes and
//! tries again. Streaming has a default built on `complete`; override it if your backend streams.
//!
//! This one is a rule-based stand-in that always answers with `send_message`.
//!
//! ```text
//! cargo run --example custom_provider
//! ```

use std::sync::Arc;

use async_trait::async_trait;
use memgpt::Agent;
use memgpt::llm::{
    ChatRequest, ChatResponse, FinishReason, LlmError, LlmProvider, Role, ToolCall, Usage,
};
use serde_json::json;

/// Answers every turn by telling the user how long their last message was.
#[derive(Debug)]
struct CountingProvider;

#[async_trait]
impl LlmProvider for CountingProvider {
    fn model(&self) -> &str {
        "counting-1"
    }

    fn context_window(&self) -> Option<usize> {
        Some(8_192)
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let last_user = request
            .messages
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .map_or(0, |m| m.content.chars().count());
        let arguments =
            json!({"message": format!("Your last message had {last_user} characters.")});
        Ok(ChatResponse {
            content: "Counting characters, as always.".to_owned(),
            tool_calls: vec![ToolCall {
                id: "call-1".to_owned(),
                name: "send_message".to_owned(),
                arguments: arguments.to_string(),
            }],
            usage: Usage::default(),
            finish_reason: FinishReason::ToolCalls,
            model: self.model().to_owned(),
        })
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut agent = Agent::builder()
        .provider(Arc::new(CountingProvider))
        .build()
        .await?;
    let record = agent.step("Hello there").await?;
    println!("agent: {}", record.reply());
    assert!(record.reply().starts_with("Your last message had"));
    Ok(())
}
