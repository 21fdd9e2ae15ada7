//! One conversation replayed into a main context under one policy: the trace of turns and
//! questions, the clairvoyant policy, the lab's summariser, and what a miss costs.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use memgpt::embed::{HashingEmbedder, cosine};
use memgpt::ids::{AgentId, MessageId};
use memgpt::message::{Message, MessageKind};
use memgpt::queue::{
    ContextUsage, EvictionPolicy, FifoQueue, PaperPolicy, Pressure, QueueManager, QueueView,
};
use memgpt::retrieval::Bm25Index;
use memgpt::tokens::{TiktokenCounter, TokenCounter};
use serde::Serialize;

use crate::attend::Shares;
use crate::bound::{BoundInput, TurnEvents};
use crate::data::Conversation;

/// Tokens standing for everything in main context outside the queue and the summary.
pub const FIXED_TOKENS: usize = 600;
/// Hits of the simulated `conversation_search`: used (touched) when in context, reloaded after
/// a miss when not.
pub const SEARCH_HITS: usize = 5;
/// Words kept of each evicted message by the lab's summariser.
const SUMMARY_WORDS: usize = 25;

/// One step of the trace.
#[derive(Clone, Copy, Debug)]
pub enum Event {
    /// Turn `i` (index into the conversation's turns) is said.
    Turn(usize),
    /// Question `q` is posed.
    Question(usize),
}

/// A question of the trace.
pub struct Question {
    /// What is asked.
    pub text: String,
    /// Its evidence turns (indexes into the turns).
    pub evidence: Vec<usize>,
    /// The top [`SEARCH_HITS`] turns a BM25 search of the question finds among the turns said
    /// before it is posed, best first.
    pub search: Vec<usize>,
}

/// A conversation prepared for replay: its turns, questions and the trace.
pub struct Replay {
    /// Each turn's text (`speaker: words`) and date.
    pub turns: Vec<(String, Option<DateTime<Utc>>)>,
    /// The questions with evidence.
    pub questions: Vec<Question>,
    /// Turns and questions in the order the lab replays them.
    pub trace: Vec<Event>,
}

/// A turn as the lab's context holds it: `speaker: words`.
pub fn turn_text(turn: &crate::data::Turn) -> String {
    format!("{}: {}", turn.speaker, turn.content())
}

/// Builds the trace: each question is posed at the end of a session drawn (with `seed`)
/// between the session of its last evidence turn and the last session.
pub fn prepare(conversation: &Conversation, seed: u64) -> Replay {
    let mut turns = Vec::new();
    let mut ids = Vec::new();
    let mut session_of = Vec::new();
    let mut session_end = Vec::new(); // index of each session's last turn + 1
    for (s, session) in conversation.sessions.iter().enumerate() {
        for t in &session.turns {
            turns.push((turn_text(t), session.date));
            ids.push(t.dia_id.clone());
            session_of.push(s);
        }
        session_end.push(turns.len());
    }
    let by_id: HashMap<&str, usize> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| (id.as_str(), i))
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
        let Some(last) = evidence.iter().map(|&i| session_of[i]).max() else {
            continue;
        };
        let session = rng.usize(last..sessions);
        posed_after
            .entry(session)
            .or_default()
            .push(questions.len());
        questions.push(Question {
            text: q.question.clone(),
            evidence,
            search: Vec::new(),
        });
    }
    let index = Bm25Index::new(turns.iter().map(|t| t.0.as_str()));
    let mut trace = Vec::new();
    let mut start = 0;
    for (s, &end) in session_end.iter().enumerate() {
        trace.extend((start..end).map(Event::Turn));
        for &q in posed_after.get(&s).into_iter().flatten() {
            // Searched over the turns said so far (every session up to this one).
            let scores = index.scores(&questions[q].text);
            let mut hits: Vec<usize> = (0..end).filter(|&i| scores[i] > 0.0).collect();
            hits.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
            hits.truncate(SEARCH_HITS);
            questions[q].search = hits;
            trace.push(Event::Question(q));
        }
        start = end;
    }
    Replay {
        turns,
        questions,
        trace,
    }
}

