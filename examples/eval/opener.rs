//! The conversation opener (the paper's CSIM experiment), on LoCoMo.
//!
//! Every session but the last is replayed into a fresh agent (see [`crate::locomo`]); the
//! agent then gets a login event at the time of the last session and writes the opener. It is
//! scored by embedding cosine against the persona facts the earlier sessions established about
//! the user (LoCoMo's `observation`): SIM-1 (the most similar fact) and SIM-3 (the mean of the
//! three most similar), and against the human opener of the real last session (SIM-H). The
//! human opener gets the same SIM-1/SIM-3 as a reference row, as in the paper's table.

use std::sync::Arc;

use anyhow::{Context, Result};
use chrono::Duration;
use memgpt::Event;
use memgpt::embed::Embedder;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::args::Args;
use crate::data::Conversation;
use crate::embed::dot;
use crate::report::{Results, mean, progress, table};

/// One conversation's opener and its scores.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OpenerResult {
    pub opener: String,
    pub human: String,
    pub sim1: f64,
    pub sim3: f64,
    pub sim_h: f64,
    pub human_sim1: f64,
    pub human_sim3: f64,
    pub error: Option<String>,
}

/// SIM-1 and SIM-3 of `vector` against `facts`.
pub fn similarity(vector: &[f32], facts: &[Vec<f32>]) -> (f64, f64) {
    let mut sims: Vec<f64> = facts.iter().map(|f| f64::from(dot(vector, f))).collect();
    sims.sort_by(|a, b| b.total_cmp(a));
    let top1 = sims.first().copied().unwrap_or(0.0);
    (top1, mean(sims.iter().take(3).copied()))
}

async fn one(
    args: &Args,
    embedder: &dyn Embedder,
    conversation: &Conversation,
) -> Result<OpenerResult> {
    let (last, earlier) = conversation.sessions.split_last().context("no sessions")?;
    let mut history = conversation.clone();
    history.sessions = earlier.to_vec();
    let human = last.turns.first().map(|t| t.content()).unwrap_or_default();
    let user = &conversation.speakers[0];
    // Facts about the user established before the last session.
    let facts: Vec<String> = conversation
        .facts
        .iter()
        .filter(|(session, speaker, _)| *session < last.number && speaker == user)
        .map(|(_, _, f)| f.clone())
        .collect();
    let llm = crate::llm::provider(args)?;
    let mut agent = crate::locomo::replayed_agent(llm, &history).await?;
    let when = last
        .date
        .unwrap_or_else(|| crate::locomo::question_time(&history) + Duration::days(1));
    let record = agent.step(Event::login().at(when)).await?;
    let opener = record.reply();
    let mut texts = vec![opener.clone(), human.clone()];
    texts.extend(facts);
    let vectors = embedder.embed(&texts).await?;
    let (sim1, sim3) = similarity(&vectors[0], &vectors[2..]);
    let (human_sim1, human_sim3) = similarity(&vectors[1], &vectors[2..]);
    Ok(OpenerResult {
        sim_h: f64::from(dot(&vectors[0], &vectors[1])),
        opener,
        human,
        sim1,
        sim3,
        human_sim1,
        human_sim3,
        error: None,
    })
}

/// Runs the harness.
pub async fn run(args: &Args) -> Result<String> {
    // Fail early on configuration.
    let llm = crate::llm::provider(args)?;
    let embedder: Arc<dyn Embedder> = crate::embed::embedder(args)?;
    let path = crate::locomo_retrieval::data_path(args)?;
    let conversations = args.limited(crate::data::locomo(&path)?);
    let fingerprint =
        args.fingerprint(&path, serde_json::json!({ "embedder": embedder.model() }))?;
    let results = Results::<OpenerResult>::open(&args.out, "opener", args.fresh, fingerprint)?;
    let bar = progress(conversations.len(), "openers");
    for conversation in &conversations {
        if !results.contains(&conversation.sample_id) {
            let result = one(args, embedder.as_ref(), conversation)
                .await
                .unwrap_or_else(|e| OpenerResult {
                    opener: String::new(),
                    human: String::new(),
                    sim1: 0.0,
                    sim3: 0.0,
                    sim_h: 0.0,
                    human_sim1: 0.0,
                    human_sim3: 0.0,
                    error: Some(format!("{e:#}")),
                });
            results.record(&conversation.sample_id, result)?;
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let all: Vec<OpenerResult> = results
        .all()
        .into_iter()
        .map(|(_, r)| r)
        .filter(|r| r.error.is_none())
        .collect();
    let errors = results.all().len() - all.len();
    let rows = vec![
        vec![
            format!("MemGPT ({})", llm.model()),
            all.len().to_string(),
            format!("{:.3}", mean(all.iter().map(|r| r.sim1))),
            format!("{:.3}", mean(all.iter().map(|r| r.sim3))),
            format!("{:.3}", mean(all.iter().map(|r| r.sim_h))),
        ],
        vec![
            "human (real opener)".to_owned(),
            all.len().to_string(),
            format!("{:.3}", mean(all.iter().map(|r| r.human_sim1))),
            format!("{:.3}", mean(all.iter().map(|r| r.human_sim3))),
            "1.000".to_owned(),
        ],
    ];
    let markdown = format!(
        "## Conversation opener, LoCoMo (CSIM with {}; {errors} failed)\n\n{}",
        embedder.model(),
        table(
            &["opener", "conversations", "SIM-1", "SIM-3", "SIM-H"],
            &rows
        )
    );
    results.write_summary(
        markdown,
        &json!({ "model": llm.model(), "embedder": embedder.model(), "errors": errors,
            "sim1": mean(all.iter().map(|r| r.sim1)), "sim3": mean(all.iter().map(|r| r.sim3)),
            "sim_h": mean(all.iter().map(|r| r.sim_h)),
            "human_sim1": mean(all.iter().map(|r| r.human_sim1)),
            "human_sim3": mean(all.iter().map(|r| r.human_sim3)) }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sim1_and_sim3() {
        let facts = vec![
            vec![1.0, 0.0],
            vec![0.0, 1.0],
            vec![0.6, 0.8],
            vec![-1.0, 0.0],
        ];
        let (s1, s3) = similarity(&[1.0, 0.0], &facts);
        assert!((s1 - 1.0).abs() < 1e-6);
        assert!((s3 - (1.0 + 0.6 + 0.0) / 3.0).abs() < 1e-6, "{s3}");
        assert_eq!(similarity(&[1.0, 0.0], &[]), (0.0, 0.0));
    }
}
