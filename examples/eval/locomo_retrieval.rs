//! Offline: evidence recall@k of the shipped `conversation_search`, with no LLM, on two
//! families of conversations, each next to the simplest baseline.
//!
//! What an agent gets, measured through the path it uses: each conversation is imported into a
//! fresh agent's recall storage (by default the embedded stack: SQLite with the tantivy and
//! usearch indexes in a temporary directory; `--store memory|sqlite|sqlite-tantivy-usearch|postgres`
//! measures another composition, see [`crate::stores`]; and the local embedder), then each question goes to
//! `conversation_search` exactly as an LLM would send it (its text as `query`, pages 0 and 1 of
//! the default 5 results) through [`Agent::call`], and the listed messages are mapped back to
//! the data's message ids by their timestamps (unique per message).
//!
//! The families:
//! * **LoCoMo** (`--data FILE`, default `../shared/data/locomo/locomo5_dev.json`): two people
//!   chatting over weeks; the first speaker's turns are user messages, the second's the agent's,
//!   each named by its speaker, a minute apart within a session.
//! * **BEAM** (`--beam DIR`: a folder of BEAM chats such as `chats/500K`, or one chat folder): a
//!   user and an assistant over several sessions (BEAM's batches), unnamed, a minute apart
//!   within a session dated by its time anchor. Evidence is each probing question's
//!   `source_chat_ids`; `abstention` questions have none and are left out.
//!
//! For each question with evidence: the fraction of its evidence among the first 5 (page 0) and
//! 10 (pages 0 and 1) results, averaged over questions, per category and overall. Beside it, the
//! **floor**: plain BM25 over single messages (each message's own words, the shared analyzer,
//! k1 1.2, b 0.75) on the same questions, recall@10. Evidence ids that name no message are
//! dropped; questions left with none are skipped (and counted). Nothing here reads answers or
//! evidence before scoring.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use chrono::{DateTime, Duration, Utc};
use memgpt::Agent;
use memgpt::backend::testing::ScriptedProvider;
use memgpt::message::{Message, MessageKind};
use memgpt::retrieval::{Bm25Index, document_terms, query_terms};
use memgpt::time::format_time;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::args::Args;
use crate::data::{self, Conversation, category_name};
use crate::report::{Results, mean, progress, table};

/// The two cut-offs reported: one page and two pages of results.
pub const KS: [usize; 2] = [5, 10];

/// One question's recall at each of [`KS`], and the floor's at 10.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RecallResult {
    pub category: String,
    pub recall: Vec<f64>,
    /// Plain BM25 over single messages, recall@10.
    pub floor: f64,
}

/// The fraction of `evidence` among `retrieved`.
pub fn recall(evidence: &[String], retrieved: &[&str]) -> f64 {
    if evidence.is_empty() {
        return 0.0;
    }
    let found = evidence
        .iter()
        .filter(|e| retrieved.contains(&e.as_str()))
        .count();
    found as f64 / evidence.len() as f64
}

/// The LoCoMo data file.
pub fn data_path(args: &Args) -> Result<PathBuf> {
    args.data_file("locomo/locomo5_dev.json")
}

/// The turns of a conversation as recall messages of `agent`, each with its dialog id: the
/// first speaker's as user messages, the second's as the agent's, named by speaker, one minute
/// apart within a session (sessions without a date follow the previous one by a day).
pub fn history(agent: &Agent, conversation: &Conversation) -> Vec<(String, Message)> {
    let mut out = Vec::new();
    let mut fallback = chrono::DateTime::<chrono::Utc>::UNIX_EPOCH;
    for session in &conversation.sessions {
        let start = session.date.unwrap_or(fallback);
        for (i, turn) in session.turns.iter().enumerate() {
            let kind = if turn.speaker == conversation.speakers[0] {
                MessageKind::User
            } else {
                MessageKind::Assistant
            };
            let at = start + chrono::Duration::minutes(i as i64);
            let mut message = Message::new(agent.id(), kind, turn.content(), at);
            message.name = Some(turn.speaker.clone());
            out.push((turn.dia_id.clone(), message));
            fallback = at + chrono::Duration::days(1);
        }
    }
    out
}

