//! Nested key/value retrieval (the paper's figure 7).
//!
//! For nesting level L (0-5) and each of the paper's 100 orderings, example i of
//! `kv-retrieval-140_keys.jsonl.gz` is nested along ordering i of
//! `random_orderings_100_samples_140_indices_{L+1}_levels.jsonl`, as the paper did: the value
//! at chain[j] becomes the key at chain[j+1]. The question names the key at chain[0]; the
//! answer is the value at the end of the chain, the first value that is not a key.
//!
//! * *baseline*: all 140 pairs in the prompt as one JSON object, one question, one call.
//! * *memgpt*: the pairs are passages in archival storage (one per pair); the agent must
//!   search, following heartbeats, until the value is not a key. UUIDs defeat embeddings, so
//!   archival search runs in text mode (lexical match of the UUID's parts).
//! * `--offline`: the memgpt arm driven by the oracle policy ([`crate::oracle`]), which needs
//!   `levels + 2` searches: one per link of the chain (`levels + 1`) and one that shows the last
//!   value is no key.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use memgpt::builtin::DEFAULT_FUNCTIONS;
use memgpt::llm::LlmProvider;
use memgpt::store::{SearchMode, Storage};
use memgpt::{Agent, Event};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::args::Args;
use crate::data::{self, KvExample};
use crate::report::{Results, mean, percent, progress, table};

/// One nested question.
#[derive(Clone, Debug)]
pub struct KvQuestion {
    pub id: String,
    pub level: usize,
    pub pairs: Vec<(String, String)>,
    pub key: String,
    pub answer: String,
}

/// Builds the questions of `level` (at most `limit` orderings).
pub fn questions(
    examples: &[KvExample],
    orderings: &[Vec<usize>],
    level: usize,
) -> Result<Vec<KvQuestion>> {
    orderings
        .iter()
        .enumerate()
        .map(|(i, chain)| {
            let example = examples
                .get(i % examples.len().max(1))
                .context("no key/value examples")?;
            let mut pairs = example.ordered_kv_records.clone();
            anyhow::ensure!(
                chain.len() == level + 1 && chain.iter().all(|&c| c < pairs.len()),
                "ordering {i} of level {level} does not fit: {chain:?}"
            );
            for link in chain.windows(2) {
                pairs[link[0]].1 = pairs[link[1]].0.clone();
            }
            Ok(KvQuestion {
                id: format!("L{level}-{i:03}"),
                level,
                key: pairs[chain[0]].0.clone(),
                answer: pairs[chain[level]].1.clone(),
                pairs,
            })
        })
        .collect()
}

/// The finished result of one question in one arm.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct KvResult {
    pub arm: String,
    pub level: usize,
    pub correct: bool,
    pub reply: String,
    pub llm_calls: usize,
    pub searches: usize,
    pub prompt_tokens: u64,
    pub error: Option<String>,
}

const BASELINE_PROMPT: &str = "Below is a JSON object of key/value pairs (UUIDs). A value may \
itself be a key of another pair: in that case keep looking up until you reach a value that is \
not a key. Answer with that final value only.";

fn question_text(key: &str) -> String {
    format!(
        "What is the value of key {key}? If that value is itself a key, keep looking it up \
         until you reach a value that is not a key, and answer with that final value only."
    )
}

/// Passage text for one pair.
fn passage(key: &str, value: &str) -> String {
    json!({ "key": key, "value": value }).to_string()
}

async fn run_baseline(llm: &dyn LlmProvider, q: &KvQuestion) -> Result<KvResult> {
    let object: serde_json::Map<String, serde_json::Value> =
        q.pairs.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
    let prompt = format!(
        "JSON data:\n{}\n\n{}",
        serde_json::Value::Object(object),
        question_text(&q.key)
    );
    let (reply, usage) = crate::llm::ask(llm, BASELINE_PROMPT, &prompt).await?;
    Ok(KvResult {
        arm: "baseline".into(),
        level: q.level,
        correct: reply.contains(&q.answer),
        reply,
        llm_calls: 1,
        searches: 0,
        prompt_tokens: usage.prompt_tokens,
        error: None,
    })
}

async fn run_memgpt(llm: Arc<dyn LlmProvider>, q: &KvQuestion) -> Result<KvResult> {
    let mut agent = Agent::builder()
        .provider(llm)
        .storage(Storage::in_memory())
        .archival_search(SearchMode::Text)
        .functions(DEFAULT_FUNCTIONS)
        .max_chain_length(3 * (q.level + 3))
        .build()
        .await?;
    for (key, value) in &q.pairs {
        agent
            .insert_archival(&passage(key, value), serde_json::Map::new())
            .await?;
    }
    let record = agent.step(Event::user(question_text(&q.key))).await?;
    let reply = record.reply();
    Ok(KvResult {
        arm: "memgpt".into(),
        level: q.level,
        correct: reply.contains(&q.answer),
        searches: record
            .function_calls
            .iter()
            .filter(|c| c.name == "archival_memory_search")
            .count(),
        llm_calls: record.llm_calls,
        prompt_tokens: record.usage.prompt_tokens,
        reply,
        error: None,
    })
}

fn data_files(args: &Args) -> Result<(PathBuf, PathBuf)> {
    let kv = args.data_file("nested_kv/kv-retrieval-140_keys.jsonl.gz")?;
    let dir = kv.parent().map(Path::to_owned).unwrap_or_default();
    Ok((kv, dir))
}

