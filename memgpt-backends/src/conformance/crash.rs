//! The crash campaign: a child process runs an agent against a store and is SIGKILLed at chosen
//! failpoints or random moments, again and again; after every kill the store is reopened and
//! everything the child acknowledged is checked, with its exact content.
//!
//! The child steps a scripted agent (an in-process model that always does the same work, so
//! every expected row is known): each step carries a unique token `tok<version>` and
//!
//! 1. replaces the `human` block's `last step: tok<previous>` with its own token and inserts the
//!    archival passage `fact number tok<version>` (both asking for a heartbeat);
//! 2. searches the conversation for the previous step's token (which catches the derived recall
//!    indexes up) and checks the result names it;
//! 3. calls `send_message("stored tok<version>")`.
//!
//! Every fourth version is instead an archival write committed on its own: a bulk insert of
//! [`BULK_PASSAGES`] passages (`bulk tok<version> part <i>`), or, every eighth version, an
//! update of the previous step's fact (`fact number tok<step> revised at tok<version>`), which
//! stores the new version and retires the old one in one commit. The context window is small, so flushes
//! (with the summariser) happen every few steps; on SQLite the child saves the usearch indexes
//! every third version ([`SqliteStore::checkpoint`](crate::SqliteStore::checkpoint)).
//!
//! After each kill the campaign verifies: the stored version is the acknowledged one (or one
//! more: a commit that landed before its acknowledgement was printed); every acknowledged step's
//! ten messages are there in order with their exact tool calls, and memory-pressure alerts are
//! the only other messages; every passage is there exactly once; the `human` block names the
//! last step; every updated fact is retired and superseded by its revision, which is current;
//! the queue and the summary account for every message exactly once; the derived
//! indexes hold exactly the database's rows ([`SqliteStore::audit_indexes`](crate::SqliteStore::audit_indexes));
//! the newest step is found by a text search and its passage by a vector search. The next child
//! then loads the agent and steps on from there.
//!
//! The child is a process the caller describes (a test binary filtered to one test that calls
//! [`child_main`], or any program that calls it first thing); the campaign adds the store URL,
//! the agent and the failpoint to its environment.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use memgpt_core::embed::{Embedder, Embedding, HashingEmbedder};
use memgpt_core::ids::AgentId;
use memgpt_core::llm::{
    ChatRequest, ChatResponse, FinishReason, LlmError, LlmProvider, Role, Usage,
};
use memgpt_core::message::{Message, MessageKind, ToolCall};
use memgpt_core::store::{
    ArchivalQuery, Page, Passage, RecallQuery, SearchMode, Storage, StoreError, TimeRange, Validity,
};
use memgpt_core::summarizer::{SummarizeError, Summarizer};
use memgpt_core::{Agent, StopReason};
use serde_json::{Value, json};

use crate::StoreConfig;

/// The child's store URL.
const URL_VAR: &str = "MEMGPT_CRASH_URL";
/// The child's agent.
const AGENT_VAR: &str = "MEMGPT_CRASH_AGENT";
/// The most versions one child commits before it says `DONE` (a failpoint it never reached).
pub const VERSIONS_PER_CHILD: u64 = 24;
/// Passages in each bulk insert.
pub const BULK_PASSAGES: usize = 16;
/// Dimension of the campaign's hashing embedder.
const DIMENSION: usize = 64;
/// The scripted model's context window: small, so flushes happen every few steps.
const WINDOW: usize = 5_000;
/// How long the campaign waits for a line from the child before calling it stuck.
const SILENCE_LIMIT: Duration = Duration::from_secs(120);

/// Why a campaign could not run (lost or corrupted data is not an error: it is what the
/// [`CampaignReport`] reports).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CampaignError {
    /// The URL names no store this build can open.
    #[error(transparent)]
    Url(#[from] crate::StoreUrlError),
    /// The store could not be opened.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// An agent could not be created or loaded.
    #[error(transparent)]
    Agent(#[from] memgpt_core::Error),
    /// The thread supervising a child panicked.
    #[error("the child supervisor failed: {0}")]
    Supervisor(String),
}

/// Where a child is killed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KillPoint {
    /// At the failpoint `name`, on a hit chosen at random from `1..=max_hit`.
    Failpoint {
        /// The failpoint (see [`memgpt_core::failpoint::POINTS`]).
        name: &'static str,
        /// The latest hit of the point to stop at.
        max_hit: u64,
    },
    /// After 1 to 4 acknowledged commits and a random pause of up to 5 ms.
    Random,
}

