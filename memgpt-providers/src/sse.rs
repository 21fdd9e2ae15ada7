//! An incremental parser for server-sent events (the `text/event-stream` format of the HTML
//! standard), fed bytes as they arrive, split anywhere.
//!
//! Lines end in `\n`, `\r\n` or `\r` (a `\r\n` split across two chunks is one line end).
//! Lines are decoded only once complete, so a UTF-8 character split across chunks is never
//! cut: no byte of a multi-byte character is `\n` or `\r`. `event:` and `data:` fields are
//! kept (several `data:` lines join with `\n`), comments (`:`) and other fields are skipped,
//! and a blank line dispatches the event. One event (its data so far plus the line being read)
//! may hold at most [`MAX_EVENT_BYTES`]: a server cannot make the parser buffer without bound.

/// A decoder of one provider's streamed response: fed the body in chunks of any size, it
/// reports pieces to the sink and finally builds the response.
pub(crate) trait StreamDecode {
    /// Decodes the next chunk; `true` once the response is complete.
    fn feed(
        &mut self,
        bytes: &[u8],
        sink: &memgpt_core::llm::StreamSink<'_>,
    ) -> Result<bool, memgpt_core::llm::LlmError>;

    /// Ends the stream: the response, or why there is none.
    fn finish(
        self,
        sink: &memgpt_core::llm::StreamSink<'_>,
    ) -> Result<memgpt_core::llm::ChatResponse, memgpt_core::llm::LlmError>;
}

/// Whether the server answered with server-sent events (rather than ignoring `"stream"`).
pub(crate) fn is_event_stream(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

/// Feeds `response`'s body to `decoder`, refusing more than `limit` bytes.
pub(crate) async fn decode<D: StreamDecode>(
    mut response: reqwest::Response,
    limit: usize,
    mut decoder: D,
    sink: &memgpt_core::llm::StreamSink<'_>,
) -> Result<memgpt_core::llm::ChatResponse, memgpt_core::llm::LlmError> {
    let mut read = 0usize;
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(crate::http::stream_read_error)?
    {
        read += chunk.len();
        if read > limit {
            return Err(memgpt_core::llm::LlmError::InvalidResponse {
                message: crate::http::HttpFailure::too_large_message(limit),
            });
        }
        if decoder.feed(&chunk, sink)? {
            break;
        }
    }
    decoder.finish(sink)
}

/// The largest event the parser buffers: 8 MiB, several times the largest function call an
/// agent accepts (`AgentConfig::max_function_argument_bytes`, 1 MiB, JSON-escaped in a delta).
pub(crate) const MAX_EVENT_BYTES: usize = 8 << 20;

/// An event grew past [`MAX_EVENT_BYTES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EventTooLarge;

/// One event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// The `event:` field (`message` when absent).
    pub(crate) event: String,
    /// The `data:` lines, joined with `\n`.
    pub(crate) data: String,
}

/// The parser's state between chunks.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    /// The incomplete line so far.
    line: Vec<u8>,
    /// Whether the last line ended in `\r` (so a leading `\n` of the next chunk is its end).
    after_cr: bool,
    /// Whether no line has been completed yet (to skip a byte-order mark).
    started: bool,
    event: String,
    data: String,
    has_data: bool,
}

impl SseParser {
    /// Parses `bytes`, appending the events they complete to `out`; fails once an event grows
    /// past [`MAX_EVENT_BYTES`] (the parser is then of no further use).
    pub(crate) fn feed(
        &mut self,
        mut bytes: &[u8],
        out: &mut Vec<SseEvent>,
    ) -> Result<(), EventTooLarge> {
        while !bytes.is_empty() {
            if std::mem::take(&mut self.after_cr)
                && let Some(rest) = bytes.strip_prefix(b"\n")
            {
                bytes = rest;
                continue;
            }
            match bytes.iter().position(|&b| b == b'\n' || b == b'\r') {
                Some(end) => {
                    self.line.extend_from_slice(&bytes[..end]);
                    self.after_cr = bytes[end] == b'\r';
                    bytes = &bytes[end + 1..];
                    let line = std::mem::take(&mut self.line);
                    self.line_done(&line, out);
                    // Reuse the allocation.
                    self.line = line;
                    self.line.clear();
                }
                None => {
                    self.line.extend_from_slice(bytes);
                    bytes = &[];
                }
            }
            if self.line.len() + self.data.len() > MAX_EVENT_BYTES {
                return Err(EventTooLarge);
            }
        }
        Ok(())
    }

