//! The policy lab: page-replacement policies measured on real long-term conversations, with
//! no LLM.
//!
//! ```text
//! cargo run --release --example policy_lab [-- --data PATH --window 1024,2048,4096,8192 --seed 1]
//! ```
//!
//! Each LoCoMo conversation is replayed turn by turn into a main context of `--window` tokens
//! (a fixed 600 tokens stand for the system instructions, functions and working context), its
//! FIFO queue managed by the real [`QueueManager`] under each policy. LoCoMo asks its questions
//! after the whole conversation; the lab turns them into a reference string, like an OS page
//! trace: each question is posed at the end of a session chosen at random (seeded) between the
//! session of its last evidence turn and the last session, so writes and references
//! interleave. A question enters the context as a user turn (that is what the attention policy
//! can observe), and, as the agent's `conversation_search` would, a BM25 search of the question
//! over the turns so far *uses* its top five hits (what LRU and the heavy-hitter score see).
//! The evidence ids are shown to no policy but OPT.
//!
//! At each question the lab checks where each evidence turn is: in main context (a hit), only
//! in the recursive summary, or only in external storage (a page fault). The summary is made by
//! a deterministic **extractive summariser, for the lab only**: the first sentence of each
//! evicted message (at most 25 words), the oldest lines dropped beyond an eighth of the window.
//! Relevance for the attention policy uses the hashing embedder (deterministic, no model).
//!
//! Policies: `paper` (70%/100%/50% oldest first), `lru`, `attention`, and `opt`, Belady's
//! optimal replacement (evict what is next needed furthest in the future): the bound the others
//! are compared against. Output: a markdown table (stdout and `--out DIR/policy-lab.md`), JSON,
//! and an SVG plot of hit rate against window size.

#[allow(dead_code)]
#[path = "eval/data.rs"]
mod data;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use chrono::{DateTime, Utc};
use memgpt::embed::{HashingEmbedder, cosine};
use memgpt::ids::{AgentId, MessageId};
use memgpt::message::{Message, MessageKind};
use memgpt::queue::{
    ContextUsage, EvictionPolicy, FifoQueue, PaperPolicy, Pressure, QueueManager, QueueView,
    policy_by_name,
};
use memgpt::retrieval::Bm25Index;
use memgpt::tokens::{TiktokenCounter, TokenCounter};
use serde::Serialize;
use serde_json::json;

use crate::data::Conversation;

/// Tokens standing for everything in main context outside the queue and the summary.
const FIXED_TOKENS: usize = 600;
/// Hits of the simulated `conversation_search` that count as uses.
const SEARCH_HITS: usize = 5;
/// Words kept of each evicted message by the lab's summariser.
const SUMMARY_WORDS: usize = 25;

struct Args {
    data: PathBuf,
    windows: Vec<usize>,
    seed: u64,
    out: PathBuf,
}

fn parse_args() -> Result<Args> {
    let mut args = Args {
        data: PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../shared/data/locomo/locomo5_dev.json"),
        windows: vec![1024, 2048, 4096, 8192],
        seed: 1,
        out: PathBuf::from("target/policy-lab"),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--data" => args.data = value()?.into(),
            "--window" | "--windows" => {
                args.windows = value()?
                    .split(',')
                    .map(|w| w.trim().parse().context("--window takes token counts"))
                    .collect::<Result<_>>()?
            }
            "--seed" => args.seed = value()?.parse().context("--seed takes a number")?,
            "--out" => args.out = value()?.into(),
            other => bail!(
                "unknown option `{other}`\nusage: policy_lab [--data PATH] [--window 1024,2048,...] [--seed N] [--out DIR]"
            ),
        }
    }
    if !args.data.exists() {
        bail!(
            "{} is missing: pass --data PATH (a LoCoMo-format file) or put the shared evaluation \
             data next to the project (see ../shared/data/README.md)",
            args.data.display()
        );
    }
    Ok(args)
}