impl KillPoint {
    /// The label used in reports.
    pub fn label(&self) -> &'static str {
        match self {
            KillPoint::Failpoint { name, .. } => name,
            KillPoint::Random => "random time",
        }
    }
}

/// How often each kill point was used, and how often its failpoint was actually reached (a
/// child that never reaches it, after [`VERSIONS_PER_CHILD`] versions, is killed anyway).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PointTally {
    /// Kills planned at this point.
    pub kills: usize,
    /// Kills that happened at the failpoint itself (all of them for random kills).
    pub reached: usize,
}

/// What a campaign found.
#[derive(Clone, Debug, Default)]
pub struct CampaignReport {
    /// The store, as its URL's scheme and options say.
    pub store: String,
    /// Children killed.
    pub kills: usize,
    /// Per kill point.
    pub points: BTreeMap<&'static str, PointTally>,
    /// Agents used (a new one every [`Campaign::kills_per_agent`] kills).
    pub agents: usize,
    /// Versions the children acknowledged, summed over agents.
    pub acknowledged: u64,
    /// Acknowledged versions missing after a restart.
    pub lost: u64,
    /// Every other broken expectation, one line each, naming the kill.
    pub corrupted: Vec<String>,
    /// Wall time of the whole campaign.
    pub elapsed: Duration,
    /// Wall time spent verifying after kills.
    pub verifying: Duration,
}

impl CampaignReport {
    /// Nothing lost, nothing corrupted.
    pub fn is_clean(&self) -> bool {
        self.lost == 0 && self.corrupted.is_empty()
    }
}

impl std::fmt::Display for CampaignReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{}: {} kills, {} agents, {} versions acknowledged, {} lost, {} corrupted ({:.1} s, {:.1} s verifying)",
            self.store,
            self.kills,
            self.agents,
            self.acknowledged,
            self.lost,
            self.corrupted.len(),
            self.elapsed.as_secs_f64(),
            self.verifying.as_secs_f64()
        )?;
        for (point, tally) in &self.points {
            writeln!(
                f,
                "  {point:<18} {:>5} kills, {:>5} at the point",
                tally.kills, tally.reached
            )?;
        }
        for problem in self.corrupted.iter().take(20) {
            writeln!(f, "  ! {problem}")?;
        }
        Ok(())
    }
}

/// A crash campaign against the store at one URL.
pub struct Campaign {
    url: String,
    kills: usize,
    kills_per_agent: usize,
    seed: u64,
    points: Vec<KillPoint>,
    child: Arc<dyn Fn() -> Command + Send + Sync>,
}

impl std::fmt::Debug for Campaign {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Campaign")
            .field("url", &self.url)
            .field("kills", &self.kills)
            .field("kills_per_agent", &self.kills_per_agent)
            .field("seed", &self.seed)
            .field("points", &self.points)
            .finish_non_exhaustive()
    }
}

impl Campaign {
    /// A campaign of 50 kills against the store at `url`, spread evenly over the kill points
    /// that apply to it, with children made by `child` (a command that ends up calling
    /// [`child_main`]).
    pub fn new(
        url: impl Into<String>,
        child: impl Fn() -> Command + Send + Sync + 'static,
    ) -> Self {
        let url = url.into();
        let points = kill_points(&url);
        Self {
            url,
            kills: 50,
            kills_per_agent: 100,
            seed: 1,
            points,
            child: Arc::new(child),
        }
    }

    /// How many children to kill.
    pub fn kills(mut self, kills: usize) -> Self {
        self.kills = kills;
        self
    }

    /// Kills before the campaign moves on to a new agent (histories stay a realistic size and
    /// agent creation is crash-tested too).
    pub fn kills_per_agent(mut self, kills: usize) -> Self {
        self.kills_per_agent = kills.max(1);
        self
    }

    /// The seed of the kill schedule (which hit of a failpoint, which random pause).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The kill points the campaign cycles through (by default every failpoint that exists in
    /// this store, plus random times).
    pub fn points(mut self, points: Vec<KillPoint>) -> Self {
        self.points = points;
        self
    }

