//! Decodes a streamed chat completion (`"stream": true`): server-sent events whose `data:` is a
//! `chat.completion.chunk` (content, reasoning and tool-call deltas; the finish reason; usage in
//! a last chunk without choices when `stream_options.include_usage` is honoured), ended by
//! `data: [DONE]`.
//!
//! A tool call's pieces arrive by `index`: the id and name first (a name may itself come in
//! pieces), then its arguments text in pieces split anywhere. The call is announced
//! ([`StreamDelta::ToolCallStart`]) when its arguments begin, when the name is certainly
//! complete, and each arguments piece is passed on as it arrives.

use memgpt_core::llm::{ChatResponse, LlmError, StreamDelta, StreamSink, Usage};
use memgpt_core::message::ToolCall;
use serde::Deserialize;
use serde_json::Value;

use super::wire::{WireUsage, finish_reason};
use crate::sse::{MAX_EVENT_BYTES, SseEvent, SseParser};

/// A stream being decoded, fed its body in chunks of any size.
#[derive(Debug, Default)]
pub(super) struct StreamDecoder {
    sse: SseParser,
    events: Vec<SseEvent>,
    model: String,
    content: String,
    reasoning: String,
    calls: Vec<PartialCall>,
    finish: Option<String>,
    usage: Option<Usage>,
    chunks: usize,
    done: bool,
}

/// A tool call being assembled.
#[derive(Debug, Default)]
struct PartialCall {
    /// The `index` the server gave it.
    index: usize,
    id: String,
    name: String,
    arguments: String,
    announced: bool,
}

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    choices: Vec<ChunkChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct ChunkChoice {
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    tool_calls: Vec<ToolCallDelta>,
    /// The legacy single-function form.
    #[serde(default)]
    function_call: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct ToolCallDelta {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    /// A piece of the JSON text normally; some servers send the whole object at once.
    #[serde(default)]
    arguments: Option<Value>,
}

impl crate::sse::StreamDecode for StreamDecoder {
    /// Decodes the next chunk of the body, reporting what it completes to `sink`. Returns
    /// whether the stream is complete (`[DONE]` arrived); what follows is ignored.
    fn feed(&mut self, bytes: &[u8], sink: &StreamSink<'_>) -> Result<bool, LlmError> {
        if self.done {
            return Ok(true);
        }
        self.sse
            .feed(bytes, &mut self.events)
            .map_err(|_| LlmError::InvalidResponse {
                message: format!(
                    "an event in the response stream is larger than {MAX_EVENT_BYTES} bytes"
                ),
            })?;
        self.drain(sink)
    }

    /// Ends the stream: the response, or why there is none.
    fn finish(mut self, sink: &StreamSink<'_>) -> Result<ChatResponse, LlmError> {
        if !self.done {
            // A last event without its blank line: `[DONE]` from a terse server, or the
            // connection cut in the middle of an event (which cannot be decoded).
            self.sse.finish(&mut self.events);
            if let Err(e) = self.drain(sink) {
                return Err(match e {
                    LlmError::InvalidResponse { .. } => LlmError::Transient {
                        status: None,
                        message: "the response stream was cut in the middle of an event".to_owned(),
                        retry_after: None,
                    },
                    other => other,
                });
            }
        }
        if !self.done && self.finish.is_none() {
            // The connection dropped mid-answer: retrying the request may well succeed.
            return Err(LlmError::Transient {
                status: None,
                message: if self.chunks == 0 {
                    "the response stream ended before its first chunk".to_owned()
                } else {
                    "the response stream ended before the completion finished".to_owned()
                },
                retry_after: None,
            });
        }
        // Calls whose arguments never came (a function without parameters).
        for call in &mut self.calls {
            announce(call, sink);
        }
        let content = if self.content.trim().is_empty() && !self.reasoning.is_empty() {
            std::mem::take(&mut self.reasoning)
        } else {
            self.content
        };
        let tool_calls = self
            .calls
            .into_iter()
            .enumerate()
            .map(|(i, call)| ToolCall {
                id: if call.id.is_empty() {
                    format!("call_{i}")
                } else {
                    call.id
                },
                name: call.name,
                arguments: call.arguments,
            })
            .collect();
        Ok(ChatResponse {
            content,
            tool_calls,
            usage: self.usage.unwrap_or_default(),
            finish_reason: finish_reason(self.finish.as_deref()),
            model: self.model,
        })
    }
}

impl StreamDecoder {
    fn drain(&mut self, sink: &StreamSink<'_>) -> Result<bool, LlmError> {
        let events = std::mem::take(&mut self.events);
        for event in &events {
            self.event(event, sink)?;
            if self.done {
                break;
            }
        }
        self.events = events;
        self.events.clear();
        Ok(self.done)
    }

    fn event(&mut self, event: &SseEvent, sink: &StreamSink<'_>) -> Result<(), LlmError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        if data.is_empty() {
            return Ok(());
        }
        let chunk: Chunk = serde_json::from_str(data).map_err(|e| LlmError::InvalidResponse {
            message: format!(
                "undecodable chunk: {e}: {}",
                crate::http::truncate_body(data)
            ),
        })?;
        if let Some(error) = chunk.error {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| error.to_string(), str::to_owned);
            return Err(LlmError::Transient {
                status: None,
                message: format!("the server reported an error mid-stream: {message}"),
                retry_after: None,
            });
        }
        self.chunks += 1;
        if let Some(model) = chunk.model.filter(|m| !m.is_empty()) {
            self.model = model;
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage.to_usage());
        }
        // One choice is asked for; others (n > 1) are ignored.
        let Some(choice) = chunk.choices.into_iter().next() else {
            return Ok(());
        };
        if let Some(reason) = choice.finish_reason.filter(|r| !r.is_empty()) {
            self.finish = Some(reason);
        }
        let delta = choice.delta.unwrap_or_default();
        if let Some(text) = delta.reasoning_content.filter(|t| !t.is_empty()) {
            self.reasoning.push_str(&text);
            sink(StreamDelta::Text(&text));
        }
        if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
            self.content.push_str(&text);
            sink(StreamDelta::Text(&text));
        }
        let legacy = delta.function_call.map(|function| ToolCallDelta {
            index: Some(0),
            id: None,
            function: Some(function),
        });
        for (position, piece) in delta.tool_calls.into_iter().chain(legacy).enumerate() {
            self.tool_call(piece, position, sink);
        }
        Ok(())
    }

    fn tool_call(&mut self, piece: ToolCallDelta, position: usize, sink: &StreamSink<'_>) {
        let index = piece.index.unwrap_or(position);
        let slot = match self.calls.iter().position(|c| c.index == index) {
            Some(slot) => slot,
            None => {
                // A new call: the ones before it are complete, names included.
                for call in &mut self.calls {
                    announce(call, sink);
                }
                self.calls.push(PartialCall {
                    index,
                    ..PartialCall::default()
                });
                self.calls.len() - 1
            }
        };
        let call = &mut self.calls[slot];
        if let Some(id) = piece.id.filter(|id| !id.is_empty()) {
            call.id = id;
        }
        let Some(function) = piece.function else {
            return;
        };
        if let Some(name) = function.name.filter(|n| !n.is_empty()) {
            if call.announced {
                tracing::debug!(
                    index,
                    "a name piece after the call's arguments began: ignored"
                );
            } else {
                call.name.push_str(&name);
            }
        }
        let arguments = match function.arguments {
            Some(Value::String(text)) => text,
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        };
        if !arguments.is_empty() {
            announce(call, sink);
            call.arguments.push_str(&arguments);
            sink(StreamDelta::ToolArguments {
                index: call.index,
                json: &arguments,
            });
        }
    }
}

