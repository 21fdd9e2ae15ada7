//! A tantivy (BM25) full-text index of archival storage, derived from SQLite's passages, as
//! recall's is from its messages (`tantivy_recall`; what both share is `tantivy_index`).
//!
//! The index stores, per passage, its sequence number, agent, creation time, tags and analysed
//! terms. It picks the text candidates of archival search with block-max WAND, the agent, time
//! and tag filters checked on fast fields as documents come; facts retired before the query's
//! instant (a lifetime can change after a passage is indexed) are read from SQLite and left
//! out the same way. It is a [`DerivedIndex`] of the passages and of the rows of
//! `passage_deletions` (`tantivy_index`): before every search it catches up with both, so a
//! crash between SQLite's commit and the index's is repaired on the next search or open, and the
//! index can be deleted at any time to be rebuilt.

use std::collections::HashSet;
use std::path::Path;

use memgpt_core::ids::AgentId;
use memgpt_core::retrieval::document_terms;
use memgpt_core::store::{ArchivalQuery, StoreError};
use sqlx::{Row, SqlitePool};
use tantivy::columnar::Column;
use tantivy::schema::{FAST, Field, INDEXED, STRING, Schema};
use tantivy::{DocId, SegmentReader, TantivyDocument, Term};

use super::tantivy_index::{BATCH, DerivedIndex, IndexedRows, RowBatch, Watermark};
use super::tantivy_search::{
    count_matches, live_document_frequencies, pruned_top, tantivy_error, term_ords, terms_options,
};
use crate::codec::{db, micros};

/// Separates a passage's tags in the catch-up query (a tag never holds it).
const TAG_SEPARATOR: char = '\u{1f}';

#[derive(Clone, Copy, Debug)]
struct Fields {
    seq: Field,
    agent: Field,
    time: Field,
    tags: Field,
    body: Field,
}

/// The passages and their deletions, as the archival text index sees them.
pub(super) struct PassageRows {
    schema: Schema,
    fields: Fields,
}

impl PassageRows {
    fn new() -> Self {
        let mut builder = Schema::builder();
        let fields = Fields {
            seq: builder.add_u64_field("seq", FAST | INDEXED),
            agent: builder.add_text_field("agent", STRING | FAST),
            time: builder.add_i64_field("time", FAST),
            tags: builder.add_text_field("tags", STRING | FAST),
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
        let get = |e: sqlx::Error| db("reading passages to index", e);
        let seq: i64 = row.try_get("seq").map_err(get)?;
        let agent: uuid::Uuid = row.try_get("agent_id").map_err(get)?;
        let text: String = row.try_get("text").map_err(get)?;
        let time: i64 = row.try_get("created_at").map_err(get)?;
        let tags: Option<String> = row.try_get("tags").map_err(get)?;
        let f = self.fields;
        let mut doc = TantivyDocument::default();
        doc.add_u64(f.seq, seq as u64);
        doc.add_text(f.agent, agent.simple().to_string());
        doc.add_i64(f.time, time);
        for tag in tags.iter().flat_map(|t| t.split(TAG_SEPARATOR)) {
            doc.add_text(f.tags, tag);
        }
        doc.add_text(f.body, document_terms(&text).join(" "));
        Ok((seq, doc))
    }
}

impl IndexedRows for PassageRows {
    const WHAT: &'static str = "the archival text index";
    const NEWEST: &'static str = "SELECT (SELECT value FROM memgpt_meta WHERE key = 'generation'), \
         (SELECT max(seq) FROM passages), (SELECT max(seq) FROM passage_deletions), \
         (SELECT seq FROM sqlite_sequence WHERE name = 'passages'), \
         (SELECT seq FROM sqlite_sequence WHERE name = 'passage_deletions')";

    fn schema(&self) -> Schema {
        self.schema.clone()
    }

    async fn read_after(
        &self,
        pool: &SqlitePool,
        from: &Watermark,
    ) -> Result<RowBatch, StoreError> {
        let rows = sqlx::query(
            "SELECT p.seq, p.agent_id, p.text, p.created_at, \
             (SELECT group_concat(t.tag, char(31)) FROM passage_tags t WHERE t.passage_seq = p.seq) AS tags \
             FROM passages p WHERE p.seq > ? ORDER BY p.seq LIMIT ?",
        )
        .bind(from.seq)
        .bind(BATCH)
        .fetch_all(pool)
        .await
        .map_err(|e| db("reading passages to index", e))?;
        let deletions: Vec<(i64, i64)> = sqlx::query_as(
            "SELECT seq, passage_seq FROM passage_deletions WHERE seq > ? ORDER BY seq LIMIT ?",
        )
        .bind(from.deletion)
        .bind(BATCH)
        .fetch_all(pool)
        .await
        .map_err(|e| db("reading passage deletions", e))?;
        let mut next = from.clone();
        let mut docs = Vec::with_capacity(rows.len());
        for row in &rows {
            let (seq, doc) = self.document(row)?;
            next.seq = seq;
            docs.push(doc);
        }
        let mut deletes = Vec::with_capacity(deletions.len());
        for (seq, passage) in &deletions {
            next.deletion = *seq;
            deletes.push(Term::from_field_u64(self.fields.seq, *passage as u64));
        }
        Ok(RowBatch {
            full: rows.len() as i64 >= BATCH || deletions.len() as i64 >= BATCH,
            docs,
            deletes,
            next,
        })
    }