    /// Runs the campaign. An `Err` means the store could not be opened or an agent created;
    /// lost or corrupted data is reported in the [`CampaignReport`].
    pub async fn run(&self) -> Result<CampaignReport, CampaignError> {
        let started = Instant::now();
        let config: StoreConfig = self.url.parse()?;
        let mut report = CampaignReport {
            store: store_label(&self.url),
            ..CampaignReport::default()
        };
        let mut rng = SplitMix(self.seed);
        let mut agent = None;
        let mut acknowledged = 0;
        for kill in 0..self.kills {
            if kill % self.kills_per_agent == 0 {
                report.acknowledged += acknowledged;
                let storage = Opened::open(&config).await?.storage;
                agent = Some(new_agent(storage).await?);
                report.agents += 1;
                acknowledged = 0;
            }
            let Some(agent) = agent else { break };
            let point = self.points[kill % self.points.len().max(1)].clone();
            let tally = report.points.entry(point.label()).or_default();
            tally.kills += 1;
            let context = format!("kill {kill} ({})", point.label());
            let outcome = tokio::task::spawn_blocking({
                let (child, url, point) = (self.child.clone(), self.url.clone(), point.clone());
                let draw = rng.next();
                move || run_child(&child, &url, agent, &point, draw)
            })
            .await
            .map_err(|e| CampaignError::Supervisor(e.to_string()))?;
            if outcome.reached {
                tally.reached += 1;
            }
            if let Some(problem) = outcome.problem {
                report.corrupted.push(format!("{context}: {problem}"));
            }
            acknowledged = acknowledged.max(outcome.acknowledged);
            let verifying = Instant::now();
            match verify(&config, agent, acknowledged).await {
                Ok(version) => acknowledged = acknowledged.max(version),
                Err(Failure::Lost { stored }) => {
                    report.lost += acknowledged - stored;
                    report.corrupted.push(format!(
                        "{context}: acknowledged version {acknowledged}, the store has {stored}"
                    ));
                    acknowledged = stored;
                }
                Err(Failure::Corrupt(problem)) => {
                    report.corrupted.push(format!("{context}: {problem}"));
                }
            }
            report.verifying += verifying.elapsed();
            report.kills += 1;
        }
        report.acknowledged += acknowledged;
        // The agent steps again normally, here in the supervising process too.
        if let Some(agent) = agent {
            let storage = Opened::open(&config).await?.storage;
            let mut resumed = scripted(storage, Some(agent)).await?;
            if let Err(problem) = advance(&mut resumed, None).await {
                report.corrupted.push(format!(
                    "after the campaign: the agent does not step: {problem}"
                ));
            }
        }
        report.elapsed = started.elapsed();
        Ok(report)
    }
}

/// The kill points that exist in the store at `url`.
#[cfg_attr(not(feature = "sqlite"), allow(unused_variables))]
fn kill_points(url: &str) -> Vec<KillPoint> {
    let mut points = vec![
        KillPoint::Failpoint {
            name: "commit.before",
            max_hit: 6,
        },
        KillPoint::Failpoint {
            name: "commit.after",
            max_hit: 6,
        },
        KillPoint::Failpoint {
            name: "passages.insert",
            max_hit: 2 * BULK_PASSAGES as u64,
        },
        KillPoint::Failpoint {
            name: "flush.summarized",
            max_hit: 2,
        },
        KillPoint::Failpoint {
            name: "passages.retire",
            max_hit: 1,
        },
    ];
    #[cfg(feature = "sqlite")]
    #[allow(unused_variables)]
    if let Ok(StoreConfig::Sqlite(options)) = url.parse::<StoreConfig>() {
        #[cfg(feature = "tantivy")]
        if options.recall == crate::RecallIndex::Tantivy {
            points.push(KillPoint::Failpoint {
                name: "tantivy.catch_up",
                max_hit: 6,
            });
        }
        #[cfg(feature = "usearch")]
        if matches!(options.vectors, crate::VectorIndex::Usearch(_)) {
            points.push(KillPoint::Failpoint {
                name: "usearch.save",
                max_hit: 3,
            });
        }
    }
    points.push(KillPoint::Random);
    points
}

/// The URL without credentials or directories: scheme and options.
fn store_label(url: &str) -> String {
    let scheme = url.split_once(':').map_or(url, |(s, _)| s);
    match url.split_once('?') {
        Some((_, query)) => format!("{scheme} ?{query}"),
        None => scheme.to_owned(),
    }
}

/// A tiny deterministic generator (SplitMix64) for the kill schedule.
#[derive(Debug)]
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// An open store, and the SQLite store behind it when it is one (for checkpoints and audits).
struct Opened {
    storage: Storage,
    #[cfg(feature = "sqlite")]
    sqlite: Option<Arc<crate::SqliteStore>>,
}