/// Runs the harness.
pub async fn run(args: &Args) -> Result<String> {
    let (kv_path, dir) = data_files(args)?;
    let examples: Vec<KvExample> = data::json_lines(&kv_path)?;
    let mut all = Vec::new();
    for &level in &args.levels {
        let path = dir.join(format!(
            "random_orderings_100_samples_140_indices_{}_levels.jsonl",
            level + 1
        ));
        let orderings: Vec<Vec<usize>> = data::json_lines(&path)?;
        all.extend(args.limited(questions(&examples, &orderings, level)?));
    }
    let (arms, llm): (Vec<&str>, Arc<dyn LlmProvider>) = if args.offline {
        (
            vec!["memgpt"],
            Arc::new(crate::oracle::OracleKvPolicy::new()),
        )
    } else {
        (vec!["baseline", "memgpt"], crate::llm::provider(args)?)
    };
    let name = if args.offline {
        "nested-kv-offline"
    } else {
        "nested-kv"
    };
    let fingerprint = args.fingerprint(&kv_path, serde_json::json!({ "levels": args.levels }))?;
    let results = Arc::new(Results::<KvResult>::open(
        &args.out,
        name,
        args.fresh,
        fingerprint,
    )?);
    let todo: Vec<(KvQuestion, &'static str)> = all
        .iter()
        .flat_map(|q| {
            arms.iter().map(move |a| {
                (
                    q.clone(),
                    if *a == "baseline" {
                        "baseline"
                    } else {
                        "memgpt"
                    },
                )
            })
        })
        .filter(|(q, arm)| !results.contains(&format!("{}-{arm}", q.id)))
        .collect();
    let bar = progress(todo.len(), name);
    let gate = Arc::new(Semaphore::new(args.jobs));
    let mut tasks = JoinSet::new();
    for (q, arm) in todo {
        let (llm, results, gate, bar) = (llm.clone(), results.clone(), gate.clone(), bar.clone());
        tasks.spawn(async move {
            let _permit = gate.acquire_owned().await?;
            let outcome = match arm {
                "baseline" => run_baseline(llm.as_ref(), &q).await,
                _ => run_memgpt(llm, &q).await,
            };
            let result = outcome.unwrap_or_else(|e| KvResult {
                arm: arm.into(),
                level: q.level,
                correct: false,
                reply: String::new(),
                llm_calls: 0,
                searches: 0,
                prompt_tokens: 0,
                error: Some(format!("{e:#}")),
            });
            results.record(&format!("{}-{arm}", q.id), result)?;
            bar.inc(1);
            anyhow::Ok(())
        });
    }
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    bar.finish_and_clear();
    summarize(&results, &args.levels, llm.model())
}

/// Accuracy per level and arm (the paper's figure 7 as a table), with cost per question.
fn summarize(results: &Results<KvResult>, levels: &[usize], model: &str) -> Result<String> {
    let all: Vec<KvResult> = results.all().into_iter().map(|(_, r)| r).collect();
    let mut rows = Vec::new();
    let mut json_rows = Vec::new();
    for arm in ["baseline", "memgpt"] {
        for &level in levels {
            let rs: Vec<&KvResult> = all
                .iter()
                .filter(|r| r.arm == arm && r.level == level)
                .collect();
            if rs.is_empty() {
                continue;
            }
            let accuracy = mean(rs.iter().map(|r| f64::from(u8::from(r.correct))));
            let searches = mean(rs.iter().map(|r| r.searches as f64));
            let calls = mean(rs.iter().map(|r| r.llm_calls as f64));
            let tokens = mean(rs.iter().map(|r| r.prompt_tokens as f64));
            let errors = rs.iter().filter(|r| r.error.is_some()).count();
            rows.push(vec![
                arm.to_owned(),
                level.to_string(),
                rs.len().to_string(),
                percent(accuracy),
                format!("{searches:.2}"),
                format!("{calls:.2}"),
                format!("{tokens:.0}"),
                errors.to_string(),
            ]);
            json_rows.push(json!({
                "arm": arm, "level": level, "questions": rs.len(), "accuracy": accuracy,
                "searches": searches, "llm_calls": calls, "prompt_tokens": tokens, "errors": errors,
            }));
        }
    }
    let markdown = format!(
        "## Nested KV retrieval ({model})\n\n{}",
        table(
            &[
                "arm",
                "nesting level",
                "questions",
                "accuracy",
                "searches / q",
                "LLM calls / q",
                "prompt tokens / q",
                "errors"
            ],
            &rows,
        )
    );
    results.write_summary(markdown, &json!({ "model": model, "rows": json_rows }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> KvExample {
        KvExample {
            ordered_kv_records: (0..5).map(|i| (format!("k{i}"), format!("v{i}"))).collect(),
        }
    }

    #[test]
    fn nesting_follows_the_papers_construction() {
        let qs = questions(&[example()], &[vec![3, 1, 4]], 2).unwrap();
        let q = &qs[0];
        assert_eq!(q.key, "k3");
        assert_eq!(q.pairs[3].1, "k1");
        assert_eq!(q.pairs[1].1, "k4");
        assert_eq!(q.answer, "v4", "the end of the chain keeps its own value");
        let flat = questions(&[example()], &[vec![2]], 0).unwrap();
        assert_eq!(
            (flat[0].key.as_str(), flat[0].answer.as_str()),
            ("k2", "v2")
        );
        assert!(
            questions(&[example()], &[vec![1, 2]], 2).is_err(),
            "wrong length"
        );
        assert!(
            questions(&[example()], &[vec![9]], 0).is_err(),
            "out of range"
        );
    }
}
