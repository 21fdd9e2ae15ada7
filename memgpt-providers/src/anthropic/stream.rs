//! Decodes a streamed Messages response: server-sent events (`message_start`,
//! `content_block_start`/`_delta`/`_stop`, `message_delta`, `message_stop`, `ping`, `error`)
//! into pieces reported to a [`StreamSink`] and the final [`ChatResponse`].

use memgpt_core::llm::{ChatResponse, LlmError, StreamSink};

use super::response::ResponseBuilder;
use super::wire::{BlockDelta, ResponseBlock, StreamEvent};
use crate::sse::{SseEvent, SseParser};

/// A stream being decoded, fed its body in chunks of any size.
#[derive(Debug, Default)]
pub(super) struct StreamDecoder {
    sse: SseParser,
    events: Vec<SseEvent>,
    builder: ResponseBuilder,
    started: bool,
    stopped: bool,
}

impl crate::sse::StreamDecode for StreamDecoder {
    /// Decodes the next chunk of the body, reporting what it completes to `sink`. Returns
    /// whether the message is complete (`message_stop` arrived); what follows is ignored.
    fn feed(&mut self, bytes: &[u8], sink: &StreamSink<'_>) -> Result<bool, LlmError> {
        if self.stopped {
            return Ok(true);
        }
        self.sse
            .feed(bytes, &mut self.events)
            .map_err(|_| LlmError::InvalidResponse {
                message: format!(
                    "an event in the response stream is larger than {} bytes",
                    crate::sse::MAX_EVENT_BYTES
                ),
            })?;
        self.drain(sink)
    }

    /// Ends the stream: the response, or why there is none.
    fn finish(mut self, sink: &StreamSink<'_>) -> Result<ChatResponse, LlmError> {
        if !self.stopped {
            self.sse.finish(&mut self.events);
            self.drain(sink)?;
        }
        if !self.stopped {
            // The connection dropped mid-answer: retrying the request may well succeed.
            return Err(LlmError::Transient {
                status: None,
                message: if self.started {
                    "the response stream ended before `message_stop`".to_owned()
                } else {
                    "the response stream ended before `message_start`".to_owned()
                },
                retry_after: None,
            });
        }
        Ok(self.builder.finish())
    }
}

impl StreamDecoder {
    fn drain(&mut self, sink: &StreamSink<'_>) -> Result<bool, LlmError> {
        let events = std::mem::take(&mut self.events);
        for event in &events {
            self.event(event, sink)?;
            if self.stopped {
                break;
            }
        }
        // Keep the allocation.
        self.events = events;
        self.events.clear();
        Ok(self.stopped)
    }

