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
//! `--only steps|queue|archival|recall` runs one part (`queue`: the bytes a step's commit
//! writes against the length of the FIFO queue, at `--queue-lengths N,...`, default
//! 100,10000,100000); `--backends WORD,...` keeps the backends whose
//! name contains one of the words; `--ef-sweep N,...` also searches each usearch index with
//! those candidate-list sizes (reopened with `ef_search=N`; an entry may carry more store URL
//! parameters after a `&`); `--index-only N,...` also searches each usearch
//! backend's saved index file directly with the usearch crate at those sizes (default 96), the
//! HNSW part alone. `--store DIR` keeps each SQLite backend's archival (and recall) data
//! directory in `DIR` and reuses it when it already holds the same dataset, so a 1M index is
//! built once for several runs. `--queries N` (default 200) are measured after `--warm N` (default 100) other
//! queries searched unmeasured; `--repeat N` measures the same queries N times (for profilers).
//!
//! Vectors are 384-d and deterministic (see `vectors.rs`): by default a clustered worst case;
//! with `--vectors DIR`, a dataset grown from real all-MiniLM-L6-v2 embeddings of the shared
//! data, searched with real question embeddings:
//!
//! ```text
//! cargo run --release --example eval -- embeddings --out target/vectors
//! cargo bench -p memgpt-backends --all-features --bench storage -- --vectors target/vectors --calibrate
//! cargo bench -p memgpt-backends --all-features --bench storage -- --vectors target/vectors \
//!   --only archival --backends usearch --passages 1000000 --ef-sweep 32,64
//! ```
//!
//! `--calibrate` compares the grown data with held-out real embeddings at the same size.
//! Messages are 8-20 words from a 20,000-word vocabulary with Zipf frequencies. Recall@10 is
//! measured against an exact brute-force search of the same vectors.

use std::time::{Duration, Instant};

use chrono::{TimeZone, Utc};
use memgpt_backends::StoreConfig;
use memgpt_core::AgentConfig;
use memgpt_core::embed::Embedding;
use memgpt_core::ids::AgentId;
use memgpt_core::message::{Message, MessageKind};
use memgpt_core::retrieval::query_terms;
use memgpt_core::store::{
    AgentState, ArchivalQuery, Commit, MessageEmbedding, Page, Passage, RecallQuery, SearchMode,
    Storage, Summary,
};

mod vectors;

use vectors::{DIM, Dataset, Rng};

const MODEL: &str = "bench-384";

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
        pending_approval: None,
        consolidated_until: None,
    }
}

