//! The policy lab: page-replacement policies measured on real long-term conversations, with
//! no LLM, over several seeds with confidence intervals, between two bounds on the optimum.
//!
//! ```text
//! cargo run --release --example policy_lab [-- --data PATH --window 1024,2048,4096,8192
//!     --seed 1 --seeds 10 --policy paper,lru,attention,salience,clairvoyant --out DIR]
//! cargo run --release --features local --example policy_lab -- --policy attention,attention-model
//!     --attention target/attention-smollm2.json [--model FILE.gguf]
//! ```
//!
//! Each LoCoMo conversation is replayed turn by turn into a main context of `--window` tokens
//! (a fixed 600 tokens stand for the system instructions, functions and working context), its
//! FIFO queue managed by the real [`QueueManager`](memgpt::queue::QueueManager) under each
//! policy. LoCoMo asks its questions after the whole conversation; the lab turns them into a
//! reference string, like an OS page trace: each question is posed at the end of a session drawn
//! at random (the seed) between the session of its last evidence turn and the last session, so
//! writes and references interleave. A question enters the context as a user turn (what the
//! attention policy can observe), and, as the agent's `conversation_search` would, a BM25 search
//! of the question over the turns so far *uses* its top five hits that are in context (what LRU
//! and the heavy-hitter score see).
//!
//! At each question the lab checks where each evidence turn is: in main context (a hit), only
//! in the recursive summary, or only in external storage (a fault). A miss costs what it costs
//! an agent: the search's results that are not in context re-enter it (each as a message of its
//! own, reload tokens) and may push other messages out (flushes). The summary is made by a
//! deterministic **extractive summariser, for the lab only**: the first sentence of each evicted
//! message (at most 25 words), the oldest lines dropped beyond an eighth of the window.
//! Relevance for the attention policy uses the hashing embedder (deterministic, no model), and
//! its attention term is zero: the lab runs no model. `attention-model` is the same policy fed
//! the attention a real model paid the turns (`attend.rs`): measured once with the local model
//! (`--model`, by default SmolLM2 from `$MEMGPT_TEST_MODELS` or the model cache; a build with
//! the `local` feature) through a sliding window over each conversation, saved to `--attention`
//! and read from there on later runs.
//!
//! Policies: any registered one by name (`paper`, `lru`, `attention`, `salience`, ...), and
//! `clairvoyant`: Belady's furthest-next-use rule reading the future, for the lab only. With
//! messages of different sizes flushed half a queue at a time it is not optimal, so it is
//! reported as what it is, a plan that exists: a lower bound on the optimum. Every run also reports upper bounds on
//! the hits (a Lagrangian relaxation, `bound.rs`): one for any policy, and a tighter one for
//! policies that free at least half the queue per flush, so the rows bracket the optimum.
//!
//! Every figure is a mean over `--seeds` seeds (question placements) with a 95% t interval; a
//! policy is called better than `paper` only when the interval of the paired per-seed difference
//! excludes zero. Output: a markdown table (stdout and `DIR/policy-lab.md`), JSON with every
//! seed's totals, and an SVG plot of hit rate against window size with the intervals.

#[allow(dead_code)]
#[path = "../eval/data.rs"]
mod data;

mod attend;
mod bound;
mod plot;
mod replay;
mod stats;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use memgpt::embed::HashingEmbedder;
use memgpt::queue::{EvictionPolicy, policy_by_name, policy_names};
use memgpt::tokens::TiktokenCounter;
use serde_json::json;

use crate::attend::{Measured, Shares};
use crate::bound::{BoundInput, upper_bound};
use crate::plot::Series;
use crate::replay::{Clairvoyant, Outcome, Replay, prepare, run_one};
use crate::stats::Interval;

/// The clairvoyant policy's name on the command line.
const CLAIRVOYANT: &str = "clairvoyant";
/// The `attention` policy fed a model's measured attention ([`attend`]), on the command line
/// (added to the policies whenever `--attention` is given).
const ATTENTION_MODEL: &str = "attention-model";
/// The sliding window through which the model reads each conversation, in tokens.
const ATTENTION_WINDOW: usize = 2048;

