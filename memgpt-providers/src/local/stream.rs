//! Streaming a function call while the grammar-constrained model is still writing it.
//!
//! The grammar fixes the reply's shape, `{"thinking": "...", "function": "NAME", "arguments":
//! {...}}` in that order, so a small scanner over the text so far can report the inner
//! monologue as [`StreamDelta::Text`] as it is written, the call's start as soon as the name is
//! complete, and the arguments as [`StreamDelta::ToolArguments`] pieces.

use memgpt_core::llm::{StreamDelta, StreamSink};

/// What the text so far contains.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Scan<'a> {
    /// The monologue decoded so far (complete escapes only).
    pub(crate) thinking: String,
    /// The function name, once its string is closed.
    pub(crate) name: Option<&'a str>,
    /// The raw arguments text so far, and whether it is complete.
    pub(crate) arguments: Option<(&'a str, bool)>,
}

/// Scans a (possibly partial) reply of the function-call grammar's shape.
pub(crate) fn scan(text: &str) -> Scan<'_> {
    let mut out = Scan::default();
    let bytes = text.as_bytes();
    let mut i = skip_ws(bytes, 0);
    if bytes.get(i) != Some(&b'{') {
        return out;
    }
    i += 1;
    loop {
        i = skip_ws(bytes, i);
        let Some((start, after)) = string_end(bytes, i) else {
            return out;
        };
        let key = &text[start + 1..after - 1];
        i = skip_ws(bytes, after);
        if bytes.get(i) != Some(&b':') {
            return out;
        }
        i = skip_ws(bytes, i + 1);
        match key {
            "thinking" => match string_end(bytes, i) {
                Some((_, end)) => {
                    out.thinking = unescape(&text[i + 1..end - 1]);
                    i = end;
                }
                None => {
                    if bytes.get(i) == Some(&b'"') {
                        out.thinking = unescape(safe_prefix(&text[i + 1..]));
                    }
                    return out;
                }
            },
            "function" => match string_end(bytes, i) {
                Some((_, end)) => {
                    out.name = Some(&text[i + 1..end - 1]);
                    i = end;
                }
                None => return out,
            },
            "arguments" => {
                out.arguments = Some(match value_end(bytes, i) {
                    Some(end) => (&text[i..end], true),
                    None => (&text[i..], false),
                });
                return out;
            }
            _ => return out,
        }
        i = skip_ws(bytes, i);
        if bytes.get(i) != Some(&b',') {
            return out;
        }
        i += 1;
    }
}

fn skip_ws(bytes: &[u8], mut i: usize) -> usize {
    while bytes.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    i
}

/// If a complete JSON string starts at `i`: `(i, index after its closing quote)`.
fn string_end(bytes: &[u8], i: usize) -> Option<(usize, usize)> {
    if bytes.get(i) != Some(&b'"') {
        return None;
    }
    let mut j = i + 1;
    while j < bytes.len() {
        match bytes[j] {
            b'\\' => j += 2,
            b'"' => return Some((i, j + 1)),
            _ => j += 1,
        }
    }
    None
}

/// The end of a complete JSON object or array starting at `i`.
fn value_end(bytes: &[u8], i: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut j = i;
    while j < bytes.len() {
        match bytes[j] {
            b'"' => j = string_end(bytes, j)?.1 - 1,
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(j + 1);
                }
            }
            _ => {}
        }
        j += 1;
    }
    None
}

/// The part of an unterminated string body that ends on a complete escape.
fn safe_prefix(body: &str) -> &str {
    // An escape is at most 6 bytes (`\uXXXX`); a backslash is ASCII, so always a boundary.
    let tail_start = body.len().saturating_sub(6);
    match body.as_bytes()[tail_start..]
        .iter()
        .position(|b| *b == b'\\')
    {
        Some(at) => &body[..tail_start + at],
        None => body,
    }
}

fn unescape(body: &str) -> String {
    serde_json::from_str::<String>(&format!("\"{body}\"")).unwrap_or_default()
}

