//! usearch HNSW indexes of embeddings, derived from SQLite: archival passages (the `passages`
//! table, in `archival.usearch/`) and recall messages (the `message_embeddings` table, in
//! `recall.usearch/`).
//!
//! One index per agent and source, `<dir>/<agent>.usearch`, keyed by passage or message
//! sequence number, with a sidecar `<agent>.json` recording what the saved file contains: the
//! highest row and deletion sequence numbers applied (message embeddings are never deleted but
//! with their agent). On first use (and before every search, to see
//! other processes' commits) an index replays the passages and deletions the database has after
//! that watermark; a missing, unreadable or mismatched file is rebuilt from the database. Saving
//! is periodic (after [`UsearchOptions::save_every`] changes or a quarter of the index size,
//! whichever is more; on [`SqliteStore::checkpoint`](crate::SqliteStore::checkpoint); and on
//! drop), since anything unsaved is replayed on open.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

use memgpt_core::embed::cosine;
use memgpt_core::ids::AgentId;
use memgpt_core::store::{RecallQuery, StoreError};
use serde_json::json;
use sqlx::{Row, SqlitePool};
use tracing::{debug, info};
use usearch::{Index, IndexOptions, MetricKind, ScalarKind};

use crate::codec::{blob_to_vector, corrupt, db};

/// How vectors are stored in the index.
///
/// For large archives f16 or bf16 is the usual choice: on 1M passages of 384-d sentence
/// embeddings both keep f32's recall@10 at the same `ef_search` with half the memory and
/// faster builds; i8 loses recall there (see BENCHMARKS.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Quantization {
    /// 32-bit floats (exact vectors, most memory).
    #[default]
    F32,
    /// 16-bit floats (half the memory, negligible recall loss).
    F16,
    /// bfloat16 (half the memory; a shorter mantissa than f16 but native dot products on
    /// CPUs with AVX-512 BF16 or ARM BF16).
    BF16,
    /// 8-bit integers (a quarter of the memory).
    I8,
}

impl FromStr for Quantization {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "f32" => Ok(Quantization::F32),
            "f16" => Ok(Quantization::F16),
            "bf16" => Ok(Quantization::BF16),
            "i8" => Ok(Quantization::I8),
            other => Err(format!("unknown quantization `{other}`")),
        }
    }
}

impl Quantization {
    fn scalar(self) -> ScalarKind {
        match self {
            Quantization::F32 => ScalarKind::F32,
            Quantization::F16 => ScalarKind::F16,
            Quantization::BF16 => ScalarKind::BF16,
            Quantization::I8 => ScalarKind::I8,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Quantization::F32 => "f32",
            Quantization::F16 => "f16",
            Quantization::BF16 => "bf16",
            Quantization::I8 => "i8",
        }
    }
}

/// HNSW parameters of the usearch indexes.
#[derive(Clone, Debug, PartialEq)]
pub struct UsearchOptions {
    /// Vector storage.
    pub quantization: Quantization,
    /// Graph degree (`M`).
    pub connectivity: usize,
    /// Candidate list size while inserting (`ef_construction`).
    pub expansion_add: usize,
    /// Candidate list size while searching (`ef`); raised to the requested depth when larger.
    pub expansion_search: usize,
    /// Searches whose candidate vectors take at most this many kilobytes (as `f32`) compare the
    /// query with every candidate instead of walking the graph, so small indexes (and small
    /// filtered sets) give exact results; 0 always walks the graph. The default, 10,000 KB
    /// (Qdrant's `full_scan_threshold`), scans at most ~2.5 M floats, about a millisecond.
    pub full_scan_kb: usize,
    /// Unsaved changes after which an index is saved (at least; large indexes wait for a
    /// quarter of their size).
    pub save_every: usize,
    /// Threads used to add large batches (rebuilds).
    pub threads: usize,
}

impl UsearchOptions {
    /// Whether a search among `candidates` vectors of `dimension` floats scans them all.
    fn scans_fully(&self, candidates: usize, dimension: usize) -> bool {
        candidates.saturating_mul(dimension).saturating_mul(4) <= self.full_scan_kb * 1024
    }
}