fn commit(state: &mut AgentState, messages: Vec<Message>, passages: Vec<Passage>) -> Commit {
    state.version += 1;
    Commit {
        passages,
        messages,
        ..Commit::state(state.clone())
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

impl Backend {
    /// `--store DIR`: a kept data directory (SQLite, in `DIR`) or schema (PostgreSQL) per
    /// backend and dataset size instead of a fresh one, reused when it already holds the same
    /// dataset (see [`load`]).
    fn keep(&mut self, root: &str, n: usize) {
        let slug: String = self
            .name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let Some((base, params)) = self.url.split_once('?') else {
            return;
        };
        self.url = if self.url.starts_with("sqlite:") {
            let dir = workspace_path(root).join(format!("{slug}-{n}"));
            format!("sqlite://{}?{params}", dir.display())
        } else {
            // The schema parameter is the last one `backends` adds.
            let params = params
                .split_once("schema=")
                .map_or("", |(before, _)| before);
            format!("{base}?{params}schema=memgpt_bench_kept_{slug}_{n}")
        };
        self._dir = None;
    }
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

/// The dataset of `n` base vectors: grown from the `real` embeddings if given (`--vectors
/// DIR`), else the clustered worst case.
fn dataset(real: Option<&RealVectors>, n: usize, queries: usize) -> Dataset {
    let seed = 0x5eed_0000 + n as u64;
    match real {
        Some((anchors, real_queries)) => vectors::grown(seed, anchors, real_queries, n, queries),
        None => vectors::clustered(seed, n, queries),
    }
}

/// `path` taken from the workspace root if relative (cargo runs benchmarks in the package).
fn workspace_path(path: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(path)
}

/// Real base vectors and real query vectors.
type RealVectors = (Vec<Vec<f32>>, Vec<Vec<f32>>);

/// `--vectors DIR`: the real embeddings `DIR/real-base.fvecs` and `DIR/real-query.fvecs`; a
/// relative `DIR` is taken from the workspace root (cargo runs benchmarks in the package).
fn real_vectors() -> Option<RealVectors> {
    let dir = workspace_path(&arg("--vectors")?);
    let read = |name: &str| {
        vectors::read_fvecs(&dir.join(name)).unwrap_or_else(|e| {
            panic!(
                "reading {}: {e} (write it with `cargo run --release --example eval -- embeddings --out DIR`)",
                dir.join(name).display()
            )
        })
    };
    Some((read("real-base.fvecs"), read("real-query.fvecs")))
}

async fn archival(sizes: &[usize], queries: usize) {
    let real = real_vectors();
    for &n in sizes {
        // `--warm N` more queries (default 100), searched unmeasured before each measurement, so
        // the figures are a running store's rather than the first searches after opening it.
        let warm: usize = arg("--warm").and_then(|s| s.parse().ok()).unwrap_or(100);
        let mut data = dataset(real.as_ref(), n, queries + warm);
        let warm_probes = data.queries.split_off(queries.min(data.queries.len()));
        println!(
            "\n## Archival vector search ({DIM}-d, {}, {n} passages)\n",
            data.name
        );
        println!(
            "| passages | backend | insert passages/s | p50 ms | p99 ms | of which fetch p50 ms | recall@10 | queries |"
        );
        println!("|---|---|---|---|---|---|---|---|");
        let truth = vectors::ground_truth(&data, 10);
        let kinds: &[(&str, &str)] = &[
            ("sqlite exact scan", "?recall=fts5&vectors=exact"),
            ("sqlite + usearch f32", "?recall=fts5&vectors=usearch"),
            (
                "sqlite + usearch f16",
                "?recall=fts5&vectors=usearch&quantization=f16",
            ),
            (
                "sqlite + usearch bf16",
                "?recall=fts5&vectors=usearch&quantization=bf16",
            ),
            (
                "sqlite + usearch i8",
                "?recall=fts5&vectors=usearch&quantization=i8",
            ),
            ("postgres", ""),
        ];
        for mut backend in backends(kinds) {
            if let Some(root) = arg("--store") {
                backend.keep(&root, n);
            }
            if backend.name == "postgres" && n > postgres_limit() {
                println!(
                    "| {n} | postgres | (not run: above --postgres-max-passages {}) | | | | | |",
                    postgres_limit()
                );
                continue;
            }
            let (s, agent, insert_rate) = load(&backend.url, &data).await;
            let budget = if backend.name.contains("exact") && n > 200_000 {
                queries.min(20)
            } else {
                queries
            };
            // An exact scan has no index to warm, and each of its searches reads everything.
            let warm_up_probes = if backend.name.contains("exact") {
                &warm_probes[..warm_probes.len().min(1)]
            } else {
                &warm_probes[..]
            };
            warm_up(&s, agent, warm_up_probes).await;
            let row = measure(&s, agent, &data.queries, &truth, budget).await;
            println!("| {n} | {} | {:.0} | {} |", backend.name, insert_rate, row);
            // The same index searched with other candidate-list sizes: the recall/latency
            // trade-off, without building it again.
            if backend.name.contains("usearch") || backend.name == "postgres" {
                let mut s = s;
                for params in ef_sweep() {
                    drop(s);
                    s = open(&format!("{}&{params}", backend.url)).await;
                    warm_up(&s, agent, &warm_probes).await;
                    let row = measure(&s, agent, &data.queries, &truth, budget).await;
                    let label = params.replace("ef_search=", "ef ").replace('&', ", ");
                    println!("| {n} | {} ({label}) | | {row} |", backend.name);
                }
                // Closing the store saves its index; search that file on its own.
                drop(s);
                #[cfg(feature = "usearch")]
                for ef in index_only_efs()
                    .into_iter()
                    .filter(|_| backend.name.contains("usearch"))
                {
                    let row = index_only(&backend.url, &data.queries, &truth, &warm_probes, ef);
                    println!(
                        "| {n} | {} index alone (ef {ef}) | | {row} |",
                        backend.name.trim_start_matches("sqlite + ")
                    );
                }
            }
        }
    }
}

/// `--index-only 64,96`: candidate-list sizes at which each usearch backend's saved index is
/// also searched on its own (default 96, the store's default).
#[cfg(feature = "usearch")]
fn index_only_efs() -> Vec<usize> {
    arg("--index-only")
        .map(|s| s.split(',').filter_map(|n| n.parse().ok()).collect())
        .unwrap_or_else(|| vec![96])
}

/// The saved usearch index of the store at `url`, searched directly with the usearch crate:
/// the HNSW part of a store search, without reading the hits from SQLite. Keys are passage
/// sequence numbers, which the bulk load assigned in dataset order from 1.
#[cfg(feature = "usearch")]
fn index_only(
    url: &str,
    probes: &[Vec<f32>],
    truth: &[Vec<usize>],
    warm: &[Vec<f32>],
    ef: usize,
) -> Measured {
    use usearch::{Index, IndexOptions, MetricKind, ScalarKind};
    let (path, params) = url
        .trim_start_matches("sqlite://")
        .split_once('?')
        .unwrap_or((url, ""));
    let param = |name: &str| {
        params
            .split('&')
            .find_map(|p| p.strip_prefix(name)?.strip_prefix('='))
    };
    let quantization = match param("quantization").unwrap_or("f32") {
        "f16" => ScalarKind::F16,
        "bf16" => ScalarKind::BF16,
        "i8" => ScalarKind::I8,
        _ => ScalarKind::F32,
    };
    let file = std::fs::read_dir(std::path::Path::new(path).join("archival.usearch"))
        .expect("index directory")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "usearch"))
        .expect("a saved index");
    let index = Index::new(&IndexOptions {
        dimensions: DIM,
        metric: MetricKind::Cos,
        quantization,
        connectivity: param("connectivity").map_or(16, |c| c.parse().expect("connectivity")),
        expansion_add: 128,
        expansion_search: ef,
        multi: false,
    })
    .expect("index");
    index.load(&file.to_string_lossy()).expect("load the index");
    index.change_expansion_search(ef);
    for probe in warm {
        index.search(probe, 10).expect("search");
    }
    let mut latencies = Vec::with_capacity(probes.len());
    let mut found = 0usize;
    for (probe, expected) in probes.iter().zip(truth) {
        let t = Instant::now();
        let matches = index.search(probe, 10).expect("search");
        latencies.push(t.elapsed());
        found += matches
            .keys
            .iter()
            .filter(|key| expected.contains(&(**key as usize - 1)))
            .count();
    }
    Measured {
        p50: percentile(&mut latencies, 0.5),
        p99: percentile(&mut latencies, 0.99),
        fetch_p50: Duration::ZERO,
        recall: found as f64 / (probes.len() * 10) as f64,
        queries: probes.len(),
    }
}

/// A store at `url` holding `data`'s base vectors as one agent's passages (`passage {i}`),
/// with the insert rate (passages/s, until the indexes have caught up).
async fn load(url: &str, data: &Dataset) -> (Storage, AgentId, f64) {
    let s = open(url).await;
    if let [kept] = s
        .agents
        .list_agents()
        .await
        .expect("list agents")
        .as_slice()
    {
        let count = s.archival.count_passages(kept.id).await.expect("count");
        if count == data.base.len() as u64 {
            eprintln!("reusing the {count} passages kept in {url}");
            warm_up(&s, kept.id, &data.queries[..1]).await;
            return (s, kept.id, f64::NAN);
        }
    }
    let mut a = state(AgentId::new());
    s.agents.create_agent(&a).await.expect("create");
    let started = Instant::now();
    for (chunk_no, chunk) in data.base.chunks(5_000).enumerate() {
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
        s.agents
            .commit(&commit(&mut a, vec![], passages))
            .await
            .expect("commit");
    }
    settle(url).await;
    // The first search also waits for any index still catching up.
    warm_up(&s, a.id, &data.queries[..1]).await;
    let rate = data.base.len() as f64 / started.elapsed().as_secs_f64();
    (s, a.id, rate)
}

/// A top-10 vector search for `probe`.
fn vector_query(probe: &[f32]) -> ArchivalQuery {
    ArchivalQuery::new("", SearchMode::Vector, Page::first(10)).with_embedding(Embedding {
        model: MODEL.into(),
        vector: probe.to_vec(),
    })
}

/// Searches each of `probes`, unmeasured.
async fn warm_up(s: &Storage, agent: AgentId, probes: &[Vec<f32>]) {
    for probe in probes {
        s.archival
            .search(agent, &vector_query(probe))
            .await
            .expect("search");
    }
}

/// `--calibrate`: the grown dataset against real embeddings at the same size. The real base is
/// split in halves: one half is the real dataset (with the real queries), the other half
/// anchors a grown dataset of the same size. Printed per dataset: neighbourhood shape and what
/// a deliberately small HNSW search (`ef_search` 16) finds, so "harder or easier than real
/// data" is measured rather than assumed.
async fn calibrate(queries: usize) {
    let (base, real_queries) =
        real_vectors().unwrap_or_else(|| panic!("--calibrate needs --vectors DIR"));
    let mut rng = Rng(0xca1);
    let shuffled = vectors::pick(&mut rng, &base, base.len());
    let (held_out, anchors) = shuffled.split_at(base.len() / 2);
    let n = held_out.len();
    let queries_used = vectors::pick(&mut rng, &real_queries, queries);
    let datasets = [
        Dataset {
            name: "real (held-out half)",
            base: held_out.to_vec(),
            queries: queries_used.clone(),
        },
        vectors::grown(0xca2, anchors, &real_queries, n, queries),
        vectors::clustered(0xca3, n, queries),
    ];
    println!("\n## Calibration: {n} base vectors, {queries} queries\n");
    println!(
        "| dataset | LID (MLE, k=20) | top-1 cosine | top-10 cosine | recall@10 at ef 16 | p50 ms |"
    );
    println!("|---|---|---|---|---|---|");
    for data in &datasets {
        let shape = vectors::shape(data);
        let truth = vectors::ground_truth(data, 10);
        let dir = tempfile::tempdir().expect("temporary directory");
        let url = format!(
            "sqlite://{}?recall=fts5&vectors=usearch&ef_search=16",
            dir.path().display()
        );
        let (s, agent, _) = load(&url, data).await;
        let row = measure(&s, agent, &data.queries, &truth, data.queries.len()).await;
        println!(
            "| {} | {:.1} | {:.3} | {:.3} | {:.3} | {} |",
            data.name,
            shape.lid,
            shape.top1,
            shape.top10,
            row.recall,
            ms(row.p50)
        );
    }
}

/// What [`measure`] found; displayed as the table cells
/// `p50 | p99 | fetch p50 | recall@10 | queries`.
struct Measured {
    p50: Duration,
    p99: Duration,
    fetch_p50: Duration,
    recall: f64,
    queries: usize,
}

impl std::fmt::Display for Measured {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} | {} | {} | {:.3} | {}",
            ms(self.p50),
            ms(self.p99),
            ms(self.fetch_p50),
            self.recall,
            self.queries
        )
    }
}