/// One step of the trace.
#[derive(Clone, Copy, Debug)]
enum Event {
    /// Turn `i` (index into the conversation's turns) is said.
    Turn(usize),
    /// Question `q` is posed.
    Question(usize),
}

/// A conversation prepared for replay: its turns, questions with evidence, and the trace.
struct Replay {
    turns: Vec<(String, String, usize, Option<DateTime<Utc>>)>, // dia_id, text, session, date
    questions: Vec<(String, Vec<usize>)>,                       // text, evidence turn indexes
    trace: Vec<Event>,
    search: Bm25Index,
}

fn prepare(conversation: &Conversation, seed: u64) -> Replay {
    let mut turns = Vec::new();
    let mut session_end = Vec::new(); // (session index, index of its last turn)
    for (s, session) in conversation.sessions.iter().enumerate() {
        for t in &session.turns {
            turns.push((
                t.dia_id.clone(),
                format!("{}: {}", t.speaker, t.content()),
                s,
                session.date,
            ));
        }
        session_end.push(turns.len());
    }
    let by_id: HashMap<&str, usize> = turns
        .iter()
        .enumerate()
        .map(|(i, t)| (t.0.as_str(), i))
        .collect();
    let mut rng = fastrand::Rng::with_seed(seed);
    let sessions = conversation.sessions.len();
    let mut questions = Vec::new();
    let mut posed_after: BTreeMap<usize, Vec<usize>> = BTreeMap::new(); // session -> questions
    for q in &conversation.questions {
        let mut evidence: Vec<usize> = q
            .evidence_ids()
            .iter()
            .filter_map(|e| by_id.get(e.as_str()).copied())
            .collect();
        evidence.sort_unstable();
        evidence.dedup();
        let Some(last) = evidence.iter().map(|&i| turns[i].2).max() else {
            continue;
        };
        let session = rng.usize(last..sessions);
        posed_after
            .entry(session)
            .or_default()
            .push(questions.len());
        questions.push((q.question.clone(), evidence));
    }
    let mut trace = Vec::new();
    let mut start = 0;
    for (s, &end) in session_end.iter().enumerate() {
        trace.extend((start..end).map(Event::Turn));
        for &q in posed_after.get(&s).into_iter().flatten() {
            trace.push(Event::Question(q));
        }
        start = end;
    }
    let search = Bm25Index::new(turns.iter().map(|t| t.1.as_str()));
    Replay {
        turns,
        questions,
        trace,
        search,
    }
}

/// Belady's OPT, for the lab only: it reads the future of the reference string.
#[derive(Debug, Default)]
struct Belady {
    /// For each queued message, the trace positions at which it will be referenced.
    future: Mutex<(usize, HashMap<MessageId, Vec<usize>>)>,
    paper: PaperPolicy,
}

impl Belady {
    fn set_now(&self, now: usize) {
        if let Ok(mut f) = self.future.lock() {
            f.0 = now;
        }
    }

    fn set_future(&self, future: HashMap<MessageId, Vec<usize>>) {
        if let Ok(mut f) = self.future.lock() {
            f.1 = future;
        }
    }
}

impl EvictionPolicy for Belady {
    fn name(&self) -> &str {
        "opt"
    }

    fn pressure(&self, usage: &ContextUsage) -> Pressure {
        self.paper.pressure(usage)
    }

    fn select(&self, view: &QueueView<'_>) -> Vec<usize> {
        let Ok(f) = self.future.lock() else {
            return Vec::new();
        };
        let (now, future) = (&f.0, &f.1);
        let next_use = |id: &MessageId| {
            future
                .get(id)
                .and_then(|uses| uses.iter().find(|&&t| t > *now).copied())
                .unwrap_or(usize::MAX)
        };
        let mut order: Vec<usize> = (0..view.entries.len()).collect();
        // Furthest next use first (never used again first); ties: oldest first.
        order.sort_by(|&a, &b| {
            next_use(&view.entries[b].id)
                .cmp(&next_use(&view.entries[a].id))
                .then(a.cmp(&b))
        });
        view.take_until_freed(order, self.paper.evict_fraction)
    }
}