impl Opened {
    async fn open(config: &StoreConfig) -> Result<Self, StoreError> {
        #[cfg(feature = "sqlite")]
        if let StoreConfig::Sqlite(options) = config {
            let store = Arc::new(crate::SqliteStore::open(options.clone()).await?);
            return Ok(Self {
                storage: Storage::from_store(store.clone()),
                sqlite: Some(store),
            });
        }
        Ok(Self {
            storage: config.open().await?,
            #[cfg(feature = "sqlite")]
            sqlite: None,
        })
    }

    /// Saves the derived indexes (SQLite), as a long-running application does now and then.
    async fn checkpoint(&self) -> Result<(), StoreError> {
        #[cfg(feature = "sqlite")]
        if let Some(store) = &self.sqlite {
            store.checkpoint().await?;
        }
        Ok(())
    }

    /// The derived indexes' disagreements with the database (none for stores without any).
    async fn index_mismatches(&self, agent: AgentId) -> Result<Vec<String>, StoreError> {
        #[cfg(feature = "sqlite")]
        if let Some(store) = &self.sqlite {
            return Ok(store.audit_indexes(agent).await?.mismatches());
        }
        let _ = agent;
        Ok(Vec::new())
    }
}

// ---------------------------------------------------------------------------------------------
// The child.

fn token(version: u64) -> String {
    format!("tok{version}")
}

/// Whether `version` is an archival write of its own rather than a step.
fn is_bulk(version: u64) -> bool {
    version.is_multiple_of(4)
}

/// Whether `version` updates the previous step's fact (instead of a bulk insert).
fn is_update(version: u64) -> bool {
    version.is_multiple_of(8)
}

/// The text of the fact that update `version` writes for step `version - 1`.
fn revised(version: u64) -> String {
    format!(
        "fact number {} revised at {}",
        token(version - 1),
        token(version)
    )
}

/// The step version before `version` (skipping bulk inserts), 0 if none.
fn previous_step(version: u64) -> u64 {
    (1..version).rev().find(|v| !is_bulk(*v)).unwrap_or(0)
}

/// The arguments of each scripted call of step `version`, in order.
fn expected_calls(version: u64) -> [Vec<(&'static str, Value)>; 3] {
    let (this, before) = (token(version), token(previous_step(version)));
    [
        vec![
            (
                "core_memory_replace",
                json!({"label": "human", "old_content": format!("last step: {before}"),
                       "new_content": format!("last step: {this}"), "request_heartbeat": true}),
            ),
            (
                "archival_memory_insert",
                json!({"content": format!("fact number {this}"), "request_heartbeat": true}),
            ),
        ],
        vec![(
            "conversation_search",
            json!({"query": format!("step token {before}"), "request_heartbeat": true}),
        )],
        vec![("send_message", json!({"message": format!("stored {this}")}))],
    ]
}

/// The scripted model: finds the step's token in the newest event and does the next stage.
#[derive(Debug)]
struct ScriptedModel;

#[async_trait]
impl LlmProvider for ScriptedModel {
    fn model(&self) -> &str {
        "crash-campaign-script"
    }

    fn context_window(&self) -> Option<usize> {
        Some(WINDOW)
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let event = request
            .messages
            .iter()
            .rposition(|m| m.role == Role::User && m.content.contains("step token tok"))
            .ok_or_else(|| LlmError::InvalidResponse {
                message: "no step event in the request".into(),
            })?;
        let version: u64 = request.messages[event]
            .content
            .split("step token tok")
            .nth(1)
            .map(|t| {
                t.chars()
                    .take_while(char::is_ascii_digit)
                    .collect::<String>()
            })
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| LlmError::InvalidResponse {
                message: "no version in the step event".into(),
            })?;
        let stage = request.messages[event..]
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .count();
        let calls = expected_calls(version)
            .into_iter()
            .nth(stage)
            .ok_or_else(|| LlmError::InvalidResponse {
                message: format!("stage {stage} of a three-stage step"),
            })?;
        Ok(ChatResponse {
            content: String::new(),
            tool_calls: calls
                .into_iter()
                .enumerate()
                .map(|(i, (name, arguments))| ToolCall {
                    id: format!("call-{version}-{stage}-{i}"),
                    name: name.into(),
                    arguments: arguments.to_string(),
                })
                .collect(),
            usage: Usage::default(),
            finish_reason: FinishReason::ToolCalls,
            model: "crash-campaign-script".into(),
        })
    }
}

