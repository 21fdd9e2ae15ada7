//! A model-based test of a whole store: random sequences of every operation (agents created and
//! deleted, steps committing messages and passages, passages deleted and retired, embeddings
//! backfilled, shared blocks created, attached, detached, edited and deleted, searches of every
//! mode and filter, searches dropped half-way, the store reopened) run against the store under
//! test and a plain reference of what it holds (`model/reference.rs`), and every read compared
//! with it.
//!
//! After each search: every item the reference says matches must be found, nothing outside the
//! query's filters may appear, the total is the number of matches, and each page is the slice
//! of the full ranking it claims to be. Where the store under test is not the in-memory
//! reference store, the same operations also run on an
//! [`InMemoryStore`](memgpt_core::store::InMemoryStore) and the rankings must
//! agree with its, scores included (ranking is one function in memgpt-core, so two stores that
//! hand it the same candidates and statistics rank alike).
//!
//! A failing sequence is shrunk by proptest to a short one and printed, one operation a line.
//!
//! ```no_run
//! use memgpt_backends::conformance::StoreUnderTest;
//! use memgpt_backends::conformance::model::{ModelRun, check_store};
//!
//! // Each case opens a fresh store; here the in-memory one.
//! check_store(StoreUnderTest::in_memory, &ModelRun::from_env(20, 60));
//! ```

mod ops;
mod reference;

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, Duration, Utc};
use memgpt_core::embed::Embedding;
use memgpt_core::ids::{AgentId, MessageId, PassageId};
use memgpt_core::memory::MemoryBlock;
use memgpt_core::message::{Message, MessageKind, ToolCall};
use memgpt_core::retrieval::query_terms;
use memgpt_core::store::{
    ArchivalQuery, BlockUpdate, MessageEmbedding, Page, Passage, PassageEmbedding,
    PassageRetirement, RecallQuery, SearchMode, SearchPage, SharedBlock, Storage, StoreError,
    TimeRange, Validity,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestError, TestRng, TestRunner};

use self::ops::{ABSENT, ArchivalSpec, Op, RecallSpec, TAGS, WORDS};
use self::reference::{AgentModel, BlockModel, Reference};
use super::fixtures::{NextCommit, embed, state, t0};
use super::{StoreUnderTest, drop_after_waits};

/// How long a model-based run is.
#[derive(Clone, Debug)]
pub struct ModelRun {
    /// Sequences to run (each on a fresh store).
    pub cases: u32,
    /// The longest sequence, in operations.
    pub max_ops: usize,
    /// The random seed (printed, so a failure can be run again).
    pub seed: u64,
}

impl ModelRun {
    /// `cases` sequences of up to `max_ops` operations with a random seed, unless the
    /// environment says otherwise: `MEMGPT_MODEL_CASES`, `MEMGPT_MODEL_OPS`, `MEMGPT_MODEL_SEED`.
    pub fn from_env(cases: u32, max_ops: usize) -> Self {
        let var = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
        Self {
            cases: var("MEMGPT_MODEL_CASES").map_or(cases, |v| v as u32),
            max_ops: var("MEMGPT_MODEL_OPS").map_or(max_ops, |v| v as usize),
            seed: var("MEMGPT_MODEL_SEED").unwrap_or_else(|| {
                let t = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos() as u64);
                t ^ u64::from(std::process::id()).rotate_left(32)
            }),
        }
    }
}

/// Runs `run`'s sequences against stores `fresh` opens (a new, empty store per sequence) and
/// panics with the shortest failing sequence proptest finds. Returns how many operations ran,
/// shrinking included.
pub fn check_store(fresh: impl Fn() -> StoreUnderTest, run: &ModelRun) -> u64 {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => panic!("cannot start a tokio runtime for the model-based test: {e}"),
    };
    let mut seed = [0u8; 32];
    for (i, chunk) in seed.chunks_mut(8).enumerate() {
        chunk.copy_from_slice(&(run.seed.wrapping_add(i as u64)).to_le_bytes());
    }
    let config = Config {
        cases: run.cases,
        failure_persistence: None,
        max_shrink_iters: 4_000,
        ..Config::default()
    };
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed));
    let operations = AtomicU64::new(0);
    let name = fresh().name().to_owned();
    let strategy = prop::collection::vec(ops::op(), 1..=run.max_ops.max(1));
    let result = runner.run(&strategy, |ops| {
        let backend = fresh();
        operations.fetch_add(ops.len() as u64, Ordering::Relaxed);
        runtime
            .block_on(run_sequence(&backend, &ops))
            .map_err(|(step, why)| TestCaseError::fail(format!("operation {step}: {why}")))
    });
    match result {
        Ok(()) => operations.load(Ordering::Relaxed),
        Err(TestError::Fail(why, ops)) => {
            // What follows the operation that diverged played no part.
            let failed_at = why
                .message()
                .strip_prefix("operation ")
                .and_then(|rest| rest.split(':').next()?.parse::<usize>().ok())
                .unwrap_or(ops.len());
            let ops = &ops[..(failed_at + 1).min(ops.len())];
            let listing: Vec<String> = ops
                .iter()
                .enumerate()
                .map(|(i, op)| format!("  {i:>3}. {op:?}"))
                .collect();
            panic!(
                "{name}: the store diverged from the model (seed {}; {} operations in the shortest \
                 sequence found):\n{}\n{why}",
                run.seed,
                ops.len(),
                listing.join("\n")
            )
        }
        Err(TestError::Abort(why)) => panic!("{name}: the model-based run stopped: {why}"),
    }
}

