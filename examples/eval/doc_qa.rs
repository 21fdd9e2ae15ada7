//! Document QA on NaturalQuestions-Open (the paper's figure 5).
//!
//! The archival corpus is every gold Wikipedia passage of `nq-open-oracle.jsonl.gz` (2,655
//! questions; identical passages stored once). Arms:
//!
//! * *top-K* (K in `--k`, default 1,5,10,20,50): the fixed-context baseline. The K best passages
//!   of hybrid retrieval are put in the prompt, in rank order, truncated to fit the model's
//!   context window; one call.
//! * *memgpt*: an agent whose archival storage holds the whole corpus answers by searching it,
//!   paging with heartbeats as it sees fit.
//!
//! Scoring: the normalised gold answer occurs in the reply (word boundaries), as the paper
//! scored it; `--judge` adds an LLM-as-judge verdict. `doc-qa-retrieval` is the offline part:
//! the recall@K of the gold passage for BM25, vector and hybrid retrieval.

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::Result;
use memgpt::builtin::DEFAULT_FUNCTIONS;
use memgpt::embed::Embedder;
use memgpt::llm::LlmProvider;
use memgpt::store::Storage;
use memgpt::tokens::{TiktokenCounter, TokenCounter};
use memgpt::{Agent, Event};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::args::Args;
use crate::data::{self, NqQuestion};
use crate::embed::CachedEmbedder;
use crate::report::{Results, mean, percent, progress, table};
use crate::score;
use memgpt::retrieval::{Bm25Index, RRF_K, reciprocal_rank_fusion};

/// The corpus and the questions, with each question's gold passage index.
pub struct Corpus {
    pub documents: Vec<String>,
    pub questions: Vec<(NqQuestion, usize)>,
}

impl Corpus {
    /// Reads the file: every question's gold passage joins the corpus (once per distinct text);
    /// `--limit` applies to the questions asked, never to the corpus.
    pub fn load(args: &Args) -> Result<Self> {
        let path = Self::path(args)?;
        let all: Vec<NqQuestion> = data::json_lines(&path)?;
        let mut documents = Vec::new();
        let mut seen: HashMap<String, usize> = HashMap::new();
        let mut questions = Vec::new();
        for q in all {
            let Some(gold) = q.gold() else { continue };
            let text = gold.document();
            let index = *seen.entry(text.clone()).or_insert_with(|| {
                documents.push(text);
                documents.len() - 1
            });
            questions.push((q, index));
        }
        Ok(Self {
            documents,
            questions: args.limited(questions),
        })
    }
}

impl Corpus {
    /// The data file.
    pub fn path(args: &Args) -> Result<std::path::PathBuf> {
        args.data_file("nq_open/nq-open-oracle.jsonl.gz")
    }
}

/// Offline retrieval result of one question: the gold passage's rank (0-based) per
/// retriever, if within the deepest K.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RetrievalResult {
    pub rank: HashMap<String, Option<usize>>,
}

