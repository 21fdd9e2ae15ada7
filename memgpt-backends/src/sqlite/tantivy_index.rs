//! A tantivy index derived from rows of the SQLite database: one generic [`DerivedIndex`] for
//! both text indexes, over what each one indexes ([`IndexedRows`]: recall's messages in
//! `tantivy_recall`, archival's passages and their deletions in `tantivy_archival`). The
//! searches they run are in `tantivy_search`.
//!
//! **Invariant: the index is a function of the committed rows.** Whatever happened before
//! (searches, deletions, restarts, a catch-up whose future was dropped at any await point), a
//! caught-up index holds exactly one document per row, and nothing else. What keeps it so:
//!
//! * The [`Watermark`] (the highest row and deletion sequence numbers applied, the database's
//!   generation, the analyzer) is the payload of the index's own commit. The copy in memory
//!   moves only with that commit, under the writer's lock, and is read back from disk when a
//!   commit fails; a catch-up never moves it before or after on its own. A future dropped
//!   while its batch is being written leaves the batch applied with its watermark, or neither.
//! * A batch names the watermark it was read after, and is refused (nothing written) when the
//!   index moved since: two catch-ups never both apply a batch. Documents added but not
//!   committed (a failed or panicked commit) are rolled back before the writer is used again.
//! * Sequence numbers are never given twice (the tables are `AUTOINCREMENT`, migration 12), so
//!   a row past the watermark is a row the index has not seen. A watermark past what the
//!   database ever gave (a database restored from an older copy), or of another generation or
//!   analyzer, makes the index rebuild.
//! * Deleting an agent bumps the database's generation. The index forgets the agent's
//!   documents and moves to the new generation in one commit, and only from the generation just
//!   before it; an index that missed a deletion rebuilds on its next catch-up.
//!
//! Catch-ups run before every search, on open, and after commits once rows pile up.

use std::future::Future;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use memgpt_core::backend::ANALYZER_VERSION;
use memgpt_core::ids::AgentId;
use memgpt_core::store::StoreError;
use serde_json::json;
use sqlx::SqlitePool;
use tantivy::directory::MmapDirectory;
use tantivy::schema::Schema;
use tantivy::tokenizer::{TextAnalyzer, WhitespaceTokenizer};
use tantivy::{IndexReader, IndexWriter, ReloadPolicy, Searcher, TantivyDocument, Term};
use tracing::{debug, info, warn};

use super::tantivy_search::{TERMS_TOKENIZER, tantivy_error};
use crate::codec::{corrupt, db};

/// Rows indexed per batch while catching up.
pub(super) const BATCH: i64 = 20_000;
/// The writer's indexing memory budget.
const WRITER_MEMORY: usize = 64 * 1024 * 1024;
/// How long opening waits for another writer of the directory to let go, and how often it
/// looks.
const LOCK_WAIT: Duration = Duration::from_secs(5);
const LOCK_POLL: Duration = Duration::from_millis(20);

/// What an index has applied of the database: the payload of its last commit.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Watermark {
    /// The highest row sequence number indexed.
    pub(super) seq: i64,
    /// The highest deletion replayed (indexes of rows that are deleted one by one).
    pub(super) deletion: i64,
    /// The database's generation (bumped when an agent is deleted).
    pub(super) generation: i64,
    /// The analyzer the indexed documents were built with.
    pub(super) analyzer: String,
}

impl Watermark {
    fn parse(payload: Option<&str>) -> Option<Self> {
        let value: serde_json::Value = serde_json::from_str(payload?).ok()?;
        Some(Self {
            seq: value["seq"].as_i64()?,
            deletion: value["deletion"].as_i64().unwrap_or(0),
            generation: value["generation"].as_i64()?,
            analyzer: value["analyzer"].as_str().unwrap_or_default().to_owned(),
        })
    }

    fn payload(&self) -> String {
        json!({
            "seq": self.seq,
            "deletion": self.deletion,
            "generation": self.generation,
            "analyzer": self.analyzer,
        })
        .to_string()
    }
}