/// A divergence: the index of the operation and what differed.
type Divergence = (usize, String);

/// Runs one sequence on a fresh store; the first divergence ends it.
async fn run_sequence(backend: &StoreUnderTest, ops: &[Op]) -> Result<(), Divergence> {
    let mut run = Run {
        store: backend.open().await,
        shadow: (backend.name() != "memory").then(Storage::in_memory),
        backend,
        model: Reference::default(),
    };
    for (i, op) in ops.iter().enumerate() {
        run.apply(op).await.map_err(|why| (i, why))?;
    }
    Ok(())
}

/// A store, its shadow and the reference, driven together.
struct Run<'a> {
    backend: &'a StoreUnderTest,
    store: Storage,
    /// An [`InMemoryStore`] given the same operations, whose rankings the store's must match.
    shadow: Option<Storage>,
    model: Reference,
}

fn at(minute: u16) -> DateTime<Utc> {
    t0() + Duration::minutes(i64::from(minute))
}

fn words(indexes: &[u8]) -> String {
    indexes
        .iter()
        .map(|&i| WORDS.get(i as usize).copied().unwrap_or(ABSENT))
        .collect::<Vec<_>>()
        .join(" ")
}

fn range((start, end): (Option<u16>, Option<u16>)) -> TimeRange {
    TimeRange {
        start: start.map(at),
        end: end.map(at),
    }
}

/// What went wrong, for a store call that should not fail.
fn failed(what: &str, e: StoreError) -> String {
    format!("{what} failed: {e}")
}