impl Default for UsearchOptions {
    fn default() -> Self {
        Self {
            quantization: Quantization::F32,
            connectivity: 16,
            expansion_add: 128,
            expansion_search: 96,
            full_scan_kb: 10_000,
            save_every: 10_000,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }
}

/// Which embeddings an index holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum VectorSource {
    /// Archival passages, keyed by passage seq; deletions replayed from `passage_deletions`.
    Passages,
    /// Conversation message embeddings, keyed by message seq and window
    /// ([`window_key`]); the watermark is the embedding row's seq (a message may be embedded
    /// long after it was committed).
    Messages,
}

/// Bits of a message's index key that hold its window: a message has at most
/// [`MAX_MESSAGE_WINDOWS`](memgpt_core::store::MAX_MESSAGE_WINDOWS) windows.
const WINDOW_BITS: u32 = 5;
const _: () = assert!(memgpt_core::store::MAX_MESSAGE_WINDOWS <= 1 << WINDOW_BITS);

/// The index key of window `window` of message `seq` (what the rows' SQL computes).
#[cfg(test)]
fn window_key(seq: i64, window: i64) -> u64 {
    ((seq as u64) << WINDOW_BITS) | window as u64
}

/// The message seq of an index key of [`VectorSource::Messages`].
fn message_of(key: i64) -> i64 {
    ((key as u64) >> WINDOW_BITS) as i64
}

/// Ranked window keys as distinct messages, each at its best window's rank; at most `k`.
fn distinct_messages(ranked: &[(f32, i64)], k: usize) -> Vec<i64> {
    let mut seen = std::collections::HashSet::new();
    ranked
        .iter()
        .map(|&(_, key)| message_of(key))
        .filter(|seq| seen.insert(*seq))
        .take(k)
        .collect()
}

/// The sidecar's name for how an index keys its vectors.
fn key_layout(source: VectorSource) -> &'static str {
    match source {
        VectorSource::Passages => "passage",
        VectorSource::Messages => "message-window",
    }
}

impl VectorSource {
    /// The newest row and the newest deletion of an agent (`?1` is the agent).
    fn newest_sql(self) -> &'static str {
        match self {
            VectorSource::Passages => {
                "SELECT (SELECT max(seq) FROM passages WHERE agent_id = ?1 AND embedding IS NOT NULL) AS passage, \
                 (SELECT max(seq) FROM passage_deletions WHERE agent_id = ?1) AS deletion"
            }
            VectorSource::Messages => {
                "SELECT (SELECT max(seq) FROM message_embeddings WHERE agent_id = ?1) AS passage, \
                 NULL AS deletion"
            }
        }
    }

    /// `(key, seq, embedding)` rows after a watermark.
    fn rows_sql(self) -> &'static str {
        match self {
            VectorSource::Passages => {
                "SELECT seq AS key, seq, embedding FROM passages WHERE agent_id = ? AND seq > ? \
                 AND embedding IS NOT NULL ORDER BY seq LIMIT ?"
            }
            VectorSource::Messages => {
                "SELECT (message_seq << 5) | window_index AS key, seq, embedding \
                 FROM message_embeddings WHERE agent_id = ? AND seq > ? AND window_index < 32 \
                 ORDER BY seq LIMIT ?"
            }
        }
    }
}

/// What a saved index contains.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Watermark {
    passage_seq: i64,
    deletion_seq: i64,
}

struct AgentIndex {
    index: RwLock<Index>,
    /// Serialises replays and saves; holds the watermark and the unsaved-change count.
    state: Mutex<(Watermark, usize)>,
    dimension: usize,
}

impl AgentIndex {
    fn read(&self) -> RwLockReadGuard<'_, Index> {
        self.index.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Index> {
        self.index.write().unwrap_or_else(|p| p.into_inner())
    }

    fn state(&self) -> MutexGuard<'_, (Watermark, usize)> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The usearch indexes of one source in one data directory (see the module documentation).
pub struct UsearchIndexes {
    dir: PathBuf,
    source: VectorSource,
    options: UsearchOptions,
    agents: Mutex<HashMap<AgentId, Arc<AgentIndex>>>,
    /// Agents committed to since their loaded index last caught up. A loaded index of an agent
    /// not in this set is current: one process at a time opens a data directory.
    dirty: Mutex<std::collections::HashSet<AgentId>>,
    /// Serialises catch-ups (database reads + index writes) across tasks.
    catch_up: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for UsearchIndexes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UsearchIndexes")
            .field("dir", &self.dir)
            .field("source", &self.source)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

fn usearch_error(context: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Backend {
        message: format!("{context}: {e}"),
        transient: false,
        source: None,
    }
}

/// Search matches as `(cosine similarity, key)`, best first, ties newest (highest key) first:
/// the order every store's exact search gives.
fn ranked(matches: &usearch::ffi::Matches) -> Vec<(f32, i64)> {
    let mut ranked: Vec<(f32, i64)> = matches
        .keys
        .iter()
        .zip(&matches.distances)
        .map(|(key, distance)| (1.0 - distance, *key as i64))
        .collect();
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)));
    ranked
}

