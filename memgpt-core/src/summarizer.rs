//! The recursive summary: folding evicted messages into the summary that heads the queue.

use std::fmt;
use std::fmt::Write;
use std::sync::Arc;

use async_trait::async_trait;

use crate::llm::{ChatMessage, ChatRequest, LlmError, LlmProvider, ToolChoice};
use crate::message::{Message, MessageKind};
use crate::time::format_time;
use crate::tokens::TokenCounter;

/// Why a summary could not be produced. The queue manager then keeps the old summary; the
/// evicted messages are safe in recall storage either way.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SummarizeError {
    /// The LLM call failed.
    #[error("summarizer LLM call failed: {0}")]
    Llm(#[from] LlmError),
    /// The LLM returned no text.
    #[error("the summarizer returned an empty summary")]
    Empty,
}

/// Produces a new recursive summary from the previous one and the messages just evicted.
#[async_trait]
pub trait Summarizer: Send + Sync + fmt::Debug {
    /// The new summary, standing for everything `previous` stood for plus `evicted`.
    async fn summarize(
        &self,
        previous: &str,
        evicted: &[Arc<Message>],
    ) -> Result<String, SummarizeError>;
}

/// The instructions [`LlmSummarizer`] gives the model by default.
pub const DEFAULT_SUMMARY_PROMPT: &str = "You maintain the running summary of a conversation between an AI agent and a \
user, for the agent's own use once these messages leave its context window. Fold the new messages into the previous \
summary. Keep what the agent will need later: facts about the user and others, preferences, plans and commitments, \
decisions, open questions, and what was saved to memory. Drop greetings and small talk. Write compact plain prose in \
the agent's first person, at most {words} words. Output only the summary.";

/// A [`Summarizer`] backed by an LLM call with its own prompt and no functions offered.
///
/// When the previous summary plus the evicted transcript do not fit `max_input_tokens`, the
/// transcript is folded in chunk by chunk (each fold summarises the previous result and the
/// next chunk), which is the recursion in "recursive summary".
#[derive(Clone)]
pub struct LlmSummarizer {
    provider: Arc<dyn LlmProvider>,
    counter: Arc<dyn TokenCounter>,
    model: String,
    prompt: String,
    max_input_tokens: usize,
    max_words: usize,
}

impl fmt::Debug for LlmSummarizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LlmSummarizer")
            .field("provider", &self.provider)
            .field("model", &self.model)
            .field("max_input_tokens", &self.max_input_tokens)
            .field("max_words", &self.max_words)
            .finish_non_exhaustive()
    }
}

/// The longest function result or message kept verbatim in a summarizer transcript.
const MAX_LINE_CHARS: usize = 1_500;

impl LlmSummarizer {
    /// A summarizer calling `provider` (its default model), reading at most 4,000 input tokens
    /// per call and asking for at most 300 words.
    pub fn new(provider: Arc<dyn LlmProvider>, counter: Arc<dyn TokenCounter>) -> Self {
        Self {
            provider,
            counter,
            model: String::new(),
            prompt: DEFAULT_SUMMARY_PROMPT.to_owned(),
            max_input_tokens: 4_000,
            max_words: 300,
        }
    }

    /// Uses `model` instead of the provider's default.
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = model.into();
        self
    }

    /// Replaces the instructions (`{words}` is replaced by the word limit).
    pub fn with_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.prompt = prompt.into();
        self
    }

    /// Caps the input of one summarizer call.
    pub fn with_max_input_tokens(mut self, tokens: usize) -> Self {
        self.max_input_tokens = tokens.max(256);
        self
    }

    /// Caps the summary's length in words.
    pub fn with_max_words(mut self, words: usize) -> Self {
        self.max_words = words.clamp(20, 100_000);
        self
    }

    async fn fold(
        &self,
        previous: &str,
        transcript: &str,
        count: usize,
    ) -> Result<String, SummarizeError> {
        let instructions = self.prompt.replace("{words}", &self.max_words.to_string());
        let previous = if previous.trim().is_empty() {
            "(none yet)"
        } else {
            previous.trim()
        };
        let user = format!(
            "Previous summary:\n{previous}\n\nNew messages ({count}, oldest first):\n{transcript}"
        );
        let mut request = ChatRequest::new(
            self.model.clone(),
            vec![ChatMessage::system(instructions), ChatMessage::user(user)],
        );
        request.tool_choice = ToolChoice::None;
        request.max_tokens = Some(
            u32::try_from(self.max_words.saturating_mul(2).saturating_add(64)).unwrap_or(u32::MAX),
        );
        let response = self.provider.complete(&request).await?;
        let summary = response.content.trim();
        if summary.is_empty() {
            return Err(SummarizeError::Empty);
        }
        Ok(summary.to_owned())
    }
}

