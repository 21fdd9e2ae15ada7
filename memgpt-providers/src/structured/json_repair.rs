//! A forgiving JSON reader for what language models write when they mean JSON.
//!
//! It accepts all of JSON (with the same result) plus: trailing and missing commas,
//! single-quoted strings and keys, unquoted keys and bare-word values, Python's `True`,
//! `False` and `None`, raw control characters and unescaped quotes inside strings, invalid
//! escapes, `//`, `/* */` and `#` comments, non-JSON number forms (`+1`, `.5`, `1.`, `01`) and
//! missing closing brackets at the end of the text. Every such leniency is recorded as a
//! [`Repair`].

use serde_json::{Map, Number, Value};

use super::Repair;

/// The deepest nesting accepted (the reply is untrusted input).
const MAX_DEPTH: usize = 128;

/// Reads one value starting at byte `start` of `text`; returns it and the byte offset just
/// past it.
pub(crate) fn parse_at(
    text: &str,
    start: usize,
    repairs: &mut Vec<Repair>,
) -> Result<(Value, usize), String> {
    let mut reader = Reader {
        text,
        bytes: text.as_bytes(),
        pos: start,
        depth: 0,
        repairs,
    };
    let value = reader.value()?;
    Ok((value, reader.pos))
}

struct Reader<'a, 'r> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    depth: usize,
    repairs: &'r mut Vec<Repair>,
}