/// The `k` of `keys` nearest to `query` by comparing each stored vector (keys the index does
/// not hold are skipped), ranked like [`ranked`].
fn exact_among(
    index: &Index,
    query: &[f32],
    keys: &std::collections::HashSet<u64>,
    k: usize,
) -> Result<Vec<(f32, i64)>, StoreError> {
    let mut vector = vec![0f32; query.len()];
    let mut scored = Vec::with_capacity(keys.len());
    for &key in keys {
        let found = index
            .get(key, &mut vector)
            .map_err(|e| usearch_error("reading a vector index", e))?;
        if found > 0 {
            scored.push((cosine(query, &vector), key as i64));
        }
    }
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)));
    scored.truncate(k);
    Ok(scored)
}

/// Extra neighbours fetched so ties at the cut are ordered like an exact search.
const TIE_MARGIN: usize = 16;

/// Rows replayed per database read.
const BATCH: i64 = 20_000;

/// The sidecar's mark of indexes keyed by sequence numbers that are never given twice (the
/// schema version that made them so): an index saved without it is rebuilt.
const NUMBERING: u64 = 12;

/// Marks an agent's index dirty again when dropped armed: a catch-up that fails or whose
/// future is dropped half-way leaves the index to be caught up by the next search.
struct StillDirty<'a> {
    indexes: &'a UsearchIndexes,
    agent: AgentId,
    armed: bool,
}

impl Drop for StillDirty<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.indexes.mark_dirty(self.agent);
        }
    }
}

impl UsearchIndexes {
    /// The indexes of `source` in `dir` (created if missing; indexes load lazily per agent).
    pub(crate) fn open(
        dir: &Path,
        source: VectorSource,
        options: UsearchOptions,
    ) -> Result<Self, StoreError> {
        std::fs::create_dir_all(dir).map_err(|e| db("creating a vector index directory", e))?;
        Ok(Self {
            dir: dir.to_owned(),
            source,
            options,
            agents: Mutex::new(HashMap::new()),
            dirty: Mutex::new(std::collections::HashSet::new()),
            catch_up: tokio::sync::Mutex::new(()),
        })
    }

    /// Notes that the database changed `agent`'s passages.
    pub(crate) fn mark_dirty(&self, agent: AgentId) {
        self.dirty
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(agent);
    }

    fn agents(&self) -> MutexGuard<'_, HashMap<AgentId, Arc<AgentIndex>>> {
        self.agents.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn paths(&self, agent: AgentId) -> (PathBuf, PathBuf) {
        let stem = agent.as_uuid().simple().to_string();
        (
            self.dir.join(format!("{stem}.usearch")),
            self.dir.join(format!("{stem}.json")),
        )
    }

    fn new_index(&self, dimension: usize, capacity: usize) -> Result<Index, StoreError> {
        let options = IndexOptions {
            dimensions: dimension,
            metric: MetricKind::Cos,
            quantization: self.options.quantization.scalar(),
            connectivity: self.options.connectivity,
            expansion_add: self.options.expansion_add,
            expansion_search: self.options.expansion_search,
            multi: false,
        };
        let index =
            Index::new(&options).map_err(|e| usearch_error("creating a vector index", e))?;
        index
            .reserve_capacity_and_threads(capacity.max(64), self.options.threads.max(1))
            .map_err(|e| usearch_error("reserving vector index capacity", e))?;
        Ok(index)
    }