/// A summariser that needs no model: it counts what was folded in.
#[derive(Debug)]
struct CountingSummarizer;

#[async_trait]
impl Summarizer for CountingSummarizer {
    async fn summarize(
        &self,
        previous: &str,
        evicted: &[Arc<Message>],
    ) -> Result<String, SummarizeError> {
        let before: u64 = previous
            .strip_prefix("evicted ")
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        Ok(format!("evicted {}", before + evicted.len() as u64))
    }
}

async fn scripted(storage: Storage, id: Option<AgentId>) -> memgpt_core::Result<Agent> {
    let builder = Agent::builder()
        .provider(Arc::new(ScriptedModel))
        .storage(storage)
        .embedder(Arc::new(HashingEmbedder::new(DIMENSION)))
        .summarizer(Arc::new(CountingSummarizer));
    match id {
        Some(id) => builder.load(id).await,
        None => {
            builder
                .name("crash campaign")
                .human(format!("last step: {}", token(0)))
                .build()
                .await
        }
    }
}

async fn new_agent(storage: Storage) -> memgpt_core::Result<AgentId> {
    Ok(scripted(storage, None).await?.id())
}

/// Commits the agent's next version (a step or a bulk insert); `Err` describes what went wrong.
async fn advance(agent: &mut Agent, store: Option<&Opened>) -> Result<u64, String> {
    let version = agent.version() + 1;
    if is_update(version) {
        let old = format!("fact number {}", token(version - 1));
        let found = agent
            .search_archival(
                &old,
                Some(SearchMode::Text),
                Page::first(5),
                &[],
                TimeRange::default(),
                Validity::Current,
            )
            .await
            .map_err(|e| format!("finding {old:?}: {e}"))?;
        let id = found
            .hits
            .iter()
            .find(|h| h.item.text == old)
            .map(|h| h.item.id)
            .ok_or_else(|| format!("update {version}: {old:?} is not found"))?;
        agent
            .update_archival(id, &revised(version))
            .await
            .map_err(|e| format!("update {version}: {e}"))?;
    } else if is_bulk(version) {
        let chunks = (0..BULK_PASSAGES)
            .map(|i| {
                (
                    format!("bulk {} part {i}", token(version)),
                    Default::default(),
                )
            })
            .collect();
        agent
            .insert_archival_chunks(chunks)
            .await
            .map_err(|e| format!("bulk insert {version}: {e}"))?;
    } else {
        let record = agent
            .step(format!("step token {}", token(version)))
            .await
            .map_err(|e| format!("step {version}: {e}"))?;
        if record.stop_reason != StopReason::EndTurn {
            return Err(format!(
                "step {version} stopped with {:?}",
                record.stop_reason
            ));
        }
    }
    if agent.version() != version {
        return Err(format!(
            "committed version {} instead of {version}",
            agent.version()
        ));
    }
    if version.is_multiple_of(3)
        && let Some(store) = store
    {
        store
            .checkpoint()
            .await
            .map_err(|e| format!("checkpoint: {e}"))?;
    }
    Ok(version)
}

/// The body of a crash-campaign child: when the campaign's environment is present, steps the
/// agent and prints `COMMITTED <version>` after each commit until killed (or `DONE` after
/// [`VERSIONS_PER_CHILD`] versions, `ERROR <what>` if something fails), and never returns.
/// Without that environment it returns at once, so a test binary can hold the entry point as
/// an ordinary test.
pub fn child_main() {
    let (Ok(url), Ok(agent)) = (std::env::var(URL_VAR), std::env::var(AGENT_VAR)) else {
        return;
    };
    let say = |line: &str| {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            say(&format!("ERROR runtime: {e}"));
            std::process::exit(2);
        }
    };
    let result: Result<(), String> = runtime.block_on(async move {
        let config: StoreConfig = url.parse().map_err(|e| format!("store URL: {e}"))?;
        let store = Opened::open(&config)
            .await
            .map_err(|e| format!("open: {e}"))?;
        let id: AgentId = agent.parse().map_err(|e| format!("agent id: {e}"))?;
        let mut agent = scripted(store.storage.clone(), Some(id))
            .await
            .map_err(|e| format!("load: {e}"))?;
        for _ in 0..VERSIONS_PER_CHILD {
            let version = advance(&mut agent, Some(&store)).await?;
            say(&format!("COMMITTED {version}"));
        }
        Ok(())
    });
    match result {
        Ok(()) => say("DONE"),
        Err(e) => say(&format!("ERROR {e}")),
    }
    // Wait to be killed, as a real process would be mid-work.
    loop {
        std::thread::park();
    }
}

