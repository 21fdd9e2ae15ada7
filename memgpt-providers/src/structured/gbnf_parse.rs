//! A GBNF parser: the subset llama.cpp's grammar parser reads (`name ::= alternatives`,
//! literals with `\" \\ \n \r \t \xHH \uHHHH` escapes, character classes (`[^...]`, ranges),
//! groups, `*`, `+`, `?`, `{m}`, `{m,}`, `{m,n}` and `#` comments), checking that every rule is
//! defined once and every reference resolves. [`gbnf_match`](super::gbnf_match) compiles the
//! result into the incremental matcher that constrains local decoding.

use std::collections::HashMap;
use std::fmt;

/// One element of a sequence.
#[derive(Debug)]
pub(crate) enum Node {
    /// Characters in order.
    Literal(Vec<char>),
    /// One character in (or, negated, outside) the inclusive ranges.
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
    /// A reference to rule number `n`.
    Rule(usize),
    /// Parenthesised alternatives.
    Group(Alternatives),
}

/// An element with its repetition bounds (`x` is `{1,1}`, `x*` is `{0,}`).
#[derive(Debug)]
pub(crate) struct Item {
    pub(crate) node: Node,
    pub(crate) min: usize,
    pub(crate) max: Option<usize>,
}

/// Items in order.
pub(crate) type Sequence = Vec<Item>;
/// One of several sequences.
pub(crate) type Alternatives = Vec<Sequence>;

/// A parsed grammar.
pub(crate) struct Grammar {
    pub(crate) text: String,
    /// Rule bodies by rule number.
    pub(crate) rules: Vec<Alternatives>,
    /// The number of `root`.
    pub(crate) root: usize,
}