impl Run<'_> {
    /// Both stores, the store under test first.
    fn stores(&self) -> Vec<&Storage> {
        std::iter::once(&self.store).chain(&self.shadow).collect()
    }

    async fn apply(&mut self, op: &Op) -> Result<(), String> {
        match op {
            Op::CreateAgent => self.create_agent().await,
            Op::DeleteAgent { agent } => self.delete_agent(*agent).await,
            Op::Step { .. } => self.step(op).await,
            Op::Backfill { agent } => self.backfill(*agent).await,
            Op::CreateBlock { words: w } => self.create_block(w).await,
            Op::Attach { agent, block } => self.attach(*agent, *block, true).await,
            Op::Detach { agent, block } => self.attach(*agent, *block, false).await,
            Op::EditBlock { block, words: w } => self.edit_block(*block, w).await,
            Op::DeleteBlock { block } => self.delete_block(*block).await,
            Op::Recall {
                agent,
                query,
                drop_at,
            } => self.recall(*agent, query, *drop_at).await,
            Op::Archival {
                agent,
                query,
                drop_at,
            } => self.archival(*agent, query, *drop_at).await,
            Op::Read { agent } => self.read(*agent).await,
            Op::Reopen => {
                if self.backend.is_persistent() {
                    let placeholder = Storage::in_memory();
                    drop(std::mem::replace(&mut self.store, placeholder));
                    self.store = self.backend.open().await;
                }
                Ok(())
            }
        }
    }

    async fn create_agent(&mut self) -> Result<(), String> {
        let n = self.model.agents.len() + self.model.deleted.len();
        let s = state(AgentId::new(), &format!("agent-{n}"));
        for store in self.stores() {
            store
                .agents
                .create_agent(&s)
                .await
                .map_err(|e| failed("creating an agent", e))?;
        }
        self.model.agents.push(AgentModel::new(s));
        Ok(())
    }

    async fn delete_agent(&mut self, slot: usize) -> Result<(), String> {
        let Some(i) = self.model.agent(slot) else {
            return Ok(());
        };
        let id = self.model.agents[i].id();
        for store in self.stores() {
            let existed = store
                .agents
                .delete_agent(id)
                .await
                .map_err(|e| failed("deleting an agent", e))?;
            if !existed {
                return Err("deleting an agent said it did not exist".into());
            }
        }
        self.model.agents.remove(i);
        self.model.deleted.push(id);
        for block in &mut self.model.blocks {
            block.holders.retain(|h| *h != id);
        }
        Ok(())
    }

    async fn step(&mut self, op: &Op) -> Result<(), String> {
        let Op::Step {
            agent,
            messages,
            embed_messages,
            passages,
            delete,
            retire,
        } = op
        else {
            return Ok(());
        };
        let Some(i) = self.model.agent(*agent) else {
            return Ok(());
        };
        let model = &self.model.agents[i];
        let id = model.id();
        let mut built = Vec::new();
        for (n, spec) in messages.iter().enumerate() {
            let text = words(&spec.words);
            let when = at(spec.minute);
            let message = match spec.kind {
                0 => Message::new(id, MessageKind::User, text, when),
                1 => Message::assistant(
                    id,
                    text.clone(),
                    vec![ToolCall {
                        id: format!("call_{n}"),
                        name: "send_message".into(),
                        arguments: serde_json::json!({ "message": text }).to_string(),
                    }],
                    when,
                ),
                2 => Message::function_result(
                    id,
                    format!("call_{n}"),
                    "archival_memory_search",
                    Ok(text),
                    when,
                ),
                3 => Message::new(id, MessageKind::SystemAlert, text, when),
                _ => Message::new(id, MessageKind::Heartbeat, text, when),
            };
            built.push(message);
        }
        let embeddings: Vec<MessageEmbedding> = if *embed_messages {
            built
                .iter()
                .filter(|m| MessageKind::CONVERSATION.contains(&m.kind))
                .map(|m| MessageEmbedding {
                    message: m.id,
                    window: 0,
                    embedding: embed(&m.text),
                })
                .collect()
        } else {
            Vec::new()
        };
        let added: Vec<Passage> = passages
            .iter()
            .map(|spec| {
                let text = words(&spec.words);
                let mut p = Passage::new(id, text.clone(), at(spec.minute));
                if spec.embedded {
                    p.embedding = Some(embed(&text));
                }
                let tags: BTreeSet<&str> = spec
                    .tags
                    .iter()
                    .map(|&t| TAGS[t as usize % TAGS.len()])
                    .collect();
                if !tags.is_empty() {
                    p.metadata.insert(
                        "tags".into(),
                        serde_json::json!(tags.into_iter().collect::<Vec<_>>()),
                    );
                }
                p.valid_to = spec.until.map(at);
                p
            })
            .collect();
        let existing: Vec<PassageId> = model.passages.iter().map(|p| p.id).collect();
        let pick = |slot: usize| (!existing.is_empty()).then(|| existing[slot % existing.len()]);
        let deleted: Vec<PassageId> = delete
            .iter()
            .filter_map(|&s| pick(s))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let mut retired: Vec<PassageRetirement> = Vec::new();
        for &(slot, minute) in retire {
            if let Some(p) = pick(slot)
                && !deleted.contains(&p)
                && !retired.iter().any(|r| r.id == p)
            {
                retired.push(PassageRetirement {
                    id: p,
                    at: at(minute),
                    superseded_by: None,
                    reason: "forgotten".into(),
                });
            }
        }
        let mut next = model.state.clone();
        let mut commit = next.next_commit(built.clone(), added.clone());
        commit.message_embeddings = embeddings.clone();
        commit.deleted_passages = deleted.clone();
        commit.retired_passages = retired.clone();
        for store in self.stores() {
            store
                .agents
                .commit(&commit)
                .await
                .map_err(|e| failed("a step's commit", e))?;
        }
        let embedded: BTreeSet<MessageId> = embeddings.iter().map(|e| e.message).collect();
        self.model.agents[i].commit(next, &built, &embedded, &added, &deleted, &retired);
        Ok(())
    }

    async fn backfill(&mut self, slot: usize) -> Result<(), String> {
        let Some(i) = self.model.agent(slot) else {
            return Ok(());
        };
        let model = &self.model.agents[i];
        let id = model.id();
        // What the store lists as waiting must be what the model says is.
        let waiting = self
            .store
            .recall
            .unembedded_messages(id, 1_000)
            .await
            .map_err(|e| failed("listing unembedded messages", e))?;
        let expected: Vec<MessageId> = model.unembedded_messages().iter().map(|m| m.id).collect();
        let found: Vec<MessageId> = waiting.iter().map(|m| m.id).collect();
        if found != expected {
            return Err(format!(
                "unembedded messages: the store lists {found:?}, the model {expected:?}"
            ));
        }
        let messages: Vec<MessageEmbedding> = waiting
            .iter()
            .map(|m| MessageEmbedding {
                message: m.id,
                window: 0,
                embedding: embed(&m.text),
            })
            .collect();
        let passages: Vec<PassageEmbedding> = model
            .passages
            .iter()
            .filter(|p| p.embedding.is_none())
            .map(|p| PassageEmbedding {
                passage: p.id,
                embedding: embed(&p.text),
            })
            .collect();
        for store in self.stores() {
            store
                .agents
                .store_message_embeddings(id, &messages)
                .await
                .map_err(|e| failed("storing message embeddings", e))?;
            store
                .agents
                .store_passage_embeddings(id, &passages)
                .await
                .map_err(|e| failed("storing passage embeddings", e))?;
        }
        let model = &mut self.model.agents[i];
        for m in &mut model.messages {
            if messages.iter().any(|e| e.message == m.message.id) {
                m.embedded = true;
            }
        }
        for p in &mut model.passages {
            if let Some(e) = passages.iter().find(|e| e.passage == p.id) {
                p.embedding = Some(e.embedding.clone());
            }
        }
        Ok(())
    }

    async fn create_block(&mut self, w: &[u8]) -> Result<(), String> {
        let label = format!("block-{}", self.model.blocks_created);
        self.model.blocks_created += 1;
        let block = SharedBlock::new(MemoryBlock::new(label, words(w)).with_limit(2_000), t0());
        for store in self.stores() {
            store
                .blocks
                .create_block(&block)
                .await
                .map_err(|e| failed("creating a block", e))?;
        }
        self.model.blocks.push(BlockModel {
            block,
            holders: Vec::new(),
        });
        Ok(())
    }

    async fn attach(&mut self, agent: usize, block: usize, attach: bool) -> Result<(), String> {
        let (Some(a), Some(b)) = (self.model.agent(agent), self.model.block(block)) else {
            return Ok(());
        };
        let shared = self.model.blocks[b].block.clone();
        let id = self.model.agents[a].id();
        let holds = self.model.blocks[b].holders.contains(&id);
        if holds == attach {
            return Ok(());
        }
        let mut next = self.model.agents[a].state.clone();
        let changed = if attach {
            next.memory.add(shared.attached())
        } else {
            next.memory.remove(shared.block.label()).map(|_| ())
        };
        if let Err(e) = changed {
            return Err(format!("the model's own memory edit failed: {e}"));
        }
        let mut commit = next.next_commit(Vec::new(), Vec::new());
        commit.attachments_changed = true;
        for store in self.stores() {
            store
                .agents
                .commit(&commit)
                .await
                .map_err(|e| failed("an attachment's commit", e))?;
        }
        self.model.agents[a].commit(next, &[], &BTreeSet::new(), &[], &[], &[]);
        let holders = &mut self.model.blocks[b].holders;
        if attach {
            holders.push(id);
        } else {
            holders.retain(|h| *h != id);
        }
        Ok(())
    }

    async fn edit_block(&mut self, block: usize, w: &[u8]) -> Result<(), String> {
        let Some(b) = self.model.block(block) else {
            return Ok(());
        };
        let id = self.model.blocks[b].block.id;
        let text = format!(" {}", words(w));
        let edit = |block: &mut MemoryBlock| block.append(&text);
        let update = BlockUpdate::new(&edit, t0());
        let expected = self.model.blocks[b]
            .block
            .updated(&update)
            .map_err(|e| format!("the model's edit failed: {e}"))?;
        for store in self.stores() {
            let stored = store
                .blocks
                .update_block(id, &update)
                .await
                .map_err(|e| failed("editing a block", e))?;
            if stored != expected {
                return Err(format!(
                    "a block edit stored {stored:?}, the model expects {expected:?}"
                ));
            }
        }
        self.model.blocks[b].block = expected;
        Ok(())
    }

    async fn delete_block(&mut self, block: usize) -> Result<(), String> {
        let Some(b) = self.model.block(block) else {
            return Ok(());
        };
        let id = self.model.blocks[b].block.id;
        let held = !self.model.blocks[b].holders.is_empty();
        for store in self.stores() {
            match (store.blocks.delete_block(id).await, held) {
                (Ok(true), false) => {}
                (Err(StoreError::BlockInUse { .. }), true) => {}
                (other, _) => {
                    return Err(format!(
                        "deleting a block held by {} agents gave {other:?}",
                        self.model.blocks[b].holders.len()
                    ));
                }
            }
        }
        if !held {
            self.model.blocks.remove(b);
        }
        Ok(())
    }

    /// The agent a search runs for: a live one, or now and then a deleted one (whose searches
    /// find nothing).
    fn search_target(&self, slot: usize) -> Option<(AgentId, Option<usize>)> {
        if slot % 7 == 6
            && let Some(gone) = self
                .model
                .deleted
                .get(slot % self.model.deleted.len().max(1))
        {
            return Some((*gone, None));
        }
        self.model
            .agent(slot)
            .map(|i| (self.model.agents[i].id(), Some(i)))
    }

    fn recall_query(spec: &RecallSpec, page: Page) -> RecallQuery {
        let kinds = match spec.kinds % 5 {
            0 => Vec::new(),
            1 => MessageKind::CONVERSATION.to_vec(),
            2 => vec![MessageKind::User],
            3 => vec![MessageKind::Assistant],
            _ => vec![MessageKind::FunctionReturn, MessageKind::SystemAlert],
        };
        let text = words(&spec.words);
        RecallQuery {
            text: (!spec.words.is_empty()).then(|| text.clone()),
            embedding: (spec.embedded && !spec.words.is_empty()).then(|| embed(&text)),
            range: range(spec.range),
            kinds,
            page,
            ranking: Default::default(),
        }
    }

    async fn recall(
        &mut self,
        slot: usize,
        spec: &RecallSpec,
        drop_at: Option<u8>,
    ) -> Result<(), String> {
        let Some((agent, index)) = self.search_target(slot) else {
            return Ok(());
        };
        let (size, number) = (usize::from(spec.page.0), usize::from(spec.page.1));
        let page_query = Self::recall_query(spec, Page::new(number, size));
        if let Some(drop_at) = drop_at {
            drop_after_waits(self.store.recall.search(agent, &page_query), drop_at).await;
            return Ok(());
        }
        let full_query = Self::recall_query(spec, Page::first(1_000));
        let full = self
            .store
            .recall
            .search(agent, &full_query)
            .await
            .map_err(|e| failed("a recall search", e))?;
        let page = self
            .store
            .recall
            .search(agent, &page_query)
            .await
            .map_err(|e| failed("a recall search", e))?;
        let ids: Vec<MessageId> = full.hits.iter().map(|h| h.item.id).collect();
        let empty = AgentModel::new(state(agent, "deleted"));
        let model = index.map_or(&empty, |i| &self.model.agents[i]);
        for hit in &full.hits {
            if hit.item.agent_id != agent || !full_query.admits(&hit.item) {
                return Err(format!(
                    "recall returned {:?} ({:?} at {}), which the query's filters do not admit",
                    hit.item.text, hit.item.kind, hit.item.created_at
                ));
            }
            let stored = model.messages.iter().find(|m| m.message.id == hit.item.id);
            if stored.map(|m| &m.message) != Some(&hit.item) {
                return Err(format!("recall returned {:?}, not as stored", hit.item));
            }
        }
        self.recall_primitives(agent, &full_query).await?;
        match model.recall_matches(&full_query) {
            Some(expected) => {
                let found: BTreeSet<MessageId> = ids.iter().copied().collect();
                if found.len() != ids.len() {
                    return Err("recall returned a message twice".into());
                }
                if found != expected {
                    let text = |ids: &BTreeSet<MessageId>| -> Vec<String> {
                        ids.iter()
                            .filter_map(|id| model.messages.iter().find(|m| m.message.id == *id))
                            .map(|m| m.message.text.clone())
                            .collect()
                    };
                    return Err(format!(
                        "recall search {:?}: missing {:?}, unexpected {:?}",
                        full_query.text,
                        text(&expected.difference(&found).copied().collect()),
                        text(&found.difference(&expected).copied().collect()),
                    ));
                }
            }
            None => {
                let expected = model.listing(&full_query);
                if ids != expected {
                    return Err(format!(
                        "recall listing: {} messages in the store's order, {} expected (or \
                         another order)",
                        ids.len(),
                        expected.len()
                    ));
                }
            }
        }
        if full.total != ids.len() {
            return Err(format!(
                "recall total {} for {} results",
                full.total,
                ids.len()
            ));
        }
        check_page("recall", &full, &page, |m| m.id)?;
        if let Some(shadow) = &self.shadow {
            let reference = shadow
                .recall
                .search(agent, &full_query)
                .await
                .map_err(|e| failed("the reference store's recall search", e))?;
            same_ranking("recall", &full, &reference, |m| m.id, |m| m.text.clone())?;
        }
        Ok(())
    }

    /// What the store's recall primitives return must pass the query's filters on their own
    /// (memgpt-core's search leaves out what does not, which would hide a store's filter bug
    /// from the search's results).
    async fn recall_primitives(&self, agent: AgentId, query: &RecallQuery) -> Result<(), String> {
        let Some(text) = query.text_query() else {
            return Ok(());
        };
        let recall = &self.store.recall;
        let terms = query_terms(text);
        let mut keys = recall
            .text_candidates(agent, &terms, query, 1_000)
            .await
            .map_err(|e| failed("recall text_candidates", e))?
            .keys;
        if let Some(embedding) = &query.embedding {
            keys.extend(
                recall
                    .vector_candidates(agent, embedding, query, 1_000)
                    .await
                    .map_err(|e| failed("recall vector_candidates", e))?,
            );
        }
        for candidate in recall
            .candidates(agent, &keys)
            .await
            .map_err(|e| failed("recall candidates", e))?
        {
            let m = &candidate.message;
            if m.agent_id != agent || !query.admits(m) {
                return Err(format!(
                    "the store's recall candidates hold {:?} ({:?} at {}), which the query's \
                     filters do not admit",
                    m.text, m.kind, m.created_at
                ));
            }
        }
        Ok(())
    }

    /// What the store's archival primitives return must pass the query's filters on their own.
    async fn archival_primitives(
        &self,
        agent: AgentId,
        query: &ArchivalQuery,
    ) -> Result<(), String> {
        let archival = &self.store.archival;
        let terms = query_terms(&query.text);
        let mut keys = if terms.is_empty() {
            Vec::new()
        } else {
            archival
                .text_candidates(agent, &terms, query, 1_000)
                .await
                .map_err(|e| failed("archival text_candidates", e))?
                .keys
        };
        if let Some(embedding) = &query.embedding {
            keys.extend(
                archival
                    .vector_candidates(agent, embedding, query, 1_000)
                    .await
                    .map_err(|e| failed("archival vector_candidates", e))?
                    .keys,
            );
        }
        for candidate in archival
            .passage_candidates(agent, &keys)
            .await
            .map_err(|e| failed("archival passage_candidates", e))?
        {
            let p = &candidate.passage;
            if p.agent_id != agent || !query.admits(p) {
                return Err(format!(
                    "the store's archival candidates hold {:?} (tags {:?}, at {}, valid to {:?}), \
                     which the query's filters do not admit",
                    p.text,
                    p.tags(),
                    p.created_at,
                    p.valid_to
                ));
            }
        }
        Ok(())
    }

    fn archival_query(spec: &ArchivalSpec, page: Page) -> ArchivalQuery {
        let text = words(&spec.words);
        let mode = match spec.mode % 4 {
            0 => SearchMode::Vector,
            1 => SearchMode::Text,
            _ => SearchMode::Hybrid,
        };
        let embedding: Option<Embedding> =
            (spec.mode % 4 != 1 && spec.mode % 4 != 3).then(|| embed(&text));
        ArchivalQuery {
            text,
            embedding,
            mode,
            page,
            tags: spec
                .tags
                .iter()
                .map(|&t| TAGS[t as usize % TAGS.len()].to_owned())
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect(),
            range: range(spec.range),
            validity: match spec.validity.0 % 3 {
                0 => Validity::Current,
                1 => Validity::AsOf(at(spec.validity.1)),
                _ => Validity::Any,
            },
        }
    }

    async fn archival(
        &mut self,
        slot: usize,
        spec: &ArchivalSpec,
        drop_at: Option<u8>,
    ) -> Result<(), String> {
        let Some((agent, index)) = self.search_target(slot) else {
            return Ok(());
        };
        let (size, number) = (usize::from(spec.page.0), usize::from(spec.page.1));
        let page_query = Self::archival_query(spec, Page::new(number, size));
        if let Some(drop_at) = drop_at {
            drop_after_waits(self.store.archival.search(agent, &page_query), drop_at).await;
            return Ok(());
        }
        // `Current` is fixed to one instant so the model and every store see the same facts.
        let mut full_query = Self::archival_query(spec, Page::first(1_000));
        full_query.validity = full_query.validity.resolved();
        let page_query = ArchivalQuery {
            validity: full_query.validity,
            ..page_query
        };
        let full = self
            .store
            .archival
            .search(agent, &full_query)
            .await
            .map_err(|e| failed("an archival search", e))?;
        let page = self
            .store
            .archival
            .search(agent, &page_query)
            .await
            .map_err(|e| failed("an archival search", e))?;
        let empty = AgentModel::new(state(agent, "deleted"));
        let model = index.map_or(&empty, |i| &self.model.agents[i]);
        for hit in &full.hits {
            if hit.item.agent_id != agent || !full_query.admits(&hit.item) {
                return Err(format!(
                    "archival returned {:?} (tags {:?}, at {}, valid to {:?}), which the query's \
                     filters do not admit",
                    hit.item.text,
                    hit.item.tags(),
                    hit.item.created_at,
                    hit.item.valid_to
                ));
            }
            let stored = model.passages.iter().find(|p| p.id == hit.item.id);
            if stored != Some(&hit.item) {
                return Err(format!("archival returned {:?}, not as stored", hit.item));
            }
        }
        self.archival_primitives(agent, &full_query).await?;
        let ids: Vec<PassageId> = full.hits.iter().map(|h| h.item.id).collect();
        let found: BTreeSet<PassageId> = ids.iter().copied().collect();
        if found.len() != ids.len() {
            return Err("archival returned a passage twice".into());
        }
        let expected = model.archival_matches(&full_query);
        if found != expected {
            let text = |ids: &BTreeSet<PassageId>| -> Vec<String> {
                ids.iter()
                    .filter_map(|id| model.passages.iter().find(|p| p.id == *id))
                    .map(|p| p.text.clone())
                    .collect()
            };
            return Err(format!(
                "archival {:?} search {:?}: missing {:?}, unexpected {:?}",
                full_query.mode,
                full_query.text,
                text(&expected.difference(&found).copied().collect()),
                text(&found.difference(&expected).copied().collect()),
            ));
        }
        if full.total != ids.len() {
            return Err(format!(
                "archival {:?} total {} for {} results",
                full_query.mode,
                full.total,
                ids.len()
            ));
        }
        check_page("archival", &full, &page, |p| p.id)?;
        if let Some(shadow) = &self.shadow {
            let reference = shadow
                .archival
                .search(agent, &full_query)
                .await
                .map_err(|e| failed("the reference store's archival search", e))?;
            same_ranking("archival", &full, &reference, |p| p.id, |p| p.text.clone())?;
        }
        Ok(())
    }

    async fn read(&mut self, slot: usize) -> Result<(), String> {
        let Some(i) = self.model.agent(slot) else {
            return Ok(());
        };
        let model = &self.model.agents[i];
        let id = model.id();
        let s = &self.store;
        let loaded = s
            .agents
            .load_agent(id)
            .await
            .map_err(|e| failed("loading an agent", e))?;
        // As stored: what serialises (an in-memory edit counter does not).
        let json = |s: &memgpt_core::store::AgentState| serde_json::to_value(s).unwrap_or_default();
        let (stored, expected) = (loaded.as_ref().map(json), json(&model.state));
        if stored.as_ref() != Some(&expected) {
            let differ: Vec<String> = match (&stored, &expected) {
                (Some(serde_json::Value::Object(a)), serde_json::Value::Object(b)) => b
                    .iter()
                    .filter(|(k, v)| a.get(*k) != Some(v))
                    .map(|(k, v)| format!("{k}: stored {:?}, model {v}", a.get(k)))
                    .collect(),
                _ => vec![format!("stored {stored:?}")],
            };
            return Err(format!("the agent does not load as committed: {differ:?}"));
        }
        let version = s
            .agents
            .agent_version(id)
            .await
            .map_err(|e| failed("agent_version", e))?;
        if version != Some(model.state.version) {
            return Err(format!(
                "agent_version {version:?}, expected {}",
                model.state.version
            ));
        }
        let messages = s
            .recall
            .count_messages(id)
            .await
            .map_err(|e| failed("count_messages", e))?;
        let passages = s
            .archival
            .count_passages(id)
            .await
            .map_err(|e| failed("count_passages", e))?;
        if (messages, passages) != (model.messages.len() as u64, model.passages.len() as u64) {
            return Err(format!(
                "counts: {messages} messages and {passages} passages, expected {} and {}",
                model.messages.len(),
                model.passages.len()
            ));
        }
        let listed = s
            .archival
            .list_passages(id, Page::first(1_000))
            .await
            .map_err(|e| failed("list_passages", e))?;
        let listed: Vec<&Passage> = listed.hits.iter().map(|h| &h.item).collect();
        let expected: Vec<&Passage> = model.passages.iter().collect();
        if listed != expected {
            return Err(format!(
                "list_passages gives {} passages (or others, or in another order) for {}",
                listed.len(),
                expected.len()
            ));
        }
        // By id, with an unknown id among them.
        let mut wanted: Vec<MessageId> = model
            .messages
            .iter()
            .rev()
            .step_by(2)
            .map(|m| m.message.id)
            .collect();
        wanted.insert(wanted.len() / 2, MessageId::new());
        let got = s
            .recall
            .get_messages(id, &wanted)
            .await
            .map_err(|e| failed("get_messages", e))?;
        let expected: Vec<&Message> = wanted
            .iter()
            .filter_map(|w| model.messages.iter().find(|m| m.message.id == *w))
            .map(|m| &m.message)
            .collect();
        if got.iter().collect::<Vec<_>>() != expected {
            return Err("get_messages does not give the messages asked for, in order".into());
        }
        let mut wanted: Vec<PassageId> = model.passages.iter().map(|p| p.id).collect();
        wanted.reverse();
        wanted.push(PassageId::new());
        let got = s
            .archival
            .get_passages(id, &wanted)
            .await
            .map_err(|e| failed("get_passages", e))?;
        let expected: Vec<&Passage> = wanted
            .iter()
            .filter_map(|w| model.passages.iter().find(|p| p.id == *w))
            .collect();
        if got.iter().collect::<Vec<_>>() != expected {
            return Err("get_passages does not give the passages asked for, in order".into());
        }
        // Shared blocks: as edited, held by whom the model says.
        let holders: HashMap<_, _> = self.model.holders();
        let ids: Vec<_> = self.model.blocks.iter().map(|b| b.block.id).collect();
        let stored = s
            .blocks
            .get_blocks(&ids)
            .await
            .map_err(|e| failed("get_blocks", e))?;
        let expected: Vec<&SharedBlock> = self.model.blocks.iter().map(|b| &b.block).collect();
        if stored.iter().collect::<Vec<_>>() != expected {
            return Err("get_blocks does not give the blocks as the model has them".into());
        }
        for (block, held_by) in holders {
            let found: BTreeSet<AgentId> = s
                .blocks
                .block_agents(block)
                .await
                .map_err(|e| failed("block_agents", e))?
                .into_iter()
                .collect();
            if found != held_by.into_iter().collect() {
                return Err(format!(
                    "block {block} is held by {found:?}, not as the model says"
                ));
            }
        }
        // The deleted agents are gone.
        for gone in &self.model.deleted {
            if s.agents
                .load_agent(*gone)
                .await
                .map_err(|e| failed("load_agent", e))?
                .is_some()
            {
                return Err(format!("deleted agent {gone} still loads"));
            }
            if s.recall
                .count_messages(*gone)
                .await
                .map_err(|e| failed("count_messages", e))?
                != 0
            {
                return Err(format!("deleted agent {gone} still has messages"));
            }
        }
        Ok(())
    }
}