// ---------------------------------------------------------------------------------------------
// The supervisor.

/// What one child run came to.
struct ChildOutcome {
    acknowledged: u64,
    reached: bool,
    problem: Option<String>,
}

fn run_child(
    child: &Arc<dyn Fn() -> Command + Send + Sync>,
    url: &str,
    agent: AgentId,
    point: &KillPoint,
    draw: u64,
) -> ChildOutcome {
    let mut command = child();
    command
        .env(URL_VAR, url)
        .env(AGENT_VAR, agent.to_string())
        .env_remove(memgpt_core::failpoint::ENV)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let random_after = match point {
        KillPoint::Failpoint { name, max_hit } => {
            command.env(
                memgpt_core::failpoint::ENV,
                format!("{name}=pause@{}", 1 + draw % max_hit.max(&1)),
            );
            None
        }
        KillPoint::Random => Some((1 + draw % 4, Duration::from_micros((draw >> 8) % 5_000))),
    };
    let mut outcome = ChildOutcome {
        acknowledged: 0,
        reached: false,
        problem: None,
    };
    let mut process = match command.spawn() {
        Ok(process) => process,
        Err(e) => {
            outcome.problem = Some(format!("could not start the child: {e}"));
            return outcome;
        }
    };
    let (lines, received) = mpsc::channel();
    if let Some(stdout) = process.stdout.take() {
        // The reader lives until the child dies: a closed pipe would make the child fail on its
        // next line, at a commit boundary instead of where the kill was meant to land.
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
    }
    let mut commits = 0;
    loop {
        match received.recv_timeout(SILENCE_LIMIT) {
            Ok(line) => {
                // The child's lines may follow other output on the same line (a test
                // harness's "test name ... "), so markers are looked for anywhere.
                if let Some(version) = after(&line, "COMMITTED ") {
                    outcome.acknowledged = version.trim().parse().unwrap_or(outcome.acknowledged);
                    commits += 1;
                    if let Some((after, pause)) = random_after
                        && commits >= after
                    {
                        std::thread::sleep(pause);
                        outcome.reached = true;
                        break;
                    }
                } else if after(&line, "FAILPOINT ").is_some() {
                    outcome.reached = true;
                    break;
                } else if line.ends_with("DONE") {
                    break;
                } else if let Some(error) = after(&line, "ERROR ") {
                    outcome.problem = Some(format!("the child failed: {error}"));
                    break;
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                outcome.problem = Some(format!("the child was silent for {SILENCE_LIMIT:?}"));
                break;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                outcome.problem = Some("the child exited on its own".into());
                break;
            }
        }
    }
    // SIGKILL on Unix.
    let _ = process.kill();
    let _ = process.wait();
    // Lines printed between the last one read and the kill still count as acknowledged.
    while let Ok(line) = received.recv_timeout(Duration::from_millis(200)) {
        if let Some(version) = after(&line, "COMMITTED ") {
            outcome.acknowledged = version.trim().parse().unwrap_or(outcome.acknowledged);
        }
    }
    outcome
}

/// What follows `marker` in `line`, if it is there.
fn after<'l>(line: &'l str, marker: &str) -> Option<&'l str> {
    line.find(marker).map(|at| &line[at + marker.len()..])
}

enum Failure {
    Lost { stored: u64 },
    Corrupt(String),
}

fn corrupt(problem: impl Into<String>) -> Failure {
    Failure::Corrupt(problem.into())
}

fn store_failure(context: &str) -> impl Fn(StoreError) -> Failure + '_ {
    move |e| corrupt(format!("{context}: {e}"))
}

/// Every message of the agent, oldest first.
async fn all_messages(storage: &Storage, agent: AgentId) -> Result<Vec<Message>, StoreError> {
    let mut out = Vec::new();
    for number in 0.. {
        let page = Page::new(number, 1_000);
        let query = RecallQuery {
            kinds: Vec::new(),
            ..RecallQuery::range(TimeRange::default(), page)
        };
        let found = storage.recall.list_messages(agent, &query).await?;
        let last = found.hits.len() < page.size;
        out.extend(found.hits.into_iter().map(|hit| hit.item));
        if last {
            break;
        }
    }
    Ok(out)
}