impl Replay {
    /// Each turn's token count as the queue counts it.
    pub fn turn_tokens(&self, counter: &TiktokenCounter) -> Vec<usize> {
        let agent = AgentId::new();
        self.turns
            .iter()
            .map(|(text, date)| {
                let m = turn_message(agent, text, *date);
                counter.count_message(&m.to_chat())
            })
            .collect()
    }

    /// The relaxation's view of the trace at `window` tokens (see [`crate::bound`]): check
    /// positions, when the capacity filled up before each, the retention limit of a flush,
    /// and, per evidence turn, when it is said, referenced, and returned by a search.
    pub fn bound_input(
        &self,
        tokens: &[usize],
        window: usize,
        counter: &TiktokenCounter,
    ) -> BoundInput {
        let capacity = window.saturating_sub(FIXED_TOKENS);
        let agent = AgentId::new();
        let question_tokens: Vec<usize> = self
            .questions
            .iter()
            .map(|q| counter.count_message(&question_message(agent, &q.text).to_chat()))
            .collect();
        let mut checks = Vec::new();
        let mut said = vec![0; self.turns.len()];
        let mut references: HashMap<usize, Vec<usize>> = HashMap::new();
        let mut reloads: HashMap<usize, Vec<usize>> = HashMap::new();
        // Tokens that certainly arrive before each position (turns and questions; reloads
        // only add to them), and the most one event can add.
        let mut arrived = Vec::with_capacity(self.trace.len() + 1);
        arrived.push(0usize);
        let mut batch = 0;
        for (pos, event) in self.trace.iter().enumerate() {
            let adds = match *event {
                Event::Turn(i) => {
                    said[i] = pos;
                    batch = batch.max(tokens[i]);
                    tokens[i]
                }
                Event::Question(q) => {
                    checks.push(pos);
                    for &t in &self.questions[q].evidence {
                        references.entry(t).or_default().push(pos);
                    }
                    for &t in &self.questions[q].search {
                        reloads.entry(t).or_default().push(pos);
                    }
                    let reloaded: usize = self.questions[q].search.iter().map(|&t| tokens[t]).sum();
                    batch = batch.max(question_tokens[q] + reloaded);
                    question_tokens[q]
                }
            };
            arrived.push(arrived[pos] + adds);
        }
        // The latest `a` with arrivals strictly between `a` and the check >= capacity:
        // arrived[check] - arrived[a + 1] >= capacity.
        let filled_since = checks
            .iter()
            .map(|&p| {
                let limit = arrived[p].checked_sub(capacity)?;
                let j = arrived.partition_point(|&x| x <= limit); // first index above the limit
                (j >= 2).then(|| j - 2) // a + 1 = j - 1
            })
            .collect();
        let fraction = PaperPolicy::default().evict_fraction;
        let retained = batch.max(((1.0 - fraction) * (capacity + batch) as f64).floor() as usize);
        let mut turns: Vec<TurnEvents> = references
            .into_iter()
            .map(|(t, references)| TurnEvents {
                tokens: tokens[t],
                said: said[t],
                references,
                reloads: reloads.remove(&t).unwrap_or_default(),
            })
            .collect();
        turns.sort_by_key(|t| t.said);
        BoundInput {
            checks,
            filled_since,
            turns,
            capacity,
            retained,
        }
    }
}

fn question_message(agent: AgentId, text: &str) -> Message {
    Message::new(agent, MessageKind::User, text, DateTime::<Utc>::UNIX_EPOCH)
}

fn turn_message(agent: AgentId, text: &str, date: Option<DateTime<Utc>>) -> Message {
    Message::new(
        agent,
        MessageKind::User,
        text,
        date.unwrap_or(DateTime::<Utc>::UNIX_EPOCH),
    )
}

/// The clairvoyant policy, for the lab only: it reads the future of the reference string and
/// evicts what is next needed furthest away (Belady's rule). Optimal for equal pages evicted one
/// at a time, not for messages of different sizes flushed half a queue at once: a lower bound
/// on the optimum, not the optimum.
#[derive(Debug, Default)]
pub struct Clairvoyant {
    /// The trace position now, and for each queued message the positions at which it will be
    /// referenced.
    future: Mutex<(usize, HashMap<MessageId, Vec<usize>>)>,
    paper: PaperPolicy,
}

