//! A small GBNF parser and recognizer for tests: it checks that the grammars we emit are well
//! formed (every rule defined once, every reference resolved) and which texts they accept.
//!
//! It reads the subset llama.cpp's grammar parser reads: `name ::= alternatives`, literals
//! with `\" \\ \n \r \t \xHH \uHHHH` escapes, character classes (`[^...]`, ranges), groups,
//! `*`, `+`, `?`, `{m}`, `{m,}`, `{m,n}` and `#` comments. Matching computes, for every
//! node, the set of positions where it can end (memoised per rule and position), which is
//! exact for grammars without left recursion.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::rc::Rc;

#[derive(Debug)]
enum Node {
    Literal(Vec<char>),
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
    Rule(usize),
    Group(Alternatives),
}

#[derive(Debug)]
struct Item {
    node: Node,
    min: usize,
    max: Option<usize>,
}

type Sequence = Vec<Item>;
/// The positions where a node can end.
type Ends = Rc<BTreeSet<usize>>;
type Alternatives = Vec<Sequence>;

/// A parsed grammar.
pub(crate) struct Grammar {
    text: String,
    rules: Vec<Alternatives>,
    root: usize,
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

    /// Whether the whole of `input` matches `root`.
    pub(crate) fn accepts(&self, input: &str) -> bool {
        let input: Vec<char> = input.chars().collect();
        let matcher = Matcher {
            grammar: self,
            input: &input,
            memo: RefCell::new(HashMap::new()),
        };
        matcher.rule(self.root, 0).contains(&input.len())
    }
}

struct Matcher<'g> {
    grammar: &'g Grammar,
    input: &'g [char],
    memo: RefCell<HashMap<(usize, usize), Ends>>,
}

impl Matcher<'_> {
    fn rule(&self, rule: usize, pos: usize) -> Ends {
        if let Some(found) = self.memo.borrow().get(&(rule, pos)) {
            return found.clone();
        }
        // Left recursion (not something we emit) matches nothing rather than looping.
        self.memo
            .borrow_mut()
            .insert((rule, pos), Rc::new(BTreeSet::new()));
        let ends = Rc::new(self.alternatives(&self.grammar.rules[rule], pos));
        self.memo.borrow_mut().insert((rule, pos), ends.clone());
        ends
    }

    fn alternatives(&self, alternatives: &Alternatives, pos: usize) -> BTreeSet<usize> {
        alternatives
            .iter()
            .flat_map(|sequence| self.sequence(sequence, pos))
            .collect()
    }

    fn sequence(&self, sequence: &Sequence, pos: usize) -> BTreeSet<usize> {
        let mut current = BTreeSet::from([pos]);
        for item in sequence {
            current = current.iter().flat_map(|&p| self.item(item, p)).collect();
            if current.is_empty() {
                break;
            }
        }
        current
    }

    fn item(&self, item: &Item, pos: usize) -> BTreeSet<usize> {
        let step = |from: &BTreeSet<usize>| -> BTreeSet<usize> {
            from.iter()
                .flat_map(|&p| self.node(&item.node, p))
                .collect()
        };
        // Exactly `min` repetitions first...
        let mut layer = BTreeSet::from([pos]);
        for _ in 0..item.min {
            layer = step(&layer);
            if layer.is_empty() {
                return layer;
            }
        }
        // ...then up to `max - min` more, breadth first: a position is reached first with the
        // fewest repetitions, which leaves the most room for more.
        let mut reached = layer.clone();
        let mut frontier = layer;
        let mut extra = 0;
        while item.max.is_none_or(|max| item.min + extra < max) && !frontier.is_empty() {
            frontier = step(&frontier)
                .into_iter()
                .filter(|p| !reached.contains(p))
                .collect();
            reached.extend(frontier.iter().copied());
            extra += 1;
        }
        reached
    }

    fn node(&self, node: &Node, pos: usize) -> BTreeSet<usize> {
        match node {
            Node::Literal(text) => {
                if self.input[pos..].starts_with(text) {
                    BTreeSet::from([pos + text.len()])
                } else {
                    BTreeSet::new()
                }
            }
            Node::Class { negated, ranges } => match self.input.get(pos) {
                Some(&c) if ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi) != *negated => {
                    BTreeSet::from([pos + 1])
                }
                _ => BTreeSet::new(),
            },
            Node::Rule(rule) => (*self.rule(*rule, pos)).clone(),
            Node::Group(alternatives) => self.alternatives(alternatives, pos),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recognizer_itself_works() {
        let g = Grammar::parse(
            "root ::= greeting (\" \" name){1,2} \"!\"? # a comment\n\
             greeting ::= \"hi\" | \"hello\"\n\
             name ::= [A-Z] [a-z]* | \"\\x41\\u00e9\"\n",
        )
        .unwrap();
        for ok in ["hi Ada", "hello Ada Bob!", "hi Aé"] {
            assert!(g.accepts(ok), "{ok}");
        }
        for bad in ["hi", "hi Ada Bob Cy", "hey Ada", "hi ada", "hi Ada!!"] {
            assert!(!g.accepts(bad), "{bad}");
        }
        assert!(Grammar::parse("root ::= missing").is_err());
        assert!(Grammar::parse("root ::= \"a\"\nroot ::= \"b\"").is_err());
        assert!(Grammar::parse("other ::= \"a\"").is_err());
        let negated = Grammar::parse(r#"root ::= [^"\\\x00-\x1F]+"#).unwrap();
        assert!(negated.accepts("abc é"));
        assert!(!negated.accepts("a\"b") && !negated.accepts("a\nb") && !negated.accepts("a\\"));
    }
}