/// Reports a growing reply to a sink, each piece once.
#[derive(Debug, Default)]
pub(crate) struct CallStreamer {
    text: String,
    thinking_sent: usize,
    started: bool,
    arguments_sent: usize,
    id: String,
}

impl CallStreamer {
    /// A streamer for the call that will get `id`.
    pub(crate) fn new(id: String) -> Self {
        Self {
            id,
            ..Self::default()
        }
    }

    /// Adds generated text and reports what became known.
    pub(crate) fn push(&mut self, piece: &str, sink: &StreamSink<'_>) {
        self.text.push_str(piece);
        let scan = scan(&self.text);
        if scan.thinking.len() > self.thinking_sent
            && scan.thinking.is_char_boundary(self.thinking_sent)
        {
            sink(StreamDelta::Text(&scan.thinking[self.thinking_sent..]));
            self.thinking_sent = scan.thinking.len();
        }
        if let Some(name) = scan.name
            && !self.started
        {
            sink(StreamDelta::ToolCallStart {
                index: 0,
                id: &self.id,
                name,
            });
            self.started = true;
        }
        if let Some((arguments, _)) = scan.arguments
            && arguments.len() > self.arguments_sent
        {
            sink(StreamDelta::ToolArguments {
                index: 0,
                json: &arguments[self.arguments_sent..],
            });
            self.arguments_sent = arguments.len();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    const REPLY: &str = "{\"thinking\": \"Say \\\"hi\\\" \\u00e9t\\u00e9\\n\", \"function\": \"send_message\", \"arguments\": {\"message\": \"a } b\", \"n\": [1, {\"x\": 2}]}}";

    #[test]
    fn a_complete_reply_scans_into_its_parts() {
        let s = scan(REPLY);
        assert_eq!(s.thinking, "Say \"hi\" été\n");
        assert_eq!(s.name, Some("send_message"));
        assert_eq!(
            s.arguments,
            Some((r#"{"message": "a } b", "n": [1, {"x": 2}]}"#, true))
        );
    }

    #[test]
    fn streaming_in_any_pieces_reports_everything_once_in_order() {
        for size in [1, 2, 3, 5, 17, REPLY.len()] {
            let seen = Mutex::new((String::new(), Vec::new(), String::new()));
            let sink = |d: StreamDelta<'_>| {
                let mut seen = seen.lock().unwrap();
                match d {
                    StreamDelta::Text(t) => {
                        assert!(seen.1.is_empty(), "monologue before the call");
                        seen.0.push_str(t)
                    }
                    StreamDelta::ToolCallStart { id, name, .. } => {
                        seen.1.push(format!("{id}:{name}"))
                    }
                    StreamDelta::ToolArguments { json, .. } => {
                        assert_eq!(seen.1.len(), 1, "arguments after the start");
                        seen.2.push_str(json)
                    }
                    _ => {}
                }
            };
            let mut streamer = CallStreamer::new("call_1".into());
            let chars: Vec<char> = REPLY.chars().collect();
            for chunk in chars.chunks(size) {
                streamer.push(&chunk.iter().collect::<String>(), &sink);
            }
            let (thinking, starts, arguments) = seen.into_inner().unwrap();
            assert_eq!(thinking, "Say \"hi\" été\n", "pieces of {size}");
            assert_eq!(starts, ["call_1:send_message"]);
            assert_eq!(arguments, r#"{"message": "a } b", "n": [1, {"x": 2}]}"#);
        }
    }

    #[test]
    fn partial_text_reports_only_what_is_certain() {
        assert_eq!(scan("{\"thinking\": \"ab\\").thinking, "ab");
        assert_eq!(scan("{\"thinking\": \"ab\\u00").thinking, "ab");
        assert_eq!(
            scan("{\"thinking\": \"ab\", \"function\": \"send_mess").name,
            None
        );
        assert_eq!(scan("garbage"), Scan::default());
    }
}