/// Reopens the store and checks everything about the agent (see the module documentation).
/// Returns the stored version.
async fn verify(config: &StoreConfig, agent: AgentId, acknowledged: u64) -> Result<u64, Failure> {
    let store = Opened::open(config)
        .await
        .map_err(store_failure("reopening"))?;
    let storage = &store.storage;
    let state = storage
        .agents
        .load_agent(agent)
        .await
        .map_err(store_failure("loading"))?
        .ok_or_else(|| corrupt("the agent is gone"))?;
    let version = state.version;
    if version < acknowledged {
        return Err(Failure::Lost { stored: version });
    }
    if version > acknowledged + 1 {
        return Err(corrupt(format!(
            "version {version} after {acknowledged} acknowledged: more than the one commit in flight"
        )));
    }

    // Messages: every step whole, in order, with its exact calls.
    let messages = all_messages(storage, agent)
        .await
        .map_err(store_failure("listing messages"))?;
    let steps: Vec<u64> = (1..=version).filter(|v| !is_bulk(*v)).collect();
    let mut segments: Vec<Vec<&Message>> = Vec::new();
    for message in &messages {
        if message.kind == MessageKind::User {
            segments.push(Vec::new());
        }
        match segments.last_mut() {
            Some(segment) => segment.push(message),
            None => {
                return Err(corrupt(format!(
                    "a {:?} message before any step",
                    message.kind
                )));
            }
        }
    }
    if segments.len() != steps.len() {
        return Err(corrupt(format!(
            "{} step events stored for {} committed steps",
            segments.len(),
            steps.len()
        )));
    }
    for (segment, step) in segments.iter().zip(&steps) {
        check_step(segment, *step)?;
    }

    // Passages: each exactly once.
    let mut passages: BTreeMap<String, usize> = BTreeMap::new();
    let mut stored: BTreeMap<String, Passage> = BTreeMap::new();
    let mut number = 0;
    loop {
        let page = storage
            .archival
            .list_passages(agent, Page::new(number, 1_000))
            .await
            .map_err(store_failure("listing passages"))?;
        let done = page.hits.len() < 1_000;
        for hit in page.hits {
            *passages.entry(hit.item.text.clone()).or_default() += 1;
            stored.insert(hit.item.text.clone(), hit.item);
        }
        if done {
            break;
        }
        number += 1;
    }
    let mut expected: BTreeMap<String, usize> = BTreeMap::new();
    for v in 1..=version {
        if is_update(v) {
            expected.insert(revised(v), 1);
        } else if is_bulk(v) {
            for i in 0..BULK_PASSAGES {
                expected.insert(format!("bulk {} part {i}", token(v)), 1);
            }
        } else {
            expected.insert(format!("fact number {}", token(v)), 1);
        }
    }
    if passages != expected {
        let missing: Vec<_> = expected
            .keys()
            .filter(|k| !passages.contains_key(*k))
            .take(3)
            .collect();
        let extra: Vec<_> = passages
            .iter()
            .filter(|(k, n)| expected.get(*k) != Some(n))
            .take(3)
            .collect();
        return Err(corrupt(format!(
            "passages differ at version {version}: missing {missing:?}, unexpected {extra:?}"
        )));
    }

    // Updated facts: the old version retired and superseded by the revision, which is current.
    for v in (1..=version).filter(|v| is_update(*v)) {
        let old = &stored[&format!("fact number {}", token(v - 1))];
        let new = &stored[&revised(v)];
        if old.superseded_by != Some(new.id)
            || old.valid_to.is_none()
            || new.valid_to.is_some()
            || new.valid_from != old.valid_to
        {
            return Err(corrupt(format!(
                "update {v}: the old fact ends {:?}, superseded by {:?}; the revision {} holds {:?}..{:?}",
                old.valid_to, old.superseded_by, new.id, new.valid_from, new.valid_to
            )));
        }
    }

    // Blocks: the last committed state.
    let last_step = steps.last().copied().unwrap_or(0);
    let human = state.memory.get("human").map(|b| b.value().to_owned());
    if human.as_deref() != Some(format!("last step: {}", token(last_step)).as_str()) {
        return Err(corrupt(format!(
            "the human block is {human:?} at version {version}"
        )));
    }

    // The queue and the summary account for every message once.
    let queued = storage
        .recall
        .get_messages(agent, &state.fifo)
        .await
        .map_err(store_failure("reading the queue"))?;
    if queued.len() != state.fifo.len() {
        return Err(corrupt(format!(
            "{} of {} queued messages are in recall storage",
            queued.len(),
            state.fifo.len()
        )));
    }
    let distinct: std::collections::HashSet<_> = state.fifo.iter().collect();
    if distinct.len() != state.fifo.len() {
        return Err(corrupt("a message is queued twice"));
    }
    let evicted = state
        .summary
        .text
        .strip_prefix("evicted ")
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or(0);
    if evicted != state.summary.evicted_messages
        || evicted + state.fifo.len() as u64 != messages.len() as u64
    {
        return Err(corrupt(format!(
            "summary says {evicted} evicted (count {}), {} queued, {} stored",
            state.summary.evicted_messages,
            state.fifo.len(),
            messages.len()
        )));
    }

    // The derived indexes hold the database's rows, and find the newest things.
    let mismatches = store
        .index_mismatches(agent)
        .await
        .map_err(store_failure("auditing the indexes"))?;
    if !mismatches.is_empty() {
        return Err(corrupt(format!("index audit: {}", mismatches.join("; "))));
    }
    if last_step > 0 {
        let wanted = format!("step token {}", token(last_step));
        let found = storage
            .recall
            .search(agent, &RecallQuery::text(token(last_step), Page::first(10)))
            .await
            .map_err(store_failure("searching recall"))?;
        if !found.hits.iter().any(|h| h.item.text == wanted) {
            return Err(corrupt(format!("a text search does not find {wanted:?}")));
        }
        // The newest step's fact, or its revision when an update followed: a current search
        // finds the current version only.
        let old = format!("fact number {}", token(last_step));
        let text = if version > last_step && is_update(last_step + 1) {
            revised(last_step + 1)
        } else {
            old.clone()
        };
        let query = ArchivalQuery {
            embedding: Some(Embedding {
                model: HashingEmbedder::new(DIMENSION).model().to_owned(),
                vector: HashingEmbedder::new(DIMENSION).vector(&text),
            }),
            ..ArchivalQuery::new(&text, SearchMode::Vector, Page::first(5))
        };
        let hits = storage
            .archival
            .search(agent, &query)
            .await
            .map_err(store_failure("searching archival"))?;
        if !hits.hits.iter().any(|h| h.item.text == text) {
            return Err(corrupt(format!("a vector search does not find {text:?}")));
        }
        if text != old && hits.hits.iter().any(|h| h.item.text == old) {
            return Err(corrupt(format!(
                "a current search still finds the superseded {old:?}"
            )));
        }
    }
    Ok(version)
}