    fn event(&mut self, event: &SseEvent, sink: &StreamSink<'_>) -> Result<(), LlmError> {
        let parsed: StreamEvent =
            serde_json::from_str(&event.data).map_err(|e| LlmError::InvalidResponse {
                message: format!(
                    "undecodable `{}` event: {e}: {}",
                    event.event,
                    crate::http::truncate_body(&event.data)
                ),
            })?;
        if !self.started
            && !matches!(
                parsed,
                StreamEvent::MessageStart { .. }
                    | StreamEvent::Ping
                    | StreamEvent::Error { .. }
                    | StreamEvent::Unknown
            )
        {
            return Err(LlmError::InvalidResponse {
                message: format!("`{}` event before `message_start`", event.event),
            });
        }
        match parsed {
            StreamEvent::MessageStart { message } => {
                self.started = true;
                self.builder.set_model(message.model);
                self.builder.update_usage(message.usage);
                self.builder.set_stop_reason(message.stop_reason);
            }
            StreamEvent::ContentBlockStart {
                index,
                content_block,
            } => {
                let initial = match &content_block {
                    ResponseBlock::Text { text } if !text.is_empty() => Some(text.clone()),
                    _ => None,
                };
                self.builder.start_block(index, content_block, sink)?;
                if let Some(text) = initial {
                    self.builder.text(index, &text, sink)?;
                }
            }
            StreamEvent::ContentBlockDelta { index, delta } => match delta {
                BlockDelta::TextDelta { text } => self.builder.text(index, &text, sink)?,
                BlockDelta::InputJsonDelta { partial_json } => {
                    self.builder.tool_json(index, &partial_json, sink)?;
                }
                BlockDelta::Other => {}
            },
            StreamEvent::ContentBlockStop { index } => self.builder.stop_block(index, sink)?,
            StreamEvent::MessageDelta { delta, usage } => {
                self.builder.set_stop_reason(delta.stop_reason);
                self.builder.update_usage(usage);
            }
            StreamEvent::MessageStop => self.stopped = true,
            StreamEvent::Ping | StreamEvent::Unknown => {}
            StreamEvent::Error { error } => return Err(super::stream_error(&error)),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use memgpt_core::llm::{FinishReason, StreamDelta, Usage};
    use memgpt_core::message::ToolCall;
    use serde_json::json;

    use super::*;
    use crate::anthropic::response::no_sink;
    use crate::sse::StreamDecode;

    /// A recorded delta, owned.
    #[derive(Clone, Debug, PartialEq)]
    enum Seen {
        Text(String),
        Start(usize, String, String),
        Args(usize, String),
    }

    fn sse(events: &[serde_json::Value]) -> String {
        events
            .iter()
            .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
            .collect()
    }

    /// A realistic stream: thinking aloud, then two calls, the second without arguments.
    fn transcript() -> String {
        sse(&[
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
                "model": "claude-sonnet-4-5", "content": [], "stop_reason": null,
                "usage": {"input_tokens": 120, "cache_read_input_tokens": 30, "output_tokens": 1}}}),
            json!({"type": "ping"}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Saving "}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "that — ✓."}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_a", "name": "core_memory_append", "input": {}}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": ""}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"label\": \"hu"}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "man\", \"content\": \"likes tea\", \"request_heartbeat\": true}"}}),
            json!({"type": "content_block_stop", "index": 1}),
            json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_b", "name": "pause", "input": {}}}),
            json!({"type": "content_block_stop", "index": 2}),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 57}}),
            json!({"type": "message_stop"}),
        ])
    }

    fn decode(body: &[u8], chunk: usize) -> (Result<ChatResponse, LlmError>, Vec<Seen>) {
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
        let mut result = None;
        for piece in body.chunks(chunk) {
            match decoder.feed(piece, &sink) {
                Ok(true) => break,
                Ok(false) => {}
                Err(e) => {
                    result = Some(Err(e));
                    break;
                }
            }
        }
        let result = result.unwrap_or_else(|| decoder.finish(&sink));
        (result, seen.into_inner().unwrap())
    }

    fn expected() -> ChatResponse {
        ChatResponse {
            content: "Saving that — ✓.".into(),
            tool_calls: vec![
                ToolCall {
                    id: "toolu_a".into(),
                    name: "core_memory_append".into(),
                    arguments:
                        "{\"label\":\"human\",\"content\":\"likes tea\",\"request_heartbeat\":true}"
                            .into(),
                },
                ToolCall {
                    id: "toolu_b".into(),
                    name: "pause".into(),
                    arguments: "{}".into(),
                },
            ],
            usage: Usage {
                prompt_tokens: 150,
                completion_tokens: 57,
                cached_prompt_tokens: 30,
            },
            finish_reason: FinishReason::ToolCalls,
            model: "claude-sonnet-4-5".into(),
        }
    }

    #[test]
    fn a_stream_decodes_the_same_at_any_chunk_size() {
        let body = transcript();
        for chunk in [1, 2, 3, 7, 64, body.len()] {
            let (response, seen) = decode(body.as_bytes(), chunk);
            assert_eq!(response.unwrap(), expected(), "chunks of {chunk}");
            assert_eq!(
                seen,
                vec![
                    Seen::Text("Saving ".into()),
                    Seen::Text("that — ✓.".into()),
                    Seen::Start(0, "toolu_a".into(), "core_memory_append".into()),
                    Seen::Args(0, "{\"label\": \"hu".into()),
                    Seen::Args(
                        0,
                        "man\", \"content\": \"likes tea\", \"request_heartbeat\": true}".into()
                    ),
                    Seen::Start(1, "toolu_b".into(), "pause".into()),
                    Seen::Args(1, "{}".into()),
                ],
                "chunks of {chunk}"
            );
        }
    }

    #[test]
    fn a_stream_equals_the_whole_response() {
        let whole = json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [
                {"type": "text", "text": "Saving that — ✓."},
                {"type": "tool_use", "id": "toolu_a", "name": "core_memory_append",
                 "input": {"label": "human", "content": "likes tea", "request_heartbeat": true}},
                {"type": "tool_use", "id": "toolu_b", "name": "pause", "input": {}}
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 120, "cache_read_input_tokens": 30, "output_tokens": 57}
        });
        let whole = ResponseBuilder::whole(serde_json::from_value(whole).unwrap()).unwrap();
        assert_eq!(whole, expected());
        assert_eq!(decode(transcript().as_bytes(), 5).0.unwrap(), whole);
    }

    #[test]
    fn text_split_by_a_call_is_separated_and_thinking_is_skipped() {
        let body = sse(&[
            json!({"type": "message_start", "message": {"model": "m", "usage": {"input_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hmm"}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": "A"}}),
            json!({"type": "content_block_stop", "index": 1}),
            json!({"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "B"}}),
            json!({"type": "content_block_stop", "index": 2}),
            json!({"type": "content_block_start", "index": 3, "content_block": {"type": "tool_use", "id": "t", "name": "f", "input": {}}}),
            json!({"type": "content_block_delta", "index": 3, "delta": {"type": "input_json_delta", "partial_json": "{\"x\": 1"}}),
            json!({"type": "content_block_stop", "index": 3}),
            json!({"type": "content_block_start", "index": 4, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 4, "delta": {"type": "text_delta", "text": "C"}}),
            json!({"type": "content_block_stop", "index": 4}),
            json!({"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": {"output_tokens": 9}}),
            json!({"type": "message_stop"}),
        ]);
        let (response, seen) = decode(body.as_bytes(), 4);
        let response = response.unwrap();
        assert_eq!(response.content, "AB\n\nC");
        assert_eq!(
            response.tool_calls[0].arguments, "{\"x\": 1",
            "unparsable arguments are kept as written"
        );
        assert_eq!(response.finish_reason, FinishReason::Length);
        let text: String = seen
            .iter()
            .filter_map(|s| match s {
                Seen::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(text, response.content, "the sink saw the same text");
    }

    #[test]
    fn an_error_event_mid_stream_is_typed() {
        let body = sse(&[
            json!({"type": "message_start", "message": {"model": "m", "usage": {"input_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hel"}}),
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ]);
        for chunk in [1, 7, body.len()] {
            let (result, seen) = decode(body.as_bytes(), chunk);
            match result {
                Err(LlmError::Transient {
                    status, message, ..
                }) => {
                    assert_eq!(status, None, "the HTTP status was 200");
                    assert!(message.contains("Overloaded"), "{message}");
                    assert!(message.contains("overloaded_error"), "{message}");
                }
                other => panic!("unexpected: {other:?}"),
            }
            assert_eq!(seen, vec![Seen::Text("Hel".into())]);
        }
        let invalid = sse(&[
            json!({"type": "message_start", "message": {"model": "m"}}),
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 300000 tokens > 200000 maximum"}}),
        ]);
        assert!(
            decode(invalid.as_bytes(), 3)
                .0
                .unwrap_err()
                .is_context_overflow()
        );
    }

    #[test]
    fn truncated_and_malformed_streams_fail() {
        let body = transcript();
        let cut = body.find("message_delta").unwrap();
        let err = decode(&body.as_bytes()[..cut], 7).0.unwrap_err();
        assert!(err.is_transient(), "{err}");
        assert!(decode(b"", 1).0.unwrap_err().is_transient());
        let garbage = "event: message_start\ndata: {not json\n\n";
        assert!(matches!(
            decode(garbage.as_bytes(), 3).0,
            Err(LlmError::InvalidResponse { .. })
        ));
        let unopened = sse(&[
            json!({"type": "message_start", "message": {"model": "m"}}),
            json!({"type": "content_block_delta", "index": 4, "delta": {"type": "text_delta", "text": "x"}}),
        ]);
        assert!(matches!(
            decode(unopened.as_bytes(), 3).0,
            Err(LlmError::InvalidResponse { .. })
        ));
        let early = sse(&[json!({"type": "message_stop"})]);
        assert!(matches!(
            decode(early.as_bytes(), 3).0,
            Err(LlmError::InvalidResponse { .. })
        ));
        // Events after `message_stop` are ignored, however broken.
        let after = format!("{body}event: bogus\ndata: {{\n\n");
        let mut decoder = StreamDecoder::default();
        assert!(decoder.feed(after.as_bytes(), &no_sink).unwrap());
        assert_eq!(decoder.finish(&no_sink).unwrap(), expected());
    }
}