/// Checks that `page` is the slice of `full` it claims to be, with the same total.
fn check_page<T, K: PartialEq + std::fmt::Debug>(
    what: &str,
    full: &SearchPage<T>,
    page: &SearchPage<T>,
    key: impl Fn(&T) -> K,
) -> Result<(), String> {
    let expected: Vec<K> = full
        .hits
        .iter()
        .skip(page.page.offset())
        .take(page.page.size)
        .map(|h| key(&h.item))
        .collect();
    let got: Vec<K> = page.hits.iter().map(|h| key(&h.item)).collect();
    if got != expected || page.total != full.total {
        return Err(format!(
            "{what} page {} of {}: {} hits of total {}, the full ranking gives {} of total {}",
            page.page.number,
            page.page.size,
            got.len(),
            page.total,
            expected.len(),
            full.total
        ));
    }
    Ok(())
}

/// Checks that two rankings of the same query agree: the same items in the same order with the
/// same scores (to rounding; items whose scores tie may come in either order).
fn same_ranking<T, K: PartialEq + Ord + Copy + std::fmt::Debug>(
    what: &str,
    store: &SearchPage<T>,
    reference: &SearchPage<T>,
    key: impl Fn(&T) -> K,
    text: impl Fn(&T) -> String,
) -> Result<(), String> {
    let close = |a: f32, b: f32| (a - b).abs() <= 1e-4 * a.abs().max(b.abs()).max(1.0);
    let describe = |page: &SearchPage<T>| -> Vec<String> {
        page.hits
            .iter()
            .map(|h| format!("{:?} {:.5}", text(&h.item), h.score))
            .collect()
    };
    let mismatch = || {
        format!(
            "{what} ranking differs from the reference store's:\n    store:     {:?}\n    reference: {:?}",
            describe(store),
            describe(reference)
        )
    };
    if store.hits.len() != reference.hits.len() || store.total != reference.total {
        return Err(mismatch());
    }
    for (a, b) in store.hits.iter().zip(&reference.hits) {
        if !close(a.score, b.score) {
            return Err(mismatch());
        }
    }
    // Same items, and the same item at every place whose score is not tied with a neighbour's.
    let mut a: Vec<K> = store.hits.iter().map(|h| key(&h.item)).collect();
    let mut b: Vec<K> = reference.hits.iter().map(|h| key(&h.item)).collect();
    for i in 0..a.len() {
        let tied = |j: usize| j < a.len() && close(store.hits[i].score, store.hits[j].score);
        if a[i] != b[i] && !(i > 0 && tied(i - 1)) && !tied(i + 1) {
            return Err(mismatch());
        }
    }
    a.sort();
    b.sort();
    if a != b {
        return Err(mismatch());
    }
    Ok(())
}