/// `doc-qa-retrieval`: recall@K of the gold passage.
pub async fn run_retrieval(args: &Args) -> Result<String> {
    let corpus = Corpus::load(args)?;
    let embedder = crate::embed::embedder(args)?;
    let fingerprint = args.fingerprint(
        &Corpus::path(args)?,
        json!({ "embedder": embedder.model(), "k": args.k }),
    )?;
    let results =
        Results::<RetrievalResult>::open(&args.out, "doc-qa-retrieval", args.fresh, fingerprint)?;
    let todo: Vec<usize> = (0..corpus.questions.len())
        .filter(|i| !results.contains(&format!("q{i:04}")))
        .collect();
    let deepest = args.k.iter().copied().max().unwrap_or(50);
    if !todo.is_empty() {
        let vectors =
            crate::embed::embed_all(embedder.as_ref(), &corpus.documents, "passages").await?;
        let index = TextIndex::new(corpus.documents.iter().map(String::as_str), vectors);
        let texts: Vec<String> = todo
            .iter()
            .map(|&i| corpus.questions[i].0.question.clone())
            .collect();
        let query_vectors = crate::embed::embed_all(embedder.as_ref(), &texts, "questions").await?;
        let bar = progress(todo.len(), "questions");
        for (&i, qv) in todo.iter().zip(&query_vectors) {
            let (q, gold) = &corpus.questions[i];
            let rank = Retriever::ALL
                .iter()
                .map(|&r| {
                    let top = index.search(&q.question, Some(qv), r, deepest);
                    (r.name().to_owned(), top.iter().position(|&d| d == *gold))
                })
                .collect();
            results.record(&format!("q{i:04}"), RetrievalResult { rank })?;
            bar.inc(1);
        }
        bar.finish_and_clear();
    }
    let all: Vec<RetrievalResult> = results.all().into_iter().map(|(_, r)| r).collect();
    let mut rows = Vec::new();
    let mut json_rows = Vec::new();
    for r in Retriever::ALL {
        let mut row = vec![r.name().to_owned()];
        let mut entry = serde_json::Map::new();
        entry.insert("retriever".into(), json!(r.name()));
        for &k in &args.k {
            let recall = mean(all.iter().map(|x| {
                f64::from(u8::from(
                    x.rank
                        .get(r.name())
                        .copied()
                        .flatten()
                        .is_some_and(|p| p < k),
                ))
            }));
            row.push(format!("{recall:.3}"));
            entry.insert(format!("recall@{k}"), json!(recall));
        }
        rows.push(row);
        json_rows.push(serde_json::Value::Object(entry));
    }
    let headers: Vec<String> = std::iter::once("retriever".to_owned())
        .chain(args.k.iter().map(|k| format!("recall@{k}")))
        .collect();
    let markdown = format!(
        "## NQ-Open: recall of the gold passage ({} questions, {} passages, embeddings: {})\n\n{}",
        all.len(),
        corpus.documents.len(),
        embedder.model(),
        table(
            &headers.iter().map(String::as_str).collect::<Vec<_>>(),
            &rows
        )
    );
    results.write_summary(
        markdown,
        &json!({ "questions": all.len(), "passages": corpus.documents.len(),
                 "embedder": embedder.model(), "rows": json_rows }),
    )
}

/// One question answered by one arm.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct QaResult {
    pub arm: String,
    pub correct: bool,
    pub judged_correct: Option<bool>,
    pub reply: String,
    pub llm_calls: usize,
    pub prompt_tokens: u64,
    /// Passages that fit in the baseline's prompt.
    pub passages_in_prompt: Option<usize>,
    pub error: Option<String>,
}

const BASELINE_SYSTEM: &str = "Answer the question using the documents. Answer briefly: a few \
words, no explanation.";

/// The baseline prompt with as many of `ranked` documents as fit in `budget` tokens (the last
/// one cut short), and how many went in.
pub fn baseline_prompt(
    question: &str,
    documents: &[String],
    ranked: &[usize],
    budget: usize,
    counter: &dyn TokenCounter,
) -> (String, usize) {
    let tail = format!("\nQuestion: {question}\nAnswer:");
    let mut used = counter.count_text(&tail) + counter.count_text(BASELINE_SYSTEM);
    let mut prompt = String::new();
    let mut included = 0;
    for (n, &d) in ranked.iter().enumerate() {
        let block = format!("Document [{}] {}\n", n + 1, documents[d]);
        let cost = counter.count_text(&block);
        if used + cost <= budget {
            prompt.push_str(&block);
            used += cost;
            included += 1;
            continue;
        }
        // Truncate the document that does not fit, word by word, then stop.
        let room = budget.saturating_sub(used);
        if room > 16 {
            let words: Vec<&str> = block.split_whitespace().collect();
            let (mut lo, mut hi) = (0, words.len());
            while lo < hi {
                let mid = (lo + hi).div_ceil(2);
                if counter.count_text(&words[..mid].join(" ")) <= room {
                    lo = mid;
                } else {
                    hi = mid - 1;
                }
            }
            if lo > 0 {
                prompt.push_str(&words[..lo].join(" "));
                prompt.push('\n');
                included += 1;
            }
        }
        break;
    }
    prompt.push_str(&tail);
    (prompt, included)
}

