//! Token accounting.
//!
//! The queue manager needs to know how full the context window is after every append. Counting
//! is done once per message (the count is cached on its queue entry), so keeping the running
//! total is O(1) per append, never O(context).

use std::fmt;

use tiktoken_rs::CoreBPE;
use tiktoken_rs::tokenizer::Tokenizer;

use crate::llm::{ChatMessage, ToolSchema};

/// Tokens every chat message costs on top of its content (role and separators), as in OpenAI's
/// published counting recipe.
pub const TOKENS_PER_MESSAGE: usize = 3;

/// Counts tokens the way the model's tokenizer would.
pub trait TokenCounter: Send + Sync + fmt::Debug {
    /// Tokens in `text`.
    fn count_text(&self, text: &str) -> usize;

    /// Tokens one chat message costs in a prompt: content, function calls and framing.
    fn count_message(&self, message: &ChatMessage) -> usize {
        let mut n = TOKENS_PER_MESSAGE + self.count_text(&message.content);
        for call in &message.tool_calls {
            n +=
                TOKENS_PER_MESSAGE + self.count_text(&call.name) + self.count_text(&call.arguments);
        }
        if let Some(name) = &message.name {
            n += 1 + self.count_text(name);
        }
        n
    }

    /// Tokens the function schemas cost in a prompt.
    fn count_tools(&self, tools: &[ToolSchema]) -> usize {
        tools
            .iter()
            .map(|tool| {
                let parameters = serde_json::to_string(&tool.parameters).unwrap_or_default();
                TOKENS_PER_MESSAGE
                    + self.count_text(&tool.name)
                    + self.count_text(&tool.description)
                    + self.count_text(&parameters)
            })
            .sum()
    }
}

/// A [`TokenCounter`] backed by OpenAI's BPE tables (tiktoken), compiled into the binary so it
/// works offline. The tables are loaded once per process and shared.
///
/// ```
/// use memgpt_core::tokens::{TiktokenCounter, TokenCounter};
///
/// let counter = TiktokenCounter::for_model("gpt-4o");
/// assert_eq!(counter.encoding(), "o200k_base");
/// assert_eq!(counter.count_text("hello world"), 2);
/// ```
#[derive(Clone, Copy)]
pub struct TiktokenCounter {
    bpe: &'static CoreBPE,
    encoding: &'static str,
}

impl TiktokenCounter {
    /// The encoding OpenAI uses for `model`: `o200k_base` for the GPT-4o/4.1/5 and o-series
    /// families, `cl100k_base` for GPT-4/3.5 and for any model tiktoken does not know (a fair
    /// estimate for Llama/Mistral-style BPE vocabularies).
    pub fn for_model(model: &str) -> Self {
        let model = model.rsplit('/').next().unwrap_or(model);
        match tiktoken_rs::tokenizer::get_tokenizer(model) {
            Some(Tokenizer::O200kBase | Tokenizer::O200kHarmony) => Self::o200k(),
            _ => Self::cl100k(),
        }
    }

    /// The `cl100k_base` encoding.
    pub fn cl100k() -> Self {
        Self {
            bpe: tiktoken_rs::cl100k_base_singleton(),
            encoding: "cl100k_base",
        }
    }

    /// The `o200k_base` encoding.
    pub fn o200k() -> Self {
        Self {
            bpe: tiktoken_rs::o200k_base_singleton(),
            encoding: "o200k_base",
        }
    }

    /// The encoding's name.
    pub fn encoding(&self) -> &'static str {
        self.encoding
    }
}

impl fmt::Debug for TiktokenCounter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TiktokenCounter")
            .field("encoding", &self.encoding)
            .finish()
    }
}

impl TokenCounter for TiktokenCounter {
    fn count_text(&self, text: &str) -> usize {
        if text.is_empty() {
            return 0;
        }
        self.bpe.encode_ordinary(text).len()
    }
}

/// A fast approximate counter: one token per four bytes, rounded up. Useful when no tokenizer
/// matches the model and exactness does not matter.
#[derive(Clone, Copy, Debug, Default)]
pub struct ApproxCounter;

impl TokenCounter for ApproxCounter {
    fn count_text(&self, text: &str) -> usize {
        text.len().div_ceil(4)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolCall;

    #[test]
    fn model_names_pick_their_encoding() {
        assert_eq!(
            TiktokenCounter::for_model("gpt-4o-mini").encoding(),
            "o200k_base"
        );
        assert_eq!(
            TiktokenCounter::for_model("gpt-4").encoding(),
            "cl100k_base"
        );
        assert_eq!(
            TiktokenCounter::for_model("gpt-3.5-turbo").encoding(),
            "cl100k_base"
        );
        assert_eq!(
            TiktokenCounter::for_model("llama3.1:8b").encoding(),
            "cl100k_base"
        );
        assert_eq!(
            TiktokenCounter::for_model("openai/gpt-4o").encoding(),
            "o200k_base"
        );
    }

    #[test]
    fn message_counts_include_framing_and_calls() {
        let counter = TiktokenCounter::cl100k();
        let plain = ChatMessage::user("hello world");
        assert_eq!(counter.count_message(&plain), TOKENS_PER_MESSAGE + 2);
        let mut with_call = ChatMessage::assistant("");
        with_call.tool_calls.push(ToolCall {
            id: "1".into(),
            name: "send_message".into(),
            arguments: r#"{"message":"hi"}"#.into(),
        });
        assert!(counter.count_message(&with_call) > 2 * TOKENS_PER_MESSAGE + 4);
    }

    #[test]
    fn approx_counter_rounds_up() {
        assert_eq!(ApproxCounter.count_text("abcde"), 2);
        assert_eq!(ApproxCounter.count_text(""), 0);
    }
}
