//! A whole-text GBNF recognizer for tests: which texts the grammars we emit accept. Matching
//! computes, for every node, the set of positions where it can end (memoised per rule and
//! position), which is exact for grammars without left recursion. It is written independently
//! of the incremental matcher ([`gbnf_match`](super::gbnf_match)), which is tested against it.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;

use super::gbnf_parse::{Alternatives, Grammar, Item, Node, Sequence};

/// The positions where a node can end.
type Ends = Rc<BTreeSet<usize>>;

impl Grammar {
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