impl fmt::Display for Grammar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
    names: HashMap<String, usize>,
    /// Names referenced, with the rule index handed out.
    order: Vec<String>,
    defined: Vec<bool>,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn skip_space(&mut self) {
        while let Some(c) = self.peek() {
            if c.is_whitespace() {
                self.pos += 1;
            } else if c == '#' {
                while self.peek().is_some_and(|c| c != '\n') {
                    self.pos += 1;
                }
            } else {
                break;
            }
        }
    }

    fn name_char(c: char) -> bool {
        c.is_ascii_alphanumeric() || c == '-' || c == '_'
    }

    fn name(&mut self) -> Option<String> {
        let start = self.pos;
        while self.peek().is_some_and(Self::name_char) {
            self.pos += 1;
        }
        (self.pos > start).then(|| self.chars[start..self.pos].iter().collect())
    }

    /// Whether a rule definition (`name ::=`) starts here.
    fn at_definition(&mut self) -> bool {
        let saved = self.pos;
        let found = self.name().is_some() && {
            self.skip_space();
            self.chars[self.pos..].starts_with(&[':', ':', '='])
        };
        self.pos = saved;
        found
    }

    fn index(&mut self, name: &str) -> usize {
        if let Some(&i) = self.names.get(name) {
            return i;
        }
        let i = self.order.len();
        self.names.insert(name.to_owned(), i);
        self.order.push(name.to_owned());
        self.defined.push(false);
        i
    }

    fn error(&self, what: &str) -> String {
        let context: String = self.chars[self.pos.min(self.chars.len())..]
            .iter()
            .take(30)
            .collect();
        format!(
            "GBNF parse error at {}: {what} (before `{context}`)",
            self.pos
        )
    }

    fn escape(&mut self) -> Result<char, String> {
        let c = self.peek().ok_or_else(|| self.error("dangling escape"))?;
        self.pos += 1;
        let hex = |p: &mut Self, n: usize| -> Result<char, String> {
            let digits: String = p
                .chars
                .get(p.pos..p.pos + n)
                .unwrap_or_default()
                .iter()
                .collect();
            p.pos += n;
            u32::from_str_radix(&digits, 16)
                .ok()
                .and_then(char::from_u32)
                .ok_or_else(|| p.error("bad hex escape"))
        };
        Ok(match c {
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            '\\' | '"' | '[' | ']' | '-' | '^' => c,
            'x' => hex(self, 2)?,
            'u' => hex(self, 4)?,
            'U' => hex(self, 8)?,
            _ => return Err(self.error("unknown escape")),
        })
    }

    fn alternatives(&mut self) -> Result<Alternatives, String> {
        let mut alternatives = vec![self.sequence()?];
        while self.peek() == Some('|') {
            self.pos += 1;
            alternatives.push(self.sequence()?);
        }
        Ok(alternatives)
    }

    fn sequence(&mut self) -> Result<Sequence, String> {
        let mut sequence = Vec::new();
        loop {
            self.skip_space();
            let node = match self.peek() {
                None | Some('|' | ')') => break,
                Some(_) if self.at_definition() => break,
                Some('"') => {
                    self.pos += 1;
                    let mut text = Vec::new();
                    loop {
                        match self.peek() {
                            None => return Err(self.error("unterminated literal")),
                            Some('"') => {
                                self.pos += 1;
                                break;
                            }
                            Some('\\') => {
                                self.pos += 1;
                                text.push(self.escape()?);
                            }
                            Some(c) => {
                                self.pos += 1;
                                text.push(c);
                            }
                        }
                    }
                    Node::Literal(text)
                }
                Some('[') => {
                    self.pos += 1;
                    let negated = self.peek() == Some('^');
                    if negated {
                        self.pos += 1;
                    }
                    let mut ranges = Vec::new();
                    loop {
                        let start = match self.peek() {
                            None => return Err(self.error("unterminated class")),
                            Some(']') => {
                                self.pos += 1;
                                break;
                            }
                            Some('\\') => {
                                self.pos += 1;
                                self.escape()?
                            }
                            Some(c) => {
                                self.pos += 1;
                                c
                            }
                        };
                        let end = if self.peek() == Some('-')
                            && self.chars.get(self.pos + 1).is_some_and(|&c| c != ']')
                        {
                            self.pos += 1;
                            match self.peek() {
                                Some('\\') => {
                                    self.pos += 1;
                                    self.escape()?
                                }
                                Some(c) => {
                                    self.pos += 1;
                                    c
                                }
                                None => return Err(self.error("unterminated range")),
                            }
                        } else {
                            start
                        };
                        ranges.push((start, end));
                    }
                    Node::Class { negated, ranges }
                }
                Some('(') => {
                    self.pos += 1;
                    let inner = self.alternatives()?;
                    self.skip_space();
                    if self.peek() != Some(')') {
                        return Err(self.error("expected `)`"));
                    }
                    self.pos += 1;
                    Node::Group(inner)
                }
                Some(c) if Self::name_char(c) => {
                    let name = self.name().unwrap_or_default();
                    Node::Rule(self.index(&name))
                }
                Some(_) => return Err(self.error("unexpected character")),
            };
            let (min, max) = self.repetition()?;
            sequence.push(Item { node, min, max });
        }
        Ok(sequence)
    }

    fn number(&mut self) -> Option<usize> {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        self.chars[start..self.pos]
            .iter()
            .collect::<String>()
            .parse()
            .ok()
    }

    fn repetition(&mut self) -> Result<(usize, Option<usize>), String> {
        Ok(match self.peek() {
            Some('*') => {
                self.pos += 1;
                (0, None)
            }
            Some('+') => {
                self.pos += 1;
                (1, None)
            }
            Some('?') => {
                self.pos += 1;
                (0, Some(1))
            }
            Some('{') => {
                self.pos += 1;
                let min = self
                    .number()
                    .ok_or_else(|| self.error("expected a count"))?;
                let max = if self.peek() == Some(',') {
                    self.pos += 1;
                    self.number()
                } else {
                    Some(min)
                };
                if self.peek() != Some('}') {
                    return Err(self.error("expected `}`"));
                }
                self.pos += 1;
                (min, max)
            }
            _ => (1, Some(1)),
        })
    }
}

impl Grammar {
    /// Parses `text`, checking that every rule is defined exactly once and `root` exists.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let mut parser = Parser {
            chars: text.chars().collect(),
            pos: 0,
            names: HashMap::new(),
            order: Vec::new(),
            defined: Vec::new(),
        };
        let mut bodies: HashMap<usize, Alternatives> = HashMap::new();
        loop {
            parser.skip_space();
            if parser.peek().is_none() {
                break;
            }
            let name = parser
                .name()
                .ok_or_else(|| parser.error("expected a rule name"))?;
            parser.skip_space();
            if !parser.chars[parser.pos..].starts_with(&[':', ':', '=']) {
                return Err(parser.error("expected `::=`"));
            }
            parser.pos += 3;
            let index = parser.index(&name);
            if parser.defined[index] {
                return Err(format!("rule `{name}` is defined twice"));
            }
            parser.defined[index] = true;
            let body = parser.alternatives()?;
            if parser.peek() == Some(')') {
                return Err(parser.error("unbalanced `)`"));
            }
            bodies.insert(index, body);
        }
        if let Some(i) = parser.defined.iter().position(|d| !d) {
            return Err(format!(
                "rule `{}` is used but not defined",
                parser.order[i]
            ));
        }
        let root = *parser.names.get("root").ok_or("no `root` rule")?;
        let mut rules = Vec::with_capacity(parser.order.len());
        for i in 0..parser.order.len() {
            rules.push(bodies.remove(&i).unwrap_or_default());
        }
        Ok(Self {
            text: text.to_owned(),
            rules,
            root,
        })
    }
}
