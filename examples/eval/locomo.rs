//! Deep memory retrieval (the paper's DMR) on LoCoMo.
//!
//! Each conversation is replayed into a fresh agent: every turn becomes a message of recall
//! storage dated by its session (the first speaker as the user, the second as the agent), each
//! session a separate conversation. Then each question is asked in a new session, after the
//! last one. Arms:
//!
//! * *memgpt*: the agent answers; it may search recall (`conversation_search`,
//!   `conversation_search_date`) and archival storage.
//! * *summary*: the paper's baseline: the recursive summary alone. The LLM folds the sessions
//!   one by one into a running summary (once per conversation), and answers from it.
//!
//! Scored with SQuAD-style exact match, token F1 and ROUGE-L recall (the paper's second DMR
//! metric) against the gold answer, per category, and with `--judge` by an LLM judge (the
//! paper's accuracy).

use std::sync::Arc;

use anyhow::Result;
use chrono::{DateTime, Duration, Utc};
use memgpt::builtin::DEFAULT_FUNCTIONS;
use memgpt::llm::LlmProvider;

use memgpt::store::Storage;
use memgpt::{Agent, Event};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::args::Args;
use crate::data::{Conversation, Question, category_name};
use crate::report::{Results, mean, percent, progress, table};
use crate::score;

/// When the conversation's last session ended (the questions come a day later).
pub fn question_time(conversation: &Conversation) -> DateTime<Utc> {
    conversation
        .sessions
        .iter()
        .filter_map(|s| s.date)
        .max()
        .unwrap_or_else(Utc::now)
        + Duration::days(1)
}

/// A fresh agent who played the second speaker, with the whole conversation in recall.
pub async fn replayed_agent(
    llm: Arc<dyn LlmProvider>,
    conversation: &Conversation,
) -> Result<Agent> {
    let [user, me] = &conversation.speakers;
    let mut agent = Agent::builder()
        .provider(llm)
        .storage(Storage::in_memory())
        .functions(DEFAULT_FUNCTIONS)
        .persona(format!(
            "I am {me}. I talk with my friend {user} in sessions days or weeks apart. Everything \
             we said is in my conversation history (recall storage)."
        ))
        .human(format!("{user}, my friend."))
        .build()
        .await?;
    let messages = crate::locomo_retrieval::history(&agent, conversation)
        .into_iter()
        .map(|(_, message)| message)
        .collect();
    agent.import_history(messages).await?;
    Ok(agent)
}

/// The transcript of one session, for the summary baseline.
fn transcript(conversation: &Conversation, session: usize) -> String {
    let s = &conversation.sessions[session];
    let mut out = format!("Session {} ({}):\n", s.number, s.date_text);
    for t in &s.turns {
        out.push_str(&format!("{}: {}\n", t.speaker, t.content()));
    }
    out
}

/// The recursive summary of the whole conversation, folded session by session.
async fn recursive_summary(llm: &dyn LlmProvider, conversation: &Conversation) -> Result<String> {
    let mut summary = String::new();
    for i in 0..conversation.sessions.len() {
        let prompt = format!(
            "Summary so far:\n{}\n\nNext session:\n{}\nWrite the updated summary: keep every \
             fact, name, date and event that could matter later, in under 400 words.",
            if summary.is_empty() {
                "(none)"
            } else {
                &summary
            },
            transcript(conversation, i)
        );
        summary = crate::llm::ask(
            llm,
            "You maintain a running summary of a long conversation.",
            &prompt,
        )
        .await?
        .0;
    }
    Ok(summary)
}

/// One question answered by one arm.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DmrResult {
    pub arm: String,
    pub category: u8,
    pub exact: bool,
    pub f1: f64,
    pub rouge_l: f64,
    pub judged_correct: Option<bool>,
    pub reply: String,
    pub llm_calls: usize,
    pub prompt_tokens: u64,
    pub error: Option<String>,
}