#[async_trait]
impl Summarizer for LlmSummarizer {
    async fn summarize(
        &self,
        previous: &str,
        evicted: &[Arc<Message>],
    ) -> Result<String, SummarizeError> {
        let lines: Vec<String> = evicted.iter().map(|m| transcript_line(m)).collect();
        let overhead = self.counter.count_text(&self.prompt) + 64;
        let mut summary = previous.to_owned();
        let mut summary_tokens = self.counter.count_text(&summary);
        let mut chunk = String::new();
        let mut chunk_tokens = 0;
        let mut chunk_lines = 0;
        for line in lines {
            let budget = self
                .max_input_tokens
                .saturating_sub(overhead + summary_tokens)
                .max(128);
            let line_tokens = self.counter.count_text(&line) + 1;
            if chunk_lines > 0 && chunk_tokens + line_tokens > budget {
                summary = self.fold(&summary, &chunk, chunk_lines).await?;
                summary_tokens = self.counter.count_text(&summary);
                chunk.clear();
                chunk_tokens = 0;
                chunk_lines = 0;
            }
            chunk.push_str(&line);
            chunk.push('\n');
            chunk_tokens += line_tokens;
            chunk_lines += 1;
        }
        if chunk_lines > 0 {
            summary = self.fold(&summary, &chunk, chunk_lines).await?;
        }
        Ok(summary)
    }
}

/// One line of a summarizer transcript.
pub fn transcript_line(m: &Message) -> String {
    let mut line = format!("[{}] ", format_time(m.created_at));
    match m.kind {
        MessageKind::Assistant => {
            let _ = write!(line, "assistant (thinking): {}", m.text);
            for call in &m.tool_calls {
                let _ = write!(line, " | called {}({})", call.name, call.arguments);
            }
        }
        MessageKind::FunctionReturn => {
            let _ = write!(
                line,
                "function {} returned: {}",
                m.name.as_deref().unwrap_or("?"),
                m.text
            );
        }
        MessageKind::FunctionError => {
            let _ = write!(
                line,
                "function {} failed: {}",
                m.name.as_deref().unwrap_or("?"),
                m.text
            );
        }
        kind => {
            let _ = write!(line, "{}: {}", kind.as_str(), m.text);
        }
    }
    match line.char_indices().nth(MAX_LINE_CHARS) {
        Some((cut, _)) => format!("{}...", &line[..cut]),
        None => line,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use chrono::Utc;

    use super::*;
    use crate::ids::AgentId;
    use crate::llm::{ChatResponse, FinishReason, Usage};
    use crate::tokens::TiktokenCounter;

    /// Answers each call with "S<n>" and records the user prompts.
    #[derive(Debug, Default)]
    struct Recorder {
        prompts: Mutex<Vec<String>>,
        empty: bool,
    }

    #[async_trait]
    impl LlmProvider for Recorder {
        fn model(&self) -> &str {
            "recorder"
        }
        async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
            assert!(
                request.tools.is_empty(),
                "no functions are offered to the summarizer"
            );
            let mut prompts = self.prompts.lock().unwrap();
            prompts.push(request.messages[1].content.clone());
            Ok(ChatResponse {
                content: if self.empty {
                    " ".into()
                } else {
                    format!("S{}", prompts.len())
                },
                tool_calls: vec![],
                usage: Usage::default(),
                finish_reason: FinishReason::Stop,
                model: "recorder".into(),
            })
        }
    }

    fn messages(n: usize, len: usize) -> Vec<Arc<Message>> {
        (0..n)
            .map(|i| {
                Arc::new(Message::new(
                    AgentId::new(),
                    MessageKind::User,
                    format!("{i} {}", "word ".repeat(len)),
                    Utc::now(),
                ))
            })
            .collect()
    }

    #[tokio::test]
    async fn folds_small_batches_in_one_call() {
        let provider = Arc::new(Recorder::default());
        let s = LlmSummarizer::new(provider.clone(), Arc::new(TiktokenCounter::cl100k()));
        let out = s.summarize("old summary", &messages(3, 5)).await.unwrap();
        assert_eq!(out, "S1");
        let prompts = provider.prompts.lock().unwrap();
        assert!(prompts[0].starts_with("Previous summary:\nold summary"));
        assert!(prompts[0].contains("New messages (3, oldest first)"));
    }

    #[tokio::test]
    async fn large_batches_fold_recursively() {
        let provider = Arc::new(Recorder::default());
        let s = LlmSummarizer::new(provider.clone(), Arc::new(TiktokenCounter::cl100k()))
            .with_max_input_tokens(600);
        let out = s.summarize("", &messages(20, 100)).await.unwrap();
        let prompts = provider.prompts.lock().unwrap();
        assert!(prompts.len() > 2);
        assert_eq!(out, format!("S{}", prompts.len()));
        // Each fold starts from the previous fold's result.
        assert!(prompts[1].starts_with("Previous summary:\nS1"));
    }

    #[tokio::test]
    async fn empty_answers_are_errors() {
        let provider = Arc::new(Recorder {
            empty: true,
            ..Default::default()
        });
        let s = LlmSummarizer::new(provider, Arc::new(TiktokenCounter::cl100k()));
        assert!(matches!(
            s.summarize("", &messages(1, 1)).await,
            Err(SummarizeError::Empty)
        ));
    }
}