/// The timestamps `conversation_search` listed, in order (one per result line).
pub fn listed_times(output: &str) -> Vec<&str> {
    output
        .lines()
        .filter_map(|line| {
            let (number, rest) = line.split_once(". [")?;
            number.trim().parse::<usize>().ok()?;
            Some(rest.split_once(']')?.0)
        })
        .collect()
}

/// One conversation as the harness imports it.
#[derive(Clone, Debug)]
pub struct Corpus {
    /// The conversation's id in its data (`conv-26`, `500K/3`).
    pub id: String,
    /// The agent's name (LoCoMo: the second speaker).
    pub agent_name: String,
    pub messages: Vec<Said>,
    pub probes: Vec<Probe>,
}

/// One message of a [`Corpus`], with its id in the data.
#[derive(Clone, Debug)]
pub struct Said {
    pub id: String,
    pub kind: MessageKind,
    pub name: Option<String>,
    pub content: String,
    pub at: DateTime<Utc>,
}

/// One question with its evidence (message ids).
#[derive(Clone, Debug)]
pub struct Probe {
    pub category: String,
    pub question: String,
    pub evidence: Vec<String>,
}

/// A family of conversations: its name in reports and results files, and its conversations.
#[derive(Clone, Debug)]
pub struct Family {
    /// `locomo` or `beam`.
    pub name: &'static str,
    /// Where the data came from, as reports show it.
    pub data: String,
    /// The files whose content identifies the data (for resumable results).
    pub files: Vec<PathBuf>,
    pub corpora: Vec<Corpus>,
}

/// A LoCoMo file as a family.
pub fn locomo_family(path: &Path) -> Result<Family> {
    let conversations = data::locomo(path)?;
    let corpora = conversations
        .iter()
        .map(|c| {
            let mut messages = Vec::new();
            let mut fallback = DateTime::<Utc>::UNIX_EPOCH;
            for session in &c.sessions {
                let start = session.date.unwrap_or(fallback);
                for (i, turn) in session.turns.iter().enumerate() {
                    let at = start + Duration::minutes(i as i64);
                    messages.push(Said {
                        id: turn.dia_id.clone(),
                        kind: if turn.speaker == c.speakers[0] {
                            MessageKind::User
                        } else {
                            MessageKind::Assistant
                        },
                        name: Some(turn.speaker.clone()),
                        content: turn.content(),
                        at,
                    });
                    fallback = at + Duration::days(1);
                }
            }
            Corpus {
                id: c.sample_id.clone(),
                agent_name: c.speakers[1].clone(),
                messages,
                probes: c
                    .questions
                    .iter()
                    .map(|q| Probe {
                        category: format!("{} {}", q.category, category_name(q.category)),
                        question: q.question.clone(),
                        evidence: q.evidence_ids(),
                    })
                    .collect(),
            }
        })
        .collect();
    Ok(Family {
        name: "locomo",
        data: crate::args::shown(path),
        files: vec![path.to_owned()],
        corpora,
    })
}

/// BEAM chats as a family: each batch a session starting at its time anchor (or, without one
/// or when it would not follow the previous session, two hours after it), messages a minute
/// apart.
pub fn beam_family(dir: &Path) -> Result<Family> {
    let chats = data::beam(dir)?;
    let mut files = Vec::new();
    let corpora = chats
        .iter()
        .map(|chat| {
            let mut messages: Vec<Said> = Vec::new();
            for session in &chat.sessions {
                let after_last = messages.last().map(|m| m.at + Duration::hours(2));
                let start = match (session.date, after_last) {
                    (Some(date), Some(after)) if date < after => after,
                    (Some(date), _) => date,
                    (None, Some(after)) => after,
                    (None, None) => DateTime::<Utc>::UNIX_EPOCH,
                };
                for (i, m) in session.messages.iter().enumerate() {
                    messages.push(Said {
                        id: m.id.clone(),
                        kind: if m.from_user {
                            MessageKind::User
                        } else {
                            MessageKind::Assistant
                        },
                        name: None,
                        content: m.content.clone(),
                        at: start + Duration::minutes(i as i64),
                    });
                }
            }
            Corpus {
                id: chat.id.clone(),
                agent_name: "assistant".to_owned(),
                messages,
                probes: chat
                    .questions
                    .iter()
                    .map(|q| Probe {
                        category: q.kind.clone(),
                        question: q.question.clone(),
                        evidence: q.evidence.clone(),
                    })
                    .collect(),
            }
        })
        .collect();
    for chat in &chats {
        let folder = dir.join(chat.id.rsplit('/').next().unwrap_or_default());
        let folder = if folder.is_dir() {
            folder
        } else {
            dir.to_owned()
        };
        files.push(folder.join("chat.json"));
        files.push(folder.join("probing_questions/probing_questions.json"));
    }
    Ok(Family {
        name: "beam",
        data: crate::args::shown(dir),
        files,
        corpora,
    })
}