/// What a catch-up compares with the index's [`Watermark`] before it reads anything else, read
/// in one round trip (a search catches up first, so this is on every search's path).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Newest {
    /// The database's generation.
    pub(super) generation: i64,
    /// The highest sequence number of the indexed rows (0 when there are none).
    pub(super) seq: i64,
    /// The highest sequence number of their deletions (0 when none, or not replayed).
    pub(super) deletion: i64,
    /// The highest row sequence number the database ever gave (rows since deleted included).
    pub(super) seq_given: i64,
    /// The highest deletion sequence number the database ever gave.
    pub(super) deletion_given: i64,
}

impl Newest {
    /// Reads them with `query` (an [`IndexedRows::NEWEST`]).
    async fn read(pool: &SqlitePool, query: &'static str) -> Result<Self, StoreError> {
        type Row = (
            Option<String>,
            Option<i64>,
            Option<i64>,
            Option<i64>,
            Option<i64>,
        );
        let (generation, seq, deletion, seq_given, deletion_given): Row = sqlx::query_as(query)
            .fetch_one(pool)
            .await
            .map_err(|e| db("reading what the index has to catch up with", e))?;
        Ok(Self {
            generation: generation
                .and_then(|g| g.parse().ok())
                .ok_or_else(|| corrupt("the database generation"))?,
            seq: seq.unwrap_or(0),
            deletion: deletion.unwrap_or(0),
            seq_given: seq_given.unwrap_or(0),
            deletion_given: deletion_given.unwrap_or(0),
        })
    }

    /// Whether an index at `watermark` holds everything these say there is.
    fn indexed_by(&self, watermark: &Watermark) -> bool {
        self.seq <= watermark.seq && self.deletion <= watermark.deletion
    }

    /// The watermark to rebuild from when an index at `watermark` cannot go on from it: it was
    /// written at another generation of the database or by another analyzer, or it is past
    /// what this database ever gave. `None` when it can.
    fn restart(&self, watermark: &Watermark, what: &str) -> Option<Watermark> {
        let holds = watermark.generation == self.generation
            && watermark.analyzer == ANALYZER_VERSION
            && watermark.seq <= self.seq_given
            && watermark.deletion <= self.deletion_given;
        if holds {
            return None;
        }
        info!(
            from = watermark.generation,
            to = self.generation,
            analyzer = ANALYZER_VERSION,
            seq = watermark.seq,
            seq_given = self.seq_given,
            "{what} was built from another state of the database; rebuilding it"
        );
        Some(Watermark {
            // Deletions so far are in the rows already (the deleted rows are gone).
            deletion: self.deletion,
            generation: self.generation,
            analyzer: ANALYZER_VERSION.to_owned(),
            seq: 0,
        })
    }
}

/// One batch of a catch-up: the documents to add and the terms whose documents to delete,
/// read after some watermark, and the watermark they bring the index to.
pub(super) struct RowBatch {
    /// Documents of the rows read.
    pub(super) docs: Vec<TantivyDocument>,
    /// Terms of the documents deleted (applied after the additions: a row read to be indexed
    /// and deleted before the deletions were read goes too).
    pub(super) deletes: Vec<Term>,
    /// The watermark after this batch.
    pub(super) next: Watermark,
    /// Whether a read hit [`BATCH`] rows, so more may follow.
    pub(super) full: bool,
}

/// The rows a [`DerivedIndex`] is built from, and how each becomes a document.
pub(super) trait IndexedRows: Send + Sync + 'static {
    /// Names the index in errors and logs ("the recall index").
    const WHAT: &'static str;
    /// The query reading [`Newest`] for these rows: generation, newest row, newest deletion,
    /// highest row sequence given, highest deletion sequence given.
    const NEWEST: &'static str;

    /// The index's schema.
    fn schema(&self) -> Schema;

    /// Up to [`BATCH`] rows after `from.seq` and deletions after `from.deletion`, oldest first.
    fn read_after(
        &self,
        pool: &SqlitePool,
        from: &Watermark,
    ) -> impl Future<Output = Result<RowBatch, StoreError>> + Send;

    /// The term every document of `agent` holds.
    fn agent_term(&self, agent: AgentId) -> Term;
}

