//! The text of `send_message` as the model generates it.
//!
//! A streaming provider delivers a function call's JSON arguments in pieces split anywhere:
//! inside a key, an escape sequence or a multi-byte character. [`ReplyStream`] follows those
//! pieces with a small JSON scanner and hands out the decoded text of the top-level
//! `"message"` string as soon as each character of it is certain, so a display can show the
//! reply while it is being written. Concatenated, the pieces are exactly the decoded value.

use std::collections::HashMap;

use crate::llm::StreamDelta;

/// The function whose `message` argument is the agent's reply.
const REPLY_FUNCTION: &str = "send_message";
/// The argument holding the reply.
const REPLY_ARGUMENT: &str = "message";

/// Turns a response's stream deltas into progress: inner-monologue text and the decoded text
/// of each `send_message` call's `message`.
#[derive(Debug, Default)]
pub(crate) struct ReplyStream {
    /// Scanners of the `send_message` calls, by their position in the response.
    calls: HashMap<usize, MessageScanner>,
}

/// What one delta contributed.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Pieces<'a> {
    /// Inner-monologue text.
    pub(crate) thinking: Option<&'a str>,
    /// Decoded reply text.
    pub(crate) reply: String,
}

impl ReplyStream {
    /// Follows one delta.
    pub(crate) fn feed<'a>(&mut self, delta: StreamDelta<'a>) -> Pieces<'a> {
        let mut pieces = Pieces::default();
        match delta {
            StreamDelta::Text(text) => pieces.thinking = Some(text).filter(|t| !t.is_empty()),
            StreamDelta::ToolCallStart { index, name, .. } => {
                if name == REPLY_FUNCTION {
                    self.calls.insert(index, MessageScanner::default());
                } else {
                    self.calls.remove(&index);
                }
            }
            StreamDelta::ToolArguments { index, json } => {
                if let Some(scanner) = self.calls.get_mut(&index) {
                    scanner.feed(json, &mut pieces.reply);
                }
            }
        }
        pieces
    }
}

/// Where the scanner is in the arguments object.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// Before the opening brace, or past the end.
    #[default]
    Start,
    /// A key (or the closing brace) of the top-level object.
    Key,
    /// The colon after a key.
    Colon,
    /// A value.
    Value,
    /// A comma or the closing brace.
    Next,
}

/// Inside a string: after a backslash, or inside `\uXXXX`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Escape {
    #[default]
    None,
    Backslash,
    Unicode {
        digits: u8,
        value: u32,
    },
}

/// An incremental scanner of one JSON object that decodes its top-level `"message"` string.
#[derive(Debug, Default)]
struct MessageScanner {
    expect: Expect,
    /// Depth inside the top-level object's values (0 at its own level).
    nested: usize,
    in_string: bool,
    /// The string being read is a top-level key.
    reading_key: bool,
    /// The string being read is the reply: decode it out.
    capturing: bool,
    escape: Escape,
    /// A high surrogate waiting for its low half.
    high_surrogate: Option<u32>,
    key: String,
    /// The key the current value belongs to.
    value_key: String,
    done: bool,
}

impl MessageScanner {
    fn feed(&mut self, json: &str, out: &mut String) {
        if self.done {
            return;
        }
        for c in json.chars() {
            self.char(c, out);
            if self.done {
                return;
            }
        }
    }

    fn char(&mut self, c: char, out: &mut String) {
        if self.in_string {
            self.string_char(c, out);
            return;
        }
        if c.is_whitespace() {
            return;
        }
        if self.nested > 0 {
            match c {
                '"' => self.start_string(),
                '{' | '[' => self.nested += 1,
                '}' | ']' => {
                    self.nested -= 1;
                    if self.nested == 0 {
                        self.expect = Expect::Next;
                    }
                }
                _ => {}
            }
            return;
        }
        match (self.expect, c) {
            (Expect::Start, '{') => self.expect = Expect::Key,
            (Expect::Key, '"') => {
                self.start_string();
                self.reading_key = true;
                self.key.clear();
            }
            (Expect::Colon, ':') => self.expect = Expect::Value,
            (Expect::Value, '"') => {
                self.start_string();
                self.capturing = self.value_key == REPLY_ARGUMENT;
            }
            (Expect::Value, '{' | '[') => self.nested = 1,
            (Expect::Value, _) => self.expect = Expect::Next, // a number, literal: skip it
            (Expect::Next, ',') => self.expect = Expect::Key,
            (Expect::Next | Expect::Key, '}') => self.done = true,
            // Still inside a number or literal, or malformed: wait for a comma.
            (Expect::Next, _) => {}
            _ => {}
        }
    }

    fn start_string(&mut self) {
        self.in_string = true;
        self.escape = Escape::None;
    }

    fn string_char(&mut self, c: char, out: &mut String) {
        match self.escape {
            Escape::None => match c {
                '\\' => self.escape = Escape::Backslash,
                '"' => self.end_string(out),
                other => self.emit(other, out),
            },
            Escape::Backslash => {
                self.escape = Escape::None;
                let decoded = match c {
                    'n' => '\n',
                    't' => '\t',
                    'r' => '\r',
                    'b' => '\u{8}',
                    'f' => '\u{c}',
                    'u' => {
                        self.escape = Escape::Unicode {
                            digits: 0,
                            value: 0,
                        };
                        return;
                    }
                    other => other, // `"`, `\`, `/` (and lenient about others)
                };
                self.emit(decoded, out);
            }
            Escape::Unicode { digits, value } => {
                let Some(digit) = c.to_digit(16) else {
                    self.escape = Escape::None;
                    self.emit(char::REPLACEMENT_CHARACTER, out);
                    return;
                };
                let value = value * 16 + digit;
                if digits < 3 {
                    self.escape = Escape::Unicode {
                        digits: digits + 1,
                        value,
                    };
                    return;
                }
                self.escape = Escape::None;
                self.code_unit(value, out);
            }
        }
    }

