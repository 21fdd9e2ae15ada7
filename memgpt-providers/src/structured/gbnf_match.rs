//! An incremental GBNF matcher: which next bytes a grammar allows, for grammar-constrained
//! decoding.
//!
//! The grammar is compiled into rules whose alternatives are sequences of single-character
//! classes and rule references (literals become one class per character, groups and
//! repetitions become helper rules). The matcher's state is a set of *stacks*, one per way the
//! text so far can be parsed: each stack holds the positions of the rules being matched, and
//! its top always points at the character class that comes next. An empty stack means the
//! text is a complete sentence of the grammar. A character moves every stack whose top class
//! accepts it and drops the others; no stack left means the character is not allowed. This is
//! the design of llama.cpp's grammar sampler, on the GBNF subset read by
//! [`gbnf_parse`](super::gbnf_parse).
//!
//! Tokens are bytes, not characters, so the state also carries the first bytes of a character
//! a token cut in half: they are allowed when the grammar accepts some character that starts
//! with them.

use super::gbnf_parse::{Alternatives, Grammar, Node, Sequence};

/// How deep a stack may grow while looking for the next character (guards against rules that
/// can repeat without consuming anything).
const MAX_DEPTH: usize = 512;

/// One element of a compiled sequence.
#[derive(Clone, Debug)]
enum Element {
    /// One character in (or, negated, outside) the inclusive ranges.
    Char {
        negated: bool,
        ranges: Vec<(u32, u32)>,
    },
    /// Rule number `n`.
    Rule(usize),
}

impl Element {
    fn accepts(&self, c: u32) -> bool {
        match self {
            Self::Char { negated, ranges } => {
                ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi) != *negated
            }
            Self::Rule(_) => false,
        }
    }

    /// Whether some character in `lo..=hi` is accepted (for a character whose first bytes are
    /// known). Conservative for negated classes: refused only when one range covers it all.
    fn accepts_some(&self, lo: u32, hi: u32) -> bool {
        match self {
            Self::Char {
                negated: false,
                ranges,
            } => ranges.iter().any(|&(a, b)| a <= hi && lo <= b),
            Self::Char {
                negated: true,
                ranges,
            } => !ranges.iter().any(|&(a, b)| a <= lo && hi <= b),
            Self::Rule(_) => false,
        }
    }
}

/// A position: rule, alternative, element index.
type Frame = (u32, u32, u32);
/// Rules being matched, innermost last.
type Stack = Vec<Frame>;

/// A grammar ready for incremental matching.
#[derive(Debug)]
pub(crate) struct CompiledGrammar {
    rules: Vec<Vec<Vec<Element>>>,
    root: usize,
}

impl CompiledGrammar {
    /// Parses and compiles GBNF text with a `root` rule.
    pub(crate) fn new(text: &str) -> Result<Self, String> {
        Self::compile(&Grammar::parse(text)?)
    }

    fn compile(grammar: &Grammar) -> Result<Self, String> {
        let mut compiler = Compiler {
            rules: vec![Vec::new(); grammar.rules.len()],
        };
        for (i, alternatives) in grammar.rules.iter().enumerate() {
            compiler.rules[i] = compiler.alternatives(alternatives)?;
        }
        let compiled = Self {
            rules: compiler.rules,
            root: grammar.root,
        };
        if compiled.start().stacks.is_empty() {
            return Err("the grammar matches nothing".into());
        }
        Ok(compiled)
    }

    /// The state before any text.
    pub(crate) fn start(&self) -> GrammarState {
        let mut stacks = Vec::new();
        for alternative in 0..self.rules[self.root].len() {
            self.expand_from(
                vec![(self.root as u32, alternative as u32, 0)],
                0,
                &mut stacks,
            );
        }
        normalise(&mut stacks);
        GrammarState {
            stacks,
            partial: Vec::new(),
        }
    }

    fn element(&self, &(rule, alternative, index): &Frame) -> Option<&Element> {
        self.rules[rule as usize][alternative as usize].get(index as usize)
    }

    /// Moves `stack` forward until its top is a character class (or it is empty), pushing
    /// every stack that results (a rule reference forks one per alternative).
    ///
    /// A rule is not entered again while a frame of it that was pushed since the last
    /// character is still on the stack: that would be a derivation that repeats without
    /// consuming anything, which can always be shortened, so no sentence is lost (and
    /// nullable repetitions such as `(ws)*` terminate).
    fn expand(&self, stack: Stack, out: &mut Vec<Stack>) {
        let low = stack.len();
        self.expand_from(stack, low, out);
    }

