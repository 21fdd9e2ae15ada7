//! A tantivy (BM25) full-text index of archival storage, derived from SQLite's passages, as
//! recall's is from its messages (`tantivy_recall`; what both share is `tantivy_index`).
//!
//! The index stores, per passage, its sequence number, agent, creation time, tags and analysed
//! terms. It picks the text candidates of archival search with block-max WAND, the agent, time
//! and tag filters checked on fast fields as documents come; facts retired before the query's
//! instant (a lifetime can change after a passage is indexed) are read from SQLite and left
//! out the same way. Its watermark records the highest passage indexed and the highest row of
//! `passage_deletions` replayed: before every search the index catches up with both, so a
//! crash between SQLite's commit and the index's is repaired on the next search or open, and
//! the index can be deleted at any time to be rebuilt.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use memgpt_core::ids::AgentId;
use memgpt_core::retrieval::document_terms;
use memgpt_core::store::{ArchivalQuery, StoreError};
use sqlx::{Row, SqlitePool};
use tantivy::columnar::Column;
use tantivy::schema::{FAST, Field, INDEXED, STRING, Schema};
use tantivy::{DocId, SegmentReader, TantivyDocument, Term};
use tracing::debug;

use super::tantivy_index::{
    BATCH, DerivedIndex, Newest, Watermark, count_matches, pruned_top, tantivy_error, term_ords,
    terms_options,
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

fn schema() -> (Schema, Fields) {
    let mut builder = Schema::builder();
    let fields = Fields {
        seq: builder.add_u64_field("seq", FAST | INDEXED),
        agent: builder.add_text_field("agent", STRING | FAST),
        time: builder.add_i64_field("time", FAST),
        tags: builder.add_text_field("tags", STRING | FAST),
        body: builder.add_text_field("terms", terms_options()),
    };
    (builder.build(), fields)
}

/// A tantivy archival index next to an SQLite database (see the module documentation).
pub(crate) struct TantivyArchival {
    index: Arc<DerivedIndex>,
    fields: Fields,
    /// Serialises catch-ups; holds the watermark.
    watermark: tokio::sync::Mutex<Watermark>,
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
        let (schema, fields) = schema();
        let (index, watermark) = DerivedIndex::open(path, &schema, "the archival text index")?;
        let archival = Self {
            index: Arc::new(index),
            fields,
            watermark: tokio::sync::Mutex::new(watermark),
        };
        archival.catch_up(pool).await?;
        Ok(archival)
    }

    /// Indexes every passage stored after the watermark and replays the deletions after it
    /// (rebuilding from scratch when the database's generation or the analyzer changed).
    pub(crate) async fn catch_up(&self, pool: &SqlitePool) -> Result<(), StoreError> {
        let mut watermark = self.watermark.lock().await;
        let newest = Newest::read(pool, Newest::PASSAGES).await?;
        if newest.indexed_by(&watermark) {
            return Ok(());
        }
        let generation = newest.generation;
        let mut clear = false;
        if let Some(restart) = watermark.restart(generation, "the archival text index") {
            // Deletions before the rebuild are in the rows already (the deleted are gone).
            let deletion: Option<i64> =
                sqlx::query_scalar("SELECT max(seq) FROM passage_deletions")
                    .fetch_one(pool)
                    .await
                    .map_err(|e| db("reading passage deletions", e))?;
            *watermark = Watermark {
                deletion: deletion.unwrap_or(0),
                ..restart
            };
            clear = true;
        }
        loop {
            let rows = sqlx::query(
                "SELECT p.seq, p.agent_id, p.text, p.created_at, \
                 (SELECT group_concat(t.tag, char(31)) FROM passage_tags t WHERE t.passage_seq = p.seq) AS tags \
                 FROM passages p WHERE p.seq > ? ORDER BY p.seq LIMIT ?",
            )
            .bind(watermark.seq)
            .bind(BATCH)
            .fetch_all(pool)
            .await
            .map_err(|e| db("reading passages to index", e))?;
            let deletions: Vec<(i64, i64)> = sqlx::query_as(
                "SELECT seq, passage_seq FROM passage_deletions WHERE seq > ? ORDER BY seq LIMIT ?",
            )
            .bind(watermark.deletion)
            .bind(BATCH)
            .fetch_all(pool)
            .await
            .map_err(|e| db("reading passage deletions", e))?;
            if rows.is_empty() && deletions.is_empty() && !clear {
                return Ok(());
            }
            let mut next = watermark.clone();
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
            let (batch, deleted) = (rows.len(), deletions.len());
            self.index
                .commit_in_background(docs, deletes, &next, clear, "indexing passages")
                .await?;
            debug!(
                batch,
                deleted,
                seq = next.seq,
                "archival text index caught up"
            );
            *watermark = next;
            clear = false;
            if (batch as i64) < BATCH && (deleted as i64) < BATCH {
                return Ok(());
            }
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
        let searcher = self.index.searcher();
        let agent = agent.as_uuid().simple().to_string();
        pruned_top(&searcher, self.fields.body, terms, limit, |segment| {
            Ok(SegmentFilter::new(segment, &agent, query, excluded)?
                .map(|filter| move |doc| filter.admits(doc)))
        })
    }

    /// How many passages (all agents') hold each of `terms`: the index's document frequencies,
    /// exact: in a segment holding deleted documents (until a merge drops them) the term's
    /// live documents are counted.
    pub(crate) fn document_frequencies(&self, terms: &[String]) -> Result<Vec<u64>, StoreError> {
        let searcher = self.index.searcher();
        let reading = |e| tantivy_error("reading the archival index", e);
        let io = |e: std::io::Error| db("reading the archival index", e);
        let mut frequencies = vec![0u64; terms.len()];
        for segment in searcher.segment_readers() {
            let index = segment.inverted_index(self.fields.body).map_err(reading)?;
            let alive = segment.alive_bitset();
            for (text, frequency) in terms.iter().zip(&mut frequencies) {
                let term = Term::from_field_text(self.fields.body, text);
                let Some(info) = index.get_term_info(&term).map_err(io)? else {
                    continue;
                };
                let Some(alive) = alive else {
                    *frequency += u64::from(info.doc_freq);
                    continue;
                };
                let mut postings = index
                    .read_postings_from_terminfo(&info, tantivy::schema::IndexRecordOption::Basic)
                    .map_err(io)?;
                let mut doc = tantivy::DocSet::doc(&postings);
                while doc != tantivy::TERMINATED {
                    if alive.is_alive(doc) {
                        *frequency += 1;
                    }
                    doc = tantivy::DocSet::advance(&mut postings);
                }
            }
        }
        Ok(frequencies)
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
        let searcher = self.index.searcher();
        let agent = agent.as_uuid().simple().to_string();
        count_matches(&searcher, self.fields.body, terms, |segment| {
            Ok(SegmentFilter::new(segment, &agent, query, excluded)?
                .map(|filter| move |doc| filter.admits(doc)))
        })
    }

    /// Forgets an agent's passages after the database deleted them at `generation`. Deleting
    /// an agent also deletes its rows of `passage_deletions`, whose numbers SQLite may then give
    /// again: the deletions not replayed yet are replayed now, and the watermark moves to the
    /// last row there is.
    pub(crate) async fn forget_agent(
        &self,
        pool: &SqlitePool,
        agent: AgentId,
        generation: i64,
    ) -> Result<(), StoreError> {
        let mut watermark = self.watermark.lock().await;
        let deletions: Vec<(i64, i64)> = sqlx::query_as(
            "SELECT seq, passage_seq FROM passage_deletions WHERE seq > ? ORDER BY seq",
        )
        .bind(watermark.deletion)
        .fetch_all(pool)
        .await
        .map_err(|e| db("reading passage deletions", e))?;
        let last: Option<i64> = sqlx::query_scalar("SELECT max(seq) FROM passage_deletions")
            .fetch_one(pool)
            .await
            .map_err(|e| db("reading passage deletions", e))?;
        let mut deletes: Vec<Term> = deletions
            .iter()
            .map(|(_, passage)| Term::from_field_u64(self.fields.seq, *passage as u64))
            .collect();
        deletes.push(Term::from_field_text(
            self.fields.agent,
            &agent.as_uuid().simple().to_string(),
        ));
        let next = Watermark {
            generation,
            deletion: last.unwrap_or(0),
            ..watermark.clone()
        };
        self.index
            .commit_in_background(Vec::new(), deletes, &next, false, "forgetting an agent")
            .await?;
        *watermark = next;
        Ok(())
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
        let tags = if query.tags.is_empty() {
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