/// Searches the first `budget` of `probes`, timing each search and a separate read of its hits.
async fn measure(
    s: &Storage,
    agent: AgentId,
    probes: &[Vec<f32>],
    truth: &[Vec<usize>],
    budget: usize,
) -> Measured {
    let mut latencies = Vec::with_capacity(budget);
    let mut fetches = Vec::with_capacity(budget);
    let mut found = 0usize;
    // `--repeat N`: the same queries N times (longer runs, for profilers).
    let repeat: usize = arg("--repeat").and_then(|s| s.parse().ok()).unwrap_or(1);
    for (q, expected) in probes
        .iter()
        .zip(truth)
        .take(budget)
        .cycle()
        .take(budget * repeat)
    {
        let query = vector_query(q);
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
    Measured {
        p50: percentile(&mut latencies, 0.5),
        p99: percentile(&mut latencies, 0.99),
        fetch_p50: percentile(&mut fetches, 0.5),
        recall: found as f64 / (budget * repeat * 10) as f64,
        queries: budget,
    }
}

/// `--ef-sweep 192,384`: extra search candidate-list sizes measured on each usearch index.
/// An entry may carry more store URL parameters to reopen with (`96&sync=full`).
fn ef_sweep() -> Vec<String> {
    arg("--ef-sweep")
        .map(|s| {
            s.split(',')
                .map(|entry| match entry.split_once('&') {
                    Some((ef, rest)) => format!("ef_search={ef}&{rest}"),
                    None => format!("ef_search={entry}"),
                })
                .collect()
        })
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

/// Recall search as `conversation_search` runs it, over one agent's `messages`: a conversation
/// of two named speakers in sessions of 20 turns a day apart, Zipf-distributed pseudo-words,
/// every turn embedded (vectors from `dataset`: grown from real MiniLM embeddings with
/// `--vectors DIR`). Each query is two mid-frequency words and a query vector; "words" ranks by
/// BM25 alone (no embedder), "hybrid" adds the vector (what an agent with an embedder runs).
/// PostgreSQL loads at most `--postgres-max-messages` (default 200,000): it inserts far slower.
async fn recall(messages: usize, queries: usize) {
    let postgres_max: usize = arg("--postgres-max-messages")
        .and_then(|s| s.parse().ok())
        .unwrap_or(200_000);
    let real = real_vectors();
    let data = dataset(real.as_ref(), messages, queries);
    println!(
        "\n## Recall search ({messages} messages, one agent, {} vectors)\n",
        data.name
    );
    println!(
        "| backend | messages | insert messages/s | words p50 ms | words p99 ms | hybrid p50 ms | hybrid p99 ms | queries |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let kinds: &[(&str, &str)] = &[
        ("sqlite fts5 + usearch", "?recall=fts5&vectors=usearch"),
        (
            "sqlite + tantivy + usearch",
            "?recall=tantivy&vectors=usearch",
        ),
        ("postgres", ""),
    ];
    let zipf = Zipf::new(VOCABULARY);
    let words: Vec<String> = (0..VOCABULARY).map(word).collect();
    for mut backend in backends(kinds) {
        let n = if backend.name == "postgres" {
            messages.min(postgres_max)
        } else {
            messages
        };
        if let Some(root) = arg("--store") {
            backend.keep(&root, n);
        }
        let s = open(&backend.url).await;
        // A kept store that already holds this conversation is searched as it is.
        let kept = match s
            .agents
            .list_agents()
            .await
            .expect("list agents")
            .as_slice()
        {
            [kept] if s.recall.count_messages(kept.id).await.expect("count") == n as u64 => {
                eprintln!("reusing the {n} messages kept in {}", backend.url);
                Some(kept.clone())
            }
            _ => None,
        };
        let reused = kept.is_some();
        let mut a = match kept {
            Some(kept) => kept,
            None => {
                let a = state(AgentId::new());
                s.agents.create_agent(&a).await.expect("create");
                a
            }
        };
        let mut rng = Rng(0x7e47);
        let started = Instant::now();
        let mut done = if reused { n } else { 0 };
        while done < n {
            let batch = (n - done).min(5_000);
            let mut ms = Vec::with_capacity(batch);
            let mut embeddings = Vec::with_capacity(batch);
            for i in done..done + batch {
                let len = 8 + rng.below(13);
                let text = (0..len)
                    .map(|_| words[zipf.sample(&mut rng)].as_str())
                    .collect::<Vec<_>>()
                    .join(" ");
                let (session, turn) = (i / 20, i % 20);
                let at = t0()
                    + chrono::Duration::days(session as i64)
                    + chrono::Duration::minutes(turn as i64);
                let (kind, name) = if i % 2 == 0 {
                    (MessageKind::User, "Ann")
                } else {
                    (MessageKind::Assistant, "Bob")
                };
                let mut m = Message::new(a.id, kind, text, at);
                m.name = Some(name.into());
                embeddings.push(MessageEmbedding {
                    message: m.id,
                    window: 0,
                    embedding: Embedding {
                        model: MODEL.into(),
                        vector: data.base[i].clone(),
                    },
                });
                ms.push(m);
            }
            let mut c = commit(&mut a, ms, vec![]);
            c.message_embeddings = embeddings;
            s.agents.commit(&c).await.expect("commit");
            done += batch;
        }
        settle(&backend.url).await;
        // The first search catches the derived indexes up (tantivy, usearch): part of the load.
        let warm = RecallQuery::text(&words[100], Page::first(5)).with_embedding(Embedding {
            model: MODEL.into(),
            vector: data.queries[0].clone(),
        });
        s.recall.search(a.id, &warm).await.expect("search");
        let insert_rate = if reused {
            f64::NAN
        } else {
            n as f64 / started.elapsed().as_secs_f64()
        };
        let mut qrng = Rng(0x9e37);
        let mut lexical = Vec::new();
        let mut hybrid = Vec::new();
        let mut parts: [Vec<Duration>; 3] = Default::default();
        for q in 0..queries {
            // Two mid-frequency words, like a question's content words.
            let text = format!(
                "{} {}",
                words[50 + qrng.below(2_000)],
                words[50 + qrng.below(2_000)]
            );
            let words_only = RecallQuery::text(&text, Page::first(5));
            let t = Instant::now();
            s.recall.search(a.id, &words_only).await.expect("search");
            lexical.push(t.elapsed());
            let with_vector = words_only.with_embedding(Embedding {
                model: MODEL.into(),
                vector: data.queries[q % data.queries.len()].clone(),
            });
            let t = Instant::now();
            let page = s.recall.search(a.id, &with_vector).await.expect("search");
            hybrid.push(t.elapsed());
            assert!(
                !page.hits.is_empty(),
                "a hybrid search always finds neighbours"
            );
            // Where the hybrid search's time goes: its store primitives, one at a time.
            let terms = query_terms(&text);
            let pool = with_vector.ranking.pool(with_vector.page.depth());
            let t = Instant::now();
            let lexical = s
                .recall
                .text_candidates(a.id, &terms, &with_vector, pool)
                .await
                .expect("text candidates");
            parts[0].push(t.elapsed());
            let embedding = with_vector.embedding.as_ref().expect("a query vector");
            let t = Instant::now();
            let semantic = s
                .recall
                .vector_candidates(a.id, embedding, &with_vector, pool)
                .await
                .expect("vector candidates");
            parts[1].push(t.elapsed());
            let mut keys = lexical.keys;
            for key in semantic {
                if !keys.contains(&key) {
                    keys.push(key);
                }
            }
            let t = Instant::now();
            s.recall.candidates(a.id, &keys).await.expect("candidates");
            parts[2].push(t.elapsed());
        }
        println!(
            "| {} | {n} | {:.0} | {} | {} | {} | {} | {queries} |",
            backend.name,
            insert_rate,
            ms(percentile(&mut lexical.clone(), 0.5)),
            ms(percentile(&mut lexical, 0.99)),
            ms(percentile(&mut hybrid.clone(), 0.5)),
            ms(percentile(&mut hybrid, 0.99)),
        );
        let [text, vector, fetch] = &mut parts;
        println!(
            "|   hybrid parts, p50 ms: text candidates {} / vector candidates {} / reading candidates {} | | | | | | | |",
            ms(percentile(text, 0.5)),
            ms(percentile(vector, 0.5)),
            ms(percentile(fetch, 0.5)),
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
        let vectors = vectors::clustered(0xabc, commits, 0).base;
        let mut latencies = Vec::with_capacity(commits);
        let started = Instant::now();
        for (i, vector) in vectors.into_iter().enumerate() {
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
                vector,
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

/// The next step's commit: `messages` join the end of the queue and the `evict` oldest leave
/// it, as a step of an agent with a full context does (the change the agent sends).
fn queue_step(state: &mut AgentState, messages: Vec<Message>, evict: usize) -> Commit {
    let before = state.fifo.clone();
    state.fifo.drain(..evict.min(state.fifo.len()));
    state.fifo.extend(messages.iter().map(|m| m.id));
    state.version += 1;
    Commit {
        messages,
        queue: memgpt_core::store::QueueChange::between(&before, &state.fifo),
        ..Commit::state(state.clone())
    }
}

/// Bytes this process has written through system calls so far (`wchar` of `/proc/self/io`):
/// SQLite's WAL and checkpoint writes, as it runs in the process.
fn written_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|io| {
            io.lines()
                .find_map(|l| l.strip_prefix("wchar: "))
                .and_then(|n| n.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// The WAL position of the PostgreSQL server of `url` (bytes since its start).
#[cfg(feature = "postgres")]
async fn wal_position(url: &str) -> u64 {
    let base = url.split_once('?').map_or(url, |(base, _)| base);
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(base)
        .await
        .expect("connect");
    let lsn: i64 =
        sqlx::query_scalar("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint")
            .fetch_one(&mut conn)
            .await
            .expect("wal position");
    lsn as u64
}

/// Commit bytes per step against the queue's length: an agent whose queue holds `n` messages
/// (filled in commits of 5,000), then 50 steps that each append 3 messages and evict the 3
/// oldest. SQLite: bytes the process wrote (WAL, checkpoints); PostgreSQL: WAL bytes the server
/// wrote over the steps (the bench is its only client).
async fn queue(quick: bool) {
    let lengths: Vec<usize> = arg("--queue-lengths")
        .map(|s| s.split(',').filter_map(|n| n.parse().ok()).collect())
        .unwrap_or_else(|| {
            if quick {
                vec![100, 10_000]
            } else {
                vec![100, 10_000, 100_000]
            }
        });
    const STEPS: usize = 50;
    println!(
        "\n## Commit bytes per step against the queue's length ({STEPS} steps of 3 messages, 3 evicted)\n"
    );
    println!("| backend | queued messages | bytes written per step | p50 ms | p99 ms |");
    println!("|---|---|---|---|---|");
    let kinds: &[(&str, &str)] = &[
        ("sqlite (fts5, exact)", "?recall=fts5&vectors=exact"),
        ("postgres", ""),
    ];
    for &n in &lengths {
        // A fresh directory or schema per length.
        for backend in backends(kinds) {
            let url = if backend.url.starts_with("postgres") {
                format!("{}_{n}", backend.url)
            } else {
                backend.url.clone()
            };
            let s = open(&url).await;
            let mut a = state(AgentId::new());
            s.agents.create_agent(&a).await.expect("create");
            let id = a.id;
            let message = |i: usize| {
                Message::new(
                    id,
                    MessageKind::User,
                    format!("message {i} about things"),
                    t0(),
                )
            };
            let mut filled = 0;
            while filled < n {
                let batch = (filled..(filled + 5_000).min(n))
                    .map(message)
                    .collect::<Vec<_>>();
                filled += batch.len();
                let c = queue_step(&mut a, batch, 0);
                s.agents.commit(&c).await.expect("fill");
            }
            let mut latencies = Vec::with_capacity(STEPS);
            let before = if url.starts_with("postgres") {
                #[cfg(feature = "postgres")]
                {
                    wal_position(&url).await
                }
                #[cfg(not(feature = "postgres"))]
                0
            } else {
                written_bytes()
            };
            for step in 0..STEPS {
                let messages = (0..3).map(|j| message(n + 3 * step + j)).collect();
                let c = queue_step(&mut a, messages, 3);
                let t = Instant::now();
                s.agents.commit(&c).await.expect("commit");
                latencies.push(t.elapsed());
            }
            let after = if url.starts_with("postgres") {
                #[cfg(feature = "postgres")]
                {
                    wal_position(&url).await
                }
                #[cfg(not(feature = "postgres"))]
                0
            } else {
                written_bytes()
            };
            let loaded = s
                .agents
                .load_agent(a.id)
                .await
                .expect("load")
                .expect("agent");
            assert_eq!(loaded.fifo, a.fifo, "the queue reads back");
            println!(
                "| {} | {n} | {} | {} | {} |",
                backend.name,
                (after - before) / STEPS as u64,
                ms(percentile(&mut latencies.clone(), 0.5)),
                ms(percentile(&mut latencies, 0.99))
            );
        }
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
        if std::env::args().any(|a| a == "--calibrate") {
            calibrate(queries).await;
            return;
        }
        if only.as_deref().is_none_or(|o| o == "steps") {
            steps(commits).await;
        }
        if only.as_deref().is_none_or(|o| o == "queue") {
            queue(quick).await;
        }
        if only.as_deref().is_none_or(|o| o == "archival") {
            archival(&sizes, queries).await;
        }
        if only.as_deref().is_none_or(|o| o == "recall") {
            recall(messages, queries).await;
        }
    });
}
