//! A tantivy (BM25) full-text index of recall storage, derived from the SQLite message log.
//!
//! The index stores, per message, its sequence number, agent, kind, time and search document
//! (the analysed terms memgpt-core's `DocumentBuilder` wrote into the row; a whitespace
//! tokenizer splits them back apart, so tantivy sees exactly the terms every store sees). It
//! picks text candidates for hybrid recall search and reports the collection statistics of the
//! query terms; memgpt-core scores them. The search is a union of the query's terms, which
//! tantivy runs with block-max WAND (the best `k` without scoring every match); the agent,
//! kind and time filters are checked on fast fields as documents come, so a filter never
//! costs the pruning. An index written with another schema is rebuilt on open. Its commit
//! payload records a watermark: the highest message sequence number indexed, the database's
//! generation (bumped when an agent is deleted) and the analyzer version. Before every search,
//! on open, and after commits once a few thousand rows have piled up, the index catches up with
//! the rows after its watermark (so a step's commit normally costs no index commit); a
//! generation it does not know (a crash between an agent's deletion and the index's) makes it
//! rebuild from the log. So a crash between the SQLite commit and the tantivy commit is repaired
//! on the next open, and the index can be deleted at any time to be rebuilt.

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use memgpt_core::backend::{ANALYZER_VERSION, TermStatistics};
use memgpt_core::ids::AgentId;
use memgpt_core::retrieval::TextCandidates;
use memgpt_core::store::{RecallQuery, StoreError};
use serde_json::json;
use sqlx::{Row, SqlitePool};
use tantivy::columnar::Column;
use tantivy::directory::MmapDirectory;
use tantivy::query::{BooleanQuery, EnableScoring, Occur, Query, TermQuery};
use tantivy::schema::{
    FAST, Field, INDEXED, IndexRecordOption, STRING, Schema, TextFieldIndexing, TextOptions,
};
use tantivy::tokenizer::{TextAnalyzer, WhitespaceTokenizer};
use tantivy::{
    DocId, Index, IndexReader, IndexWriter, ReloadPolicy, Score, SegmentReader, TantivyDocument,
    Term,
};
use tracing::{debug, info};

use super::meta::meta;
use crate::codec::{corrupt, db, micros};
use crate::vector::TopK;

/// Rows indexed per batch while catching up.
const BATCH: i64 = 20_000;
/// The writer's indexing memory budget.
const WRITER_MEMORY: usize = 64 * 1024 * 1024;

#[derive(Clone, Copy, Debug)]
struct Fields {
    seq: Field,
    agent: Field,
    kind: Field,
    time: Field,
    body: Field,
}

/// The tokenizer of the `terms` field: documents are analysed terms joined by spaces.
const TERMS_TOKENIZER: &str = "memgpt_terms";

fn schema() -> (Schema, Fields) {
    let mut builder = Schema::builder();
    let terms = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(TERMS_TOKENIZER)
            .set_index_option(IndexRecordOption::WithFreqs),
    );
    let fields = Fields {
        seq: builder.add_u64_field("seq", FAST | INDEXED),
        agent: builder.add_text_field("agent", STRING | FAST),
        kind: builder.add_text_field("kind", STRING | FAST),
        time: builder.add_i64_field("time", FAST | INDEXED),
        body: builder.add_text_field("terms", terms),
    };
    (builder.build(), fields)
}

/// What the index has seen of the database.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Watermark {
    seq: i64,
    generation: i64,
    /// The analyzer the indexed documents were built with.
    analyzer: String,
}

impl Watermark {
    fn parse(payload: Option<&str>) -> Option<Self> {
        let value: serde_json::Value = serde_json::from_str(payload?).ok()?;
        Some(Self {
            seq: value["seq"].as_i64()?,
            generation: value["generation"].as_i64()?,
            analyzer: value["analyzer"].as_str().unwrap_or_default().to_owned(),
        })
    }

    fn payload(&self) -> String {
        json!({ "seq": self.seq, "generation": self.generation, "analyzer": self.analyzer })
            .to_string()
    }
}

struct Inner {
    writer: Mutex<IndexWriter>,
    reader: IndexReader,
    fields: Fields,
}

/// A tantivy recall index next to an SQLite database (see the module documentation).
pub struct TantivyRecall {
    inner: Arc<Inner>,
    /// Serialises catch-ups; holds the watermark.
    watermark: tokio::sync::Mutex<Watermark>,
}

