//! Offline: evidence recall@k of the shipped `conversation_search` on LoCoMo, with no LLM.
//!
//! What an agent gets, measured through the path it uses: each conversation is imported into a
//! fresh agent's recall storage (the embedded stack: SQLite with the tantivy and usearch indexes
//! in a temporary directory, and the local MiniLM embedder), the first speaker's turns as user
//! messages and the second's as the agent's, each named by its speaker, a minute apart within a
//! session. Each question then goes to `conversation_search` exactly as an LLM would send it
//! (its text as `query`, pages 0 and 1 of the default 5 results) through [`Agent::call`], and
//! the listed messages are mapped back to dialog ids by their timestamps (unique per turn).
//!
//! For each question with evidence: the fraction of its evidence dialog ids among the first 5
//! (page 0) and 10 (pages 0 and 1) results, averaged over questions, overall and per category.
//! Evidence ids that name no turn of the conversation are dropped; questions left with none are
//! skipped (and counted). Nothing here reads answers or evidence before scoring.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use memgpt::Agent;
use memgpt::backends::{RecallIndex, SqliteOptions, SqliteStore, VectorIndex};
use memgpt::message::{Message, MessageKind};
use memgpt::store::Storage;
use memgpt::testing::ScriptedProvider;
use memgpt::time::format_time;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::args::Args;
use crate::data::{self, Conversation, category_name};
use crate::report::{Results, mean, progress, table};

/// The two cut-offs reported: one page and two pages of results.
pub const KS: [usize; 2] = [5, 10];