/// The families a run measures: LoCoMo (unless only `--beam` is given) and BEAM (`--beam`).
pub fn families(args: &Args) -> Result<Vec<Family>> {
    let mut out = Vec::new();
    if args.beam.is_none() || args.data.is_some() {
        out.push(locomo_family(&data_path(args)?)?);
    }
    if let Some(dir) = &args.beam {
        out.push(beam_family(dir)?);
    }
    Ok(out)
}

/// Runs the harness: one report per family.
pub async fn run(args: &Args) -> Result<String> {
    let embedder = crate::embed::embedder(args)?;
    let embedder: Arc<dyn memgpt::embed::Embedder> = Arc::new(
        crate::embed::CachedEmbedder::new(embedder).persistent(&args.out.join("embeddings"))?,
    );
    let mut reports = Vec::new();
    for family in families(args)? {
        reports.push(run_family(args, &family, embedder.clone()).await?);
    }
    Ok(reports.join("\n\n"))
}

async fn run_family(
    args: &Args,
    family: &Family,
    embedder: Arc<dyn memgpt::embed::Embedder>,
) -> Result<String> {
    let model = embedder.model().to_owned();
    let fingerprint = args.fingerprint_files(
        &family.files,
        json!({
            "family": family.name,
            "embedder": model,
            "analyzer": memgpt::backend::ANALYZER_VERSION,
            "ranking": memgpt::retrieval::RecallRanking::default(),
            "store": args.store.name(),
        }),
    )?;
    // The shipped embedded stack keeps its old file name; other stores add theirs.
    let name = match args.store {
        crate::stores::EvalStore::SqliteTantivyUsearch => format!("{}-retrieval", family.name),
        store => format!("{}-retrieval-{}", family.name, store.name()),
    };
    let results = Results::<RecallResult>::open(&args.out, &name, args.fresh, fingerprint)?;
    let corpora: Vec<&Corpus> = family
        .corpora
        .iter()
        .take(args.limit.unwrap_or(usize::MAX))
        .collect();
    let mut skipped = 0usize;
    let total: usize = corpora.iter().map(|c| c.probes.len()).sum();
    let bar = progress(total, "questions");
    for corpus in corpora {
        let known: HashSet<&str> = corpus.messages.iter().map(|m| m.id.as_str()).collect();
        let mut todo = Vec::new();
        for (n, probe) in corpus.probes.iter().enumerate() {
            let evidence: Vec<String> = probe
                .evidence
                .iter()
                .filter(|e| known.contains(e.as_str()))
                .cloned()
                .collect();
            if evidence.is_empty() {
                skipped += 1;
                bar.inc(1);
                continue;
            }
            let id = format!("{}-q{n:04}", corpus.id);
            if results.contains(&id) {
                bar.inc(1);
                continue;
            }
            todo.push((id, probe, evidence));
        }
        if todo.is_empty() {
            continue;
        }
        let floor = Floor::new(corpus);
        // The store under measurement, empty (SQLite in a directory of its own).
        let (storage, _dir) = args.store.open().await?;
        let mut agent = Agent::builder()
            .provider(Arc::new(ScriptedProvider::new()))
            .storage(storage)
            .embedder(embedder.clone())
            .name(corpus.agent_name.clone())
            .build()
            .await?;
        let mut by_time: HashMap<String, String> = HashMap::new();
        let mut history = Vec::with_capacity(corpus.messages.len());
        for said in &corpus.messages {
            let mut message = Message::new(agent.id(), said.kind, said.content.clone(), said.at);
            message.name = said.name.clone();
            if by_time
                .insert(format_time(message.created_at), said.id.clone())
                .is_some()
            {
                bail!(
                    "conversation {}: two messages share the time {}",
                    corpus.id,
                    format_time(message.created_at)
                );
            }
            history.push(message);
        }
        agent
            .import_history(history)
            .await
            .with_context(|| format!("importing conversation {}", corpus.id))?;
        let embedded = agent.reindex().await?;
        if embedded > 0 {
            eprintln!("note: {embedded} messages were embedded after the import");
        }
        for (id, probe, evidence) in todo {
            let mut listed: Vec<String> = Vec::new();
            for page in 0..2 {
                let record = agent
                    .call(
                        "conversation_search",
                        json!({ "query": probe.question, "page": page, "request_heartbeat": true }),
                    )
                    .await?;
                if !record.ok {
                    bail!("conversation_search failed: {}", record.output);
                }
                for time in listed_times(&record.output) {
                    let said = by_time.get(time).with_context(|| {
                        format!("a listed time {time} is no message's: {}", record.output)
                    })?;
                    listed.push(said.clone());
                }
            }
            let ids: Vec<&str> = listed.iter().map(String::as_str).collect();
            let at: Vec<f64> = KS
                .iter()
                .map(|&k| recall(&evidence, &ids[..k.min(ids.len())]))
                .collect();
            let floor_ids = floor.top(&probe.question, 10);
            results.record(
                &id,
                RecallResult {
                    category: probe.category.clone(),
                    recall: at,
                    floor: recall(&evidence, &floor_ids),
                },
            )?;
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    summarize(family, &results, &model, args.store.describe(), skipped)
}

/// The simplest baseline: BM25 over each message's own words.
struct Floor<'a> {
    index: Bm25Index,
    messages: &'a [Said],
}

impl<'a> Floor<'a> {
    fn new(corpus: &'a Corpus) -> Self {
        Self {
            index: Bm25Index::from_terms(
                corpus.messages.iter().map(|m| document_terms(&m.content)),
            ),
            messages: &corpus.messages,
        }
    }

    /// The ids of the `k` best messages (ties: newest first, as the shipped search breaks them).
    fn top(&self, question: &str, k: usize) -> Vec<&'a str> {
        let scores = self.index.scores_for_terms(&query_terms(question));
        let mut ranked: Vec<usize> = (0..scores.len()).filter(|&i| scores[i] > 0.0).collect();
        ranked.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(b.cmp(&a)));
        ranked
            .into_iter()
            .take(k)
            .map(|i| self.messages[i].id.as_str())
            .collect()
    }
}