impl Clairvoyant {
    pub fn set_now(&self, now: usize) {
        if let Ok(mut f) = self.future.lock() {
            f.0 = now;
        }
    }

    pub fn set_future(&self, future: HashMap<MessageId, Vec<usize>>) {
        if let Ok(mut f) = self.future.lock() {
            f.1 = future;
        }
    }
}

impl EvictionPolicy for Clairvoyant {
    fn name(&self) -> &str {
        "clairvoyant"
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

/// Totals for one policy on one or more conversations.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Outcome {
    /// Questions posed.
    pub questions: usize,
    /// Evidence turns asked for (one per evidence turn per question).
    pub references: usize,
    /// References found in main context.
    pub hits: usize,
    /// References found only in the lab's summary.
    pub in_summary: usize,
    /// References found in neither (page faults).
    pub faults: usize,
    /// Questions with at least one reference not in main context: the agent searches and the
    /// results it lacks re-enter main context.
    pub misses: usize,
    /// Messages reloaded by those searches.
    pub reloaded_messages: usize,
    /// Their tokens.
    pub reload_tokens: usize,
    /// Flushes.
    pub flushes: usize,
    /// Tokens evicted by the flushes.
    pub tokens_evicted: usize,
    /// Tokens the summariser would read (the summary and the evicted messages, per flush).
    pub summariser_input_tokens: usize,
    /// Events that found the queue at or over the capacity (window minus fixed tokens): an
    /// earlier flush could not bring it under. The upper bound assumes none.
    pub overfull_events: usize,
}

impl Outcome {
    pub fn add(&mut self, o: &Outcome) {
        self.questions += o.questions;
        self.references += o.references;
        self.hits += o.hits;
        self.in_summary += o.in_summary;
        self.faults += o.faults;
        self.misses += o.misses;
        self.reloaded_messages += o.reloaded_messages;
        self.reload_tokens += o.reload_tokens;
        self.flushes += o.flushes;
        self.tokens_evicted += o.tokens_evicted;
        self.summariser_input_tokens += o.summariser_input_tokens;
        self.overfull_events += o.overfull_events;
    }

    pub fn hit_rate(&self) -> f64 {
        self.hits as f64 / self.references.max(1) as f64
    }

    /// `value` per question.
    pub fn per_question(&self, value: usize) -> f64 {
        value as f64 / self.questions.max(1) as f64
    }
}

/// The lab's extractive summary: one line per evicted message, within a token budget.
pub struct ExtractiveSummary {
    pub lines: VecDeque<(usize, String, usize)>, // turn (or usize::MAX), line, tokens
    pub tokens: usize,
    pub budget: usize,
}

impl ExtractiveSummary {
    pub fn new(budget: usize) -> Self {
        Self {
            lines: VecDeque::new(),
            tokens: 0,
            budget,
        }
    }