struct Shared {
    llm: Arc<dyn LlmProvider>,
    corpus: Corpus,
    index: TextIndex,
    embedder: Option<Arc<CachedEmbedder>>,
    window: usize,
    judge: Option<Arc<dyn LlmProvider>>,
}

async fn judge(shared: &Shared, q: &NqQuestion, reply: &str) -> Result<Option<bool>> {
    let Some(judge) = &shared.judge else {
        return Ok(None);
    };
    let (verdict, _) = crate::llm::ask(
        judge.as_ref(),
        "",
        &score::judge_prompt(&q.question, &q.answers, reply),
    )
    .await?;
    Ok(Some(score::judge_verdict(&verdict)))
}

async fn run_baseline(shared: &Shared, q: &NqQuestion, k: usize) -> Result<QaResult> {
    let embedding = match &shared.embedder {
        Some(e) => Some(e.embed_one(&q.question).await?.vector),
        None => None,
    };
    let ranked = shared
        .index
        .search(&q.question, embedding.as_deref(), Retriever::Hybrid, k);
    let counter = TiktokenCounter::cl100k();
    // Leave room for the answer.
    let budget = shared.window.saturating_sub(256);
    let (prompt, included) = baseline_prompt(
        &q.question,
        &shared.corpus.documents,
        &ranked,
        budget,
        &counter,
    );
    let (reply, usage) = crate::llm::ask(shared.llm.as_ref(), BASELINE_SYSTEM, &prompt).await?;
    Ok(QaResult {
        arm: format!("top-{k}"),
        correct: score::contains_answer(&reply, &q.answers),
        judged_correct: judge(shared, q, &reply).await?,
        reply,
        llm_calls: 1,
        prompt_tokens: usage.prompt_tokens,
        passages_in_prompt: Some(included),
        error: None,
    })
}

async fn run_memgpt(shared: &Shared, q: &NqQuestion) -> Result<QaResult> {
    let mut builder = Agent::builder()
        .provider(shared.llm.clone())
        .storage(Storage::in_memory())
        .functions(DEFAULT_FUNCTIONS)
        .context_window(shared.window);
    if let Some(e) = &shared.embedder {
        builder = builder.embedder(e.clone());
    }
    let mut agent = builder.build().await?;
    for document in &shared.corpus.documents {
        agent
            .insert_archival(document, serde_json::Map::new())
            .await?;
    }
    let record = agent
        .step(Event::user(format!(
            "Your archival memory holds Wikipedia passages. Search it (page through the \
             results if needed) and answer briefly: {}",
            q.question
        )))
        .await?;
    let reply = record.reply();
    Ok(QaResult {
        arm: "memgpt".into(),
        correct: score::contains_answer(&reply, &q.answers),
        judged_correct: judge(shared, q, &reply).await?,
        reply,
        llm_calls: record.llm_calls,
        prompt_tokens: record.usage.prompt_tokens,
        passages_in_prompt: None,
        error: None,
    })
}