impl std::fmt::Debug for TantivyRecall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TantivyRecall").finish_non_exhaustive()
    }
}

fn tantivy_error(context: &str, e: tantivy::TantivyError) -> StoreError {
    db(context, e)
}

impl Inner {
    fn writer(&self) -> MutexGuard<'_, IndexWriter> {
        // A panic while indexing leaves at worst uncommitted documents, which the next
        // catch-up's commit or a rebuild settles.
        self.writer.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds documents and commits them with `watermark` as the payload.
    fn index(
        &self,
        docs: Vec<TantivyDocument>,
        watermark: &Watermark,
        clear_first: bool,
    ) -> Result<(), StoreError> {
        let mut writer = self.writer();
        if clear_first {
            writer
                .delete_all_documents()
                .map_err(|e| tantivy_error("clearing the recall index", e))?;
        }
        for doc in docs {
            writer
                .add_document(doc)
                .map_err(|e| tantivy_error("indexing a message", e))?;
        }
        let mut commit = writer
            .prepare_commit()
            .map_err(|e| tantivy_error("committing the recall index", e))?;
        commit.set_payload(&watermark.payload());
        memgpt_core::failpoint::hit("tantivy.catch_up");
        commit
            .commit()
            .map_err(|e| tantivy_error("committing the recall index", e))?;
        drop(writer);
        self.reader
            .reload()
            .map_err(|e| tantivy_error("reloading the recall index", e))
    }
}

impl TantivyRecall {
    /// Opens (or creates, or rebuilds if unreadable) the index in `path` and catches it up with
    /// the database.
    pub(crate) async fn open(path: &Path, pool: &SqlitePool) -> Result<Self, StoreError> {
        let (schema, fields) = schema();
        let index = match Self::open_index(path, &schema) {
            Ok(index) => index,
            Err(e) => {
                info!(error = %e, path = %path.display(), "the recall index is unreadable; rebuilding it");
                std::fs::remove_dir_all(path)
                    .map_err(|e| db("removing a broken recall index", e))?;
                Self::open_index(path, &schema)?
            }
        };
        let writer = index
            .writer_with_num_threads(1, WRITER_MEMORY)
            .map_err(|e| tantivy_error("opening the recall index writer", e))?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(|e| tantivy_error("opening the recall index reader", e))?;
        let watermark = index
            .load_metas()
            .ok()
            .and_then(|metas| Watermark::parse(metas.payload.as_deref()))
            .unwrap_or_default();
        let recall = Self {
            inner: Arc::new(Inner {
                writer: Mutex::new(writer),
                reader,
                fields,
            }),
            watermark: tokio::sync::Mutex::new(watermark),
        };
        recall.catch_up(pool).await?;
        Ok(recall)
    }

    fn open_index(path: &Path, schema: &Schema) -> Result<Index, StoreError> {
        std::fs::create_dir_all(path).map_err(|e| db("creating the recall index directory", e))?;
        let directory =
            MmapDirectory::open(path).map_err(|e| db("opening the recall index directory", e))?;
        let index = Index::open_or_create(directory, schema.clone())
            .map_err(|e| tantivy_error("opening the recall index", e))?;
        if index.schema() != *schema {
            return Err(corrupt("the recall index has another schema"));
        }
        index.tokenizers().register(
            TERMS_TOKENIZER,
            TextAnalyzer::from(WhitespaceTokenizer::default()),
        );
        Ok(index)
    }

    /// Indexes every message committed after the watermark (rebuilding from scratch when the
    /// database's generation changed).
    pub(crate) async fn catch_up(&self, pool: &SqlitePool) -> Result<(), StoreError> {
        let mut watermark = self.watermark.lock().await;
        let generation: i64 = meta(pool, "generation")
            .await?
            .and_then(|g| g.parse().ok())
            .ok_or_else(|| corrupt("the database generation"))?;
        let mut clear = false;
        if generation != watermark.generation || watermark.analyzer != ANALYZER_VERSION {
            info!(
                from = watermark.generation,
                to = generation,
                analyzer = ANALYZER_VERSION,
                "the database generation or the analyzer changed; rebuilding the recall index"
            );
            *watermark = Watermark {
                seq: 0,
                generation,
                analyzer: ANALYZER_VERSION.to_owned(),
            };
            clear = true;
        }
        loop {
            let rows = sqlx::query(
                "SELECT seq, agent_id, kind, document, created_at FROM messages WHERE seq > ? ORDER BY seq LIMIT ?",
            )
            .bind(watermark.seq)
            .bind(BATCH)
            .fetch_all(pool)
            .await
            .map_err(|e| db("reading messages to index", e))?;
            if rows.is_empty() && !clear {
                return Ok(());
            }
            let mut next = watermark.clone();
            let mut docs = Vec::with_capacity(rows.len());
            for row in &rows {
                let (seq, doc) = self.document(row)?;
                next.seq = seq;
                docs.push(doc);
            }
            let inner = self.inner.clone();
            let batch = rows.len();
            let payload = next.clone();
            tokio::task::spawn_blocking(move || inner.index(docs, &payload, clear))
                .await
                .map_err(|e| db("indexing messages", e))??;
            debug!(batch, seq = next.seq, "recall index caught up");
            *watermark = next;
            clear = false;
            if (batch as i64) < BATCH {
                return Ok(());
            }
        }
    }

