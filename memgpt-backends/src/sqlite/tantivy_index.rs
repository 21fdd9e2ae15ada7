//! What the tantivy text indexes next to SQLite share (recall's, `tantivy_recall`, and
//! archival's, `tantivy_archival`): an index derived from rows of the database, committed with
//! a watermark of what it has seen as its payload, rebuilt when unreadable or of another
//! schema; and the pruned search both run.
//!
//! Documents hold the analysed terms memgpt-core's analyzer wrote (joined by spaces); a
//! whitespace tokenizer splits them back apart, so tantivy sees exactly the terms every store
//! sees. A search is a union of the query's terms, which tantivy runs with block-max WAND (the
//! best `k` without scoring every match); filters are checked on fast fields as documents come,
//! so a filter never costs the pruning.

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use memgpt_core::backend::{ANALYZER_VERSION, TermStatistics};
use memgpt_core::store::StoreError;
use serde_json::json;
use sqlx::SqlitePool;
use tantivy::columnar::Column;
use tantivy::directory::MmapDirectory;
use tantivy::query::{BooleanQuery, EnableScoring, Occur, Query, TermQuery};
use tantivy::schema::{Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions};
use tantivy::tokenizer::{TextAnalyzer, WhitespaceTokenizer};
use tantivy::{
    DocId, IndexReader, IndexWriter, ReloadPolicy, Score, SegmentReader, TantivyDocument, Term,
};
use tracing::info;

use crate::codec::{corrupt, db};
use crate::vector::TopK;

/// Rows indexed per batch while catching up.
pub(super) const BATCH: i64 = 20_000;
/// The writer's indexing memory budget.
const WRITER_MEMORY: usize = 64 * 1024 * 1024;
/// The tokenizer of the terms field: documents are analysed terms joined by spaces.
const TERMS_TOKENIZER: &str = "memgpt_terms";

/// The options of a field of analysed terms.
pub(super) fn terms_options() -> TextOptions {
    TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(TERMS_TOKENIZER)
            .set_index_option(IndexRecordOption::WithFreqs),
    )
}

pub(super) fn tantivy_error(context: &str, e: tantivy::TantivyError) -> StoreError {
    db(context, e)
}