/// `doc-qa`: the baseline at every K and the MemGPT agent, against an LLM.
pub async fn run(args: &Args) -> Result<String> {
    let llm = crate::llm::provider(args)?;
    let corpus = Corpus::load(args)?;
    let embedder = match crate::embed::embedder(args) {
        Ok(e) => Some(Arc::new(CachedEmbedder::new(e))),
        Err(e) => {
            eprintln!("warning: no embedder ({e:#}); retrieval falls back to BM25");
            None
        }
    };
    let vectors = match &embedder {
        Some(e) => {
            let v = crate::embed::embed_all(e.as_ref(), &corpus.documents, "passages").await?;
            e.seed(&corpus.documents, &v);
            v
        }
        None => Vec::new(),
    };
    let index = TextIndex::new(corpus.documents.iter().map(String::as_str), vectors);
    let window = llm.context_window().unwrap_or(8_192);
    let fingerprint = args.fingerprint(
        &Corpus::path(args)?,
        json!({ "embedder": embedder.as_ref().map(|e| e.model().to_owned()), "k": args.k }),
    )?;
    let results = Arc::new(Results::<QaResult>::open(
        &args.out,
        "doc-qa",
        args.fresh,
        fingerprint,
    )?);
    let mut arms: Vec<String> = args.k.iter().map(|k| format!("top-{k}")).collect();
    arms.push("memgpt".into());
    let todo: Vec<(usize, String)> = (0..corpus.questions.len())
        .flat_map(|i| arms.iter().map(move |a| (i, a.clone())))
        .filter(|(i, a)| !results.contains(&format!("q{i:04}-{a}")))
        .collect();
    let judge = crate::llm::judge(args, &llm)?;
    let shared = Arc::new(Shared {
        llm,
        corpus,
        index,
        embedder,
        window,
        judge,
    });
    let bar = progress(todo.len(), "doc-qa");
    let gate = Arc::new(Semaphore::new(args.jobs));
    let mut tasks = JoinSet::new();
    for (i, arm) in todo {
        let (shared, results, gate, bar) =
            (shared.clone(), results.clone(), gate.clone(), bar.clone());
        tasks.spawn(async move {
            let _permit = gate.acquire_owned().await?;
            let q = &shared.corpus.questions[i].0;
            let outcome = match arm.strip_prefix("top-").and_then(|k| k.parse().ok()) {
                Some(k) => run_baseline(&shared, q, k).await,
                None => run_memgpt(&shared, q).await,
            };
            let result = outcome.unwrap_or_else(|e| QaResult {
                arm: arm.clone(),
                correct: false,
                judged_correct: None,
                reply: String::new(),
                llm_calls: 0,
                prompt_tokens: 0,
                passages_in_prompt: None,
                error: Some(format!("{e:#}")),
            });
            results.record(&format!("q{i:04}-{arm}"), result)?;
            bar.inc(1);
            anyhow::Ok(())
        });
    }
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    bar.finish_and_clear();
    let all: Vec<QaResult> = results.all().into_iter().map(|(_, r)| r).collect();
    let mut rows = Vec::new();
    let mut json_rows = Vec::new();
    for arm in &arms {
        let rs: Vec<&QaResult> = all.iter().filter(|r| &r.arm == arm).collect();
        if rs.is_empty() {
            continue;
        }
        let accuracy = mean(rs.iter().map(|r| f64::from(u8::from(r.correct))));
        let judged: Vec<f64> = rs
            .iter()
            .filter_map(|r| r.judged_correct.map(|j| f64::from(u8::from(j))))
            .collect();
        let judged = (!judged.is_empty()).then(|| mean(judged));
        let passages = mean(
            rs.iter()
                .filter_map(|r| r.passages_in_prompt.map(|p| p as f64)),
        );
        let calls = mean(rs.iter().map(|r| r.llm_calls as f64));
        let tokens = mean(rs.iter().map(|r| r.prompt_tokens as f64));
        let errors = rs.iter().filter(|r| r.error.is_some()).count();
        rows.push(vec![
            arm.clone(),
            rs.len().to_string(),
            percent(accuracy),
            judged.map_or("-".into(), percent),
            if arm == "memgpt" {
                "-".into()
            } else {
                format!("{passages:.1}")
            },
            format!("{calls:.2}"),
            format!("{tokens:.0}"),
            errors.to_string(),
        ]);
        json_rows.push(
            json!({ "arm": arm, "questions": rs.len(), "accuracy": accuracy,
            "judged_accuracy": judged, "passages_in_prompt": passages, "llm_calls": calls,
            "prompt_tokens": tokens, "errors": errors }),
        );
    }
    let markdown = format!(
        "## Document QA, NQ-Open ({}; context window {window} tokens)\n\n{}",
        shared.llm.model(),
        table(
            &[
                "arm",
                "questions",
                "accuracy",
                "judged",
                "passages in prompt",
                "LLM calls / q",
                "prompt tokens / q",
                "errors"
            ],
            &rows
        )
    );
    results.write_summary(
        markdown,
        &json!({ "model": shared.llm.model(), "window": window, "rows": json_rows }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_baseline_prompt_truncates_to_the_budget() {
        let documents: Vec<String> = (0..5)
            .map(|i| format!("doc{i} {}", "word ".repeat(100)))
            .collect();
        let counter = TiktokenCounter::cl100k();
        let (all, n) = baseline_prompt("q?", &documents, &[4, 3, 2, 1, 0], 100_000, &counter);
        assert_eq!(n, 5);
        assert!(
            all.find("doc4").unwrap() < all.find("doc0").unwrap(),
            "rank order"
        );
        let (cut, n) = baseline_prompt("q?", &documents, &[4, 3, 2, 1, 0], 250, &counter);
        assert!(counter.count_text(&cut) + counter.count_text(BASELINE_SYSTEM) <= 250);
        assert!((2..5).contains(&n), "{n}");
        assert!(cut.ends_with("Question: q?\nAnswer:"));
    }
}

/// Which ranking of the passages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Retriever {
    Bm25,
    Vector,
    Hybrid,
}

impl Retriever {
    pub const ALL: [Retriever; 3] = [Retriever::Bm25, Retriever::Vector, Retriever::Hybrid];

    pub fn name(self) -> &'static str {
        match self {
            Retriever::Bm25 => "bm25",
            Retriever::Vector => "vector",
            Retriever::Hybrid => "hybrid",
        }
    }
}