/// Totals for one policy at one window.
#[derive(Clone, Debug, Default, Serialize)]
struct Outcome {
    references: usize,
    hits: usize,
    in_summary: usize,
    faults: usize,
    flushes: usize,
    tokens_evicted: usize,
    summariser_input_tokens: usize,
}

impl Outcome {
    fn add(&mut self, o: &Outcome) {
        self.references += o.references;
        self.hits += o.hits;
        self.in_summary += o.in_summary;
        self.faults += o.faults;
        self.flushes += o.flushes;
        self.tokens_evicted += o.tokens_evicted;
        self.summariser_input_tokens += o.summariser_input_tokens;
    }

    fn hit_rate(&self) -> f64 {
        self.hits as f64 / self.references.max(1) as f64
    }
}

/// The lab's extractive summary: one line per evicted message, within a token budget.
struct ExtractiveSummary {
    lines: std::collections::VecDeque<(usize, String, usize)>, // turn (or usize::MAX), line, tokens
    tokens: usize,
    budget: usize,
}

impl ExtractiveSummary {
    fn add(&mut self, turn: usize, text: &str, counter: &dyn TokenCounter) {
        let sentence = text.split_inclusive(['.', '!', '?']).next().unwrap_or(text);
        let line: String = sentence
            .split_whitespace()
            .take(SUMMARY_WORDS)
            .collect::<Vec<_>>()
            .join(" ");
        let tokens = counter.count_text(&line) + 1;
        self.lines.push_back((turn, line, tokens));
        self.tokens += tokens;
        while self.tokens > self.budget {
            match self.lines.pop_front() {
                Some((_, _, t)) => self.tokens -= t,
                None => break,
            }
        }
    }

    fn holds(&self, turn: usize) -> bool {
        self.lines.iter().any(|(t, _, _)| *t == turn)
    }
}