    /// `low`: frames at this index and above were pushed since the last character.
    fn expand_from(&self, mut stack: Stack, mut low: usize, out: &mut Vec<Stack>) {
        loop {
            let Some(top) = stack.last() else {
                out.push(stack);
                return;
            };
            match self.element(top) {
                None => {
                    stack.pop();
                    low = low.min(stack.len());
                    if let Some(parent) = stack.last_mut() {
                        parent.2 += 1;
                    }
                }
                Some(Element::Char { .. }) => {
                    out.push(stack);
                    return;
                }
                Some(&Element::Rule(rule)) => {
                    let fresh = &stack[low.min(stack.len())..];
                    if stack.len() >= MAX_DEPTH || fresh.iter().any(|f| f.0 as usize == rule) {
                        return;
                    }
                    for alternative in 0..self.rules[rule].len() {
                        let mut forked = stack.clone();
                        forked.push((rule as u32, alternative as u32, 0));
                        self.expand_from(forked, low, out);
                    }
                    return;
                }
            }
        }
    }

    /// The stacks after `c`, from stacks whose tops are character classes.
    fn advance(&self, stacks: &[Stack], c: u32) -> Vec<Stack> {
        let mut next = Vec::new();
        for stack in stacks {
            let Some(top) = stack.last() else { continue };
            if self.element(top).is_some_and(|e| e.accepts(c)) {
                let mut moved = stack.clone();
                if let Some(top) = moved.last_mut() {
                    top.2 += 1;
                }
                self.expand(moved, &mut next);
            }
        }
        normalise(&mut next);
        next
    }

    /// The state after `bytes`, or `None` when the grammar does not allow them here.
    pub(crate) fn accept(&self, state: &GrammarState, bytes: &[u8]) -> Option<GrammarState> {
        let mut buffer = state.partial.clone();
        buffer.extend_from_slice(bytes);
        let (complete, rest) = match std::str::from_utf8(&buffer) {
            Ok(text) => (text, &[][..]),
            Err(e) if e.error_len().is_none() => {
                let (head, tail) = buffer.split_at(e.valid_up_to());
                (std::str::from_utf8(head).ok()?, tail)
            }
            Err(_) => return None,
        };
        let mut stacks = state.stacks.clone();
        for c in complete.chars() {
            stacks = self.advance(&stacks, c as u32);
            if stacks.is_empty() {
                return None;
            }
        }
        if !rest.is_empty() {
            let (lo, hi) = code_point_range(rest)?;
            let possible = stacks.iter().any(|stack| {
                stack
                    .last()
                    .and_then(|top| self.element(top))
                    .is_some_and(|e| e.accepts_some(lo, hi))
            });
            if !possible {
                return None;
            }
        }
        Some(GrammarState {
            stacks,
            partial: rest.to_vec(),
        })
    }

    /// Whether `bytes` may come next: [`CompiledGrammar::accept`] with the state dropped (a
    /// token with no bytes never may).
    pub(crate) fn allows(&self, state: &GrammarState, bytes: &[u8]) -> bool {
        !bytes.is_empty() && self.accept(state, bytes).is_some()
    }
}

/// Sorted and without duplicates, so states compare and stay small.
fn normalise(stacks: &mut Vec<Stack>) {
    stacks.sort_unstable();
    stacks.dedup();
}

/// The code points whose UTF-8 encoding starts with `prefix` (an incomplete character).
fn code_point_range(prefix: &[u8]) -> Option<(u32, u32)> {
    let first = *prefix.first()?;
    let length = match first {
        0xC2..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF4 => 4,
        _ => return None,
    };
    if prefix.len() >= length || prefix[1..].iter().any(|b| b & 0xC0 != 0x80) {
        return None;
    }
    let lead_bits = match length {
        2 => u32::from(first & 0x1F),
        3 => u32::from(first & 0x0F),
        _ => u32::from(first & 0x07),
    };
    let mut value = lead_bits;
    for b in &prefix[1..] {
        value = (value << 6) | u32::from(b & 0x3F);
    }
    let missing = (length - prefix.len()) as u32;
    let lo = value << (6 * missing);
    let hi = (lo | ((1 << (6 * missing)) - 1)).min(char::MAX as u32);
    // The shortest form is the only valid one: three bytes start at U+0800, four at U+10000.
    let lo = lo.max(match length {
        2 => 0x80,
        3 => 0x800,
        _ => 0x1_0000,
    });
    (lo <= hi).then_some((lo, hi))
}