/// The passages of the document-QA corpus, ranked with the library's parts: BM25 over the
/// stemmed passages ([`Bm25Index`]), cosine similarity, and their reciprocal-rank fusion with
/// equal weights (what archival search does).
#[derive(Debug)]
pub struct TextIndex {
    bm25: Bm25Index,
    vectors: Vec<Vec<f32>>,
}

impl TextIndex {
    /// Indexes `texts`; `vectors` are their embeddings (empty: BM25 only).
    pub fn new<'a>(texts: impl IntoIterator<Item = &'a str>, vectors: Vec<Vec<f32>>) -> Self {
        Self {
            bm25: Bm25Index::new(texts),
            vectors,
        }
    }

    /// Passage indexes, best first (at most `k`). Vector and hybrid need `embedding`; hybrid
    /// without one is BM25.
    pub fn search(
        &self,
        query: &str,
        embedding: Option<&[f32]>,
        retriever: Retriever,
        k: usize,
    ) -> Vec<usize> {
        let ranked = |scores: Vec<f32>, keep: fn(f32) -> bool| {
            let mut order: Vec<usize> = (0..scores.len()).filter(|&i| keep(scores[i])).collect();
            order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
            order
        };
        let lexical = || ranked(self.bm25.scores(query), |s| s > 0.0);
        let semantic = embedding.filter(|_| !self.vectors.is_empty()).map(|e| {
            ranked(
                self.vectors
                    .iter()
                    .map(|v| crate::embed::dot(v, e))
                    .collect(),
                |_| true,
            )
        });
        let mut out = match (retriever, semantic) {
            (Retriever::Vector, Some(v)) => v,
            (Retriever::Vector, None) => Vec::new(),
            (Retriever::Hybrid, Some(v)) => {
                let b = lexical();
                reciprocal_rank_fusion(&[(&b[..], 1.0), (&v[..], 1.0)], RRF_K, |a, b| a.cmp(b))
                    .into_iter()
                    .map(|(i, _)| i)
                    .collect()
            }
            (Retriever::Bm25 | Retriever::Hybrid, _) => lexical(),
        };
        out.truncate(k);
        out
    }
}