    /// Ends the stream: a last event not followed by a blank line is dispatched too (the
    /// standard drops it, but a server or proxy that omits the final blank line should not
    /// lose the event).
    pub(crate) fn finish(&mut self, out: &mut Vec<SseEvent>) {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.line_done(&line, out);
        }
        self.dispatch(out);
    }

    fn line_done(&mut self, line: &[u8], out: &mut Vec<SseEvent>) {
        let mut line = line;
        if !self.started {
            self.started = true;
            line = line.strip_prefix("\u{feff}".as_bytes()).unwrap_or(line);
        }
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        let line = String::from_utf8_lossy(line);
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_ref(), ""),
        };
        match field {
            "event" => value.clone_into(&mut self.event),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            // `id` and `retry` are for reconnecting, which a one-shot response never does.
            _ => {}
        }
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        let event = std::mem::take(&mut self.event);
        if !std::mem::take(&mut self.has_data) {
            return;
        }
        out.push(SseEvent {
            event: if event.is_empty() {
                "message".to_owned()
            } else {
                event
            },
            data: std::mem::take(&mut self.data),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_in_chunks(input: &[u8], size: usize) -> Vec<SseEvent> {
        let mut parser = SseParser::default();
        let mut out = Vec::new();
        for chunk in input.chunks(size) {
            parser.feed(chunk, &mut out).unwrap();
        }
        parser.finish(&mut out);
        out
    }

    fn event(event: &str, data: &str) -> SseEvent {
        SseEvent {
            event: event.into(),
            data: data.into(),
        }
    }

    #[test]
    fn events_survive_any_split() {
        let input = "\u{feff}: a comment\nevent: one\ndata: {\"t\":\"héllo ✓\"}\n\n\
                     event:two\r\ndata:a\r\ndata: b\r\nid: 7\r\n\r\n\
                     data: unnamed\r\rdata\n\nevent: empty\n\n\
                     event: last\ndata: no blank line";
        let expected = vec![
            event("one", "{\"t\":\"héllo ✓\"}"),
            event("two", "a\nb"),
            event("message", "unnamed"),
            event("message", ""),
            event("last", "no blank line"),
        ];
        for size in 1..=input.len() {
            assert_eq!(
                parse_in_chunks(input.as_bytes(), size),
                expected,
                "chunks of {size}"
            );
        }
    }

    #[test]
    fn an_event_without_data_is_not_dispatched() {
        assert_eq!(parse_in_chunks(b"event: ping\n\n", 3), vec![]);
    }

    #[test]
    fn an_endless_line_or_event_is_refused_at_the_limit() {
        let mut parser = SseParser::default();
        let mut out = Vec::new();
        let chunk = vec![b'x'; 1 << 20];
        parser.feed(b"data: ", &mut out).unwrap();
        let mut fed = 0;
        let refused = loop {
            if let Err(e) = parser.feed(&chunk, &mut out) {
                break e;
            }
            fed += chunk.len();
            assert!(fed <= MAX_EVENT_BYTES, "never refused");
        };
        assert_eq!(refused, EventTooLarge);
        // Many short data lines of one event count together.
        let mut parser = SseParser::default();
        let line = format!("data: {}\n", "y".repeat(1 << 16));
        let refused = (0..=MAX_EVENT_BYTES / (1 << 16) + 1)
            .any(|_| parser.feed(line.as_bytes(), &mut out).is_err());
        assert!(refused);
        assert!(out.is_empty());
    }
}
