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

/// Runs of one kind of character (letters, punctuation or whitespace) longer than this many
/// bytes are counted in pieces of this size.
///
/// BPE merging is quadratic in the length of one pre-token, and the tokenizers' pre-tokenizers
/// keep a run of letters (or of punctuation, or of whitespace) together: counting a 5 MB paste
/// of a hash exactly would take minutes. No word of natural text, and no JSON (where the kinds
/// alternate), has such runs; for them the count is that of their pieces (a slight
/// overestimate, the safe side for a context budget), and the cost stays linear in the input.
pub const LONGEST_COUNTED_RUN: usize = 256;

/// The kinds of character that pre-tokenizers keep together in one pre-token.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Letter,
    Punctuation,
    Space,
    /// Digits (pre-tokenized in groups of at most three) and the like: never a long run.
    Other,
}

fn kind(c: char) -> Kind {
    if c.is_alphabetic() {
        Kind::Letter
    } else if c.is_whitespace() {
        Kind::Space
    } else if c.is_numeric() {
        Kind::Other
    } else {
        Kind::Punctuation
    }
}

impl TiktokenCounter {
    fn encoded(&self, text: &str) -> usize {
        if text.is_empty() {
            0
        } else {
            self.bpe.encode_ordinary(text).len()
        }
    }

    /// Counts the run `text[start..end]` in pieces when it is too long; `pending` is where
    /// the text not yet counted starts.
    fn cut_long_run(&self, text: &str, start: usize, end: usize, pending: &mut usize) -> usize {
        if end - start <= LONGEST_COUNTED_RUN {
            return 0;
        }
        let mut total = self.encoded(&text[*pending..start]);
        let mut piece = start;
        while piece < end {
            let mut cut = (piece + LONGEST_COUNTED_RUN).min(end);
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            total += self.encoded(&text[piece..cut]);
            piece = cut;
        }
        *pending = end;
        total
    }
}

impl TokenCounter for TiktokenCounter {
    fn count_text(&self, text: &str) -> usize {
        if text.len() <= LONGEST_COUNTED_RUN {
            return self.encoded(text);
        }
        let mut total = 0;
        let mut pending = 0; // start of the text not yet counted
        let mut run = (0, Kind::Other); // start and kind of the current run
        for (i, c) in text.char_indices() {
            let k = kind(c);
            if k != run.1 {
                if run.1 != Kind::Other {
                    total += self.cut_long_run(text, run.0, i, &mut pending);
                }
                run = (i, k);
            }
        }
        if run.1 != Kind::Other {
            total += self.cut_long_run(text, run.0, text.len(), &mut pending);
        }
        total + self.encoded(&text[pending..])
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
    fn text_is_counted_exactly_and_only_endless_runs_in_pieces() {
        let counter = TiktokenCounter::cl100k();
        let bpe = tiktoken_rs::cl100k_base_singleton();
        let natural =
            "Ada said: \"I'll sail to Lisbon on 2026-05-04!\"\n\nThen\ther   sister   came. ";
        let text = natural.repeat(50);
        assert_eq!(counter.count_text(&text), bpe.encode_ordinary(&text).len());
        // A run just at the bound is still exact.
        let at_bound = "x".repeat(LONGEST_COUNTED_RUN);
        assert_eq!(
            counter.count_text(&at_bound),
            bpe.encode_ordinary(&at_bound).len()
        );
        // Longer: the text around it exactly, the run by pieces of the bound (on character
        // boundaries), never less than the exact count.
        let run = "é".repeat(LONGEST_COUNTED_RUN); // 2 bytes each: twice the bound
        let mixed = format!("before {run} after");
        let pieces: usize = [&run[..LONGEST_COUNTED_RUN], &run[LONGEST_COUNTED_RUN..]]
            .iter()
            .map(|p| bpe.encode_ordinary(p).len())
            .sum();
        let expected =
            bpe.encode_ordinary("before ").len() + pieces + bpe.encode_ordinary(" after").len();
        assert_eq!(counter.count_text(&mixed), expected);
        assert!(counter.count_text(&mixed) >= bpe.encode_ordinary(&mixed).len());
        assert_eq!(counter.count_text(""), 0);
    }

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