/// One question's recall at each of [`KS`].
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RecallResult {
    pub category: u8,
    pub recall: Vec<f64>,
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

/// Runs the harness.
pub async fn run(args: &Args) -> Result<String> {
    let path = data_path(args)?;
    let conversations = data::locomo(&path)?;
    let embedder = crate::embed::embedder(args)?;
    let model = embedder.model().to_owned();
    let fingerprint = args.fingerprint(
        &path,
        json!({
            "embedder": model,
            "analyzer": memgpt::retrieval::ANALYZER_VERSION,
            "ranking": memgpt::retrieval::RecallRanking::default(),
        }),
    )?;
    let results =
        Results::<RecallResult>::open(&args.out, "locomo-retrieval", args.fresh, fingerprint)?;
    let mut remaining = args.limit.unwrap_or(usize::MAX);
    let mut skipped = 0usize;
    let mut store_name = String::new();
    let total: usize = conversations.iter().map(|c| c.questions.len()).sum();
    let bar = progress(total.min(remaining), "questions");
    for conversation in &conversations {
        if remaining == 0 {
            break;
        }
        let known: std::collections::HashSet<&str> = conversation
            .sessions
            .iter()
            .flat_map(|s| s.turns.iter().map(|t| t.dia_id.as_str()))
            .collect();
        let mut todo = Vec::new();
        for (n, q) in conversation.questions.iter().enumerate() {
            if remaining == 0 {
                break;
            }
            remaining -= 1;
            let evidence: Vec<String> = q
                .evidence_ids()
                .into_iter()
                .filter(|e| known.contains(e.as_str()))
                .collect();
            if evidence.is_empty() {
                skipped += 1;
                bar.inc(1);
                continue;
            }
            let id = format!("{}-q{n:04}", conversation.sample_id);
            if results.contains(&id) {
                bar.inc(1);
                continue;
            }
            todo.push((id, q, evidence));
        }
        if todo.is_empty() {
            continue;
        }
        // The shipped embedded stack (what `sqlite://DIR` opens), in a directory of its own.
        let dir = tempfile::tempdir()?;
        let options = SqliteOptions::recommended(dir.path());
        store_name = describe(&options);
        let storage = Storage::from_store(Arc::new(SqliteStore::open(options).await?));
        let mut agent = Agent::builder()
            .provider(Arc::new(ScriptedProvider::new()))
            .storage(storage)
            .embedder(Arc::new(crate::embed::CachedEmbedder::new(
                embedder.clone(),
            )))
            .name(conversation.speakers[1].clone())
            .build()
            .await?;
        let history = history(&agent, conversation);
        let mut by_time: HashMap<String, String> = HashMap::new();
        for (dia, message) in &history {
            if by_time
                .insert(format_time(message.created_at), dia.clone())
                .is_some()
            {
                bail!(
                    "conversation {}: two turns share the time {}",
                    conversation.sample_id,
                    format_time(message.created_at)
                );
            }
        }
        agent
            .import_history(history.into_iter().map(|(_, m)| m).collect())
            .await
            .with_context(|| format!("importing conversation {}", conversation.sample_id))?;
        let embedded = agent.reindex().await?;
        if embedded > 0 {
            eprintln!("note: {embedded} messages were embedded after the import");
        }
        for (id, q, evidence) in todo {
            let mut listed: Vec<String> = Vec::new();
            for page in 0..2 {
                let record = agent
                    .call(
                        "conversation_search",
                        json!({ "query": q.question, "page": page, "request_heartbeat": true }),
                    )
                    .await?;
                if !record.ok {
                    bail!("conversation_search failed: {}", record.output);
                }
                for time in listed_times(&record.output) {
                    let dia = by_time.get(time).with_context(|| {
                        format!("a listed time {time} is no turn's: {}", record.output)
                    })?;
                    listed.push(dia.clone());
                }
            }
            let ids: Vec<&str> = listed.iter().map(String::as_str).collect();
            let at: Vec<f64> = KS
                .iter()
                .map(|&k| recall(&evidence, &ids[..k.min(ids.len())]))
                .collect();
            results.record(
                &id,
                RecallResult {
                    category: q.category,
                    recall: at,
                },
            )?;
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    summarize(
        &results,
        &model,
        &store_name,
        skipped,
        crate::args::shown(&path),
    )
}

/// The store, as the report names it.
fn describe(options: &SqliteOptions) -> String {
    let recall = match options.recall {
        RecallIndex::Fts5 => "FTS5",
        _ => "tantivy",
    };
    let vectors = match options.vectors {
        VectorIndex::Exact => "exact vectors",
        _ => "usearch",
    };
    format!("SQLite + {recall} + {vectors}")
}

fn summarize(
    results: &Results<RecallResult>,
    model: &str,
    store: &str,
    skipped: usize,
    data: String,
) -> Result<String> {
    let all: Vec<RecallResult> = results.all().into_iter().map(|(_, r)| r).collect();
    let mut categories: Vec<u8> = all.iter().map(|r| r.category).collect();
    categories.sort();
    categories.dedup();
    let groups: Vec<(String, Vec<&RecallResult>)> = categories
        .iter()
        .map(|&c| {
            (
                format!("{c} {}", category_name(c)),
                all.iter().filter(|r| r.category == c).collect(),
            )
        })
        .chain([("all".to_owned(), all.iter().collect())])
        .collect();
    let at =
        |rs: &[&RecallResult], k: usize| mean(rs.iter().filter_map(|r| r.recall.get(k)).copied());
    let mut rows = Vec::new();
    let mut json_rows = Vec::new();
    for (name, rs) in &groups {
        let mut row = vec![name.clone(), rs.len().to_string()];
        let mut entry = serde_json::Map::new();
        entry.insert("category".into(), json!(name));
        entry.insert("questions".into(), json!(rs.len()));
        for (i, k) in KS.iter().enumerate() {
            let value = at(rs, i);
            row.push(format!("{value:.3}"));
            entry.insert(format!("recall@{k}"), json!(value));
        }
        rows.push(row);
        json_rows.push(serde_json::Value::Object(entry));
    }
    let overall = at(&all.iter().collect::<Vec<_>>(), 1);
    let by_category: BTreeMap<String, f64> = groups
        .iter()
        .map(|(name, rs)| (name.clone(), at(rs, 1)))
        .collect();
    let markdown = format!(
        "## LoCoMo evidence recall of conversation_search\n\n{data}; store: {store}; embeddings: \
         {model}; {skipped} questions without usable evidence skipped. k counts messages: @5 is \
         page 0, @10 pages 0 and 1.\n\n{}\noverall conversation_search recall@10 = {overall:.3}",
        table(&["category", "questions", "@5", "@10"], &rows)
    );
    results.write_summary(
        markdown,
        &json!({ "data": data, "store": store, "embedder": model, "skipped": skipped,
                 "rows": json_rows, "recall_at_10_by_category": by_category,
                 "overall_recall_at_10": overall }),
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
}
