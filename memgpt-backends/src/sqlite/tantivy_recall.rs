//! A tantivy (BM25) full-text index of recall storage, derived from the SQLite message log.
//!
//! The index stores, per message, its sequence number, agent, kind, time and search document
//! (the analysed terms memgpt-core's `DocumentBuilder` wrote into the row; a whitespace
//! tokenizer splits them back apart, so tantivy sees exactly the terms every store sees). It
//! picks text candidates for hybrid recall search and reports the collection statistics of the
//! query terms; memgpt-core scores them. The search is a union of the query's terms, which
//! tantivy runs with block-max WAND (the best `k` without scoring every match); the agent,
//! kind and time filters are checked on fast fields as documents come, so a filter never
//! costs the pruning. It is a [`DerivedIndex`] of the messages (`tantivy_index`: the watermark,
//! catch-up, rebuilds and why the index is always a function of the committed rows), which
//! catches up before every search, on open, and after commits once a few thousand rows have
//! piled up (so a step's commit normally costs no index commit). A crash between the SQLite
//! commit and the tantivy commit is repaired on the next catch-up, and the index can be deleted
//! at any time to be rebuilt.

use std::path::Path;

use memgpt_core::backend::TermStatistics;
use memgpt_core::ids::AgentId;
use memgpt_core::retrieval::TextCandidates;
use memgpt_core::store::{RecallQuery, StoreError};
use sqlx::{Row, SqlitePool};
use tantivy::columnar::Column;
use tantivy::schema::{FAST, Field, INDEXED, STRING, Schema};
use tantivy::{DocId, SegmentReader, TantivyDocument, Term};

use super::tantivy_index::{BATCH, DerivedIndex, IndexedRows, RowBatch, Watermark};
use super::tantivy_search::{
    live_document_frequencies, pruned_top, tantivy_error, term_ords, terms_options,
};
use crate::codec::{db, micros};

#[derive(Clone, Copy, Debug)]
struct Fields {
    seq: Field,
    agent: Field,
    kind: Field,
    time: Field,
    body: Field,
}

/// The messages, as the recall index sees them.
pub(super) struct MessageRows {
    schema: Schema,
    fields: Fields,
}

impl MessageRows {
    fn new() -> Self {
        let mut builder = Schema::builder();
        let fields = Fields {
            seq: builder.add_u64_field("seq", FAST | INDEXED),
            agent: builder.add_text_field("agent", STRING | FAST),
            kind: builder.add_text_field("kind", STRING | FAST),
            time: builder.add_i64_field("time", FAST | INDEXED),
            body: builder.add_text_field("terms", terms_options()),
        };
        Self {
            schema: builder.build(),
            fields,
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
        let f = self.fields;
        let mut doc = TantivyDocument::default();
        doc.add_u64(f.seq, seq as u64);
        doc.add_text(f.agent, agent.simple().to_string());
        doc.add_text(f.kind, kind);
        doc.add_i64(f.time, time);
        doc.add_text(f.body, document);
        Ok((seq, doc))
    }
}

impl IndexedRows for MessageRows {
    const WHAT: &'static str = "the recall index";
    // Messages are never deleted one by one (only with their agent).
    const NEWEST: &'static str = "SELECT (SELECT value FROM memgpt_meta WHERE key = 'generation'), \
         (SELECT max(seq) FROM messages), 0, \
         (SELECT seq FROM sqlite_sequence WHERE name = 'messages'), 0";

    fn schema(&self) -> Schema {
        self.schema.clone()
    }

    async fn read_after(
        &self,
        pool: &SqlitePool,
        from: &Watermark,
    ) -> Result<RowBatch, StoreError> {
        let rows = sqlx::query(
            "SELECT seq, agent_id, kind, document, created_at FROM messages WHERE seq > ? ORDER BY seq LIMIT ?",
        )
        .bind(from.seq)
        .bind(BATCH)
        .fetch_all(pool)
        .await
        .map_err(|e| db("reading messages to index", e))?;
        let mut next = from.clone();
        let mut docs = Vec::with_capacity(rows.len());
        for row in &rows {
            let (seq, doc) = self.document(row)?;
            next.seq = seq;
            docs.push(doc);
        }
        Ok(RowBatch {
            full: rows.len() as i64 >= BATCH,
            docs,
            deletes: Vec::new(),
            next,
        })
    }

    fn agent_term(&self, agent: AgentId) -> Term {
        Term::from_field_text(self.fields.agent, &agent.as_uuid().simple().to_string())
    }
}

/// A tantivy recall index next to an SQLite database (see the module documentation).
pub struct TantivyRecall {
    /// The index: catch-up, forgetting an agent and counting are the derived index's own.
    pub(super) index: DerivedIndex<MessageRows>,
}

impl std::fmt::Debug for TantivyRecall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TantivyRecall").finish_non_exhaustive()
    }
}

impl TantivyRecall {
    /// Opens (or creates, or rebuilds if unreadable) the index in `path` and catches it up with
    /// the database.
    pub(crate) async fn open(path: &Path, pool: &SqlitePool) -> Result<Self, StoreError> {
        Ok(Self {
            index: DerivedIndex::open(path, MessageRows::new(), pool).await?,
        })
    }

    /// Up to `limit` of the agent's messages passing the query's filters whose documents hold
    /// any of `terms`, best first by tantivy's BM25, and the statistics of `terms`: the
    /// database's counts of documents and terms (`totals`) with the index's live document
    /// frequencies, so that they depend on the rows alone, not on when segments merge.
    pub(crate) fn candidates(
        &self,
        agent: AgentId,
        terms: &[String],
        query: &RecallQuery,
        limit: usize,
        (documents, total_terms): (u64, u64),
    ) -> Result<TextCandidates, StoreError> {
        let searcher = self.index.searcher()?;
        let fields = self.index.rows().fields;
        let statistics = TermStatistics {
            documents,
            total_terms,
            document_frequency: live_document_frequencies(&searcher, fields.body, terms)?,
        };
        let agent = agent.as_uuid().simple().to_string();
        let range = (
            query.range.start.map_or(i64::MIN, micros),
            query.range.end.map_or(i64::MAX, micros),
        );
        let keys = pruned_top(&searcher, fields.body, terms, limit, |segment| {
            Ok(SegmentFilter::new(segment, &agent, query, range)?
                .map(|filter| move |doc| filter.admits(doc)))
        })?;
        Ok(TextCandidates { keys, statistics })
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
        let Some((agent_column, agent_ords)) = term_ords(segment, "agent", [agent])? else {
            return Ok(None);
        };
        let kind = if query.kinds.is_empty() {
            None
        } else {
            let kinds = query.kinds.iter().map(|k| k.as_str());
            let Some(kinds) = term_ords(segment, "kind", kinds)? else {
                return Ok(None);
            };
            Some(kinds)
        };
        let time = if (start, end) == (i64::MIN, i64::MAX) {
            None
        } else {
            Some((fast.i64("time").map_err(reading)?, start, end))
        };
        Ok(Some(Self {
            seq: fast.u64("seq").map_err(reading)?,
            agent: agent_column,
            agent_ord: agent_ords[0],
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