    fn agent_term(&self, agent: AgentId) -> Term {
        Term::from_field_text(self.fields.agent, &agent.as_uuid().simple().to_string())
    }
}

/// A tantivy archival index next to an SQLite database (see the module documentation).
pub(crate) struct TantivyArchival {
    /// The index: catch-up, forgetting an agent and counting are the derived index's own.
    pub(super) index: DerivedIndex<PassageRows>,
}

impl std::fmt::Debug for TantivyArchival {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TantivyArchival").finish_non_exhaustive()
    }
}

impl TantivyArchival {
    /// Opens (or creates, or rebuilds if unreadable) the index in `path` and catches it up with
    /// the database.
    pub(crate) async fn open(path: &Path, pool: &SqlitePool) -> Result<Self, StoreError> {
        Ok(Self {
            index: DerivedIndex::open(path, PassageRows::new(), pool).await?,
        })
    }

    /// Up to `limit` of the agent's passages that `query`'s filters admit (and that are not
    /// `excluded`) holding any of `terms`, best first by tantivy's BM25.
    pub(crate) fn candidates(
        &self,
        agent: AgentId,
        terms: &[String],
        query: &ArchivalQuery,
        excluded: &HashSet<i64>,
        limit: usize,
    ) -> Result<Vec<i64>, StoreError> {
        let searcher = self.index.searcher()?;
        let agent = agent.as_uuid().simple().to_string();
        pruned_top(
            &searcher,
            self.index.rows().fields.body,
            terms,
            limit,
            |segment| {
                Ok(SegmentFilter::new(segment, &agent, query, excluded)?
                    .map(|filter| move |doc| filter.admits(doc)))
            },
        )
    }

    /// How many passages (all agents') hold each of `terms`: the index's live document
    /// frequencies.
    pub(crate) fn document_frequencies(&self, terms: &[String]) -> Result<Vec<u64>, StoreError> {
        let searcher = self.index.searcher()?;
        live_document_frequencies(&searcher, self.index.rows().fields.body, terms)
    }

    /// How many of the agent's passages that `query`'s filters admit (and that are not
    /// `excluded`) hold any of `terms`.
    pub(crate) fn count(
        &self,
        agent: AgentId,
        terms: &[String],
        query: &ArchivalQuery,
        excluded: &HashSet<i64>,
    ) -> Result<u64, StoreError> {
        let searcher = self.index.searcher()?;
        let agent = agent.as_uuid().simple().to_string();
        count_matches(&searcher, self.index.rows().fields.body, terms, |segment| {
            Ok(SegmentFilter::new(segment, &agent, query, excluded)?
                .map(|filter| move |doc| filter.admits(doc)))
        })
    }
}

/// A search's filters in one segment, read from its fast fields.
struct SegmentFilter<'a> {
    seq: Column<u64>,
    agent: Column<u64>,
    agent_ord: u64,
    /// The admitted creation times, `[start, end)` in microseconds (`None`: any time).
    time: Option<(Column<i64>, i64, i64)>,
    /// The term ordinals of the admitted tags (`None`: any passage).
    tags: Option<(Column<u64>, Vec<u64>)>,
    excluded: &'a HashSet<i64>,
}

impl<'a> SegmentFilter<'a> {
    /// The filter of `query` for `agent` in `segment`; `None` when no document of the segment
    /// can pass it.
    fn new(
        segment: &SegmentReader,
        agent: &str,
        query: &ArchivalQuery,
        excluded: &'a HashSet<i64>,
    ) -> Result<Option<Self>, StoreError> {
        let fast = segment.fast_fields();
        let reading = |e: tantivy::TantivyError| tantivy_error("reading the archival index", e);
        let Some((agent_column, agent_ords)) = term_ords(segment, "agent", [agent])? else {
            return Ok(None);
        };
        let (start, end) = (
            query.range.start.map_or(i64::MIN, micros),
            query.range.end.map_or(i64::MAX, micros),
        );
        let time = if (start, end) == (i64::MIN, i64::MAX) {
            None
        } else {
            Some((fast.i64("time").map_err(reading)?, start, end))
        };
        let tags = if query.tags.is_empty()
            || memgpt_core::failpoint::fault("fault.tantivy.archival_tags_ignored")
        {
            None
        } else {
            let Some(tags) = term_ords(segment, "tags", query.tags.iter().map(String::as_str))?
            else {
                return Ok(None);
            };
            Some(tags)
        };
        Ok(Some(Self {
            seq: fast.u64("seq").map_err(reading)?,
            agent: agent_column,
            agent_ord: agent_ords[0],
            time,
            tags,
            excluded,
        }))
    }

    /// The document's passage sequence number if it passes the filter.
    fn admits(&self, doc: DocId) -> Option<i64> {
        if self.agent.first(doc) != Some(self.agent_ord) {
            return None;
        }
        if let Some((column, start, end)) = &self.time
            && !column.first(doc).is_some_and(|t| *start <= t && t < *end)
        {
            return None;
        }
        if let Some((column, ords)) = &self.tags
            && !column.values_for_doc(doc).any(|ord| ords.contains(&ord))
        {
            return None;
        }
        let seq = self.seq.first(doc)? as i64;
        (!self.excluded.contains(&seq)).then_some(seq)
    }
}