    /// Loads the agent's saved index if it is usable, else starts an empty one.
    fn load(&self, agent: AgentId, dimension: usize) -> Result<AgentIndex, StoreError> {
        let (index_path, sidecar_path) = self.paths(agent);
        let saved = std::fs::read_to_string(&sidecar_path)
            .ok()
            .and_then(|json| {
                let v: serde_json::Value = serde_json::from_str(&json).ok()?;
                // Indexes saved before keys held windows have no `keys`: rebuilt. So are
                // those keyed by the numbering from before sequence numbers were never reused.
                let keys = v["keys"].as_str().unwrap_or("passage");
                let usable = v["dimension"].as_u64()? as usize == dimension
                    && v["quantization"].as_str()? == self.options.quantization.name()
                    && keys == key_layout(self.source)
                    && v["numbering"].as_u64() == Some(NUMBERING);
                usable.then_some(Watermark {
                    passage_seq: v["passage_seq"].as_i64()?,
                    deletion_seq: v["deletion_seq"].as_i64()?,
                })
            });
        if let Some(watermark) = saved {
            let index = self.new_index(dimension, 64)?;
            match index.load(&index_path.to_string_lossy()) {
                Ok(()) if index.dimensions() == dimension => {
                    let capacity = index.size() + 1_024;
                    index
                        .reserve_capacity_and_threads(capacity, self.options.threads.max(1))
                        .map_err(|e| usearch_error("reserving vector index capacity", e))?;
                    debug!(%agent, size = index.size(), "loaded the vector index");
                    return Ok(AgentIndex {
                        index: RwLock::new(index),
                        state: Mutex::new((watermark, 0)),
                        dimension,
                    });
                }
                Ok(()) => {
                    info!(%agent, "the saved vector index has another dimension; rebuilding it")
                }
                Err(e) => {
                    info!(%agent, error = %e, "the saved vector index is unreadable; rebuilding it")
                }
            }
        }
        Ok(AgentIndex {
            index: RwLock::new(self.new_index(dimension, 1_024)?),
            state: Mutex::new((Watermark::default(), 0)),
            dimension,
        })
    }

    /// The agent's index, loaded or created, not yet caught up.
    fn index_for(&self, agent: AgentId, dimension: usize) -> Result<Arc<AgentIndex>, StoreError> {
        if let Some(index) = self
            .agents()
            .get(&agent)
            .filter(|i| i.dimension == dimension)
        {
            return Ok(index.clone());
        }
        let index = Arc::new(self.load(agent, dimension)?);
        self.agents().insert(agent, index.clone());
        Ok(index)
    }

    /// Brings the agent's index (of the store's `dimension`) up to date with the database.
    pub(crate) async fn catch_up(
        &self,
        pool: &SqlitePool,
        agent: AgentId,
        dimension: usize,
    ) -> Result<(), StoreError> {
        self.caught_up(pool, agent, dimension).await.map(|_| ())
    }