/// The writer and what its last commit recorded.
struct Writer {
    writer: IndexWriter,
    /// The watermark of the last commit: moved only by a commit, under this lock.
    committed: Watermark,
}

/// A tantivy index in a directory of its own, with its one writer and a reader reloaded after
/// each commit.
struct TextIndex {
    index: tantivy::Index,
    writer: Mutex<Writer>,
    reader: IndexReader,
    /// Set when a commit's reader reload failed: the next search reloads first.
    reload_pending: AtomicBool,
    /// Names the index in errors and logs.
    what: &'static str,
}

impl TextIndex {
    /// Opens (or creates, or rebuilds if unreadable or of another schema) the index in `path`;
    /// the inner error (tantivy's `LockBusy`) while another writer holds it.
    fn open(
        path: &Path,
        schema: &Schema,
        what: &'static str,
    ) -> Result<Result<Self, tantivy::TantivyError>, StoreError> {
        let index = match open_index(path, schema, what) {
            Ok(index) => index,
            Err(e) => {
                info!(error = %e, path = %path.display(), "{what} is unreadable; rebuilding it");
                std::fs::remove_dir_all(path).map_err(|e| db("removing a broken text index", e))?;
                open_index(path, schema, what)?
            }
        };
        let writer = match index.writer_with_num_threads(1, WRITER_MEMORY) {
            Ok(writer) => writer,
            Err(
                busy @ tantivy::TantivyError::LockFailure(
                    tantivy::directory::error::LockError::LockBusy,
                    _,
                ),
            ) => return Ok(Err(busy)),
            Err(e) => return Err(tantivy_error("opening a text index writer", e)),
        };
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(|e| tantivy_error("opening a text index reader", e))?;
        let committed = committed_on_disk(&index);
        Ok(Ok(Self {
            index,
            writer: Mutex::new(Writer { writer, committed }),
            reader,
            reload_pending: AtomicBool::new(false),
            what,
        }))
    }

    /// The writer, after rolling back whatever a panic left uncommitted in it (committing
    /// those documents later would index them a second time).
    fn lock(&self) -> MutexGuard<'_, Writer> {
        match self.writer.lock() {
            Ok(guard) => guard,
            Err(poisoned) => {
                let mut guard = poisoned.into_inner();
                self.writer.clear_poison();
                self.settle(&mut guard);
                guard
            }
        }
    }

    /// Drops uncommitted changes and reads the watermark back from the last commit on disk
    /// (after a failure, it is the only one known to hold).
    fn settle(&self, writer: &mut Writer) {
        if let Err(e) = writer.writer.rollback() {
            warn!(error = %e, "{}: could not roll back an unfinished commit", self.what);
        }
        writer.committed = committed_on_disk(&self.index);
    }

    /// The watermark of the last commit.
    fn watermark(&self) -> Watermark {
        self.lock().committed.clone()
    }

    /// Applies `batch` (deleting every document first, with `clear_first`) and commits it
    /// with its watermark, if the index is still at `base`: `Ok(true)`. `Ok(false)` when the
    /// index moved on since `base` was read (nothing is written). The reader is reloaded before
    /// the new watermark shows (both under the writer's lock). Blocking.
    fn apply(
        &self,
        base: &Watermark,
        batch: RowBatch,
        clear_first: bool,
    ) -> Result<bool, StoreError> {
        let mut guard = self.lock();
        if guard.committed != *base {
            return Ok(false);
        }
        let next = batch.next.clone();
        match write(&mut guard.writer, batch, &next, clear_first, self.what) {
            Ok(()) => {
                // The reader first, then the watermark: a catch-up that sees the watermark
                // (and so skips its own work) must find the documents in the next searcher.
                self.reload();
                guard.committed = next;
                Ok(true)
            }
            Err(e) => {
                self.settle(&mut guard);
                Err(e)
            }
        }
    }

    fn reload(&self) {
        match self.reader.reload() {
            Ok(()) => self.reload_pending.store(false, Ordering::Release),
            Err(e) => {
                warn!(error = %e, "{}: could not reload the reader; the next search will", self.what);
                self.reload_pending.store(true, Ordering::Release);
            }
        }
    }

    /// A searcher over the last commit.
    fn searcher(&self) -> Result<Searcher, StoreError> {
        if self.reload_pending.swap(false, Ordering::AcqRel)
            && let Err(e) = self.reader.reload()
        {
            self.reload_pending.store(true, Ordering::Release);
            return Err(tantivy_error(self.what, e));
        }
        Ok(self.reader.searcher())
    }
}