fn summarize(
    family: &Family,
    results: &Results<RecallResult>,
    model: &str,
    store: &str,
    skipped: usize,
) -> Result<String> {
    let all: Vec<RecallResult> = results.all().into_iter().map(|(_, r)| r).collect();
    let mut categories: Vec<&str> = all.iter().map(|r| r.category.as_str()).collect();
    categories.sort();
    categories.dedup();
    let groups: Vec<(String, Vec<&RecallResult>)> = categories
        .iter()
        .map(|&c| {
            (
                c.to_owned(),
                all.iter().filter(|r| r.category == c).collect(),
            )
        })
        .chain([("all".to_owned(), all.iter().collect())])
        .collect();
    let at =
        |rs: &[&RecallResult], k: usize| mean(rs.iter().filter_map(|r| r.recall.get(k)).copied());
    let floor = |rs: &[&RecallResult]| mean(rs.iter().map(|r| r.floor));
    let mut rows = Vec::new();
    let mut json_rows = Vec::new();
    let mut below = Vec::new();
    for (name, rs) in &groups {
        let mut row = vec![name.clone(), rs.len().to_string()];
        let mut entry = serde_json::Map::new();
        entry.insert("category".into(), json!(name));
        entry.insert("questions".into(), json!(rs.len()));
        let base = floor(rs);
        row.push(format!("{base:.3}"));
        entry.insert("floor_recall@10".into(), json!(base));
        for (i, k) in KS.iter().enumerate() {
            let value = at(rs, i);
            row.push(format!("{value:.3}"));
            entry.insert(format!("recall@{k}"), json!(value));
        }
        let shipped = at(rs, 1);
        row.push(format!("{:+.3}", shipped - base));
        if shipped < base {
            below.push(name.clone());
        }
        rows.push(row);
        json_rows.push(serde_json::Value::Object(entry));
    }
    let overall = at(&all.iter().collect::<Vec<_>>(), 1);
    let by_category: BTreeMap<String, f64> = groups
        .iter()
        .map(|(name, rs)| (name.clone(), at(rs, 1)))
        .collect();
    let verdict = if below.is_empty() {
        "conversation_search is above the floor in every category.".to_owned()
    } else {
        format!("BELOW THE FLOOR in: {}.", below.join(", "))
    };
    let markdown = format!(
        "## {} evidence recall of conversation_search\n\n{}; store: {store}; embeddings: \
         {model}; {skipped} questions without usable evidence skipped. k counts messages: @5 is \
         page 0, @10 pages 0 and 1. floor: plain BM25 over single messages, @10.\n\n{}\n{verdict}\n\
         {}: overall conversation_search recall@10 = {overall:.3}",
        match family.name {
            "beam" => "BEAM",
            _ => "LoCoMo",
        },
        family.data,
        table(
            &[
                "category",
                "questions",
                "floor @10",
                "@5",
                "@10",
                "vs floor"
            ],
            &rows
        ),
        family.name,
    );
    results.write_summary(
        markdown,
        &json!({ "family": family.name, "data": family.data, "store": store, "embedder": model,
                 "skipped": skipped, "rows": json_rows, "recall_at_10_by_category": by_category,
                 "below_floor": below, "overall_recall_at_10": overall }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recall_counts_the_fraction_found() {
        let evidence = vec!["D1:1".to_owned(), "D2:2".to_owned()];
        assert_eq!(recall(&evidence, &["D2:2", "D9:9"]), 0.5);
        assert_eq!(recall(&evidence, &["D1:1", "D2:2"]), 1.0);
        assert_eq!(recall(&evidence, &[]), 0.0);
        assert_eq!(recall(&[], &["D1:1"]), 0.0);
    }

    #[test]
    fn listed_times_are_read_from_result_lines() {
        let output = "(note)\nShowing results 1-2 of 7 (page 0 of 0-3):\n\
                      1. [2023-05-08T13:56:00Z] Ann: I adopted a puppy. 2. [not a line]\n\
                      2. [2023-05-08T13:57:00Z] Bob: Congratulations!\nMore results: call again with page=1.";
        assert_eq!(
            listed_times(output),
            ["2023-05-08T13:56:00Z", "2023-05-08T13:57:00Z"]
        );
    }

    #[test]
    fn the_floor_is_bm25_over_single_messages() {
        let at = DateTime::<Utc>::UNIX_EPOCH;
        let said = |id: &str, content: &str| Said {
            id: id.to_owned(),
            kind: MessageKind::User,
            name: None,
            content: content.to_owned(),
            at,
        };
        let corpus = Corpus {
            id: "c".into(),
            agent_name: "a".into(),
            messages: vec![
                said("0", "I deploy on Fly.io"),
                said("1", "the weather is nice"),
                said("2", "deploying again, on Fly.io of course, Fly.io!"),
            ],
            probes: vec![],
        };
        let floor = Floor::new(&corpus);
        assert_eq!(floor.top("Where do I deploy? fly.io", 10), ["2", "0"]);
        assert_eq!(
            floor.top("where do I deploy", 1),
            ["0"],
            "the shorter message"
        );
        assert!(floor.top("zebra", 10).is_empty());
    }
}