async fn score_reply(
    judge: Option<&dyn LlmProvider>,
    arm: &str,
    q: &Question,
    reply: String,
    llm_calls: usize,
    prompt_tokens: u64,
) -> Result<DmrResult> {
    let golds = vec![q.answer.clone()];
    let judged_correct = match judge {
        Some(judge) => {
            let (verdict, _) =
                crate::llm::ask(judge, "", &score::judge_prompt(&q.question, &golds, &reply))
                    .await?;
            Some(score::judge_verdict(&verdict))
        }
        None => None,
    };
    Ok(DmrResult {
        arm: arm.to_owned(),
        category: q.category,
        exact: score::exact_match(&reply, &golds),
        f1: score::f1(&reply, &golds),
        rouge_l: score::rouge_l_recall(&reply, &golds),
        judged_correct,
        reply,
        llm_calls,
        prompt_tokens,
        error: None,
    })
}

/// Runs the harness.
pub async fn run(args: &Args) -> Result<String> {
    let llm = crate::llm::provider(args)?;
    let judge_llm = crate::llm::judge(args, &llm)?;
    let path = crate::locomo_retrieval::data_path(args)?;
    let conversations = crate::data::locomo(&path)?;
    let fingerprint = args.fingerprint(&path, json!({}))?;
    let results = Arc::new(Results::<DmrResult>::open(
        &args.out,
        "locomo",
        args.fresh,
        fingerprint,
    )?);
    let mut todo = Vec::new();
    for (c, conversation) in conversations.iter().enumerate() {
        // `--limit`/`--seed` pick which questions run; `n` is the question's own index, so the
        // reported question is the sampled one.
        for n in args.limited((0..conversation.questions.len()).collect()) {
            for arm in ["summary", "memgpt"] {
                let id = format!("{}-q{n:04}-{arm}", conversation.sample_id);
                if !results.contains(&id) {
                    todo.push((c, n, arm, id));
                }
            }
        }
    }
    let conversations = Arc::new(conversations);
    let bar = progress(todo.len(), "locomo");
    let gate = Arc::new(Semaphore::new(args.jobs));
    // One summary per conversation, computed on first use.
    let summaries: Arc<Vec<tokio::sync::OnceCell<String>>> = Arc::new(
        (0..conversations.len())
            .map(|_| tokio::sync::OnceCell::new())
            .collect(),
    );
    let mut tasks = JoinSet::new();
    for (c, n, arm, id) in todo {
        let (llm, results, gate, bar) = (llm.clone(), results.clone(), gate.clone(), bar.clone());
        let (conversations, summaries, judge) =
            (conversations.clone(), summaries.clone(), judge_llm.clone());
        tasks.spawn(async move {
            let _permit = gate.acquire_owned().await?;
            let conversation = &conversations[c];
            let q = &conversation.questions[n];
            let when = question_time(conversation);
            let outcome: Result<DmrResult> = async {
                if arm == "summary" {
                    let summary = summaries[c]
                        .get_or_try_init(|| recursive_summary(llm.as_ref(), conversation))
                        .await?;
                    let (reply, usage) = crate::llm::ask(
                        llm.as_ref(),
                        &format!("You are {}. What you remember of your past conversations with {}:\n{summary}",
                            conversation.speakers[1], conversation.speakers[0]),
                        &format!("{}\nAnswer briefly.", q.question),
                    )
                    .await?;
                    score_reply(judge.as_deref(), arm, q, reply, 1, usage.prompt_tokens).await
                } else {
                    let mut agent = replayed_agent(llm.clone(), conversation).await?;
                    let record = agent
                        .step(Event::user(format!("{} (answer briefly)", q.question)).at(when))
                        .await?;
                    score_reply(
                        judge.as_deref(),
                        arm,
                        q,
                        record.reply(),
                        record.llm_calls,
                        record.usage.prompt_tokens,
                    )
                    .await
                }
            }
            .await;
            let result = outcome.unwrap_or_else(|e| DmrResult {
                arm: arm.to_owned(),
                category: q.category,
                exact: false,
                f1: 0.0,
                rouge_l: 0.0,
                judged_correct: None,
                reply: String::new(),
                llm_calls: 0,
                prompt_tokens: 0,
                error: Some(format!("{e:#}")),
            });
            results.record(&id, result)?;
            bar.inc(1);
            anyhow::Ok(())
        });
    }
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    bar.finish_and_clear();
    summarize(&results, llm.model())
}