/// Writes one batch and commits it with `next` as the payload.
fn write(
    writer: &mut IndexWriter,
    batch: RowBatch,
    next: &Watermark,
    clear_first: bool,
    what: &'static str,
) -> Result<(), StoreError> {
    if clear_first {
        writer
            .delete_all_documents()
            .map_err(|e| tantivy_error(what, e))?;
    }
    for doc in batch.docs {
        writer
            .add_document(doc)
            .map_err(|e| tantivy_error(what, e))?;
    }
    for term in batch.deletes {
        writer.delete_term(term);
    }
    let mut commit = writer
        .prepare_commit()
        .map_err(|e| tantivy_error(what, e))?;
    commit.set_payload(&next.payload());
    memgpt_core::failpoint::hit("tantivy.catch_up");
    commit.commit().map_err(|e| tantivy_error(what, e))?;
    Ok(())
}

/// The watermark the index's last commit on disk recorded (the default, which rebuilds, when
/// there is none or it is unreadable).
fn committed_on_disk(index: &tantivy::Index) -> Watermark {
    index
        .load_metas()
        .ok()
        .and_then(|metas| Watermark::parse(metas.payload.as_deref()))
        .unwrap_or_default()
}

fn open_index(
    path: &Path,
    schema: &Schema,
    what: &'static str,
) -> Result<tantivy::Index, StoreError> {
    std::fs::create_dir_all(path).map_err(|e| db("creating a text index directory", e))?;
    let directory =
        MmapDirectory::open(path).map_err(|e| db("opening a text index directory", e))?;
    let index = tantivy::Index::open_or_create(directory, schema.clone())
        .map_err(|e| tantivy_error(what, e))?;
    if index.schema() != *schema {
        return Err(corrupt(format!("{what} has another schema")));
    }
    index.tokenizers().register(
        TERMS_TOKENIZER,
        TextAnalyzer::from(WhitespaceTokenizer::default()),
    );
    Ok(index)
}

/// A text index derived from the rows `R` describes (see the module documentation).
pub(super) struct DerivedIndex<R> {
    index: Arc<TextIndex>,
    rows: R,
    /// Lets one catch-up at a time read the database (another would read the same rows only
    /// to have its batch refused). Safety does not rest on it: a dropped catch-up releases it
    /// while its batch may still be being written.
    serial: tokio::sync::Mutex<()>,
}

impl<R> std::fmt::Debug for DerivedIndex<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DerivedIndex")
            .field("what", &self.index.what)
            .finish_non_exhaustive()
    }
}