/// Reports a call's start (once), with whatever arguments arrived before it.
fn announce(call: &mut PartialCall, sink: &StreamSink<'_>) {
    if call.announced {
        return;
    }
    call.announced = true;
    sink(StreamDelta::ToolCallStart {
        index: call.index,
        id: &call.id,
        name: &call.name,
    });
    if !call.arguments.is_empty() {
        sink(StreamDelta::ToolArguments {
            index: call.index,
            json: &call.arguments,
        });
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use memgpt_core::llm::FinishReason;
    use serde_json::json;

    use super::*;
    use crate::sse::StreamDecode;

    #[derive(Clone, Debug, PartialEq)]
    enum Seen {
        Text(String),
        Start(usize, String, String),
        Args(usize, String),
    }

    fn sse(chunks: &[Value]) -> String {
        let mut body: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
        body.push_str("data: [DONE]\n\n");
        body
    }

    /// Thinking, then two calls (the second without arguments), then usage.
    fn transcript() -> String {
        let chunk = |delta: Value, finish: Value| {
            json!({"id": "c1", "object": "chat.completion.chunk", "model": "gpt-4o-mini",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        };
        sse(&[
            chunk(json!({"role": "assistant", "content": ""}), Value::Null),
            chunk(json!({"content": "Saving "}), Value::Null),
            chunk(json!({"content": "that — ✓."}), Value::Null),
            chunk(
                json!({"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "core_memory_", "arguments": ""}}]}),
                Value::Null,
            ),
            chunk(
                json!({"tool_calls": [{"index": 0, "function": {"name": "append"}}]}),
                Value::Null,
            ),
            chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"label\": \"hu"}}]}),
                Value::Null,
            ),
            chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": "man\", \"content\": \"likes tea ☕\", \"request_heartbeat\": true}"}}]}),
                Value::Null,
            ),
            chunk(
                json!({"tool_calls": [{"index": 1, "id": "call_b", "function": {"name": "pause", "arguments": ""}}]}),
                Value::Null,
            ),
            chunk(json!({}), json!("tool_calls")),
            json!({"id": "c1", "object": "chat.completion.chunk", "model": "gpt-4o-mini", "choices": [],
                "usage": {"prompt_tokens": 120, "completion_tokens": 57, "total_tokens": 177,
                    "prompt_tokens_details": {"cached_tokens": 64}}}),
        ])
    }

    fn decode(body: &[u8], cuts: &[usize]) -> (Result<ChatResponse, LlmError>, Vec<Seen>) {
        let seen = Mutex::new(Vec::new());
        let sink = |d: StreamDelta<'_>| {
            let s = match d {
                StreamDelta::Text(t) => Seen::Text(t.to_owned()),
                StreamDelta::ToolCallStart { index, id, name } => {
                    Seen::Start(index, id.to_owned(), name.to_owned())
                }
                StreamDelta::ToolArguments { index, json } => Seen::Args(index, json.to_owned()),
                _ => return,
            };
            seen.lock().unwrap().push(s);
        };
        let mut decoder = StreamDecoder::default();
        let mut start = 0;
        for &cut in cuts.iter().chain(std::iter::once(&body.len())) {
            if let Err(e) = decoder.feed(&body[start..cut], &sink) {
                return (Err(e), seen.into_inner().unwrap());
            }
            start = cut;
        }
        let result = decoder.finish(&sink);
        (result, seen.into_inner().unwrap())
    }

    /// Concatenated per kind, so any split gives the same summary.
    fn summary(seen: &[Seen]) -> (String, Vec<(usize, String, String)>, Vec<String>) {
        let text = seen
            .iter()
            .filter_map(|s| match s {
                Seen::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        let starts = seen
            .iter()
            .filter_map(|s| match s {
                Seen::Start(i, id, name) => Some((*i, id.clone(), name.clone())),
                _ => None,
            })
            .collect();
        let mut args = vec![String::new(); 2];
        for s in seen {
            if let Seen::Args(i, json) = s {
                args[*i].push_str(json);
            }
        }
        (text, starts, args)
    }

    #[test]
    fn a_stream_split_at_every_byte_decodes_the_same() {
        let body = transcript();
        let bytes = body.as_bytes();
        let (whole, seen) = decode(bytes, &[]);
        let whole = whole.unwrap();
        assert_eq!(whole.content, "Saving that — ✓.");
        assert_eq!(whole.model, "gpt-4o-mini");
        assert_eq!(
            whole.usage,
            Usage {
                prompt_tokens: 120,
                completion_tokens: 57,
                cached_prompt_tokens: 64,
            }
        );
        assert_eq!(whole.finish_reason, FinishReason::ToolCalls);
        assert_eq!(
            whole.tool_calls,
            vec![
                ToolCall {
                    id: "call_a".into(),
                    name: "core_memory_append".into(),
                    arguments: r#"{"label": "human", "content": "likes tea ☕", "request_heartbeat": true}"#.into(),
                },
                ToolCall {
                    id: "call_b".into(),
                    name: "pause".into(),
                    arguments: String::new(),
                },
            ]
        );
        let expected = summary(&seen);
        assert_eq!(
            expected.1,
            vec![
                (0, "call_a".to_owned(), "core_memory_append".to_owned()),
                (1, "call_b".to_owned(), "pause".to_owned())
            ],
            "each call announced once, with its whole name"
        );
        assert_eq!(expected.2[0], whole.tool_calls[0].arguments);
        for cut in 1..bytes.len() {
            let (result, seen) = decode(bytes, &[cut]);
            assert_eq!(result.unwrap(), whole, "split at byte {cut}");
            assert_eq!(summary(&seen), expected, "split at byte {cut}");
        }
        let every: Vec<usize> = (1..bytes.len()).collect();
        let (result, seen) = decode(bytes, &every);
        assert_eq!(result.unwrap(), whole);
        assert_eq!(summary(&seen), expected);
    }

    #[test]
    fn a_cut_stream_or_a_mid_stream_error_is_an_error() {
        let body = transcript();
        let cut = body.find("pause").unwrap();
        let (result, _) = decode(&body.as_bytes()[..cut], &[]);
        assert!(
            matches!(result, Err(LlmError::Transient { .. })),
            "{result:?}"
        );
        let (result, _) = decode(b"", &[]);
        assert!(
            matches!(result, Err(LlmError::Transient { ref message, .. }) if message.contains("first chunk"))
        );
        let failed = "data: {\"error\": {\"message\": \"overloaded\"}}\n\n";
        let (result, _) = decode(failed.as_bytes(), &[]);
        assert!(
            matches!(result, Err(LlmError::Transient { ref message, .. }) if message.contains("overloaded"))
        );
        let garbage = "data: {not json\n\n";
        assert!(matches!(
            decode(garbage.as_bytes(), &[]).0,
            Err(LlmError::InvalidResponse { .. })
        ));
    }
}