    fn document(
        &self,
        row: &sqlx::sqlite::SqliteRow,
    ) -> Result<(i64, TantivyDocument), StoreError> {
        let get = |e: sqlx::Error| db("reading messages to index", e);
        let seq: i64 = row.try_get("seq").map_err(get)?;
        let agent: uuid::Uuid = row.try_get("agent_id").map_err(get)?;
        let kind: String = row.try_get("kind").map_err(get)?;
        let document: String = row.try_get("document").map_err(get)?;
        let time: i64 = row.try_get("created_at").map_err(get)?;
        let f = self.inner.fields;
        let mut doc = TantivyDocument::default();
        doc.add_u64(f.seq, seq as u64);
        doc.add_text(f.agent, agent.simple().to_string());
        doc.add_text(f.kind, kind);
        doc.add_i64(f.time, time);
        doc.add_text(f.body, document);
        Ok((seq, doc))
    }

    /// Up to `limit` of the agent's messages passing the query's filters whose documents hold
    /// any of `terms`, best first by tantivy's BM25, and the statistics of `terms` over the
    /// whole index.
    pub(crate) fn candidates(
        &self,
        agent: AgentId,
        terms: &[String],
        query: &RecallQuery,
        limit: usize,
    ) -> Result<TextCandidates, StoreError> {
        let f = self.inner.fields;
        let searcher = self.inner.reader.searcher();
        let reading = |e| tantivy_error("reading the recall index", e);
        let mut total_terms = 0u64;
        for segment in searcher.segment_readers() {
            total_terms += segment
                .inverted_index(f.body)
                .map_err(reading)?
                .total_num_tokens();
        }
        let mut document_frequency = Vec::with_capacity(terms.len());
        let mut words: Vec<(Occur, Box<dyn Query>)> = Vec::with_capacity(terms.len());
        for text in terms {
            let term = Term::from_field_text(f.body, text);
            document_frequency.push(searcher.doc_freq(&term).map_err(reading)?);
            words.push((
                Occur::Should,
                Box::new(TermQuery::new(term, IndexRecordOption::WithFreqs)),
            ));
        }
        let statistics = TermStatistics {
            documents: searcher.num_docs(),
            total_terms,
            document_frequency,
        };
        if words.is_empty() || limit == 0 {
            return Ok(TextCandidates {
                keys: Vec::new(),
                statistics,
            });
        }
        // The words alone make a pure union of term queries, which tantivy searches with
        // block-max WAND (skipping blocks that cannot reach the top `limit`); the filters are
        // checked on fast fields as documents come, so they never turn the search into
        // scoring every match (a filter clause in the query would).
        let words = BooleanQuery::new(words);
        let weight = words
            .weight(EnableScoring::enabled_from_searcher(&searcher))
            .map_err(reading)?;
        let agent = agent.as_uuid().simple().to_string();
        let range = (
            query.range.start.map_or(i64::MIN, micros),
            query.range.end.map_or(i64::MAX, micros),
        );
        // The limit is the caller's candidate pool (bounded), never a page offset: a huge page
        // number cannot make the search allocate for it.
        let mut top = TopK::new(limit.min(memgpt_core::retrieval::MAX_CANDIDATES));
        for segment in searcher.segment_readers() {
            let Some(filter) = SegmentFilter::new(segment, &agent, query, range)? else {
                continue;
            };
            let alive = segment.alive_bitset();
            // The score a document must beat to enter (tantivy skips what cannot).
            let threshold = |top: &TopK<i64>| top.threshold().unwrap_or(Score::MIN);
            weight
                .for_each_pruning(threshold(&top), segment, &mut |doc, score| {
                    if alive.is_none_or(|a| a.is_alive(doc))
                        && let Some(seq) = filter.admits(doc)
                    {
                        top.push(score, seq);
                    }
                    threshold(&top)
                })
                .map_err(|e| tantivy_error("searching the recall index", e))?;
        }
        Ok(TextCandidates {
            keys: top.into_sorted().into_iter().map(|(_, seq)| seq).collect(),
            statistics,
        })
    }