fn summarize(results: &Results<DmrResult>, model: &str) -> Result<String> {
    let all: Vec<DmrResult> = results.all().into_iter().map(|(_, r)| r).collect();
    let mut categories: Vec<u8> = all.iter().map(|r| r.category).collect();
    categories.sort();
    categories.dedup();
    let mut rows = Vec::new();
    let mut json_rows = Vec::new();
    for arm in ["summary", "memgpt"] {
        let groups = categories
            .iter()
            .map(|&c| (format!("{c} {}", category_name(c)), Some(c)))
            .chain([("all".to_owned(), None)]);
        for (name, category) in groups {
            let rs: Vec<&DmrResult> = all
                .iter()
                .filter(|r| r.arm == arm && category.is_none_or(|c| r.category == c))
                .collect();
            if rs.is_empty() {
                continue;
            }
            let exact = mean(rs.iter().map(|r| f64::from(u8::from(r.exact))));
            let f1 = mean(rs.iter().map(|r| r.f1));
            let rouge = mean(rs.iter().map(|r| r.rouge_l));
            let judged: Vec<f64> = rs
                .iter()
                .filter_map(|r| r.judged_correct.map(|j| f64::from(u8::from(j))))
                .collect();
            let judged = (!judged.is_empty()).then(|| mean(judged));
            let errors = rs.iter().filter(|r| r.error.is_some()).count();
            rows.push(vec![
                arm.to_owned(),
                name.clone(),
                rs.len().to_string(),
                percent(exact),
                format!("{f1:.3}"),
                format!("{rouge:.3}"),
                judged.map_or("-".into(), percent),
                errors.to_string(),
            ]);
            json_rows.push(json!({ "arm": arm, "category": name, "questions": rs.len(),
                "exact": exact, "f1": f1, "rouge_l": rouge, "judged_accuracy": judged, "errors": errors }));
        }
    }
    let markdown = format!(
        "## Deep memory retrieval, LoCoMo ({model})\n\n{}",
        table(
            &[
                "arm",
                "category",
                "questions",
                "exact",
                "F1",
                "judged",
                "errors"
            ],
            &rows
        )
    );
    results.write_summary(markdown, &json!({ "model": model, "rows": json_rows }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{Session, Turn};

    #[tokio::test]
    async fn history_dates_turns_by_session_and_splits_roles() {
        let turn = |id: &str, speaker: &str| Turn {
            dia_id: id.into(),
            speaker: speaker.into(),
            text: format!("text {id}"),
            caption: None,
        };
        let date = crate::data::parse_locomo_date("1:56 pm on 8 May, 2023");
        let conversation = Conversation {
            sample_id: "s".into(),
            speakers: ["Ann".into(), "Bob".into()],
            sessions: vec![Session {
                number: 1,
                date_text: "1:56 pm on 8 May, 2023".into(),
                date,
                turns: vec![turn("D1:1", "Ann"), turn("D1:2", "Bob")],
            }],
            questions: vec![],
            facts: vec![],
        };
        let agent = replayed_agent(
            Arc::new(memgpt::backend::testing::ScriptedProvider::new()),
            &conversation,
        )
        .await
        .unwrap();
        let h = crate::locomo_retrieval::history(&agent, &conversation);
        assert_eq!(h[0].0, "D1:1");
        assert_eq!(h[0].1.kind, memgpt::message::MessageKind::User);
        assert_eq!(h[1].1.kind, memgpt::message::MessageKind::Assistant);
        assert_eq!(
            (h[1].1.name.as_deref(), h[1].1.text.as_str()),
            (Some("Bob"), "text D1:2")
        );
        assert_eq!(h[1].1.created_at - h[0].1.created_at, Duration::minutes(1));
        assert_eq!(
            question_time(&conversation),
            date.unwrap() + Duration::days(1)
        );
        assert_eq!(
            agent
                .storage()
                .recall
                .count_messages(agent.id())
                .await
                .unwrap(),
            2
        );
    }
}