impl<R: IndexedRows> DerivedIndex<R> {
    /// Opens (or creates, or rebuilds if unreadable) the index of `rows` in `path` and
    /// catches it up with the database.
    pub(super) async fn open(path: &Path, rows: R, pool: &SqlitePool) -> Result<Self, StoreError> {
        // A writer of this directory that is going away (a store dropped a moment ago, whose
        // last index commit is still running) lets go within moments: wait for it, a while.
        let mut waited = Duration::ZERO;
        let index = loop {
            let busy = match TextIndex::open(path, &rows.schema(), R::WHAT)? {
                Ok(index) => break index,
                Err(busy) => busy,
            };
            if waited >= LOCK_WAIT {
                return Err(StoreError::transient(
                    format!(
                        "{} in {} is held by another writer (one process at a time may open a \
                         data directory with a tantivy index)",
                        R::WHAT,
                        path.display()
                    ),
                    busy,
                ));
            }
            tokio::time::sleep(LOCK_POLL).await;
            waited += LOCK_POLL;
        };
        let derived = Self {
            index: Arc::new(index),
            rows,
            serial: tokio::sync::Mutex::new(()),
        };
        derived.catch_up(pool).await?;
        Ok(derived)
    }

    /// What the index is built from.
    pub(super) fn rows(&self) -> &R {
        &self.rows
    }

    /// A searcher over the last commit.
    pub(super) fn searcher(&self) -> Result<Searcher, StoreError> {
        self.index.searcher()
    }

    /// How many live documents of `agent` the index holds.
    pub(super) fn count_documents(&self, agent: AgentId) -> Result<u64, StoreError> {
        let query = tantivy::query::TermQuery::new(
            self.rows.agent_term(agent),
            tantivy::schema::IndexRecordOption::Basic,
        );
        self.searcher()?
            .search(&query, &tantivy::collector::Count)
            .map(|n| n as u64)
            .map_err(|e| tantivy_error("counting an agent's documents", e))
    }

    /// Applies every row committed after the watermark and the deletions after it (rebuilding
    /// from scratch when the watermark does not hold for this database). Safe to cancel at
    /// any await point.
    pub(super) async fn catch_up(&self, pool: &SqlitePool) -> Result<(), StoreError> {
        let _serial = self.serial.lock().await;
        loop {
            let base = self.index.watermark();
            let newest = Newest::read(pool, R::NEWEST).await?;
            let (from, clear_first) = match newest.restart(&base, R::WHAT) {
                Some(from) => (from, true),
                None if newest.indexed_by(&base) => return Ok(()),
                None => (base.clone(), false),
            };
            let batch = self.rows.read_after(pool, &from).await?;
            let (full, rows, deletes) = (batch.full, batch.docs.len(), batch.deletes.len());
            let seq = batch.next.seq;
            if self.apply(base, batch, clear_first).await? {
                debug!(rows, deletes, seq, "{} caught up", R::WHAT);
                if !full {
                    return Ok(());
                }
            }
            // More rows to read, or another catch-up moved the index first: look again.
        }
    }

    /// Forgets an agent's documents after the database deleted its rows and moved from
    /// generation `from` to `to`. An index not at `from` missed an earlier change: it is left
    /// as it is, and its next catch-up rebuilds it.
    pub(super) async fn forget_agent(
        &self,
        agent: AgentId,
        from: i64,
        to: i64,
    ) -> Result<(), StoreError> {
        let _serial = self.serial.lock().await;
        let base = self.index.watermark();
        if base.generation != from || base.analyzer != ANALYZER_VERSION {
            info!(
                index = base.generation,
                from,
                "{} missed a change of the database; it rebuilds",
                R::WHAT
            );
            return Ok(());
        }
        let batch = RowBatch {
            docs: Vec::new(),
            deletes: vec![self.rows.agent_term(agent)],
            next: Watermark {
                generation: to,
                ..base.clone()
            },
            full: false,
        };
        self.apply(base, batch, false).await.map(|_| ())
    }

    /// [`TextIndex::apply`] on a blocking thread (tantivy's writes and syncs block). The
    /// blocking work runs to its end even if this future is dropped, and moves the watermark
    /// with its commit.
    async fn apply(
        &self,
        base: Watermark,
        batch: RowBatch,
        clear_first: bool,
    ) -> Result<bool, StoreError> {
        let index = self.index.clone();
        tokio::task::spawn_blocking(move || index.apply(&base, batch, clear_first))
            .await
            .map_err(|e| db(R::WHAT, e))?
    }
}
