//! Test support: a scripted, in-process [`LlmProvider`] for unit-testing agents and functions
//! without a network or a model.
//!
//! Agent requests (those offering functions) are answered from one queue, summarizer requests
//! (no functions) from another. Every request is recorded for inspection. An exhausted queue
//! answers with a permanent error, so a test that under-scripts fails visibly.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> memgpt_core::Result<()> {
//! use std::sync::Arc;
//! use memgpt_core::{Agent, StopReason};
//! use memgpt_core::testing::ScriptedProvider;
//! use serde_json::json;
//!
//! let llm = Arc::new(ScriptedProvider::new());
//! llm.push_call("send_message", json!({"message": "Hi Chad!"}));
//! let mut agent = Agent::builder().provider(llm.clone()).build().await?;
//! let step = agent.step("hello").await?;
//! assert_eq!(step.reply(), "Hi Chad!");
//! assert_eq!(step.stop_reason, StopReason::EndTurn);
//! assert!(llm.requests()[0].tools.iter().any(|t| t.name == "send_message"));
//! # Ok(()) }
//! ```

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;
use serde_json::Value;

use crate::llm::{ChatRequest, ChatResponse, FinishReason, LlmError, LlmProvider, Usage};
use crate::message::ToolCall;

/// A provider that plays back scripted replies.
#[derive(Debug, Default)]
pub struct ScriptedProvider {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    replies: VecDeque<Result<ChatResponse, LlmError>>,
    summaries: VecDeque<Result<String, LlmError>>,
    requests: Vec<ChatRequest>,
    calls: usize,
    context_window: Option<usize>,
}

impl ScriptedProvider {
    /// An empty script.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reports `tokens` as the model's context window.
    pub fn with_context_window(self, tokens: usize) -> Self {
        self.lock().context_window = Some(tokens);
        self
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Queues an agent reply (or error).
    pub fn push(&self, reply: Result<ChatResponse, LlmError>) {
        self.lock().replies.push_back(reply);
    }

    /// Queues a reply calling one function.
    pub fn push_call(&self, name: &str, arguments: Value) {
        self.push_calls("", &[(name, arguments)]);
    }

    /// Queues a reply with inner monologue `thought` and several calls.
    pub fn push_calls(&self, thought: &str, calls: &[(&str, Value)]) {
        let calls = calls
            .iter()
            .map(|(name, args)| ((*name).to_owned(), args.to_string()))
            .collect();
        self.push_raw_calls(thought, calls);
    }

    /// Queues a reply with calls whose arguments are sent verbatim (they may be invalid JSON).
    pub fn push_raw_calls(&self, thought: &str, calls: Vec<(String, String)>) {
        let mut state = self.lock();
        let base = state.replies.len() * 8;
        let tool_calls = calls
            .into_iter()
            .enumerate()
            .map(|(i, (name, arguments))| ToolCall {
                id: format!("call_{}", base + i),
                name,
                arguments,
            })
            .collect();
        state.replies.push_back(Ok(response(thought, tool_calls)));
    }

    /// Queues a reply with text and no function call.
    pub fn push_text(&self, text: &str) {
        self.push(Ok(response(text, Vec::new())));
    }

    /// Queues an error for the next agent request.
    pub fn push_error(&self, error: LlmError) {
        self.push(Err(error));
    }

    /// Queues the answer to the next summarizer request.
    pub fn push_summary(&self, summary: Result<String, LlmError>) {
        self.lock().summaries.push_back(summary);
    }

    /// Every request received, in order.
    pub fn requests(&self) -> Vec<ChatRequest> {
        self.lock().requests.clone()
    }

    /// The requests that offered functions (agent calls), in order.
    pub fn agent_requests(&self) -> Vec<ChatRequest> {
        self.lock()
            .requests
            .iter()
            .filter(|r| !r.tools.is_empty())
            .cloned()
            .collect()
    }

    /// The requests that offered no functions (summarizer calls), in order.
    pub fn summary_requests(&self) -> Vec<ChatRequest> {
        self.lock()
            .requests
            .iter()
            .filter(|r| r.tools.is_empty())
            .cloned()
            .collect()
    }

    /// Scripted agent replies not consumed yet.
    pub fn remaining(&self) -> usize {
        self.lock().replies.len()
    }
}

fn response(content: &str, tool_calls: Vec<ToolCall>) -> ChatResponse {
    ChatResponse {
        content: content.to_owned(),
        finish_reason: if tool_calls.is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        },
        tool_calls,
        usage: Usage::default(),
        model: "scripted".to_owned(),
    }
}

#[async_trait]
impl LlmProvider for ScriptedProvider {
    fn model(&self) -> &str {
        "scripted"
    }

    fn provider_name(&self) -> &str {
        "scripted"
    }

    fn context_window(&self) -> Option<usize> {
        self.lock().context_window
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let mut state = self.lock();
        state.calls += 1;
        state.requests.push(request.clone());
        let prompt_chars: usize = request.messages.iter().map(|m| m.content.len()).sum();
        let usage = Usage {
            prompt_tokens: prompt_chars.div_ceil(4) as u64,
            completion_tokens: 8,
            cached_prompt_tokens: 0,
        };
        if request.tools.is_empty() {
            let summary = state.summaries.pop_front().unwrap_or_else(|| {
                Err(LlmError::Permanent {
                    status: None,
                    message: "no scripted summary left".into(),
                })
            })?;
            let mut reply = response(&summary, Vec::new());
            reply.usage = usage;
            return Ok(reply);
        }
        let mut reply = state.replies.pop_front().unwrap_or_else(|| {
            Err(LlmError::Permanent {
                status: None,
                message: "no scripted reply left".into(),
            })
        })?;
        reply.usage = usage;
        Ok(reply)
    }
}