/// Where matching stands: the live parses and the bytes of a character begun but not ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct GrammarState {
    stacks: Vec<Stack>,
    partial: Vec<u8>,
}

impl GrammarState {
    /// Whether the text so far is a complete sentence of the grammar.
    pub(crate) fn is_complete(&self) -> bool {
        self.partial.is_empty() && self.stacks.iter().any(Vec::is_empty)
    }

    /// Whether more text may follow.
    pub(crate) fn can_continue(&self) -> bool {
        self.stacks.iter().any(|s| !s.is_empty())
    }
}

struct Compiler {
    rules: Vec<Vec<Vec<Element>>>,
}

impl Compiler {
    fn helper(&mut self, alternatives: Vec<Vec<Element>>) -> usize {
        self.rules.push(alternatives);
        self.rules.len() - 1
    }

    fn alternatives(&mut self, alternatives: &Alternatives) -> Result<Vec<Vec<Element>>, String> {
        alternatives.iter().map(|s| self.sequence(s)).collect()
    }

    fn sequence(&mut self, sequence: &Sequence) -> Result<Vec<Element>, String> {
        let mut out = Vec::new();
        for item in sequence {
            let mut atom = match &item.node {
                Node::Literal(chars) => chars
                    .iter()
                    .map(|&c| Element::Char {
                        negated: false,
                        ranges: vec![(c as u32, c as u32)],
                    })
                    .collect(),
                Node::Class { negated, ranges } => vec![Element::Char {
                    negated: *negated,
                    ranges: ranges.iter().map(|&(a, b)| (a as u32, b as u32)).collect(),
                }],
                Node::Rule(rule) => vec![Element::Rule(*rule)],
                Node::Group(alternatives) => {
                    let body = self.alternatives(alternatives)?;
                    vec![Element::Rule(self.helper(body))]
                }
            };
            if (item.min, item.max) == (1, Some(1)) {
                out.append(&mut atom);
                continue;
            }
            if item.max.is_some_and(|max| max < item.min) {
                return Err(format!(
                    "repetition {{{},{:?}}} has its maximum below its minimum",
                    item.min, item.max
                ));
            }
            if atom.len() != 1 {
                atom = vec![Element::Rule(self.helper(vec![atom]))];
            }
            for _ in 0..item.min {
                out.extend(atom.iter().cloned());
            }
            match item.max {
                // x* : star ::= x star | ""
                None => {
                    let star = self.helper(Vec::new());
                    self.rules[star] = vec![
                        atom.iter().cloned().chain([Element::Rule(star)]).collect(),
                        Vec::new(),
                    ];
                    out.push(Element::Rule(star));
                }
                // up to k more: opt_k ::= x opt_{k-1} | ""
                Some(max) if max > item.min => {
                    let mut inner: Option<usize> = None;
                    for _ in item.min..max {
                        let mut body: Vec<Element> = atom.clone();
                        body.extend(inner.map(Element::Rule));
                        inner = Some(self.helper(vec![body, Vec::new()]));
                    }
                    out.extend(inner.map(Element::Rule));
                }
                Some(_) => {}
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(grammar: &CompiledGrammar, text: &str) -> bool {
        grammar
            .accept(&grammar.start(), text.as_bytes())
            .is_some_and(|s| s.is_complete())
    }

    #[test]
    fn whole_texts_match_like_the_recognizer() {
        let text = "root ::= greeting (\" \" name){1,2} \"!\"? # a comment\n\
                    greeting ::= \"hi\" | \"hello\"\n\
                    name ::= [A-Z] [a-z]* | \"\\x41\\u00e9\"\n";
        let g = CompiledGrammar::new(text).unwrap();
        let reference = Grammar::parse(text).unwrap();
        for t in [
            "hi Ada",
            "hello Ada Bob!",
            "hi Aé",
            "hi",
            "hi Ada Bob Cy",
            "hey Ada",
            "hi ada",
            "hi Ada!!",
            "",
        ] {
            assert_eq!(matches(&g, t), reference.accepts(t), "{t:?}");
        }
    }

    #[test]
    fn prefixes_are_allowed_and_dead_ends_are_not() {
        let g = CompiledGrammar::new(r#"root ::= "{" [a-z]+ "}""#).unwrap();
        let s = g.start();
        assert!(!s.is_complete() && s.can_continue());
        let s = g.accept(&s, b"{ab").unwrap();
        assert!(!s.is_complete());
        assert!(!g.allows(&s, b"A"));
        assert!(g.allows(&s, b"c}"));
        let done = g.accept(&s, b"}").unwrap();
        assert!(done.is_complete() && !done.can_continue());
        assert!(!g.allows(&done, b"x"));
    }

    #[test]
    fn a_character_cut_between_tokens_is_followed() {
        let g = CompiledGrammar::new(r#"root ::= "\"" [^"\\]* "\"""#).unwrap();
        let s = g.accept(&g.start(), b"\"").unwrap();
        let e_acute = "é".as_bytes();
        let half = g.accept(&s, &e_acute[..1]).unwrap();
        assert!(!half.is_complete());
        let whole = g.accept(&half, &e_acute[1..]).unwrap();
        assert!(g.accept(&whole, b"\"").unwrap().is_complete());
        // Only ASCII letters: the first byte of é cannot start anything allowed.
        let ascii = CompiledGrammar::new("root ::= [a-z]+").unwrap();
        assert!(!ascii.allows(&ascii.start(), &e_acute[..1]));
        // Invalid UTF-8 never passes.
        assert!(!g.allows(&s, &[0xFF]));
    }

    #[test]
    fn cut_characters_cover_only_their_valid_code_points() {
        assert_eq!(code_point_range(&[0xC3]), Some((0xC0, 0xFF)));
        assert_eq!(code_point_range(&[0xE0]), Some((0x800, 0xFFF)));
        assert_eq!(code_point_range(&[0xF0, 0x9F]), Some((0x1F000, 0x1FFFF)));
        assert_eq!(code_point_range(&[0xF0]), Some((0x10000, 0x3FFFF)));
        assert_eq!(code_point_range(&[0x80]), None);
        assert_eq!(code_point_range(&[0xC3, 0xA9]), None, "complete, not cut");
    }

    #[test]
    fn nullable_repetitions_terminate() {
        let g = CompiledGrammar::new("root ::= (ws)* \"x\"\nws ::= [ ]*").unwrap();
        assert!(matches(&g, "   x"));
        assert!(matches(&g, "x"));
        assert!(!matches(&g, " y"));
    }

    #[test]
    fn a_grammar_that_matches_nothing_is_an_error() {
        let e = CompiledGrammar::new("root ::= root").unwrap_err();
        assert!(e.contains("matches nothing"), "{e}");
        assert!(CompiledGrammar::new("root ::= [a]{3,1}").is_err());
    }
}

#[cfg(test)]
mod walks {
    use super::*;
    use crate::structured::tests::builtin_tools;
    use crate::structured::{GbnfOptions, UnionOptions, tool_call_grammar};

    /// Random walks through the function-call grammar of the built-in functions, in pieces
    /// like tokens (ASCII runs and multi-byte characters cut anywhere): the matcher never
    /// reaches a state where no byte may follow and the text is not complete (a dead end
    /// would leave the local model with no token to choose).
    #[test]
    fn random_walks_never_reach_a_dead_end() {
        let text = tool_call_grammar(
            &builtin_tools(),
            &UnionOptions::default(),
            &GbnfOptions::default(),
        )
        .unwrap();
        let g = CompiledGrammar::new(&text).unwrap();
        let pieces: Vec<Vec<u8>> = (0u8..=127)
            .map(|b| vec![b])
            .chain(
                [
                    "é", "😢", "→", "ß", " the", "\":", "\",\"", "true", "null", "12",
                ]
                .iter()
                .map(|s| s.as_bytes().to_vec()),
            )
            .chain((0x80u8..=0xFF).map(|b| vec![b]))
            .collect();
        let mut seed = 0x1234_5678_u64;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        for walk in 0..40 {
            let mut state = g.start();
            let mut written = Vec::new();
            for _ in 0..200 {
                let allowed: Vec<&Vec<u8>> =
                    pieces.iter().filter(|p| g.allows(&state, p)).collect();
                if allowed.is_empty() {
                    assert!(
                        state.is_complete(),
                        "walk {walk}: dead end after {:?} ({written:?})",
                        String::from_utf8_lossy(&written)
                    );
                    break;
                }
                // Finish sometimes when allowed, else prefer short structural moves.
                if state.is_complete() && next(4) == 0 {
                    break;
                }
                let piece = allowed[next(allowed.len())];
                state = g.accept(&state, piece).unwrap();
                written.extend_from_slice(piece);
            }
        }
    }
}