    /// A `\uXXXX` escape: a character, or half of a surrogate pair.
    fn code_unit(&mut self, unit: u32, out: &mut String) {
        match (self.high_surrogate.take(), unit) {
            (None, 0xD800..=0xDBFF) => self.high_surrogate = Some(unit),
            (Some(high), 0xDC00..=0xDFFF) => {
                let code = 0x10000 + ((high - 0xD800) << 10) + (unit - 0xDC00);
                self.push(
                    char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER),
                    out,
                );
            }
            (high, unit) => {
                if high.is_some() {
                    self.push(char::REPLACEMENT_CHARACTER, out);
                }
                if (0xD800..=0xDFFF).contains(&unit) {
                    if (0xD800..=0xDBFF).contains(&unit) {
                        self.high_surrogate = Some(unit);
                    } else {
                        self.push(char::REPLACEMENT_CHARACTER, out);
                    }
                } else {
                    self.push(
                        char::from_u32(unit).unwrap_or(char::REPLACEMENT_CHARACTER),
                        out,
                    );
                }
            }
        }
    }

    /// A decoded character of the current string.
    fn emit(&mut self, c: char, out: &mut String) {
        if self.high_surrogate.take().is_some() {
            self.push(char::REPLACEMENT_CHARACTER, out);
        }
        self.push(c, out);
    }

    fn push(&mut self, c: char, out: &mut String) {
        if self.reading_key {
            self.key.push(c);
        } else if self.capturing {
            out.push(c);
        }
    }

    fn end_string(&mut self, out: &mut String) {
        if self.high_surrogate.take().is_some() {
            self.push(char::REPLACEMENT_CHARACTER, out);
        }
        self.in_string = false;
        if self.nested > 0 {
            return;
        }
        if self.reading_key {
            self.reading_key = false;
            self.value_key = std::mem::take(&mut self.key);
            self.expect = Expect::Colon;
        } else {
            if self.capturing {
                self.capturing = false;
                // One reply per call: a repeated key is ignored.
                self.value_key.clear();
                self.done = true;
            }
            self.expect = Expect::Next;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `json` as `send_message`'s arguments in the pieces `cuts` makes (char
    /// boundaries), returning the pieces of reply.
    fn pieces(json: &str, cuts: &[usize]) -> Vec<String> {
        let mut stream = ReplyStream::default();
        stream.feed(StreamDelta::ToolCallStart {
            index: 0,
            id: "c",
            name: "send_message",
        });
        let mut out = Vec::new();
        let mut start = 0;
        for &cut in cuts.iter().chain(std::iter::once(&json.len())) {
            let piece = stream
                .feed(StreamDelta::ToolArguments {
                    index: 0,
                    json: &json[start..cut],
                })
                .reply;
            if !piece.is_empty() {
                out.push(piece);
            }
            start = cut;
        }
        out
    }

    #[test]
    fn the_reply_is_decoded_whatever_the_split() {
        let json = r#"{"request_heartbeat": false, "nested": {"message": "no"}, "message": "Hi \"Ann\" \\ \u00e9\ud83d\ude00 caf\u00E9\n\tok 🐱 ünï", "after": "x"}"#;
        let expected: String = serde_json::from_str::<serde_json::Value>(json).unwrap()["message"]
            .as_str()
            .unwrap()
            .to_owned();
        let boundaries: Vec<usize> = (1..json.len())
            .filter(|&i| json.is_char_boundary(i))
            .collect();
        // Whole, then split at every character boundary, then one character at a time.
        assert_eq!(pieces(json, &[]).concat(), expected);
        for &cut in &boundaries {
            assert_eq!(
                pieces(json, &[cut]).concat(),
                expected,
                "split at byte {cut}"
            );
        }
        let one_by_one = pieces(json, &boundaries);
        assert_eq!(one_by_one.concat(), expected);
        assert!(
            one_by_one.len() > 20,
            "the reply arrives in pieces: {one_by_one:?}"
        );
    }

    #[test]
    fn other_calls_and_text_are_told_apart() {
        let mut stream = ReplyStream::default();
        assert_eq!(
            stream.feed(StreamDelta::Text("thinking")).thinking,
            Some("thinking")
        );
        stream.feed(StreamDelta::ToolCallStart {
            index: 0,
            id: "a",
            name: "archival_memory_insert",
        });
        stream.feed(StreamDelta::ToolCallStart {
            index: 1,
            id: "b",
            name: "send_message",
        });
        let other = stream.feed(StreamDelta::ToolArguments {
            index: 0,
            json: r#"{"message": "not a reply"}"#,
        });
        assert!(other.reply.is_empty());
        let reply = stream.feed(StreamDelta::ToolArguments {
            index: 1,
            json: r#"{"message": 42, "message": "yes"}"#,
        });
        assert_eq!(reply.reply, "yes");
        let broken = pieces(r#"{"message": "unterminated \ud83d"#, &[]);
        assert_eq!(broken.concat(), "unterminated ");
    }
}
