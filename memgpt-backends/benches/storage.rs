//! Storage benchmarks: archival vector search, recall text search and insert throughput for
//! every backend this build includes.
//!
//! ```text
//! MEMGPT_TEST_POSTGRES_URL=postgres://... \
//!   cargo bench -p memgpt-backends --all-features --bench storage -- --passages 100000,1000000 --messages 1000000
//! cargo bench -p memgpt-backends --all-features --bench storage -- --quick
//! cargo bench -p memgpt-backends --all-features --bench storage -- --only archival --backends usearch --passages 1000000
//! ```
//!
//! `--only steps|archival|recall` runs one part; `--backends WORD,...` keeps the backends whose
//! name contains one of the words; `--ef-sweep N,...` also searches each usearch index with
//! those candidate-list sizes (reopened with `ef_search=N`).
//!
//! Data is synthetic and deterministic: 384-d vectors drawn around 1,000 cluster centres (real
//! embeddings cluster by topic; uniformly random vectors are HNSW's worst case and no real
//! workload), and messages of 8-20 words from a 20,000-word vocabulary with Zipf frequencies.
//! Recall@10 is measured against an exact brute-force search of the same vectors.

use std::time::{Duration, Instant};

use chrono::{TimeZone, Utc};
use memgpt_backends::StoreConfig;
use memgpt_backends::vector::{TopK, cosine_to_unit, normalized};
use memgpt_core::AgentConfig;
use memgpt_core::embed::Embedding;
use memgpt_core::ids::AgentId;
use memgpt_core::message::{Message, MessageKind};
use memgpt_core::store::{
    AgentState, ArchivalQuery, Commit, Page, Passage, RecallQuery, SearchMode, Storage, Summary,
};

const DIM: usize = 384;
const MODEL: &str = "bench-clustered-384";

/// xorshift64*: deterministic, dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
    fn normal(&mut self) -> f32 {
        let (u1, u2) = (self.unit().max(1e-7), self.unit());
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f32::consts::PI * u2).cos()
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

struct Clusters {
    centres: Vec<Vec<f32>>,
}

impl Clusters {
    fn new(rng: &mut Rng, n: usize) -> Self {
        Self {
            centres: (0..n)
                .map(|_| normalized(&(0..DIM).map(|_| rng.normal()).collect::<Vec<_>>()))
                .collect(),
        }
    }
    fn sample(&self, rng: &mut Rng) -> Vec<f32> {
        let c = &self.centres[rng.below(self.centres.len())];
        normalized(
            &c.iter()
                .map(|x| x + 0.06 * rng.normal())
                .collect::<Vec<_>>(),
        )
    }
}

fn t0() -> chrono::DateTime<Utc> {
    Utc.with_ymd_and_hms(2024, 1, 1, 0, 0, 0).unwrap()
}

fn state(id: AgentId) -> AgentState {
    AgentState {
        id,
        name: "bench".into(),
        version: 0,
        config: AgentConfig::default(),
        system: String::new(),
        memory: Default::default(),
        summary: Summary::default(),
        fifo: Vec::new(),
        pinned: Vec::new(),
        pressure_warned: false,
        heartbeats_paused_until: None,
        memory_updated_at: t0(),
        created_at: t0(),
        updated_at: t0(),
    }
}