impl Reader<'_, '_> {
    fn note(&mut self, repair: Repair) {
        if !self.repairs.contains(&repair) {
            self.repairs.push(repair);
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn peek_char(&self) -> Option<char> {
        self.text
            .get(self.pos..)
            .and_then(|rest| rest.chars().next())
    }

    /// Where we are, for error messages: "line L, column C".
    fn location(&self) -> String {
        let before = &self.text[..self.pos.min(self.text.len())];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        format!("line {line}, column {column}")
    }

    fn error(&self, what: &str) -> String {
        format!("{what} at {}", self.location())
    }

    /// Skips whitespace and comments.
    fn skip(&mut self) {
        loop {
            match self.peek() {
                Some(b' ' | b'\t' | b'\n' | b'\r') => self.pos += 1,
                Some(b'/') if self.bytes.get(self.pos + 1) == Some(&b'/') => {
                    self.note(Repair::Comment);
                    self.skip_line();
                }
                Some(b'#') => {
                    self.note(Repair::Comment);
                    self.skip_line();
                }
                Some(b'/') if self.bytes.get(self.pos + 1) == Some(&b'*') => {
                    self.note(Repair::Comment);
                    match self.text[self.pos + 2..].find("*/") {
                        Some(end) => self.pos += 2 + end + 2,
                        None => self.pos = self.bytes.len(),
                    }
                }
                _ => return,
            }
        }
    }

    fn skip_line(&mut self) {
        while self.peek().is_some_and(|b| b != b'\n') {
            self.pos += 1;
        }
    }

    fn value(&mut self) -> Result<Value, String> {
        self.skip();
        let Some(c) = self.peek_char() else {
            return Err(self.error("the JSON ends too early"));
        };
        match c {
            '{' | '[' => {
                self.depth += 1;
                if self.depth > MAX_DEPTH {
                    return Err(self.error("the JSON is nested too deeply"));
                }
                let value = if c == '{' {
                    self.object()
                } else {
                    self.array()
                };
                self.depth -= 1;
                value
            }
            '"' | '\'' => self.string().map(Value::String),
            '-' | '+' | '.' | '0'..='9' => self.number(),
            c if c.is_alphabetic() || c == '_' || c == '$' => self.word(),
            c => Err(self.error(&format!("unexpected character `{c}`"))),
        }
    }

    fn object(&mut self) -> Result<Value, String> {
        self.pos += 1;
        let mut map = Map::new();
        // Whether the last thing read was a member (so the next needs a comma first).
        let mut after_member = false;
        let mut after_comma = false;
        loop {
            self.skip();
            match self.peek() {
                None => {
                    self.note(Repair::UnclosedBracket);
                    return Ok(Value::Object(map));
                }
                Some(b'}') => {
                    self.pos += 1;
                    if after_comma {
                        self.note(Repair::TrailingComma);
                    }
                    return Ok(Value::Object(map));
                }
                Some(b']') => {
                    return Err(self.error("`]` where `}` or a key was expected"));
                }
                Some(b',') => {
                    self.pos += 1;
                    if !after_member {
                        self.note(Repair::TrailingComma);
                    }
                    after_member = false;
                    after_comma = true;
                }
                Some(_) => {
                    if after_member {
                        self.note(Repair::MissingComma);
                    }
                    let key = self.key()?;
                    self.skip();
                    match self.peek() {
                        Some(b':') => self.pos += 1,
                        _ => {
                            return Err(
                                self.error(&format!("expected `:` after the key \"{key}\""))
                            );
                        }
                    }
                    self.skip();
                    if matches!(self.peek(), None | Some(b',' | b'}')) {
                        return Err(self.error(&format!("the key \"{key}\" has no value")));
                    }
                    let value = self.value()?;
                    map.insert(key, value);
                    after_member = true;
                    after_comma = false;
                }
            }
        }
    }

    fn array(&mut self) -> Result<Value, String> {
        self.pos += 1;
        let mut items = Vec::new();
        let mut after_item = false;
        let mut after_comma = false;
        loop {
            self.skip();
            match self.peek() {
                None => {
                    self.note(Repair::UnclosedBracket);
                    return Ok(Value::Array(items));
                }
                Some(b']') => {
                    self.pos += 1;
                    if after_comma {
                        self.note(Repair::TrailingComma);
                    }
                    return Ok(Value::Array(items));
                }
                Some(b'}') => {
                    return Err(self.error("`}` where `]` or a value was expected"));
                }
                Some(b',') => {
                    self.pos += 1;
                    if !after_item {
                        self.note(Repair::TrailingComma);
                    }
                    after_item = false;
                    after_comma = true;
                }
                Some(_) => {
                    if after_item {
                        self.note(Repair::MissingComma);
                    }
                    items.push(self.value()?);
                    after_item = true;
                    after_comma = false;
                }
            }
        }
    }

    fn key(&mut self) -> Result<String, String> {
        match self.peek_char() {
            Some('"' | '\'') => self.string(),
            Some(c) if c.is_alphanumeric() || c == '_' || c == '$' => {
                let start = self.pos;
                while let Some(c) = self.peek_char() {
                    if c.is_alphanumeric() || matches!(c, '_' | '$' | '-') {
                        self.pos += c.len_utf8();
                    } else {
                        break;
                    }
                }
                self.note(Repair::UnquotedKey);
                Ok(self.text[start..self.pos].to_owned())
            }
            Some(c) => Err(self.error(&format!("expected a key, found `{c}`"))),
            None => Err(self.error("the JSON ends too early")),
        }
    }

    /// Whether the quote at `self.pos` ends the string: it does when what follows (after
    /// whitespace) can follow a string, or when a line break and another string follow (a
    /// missing comma between members on separate lines).
    fn closes_here(&self) -> bool {
        let mut i = self.pos + 1;
        let mut newline = false;
        while let Some(&b) = self.bytes.get(i) {
            match b {
                b' ' | b'\t' | b'\r' => i += 1,
                b'\n' => {
                    newline = true;
                    i += 1;
                }
                b',' | b'}' | b']' | b':' => return true,
                b'"' | b'\'' => return newline,
                b'/' | b'#' => return true,
                _ => return false,
            }
        }
        true
    }

    fn string(&mut self) -> Result<String, String> {
        let quote = self.bytes[self.pos];
        if quote == b'\'' {
            self.note(Repair::SingleQuotes);
        }
        let start = self.pos;
        self.pos += 1;
        let mut out = String::new();
        loop {
            let Some(c) = self.peek_char() else {
                self.pos = start;
                return Err(self.error("unterminated string"));
            };
            self.pos += c.len_utf8();
            match c {
                '\\' => self.escape(&mut out, quote)?,
                c if c as u32 == u32::from(quote) => {
                    self.pos -= 1;
                    if self.closes_here() {
                        self.pos += 1;
                        return Ok(out);
                    }
                    self.pos += 1;
                    if quote == b'"' {
                        self.note(Repair::UnescapedQuote);
                    }
                    out.push(c);
                }
                c if (c as u32) < 0x20 => {
                    self.note(Repair::RawControlCharacter);
                    out.push(c);
                }
                c => out.push(c),
            }
        }
    }

    fn escape(&mut self, out: &mut String, quote: u8) -> Result<(), String> {
        let Some(c) = self.peek_char() else {
            return Err(self.error("unterminated string"));
        };
        self.pos += c.len_utf8();
        match c {
            '"' | '\\' | '/' => out.push(c),
            'b' => out.push('\u{8}'),
            'f' => out.push('\u{c}'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            't' => out.push('\t'),
            'u' => {
                let first = self.hex4();
                match first {
                    Some(high @ 0xD800..=0xDBFF) => {
                        let low = if self.text[self.pos..].starts_with("\\u") {
                            self.pos += 2;
                            self.hex4()
                        } else {
                            None
                        };
                        match low {
                            Some(low @ 0xDC00..=0xDFFF) => {
                                let code = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
                                out.push(char::from_u32(code).unwrap_or('\u{FFFD}'));
                            }
                            _ => {
                                self.note(Repair::InvalidEscape);
                                out.push('\u{FFFD}');
                            }
                        }
                    }
                    Some(code) => match char::from_u32(code) {
                        Some(c) => out.push(c),
                        None => {
                            self.note(Repair::InvalidEscape);
                            out.push('\u{FFFD}');
                        }
                    },
                    None => {
                        self.note(Repair::InvalidEscape);
                        out.push_str("\\u");
                    }
                }
            }
            '\'' => {
                if quote == b'"' {
                    self.note(Repair::InvalidEscape);
                }
                out.push('\'');
            }
            '\n' => {
                // A backslash-newline line continuation.
                self.note(Repair::InvalidEscape);
            }
            c => {
                // `\d`, `\(`...: the model meant a backslash.
                self.note(Repair::InvalidEscape);
                out.push('\\');
                out.push(c);
            }
        }
        Ok(())
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = self.text.get(self.pos..self.pos + 4)?;
        let code = u32::from_str_radix(digits, 16).ok()?;
        if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        self.pos += 4;
        Some(code)
    }

    fn number(&mut self) -> Result<Value, String> {
        let start = self.pos;
        let mut lexeme = String::new();
        let mut nonstandard = false;
        if let Some(sign @ (b'-' | b'+')) = self.peek() {
            self.pos += 1;
            if sign == b'-' {
                lexeme.push('-');
            } else {
                nonstandard = true;
            }
        }
        let digits = |r: &mut Self| {
            let from = r.pos;
            while r.peek().is_some_and(|b| b.is_ascii_digit()) {
                r.pos += 1;
            }
            r.text[from..r.pos].to_owned()
        };
        let mut integer = digits(self);
        if integer.len() > 1 && integer.starts_with('0') {
            integer = integer.trim_start_matches('0').to_owned();
            if integer.is_empty() {
                integer.push('0');
            }
            nonstandard = true;
        }
        let mut fraction = None;
        if self.peek() == Some(b'.') {
            self.pos += 1;
            fraction = Some(digits(self));
        }
        if integer.is_empty() {
            if fraction.as_ref().is_none_or(String::is_empty) {
                self.pos = start;
                return Err(self.error("invalid number"));
            }
            integer.push('0');
            nonstandard = true;
        }
        lexeme.push_str(&integer);
        if let Some(fraction) = fraction {
            if fraction.is_empty() {
                nonstandard = true;
            } else {
                lexeme.push('.');
                lexeme.push_str(&fraction);
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            let save = self.pos;
            self.pos += 1;
            let mut exponent = String::from("e");
            if let Some(sign @ (b'-' | b'+')) = self.peek() {
                exponent.push(sign as char);
                self.pos += 1;
            }
            let digits = digits(self);
            if digits.is_empty() {
                self.pos = save;
            } else {
                exponent.push_str(&digits);
                lexeme.push_str(&exponent);
            }
        }
        if nonstandard {
            self.note(Repair::NumberFormat);
        }
        match serde_json::from_str::<Number>(&lexeme) {
            Ok(number) => Ok(Value::Number(number)),
            Err(_) => {
                self.pos = start;
                Err(self.error("invalid number"))
            }
        }
    }

    fn word(&mut self) -> Result<Value, String> {
        let start = self.pos;
        while let Some(c) = self.peek_char() {
            if c.is_alphanumeric() || matches!(c, '_' | '$' | '-' | '.') {
                self.pos += c.len_utf8();
            } else {
                break;
            }
        }
        let word = &self.text[start..self.pos];
        Ok(match word {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            "null" => Value::Null,
            "True" | "TRUE" => {
                self.note(Repair::PythonLiteral);
                Value::Bool(true)
            }
            "False" | "FALSE" => {
                self.note(Repair::PythonLiteral);
                Value::Bool(false)
            }
            "None" | "NULL" | "Null" | "undefined" => {
                self.note(Repair::PythonLiteral);
                Value::Null
            }
            "NaN" | "Infinity" => {
                self.pos = start;
                return Err(self.error(&format!("{word} is not a JSON number")));
            }
            word => {
                self.note(Repair::UnquotedString);
                Value::String(word.to_owned())
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn read(text: &str) -> (Value, Vec<Repair>) {
        let mut repairs = Vec::new();
        let (value, end) =
            parse_at(text, 0, &mut repairs).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert!(end <= text.len());
        (value, repairs)
    }

    #[test]
    fn valid_json_reads_as_serde_json_does() {
        for text in [
            r#"{"a": [1, -2.5, 3e2, true, false, null, "x\"y\\z\u00e9\ud83d\ude00"], "b": {}}"#,
            r#"[]"#,
            r#"{"nested": {"deep": [[{"k": "v"}]]}}"#,
            "  {\"k\" :\t\"v\" }",
        ] {
            let (value, repairs) = read(text);
            assert_eq!(
                value,
                serde_json::from_str::<Value>(text).unwrap(),
                "{text}"
            );
            assert!(repairs.is_empty(), "{text}: {repairs:?}");
        }
    }

    #[test]
    fn common_defects_are_read() {
        let cases: &[(&str, Value, &[Repair])] = &[
            (r#"{"a": 1,}"#, json!({"a": 1}), &[Repair::TrailingComma]),
            (r#"[1, 2,]"#, json!([1, 2]), &[Repair::TrailingComma]),
            (
                "{'a': 'it's'}",
                json!({"a": "it's"}),
                &[Repair::SingleQuotes],
            ),
            (
                r#"{a: 1, b_c: "x"}"#,
                json!({"a": 1, "b_c": "x"}),
                &[Repair::UnquotedKey],
            ),
            (
                r#"{"a": True, "b": False, "c": None}"#,
                json!({"a": true, "b": false, "c": null}),
                &[Repair::PythonLiteral],
            ),
            (
                "{\"a\": \"line\nbreak\"}",
                json!({"a": "line\nbreak"}),
                &[Repair::RawControlCharacter],
            ),
            (
                r#"{"a": "he said "hi" to me"}"#,
                json!({"a": "he said \"hi\" to me"}),
                &[Repair::UnescapedQuote],
            ),
            (
                r#"{"a": "don\'t"}"#,
                json!({"a": "don't"}),
                &[Repair::InvalidEscape],
            ),
            (
                r#"{"a": "C:\dir"}"#,
                json!({"a": "C:\\dir"}),
                &[Repair::InvalidEscape],
            ),
            ("{\"a\": 1 // one\n}", json!({"a": 1}), &[Repair::Comment]),
            ("{\"a\": /* one */ 1}", json!({"a": 1}), &[Repair::Comment]),
            (
                "{\"a\": 1\n\"b\": 2}",
                json!({"a": 1, "b": 2}),
                &[Repair::MissingComma],
            ),
            (
                r#"{"a": {"b": [1, 2"#,
                json!({"a": {"b": [1, 2]}}),
                &[Repair::UnclosedBracket],
            ),
            (
                r#"{"a": +1, "b": .5, "c": 1., "d": 007}"#,
                json!({"a": 1, "b": 0.5, "c": 1, "d": 7}),
                &[Repair::NumberFormat],
            ),
            (
                r#"{"function": send_message}"#,
                json!({"function": "send_message"}),
                &[Repair::UnquotedString],
            ),
        ];
        for (text, expected, repairs) in cases {
            let (value, found) = read(text);
            assert_eq!(&value, expected, "{text}");
            assert_eq!(&found, repairs, "{text}");
        }
    }

    #[test]
    fn hopeless_input_fails_with_a_location() {
        for text in [
            r#"{"a": "unterminated"#,
            r#"{"a" 1}"#,
            r#"{"a": }"#,
            r#"{"a": NaN}"#,
            r#"{"a": [1}"#,
            "{\"a\": @}",
            "{\"a\":\n-}",
        ] {
            let mut repairs = Vec::new();
            let err = parse_at(text, 0, &mut repairs).unwrap_err();
            assert!(err.contains("line "), "{text}: {err}");
        }
        let deep = "[".repeat(MAX_DEPTH + 2);
        assert!(parse_at(&deep, 0, &mut Vec::new()).is_err());
    }

    #[test]
    fn reading_stops_after_the_value() {
        let text = "x {\"a\": 1} trailing";
        let (value, end) = parse_at(text, 2, &mut Vec::new()).unwrap();
        assert_eq!(value, json!({"a": 1}));
        assert_eq!(&text[end..], " trailing");
    }
}