fn run_one(
    replay: &Replay,
    policy: Arc<dyn EvictionPolicy>,
    belady: Option<&Belady>,
    window: usize,
    counter: &TiktokenCounter,
    embedder: &HashingEmbedder,
) -> Outcome {
    let agent = AgentId::new();
    let manager = QueueManager::new(policy.clone());
    let mut queue = FifoQueue::new();
    let mut turn_of: HashMap<MessageId, usize> = HashMap::new();
    let mut id_of: HashMap<usize, MessageId> = HashMap::new();
    let mut summary = ExtractiveSummary {
        lines: Default::default(),
        tokens: 0,
        budget: window / 8,
    };
    let mut out = Outcome::default();
    let mut seen = 0usize; // turns said so far
    let epoch = DateTime::<Utc>::UNIX_EPOCH;

    // OPT's reference string: when each turn is evidence of a question, in trace positions.
    let mut references: HashMap<usize, Vec<usize>> = HashMap::new();
    for (pos, event) in replay.trace.iter().enumerate() {
        if let Event::Question(q) = event {
            for &t in &replay.questions[*q].1 {
                references.entry(t).or_default().push(pos);
            }
        }
    }

    for (pos, event) in replay.trace.iter().enumerate() {
        let message = match *event {
            Event::Turn(i) => {
                seen = i + 1;
                let (_, text, _, date) = &replay.turns[i];
                let m = Message::new(
                    agent,
                    MessageKind::User,
                    text.clone(),
                    date.unwrap_or(epoch),
                );
                turn_of.insert(m.id, i);
                id_of.insert(i, m.id);
                m
            }
            Event::Question(q) => {
                let (text, evidence) = &replay.questions[q];
                // Where is each evidence turn now?
                let queued: HashSet<MessageId> = queue.ids().into_iter().collect();
                for t in evidence {
                    out.references += 1;
                    if id_of.get(t).is_some_and(|id| queued.contains(id)) {
                        out.hits += 1;
                    } else if summary.holds(*t) {
                        out.in_summary += 1;
                    } else {
                        out.faults += 1;
                    }
                }
                // The agent's search uses its top hits (among the turns said so far).
                let scores = replay.search.scores(text);
                let mut hits: Vec<usize> = (0..seen).filter(|&i| scores[i] > 0.0).collect();
                hits.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
                for i in hits.into_iter().take(SEARCH_HITS) {
                    if let Some(id) = id_of.get(&i) {
                        queue.touch(*id);
                    }
                }
                Message::new(agent, MessageKind::User, text.clone(), epoch)
            }
        };
        queue.push(Arc::new(message), counter);

        let fixed = FIXED_TOKENS + summary.tokens;
        if manager.pressure(&queue, window, fixed) != Pressure::Flush {
            continue;
        }
        if let Some(belady) = belady {
            belady.set_now(pos);
            let future = queue
                .entries()
                .filter_map(|e| {
                    let turn = turn_of.get(&e.message().id)?;
                    Some((e.message().id, references.get(turn)?.clone()))
                })
                .collect();
            belady.set_future(future);
        }
        if let Some(observation) = policy.relevance_window() {
            let n = queue.len();
            if n > observation {
                let text: Vec<String> = (n - observation..n)
                    .filter_map(|i| queue.get(i).map(|e| e.message().text.clone()))
                    .collect();
                let window_vector = embedder.vector(&text.join("\n"));
                for i in 0..n - observation {
                    if let Some(e) = queue.get(i) {
                        let v = embedder.vector(&e.message().text);
                        let r = cosine(&window_vector, &v);
                        queue.set_relevance(i, r);
                    }
                }
            }
        }
        // Protect the newest message: it is what the model must answer.
        let newest: Vec<MessageId> = queue.ids().last().copied().into_iter().collect();
        let plan = manager.plan(&queue, window, fixed, &newest);
        if plan.is_empty() {
            continue;
        }
        out.flushes += 1;
        out.tokens_evicted += plan.tokens;
        out.summariser_input_tokens += summary.tokens + plan.tokens;
        for entry in queue.remove(&plan.indices) {
            let turn = turn_of
                .get(&entry.message().id)
                .copied()
                .unwrap_or(usize::MAX);
            summary.add(turn, &entry.message().text, counter);
        }
    }
    out
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = parse_args()?;
    let started = Instant::now();
    let conversations = data::locomo(&args.data)?;
    let replays: Vec<Replay> = conversations
        .iter()
        .enumerate()
        .map(|(i, c)| prepare(c, args.seed.wrapping_add(i as u64)))
        .collect();
    let counter = TiktokenCounter::cl100k();
    let embedder = HashingEmbedder::new(256);
    let names = ["paper", "lru", "attention", "opt"];
    let mut results: BTreeMap<(usize, usize), Outcome> = BTreeMap::new(); // (window, policy)
    for &window in &args.windows {
        for (p, name) in names.iter().enumerate() {
            let mut total = Outcome::default();
            for replay in &replays {
                let belady = Arc::new(Belady::default());
                let policy: Arc<dyn EvictionPolicy> = match *name {
                    "opt" => belady.clone(),
                    registered => policy_by_name(registered)?,
                };
                let oracle = (*name == "opt").then_some(belady.as_ref());
                total.add(&run_one(
                    replay, policy, oracle, window, &counter, &embedder,
                ));
            }
            results.insert((window, p), total);
        }
    }

    let mut rows = String::from(
        "| window | policy | references | hit rate | in summary | faults | flushes | tokens evicted | summariser input tokens |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    let mut json_rows = Vec::new();
    for (&(window, p), o) in &results {
        let name = if names[p] == "opt" {
            "OPT (bound)"
        } else {
            names[p]
        };
        rows.push_str(&format!(
            "| {window} | {name} | {} | {:.3} | {} | {} | {} | {} | {} |\n",
            o.references,
            o.hit_rate(),
            o.in_summary,
            o.faults,
            o.flushes,
            o.tokens_evicted,
            o.summariser_input_tokens
        ));
        json_rows.push(
            json!({ "window": window, "policy": names[p], "hit_rate": o.hit_rate(), "outcome": o }),
        );
    }
    let questions: usize = replays.iter().map(|r| r.questions.len()).sum();
    let markdown = format!(
        "## Policy lab: {} conversations, {} questions with evidence (seed {})\n\n{rows}",
        replays.len(),
        questions,
        args.seed
    );
    std::fs::create_dir_all(&args.out)?;
    std::fs::write(args.out.join("policy-lab.md"), &markdown)?;
    std::fs::write(
        args.out.join("policy-lab.json"),
        serde_json::to_string_pretty(
            &json!({ "seed": args.seed, "windows": args.windows, "rows": json_rows }),
        )?,
    )?;
    let svg = plot(&args.windows, &names, &results);
    std::fs::write(args.out.join("hit-rate.svg"), svg)?;
    println!("{markdown}");
    eprintln!(
        "wrote {}/policy-lab.{{md,json}} and hit-rate.svg in {:.1} s",
        args.out.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// A line chart of hit rate against window size (log scale), one line per policy.
fn plot(windows: &[usize], names: &[&str], results: &BTreeMap<(usize, usize), Outcome>) -> String {
    let (w, h, left, bottom, top, right) = (640.0, 400.0, 60.0, 50.0, 30.0, 130.0);
    let plot_w = w - left - right;
    let plot_h = h - top - bottom;
    let mut sorted: Vec<usize> = windows.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let (lo, hi) = (
        (*sorted.first().unwrap_or(&1) as f64).ln(),
        (*sorted.last().unwrap_or(&2) as f64).ln(),
    );
    let x = |window: usize| {
        if hi > lo {
            left + ((window as f64).ln() - lo) / (hi - lo) * plot_w
        } else {
            left + plot_w / 2.0
        }
    };
    let y = |rate: f64| top + (1.0 - rate) * plot_h;
    let colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#7f7f7f"];
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{}\" y=\"18\" text-anchor=\"middle\" font-size=\"14\">Evidence hit rate vs context window (LoCoMo)</text>\n",
        left + plot_w / 2.0
    );
    for tick in 0..=5 {
        let rate = tick as f64 / 5.0;
        svg.push_str(&format!(
            "<line x1=\"{left}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{rate:.1}</text>\n",
            left + plot_w,
            left - 6.0,
            y(rate) + 4.0,
            y = y(rate)
        ));
    }
    for &window in &sorted {
        svg.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{window}</text>\n",
            x(window),
            top + plot_h + 18.0
        ));
    }
    svg.push_str(&format!(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">window (tokens, log scale)</text>\n<text x=\"16\" y=\"{}\" transform=\"rotate(-90 16 {})\" text-anchor=\"middle\">hit rate</text>\n",
        left + plot_w / 2.0,
        h - 10.0,
        top + plot_h / 2.0,
        top + plot_h / 2.0
    ));
    for (p, name) in names.iter().enumerate() {
        let points: Vec<String> = sorted
            .iter()
            .filter_map(|&window| {
                let o = results.get(&(window, p))?;
                Some(format!("{:.1},{:.1}", x(window), y(o.hit_rate())))
            })
            .collect();
        let color = colors[p % colors.len()];
        let dash = if *name == "opt" {
            " stroke-dasharray=\"6 4\""
        } else {
            ""
        };
        svg.push_str(&format!(
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\"{dash} points=\"{}\"/>\n",
            points.join(" ")
        ));
        for point in &points {
            let (px, py) = point.split_once(',').unwrap_or(("0", "0"));
            svg.push_str(&format!(
                "<circle cx=\"{px}\" cy=\"{py}\" r=\"3\" fill=\"{color}\"/>\n"
            ));
        }
        let label = if *name == "opt" { "OPT (bound)" } else { name };
        svg.push_str(&format!(
            "<line x1=\"{}\" x2=\"{}\" y1=\"{ly}\" y2=\"{ly}\" stroke=\"{color}\" stroke-width=\"2\"{dash}/><text x=\"{}\" y=\"{}\">{label}</text>\n",
            w - right + 12.0,
            w - right + 36.0,
            w - right + 42.0,
            top + 24.0 + 20.0 * p as f64 + 4.0,
            ly = top + 24.0 + 20.0 * p as f64
        ));
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use memgpt::queue::EntryView;

    use super::*;

    fn view_entries(n: usize) -> Vec<EntryView> {
        (0..n)
            .map(|i| EntryView {
                id: MessageId::new(),
                kind: MessageKind::User,
                tokens: 10,
                created_at: DateTime::<Utc>::UNIX_EPOCH,
                last_used: i as u64,
                uses: 1,
                attention: 0.0,
                relevance: None,
                pinned: false,
            })
            .collect()
    }

    #[test]
    fn belady_evicts_what_is_needed_furthest_in_the_future() {
        let entries = view_entries(4);
        let belady = Belady::default();
        belady.set_now(10);
        // 0: needed at 11; 1: never again; 2: needed at 50; 3: needed at 5 (past) then 20.
        belady.set_future(HashMap::from([
            (entries[0].id, vec![11]),
            (entries[2].id, vec![50]),
            (entries[3].id, vec![5, 20]),
        ]));
        let usage = ContextUsage {
            window: 40,
            fixed_tokens: 0,
            queue_tokens: 40,
            queue_messages: 4,
        };
        let view = QueueView {
            entries: &entries,
            usage,
        };
        assert_eq!(belady.select(&view), vec![1, 2], "never, then furthest");
    }

    #[test]
    fn the_lab_summary_keeps_first_sentences_within_its_budget() {
        let counter = TiktokenCounter::cl100k();
        let mut s = ExtractiveSummary {
            lines: Default::default(),
            tokens: 0,
            budget: 20,
        };
        s.add(1, "Ann: I adopted a puppy. It is called Rex.", &counter);
        assert!(s.holds(1));
        assert_eq!(s.lines[0].1, "Ann: I adopted a puppy.");
        for t in 2..10 {
            s.add(t, "Bob: something else entirely happened today.", &counter);
        }
        assert!(s.tokens <= 20);
        assert!(!s.holds(1), "the oldest lines go first");
        assert!(s.holds(9));
    }

    #[test]
    fn questions_come_after_their_evidence() {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../shared/data/locomo/locomo5_dev.json");
        if !path.exists() {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI=true but {} is missing: the evaluation data must be there in CI",
                path.display()
            );
            eprintln!(
                "SKIPPED: {} is missing (see ../shared/data/README.md)",
                path.display()
            );
            return;
        }
        let conversations = data::locomo(&path).unwrap();
        let replay = prepare(&conversations[0], 7);
        let mut said = HashSet::new();
        let mut posed = 0;
        for event in &replay.trace {
            match *event {
                Event::Turn(i) => {
                    said.insert(i);
                }
                Event::Question(q) => {
                    posed += 1;
                    assert!(replay.questions[q].1.iter().all(|t| said.contains(t)));
                }
            }
        }
        assert_eq!(
            posed,
            replay.questions.len(),
            "every question is posed once"
        );
        let again = prepare(&conversations[0], 7);
        assert_eq!(
            format!("{:?}", again.trace),
            format!("{:?}", replay.trace),
            "seeded"
        );
    }
}