    /// How many live documents of `agent` the index holds.
    pub(crate) fn count(&self, agent: AgentId) -> Result<u64, StoreError> {
        let term = Term::from_field_text(
            self.inner.fields.agent,
            &agent.as_uuid().simple().to_string(),
        );
        let query = TermQuery::new(term, IndexRecordOption::Basic);
        self.inner
            .reader
            .searcher()
            .search(&query, &tantivy::collector::Count)
            .map(|n| n as u64)
            .map_err(|e| tantivy_error("counting an agent's documents", e))
    }

    /// Forgets an agent's messages after the database deleted them at `generation`.
    pub(crate) async fn forget_agent(
        &self,
        agent: AgentId,
        generation: i64,
    ) -> Result<(), StoreError> {
        let mut watermark = self.watermark.lock().await;
        let inner = self.inner.clone();
        let next = Watermark {
            generation,
            ..watermark.clone()
        };
        let agent = agent.as_uuid().simple().to_string();
        let payload = next.clone();
        tokio::task::spawn_blocking(move || {
            inner
                .writer()
                .delete_term(Term::from_field_text(inner.fields.agent, &agent));
            inner.index(Vec::new(), &payload, false)
        })
        .await
        .map_err(|e| db("forgetting an agent", e))??;
        *watermark = next;
        Ok(())
    }
}

/// A search's filters in one segment, read from its fast fields.
struct SegmentFilter {
    seq: Column<u64>,
    agent: Column<u64>,
    agent_ord: u64,
    /// The term ordinals of the admitted kinds (`None`: any kind).
    kind: Option<(Column<u64>, Vec<u64>)>,
    /// The admitted times, `[start, end)` in microseconds (`None`: any time).
    time: Option<(Column<i64>, i64, i64)>,
}

impl SegmentFilter {
    /// The filter of `query` for `agent` in `segment`; `None` when no document of the segment
    /// can pass it.
    fn new(
        segment: &SegmentReader,
        agent: &str,
        query: &RecallQuery,
        (start, end): (i64, i64),
    ) -> Result<Option<Self>, StoreError> {
        let fast = segment.fast_fields();
        let reading = |e: tantivy::TantivyError| tantivy_error("reading the recall index", e);
        let io = |e: std::io::Error| db("reading the recall index", e);
        let str_column = |name: &str| -> Result<_, StoreError> {
            fast.str(name)
                .map_err(reading)?
                .map(|c| c.into_parts())
                .ok_or_else(|| corrupt(format!("the recall index has no {name} column")))
        };
        let (agents, agent_column) = str_column("agent")?;
        let Some(agent_ord) = agents.term_ord(agent).map_err(io)? else {
            return Ok(None);
        };
        let kind = if query.kinds.is_empty() {
            None
        } else {
            let (kinds, column) = str_column("kind")?;
            let mut ords = Vec::with_capacity(query.kinds.len());
            for kind in &query.kinds {
                if let Some(ord) = kinds.term_ord(kind.as_str()).map_err(io)? {
                    ords.push(ord);
                }
            }
            if ords.is_empty() {
                return Ok(None);
            }
            Some((column, ords))
        };
        let time = if (start, end) == (i64::MIN, i64::MAX) {
            None
        } else {
            Some((fast.i64("time").map_err(reading)?, start, end))
        };
        Ok(Some(Self {
            seq: fast.u64("seq").map_err(reading)?,
            agent: agent_column,
            agent_ord,
            kind,
            time,
        }))
    }

    /// The document's message sequence number if it passes the filter.
    fn admits(&self, doc: DocId) -> Option<i64> {
        if self.agent.first(doc) != Some(self.agent_ord) {
            return None;
        }
        if let Some((column, ords)) = &self.kind
            && !column.first(doc).is_some_and(|ord| ords.contains(&ord))
        {
            return None;
        }
        if let Some((column, start, end)) = &self.time
            && !column.first(doc).is_some_and(|t| *start <= t && t < *end)
        {
            return None;
        }
        self.seq.first(doc).map(|seq| seq as i64)
    }
}