struct Args {
    data: PathBuf,
    windows: Vec<usize>,
    seed: u64,
    seeds: u64,
    policies: Vec<String>,
    out: PathBuf,
    /// Measured attention for `attention-model`: read, or measured with `model` and written.
    attention: Option<PathBuf>,
    model: Option<PathBuf>,
}

const USAGE: &str = "usage: policy_lab [--data PATH] [--window 1024,2048,...] [--seed FIRST] \
                     [--seeds COUNT] [--policy paper,lru,attention,salience,clairvoyant,\
                     attention-model] [--out DIR] [--attention FILE.json [--model FILE.gguf]]";

fn parse_args() -> Result<Args> {
    let mut args = Args {
        data: PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../shared/data/locomo/locomo5_dev.json"),
        windows: vec![1024, 2048, 4096, 8192],
        seed: 1,
        seeds: 10,
        policies: ["paper", "lru", "attention", "salience", CLAIRVOYANT]
            .map(String::from)
            .to_vec(),
        out: PathBuf::from("target/policy-lab"),
        attention: None,
        model: None,
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
            "--seeds" => args.seeds = value()?.parse().context("--seeds takes a count")?,
            "--policy" | "--policies" => {
                args.policies = value()?
                    .split(',')
                    .map(|p| p.trim().to_owned())
                    .filter(|p| !p.is_empty())
                    .collect()
            }
            "--out" => args.out = value()?.into(),
            "--attention" => args.attention = Some(value()?.into()),
            "--model" => args.model = Some(value()?.into()),
            "--help" | "-h" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => bail!("unknown option `{other}`\n{USAGE}"),
        }
    }
    if args.seeds == 0 || args.windows.is_empty() || args.policies.is_empty() {
        bail!("--seeds, --window and --policy need at least one value\n{USAGE}");
    }
    // Measured attention is there to be used.
    if args.attention.is_some() && !args.policies.iter().any(|p| p == ATTENTION_MODEL) {
        args.policies.push(ATTENTION_MODEL.into());
    }
    for name in &args.policies {
        if name == ATTENTION_MODEL {
            if args.attention.is_none() {
                bail!("--policy {ATTENTION_MODEL} needs --attention FILE.json\n{USAGE}");
            }
        } else if name != CLAIRVOYANT {
            policy_by_name(name).with_context(|| {
                format!(
                    "--policy {name}: the registered policies are {} (and the lab's \
                     `{CLAIRVOYANT}`)",
                    policy_names().join(", ")
                )
            })?;
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

/// A policy by name: a registered one, the lab's clairvoyant one (told the future), or
/// `attention` fed a model's measured attention.
struct LabPolicy {
    policy: Arc<dyn EvictionPolicy>,
    clairvoyant: Option<Arc<Clairvoyant>>,
    measured_attention: bool,
}

impl LabPolicy {
    fn new(name: &str) -> Result<Self> {
        Ok(match name {
            CLAIRVOYANT => {
                let c = Arc::new(Clairvoyant::default());
                Self {
                    policy: c.clone(),
                    clairvoyant: Some(c),
                    measured_attention: false,
                }
            }
            ATTENTION_MODEL => Self {
                policy: policy_by_name("attention")?,
                clairvoyant: None,
                measured_attention: true,
            },
            registered => Self {
                policy: policy_by_name(registered)?,
                clairvoyant: None,
                measured_attention: false,
            },
        })
    }

    /// Replays one conversation; `attention` is what the model paid its turns, used only by
    /// the policy that is fed it.
    fn run(
        &self,
        replay: &Replay,
        attention: Option<&[Shares]>,
        window: usize,
        counter: &TiktokenCounter,
        embedder: &HashingEmbedder,
    ) -> Outcome {
        run_one(
            replay,
            self.policy.clone(),
            self.clairvoyant.as_deref(),
            attention.filter(|_| self.measured_attention),
            window,
            counter,
            embedder,
        )
    }
}

/// The measured attention `args` asks for (`--attention`, which [`parse_args`] requires for
/// `attention-model` and adds that row for): read from the file, or measured with `--model` and
/// written there first.
fn measured_attention(
    args: &Args,
    conversations: &[data::Conversation],
) -> Result<Option<Measured>> {
    let Some(file) = &args.attention else {
        return Ok(None);
    };
    if !file.exists() {
        let Some(model) = args.model.clone().or_else(default_model) else {
            bail!(
                "{} does not exist, and there is no model to measure it with: pass --model \
                 FILE.gguf, or fetch SmolLM2 into the model cache (`cargo run --example models \
                 --features models -- pull smollm2-135m-instruct`)",
                file.display()
            );
        };
        measure_attention(&model, conversations)?.save(file)?;
    } else if let Some(model) = &args.model {
        eprintln!(
            "warning: {} exists, so --model {} is not used: delete the file to measure again",
            file.display(),
            model.display()
        );
    }
    let measured = Measured::load(file)?;
    if measured.window != ATTENTION_WINDOW {
        bail!(
            "{} was read through a {}-token window, the lab's is {ATTENTION_WINDOW}: measure it \
             again",
            file.display(),
            measured.window
        );
    }
    for c in conversations {
        let turns: usize = c.sessions.iter().map(|s| s.turns.len()).sum();
        let got = measured.conversations.get(&c.sample_id).map(Vec::len);
        if got != Some(turns) {
            bail!(
                "{} holds no attention for {} ({turns} turns): measure it again for this data",
                file.display(),
                c.sample_id
            );
        }
    }
    Ok(Some(measured))
}

/// SmolLM2-135M-Instruct's weights: under `$MEMGPT_TEST_MODELS` (what CI fetches) or in the
/// model cache (`$MEMGPT_HOME/models`).
fn default_model() -> Option<PathBuf> {
    use memgpt_providers::models::{ModelCache, SMOLLM2_135M_INSTRUCT};
    let file = "model.gguf";
    std::env::var_os("MEMGPT_TEST_MODELS")
        .map(|root| {
            PathBuf::from(root)
                .join(SMOLLM2_135M_INSTRUCT.name)
                .join(file)
        })
        .filter(|path| path.exists())
        .or_else(|| {
            Some(
                ModelCache::from_env()
                    .find(&SMOLLM2_135M_INSTRUCT)?
                    .join(file),
            )
        })
}

#[cfg(feature = "local")]
fn measure_attention(
    model: &std::path::Path,
    conversations: &[data::Conversation],
) -> Result<Measured> {
    let turns = conversations
        .iter()
        .map(|c| {
            let texts = c
                .sessions
                .iter()
                .flat_map(|s| &s.turns)
                .map(crate::replay::turn_text)
                .collect();
            (c.sample_id.clone(), texts)
        })
        .collect();
    attend::measure(model, &turns, ATTENTION_WINDOW, &TiktokenCounter::cl100k())
}

#[cfg(not(feature = "local"))]
fn measure_attention(_: &std::path::Path, _: &[data::Conversation]) -> Result<Measured> {
    bail!("measuring attention needs the local model: build with `--features local`")
}

/// The seed of conversation `index` under run seed `seed`: distinct for every pair, so
/// neighbouring run seeds do not share placements.
fn conversation_seed(seed: u64, index: usize) -> u64 {
    seed.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(index as u64)
}

/// One seed's results at one window.
#[derive(Default)]
struct SeedResults {
    /// Per policy (in `--policy` order), totals over the conversations.
    outcomes: Vec<Outcome>,
    /// The upper bounds on hits (one per [`BOUNDS`]), summed over the conversations.
    bound_hits: [usize; 2],
    /// References (the same for every policy).
    references: usize,
    /// Events that found a queue over its capacity, over every policy: the bound assumes none.
    overfull_events: usize,
}

/// The two upper bounds: (label, short label, whether the flush-retention constraint applies).
/// The second holds only for policies that free at least half the queue per flush (`paper`,
/// `lru`, the clairvoyant plan; not `attention`, whose observation window is never evicted, nor
/// `salience`), the first for any policy that flushes at the window.
const BOUNDS: [(&str, &str, bool); 2] = [
    (
        "upper bound: any policy (Lagrangian relaxation, capacity only)",
        "upper bound (any)",
        false,
    ),
    (
        "upper bound: policies freeing half the queue per flush (capacity and retention)",
        "upper bound (half per flush)",
        true,
    ),
];

fn label(name: &str) -> String {
    match name {
        CLAIRVOYANT => "clairvoyant (Belady-style; a lower bound on the optimum)".into(),
        ATTENTION_MODEL => format!(
            "attention, fed the model's attention (read through a {ATTENTION_WINDOW}-token \
             sliding window)"
        ),
        _ => name.into(),
    }
}

fn main() -> Result<()> {
    let args = parse_args()?;
    let started = Instant::now();
    let conversations = data::locomo(&args.data)?;
    let attention = measured_attention(&args, &conversations)?;
    // What the model paid each conversation's turns (the same for every seed and window).
    let paid: Vec<Option<&[Shares]>> = conversations
        .iter()
        .map(|c| {
            let measured = attention.as_ref()?;
            measured.conversations.get(&c.sample_id).map(Vec::as_slice)
        })
        .collect();
    let counter = TiktokenCounter::cl100k();
    let embedder = HashingEmbedder::new(256);
    let seeds: Vec<u64> = (0..args.seeds).map(|i| args.seed + i).collect();
    // Turn sizes do not depend on where the questions go: counted on the first seed's replays.
    let mut tokens: Option<Vec<Vec<usize>>> = None;

    // (window, seed index) -> results
    let mut results: BTreeMap<(usize, usize), SeedResults> = BTreeMap::new();
    let mut questions = 0;
    for (s, &seed) in seeds.iter().enumerate() {
        let replays: Vec<Replay> = conversations
            .iter()
            .enumerate()
            .map(|(i, c)| prepare(c, conversation_seed(seed, i)))
            .collect();
        questions = replays.iter().map(|r| r.questions.len()).sum();
        let tokens =
            tokens.get_or_insert_with(|| replays.iter().map(|r| r.turn_tokens(&counter)).collect());
        for &window in &args.windows {
            let mut seed_results = SeedResults::default();
            let mut clairvoyant_hits = vec![0usize; replays.len()];
            for name in &args.policies {
                let mut total = Outcome::default();
                for (c, replay) in replays.iter().enumerate() {
                    let outcome =
                        LabPolicy::new(name)?.run(replay, paid[c], window, &counter, &embedder);
                    if name == CLAIRVOYANT {
                        clairvoyant_hits[c] = outcome.hits;
                    }
                    total.add(&outcome);
                }
                if total.overfull_events > 0 {
                    eprintln!(
                        "warning: {name} at {window} tokens, seed {seed}: {} events found the \
                         queue over the window; the upper bound assumes it never is",
                        total.overfull_events
                    );
                }
                seed_results.references = total.references;
                seed_results.overfull_events += total.overfull_events;
                seed_results.outcomes.push(total);
            }
            for (c, replay) in replays.iter().enumerate() {
                let input = replay.bound_input(&tokens[c], window, &counter);
                for (b, (_, _, retention)) in BOUNDS.iter().enumerate() {
                    // Without the flush regime a flush may keep everything that fits.
                    let input = BoundInput {
                        retained: if *retention {
                            input.retained
                        } else {
                            input.capacity
                        },
                        ..input.clone()
                    };
                    let bound = upper_bound(&input, clairvoyant_hits[c] as f64);
                    seed_results.bound_hits[b] += bound.hits;
                }
            }
            results.insert((window, s), seed_results);
        }
    }

    let report = Report::new(&args, &seeds, &results);
    let markdown = format!(
        "## Policy lab: {} conversations, {} questions with evidence, {} seeds ({}..={})\n\n{}",
        conversations.len(),
        questions,
        seeds.len(),
        seeds[0],
        seeds[seeds.len() - 1],
        report.markdown()
    );
    std::fs::create_dir_all(&args.out)?;
    std::fs::write(args.out.join("policy-lab.md"), &markdown)?;
    std::fs::write(
        args.out.join("policy-lab.json"),
        serde_json::to_string_pretty(&report.json(&args, &seeds, &results))?,
    )?;
    std::fs::write(args.out.join("hit-rate.svg"), plot::svg(&report.series()))?;
    println!("{markdown}");
    eprintln!(
        "wrote {}/policy-lab.{{md,json}} and hit-rate.svg in {:.1} s",
        args.out.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The intervals the outputs are made of.
struct Report {
    windows: Vec<usize>,
    policies: Vec<String>,
    /// (window, policy) -> hit rate, paired difference with `paper` (when it ran), and the
    /// per-question costs: in summary, faults, misses, reload tokens, flushes.
    rows: BTreeMap<(usize, usize), Row>,
    /// (window, bound) -> the upper bound's hit rate, or why there is none.
    bounds: BTreeMap<(usize, usize), Result<Interval, String>>,
    /// window -> `attention-model`'s hit rate minus `attention`'s, paired per seed (when both
    /// ran): what the model's attention changes.
    fed_versus_blind: BTreeMap<usize, Interval>,
}

struct Row {
    hit_rate: Interval,
    versus_paper: Option<Interval>,
    in_summary: Interval,
    faults: Interval,
    misses: Interval,
    reload_tokens: Interval,
    flushes: Interval,
}

impl Report {
    fn new(args: &Args, seeds: &[u64], results: &BTreeMap<(usize, usize), SeedResults>) -> Self {
        let paper = args.policies.iter().position(|p| p == "paper");
        let position = |name: &str| args.policies.iter().position(|p| p == name);
        let twins = position(ATTENTION_MODEL).zip(position("attention"));
        let mut rows = BTreeMap::new();
        let mut bounds = BTreeMap::new();
        let mut fed_versus_blind = BTreeMap::new();
        for &window in &args.windows {
            let per_seed: Vec<&SeedResults> = (0..seeds.len())
                .filter_map(|s| results.get(&(window, s)))
                .collect();
            for p in 0..args.policies.len() {
                let of = |f: &dyn Fn(&Outcome) -> f64| {
                    Interval::of(
                        &per_seed
                            .iter()
                            .map(|r| f(&r.outcomes[p]))
                            .collect::<Vec<_>>(),
                    )
                };
                let versus_paper = paper.filter(|&q| q != p).map(|q| {
                    Interval::of(
                        &per_seed
                            .iter()
                            .map(|r| r.outcomes[p].hit_rate() - r.outcomes[q].hit_rate())
                            .collect::<Vec<_>>(),
                    )
                });
                rows.insert(
                    (window, p),
                    Row {
                        hit_rate: of(&|o| o.hit_rate()),
                        versus_paper,
                        in_summary: of(&|o| o.per_question(o.in_summary)),
                        faults: of(&|o| o.per_question(o.faults)),
                        misses: of(&|o| o.per_question(o.misses)),
                        reload_tokens: of(&|o| o.per_question(o.reload_tokens)),
                        flushes: of(&|o| o.per_question(o.flushes)),
                    },
                );
            }
            let overfull: usize = per_seed.iter().map(|r| r.overfull_events).sum();
            for b in 0..BOUNDS.len() {
                let bound = if overfull > 0 {
                    Err(format!(
                        "none: {overfull} events found a queue over its capacity (a question \
                         and its reloaded results outgrow this window), which the relaxation \
                         assumes never happens"
                    ))
                } else {
                    Ok(Interval::of(
                        &per_seed
                            .iter()
                            .map(|r| r.bound_hits[b] as f64 / r.references.max(1) as f64)
                            .collect::<Vec<_>>(),
                    ))
                };
                bounds.insert((window, b), bound);
            }
            if let Some((fed, blind)) = twins {
                let differences: Vec<f64> = per_seed
                    .iter()
                    .map(|r| r.outcomes[fed].hit_rate() - r.outcomes[blind].hit_rate())
                    .collect();
                fed_versus_blind.insert(window, Interval::of(&differences));
            }
        }
        Self {
            windows: args.windows.clone(),
            policies: args.policies.clone(),
            rows,
            bounds,
            fed_versus_blind,
        }
    }

    fn markdown(&self) -> String {
        let mut out = String::from(
            "| window | policy | hit rate (95% CI) | vs paper: difference (95% CI) | verdict | in summary / q | faults / q | misses / q | reload tokens / q | flushes / q |\n|---|---|---|---|---|---|---|---|---|---|\n",
        );
        for &window in &self.windows {
            for (p, name) in self.policies.iter().enumerate() {
                let Some(row) = self.rows.get(&(window, p)) else {
                    continue;
                };
                let (versus, verdict) = match &row.versus_paper {
                    Some(d) => (d.show(3), d.verdict()),
                    None => ("".into(), ""),
                };
                out.push_str(&format!(
                    "| {window} | {} | {} | {versus} | {verdict} | {} | {} | {} | {} | {} |\n",
                    label(name),
                    row.hit_rate.show(3),
                    pm(&row.in_summary, 2),
                    pm(&row.faults, 2),
                    pm(&row.misses, 2),
                    pm(&row.reload_tokens, 0),
                    pm(&row.flushes, 2),
                ));
            }
            for (b, (name, _, _)) in BOUNDS.iter().enumerate() {
                let Some(bound) = self.bounds.get(&(window, b)) else {
                    continue;
                };
                let shown = match bound {
                    Ok(interval) => interval.show(3),
                    Err(why) => why.clone(),
                };
                out.push_str(&format!("| {window} | {name} | {shown} | | | | | | | |\n"));
            }
        }
        if !self.fed_versus_blind.is_empty() {
            out.push_str(
                "\n`attention-model` against `attention` (the same policy without the model's \
                 attention), paired per seed:\n\n| window | difference in hit rate (95% CI) | \
                 verdict |\n|---|---|---|\n",
            );
            for (window, d) in &self.fed_versus_blind {
                out.push_str(&format!("| {window} | {} | {} |\n", d.show(3), d.verdict()));
            }
        }
        out
    }

    fn json(
        &self,
        args: &Args,
        seeds: &[u64],
        results: &BTreeMap<(usize, usize), SeedResults>,
    ) -> serde_json::Value {
        let mut rows = Vec::new();
        for (&(window, p), row) in &self.rows {
            let per_seed: Vec<&Outcome> = (0..seeds.len())
                .filter_map(|s| results.get(&(window, s)).map(|r| &r.outcomes[p]))
                .collect();
            rows.push(json!({
                "window": window,
                "policy": self.policies[p],
                "hit_rate": row.hit_rate,
                "versus_paper": row.versus_paper,
                "per_question": {
                    "in_summary": row.in_summary,
                    "faults": row.faults,
                    "misses": row.misses,
                    "reload_tokens": row.reload_tokens,
                    "flushes": row.flushes,
                },
                "per_seed": per_seed,
            }));
        }
        let bounds: Vec<_> = self
            .bounds
            .iter()
            .map(|(&(window, b), bound)| {
                let per_seed: Vec<_> = (0..seeds.len())
                    .filter_map(|s| results.get(&(window, s)))
                    .map(|r| json!({ "hits": r.bound_hits[b], "references": r.references }))
                    .collect();
                let kind = BOUNDS[b].0;
                match bound {
                    Ok(interval) => json!({
                        "window": window, "bound": kind, "hit_rate": interval, "per_seed": per_seed
                    }),
                    Err(why) => {
                        json!({ "window": window, "bound": kind, "hit_rate": null, "why_none": why })
                    }
                }
            })
            .collect();
        json!({
            "data": args.data.file_name().map(|n| n.to_string_lossy().into_owned()),
            "seeds": seeds,
            "windows": args.windows,
            "policies": args.policies,
            "rows": rows,
            "upper_bound": bounds,
        })
    }

    fn series(&self) -> Vec<Series> {
        let mut series: Vec<Series> = self
            .policies
            .iter()
            .enumerate()
            .map(|(p, name)| Series {
                label: if name == CLAIRVOYANT {
                    "clairvoyant".into()
                } else {
                    name.clone()
                },
                points: self
                    .windows
                    .iter()
                    .filter_map(|&w| Some((w, self.rows.get(&(w, p))?.hit_rate)))
                    .collect(),
                dashed: name == CLAIRVOYANT,
            })
            .collect();
        for (b, (_, short, _)) in BOUNDS.iter().enumerate() {
            series.push(Series {
                label: (*short).into(),
                points: self
                    .bounds
                    .iter()
                    .filter(|((_, kind), _)| *kind == b)
                    .filter_map(|(&(w, _), bound)| Some((w, *bound.as_ref().ok()?)))
                    .collect(),
                dashed: true,
            });
        }
        series
    }
}

/// `1.23 ± 0.04`.
fn pm(interval: &Interval, decimals: usize) -> String {
    format!(
        "{:.d$} ± {:.d$}",
        interval.mean,
        (interval.hi - interval.mean).max(0.0),
        d = decimals
    )
}

#[cfg(test)]
mod tests;