fn commit(state: &mut AgentState, messages: Vec<Message>, passages: Vec<Passage>) -> Commit {
    state.version += 1;
    Commit {
        state: state.clone(),
        messages,
        passages,
        deleted_passages: Vec::new(),
    }
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    samples[((samples.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1e3)
}

struct Backend {
    name: &'static str,
    url: String,
    _dir: Option<tempfile::TempDir>,
}

fn backends(kinds: &[(&'static str, &'static str)]) -> Vec<Backend> {
    let mut out = Vec::new();
    // `--backends a,b`: only the backends whose name contains one of the words.
    let only: Option<Vec<String>> =
        arg("--backends").map(|s| s.split(',').map(str::to_owned).collect());
    for (name, params) in kinds {
        if only
            .as_ref()
            .is_some_and(|words| !words.iter().any(|w| name.contains(w.as_str())))
        {
            continue;
        }
        if *name == "postgres" {
            match std::env::var("MEMGPT_TEST_POSTGRES_URL") {
                Ok(base) => {
                    let schema = format!("memgpt_bench_{}", std::process::id());
                    let sep = if base.contains('?') { '&' } else { '?' };
                    out.push(Backend {
                        name,
                        url: format!("{base}{sep}schema={schema}_{}", out.len()),
                        _dir: None,
                    });
                }
                Err(_) => eprintln!("skipping postgres: MEMGPT_TEST_POSTGRES_URL is not set"),
            }
            continue;
        }
        let dir = tempfile::tempdir_in(
            std::env::var("MEMGPT_BENCH_DIR")
                .unwrap_or_else(|_| std::env::temp_dir().display().to_string()),
        )
        .expect("temporary directory");
        out.push(Backend {
            name,
            url: format!("sqlite://{}{params}", dir.path().display()),
            _dir: Some(dir),
        });
    }
    out
}

async fn open(url: &str) -> Storage {
    url.parse::<StoreConfig>()
        .expect("store URL")
        .open()
        .await
        .expect("open store")
}

/// After a bulk load, PostgreSQL needs fresh planner statistics (autovacuum would provide them
/// within a minute); other backends need nothing.
async fn settle(url: &str) {
    #[cfg(feature = "postgres")]
    if url.starts_with("postgres") {
        let store = memgpt_backends::PgStore::open(memgpt_backends::PgOptions::new(url))
            .await
            .expect("open store");
        store.analyze().await.expect("analyze");
    }
    let _ = url;
}

async fn archival(sizes: &[usize], queries: usize) {
    println!("\n## Archival vector search (384-d, clustered)\n");
    println!(
        "| passages | backend | insert passages/s | p50 ms | p99 ms | of which fetch p50 ms | recall@10 | queries |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for &n in sizes {
        let mut rng = Rng(0x5eed_0000 + n as u64);
        let clusters = Clusters::new(&mut rng, 1_000);
        let vectors: Vec<Vec<f32>> = (0..n).map(|_| clusters.sample(&mut rng)).collect();
        let probes: Vec<Vec<f32>> = (0..queries).map(|_| clusters.sample(&mut rng)).collect();
        // Ground truth by brute force (keys are insertion positions).
        let truth: Vec<Vec<usize>> = probes
            .iter()
            .map(|q| {
                let mut top = TopK::new(10);
                for (i, v) in vectors.iter().enumerate() {
                    top.push(cosine_to_unit(q, v), i as i64);
                }
                top.into_sorted()
                    .into_iter()
                    .map(|(_, i)| i as usize)
                    .collect()
            })
            .collect();
        let kinds: &[(&str, &str)] = &[
            ("sqlite exact scan", "?recall=fts5&vectors=exact"),
            ("sqlite + usearch f32", "?recall=fts5&vectors=usearch"),
            (
                "sqlite + usearch f16",
                "?recall=fts5&vectors=usearch&quantization=f16",
            ),
            ("postgres", ""),
        ];
        for backend in backends(kinds) {
            if backend.name == "postgres" && n > postgres_limit() {
                println!(
                    "| {n} | postgres | (not run: above --postgres-max-passages {}) | | | | | |",
                    postgres_limit()
                );
                continue;
            }
            let mut s = open(&backend.url).await;
            let mut a = state(AgentId::new());
            s.agents.create_agent(&a).await.expect("create");
            let started = Instant::now();
            let mut texts = Vec::with_capacity(n);
            for (chunk_no, chunk) in vectors.chunks(5_000).enumerate() {
                let passages: Vec<Passage> = chunk
                    .iter()
                    .enumerate()
                    .map(|(j, v)| {
                        let i = chunk_no * 5_000 + j;
                        let mut p = Passage::new(a.id, format!("passage {i}"), t0());
                        p.embedding = Some(Embedding {
                            model: MODEL.into(),
                            vector: v.clone(),
                        });
                        p
                    })
                    .collect();
                texts.extend(passages.iter().map(|p| p.text.clone()));
                s.agents
                    .commit(&commit(&mut a, vec![], passages))
                    .await
                    .expect("commit");
            }
            settle(&backend.url).await;
            // The first search also waits for any index still catching up.
            let warm = ArchivalQuery {
                text: String::new(),
                embedding: Some(Embedding {
                    model: MODEL.into(),
                    vector: probes[0].clone(),
                }),
                mode: SearchMode::Vector,
                page: Page::first(10),
            };
            s.archival.search(a.id, &warm).await.expect("search");
            let insert_rate = n as f64 / started.elapsed().as_secs_f64();
            let budget = if backend.name.contains("exact") && n > 200_000 {
                queries.min(20)
            } else {
                queries
            };
            let row = measure(&s, a.id, &probes, &truth, budget).await;
            println!("| {n} | {} | {:.0} | {} |", backend.name, insert_rate, row);
            // The same index searched with other candidate-list sizes: the recall/latency
            // trade-off, without building it again.
            if backend.name.contains("usearch") {
                for ef in ef_sweep() {
                    drop(s);
                    s = open(&format!("{}&ef_search={ef}", backend.url)).await;
                    s.archival.search(a.id, &warm).await.expect("search");
                    let row = measure(&s, a.id, &probes, &truth, budget).await;
                    println!("| {n} | {} (ef {ef}) | | {row} |", backend.name);
                }
            }
            drop(texts);
        }
    }
}

/// Searches `probes`, returning the table cells `p50 | p99 | fetch p50 | recall@10 | queries`.
async fn measure(
    s: &Storage,
    agent: AgentId,
    probes: &[Vec<f32>],
    truth: &[Vec<usize>],
    budget: usize,
) -> String {
    let mut latencies = Vec::with_capacity(budget);
    let mut fetches = Vec::with_capacity(budget);
    let mut found = 0usize;
    for (q, expected) in probes.iter().zip(truth).take(budget) {
        let query = ArchivalQuery {
            text: String::new(),
            embedding: Some(Embedding {
                model: MODEL.into(),
                vector: q.clone(),
            }),
            mode: SearchMode::Vector,
            page: Page::first(10),
        };
        let t = Instant::now();
        let page = s.archival.search(agent, &query).await.expect("search");
        latencies.push(t.elapsed());
        // The storage part of that: reading the same passages back by id.
        let ids: Vec<_> = page.hits.iter().map(|h| h.item.id).collect();
        let t = Instant::now();
        s.archival.get_passages(agent, &ids).await.expect("fetch");
        fetches.push(t.elapsed());
        let got: Vec<usize> = page
            .hits
            .iter()
            .filter_map(|h| h.item.text.strip_prefix("passage ")?.parse().ok())
            .collect();
        found += expected.iter().filter(|i| got.contains(i)).count();
    }
    let recall = found as f64 / (budget * 10) as f64;
    format!(
        "{} | {} | {} | {:.3} | {budget}",
        ms(percentile(&mut latencies.clone(), 0.5)),
        ms(percentile(&mut latencies, 0.99)),
        ms(percentile(&mut fetches, 0.5)),
        recall
    )
}

/// `--ef-sweep 192,384`: extra search candidate-list sizes measured on each usearch index.
fn ef_sweep() -> Vec<usize> {
    arg("--ef-sweep")
        .map(|s| s.split(',').filter_map(|n| n.parse().ok()).collect())
        .unwrap_or_default()
}

const VOCABULARY: usize = 20_000;

fn word(i: usize) -> String {
    // Pronounceable pseudo-words, distinct per index.
    const SYLLABLES: [&str; 20] = [
        "ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "ze", "po", "da", "fe", "gu", "hi", "jo",
        "ma", "ni", "pe", "qu", "ri",
    ];
    let mut n = i;
    let mut w = String::new();
    loop {
        w.push_str(SYLLABLES[n % 20]);
        n /= 20;
        if n == 0 {
            break;
        }
    }
    w
}

/// A Zipf-distributed vocabulary index (s = 1), by inverse-CDF over precomputed weights.
struct Zipf {
    cumulative: Vec<f64>,
}

impl Zipf {
    fn new(n: usize) -> Self {
        let mut total = 0.0;
        let cumulative = (1..=n)
            .map(|k| {
                total += 1.0 / k as f64;
                total
            })
            .collect::<Vec<_>>();
        let last = total;
        Self {
            cumulative: cumulative.into_iter().map(|c| c / last).collect(),
        }
    }
    fn sample(&self, rng: &mut Rng) -> usize {
        let u = rng.unit() as f64;
        self.cumulative
            .partition_point(|c| *c < u)
            .min(self.cumulative.len() - 1)
    }
}

async fn recall(messages: usize, queries: usize) {
    println!("\n## Recall text search ({messages} messages, one agent)\n");
    println!("| backend | insert messages/s | p50 ms | p99 ms | mean hits | queries |");
    println!("|---|---|---|---|---|---|");
    let kinds: &[(&str, &str)] = &[
        ("sqlite fts5", "?recall=fts5&vectors=exact"),
        ("sqlite + tantivy", "?recall=tantivy&vectors=exact"),
        ("postgres", ""),
    ];
    let zipf = Zipf::new(VOCABULARY);
    let words: Vec<String> = (0..VOCABULARY).map(word).collect();
    for backend in backends(kinds) {
        let s = open(&backend.url).await;
        let mut a = state(AgentId::new());
        s.agents.create_agent(&a).await.expect("create");
        let mut rng = Rng(0x7e47);
        let started = Instant::now();
        let mut done = 0;
        while done < messages {
            let batch = (messages - done).min(5_000);
            let ms: Vec<Message> = (0..batch)
                .map(|i| {
                    let len = 8 + rng.below(13);
                    let text = (0..len)
                        .map(|_| words[zipf.sample(&mut rng)].as_str())
                        .collect::<Vec<_>>()
                        .join(" ");
                    Message::new(
                        a.id,
                        MessageKind::User,
                        text,
                        t0() + chrono::Duration::seconds((done + i) as i64),
                    )
                })
                .collect();
            s.agents
                .commit(&commit(&mut a, ms, vec![]))
                .await
                .expect("commit");
            done += batch;
        }
        settle(&backend.url).await;
        let warm = RecallQuery::text(&words[100], Page::first(5));
        s.recall.search(a.id, &warm).await.expect("search");
        let insert_rate = messages as f64 / started.elapsed().as_secs_f64();
        let mut qrng = Rng(0x9e37);
        let mut latencies = Vec::new();
        let mut hits = 0usize;
        for _ in 0..queries {
            // Two mid-frequency words, like a question's content words.
            let q = format!(
                "{} {}",
                words[50 + qrng.below(2_000)],
                words[50 + qrng.below(2_000)]
            );
            let t = Instant::now();
            let page = s
                .recall
                .search(a.id, &RecallQuery::text(&q, Page::first(5)))
                .await
                .expect("search");
            latencies.push(t.elapsed());
            hits += page.total;
        }
        println!(
            "| {} | {:.0} | {} | {} | {} | {queries} |",
            backend.name,
            insert_rate,
            ms(percentile(&mut latencies.clone(), 0.5)),
            ms(percentile(&mut latencies, 0.99)),
            hits / queries
        );
    }
}

async fn steps(commits: usize) {
    println!("\n## Step-sized commits (3 messages + 1 embedded passage each)\n");
    println!("| backend | commits/s | messages/s | passages/s | p50 ms | p99 ms |");
    println!("|---|---|---|---|---|---|");
    let kinds: &[(&str, &str)] = &[
        ("sqlite (fts5, exact)", "?recall=fts5&vectors=exact"),
        ("sqlite + tantivy + usearch", ""),
        ("postgres", ""),
    ];
    for backend in backends(kinds) {
        let s = open(&backend.url).await;
        let mut a = state(AgentId::new());
        s.agents.create_agent(&a).await.expect("create");
        let mut rng = Rng(0xabc);
        let clusters = Clusters::new(&mut rng, 50);
        let mut latencies = Vec::with_capacity(commits);
        let started = Instant::now();
        for i in 0..commits {
            let messages = (0..3)
                .map(|j| {
                    Message::new(
                        a.id,
                        MessageKind::User,
                        format!("step {i} message {j} about things"),
                        t0(),
                    )
                })
                .collect();
            let mut p = Passage::new(a.id, format!("fact {i}"), t0());
            p.embedding = Some(Embedding {
                model: MODEL.into(),
                vector: clusters.sample(&mut rng),
            });
            let c = commit(&mut a, messages, vec![p]);
            let t = Instant::now();
            s.agents.commit(&c).await.expect("commit");
            latencies.push(t.elapsed());
        }
        let secs = started.elapsed().as_secs_f64();
        println!(
            "| {} | {:.0} | {:.0} | {:.0} | {} | {} |",
            backend.name,
            commits as f64 / secs,
            3.0 * commits as f64 / secs,
            commits as f64 / secs,
            ms(percentile(&mut latencies.clone(), 0.5)),
            ms(percentile(&mut latencies, 0.99))
        );
    }
}

/// pgvector maintains its HNSW index row by row; past this size loading takes too long on a
/// 2-core machine for a routine run.
fn postgres_limit() -> usize {
    arg("--postgres-max-passages")
        .and_then(|s| s.parse().ok())
        .unwrap_or(200_000)
}

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let sizes: Vec<usize> = arg("--passages")
        .map(|s| s.split(',').filter_map(|n| n.parse().ok()).collect())
        .unwrap_or_else(|| if quick { vec![20_000] } else { vec![100_000] });
    let messages: usize = arg("--messages")
        .and_then(|s| s.parse().ok())
        .unwrap_or(if quick { 50_000 } else { 1_000_000 });
    let queries: usize = arg("--queries").and_then(|s| s.parse().ok()).unwrap_or(200);
    let commits: usize = arg("--commits")
        .and_then(|s| s.parse().ok())
        .unwrap_or(if quick { 300 } else { 2_000 });
    let only = arg("--only");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        if only.as_deref().is_none_or(|o| o == "steps") {
            steps(commits).await;
        }
        if only.as_deref().is_none_or(|o| o == "archival") {
            archival(&sizes, queries).await;
        }
        if only.as_deref().is_none_or(|o| o == "recall") {
            recall(messages, queries).await;
        }
    });
}