    pub fn add(&mut self, turn: usize, text: &str, counter: &dyn TokenCounter) {
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

    pub fn holds(&self, turn: usize) -> bool {
        self.lines.iter().any(|(t, _, _)| *t == turn)
    }
}

/// Replays `replay` into a `window`-token main context under `policy` (`clairvoyant`, when
/// given, is that policy and is told the future before each flush). With `attention` (per turn
/// `j`, the shares `(i, w)` a model gave earlier turns `i` while reading `j`; see
/// [`crate::attend`]), once turn `j` is said and any flush it caused is done, its shares are
/// added to the queued copies of those turns.
pub fn run_one(
    replay: &Replay,
    policy: Arc<dyn EvictionPolicy>,
    clairvoyant: Option<&Clairvoyant>,
    attention: Option<&[Shares]>,
    window: usize,
    counter: &TiktokenCounter,
    embedder: &HashingEmbedder,
) -> Outcome {
    let agent = AgentId::new();
    let manager = QueueManager::new(policy.clone());
    let mut queue = FifoQueue::with_policy(policy.clone());
    let mut turn_of: HashMap<MessageId, usize> = HashMap::new();
    let mut summary = ExtractiveSummary::new(window / 8);
    let mut out = Outcome::default();
    let capacity = window.saturating_sub(FIXED_TOKENS);

    // The clairvoyant's reference string: when each turn is evidence, in trace positions.
    let mut references: HashMap<usize, Vec<usize>> = HashMap::new();
    for (pos, event) in replay.trace.iter().enumerate() {
        if let Event::Question(q) = event {
            for &t in &replay.questions[*q].evidence {
                references.entry(t).or_default().push(pos);
            }
        }
    }

    // The turn the model last read: its attention arrives after the flush that made room for
    // it, as an agent's provider reports it with the reply to the step that flushed.
    let mut read: Option<usize> = None;
    for (pos, event) in replay.trace.iter().enumerate() {
        if let Some(shares) = read.take().and_then(|j| attention?.get(j)) {
            let share: HashMap<usize, f32> = shares.iter().copied().collect();
            let weights: Vec<f32> = queue
                .entries()
                .map(|e| {
                    turn_of
                        .get(&e.message().id)
                        .and_then(|t| share.get(t))
                        .copied()
                        .unwrap_or(0.0)
                })
                .collect();
            queue.add_attention(&weights);
        }
        // Every event ends below the flush line, so the queue holds less than the capacity.
        if queue.tokens() >= capacity {
            out.overfull_events += 1;
        }
        let mut arrived = Vec::new();
        match *event {
            Event::Turn(i) => {
                read = Some(i);
                let (text, date) = &replay.turns[i];
                let m = turn_message(agent, text, *date);
                turn_of.insert(m.id, i);
                arrived.push(m);
            }
            Event::Question(q) => {
                let question = &replay.questions[q];
                out.questions += 1;
                // Where is each evidence turn now?
                let present: HashSet<usize> = queue
                    .entries()
                    .filter_map(|e| turn_of.get(&e.message().id).copied())
                    .collect();
                let mut missed = false;
                for t in &question.evidence {
                    out.references += 1;
                    if present.contains(t) {
                        out.hits += 1;
                    } else {
                        missed = true;
                        if summary.holds(*t) {
                            out.in_summary += 1;
                        } else {
                            out.faults += 1;
                        }
                    }
                }
                // The agent's search uses the hits it finds in context and, after a miss,
                // reloads the ones it does not (each as a message of its own).
                let queued: HashMap<usize, MessageId> = queue
                    .entries()
                    .filter_map(|e| Some((*turn_of.get(&e.message().id)?, e.message().id)))
                    .collect();
                if missed {
                    out.misses += 1;
                }
                for &t in &question.search {
                    match queued.get(&t) {
                        Some(id) => queue.touch(*id),
                        None if missed => {
                            let (text, date) = &replay.turns[t];
                            let m = turn_message(agent, text, *date);
                            turn_of.insert(m.id, t);
                            out.reloaded_messages += 1;
                            out.reload_tokens += counter.count_message(&m.to_chat());
                            arrived.push(m);
                        }
                        None => {}
                    }
                }
                // The question itself, newest: what the model must answer.
                arrived.push(question_message(agent, &question.text));
            }
        }
        let protected: Vec<MessageId> = arrived.iter().map(|m| m.id).collect();
        for m in arrived {
            queue.push(Arc::new(m), counter);
        }

        let fixed = FIXED_TOKENS + summary.tokens;
        if manager.pressure(&queue, window, fixed) != Pressure::Flush {
            continue;
        }
        if let Some(clairvoyant) = clairvoyant {
            clairvoyant.set_now(pos);
            let future = queue
                .entries()
                .filter_map(|e| {
                    let turn = turn_of.get(&e.message().id)?;
                    Some((e.message().id, references.get(turn)?.clone()))
                })
                .collect();
            clairvoyant.set_future(future);
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
        // What just arrived stays: the model needs it for this turn.
        let plan = manager.plan(&queue, window, fixed, &protected);
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