    /// [`UsearchIndexes::catch_up`], returning the index.
    async fn caught_up(
        &self,
        pool: &SqlitePool,
        agent: AgentId,
        dimension: usize,
    ) -> Result<Arc<AgentIndex>, StoreError> {
        let _serial = self.catch_up.lock().await;
        let loaded = self
            .agents()
            .get(&agent)
            .filter(|i| i.dimension == dimension)
            .cloned();
        let dirty = self
            .dirty
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&agent);
        if let (Some(index), false) = (&loaded, dirty) {
            return Ok(index.clone());
        }
        // From here until the watermark is stored, the index is behind the database.
        let mut still_dirty = StillDirty {
            indexes: self,
            agent,
            armed: !memgpt_core::failpoint::fault("fault.usearch.dirty_mark_lost"),
        };
        let index = match loaded {
            Some(index) => index,
            None => self.index_for(agent, dimension)?,
        };
        // One cheap query (both maxima come from indexes) tells whether anything is new.
        let row = sqlx::query(self.source.newest_sql())
            .bind(agent.as_uuid())
            .fetch_one(pool)
            .await
            .map_err(|e| db("reading the vector index watermark", e))?;
        let newest_passage: i64 = row
            .try_get::<Option<i64>, _>("passage")
            .map_err(|e| db("reading the vector index watermark", e))?
            .unwrap_or(0);
        let newest_deletion: i64 = row
            .try_get::<Option<i64>, _>("deletion")
            .map_err(|e| db("reading the vector index watermark", e))?
            .unwrap_or(0);
        let mut watermark = index.state().0;
        let mut changes = 0usize;
        if watermark.passage_seq == 0 && index.read().size() == 0 {
            // A fresh index: deletions so far concern passages that are already gone.
            watermark.deletion_seq = watermark.deletion_seq.max(newest_deletion);
        }
        if newest_passage <= watermark.passage_seq && newest_deletion <= watermark.deletion_seq {
            index.state().0 = watermark;
            still_dirty.armed = false;
            return Ok(index);
        }
        loop {
            let rows = sqlx::query(self.source.rows_sql())
                .bind(agent.as_uuid())
                .bind(watermark.passage_seq)
                .bind(BATCH)
                .fetch_all(pool)
                .await
                .map_err(|e| db("reading embeddings to index", e))?;
            let Some(last) = rows.last() else { break };
            watermark.passage_seq = last
                .try_get("seq")
                .map_err(|e| db("reading embeddings to index", e))?;
            let mut batch = Vec::with_capacity(rows.len());
            for row in &rows {
                let key: i64 = row
                    .try_get("key")
                    .map_err(|e| db("reading embeddings to index", e))?;
                let blob: Vec<u8> = row
                    .try_get("embedding")
                    .map_err(|e| db("reading embeddings to index", e))?;
                let vector = blob_to_vector(&blob)?;
                if vector.len() != dimension {
                    return Err(corrupt(format!(
                        "row {key} has a {}-d embedding in a {dimension}-d store",
                        vector.len()
                    )));
                }
                batch.push((key as u64, vector));
            }
            changes += batch.len();
            let target = index.clone();
            let threads = self.options.threads.max(1);
            tokio::task::spawn_blocking(move || add_batch(&target, batch, threads))
                .await
                .map_err(|e| db("indexing embeddings", e))??;
            if (rows.len() as i64) < BATCH {
                break;
            }
        }
        let deletions = match self.source {
            VectorSource::Passages => sqlx::query(
                "SELECT seq, passage_seq FROM passage_deletions WHERE agent_id = ? AND seq > ? ORDER BY seq",
            )
            .bind(agent.as_uuid())
            .bind(watermark.deletion_seq)
            .fetch_all(pool)
            .await
            .map_err(|e| db("reading passage deletions", e))?,
            VectorSource::Messages => Vec::new(),
        };
        if !deletions.is_empty() {
            let target = index.write();
            for row in &deletions {
                let passage: i64 = row
                    .try_get("passage_seq")
                    .map_err(|e| db("reading passage deletions", e))?;
                target
                    .remove(passage as u64)
                    .map_err(|e| usearch_error("removing a deleted passage", e))?;
                watermark.deletion_seq = row
                    .try_get("seq")
                    .map_err(|e| db("reading passage deletions", e))?;
            }
            changes += deletions.len();
        }
        let save = {
            let mut state = index.state();
            state.0 = watermark;
            state.1 += changes;
            // Geometric: saving rewrites the whole index, so wait for a quarter of its size in
            // changes (at least `save_every`); total writes stay a few times the final size,
            // and what a crash leaves to replay stays proportionate.
            state.1 >= self.options.save_every.max(index.read().size() / 4)
        };
        still_dirty.armed = false;
        if save {
            self.save(agent, &index)?;
        }
        Ok(index)
    }

    /// The `k` passages of `agent` nearest to `query` as `(cosine similarity, passage seq)`,
    /// best first.
    pub(crate) async fn search(
        &self,
        pool: &SqlitePool,
        agent: AgentId,
        dimension: usize,
        query: &[f32],
        k: usize,
    ) -> Result<Vec<(f32, i64)>, StoreError> {
        let index = self.caught_up(pool, agent, dimension).await?;
        let index = index.read();
        let k = k.min(index.size());
        if k == 0 {
            return Ok(Vec::new());
        }
        // usearch searches with `max(expansion_search, k)` candidates, so a deep page needs no
        // change to the index's shared search depth. Fetch a margin past `k` so rows tied at the
        // cut are all seen, then order ties newest first (the contract every store follows)
        // before cutting.
        let fetch = k + TIE_MARGIN.min(index.size() - k);
        let matches = if self.options.scans_fully(index.size(), dimension) {
            // The graph walk is approximate: among many near-equal vectors it can settle on a
            // plateau and miss even an exact duplicate of the query. Small indexes are scanned.
            index.exact_search(query, fetch)
        } else {
            index.search(query, fetch)
        }
        .map_err(|e| usearch_error("searching a vector index", e))?;
        let mut ranked = ranked(&matches);
        ranked.truncate(k);
        Ok(ranked)
    }

    /// The `k` rows of `agent` among `admitted` (keys) nearest to `query`, as `(cosine
    /// similarity, key)`, best first: the HNSW walk skips every other key.
    pub(crate) async fn search_admitted(
        &self,
        pool: &SqlitePool,
        agent: AgentId,
        dimension: usize,
        query: &[f32],
        admitted: &std::collections::HashSet<u64>,
        k: usize,
    ) -> Result<Vec<(f32, i64)>, StoreError> {
        let index = self.caught_up(pool, agent, dimension).await?;
        let index = index.read();
        let k = k.min(admitted.len());
        if k == 0 {
            return Ok(Vec::new());
        }
        if self.options.scans_fully(admitted.len(), dimension) {
            return exact_among(&index, query, admitted, k);
        }
        let matches = index
            .filtered_search(query, k, |key| admitted.contains(&key))
            .map_err(|e| usearch_error("searching a vector index", e))?;
        Ok(ranked(&matches))
    }

    /// The `k` messages of `agent` passing the query's kind and time filters nearest to `query`
    /// (message seqs, best first). Without filters this is [`UsearchIndexes::search`]; with
    /// them, the admitted keys are read from SQLite and the HNSW walk skips the rest.
    pub(crate) async fn search_filtered(
        &self,
        pool: &SqlitePool,
        agent: AgentId,
        dimension: usize,
        query: &[f32],
        filter: &RecallQuery,
        k: usize,
    ) -> Result<Vec<i64>, StoreError> {
        let conversation = memgpt_core::message::MessageKind::CONVERSATION;
        let unfiltered = filter.range.is_unbounded()
            && (filter.kinds.is_empty() || conversation.iter().all(|c| filter.kinds.contains(c)));
        // Window keys ranked, until `k` distinct messages are among them (a message has one or
        // a few windows, so this rarely takes a second round).
        let admitted = if unfiltered {
            None
        } else {
            let mut sql = sqlx::QueryBuilder::<sqlx::Sqlite>::new(
                "SELECT (e.message_seq << 5) | e.window_index FROM message_embeddings e \
                 JOIN messages m ON m.seq = e.message_seq WHERE m.agent_id = ",
            );
            sql.push_bind(*agent.as_uuid())
                .push(" AND e.window_index < 32");
            super::dialect::push_filters(&mut sql, filter);
            let keys: std::collections::HashSet<u64> = sql
                .build_query_scalar::<i64>()
                .fetch_all(pool)
                .await
                .map_err(|e| db("reading the admitted messages", e))?
                .into_iter()
                .map(|key| key as u64)
                .collect();
            Some(keys)
        };
        let mut fetch = k.saturating_mul(2).max(k + TIE_MARGIN);
        loop {
            let (ranked, available) = match &admitted {
                None => {
                    let ranked = self.search(pool, agent, dimension, query, fetch).await?;
                    let size = self.caught_up(pool, agent, dimension).await?.read().size();
                    (ranked, size)
                }
                Some(keys) => (
                    self.search_admitted(pool, agent, dimension, query, keys, fetch)
                        .await?,
                    keys.len(),
                ),
            };
            let messages = distinct_messages(&ranked, k);
            if messages.len() >= k || fetch >= available {
                return Ok(messages);
            }
            fetch = fetch.saturating_mul(4);
        }
    }

    /// How many passages of `agent` the (caught-up) index holds: its embedded passages.
    pub(crate) async fn count(
        &self,
        pool: &SqlitePool,
        agent: AgentId,
        dimension: usize,
    ) -> Result<usize, StoreError> {
        Ok(self.caught_up(pool, agent, dimension).await?.read().size())
    }

    fn save(&self, agent: AgentId, index: &AgentIndex) -> Result<(), StoreError> {
        let (index_path, sidecar_path) = self.paths(agent);
        let mut state = index.state();
        let (watermark, _) = *state;
        // Write both files beside their final names, then rename: a crash leaves the old
        // pair or a newer index with an older sidecar, which the replay (skipping keys it
        // already has) tolerates.
        let tmp_index = index_path.with_extension("usearch.tmp");
        index
            .read()
            .save(&tmp_index.to_string_lossy())
            .map_err(|e| usearch_error("saving a vector index", e))?;
        std::fs::rename(&tmp_index, &index_path).map_err(|e| db("saving a vector index", e))?;
        memgpt_core::failpoint::hit("usearch.save");
        let sidecar = json!({
            "passage_seq": watermark.passage_seq,
            "deletion_seq": watermark.deletion_seq,
            "dimension": index.dimension,
            "quantization": self.options.quantization.name(),
            "keys": key_layout(self.source),
            "numbering": NUMBERING,
        });
        let tmp_sidecar = sidecar_path.with_extension("json.tmp");
        std::fs::write(&tmp_sidecar, sidecar.to_string())
            .map_err(|e| db("saving a vector index", e))?;
        std::fs::rename(&tmp_sidecar, &sidecar_path).map_err(|e| db("saving a vector index", e))?;
        state.1 = 0;
        Ok(())
    }

    /// Saves every loaded index with unsaved changes.
    pub(crate) fn save_all(&self) -> Result<(), StoreError> {
        let loaded: Vec<(AgentId, Arc<AgentIndex>)> =
            self.agents().iter().map(|(a, i)| (*a, i.clone())).collect();
        for (agent, index) in loaded {
            if index.state().1 > 0 {
                self.save(agent, &index)?;
            }
        }
        Ok(())
    }

    /// Drops every agent's index and their files (the store's vectors were cleared).
    pub(crate) fn forget_all(&self) -> Result<(), StoreError> {
        self.agents().clear();
        self.dirty.lock().unwrap_or_else(|p| p.into_inner()).clear();
        let entries = std::fs::read_dir(&self.dir).map_err(|e| db("listing vector indexes", e))?;
        for entry in entries.flatten() {
            let path = entry.path();
            let ours = path
                .extension()
                .is_some_and(|e| e == "usearch" || e == "json" || e == "tmp");
            if ours
                && let Err(e) = std::fs::remove_file(&path)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                return Err(db("removing a vector index", e));
            }
        }
        Ok(())
    }

    /// Drops a deleted agent's index and its files.
    pub(crate) fn forget_agent(&self, agent: AgentId) -> Result<(), StoreError> {
        self.agents().remove(&agent);
        let (index_path, sidecar_path) = self.paths(agent);
        for path in [sidecar_path, index_path] {
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(db("removing a vector index", e)),
            }
        }
        Ok(())
    }
}