/// One step's messages: the event, three assistant turns with their exact calls, a result per
/// call, two heartbeats, and nothing else but memory-pressure alerts.
fn check_step(segment: &[&Message], version: u64) -> Result<(), Failure> {
    use MessageKind::*;
    let at = |what: String| corrupt(format!("step {version}: {what}"));
    let messages: Vec<&Message> = segment
        .iter()
        .copied()
        .filter(|m| m.kind != SystemAlert)
        .collect();
    let kinds: Vec<MessageKind> = messages.iter().map(|m| m.kind).collect();
    let expected_kinds = [
        User,
        Assistant,
        FunctionReturn,
        FunctionReturn,
        Heartbeat,
        Assistant,
        FunctionReturn,
        Heartbeat,
        Assistant,
        FunctionReturn,
    ];
    if kinds != expected_kinds {
        return Err(at(format!("messages {kinds:?}")));
    }
    let event = format!("step token {}", token(version));
    if messages[0].text != event {
        return Err(at(format!("the event reads {:?}", messages[0].text)));
    }
    let assistants = messages.iter().filter(|m| m.kind == Assistant);
    for (message, calls) in assistants.zip(expected_calls(version)) {
        let got: Vec<(&str, Value)> = message
            .tool_calls
            .iter()
            .map(|c| {
                (
                    c.name.as_str(),
                    serde_json::from_str(&c.arguments).unwrap_or(Value::Null),
                )
            })
            .collect();
        let want: Vec<(&str, Value)> = calls.into_iter().collect();
        if got != want {
            return Err(at(format!("calls {got:?}, expected {want:?}")));
        }
    }
    let before = previous_step(version);
    if before > 0
        && !messages[6]
            .text
            .contains(&format!("step token {}", token(before)))
    {
        return Err(at(format!(
            "the search for the previous step's token did not find its event: {:?}",
            messages[6].text.chars().take(200).collect::<String>()
        )));
    }
    Ok(())
}
