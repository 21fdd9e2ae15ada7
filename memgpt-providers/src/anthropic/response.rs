//! Assembles a core [`ChatResponse`] from content blocks, whether they come whole (a JSON
//! response) or in pieces (a stream). Both paths drive the same [`ResponseBuilder`], so a
//! streamed response is identical to the same response read whole.

use std::collections::HashMap;

use memgpt_core::llm::{ChatResponse, LlmError, StreamDelta, StreamSink};
use memgpt_core::message::ToolCall;
use serde_json::Value;

use super::wire::{MessageResponse, ResponseBlock, WireUsage, finish_reason};

/// Put between two text blocks that a non-text block (a function call, usually) separates.
/// Adjacent text blocks (as citations split them) are joined as they are.
const TEXT_SEPARATOR: &str = "\n\n";

/// A sink that drops everything, for responses read whole.
pub(super) fn no_sink(_: StreamDelta<'_>) {}

/// What a content block is, while it is open.
#[derive(Debug)]
enum OpenBlock {
    Text,
    ToolUse {
        /// The call's position in [`ResponseBuilder::calls`].
        call: usize,
        /// The `input` of `content_block_start`, used when no JSON pieces follow.
        input: Value,
        /// The JSON pieces received.
        json: String,
    },
    Other,
    /// A block that was stopped.
    Closed,
}

/// Builds a [`ChatResponse`] block by block, reporting pieces to a sink.
#[derive(Debug, Default)]
pub(super) struct ResponseBuilder {
    model: String,
    content: String,
    calls: Vec<ToolCall>,
    open: HashMap<usize, OpenBlock>,
    /// Whether the last block started was a text block.
    last_was_text: bool,
    /// Whether the current text block must be separated from the content before it (a
    /// non-text block came between them), once it produces text.
    separate: bool,
    usage: WireUsage,
    stop_reason: Option<String>,
}

impl ResponseBuilder {
    /// The response of a non-streaming call.
    pub(super) fn whole(message: MessageResponse) -> Result<ChatResponse, LlmError> {
        let mut builder = Self::default();
        builder.set_model(message.model);
        builder.update_usage(message.usage);
        builder.set_stop_reason(message.stop_reason);
        for (index, block) in message.content.into_iter().enumerate() {
            let text = match &block {
                ResponseBlock::Text { text } => Some(text.clone()),
                _ => None,
            };
            builder.start_block(index, block, &no_sink)?;
            if let Some(text) = text {
                builder.text(index, &text, &no_sink)?;
            }
            builder.stop_block(index, &no_sink)?;
        }
        Ok(builder.finish())
    }

    pub(super) fn set_model(&mut self, model: String) {
        self.model = model;
    }

    pub(super) fn update_usage(&mut self, usage: WireUsage) {
        self.usage.update(usage);
    }

    pub(super) fn set_stop_reason(&mut self, reason: Option<String>) {
        if reason.is_some() {
            self.stop_reason = reason;
        }
    }

    /// Opens block `index`. A text block's initial text is left to [`Self::text`] (the caller
    /// passes it on); a function call is reported to `sink` at once.
    pub(super) fn start_block(
        &mut self,
        index: usize,
        block: ResponseBlock,
        sink: &StreamSink<'_>,
    ) -> Result<(), LlmError> {
        let open = match block {
            ResponseBlock::Text { .. } => {
                self.separate = !self.last_was_text;
                OpenBlock::Text
            }
            ResponseBlock::ToolUse { id, name, input } => {
                let call = self.calls.len();
                sink(StreamDelta::ToolCallStart {
                    index: call,
                    id: &id,
                    name: &name,
                });
                self.calls.push(ToolCall {
                    id,
                    name,
                    arguments: String::new(),
                });
                OpenBlock::ToolUse {
                    call,
                    input,
                    json: String::new(),
                }
            }
            ResponseBlock::Other => OpenBlock::Other,
        };
        self.last_was_text = matches!(open, OpenBlock::Text);
        if self.open.insert(index, open).is_some() {
            return Err(invalid(format!("content block {index} started twice")));
        }
        Ok(())
    }

    /// More text for block `index`.
    pub(super) fn text(
        &mut self,
        index: usize,
        text: &str,
        sink: &StreamSink<'_>,
    ) -> Result<(), LlmError> {
        match self.open.get(&index) {
            Some(OpenBlock::Text) => {}
            Some(OpenBlock::Closed) => {
                return Err(invalid(format!("text for closed block {index}")));
            }
            Some(_) => return Err(invalid(format!("text for non-text block {index}"))),
            None => return Err(invalid(format!("text for unopened block {index}"))),
        }
        if text.is_empty() {
            return Ok(());
        }
        if std::mem::take(&mut self.separate) && !self.content.is_empty() {
            self.content.push_str(TEXT_SEPARATOR);
            sink(StreamDelta::Text(TEXT_SEPARATOR));
        }
        self.content.push_str(text);
        sink(StreamDelta::Text(text));
        Ok(())
    }

    /// More of block `index`'s function arguments, as JSON text.
    pub(super) fn tool_json(
        &mut self,
        index: usize,
        piece: &str,
        sink: &StreamSink<'_>,
    ) -> Result<(), LlmError> {
        match self.open.get_mut(&index) {
            Some(OpenBlock::ToolUse { call, json, .. }) => {
                if !piece.is_empty() {
                    json.push_str(piece);
                    sink(StreamDelta::ToolArguments {
                        index: *call,
                        json: piece,
                    });
                }
                Ok(())
            }
            Some(OpenBlock::Closed) => Err(invalid(format!("arguments for closed block {index}"))),
            Some(_) => Err(invalid(format!("arguments for non-call block {index}"))),
            None => Err(invalid(format!("arguments for unopened block {index}"))),
        }
    }

    /// Closes block `index`. A call's arguments are its JSON pieces re-serialized compactly
    /// (so they equal the serialized `input` of a whole response), or the pieces as they are
    /// if they do not parse, or the start's `input` if no pieces came (which is then reported
    /// to `sink`, so the pieces it saw always spell the arguments).
    pub(super) fn stop_block(
        &mut self,
        index: usize,
        sink: &StreamSink<'_>,
    ) -> Result<(), LlmError> {
        let Some(open) = self.open.get_mut(&index) else {
            return Err(invalid(format!("unopened block {index} stopped")));
        };
        if let OpenBlock::ToolUse { call, input, json } = open {
            let arguments = if json.trim().is_empty() {
                let arguments = serialize_input(input);
                sink(StreamDelta::ToolArguments {
                    index: *call,
                    json: &arguments,
                });
                arguments
            } else {
                match serde_json::from_str::<Value>(json) {
                    Ok(value) => serialize_input(&value),
                    Err(_) => std::mem::take(json),
                }
            };
            if let Some(slot) = self.calls.get_mut(*call) {
                slot.arguments = arguments;
            }
        }
        // Keep the entry, so a repeated index is still caught.
        *open = OpenBlock::Closed;
        Ok(())
    }

    /// The response.
    pub(super) fn finish(self) -> ChatResponse {
        ChatResponse {
            content: self.content,
            tool_calls: self.calls,
            usage: self.usage.to_usage(),
            finish_reason: finish_reason(self.stop_reason.as_deref()),
            model: self.model,
        }
    }
}

fn serialize_input(input: &Value) -> String {
    match input {
        Value::Null => "{}".to_owned(),
        other => other.to_string(),
    }
}

fn invalid(message: String) -> LlmError {
    LlmError::InvalidResponse {
        message: format!("malformed response: {message}"),
    }
}