/// Adds vectors (skipping keys already present, which a replay after a crash may offer),
/// in parallel for large batches.
fn add_batch(
    index: &AgentIndex,
    batch: Vec<(u64, Vec<f32>)>,
    threads: usize,
) -> Result<(), StoreError> {
    let target = index.write();
    let needed = target.size() + batch.len();
    if needed > target.capacity() {
        target
            .reserve_capacity_and_threads(needed.next_power_of_two(), threads)
            .map_err(|e| usearch_error("growing a vector index", e))?;
    }
    let add = |chunk: &[(u64, Vec<f32>)]| -> Result<(), StoreError> {
        for (key, vector) in chunk {
            if !target.contains(*key) {
                target
                    .add(*key, vector)
                    .map_err(|e| usearch_error("adding to a vector index", e))?;
            }
        }
        Ok(())
    };
    if batch.len() < 2_000 || threads < 2 {
        return add(&batch);
    }
    let chunk = batch.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = batch
            .chunks(chunk)
            .map(|part| scope.spawn(move || add(part)))
            .collect();
        handles.into_iter().try_for_each(|h| {
            h.join()
                .unwrap_or_else(|_| Err(usearch_error("indexing thread", "panicked")))
        })
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn window_keys_fold_into_distinct_messages() {
        use super::{distinct_messages, message_of, window_key};
        assert_eq!(message_of(window_key(77, 0) as i64), 77);
        assert_eq!(message_of(window_key(77, 31) as i64), 77);
        assert_ne!(window_key(77, 31), window_key(78, 0));
        let ranked = [
            (0.9, window_key(5, 2) as i64),
            (0.8, window_key(9, 0) as i64),
            (0.7, window_key(5, 0) as i64),
            (0.6, window_key(3, 1) as i64),
        ];
        assert_eq!(distinct_messages(&ranked, 10), [5, 9, 3]);
        assert_eq!(distinct_messages(&ranked, 2), [5, 9]);
    }

    use super::*;

    #[test]
    fn size_counts_live_vectors_only() {
        let options = IndexOptions {
            dimensions: 4,
            metric: MetricKind::Cos,
            quantization: ScalarKind::F32,
            connectivity: 8,
            expansion_add: 16,
            expansion_search: 16,
            multi: false,
        };
        let index = Index::new(&options).unwrap();
        index.reserve(8).unwrap();
        for key in 1..=3u64 {
            index.add(key, &[key as f32, 1.0, 0.0, 0.5]).unwrap();
        }
        index.remove(2).unwrap();
        assert_eq!(index.size(), 2);
        assert!(!index.contains(2));
    }
}