/// What an index has seen of the database.
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

    /// The watermark to start again from when this one was written at another generation
    /// of the database or by another analyzer (the index must then be rebuilt); `None` when it
    /// still holds.
    pub(super) fn restart(&self, generation: i64, what: &str) -> Option<Self> {
        if self.holds(generation) {
            return None;
        }
        info!(
            from = self.generation,
            to = generation,
            analyzer = ANALYZER_VERSION,
            "the database generation or the analyzer changed; rebuilding {what}"
        );
        Some(Self {
            generation,
            analyzer: ANALYZER_VERSION.to_owned(),
            ..Self::default()
        })
    }

    /// Whether this watermark was written at `generation` of the database by this analyzer.
    fn holds(&self, generation: i64) -> bool {
        generation == self.generation && self.analyzer == ANALYZER_VERSION
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

/// A tantivy index in a directory of its own, with its one writer and a reader reloaded after
/// each commit.
pub(super) struct DerivedIndex {
    writer: Mutex<IndexWriter>,
    reader: IndexReader,
    /// Names the index in errors and logs ("the recall index").
    what: &'static str,
}

impl DerivedIndex {
    /// Opens (or creates, or rebuilds if unreadable or of another schema) the index in `path`,
    /// with the watermark its last commit recorded.
    pub(super) fn open(
        path: &Path,
        schema: &Schema,
        what: &'static str,
    ) -> Result<(Self, Watermark), StoreError> {
        let index = match open_index(path, schema, what) {
            Ok(index) => index,
            Err(e) => {
                info!(error = %e, path = %path.display(), "{what} is unreadable; rebuilding it");
                std::fs::remove_dir_all(path).map_err(|e| db("removing a broken text index", e))?;
                open_index(path, schema, what)?
            }
        };
        let writer = index
            .writer_with_num_threads(1, WRITER_MEMORY)
            .map_err(|e| tantivy_error("opening a text index writer", e))?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(|e| tantivy_error("opening a text index reader", e))?;
        let watermark = index
            .load_metas()
            .ok()
            .and_then(|metas| Watermark::parse(metas.payload.as_deref()))
            .unwrap_or_default();
        let index = Self {
            writer: Mutex::new(writer),
            reader,
            what,
        };
        Ok((index, watermark))
    }

    fn writer(&self) -> MutexGuard<'_, IndexWriter> {
        // A panic while indexing leaves at worst uncommitted documents, which the next
        // catch-up's commit or a rebuild settles.
        self.writer.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds `docs`, deletes the documents holding one of `deletes` and commits with
    /// `watermark` as the payload (deleting everything first, with `clear_first`). Blocking.
    pub(super) fn commit(
        &self,
        docs: Vec<TantivyDocument>,
        deletes: Vec<Term>,
        watermark: &Watermark,
        clear_first: bool,
    ) -> Result<(), StoreError> {
        let what = self.what;
        let mut writer = self.writer();
        if clear_first {
            writer
                .delete_all_documents()
                .map_err(|e| tantivy_error(what, e))?;
        }
        for doc in docs {
            writer
                .add_document(doc)
                .map_err(|e| tantivy_error(what, e))?;
        }
        // After the additions: a row read to be indexed and deleted before the deletions were
        // read goes too.
        for term in deletes {
            writer.delete_term(term);
        }
        let mut commit = writer
            .prepare_commit()
            .map_err(|e| tantivy_error(what, e))?;
        commit.set_payload(&watermark.payload());
        memgpt_core::failpoint::hit("tantivy.catch_up");
        commit.commit().map_err(|e| tantivy_error(what, e))?;
        drop(writer);
        self.reader.reload().map_err(|e| tantivy_error(what, e))
    }

    /// [`DerivedIndex::commit`] on a blocking thread (tantivy's writes and syncs block);
    /// `what` names the work in errors.
    pub(super) async fn commit_in_background(
        self: &Arc<Self>,
        docs: Vec<TantivyDocument>,
        deletes: Vec<Term>,
        watermark: &Watermark,
        clear_first: bool,
        what: &'static str,
    ) -> Result<(), StoreError> {
        let index = self.clone();
        let watermark = watermark.clone();
        tokio::task::spawn_blocking(move || index.commit(docs, deletes, &watermark, clear_first))
            .await
            .map_err(|e| db(what, e))?
    }

    /// A searcher over the last commit.
    pub(super) fn searcher(&self) -> tantivy::Searcher {
        self.reader.searcher()
    }
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

/// A fast string column of a segment and the ordinals of the admitted values in it.
pub(super) type AdmittedOrds = (Column<u64>, Vec<u64>);

/// The fast string column `name` of a segment and the ordinals in it of those of `values` the
/// segment holds (`None` when it holds none of them: no document of it can match).
pub(super) fn term_ords<'v>(
    segment: &SegmentReader,
    name: &str,
    values: impl IntoIterator<Item = &'v str>,
) -> Result<Option<AdmittedOrds>, StoreError> {
    let reading = |e: tantivy::TantivyError| tantivy_error("reading a text index", e);
    let io = |e: std::io::Error| db("reading a text index", e);
    let (terms, column) = segment
        .fast_fields()
        .str(name)
        .map_err(reading)?
        .map(|c| c.into_parts())
        .ok_or_else(|| corrupt(format!("a text index has no {name} column")))?;
    let mut ords = Vec::new();
    for value in values {
        if let Some(ord) = terms.term_ord(value).map_err(io)? {
            ords.push(ord);
        }
    }
    Ok((!ords.is_empty()).then_some((column, ords)))
}

/// What a catch-up compares with its [`Watermark`] before it reads anything else, read in one
/// round trip: whether the index is already up to date is then known without a query per table
/// (a search catches up first, so this is on every search's path).
#[derive(Debug, Clone, Copy)]
pub(super) struct Newest {
    /// The database's generation.
    pub(super) generation: i64,
    /// The highest sequence number of the indexed rows (0 when there are none).
    pub(super) seq: i64,
    /// The highest sequence number of their deletions (0 when none, or not replayed).
    pub(super) deletion: i64,
}

impl Newest {
    /// Reads them with `query`: [`Newest::MESSAGES`] or [`Newest::PASSAGES`].
    pub(super) async fn read(pool: &SqlitePool, query: &'static str) -> Result<Self, StoreError> {
        let (generation, seq, deletion): (Option<String>, Option<i64>, Option<i64>) =
            sqlx::query_as(query)
                .fetch_one(pool)
                .await
                .map_err(|e| db("reading what the index has to catch up with", e))?;
        Ok(Self {
            generation: generation
                .and_then(|g| g.parse().ok())
                .ok_or_else(|| corrupt("the database generation"))?,
            seq: seq.unwrap_or(0),
            deletion: deletion.unwrap_or(0),
        })
    }

    /// The recall index's rows: messages (never deleted one by one).
    pub(super) const MESSAGES: &'static str = "SELECT (SELECT value FROM memgpt_meta WHERE key = 'generation'), \
         (SELECT max(seq) FROM messages), 0";

    /// The archival index's rows: passages and their deletions.
    pub(super) const PASSAGES: &'static str = "SELECT (SELECT value FROM memgpt_meta WHERE key = 'generation'), \
         (SELECT max(seq) FROM passages), (SELECT max(seq) FROM passage_deletions)";

    /// Whether an index at `watermark` holds everything these say there is.
    pub(super) fn indexed_by(&self, watermark: &Watermark) -> bool {
        watermark.holds(self.generation)
            && self.seq <= watermark.seq
            && self.deletion <= watermark.deletion
    }
}

/// The statistics of `terms` in `field` over the whole index.
pub(super) fn statistics(
    searcher: &tantivy::Searcher,
    field: Field,
    terms: &[String],
) -> Result<TermStatistics, StoreError> {
    let reading = |e| tantivy_error("reading a text index", e);
    let mut total_terms = 0u64;
    for segment in searcher.segment_readers() {
        total_terms += segment
            .inverted_index(field)
            .map_err(reading)?
            .total_num_tokens();
    }
    let mut document_frequency = Vec::with_capacity(terms.len());
    for text in terms {
        document_frequency.push(
            searcher
                .doc_freq(&Term::from_field_text(field, text))
                .map_err(reading)?,
        );
    }
    Ok(TermStatistics {
        documents: searcher.num_docs(),
        total_terms,
        document_frequency,
    })
}

/// The best `limit` documents holding any of `terms` in `field` that the segments' filters
/// admit, by tantivy's BM25, as the keys the filters give them, best first.
///
/// The words alone make a pure union of term queries, which tantivy searches with block-max
/// WAND (skipping blocks that cannot reach the top `limit`); `filter` builds each segment's
/// check (`None`: nothing in the segment can pass), run on fast fields as documents come, so
/// it never turns the search into scoring every match (a filter clause in the query would).
pub(super) fn pruned_top<F>(
    searcher: &tantivy::Searcher,
    field: Field,
    terms: &[String],
    limit: usize,
    mut filter: impl FnMut(&SegmentReader) -> Result<Option<F>, StoreError>,
) -> Result<Vec<i64>, StoreError>
where
    F: Fn(DocId) -> Option<i64>,
{
    if terms.is_empty() || limit == 0 {
        return Ok(Vec::new());
    }
    let reading = |e| tantivy_error("searching a text index", e);
    let words: Vec<(Occur, Box<dyn Query>)> = terms
        .iter()
        .map(|text| {
            let term = Term::from_field_text(field, text);
            let query: Box<dyn Query> =
                Box::new(TermQuery::new(term, IndexRecordOption::WithFreqs));
            (Occur::Should, query)
        })
        .collect();
    let weight = BooleanQuery::new(words)
        .weight(EnableScoring::enabled_from_searcher(searcher))
        .map_err(reading)?;
    // The limit is the caller's candidate pool (bounded), never a page offset: a huge page
    // number cannot make the search allocate for it.
    let mut top = TopK::new(limit.min(memgpt_core::retrieval::MAX_CANDIDATES));
    for segment in searcher.segment_readers() {
        let Some(admits) = filter(segment)? else {
            continue;
        };
        let alive = segment.alive_bitset();
        // The score a document must beat to enter (tantivy skips what cannot).
        let threshold = |top: &TopK<i64>| top.threshold().unwrap_or(Score::MIN);
        weight
            .for_each_pruning(threshold(&top), segment, &mut |doc, score| {
                if alive.is_none_or(|a| a.is_alive(doc))
                    && let Some(key) = admits(doc)
                {
                    top.push(score, key);
                }
                threshold(&top)
            })
            .map_err(reading)?;
    }
    Ok(top.into_sorted().into_iter().map(|(_, key)| key).collect())
}

/// How many live documents holding any of `terms` in `field` the segments' filters admit
/// (all of them are visited: no pruning).
pub(super) fn count_matches<F>(
    searcher: &tantivy::Searcher,
    field: Field,
    terms: &[String],
    mut filter: impl FnMut(&SegmentReader) -> Result<Option<F>, StoreError>,
) -> Result<u64, StoreError>
where
    F: Fn(DocId) -> Option<i64>,
{
    if terms.is_empty() {
        return Ok(0);
    }
    let reading = |e| tantivy_error("searching a text index", e);
    let words: Vec<(Occur, Box<dyn Query>)> = terms
        .iter()
        .map(|text| {
            let term = Term::from_field_text(field, text);
            let query: Box<dyn Query> = Box::new(TermQuery::new(term, IndexRecordOption::Basic));
            (Occur::Should, query)
        })
        .collect();
    let weight = BooleanQuery::new(words)
        .weight(EnableScoring::disabled_from_searcher(searcher))
        .map_err(reading)?;
    let mut count = 0u64;
    for segment in searcher.segment_readers() {
        let Some(admits) = filter(segment)? else {
            continue;
        };
        let alive = segment.alive_bitset();
        weight
            .for_each_no_score(segment, &mut |docs| {
                for &doc in docs {
                    if alive.is_none_or(|a| a.is_alive(doc)) && admits(doc).is_some() {
                        count += 1;
                    }
                }
            })
            .map_err(reading)?;
    }
    Ok(count)
}
