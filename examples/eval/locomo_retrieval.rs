//! Offline: evidence recall@k of conversation search on LoCoMo, with no LLM.
//!
//! For each question with evidence: the fraction of its evidence dialog ids among the top-k
//! retrieved *turns* (k counts turns), for k = 5 and 10, averaged over questions, overall and per
//! category, for BM25, vector and hybrid search ([`crate::retrieval`]). The question text is the
//! query. Evidence ids that name no turn of the conversation are dropped; questions left with
//! none are skipped (and counted).

use std::collections::{BTreeMap, HashMap};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::args::Args;
use crate::data::{self, Conversation, category_name};
use crate::report::{Results, mean, progress, table};
use crate::retrieval::{ConversationIndex, Retriever, TurnDoc};

/// The two cut-offs reported.
pub const KS: [usize; 2] = [5, 10];

/// One question's recall for every retriever and k.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RecallResult {
    pub category: u8,
    /// `recall[retriever][i]` at `KS[i]`.
    pub recall: BTreeMap<String, Vec<f64>>,
}

/// The fraction of `evidence` among the dialog ids of the `retrieved` turns.
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

/// The turns of a conversation as the retrievers see them.
pub fn turn_docs(conversation: &Conversation) -> Vec<TurnDoc> {
    conversation
        .sessions
        .iter()
        .flat_map(|s| {
            s.turns.iter().map(|t| TurnDoc {
                dia_id: t.dia_id.clone(),
                speaker: t.speaker.clone(),
                session: s.number,
                date: s.date,
                content: t.content(),
            })
        })
        .collect()
}

/// Runs the harness.
pub async fn run(args: &Args) -> Result<String> {
    let path = args.data_file("locomo/locomo5_dev.json")?;
    let conversations = data::locomo(&path)?;
    let embedder = crate::embed::embedder(args)?;
    let model = embedder.model().to_owned();
    let results = Results::<RecallResult>::open(&args.out, "locomo-retrieval", args.fresh)?;
    let mut remaining = args.limit.unwrap_or(usize::MAX);
    let mut skipped = 0usize;
    let total: usize = conversations.iter().map(|c| c.questions.len()).sum();
    let bar = progress(total.min(remaining), "questions");
    for conversation in &conversations {
        if remaining == 0 {
            break;
        }
        let turns = turn_docs(conversation);
        let known: HashMap<&str, usize> = turns
            .iter()
            .enumerate()
            .map(|(i, t)| (t.dia_id.as_str(), i))
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
                .filter(|e| known.contains_key(e.as_str()))
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
        let texts: Vec<String> = turns.iter().map(ConversationIndex::turn_text).collect();
        let vectors = crate::embed::embed_all(embedder.as_ref(), &texts, "turns")
            .await
            .with_context(|| format!("embedding conversation {}", conversation.sample_id))?;
        let index = ConversationIndex::new(turns, vectors);
        let questions: Vec<String> = todo.iter().map(|(_, q, _)| q.question.clone()).collect();
        let query_vectors =
            crate::embed::embed_all(embedder.as_ref(), &questions, "questions").await?;
        for ((id, q, evidence), qv) in todo.into_iter().zip(query_vectors) {
            let mut recall_by = BTreeMap::new();
            for retriever in Retriever::ALL {
                let top = index.search(&q.question, Some(&qv), retriever, KS[1]);
                let ids: Vec<&str> = top
                    .iter()
                    .map(|&i| index.turns()[i].dia_id.as_str())
                    .collect();
                let at: Vec<f64> = KS
                    .iter()
                    .map(|&k| recall(&evidence, &ids[..k.min(ids.len())]))
                    .collect();
                recall_by.insert(retriever.name().to_owned(), at);
            }
            results.record(
                &id,
                RecallResult {
                    category: q.category,
                    recall: recall_by,
                },
            )?;
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    summarize(&results, &model, skipped, crate::args::shown(&path))
}

fn summarize(
    results: &Results<RecallResult>,
    model: &str,
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
    let at = |rs: &[&RecallResult], retriever: Retriever, k: usize| {
        mean(
            rs.iter()
                .filter_map(|r| r.recall.get(retriever.name()).and_then(|v| v.get(k)))
                .copied(),
        )
    };
    let mut rows = Vec::new();
    let mut json_rows = Vec::new();
    for (name, rs) in &groups {
        let mut row = vec![name.clone(), rs.len().to_string()];
        let mut entry = serde_json::Map::new();
        entry.insert("category".into(), json!(name));
        entry.insert("questions".into(), json!(rs.len()));
        for retriever in Retriever::ALL {
            for (i, k) in KS.iter().enumerate() {
                let value = at(rs, retriever, i);
                row.push(format!("{value:.3}"));
                entry.insert(format!("{}@{k}", retriever.name()), json!(value));
            }
        }
        rows.push(row);
        json_rows.push(serde_json::Value::Object(entry));
    }
    let overall = at(&all.iter().collect::<Vec<_>>(), Retriever::Hybrid, 1);
    let markdown = format!(
        "## LoCoMo evidence recall of conversation search\n\n{data}; embeddings: {model}; \
         {skipped} questions without usable evidence skipped.\n\n{}\noverall hybrid recall@10 = {overall:.3}",
        table(
            &[
                "category",
                "questions",
                "bm25 @5",
                "bm25 @10",
                "vector @5",
                "vector @10",
                "hybrid @5",
                "hybrid @10",
            ],
            &rows,
        )
    );
    results.write_summary(
        markdown,
        &json!({ "data": data, "embedder": model, "skipped": skipped, "rows": json_rows,
                 "overall_hybrid_recall_at_10": overall }),
    )
}

/// Lets the `locomo` harness share the loading code.
pub fn conversations(args: &Args) -> Result<Vec<Conversation>> {
    data::locomo(&args.data_file("locomo/locomo5_dev.json")?)
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
}
